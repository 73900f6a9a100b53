/* What the message-based devices share: the Blue Gene network emulated over
 * a network library that moves messages between tasks (libfabric: ofi/,
 * UCX: ucx/). Prefix: torxp_net_.
 *
 * A device of this kind embeds a torxp_net_t as its first member and fills
 * in its ops (torxp_net_ops_t): how to progress the library, send a
 * device-internal message, and probe a peer. Everything here is written
 * against that, once:
 *
 *   net_torus.c   the torus: per-pair credits, packets put back into send
 *                 order, reception queues with chaos, deposit lines by
 *                 sender fan-out, device-internal messages, the doorbell
 *   net_stage.c   staging areas as one network message per piece
 *   net_bulk.c    the bookkeeping of bulk transfers the peer serves
 *   net_cn.c      the collective network and global interrupt as binomial
 *                 trees of device-internal messages, rounds per channel
 *   net_live.c    the liveness watch: each task watches the next rank over
 *                 a TCP connection of its own, so a host that vanishes is
 *                 named within seconds
 *   net_hybrid.c  hybrid jobs: shm between the tasks of a host, the
 *                 network device between hosts
 *
 * Device-internal messages (credits, the trees, bulk control, probes)
 * share one wire format, torxp_net_sys_t and its body, whatever carries
 * them. */
#ifndef TORXP_NET_H
#define TORXP_NET_H

#include "../pkt_internal.h"

#include <assert.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdint.h>
#include <sys/uio.h>

/* The largest device-internal message: a collective-network packet and its
 * descriptor (net_cn.c). */
#define TORXP_NET_SYS_MAX 384

/* Device-internal message types. */
enum torxp_net_sys_type {
    TORXP_NET_SYS_CREDIT = 1, /* body: u32 packets consumed since the last credit message */
    TORXP_NET_SYS_CN_UP,      /* a subtree's combined collective-network contribution */
    TORXP_NET_SYS_CN_DOWN,    /* a round's result, from the tree's root down */
    TORXP_NET_SYS_GI_UP,      /* a subtree has entered a barrier round */
    TORXP_NET_SYS_GI_DOWN,    /* every task has entered it */
    TORXP_NET_SYS_GET_REQ,    /* bulk get: write this range into my registered buffer */
    TORXP_NET_SYS_GET_DONE,   /* the write is done (or failed) */
    TORXP_NET_SYS_PUT_REQ,    /* bulk put: read my registered buffer into this range */
    TORXP_NET_SYS_PUT_DONE,   /* the read is done (or failed) */
    TORXP_NET_SYS_PING,       /* liveness probe; the receiver ignores it */
    TORXP_NET_SYS_STAGE,      /* staging: arg credits back, or (pad 1) piece `round` voided */
    TORXP_NET_SYS_NTYPES
};

/* 2: CN_UP, CN_DOWN, GI_UP and GI_DOWN name their channel (chan); a
 * version 1 peer, which would take every round for channel 0's, is refused
 * as malformed instead. */
#define TORXP_NET_WIRE_VERSION 2u

/* The start of every device-internal message. */
typedef struct torxp_net_sys {
    uint8_t type;    /* enum torxp_net_sys_type */
    uint8_t version; /* TORXP_NET_WIRE_VERSION */
    union {
        uint16_t chan; /* CN_*, GI_*: the channel, below TORX_CN_CHANNELS (GI_CHANNELS) */
        uint16_t pad;  /* STAGE: 1 for a voided piece; other types: 0 */
    };
    uint32_t arg;   /* meaning per type (credit count, status) */
    uint64_t round; /* collective rounds; bulk cookie */
} torxp_net_sys_t;
static_assert(sizeof(torxp_net_sys_t) == 16, "sys header is 16 bytes");

typedef struct torxp_net torxp_net_t;

/* A staging buffer (net_stage.c): the device owns the memory (msg) and
 * embeds this in its own buffer. */
