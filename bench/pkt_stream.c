/* pkt_stream: one-way packet streaming through the torx packet layer, the
 * bandwidth a protocol built on packets (eager, adaptive eager, FIFO bulk
 * fallback) can hope for.
 *
 * Two tasks from torx_boot_fork_run, pinned to CPU 0 and CPU 1, on a
 * 2x1x1x1 torus. Rank 0 injects deterministic packets of n payload bytes
 * as fast as the FIFO takes them (retrying on TORX_NO_ROOM while rank 1
 * drains), reading the payloads in order from a 4 MiB source buffer. Rank 1
 * peeks each packet, checks its sequence number (deterministic packets must
 * arrive in order), copies the payload into a 4 MiB destination buffer
 * (torx_pkt_read: a real copy out, walked in order and wrapped) and
 * consumes it; after the last one it sends one packet back. Rank 0 times
 * from its first injection to that answer.
 *
 * End to end these are the bytes a 4 MiB memcpy moves, so the run script
 * prints the ratio to memcpy from bench/floors.c. The same traffic through
 * the plain ring of bench_util.h runs between the same two tasks, sample
 * for sample alternating with torx (ring, torx, torx, ring, ...), so the
 * torx/ring ratio compares figures that saw the same vCPU placements.
 *
 * Payload sizes 32, 64, 128 and 240 bytes; each figure is the best and the
 * median of several samples after one untimed warm-up sample of each.
 *
 * Environment: PKT_STREAM_PACKETS packets per sample (262144: 60 MiB of
 * 240-byte payloads, ~15 ms), PKT_STREAM_REPS samples per size (12). Many
 * short samples rather than a few long ones: on a shared VM some samples
 * then run undisturbed, and the best of them is what the machine can do.
 * Output format: see bench_util.h.
 */
/* Before any system header: bench_util.h uses sched_setaffinity. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <torx/packet.h>

#include "bench_util.h"

#define BUF_BYTES (4u << 20)
#define JOB_TIMEOUT_S 300.0
#define MAX_REPS 64

static const uint8_t st_sizes[] = {32, 64, 128, 240};
#define NSIZES (sizeof st_sizes / sizeof st_sizes[0])

typedef struct st_job {
    long packets;
    int reps;
    bench_ref_t *ref; /* plain ring shared with the other task */
} st_job_t;

/* Rank 0: one sample of `packets` torx packets, timed to the answer. */
static int torx_send_sample(torx_pkt_dev_t *dev, uint8_t len, long packets, const uint8_t *src,
                            uint64_t *seq)
{
    const size_t wrap = BUF_BYTES - BUF_BYTES % len;
    torx_pkt_hdr_t hdr;
    torx_pkt_hdr_init(&hdr, (torx_coord_t){1, 0, 0, 0}, 0);
    size_t off = 0;
    for (long i = 0; i < packets; i++) {
        bench_torx_set_seq(&hdr, (*seq)++);
        if (bench_torx_send(dev, &hdr, src + off, len) != TORX_OK)
            return 1;
        off += len;
        if (off == wrap)
            off = 0;
    }
    (void)bench_torx_wait(dev); /* the receiver has copied every payload out */
    torx_pkt_consume(dev);
    return 0;
}

/* Rank 1: receives one sample, then answers. Counts packets out of order
 * or of the wrong length in *bad. */
static int torx_recv_sample(torx_pkt_dev_t *dev, uint8_t len, long packets, uint8_t *dst,
                            uint64_t *seq, long *bad)
{
    const size_t wrap = BUF_BYTES - BUF_BYTES % len;
    torx_pkt_hdr_t ack;
    torx_pkt_hdr_init(&ack, (torx_coord_t){0, 0, 0, 0}, 0);
    size_t off = 0;
    for (long i = 0; i < packets; i++) {
        const torx_pkt_hdr_t *h = bench_torx_wait(dev);
        /* Deterministic packets from one sender arrive in injection order;
         * a gap or a repeat is a packet-layer bug. */
        *bad += bench_torx_seq(h) != (*seq)++ || h->payload_len != len;
        torx_pkt_read(h, dst + off, 0, len);
        torx_pkt_consume(dev);
        off += len;
        if (off == wrap)
            off = 0;
    }
    bench_clobber(dst);
    return bench_torx_send(dev, &ack, NULL, 0) == TORX_OK ? 0 : 1;
}

