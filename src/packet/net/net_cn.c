/* The collective network and global interrupt of the network devices,
 * emulated in software over their device-internal messages.
 *
 * Tree. A binomial tree over the job's ranks, rooted at rank 0: the parent
 * of rank v > 0 is v with its lowest set bit cleared, and v's subtree is the
 * ranks v .. v + lowbit(v) - 1 (all ranks for 0). Its depth is
 * ceil(log2(ntasks)) and every task sends one message up and forwards one
 * down per round, so a round costs 2 log2(n) message latencies and no task
 * handles more than log2(n) + 1 messages.
 *
 * Collective network. A round goes up the tree (CN_UP): a task waits for its
 * own contribution and each child's, combines them and sends one packet to
 * its parent; rank 0 combines the last and sends the result down (CN_DOWN),
 * each task keeping a copy and forwarding it to its children. The ALU's
 * integer operations are associative and commutative (ADD wraps as
 * two's-complement arithmetic on unsigned lanes), so combining along the
 * tree gives the very bits the shm device's rank-order combine gives, and
 * the reproducible double sum (fpsum.c), which runs on these integer
 * lanes, is bitwise identical on both devices.
 *
 * Disagreement. Each upward packet also carries what the error report
 * needs: its subtree's op and type (those of its lowest rank), the lowest
 * rank that injected another op or type, and the number of BCAST roots with
 * the first two of them. Rank 0 then finds exactly the error the shm device
 * reports for the round, and the result packet carries it down, so every
 * task reports the same error for the same round and the pipeline stays in
 * step.
 *
 * Pipelining. Up to TORXP_NET_CN_DEPTH rounds per task are injected and not
 * yet read; a task further ahead gets TORX_NO_ROOM. Round r's upward state
 * and its result each live in slot r % DEPTH: a child can send round r + DEPTH
 * only after it read round r, whose result passed through this task after
 * this task had sent round r up, so the upward slot is free; and this task
 * is sent round r + DEPTH's result only after it injected that round, which
 * needed it to have read round r, so the result slot is free.
 *
 * Global interrupt. The same tree: a task whose children have all entered
 * round k, and which has itself, sends GI_UP(k) to its parent; rank 0 then
 * sends GI_DOWN(k) down the tree, and a task's round is complete when
 * GI_DOWN(k) reaches it. Of two tasks, the two words cross instead: each
 * is sent as its task arms (gi_advance). Messages between two tasks keep their order and
 * what a task sent before arming leaves before its GI_UP, so its work is
 * visible to every task that leaves the round, as the barrier promises.
 *
 * Channels. Each of the TORX_CN_CHANNELS (TORX_GI_CHANNELS) channels is
 * an independent sequence of rounds over the same tree and connections: its
 * own round counters, pipeline, slots and barrier rounds, everything above
 * per channel. Every CN_UP/CN_DOWN/GI_UP/GI_DOWN names its channel (h.chan)
 * and touches that channel's state only, so the arguments above hold
 * channel by channel, and a channel's rounds pair up among themselves
 * whatever order each task interleaves the channels in. That is what they
 * are for: callers that cannot agree on one order of rounds across
 * channels (nonblocking collectives of different communicators) take one
 * channel each. The upward slots keep one packet per child, not
 * CN_MAX_CHILDREN, so every channel costs little memory.
 *
 * Dead peers. While a round waits, every PING_EVERY_S this task probes its
 * tree neighbours (the device's ping op); a probe the library cannot deliver
 * fails the device with the peer's rank, so a vanished task ends the wait
 * with an error instead of a hang. */
#include "net.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define TORXP_NET_CN_DEPTH 4u
#define CN_NONE UINT32_MAX
#define CN_MAX_CHILDREN 32
#define PING_EVERY_S 0.5

/* What a subtree's packet says besides its data. */
typedef struct cn_meta {
    uint8_t op, type;         /* of the subtree's lowest rank */
    uint8_t mis_op, mis_type; /* what rank mis injected */
    uint32_t mis;             /* lowest rank whose op or type differs; CN_NONE */
    uint32_t nroots;          /* BCAST: tasks that passed is_root */
    uint32_t root, root2;     /* the first two of them in rank order; CN_NONE */
} cn_meta_t;

