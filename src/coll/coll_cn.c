/* torx collectives on the global interrupt and the collective network.
 *
 * Both devices span every task of the job (the original's class routes), so
 * these run only on groups of every task; the group's order does not
 * matter: the ALU's operations are commutative and the floating sum is
 * bitwise independent of who holds what. A group's members call its
 * collectives in the same order (MPI's rule for blocking collectives), and
 * two groups of every task are never in a collective at once on one task,
 * so one device round sequence serves every such group.
 *
 * Vectors move in 256-byte rounds, pipelined TORXC_CN_DEPTH deep (the
 * device holds 4 rounds in flight). The floating sum needs its lane's
 * maximum exponent before it can encode (torx_cn_fpsum_*, <torx/packet.h>),
 * so it runs in batches: the exponent rounds of up to TORXC_CN_DEPTH
 * packets, then their sum rounds.
 *
 * While a round is not complete the task runs its progress function
 * (torxc_progress), so point-to-point traffic a peer waits on still moves.
 */
#include "coll_internal.h"

#include <string.h>

#define TORXC_CN_DEPTH 4
#define TORXC_CN_BYTES TORX_CN_PACKET_BYTES

/* ---- global interrupt ------------------------------------------------------ */

torx_status_t torxc_gi_barrier(torx_coll_group_t *g)
{
    torx_coll_t *c = g->c;
    torx_status_t st = torx_gi_arm(c->dev);
    if (st != TORX_OK)
        return st;
    unsigned spins = 0, polls = 0;
    while ((st = torx_gi_poll(c->dev)) == TORX_AGAIN)
        torxc_poll_wait(c, &polls, &spins);
    return st;
}

/* ---- round pipeline ------------------------------------------------------------ */

/* A vector split into 256-byte rounds: fill() writes round r's packet,
 * drain() takes round r's result. cn_run runs rounds first .. first +
 * rounds - 1 (the floating sum runs its vector a batch at a time). */
typedef struct cn_stream {
    torx_cn_op_t op;
    torx_cn_type_t type;
    int is_root; /* TORX_CN_BCAST */
    size_t first, rounds;
    void (*fill)(struct cn_stream *s, size_t r, void *pkt);
    void (*drain)(struct cn_stream *s, size_t r, const void *pkt);
    /* for the fill/drain functions */
    const unsigned char *in;
    unsigned char *out;
    size_t bytes;   /* of in/out */
    size_t esize;   /* element bytes */
    size_t base;    /* allgather: this task's block offset in the result */
    size_t block;   /* allgather: block bytes */
    torx_coll_dtype_t dtype;
    int64_t *emax; /* fpsum: the batch's exponents, from phase 1 for phase 2 */
    int headroom;
} cn_stream_t;

/* Runs every round of s: injects up to TORXC_CN_DEPTH ahead of the reads.
 * A disagreement (TORX_ERR_PROTO) is consumed on every task for the same
 * round, so the rounds go on to the end and keep the device in step; the
 * first such error is returned. Other errors end at once. */
static torx_status_t cn_run(torx_coll_t *c, cn_stream_t *s)
{
    unsigned char pkt[TORXC_CN_BYTES], res[TORXC_CN_BYTES];
    size_t injected = 0, read = 0;
    torx_status_t err = TORX_OK;
    unsigned spins = 0, polls = 0;
    while (read < s->rounds) {
        while (injected < s->rounds && injected - read < TORXC_CN_DEPTH) {
            const void *data = NULL;
            if (s->op != TORX_CN_BCAST || s->is_root) {
                s->fill(s, s->first + injected, pkt);
                data = pkt;
            }
            torx_status_t st = torx_cn_inject(c->dev, s->op, s->type, s->is_root, data);
            if (st == TORX_NO_ROOM)
                break;
            if (st != TORX_OK)
                return st;
            injected++;
        }
        if (injected == read) {
            /* Every round of ours is read, but a slower task has not read
             * the round whose slot the next one reuses. */
            torxc_poll_wait(c, &polls, &spins);
            continue;
        }
        torx_status_t st = torx_cn_read(c->dev, res);
        if (st == TORX_AGAIN) {
            torxc_poll_wait(c, &polls, &spins);
            continue;
        }
        if (st == TORX_ERR_PROTO) {
            if (err == TORX_OK)
                err = st;
        } else if (st != TORX_OK) {
            return st;
        } else if (err == TORX_OK && s->drain) {
            s->drain(s, s->first + read, res);
        }
        read++;
        spins = 0;
    }
    return err;
}

