/* torx message layer: active messages over the packet layer, in the spirit
 * of the Blue Gene/L message layer, LAPI and GASNet. Usable without MPI.
 *
 * Model
 *  - One context per task (torx_init / torx_finalize).
 *  - A sender names a destination rank, a handler registered at the receiver,
 *    a small header (up to TORX_MSG_MAX_HDR bytes, copied at send time) and a
 *    data buffer. The message object (torx_msg_t) belongs to the caller and
 *    may live inside the caller's own request: sending allocates nothing.
 *  - At the receiver, the handler runs once per message, as soon as the
 *    message's first packet is in (before its data, for multi-packet
 *    protocols). It sees the source, the header and the data length, and
 *    says where the data goes and what to call when it is all there. That is
 *    where an MPI layer matches.
 *  - Every call is nonblocking; completion is reported through callbacks,
 *    which run only inside torx_advance() / torx_wait() of the same task.
 *    Handlers and callbacks may call torx_send(), but not torx_advance(),
 *    torx_wait() or torx_finalize() (a nested advance returns 0 at once).
 *
 * Ordering: messages from one sender reach their handlers in the order they
 * were sent, under every protocol mix, including adaptive packets reordered
 * by TORX_CHAOS. Completion callbacks carry no ordering promise.
 *
 * Protocols (chosen per message by size from torx_limits_t, or forced):
 *   one-packet     header and data fit one torus packet
 *                  (hdr_len + len <= onepkt_limit, at most TORX_MSG_ONEPKT_MAX)
 *   eager          deterministic packets, receiver unpacks by offset
 *   adaptive eager adaptive packets; the receiver returns a token once the
 *                  message is matched and the sender waits for it before its
 *                  next message to that peer
 *   rendezvous     an ordered scout; the data moves after the receiver's
 *                  handler has chosen the buffer: by bulk get (zero-copy),
 *                  or after a clear-to-send through the staging area or as
 *                  adaptive packets (rzv_data)
 *   virtual node   between the tasks of one node (vn mode): the sender passes
 *                  its buffer's address, the receiver copies once and acks
 * Packet-streamed protocols (eager, adaptive eager, rendezvous data staged
 * or as packets) carry 32-bit offsets: they take messages below 4 GiB.
 * Larger rendezvous messages always use the bulk get.
 *
 * Environment (read by torx_init):
 *   TORX_MODE              heater (default) | co | vn
 *   TORX_CORES_PER_NODE    cores per node, the tasks per node of vn mode (2)
 *   TORX_TORUS, TORX_MAPPING   see <torx/map.h>
 *   TORX_ONEPKT_LIMIT, TORX_EAGER_LIMIT, TORX_ADAPTIVE_LIMIT, TORX_RZV_DATA,
 *   TORX_STAGE_MIN, TORX_STAGE_CHUNK
 *                          see torx_limits_t
 *   TORX_STATS=1           print per-protocol counters at finalize, one line
 *                          per protocol per task, to stderr; then this task's
 *                          traffic line (data bytes sent, hop-bytes under the
 *                          map in force, hops per byte) and, on rank 0, the
 *                          job's (torx_stats_bytes_to)
 *   TORX_STATS_FILE=PATH   record the bytes sent to each rank (also without
 *                          TORX_STATS) and append this task's row of the
 *                          job's traffic matrix to PATH at finalize (rank 0
 *                          empties PATH at torx_init); the format is
 *                          torx_traffic_read's (<torx/map.h>)
 *   plus the packet layer's (TORX_DEVICE, TORX_CHAOS, ...; <torx/packet.h>)
 */
#ifndef TORX_MSG_H
#define TORX_MSG_H

#include <stddef.h>
#include <stdint.h>
#include <torx/boot.h>
#include <torx/map.h>
#include <torx/packet.h>
#include <torx/status.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct torx_ctx torx_ctx_t;

typedef enum torx_mode {
    TORX_MODE_HEATER, /* one task per node, second core idle */
    TORX_MODE_CO,     /* one task per node plus a communication thread */
    TORX_MODE_VN      /* one task per core, sharing the node's network */
} torx_mode_t;

typedef enum torx_protocol {
    TORX_PROTO_AUTO = 0, /* by size, from torx_limits_t */
    TORX_PROTO_ONEPKT,
    TORX_PROTO_EAGER,
    TORX_PROTO_ADAPTIVE,
    TORX_PROTO_RZV,
    TORX_PROTO_VN,
    TORX_PROTO_COUNT
} torx_protocol_t;

/* Header plus data bytes that fit the one-packet protocol: the whole torus
 * payload (the message layer's framing lives in the packet header's
 * software bytes). */
#define TORX_MSG_ONEPKT_MAX 240

