/* The send funnel, the per-destination pending queues, control packets and
 * rendezvous cookies. */
#include "msg_internal.h"

#include <stdlib.h>

static int same_node(const torx_ctx_t *ctx, int dest)
{
    const torx_coord_t a = ctx->self, b = torx_map_coord(&ctx->map, dest);
    return a.x == b.x && a.y == b.y && a.z == b.z;
}

/* Whether n header and data bytes go one-packet by the limit (0: never,
 * even when n is 0). */
static inline int onepkt_fits(const torx_ctx_t *ctx, size_t n)
{
    return n <= ctx->limits.onepkt_limit && ctx->limits.onepkt_limit != 0;
}

torx_protocol_t torx_choose_protocol(const torx_ctx_t *ctx, int dest, size_t hdr_len, size_t len)
{
    if (onepkt_fits(ctx, hdr_len + len))
        return TORX_PROTO_ONEPKT;
    /* The vn protocol moves its data by a bulk copy or the staging area; a
     * device with neither (sim's bgl: no DMA engine) carries a node's own
     * messages through the torus, as BG/L did (docs/sim.md#how-a-job-runs). */
    if (ctx->mode == TORX_MODE_VN && dest >= 0 && dest < ctx->size && same_node(ctx, dest) &&
        !(ctx->dev->caps & TORXP_CAP_NO_BULK))
        return TORX_PROTO_VN;
    /* adaptive_limit 0 is off, also for the empty messages one-packet used
     * to take before onepkt_limit could be 0. */
    if (len <= ctx->limits.adaptive_limit && ctx->limits.adaptive_limit != 0)
        return TORX_PROTO_ADAPTIVE;
    if (len <= ctx->limits.eager_limit)
        return TORX_PROTO_EAGER;
    return TORX_PROTO_RZV;
}

/* The checks torx_send and torx_send_inject share; fn names the caller. */
static torx_status_t __attribute__((noinline, cold))
args_check(const char *fn, const torx_ctx_t *ctx, int dest, int handler, const void *hdr,
           size_t hdr_len, const void *data, size_t len)
{
    if (!ctx)
        return torxp_error(TORX_ERR_INVAL, "torx: %s: ctx is NULL", fn);
    if (dest < 0 || dest >= ctx->size)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: %s: destination rank %d is not in the job (0..%d)", fn, dest,
                           ctx->size - 1);
    if (handler < 0 || handler >= TORX_MSG_HANDLERS)
        return torxp_error(TORX_ERR_INVAL, "torx: %s: handler id %d is not in 0..%d", fn, handler,
                           TORX_MSG_HANDLERS - 1);
    if (hdr_len > TORX_MSG_MAX_HDR || (hdr_len && !hdr))
        return torxp_error(TORX_ERR_INVAL,
                           "torx: %s: header of %zu bytes at %p (at most %d bytes, non-NULL when "
                           "not empty)",
                           fn, hdr_len, hdr, TORX_MSG_MAX_HDR);
    if (len && !data)
        return torxp_error(TORX_ERR_INVAL, "torx: %s: %zu data bytes at NULL", fn, len);
    return TORX_OK;
}