/* Bytes of round r within a vector of total bytes. */
static inline size_t round_len(size_t total, size_t r)
{
    size_t off = r * TORXC_CN_BYTES;
    return total - off < TORXC_CN_BYTES ? total - off : TORXC_CN_BYTES;
}

/* ---- integer reductions, bcast ------------------------------------------------- */

static void fill_copy(cn_stream_t *s, size_t r, void *pkt)
{
    size_t len = round_len(s->bytes, r);
    memcpy(pkt, s->in + r * TORXC_CN_BYTES, len);
    if (len < TORXC_CN_BYTES)
        memset((unsigned char *)pkt + len, 0, TORXC_CN_BYTES - len);
}

static void drain_copy(cn_stream_t *s, size_t r, const void *pkt)
{
    if (s->out)
        memcpy(s->out + r * TORXC_CN_BYTES, pkt, round_len(s->bytes, r));
}

/* LAND/LOR: each element becomes 0 or 1, then AND/OR. */
static void fill_logical(cn_stream_t *s, size_t r, void *pkt)
{
    size_t len = round_len(s->bytes, r);
    const unsigned char *src = s->in + r * TORXC_CN_BYTES;
    memset(pkt, 0, TORXC_CN_BYTES);
    if (s->esize == 4) {
        for (size_t i = 0; i < len / 4; i++) {
            uint32_t v;
            memcpy(&v, src + 4 * i, 4);
            ((uint32_t *)pkt)[i] = v != 0;
        }
    } else {
        for (size_t i = 0; i < len / 8; i++) {
            uint64_t v;
            memcpy(&v, src + 8 * i, 8);
            ((uint64_t *)pkt)[i] = v != 0;
        }
    }
}

/* MIN/MAX on floating types: the bits as a signed integer, with the
 * magnitude bits flipped for negative values, order like the values
 * (-0.0 just below +0.0). The map is its own inverse. */
static inline int32_t order32(int32_t b)
{
    return b >= 0 ? b : b ^ INT32_MAX;
}

static inline int64_t order64(int64_t b)
{
    return b >= 0 ? b : b ^ INT64_MAX;
}

/* The first n elements of lanes through order32/order64 (in place). */
static void reorder(void *lanes, size_t n, size_t esize)
{
    if (esize == 4)
        for (size_t i = 0; i < n; i++)
            ((int32_t *)lanes)[i] = order32(((int32_t *)lanes)[i]);
    else
        for (size_t i = 0; i < n; i++)
            ((int64_t *)lanes)[i] = order64(((int64_t *)lanes)[i]);
}

static void fill_ordered(cn_stream_t *s, size_t r, void *pkt)
{
    fill_copy(s, r, pkt);
    reorder(pkt, round_len(s->bytes, r) / s->esize, s->esize);
}

static void drain_ordered(cn_stream_t *s, size_t r, const void *pkt)
{
    if (s->out == NULL)
        return;
    unsigned char tmp[TORXC_CN_BYTES];
    size_t n = round_len(s->bytes, r) / s->esize;
    memcpy(tmp, pkt, sizeof tmp);
    reorder(tmp, n, s->esize);
    memcpy(s->out + r * TORXC_CN_BYTES, tmp, n * s->esize);
}

static torx_cn_type_t cn_int_type(torx_coll_dtype_t dtype)
{
    switch (dtype) {
    case TORX_COLL_S32:
    case TORX_COLL_FLOAT: /* MIN/MAX in order32 form */
        return TORX_CN_S32;
    case TORX_COLL_U32:
        return TORX_CN_U32;
    case TORX_COLL_U64:
        return TORX_CN_U64;
    default:
        return TORX_CN_S64;
    }
}

/* ---- the floating sum ------------------------------------------------------------ */