typedef struct torxp_net_stage_buf {
    struct torxp_net_stage_buf *next;
    unsigned peer;      /* the other end's slot */
    int voided;         /* receive: the sender took the piece back */
    uint32_t len;       /* send: the piece's bytes */
    unsigned char *msg; /* [32-byte header][piece][a packet aboard] */
} torxp_net_stage_buf_t;
#define TORXP_NET_STAGE_HDR 32

/* What arm says before a sleep (torxp_net_wait). */
enum {
    TORXP_NET_ARM_OK,   /* sleep on wait_fd: it becomes readable when an event comes */
    TORXP_NET_ARM_BUSY, /* events came since the last progress: progress again */
    TORXP_NET_ARM_NOFD  /* the descriptor cannot be trusted now: sleep in slices */
};

/* What a network device supplies. Every call but name's is made with the
 * device's lock held (torxp_net_lock). */
typedef struct torxp_net_ops {
    const char *name; /* the device, for messages: "ofi" */
    /* Reads the library's completions and acts on them (torxp_net_on_*),
     * posts the receive buffers given back (n->repost), sends what waits;
     * counts what it read in n->events. */
    void (*progress)(torxp_net_t *n);
    /* Sends a torus packet: hdr (final: chunks and payload length set),
     * then len bytes gathered from iov, to slot, numbered
     * n->tx_order[slot]; the device may take n->consumed[slot] aboard as
     * credits (and zero it). TORX_NO_ROOM when it has no resources now,
     * nothing taken; an error fails the device. */
    torx_status_t (*send_packet)(torxp_net_t *n, unsigned slot, const torx_pkt_hdr_t *hdr,
                                 const struct iovec *iov, int iovcnt, size_t len);
    /* Torus packets the device can take now whatever the credits say. */
    unsigned (*tx_room)(torxp_net_t *n);
    /* Queues a device-internal message of len bytes (header included,
     * at most TORXP_NET_SYS_MAX) to slot, in order behind the earlier ones
     * to it, and tries to send the queue. */
    torx_status_t (*sys_send)(torxp_net_t *n, unsigned slot, const void *msg, size_t len);
    /* Whether device-internal messages wait for the library to take them. */
    int (*sys_pending)(torxp_net_t *n);
    /* A device-internal message of a type this file does not handle (bulk
     * transfers, staging); 0 when the device does not know it either. */
    int (*on_sys)(torxp_net_t *n, unsigned src, const torxp_net_sys_t *m, size_t len);
    /* Probes the task in slot, which this task waits for: a probe the
     * library has not delivered after TORXP_NET_PEER_TIMEOUT_S fails the
     * device with TORX_ERR_PEER naming the task. */
    void (*ping)(torxp_net_t *n, unsigned slot);
    /* Before a sleep on wait_fd: TORXP_NET_ARM_*. */
    int (*arm)(torxp_net_t *n);
    /* Staging (net_stage.c; both NULL for a device without it). stage_send:
     * b->msg's first total bytes to slot as one message; TORX_NO_ROOM
     * when the library takes nothing now. The device gives b back with
     * torxp_net_stage_tx_done, at once or at the send's completion (also
     * when it fails), and may take n->consumed[slot] aboard as credits.
     * stage_rx_done: a received piece's buffer goes back to the library. */
    torx_status_t (*stage_send)(torxp_net_t *n, unsigned slot, torxp_net_stage_buf_t *b,
                                size_t total);
    void (*stage_rx_done)(torxp_net_t *n, torxp_net_stage_buf_t *b);
} torxp_net_ops_t;

/* Reception queues per task, as the shm device's reception FIFOs:
 * deterministic packets from one sender are pinned to one queue; adaptive
 * ones scatter over all of them when TORX_CHAOS is set. */
#define TORXP_NET_RXQ 4
/* Torus packets are numbered per ordered pair, mod 2^24. */
#define TORXP_NET_ORDER_MASK 0xffffffu

/* A receive buffer: the device's posted buffers (torus packets, then
 * device-internal messages), then holders the device copies packets into. */