/* Size thresholds, one struct for the one send funnel. A message of n data
 * bytes and h header bytes goes
 *   one-packet       when h + n <= onepkt_limit, else
 *   virtual node     between two tasks of one node in vn mode, else
 *   adaptive eager   when n <= adaptive_limit, else
 *   eager            when n <= eager_limit, or n <= idle_limit and the
 *                    pair is idle (below), else
 *   rendezvous.
 * Eager messages of stage_min data bytes or more, and vn messages of
 * stage_min..eager_limit bytes, move their data through the device's
 * staging area (torx_stage_put, <torx/packet.h>) in pieces of stage_chunk
 * bytes, one descriptor packet each, instead of 240-byte packets (eager) or
 * a cross-memory copy and an ack (vn); the protocol, its ordering and its
 * counters stay the same.
 * An idle pair: nothing queued to dest, every piece staged toward it
 * released (torx_stage_idle), and a message from dest matched since the
 * last message weighed this way (a reply). A message of up to idle_limit
 * bytes that would go by rendezvous (or, in vn mode, by a vn bulk get)
 * goes staged then: one message at a time, both tasks copying at once
 * beats a single copy after a handshake; streams keep the rendezvous.
 * One-packet messages and scouts sent behind a staged message that waits
 * for room in the area go ahead of it (they need neither the area nor the
 * receiver's eager slot); matching order is unchanged, but such a message
 * may complete before the staged one.
 * Slow copies (torx_stage_cost above stage_cost_max: the two cores far
 * apart, every line crossing twice) undo both: no idle-pair staging, and
 * eager and vn messages of 8 KiB or more take the rendezvous (vn bulk
 * get), except one message in 64, which measures again.
 * torx_choose_protocol applies neither rule (they depend on traffic).
 * The limits are at most 2^32 - 1 (the packet-streamed protocols' offsets). */
/* How rendezvous data moves once the receiver has chosen the buffer
 * (TORX_RZV_DATA). Staged: the receiver sends a clear-to-send and the
 * sender streams the data through the device's staging area (the pieces of
 * a staged eager message, torx_stage_put), two copies with no system call
 * and no unexpected-message buffer, since the receive is matched already. */
typedef enum torx_rzv_data {
    TORX_RZV_DATA_AUTO = 0, /* neither in co mode nor oversubscribed:
                               from 64 KiB, the way the pair measures
                               faster as it runs, both directions alike
                               (its lower rank times epochs of each way,
                               per size class, and keeps exploring the
                               other; TORX_VERBOSE=2 prints the rates at
                               finalize). Shorter: staged where a bulk get
                               costs more than two copies (torx_bulk_cost
                               above 200 percent) and copies into the area
                               toward the peer are not slow
                               (torx_stage_cost at most 3/4 of
                               stage_cost_max, but one scout in 64); else
                               bulk. A task whose own offers are off for
                               slow copies declines the peer's too (but its
                               probes), so both directions move alike */
    TORX_RZV_DATA_BULK,     /* the receiver's bulk get (torx_bulk_get) */
    TORX_RZV_DATA_PACKETS,  /* adaptive packets */
    TORX_RZV_DATA_STAGED    /* through the staging area wherever it reaches */
} torx_rzv_data_t;

typedef struct torx_limits {
    size_t onepkt_limit;   /* TORX_ONEPKT_LIMIT, default and maximum
                              TORX_MSG_ONEPKT_MAX: one-packet when
                              h + n <= onepkt_limit (0 turns it off) */
    size_t eager_limit;    /* TORX_EAGER_LIMIT, default 32768 */
    size_t adaptive_limit; /* TORX_ADAPTIVE_LIMIT, default 0 (off) */
    int rzv_data;          /* TORX_RZV_DATA=auto (default) | bulk | packets |
                              staged: a torx_rzv_data_t */
    size_t stage_min;      /* TORX_STAGE_MIN: 0 (off) or the data bytes from
                              which eager and vn messages are staged */
    size_t stage_chunk;    /* TORX_STAGE_CHUNK: bytes per staged piece (at
                              most the device's torx_stage_max) */
    size_t idle_limit;     /* TORX_EAGER_IDLE_LIMIT: staged up to this many
                              data bytes when the pair is idle (default
                              4194304; 0 in co mode, whose thread moves
                              rendezvous data; 0 or <= eager_limit: off).
                              A message longer than the area streams
                              through it as the receiver releases pieces */
    /* TORX_STAGE_COST_MAX: copies into the area toward dest costing more
     * than this, ns per KiB (torx_stage_cost), are slow (above; default
     * 150, 65535: never, 0: any measured) */
    unsigned stage_cost_max;
} torx_limits_t;

typedef struct torx_init_attr {
    torx_boot_t *boot;           /* NULL: PMI from hydra, or a singleton */
    int mode;                    /* torx_mode_t, or -1 for TORX_MODE */
    const char *mapping;         /* order string or file; NULL: TORX_MAPPING */
    const torx_limits_t *limits; /* NULL: from TORX_* */
} torx_init_attr_t;

