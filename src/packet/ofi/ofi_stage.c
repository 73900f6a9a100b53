/* Staging on the ofi device: the staging area mapped onto one tagged
 * message per piece.
 *
 * Over a network, what costs is the number of messages: a 16 KiB eager
 * message cut into 240-byte torus packets is 70 sends and 70 receives
 * (a system call or more each over tcp;ofi_rxm), where one message of 16
 * KiB is one. So a piece travels as a message of its own, with a 32-byte
 * header naming its sender and sequence number, and the receiver keeps the
 * pieces of each sender in arrival order; the
 * descriptor packet the layer above sends next arrives after its piece
 * (FI_ORDER_SAS holds across tags), so torx_stage_data finds the piece at
 * the head of its sender's queue, where torx_stage_release takes it off.
 *
 * One message, not two: torx_stage_put only fills a send buffer, and the
 * piece waits for the next packet to the same task (the descriptor, sent
 * right after the put), which rides aboard: [header][piece][packet]. The
 * receiver queues the piece, then the packet as if it had come alone, in
 * a holder (net/net_torus.c), since the piece's buffer goes back to the
 * provider at its release, which may come before the packet's consume.
 * Between hosts every message costs a trip through both kernels' TCP
 * stacks (half the latency of a small message), so this halves what a
 * staged message pays in messages. A piece nothing comes for by the next
 * progress (the layer above does not always send at once) leaves alone.
 * Holders suffice: a carried packet is queued until consumed, and its
 * piece is released only after the packet has been read, so at most one
 * holder per unreleased piece (window x peers <= TORXP_OFI_STAGE_RX_MAX)
 * and one for the packet being read are in use.
 *
 * Flow control: each ordered pair has a window of `window` pieces, spent
 * by torx_stage_put and given back by the receiver as it releases them:
 * aboard its own next piece to that task when there is one (a reply, in a
 * ping-pong), else in a TORXP_NET_SYS_STAGE message once half a window is
 * released (a stream); the receiver keeps window x (tasks - 1)
 * buffers posted, so a piece always finds one. The window shrinks from 16
 * so that this stays within STAGE_RX_MAX buffers; past 257 tasks it is
 * zero and staging is off (the message layer then sends packets).
 *
 * torx_stage_unput cannot call back a piece already on the wire: it sends
 * TORXP_NET_SYS_STAGE with the voided sequence number instead, after the
 * piece and before any later descriptor, and the receiver drops the piece
 * when it comes to the head of the queue. */
#include "ofi.h"

#include <string.h>

/* A piece, its header and a packet aboard. Pieces of 16 KiB, the message
 * layer's TORX_STAGE_CHUNK, so an MPI message of 16 KiB is one piece; over
 * tcp;ofi_rxm the whole message stays within its eager size (16 KiB)
 * instead, since a longer one takes its rendezvous, a round trip more. */
#define STAGE_MSG_MAX (sizeof(stage_hdr_t) + 16384u + TORX_PKT_MAX_BYTES)
#define STAGE_MSG_MAX_RXM 16384u
/* Pieces in flight per ordered pair. One host over net on lo, against 4:
 * one-way bandwidth +15-19% from 256 B to 16 KiB, both ways +25% at 4 and
 * 16 KiB, latency level (docs/multihost.md). */
#define STAGE_WINDOW 16u
#define STAGE_RX_MAX TORXP_OFI_STAGE_RX_MAX
#define STAGE_TX 16u /* send buffers */

typedef struct stage_hdr {
    uint32_t src;     /* the sender's slot (an untagged message has no tag) */
    uint32_t seq;     /* per ordered pair, from 0 */
    uint16_t len;     /* the piece's bytes */
    uint16_t pkt;     /* the bytes of a packet aboard, after the piece; 0: none */
    uint32_t credits; /* staging credits given back to the receiver, aboard */
    uint32_t order;   /* the packet aboard: its number (the tag of one alone) */
    uint32_t pad[3];  /* the piece starts 32-byte aligned */
} stage_hdr_t;
static_assert(sizeof(stage_hdr_t) == 32, "stage header is 32 bytes");
static_assert(STAGE_MSG_MAX >= STAGE_MSG_MAX_RXM, "buffers take the longest message");

