/* mpi_bench.h: what the MPI-level benchmarks (mpi_latency.c, mpi_bw.c,
 * mpi_bibw.c) share: the clock, the options, the sizes, the buffers, the
 * check of the received bytes, the statistics over batches and the output.
 *
 * Pure MPI-3.1 C plus POSIX (and Linux's sched_getcpu for the placement
 * line): no torx header, so the same source builds with the mpicc of torx
 * MPICH, Debian's MPICH and Debian's Open MPI (bench/run-mpi-bench.sh).
 *
 * Method (docs/benchmarking.md): a single operation costs about as
 * much as a clock read on these VMs, so rank 0 times batches of consecutive
 * operations, and each batch gives one sample; min, median and max are taken
 * over the samples. Exactly two ranks.
 *
 * Options (all programs):
 *   -s SIZES   comma-separated message sizes in bytes, K/M/G suffixes
 *              (binary), e.g. -s 8 or -s 1,8,1K,1M,4M; default: the
 *              program's sweep (0 or 1 B up to -m, powers of two)
 *   -m MAX     largest size of the default sweep (default 4M; e.g. 16M)
 *   -n N       iterations for messages up to 8 KiB (latency: round trips,
 *              default 20000; bandwidth: windows, default 1000). Larger
 *              messages get N * 8 KiB / size, but at least max(10, N / 50).
 *   -b B       iterations per timed batch (default: N / 20, between 1 and 100)
 *   -w W       warm-up iterations per size, untimed (default N / 10, at least 2)
 *   -W WIN     messages in flight per window (bandwidth programs; default 64)
 *   -i         interleave: after every size's warm-up, take the timed batches
 *              of all sizes in turn (each size's spread evenly over the run,
 *              a few untimed iterations before each), instead of one size
 *              after the other. A size's median then spans the whole run:
 *              on these VMs the vCPU placement, which moves small-message
 *              figures two- to three-fold, changes within a second, and
 *              one after the other a size sees whichever placement held
 *              during its few milliseconds.
 *   -h         help
 *
 * Output: lines starting with "# " are for people (library version, the
 * ranks' CPUs, options, column names); every other line is one row per
 * size, whitespace-separated, its first word the program's tag ("lat",
 * "bw", "bibw"). Rows are printed only after the size's check passed; a
 * wrong byte aborts the job (exit status non-zero) with the offset.
 */
#ifndef TORX_MPI_BENCH_H
#define TORX_MPI_BENCH_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* sched_getcpu, CPU_* */
#endif

#include <mpi.h>

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MB_MAX_SIZES 64
#define MB_SMALL 8192   /* -n applies as given up to this size */
#define MB_CHECK_MSGS 4 /* messages of the verified window (bandwidth) */
#define MB_TAG 17
#define MB_ACK_TAG 18

typedef struct mb_opts {
    const char *prog; /* program name, for messages */
    size_t sizes[MB_MAX_SIZES];
    int nsizes;
    size_t max_size; /* the largest of sizes[] */
    long base_iters; /* -n */
    long batch;      /* -b, 0: default */
    long warmup;     /* -w, -1: default */
    int window;      /* -W */
    int interleave;  /* -i */
} mb_opts_t;

typedef struct mb_stats {
    double min, med, max, mean;
} mb_stats_t;

/* ---- Clock ---------------------------------------------------------------- */

/* CLOCK_MONOTONIC, ns. The same clock for all three MPIs (MPI_Wtime's
 * resolution and source differ between them). */
static inline double mb_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ---- Errors --------------------------------------------------------------- */

/* Prints "prog: rank R: message" on stderr and aborts the whole job. */
static inline void mb_die(const mb_opts_t *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));
static inline void mb_die(const mb_opts_t *o, const char *fmt, ...)
{
    int rank = -1;
    va_list ap;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "%s: rank %d: ", o->prog, rank);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
    exit(3); /* not reached */
}

/* Checks an MPI return code (the default error handler aborts anyway; this
 * names the call when an implementation returns instead). */
