/* The ofi device's torus: packets as tagged messages, per-pair credits for
 * back-pressure, a send-buffer pool, deposit lines by sender fan-out,
 * reception queues with chaos, progress, and the doorbell.
 *
 * Order. Deterministic packets from one task to another must arrive in the
 * order they were injected. The endpoint is opened with FI_ORDER_SAS (send
 * after send), which every provider torx accepts offers (ofi_open.c refuses
 * one without), but the providers still complete messages out of order at
 * times (see the tag in ofi.h), and a packet aboard a staged piece arrives
 * through another queue. So every torus packet carries its number per
 * ordered pair in the tag, and the receiver parks one that comes early
 * until those before it have come (on_torus_in_order), then appends each
 * to the reception queue its sender is pinned to.
 *
 * Chaos. As on shm, an adaptive packet goes to a reception queue picked by
 * a seeded generator when TORX_CHAOS is set, and peek starts its scan at a
 * random queue: adaptive packets really overtake each other, deterministic
 * ones never do.
 *
 * Back-pressure. On shm a packet takes a slot of the destination's FIFO
 * and TORX_NO_ROOM says the FIFO is full. Here every ordered pair of tasks
 * has a window of TORX_FIFO_PACKETS credits: a packet costs the sender one,
 * and the receiver gives them back as the layer above consumes: aboard its
 * next torus packet or staged piece to that sender (remote CQ data, where
 * the provider has it), else in a CREDIT message once half the window is
 * owed, and all of them before it sleeps. A receiver therefore never holds
 * more unconsumed packets from one sender than the window, whatever the
 * provider buffers. A send also needs a buffer from the pool
 * (TORX_OFI_TX_PACKETS) until the provider completes it, unless it fits the
 * provider's inline size: an empty pool or a spent window is TORX_NO_ROOM,
 * nothing taken. torx_pkt_room reports the smaller of the two, a true lower
 * bound.
 *
 * Deposit bit. The sender sends one copy to every node of the line, as the
 * shm device does. Receiver forwarding would make a receiving task inject
 * on the sender's behalf, which needs credits toward the next hop and the
 * injecting thread's state from the receiving thread; sender fan-out keeps
 * every copy an ordinary deterministic packet of the sender, so the order
 * between a deposit packet and the sender's other packets holds at every
 * node with no further rule, and the packet layer keeps no message state.
 * A line that runs out of credits or buffers midway is finished later from
 * a stash, and everything injected after it waits for it (TORX_NO_ROOM),
 * as on shm.
 *
 * Doorbell. torx_pkt_wait sleeps in poll(2) on the completion queue's wait
 * descriptor (FI_WAIT_FD) and an eventfd that torx_pkt_wake writes. Before
 * sleeping it asks fi_trywait whether the queue is really empty; that
 * call closes the race between the last read and the sleep (a completion
 * that comes after it makes a descriptor readable). fi_cq_sread would block
 * in the provider with the lock released between reading and acting on a
 * completion, and a wake from another thread could only interrupt it
 * through fi_cq_signal, which not every provider implements; the eventfd
 * works everywhere. A provider without wait descriptors gets sleeps cut
 * into slices of WAIT_SLICE_MS with progress in between: it progresses
 * manually, so nothing would wake a longer sleep. So does a provider whose
 * descriptor stays readable while its queue is empty: net (libfabric
 * 1.17) nests its progress epoll set in the queue's descriptor, and that
 * set polls readable with no socket ready, which would turn every idle wait
 * into a busy loop of system calls. A wake that finds no completion is
 * taken as such, and the rest of that wait sleeps in slices. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* ppoll */
#endif

#include "ofi.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* Completions read per fi_cq_read call. */
#define OFI_CQ_BATCH 16
/* Longest sleep when the provider offers no wait descriptor. */
#define WAIT_SLICE_MS 1
/* A nap while the device's own sends wait for the provider. */
#define WAIT_NAP_NS 50000L

torx_status_t torxp_ofi_fi_fail(torxp_ofi_dev_t *d, const char *call, int peer_slot, int err)
{
    if (err < 0)
        err = -err;
    if (d->closing) { /* the peers may be gone already; nothing waits for us */
        torxp_log(&d->base, 2, "at close: %s: %s", call, fi_strerror(err));
        return TORX_OK;
    }
    if (peer_slot < 0 || d->slot_rank[peer_slot] < 0)
        return torxp_dev_fail(&d->base, TORX_ERR_SYS, "%s failed (provider %s): %s", call, d->prov,
                              fi_strerror(err));
    const torx_coord_t c = torxp_ofi_coord_of(d, (unsigned)peer_slot);
    return torxp_dev_fail(&d->base, TORX_ERR_PEER,
                          "rank %d at (%u,%u,%u,%u) is unreachable: %s failed (provider %s): %s",
                          d->slot_rank[peer_slot], c.x, c.y, c.z, c.t, call, d->prov,
                          fi_strerror(err));
}

/* ---- Receive buffers -------------------------------------------------------- */

static inline int is_sys_buf(const torxp_ofi_dev_t *d, unsigned i)
{
    return i >= d->nrx && i < d->nrx + d->nsysrx;
}

static inline int is_holder(const torxp_ofi_dev_t *d, unsigned i)
{
    return i >= d->nrx + d->nsysrx;
}

/* Gives receive buffer i back: a holder to its stack; a posted buffer to
 * the list that the next progress posts, before it reads the completion
 * queue. A ping-pong thus posts the buffer of the packet it answered after
 * the answer has left, not on the way to it. */
static void post_rx(torxp_ofi_dev_t *d, unsigned i)
{
    if (is_holder(d, i)) /* never the provider's */
        d->hold_free[d->hold_nfree++] = i;
    else
        d->repost[d->nrepost++] = i;
}

/* Posts the buffers given back, from the newest (a provider that is busy
 * keeps the rest for the next progress). */
