/* torx collectives: each algorithm's time, estimated from the network the
 * device describes (torx_pkt_network), for selection on a torus
 * (docs/collectives.md#selection-by-cost).
 *
 * The estimates are the textbook alpha-beta-hop models of each algorithm,
 * with the network's own figures: alpha is a one-packet message's latency,
 * a hop the router's latency, beta the slower of a link and a core handling
 * packets, and the collective network and global interrupt cost what the
 * device says a round costs. Two effects a plain alpha-beta model misses
 * decide the torus's cases, and are modelled:
 *   - a stream of packets is bound by the core that injects or receives
 *     them as well as by the link (bgl: a packet costs about a microsecond
 *     of a core, so a core moves less than two links' worth);
 *   - in an alltoall by shifts (MPICH's pairwise and scattered exchanges)
 *     every task sends to the task a fixed distance away at the same time,
 *     so each step lasts as long as its most-loaded link: the longest of
 *     the shift's distances along each dimension. On a torus the paced
 *     alltoall's members each take their own order and route adaptively
 *     (coll_alltoall.c), which spreads the load over every link, so it is
 *     bound by the average link load instead.
 * MPICH's choices among its own algorithms are MPICH 4.0.2's defaults.
 * The estimates rank algorithms; they are not predictions to the percent.
 */
#include "coll_internal.h"

#include <math.h>
#include <string.h>

/* MPICH 4.0.2's default switch points (its MPIR_CVAR_* defaults). */
#define MPICH_BCAST_SHORT 12288u
#define MPICH_BCAST_LONG 524288u
#define MPICH_BCAST_MIN_PROCS 8
#define MPICH_ALLREDUCE_SHORT 2048u
#define MPICH_ALLGATHER_SHORT 81920u
#define MPICH_ALLTOALL_SHORT 256u
#define MPICH_ALLTOALL_MIN_PROCS 8

static double log2_ceil(int n)
{
    int l = 0;
    while (l < 31 && (1 << l) < n)
        l++;
    return (double)l;
}

/* Mean distance between two positions of a line of e nodes, along it. */
static double mean_distance(unsigned e, int wrap)
{
    const double x = (double)e;
    if (e <= 1)
        return 0.0;
    return wrap ? (e % 2 ? (x * x - 1.0) / (4.0 * x) : x / 4.0) : (x * x - 1.0) / (3.0 * x);
}

/* P(distance <= k) between two positions drawn uniformly from a line of e
 * nodes (a ring when wrap). */
static double distance_cdf(unsigned e, int wrap, unsigned k)
{
    if (e <= 1 || k + 1 >= e)
        return 1.0;
    const double x = (double)e;
    if (wrap) { /* offsets 0..e-1; offset i is min(i, e - i) away */
        const unsigned within = 2 * k + 1 < e ? 2 * k + 1 : e;
        return within / x;
    }
    /* pairs (a, b) with |a - b| <= k: e + 2 * sum_{d=1..k} (e - d) */
    const double kk = (double)k;
    return (x + 2.0 * (kk * x - kk * (kk + 1.0) / 2.0)) / (x * x);
}

