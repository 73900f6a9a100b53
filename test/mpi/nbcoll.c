/* nbcoll.c: torx's nonblocking collectives (docs/collectives.md#nonblocking).
 *
 * MPI_Ibarrier, MPI_Iallreduce, MPI_Ireduce, MPI_Ibcast, MPI_Ialltoall and
 * MPI_Ialltoallv on
 * MPI_COMM_WORLD and on its first duplicate, which have hardware channels
 * of their own, started in opposite orders on even and odd ranks (MPI
 * allows that across communicators) with a blocking collective of each
 * between the starts and the waits; every result is checked, and
 * MPIX_Get_last_algorithm_name must name torx's algorithm where auto takes
 * it (the global interrupt; the collective network for reductions on more
 * than 2 ranks; the paced alltoall) and MPICH's on a communicator
 * of half the ranks and on a later duplicate, which have no channel. With
 * NBCOLL_EXPECT=mpich (TORX_COLL=mpich) every call must be MPICH's.
 * Then the overlap a computation gets: the same Iallreduce waited on at
 * once, and after a computation that polls with MPI_Test.
 */
#include "mpi_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int MPIX_Get_last_algorithm_name(MPI_Comm comm, char *name, int len);

static int rank, size, errs;
static const char *expect_mpich;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            errs++;                                                                                \
            fprintf(stderr, "rank %d: FAIL line %d: ", rank, __LINE__);                            \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

/* The last algorithm on comm must be want (torx's), or "<kind>:mpich" when
 * torx's are not expected there. */
static void expect_alg(MPI_Comm comm, const char *want, int torx_expected)
{
    char name[64], mpich[64];
    int n;
    MPI_Comm_size(comm, &n);
    if (n == 1)
        return; /* MPICH answers a one-process collective before the device */
    MPIX_Get_last_algorithm_name(comm, name, sizeof name);
    snprintf(mpich, sizeof mpich, "%.*s:mpich", (int)strcspn(want, ":"), want);
    const char *w = torx_expected && !expect_mpich ? want : mpich;
    CHECK(strcmp(name, w) == 0, "last algorithm %s, expected %s", name, w);
}

enum { NI = 5, NF = 40, NB = 600, NM = 9, NA = 3, NREQ = 6 };

typedef struct calls {
    long long in_i[NI], out_i[NI];
    double in_f[NF], out_f[NF], blk_f[NF];
    int in_m[NM], out_m[NM];
    unsigned char buf[NB];
    int *a_in, *a_out; /* alltoall: NA ints a pair */
    int *v_in, *v_out; /* alltoallv: av_count(from, to) ints a pair */
    int *v_cnt, *v_dsp, *v_rcnt, *v_rdsp;
    MPI_Request req[NREQ];
} calls_t;

/* The alltoallv's ints from member f to member t: 1 to 20,001 (80 KiB:
 * packets, staged and rendezvous blocks in one call). */
static int av_count(int f, int t, int seed)
{
    return 1 + ((f * 5 + t * 3 + seed) % 3) * 10000;
}
static int av_value(int f, int t, int k, int seed)
{
    return f * 1000003 + t * 7919 + k + seed;
}

