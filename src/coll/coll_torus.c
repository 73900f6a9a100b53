/* Broadcast on the torus with the deposit bit: van de Geijn's pipelined
 * mesh broadcast on edge-disjoint routes, as Blue Gene/L's MPI planned it
 * for rectangular communicators (docs/collectives.md#torus-broadcast-routes).
 *
 * Geometry. A group qualifies when its tasks are exactly every task of a
 * box: a product of cyclic intervals of x, y and z (a whole ring, or a run
 * of adjacent nodes) and a set of t. A dimension the box spans whole is a
 * ring when the network has its wraparound links (torx_pkt_network), else a
 * run; on a mesh a run may not cross the torus's edge. Along a
 * dimension a node keeps four lines: to the box's end each way (a ring's
 * end is the node before it), and one hop each way.
 *
 * Routes. The buffer is cut into packets of TORXC_BC_PAYLOAD bytes, and
 * the packets into contiguous parts, one per route. The routes are
 * edge-disjoint spanning trees of line sends (coll_routes.c, which says
 * why): 2D on a box of D rings, D on a box with a run. Each task asks the
 * plan which lines it sends each route's packets on, and gets each route
 * from one sender. Every node forwards a packet as soon as it is in place:
 * the pipeline's depth is one packet. The root's parts take turns packet by
 * packet, so every route's first link is busy at once.
 *
 * Virtual-node mode. A line reaches the task of the sender's t on each
 * node. The root first hands each packet to its node-mates (one-packet
 * messages, through the node's memory); each of them is then the root of
 * its t-plane's broadcast.
 *
 * Coprocessor mode. The root's communication thread injects the odd parts
 * (torx_costart, with torx_line_send, which touches only the device) while
 * the task injects the even ones; an odd number of routes is split in two
 * first (two parts a route), so the root's injection, its whole share of a
 * broadcast, runs on two cores.
 *
 * Order and matching. A part's packets reach a task from one sender, in
 * the order sent (deposit packets are deterministic), so a task knows the
 * next offset of each route and refuses anything else as a protocol error.
 * Each packet names its group, the group's torus broadcast sequence number
 * and its offset. Packets for a broadcast this task has not entered yet
 * wait in a list (copied); on entry they are placed and forwarded.
 *
 * Flow control. Past TORXC_BC_READY_BYTES every member tells the root it
 * has entered (a one-packet message) and the root starts only when all
 * have, so early packets (and their memory) stay bounded by
 * TORXC_BC_READY_BYTES per broadcast that is ahead; below it the root is
 * free to run ahead, as eager point-to-point is.
 */
#include "coll_internal.h"

#include <stdlib.h>
#include <string.h>

/* A coll message header's first word says what it carries (the alltoall
 * block header puts its kind there, a torx_coll_kind_t below these). */
#define TORXC_MSG_BCAST 0x100u       /* a packet of a torus broadcast */
#define TORXC_MSG_BCAST_READY 0x101u /* a member entered a large broadcast */

typedef struct bc_hdr {
    uint32_t msg; /* TORXC_MSG_BCAST or _READY */
    uint32_t group_id;
    uint32_t seq;
    uint32_t off; /* byte offset of the packet's data */
} bc_hdr_t;

#define TORXC_BC_PAYLOAD (TORX_MSG_ONEPKT_MAX - sizeof(bc_hdr_t)) /* 224 */
/* Largest broadcast whose packets may come before their receiver is in it. */
#define TORXC_BC_READY_BYTES (64u * 1024u)
/* A broadcast's packets are counted in 32 bits on the wire. */
#define TORXC_BC_MAX_BYTES ((size_t)UINT32_MAX)

/* A packet that came before its broadcast. */
struct torxc_bc_early {
    struct torxc_bc_early *next;
    bc_hdr_t h;
    size_t len;
    unsigned char data[TORXC_BC_PAYLOAD];
};

/* Members that entered a large broadcast, counted at its root. */
struct torxc_bc_ready {
    struct torxc_bc_ready *next;
    uint32_t group_id, seq;
    int count;
};

static int is_bcast_msg(uint32_t msg)
{
    return msg == TORXC_MSG_BCAST || msg == TORXC_MSG_BCAST_READY;
}

/* ---- geometry ------------------------------------------------------------------ */

