/* Staging on the network devices: the staging area mapped onto one network
 * message per piece.
 *
 * Over a network, what costs is the number of messages: a 16 KiB eager
 * message cut into 240-byte torus packets is 70 sends and 70 receives
 * (a system call or more each over TCP), where one message of 16 KiB is
 * one. So a piece travels as a message of its own, with a 32-byte header
 * naming its sender and sequence number, and the receiver keeps the pieces
 * of each sender in arrival order, so torx_stage_data finds the piece at
 * the head of its sender's queue, where torx_stage_release takes it off.
 *
 * One message, not two: torx_stage_put only fills a send buffer, and the
 * piece waits for the next packet to the same task (the descriptor, sent
 * right after the put), which rides aboard: [header][piece][packet]. The
 * receiver queues the piece, then the packet as if it had come alone, in
 * a holder (net_torus.c), since the piece's buffer goes back to the
 * library at its release, which may come before the packet's consume. The
 * descriptor thus never overtakes its piece, whatever the library's order
 * of messages, and between hosts, where every message costs a trip through
 * both kernels' TCP stacks, a staged message pays half as many messages. A
 * piece nothing comes for by the next progress (the layer above does not
 * always send at once) leaves alone (torxp_net_stage_flush). Holders
 * suffice: a carried packet is a torus packet, within its sender's credits.
 *
 * Flow control: each ordered pair has a window of pieces, spent by
 * torx_stage_put and given back by the receiver as it releases them:
 * aboard its own next piece to that task when there is one (a reply, in a
 * ping-pong), else in a TORXP_NET_SYS_STAGE message once half a window is
 * released (a stream). The device chooses the window (its receive buffers
 * bound it) and the longest message.
 *
 * torx_stage_unput cannot call back a piece already on the wire: it sends
 * TORXP_NET_SYS_STAGE with the voided sequence number instead, after the
 * piece and before any later descriptor, and the receiver drops the piece
 * when it comes to the head of the queue. A void that overtakes its piece
 * (a library may deliver a long message and a short one out of order) is
 * kept until the piece comes. */
#include "net.h"

#include <string.h>

typedef struct stage_hdr {
    uint32_t src;     /* the sender's slot */
    uint32_t seq;     /* per ordered pair, from 0 */
    uint16_t len;     /* the piece's bytes */
    uint16_t pkt;     /* the bytes of a packet aboard, after the piece; 0: none */
    uint32_t credits; /* staging credits given back to the receiver, aboard */
    uint32_t order;   /* the packet aboard: its torus number */
    uint32_t pad[3];  /* the piece starts 32-byte aligned */
} stage_hdr_t;
static_assert(sizeof(stage_hdr_t) == TORXP_NET_STAGE_HDR, "stage header is 32 bytes");

typedef struct stage_queue {
    torxp_net_stage_buf_t *head, **tail;
} stage_queue_t;

struct torxp_net_stage {
    unsigned window; /* pieces in flight per ordered pair; 0: staging off */
    size_t msg_max;  /* the longest message: header, piece and a packet */
    /* send side */
    torxp_net_stage_buf_t *tx_free;
    uint32_t *tx_seq;                /* per destination slot: the next piece's number */
    int32_t *credits;                /* per destination slot: pieces it still takes */
    torxp_net_stage_buf_t **waiting; /* per destination slot: a piece put, not yet sent */
    unsigned nwaiting;
    unsigned tx_busy; /* send buffers the library still holds */
    /* receive side */
    stage_queue_t *queue;         /* per source slot: pieces come, in order */
    uint32_t *rx_seq;             /* per source slot: the next piece's number */
    uint32_t *released;           /* per source slot: released, not yet credited */
    uint32_t *ahead;              /* per source slot, window entries: voids come before
                                     their pieces; UINT32_MAX: none */
    unsigned nahead;              /* entries of ahead in use, over every slot */
    unsigned long carried, alone; /* pieces sent with a packet aboard, and without */
};

