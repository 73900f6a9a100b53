/* The ofi device: the Blue Gene network hardware of the packet layer,
 * emulated over one libfabric reliable-datagram (FI_EP_RDM) endpoint per
 * task. Prefix: torxp_ofi_.
 *
 * Everything travels as a tagged message. The tag says what a message is and
 * who sent it (the wire header of a torus packet carries only the
 * destination):
 *
 *   bits 0..31   the sender's torus slot (torx_coord_index)
 *   bits 32..39  TORXP_OFI_TAG_TORUS: a torus packet, exactly the 16-byte
 *                header and its payload as torx_pkt_inject formats them;
 *                TORXP_OFI_TAG_SYS: a device-internal message (credits,
 *                collective network, global interrupt, bulk control), a
 *                torxp_net_sys_t and its body
 *                TORXP_OFI_TAG_BULK: a bulk transfer's data, where the
 *                device moves them without RMA (ofi_bulk.c)
 *   (untagged)   a staged piece, perhaps with a torus packet aboard; its
 *                header names the sender (ofi_stage.c)
 *   bits 40..63  torus packets: their number in the order the sender sent
 *                packets to this task (mod 2^24). Providers complete
 *                messages out of order at times (net completes a small
 *                message that found no posted buffer when one is posted,
 *                after later ones; tcp;ofi_rxm a large one after small
 *                ones), and a packet aboard a staged piece takes another
 *                queue than one alone, so the receiver puts packets back
 *                in this order before the layer above sees them.
 *
 * The receiver posts separate buffers for each kind, so device traffic
 * never waits behind torus packets the layer above has not consumed yet (on
 * shm the collective network and barrier are separate hardware too).
 *
 * Files: ofi_open.c (provider choice, endpoint, address exchange, ops
 * table), ofi_torus.c (torus packets and device messages as tagged
 * messages, the completion queue, progress), ofi_bulk.c (bulk transfers:
 * RMA, or one tagged message each), ofi_stage.c (staging). What the
 * network devices share is in ../net/ (net.h): credits, send order,
 * reception queues, deposit lines and the doorbell (net_torus.c), the
 * collective network and global interrupt (net_cn.c), the liveness watch
 * (net_live.c) and hybrid jobs (net_hybrid.c).
 *
 * Threading: one mutex (lock) guards all device state and every call into
 * libfabric that reads a completion queue. A completion is read and acted
 * on under the same hold of the lock, so two threads draining the queue can
 * never swap the order of two packets from one sender. The device is opened
 * FI_THREAD_SAFE as well, so a thread sleeping in poll(2) on the queue's
 * wait descriptor needs no lock. The mutex is uncontended except in
 * coprocessor mode, where the injecting and receiving threads share it;
 * a device opened without TORX_PKT_SHARED_INJECT has one thread at a time
 * by the packet layer's contract and takes no lock at all (as the shm
 * device's injection lock), 5-6 lock pairs a message less. */
#ifndef TORXP_OFI_H
#define TORXP_OFI_H

#include "../net/net.h"

#include <assert.h>
#include <pthread.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <stdalign.h>
#include <stdint.h>

#define TORXP_OFI_API FI_VERSION(1, 11)

#define TORXP_OFI_TAG_TORUS 1u
#define TORXP_OFI_TAG_SYS 2u
/* A bulk transfer's data as one tagged message, where the device does not
 * use RMA (ofi_bulk.c); bits 40..63: the operation's cookie (mod 2^24). */
#define TORXP_OFI_TAG_BULK 3u
/* torxp_ofi_tsend_retry's kind for an untagged message (fi_sendmsg). */
#define TORXP_OFI_UNTAGGED 0xffffffffu
#define TORXP_OFI_TAG_KIND_SHIFT 32
#define TORXP_OFI_TAG_ORDER_SHIFT 40
#define TORXP_OFI_ORDER_MASK 0xffffffu
static_assert(TORXP_OFI_ORDER_MASK == TORXP_NET_ORDER_MASK, "a tag holds net/'s packet number");
/* What a posted receive ignores: the sender, and the order of torus packets. */
#define TORXP_OFI_RECV_IGNORE 0xffffff00ffffffffULL
#define TORXP_OFI_TAG_SLOT_MASK 0xffffffffULL