/* NAME     torx_init - start the message layer on this task
 * DESCRIPTION
 *   Collective. Reads the environment (see the top of this header), builds
 *   the rank map, binds the task to its core with hwloc (a launcher's
 *   binding stands), opens the packet device and, in co mode, starts the
 *   communication thread. attr NULL: all defaults; its fields override the
 *   environment. attr->boot NULL: PMI (hydra's mpiexec, or a singleton job),
 *   which torx_finalize ends; a caller's boot is only used here.
 * RETURN VALUE
 *   TORX_OK: *ctx is the context. Otherwise *ctx is NULL, nothing stays open
 *   and torx_last_error() says why: TORX_ERR_ENV for a bad TORX_* or PMI_*
 *   value, TORX_TORUS too small, TORX_CORES_PER_NODE above the host's
 *   cores; TORX_ERR_INVAL for ctx NULL, attr->mode > 2, a limit above
 *   2^32-1, a bad mapping ("path:line: reason"), over 2^24 tasks;
 *   TORX_ERR_PEER/_PROTO/_SYS/_NOMEM/_UNSUPPORTED from the bootstrap or
 *   torx_pkt_open (e.g. a task died during start-up).
 * NOTES
 *   Too few cores only warns (tasks, threads left unbound). One thread per ctx.
 * SEE ALSO torx_finalize, torx_register, torx_boot_fork_run, torx_pkt_open
 */
torx_status_t torx_init(const torx_init_attr_t *attr, torx_ctx_t **ctx);

/* NAME     torx_finalize - stop the message layer and free the context
 * DESCRIPTION
 *   Collective. Drains this task's queued sends and the rendezvous it takes
 *   part in (advancing, so the peers are served too), meets every task in a
 *   final barrier on the global interrupt, prints the TORX_STATS lines,
 *   stops the communication thread, closes the device, ends a bootstrap
 *   that torx_init started, and frees ctx. Messages that arrive but that the
 *   application never waited for may be dropped.
 * RETURN VALUE
 *   TORX_OK         done; ctx is freed.
 *   TORX_ERR_PEER   the drain or the barrier did not finish within 120 s (a
 *                   peer died or stopped advancing); ctx is freed anyway.
 *   TORX_ERR_INVAL  ctx NULL, or called from a handler or callback: nothing
 *                   happened and ctx stays valid.
 * SEE ALSO torx_init, torx_stats
 */
torx_status_t torx_finalize(torx_ctx_t *ctx);

/* NAME     torx_rank, torx_size, torx_mode, torx_tasks_per_node, torx_ctx_map,
 *          torx_ctx_device, torx_ctx_limits - what torx_init settled
 * DESCRIPTION
 *   torx_rank: this task's rank, 0..size-1. torx_size: the tasks of the job.
 *   torx_mode: heater, co or vn. torx_tasks_per_node: 1 in heater and co
 *   mode, TORX_CORES_PER_NODE in vn mode. torx_ctx_map: the rank map (each
 *   rank's torus coordinate, <torx/map.h>). torx_ctx_device: the packet
 *   device underneath, for the collectives (src/coll/); torus packets on it
 *   belong to torx_advance, which consumes every one. torx_ctx_limits: the
 *   protocol size limits in force.
 * RETURN VALUE
 *   As above; they cannot fail (ctx must be live: it is not checked).
 *   Returned pointers are valid until torx_finalize.
 * SEE ALSO torx_init, torx_map_coord, torx_choose_protocol
 */
int torx_rank(const torx_ctx_t *ctx);
int torx_size(const torx_ctx_t *ctx);
torx_mode_t torx_mode(const torx_ctx_t *ctx);
int torx_tasks_per_node(const torx_ctx_t *ctx);
const torx_map_t *torx_ctx_map(const torx_ctx_t *ctx);
torx_pkt_dev_t *torx_ctx_device(torx_ctx_t *ctx); /* for src/coll/ */
const torx_limits_t *torx_ctx_limits(const torx_ctx_t *ctx);

/* NAME     torx_choose_protocol - the protocol TORX_PROTO_AUTO picks
 * DESCRIPTION
 *   For a message of hdr_len header and len data bytes to rank dest, applies
 *   the rule of torx_limits_t with this context's limits and mode:
 *   one-packet, else virtual node (vn mode and dest on this task's node),
 *   else adaptive eager, eager or rendezvous by len.
 * RETURN VALUE
 *   A protocol other than TORX_PROTO_AUTO. It cannot fail; a dest outside
 *   the job only rules out virtual node.
 * SEE ALSO torx_send, torx_limits_t, torx_protocol_name
 */
torx_protocol_t torx_choose_protocol(const torx_ctx_t *ctx, int dest, size_t hdr_len, size_t len);

/* ---- Receiving ------------------------------------------------------------ */

#define TORX_MSG_MAX_HDR 64
#define TORX_MSG_HANDLERS 64 /* handler ids 0..63 */