torx_status_t torxp_net_stage_setup(torxp_net_t *n, unsigned window, size_t msg_max,
                                    torxp_net_stage_buf_t *tx, size_t tx_stride, unsigned ntx)
{
    torxp_net_stage_t *s = torxp_calloc(1, sizeof *s);
    if (!s)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for the staging state");
    n->stage = s;
    if (!window)
        return TORX_OK;
    s->msg_max = msg_max;
    s->tx_seq = torxp_calloc(n->nslots, sizeof *s->tx_seq);
    s->credits = torxp_calloc(n->nslots, sizeof *s->credits);
    s->queue = torxp_calloc(n->nslots, sizeof *s->queue);
    s->rx_seq = torxp_calloc(n->nslots, sizeof *s->rx_seq);
    s->released = torxp_calloc(n->nslots, sizeof *s->released);
    s->waiting = torxp_calloc(n->nslots, sizeof *s->waiting);
    s->ahead = torxp_malloc((size_t)n->nslots * window * sizeof *s->ahead);
    if (!s->tx_seq || !s->credits || !s->queue || !s->rx_seq || !s->released || !s->waiting ||
        !s->ahead)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for the staging state");
    for (unsigned i = 0; i < ntx; i++) {
        torxp_net_stage_buf_t *b = (torxp_net_stage_buf_t *)(void *)((char *)tx + i * tx_stride);
        b->next = s->tx_free;
        s->tx_free = b;
    }
    memset(s->ahead, 0xff, (size_t)n->nslots * window * sizeof *s->ahead);
    for (unsigned slot = 0; slot < n->nslots; slot++) {
        s->credits[slot] = n->slot_rank[slot] >= 0 && slot != n->self_slot ? (int32_t)window : 0;
        s->queue[slot].tail = &s->queue[slot].head;
    }
    s->window = window; /* last: staging is on */
    return TORX_OK;
}

void torxp_net_stage_fini(torxp_net_t *n)
{
    torxp_net_stage_t *s = n->stage;
    if (!s)
        return;
    /* Pieces still queued go back to the device. */
    for (unsigned slot = 0; s->queue && slot < n->nslots; slot++)
        while (s->queue[slot].head) {
            torxp_net_stage_buf_t *b = s->queue[slot].head;
            s->queue[slot].head = b->next;
            n->net_ops->stage_rx_done(n, b);
        }
    free(s->tx_seq);
    free(s->credits);
    free(s->queue);
    free(s->rx_seq);
    free(s->released);
    free(s->waiting);
    free(s->ahead);
    free(s);
    n->stage = NULL;
}

/* ---- Ops ---------------------------------------------------------------------------- */

static torx_status_t send_waiting(torxp_net_t *n, unsigned slot, const void *pkt, size_t bytes);

size_t torxp_net_stage_max(const torx_pkt_dev_t *dev)
{
    const torxp_net_t *n = (const torxp_net_t *)dev;
    return n->stage && n->stage->window
               ? n->stage->msg_max - sizeof(stage_hdr_t) - TORX_PKT_MAX_BYTES
               : 0;
}

int torxp_net_stage_reaches(const torx_pkt_dev_t *dev, torx_coord_t dest)
{
    const torxp_net_t *n = (const torxp_net_t *)dev;
    if (!n->stage || !n->stage->window || !torx_coord_in_shape(dev->shape, dest))
        return 0;
    const unsigned slot = torx_coord_index(dev->shape, dest);
    return n->slot_rank[slot] >= 0 && slot != n->self_slot;
}

torx_status_t torxp_net_stage_put(torx_pkt_dev_t *dev, torx_coord_t dest, const void *data,
                                  size_t len, torx_stage_ref_t *ref)
{
    torxp_net_t *n = torxp_net_of(dev);
    if (!data || !ref || len < 1 || len > torxp_net_stage_max(dev) ||
        !torxp_net_stage_reaches(dev, dest))
        return torxp_error(TORX_ERR_INVAL, "torx: torx_stage_put: %zu bytes to (%u,%u,%u,%u): %s",
                           len, dest.x, dest.y, dest.z, dest.t,
                           !data || !ref                         ? "NULL data or ref"
                           : !torxp_net_stage_reaches(dev, dest) ? "no staging toward that task"
                                                                 : "not 1..torx_stage_max bytes");
    torxp_net_stage_t *s = n->stage;
    const unsigned slot = torx_coord_index(dev->shape, dest);
    torxp_net_lock(n);
    torx_status_t rc = n->base.failed;
    if (rc == TORX_OK && s->waiting[slot]) /* pieces leave in order */
        rc = send_waiting(n, slot, NULL, 0);
    if (rc == TORX_OK && s->credits[slot] > 0 && !s->tx_free)
        n->net_ops->progress(n); /* completions free send buffers */
    if (rc == TORX_OK && (s->credits[slot] <= 0 || !s->tx_free))
        rc = TORX_NO_ROOM;
    if (rc == TORX_OK) {
        torxp_net_stage_buf_t *b = s->tx_free;
        s->tx_free = b->next;
        b->len = (uint32_t)len;
        b->peer = slot;
        memcpy(b->msg + sizeof(stage_hdr_t), data, len);
        s->waiting[slot] = b;
        s->nwaiting++;
        s->credits[slot]--;
        *ref = (torx_stage_ref_t){.off = s->tx_seq[slot]++, .len = (uint32_t)len};
    }
    torxp_net_unlock(n);
    return rc;
}

