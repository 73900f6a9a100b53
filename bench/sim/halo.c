/* halo: the BG/P MPI study's HALO benchmark, the 2-D halo exchange kernel
 * of the NRL Layered Ocean Model (NLOM), as a message-layer program. The
 * tasks form a Px x Py process grid, rank r at column r % Px and row
 * r / Px; every exchange, each task sends one message to each of its four
 * grid neighbours (west, east, south, north) and receives one from each.
 * The grid is periodic in both directions unless --open is given (then
 * the tasks on an edge have fewer neighbours). A message of B bytes is the
 * halo of an N x N sub-domain with N = B / 8 (one row of doubles).
 *
 *   halo [--sizes LIST] [--iters N] [--warmup N] [--grid PxQ] [--open]
 *        (defaults 8,64,512,4K,32K; 10; 2; near-square from the job size)
 *
 * Per size: a barrier on the global interrupt, --warmup exchanges, another
 * barrier, then --iters exchanges back to back (no barrier between them,
 * as an application's time steps). A task's time per exchange is its own
 * elapsed torx_wtime over the iterations; rank 0 prints the maximum and
 * the mean over the tasks (collective-network rounds, so the timing adds
 * no message-layer traffic to a TORX_STATS_FILE matrix), and the hops the
 * grid's messages travel under the job's mapping:
 *   halo tasks=16384 grid=128x128 periodic=1 torus=16x16x16 tpn=4 map=XYZT
 *        bytes=8 iters=10 max_us=... mean_us=... hops_per_msg=... max_hops=...
 *        hop_bytes_per_exchange=...
 * Every message carries its direction and exchange number in its header;
 * a task stops the job if one arrives from a rank that is not its
 * neighbour that way, out of order, or of the wrong length.
 *
 * Runs under torx-sim (--mode vn for the study's 4 tasks per node) and
 * under mpiexec on shm and ofi (there TORX_TORUS and TORX_MAPPING give the
 * hops, which the crossbar does not pay). */
#include "bgp_common.h"

#define H_HALO 4 /* bgp_common.h takes 1..3 */
#define PS_PER_S 1e12

enum { WEST, EAST, SOUTH, NORTH, NDIR };

typedef struct halo_hdr {
    uint32_t dir;  /* the receiver's side the message fills */
    uint32_t iter; /* exchange number, from 0 for each size */
} halo_hdr_t;

typedef struct halo {
    bgp_t b;
    int nbr[NDIR];           /* neighbour rank on each side, -1 none */
    int nexpect;             /* messages per exchange in, and out */
    char *out;               /* the send buffer (all four sides) */
    size_t len;              /* this size's message length */
    volatile long got[NDIR]; /* messages completed per side, this size */
    volatile long done;      /* all sides, this size */
    long seen[NDIR];         /* handler calls per side, for the order check */
    int bad;                 /* a message broke the pattern: stop */
} halo_t;

/* One completion per side: the receive's arg is the halo, the side is
 * the function's. */
#define HALO_DONE(D)                                                                               \
    static void halo_done_##D(torx_ctx_t *ctx, void *arg, torx_status_t st, size_t n)              \
    {                                                                                              \
        (void)ctx;                                                                                 \
        halo_t *h = arg;                                                                           \
        if (st != TORX_OK || n != h->len)                                                          \
            h->bad = 1;                                                                            \
        h->got[D]++;                                                                               \
        h->done++;                                                                                 \
        h->b.ev = 1;                                                                               \
    }
HALO_DONE(WEST)
HALO_DONE(EAST)
HALO_DONE(SOUTH)
HALO_DONE(NORTH)
static const torx_recv_done_fn halo_done[NDIR] = {halo_done_WEST, halo_done_EAST, halo_done_SOUTH,
                                                  halo_done_NORTH};

static void on_halo(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info, torx_recv_t *recv)
{
    (void)ctx;
    halo_t *h = harg;
    halo_hdr_t hd = {NDIR, 0};
    if (info->hdr_len == sizeof hd)
        memcpy(&hd, info->hdr, sizeof hd);
    if (hd.dir >= NDIR || info->src != h->nbr[hd.dir] || hd.iter != (uint32_t)h->seen[hd.dir] ||
        info->data_len != h->len) {
        fprintf(stderr,
                "halo: rank %d: unexpected message from rank %d (side %u, exchange %u, %zu "
                "bytes; expected exchange %ld of %zu bytes from rank %d, the neighbour on that "
                "side)\n",
                h->b.rank, info->src, hd.dir, hd.iter, info->data_len,
                hd.dir < NDIR ? h->seen[hd.dir] : -1L, h->len, hd.dir < NDIR ? h->nbr[hd.dir] : -1);
        h->bad = 1;
        *recv = (torx_recv_t){.buf = NULL, .done = NULL, .arg = NULL};
        h->b.ev = 1;
        return;
    }
    h->seen[hd.dir]++;
    /* every side lands in the sink: the contents are not used, and four
     * buffers a task would cost 4 x the size per task in one process */
    *recv = (torx_recv_t){.buf = h->b.sink, .len = h->len, .done = halo_done[hd.dir], .arg = h};
}