typedef struct cn_msg {
    torxp_net_sys_t h; /* chan = the channel; round = the round; arg = status (CN_DOWN) */
    cn_meta_t m;
    unsigned char data[TORX_CN_PACKET_BYTES];
} cn_msg_t;
static_assert(sizeof(cn_msg_t) <= TORXP_NET_SYS_MAX, "a cn packet fits a device message");

typedef struct gi_msg {
    torxp_net_sys_t h; /* chan = the channel; round = the barrier round */
} gi_msg_t;

/* One collective-network channel: its rounds, pipeline and slots. */
struct cn_chan {
    uint64_t injected, read, up_next;
    struct cn_up {
        uint64_t round; /* the round the slot holds, when own or got */
        int own;
        uint32_t got; /* bit i: child i's packet is in */
        /* nchild + 1 packets in torxp_net_cn's storage: [0] own, [1 + i] child i */
        cn_meta_t *m;
        unsigned char (*data)[TORX_CN_PACKET_BYTES];
    } up[TORXP_NET_CN_DEPTH];
    struct cn_res {
        uint64_t round;
        int ready;
        cn_msg_t msg;
    } res[TORXP_NET_CN_DEPTH];
};

/* One global-interrupt channel: its barrier rounds. */
struct gi_chan {
    uint64_t armed, complete, released, sent_up;
    uint64_t child_armed[CN_MAX_CHILDREN];
};

struct torxp_net_cn {
    int pair;        /* two tasks: the barrier is an exchange (gi_advance) */
    int parent;      /* rank, -1 at the root */
    unsigned nchild; /* children, in rank order */
    unsigned child[CN_MAX_CHILDREN];
    struct cn_chan cn[TORX_CN_CHANNELS];
    struct gi_chan gi[TORX_GI_CHANNELS];
    double last_ping; /* the device's neighbours, whichever channel waits */
    /* the upward slots' packets, nchild + 1 per slot of each channel */
    cn_meta_t *up_m;
    unsigned char (*up_data)[TORX_CN_PACKET_BYTES];
};

/* ---- tree ------------------------------------------------------------------ */

static unsigned slot_of(const torxp_net_t *d, int rank)
{
    return d->rank_slot[rank];
}

/* " channel N" in the device's own messages for a channel other than 0, so
 * channel 0's read as they did before there were channels. (A round's
 * error does not name it: it stays the very message the shm device
 * gives.) */
static const char *chan_label(unsigned ch, char buf[24])
{
    if (ch == 0)
        return "";
    snprintf(buf, 24, " channel %u", ch);
    return buf;
}

/* A round of channel ch waits (cn: collective network, else barrier). */
static void ping_neighbours(torxp_net_t *d, int cn, unsigned ch)
{
    torxp_net_cn_t *c = d->cn;
    const double now = torxp_mono_s();
    if (now - c->last_ping < PING_EVERY_S)
        return;
    c->last_ping = now;
    if (cn) {
        const struct cn_chan *k = &c->cn[ch];
        torxp_log(&d->base, 3,
                  "cn wait (channel %u): injected %llu read %llu up_next %llu; up own %d%d%d%d "
                  "got %x %x %x %x; res %d%d%d%d",
                  ch, (unsigned long long)k->injected, (unsigned long long)k->read,
                  (unsigned long long)k->up_next, k->up[0].own, k->up[1].own, k->up[2].own,
                  k->up[3].own, k->up[0].got, k->up[1].got, k->up[2].got, k->up[3].got,
                  k->res[0].ready, k->res[1].ready, k->res[2].ready, k->res[3].ready);
    } else {
        const struct gi_chan *g = &c->gi[ch];
        torxp_log(&d->base, 3, "gi wait (channel %u): armed %llu released %llu sent up %llu", ch,
                  (unsigned long long)g->armed, (unsigned long long)g->released,
                  (unsigned long long)g->sent_up);
    }
    if (c->parent >= 0)
        d->net_ops->ping(d, slot_of(d, c->parent));
    for (unsigned i = 0; i < c->nchild; i++)
        d->net_ops->ping(d, slot_of(d, (int)c->child[i]));
}