/* Sends slot's waiting piece, with the packet pkt (bytes long) aboard when
 * bytes > 0; TORX_NO_ROOM when the library takes nothing (the piece keeps
 * waiting). Locked. */
static torx_status_t send_waiting(torxp_net_t *n, unsigned slot, const void *pkt, size_t bytes)
{
    torxp_net_stage_t *s = n->stage;
    torxp_net_stage_buf_t *b = s->waiting[slot];
    const stage_hdr_t h = {.src = n->self_slot,
                           .seq = s->tx_seq[slot] - 1,
                           .len = (uint16_t)b->len,
                           .pkt = (uint16_t)bytes,
                           .credits = s->released[slot],
                           .order = bytes ? n->tx_order[slot] : 0};
    memcpy(b->msg, &h, sizeof h);
    if (bytes)
        memcpy(b->msg + sizeof h + b->len, pkt, bytes);
    s->tx_busy++; /* until the device gives it back */
    const torx_status_t rc = n->net_ops->stage_send(n, slot, b, sizeof h + b->len + bytes);
    if (rc == TORX_NO_ROOM) {
        s->tx_busy--;
        return TORX_NO_ROOM;
    }
    s->waiting[slot] = NULL;
    s->nwaiting--;
    s->released[slot] = 0; /* given back aboard */
    if (rc != TORX_OK)
        return rc; /* the device failed, and gave the buffer back */
    if (bytes)     /* counted in tx_order as sent by the caller (net_torus.c) */
        s->carried++;
    else
        s->alone++;
    return TORX_OK;
}

torx_status_t torxp_net_stage_carry(torxp_net_t *n, unsigned slot, const void *pkt, size_t bytes,
                                    int *carried)
{
    torxp_net_stage_t *s = n->stage;
    *carried = 0;
    if (!s || !s->waiting[slot])
        return TORX_OK;
    const int fits = sizeof(stage_hdr_t) + s->waiting[slot]->len + bytes <= s->msg_max;
    const torx_status_t rc = send_waiting(n, slot, pkt, fits ? bytes : 0);
    *carried = rc == TORX_OK && fits;
    return rc;
}

int torxp_net_stage_waiting(const torxp_net_t *n, unsigned slot)
{
    return n->stage && n->stage->nwaiting && n->stage->waiting[slot];
}

void torxp_net_stage_counts(torxp_net_t *n, unsigned long *carried, unsigned long *alone)
{
    torxp_net_lock(n);
    *carried = n->stage ? n->stage->carried : 0;
    *alone = n->stage ? n->stage->alone : 0;
    torxp_net_unlock(n);
}

void torxp_net_stage_flush(torxp_net_t *n)
{
    torxp_net_stage_t *s = n->stage;
    for (unsigned slot = 0; s && slot < n->nslots && s->nwaiting; slot++)
        if (s->waiting[slot] && send_waiting(n, slot, NULL, 0) != TORX_OK)
            return; /* the library is busy: the next progress */
}

/* Drops the voided pieces at the head of src's queue (their buffers go
 * back, their credits with the next release). */
static void skip_voided(torxp_net_t *n, unsigned src)
{
    torxp_net_stage_t *s = n->stage;
    stage_queue_t *q = &s->queue[src];
    while (q->head && q->head->voided) {
        torxp_net_stage_buf_t *b = q->head;
        q->head = b->next;
        if (!q->head)
            q->tail = &q->head;
        s->released[src]++;
        n->net_ops->stage_rx_done(n, b);
    }
}

/* The head piece of src's queue if it is the one ref names, else NULL
 * (and a protocol error). Locked. */
static torxp_net_stage_buf_t *head_piece(torxp_net_t *n, unsigned src, torx_stage_ref_t ref)
{
    torxp_net_stage_t *s = n->stage;
    skip_voided(n, src);
    torxp_net_stage_buf_t *b = s->queue[src].head;
    stage_hdr_t h = {0};
    if (b)
        memcpy(&h, b->msg, sizeof h);
    if (!b || h.seq != ref.off || h.len != ref.len) {
        const torx_coord_t c = torxp_net_coord_of(n, src);
        torxp_dev_fail(&n->base, TORX_ERR_PROTO,
                       "staged piece %u (%u bytes) from (%u,%u,%u,%u) is not the next that came "
                       "(%s%u, %u bytes)",
                       ref.off, ref.len, c.x, c.y, c.z, c.t, b ? "piece " : "none; next ",
                       b ? h.seq : s->rx_seq[src], h.len);
        return NULL;
    }
    return b;
}

