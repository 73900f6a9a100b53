/* torx MPI test: MPI point-to-point semantics, checked precisely at every
 * protocol size class (0 B, 1 B, 200 B one-packet, 3000 B eager, 100 KiB
 * rendezvous, 4 MiB).
 *
 * Sections (each named in every failure message):
 *   send/recv   every send mode (Send, Isend, Ssend, Issend, Bsend, Ibsend,
 *               Rsend, Irsend) x expected/unexpected arrival x receive kind
 *               (Recv, Irecv+Wait, Irecv+Test loop) x ANY_SOURCE/ANY_TAG;
 *               status (MPI_SOURCE, MPI_TAG, MPI_Get_count), every byte, and
 *               a guard region after the receive buffer
 *   ssend       Issend stays incomplete (MPI_Test for 50 ms) while the
 *               message sits unexpected at the receiver; blocking Ssend lasts
 *               as long as the receiver delays its receive
 *   order       many messages with one tag match in order (posted, unexpected)
 *   skip        a receive with a specific tag skips earlier other-tag messages
 *   probe       Probe/Iprobe/Mprobe/Improbe + Recv/Mrecv/Imrecv: probed count,
 *               and an mprobed message is out of matching (a later matching
 *               message goes to the next receive)
 *   cancel      cancel of a posted receive (Test_cancelled true, buffer
 *               untouched, the next message still arrives); cancel after
 *               completion (Test_cancelled false)
 *   proc_null   MPI_PROC_NULL sends, receives, probes, mprobe, sendrecv
 *   truncate    MPI_ERR_TRUNCATE (MPI_ERRORS_RETURN) for expected,
 *               unexpected and mprobed messages, MPI_ERR_IN_STATUS from
 *               Waitall; the guard after the short buffer stays untouched
 *   datatype    vector and indexed types with holes on both sides, zero
 *               counts, partial messages (Get_count MPI_UNDEFINED,
 *               Get_elements); holes in the receive buffer stay untouched
 *   persistent  Send/Ssend/Bsend/Rsend_init + Recv_init, Start, Startall
 *   replace     MPI_Sendrecv_replace around the ring, bytes and a vector type
 *   self        messages to oneself on COMM_WORLD and COMM_SELF
 *   comm        Comm_dup isolation, Comm_split (rank translation with
 *               ANY_SOURCE), an intercommunicator with ANY_SOURCE/ANY_TAG
 *
 * Pair tests run between ranks 2k and 2k+1 (an odd last rank idles in them);
 * the ring, self and communicator tests use every rank. Works with any
 * number of ranks >= 2. All calls run with MPI_ERRORS_RETURN and every
 * return code is checked. A watchdog (alarm, P2PS_TIMEOUT seconds, default
 * 100) names the check a rank is stuck in. P2PS_VERBOSE=1 prints each check.
 * Rank 0 prints " No Errors" on success; the exit status is non-zero on
 * failure. */
#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXN (4 << 20)
#define GUARD 256
#define NSIZES 6
#define WAIT_LIMIT 30.0 /* seconds a polling loop waits before it reports */

static const int sizes[NSIZES] = {0, 1, 200, 3000, 100 * 1024, 4 << 20};
static const char *const size_names[NSIZES] = {"0 B", "1 B", "200 B", "3000 B", "100 KiB", "4 MiB"};

static int rank, nprocs, peer; /* peer: rank ^ 1, or -1 for an odd last rank */
static MPI_Comm ctrl;          /* a dup of COMM_WORLD for the test's own signals */
static long errs;
static int verbose;
static char check[300];
static unsigned char *sbuf, *sbuf2, *rbuf, *rbuf2;
static MPI_Status ignored[2]; /* not MPI_STATUSES_IGNORE: gcc warns wrongly about it */

/* ---- reporting ------------------------------------------------------------------- */

static void begin(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(check, sizeof check, fmt, ap);
    va_end(ap);
    if (verbose) {
        printf("p2p_semantics: rank %d: %s\n", rank, check);
        fflush(stdout);
    }
}

static void fail(const char *fmt, ...)
{
    va_list ap;
    char msg[1500];
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printf("p2p_semantics: rank %d: FAIL [%s]: %s\n", rank, check, msg);
    fflush(stdout);
    errs++;
}

static void watchdog(int sig)
{
    (void)sig;
    char msg[600];
    int len = snprintf(msg, sizeof msg,
                       "p2p_semantics: rank %d: TIMEOUT: still in check [%s] after the "
                       "watchdog's limit (P2PS_TIMEOUT); exiting\n",
                       rank, check);
    if (len > 0)
        (void)!write(1, msg, (size_t)len < sizeof msg ? (size_t)len : sizeof msg - 1);
    _exit(3);
}

#define OK(call) ok_rc((call), #call, __LINE__)

static int ok_rc(int rc, const char *what, int line)
{
    if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, s, &len);
        fail("%s (line %d) returned %d: %s", what, line, rc, s);
    }
    return rc == MPI_SUCCESS;
}

/* ---- data ------------------------------------------------------------------------ */

static unsigned char pat(unsigned seed, size_t i)
{
    return (unsigned char)(seed * 151u + (unsigned)i * 7u + (unsigned)(i >> 8) * 3u +
                           (unsigned)(i >> 16) + 1u);
}

static void fill(unsigned char *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = pat(seed, i);
}

/* A receive buffer of n bytes: every byte differs from what the message with
 * this seed puts there, then GUARD bytes of 0xA5. */
static void poison(unsigned char *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)~pat(seed, i);
    memset(b + n, 0xA5, GUARD);
}

static int check_guard(const unsigned char *b, size_t n, const char *what)
{
    for (size_t i = 0; i < GUARD; i++)
        if (b[n + i] != 0xA5) {
            fail("%s: guard byte %zu after the %zu-byte receive buffer was overwritten (0x%02x)",
                 what, i, n, b[n + i]);
            return 0;
        }
    return 1;
}

static int check_bytes(const unsigned char *b, size_t n, unsigned seed, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != pat(seed, i)) {
            fail("%s: byte %zu of %zu is 0x%02x, expected 0x%02x%s", what, i, n, b[i], pat(seed, i),
                 b[i] == (unsigned char)~pat(seed, i) ? " (never written)" : "");
            return 0;
        }
    return 1;
}

/* The message's bytes, then the guard after them untouched. */
static int check_data(const unsigned char *b, size_t n, unsigned seed, const char *what)
{
    return check_bytes(b, n, seed, what) && check_guard(b, n, what);
}

/* Untouched: still the poison of seed. */
static int check_untouched(const unsigned char *b, size_t n, unsigned seed, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != (unsigned char)~pat(seed, i)) {
            fail("%s: byte %zu of the %zu-byte buffer was written (0x%02x)", what, i, n, b[i]);
            return 0;
        }
    return check_guard(b, n, what);
}

static int check_status(const MPI_Status *st, int src, int tag, int nbytes, const char *what)
{
    int count = -1;
    MPI_Get_count(st, MPI_BYTE, &count);
    if (st->MPI_SOURCE != src || st->MPI_TAG != tag || count != nbytes) {
        fail("%s: status has MPI_SOURCE %d, MPI_TAG %d, count %d; expected %d, %d, %d", what,
             st->MPI_SOURCE, st->MPI_TAG, count, src, tag, nbytes);
        return 0;
    }
    return 1;
}

static void expect_truncate(int rc, const char *what)
{
    int cls = -1;
    if (rc == MPI_SUCCESS) {
        fail("%s returned MPI_SUCCESS, expected the error class MPI_ERR_TRUNCATE", what);
        return;
    }
    MPI_Error_class(rc, &cls);
    if (cls != MPI_ERR_TRUNCATE) {
        char s[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, s, &len);
        fail("%s returned error class %d, expected MPI_ERR_TRUNCATE (%d): %s", what, cls,
             MPI_ERR_TRUNCATE, s);
    }
}

/* ---- signals between the two ranks of a pair (on ctrl) ------------------------------ */

static void ctrl_send(int to, int tag)
{
    OK(MPI_Send(NULL, 0, MPI_BYTE, to, tag, ctrl));
}

static void ctrl_recv(int from, int tag)
{
    OK(MPI_Recv(NULL, 0, MPI_BYTE, from, tag, ctrl, MPI_STATUS_IGNORE));
}

/* Polls MPI_Iprobe until the message (src, tag) is at this rank: after this,
 * a receive finds it in the unexpected queue. */