static unsigned coord_of(torx_coord_t c, int d)
{
    return d == TORX_DIM_X ? c.x : d == TORX_DIM_Y ? c.y : c.z;
}

static int same_node(torx_coord_t a, torx_coord_t b)
{
    return a.x == b.x && a.y == b.y && a.z == b.z;
}

torx_status_t torxc_torus_group_init(torx_coll_group_t *g)
{
    torx_coll_t *c = g->c;
    const torx_map_t *map = torx_ctx_map(c->ctx);
    const torx_shape_t s = torx_pkt_shape(c->dev);
    const unsigned ext[3] = {s.x, s.y, s.z};
    g->box = 0;
    /* the job in rank order: the map's table is the group's; else the
     * group table's (coll.c) */
    g->coord = g->tasks ? torxc_group_coord(g) : map->coord;
    unsigned char used[4][256];
    memset(used, 0, sizeof used);
    for (int i = 0; i < g->n; i++) {
        const torx_coord_t k = g->coord[i];
        used[0][k.x] = used[1][k.y] = used[2][k.z] = used[3][k.t] = 1;
    }
    unsigned cnt[4] = {0, 0, 0, 0};
    for (int d = 0; d < 4; d++)
        for (int v = 0; v < 256; v++)
            cnt[d] += used[d][v];
    /* n distinct tasks inside the product of the used coordinates, and as
     * many as it has: they are all of it. */
    if ((size_t)cnt[0] * cnt[1] * cnt[2] * cnt[3] != (size_t)g->n)
        return TORX_OK;
    const torx_coord_t me = g->coord[g->me];
    g->box_dims = 0;
    memset(&g->box_geo, 0, sizeof g->box_geo);
    memset(g->box_line_ok, 0, sizeof g->box_line_ok);
    for (int d = 0; d < 3; d++) {
        /* a whole ring only where the network has the wraparound link */
        const int ring = cnt[d] == ext[d] && (c->net.wrap >> d & 1u);
        unsigned lo = 0;
        if (!ring && !(c->net.wrap >> d & 1u)) { /* a mesh: a run from its first node */
            while (!used[d][lo])
                lo++;
            for (unsigned i = 0; i < cnt[d]; i++)
                if (lo + i >= ext[d] || !used[d][lo + i])
                    return TORX_OK; /* not one run */
        } else if (!ring) {         /* a run of a ring: it starts after an unused node */
            while (lo < ext[d] && !(used[d][lo] && !used[d][(lo + ext[d] - 1) % ext[d]]))
                lo++;
            for (unsigned i = 0; i < cnt[d]; i++)
                if (lo == ext[d] || !used[d][(lo + i) % ext[d]])
                    return TORX_OK; /* not one run */
        }
        if (cnt[d] == 1)
            continue;
        const int i = g->box_dims++;
        g->box_dim[i] = (uint8_t)d;
        g->box_lo[i] = (uint8_t)lo;
        g->box_geo.len[i] = cnt[d];
        g->box_geo.ring[i] = ring;
        const unsigned pos = (coord_of(me, d) + ext[d] - lo) % ext[d], len = cnt[d];
        g->box_pos[i] = pos;
        for (int w = 0; w < 2; w++) { /* + then - */
            const unsigned end = ring ? len - 1 : w == 0 ? len - 1 - pos : pos;
            g->box_end_hops[i][w] = end;
            for (int one = 0; one < 2; one++) {
                if (end == 0)
                    continue;
                const torx_status_t st =
                    torx_line_init(c->ctx, &g->box_line[i][w][one], d, w == 0 ? 1 : -1,
                                   one ? 1 : (int)end, c->handler, sizeof(bc_hdr_t));
                if (st != TORX_OK)
                    return st;
                g->box_line_ok[i][w][one] = 1;
            }
        }
    }
    g->box_geo.dims = g->box_dims;
    g->box = 1;
    return TORX_OK;
}

/* ---- receiving ------------------------------------------------------------------ */