#define MB_CALL(o, call)                                                                           \
    do {                                                                                           \
        int mb_rc_ = (call);                                                                       \
        if (mb_rc_ != MPI_SUCCESS) {                                                               \
            char mb_s_[MPI_MAX_ERROR_STRING];                                                      \
            int mb_n_ = 0;                                                                         \
            MPI_Error_string(mb_rc_, mb_s_, &mb_n_);                                               \
            mb_die((o), "%s failed at %s:%d: %s", #call, __FILE__, __LINE__, mb_s_);               \
        }                                                                                          \
    } while (0)

/* MPI_Waitall without statuses. MPICH defines MPI_STATUSES_IGNORE as
 * (MPI_Status *)1, which GCC 12 takes for an array of size 0
 * (-Wstringop-overflow); the call is right, so the warning is silenced
 * here, once. */
static inline void mb_waitall(const mb_opts_t *o, int n, MPI_Request *req)
{
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wstringop-overflow"
    MB_CALL(o, MPI_Waitall(n, req, MPI_STATUSES_IGNORE));
#pragma GCC diagnostic pop
}

/* ---- Options -------------------------------------------------------------- */

/* "4096", "4K", "1M", "16M": bytes. Returns 0, or -1 when malformed. */
static inline int mb_parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -1;
    switch (*end) {
    case 'k':
    case 'K':
        v <<= 10;
        end++;
        break;
    case 'm':
    case 'M':
        v <<= 20;
        end++;
        break;
    case 'g':
    case 'G':
        v <<= 30;
        end++;
        break;
    default:
        break;
    }
    if (*end != '\0' || v > (unsigned long long)INT_MAX)
        return -1; /* MPI counts are int */
    *out = (size_t)v;
    return 0;
}

static inline long mb_parse_count(const mb_opts_t *o, const char *opt, const char *s, long lo)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo) {
        fprintf(stderr, "%s: %s '%s': expected an integer >= %ld\n", o->prog, opt, s, lo);
        exit(2);
    }
    return v;
}

static inline void mb_usage(const mb_opts_t *o, FILE *f)
{
    fprintf(
        f,
        "usage: mpiexec -n 2 %s [-s SIZE[,SIZE...]] [-m MAX] [-n N] [-b BATCH] [-w WARMUP] [-i]%s\n"
        "  -s  sizes in bytes (K/M/G suffixes); default: powers of two up to -m\n"
        "  -m  largest size of the default sweep (default 4M)\n"
        "  -n  iterations for sizes up to 8K (%s, default %ld); larger sizes get\n"
        "      N*8K/size, at least max(10, N/50)\n"
        "  -b  iterations per timed batch (default N/20, 1..100)\n"
        "  -w  untimed warm-up iterations per size (default N/10, at least 2)\n"
        "  -i  interleave the sizes' timed batches over the whole run\n"
        "%s",
        o->prog, o->window ? " [-W WINDOW]" : "", o->window ? "windows" : "round trips",
        o->base_iters, o->window ? "  -W  messages in flight per window (default 64)\n" : "");
}

/* Parses argv into o. first_size: 0 (latency) or 1 (bandwidth), the start
 * of the default sweep; base_iters, window: the program's defaults (window 0
 * for programs without one). Exits on a bad option (every rank parses the
 * same argv, so every rank exits alike). */
