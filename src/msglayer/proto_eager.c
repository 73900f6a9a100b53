/* Eager and adaptive eager: the data follows the first packet at once, and
 * the receiver unpacks each packet by its offset into the buffer the handler
 * chose.
 *
 * Eager packets are deterministic, and a destination's queue never
 * interleaves two messages, so a source has at most one eager message in
 * reassembly and its packets come in order: the offset is checked, not
 * searched for.
 *
 * Adaptive packets come in any order. A message is named by its seq, data
 * packets that beat their first packet are parked (torxm_early_t), and the
 * receiver's token lets the sender start its next message to this peer. */
#include "msg_internal.h"

#include <stdlib.h>

/* Injects m's data packets from m->off on; seq_prefix adds the u32 seq in
 * front of the data (adaptive). TORX_OK when all are out. */
static torx_status_t push_more(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m, unsigned type,
                               unsigned ctl, int seq_prefix, unsigned proto)
{
    torx_pkt_hdr_t h;
    torx_pkt_hdr_init(&h, peer->coord, ctl);
    const uint64_t per = TORX_PKT_MAX_PAYLOAD - (seq_prefix ? TORXM_ADAPT_MORE_PREFIX : 0);
    const uint32_t seq = m->seq;
    struct iovec iov[2] = {{(void *)&seq, 4}, {NULL, 0}};
    struct iovec *data_iov = seq_prefix ? &iov[1] : &iov[0];
    while (m->off < m->len) {
        const uint64_t n = m->len - m->off < per ? m->len - m->off : per;
        torxm_sw_set(&h, type, (uint32_t)ctx->rank, (uint32_t)m->off);
        data_iov->iov_base = (void *)(m->data + m->off);
        data_iov->iov_len = (size_t)n;
        const torx_status_t rc = torxm_inject(ctx, &h, iov, seq_prefix ? 2 : 1, proto);
        if (rc != TORX_OK)
            return rc;
        m->off += n;
    }
    torxm_complete(ctx, m);
    return TORX_OK;
}

torx_status_t torxm_eager_push(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m)
{
    if (torxm_stages(ctx, peer, TORX_PROTO_EAGER, m->len))
        return torxm_staged_push(ctx, peer, m, TORX_PROTO_EAGER);
    if (m->state == TORXM_MSG_FIRST) {
        torx_pkt_hdr_t h;
        torx_pkt_hdr_init(&h, peer->coord, 0);
        torxm_sw_set(&h, TORXM_PKT_EAGER_FIRST, (uint32_t)ctx->rank,
                     torxm_first_word(m->handler, m->hdr_len, 0));
        const uint32_t total = (uint32_t)m->len;
        const uint64_t n = torxm_first_chunk(TORXM_EAGER_FIRST_PREFIX, m->hdr_len, m->len);
        const struct iovec iov[3] = {
            {(void *)&total, 4}, {m->hdr, m->hdr_len}, {(void *)m->data, (size_t)n}};
        const torx_status_t rc = torxm_inject(ctx, &h, iov, 3, TORX_PROTO_EAGER);
        if (rc != TORX_OK)
            return rc;
        ctx->stats[TORX_PROTO_EAGER].sent++;
        ctx->stats[TORX_PROTO_EAGER].bytes_sent += m->len;
        torxm_count_dest(ctx, peer, m->len);
        m->off = n;
        m->state = TORXM_MSG_MORE;
    }
    return push_more(ctx, peer, m, TORXM_PKT_EAGER_MORE, 0, 0, TORX_PROTO_EAGER);
}

