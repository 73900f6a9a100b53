/* sim_pingpong: half round trip through the torx message layer between
 * rank 0 and a partner a given number of hops away, per protocol and
 * message size: the original's Table 1 (1 byte, one hop) and Fig 4(a)
 * (latency against Manhattan distance). A message-layer program: it runs
 * under torx-sim (simulated time) and under mpiexec on shm or ofi.
 *
 *   sim_pingpong [--protos LIST] [--sizes LIST] [--hops LIST] [--iters N]
 *
 * LIST is comma-separated: protocols auto, onepkt, eager, adaptive, rzv;
 * sizes in bytes; hops: torus (or mesh) distances from rank 0 (default 1).
 * For each (protocol, size, hops) rank 0 picks the lowest rank that far
 * away (the partner), runs 2 warm-up round trips and N timed ones, and
 * prints
 *   pingpong proto=eager bytes=1 hops=1 partner=1 half_rtt_us=3.3500
 * Ranks other than 0 and the partner wait. Times come from torx_wtime:
 * simulated on sim, the monotonic clock elsewhere. */
#include <torx/map.h>
#include <torx/msg.h>

#include "sim_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define H_PING 1
#define H_CTRL 2
#define MAXLIST 64

typedef struct state {
    torx_ctx_t *ctx;
    char *buf;
    size_t len;
    volatile int got, sent, ctrl, ev; /* ev: set by every receive, for torx_wait */
    int got_at_ctrl; /* got when the last control message came: pings may follow it at once */
    int ctrl_msg[4]; /* partner, proto, size, iters (or -1: done) */
} state_t;

static void got_done(torx_ctx_t *ctx, void *arg, torx_status_t st, size_t n)
{
    (void)ctx, (void)n;
    state_t *s = arg;
    s->got += st == TORX_OK ? 1 : 1000000;
    s->ev = 1;
}

static void on_ping(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info, torx_recv_t *recv)
{
    (void)ctx, (void)info;
    state_t *s = harg;
    *recv = (torx_recv_t){.buf = s->buf, .len = s->len, .done = got_done, .arg = s};
}

static void ctrl_done(torx_ctx_t *ctx, void *arg, torx_status_t st, size_t n)
{
    (void)ctx, (void)st, (void)n;
    state_t *s = arg;
    s->got_at_ctrl = s->got;
    s->ctrl = 1;
}

static void on_ctrl(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info, torx_recv_t *recv)
{
    (void)ctx, (void)info;
    state_t *s = harg;
    *recv =
        (torx_recv_t){.buf = s->ctrl_msg, .len = sizeof s->ctrl_msg, .done = ctrl_done, .arg = s};
}

static void sent_done(torx_ctx_t *ctx, torx_msg_t *msg, void *arg)
{
    (void)ctx, (void)msg;
    ((state_t *)arg)->sent++;
}

static int die(const char *what)
{
    fprintf(stderr, "sim_pingpong: %s: %s\n", what, torx_last_error());
    return 1;
}

static int send_wait(state_t *s, int dest, int handler, const void *data, size_t len,
                     torx_protocol_t proto)
{
    torx_msg_t msg;
    const int before = s->sent;
    if (torx_send(s->ctx, &msg, dest, handler, NULL, 0, data, len, proto, sent_done, s) != TORX_OK)
        return -1;
    while (s->sent == before)
        if (torx_advance(s->ctx) < 0)
            return -1;
    return 0;
}

static int wait_got(state_t *s, int want)
{
    while (s->got < want) {
        s->ev = 0;
        if (torx_wait(s->ctx, &s->ev) != TORX_OK || s->got >= 1000000)
            return -1;
    }
    return 0;
}

static unsigned ring_dist(unsigned a, unsigned b, unsigned n)
{
    const unsigned d = a > b ? a - b : b - a;
    return getenv("TORX_SIM_MESH") && !strcmp(getenv("TORX_SIM_MESH"), "1") ? d
           : d < n - d                                                      ? d
                                                                            : n - d;
}

/* The lowest rank hops away from rank 0 on another node, or -1. */
static int partner_at(const torx_ctx_t *ctx, unsigned hops)
{
    const torx_map_t *map = torx_ctx_map(ctx);
    const torx_coord_t o = torx_map_coord(map, 0);
    const torx_shape_t s = map->shape;
    for (int r = 1; r < torx_size(ctx); r++) {
        const torx_coord_t c = torx_map_coord(map, r);
        const unsigned d =
            ring_dist(o.x, c.x, s.x) + ring_dist(o.y, c.y, s.y) + ring_dist(o.z, c.z, s.z);
        if (d == hops && (hops > 0 || c.t != o.t))
            return r;
    }
    return -1;
}

