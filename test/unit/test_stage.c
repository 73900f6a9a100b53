/* The staging area of the shm device (torx_stage_*), through the public
 * API, in two-task fork jobs (shape 2x1x1x1): a stream of pieces of mixed
 * sizes through the smallest area, so that it fills, wraps and skips its
 * tail, with a receiver that starts late; descriptors that are not the next
 * piece (forged, repeated, oversized) refused; a pair that exchanges
 * pieces one at a time rewinds to the ring's start, one that trades
 * windows of pieces does not; the ring mapped at the first
 * piece, not page by page; misuse; staging turned off;
 * bad and mismatched TORX_STAGE_BYTES. */
#include "harness.h"
#include "packet/pkt_internal.h" /* TORXP_STAGE_REWIND_MAX_DEFAULT */

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const torx_shape_t SHAPE2 = {2, 1, 1, 1};

#define WAIT_S 60.0
#define PIECES 3000
#define TYPE_PIECE 1
#define TYPE_DONE 2

static const size_t piece_sizes[] = {1, 100, 1000, 2048, 777, 1500, 3, 2047, 64, 1024};

static size_t piece_len(unsigned i)
{
    return piece_sizes[i % (sizeof piece_sizes / sizeof piece_sizes[0])];
}

static uint8_t pat(unsigned piece, size_t i)
{
    return (uint8_t)((piece * 131u) ^ (i * 7u) ^ (i >> 8));
}

/* What a descriptor packet carries: the piece's ref and its number. */
typedef struct desc {
    torx_stage_ref_t ref;
    uint32_t piece;
} desc_t;

static int sender(torx_boot_t *boot, torx_pkt_dev_t *dev)
{
    const torx_coord_t peer = test_coord_of(SHAPE2, 1);
    const size_t max = torx_stage_max(dev);
    TASK_CHECK(max == 2048, "torx_stage_max %zu with TORX_STAGE_BYTES=4096", max);
    TASK_CHECK(torx_stage_idle_max(dev, peer) == SIZE_MAX, "idle max %zu on shm",
               torx_stage_idle_max(dev, peer));
    uint8_t buf[4096];
    torx_stage_ref_t ref;
    TASK_CHECK(torx_stage_put(dev, peer, buf, 0, &ref) == TORX_ERR_INVAL, "0 bytes staged");
    TASK_CHECK(torx_stage_put(dev, peer, buf, max + 1, &ref) == TORX_ERR_INVAL,
               "more than torx_stage_max staged");
    TASK_CHECK(torx_stage_put(dev, (torx_coord_t){5, 0, 0, 0}, buf, 8, &ref) == TORX_ERR_INVAL,
               "staged off the torus");
    TASK_CHECK(torx_stage_put(dev, peer, NULL, 8, &ref) == TORX_ERR_INVAL, "NULL data staged");

    /* A piece taken back (its descriptor could not go) is as if never
     * staged; taking back anything but the last piece does nothing. Piece
     * 0 is staged here, the rest in the loop. */
    const size_t n0 = piece_len(0);
    for (size_t k = 0; k < n0; k++)
        buf[k] = pat(0, k);
    torx_stage_ref_t ref2;
    TASK_CHECK(torx_stage_put(dev, peer, buf, n0, &ref) == TORX_OK, "%s", torx_last_error());
    torx_stage_unput(dev, peer, (torx_stage_ref_t){ref.off + 1, ref.len});
    torx_stage_unput(dev, peer, (torx_stage_ref_t){ref.off, ref.len + 1});
    TASK_CHECK(torx_stage_put(dev, peer, buf, 100, &ref2) == TORX_OK && ref2.off == ref.off + n0,
               "a wrong ref was taken back (next piece at %u, first at %u)", ref2.off, ref.off);
    torx_stage_unput(dev, peer, ref2);
    torx_stage_unput(dev, peer, ref); /* not the last any more: nothing */
    TASK_CHECK(torx_stage_put(dev, peer, buf, 100, &ref2) == TORX_OK && ref2.off == ref.off + n0,
               "taken back too far: next piece at %u", ref2.off);
    torx_stage_unput(dev, peer, ref2);
    const desc_t d0 = {ref, 0};
    TASK_CHECK(test_inject_wait(dev, peer, TYPE_PIECE, &d0, sizeof d0) == TORX_OK, "descriptor 0");
    unsigned full = 0, wraps = 0;
    uint32_t last_end = ref.off + ref.len;
    for (unsigned i = 1; i < PIECES; i++) {
        const size_t n = piece_len(i);
        for (size_t k = 0; k < n; k++)
            buf[k] = pat(i, k);
        torx_status_t rc;
        unsigned spins = 0;
        const double t0 = test_now();
        while ((rc = torx_stage_put(dev, peer, buf, n, &ref)) == TORX_NO_ROOM) {
            full++;
            TASK_CHECK(test_now() - t0 < WAIT_S, "piece %u: no room for %g s", i, WAIT_S);
            torx_pkt_poll(dev);
            test_relax(&spins);
        }
        TASK_CHECK(rc == TORX_OK, "piece %u: %s", i, torx_last_error());
        TASK_CHECK(ref.len == n && ref.off % 4096 + ref.len <= 4096, "piece %u: ref %u+%u", i,
                   ref.off, ref.len);
        if (ref.off != last_end)
            wraps++;
        TASK_CHECK(ref.off == last_end || (ref.off % 4096 == 0 && ref.off - last_end < 4096),
                   "piece %u at %u, the last ended at %u", i, ref.off, last_end);
        last_end = ref.off + ref.len;
        memset(buf, 0xEE, n); /* the area holds its own copy */
        const desc_t d = {ref, i};
        TASK_CHECK(test_inject_wait(dev, peer, TYPE_PIECE, &d, sizeof d) == TORX_OK,
                   "descriptor %u", i);
    }
    TASK_CHECK(full > 0, "the area never filled (the receiver starts late)");
    TASK_CHECK(wraps > 0, "no piece wrapped");
    /* The receiver says when it has checked everything. */
    unsigned spins = 0;
    const double t0 = test_now();
    for (;;) {
        if (torx_pkt_poll(dev)) {
            const torx_pkt_hdr_t *p = torx_pkt_peek(dev);
            const int done = p && p->sw[0] == TYPE_DONE;
            torx_pkt_consume(dev);
            if (done)
                break;
        }
        TASK_CHECK(test_now() - t0 < WAIT_S, "no word from the receiver");
        test_relax(&spins);
    }
    return 0;
}

