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

#include <inttypes.h>
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

/* stmt for each i < count, in blocks of 8: -O2 vectorizes a loop of known
 * trip count (the inner one) but not one of unknown count. */
#define FOLD_EACH(count, i, stmt)                                                                  \
    do {                                                                                           \
        size_t at_ = 0;                                                                            \
        for (; at_ + 8 <= (count); at_ += 8)                                                       \
            for (size_t i = at_; i < at_ + 8; i++)                                                 \
                stmt;                                                                              \
        for (size_t i = at_; i < (count); i++)                                                     \
            stmt;                                                                                  \
    } while (0)

/* dst[i] = a[i] op b[i] for i < count (dst may be a). */
#define FOLD_LOOPS(T, S, dst, a, b, count, is_signed, op)                                          \
    do {                                                                                           \
        switch (op) {                                                                              \
        case TORX_COLL_SUM:                                                                        \
            FOLD_EACH(count, i, dst[i] = a[i] + b[i]);                                             \
            break;                                                                                 \
        case TORX_COLL_MIN:                                                                        \
            if (is_signed)                                                                         \
                FOLD_EACH(count, i, dst[i] = (S)b[i] < (S)a[i] ? b[i] : a[i]);                     \
            else                                                                                   \
                FOLD_EACH(count, i, dst[i] = b[i] < a[i] ? b[i] : a[i]);                           \
            break;                                                                                 \
        case TORX_COLL_MAX:                                                                        \
            if (is_signed)                                                                         \
                FOLD_EACH(count, i, dst[i] = (S)b[i] > (S)a[i] ? b[i] : a[i]);                     \
            else                                                                                   \
                FOLD_EACH(count, i, dst[i] = b[i] > a[i] ? b[i] : a[i]);                           \
            break;                                                                                 \
        case TORX_COLL_BAND:                                                                       \
            FOLD_EACH(count, i, dst[i] = a[i] & b[i]);                                             \
            break;                                                                                 \
        case TORX_COLL_BOR:                                                                        \
            FOLD_EACH(count, i, dst[i] = a[i] | b[i]);                                             \
            break;                                                                                 \
        case TORX_COLL_BXOR:                                                                       \
            FOLD_EACH(count, i, dst[i] = a[i] ^ b[i]);                                             \
            break;                                                                                 \
        case TORX_COLL_LAND:                                                                       \
            FOLD_EACH(count, i, dst[i] = (T)((a[i] != 0) & (b[i] != 0)));                          \
            break;                                                                                 \
        case TORX_COLL_LOR:                                                                        \
            FOLD_EACH(count, i, dst[i] = (T)((a[i] != 0) | (b[i] != 0)));                          \
            break;                                                                                 \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

/* The folds of two vectors: into a third (none overlapping), or into the
 * first (restrict, so that -O2 vectorizes them without a check for
 * overlap). */
#define FOLD_KERNELS(name, T, S)                                                                   \
    TORXC_VECTOR_KERNEL static void name##_to(T *restrict dst, const T *restrict a,                \
                                              const T *restrict b, size_t count, int is_signed,    \
                                              torx_coll_op_t op)                                   \
    {                                                                                              \
        FOLD_LOOPS(T, S, dst, a, b, count, is_signed, op);                                         \
    }                                                                                              \
    TORXC_VECTOR_KERNEL static void name##_into(T *restrict acc, const T *restrict b,              \
                                                size_t count, int is_signed, torx_coll_op_t op)    \
    {                                                                                              \
        FOLD_LOOPS(T, S, acc, acc, b, count, is_signed, op);                                       \
    }

FOLD_KERNELS(fold32k, uint32_t, int32_t)
FOLD_KERNELS(fold64k, uint64_t, int64_t)

/* Folds the n members' vectors vec[0..n-1] (count elements each) into out,
 * which may be vec[0] and no other. Aligned buffers (the usual case:
 * malloc'd, offsets in whole elements) are folded in place, member 0 with
 * member 1 in one pass; others go through local copies, since the buffers
 * hold user bytes of any alignment. */
