/* Paced alltoall(v): the message layer carries every block straight from
 * the send buffer to its place in the receive buffer, with no per-peer
 * request objects and no MPI matching.
 *
 * Order. At step k (1..n-1) every member sends to (me + perm[k]) mod n,
 * where perm is a permutation of 1..n-1 drawn from the collective's
 * sequence number, the same on every member: at each step the
 * destinations form a permutation, so every task receives from exactly
 * one sender and no reception FIFO is the hot spot, while the random step
 * order keeps consecutive alltoalls from loading the same links in the
 * same order. On a torus (the device describes one) a shift moves every
 * node by the same vector at once: a step that crosses the middle of a
 * dimension sends all of a line's traffic over its middle links, the
 * next none. There each member draws its own order, so that at every
 * moment the destinations are spread over the machine, and the blocks go
 * as adaptive packets, which take any free productive link (the
 * original's randomised, adaptive alltoall; docs/collectives.md#the-paced-alltoall).
 *
 * Pacing. At most TORXC_A2A_WINDOW sends are in flight; the next one is
 * started when one completes, so a task streams its send buffer instead of
 * queueing n messages in the message layer at once.
 *
 * Receiving. A block is a message to the coll handler whose header names
 * the group (its id), the collective's sequence number and the sender's
 * index. When this task is in that very collective the data goes straight
 * to its place; otherwise (a faster member is already in the next one) it
 * waits in the unexpected list: copied into a bounce buffer when its data
 * is on its way (packets, staged), or left at the sender (rendezvous, vn)
 * until this task enters the collective and accepts it in place.
 *
 * The broadcast rides on the same machinery (torxc_paced_bcast): the root
 * sends to every member, and each member receives once. Where the device
 * has a multi-reader staging area, the root copies the data into it once
 * and sends every member a descriptor (a block whose kind carries
 * TORXC_A2A_REF), and each member copies the pieces out of the root's
 * area.
 */
#include "coll_internal.h"

#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define TORXC_A2A_WINDOW 8

/* Early blocks of up to UNEXP_INLINE bytes keep their data in their
 * record, and up to UNEXP_KEEP records are kept for reuse: in the short
 * exchange of 2 tasks (an 8-byte allreduce) one member's block is early on
 * almost every call, and calloc, malloc and two frees cost it about 600
 * instructions, a third of the call (callgrind, bench/mpi_coll.c). */
#define UNEXP_INLINE 256
#define UNEXP_KEEP 16

/* The header of a block (its first word is what torxc_handler dispatches
 * on). */
typedef struct a2a_hdr {
    uint32_t kind; /* the collective: TORX_COLL_ALLTOALL(V), or _ALLREDUCE (exchange) */
    uint32_t group_id;
    uint32_t seq;
    uint32_t from; /* the sender's index in the group */
} a2a_hdr_t;

_Static_assert(sizeof(a2a_hdr_t) == TORXC_A2A_HDR_BYTES, "TORXC_A2A_HDR_BYTES");

/* In a block's kind: the block is a piece_desc_t naming a piece of the
 * sender's multi-reader staging area, not data. */
#define TORXC_A2A_REF 0x200u

/* Where a piece of a broadcast waits, and where it goes. */
typedef struct torxc_piece_desc {
    torx_stage_ref_t ref;
    uint64_t at;      /* its offset in the broadcast buffer */
    torx_coord_t src; /* the root, whose area holds it */
} piece_desc_t;

/* A block that arrived before this task entered its collective. */
struct torxc_unexp {
    struct torxc_unexp *next;
    a2a_hdr_t hdr;
    size_t len;
    void *bounce;           /* the data, when it came on its way */
    torx_deferred_t *defer; /* or the deferred message, still at its sender */
    volatile int complete;  /* bounce holds all of it */
    torx_status_t status;
    unsigned char inline_data[UNEXP_INLINE]; /* bounce, for short blocks */
};

/* Why a collective cannot run: early blocks were dropped for want of
 * memory (the collective that needed them would wait for ever). */
static torx_status_t blocks_lost(const torx_coll_t *c, const char *what)
{
    return torxp_error(TORX_ERR_NOMEM, "torx: %s: %d early blocks were lost for want of memory",
                       what, c->a2a.lost);
}

