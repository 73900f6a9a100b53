/* The core of torx_cn_allreduce_sum_double (fpsum.c): a bitwise
 * reproducible sum of doubles on the collective network's integer ALU.
 * It lives in this header, parameterized by the three collective-network
 * calls it needs, so the unit test can run the very same code directly over
 * the shm device's functions; fpsum.c binds it to the public API.
 *
 * Per lane (one double per 64-bit lane, at most 32 per packet):
 *
 *  phase 1  MAX over S64 lanes of each value's biased exponent field E
 *           (zero and subnormals count as 1, the scale they share with the
 *           smallest normals; inf and nan are 2047).
 *  phase 2  ADD over S64 lanes of each value's signed 53-bit significand M
 *           (implicit bit included), shifted so that a value with exponent
 *           Emax has its leading bit at bit 62 - h, where the headroom
 *           h = ceil(log2(size)) + 1. Each term is then below 2^(63-h), so
 *           size of them sum to less than 2^62: the sum cannot overflow.
 *           Terms from smaller exponents shift right by Emax - E and are
 *           truncated toward zero.
 *  result   ldexp(sum, Emax - 1085 + h), the weight of bit 0.
 *
 * Reproducibility: every term depends only on the value and the lane's
 * maximum exponent, and integer addition is exact and associative, so the
 * integer sum, and hence the double, does not depend on which task holds
 * which value or in which order tasks arrive.
 *
 * Precision: bit 0 weighs q = 2^(Emax - 1085 + h) <= 2^(h - 62) * max|x|.
 * With size <= 512 (h <= 10) values in the top binade keep all 53 bits;
 * in general a value loses the bits of its significand below q. So
 *
 *     |result - exact sum| < size * q + ulp(result)
 *
 * (the ulp for rounding the 62-bit integer to a double; when the result is
 * subnormal, rounding twice still stays within one ulp). A sum that exceeds
 * the double range becomes +-inf, as in IEEE arithmetic.
 *
 * Specials: when a lane's Emax is 2047, phase 2 sums codes instead (+inf 1,
 * -inf 1<<21, nan 1<<42, finite 0): the result is nan when any nan or both
 * infinities appear, else that infinity. Nan results are the default quiet
 * nan (payloads are not kept). A zero sum is +0.0, even when every input
 * is -0.0. Jobs of 2^21 tasks or more are refused (the codes would carry).
 *
 * Rounding of the final conversion follows the current floating-point
 * rounding mode; tasks must not run with different modes.
 */
#ifndef TORXP_FPSUM_INTERNAL_H
#define TORXP_FPSUM_INTERNAL_H

#include "pkt_internal.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define TORXP_FPSUM_MAX (TORX_CN_PACKET_BYTES / 8) /* doubles per call: 32 */
#define TORXP_FPSUM_EXP_SPECIAL 2047
#define TORXP_FPSUM_CODE_PINF ((int64_t)1)
#define TORXP_FPSUM_CODE_NINF ((int64_t)1 << 21)
#define TORXP_FPSUM_CODE_NAN ((int64_t)1 << 42)
#define TORXP_FPSUM_MAX_TASKS (1 << 21) /* codes count up to 2^21 - 1 per kind */

/* The collective-network calls the sum runs on. */
typedef struct torxp_fpsum_io {
    torx_status_t (*inject)(torx_pkt_dev_t *dev, torx_cn_op_t op, torx_cn_type_t type, int is_root,
                            const void *data);
    torx_status_t (*read)(torx_pkt_dev_t *dev, void *result);
    int (*poll)(torx_pkt_dev_t *dev);
} torxp_fpsum_io_t;

/* ceil(log2(size)) + 1, for size >= 1. */
static inline int torxp_fpsum_headroom(int size)
{
    int h = 1;
    while ((1L << (h - 1)) < size)
        h++;
    return h;
}

static inline uint64_t torxp_fpsum_bits(double x)
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

/* Phase 1 lane: the biased exponent, with zero/subnormal as 1. */
static inline int64_t torxp_fpsum_exp(double x)
{
    int64_t e = (int64_t)((torxp_fpsum_bits(x) >> 52) & 0x7ff);
    return e == 0 ? 1 : e;
}

/* Phase 2 lane: x's aligned signed significand for the lane maximum emax
 * (from phase 1, so emax >= torxp_fpsum_exp(x)), or its special code when
 * emax is 2047. */