static int src_slot(const torxp_net_t *n, torx_coord_t src, unsigned *slot)
{
    if (!n->stage || !n->stage->window || !torx_coord_in_shape(n->base.shape, src))
        return 0;
    *slot = torx_coord_index(n->base.shape, src);
    return n->slot_rank[*slot] >= 0;
}

const void *torxp_net_stage_data(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref)
{
    torxp_net_t *n = torxp_net_of(dev);
    unsigned slot;
    if (!src_slot(n, src, &slot))
        return NULL;
    torxp_net_lock(n);
    const torxp_net_stage_buf_t *b = head_piece(n, slot, ref);
    torxp_net_unlock(n);
    return b ? b->msg + sizeof(stage_hdr_t) : NULL;
}

/* Gives src back the credits for the pieces released, half a window at a
 * time (all of it when the window is that small). */
static void credit_back(torxp_net_t *n, unsigned src)
{
    torxp_net_stage_t *s = n->stage;
    if (s->released[src] < (s->window + 1) / 2)
        return;
    const torxp_net_sys_t m = {
        .type = TORXP_NET_SYS_STAGE, .version = TORXP_NET_WIRE_VERSION, .arg = s->released[src]};
    s->released[src] = 0;
    n->net_ops->sys_send(n, src, &m, sizeof m);
}

void torxp_net_stage_release(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref)
{
    torxp_net_t *n = torxp_net_of(dev);
    unsigned slot;
    if (!src_slot(n, src, &slot))
        return;
    torxp_net_lock(n);
    torxp_net_stage_t *s = n->stage;
    torxp_net_stage_buf_t *b = head_piece(n, slot, ref);
    if (b) {
        stage_queue_t *q = &s->queue[slot];
        q->head = b->next;
        if (!q->head)
            q->tail = &q->head;
        s->released[slot]++;
        n->net_ops->stage_rx_done(n, b);
        credit_back(n, slot);
    }
    torxp_net_unlock(n);
}

void torxp_net_stage_unput(torx_pkt_dev_t *dev, torx_coord_t dest, torx_stage_ref_t ref)
{
    torxp_net_t *n = torxp_net_of(dev);
    if (!torxp_net_stage_reaches(dev, dest))
        return;
    const unsigned slot = torx_coord_index(dev->shape, dest);
    torxp_net_stage_t *s = n->stage;
    torxp_net_lock(n);
    torxp_net_stage_buf_t *w = s->waiting[slot];
    if (w && ref.off == s->tx_seq[slot] - 1 && ref.len == w->len) {
        /* Not sent yet (it is the last put): it never leaves. */
        s->waiting[slot] = NULL;
        s->nwaiting--;
        w->next = s->tx_free;
        s->tx_free = w;
        s->tx_seq[slot]--;
        s->credits[slot]++;
    } else {
        const torxp_net_sys_t m = {.type = TORXP_NET_SYS_STAGE,
                                   .version = TORXP_NET_WIRE_VERSION,
                                   .pad = 1, /* a voided piece, not credits */
                                   .round = ref.off};
        n->net_ops->sys_send(n, slot, &m, sizeof m);
    }
    torxp_net_unlock(n);
}

/* Idle: every piece staged toward dest has been released, so all its
 * credits are back and none waits to leave. */
int torxp_net_stage_idle(torx_pkt_dev_t *dev, torx_coord_t dest)
{
    torxp_net_t *n = torxp_net_of(dev);
    if (!torxp_net_stage_reaches(dev, dest))
        return 0;
    const unsigned slot = torx_coord_index(dev->shape, dest);
    torxp_net_lock(n);
    const torxp_net_stage_t *s = n->stage;
    const int idle = s->credits[slot] == (int32_t)s->window && !s->waiting[slot];
    torxp_net_unlock(n);
    return idle;
}

/* Between hosts every piece is a network message and the rendezvous one
 * transfer: over TCP staging to an idle peer won up to 64 KiB and lost
 * from 96 KiB (torx_stage_idle_max's page gives the figures). */
#define STAGE_IDLE_MAX (64u << 10)

size_t torxp_net_stage_idle_max(torx_pkt_dev_t *dev, torx_coord_t dest)
{
    (void)dev, (void)dest; /* torx_stage_idle_max has checked that the area reaches dest */
    return STAGE_IDLE_MAX;
}

