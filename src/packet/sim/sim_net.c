/* The sim device's network model (docs/sim.md#the-network-model).
 *
 * Torus links are reserved, not simulated as flows. Each directed link
 * keeps the time it is next free. A packet injected at time t walks its
 * route once, at injection: on each hop it starts crossing the link when its
 * head is there and the link is free, holds the link for its wire time
 * (chunks of 32 bytes plus the link's overhead, over the link's bandwidth),
 * and its head reaches the next router a hop latency after it started
 * (virtual cut-through: a packet that finds the next link busy waits in the
 * router, holding nothing upstream). It is fully received a wire time after
 * its head reaches the destination. Uncongested, a packet of h hops takes
 * h * hop_latency + wire time: exactly linear in distance, as the
 * original's Fig 4(a). Two flows over one link share it packet by packet.
 *
 * The cost is O(hops) per packet and a heap insertion at the destination,
 * whatever the traffic. What this leaves out, on purpose:
 *  - links are granted in injection order, not by a router's arbitration
 *    among packets that reach it at once;
 *  - reception FIFOs never fill, so a receiver that stops reading never
 *    pushes back on the network (injection FIFOs do fill: room);
 *  - the route is fixed at injection: adaptive packets pick, hop by hop,
 *    the productive link that is free soonest, as the load stood then.
 *
 * Deterministic packets follow X, then Y, then Z, the positive way when
 * both are shortest; so two from one task to another arrive in order.
 * Adaptive packets may overtake. Deposit packets leave a copy at every
 * node they pass.
 *
 * The collective network and the global interrupt complete a round when
 * its last contribution is in, after the tree's latency (up and down
 * ceil(log_fanout(nodes)) levels) and one packet's wire time, or the
 * interrupt's latency. */
#include "sim.h"

#include <math.h>
#include <string.h>

#define CN_DEPTH 4      /* rounds in flight, as on the shm device */
#define ROUTER_BUFFER 1 /* packets a router input holds (docs/sim.md#the-network-model) */

typedef struct cn_round {
    uint64_t round; /* the round in this slot (+1: 0 = never used) */
    int count, readers;
    uint8_t op, type;
    int nroots, root, second_root;
    int bad_task; /* the first task that disagreed, or -1 */
    uint8_t bad_op, bad_type;
    double last_in, enter, done_at; /* enter: when its packet enters the tree */
    unsigned char acc[TORX_CN_PACKET_BYTES];
} cn_round_t;

typedef struct gi_round {
    uint64_t round;
    int count;
    double done_at;
} gi_round_t;

struct torxp_sim_net {
    torx_shape_t shape;
    int wrap;
    unsigned nnodes;
    int ntasks, attached;
    double *link_free; /* nnodes * 6: node index * 6 + dim * 2 + (negative) */
    double *dma_free;  /* nnodes: each node's DMA engine (bulk dma) */
    double dma_byte_s, dma_local_byte_s, dma_startup;
    torxp_sim_task_t *tasks;         /* by rank */
    torxp_sim_task_t **task_of_slot; /* by torx_coord_index */
    torxp_sim_pkt_t *free_pkts;
    uint64_t seq;
    double byte_s, hop_s, link_overhead;
    unsigned inject_cap;
    double cn_latency, cn_wire_s, gi_latency;
    uint64_t chaos;
    cn_round_t cn[CN_DEPTH];
    gi_round_t gi[2];
};

#define BULK_WINDOW 16 /* packets reserved at a time: transfers interleave */

struct torxp_sim_xfer {
    torxp_sim_xfer_t *next;
    torx_coord_t src, dst; /* the data flows src -> dst */
    int src_rank, dst_rank;
    const unsigned char *from;
    unsigned char *to;
    size_t len, reserved;
    double t_next;  /* when the engine takes the next window */
    double done_at; /* the last packet in; valid once reserved == len */
    int local;
};

/* ---- attaching ----------------------------------------------------------------- */

static unsigned levels(unsigned nodes, unsigned fanout)
{
    unsigned l = 0;
    for (unsigned long reach = 1; reach < nodes; reach *= fanout)
        l++;
    return l;
}