/* Starts the four calls on comm (channel: torx's are expected there). */
static void start(MPI_Comm comm, calls_t *c, int seed, int torx_expected)
{
    int me;
    MPI_Comm_rank(comm, &me);
    for (int i = 0; i < NI; i++)
        c->in_i[i] = (long long)(me + 1) * (i + seed);
    for (int i = 0; i < NF; i++)
        c->in_f[i] = ldexp((double)((me * 7 + i * 3 + seed) % 11) - 5.0, (i % 9) - 4);
    for (int i = 0; i < NM; i++)
        c->in_m[i] = (me * 13 + i * 5 + seed) % 17;
    for (int i = 0; i < NB; i++)
        c->buf[i] = me == seed % size ? (unsigned char)(i * 3 + seed) : 0;
    memset(c->out_m, 0xff, sizeof c->out_m);
    int n;
    MPI_Comm_size(comm, &n);
    if (c->a_in == NULL) {
        c->a_in = malloc(sizeof(int) * NA * n);
        c->a_out = malloc(sizeof(int) * NA * n);
        c->v_cnt = malloc(sizeof(int) * 4 * n);
        c->v_in = malloc(sizeof(int) * 20001 * n);
        c->v_out = malloc(sizeof(int) * 20001 * n);
        if (!c->a_in || !c->a_out || !c->v_cnt || !c->v_in || !c->v_out)
            MPI_Abort(MPI_COMM_WORLD, 2);
        c->v_dsp = c->v_cnt + n;
        c->v_rcnt = c->v_cnt + 2 * n;
        c->v_rdsp = c->v_cnt + 3 * n;
    }
    for (int t = 0; t < n; t++)
        for (int k = 0; k < NA; k++)
            c->a_in[t * NA + k] = me * 100 + t * 10 + k + seed;
    memset(c->a_out, 0xff, sizeof(int) * NA * n);
    int so = 0, ro = 0;
    for (int m = 0; m < n; m++) {
        c->v_cnt[m] = av_count(me, m, seed);
        c->v_dsp[m] = so;
        c->v_rcnt[m] = av_count(m, me, seed);
        c->v_rdsp[m] = ro;
        for (int k = 0; k < c->v_cnt[m]; k++)
            c->v_in[so + k] = av_value(me, m, k, seed);
        so += c->v_cnt[m];
        ro += c->v_rcnt[m];
    }
    memset(c->v_out, 0xff, sizeof(int) * ro);
    MPI_Iallreduce(c->in_i, c->out_i, NI, MPI_LONG_LONG, MPI_SUM, comm, &c->req[0]);
    expect_alg(comm, "iallreduce:cn", torx_expected && size > 2); /* at 2: MPICH's */
    MPI_Ibarrier(comm, &c->req[1]);
    expect_alg(comm, "ibarrier:gi", torx_expected);
    MPI_Iallreduce(c->in_f, c->out_f, NF, MPI_DOUBLE, MPI_SUM, comm, &c->req[2]);
    MPI_Ibcast(c->buf, NB, MPI_BYTE, seed % size, comm, &c->req[3]);
    expect_alg(comm, "ibcast:cn", 0); /* 600 B: past auto's limit (512) */
    MPI_Ialltoall(c->a_in, NA, MPI_INT, c->a_out, NA, MPI_INT, comm, &c->req[4]);
    expect_alg(comm, "ialltoall:paced", torx_expected);
    MPI_Ialltoallv(c->v_in, c->v_cnt, c->v_dsp, MPI_INT, c->v_out, c->v_rcnt, c->v_rdsp, MPI_INT,
                   comm, &c->req[5]);
    expect_alg(comm, "ialltoallv:paced", torx_expected);
}

