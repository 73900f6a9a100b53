/* sim_nbcoll: OSU's overlap of torx's nonblocking collectives on the
 * modelled torus, in heater and co mode (docs/collectives.md#nonblocking).
 *
 *   torx-sim --torus 4x4x2 [--mode co] sim_nbcoll [--sizes LIST] [--iters N]
 *
 * Every task runs, on a group of every task with channel 1: ibarrier
 * (global interrupt), then iallreduce (double SUM, on the collective
 * network: the reproducible sum's two passes, the second injected only
 * once the first is read) and ibcast (root 0, collective network) of each
 * size. Each call after the global interrupt, measured as OSU's
 * nonblocking benchmarks do:
 *   pure     start, wait: t_pure, the mean over --iters calls
 *   overlap  start, compute for t_pure (torx_sim_compute: the task's core
 *            busy, no torx call), wait: t_total
 *   overlap = 100 * max(0, 1 - (t_total - t_pure) / t_pure)
 * 0: nothing moved while the task computed; 100: the collective hid
 * behind the computation. Rank 0 prints the slowest task's t_pure and
 * t_total, the mean overlap over tasks, and what the communication thread
 * ran (TORX_STATS' count), as
 *   nbcoll kind=iallreduce bytes=256 mode=co tasks=32 pure_us=... total_us=...
 *          overlap=... by_thread=...
 * Off the sim device torx_sim_compute is refused and the program says so. */
#include "bgp_common.h"

#include <torx/coll.h>
#include <torx/sim.h>

#include "coll/coll_internal.h" /* co_done: what the communication thread ran */

enum { K_IBARRIER, K_IALLREDUCE, K_IBCAST, K_N };
static const char *const kind_names[K_N] = {"ibarrier", "iallreduce", "ibcast"};

typedef struct {
    volatile int done;
    torx_status_t st;
} flag_t;

static void on_done(void *arg, torx_status_t st)
{
    flag_t *f = arg;
    f->st = st;
    f->done = 1;
}

static torx_status_t start(torx_coll_group_t *g, int kind, double *in, double *out, size_t bytes,
                           flag_t *f)
{
    switch (kind) {
    case K_IBARRIER:
        return torx_coll_ibarrier(g, TORX_COLL_ALG_GI, on_done, f);
    case K_IALLREDUCE:
        return torx_coll_iallreduce(g, TORX_COLL_ALG_CN, in, out, bytes / 8, TORX_COLL_DOUBLE,
                                    TORX_COLL_SUM, on_done, f);
    default:
        return torx_coll_ibcast(g, TORX_COLL_ALG_CN, out, bytes, 0, on_done, f);
    }
}

/* One call, after the global interrupt, computing for compute_s between
 * its start and its wait (0: none); its time in seconds, or < 0. */
static double one_call(bgp_t *b, torx_coll_group_t *g, int kind, double *in, double *out,
                       size_t bytes, double compute_s)
{
    flag_t f = {0};
    if (bgp_barrier(b))
        return -1;
    const double t0 = torx_wtime(b->ctx);
    if (start(g, kind, in, out, bytes, &f) != TORX_OK)
        return bgp_die(b, kind_names[kind]), -1;
    if (compute_s > 0 && torx_sim_compute(compute_s) != TORX_OK)
        return bgp_die(b, "torx_sim_compute"), -1;
    if (torx_wait(b->ctx, &f.done) != TORX_OK || f.st != TORX_OK)
        return bgp_die(b, kind_names[kind]), -1;
    return torx_wtime(b->ctx) - t0;
}