/* The receivers' wait for the next descriptor, which must name piece
 * next; t0: when the receiver started waiting for its pieces. */
static int next_desc(torx_boot_t *boot, torx_pkt_dev_t *dev, unsigned next, double t0, desc_t *d)
{
    unsigned spins = 0;
    while (!torx_pkt_poll(dev)) {
        TASK_CHECK(test_now() - t0 < WAIT_S, "piece %u never came", next);
        test_relax(&spins);
    }
    const torx_pkt_hdr_t *p = torx_pkt_peek(dev);
    TASK_CHECK(p && p->sw[0] == TYPE_PIECE && p->payload_len == sizeof(desc_t),
               "a packet that is no descriptor");
    torx_pkt_read(p, d, 0, sizeof *d);
    torx_pkt_consume(dev);
    TASK_CHECK(d->piece == next, "descriptor %u, expected %u", d->piece, next);
    return 0;
}

static int receiver(torx_boot_t *boot, torx_pkt_dev_t *dev)
{
    const torx_coord_t peer = test_coord_of(SHAPE2, 0);
    usleep(100 * 1000); /* posts late: the sender finds the area full */
    unsigned next = 0;
    const double t0 = test_now();
    while (next < PIECES) {
        desc_t d;
        if (next_desc(boot, dev, next, t0, &d))
            return 1;
        /* Forged descriptors: not the next piece, or too long. (The next
         * lap's start is a next piece: a sender may rewind to it.) */
        const torx_stage_ref_t bad[] = {{d.ref.off + 1, d.ref.len},
                                        {d.ref.off, 4096},
                                        {d.ref.off, 0},
                                        {d.ref.off + 2048 + 64, d.ref.len},
                                        {d.ref.off + 4096, d.ref.len}};
        for (unsigned b = 0; b < sizeof bad / sizeof bad[0]; b++) {
            if (bad[b].off == d.ref.off && bad[b].len == d.ref.len)
                continue;
            TASK_CHECK(torx_stage_data(dev, peer, bad[b]) == NULL,
                       "piece %u: a forged ref %u+%u accepted", next, bad[b].off, bad[b].len);
            torx_stage_release(dev, peer, bad[b]); /* must do nothing */
        }
        const uint8_t *data = torx_stage_data(dev, peer, d.ref);
        TASK_CHECK(data != NULL, "piece %u (%u+%u) refused", next, d.ref.off, d.ref.len);
        for (size_t k = 0; k < d.ref.len; k++)
            TASK_CHECK(data[k] == pat(next, k), "piece %u byte %zu: %u, expected %u", next, k,
                       data[k], pat(next, k));
        torx_stage_release(dev, peer, d.ref);
        /* Released: the same ref is no longer the next piece. */
        TASK_CHECK(torx_stage_data(dev, peer, d.ref) == NULL || d.ref.len == 0,
                   "piece %u still readable after its release", next);
        next++;
    }
    TASK_CHECK(test_inject_wait(dev, peer, TYPE_DONE, NULL, 0) == TORX_OK, "done packet");
    return 0;
}

