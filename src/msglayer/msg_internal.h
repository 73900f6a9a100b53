/* Message-layer internals. Prefix: torxm_.
 *
 * Shape of the layer:
 *  - one send funnel (torx_send, msg_send.c) picks a protocol from the limits
 *    and either injects at once or appends to the destination's pending
 *    queue. A queue drains head first, one message at a time, so messages to
 *    one destination never interleave packet-wise; while it is non-empty new
 *    messages wait behind it (order kept under backpressure);
 *  - protocols are an enum (torx_protocol_t) bound in one table
 *    (torxm_protocols, msg.c) to their name, their push function (inject
 *    what the FIFOs take of one message) and the packet types they receive;
 *  - reception is peek -> ctx->rx[type] -> consume (torx_advance, msg.c);
 *  - torx_send_inject is torx_send's one-packet fast path on its own: it
 *    injects now or returns TORX_AGAIN, never queues (one shared inline,
 *    msg_send.c);
 *  - a rendezvous or vn handler may defer (torx_recv_t.defer): the scout's
 *    facts wait in a receive record on ctx->deferred, nothing moves, and
 *    torx_accept later runs the code a handler's answer runs
 *    (proto_rzv.c). The record does not count as in flight, so the
 *    receiver's finalize does not wait for it (it discards what was never
 *    accepted, so that the sender completes). Receives continued by
 *    torx_accept finish through ctx->rx_done, in the next advance, so that
 *    done never runs inside torx_accept.
 * *
 * The layer's headers, by concern: msg_wire.h (wire formats), msg_types.h
 * (messages, peers, the context), msg_policy.h (tuned defaults and
 * thresholds) and msg_path.h (the rendezvous data path's chooser).
 */
#ifndef TORXM_INTERNAL_H
#define TORXM_INTERNAL_H

#include <torx/msg.h>

#include "msg_path.h"
#include "msg_policy.h"
#include "msg_types.h"
#include "msg_wire.h"
#include "packet/pkt_internal.h"

#include <assert.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define TORXM_LIKELY TORXP_LIKELY
#define TORXM_UNLIKELY TORXP_UNLIKELY

/* Sizes the node when TORX_CORES_PER_NODE is unset (2 cores where the host
 * has them for every node, else 1), then binds the task to its core with
 * hwloc (msg_bind.c): in vn mode task t of a node takes the node's core t,
 * in heater and co mode the node's first core. A task already bound by its
 * launcher keeps that binding. More nodes than the host holds: no binding
 * (a warning when the user set the node size). A node larger than the
 * host: TORX_ERR_ENV naming TORX_CORES_PER_NODE. */
torx_status_t torxm_bind(torx_ctx_t *ctx);
/* Binds co mode's communication thread to the node's second core, when the
 * node has one of its own and torx bound the task. */
void torxm_bind_comm(torx_ctx_t *ctx, pthread_t thread);

/* Whether ctx's device waits exactly (TORXP_CAP_EXACT_WAIT, the sim
 * device): idle waits then sleep on the device at once, without spinning or
 * yielding first, and the host's CPU counts say nothing about the job. */
static inline int torxm_exact_wait(const torx_ctx_t *ctx)
{
    return (ctx->dev->caps & TORXP_CAP_EXACT_WAIT) != 0;
}

/* On a device with a charge op (sim): from now on the context charges the
 * task's core for its matches and copies (TORXP_CPU_MATCH before each
 * handler, TORXP_CPU_COPY after each packet that copied into a user
 * buffer), by wrapping its handler and receive tables (msg.c). torx_init
 * calls it; nothing on a device without the op. */
void torxm_charges_start(torx_ctx_t *ctx);

/* ---- Protocol table ------------------------------------------------------------ */

typedef struct torxm_proto {
    const char *name;
    /* Injects what the FIFOs take of m, the head of peer's queue. TORX_OK:
     * m leaves the queue (completed, or waiting for the receiver);
     * TORX_NO_ROOM: m stays at the head; an error: m leaves the queue and
     * completes (the error is logged). */
    torx_status_t (*push)(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m);
    struct {
        uint8_t type;
        torxm_rx_fn fn;
    } rx[5]; /* packet types this protocol receives; type 0 ends the list */
} torxm_proto_t;

