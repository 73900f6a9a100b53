/* torx collectives (src/coll/, <torx/coll.h>) over fork jobs.
 *
 * Every algorithm against a reference computed here from every task's
 * data (each task can regenerate any task's input): all reduction types and
 * ops, counts 0, 1, primes and past one packet and one pipeline of rounds,
 * roots other than 0, in place; groups in reordered task order; 2, 3, 4, 6
 * and 8 tasks; heater and vn modes and TORX_CHAOS. The floating sum must be
 * bitwise the same whichever task holds which value. Selection follows
 * TORX_COLL*; bad values are startup errors naming the variable; auto's
 * choices on one host are the measured ones; a collective waiting on the
 * network keeps point-to-point traffic moving.
 */
#include "harness.h"

#include <torx/coll.h>
#include <torx/msg.h>

#include "coll/coll_internal.h" /* the torus bcast's line-send counters, co_done */

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_TASKS 8

/* Shared between the tasks of a job (mapped before the fork). */
typedef struct shared {
    double before[MAX_TASKS], after[MAX_TASKS];
    /* floating sums of each permutation, per task, for bitwise comparison */
    uint64_t sums[4][MAX_TASKS][64];
    uint64_t xsums[4][MAX_TASKS][16]; /* the same by direct exchange */
} shared_t;

static shared_t *sh;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* Element i of the input held at group index who, for a test seed. */
static uint64_t raw(int seed, int who, size_t i)
{
    return mix(((uint64_t)seed << 48) ^ ((uint64_t)who << 32) ^ i);
}

static const size_t esizes[TORX_COLL_NDTYPES] = {4, 4, 8, 8, 4, 8};

/* Writes the input of group index who: integers small enough that sums of
 * 8 never overflow, logical inputs with zeros, floats over many binades and
 * both signs. */
static void make_input(torx_coll_dtype_t dt, torx_coll_op_t op, int seed, int who, size_t count,
                       void *buf)
{
    for (size_t i = 0; i < count; i++) {
        uint64_t r = raw(seed, who, i);
        switch (dt) {
        case TORX_COLL_S32: {
            int32_t v = op == TORX_COLL_SUM ? (int32_t)(r % 2000001) - 1000000 : (int32_t)r;
            if ((op == TORX_COLL_LAND || op == TORX_COLL_LOR) && (r >> 40) % 3 == 0)
                v = 0;
            ((int32_t *)buf)[i] = v;
            break;
        }
        case TORX_COLL_U32: {
            uint32_t v = op == TORX_COLL_SUM ? (uint32_t)(r % 100000000) : (uint32_t)r;
            if ((op == TORX_COLL_LAND || op == TORX_COLL_LOR) && (r >> 40) % 3 == 0)
                v = 0;
            ((uint32_t *)buf)[i] = v;
            break;
        }
        case TORX_COLL_S64: {
            int64_t v = op == TORX_COLL_SUM ? (int64_t)(r % 2000000000001ULL) - 1000000000000LL
                                            : (int64_t)r;
            if ((op == TORX_COLL_LAND || op == TORX_COLL_LOR) && (r >> 40) % 3 == 0)
                v = 0;
            ((int64_t *)buf)[i] = v;
            break;
        }
        case TORX_COLL_U64: {
            uint64_t v = op == TORX_COLL_SUM ? r >> 8 : r;
            if ((op == TORX_COLL_LAND || op == TORX_COLL_LOR) && (r >> 40) % 3 == 0)
                v = 0;
            ((uint64_t *)buf)[i] = v;
            break;
        }
        case TORX_COLL_FLOAT:
            ((float *)buf)[i] = (float)ldexp((double)(int32_t)(r & 0xffffff) / 16777216.0,
                                             (int)((r >> 32) % 40) - 20);
            break;
        case TORX_COLL_DOUBLE:
            ((double *)buf)[i] =
                ldexp((double)(int64_t)(r & 0x3fffffffffffffULL) / 9007199254740992.0 - 1.0,
                      (int)((r >> 56) % 60) - 30);
            break;
        default:
            break;
        }
    }
}

/* The expected result of integer and MIN/MAX reductions, element i. */
#define REDUCE_INT(T, acc, v, op)                                                                 \
    do {                                                                                          \
        switch (op) {                                                                             \
        case TORX_COLL_SUM: acc = (T)(acc + v); break;                                            \
        case TORX_COLL_MIN: acc = v < acc ? v : acc; break;                                       \
        case TORX_COLL_MAX: acc = v > acc ? v : acc; break;                                       \
        case TORX_COLL_BAND: acc = acc & v; break;                                                \
        case TORX_COLL_BOR: acc = acc | v; break;                                                 \
        case TORX_COLL_BXOR: acc = acc ^ v; break;                                                \
        case TORX_COLL_LAND: acc = (T)((acc != 0) && (v != 0)); break;                            \
        case TORX_COLL_LOR: acc = (T)((acc != 0) || (v != 0)); break;                             \
        default: break;                                                                           \
        }                                                                                         \
    } while (0)

/* MIN and MAX only (the sum has its own reference). */
#define REDUCE_FP(T, acc, v, op)                                                                  \
    do {                                                                                          \
        if (op == TORX_COLL_MIN)                                                                  \
            acc = v < acc ? v : acc;                                                              \
        else if (op == TORX_COLL_MAX)                                                             \
            acc = v > acc ? v : acc;                                                              \
    } while (0)

static void expected(torx_coll_dtype_t dt, torx_coll_op_t op, int seed, int n, size_t count,
                     void *out)
{
    unsigned char *in = malloc(count * 8 + 8);
    for (int who = 0; who < n; who++) {
        make_input(dt, op, seed, who, count, in);
        for (size_t i = 0; i < count; i++) {
            switch (dt) {
#define CASE(D, T, R)                                                                             \
    case D: {                                                                                     \
        T v = ((T *)in)[i], *acc = &((T *)out)[i];                                                \
        if (who == 0)                                                                             \
            *acc = (op == TORX_COLL_LAND || op == TORX_COLL_LOR) ? (T)(v != 0) : v;               \
        else                                                                                      \
            R(T, *acc, v, op);                                                                    \
        break;                                                                                    \
    }
                CASE(TORX_COLL_S32, int32_t, REDUCE_INT)
                CASE(TORX_COLL_U32, uint32_t, REDUCE_INT)
                CASE(TORX_COLL_S64, int64_t, REDUCE_INT)
                CASE(TORX_COLL_U64, uint64_t, REDUCE_INT)
                CASE(TORX_COLL_FLOAT, float, REDUCE_FP)
                CASE(TORX_COLL_DOUBLE, double, REDUCE_FP)
#undef CASE
            default:
                break;
            }
        }
    }
    free(in);
}

/* The reproducible sum's result, computed here with the device's lane
 * functions from every task's input, and a long-double sum for a bound. */
static void expected_fpsum(torx_coll_dtype_t dt, int seed, int n, int job, size_t count,
                           double *exact, double *repro)
{
    int h = torx_cn_fpsum_headroom(job);
    unsigned char *in = malloc((size_t)n * (count * 8 + 8));
    for (int who = 0; who < n; who++)
        make_input(dt, TORX_COLL_SUM, seed, who, count, in + (size_t)who * (count * 8 + 8));
    for (size_t i = 0; i < count; i++) {
        long double s = 0;
        int64_t emax = 0, sum = 0;
        double v[MAX_TASKS];
        for (int who = 0; who < n; who++) {
            const unsigned char *p = in + (size_t)who * (count * 8 + 8);
            v[who] = dt == TORX_COLL_FLOAT ? (double)((const float *)p)[i] : ((const double *)p)[i];
            s += v[who];
            int64_t e = torx_cn_fpsum_exponent(v[who]);
            emax = e > emax ? e : emax;
        }
        for (int who = 0; who < n; who++)
            sum += torx_cn_fpsum_encode(v[who], emax, h);
        exact[i] = (double)s;
        repro[i] = torx_cn_fpsum_decode(sum, emax, h);
    }
    free(in);
}

/* ---- a task ----------------------------------------------------------------- */

typedef struct job {
    int ntasks;
    int perm;        /* group order: 0 identity, 1 reversed, 2 rotated, 3 odd first */
    int reduce_all;  /* every dtype x op (else a sample) */
} job_t;

static int group_order(int perm, int n, int i)
{
    switch (perm) {
    case 1:
        return n - 1 - i;
    case 2:
        return (i + 1) % n;
    case 3: { /* odd ranks first, then even */
        int odd = n / 2;
        return i < odd ? 2 * i + 1 : 2 * (i - odd);
    }
    default:
        return i;
    }
}

/* A task's torx context (the job's mode) and collectives module (cattr,
 * or NULL for the defaults): 0, or 1 after a failure message, as
 * TASK_CHECK returns. */
