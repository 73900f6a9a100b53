/* Rendezvous and virtual node: an ordered scout first; the data moves only
 * once the receiver's handler has chosen the buffer.
 *
 *   bulk (default)  scout {total, address, cookie} -> the receiver gets
 *                   min(total, its len) bytes with torx_bulk_get from the
 *                   sender's task -> ack {cookie} -> the sender's done.
 *   packets         scout (flag TORXM_SCOUT_PACKETS) -> clear-to-send
 *                   {cookie, rcookie, want} -> the sender streams want bytes
 *                   as adaptive packets {rcookie, data} at offsets -> done
 *                   once they are injected; the receiver counts bytes.
 *   virtual node    the bulk variant between the two tasks of one node
 *                   (VN_SCOUT / VN_ACK), counted as its own protocol.
 *
 * In co mode the get is the communication thread's (torxm_co_get): the
 * handler's choice of buffer is handed to it, it moves the data while the
 * task computes, and the task's next advance sends the ack and runs done.
 *
 * Asking for no more than the buffer holds is how truncation stays inside
 * the buffer, for the get and for the stream alike. */
#include "msg_internal.h"

static void __attribute__((noinline, cold))
bad_packet(torx_ctx_t *ctx, int src, const char *what)
{
    torxp_log(ctx->dev, 0, "protocol error: %s from rank %d; packet dropped", what, src);
}

/* ---- Sender ---------------------------------------------------------------------- */

static torx_status_t scout_push(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m,
                                unsigned type, unsigned proto, unsigned flags)
{
    if (!m->cookie) {
        const torx_status_t rc = torxm_cookie_new(ctx, m, 0, &m->cookie);
        if (rc != TORX_OK)
            return rc;
    }
    torx_pkt_hdr_t h;
    torx_pkt_hdr_init(&h, peer->coord, 0);
    torxm_sw_set(&h, type, (uint32_t)ctx->rank, torxm_first_word(m->handler, m->hdr_len, flags));
    const uint64_t pre[3] = {m->len, (uint64_t)(uintptr_t)m->data, m->cookie};
    const struct iovec iov[2] = {{(void *)pre, sizeof pre}, {m->hdr, m->hdr_len}};
    static_assert(sizeof pre == TORXM_SCOUT_PREFIX, "scout prefix");
    const torx_status_t rc = torxm_inject(ctx, &h, iov, 2, proto);
    if (rc != TORX_OK)
        return rc;
    ctx->stats[proto].sent++;
    ctx->stats[proto].bytes_sent += m->len;
    m->state = TORXM_MSG_AWAIT;
    ctx->awaiting++;
    return TORX_OK;
}

/* Streams the data the clear-to-send asked for. */
static torx_status_t stream_push(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m)
{
    torx_pkt_hdr_t h;
    torx_pkt_hdr_init(&h, peer->coord, TORX_PKT_ADAPTIVE);
    const uint64_t per = TORX_PKT_MAX_PAYLOAD - TORXM_RZV_DATA_PREFIX;
    struct iovec iov[2] = {{&m->rcookie, 8}, {NULL, 0}};
    while (m->off < m->want) {
        const uint64_t n = m->want - m->off < per ? m->want - m->off : per;
        torxm_sw_set(&h, TORXM_PKT_RZV_DATA, (uint32_t)ctx->rank, (uint32_t)m->off);
        iov[1].iov_base = (void *)(m->data + m->off);
        iov[1].iov_len = (size_t)n;
        const torx_status_t rc = torxm_inject(ctx, &h, iov, 2, TORX_PROTO_RZV);
        if (rc != TORX_OK)
            return rc;
        m->off += n;
    }
    torxm_cookie_free(ctx, m->cookie);
    m->cookie = 0;
    ctx->awaiting--;
    torxm_complete(ctx, m);
    return TORX_OK;
}

torx_status_t torxm_rzv_push(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m)
{
    if (m->state == TORXM_MSG_STREAM)
        return stream_push(ctx, peer, m);
    /* Streamed offsets are 32-bit: larger messages take the bulk get. */
    const unsigned flags =
        ctx->limits.rzv_packets && m->len <= TORXM_STREAM_MAX ? TORXM_SCOUT_PACKETS : 0;
    return scout_push(ctx, peer, m, TORXM_PKT_RZV_SCOUT, TORX_PROTO_RZV, flags);
}