static inline uint64_t torxp_ofi_tag(unsigned kind, unsigned src_slot)
{
    return ((uint64_t)kind << TORXP_OFI_TAG_KIND_SHIFT) | src_slot;
}

/* What a completion's context points at; every context starts with one.
 * The device does not offer the providers FI_CONTEXT mode, so a context
 * (the per-peer inject contexts) may serve several operations at once; the
 * fi_context2 only makes the struct usable should that change. */
enum torxp_ofi_ctx_kind {
    TORXP_OFI_CTX_TX,       /* a torus packet's send buffer (pool entry) */
    TORXP_OFI_CTX_SYS,      /* a device-internal send (sys queue entry) */
    TORXP_OFI_CTX_RX,       /* a posted torus receive buffer */
    TORXP_OFI_CTX_SYSRX,    /* a posted device-internal receive buffer */
    TORXP_OFI_CTX_RMA,      /* an RMA operation served for a peer (ofi_bulk.c) */
    TORXP_OFI_CTX_INJ,      /* a send injected from a stack buffer (one context per peer) */
    TORXP_OFI_CTX_PING,     /* a liveness probe (one per peer, torxp_ofi_ping) */
    TORXP_OFI_CTX_STAGE_TX, /* a staged piece on its way (ofi_stage.c) */
    TORXP_OFI_CTX_STAGE_RX, /* a posted staging buffer (ofi_stage.c) */
    TORXP_OFI_CTX_BULK_RX,  /* a bulk get's buffer, posted for its data (no RMA; ofi_bulk.c) */
    TORXP_OFI_CTX_BULK_TX,  /* a bulk put's data on its way (no RMA) */
    TORXP_OFI_CTX_SERVE_RX  /* a peer's bulk put, posted into this task's memory (no RMA) */
};

typedef struct torxp_ofi_ctx {
    struct fi_context2 fi; /* provider scratch (FI_CONTEXT2 mode) */
    int kind;              /* enum torxp_ofi_ctx_kind */
    unsigned peer;         /* the other end's torus slot */
} torxp_ofi_ctx_t;

/* A torus packet's send buffer, kept until the provider reports the send
 * complete (tcp;ofi_rxm injects only 64 bytes inline). */
typedef struct torxp_ofi_txbuf {
    torxp_ofi_ctx_t ctx;
    int next_free; /* free list; -1 at the end */
    unsigned char pkt[TORX_PKT_MAX_BYTES];
} torxp_ofi_txbuf_t;

/* A device-internal message on its way out: queued in order, sent when the
 * provider takes it, freed at its completion. */
typedef struct torxp_ofi_sysmsg {
    torxp_ofi_ctx_t ctx;
    struct torxp_ofi_sysmsg *next;
    uint32_t len;
    alignas(16) unsigned char data[TORXP_NET_SYS_MAX]; /* read as headers and structs */
} torxp_ofi_sysmsg_t;

typedef struct torxp_ofi_bulk torxp_ofi_bulk_t;   /* ofi_bulk.c */
typedef struct torxp_ofi_stage torxp_ofi_stage_t; /* ofi_stage.c */