/* Puts a packet of the running broadcast in place. */
static void place(torx_coll_t *c, const bc_hdr_t *h, const void *data, size_t len)
{
    torxc_bcast_t *b = &c->bc;
    if (b->status != TORX_OK)
        return;
    const size_t p = h->off / TORXC_BC_PAYLOAD;
    int k = 0;
    while (k < b->nparts && p >= b->hi[k])
        k++;
    const size_t want = b->bytes - h->off < TORXC_BC_PAYLOAD ? b->bytes - h->off : TORXC_BC_PAYLOAD;
    if (h->off % TORXC_BC_PAYLOAD || h->off >= b->bytes || k == b->nparts ||
        p != b->lo[k] + b->got[k] || len != want || b->received >= b->expect) {
        b->status = torxp_error(TORX_ERR_PROTO,
                                "torx: torus bcast: a packet at offset %u (%zu bytes) of a "
                                "broadcast of %zu bytes %s",
                                h->off, len, b->bytes,
                                h->off >= b->bytes || len != want
                                    ? "that does not fit: the members disagree on its size"
                                    : "out of its route's order");
        return;
    }
    memcpy(b->buf + h->off, data, len);
    if (b->received == 0)
        c->bc_first_s = torxp_now_s(c->dev);
    b->got[k]++;
    b->received++;
}

static void torus_handler(torx_coll_t *c, const torx_recv_info_t *info, torx_recv_t *recv)
{
    recv->buf = NULL; /* the data is here (info->data): consumed below */
    bc_hdr_t h;
    if (info->hdr_len != sizeof h || !info->data || info->data_len > TORXC_BC_PAYLOAD) {
        torxp_error(TORX_ERR_PROTO,
                    "torx: torus bcast: a message of %zu header and %zu data bytes from task %d",
                    info->hdr_len, info->data_len, info->src);
        c->bc_lost++;
        return;
    }
    memcpy(&h, info->hdr, sizeof h);
    if (h.msg == TORXC_MSG_BCAST_READY) {
        struct torxc_bc_ready *r = c->bc_ready;
        while (r && (r->group_id != h.group_id || r->seq != h.seq))
            r = r->next;
        if (r == NULL) {
            if ((r = calloc(1, sizeof *r)) == NULL) {
                c->bc_lost++;
                return;
            }
            r->group_id = h.group_id;
            r->seq = h.seq;
            r->next = c->bc_ready;
            c->bc_ready = r;
        }
        r->count++;
        return;
    }
    torxc_bcast_t *b = &c->bc;
    if (b->active && h.group_id == b->group_id && h.seq == b->seq) {
        place(c, &h, info->data, info->data_len);
        return;
    }
    struct torxc_bc_early *e = malloc(sizeof *e);
    if (e == NULL) {
        c->bc_lost++; /* the broadcast that needs it reports the loss */
        return;
    }
    e->next = NULL;
    e->h = h;
    e->len = info->data_len;
    memcpy(e->data, info->data, info->data_len);
    *c->bc_early_tail = e;
    c->bc_early_tail = &e->next;
}

/* Places the running broadcast's packets that came before it, oldest first. */
static void claim_early(torx_coll_t *c)
{
    torxc_bcast_t *b = &c->bc;
    struct torxc_bc_early **p = &c->bc_early;
    while (*p) {
        struct torxc_bc_early *e = *p;
        if (e->h.group_id != b->group_id || e->h.seq != b->seq) {
            p = &e->next;
            continue;
        }
        place(c, &e->h, e->data, e->len);
        *p = e->next;
        free(e);
    }
    c->bc_early_tail = p;
    while (*c->bc_early_tail)
        c->bc_early_tail = &(*c->bc_early_tail)->next;
}

/* Members that told the root they entered broadcast seq of group id; the
 * record is dropped once counted out. */
static int take_ready(torx_coll_t *c, uint32_t id, uint32_t seq, int want)
{
    for (struct torxc_bc_ready **p = &c->bc_ready; *p; p = &(*p)->next) {
        struct torxc_bc_ready *r = *p;
        if (r->group_id == id && r->seq == seq) {
            if (r->count < want)
                return 0;
            *p = r->next;
            free(r);
            return 1;
        }
    }
    return want == 0;
}

/* ---- sending ---------------------------------------------------------------------- */

/* What one sender (the task, or its communication thread) injects of some
 * parts of the message: each packet of a part along each of the lines of
 * its route (coll_routes.c). */