void torxc_cost_group_init(torx_coll_group_t *g)
{
    const torx_net_t *net = &g->c->net;
    const unsigned ext[3] = {net->shape.x, net->shape.y, net->shape.z};
    torxc_geometry_t *geo = &g->geo;
    unsigned char used[3][256];
    memset(used, 0, sizeof used);
    for (int i = 0; i < g->n; i++) {
        const torx_coord_t k = g->coord[i];
        used[0][k.x] = used[1][k.y] = used[2][k.z] = 1;
    }
    geo->nodes = 1;
    geo->mean_hops = 0.0;
    geo->bcast_forwards = -1.0;
    geo->depth = 0;
    for (int d = 0; d < 3; d++) {
        unsigned cnt = 0;
        for (unsigned v = 0; v < 256; v++)
            cnt += used[d][v];
        geo->extent[d] = cnt;
        geo->wrap[d] = cnt == ext[d] && (net->wrap >> d & 1u);
        geo->nodes *= cnt;
        geo->mean_hops += mean_distance(cnt, geo->wrap[d]);
        geo->depth += geo->wrap[d] ? cnt / 2 : cnt - 1;
    }
    if (geo->nodes > (unsigned)g->n)
        geo->nodes = (unsigned)g->n;
    geo->tasks_per_node = (double)g->n / geo->nodes;
    /* The expected longest of a shift's distances along the three
     * dimensions: sum over k >= 1 of P(max >= k). */
    double hot = 0.0;
    for (unsigned k = 1; k < 256; k++) {
        double below = 1.0;
        for (int d = 0; d < 3; d++)
            below *= distance_cdf(geo->extent[d], geo->wrap[d], k - 1);
        if (below >= 1.0)
            break;
        hot += 1.0 - below;
    }
    geo->shift_hot_hops = hot;
    /* Step k of MPICH's recursive doubling and halving pairs member i with
     * member i ^ 2^k. With the ranks laid out in order, every pair of a step
     * is displaced alike, so member 0 and member 2^k stand for all; under
     * dimension-ordered routing as many of the step's flows cross one link
     * as the pair's longest per-dimension distance. */
    geo->xor_steps = 0;
    for (unsigned k = 0; k < 31 && (1 << k) < g->n; k++) {
        const torx_coord_t a = g->coord[0], b = g->coord[1 << k];
        const unsigned pa[3] = {a.x, a.y, a.z}, pb[3] = {b.x, b.y, b.z};
        unsigned hops = 0, load = 0;
        for (int d = 0; d < 3; d++) {
            unsigned dist = pa[d] > pb[d] ? pa[d] - pb[d] : pb[d] - pa[d];
            if ((net->wrap >> d & 1u) && ext[d] - dist < dist)
                dist = ext[d] - dist;
            hops += dist;
            load = dist > load ? dist : load;
        }
        geo->xor_hops[k] = (unsigned char)(hops < 255 ? hops : 255);
        geo->xor_load[k] = (unsigned char)(load < 255 ? load : 255);
        geo->xor_steps = k + 1;
    }
}

/* ---- the figures an estimate uses --------------------------------------------- */

typedef struct figures {
    double alpha;     /* a message's software latency, to a neighbour */
    double duplex;    /* bytes/s of a core that sends and receives at once (a sendrecv) */
    double bulk;      /* bytes/s of a bulk transfer (a DMA engine); 0: none */
    double per_msg;   /* a core's share of one message (its packets aside) */
    double hop;       /* per hop */
    double mean_hops; /* between two members */
    double stream;    /* bytes/s of one message's packets: link or core, the slower */
    double copy;      /* bytes/s of a combine or copy by a core */
    double link;      /* bytes/s of a link (torus) */
} figures_t;

static figures_t figures_of(const torx_coll_group_t *g)
{
    const torx_net_t *net = &g->c->net;
    figures_t f = {
        .alpha = net->message_latency,
        .hop = net->hop_latency,
        .mean_hops = g->geo.mean_hops,
        .copy = net->copy_bandwidth > 0 ? net->copy_bandwidth : 1e10,
        .link = net->link_bandwidth > 0 ? net->link_bandwidth : 1e9,
    };
    const double core = net->packet_cpu > 0 ? (double)net->packet_payload / net->packet_cpu : 1e12;
    f.stream = f.link < core ? f.link : core;
    /* A sendrecv's packets: the core injects its own and receives and
     * copies the partner's (in co mode the thread receives them). */
    if (net->packet_cpu > 0) {
        const double pay = (double)net->packet_payload, in = net->packet_cpu,
                     out = net->packet_cpu + pay / f.copy;
        f.duplex = pay / (torx_mode(g->c->ctx) == TORX_MODE_CO ? (in > out ? in : out) : in + out);
    } else {
        f.duplex = f.stream;
    }
    f.bulk = net->bulk_bandwidth;
    /* a message's own processor work: its latency less the wire and hops */
    f.per_msg = net->kind == TORX_NET_TORUS ? 3.0 * net->packet_cpu : f.alpha;
    return f;
}

static double msg(const figures_t *f, double bytes, double hops)
{
    return f->alpha + hops * f->hop + bytes / f->stream;
}

/* ---- MPICH's algorithms over torx point-to-point ------------------------------- */

/* Step k of a recursive doubling or halving on a torus: every member sends
 * and receives bytes at once, as long as the step's busiest link or a
 * core moving both ways takes; a rendezvous adds its handshake and, with a
 * DMA engine, leaves the core. */
static double xor_step(const torx_coll_group_t *g, const figures_t *f, unsigned k, double bytes)
{
    const torxc_geometry_t *geo = &g->geo;
    const unsigned hops = k < geo->xor_steps ? geo->xor_hops[k] : 1,
                   load = k < geo->xor_steps ? geo->xor_load[k] : 1;
    const double wire = bytes * load * geo->tasks_per_node / f->link;
    double move = bytes / f->duplex, extra = 0.0;
    if (k < geo->xor_steps && bytes >= 1.0 &&
        torx_choose_protocol(g->c->ctx, torxc_task(g, 1 << k), 0, (size_t)bytes) ==
            TORX_PROTO_RZV) {
        extra = 2.0 * f->alpha; /* request to send, clear to send */
        if (f->bulk > 0)
            move = bytes / f->bulk;
    }
    return f->alpha + extra + hops * f->hop + (wire > move ? wire : move);
}