torx_status_t torxp_net_cn_setup(torxp_net_t *d)
{
    torxp_net_cn_t *c = torxp_calloc(1, sizeof *c);
    if (!c)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for the collective network");
    const unsigned v = (unsigned)d->base.rank, n = (unsigned)d->base.size;
    c->pair = d->base.size == 2;
    c->parent = v ? (int)(v & (v - 1)) : -1;
    const unsigned low = v ? (v & -v) : 0;
    for (unsigned bit = 1; (v == 0 || bit < low) && v + bit < n && bit; bit <<= 1)
        c->child[c->nchild++] = v + bit;
    const size_t per_slot = c->nchild + 1u;
    const size_t npkt = (size_t)TORX_CN_CHANNELS * TORXP_NET_CN_DEPTH * per_slot;
    c->up_m = torxp_calloc(npkt, sizeof *c->up_m);
    c->up_data = torxp_calloc(npkt, sizeof *c->up_data);
    if (!c->up_m || !c->up_data) {
        free(c->up_m);
        free(c->up_data);
        free(c);
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for the collective network");
    }
    for (unsigned ch = 0; ch < TORX_CN_CHANNELS; ch++)
        for (unsigned s = 0; s < TORXP_NET_CN_DEPTH; s++) {
            const size_t at = ((size_t)ch * TORXP_NET_CN_DEPTH + s) * per_slot;
            c->cn[ch].up[s].m = c->up_m + at;
            c->cn[ch].up[s].data = c->up_data + at;
        }
    c->last_ping = torxp_mono_s();
    d->cn = c;
    return TORX_OK;
}

void torxp_net_cn_fini(torxp_net_t *d)
{
    if (d->cn) {
        free(d->cn->up_m);
        free(d->cn->up_data);
    }
    free(d->cn);
    d->cn = NULL;
}

/* Combines slot u (own packet and every child's, children in rank order)
 * into out. */
static void combine(const torxp_net_t *d, const struct cn_up *u, cn_msg_t *out)
{
    const torxp_net_cn_t *c = d->cn;
    cn_meta_t m = u->m[0];
    memcpy(out->data, u->data[0], TORX_CN_PACKET_BYTES);
    for (unsigned i = 0; i < c->nchild; i++) {
        const cn_meta_t *cm = &u->m[1 + i];
        const int same = cm->op == m.op && cm->type == m.type;
        uint32_t cand = cm->mis;
        uint8_t cop = cm->mis_op, ctype = cm->mis_type;
        if (!same) {
            cand = c->child[i];
            cop = cm->op;
            ctype = cm->type;
        }
        if (cand < m.mis) {
            m.mis = cand;
            m.mis_op = cop;
            m.mis_type = ctype;
        }
        if (m.op == TORX_CN_BCAST) {
            /* Children come in rank order and hold higher ranks than this
             * task: the first subtree with a root holds the lowest one. */
            if (cm->nroots && m.nroots == 0)
                memcpy(out->data, u->data[1 + i], TORX_CN_PACKET_BYTES);
            const uint32_t r[4] = {m.root, m.root2, cm->root, cm->root2};
            uint32_t a = CN_NONE, b = CN_NONE;
            for (int k = 0; k < 4; k++) {
                if (r[k] < a) {
                    b = a;
                    a = r[k];
                } else if (r[k] < b && r[k] != a) {
                    b = r[k];
                }
            }
            m.root = a;
            m.root2 = b;
            m.nroots += cm->nroots;
        } else if (same) {
            torxp_cn_alu(m.op, m.type, out->data, u->data[1 + i]);
        }
    }
    out->m = m;
}

/* The status of a round that reached rank 0 with meta m, as the shm device
 * reports it. */
static torx_status_t round_status(const cn_meta_t *m)
{
    if (m->mis != CN_NONE || (m->op == TORX_CN_BCAST && m->nroots != 1))
        return TORX_ERR_PROTO;
    return TORX_OK;
}

static torx_status_t round_error(const cn_msg_t *msg)
{
    const cn_meta_t *m = &msg->m;
    const unsigned long long r = (unsigned long long)msg->h.round;
    if (m->mis != CN_NONE)
        return torxp_error(TORX_ERR_PROTO,
                           "torx: collective network round %llu: task 0 injected %s/%s but "
                           "task %u injected %s/%s (every task must use the same op and "
                           "type in the same round)",
                           r, torxp_cn_op_name(m->op), torxp_cn_type_name(m->type), m->mis,
                           torxp_cn_op_name(m->mis_op), torxp_cn_type_name(m->mis_type));
    if (m->nroots == 0)
        return torxp_error(TORX_ERR_PROTO,
                           "torx: collective network round %llu: BCAST/%s with no root "
                           "(exactly one task must pass is_root)",
                           r, torxp_cn_type_name(m->type));
    return torxp_error(TORX_ERR_PROTO,
                       "torx: collective network round %llu: BCAST/%s with %u roots, "
                       "tasks %u and %u among them (exactly one task must pass is_root)",
                       r, torxp_cn_type_name(m->type), m->nroots, m->root, m->root2);
}