static int coll_open(torx_boot_t *boot, const torx_coll_attr_t *cattr, torx_ctx_t **ctx,
                     torx_coll_t **c)
{
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    TASK_CHECK(torx_init(&attr, ctx) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(torx_coll_init(*ctx, cattr, c) == TORX_OK, "%s", torx_last_error());
    return 0;
}

/* Ends what coll_open started: a task's return value. */
static int coll_close(torx_boot_t *boot, torx_ctx_t *ctx, torx_coll_t *c)
{
    torx_coll_finalize(c);
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    return 0;
}

static torx_coll_group_t *make_group(torx_coll_t *c, torx_boot_t *boot, int perm)
{
    int tasks[MAX_TASKS], me = -1;
    for (int i = 0; i < boot->size; i++) {
        tasks[i] = group_order(perm, boot->size, i);
        if (tasks[i] == boot->rank)
            me = i;
    }
    torx_coll_group_t *g = NULL;
    if (torx_coll_group_create(c, (uint32_t)(100 + perm), boot->size, tasks, me, &g) != TORX_OK)
        return NULL;
    return g;
}

/* past 16 KiB the torus allreduce splits the vector (reduce-scatter and
 * allgather); 70001 runs on it only */
static const size_t counts[] = {0, 1, 2, 7, 31, 32, 33, 63, 64, 65, 127, 257, 1031, 4099, 70001};

/* The direct exchange's floating sum: each element's values added in
 * ascending magnitude (ties by bits), in double. */
static void expected_sorted_sum(torx_coll_dtype_t dt, int seed, int n, size_t count, double *out)
{
    unsigned char *in = malloc((size_t)n * (count * 8 + 8));
    for (int who = 0; who < n; who++)
        make_input(dt, TORX_COLL_SUM, seed, who, count, in + (size_t)who * (count * 8 + 8));
    for (size_t i = 0; i < count; i++) {
        double v[MAX_TASKS];
        for (int who = 0; who < n; who++) {
            const unsigned char *p = in + (size_t)who * (count * 8 + 8);
            v[who] = dt == TORX_COLL_FLOAT ? (double)((const float *)p)[i] : ((const double *)p)[i];
        }
        for (int a = 1; a < n; a++)
            for (int b = a; b > 0; b--) {
                uint64_t ub, ua;
                memcpy(&ub, &v[b], 8);
                memcpy(&ua, &v[b - 1], 8);
                int lt = fabs(v[b]) != fabs(v[b - 1]) ? fabs(v[b]) < fabs(v[b - 1]) : ub < ua;
                if (!lt)
                    break;
                double t = v[b];
                v[b] = v[b - 1];
                v[b - 1] = t;
            }
        double acc = 0;
        for (int who = 0; who < n; who++)
            acc += v[who];
        out[i] = acc == 0 ? 0.0 : acc;
    }
    free(in);
}

/* Long vectors read in place (coll_exchange.c, direct_reduce): each
 * element's values added in group order, in the element's own type. */
static void expected_group_sum(torx_coll_dtype_t dt, int seed, int n, size_t count, double *out)
{
    unsigned char *in = malloc((size_t)n * (count * 8 + 8));
    for (int who = 0; who < n; who++)
        make_input(dt, TORX_COLL_SUM, seed, who, count, in + (size_t)who * (count * 8 + 8));
    for (size_t i = 0; i < count; i++) {
        double acc = 0;
        float facc = 0;
        for (int who = 0; who < n; who++) {
            const unsigned char *p = in + (size_t)who * (count * 8 + 8);
            if (dt == TORX_COLL_FLOAT)
                facc = who ? facc + ((const float *)p)[i] : ((const float *)p)[i];
            else
                acc = who ? acc + ((const double *)p)[i] : ((const double *)p)[i];
        }
        out[i] = dt == TORX_COLL_FLOAT ? (double)facc : acc;
    }
    free(in);
}

static int check_reduce_alg(torx_boot_t *boot, torx_coll_group_t *g, int me, int n,
                            torx_coll_dtype_t dt, torx_coll_op_t op, int seed,
                            torx_coll_alg_t alg);

static int check_reduce(torx_boot_t *boot, torx_coll_group_t *g, int me, int n,
                        torx_coll_dtype_t dt, torx_coll_op_t op, int seed)
{
    if (check_reduce_alg(boot, g, me, n, dt, op, seed, TORX_COLL_ALG_CN))
        return 1;
    if (n <= 8)
        return check_reduce_alg(boot, g, me, n, dt, op, seed, TORX_COLL_ALG_TORUS);
    return 0;
}

static int check_reduce_alg(torx_boot_t *boot, torx_coll_group_t *g, int me, int n,
                            torx_coll_dtype_t dt, torx_coll_op_t op, int seed, torx_coll_alg_t alg)
{
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        size_t count = counts[ci];
        size_t bytes = count * esizes[dt];
        if (alg == TORX_COLL_ALG_CN && count > 4099)
            break; /* long enough for the collective network */
        unsigned char *in = malloc(bytes + 8), *out = malloc(bytes + 8), *want = malloc(bytes + 8);
        make_input(dt, op, seed + (int)ci, me, count, in);
        memset(out, 0xa5, bytes + 8);
        torx_coll_alg_t chosen = torx_coll_select(g, TORX_COLL_ALLREDUCE, bytes, dt, op);
        torx_coll_alg_t want_auto = n <= 2 && bytes <= 2048 ? TORX_COLL_ALG_TORUS : TORX_COLL_ALG_CN;
        TASK_CHECK(chosen == want_auto, "auto allreduce dtype %d op %d %zu B: %s", dt, op, bytes,
                   torx_coll_alg_name(chosen));
        torx_status_t st = torx_coll_allreduce(g, alg, in, out, count, dt, op);
        TASK_CHECK(st == TORX_OK, "allreduce: %s", torx_last_error());
        TASK_CHECK(out[bytes] == 0xa5, "allreduce wrote past the vector");
        if (op == TORX_COLL_SUM && (dt == TORX_COLL_FLOAT || dt == TORX_COLL_DOUBLE)) {
            double *exact = malloc(sizeof(double) * (count + 1)),
                   *repro = malloc(sizeof(double) * (count + 1));
            expected_fpsum(dt, seed + (int)ci, n, boot->size, count, exact, repro);
            /* two tasks' sum is the same whichever path (a + b is exact in
             * either order) */
            if (alg == TORX_COLL_ALG_TORUS && bytes > 16384 && n > 2 && torxc_direct_applies(g))
                expected_group_sum(dt, seed + (int)ci, n, count, repro);
            else if (alg == TORX_COLL_ALG_TORUS)
                expected_sorted_sum(dt, seed + (int)ci, n, count, repro);
            for (size_t i = 0; i < count; i++) {
                double got = dt == TORX_COLL_FLOAT ? ((float *)out)[i] : ((double *)out)[i];
                double w = dt == TORX_COLL_FLOAT ? (double)(float)repro[i] : repro[i];
                TASK_CHECK(memcmp(&got, &w, sizeof got) == 0,
                           "fpsum dtype %d count %zu [%zu]: %a, expected %a", dt, count, i, got,
                           w);
                double tol = (dt == TORX_COLL_FLOAT ? FLT_EPSILON : 1e-12) * 8 *
                             (fabs(exact[i]) + ldexp(1.0, -20));
                TASK_CHECK(fabs(got - exact[i]) <= tol, "fpsum [%zu]: %a, exact %a", i, got,
                           exact[i]);
            }
            free(exact);
            free(repro);
        } else {
            expected(dt, op, seed + (int)ci, n, count, want);
            TASK_CHECK(memcmp(out, want, bytes) == 0, "allreduce dtype %d op %d count %zu wrong",
                       dt, op, count);
        }
        /* in place, and reduce to a root that is not 0: both as the
         * out-of-place result, checked above */
        if (count > 0) {
            memcpy(want, out, bytes);
            memcpy(out, in, bytes);
            TASK_CHECK(torx_coll_allreduce(g, alg, NULL, out, count, dt, op) == TORX_OK, "%s",
                       torx_last_error());
            TASK_CHECK(memcmp(out, want, bytes) == 0, "in-place allreduce differs");
            int root = (int)(count % (size_t)n);
            unsigned char *rout = malloc(bytes);
            memset(rout, 0x5a, bytes);
            chosen = torx_coll_select(g, TORX_COLL_REDUCE, bytes, dt, op);
            TASK_CHECK(chosen == want_auto, "auto reduce: %s", torx_coll_alg_name(chosen));
            TASK_CHECK(torx_coll_reduce(g, alg, in, me == root ? rout : NULL, count, dt, op,
                                        root) == TORX_OK,
                       "%s", torx_last_error());
            if (me == root)
                TASK_CHECK(memcmp(rout, want, bytes) == 0, "reduce at root %d differs", root);
            /* in place at the root (MPI_IN_PLACE): its result overwrites
             * its input, which the other members read */
            if (me == root)
                memcpy(rout, in, bytes);
            TASK_CHECK(torx_coll_reduce(g, alg, me == root ? rout : in, me == root ? rout : NULL,
                                        count, dt, op, root) == TORX_OK,
                       "%s", torx_last_error());
            if (me == root)
                TASK_CHECK(memcmp(rout, want, bytes) == 0, "in-place reduce at root %d differs",
                           root);
            free(rout);
        }
        free(in);
        free(out);
        free(want);
    }
    return 0;
}

/* One torus bcast of len bytes from root (a group index): every byte
 * arrives, nothing past the buffer is touched. */
static int check_torus_bcast(torx_boot_t *boot, torx_coll_group_t *g, int me, size_t len,
                             int root, int seed)
{
    unsigned char *buf = malloc(len + 1);
    TASK_CHECK(buf != NULL, "malloc %zu", len);
    for (size_t i = 0; i < len; i++)
        buf[i] = me == root ? (unsigned char)raw(seed + 300, root, i) : 0xee;
    buf[len] = 0x77;
    TASK_CHECK(torx_coll_bcast(g, TORX_COLL_ALG_TORUS, buf, len, root) == TORX_OK,
               "torus bcast %zu from %d: %s", len, root, torx_last_error());
    for (size_t i = 0; i < len; i++)
        TASK_CHECK(buf[i] == (unsigned char)raw(seed + 300, root, i),
                   "torus bcast %zu from %d: byte %zu is %#x", len, root, i, buf[i]);
    TASK_CHECK(buf[len] == 0x77, "torus bcast wrote past the buffer");
    free(buf);
    return 0;
}