#define FOLD_FN(name, T, S)                                                                        \
    static void name(unsigned char *out, const unsigned char *const *vec, int n, size_t count,     \
                     int is_signed, torx_coll_op_t op)                                             \
    {                                                                                              \
        uintptr_t addr = (uintptr_t)out;                                                           \
        for (int m = 0; m < n; m++)                                                                \
            addr |= (uintptr_t)vec[m];                                                             \
        if (n >= 2 && addr % sizeof(T) == 0) {                                                     \
            T *acc = (T *)(void *)out;                                                             \
            const T *a = (const T *)(const void *)vec[0], *b = (const T *)(const void *)vec[1];    \
            if (acc == a)                                                                          \
                name##k_into(acc, b, count, is_signed, op);                                        \
            else                                                                                   \
                name##k_to(acc, a, b, count, is_signed, op);                                       \
            for (int m = 2; m < n; m++)                                                            \
                name##k_into(acc, (const T *)(const void *)vec[m], count, is_signed, op);          \
            return;                                                                                \
        }                                                                                          \
        enum { CHUNK = 128 }; /* elements per pass, on the stack */                                \
        T acc[CHUNK], src[CHUNK];                                                                  \
        for (size_t at = 0; at < count; at += CHUNK) {                                             \
            size_t k = count - at < CHUNK ? count - at : CHUNK;                                    \
            memcpy(acc, vec[0] + at * sizeof(T), k * sizeof(T));                                   \
            if (op == TORX_COLL_LAND || op == TORX_COLL_LOR)                                       \
                for (size_t i = 0; i < k; i++)                                                     \
                    acc[i] = acc[i] != 0;                                                          \
            for (int m = 1; m < n; m++) {                                                          \
                memcpy(src, vec[m] + at * sizeof(T), k * sizeof(T));                               \
                name##k_into(acc, src, k, is_signed, op);                                          \
            }                                                                                      \
            memcpy(out + at * sizeof(T), acc, k * sizeof(T));                                      \
        }                                                                                          \
    }

FOLD_FN(fold32, uint32_t, int32_t)
FOLD_FN(fold64, uint64_t, int64_t)

/* Two terms: IEEE addition is commutative, so a + b is already independent
 * of who holds which: no sort, and in the type's own precision (correctly
 * rounded, as the sort's double sum of two floats is not always). A zero
 * sum is +0.0, as the two-phase sum gives. Elements are copied in and out
 * (user buffers of any alignment); blocks of 8 let -O2 vectorize, and
 * restrict lets it without a check for overlap, so out == va, the one
 * overlap combine allows, has a kernel of its own. */
#define SUM2_STEP(T, out, va, vb, i)                                                               \
    do {                                                                                           \
        T x, y;                                                                                    \
        memcpy(&x, (va) + (i) * sizeof(T), sizeof(T));                                             \
        memcpy(&y, (vb) + (i) * sizeof(T), sizeof(T));                                             \
        x = x + y + (T)0; /* + 0: -0 becomes +0 */                                                 \
        memcpy((out) + (i) * sizeof(T), &x, sizeof(T));                                            \
    } while (0)
#define SUM2_LOOP(T, out, va, vb, count) FOLD_EACH(count, i, SUM2_STEP(T, out, va, vb, i))
#define SUM2_FN(name, T)                                                                           \
    TORXC_VECTOR_KERNEL static void name##_to(unsigned char *restrict out,                         \
                                              const unsigned char *restrict va,                    \
                                              const unsigned char *restrict vb, size_t count)      \
    {                                                                                              \
        SUM2_LOOP(T, out, va, vb, count);                                                          \
    }                                                                                              \
    TORXC_VECTOR_KERNEL static void name##_into(unsigned char *restrict acc,                       \
                                                const unsigned char *restrict vb, size_t count)    \
    {                                                                                              \
        SUM2_LOOP(T, acc, acc, vb, count);                                                         \
    }                                                                                              \
    static void name(const unsigned char *va, const unsigned char *vb, size_t count,               \
                     unsigned char *out)                                                           \
    {                                                                                              \
        if (out == va)                                                                             \
            name##_into(out, vb, count);                                                           \
        else                                                                                       \
            name##_to(out, va, vb, count);                                                         \
    }

SUM2_FN(sum2_float, float)
SUM2_FN(sum2_double, double)

/* out[i] = combine over members m of vec[m][i] (elements of esize bytes);
 * which member's vector is which does not change the result. out may be
 * vec[0], and no other. */
