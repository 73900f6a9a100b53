/* bgp_multistream: the BG/P MPI study's multistream test. Node A (rank
 * 0's) and its neighbour B along x: for k = 1 .. tasks per node, the
 * tasks t = 0 .. k-1 of A each stream to task t of B at once; the
 * aggregate is what all k moved over the time the last one took.
 *
 *   bgp_multistream [--sizes LIST] [--count N] [--window W]
 *                                          (default 1M, 16, 4)
 *
 * Needs two nodes; k goes up to the tasks per node, so run it in vn mode
 * (torx-sim --mode vn: 4 on bgp; on shm e.g. TORX_MODE=vn
 * TORX_CORES_PER_NODE=2 mpiexec -n 4). On shm and ofi node B is the node
 * after A in rank order. Rank 0 prints, per size and k,
 *   multistream size=1048576 streams=2 aggregate_mbps=... per_stream_mbps=...
 */
#include "bgp_common.h"

int main(int argc, char **argv)
{
    static const char prog[] = "bgp_multistream";
    bgp_stream_args_t args = {.sizes = {1 << 20}, .nsizes = 1, .count = 16, .window = 4};
    if (bgp_stream_args(prog, argc, argv, &args))
        return 2;
    const long *sizes = args.sizes;
    const long count = args.count, window = args.window;
    const int nsizes = args.nsizes;

    bgp_t b;
    if (bgp_start(&b, prog, args.sizes, args.nsizes))
        return 1;
    /* a[t] on node A streams to bb[t] on node B */
    int a[64], bb[64];
    const int tpn = b.tpn < 64 ? b.tpn : 64;
    const torx_coord_t c0 = torx_map_coord(b.map, 0);
    int ok = b.size >= 2 * b.tpn;
    for (int t = 0; t < tpn && ok; t++) {
        a[t] = b.modelled ? bgp_rank_at(&b, c0.x, c0.y, c0.z, t) : -1;
        bb[t] = b.modelled ? bgp_rank_at(&b, c0.x + 1, c0.y, c0.z, t) : -1;
        if (!b.modelled) { /* no torus: the tasks of the first two nodes, by coordinate */
            for (int r = 0; r < b.size; r++) {
                const torx_coord_t c = torx_map_coord(b.map, r);
                if (c.t != t)
                    continue;
                if (c.x == c0.x && c.y == c0.y && c.z == c0.z)
                    a[t] = r;
                else if (bb[t] < 0)
                    bb[t] = r;
            }
        }
        ok = a[t] >= 0 && bb[t] >= 0;
    }
    if (!ok) {
        if (b.rank == 0)
            fprintf(stderr,
                    "%s: needs two nodes of %d tasks each, the second at x+1 of rank 0's "
                    "(%d tasks, %ux%ux%u)\n",
                    prog, b.tpn, b.size, b.map->shape.x, b.map->shape.y, b.map->shape.z);
        bgp_finish(&b);
        return 2;
    }
    int me = -1, role = 0; /* role 1: sender a[me], 2: receiver bb[me] */
    for (int t = 0; t < tpn; t++) {
        if (b.rank == a[t])
            me = t, role = 1;
        if (b.rank == bb[t])
            me = t, role = 2;
    }
    for (int z = 0; z < nsizes; z++) {
        const size_t len = (size_t)sizes[z];
        for (int k = 1; k <= tpn; k++) {
            const long base = b.got; /* before the barrier: data may come during it */
            if (bgp_barrier(&b))
                return 1;
            const double t0 = torx_wtime(b.ctx);
            double took = 0;
            if (role == 1 && me < k) {
                if (bgp_stream(&b, &bb[me], 1, b.sink, len, count, (int)window))
                    return 1;
            } else if (role == 2 && me < k) {
                if (bgp_wait_for(&b, &b.got, base + count, "stream"))
                    return 1;
                took = b.got_at - t0;
            }
            const long rbase = b.reports;
            if (bgp_barrier(&b))
                return 1;
            if (role == 2) {
                const double v[1] = {took};
                if (bgp_report(&b, v, 1))
                    return 1;
            }
            if (b.rank == 0) {
                if (bgp_wait_for(&b, &b.reports, rbase + tpn, "reports"))
                    return 1;
                double last = 0, sum = 0;
                for (int t = 0; t < k; t++) {
                    const double tt = b.report[(size_t)bb[t] * BGP_REPORT_MAX];
                    last = tt > last ? tt : last;
                    sum += (double)len * (double)count * 8 / tt / 1e6;
                }
                printf("multistream size=%zu streams=%d aggregate_mbps=%.1f per_stream_mbps=%.1f\n",
                       len, k, (double)len * (double)count * k * 8 / last / 1e6, sum / k);
                fflush(stdout);
            }
        }
    }
    return bgp_finish(&b);
}
