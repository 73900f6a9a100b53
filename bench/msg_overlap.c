/* msg_overlap: coprocessor against heater mode, the original's reason for
 * the coprocessor. How much of a rendezvous transfer hides behind the
 * receiving task's computation?
 *
 * Two tasks; rank 0 receives and times, rank 1 sends. For each size, three
 * measurements, interleaved (comm, compute, both, comm, ...), a bootstrap
 * barrier before each:
 *   comm     rank 0 sends a one-packet request; rank 1 answers with a
 *            rendezvous message of the size (bulk get); rank 0 waits until
 *            its receive completed. t_comm.
 *   compute  rank 0 runs a fixed amount of work (a dependent chain of
 *            multiply-adds, WORK iterations) and nothing else. t_compute.
 *   both     as comm, but once the message is matched (its handler has run
 *            in rank 0's advance) rank 0 runs the work without calling
 *            torx_advance, then waits for the receive. t_total.
 * overlap = (t_comm + t_compute - t_total) / t_comm: 0 when nothing moved
 * while rank 0 computed, 1 when the whole transfer hid behind the work.
 *
 * heater: the receive's bulk get runs inside the advance that runs the
 *   handler, so the data are in before the work starts: overlap ~0.
 * co: the handler hands the get to the communication thread, which copies
 *   while the task computes: overlap > 0. (TORX_CO_THREAD=own unless set:
 *   see main.)
 *
 * The work is sized per job and size to take about as long as the transfer
 * alone (WORK = the fastest of 5 warm-up transfers / the work's ns per
 * iteration measured at job start), so a full overlap is possible. Its
 * duration is fixed work, not wall time: a compute phase that loses its CPU
 * to the communication thread gets longer, and that shows in t_total.
 *
 * Placement. heater: the tasks are pinned to CPU 0 and 1. co: each task's
 * main thread is pinned to CPU 0 or 1 after torx_init, the communication
 * threads stay unbound. Co mode wants 2 cores per task; on a 2-CPU host the
 * job has 4 threads for 2 CPUs (oversubscribed): rank 0's communication
 * thread gets its CPU only when rank 1's threads, which wait with
 * torx_wait (yielding, then sleeping), let it. Waits use torx_wait in co
 * mode and spin on torx_advance in heater mode.
 *
 * Jobs alternate heater, co, heater, co (MSG_OV_PAIRS pairs, default 2).
 * Environment: MSG_OV_REPS measurements of each kind per size and job (8),
 * MSG_OV_PAIRS.
 * Output: "ov <mode>_<size>_<tcomm|tcompute|ttotal>_ns_min|_med=...",
 * "ov <mode>_<size>_overlap=..." (from the medians), "ov
 * <mode>_<size>_overlap_min/_max" (over the paired repetitions), "ov
 * <mode>_<size>_bw_gbs_max/_med" (size / t_comm).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <torx/msg.h>

#include "bench_util.h"

#define JOB_TIMEOUT_S 300.0
#define H_DATA 1
#define H_CTRL 2
#define MAX_REPS 64

static const size_t ov_sizes[] = {1u << 20, 4u << 20, 16u << 20};
#define NSIZES (sizeof ov_sizes / sizeof ov_sizes[0])
#define MAX_SIZE (16u << 20)

enum { K_COMM, K_COMPUTE, K_BOTH, NKINDS };

typedef struct job {
    int co;
    long reps;
} job_t;

typedef struct task {
    torx_ctx_t *ctx;
    int rank, use_wait;
    uint8_t *buf;
    size_t cur;
    torx_msg_t data_msg, ctrl_msg;
    uint8_t ctrl_byte;
    volatile int wake;
    volatile long matched, rx_done, reqs;
    long want_matched, want_rx, want_req;
    int bad;
} task_t;

static task_t g;

static void data_done(torx_ctx_t *ctx, void *arg, torx_status_t st, size_t n)
{
    (void)ctx;
    (void)arg;
    if (st != TORX_OK || n != g.cur) {
        fprintf(stderr, "msg_overlap: receive of %zu bytes: %s, %zu bytes: %s\n", g.cur,
                torx_status_str(st), n, torx_last_error());
        g.bad = 1;
    }
    g.rx_done++;
    g.wake = 1;
}

static void data_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                         torx_recv_t *recv)
{
    (void)ctx;
    (void)harg;
    g.bad |= info->data_len != g.cur || info->protocol != TORX_PROTO_RZV;
    recv->buf = g.buf;
    recv->len = g.cur;
    recv->done = data_done;
    g.matched++;
    g.wake = 1;
}

static void ctrl_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                         torx_recv_t *recv)
{
    (void)ctx;
    (void)harg;
    (void)info;
    recv->buf = NULL;
    g.reqs++;
    g.wake = 1;
}

/* Advances until cond() holds (bench_msg_wait_for: spinning, or through
 * torx_wait in co mode). Every condition here is made true by a callback,
 * and every callback sets g.wake. */
