/* The torus broadcast's routes: which lines each node sends a route's
 * packets on, and where it receives them from (a pure function of the box,
 * the root and the node; coll_torus.c sends by it, test_coll_routes checks
 * it on every shape). docs/collectives.md#torus-broadcast-routes.
 *
 * Links. A node has one directed link out per dimension and way (+X, -X,
 * ...). A line send deposits its packet on every node it passes, so a
 * route's packet crosses each link of its tree once, and two routes are
 * edge-disjoint when no directed link carries both.
 *
 * Groups of routes. On a box whose every dimension is a whole ring the
 * routes come in two mirrored groups: the positive routes use only +
 * links, the negative ones only - links. Each group has one route per
 * dimension. On a box with a run (no wraparound inside the box) there is
 * one group, whose routes use the links that lead away from the root's
 * coordinate in both ways, and one link per run toward it (below). A corner
 * of a run has one link in along that dimension, so a box with runs has
 * at most as many disjoint routes as dimensions; this file gives every
 * such box D routes, and a box of rings 2D. (A box that mixes rings and
 * runs could have up to 2 x rings + runs; it gets D.)
 *
 * The routes of a group. With offsets v from the root (a ring's taken the
 * group's way round, 0..len-1; a run's signed), route k visits dimensions
 * a = k, k+1, ..., c = k+D-1 (mod D). Off the plane v_a = 0 it is the
 * dimension-ordered line tree: the root sends along a, every node of that
 * line along the next dimension, and so on; a node receives it along the
 * last dimension (in that order) where its offset is not zero and sends
 * it along every later one. The plane v_a = 0 (but the root) receives it
 * by one hop along a, from the next plane out: v_a = len-1 on a ring (the
 * +a link that closes the ring into the root's plane, which the line tree
 * never uses), v_a = +1 on a run (the -a link toward the root) or -1 when
 * the root is at the run's far end.
 *
 * Why disjoint. A node receives route k along dimension
 *   a                                 if v_a = 0,
 *   the last of a+1, ..., c with v != 0, else a,
 * and for every pattern of zero offsets the D routes of a group get
 * different dimensions at each node (a permutation: check it by cases, or
 * run test_coll_routes). Each dimension has one link in per group (a
 * ring's in its group's way; a run's from the root's side, or for v_a = 0
 * the link from the chosen neighbour), so no two routes cross one link.
 * Depth: the line tree's D stages, plus one hop for the plane v_a = 0. */
#include "coll_internal.h"

#include <string.h>

int torxc_routes(const torxc_box_t *box)
{
    if (box->dims <= 0)
        return 1;
    for (int d = 0; d < box->dims; d++)
        if (!box->ring[d])
            return box->dims;
    return 2 * box->dims;
}

/* Adds a line to a node's plan. */
static void add_line(torxc_route_node_t *n, int dim, int dir, unsigned hops)
{
    if (hops == 0 || n->nlines >= TORXC_ROUTE_LINES)
        return;
    n->line[n->nlines++] = (torxc_bline_t){.dim = (int8_t)dim, .dir = (int8_t)dir, .hops = hops};
}

/* The lines from the root's coordinate along dimension d that lead away
 * from it: a ring's one way round (the group's), a run's both ways. */
static void add_away(torxc_route_node_t *n, const torxc_box_t *box, const unsigned root[3], int d,
                     int way)
{
    if (box->ring[d]) {
        add_line(n, d, way, box->len[d] - 1);
    } else {
        add_line(n, d, 1, box->len[d] - 1 - root[d]);
        add_line(n, d, -1, root[d]);
    }
}

