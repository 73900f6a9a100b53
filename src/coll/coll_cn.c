/* torx collectives on the global interrupt and the collective network.
 *
 * Both devices span every task of the job (the original's class routes), so
 * these run only on groups of every task; the group's order does not
 * matter: the ALU's operations are commutative and the floating sum is
 * bitwise independent of who holds what. A group's members call its
 * collectives in the same order (MPI's rule for blocking collectives), and
 * two groups of every task are never in a blocking collective at once on
 * one task, so channel 0's round sequence serves every such group's
 * blocking collectives. A nonblocking collective runs on its group's own
 * channel (coll_nb.c), since those of different groups may be started in
 * different orders on different tasks.
 *
 * Vectors move in 256-byte rounds, pipelined TORXC_CN_DEPTH deep (the
 * device holds 4 rounds in flight). The floating sum needs its lane's
 * maximum exponent before it can encode (torx_cn_fpsum_*, <torx/packet.h>),
 * so it runs in batches: the exponent rounds of up to TORXC_CN_DEPTH
 * packets, then their sum rounds; short vectors first try one pass on a
 * guess of the exponents (cn_fpsum_guessed).
 *
 * While a round is not complete the task runs its progress function
 * (torxc_progress), so point-to-point traffic a peer waits on still moves.
 */
#include "coll_internal.h"

#include <stdlib.h>
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
struct torxc_cn_stream {
    torx_cn_op_t op;
    torx_cn_type_t type;
    int is_root; /* TORX_CN_BCAST */
    size_t first, rounds;
    void (*fill)(struct torxc_cn_stream *s, size_t r, void *pkt);
    void (*drain)(struct torxc_cn_stream *s, size_t r, const void *pkt);
    /* for the fill/drain functions */
    const unsigned char *in;
    unsigned char *out;
    size_t bytes; /* of in/out */
    size_t esize; /* element bytes */
    size_t base;  /* allgather: this task's block offset in the result */
    size_t block; /* allgather: block bytes */
    torx_coll_dtype_t dtype;
    int64_t *emax; /* fpsum: the batch's exponents, from phase 1 for phase 2 */
    int headroom;
    const int64_t *guess; /* fpsum on a guess: per element */
    int64_t *found;       /* fpsum: where phase 1 also leaves each element's exponent, or NULL */
    int64_t *lanes;       /* fpsum on a guess: every round's result lanes */
    const struct guess_layout *layout; /* fpsum on a guess: the rounds' layout */
    /* where the rounds stand (cn_step): on channel ch, injected and read of
     * rounds, and the first disagreement */
    unsigned ch;
    size_t injected, read;
    torx_status_t err;
};
typedef struct torxc_cn_stream cn_stream_t;

/* Moves s's rounds on as far as they go without waiting: injects up to
 * TORXC_CN_DEPTH ahead of the reads, and reads what is complete. TORX_AGAIN
 * while rounds remain; when all are read, TORX_OK or the first
 * disagreement (TORX_ERR_PROTO), which is consumed on every task for the
 * same round, so the rounds go on to the end and keep the device in step.
 * Other errors end at once. *moved: whether a round was read. */
static torx_status_t cn_step(torx_coll_t *c, cn_stream_t *s, int *moved)
{
    unsigned char pkt[TORXC_CN_BYTES], res[TORXC_CN_BYTES];
    *moved = 0;
    while (s->read < s->rounds) {
        while (s->injected < s->rounds && s->injected - s->read < TORXC_CN_DEPTH) {
            const void *data = NULL;
            if (s->op != TORX_CN_BCAST || s->is_root) {
                s->fill(s, s->first + s->injected, pkt);
                data = pkt;
            }
            torx_status_t st = torx_cn_inject_on(c->dev, s->ch, s->op, s->type, s->is_root, data);
            if (st == TORX_NO_ROOM)
                break;
            if (st != TORX_OK)
                return st;
            s->injected++;
        }
        /* Nothing of ours to read: a slower task has not read the round
         * whose slot the next one reuses. */
        if (s->injected == s->read)
            return TORX_AGAIN;
        torx_status_t st = torx_cn_read_on(c->dev, s->ch, res);
        if (st == TORX_AGAIN)
            return TORX_AGAIN;
        if (st == TORX_ERR_PROTO) {
            if (s->err == TORX_OK)
                s->err = st;
        } else if (st != TORX_OK) {
            return st;
        } else if (s->err == TORX_OK && s->drain) {
            s->drain(s, s->first + s->read, res);
        }
        s->read++;
        *moved = 1;
    }
    return s->err;
}

