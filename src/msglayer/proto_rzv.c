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
 *   staged          scout (flag TORXM_SCOUT_STAGED: the sender can) -> the
 *                   receiver chooses: a bulk get as above, or a clear-to-send
 *                   with TORXM_CTS_STAGED -> the sender streams want bytes
 *                   through the staging area, a piece per deterministic
 *                   packet {rcookie, ref} (proto_stage.c) -> done once they
 *                   are out. Two copies and no system call, as a staged
 *                   eager message, but the receive is matched, so nothing
 *                   is buffered (MPICH's old shared-memory LMT has this
 *                   shape). Rendezvous and vn scouts alike.
 *   virtual node    the bulk variant between the two tasks of one node
 *                   (VN_SCOUT / VN_ACK), counted as its own protocol.
 *
 * In co mode, when the communication thread has a core of its own
 * (ctx->co_net), the get is the thread's (torxm_co_get): the
 * handler's choice of buffer is handed to it, it moves the data while the
 * task computes, and the task's next advance sends the ack and runs done.
 *
 * Deferred: a handler that cannot choose the buffer yet sets recv->defer;
 * the scout waits in a record (scout_defer) and torx_accept later runs what
 * the handler's answer would have run (scout_start), done in a later advance.
 *
 * Asking for no more than the buffer holds is how truncation stays inside
 * the buffer, for the get and for the stream alike. */
#include "msg_internal.h"

/* ---- Sender ---------------------------------------------------------------------- */

static torx_status_t scout_push(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m, unsigned type,
                                unsigned proto, unsigned flags)
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
    torxm_count_dest(ctx, peer, m->len);
    m->state = TORXM_MSG_AWAIT;
    ctx->awaiting++;
    peer->awaiting++;
    return TORX_OK;
}

/* A rendezvous send its receiver is done with (acked, or all the data it
 * asked for streamed): the cookie goes, the send stops waiting, and it
 * completes. */
static void awaiting_done_at(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m, uint64_t when)
{
    if (torxm_rzv_way_counts(ctx, peer, m->len))
        torxm_rzv_way_sent(ctx, peer, m->len, m->state == TORXM_MSG_STAGE, when);
    torxm_cookie_free(ctx, m->cookie);
    m->cookie = 0;
    ctx->awaiting--;
    peer->awaiting--;
    torxm_complete(ctx, m);
}

static void awaiting_done(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m)
{
    awaiting_done_at(ctx, peer, m, 0);
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
    awaiting_done(ctx, peer, m);
    return TORX_OK;
}

/* Streams the data a staged clear-to-send asked for through the staging
 * area, a piece per packet (proto_stage.c); done once all are out. */
static torx_status_t stage_stream_push(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m)
{
    const torx_status_t rc =
        torxm_stage_pieces(ctx, peer, m, m->want, TORXM_PKT_RZV_PIECE, &m->rcookie, m->proto);
    if (rc == TORX_OK)
        awaiting_done(ctx, peer, m);
    return rc;
}

/* What a scout offers its receiver (TORXM_ASK_SCOUT): a clear-to-send and
 * packets, or the choice of the staging area, or nothing (a bulk get). */
static unsigned scout_flags(torx_ctx_t *ctx, torxm_peer_t *peer, const torxm_msg_t *m)
{
    torxm_path_in_t in = torxm_path_inputs(ctx, peer, TORXM_ASK_SCOUT, m->len, 0);
    in.rzv = m->proto == TORX_PROTO_RZV;
    const torxm_path_out_t out = torxm_path_choose(&in);
    torxm_path_apply(ctx, peer, &out);
    if (out.path == TORXM_PATH_PACKETS)
        return TORXM_SCOUT_PACKETS;
    if (out.path != TORXM_PATH_STAGED)
        return 0;
    return out.probe ? TORXM_SCOUT_STAGED | TORXM_SCOUT_PROBE : TORXM_SCOUT_STAGED;
}

torx_status_t torxm_rzv_push(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m)
{
    if (m->state == TORXM_MSG_STREAM)
        return stream_push(ctx, peer, m);
    if (m->state == TORXM_MSG_STAGE)
        return stage_stream_push(ctx, peer, m);
    return scout_push(ctx, peer, m, TORXM_PKT_RZV_SCOUT, TORX_PROTO_RZV, scout_flags(ctx, peer, m));
}