typedef struct torxp_net_rxbuf {
    uint32_t src;       /* sender's slot */
    uint32_t len;       /* bytes received */
    uint32_t order;     /* torus: its number from the sender */
    uint32_t park_next; /* torus: the next buffer parked for the same sender */
    alignas(16) unsigned char data[TORXP_NET_SYS_MAX]; /* read as headers and structs */
} torxp_net_rxbuf_t;

/* A reception queue: a ring of receive-buffer indices. */
typedef struct torxp_net_rxq {
    uint32_t *ring;
    uint32_t head, tail; /* positions; tail - head entries */
} torxp_net_rxq_t;

#define TORXP_NET_PEER_TIMEOUT_S 10.0

typedef struct torxp_net_cn torxp_net_cn_t;       /* net_cn.c */
typedef struct torxp_net_stage torxp_net_stage_t; /* net_stage.c */
typedef struct torxp_net_live torxp_net_live_t;   /* net_live.c */

struct torxp_net {
    torx_pkt_dev_t base;
    const torxp_net_ops_t *net_ops;
    /* One mutex guards all device state; taken only when the device was
     * opened with TORX_PKT_SHARED_INJECT (shared), else the packet layer's
     * contract gives it one thread at a time. */
    pthread_mutex_t lock;
    int shared;
    int closing; /* close is flushing: a failed send no longer matters */

    /* the job */
    unsigned nslots, self_slot;
    int32_t *slot_rank;  /* per torus slot: its rank, -1 when empty */
    unsigned *rank_slot; /* per rank: its slot */

    /* torus: send side */
    int32_t *credits;            /* per destination slot: packets it still takes from us */
    uint32_t credit_max;         /* the credit window per pair (TORX_FIFO_PACKETS) */
    uint32_t *tx_order;          /* per destination slot: the next torus packet's number */
    int stash_active;            /* a deposit line only partly sent */
    torxp_deposit_stash_t stash; /* its packet */

    /* torus: receive side. rxbufs: nrx posted torus buffers, nsysrx posted
     * device-message buffers, nhold holders (torxp_net_on_torus_copy). */
    torxp_net_rxbuf_t *rxbufs;
    unsigned nrx, nsysrx, nhold;
    uint32_t *hold_free; /* stack of free holder indices */
    unsigned hold_nfree;
    uint32_t *repost; /* posted buffers given back, for the device to post again */
    unsigned nrepost;
    uint32_t rxq_mask; /* the queue rings' size - 1: they take every buffer and holder */
    torxp_net_rxq_t rxq[TORXP_NET_RXQ];
    unsigned rx_queued; /* packets in all the queues */
    unsigned next_q, burst;
    int cur;                /* index of the peeked buffer, -1 when none */
    int polled_since_empty; /* a poll progressed; no peek found the queues empty since */
    uint64_t chaos_rx;      /* xorshift state of the receive side; 0 = chaos off */
    uint32_t *consumed;     /* per source slot: packets consumed, not yet credited */
    uint32_t *rx_order;     /* per source slot: the number of the packet due next */
    uint32_t *parked;       /* per source slot: buffers come early, in order; UINT32_MAX: none */
    unsigned long early;    /* torus packets that came before one sent earlier (parked) */
    uint8_t *heard;         /* per slot: a PING came from it (the start-up connect) */
    unsigned nheard;

    /* waiting */
    int wake_fd;          /* eventfd: torx_pkt_wake */
    int wait_fd;          /* the library's wait descriptor, -1 without */
    unsigned long events; /* what progress read: did a wake bring any? */

    torxp_net_cn_t *cn;       /* net_cn.c */
    torxp_net_live_t *live;   /* net_live.c */
    torxp_net_stage_t *stage; /* net_stage.c; NULL: no staging */
};

static inline torxp_net_t *torxp_net_of(torx_pkt_dev_t *dev)
{
    return (torxp_net_t *)dev; /* base is the first member */
}

static inline void torxp_net_lock(torxp_net_t *n)
{
    if (n->shared)
        pthread_mutex_lock(&n->lock);
}

static inline void torxp_net_unlock(torxp_net_t *n)
{
    if (n->shared)
        pthread_mutex_unlock(&n->lock);
}