static void post_pending(torxp_ofi_dev_t *d)
{
    while (d->nrepost) {
        const unsigned i = d->repost[d->nrepost - 1];
        torxp_ofi_rxbuf_t *b = &d->rxbufs[i];
        const int sys = is_sys_buf(d, i);
        const ssize_t rc = fi_trecv(d->ep, b->data, sys ? TORXP_OFI_SYS_MAX : TORX_PKT_MAX_BYTES,
                                    NULL, FI_ADDR_UNSPEC,
                                    torxp_ofi_tag(sys ? TORXP_OFI_TAG_SYS : TORXP_OFI_TAG_TORUS, 0),
                                    TORXP_OFI_RECV_IGNORE, &b->ctx.fi);
        if (rc == -FI_EAGAIN)
            return;
        d->nrepost--;
        if (rc != 0) {
            torxp_ofi_fi_fail(d, "fi_trecv", -1, (int)rc);
            return;
        }
    }
}

/* ---- Device-internal sends ---------------------------------------------------- */

/* One tagged send: inline (FI_INJECT, counted in inj_inflight) when it fits
 * the provider's inject size, else from buf, which must stay put until the
 * completion names ctx. */
static ssize_t tsend(torxp_ofi_dev_t *d, const void *buf, size_t len, unsigned slot, unsigned kind,
                     torxp_ofi_ctx_t *ctx)
{
    const int inl = len <= d->inject_size;
    struct iovec iov = {(void *)buf, len};
    uint64_t flags = inl ? FI_INJECT | FI_COMPLETION : FI_COMPLETION;
    void *const context = inl ? &d->inj_ctx[slot].fi : &ctx->fi;
    /* Torus packets and staged pieces give back the credits owed to their
     * destination: a reply carries them, and no credit message of its own
     * costs a send (a system call) on the way to it. */
    const uint64_t credits =
        d->cq_data && (kind == TORXP_OFI_UNTAGGED || (kind & 0xffu) == TORXP_OFI_TAG_TORUS)
            ? d->consumed[slot]
            : 0;
    if (credits)
        flags |= FI_REMOTE_CQ_DATA;
    ssize_t rc;
    if (kind == TORXP_OFI_UNTAGGED) { /* staged pieces: see ofi_stage.c */
        const struct fi_msg m = {.msg_iov = &iov,
                                 .iov_count = 1,
                                 .addr = d->slot_addr[slot],
                                 .context = context,
                                 .data = credits};
        rc = fi_sendmsg(d->ep, &m, flags);
    } else {
        const struct fi_msg_tagged m = {.msg_iov = &iov,
                                        .iov_count = 1,
                                        .addr = d->slot_addr[slot],
                                        .tag = torxp_ofi_tag(kind, d->self_slot),
                                        .context = context,
                                        .data = credits};
        rc = fi_tsendmsg(d->ep, &m, flags);
    }
    if (rc == 0) {
        d->consumed[slot] -= (uint32_t)credits;
        if (inl)
            d->inj_inflight++;
    }
    return rc;
}

static void sys_flush(torxp_ofi_dev_t *d)
{
    while (d->sys_head) {
        torxp_ofi_sysmsg_t *m = d->sys_head;
        const int inl = m->len <= d->inject_size;
        const ssize_t rc = tsend(d, m->data, m->len, m->ctx.peer, TORXP_OFI_TAG_SYS, &m->ctx);
        if (rc == -FI_EAGAIN)
            return; /* the provider is busy: later, still in order */
        d->sys_head = m->next;
        if (!d->sys_head)
            d->sys_tail = &d->sys_head;
        if (rc != 0) {
            torxp_ofi_fi_fail(d, "fi_tsendmsg (device message)", (int)m->ctx.peer, (int)rc);
            free(m);
        } else if (inl) {
            free(m); /* inject: the provider copied it */
        } else {
            d->sys_inflight++;
        }
    }
}

torx_status_t torxp_ofi_sys_send(torxp_ofi_dev_t *d, unsigned slot, const void *msg, size_t len)
{
    assert(len <= TORXP_OFI_SYS_MAX && len >= sizeof(torxp_ofi_sys_t));
    torxp_ofi_sysmsg_t *m = torxp_malloc(sizeof *m);
    if (!m)
        return torxp_dev_fail(&d->base, TORX_ERR_NOMEM,
                              "out of memory for a device-internal message to slot %u", slot);
    m->ctx.kind = TORXP_OFI_CTX_SYS;
    m->ctx.peer = slot;
    m->next = NULL;
    m->len = (uint32_t)len;
    memcpy(m->data, msg, len);
    *d->sys_tail = m;
    d->sys_tail = &m->next;
    sys_flush(d);
    return TORX_OK;
}

/* Gives src back the credits for the packets consumed from it. */
static void credit_return(torxp_ofi_dev_t *d, unsigned src)
{
    const torxp_ofi_sys_t m = {
        .type = TORXP_OFI_SYS_CREDIT, .version = TORXP_OFI_WIRE_VERSION, .arg = d->consumed[src]};
    d->consumed[src] = 0;
    torxp_ofi_sys_send(d, src, &m, sizeof m);
}

/* Liveness. A peer that dies leaves tcp;ofi_rxm reconnecting to it
 * quietly, with the sends toward it neither completing nor failing. A probe
 * is sent from a buffer of its own (not inline), so its completion means the
 * provider transmitted it, which needs a connection but not the peer's
 * attention: a live peer's kernel takes it even while the peer computes. */
void torxp_ofi_ping(torxp_ofi_dev_t *d, unsigned slot)
{
    struct torxp_ofi_ping *p = &d->pings[slot];
    const double now = torxp_mono_s();
    double since = p->sent_at;
    if (p->sent_at == 0) {
        p->ctx.kind = TORXP_OFI_CTX_PING;
        p->ctx.peer = slot;
        p->msg = (torxp_ofi_sys_t){.type = TORXP_OFI_SYS_PING, .version = TORXP_OFI_WIRE_VERSION};
        const ssize_t rc = fi_tsend(d->ep, &p->msg, sizeof p->msg, NULL, d->slot_addr[slot],
                                    torxp_ofi_tag(TORXP_OFI_TAG_SYS, d->self_slot), &p->ctx.fi);
        if (rc == 0) {
            p->sent_at = now;
            p->refused_since = 0;
            return;
        }
        if (rc != -FI_EAGAIN) {
            torxp_ofi_fi_fail(d, "fi_tsend (liveness probe)", (int)slot, (int)rc);
            return;
        }
        /* Refused: tcp;ofi_rxm does so while it reconnects to a peer that
         * closed the connection, for as long as the peer stays away. */
        if (p->refused_since == 0)
            p->refused_since = now;
        since = p->refused_since;
    }
    if (now - since > TORXP_OFI_PEER_TIMEOUT_S) {
        const torx_coord_t c = torxp_ofi_coord_of(d, slot);
        torxp_dev_fail(&d->base, TORX_ERR_PEER,
                       "rank %d at (%u,%u,%u,%u) is unreachable: provider %s has not delivered a "
                       "probe to it in %.0f s (the task died, or the network to it is down)",
                       d->slot_rank[slot], c.x, c.y, c.z, c.t, d->prov, now - since);
    }
}