extern const torxm_proto_t torxm_protocols[TORX_PROTO_COUNT];

/* ---- Peers ---------------------------------------------------------------------- */

/* Makes the page of rank's peer (every record in it set up as torx_init
 * used to: coordinate, staging reach, way_host) and returns rank's record;
 * NULL, with the error recorded (torx_last_error), when memory ran out. */
torxm_peer_t *torxm_peer_touch(torx_ctx_t *ctx, int rank) __attribute__((noinline, cold));

/* The record of peer rank (0 <= rank < ctx->size, not checked), made on
 * first contact: the hot paths pay one load and a branch that is taken once
 * per 64 ranks. NULL when its page could not be had (out of memory): the
 * caller fails the send, or on the receive path the context (torxm_fail). */
static inline torxm_peer_t *torxm_peer(torx_ctx_t *ctx, int rank)
{
    const unsigned r = (unsigned)rank; /* no sign extension on the way */
    torxm_peer_t *page = ctx->peer_pages[r >> TORXM_PEER_PAGE_SHIFT];
    if (TORXM_LIKELY(page != NULL))
        return &page[r & (TORXM_PEER_PAGE - 1)];
    return torxm_peer_touch(ctx, rank);
}

/* The record of a peer this task has already exchanged with (a packet came
 * from it, or a message went to it): its page exists. */
static inline torxm_peer_t *torxm_peer_known(const torx_ctx_t *ctx, int rank)
{
    const unsigned r = (unsigned)rank;
    return &ctx->peer_pages[r >> TORXM_PEER_PAGE_SHIFT][r & (TORXM_PEER_PAGE - 1)];
}

/* Pages of the peer table, and the records in page k (the last page may
 * be short). Loops over every peer walk the pages that exist. */
static inline int torxm_peer_npages(const torx_ctx_t *ctx)
{
    return (ctx->size + TORXM_PEER_PAGE - 1) >> TORXM_PEER_PAGE_SHIFT;
}
static inline int torxm_peer_page_len(const torx_ctx_t *ctx, int k)
{
    const int left = ctx->size - (k << TORXM_PEER_PAGE_SHIFT);
    return left < TORXM_PEER_PAGE ? left : TORXM_PEER_PAGE;
}

/* Counts len data bytes of a message to peer, once per message, where its
 * protocol counts it as sent. One increment when TORX_STATS is on; off, a
 * branch that is never taken. */
static inline void torxm_count_dest(torx_ctx_t *ctx, const torxm_peer_t *peer, uint64_t len)
{
    if (TORXM_UNLIKELY(ctx->bytes_to != NULL))
        ctx->bytes_to[peer->rank] += len;
}

/* Push and receive functions (proto_*.c). */
torx_status_t torxm_onepkt_push(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m);
void torxm_onepkt_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt);
void torxm_line_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt);
torx_status_t torxm_eager_push(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m);
void torxm_eager_first_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt);
void torxm_eager_more_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt);
torx_status_t torxm_adapt_push(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m);
void torxm_adapt_first_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt);
void torxm_adapt_more_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt);
void torxm_adapt_token_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt);
torx_status_t torxm_rzv_push(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m);
/* The scout of a rendezvous (bulk get) or vn message, never staged: for a
 * message that goes ahead of a staged one waiting for room (msg_send.c). */
torx_status_t torxm_scout_push(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m);
torx_status_t torxm_vn_push(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m);
void torxm_scout_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt);
void torxm_cts_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt);
void torxm_rzv_data_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt);
void torxm_ack_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt);
/* Staged eager and vn messages (proto_stage.c): whether a message of proto
 * and len data bytes to peer goes staged (eager from stage_min; vn from stage_min up
 * to the eager limit, above which a cross-memory copy beats a second copy),
 * the push (proto: TORX_PROTO_EAGER or TORX_PROTO_VN) and the receivers. */
static inline int torxm_stages(const torx_ctx_t *ctx, const torxm_peer_t *peer, unsigned proto,
                               uint64_t len)
{
    if (!peer->staged || len < ctx->limits.stage_min)
        return 0;
    return proto == TORX_PROTO_EAGER || (proto == TORX_PROTO_VN && len <= ctx->limits.eager_limit);
}
/* Whether a staged eager or vn message of len bytes takes the rendezvous
 * (vn: the bulk get) instead, for slow copies (TORXM_ASK_UNSTAGE). */