/* The coordinate of slot, for messages. */
static inline torx_coord_t torxp_net_coord_of(const torxp_net_t *n, unsigned slot)
{
    const torx_shape_t s = n->base.shape;
    const unsigned plane = (unsigned)s.x * s.y;
    return (torx_coord_t){(uint8_t)(slot % s.x), (uint8_t)(slot / s.x % s.y),
                          (uint8_t)(slot / plane % s.z), (uint8_t)(slot / plane / s.z)};
}

/* ---- net_torus.c: the job ------------------------------------------------------ */

/* The device's first steps at open, on zeroed memory: base (ops, torus,
 * rank), net_ops, the lock (taken when two threads share the device), no
 * descriptors yet, the job's slot count and this task's slot. */
void torxp_net_init(torxp_net_t *n, const torx_pkt_attr_t *attr, const torxp_env_t *env,
                    const torxp_dev_ops_t *ops, const torxp_net_ops_t *net_ops);

/* What every task tells the others at start-up, whatever the device: the
 * first member of the device's record in its address exchange. */
typedef struct torxp_net_job {
    torx_coord_t self;
    torx_shape_t shape;
    uint32_t ntasks;
    uint32_t window; /* TORX_FIFO_PACKETS: the credit window both ends assume */
} torxp_net_job_t;
/* This task's part of it. */
torxp_net_job_t torxp_net_job_mine(const torxp_net_t *n, const torxp_env_t *env);
/* Checks every task's record against rank 0's (torus, task count, credit
 * window, distinct coordinates), so all of them report the same
 * disagreement, and fills in n->slot_rank and n->rank_slot (allocated
 * here). records: the exchange's, stride bytes apart, each starting with a
 * torxp_net_job_t. */
torx_status_t torxp_net_place(torxp_net_t *n, const void *records, size_t stride);
/* The start-up connect: a PING to every task (itself included), then
 * progress until every task's has come and the device's own sends have
 * completed (sends_busy), at most timeout_s; a task not heard from is an
 * error naming it. Over libraries that connect on first use and need both
 * ends to progress (TCP), every pair's connection then exists while
 * everyone still progresses. The caller holds the lock. */
torx_status_t torxp_net_connect_all(torxp_net_t *n, double timeout_s, const char *over,
                                    int (*sends_busy)(torxp_net_t *n));

/* ---- net_torus.c: the torus ---------------------------------------------------- */

/* Set-up after the job's slots: nrx, nsysrx and nhold buffers (above); the
 * posted ones start in n->repost, for the device to post. */
torx_status_t torxp_net_torus_setup(torxp_net_t *n, const torxp_env_t *env, unsigned nrx,
                                    unsigned nsysrx, unsigned nhold);
void torxp_net_torus_fini(torxp_net_t *n);
/* At close, TORX_VERBOSE=2: the packets that came early, the staged pieces
 * sent and how many carried their descriptor. */
void torxp_net_close_report(torxp_net_t *n);
/* The packet-layer ops; the device's ops table points at these. */
torx_status_t torxp_net_inject(torx_pkt_dev_t *dev, const torx_pkt_hdr_t *hdr,
                               const struct iovec *iov, int iovcnt);
int torxp_net_poll(torx_pkt_dev_t *dev);
const torx_pkt_hdr_t *torxp_net_peek(torx_pkt_dev_t *dev);
void torxp_net_consume(torx_pkt_dev_t *dev);
int torxp_net_room(torx_pkt_dev_t *dev, torx_coord_t dest);
torx_status_t torxp_net_wait(torx_pkt_dev_t *dev, int timeout_ms);
void torxp_net_wake(torx_pkt_dev_t *dev);
/* From the device's progress. on_torus: posted buffer i holds a torus
 * packet of len bytes, number order, from slot src; on_torus_copy: the
 * same, copied into a holder from pkt; on_sys: a device-internal message
 * (the caller gives its buffer back); credits_back: k torus credits src
 * gave back aboard a message (none, or a sender outside the job: nothing,
 * the message's own check names it). */
