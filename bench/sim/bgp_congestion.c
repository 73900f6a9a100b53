/* bgp_congestion: the BG/P MPI study's two-pair congestion test. P0, P1,
 * P2 and P3 sit on four consecutive nodes of a line along x, from node
 * (0,0,0): P0 streams to P3 through P1's and P2's routers while P1
 * streams to P2, so the link from P1 to P2 carries both. Each pair is
 * measured alone, then both at once.
 *
 *   bgp_congestion [--sizes LIST] [--count N] [--window W]
 *                                          (default 1M, 16, 4)
 *
 * Needs 4 tasks at least. Under torx-sim the partition must route P0->P3
 * through P1 and P2: a mesh with x >= 4, or a torus with x >= 7. On shm and
 * ofi (no torus) P0..P3 are ranks 0..3. Other tasks wait. For each size,
 * each phase (p03, p12, both) streams N messages, W in flight, per pair;
 * the receiver's rate is bytes / (last arrival - start), and rank 0 prints
 *   congestion size=1048576 phase=both p03_mbps=... p12_mbps=...
 */
#include "bgp_common.h"

int main(int argc, char **argv)
{
    static const char prog[] = "bgp_congestion";
    bgp_stream_args_t args = {.sizes = {1 << 20}, .nsizes = 1, .count = 16, .window = 4};
    if (bgp_stream_args(prog, argc, argv, &args))
        return 2;
    const long *sizes = args.sizes;
    const long count = args.count, window = args.window;
    const int nsizes = args.nsizes;

    bgp_t b;
    if (bgp_start(&b, prog, args.sizes, args.nsizes))
        return 1;
    int p[4];
    for (int k = 0; k < 4; k++)
        p[k] = b.modelled ? bgp_rank_at(&b, k, 0, 0, 0) : k < b.size ? k : -1;
    const torx_shape_t sh = b.map->shape;
    const char *bad =
        b.size < 4                                     ? "needs 4 tasks at least"
        : p[0] < 0 || p[1] < 0 || p[2] < 0 || p[3] < 0 ? "no task on a node of the line"
        : b.modelled && sh.x < (b.mesh ? 4 : 7)
            ? "x must be >= 4 on a mesh, >= 7 on a torus, for P0->P3 to pass P1 and P2"
            : NULL;
    if (bad) {
        if (b.rank == 0)
            fprintf(stderr, "%s: %s (%d tasks, %ux%ux%u %s)\n", prog, bad, b.size, sh.x, sh.y, sh.z,
                    b.mesh ? "mesh" : "torus");
        bgp_finish(&b);
        return 2;
    }
    static const char *const phase[] = {"p03", "p12", "both"};
    for (int z = 0; z < nsizes; z++) {
        const size_t len = (size_t)sizes[z];
        for (int ph = 0; ph < 3; ph++) {
            const int on03 = ph != 1, on12 = ph != 0;
            const long base = b.got; /* before the barrier: data may come during it */
            if (bgp_barrier(&b))
                return 1;
            const double t0 = torx_wtime(b.ctx);
            double rate = 0;
            if ((b.rank == p[0] && on03) || (b.rank == p[1] && on12)) {
                if (bgp_stream(&b, b.rank == p[0] ? &p[3] : &p[2], 1, b.sink, len, count,
                               (int)window))
                    return 1;
            } else if ((b.rank == p[3] && on03) || (b.rank == p[2] && on12)) {
                if (bgp_wait_for(&b, &b.got, base + count, "stream"))
                    return 1;
                rate = (double)len * (double)count * 8 / (b.got_at - t0) / 1e6;
            }
            const long rbase = b.reports;
            if (bgp_barrier(&b))
                return 1;
            if (b.rank == p[2] || b.rank == p[3]) {
                const double v[1] = {rate};
                if (bgp_report(&b, v, 1))
                    return 1;
            }
            if (b.rank == 0) {
                if (bgp_wait_for(&b, &b.reports, rbase + 2, "reports"))
                    return 1;
                printf("congestion size=%zu phase=%s p03_mbps=%.1f p12_mbps=%.1f\n", len, phase[ph],
                       b.report[(size_t)p[3] * BGP_REPORT_MAX],
                       b.report[(size_t)p[2] * BGP_REPORT_MAX]);
                fflush(stdout);
            }
        }
    }
    return bgp_finish(&b);
}