/* ---- Completions ------------------------------------------------------------------ */

void torxp_ofi_credits_back(torxp_ofi_dev_t *d, unsigned src, uint64_t n)
{
    if (n > d->credit_max || d->credits[src] + (int64_t)n > (int64_t)d->credit_max)
        torxp_dev_malformed(&d->base, "slot %u returned %llu credits, more than it was given", src,
                            (unsigned long long)n);
    else
        d->credits[src] += (int32_t)n;
}

/* A torus packet arrived in buffer i from slot src: checked, then queued. */
static void on_torus(torxp_ofi_dev_t *d, unsigned i, unsigned src, size_t len)
{
    torxp_ofi_rxbuf_t *b = &d->rxbufs[i];
    const torx_pkt_hdr_t *h = (const torx_pkt_hdr_t *)b->data;
    const char *bad = NULL;
    if (src >= d->nslots || d->slot_rank[src] < 0)
        bad = "sender slot outside the job";
    else if (len < TORX_PKT_HDR_BYTES || len != TORX_PKT_HDR_BYTES + (size_t)h->payload_len)
        bad = "message length disagrees with the header";
    else if ((bad = torxp_hdr_invalid(h, d->base.shape)) == NULL &&
             !torx_coord_equal(h->dest, d->base.self) && !(h->ctl & TORX_PKT_DEPOSIT))
        bad = "packet for another task";
    else if (!bad && (h->ctl & TORX_PKT_SYS))
        bad = "device-internal bit set on a torus packet";
    if (TORXP_UNLIKELY(bad != NULL)) {
        torxp_dev_malformed(&d->base, "torus packet of %zu bytes from slot %u (%s)", len, src, bad);
        if (src < d->nslots && d->slot_rank[src] >= 0 && ++d->consumed[src] >= 1)
            credit_return(d, src); /* the sender spent a credit on it */
        post_rx(d, i);
        return;
    }
    b->src = src;
    b->len = (uint32_t)len;
    unsigned q = src % TORXP_OFI_RXQ;
    if ((h->ctl & TORX_PKT_ADAPTIVE) && d->chaos_rx)
        q = (unsigned)(torxp_chaos_next(&d->chaos_rx) >> 33) % TORXP_OFI_RXQ;
    torxp_ofi_rxq_t *rq = &d->rxq[q];
    rq->ring[rq->tail++ & d->rxq_mask] = i; /* never full: it takes every buffer and holder */
}

/* Queues buffer i, a torus packet from src, once every packet src sent
 * before it is queued: early ones wait in src's parked list, sorted by
 * their number (see the tag in ofi.h). */
static void on_torus_in_order(torxp_ofi_dev_t *d, unsigned i, unsigned src, size_t len)
{
    torxp_ofi_rxbuf_t *b = &d->rxbufs[i];
    if (src >= d->nslots || d->slot_rank[src] < 0) {
        on_torus(d, i, src, len); /* refused there, by name */
        return;
    }
    const uint32_t ahead = (b->order - d->rx_order[src]) & TORXP_OFI_ORDER_MASK;
    if (TORXP_LIKELY(ahead == 0)) {
        on_torus(d, i, src, len);
        d->rx_order[src] = (d->rx_order[src] + 1) & TORXP_OFI_ORDER_MASK;
        while (d->parked[src] != UINT32_MAX) { /* the ones it held up */
            torxp_ofi_rxbuf_t *p = &d->rxbufs[d->parked[src]];
            if (p->order != d->rx_order[src])
                break;
            const unsigned j = d->parked[src];
            d->parked[src] = p->park_next;
            on_torus(d, j, src, p->len);
            d->rx_order[src] = (d->rx_order[src] + 1) & TORXP_OFI_ORDER_MASK;
        }
        return;
    }
    if (ahead > d->credit_max) { /* more in flight than the credits allow */
        torxp_dev_fail(&d->base, TORX_ERR_PROTO,
                       "torus packet number %u from slot %u when %u was due: more packets in "
                       "flight than the %u credits allow",
                       b->order, src, d->rx_order[src], d->credit_max);
        post_rx(d, i);
        return;
    }
    d->early++;
    b->src = src;
    b->len = (uint32_t)len;
    uint32_t *at = &d->parked[src];
    while (*at != UINT32_MAX &&
           ((d->rxbufs[*at].order - d->rx_order[src]) & TORXP_OFI_ORDER_MASK) < ahead)
        at = &d->rxbufs[*at].park_next;
    b->park_next = *at;
    *at = i;
}

void torxp_ofi_torus_on_carried(torxp_ofi_dev_t *d, unsigned src, uint32_t order, const void *pkt,
                                size_t len)
{
    if (!d->hold_nfree || len > TORX_PKT_MAX_BYTES) { /* the bound in ofi.h failed us */
        torxp_dev_fail(&d->base, TORX_ERR_PROTO,
                       "a packet of %zu bytes aboard a staged piece from slot %u: %s", len, src,
                       len > TORX_PKT_MAX_BYTES ? "too long" : "no holder free");
        return;
    }
    const unsigned i = d->hold_free[--d->hold_nfree];
    memcpy(d->rxbufs[i].data, pkt, len);
    d->rxbufs[i].order = order & TORXP_OFI_ORDER_MASK;
    on_torus_in_order(d, i, src, len);
}