/* A cleared record, reused when one is kept. */
static struct torxc_unexp *unexp_get(torxc_a2a_t *a)
{
    struct torxc_unexp *u = a->unexp_free;
    if (u == NULL)
        return calloc(1, sizeof *u);
    a->unexp_free = u->next;
    a->unexp_nfree--;
    memset(u, 0, offsetof(struct torxc_unexp, inline_data));
    return u;
}

/* Frees a record's data and keeps the record, or frees it too. */
static void unexp_put(torxc_a2a_t *a, struct torxc_unexp *u)
{
    if (u->bounce != u->inline_data)
        free(u->bounce);
    if (a->unexp_nfree < UNEXP_KEEP) {
        u->next = a->unexp_free;
        a->unexp_free = u;
        a->unexp_nfree++;
    } else {
        free(u);
    }
}

static void count_block(torxc_a2a_run_t *r, torx_status_t st)
{
    r->received++;
    if (st != TORX_OK && r->status == TORX_OK)
        r->status = st;
}

/* A discarded run goes when the message layer holds nothing of it. */
static void maybe_free_orphan(torxc_a2a_run_t *r)
{
    if (r->orphan && r->in_flight == 0 && r->receiving == 0)
        free(r);
}

static void block_done(torx_ctx_t *ctx, void *arg, torx_status_t st, size_t received)
{
    (void)ctx, (void)received;
    torxc_a2a_run_t *r = arg;
    r->receiving--;
    count_block(r, st);
    maybe_free_orphan(r);
}

static void unexp_done(torx_ctx_t *ctx, void *arg, torx_status_t st, size_t received)
{
    (void)ctx, (void)received;
    struct torxc_unexp *u = arg;
    u->status = st;
    u->complete = 1;
}

/* The bytes of block `from` of a run, and their place in out: from its
 * tables, or a broadcast's (root's block only, at 0). */
static size_t rbytes_of(const torxc_a2a_run_t *r, uint32_t from)
{
    return r->rbytes ? r->rbytes[from] : from == (uint32_t)r->root ? r->root_bytes : 0;
}
static size_t rdispl_of(const torxc_a2a_run_t *r, uint32_t from)
{
    return r->rdispl ? r->rdispl[from] : 0;
}

/* Where block `from` of a run goes. */
static void place(const torxc_a2a_run_t *r, uint32_t from, void **buf, size_t *len)
{
    *buf = r->out + rdispl_of(r, from);
    *len = rbytes_of(r, from);
}

/* The running exchange a block belongs to, or NULL (not yet begun, or
 * over). */
static torxc_a2a_run_t *run_of(const torxc_a2a_t *a, const a2a_hdr_t *h)
{
    for (torxc_a2a_run_t *r = a->runs; r; r = r->next)
        if (r->group_id == h->group_id && r->seq == h->seq)
            return h->from < (uint32_t)r->n ? r : NULL;
    return NULL;
}

/* Copies the piece a descriptor names out of its root's area into place
 * and releases it. n bytes at p: the descriptor, as it came. */
static void take_piece(torxc_a2a_run_t *r, uint32_t from, const void *p, size_t n)
{
    torx_coll_t *c = r->c;
    piece_desc_t d;
    if (p == NULL || n != sizeof d) {
        count_block(r, torxp_error(TORX_ERR_PROTO,
                                   "torx: bcast: a piece descriptor of %zu bytes from member %u", n,
                                   from));
        return;
    }
    memcpy(&d, p, sizeof d);
    const void *data = torx_mstage_data(c->dev, d.src, d.ref);
    torx_status_t st = TORX_OK;
    if (data == NULL)
        st = torxp_error(TORX_ERR_PROTO,
                         "torx: bcast: member %u sent a descriptor (%u+%u) that names no piece of "
                         "its staging area",
                         from, d.ref.off, d.ref.len);
    else if (d.at > rbytes_of(r, from) || d.ref.len > rbytes_of(r, from) - d.at)
        st = torxp_error(TORX_ERR_TRUNCATE, "torx: bcast: %llu bytes from member %u, %zu expected",
                         (unsigned long long)d.at + d.ref.len, from, rbytes_of(r, from));
    else
        memcpy(r->out + rdispl_of(r, from) + d.at, data, d.ref.len);
    torx_mstage_release(c->dev, d.src, d.ref);
    count_block(r, st);
}

/* Lets go of the piece an early descriptor names, for a collective this
 * task never entered. */