typedef struct bc_share {
    const torx_line_t *line[TORXC_BC_ROUTES][TORXC_ROUTE_LINES];
    int nlines[TORXC_BC_ROUTES];
    size_t next[TORXC_BC_ROUTES]; /* packets of the part sent on every line */
    int at[TORXC_BC_ROUTES];      /* lines the next packet went out on */
    unsigned parts;               /* bit per part of this share */
    const unsigned char *buf;
    size_t bytes;
    bc_hdr_t h;
    torx_status_t status;
    uint64_t sent;       /* line sends */
    torx_pkt_dev_t *dev; /* the clock */
    double out_s;        /* when its last packet went out (at the root) */
} bc_share_t;

/* One round over the share's parts: the next packet of each part that has
 * one in place (all of them at the root) goes out on every line. Parts
 * take turns packet by packet: a part's packets alone would fill the
 * injection FIFOs and wait on its route's first link while the other
 * routes' links idle. Returns the packets that went out on every line, or
 * <0 for an error. */
static int share_round(bc_share_t *s, const torxc_bcast_t *b, int root)
{
    int moved = 0;
    for (int k = 0; k < b->nparts; k++) {
        if (!(s->parts & 1u << k))
            continue;
        const size_t all = b->hi[k] - b->lo[k];
        if (s->next[k] >= (root ? all : b->got[k]))
            continue;
        const size_t off = (b->lo[k] + s->next[k]) * TORXC_BC_PAYLOAD;
        const size_t len = s->bytes - off < TORXC_BC_PAYLOAD ? s->bytes - off : TORXC_BC_PAYLOAD;
        s->h.off = (uint32_t)off;
        for (; s->at[k] < s->nlines[k]; s->at[k]++) {
            const torx_status_t st = torx_line_send(s->line[k][s->at[k]], &s->h, s->buf + off, len);
            if (st == TORX_AGAIN)
                break;
            if (st != TORX_OK)
                return st;
            s->sent++;
        }
        if (s->at[k] < s->nlines[k])
            continue; /* the network is full here: the next round goes on */
        s->at[k] = 0;
        s->next[k]++;
        moved++;
        if (root && s->next[k] == all)
            s->out_s = torxp_now_s(s->dev);
    }
    return moved;
}

static int share_done(const bc_share_t *s, const torxc_bcast_t *b)
{
    for (int k = 0; k < b->nparts; k++)
        if ((s->parts & 1u << k) && s->next[k] < b->hi[k] - b->lo[k])
            return 0;
    return 1;
}

/* The communication thread's part at the root, in co mode: its parts
 * whole, retrying while the network is full (no packet of a broadcast is
 * ever sent to its root, so the root's FIFOs, which the thread does not
 * read meanwhile, hold nothing the others wait for). */
typedef struct bc_unit {
    bc_share_t share;
    const torxc_bcast_t *b;
} bc_unit_t;

static void unit_run(void *arg)
{
    bc_unit_t *u = arg;
    double start = torxp_now_s(u->share.dev);
    while (!share_done(&u->share, u->b)) {
        const int rc = share_round(&u->share, u->b, 1);
        if (rc < 0) {
            u->share.status = (torx_status_t)rc;
            return;
        }
        if (rc > 0) {
            start = torxp_now_s(u->share.dev);
            continue;
        }
        /* 60 s without taking a packet: a member is gone or stuck */
        if (torxp_now_s(u->share.dev) - start > 60) {
            u->share.status = TORX_ERR_PEER;
            return;
        }
        torxp_yield(u->share.dev);
    }
}

/* ---- the broadcast ------------------------------------------------------------------ */

int torxc_torus_applies(const torx_coll_group_t *g, size_t bytes)
{
    return g->box && bytes <= TORXC_BC_MAX_BYTES;
}

int torxc_torus_routes(const torx_coll_group_t *g)
{
    return g->box_dims > 0 ? torxc_routes(&g->box_geo) : 1;
}

/* The node at torus coordinate c, as positions along the group's box
 * dimensions (0 past them). */
static void box_position(const torx_coll_group_t *g, torx_coord_t c, unsigned pos[3])
{
    const torx_shape_t s = torx_pkt_shape(g->c->dev);
    const unsigned ext[3] = {s.x, s.y, s.z};
    pos[0] = pos[1] = pos[2] = 0;
    for (int i = 0; i < g->box_dims; i++) {
        const int d = g->box_dim[i];
        pos[i] = (coord_of(c, d) + ext[d] - g->box_lo[i]) % ext[d];
    }
}