static void on_sys(torxp_ofi_dev_t *d, unsigned i, unsigned src, size_t len)
{
    const torxp_ofi_sys_t *m = (const torxp_ofi_sys_t *)d->rxbufs[i].data;
    if (src >= d->nslots || d->slot_rank[src] < 0 || len < sizeof *m ||
        m->version != TORXP_OFI_WIRE_VERSION) {
        torxp_dev_malformed(
            &d->base, "device message of %zu bytes from slot %u (bad sender, length or version)",
            len, src);
    } else {
        switch (m->type) {
        case TORXP_OFI_SYS_CREDIT:
            torxp_ofi_credits_back(d, src, m->arg);
            break;
        case TORXP_OFI_SYS_CN_UP:
        case TORXP_OFI_SYS_CN_DOWN:
        case TORXP_OFI_SYS_GI_UP:
        case TORXP_OFI_SYS_GI_DOWN:
            torxp_ofi_cn_on_sys(d, src, m, len);
            break;
        case TORXP_OFI_SYS_GET_REQ:
        case TORXP_OFI_SYS_GET_DONE:
        case TORXP_OFI_SYS_PUT_REQ:
        case TORXP_OFI_SYS_PUT_DONE:
            torxp_ofi_bulk_on_sys(d, src, m, len);
            break;
        case TORXP_OFI_SYS_STAGE:
            torxp_ofi_stage_on_sys(d, src, m);
            break;
        case TORXP_OFI_SYS_PING:
            if (d->heard && !d->heard[src]) {
                d->heard[src] = 1;
                d->nheard++;
            }
            break;
        default:
            torxp_dev_malformed(&d->base, "device message of unknown type %u from slot %u", m->type,
                                src);
        }
    }
    post_rx(d, i);
}

static void on_tx_done(torxp_ofi_dev_t *d, torxp_ofi_ctx_t *ctx, int err)
{
    if (TORXP_UNLIKELY(ctx == NULL)) {
        /* udp;ofi_rxd reports an inline send's completion without its
         * context; every other send has one. */
        if (d->inj_inflight)
            d->inj_inflight--;
        if (err)
            torxp_ofi_fi_fail(d, "an inline send", -1, err);
        return;
    }
    switch (ctx->kind) {
    case TORXP_OFI_CTX_TX: {
        torxp_ofi_txbuf_t *t = (torxp_ofi_txbuf_t *)ctx;
        if (err)
            torxp_ofi_fi_fail(d, "a torus packet's fi_tsend", (int)ctx->peer, err);
        t->next_free = d->tx_free;
        d->tx_free = (int)(t - d->txbufs);
        d->tx_nfree++;
        break;
    }
    case TORXP_OFI_CTX_SYS: {
        torxp_ofi_sysmsg_t *m = (torxp_ofi_sysmsg_t *)ctx;
        if (err)
            torxp_ofi_fi_fail(d, "a device message's fi_tsend", (int)ctx->peer, err);
        d->sys_inflight--;
        free(m);
        break;
    }
    case TORXP_OFI_CTX_RMA:
        torxp_ofi_bulk_on_rma(d, ctx, err);
        break;
    case TORXP_OFI_CTX_BULK_TX:
        torxp_ofi_bulk_on_msg(d, ctx, err);
        break;
    case TORXP_OFI_CTX_STAGE_TX:
        torxp_ofi_stage_on_tx(d, ctx, err);
        break;
    case TORXP_OFI_CTX_PING:
        d->pings[ctx->peer].sent_at = 0;
        if (err)
            torxp_ofi_fi_fail(d, "a liveness probe", (int)ctx->peer, err);
        break;
    case TORXP_OFI_CTX_INJ:
        if (err)
            torxp_ofi_fi_fail(d, "an inline send", (int)ctx->peer, err);
        d->inj_inflight--;
        break;
    default:
        torxp_dev_fail(&d->base, TORX_ERR_PROTO, "send completion with a receive context (kind %d)",
                       ctx->kind);
    }
}

static void on_rx_done(torxp_ofi_dev_t *d, torxp_ofi_ctx_t *ctx, const struct fi_cq_tagged_entry *e)
{
    const unsigned src = (unsigned)(e->tag & TORXP_OFI_TAG_SLOT_MASK);
    const size_t len = e->len;
    const uint64_t credits = e->flags & FI_REMOTE_CQ_DATA ? e->data : 0;
    if (ctx->kind == TORXP_OFI_CTX_STAGE_RX) {
        /* untagged: the sender is in its header */
        torxp_ofi_stage_on_rx(d, ctx, len, credits);
        return;
    }
    if (ctx->kind == TORXP_OFI_CTX_BULK_RX || ctx->kind == TORXP_OFI_CTX_SERVE_RX) {
        torxp_ofi_bulk_on_msg(d, ctx, 0); /* a bulk transfer's data, without RMA */
        return;
    }
    torxp_ofi_rxbuf_t *b = (torxp_ofi_rxbuf_t *)ctx;
    const unsigned i = (unsigned)(b - d->rxbufs);
    if (credits && src < d->nslots && d->slot_rank[src] >= 0)
        torxp_ofi_credits_back(d, src, credits);
    if (ctx->kind == TORXP_OFI_CTX_RX) {
        b->order = (uint32_t)(e->tag >> TORXP_OFI_TAG_ORDER_SHIFT) & TORXP_OFI_ORDER_MASK;
        on_torus_in_order(d, i, src, len);
    } else {
        on_sys(d, i, src, len);
    }
}

/* Whether a completion's context is a receive's (else a send's or an RMA
 * operation's; udp;ofi_rxd completes inline sends without a context). */
static inline int is_rx_ctx(const torxp_ofi_ctx_t *ctx)
{
    return ctx && (ctx->kind == TORXP_OFI_CTX_RX || ctx->kind == TORXP_OFI_CTX_SYSRX ||
                   ctx->kind == TORXP_OFI_CTX_STAGE_RX || ctx->kind == TORXP_OFI_CTX_BULK_RX ||
                   ctx->kind == TORXP_OFI_CTX_SERVE_RX);
}