torx_status_t torxm_adapt_push(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m)
{
    if (m->state == TORXM_MSG_FIRST) {
        torx_pkt_hdr_t h;
        torx_pkt_hdr_init(&h, peer->coord, TORX_PKT_ADAPTIVE);
        torxm_sw_set(&h, TORXM_PKT_ADAPT_FIRST, (uint32_t)ctx->rank,
                     torxm_first_word(m->handler, m->hdr_len, 0));
        const uint32_t pre[2] = {(uint32_t)m->len, m->seq};
        const uint64_t n = torxm_first_chunk(TORXM_ADAPT_FIRST_PREFIX, m->hdr_len, m->len);
        const struct iovec iov[3] = {
            {(void *)pre, sizeof pre}, {m->hdr, m->hdr_len}, {(void *)m->data, (size_t)n}};
        const torx_status_t rc = torxm_inject(ctx, &h, iov, 3, TORX_PROTO_ADAPTIVE);
        if (rc != TORX_OK)
            return rc;
        ctx->stats[TORX_PROTO_ADAPTIVE].sent++;
        ctx->stats[TORX_PROTO_ADAPTIVE].bytes_sent += m->len;
        torxm_count_dest(ctx, peer, m->len);
        /* The next message to this peer waits for the token (peer_push). */
        peer->tokens_owed++;
        m->off = n;
        m->state = TORXM_MSG_MORE;
    }
    return push_more(ctx, peer, m, TORXM_PKT_ADAPT_MORE, TORX_PKT_ADAPTIVE, 1, TORX_PROTO_ADAPTIVE);
}

/* ---- Eager reception ------------------------------------------------------------- */

void torxm_eager_first_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt)
{
    const int src = peer->rank;
    const uint32_t w = torxm_sw_word(pkt);
    const unsigned hl = (w >> 8) & 0xffu;
    const uint8_t *p = torx_pkt_payload(pkt);
    if (TORXM_UNLIKELY(TORXM_EAGER_FIRST_PREFIX + hl > pkt->payload_len || peer->eager)) {
        torxm_bad_packet(ctx, src,
                         peer->eager ? "an eager message starting inside another"
                                     : "a short eager first packet");
        return;
    }
    const uint64_t total = torxm_ld32(p);
    const uint64_t n = pkt->payload_len - TORXM_EAGER_FIRST_PREFIX - hl;
    const uint8_t *data = p + TORXM_EAGER_FIRST_PREFIX + hl;
    torx_recv_t recv;
    torxm_match(ctx, src, w & 0xffu, p + TORXM_EAGER_FIRST_PREFIX, hl, (size_t)total,
                n >= total ? data : NULL, TORX_PROTO_EAGER, 0, &recv);
    if (n >= total) {
        torxm_matched(ctx, peer);
        torxm_recv_now(ctx, src, &recv, data, (size_t)total);
        return;
    }
    torxm_rx_t *rx = torxm_rx_new(ctx, src, &recv, total, TORX_PROTO_EAGER);
    if (TORXM_UNLIKELY(!rx)) { /* the context has failed; the receive fails */
        torxm_matched(ctx, peer);
        if (recv.done)
            recv.done(ctx, recv.arg, TORX_ERR_NOMEM, 0);
        return;
    }
    torxm_rx_put(ctx, rx, 0, data, n);
    peer->eager = rx;
    torxm_matched(ctx, peer);
}

void torxm_eager_more_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt)
{
    torxm_rx_t *rx = peer->eager;
    const uint64_t off = torxm_sw_word(pkt);
    if (TORXM_UNLIKELY(!rx || off != rx->arrived || off + pkt->payload_len > rx->want ||
                       (rx->flags & TORXM_RX_STAGED))) {
        torxm_bad_packet(ctx, peer->rank,
                         rx ? "an eager packet out of place" : "an eager packet without a message");
        return;
    }
    torxm_rx_put(ctx, rx, off, torx_pkt_payload(pkt), pkt->payload_len);
    if (rx->arrived == rx->want) {
        peer->eager = NULL;
        torxm_rx_finish(ctx, rx);
    }
}

/* ---- Adaptive reception ----------------------------------------------------------- */