static int wait_arrival(int src, int tag, MPI_Comm comm, MPI_Status *st)
{
    double t0 = MPI_Wtime();
    int flag = 0;
    while (!flag) {
        if (!OK(MPI_Iprobe(src, tag, comm, &flag, st)))
            return 0;
        if (!flag && MPI_Wtime() - t0 > WAIT_LIMIT) {
            fail("the message (source %d, tag %d) did not arrive: MPI_Iprobe did not see it in "
                 "%.0f s",
                 src, tag, WAIT_LIMIT);
            return 0;
        }
    }
    return 1;
}

/* MPI_Test until complete. */
static int test_loop(MPI_Request *req, MPI_Status *st)
{
    double t0 = MPI_Wtime();
    int flag = 0;
    while (!flag) {
        if (!OK(MPI_Test(req, &flag, st)))
            return 0;
        if (!flag && MPI_Wtime() - t0 > WAIT_LIMIT) {
            fail("MPI_Test did not complete the request in %.0f s", WAIT_LIMIT);
            OK(MPI_Wait(req, st));
            return 0;
        }
    }
    return 1;
}

static void section_end(void)
{
    begin("barrier after the section");
    OK(MPI_Barrier(MPI_COMM_WORLD));
}

/* ---- send/recv matrix ------------------------------------------------------------- */

enum { K_SEND, K_ISEND, K_SSEND, K_ISSEND, K_BSEND, K_IBSEND, K_RSEND, K_IRSEND, K_N };
static const char *const kind_names[K_N] = {"MPI_Send",  "MPI_Isend",  "MPI_Ssend", "MPI_Issend",
                                            "MPI_Bsend", "MPI_Ibsend", "MPI_Rsend", "MPI_Irsend"};
enum { R_RECV, R_IRECV_WAIT, R_IRECV_TEST };
static const char *const rkind_names[] = {"MPI_Recv", "MPI_Irecv+MPI_Wait",
                                          "MPI_Irecv+MPI_Test loop"};
static const char *const match_names[] = {"specific source and tag", "MPI_ANY_SOURCE",
                                          "MPI_ANY_TAG", "MPI_ANY_SOURCE and MPI_ANY_TAG"};

static int start_send(int kind, const void *b, int n, int dest, int tag, MPI_Comm comm,
                      MPI_Request *req)
{
    *req = MPI_REQUEST_NULL;
    switch (kind) {
    case K_SEND:
        return MPI_Send(b, n, MPI_BYTE, dest, tag, comm);
    case K_ISEND:
        return MPI_Isend(b, n, MPI_BYTE, dest, tag, comm, req);
    case K_SSEND:
        return MPI_Ssend(b, n, MPI_BYTE, dest, tag, comm);
    case K_ISSEND:
        return MPI_Issend(b, n, MPI_BYTE, dest, tag, comm, req);
    case K_BSEND:
        return MPI_Bsend(b, n, MPI_BYTE, dest, tag, comm);
    case K_IBSEND:
        return MPI_Ibsend(b, n, MPI_BYTE, dest, tag, comm, req);
    case K_RSEND:
        return MPI_Rsend(b, n, MPI_BYTE, dest, tag, comm);
    default:
        return MPI_Irsend(b, n, MPI_BYTE, dest, tag, comm, req);
    }
}

static void test_sendrecv(void)
{
    int idx = 0;
    for (int dir = 0; dir < 2; dir++)
        for (int s = 0; s < NSIZES; s++)
            for (int unexp = 0; unexp < 2; unexp++)
                for (int kind = 0; kind < K_N; kind++) {
                    const int ready = kind == K_RSEND || kind == K_IRSEND;
                    if (unexp && ready)
                        continue; /* a ready send needs the receive posted */
                    const int n = sizes[s], tag = 1000 + idx, match = (idx / 3) % 4;
                    const unsigned seed = (unsigned)idx;
                    int rkind = idx % 3;
                    idx++;
                    if (ready && rkind == R_RECV)
                        rkind = R_IRECV_WAIT;
                    begin("send/recv: %s of %s, %s, %s, %s", kind_names[kind], size_names[s],
                          unexp ? "unexpected (arrived before the receive)"
                                : "expected (receive posted first)",
                          rkind_names[rkind], match_names[match]);
                    if (peer < 0)
                        continue;
                    if (rank % 2 == dir) { /* sender */
                        MPI_Request req;
                        fill(sbuf, n, seed);
                        if (!unexp)
                            ctrl_recv(peer, 1);
                        OK(start_send(kind, sbuf, n, peer, tag, MPI_COMM_WORLD, &req));
                        OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
                    } else {
                        const int src = match & 1 ? MPI_ANY_SOURCE : peer;
                        const int rtag = match & 2 ? MPI_ANY_TAG : tag;
                        MPI_Request req = MPI_REQUEST_NULL;
                        MPI_Status st, pst;
                        poison(rbuf, n, seed);
                        if (!unexp) {
                            if (rkind != R_RECV)
                                OK(MPI_Irecv(rbuf, n, MPI_BYTE, src, rtag, MPI_COMM_WORLD, &req));
                            /* with MPI_Recv the receive is most probably, not surely,
                             * posted before the message arrives */
                            ctrl_send(peer, 1);
                        } else if (wait_arrival(peer, tag, MPI_COMM_WORLD, &pst)) {
                            check_status(&pst, peer, tag, n, "MPI_Iprobe of the arrived message");
                        }
                        if (rkind == R_RECV)
                            OK(MPI_Recv(rbuf, n, MPI_BYTE, src, rtag, MPI_COMM_WORLD, &st));
                        else if (unexp)
                            OK(MPI_Irecv(rbuf, n, MPI_BYTE, src, rtag, MPI_COMM_WORLD, &req));
                        if (rkind == R_IRECV_WAIT)
                            OK(MPI_Wait(&req, &st));
                        else if (rkind == R_IRECV_TEST)
                            test_loop(&req, &st);
                        check_status(&st, peer, tag, n, "receive status");
                        check_data(rbuf, n, seed, "received data");
                    }
                }
    section_end();
}

/* ---- synchronous send ------------------------------------------------------------ */

static void test_ssend(void)
{
    for (int dir = 0; dir < 2; dir++)
        for (int s = 0; s < NSIZES; s++) {
            const int n = sizes[s], tag = 3000 + 2 * (dir * NSIZES + s), tag2 = tag + 1;
            const unsigned seed = 300u + (unsigned)tag;
            if (peer < 0)
                continue;
            MPI_Status st;
            if (rank % 2 == dir) {
                begin("ssend: MPI_Issend of %s must stay incomplete while the message waits "
                      "unexpected at the receiver",
                      size_names[s]);
                MPI_Request req;
                int flag = 0;
                fill(sbuf, n, seed);
                OK(MPI_Issend(sbuf, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req));
                ctrl_recv(peer, 2); /* the receiver sees the message, has no receive */
                double t0 = MPI_Wtime();
                while (MPI_Wtime() - t0 < 0.05) {
                    if (!OK(MPI_Test(&req, &flag, &st)))
                        break;
                    if (flag) {
                        fail("MPI_Issend of %d bytes completed (MPI_Test) before the receiver "
                             "posted a matching receive",
                             n);
                        break;
                    }
                }
                ctrl_send(peer, 3); /* now post it */
                OK(MPI_Wait(&req, &st));

                begin("ssend: blocking MPI_Ssend of %s must last until the receive is posted "
                      "(100 ms after arrival)",
                      size_names[s]);
                fill(sbuf, n, seed + 1);
                t0 = MPI_Wtime();
                OK(MPI_Ssend(sbuf, n, MPI_BYTE, peer, tag2, MPI_COMM_WORLD));
                const double dt = MPI_Wtime() - t0;
                if (dt < 0.09)
                    fail("MPI_Ssend of %d bytes returned after %.1f ms, but the receiver posted "
                         "its receive 100 ms after the message arrived",
                         n, dt * 1e3);
            } else {
                begin("ssend: receiving the MPI_Issend of %s after a delay", size_names[s]);
                if (wait_arrival(peer, tag, MPI_COMM_WORLD, &st))
                    check_status(&st, peer, tag, n, "MPI_Iprobe of the Issend message");
                ctrl_send(peer, 2);
                ctrl_recv(peer, 3);
                poison(rbuf, n, seed);
                OK(MPI_Recv(rbuf, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st));
                check_status(&st, peer, tag, n, "MPI_Recv of the Issend message");
                check_data(rbuf, n, seed, "MPI_Recv of the Issend message");

                begin("ssend: receiving the MPI_Ssend of %s 100 ms after it arrived",
                      size_names[s]);
                wait_arrival(peer, tag2, MPI_COMM_WORLD, &st);
                usleep(100000);
                poison(rbuf, n, seed + 1);
                OK(MPI_Recv(rbuf, n, MPI_BYTE, peer, tag2, MPI_COMM_WORLD, &st));
                check_status(&st, peer, tag2, n, "MPI_Recv of the Ssend message");
                check_data(rbuf, n, seed + 1, "MPI_Recv of the Ssend message");
            }
        }
    section_end();
}