static inline int64_t torxp_fpsum_encode(double x, int64_t emax, int headroom)
{
    uint64_t b = torxp_fpsum_bits(x);
    int64_t e = (int64_t)((b >> 52) & 0x7ff);
    uint64_t m = b & ((UINT64_C(1) << 52) - 1);
    int neg = (int)(b >> 63);

    if (emax == TORXP_FPSUM_EXP_SPECIAL) {
        if (e != TORXP_FPSUM_EXP_SPECIAL)
            return 0;
        if (m != 0)
            return TORXP_FPSUM_CODE_NAN;
        return neg ? TORXP_FPSUM_CODE_NINF : TORXP_FPSUM_CODE_PINF;
    }
    if (e == 0)
        e = 1; /* subnormal: no implicit bit, same scale as exponent 1 */
    else
        m |= UINT64_C(1) << 52;
    /* Net right shift: down by the exponent gap, up by 10 - h to put the
     * top bit (bit 52) at bit 62 - h. */
    int64_t shift = (emax - e) - (10 - headroom);
    uint64_t v;
    if (shift < 0)
        v = m << -shift; /* only at the top binades, -shift <= 10 - h */
    else
        v = shift >= 64 ? 0 : m >> shift;
    return neg ? -(int64_t)v : (int64_t)v;
}

/* Converts a lane's phase 2 sum back to a double. */
static inline double torxp_fpsum_decode(int64_t sum, int64_t emax, int headroom)
{
    if (emax == TORXP_FPSUM_EXP_SPECIAL) {
        int64_t pinf = sum & (TORXP_FPSUM_CODE_NINF - 1);
        int64_t ninf = (sum >> 21) & (TORXP_FPSUM_CODE_NINF - 1);
        if ((sum >> 42) != 0 || (pinf && ninf) || (!pinf && !ninf))
            return NAN; /* a nan, inf - inf, or (impossible) no special at all */
        return pinf ? INFINITY : -INFINITY;
    }
    return ldexp((double)sum, (int)(emax - 1085 + headroom));
}

/* Pure spins before a waiting sum starts yielding: long enough to cover a
 * round between tasks on cores of their own (yielding there, a system call,
 * doubled the latency), short enough that tasks outnumbering cores hand
 * theirs over within microseconds. */
#define TORXP_FPSUM_SPINS 512

/* Drives the device while waiting. */
static inline void torxp_fpsum_wait(torx_pkt_dev_t *dev, const torxp_fpsum_io_t *io,
                                    unsigned *spins)
{
    io->poll(dev);
    if (++*spins >= TORXP_FPSUM_SPINS && (*spins & 7) == 0)
        torxp_yield(dev);
}

/* One collective round over S64 lanes, to completion. */
static inline torx_status_t torxp_fpsum_round(torx_pkt_dev_t *dev, const torxp_fpsum_io_t *io,
                                              torx_cn_op_t op, const int64_t *lanes,
                                              int64_t *result)
{
    unsigned spins = 0;
    torx_status_t st;
    while ((st = io->inject(dev, op, TORX_CN_S64, 0, lanes)) == TORX_NO_ROOM)
        torxp_fpsum_wait(dev, io, &spins);
    if (st != TORX_OK)
        return st;
    while ((st = io->read(dev, result)) == TORX_AGAIN)
        torxp_fpsum_wait(dev, io, &spins);
    return st;
}

/* The whole sum. Every task passes the same n; out may alias in. This
 * task must have no unread collective-network round (the sum reads the
 * next rounds as its own). An error in phase 1 (tasks disagree) reaches
 * every task for the same round, so all stop before phase 2. */
static inline torx_status_t torxp_fpsum_run(torx_pkt_dev_t *dev, const torxp_fpsum_io_t *io,
                                            const double *in, double *out, int n)
{
    if (n < 0 || n > TORXP_FPSUM_MAX)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_cn_allreduce_sum_double: n = %d, must be 0..%d (one "
                           "collective-network packet of doubles per call)",
                           n, TORXP_FPSUM_MAX);
    if (n == 0)
        return TORX_OK;
    if (in == NULL || out == NULL)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_cn_allreduce_sum_double: %s == NULL with n = %d",
                           in == NULL ? "in" : "out", n);
    if (dev->size >= TORXP_FPSUM_MAX_TASKS)
        return torxp_error(TORX_ERR_UNSUPPORTED,
                           "torx: torx_cn_allreduce_sum_double: a job of %d tasks is too "
                           "large (at most %d: the inf/nan counts would overflow)",
                           dev->size, TORXP_FPSUM_MAX_TASKS - 1);

    int h = torxp_fpsum_headroom(dev->size);
    int64_t lanes[TORXP_FPSUM_MAX] = {0}; /* unused lanes stay 0 */
    int64_t emax[TORXP_FPSUM_MAX], sum[TORXP_FPSUM_MAX];

    for (int i = 0; i < n; i++)
        lanes[i] = torxp_fpsum_exp(in[i]);
    torx_status_t st = torxp_fpsum_round(dev, io, TORX_CN_MAX, lanes, emax);
    if (st != TORX_OK)
        return st;
    for (int i = 0; i < n; i++)
        lanes[i] = torxp_fpsum_encode(in[i], emax[i], h);
    st = torxp_fpsum_round(dev, io, TORX_CN_ADD, lanes, sum);
    if (st != TORX_OK)
        return st;
    for (int i = 0; i < n; i++)
        out[i] = torxp_fpsum_decode(sum[i], emax[i], h);
    return TORX_OK;
}

#endif /* TORXP_FPSUM_INTERNAL_H */
