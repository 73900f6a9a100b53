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
 *
 * Wire format. The packet header's 8 software bytes are two little-endian
 * words: sw[0..3] = type | source rank << 8 (ranks are below 2^24), and
 * sw[4..7] = a per-type word (handler | hdr_len << 8 | flags << 16 on a
 * message's first packet, the byte offset on data packets). Payloads:
 *
 *   ONEPKT        hdr, data                                 deterministic
 *   EAGER_FIRST   u32 total, hdr, data                      deterministic
 *   EAGER_MORE    data                     (word: offset)   deterministic
 *   ADAPT_FIRST   u32 total, u32 seq, hdr, data             adaptive
 *   ADAPT_MORE    u32 seq, data            (word: offset)   adaptive
 *   ADAPT_TOKEN   -                        (word: seq)      deterministic
 *   RZV_SCOUT     u64 total, u64 addr, u64 cookie, hdr      deterministic
 *   RZV_CTS       u64 cookie, u64 rcookie, u64 want         deterministic
 *                                          (word: TORXM_CTS_STAGED or 0)
 *   RZV_DATA      u64 rcookie, data        (word: offset)   adaptive
 *   RZV_ACK       u64 cookie                                deterministic
 *   VN_SCOUT      as RZV_SCOUT                              deterministic
 *   VN_ACK        as RZV_ACK                                deterministic
 *   EAGER_STAGED  u32 total, stage ref (u32 off, u32 len), hdr   deterministic
 *   EAGER_PIECE   stage ref                (word: offset)   deterministic
 *   VN_STAGED     as EAGER_STAGED                           deterministic
 *   VN_PIECE      as EAGER_PIECE                            deterministic
 *   LINE          hdr, data                                 deposit bit
 *   RZV_PIECE     u64 rcookie, stage ref   (word: offset)   deterministic
 *
 * LINE packets (torx_line_send) are one-packet messages deposited along a
 * line; they bypass the send queues and sequence numbers (a collective's
 * packets carry their own place in their header), so they never shift the
 * matching of point-to-point messages.
 *
 * Staged messages (proto_stage.c) carry their data in the device's staging
 * area, a piece per packet; the packet holds the piece's descriptor. They
 * take the eager reassembly slot of their source, as eager messages do.
 *
 * Ordering. Deterministic packets keep their order per sender/receiver pair,
 * so one-packet, eager and scouts are matched in send order for free. An
 * adaptive message's first packet may overtake earlier deterministic ones,
 * so it carries seq, the count of messages the sender started to that peer
 * before it; the receiver counts the messages it matched from each source
 * (rx_seq) and parks an adaptive first packet that is early. Nothing can
 * overtake the adaptive message itself: the sender holds its next message
 * until the receiver's token says it was matched. Data packets that beat
 * their first packet are parked the same way, keyed by seq. A staged
 * message whose first packet is out but whose next piece finds the staging
 * area full lets one-packet messages and scouts behind it go first
 * (msg_send.c, pass_staged): the receiver has matched it already, so
 * matching order holds, though completion order may not.
 */
#ifndef TORXM_INTERNAL_H
#define TORXM_INTERNAL_H

#include <torx/msg.h>

#include "packet/pkt_internal.h"

#include <assert.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define TORXM_LIKELY TORXP_LIKELY
#define TORXM_UNLIKELY TORXP_UNLIKELY

/* Default protocol boundaries (TORX_EAGER_LIMIT, TORX_STAGE_MIN,
 * TORX_STAGE_CHUNK): measured on the development machine, see
 * bench/RESULTS.md ("Protocol boundaries") and bench/run-calibrate.sh.
 * The eager limit: with the shm device's 1 MiB staging rings a staged
 * message beats the rendezvous on latency and on both bandwidths up to
 * 32 KiB; at 64 KiB the rendezvous's single copy wins both ways (48 KiB
 * was not measured staged, so the limit stays a power of two). */
#define TORXM_EAGER_LIMIT 32768
#define TORXM_STAGE_MIN 232
#define TORXM_STAGE_CHUNK 16384
/* TORX_EAGER_IDLE_LIMIT: to an idle pair (nothing in flight, a reply
 * since the last long message), staged up to here instead of the
 * rendezvous. One message at a time the two tasks' copies overlap piece by
 * piece, where the rendezvous pays a handshake and a process_vm_readv
 * (about 10 GB/s on the development VM): 48 KiB to 4 MiB took 0.4-0.6 of
 * the rendezvous's half round trip (bench/RESULTS.md, "Seventh session"),
 * with no step at the eager limit (32 KiB 2.5 us, 48 KiB 3.4 instead of 5.7
 * by rendezvous). Streams are left alone: one message per window of a
 * bandwidth test goes staged. A message longer than the staging area
 * streams through it as the receiver releases pieces, while the scouts and
 * one-packet messages behind it go first (msg_send.c, pass_staged): 1-4 MiB
 * took 0.67-0.8 of the shared rendezvous's time, with no step at 1 MiB,
 * and both-ways windows kept their bandwidth (bench/RESULTS.md, "Tenth
 * session"). 4 MiB bounds what an unexpected message costs the receiver: a
 * buffer of its size, as any eager message does. Above it, the shared
 * rendezvous. */
#define TORXM_EAGER_IDLE_LIMIT 4194304
/* TORX_STAGE_COST_MAX: copies into the staging area slower than this (ns
 * per KiB, torx_stage_cost) count as slow: an idle pair's long messages
 * keep the rendezvous, and eager and vn messages from TORXM_SLOW_RZV_MIN
 * bytes take it too (vn: the bulk get); one in TORXM_STAGE_PROBE goes
 * staged anyway, to measure again. On the development VM a piece's copy
 * took 22-62 ns per KiB with the two vCPUs near each other and 300-515 far
 * apart, where a staged 16 KiB message took 8.5-9.5 us, 32 KiB 14.9-17.2
 * and 64 KiB 25.8-30.1, against 5.7 and 6.8 for 48 and 64 KiB by
 * rendezvous in the same runs; at 2 KiB the staged message was level with
 * Open MPI there, and a rendezvous costs 2.3 us before its first byte. */
#define TORXM_STAGE_COST_MAX 150
#define TORXM_SLOW_RZV_MIN 8192
#define TORXM_STAGE_PROBE 64
/* How many scouts from a peer a task's slow-copies verdict holds for it
 * when none of its own go between (torxm_peer_t.rzv_hold): four windows of
 * a 64-message bandwidth test. A peer that finishes its window first
 * sends the next one's scouts while this task still waits on its own, so
 * one window's worth would lapse mid-exchange (traced: a rank took 186
 * offers while its own scouts were off). */
#define TORXM_RZV_HOLD 256

/* Offsets and totals of packet-streamed messages are 32-bit on the wire. */
#define TORXM_STREAM_MAX ((uint64_t)UINT32_MAX)
#define TORXM_RANK_MAX ((1 << 24) - 1)

/* ---- Wire ------------------------------------------------------------------ */

enum torxm_pkt_type {
    TORXM_PKT_INVALID = 0, /* a zeroed sw is never a valid packet */
    TORXM_PKT_ONEPKT,
    TORXM_PKT_EAGER_FIRST,
    TORXM_PKT_EAGER_MORE,
    TORXM_PKT_ADAPT_FIRST,
    TORXM_PKT_ADAPT_MORE,
    TORXM_PKT_ADAPT_TOKEN,
    TORXM_PKT_RZV_SCOUT,
    TORXM_PKT_RZV_CTS,
    TORXM_PKT_RZV_DATA,
    TORXM_PKT_RZV_ACK,
    TORXM_PKT_VN_SCOUT,
    TORXM_PKT_VN_ACK,
    TORXM_PKT_EAGER_STAGED,
    TORXM_PKT_EAGER_PIECE,
    TORXM_PKT_VN_STAGED,
    TORXM_PKT_VN_PIECE,
    TORXM_PKT_LINE,
    TORXM_PKT_RZV_PIECE,
    TORXM_PKT_NTYPES
};

/* Scout flag: the receiver sends a clear-to-send and the data comes as
 * adaptive packets (TORX_RZV_DATA=packets) instead of a bulk get. */
#define TORXM_SCOUT_PACKETS 0x1u
/* Scout flag: the sender can stream the data through the staging area; the
 * receiver chooses (torxm_rzv_takes_stage) and says so in its
 * clear-to-send's word (TORXM_CTS_STAGED), or gets the data in bulk. */
#define TORXM_SCOUT_STAGED 0x2u
/* Scout flag, with TORXM_SCOUT_STAGED: the sender's copies toward the
 * receiver run slow and this scout is the one in TORXM_STAGE_PROBE that
 * measures them again; the receiver takes the offer whatever its own
 * verdict (torxm_peer_t.rzv_hold). */
#define TORXM_SCOUT_PROBE 0x4u
#define TORXM_CTS_STAGED 0x1u

#define TORXM_EAGER_FIRST_PREFIX 4u /* u32 total */
#define TORXM_ADAPT_FIRST_PREFIX 8u /* u32 total, u32 seq */
#define TORXM_ADAPT_MORE_PREFIX 4u  /* u32 seq */
#define TORXM_SCOUT_PREFIX 24u      /* u64 total, addr, cookie */
#define TORXM_RZV_DATA_PREFIX 8u    /* u64 rcookie */
#define TORXM_STAGED_PREFIX 12u     /* u32 total, u32 ref off, u32 ref len */
#define TORXM_PIECE_BYTES 8u        /* u32 ref off, u32 ref len */
#define TORXM_RZV_PIECE_BYTES 16u   /* u64 rcookie, u32 ref off, u32 ref len */

static_assert(TORX_MSG_ONEPKT_MAX == TORX_PKT_MAX_PAYLOAD, "one-packet uses the whole payload");
/* Data bytes the first packet of a message of len data bytes and hdr_len
 * header bytes carries after its prefix and the header (eager, adaptive). */
static inline uint64_t torxm_first_chunk(unsigned prefix, size_t hdr_len, uint64_t len)
{
    const uint64_t room = TORX_PKT_MAX_PAYLOAD - prefix - hdr_len;
    return len < room ? len : room;
}
static_assert(TORXM_SCOUT_PREFIX + TORX_MSG_MAX_HDR <= TORX_PKT_MAX_PAYLOAD,
              "a scout carries the largest header");
static_assert(TORXM_ADAPT_FIRST_PREFIX + TORX_MSG_MAX_HDR < TORX_PKT_MAX_PAYLOAD,
              "a first packet carries the largest header and some data");
static_assert(TORX_MSG_HANDLERS <= 256 && TORX_MSG_MAX_HDR <= 255, "they fit a byte of word");

static inline void torxm_sw_set(torx_pkt_hdr_t *h, unsigned type, uint32_t src, uint32_t word)
{
    const uint32_t a = (uint32_t)type | src << 8;
    memcpy(h->sw, &a, 4);
    memcpy(h->sw + 4, &word, 4);
}

static inline unsigned torxm_sw_type(const torx_pkt_hdr_t *h)
{
    return h->sw[0];
}

static inline uint32_t torxm_sw_src(const torx_pkt_hdr_t *h)
{
    uint32_t a;
    memcpy(&a, h->sw, 4);
    return a >> 8;
}

static inline uint32_t torxm_sw_word(const torx_pkt_hdr_t *h)
{
    uint32_t w;
    memcpy(&w, h->sw + 4, 4);
    return w;
}

static inline uint32_t torxm_first_word(unsigned handler, unsigned hdr_len, unsigned flags)
{
    return (uint32_t)handler | (uint32_t)hdr_len << 8 | (uint32_t)flags << 16;
}

static inline uint32_t torxm_ld32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint64_t torxm_ld64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* ---- Send side --------------------------------------------------------------- */

enum torxm_msg_state {
    TORXM_MSG_IDLE = 0,    /* not held by the layer */
    TORXM_MSG_QUEUED,      /* waiting in its peer's queue, not started */
    TORXM_MSG_FIRST,       /* started (seq given), first packet not injected */
    TORXM_MSG_MORE,        /* first packet injected, data packets follow */
    TORXM_MSG_AWAIT,       /* scout injected, waiting for ack or clear-to-send */
    TORXM_MSG_STREAM,      /* rendezvous data packets, after the clear-to-send */
    TORXM_MSG_STAGE,       /* rendezvous data through the staging area, after it */
    TORXM_MSG_DONE_PENDING /* on the completion list */
};

#define TORXM_MSG_MAGIC 0x746d7367u /* "tmsg" */

/* The private layout of torx_msg_t. */
typedef struct torxm_msg {
    struct torxm_msg *next; /* peer queue or completion list */
    const uint8_t *data;
    uint64_t len;
    uint64_t off;     /* data bytes injected so far */
    uint64_t want;    /* rendezvous packets: bytes the receiver asked for */
    uint64_t rcookie; /* rendezvous packets: the receiver's cookie */
    uint64_t cookie;  /* rendezvous, vn: our cookie, 0 when none */
    torx_send_done_fn done;
    void *arg;
    uint32_t magic;
    int32_t dest;
    uint32_t seq;
    uint8_t proto;
    uint8_t state;
    uint8_t handler;
    uint8_t hdr_len;
    uint8_t hdr[TORX_MSG_MAX_HDR];
    torx_status_t status; /* TORX_OK, or why the send failed (torx_msg_status) */
    /* staged: a piece staged whose descriptor packet is not out yet (its
     * ref, off << 32 | len), 0 when none */
    uint64_t piece;
} torxm_msg_t;
static_assert(sizeof(torxm_msg_t) <= sizeof(torx_msg_t), "private message fits torx_msg_t");
static_assert(_Alignof(torxm_msg_t) <= _Alignof(torx_msg_t), "and its alignment");

static inline torxm_msg_t *torxm_msg(torx_msg_t *m)
{
    return (torxm_msg_t *)(void *)m;
}

/* ---- Receive side ------------------------------------------------------------ */

/* A message being received: eager and adaptive reassembly, rendezvous and
 * vn transfers. Allocated from a free list; never on the one-packet path. */
typedef struct torxm_rx {
    struct torxm_rx *next;
    uint8_t *buf;   /* NULL: discard */
    uint64_t cap;   /* the handler's len */
    uint64_t total; /* the sender's len */
    uint64_t want;  /* bytes that will arrive here */
    uint64_t arrived;
    torx_recv_done_fn done;
    void *arg;
    torx_status_t status; /* an error of the transfer, else TORX_OK */
    int src;
    uint32_t seq; /* adaptive: the message's seq */
    uint8_t proto;
    uint8_t ack_type;      /* rendezvous, vn: the packet type of the ack */
    uint8_t pooled;        /* 1: from the free list; 0: a peer's embedded eager record */
    uint8_t flags;         /* deferred: the scout's flags (TORXM_SCOUT_PACKETS);
                              reassembly: TORXM_RX_STAGED for staged pieces */
    uint8_t deferred;      /* on ctx->deferred, waiting for torx_accept */
    uint8_t later;         /* continued by torx_accept: finish through ctx->rx_done */
    uint8_t way_counted;   /* rendezvous, vn: torxm_rzv_way_received counts it */
    struct torxm_rx *prev; /* ctx->deferred is doubly linked: accept unlinks any */
    uint64_t scookie;      /* rendezvous, vn: the sender's cookie */
    uint64_t rcookie;      /* rendezvous packets: ours */
    uint64_t raddr;        /* rendezvous, vn in co mode: the sender's buffer, for the get */
    torx_bulk_t bulk;
} torxm_rx_t;

#define TORXM_RX_STAGED 0x1u

/* A copy of an adaptive packet that came before its turn (see Ordering). */
typedef struct torxm_early {
    struct torxm_early *next;
    uint32_t seq;
    _Alignas(8) torx_pkt_hdr_t pkt; /* header then payload, as in a FIFO */
    uint8_t payload[TORX_PKT_MAX_PAYLOAD];
} torxm_early_t;
static_assert(offsetof(torxm_early_t, payload) ==
                  offsetof(torxm_early_t, pkt) + sizeof(torx_pkt_hdr_t),
              "payload follows the copied header, as torx_pkt_payload expects");

struct torxm_rzv_way; /* rzv_way.c */

/* Per-peer state: both directions. */
typedef struct torxm_peer {
    /* send */
    torxm_msg_t *head, **tail; /* pending queue; tail valid when head != NULL */
    struct torxm_peer *busy_next;
    uint8_t busy;         /* on ctx->busy */
    uint32_t tx_seq;      /* messages started to this peer */
    uint32_t tokens_owed; /* adaptive messages not yet matched there */
    uint32_t awaiting;    /* rendezvous sends whose scout is out (ctx->awaiting's share) */
    torx_coord_t coord;
    uint8_t staged; /* the staging area reaches this peer (torx_stage_reaches) */
    /* another task of this host that the staging area reaches and whose
     * bulk gets the device measured (torx_bulk_cost): the pair measures its
     * ways (rzv_way.c), and their clocks are one */
    uint8_t way_host;
    /* messages kept off the staging area for slow copies (torxm_copies_slow),
     * and rx_seq when the last message torxm_idle_stages weighed left */
    uint8_t stage_probe;
    /* The staged rendezvous is a pair's choice: while this task's own
     * scouts to peer go without the staging offer for slow copies, it
     * declines peer's offers too (but probes), for the next rzv_hold
     * scouts from peer. A window where one direction stages and the other
     * takes bulk gets runs slower than either alone (proto_rzv.c). */
    uint16_t rzv_hold;
    uint32_t rx_seq_at_long;
    /* the pair's way for long rendezvous data, kept by its lower rank
     * (torxm_rzv_way_staged); NULL until the first such transfer */
    struct torxm_rzv_way *way;
    /* receive */
    uint32_t rx_seq;      /* messages matched from this peer */
    torxm_rx_t *eager;    /* the eager message being reassembled, or NULL */
    torxm_rx_t eager_rec; /* its record: one at a time per source, never allocated */
    torxm_rx_t *adapt;    /* adaptive messages being reassembled */
    torxm_early_t *early; /* adaptive packets parked before their turn */
} torxm_peer_t;

/* A control packet (token, ack, clear-to-send) the FIFOs had no room for. */
typedef struct torxm_ctrl {
    struct torxm_ctrl *next;
    int dest;
    uint8_t type, proto;
    uint8_t len;
    uint32_t word;
    uint8_t payload[24];
} torxm_ctrl_t;

/* Cookies name rendezvous operations on the wire: (generation << 32 | slot)
 * in a table, so a stale or bogus cookie is caught before anything is
 * dereferenced. Cookie 0 is never valid. */
typedef struct torxm_cookie_slot {
    void *p; /* NULL when free */
    uint32_t gen;
    uint32_t next_free;
    int owned; /* p is a receive record of ours (freed at finalize), not a send */
} torxm_cookie_slot_t;

typedef void (*torxm_rx_fn)(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt);

struct torx_ctx {
    torx_pkt_dev_t *dev;
    int rank, size;
    torx_coord_t self;
    torxm_peer_t *peers; /* by rank */

    /* Reception dispatch, built at init from torxm_protocols. */
    struct {
        torxm_rx_fn fn;
        uint8_t proto;
    } rx[TORXM_PKT_NTYPES];

    struct {
        torx_handler_fn fn;
        void *arg;
    } handlers[TORX_MSG_HANDLERS];
    uint64_t warned_handlers; /* bit per id: an unregistered-id warning printed */

    torx_limits_t limits;
    char tuning_file[512];               /* the tuning file that set boundaries (msg.c), or "" */
    uint32_t stage_chunk;                /* bytes per staged piece; 0 when staging is off */
    torxm_peer_t *busy;                  /* peers with a non-empty queue */
    torxm_msg_t *done_head, **done_tail; /* sends whose done is due */
    torxm_ctrl_t *ctrl_head, **ctrl_tail, *ctrl_free;
    torxm_rx_t *bulk;                         /* receives with a bulk get running */
    torxm_rx_t *deferred;                     /* scouts whose handler deferred them */
    torxm_rx_t *rx_done_head, **rx_done_tail; /* accepted receives whose done is due */
    torxm_rx_t *rx_free;
    torxm_early_t *early_free;
    torxm_cookie_slot_t *cookies;
    uint32_t ncookies, cookie_free;
    uint64_t awaiting;      /* sends whose scout is out, waiting for the receiver */
    uint64_t inflight_rx;   /* rendezvous and vn receives not yet finished */
    uint64_t parked;        /* adaptive packets that came before their turn (tests read it) */
    uint64_t staged_pieces; /* staged pieces received (tests read it) */
    uint64_t malformed;     /* packets dropped by torxm_bad_packet or the dispatch */
    torx_status_t failed;   /* torxm_fail: the first error the context cannot recover from */
    char failed_why[400];   /* and its message, which every later advance reports again */

    int in_advance;
    int costarted;       /* heater, vn: work units run by torx_costart */
    struct torxm_co *co; /* co mode: the scratchpad shared with the communication thread */
    torxm_rx_t *co_wait, **co_wait_tail; /* co: gets not yet handed to the thread */
    int co_net;                          /* co: the communication thread reads the network and moves
                                          * rendezvous data (it has a core); 0: the task does, as in heater */
    int cores_per_node; /* TORX_CORES_PER_NODE, or fitted to the host (msg_bind.c) */
    int host_cores;     /* cores the job may use on this host; 0 = unknown */
    int nodes_fit;      /* every node gets cores_per_node cores of its own */
    int prebound_cpus;  /* CPUs of the launcher's binding; 0 = we bind */
    int oversubscribed; /* more tasks than online CPUs: waits yield at once */
    int stats_print;    /* TORX_STATS */
    torx_proto_stats_t stats[TORX_PROTO_COUNT];
    uint64_t *bytes_to; /* TORX_STATS, TORX_STATS_FILE: data bytes sent to each rank; else NULL */
    int stats_fd;       /* TORX_STATS_FILE: where this task appends its row; else -1 */

    torx_mode_t mode;
    int tasks_per_node;
    torx_map_t map;
    torx_boot_t *boot;
    torx_boot_t own_boot; /* when torx_init started PMI itself */
    int owns_boot;
};

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

/* Counts len data bytes of a message to peer, once per message, where its
 * protocol counts it as sent. One increment when TORX_STATS is on; off, a
 * branch that is never taken. */
static inline void torxm_count_dest(torx_ctx_t *ctx, const torxm_peer_t *peer, uint64_t len)
{
    if (TORXM_UNLIKELY(ctx->bytes_to != NULL))
        ctx->bytes_to[peer - ctx->peers] += len;
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
/* Whether rendezvous message m streams its data as packets after a
 * clear-to-send (TORX_RZV_PACKETS; streamed offsets are 32-bit, so larger
 * messages take the bulk get). */
static inline int torxm_rzv_streams(const torx_ctx_t *ctx, const torxm_msg_t *m)
{
    return ctx->limits.rzv_data == TORX_RZV_DATA_PACKETS && m->len <= TORXM_STREAM_MAX;
}
/* Whether a rendezvous or vn scout offers its data through the staging
 * area (TORXM_SCOUT_STAGED): the area reaches peer, the offsets fit, and
 * TORX_RZV_DATA is auto or staged. Not in co mode, whose thread moves
 * rendezvous data while the task computes. */
static inline int torxm_rzv_offers_stage(const torx_ctx_t *ctx, const torxm_peer_t *peer,
                                         const torxm_msg_t *m)
{
    return peer->staged && !ctx->co_net && m->len <= TORXM_STREAM_MAX &&
           (ctx->limits.rzv_data == TORX_RZV_DATA_AUTO ||
            ctx->limits.rzv_data == TORX_RZV_DATA_STAGED);
}
/* A bulk get costing more than this, in percent of a memcpy
 * (torx_bulk_cost), loses to staging: a staged byte is copied twice (into
 * the area, out of it), on two cores at once one way and on each core both
 * ways. On one machine of this VM type the floors were memcpy 59 GB/s and
 * process_vm_readv 33-36 (about 170; ../shared/BENCHMARKING.md), and the
 * bulk get beat staging both ways from 64 KiB (the 2026-11-25
 * calibration); on another, 31 and 9 GB/s, torx_bulk_cost 205-454, and
 * staging beat the bulk get 1.3-2.8x one way and both ways at 64 KiB-4 MiB
 * (bench/RESULTS.md, twelfth session). */
#define TORXM_RZV_STAGE_COST 200u
/* The receiver's choice for a scout that offers staging: TORX_RZV_DATA=
 * staged, or auto where a bulk get from peer costs more than two copies.
 * Auto never stages oversubscribed: a staged stream needs both tasks
 * running, a bulk get only the receiver. */
static inline int torxm_rzv_takes_stage(const torx_ctx_t *ctx, const torxm_peer_t *peer)
{
    if (ctx->co_net)
        return 0;
    if (ctx->limits.rzv_data == TORX_RZV_DATA_STAGED)
        return 1;
    return ctx->limits.rzv_data == TORX_RZV_DATA_AUTO && !ctx->oversubscribed &&
           torx_bulk_cost(ctx->dev, peer->coord) > TORXM_RZV_STAGE_COST;
}
/* Long rendezvous data goes the way the pair measured faster (rzv_way.c).
 * Whether two copies through the staging area beat one bulk get depends on
 * where the hypervisor put the two cores, and it moves them: near (one
 * L3) staging moved 64 KiB-1 MiB at 2.0-2.5x a bulk get both ways; in one
 * far placement staging lost to the peers' single copy (0.49-0.85x at
 * 256 KiB-1 MiB both ways), in another it still beat it 1.3-2x one way
 * (bench/RESULTS.md, seventeenth and eighteenth sessions), with the same
 * cache-line handoff time. Neither a copy-time line nor the handoff told
 * the cases apart, so under TORX_RZV_DATA=auto the pair tries both. One
 * task decides for both directions (the lower rank, torxm_rzv_way_leads):
 * a window where one direction staged while the other took bulk gets ran
 * slower than either (proto_rzv.c, takes_offer), and so would any
 * measurement of it. The other task offers staging on every long scout and
 * takes every offer. */
#define TORXM_RZV_WAY_MIN 65536
static inline int torxm_rzv_way_measured(const torx_ctx_t *ctx, const torxm_peer_t *peer,
                                         uint64_t len)
{
    return ctx->limits.rzv_data == TORX_RZV_DATA_AUTO && !ctx->co_net && !ctx->oversubscribed &&
           peer->way_host && len >= TORXM_RZV_WAY_MIN && len <= TORXM_STREAM_MAX;
}
static inline int torxm_rzv_way_leads(const torx_ctx_t *ctx, const torxm_peer_t *peer)
{
    return ctx->rank < (int)(peer - ctx->peers);
}
/* Whether this task counts a measured transfer of len bytes with peer
 * (torxm_rzv_way_sent, torxm_rzv_way_received): it leads the pair. */
static inline int torxm_rzv_way_counts(const torx_ctx_t *ctx, const torxm_peer_t *peer,
                                       uint64_t len)
{
    return torxm_rzv_way_measured(ctx, peer, len) && torxm_rzv_way_leads(ctx, peer);
}
/* For a measured transfer of len bytes with peer, either direction: whether
 * this task offers staging on its scout, and takes the peer's offer. The
 * leader answers its choice; the other task always does, so the choice
 * holds for both directions. */
int torxm_rzv_way_staged(torx_ctx_t *ctx, torxm_peer_t *peer, uint64_t len);
/* The leader counts each long transfer of the pair as it completes, staged
 * or by bulk get, one of its sends or of its receives, finished at when
 * (torxp_mono_ns of the receiving task: a get's ack carries it; 0: now). */
void torxm_rzv_way_sent(torx_ctx_t *ctx, torxm_peer_t *peer, uint64_t len, int staged,
                        uint64_t when);
void torxm_rzv_way_received(torx_ctx_t *ctx, torxm_peer_t *peer, uint64_t len, int staged,
                            uint64_t when);
/* TORX_VERBOSE=2, at finalize: what the pairs measured. */
void torxm_rzv_way_log(const torx_ctx_t *ctx);
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
/* Whether copies into the staging area toward peer run slow now
 * (torx_stage_cost above limits.stage_cost_max). Never in an oversubscribed
 * job: there a copy is slow because its task lost its core, which a
 * rendezvous, needing both tasks scheduled, does not mend. */
static inline int torxm_copies_measured_slow_at(torx_ctx_t *ctx, const torxm_peer_t *peer,
                                                unsigned max)
{
    return !ctx->oversubscribed && torx_stage_cost(ctx->dev, peer->coord) > max;
}
static inline int torxm_copies_measured_slow(torx_ctx_t *ctx, const torxm_peer_t *peer)
{
    return torxm_copies_measured_slow_at(ctx, peer, ctx->limits.stage_cost_max);
}
/* Whether this message, one kept off the area for slow copies, is the one
 * in TORXM_STAGE_PROBE that goes staged anyway to measure again. */
static inline int torxm_stage_probes(torxm_peer_t *peer)
{
    return ++peer->stage_probe % TORXM_STAGE_PROBE == 0;
}
/* The same, as a message's choice: a message that could go either way
 * leaves the area while copies cost more than max, except one in
 * TORXM_STAGE_PROBE, which measures again. */
static inline int torxm_copies_slow_at(torx_ctx_t *ctx, torxm_peer_t *peer, unsigned max)
{
    return torxm_copies_measured_slow_at(ctx, peer, max) && !torxm_stage_probes(peer);
}
static inline int torxm_copies_slow(torx_ctx_t *ctx, torxm_peer_t *peer)
{
    return torxm_copies_slow_at(ctx, peer, ctx->limits.stage_cost_max);
}
/* The same for a staged rendezvous (TORX_RZV_DATA=auto), at three quarters
 * of limits.stage_cost_max (112 ns per KiB by default): both ways at 1 MiB
 * ran at 22-26 GB/s while copies toward the peer cost 45-94 ns per KiB, and
 * at 6.6-7.1 GB/s at 119-153 (the cores far apart), where a bulk get gives
 * 12-17 (bench/RESULTS.md, twelfth session). */
static inline int torxm_rzv_copies_slow(torx_ctx_t *ctx, const torxm_peer_t *peer)
{
    return torxm_copies_measured_slow_at(ctx, peer, ctx->limits.stage_cost_max / 4 * 3);
}
/* Whether a staged eager or vn message of len bytes takes the rendezvous
 * (vn: the bulk get) instead, for slow copies. */
static inline int torxm_slow_unstages(torx_ctx_t *ctx, torxm_peer_t *peer, uint64_t len)
{
    return len >= TORXM_SLOW_RZV_MIN && torxm_copies_slow(ctx, peer);
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
 * slow (torx_stage_cost above limits.stage_cost_max: the two cores are far
 * apart, and a staged message pays that twice where the rendezvous copies
 * once), except one message in TORXM_STAGE_PROBE, which measures again. */
static inline int torxm_idle_stages(torx_ctx_t *ctx, torxm_peer_t *peer, uint64_t len)
{
    if (len > ctx->limits.idle_limit || !peer->staged || len < ctx->limits.stage_min ||
        peer->tokens_owed)
        return 0;
    const int replied = peer->rx_seq != peer->rx_seq_at_long;
    peer->rx_seq_at_long = peer->rx_seq;
    if (!replied || !torx_stage_idle(ctx->dev, peer->coord))
        return 0;
    return !torxm_copies_slow(ctx, peer);
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
torx_status_t torxm_co_costart(torx_ctx_t *ctx, torx_cowork_fn fn, void *arg, int *handle);
torx_status_t torxm_co_cojoin(torx_ctx_t *ctx, int handle);
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
    return rc;
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
/* Writes n bytes that belong at off of the message (the part below cap). */
static inline void torxm_rx_put(torxm_rx_t *rx, uint64_t off, const void *src, uint64_t n)
{
    if (rx->buf && off < rx->cap) {
        const uint64_t k = n < rx->cap - off ? n : rx->cap - off;
        memcpy(rx->buf + off, src, k);
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

/* Finishes a receive whose data was all in its first packet. */
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
        if (n)
            memcpy(recv->buf, data, n);
    }
    if (recv->done)
        recv->done(ctx, recv->arg, st, n);
}

#endif /* TORXM_INTERNAL_H */