static void wait_for(int (*cond)(void))
{
    if (bench_msg_wait_for(g.ctx, g.use_wait, &g.wake, cond) != 0)
        g.bad = 1;
}

static int have_matched(void)
{
    return g.matched >= g.want_matched;
}
static int have_rx(void)
{
    return g.rx_done >= g.want_rx;
}
static int have_req(void)
{
    return g.reqs >= g.want_req;
}
static int data_free(void)
{
    return !torx_msg_pending(&g.data_msg);
}
static int ctrl_free(void)
{
    return !torx_msg_pending(&g.ctrl_msg);
}

/* The work: a dependent chain the compiler cannot shorten. */
static volatile uint64_t work_sink;
static __attribute__((noinline)) void work(long iters)
{
    uint64_t x = (uint64_t)iters | 1;
    for (long i = 0; i < iters; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        __asm__ volatile("" : "+r"(x));
    }
    work_sink = x;
}

static double work_ns_per_iter(void)
{
    double best = 1e9;
    for (int i = 0; i < 5; i++) {
        const long n = 1000000;
        const double t0 = bench_msg_now_ns(g.ctx);
        work(n);
        const double t = (bench_msg_now_ns(g.ctx) - t0) / n;
        if (t < best)
            best = t;
    }
    return best;
}

/* One measurement of kind k. Returns rank 0's ns (0 on rank 1). */
static double measure(int k, long iters)
{
    if (g.rank == 1) { /* the sender: answer a request with the message */
        if (k == K_COMPUTE)
            return 0;
        g.want_req++;
        wait_for(have_req);
        wait_for(data_free);
        g.bad |= torx_send(g.ctx, &g.data_msg, 0, H_DATA, NULL, 0, g.buf, g.cur, TORX_PROTO_RZV,
                           bench_msg_sent_wake, (void *)&g.wake) != TORX_OK;
        wait_for(data_free); /* rank 0 took it (the ack is in) */
        return 0;
    }
    if (k == K_COMPUTE) {
        const double t0 = bench_msg_now_ns(g.ctx);
        work(iters);
        return bench_msg_now_ns(g.ctx) - t0;
    }
    g.want_matched++;
    g.want_rx++;
    const double t0 = bench_msg_now_ns(g.ctx);
    wait_for(ctrl_free);
    g.ctrl_byte = 1;
    g.bad |= torx_send(g.ctx, &g.ctrl_msg, 1, H_CTRL, NULL, 0, &g.ctrl_byte, 1, TORX_PROTO_ONEPKT,
                       bench_msg_sent_wake, (void *)&g.wake) != TORX_OK;
    if (k == K_BOTH) {
        wait_for(have_matched);
        work(iters); /* no torx call meanwhile */
    }
    wait_for(have_rx);
    return bench_msg_now_ns(g.ctx) - t0;
}