static void combine(const unsigned char *const *vec, int n, size_t count, torx_coll_dtype_t dt,
                    torx_coll_op_t op, unsigned char *out)
{
    size_t es = torxc_dtype_size(dt);
    if (op == TORX_COLL_SUM && n == 2 && dt == TORX_COLL_DOUBLE) {
        sum2_double(vec[0], vec[1], count, out);
        return;
    }
    if (op == TORX_COLL_SUM && n == 2 && dt == TORX_COLL_FLOAT) {
        sum2_float(vec[0], vec[1], count, out);
        return;
    }
    if (dt == TORX_COLL_FLOAT || dt == TORX_COLL_DOUBLE) {
        double v[TORXC_EXCHANGE_MAX_TASKS];
        for (size_t i = 0; i < count; i++) {
            for (int m = 0; m < n; m++)
                v[m] = fp_load(dt, vec[m] + i * es);
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
                    acc =
                        op == TORX_COLL_MIN ? (v[m] < acc ? v[m] : acc) : (v[m] > acc ? v[m] : acc);
            }
            fp_store(dt, out + i * es, acc);
        }
        return;
    }
    /* Integers: each member's vector folded in, one loop per op so the
     * compiler vectorizes it. */
    if (es == 4)
        fold32(out, vec, n, count, dt == TORX_COLL_S32, op);
    else
        fold64(out, vec, n, count, dt == TORX_COLL_S64, op);
}

/* g's scratch, grown to at least need bytes; NULL (and no scratch) when
 * memory is short. */
static unsigned char *group_scratch(torx_coll_group_t *g, size_t need)
{
    if (g->split_cap < need) {
        free(g->split);
        g->split = malloc(need);
        g->split_cap = g->split ? need : 0;
    }
    return g->split;
}

/* Long vectors: a reduce-scatter, then an allgather (or a gather to the
 * root), both direct exchanges. Member m owns elements [count * m / n,
 * count * (m + 1) / n): every member sends each other its part of that
 * owner's segment, the owner combines the n parts (the same combine as the
 * full exchange, so the result is as reproducible) and sends the combined
 * segment back to every member (to the root only, for a reduce). Each
 * member moves about 2 (n - 1) / n of the vector each way, every byte
 * straight from the sender's buffer (rendezvous data is fetched in place),
 * instead of n - 1 whole vectors. */
static torx_status_t split_reduce(torx_coll_group_t *g, const void *in, void *out, size_t count,
                                  torx_coll_dtype_t dtype, torx_coll_op_t op, int root)
{
    const int n = g->n, me = g->me;
    const size_t es = torxc_dtype_size(dtype), nn = (size_t)n;
#define SEG_LO(m) (count * (size_t)(m) / nn)
    const size_t my_lo = SEG_LO(me), my_n = SEG_LO(me + 1) - my_lo;
    const size_t most = (count + nn - 1) / nn; /* elements of the longest segment */
    /* the exchanges' counts, then n parts of this task's segment, then the
     * combined segment (off the root of a reduce) */
    const size_t need = 4 * nn * sizeof(size_t) + (nn + 1) * most * es;
    if (group_scratch(g, need) == NULL)
        return torxp_error(TORX_ERR_NOMEM, "torx: allreduce of %zu bytes: out of memory",
                           count * es);
    size_t *v = (size_t *)(void *)g->split;
    unsigned char *parts = g->split + 4 * nn * sizeof(size_t), *mine = parts + nn * most * es;
    for (int m = 0; m < n; m++) {
        /* send: member m's segment of in; receive: their part of mine. Not
         * to this task itself: its part is read from in where it lies. */
        v[m] = m == me ? 0 : (SEG_LO(m + 1) - SEG_LO(m)) * es;
        v[n + m] = SEG_LO(m) * es;
        v[2 * n + m] = m == me ? 0 : my_n * es;
        v[3 * n + m] = (size_t)m * my_n * es;
    }
    torx_status_t st =
        torxc_paced_alltoallv(g, TORX_COLL_ALLREDUCE, in, v, v + n, parts, v + 2 * n, v + 3 * n);
    if (st != TORX_OK)
        return st;
    /* out, when this task has one, has been sent from already (in may be
     * out): it takes the combined segment now. */
    unsigned char *result = out ? (unsigned char *)out + my_lo * es : mine;
    const unsigned char *vec[TORXC_EXCHANGE_MAX_TASKS] = {NULL};
    for (int m = 0; m < n; m++)
        vec[m] = m == me ? (const unsigned char *)in + my_lo * es : parts + (size_t)m * my_n * es;
    /* In place, result is this task's part: put it first, which every
     * combine reads element by element before it writes the element (the
     * result does not depend on the order of the vectors). */
    const unsigned char *first = vec[0];
    vec[0] = vec[me];
    vec[me] = first;
    combine(vec, n, my_n, dtype, op, result);
    for (int m = 0; m < n; m++) {
        /* send: the combined segment; receive: theirs; this task's own is
         * in place already */
        const int to_m = m != me && (root < 0 || m == root);
        v[m] = to_m ? my_n * es : 0;
        v[n + m] = 0;
        v[2 * n + m] = out && m != me ? (SEG_LO(m + 1) - SEG_LO(m)) * es : 0;
        v[3 * n + m] = SEG_LO(m) * es;
    }
#undef SEG_LO
    return torxc_paced_alltoallv(g, TORX_COLL_ALLREDUCE, result, v, v + n, out ? out : mine,
                                 v + 2 * n, v + 3 * n);
}

