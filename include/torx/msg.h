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
 *                  (hdr_len + len <= TORX_MSG_ONEPKT_MAX)
 *   eager          deterministic packets, receiver unpacks by offset
 *   adaptive eager adaptive packets; the receiver returns a token once the
 *                  message is matched and the sender waits for it before its
 *                  next message to that peer
 *   rendezvous     an ordered scout; the data moves after the receiver's
 *                  handler has chosen the buffer, by bulk get (zero-copy) or,
 *                  with rzv_packets, as adaptive packets after a clear-to-send
 *   virtual node   between the tasks of one node (vn mode): the sender passes
 *                  its buffer's address, the receiver copies once and acks
 * Packet-streamed protocols (eager, adaptive eager, rendezvous with
 * rzv_packets) carry 32-bit offsets: they take messages below 4 GiB. Larger
 * rendezvous messages always use the bulk get.
 *
 * Environment (read by torx_init):
 *   TORX_MODE              heater (default) | co | vn
 *   TORX_CORES_PER_NODE    cores per node, the tasks per node of vn mode (2)
 *   TORX_TORUS, TORX_MAPPING   see <torx/map.h>
 *   TORX_EAGER_LIMIT, TORX_ADAPTIVE_LIMIT, TORX_RZV_DATA  see torx_limits_t
 *   TORX_STATS=1           print per-protocol counters at finalize, one line
 *                          per protocol per task, to stderr
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
 *   one-packet       when h + n <= TORX_MSG_ONEPKT_MAX, else
 *   virtual node     between two tasks of one node in vn mode, else
 *   adaptive eager   when n <= adaptive_limit, else
 *   eager            when n <= eager_limit, else
 *   rendezvous.
 * Both limits are at most 2^32 - 1 (the packet-streamed protocols' offsets). */
typedef struct torx_limits {
    size_t eager_limit;    /* TORX_EAGER_LIMIT, default 4096 */
    size_t adaptive_limit; /* TORX_ADAPTIVE_LIMIT, default 0 (off) */
    int rzv_packets;       /* TORX_RZV_DATA=bulk (0, default) | packets (1):
                              rendezvous data as adaptive packets instead of
                              a bulk get */
} torx_limits_t;

typedef struct torx_init_attr {
    torx_boot_t *boot;           /* NULL: PMI from hydra, or a singleton */
    int mode;                    /* torx_mode_t, or -1 for TORX_MODE */
    const char *mapping;         /* order string or file; NULL: TORX_MAPPING */
    const torx_limits_t *limits; /* NULL: from TORX_* */
} torx_init_attr_t;

/* Starts the message layer: reads and checks the environment, builds the
 * rank map (a bad mapping file stops here, with file, line and reason),
 * opens the packet device and, in co mode, starts the communication thread
 * (bound to the node's second core; a warning, not an error, when the host
 * has too few cores). Collective over the job. attr may be NULL (all
 * defaults). */
torx_status_t torx_init(const torx_init_attr_t *attr, torx_ctx_t **ctx);

/* Drains this task's outstanding sends (keeping the network moving for the
 * others), meets every task in a final barrier (the global interrupt),
 * prints TORX_STATS, closes the device and frees ctx. Collective. Messages
 * that arrive but that the application never waited for may be dropped.
 * TORX_ERR_PEER when the drain or the barrier does not finish within 120 s
 * (a peer died or stopped advancing); ctx is freed anyway. */
torx_status_t torx_finalize(torx_ctx_t *ctx);

int torx_rank(const torx_ctx_t *ctx);
int torx_size(const torx_ctx_t *ctx);
torx_mode_t torx_mode(const torx_ctx_t *ctx);
int torx_tasks_per_node(const torx_ctx_t *ctx);
const torx_map_t *torx_ctx_map(const torx_ctx_t *ctx);
torx_pkt_dev_t *torx_ctx_device(torx_ctx_t *ctx); /* for src/coll/ */
const torx_limits_t *torx_ctx_limits(const torx_ctx_t *ctx);

/* The protocol TORX_PROTO_AUTO picks for a message of hdr_len + len bytes
 * to dest. */
torx_protocol_t torx_choose_protocol(const torx_ctx_t *ctx, int dest, size_t hdr_len,
                                     size_t len);

/* ---- Receiving ------------------------------------------------------------ */

#define TORX_MSG_MAX_HDR 64
#define TORX_MSG_HANDLERS 64 /* handler ids 0..63 */

typedef struct torx_recv_info {
    int src;          /* sending rank */
    const void *hdr;  /* the sender's header; valid during the handler */
    size_t hdr_len;
    size_t data_len;  /* bytes the sender sends */
    /* Non-NULL when all the data is already here (one-packet, and any
     * message whose data fits its first packet, including zero-length
     * ones): valid during the handler only; the handler may consume it
     * directly and set recv->buf = NULL. */
    const void *data;
    torx_protocol_t protocol;
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
typedef struct torx_recv {
    void *buf;
    size_t len;
    torx_recv_done_fn done; /* may be NULL */
    void *arg;
} torx_recv_t;

typedef void (*torx_handler_fn)(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                                torx_recv_t *recv);

/* Registers handler id (0..TORX_MSG_HANDLERS-1); fn NULL unregisters.
 * Re-registering replaces. A message for an unregistered id is discarded
 * with a warning (its sender still completes). */
torx_status_t torx_register(torx_ctx_t *ctx, int id, torx_handler_fn fn, void *harg);

/* ---- Sending -------------------------------------------------------------- */

/* A caller-owned send; its contents are private. Must stay in place until
 * it is no longer pending (its done callback has run). */
typedef struct torx_msg {
    _Alignas(16) uint64_t priv[24];
} torx_msg_t;

typedef void (*torx_send_done_fn)(torx_ctx_t *ctx, torx_msg_t *msg, void *arg);

/* Sends hdr (copied now) and len bytes of data (read until done runs) to
 * handler at rank dest. protocol TORX_PROTO_AUTO picks by size
 * (torx_choose_protocol); a forced protocol must suit the message
 * (one-packet: it fits; virtual node: dest shares this task's node in vn
 * mode; packet-streamed: len < 4 GiB), else TORX_ERR_INVAL. Returns TORX_OK
 * once the message is queued (never TORX_NO_ROOM: a full network queues it);
 * done (may be NULL) runs when data may be reused (for rendezvous and
 * virtual node: after the receiver has taken it). Messages to one
 * destination go out one after another, never interleaved. */
torx_status_t torx_send(torx_ctx_t *ctx, torx_msg_t *msg, int dest, int handler, const void *hdr,
                        size_t hdr_len, const void *data, size_t len, torx_protocol_t protocol,
                        torx_send_done_fn done, void *arg);

/* Non-zero while the message layer still holds msg (from torx_send until
 * just before its done callback runs). */
int torx_msg_pending(const torx_msg_t *msg);

/* ---- Progress ------------------------------------------------------------- */

/* Polls the network once: pushes queued sends, runs handlers and completion
 * callbacks. Returns the number of events handled (0 when idle). */
int torx_advance(torx_ctx_t *ctx);

/* Advances until *flag becomes non-zero (set by a callback). Spins for a
 * while, then yields the CPU, then sleeps until a packet comes (the packet
 * layer's doorbell; in co mode, until the communication thread has something
 * for the task), so an idle waiter does not burn a core (an oversubscribed
 * job yields from the start). While its own sends wait for room at a busy
 * peer, it naps instead. */
torx_status_t torx_wait(torx_ctx_t *ctx, volatile int *flag);

/* torx_wait with a limit: TORX_AGAIN when *flag is still zero after
 * timeout_s seconds. */
torx_status_t torx_wait_timeout(torx_ctx_t *ctx, volatile int *flag, double timeout_s);

/* ---- Coprocessor mode ----------------------------------------------------- */

/* In co mode a communication thread runs beside the task. It reads the
 * network and moves rendezvous and vn data into the buffers handlers chose,
 * while the task computes; handlers and callbacks still run only in the
 * task's torx_advance / torx_wait, so a program that is single-threaded
 * towards torx stays correct. A rendezvous receive whose handler has run
 * completes without the task advancing; its done runs at the next advance. */

typedef void (*torx_cowork_fn)(void *arg);
/* Starts fn(arg) as a transient work unit on the communication thread in co
 * mode; units run one at a time, in the order started, between the thread's
 * network work. fn runs concurrently with the task: it must not call torx_*
 * functions and must synchronise with the task only through torx_cojoin
 * (what fn wrote is visible after it). A full queue of units makes
 * costart wait (advancing). *handle (may be NULL) names the unit for
 * torx_cojoin. In heater and vn modes there is no thread: fn runs at once,
 * in the caller, and the handle is already complete. */
torx_status_t torx_costart(torx_ctx_t *ctx, torx_cowork_fn fn, void *arg, int *handle);
/* Waits (advancing, and sleeping when idle) until the work unit handle and
 * every unit started before it have finished. */
torx_status_t torx_cojoin(torx_ctx_t *ctx, int handle);

/* ---- Counters ------------------------------------------------------------- */

/* Per protocol: messages, their data bytes, and every packet the protocol
 * moved (control packets such as tokens, acks and clear-to-sends count
 * under their protocol's packets). */
typedef struct torx_proto_stats {
    uint64_t sent, received;           /* messages */
    uint64_t bytes_sent, bytes_received;
    uint64_t packets_sent, packets_received;
} torx_proto_stats_t;

/* Per-protocol counters of this task (index TORX_PROTO_AUTO stays zero). */
void torx_stats(const torx_ctx_t *ctx, torx_proto_stats_t out[TORX_PROTO_COUNT]);
/* "one-packet", "eager", "adaptive", "rendezvous", "vn"; "auto" for AUTO. */
const char *torx_protocol_name(torx_protocol_t p);

#ifdef __cplusplus
}
#endif

#endif /* TORX_MSG_H */