/* Keeps a round's result in its channel and passes it down. */
static void deliver_down(torxp_net_t *d, const cn_msg_t *msg)
{
    torxp_net_cn_t *c = d->cn;
    struct cn_res *res = &c->cn[msg->h.chan].res[msg->h.round % TORXP_NET_CN_DEPTH];
    res->round = msg->h.round;
    res->ready = 1;
    res->msg = *msg;
    for (unsigned i = 0; i < c->nchild; i++)
        d->net_ops->sys_send(d, slot_of(d, (int)c->child[i]), msg, sizeof *msg);
}

/* Sends up (or, at the root, down) every round of channel ch whose packets
 * are all in. */
static void cn_advance(torxp_net_t *d, unsigned ch)
{
    torxp_net_cn_t *c = d->cn;
    struct cn_chan *k = &c->cn[ch];
    const uint32_t all = c->nchild ? (uint32_t)((1ULL << c->nchild) - 1) : 0;
    for (;;) {
        struct cn_up *u = &k->up[k->up_next % TORXP_NET_CN_DEPTH];
        if (!u->own || u->got != all || u->round != k->up_next)
            return;
        cn_msg_t out = {
            .h = {.version = TORXP_NET_WIRE_VERSION, .chan = (uint16_t)ch, .round = k->up_next}};
        combine(d, u, &out);
        u->own = 0;
        u->got = 0;
        k->up_next++;
        if (c->parent >= 0) {
            out.h.type = TORXP_NET_SYS_CN_UP;
            d->net_ops->sys_send(d, slot_of(d, c->parent), &out, sizeof out);
        } else {
            out.h.type = TORXP_NET_SYS_CN_DOWN;
            out.h.arg = (uint32_t)round_status(&out.m);
            deliver_down(d, &out);
        }
    }
}

/* The upward slot for round r of channel k, claimed for it; NULL when it
 * holds another round (a protocol error). */
static struct cn_up *up_slot(struct cn_chan *k, uint64_t r)
{
    struct cn_up *u = &k->up[r % TORXP_NET_CN_DEPTH];
    if (u->own || u->got)
        return u->round == r ? u : NULL;
    u->round = r;
    return u;
}

static void __attribute__((cold))
bad_msg(torxp_net_t *d, unsigned src, const char *why, const torxp_net_sys_t *m)
{
    char buf[24];
    d->base.malformed++;
    torxp_error(TORX_ERR_PROTO,
                "torx: protocol error: collective message (type %u,%s round %llu) from slot %u: "
                "%s; dropped",
                m->type, chan_label(m->chan, buf), (unsigned long long)m->round, src, why);
    torxp_log(&d->base, 0, "%s", torx_last_error() + sizeof "torx: " - 1);
}

static void gi_advance(torxp_net_t *d, unsigned ch);