int main(int argc, char **argv)
{
    long sizes[BGP_MAXLIST] = {8, 256, 2048};
    int nsizes = 3;
    long iters = 5;
    for (int a = 1; a < argc; a++) {
        const char *v = a + 1 < argc ? argv[a + 1] : NULL;
        if (!strcmp(argv[a], "--sizes") && v) {
            if ((nsizes = bgp_parse_sizes("sim_nbcoll", "--sizes", v, sizes)) < 0)
                return 2;
            a++;
        } else if (!strcmp(argv[a], "--iters") && v) {
            if (bgp_parse_long("sim_nbcoll", "--iters", v, 1, 100000, &iters))
                return 2;
            a++;
        } else {
            fprintf(stderr, "usage: sim_nbcoll [--sizes LIST] [--iters N]\n");
            return 2;
        }
    }
    for (int i = 0; i < nsizes; i++)
        if (sizes[i] < 8 || sizes[i] % 8) {
            fprintf(stderr, "sim_nbcoll: --sizes: %ld is not a positive multiple of 8 (doubles)\n",
                    sizes[i]);
            return 2;
        }
    bgp_t bb, *b = &bb;
    if (bgp_start(b, "sim_nbcoll", sizes, nsizes))
        return 1;
    if (torx_sim_compute(0) != TORX_OK) {
        if (b->rank == 0)
            fprintf(stderr, "sim_nbcoll: %s (run it under torx-sim)\n", torx_last_error());
        bgp_finish(b);
        return 2;
    }
    torx_coll_t *c;
    torx_coll_group_t *g;
    int *tasks = malloc((size_t)b->size * sizeof *tasks);
    if (!tasks)
        return bgp_die(b, "out of memory");
    for (int t = 0; t < b->size; t++)
        tasks[t] = t;
    if (torx_coll_init(b->ctx, NULL, &c) != TORX_OK ||
        torx_coll_group_create(c, 1, b->size, tasks, b->rank, &g) != TORX_OK ||
        torx_coll_group_channel(g, 1) != TORX_OK)
        return bgp_die(b, "torx_coll");
    free(tasks);
    long maxb = 8;
    for (int i = 0; i < nsizes; i++)
        maxb = sizes[i] > maxb ? sizes[i] : maxb;
    double *in = malloc((size_t)maxb), *out = malloc((size_t)maxb);
    if (!in || !out)
        return bgp_die(b, "out of memory");
    for (long i = 0; i < maxb / 8; i++)
        in[i] = (double)(b->rank + 1) * 0.25 * (double)(i % 7 + 1);
    const char *mode = torx_mode(b->ctx) == TORX_MODE_CO ? "co" : "heater";
    int row = 0;
    for (int kind = 0; kind < K_N; kind++)
        for (int z = 0; z < (kind == K_IBARRIER ? 1 : nsizes); z++) {
            const size_t bytes = kind == K_IBARRIER ? 0 : (size_t)sizes[z];
            if (one_call(b, g, kind, in, out, bytes, 0) < 0) /* warm-up */
                return 1;
            double pure = 0, total = 0;
            for (long k = 0; k < iters; k++) {
                const double t = one_call(b, g, kind, in, out, bytes, 0);
                if (t < 0)
                    return 1;
                pure += t;
            }
            pure /= (double)iters;
            const uint64_t thread0 = __atomic_load_n(&c->co_done, __ATOMIC_RELAXED);
            for (long k = 0; k < iters; k++) {
                const double t = one_call(b, g, kind, in, out, bytes, pure);
                if (t < 0)
                    return 1;
                total += t;
            }
            total /= (double)iters;
            const double by_thread =
                (double)(__atomic_load_n(&c->co_done, __ATOMIC_RELAXED) - thread0);
            double ov = 100.0 * (1.0 - (total - pure) / pure);
            ov = ov < 0 ? 0 : ov > 100 ? 100 : ov;
            const double rep[4] = {pure, total, ov, by_thread};
            row++;
            if (bgp_barrier(b) || bgp_report(b, rep, 4) ||
                (b->rank == 0 && bgp_wait_for(b, &b->reports, (long)b->size * row, "reports")))
                return 1;
            if (b->rank != 0)
                continue;
            double wp = 0, wt = 0, mo = 0, th = 0;
            for (int t = 0; t < b->size; t++) {
                const double *v = b->report + (size_t)t * BGP_REPORT_MAX;
                wp = v[0] > wp ? v[0] : wp;
                wt = v[1] > wt ? v[1] : wt;
                mo += v[2] / b->size;
                th += v[3];
            }
            printf("nbcoll kind=%s bytes=%zu mode=%s tasks=%d pure_us=%.3f total_us=%.3f "
                   "overlap=%.1f by_thread=%.0f\n",
                   kind_names[kind], bytes, mode, b->size, wp * 1e6, wt * 1e6, mo, th);
            fflush(stdout);
        }
    free(in);
    free(out);
    torx_coll_group_free(g);
    torx_coll_finalize(c);
    return bgp_finish(b) ? 1 : 0;
}