typedef struct stage_buf {
    torxp_ofi_ctx_t ctx; /* TORXP_OFI_CTX_STAGE_TX / _RX; ctx.peer = the other slot */
    struct stage_buf *next;
    int posted;   /* receive: the provider owns it */
    int voided;   /* receive: the sender took it back (unput) */
    uint32_t len; /* send: the piece's bytes */
    alignas(16) unsigned char msg[STAGE_MSG_MAX];
} stage_buf_t;

typedef struct stage_queue {
    stage_buf_t *head, **tail;
} stage_queue_t;

struct torxp_ofi_stage {
    unsigned window; /* pieces in flight per ordered pair; 0: staging off */
    size_t msg_max;  /* the longest message: header, piece and a packet */
    /* send side */
    stage_buf_t *tx, *tx_free;
    uint32_t *tx_seq;      /* per destination slot: the next piece's number */
    int32_t *credits;      /* per destination slot: pieces it still takes */
    stage_buf_t **waiting; /* per destination slot: a piece put, not yet sent */
    /* receive side */
    stage_buf_t *rx;
    unsigned nrx;
    stage_queue_t *queue;         /* per source slot: pieces come, in order */
    uint32_t *rx_seq;             /* per source slot: the next piece's number */
    uint32_t *released;           /* per source slot: released, not yet credited */
    unsigned tx_busy;             /* send buffers the provider still holds */
    unsigned long carried, alone; /* pieces sent with a packet aboard, and without */
};

static void post_stage_rx(torxp_ofi_dev_t *d, stage_buf_t *b)
{
    b->next = NULL;
    b->voided = 0;
    const ssize_t rc = fi_recv(d->ep, b->msg, sizeof b->msg, NULL, FI_ADDR_UNSPEC, &b->ctx.fi);
    b->posted = rc == 0;
    if (rc != 0) /* the buffers were counted at set-up: the provider took them then */
        torxp_ofi_fi_fail(d, "fi_trecv (staging buffer)", -1, (int)rc);
}

torx_status_t torxp_ofi_stage_setup(torxp_ofi_dev_t *d, long stage_bytes)
{
    torxp_ofi_stage_t *s = torxp_calloc(1, sizeof *s);
    if (!s)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for the staging state");
    d->stage = s;
    const unsigned peers = (unsigned)d->net.base.size - 1;
    if (stage_bytes <= 0 || peers == 0)
        return TORX_OK; /* TORX_STAGE_BYTES=0, or nobody to stage to */
    unsigned w = STAGE_WINDOW;
    while (w && w * peers > STAGE_RX_MAX)
        w /= 2;
    if (!w) {
        torxp_log(&d->net.base, 1,
                  "ofi device: %u peers: no staging (a piece in flight from each would take more "
                  "than %u receive buffers)",
                  peers, STAGE_RX_MAX);
        return TORX_OK;
    }
    s->nrx = w * peers;
    s->msg_max = strstr(d->prov, "ofi_rxm") ? STAGE_MSG_MAX_RXM : STAGE_MSG_MAX;
    s->tx = torxp_calloc(STAGE_TX, sizeof *s->tx);
    s->rx = torxp_calloc(s->nrx, sizeof *s->rx);
    s->tx_seq = torxp_calloc(d->net.nslots, sizeof *s->tx_seq);
    s->credits = torxp_calloc(d->net.nslots, sizeof *s->credits);
    s->queue = torxp_calloc(d->net.nslots, sizeof *s->queue);
    s->rx_seq = torxp_calloc(d->net.nslots, sizeof *s->rx_seq);
    s->released = torxp_calloc(d->net.nslots, sizeof *s->released);
    s->waiting = torxp_calloc(d->net.nslots, sizeof *s->waiting);
    if (!s->tx || !s->rx || !s->tx_seq || !s->credits || !s->queue || !s->rx_seq || !s->released ||
        !s->waiting)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for %u staging buffers",
                           s->nrx + STAGE_TX);
    for (unsigned i = 0; i < STAGE_TX; i++) {
        s->tx[i].ctx.kind = TORXP_OFI_CTX_STAGE_TX;
        s->tx[i].next = s->tx_free;
        s->tx_free = &s->tx[i];
    }
    for (unsigned slot = 0; slot < d->net.nslots; slot++) {
        s->credits[slot] = d->net.slot_rank[slot] >= 0 && slot != d->net.self_slot ? (int32_t)w : 0;
        s->queue[slot].tail = &s->queue[slot].head;
    }
    for (unsigned i = 0; i < s->nrx; i++) {
        s->rx[i].ctx.kind = TORXP_OFI_CTX_STAGE_RX;
        post_stage_rx(d, &s->rx[i]);
    }
    s->window = w; /* last: staging is on once every buffer is posted */
    return d->net.base.failed;
}