unsigned torxp_net_stage_cost(const torx_pkt_dev_t *dev, torx_coord_t dest)
{
    (void)dev;
    (void)dest;
    return 0;
}

/* ---- From the device (locked) ------------------------------------------------------- */

void torxp_net_stage_tx_done(torxp_net_t *n, torxp_net_stage_buf_t *b)
{
    torxp_net_stage_t *s = n->stage;
    b->next = s->tx_free;
    s->tx_free = b;
    s->tx_busy--;
}

int torxp_net_stage_busy(const torxp_net_t *n)
{
    return n->stage && (n->stage->tx_busy || n->stage->nwaiting);
}

void torxp_net_stage_on_rx(torxp_net_t *n, torxp_net_stage_buf_t *b, size_t len)
{
    torxp_net_stage_t *s = n->stage;
    stage_hdr_t h = {.src = UINT32_MAX};
    if (len >= sizeof h)
        memcpy(&h, b->msg, sizeof h);
    const unsigned src = h.src;
    if (!s->window || src >= n->nslots || src == n->self_slot || n->slot_rank[src] < 0 ||
        len < sizeof h || len != sizeof h + h.len + h.pkt || h.seq != s->rx_seq[src]) {
        torxp_dev_fail(&n->base, TORX_ERR_PROTO,
                       "staged piece of %zu bytes from slot %u: bad sender, length or sequence "
                       "(%u, expected %u)",
                       len, src, h.seq, src < n->nslots && s->rx_seq ? s->rx_seq[src] : 0);
        n->net_ops->stage_rx_done(n, b);
        return;
    }
    if (h.credits) {
        if (h.credits > s->window || s->credits[src] + (int64_t)h.credits > (int64_t)s->window) {
            torxp_dev_fail(&n->base, TORX_ERR_PROTO,
                           "slot %u returned %u staging credits aboard a piece, more than it was "
                           "given",
                           src, h.credits);
            n->net_ops->stage_rx_done(n, b);
            return;
        }
        s->credits[src] += (int32_t)h.credits;
    }
    b->peer = src;
    b->voided = 0;
    uint32_t *ahead = &s->ahead[(size_t)src * s->window];
    for (unsigned k = 0; s->nahead && k < s->window; k++)
        if (ahead[k] == h.seq) { /* its void came first */
            ahead[k] = UINT32_MAX;
            s->nahead--;
            b->voided = 1;
        }
    s->rx_seq[src]++;
    b->next = NULL;
    *s->queue[src].tail = b;
    s->queue[src].tail = &b->next;
    if (h.pkt) /* after its piece is queued, as if it had come next */
        torxp_net_on_torus_copy(n, src, h.order, b->msg + sizeof h + h.len, h.pkt);
    if (b->voided) { /* its packet is in a holder: the piece can go */
        skip_voided(n, src);
        credit_back(n, src);
    }
}

void torxp_net_stage_on_sys(torxp_net_t *n, unsigned src, const torxp_net_sys_t *m)
{
    torxp_net_stage_t *s = n->stage;
    if (!s || !s->window) {
        torxp_dev_fail(&n->base, TORX_ERR_PROTO, "staging message from slot %u, but staging is off",
                       src);
        return;
    }
    if (m->pad != 1) { /* credits */
        if (m->arg > s->window || s->credits[src] + (int64_t)m->arg > (int64_t)s->window)
            torxp_dev_fail(&n->base, TORX_ERR_PROTO,
                           "slot %u returned %u staging credits, more than it was given", src,
                           m->arg);
        else
            s->credits[src] += (int32_t)m->arg;
        return;
    }
    /* A voided piece: it came before this message (same sender, in order). */
    for (torxp_net_stage_buf_t *b = s->queue[src].head; b; b = b->next) {
        stage_hdr_t h;
        memcpy(&h, b->msg, sizeof h);
        if (h.seq == (uint32_t)m->round && !b->voided) {
            b->voided = 1;
            skip_voided(n, src);
            credit_back(n, src);
            return;
        }
    }
    /* Not come yet: dropped when it does (a piece in flight is within the
     * window, and so is every void of one). */
    uint32_t *ahead = &s->ahead[(size_t)src * s->window];
    const uint32_t seq = (uint32_t)m->round;
    if (seq - s->rx_seq[src] < s->window)
        for (unsigned k = 0; k < s->window; k++)
            if (ahead[k] == UINT32_MAX) {
                ahead[k] = seq;
                s->nahead++;
                return;
            }
    torxp_dev_fail(&n->base, TORX_ERR_PROTO, "slot %u voided staged piece %llu, which never came",
                   src, (unsigned long long)m->round);
}