/* ---- Long vectors by direct reads ---------------------------------------------------- */

/* Bytes of a segment read and folded per pass: the reads and the fold
 * stay in the cache, and a segment of a few MiB costs a few dozen
 * process_vm_readv calls. */
#define DIRECT_CHUNK (64u * 1024u)

int torxc_direct_init(const torx_coll_t *c)
{
    /* The reads are done by the receiving thread, the application's
     * outside co mode; and they need cross-memory attach (the shm device's
     * bulk path "cma": a read is done when the call returns, and the
     * member read from need not be running). torxc_direct_applies adds
     * groups of every task, which the collective network and global
     * interrupt that order the reads span. */
    return torx_mode(c->ctx) != TORX_MODE_CO && strcmp(torx_bulk_path(c->dev), "cma") == 0;
}

/* Waits for a bulk transfer its start returned st for. */
static torx_status_t bulk_done(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_status_t st)
{
    while (st == TORX_OK && (st = torx_bulk_test(dev, op)) == TORX_AGAIN)
        ;
    return st;
}

/* len bytes at remote in member m into local. */
static torx_status_t direct_get(torx_coll_group_t *g, int m, uint64_t remote, void *local,
                                size_t len)
{
    torx_bulk_t op;
    return bulk_done(
        g->c->dev, &op,
        torx_bulk_get(g->c->dev, &op, g->coord[m], (const void *)(uintptr_t)remote, local, len));
}

/* len bytes at local into remote in member m. */
static torx_status_t direct_put(torx_coll_group_t *g, int m, uint64_t remote, const void *local,
                                size_t len)
{
    torx_bulk_t op;
    return bulk_done(
        g->c->dev, &op,
        torx_bulk_put(g->c->dev, &op, g->coord[m], (void *)(uintptr_t)remote, local, len));
}

/* acc[i] = acc[i] op b[i] for count elements of type T (SUM, MIN, MAX);
 * memcpy, not casts: the buffers are the user's, of any alignment (the
 * compiler turns both into plain loads), in FOLD_EACH's blocks of 8; acc
 * and b never overlap (restrict). */
#define FP_STEP(T, acc, b, i, op)                                                                  \
    do {                                                                                           \
        T x, y;                                                                                    \
        memcpy(&x, (acc) + (i) * sizeof(T), sizeof(T));                                            \
        memcpy(&y, (b) + (i) * sizeof(T), sizeof(T));                                              \
        T r = (op) == TORX_COLL_SUM   ? x + y                                                      \
              : (op) == TORX_COLL_MIN ? (y < x ? y : x)                                            \
                                      : (y > x ? y : x);                                           \
        memcpy((acc) + (i) * sizeof(T), &r, sizeof(T));                                            \
    } while (0)
#define FP_FOLD(T, acc, b, count, op) FOLD_EACH(count, i, FP_STEP(T, acc, b, i, op))

/* FP_FOLD with op a constant in each loop, so that each vectorizes. */
#define FP_FOLD_OP(T, acc, b, count, op)                                                           \
    do {                                                                                           \
        if ((op) == TORX_COLL_SUM)                                                                 \
            FP_FOLD(T, acc, b, count, TORX_COLL_SUM);                                              \
        else if ((op) == TORX_COLL_MIN)                                                            \
            FP_FOLD(T, acc, b, count, TORX_COLL_MIN);                                              \
        else                                                                                       \
            FP_FOLD(T, acc, b, count, TORX_COLL_MAX);                                              \
    } while (0)