static torx_status_t __attribute__((noinline, cold))
send_check(const torx_ctx_t *ctx, const torx_msg_t *msg, int dest, int handler, const void *hdr,
           size_t hdr_len, const void *data, size_t len, torx_protocol_t protocol)
{
    if (ctx && !msg)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_send: msg is NULL");
    const torx_status_t rc = args_check("torx_send", ctx, dest, handler, hdr, hdr_len, data, len);
    if (rc != TORX_OK)
        return rc;
    switch (protocol) {
    case TORX_PROTO_AUTO:
    case TORX_PROTO_RZV:
        return TORX_OK;
    case TORX_PROTO_ONEPKT:
        if (hdr_len + len > TORX_MSG_ONEPKT_MAX)
            return torxp_error(TORX_ERR_INVAL,
                               "torx: torx_send: one-packet protocol forced for %zu header and "
                               "%zu data bytes; at most %d fit one packet",
                               hdr_len, len, TORX_MSG_ONEPKT_MAX);
        return TORX_OK;
    case TORX_PROTO_EAGER:
    case TORX_PROTO_ADAPTIVE:
        if ((uint64_t)len > TORXM_STREAM_MAX)
            return torxp_error(TORX_ERR_INVAL,
                               "torx: torx_send: %s protocol forced for %zu bytes; its offsets "
                               "are 32-bit (below 4 GiB), use rendezvous",
                               torx_protocol_name(protocol), len);
        return TORX_OK;
    case TORX_PROTO_VN:
        if (ctx->mode != TORX_MODE_VN || !same_node(ctx, dest))
            return torxp_error(TORX_ERR_INVAL,
                               "torx: torx_send: virtual-node protocol forced to rank %d, which "
                               "is not on this task's node in vn mode (TORX_MODE=vn)",
                               dest);
        return TORX_OK;
    default:
        return torxp_error(TORX_ERR_INVAL, "torx: torx_send: unknown protocol %d", (int)protocol);
    }
}

/* Empty buffers may be NULL; the copies into the FIFO take valid pointers
 * even for zero bytes. */
static const uint8_t nothing[1];

/* The one-packet fast path of torx_send and torx_send_inject: when nothing
 * to peer is queued ahead and no token is awaited, the header and data go
 * straight from the caller's memory to the FIFO and count as a one-packet
 * message. TORX_AGAIN: order forbids it now; otherwise torx_pkt_inject's
 * status (TORX_NO_ROOM: the FIFO is full). */
static inline torx_status_t onepkt_now(torx_ctx_t *ctx, torxm_peer_t *peer, int handler,
                                       const void *hdr, size_t hdr_len, const void *data,
                                       size_t len)
{
    if (peer->head || peer->tokens_owed)
        return TORX_AGAIN;
    torx_pkt_hdr_t h;
    torx_pkt_hdr_init(&h, peer->coord, 0);
    torxm_sw_set(&h, TORXM_PKT_ONEPKT, (uint32_t)ctx->rank,
                 torxm_first_word((unsigned)handler, (unsigned)hdr_len, 0));
    const struct iovec iov[2] = {{(void *)hdr, hdr_len}, {(void *)data, len}};
    const torx_status_t rc = torx_pkt_inject(ctx->dev, &h, iov, 2);
    if (TORXM_LIKELY(rc == TORX_OK)) {
        torx_proto_stats_t *s = &ctx->stats[TORX_PROTO_ONEPKT];
        s->sent++;
        s->bytes_sent += len;
        s->packets_sent++;
        torxm_count_dest(ctx, peer, len);
        peer->tx_seq++;
    } else if (rc == TORX_NO_ROOM) {
        ctx->fifo_full = 1; /* the caller retries when a slot frees (torx_idle) */
    }
    return rc;
}

/* The staged fast path of torx_send_inject: a message that is one staged
 * piece, with nothing to peer queued ahead and no token awaited, is staged
 * and its packet injected now. If the packet finds the FIFO full the piece
 * is taken back, so nothing is left half sent. */
static torx_status_t staged_now(torx_ctx_t *ctx, torxm_peer_t *peer, unsigned proto, int handler,
                                const void *hdr, size_t hdr_len, const void *data, size_t len)
{
    if (peer->head || peer->tokens_owed)
        return TORX_AGAIN;
    torx_stage_ref_t ref;
    torx_status_t rc = torx_stage_put(ctx->dev, peer->coord, data, len, &ref);
    if (rc != TORX_OK)
        return rc == TORX_NO_ROOM ? TORX_AGAIN : rc;
    rc = torxm_staged_first(ctx, peer, proto, (unsigned)handler, hdr, hdr_len, len, ref);
    if (TORXM_UNLIKELY(rc != TORX_OK)) {
        torx_stage_unput(ctx->dev, peer->coord, ref);
        return rc == TORX_NO_ROOM ? TORX_AGAIN : rc;
    }
    peer->tx_seq++;
    return TORX_OK;
}