static torx_status_t net_create(torxp_sim_job_t *job, torx_shape_t shape, torxp_sim_net_t **out)
{
    const torxp_sim_config_t *c = torxp_sim_config(job);
    const torxp_sim_machine_t *m = &c->machine;
    torxp_sim_net_t *n = torxp_calloc(1, sizeof *n);
    if (!n)
        return torxp_error(TORX_ERR_NOMEM, "torx: sim: no memory for the network");
    n->shape = shape;
    n->wrap = !c->mesh;
    n->nnodes = (unsigned)shape.x * shape.y * shape.z;
    n->ntasks = torxp_sim_job_size(job);
    n->link_free = torxp_calloc((size_t)n->nnodes * 6, sizeof *n->link_free);
    n->tasks = torxp_calloc((size_t)n->ntasks, sizeof *n->tasks);
    n->task_of_slot = torxp_calloc(torx_shape_slots(shape), sizeof *n->task_of_slot);
    n->dma_free = torxp_calloc(n->nnodes, sizeof *n->dma_free);
    if (!n->link_free || !n->tasks || !n->task_of_slot || !n->dma_free) {
        free(n->dma_free);
        free(n->link_free);
        free(n->tasks);
        free(n->task_of_slot);
        free(n);
        return torxp_error(TORX_ERR_NOMEM, "torx: sim: no memory for a %ux%ux%u torus", shape.x,
                           shape.y, shape.z);
    }
    n->byte_s = 1.0 / m->link_bandwidth;
    n->hop_s = m->hop_latency;
    n->link_overhead = m->link_overhead;
    n->inject_cap = (unsigned)m->injection_fifo_packets;
    n->cn_latency = 2.0 * levels(n->nnodes, (unsigned)m->cn_fanout) * m->cn_hop_latency;
    n->cn_wire_s = (TORX_CN_PACKET_BYTES + m->link_overhead) / m->cn_bandwidth;
    n->gi_latency = m->gi_latency;
    if (m->bulk == TORXP_SIM_BULK_DMA) {
        n->dma_byte_s = 1.0 / m->dma_bandwidth;
        n->dma_local_byte_s = 1.0 / m->dma_local_bandwidth;
        n->dma_startup = m->dma_startup;
    }
    for (int i = 0; i < CN_DEPTH; i++)
        n->cn[i].round = 0;
    *out = n;
    return TORX_OK;
}

torx_status_t torxp_sim_net_attach(torxp_sim_job_t *job, torx_shape_t shape, torx_coord_t self,
                                   int rank, torxp_sim_task_t **task)
{
    torxp_sim_net_t **np = torxp_sim_job_net(job);
    torx_status_t rc;
    if (!*np && (rc = net_create(job, shape, np)) != TORX_OK)
        return rc;
    torxp_sim_net_t *n = *np;
    const torx_shape_t s = n->shape;
    if (s.x != shape.x || s.y != shape.y || s.z != shape.z || s.t != shape.t)
        return torxp_error(TORX_ERR_PROTO,
                           "torx: sim: rank %d opened a %ux%ux%u x %u torus, the job's is "
                           "%ux%ux%u x %u",
                           rank, shape.x, shape.y, shape.z, shape.t, s.x, s.y, s.z, s.t);
    const unsigned slot = torx_coord_index(s, self);
    if (n->task_of_slot[slot])
        return torxp_error(TORX_ERR_INVAL,
                           "torx: sim: rank %d's coordinate (%u,%u,%u,%u) is taken by rank %d",
                           rank, self.x, self.y, self.z, self.t, n->task_of_slot[slot]->rank);
    torxp_sim_task_t *t = &n->tasks[rank];
    *t = (torxp_sim_task_t){.rank = rank, .coord = self, .asleep_until = INFINITY};
    t->inject = torxp_calloc(n->inject_cap, sizeof *t->inject);
    t->job = job;
    if (!t->inject)
        return torxp_error(TORX_ERR_NOMEM, "torx: sim: no memory for rank %d", rank);
    uint64_t seed = torxp_sim_config(job)->seed * 0x9E3779B97F4A7C15ull + (uint64_t)rank + 1;
    t->rng = seed ? seed : 1;
    t->open = 1;
    n->task_of_slot[slot] = t;
    n->attached++;
    *task = t;
    return TORX_OK;
}