static double fallback_cost(const torx_coll_group_t *g, torx_coll_kind_t kind, double b,
                            const figures_t *f)
{
    const int n = g->n;
    const double lg = log2_ceil(n), part = b * (n - 1) / n;
    switch (kind) {
    case TORX_COLL_BARRIER: /* dissemination */
        return lg * msg(f, 0, f->mean_hops);
    case TORX_COLL_BCAST: {
        if (b <= MPICH_BCAST_SHORT || n < MPICH_BCAST_MIN_PROCS) /* binomial tree */
            return lg * msg(f, b, f->mean_hops);
        /* a binomial scatter of the buffer's n pieces, then an allgather */
        const double scatter = lg * f->alpha + part / f->stream;
        if ((n & (n - 1)) == 0 && b <= MPICH_BCAST_LONG) {
            /* by recursive doubling: at step k every member swaps the 2^k
             * pieces it holds with member rank XOR 2^k, as far away and
             * sharing links as the step's pairs do */
            double t = scatter;
            for (unsigned k = 0; k < 31 && (1 << k) < n; k++)
                t += xor_step(g, f, k, b / n * (double)(1u << k));
            return t;
        }
        /* around the ring of ranks, whose every step is a sendrecv: each
         * core sends and receives at once */
        return scatter + (n - 1) * f->alpha + part / f->duplex;
    }
    case TORX_COLL_ALLREDUCE:
    case TORX_COLL_REDUCE:
        if (g->c->net.kind == TORX_NET_TORUS) {
            /* the steps' own distances and link loads, as MPICH pairs the
             * members: the whole vector at every step up to its switch
             * point, then halves both ways (Rabenseifner); a group that is
             * not a power of two first folds its extra members in */
            unsigned steps = 0;
            while (steps < 31 && (1 << (steps + 1)) <= n)
                steps++;
            double t = (1 << steps) < n ? 2.0 * msg(f, b, f->mean_hops) : 0.0, piece = b;
            for (unsigned k = 0; k < steps; k++) {
                if (b <= MPICH_ALLREDUCE_SHORT) {
                    t += xor_step(g, f, k, b) + b / f->copy;
                } else {
                    piece /= 2.0;
                    t += 2.0 * xor_step(g, f, k, piece);
                }
            }
            return b <= MPICH_ALLREDUCE_SHORT ? t : t + b / f->copy;
        }
        if (b <= MPICH_ALLREDUCE_SHORT) /* recursive doubling / binomial */
            return lg * (msg(f, b, f->mean_hops) + b / f->copy);
        /* Rabenseifner: reduce-scatter, then allgather (or gather) */
        return 2.0 * lg * (f->alpha + f->mean_hops * f->hop) + 2.0 * part / f->stream + b / f->copy;
    case TORX_COLL_ALLGATHER:
        if (b * n <= MPICH_ALLGATHER_SHORT) /* recursive doubling */
            return lg * (f->alpha + f->mean_hops * f->hop) + b * (n - 1) / f->stream;
        return (n - 1) * (msg(f, b, 1.0)); /* ring */
    case TORX_COLL_ALLTOALL:
        if (b <= MPICH_ALLTOALL_SHORT && n >= MPICH_ALLTOALL_MIN_PROCS) /* Bruck */
            return lg * msg(f, b * n / 2.0, f->mean_hops);
        /* every task sends to rank + i at step i: each step as long as the
         * shift's busiest link (see the top of the file) */
        {
            const double tpn = g->geo.tasks_per_node, hot = g->geo.shift_hot_hops;
            double wire = g->c->net.kind == TORX_NET_TORUS ? (n - 1) * b * tpn * hot / f->link
                                                           : (n - 1) * b / f->stream;
            const double core = (n - 1) * b / f->stream;
            return (n - 1) * f->per_msg + (wire > core ? wire : core);
        }
    default:
        return INFINITY;
    }
}

/* ---- torx's algorithms ------------------------------------------------------------- */