/* acc[i] = acc[i] op b[i] for count elements of dt. */
TORXC_VECTOR_KERNEL static void fold_into(unsigned char *restrict acc,
                                          const unsigned char *restrict b, size_t count,
                                          torx_coll_dtype_t dt, torx_coll_op_t op)
{
    if (dt == TORX_COLL_DOUBLE)
        FP_FOLD_OP(double, acc, b, count, op);
    else if (dt == TORX_COLL_FLOAT)
        FP_FOLD_OP(float, acc, b, count, op);
    else {
        const unsigned char *const vec[2] = {acc, b};
        if (torxc_dtype_size(dt) == 4)
            fold32(acc, vec, 2, count, dt == TORX_COLL_S32, op);
        else
            fold64(acc, vec, 2, count, dt == TORX_COLL_S64, op);
    }
}

/* Publishes this member's input and result addresses (input 0: out of
 * memory, which tells the others; result 0: none) in one collective-network
 * allgather into g->direct_addr, which every member must have entered with
 * its input ready; then checks that every member called alike and has its
 * memory. */
static torx_status_t direct_publish(torx_coll_group_t *g, uint64_t in, uint64_t out, size_t count,
                                    torx_coll_dtype_t dtype, torx_coll_op_t op, int root)
{
    const torxc_direct_addr_t mine = {
        in, out, count, (uint64_t)(root + 1) << 16 | (uint64_t)dtype << 8 | (uint64_t)op};
    torxc_direct_addr_t *const addr = g->direct_addr;
    const torx_status_t st = torxc_cn_allgather(g, &mine, addr, sizeof mine);
    if (st != TORX_OK)
        return st;
    for (int m = 0; m < g->n; m++) {
        if (addr[m].count != count || addr[m].kind != mine.kind)
            return torxp_error(TORX_ERR_PROTO,
                               "torx: allreduce: member %d called with %" PRIu64
                               " elements (root/type/op %#" PRIx64
                               "), member %d with %zu (%#" PRIx64 ")",
                               m, addr[m].count, addr[m].kind, g->me, count, mine.kind);
        if (addr[m].in == 0)
            return torxp_error(m == g->me ? TORX_ERR_NOMEM : TORX_ERR_PEER,
                               "torx: allreduce of %zu bytes: member %d is out of memory",
                               count * torxc_dtype_size(dtype), m);
    }
    return TORX_OK;
}

/* Long vectors on one host, the split exchange's shape with every part
 * read where it lies instead of sent. The members publish their buffers'
 * addresses (input and result) in one collective-network allgather (which
 * every member must have entered, inputs ready); each member reads its
 * segment of every other member's input with torx_bulk_get, folds the n
 * parts in group order and writes the combined segment into every other
 * member's result (the root's alone, for a reduce) with torx_bulk_put; a
 * collective-network OR then agrees that every read and write succeeded,
 * and ends the call: no buffer is touched by another member after it.
 *
 * Why: in the split exchange every part is a rendezvous whose data moves
 * only once its sender has answered, so with more tasks than cores each
 * of the 2 (n - 1) parts waits for a task to be scheduled. Here a member
 * waits for the others twice in all, and a read or write needs nothing of
 * the member it reaches. The bytes moved are the split exchange's. Writing
 * the segments where they are needed, rather than reading them after a
 * round that says they are ready, spares a third wait (a barrier that kept
 * every segment in place until read) and the root of a reduce its n - 1
 * reads (docs/collectives.md#long-vectors).
 *
 * Only member k reads segment k of any input, and it writes segment k of
 * the results once it has read all of them, so a result that is also the
 * input (in place) is overwritten only where no one reads any more.
 *
 * Floating sums are folded in group order (member 0's part first): the
 * same bits on every member, and in every run with the same rank order,
 * like MPICH's and Open MPI's algorithms, but not independent of the rank
 * order as the other exchanges are (their sorted combine costs more than
 * the whole copy at these lengths). */
