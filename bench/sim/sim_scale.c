/* sim_scale: a whole job at the machine's scale: start, a global-interrupt
 * barrier, an 8-byte allreduce on the collective network, a
 * nearest-neighbour exchange (a message to each of the 6 torus neighbours
 * and one from each), another barrier, finalize. A message-layer program:
 * under torx-sim it runs at 65,536 nodes (or 131,072 tasks in vn mode); it
 * also runs under mpiexec on shm and ofi.
 *
 *   sim_scale [--bytes N]        (the exchange's message size, default 64)
 *
 * Rank 0 prints the simulated (torx_wtime) time of each phase and, at the
 * end, the process's wall time and peak resident memory:
 *   scale tasks=512 barrier_us=... allreduce_us=... exchange_us=... wall_s=... maxrss_mib=... */
#include <torx/map.h>
#include <torx/msg.h>
#include <torx/packet.h>

#include "sim_round.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define H_NEIGHBOUR 1

typedef struct state {
    volatile int got, sent, ev;
    char in[6][1024];
} state_t;

static void got_done(torx_ctx_t *ctx, void *arg, torx_status_t st, size_t n)
{
    (void)ctx, (void)n;
    state_t *s = arg;
    s->got += st == TORX_OK ? 1 : 1000;
    s->ev = 1;
}

static void on_neighbour(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                         torx_recv_t *recv)
{
    (void)ctx;
    state_t *s = harg;
    const int slot = s->got < 6 ? s->got : 5;
    *recv = (torx_recv_t){.buf = s->in[slot], .len = info->data_len, .done = got_done, .arg = s};
}

static void sent_done(torx_ctx_t *ctx, torx_msg_t *msg, void *arg)
{
    (void)ctx, (void)msg;
    state_t *s = arg;
    s->sent++;
    s->ev = 1;
}

static int die(const char *what)
{
    fprintf(stderr, "sim_scale: %s: %s\n", what, torx_last_error());
    return 1;
}

static torx_status_t barrier(torx_ctx_t *ctx)
{
    torx_pkt_dev_t *dev = torx_ctx_device(ctx);
    torx_status_t rc = torx_gi_arm(dev);
    return rc != TORX_OK ? rc : sim_round_wait(ctx, NULL);
}

static torx_status_t allreduce8(torx_ctx_t *ctx, uint64_t *v)
{
    torx_pkt_dev_t *dev = torx_ctx_device(ctx);
    uint64_t lanes[TORX_CN_PACKET_BYTES / 8] = {*v};
    torx_status_t rc = torx_cn_inject(dev, TORX_CN_ADD, TORX_CN_U64, 0, lanes);
    if (rc == TORX_OK)
        rc = sim_round_wait(ctx, lanes);
    *v = lanes[0];
    return rc;
}

static double wall(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    size_t bytes = 64;
    if (argc == 3 && !strcmp(argv[1], "--bytes"))
        bytes = (size_t)atol(argv[2]);
    if (bytes > 1024 || (argc != 1 && argc != 3)) {
        fprintf(stderr, "usage: sim_scale [--bytes N]   (N <= 1024)\n");
        return 2;
    }
    const double wall0 = wall();
    torx_ctx_t *ctx;
    if (torx_init(NULL, &ctx) != TORX_OK)
        return die("torx_init");
    state_t *s = calloc(1, sizeof *s);
    char *out = calloc(1, bytes + 1);
    if (!s || !out)
        return die("out of memory");
    torx_register(ctx, H_NEIGHBOUR, on_neighbour, s);
    const int rank = torx_rank(ctx), size = torx_size(ctx);

    const double t0 = torx_wtime(ctx);
    if (barrier(ctx) != TORX_OK)
        return die("barrier");
    const double t1 = torx_wtime(ctx);
    uint64_t v = (uint64_t)rank;
    if (allreduce8(ctx, &v) != TORX_OK)
        return die("allreduce");
    if (v != (uint64_t)size * (uint64_t)(size - 1) / 2) {
        fprintf(stderr, "sim_scale: rank %d: allreduce gave %llu\n", rank, (unsigned long long)v);
        return 1;
    }
    const double t2 = torx_wtime(ctx);

    /* a message to each torus neighbour of this task's node */
    const torx_map_t *map = torx_ctx_map(ctx);
    const torx_coord_t me = torx_map_coord(map, rank);
    const torx_shape_t sh = map->shape;
    torx_msg_t msgs[6];
    int nsent = 0, expect = 0;
    for (int d = 0; d < 3; d++) {
        const unsigned ext = d == 0 ? sh.x : d == 1 ? sh.y : sh.z;
        if (ext < 2)
            continue;
        for (int dir = -1; dir <= 1; dir += 2) {
            if (ext == 2 && dir > 0)
                continue; /* both ways are the one neighbour */
            torx_coord_t c = me;
            uint8_t *f = d == 0 ? &c.x : d == 1 ? &c.y : &c.z;
            *f = (uint8_t)((*f + ext + (unsigned)dir) % ext);
            const int peer = torx_map_rank(map, c);
            if (peer < 0 || peer == rank)
                continue;
            if (torx_send(ctx, &msgs[nsent], peer, H_NEIGHBOUR, NULL, 0, out, bytes,
                          TORX_PROTO_AUTO, sent_done, s) != TORX_OK)
                return die("send");
            nsent++;
            expect++;
        }
    }
    while (s->got < expect || s->sent < nsent) {
        s->ev = 0;
        if (torx_wait(ctx, &s->ev) != TORX_OK || s->got >= 1000)
            return die("exchange");
    }
    const double t3 = torx_wtime(ctx);
    if (barrier(ctx) != TORX_OK)
        return die("barrier");
    const double t4 = torx_wtime(ctx);
    if (rank == 0) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        printf("scale tasks=%d barrier_us=%.3f allreduce_us=%.3f exchange_us=%.3f "
               "barrier2_us=%.3f wall_s=%.1f maxrss_mib=%.0f\n",
               size, (t1 - t0) * 1e6, (t2 - t1) * 1e6, (t3 - t2) * 1e6, (t4 - t3) * 1e6,
               wall() - wall0, (double)ru.ru_maxrss / 1024.0);
        fflush(stdout);
    }
    free(out);
    free(s);
    if (torx_finalize(ctx) != TORX_OK)
        return die("torx_finalize");
    return 0;
}