void torxp_ofi_stage_fini(torxp_ofi_dev_t *d)
{
    torxp_ofi_stage_t *s = d->stage;
    if (!s)
        return;
    free(s->tx);
    free(s->rx);
    free(s->tx_seq);
    free(s->credits);
    free(s->queue);
    free(s->rx_seq);
    free(s->released);
    free(s->waiting);
    free(s);
    d->stage = NULL;
}

/* ---- Ops ---------------------------------------------------------------------------- */

static torx_status_t send_waiting(torxp_ofi_dev_t *d, unsigned slot, const void *pkt, size_t bytes);

size_t torxp_ofi_stage_max(const torx_pkt_dev_t *dev)
{
    const torxp_ofi_dev_t *d = (const torxp_ofi_dev_t *)dev;
    return d->stage && d->stage->window
               ? d->stage->msg_max - sizeof(stage_hdr_t) - TORX_PKT_MAX_BYTES
               : 0;
}

int torxp_ofi_stage_reaches(const torx_pkt_dev_t *dev, torx_coord_t dest)
{
    const torxp_ofi_dev_t *d = (const torxp_ofi_dev_t *)dev;
    if (!d->stage || !d->stage->window || !torx_coord_in_shape(dev->shape, dest))
        return 0;
    const unsigned slot = torx_coord_index(dev->shape, dest);
    return d->net.slot_rank[slot] >= 0 && slot != d->net.self_slot;
}

torx_status_t torxp_ofi_stage_put(torx_pkt_dev_t *dev, torx_coord_t dest, const void *data,
                                  size_t len, torx_stage_ref_t *ref)
{
    torxp_ofi_dev_t *d = torxp_ofi_of(dev);
    if (!data || !ref || len < 1 || len > torxp_ofi_stage_max(dev) ||
        !torxp_ofi_stage_reaches(dev, dest))
        return torxp_error(TORX_ERR_INVAL, "torx: torx_stage_put: %zu bytes to (%u,%u,%u,%u): %s",
                           len, dest.x, dest.y, dest.z, dest.t,
                           !data || !ref                         ? "NULL data or ref"
                           : !torxp_ofi_stage_reaches(dev, dest) ? "no staging toward that task"
                                                                 : "not 1..torx_stage_max bytes");
    torxp_ofi_stage_t *s = d->stage;
    const unsigned slot = torx_coord_index(dev->shape, dest);
    torxp_ofi_lock(d);
    torx_status_t rc = d->net.base.failed;
    if (rc == TORX_OK && s->waiting[slot]) /* pieces leave in order */
        rc = send_waiting(d, slot, NULL, 0);
    if (rc == TORX_OK && s->credits[slot] > 0 && !s->tx_free)
        torxp_ofi_progress(d); /* completions free send buffers */
    if (rc == TORX_OK && (s->credits[slot] <= 0 || !s->tx_free))
        rc = TORX_NO_ROOM;
    if (rc == TORX_OK) {
        stage_buf_t *b = s->tx_free;
        s->tx_free = b->next;
        b->len = (uint32_t)len;
        b->ctx.peer = slot;
        memcpy(b->msg + sizeof(stage_hdr_t), data, len);
        s->waiting[slot] = b;
        d->stage_waiting++;
        s->credits[slot]--;
        *ref = (torx_stage_ref_t){.off = s->tx_seq[slot]++, .len = (uint32_t)len};
    }
    torxp_ofi_unlock(d);
    return rc;
}

/* Sends slot's waiting piece, with the packet pkt (bytes long) aboard when
 * bytes > 0; TORX_NO_ROOM when the provider takes nothing (the piece keeps
 * waiting). Locked. */