static void drop_piece(torx_coll_t *c, const struct torxc_unexp *u)
{
    piece_desc_t d;
    if (u->bounce && u->len == sizeof d) {
        memcpy(&d, u->bounce, sizeof d);
        torx_mstage_release(c->dev, d.src, d.ref);
    }
}

void torxc_a2a_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info, torx_recv_t *recv)
{
    (void)ctx;
    torx_coll_t *c = harg;
    torxc_a2a_t *a = &c->a2a;
    a2a_hdr_t h;
    if (info->hdr_len != sizeof h) {
        torxp_error(TORX_ERR_PROTO, "torx: collective message of %zu header bytes from task %d",
                    info->hdr_len, info->src);
        recv->buf = NULL;
        return;
    }
    memcpy(&h, info->hdr, sizeof h);
    torxc_a2a_run_t *r = run_of(a, &h);
    if (r) {
        if (h.kind & TORXC_A2A_REF) {
            take_piece(r, h.from, info->data, info->data_len);
            recv->buf = NULL;
            return;
        }
        place(r, h.from, &recv->buf, &recv->len);
        if (info->data && info->data_len <= recv->len) {
            /* all here already: no completion to wait for */
            memcpy(recv->buf, info->data, info->data_len);
            recv->buf = NULL;
            count_block(r, TORX_OK);
            return;
        }
        recv->done = block_done;
        recv->arg = r;
        r->receiving++;
        return;
    }
    struct torxc_unexp *u = unexp_get(a);
    if (u != NULL && !info->deferrable && info->data_len > 0)
        u->bounce = info->data_len <= UNEXP_INLINE ? u->inline_data : malloc(info->data_len);
    if (u == NULL || (!info->deferrable && info->data_len > 0 && u->bounce == NULL)) {
        /* Nowhere to put data that is already arriving: the collective
         * that needs it reports the loss instead of hanging. */
        if (u)
            unexp_put(a, u);
        a->lost++;
        recv->buf = NULL;
        return;
    }
    u->hdr = h;
    u->len = info->data_len;
    u->status = TORX_OK;
    if (info->deferrable) {
        recv->defer = &u->defer;
    } else {
        recv->buf = u->bounce;
        recv->len = u->len;
        recv->done = unexp_done;
        recv->arg = u;
        if (info->data || u->len == 0) {
            if (u->len)
                memcpy(u->bounce, info->data, u->len);
            recv->buf = NULL;
            recv->done = NULL;
            u->complete = 1;
        }
    }
    /* Append: a later match takes the oldest first. */
    struct torxc_unexp **tail = &a->unexp;
    while (*tail)
        tail = &(*tail)->next;
    *tail = u;
}

/* Takes a run's early blocks from the unexpected list. One whose data are
 * still coming into a bounce buffer is waited for (wait), or left for a
 * later call. */
static void claim_unexpected(torxc_a2a_run_t *r, int wait)
{
    torx_coll_t *c = r->c;
    torxc_a2a_t *a = &c->a2a;
    for (struct torxc_unexp **p = &a->unexp; *p;) {
        struct torxc_unexp *u = *p;
        if (u->hdr.group_id != r->group_id || u->hdr.seq != r->seq ||
            u->hdr.from >= (uint32_t)r->n || (!wait && !u->defer && !u->complete)) {
            p = &u->next;
            continue;
        }
        *p = u->next;
        void *buf;
        size_t len;
        place(r, u->hdr.from, &buf, &len);
        if (u->hdr.kind & TORXC_A2A_REF) {
            /* a descriptor: one packet, in the record */
            take_piece(r, u->hdr.from, u->bounce, u->len);
        } else if (u->defer) {
            torx_recv_t rv = {.buf = buf, .len = len, .done = block_done, .arg = r};
            r->receiving++;
            torx_status_t st = torx_accept(c->ctx, u->defer, &rv);
            if (st != TORX_OK) {
                r->receiving--;
                count_block(r, st);
            }
        } else {
            unsigned spins = 0;
            while (!u->complete)
                torxc_progress(c, &spins);
            torx_status_t st = u->status;
            if (st == TORX_OK && u->len > len)
                st = torxp_error(TORX_ERR_TRUNCATE,
                                 "torx: alltoall: %zu bytes from member %u, %zu expected", u->len,
                                 u->hdr.from, len);
            if (u->len)
                memcpy(buf, u->bounce, u->len < len ? u->len : len);
            count_block(r, st);
        }
        unexp_put(a, u);
    }
}