/* The eager fast path of torx_send_inject: a message of at most
 * TORX_PKT_BATCH_MAX packets, with nothing to peer queued ahead and no
 * token awaited, goes now as one batch of the packets torxm_eager_push
 * would send (the first with the total and the header, then data by
 * offset): all of them, or nothing (TORX_AGAIN) when the FIFO lacks room
 * or the device takes no batches. Without it such a message went through
 * torx_send, with a request and a queue entry: a 256-byte MPI round trip by
 * packets took 2905 instructions, 2205 this way (staged: 1938), and 1 KiB
 * ping-pongs 1.04-1.07x as long.
 * Below the staging boundary, or when the area does not reach the peer. */
static torx_status_t eager_now(torx_ctx_t *ctx, torxm_peer_t *peer, int handler, const void *hdr,
                               size_t hdr_len, const void *data, size_t len)
{
    const size_t first = (size_t)torxm_first_chunk(TORXM_EAGER_FIRST_PREFIX, hdr_len, len);
    const size_t npkts = 1 + (len - first + TORX_PKT_MAX_PAYLOAD - 1) / TORX_PKT_MAX_PAYLOAD;
    if (peer->head || peer->tokens_owed || npkts > TORX_PKT_BATCH_MAX)
        return TORX_AGAIN;
    torx_pkt_hdr_t h[TORX_PKT_BATCH_MAX];
    struct iovec iov[TORX_PKT_BATCH_MAX + 2];
    torx_pkt_out_t out[TORX_PKT_BATCH_MAX];
    const uint32_t total = (uint32_t)len;
    torx_pkt_hdr_init(&h[0], peer->coord, 0);
    torxm_sw_set(&h[0], TORXM_PKT_EAGER_FIRST, (uint32_t)ctx->rank,
                 torxm_first_word((unsigned)handler, (unsigned)hdr_len, 0));
    iov[0] = (struct iovec){(void *)&total, 4};
    iov[1] = (struct iovec){(void *)hdr, hdr_len};
    iov[2] = (struct iovec){(void *)data, first};
    out[0] = (torx_pkt_out_t){&h[0], iov, 3};
    size_t off = first;
    for (size_t k = 1; k < npkts; k++) {
        const size_t n = len - off < TORX_PKT_MAX_PAYLOAD ? len - off : TORX_PKT_MAX_PAYLOAD;
        h[k] = h[0];
        torxm_sw_set(&h[k], TORXM_PKT_EAGER_MORE, (uint32_t)ctx->rank, (uint32_t)off);
        iov[k + 2] = (struct iovec){(void *)((const uint8_t *)data + off), n};
        out[k] = (torx_pkt_out_t){&h[k], &iov[k + 2], 1};
        off += n;
    }
    const torx_status_t rc = torx_pkt_inject_batch(ctx->dev, out, (int)npkts);
    if (rc == TORX_NO_ROOM)
        ctx->fifo_full = 1; /* the caller retries when a slot frees (torx_idle) */
    if (rc != TORX_OK)
        return rc == TORX_NO_ROOM ? TORX_AGAIN : rc;
    torx_proto_stats_t *s = &ctx->stats[TORX_PROTO_EAGER];
    s->sent++;
    s->bytes_sent += len;
    s->packets_sent += npkts;
    torxm_count_dest(ctx, peer, len);
    peer->tx_seq++;
    return TORX_OK;
}

/* torx_send_inject of a message larger than one packet: staged now, eager
 * by a batch of packets now, or TORX_AGAIN. Out of line, so that the one-packet path saves no
 * registers for it. */