void torxp_net_on_torus(torxp_net_t *n, unsigned i, unsigned src, uint32_t order, size_t len);
void torxp_net_on_torus_copy(torxp_net_t *n, unsigned src, uint32_t order, const void *pkt,
                             size_t len);
void torxp_net_on_sys(torxp_net_t *n, unsigned src, const void *msg, size_t len);
void torxp_net_credits_back(torxp_net_t *n, unsigned src, uint64_t k);
/* Gives receive buffer i back (a holder to its stack, a posted buffer to
 * n->repost). */
void torxp_net_rx_release(torxp_net_t *n, unsigned i);
/* The network's figures (torx_pkt_network): hosts joined by a switch,
 * measured between the project's emulated hosts over ofi. */
void torxp_net_network(const torx_pkt_dev_t *dev, torx_net_t *net);
/* Sends what it can of a partly sent deposit line; whether some is left. */
int torxp_net_stash_drain(torxp_net_t *n);

/* ---- net_bulk.c: the bookkeeping of bulk transfers ------------------------------ */

/* An operation this task started; the device's record embeds it. */
typedef struct torxp_net_bulk_rec {
    struct torxp_net_bulk_rec *next;
    uint64_t cookie;
    unsigned peer; /* slot */
    int is_put, done;
    torx_status_t status;
    size_t len;
    unsigned tests;
} torxp_net_bulk_rec_t;

/* The running operations, newest first. */
typedef struct torxp_net_bulk_list {
    torxp_net_bulk_rec_t *ops;
    uint64_t next_cookie; /* start it at 1 */
} torxp_net_bulk_list_t;

/* torx_bulk_test probes the peer every this many tests of a running one. */
#define TORXP_NET_BULK_PING_EVERY 4096u

/* A get's or put's arguments checked (an error names what is wrong) and op
 * marked started. TORX_AGAIN: finished here (nothing to move, or this
 * task's own memory); TORX_OK: the device starts it toward *slot, then
 * calls torxp_net_bulk_started, or torxp_net_bulk_abandon when it could
 * not. Unlocked. */
torx_status_t torxp_net_bulk_begin(torxp_net_t *n, torx_bulk_t *op, torx_coord_t peer,
                                   uint64_t remote, void *local, size_t len, int is_put,
                                   unsigned *slot);
void torxp_net_bulk_abandon(torx_bulk_t *op);
/* Links r into l for op and gives it its cookie (returned). Locked. */
uint64_t torxp_net_bulk_started(torxp_net_bulk_list_t *l, torx_bulk_t *op, torxp_net_bulk_rec_t *r,
                                unsigned slot, int is_put, size_t len);
torxp_net_bulk_rec_t *torxp_net_bulk_find(torxp_net_bulk_list_t *l, uint64_t cookie);
/* A GET_DONE or PUT_DONE (m) from src: its operation, marked done with
 * TORX_OK (the device sets the status when m->arg reports a failure);
 * NULL when it names none (counted and logged as malformed). Locked. */
torxp_net_bulk_rec_t *torxp_net_bulk_on_done(torxp_net_t *n, torxp_net_bulk_list_t *l, unsigned src,
                                             const torxp_net_sys_t *m);
/* torx_bulk_test: progress, then op's status; release frees the device's
 * record when the operation ends (unlinked first). Takes the lock. */
torx_status_t torxp_net_bulk_test(torxp_net_t *n, torxp_net_bulk_list_t *l, torx_bulk_t *op,
                                  void (*release)(torxp_net_t *n, torxp_net_bulk_rec_t *r));
/* Releases every running operation (close). */
void torxp_net_bulk_fini(torxp_net_t *n, torxp_net_bulk_list_t *l,
                         void (*release)(torxp_net_t *n, torxp_net_bulk_rec_t *r));

/* The packet-layer ops every network device takes from net/, for its
 * torxp_dev_ops_t: torus, collective network, global interrupt, staging
 * and the network's figures. The device adds name, bulk_* and close. */
