/* msg_bw: message-layer bandwidth against message size, per protocol, one
 * way and both ways, next to references measured in the same run between
 * the same two tasks:
 *   memcpy   a warm memcpy of the same size inside one task (both ways:
 *            both tasks copy at once);
 *   cma      a bare single copy: one process_vm_readv of the whole message
 *            from the peer's buffer into our own (both ways: both tasks
 *            read from each other at once). This is what a zero-copy
 *            rendezvous can reach on the shm device;
 *   cmabusy  the same, one way, with the peer spinning meanwhile (as a torx
 *            sender polls its FIFOs) instead of napping.
 * One way, the references copy on rank 1 (from rank 0's buffer), where
 * torx's receiver copies: the two vCPUs of these VMs are not always equal.
 *
 * Usage: msg_bw CONFIG, one job of two tasks per run:
 *   heater   TORX_MODE=heater, tasks pinned to CPU 0 and 1; protocols
 *            onepkt (sizes up to 240 B), eager, rzv (rendezvous, bulk get)
 *   packets  the same job with TORX_RZV_DATA=packets: rzv moves its data as
 *            adaptive packets after a clear-to-send
 *   co       TORX_MODE=co: rzv (bulk get, done by the communication
 *            threads). After torx_init each task's main thread is pinned
 *            to CPU rank and its communication thread to the other CPU
 *            (MSG_CO_PLACEMENT below). Co mode wants 2 cores per task: on a
 *            2-CPU host this job runs 4 threads on 2 CPUs (oversubscribed),
 *            and waits use torx_wait (which yields and sleeps) instead of
 *            spinning.
 *
 * One way: rank 0 streams M messages of the size to rank 1 with up to
 * WINDOW sends outstanding; rank 1 answers with a one-packet DONE once it
 * has all M; rank 0's time runs from its first send to that DONE. Both
 * ways: rank 0 sends a one-packet GO and starts; rank 1 starts when GO
 * comes; both stream M messages to each other while receiving; rank 0's
 * time ends when it has all of rank 1's messages and rank 1's DONE. Both-
 * way figures are aggregates (2 M size / time). M = MSG_BW_BYTES / size,
 * at least 2, at most MSG_BW_MSGS (memcpy: at most 262144).
 *
 * Every (cell, size) is measured MSG_BW_BLOCKS times in alternating blocks
 * (references and protocols rotated per block, a bootstrap barrier before
 * each sample) after an untimed warm-up; the report has the best and the
 * median. All data land in one receive buffer per task (overwritten by
 * each message); the receiver checks the byte count of every sample.
 *
 * Environment: MSG_BW_MAX (largest size, default 67108864), MSG_BW_BYTES
 * (bytes per sample, default 33554432), MSG_BW_MSGS (most messages per
 * sample, default 4000; co: 1000), MSG_BW_WINDOW (sends outstanding, 16),
 * MSG_BW_BLOCKS (3).
 * Output: "bw <config>_<cell>_<uni|bi>_<size>_gbs_max=..." and _med (see
 * bench_util.h for the format).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <torx/msg.h>

#include "bench_util.h"

#include <sys/uio.h>

#define JOB_TIMEOUT_S 600.0
#define H_DATA 1
#define H_CTRL 2
#define MAX_WINDOW 256
#define REF_MAX_MSGS 262144L
#define MAX_SIZES 40

enum { CFG_HEATER, CFG_PACKETS, CFG_CO };
static const char *const cfg_name[] = {"heater", "packets", "co"};

enum { C_MEMCPY, C_CMA, C_CMABUSY, C_ONEPKT, C_EAGER, C_RZV, NCELLKINDS };
static const char *const cell_name[NCELLKINDS] = {"memcpy", "cma",   "cmabusy",
                                                  "onepkt", "eager", "rzv"};
static const torx_protocol_t cell_proto[NCELLKINDS] = {TORX_PROTO_AUTO,  TORX_PROTO_AUTO,
                                                       TORX_PROTO_AUTO,  TORX_PROTO_ONEPKT,
                                                       TORX_PROTO_EAGER, TORX_PROTO_RZV};

enum { CTRL_GO = 1, CTRL_DONE = 2, CTRL_SYNC = 3 };

/* Shared between the two tasks (mapped before the fork): the references'
 * start gate and the peers' pid and buffer addresses. */
typedef struct shared {
    alignas(BENCH_CACHELINE) uint64_t go;
    alignas(BENCH_CACHELINE) uint64_t done;
    double ref_ns; /* one way: rank 1's copy time, published before done */
    alignas(BENCH_CACHELINE) int32_t pid[2];
    uint64_t src[2];
} shared_t;