static void sent(torx_ctx_t *ctx, torx_msg_t *msg, void *arg)
{
    (void)ctx;
    torxc_a2a_run_t *r = arg;
    r->in_flight--;
    torx_status_t st = torx_msg_status(msg);
    if (st != TORX_OK && r->status == TORX_OK)
        r->status = st;
    maybe_free_orphan(r);
}

/* A permutation of 1..n-1 from seed, the same on every member. */
static void step_order(int *perm, int n, uint64_t seed)
{
    for (int k = 0; k < n - 1; k++)
        perm[k] = k + 1;
    uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL;
    for (int k = n - 2; k > 0; k--) {
        x ^= x >> 31, x *= 0xbf58476d1ce4e5b9ULL, x ^= x >> 29;
        int j = (int)(x % (uint64_t)(k + 1));
        int t = perm[k];
        perm[k] = perm[j];
        perm[j] = t;
    }
}

/* The group's paced state, made at its first paced collective: the send
 * window, the descriptors the window's sends may carry and, for an
 * alltoall(v) (perm), the step order (one int per member). what names
 * the collective in the error. */
static torx_status_t paced_state(torx_coll_group_t *g, const char *what, int perm)
{
    if (g->a2a_msgs == NULL)
        g->a2a_msgs = calloc(TORXC_A2A_WINDOW, sizeof(torx_msg_t));
    if (perm && g->a2a_perm == NULL)
        g->a2a_perm = malloc(sizeof(int) * (size_t)g->n);
    if (g->a2a_descs == NULL)
        g->a2a_descs = malloc(TORXC_A2A_WINDOW * sizeof(piece_desc_t));
    if (g->a2a_msgs == NULL || (perm && g->a2a_perm == NULL) || g->a2a_descs == NULL)
        return torxp_error(TORX_ERR_NOMEM, "torx: %s: out of memory", what);
    return TORX_OK;
}

/* Makes r the group's next exchange, running from now on: blocks are
 * placed at out + rdispl[from] (rbytes NULL: a broadcast from root of
 * root_bytes, placed at out). */
static void begin(torx_coll_group_t *g, torxc_a2a_run_t *r, void *out, const size_t *rbytes,
                  const size_t *rdispl, int root, size_t root_bytes)
{
    torxc_a2a_t *a = &g->c->a2a;
    r->c = g->c;
    r->g = g;
    r->group_id = g->id;
    r->seq = ++g->a2a_seq;
    r->n = g->n;
    r->out = out;
    r->rbytes = rbytes;
    r->rdispl = rdispl;
    r->root = root;
    r->root_bytes = root_bytes;
    r->received = 0;
    r->receiving = 0;
    r->in_flight = 0;
    r->status = TORX_OK;
    r->err = TORX_OK;
    r->orphan = 0;
    r->next = a->runs;
    a->runs = r;
    r->linked = 1;
}

/* Takes r off the running list: its blocks are early ones again. */
static void end(torxc_a2a_run_t *r)
{
    if (!r->linked)
        return;
    for (torxc_a2a_run_t **p = &r->c->a2a.runs; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            break;
        }
    r->linked = 0;
}

/* The exchange's sending half, set up after begin. sparse: only the
 * blocks of non-zero length move (every member knows which: the
 * broadcast), instead of one block, empty or not, between every pair of
 * members (alltoall(v), where the counts one member sends are the counts
 * another expects only by the program's word, and the empty blocks keep a
 * member from finishing before its peers' blocks have been placed). Places
 * this task's own block. */
static void exchange_begin(torxc_a2a_run_t *r, torx_coll_kind_t kind, const void *in,
                           const size_t *sbytes, const size_t *sdispl, int sparse,
                           size_t eager_upto)
{
    const int n = r->n, me = r->g->me;
    r->kind = kind;
    r->in = in;
    r->sbytes = sbytes;
    r->sdispl = sdispl;
    r->sparse = sparse;
    r->eager_upto = eager_upto;
    r->started = 0;
    r->expect = n; /* blocks to place, this task's own included */
    if (sparse) {
        r->expect = 1;
        for (int m = 0; m < n; m++)
            r->expect += m != me && r->rbytes[m] > 0;
    }
    if (sbytes[me] > r->rbytes[me] && r->status == TORX_OK)
        r->status =
            torxp_error(TORX_ERR_TRUNCATE, "torx: alltoall: %zu bytes to self, %zu expected",
                        sbytes[me], r->rbytes[me]);
    memmove(r->out + r->rdispl[me], r->in + sdispl[me],
            sbytes[me] < r->rbytes[me] ? sbytes[me] : r->rbytes[me]);
    r->received++;
    /* Every member in its own order, so that no member takes every block
     * at once; a sparse exchange (one sender: the broadcast's root) goes
     * round the group from the sender, and needs no table. */
    r->spread = !sparse && r->c->net.kind == TORX_NET_TORUS;
    if (!sparse)
        step_order(r->perm, n,
                   (((uint64_t)r->group_id << 32) ^ r->seq) +
                       (r->spread ? ((uint64_t)me + 1) * 0x9e3779b97f4a7c15ULL : 0));
}