void torxp_sim_net_detach(torxp_sim_job_t *job, torxp_sim_task_t *t)
{
    torxp_sim_net_t **np = torxp_sim_job_net(job);
    torxp_sim_net_t *n = *np;
    if (!n || !t || !t->open)
        return;
    for (unsigned i = 0; i < t->nrx; i++) {
        t->rx[i]->next_free = n->free_pkts;
        n->free_pkts = t->rx[i];
    }
    free(t->rx);
    free(t->inject);
    while (t->bulk) { /* abandoned, as torx_pkt_close says */
        torxp_sim_xfer_t *b = t->bulk;
        t->bulk = b->next;
        free(b);
    }
    n->task_of_slot[torx_coord_index(n->shape, t->coord)] = NULL;
    t->open = 0;
    if (--n->attached == 0) {
        while (n->free_pkts) {
            torxp_sim_pkt_t *p = n->free_pkts;
            n->free_pkts = p->next_free;
            free(p);
        }
        free(n->link_free);
        free(n->dma_free);
        free(n->tasks);
        free(n->task_of_slot);
        free(n);
        *np = NULL;
    }
}

/* ---- waking ---------------------------------------------------------------------- */

void torxp_sim_notify(torxp_sim_task_t *t, double when)
{
    if (t->asleep_until > when) {
        t->asleep_until = when; /* one wake per earlier event */
        torxp_sim_wake_task(t->job, t->rank);
    }
}

/* ---- reception: a heap per task -------------------------------------------------- */

static int pkt_before(const torxp_sim_pkt_t *a, const torxp_sim_pkt_t *b)
{
    return a->arrive < b->arrive || (a->arrive == b->arrive && a->seq < b->seq);
}

static torx_status_t rx_push(torxp_sim_task_t *t, torxp_sim_pkt_t *p)
{
    if (t->nrx == t->caprx) {
        const unsigned cap = t->caprx ? t->caprx * 2 : 16;
        torxp_sim_pkt_t **rx = torxp_realloc(t->rx, cap * sizeof *rx);
        if (!rx)
            return torxp_error(TORX_ERR_NOMEM, "torx: sim: no memory for rank %d's packets",
                               t->rank);
        t->rx = rx;
        t->caprx = cap;
    }
    unsigned i = t->nrx++;
    while (i > 0) {
        const unsigned up = (i - 1) / 2;
        if (!pkt_before(p, t->rx[up]))
            break;
        t->rx[i] = t->rx[up];
        i = up;
    }
    t->rx[i] = p;
    return TORX_OK;
}

torxp_sim_pkt_t *torxp_sim_net_peek(torxp_sim_task_t *t, double now)
{
    return t->nrx && t->rx[0]->arrive <= now ? t->rx[0] : NULL;
}

void torxp_sim_net_pop(torxp_sim_job_t *job, torxp_sim_task_t *t)
{
    torxp_sim_net_t *n = *torxp_sim_job_net(job);
    torxp_sim_pkt_t *top = t->rx[0];
    torxp_sim_pkt_t *last = t->rx[--t->nrx];
    unsigned i = 0;
    for (;;) {
        unsigned c = 2 * i + 1;
        if (c >= t->nrx)
            break;
        if (c + 1 < t->nrx && pkt_before(t->rx[c + 1], t->rx[c]))
            c++;
        if (!pkt_before(t->rx[c], last))
            break;
        t->rx[i] = t->rx[c];
        i = c;
    }
    if (t->nrx)
        t->rx[i] = last;
    top->next_free = n->free_pkts;
    n->free_pkts = top;
}

static torxp_sim_pkt_t *pkt_alloc(torxp_sim_net_t *n)
{
    torxp_sim_pkt_t *p = n->free_pkts;
    if (p) {
        n->free_pkts = p->next_free;
        return p;
    }
    p = torxp_malloc(sizeof *p);
    if (!p)
        torxp_error(TORX_ERR_NOMEM, "torx: sim: no memory for a packet in flight");
    return p;
}

