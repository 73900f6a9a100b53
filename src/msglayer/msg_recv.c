/* Reception shared by the protocols: matching (the handler upcall), receive
 * records, truncation, and the one-packet protocol. */
#include "msg_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void torxm_fail(torx_ctx_t *ctx, torx_status_t st, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    torxp_log(ctx->dev, 0, "%s", msg);
    if (ctx->failed == TORX_OK) {
        ctx->failed = st;
        snprintf(ctx->failed_why, sizeof ctx->failed_why, "%s", msg);
        torxp_error(st, "torx: rank %d: %s", ctx->rank, msg);
    }
}

void torxm_bad_packet(torx_ctx_t *ctx, int src, const char *what)
{
    ctx->malformed++;
    torxp_error(TORX_ERR_PROTO, "torx: protocol error: %s from rank %d; packet dropped", what, src);
    torxp_log(ctx->dev, 0, "protocol error: %s from rank %d; packet dropped", what, src);
}

torx_status_t torxm_truncated(int src, uint64_t total, uint64_t cap)
{
    return torxp_error(TORX_ERR_TRUNCATE,
                       "torx: a message of %llu bytes from rank %d was truncated to the %llu "
                       "bytes of its receive buffer",
                       (unsigned long long)total, src, (unsigned long long)cap);
}

static void __attribute__((noinline, cold))
warn_unregistered(torx_ctx_t *ctx, int src, unsigned handler)
{
    if (handler < 64 && (ctx->warned_handlers & (1ull << handler)))
        return;
    if (handler < 64)
        ctx->warned_handlers |= 1ull << handler;
    torxp_log(ctx->dev, 0,
              "a message from rank %d names handler %u, which is not registered here "
              "(torx_register); discarding it (further ones for this id silently)",
              src, handler);
}

void torxm_match(torx_ctx_t *ctx, int src, unsigned handler, const void *hdr, size_t hdr_len,
                 size_t total, const void *data, unsigned proto, int deferrable, torx_recv_t *recv)
{
    deferrable = deferrable && !data;
    *recv = (torx_recv_t){.buf = NULL};
    torx_proto_stats_t *s = &ctx->stats[proto];
    s->received++;
    s->bytes_received += total;
    /* On a device that charges the task's core, the handler is msg.c's
     * charged_handler, which charges the match (TORXP_CPU_MATCH), once per
     * message, then calls the registered one. */
    if (TORXM_LIKELY(handler < TORX_MSG_HANDLERS && ctx->handlers[handler].fn)) {
        const torx_recv_info_t info = {.src = src,
                                       .hdr = hdr,
                                       .hdr_len = hdr_len,
                                       .data_len = total,
                                       .data = data,
                                       .protocol = (torx_protocol_t)proto,
                                       .deferrable = deferrable};
        ctx->handlers[handler].fn(ctx, ctx->handlers[handler].arg, &info, recv);
        /* Only data still at the sender can wait; the rest is on its way. */
        if (TORXM_UNLIKELY(recv->defer != NULL) && !deferrable) {
            *recv->defer = NULL;
            recv->defer = NULL;
        }
        return;
    }
    warn_unregistered(ctx, src, handler);
}

/* ---- Receive records --------------------------------------------------------------- */

void torxm_rx_init(torxm_rx_t *rx, int src, const torx_recv_t *recv, uint64_t total, unsigned proto)
{
    *rx = (torxm_rx_t){.buf = recv->buf,
                       .cap = recv->buf ? recv->len : 0,
                       .total = total,
                       .want = total,
                       .done = recv->done,
                       .arg = recv->arg,
                       .status = TORX_OK,
                       .src = src,
                       .proto = (uint8_t)proto};
}

torxm_rx_t *torxm_rx_new(torx_ctx_t *ctx, int src, const torx_recv_t *recv, uint64_t total,
                         unsigned proto)
{
    torxm_rx_t *rx = ctx->rx_free;
    if (rx) {
        ctx->rx_free = rx->next;
    } else if (!(rx = torxp_malloc(sizeof *rx))) {
        torxm_fail(ctx, TORX_ERR_NOMEM,
                   "out of memory for the receive record of a %s message of %llu bytes from "
                   "rank %d",
                   torx_protocol_name((torx_protocol_t)proto), (unsigned long long)total, src);
        return NULL;
    }
    torxm_rx_init(rx, src, recv, total, proto);
    rx->pooled = 1;
    return rx;
}

