/* bgp_hops: the BG/P MPI study's latency against system size. Rank 0
 * ping-pongs with the farthest task of the partition (the most hops away;
 * on a single node, another task of that node), or with --hops H the
 * lowest rank H hops away (0: on rank 0's node), for each message size:
 * small sizes give the latency, a large one the one-way bandwidth.
 *
 *   bgp_hops [--sizes LIST] [--iters N] [--hops H]  (default 0,1K,1M; 10)
 *
 * Needs 2 tasks at least. Rank 0 runs 2 warm-up round trips and N timed
 * ones per size, and prints per size
 *   hops tasks=2048 shape=8x8x8 tpn=4 partner=1316 hops=12 bytes=0 half_rtt_us=... mbps=...
 * (mbps: megabits per second one way, bytes / half round trip), then
 *   hops_run wall_s=... maxrss_mib=...
 * Times come from torx_wtime: simulated under torx-sim, the host's clock
 * under mpiexec. */
#include "bgp_common.h"

/* want < 0: the lowest rank farthest from rank 0; else the lowest rank
 * want hops away (0: another task of rank 0's node); -1 if none. */
static int partner_at(const bgp_t *b, long want, unsigned *hops)
{
    int best = -1;
    *hops = 0;
    for (int r = 1; r < b->size; r++) {
        const unsigned h = bgp_hops(b, 0, r);
        if (want >= 0 ? h == (unsigned long)want && best < 0 : best < 0 || h > *hops) {
            best = r;
            *hops = h;
        }
    }
    return best;
}

int main(int argc, char **argv)
{
    static const char prog[] = "bgp_hops";
    long sizes[BGP_MAXLIST] = {0, 1024, 1 << 20}, iters = 10, want = -1;
    int nsizes = 3;
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc || (strcmp(argv[i], "--sizes") && strcmp(argv[i], "--iters") &&
                              strcmp(argv[i], "--hops"))) {
            fprintf(stderr,
                    "%s: bad argument '%s'\nusage: %s [--sizes LIST] [--iters N] [--hops H]\n",
                    prog, argv[i], prog);
            return 2;
        }
        if (!strcmp(argv[i], "--hops") &&
            bgp_parse_long(prog, argv[i], argv[i + 1], 0, 1000, &want))
            return 2;
        if (!strcmp(argv[i], "--sizes") &&
            (nsizes = bgp_parse_sizes(prog, argv[i], argv[i + 1], sizes)) < 0)
            return 2;
        if (!strcmp(argv[i], "--iters") &&
            bgp_parse_long(prog, argv[i], argv[i + 1], 1, 1000000, &iters))
            return 2;
    }
    bgp_t b;
    if (bgp_start(&b, prog, sizes, nsizes))
        return 1;
    if (bgp_needs_tasks(&b, 2))
        return 2;
    unsigned hops;
    const int partner = partner_at(&b, want, &hops);
    if (partner < 0) {
        if (b.rank == 0)
            fprintf(stderr, "%s: --hops %ld: no task that far from rank 0\n", prog, want);
        bgp_finish(&b);
        return 2;
    }
    char shape[32];
    bgp_shape_str(&b, shape, sizeof shape);
    for (int z = 0; z < nsizes; z++) {
        /* taken before the barrier: the first ping may come during it */
        const long base = b.got;
        if (bgp_barrier(&b))
            return 1;
        const size_t len = (size_t)sizes[z];
        if (b.rank == 0) {
            double t0 = 0;
            for (long k = 0; k < iters + 2; k++) {
                if (k == 2)
                    t0 = torx_wtime(b.ctx);
                if (bgp_send_wait(&b, partner, BGP_H_DATA, b.sink, len) ||
                    bgp_wait_for(&b, &b.got, base + k + 1, "ping-pong"))
                    return 1;
            }
            const double half = (torx_wtime(b.ctx) - t0) / (2.0 * (double)iters);
            printf("hops tasks=%d shape=%s tpn=%d partner=%d hops=%u bytes=%zu half_rtt_us=%.4f "
                   "mbps=%.1f\n",
                   b.size, shape, b.tpn, partner, hops, len, half * 1e6,
                   (double)len * 8 / half / 1e6);
            fflush(stdout);
        } else if (b.rank == partner) {
            for (long k = 0; k < iters + 2; k++) {
                if (bgp_wait_for(&b, &b.got, base + k + 1, "ping-pong") ||
                    bgp_send_wait(&b, 0, BGP_H_DATA, b.sink, len))
                    return 1;
            }
        }
    }
    if (bgp_barrier(&b))
        return 1;
    if (b.rank == 0) {
        printf("hops_run wall_s=%.1f maxrss_mib=%.0f\n", bgp_wall() - b.wall0, bgp_maxrss_mib());
        fflush(stdout);
    }
    return bgp_finish(&b);
}