/* A float or double vector, as doubles, 32 to a packet. */
static inline double fp_elem(const cn_stream_t *s, size_t i)
{
    if (s->dtype == TORX_COLL_FLOAT) {
        float f;
        memcpy(&f, s->in + 4 * i, 4);
        return f;
    }
    double d;
    memcpy(&d, s->in + 8 * i, 8);
    return d;
}

#define FP_LANES (TORXC_CN_BYTES / 8)

static void fill_exponent(cn_stream_t *s, size_t r, void *pkt)
{
    size_t first = r * FP_LANES, count = s->bytes / s->esize;
    int64_t *lane = pkt;
    for (size_t i = 0; i < FP_LANES; i++)
        lane[i] = first + i < count ? torx_cn_fpsum_exponent(fp_elem(s, first + i)) : 0;
}

/* Phase 1 results, kept for phase 2 (emax of the batch's rounds). */
static void drain_exponent(cn_stream_t *s, size_t r, const void *pkt)
{
    memcpy(s->emax + (r % TORXC_CN_DEPTH) * FP_LANES, pkt, TORXC_CN_BYTES);
}

static void fill_mantissa(cn_stream_t *s, size_t r, void *pkt)
{
    size_t first = r * FP_LANES, count = s->bytes / s->esize;
    const int64_t *emax = s->emax + (r % TORXC_CN_DEPTH) * FP_LANES;
    int64_t *lane = pkt;
    for (size_t i = 0; i < FP_LANES; i++)
        lane[i] = first + i < count
                      ? torx_cn_fpsum_encode(fp_elem(s, first + i), emax[i], s->headroom)
                      : 0;
}

/* fill_mantissa on a guess of the exponents (cn_fpsum_short). A lane whose
 * own value's exponent is above the guess sends 0: the true maximum is at
 * least that exponent, so the guess failed there and this round's sum will
 * not be kept, and an encoding against a maximum below the value's own
 * exponent is out of its range (torx_cn_fpsum_encode). */
static void fill_mantissa_on_guess(cn_stream_t *s, size_t r, void *pkt)
{
    size_t first = r * FP_LANES, count = s->bytes / s->esize;
    const int64_t *guess = s->emax + (r % TORXC_CN_DEPTH) * FP_LANES;
    int64_t *lane = pkt;
    for (size_t i = 0; i < FP_LANES; i++) {
        const double x = first + i < count ? fp_elem(s, first + i) : 0.0;
        lane[i] = first + i < count && torx_cn_fpsum_exponent(x) <= guess[i]
                      ? torx_cn_fpsum_encode(x, guess[i], s->headroom)
                      : 0;
    }
}

static void drain_sum(cn_stream_t *s, size_t r, const void *pkt)
{
    if (s->out == NULL)
        return;
    size_t first = r * FP_LANES, count = s->bytes / s->esize;
    const int64_t *emax = s->emax + (r % TORXC_CN_DEPTH) * FP_LANES;
    const int64_t *sum = pkt;
    for (size_t i = 0; i < FP_LANES && first + i < count; i++) {
        double d = torx_cn_fpsum_decode(sum[i], emax[i], s->headroom);
        if (s->dtype == TORX_COLL_FLOAT) {
            float f = (float)d;
            memcpy(s->out + 4 * (first + i), &f, 4);
        } else {
            memcpy(s->out + 8 * (first + i), &d, 8);
        }
    }
}

/* Keeps err's first protocol error; other errors end the sum. */
static inline int cn_fatal(torx_status_t st, torx_status_t *err)
{
    if (st != TORX_OK && st != TORX_ERR_PROTO)
        return 1;
    if (st != TORX_OK && *err == TORX_OK)
        *err = st;
    return 0;
}

/* A vector of one round (up to FP_LANES elements: the short allreduce) in
 * the time of about one round instead of two. The exponent round and a sum
 * round encoded with a guess of the exponents, those the last such sum
 * found, go out back to back (the device holds TORXC_CN_DEPTH rounds in
 * flight), so no task waits for the others between them. The exponent
 * round's result is the same on every task, so all agree whether the guess
 * held in every lane; where it did not, the sum round runs again with the
 * true exponents. A sum is kept only when it was encoded with the true
 * exponents, so the result is the two-round result bit for bit. Repeated
 * calls on data of steady magnitude (an iteration's residual, a time step)
 * hit; a miss costs one round more than the plain two. */