torx_status_t torxm_vn_push(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m)
{
    return scout_push(ctx, peer, m, TORXM_PKT_VN_SCOUT, TORX_PROTO_VN, 0);
}

/* The send a cookie from peer names, if it waits for the receiver. */
static torxm_msg_t *awaiting_msg(torx_ctx_t *ctx, torxm_peer_t *peer, uint64_t cookie)
{
    torxm_msg_t *m = torxm_cookie_get(ctx, cookie);
    if (TORXM_UNLIKELY(!m || m->magic != TORXM_MSG_MAGIC || m->state != TORXM_MSG_AWAIT ||
                       &ctx->peers[m->dest] != peer)) {
        bad_packet(ctx, (int)(peer - ctx->peers), "a rendezvous reply naming no waiting send");
        return NULL;
    }
    return m;
}

void torxm_ack_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt)
{
    if (TORXM_UNLIKELY(pkt->payload_len < 8)) {
        bad_packet(ctx, (int)(peer - ctx->peers), "a short rendezvous ack");
        return;
    }
    torxm_msg_t *m = awaiting_msg(ctx, peer, torxm_ld64(torx_pkt_payload(pkt)));
    if (!m)
        return;
    torxm_cookie_free(ctx, m->cookie);
    m->cookie = 0;
    ctx->awaiting--;
    torxm_complete(ctx, m);
}

void torxm_cts_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt)
{
    if (TORXM_UNLIKELY(pkt->payload_len < 24)) {
        bad_packet(ctx, (int)(peer - ctx->peers), "a short clear-to-send");
        return;
    }
    const uint8_t *p = torx_pkt_payload(pkt);
    torxm_msg_t *m = awaiting_msg(ctx, peer, torxm_ld64(p));
    if (!m)
        return;
    const uint64_t want = torxm_ld64(p + 16);
    if (TORXM_UNLIKELY(want > m->len)) {
        bad_packet(ctx, (int)(peer - ctx->peers), "a clear-to-send for more than was sent");
        return;
    }
    if (want == 0) {
        torxm_cookie_free(ctx, m->cookie);
        m->cookie = 0;
        ctx->awaiting--;
        torxm_complete(ctx, m);
        return;
    }
    m->rcookie = torxm_ld64(p + 8);
    m->want = want;
    m->off = 0;
    m->state = TORXM_MSG_STREAM;
    /* The data joins the queue like a message (already matched, so it does
     * not wait for tokens) and never interleaves with others. */
    torxm_enqueue(ctx, peer, m);
    if (peer->head == m)
        torxm_peer_push(ctx, peer);
}

/* ---- Receiver --------------------------------------------------------------------- */

void torxm_bulk_done(torx_ctx_t *ctx, torxm_rx_t *rx, torx_status_t st)
{
    if (st < 0)
        rx->status = st;
    else
        rx->arrived = rx->want;
    /* Ack even after a failed get: the sender's buffer is free either way. */
    torxm_ctrl_send(ctx, rx->src, rx->ack_type, 0, &rx->scookie, 8, rx->proto);
    torxm_rx_finish(ctx, rx);
}