typedef struct torx_recv_info {
    int src;         /* sending rank */
    const void *hdr; /* the sender's header; valid during the handler */
    size_t hdr_len;
    size_t data_len; /* bytes the sender sends */
    /* Non-NULL when all the data is already here (one-packet, and any
     * message whose data fits its first packet, including zero-length
     * ones): valid during the handler only; the handler may consume it
     * directly and set recv->buf = NULL. */
    const void *data;
    torx_protocol_t protocol;
    /* 1 when the data is still at the sender, so the handler may defer the
     * message (torx_recv_t.defer): rendezvous and vn messages moved by a
     * get. 0 when the data is on its way (in packets or staged). */
    int deferrable;
} torx_recv_info_t;

/* status: TORX_OK, TORX_ERR_TRUNCATE, or an error of the transfer (e.g.
 * TORX_ERR_PEER when a rendezvous bulk get failed; torx_last_error() says
 * why). received: bytes written to the buffer. */
typedef void (*torx_recv_done_fn)(torx_ctx_t *ctx, void *arg, torx_status_t status,
                                  size_t received);

/* What the handler fills in (it starts zeroed). buf == NULL discards the
 * data without error (done still runs, with received = 0). Otherwise, when
 * the sender sends more than len bytes (len may be 0), the first len arrive
 * and done gets TORX_ERR_TRUNCATE with received = len; nothing is written
 * past len. */
typedef struct torx_deferred torx_deferred_t;

typedef struct torx_recv {
    void *buf;
    size_t len;
    torx_recv_done_fn done; /* may be NULL */
    void *arg;
    /* Only when info->deferrable (rendezvous and virtual node data moved
     * by a get, still at the sender): a handler that cannot choose the
     * buffer yet (an MPI receive not posted) sets defer to where the message
     * layer stores a handle; buf, len, done and arg are then ignored, the
     * data stays at the sender, and torx_accept later says where it goes.
     * Ignored (NULL is stored) for the other protocols, whose data is
     * already on its way. */
    torx_deferred_t **defer;
} torx_recv_t;

typedef void (*torx_handler_fn)(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                                torx_recv_t *recv);

/* NAME     torx_register - install the handler for a handler id
 * DESCRIPTION
 *   Makes fn(ctx, harg, info, recv) the handler of id (0..TORX_MSG_HANDLERS
 *   - 1) at this task; fn NULL removes it, re-registering replaces it. The
 *   handler runs once per message, inside this task's torx_advance or
 *   torx_wait, as soon as the message's first packet is in: it reads info
 *   (valid during the call only) and fills recv, which starts zeroed.
 * RETURN VALUE
 *   TORX_OK; TORX_ERR_INVAL when ctx is NULL or id is out of range.
 * NOTES
 *   Register before the first advance that may see messages for id: packets
 *   wait in the network until then, so none is lost. A message for an
 *   unregistered id is discarded with a warning on stderr (once per id until
 *   it is registered again); its sender still completes. Handlers may call
 *   torx_send, not torx_advance, torx_wait or torx_finalize.
 * SEE ALSO torx_recv_t, torx_recv_info_t, torx_send
 */
torx_status_t torx_register(torx_ctx_t *ctx, int id, torx_handler_fn fn, void *harg);

/* NAME     torx_accept - choose the buffer of a deferred message
 * DESCRIPTION
 *   Continues the message whose handler deferred it (torx_recv_t.defer) as
 *   if the handler had filled recv: the data moves into recv->buf (up to
 *   recv->len bytes; more is truncation, as for a handler) and recv->done
 *   runs in a later advance, never inside torx_accept. recv->buf NULL
 *   discards the data (done still runs, received = 0). recv->defer is
 *   ignored. The handle is consumed. May be called from a handler or
 *   callback.
 * RETURN VALUE
 *   TORX_OK; TORX_ERR_INVAL when ctx, d or recv is NULL (d stays valid).
 * NOTES
 *   Every deferred message must be accepted or discarded before
 *   torx_finalize: its sender's send does not complete until then.
 * SEE ALSO torx_recv_t, torx_register
 */
torx_status_t torx_accept(torx_ctx_t *ctx, torx_deferred_t *d, const torx_recv_t *recv);

/* ---- Sending -------------------------------------------------------------- */

/* A caller-owned send; its contents are private. Must stay in place until
 * it is no longer pending (its done callback has run). */
typedef struct torx_msg {
    _Alignas(16) uint64_t priv[24];
} torx_msg_t;

typedef void (*torx_send_done_fn)(torx_ctx_t *ctx, torx_msg_t *msg, void *arg);