static double cn_cost(const torx_coll_group_t *g, torx_coll_kind_t kind, double b, int fpsum)
{
    const torx_net_t *net = &g->c->net;
    if (net->cn_latency <= 0)
        return INFINITY;
    const double total = kind == TORX_COLL_ALLGATHER ? b * g->n : b;
    const double more = total > TORX_CN_PACKET_BYTES ? total - TORX_CN_PACKET_BYTES : 0.0;
    /* the reproducible sum takes a round of exponents first */
    return (fpsum ? 2.0 : 1.0) * (net->cn_latency + more / net->cn_bandwidth);
}

static double torus_cost(torx_coll_group_t *g, torx_coll_kind_t kind, double b, const figures_t *f)
{
    const torx_net_t *net = &g->c->net;
    const int n = g->n;
    switch (kind) {
    case TORX_COLL_BCAST: {
        /* R routes of line sends, pipelined per packet: bound by the
         * routes' links and by the busiest member's core. A member
         * receives each packet, matches it and copies it out, and sends
         * it on along the lines its route's plan gives it: on average
         * over the routes, up to `forwards` lines a packet (the routes'
         * plans, coll_routes.c: 0.5 on a plane of two rings, 1 on boxes
         * of three runs). In heater mode one core does it all; in co
         * mode the thread receives and sends on, the task matches and
         * copies. */
        const double routes = (double)torxc_torus_routes(g);
        if (g->geo.bcast_forwards < 0)
            g->geo.bcast_forwards = torxc_torus_forwards(g);
        const double fwd = g->geo.bcast_forwards;
        const double pkt = 224.0, cpu = net->packet_cpu > 0 ? net->packet_cpu : 1e-9;
        const double out = pkt / f->copy;
        const double thread = (1.0 + fwd) * cpu, task = cpu + out;
        const double per_pkt = torx_mode(g->c->ctx) == TORX_MODE_CO
                                   ? (thread > task ? thread : task)
                                   : (2.0 + fwd) * cpu + out;
        const double core = pkt / per_pkt;
        const double links = routes * f->link;
        /* a packet is received and sent on by a core at each dimension's stage */
        return routes * f->alpha + g->geo.depth * f->hop + b / (core < links ? core : links);
    }
    case TORX_COLL_ALLREDUCE:
    case TORX_COLL_REDUCE:
        if (b <= TORXC_EXCHANGE_MAX_BYTES) /* every vector to every member */
            return (n - 1) * (f->per_msg + b / f->stream + b / f->copy) + msg(f, 0, f->mean_hops);
        /* reduce-scatter and allgather by direct sends */
        return 2.0 * (n - 1) * f->per_msg + 2.0 * b * (n - 1) / n / f->stream + b / f->copy;
    case TORX_COLL_ALLGATHER:
        return (n - 1) * (f->per_msg + b / f->stream) + msg(f, 0, f->mean_hops);
    default:
        return INFINITY;
    }
}

static double paced_cost(const torx_coll_group_t *g, torx_coll_kind_t kind, double b,
                         const figures_t *f)
{
    const int n = g->n;
    if (kind == TORX_COLL_BCAST) /* the root sends every member a copy */
        return (n - 1) * (f->per_msg + b / f->stream) + msg(f, 0, f->mean_hops);
    if (kind != TORX_COLL_ALLTOALL && kind != TORX_COLL_ALLTOALLV)
        return INFINITY;
    /* permutations spread the load: the mean link load, or the core */
    const torx_net_t *net = &g->c->net;
    const double core = (n - 1) * b / f->stream;
    double wire = core;
    if (net->kind == TORX_NET_TORUS && net->links)
        wire = (n - 1) * b * g->geo.tasks_per_node * g->geo.mean_hops / net->links / f->link;
    return (n - 1) * f->per_msg + (wire > core ? wire : core);
}

double torxc_cost(torx_coll_group_t *g, torx_coll_kind_t kind, torx_coll_alg_t alg, size_t bytes,
                  int fpsum)
{
    const figures_t f = figures_of(g);
    const double b = (double)bytes;
    switch (alg) {
    case TORX_COLL_ALG_FALLBACK:
        return fallback_cost(g, kind, b, &f);
    case TORX_COLL_ALG_GI:
        return g->c->net.gi_latency > 0 ? g->c->net.gi_latency : INFINITY;
    case TORX_COLL_ALG_CN:
        return cn_cost(g, kind, b, fpsum);
    case TORX_COLL_ALG_TORUS:
        return torus_cost(g, kind, b, &f);
    case TORX_COLL_ALG_PACED:
        return paced_cost(g, kind, b, &f);
    default:
        return INFINITY;
    }
}