#define TORXP_NET_DEV_OPS                                                                          \
    .inject = torxp_net_inject, .poll = torxp_net_poll, .peek = torxp_net_peek,                    \
    .consume = torxp_net_consume, .room = torxp_net_room, .wait = torxp_net_wait,                  \
    .wake = torxp_net_wake, .cn_inject = torxp_net_cn_inject, .cn_read = torxp_net_cn_read,        \
    .gi_arm = torxp_net_gi_arm, .gi_poll = torxp_net_gi_poll, .stage_max = torxp_net_stage_max,    \
    .stage_reaches = torxp_net_stage_reaches, .stage_put = torxp_net_stage_put,                    \
    .stage_data = torxp_net_stage_data, .stage_release = torxp_net_stage_release,                  \
    .stage_unput = torxp_net_stage_unput, .stage_idle = torxp_net_stage_idle,                      \
    .stage_idle_max = torxp_net_stage_idle_max, .stage_cost = torxp_net_stage_cost,                \
    .network = torxp_net_network

/* ---- net_stage.c: staging as one message per piece ------------------------------- */

/* Set-up after the torus: window pieces in flight per ordered pair (0:
 * staging off), messages of at most msg_max bytes (header, piece and a
 * packet), and the device's ntx send buffers, tx_stride bytes apart from
 * tx (each embedding a torxp_net_stage_buf_t at tx's offset). */
torx_status_t torxp_net_stage_setup(torxp_net_t *n, unsigned window, size_t msg_max,
                                    torxp_net_stage_buf_t *tx, size_t tx_stride, unsigned ntx);
void torxp_net_stage_fini(torxp_net_t *n);
/* The packet-layer ops; the device's ops table points at these. */
size_t torxp_net_stage_max(const torx_pkt_dev_t *dev);
int torxp_net_stage_reaches(const torx_pkt_dev_t *dev, torx_coord_t dest);
torx_status_t torxp_net_stage_put(torx_pkt_dev_t *dev, torx_coord_t dest, const void *data,
                                  size_t len, torx_stage_ref_t *ref);
const void *torxp_net_stage_data(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref);
void torxp_net_stage_release(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref);
void torxp_net_stage_unput(torx_pkt_dev_t *dev, torx_coord_t dest, torx_stage_ref_t ref);
int torxp_net_stage_idle(torx_pkt_dev_t *dev, torx_coord_t dest);
size_t torxp_net_stage_idle_max(torx_pkt_dev_t *dev, torx_coord_t dest);
unsigned torxp_net_stage_cost(const torx_pkt_dev_t *dev, torx_coord_t dest);
/* net_torus.c's, for a packet to slot: whether a piece waits for it, and
 * then the piece sent with the packet's bytes aboard (*carried = 1) or, when
 * they do not fit, alone (*carried = 0); TORX_NO_ROOM when the library
 * takes neither. Locked. */
int torxp_net_stage_waiting(const torxp_net_t *n, unsigned slot);
torx_status_t torxp_net_stage_carry(torxp_net_t *n, unsigned slot, const void *pkt, size_t bytes,
                                    int *carried);
/* From the device's progress (locked): flush sends every waiting piece
 * alone; tx_done gives a send buffer back; on_rx: a piece of len bytes
 * came into b (b->msg); on_sys: a TORXP_NET_SYS_STAGE message. busy:
 * pieces wait or are in flight (close). counts: pieces sent with a packet
 * aboard, and alone (tests, TORX_VERBOSE). */
void torxp_net_stage_flush(torxp_net_t *n);
void torxp_net_stage_tx_done(torxp_net_t *n, torxp_net_stage_buf_t *b);
void torxp_net_stage_on_rx(torxp_net_t *n, torxp_net_stage_buf_t *b, size_t len);
void torxp_net_stage_on_sys(torxp_net_t *n, unsigned src, const torxp_net_sys_t *m);
int torxp_net_stage_busy(const torxp_net_t *n);
void torxp_net_stage_counts(torxp_net_t *n, unsigned long *carried, unsigned long *alone);

/* ---- net_cn.c: the collective network and global interrupt ---------------------- */

