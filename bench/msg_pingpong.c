/* msg_pingpong: 1-byte half round trip through the torx message layer, per
 * protocol (forced), next to the raw packet layer underneath it and the
 * one-way cache-line handoff between the same two tasks: the message-layer
 * form of the original's Table 1.
 *
 * Two tasks from torx_boot_fork_run, pinned to CPU 0 and CPU 1, one
 * message-layer context each. Rank 0 sends a 1-byte message with the
 * protocol under test; rank 1's receive completion sends it back with the
 * same protocol; rank 0's receive completion ends the round trip. Both sides
 * spin in torx_advance.
 *
 * Two jobs, one after the other:
 *   heater  TORX_MODE=heater, 2x1x1 torus (nearest neighbours), modes
 *             handoff   one-way cache-line handoff (the floor; bench_util.h)
 *             pkt       raw deterministic packets on the context's device
 *             onepkt    one-packet protocol
 *             eager     eager protocol (one deterministic packet, eager framing)
 *             adaptive  adaptive eager (adaptive packet plus the receiver's token)
 *             rzv       rendezvous: scout, bulk get, ack
 *   vn      TORX_MODE=vn, the two tasks are t=0 and t=1 of one node, modes
 *             handoff, pkt, onepkt, and
 *             vn        virtual node protocol (scout with the buffer address,
 *                       the receiver copies, ack)
 * Within a job the modes run in alternating blocks (rotated per block), so
 * every figure sees the same vCPU placements.
 *
 * Cycles: the original reports cycles. The figures are converted with the
 * TSC rate, calibrated here against CLOCK_MONOTONIC (rdtsc over 3 x 20 ms,
 * median) and printed next to /proc/cpuinfo's "cpu MHz". On this KVM guest
 * (constant_tsc, tsc_known_freq) the TSC ticks at the host's nominal clock,
 * which is not necessarily the clock the core really ran at.
 *
 * Environment: MSG_PP_ITERS round trips per figure (50000).
 * Output: "msg pingpong_<mode>_1_ns_min=..." and _med for the heater job,
 * "msgvn ..." for the vn job, "<group> handoff_ns_*" for the paired floor,
 * "msg tsc_mhz=..." (see bench_util.h for the format).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <torx/msg.h>

#include "bench_util.h"

#include <x86intrin.h>

#define JOB_TIMEOUT_S 300.0
#define NBLOCKS 5
#define HANDLER 1
#define RING 8         /* send objects per task: a rendezvous send stays pending until its ack */
#define RAW_TYPE 0xEEu /* sw[0] of the raw packets: no message-layer type */

enum { M_HANDOFF, M_PKT, M_ONEPKT, M_EAGER, M_ADAPT, M_RZV, M_VN, NMODES };
static const char *const mode_name[NMODES] = {"handoff",  "pkt", "onepkt", "eager",
                                              "adaptive", "rzv", "vn"};
static const torx_protocol_t mode_proto[NMODES] = {
    TORX_PROTO_AUTO,     TORX_PROTO_AUTO, TORX_PROTO_ONEPKT, TORX_PROTO_EAGER,
    TORX_PROTO_ADAPTIVE, TORX_PROTO_RZV,  TORX_PROTO_VN};

typedef struct job {
    long iters;
    int vn;           /* 0: heater job, 1: vn job */
    bench_ref_t *ref; /* handoff line, shared (mapped before the fork) */
} job_t;

typedef struct pp {
    torx_ctx_t *ctx;
    bench_ref_end_t ref;
    int rank;
    torx_protocol_t proto;
    torx_msg_t ring[RING];
    unsigned next_msg;
    uint8_t out, in[64];
    volatile long got; /* rank 0: replies; rank 1: requests answered */
    long expect;       /* rank 1: requests answered by the end of the current call */
    int bad;
} pp_t;

static pp_t g;

static torx_msg_t *free_msg(void)
{
    for (;;) {
        for (int i = 0; i < RING; i++) {
            torx_msg_t *m = &g.ring[g.next_msg++ % RING];
            if (!torx_msg_pending(m))
                return m;
        }
        /* All busy. Rank 1 sends from a callback, where a nested advance
         * does nothing, but it never gets here: each of its echoes waits
         * only for rank 0's next advance, so at most two are pending. */
        torx_advance(g.ctx);
    }
}

static void send_one(void)
{
    const torx_status_t rc =
        torx_send(g.ctx, free_msg(), 1 - g.rank, HANDLER, NULL, 0, &g.out, 1, g.proto, NULL, NULL);
    g.bad |= rc != TORX_OK;
}

