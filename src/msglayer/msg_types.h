/* Message-layer types: messages, receive records, peers, control packets,
 * cookies and the context (struct torx_ctx). Prefix: torxm_. */
#ifndef TORXM_TYPES_H
#define TORXM_TYPES_H

#include <torx/msg.h>

#include "msg_wire.h"
#include "packet/pkt_internal.h"

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

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
    uint8_t pooled;        /* 1: from the free list (ctx->rx_free); 0: not */
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

/* A copy of an adaptive packet that came before its turn (see Ordering in msg_wire.h). */
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

/* Per-peer state: both directions. Made on first contact (torxm_peer,
 * msg_internal.h), in pages of TORXM_PEER_PAGE ranks: a task of a large job
 * keeps records only for the peers it talks to. 96 bytes, so that a page
 * is 6 KiB. */
typedef struct torxm_peer {
    /* send */
    torxm_msg_t *head, **tail; /* pending queue; tail valid when head != NULL */
    struct torxm_peer *busy_next;
    int32_t rank;         /* the peer's */
    uint32_t tx_seq;      /* messages started to this peer */
    uint32_t tokens_owed; /* adaptive messages not yet matched there */
    uint32_t awaiting;    /* rendezvous sends whose scout is out (ctx->awaiting's share) */
    torx_coord_t coord;
    uint8_t busy;   /* on ctx->busy */
    uint8_t staged; /* the staging area reaches this peer (torx_stage_reaches) */
    /* another task of this host that the staging area reaches and whose
     * bulk gets the device measured (torx_bulk_cost): the pair measures its
     * ways (rzv_way.c), and their clocks are one */
    uint8_t way_host;
    /* messages kept off the staging area for slow copies (msg_path.c),
     * and rx_seq when the last message torxm_idle_stages weighed left */
    uint8_t stage_probe;
    /* The staged rendezvous is a pair's choice: while this task's own
     * scouts to peer go without the staging offer for slow copies, it
     * declines peer's offers too (but probes), for the next rzv_hold
     * scouts from peer. A window where one direction stages and the other
     * takes bulk gets runs slower than either alone (msg_path.c). */
    uint16_t rzv_hold;
    uint32_t rx_seq_at_long;
    /* the pair's way for long rendezvous data, kept by its lower rank
     * (rzv_way.c); NULL until the first such transfer */
    struct torxm_rzv_way *way;
    /* receive */
    uint32_t rx_seq;      /* messages matched from this peer */
    torxm_rx_t *eager;    /* the eager or staged message being reassembled (a pooled
                           * record: one at a time per source), or NULL */
    torxm_rx_t *adapt;    /* adaptive messages being reassembled */
    torxm_early_t *early; /* adaptive packets parked before their turn */
} torxm_peer_t;
static_assert(sizeof(torxm_peer_t) <= 96, "a peer record stays small: pages of 64 are 6 KiB");

/* Peers come in pages of this many ranks (ctx->peer_pages). */
#define TORXM_PEER_PAGE_SHIFT 6
#define TORXM_PEER_PAGE (1 << TORXM_PEER_PAGE_SHIFT)

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

typedef struct torxm_handler {
    torx_handler_fn fn;
    void *arg;
} torxm_handler_t;

struct torx_ctx {
    torx_pkt_dev_t *dev;
    int rank, size;
    torx_coord_t self;
    int charges; /* dev charges work to the task's core (torxm_charges_start) */
    /* Peers by rank, made on first contact (torxm_peer): page k holds ranks
     * k * TORXM_PEER_PAGE and on (fewer in the last page), NULL until one
     * of them is touched. 8 bytes per 64 ranks. */
    torxm_peer_t **peer_pages;
    /* Bytes the receive paths copied into user buffers (torxm_rx_put,
     * torxm_recv_now): counted always, one add; charged to the task's core
     * after each packet where the device charges (msg.c's charged_rx). */
    uint64_t copied;

    /* Reception dispatch, built at init from torxm_protocols (where the
     * device charges, msg.c's charged_rx wraps each: torxm_charges_start). */
    struct {
        torxm_rx_fn fn;
        uint8_t proto;
    } rx[TORXM_PKT_NTYPES];

    /* What torxm_match calls: the registered handlers, or where the device
     * charges matches (ctx->charges) msg.c's charged_handler with the
     * registered one in charged[] as its argument. */
    torxm_handler_t handlers[TORX_MSG_HANDLERS];
    uint64_t warned_handlers; /* bit per id: an unregistered-id warning printed */

    torx_limits_t limits;
    char tuning_file[512];               /* the tuning file that set boundaries (msg.c), or "" */
    uint32_t stage_chunk;                /* bytes per staged piece; 0 when staging is off */
    torxm_peer_t *busy;                  /* peers with a non-empty queue */
    torxm_peer_t *busy_tail;             /* the last of them (valid when busy != NULL) */
    uint8_t fifo_full;                   /* an injection found no room (torxm_fifo_was_full) */
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
    /* torx_wait's flag while it waits: an advance stops taking packets once
     * a handler has set it (msg.c, torx_advance) */
    volatile int *wait_flag;
    int (*advance_hook)(void *arg); /* torx_advance_hook */
    void *advance_hook_arg;
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
    torx_data_stats_t data_stats; /* rendezvous and vn data by path (proto_rzv.c) */
    uint64_t *bytes_to; /* TORX_STATS, TORX_STATS_FILE: data bytes sent to each rank; else NULL */
    int stats_fd;       /* TORX_STATS_FILE: where this task appends its row; else -1 */

    torx_mode_t mode;
    int tasks_per_node;
    torx_map_t map;
    torx_boot_t *boot;
    torx_boot_t own_boot; /* when torx_init started PMI itself */
    int owns_boot;
    torxm_handler_t charged[TORX_MSG_HANDLERS]; /* ctx->charges: the registered handlers */
    torxm_rx_fn charged_rx[TORXM_PKT_NTYPES];   /* ctx->charges: the protocols' receive functions */
};

#endif /* TORXM_TYPES_H */