static torx_status_t send_waiting(torxp_ofi_dev_t *d, unsigned slot, const void *pkt, size_t bytes)
{
    torxp_ofi_stage_t *s = d->stage;
    stage_buf_t *b = s->waiting[slot];
    const stage_hdr_t h = {.src = d->net.self_slot,
                           .seq = s->tx_seq[slot] - 1,
                           .len = (uint16_t)b->len,
                           .pkt = (uint16_t)bytes,
                           .credits = s->released[slot],
                           .order = bytes ? d->net.tx_order[slot] : 0};
    memcpy(b->msg, &h, sizeof h);
    if (bytes)
        memcpy(b->msg + sizeof h + b->len, pkt, bytes);
    const size_t total = sizeof h + b->len + bytes;
    const ssize_t frc = torxp_ofi_tsend_retry(d, b->msg, total, slot, TORXP_OFI_UNTAGGED, &b->ctx);
    if (frc == -FI_EAGAIN)
        return TORX_NO_ROOM;
    s->waiting[slot] = NULL;
    d->stage_waiting--;
    s->released[slot] = 0; /* given back aboard */
    if (frc != 0) {
        b->next = s->tx_free;
        s->tx_free = b;
        return torxp_ofi_fi_fail(d, "fi_tsendmsg (staged piece)", (int)slot, (int)frc);
    }
    if (total <= d->inject_size) { /* sent inline: the provider copied it */
        b->next = s->tx_free;
        s->tx_free = b;
    } else {
        s->tx_busy++;
    }
    if (bytes) { /* net/ counts it in tx_order as sent (torxp_ofi_send_packet) */
        s->carried++;
    } else {
        s->alone++;
    }
    return TORX_OK;
}

torx_status_t torxp_ofi_stage_carry(torxp_ofi_dev_t *d, unsigned slot, const void *pkt,
                                    size_t bytes, int *carried)
{
    torxp_ofi_stage_t *s = d->stage;
    *carried = 0;
    if (!s->waiting[slot])
        return TORX_OK;
    const int fits = sizeof(stage_hdr_t) + s->waiting[slot]->len + bytes <= s->msg_max;
    const torx_status_t rc = send_waiting(d, slot, pkt, fits ? bytes : 0);
    *carried = rc == TORX_OK && fits;
    return rc;
}

void torxp_ofi_stage_counts(torxp_ofi_dev_t *d, unsigned long *carried, unsigned long *alone)
{
    torxp_ofi_lock(d);
    *carried = d->stage ? d->stage->carried : 0;
    *alone = d->stage ? d->stage->alone : 0;
    torxp_ofi_unlock(d);
}

void torxp_ofi_stage_flush(torxp_ofi_dev_t *d)
{
    torxp_ofi_stage_t *s = d->stage;
    for (unsigned slot = 0; slot < d->net.nslots && d->stage_waiting; slot++)
        if (s->waiting[slot] && send_waiting(d, slot, NULL, 0) != TORX_OK)
            return; /* the provider is busy: the next progress */
}

/* Drops the voided pieces at the head of src's queue (their buffers go
 * back, their credits with the next release). */
static void skip_voided(torxp_ofi_dev_t *d, unsigned src)
{
    torxp_ofi_stage_t *s = d->stage;
    stage_queue_t *q = &s->queue[src];
    while (q->head && q->head->voided) {
        stage_buf_t *b = q->head;
        q->head = b->next;
        if (!q->head)
            q->tail = &q->head;
        s->released[src]++;
        post_stage_rx(d, b);
    }
}

/* The head piece of src's queue if it is the one ref names, else NULL
 * (and a protocol error). Locked. */
static stage_buf_t *head_piece(torxp_ofi_dev_t *d, unsigned src, torx_stage_ref_t ref)
{
    torxp_ofi_stage_t *s = d->stage;
    skip_voided(d, src);
    stage_buf_t *b = s->queue[src].head;
    stage_hdr_t h = {0};
    if (b)
        memcpy(&h, b->msg, sizeof h);
    if (!b || h.seq != ref.off || h.len != ref.len) {
        const torx_coord_t c = torxp_net_coord_of(&d->net, src);
        torxp_dev_fail(&d->net.base, TORX_ERR_PROTO,
                       "staged piece %u (%u bytes) from (%u,%u,%u,%u) is not the next that came "
                       "(%s%u, %u bytes)",
                       ref.off, ref.len, c.x, c.y, c.z, c.t, b ? "piece " : "none; next ",
                       b ? h.seq : s->rx_seq[src], h.len);
        return NULL;
    }
    return b;
}