static inline int torxm_slow_unstages(torx_ctx_t *ctx, torxm_peer_t *peer, uint64_t len)
{
    return torxm_path_may_unstage(len) &&
           torxm_path_decide(ctx, peer, TORXM_ASK_UNSTAGE, len).path != TORXM_PATH_STAGED;
}
/* Whether a message of len bytes, which would go by rendezvous or vn bulk
 * get, goes staged instead because the pair is idle (torx_limits_t); the
 * caller has checked that nothing to peer is queued ahead of it. Only when
 * peer has sent something since the last such message: a reply makes the
 * exchange a ping-pong, where one message at a time is what latency is;
 * a stream of long messages with nothing back keeps its single copy (one
 * way, the receiver releasing fast, the pair is idle between messages,
 * and staged and rendezvous messages then alternated at 0.8x the
 * rendezvous's bandwidth). Not while copies into the area toward peer run
 * slow (TORXM_ASK_IDLE: the two cores are far apart, and a staged message
 * pays that twice where the rendezvous copies once), except one message in
 * TORXM_STAGE_PROBE, which measures again. */
static inline int torxm_idle_stages(torx_ctx_t *ctx, torxm_peer_t *peer, uint64_t len)
{
    if (len > ctx->limits.idle_limit || !peer->staged || len < ctx->limits.stage_min ||
        peer->tokens_owed)
        return 0;
    const int replied = peer->rx_seq != peer->rx_seq_at_long;
    peer->rx_seq_at_long = peer->rx_seq;
    if (!replied || len > torx_stage_idle_max(ctx->dev, peer->coord) ||
        !torx_stage_idle(ctx->dev, peer->coord))
        return 0;
    return torxm_path_decide(ctx, peer, TORXM_ASK_IDLE, len).path == TORXM_PATH_STAGED;
}
torx_status_t torxm_staged_push(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m,
                                unsigned proto);
/* Stages m's bytes from m->off up to end and injects a piece packet of type
 * for each (its payload: the 8-byte *rcookie, when not NULL, then the
 * piece's ref), counted under proto. TORX_NO_ROOM: the area or the FIFO is
 * full, call again (a staged piece whose packet is not out stays in
 * m->piece); TORX_OK: all are out. */
torx_status_t torxm_stage_pieces(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m, uint64_t end,
                                 unsigned type, const uint64_t *rcookie, unsigned proto);
void torxm_rzv_piece_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt);
/* A rendezvous transfer after a clear-to-send (packets or staged pieces)
 * whose bytes all arrived: its cookie goes and the receive finishes. */
void torxm_rzv_stream_done(torx_ctx_t *ctx, torxm_rx_t *rx);
/* Injects the first packet of a staged message whose first piece is ref
 * (and counts the message as sent under proto). */
torx_status_t torxm_staged_first(torx_ctx_t *ctx, torxm_peer_t *peer, unsigned proto,
                                 unsigned handler, const void *hdr, size_t hdr_len, uint64_t len,
                                 torx_stage_ref_t ref);
void torxm_staged_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt);
void torxm_piece_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt);
/* Tests the running bulk gets; returns how many finished. */
int torxm_bulk_progress(torx_ctx_t *ctx);
/* A rendezvous or vn get of rx finished with st: acks the sender, finishes rx. */
void torxm_bulk_done(torx_ctx_t *ctx, torxm_rx_t *rx, torx_status_t st);

/* ---- Coprocessor mode (msg_co.c) ------------------------------------------------- */

/* Starts the communication thread (after the device is open) and binds it
 * to the node's second core. */
torx_status_t torxm_co_start(torx_ctx_t *ctx);
/* Stops and joins the thread and frees the scratchpad; safe when not started. */
void torxm_co_stop(torx_ctx_t *ctx);
/* Hands the get of rx (rx->raddr at rx->src, rx->want bytes into rx->buf)
 * to the communication thread. */
void torxm_co_get(torx_ctx_t *ctx, torxm_rx_t *rx);
/* The task's side of torx_advance in co mode: finished gets, gets to hand
 * over, staged packets dispatched. Returns the events handled. */
