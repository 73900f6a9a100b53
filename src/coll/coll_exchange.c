/* Allreduce and reduce of short vectors by direct exchange on the torus:
 * every member sends its vector to every other (the paced alltoall's
 * machinery, the same block to all) and combines the n vectors itself.
 *
 * Why: one round of the collective network costs about three cache-line
 * transfers per task on the shm device, and the reproducible floating sum
 * needs two rounds; a one-packet message each way costs one. For a few
 * tasks and a short vector the exchange is the faster of the two; the
 * collective network wins as tasks multiply (bench/run-coll-bench.sh).
 *
 * Reproducibility. The combine does not depend on which member holds
 * which vector: integer operations are associative and commutative, and a
 * floating sum adds each element's n values in a fixed order of the values
 * themselves (ascending magnitude, ties by bit pattern), so every member
 * computes the same bits, whatever the rank order, in every run. (Its
 * bits may differ from the collective network's two-phase sum of the same
 * values: each is reproducible, and each is at least as accurate as a
 * plain sum.)
 */
#include "coll_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The order of a floating sum's terms: by magnitude, then by bits (so
 * +x and -x, and distinct NaNs, have a fixed order too). */
static int before(double a, double b)
{
    double fa = fabs(a), fb = fabs(b);
    if (fa != fb && !isnan(fa) && !isnan(fb))
        return fa < fb;
    uint64_t ua, ub;
    memcpy(&ua, &a, 8);
    memcpy(&ub, &b, 8);
    return ua < ub;
}