/* Starts sends into the window's free slots, without waiting: TORX_AGAIN
 * while the exchange is not over, else how it ended (every send done,
 * every block placed; or a send that could not start, once the others
 * are done). */
static torx_status_t exchange_step(torxc_a2a_run_t *r, int *moved)
{
    torx_coll_t *c = r->c;
    torx_coll_group_t *g = r->g;
    const int n = r->n, me = g->me;
    const a2a_hdr_t h = {
        .kind = (uint32_t)r->kind, .group_id = r->group_id, .seq = r->seq, .from = (uint32_t)me};
    int w = 0; /* the window's next slot to look at */
    while (r->err == TORX_OK) {
        while (r->sparse && r->started < n - 1 && r->sbytes[(me + r->started + 1) % n] == 0)
            r->started++;
        if (r->started == n - 1)
            break;
        const int to = (me + (r->sparse ? r->started + 1 : r->perm[r->started])) % n;
        const size_t len = r->sbytes[to];
        if (len <= TORXC_A2A_INJECT_MAX) {
            /* one packet: injected when the network has room, with no
             * message object or completion to wait for */
            const torx_status_t st = torx_send_inject(c->ctx, torxc_task(g, to), c->handler, &h,
                                                      sizeof h, r->in + r->sdispl[to], len);
            if (st == TORX_OK) {
                r->started++;
                *moved = 1;
                continue;
            }
            if (st != TORX_AGAIN) {
                r->err = st;
                break;
            }
        }
        while (w < TORXC_A2A_WINDOW && torx_msg_pending(&r->msgs[w]))
            w++;
        if (w == TORXC_A2A_WINDOW)
            break;
        /* A block the message layer sends by rendezvous goes so, unless
         * eager_upto says otherwise: its rule that stages a long message to
         * an idle peer suits one message at a time, not an alltoall, where
         * every member sends and receives at once (2 tasks, 256 KiB a
         * block: 35 us staged, 19-23 by rendezvous). */
        torx_protocol_t proto = TORX_PROTO_AUTO;
        if (len > TORX_MSG_ONEPKT_MAX) {
            const torx_protocol_t would =
                torx_choose_protocol(c->ctx, torxc_task(g, to), sizeof h, len);
            if (would == TORX_PROTO_RZV)
                proto = len <= r->eager_upto ? TORX_PROTO_EAGER
                        : r->sparse          ? TORX_PROTO_AUTO
                                             : TORX_PROTO_RZV;
            else if (r->spread && would == TORX_PROTO_EAGER)
                proto = TORX_PROTO_ADAPTIVE; /* its token comes back once matched */
        }
        r->err = torx_send(c->ctx, &r->msgs[w++], torxc_task(g, to), c->handler, &h, sizeof h,
                           r->in + r->sdispl[to], len, proto, sent, r);
        if (r->err != TORX_OK)
            break;
        r->in_flight++;
        r->started++;
        *moved = 1;
    }
    /* The window's messages belong to the run: none may stay in flight. */
    if (r->in_flight > 0)
        return TORX_AGAIN;
    if (r->err != TORX_OK)
        return r->err;
    return r->started == n - 1 && r->received == r->expect ? r->status : TORX_AGAIN;
}