/* Both ranks: one payload size, ring and torx samples alternating. */
static int stream_size(torx_pkt_dev_t *dev, bench_ref_end_t *ref, int rank, uint8_t len,
                       const st_job_t *job, uint8_t *buf)
{
    double gbs[2][MAX_REPS], mpps[2][MAX_REPS]; /* [0] ring, [1] torx */
    uint64_t seq = 0;
    long bad = 0;
    for (int r = -1; r < job->reps; r++) { /* r == -1: warm-up, untimed */
        for (int k = 0; k < 2; k++) {
            const int torx = (k + (r & 1)) & 1; /* ring first on even samples */
            double t0 = bench_torx_now_ns(dev);
            if (!torx)
                bench_ring_stream(ref, len, job->packets, buf, BUF_BYTES);
            else if ((rank == 0 ? torx_send_sample(dev, len, job->packets, buf, &seq)
                                : torx_recv_sample(dev, len, job->packets, buf, &seq, &bad)))
                return 1;
            double t = bench_torx_now_ns(dev) - t0;
            if (r >= 0) {
                gbs[torx][r] = (double)len * job->packets / t;
                mpps[torx][r] = job->packets / t * 1e3;
            }
        }
    }
    if (bad) {
        fprintf(stderr, "pkt_stream: %u-byte: %ld packets out of order or of the wrong length\n",
                len, bad);
        return 1;
    }
    if (rank != 0)
        return 0;
    char metric[64], what[96];
    for (int torx = 0; torx < 2; torx++) {
        const char *who = torx ? "" : "ring_";
        snprintf(what, sizeof what, "%s streaming, %u-byte payload", torx ? "torx" : "plain ring",
                 len);
        snprintf(metric, sizeof metric, "stream_%s%u_gbs", who, len);
        bench_report_rate("pkt", metric, what, "GB/s", bench_stats(gbs[torx], job->reps));
        snprintf(metric, sizeof metric, "stream_%s%u_mpps", who, len);
        bench_report_rate("pkt", metric, what, "Mpkt/s", bench_stats(mpps[torx], job->reps));
    }
    return 0;
}

static int st_task(torx_boot_t *boot, void *arg)
{
    const st_job_t *job = arg;
    if (boot->size != 2) {
        fprintf(stderr, "pkt_stream: needs 2 tasks, got %d\n", boot->size);
        return 1;
    }
    torx_pkt_dev_t *dev = bench_torx_open_line(boot);
    if (!dev)
        return 1;
    bench_ref_end_t ref = bench_ref_end(job->ref, boot->rank);
    uint8_t *buf = bench_alloc(BUF_BYTES); /* source on rank 0, destination on rank 1 */
    if (boot->rank == 0) {
        const char *fp = getenv("TORX_FIFO_PACKETS");
        bench_note("torx device %s, TORX_FIFO_PACKETS=%s", torx_pkt_device_name(dev),
                   fp && *fp ? fp : "(default)");
    }
    int rc = 0;
    for (size_t i = 0; i < NSIZES && rc == 0; i++) {
        if (boot->barrier(boot) != TORX_OK) {
            fprintf(stderr, "pkt_stream: bootstrap barrier failed: %s\n", torx_last_error());
            rc = 1;
            break;
        }
        rc = stream_size(dev, &ref, boot->rank, st_sizes[i], job, buf);
    }
    free(buf);
    torx_pkt_close(dev);
    fflush(stdout);
    return rc;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    st_job_t job = {
        .packets = bench_env_long("PKT_STREAM_PACKETS", 262144),
        .reps = (int)bench_env_long("PKT_STREAM_REPS", 12),
        .ref = bench_ref_alloc(),
    };
    if (job.reps > MAX_REPS)
        job.reps = MAX_REPS;
    bench_pin_setup();
    bench_note("pkt_stream: 2 tasks pinned to CPU 0 and 1 (torx_boot_fork_run), %ld packets x %d "
               "samples per payload size, 4 MiB source and destination",
               job.packets, job.reps);
    bench_kv("pkt", "oversubscribed", bench_oversubscribed);
    return bench_torx_job("pkt_stream", st_task, &job, JOB_TIMEOUT_S, 1) ? 1 : 0;
}
