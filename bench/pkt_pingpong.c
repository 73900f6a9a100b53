/* pkt_pingpong: one-packet ping-pong between two tasks through the torx
 * packet layer, the latency of the layer everything else is built on.
 *
 * Two tasks from torx_boot_fork_run, pinned to CPU 0 and CPU 1, on a
 * 2x1x1x1 torus. Rank 0 injects a packet of n payload bytes to rank 1;
 * rank 1 peeks it, copies the payload out (torx_pkt_read), consumes it and
 * injects the same bytes back; rank 0 copies the answer out. Half a round
 * trip is the one-way latency of a one-packet message, copy-out included.
 *
 * Modes, for n = 0, 8, 64, 240:
 *   det      deterministic packets;
 *   adapt    adaptive packets, TORX_CHAOS unset (no reordering);
 *   chaos    adaptive packets with TORX_CHAOS=1: the device scatters them
 *            over the reception FIFOs and the receiver scans in random
 *            order. Its own job, since TORX_CHAOS is read when the device
 *            opens; that job runs deterministic packets too (reported as
 *            "cdet"), so chaos has a same-window comparison;
 * and, between the same two tasks, the references of bench_util.h:
 *   handoff  one-way cache-line handoff (the floor);
 *   ring     the plain ring of 256-byte slots, same copies as torx.
 * The modes run in alternating blocks (handoff, ring, det, adapt, handoff,
 * ...), so every figure sees the same vCPU placements; see bench_util.h.
 *
 * Environment: PKT_PP_ITERS round trips per figure (100000).
 * Output format: see bench_util.h.
 */
/* Before any system header: bench_util.h uses sched_setaffinity. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <torx/packet.h>

#include "bench_util.h"

#define JOB_TIMEOUT_S 300.0
#define NBLOCKS 5 /* alternations of the modes per payload size */

static const uint8_t pp_sizes[] = {0, 8, 64, 240};
#define NSIZES (sizeof pp_sizes / sizeof pp_sizes[0])

enum { M_HANDOFF, M_RING, M_DET, M_ADAPT, M_CHAOS, NMODES };
static const char *const mode_name[NMODES] = {"handoff", "ring", "det", "adapt", "chaos"};

typedef struct pp_job {
    long iters;
    int chaos;        /* 1: TORX_CHAOS is set for this job: modes handoff, det, chaos */
    bench_ref_t *ref; /* shared with the other task (mapped before the fork) */
} pp_job_t;

typedef struct pp_ctx {
    torx_pkt_dev_t *dev;
    bench_ref_end_t ref;
    int rank;
    uint64_t seq; /* next torx sequence number (rank 0) */
    int bad;      /* a reply with the wrong sequence number or length */
    uint8_t buf[TORX_PKT_MAX_PAYLOAD];
} pp_ctx_t;

/* Rank 0: n torx round trips. */
static int torx_ping(pp_ctx_t *c, unsigned ctl, uint8_t len, long n)
{
    torx_pkt_hdr_t hdr;
    torx_pkt_hdr_init(&hdr, (torx_coord_t){1, 0, 0, 0}, ctl);
    for (long i = 0; i < n; i++) {
        bench_torx_set_seq(&hdr, c->seq);
        if (bench_torx_send(c->dev, &hdr, c->buf, len) != TORX_OK)
            return 1;
        const torx_pkt_hdr_t *h = bench_torx_wait(c->dev);
        /* The answer carries our sequence number back; anything else means
         * the layer lost, duplicated or misdelivered a packet. */
        c->bad |= bench_torx_seq(h) != c->seq || h->payload_len != len;
        torx_pkt_read(h, c->buf, 0, h->payload_len);
        torx_pkt_consume(c->dev);
        c->seq++;
    }
    return 0;
}

/* Rank 1: echoes n torx packets. */
static int torx_pong(pp_ctx_t *c, unsigned ctl, long n)
{
    torx_pkt_hdr_t hdr;
    torx_pkt_hdr_init(&hdr, (torx_coord_t){0, 0, 0, 0}, ctl);
    for (long i = 0; i < n; i++) {
        const torx_pkt_hdr_t *h = bench_torx_wait(c->dev);
        size_t len = h->payload_len;
        torx_pkt_read(h, c->buf, 0, len);
        memcpy(hdr.sw, h->sw, sizeof hdr.sw);
        torx_pkt_consume(c->dev);
        if (bench_torx_send(c->dev, &hdr, c->buf, len) != TORX_OK)
            return 1;
    }
    return 0;
}

/* n round trips of one mode, either side. */
static int run_mode(pp_ctx_t *c, int mode, uint8_t len, long n)
{
    switch (mode) {
    case M_HANDOFF:
        bench_handoff(&c->ref, n);
        return 0;
    case M_RING:
        bench_ring_pingpong(&c->ref, len, n, c->buf);
        return 0;
    default: {
        unsigned ctl = mode == M_DET ? 0 : TORX_PKT_ADAPTIVE;
        return c->rank == 0 ? torx_ping(c, ctl, len, n) : torx_pong(c, ctl, n);
    }
    }
}