torx_status_t torxm_scout_push(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m)
{
    assert(m->proto == TORX_PROTO_VN || !torxm_rzv_streams(ctx, m));
    const unsigned flags = scout_flags(ctx, peer, m);
    return m->proto == TORX_PROTO_VN
               ? scout_push(ctx, peer, m, TORXM_PKT_VN_SCOUT, TORX_PROTO_VN, flags)
               : scout_push(ctx, peer, m, TORXM_PKT_RZV_SCOUT, TORX_PROTO_RZV, flags);
}

torx_status_t torxm_vn_push(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m)
{
    /* Up to the eager limit the data goes through the staging area: for
     * these sizes a cross-memory copy's system call and the ack cost more
     * than a second copy, unless copies into the area run slow. So it does
     * up to the idle limit when the pair is idle. The choice holds once the
     * first piece is staged (m is the peer's head here, so nothing is
     * queued ahead of it). */
    if (m->state == TORXM_MSG_STAGE)
        return stage_stream_push(ctx, peer, m);
    if (m->piece || m->state == TORXM_MSG_MORE)
        return torxm_staged_push(ctx, peer, m, TORX_PROTO_VN);
    if (torxm_stages(ctx, peer, TORX_PROTO_VN, m->len) ? !torxm_slow_unstages(ctx, peer, m->len)
                                                       : torxm_idle_stages(ctx, peer, m->len))
        return torxm_staged_push(ctx, peer, m, TORX_PROTO_VN);
    return scout_push(ctx, peer, m, TORXM_PKT_VN_SCOUT, TORX_PROTO_VN, scout_flags(ctx, peer, m));
}

/* The send a cookie from peer names, if it waits for the receiver. */
static torxm_msg_t *awaiting_msg(torx_ctx_t *ctx, torxm_peer_t *peer, uint64_t cookie)
{
    torxm_msg_t *m = torxm_cookie_get(ctx, cookie, 0);
    if (TORXM_UNLIKELY(!m || m->magic != TORXM_MSG_MAGIC || m->state != TORXM_MSG_AWAIT ||
                       m->dest != peer->rank)) {
        torxm_bad_packet(ctx, peer->rank, "a rendezvous reply naming no waiting send");
        return NULL;
    }
    return m;
}

void torxm_ack_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt)
{
    if (TORXM_UNLIKELY(pkt->payload_len < 8)) {
        torxm_bad_packet(ctx, peer->rank, "a short rendezvous ack");
        return;
    }
    const uint8_t *p = torx_pkt_payload(pkt);
    torxm_msg_t *m = awaiting_msg(ctx, peer, torxm_ld64(p));
    if (!m)
        return;
    /* the receiver's clock when its get finished, for the pair's way */
    awaiting_done_at(ctx, peer, m, pkt->payload_len >= 16 ? torxm_ld64(p + 8) : 0);
}

void torxm_cts_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt)
{
    if (TORXM_UNLIKELY(pkt->payload_len < 24)) {
        torxm_bad_packet(ctx, peer->rank, "a short clear-to-send");
        return;
    }
    const uint8_t *p = torx_pkt_payload(pkt);
    torxm_msg_t *m = awaiting_msg(ctx, peer, torxm_ld64(p));
    if (!m)
        return;
    const uint64_t want = torxm_ld64(p + 16);
    if (TORXM_UNLIKELY(want > m->len)) {
        torxm_bad_packet(ctx, peer->rank, "a clear-to-send for more than was sent");
        return;
    }
    if (want == 0) {
        awaiting_done(ctx, peer, m);
        return;
    }
    const int staged = torxm_sw_word(pkt) & TORXM_CTS_STAGED;
    if (TORXM_UNLIKELY(staged ? !torxm_rzv_offers_stage(ctx, peer, m)
                              : m->proto != TORX_PROTO_RZV)) {
        torxm_bad_packet(ctx, peer->rank,
                         staged ? "a clear-to-send asking for staging that was not offered"
                                : "a clear-to-send asking a vn message for packets");
        return;
    }
    m->rcookie = torxm_ld64(p + 8);
    m->want = want;
    m->off = 0;
    m->state = staged ? TORXM_MSG_STAGE : TORXM_MSG_STREAM;
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
    torxm_peer_t *peer = torxm_peer_known(ctx, rx->src);
    /* Ack even after a failed get: the sender's buffer is free either way.
     * When the sender leads the pair's way (rzv_way.c), the ack says when
     * the get finished: acks queue while a task copies, and the time one
     * is read at would bunch the gets' completions. */
    uint64_t ack[2] = {rx->scookie, 0};
    size_t ack_len = 8;
    if (rx->way_counted) {
        if (st >= 0)
            torxm_rzv_way_received(ctx, peer, rx->total, 0, 0);
    } else if (st >= 0 && torxm_rzv_way_measured(ctx, peer, rx->total) &&
               !torxm_rzv_way_leads(ctx, peer)) {
        ack[1] = torxp_now_ns(ctx->dev);
        ack_len = sizeof ack;
    }
    torxm_ctrl_send(ctx, rx->src, rx->ack_type, 0, ack, ack_len, rx->proto);
    torxm_rx_finish(ctx, rx);
}