void torxm_rx_finish(torx_ctx_t *ctx, torxm_rx_t *rx)
{
    if (TORXM_UNLIKELY(rx->later)) {
        /* torx_accept may run this (want 0, a get done at once) and promises
         * that done never runs inside it. */
        rx->later = 0;
        rx->next = NULL;
        *ctx->rx_done_tail = rx;
        ctx->rx_done_tail = &rx->next;
        return;
    }
    torx_status_t st = rx->status;
    size_t n = 0;
    if (st == TORX_OK && rx->buf) {
        n = (size_t)(rx->total < rx->cap ? rx->total : rx->cap);
        if (rx->total > rx->cap)
            st = torxm_truncated(rx->src, rx->total, rx->cap);
    }
    const torx_recv_done_fn done = rx->done;
    void *arg = rx->arg;
    if (rx->pooled) {
        rx->next = ctx->rx_free;
        ctx->rx_free = rx;
    }
    if (done)
        done(ctx, arg, st, n);
}

int torxm_rx_done_run(torx_ctx_t *ctx)
{
    torxm_rx_t *rx = ctx->rx_done_head;
    ctx->rx_done_head = NULL;
    ctx->rx_done_tail = &ctx->rx_done_head;
    int n = 0;
    while (rx) {
        torxm_rx_t *next = rx->next; /* finish puts rx back on the free list */
        torxm_rx_finish(ctx, rx);
        rx = next;
        n++;
    }
    return n;
}

/* ---- One-packet ------------------------------------------------------------------- */

torx_status_t torxm_onepkt_push(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m)
{
    torx_pkt_hdr_t h;
    torx_pkt_hdr_init(&h, peer->coord, 0);
    torxm_sw_set(&h, TORXM_PKT_ONEPKT, (uint32_t)ctx->rank,
                 torxm_first_word(m->handler, m->hdr_len, 0));
    const struct iovec iov[2] = {{m->hdr, m->hdr_len}, {(void *)m->data, (size_t)m->len}};
    const torx_status_t rc = torxm_inject(ctx, &h, iov, 2, TORX_PROTO_ONEPKT);
    if (rc != TORX_OK)
        return rc;
    ctx->stats[TORX_PROTO_ONEPKT].sent++;
    ctx->stats[TORX_PROTO_ONEPKT].bytes_sent += m->len;
    torxm_count_dest(ctx, peer, m->len);
    torxm_complete(ctx, m);
    return TORX_OK;
}

/* A packet that is a whole message (hdr, data): the handler, then the
 * data. A one-packet message counts in its source's sequence (in_sequence);
 * a line packet does not (constant at each call: the branch folds away). */
static inline __attribute__((always_inline)) void
whole_packet_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt, int in_sequence)
{
    const uint32_t w = torxm_sw_word(pkt);
    const unsigned hl = (w >> 8) & 0xffu;
    const int src = peer->rank;
    if (TORXM_UNLIKELY(hl > pkt->payload_len)) {
        torxm_bad_packet(ctx, src,
                         in_sequence
                             ? "a one-packet message whose header is longer than its payload"
                             : "a line packet whose header is longer than its payload");
        return;
    }
    const uint8_t *p = torx_pkt_payload(pkt);
    const size_t dl = pkt->payload_len - hl;
    torx_recv_t recv;
    torxm_match(ctx, src, w & 0xffu, p, hl, dl, p + hl, TORX_PROTO_ONEPKT, 0, &recv);
    if (in_sequence)
        torxm_matched(ctx, peer);
    torxm_recv_now(ctx, src, &recv, p + hl, dl);
}

void torxm_onepkt_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt)
{
    whole_packet_rx(ctx, peer, pkt, 1);
}

/* A line packet: a one-packet message outside the sequence numbers. */
void torxm_line_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt)
{
    whole_packet_rx(ctx, peer, pkt, 0);
}