void torxp_net_cn_on_sys(torxp_net_t *d, unsigned src, const torxp_net_sys_t *m, size_t len)
{
    torxp_net_cn_t *c = d->cn;
    const int from = d->slot_rank[src];
    int child = -1;
    for (unsigned i = 0; i < c->nchild; i++)
        if ((int)c->child[i] == from)
            child = (int)i;
    const int up = m->type == TORXP_NET_SYS_CN_UP || m->type == TORXP_NET_SYS_GI_UP;
    const int is_cn = m->type == TORXP_NET_SYS_CN_UP || m->type == TORXP_NET_SYS_CN_DOWN;
    if (up ? child < 0 : from != c->parent || c->parent < 0)
        return bad_msg(d, src, up ? "not a child of this task" : "not this task's parent", m);
    if (len != (is_cn ? sizeof(cn_msg_t) : sizeof(gi_msg_t)))
        return bad_msg(d, src, "wrong length", m);
    const unsigned ch = m->chan;
    if (ch >= (is_cn ? TORX_CN_CHANNELS : TORX_GI_CHANNELS))
        return bad_msg(d, src, "no such channel", m);

    switch (m->type) {
    case TORXP_NET_SYS_CN_UP: {
        const cn_msg_t *msg = (const cn_msg_t *)m;
        struct cn_chan *k = &c->cn[ch];
        struct cn_up *u =
            msg->h.round >= k->up_next && msg->h.round < k->up_next + TORXP_NET_CN_DEPTH
                ? up_slot(k, msg->h.round)
                : NULL;
        if (!u || (u->got & (1u << child)))
            return bad_msg(d, src, "round out of the pipeline or sent twice", m);
        u->m[1 + child] = msg->m;
        memcpy(u->data[1 + child], msg->data, TORX_CN_PACKET_BYTES);
        u->got |= 1u << child;
        cn_advance(d, ch);
        break;
    }
    case TORXP_NET_SYS_CN_DOWN: {
        const cn_msg_t *msg = (const cn_msg_t *)m;
        const struct cn_chan *k = &c->cn[ch];
        const struct cn_res *res = &k->res[msg->h.round % TORXP_NET_CN_DEPTH];
        if (msg->h.round < k->read || msg->h.round >= k->injected || res->ready)
            return bad_msg(d, src, "result of a round this task has no room for", m);
        deliver_down(d, msg);
        break;
    }
    case TORXP_NET_SYS_GI_UP: {
        struct gi_chan *g = &c->gi[ch];
        if (m->round != g->child_armed[child] + 1)
            return bad_msg(d, src, "barrier round out of order", m);
        g->child_armed[child] = m->round;
        gi_advance(d, ch);
        break;
    }
    case TORXP_NET_SYS_GI_DOWN: {
        struct gi_chan *g = &c->gi[ch];
        /* of two tasks, the other's word may come before this one arms */
        if (m->round != g->released + 1 || (!c->pair && m->round > g->armed))
            return bad_msg(d, src, "barrier release out of order", m);
        g->released = m->round;
        for (unsigned i = 0; i < c->nchild; i++)
            d->net_ops->sys_send(d, slot_of(d, (int)c->child[i]), m, sizeof(gi_msg_t));
        break;
    }
    }
}

/* ---- collective network ---------------------------------------------------------- */

torx_status_t torxp_net_cn_inject(torx_pkt_dev_t *dev, unsigned ch, torx_cn_op_t op,
                                  torx_cn_type_t type, int is_root, const void *data)
{
    torxp_net_t *d = torxp_net_of(dev);
    const torx_status_t bad = torxp_cn_inject_check(op, type, is_root, data);
    if (TORXP_UNLIKELY(bad != TORX_OK))
        return bad;
    const int root = op == TORX_CN_BCAST && is_root;
    const int has_data = op != TORX_CN_BCAST || root;

    torxp_net_lock(d);
    struct cn_chan *k = &d->cn->cn[ch];
    torx_status_t rc = dev->failed;
    if (rc != TORX_OK)
        goto out;
    const uint64_t r = k->injected;
    if (r >= k->read + TORXP_NET_CN_DEPTH) {
        rc = TORX_NO_ROOM; /* as many rounds ahead of our reads as the pipeline holds */
        goto out;
    }
    struct cn_up *u = up_slot(k, r);
    if (!u) { /* cannot happen: the pipeline argument at the top */
        char buf[24];
        rc = torxp_dev_fail(&d->base, TORX_ERR_PROTO,
                            "collective network%s slot of round %llu is busy", chan_label(ch, buf),
                            (unsigned long long)r);
        goto out;
    }
    const unsigned me = (unsigned)dev->rank;
    u->m[0] = (cn_meta_t){.op = (uint8_t)op,
                          .type = (uint8_t)type,
                          .mis = CN_NONE,
                          .nroots = (uint32_t)root,
                          .root = root ? me : CN_NONE,
                          .root2 = CN_NONE};
    if (has_data)
        memcpy(u->data[0], data, TORX_CN_PACKET_BYTES);
    else
        memset(u->data[0], 0, TORX_CN_PACKET_BYTES);
    u->own = 1;
    k->injected = r + 1;
    cn_advance(d, ch);
    d->net_ops->progress(d);
out:
    torxp_net_unlock(d);
    return rc;
}