static torx_status_t cn_fpsum_short(torx_coll_t *c, cn_stream_t *s, size_t count)
{
    int64_t emax[FP_LANES];
    unsigned char pkt[2][TORXC_CN_BYTES], sum[TORXC_CN_BYTES];
    torx_status_t err = TORX_OK;
    s->type = TORX_CN_S64;
    s->first = 0;
    s->rounds = 1;

    /* round 1: the exponents; round 2: the sum on the guess */
    fill_exponent(s, 0, pkt[0]);
    s->emax = c->fp_guess;
    fill_mantissa_on_guess(s, 0, pkt[1]);
    unsigned spins = 0, polls = 0;
    for (int k = 0; k < 2; k++) {
        torx_status_t st;
        while ((st = torx_cn_inject(c->dev, k ? TORX_CN_ADD : TORX_CN_MAX, TORX_CN_S64, 0,
                                    pkt[k])) == TORX_NO_ROOM)
            torxc_poll_wait(c, &polls, &spins);
        if (st != TORX_OK)
            return st;
    }
    for (int k = 0; k < 2; k++) {
        torx_status_t st;
        while ((st = torx_cn_read(c->dev, k ? (void *)sum : (void *)emax)) == TORX_AGAIN)
            torxc_poll_wait(c, &polls, &spins);
        if (cn_fatal(st, &err))
            return st;
    }
    if (err != TORX_OK) { /* the tasks disagreed: every task saw it, nobody guesses next */
        memset(c->fp_guess, 0, sizeof c->fp_guess);
        return err;
    }

    /* count >= 1 (torxc_cn_reduce returns before an empty vector), and a
     * zeroed guess never holds: every exponent lane is at least 1. */
    int held = 1;
    for (size_t i = 0; held && i < count; i++)
        held = emax[i] == c->fp_guess[i];
    memcpy(c->fp_guess, emax, sizeof emax);
    s->emax = emax;
    if (held) {
        c->fp_guess_held++;
        drain_sum(s, 0, sum);
        return TORX_OK;
    }
    c->fp_guess_missed++;
    s->op = TORX_CN_ADD;
    s->fill = fill_mantissa;
    s->drain = drain_sum;
    torx_status_t st = cn_run(c, s);
    if (st != TORX_OK)
        memset(c->fp_guess, 0, sizeof c->fp_guess);
    return st;
}

static torx_status_t cn_fpsum(torx_coll_t *c, cn_stream_t *s)
{
    int64_t emax[TORXC_CN_DEPTH * FP_LANES];
    s->emax = emax;
    s->headroom = torx_cn_fpsum_headroom(c->job_size);
    if (s->headroom == 0)
        return torxp_error(TORX_ERR_UNSUPPORTED,
                           "torx: collective-network floating sum: a job of %d tasks is too "
                           "large",
                           c->job_size);
    size_t count = s->bytes / s->esize;
    if (count <= FP_LANES)
        return cn_fpsum_short(c, s, count);
    size_t rounds = (count + FP_LANES - 1) / FP_LANES;
    torx_status_t err = TORX_OK;
    s->type = TORX_CN_S64;
    for (size_t first = 0; first < rounds; first += TORXC_CN_DEPTH) {
        /* Batches start at a multiple of the depth, so r % DEPTH indexes
         * emax the same way in both phases. */
        s->first = first;
        s->rounds = rounds - first < TORXC_CN_DEPTH ? rounds - first : TORXC_CN_DEPTH;
        s->op = TORX_CN_MAX;
        s->fill = fill_exponent;
        s->drain = drain_exponent;
        torx_status_t st = cn_run(c, s);
        if (cn_fatal(st, &err))
            return st;
        s->op = TORX_CN_ADD;
        s->fill = fill_mantissa;
        s->drain = err == TORX_OK ? drain_sum : NULL;
        st = cn_run(c, s);
        if (cn_fatal(st, &err))
            return st;
    }
    return err;
}

/* ---- the collectives ----------------------------------------------------------- */

