/* mpi_coll.c: latency of MPI collectives, for bench/run-coll-bench.sh.
 *
 * Pure MPI-3.1 C plus POSIX: the same source builds with the mpicc of torx
 * MPICH, Debian's MPICH and Open MPI.
 *
 * Two methods (-m), both timed on every rank with CLOCK_MONOTONIC:
 *   batch  the iterations run back to back in 10 batches, each batch after
 *          an MPI_Barrier and timed as a whole; MPI_Bcast's root moves to
 *          the next rank at every call, so a root cannot run ahead of its
 *          receivers. Per rank the median batch (time per call) is taken.
 *   osu    the OSU micro-benchmarks' (osu_bcast, osu_allreduce, ...): an
 *          MPI_Barrier before every call, the call timed alone, the times
 *          summed; MPI_Bcast's root is always rank 0. Per rank the mean
 *          call. This is what users' standard suites report, and it
 *          rewards a barrier that lets ranks out at different times (after
 *          a dissemination barrier the root has often sent before the
 *          receivers look) and a root that returns before its data is read.
 * The row reports the mean and the maximum over ranks of the per-rank
 * figure, in microseconds, and bandwidth = bytes / max; with osu also
 * loop_us, the whole iteration (the barrier and the call), the mean over
 * ranks: what a user's loop of barrier and call takes, which shows where a
 * call's short time was spent waiting in the barrier before it. Every size's result
 * is checked once before timing (a wrong byte aborts with its offset).
 *
 * Options:
 *   -c LIST   collectives, comma-separated: barrier, bcast, allreduce
 *             (double SUM), allreduce_max (int64 MAX), alltoall, allgather,
 *             allreduce_float (float SUM), reduce (double SUM; batch: the
 *             root moves as bcast's, osu: rank 0), and the nonblocking ibarrier,
 *             ibcast, iallreduce (double SUM) and ialltoall, each waited on
 *             at once
 *             (default: the first six); with -m osu the nonblocking ones
 *             also report OSU's overlap (measure_overlap)
 *   -s SIZES  bytes per rank (bcast buffer, allreduce vector, alltoall and
 *             allgather block), K/M suffixes; default 8 B..4 MiB, powers
 *             of 2 (x4 steps)
 *   -n N      iterations for sizes up to 8 KiB (default 2000); larger sizes
 *             get N * 8 KiB / size, at least 20
 *   -t MS     time budget per size, in milliseconds (default: none): fewer
 *             iterations (at least 20) where the slowest rank's time for
 *             two calls says the size would take longer. IMB's -time: it
 *             keeps an implementation that is 1000x slower oversubscribed
 *             (a peer that spins without yielding) from making everyone's
 *             run short, since 6 calls per batch measure mostly how the
 *             batch's barrier lets the ranks out.
 *   -m METHOD batch (default) or osu, as above
 * Output: "# " lines for people; one row per collective and size:
 *   coll <name> <bytes> mean_us=<..> max_us=<..> MBps=<..> iters=<..>
 *   [overlap=<..>] [loop_us=<..>]
 */
#define _GNU_SOURCE 1
#include <mpi.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SIZES 64

static int rank, nranks;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

__attribute__((format(printf, 1, 2))) static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "mpi_coll: rank %d: ", rank);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static size_t parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end == 'K' || *end == 'k')
        v <<= 10, end++;
    else if (*end == 'M' || *end == 'm')
        v <<= 20, end++;
    if (*end != '\0')
        die("bad size '%s'", s);
    return (size_t)v;
}

enum {
    C_BARRIER,
    C_BCAST,
    C_ALLREDUCE,
    C_ALLREDUCE_MAX,
    C_ALLTOALL,
    C_ALLGATHER,
    C_ALLREDUCE_FLOAT,
    C_REDUCE,
    C_IBARRIER, /* the nonblocking ones, each call waited on at once */
    C_IBCAST,
    C_IALLREDUCE,
    C_IALLTOALL,
    C_N
};
static const char *const names[C_N] = {"barrier",  "bcast",     "allreduce",       "allreduce_max",
                                       "alltoall", "allgather", "allreduce_float", "reduce",
                                       "ibarrier", "ibcast",    "iallreduce",      "ialltoall"};

