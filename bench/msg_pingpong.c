/* msg_pingpong: 1-byte half round trip through the torx message layer, per
 * protocol (forced), next to the raw packet layer underneath it.
 *
 * Two tasks from torx_boot_fork_run, pinned to CPU 0 and CPU 1, one
 * message-layer context each (heater mode, 2x1x1 torus). Rank 0 sends a
 * 1-byte message with the protocol under test; rank 1's receive completion
 * sends it back with the same protocol; rank 0's receive completion ends
 * the round trip. Both sides spin in torx_advance.
 *
 * Modes (alternating blocks, like pkt_pingpong, so each sees the same vCPU
 * placements):
 *   pkt       raw deterministic packets on the context's device (reference)
 *   onepkt    one-packet protocol
 *   eager     eager protocol (a 1-byte message is one deterministic packet
 *             with the eager framing)
 *   adaptive  adaptive eager (adaptive packet plus the receiver's token)
 *   rzv       rendezvous: scout, bulk get, ack
 *
 * Environment: MSG_PP_ITERS round trips per figure (50000).
 * Output: "msg pingpong_<mode>_1_ns_min=..." and _med (see bench_util.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <torx/msg.h>

#include "bench_util.h"

#define JOB_TIMEOUT_S 300.0
#define NBLOCKS 5
#define HANDLER 1
#define RING 8          /* send objects per task: a rendezvous send stays pending until its ack */
#define RAW_TYPE 0xEEu  /* sw[0] of the raw packets: no message-layer type */

enum { M_PKT, M_ONEPKT, M_EAGER, M_ADAPT, M_RZV, NMODES };
static const char *const mode_name[NMODES] = {"pkt", "onepkt", "eager", "adaptive", "rzv"};
static const torx_protocol_t mode_proto[NMODES] = {TORX_PROTO_AUTO, TORX_PROTO_ONEPKT,
                                                   TORX_PROTO_EAGER, TORX_PROTO_ADAPTIVE,
                                                   TORX_PROTO_RZV};

typedef struct pp {
    torx_ctx_t *ctx;
    int rank;
    torx_protocol_t proto;
    torx_msg_t ring[RING];
    unsigned next_msg;
    uint8_t out, in[64];
    volatile int got; /* rank 0: replies; rank 1: requests answered */
    int bad;
} pp_t;

static pp_t g;

static torx_msg_t *free_msg(void)
{
    for (;;) {
        torx_msg_t *m = &g.ring[g.next_msg++ % RING];
        if (!torx_msg_pending(m))
            return m;
    }
}

static void send_one(void)
{
    const torx_status_t rc = torx_send(g.ctx, free_msg(), 1 - g.rank, HANDLER, NULL, 0, &g.out, 1,
                                       g.proto, NULL, NULL);
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

static void pp_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                       torx_recv_t *recv)
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
    const int target = g.got + (int)n;
    if (g.rank == 1) {
        /* One advance may answer several requests: count to the total. */
        while (g.got < target)
            if (!torx_advance(g.ctx))
                bench_relax();
        return;
    }
    for (long i = 0; i < n; i++) {
        const int want = g.got + 1;
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
    if (mode == M_PKT)
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
    const long iters = *(const long *)arg;
    if (boot->size != 2) {
        fprintf(stderr, "msg_pingpong: needs 2 tasks, got %d\n", boot->size);
        return 1;
    }
    g.rank = boot->rank;
    torx_init_attr_t attr = {.boot = boot, .mode = TORX_MODE_HEATER};
    if (torx_init(&attr, &g.ctx) != TORX_OK) {
        fprintf(stderr, "msg_pingpong: torx_init: %s\n", torx_last_error());
        return 1;
    }
    torx_register(g.ctx, HANDLER, pp_handler, NULL);
    const long per_block = iters / (NBLOCKS * BENCH_BATCH);
    double *ns[NMODES];
    int cnt[NMODES] = {0};
    for (int m = 0; m < NMODES; m++)
        ns[m] = calloc((size_t)(NBLOCKS * per_block), sizeof(double));
    int rc = settle(boot);
    for (int m = 0; m < NMODES && rc == 0; m++) { /* warm-up, untimed */
        run_mode(m, iters / 10);
        rc = settle(boot);
    }
    for (int b = 0; b < NBLOCKS && rc == 0; b++)
        for (int k = 0; k < NMODES && rc == 0; k++) {
            const int m = (k + b) % NMODES;
            for (long s = 0; s < per_block; s++) {
                const double t0 = bench_now_ns();
                run_mode(m, BENCH_BATCH);
                ns[m][cnt[m]++] = (bench_now_ns() - t0) / (2.0 * BENCH_BATCH);
            }
            rc = settle(boot);
        }
    if (g.bad) {
        fprintf(stderr, "msg_pingpong: rank %d: a send failed or a reply was wrong\n", g.rank);
        rc = 1;
    }
    if (rc == 0 && g.rank == 0)
        for (int m = 0; m < NMODES; m++) {
            char metric[64], what[96];
            snprintf(metric, sizeof metric, "pingpong_%s_1_ns", mode_name[m]);
            snprintf(what, sizeof what, "%s half round trip, 1 byte",
                     m == M_PKT ? "raw packet layer" : mode_name[m]);
            bench_report_ns("msg", metric, what, bench_stats(ns[m], cnt[m]));
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
    unsetenv("TORX_CHAOS");
    const int failed = torx_boot_fork_run(2, pp_task, &iters, JOB_TIMEOUT_S, 1);
    if (failed) {
        fprintf(stderr, "msg_pingpong: %d task(s) failed: %s\n", failed, torx_last_error());
        return 1;
    }
    return 0;
}