static int coll_task(torx_boot_t *boot, void *argp)
{
    const job_t *job = argp;
    torx_ctx_t *ctx;
    torx_coll_t *c;
    if (coll_open(boot, NULL, &ctx, &c))
        return 1;
    torx_coll_group_t *g = make_group(c, boot, job->perm);
    TASK_CHECK(g != NULL, "%s", torx_last_error());
    int n = boot->size, me = -1;
    for (int i = 0; i < n; i++)
        if (group_order(job->perm, n, i) == boot->rank)
            me = i;

    /* barrier: nobody leaves before the last arrives (tasks arrive late by rank) */
    for (int round = 0; round < 3; round++) {
        struct timespec d = {0, 2000000L * ((boot->rank + round) % 7)};
        nanosleep(&d, NULL);
        sh->before[boot->rank] = test_now();
        torx_coll_alg_t alg = torx_coll_select(g, TORX_COLL_BARRIER, 0, 0, 0);
        TASK_CHECK(alg == TORX_COLL_ALG_GI, "barrier: %s", torx_coll_alg_name(alg));
        TASK_CHECK(torx_coll_barrier(g, alg) == TORX_OK, "%s", torx_last_error());
        TASK_CHECK(strcmp(torx_coll_last_algorithm(g), "barrier:gi") == 0, "last %s",
                   torx_coll_last_algorithm(g));
        sh->after[boot->rank] = test_now();
        TASK_CHECK(torx_coll_barrier(g, alg) == TORX_OK, "%s", torx_last_error());
        for (int t = 0; t < n; t++)
            TASK_CHECK(sh->after[boot->rank] >= sh->before[t], "left before task %d arrived", t);
        TASK_CHECK(torx_coll_barrier(g, alg) == TORX_OK, "%s", torx_last_error());
    }

    /* reductions */
    for (int dt = 0; dt < TORX_COLL_NDTYPES; dt++)
        for (int op = 0; op < TORX_COLL_NOPS; op++) {
            int fp = dt == TORX_COLL_FLOAT || dt == TORX_COLL_DOUBLE;
            if (fp && op != TORX_COLL_SUM && op != TORX_COLL_MIN && op != TORX_COLL_MAX) {
                TASK_CHECK(torx_coll_select(g, TORX_COLL_ALLREDUCE, 64, (torx_coll_dtype_t)dt,
                                            (torx_coll_op_t)op) == TORX_COLL_ALG_FALLBACK,
                           "bitwise op on floats not refused");
                continue;
            }
            if (!job->reduce_all && !fp && op != (dt * 3 + job->perm) % TORX_COLL_NOPS)
                continue;
            if (check_reduce(boot, g, me, n, (torx_coll_dtype_t)dt, (torx_coll_op_t)op,
                             17 * dt + op))
                return 1;
        }

    /* the long torus reductions took the path this job allows: direct
     * reads of the others' buffers (one host, cross-memory attach, the
     * application's thread receiving), else the split exchange */
    if (n <= 8) {
        const int direct = torxc_direct_applies(g);
        TASK_CHECK(direct ? c->direct_calls > 0 && c->sent_calls == 0
                          : c->sent_calls > 0 && c->direct_calls == 0,
                   "long reductions: %" PRIu64 " by direct reads, %" PRIu64 " split (%s)",
                   c->direct_calls, c->sent_calls, direct ? "direct expected" : "split expected");
    }

    /* bcast from every root, sizes around packets and pipelines */
    static const size_t bsizes[] = {0, 1, 255, 256, 257, 1024, 1025, 5000};
    for (size_t si = 0; si < sizeof bsizes / sizeof bsizes[0]; si++)
        for (int root = 0; root < n; root++) {
            size_t len = bsizes[si];
            unsigned char *buf = malloc(len + 1);
            for (size_t i = 0; i < len; i++)
                buf[i] = me == root ? (unsigned char)raw(99, root, i) : 0xee;
            buf[len] = 0x77;
            torx_coll_alg_t alg = torx_coll_select(g, TORX_COLL_BCAST, len, 0, 0);
            /* auto: one injected packet at 2 tasks on cores of their own */
            const torx_coll_alg_t want_bcast =
                n == 2 && !c->oversubscribed && len <= TORXC_A2A_INJECT_MAX
                    ? TORX_COLL_ALG_PACED
                    : TORX_COLL_ALG_FALLBACK;
            TASK_CHECK(alg == want_bcast, "auto bcast %zu: %s", len, torx_coll_alg_name(alg));
            alg = TORX_COLL_ALG_CN; /* only when forced */
            TASK_CHECK(torx_coll_bcast(g, alg, buf, len, root) == TORX_OK, "%s",
                       torx_last_error());
            for (size_t i = 0; i < len; i++)
                TASK_CHECK(buf[i] == (unsigned char)raw(99, root, i),
                           "bcast %zu from %d: byte %zu", len, root, i);
            TASK_CHECK(buf[len] == 0x77, "bcast wrote past the buffer");
            free(buf);
        }

    /* paced bcast: from every root, sizes around one packet, a staged
     * piece and the rendezvous, back to back with no barrier between, so
     * that a fast root's next bcast arrives early (as bounce copies and
     * as deferred rendezvous), with a paced alltoall between the two
     * repetitions of each (they share the group's sequence numbers) */
    static const size_t psizes[] = {0,
                                    1,
                                    228,
                                    241,
                                    TORXC_STAGED_BCAST_MIN_BYTES - 1,
                                    TORXC_STAGED_BCAST_MIN_BYTES,
                                    5000,
                                    16384,
                                    16385,
                                    65536,
                                    65537,
                                    100000};
    for (size_t si = 0; si < sizeof psizes / sizeof psizes[0]; si++)
        for (int rep = 0; rep < 2; rep++) {
            for (int root = 0; root < n; root++) {
                size_t len = psizes[si];
                unsigned char *buf = malloc(len + 1);
                for (size_t i = 0; i < len; i++)
                    buf[i] = me == root ? (unsigned char)raw(77 + rep, root, i) : 0xee;
                buf[len] = 0x77;
                torx_proto_stats_t before[TORX_PROTO_COUNT], after[TORX_PROTO_COUNT];
                torx_stats(ctx, before);
                const uint64_t staged_before = c->bc_staged_pieces;
                TASK_CHECK(torx_coll_bcast(g, TORX_COLL_ALG_PACED, buf, len, root) == TORX_OK,
                           "paced bcast %zu from %d: %s", len, root, torx_last_error());
                torx_stats(ctx, after);
                /* With a multi-reader staging area (shm, TORX_MSTAGE_BYTES
                 * not 0) every block past TORXC_STAGED_BCAST_MIN_BYTES
                 * goes through the root's area, in pieces of the most it
                 * takes. Otherwise a block that would go by rendezvous but
                 * fits one staging ring goes eager on one host (direct
                 * reads possible); longer ones, and every one in other
                 * jobs, by rendezvous. */
                if (me == root) {
                    const size_t piece = torx_mstage_max(c->dev);
                    const int staged = torxc_staged_bcast_applies(g, len);
                    TASK_CHECK(staged == (piece > 0 && len >= TORXC_STAGED_BCAST_MIN_BYTES),
                               "torxc_staged_bcast_applies(%zu)", len);
                    const int eager = c->direct_reads && len <= 2 * torx_stage_max(c->dev);
                    uint64_t want = 0;
                    for (int m = 0; m < n; m++)
                        want += m != me && !staged && !eager &&
                                torx_choose_protocol(ctx, g->tasks[m], TORXC_A2A_HDR_BYTES, len) ==
                                    TORX_PROTO_RZV;
                    const uint64_t rzv = after[TORX_PROTO_RZV].sent - before[TORX_PROTO_RZV].sent;
                    TASK_CHECK(rzv == want,
                               "paced bcast of %zu B: %llu rendezvous sends, direct reads %d, "
                               "multi-reader pieces of %zu B",
                               len, (unsigned long long)rzv, c->direct_reads, piece);
                    const uint64_t pieces = c->bc_staged_pieces - staged_before;
                    const uint64_t want_pieces = staged ? (len + piece - 1) / piece : 0;
                    TASK_CHECK(pieces == want_pieces,
                               "paced bcast of %zu B: %llu pieces staged, %llu expected", len,
                               (unsigned long long)pieces, (unsigned long long)want_pieces);
                }
                for (size_t i = 0; i < len; i++)
                    TASK_CHECK(buf[i] == (unsigned char)raw(77 + rep, root, i),
                               "paced bcast %zu from %d: byte %zu is %#x", len, root, i, buf[i]);
                TASK_CHECK(buf[len] == 0x77, "paced bcast wrote past the buffer");
                free(buf);
            }
            if (rep == 0) {
                int64_t a[MAX_TASKS], b[MAX_TASKS];
                for (int i = 0; i < n; i++)
                    a[i] = (int64_t)me * 1000 + i;
                TASK_CHECK(torx_coll_alltoall(g, TORX_COLL_ALG_PACED, a, b, sizeof a[0]) == TORX_OK,
                           "%s", torx_last_error());
                for (int i = 0; i < n; i++)
                    TASK_CHECK(b[i] == (int64_t)i * 1000 + me, "alltoall between bcasts: [%d]", i);
            }
        }

    /* torus bcast (deposit bit): from every root, sizes around packets,
     * routes and the ready threshold, back to back so that a fast root's
     * packets of the next bcast come early */
    static const size_t tsizes[] = {0, 1, 223, 224, 225, 700, 1000, 5000, 65536, 65537, 300000};
    for (size_t si = 0; si < sizeof tsizes / sizeof tsizes[0]; si++)
        for (int root = 0; root < n; root += tsizes[si] > 5000 ? 3 : 1)
            for (int rep = 0; rep < 2; rep++)
                if (check_torus_bcast(boot, g, me, tsizes[si], root, rep))
                    return 1;
    /* every task was a root: in co mode its communication thread sent its
     * share of the lines, in the other modes there is no thread */
    if (torx_mode(ctx) == TORX_MODE_CO)
        TASK_CHECK(c->bc_sent_thread > 0 && c->bc_sent_task > 0,
                   "co mode: line sends by the task %" PRIu64 ", by the thread %" PRIu64,
                   c->bc_sent_task, c->bc_sent_thread);
    else
        TASK_CHECK(c->bc_sent_thread == 0 && (g->box_dims == 0 || c->bc_sent_task > 0),
                   "line sends by the task %" PRIu64 ", by a thread %" PRIu64, c->bc_sent_task,
                   c->bc_sent_thread);

    /* allgather, out of place and in place: on the collective network
     * (auto, small blocks) and on the torus (forced: read in place where
     * torxc_direct_applies, else sent), which counts its calls */
    static const size_t gsizes[] = {0, 1, 3, 8, 100, 256, 700, 40000, 100003};
    const uint64_t direct_before = c->direct_calls, sent_before = c->sent_calls;
    for (size_t si = 0; si < 2 * sizeof gsizes / sizeof gsizes[0]; si++)
        for (int inplace = 0; inplace < 2; inplace++) {
            const int torus = si >= sizeof gsizes / sizeof gsizes[0];
            size_t b = gsizes[si % (sizeof gsizes / sizeof gsizes[0])];
            if (!torus && b > 700)
                continue;
            unsigned char *mine = malloc(b + 1), *all = malloc(b * (size_t)n + 1);
            for (size_t i = 0; i < b; i++)
                mine[i] = (unsigned char)raw(7, me, i);
            memset(all, 0xcc, b * (size_t)n + 1);
            if (inplace)
                memcpy(all + (size_t)me * b, mine, b);
            torx_coll_alg_t alg = torx_coll_select(g, TORX_COLL_ALLGATHER, b, 0, 0);
            /* auto (TORX_COLL_CN_MAX is 1000000 here): one-packet blocks
             * exchanged at 2 tasks; the collective network on more than 2
             * tasks; else blocks from 32 KiB read in place */
            const torx_coll_alg_t want =
                n == 2 && b <= TORXC_A2A_INJECT_MAX     ? TORX_COLL_ALG_TORUS
                : n > 2 && b * (size_t)n <= 1000000     ? TORX_COLL_ALG_CN
                : torxc_direct_applies(g) && b >= 32768 ? TORX_COLL_ALG_TORUS
                                                        : TORX_COLL_ALG_FALLBACK;
            TASK_CHECK(alg == want, "auto allgather of %zu on %d: %s", b, n,
                       torx_coll_alg_name(alg));
            alg = torus ? TORX_COLL_ALG_TORUS : TORX_COLL_ALG_CN;
            TASK_CHECK(torx_coll_allgather(g, alg, inplace ? NULL : mine, all, b) == TORX_OK,
                       "%s allgather of %zu: %s", torx_coll_alg_name(alg), b, torx_last_error());
            for (int w = 0; w < n; w++)
                for (size_t i = 0; i < b; i++)
                    TASK_CHECK(all[(size_t)w * b + i] == (unsigned char)raw(7, w, i),
                               "allgather %zu: block %d byte %zu", b, w, i);
            TASK_CHECK(all[b * (size_t)n] == 0xcc, "allgather wrote past the buffer");
            free(mine);
            free(all);
        }
    {
        /* one-packet blocks are always sent */
        uint64_t torus_calls = 0, one_packet = 0;
        for (size_t si = 0; si < sizeof gsizes / sizeof gsizes[0]; si++) {
            torus_calls += 2;
            one_packet += gsizes[si] <= TORXC_A2A_INJECT_MAX ? 2 : 0;
        }
        const int direct = torxc_direct_applies(g);
        TASK_CHECK(c->direct_calls - direct_before == (direct ? torus_calls - one_packet : 0) &&
                       c->sent_calls - sent_before == (direct ? one_packet : torus_calls),
                   "torus allgathers: %" PRIu64 " by direct reads, %" PRIu64 " sent (%s)",
                   c->direct_calls - direct_before, c->sent_calls - sent_before,
                   direct ? "direct expected" : "sent expected");
    }

    /* paced alltoall and alltoallv, back to back (a fast task's next
     * alltoall overlaps a slow one's current) */
    static const size_t asizes[] = {0, 1, 200, 1000, 5000, 40000, 300000};
    for (size_t si = 0; si < sizeof asizes / sizeof asizes[0]; si++)
        for (int rep = 0; rep < 3; rep++) {
            size_t b = asizes[si];
            unsigned char *sb = malloc(b * (size_t)n + 1), *rb = malloc(b * (size_t)n + 1);
            for (int d = 0; d < n; d++)
                for (size_t i = 0; i < b; i++)
                    sb[(size_t)d * b + i] = (unsigned char)raw(rep + 11, me * 64 + d, i);
            memset(rb, 0xdd, b * (size_t)n + 1);
            torx_coll_alg_t alg = torx_coll_select(g, TORX_COLL_ALLTOALL, b, 0, 0);
            TASK_CHECK(alg == TORX_COLL_ALG_PACED, "alltoall: %s", torx_coll_alg_name(alg));
            TASK_CHECK(torx_coll_alltoall(g, alg, sb, rb, b) == TORX_OK, "%s", torx_last_error());
            for (int src = 0; src < n; src++)
                for (size_t i = 0; i < b; i++)
                    TASK_CHECK(rb[(size_t)src * b + i] == (unsigned char)raw(rep + 11, src * 64 + me, i),
                               "alltoall %zu: from %d byte %zu", b, src, i);
            TASK_CHECK(rb[b * (size_t)n] == 0xdd, "alltoall wrote past the buffer");
            free(sb);
            free(rb);
        }
    for (int rep = 0; rep < 4; rep++) {
        /* member d sends (d + to) % 7 * 997 bytes to member `to`, packed in
         * reverse order of destinations */
        size_t sc[MAX_TASKS], sd[MAX_TASKS], rc[MAX_TASKS], rd[MAX_TASKS], so = 0, ro = 0;
        for (int d = n - 1; d >= 0; d--) {
            sc[d] = (size_t)((me + d + rep) % 7) * 997;
            sd[d] = so;
            so += sc[d];
        }
        for (int d = 0; d < n; d++) {
            rc[d] = (size_t)((d + me + rep) % 7) * 997;
            rd[d] = ro;
            ro += rc[d];
        }
        unsigned char *sb = malloc(so + 1), *rb = malloc(ro + 1);
        for (int d = 0; d < n; d++)
            for (size_t i = 0; i < sc[d]; i++)
                sb[sd[d] + i] = (unsigned char)raw(rep + 50, me * 64 + d, i);
        torx_coll_alg_t alg = torx_coll_select(g, TORX_COLL_ALLTOALLV, 0, 0, 0);
        TASK_CHECK(alg == TORX_COLL_ALG_PACED, "alltoallv: %s", torx_coll_alg_name(alg));
        TASK_CHECK(torx_coll_alltoallv(g, alg, sb, sc, sd, rb, rc, rd) == TORX_OK, "%s",
                   torx_last_error());
        for (int src = 0; src < n; src++)
            for (size_t i = 0; i < rc[src]; i++)
                TASK_CHECK(rb[rd[src] + i] == (unsigned char)raw(rep + 50, src * 64 + me, i),
                           "alltoallv from %d byte %zu", src, i);
        free(sb);
        free(rb);
    }

    /* a subset cannot use the collective network or the global interrupt */
    if (n > 2) {
        int sub[MAX_TASKS], k = 0, mine = -1;
        for (int i = 0; i < n; i += 2) {
            if (i == boot->rank)
                mine = k;
            sub[k++] = i;
        }
        if (mine >= 0) {
            torx_coll_group_t *s;
            TASK_CHECK(torx_coll_group_create(c, 7, k, sub, mine, &s) == TORX_OK, "%s",
                       torx_last_error());
            TASK_CHECK(torx_coll_select(s, TORX_COLL_BARRIER, 0, 0, 0) == TORX_COLL_ALG_FALLBACK,
                       "subset barrier not a fallback");
            /* the direct exchange needs no class route: it serves small subsets */
            torx_coll_alg_t want = k <= 2 ? TORX_COLL_ALG_TORUS : TORX_COLL_ALG_FALLBACK;
            TASK_CHECK(torx_coll_select(s, TORX_COLL_ALLREDUCE, 8, TORX_COLL_S64,
                                        TORX_COLL_SUM) == want,
                       "subset allreduce of %d not %s", k, torx_coll_alg_name(want));
            TASK_CHECK(strcmp(torx_coll_last_algorithm(s),
                              k <= 2 ? "allreduce:torus" : "allreduce:mpich") == 0,
                       "last %s", torx_coll_last_algorithm(s));
            if (k <= 2) {
                int64_t one = 1, sum = 0;
                TASK_CHECK(torx_coll_allreduce(s, want, &one, &sum, 1, TORX_COLL_S64,
                                               TORX_COLL_SUM) == TORX_OK && sum == k,
                           "subset exchange sum %lld", (long long)sum);
            }
            TASK_CHECK(torx_coll_barrier(s, TORX_COLL_ALG_GI) == TORX_ERR_INVAL,
                       "gi ran on a subset");
            /* The even tasks fill a box of the torus (on 3 tasks a run of
             * two nodes that wraps round the ring of 3; on 4 and 8 a line
             * and a plane; in vn mode the t = 0 tasks), except on 6, whose
             * 3x2 torus puts them at (0,0), (2,0) and (1,1). */
            if (n != 6) {
                for (int root = 0; root < k; root++)
                    if (check_torus_bcast(boot, s, mine, 3000, root, 5) ||
                        check_torus_bcast(boot, s, mine, 100000, root, 6))
                        return 1;
            } else {
                unsigned char b[8] = {0};
                TASK_CHECK(torx_coll_bcast(s, TORX_COLL_ALG_TORUS, b, 8, 0) == TORX_ERR_INVAL,
                           "torus bcast ran on a group that is not a box");
            }
            torx_coll_group_free(s);
        }
    }

    torx_coll_group_free(g);
    return coll_close(boot, ctx, c);
}