/* The blocking exchange: this task's running collective. */
static torx_status_t paced_run(torx_coll_group_t *g, torx_coll_kind_t kind, const void *in,
                               const size_t *sbytes, const size_t *sdispl, void *out,
                               const size_t *rbytes, const size_t *rdispl, int sparse,
                               size_t eager_upto)
{
    torx_coll_t *c = g->c;
    torxc_a2a_run_t *r = &c->a2a.blocking;
    if (c->a2a.lost)
        return blocks_lost(c, "alltoall");
    torx_status_t st = paced_state(g, sparse ? "bcast" : "alltoall", !sparse);
    if (st != TORX_OK)
        return st;
    r->msgs = g->a2a_msgs;
    r->perm = g->a2a_perm;
    begin(g, r, out, rbytes, rdispl, -1, 0);
    exchange_begin(r, kind, in, sbytes, sdispl, sparse, eager_upto);
    claim_unexpected(r, 1);
    unsigned spins = 0;
    int moved;
    while ((st = exchange_step(r, &moved)) == TORX_AGAIN)
        torxc_progress_msgs(c, &spins);
    end(r);
    return st;
}

torx_status_t torxc_paced_alltoallv(torx_coll_group_t *g, torx_coll_kind_t kind, const void *in,
                                    const size_t *sbytes, const size_t *sdispl, void *out,
                                    const size_t *rbytes, const size_t *rdispl)
{
    return paced_run(g, kind, in, sbytes, sdispl, out, rbytes, rdispl, 0, 0);
}

/* Progresses until r's blocks are all placed (r->expect), then takes r
 * off the running list: how they came. */
static torx_status_t placed(torxc_a2a_run_t *r, unsigned *spins)
{
    while (r->received < r->expect)
        torxc_progress_msgs(r->c, spins);
    end(r);
    return r->status;
}

torx_status_t torxc_paced_pair(torx_coll_group_t *g, torx_coll_kind_t kind, const void *in,
                               size_t bytes, int send, void *other)
{
    torx_coll_t *c = g->c;
    torxc_a2a_run_t *r = &c->a2a.blocking;
    if (c->a2a.lost)
        return blocks_lost(c, torx_coll_kind_name(kind));
    const int me = g->me, peer = 1 - me;
    size_t rbytes[2] = {0, 0};
    const size_t rdispl[2] = {0, 0};
    rbytes[peer] = other ? bytes : 0;
    begin(g, r, other, rbytes, rdispl, -1, 0);
    r->kind = kind;
    r->received = 1; /* this task's own block: nothing to place */
    r->expect = other ? 2 : 1;
    claim_unexpected(r, 1);
    const a2a_hdr_t h = {
        .kind = (uint32_t)kind, .group_id = r->group_id, .seq = r->seq, .from = (uint32_t)me};
    unsigned spins = 0;
    torx_status_t st = TORX_AGAIN;
    while (send && (st = torx_send_inject(c->ctx, torxc_task(g, peer), c->handler, &h, sizeof h, in,
                                          bytes)) == TORX_AGAIN)
        torxc_progress(c, &spins);
    if (send && st != TORX_OK) {
        end(r);
        return st;
    }
    return placed(r, &spins);
}

torx_status_t torxc_paced_sparse(torx_coll_group_t *g, torx_coll_kind_t kind, const void *in,
                                 const size_t *sbytes, const size_t *sdispl, void *out,
                                 const size_t *rbytes, const size_t *rdispl)
{
    return paced_run(g, kind, in, sbytes, sdispl, out, rbytes, rdispl, 1, 0);
}

/* ---- nonblocking ------------------------------------------------------------------ */

static size_t round_up(size_t x, size_t to)
{
    return (x + to - 1) / to * to;
}

torx_status_t torxc_a2a_start(torx_coll_group_t *g, torx_coll_kind_t kind, const void *in,
                              const size_t *sbytes, const size_t *sdispl, void *out,
                              const size_t *rbytes, const size_t *rdispl, torxc_a2a_run_t **run)
{
    torx_coll_t *c = g->c;
    const size_t n = (size_t)g->n;
    if (c->a2a.lost)
        return blocks_lost(c, "alltoall");
    /* One allocation: the run, its send window, its copy of the counts
     * (the caller's may go once this returns), its step order. */
    const size_t at_msgs = round_up(sizeof(torxc_a2a_run_t), alignof(torx_msg_t));
    const size_t at_v = round_up(at_msgs + TORXC_A2A_WINDOW * sizeof(torx_msg_t), alignof(size_t));
    const size_t at_perm = at_v + 4 * n * sizeof(size_t);
    char *mem = calloc(1, at_perm + n * sizeof(int));
    if (mem == NULL)
        return torxp_error(TORX_ERR_NOMEM, "torx: a nonblocking %s: out of memory",
                           torx_coll_kind_name(kind));
    torxc_a2a_run_t *r = (torxc_a2a_run_t *)(void *)mem;
    r->msgs = (torx_msg_t *)(void *)(mem + at_msgs);
    size_t *v = (size_t *)(void *)(mem + at_v);
    r->perm = (int *)(void *)(mem + at_perm);
    memcpy(v, sbytes, n * sizeof *v);
    memcpy(v + n, sdispl, n * sizeof *v);
    memcpy(v + 2 * n, rbytes, n * sizeof *v);
    memcpy(v + 3 * n, rdispl, n * sizeof *v);
    begin(g, r, out, v + 2 * n, v + 3 * n, -1, 0);
    exchange_begin(r, kind, in, v, v + n, 0, 0);
    claim_unexpected(r, 0);
    *run = r;
    return TORX_OK;
}