static void on_rx_error(torxp_ofi_dev_t *d, const struct fi_cq_err_entry *err)
{
    const int kind = ((torxp_ofi_ctx_t *)err->op_context)->kind;
    if (kind == TORXP_OFI_CTX_BULK_RX || kind == TORXP_OFI_CTX_SERVE_RX) {
        if (err->err != FI_ECANCELED) /* closing */
            torxp_ofi_bulk_on_msg(d, err->op_context, err->err ? err->err : FI_EIO);
        return;
    }
    if (((torxp_ofi_ctx_t *)err->op_context)->kind == TORXP_OFI_CTX_STAGE_RX) {
        if (err->err != FI_ECANCELED) /* closing, else no piece outgrows a buffer */
            torxp_ofi_fi_fail(d, "a staging buffer's fi_trecv", -1, err->err);
        return;
    }
    torxp_ofi_rxbuf_t *b = err->op_context;
    if (err->err == FI_ECANCELED)
        return; /* closing */
    torxp_dev_malformed(&d->base, "receive failed (%s): a message longer than %u bytes?",
                        fi_strerror(err->err), (unsigned)TORXP_OFI_SYS_MAX);
    post_rx(d, (unsigned)(b - d->rxbufs));
}

static void drain_cq(torxp_ofi_dev_t *d)
{
    struct fi_cq_tagged_entry e[OFI_CQ_BATCH];
    for (;;) {
        const ssize_t n = fi_cq_read(d->cq, e, OFI_CQ_BATCH);
        if (n > 0) {
            d->cq_entries += (unsigned long)n;
            for (ssize_t k = 0; k < n; k++) {
                torxp_ofi_ctx_t *ctx = e[k].op_context;
                if (TORXP_UNLIKELY(e[k].flags & FI_REMOTE_WRITE)) /* no context: ofi_bulk.c */
                    torxp_ofi_bulk_on_write_data(d, e[k].data);
                else if (is_rx_ctx(ctx))
                    on_rx_done(d, ctx, &e[k]);
                else
                    on_tx_done(d, ctx, 0);
            }
            if (n < OFI_CQ_BATCH)
                return; /* drained: another read is another provider progress */
            continue;
        }
        if (n == -FI_EAVAIL) {
            struct fi_cq_err_entry err = {0};
            if (fi_cq_readerr(d->cq, &err, 0) != 1)
                continue;
            if (is_rx_ctx(err.op_context))
                on_rx_error(d, &err);
            else if (err.op_context || err.flags & FI_SEND)
                on_tx_done(d, err.op_context, err.err ? err.err : FI_EIO);
            continue;
        }
        if (n != -FI_EAGAIN)
            torxp_ofi_fi_fail(d, "fi_cq_read", -1, (int)n);
        return;
    }
}

void torxp_ofi_progress(torxp_ofi_dev_t *d)
{
    if (d->stage_waiting)
        torxp_ofi_stage_flush(d);
    if (d->nrepost)
        post_pending(d);
    drain_cq(d);
    if (d->sys_head)
        sys_flush(d);
    torxp_ofi_bulk_progress(d);
    torxp_ofi_live_check(d);
}

/* ---- Injection ---------------------------------------------------------------------- */

ssize_t torxp_ofi_tsend_retry(torxp_ofi_dev_t *d, const void *buf, size_t len, unsigned slot,
                              unsigned kind, torxp_ofi_ctx_t *ctx)
{
    ssize_t rc = tsend(d, buf, len, slot, kind, ctx);
    if (TORXP_UNLIKELY(rc == -FI_EAGAIN)) {
        /* The provider is out of resources or still connecting to the peer
         * (tcp;ofi_rxm connects on first use). The credits say the peer
         * has room, so this is transient: progress, which also keeps
         * receiving, so two tasks doing this at once both get through, and
         * try again for a while before reporting the FIFO full. */
        const double give_up = torxp_mono_s() + TORXP_OFI_EAGAIN_SPIN_S;
        do {
            torxp_ofi_progress(d);
            rc = tsend(d, buf, len, slot, kind, ctx);
        } while (rc == -FI_EAGAIN && d->base.failed == TORX_OK && torxp_mono_s() < give_up);
    }
    return rc;
}

/* Sends one packet to slot; TORX_NO_ROOM when the window or the pool is
 * spent or the provider is busy, with nothing taken. */
static torx_status_t send_packet(torxp_ofi_dev_t *d, unsigned slot, const torx_pkt_hdr_t *hdr,
                                 const struct iovec *iov, int iovcnt, size_t len)
{
    if (d->credits[slot] <= 0)
        return TORX_NO_ROOM;
    const size_t bytes = TORX_PKT_HDR_BYTES + len;
    unsigned char stack_pkt[TORX_PKT_MAX_BYTES];
    torxp_ofi_txbuf_t *t = NULL;
    if (bytes > d->inject_size) {
        if (d->tx_free < 0)
            drain_cq(d);
        if (d->tx_free < 0)
            return TORX_NO_ROOM;
        t = &d->txbufs[d->tx_free];
    }
    unsigned char *p = t ? t->pkt : stack_pkt;
    torx_pkt_hdr_t h = *hdr;
    h.chunks = (uint8_t)torx_pkt_chunks_for(len);
    h.payload_len = (uint8_t)len;
    h.dev_tag = 0;
    memcpy(p, &h, sizeof h);
    unsigned char *q = p + sizeof h;
    for (int k = 0; k < iovcnt; k++) {
        memcpy(q, iov[k].iov_base, iov[k].iov_len);
        q += iov[k].iov_len;
    }
    if (d->stage_waiting) { /* a piece waits for this packet: one message for both */
        int carried = 0;
        const torx_status_t st = torxp_ofi_stage_carry(d, slot, p, bytes, &carried);
        if (st != TORX_OK)
            return st;
        if (carried) { /* numbered by torxp_ofi_stage_carry */
            d->credits[slot]--;
            return TORX_OK;
        }
    }
    if (t)
        t->ctx.peer = slot;
    const ssize_t rc = torxp_ofi_tsend_retry(
        d, p, bytes, slot, TORXP_OFI_TAG_TORUS | d->tx_order[slot] << 8, t ? &t->ctx : NULL);
    if (rc == -FI_EAGAIN)
        return TORX_NO_ROOM;
    if (rc != 0)
        return torxp_ofi_fi_fail(d, "fi_tsendmsg (torus packet)", (int)slot, (int)rc);
    if (t) {
        d->tx_free = t->next_free;
        d->tx_nfree--;
    }
    d->tx_order[slot] = (d->tx_order[slot] + 1) & TORXP_OFI_ORDER_MASK;
    d->credits[slot]--;
    return TORX_OK;
}