static void map_shared(void)
{
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(sh, MAP_FAILED);
    memset(sh, 0, sizeof *sh);
}

static void unmap_shared(void)
{
    munmap(sh, sizeof *sh);
}

static void clear_env(void)
{
    static const char *const vars[] = {"TORX_MODE",
                                       "TORX_CHAOS",
                                       "TORX_MAPPING",
                                       "TORX_TORUS",
                                       "TORX_COLL",
                                       "TORX_COLL_BARRIER",
                                       "TORX_COLL_BCAST",
                                       "TORX_COLL_ALLREDUCE",
                                       "TORX_COLL_REDUCE",
                                       "TORX_COLL_ALLGATHER",
                                       "TORX_COLL_ALLTOALL",
                                       "TORX_COLL_ALLTOALLV",
                                       "TORX_COLL_CN_MAX",
                                       "TORX_RZV_DATA",
                                       "TORX_CORES_PER_NODE",
                                       "TORX_MSTAGE_BYTES",
                                       NULL};
    for (int i = 0; vars[i]; i++)
        unsetenv(vars[i]);
    /* every size in the tests on the collective network */
    setenv("TORX_COLL_CN_MAX", "1000000", 1);
    /* The paced bcast's check predicts which blocks go eager: copies slowed
     * by the shared cores of make -j check must not send them by rendezvous. */
    setenv("TORX_STAGE_COST_MAX", "65535", 1);
}

START_TEST(every_reduction_2_tasks)
{
    clear_env();
    job_t job = {.ntasks = 2, .perm = 0, .reduce_all = 1};
    RUN_JOB(2, coll_task, &job);
}
END_TEST

START_TEST(task_counts_and_orders)
{
    static const int sizes[] = {3, 4, 6, 8};
    clear_env();
    /* the paced bcast without a multi-reader staging area, with the
     * default one, and with the smallest (pieces of 32 KiB: a 100000-byte
     * bcast fills it and wraps) */
    static const char *const mstage[] = {"0", "", "65536", "65536"};
    for (int s = 0; s < 4; s++) {
        setenv("TORX_MSTAGE_BYTES", mstage[s], 1);
        for (int perm = 0; perm < 4; perm += (s == 0 ? 1 : 3)) {
            job_t job = {.ntasks = sizes[s], .perm = perm};
            RUN_JOB(sizes[s], coll_task, &job);
        }
    }
    unsetenv("TORX_MSTAGE_BYTES");
}
END_TEST

START_TEST(vn_mode_and_chaos)
{
    clear_env();
    setenv("TORX_MODE", "vn", 1);
    setenv("TORX_CHAOS", "7", 1);
    setenv("TORX_MSTAGE_BYTES", "65536", 1);
    job_t job = {.ntasks = 4, .perm = 1, .reduce_all = 1};
    RUN_JOB(4, coll_task, &job);
    clear_env();
}
END_TEST

/* Coprocessor mode: the communication thread moves rendezvous data of the
 * paced alltoall while the task runs the collective (ThreadSanitizer runs
 * this: make check-tsan). */
START_TEST(co_mode)
{
    clear_env();
    setenv("TORX_MODE", "co", 1);
    job_t job = {.ntasks = 2, .perm = 1};
    RUN_JOB(2, coll_task, &job);
    clear_env();
}
END_TEST

/* ---- the floating sum does not depend on who holds what ------------------------ */

/* Group index i holds input i, so each permutation hands the inputs to other
 * tasks (and the mapping file puts the tasks elsewhere on the torus). */
static int fpsum_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_ctx_t *ctx;
    torx_coll_t *c;
    if (coll_open(boot, NULL, &ctx, &c))
        return 1;
    for (int perm = 0; perm < 4; perm++) {
        torx_coll_group_t *g = make_group(c, boot, perm);
        TASK_CHECK(g != NULL, "%s", torx_last_error());
        int me = -1;
        for (int i = 0; i < boot->size; i++)
            if (group_order(perm, boot->size, i) == boot->rank)
                me = i;
        double in[64], out[64];
        make_input(TORX_COLL_DOUBLE, TORX_COLL_SUM, 5, me, 64, in);
        TASK_CHECK(torx_coll_allreduce(g, TORX_COLL_ALG_CN, in, out, 64, TORX_COLL_DOUBLE,
                                       TORX_COLL_SUM) == TORX_OK,
                   "%s", torx_last_error());
        memcpy(sh->sums[perm][boot->rank], out, sizeof out);
        TASK_CHECK(torx_coll_allreduce(g, TORX_COLL_ALG_TORUS, in, out, 16, TORX_COLL_DOUBLE,
                                       TORX_COLL_SUM) == TORX_OK,
                   "%s", torx_last_error());
        memcpy(sh->xsums[perm][boot->rank], out, 16 * sizeof(double));
        torx_coll_group_free(g);
    }
    return coll_close(boot, ctx, c);
}

/* A long torus allreduce whose members disagree on the length (an
 * erroneous program): every member returns TORX_ERR_PROTO naming the
 * lengths, none hangs and none reads past a buffer; the group still works
 * afterwards. */
static int mismatch_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_ctx_t *ctx;
    torx_coll_t *c;
    if (coll_open(boot, NULL, &ctx, &c))
        return 1;
    torx_coll_group_t *g = make_group(c, boot, 0);
    TASK_CHECK(g != NULL, "%s", torx_last_error());
    if (!torxc_direct_applies(g)) { /* no cross-memory attach here: nothing to test */
        if (boot->rank == 0)
            fprintf(stderr, "long_allreduce_length_mismatch: skipped (bulk path %s)\n",
                    torx_bulk_path(torx_ctx_device(ctx)));
        torx_coll_group_free(g);
        torx_coll_finalize(c);
        return torx_finalize(ctx) == TORX_OK ? 0 : 1;
    }
    enum { LEN = 20000 };
    int64_t *in = malloc((LEN + 1) * sizeof *in), *out = malloc((LEN + 1) * sizeof *out);
    for (size_t i = 0; i <= LEN; i++)
        in[i] = (int64_t)i * (boot->rank + 1);
    const size_t count = boot->rank == 1 ? LEN + 1 : LEN;
    torx_status_t st =
        torx_coll_allreduce(g, TORX_COLL_ALG_TORUS, in, out, count, TORX_COLL_S64, TORX_COLL_SUM);
    TASK_CHECK(st == TORX_ERR_PROTO && strstr(torx_last_error(), "20001") != NULL,
               "lengths 20000/20001: status %d, %s", st, torx_last_error());
    st = torx_coll_allreduce(g, TORX_COLL_ALG_TORUS, in, out, LEN, TORX_COLL_S64, TORX_COLL_SUM);
    TASK_CHECK(st == TORX_OK, "after the mismatch: %s", torx_last_error());
    const int64_t ranks = (int64_t)boot->size * (boot->size + 1) / 2;
    for (size_t i = 0; i < LEN; i++)
        TASK_CHECK(out[i] == (int64_t)i * ranks, "[%zu] = %" PRId64, i, out[i]);
    free(in);
    free(out);
    torx_coll_group_free(g);
    return coll_close(boot, ctx, c);
}

START_TEST(long_allreduce_length_mismatch)
{
    clear_env();
    RUN_JOB(3, mismatch_task, NULL);
}
END_TEST

START_TEST(fpsum_bitwise_in_every_order)
{
    clear_env();
    map_shared();
    /* a mapping that is not the XYZT order: 4 tasks on 2x2, placed by hand */
    char path[64];
    snprintf(path, sizeof path, "/tmp/torx-test-coll-%d.map", (int)getpid());
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("1 1 0 0\n0 0 0 0\n1 0 0 0\n0 1 0 0\n", f);
    fclose(f);
    for (int mapped = 0; mapped < 2; mapped++) {
        if (mapped) {
            setenv("TORX_TORUS", "2x2x1", 1);
            setenv("TORX_MAPPING", path, 1);
        }
        RUN_JOB(4, fpsum_task, NULL);
        for (int perm = 0; perm < 4; perm++)
            for (int t = 0; t < 4; t++)
                ck_assert_msg(memcmp(sh->sums[perm][t], sh->sums[0][0], sizeof sh->sums[0][0]) ==
                                  0,
                              "mapping %d, order %d, task %d: a different sum", mapped, perm, t);
        for (int perm = 0; perm < 4; perm++)
            for (int t = 0; t < 4; t++)
                ck_assert_msg(memcmp(sh->xsums[perm][t], sh->xsums[0][0],
                                     sizeof sh->xsums[0][0]) == 0,
                              "exchange: mapping %d, order %d, task %d: a different sum", mapped,
                              perm, t);
    }
    unlink(path);
    unmap_shared();
    clear_env();
}
END_TEST

/* ---- the floating sum's exponent guess --------------------------------------- */

/* Task t's input for lane i at scale 2^k, and the reproducible sum of every
 * task's, by the device's lane functions. */
static double guess_input(int t, size_t i, int k)
{
    return ldexp((t + 1) * (1.0 + (double)i / 8.0) * (i % 2 ? -1.0 : 1.0), k);
}

/* The calls of guess_task: a scale, elements odd and odd2 2^70 larger on
 * every task, and element solo 2^70 larger on task 0 only, whose values
 * are the smallest, so it is the one task above the guess there while
 * another still equals it. */
typedef struct guess_call {
    int scale;
    size_t odd, odd2, solo;
} guess_call_t;

static int guess_scale(const guess_call_t *call, int t, size_t i)
{
    const int up = i == call->odd || i == call->odd2 || (i == call->solo && t == 0);
    return call->scale + (up ? 70 : 0);
}

static double guess_expected(int job, const guess_call_t *call, size_t i)
{
    const int h = torx_cn_fpsum_headroom(job);
    int64_t emax = 0, sum = 0;
    for (int t = 0; t < job; t++) {
        const int64_t e = torx_cn_fpsum_exponent(guess_input(t, i, guess_scale(call, t, i)));
        emax = e > emax ? e : emax;
    }
    for (int t = 0; t < job; t++)
        sum += torx_cn_fpsum_encode(guess_input(t, i, guess_scale(call, t, i)), emax, h);
    return torx_cn_fpsum_decode(sum, emax, h);
}

/* A sequence of sums whose exponents stay, change and stay again: the first
 * has no guess, a repeat holds, a rescaled vector misses (the two-pass sum
 * runs) and holds when repeated, and a vector with one element rescaled
 * misses: element 3, in the first guessed round, then (vectors of more than
 * 66) element 66 as well, in the third or later (a round carries 16 to 30
 * elements); last, element 5 rescaled on one task only, which the count of
 * tasks above the guess must catch (the count of tasks equal to it says
 * "held"). Past TORXC_FP_GUESS_MAX elements no guess is tried (neither
 * counted held nor missed). Every result is the two-pass result bit for
 * bit. argp: the length. */