void torxc_route_plan(const torxc_box_t *box, const unsigned root[3], const unsigned me[3],
                      int route, torxc_route_node_t *out)
{
    memset(out, 0, sizeof *out);
    const int D = box->dims;
    const int R = torxc_routes(box);
    if (D <= 0 || route < 0 || route >= R)
        return;
    const int way = route < D ? 1 : -1; /* the group: + links, or - links (rings only) */
    int ord[3];
    for (int j = 0; j < D; j++)
        ord[j] = (route % D + j) % D;
    const int a = ord[0];

    /* offsets from the root: a ring's the group's way round, a run's signed */
    long off[3] = {0, 0, 0};
    int at_root = 1;
    for (int d = 0; d < D; d++) {
        const long len = box->len[d], m = me[d], r = root[d];
        off[d] = box->ring[d] ? ((way > 0 ? m - r : r - m) % len + len) % len : m - r;
        at_root &= off[d] == 0;
    }
    /* The plane v_a = 0 is fed by one hop along a from entry_off, in entry_dir. */
    long entry_off;
    int entry_dir;
    if (box->ring[a]) {
        entry_off = (long)box->len[a] - 1;
        entry_dir = way;
    } else if (root[a] + 1 < box->len[a]) {
        entry_off = 1;
        entry_dir = -1;
    } else {
        entry_off = -1;
        entry_dir = 1;
    }

    if (at_root) {
        add_away(out, box, root, a, way);
        return;
    }
    int others_zero = 1; /* every offset but a's is zero */
    for (int j = 1; j < D; j++)
        others_zero &= off[ord[j]] == 0;
    if (off[a] == 0) {
        out->from = (torxc_bline_t){.dim = (int8_t)a, .dir = (int8_t)entry_dir, .hops = 1};
    } else {
        int g = 0; /* the last dimension in the route's order with an offset */
        for (int j = 1; j < D; j++)
            if (off[ord[j]] != 0)
                g = j;
        const int d = ord[g];
        const long o = off[d];
        out->from = (torxc_bline_t){.dim = (int8_t)d,
                                    .dir = (int8_t)(box->ring[d] ? way
                                                    : o > 0      ? 1
                                                                 : -1),
                                    .hops = (unsigned)(o > 0 ? o : -o)};
        for (int j = g + 1; j < D; j++)
            add_away(out, box, root, ord[j], way);
    }
    if (off[a] == entry_off && !others_zero)
        add_line(out, a, entry_dir, 1);
}

int torxc_route_lines(const torxc_box_t *box, const unsigned root[3], const unsigned me[3])
{
    int lines = 0;
    for (int route = 0; route < torxc_routes(box); route++) {
        torxc_route_node_t plan;
        torxc_route_plan(box, root, me, route, &plan);
        lines += plan.nlines;
    }
    return lines;
}

/* Positions along a box dimension of length len where a node's plan can
 * differ, seen from a root at r: the root's, its neighbours' and the next
 * ones (the planes a route enters by one hop, and a generic offset), and
 * the ends. */
static int positions(unsigned len, unsigned r, unsigned *out)
{
    const long at = (long)r, end = (long)len - 1;
    const long cand[] = {at, at + 1, at - 1, at + 2, at - 2, 0, end};
    int n = 0;
    for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++) {
        const long p = ((cand[i] % (long)len) + (long)len) % (long)len;
        int dup = 0;
        for (int j = 0; j < n; j++)
            dup |= out[j] == (unsigned)p;
        if (!dup)
            out[n++] = (unsigned)p;
    }
    return n;
}

double torxc_route_forwards(const torxc_box_t *box, const unsigned root[3])
{
    const int D = box->dims, R = torxc_routes(box);
    if (D <= 0)
        return 0.0;
    unsigned pos[3][8];
    int npos[3] = {1, 1, 1};
    for (int d = 0; d < 3; d++)
        pos[d][0] = 0;
    for (int d = 0; d < D; d++)
        npos[d] = positions(box->len[d], root[d], pos[d]);
    int most = 0;
    for (int i = 0; i < npos[0]; i++)
        for (int j = 0; j < npos[1]; j++)
            for (int k = 0; k < npos[2]; k++) {
                const unsigned me[3] = {pos[0][i], pos[1][j], pos[2][k]};
                if (me[0] == root[0] && me[1] == root[1] && me[2] == root[2])
                    continue;
                const int lines = torxc_route_lines(box, root, me);
                most = lines > most ? lines : most;
            }
    return (double)most / R;
}