typedef struct job {
    int cfg;
    size_t min, max;
    long bytes, max_msgs, window, blocks;
    shared_t *sh;
} job_t;

typedef struct task {
    torx_ctx_t *ctx;
    const job_t *job;
    int rank, use_wait;
    uint8_t *src, *dst;
    size_t cur; /* current message size */
    torx_msg_t win[MAX_WINDOW];
    torx_msg_t ctrl;
    uint8_t ctrl_byte;
    volatile int wake;
    volatile long rx_count, rx_bytes, go_count, done_count, sync_count;
    int bad;
} task_t;

static task_t g;

/* ---- Callbacks -------------------------------------------------------------- */

static void data_done(torx_ctx_t *ctx, void *arg, torx_status_t st, size_t n)
{
    (void)ctx;
    (void)arg;
    if (st != TORX_OK) {
        fprintf(stderr, "msg_bw[%d]: receive failed: %s: %s\n", g.rank, torx_status_str(st),
                torx_last_error());
        g.bad = 1;
    }
    g.rx_count++;
    g.rx_bytes += (long)n;
    g.wake = 1;
}

static void data_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                         torx_recv_t *recv)
{
    (void)ctx;
    (void)harg;
    g.bad |= info->data_len != g.cur;
    recv->buf = g.dst;
    recv->len = g.cur;
    recv->done = data_done;
}

static void ctrl_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                         torx_recv_t *recv)
{
    (void)ctx;
    (void)harg;
    const uint8_t type = info->data && info->data_len == 1 ? *(const uint8_t *)info->data : 0;
    if (type == CTRL_GO)
        g.go_count++;
    else if (type == CTRL_DONE)
        g.done_count++;
    else if (type == CTRL_SYNC)
        g.sync_count++;
    else
        g.bad = 1;
    recv->buf = NULL;
    g.wake = 1;
}

/* ---- Progress ------------------------------------------------------------------ */

/* Advances until cond() holds (bench_msg_wait_for: spinning, or through
 * torx_wait in co mode). Every condition here is made true by a callback,
 * and every callback sets g.wake. */
static void wait_for(int (*cond)(void))
{
    if (bench_msg_wait_for(g.ctx, g.use_wait, &g.wake, cond) != 0)
        g.bad = 1;
}

static long want_rx, want_go, want_done, want_sync;
static int have_rx(void)
{
    return g.rx_count >= want_rx;
}
static int have_sync(void)
{
    return g.sync_count >= want_sync;
}
static int have_go(void)
{
    return g.go_count >= want_go;
}
static int have_done(void)
{
    return g.done_count >= want_done;
}
static int ctrl_free(void)
{
    return !torx_msg_pending(&g.ctrl);
}
static int all_sent(void)
{
    for (long i = 0; i < g.job->window; i++)
        if (torx_msg_pending(&g.win[i]))
            return 0;
    return 1;
}
static long slot_hint;
static int slot_free(void)
{
    for (long i = 0; i < g.job->window; i++) {
        const long k = (slot_hint + i) % g.job->window;
        if (!torx_msg_pending(&g.win[k])) {
            slot_hint = k;
            return 1;
        }
    }
    return 0;
}

static void send_ctrl(uint8_t type)
{
    wait_for(ctrl_free);
    g.ctrl_byte = type;
    g.bad |= torx_send(g.ctx, &g.ctrl, 1 - g.rank, H_CTRL, NULL, 0, &g.ctrl_byte, 1,
                       TORX_PROTO_ONEPKT, bench_msg_sent_wake, (void *)&g.wake) != TORX_OK;
}

/* Streams m messages of g.cur bytes to the peer with the window, receiving
 * meanwhile (the handler takes whatever comes). */
static void stream(torx_protocol_t proto, long m)
{
    for (long i = 0; i < m; i++) {
        wait_for(slot_free);
        torx_msg_t *msg = &g.win[slot_hint];
        slot_hint = (slot_hint + 1) % g.job->window;
        if (torx_send(g.ctx, msg, 1 - g.rank, H_DATA, NULL, 0, g.src, g.cur, proto,
                      bench_msg_sent_wake, (void *)&g.wake) != TORX_OK) {
            fprintf(stderr, "msg_bw[%d]: torx_send of %zu bytes (%s): %s\n", g.rank, g.cur,
                    torx_protocol_name(proto), torx_last_error());
            g.bad = 1;
            return;
        }
    }
}