/* A two-task job whose rings are ring_bytes: rank 0 runs sender, rank 1
 * receiver. */
typedef int (*side_fn)(torx_boot_t *boot, torx_pkt_dev_t *dev);
typedef struct sides {
    const char *ring_bytes;
    side_fn sender, receiver;
    const char *rewind_max; /* TORX_STAGE_REWIND_MAX, or NULL: the default */
} sides_t;

static int sides_task(torx_boot_t *boot, void *arg)
{
    const sides_t *s = arg;
    setenv("TORX_STAGE_BYTES", s->ring_bytes, 1);
    if (s->rewind_max)
        setenv("TORX_STAGE_REWIND_MAX", s->rewind_max, 1);
    torx_pkt_dev_t *dev;
    TASK_CHECK(test_open(boot, SHAPE2, &dev) == TORX_OK, "%s", torx_last_error());
    const int rc = boot->rank == 0 ? s->sender(boot, dev) : s->receiver(boot, dev);
    if (rc == 0)
        TASK_CHECK(boot->barrier(boot) == TORX_OK, "final barrier");
    torx_pkt_close(dev);
    return rc;
}

START_TEST(stream_wraps_and_fills)
{
    static const sides_t s = {"4096", sender, receiver, NULL};
    RUN_JOB(2, sides_task, (void *)&s);
}
END_TEST

/* A pair that exchanges pieces (each side stages one after reading and
 * releasing the other's) rewinds: a piece of up to TORX_STAGE_REWIND_MAX
 * bytes starts at the ring's start whenever the ring is empty and the last
 * piece ended at least its length in (shm_stage.c, Rewinding), so a
 * ping-pong reuses the same lines. Longer pieces follow on. A rewound
 * piece, once released, is refused like any other. Rank 0 stages first;
 * the first half of the pieces are 1000 bytes, the rest mixed. */
#define EXCHANGE_RING 65536u
#define EXCHANGES 300u

/* Reads piece want from peer, checks every byte, releases it and checks
 * that it is then refused. */
static int take_piece(torx_boot_t *boot, torx_pkt_dev_t *dev, torx_coord_t peer, unsigned want,
                      double t0)
{
    desc_t d;
    if (next_desc(boot, dev, want, t0, &d))
        return 1;
    const uint8_t *data = torx_stage_data(dev, peer, d.ref);
    TASK_CHECK(data != NULL, "piece %u (%u+%u) refused", want, d.ref.off, d.ref.len);
    for (size_t k = 0; k < d.ref.len; k++)
        TASK_CHECK(data[k] == pat(want, k), "piece %u byte %zu: %u, expected %u", want, k, data[k],
                   pat(want, k));
    torx_stage_release(dev, peer, d.ref);
    TASK_CHECK(torx_stage_data(dev, peer, d.ref) == NULL,
               "piece %u (%u+%u) still readable after its release", want, d.ref.off, d.ref.len);
    return 0;
}

/* Stages piece (n bytes of its pattern) toward peer, checks that it went
 * where the last piece ended (*last_end), or to the next lap's start when
 * rewind or when it must wrap, and sends its descriptor. */
static int put_piece(torx_boot_t *boot, torx_pkt_dev_t *dev, torx_coord_t peer, unsigned piece,
                     size_t n, int rewind, uint32_t *last_end)
{
    static uint8_t buf[4096];
    for (size_t k = 0; k < n; k++)
        buf[k] = pat(piece, k);
    desc_t d = {.piece = piece};
    TASK_CHECK(torx_stage_put(dev, peer, buf, n, &d.ref) == TORX_OK, "piece %u: %s", piece,
               torx_last_error());
    const uint32_t in_lap = *last_end % EXCHANGE_RING;
    const uint32_t expect =
        rewind || in_lap + n > EXCHANGE_RING ? *last_end - in_lap + EXCHANGE_RING : *last_end;
    TASK_CHECK(d.ref.off == expect,
               "piece %u (%zu bytes) at %u, expected %u (the last ended at %u)", piece, n,
               d.ref.off, expect, *last_end);
    *last_end = d.ref.off + d.ref.len;
    TASK_CHECK(test_inject_wait(dev, peer, TYPE_PIECE, &d, sizeof d) == TORX_OK, "descriptor %u",
               piece);
    return 0;
}