/* What a scout says, all a receive needs once its buffer is chosen. */
typedef struct scout {
    int src;
    unsigned proto, ack_type, flags;
    uint64_t total, addr, scookie;
} scout_t;

/* How this receiver takes the data of a scout from peer with flags
 * (TORXM_ASK_TAKE): staged, packets or a bulk get. The hold (peer->rzv_hold,
 * set by this task's own scouts for slow copies) counts down one scout from
 * peer; it lapses after TORXM_RZV_HOLD scouts with none of ours between:
 * this task's verdict was measured on its own traffic, which has stopped. */
static unsigned take_path(torx_ctx_t *ctx, torxm_peer_t *peer, unsigned flags, uint64_t total)
{
    const int hold = peer->rzv_hold != 0;
    if (hold)
        peer->rzv_hold--;
    torxm_path_in_t in = torxm_path_inputs(ctx, peer, TORXM_ASK_TAKE, total, flags);
    in.hold = (uint8_t)hold;
    const torxm_path_out_t out = torxm_path_choose(&in);
    torxm_path_apply(ctx, peer, &out);
    return out.path;
}

/* The source torxm_recv_now never reads when want is 0 (it must not be NULL). */
static const uint8_t nothing[1];

/* Moves the data of the scout s into the buffer recv chose: a clear-to-send
 * for packets, or for staging where the scout offers it and this receiver
 * takes it (take_path), else a bulk get (the communication
 * thread's in co mode);
 * with nothing to move (want 0), only the reply that lets the sender
 * complete and the status. rx: the record of a deferred scout, which
 * torx_accept continues (its done then runs in a later advance); NULL from
 * the handler, which allocates one only when data moves. */