static inline void mb_parse(mb_opts_t *o, int argc, char **argv, const char *prog,
                            size_t first_size, long base_iters, int window)
{
    const char *list = NULL;
    size_t max = (size_t)4 << 20;
    int opt;

    memset(o, 0, sizeof *o);
    o->prog = prog;
    o->base_iters = base_iters;
    o->warmup = -1;
    o->window = window;
    while ((opt = getopt(argc, argv, window ? "s:m:n:b:w:W:ih" : "s:m:n:b:w:ih")) != -1) {
        switch (opt) {
        case 's':
            list = optarg;
            break;
        case 'm':
            if (mb_parse_size(optarg, &max) || max == 0) {
                fprintf(stderr, "%s: -m '%s': expected a size such as 4M\n", prog, optarg);
                exit(2);
            }
            break;
        case 'n':
            o->base_iters = mb_parse_count(o, "-n", optarg, 1);
            break;
        case 'b':
            o->batch = mb_parse_count(o, "-b", optarg, 1);
            break;
        case 'w':
            o->warmup = mb_parse_count(o, "-w", optarg, 0);
            break;
        case 'W':
            o->window = (int)mb_parse_count(o, "-W", optarg, 1);
            break;
        case 'i':
            o->interleave = 1;
            break;
        case 'h':
            mb_usage(o, stdout);
            exit(0);
        default:
            mb_usage(o, stderr);
            exit(2);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind]);
        mb_usage(o, stderr);
        exit(2);
    }
    if (list) {
        char *copy = strdup(list), *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            size_t s;
            if (o->nsizes == MB_MAX_SIZES || mb_parse_size(t, &s)) {
                fprintf(stderr, "%s: -s: bad size '%s' (at most %d sizes, each < 2 GiB)\n", prog, t,
                        MB_MAX_SIZES);
                exit(2);
            }
            o->sizes[o->nsizes++] = s;
        }
        free(copy);
        if (o->nsizes == 0) {
            fprintf(stderr, "%s: -s: no size given\n", prog);
            exit(2);
        }
    } else {
        if (first_size == 0)
            o->sizes[o->nsizes++] = 0;
        for (size_t s = 1; s <= max && o->nsizes < MB_MAX_SIZES; s *= 2)
            o->sizes[o->nsizes++] = s;
    }
    for (int i = 0; i < o->nsizes; i++)
        if (o->sizes[i] > o->max_size)
            o->max_size = o->sizes[i];
}

/* Iterations for one size: -n up to 8 KiB, then the same bytes per size
 * (N * 8 KiB / size) with a floor, so the big sizes stay short. */
static inline long mb_iters(const mb_opts_t *o, size_t size)
{
    if (size <= MB_SMALL)
        return o->base_iters;
    long floor = o->base_iters / 50 > 10 ? o->base_iters / 50 : 10;
    if (floor > o->base_iters)
        floor = o->base_iters;
    long n = (long)((double)o->base_iters * MB_SMALL / (double)size);
    return n > floor ? n : floor;
}

static inline long mb_batch(const mb_opts_t *o, long iters)
{
    long b = o->batch ? o->batch : iters / 20;
    if (!o->batch && b > 100)
        b = 100;
    if (b < 1)
        b = 1;
    return b > iters ? iters : b;
}

static inline long mb_warmup(const mb_opts_t *o, long iters)
{
    if (o->warmup >= 0)
        return o->warmup;
    return iters / 10 > 2 ? iters / 10 : 2;
}

/* ---- Buffers and the check -------------------------------------------------- */

/* Page-aligned, every page touched (no first-touch fault inside a timing). */
static inline unsigned char *mb_alloc(const mb_opts_t *o, size_t bytes)
{
    void *p = NULL;
    long page = sysconf(_SC_PAGESIZE);
    if (bytes == 0)
        bytes = 1;
    if (posix_memalign(&p, page > 0 ? (size_t)page : 4096, bytes))
        mb_die(o, "posix_memalign(%zu bytes) failed", bytes);
    memset(p, 0, bytes);
    return p;
}

/* The byte at offset i of a message with this seed: a hash of both, so a
 * shifted, truncated, stale or swapped message does not pass. */
static inline unsigned char mb_pattern(uint32_t seed, size_t i)
{
    uint32_t x = (uint32_t)i * 2654435761u ^ seed * 0x9e3779b9u;
    x ^= x >> 15;
    return (unsigned char)(x ^ (x >> 8));
}

/* A seed per (size, sender rank, message of the window, round). */
static inline uint32_t mb_seed(size_t size, int sender, int msg, int round)
{
    return (uint32_t)size * 31u + (uint32_t)sender * 1000003u + (uint32_t)msg * 7919u +
           (uint32_t)round * 104729u + 1u;
}

static inline void mb_fill(unsigned char *buf, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = mb_pattern(seed, i);
}

/* Aborts the job unless buf holds n bytes of seed's pattern and the message
 * had exactly n bytes. */
static inline void mb_check(const mb_opts_t *o, const unsigned char *buf, size_t n, uint32_t seed,
                            const MPI_Status *st, const char *what)
{
    int count = -1;
    MPI_Get_count(st, MPI_BYTE, &count);
    if (count != (int)n)
        mb_die(o, "%s: size %zu: received %d bytes, expected %zu", what, n, count, n);
    for (size_t i = 0; i < n; i++)
        if (buf[i] != mb_pattern(seed, i))
            mb_die(o, "%s: size %zu: wrong byte at offset %zu: 0x%02x, expected 0x%02x", what, n, i,
                   buf[i], mb_pattern(seed, i));
}