/* ---- One sample of one cell ----------------------------------------------------- */

static void check_bytes(long rx_before, long m)
{
    if (g.rx_bytes - rx_before != m * (long)g.cur) {
        fprintf(stderr, "msg_bw[%d]: %zu-byte messages: received %ld bytes, expected %ld\n", g.rank,
                g.cur, g.rx_bytes - rx_before, m * (long)g.cur);
        g.bad = 1;
    }
}

/* A torx sample; returns rank 0's seconds (0 on rank 1). The expected
 * counts are running totals set before anything is sent: a control packet
 * of the peer may be handled by any advance, even before the wait for it. */
static double torx_sample(torx_protocol_t proto, int bi, long m)
{
    const long rx_before = g.rx_bytes;
    want_rx = g.rx_count + ((bi || g.rank == 1) ? m : 0);
    want_sync++;
    if (g.rank == 0)
        want_done++;
    else if (bi)
        want_go++;
    double t0 = 0, t = 0;
    if (g.rank == 0) {
        if (bi)
            send_ctrl(CTRL_GO);
        t0 = bench_msg_now_ns(g.ctx);
    } else if (bi) {
        wait_for(have_go);
    }
    if (bi || g.rank == 0)
        stream(proto, m);
    wait_for(have_rx);
    check_bytes(rx_before, (bi || g.rank == 1) ? m : 0);
    if (g.rank == 0) {
        wait_for(have_done);
        t = bench_msg_now_ns(g.ctx) - t0;
    } else {
        send_ctrl(CTRL_DONE);
    }
    /* Outside the time: every send of both tasks complete (rendezvous acks
     * in). A task tells the other once its own sends are; waiting for the
     * other's word keeps this task advancing meanwhile, so control packets
     * it still has queued (acks, clear-to-sends) go out before the barrier. */
    wait_for(all_sent);
    send_ctrl(CTRL_SYNC);
    wait_for(have_sync);
    wait_for(ctrl_free);
    return t * 1e-9;
}

static void ref_copy(int cma, long m, pid_t peer, const uint8_t *peer_src)
{
    if (!cma) {
        for (long i = 0; i < m; i++) {
            memcpy(g.dst, g.src, g.cur);
            bench_clobber(g.dst);
        }
        return;
    }
    struct iovec l = {g.dst, g.cur}, r = {(void *)peer_src, g.cur};
    for (long i = 0; i < m; i++) {
        const ssize_t got = process_vm_readv(peer, &l, 1, &r, 1, 0);
        if (got != (ssize_t)g.cur) {
            fprintf(stderr, "msg_bw[%d]: process_vm_readv of %zu bytes: %s\n", g.rank, g.cur,
                    got < 0 ? strerror(errno) : "short read");
            g.bad = 1;
            return;
        }
    }
}

/* A reference sample; returns rank 0's seconds (0 on rank 1). One way, the
 * copy runs where torx's receiver copies: on rank 1, which reads rank 0's
 * buffer (cma) or copies its own (memcpy), times itself and hands the time
 * over in the shared block. Meanwhile rank 0 naps (polling the flag every
 * 20 us), or (busy) spins on the flag, as a torx sender polls its FIFOs
 * while the receiver copies. */
static double ref_sample(int cma, int busy, int bi, long m, uint64_t seq)
{
    shared_t *sh = g.job->sh;
    const pid_t peer = sh->pid[1 - g.rank];
    const uint8_t *peer_src = (const uint8_t *)(uintptr_t)sh->src[1 - g.rank];
    if (!bi) {
        if (g.rank == 1) {
            const double t0 = bench_msg_now_ns(g.ctx);
            ref_copy(cma, m, peer, peer_src);
            sh->ref_ns = bench_msg_now_ns(g.ctx) - t0;
            __atomic_store_n(&sh->done, seq, __ATOMIC_RELEASE);
            return 0;
        }
        const struct timespec nap = {0, 20000};
        while (__atomic_load_n(&sh->done, __ATOMIC_ACQUIRE) != seq) {
            if (busy)
                bench_relax();
            else
                nanosleep(&nap, NULL);
        }
        return sh->ref_ns * 1e-9;
    }
    if (g.rank == 0) {
        __atomic_store_n(&sh->go, seq, __ATOMIC_RELEASE);
        const double t0 = bench_msg_now_ns(g.ctx);
        ref_copy(cma, m, peer, peer_src);
        while (__atomic_load_n(&sh->done, __ATOMIC_ACQUIRE) != seq)
            bench_relax();
        return (bench_msg_now_ns(g.ctx) - t0) * 1e-9;
    }
    while (__atomic_load_n(&sh->go, __ATOMIC_ACQUIRE) != seq)
        bench_relax();
    ref_copy(cma, m, peer, peer_src);
    __atomic_store_n(&sh->done, seq, __ATOMIC_RELEASE);
    return 0;
}

