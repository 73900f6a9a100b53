/* Staged eager and vn messages: the data moves through the device's staging
 * area (torx_stage_put), a piece of up to ctx->stage_chunk bytes at a time,
 * each announced by one deterministic packet carrying its descriptor. The
 * first packet also carries the total and the header, so the receiver
 * matches on it exactly as on an eager first packet and copies each piece
 * straight from the staging area into the buffer the handler chose. The
 * receiver reads piece k while the sender copies piece k+1 in: a pipeline
 * of two copies with no system call and no handshake, where 240-byte
 * packets pay per-packet costs and a rendezvous pays a round trip and a
 * process_vm_readv.
 *
 * Nothing of the protocols' meaning changes: the packets are deterministic
 * and a source's pieces arrive and are released in order; a staged message
 * holds its source's eager reassembly slot like any eager message; the
 * counters are those of the protocol (eager or vn) the message belongs to. */
#include "msg_internal.h"

static inline uint64_t ref_pack(torx_stage_ref_t r)
{
    return (uint64_t)r.off << 32 | r.len;
}

static inline torx_stage_ref_t ref_unpack(uint64_t v)
{
    return (torx_stage_ref_t){.off = (uint32_t)(v >> 32), .len = (uint32_t)v};
}

/* Stages m's next piece (of the bytes up to end) unless one waits for its
 * packet already. */
static inline torx_status_t stage_next(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m,
                                       uint64_t end)
{
    if (m->piece)
        return TORX_OK;
    const uint64_t left = end - m->off;
    const size_t n = (size_t)(left < ctx->stage_chunk ? left : ctx->stage_chunk);
    torx_stage_ref_t ref;
    const torx_status_t rc = torx_stage_put(ctx->dev, peer->coord, m->data + m->off, n, &ref);
    if (rc != TORX_OK)
        return rc;
    m->off += n;
    m->piece = ref_pack(ref); /* never 0: len >= 1 */
    return TORX_OK;
}

torx_status_t torxm_staged_first(torx_ctx_t *ctx, torxm_peer_t *peer, unsigned proto,
                                 unsigned handler, const void *hdr, size_t hdr_len, uint64_t len,
                                 torx_stage_ref_t ref)
{
    torx_pkt_hdr_t h;
    torx_pkt_hdr_init(&h, peer->coord, 0);
    torxm_sw_set(&h, proto == TORX_PROTO_VN ? TORXM_PKT_VN_STAGED : TORXM_PKT_EAGER_STAGED,
                 (uint32_t)ctx->rank, torxm_first_word(handler, (unsigned)hdr_len, 0));
    const uint32_t pre[3] = {(uint32_t)len, ref.off, ref.len};
    const struct iovec iov[2] = {{(void *)pre, sizeof pre}, {(void *)hdr, hdr_len}};
    const torx_status_t rc = torxm_inject(ctx, &h, iov, 2, proto);
    if (rc == TORX_OK) {
        ctx->stats[proto].sent++;
        ctx->stats[proto].bytes_sent += len;
        torxm_count_dest(ctx, peer, len);
    }
    return rc;
}

torx_status_t torxm_staged_push(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m, unsigned proto)
{
    const int vn = proto == TORX_PROTO_VN;
    if (m->state == TORXM_MSG_FIRST) {
        torx_status_t rc = stage_next(ctx, peer, m, m->len);
        if (rc != TORX_OK)
            return rc;
        rc = torxm_staged_first(ctx, peer, proto, m->handler, m->hdr, m->hdr_len, m->len,
                                ref_unpack(m->piece));
        if (rc != TORX_OK)
            return rc;
        m->piece = 0;
        m->state = TORXM_MSG_MORE;
    }
    const torx_status_t rc = torxm_stage_pieces(
        ctx, peer, m, m->len, vn ? TORXM_PKT_VN_PIECE : TORXM_PKT_EAGER_PIECE, NULL, proto);
    if (rc == TORX_OK)
        torxm_complete(ctx, m);
    return rc;
}

torx_status_t torxm_stage_pieces(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m, uint64_t end,
                                 unsigned type, const uint64_t *rcookie, unsigned proto)
{
    torx_pkt_hdr_t h;
    torx_pkt_hdr_init(&h, peer->coord, 0);
    uint8_t d[TORXM_RZV_PIECE_BYTES];
    size_t n = 0;
    if (rcookie) {
        memcpy(d, rcookie, 8);
        n = 8;
    }
    const struct iovec iov = {d, n + TORXM_PIECE_BYTES};
    while (m->off < end || m->piece) {
        torx_status_t rc = stage_next(ctx, peer, m, end);
        if (rc != TORX_OK)
            return rc;
        const torx_stage_ref_t ref = ref_unpack(m->piece);
        torxm_sw_set(&h, type, (uint32_t)ctx->rank, (uint32_t)(m->off - ref.len));
        const uint32_t r[2] = {ref.off, ref.len};
        memcpy(d + n, r, sizeof r);
        rc = torxm_inject(ctx, &h, &iov, 1, proto);
        if (rc != TORX_OK)
            return rc;
        m->piece = 0;
    }
    return TORX_OK;
}

/* ---- Reception ------------------------------------------------------------------- */

/* Starts the transfer of a staged piece's first lines from the sender's
 * core, so that they overlap matching and the handler. */