static torx_status_t __attribute__((noinline))
inject_larger(torx_ctx_t *ctx, int dest, int handler, const void *hdr, size_t hdr_len,
              const void *data, size_t len)
{
    /* staging off (stage_chunk 0: TORX_STAGE_BYTES=0, or a device without
     * staging areas, sim) leaves eager batches, which eager_now bounds */
    if (ctx->stage_chunk && len > ctx->stage_chunk)
        return TORX_AGAIN;
    const torx_protocol_t p = torx_choose_protocol(ctx, dest, hdr_len, len);
    torxm_peer_t *peer = torxm_peer(ctx, dest);
    if (TORXM_UNLIKELY(!peer))
        return TORX_ERR_NOMEM; /* torxm_peer_touch said why */
    /* Slow copies may send it by rendezvous: torx_send decides (and counts
     * the probe), so this asks without one and records nothing. */
    if (torxm_stages(ctx, peer, p, len)) {
        if (torxm_path_may_unstage(len)) {
            torxm_path_in_t in = torxm_path_inputs(ctx, peer, TORXM_ASK_UNSTAGE, len, 0);
            in.probe_due = 0;
            if (torxm_path_choose(&in).path != TORXM_PATH_STAGED)
                return TORX_AGAIN;
        }
        return staged_now(ctx, peer, p, handler, hdr ? hdr : nothing, hdr_len, data, len);
    }
    if (p == TORX_PROTO_EAGER)
        return eager_now(ctx, peer, handler, hdr ? hdr : nothing, hdr_len, data ? data : nothing,
                         len);
    return TORX_AGAIN;
}

torx_status_t torx_send_inject(torx_ctx_t *ctx, int dest, int handler, const void *hdr,
                               size_t hdr_len, const void *data, size_t len)
{
    if (TORXM_UNLIKELY(!ctx || (unsigned)dest >= (unsigned)ctx->size ||
                       (unsigned)handler >= TORX_MSG_HANDLERS || hdr_len > TORX_MSG_MAX_HDR ||
                       (hdr_len && !hdr) || (len && !data)))
        return args_check("torx_send_inject", ctx, dest, handler, hdr, hdr_len, data, len);
    if (!onepkt_fits(ctx, hdr_len + len))
        return inject_larger(ctx, dest, handler, hdr, hdr_len, data, len);
    torxm_peer_t *peer = torxm_peer(ctx, dest);
    if (TORXM_UNLIKELY(!peer))
        return TORX_ERR_NOMEM; /* torxm_peer_touch said why */
    const torx_status_t rc =
        onepkt_now(ctx, peer, handler, hdr ? hdr : nothing, hdr_len, data ? data : nothing, len);
    return rc == TORX_NO_ROOM ? TORX_AGAIN : rc;
}

/* ---- Line sends --------------------------------------------------------------- */

torx_status_t torx_line_init(torx_ctx_t *ctx, torx_line_t *line, int dim, int dir, int hops,
                             int handler, size_t hdr_len)
{
    if (!ctx || !line || dim < TORX_DIM_X || dim > TORX_DIM_Z || (dir != 1 && dir != -1) ||
        (unsigned)handler >= TORX_MSG_HANDLERS || hdr_len > TORX_MSG_MAX_HDR)
        return torxp_error(
            TORX_ERR_INVAL, "torx: torx_line_init: %s (dim %d, dir %d, handler %d, hdr_len %zu)",
            !ctx || !line ? "NULL argument" : "argument out of range", dim, dir, handler, hdr_len);
    const torx_shape_t s = torx_pkt_shape(ctx->dev);
    const unsigned ext = dim == TORX_DIM_X ? s.x : dim == TORX_DIM_Y ? s.y : s.z;
    if (hops < 1 || (unsigned)hops >= ext)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_line_init: %d hops along a dimension of %u nodes", hops,
                           ext);
    torx_coord_t end = ctx->self;
    uint8_t *c = dim == TORX_DIM_X ? &end.x : dim == TORX_DIM_Y ? &end.y : &end.z;
    *c = (uint8_t)(dir > 0 ? (*c + (unsigned)hops) % ext : (*c + ext - (unsigned)hops) % ext);
    if (torx_map_rank(&ctx->map, end) < 0)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_line_init: no task at the line's end (%u,%u,%u,%u)", end.x,
                           end.y, end.z, end.t);
    line->dev = ctx->dev;
    torx_pkt_hdr_init(&line->pkt, end, 0);
    torx_pkt_hdr_set_deposit(&line->pkt, dim, dir);
    torxm_sw_set(&line->pkt, TORXM_PKT_LINE, (uint32_t)ctx->rank,
                 torxm_first_word((unsigned)handler, (unsigned)hdr_len, 0));
    line->hdr_len = (uint8_t)hdr_len;
    return TORX_OK;
}