int main(int argc, char **argv)
{
    long protos[MAXLIST] = {1, 2, 3, 4}, sizes[MAXLIST] = {1}, hops[MAXLIST] = {1};
    int nprotos = 4, nsizes = 1, nhops = 1;
    long iters = 20;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) {
            fprintf(stderr, "usage: sim_pingpong [--protos LIST] [--sizes LIST] [--hops LIST] "
                            "[--iters N]\n");
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(argv[i - 1], "--protos"))
            nprotos = sim_parse_list("sim_pingpong", v, protos, MAXLIST, "protocol", 0, 4);
        else if (!strcmp(argv[i - 1], "--sizes"))
            nsizes = sim_parse_list("sim_pingpong", v, sizes, MAXLIST, "size", 0, 1L << 30);
        else if (!strcmp(argv[i - 1], "--hops"))
            nhops = sim_parse_list("sim_pingpong", v, hops, MAXLIST, "hop count", 0, 1L << 20);
        else if (!strcmp(argv[i - 1], "--iters"))
            iters = atol(v);
        else
            nprotos = -1;
        if (nprotos < 0 || nsizes < 0 || nhops < 0 || iters < 1) {
            fprintf(stderr, "sim_pingpong: bad argument %s %s\n", argv[i - 1], v);
            return 2;
        }
    }
    long maxsize = 1;
    for (int i = 0; i < nsizes; i++)
        if (sizes[i] > maxsize)
            maxsize = sizes[i];

    state_t s = {0};
    if (torx_init(NULL, &s.ctx) != TORX_OK)
        return die("torx_init");
    s.len = (size_t)maxsize;
    s.buf = calloc(1, s.len);
    if (!s.buf)
        return die("out of memory");
    torx_register(s.ctx, H_PING, on_ping, &s);
    torx_register(s.ctx, H_CTRL, on_ctrl, &s);
    const int rank = torx_rank(s.ctx), size = torx_size(s.ctx);
    int rc = 0;

    if (rank == 0) {
        for (int h = 0; h < nhops; h++) {
            const int partner = partner_at(s.ctx, (unsigned)hops[h]);
            if (partner < 0) {
                fprintf(stderr, "sim_pingpong: no rank %ld hops from rank 0\n", hops[h]);
                rc = 1;
                continue;
            }
            for (int p = 0; p < nprotos; p++) {
                for (int z = 0; z < nsizes; z++) {
                    const int ctrl[4] = {partner, (int)protos[p], (int)sizes[z], (int)iters};
                    if (send_wait(&s, partner, H_CTRL, ctrl, sizeof ctrl, TORX_PROTO_AUTO))
                        return die("send");
                    const torx_protocol_t proto = sim_proto_ids[protos[p]];
                    const size_t len = (size_t)sizes[z];
                    double t0 = 0;
                    const int base = s.got;
                    for (long k = 0; k < iters + 2; k++) {
                        if (k == 2)
                            t0 = torx_wtime(s.ctx);
                        if (send_wait(&s, partner, H_PING, s.buf, len, proto) ||
                            wait_got(&s, base + (int)k + 1))
                            return die("ping-pong");
                    }
                    const double us = (torx_wtime(s.ctx) - t0) / (2.0 * (double)iters) * 1e6;
                    printf("pingpong proto=%s bytes=%zu hops=%ld partner=%d half_rtt_us=%.4f\n",
                           sim_proto_names[protos[p]], len, hops[h], partner, us);
                    fflush(stdout);
                }
            }
        }
        const int done[4] = {-1, 0, 0, 0};
        for (int r = 1; r < size; r++)
            if (send_wait(&s, r, H_CTRL, done, sizeof done, TORX_PROTO_AUTO))
                return die("send");
    } else {
        for (;;) {
            s.ctrl = 0;
            if (torx_wait(s.ctx, &s.ctrl) != TORX_OK)
                return die("wait");
            if (s.ctrl_msg[0] < 0)
                break;
            const torx_protocol_t proto = sim_proto_ids[s.ctrl_msg[1]];
            const size_t len = (size_t)s.ctrl_msg[2];
            const long n = s.ctrl_msg[3] + 2;
            const int base = s.got_at_ctrl;
            for (long k = 0; k < n; k++)
                if (wait_got(&s, base + (int)k + 1) || send_wait(&s, 0, H_PING, s.buf, len, proto))
                    return die("ping-pong");
        }
    }
    free(s.buf);
    if (torx_finalize(s.ctx) != TORX_OK)
        return die("torx_finalize");
    return rc;
}
