/* The ofi device's torus: packets and device-internal messages as
 * libfabric tagged messages, the send-buffer pool, the completion queue,
 * and its wait descriptor. Credits, send order, reception queues, deposit
 * lines and the doorbell's loop are net_torus.c's.
 *
 * Order. The endpoint is opened with FI_ORDER_SAS (send after send), which
 * every provider torx accepts offers (ofi_open.c refuses one without), but
 * the providers still complete messages out of order at times (see the tag
 * in ofi.h), so every torus packet's number rides in its tag and net/ puts
 * them back in order.
 *
 * Credits aboard. Where the provider carries 8 bytes of remote CQ data,
 * torus packets and staged pieces take the credits owed to their
 * destination with them (tsend), so a reply costs no credit message.
 *
 * Buffers. A send needs a buffer from the pool (TORX_OFI_TX_PACKETS) until
 * the provider completes it, unless it fits the provider's inline size:
 * an empty pool is TORX_NO_ROOM, nothing taken (tx_room reports it).
 *
 * Sleeping. net/'s wait sleeps on the completion queue's wait descriptor
 * (FI_WAIT_FD); before sleeping, arm asks fi_trywait whether the queue is
 * really empty. fi_cq_sread would block in the provider with the lock
 * released between reading and acting on a completion, and a wake from
 * another thread could only interrupt it through fi_cq_signal, which not
 * every provider implements; net/'s eventfd works everywhere. */
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
    if (d->net.closing) { /* the peers may be gone already; nothing waits for us */
        torxp_log(&d->net.base, 2, "at close: %s: %s", call, fi_strerror(err));
        return TORX_OK;
    }
    if (peer_slot < 0 || d->net.slot_rank[peer_slot] < 0)
        return torxp_dev_fail(&d->net.base, TORX_ERR_SYS, "%s failed (provider %s): %s", call,
                              d->prov, fi_strerror(err));
    const torx_coord_t c = torxp_net_coord_of(&d->net, (unsigned)peer_slot);
    return torxp_dev_fail(&d->net.base, TORX_ERR_PEER,
                          "rank %d at (%u,%u,%u,%u) is unreachable: %s failed (provider %s): %s",
                          d->net.slot_rank[peer_slot], c.x, c.y, c.z, c.t, call, d->prov,
                          fi_strerror(err));
}

/* ---- Receive buffers -------------------------------------------------------- */

static inline int is_sys_buf(const torxp_ofi_dev_t *d, unsigned i)
{
    return i >= d->net.nrx && i < d->net.nrx + d->net.nsysrx;
}

/* Posts the buffers given back (net/'s repost list), from the newest (a
 * provider that is busy keeps the rest for the next progress). */