/* The verified exchange of one size: the sending side sends nmsgs messages
 * of size bytes, each its own pattern, from nmsgs consecutive slices of
 * sbuf; the receiving side receives them into slices of rbuf and checks
 * every byte and the length. A rank may do both (bidirectional). The
 * messages go through the same calls and protocols as the timed ones. */
static inline void mb_verify(const mb_opts_t *o, int rank, size_t size, unsigned char *sbuf,
                             unsigned char *rbuf, int nmsgs, int do_send, int do_recv, int round,
                             const char *what)
{
    MPI_Request req[2 * MB_CHECK_MSGS];
    MPI_Status st[2 * MB_CHECK_MSGS];
    int peer = 1 - rank, nreq = 0;

    if (nmsgs > MB_CHECK_MSGS)
        nmsgs = MB_CHECK_MSGS;
    if (do_recv) {
        memset(rbuf, 0xEE, size * (size_t)nmsgs); /* no stale pattern can pass */
        for (int k = 0; k < nmsgs; k++)
            MB_CALL(o, MPI_Irecv(rbuf + (size_t)k * size, (int)size, MPI_BYTE, peer, MB_TAG,
                                 MPI_COMM_WORLD, &req[nreq++]));
    }
    if (do_send)
        for (int k = 0; k < nmsgs; k++) {
            mb_fill(sbuf + (size_t)k * size, size, mb_seed(size, rank, k, round));
            MB_CALL(o, MPI_Isend(sbuf + (size_t)k * size, (int)size, MPI_BYTE, peer, MB_TAG,
                                 MPI_COMM_WORLD, &req[nreq++]));
        }
    MB_CALL(o, MPI_Waitall(nreq, req, st));
    if (do_recv)
        for (int k = 0; k < nmsgs; k++)
            mb_check(o, rbuf + (size_t)k * size, size, mb_seed(size, peer, k, round), &st[k], what);
}

/* ---- One size --------------------------------------------------------------- */

/* What every program's loop over the sizes starts with (mb_plan) and ends
 * with (mb_plan_free). */
typedef struct mb_plan {
    size_t size;     /* bytes per message */
    int n;           /* the same, as an MPI count */
    long iters;      /* timed iterations: nb * batch */
    long batch;      /* iterations per timed batch */
    long nb;         /* timed batches: the samples */
    long warm;       /* untimed warm-up iterations */
    double *samples; /* nb of them, one per batch, the program's unit */
} mb_plan_t;

/* Size i of o: the counts (mb_iters, mb_batch, mb_warmup; iters rounded
 * down to whole batches), the samples array, sbuf filled with this rank's
 * pattern for the timed messages, then a barrier, so both ranks start the
 * size together. */
static inline mb_plan_t mb_plan(const mb_opts_t *o, int i, int rank, unsigned char *sbuf)
{
    mb_plan_t p;
    p.size = o->sizes[i];
    p.n = (int)p.size;
    p.iters = mb_iters(o, p.size);
    p.batch = mb_batch(o, p.iters);
    p.nb = p.iters / p.batch;
    p.warm = mb_warmup(o, p.iters);
    p.samples = malloc((size_t)p.nb * sizeof *p.samples);
    if (!p.samples)
        mb_die(o, "out of memory");
    p.iters = p.nb * p.batch;

    mb_fill(sbuf, p.size, mb_seed(p.size, rank, 0, 1));
    MB_CALL(o, MPI_Barrier(MPI_COMM_WORLD));
    return p;
}

static inline void mb_plan_free(mb_plan_t *p)
{
    free(p->samples);
    p->samples = NULL;
}

/* ---- The sweep over the sizes ----------------------------------------------- */

/* What the three programs share while they run: the buffers, the requests
 * of a window (bandwidth) and who is who. */
typedef struct mb_ctx {
    const mb_opts_t *o;
    int rank, peer;
    unsigned char *sbuf, *rbuf;
    MPI_Request *req;
} mb_ctx_t;