typedef struct torxp_ofi_dev {
    torxp_net_t net; /* base, lock, the job's slots, trees, liveness (net.h) */

    /* libfabric objects */
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_ep *ep;
    struct fid_av *av;
    /* One completion queue for sends and receives: every fi_cq_read runs
     * the provider's progress (over net and tcp;ofi_rxm a system call), so
     * a poll that reads one queue progresses once, and a send's completion
     * costs no read of its own. */
    struct fid_cq *cq;  /* its wait descriptor (FI_WAIT_FD) is net.wait_fd */
    size_t inject_size; /* tx_attr->inject_size, capped at a packet */
    /* The provider carries 8 bytes of remote CQ data: torus packets and
     * staged pieces take the credits owed to their destination aboard, and a
     * bulk get's write tells the initiator itself that it is done. */
    int cq_data;
    /* Bulk transfers by RMA; else their data travel as one tagged message
     * each (TORX_OFI_BULK=msg, or a provider without RMA). */
    int rma;
    const char *prov; /* provider name, from info */

    fi_addr_t *slot_addr; /* per slot: the AV address, FI_ADDR_NOTAVAIL when empty */

    /* torus: send side */
    torxp_ofi_txbuf_t *txbufs;
    int tx_free; /* head of the free list, -1 when the pool is empty */
    unsigned tx_nfree, tx_pool;
    /* torus: receive side: the contexts of net.rxbufs' posted buffers */
    torxp_ofi_ctx_t *rx_ctx;

    /* device-internal sends, oldest first */
    torxp_ofi_sysmsg_t *sys_head, **sys_tail;
    unsigned sys_inflight;
    /* Small sends go out FI_INJECT (the provider copies them at once) but
     * with a completion, counted here, so close can wait until every packet
     * has left: a provider that progresses manually may still hold it. */
    torxp_ofi_ctx_t *inj_ctx; /* per destination slot */
    unsigned long inj_inflight;

    torxp_ofi_bulk_t *bulk;
    torxp_ofi_stage_t *stage; /* staging buffers (ofi_stage.c; net.stage the rest) */
    struct torxp_ofi_ping {
        torxp_ofi_ctx_t ctx;
        torxp_net_sys_t msg;
        double sent_at;       /* monotonic seconds; 0 when none is in flight */
        double refused_since; /* the provider refuses to send it (-FI_EAGAIN) since; or 0 */
    } * pings;                /* per slot */
} torxp_ofi_dev_t;

static inline torxp_ofi_dev_t *torxp_ofi_of(torx_pkt_dev_t *dev)
{
    return (torxp_ofi_dev_t *)dev; /* base is the first member */
}

static inline void torxp_ofi_lock(torxp_ofi_dev_t *d)
{
    torxp_net_lock(&d->net);
}

static inline void torxp_ofi_unlock(torxp_ofi_dev_t *d)
{
    torxp_net_unlock(&d->net);
}

/* ofi_open.c: why the provider described by list (asked for with nothing
 * but its name) cannot carry the device on iface ("" for any): the first of
 * torx's needs it lacks, in words for an error message. */
const char *torxp_ofi_missing_need(const struct fi_info *list, const char *iface, int need_rma);

/* ofi_torus.c */
torx_status_t torxp_ofi_torus_setup(torxp_ofi_dev_t *d, const torxp_env_t *env, long tx_pool);
void torxp_ofi_torus_fini(torxp_ofi_dev_t *d);
/* Progresses until every send has completed, at most timeout_s. */
void torxp_ofi_flush(torxp_ofi_dev_t *d, double timeout_s);
/* net.h's ops: send_packet, tx_room, sys_pending, on_sys (bulk and staging
 * messages), arm (fi_trywait). */
torx_status_t torxp_ofi_send_packet(torxp_net_t *n, unsigned slot, const torx_pkt_hdr_t *hdr,
                                    const struct iovec *iov, int iovcnt, size_t len);
unsigned torxp_ofi_tx_room(torxp_net_t *n);
int torxp_ofi_sys_pending(torxp_net_t *n);
int torxp_ofi_on_sys(torxp_net_t *n, unsigned src, const torxp_net_sys_t *m, size_t len);
int torxp_ofi_arm(torxp_net_t *n);
/* Reads the completion queue and acts on what it holds, sends queued
 * device messages; the caller holds the lock. */
void torxp_ofi_progress(torxp_ofi_dev_t *d);
/* Queues a device-internal message of len bytes (header included) to slot
 * and tries to send the queue; the caller holds the lock. */
torx_status_t torxp_ofi_sys_send(torxp_ofi_dev_t *d, unsigned slot, const void *msg, size_t len);
/* Probes the task in slot (net.h's ping op). The caller holds the lock. */
void torxp_ofi_ping(torxp_ofi_dev_t *d, unsigned slot);

