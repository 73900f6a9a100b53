/* soak: mixed protocols and sizes between all ranks for a bounded time,
 * every byte and the order of every stream checked (make soak).
 *
 * Each rank sends messages of random sizes (0 B to 1 MiB, spread evenly
 * over powers of two, so one-packet, eager, adaptive when the limits allow
 * it, rendezvous and virtual node all occur) with random tags on two
 * communicators (WORLD and a duplicate) to random ranks, and receives with
 * MPI_ANY_SOURCE and MPI_ANY_TAG. A message carries its stream's sequence
 * number (stream: source, communicator, tag); MPI's non-overtaking rule
 * says each stream arrives in order, and its bytes are a function of
 * (source, sequence), so a lost, repeated, misordered or corrupted message
 * is caught. After SOAK_SECONDS (default 60) the ranks exchange how many
 * messages each sent to each, receive the rest, and print their totals.
 * Prints " No Errors" at the end when nothing was wrong. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BYTES (1 << 20)
#define NTAGS 4
#define WINDOW 8

static uint8_t pattern(int src, uint32_t seq, size_t i)
{
    return (uint8_t)(src * 131u + seq * 7u + i * 13u + (i >> 8));
}

typedef struct {
    uint32_t seq;
    uint32_t len;
} head_t;

static int rank, size, errors;
static uint32_t *next_in; /* [comm][src][tag] next sequence expected */
static uint8_t *rbuf;

static void fill(uint8_t *b, int src, uint32_t seq, size_t len)
{
    head_t h = {seq, (uint32_t)len};
    if (len >= sizeof h)
        memcpy(b, &h, sizeof h);
    for (size_t i = len >= sizeof h ? sizeof h : 0; i < len; i++)
        b[i] = pattern(src, seq, i);
}