static torx_status_t direct_reduce(torx_coll_group_t *g, const void *in, void *out, size_t count,
                                   torx_coll_dtype_t dtype, torx_coll_op_t op, int root)
{
    const int n = g->n, me = g->me;
    const size_t es = torxc_dtype_size(dtype), nn = (size_t)n;
#define SEG_LO(m) (count * (size_t)(m) / nn)
    const size_t my_lo = SEG_LO(me), my_bytes = (SEG_LO(me + 1) - my_lo) * es;
    /* two chunks (a read, and this member's own part of an in-place
     * vector), and the combined segment off the root of a reduce */
    unsigned char *got = group_scratch(g, 2 * (size_t)DIRECT_CHUNK + (out ? 0 : my_bytes));
    unsigned char *own = got + DIRECT_CHUNK;
    unsigned char *part = out ? (unsigned char *)out + my_lo * es : own + DIRECT_CHUNK;
    const unsigned char *my_in = (const unsigned char *)in + my_lo * es;
    const int in_place = (const void *)in == out;
    /* Out of memory, this member still takes part in the allgather (the
     * others would wait for it forever), with zeros that tell them. A
     * member with no result (a reduce's, but the root) publishes 0. */
    torx_status_t st = direct_publish(g, got ? (uintptr_t)in : 0, got ? (uintptr_t)out : 0, count,
                                      dtype, op, root);
    if (st != TORX_OK)
        return st;
    const torxc_direct_addr_t *const addr = g->direct_addr;
    torx_status_t err = TORX_OK;
    for (size_t off = 0; off < my_bytes && err == TORX_OK; off += DIRECT_CHUNK) {
        const size_t len = my_bytes - off < DIRECT_CHUNK ? my_bytes - off : DIRECT_CHUNK;
        unsigned char *acc = part + off;
        const unsigned char *self = my_in + off;
        if (in_place && me != 0) { /* member 0's part lands where this one's lies */
            memcpy(own, self, len);
            self = own;
        }
        for (int m = 0; m < n && err == TORX_OK; m++) {
            const unsigned char *src = self;
            if (m != me) {
                unsigned char *to = m == 0 ? acc : got;
                err = direct_get(g, m, addr[m].in + my_lo * es + off, to, len);
                src = to;
            }
            if (m == 0) {
                if (src != acc)
                    memcpy(acc, src, len);
            } else {
                fold_into(acc, src, len / es, dtype, op);
            }
        }
    }
    for (int m = 0; m < n && err == TORX_OK && my_bytes; m++)
        if (m != me && addr[m].out)
            err = direct_put(g, m, addr[m].out + my_lo * es, part, my_bytes);
#undef SEG_LO
    /* Whether every read and write went well: every result is complete,
     * and no buffer is read or written any more. */
    const uint64_t failed = err != TORX_OK;
    uint64_t any_failed = 0;
    st = torxc_cn_reduce(g, &failed, &any_failed, 1, TORX_COLL_U64, TORX_COLL_BOR);
    if (st != TORX_OK)
        return st;
    if (any_failed && err == TORX_OK)
        err = torxp_error(TORX_ERR_PEER,
                          "torx: allreduce of %zu bytes: another member could not read or "
                          "write its parts",
                          count * es);
    return err;
}

/* Two members, up to TORXC_DIRECT2_WHOLE_MAX_BYTES: each member that needs
 * the result reads the other's whole vector, a chunk at a time, and
 * combines it with its own as the small exchange does (combine: member 0's
 * terms first, and a + b is b + a bit for bit, so both members and every
 * rank order get the same bits). Two waits on the other, as in
 * direct_reduce: the addresses' allgather (the inputs are ready), and a
 * collective-network OR after the reads, which agrees that they succeeded
 * and keeps each input in place until the other has read it. A reduce's
 * root alone reads. One system call a chunk where direct_reduce makes two
 * (a read and a write of half), which wins while the vector is short;
 * past it direct_reduce's halving of the bytes moved and folded wins. */