/* ---- routes ---------------------------------------------------------------------- */

static unsigned node_index(const torxp_sim_net_t *n, unsigned x, unsigned y, unsigned z)
{
    return x + n->shape.x * (y + n->shape.y * z);
}

/* Hops and direction (+1, -1) from a to b along a dimension of extent len;
 * tie: both ways are shortest (a torus of even extent, half way round). */
static unsigned way(const torxp_sim_net_t *n, unsigned a, unsigned b, unsigned len, int *dir,
                    int *tie)
{
    *tie = 0;
    if (a == b) {
        *dir = 1;
        return 0;
    }
    if (!n->wrap) {
        *dir = b > a ? 1 : -1;
        return b > a ? b - a : a - b;
    }
    const unsigned up = (b + len - a) % len, down = len - up;
    *tie = up == down;
    *dir = up <= down ? 1 : -1;
    return up <= down ? up : down;
}

static uint8_t *coord_field(torx_coord_t *c, int dim)
{
    return dim == 0 ? &c->x : dim == 1 ? &c->y : &c->z;
}

static unsigned extent(const torxp_sim_net_t *n, int dim)
{
    return dim == 0 ? n->shape.x : dim == 1 ? n->shape.y : n->shape.z;
}

static torx_status_t deliver(torxp_sim_net_t *n, torxp_sim_task_t *to, const torxp_sim_pkt_t *src,
                             double arrive)
{
    torxp_sim_pkt_t *p = pkt_alloc(n);
    if (!p)
        return TORX_ERR_NOMEM;
    const size_t bytes = TORX_PKT_HDR_BYTES + src->hdr.payload_len;
    memcpy(p->bytes, src->bytes, bytes);
    p->arrive = arrive;
    p->seq = n->seq++;
    torx_status_t rc = rx_push(to, p);
    if (rc != TORX_OK) {
        p->next_free = n->free_pkts;
        n->free_pkts = p;
        return rc;
    }
    torxp_sim_notify(to, arrive);
    return TORX_OK;
}

int torxp_sim_net_room(torxp_sim_job_t *job, torxp_sim_task_t *t, double now)
{
    torxp_sim_net_t *n = *torxp_sim_job_net(job);
    int room = 0;
    for (unsigned i = 0; i < n->inject_cap; i++)
        room += t->inject[i] <= now;
    return room;
}

/* Walks a packet of wire seconds from `from` to `to`, reserving each link
 * as it goes (the file's comment), its head leaving no earlier than t.
 * Returns when it is fully received; *first: when it started on its first
 * link. With visit, a deposit packet: visit(arg, node, arrival) at each
 * node it passes before the last. */