static double fp_load(torx_coll_dtype_t dt, const unsigned char *p)
{
    if (dt == TORX_COLL_FLOAT) {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    double d;
    memcpy(&d, p, 8);
    return d;
}

static void fp_store(torx_coll_dtype_t dt, unsigned char *p, double v)
{
    if (dt == TORX_COLL_FLOAT) {
        float f = (float)v;
        memcpy(p, &f, 4);
    } else {
        memcpy(p, &v, 8);
    }
}

#define FOLD_LOOPS(T, S, acc, src, count, is_signed, op)                                         \
    do {                                                                                          \
        switch (op) {                                                                             \
        case TORX_COLL_SUM:                                                                       \
            for (size_t i = 0; i < count; i++)                                                    \
                acc[i] += src[i];                                                                 \
            break;                                                                                \
        case TORX_COLL_MIN:                                                                       \
            if (is_signed)                                                                        \
                for (size_t i = 0; i < count; i++)                                                \
                    acc[i] = (S)src[i] < (S)acc[i] ? src[i] : acc[i];                             \
            else                                                                                  \
                for (size_t i = 0; i < count; i++)                                                \
                    acc[i] = src[i] < acc[i] ? src[i] : acc[i];                                   \
            break;                                                                                \
        case TORX_COLL_MAX:                                                                       \
            if (is_signed)                                                                        \
                for (size_t i = 0; i < count; i++)                                                \
                    acc[i] = (S)src[i] > (S)acc[i] ? src[i] : acc[i];                             \
            else                                                                                  \
                for (size_t i = 0; i < count; i++)                                                \
                    acc[i] = src[i] > acc[i] ? src[i] : acc[i];                                   \
            break;                                                                                \
        case TORX_COLL_BAND:                                                                      \
            for (size_t i = 0; i < count; i++)                                                    \
                acc[i] &= src[i];                                                                 \
            break;                                                                                \
        case TORX_COLL_BOR:                                                                       \
            for (size_t i = 0; i < count; i++)                                                    \
                acc[i] |= src[i];                                                                 \
            break;                                                                                \
        case TORX_COLL_BXOR:                                                                      \
            for (size_t i = 0; i < count; i++)                                                    \
                acc[i] ^= src[i];                                                                 \
            break;                                                                                \
        case TORX_COLL_LAND:                                                                      \
            for (size_t i = 0; i < count; i++)                                                    \
                acc[i] = (T)((acc[i] != 0) & (src[i] != 0));                                      \
            break;                                                                                \
        case TORX_COLL_LOR:                                                                       \
            for (size_t i = 0; i < count; i++)                                                    \
                acc[i] = (T)((acc[i] != 0) | (src[i] != 0));                                      \
            break;                                                                                \
        default:                                                                                  \
            break;                                                                                \
        }                                                                                         \
    } while (0)

/* Folds members 1..n-1 of all (count elements each) into acc, which holds
 * member 0's; through local copies, since the buffers hold user bytes of
 * any alignment. Logical ops first make member 0's elements 0 or 1. */
static void fold32(unsigned char *out, const unsigned char *all, int n, size_t count,
                   int is_signed, torx_coll_op_t op)
{
    enum { CHUNK = 128 }; /* elements per pass, on the stack */
    uint32_t acc[CHUNK], src[CHUNK];
    for (size_t at = 0; at < count; at += CHUNK) {
        size_t k = count - at < CHUNK ? count - at : CHUNK;
        memcpy(acc, out + at * 4, k * 4);
        if (op == TORX_COLL_LAND || op == TORX_COLL_LOR)
            for (size_t i = 0; i < k; i++)
                acc[i] = acc[i] != 0;
        for (int m = 1; m < n; m++) {
            memcpy(src, all + ((size_t)m * count + at) * 4, k * 4);
            FOLD_LOOPS(uint32_t, int32_t, acc, src, k, is_signed, op);
        }
        memcpy(out + at * 4, acc, k * 4);
    }
}

static void fold64(unsigned char *out, const unsigned char *all, int n, size_t count,
                   int is_signed, torx_coll_op_t op)
{
    enum { CHUNK = 128 }; /* elements per pass, on the stack */
    uint64_t acc[CHUNK], src[CHUNK];
    for (size_t at = 0; at < count; at += CHUNK) {
        size_t k = count - at < CHUNK ? count - at : CHUNK;
        memcpy(acc, out + at * 8, k * 8);
        if (op == TORX_COLL_LAND || op == TORX_COLL_LOR)
            for (size_t i = 0; i < k; i++)
                acc[i] = acc[i] != 0;
        for (int m = 1; m < n; m++) {
            memcpy(src, all + ((size_t)m * count + at) * 8, k * 8);
            FOLD_LOOPS(uint64_t, int64_t, acc, src, k, is_signed, op);
        }
        memcpy(out + at * 8, acc, k * 8);
    }
}

/* out[i] = combine over members m of all[m * bytes + i * esize]. */
static void combine(const unsigned char *all, int n, size_t count, torx_coll_dtype_t dt,
                    torx_coll_op_t op, unsigned char *out)
{
    size_t es = torxc_dtype_size(dt), bytes = count * es;
    if (dt == TORX_COLL_DOUBLE && op == TORX_COLL_SUM && n == 2) {
        /* Two terms: IEEE addition is commutative, so a + b is already
         * independent of who holds which; no sort. */
        for (size_t i = 0; i < count; i++) {
            double a, b;
            memcpy(&a, all + i * 8, 8);
            memcpy(&b, all + bytes + i * 8, 8);
            double acc = a + b;
            if (acc == 0.0)
                acc = 0.0;
            memcpy(out + i * 8, &acc, 8);
        }
        return;
    }
    if (dt == TORX_COLL_FLOAT || dt == TORX_COLL_DOUBLE) {
        double v[TORXC_EXCHANGE_MAX_TASKS];
        for (size_t i = 0; i < count; i++) {
            for (int m = 0; m < n; m++)
                v[m] = fp_load(dt, all + (size_t)m * bytes + i * es);
            double acc;
            if (op == TORX_COLL_SUM) {
                /* insertion sort of at most TORXC_EXCHANGE_MAX_TASKS terms */
                for (int a = 1; a < n; a++)
                    for (int b = a; b > 0 && before(v[b], v[b - 1]); b--) {
                        double t = v[b];
                        v[b] = v[b - 1];
                        v[b - 1] = t;
                    }
                acc = 0.0;
                for (int m = 0; m < n; m++)
                    acc += v[m];
                if (acc == 0.0)
                    acc = 0.0; /* +0.0, as the two-phase sum gives */
            } else {
                acc = v[0];
                for (int m = 1; m < n; m++)
                    acc = op == TORX_COLL_MIN ? (v[m] < acc ? v[m] : acc)
                                              : (v[m] > acc ? v[m] : acc);
            }
            fp_store(dt, out + i * es, acc);
        }
        return;
    }
    /* Integers: member 0's vector, then each other member's folded in,
     * one loop per op so the compiler vectorizes it. */
    memcpy(out, all, bytes);
    if (es == 4)
        fold32(out, all, n, count, dt == TORX_COLL_S32, op);
    else
        fold64(out, all, n, count, dt == TORX_COLL_S64, op);
}

torx_status_t torxc_exchange_reduce(torx_coll_group_t *g, const void *in, void *out, size_t count,
                                    torx_coll_dtype_t dtype, torx_coll_op_t op)
{
    size_t bytes = count * torxc_dtype_size(dtype);
    if (count == 0)
        return TORX_OK;
    int n = g->n;
    /* Scratch for the n vectors and the counts, kept with the group. */
    size_t need = (size_t)n * TORXC_EXCHANGE_MAX_BYTES;
    if (g->xchg == NULL) {
        g->xchg = malloc(need + 4 * (size_t)n * sizeof(size_t));
        if (g->xchg == NULL)
            return torxp_error(TORX_ERR_NOMEM, "torx: allreduce: out of memory");
    }
    size_t *v = (size_t *)(g->xchg + need);
    for (int m = 0; m < n; m++) {
        v[m] = bytes;                        /* send bytes */
        v[n + m] = 0;                        /* send displacement: one block for all */
        v[2 * n + m] = bytes;                /* receive bytes */
        v[3 * n + m] = (size_t)m * bytes;    /* receive displacement */
    }
    /* this task's own vector is its block of the scratch (in may be out) */
    torx_status_t st = torxc_paced_alltoallv(g, TORX_COLL_ALLREDUCE, in, v, v + n, g->xchg,
                                             v + 2 * n, v + 3 * n);
    if (st != TORX_OK)
        return st;
    if (out)
        combine(g->xchg, n, count, dtype, op, out);
    return TORX_OK;
}