void torxm_scout_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt)
{
    const int src = (int)(peer - ctx->peers);
    const unsigned type = torxm_sw_type(pkt);
    const unsigned proto = type == TORXM_PKT_VN_SCOUT ? TORX_PROTO_VN : TORX_PROTO_RZV;
    const unsigned ack_type = type == TORXM_PKT_VN_SCOUT ? TORXM_PKT_VN_ACK : TORXM_PKT_RZV_ACK;
    const uint32_t w = torxm_sw_word(pkt);
    const unsigned hl = (w >> 8) & 0xffu, flags = w >> 16;
    if (TORXM_UNLIKELY(TORXM_SCOUT_PREFIX + hl > pkt->payload_len)) {
        bad_packet(ctx, src, "a short scout");
        return;
    }
    const uint8_t *p = torx_pkt_payload(pkt);
    const uint64_t total = torxm_ld64(p), addr = torxm_ld64(p + 8), scookie = torxm_ld64(p + 16);
    const uint8_t *hdr = p + TORXM_SCOUT_PREFIX;
    torx_recv_t recv;
    /* A zero-length message is all here: data is non-NULL, as promised. */
    torxm_match(ctx, src, w & 0xffu, hdr, hl, (size_t)total, total ? NULL : hdr + hl, proto,
                &recv);
    torxm_matched(ctx, peer);
    const uint64_t want = recv.buf ? (total < recv.len ? total : recv.len) : 0;

    if (flags & TORXM_SCOUT_PACKETS) {
        uint64_t cts[3] = {scookie, 0, want};
        if (want == 0) {
            torxm_ctrl_send(ctx, src, TORXM_PKT_RZV_CTS, 0, cts, sizeof cts, proto);
            /* want == 0: nothing to copy, only the status to report */
            torxm_recv_now(ctx, src, &recv, hdr + hl, (size_t)total);
            return;
        }
        torxm_rx_t *rx = torxm_rx_new(ctx, src, &recv, total, proto);
        rx->want = want;
        rx->scookie = scookie;
        const torx_status_t rc = torxm_cookie_new(ctx, rx, 1, &rx->rcookie);
        if (rc != TORX_OK) { /* tell the sender to send nothing; fail this receive */
            cts[2] = 0;
            torxm_ctrl_send(ctx, src, TORXM_PKT_RZV_CTS, 0, cts, sizeof cts, proto);
            rx->status = rc;
            torxm_rx_finish(ctx, rx);
            return;
        }
        cts[1] = rx->rcookie;
        torxm_ctrl_send(ctx, src, TORXM_PKT_RZV_CTS, 0, cts, sizeof cts, proto);
        ctx->inflight_rx++;
        return;
    }

    if (want == 0) {
        torxm_ctrl_send(ctx, src, ack_type, 0, &scookie, 8, proto);
        torxm_recv_now(ctx, src, &recv, hdr + hl, (size_t)total); /* want == 0: status only */
        return;
    }
    torxm_rx_t *rx = torxm_rx_new(ctx, src, &recv, total, proto);
    rx->want = want;
    rx->scookie = scookie;
    rx->ack_type = (uint8_t)ack_type;
    if (ctx->co) { /* co mode: the communication thread moves the data */
        rx->raddr = addr;
        torxm_co_get(ctx, rx);
        return;
    }
    torx_status_t rc = torx_bulk_get(ctx->dev, &rx->bulk, peer->coord,
                                     (const void *)(uintptr_t)addr, rx->buf, (size_t)want);
    if (rc == TORX_OK)
        rc = torx_bulk_test(ctx->dev, &rx->bulk); /* cross-memory attach is done already */
    if (rc != TORX_AGAIN) {
        torxm_bulk_done(ctx, rx, rc);
        return;
    }
    rx->next = ctx->bulk;
    ctx->bulk = rx;
    ctx->inflight_rx++;
}

int torxm_bulk_progress(torx_ctx_t *ctx)
{
    int n = 0;
    for (torxm_rx_t **pp = &ctx->bulk; *pp;) {
        torxm_rx_t *rx = *pp;
        const torx_status_t st = torx_bulk_test(ctx->dev, &rx->bulk);
        if (st == TORX_AGAIN) {
            pp = &rx->next;
            continue;
        }
        *pp = rx->next;
        ctx->inflight_rx--;
        torxm_bulk_done(ctx, rx, st);
        n++;
    }
    return n;
}

void torxm_rzv_data_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt)
{
    const int src = (int)(peer - ctx->peers);
    if (TORXM_UNLIKELY(pkt->payload_len < TORXM_RZV_DATA_PREFIX)) {
        bad_packet(ctx, src, "a short rendezvous data packet");
        return;
    }
    const uint8_t *p = torx_pkt_payload(pkt);
    torxm_rx_t *rx = torxm_cookie_get(ctx, torxm_ld64(p));
    const uint64_t off = torxm_sw_word(pkt), n = pkt->payload_len - TORXM_RZV_DATA_PREFIX;
    if (TORXM_UNLIKELY(!rx || rx->src != src || off + n > rx->want)) {
        bad_packet(ctx, src, "rendezvous data for no transfer of it");
        return;
    }
    torxm_rx_put(rx, off, p + TORXM_RZV_DATA_PREFIX, n);
    if (rx->arrived == rx->want) {
        torxm_cookie_free(ctx, rx->rcookie);
        ctx->inflight_rx--;
        torxm_rx_finish(ctx, rx);
    }
}