static int guess_task(torx_boot_t *boot, void *argp)
{
    const size_t n = (size_t)(uintptr_t)argp;
    torx_ctx_t *ctx;
    torx_coll_t *c;
    if (coll_open(boot, NULL, &ctx, &c))
        return 1;
    torx_coll_group_t *g = make_group(c, boot, 0);
    TASK_CHECK(g != NULL, "%s", torx_last_error());
    enum { MAX_N = 2 * TORXC_FP_GUESS_MAX, NONE = MAX_N };
    TASK_CHECK(n <= MAX_N, "length %zu", n);
    const guess_call_t calls[] = {
        {0, NONE, NONE, NONE},  {0, NONE, NONE, NONE}, {40, NONE, NONE, NONE},
        {40, NONE, NONE, NONE}, {-30, 3, NONE, NONE},  {-30, 3, NONE, NONE},
        {-30, 3, 66, NONE},     {-30, 3, 66, NONE},    {-30, 3, 66, 5},
    };
    const int guessed = n <= TORXC_FP_GUESS_MAX;
    const int held[] = {0, 1, 0, 1, 0, 1, n > 66 ? 0 : 1, 1, 0};
    const size_t ncalls = sizeof calls / sizeof calls[0];
    uint64_t want_held = 0;
    for (size_t k = 0; k < ncalls; k++) {
        const guess_call_t *call = &calls[k];
        const int want = held[k] && guessed;
        double in[MAX_N], out[MAX_N];
        for (size_t i = 0; i < n; i++)
            in[i] = guess_input(boot->rank, i, guess_scale(call, boot->rank, i));
        const uint64_t held_before = c->fp_guess_held;
        TASK_CHECK(torx_coll_allreduce(g, TORX_COLL_ALG_CN, in, out, n, TORX_COLL_DOUBLE,
                                       TORX_COLL_SUM) == TORX_OK,
                   "%s", torx_last_error());
        TASK_CHECK((c->fp_guess_held - held_before) == (uint64_t)want,
                   "length %zu, call %zu: the guess %s", n, k, want ? "missed" : "held");
        want_held += (uint64_t)want;
        for (size_t i = 0; i < n; i++) {
            const double expect = guess_expected(boot->size, call, i);
            TASK_CHECK(memcmp(&out[i], &expect, sizeof expect) == 0,
                       "length %zu, call %zu, element %zu: %a, expected %a", n, k, i, out[i],
                       expect);
        }
    }
    TASK_CHECK(c->fp_guess_held == want_held &&
                   c->fp_guess_missed == (guessed ? ncalls - want_held : 0),
               "guesses held %" PRIu64 ", missed %" PRIu64, c->fp_guess_held, c->fp_guess_missed);
    torx_coll_group_free(g);
    return coll_close(boot, ctx, c);
}

START_TEST(fpsum_guess)
{
    clear_env();
    RUN_JOB(3, guess_task, (void *)(uintptr_t)7);
    RUN_JOB(3, guess_task, (void *)(uintptr_t)70);
    RUN_JOB(8, guess_task, (void *)(uintptr_t)TORXC_FP_GUESS_MAX);
    RUN_JOB(2, guess_task, (void *)(uintptr_t)(TORXC_FP_GUESS_MAX + 1));
    clear_env();
}
END_TEST

/* ---- an oversubscribed host: agreed by every task, the paced bcast -------------- */

/* Only the last task says its host is oversubscribed: every task must come
 * out of torx_coll_init agreeing that the job is, and auto must then take
 * the paced bcast everywhere on a group of more than 4 tasks for a block of
 * TORXC_STAGED_BCAST_MIN_BYTES or more through a multi-reader staging
 * area, else 4 KiB or more (a task that picked another would hang), and
 * MPICH's for a shorter block; on a group of 4, the paced bcast from 32 KiB
 * through a multi-reader staging area, else MPICH's. Run with the area
 * and without (TORX_MSTAGE_BYTES=0). */
static int oversub_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_coll_attr_t cattr = {.handler = TORX_COLL_DEFAULT_HANDLER,
                              .oversubscribed = boot->rank == boot->size - 1};
    torx_ctx_t *ctx;
    torx_coll_t *c;
    if (coll_open(boot, &cattr, &ctx, &c))
        return 1;
    TASK_CHECK(c->oversubscribed == 1, "task %d did not learn the job is oversubscribed",
               boot->rank);
    torx_coll_group_t *g = make_group(c, boot, 0);
    TASK_CHECK(g != NULL, "%s", torx_last_error());
    const int staged = torx_mstage_max(c->dev) > 0;
    TASK_CHECK(staged == (getenv("TORX_MSTAGE_BYTES") == NULL), "multi-reader staging %d", staged);
    /* a floating SUM on the collective network up to 256 B when
     * oversubscribed, unless TORX_COLL_CN_MAX says otherwise; other types
     * up to TORX_COLL_CN_MAX (512 B by default) */
    const int cn_set = getenv("TORX_COLL_CN_MAX") != NULL;
    static const struct {
        size_t bytes;
        torx_coll_dtype_t dtype;
        torx_coll_op_t op;
        int cn, cn_if_set;
    } reds[] = {
        {256, TORX_COLL_DOUBLE, TORX_COLL_SUM, 1, 1}, {512, TORX_COLL_DOUBLE, TORX_COLL_SUM, 0, 1},
        {512, TORX_COLL_FLOAT, TORX_COLL_SUM, 0, 1},  {512, TORX_COLL_DOUBLE, TORX_COLL_MAX, 1, 1},
        {512, TORX_COLL_S64, TORX_COLL_SUM, 1, 1},    {520, TORX_COLL_S64, TORX_COLL_SUM, 0, 0}};
    for (size_t k = 0; k < sizeof reds / sizeof reds[0]; k++) {
        const int want = cn_set ? reds[k].cn_if_set : reds[k].cn;
        const torx_coll_alg_t alg =
            torx_coll_select(g, TORX_COLL_ALLREDUCE, reds[k].bytes, reds[k].dtype, reds[k].op);
        TASK_CHECK((alg == TORX_COLL_ALG_CN) == want, "auto allreduce of %zu B (case %zu): %s",
                   reds[k].bytes, k, torx_coll_alg_name(alg));
    }
    if (boot->rank < 4) {
        int four[4] = {0, 1, 2, 3};
        torx_coll_group_t *g4;
        TASK_CHECK(torx_coll_group_create(c, 9, 4, four, boot->rank, &g4) == TORX_OK, "%s",
                   torx_last_error());
        torx_coll_alg_t a4 = torx_coll_select(g4, TORX_COLL_BCAST, 70000, 0, 0);
        TASK_CHECK(a4 == (staged ? TORX_COLL_ALG_PACED : TORX_COLL_ALG_FALLBACK),
                   "auto bcast of 70000 B on 4 tasks: %s", torx_coll_alg_name(a4));
        a4 = torx_coll_select(g4, TORX_COLL_BCAST, 32767, 0, 0);
        TASK_CHECK(a4 == TORX_COLL_ALG_FALLBACK, "auto bcast of 32767 B on 4 tasks: %s",
                   torx_coll_alg_name(a4));
        torx_coll_group_free(g4);
    }
    const size_t from = staged ? TORXC_STAGED_BCAST_MIN_BYTES : 4096;
    const torx_coll_alg_t shorter = torx_coll_select(g, TORX_COLL_BCAST, from - 1, 0, 0);
    TASK_CHECK(shorter == TORX_COLL_ALG_FALLBACK, "auto bcast of %zu B: %s", from - 1,
               torx_coll_alg_name(shorter));
    const size_t sizes[] = {from, 70000};
    for (size_t si = 0; si < 2; si++) {
        const size_t len = sizes[si];
        unsigned char *buf = malloc(len);
        for (size_t i = 0; i < len; i++)
            buf[i] = boot->rank == 1 ? (unsigned char)raw(5, 1, i) : 0;
        torx_coll_alg_t alg = torx_coll_select(g, TORX_COLL_BCAST, len, 0, 0);
        TASK_CHECK(alg == TORX_COLL_ALG_PACED, "auto bcast of %zu B: %s", len,
                   torx_coll_alg_name(alg));
        TASK_CHECK(torx_coll_bcast(g, alg, buf, len, 1) == TORX_OK, "%s", torx_last_error());
        TASK_CHECK(strcmp(torx_coll_last_algorithm(g), "bcast:paced") == 0, "last %s",
                   torx_coll_last_algorithm(g));
        for (size_t i = 0; i < len; i++)
            TASK_CHECK(buf[i] == (unsigned char)raw(5, 1, i), "byte %zu of %zu", i, len);
        free(buf);
    }
    /* a paced alltoall on a group whose first paced collective was a
     * staged bcast (which makes only part of the group's paced state) */
    int64_t a[8], b[8];
    for (int i = 0; i < boot->size; i++)
        a[i] = (int64_t)boot->rank * 100 + i;
    TASK_CHECK(torx_coll_alltoall(g, TORX_COLL_ALG_PACED, a, b, sizeof a[0]) == TORX_OK, "%s",
               torx_last_error());
    for (int i = 0; i < boot->size; i++)
        TASK_CHECK(b[i] == (int64_t)i * 100 + boot->rank, "alltoall block %d: %lld", i,
                   (long long)b[i]);
    torx_coll_group_free(g);
    return coll_close(boot, ctx, c);
}

START_TEST(oversubscribed_agreed)
{
    clear_env();
    unsetenv("TORX_COLL_CN_MAX");
    RUN_JOB(5, oversub_task, NULL);
    setenv("TORX_MSTAGE_BYTES", "0", 1);
    setenv("TORX_COLL_CN_MAX", "512", 1);
    RUN_JOB(5, oversub_task, NULL);
    clear_env();
}
END_TEST

/* ---- selection and the environment ---------------------------------------------- */

static int select_task(torx_boot_t *boot, void *argp)
{
    const char *expect = argp; /* "<kind letter><alg>" pairs, checked below */
    (void)expect;
    torx_ctx_t *ctx;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    torx_coll_t *c;
    torx_status_t st = torx_coll_init(ctx, NULL, &c);
    const char *bad = getenv("TEST_EXPECT_ENV_ERROR");
    if (bad) {
        TASK_CHECK(st == TORX_ERR_ENV, "bad %s accepted", bad);
        TASK_CHECK(strstr(torx_last_error(), bad) != NULL, "error does not name %s: %s", bad,
                   torx_last_error());
        TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
        return 0;
    }
    TASK_CHECK(st == TORX_OK, "%s", torx_last_error());
    torx_coll_group_t *g = make_group(c, boot, 0);
    TASK_CHECK(g != NULL, "%s", torx_last_error());
    const char *want_barrier = getenv("TEST_BARRIER"), *want_allreduce = getenv("TEST_ALLREDUCE"),
               *want_big = getenv("TEST_ALLREDUCE_BIG");
    torx_coll_alg_t a = torx_coll_select(g, TORX_COLL_BARRIER, 0, 0, 0);
    TASK_CHECK(strcmp(torx_coll_alg_name(a), want_barrier) == 0, "barrier %s, want %s",
               torx_coll_alg_name(a), want_barrier);
    if (a != TORX_COLL_ALG_FALLBACK)
        TASK_CHECK(torx_coll_barrier(g, a) == TORX_OK, "%s", torx_last_error());
    a = torx_coll_select(g, TORX_COLL_ALLREDUCE, 8, TORX_COLL_S64, TORX_COLL_SUM);
    TASK_CHECK(strcmp(torx_coll_alg_name(a), want_allreduce) == 0, "allreduce %s, want %s",
               torx_coll_alg_name(a), want_allreduce);
    a = torx_coll_select(g, TORX_COLL_ALLREDUCE, 1 << 20, TORX_COLL_S64, TORX_COLL_SUM);
    TASK_CHECK(strcmp(torx_coll_alg_name(a), want_big) == 0, "1 MiB allreduce %s, want %s",
               torx_coll_alg_name(a), want_big);
    a = torx_coll_select(g, TORX_COLL_BCAST, TORX_COLL_NONCONTIG, 0, 0);
    TASK_CHECK(a == TORX_COLL_ALG_FALLBACK, "non-contiguous bcast ran %s", torx_coll_alg_name(a));
    /* auto only where neither TORX_COLL nor the collective's own variable
     * chose: the netmod may then pick among MPICH's algorithms itself */
    const char *global = getenv("TORX_COLL"), *barrier = getenv("TORX_COLL_BARRIER");
    const int global_auto = global == NULL || strcmp(global, "auto") == 0;
    TASK_CHECK(torx_coll_auto(g, TORX_COLL_ALLREDUCE) == global_auto, "allreduce auto: %d",
               torx_coll_auto(g, TORX_COLL_ALLREDUCE));
    TASK_CHECK(torx_coll_auto(g, TORX_COLL_BARRIER) ==
                   (global_auto && (barrier == NULL || strcmp(barrier, "auto") == 0)),
               "barrier auto: %d", torx_coll_auto(g, TORX_COLL_BARRIER));
    TASK_CHECK(!torx_coll_auto(NULL, TORX_COLL_BARRIER), "auto without a group");
    torx_coll_group_free(g);
    return coll_close(boot, ctx, c);
}