#define PREFETCH_BYTES 1024u
static inline void prefetch_piece(const void *data, uint32_t len)
{
    const char *p = data;
    const char *const end = p + (len < PREFETCH_BYTES ? len : PREFETCH_BYTES);
    do
        __builtin_prefetch(p);
    while ((p += TORXP_CACHELINE) < end);
}

static inline torx_stage_ref_t ref_at(const uint8_t *p)
{
    return (torx_stage_ref_t){.off = torxm_ld32(p), .len = torxm_ld32(p + 4)};
}

void torxm_staged_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt)
{
    const int src = peer->rank;
    const unsigned proto =
        torxm_sw_type(pkt) == TORXM_PKT_VN_STAGED ? TORX_PROTO_VN : TORX_PROTO_EAGER;
    const uint32_t w = torxm_sw_word(pkt);
    const unsigned hl = (w >> 8) & 0xffu;
    const uint8_t *p = torx_pkt_payload(pkt);
    if (TORXM_UNLIKELY(TORXM_STAGED_PREFIX + hl > pkt->payload_len || peer->eager)) {
        torxm_bad_packet(ctx, src,
                         peer->eager ? "a staged message starting inside another"
                                     : "a short staged first packet");
        return;
    }
    const uint64_t total = torxm_ld32(p);
    const torx_stage_ref_t ref = ref_at(p + 4);
    const void *data = ref.len <= total ? torx_stage_data(ctx->dev, peer->coord, ref) : NULL;
    if (TORXM_UNLIKELY(!data)) {
        torxm_bad_packet(ctx, src, "a staged first packet naming no staged piece");
        return;
    }
    prefetch_piece(data, ref.len);
    torx_recv_t recv;
    const int all = ref.len == total;
    torxm_match(ctx, src, w & 0xffu, p + TORXM_STAGED_PREFIX, hl, (size_t)total, all ? data : NULL,
                proto, 0, &recv);
    if (all) {
        torxm_matched(ctx, peer);
        ctx->staged_pieces++; /* before the done callback, which may read it */
        torxm_recv_now(ctx, src, &recv, data, (size_t)total);
        torx_stage_release(ctx->dev, peer->coord, ref);
        return;
    }
    torxm_rx_t *rx = torxm_rx_new(ctx, src, &recv, total, proto);
    if (TORXM_UNLIKELY(!rx)) { /* the context has failed; the receive fails */
        torx_stage_release(ctx->dev, peer->coord, ref);
        torxm_matched(ctx, peer);
        if (recv.done)
            recv.done(ctx, recv.arg, TORX_ERR_NOMEM, 0);
        return;
    }
    rx->flags = TORXM_RX_STAGED;
    torxm_rx_put(ctx, rx, 0, data, ref.len);
    torx_stage_release(ctx->dev, peer->coord, ref);
    ctx->staged_pieces++;
    peer->eager = rx;
    torxm_matched(ctx, peer);
}

void torxm_piece_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt)
{
    torxm_rx_t *rx = peer->eager;
    const uint64_t off = torxm_sw_word(pkt);
    const int src = peer->rank;
    if (TORXM_UNLIKELY(!rx || !(rx->flags & TORXM_RX_STAGED) ||
                       pkt->payload_len != TORXM_PIECE_BYTES)) {
        torxm_bad_packet(ctx, src,
                         rx ? "a staged piece out of place" : "a staged piece without a message");
        return;
    }
    const torx_stage_ref_t ref = ref_at(torx_pkt_payload(pkt));
    const void *data = off == rx->arrived && off + ref.len <= rx->want
                           ? torx_stage_data(ctx->dev, peer->coord, ref)
                           : NULL;
    if (TORXM_UNLIKELY(!data)) {
        torxm_bad_packet(ctx, src, "a staged piece that is not the next one of its message");
        return;
    }
    torxm_rx_put(ctx, rx, off, data, ref.len);
    torx_stage_release(ctx->dev, peer->coord, ref);
    ctx->staged_pieces++;
    if (rx->arrived == rx->want) {
        peer->eager = NULL;
        torxm_rx_finish(ctx, rx);
    }
}

void torxm_rzv_piece_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt)
{
    const int src = peer->rank;
    if (TORXM_UNLIKELY(pkt->payload_len != TORXM_RZV_PIECE_BYTES)) {
        torxm_bad_packet(ctx, src, "a short staged rendezvous piece");
        return;
    }
    const uint8_t *p = torx_pkt_payload(pkt);
    torxm_rx_t *rx = torxm_cookie_get(ctx, torxm_ld64(p), 1);
    const uint64_t off = torxm_sw_word(pkt);
    const torx_stage_ref_t ref = ref_at(p + 8);
    /* A source's pieces come in order: each is the next of its transfer. */
    const void *data = rx && rx->src == src && off == rx->arrived && off + ref.len <= rx->want
                           ? torx_stage_data(ctx->dev, peer->coord, ref)
                           : NULL;
    if (TORXM_UNLIKELY(!data)) {
        torxm_bad_packet(ctx, src,
                         "a staged rendezvous piece that is not the next one of its "
                         "transfer");
        return;
    }
    torxm_rx_put(ctx, rx, off, data, ref.len);
    torx_stage_release(ctx->dev, peer->coord, ref);
    ctx->staged_pieces++;
    if (rx->arrived == rx->want)
        torxm_rzv_stream_done(ctx, rx);
}