/* ---- The job ---------------------------------------------------------------------- */

typedef struct cell {
    int kind, bi;
} cell_t;

static long msgs_for(const job_t *job, int kind, size_t size)
{
    /* memcpy is cheap enough for many copies; a process_vm_readv is a
     * system call (about 1 us), so it gets the torx count. */
    const long cap = kind == C_MEMCPY ? REF_MAX_MSGS : job->max_msgs;
    long m = job->bytes / (long)size;
    if (m < 2)
        m = 2;
    return m > cap ? cap : m;
}

/* Placement in co mode: bench_msg_pin_co_threads among the CPUs this task
 * has now (still the launcher's whole mask). */
static int pin_co_threads(int rank)
{
    cpu_set_t all;
    if (sched_getaffinity(0, sizeof all, &all) != 0)
        return errno;
    return bench_msg_pin_co_threads(rank, &all);
}

static int bw_task(torx_boot_t *boot, void *arg)
{
    const job_t *job = arg;
    if (boot->size != 2) {
        fprintf(stderr, "msg_bw: needs 2 tasks, got %d\n", boot->size);
        return 1;
    }
    g.job = job;
    g.rank = boot->rank;
    g.use_wait = job->cfg == CFG_CO;
    const torx_limits_t lim = {.onepkt_limit = TORX_MSG_ONEPKT_MAX,
                               .eager_limit = 4096,
                               .adaptive_limit = 0,
                               .rzv_data = job->cfg == CFG_PACKETS ? TORX_RZV_DATA_PACKETS
                                                                   : TORX_RZV_DATA_BULK};
    torx_init_attr_t attr = {
        .boot = boot, .mode = job->cfg == CFG_CO ? TORX_MODE_CO : TORX_MODE_HEATER, .limits = &lim};
    if (torx_init(&attr, &g.ctx) != TORX_OK) {
        fprintf(stderr, "msg_bw: torx_init: %s\n", torx_last_error());
        return 1;
    }
    if (job->cfg == CFG_CO) {
        /* The communication thread exists now, unbound: place it. */
        const int err = pin_co_threads(g.rank);
        if (err)
            fprintf(stderr, "msg_bw[%d]: pinning the co-mode threads: %s\n", g.rank, strerror(err));
    }
    torx_register(g.ctx, H_DATA, data_handler, NULL);
    torx_register(g.ctx, H_CTRL, ctrl_handler, NULL);
    g.src = bench_alloc(job->max);
    g.dst = bench_alloc(job->max);
    job->sh->pid[g.rank] = (int32_t)getpid();
    job->sh->src[g.rank] = (uint64_t)(uintptr_t)g.src;
    int rc = boot->barrier(boot) == TORX_OK ? 0 : 1;

    size_t sizes[MAX_SIZES];
    int nsizes = 0;
    for (size_t s = job->min; s <= job->max && nsizes < MAX_SIZES - 1; s *= 4) {
        if (s > TORX_MSG_ONEPKT_MAX && nsizes > 0 && sizes[nsizes - 1] < TORX_MSG_ONEPKT_MAX &&
            job->cfg == CFG_HEATER)
            sizes[nsizes++] = TORX_MSG_ONEPKT_MAX; /* the one-packet maximum */
        sizes[nsizes++] = s;
    }

    cell_t cells[2 * NCELLKINDS];
    double *samples[2 * NCELLKINDS];
    for (int i = 0; i < 2 * NCELLKINDS; i++)
        samples[i] = calloc((size_t)job->blocks, sizeof(double));
    uint64_t seq = 0;
    for (int si = 0; si < nsizes && rc == 0; si++) {
        const size_t size = sizes[si];
        g.cur = size;
        int ncells = 0;
        for (int bi = 0; bi <= 1; bi++) {
            cells[ncells++] = (cell_t){C_MEMCPY, bi};
            cells[ncells++] = (cell_t){C_CMA, bi};
            if (!bi)
                cells[ncells++] = (cell_t){C_CMABUSY, bi};
            if (job->cfg == CFG_HEATER) {
                if (size <= TORX_MSG_ONEPKT_MAX)
                    cells[ncells++] = (cell_t){C_ONEPKT, bi};
                cells[ncells++] = (cell_t){C_EAGER, bi};
            }
            cells[ncells++] = (cell_t){C_RZV, bi};
        }
        int cnt[2 * NCELLKINDS] = {0};
        for (int b = -1; b < job->blocks && rc == 0 && !g.bad; b++) { /* b = -1: warm-up */
            for (int k = 0; k < ncells && rc == 0 && !g.bad; k++) {
                const int ci = (k + (b < 0 ? 0 : b)) % ncells;
                const cell_t c = cells[ci];
                long m = msgs_for(job, c.kind, size);
                if (b < 0 && m > 16)
                    m = 16;
                if (boot->barrier(boot) != TORX_OK) {
                    rc = 1;
                    break;
                }
                const double t =
                    c.kind <= C_CMABUSY
                        ? ref_sample(c.kind != C_MEMCPY, c.kind == C_CMABUSY, c.bi, m, ++seq)
                        : torx_sample(cell_proto[c.kind], c.bi, m);
                if (b >= 0 && g.rank == 0)
                    samples[ci][cnt[ci]++] =
                        (c.bi ? 2.0 : 1.0) * (double)m * (double)size / t * 1e-9;
            }
        }
        if (g.bad)
            rc = 1;
        if (rc == 0 && g.rank == 0) {
            for (int ci = 0; ci < ncells; ci++) {
                char metric[96], what[128];
                snprintf(metric, sizeof metric, "%s_%s_%s_%zu_gbs", cfg_name[job->cfg],
                         cell_name[cells[ci].kind], cells[ci].bi ? "bi" : "uni", size);
                snprintf(what, sizeof what, "%s %s, %s, %zu B", cfg_name[job->cfg],
                         cell_name[cells[ci].kind], cells[ci].bi ? "both ways (sum)" : "one way",
                         size);
                bench_report_rate("bw", metric, what, "GB/s", bench_stats(samples[ci], cnt[ci]));
            }
        }
    }
    for (int i = 0; i < 2 * NCELLKINDS; i++)
        free(samples[i]);
    if (torx_finalize(g.ctx) != TORX_OK) {
        fprintf(stderr, "msg_bw: torx_finalize: %s\n", torx_last_error());
        rc = 1;
    }
    free(g.src);
    free(g.dst);
    fflush(stdout);
    return rc;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int cfg = -1;
    for (int i = 0; argc == 2 && i < 3; i++)
        if (strcmp(argv[1], cfg_name[i]) == 0)
            cfg = i;
    if (cfg < 0) {
        fprintf(stderr, "usage: msg_bw heater|packets|co\n");
        return 2;
    }
    job_t job = {.cfg = cfg,
                 .min = (size_t)bench_env_long("MSG_BW_MIN", 1),
                 .max = (size_t)bench_env_long("MSG_BW_MAX", 64L << 20),
                 .bytes = bench_env_long("MSG_BW_BYTES", 32L << 20),
                 .max_msgs = bench_env_long("MSG_BW_MSGS", cfg == CFG_CO ? 1000 : 4000),
                 .window = bench_env_long("MSG_BW_WINDOW", 16),
                 .blocks = bench_env_long("MSG_BW_BLOCKS", 3)};
    if (job.window > MAX_WINDOW)
        job.window = MAX_WINDOW;
    bench_pin_setup();
    bench_note("msg_bw %s: 2 tasks, %s; window %ld, %ld bytes (at most %ld messages) per sample, "
               "%ld blocks; sizes %zu B .. %zu B",
               cfg_name[cfg],
               cfg == CFG_CO ? (bench_msg_co_cross()
                                    ? "main threads pinned to CPU 0 and 1, each "
                                      "communication thread to the other CPU (4 threads: "
                                      "oversubscribed on 2 CPUs)"
                                    : "main threads pinned to CPU 0 and 1, communication "
                                      "threads unbound (4 threads: oversubscribed on 2 CPUs)")
                             : "pinned to CPU 0 and 1",
               job.window, job.bytes, job.max_msgs, job.blocks, job.min, job.max);
    bench_kv("bw", "oversubscribed", bench_oversubscribed);
    unsetenv("TORX_CHAOS");
    job.sh = bench_shared_alloc(sizeof *job.sh);
    char what[64];
    snprintf(what, sizeof what, "msg_bw %s", cfg_name[cfg]);
    return bench_torx_job(what, bw_task, &job, JOB_TIMEOUT_S, cfg == CFG_CO ? 0 : 1) ? 1 : 0;
}
