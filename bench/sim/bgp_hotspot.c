/* bgp_hotspot: the BG/P MPI study's hot-spot test. Rank 0 (the master)
 * answers pings; every other task (a worker) ping-pongs with it at once,
 * N times per message size, and times its own round trips. The master
 * replies in the order the pings complete, so a worker's latency grows
 * with the number of workers queued at the master.
 *
 *   bgp_hotspot [--sizes LIST] [--iters N]      (default 0,1K,16K and 5)
 *
 * Needs 2 tasks at least; at most 16 sizes. Per size every worker runs 2
 * warm-up round trips and N timed ones; rank 0 prints the workers' mean,
 * lowest and highest half round trip
 *   hotspot tasks=2048 workers=2047 bytes=0 avg_us=... min_us=... max_us=...
 * then
 *   hotspot_run wall_s=... maxrss_mib=...
 */
#include "bgp_common.h"

#define H_PING 4

typedef struct master master_t;

typedef struct from {
    master_t *m;
    int src;
} from_t; /* a ping's completion argument */

struct master {
    bgp_t *b;
    int *ring; /* workers whose ping is in, in completion order */
    unsigned head, tail, cap;
    from_t *from; /* by worker */
};

static void ping_in(master_t *m, int src)
{
    m->ring[m->tail++ % m->cap] = src;
    m->b->ev = 1;
}

static void ping_done(torx_ctx_t *ctx, void *arg, torx_status_t st, size_t n)
{
    (void)ctx, (void)n;
    const from_t *f = arg;
    if (st != TORX_OK)
        f->m->b->got += 1L << 40; /* ends the master's wait with an error */
    ping_in(f->m, f->src);
}

static void on_ping(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info, torx_recv_t *recv)
{
    (void)ctx;
    master_t *m = harg;
    if (info->data || info->data_len == 0) { /* all here: nothing to copy */
        *recv = (torx_recv_t){.buf = NULL};
        ping_in(m, info->src);
        return;
    }
    bgp_t *b = m->b;
    const size_t len = info->data_len < b->sink_len ? info->data_len : b->sink_len;
    *recv =
        (torx_recv_t){.buf = b->sink, .len = len, .done = ping_done, .arg = &m->from[info->src]};
}

static int serve(master_t *m, torx_msg_t *reply, size_t len, long total)
{
    bgp_t *b = m->b;
    long served = 0;
    while (served < total) {
        while (m->head != m->tail) {
            const int w = m->ring[m->head++ % m->cap];
            while (torx_msg_pending(&reply[w])) /* its last reply: the worker has it already */
                if (torx_advance(b->ctx) < 0)
                    return bgp_die(b, "reply");
            if (torx_send(b->ctx, &reply[w], w, BGP_H_DATA, NULL, 0, b->sink, len, TORX_PROTO_AUTO,
                          NULL, NULL) != TORX_OK)
                return bgp_die(b, "reply");
            served++;
        }
        if (b->got >= 1L << 40) {
            fprintf(stderr, "%s: a ping failed\n", b->prog);
            return 1;
        }
        b->ev = 0;
        if (served < total && m->head == m->tail && torx_wait(b->ctx, &b->ev) != TORX_OK)
            return bgp_die(b, "serve");
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const char prog[] = "bgp_hotspot";
    long sizes[BGP_MAXLIST] = {0, 1024, 16384}, iters = 5;
    int nsizes = 3;
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc || (strcmp(argv[i], "--sizes") && strcmp(argv[i], "--iters"))) {
            fprintf(stderr, "%s: bad argument '%s'\nusage: %s [--sizes LIST] [--iters N]\n", prog,
                    argv[i], prog);
            return 2;
        }
        if (!strcmp(argv[i], "--sizes") &&
            (nsizes = bgp_parse_sizes(prog, argv[i], argv[i + 1], sizes)) < 0)
            return 2;
        if (!strcmp(argv[i], "--iters") &&
            bgp_parse_long(prog, argv[i], argv[i + 1], 1, 1000000, &iters))
            return 2;
    }
    if (nsizes > BGP_REPORT_MAX) {
        fprintf(stderr, "%s: --sizes: at most %d sizes\n", prog, BGP_REPORT_MAX);
        return 2;
    }
    bgp_t b;
    if (bgp_start(&b, prog, sizes, nsizes))
        return 1;
    if (bgp_needs_tasks(&b, 2))
        return 2;
    master_t m = {.b = &b};
    torx_msg_t *reply = NULL;
    if (b.rank == 0) {
        m.cap = (unsigned)b.size;
        m.ring = malloc(m.cap * sizeof *m.ring);
        reply = calloc((size_t)b.size, sizeof *reply);
        m.from = malloc((size_t)b.size * sizeof *m.from);
        if (!m.ring || !reply || !m.from)
            return bgp_die(&b, "out of memory");
        for (int r = 0; r < b.size; r++)
            m.from[r] = (from_t){&m, r};
        torx_register(b.ctx, H_PING, on_ping, &m);
    }
    double mine[BGP_REPORT_MAX] = {0};
    for (int z = 0; z < nsizes; z++) {
        const size_t len = (size_t)sizes[z];
        const long base = b.got;
        if (bgp_barrier(&b))
            return 1;
        if (b.rank == 0) {
            if (serve(&m, reply, len, (long)(b.size - 1) * (iters + 2)))
                return 1;
            continue;
        }
        double t0 = 0;
        for (long k = 0; k < iters + 2; k++) {
            if (k == 2)
                t0 = torx_wtime(b.ctx);
            if (bgp_send_wait(&b, 0, H_PING, b.sink, len) ||
                bgp_wait_for(&b, &b.got, base + k + 1, "ping-pong"))
                return 1;
        }
        mine[z] = (torx_wtime(b.ctx) - t0) / (2.0 * (double)iters);
    }
    const long rbase = b.reports;
    if (bgp_barrier(&b))
        return 1;
    if (b.rank != 0 && bgp_report(&b, mine, nsizes))
        return 1;
    if (b.rank == 0) {
        if (bgp_wait_for(&b, &b.reports, rbase + b.size - 1, "reports"))
            return 1;
        for (int z = 0; z < nsizes; z++) {
            double sum = 0, lo = 1e30, hi = 0;
            for (int r = 1; r < b.size; r++) {
                const double v = b.report[(size_t)r * BGP_REPORT_MAX + (size_t)z];
                sum += v;
                lo = v < lo ? v : lo;
                hi = v > hi ? v : hi;
            }
            printf("hotspot tasks=%d workers=%d bytes=%ld avg_us=%.3f min_us=%.3f max_us=%.3f\n",
                   b.size, b.size - 1, sizes[z], sum / (b.size - 1) * 1e6, lo * 1e6, hi * 1e6);
        }
        printf("hotspot_run wall_s=%.1f maxrss_mib=%.0f\n", bgp_wall() - b.wall0, bgp_maxrss_mib());
        fflush(stdout);
        free(m.ring);
        free(m.from);
        free(reply);
    }
    return bgp_finish(&b);
}
