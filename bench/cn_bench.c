/* cn_bench: latency of the collective network and the global interrupt of
 * the torx packet layer, for 2 tasks: what MPI_Allreduce of a few integers
 * and MPI_Barrier on MPI_COMM_WORLD will cost at best.
 *
 *   allreduce  torx_cn_inject(ADD, S64) of one 256-byte packet (32 values),
 *              then torx_cn_read until the combined packet is there;
 *   dsum       torx_cn_allreduce_sum_double of one double (two ALU rounds:
 *              max of exponents, then sum of aligned mantissas);
 *   barrier    torx_gi_arm, then torx_gi_poll until every task has entered.
 *
 * Each operation is repeated back to back, timed in batches; a figure is
 * the time of one complete operation as rank 0 sees it. Both tasks check
 * every result.
 *
 * For 2 tasks the floor of each is one one-way cache-line handoff: a task
 * cannot finish before the other's contribution has crossed to it. The
 * handoff (bench_util.h) runs between the same two tasks in blocks
 * alternating with the operations, so the ratio compares figures that saw
 * the same vCPU placements.
 *
 * Environment: CN_ITERS operations per figure (100000).
 * Output format: see bench_util.h.
 */
/* Before any system header: bench_util.h uses sched_setaffinity. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <torx/packet.h>

#include "bench_util.h"

#define BATCH BENCH_BATCH
#define NBLOCKS 5 /* alternations of handoff and operation */
#define JOB_TIMEOUT_S 300.0
#define CN_VALUES (TORX_CN_PACKET_BYTES / 8)

typedef struct cn_job {
    long iters;
    bench_ref_t *ref; /* the handoff line, shared with the other task */
} cn_job_t;

static int cn_fail(const char *what, torx_status_t rc)
{
    fprintf(stderr, "cn_bench: %s: %s: %s\n", what, torx_status_str(rc), torx_last_error());
    return 1;
}

/* One allreduce; checks the sum. Returns 0 or 1. */
static inline int allreduce_once(torx_pkt_dev_t *dev, const int64_t *in, int64_t *out,
                                 int64_t expect0)
{
    torx_status_t rc;
    while ((rc = torx_cn_inject(dev, TORX_CN_ADD, TORX_CN_S64, 0, in)) == TORX_NO_ROOM)
        bench_relax();
    if (rc != TORX_OK)
        return cn_fail("torx_cn_inject", rc);
    while ((rc = torx_cn_read(dev, out)) == TORX_AGAIN)
        bench_relax();
    if (rc != TORX_OK)
        return cn_fail("torx_cn_read", rc);
    if (out[0] != expect0 || out[CN_VALUES - 1] != expect0 * CN_VALUES) {
        fprintf(stderr, "cn_bench: allreduce gave %lld and %lld, expected %lld and %lld\n",
                (long long)out[0], (long long)out[CN_VALUES - 1], (long long)expect0,
                (long long)(expect0 * CN_VALUES));
        return 1;
    }
    return 0;
}

static inline int barrier_once(torx_pkt_dev_t *dev)
{
    torx_status_t rc = torx_gi_arm(dev);
    if (rc != TORX_OK)
        return cn_fail("torx_gi_arm", rc);
    while ((rc = torx_gi_poll(dev)) == TORX_AGAIN)
        bench_relax();
    return rc == TORX_OK ? 0 : cn_fail("torx_gi_poll", rc);
}

static inline int dsum_once(torx_pkt_dev_t *dev, double in, double expect)
{
    double out = 0;
    torx_status_t rc = torx_cn_allreduce_sum_double(dev, &in, &out, 1);
    if (rc != TORX_OK)
        return cn_fail("torx_cn_allreduce_sum_double", rc);
    if (out != expect) {
        fprintf(stderr, "cn_bench: double sum gave %.17g, expected %.17g\n", out, expect);
        return 1;
    }
    return 0;
}

enum { OP_HANDOFF, OP_ALLREDUCE, OP_DSUM, OP_BARRIER, NOPS };
static const char *const op_metric[NOPS] = {"handoff_ns", "allreduce_ns", "dsum_ns", "barrier_ns"};
static const char *const op_what[NOPS] = {
    "one-way cache-line handoff, paired",
    "collective network allreduce (ADD S64, 1 packet)",
    "reproducible double sum (1 double, 2 ALU rounds)",
    "global interrupt barrier",
};