/* NAME     torx_send - send an active message
 * DESCRIPTION
 *   Sends hdr (hdr_len <= TORX_MSG_MAX_HDR bytes, copied now) and len data
 *   bytes in msg (caller's storage) to handler id handler at rank dest;
 *   TORX_PROTO_AUTO picks the protocol by size. done(ctx, msg, arg), or NULL,
 *   runs in a later advance, never inside torx_send, once data may be reused:
 *   when injected; for bulk-get rendezvous and vn, once the receiver took it.
 * RETURN VALUE
 *   TORX_OK once queued (never TORX_NO_ROOM: a full network queues it).
 *   TORX_ERR_INVAL: ctx or msg NULL, dest not in the job, handler or hdr_len
 *   out of range, hdr or data NULL with a length, or a forced protocol that
 *   is unknown or does not suit (one-packet: too big; virtual node: dest not
 *   on this node in vn mode; eager, adaptive: len >= 4 GiB). TORX_ERR_NOMEM:
 *   the first message to dest (or to a rank near it) and no memory for its
 *   peer record (made on first contact, for 64 ranks at a time).
 * NOTES
 *   msg and data stay untouched until done has run (done NULL: while
 *   torx_msg_pending); msg must not be pending when passed. Sends to one
 *   dest arrive in order. A later failure (out of memory) is logged to
 *   stderr and drops the message; done still runs.
 * SEE ALSO torx_register, torx_msg_pending, torx_wait, torx_choose_protocol
 */
torx_status_t torx_send(torx_ctx_t *ctx, torx_msg_t *msg, int dest, int handler, const void *hdr,
                        size_t hdr_len, const void *data, size_t len, torx_protocol_t protocol,
                        torx_send_done_fn done, void *arg);

/* NAME     torx_send_inject - send a small message now, or not at all
 * DESCRIPTION
 *   Sends hdr and len data bytes to handler id handler at rank dest
 *   immediately, when that keeps the order of sends to dest: the message
 *   fits one packet (hdr_len + len <= the one-packet limit) or one staged
 *   piece (an eager or vn message of stage_min..stage_chunk data bytes,
 *   see torx_limits_t), nothing to dest is queued or waiting for a token,
 *   and the network (and staging area) has room. Nothing is kept: no
 *   message object, no callback; data may be reused as soon as it returns
 *   TORX_OK.
 * RETURN VALUE
 *   TORX_OK         sent; counted as a one-packet message, or as an eager
 *                   (vn) message when staged.
 *   TORX_AGAIN      not sent, nothing changed: use torx_send.
 *   TORX_ERR_INVAL  as torx_send (ctx NULL, dest, handler, lengths).
 *   TORX_ERR_NOMEM  as torx_send: no memory for dest's peer record.
 * NOTES
 *   For latency-bound senders (an MPI send can then complete at once).
 * SEE ALSO torx_send
 */
torx_status_t torx_send_inject(torx_ctx_t *ctx, int dest, int handler, const void *hdr,
                               size_t hdr_len, const void *data, size_t len);

/* NAME     torx_msg_pending - whether a send still holds its torx_msg_t
 * DESCRIPTION
 *   Tells whether the message layer still owns msg: from torx_send until
 *   just before its done callback runs (done NULL: until done would have
 *   run). It does not advance.
 * RETURN VALUE
 *   Non-zero while pending; 0 once msg (and its data) may be reused.
 * NOTES
 *   A torx_msg_t that was never sent must be zeroed for a defined answer.
 * SEE ALSO torx_send, torx_advance
 */
int torx_msg_pending(const torx_msg_t *msg);

/* NAME     torx_msg_status - how a send ended
 * DESCRIPTION
 *   For a send whose done callback has run (or that torx_msg_pending says is
 *   no longer pending): whether it was sent.
 * RETURN VALUE
 *   TORX_OK; or the error that stopped it (a failed injection, no memory for
 *   its rendezvous cookie), which torx_last_error described when it
 *   happened: the send did not reach its destination, and the context has
 *   failed too (torx_advance returns the error). TORX_ERR_INVAL for a
 *   torx_msg_t that no torx_send started.
 * SEE ALSO torx_send, torx_advance
 */
torx_status_t torx_msg_status(const torx_msg_t *msg);

/* ---- Line broadcast (the deposit bit) -------------------------------------- */

/* A line send: one packet that the torus deposits at every node from this
 * task's node to the line's end, delivered at each (to the task with this
 * task's t) to a handler as a one-packet message. Collectives build their
 * broadcasts from these (src/coll/coll_torus.c). The header is prepared
 * once by torx_line_init; torx_line_send only injects. */
typedef struct torx_line {
    torx_pkt_dev_t *dev;
    torx_pkt_hdr_t pkt; /* the prepared packet header */
    uint8_t hdr_len;    /* the handler header's bytes, fixed per line */
} torx_line_t;

/* NAME     torx_line_init - prepare line sends
 * DESCRIPTION
 *   Prepares *line for packets deposited at the hops nodes (1..extent-1)
 *   next to this task's node along dimension dim (TORX_DIM_X/Y/Z) in
 *   direction dir (+1 or -1), with wraparound, each at the task with this
 *   task's t, for handler id handler with headers of hdr_len bytes. Every
 *   node of the line must have such a task, the last one at least (nodes
 *   without are skipped).
 * RETURN VALUE
 *   TORX_OK; TORX_ERR_INVAL for a NULL argument, dim, dir, handler or
 *   hdr_len out of range, hops outside 1..extent-1, or no task at the end.
 * SEE ALSO torx_line_send
 */