static void pp_done(torx_ctx_t *ctx, void *arg, torx_status_t status, size_t received)
{
    (void)ctx;
    (void)arg;
    g.bad |= status != TORX_OK || received != 1;
    if (g.rank == 1)
        send_one(); /* the echo, from the completion */
    g.got++;
}

static void pp_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info, torx_recv_t *recv)
{
    (void)ctx;
    (void)harg;
    g.bad |= info->protocol != g.proto;
    recv->buf = g.in;
    recv->len = sizeof g.in;
    recv->done = pp_done;
}

/* Raw packets: rank 0 pings, rank 1 echoes. */
static void raw_round_trips(long n)
{
    torx_pkt_dev_t *dev = torx_ctx_device(g.ctx);
    torx_pkt_hdr_t h;
    torx_pkt_hdr_init(&h, torx_map_coord(torx_ctx_map(g.ctx), 1 - g.rank), 0);
    h.sw[0] = RAW_TYPE;
    for (long i = 0; i < n; i++) {
        if (g.rank == 0 && bench_torx_send(dev, &h, &g.out, 1) != TORX_OK)
            g.bad = 1;
        const torx_pkt_hdr_t *p = bench_torx_wait(dev);
        g.bad |= p->sw[0] != RAW_TYPE;
        torx_pkt_read(p, g.in, 0, p->payload_len);
        torx_pkt_consume(dev);
        if (g.rank == 1 && bench_torx_send(dev, &h, &g.out, 1) != TORX_OK)
            g.bad = 1;
    }
}

static void msg_round_trips(long n)
{
    if (g.rank == 1) {
        /* One advance may answer two requests (rank 0's next request can
         * arrive while the advance that answered the last one still polls),
         * so count against the running total, never per call: a per-call
         * target would carry that overshoot into the next call and wait for
         * a request that never comes. */
        g.expect += n;
        while (g.got < g.expect)
            if (!torx_advance(g.ctx))
                bench_relax();
        return;
    }
    const long target = g.got + n;
    for (long i = 0; i < n; i++) {
        const long want = g.got + 1;
        send_one();
        while (g.got < want)
            if (!torx_advance(g.ctx))
                bench_relax();
    }
    g.bad |= g.got != target;
}

static void run_mode(int mode, long n)
{
    g.proto = mode_proto[mode];
    if (mode == M_HANDOFF)
        bench_handoff(&g.ref, n);
    else if (mode == M_PKT)
        raw_round_trips(n);
    else
        msg_round_trips(n);
}

/* Between blocks: every send completed (rendezvous acks in), then a
 * bootstrap barrier, so no message-layer packet meets a raw block. */
static int settle(torx_boot_t *boot)
{
    for (int i = 0; i < RING; i++)
        while (torx_msg_pending(&g.ring[i]))
            if (!torx_advance(g.ctx))
                bench_relax();
    return boot->barrier(boot) == TORX_OK ? 0 : 1;
}