static double route(torxp_sim_net_t *n, uint64_t *rng, torx_coord_t from, torx_coord_t to,
                    unsigned ctl, double t, double wire, double *first,
                    torx_status_t (*visit)(void *, torx_coord_t, double), void *arg,
                    torx_status_t *rc)
{
    torx_coord_t at = from;
    unsigned left[3];
    int dir[3], tie[3];
    for (int d = 0; d < 3; d++) {
        left[d] =
            way(n, *coord_field(&at, d), *coord_field(&to, d), extent(n, d), &dir[d], &tie[d]);
        if (tie[d] && (ctl & TORX_PKT_ADAPTIVE) && (torxp_chaos_next(rng) & 1))
            dir[d] = -1;
    }
    if (ctl & TORX_PKT_DEPOSIT) { /* along its line, the way it names */
        const int d = (int)((ctl & TORX_PKT_DEPOSIT_DIM_MASK) >> TORX_PKT_DEPOSIT_DIM_SHIFT);
        const unsigned len_d = extent(n, d);
        dir[d] = (ctl & TORX_PKT_DEPOSIT_NEG) ? -1 : 1;
        const unsigned a = *coord_field(&at, d), b = *coord_field(&to, d);
        left[d] = dir[d] > 0 ? (b + len_d - a) % len_d : (a + len_d - b) % len_d;
    }
    double head = t, *prev = NULL;
    unsigned hops = 0;
    *first = t;
    for (;;) {
        int d = -1;
        const unsigned node = node_index(n, at.x, at.y, at.z);
        if (ctl & TORX_PKT_ADAPTIVE) {
            /* the productive link free soonest; ties by the task's seed */
            double best = INFINITY;
            unsigned nbest = 0;
            for (int k = 0; k < 3; k++) {
                if (!left[k])
                    continue;
                const double f = n->link_free[node * 6 + 2 * k + (dir[k] < 0)];
                const double when = f > head ? f : head;
                if (when < best) {
                    best = when;
                    d = k;
                    nbest = 1;
                } else if (when == best && torxp_chaos_next(rng) % ++nbest == 0) {
                    d = k;
                }
            }
        } else {
            for (int k = 0; k < 3 && d < 0; k++)
                if (left[k])
                    d = k;
        }
        if (d < 0)
            break;
        double *link = &n->link_free[node * 6 + 2 * d + (dir[d] < 0)];
        const double start = *link > head ? *link : head;
        *link = start + wire;
        /* the router ahead holds ROUTER_BUFFER packets: a packet that waits
         * there longer keeps the link behind it busy (backpressure) */
        const double held = start - (ROUTER_BUFFER - 1) * wire;
        if (prev && held > *prev)
            *prev = held;
        prev = link;
        if (hops++ == 0)
            *first = start;
        head = start + n->hop_s;
        uint8_t *c = coord_field(&at, d);
        const unsigned len_d = extent(n, d);
        *c = (uint8_t)(dir[d] > 0 ? (*c + 1u) % len_d : (*c + len_d - 1u) % len_d);
        left[d]--;
        if (visit && (left[0] | left[1] | left[2])) {
            at.t = to.t;
            if ((*rc = visit(arg, at, head + wire)) != TORX_OK)
                return head + wire;
        }
    }
    return hops ? head + wire : t;
}

static double wire_s(const torxp_sim_net_t *n, unsigned chunks)
{
    return (chunks * TORX_PKT_CHUNK + n->link_overhead) * n->byte_s;
}

struct deposit_visit {
    torxp_sim_net_t *n;
    const torxp_sim_pkt_t *pkt;
};

static torx_status_t deposit_at(void *arg, torx_coord_t at, double arrive)
{
    struct deposit_visit *v = arg;
    torxp_sim_task_t *mid = v->n->task_of_slot[torx_coord_index(v->n->shape, at)];
    return mid ? deliver(v->n, mid, v->pkt, arrive) : TORX_OK;
}

torx_status_t torxp_sim_net_inject(torxp_sim_job_t *job, torxp_sim_task_t *t, double now,
                                   const torx_pkt_hdr_t *hdr, const struct iovec *iov, int iovcnt,
                                   size_t len)
{
    torxp_sim_net_t *n = *torxp_sim_job_net(job);
    unsigned slot_i = n->inject_cap;
    for (unsigned i = 0; i < n->inject_cap; i++)
        if (t->inject[i] <= now) {
            slot_i = i;
            break;
        }
    if (slot_i == n->inject_cap)
        return TORX_NO_ROOM;
    torxp_sim_task_t *to = n->task_of_slot[torx_coord_index(n->shape, hdr->dest)];
    if (!to && !(hdr->ctl & TORX_PKT_DEPOSIT))
        return torxp_error(TORX_ERR_INVAL, "torx: no task at destination (%u,%u,%u,%u)",
                           hdr->dest.x, hdr->dest.y, hdr->dest.z, hdr->dest.t);

    /* the packet as the receiver will see it */
    torxp_sim_pkt_t pkt;
    pkt.hdr = *hdr;
    pkt.hdr.payload_len = (uint8_t)len;
    pkt.hdr.chunks = (uint8_t)torx_pkt_chunks_for(len);
    pkt.hdr.dev_tag = 0;
    size_t off = 0;
    for (int i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len)
            memcpy(pkt.bytes + TORX_PKT_HDR_BYTES + off, iov[i].iov_base, iov[i].iov_len);
        off += iov[i].iov_len;
    }
    struct deposit_visit v = {n, &pkt};
    torx_status_t rc = TORX_OK;
    double first;
    const double arrive =
        route(n, &t->rng, t->coord, hdr->dest, hdr->ctl, now, wire_s(n, pkt.hdr.chunks), &first,
              (hdr->ctl & TORX_PKT_DEPOSIT) ? deposit_at : NULL, &v, &rc);
    if (rc != TORX_OK)
        return rc;
    t->inject[slot_i] = first;
    return to ? deliver(n, to, &pkt, arrive) : TORX_OK;
}