torx_status_t torx_line_init(torx_ctx_t *ctx, torx_line_t *line, int dim, int dir, int hops,
                             int handler, size_t hdr_len);

/* NAME     torx_line_send - send one line packet
 * DESCRIPTION
 *   Injects the line.hdr_len bytes at hdr and len data bytes (hdr_len + len
 *   <= TORX_MSG_ONEPKT_MAX) as one packet along line. Each node of the line
 *   runs the handler with info->data set, as for a one-packet message; line
 *   packets from one task arrive at each node in the order sent, and in
 *   order with that task's deterministic packets there, but they are not
 *   messages in the sense of torx_send's ordering (no sequence numbers,
 *   never queued), and they are not counted as sent (the receivers count
 *   them as one-packet messages received).
 * RETURN VALUE
 *   TORX_OK; TORX_AGAIN when the network has no room (nothing sent: advance
 *   and retry); TORX_ERR_INVAL for a payload too long.
 * NOTES
 *   It touches only the device and *line, so a torx_costart work unit may
 *   call it (the one torx_* call allowed there): the device takes injections
 *   from the communication thread in co mode.
 * SEE ALSO torx_line_init, torx_register
 */
torx_status_t torx_line_send(const torx_line_t *line, const void *hdr, const void *data,
                             size_t len);

/* ---- Progress ------------------------------------------------------------- */

/* NAME     torx_advance - make progress once, without blocking
 * DESCRIPTION
 *   Pushes queued sends and control packets, reads up to 64 packets from the
 *   network (co mode: takes what the communication thread staged and
 *   finished), runs the handlers of arriving messages and the completion
 *   callbacks that are due.
 * RETURN VALUE
 *   The number of events handled (packets, sends pushed, callbacks run); 0
 *   when idle, and always 0 when called from a handler or callback. A
 *   negative torx_status_t once the context has failed: memory for a
 *   message already arriving (or for the record of a peer whose first
 *   packet arrived), or a packet a peer waits for, could not be had
 *   (torx_last_error says which). Nothing more can be relied on then;
 *   end the task (an MPI job: abort it) with that message.
 * NOTES
 *   Handlers and callbacks run only here, in the calling thread, and in the
 *   calls that advance: torx_wait(_timeout), torx_finalize, and torx_costart
 *   and torx_cojoin while they wait.
 * SEE ALSO torx_wait, torx_register, torx_send
 */
int torx_advance(torx_ctx_t *ctx);

/* NAME     torx_idle - wait for news after an idle torx_advance
 * DESCRIPTION
 *   For a caller that loops on torx_advance until something only the
 *   message layer changes happens (its messages sent, received, matched;
 *   torx_send_inject's TORX_AGAIN retried), and has nothing else to do:
 *   called after torx_advance returned 0, it returns when another
 *   torx_advance may find something. On a device whose waits are exact
 *   (sim), in co mode, it sleeps until the communication thread publishes
 *   something or, if a send found the injection FIFO full, a slot frees:
 *   the simulated time at which polling would have found either, without
 *   the polls. Elsewhere it returns at once. A loop that also waits on its
 *   own packet-layer injections or a device round must poll instead.
 * SEE ALSO torx_advance
 */
void torx_idle(torx_ctx_t *ctx);

/* NAME     torx_advance_hook - run a function in every torx_advance
 * DESCRIPTION
 *   While set, fn(arg) runs at the end of every torx_advance of ctx (not
 *   in handlers or callbacks, which never advance), and counts its return
 *   value as events handled. A layer above the message layer that has
 *   work in flight but no packets of its own to wake it (torx_coll's
 *   nonblocking collectives on the collective network) sets it while it
 *   has such work, and progresses wherever the context does. While set,
 *   torx_wait naps instead of sleeping until a packet comes. fn NULL
 *   removes it; fn may remove itself. One hook per context.
 * RETURN VALUE
 *   TORX_OK; TORX_ERR_INVAL for a NULL ctx, or when another hook is set.
 */
torx_status_t torx_advance_hook(torx_ctx_t *ctx, int (*fn)(void *arg), void *arg);

/* NAME     torx_wait - advance until a flag is set
 * DESCRIPTION
 *   Calls torx_advance until *flag is non-zero (set by a handler or
 *   callback). Idle, it spins for a while, then yields the CPU, then sleeps
 *   until a packet comes (the packet layer's doorbell; in co mode, until the
 *   communication thread has something for the task), so an idle waiter does
 *   not burn a core; an oversubscribed job (more tasks, or in co mode
 *   threads, than CPUs) yields from the start, and on a device that
 *   simulates (sim) it sleeps at once. While its own sends wait for room at
 *   a busy peer, it naps instead (on a device that simulates, it polls for
 *   room in its injection FIFO, and sleeps when the sends wait for a
 *   packet).
 * RETURN VALUE
 *   TORX_OK once *flag is non-zero (at once if it already is);
 *   TORX_ERR_INVAL when ctx or flag is NULL.
 * NOTES
 *   No time limit (see torx_wait_timeout). Not from a handler or callback:
 *   there it cannot advance and never returns.
 * SEE ALSO torx_wait_timeout, torx_advance
 */