static torx_status_t direct_reduce2(torx_coll_group_t *g, const void *in, void *out, size_t count,
                                    torx_coll_dtype_t dtype, torx_coll_op_t op, int root)
{
    const int me = g->me, other = 1 - me;
    const size_t es = torxc_dtype_size(dtype), bytes = count * es;
    /* An in-place allreduce writes its result over the input the other
     * member reads: that member reads a copy. */
    const int copy_in = out != NULL && root < 0 && (const void *)in == out;
    /* a chunk of the other's vector, one of this member's own when its
     * input is the result buffer (combine writes over its first vector
     * only), and the copy */
    const size_t scratch = out ? 2 * (size_t)DIRECT_CHUNK + (copy_in ? bytes : 0) : 0;
    unsigned char *got = scratch ? group_scratch(g, scratch) : NULL;
    unsigned char *own = got ? got + DIRECT_CHUNK : NULL;
    const int ready = scratch == 0 || got != NULL;
    if (copy_in && got) {
        memcpy(own + DIRECT_CHUNK, in, bytes);
        in = own + DIRECT_CHUNK;
    }
    torx_status_t st = direct_publish(g, ready ? (uintptr_t)in : 0, 0, count, dtype, op, root);
    if (st != TORX_OK)
        return st;
    const torxc_direct_addr_t *const addr = g->direct_addr;
    torx_status_t err = TORX_OK;
    for (size_t off = 0; out && off < bytes && err == TORX_OK; off += DIRECT_CHUNK) {
        const size_t len = bytes - off < DIRECT_CHUNK ? bytes - off : DIRECT_CHUNK;
        unsigned char *dst = (unsigned char *)out + off;
        const unsigned char *self = (const unsigned char *)in + off;
        if (me == 1 && self == dst) {
            memcpy(own, self, len);
            self = own;
        }
        err = direct_get(g, other, addr[other].in + off, got, len);
        if (err == TORX_OK) {
            const unsigned char *vec[2] = {me == 0 ? self : got, me == 0 ? got : self};
            combine(vec, 2, len / es, dtype, op, dst);
        }
    }
    const uint64_t failed = err != TORX_OK;
    uint64_t any_failed = 0;
    st = torxc_cn_reduce(g, &failed, &any_failed, 1, TORX_COLL_U64, TORX_COLL_BOR);
    if (st != TORX_OK)
        return st;
    if (any_failed && err == TORX_OK)
        err = torxp_error(TORX_ERR_PEER,
                          "torx: allreduce of %zu bytes: the other member could not read its "
                          "part",
                          bytes);
    return err;
}

torx_status_t torxc_exchange_reduce(torx_coll_group_t *g, const void *in, void *out, size_t count,
                                    torx_coll_dtype_t dtype, torx_coll_op_t op, int root)
{
    size_t bytes = count * torxc_dtype_size(dtype);
    if (count == 0)
        return TORX_OK;
    const int direct = torxc_direct_applies(g);
    if (bytes > TORXC_EXCHANGE_MAX_BYTES ||
        (direct && g->n == 2 && bytes > TORXC_DIRECT2_MIN_BYTES)) {
        if (direct) {
            g->c->direct_calls++;
            return g->n == 2 && bytes <= TORXC_DIRECT2_WHOLE_MAX_BYTES
                       ? direct_reduce2(g, in, out, count, dtype, op, root)
                       : direct_reduce(g, in, out, count, dtype, op, root);
        }
        g->c->sent_calls++;
        return split_reduce(g, in, out, count, dtype, op, root);
    }
    int n = g->n;
    /* A reduce's vectors go to its root alone: the others send theirs and
     * leave, with no vector to wait for that they would not use. */
    const int takes = root < 0 || g->me == root;
    if (n == 2 && bytes <= TORXC_A2A_INJECT_MAX) {
        unsigned char other[TORXC_A2A_INJECT_MAX], own[TORXC_A2A_INJECT_MAX];
        const torx_status_t st = torxc_paced_pair(g, TORX_COLL_ALLREDUCE, in, bytes,
                                                  root < 0 || g->me != root, takes ? other : NULL);
        if (st != TORX_OK || !out || !takes)
            return st;
        const unsigned char *vec[2];
        vec[g->me] = in;
        vec[1 - g->me] = other;
        if ((const void *)in == out && g->me != 0) /* combine writes over vec[0] alone */
            vec[1] = memcpy(own, in, bytes);
        combine(vec, 2, count, dtype, op, out);
        return TORX_OK;
    }
    /* Scratch for the n vectors and the counts, kept with the group. */
    size_t need = (size_t)n * TORXC_EXCHANGE_MAX_BYTES;
    if (g->xchg == NULL) {
        g->xchg = malloc(need + 4 * (size_t)n * sizeof(size_t));
        if (g->xchg == NULL)
            return torxp_error(TORX_ERR_NOMEM, "torx: allreduce: out of memory");
    }
    size_t *v = (size_t *)(g->xchg + need);
    for (int m = 0; m < n; m++) {
        v[m] = root < 0 || m == root ? bytes : 0; /* send bytes */
        v[n + m] = 0;                             /* send displacement: one block for all */
        v[2 * n + m] = takes ? bytes : 0;         /* receive bytes */
        v[3 * n + m] = (size_t)m * bytes;         /* receive displacement */
    }
    /* This task's own vector is combined where it lies, not first copied
     * into its block of the scratch; except in place on a member other
     * than 0, since combine may write over vec[0] alone (and the order of
     * the vectors stays the members'). */
    const int own_in_scratch = out != NULL && (const void *)in == out && g->me != 0;
    if (!own_in_scratch)
        v[g->me] = v[2 * n + g->me] = 0;
    torx_status_t st = root < 0 ? torxc_paced_alltoallv(g, TORX_COLL_ALLREDUCE, in, v, v + n,
                                                        g->xchg, v + 2 * n, v + 3 * n)
                                : torxc_paced_sparse(g, TORX_COLL_ALLREDUCE, in, v, v + n, g->xchg,
                                                     v + 2 * n, v + 3 * n);
    if (st != TORX_OK)
        return st;
    if (out) {
        const unsigned char *vec[TORXC_EXCHANGE_MAX_TASKS] = {NULL};
        for (int m = 0; m < n; m++)
            vec[m] = g->xchg + (size_t)m * bytes;
        if (!own_in_scratch)
            vec[g->me] = in;
        combine(vec, n, count, dtype, op, out);
    }
    return TORX_OK;
}