/* ---- bulk transfers by the DMA engine (bulk dma) ------------------------------- */

torx_status_t torxp_sim_bulk_start(torxp_sim_job_t *job, torxp_sim_task_t *t, double now, int get,
                                   torx_coord_t peer, const void *remote, void *local, size_t len,
                                   torxp_sim_xfer_t **out)
{
    torxp_sim_net_t *n = *torxp_sim_job_net(job);
    torxp_sim_task_t *p = torx_coord_in_shape(n->shape, peer)
                              ? n->task_of_slot[torx_coord_index(n->shape, peer)]
                              : NULL;
    if (!p)
        return torxp_error(TORX_ERR_INVAL, "torx: bulk transfer: no task at (%u,%u,%u,%u)", peer.x,
                           peer.y, peer.z, peer.t);
    torxp_sim_xfer_t *b = torxp_calloc(1, sizeof *b);
    if (!b)
        return torxp_error(TORX_ERR_NOMEM, "torx: sim: no memory for a bulk transfer");
    b->src = get ? peer : t->coord;
    b->dst = get ? t->coord : peer;
    b->src_rank = get ? p->rank : t->rank;
    b->dst_rank = get ? t->rank : p->rank;
    b->from = get ? remote : local;
    b->to = get ? local : (void *)remote;
    b->len = len;
    b->local = b->src.x == b->dst.x && b->src.y == b->dst.y && b->src.z == b->dst.z;
    double start = now + n->dma_startup;
    if (get && !b->local) { /* the request travels to the peer's engine first */
        double first;
        start = route(n, &t->rng, t->coord, peer, TORX_PKT_ADAPTIVE, start, wire_s(n, 1), &first,
                      NULL, NULL, NULL);
    }
    b->t_next = start;
    b->next = t->bulk;
    t->bulk = b;
    *out = b;
    return TORX_OK;
}

/* Reserves what the transfers of t may take by now. */
void torxp_sim_bulk_progress(torxp_sim_job_t *job, torxp_sim_task_t *t, double now)
{
    torxp_sim_net_t *n = *torxp_sim_job_net(job);
    for (torxp_sim_xfer_t *b = t->bulk; b; b = b->next) {
        while (b->reserved < b->len && b->t_next <= now) {
            const unsigned node = node_index(n, b->src.x, b->src.y, b->src.z);
            double *engine = &n->dma_free[node];
            if (b->local) {
                const double start = *engine > b->t_next ? *engine : b->t_next;
                *engine = start + (double)b->len * n->dma_local_byte_s;
                b->done_at = *engine;
                b->reserved = b->len;
                break;
            }
            double arrive = b->t_next, engine_at = b->t_next;
            for (int k = 0; k < BULK_WINDOW && b->reserved < b->len; k++) {
                const size_t piece = b->len - b->reserved < TORX_PKT_MAX_PAYLOAD
                                         ? b->len - b->reserved
                                         : TORX_PKT_MAX_PAYLOAD;
                const double wire = wire_s(n, torx_pkt_chunks_for(piece));
                engine_at = *engine > b->t_next ? *engine : b->t_next;
                *engine = engine_at + wire / n->byte_s * n->dma_byte_s;
                double first;
                const double a = route(n, &t->rng, b->src, b->dst, TORX_PKT_ADAPTIVE, engine_at,
                                       wire, &first, NULL, NULL, NULL);
                if (a > arrive)
                    arrive = a;
                b->reserved += piece;
            }
            b->t_next = *engine; /* the engine is free for the next window then */
            if (arrive > b->done_at)
                b->done_at = arrive;
        }
    }
}