/* The slot of the k-th node (k >= 1) on a deposit line, or -1 when no task
 * sits there (a partly filled torus). */
static int deposit_hop_slot(const torxp_ofi_dev_t *d, const torx_pkt_hdr_t *h, unsigned k)
{
    const unsigned slot = torxp_deposit_hop_slot(&d->base, h, k);
    return d->slot_rank[slot] >= 0 ? (int)slot : -1;
}

/* Sends what the windows and the pool now take of the stashed line. */
static void drain_stash(torxp_ofi_dev_t *d)
{
    const struct iovec iov = {d->stash.payload, d->stash.hdr.payload_len};
    while (d->stash.next_hop <= d->stash.hops) {
        const int slot = deposit_hop_slot(d, &d->stash.hdr, d->stash.next_hop);
        if (slot >= 0 && send_packet(d, (unsigned)slot, &d->stash.hdr, &iov, iov.iov_len ? 1 : 0,
                                     iov.iov_len) == TORX_NO_ROOM)
            return;
        d->stash.next_hop++;
    }
    d->stash_active = 0;
}

static torx_status_t inject_deposit(torxp_ofi_dev_t *d, const torx_pkt_hdr_t *hdr,
                                    const struct iovec *iov, int iovcnt, size_t len)
{
    unsigned hops;
    const torx_status_t bad = torxp_deposit_hops(&d->base, hdr, &hops);
    if (bad != TORX_OK)
        return bad;
    unsigned k = 1;
    for (; k <= hops; k++) {
        const int slot = deposit_hop_slot(d, hdr, k);
        if (slot < 0)
            continue;
        const torx_status_t rc = send_packet(d, (unsigned)slot, hdr, iov, iovcnt, len);
        if (rc == TORX_NO_ROOM) {
            if (k == 1)
                return TORX_NO_ROOM; /* nothing sent: nothing taken */
            break;
        }
        if (rc != TORX_OK)
            return rc;
    }
    if (k <= hops) { /* taken, but the rest of the line must wait */
        d->stash_active = 1;
        torxp_deposit_stash(&d->stash, hdr, iov, iovcnt, len, k, hops);
    }
    return TORX_OK;
}

static torx_status_t inject_locked(torxp_ofi_dev_t *d, const torx_pkt_hdr_t *hdr,
                                   const struct iovec *iov, int iovcnt)
{
    torx_pkt_dev_t *dev = &d->base;
    if (TORXP_UNLIKELY(dev->failed != TORX_OK))
        return dev->failed;
    if (TORXP_UNLIKELY(d->stash_active)) {
        drain_stash(d); /* everything queues behind a partly sent line */
        if (d->stash_active)
            return TORX_NO_ROOM;
    }
    size_t len;
    const torx_status_t bad = torxp_inject_check(dev, hdr, iov, iovcnt, &len);
    if (TORXP_UNLIKELY(bad != TORX_OK))
        return bad;
    const unsigned slot = torx_coord_index(dev->shape, hdr->dest);
    if (TORXP_UNLIKELY(d->slot_rank[slot] < 0))
        return torxp_error(TORX_ERR_INVAL, "torx: no task at destination (%u,%u,%u,%u)",
                           hdr->dest.x, hdr->dest.y, hdr->dest.z, hdr->dest.t);
    if (TORXP_UNLIKELY(hdr->ctl & TORX_PKT_DEPOSIT))
        return inject_deposit(d, hdr, iov, iovcnt, len);
    return send_packet(d, slot, hdr, iov, iovcnt, len);
}

torx_status_t torxp_ofi_inject(torx_pkt_dev_t *dev, const torx_pkt_hdr_t *hdr,
                               const struct iovec *iov, int iovcnt)
{
    torxp_ofi_dev_t *d = torxp_ofi_of(dev);
    torxp_ofi_lock(d);
    const torx_status_t rc = inject_locked(d, hdr, iov, iovcnt);
    torxp_ofi_unlock(d);
    return rc;
}

int torxp_ofi_room(torx_pkt_dev_t *dev, torx_coord_t dest)
{
    torxp_ofi_dev_t *d = torxp_ofi_of(dev);
    if (!torx_coord_in_shape(dev->shape, dest))
        return 0;
    const unsigned slot = torx_coord_index(dev->shape, dest);
    torxp_ofi_lock(d);
    int room = 0;
    if (d->slot_rank[slot] >= 0 && !d->stash_active) {
        room = d->credits[slot];
        if ((int)d->tx_nfree < room)
            room = (int)d->tx_nfree;
    }
    torxp_ofi_unlock(d);
    return room;
}

/* ---- Reception ----------------------------------------------------------------------- */

static int queues_empty(const torxp_ofi_dev_t *d)
{
    for (unsigned q = 0; q < TORXP_OFI_RXQ; q++)
        if (d->rxq[q].head != d->rxq[q].tail)
            return 0;
    return 1;
}

/* Takes the next packet off the reception queues into cur. */
static int pick(torxp_ofi_dev_t *d)
{
    const unsigned start =
        d->chaos_rx ? (unsigned)(torxp_chaos_next(&d->chaos_rx) >> 33) : d->next_q;
    for (unsigned k = 0; k < TORXP_OFI_RXQ; k++) {
        const unsigned q = (start + k) % TORXP_OFI_RXQ;
        torxp_ofi_rxq_t *rq = &d->rxq[q];
        if (rq->head == rq->tail)
            continue;
        d->cur = (int)rq->ring[rq->head++ & d->rxq_mask];
        torxp_rx_burst(&d->next_q, &d->burst, q, TORXP_OFI_RXQ);
        return 1;
    }
    return 0;
}