/* ---- Allgather by direct exchange ---------------------------------------------------- */

/* Every member's block goes to every other. On one host with cross-memory
 * attach (torxc_direct_applies) each member reads the others' blocks
 * where they lie: the blocks' addresses cross the collective network in
 * one allgather (which every member must have entered), the reads need
 * nothing of the members read from, and one global-interrupt barrier keeps
 * every block in place until all have read it: two waits on the others in
 * all, where MPICH's ring or recursive doubling waits on a partner at each
 * of its steps. Elsewhere the blocks are sent, by the paced exchange. */
torx_status_t torxc_exchange_allgather(torx_coll_group_t *g, const void *in, void *out,
                                       size_t bytes)
{
    const int n = g->n, me = g->me;
    const size_t nn = (size_t)n;
    unsigned char *const own = (unsigned char *)out + (size_t)me * bytes;
    const unsigned char *const block = in ? (const unsigned char *)in : own;
    /* One-packet blocks are sent even where they could be read in place:
     * the reads need a collective-network round and a barrier, the sends
     * one injected packet each. */
    if (n == 2 && bytes <= TORXC_A2A_INJECT_MAX) {
        g->c->sent_calls++;
        if (in && bytes)
            memcpy(own, in, bytes);
        unsigned char none; /* an empty block still comes: where it goes */
        return torxc_paced_pair(g, TORX_COLL_ALLGATHER, own, bytes, 1,
                                bytes ? (unsigned char *)out + (size_t)(1 - me) * bytes : &none);
    }
    if (!torxc_direct_applies(g) || bytes <= TORXC_A2A_INJECT_MAX) {
        g->c->sent_calls++;
        size_t *v = (size_t *)(void *)group_scratch(g, 4 * nn * sizeof(size_t));
        if (v == NULL) /* before the exchange: the others would wait */
            return torxp_error(TORX_ERR_NOMEM, "torx: allgather: out of memory");
        if (in && bytes)
            memcpy(own, in, bytes);
        for (int m = 0; m < n; m++) {
            v[m] = m == me ? 0 : bytes;         /* send bytes: this block to m */
            v[n + m] = 0;                       /* send displacement */
            v[2 * n + m] = m == me ? 0 : bytes; /* receive bytes: m's block */
            v[3 * n + m] = (size_t)m * bytes;   /* receive displacement */
        }
        return torxc_paced_alltoallv(g, TORX_COLL_ALLGATHER, own, v, v + n, out, v + 2 * n,
                                     v + 3 * n);
    }
    g->c->direct_calls++;
    torxc_direct_addr_t *const addr = g->direct_addr;
    const torxc_direct_addr_t mine = {(uintptr_t)block, 0, bytes, 0};
    torx_status_t st = torxc_cn_allgather(g, &mine, addr, sizeof mine);
    if (st != TORX_OK)
        return st;
    for (int m = 0; m < n; m++) {
        if (addr[m].count != bytes)
            return torxp_error(TORX_ERR_PROTO,
                               "torx: allgather: member %d called with blocks of %" PRIu64
                               " bytes, member %d with %zu",
                               m, addr[m].count, me, bytes);
    }
    torx_status_t err = TORX_OK;
    if (in && bytes)
        memcpy(own, in, bytes);
    for (int k = 1; k < n && err == TORX_OK && bytes; k++) {
        const int m = (me + k) % n; /* each member starts at its successor: reads spread */
        err = direct_get(g, m, addr[m].in, (unsigned char *)out + (size_t)m * bytes, bytes);
    }
    st = torxc_gi_barrier(g); /* no member leaves while its block is read */
    return err != TORX_OK ? err : st;
}