static void report(int mode, uint8_t len, double *ns, int n, int chaos)
{
    char metric[64], what[96];
    if (mode == M_HANDOFF) {
        /* Keyed per job: the chaos job runs later, maybe on other placements. */
        bench_report_ns("pkt", chaos ? "handoff_chaosjob_ns" : "handoff_ns",
                        "one-way cache-line handoff, paired", bench_stats(ns, n));
        return;
    }
    /* Deterministic packets in the chaos job are "cdet": same window as chaos. */
    const char *name = chaos && mode == M_DET ? "cdet" : mode_name[mode];
    snprintf(metric, sizeof metric, "pingpong_%s_%u_ns", name, len);
    if (mode == M_RING)
        snprintf(what, sizeof what, "plain ring half round trip, %u-byte payload", len);
    else
        snprintf(what, sizeof what, "torx half round trip, %s, %u-byte payload", name, len);
    bench_report_ns("pkt", metric, what, bench_stats(ns, n));
}

static int pp_task(torx_boot_t *boot, void *arg)
{
    const pp_job_t *job = arg;
    if (boot->size != 2) {
        fprintf(stderr, "pkt_pingpong: needs 2 tasks, got %d\n", boot->size);
        return 1;
    }
    static pp_ctx_t c; /* per process: each task is its own fork */
    c.dev = bench_torx_open_line(boot);
    if (!c.dev)
        return 1;
    c.rank = boot->rank;
    c.ref = bench_ref_end(job->ref, boot->rank);
    memset(c.buf, 0x11, sizeof c.buf);

    int modes[4], nmodes = 0;
    modes[nmodes++] = M_HANDOFF;
    if (job->chaos) {
        modes[nmodes++] = M_DET;
        modes[nmodes++] = M_CHAOS;
    } else {
        modes[nmodes++] = M_RING;
        modes[nmodes++] = M_DET;
        modes[nmodes++] = M_ADAPT;
    }
    const long per_block = job->iters / (NBLOCKS * BENCH_BATCH); /* samples */
    double *ns[NMODES];
    int cnt[NMODES] = {0};
    for (int m = 0; m < NMODES; m++) /* handoff collects over all sizes */
        ns[m] = calloc((size_t)(NSIZES * NBLOCKS * per_block), sizeof(double));

    if (boot->rank == 0)
        bench_note("torx device %s, %s", torx_pkt_device_name(c.dev),
                   job->chaos ? "TORX_CHAOS=1 (adaptive packets scattered over FIFOs)"
                              : "TORX_CHAOS unset");
    int rc = 0;
    for (size_t i = 0; i < NSIZES && rc == 0; i++) {
        const uint8_t len = pp_sizes[i];
        /* Both sides start each size together: a task still busy with the
         * previous one would be timed as latency. */
        if (boot->barrier(boot) != TORX_OK) {
            fprintf(stderr, "pkt_pingpong: bootstrap barrier failed: %s\n", torx_last_error());
            rc = 1;
            break;
        }
        for (int k = 0; k < nmodes && rc == 0; k++) /* warm-up, untimed */
            rc = run_mode(&c, modes[k], len, job->iters / 10);
        for (int b = 0; b < NBLOCKS && rc == 0; b++) {
            for (int k = 0; k < nmodes && rc == 0; k++) {
                /* Rotating the order per block keeps any drift during a
                 * block from always favouring the same mode. */
                const int m = modes[(k + b) % nmodes];
                for (long s = 0; s < per_block && rc == 0; s++) {
                    double t0 = bench_torx_now_ns(c.dev);
                    rc = run_mode(&c, m, len, BENCH_BATCH);
                    ns[m][cnt[m]++] = (bench_torx_now_ns(c.dev) - t0) / (2.0 * BENCH_BATCH);
                }
            }
        }
        if (rc == 0 && c.bad) {
            fprintf(stderr,
                    "pkt_pingpong: %u-byte: a reply had the wrong sequence number or "
                    "length\n",
                    len);
            rc = 1;
        }
        for (int k = 0; k < nmodes && rc == 0; k++) {
            const int m = modes[k];
            if (m == M_HANDOFF)
                continue;
            if (boot->rank == 0)
                report(m, len, ns[m], cnt[m], job->chaos);
            cnt[m] = 0;
        }
    }
    if (rc == 0 && boot->rank == 0)
        report(M_HANDOFF, 0, ns[M_HANDOFF], cnt[M_HANDOFF], job->chaos);
    for (int m = 0; m < NMODES; m++)
        free(ns[m]);
    torx_pkt_close(c.dev);
    fflush(stdout);
    return rc;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    pp_job_t job = {.iters = bench_env_long("PKT_PP_ITERS", 100000), .chaos = 0};
    if (job.iters < NBLOCKS * BENCH_BATCH)
        job.iters = NBLOCKS * BENCH_BATCH;
    bench_pin_setup();
    bench_note("pkt_pingpong: 2 tasks pinned to CPU 0 and 1 (torx_boot_fork_run), %ld round "
               "trips per figure in %d alternating blocks",
               job.iters, NBLOCKS);
    bench_kv("pkt", "oversubscribed", bench_oversubscribed);

    int failed = 0;
    for (int chaos = 0; chaos <= 1 && !failed; chaos++) {
        if (chaos)
            setenv("TORX_CHAOS", "1", 1);
        else
            unsetenv("TORX_CHAOS");
        job.chaos = chaos;
        job.ref = bench_ref_alloc(); /* fresh: both tasks start at zero */
        failed = bench_torx_job("pkt_pingpong", pp_task, &job, JOB_TIMEOUT_S, 1);
        munmap(job.ref, sizeof *job.ref);
    }
    return failed ? 1 : 0;
}