static int src_slot(const torxp_ofi_dev_t *d, torx_coord_t src, unsigned *slot)
{
    if (!d->stage || !d->stage->window || !torx_coord_in_shape(d->net.base.shape, src))
        return 0;
    *slot = torx_coord_index(d->net.base.shape, src);
    return d->net.slot_rank[*slot] >= 0;
}

const void *torxp_ofi_stage_data(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref)
{
    torxp_ofi_dev_t *d = torxp_ofi_of(dev);
    unsigned slot;
    if (!src_slot(d, src, &slot))
        return NULL;
    torxp_ofi_lock(d);
    const stage_buf_t *b = head_piece(d, slot, ref);
    torxp_ofi_unlock(d);
    return b ? b->msg + sizeof(stage_hdr_t) : NULL;
}

/* Gives src back the credits for the pieces released, half a window at a
 * time (all of it when the window is that small). */
static void credit_back(torxp_ofi_dev_t *d, unsigned src)
{
    torxp_ofi_stage_t *s = d->stage;
    if (s->released[src] < (s->window + 1) / 2)
        return;
    const torxp_net_sys_t m = {
        .type = TORXP_NET_SYS_STAGE, .version = TORXP_NET_WIRE_VERSION, .arg = s->released[src]};
    s->released[src] = 0;
    torxp_ofi_sys_send(d, src, &m, sizeof m);
}

void torxp_ofi_stage_release(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref)
{
    torxp_ofi_dev_t *d = torxp_ofi_of(dev);
    unsigned slot;
    if (!src_slot(d, src, &slot))
        return;
    torxp_ofi_lock(d);
    torxp_ofi_stage_t *s = d->stage;
    stage_buf_t *b = head_piece(d, slot, ref);
    if (b) {
        stage_queue_t *q = &s->queue[slot];
        q->head = b->next;
        if (!q->head)
            q->tail = &q->head;
        s->released[slot]++;
        post_stage_rx(d, b);
        credit_back(d, slot);
    }
    torxp_ofi_unlock(d);
}

void torxp_ofi_stage_unput(torx_pkt_dev_t *dev, torx_coord_t dest, torx_stage_ref_t ref)
{
    torxp_ofi_dev_t *d = torxp_ofi_of(dev);
    if (!torxp_ofi_stage_reaches(dev, dest))
        return;
    const unsigned slot = torx_coord_index(dev->shape, dest);
    torxp_ofi_stage_t *s = d->stage;
    torxp_ofi_lock(d);
    stage_buf_t *w = s->waiting[slot];
    if (w && ref.off == s->tx_seq[slot] - 1 && ref.len == w->len) {
        /* Not sent yet (it is the last put): it never leaves. */
        s->waiting[slot] = NULL;
        d->stage_waiting--;
        w->next = s->tx_free;
        s->tx_free = w;
        s->tx_seq[slot]--;
        s->credits[slot]++;
    } else {
        const torxp_net_sys_t m = {.type = TORXP_NET_SYS_STAGE,
                                   .version = TORXP_NET_WIRE_VERSION,
                                   .pad = 1, /* a voided piece, not credits */
                                   .round = ref.off};
        torxp_ofi_sys_send(d, slot, &m, sizeof m);
    }
    torxp_ofi_unlock(d);
}

/* Never idle: what lets a pair on one host stage past the eager limit (two
 * cores copying at once beat one process_vm_readv) has not been measured
 * between hosts, where the rendezvous is one RMA read and a staged message
 * one network message per 16 KiB piece; so long messages keep the
 * rendezvous there, as before. (The credits would tell: every one back.) */
int torxp_ofi_stage_idle(torx_pkt_dev_t *dev, torx_coord_t dest)
{
    (void)dev;
    (void)dest;
    return 0;
}