static int ov_task(torx_boot_t *boot, void *arg)
{
    const job_t *job = arg;
    if (boot->size != 2) {
        fprintf(stderr, "msg_overlap: needs 2 tasks, got %d\n", boot->size);
        return 1;
    }
    g.rank = boot->rank;
    g.use_wait = job->co;
    torx_init_attr_t attr = {.boot = boot, .mode = job->co ? TORX_MODE_CO : TORX_MODE_HEATER};
    cpu_set_t launch;
    if (sched_getaffinity(0, sizeof launch, &launch) != 0) {
        fprintf(stderr, "msg_overlap: sched_getaffinity: %s\n", strerror(errno));
        return 1;
    }
    if (torx_init(&attr, &g.ctx) != TORX_OK) {
        fprintf(stderr, "msg_overlap: torx_init: %s\n", torx_last_error());
        return 1;
    }
    if (job->co) {
        const int err = bench_msg_pin_co_threads(g.rank, &launch);
        if (err)
            fprintf(stderr, "msg_overlap[%d]: pinning the co-mode threads: %s\n", g.rank,
                    strerror(err));
    }
    torx_register(g.ctx, H_DATA, data_handler, NULL);
    torx_register(g.ctx, H_CTRL, ctrl_handler, NULL);
    g.buf = bench_alloc(MAX_SIZE);
    const char *mode = job->co ? "co" : "heater";
    const double ns_iter = g.rank == 0 ? work_ns_per_iter() : 0;
    int rc = boot->barrier(boot) == TORX_OK ? 0 : 1;
    for (size_t si = 0; si < NSIZES && rc == 0; si++) {
        g.cur = ov_sizes[si];
        /* Warm-up transfers; the fastest sizes the work (a slow one was
         * preempted). Rank 1 learns nothing of it: it only answers. */
        double warm[5];
        for (int i = 0; i < 5 && rc == 0; i++) {
            rc = boot->barrier(boot) == TORX_OK ? 0 : 1;
            warm[i] = measure(K_COMM, 0);
        }
        const long iters = g.rank == 0 ? (long)(bench_stats(warm, 5).min / ns_iter) : 0;
        double t[NKINDS][MAX_REPS], ov[MAX_REPS];
        for (long r = 0; r < job->reps && rc == 0 && !g.bad; r++) {
            for (int k = 0; k < NKINDS && rc == 0; k++) {
                const int kind = (int)((k + r) % NKINDS);
                rc = boot->barrier(boot) == TORX_OK ? 0 : 1;
                t[kind][r] = measure(kind, iters);
            }
            ov[r] = (t[K_COMM][r] + t[K_COMPUTE][r] - t[K_BOTH][r]) / t[K_COMM][r];
        }
        if (g.bad)
            rc = 1;
        if (rc == 0 && g.rank == 0) {
            static const char *const kname[NKINDS] = {"tcomm", "tcompute", "ttotal"};
            static const char *const kwhat[NKINDS] = {"transfer alone", "work alone",
                                                      "transfer + work"};
            bench_stats_t st[NKINDS];
            double bw[MAX_REPS];
            for (long r = 0; r < job->reps; r++)
                bw[r] = (double)g.cur / t[K_COMM][r];
            for (int k = 0; k < NKINDS; k++) {
                char metric[96], what[128];
                snprintf(metric, sizeof metric, "%s_%zu_%s_ns", mode, g.cur, kname[k]);
                snprintf(what, sizeof what, "%s %zu B: %s", mode, g.cur, kwhat[k]);
                st[k] = bench_stats(t[k], (int)job->reps);
                bench_report_ns("ov", metric, what, st[k]);
            }
            char metric[96], what[128];
            snprintf(metric, sizeof metric, "%s_%zu_bw_gbs", mode, g.cur);
            snprintf(what, sizeof what, "%s %zu B: rendezvous alone", mode, g.cur);
            bench_report_rate("ov", metric, what, "GB/s", bench_stats(bw, (int)job->reps));
            const double frac =
                (st[K_COMM].med + st[K_COMPUTE].med - st[K_BOTH].med) / st[K_COMM].med;
            const bench_stats_t os = bench_stats(ov, (int)job->reps);
            bench_note("%s %zu B: overlap (from medians) %.3f; per repetition min %.3f median %.3f "
                       "max %.3f; work %ld iterations (%.2f ns each)",
                       mode, g.cur, frac, os.min, os.med, os.max, iters, ns_iter);
            snprintf(metric, sizeof metric, "%s_%zu_overlap", mode, g.cur);
            bench_kv("ov", metric, frac);
            snprintf(metric, sizeof metric, "%s_%zu_overlap_rep_min", mode, g.cur);
            bench_kv("ov", metric, os.min);
            snprintf(metric, sizeof metric, "%s_%zu_overlap_rep_med", mode, g.cur);
            bench_kv("ov", metric, os.med);
            snprintf(metric, sizeof metric, "%s_%zu_overlap_rep_max", mode, g.cur);
            bench_kv("ov", metric, os.max);
        }
    }
    if (torx_finalize(g.ctx) != TORX_OK) {
        fprintf(stderr, "msg_overlap: torx_finalize: %s\n", torx_last_error());
        rc = 1;
    }
    free(g.buf);
    fflush(stdout);
    return rc;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    job_t job = {.reps = bench_env_long("MSG_OV_REPS", 8)};
    if (job.reps > MAX_REPS)
        job.reps = MAX_REPS;
    const long pairs = bench_env_long("MSG_OV_PAIRS", 2);
    bench_pin_setup();
    bench_note("msg_overlap: rank 0 receives rendezvous messages of 1, 4, 16 MiB and computes; "
               "%ld repetitions per size and job; %ld pairs of jobs (heater, co)",
               job.reps, pairs);
    bench_kv("ov", "oversubscribed", bench_oversubscribed);
    unsetenv("TORX_CHAOS");
    /* Two tasks with a thread each on a 2-CPU host: torx would judge the
     * cores short and keep the thread off the network (msg_co.c). Here rank
     * 1 only answers and sleeps, so rank 0's thread does have a CPU: ask for
     * the thread to own the network, which is what this measures. An
     * explicit TORX_CO_THREAD wins. */
    setenv("TORX_CO_THREAD", "own", 0);
    for (long p = 0; p < 2 * pairs; p++) {
        job.co = (int)(p % 2);
        if (bench_torx_job(job.co ? "msg_overlap: co job" : "msg_overlap: heater job", ov_task,
                           &job, JOB_TIMEOUT_S, job.co ? 0 : 1))
            return 1;
    }
    return 0;
}