/* Runs every round of s from s->first, waiting. */
static torx_status_t cn_run(torx_coll_t *c, cn_stream_t *s)
{
    unsigned spins = 0, polls = 0;
    int moved;
    torx_status_t st;
    s->injected = s->read = 0;
    s->err = TORX_OK;
    while ((st = cn_step(c, s, &moved)) == TORX_AGAIN) {
        if (moved)
            spins = 0;
        torxc_poll_wait(c, &polls, &spins);
    }
    return st;
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

/* Phase 1 results, kept for phase 2 (emax of the batch's rounds), and for
 * the next sum's guess. */
static void drain_exponent(cn_stream_t *s, size_t r, const void *pkt)
{
    memcpy(s->emax + (r % TORXC_CN_DEPTH) * FP_LANES, pkt, TORXC_CN_BYTES);
    if (s->found) {
        const size_t first = r * FP_LANES, count = s->bytes / s->esize;
        const size_t n = count - first < FP_LANES ? count - first : FP_LANES;
        memcpy(s->found + first, pkt, n * sizeof(int64_t));
    }
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

/* Element i of the result. */
static inline void put_fp(cn_stream_t *s, size_t i, double d)
{
    if (s->dtype == TORX_COLL_FLOAT) {
        float f = (float)d;
        memcpy(s->out + 4 * i, &f, 4);
    } else {
        memcpy(s->out + 8 * i, &d, 8);
    }
}

static void drain_sum(cn_stream_t *s, size_t r, const void *pkt)
{
    if (s->out == NULL)
        return;
    size_t first = r * FP_LANES, count = s->bytes / s->esize;
    const int64_t *emax = s->emax + (r % TORXC_CN_DEPTH) * FP_LANES;
    const int64_t *sum = pkt;
    for (size_t i = 0; i < FP_LANES && first + i < count; i++)
        put_fp(s, first + i, torx_cn_fpsum_decode(sum[i], emax[i], s->headroom));
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

/* ---- the floating sum on a guess of its exponents ---------------------------------- */

/* One pass instead of two. A guessed round carries `per_round` elements,
 * each encoded against its guess (the exponent the last sum found there),
 * and two counts per element, ADDed like the sums: the tasks whose
 * exponent is above the guess, and those whose exponent equals it. Where no
 * task is above and one is equal, the guess is the element's true maximum,
 * so the encodings, and the sum's bits, are those of the two-pass sum. A
 * task above its guess sends 0 there: an encoding against a maximum below
 * the value's own exponent is out of its range (torx_cn_fpsum_encode), and
 * that element's sum is not kept. Every task reads the same counts, so all
 * agree whether the guess held everywhere; if not, the two-pass sum runs,
 * and its exponents are the next guess. Repeated sums of data of steady
 * magnitude (a residual, a time step's energy) hit; a miss costs one pass
 * more.
 *
 * A count fits in `bits`, the bits of the job's size (a field never carries
 * into its neighbour), so a small job packs many elements' counts into a
 * lane: with 4 tasks, 10 elements' counts a lane, and a round carries 3
 * lanes of counts and 29 sums, so 64 doubles take 3 rounds where the two
 * passes take 4 (with 2^20 tasks, 16 and 16). The counts come first: the
 * device moves a round only as far as its last nonzero byte, and a short
 * vector's round then fits a cache line. */
typedef struct guess_layout {
    unsigned bits, per_lane, count_lanes, per_round;
} guess_layout_t;

static guess_layout_t guess_layout(int ntasks)
{
    guess_layout_t l = {.bits = 1};
    while ((1ull << l.bits) <= (unsigned long long)ntasks)
        l.bits++;
    l.per_lane = 64 / (2 * l.bits);
    for (unsigned cl = 1; cl < FP_LANES; cl++) {
        const unsigned sums = FP_LANES - cl, counted = cl * l.per_lane;
        const unsigned n = sums < counted ? sums : counted;
        if (n > l.per_round) {
            l.per_round = n;
            l.count_lanes = cl;
        }
    }
    return l;
}

/* Fewest elements a guessed round carries (headroom allows 2^21 - 1 tasks:
 * 21 bits a count, one element's two counts a lane), and so most rounds. */
#define GUESS_MIN_PER_ROUND (FP_LANES / 2)
#define GUESS_ROUNDS_MAX ((TORXC_FP_GUESS_MAX + GUESS_MIN_PER_ROUND - 1) / GUESS_MIN_PER_ROUND)

static void fill_guessed(cn_stream_t *s, size_t r, void *pkt)
{
    const guess_layout_t *l = s->layout;
    const size_t first = r * l->per_round, count = s->bytes / s->esize;
    const size_t n = count - first < l->per_round ? count - first : l->per_round;
    uint64_t *lane = pkt, *sum = lane + l->count_lanes;
    memset(pkt, 0, TORXC_CN_BYTES);
    unsigned in_lane = 0, shift = 0;
    for (size_t i = 0; i < n; i++) {
        const double x = fp_elem(s, first + i);
        const int64_t ex = torx_cn_fpsum_exponent(x), g = s->guess[first + i];
        if (ex <= g)
            sum[i] = (uint64_t)torx_cn_fpsum_encode(x, g, s->headroom);
        *lane |= ((uint64_t)(ex > g) << l->bits | (uint64_t)(ex == g)) << shift;
        shift += 2 * l->bits;
        if (++in_lane == l->per_lane) {
            in_lane = shift = 0;
            lane++;
        }
    }
}

static void drain_guessed(cn_stream_t *s, size_t r, const void *pkt)
{
    memcpy(s->lanes + r * FP_LANES, pkt, TORXC_CN_BYTES);
}

/* 1: every element's guess held (the sums in s->lanes are the result). */
static int guess_held(const cn_stream_t *s, size_t count)
{
    const guess_layout_t *l = s->layout;
    const uint64_t mask = (1ull << l->bits) - 1;
    for (size_t first = 0, r = 0; first < count; first += l->per_round, r++) {
        const uint64_t *lane = (const uint64_t *)s->lanes + r * FP_LANES;
        const size_t n = count - first < l->per_round ? count - first : l->per_round;
        unsigned in_lane = 0, shift = 0;
        for (size_t i = 0; i < n; i++) {
            const uint64_t c = *lane >> shift;
            if (((c >> l->bits) & mask) != 0 || (c & mask) == 0)
                return 0;
            shift += 2 * l->bits;
            if (++in_lane == l->per_lane) {
                in_lane = shift = 0;
                lane++;
            }
        }
    }
    return 1;
}

/* The result of a guess that held (the sums in s->lanes), into s->out. */
static void guessed_drain(cn_stream_t *s, size_t count)
{
    const guess_layout_t *l = s->layout;
    for (size_t first = 0, r = 0; first < count; first += l->per_round, r++) {
        const int64_t *sum = s->lanes + r * FP_LANES + l->count_lanes;
        const size_t n = count - first < l->per_round ? count - first : l->per_round;
        for (size_t i = 0; i < n; i++)
            put_fp(s, first + i, torx_cn_fpsum_decode(sum[i], s->guess[first + i], s->headroom));
    }
}

static torx_status_t cn_fpsum_twopass(torx_coll_t *c, cn_stream_t *s);

static torx_status_t cn_fpsum_guessed(torx_coll_t *c, cn_stream_t *s, size_t count)
{
    int64_t lanes[GUESS_ROUNDS_MAX * FP_LANES];
    const guess_layout_t layout = guess_layout(c->job_size);
    s->layout = &layout;
    s->type = TORX_CN_S64;
    s->op = TORX_CN_ADD;
    s->first = 0;
    s->rounds = (count + layout.per_round - 1) / layout.per_round;
    s->fill = fill_guessed;
    s->drain = drain_guessed;
    s->guess = c->fp_guess;
    s->lanes = lanes;
    torx_status_t st = cn_run(c, s);
    if (st != TORX_OK) { /* a disagreement, seen by every task: nobody guesses next */
        memset(c->fp_guess, 0, sizeof c->fp_guess);
        return st;
    }
    if (guess_held(s, count)) {
        c->fp_guess_held++;
        if (s->out)
            guessed_drain(s, count);
        return TORX_OK;
    }
    c->fp_guess_missed++;
    s->found = c->fp_guess;
    st = cn_fpsum_twopass(c, s);
    if (st != TORX_OK)
        memset(c->fp_guess, 0, sizeof c->fp_guess);
    return st;
}

/* The exponent rounds of a batch, then its sum rounds. */
static torx_status_t cn_fpsum_twopass(torx_coll_t *c, cn_stream_t *s)
{
    int64_t emax[TORXC_CN_DEPTH * FP_LANES];
    s->emax = emax;
    const size_t count = s->bytes / s->esize;
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

static torx_status_t cn_fpsum(torx_coll_t *c, cn_stream_t *s)
{
    s->headroom = torx_cn_fpsum_headroom(c->job_size);
    if (s->headroom == 0)
        return torxp_error(TORX_ERR_UNSUPPORTED,
                           "torx: collective-network floating sum: a job of %d tasks is too "
                           "large",
                           c->job_size);
    const size_t count = s->bytes / s->esize;
    if (count <= TORXC_FP_GUESS_MAX)
        return cn_fpsum_guessed(c, s, count);
    return cn_fpsum_twopass(c, s);
}

/* ---- the collectives ----------------------------------------------------------- */

/* Sets s up for a reduction of count elements (nothing to do: s->rounds
 * stays 0); the floating sum's fields are left to cn_fpsum and the
 * nonblocking sum. */
static torx_status_t reduce_setup(cn_stream_t *s, const void *in, void *out, size_t count,
                                  torx_coll_dtype_t dtype, torx_coll_op_t op)
{
    s->esize = torxc_dtype_size(dtype);
    if (count > SIZE_MAX / s->esize)
        return torxp_error(TORX_ERR_INVAL, "torx: collective-network reduction of %zu elements",
                           count);
    s->in = in;
    s->out = out;
    s->bytes = count * s->esize;
    s->dtype = dtype;
    if (count == 0 || torxc_is_fpsum(dtype, op))
        return TORX_OK;

    s->type = cn_int_type(dtype);
    s->rounds = (s->bytes + TORXC_CN_BYTES - 1) / TORXC_CN_BYTES;
    s->fill = fill_copy;
    s->drain = drain_copy;
    switch (op) {
    case TORX_COLL_SUM:
        s->op = TORX_CN_ADD;
        break;
    case TORX_COLL_MIN:
    case TORX_COLL_MAX:
        s->op = op == TORX_COLL_MIN ? TORX_CN_MIN : TORX_CN_MAX;
        if (dtype == TORX_COLL_FLOAT || dtype == TORX_COLL_DOUBLE) {
            s->fill = fill_ordered;
            s->drain = drain_ordered;
        }
        break;
    case TORX_COLL_BAND:
        s->op = TORX_CN_AND;
        break;
    case TORX_COLL_BOR:
        s->op = TORX_CN_OR;
        break;
    case TORX_COLL_BXOR:
        s->op = TORX_CN_XOR;
        break;
    case TORX_COLL_LAND:
    case TORX_COLL_LOR:
        s->op = op == TORX_COLL_LAND ? TORX_CN_AND : TORX_CN_OR;
        s->fill = fill_logical;
        break;
    default:
        return torxp_error(TORX_ERR_INVAL, "torx: collective-network reduction: op %d", op);
    }
    return TORX_OK;
}

torx_status_t torxc_cn_reduce(torx_coll_group_t *g, const void *in, void *out, size_t count,
                              torx_coll_dtype_t dtype, torx_coll_op_t op)
{
    cn_stream_t s = {0};
    torx_status_t st = reduce_setup(&s, in, out, count, dtype, op);
    if (st != TORX_OK || count == 0)
        return st;
    if (torxc_is_fpsum(dtype, op))
        return cn_fpsum(g->c, &s);
    return cn_run(g->c, &s);
}

static void bcast_setup(cn_stream_t *s, const torx_coll_group_t *g, void *buf, size_t bytes,
                        int root)
{
    s->op = TORX_CN_BCAST;
    s->type = TORX_CN_U64;
    s->is_root = g->me == root;
    s->in = buf;
    s->out = s->is_root ? NULL : buf; /* the root's buffer already holds the result */
    s->bytes = bytes;
    s->rounds = (bytes + TORXC_CN_BYTES - 1) / TORXC_CN_BYTES;
    s->fill = fill_copy;
    s->drain = drain_copy;
}

torx_status_t torxc_cn_bcast(torx_coll_group_t *g, void *buf, size_t bytes, int root)
{
    cn_stream_t s = {0};
    bcast_setup(&s, g, buf, bytes, root);
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

/* ---- a step at a time, on a channel of its own (nonblocking, coll_nb.c) ------------ */

struct torxc_cn_op {
    cn_stream_t s;
    /* the floating sum, always in two passes (the guess's state belongs to
     * the blocking sums of channel 0): batches of TORXC_CN_DEPTH rounds,
     * the exponents (phase 0) then the sums (phase 1) */
    int fpsum, phase;
    size_t rounds;
    torx_status_t err; /* the first disagreement over every batch */
    int64_t emax[];    /* the floating sum's: TORXC_CN_DEPTH * FP_LANES */
};

/* A zeroed op, with room for the floating sum's exponents when fpsum. */
static torxc_cn_op_t *op_new(int fpsum)
{
    return calloc(1, sizeof(torxc_cn_op_t) +
                         (fpsum ? TORXC_CN_DEPTH * FP_LANES * sizeof(int64_t) : 0));
}

/* The stream of the floating sum's next pass (s.first: its batch). */
static void fpsum_pass(torxc_cn_op_t *o)
{
    cn_stream_t *s = &o->s;
    s->rounds = o->rounds - s->first < TORXC_CN_DEPTH ? o->rounds - s->first : TORXC_CN_DEPTH;
    s->injected = s->read = 0;
    s->err = TORX_OK;
    if (o->phase == 0) {
        s->op = TORX_CN_MAX;
        s->fill = fill_exponent;
        s->drain = drain_exponent;
    } else {
        s->op = TORX_CN_ADD;
        s->fill = fill_mantissa;
        s->drain = o->err == TORX_OK ? drain_sum : NULL;
    }
}

torx_status_t torxc_cn_ireduce(torx_coll_group_t *g, unsigned ch, const void *in, void *out,
                               size_t count, torx_coll_dtype_t dtype, torx_coll_op_t op,
                               torxc_cn_op_t **out_op)
{
    torxc_cn_op_t *o = op_new(count > 0 && torxc_is_fpsum(dtype, op));
    if (o == NULL)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for a nonblocking reduction");
    torx_status_t st = reduce_setup(&o->s, in, out, count, dtype, op);
    if (st == TORX_OK && count > 0 && torxc_is_fpsum(dtype, op)) {
        o->fpsum = 1;
        o->s.headroom = torx_cn_fpsum_headroom(g->c->job_size);
        if (o->s.headroom == 0)
            st = torxp_error(TORX_ERR_UNSUPPORTED,
                             "torx: collective-network floating sum: a job of %d tasks is too "
                             "large",
                             g->c->job_size);
        o->s.type = TORX_CN_S64;
        o->s.emax = o->emax;
        o->rounds = (count + FP_LANES - 1) / FP_LANES;
        fpsum_pass(o);
    }
    if (st != TORX_OK) {
        free(o);
        return st;
    }
    o->s.ch = ch;
    *out_op = o;
    return TORX_OK;
}

torx_status_t torxc_cn_ibcast(torx_coll_group_t *g, unsigned ch, void *buf, size_t bytes, int root,
                              torxc_cn_op_t **out_op)
{
    torxc_cn_op_t *o = op_new(0);
    if (o == NULL)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for a nonblocking broadcast");
    bcast_setup(&o->s, g, buf, bytes, root);
    o->s.ch = ch;
    *out_op = o;
    return TORX_OK;
}

torx_status_t torxc_cn_op_step(torx_coll_t *c, torxc_cn_op_t *o, int *moved)
{
    torx_status_t st = cn_step(c, &o->s, moved);
    if (!o->fpsum || st == TORX_AGAIN)
        return st;
    for (;;) {
        if (cn_fatal(st, &o->err))
            return st;
        if (o->phase == 0) {
            o->phase = 1;
        } else {
            o->phase = 0;
            o->s.first += TORXC_CN_DEPTH;
            if (o->s.first >= o->rounds)
                return o->err;
        }
        fpsum_pass(o);
        int more;
        st = cn_step(c, &o->s, &more);
        *moved |= more;
        if (st == TORX_AGAIN)
            return st;
    }
}