/* Px x Py = n with Px >= Py and Py the largest divisor of n up to sqrt(n). */
static void near_square(int n, int *px, int *py)
{
    int q = 1;
    for (int d = 1; (long)d * d <= n; d++)
        if (n % d == 0)
            q = d;
    *py = q;
    *px = n / q;
}

/* "PxQ" with P, Q >= 1; 0, or -1 after a message. */
static int parse_grid(const char *prog, const char *s, int *px, int *py)
{
    char *x = strchr(s, 'x');
    long p, q;
    if (!x || x == s || !x[1]) {
        fprintf(stderr, "%s: --grid: '%s' is not PxQ (e.g. 128x128)\n", prog, s);
        return -1;
    }
    char buf[32];
    const size_t lp = (size_t)(x - s);
    if (lp >= sizeof buf) {
        fprintf(stderr, "%s: --grid: '%s' is not PxQ (e.g. 128x128)\n", prog, s);
        return -1;
    }
    memcpy(buf, s, lp);
    buf[lp] = 0;
    if (bgp_parse_long(prog, "--grid (P)", buf, 1, 1 << 24, &p) ||
        bgp_parse_long(prog, "--grid (Q)", x + 1, 1, 1 << 24, &q))
        return -1;
    *px = (int)p;
    *py = (int)q;
    return 0;
}

/* One collective-network round of op over two u64 lanes. */
static int cn2(halo_t *h, torx_cn_op_t op, uint64_t *a, uint64_t *c)
{
    torx_pkt_dev_t *dev = torx_ctx_device(h->b.ctx);
    uint64_t lanes[TORX_CN_PACKET_BYTES / 8] = {*a, *c};
    torx_status_t rc = torx_cn_inject(dev, op, TORX_CN_U64, 0, lanes);
    if (rc != TORX_OK || sim_round_wait(h->b.ctx, lanes) != TORX_OK)
        return bgp_die(&h->b, "collective network");
    *a = lanes[0];
    *c = lanes[1];
    return 0;
}

/* One exchange: a message to each neighbour, then until every side of
 * exchange it has arrived and every send is done. */
static int exchange(halo_t *h, uint32_t it, torx_msg_t *msg)
{
    static const int opposite[NDIR] = {EAST, WEST, NORTH, SOUTH};
    const long sent0 = h->b.sent;
    int nsent = 0;
    for (int d = 0; d < NDIR; d++) {
        if (h->nbr[d] < 0)
            continue;
        /* what goes to my west neighbour fills its east side */
        const halo_hdr_t hd = {(uint32_t)opposite[d], it};
        if (torx_send(h->b.ctx, &msg[d], h->nbr[d], H_HALO, &hd, sizeof hd, h->out, h->len,
                      TORX_PROTO_AUTO, bgp_sent_done, &h->b) != TORX_OK)
            return bgp_die(&h->b, "send");
        nsent++;
    }
    for (;;) {
        int ready = h->b.sent >= sent0 + nsent;
        for (int d = 0; d < NDIR && ready; d++)
            ready = h->nbr[d] < 0 || h->got[d] > (long)it;
        if (h->bad) {
            fprintf(stderr, "halo: rank %d: a halo message failed or broke the pattern\n",
                    h->b.rank);
            return 1;
        }
        if (ready)
            return 0;
        h->b.ev = 0;
        if (torx_wait(h->b.ctx, &h->b.ev) != TORX_OK)
            return bgp_die(&h->b, "exchange");
    }
}