const torx_pkt_hdr_t *torxp_ofi_peek(torx_pkt_dev_t *dev)
{
    torxp_ofi_dev_t *d = torxp_ofi_of(dev);
    torxp_ofi_lock(d);
    /* Progress only for a caller that spins on peek: the usual round (poll,
     * then peek and consume until peek finds nothing) has just progressed,
     * and one more read of the queue there would cost every message a
     * system call on its way up. */
    if (d->cur < 0 && queues_empty(d)) {
        if (d->polled_since_empty)
            d->polled_since_empty = 0;
        else
            torxp_ofi_progress(d);
    }
    const torx_pkt_hdr_t *h =
        d->cur >= 0 || pick(d) ? (const torx_pkt_hdr_t *)d->rxbufs[d->cur].data : NULL;
    torxp_ofi_unlock(d);
    return h;
}

void torxp_ofi_consume(torx_pkt_dev_t *dev)
{
    torxp_ofi_dev_t *d = torxp_ofi_of(dev);
    torxp_ofi_lock(d);
    if (d->cur >= 0) {
        const unsigned i = (unsigned)d->cur, src = d->rxbufs[i].src;
        d->cur = -1;
        post_rx(d, i);
        /* A credit message only when half the window is owed: replies
         * carry credits aboard (tsend) before that, in a ping-pong always. */
        if (++d->consumed[src] >= (d->credit_max + 1) / 2)
            credit_return(d, src);
    }
    torxp_ofi_unlock(d);
}

int torxp_ofi_poll(torx_pkt_dev_t *dev)
{
    torxp_ofi_dev_t *d = torxp_ofi_of(dev);
    torxp_ofi_lock(d);
    torxp_ofi_progress(d);
    d->polled_since_empty = 1;
    if (TORXP_UNLIKELY(d->stash_active))
        drain_stash(d);
    const int ready = d->cur >= 0 || !queues_empty(d);
    torxp_ofi_unlock(d);
    return ready;
}

/* ---- Waiting ------------------------------------------------------------------------- */

/* Whether the device's own sends wait for the provider or the peers (a
 * stashed line, queued device messages): no descriptor announces room. */
static int tx_pending(const torxp_ofi_dev_t *d)
{
    return d->stash_active || d->sys_head != NULL;
}

static int take_wake(torxp_ofi_dev_t *d)
{
    uint64_t v;
    return read(d->wake_fd, &v, sizeof v) == (ssize_t)sizeof v;
}

torx_status_t torxp_ofi_wait(torx_pkt_dev_t *dev, int timeout_ms)
{
    torxp_ofi_dev_t *d = torxp_ofi_of(dev);
    const double deadline = timeout_ms < 0 ? -1 : torxp_mono_s() + timeout_ms * 1e-3;
    int fds_lie = 0; /* the descriptors woke us with nothing to read */
    for (;;) {
        if (take_wake(d))
            return TORX_OK;
        torxp_ofi_lock(d);
        torxp_ofi_progress(d);
        if (d->cur >= 0 || !queues_empty(d) || dev->failed != TORX_OK) {
            torxp_ofi_unlock(d);
            return TORX_OK;
        }
        /* About to sleep: give every sender its credits, so none waits on us. */
        for (unsigned s = 0; s < d->nslots; s++)
            if (d->consumed[s])
                credit_return(d, s);
        const int nap = tx_pending(d);
        long slice_ns = -1;
        if (deadline >= 0) {
            const double left = deadline - torxp_mono_s();
            slice_ns = left > 0 ? (long)(left * 1e9) : 0;
        }
        if (nap && (slice_ns < 0 || slice_ns > WAIT_NAP_NS))
            slice_ns = WAIT_NAP_NS;
        int sleep_on_fds = d->cq_fd >= 0 && !fds_lie;
        if (sleep_on_fds) {
            struct fid *fids[1] = {&d->cq->fid};
            const int rc = fi_trywait(d->fabric, fids, 1);
            if (rc == -FI_EAGAIN) { /* completions came meanwhile: act on them */
                torxp_ofi_unlock(d);
                continue;
            }
            if (rc != 0)
                sleep_on_fds = 0;
        }
        if (!sleep_on_fds && (slice_ns < 0 || slice_ns > WAIT_SLICE_MS * 1000000L))
            slice_ns = WAIT_SLICE_MS * 1000000L;
        torxp_ofi_unlock(d);

        struct pollfd fds[2] = {{.fd = d->wake_fd, .events = POLLIN},
                                {.fd = d->cq_fd, .events = POLLIN}};
        struct timespec ts, *tsp = NULL;
        if (slice_ns >= 0) {
            ts = (struct timespec){slice_ns / 1000000000L, slice_ns % 1000000000L};
            tsp = &ts;
        }
        const int n = ppoll(fds, sleep_on_fds ? 2 : 1, tsp, NULL);
        if (n < 0 && errno == EINTR)
            return TORX_OK; /* interrupted: poll now */
        if (n > 0) {
            if (fds[0].revents) {
                take_wake(d);
                return TORX_OK;
            }
            /* The queue's descriptor: return if it brought a completion. */
            torxp_ofi_lock(d);
            const unsigned long before = d->cq_entries;
            torxp_ofi_progress(d);
            const int brought = d->cq_entries != before || d->cur >= 0 || !queues_empty(d);
            torxp_ofi_unlock(d);
            if (brought)
                return TORX_OK;
            fds_lie = 1;
            continue;
        }
        if (nap)
            return TORX_OK;
        if (deadline >= 0 && torxp_mono_s() >= deadline) {
            torxp_ofi_lock(d);
            torxp_ofi_progress(d);
            const int ready = d->cur >= 0 || !queues_empty(d);
            torxp_ofi_unlock(d);
            return ready ? TORX_OK : TORX_AGAIN;
        }
        /* A slice ran out (no wait descriptors): progress and look again. */
    }
}

void torxp_ofi_wake(torx_pkt_dev_t *dev)
{
    torxp_ofi_dev_t *d = torxp_ofi_of(dev);
    const uint64_t one = 1;
    /* An eventfd write fails only when the counter would overflow, and then
     * it is rung already. */
    if (write(d->wake_fd, &one, sizeof one) < 0) {
    }
}

/* ---- Set-up ---------------------------------------------------------------------------- */