/* When t next has something to do for its transfers: reserve a window or
 * see one done (+inf: none). */
double torxp_sim_bulk_next(const torxp_sim_task_t *t)
{
    double next = INFINITY;
    for (const torxp_sim_xfer_t *b = t->bulk; b; b = b->next) {
        const double when = b->reserved < b->len ? b->t_next : b->done_at;
        if (when < next)
            next = when;
    }
    return next;
}

/* TORX_OK (and b freed, its bytes copied) once done by now; TORX_AGAIN. */
torx_status_t torxp_sim_bulk_finish(torxp_sim_job_t *job, torxp_sim_task_t *t, torxp_sim_xfer_t *b,
                                    double now)
{
    if (b->reserved < b->len || b->done_at > now)
        return TORX_AGAIN;
    if (b->len)
        memcpy(torxp_sim_task_addr(job, b->dst_rank, b->to),
               torxp_sim_task_addr(job, b->src_rank, (void *)b->from), b->len);
    for (torxp_sim_xfer_t **pp = &t->bulk; *pp; pp = &(*pp)->next)
        if (*pp == b) {
            *pp = b->next;
            break;
        }
    free(b);
    return TORX_OK;
}

/* ---- the collective network ---------------------------------------------------- */

double torxp_sim_net_next_event(torxp_sim_job_t *job, torxp_sim_task_t *t)
{
    torxp_sim_net_t *n = *torxp_sim_job_net(job);
    double next = t->nrx ? t->rx[0]->arrive : INFINITY;
    const double bulk = torxp_sim_bulk_next(t);
    if (bulk < next)
        next = bulk;
    if (t->cn_read < t->cn_injected) {
        const cn_round_t *c = &n->cn[t->cn_read % CN_DEPTH];
        if (c->round == t->cn_read + 1 && c->count == n->ntasks && c->done_at < next)
            next = c->done_at;
    }
    if (t->gi_armed > t->gi_seen) {
        const gi_round_t *g = &n->gi[t->gi_armed & 1];
        if (g->round == t->gi_armed && g->count == n->ntasks && g->done_at < next)
            next = g->done_at;
    }
    return next;
}

static void notify_all(torxp_sim_net_t *n, double when)
{
    for (int r = 0; r < n->ntasks; r++)
        if (n->tasks[r].open)
            torxp_sim_notify(&n->tasks[r], when);
}

torx_status_t torxp_sim_cn_inject(torxp_sim_job_t *job, torxp_sim_task_t *t, double now,
                                  torx_cn_op_t op, torx_cn_type_t type, int is_root,
                                  const void *data)
{
    torxp_sim_net_t *n = *torxp_sim_job_net(job);
    const uint64_t r = t->cn_injected;
    cn_round_t *c = &n->cn[r % CN_DEPTH];
    if (c->round != r + 1) {
        if (c->round && c->readers < n->ntasks)
            return TORX_NO_ROOM; /* a reader is CN_DEPTH rounds behind */
        *c = (cn_round_t){.round = r + 1,
                          .op = (uint8_t)op,
                          .type = (uint8_t)type,
                          .bad_task = -1,
                          .root = -1,
                          .second_root = -1};
    }
    const int has_data = op != TORX_CN_BCAST || is_root;
    if (c->count == 0) {
        if (has_data && op != TORX_CN_BCAST)
            memcpy(c->acc, data, TORX_CN_PACKET_BYTES);
    } else if (c->op != op || c->type != type) {
        if (c->bad_task < 0) {
            c->bad_task = t->rank;
            c->bad_op = (uint8_t)op;
            c->bad_type = (uint8_t)type;
        }
    } else if (op != TORX_CN_BCAST) {
        torxp_cn_alu(op, type, c->acc, data);
    }
    if (op == TORX_CN_BCAST && is_root) {
        if (c->nroots == 0) {
            c->root = t->rank;
            memcpy(c->acc, data, TORX_CN_PACKET_BYTES);
        } else if (c->nroots == 1) {
            c->second_root = t->rank;
        }
        c->nroots++;
    }
    if (now > c->last_in)
        c->last_in = now;
    t->cn_injected = r + 1;
    if (++c->count == n->ntasks) {
        /* rounds pipeline: the tree takes a packet per wire time */
        const cn_round_t *prev = &n->cn[(r + CN_DEPTH - 1) % CN_DEPTH];
        c->enter = c->last_in;
        if (r && prev->round == r && prev->enter + n->cn_wire_s > c->enter)
            c->enter = prev->enter + n->cn_wire_s;
        c->done_at = c->enter + n->cn_latency + n->cn_wire_s;
        notify_all(n, c->done_at);
    }
    return TORX_OK;
}