torx_status_t torx_line_send(const torx_line_t *line, const void *hdr, const void *data, size_t len)
{
    const struct iovec iov[2] = {{(void *)hdr, line->hdr_len}, {(void *)data, len}};
    const torx_status_t rc = torx_pkt_inject(line->dev, &line->pkt, iov, len ? 2 : 1);
    return rc == TORX_NO_ROOM ? TORX_AGAIN : rc;
}

torx_status_t torx_send(torx_ctx_t *ctx, torx_msg_t *msg, int dest, int handler, const void *hdr,
                        size_t hdr_len, const void *data, size_t len, torx_protocol_t protocol,
                        torx_send_done_fn done, void *arg)
{
    if (TORXM_UNLIKELY(!ctx || !msg || (unsigned)dest >= (unsigned)ctx->size ||
                       (unsigned)handler >= TORX_MSG_HANDLERS || hdr_len > TORX_MSG_MAX_HDR ||
                       (hdr_len && !hdr) || (len && !data) ||
                       (protocol == TORX_PROTO_ONEPKT && hdr_len + len > TORX_MSG_ONEPKT_MAX) ||
                       (protocol != TORX_PROTO_AUTO && protocol != TORX_PROTO_ONEPKT &&
                        protocol != TORX_PROTO_RZV))) {
        torx_status_t rc = send_check(ctx, msg, dest, handler, hdr, hdr_len, data, len, protocol);
        if (rc != TORX_OK)
            return rc;
    }
    if (!hdr)
        hdr = nothing;
    if (!data)
        data = nothing;
    torxm_peer_t *peer = torxm_peer(ctx, dest);
    if (TORXM_UNLIKELY(!peer))
        return TORX_ERR_NOMEM; /* torxm_peer_touch said why */
    torxm_msg_t *m = torxm_msg(msg);
    torx_protocol_t p =
        protocol == TORX_PROTO_AUTO ? torx_choose_protocol(ctx, dest, hdr_len, len) : protocol;
    if (protocol == TORX_PROTO_AUTO) {
        if (p == TORX_PROTO_RZV && !peer->head && torxm_idle_stages(ctx, peer, len))
            p = TORX_PROTO_EAGER;
        else if (p == TORX_PROTO_EAGER && torxm_stages(ctx, peer, p, len) &&
                 torxm_slow_unstages(ctx, peer, len))
            p = TORX_PROTO_RZV;
    }

    if (p == TORX_PROTO_ONEPKT) {
        const torx_status_t rc = onepkt_now(ctx, peer, handler, hdr, hdr_len, data, len);
        if (TORXM_LIKELY(rc == TORX_OK)) {
            m->magic = TORXM_MSG_MAGIC;
            m->status = TORX_OK;
            m->done = done;
            m->arg = arg;
            torxm_complete(ctx, m);
            return TORX_OK;
        }
        if (rc != TORX_NO_ROOM && rc != TORX_AGAIN)
            return rc;
    }

    m->magic = TORXM_MSG_MAGIC;
    m->status = TORX_OK;
    m->data = data;
    m->len = len;
    m->off = 0;
    m->want = 0;
    m->rcookie = 0;
    m->cookie = 0;
    m->done = done;
    m->arg = arg;
    m->dest = dest;
    m->proto = (uint8_t)p;
    m->state = TORXM_MSG_QUEUED;
    m->piece = 0;
    m->handler = (uint8_t)handler;
    m->hdr_len = (uint8_t)hdr_len;
    if (hdr_len)
        memcpy(m->hdr, hdr, hdr_len);
    torxm_enqueue(ctx, peer, m);
    if (peer->head == m)
        torxm_peer_push(ctx, peer);
    return TORX_OK;
}

torx_status_t torx_msg_status(const torx_msg_t *msg)
{
    const torxm_msg_t *m = (const torxm_msg_t *)(const void *)msg;
    return m->magic == TORXM_MSG_MAGIC ? m->status : TORX_ERR_INVAL;
}