static int exchange_side(torx_boot_t *boot, torx_pkt_dev_t *dev)
{
    const int me = boot->rank;
    const torx_coord_t peer = test_coord_of(SHAPE2, 1 - me);
    const char *max_env = getenv("TORX_STAGE_REWIND_MAX");
    const size_t rewind_max = max_env ? (size_t)atol(max_env) : TORXP_STAGE_REWIND_MAX_DEFAULT;
    uint32_t last_end = 0;
    unsigned rewinds = 0, short_pieces = 0;
    const double t0 = test_now();
    for (unsigned i = 0; i < EXCHANGES; i++) {
        /* The peer's last piece (rank 0 stages first), then ours: equal
         * lengths first, then mixed ones. One piece came back since the
         * last put (rank 0's first put excepted) and the ring is empty,
         * so ours rewinds if short enough and if the last piece ended far
         * enough in. */
        const int heard = me == 1 || i > 0;
        if (heard &&
            take_piece(boot, dev, peer, 2 * (me == 1 ? i : i - 1) + (unsigned)(1 - me), t0))
            return 1;
        const size_t n = i < EXCHANGES / 2 ? 1000 : piece_len(i);
        const int rewind = heard && n <= rewind_max && last_end % EXCHANGE_RING >= n;
        if (put_piece(boot, dev, peer, 2 * i + (unsigned)me, n, rewind, &last_end))
            return 1;
        short_pieces += n <= rewind_max;
        rewinds += rewind;
    }
    if (me == 0 && take_piece(boot, dev, peer, 2 * (EXCHANGES - 1) + 1, t0))
        return 1;
    TASK_CHECK(rewinds >= short_pieces / 2,
               "rank %d rewound %u times in %u pieces of at most %zu bytes", me, rewinds,
               short_pieces, rewind_max);
    return 0;
}

START_TEST(exchange_rewinds)
{
    static const sides_t s = {"65536", exchange_side, exchange_side, NULL};
    RUN_JOB(2, sides_task, (void *)&s);
}
END_TEST

/* A pair that trades windows of several pieces each way (a
 * bidirectional stream) does not rewind: more than one piece from the peer
 * was read since the last put, so each piece follows on from the last (or
 * wraps), even when the ring is empty. */
#define WINDOWS 60u
#define WINDOW 4u

static int window_side(torx_boot_t *boot, torx_pkt_dev_t *dev)
{
    const int me = boot->rank;
    const torx_coord_t peer = test_coord_of(SHAPE2, 1 - me);
    uint32_t last_end = 0;
    const double t0 = test_now();
    for (unsigned w = 0; w < WINDOWS; w++) {
        for (unsigned k = 0; k < WINDOW; k++)
            if (put_piece(boot, dev, peer, (w * WINDOW + k) * 2 + (unsigned)me, 1000, 0, &last_end))
                return 1;
        for (unsigned k = 0; k < WINDOW; k++)
            if (take_piece(boot, dev, peer, (w * WINDOW + k) * 2 + (unsigned)(1 - me), t0))
                return 1;
    }
    return 0;
}

START_TEST(windows_do_not_rewind)
{
    static const sides_t s = {"65536", window_side, window_side, NULL};
    RUN_JOB(2, sides_task, (void *)&s);
}
END_TEST

/* Only pieces up to TORX_STAGE_REWIND_MAX rewind: here not the 1000-byte
 * ones; and 0 turns rewinding off. */
START_TEST(exchange_rewind_max)
{
    static const sides_t below = {"65536", exchange_side, exchange_side, "999"};
    RUN_JOB(2, sides_task, (void *)&below);
    static const sides_t off = {"65536", exchange_side, exchange_side, "0"};
    RUN_JOB(2, sides_task, (void *)&off);
}
END_TEST

static int off_task(torx_boot_t *boot, void *arg)
{
    (void)arg;
    setenv("TORX_STAGE_BYTES", "0", 1);
    torx_pkt_dev_t *dev;
    TASK_CHECK(test_open(boot, SHAPE2, &dev) == TORX_OK, "%s", torx_last_error());
    const torx_coord_t peer = test_coord_of(SHAPE2, 1 - boot->rank);
    torx_stage_ref_t ref = {0, 8};
    char buf[8] = {0};
    TASK_CHECK(torx_stage_max(dev) == 0, "staging off, yet max %zu", torx_stage_max(dev));
    TASK_CHECK(torx_stage_put(dev, peer, buf, 8, &ref) == TORX_ERR_INVAL, "staged while off");
    TASK_CHECK(strstr(torx_last_error(), "TORX_STAGE_BYTES=0") != NULL, "error says why: %s",
               torx_last_error());
    TASK_CHECK(torx_stage_data(dev, peer, ref) == NULL, "read while off");
    torx_stage_release(dev, peer, ref);
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    torx_pkt_close(dev);
    return 0;
}