/* ---- matching order --------------------------------------------------------------- */

#define NORDER 14

static void test_order(void)
{
    size_t off[NORDER + 1];
    off[0] = 0;
    for (int k = 0; k < NORDER; k++)
        off[k + 1] = off[k] + (size_t)sizes[k % NSIZES] + GUARD;
    unsigned char *arena = malloc(off[NORDER]);
    for (int v = 0; v < 4; v++) {
        const int unexp = v & 1, dir = v >> 1, tag = 4000 + v;
        begin("order: %d messages of every size with one tag, %s, must match in send order", NORDER,
              unexp ? "unexpected" : "receives posted first");
        if (peer < 0)
            continue;
        MPI_Request req[NORDER];
        MPI_Status st[NORDER];
        if (rank % 2 == dir) {
            for (int k = 0; k < NORDER; k++)
                fill(arena + off[k], (size_t)sizes[k % NSIZES], 400u + 16u * v + k);
            if (!unexp)
                ctrl_recv(peer, 4);
            for (int k = 0; k < NORDER; k++)
                OK(MPI_Isend(arena + off[k], sizes[k % NSIZES], MPI_BYTE, peer, tag, MPI_COMM_WORLD,
                             &req[k]));
            if (unexp) /* a marker behind them */
                OK(MPI_Send(NULL, 0, MPI_BYTE, peer, tag + 100, MPI_COMM_WORLD));
            for (int k = 0; k < NORDER; k++)
                OK(MPI_Wait(&req[k], MPI_STATUS_IGNORE));
        } else {
            for (int k = 0; k < NORDER; k++)
                poison(arena + off[k], (size_t)sizes[k % NSIZES], 400u + 16u * v + k);
            if (unexp)
                wait_arrival(peer, tag + 100, MPI_COMM_WORLD, &st[0]);
            for (int k = 0; k < NORDER; k++)
                OK(MPI_Irecv(arena + off[k], sizes[k % NSIZES], MPI_BYTE,
                             k % 2 ? MPI_ANY_SOURCE : peer, tag, MPI_COMM_WORLD, &req[k]));
            if (!unexp)
                ctrl_send(peer, 4);
            for (int k = 0; k < NORDER; k++) {
                char what[80];
                snprintf(what, sizeof what, "receive %d of %d (%s)", k, NORDER,
                         size_names[k % NSIZES]);
                if (OK(MPI_Wait(&req[k], &st[k])) &&
                    check_status(&st[k], peer, tag, sizes[k % NSIZES], what))
                    check_data(arena + off[k], (size_t)sizes[k % NSIZES], 400u + 16u * v + k, what);
            }
            if (unexp)
                OK(MPI_Recv(NULL, 0, MPI_BYTE, peer, tag + 100, MPI_COMM_WORLD, &st[0]));
        }
    }
    free(arena);
    section_end();
}

/* ---- a specific tag skips earlier messages ------------------------------------------- */

static void test_skip(void)
{
    for (int v = 0; v < 2; v++)
        for (int i = 0; i < NSIZES; i++)
            for (int j = 0; j < NSIZES; j++) {
                const int unexp = v == 0, c = v * 36 + i * 6 + j;
                const int tagx = 5000 + 2 * c, tagy = tagx + 1;
                const int nx = sizes[i], ny = sizes[j];
                const unsigned seedx = 500u + 2u * c, seedy = seedx + 1;
                begin("skip: X (%s, tag %d) then Y (%s, tag %d); %s", size_names[i], tagx,
                      size_names[j], tagy,
                      unexp ? "receive Y first, then X with MPI_ANY_TAG"
                            : "receives for Y then X posted first: X must skip Y's receive");
                if (peer < 0)
                    continue;
                const int dir = c % 2; /* alternate the direction */
                if (rank % 2 == dir) {
                    MPI_Request req[2];
                    fill(sbuf, nx, seedx);
                    fill(sbuf2, ny, seedy);
                    if (!unexp)
                        ctrl_recv(peer, 5);
                    OK(MPI_Isend(sbuf, nx, MPI_BYTE, peer, tagx, MPI_COMM_WORLD, &req[0]));
                    OK(MPI_Isend(sbuf2, ny, MPI_BYTE, peer, tagy, MPI_COMM_WORLD, &req[1]));
                    OK(MPI_Waitall(2, req, ignored));
                } else {
                    MPI_Status st;
                    poison(rbuf, nx, seedx);
                    poison(rbuf2, ny, seedy);
                    if (unexp) {
                        wait_arrival(peer, tagy, MPI_COMM_WORLD, &st);
                        if (OK(MPI_Recv(rbuf2, ny, MPI_BYTE, peer, tagy, MPI_COMM_WORLD, &st)) &&
                            check_status(&st, peer, tagy, ny, "receive of Y"))
                            check_data(rbuf2, ny, seedy, "receive of Y");
                        if (OK(MPI_Recv(rbuf, nx, MPI_BYTE, peer, MPI_ANY_TAG, MPI_COMM_WORLD,
                                        &st)) &&
                            check_status(&st, peer, tagx, nx, "MPI_ANY_TAG receive of X"))
                            check_data(rbuf, nx, seedx, "MPI_ANY_TAG receive of X");
                    } else {
                        MPI_Request ry, rx;
                        OK(MPI_Irecv(rbuf2, ny, MPI_BYTE, peer, tagy, MPI_COMM_WORLD, &ry));
                        OK(MPI_Irecv(rbuf, nx, MPI_BYTE, MPI_ANY_SOURCE, tagx, MPI_COMM_WORLD,
                                     &rx));
                        ctrl_send(peer, 5);
                        if (OK(MPI_Wait(&rx, &st)) &&
                            check_status(&st, peer, tagx, nx, "posted receive for X"))
                            check_data(rbuf, nx, seedx, "posted receive for X");
                        if (OK(MPI_Wait(&ry, &st)) &&
                            check_status(&st, peer, tagy, ny, "posted receive for Y"))
                            check_data(rbuf2, ny, seedy, "posted receive for Y");
                    }
                }
            }
    section_end();
}

/* ---- probe and matched probe ------------------------------------------------------- */

static const char *const probe_names[] = {
    "MPI_Probe(peer, tag) + MPI_Recv",
    "MPI_Iprobe(ANY_SOURCE, ANY_TAG) loop + MPI_Recv(ANY_SOURCE, tag)",
    "MPI_Mprobe(peer, tag), then MPI_Recv must get the second message, then MPI_Mrecv the first",
    "MPI_Improbe(ANY_SOURCE, ANY_TAG) loop + MPI_Imrecv",
    "MPI_Mprobe(ANY_SOURCE, tag) and MPI_Improbe(peer, ANY_TAG); MPI_Imrecv of the second "
    "before MPI_Mrecv of the first",
};