static int pp_task(torx_boot_t *boot, void *arg)
{
    const job_t *job = arg;
    const long iters = job->iters;
    if (boot->size != 2) {
        fprintf(stderr, "msg_pingpong: needs 2 tasks, got %d\n", boot->size);
        return 1;
    }
    g.rank = boot->rank;
    g.ref = bench_ref_end(job->ref, boot->rank);
    torx_init_attr_t attr = {.boot = boot, .mode = job->vn ? TORX_MODE_VN : TORX_MODE_HEATER};
    if (torx_init(&attr, &g.ctx) != TORX_OK) {
        fprintf(stderr, "msg_pingpong: torx_init: %s\n", torx_last_error());
        return 1;
    }
    torx_register(g.ctx, HANDLER, pp_handler, NULL);
    const torx_coord_t me = torx_map_coord(torx_ctx_map(g.ctx), g.rank),
                       peer = torx_map_coord(torx_ctx_map(g.ctx), 1 - g.rank);
    if (g.rank == 0)
        bench_note("%s job: rank 0 at (%u,%u,%u,%u), rank 1 at (%u,%u,%u,%u)",
                   job->vn ? "vn" : "heater", me.x, me.y, me.z, me.t, peer.x, peer.y, peer.z,
                   peer.t);

    int modes[NMODES], nmodes = 0;
    modes[nmodes++] = M_HANDOFF;
    modes[nmodes++] = M_PKT;
    modes[nmodes++] = M_ONEPKT;
    if (job->vn) {
        modes[nmodes++] = M_VN;
    } else {
        modes[nmodes++] = M_EAGER;
        modes[nmodes++] = M_ADAPT;
        modes[nmodes++] = M_RZV;
    }
    const long per_block = iters / (NBLOCKS * BENCH_BATCH);
    double *ns[NMODES];
    int cnt[NMODES] = {0};
    for (int m = 0; m < NMODES; m++)
        ns[m] = calloc((size_t)(NBLOCKS * per_block), sizeof(double));
    int rc = settle(boot);
    for (int k = 0; k < nmodes && rc == 0; k++) { /* warm-up, untimed */
        run_mode(modes[k], iters / 10);
        rc = settle(boot);
    }
    for (int b = 0; b < NBLOCKS && rc == 0; b++)
        for (int k = 0; k < nmodes && rc == 0; k++) {
            const int m = modes[(k + b) % nmodes];
            for (long s = 0; s < per_block; s++) {
                const double t0 = bench_msg_now_ns(g.ctx);
                run_mode(m, BENCH_BATCH);
                ns[m][cnt[m]++] = (bench_msg_now_ns(g.ctx) - t0) / (2.0 * BENCH_BATCH);
            }
            rc = settle(boot);
        }
    if (g.bad) {
        fprintf(stderr, "msg_pingpong: rank %d: a send failed or a reply was wrong\n", g.rank);
        rc = 1;
    }
    const char *group = job->vn ? "msgvn" : "msg";
    if (rc == 0 && g.rank == 0)
        for (int k = 0; k < nmodes; k++) {
            const int m = modes[k];
            char metric[64], what[96];
            if (m == M_HANDOFF) {
                snprintf(metric, sizeof metric, "handoff_ns");
                snprintf(what, sizeof what, "one-way cache-line handoff, paired");
            } else {
                snprintf(metric, sizeof metric, "pingpong_%s_1_ns", mode_name[m]);
                snprintf(what, sizeof what, "%s half round trip, 1 byte",
                         m == M_PKT ? "raw packet layer" : mode_name[m]);
            }
            bench_report_ns(group, metric, what, bench_stats(ns[m], cnt[m]));
        }
    for (int m = 0; m < NMODES; m++)
        free(ns[m]);
    if (torx_finalize(g.ctx) != TORX_OK) {
        fprintf(stderr, "msg_pingpong: torx_finalize: %s\n", torx_last_error());
        rc = 1;
    }
    fflush(stdout);
    return rc;
}

/* ---- TSC rate ------------------------------------------------------------- */

static double tsc_mhz_calibrate(void)
{
    double r[3];
    for (int i = 0; i < 3; i++) {
        const double t0 = bench_now_ns();
        const uint64_t c0 = __rdtsc();
        double t1;
        do
            t1 = bench_now_ns();
        while (t1 - t0 < 20e6);
        const uint64_t c1 = __rdtsc();
        r[i] = (double)(c1 - c0) / (t1 - t0) * 1e3;
    }
    return bench_stats(r, 3).med;
}

static double cpuinfo_mhz(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    double mhz = 0;
    char line[256];
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "cpu MHz : %lf", &mhz) == 1)
            break;
    fclose(f);
    return mhz;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    long iters = bench_env_long("MSG_PP_ITERS", 50000);
    if (iters < NBLOCKS * BENCH_BATCH)
        iters = NBLOCKS * BENCH_BATCH;
    bench_pin_setup();
    bench_note("msg_pingpong: 2 tasks pinned to CPU 0 and 1 (torx_boot_fork_run), %ld round "
               "trips per figure in %d alternating blocks",
               iters, NBLOCKS);
    bench_kv("msg", "oversubscribed", bench_oversubscribed);
    const double tsc = tsc_mhz_calibrate(), cpuinfo = cpuinfo_mhz();
    bench_note("TSC %.1f MHz (calibrated against CLOCK_MONOTONIC); /proc/cpuinfo cpu MHz %.1f", tsc,
               cpuinfo);
    bench_kv("msg", "tsc_mhz", tsc);
    bench_kv("msg", "cpuinfo_mhz", cpuinfo);
    unsetenv("TORX_CHAOS");
    for (int vn = 0; vn <= 1; vn++) {
        job_t job = {.iters = iters, .vn = vn, .ref = bench_ref_alloc()};
        const int failed = bench_torx_job(vn ? "msg_pingpong: vn job" : "msg_pingpong: heater job",
                                          pp_task, &job, JOB_TIMEOUT_S, 1);
        munmap(job.ref, sizeof *job.ref);
        if (failed)
            return 1;
    }
    return 0;
}