int torx_msg_pending(const torx_msg_t *msg)
{
    const torxm_msg_t *m = (const torxm_msg_t *)(const void *)msg;
    return m->magic == TORXM_MSG_MAGIC && m->state != TORXM_MSG_IDLE;
}

/* ---- Pending queues --------------------------------------------------------------- */

void torxm_enqueue(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m)
{
    m->next = NULL;
    if (peer->head)
        *peer->tail = m;
    else
        peer->head = m;
    peer->tail = &m->next;
    if (!peer->busy) {
        peer->busy = 1;
        if (!ctx->busy)
            ctx->busy_tail = peer;
        peer->busy_next = ctx->busy;
        ctx->busy = peer;
    }
}

/* A push that did not succeed: the send completes with the error, and
 * since the peer may hold part of it (or wait for it), the context fails
 * too. */
static void push_failed(torx_ctx_t *ctx, torxm_msg_t *m, torx_status_t rc)
{
    m->status = rc;
    torxm_fail(ctx, rc, "%s send of %llu bytes to rank %d failed: %s",
               torxm_protocols[m->proto].name, (unsigned long long)m->len, m->dest,
               torx_last_error());
    if (m->cookie) {
        torxm_cookie_free(ctx, m->cookie);
        m->cookie = 0;
    }
    torxm_complete(ctx, m);
}

/* Whether queued message m can go ahead of a staged message that waits for
 * room: it needs neither the staging area nor the receiver's eager slot
 * (a one-packet message, or a scout whose data the receiver gets). */
static inline int passes_staged(const torx_ctx_t *ctx, const torxm_peer_t *peer,
                                const torxm_msg_t *m)
{
    if (m->state == TORXM_MSG_STREAM || m->state == TORXM_MSG_STAGE)
        return 0; /* rendezvous data, matched already: no scout to send */
    switch (m->proto) {
    case TORX_PROTO_ONEPKT:
        return 1;
    case TORX_PROTO_RZV:
        return !torxm_rzv_streams(ctx, m);
    case TORX_PROTO_VN:
        return !torxm_stages(ctx, peer, TORX_PROTO_VN, m->len);
    default:
        return 0;
    }
}

/* Whether m is a staged message whose first packet is out and whose next
 * piece found the staging area full (a vn message past its first packet is
 * always staged: its scout would have left the queue). */
static inline int waits_for_area(const torx_ctx_t *ctx, const torxm_peer_t *peer,
                                 const torxm_msg_t *m)
{
    if (m->state == TORXM_MSG_STAGE) /* rendezvous data through the area */
        return !m->piece;
    return m->state == TORXM_MSG_MORE && !m->piece &&
           (m->proto == TORX_PROTO_VN ||
            (m->proto == TORX_PROTO_EAGER && torxm_stages(ctx, peer, TORX_PROTO_EAGER, m->len)));
}

/* The head of peer's queue, staged, has its first packet out and waits for
 * room in the staging area: a long idle-pair message streams through the
 * ring as the receiver releases it. The messages right behind it that
 * passes_staged allows go first. The receiver matched the staged message
 * on its first packet, so matching order holds. Without this, a both-ways
 * window of 2-4 MiB messages stalled behind each side's staged first
 * message and the two directions took turns at half the bandwidth. */
static int pass_staged(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *staged)
{
    int passed = 0;
    torxm_msg_t **link = &staged->next;
    torxm_msg_t *m;
    while ((m = *link) && !peer->tokens_owed && passes_staged(ctx, peer, m)) {
        if (m->state == TORXM_MSG_QUEUED) {
            m->seq = peer->tx_seq++;
            m->state = TORXM_MSG_FIRST;
        }
        torxm_msg_t *next = m->next; /* push may put m on the completion list */
        const torx_status_t rc = m->proto == TORX_PROTO_ONEPKT ? torxm_onepkt_push(ctx, peer, m)
                                                               : torxm_scout_push(ctx, peer, m);
        if (rc == TORX_NO_ROOM)
            break;
        *link = next;
        if (!next)
            peer->tail = link;
        passed++;
        if (TORXM_UNLIKELY(rc < 0))
            push_failed(ctx, m, rc);
    }
    return passed;
}