static void test_probe(void)
{
    for (int v = 0; v < 5; v++)
        for (int s = 0; s < NSIZES; s++) {
            /* two messages with the same tag: the first of this size class, the second of
             * another, so that counts tell them apart */
            const int n1 = sizes[s], n2 = sizes[(s + 3) % NSIZES];
            const int tag = 6000 + v * NSIZES + s, dir = (v + s) % 2;
            const unsigned seed1 = 600u + 2u * (v * NSIZES + s), seed2 = seed1 + 1;
            begin("probe: %s; first message %s, second %s", probe_names[v], size_names[s],
                  size_names[(s + 3) % NSIZES]);
            if (peer < 0)
                continue;
            if (rank % 2 == dir) {
                MPI_Request req[2];
                fill(sbuf, n1, seed1);
                fill(sbuf2, n2, seed2);
                OK(MPI_Isend(sbuf, n1, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req[0]));
                OK(MPI_Isend(sbuf2, n2, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req[1]));
                OK(MPI_Waitall(2, req, ignored));
                continue;
            }
            MPI_Status st, st2;
            MPI_Message m1 = MPI_MESSAGE_NULL, m2 = MPI_MESSAGE_NULL;
            MPI_Request req;
            int flag = 0;
            double t0 = MPI_Wtime();
            poison(rbuf, n1, seed1);
            poison(rbuf2, n2, seed2);
            /* an Iprobe for a tag nobody sends finds nothing */
            for (int k = 0; k < 3; k++) {
                OK(MPI_Iprobe(peer, tag + 500, MPI_COMM_WORLD, &flag, &st));
                if (flag) {
                    fail("MPI_Iprobe for tag %d, which no message has, returned flag true "
                         "(source %d, tag %d)",
                         tag + 500, st.MPI_SOURCE, st.MPI_TAG);
                    break;
                }
            }
            switch (v) {
            case 0:
                if (OK(MPI_Probe(peer, tag, MPI_COMM_WORLD, &st)))
                    check_status(&st, peer, tag, n1, "MPI_Probe of the first message");
                break;
            case 1:
                for (flag = 0; !flag && MPI_Wtime() - t0 < WAIT_LIMIT;)
                    OK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
                if (!flag)
                    fail("MPI_Iprobe did not see the message in %.0f s", WAIT_LIMIT);
                else
                    check_status(&st, peer, tag, n1, "MPI_Iprobe of the first message");
                break;
            case 2:
                if (OK(MPI_Mprobe(peer, tag, MPI_COMM_WORLD, &m1, &st)))
                    check_status(&st, peer, tag, n1, "MPI_Mprobe of the first message");
                break;
            case 3:
            case 4:
                if (v == 3) {
                    for (flag = 0; !flag && MPI_Wtime() - t0 < WAIT_LIMIT;)
                        OK(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &m1,
                                       &st));
                } else {
                    flag = OK(MPI_Mprobe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &m1, &st));
                }
                if (!flag)
                    fail("no matched probe of the first message in %.0f s", WAIT_LIMIT);
                else
                    check_status(&st, peer, tag, n1, "matched probe of the first message");
                if (v == 4) {
                    for (flag = 0, t0 = MPI_Wtime(); !flag && MPI_Wtime() - t0 < WAIT_LIMIT;)
                        OK(MPI_Improbe(peer, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &m2, &st2));
                    if (!flag)
                        fail("MPI_Improbe did not see the second message in %.0f s "
                             "(the first was matched by MPI_Mprobe)",
                             WAIT_LIMIT);
                    else
                        check_status(&st2, peer, tag, n2,
                                     "MPI_Improbe after MPI_Mprobe (must be the second message)");
                }
                break;
            }
            /* receive */
            if (v == 0 || v == 1) {
                if (OK(MPI_Recv(rbuf, n1, MPI_BYTE, v ? MPI_ANY_SOURCE : peer, tag, MPI_COMM_WORLD,
                                &st)) &&
                    check_status(&st, peer, tag, n1, "MPI_Recv after the probe"))
                    check_data(rbuf, n1, seed1, "MPI_Recv after the probe");
            } else if (v == 2) {
                if (OK(MPI_Recv(rbuf2, n2, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st2)) &&
                    check_status(&st2, peer, tag, n2,
                                 "MPI_Recv after MPI_Mprobe (must get the second message)"))
                    check_data(rbuf2, n2, seed2, "MPI_Recv after MPI_Mprobe");
                if (m1 != MPI_MESSAGE_NULL && OK(MPI_Mrecv(rbuf, n1, MPI_BYTE, &m1, &st)) &&
                    check_status(&st, peer, tag, n1, "MPI_Mrecv of the mprobed message"))
                    check_data(rbuf, n1, seed1, "MPI_Mrecv of the mprobed message");
                if (m1 != MPI_MESSAGE_NULL)
                    fail("MPI_Mrecv did not set the message handle to MPI_MESSAGE_NULL");
            } else if (v == 3) {
                if (m1 != MPI_MESSAGE_NULL && OK(MPI_Imrecv(rbuf, n1, MPI_BYTE, &m1, &req)) &&
                    OK(MPI_Wait(&req, &st)) &&
                    check_status(&st, peer, tag, n1, "MPI_Imrecv of the improbed message"))
                    check_data(rbuf, n1, seed1, "MPI_Imrecv of the improbed message");
            } else {
                if (m2 != MPI_MESSAGE_NULL && OK(MPI_Imrecv(rbuf2, n2, MPI_BYTE, &m2, &req)) &&
                    OK(MPI_Wait(&req, &st2)) &&
                    check_status(&st2, peer, tag, n2, "MPI_Imrecv of the second message"))
                    check_data(rbuf2, n2, seed2, "MPI_Imrecv of the second message");
                if (m1 != MPI_MESSAGE_NULL && OK(MPI_Mrecv(rbuf, n1, MPI_BYTE, &m1, &st)) &&
                    check_status(&st, peer, tag, n1, "MPI_Mrecv of the first message"))
                    check_data(rbuf, n1, seed1, "MPI_Mrecv of the first message");
            }
            if (v != 2 && v != 4) /* the second message, still queued */
                if (OK(MPI_Recv(rbuf2, n2, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st2)) &&
                    check_status(&st2, peer, tag, n2, "MPI_Recv of the second message"))
                    check_data(rbuf2, n2, seed2, "MPI_Recv of the second message");
        }
    section_end();
}

/* ---- cancel ---------------------------------------------------------------------- */

static void test_cancel(void)
{
    for (int s = 0; s < NSIZES; s++)
        for (int v = 0; v < 3; v++) {
            const int n = sizes[s], tag = 7000 + 3 * s + v, dir = (s + v) % 2;
            const unsigned seed = 700u + 3u * s + v, seed_c = seed + 100u;
            const int src = v == 1 ? MPI_ANY_SOURCE : peer, rtag = v == 2 ? MPI_ANY_TAG : tag;
            begin("cancel: a posted receive of %s (%s) is cancelled and takes no later message",
                  size_names[s], match_names[v]);
            if (peer < 0)
                continue;
            MPI_Status st;
            MPI_Request req;
            int flag = -1;
            if (rank % 2 != dir) {
                poison(rbuf, n, seed_c);
                OK(MPI_Irecv(rbuf, n, MPI_BYTE, src, rtag, MPI_COMM_WORLD, &req));
                OK(MPI_Cancel(&req));
                OK(MPI_Wait(&req, &st));
                OK(MPI_Test_cancelled(&st, &flag));
                if (flag != 1)
                    fail("MPI_Test_cancelled gives %d after MPI_Cancel + MPI_Wait of a receive no "
                         "message matched, expected true",
                         flag);
                if (req != MPI_REQUEST_NULL)
                    fail("MPI_Wait left the cancelled request non-null");
                check_untouched(rbuf, n, seed_c, "buffer of the cancelled receive");
                ctrl_send(peer, 7); /* now send the message */
                poison(rbuf2, n, seed);
                if (OK(MPI_Recv(rbuf2, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st)) &&
                    check_status(&st, peer, tag, n, "receive after the cancelled one"))
                    check_data(rbuf2, n, seed, "receive after the cancelled one");
                check_untouched(rbuf, n, seed_c, "buffer of the cancelled receive, later");

                begin("cancel: MPI_Cancel of a receive of %s that has completed has no effect",
                      size_names[s]);
                poison(rbuf, n, seed + 50u);
                OK(MPI_Irecv(rbuf, n, MPI_BYTE, src, v == 2 ? MPI_ANY_TAG : tag + 50,
                             MPI_COMM_WORLD, &req));
                ctrl_send(peer, 8);
                double t0 = MPI_Wtime();
                for (flag = 0; !flag && MPI_Wtime() - t0 < WAIT_LIMIT;)
                    OK(MPI_Request_get_status(req, &flag, &st));
                if (!flag)
                    fail("MPI_Request_get_status did not report completion in %.0f s", WAIT_LIMIT);
                OK(MPI_Cancel(&req));
                OK(MPI_Wait(&req, &st));
                OK(MPI_Test_cancelled(&st, &flag));
                if (flag != 0)
                    fail("MPI_Test_cancelled gives %d for a receive that completed before "
                         "MPI_Cancel, expected false",
                         flag);
                else if (check_status(&st, peer, tag + 50, n, "completed receive"))
                    check_data(rbuf, n, seed + 50u, "completed receive");
            } else {
                ctrl_recv(peer, 7);
                fill(sbuf, n, seed);
                OK(MPI_Send(sbuf, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD));
                ctrl_recv(peer, 8);
                fill(sbuf, n, seed + 50u);
                OK(MPI_Send(sbuf, n, MPI_BYTE, peer, tag + 50, MPI_COMM_WORLD));
            }
        }
    section_end();
}

/* ---- MPI_PROC_NULL ---------------------------------------------------------------- */

static void check_null_status(const MPI_Status *st, const char *what)
{
    int count = -1;
    MPI_Get_count(st, MPI_BYTE, &count);
    if (st->MPI_SOURCE != MPI_PROC_NULL || st->MPI_TAG != MPI_ANY_TAG || count != 0)
        fail("%s: status has MPI_SOURCE %d, MPI_TAG %d, count %d; expected MPI_PROC_NULL (%d), "
             "MPI_ANY_TAG (%d), 0",
             what, st->MPI_SOURCE, st->MPI_TAG, count, MPI_PROC_NULL, MPI_ANY_TAG);
}