static void scout_start(torx_ctx_t *ctx, const scout_t *s, const torx_recv_t *recv, torxm_rx_t *rx)
{
    const uint64_t total = s->total;
    const uint64_t want = recv->buf ? (total < recv->len ? total : recv->len) : 0;
    if (rx) {
        torxm_rx_init(rx, s->src, recv, total, s->proto);
        rx->pooled = 1;
        rx->later = 1;
    }
    torxm_peer_t *peer = torxm_peer_known(ctx, s->src);
    const unsigned path = take_path(ctx, peer, s->flags, total);
    const int staged = path == TORXM_PATH_STAGED;
    if (want) {
        torx_data_stats_t *d = &ctx->data_stats;
        if (path == TORXM_PATH_BULK)
            d->bulk++, d->bulk_bytes += want;
        else if (staged)
            d->staged++, d->staged_bytes += want;
        else
            d->packets++, d->packets_bytes += want;
    }
    const int counted = torxm_rzv_way_counts(ctx, peer, total);
    if (path != TORXM_PATH_BULK) {
        uint64_t cts[3] = {s->scookie, 0, want};
        if (want == 0) {
            torxm_ctrl_send(ctx, s->src, TORXM_PKT_RZV_CTS, 0, cts, sizeof cts, s->proto);
            goto status_only;
        }
        if (!rx && !(rx = torxm_rx_new(ctx, s->src, recv, total, s->proto))) {
            /* out of memory (the context has failed): the sender sends
             * nothing and completes; this receive fails */
            cts[2] = 0;
            torxm_ctrl_send(ctx, s->src, TORXM_PKT_RZV_CTS, 0, cts, sizeof cts, s->proto);
            goto nomem;
        }
        rx->want = want;
        rx->scookie = s->scookie;
        rx->way_counted = (uint8_t)(staged && counted);
        const torx_status_t rc = torxm_cookie_new(ctx, rx, 1, &rx->rcookie);
        if (rc != TORX_OK) { /* tell the sender to send nothing; fail this receive */
            cts[2] = 0;
            torxm_ctrl_send(ctx, s->src, TORXM_PKT_RZV_CTS, 0, cts, sizeof cts, s->proto);
            rx->status = rc;
            torxm_rx_finish(ctx, rx);
            return;
        }
        cts[1] = rx->rcookie;
        torxm_ctrl_send(ctx, s->src, TORXM_PKT_RZV_CTS, staged ? TORXM_CTS_STAGED : 0, cts,
                        sizeof cts, s->proto);
        ctx->inflight_rx++;
        return;
    }

    if (want == 0) {
        torxm_ctrl_send(ctx, s->src, s->ack_type, 0, &s->scookie, 8, s->proto);
        goto status_only;
    }
    if (!rx && !(rx = torxm_rx_new(ctx, s->src, recv, total, s->proto))) {
        torxm_ctrl_send(ctx, s->src, s->ack_type, 0, &s->scookie, 8, s->proto);
        goto nomem;
    }
    rx->want = want;
    rx->scookie = s->scookie;
    rx->ack_type = (uint8_t)s->ack_type;
    rx->way_counted = (uint8_t)counted;
    if (ctx->co_net) { /* co mode: the communication thread moves the data */
        rx->raddr = s->addr;
        torxm_co_get(ctx, rx);
        return;
    }
    /* A sender with no send of ours to copy and nothing queued toward it
     * only waits for this transfer's ack: it may take half the copy
     * (torx_bulk_get_shared). In a both-ways exchange both cores copy
     * already. */
    torx_status_t rc = (peer->awaiting || peer->head ? torx_bulk_get : torx_bulk_get_shared)(
        ctx->dev, &rx->bulk, peer->coord, (const void *)(uintptr_t)s->addr, rx->buf, (size_t)want);
    if (rc == TORX_OK)
        rc = torx_bulk_test(ctx->dev, &rx->bulk); /* cross-memory attach is done already */
    if (rc != TORX_AGAIN) {
        torxm_bulk_done(ctx, rx, rc);
        return;
    }
    rx->next = ctx->bulk;
    ctx->bulk = rx;
    ctx->inflight_rx++;
    return;

status_only: /* want == 0: nothing is copied, only the status is reported */
    if (rx)
        torxm_rx_finish(ctx, rx);
    else
        torxm_recv_now(ctx, s->src, recv, nothing, (size_t)total);
    return;

nomem:
    if (recv->done)
        recv->done(ctx, recv->arg, TORX_ERR_NOMEM, 0);
}

/* Keeps what the scout s says in a record on ctx->deferred and hands it out
 * through defer. It is not in flight: nothing moves until torx_accept. */
static void scout_defer(torx_ctx_t *ctx, const scout_t *s, torx_deferred_t **defer)
{
    static const torx_recv_t none; /* the handler's buf, len, done and arg do not count */
    torxm_rx_t *rx = torxm_rx_new(ctx, s->src, &none, s->total, s->proto);
    if (TORXM_UNLIKELY(!rx)) {
        /* out of memory (the context has failed): nothing can wait; the
         * sender is told to send nothing, and completes */
        if (s->flags & TORXM_SCOUT_PACKETS) {
            const uint64_t cts[3] = {s->scookie, 0, 0};
            torxm_ctrl_send(ctx, s->src, TORXM_PKT_RZV_CTS, 0, cts, sizeof cts, s->proto);
        } else {
            torxm_ctrl_send(ctx, s->src, s->ack_type, 0, &s->scookie, 8, s->proto);
        }
        *defer = NULL;
        return;
    }
    rx->raddr = s->addr;
    rx->scookie = s->scookie;
    rx->flags = (uint8_t)s->flags;
    rx->ack_type = (uint8_t)s->ack_type;
    rx->deferred = 1;
    rx->prev = NULL;
    rx->next = ctx->deferred;
    if (ctx->deferred)
        ctx->deferred->prev = rx;
    ctx->deferred = rx;
    *defer = (torx_deferred_t *)(void *)rx;
}