torx_status_t torxp_net_cn_setup(torxp_net_t *n);
void torxp_net_cn_fini(torxp_net_t *n);
/* A CN_UP, CN_DOWN, GI_UP or GI_DOWN message of len bytes from slot src. */
void torxp_net_cn_on_sys(torxp_net_t *n, unsigned src, const torxp_net_sys_t *m, size_t len);
/* The packet-layer ops; ch: a channel below TORX_CN_CHANNELS
 * (TORX_GI_CHANNELS), each with rounds of its own. The device's ops table
 * points at these. */
torx_status_t torxp_net_cn_inject(torx_pkt_dev_t *dev, unsigned ch, torx_cn_op_t op,
                                  torx_cn_type_t type, int is_root, const void *data);
torx_status_t torxp_net_cn_read(torx_pkt_dev_t *dev, unsigned ch, void *result);
torx_status_t torxp_net_gi_arm(torx_pkt_dev_t *dev, unsigned ch);
torx_status_t torxp_net_gi_poll(torx_pkt_dev_t *dev, unsigned ch);

/* ---- net_live.c: the liveness watch ------------------------------------------------ */

/* Where a task's watcher connects. */
typedef struct torxp_net_live_addr {
    uint32_t len;
    unsigned char bytes[28]; /* a struct sockaddr_in or _in6 */
} torxp_net_live_addr_t;
/* listen: before the address exchange, a listening socket on the IP
 * address bind_addr (bind_len bytes; its port is ignored), described in
 * *out for the others; connect: after it, to the watched task's, then the
 * watcher's connection accepted; check: from progress, a heartbeat and a
 * look at both connections; fini: the goodbye, then everything closed. */
torx_status_t torxp_net_live_listen(torxp_net_t *n, const void *bind_addr, size_t bind_len,
                                    torxp_net_live_addr_t *out);
torx_status_t torxp_net_live_connect(torxp_net_t *n, int watched, int watcher,
                                     const torxp_net_live_addr_t *to);
void torxp_net_live_check(torxp_net_t *n);
void torxp_net_live_fini(torxp_net_t *n);

/* ---- net_hybrid.c: shm within a host, the network device between hosts ------------ */

/* A network device, as the hybrid opens it: its names, in the library;
 * its code, in its module (net_module.c). */
typedef struct torxp_net_kind {
    const char *name;         /* "ofi": the module is torx-dev-ofi.so */
    const char *local_var;    /* TORX_OFI_LOCAL: shm (default) or the device within a host */
    const char *per_host_var; /* TORX_OFI_TASKS_PER_HOST: emulated hosts of N tasks (tests) */
} torxp_net_kind_t;

/* torxp_net_hybrid_open (pkt_internal.h) opens kind's device for the job,
 * with a shm device for the tasks of one host when a host runs several. */

/* ---- net_module.c: the network devices as loadable modules ---------------------- */

/* A network device module's own table (torxp_module_t's ops; the loader
 * and the build check are ../module.c's). */
typedef struct torxp_net_module {
    size_t net_size; /* sizeof(torxp_net_t) in the module's build */
    torx_status_t (*open)(const torx_pkt_attr_t *attr, const torxp_env_t *env,
                          torx_pkt_dev_t **out);
    void (*network)(const torx_pkt_dev_t *dev, torx_net_t *net);
} torxp_net_module_t;

/* The module's descriptor, in its source (which includes torx_commit.h). */
#define TORXP_NET_MODULE(name_, open_)                                                             \
    static const torxp_net_module_t net_module_ops = {                                             \
        .net_size = sizeof(torxp_net_t), .open = (open_), .network = torxp_net_network};           \
    TORXP_MODULE(name_, &net_module_ops)

/* kind's module into *out, loaded once per process and never unloaded (the
 * network libraries keep threads and hooks); an error naming the files
 * when it cannot be loaded or comes from another build. */
torx_status_t torxp_net_module_load(const torxp_net_kind_t *kind, const torxp_net_module_t **out);

#endif /* TORXP_NET_H */