typedef struct cn_ctx {
    torx_pkt_dev_t *dev;
    bench_ref_end_t ref;
    int64_t in[CN_VALUES], out[CN_VALUES], ranksum;
    double din, dexpect;
} cn_ctx_t;

/* n operations back to back. For the handoff, one "operation" is one
 * one-way handoff (half a round trip), the floor of the others. */
static int run_op(cn_ctx_t *c, int op, long n)
{
    int rc = 0;
    if (op == OP_HANDOFF) {
        bench_handoff(&c->ref, n / 2);
        return 0;
    }
    for (long i = 0; i < n && rc == 0; i++) {
        switch (op) {
        case OP_ALLREDUCE:
            rc = allreduce_once(c->dev, c->in, c->out, c->ranksum);
            break;
        case OP_DSUM:
            rc = dsum_once(c->dev, c->din, c->dexpect);
            break;
        default:
            rc = barrier_once(c->dev);
            break;
        }
    }
    return rc;
}

static int cn_task(torx_boot_t *boot, void *arg)
{
    const cn_job_t *job = arg;
    static cn_ctx_t c; /* per process: each task is its own fork */
    c.dev = bench_torx_open_line(boot);
    if (!c.dev)
        return 1;
    c.ref = bench_ref_end(job->ref, boot->rank);
    /* Rank r contributes value (r+1)*(i+1) at index i, so the sums check
     * that every task's whole packet was combined. */
    c.ranksum = (int64_t)boot->size * (boot->size + 1) / 2;
    for (int i = 0; i < CN_VALUES; i++)
        c.in[i] = (int64_t)(boot->rank + 1) * (i + 1);
    c.din = 0.25 * (boot->rank + 1);
    c.dexpect = 0.25 * (double)c.ranksum;

    const long per_block = job->iters / (NBLOCKS * BATCH); /* samples */
    double *ns[NOPS];
    int cnt[NOPS] = {0};
    for (int op = 0; op < NOPS; op++) /* the handoff collects over all operations */
        ns[op] = calloc((size_t)((NOPS - 1) * NBLOCKS * per_block), sizeof(double));
    int rc = 0;
    for (int op = OP_ALLREDUCE; op < NOPS && rc == 0; op++) {
        if (boot->barrier(boot) != TORX_OK) {
            fprintf(stderr, "cn_bench: bootstrap barrier failed: %s\n", torx_last_error());
            rc = 1;
            break;
        }
        const int pair[2] = {OP_HANDOFF, op};
        for (int k = 0; k < 2 && rc == 0; k++) /* warm-up, untimed */
            rc = run_op(&c, pair[k], job->iters / 10);
        for (int b = 0; b < NBLOCKS && rc == 0; b++) {
            for (int k = 0; k < 2 && rc == 0; k++) {
                const int o = pair[(k + b) & 1]; /* alternate which goes first */
                for (long s = 0; s < per_block && rc == 0; s++) {
                    double t0 = bench_torx_now_ns(c.dev);
                    rc = run_op(&c, o, BATCH);
                    ns[o][cnt[o]++] = (bench_torx_now_ns(c.dev) - t0) / BATCH;
                }
            }
        }
        if (rc == 0 && boot->rank == 0)
            bench_report_ns("cn", op_metric[op], op_what[op], bench_stats(ns[op], cnt[op]));
    }
    if (rc == 0 && boot->rank == 0)
        bench_report_ns("cn", op_metric[OP_HANDOFF], op_what[OP_HANDOFF],
                        bench_stats(ns[OP_HANDOFF], cnt[OP_HANDOFF]));
    for (int op = 0; op < NOPS; op++)
        free(ns[op]);
    torx_pkt_close(c.dev);
    fflush(stdout);
    return rc;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    cn_job_t job = {.iters = bench_env_long("CN_ITERS", 100000), .ref = bench_ref_alloc()};
    if (job.iters < NBLOCKS * BATCH)
        job.iters = NBLOCKS * BATCH;
    bench_pin_setup();
    bench_note("cn_bench: 2 tasks pinned to CPU 0 and 1 (torx_boot_fork_run), %ld operations per "
               "figure",
               job.iters);
    bench_kv("cn", "oversubscribed", bench_oversubscribed);
    return bench_torx_job("cn_bench", cn_task, &job, JOB_TIMEOUT_S, 1) ? 1 : 0;
}