unsigned torxp_ofi_stage_cost(const torx_pkt_dev_t *dev, torx_coord_t dest)
{
    (void)dev;
    (void)dest;
    return 0;
}

/* ---- Completions and device messages (locked) ---------------------------------------- */

void torxp_ofi_stage_on_tx(torxp_ofi_dev_t *d, torxp_ofi_ctx_t *ctx, int err)
{
    stage_buf_t *b = (stage_buf_t *)ctx;
    if (err)
        torxp_ofi_fi_fail(d, "a staged piece's fi_tsend", (int)ctx->peer, err);
    b->next = d->stage->tx_free;
    d->stage->tx_free = b;
    d->stage->tx_busy--;
}

int torxp_ofi_stage_busy(const torxp_ofi_dev_t *d)
{
    return d->stage && (d->stage->tx_busy || d->stage_waiting);
}

void torxp_ofi_stage_on_rx(torxp_ofi_dev_t *d, torxp_ofi_ctx_t *ctx, size_t len, uint64_t credits)
{
    torxp_ofi_stage_t *s = d->stage;
    stage_buf_t *b = (stage_buf_t *)ctx;
    b->posted = 0;
    stage_hdr_t h = {.src = UINT32_MAX};
    if (len >= sizeof h)
        memcpy(&h, b->msg, sizeof h);
    const unsigned src = h.src;
    if (src >= d->net.nslots || src == d->net.self_slot || d->net.slot_rank[src] < 0 ||
        len < sizeof h || len != sizeof h + h.len + h.pkt || h.seq != s->rx_seq[src]) {
        torxp_dev_fail(&d->net.base, TORX_ERR_PROTO,
                       "staged piece of %zu bytes from slot %u: bad sender, length or sequence "
                       "(%u, expected %u)",
                       len, src, h.seq, src < d->net.nslots ? s->rx_seq[src] : 0);
        post_stage_rx(d, b);
        return;
    }
    if (h.credits) {
        if (h.credits > s->window || s->credits[src] + (int64_t)h.credits > (int64_t)s->window) {
            torxp_dev_fail(&d->net.base, TORX_ERR_PROTO,
                           "slot %u returned %u staging credits aboard a piece, more than it was "
                           "given",
                           src, h.credits);
            post_stage_rx(d, b);
            return;
        }
        s->credits[src] += (int32_t)h.credits;
    }
    if (credits) /* torus credits, aboard (see tsend in ofi_torus.c) */
        torxp_net_credits_back(&d->net, src, credits);
    s->rx_seq[src]++;
    b->next = NULL;
    *s->queue[src].tail = b;
    s->queue[src].tail = &b->next;
    if (h.pkt) /* after its piece is queued, as if it had come next */
        torxp_net_on_torus_copy(&d->net, src, h.order, b->msg + sizeof h + h.len, h.pkt);
}

void torxp_ofi_stage_on_sys(torxp_ofi_dev_t *d, unsigned src, const torxp_net_sys_t *m)
{
    torxp_ofi_stage_t *s = d->stage;
    if (!s->window) {
        torxp_dev_fail(&d->net.base, TORX_ERR_PROTO,
                       "staging message from slot %u, but staging is off", src);
        return;
    }
    if (m->pad != 1) { /* credits */
        if (m->arg > s->window || s->credits[src] + (int64_t)m->arg > (int64_t)s->window)
            torxp_dev_fail(&d->net.base, TORX_ERR_PROTO,
                           "slot %u returned %u staging credits, more than it was given", src,
                           m->arg);
        else
            s->credits[src] += (int32_t)m->arg;
        return;
    }
    /* A voided piece: it came before this message (same sender, in order). */
    for (stage_buf_t *b = s->queue[src].head; b; b = b->next) {
        stage_hdr_t h;
        memcpy(&h, b->msg, sizeof h);
        if (h.seq == (uint32_t)m->round && !b->voided) {
            b->voided = 1;
            skip_voided(d, src);
            credit_back(d, src);
            return;
        }
    }
    torxp_dev_fail(&d->net.base, TORX_ERR_PROTO,
                   "slot %u voided staged piece %llu, which never came", src,
                   (unsigned long long)m->round);
}