static void select_case(const char *coll, const char *barrier, const char *cn_max,
                        const char *want_barrier, const char *want_small, const char *want_big)
{
    clear_env();
    unsetenv("TORX_COLL_CN_MAX");
    if (coll)
        setenv("TORX_COLL", coll, 1);
    if (barrier)
        setenv("TORX_COLL_BARRIER", barrier, 1);
    if (cn_max)
        setenv("TORX_COLL_CN_MAX", cn_max, 1);
    setenv("TEST_BARRIER", want_barrier, 1);
    setenv("TEST_ALLREDUCE", want_small, 1);
    setenv("TEST_ALLREDUCE_BIG", want_big, 1);
    RUN_JOB(2, select_task, NULL);
}

START_TEST(selection_follows_the_environment)
{
    unsetenv("TEST_EXPECT_ENV_ERROR");
    /* 1 MiB at 2 tasks: the split exchange (from TORXC_SPLIT_AUTO_BYTES, 512 KiB) */
    select_case(NULL, NULL, NULL, "gi", "torus", "torus");
    select_case("mpich", NULL, NULL, "mpich", "mpich", "mpich");
    select_case("mpich", "gi", NULL, "gi", "mpich", "mpich");
    select_case("auto", "mpich", "2000000", "mpich", "torus", "cn");
    select_case(NULL, NULL, "0", "gi", "torus", "torus");
    static const char *const bad[][2] = {{"TORX_COLL", "torus"},
                                         {"TORX_COLL_BARRIER", "cn"},
                                         {"TORX_COLL_BCAST", "fast"},
                                         {"TORX_COLL_CN_MAX", "-1"},
                                         {"TORX_COLL_ALLREDUCE", "paced"}};
    for (int i = 0; i < 5; i++) {
        clear_env();
        setenv(bad[i][0], bad[i][1], 1);
        setenv("TEST_EXPECT_ENV_ERROR", bad[i][0], 1);
        RUN_JOB(2, select_task, NULL);
    }
    unsetenv("TEST_EXPECT_ENV_ERROR");
    clear_env();
}
END_TEST

/* ---- the host's choices --------------------------------------------------------- */

/* What auto must pick on one host for the communicator of every task, at
 * the sizes bench/run-coll-bench.sh measures: the crossovers it measured
 * (2 ranks one per core, 4 and 8 oversubscribed on 2 cores;
 * docs/collectives.md#selection-by-cost), stated here apart from the code
 * that picks, so that a change to how auto picks on a host (a cost model,
 * say) keeps every choice the benchmark's figures rest on. */
typedef struct host_case {
    int n, over, direct, staged; /* tasks; oversubscribed; reads in place; multi-reader area */
    size_t cn_max, cn_fpsum_max;
} host_case_t;

static torx_coll_alg_t host_expect(const host_case_t *h, torx_coll_kind_t kind, size_t bytes,
                                   torx_coll_dtype_t dt, torx_coll_op_t op)
{
    const int n = h->n,
              fpsum = op == TORX_COLL_SUM && (dt == TORX_COLL_FLOAT || dt == TORX_COLL_DOUBLE);
    switch (kind) {
    case TORX_COLL_BARRIER:
        return TORX_COLL_ALG_GI;
    case TORX_COLL_ALLREDUCE:
    case TORX_COLL_REDUCE:
        if (n == 2 && bytes <= 2048)
            return TORX_COLL_ALG_TORUS; /* the exchange */
        if (bytes <= (fpsum ? h->cn_fpsum_max : h->cn_max))
            /* an oversubscribed reduce: members other than the root leave at once */
            return kind == TORX_COLL_REDUCE && h->over ? TORX_COLL_ALG_TORUS : TORX_COLL_ALG_CN;
        if (n == 2 && h->direct)
            return TORX_COLL_ALG_TORUS; /* exchanged to 8 KiB, then read */
        if (kind == TORX_COLL_ALLREDUCE && n == 2 && dt == TORX_COLL_FLOAT && op == TORX_COLL_SUM &&
            bytes <= 16384)
            return TORX_COLL_ALG_TORUS; /* MPICH adds floats one at a time */
        if (h->direct ? bytes >= 128 * 1024 : n == 2 && bytes >= 512 * 1024)
            return TORX_COLL_ALG_TORUS;
        return TORX_COLL_ALG_FALLBACK;
    case TORX_COLL_BCAST:
        if (!h->over)
            return n == 2 && bytes <= TORXC_A2A_INJECT_MAX ? TORX_COLL_ALG_PACED
                                                           : TORX_COLL_ALG_FALLBACK;
        if (n > 4)
            return (h->staged && bytes >= 512) || bytes >= 4096 ? TORX_COLL_ALG_PACED
                                                                : TORX_COLL_ALG_FALLBACK;
        return n > 2 && h->staged && bytes >= 32768 ? TORX_COLL_ALG_PACED : TORX_COLL_ALG_FALLBACK;
    case TORX_COLL_ALLGATHER:
        if (n == 2 && bytes <= TORXC_A2A_INJECT_MAX)
            return TORX_COLL_ALG_TORUS;
        if (n > 2 && bytes * (size_t)n <= h->cn_max)
            return TORX_COLL_ALG_CN;
        if (h->direct && bytes >= 32768)
            return TORX_COLL_ALG_TORUS;
        return TORX_COLL_ALG_FALLBACK;
    default:
        return TORX_COLL_ALG_PACED; /* alltoall(v) */
    }
}

static int host_choices_task(torx_boot_t *boot, void *argp)
{
    const int over = *(const int *)argp;
    torx_ctx_t *ctx;
    torx_coll_t *c;
    const torx_coll_attr_t cattr = {.handler = TORX_COLL_DEFAULT_HANDLER, .oversubscribed = over};
    if (coll_open(boot, &cattr, &ctx, &c))
        return 1;
    torx_coll_group_t *g = make_group(c, boot, 0);
    TASK_CHECK(g != NULL, "%s", torx_last_error());
    const torx_pkt_dev_t *dev = torx_ctx_device(ctx);
    /* TORX_COLL_CN_MAX unset: the collective network up to 512 B, a
     * floating sum up to 256 B when oversubscribed */
    const host_case_t h = {
        .n = boot->size,
        .over = over,
        .direct = torx_mode(ctx) != TORX_MODE_CO && strcmp(torx_bulk_path(dev), "cma") == 0,
        .staged = torx_mstage_max(dev) > 0,
        .cn_max = 512,
        .cn_fpsum_max = over ? 256 : 512,
    };
    static const size_t sizes[] = {8,    32,    128,    256,    512,      2048,
                                   8192, 32768, 131072, 524288, 1u << 20, 4u << 20};
    static const struct {
        torx_coll_dtype_t dt;
        torx_coll_op_t op;
    } types[] = {{TORX_COLL_S64, TORX_COLL_SUM},
                 {TORX_COLL_DOUBLE, TORX_COLL_SUM},
                 {TORX_COLL_FLOAT, TORX_COLL_SUM},
                 {TORX_COLL_S64, TORX_COLL_MAX}};
    static const torx_coll_kind_t kinds[] = {TORX_COLL_BARRIER,   TORX_COLL_BCAST,
                                             TORX_COLL_ALLREDUCE, TORX_COLL_REDUCE,
                                             TORX_COLL_ALLGATHER, TORX_COLL_ALLTOALL};
    int wrong = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
                const torx_coll_kind_t kind = kinds[k];
                const size_t bytes = kind == TORX_COLL_BARRIER ? 0 : sizes[s];
                const torx_coll_alg_t want = host_expect(&h, kind, bytes, types[t].dt, types[t].op),
                                      got = torx_coll_select(g, kind, bytes, types[t].dt,
                                                             types[t].op);
                if (got != want && wrong++ < 8 && boot->rank == 0)
                    fprintf(stderr,
                            "host choice: %s of %zu B (type %d, op %d) on %d tasks%s: picked "
                            "%s, expected %s\n",
                            torx_coll_kind_name(kind), bytes, (int)types[t].dt, (int)types[t].op,
                            h.n, over ? ", oversubscribed" : "", torx_coll_alg_name(got),
                            torx_coll_alg_name(want));
            }
    TASK_CHECK(wrong == 0, "%d of auto's choices on %d tasks differ from the host's crossovers",
               wrong, h.n);
    torx_coll_group_free(g);
    return coll_close(boot, ctx, c);
}

START_TEST(host_choices)
{
    clear_env();
    unsetenv("TORX_COLL_CN_MAX");
    int over = 0;
    RUN_JOB(2, host_choices_task, &over);
    over = 1;
    RUN_JOB(4, host_choices_task, &over);
    RUN_JOB(8, host_choices_task, &over);
    setenv("TORX_MSTAGE_BYTES", "0", 1);
    RUN_JOB(4, host_choices_task, &over);
    RUN_JOB(8, host_choices_task, &over);
    unsetenv("TORX_MSTAGE_BYTES");
    setenv("TORX_MODE", "co", 1); /* no reads in place */
    over = 0;
    RUN_JOB(2, host_choices_task, &over);
    clear_env();
}
END_TEST

/* ---- a waiting collective keeps point-to-point moving ------------------------------ */

#define BIG (1u << 20)

static void big_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                        torx_recv_t *recv)
{
    (void)ctx, (void)info;
    recv->buf = harg;
    recv->len = BIG;
    recv->done = NULL;
}

static void sent(torx_ctx_t *ctx, torx_msg_t *msg, void *arg)
{
    (void)ctx, (void)msg;
    *(volatile int *)arg = 1;
}

/* Task 0 starts a rendezvous whose data it must push in packets after the
 * receiver's clear-to-send, then enters an allreduce; task 1 waits for the
 * whole message before it enters. Only a collective that advances the
 * message layer while it waits lets task 0 push the data. */
static int progress_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_ctx_t *ctx;
    torx_coll_t *c;
    if (coll_open(boot, NULL, &ctx, &c))
        return 1;
    torx_coll_group_t *g = make_group(c, boot, 0);
    unsigned char *buf = malloc(BIG);
    for (size_t i = 0; i < BIG; i++)
        buf[i] = boot->rank == 0 ? (unsigned char)(i * 7) : 0;
    TASK_CHECK(torx_register(ctx, 9, big_handler, buf) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    volatile int done = 0;
    torx_msg_t msg;
    if (boot->rank == 0)
        TASK_CHECK(torx_send(ctx, &msg, 1, 9, NULL, 0, buf, BIG, TORX_PROTO_RZV, sent,
                             (void *)&done) == TORX_OK,
                   "%s", torx_last_error());
    if (boot->rank == 1) {
        /* until every byte is in */
        double deadline = test_now() + 30;
        while (buf[BIG - 1] != (unsigned char)((BIG - 1) * 7) && test_now() < deadline)
            torx_advance(ctx);
        TASK_CHECK(buf[BIG - 1] == (unsigned char)((BIG - 1) * 7), "the message never arrived");
    }
    int64_t one = 1, sum = 0;
    torx_coll_alg_t alg = torx_coll_select(g, TORX_COLL_ALLREDUCE, 8, TORX_COLL_S64, TORX_COLL_SUM);
    TASK_CHECK(torx_coll_allreduce(g, alg, &one, &sum, 1, TORX_COLL_S64, TORX_COLL_SUM) ==
                   TORX_OK,
               "%s", torx_last_error());
    TASK_CHECK(sum == 2, "sum %lld", (long long)sum);
    if (boot->rank == 0)
        TASK_CHECK(torx_wait(ctx, &done) == TORX_OK, "%s", torx_last_error());
    free(buf);
    torx_coll_group_free(g);
    return coll_close(boot, ctx, c);
}

START_TEST(waiting_collective_advances)
{
    clear_env();
    setenv("TORX_RZV_DATA", "packets", 1);
    RUN_JOB(2, progress_task, NULL);
    clear_env();
}
END_TEST

/* Groups: the whole job in rank order (tasks NULL, or the identity list)
 * keeps no table of its own and reads the map's coordinates; any other
 * order has its tables; bad lists are refused, in memory of the group's
 * size. The world group runs collectives. */