void torxm_scout_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt)
{
    const int src = peer->rank;
    const unsigned type = torxm_sw_type(pkt);
    const uint32_t w = torxm_sw_word(pkt);
    const unsigned hl = (w >> 8) & 0xffu;
    if (TORXM_UNLIKELY(TORXM_SCOUT_PREFIX + hl > pkt->payload_len)) {
        torxm_bad_packet(ctx, src, "a short scout");
        return;
    }
    const uint8_t *p = torx_pkt_payload(pkt);
    const scout_t s = {
        .src = src,
        .proto = type == TORXM_PKT_VN_SCOUT ? TORX_PROTO_VN : TORX_PROTO_RZV,
        .ack_type = type == TORXM_PKT_VN_SCOUT ? TORXM_PKT_VN_ACK : TORXM_PKT_RZV_ACK,
        .flags = w >> 16,
        .total = torxm_ld64(p),
        .addr = torxm_ld64(p + 8),
        .scookie = torxm_ld64(p + 16),
    };
    const uint8_t *hdr = p + TORXM_SCOUT_PREFIX;
    torx_recv_t recv;
    /* A zero-length message is all here: data is non-NULL, as promised (and
     * it cannot be deferred). */
    torxm_match(ctx, src, w & 0xffu, hdr, hl, (size_t)s.total, s.total ? NULL : hdr + hl, s.proto,
                1, &recv);
    torxm_matched(ctx, peer);
    if (TORXM_UNLIKELY(recv.defer != NULL)) {
        scout_defer(ctx, &s, recv.defer);
        return;
    }
    scout_start(ctx, &s, &recv, NULL);
}

torx_status_t torx_accept(torx_ctx_t *ctx, torx_deferred_t *d, const torx_recv_t *recv)
{
    if (!ctx || !d || !recv)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_accept: %s is NULL",
                           !ctx ? "ctx"
                           : !d ? "the deferred handle"
                                : "recv");
    torxm_rx_t *rx = (torxm_rx_t *)(void *)d;
    if (!rx->deferred)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_accept: %p is not a deferred message (accepted already?)",
                           (void *)d);
    if (rx->prev)
        rx->prev->next = rx->next;
    else
        ctx->deferred = rx->next;
    if (rx->next)
        rx->next->prev = rx->prev;
    rx->deferred = 0;
    const scout_t s = {.src = rx->src,
                       .proto = rx->proto,
                       .ack_type = rx->ack_type,
                       .flags = rx->flags,
                       .total = rx->total,
                       .addr = rx->raddr,
                       .scookie = rx->scookie};
    scout_start(ctx, &s, recv, rx);
    return TORX_OK;
}

int torxm_deferred_discard(torx_ctx_t *ctx)
{
    static const torx_recv_t discard; /* buf NULL: the sender completes, nothing moves */
    int n = 0;
    while (ctx->deferred) {
        torx_accept(ctx, (torx_deferred_t *)(void *)ctx->deferred, &discard);
        n++;
    }
    return n;
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
    const int src = peer->rank;
    if (TORXM_UNLIKELY(pkt->payload_len < TORXM_RZV_DATA_PREFIX)) {
        torxm_bad_packet(ctx, src, "a short rendezvous data packet");
        return;
    }
    const uint8_t *p = torx_pkt_payload(pkt);
    torxm_rx_t *rx = torxm_cookie_get(ctx, torxm_ld64(p), 1);
    const uint64_t off = torxm_sw_word(pkt), n = pkt->payload_len - TORXM_RZV_DATA_PREFIX;
    if (TORXM_UNLIKELY(!rx || rx->src != src || off + n > rx->want || rx->arrived + n > rx->want)) {
        torxm_bad_packet(ctx, src, "rendezvous data for no transfer of it");
        return;
    }
    torxm_rx_put(ctx, rx, off, p + TORXM_RZV_DATA_PREFIX, n);
    if (rx->arrived == rx->want)
        torxm_rzv_stream_done(ctx, rx);
}

void torxm_rzv_stream_done(torx_ctx_t *ctx, torxm_rx_t *rx)
{
    torxm_cookie_free(ctx, rx->rcookie);
    ctx->inflight_rx--;
    if (rx->way_counted)
        torxm_rzv_way_received(ctx, torxm_peer_known(ctx, rx->src), rx->total, 1, 0);
    torxm_rx_finish(ctx, rx);
}