static int peer_push_count(torx_ctx_t *ctx, torxm_peer_t *peer)
{
    int left = 0;
    torxm_msg_t *m;
    while ((m = peer->head)) {
        if (m->state == TORXM_MSG_QUEUED) {
            /* A new message waits until every adaptive message before it
             * was matched (see Ordering in msg_wire.h). */
            if (peer->tokens_owed)
                break;
            m->seq = peer->tx_seq++;
            m->state = TORXM_MSG_FIRST;
        }
        torxm_msg_t *next = m->next; /* push may put m on the completion list */
        const torx_status_t rc = torxm_protocols[m->proto].push(ctx, peer, m);
        if (rc == TORX_NO_ROOM) {
            if (m->next && waits_for_area(ctx, peer, m))
                left += pass_staged(ctx, peer, m);
            break;
        }
        peer->head = next;
        left++;
        if (TORXM_UNLIKELY(rc < 0))
            push_failed(ctx, m, rc);
    }
    return left;
}

void torxm_peer_push(torx_ctx_t *ctx, torxm_peer_t *peer)
{
    peer_push_count(ctx, peer);
}

/* Makes the busy peer after p the head of ctx's busy list, p its tail. */
static void rotate_busy(torx_ctx_t *ctx, torxm_peer_t *p)
{
    torxm_peer_t *next = p->busy_next;
    if (!next)
        return;
    ctx->busy_tail->busy_next = ctx->busy;
    ctx->busy = next;
    p->busy_next = NULL;
    ctx->busy_tail = p;
}

int torxm_push_all(torx_ctx_t *ctx)
{
    /* Where one injection FIFO serves every destination, a push that found
     * it full ends the round: each further peer's try would fail too, and
     * cost its core a poll of the FIFO. The next round starts with the
     * peer after it, so that the slots, as they free, go round the busy
     * peers a packet at a time instead of draining the first peer's queue
     * (the paced alltoall spreads its packets over the links so). */
    const int one_fifo = (ctx->dev->caps & TORXP_CAP_ONE_FIFO) != 0;
    const int was_full = ctx->fifo_full;
    ctx->fifo_full = 0;
    int n = 0;
    torxm_peer_t *prev = NULL; /* the busy peer before p */
    torxm_peer_t **pp = &ctx->busy;
    while (*pp) {
        torxm_peer_t *p = *pp;
        n += peer_push_count(ctx, p);
        if (one_fifo && ctx->fifo_full) {
            rotate_busy(ctx, p);
            break;
        }
        if (!p->head) {
            *pp = p->busy_next;
            p->busy = 0;
            if (!*pp)
                ctx->busy_tail = prev;
        } else {
            prev = p;
            pp = &p->busy_next;
        }
    }
    ctx->fifo_full |= was_full;
    return n;
}

/* ---- Control packets ----------------------------------------------------------------- */

static torx_status_t ctrl_inject(torx_ctx_t *ctx, int dest, unsigned type, uint32_t word,
                                 const void *payload, size_t len, unsigned proto)
{
    torx_pkt_hdr_t h;
    torx_pkt_hdr_init(&h, torx_map_coord(&ctx->map, dest), 0);
    torxm_sw_set(&h, type, (uint32_t)ctx->rank, word);
    const struct iovec iov = {(void *)payload, len};
    return torxm_inject(ctx, &h, &iov, len ? 1 : 0, proto);
}