static void test_proc_null(void)
{
    for (int s = 0; s < NSIZES; s++) {
        const int n = sizes[s];
        MPI_Status st;
        MPI_Request req[2];
        MPI_Message msg = MPI_MESSAGE_NULL;
        int flag = 0;
        begin("proc_null: %s to and from MPI_PROC_NULL", size_names[s]);
        fill(sbuf, n, 800u + s);
        poison(rbuf, n, 800u + s);
        OK(MPI_Send(sbuf, n, MPI_BYTE, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
        OK(MPI_Ssend(sbuf, n, MPI_BYTE, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
        OK(MPI_Rsend(sbuf, n, MPI_BYTE, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
        OK(MPI_Bsend(sbuf, n, MPI_BYTE, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
        memset(&st, 0x5c, sizeof st);
        if (OK(MPI_Recv(rbuf, n, MPI_BYTE, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &st)))
            check_null_status(&st, "MPI_Recv from MPI_PROC_NULL");
        memset(&st, 0x5c, sizeof st);
        OK(MPI_Isend(sbuf, n, MPI_BYTE, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &req[0]));
        OK(MPI_Irecv(rbuf, n, MPI_BYTE, MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &req[1]));
        OK(MPI_Wait(&req[0], MPI_STATUS_IGNORE));
        /* completes, but its status is not checked: MPICH 4.0.2 returns a builtin
         * pre-completed request with a stale status (pmodels/mpich#6805, fixed in 4.2) */
        OK(MPI_Wait(&req[1], &st));
        memset(&st, 0x5c, sizeof st);
        if (OK(MPI_Probe(MPI_PROC_NULL, 1, MPI_COMM_WORLD, &st)))
            check_null_status(&st, "MPI_Probe of MPI_PROC_NULL");
        memset(&st, 0x5c, sizeof st);
        if (OK(MPI_Iprobe(MPI_PROC_NULL, 1, MPI_COMM_WORLD, &flag, &st))) {
            if (!flag)
                fail("MPI_Iprobe of MPI_PROC_NULL gives flag false");
            check_null_status(&st, "MPI_Iprobe of MPI_PROC_NULL");
        }
        memset(&st, 0x5c, sizeof st);
        if (OK(MPI_Mprobe(MPI_PROC_NULL, 1, MPI_COMM_WORLD, &msg, &st))) {
            if (msg != MPI_MESSAGE_NO_PROC)
                fail("MPI_Mprobe of MPI_PROC_NULL does not give MPI_MESSAGE_NO_PROC");
            check_null_status(&st, "MPI_Mprobe of MPI_PROC_NULL");
            memset(&st, 0x5c, sizeof st);
            if (msg == MPI_MESSAGE_NO_PROC && OK(MPI_Mrecv(rbuf, n, MPI_BYTE, &msg, &st)))
                check_null_status(&st, "MPI_Mrecv of MPI_MESSAGE_NO_PROC");
        }
        memset(&st, 0x5c, sizeof st);
        if (OK(MPI_Sendrecv(sbuf, n, MPI_BYTE, MPI_PROC_NULL, 1, rbuf, n, MPI_BYTE, MPI_PROC_NULL,
                            1, MPI_COMM_WORLD, &st)))
            check_null_status(&st, "MPI_Sendrecv with MPI_PROC_NULL");
        check_untouched(rbuf, n, 800u + s, "receive buffer of the MPI_PROC_NULL receives");
    }
    section_end();
}

/* ---- truncation ------------------------------------------------------------------- */

static const char *const trunc_names[] = {
    "expected (MPI_Irecv posted first, MPI_Wait)", "unexpected (MPI_Recv after arrival)",
    "MPI_Mprobe + MPI_Mrecv", "MPI_Waitall of a truncated and a good receive"};

static void test_truncate(void)
{
    for (int s = 1; s < NSIZES; s++)
        for (int v = 0; v < 4; v++) {
            const int n = sizes[s], c = n / 2, tag = 8000 + 4 * s + v, dir = (s + v) % 2;
            const unsigned seed = 850u + 4u * s + v;
            begin("truncate: a %s message into a %d-byte buffer, %s", size_names[s], c,
                  trunc_names[v]);
            if (peer < 0)
                continue;
            if (rank % 2 == dir) {
                MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
                fill(sbuf, n, seed);
                if (v == 0 || v == 3)
                    ctrl_recv(peer, 9);
                OK(MPI_Isend(sbuf, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req[0]));
                if (v == 3)
                    OK(MPI_Isend(sbuf2, 0, MPI_BYTE, peer, tag + 1000, MPI_COMM_WORLD, &req[1]));
                /* the sender's completion: MPI says nothing about its error code */
                MPI_Waitall(2, req, ignored);
                continue;
            }
            MPI_Status st, sts[2];
            MPI_Request req[2];
            MPI_Message msg;
            poison(rbuf, c, seed);
            switch (v) {
            case 0:
                OK(MPI_Irecv(rbuf, c, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req[0]));
                ctrl_send(peer, 9);
                expect_truncate(MPI_Wait(&req[0], &st), "MPI_Wait of the short receive");
                break;
            case 1:
                wait_arrival(peer, tag, MPI_COMM_WORLD, &st);
                expect_truncate(MPI_Recv(rbuf, c, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st),
                                "MPI_Recv of the arrived message into the short buffer");
                break;
            case 2:
                if (OK(MPI_Mprobe(peer, tag, MPI_COMM_WORLD, &msg, &st))) {
                    check_status(&st, peer, tag, n, "MPI_Mprobe of the long message");
                    expect_truncate(MPI_Mrecv(rbuf, c, MPI_BYTE, &msg, &st),
                                    "MPI_Mrecv into the short buffer");
                }
                break;
            case 3: {
                OK(MPI_Irecv(rbuf, c, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req[0]));
                OK(MPI_Irecv(rbuf2, 0, MPI_BYTE, peer, tag + 1000, MPI_COMM_WORLD, &req[1]));
                ctrl_send(peer, 9);
                sts[0].MPI_ERROR = sts[1].MPI_ERROR = -12345;
                const int rc = MPI_Waitall(2, req, sts);
                int cls = -1;
                MPI_Error_class(rc, &cls);
                if (cls != MPI_ERR_IN_STATUS) {
                    fail("MPI_Waitall returned error class %d, expected MPI_ERR_IN_STATUS", cls);
                } else {
                    MPI_Error_class(sts[0].MPI_ERROR, &cls);
                    if (cls != MPI_ERR_TRUNCATE)
                        fail("MPI_Waitall: the truncated receive's MPI_ERROR has class %d, "
                             "expected MPI_ERR_TRUNCATE",
                             cls);
                    /* the good receive either completed (MPI_SUCCESS) or was left
                     * active (MPI_ERR_PENDING: MPICH stops at the first error) */
                    if (sts[1].MPI_ERROR == MPI_ERR_PENDING) {
                        if (OK(MPI_Wait(&req[1], &sts[1])))
                            check_status(&sts[1], peer, tag + 1000, 0,
                                         "the good receive, waited after MPI_ERR_PENDING");
                    } else if (sts[1].MPI_ERROR != MPI_SUCCESS) {
                        fail("MPI_Waitall: the good receive's MPI_ERROR is %d, expected "
                             "MPI_SUCCESS or MPI_ERR_PENDING",
                             sts[1].MPI_ERROR);
                    } else {
                        check_status(&sts[1], peer, tag + 1000, 0, "the good receive");
                    }
                }
                break;
            }
            }
            check_guard(rbuf, c, "truncated receive");
        }
    section_end();
}

/* ---- derived datatypes ----------------------------------------------------------- */

/* Layouts of ints, 6 per unit. CONTIG: plain MPI_INT (count 6 per unit).
 * VEC: vector(2 blocks of 3, stride 5), extent 8 ints: holes at 3, 4.
 * IDX: indexed({2,1,3} at {0,4,7}) resized to an extent of 11 ints: holes
 * at 2, 3, 5, 6 and a trailing hole at 10. */
enum { L_CONTIG, L_VEC, L_IDX };
static const char *const layout_names[] = {"MPI_INT", "vector", "indexed"};
static const int unit_extent[] = {6, 8, 11};
static MPI_Datatype vec_t, idx_t;
#define HOLE 0x5A5A5A5A
#define SHOLE (-7)

static MPI_Datatype layout_type(int l)
{
    return l == L_CONTIG ? MPI_INT : l == L_VEC ? vec_t : idx_t;
}

/* The signature element at int position p of a layout, or -1 for a hole. */
static long elem_at(int l, long p)
{
    static const int vec_inv[8] = {0, 1, 2, -1, -1, 3, 4, 5};
    static const int idx_inv[11] = {0, 1, -1, -1, 2, -1, -1, 3, 4, 5, -1};
    if (l == L_CONTIG)
        return p;
    const long u = p / unit_extent[l], r = p % unit_extent[l];
    const int e = l == L_VEC ? vec_inv[r] : idx_inv[r];
    return e < 0 ? -1 : u * 6 + e;
}

static int value(unsigned seed, long j)
{
    return (int)(seed * 100000u + (unsigned)j + 1u);
}

/* Lays out nelem elements in layout l; holes (and everything up to cap ints) get fillv. */
static void dt_fill(int *b, int l, long nelem, long cap, unsigned seed, int fillv)
{
    for (long p = 0; p < cap; p++) {
        const long j = elem_at(l, p);
        b[p] = j >= 0 && j < nelem ? value(seed, j) : fillv;
    }
}

/* The first nelem elements hold the data, everything else in cap ints is HOLE. */
static int dt_check(const int *b, int l, long nelem, long cap, unsigned seed, const char *what)
{
    for (long p = 0; p < cap; p++) {
        const long j = elem_at(l, p);
        const int want = j >= 0 && j < nelem ? value(seed, j) : HOLE;
        if (b[p] != want) {
            if (want == HOLE)
                fail("%s: int %ld (%s) was overwritten with %d", what, p,
                     j >= 0 ? "past the received elements" : "a hole of the receive type", b[p]);
            else
                fail("%s: int %ld (element %ld) is %d, expected %d", what, p, j, b[p], want);
            return 0;
        }
    }
    return 1;
}

static void test_datatype(void)
{
    /* units of 6 ints (24 B): none, 192 B, 3000 B, ~100 KiB, ~4 MiB */
    static const int units[] = {0, 8, 125, 4267, 174763};
    static const int pairs[][2] = {
        {L_VEC, L_IDX}, {L_IDX, L_VEC}, {L_VEC, L_CONTIG}, {L_CONTIG, L_IDX}};
    const long cap = 11L * (174763 + 2) + 64;
    int *sd = malloc(cap * sizeof(int)), *rd = malloc(cap * sizeof(int));
    int idx = 0;
    for (int u = 0; u < 5; u++)
        for (int pr = 0; pr < 5; pr++)
            for (int unexp = 0; unexp < 2; unexp++, idx++) {
                /* pr 4: a partial message: 6k+4 ints into k+1 indexed units */
                const int partial = pr == 4;
                const int sl = partial ? L_CONTIG : pairs[pr][0];
                const int rl = partial ? L_IDX : pairs[pr][1];
                const int k = units[u];
                if (partial && k == 0)
                    continue;
                const long nelem = 6L * k + (partial ? 4 : 0);
                const int scount = sl == L_CONTIG ? (int)nelem : k;
                /* a zero-count message goes into a receive of 5 units */
                const int rcount = partial          ? k + 1
                                   : k == 0         ? 5 * (rl == L_CONTIG ? 6 : 1)
                                   : rl == L_CONTIG ? 6 * k
                                                    : k;
                const long rext = (long)(rl == L_CONTIG ? rcount : rcount * unit_extent[rl]);
                const int tag = 9000 + idx, dir = idx % 2;
                const unsigned seed = 900u + idx;
                begin("datatype: %d %s (%ld ints%s) into %d %s, %s", scount, layout_names[sl],
                      nelem, partial ? ", a partial receive unit" : "", rcount, layout_names[rl],
                      unexp ? "unexpected" : "expected");
                if (peer < 0)
                    continue;
                if (rank % 2 == dir) {
                    const long sext = sl == L_CONTIG ? nelem : (long)k * unit_extent[sl];
                    dt_fill(sd, sl, nelem, sext + 16, seed, SHOLE);
                    if (!unexp)
                        ctrl_recv(peer, 10);
                    OK(MPI_Send(sd, scount, layout_type(sl), peer, tag, MPI_COMM_WORLD));
                } else {
                    MPI_Status st;
                    MPI_Request req;
                    int count = -2, elems = -2;
                    dt_fill(rd, rl, 0, rext + 64, seed, HOLE);
                    if (!unexp) {
                        OK(MPI_Irecv(rd, rcount, layout_type(rl), peer, tag, MPI_COMM_WORLD, &req));
                        ctrl_send(peer, 10);
                    } else {
                        wait_arrival(peer, tag, MPI_COMM_WORLD, &st);
                        OK(MPI_Irecv(rd, rcount, layout_type(rl), MPI_ANY_SOURCE, tag,
                                     MPI_COMM_WORLD, &req));
                    }
                    if (!OK(MPI_Wait(&req, &st)))
                        continue;
                    MPI_Get_count(&st, layout_type(rl), &count);
                    MPI_Get_elements(&st, layout_type(rl), &elems);
                    const int want = partial ? MPI_UNDEFINED : rl == L_CONTIG ? (int)nelem : k;
                    if (count != want || elems != nelem || st.MPI_SOURCE != peer ||
                        st.MPI_TAG != tag)
                        fail("status: MPI_Get_count %d (expected %d%s), MPI_Get_elements %d "
                             "(expected %ld), source %d, tag %d",
                             count, want, partial ? ", MPI_UNDEFINED" : "", elems, nelem,
                             st.MPI_SOURCE, st.MPI_TAG);
                    dt_check(rd, rl, nelem, rext + 64, seed, "received data");
                }
            }
    free(sd);
    free(rd);
    section_end();
}

/* ---- persistent requests --------------------------------------------------------- */

static const char *const pers_names[] = {"MPI_Send_init", "MPI_Ssend_init", "MPI_Bsend_init",
                                         "MPI_Rsend_init"};

static void test_persistent(void)
{
    const int iters = 3;
    for (int s = 0; s < NSIZES; s++) {
        const int n = sizes[s];
        for (int pk = 0; pk < 4; pk++) {
            const int tag = 10000 + 4 * s + pk, dir = (s + pk) % 2;
            const unsigned seed = 1000u + 16u * (4 * s + pk);
            begin("persistent: %s + MPI_Recv_init(%s) of %s, %d x MPI_Start + MPI_Wait",
                  pers_names[pk], pk & 1 ? "MPI_ANY_SOURCE" : "peer", size_names[s], iters);
            if (peer < 0)
                continue;
            MPI_Request req;
            MPI_Status st;
            if (rank % 2 == dir) {
                int rc =
                    pk == 0   ? MPI_Send_init(sbuf, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req)
                    : pk == 1 ? MPI_Ssend_init(sbuf, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req)
                    : pk == 2 ? MPI_Bsend_init(sbuf, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req)
                              : MPI_Rsend_init(sbuf, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req);
                if (!OK(rc))
                    continue;
                for (int it = 0; it < iters; it++) {
                    fill(sbuf, n, seed + it);
                    if (pk == 3)
                        ctrl_recv(peer, 11);
                    OK(MPI_Start(&req));
                    OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
                }
                OK(MPI_Request_free(&req));
            } else {
                if (!OK(MPI_Recv_init(rbuf, n, MPI_BYTE, pk & 1 ? MPI_ANY_SOURCE : peer, tag,
                                      MPI_COMM_WORLD, &req)))
                    continue;
                for (int it = 0; it < iters; it++) {
                    poison(rbuf, n, seed + it);
                    OK(MPI_Start(&req));
                    if (pk == 3)
                        ctrl_send(peer, 11);
                    char what[80];
                    snprintf(what, sizeof what, "persistent receive, round %d", it);
                    if (OK(MPI_Wait(&req, &st)) && check_status(&st, peer, tag, n, what))
                        check_data(rbuf, n, seed + it, what);
                    if (req == MPI_REQUEST_NULL) {
                        fail("MPI_Wait set the persistent request to MPI_REQUEST_NULL");
                        break;
                    }
                }
                /* an inactive persistent request completes at once with an empty status */
                memset(&st, 0x5c, sizeof st);
                int count = -1;
                if (req != MPI_REQUEST_NULL && OK(MPI_Wait(&req, &st))) {
                    MPI_Get_count(&st, MPI_BYTE, &count);
                    if (st.MPI_SOURCE != MPI_ANY_SOURCE || st.MPI_TAG != MPI_ANY_TAG || count != 0)
                        fail("MPI_Wait of an inactive persistent request: source %d, tag %d, "
                             "count %d; expected an empty status",
                             st.MPI_SOURCE, st.MPI_TAG, count);
                }
                if (req != MPI_REQUEST_NULL)
                    OK(MPI_Request_free(&req));
            }
        }
        /* both directions at once with MPI_Startall */
        begin("persistent: MPI_Startall of MPI_Recv_init + MPI_Send_init of %s, both ways",
              size_names[s]);
        if (peer < 0)
            continue;
        MPI_Request req[2];
        MPI_Status st[2];
        const int tag = 10100 + s;
        OK(MPI_Recv_init(rbuf, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req[0]));
        OK(MPI_Send_init(sbuf, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req[1]));
        for (int it = 0; it < iters; it++) {
            fill(sbuf, n, 1200u + 8u * s + 4u * it + (unsigned)rank);
            poison(rbuf, n, 1200u + 8u * s + 4u * it + (unsigned)peer);
            OK(MPI_Startall(2, req));
            if (OK(MPI_Waitall(2, req, st)) &&
                check_status(&st[0], peer, tag, n, "MPI_Startall exchange"))
                check_data(rbuf, n, 1200u + 8u * s + 4u * it + (unsigned)peer,
                           "MPI_Startall exchange");
        }
        OK(MPI_Request_free(&req[0]));
        OK(MPI_Request_free(&req[1]));
    }
    section_end();
}

/* ---- MPI_Sendrecv_replace around the ring ------------------------------------------ */

static void test_replace(void)
{
    const int next = (rank + 1) % nprocs, prev = (rank + nprocs - 1) % nprocs;
    for (int s = 0; s < NSIZES; s++) {
        const int n = sizes[s], tag = 11000 + s;
        MPI_Status st;
        begin("replace: MPI_Sendrecv_replace of %s around the ring of %d ranks", size_names[s],
              nprocs);
        fill(rbuf, n, 1300u + 64u * s + (unsigned)rank);
        memset(rbuf + n, 0xA5, GUARD);
        if (OK(MPI_Sendrecv_replace(rbuf, n, MPI_BYTE, next, tag, prev, tag, MPI_COMM_WORLD,
                                    &st)) &&
            check_status(&st, prev, tag, n, "MPI_Sendrecv_replace"))
            check_data(rbuf, n, 1300u + 64u * s + (unsigned)prev, "MPI_Sendrecv_replace");
    }
    static const int units[] = {0, 8, 125, 4267, 174763};
    const long cap = 8L * (174763 + 1) + 64;
    int *d = malloc(cap * sizeof(int));
    for (int u = 0; u < 5; u++) {
        const int k = units[u], tag = 11100 + u;
        const long ext = 8L * k + 64;
        MPI_Status st;
        int count = -1;
        begin("replace: MPI_Sendrecv_replace of %d vector units (%d ints) around the ring", k,
              6 * k);
        dt_fill(d, L_VEC, 6L * k, ext, 1400u + 16u * u + (unsigned)rank, HOLE);
        if (OK(MPI_Sendrecv_replace(d, k, vec_t, next, tag, prev, tag, MPI_COMM_WORLD, &st))) {
            MPI_Get_count(&st, vec_t, &count);
            if (count != k || st.MPI_SOURCE != prev || st.MPI_TAG != tag)
                fail("status: count %d source %d tag %d, expected %d, %d, %d", count, st.MPI_SOURCE,
                     st.MPI_TAG, k, prev, tag);
            dt_check(d, L_VEC, 6L * k, ext, 1400u + 16u * u + (unsigned)prev,
                     "vector buffer after MPI_Sendrecv_replace (holes must stay)");
        }
    }
    free(d);
    section_end();
}

/* ---- messages to oneself --------------------------------------------------------- */

static void test_self(void)
{
    for (int s = 0; s < NSIZES; s++)
        for (int v = 0; v < 3; v++) {
            const int n = sizes[s], tag = 12000 + 3 * s + v;
            const unsigned seed = 1500u + 3u * s + v;
            MPI_Comm comm = v == 2 ? MPI_COMM_SELF : MPI_COMM_WORLD;
            const int me = v == 2 ? 0 : rank;
            MPI_Request req;
            MPI_Status st;
            begin("self: %s to oneself on %s, %s", size_names[s],
                  v == 2 ? "MPI_COMM_SELF" : "MPI_COMM_WORLD",
                  v == 0 ? "MPI_Isend then MPI_Recv(ANY_SOURCE)" : "MPI_Irecv then MPI_Send");
            fill(sbuf, n, seed);
            poison(rbuf, n, seed);
            if (v == 0) {
                OK(MPI_Isend(sbuf, n, MPI_BYTE, me, tag, comm, &req));
                OK(MPI_Recv(rbuf, n, MPI_BYTE, MPI_ANY_SOURCE, tag, comm, &st));
                OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
            } else {
                OK(MPI_Irecv(rbuf, n, MPI_BYTE, me, MPI_ANY_TAG, comm, &req));
                OK(MPI_Send(sbuf, n, MPI_BYTE, me, tag, comm));
                OK(MPI_Wait(&req, &st));
            }
            if (check_status(&st, me, tag, n, "message to oneself"))
                check_data(rbuf, n, seed, "message to oneself");
        }
    section_end();
}

/* ---- other communicators --------------------------------------------------------- */

static void test_comms(void)
{
    MPI_Comm dup, pair, parity, half, inter;
    MPI_Status st;

    /* Comm_dup: a message on the dup never matches a receive on COMM_WORLD, even with
     * MPI_ANY_SOURCE and MPI_ANY_TAG, although it was sent first with the same tag */
    begin("comm: MPI_Comm_dup");
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    for (int s = 0; s < NSIZES; s++) {
        const int n1 = sizes[s], n2 = sizes[(s + 2) % NSIZES], tag = 13000 + s;
        const unsigned seed1 = 1600u + 2u * s, seed2 = seed1 + 1;
        begin("comm: %s on a dup of COMM_WORLD, then %s on COMM_WORLD, same tag; the "
              "COMM_WORLD receive (ANY_SOURCE, ANY_TAG) must get the second",
              size_names[s], size_names[(s + 2) % NSIZES]);
        if (peer < 0)
            continue;
        if (rank % 2 == s % 2) {
            MPI_Request req[2];
            fill(sbuf, n1, seed1);
            fill(sbuf2, n2, seed2);
            OK(MPI_Isend(sbuf, n1, MPI_BYTE, peer, tag, dup, &req[0]));
            OK(MPI_Isend(sbuf2, n2, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req[1]));
            OK(MPI_Waitall(2, req, ignored));
        } else {
            poison(rbuf, n1, seed1);
            poison(rbuf2, n2, seed2);
            wait_arrival(peer, tag, dup, &st);
            wait_arrival(peer, tag, MPI_COMM_WORLD, &st);
            if (OK(MPI_Recv(rbuf2, n2, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD,
                            &st)) &&
                check_status(&st, peer, tag, n2, "COMM_WORLD receive"))
                check_data(rbuf2, n2, seed2, "COMM_WORLD receive");
            if (OK(MPI_Recv(rbuf, n1, MPI_BYTE, peer, tag, dup, &st)) &&
                check_status(&st, peer, tag, n1, "receive on the dup"))
                check_data(rbuf, n1, seed1, "receive on the dup");
        }
    }
    section_end();

    /* Comm_split into pairs with the rank order reversed: MPI_SOURCE is a rank of the
     * new communicator, which differs from the world rank */
    begin("comm: MPI_Comm_split into pairs, keys reversed");
    OK(MPI_Comm_split(MPI_COMM_WORLD, rank / 2, -rank, &pair));
    MPI_Comm_set_errhandler(pair, MPI_ERRORS_RETURN);
    int prank = -1, psize = -1;
    MPI_Comm_rank(pair, &prank);
    MPI_Comm_size(pair, &psize);
    if (psize != (peer < 0 ? 1 : 2) || prank != (peer < 0 ? 0 : rank % 2 ? 0 : 1))
        fail("MPI_Comm_split: rank %d of %d in the pair communicator, expected %d of %d", prank,
             psize,
             peer < 0   ? 0
             : rank % 2 ? 0
                        : 1,
             peer < 0 ? 1 : 2);
    for (int s = 0; s < NSIZES && psize == 2; s++) {
        const int n = sizes[s], tag = 13100 + s, other = 1 - prank;
        const unsigned seed = 1700u + s;
        begin("comm: %s on the split pair communicator, MPI_ANY_SOURCE", size_names[s]);
        if (prank == s % 2) {
            fill(sbuf, n, seed);
            OK(MPI_Send(sbuf, n, MPI_BYTE, other, tag, pair));
        } else {
            poison(rbuf, n, seed);
            if (OK(MPI_Recv(rbuf, n, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, pair, &st)) &&
                check_status(&st, other, tag, n,
                             "receive on the split communicator (source in its numbering)"))
                check_data(rbuf, n, seed, "receive on the split communicator");
        }
    }
    section_end();

    /* Comm_split by parity, reversed: a ring in each part with MPI_Sendrecv */
    begin("comm: MPI_Comm_split by parity");
    OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, nprocs - rank, &parity));
    MPI_Comm_set_errhandler(parity, MPI_ERRORS_RETURN);
    int crank, csize, want_rank = 0, want_size = 0;
    MPI_Comm_rank(parity, &crank);
    MPI_Comm_size(parity, &csize);
    for (int r = 0; r < nprocs; r++)
        if (r % 2 == rank % 2) {
            want_size++;
            want_rank += r > rank;
        }
    if (crank != want_rank || csize != want_size)
        fail("MPI_Comm_split by parity: rank %d of %d, expected %d of %d", crank, csize, want_rank,
             want_size);
    for (int s = 0; s < NSIZES; s++) {
        const int n = sizes[s], tag = 13200 + s;
        const int cnext = (crank + 1) % csize, cprev = (crank + csize - 1) % csize;
        begin("comm: MPI_Sendrecv of %s around the ring of the parity communicator", size_names[s]);
        fill(sbuf, n, 1800u + 16u * s + (unsigned)crank);
        poison(rbuf, n, 1800u + 16u * s + (unsigned)cprev);
        if (OK(MPI_Sendrecv(sbuf, n, MPI_BYTE, cnext, tag, rbuf, n, MPI_BYTE, MPI_ANY_SOURCE, tag,
                            parity, &st)) &&
            check_status(&st, cprev, tag, n, "MPI_Sendrecv on the parity communicator"))
            check_data(rbuf, n, 1800u + 16u * s + (unsigned)cprev,
                       "MPI_Sendrecv on the parity communicator");
    }
    section_end();

    /* An intercommunicator between the lower and the upper half of the ranks */
    begin("comm: MPI_Intercomm_create between the two halves");
    const int low = rank < nprocs / 2;
    OK(MPI_Comm_split(MPI_COMM_WORLD, low ? 0 : 1, rank, &half));
    if (OK(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, low ? nprocs / 2 : 0, 77, &inter))) {
        MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
        int lrank, lsize, rsize, is_inter = 0;
        MPI_Comm_rank(inter, &lrank);
        MPI_Comm_size(inter, &lsize);
        MPI_Comm_remote_size(inter, &rsize);
        MPI_Comm_test_inter(inter, &is_inter);
        const int want_l = low ? nprocs / 2 : nprocs - nprocs / 2;
        if (!is_inter || lsize != want_l || rsize != nprocs - want_l)
            fail("MPI_Intercomm_create: inter %d, local size %d, remote size %d; expected 1, "
                 "%d, %d",
                 is_inter, lsize, rsize, want_l, nprocs - want_l);
        /* every upper rank sends every size to lower rank 0, which receives them all with
         * MPI_ANY_SOURCE and MPI_ANY_TAG: the sources are ranks of the remote group, and
         * each sender's messages come in order */
        begin("comm: intercommunicator, upper ranks send every size to lower rank 0, "
              "received with MPI_ANY_SOURCE and MPI_ANY_TAG");
        if (!low) {
            for (int s = 0; s < NSIZES; s++) {
                fill(sbuf, sizes[s], 1900u + 8u * s + (unsigned)lrank);
                OK(MPI_Send(sbuf, sizes[s], MPI_BYTE, 0, 13300 + s, inter));
            }
        } else if (lrank == 0) {
            int next_size[64] = {0};
            for (int k = 0; k < NSIZES * rsize; k++) {
                poison(rbuf, MAXN, 0);
                if (!OK(MPI_Recv(rbuf, MAXN, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, inter, &st)))
                    break;
                const int src = st.MPI_SOURCE, s = st.MPI_TAG - 13300;
                int count = -1;
                MPI_Get_count(&st, MPI_BYTE, &count);
                if (src < 0 || src >= rsize || src >= 64 || s < 0 || s >= NSIZES) {
                    fail("receive %d: MPI_SOURCE %d (remote group has %d), MPI_TAG %d", k, src,
                         rsize, st.MPI_TAG);
                    continue;
                }
                if (s != next_size[src])
                    fail("from remote rank %d: the %s message came before the %s one (out of "
                         "order)",
                         src, size_names[s], size_names[next_size[src]]);
                next_size[src] = s + 1;
                if (count != sizes[s])
                    fail("from remote rank %d, tag %d: count %d, expected %d", src, st.MPI_TAG,
                         count, sizes[s]);
                else
                    check_bytes(rbuf, sizes[s], 1900u + 8u * s + (unsigned)src,
                                "intercommunicator receive");
            }
        }
        /* and back: lower rank 0 to every upper rank, received with MPI_ANY_SOURCE */
        begin("comm: intercommunicator, lower rank 0 sends every size to each upper rank");
        if (low && lrank == 0) {
            for (int r = 0; r < rsize; r++)
                for (int s = 0; s < NSIZES; s++) {
                    fill(sbuf, sizes[s], 2000u + 8u * s + (unsigned)r);
                    OK(MPI_Send(sbuf, sizes[s], MPI_BYTE, r, 13400 + s, inter));
                }
        } else if (!low) {
            for (int s = 0; s < NSIZES; s++) {
                poison(rbuf, sizes[s], 2000u + 8u * s + (unsigned)lrank);
                if (OK(MPI_Recv(rbuf, sizes[s], MPI_BYTE, MPI_ANY_SOURCE, 13400 + s, inter, &st)) &&
                    check_status(&st, 0, 13400 + s, sizes[s], "intercommunicator receive"))
                    check_data(rbuf, sizes[s], 2000u + 8u * s + (unsigned)lrank,
                               "intercommunicator receive");
            }
        }
        OK(MPI_Comm_free(&inter));
    }
    OK(MPI_Comm_free(&half));
    OK(MPI_Comm_free(&parity));
    OK(MPI_Comm_free(&pair));
    OK(MPI_Comm_free(&dup));
    section_end();
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    verbose = getenv("P2PS_VERBOSE") && atoi(getenv("P2PS_VERBOSE")) > 0;
    const char *tmo = getenv("P2PS_TIMEOUT");
    signal(SIGALRM, watchdog);
    alarm(tmo && atoi(tmo) > 0 ? (unsigned)atoi(tmo) : 100u);
    if (nprocs < 2) {
        if (rank == 0)
            printf("p2p_semantics needs at least 2 ranks\n");
        MPI_Finalize();
        return 1;
    }
    peer = (rank ^ 1) < nprocs ? rank ^ 1 : -1;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Comm_dup(MPI_COMM_WORLD, &ctrl);
    sbuf = malloc(MAXN + GUARD);
    sbuf2 = malloc(MAXN + GUARD);
    rbuf = malloc(MAXN + GUARD);
    rbuf2 = malloc(MAXN + GUARD);
    int bsize = 3 * (MAXN + 4096 + 4 * MPI_BSEND_OVERHEAD);
    void *bbuf = malloc(bsize);
    begin("MPI_Buffer_attach");
    OK(MPI_Buffer_attach(bbuf, bsize));

    int tp = MPI_Type_vector(2, 3, 5, MPI_INT, &vec_t);
    int blens[3] = {2, 1, 3}, displs[3] = {0, 4, 7};
    MPI_Datatype tmp;
    /* resized: the extent (11 ints) leaves a trailing hole after int 9 */
    tp |= MPI_Type_indexed(3, blens, displs, MPI_INT, &tmp);
    tp |= MPI_Type_create_resized(tmp, 0, 11 * (MPI_Aint)sizeof(int), &idx_t);
    MPI_Type_free(&tmp);
    tp |= MPI_Type_commit(&vec_t);
    tp |= MPI_Type_commit(&idx_t);
    if (tp != MPI_SUCCESS)
        fail("creating the datatypes failed");

    test_sendrecv();
    test_ssend();
    test_order();
    test_skip();
    test_probe();
    test_cancel();
    test_proc_null();
    test_truncate();
    test_datatype();
    test_persistent();
    test_replace();
    test_self();
    test_comms();

    begin("MPI_Buffer_detach");
    void *b;
    int bs;
    OK(MPI_Buffer_detach(&b, &bs));
    MPI_Type_free(&vec_t);
    MPI_Type_free(&idx_t);
    MPI_Comm_free(&ctrl);

    begin("final reduction of the error counts");
    long all = 0;
    OK(MPI_Allreduce(&errs, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    alarm(0);
    free(sbuf);
    free(sbuf2);
    free(rbuf);
    free(rbuf2);
    free(bbuf);
    MPI_Finalize();
    if (rank == 0) {
        if (all == 0)
            printf(" No Errors\n");
        else
            printf(" Found %ld errors\n", all);
    }
    return all != 0;
}