torx_status_t torxc_a2a_step(torxc_a2a_run_t *r, int *moved)
{
    *moved = 0;
    if (r->c->a2a.unexp) /* early ones whose data were still coming at the start */
        claim_unexpected(r, 0);
    const torx_status_t st = exchange_step(r, moved);
    if (st != TORX_AGAIN)
        end(r);
    return st;
}

void torxc_a2a_discard(torxc_a2a_run_t *r)
{
    if (r == NULL)
        return;
    end(r);
    r->orphan = 1;
    maybe_free_orphan(r);
}

/* Sends a descriptor to group member m: at once when the network has
 * room, else through a window slot (the descriptor then lives in *slot
 * until that send is done). */
static torx_status_t send_desc(torx_coll_group_t *g, int m, const a2a_hdr_t *h,
                               const piece_desc_t *d)
{
    torx_coll_t *c = g->c;
    torxc_a2a_run_t *r = &c->a2a.blocking;
    torx_status_t st =
        torx_send_inject(c->ctx, torxc_task(g, m), c->handler, h, sizeof *h, d, sizeof *d);
    if (st != TORX_AGAIN)
        return st;
    unsigned spins = 0;
    for (;;) {
        for (int w = 0; w < TORXC_A2A_WINDOW; w++) {
            torx_msg_t *msg = &g->a2a_msgs[w];
            if (torx_msg_pending(msg))
                continue;
            g->a2a_descs[w] = *d;
            st = torx_send(c->ctx, msg, torxc_task(g, m), c->handler, h, sizeof *h,
                           &g->a2a_descs[w], sizeof *d, TORX_PROTO_AUTO, sent, r);
            if (st == TORX_OK)
                r->in_flight++;
            return st;
        }
        torxc_progress(c, &spins);
    }
}

/* The broadcast through the root's multi-reader staging area: the root
 * copies each piece in once and sends its descriptor to every member;
 * members copy it out when it comes, or when they enter the broadcast.
 * The root returns when the last descriptor is out; the area's room comes
 * back as members release, which is the root's only wait. */
static torx_status_t staged_bcast(torx_coll_group_t *g, void *buf, size_t bytes, int root)
{
    torx_coll_t *c = g->c;
    torxc_a2a_run_t *r = &c->a2a.blocking;
    const int n = g->n, me = g->me;
    const size_t piece = torx_mstage_max(c->dev);
    const size_t npieces = (bytes + piece - 1) / piece;
    if (c->a2a.lost)
        return blocks_lost(c, "bcast");
    begin(g, r, buf, NULL, NULL, root, bytes);
    r->received = 1; /* the root's own block: in place */
    const a2a_hdr_t h = {.kind = TORX_COLL_BCAST | TORXC_A2A_REF,
                         .group_id = g->id,
                         .seq = r->seq,
                         .from = (uint32_t)me};
    unsigned spins = 0;
    torx_status_t err = TORX_OK;
    if (me == root) {
        for (size_t k = 0; k < npieces && err == TORX_OK; k++) {
            const size_t at = k * piece, len = bytes - at < piece ? bytes - at : piece;
            piece_desc_t d = {.at = at, .src = g->coord[me]};
            while ((err = torx_mstage_put(c->dev, (const char *)buf + at, len, (unsigned)n - 1,
                                          &d.ref)) == TORX_NO_ROOM)
                torxc_progress(c, &spins);
            if (err == TORX_OK)
                c->bc_staged_pieces++;
            for (int k2 = 1; k2 < n && err == TORX_OK; k2++)
                err = send_desc(g, (root + k2) % n, &h, &d);
        }
    } else {
        claim_unexpected(r, 1);
        while (r->received < 1 + (int)npieces)
            torxc_progress(c, &spins);
    }
    /* The window's messages belong to the group: none may stay in flight. */
    while (r->in_flight > 0 || r->receiving > 0)
        torxc_progress(c, &spins);
    end(r);
    return err != TORX_OK ? err : r->status;
}