static void park(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt, uint32_t seq)
{
    /* A sender starts nothing after an adaptive message until its token
     * comes back, and that message's first packet is matched before the
     * token goes: so whatever is parked from one peer belongs to one
     * message. Packets of a second one are a broken or hostile peer's, and
     * parking them would let it grow this list without bound. */
    if (TORXM_UNLIKELY(peer->early != NULL && peer->early->seq != seq)) {
        torxm_bad_packet(ctx, peer->rank, "adaptive packets of two messages ahead of their turn");
        return;
    }
    torxm_early_t *e = ctx->early_free;
    if (e) {
        ctx->early_free = e->next;
    } else if (!(e = torxp_malloc(sizeof *e))) {
        torxm_fail(ctx, TORX_ERR_NOMEM,
                   "out of memory parking an early adaptive packet from rank %d (its message "
                   "cannot complete)",
                   peer->rank);
        return;
    }
    ctx->parked++;
    e->seq = seq;
    memcpy(&e->pkt, pkt, sizeof *pkt + pkt->payload_len);
    e->next = peer->early;
    peer->early = e;
}

static void unpark(torx_ctx_t *ctx, torxm_early_t *e)
{
    e->next = ctx->early_free;
    ctx->early_free = e;
}

static void adapt_put(torx_ctx_t *ctx, torxm_rx_t *rx, const torx_pkt_hdr_t *pkt)
{
    torxm_rx_put(ctx, rx, torxm_sw_word(pkt), (const uint8_t *)torx_pkt_payload(pkt) + 4,
                 pkt->payload_len - TORXM_ADAPT_MORE_PREFIX);
}

/* Whether the adaptive data packet pkt would reach past rx's bytes, or
 * repeat bytes that already arrived: arrived must reach want exactly. */
static bool adapt_more_past(const torxm_rx_t *rx, const torx_pkt_hdr_t *pkt)
{
    const uint64_t off = torxm_sw_word(pkt), n = pkt->payload_len - TORXM_ADAPT_MORE_PREFIX;
    return off + n > rx->want || rx->arrived + n > rx->want;
}

static void adapt_unlink(torxm_peer_t *peer, torxm_rx_t *rx)
{
    for (torxm_rx_t **pp = &peer->adapt; *pp; pp = &(*pp)->next)
        if (*pp == rx) {
            *pp = rx->next;
            return;
        }
}

/* Matches the adaptive message whose first packet is pkt (its turn has come). */
static void adapt_first(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt)
{
    const int src = peer->rank;
    const uint32_t w = torxm_sw_word(pkt);
    const unsigned hl = (w >> 8) & 0xffu;
    const uint8_t *p = torx_pkt_payload(pkt);
    const uint64_t total = torxm_ld32(p);
    const uint32_t seq = torxm_ld32(p + 4);
    const uint64_t n = pkt->payload_len - TORXM_ADAPT_FIRST_PREFIX - hl;
    const uint8_t *data = p + TORXM_ADAPT_FIRST_PREFIX + hl;
    torx_recv_t recv;
    torxm_match(ctx, src, w & 0xffu, p + TORXM_ADAPT_FIRST_PREFIX, hl, (size_t)total,
                n >= total ? data : NULL, TORX_PROTO_ADAPTIVE, 0, &recv);
    /* Matched: the sender may start its next message to us. */
    torxm_ctrl_send(ctx, src, TORXM_PKT_ADAPT_TOKEN, seq, NULL, 0, TORX_PROTO_ADAPTIVE);
    if (n >= total) {
        torxm_matched(ctx, peer);
        torxm_recv_now(ctx, src, &recv, data, (size_t)total);
        return;
    }
    torxm_rx_t *rx = torxm_rx_new(ctx, src, &recv, total, TORX_PROTO_ADAPTIVE);
    if (TORXM_UNLIKELY(!rx)) { /* the context has failed; the receive fails */
        torxm_matched(ctx, peer);
        if (recv.done)
            recv.done(ctx, recv.arg, TORX_ERR_NOMEM, 0);
        return;
    }
    rx->seq = seq;
    torxm_rx_put(ctx, rx, 0, data, n);
    /* Data packets of this message that came before it. */
    for (torxm_early_t **pp = &peer->early; *pp;) {
        torxm_early_t *e = *pp;
        if (e->seq == seq && torxm_sw_type(&e->pkt) == TORXM_PKT_ADAPT_MORE) {
            *pp = e->next;
            /* Checked as torxm_adapt_more_rx checks a packet that finds its
             * message: a parked one could not be, its message was unknown. */
            if (TORXM_UNLIKELY(adapt_more_past(rx, &e->pkt)))
                torxm_bad_packet(ctx, src, "an adaptive data packet past its message");
            else
                adapt_put(ctx, rx, &e->pkt);
            unpark(ctx, e);
        } else {
            pp = &e->next;
        }
    }
    if (rx->arrived == rx->want) {
        torxm_matched(ctx, peer);
        torxm_rx_finish(ctx, rx);
        return;
    }
    rx->next = peer->adapt;
    peer->adapt = rx;
    torxm_matched(ctx, peer);
}