/* A program's part of one size; mb_sweep calls each on both ranks alike. */
typedef struct mb_prog {
    /* reps iterations of the program's exchange at p's size */
    void (*run)(mb_ctx_t *c, const mb_plan_t *p, long reps);
    /* rank 0's sample of a timed batch of reps iterations that took ns */
    double (*sample)(const mb_ctx_t *c, const mb_plan_t *p, long reps, double ns);
    /* after the timed batches: the verified exchange, then rank 0's row */
    void (*finish)(mb_ctx_t *c, mb_plan_t *p);
} mb_prog_t;

static inline void mb_timed_batch(mb_ctx_t *c, const mb_prog_t *g, mb_plan_t *p, long b)
{
    const double t0 = mb_now_ns();
    g->run(c, p, p->batch);
    p->samples[b] = g->sample(c, p, p->batch, mb_now_ns() - t0);
}

/* Untimed iterations before an interleaved batch, which follows another
 * size's: they bring this size's buffers and the library's state for it
 * (protocol, staging, windows) back before the clock starts. */
static inline long mb_switch_warmup(const mb_plan_t *p)
{
    long w = p->batch / 10 > 2 ? p->batch / 10 : 2;
    return w < p->warm ? w : p->warm;
}

/* Every size of c->o: warm-up, timed batches (one size after the other, or
 * with -i interleaved: every size's warm-up first, then pass t of T takes
 * a batch of each size whose nb batches spread evenly over the T passes),
 * then each size's finish. */
static inline void mb_sweep(mb_ctx_t *c, const mb_prog_t *g)
{
    const mb_opts_t *o = c->o;
    if (!o->interleave) {
        for (int i = 0; i < o->nsizes; i++) {
            mb_plan_t p = mb_plan(o, i, c->rank, c->sbuf);
            g->run(c, &p, p.warm);
            for (long b = 0; b < p.nb; b++)
                mb_timed_batch(c, g, &p, b);
            g->finish(c, &p);
            mb_plan_free(&p);
        }
        return;
    }
    mb_plan_t *plans = calloc((size_t)o->nsizes, sizeof *plans);
    long passes = 0;
    if (!plans)
        mb_die(o, "out of memory");
    for (int i = 0; i < o->nsizes; i++) {
        plans[i] = mb_plan(o, i, c->rank, c->sbuf);
        g->run(c, &plans[i], plans[i].warm);
        if (plans[i].nb > passes)
            passes = plans[i].nb;
    }
    for (long t = 0; t < passes; t++)
        for (int i = 0; i < o->nsizes; i++) {
            mb_plan_t *p = &plans[i];
            const long b = t * p->nb / passes; /* batches this size has taken */
            if ((t + 1) * p->nb / passes == b)
                continue; /* not this size's turn in pass t */
            if (o->nsizes > 1)
                g->run(c, p, mb_switch_warmup(p));
            mb_timed_batch(c, g, p, b);
        }
    for (int i = 0; i < o->nsizes; i++) {
        g->finish(c, &plans[i]);
        mb_plan_free(&plans[i]);
    }
    free(plans);
}

/* A program's run after mb_init: send and receive buffers of bufs messages
 * of the largest size each, nreq requests (none when 0), the sweep of g,
 * then MPI_Finalize. Returns main's exit status. */
static inline int mb_run(const mb_opts_t *o, int rank, int bufs, int nreq, const mb_prog_t *g)
{
    mb_ctx_t c = {.o = o, .rank = rank, .peer = 1 - rank};
    c.sbuf = mb_alloc(o, (size_t)bufs * o->max_size);
    c.rbuf = mb_alloc(o, (size_t)bufs * o->max_size);
    if (nreq > 0) {
        c.req = malloc((size_t)nreq * sizeof *c.req);
        if (!c.req)
            mb_die(o, "out of memory");
    }
    mb_sweep(&c, g);

    free(c.req);
    free(c.sbuf);
    free(c.rbuf);
    MPI_Finalize();
    return 0;
}

/* ---- Statistics ----------------------------------------------------------- */