torx_status_t torxp_net_cn_read(torx_pkt_dev_t *dev, unsigned ch, void *result)
{
    torxp_net_t *d = torxp_net_of(dev);
    torxp_net_lock(d);
    struct cn_chan *k = &d->cn->cn[ch];
    const uint64_t r = k->read;
    torx_status_t rc = torxp_cn_read_check(dev, r, k->injected, result);
    if (TORXP_UNLIKELY(rc != TORX_OK))
        goto out;
    struct cn_res *res = &k->res[r % TORXP_NET_CN_DEPTH];
    if (!res->ready || res->round != r)
        d->net_ops->progress(d);
    if (!res->ready || res->round != r) {
        rc = dev->failed != TORX_OK ? dev->failed : TORX_AGAIN;
        if (rc == TORX_AGAIN)
            ping_neighbours(d, 1, ch);
        goto out;
    }
    memcpy(result, res->msg.data, TORX_CN_PACKET_BYTES);
    rc = res->msg.h.arg == TORX_OK ? TORX_OK : round_error(&res->msg);
    res->ready = 0;
    k->read = r + 1;
out:
    torxp_net_unlock(d);
    return rc;
}

/* ---- global interrupt ---------------------------------------------------------------- */

static void gi_advance(torxp_net_t *d, unsigned ch)
{
    torxp_net_cn_t *c = d->cn;
    struct gi_chan *g = &c->gi[ch];
    const uint64_t k = g->armed;
    if (c->pair) {
        /* Two tasks: each tells the other it entered round k as it arms,
         * and leaves when the other's word came, one message time where
         * the tree's up and down take two. Rank 0's word is its GI_DOWN,
         * which rank 1 may take before it arms; rank 0 leaves at rank 1's
         * GI_UP. Each word follows what its task sent before arming. */
        if (g->sent_up < k) {
            g->sent_up = k;
            const gi_msg_t out = {
                .h = {.version = TORXP_NET_WIRE_VERSION,
                      .type = c->parent >= 0 ? TORXP_NET_SYS_GI_UP : TORXP_NET_SYS_GI_DOWN,
                      .chan = (uint16_t)ch,
                      .round = k}};
            d->net_ops->sys_send(d, slot_of(d, c->parent >= 0 ? c->parent : (int)c->child[0]), &out,
                                 sizeof out);
        }
        if (c->parent < 0 && g->child_armed[0] >= k)
            g->released = k;
        return;
    }
    if (g->sent_up >= k)
        return;
    for (unsigned i = 0; i < c->nchild; i++)
        if (g->child_armed[i] < k)
            return;
    g->sent_up = k;
    gi_msg_t out = {.h = {.version = TORXP_NET_WIRE_VERSION, .chan = (uint16_t)ch, .round = k}};
    if (c->parent >= 0) {
        out.h.type = TORXP_NET_SYS_GI_UP;
        d->net_ops->sys_send(d, slot_of(d, c->parent), &out, sizeof out);
    } else {
        g->released = k;
        out.h.type = TORXP_NET_SYS_GI_DOWN;
        for (unsigned i = 0; i < c->nchild; i++)
            d->net_ops->sys_send(d, slot_of(d, (int)c->child[i]), &out, sizeof out);
    }
}

torx_status_t torxp_net_gi_arm(torx_pkt_dev_t *dev, unsigned ch)
{
    torxp_net_t *d = torxp_net_of(dev);
    torxp_net_lock(d);
    struct gi_chan *g = &d->cn->gi[ch];
    const uint64_t k = g->armed;
    const torx_status_t rc = torxp_gi_arm_check(dev, k, g->complete);
    if (TORXP_LIKELY(rc == TORX_OK)) {
        g->armed = k + 1;
        gi_advance(d, ch);
        d->net_ops->progress(d);
    }
    torxp_net_unlock(d);
    return rc;
}

torx_status_t torxp_net_gi_poll(torx_pkt_dev_t *dev, unsigned ch)
{
    torxp_net_t *d = torxp_net_of(dev);
    torxp_net_lock(d);
    struct gi_chan *g = &d->cn->gi[ch];
    const uint64_t k = g->armed;
    torx_status_t rc = torxp_gi_poll_check(dev, k);
    if (TORXP_LIKELY(rc == TORX_OK) && g->complete != k) {
        if (g->released < k)
            d->net_ops->progress(d);
        if (g->released >= k) {
            g->complete = k;
        } else {
            rc = dev->failed != TORX_OK ? dev->failed : TORX_AGAIN;
            if (rc == TORX_AGAIN)
                ping_neighbours(d, 0, ch);
        }
    }
    torxp_net_unlock(d);
    return rc;
}