static unsigned char *sbuf, *rbuf;

/* Starts nonblocking collective c. */
static void istart(int c, size_t size, int root, MPI_Request *r)
{
    int n = (int)size;
    switch (c) {
    case C_IBARRIER:
        MPI_Ibarrier(MPI_COMM_WORLD, r);
        break;
    case C_IBCAST:
        MPI_Ibcast(rbuf, n, MPI_BYTE, root, MPI_COMM_WORLD, r);
        break;
    case C_IALLTOALL:
        MPI_Ialltoall(sbuf, n, MPI_BYTE, rbuf, n, MPI_BYTE, MPI_COMM_WORLD, r);
        break;
    default:
        MPI_Iallreduce(sbuf, rbuf, n / 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, r);
        break;
    }
}

/* One call of collective c on size bytes per rank (bcast: from root). */
static void run_root(int c, size_t size, int root)
{
    int n = (int)size;
    switch (c) {
    case C_BARRIER:
        MPI_Barrier(MPI_COMM_WORLD);
        break;
    case C_BCAST:
        MPI_Bcast(rbuf, n, MPI_BYTE, root, MPI_COMM_WORLD);
        break;
    case C_ALLREDUCE:
        MPI_Allreduce(sbuf, rbuf, n / 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        break;
    case C_ALLREDUCE_MAX:
        MPI_Allreduce(sbuf, rbuf, n / 8, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
        break;
    case C_ALLREDUCE_FLOAT:
        MPI_Allreduce(sbuf, rbuf, n / 4, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case C_REDUCE:
        MPI_Reduce(sbuf, rbuf, n / 8, MPI_DOUBLE, MPI_SUM, root, MPI_COMM_WORLD);
        break;
    case C_ALLTOALL:
        MPI_Alltoall(sbuf, n, MPI_BYTE, rbuf, n, MPI_BYTE, MPI_COMM_WORLD);
        break;
    case C_ALLGATHER:
        MPI_Allgather(sbuf, n, MPI_BYTE, rbuf, n, MPI_BYTE, MPI_COMM_WORLD);
        break;
    default: {
        MPI_Request r;
        istart(c, size, root, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
    }
}

static void run(int c, size_t size)
{
    run_root(c, size, 0);
}

/* Fills the send side and checks one call's result. */
static void check(int c, size_t size)
{
    size_t i;
    switch (c) {
    case C_BCAST:
    case C_IBCAST:
        for (i = 0; i < size; i++)
            rbuf[i] = rank == 0 ? (unsigned char)(i * 13 + 5) : 0;
        run(c, size);
        for (i = 0; i < size; i++)
            if (rbuf[i] != (unsigned char)(i * 13 + 5))
                die("%s: wrong byte at offset %zu", names[c], i);
        break;
    case C_ALLREDUCE:
    case C_IALLREDUCE:
        for (i = 0; i < size / 8; i++)
            ((double *)sbuf)[i] = (double)(rank + 1) * (double)(i % 1000) * 0.5;
        run(c, size);
        for (i = 0; i < size / 8; i++)
            if (((double *)rbuf)[i] != (double)nranks * (nranks + 1) / 2 * (double)(i % 1000) * 0.5)
                die("%s: wrong element %zu", names[c], i);
        break;
    case C_REDUCE: /* to rank 0 */
        for (i = 0; i < size / 8; i++)
            ((double *)sbuf)[i] = (double)(rank + 1) * (double)(i % 1000) * 0.5;
        run(c, size);
        for (i = 0; rank == 0 && i < size / 8; i++)
            if (((double *)rbuf)[i] != (double)nranks * (nranks + 1) / 2 * (double)(i % 1000) * 0.5)
                die("%s: wrong element %zu", names[c], i);
        break;
    case C_ALLREDUCE_FLOAT: /* small integers: exact in any order */
        for (i = 0; i < size / 4; i++)
            ((float *)sbuf)[i] = (float)(rank + 1) * (float)(i % 1000) * 0.5f;
        run(c, size);
        for (i = 0; i < size / 4; i++)
            if (((float *)rbuf)[i] != (float)(nranks * (nranks + 1) / 2) * (float)(i % 1000) * 0.5f)
                die("%s: wrong element %zu", names[c], i);
        break;
    case C_ALLREDUCE_MAX:
        for (i = 0; i < size / 8; i++)
            ((int64_t *)sbuf)[i] = (int64_t)((i + (size_t)rank) % (size_t)nranks) - 5;
        run(c, size);
        for (i = 0; i < size / 8; i++)
            if (((int64_t *)rbuf)[i] != nranks - 1 - 5)
                die("%s: wrong element %zu", names[c], i);
        break;
    case C_ALLTOALL:
    case C_IALLTOALL:
    case C_ALLGATHER: {
        const int a2a = c != C_ALLGATHER;
        for (i = 0; i < size * (size_t)nranks; i++)
            sbuf[i] = (unsigned char)(rank * 31 + i * 7 + (a2a ? i / size : 0));
        run(c, size);
        for (int src = 0; src < nranks; src++)
            for (i = 0; i < size; i++) {
                size_t at = a2a ? (size_t)rank * size + i : i;
                unsigned char want = (unsigned char)(src * 31 + at * 7 + (a2a ? (size_t)rank : 0));
                if (rbuf[(size_t)src * size + i] != want)
                    die("%s: wrong byte at offset %zu", names[c], (size_t)src * size + i);
            }
        break;
    }
    default:
        run(c, size);
    }
}

/* OSU's overlap (osu_iallreduce and friends): each call started after a
 * barrier, then a computation as long as the call alone took (pure_us,
 * this rank's mean), polling it with MPI_Test, then the wait. overlap =
 * 100 * (1 - (t_total - t_compute) / t_pure), at least 0: the share of the
 * call's time the computation hid. */
static double measure_overlap(int c, size_t size, long iters, double pure_us)
{
    double total = 0, compute = 0;
    volatile double sink = 0;
    for (long i = 0; i < iters; i++) {
        MPI_Request r;
        int done = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = now_us();
        istart(c, size, 0, &r);
        const double c0 = now_us();
        while (now_us() - c0 < pure_us) {
            for (int k = 0; k < 64; k++)
                sink += k * 0.5;
            if (!done)
                MPI_Test(&r, &done, MPI_STATUS_IGNORE);
        }
        compute += now_us() - c0;
        if (!done)
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        total += now_us() - t0;
    }
    const double o = 100.0 * (1.0 - (total - compute) / ((double)iters * pure_us));
    return o < 0 ? 0 : o;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int want[C_N] = {1, 1, 1, 1, 1, 1};
    size_t sizes[MAX_SIZES];
    int nsizes = 0;
    long base = 2000;
    double budget_us = 0;
    int osu = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "-c") && a + 1 < argc) {
            memset(want, 0, sizeof want);
            char *list = strdup(argv[++a]);
            for (char *t = strtok(list, ","); t; t = strtok(NULL, ",")) {
                int k;
                for (k = 0; k < C_N && strcmp(t, names[k]); k++)
                    ;
                if (k == C_N)
                    die("unknown collective '%s'", t);
                want[k] = 1;
            }
            free(list);
        } else if (!strcmp(argv[a], "-s") && a + 1 < argc) {
            char *list = strdup(argv[++a]);
            for (char *t = strtok(list, ","); t && nsizes < MAX_SIZES; t = strtok(NULL, ","))
                sizes[nsizes++] = parse_size(t);
            free(list);
        } else if (!strcmp(argv[a], "-n") && a + 1 < argc) {
            base = atol(argv[++a]);
        } else if (!strcmp(argv[a], "-t") && a + 1 < argc) {
            budget_us = atof(argv[++a]) * 1e3;
        } else if (!strcmp(argv[a], "-m") && a + 1 < argc) {
            a++;
            if (strcmp(argv[a], "batch") && strcmp(argv[a], "osu"))
                die("-m '%s': the methods are batch and osu", argv[a]);
            osu = !strcmp(argv[a], "osu");
        } else {
            die("usage: mpi_coll [-c LIST] [-s SIZES] [-n N] [-t MS] [-m batch|osu] (at '%s')",
                argv[a]);
        }
    }
    if (nsizes == 0)
        for (size_t s = 8; s <= (4u << 20); s *= 4)
            sizes[nsizes++] = s;
    size_t max = 0;
    for (int i = 0; i < nsizes; i++)
        max = sizes[i] > max ? sizes[i] : max;
    sbuf = calloc(max * (size_t)nranks + 64, 1);
    rbuf = calloc(max * (size_t)nranks + 64, 1);
    if (!sbuf || !rbuf)
        die("out of memory");
    if (rank == 0) {
        char ver[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(ver, &len);
        char *nl = strchr(ver, '\n');
        if (nl)
            *nl = '\0';
        printf("# mpi_coll: %d ranks; method %s; %s\n", nranks, osu ? "osu" : "batch", ver);
        printf("# columns: coll name bytes mean_us max_us MBps iters\n");
    }
    double t[16];
    for (int c = 0; c < C_N; c++) {
        if (!want[c])
            continue;
        const int barrier = c == C_BARRIER || c == C_IBARRIER;
        for (int si = 0; si < (barrier ? 1 : nsizes); si++) {
            size_t size = barrier ? 0 : sizes[si];
            if ((c == C_ALLREDUCE || c == C_ALLREDUCE_MAX || c == C_REDUCE || c == C_IALLREDUCE) &&
                size < 8)
                continue;
            long iters = size <= 8192 ? base : (long)((double)base * 8192 / (double)size);
            check(c, size);
            if (budget_us > 0) {
                double t0 = now_us(), per_call, slowest;
                for (int i = 0; i < 2; i++) {
                    if (osu)
                        MPI_Barrier(MPI_COMM_WORLD);
                    run(c, size);
                }
                per_call = (now_us() - t0) / 2;
                /* every rank must run the same number of calls */
                MPI_Allreduce(&per_call, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                if ((double)iters * 1.1 * slowest > budget_us)
                    iters = (long)(budget_us / (1.1 * slowest));
            }
            if (iters < 20)
                iters = 20;
            for (long i = 0; i < iters / 10 + 2; i++) /* warm-up */
                run(c, size);
            double med, sum = 0, mx = 0, overlap = -1, osum = 0, loop = -1, lsum = 0;
            if (osu) {
                double total = 0;
                const double l0 = now_us();
                for (long i = 0; i < iters; i++) {
                    if (c != C_BARRIER) /* osu_barrier times its calls back to back */
                        MPI_Barrier(MPI_COMM_WORLD);
                    double t0 = now_us();
                    run(c, size);
                    total += now_us() - t0;
                }
                loop = (now_us() - l0) / (double)iters;
                med = total / (double)iters;
                if (c >= C_IBARRIER)
                    overlap = measure_overlap(c, size, iters, med);
            } else {
                enum { BATCHES = 10 };
                long per = iters / BATCHES > 0 ? iters / BATCHES : 1;
                long call = 0;
                for (int b = 0; b < BATCHES; b++) {
                    MPI_Barrier(MPI_COMM_WORLD);
                    double t0 = now_us();
                    for (long i = 0; i < per; i++, call++)
                        run_root(c, size, (int)(call % nranks));
                    t[b] = (now_us() - t0) / (double)per;
                }
                qsort(t, BATCHES, sizeof(double), cmp_double);
                med = (t[BATCHES / 2 - 1] + t[BATCHES / 2]) / 2;
            }
            MPI_Reduce(&med, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            MPI_Reduce(&med, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            MPI_Reduce(&overlap, &osum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            MPI_Reduce(&loop, &lsum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            if (rank == 0) {
                printf("coll %s %zu mean_us=%.3f max_us=%.3f MBps=%.1f iters=%ld", names[c], size,
                       sum / nranks, mx, mx > 0 ? (double)size / mx : 0.0, iters);
                if (overlap >= 0)
                    printf(" overlap=%.1f", osum / nranks);
                if (loop >= 0)
                    printf(" loop_us=%.3f", lsum / nranks);
                printf("\n");
            }
            fflush(stdout);
        }
    }
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