double torxc_torus_forwards(const torx_coll_group_t *g)
{
    if (g->box_dims <= 0)
        return 0.0;
    unsigned root[3];
    box_position(g, g->coord[0], root);
    return torxc_route_forwards(&g->box_geo, root);
}

/* Puts the lines of route's plan at this task into part k of sh. */
static torx_status_t share_lines(const torx_coll_group_t *g, bc_share_t *sh, int k,
                                 const unsigned root_pos[3], int route)
{
    torxc_route_node_t plan;
    torxc_route_plan(&g->box_geo, root_pos, g->box_pos, route, &plan);
    sh->parts |= 1u << k;
    for (int l = 0; l < plan.nlines; l++) {
        const torxc_bline_t *pl = &plan.line[l];
        const int w = pl->dir < 0;
        const int one = pl->hops == 1 && pl->hops != g->box_end_hops[pl->dim][w];
        if ((!one && pl->hops != g->box_end_hops[pl->dim][w]) || !g->box_line_ok[pl->dim][w][one])
            return torxp_error(TORX_ERR_PROTO,
                               "torx: torus bcast: route %d's plan sends %u hops along box "
                               "dimension %d, way %d, which this task has no line for",
                               route, pl->hops, pl->dim, pl->dir);
        sh->line[k][sh->nlines[k]++] = &g->box_line[pl->dim][w][one];
    }
    return TORX_OK;
}

