/* The ucx device: the Blue Gene network hardware of the packet layer,
 * emulated over UCX's UCP layer (one context and worker per task, an
 * endpoint to every task). Prefix: torxp_ucx_. Everything that is not a
 * call into UCX is net/'s (net.h): credits, send order, reception queues,
 * deposit lines, the doorbell's loop, the collective network and global
 * interrupt, the liveness watch and hybrid jobs.
 *
 * Messages are UCP active messages, two kinds by AM id:
 *
 *   TORXP_UCX_AM_TORUS  a torus packet: the 16-byte header and payload as
 *                       torx_pkt_inject formats them; the AM header says
 *                       who sent it, its number, and credits given back
 *   TORXP_UCX_AM_SYS    a device-internal message (net.h's wire format);
 *                       the AM header names the sender
 *   TORXP_UCX_AM_STAGE  a staged piece and perhaps its descriptor packet
 *                       (net/net_stage.c's message); the AM header gives
 *                       back torus credits, as a packet's does
 *   TORXP_UCX_AM_BULK, _BULK_PUT  a bulk transfer's data (ucx_bulk.c), which
 *                       UCX sends eagerly or by its own rendezvous
 *
 * Active messages rather than tagged sends: the receiver learns of a
 * message in a callback from ucp_worker_progress with the data in place,
 * and copies a packet once into net/'s holders; tagged receives would need
 * buffers posted ahead, with UCX matching each message against them. Both
 * kinds are small (at most TORXP_NET_SYS_MAX bytes), so UCX sends them
 * eagerly on one lane per endpoint, in order; net/ puts torus packets back
 * in send order whatever the library does.
 *
 * Files: ucx_open.c (context, worker, transports, address exchange,
 * endpoints, ops table, close), ucx_torus.c (sends, receive callbacks,
 * progress, sleeping, probes, staged pieces), ucx_bulk.c (bulk transfers,
 * their data as one active message each).
 *
 * Threading: net/'s lock guards the worker, which is created
 * UCS_THREAD_MODE_SERIALIZED when two threads share the device
 * (TORX_PKT_SHARED_INJECT), else UCS_THREAD_MODE_SINGLE. */
#ifndef TORXP_UCX_H
#define TORXP_UCX_H

#include "../net/net.h"

#include <ucp/api/ucp.h>

enum {
    TORXP_UCX_AM_TORUS = 1,
    TORXP_UCX_AM_SYS = 2,
    TORXP_UCX_AM_STAGE = 3,
    TORXP_UCX_AM_BULK = 4,     /* a bulk get's data, to the initiator (ucx_bulk.c) */
    TORXP_UCX_AM_BULK_PUT = 5, /* a bulk put's data, to the peer */
};

/* The AM header of every message. */
typedef struct torxp_ucx_hdr {
    uint32_t src;     /* the sender's torus slot */
    uint32_t order;   /* torus: its number from the sender (net.h) */
    uint32_t credits; /* torus: credits the sender gives back aboard */
    uint32_t pad;
} torxp_ucx_hdr_t;

/* A message on its way out: header and body, one contiguous message,
 * stay put until UCX completes the send (UCX 1.13 copies neither before).
 * The header travels at the head of the AM's data, not as UCP's AM
 * header, which UCP gathers as a piece of its own (over tcp, 60
 * instructions more per packet, measured by callgrind). */
typedef struct torxp_ucx_txbuf {
    struct torxp_ucx_dev *dev;
    struct torxp_ucx_txbuf *next_free; /* pool: torus packets; NULL for a device message */
    unsigned peer;
    int pooled; /* from the pool, else malloc'd (a device message) */
    alignas(16) torxp_ucx_hdr_t hdr;
    unsigned char data[TORXP_NET_SYS_MAX]; /* follows hdr with no gap (static_assert) */
} torxp_ucx_txbuf_t;
static_assert(offsetof(torxp_ucx_txbuf_t, data) ==
                  offsetof(torxp_ucx_txbuf_t, hdr) + sizeof(torxp_ucx_hdr_t),
              "a message's header and data are one buffer");

typedef struct torxp_ucx_bulk torxp_ucx_bulk_t; /* ucx_bulk.c */