/* The first piece each way maps the whole ring into the task (shm_stage.c,
 * map_ring): the next MAP_PIECES pieces, 4 KiB each, a page each, then cost
 * the sender and the receiver almost no page faults (at most the handful
 * of the descriptors' FIFO pages), where each would have taken one. */
#define MAP_PIECES 200u
#define MAP_FAULTS_MAX 32

static int map_sender(torx_boot_t *boot, torx_pkt_dev_t *dev)
{
    const torx_coord_t peer = test_coord_of(SHAPE2, 1);
    static uint8_t buf[4096];
    long before = 0;
    for (unsigned i = 0; i <= MAP_PIECES; i++) {
        if (i == 1)
            before = test_minor_faults();
        memset(buf, (int)(i & 0xff), sizeof buf);
        desc_t d = {.piece = i};
        TASK_CHECK(torx_stage_put(dev, peer, buf, sizeof buf, &d.ref) == TORX_OK, "piece %u: %s", i,
                   torx_last_error());
        TASK_CHECK(test_inject_wait(dev, peer, TYPE_PIECE, &d, sizeof d) == TORX_OK,
                   "descriptor %u", i);
    }
    const long faults = test_minor_faults() - before;
    TASK_CHECK(TEST_SANITIZED || faults <= MAP_FAULTS_MAX,
               "the sender took %ld page faults staging %u pages after its first piece", faults,
               MAP_PIECES);
    return 0;
}

static int map_receiver(torx_boot_t *boot, torx_pkt_dev_t *dev)
{
    const torx_coord_t peer = test_coord_of(SHAPE2, 0);
    unsigned next = 0;
    long before = 0;
    const double t0 = test_now();
    while (next <= MAP_PIECES) {
        desc_t d;
        if (next_desc(boot, dev, next, t0, &d))
            return 1;
        if (next == 1)
            before = test_minor_faults();
        const uint8_t *data = torx_stage_data(dev, peer, d.ref);
        TASK_CHECK(data != NULL, "piece %u refused", next);
        for (size_t k = 0; k < d.ref.len; k++)
            TASK_CHECK(data[k] == (next & 0xff), "piece %u byte %zu: %u", next, k, data[k]);
        torx_stage_release(dev, peer, d.ref);
        next++;
    }
    const long faults = test_minor_faults() - before;
    TASK_CHECK(TEST_SANITIZED || faults <= MAP_FAULTS_MAX,
               "the receiver took %ld page faults reading %u staged pages after its first "
               "piece",
               faults, MAP_PIECES);
    return 0;
}

START_TEST(first_piece_maps_the_ring)
{
    static const sides_t s = {"1048576", map_sender, map_receiver, NULL};
    RUN_JOB(2, sides_task, (void *)&s);
}
END_TEST

START_TEST(staging_off)
{
    RUN_JOB(2, off_task, NULL);
}
END_TEST

START_TEST(bad_env)
{
    static const char *const bad[] = {"5000", "2048", "-1", "33554432", "64k"};
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        test_env_case_t e = {"TORX_STAGE_BYTES", bad[i], NULL};
        RUN_JOB(1, test_env_refused_task, &e);
    }
    static const char *const bad_rewind[] = {"-1", "16777217", "3k", " 8"};
    for (unsigned i = 0; i < sizeof bad_rewind / sizeof bad_rewind[0]; i++) {
        test_env_case_t e = {"TORX_STAGE_REWIND_MAX", bad_rewind[i], NULL};
        RUN_JOB(1, test_env_refused_task, &e);
    }
}
END_TEST

START_TEST(mismatched_env)
{
    test_env_case_t e = {"TORX_STAGE_BYTES", "8192", "16384"};
    RUN_JOB(2, test_env_mismatch_task, &e);
    ck_assert_int_eq(test_count_segments(), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("stage");
    TCase *tc = tcase_create("shm");
    tcase_set_timeout(tc, 2 * TEST_JOB_TIMEOUT + 60);
    tcase_add_test(tc, stream_wraps_and_fills);
    tcase_add_test(tc, exchange_rewinds);
    tcase_add_test(tc, exchange_rewind_max);
    tcase_add_test(tc, windows_do_not_rewind);
    tcase_add_test(tc, first_piece_maps_the_ring);
    tcase_add_test(tc, staging_off);
    tcase_add_test(tc, bad_env);
    tcase_add_test(tc, mismatched_env);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