int main(int argc, char **argv)
{
    static const char prog[] = "halo";
    long sizes[BGP_MAXLIST] = {8, 64, 512, 4096, 32768};
    int nsizes = 5, px = 0, py = 0, periodic = 1;
    long iters = 10, warmup = 2;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--open")) {
            periodic = 0;
            continue;
        }
        if (i + 1 >= argc || (strcmp(o, "--sizes") && strcmp(o, "--iters") &&
                              strcmp(o, "--warmup") && strcmp(o, "--grid"))) {
            fprintf(stderr,
                    "%s: bad argument '%s'\nusage: %s [--sizes LIST] [--iters N] [--warmup N] "
                    "[--grid PxQ] [--open]\n",
                    prog, o, prog);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(o, "--sizes") && (nsizes = bgp_parse_sizes(prog, o, v, sizes)) < 0)
            return 2;
        if (!strcmp(o, "--iters") && bgp_parse_long(prog, o, v, 1, 1 << 20, &iters))
            return 2;
        if (!strcmp(o, "--warmup") && bgp_parse_long(prog, o, v, 0, 1 << 20, &warmup))
            return 2;
        if (!strcmp(o, "--grid") && parse_grid(prog, v, &px, &py))
            return 2;
    }
    for (int z = 0; z < nsizes; z++)
        if (sizes[z] > (1L << 30)) {
            fprintf(stderr, "%s: --sizes: %ld bytes is more than 1 GiB\n", prog, sizes[z]);
            return 2;
        }

    static halo_t h; /* a global: under torx-sim each task has its own */
    if (bgp_start(&h.b, prog, sizes, nsizes))
        return 1;
    bgp_t *b = &h.b;
    if (px == 0)
        near_square(b->size, &px, &py);
    if ((long)px * py != b->size) {
        if (b->rank == 0)
            fprintf(stderr, "%s: --grid %dx%d has %ld tasks, the job has %d\n", prog, px, py,
                    (long)px * py, b->size);
        bgp_finish(b);
        return 2;
    }
    if (!(h.out = malloc(b->sink_len)))
        return bgp_die(b, "out of memory");
    memset(h.out, b->rank & 0xff, b->sink_len);
    torx_register(b->ctx, H_HALO, on_halo, &h);

    /* neighbours: a grid line of 2 has the same rank on both sides, a line
     * of 1 none (a task is not its own neighbour) */
    const int col = b->rank % px, row = b->rank / px;
    const int dc[NDIR] = {-1, 1, 0, 0}, dr[NDIR] = {0, 0, -1, 1};
    long hops_sum = 0, hops_max = 0;
    for (int d = 0; d < NDIR; d++) {
        int c = col + dc[d], r = row + dr[d];
        if (periodic) {
            c = (c + px) % px;
            r = (r + py) % py;
        }
        h.nbr[d] = c < 0 || c >= px || r < 0 || r >= py ? -1 : r * px + c;
        if (h.nbr[d] == b->rank)
            h.nbr[d] = -1;
        if (h.nbr[d] >= 0) {
            const long hops = bgp_hops(b, b->rank, h.nbr[d]);
            hops_sum += hops;
            hops_max = hops > hops_max ? hops : hops_max;
            h.nexpect++;
        }
    }
    /* the mapping's hops, summed and at most, over every message */
    uint64_t job_hops = (uint64_t)hops_sum, job_msgs = (uint64_t)h.nexpect;
    if (cn2(&h, TORX_CN_ADD, &job_hops, &job_msgs))
        return 1;
    uint64_t job_hops_max = (uint64_t)hops_max, unused = 0;
    if (cn2(&h, TORX_CN_MAX, &job_hops_max, &unused))
        return 1;
    char shape[48];
    bgp_shape_str(b, shape, sizeof shape);
    const char *map_env = getenv("TORX_MAPPING");
    const char *map = map_env && *map_env ? map_env : "XYZT";
    const char *slash = strrchr(map, '/');

    torx_msg_t msg[NDIR];
    for (int z = 0; z < nsizes; z++) {
        h.len = (size_t)sizes[z];
        for (int d = 0; d < NDIR; d++)
            h.got[d] = h.seen[d] = 0;
        h.done = 0;
        if (bgp_barrier(b))
            return 1;
        uint32_t it = 0;
        for (long w = 0; w < warmup; w++, it++)
            if (exchange(&h, it, msg))
                return 1;
        if (bgp_barrier(b))
            return 1;
        const double t0 = torx_wtime(b->ctx);
        for (long k = 0; k < iters; k++, it++)
            if (exchange(&h, it, msg))
                return 1;
        const double per = (torx_wtime(b->ctx) - t0) / (double)iters;
        uint64_t mx = (uint64_t)(per * PS_PER_S), dummy = 0, sum = mx, one = 1;
        if (cn2(&h, TORX_CN_MAX, &mx, &dummy) || cn2(&h, TORX_CN_ADD, &sum, &one))
            return 1;
        if (b->rank == 0) {
            printf("halo tasks=%d grid=%dx%d periodic=%d torus=%s tpn=%d map=%s bytes=%zu "
                   "iters=%ld max_us=%.3f mean_us=%.3f hops_per_msg=%.4f max_hops=%llu "
                   "hop_bytes_per_exchange=%llu\n",
                   b->size, px, py, periodic, shape, b->tpn, slash ? slash + 1 : map, h.len, iters,
                   (double)mx / PS_PER_S * 1e6, (double)sum / (double)one / PS_PER_S * 1e6,
                   job_msgs ? (double)job_hops / (double)job_msgs : 0.0,
                   (unsigned long long)job_hops_max, (unsigned long long)(job_hops * h.len));
            fflush(stdout);
        }
    }
    if (b->rank == 0)
        fprintf(stderr, "halo: wall_s=%.1f maxrss_mib=%.0f\n", bgp_wall() - b->wall0,
                bgp_maxrss_mib());
    free(h.out);
    return bgp_finish(b);
}