static int group_task(torx_boot_t *boot, void *arg)
{
    (void)arg;
    torx_ctx_t *ctx;
    torx_coll_t *c;
    if (coll_open(boot, NULL, &ctx, &c))
        return 1;
    const int n = boot->size, me = boot->rank;
    int ident[MAX_TASKS], rev[MAX_TASKS];
    for (int i = 0; i < n; i++)
        ident[i] = i, rev[i] = n - 1 - i;
    torx_coll_group_t *w, *id, *r;
    TASK_CHECK(torx_coll_group_create(c, 1, n, NULL, me, &w) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(torx_coll_group_create(c, 2, n, ident, me, &id) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(torx_coll_group_create(c, 3, n, rev, n - 1 - me, &r) == TORX_OK, "%s",
               torx_last_error());
    const torx_coord_t *map_coord = torx_ctx_map(ctx)->coord;
    TASK_CHECK(!w->tasks && w->coord == map_coord && w->all_tasks, "the world group has a table");
    TASK_CHECK(!id->tasks && id->coord == map_coord, "the identity list made a table");
    TASK_CHECK(r->tasks && r->coord != map_coord && r->all_tasks && torxc_task(r, 0) == n - 1,
               "the reversed group");
    for (int i = 0; i < n; i++)
        TASK_CHECK(torx_coord_equal(r->coord[i], map_coord[n - 1 - i]), "member %d's coordinate",
                   i);
    /* refused */
    int bad[MAX_TASKS];
    for (int i = 0; i < n; i++)
        bad[i] = (me + (i ? 1 : 0)) % n; /* me, then the next one again and again */
    torx_coll_group_t *g = NULL;
    TASK_CHECK(torx_coll_group_create(c, 4, 3, bad, 0, &g) == TORX_ERR_INVAL && !g &&
                   strstr(torx_last_error(), "is repeated"),
               "%s", torx_last_error());
    bad[1] = n + 3;
    TASK_CHECK(torx_coll_group_create(c, 4, 2, bad, 0, &g) == TORX_ERR_INVAL &&
                   strstr(torx_last_error(), "out of range"),
               "%s", torx_last_error());
    TASK_CHECK(torx_coll_group_create(c, 4, n - 1, NULL, 0, &g) == TORX_ERR_INVAL &&
                   strstr(torx_last_error(), "the whole job"),
               "%s", torx_last_error());
    TASK_CHECK(torx_coll_group_create(c, 4, n, NULL, (me + 1) % n, &g) == TORX_ERR_INVAL &&
                   strstr(torx_last_error(), "not this task"),
               "%s", torx_last_error());
    /* the world group works */
    TASK_CHECK(torx_coll_barrier(w, TORX_COLL_ALG_GI) == TORX_OK, "%s", torx_last_error());
    int64_t one = me + 1, sum = 0;
    TASK_CHECK(torx_coll_allreduce(w, TORX_COLL_ALG_CN, &one, &sum, 1, TORX_COLL_S64,
                                   TORX_COLL_SUM) == TORX_OK,
               "%s", torx_last_error());
    TASK_CHECK(sum == (int64_t)n * (n + 1) / 2, "sum %lld", (long long)sum);
    int64_t all[MAX_TASKS] = {0};
    TASK_CHECK(torx_coll_allgather(r, TORX_COLL_ALG_TORUS, &one, all, sizeof one) == TORX_OK, "%s",
               torx_last_error());
    for (int i = 0; i < n; i++)
        TASK_CHECK(all[i] == n - i, "the reversed allgather's member %d: %lld", i,
                   (long long)all[i]);
    torx_coll_group_free(w);
    torx_coll_group_free(id);
    torx_coll_group_free(r);
    return coll_close(boot, ctx, c);
}

START_TEST(groups)
{
    clear_env();
    RUN_JOB(4, group_task, NULL);
}
END_TEST

/* ---- nonblocking ------------------------------------------------------------ */

typedef struct nb_flag {
    volatile int done;
    torx_status_t st;
} nb_flag_t;

static void nb_done(void *arg, torx_status_t st)
{
    nb_flag_t *f = arg;
    f->st = st;
    f->done = 1;
}

static int group_index(int perm, int n, int rank)
{
    for (int i = 0; i < n; i++)
        if (group_order(perm, n, i) == rank)
            return i;
    return -1;
}

/* The nonblocking alltoallv's blocks: from member f to member t, of 1 to
 * 36,001 bytes (packets, staged, rendezvous), and their bytes. */
static size_t nbv_bytes(int f, int t, int round)
{
    return 1 + (size_t)((f * 7 + t * 3 + round) % 5) * 9000;
}
static unsigned char nbv_byte(int f, int t, size_t k, int round)
{
    return (unsigned char)(f * 31 + t * 17 + (int)k + round);
}

/* Fills member me's counts and displacements of that alltoallv, and its
 * send buffer when not NULL; the total bytes it receives. */
static size_t nbv_layout(int n, int me, int round, size_t *sb, size_t *sd, size_t *rb, size_t *rd,
                         unsigned char *send)
{
    size_t so = 0, ro = 0;
    for (int m = 0; m < n; m++) {
        sb[m] = nbv_bytes(me, m, round);
        sd[m] = so;
        rb[m] = nbv_bytes(m, me, round);
        rd[m] = ro;
        if (send)
            for (size_t k = 0; k < sb[m]; k++)
                send[so + k] = nbv_byte(me, m, k, round);
        so += sb[m];
        ro += rb[m];
    }
    return ro;
}

/* Nonblocking collectives on two groups of every task, channels 1 and 2,
 * started in opposite orders on even and odd ranks (MPI allows that across
 * communicators), with a blocking collective of each group between the
 * starts and the waits: every result right, the floating sum bitwise the
 * blocking one's, the counts and names right, and a group without a
 * channel gets none. */
static int nb_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_ctx_t *ctx;
    torx_coll_t *c;
    if (coll_open(boot, NULL, &ctx, &c))
        return 1;
    const int n = boot->size;
    torx_coll_group_t *ga = make_group(c, boot, 0), *gb = make_group(c, boot, 1);
    TASK_CHECK(ga && gb, "%s", torx_last_error());
    const int ma = group_index(0, n, boot->rank), mb = group_index(1, n, boot->rank);

    TASK_CHECK(torx_coll_iselect(ga, TORX_COLL_BARRIER, 0, 0, 0) == TORX_COLL_ALG_FALLBACK,
               "a group without a channel got torx's ibarrier");
    TASK_CHECK(torx_coll_ibarrier(ga, TORX_COLL_ALG_GI, nb_done, NULL) == TORX_ERR_INVAL,
               "ibarrier without a channel started");
    TASK_CHECK(torx_coll_group_channel(ga, TORX_CN_CHANNELS) == TORX_ERR_INVAL, "channel 4 taken");
    TASK_CHECK(torx_coll_group_channel(ga, 1) == TORX_OK &&
                   torx_coll_group_channel(gb, 2) == TORX_OK,
               "%s", torx_last_error());

    enum { NI = 7, NF = 300, NB = 300, NM = 33, NA = 100, NBL = 64 };
    size_t *vb = malloc(4 * (size_t)n * sizeof *vb);
    unsigned char *vsend = malloc((size_t)n * 36001), *vrecv = malloc((size_t)n * 36001);
    unsigned char *asend = malloc((size_t)n * NA), *arecv = malloc((size_t)n * NA);
    unsigned char *bsend = malloc((size_t)n * NBL), *brecv = malloc((size_t)n * NBL);
    TASK_CHECK(vb && vsend && vrecv && asend && arecv && bsend && brecv, "out of memory");
    for (int round = 0; round < 3; round++) {
        const int seed = 40 + round;
        int64_t in_i[NI], out_i[NI], want_i[NI];
        double in_f[NF], out_f[NF], blk_f[NF];
        float in_m[NM], out_m[NM], want_m[NM];
        unsigned char buf[NB];
        make_input(TORX_COLL_S64, TORX_COLL_SUM, seed, ma, NI, in_i);
        make_input(TORX_COLL_DOUBLE, TORX_COLL_SUM, seed, mb, NF, in_f);
        make_input(TORX_COLL_FLOAT, TORX_COLL_MAX, seed, mb, NM, in_m);
        const int broot = round % n; /* gb index */
        for (int i = 0; i < NB; i++)
            buf[i] = mb == broot ? (unsigned char)(i * 7 + seed) : 0;
        memset(out_m, 0, sizeof out_m);
        const size_t vtotal = nbv_layout(n, ma, round, vb, vb + n, vb + 2 * n, vb + 3 * n, vsend);
        memset(vrecv, 0, vtotal);
        for (int t = 0; t < n; t++)
            for (int k = 0; k < NA; k++)
                asend[t * NA + k] = (unsigned char)(mb * 13 + t * 5 + k + round);
        memset(arecv, 0, (size_t)n * NA);

        nb_flag_t f[7] = {{0}};
        torx_coll_alg_t a;
        for (int k = 0; k < 2; k++) {
            /* even ranks start A's then B's, odd ranks B's then A's */
            const int a_now = (k == 0) == (boot->rank % 2 == 0);
            if (a_now) {
                a = torx_coll_iselect(ga, TORX_COLL_ALLREDUCE, sizeof in_i, TORX_COLL_S64,
                                      TORX_COLL_SUM);
                TASK_CHECK(a == TORX_COLL_ALG_CN, "iallreduce got %s", torx_coll_alg_name(a));
                TASK_CHECK(!strcmp(torx_coll_last_algorithm(ga), "iallreduce:cn"), "last %s",
                           torx_coll_last_algorithm(ga));
                TASK_CHECK(torx_coll_iallreduce(ga, a, in_i, out_i, NI, TORX_COLL_S64,
                                                TORX_COLL_SUM, nb_done, &f[0]) == TORX_OK,
                           "%s", torx_last_error());
                a = torx_coll_iselect(ga, TORX_COLL_BARRIER, 0, 0, 0);
                TASK_CHECK(a == TORX_COLL_ALG_GI, "ibarrier got %s", torx_coll_alg_name(a));
                TASK_CHECK(torx_coll_ibarrier(ga, a, nb_done, &f[1]) == TORX_OK, "%s",
                           torx_last_error());
                a = torx_coll_iselect(ga, TORX_COLL_ALLTOALLV, 0, 0, 0);
                TASK_CHECK(a == TORX_COLL_ALG_PACED, "ialltoallv got %s", torx_coll_alg_name(a));
                TASK_CHECK(torx_coll_ialltoallv(ga, a, vsend, vb, vb + n, vrecv, vb + 2 * n,
                                                vb + 3 * n, nb_done, &f[5]) == TORX_OK,
                           "%s", torx_last_error());
                memset(vb, 0xff, 4 * (size_t)n * sizeof *vb); /* the counts were copied */
            } else {
                a = torx_coll_iselect(gb, TORX_COLL_ALLREDUCE, sizeof in_f, TORX_COLL_DOUBLE,
                                      TORX_COLL_SUM);
                TASK_CHECK(a == TORX_COLL_ALG_CN, "fp iallreduce got %s", torx_coll_alg_name(a));
                TASK_CHECK(torx_coll_iallreduce(gb, a, in_f, out_f, NF, TORX_COLL_DOUBLE,
                                                TORX_COLL_SUM, nb_done, &f[2]) == TORX_OK,
                           "%s", torx_last_error());
                a = torx_coll_iselect(gb, TORX_COLL_BCAST, NB, 0, 0);
                TASK_CHECK(a == TORX_COLL_ALG_CN, "ibcast got %s", torx_coll_alg_name(a));
                TASK_CHECK(torx_coll_ibcast(gb, a, buf, NB, broot, nb_done, &f[3]) == TORX_OK, "%s",
                           torx_last_error());
                a = torx_coll_iselect(gb, TORX_COLL_REDUCE, sizeof in_m, TORX_COLL_FLOAT,
                                      TORX_COLL_MAX);
                TASK_CHECK(torx_coll_ireduce(gb, a, in_m, out_m, NM, TORX_COLL_FLOAT, TORX_COLL_MAX,
                                             0, nb_done, &f[4]) == TORX_OK,
                           "%s", torx_last_error());
                a = torx_coll_iselect(gb, TORX_COLL_ALLTOALL, NA, 0, 0);
                TASK_CHECK(a == TORX_COLL_ALG_PACED, "ialltoall got %s", torx_coll_alg_name(a));
                TASK_CHECK(!strcmp(torx_coll_last_algorithm(gb), "ialltoall:paced"), "last %s",
                           torx_coll_last_algorithm(gb));
                TASK_CHECK(torx_coll_ialltoall(gb, a, asend, arecv, NA, nb_done, &f[6]) == TORX_OK,
                           "%s", torx_last_error());
            }
        }
        /* a blocking alltoall of the group whose nonblocking one may still
         * run: two exchanges of one group at once */
        for (int t = 0; t < n; t++)
            for (int k = 0; k < NBL; k++)
                bsend[t * NBL + k] = (unsigned char)(ma * 11 + t * 3 + k + round);
        TASK_CHECK(torx_coll_alltoall(ga, TORX_COLL_ALG_PACED, bsend, brecv, NBL) == TORX_OK, "%s",
                   torx_last_error());
        for (int fm = 0; fm < n; fm++)
            for (int k = 0; k < NBL; k++)
                TASK_CHECK(brecv[fm * NBL + k] == (unsigned char)(fm * 11 + ma * 3 + k + round),
                           "round %d: blocking alltoall from %d byte %d", round, fm, k);
        /* blocking collectives of both groups while those are in flight */
        TASK_CHECK(torx_coll_barrier(gb, TORX_COLL_ALG_GI) == TORX_OK, "%s", torx_last_error());
        TASK_CHECK(torx_coll_allreduce(ga, TORX_COLL_ALG_CN, in_f, blk_f, NF, TORX_COLL_DOUBLE,
                                       TORX_COLL_SUM) == TORX_OK,
                   "%s", torx_last_error());
        for (int k = 0; k < 7; k++) {
            TASK_CHECK(torx_wait(ctx, &f[k].done) == TORX_OK, "%s", torx_last_error());
            TASK_CHECK(f[k].st == TORX_OK, "collective %d: %s", k, torx_status_str(f[k].st));
        }
        expected(TORX_COLL_S64, TORX_COLL_SUM, seed, n, NI, want_i);
        TASK_CHECK(!memcmp(out_i, want_i, sizeof want_i), "round %d: iallreduce S64 wrong", round);
        /* ga's blocking sum took ga's order of the same values: the sum is
         * bitwise independent of who holds what */
        TASK_CHECK(!memcmp(out_f, blk_f, sizeof blk_f),
                   "round %d: the nonblocking floating sum differs from the blocking one", round);
        for (int i = 0; i < NB; i++)
            TASK_CHECK(buf[i] == (unsigned char)(i * 7 + seed), "round %d: ibcast byte %d", round,
                       i);
        nbv_layout(n, ma, round, vb, vb + n, vb + 2 * n, vb + 3 * n, NULL);
        for (int fm = 0; fm < n; fm++)
            for (size_t k = 0; k < vb[2 * n + fm]; k++)
                TASK_CHECK(vrecv[vb[3 * n + fm] + k] == nbv_byte(fm, ma, k, round),
                           "round %d: ialltoallv block from %d byte %zu", round, fm, k);
        for (int fm = 0; fm < n; fm++)
            for (int k = 0; k < NA; k++)
                TASK_CHECK(arecv[fm * NA + k] == (unsigned char)(fm * 13 + mb * 5 + k + round),
                           "round %d: ialltoall from %d byte %d", round, fm, k);
        if (mb == 0) {
            expected(TORX_COLL_FLOAT, TORX_COLL_MAX, seed, n, NM, want_m);
            TASK_CHECK(!memcmp(out_m, want_m, sizeof want_m), "round %d: ireduce MAX wrong", round);
        } else {
            for (int i = 0; i < NM; i++)
                TASK_CHECK(out_m[i] == 0, "round %d: ireduce wrote off its root", round);
        }
    }
    uint64_t calls, bytes;
    TASK_CHECK(torx_coll_icounters(c, TORX_COLL_BARRIER, TORX_COLL_ALG_GI, &calls, NULL) &&
                   calls == 3,
               "ibarrier:gi counted %llu", (unsigned long long)calls);
    TASK_CHECK(torx_coll_icounters(c, TORX_COLL_ALLREDUCE, TORX_COLL_ALG_CN, &calls, &bytes) &&
                   calls == 6 && bytes == 3 * (7 * 8 + 300 * 8),
               "iallreduce:cn counted %llu calls, %llu bytes", (unsigned long long)calls,
               (unsigned long long)bytes);
    TASK_CHECK(torx_coll_icounters(c, TORX_COLL_BARRIER, TORX_COLL_ALG_FALLBACK, &calls, NULL) &&
                   calls == 1,
               "ibarrier:mpich counted %llu", (unsigned long long)calls);
    TASK_CHECK(torx_coll_icounters(c, TORX_COLL_ALLTOALL, TORX_COLL_ALG_PACED, &calls, &bytes) &&
                   calls == 3 && bytes == 3 * NA,
               "ialltoall:paced counted %llu calls, %llu bytes", (unsigned long long)calls,
               (unsigned long long)bytes);
    TASK_CHECK(!torx_coll_icounters(c, TORX_COLL_ALLGATHER, TORX_COLL_ALG_PACED, NULL, NULL),
               "iallgather:paced exists");
    /* On a torus the alltoall(v)'s eager blocks (the alltoallv's 9,001 to
     * 27,001 bytes) go as adaptive packets, and nothing else here does;
     * elsewhere none do (docs/collectives.md#the-paced-alltoall). */
    torx_net_t net;
    torx_pkt_network(torx_ctx_device(ctx), &net);
    torx_proto_stats_t st[TORX_PROTO_COUNT];
    torx_stats(ctx, st);
    TASK_CHECK(net.kind == TORX_NET_TORUS ? st[TORX_PROTO_ADAPTIVE].sent > 0
                                          : st[TORX_PROTO_ADAPTIVE].sent == 0,
               "%llu adaptive messages on a network of kind %d",
               (unsigned long long)st[TORX_PROTO_ADAPTIVE].sent, (int)net.kind);
    free(vb);
    free(vsend);
    free(vrecv);
    free(asend);
    free(arecv);
    free(bsend);
    free(brecv);
    torx_coll_group_free(ga);
    torx_coll_group_free(gb);
    return coll_close(boot, ctx, c);
}

/* co mode with a thread that owns the network: the thread runs the
 * rounds of nonblocking barriers and collective-network collectives while
 * the task makes no torx call at all. A floating sum of 300 doubles is six
 * passes of rounds, each injected after the previous one was read, so a
 * task that only started it could not finish it by itself. */
static int co_nb_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_ctx_t *ctx;
    torx_coll_t *c;
    if (coll_open(boot, NULL, &ctx, &c))
        return 1;
    const int n = boot->size;
    torx_coll_group_t *g = make_group(c, boot, 0);
    TASK_CHECK(g && torx_coll_group_channel(g, 1) == TORX_OK, "%s", torx_last_error());
    const int me = group_index(0, n, boot->rank);
    enum { NF = 300, NB = 300 };
    for (int round = 0; round < 3; round++) {
        const int seed = 60 + round;
        double in_f[NF], out_f[NF], blk_f[NF];
        unsigned char buf[NB];
        make_input(TORX_COLL_DOUBLE, TORX_COLL_SUM, seed, me, NF, in_f);
        for (int i = 0; i < NB; i++)
            buf[i] = me == round % n ? (unsigned char)(i * 3 + seed) : 0;
        const uint64_t before = __atomic_load_n(&c->co_done, __ATOMIC_RELAXED);
        nb_flag_t f[3] = {{0}};
        TASK_CHECK(torx_coll_iallreduce(g, TORX_COLL_ALG_CN, in_f, out_f, NF, TORX_COLL_DOUBLE,
                                        TORX_COLL_SUM, nb_done, &f[0]) == TORX_OK,
                   "%s", torx_last_error());
        TASK_CHECK(torx_coll_ibarrier(g, TORX_COLL_ALG_GI, nb_done, &f[1]) == TORX_OK, "%s",
                   torx_last_error());
        TASK_CHECK(torx_coll_ibcast(g, TORX_COLL_ALG_CN, buf, NB, round % n, nb_done, &f[2]) ==
                       TORX_OK,
                   "%s", torx_last_error());
        /* no torx call until the thread has finished all three */
        int waited_ms = 0;
        while (__atomic_load_n(&c->co_done, __ATOMIC_RELAXED) < before + 3 && waited_ms < 20000) {
            usleep(1000);
            waited_ms++;
        }
        const uint64_t finished = __atomic_load_n(&c->co_done, __ATOMIC_RELAXED) - before;
        TASK_CHECK(finished == 3,
                   "round %d: the communication thread finished %llu of 3 without the task", round,
                   (unsigned long long)finished);
        for (int k = 0; k < 3; k++) {
            TASK_CHECK(torx_wait(ctx, &f[k].done) == TORX_OK, "%s", torx_last_error());
            TASK_CHECK(f[k].st == TORX_OK, "collective %d: %s", k, torx_status_str(f[k].st));
        }
        TASK_CHECK(torx_coll_allreduce(g, TORX_COLL_ALG_CN, in_f, blk_f, NF, TORX_COLL_DOUBLE,
                                       TORX_COLL_SUM) == TORX_OK,
                   "%s", torx_last_error());
        TASK_CHECK(!memcmp(out_f, blk_f, sizeof blk_f),
                   "round %d: the thread's floating sum differs from the blocking one", round);
        for (int i = 0; i < NB; i++)
            TASK_CHECK(buf[i] == (unsigned char)(i * 3 + seed), "round %d: ibcast byte %d", round,
                       i);
    }
    /* one left in flight at the end (a member's ibarrier the others never
     * start): taken back from the thread when its group is freed, and
     * nothing leaks (ASan) */
    nb_flag_t late = {0};
    if (me == 0)
        TASK_CHECK(torx_coll_ibarrier(g, TORX_COLL_ALG_GI, nb_done, &late) == TORX_OK, "%s",
                   torx_last_error());
    TASK_CHECK(torx_coll_barrier(g, TORX_COLL_ALG_GI) == TORX_OK, "%s", torx_last_error());
    torx_coll_group_free(g);
    return coll_close(boot, ctx, c);
}