void torxm_ctrl_send(torx_ctx_t *ctx, int dest, unsigned type, uint32_t word, const void *payload,
                     size_t len, unsigned proto)
{
    if (!ctx->ctrl_head) {
        const torx_status_t rc = ctrl_inject(ctx, dest, type, word, payload, len, proto);
        if (rc == TORX_OK)
            return;
        if (rc < 0) {
            /* The peer waits for it: the context cannot go on. */
            torxm_fail(ctx, rc, "a control packet to rank %d was lost: %s", dest,
                       torx_last_error());
            return;
        }
    }
    /* Full FIFO (or older control packets waiting): keep it, in order. */
    torxm_ctrl_t *c = ctx->ctrl_free;
    if (c)
        ctx->ctrl_free = c->next;
    else if (!(c = torxp_malloc(sizeof *c))) {
        torxm_fail(ctx, TORX_ERR_NOMEM,
                   "out of memory queuing a control packet to rank %d (that peer's transfer "
                   "cannot complete)",
                   dest);
        return;
    }
    assert(len <= sizeof c->payload);
    *c = (torxm_ctrl_t){.dest = dest,
                        .type = (uint8_t)type,
                        .proto = (uint8_t)proto,
                        .len = (uint8_t)len,
                        .word = word};
    if (len)
        memcpy(c->payload, payload, len);
    if (!ctx->ctrl_head)
        ctx->ctrl_head = c;
    else
        *ctx->ctrl_tail = c;
    ctx->ctrl_tail = &c->next;
}

int torxm_ctrl_drain(torx_ctx_t *ctx)
{
    int n = 0;
    torxm_ctrl_t *c;
    while ((c = ctx->ctrl_head)) {
        const torx_status_t rc =
            ctrl_inject(ctx, c->dest, c->type, c->word, c->payload, c->len, c->proto);
        if (rc == TORX_NO_ROOM)
            break;
        if (rc < 0)
            torxm_fail(ctx, rc, "a control packet to rank %d was lost: %s", c->dest,
                       torx_last_error());
        ctx->ctrl_head = c->next;
        c->next = ctx->ctrl_free;
        ctx->ctrl_free = c;
        n++;
    }
    return n;
}

/* ---- Cookies ------------------------------------------------------------------------ */

#define COOKIE_NONE UINT32_MAX

torx_status_t torxm_cookie_new(torx_ctx_t *ctx, void *p, int owned, uint64_t *cookie)
{
    if (ctx->cookie_free == COOKIE_NONE) {
        const uint32_t n = ctx->ncookies ? ctx->ncookies * 2 : 64;
        if (n <= ctx->ncookies || n >= COOKIE_NONE)
            return torxp_error(TORX_ERR_NOMEM, "torx: %u rendezvous transfers in flight",
                               ctx->ncookies);
        torxm_cookie_slot_t *t = torxp_realloc(ctx->cookies, (size_t)n * sizeof *t);
        if (!t)
            return torxp_error(TORX_ERR_NOMEM,
                               "torx: out of memory growing the rendezvous table to %u", n);
        for (uint32_t i = ctx->ncookies; i < n; i++)
            t[i] = (torxm_cookie_slot_t){.next_free = i + 1 < n ? i + 1 : COOKIE_NONE};
        ctx->cookie_free = ctx->ncookies;
        ctx->cookies = t;
        ctx->ncookies = n;
    }
    const uint32_t i = ctx->cookie_free;
    torxm_cookie_slot_t *e = &ctx->cookies[i];
    ctx->cookie_free = e->next_free;
    e->gen = e->gen + 1 ? e->gen + 1 : 1; /* never 0: cookie 0 means none */
    e->p = p;
    e->owned = owned;
    *cookie = (uint64_t)e->gen << 32 | i;
    return TORX_OK;
}

void *torxm_cookie_get(const torx_ctx_t *ctx, uint64_t cookie, int owned)
{
    const uint32_t i = (uint32_t)cookie, gen = (uint32_t)(cookie >> 32);
    if (i >= ctx->ncookies || ctx->cookies[i].gen != gen || ctx->cookies[i].owned != owned)
        return NULL;
    return ctx->cookies[i].p;
}

void torxm_cookie_free(torx_ctx_t *ctx, uint64_t cookie)
{
    const uint32_t i = (uint32_t)cookie;
    if (i >= ctx->ncookies || ctx->cookies[i].gen != (uint32_t)(cookie >> 32))
        return;
    ctx->cookies[i].p = NULL;
    ctx->cookies[i].next_free = ctx->cookie_free;
    ctx->cookie_free = i;
}