static void finish(MPI_Comm comm, calls_t *c, int seed)
{
    int n, me;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    for (int i = 0; i < NREQ; i++)
        MPI_Wait(&c->req[i], MPI_STATUS_IGNORE);
    for (int f = 0; f < n; f++)
        for (int k = 0; k < NA; k++)
            CHECK(c->a_out[f * NA + k] == f * 100 + me * 10 + k + seed,
                  "ialltoall from %d [%d] = %d", f, k, c->a_out[f * NA + k]);
    for (int f = 0, bad = 0; f < n && !bad; f++)
        for (int k = 0; k < c->v_rcnt[f] && !bad; k++)
            if (c->v_out[c->v_rdsp[f] + k] != av_value(f, me, k, seed)) {
                CHECK(0, "ialltoallv from %d [%d] = %d", f, k, c->v_out[c->v_rdsp[f] + k]);
                bad = 1;
            }
    for (int i = 0; i < NI; i++)
        CHECK(c->out_i[i] == (long long)n * (n + 1) / 2 * (i + seed), "iallreduce[%d] = %lld", i,
              c->out_i[i]);
    /* the same sum, blocking: the reproducible sum is bitwise the same */
    MPI_Allreduce(c->in_f, c->blk_f, NF, MPI_DOUBLE, MPI_SUM, comm);
    CHECK(memcmp(c->out_f, c->blk_f, sizeof c->blk_f) == 0,
          "the nonblocking double sum differs from the blocking one");
    for (int i = 0; i < NB; i++)
        if (c->buf[i] != (unsigned char)(i * 3 + seed)) {
            CHECK(0, "ibcast byte %d: %d", i, c->buf[i]);
            break;
        }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    expect_mpich = getenv("NBCOLL_EXPECT");
    if (expect_mpich && strcmp(expect_mpich, "mpich") != 0)
        expect_mpich = NULL;

    MPI_Comm dup, dup2, half;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup); /* the first duplicate: a channel of its own */
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup2); /* past the three channels */

    for (int round = 0; round < 4; round++) {
        static calls_t cw, cd;
        /* even ranks start WORLD's then the duplicate's, odd ranks the other way */
        if (rank % 2 == 0) {
            start(MPI_COMM_WORLD, &cw, round, 1);
            start(dup, &cd, round + 1, 1);
        } else {
            start(dup, &cd, round + 1, 1);
            start(MPI_COMM_WORLD, &cw, round, 1);
        }
        MPI_Barrier(dup);
        int one = 1, sum = 0;
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        CHECK(sum == size, "blocking allreduce between: %d", sum);
        finish(MPI_COMM_WORLD, &cw, round);
        finish(dup, &cd, round + 1);
        /* the reduce to a root other than 0 */
        int root = (round + 1) % size;
        MPI_Request r;
        MPI_Ireduce(cw.in_m, cw.out_m, NM, MPI_INT, MPI_MAX, root, MPI_COMM_WORLD, &r);
        expect_alg(MPI_COMM_WORLD, "ireduce:cn", size > 2);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        for (int i = 0; rank == root && i < NM; i++) {
            int want = 0;
            for (int m = 0; m < size; m++) {
                int v = (m * 13 + i * 5 + round) % 17;
                want = v > want ? v : want;
            }
            CHECK(cw.out_m[i] == want, "ireduce[%d] = %d, expected %d", i, cw.out_m[i], want);
        }
    }

    /* no channel: MPICH's schedules */
    MPI_Request r;
    MPI_Ibarrier(half, &r);
    expect_alg(half, "ibarrier:gi", 0);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    MPI_Ibarrier(dup2, &r);
    expect_alg(dup2, "ibarrier:gi", 0);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    int a1[64], a2[64];
    for (int i = 0; i < 64; i++)
        a1[i] = i;
    MPI_Ialltoall(a1, 1, MPI_INT, a2, 1, MPI_INT, dup2, &r);
    expect_alg(dup2, "ialltoall:paced", 0);
    MPI_Wait(&r, MPI_STATUS_IGNORE);

    /* Overlap (OSU's nonblocking benchmarks): t_pure, the call waited on at
     * once; then a computation as long as t_pure, polling with MPI_Test,
     * before the wait: overlap = 1 - (t_total - t_compute) / t_pure. */
    double x = 1.0, y = 0.0;
    const int iters = 2000;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        MPI_Iallreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
    const double t_pure = (MPI_Wtime() - t0) / iters;
    volatile double sink = 0;
    double t_compute = 0, t_total = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < iters; i++) {
        double a = MPI_Wtime();
        MPI_Iallreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r);
        double c0 = MPI_Wtime();
        int flag = 0;
        while (MPI_Wtime() - c0 < t_pure) {
            for (int k = 0; k < 50; k++)
                sink += k * 0.5;
            if (!flag)
                MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
        }
        t_compute += MPI_Wtime() - c0;
        if (!flag)
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        t_total += MPI_Wtime() - a;
        CHECK(y == size, "overlap iallreduce: %g", y);
    }
    double overlap = 100.0 * (1.0 - (t_total - t_compute) / iters / t_pure);
    if (overlap < 0)
        overlap = 0;
    if (rank == 0)
        printf("nbcoll: iallreduce 8 B: %.2f us waited at once; overlap %.0f%% (%s)\n",
               t_pure * 1e6, overlap, expect_mpich ? "MPICH's" : "torx's");

    MPI_Comm_free(&dup2);
    MPI_Comm_free(&half);
    MPI_Comm_free(&dup);
    return mpi_test_finish(rank, errs);
}