torx_status_t torxp_ofi_torus_setup(torxp_ofi_dev_t *d, const torxp_env_t *env, long tx_pool)
{
    d->cur = -1;
    d->tx_free = -1;
    d->sys_tail = &d->sys_head;
    d->credit_max = (uint32_t)env->fifo_packets;
    /* Reception buffers: 64 for torus packets, whatever the credit windows
     * (TORX_FIFO_PACKETS per pair); more the provider keeps as unexpected
     * messages, or leaves in the socket until a buffer is posted again,
     * bounded by the windows. Few, because the providers find the buffer
     * for a tagged message by walking the list of posted ones: with 512
     * ahead of them, every device message (credits, a rendezvous's
     * GET_REQ and GET_DONE, the collective network) cost about 0.9 us more
     * to receive (MPI latency over net on lo, 64 KiB: 27.9 us with 512,
     * 26.1 with 64; bandwidth at 64 KiB +11%), and fewer than 64 changed
     * nothing more. */
    d->nrx = 64;
    d->nsysrx = 8;
    d->nhold = TORXP_OFI_STAGE_RX_MAX + 1;
    d->rxq_mask = 1;
    while (d->rxq_mask < d->nrx + d->nhold)
        d->rxq_mask <<= 1;
    d->rxq_mask--;
    d->tx_pool = (unsigned)tx_pool;
    if (env->chaos_seed) {
        d->chaos_rx = ((uint64_t)env->chaos_seed * 0x9E3779B97F4A7C15ULL) ^ (d->self_slot + 1);
        if (!d->chaos_rx)
            d->chaos_rx = 1;
    }
    d->txbufs = torxp_calloc(d->tx_pool, sizeof *d->txbufs);
    d->credits = torxp_calloc(d->nslots, sizeof *d->credits);
    d->consumed = torxp_calloc(d->nslots, sizeof *d->consumed);
    d->tx_order = torxp_calloc(d->nslots, sizeof *d->tx_order);
    d->rx_order = torxp_calloc(d->nslots, sizeof *d->rx_order);
    d->parked = torxp_calloc(d->nslots, sizeof *d->parked);
    d->rxbufs = torxp_calloc(d->nrx + d->nsysrx + d->nhold, sizeof *d->rxbufs);
    d->hold_free = torxp_calloc(d->nhold, sizeof *d->hold_free);
    d->repost = torxp_calloc(d->nrx + d->nsysrx, sizeof *d->repost);
    d->inj_ctx = torxp_calloc(d->nslots, sizeof *d->inj_ctx);
    d->pings = torxp_calloc(d->nslots, sizeof *d->pings);
    for (unsigned q = 0; q < TORXP_OFI_RXQ; q++)
        if (!(d->rxq[q].ring = torxp_calloc(d->rxq_mask + 1, sizeof *d->rxq[q].ring)))
            return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for the ofi device's queues");
    if (!d->txbufs || !d->credits || !d->consumed || !d->rxbufs || !d->hold_free || !d->repost ||
        !d->inj_ctx || !d->pings || !d->tx_order || !d->rx_order || !d->parked)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for the ofi device's buffers");
    for (unsigned i = 0; i < d->tx_pool; i++) {
        d->txbufs[i].ctx.kind = TORXP_OFI_CTX_TX;
        d->txbufs[i].next_free = d->tx_free;
        d->tx_free = (int)i;
    }
    d->tx_nfree = d->tx_pool;
    for (unsigned s = 0; s < d->nslots; s++) {
        d->parked[s] = UINT32_MAX;
        d->credits[s] = d->slot_rank[s] >= 0 ? (int32_t)d->credit_max : 0;
        d->inj_ctx[s] = (torxp_ofi_ctx_t){.kind = TORXP_OFI_CTX_INJ, .peer = s};
    }
    for (unsigned i = 0; i < d->nrx + d->nsysrx; i++) {
        d->rxbufs[i].ctx.kind = is_sys_buf(d, i) ? TORXP_OFI_CTX_SYSRX : TORXP_OFI_CTX_RX;
        post_rx(d, i);
    }
    for (unsigned k = 0; k < d->nhold; k++) {
        d->rxbufs[d->nrx + d->nsysrx + k].ctx.kind = TORXP_OFI_CTX_RX;
        d->hold_free[d->hold_nfree++] = d->nrx + d->nsysrx + d->nhold - 1 - k;
    }
    post_pending(d);
    if (d->nrepost)
        return torxp_error(TORX_ERR_SYS,
                           "torx: provider %s would not take %u receive buffers (its receive "
                           "queue is shorter); lower TORX_FIFO_PACKETS",
                           d->prov, d->nrx + d->nsysrx);
    return d->base.failed;
}

void torxp_ofi_torus_fini(torxp_ofi_dev_t *d)
{
    while (d->sys_head) {
        torxp_ofi_sysmsg_t *m = d->sys_head;
        d->sys_head = m->next;
        free(m);
    }
    for (unsigned q = 0; q < TORXP_OFI_RXQ; q++)
        free(d->rxq[q].ring);
    free(d->txbufs);
    free(d->credits);
    free(d->consumed);
    free(d->tx_order);
    free(d->rx_order);
    free(d->parked);
    free(d->rxbufs);
    free(d->hold_free);
    free(d->repost);
    free(d->inj_ctx);
    free(d->pings);
}

void torxp_ofi_flush(torxp_ofi_dev_t *d, double timeout_s)
{
    const double deadline = torxp_mono_s() + timeout_s;
    torxp_ofi_lock(d);
    while ((d->sys_head || d->sys_inflight || d->inj_inflight || d->tx_nfree < d->tx_pool ||
            d->stash_active || torxp_ofi_stage_busy(d)) &&
           d->base.failed == TORX_OK && torxp_mono_s() < deadline) {
        torxp_ofi_progress(d);
        if (d->stash_active)
            drain_stash(d);
    }
    if (d->sys_head || d->sys_inflight || d->inj_inflight || d->tx_nfree < d->tx_pool)
        torxp_log(&d->base, 1, "closing with sends not completed after %.1f s", timeout_s);
    torxp_ofi_unlock(d);
}