torx_status_t torxc_cn_reduce(torx_coll_group_t *g, const void *in, void *out, size_t count,
                              torx_coll_dtype_t dtype, torx_coll_op_t op)
{
    torx_coll_t *c = g->c;
    cn_stream_t s = {0};
    s.esize = torxc_dtype_size(dtype);
    if (count > SIZE_MAX / s.esize)
        return torxp_error(TORX_ERR_INVAL, "torx: collective-network reduction of %zu elements",
                           count);
    s.in = in;
    s.out = out;
    s.bytes = count * s.esize;
    s.dtype = dtype;
    if (count == 0)
        return TORX_OK;
    if ((dtype == TORX_COLL_FLOAT || dtype == TORX_COLL_DOUBLE) && op == TORX_COLL_SUM)
        return cn_fpsum(c, &s);

    s.type = cn_int_type(dtype);
    s.rounds = (s.bytes + TORXC_CN_BYTES - 1) / TORXC_CN_BYTES;
    s.fill = fill_copy;
    s.drain = drain_copy;
    switch (op) {
    case TORX_COLL_SUM:
        s.op = TORX_CN_ADD;
        break;
    case TORX_COLL_MIN:
    case TORX_COLL_MAX:
        s.op = op == TORX_COLL_MIN ? TORX_CN_MIN : TORX_CN_MAX;
        if (dtype == TORX_COLL_FLOAT || dtype == TORX_COLL_DOUBLE) {
            s.fill = fill_ordered;
            s.drain = drain_ordered;
        }
        break;
    case TORX_COLL_BAND:
        s.op = TORX_CN_AND;
        break;
    case TORX_COLL_BOR:
        s.op = TORX_CN_OR;
        break;
    case TORX_COLL_BXOR:
        s.op = TORX_CN_XOR;
        break;
    case TORX_COLL_LAND:
    case TORX_COLL_LOR:
        s.op = op == TORX_COLL_LAND ? TORX_CN_AND : TORX_CN_OR;
        s.fill = fill_logical;
        break;
    default:
        return torxp_error(TORX_ERR_INVAL, "torx: collective-network reduction: op %d", op);
    }
    return cn_run(c, &s);
}

torx_status_t torxc_cn_bcast(torx_coll_group_t *g, void *buf, size_t bytes, int root)
{
    cn_stream_t s = {0};
    s.op = TORX_CN_BCAST;
    s.type = TORX_CN_U64;
    s.is_root = g->me == root;
    s.in = buf;
    s.out = s.is_root ? NULL : buf; /* the root's buffer already holds the result */
    s.bytes = bytes;
    s.rounds = (bytes + TORXC_CN_BYTES - 1) / TORXC_CN_BYTES;
    s.fill = fill_copy;
    s.drain = drain_copy;
    return cn_run(g->c, &s);
}

/* Every task contributes its block at its place and zeros elsewhere; OR
 * puts the blocks together. */
static void fill_block(cn_stream_t *s, size_t r, void *pkt)
{
    size_t lo = r * TORXC_CN_BYTES, hi = lo + TORXC_CN_BYTES;
    memset(pkt, 0, TORXC_CN_BYTES);
    size_t a = s->base > lo ? s->base : lo;
    size_t b = s->base + s->block < hi ? s->base + s->block : hi;
    if (a < b)
        memcpy((unsigned char *)pkt + (a - lo), s->in + (a - s->base), b - a);
}

torx_status_t torxc_cn_allgather(torx_coll_group_t *g, const void *in, void *out, size_t bytes)
{
    cn_stream_t s = {0};
    s.op = TORX_CN_OR;
    s.type = TORX_CN_U64;
    s.block = bytes;
    s.base = (size_t)g->me * bytes;
    /* In place, this task's block is read from out while earlier rounds'
     * results are written there: a result byte inside the block is this
     * task's own byte (the others contribute zeros), so nothing changes. */
    s.in = in ? in : (const unsigned char *)out + s.base;
    s.out = out;
    s.bytes = bytes * (size_t)g->n;
    s.rounds = (s.bytes + TORXC_CN_BYTES - 1) / TORXC_CN_BYTES;
    s.fill = fill_block;
    s.drain = drain_copy;
    return cn_run(g->c, &s);
}