/* ofi_stage.c: net/net_stage.c's pieces as untagged messages. Set-up after
 * the torus (stage_bytes: TORX_STAGE_BYTES, 0 turns it off); net.h's
 * stage_send and stage_rx_done; the completions of a piece's send and
 * receive. Locked but setup and fini. */
torx_status_t torxp_ofi_stage_setup(torxp_ofi_dev_t *d, long stage_bytes);
void torxp_ofi_stage_fini(torxp_ofi_dev_t *d);
torx_status_t torxp_ofi_stage_send(torxp_net_t *n, unsigned slot, torxp_net_stage_buf_t *b,
                                   size_t total);
void torxp_ofi_stage_rx_done(torxp_net_t *n, torxp_net_stage_buf_t *b);
void torxp_ofi_stage_on_tx(torxp_ofi_dev_t *d, torxp_ofi_ctx_t *ctx, int err);
void torxp_ofi_stage_on_rx(torxp_ofi_dev_t *d, torxp_ofi_ctx_t *ctx, size_t len, uint64_t credits);
/* Receive buffers for staged pieces, at most: they share the provider's
 * receive queue (tcp;ofi_rxm: 1024 entries) with the torus and device
 * buffers. A holder per buffer, and one for the packet being read, keep
 * every carried packet (see ofi_stage.c). */
#define TORXP_OFI_STAGE_RX_MAX 256u

/* How long a post retries a provider that is busy (connecting, out of
 * resources) before it gives up: torxp_ofi_tsend_retry, ofi_bulk.c. */
#define TORXP_OFI_EAGAIN_SPIN_S 1.0
/* ofi_torus.c: one tagged send from buf (kept until ctx's completion; a
 * send of at most inject_size bytes goes inline, and buf and ctx are free
 * at once), with
 * the progress-and-retry of a provider that is briefly busy; -FI_EAGAIN
 * when it stays busy. Locked. */
ssize_t torxp_ofi_tsend_retry(torxp_ofi_dev_t *d, const void *buf, size_t len, unsigned slot,
                              unsigned kind, torxp_ofi_ctx_t *ctx);
/* A fatal libfabric error: names the call, the peer if any, and the
 * provider's words. */
torx_status_t torxp_ofi_fi_fail(torxp_ofi_dev_t *d, const char *call, int peer_slot, int err);

/* ofi_bulk.c */
torx_status_t torxp_ofi_bulk_setup(torxp_ofi_dev_t *d);
void torxp_ofi_bulk_fini(torxp_ofi_dev_t *d);
void torxp_ofi_bulk_on_sys(torxp_ofi_dev_t *d, unsigned src, const torxp_net_sys_t *m, size_t len);
/* An RMA operation served for a peer completed (err: 0 or a positive
 * libfabric error number). */
void torxp_ofi_bulk_on_rma(torxp_ofi_dev_t *d, torxp_ofi_ctx_t *ctx, int err);
/* Without RMA: a bulk transfer's data message was received (BULK_RX,
 * SERVE_RX) or sent (BULK_TX); err 0 or a positive libfabric error. */
void torxp_ofi_bulk_on_msg(torxp_ofi_dev_t *d, torxp_ofi_ctx_t *ctx, int err);
/* A write that carried remote CQ data landed here: the bulk get with that
 * cookie is done (see ofi_bulk.c). */
void torxp_ofi_bulk_on_write_data(torxp_ofi_dev_t *d, uint64_t cookie);
/* Posts the RMA operations the provider refused for want of resources. */
void torxp_ofi_bulk_progress(torxp_ofi_dev_t *d);
/* flags: none apply here (TORXP_BULK_F_SHARE is the shm device's). */
torx_status_t torxp_ofi_bulk_get(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer,
                                 const void *remote, void *local, size_t len, unsigned flags);
torx_status_t torxp_ofi_bulk_put(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer,
                                 void *remote, const void *local, size_t len);
torx_status_t torxp_ofi_bulk_test(torx_pkt_dev_t *dev, torx_bulk_t *op);
const char *torxp_ofi_bulk_path(const torx_pkt_dev_t *dev);

#endif /* TORXP_OFI_H */