static void post_pending(torxp_ofi_dev_t *d)
{
    torxp_net_t *n = &d->net;
    while (n->nrepost) {
        const unsigned i = n->repost[n->nrepost - 1];
        const int sys = is_sys_buf(d, i);
        const ssize_t rc = fi_trecv(
            d->ep, n->rxbufs[i].data, sys ? TORXP_NET_SYS_MAX : TORX_PKT_MAX_BYTES, NULL,
            FI_ADDR_UNSPEC, torxp_ofi_tag(sys ? TORXP_OFI_TAG_SYS : TORXP_OFI_TAG_TORUS, 0),
            TORXP_OFI_RECV_IGNORE, &d->rx_ctx[i].fi);
        if (rc == -FI_EAGAIN)
            return;
        n->nrepost--;
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
            ? d->net.consumed[slot]
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
                                        .tag = torxp_ofi_tag(kind, d->net.self_slot),
                                        .context = context,
                                        .data = credits};
        rc = fi_tsendmsg(d->ep, &m, flags);
    }
    if (rc == 0) {
        d->net.consumed[slot] -= (uint32_t)credits;
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
    assert(len <= TORXP_NET_SYS_MAX && len >= sizeof(torxp_net_sys_t));
    torxp_ofi_sysmsg_t *m = torxp_malloc(sizeof *m);
    if (!m)
        return torxp_dev_fail(&d->net.base, TORX_ERR_NOMEM,
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
        p->msg = (torxp_net_sys_t){.type = TORXP_NET_SYS_PING, .version = TORXP_NET_WIRE_VERSION};
        const ssize_t rc = fi_tsend(d->ep, &p->msg, sizeof p->msg, NULL, d->slot_addr[slot],
                                    torxp_ofi_tag(TORXP_OFI_TAG_SYS, d->net.self_slot), &p->ctx.fi);
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
    if (now - since > TORXP_NET_PEER_TIMEOUT_S) {
        const torx_coord_t c = torxp_net_coord_of(&d->net, slot);
        torxp_dev_fail(&d->net.base, TORX_ERR_PEER,
                       "rank %d at (%u,%u,%u,%u) is unreachable: provider %s has not delivered a "
                       "probe to it in %.0f s (the task died, or the network to it is down)",
                       d->net.slot_rank[slot], c.x, c.y, c.z, c.t, d->prov, now - since);
    }
}

/* ---- Completions ------------------------------------------------------------------ */

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
        torxp_dev_fail(&d->net.base, TORX_ERR_PROTO,
                       "send completion with a receive context (kind %d)", ctx->kind);
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
    const unsigned i = (unsigned)(ctx - d->rx_ctx);
    torxp_net_credits_back(&d->net, src, credits);
    if (ctx->kind == TORXP_OFI_CTX_RX) {
        torxp_net_on_torus(&d->net, i, src, (uint32_t)(e->tag >> TORXP_OFI_TAG_ORDER_SHIFT), len);
    } else {
        torxp_net_on_sys(&d->net, src, d->net.rxbufs[i].data, len);
        torxp_net_rx_release(&d->net, i);
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
    const torxp_ofi_ctx_t *ctx = err->op_context;
    if (err->err == FI_ECANCELED)
        return; /* closing */
    torxp_dev_malformed(&d->net.base, "receive failed (%s): a message longer than %u bytes?",
                        fi_strerror(err->err), (unsigned)TORXP_NET_SYS_MAX);
    torxp_net_rx_release(&d->net, (unsigned)(ctx - d->rx_ctx));
}

static void drain_cq(torxp_ofi_dev_t *d)
{
    struct fi_cq_tagged_entry e[OFI_CQ_BATCH];
    for (;;) {
        const ssize_t n = fi_cq_read(d->cq, e, OFI_CQ_BATCH);
        if (n > 0) {
            d->net.events += (unsigned long)n;
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
    torxp_net_stage_flush(&d->net);
    if (d->net.nrepost)
        post_pending(d);
    drain_cq(d);
    if (d->sys_head)
        sys_flush(d);
    torxp_ofi_bulk_progress(d);
    torxp_net_live_check(&d->net);
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
        } while (rc == -FI_EAGAIN && d->net.base.failed == TORX_OK && torxp_mono_s() < give_up);
    }
    return rc;
}

/* net.h's send_packet: one torus packet to slot, numbered
 * d->net.tx_order[slot]; TORX_NO_ROOM when the pool is spent or the
 * provider is busy, with nothing taken. */
torx_status_t torxp_ofi_send_packet(torxp_net_t *n, unsigned slot, const torx_pkt_hdr_t *hdr,
                                    const struct iovec *iov, int iovcnt, size_t len)
{
    torxp_ofi_dev_t *d = (torxp_ofi_dev_t *)n;
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
    memcpy(p, hdr, sizeof *hdr);
    unsigned char *q = p + sizeof *hdr;
    for (int k = 0; k < iovcnt; k++) {
        memcpy(q, iov[k].iov_base, iov[k].iov_len);
        q += iov[k].iov_len;
    }
    if (t)
        t->ctx.peer = slot;
    const ssize_t rc = torxp_ofi_tsend_retry(
        d, p, bytes, slot, TORXP_OFI_TAG_TORUS | n->tx_order[slot] << 8, t ? &t->ctx : NULL);
    if (rc == -FI_EAGAIN)
        return TORX_NO_ROOM;
    if (rc != 0)
        return torxp_ofi_fi_fail(d, "fi_tsendmsg (torus packet)", (int)slot, (int)rc);
    if (t) {
        d->tx_free = t->next_free;
        d->tx_nfree--;
    }
    return TORX_OK;
}

unsigned torxp_ofi_tx_room(torxp_net_t *n)
{
    return ((torxp_ofi_dev_t *)n)->tx_nfree;
}

int torxp_ofi_sys_pending(torxp_net_t *n)
{
    return ((torxp_ofi_dev_t *)n)->sys_head != NULL;
}

int torxp_ofi_on_sys(torxp_net_t *n, unsigned src, const torxp_net_sys_t *m, size_t len)
{
    torxp_ofi_dev_t *d = (torxp_ofi_dev_t *)n;
    switch (m->type) {
    case TORXP_NET_SYS_GET_REQ:
    case TORXP_NET_SYS_GET_DONE:
    case TORXP_NET_SYS_PUT_REQ:
    case TORXP_NET_SYS_PUT_DONE:
        torxp_ofi_bulk_on_sys(d, src, m, len);
        return 1;
    default:
        return 0;
    }
}

/* fi_trywait: whether the queue is really empty, so that a completion that
 * comes after it makes the descriptor readable. */
int torxp_ofi_arm(torxp_net_t *n)
{
    torxp_ofi_dev_t *d = (torxp_ofi_dev_t *)n;
    struct fid *fids[1] = {&d->cq->fid};
    const int rc = fi_trywait(d->fabric, fids, 1);
    return rc == 0 ? TORXP_NET_ARM_OK : rc == -FI_EAGAIN ? TORXP_NET_ARM_BUSY : TORXP_NET_ARM_NOFD;
}

/* ---- Set-up ---------------------------------------------------------------------------- */

torx_status_t torxp_ofi_torus_setup(torxp_ofi_dev_t *d, const torxp_env_t *env, long tx_pool)
{
    d->tx_free = -1;
    d->sys_tail = &d->sys_head;
    /* Reception buffers: 64 for torus packets, whatever the credit windows
     * (TORX_FIFO_PACKETS per pair); more the provider keeps as unexpected
     * messages, or leaves in the socket until a buffer is posted again,
     * bounded by the windows. Few, because the providers find the buffer
     * for a tagged message by walking the list of posted ones: with 512
     * ahead of them, every device message (credits, a rendezvous's
     * GET_REQ and GET_DONE, the collective network) cost about 0.9 us more
     * to receive (MPI latency over net on lo, 64 KiB: 27.9 us with 512,
     * 26.1 with 64; bandwidth at 64 KiB +11%), and fewer than 64 changed
     * nothing more. 8 for device messages, and a holder for each packet
     * that can come aboard a staged piece (ofi_stage.c). */
    const unsigned nrx = 64, nsysrx = 8;
    torx_status_t rc = torxp_net_torus_setup(&d->net, env, nrx, nsysrx, TORXP_OFI_STAGE_RX_MAX + 1);
    if (rc != TORX_OK)
        return rc;
    d->tx_pool = (unsigned)tx_pool;
    d->txbufs = torxp_calloc(d->tx_pool, sizeof *d->txbufs);
    d->rx_ctx = torxp_calloc(nrx + nsysrx, sizeof *d->rx_ctx);
    d->inj_ctx = torxp_calloc(d->net.nslots, sizeof *d->inj_ctx);
    d->pings = torxp_calloc(d->net.nslots, sizeof *d->pings);
    if (!d->txbufs || !d->rx_ctx || !d->inj_ctx || !d->pings)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for the ofi device's buffers");
    for (unsigned i = 0; i < d->tx_pool; i++) {
        d->txbufs[i].ctx.kind = TORXP_OFI_CTX_TX;
        d->txbufs[i].next_free = d->tx_free;
        d->tx_free = (int)i;
    }
    d->tx_nfree = d->tx_pool;
    for (unsigned s = 0; s < d->net.nslots; s++)
        d->inj_ctx[s] = (torxp_ofi_ctx_t){.kind = TORXP_OFI_CTX_INJ, .peer = s};
    for (unsigned i = 0; i < nrx + nsysrx; i++)
        d->rx_ctx[i].kind = is_sys_buf(d, i) ? TORXP_OFI_CTX_SYSRX : TORXP_OFI_CTX_RX;
    post_pending(d);
    if (d->net.nrepost)
        return torxp_error(TORX_ERR_SYS,
                           "torx: provider %s would not take %u receive buffers (its receive "
                           "queue is shorter); lower TORX_FIFO_PACKETS",
                           d->prov, nrx + nsysrx);
    return d->net.base.failed;
}

void torxp_ofi_torus_fini(torxp_ofi_dev_t *d)
{
    while (d->sys_head) {
        torxp_ofi_sysmsg_t *m = d->sys_head;
        d->sys_head = m->next;
        free(m);
    }
    torxp_net_torus_fini(&d->net);
    free(d->txbufs);
    free(d->rx_ctx);
    free(d->inj_ctx);
    free(d->pings);
}

void torxp_ofi_flush(torxp_ofi_dev_t *d, double timeout_s)
{
    const double deadline = torxp_mono_s() + timeout_s;
    torxp_ofi_lock(d);
    while ((d->sys_head || d->sys_inflight || d->inj_inflight || d->tx_nfree < d->tx_pool ||
            d->net.stash_active || torxp_net_stage_busy(&d->net)) &&
           d->net.base.failed == TORX_OK && torxp_mono_s() < deadline) {
        torxp_ofi_progress(d);
        torxp_net_stash_drain(&d->net);
    }
    if (d->sys_head || d->sys_inflight || d->inj_inflight || d->tx_nfree < d->tx_pool)
        torxp_log(&d->net.base, 1, "closing with sends not completed after %.1f s", timeout_s);
    torxp_ofi_unlock(d);
}
