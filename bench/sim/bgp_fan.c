/* bgp_fan: the BG/P MPI study's fan-out and fan-in over 1-6 neighbours.
 * Rank 0's node and its torus neighbours (+x, -x, +y, -y, +z, -z): for k
 * = 1..6, rank 0 streams to the first k at once (fan-out), or the first k
 * stream to rank 0 at once (fan-in). The aggregate is all the bytes moved
 * over the time the last stream took.
 *
 *   bgp_fan [--sizes LIST] [--count N] [--window W]   (default 1M, 8, 4)
 *
 * Needs 2 tasks at least; k stops at the neighbours there are (a torus
 * of extent 3 or more in each dimension has 6). One task per node is
 * meant (heater or co mode). On shm and ofi, which have no torus, the
 * neighbours are ranks 1..6. Rank 0 prints, per size, direction and k,
 *   fan dir=out size=1048576 neighbours=3 aggregate_mbps=...
 */
#include "bgp_common.h"

/* The ranks next to rank 0 (one per direction and dimension), or, with no
 * torus underneath, ranks 1..6. */
static int neighbours(const bgp_t *b, int *nb)
{
    int n = 0;
    if (!b->modelled) {
        for (int r = 1; r < b->size && n < 6; r++)
            nb[n++] = r;
        return n;
    }
    const torx_coord_t c = torx_map_coord(b->map, 0);
    const torx_shape_t sh = b->map->shape;
    const unsigned ext[3] = {sh.x, sh.y, sh.z};
    for (int d = 0; d < 3; d++)
        for (int dir = 1; dir >= -1; dir -= 2) {
            int at[3] = {c.x, c.y, c.z};
            at[d] += dir;
            if (!b->mesh)
                at[d] = (at[d] + (int)ext[d]) % (int)ext[d];
            const int r = bgp_rank_at(b, at[0], at[1], at[2], c.t);
            int dup = r < 0 || r == 0;
            for (int i = 0; i < n && !dup; i++)
                dup = nb[i] == r;
            if (!dup)
                nb[n++] = r;
        }
    return n;
}

int main(int argc, char **argv)
{
    static const char prog[] = "bgp_fan";
    bgp_stream_args_t args = {.sizes = {1 << 20}, .nsizes = 1, .count = 8, .window = 4};
    if (bgp_stream_args(prog, argc, argv, &args))
        return 2;
    const long *sizes = args.sizes;
    const long count = args.count, window = args.window;
    const int nsizes = args.nsizes;

    bgp_t b;
    if (bgp_start(&b, prog, args.sizes, args.nsizes))
        return 1;
    int nb[6];
    const int nn = neighbours(&b, nb);
    if (nn == 0) {
        if (b.rank == 0)
            fprintf(stderr, "%s: rank 0 has no neighbour (%d tasks)\n", prog, b.size);
        bgp_finish(&b);
        return 2;
    }
    int me = -1;
    for (int i = 0; i < nn; i++)
        if (b.rank == nb[i])
            me = i;
    for (int z = 0; z < nsizes; z++) {
        const size_t len = (size_t)sizes[z];
        for (int out = 1; out >= 0; out--)
            for (int k = 1; k <= nn; k++) {
                const long base = b.got; /* before the barrier: data may come during it */
                if (bgp_barrier(&b))
                    return 1;
                const double t0 = torx_wtime(b.ctx);
                double took = 0;
                if (out && b.rank == 0) {
                    if (bgp_stream(&b, nb, k, b.sink, len, count, (int)window))
                        return 1;
                } else if (out && me >= 0 && me < k) {
                    if (bgp_wait_for(&b, &b.got, base + count, "fan-out"))
                        return 1;
                    took = b.got_at - t0;
                } else if (!out && b.rank == 0) {
                    if (bgp_wait_for(&b, &b.got, base + count * k, "fan-in"))
                        return 1;
                    took = b.got_at - t0;
                } else if (!out && me >= 0 && me < k) {
                    const int zero = 0;
                    if (bgp_stream(&b, &zero, 1, b.sink, len, count, (int)window))
                        return 1;
                }
                const long rbase = b.reports;
                if (bgp_barrier(&b))
                    return 1;
                if (out && me >= 0 && me < k) {
                    const double v[1] = {took};
                    if (bgp_report(&b, v, 1))
                        return 1;
                }
                if (b.rank == 0) {
                    double last = took;
                    if (out) {
                        if (bgp_wait_for(&b, &b.reports, rbase + k, "reports"))
                            return 1;
                        for (int i = 0; i < k; i++) {
                            const double t = b.report[(size_t)nb[i] * BGP_REPORT_MAX];
                            last = t > last ? t : last;
                        }
                    }
                    printf("fan dir=%s size=%zu neighbours=%d aggregate_mbps=%.1f\n",
                           out ? "out" : "in", len, k,
                           (double)len * (double)count * k * 8 / last / 1e6);
                    fflush(stdout);
                }
            }
    }
    return bgp_finish(&b);
}