torx_status_t torx_wait(torx_ctx_t *ctx, volatile int *flag);

/* NAME     torx_wait_timeout - torx_wait with a time limit
 * DESCRIPTION
 *   As torx_wait, for about timeout_s seconds at most (negative: no limit).
 * RETURN VALUE
 *   TORX_OK once *flag is non-zero. TORX_AGAIN when it is still zero after
 *   timeout_s seconds; nothing is cancelled, a later advance may still set
 *   it. TORX_ERR_INVAL when ctx or flag is NULL.
 * SEE ALSO torx_wait, torx_advance
 */
torx_status_t torx_wait_timeout(torx_ctx_t *ctx, volatile int *flag, double timeout_s);

/* NAME     torx_wtime - the program's clock, in seconds
 * DESCRIPTION
 *   Seconds since an arbitrary origin, as a double, like MPI_Wtime: the
 *   clock of ctx's packet device, the one torx itself keeps its deadlines
 *   by (torx_wait_timeout, torx_finalize). On the shm and ofi devices the
 *   host's CLOCK_MONOTONIC, one clock for every task of a host; on the sim
 *   device simulated time, so that a program times what the simulated
 *   machine would take, not what the simulation took.
 * RETURN VALUE
 *   The time; it cannot fail (ctx must be live: it is not checked).
 * NOTES
 *   Differences are meaningful, the origin is not. Cheap (a vDSO call on
 *   the host), but not free: time batches of operations, not single ones.
 * SEE ALSO torx_pkt_wtime, torx_wait_timeout
 */
double torx_wtime(const torx_ctx_t *ctx);

/* ---- Coprocessor mode ----------------------------------------------------- */

/* In co mode a communication thread runs beside the task. It reads the
 * network and moves rendezvous and vn data into the buffers handlers chose,
 * while the task computes; handlers and callbacks still run only in the
 * task's torx_advance / torx_wait, so a program that is single-threaded
 * towards torx stays correct. A rendezvous receive whose handler has run
 * completes without the task advancing; its done runs at the next advance. */

typedef void (*torx_cowork_fn)(void *arg);

/* NAME     torx_costart - run a work unit on the communication thread
 * DESCRIPTION
 *   In co mode, starts fn(arg) as a transient work unit on the communication
 *   thread; units run one at a time, in the order started, between the
 *   thread's network work, concurrently with the task. fn must not call
 *   torx_* functions (torx_line_send excepted) and must synchronise with
 *   the task only through torx_cojoin (what fn wrote is visible after it). A full queue (256
 *   units) makes costart wait, advancing. In heater and vn modes there is no
 *   thread: fn runs at once, in the caller, and its handle is complete.
 * RETURN VALUE
 *   TORX_OK, with *handle (handle may be NULL) naming the unit for
 *   torx_cojoin; handles count up from 1.
 *   TORX_ERR_INVAL  ctx or fn is NULL.
 *   TORX_ERR_NOMEM  co mode: INT_MAX units started, the handles are used up.
 * SEE ALSO torx_cojoin, torx_mode
 */
torx_status_t torx_costart(torx_ctx_t *ctx, torx_cowork_fn fn, void *arg, int *handle);

/* NAME     torx_cojoin - wait for work units to finish
 * DESCRIPTION
 *   Waits until the unit handle and every unit started before it have
 *   finished, advancing (handlers and callbacks may run) and sleeping when
 *   idle. What the units wrote is visible afterwards. In heater and vn modes
 *   the units have already run: it returns at once.
 * RETURN VALUE
 *   TORX_OK; TORX_ERR_INVAL when ctx is NULL or handle was not returned by
 *   torx_costart on this ctx.
 * SEE ALSO torx_costart
 */
torx_status_t torx_cojoin(torx_ctx_t *ctx, int handle);

/* What a torx_copoll function found: nothing to do (the thread may sleep),
 * work that waits on other tasks (keep polling), or work it moved. */
typedef enum torx_copoll_result {
    TORX_COPOLL_IDLE = 0,
    TORX_COPOLL_WAITING = 1,
    TORX_COPOLL_MOVED = 2
} torx_copoll_result_t;

typedef torx_copoll_result_t (*torx_copoll_fn)(void *arg);

