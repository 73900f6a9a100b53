/* Bitwise reproducible sum of doubles over the collective network: a max of
 * exponents, then an integer sum of aligned significands. Device-independent:
 * it runs on the public torx_cn_inject / torx_cn_read / torx_pkt_poll. The
 * method, its precision and its special cases are described in
 * fpsum_internal.h. */
#include "fpsum_internal.h"

torx_status_t torx_cn_allreduce_sum_double(torx_pkt_dev_t *dev, const double *in, double *out,
                                           int n)
{
    static const torxp_fpsum_io_t io = {
        .inject = torx_cn_inject,
        .read = torx_cn_read,
        .poll = torx_pkt_poll,
    };
    return torxp_fpsum_run(dev, &io, in, out, n);
}

int torx_cn_fpsum_headroom(int ntasks)
{
    if (ntasks < 1 || ntasks >= TORXP_FPSUM_MAX_TASKS)
        return 0;
    return torxp_fpsum_headroom(ntasks);
}

int64_t torx_cn_fpsum_exponent(double x)
{
    return torxp_fpsum_exp(x);
}

int64_t torx_cn_fpsum_encode(double x, int64_t emax, int headroom)
{
    return torxp_fpsum_encode(x, emax, headroom);
}

double torx_cn_fpsum_decode(int64_t sum, int64_t emax, int headroom)
{
    return torxp_fpsum_decode(sum, emax, headroom);
}