/* The broadcast as a sparse exchange: the root sends the buffer to every
 * member straight from its memory, and each member receives once. Every
 * member depends on the root alone: one scheduling of each member
 * suffices, where a tree needs its levels one after another, which is what
 * a task waits for when tasks outnumber cores.
 *
 * From TORXC_STAGED_BCAST_MIN_BYTES, on a device with a multi-reader
 * staging area (shm), the data goes through the root's area
 * (staged_bcast): one copy in at the root, one out at each member, no
 * system call, and the root does not wait for the members. Otherwise the message
 * layer picks each block's protocol, except that on one host a block it
 * would send by rendezvous that fits two of the staging area's largest
 * pieces (one staging ring, 64 KiB by default) goes eager: the root copies
 * it into each member's ring and is done, where a rendezvous has every
 * member read the root's pages at once (process_vm_readv pins them one at
 * a time under the root's page-table lock) and the root wait for every
 * reader. At 8 tasks on 2 cores, 24-64 KiB: 11-24 us against 20-42 by
 * rendezvous; at 96-128 KiB, past the 64 KiB ring, eager was slower
 * (1000 calls a size). */
torx_status_t torxc_paced_bcast(torx_coll_group_t *g, void *buf, size_t bytes, int root)
{
    const int n = g->n;
    torx_coll_t *c = g->c;
    if (torxc_staged_bcast_applies(g, bytes)) {
        const torx_status_t st = paced_state(g, "bcast", 0);
        return st != TORX_OK ? st : staged_bcast(g, buf, bytes, root);
    }
    if (g->me != root) { /* one block to place, the root's: no tables */
        torxc_a2a_run_t *r = &c->a2a.blocking;
        if (c->a2a.lost)
            return blocks_lost(c, "bcast");
        begin(g, r, buf, NULL, NULL, root, bytes);
        r->received = 1; /* this member's own block: nothing */
        r->expect = 2;
        claim_unexpected(r, 1);
        unsigned spins = 0;
        return placed(r, &spins);
    }
    if (n == 2 && bytes <= TORXC_A2A_INJECT_MAX) /* one packet to the other */
        return torxc_paced_pair(g, TORX_COLL_BCAST, buf, bytes, 1, NULL);
    /* The root: bytes to send and to receive per member, then the
     * displacements (all 0: one buffer), for this call. It sends to every
     * other member and receives nothing. */
    size_t *v = malloc(3 * (size_t)n * sizeof(size_t));
    if (v == NULL)
        return torxp_error(TORX_ERR_NOMEM, "torx: bcast: out of memory");
    size_t *sbytes = v, *rbytes = v + n, *displ = v + 2 * n;
    for (int m = 0; m < n; m++) {
        sbytes[m] = m != root ? bytes : 0;
        rbytes[m] = 0;
        displ[m] = 0;
    }
    const size_t eager_upto = c->direct_reads ? 2 * torx_stage_max(c->dev) : 0;
    const torx_status_t st =
        paced_run(g, TORX_COLL_BCAST, buf, sbytes, displ, buf, rbytes, displ, 1, eager_upto);
    free(v);
    return st;
}

void torxc_a2a_finalize(torx_coll_t *c)
{
    /* Blocks of collectives this task never entered (an erroneous
     * program): discard them, so their senders complete. */
    while (c->a2a.unexp) {
        struct torxc_unexp *u = c->a2a.unexp;
        c->a2a.unexp = u->next;
        if (u->hdr.kind & TORXC_A2A_REF) {
            drop_piece(c, u);
        } else if (u->defer) {
            torx_recv_t r = {.buf = NULL};
            torx_accept(c->ctx, u->defer, &r);
        } else {
            unsigned spins = 0;
            while (!u->complete)
                torxc_progress(c, &spins);
        }
        unexp_put(&c->a2a, u);
    }
    while (c->a2a.unexp_free) {
        struct torxc_unexp *u = c->a2a.unexp_free;
        c->a2a.unexp_free = u->next;
        free(u);
    }
    c->a2a.unexp_nfree = 0;
}