int torxm_co_advance(torx_ctx_t *ctx);
/* One idle round of a wait in co mode (spin, yield, then sleep until the
 * thread has something for the task). */
void torxm_co_idle(torx_ctx_t *ctx, unsigned idle, double deadline);
/* torx_idle in co mode on a device with exact waits. */
void torxm_co_wait_news(torx_ctx_t *ctx);
torx_status_t torxm_co_costart(torx_ctx_t *ctx, torx_cowork_fn fn, void *arg, int *handle);
torx_status_t torxm_co_cojoin(torx_ctx_t *ctx, int handle);
void torxm_co_poll_set(torx_ctx_t *ctx, torx_copoll_fn fn, void *arg);
void torxm_co_kick(torx_ctx_t *ctx);
/* Gets the thread has finished (for tests: proof it worked while the task
 * did not advance). */
uint64_t torxm_co_gets_done(const torx_ctx_t *ctx);

/* Dispatches one received packet by type (msg.c). */
void torxm_dispatch(torx_ctx_t *ctx, const torx_pkt_hdr_t *pkt);

/* ---- Shared helpers (msg_send.c, msg_recv.c) ------------------------------------ */

/* Queues m's completion: its done runs at the next advance. */
static inline void torxm_complete(torx_ctx_t *ctx, torxm_msg_t *m)
{
    if (!m->done) {
        m->state = TORXM_MSG_IDLE;
        return;
    }
    m->state = TORXM_MSG_DONE_PENDING;
    m->next = NULL;
    *ctx->done_tail = m;
    ctx->done_tail = &m->next;
}

/* Injects one packet to peer and counts it under proto. */
static inline torx_status_t torxm_inject(torx_ctx_t *ctx, const torx_pkt_hdr_t *h,
                                         const struct iovec *iov, int iovcnt, unsigned proto)
{
    torx_status_t rc = torx_pkt_inject(ctx->dev, h, iov, iovcnt);
    if (TORXM_LIKELY(rc == TORX_OK))
        ctx->stats[proto].packets_sent++;
    else if (rc == TORX_NO_ROOM)
        ctx->fifo_full = 1;
    return rc;
}

/* Whether the last push or control packet found the FIFO full since the
 * last look, forgetting it: the wait that follows is for room, not for a
 * packet (a token, a clear-to-send). On a device with exact waits (sim)
 * room comes back as the task's own injection FIFO drains: a heater task
 * polls for it (torxp_yield, an empty poll of the modelled core), as Blue
 * Gene/L's cores polled the FIFO's status, and takes its arriving packets
 * between polls; a co task, whose thread takes them, sleeps until a slot
 * frees (torxp_room_wait). A nap of the host's length, tens of
 * microseconds, would leave the link idle for dozens of packets' time. */
static inline int torxm_fifo_was_full(torx_ctx_t *ctx)
{
    const int full = ctx->fifo_full;
    ctx->fifo_full = 0;
    return full;
}

/* Appends m to peer's queue (and peer to the busy list). */
void torxm_enqueue(torx_ctx_t *ctx, torxm_peer_t *peer, torxm_msg_t *m);
/* Drains peer's queue as far as the FIFOs and tokens allow. */
void torxm_peer_push(torx_ctx_t *ctx, torxm_peer_t *peer);
/* Drains every busy peer; returns the number of messages that left queues. */
int torxm_push_all(torx_ctx_t *ctx);

/* Sends a control packet now, or queues it when the FIFO is full. */
void torxm_ctrl_send(torx_ctx_t *ctx, int dest, unsigned type, uint32_t word, const void *payload,
                     size_t len, unsigned proto);
int torxm_ctrl_drain(torx_ctx_t *ctx);

/* The context cannot go on: memory for a message that is already arriving,
 * or a packet a peer waits for, could not be had. Records the first such
 * error (torx_last_error says it) and logs it; from then on torx_advance
 * returns it, so the caller ends the job with a clear message instead of
 * waiting for a message or a peer that will never complete. */
void __attribute__((cold, format(printf, 3, 4)))
torxm_fail(torx_ctx_t *ctx, torx_status_t st, const char *fmt, ...);

/* Reports a packet no torx task would send (a length or offset that does
 * not fit, a reply nobody waits for): counted in ctx->malformed, recorded
 * for torx_last_error as TORX_ERR_PROTO, logged. The caller drops it. */