/* A staged piece's send buffer (net/net_stage.c fills msg). */
typedef struct torxp_ucx_stage_tx {
    struct torxp_ucx_dev *dev;
    torxp_ucx_hdr_t hdr;
    torxp_net_stage_buf_t net;
    alignas(16) unsigned char msg[TORXP_NET_STAGE_HDR + 16384 + TORX_PKT_MAX_BYTES];
} torxp_ucx_stage_tx_t;

/* The argument of an endpoint's error handler: which peer failed. */
typedef struct torxp_ucx_peer {
    struct torxp_ucx_dev *dev;
    unsigned slot;
    ucs_status_t gone; /* the endpoint's error, UCS_OK while it works */
} torxp_ucx_peer_t;

typedef struct torxp_ucx_dev {
    torxp_net_t net; /* base, lock, the job's slots, torus, trees, liveness (net.h) */

    ucp_context_h context;
    ucp_worker_h worker;
    ucp_ep_h *eps;           /* per slot; NULL when empty */
    torxp_ucx_peer_t *peers; /* per slot: the error handler's argument */
    char tls[128];           /* the transports asked for (TORX_UCX_TLS, UCX_TLS), for messages */

    /* sends */
    torxp_ucx_txbuf_t *txbufs; /* the torus packets' pool */
    torxp_ucx_txbuf_t *tx_free;
    unsigned tx_nfree, tx_pool;
    unsigned long inflight; /* sends UCX has not completed */

    /* liveness probes, per slot: when the one in flight was sent (0: none) */
    double *ping_sent;

    torxp_ucx_stage_tx_t *stage_tx;           /* staging's send buffers */
    struct torxp_ucx_stage_rx *stage_rx_free; /* received pieces' records, for reuse */

    torxp_ucx_bulk_t *bulk;
} torxp_ucx_dev_t;

static inline torxp_ucx_dev_t *torxp_ucx_of(torxp_net_t *n)
{
    return (torxp_ucx_dev_t *)n; /* net is the first member */
}

/* Registers cb for AM id (flags: UCP_AM_FLAG_*), with d as its argument. */
torx_status_t torxp_ucx_am_handler(torxp_ucx_dev_t *d, unsigned id, ucp_am_recv_callback_t cb,
                                   uint32_t flags);

/* A fatal UCX error: names the call, the peer if any (slot, or -1), and
 * UCX's words. */
torx_status_t torxp_ucx_fail(torxp_ucx_dev_t *d, const char *call, int peer_slot,
                             ucs_status_t status);

/* ucx_torus.c */
torx_status_t torxp_ucx_torus_setup(torxp_ucx_dev_t *d, const torxp_env_t *env);
void torxp_ucx_torus_fini(torxp_ucx_dev_t *d);
/* Progresses until every send has completed, at most timeout_s. Locked. */
void torxp_ucx_flush(torxp_ucx_dev_t *d, double timeout_s);
extern const torxp_net_ops_t torxp_ucx_net_ops;
/* Sends that UCX has not completed (torxp_net_connect_all). */
int torxp_ucx_sends_busy(torxp_net_t *n);

/* ucx_torus.c: staging (net/net_stage.c) over AM id STAGE: set-up after
 * the torus (stage_bytes: TORX_STAGE_BYTES, 0 turns it off), and fini,
 * before the worker goes (received pieces hold UCX's data). */
torx_status_t torxp_ucx_stage_setup(torxp_ucx_dev_t *d, long stage_bytes);
void torxp_ucx_stage_fini(torxp_ucx_dev_t *d);

/* ucx_bulk.c */
torx_status_t torxp_ucx_bulk_setup(torxp_ucx_dev_t *d);
void torxp_ucx_bulk_fini(torxp_ucx_dev_t *d);
/* GET_REQ, GET_DONE, PUT_REQ, PUT_DONE from src. */
void torxp_ucx_bulk_on_sys(torxp_ucx_dev_t *d, unsigned src, const torxp_net_sys_t *m, size_t len);
torx_status_t torxp_ucx_bulk_get(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer,
                                 const void *remote, void *local, size_t len, unsigned flags);
torx_status_t torxp_ucx_bulk_put(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer,
                                 void *remote, const void *local, size_t len);
torx_status_t torxp_ucx_bulk_test(torx_pkt_dev_t *dev, torx_bulk_t *op);
const char *torxp_ucx_bulk_path(const torx_pkt_dev_t *dev);

#endif /* TORXP_UCX_H */