/* NAME     torx_copoll, torx_cokick - a poll on the communication thread
 * DESCRIPTION
 *   torx_copoll sets fn(arg) as a function the communication thread calls
 *   on every loop, between its network work, until it is replaced. It is
 *   for work that moves without the task: fn returns TORX_COPOLL_MOVED
 *   when it moved something (the task's waits wake), TORX_COPOLL_WAITING
 *   when its work waits on other tasks (the thread keeps polling instead of
 *   sleeping until a packet comes), TORX_COPOLL_IDLE when it has none. As
 *   for a work unit, fn may touch only the packet layer's collective
 *   network and global interrupt on channels the task is not using
 *   meanwhile, and memory it shares with the task through atomics (what it
 *   published before a release store is visible after the task's acquire
 *   load). fn NULL removes the poll; it returns once the thread no longer
 *   runs the old one. torx_cokick wakes the thread if it sleeps, after the
 *   task has handed fn new work.
 * RETURN VALUE
 *   TORX_OK. TORX_ERR_UNSUPPORTED: no communication thread owns the
 *   network (heater and vn modes; co mode with TORX_CO_THREAD=shared or
 *   without a core for the thread, where it runs only work units): the
 *   task drives such work itself. TORX_ERR_INVAL: ctx is NULL.
 *   torx_cokick: nothing.
 * SEE ALSO torx_costart, torx_mode
 */
torx_status_t torx_copoll(torx_ctx_t *ctx, torx_copoll_fn fn, void *arg);
void torx_cokick(torx_ctx_t *ctx);

/* ---- Counters ------------------------------------------------------------- */

/* Per protocol: messages, their data bytes, and every packet the protocol
 * moved (control packets such as tokens, acks and clear-to-sends count
 * under their protocol's packets). */
typedef struct torx_proto_stats {
    uint64_t sent, received; /* messages */
    uint64_t bytes_sent, bytes_received;
    uint64_t packets_sent, packets_received;
} torx_proto_stats_t;

/* NAME     torx_stats - per-protocol counters of this task
 * DESCRIPTION
 *   Copies this task's counters into out, indexed by torx_protocol_t (index
 *   TORX_PROTO_AUTO stays zero). A message counts as sent when its first
 *   packet (or scout) leaves, as received when that packet is matched
 *   (handler called, or discarded), both with the whole data length.
 *   TORX_STATS=1 prints the same at torx_finalize.
 * RETURN VALUE
 *   None; it cannot fail.
 * SEE ALSO torx_protocol_name, torx_finalize
 */
void torx_stats(const torx_ctx_t *ctx, torx_proto_stats_t out[TORX_PROTO_COUNT]);

/* How this task received the data of rendezvous and vn messages: by a
 * bulk get (torx_bulk_path names the device's way: cross-memory attach, a
 * copy through the FIFOs, RDMA, a DMA engine), or by what the rendezvous
 * data path takes instead (docs/message-layer.md#rendezvous-data-path):
 * the staging area, or packets. Transfers and their data bytes; a receive
 * that takes no data counts in none. */
typedef struct torx_data_stats {
    uint64_t bulk, bulk_bytes;
    uint64_t staged, staged_bytes;
    uint64_t packets, packets_bytes;
} torx_data_stats_t;

/* NAME     torx_stats_data - how this task's rendezvous and vn data came
 * DESCRIPTION
 *   Copies the counts into *out, counted when this task, as receiver,
 *   chose the data's path. TORX_STATS=1 prints them at torx_finalize.
 * RETURN VALUE
 *   None; it cannot fail.
 * SEE ALSO torx_stats, torx_bulk_path
 */
void torx_stats_data(const torx_ctx_t *ctx, torx_data_stats_t *out);

/* NAME     torx_protocol_name - the printable name of a protocol
 * DESCRIPTION
 *   The name of protocol p, as the TORX_STATS lines print it.
 * RETURN VALUE
 *   A static string: "auto", "one-packet", "eager", "adaptive",
 *   "rendezvous" or "vn"; "unknown" for a value outside torx_protocol_t.
 * SEE ALSO torx_stats, torx_choose_protocol
 */
const char *torx_protocol_name(torx_protocol_t p);

/* NAME     torx_stats_bytes_to - data bytes this task sent to each rank
 * DESCRIPTION
 *   With TORX_STATS=1 or TORX_STATS_FILE set, torx_init allocates one
 *   counter per rank of the job: element d is the data bytes of the
 *   messages this task sent to rank d, every protocol, each message counted
 *   once with its whole length when torx_stats counts it as sent. Line
 *   sends (torx_line_send, one packet deposited on many nodes) are not
 *   counted. torx_map_hop_bytes_row (<torx/map.h>) weighs the row by hops.
 * RETURN VALUE
 *   The torx_size(ctx) counters, valid until torx_finalize; NULL when
 *   neither variable is set.
 * SEE ALSO torx_stats, torx_map_hop_bytes_row, torx_traffic_read
 */
const uint64_t *torx_stats_bytes_to(const torx_ctx_t *ctx);

#ifdef __cplusplus
}
#endif

#endif /* TORX_MSG_H */