void torxm_release_due(torx_ctx_t *ctx, torxm_peer_t *peer)
{
    for (torxm_early_t **pp = &peer->early; *pp; pp = &(*pp)->next) {
        torxm_early_t *e = *pp;
        if (e->seq == peer->rx_seq && torxm_sw_type(&e->pkt) == TORXM_PKT_ADAPT_FIRST) {
            *pp = e->next;
            adapt_first(ctx, peer, &e->pkt);
            unpark(ctx, e);
            return;
        }
    }
}

void torxm_adapt_first_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt)
{
    const uint32_t w = torxm_sw_word(pkt);
    const unsigned hl = (w >> 8) & 0xffu;
    if (TORXM_UNLIKELY(TORXM_ADAPT_FIRST_PREFIX + hl > pkt->payload_len)) {
        torxm_bad_packet(ctx, peer->rank, "a short adaptive first packet");
        return;
    }
    const uint32_t seq = torxm_ld32((const uint8_t *)torx_pkt_payload(pkt) + 4);
    if (seq != peer->rx_seq) {
        /* It overtook deterministic messages sent before it. */
        park(ctx, peer, pkt, seq);
        return;
    }
    adapt_first(ctx, peer, pkt);
}

void torxm_adapt_more_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt)
{
    if (TORXM_UNLIKELY(pkt->payload_len < TORXM_ADAPT_MORE_PREFIX)) {
        torxm_bad_packet(ctx, peer->rank, "a short adaptive data packet");
        return;
    }
    const uint32_t seq = torxm_ld32(torx_pkt_payload(pkt));
    torxm_rx_t *rx = peer->adapt;
    while (rx && rx->seq != seq)
        rx = rx->next;
    if (!rx) {
        if ((int32_t)(seq - peer->rx_seq) >= 0)
            park(ctx, peer, pkt, seq); /* it beat its first packet */
        else
            torxm_bad_packet(ctx, peer->rank, "an adaptive data packet of a finished message");
        return;
    }
    if (TORXM_UNLIKELY(adapt_more_past(rx, pkt))) {
        torxm_bad_packet(ctx, peer->rank, "an adaptive data packet past its message");
        return;
    }
    adapt_put(ctx, rx, pkt);
    if (rx->arrived == rx->want) {
        adapt_unlink(peer, rx);
        torxm_rx_finish(ctx, rx);
    }
}

void torxm_adapt_token_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt)
{
    (void)pkt;
    if (TORXM_UNLIKELY(!peer->tokens_owed)) {
        torxm_bad_packet(ctx, peer->rank, "an adaptive token nobody waits for");
        return;
    }
    if (--peer->tokens_owed == 0 && peer->head)
        torxm_peer_push(ctx, peer);
}