/* Receives one message on comm c (index ci) and checks it. */
static void recv_check(MPI_Comm c, int ci, long *got)
{
    MPI_Status st;
    MPI_Recv(rbuf, MAX_BYTES, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, c, &st);
    int n;
    MPI_Get_count(&st, MPI_BYTE, &n);
    const int src = st.MPI_SOURCE, tag = st.MPI_TAG;
    uint32_t *want = &next_in[(ci * size + src) * NTAGS + tag];
    got[src]++;
    if (n < (int)sizeof(head_t)) {
        /* Short messages carry no header: their bytes are checked with the
         * sequence number this stream expects, which catches misorder too
         * when the lengths differ. */
        for (int i = 0; i < n; i++)
            if (rbuf[i] != pattern(src, *want, (size_t)i)) {
                if (errors++ < 10)
                    printf("soak: rank %d: %d-byte message from %d tag %d seq %u: byte %d wrong\n",
                           rank, n, src, tag, *want, i);
                break;
            }
        (*want)++;
        return;
    }
    head_t h;
    memcpy(&h, rbuf, sizeof h);
    if (h.seq != *want || h.len != (uint32_t)n) {
        if (errors++ < 10)
            printf("soak: rank %d: from %d comm %d tag %d: seq %u (want %u), length %u (got %d)\n",
                   rank, src, ci, tag, h.seq, *want, h.len, n);
        *want = h.seq + 1;
        return;
    }
    for (int i = (int)sizeof h; i < n; i++)
        if (rbuf[i] != pattern(src, h.seq, (size_t)i)) {
            if (errors++ < 10)
                printf("soak: rank %d: from %d seq %u: byte %d of %d wrong\n", rank, src, h.seq, i,
                       n);
            break;
        }
    (*want)++;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm comms[2] = {MPI_COMM_WORLD, MPI_COMM_NULL};
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    const char *s = getenv("SOAK_SECONDS");
    const double seconds = s ? atof(s) : 60.0;
    const char *seed_s = getenv("SOAK_SEED");
    unsigned seed = (seed_s ? (unsigned)atoi(seed_s) : 12345u) * 2654435761u + (unsigned)rank;

    next_in = calloc((size_t)2 * size * NTAGS, sizeof *next_in);
    uint32_t *next_out = calloc((size_t)2 * size * NTAGS, sizeof *next_out);
    long *sent = calloc((size_t)2 * size, sizeof *sent), *expect = calloc((size_t)2 * size, sizeof *expect);
    long *got[2] = {calloc((size_t)size, sizeof(long)), calloc((size_t)size, sizeof(long))};
    rbuf = malloc(MAX_BYTES);
    uint8_t *sbuf[WINDOW];
    MPI_Request req[WINDOW];
    for (int w = 0; w < WINDOW; w++) {
        sbuf[w] = malloc(MAX_BYTES);
        req[w] = MPI_REQUEST_NULL;
    }
    if (!next_in || !next_out || !sent || !expect || !got[0] || !got[1] || !rbuf)
        MPI_Abort(MPI_COMM_WORLD, 2);

    long nsent = 0;
    double bytes = 0;
    const double t0 = MPI_Wtime();
    int w = 0;
    while (MPI_Wtime() - t0 < seconds) {
        /* Send one message from a free window slot. */
        int done = 1;
        MPI_Test(&req[w], &done, MPI_STATUS_IGNORE);
        if (done) {
            const int dest = (int)(rand_r(&seed) % (unsigned)size);
            const int ci = (int)(rand_r(&seed) % 2u), tag = (int)(rand_r(&seed) % NTAGS);
            const int lg = (int)(rand_r(&seed) % 21u); /* 2^0 .. 2^20 */
            size_t len = lg == 0 ? rand_r(&seed) % 9u : ((size_t)1 << lg) - rand_r(&seed) % ((size_t)1 << (lg - 1));
            if (len > MAX_BYTES)
                len = MAX_BYTES;
            uint32_t *seq = &next_out[(ci * size + dest) * NTAGS + tag];
            fill(sbuf[w], rank, *seq, len);
            (*seq)++;
            MPI_Isend(sbuf[w], (int)len, MPI_BYTE, dest, tag, comms[ci], &req[w]);
            sent[ci * size + dest]++;
            nsent++;
            bytes += (double)len;
            w = (w + 1) % WINDOW;
        }
        /* Receive what has come. */
        for (int ci = 0; ci < 2; ci++) {
            int flag;
            MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comms[ci], &flag, MPI_STATUS_IGNORE);
            if (flag)
                recv_check(comms[ci], ci, got[ci]);
        }
    }
    /* How many each rank sent to each: receive the rest. */
    for (int ci = 0; ci < 2; ci++)
        MPI_Alltoall(&sent[ci * size], 1, MPI_LONG, &expect[ci * size], 1, MPI_LONG, MPI_COMM_WORLD);
    for (int ci = 0; ci < 2; ci++) {
        long want = 0, have = 0;
        for (int r = 0; r < size; r++) {
            want += expect[ci * size + r];
            have += got[ci][r];
        }
        while (have < want) {
            recv_check(comms[ci], ci, got[ci]);
            have++;
        }
        for (int r = 0; r < size; r++)
            if (got[ci][r] != expect[ci * size + r]) {
                errors++;
                printf("soak: rank %d: comm %d: %ld messages from %d, %ld were sent\n", rank, ci,
                       got[ci][r], r, expect[ci * size + r]);
            }
    }
    for (int i = 0; i < WINDOW; i++)
        MPI_Wait(&req[i], MPI_STATUS_IGNORE);
    /* Nothing more may arrive. */
    MPI_Barrier(MPI_COMM_WORLD);
    for (int ci = 0; ci < 2; ci++) {
        int flag;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comms[ci], &flag, MPI_STATUS_IGNORE);
        if (flag) {
            errors++;
            printf("soak: rank %d: an extra message on comm %d\n", rank, ci);
        }
    }
    long tot[2] = {nsent, errors}, all[2];
    double ball;
    MPI_Reduce(tot, all, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&bytes, &ball, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("soak: %d ranks, %.0f s: %ld messages, %.1f MB, every byte and every stream's order "
               "checked: %ld errors\n",
               size, MPI_Wtime() - t0, all[0], ball / 1e6, all[1]);
        if (all[1] == 0)
            printf(" No Errors\n");
    }
    MPI_Comm_free(&comms[1]);
    MPI_Finalize();
    return all[1] != 0 && rank == 0;
}