void __attribute__((cold)) torxm_bad_packet(torx_ctx_t *ctx, int src, const char *what);
torx_status_t torxm_cookie_new(torx_ctx_t *ctx, void *p, int owned, uint64_t *cookie);
/* What cookie names, if it is live and of the kind asked for: owned 1 for
 * our receive records, 0 for our sends. The kind is checked because both
 * share the table and a cookie comes off the wire: a receive cookie in a
 * sender's reply must not be taken for a send, nor the other way round. */
void *torxm_cookie_get(const torx_ctx_t *ctx, uint64_t cookie, int owned);
void torxm_cookie_free(torx_ctx_t *ctx, uint64_t cookie);

/* Runs the handler of a newly matched message (or discards it when the id is
 * unregistered) and counts it; recv comes back filled. A handler's defer is
 * honoured only when deferrable (rendezvous and vn data still at the sender,
 * data NULL): otherwise NULL is stored through it and recv->defer comes back
 * NULL. */
void torxm_match(torx_ctx_t *ctx, int src, unsigned handler, const void *hdr, size_t hdr_len,
                 size_t total, const void *data, unsigned proto, int deferrable, torx_recv_t *recv);
/* Processes the parked adaptive first packet whose turn has come, if any. */
void torxm_release_due(torx_ctx_t *ctx, torxm_peer_t *peer);

/* After a message from peer was matched: counts it and lets a parked
 * adaptive message whose turn has come go next. */
static inline void torxm_matched(torx_ctx_t *ctx, torxm_peer_t *peer)
{
    peer->rx_seq++;
    if (TORXM_UNLIKELY(peer->early != NULL))
        torxm_release_due(ctx, peer);
}

/* A receive record for a matched message (want = total). NULL when memory
 * ran out: the context has then failed (torxm_fail), since the message's
 * packets keep coming and could be neither placed nor told apart from the
 * next message's; the caller reports the receive as failed. */
torxm_rx_t *torxm_rx_new(torx_ctx_t *ctx, int src, const torx_recv_t *recv, uint64_t total,
                         unsigned proto);
void torxm_rx_init(torxm_rx_t *rx, int src, const torx_recv_t *recv, uint64_t total,
                   unsigned proto);
/* Writes n bytes that belong at off of the message (the part below cap),
 * counted in ctx->copied (the copy's charge, msg.c's charged_rx). */
static inline void torxm_rx_put(torx_ctx_t *ctx, torxm_rx_t *rx, uint64_t off, const void *src,
                                uint64_t n)
{
    if (rx->buf && off < rx->cap) {
        const uint64_t k = n < rx->cap - off ? n : rx->cap - off;
        memcpy(rx->buf + off, src, k);
        ctx->copied += k;
    }
    rx->arrived += n;
}
/* Runs rx's done with the right status and frees it; a receive continued by
 * torx_accept (rx->later) goes to ctx->rx_done instead, for the next advance. */
void torxm_rx_finish(torx_ctx_t *ctx, torxm_rx_t *rx);
/* Runs the done of the receives on ctx->rx_done; returns how many. */
int torxm_rx_done_run(torx_ctx_t *ctx);
/* torx_finalize: discards the deferred messages never accepted, so that their
 * senders complete; returns how many. */
int torxm_deferred_discard(torx_ctx_t *ctx);

/* Records why a message was truncated and returns TORX_ERR_TRUNCATE. */
torx_status_t torxm_truncated(int src, uint64_t total, uint64_t cap);

/* Finishes a receive whose data was all in its first packet (the copy
 * counted in ctx->copied, as in torxm_rx_put). */
static inline void torxm_recv_now(torx_ctx_t *ctx, int src, const torx_recv_t *recv,
                                  const void *data, size_t total)
{
    torx_status_t st = TORX_OK;
    size_t n = 0;
    if (recv->buf) {
        n = total;
        if (TORXM_UNLIKELY(total > recv->len)) {
            n = recv->len;
            st = torxm_truncated(src, total, recv->len);
        }
        if (n) {
            memcpy(recv->buf, data, n);
            ctx->copied += n;
        }
    }
    if (recv->done)
        recv->done(ctx, recv->arg, st, n);
}

#endif /* TORXM_INTERNAL_H */