START_TEST(co_thread_runs_nonblocking)
{
    clear_env();
    setenv("TORX_MODE", "co", 1);
    setenv("TORX_CO_THREAD", "own", 1);
    RUN_JOB(2, co_nb_task, NULL);
    /* the whole nonblocking test, the thread running the rounds */
    setenv("TORX_COLL_ALLREDUCE", "cn", 1);
    setenv("TORX_COLL_REDUCE", "cn", 1);
    setenv("TORX_COLL_BCAST", "cn", 1);
    RUN_JOB(2, nb_task, NULL);
    unsetenv("TORX_CO_THREAD");
    clear_env();
}
END_TEST

START_TEST(nonblocking_on_channels)
{
    static const int sizes[] = {2, 3, 5};
    /* forced: auto leaves small jobs' reductions and oversubscribed jobs'
     * bcasts to MPICH, and a floating sum of 300 doubles (three batches of
     * the two passes) is past its limit */
    setenv("TORX_COLL_ALLREDUCE", "cn", 1);
    setenv("TORX_COLL_REDUCE", "cn", 1);
    setenv("TORX_COLL_BCAST", "cn", 1);
    RUN_JOB(sizes[_i], nb_task, NULL);
    unsetenv("TORX_COLL_BCAST");
    unsetenv("TORX_COLL_REDUCE");
    unsetenv("TORX_COLL_ALLREDUCE");
}
END_TEST

static Suite *coll_suite(void)
{
    Suite *s = suite_create("coll");
    /* "processes": jobs of single-threaded tasks, left out under
     * ThreadSanitizer (Makefile.am); the co case has the threads. */
    TCase *tc = tcase_create("coll");
    tcase_set_tags(tc, "processes");
    tcase_set_timeout(tc, 600);
    tcase_add_checked_fixture(tc, map_shared, unmap_shared);
    tcase_add_test(tc, every_reduction_2_tasks);
    tcase_add_test(tc, task_counts_and_orders);
    tcase_add_test(tc, vn_mode_and_chaos);
    tcase_add_test(tc, selection_follows_the_environment);
    tcase_add_test(tc, oversubscribed_agreed);
    tcase_add_test(tc, waiting_collective_advances);
    tcase_add_test(tc, long_allreduce_length_mismatch);
    tcase_add_test(tc, groups);
    suite_add_tcase(s, tc);
    /* auto's choices on one host (not run on other devices' variants) */
    TCase *host = tcase_create("host");
    tcase_set_tags(host, "processes");
    tcase_set_timeout(host, 300);
    tcase_add_test(host, host_choices);
    suite_add_tcase(s, host);
    /* its own case: sim-variant runs it on the modelled torus */
    TCase *nb = tcase_create("nb");
    tcase_set_tags(nb, "processes");
    tcase_set_timeout(nb, 300);
    tcase_add_loop_test(nb, nonblocking_on_channels, 0, 3);
    suite_add_tcase(s, nb);
    TCase *co = tcase_create("co");
    tcase_set_timeout(co, 600);
    tcase_add_checked_fixture(co, map_shared, unmap_shared);
    tcase_add_test(co, co_mode);
    tcase_add_test(co, co_thread_runs_nonblocking);
    suite_add_tcase(s, co);
    TCase *fp = tcase_create("fpsum");
    tcase_set_tags(fp, "processes");
    tcase_set_timeout(fp, 300);
    tcase_add_test(fp, fpsum_bitwise_in_every_order);
    tcase_add_test(fp, fpsum_guess);
    suite_add_tcase(s, fp);
    return s;
}

int main(void)
{
    return test_run_suite(coll_suite());
}