static inline int mb_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v and returns min, median, max and mean of n > 0 samples. */
static inline mb_stats_t mb_stats(double *v, long n)
{
    mb_stats_t s;
    double sum = 0;
    qsort(v, (size_t)n, sizeof *v, mb_cmp_double);
    for (long i = 0; i < n; i++)
        sum += v[i];
    s.min = v[0];
    s.max = v[n - 1];
    s.med = (n % 2) ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    s.mean = sum / (double)n;
    return s;
}

/* ---- Start-up and output ----------------------------------------------------- */

/* MPI_Init, exactly 2 ranks, and the "# " header on rank 0: the library,
 * where each rank runs (CPU now and the CPUs it may use: shows whether the
 * launcher bound them one per core), and the options. */
static inline void mb_init(mb_opts_t *o, int *argc, char ***argv, int *rank)
{
    int size, len;
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    char where[160], all[2][160];
    cpu_set_t set;

    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (*rank == 0)
            fprintf(stderr, "%s: needs exactly 2 ranks, has %d (mpiexec -n 2)\n", o->prog, size);
        MPI_Finalize();
        exit(2);
    }

    /* "cpu 1, may run on 1" or "cpu 0, may run on 0-1" */
    int n = snprintf(where, sizeof where, "cpu %d, may run on", sched_getcpu());
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        for (int c = 0; c < CPU_SETSIZE && n < (int)sizeof where - 16; c++) {
            if (!CPU_ISSET(c, &set))
                continue;
            int e = c;
            while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, &set))
                e++;
            n += snprintf(where + n, sizeof where - (size_t)n, e > c ? " %d-%d" : " %d", c, e);
            c = e;
        }
    }
    MPI_Gather(where, (int)sizeof where, MPI_CHAR, all, (int)sizeof where, MPI_CHAR, 0,
               MPI_COMM_WORLD);
    if (*rank != 0)
        return;
    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, "\n")] = '\0';
    printf("# %s: %s\n", o->prog, lib);
    printf("# rank 0: %s; rank 1: %s\n", all[0], all[1]);
    printf("# iterations per size: -n %ld up to %d B, scaled down above; batch: %s; warm-up: %s",
           o->base_iters, MB_SMALL, o->batch ? "-b" : "N/20 (1..100)",
           o->warmup >= 0 ? "-w" : "N/10 (at least 2)");
    if (o->batch)
        printf(" (-b %ld)", o->batch);
    if (o->warmup >= 0)
        printf(" (-w %ld)", o->warmup);
    if (o->window)
        printf("; window: %d messages", o->window);
    printf("\n# order: %s\n", o->interleave
                                  ? "interleaved (-i): every size's warm-up, then the sizes' "
                                    "batches in turn, each size's spread over the run"
                                  : "one size after the other");
    fflush(stdout);
}

/* Latency row: per-sample figures are ns per half round trip. */
static inline void mb_lat_header(void)
{
    printf("# half round trip (one way), ns per sample = a batch's time / (2 x its round trips)\n");
    printf("# tag size_B iters batch samples min_ns med_ns mean_ns max_ns check\n");
}

static inline void mb_lat_row(size_t size, long iters, long batch, double *ns, long n)
{
    mb_stats_t s = mb_stats(ns, n);
    printf("lat %zu %ld %ld %ld %.1f %.1f %.1f %.1f ok\n", size, iters, batch, n, s.min, s.med,
           s.mean, s.max);
    fflush(stdout);
}

/* Bandwidth row: per-sample figures are GB/s (bytes per ns); MB/s = 10^6
 * bytes/s, GB/s = 10^9 bytes/s. "best" is the fastest batch. */
static inline void mb_bw_header(const char *what)
{
    printf("# %s; a sample = the bytes of a batch of windows / its time\n", what);
    printf("# tag size_B windows window batch samples best_MBps med_MBps worst_MBps "
           "best_GBps med_GBps check\n");
}

static inline void mb_bw_row(const char *tag, size_t size, long iters, int window, long batch,
                             double *gbs, long n)
{
    mb_stats_t s = mb_stats(gbs, n);
    printf("%s %zu %ld %d %ld %ld %.2f %.2f %.2f %.3f %.3f ok\n", tag, size, iters, window, batch,
           n, s.max * 1e3, s.med * 1e3, s.min * 1e3, s.max, s.med);
    fflush(stdout);
}

#endif /* TORX_MPI_BENCH_H */