torx_status_t torxc_torus_bcast(torx_coll_group_t *g, void *buf, size_t bytes, int root)
{
    torx_coll_t *c = g->c;
    torxc_bcast_t *b = &c->bc;
    if (c->bc_lost)
        return torxp_error(TORX_ERR_NOMEM,
                           "torx: torus bcast: %d packets were lost (no memory, or malformed)",
                           c->bc_lost);
    c->bc_first_s = c->bc_root_out_s = 0;
    if (bytes == 0 || g->n == 1)
        return TORX_OK;
    const uint32_t seq = ++g->bc_seq;
    const int me = g->me;
    const torx_coord_t rc = g->coord[root];
    const int D = g->box_dims;
    const int co = torx_mode(c->ctx) == TORX_MODE_CO && D > 0;
    const size_t npk = (bytes + TORXC_BC_PAYLOAD - 1) / TORXC_BC_PAYLOAD;
    /* co mode: an odd number of routes is split in two, so that the
     * thread's half of the parts is half of the root's injection */
    const int routes = torxc_routes(&g->box_geo);
    const int split = co && (routes & 1);

    *b = (torxc_bcast_t){.active = 0,
                         .group_id = g->id,
                         .seq = seq,
                         .buf = buf,
                         .bytes = bytes,
                         .nparts = routes * (split ? 2 : 1),
                         .expect = me == root ? 0 : npk,
                         .status = TORX_OK};
    for (int k = 0; k < b->nparts; k++) {
        b->lo[k] = npk * (size_t)k / (size_t)b->nparts;
        b->hi[k] = npk * (size_t)(k + 1) / (size_t)b->nparts;
    }

    unsigned root_pos[3];
    box_position(g, rc, root_pos);
    bc_share_t own = {.buf = buf,
                      .bytes = bytes,
                      .h = {.msg = TORXC_MSG_BCAST, .group_id = g->id, .seq = seq},
                      .status = TORX_OK,
                      .dev = c->dev};
    bc_unit_t *unit = NULL;
    if (co && me == root && (unit = calloc(1, sizeof *unit)) == NULL)
        return torxp_error(TORX_ERR_NOMEM, "torx: torus bcast: out of memory");
    if (unit) {
        unit->share = own;
        unit->b = b;
    }
    for (int k = 0; k < b->nparts; k++) {
        const torx_status_t st =
            share_lines(g, unit && (k & 1) ? &unit->share : &own, k, root_pos, split ? k / 2 : k);
        if (st != TORX_OK) {
            free(unit);
            return st;
        }
    }

    /* The root's node-mates, in vn mode: they get every packet from it. */
    int nmates = 0, *mates = NULL;
    if (me == root && torx_tasks_per_node(c->ctx) > 1) {
        for (int i = 0; i < g->n; i++)
            nmates += i != me && same_node(g->coord[i], rc);
        if (nmates && (mates = malloc((size_t)nmates * sizeof *mates)) == NULL) {
            free(unit);
            return torxp_error(TORX_ERR_NOMEM, "torx: torus bcast: out of memory");
        }
        nmates = 0;
        for (int i = 0; i < g->n; i++)
            if (i != me && same_node(g->coord[i], rc))
                mates[nmates++] = torxc_task(g, i);
    }

    torx_status_t err = TORX_OK;
    unsigned spins = 0, polls = 0;
    /* Large: the root waits until every member is in. */
    if (bytes > TORXC_BC_READY_BYTES) {
        if (me != root) {
            const bc_hdr_t r = {.msg = TORXC_MSG_BCAST_READY, .group_id = g->id, .seq = seq};
            torx_status_t st;
            while ((st = torx_send_inject(c->ctx, torxc_task(g, root), c->handler, &r, sizeof r,
                                          NULL, 0)) == TORX_AGAIN)
                torxc_progress(c, &spins);
            if (st != TORX_OK) {
                free(mates);
                return st;
            }
        } else {
            while (!take_ready(c, g->id, seq, g->n - 1)) {
                const int a = torx_advance(c->ctx);
                if (a < 0) {
                    free(mates);
                    free(unit);
                    return (torx_status_t)a;
                }
                torxc_poll_wait(c, &polls, &spins);
            }
        }
    }

    b->active = 1;
    claim_early(c);
    int handle = 0;
    if (unit && (err = torx_costart(c->ctx, unit_run, unit, &handle)) != TORX_OK)
        handle = 0;
    size_t local_p = 0; /* packets handed to every node-mate */
    int local_m = 0;    /* node-mates that have packet local_p */
    while (err == TORX_OK) {
        int r;
        while ((r = share_round(&own, b, me == root)) > 0)
            ;
        if (r < 0)
            err = (torx_status_t)r;
        while (err == TORX_OK && local_p < npk) {
            const size_t off = local_p * TORXC_BC_PAYLOAD;
            const size_t len = bytes - off < TORXC_BC_PAYLOAD ? bytes - off : TORXC_BC_PAYLOAD;
            own.h.off = (uint32_t)off;
            if (local_m < nmates) {
                const torx_status_t st =
                    torx_send_inject(c->ctx, mates[local_m], c->handler, &own.h, sizeof own.h,
                                     (unsigned char *)buf + off, len);
                if (st == TORX_AGAIN)
                    break;
                if (st != TORX_OK)
                    err = st;
                local_m++;
            } else {
                local_m = 0;
                local_p++;
            }
        }
        const int done =
            b->received == b->expect && share_done(&own, b) && (local_p == npk || nmates == 0);
        if (done || err != TORX_OK || (err = b->status) != TORX_OK)
            break;
        const int a = torx_advance(c->ctx);
        if (a < 0)
            err = (torx_status_t)a;
        else
            torxc_poll_wait(c, &polls, &spins);
    }
    if (handle) {
        const torx_status_t st = torx_cojoin(c->ctx, handle);
        if (err == TORX_OK)
            err = st != TORX_OK ? st : unit->share.status;
        if (unit->share.status == TORX_ERR_PEER && err == TORX_ERR_PEER)
            err = torxp_error(TORX_ERR_PEER,
                              "torx: torus bcast: the network took no packet from the root "
                              "for 60 s: a member is gone or stuck");
    }
    b->active = 0;
    c->bc_sent_task += own.sent;
    if (me == root)
        c->bc_root_out_s = unit && unit->share.out_s > own.out_s ? unit->share.out_s : own.out_s;
    if (unit)
        c->bc_sent_thread += unit->share.sent;
    free(unit);
    free(mates);
    return err;
}

void torxc_torus_finalize(torx_coll_t *c)
{
    while (c->bc_early) {
        struct torxc_bc_early *e = c->bc_early;
        c->bc_early = e->next;
        free(e);
    }
    c->bc_early_tail = &c->bc_early;
    while (c->bc_ready) {
        struct torxc_bc_ready *r = c->bc_ready;
        c->bc_ready = r->next;
        free(r);
    }
}

/* ---- the coll handler ---------------------------------------------------------------- */

void torxc_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info, torx_recv_t *recv)
{
    uint32_t msg = 0;
    if (info->hdr_len >= sizeof msg)
        memcpy(&msg, info->hdr, sizeof msg);
    if (is_bcast_msg(msg))
        torus_handler(harg, info, recv);
    else
        torxc_a2a_handler(ctx, harg, info, recv);
}