torx_status_t torxp_sim_cn_read(torxp_sim_job_t *job, torxp_sim_task_t *t, double now, void *result)
{
    torxp_sim_net_t *n = *torxp_sim_job_net(job);
    const uint64_t r = t->cn_read;
    cn_round_t *c = &n->cn[r % CN_DEPTH];
    if (c->round != r + 1 || c->count < n->ntasks || now < c->done_at)
        return TORX_AGAIN;
    t->cn_read = r + 1;
    c->readers++;
    if (c->bad_task >= 0)
        return torxp_error(TORX_ERR_PROTO,
                           "torx: collective network round %llu: the first task injected %s/%s "
                           "but task %d injected %s/%s (every task must use the same op and "
                           "type in the same round)",
                           (unsigned long long)r, torxp_cn_op_name(c->op),
                           torxp_cn_type_name(c->type), c->bad_task, torxp_cn_op_name(c->bad_op),
                           torxp_cn_type_name(c->bad_type));
    if (c->op == TORX_CN_BCAST && c->nroots != 1)
        return c->nroots == 0
                   ? torxp_error(TORX_ERR_PROTO,
                                 "torx: collective network round %llu: BCAST/%s with no root "
                                 "(exactly one task must pass is_root)",
                                 (unsigned long long)r, torxp_cn_type_name(c->type))
                   : torxp_error(TORX_ERR_PROTO,
                                 "torx: collective network round %llu: BCAST/%s with %d roots, "
                                 "tasks %d and %d among them (exactly one task must pass "
                                 "is_root)",
                                 (unsigned long long)r, torxp_cn_type_name(c->type), c->nroots,
                                 c->root, c->second_root);
    memcpy(result, c->acc, TORX_CN_PACKET_BYTES);
    return TORX_OK;
}

/* ---- the global interrupt ------------------------------------------------------ */

torx_status_t torxp_sim_gi_arm(torxp_sim_job_t *job, torxp_sim_task_t *t, double now)
{
    torxp_sim_net_t *n = *torxp_sim_job_net(job);
    const uint64_t k = ++t->gi_armed;
    gi_round_t *g = &n->gi[k & 1];
    if (g->round != k)
        *g = (gi_round_t){.round = k};
    if (now > g->done_at)
        g->done_at = now; /* the latest arrival, until the last is in */
    if (++g->count == n->ntasks) {
        g->done_at += n->gi_latency;
        notify_all(n, g->done_at);
    }
    return TORX_OK;
}

torx_status_t torxp_sim_gi_poll(torxp_sim_job_t *job, torxp_sim_task_t *t, double now)
{
    torxp_sim_net_t *n = *torxp_sim_job_net(job);
    if (t->gi_seen == t->gi_armed)
        return TORX_OK;
    const gi_round_t *g = &n->gi[t->gi_armed & 1];
    if (g->round != t->gi_armed || g->count < n->ntasks || now < g->done_at)
        return TORX_AGAIN;
    t->gi_seen = t->gi_armed;
    return TORX_OK;
}

double torxp_sim_net_cn_round(torxp_sim_job_t *job)
{
    const torxp_sim_net_t *n = *torxp_sim_job_net(job);
    return n ? n->cn_latency + n->cn_wire_s : 0.0;
}
