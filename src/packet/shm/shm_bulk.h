/* Bulk transfer ("DMA") for the shm device: what its files share.
 *
 * Two paths, chosen once per device by torxp_shm_bulk_setup:
 *
 *  - cma: process_vm_readv/writev copy straight between the two tasks'
 *    address spaces (one copy). Operations complete inside get/put. A long
 *    torx_bulk_get_shared is shared with the owner of the source ("Shared
 *    gets", shm_bulk_shared.c).
 *  - fifo: the data is streamed through the torus FIFOs as device-internal
 *    (TORX_PKT_SYS) deterministic packets, so a sender's packets arrive in
 *    order. The peer must keep polling. A get sends GET_REQ; the peer queues
 *    a reply job and its progress streams GET_DATA back. A put streams
 *    PUT_DATA, the last one flagged LAST; the peer answers PUT_ACK.
 *
 * The files, one concern each:
 *  - shm_bulk.c: the device calls (get, put, test, path), and the checks,
 *    completion and error reports both paths share;
 *  - shm_bulk_fifo.c: the fifo path: operation table, job list, streaming
 *    and the device-internal packets;
 *  - shm_bulk_cma.c: the cma path;
 *  - shm_bulk_shared.c: shared gets (the owner copies part);
 *  - shm_bulk_setup.c: set-up and probing: the start-up probe, Yama's
 *    PR_SET_PTRACER, torx_bulk_cost's timing, and fini.
 *
 * Nothing here blocks: a full FIFO (TORX_NO_ROOM) leaves the work in a job
 * list that torxp_shm_bulk_progress (called from poll) resumes, in order.
 * Bulk packets share the reception FIFO with the sender's other packets, so
 * on the fifo path both tasks must keep polling and consuming what they
 * receive: a bulk packet waits behind one left unconsumed.
 *
 * Threading: bulk calls must run on the thread that receives, because
 * torxp_shm_bulk_test drives reception (torx_pkt_poll) and packet handlers
 * complete operations; so none of this state needs locks.
 *
 * Cookies: a fifo-path operation is registered in a per-device table and
 * packets name it by (generation << 32 | index). A reply is only applied
 * after the table says that index is live with that generation and the
 * operation still carries its magic, so a stale or forged cookie is caught
 * without ever dereferencing an address that came off the wire.
 */
#ifndef TORXP_SHM_BULK_H
#define TORXP_SHM_BULK_H

#include "shm.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* bulk_test calls (and full-FIFO retries) between liveness checks of the
 * peer: a kill(2) and maybe a /proc read are cheap but not free. */
#define BULK_LIVENESS_EVERY 1024u

/* ---- Wire format of device-internal bulk packets ------------------------ */

#define BULK_WIRE_VERSION 1u

enum torxp_shm_bulk_type {
    BULK_GET_REQ = 1,  /* wire + uint64 len; addr = source address at the server */
    BULK_GET_DATA = 2, /* wire + data; addr = offset in the operation */
    BULK_PUT_DATA = 3, /* wire + data; addr = target address at the receiver */
    BULK_PUT_ACK = 4,  /* wire only: every PUT_DATA of the cookie is written */
    BULK_SHARE = 5     /* wire only; cookie = the sender's share seq: help with its get */
};

#define BULK_FLAG_LAST 0x01u /* PUT_DATA: the operation's final packet */

/* The header's 8 software bytes of a bulk packet. */
typedef struct torxp_shm_bulk_sw {
    uint8_t type;    /* enum torxp_shm_bulk_type */
    uint8_t flags;   /* BULK_FLAG_* */
    uint8_t version; /* BULK_WIRE_VERSION */
    uint8_t pad;
    torx_coord_t from; /* sender: the header carries only the destination */
} torxp_shm_bulk_sw_t;
static_assert(sizeof(torxp_shm_bulk_sw_t) == TORX_PKT_SW_BYTES, "bulk sw bytes fill the header's");

/* Start of every bulk payload. */
typedef struct torxp_shm_bulk_wire {
    uint64_t cookie; /* the requester's operation (see bulk_cookie) */
    uint64_t addr;   /* meaning depends on the type (enum torxp_shm_bulk_type) */
} torxp_shm_bulk_wire_t;
static_assert(sizeof(torxp_shm_bulk_wire_t) == 16, "bulk wire header is 16 bytes");

#define BULK_DATA_MAX (TORX_PKT_MAX_PAYLOAD - sizeof(torxp_shm_bulk_wire_t)) /* 224 */

/* ---- Operation and device state ------------------------------------------ */

/* torxp_shm_bulk_t plus what the fifo path and error reports need; it all
 * fits the caller's torx_bulk_t. b.sent counts bytes streamed (put) or
 * received (get). */
typedef struct torxp_shm_bulk_op {
    torxp_shm_bulk_t b;
    int32_t status; /* final status, once b.done */
    uint32_t slot;  /* index in the device's op table (fifo path) */
    uint32_t gen;   /* that entry's generation when registered */
    uint16_t tests; /* bulk_test calls since the last liveness check */
    uint16_t err;   /* errno behind a failed status, 0 if none */
} torxp_shm_bulk_op_t;
static_assert(sizeof(torxp_shm_bulk_op_t) <= sizeof(torx_bulk_t), "bulk op fits torx_bulk_t");

enum torxp_shm_bulk_job_kind {
    JOB_GET_REQ,   /* our get's request is still to be sent */
    JOB_GET_REPLY, /* a peer's get: stream our memory to it */
    JOB_PUT,       /* our put: stream its data */
    JOB_PUT_ACK    /* acknowledge a peer's completed put */
};

typedef struct torxp_shm_bulk_job {
    struct torxp_shm_bulk_job *next;
    enum torxp_shm_bulk_job_kind kind;
    torx_coord_t peer;       /* where the packets go */
    uint32_t stalls;         /* full-FIFO retries since the last liveness check */
    uint64_t cookie;         /* GET_REPLY, PUT_ACK: the requester's cookie */
    uint64_t addr;           /* GET_REPLY: source address in this task */
    uint64_t len, off;       /* GET_REPLY: bytes requested, bytes streamed */
    torxp_shm_bulk_op_t *op; /* GET_REQ, PUT: our operation */
} torxp_shm_bulk_job_t;

typedef struct torxp_shm_bulk_slot {
    torxp_shm_bulk_op_t *op; /* NULL when free */
    uint32_t gen;            /* bumped at every registration; never 0 when live */
    uint32_t next_free;
} torxp_shm_bulk_slot_t;

#define BULK_NO_SLOT UINT32_MAX

/* The device's bulk state (d->serve): pending streaming work, oldest first,
 * and the table of in-flight fifo-path operations. */
struct torxp_shm_serve {
    torxp_shm_bulk_job_t *jobs;
    torxp_shm_bulk_job_t **tail;
    torxp_shm_bulk_slot_t *ops;
    uint32_t nops;
    uint32_t free_op; /* head of the free chain, BULK_NO_SLOT when full */
};

/* ---- Helpers ---------------------------------------------------------------- */

static inline unsigned torxp_shm_bulk_peer_index(const torxp_shm_dev_t *d, torx_coord_t c)
{
    return torx_coord_index(d->base.shape, c);
}

static inline pid_t torxp_shm_bulk_peer_pid(const torxp_shm_dev_t *d, torx_coord_t c)
{
    return d->tasks[torxp_shm_bulk_peer_index(d, c)].pid;
}

static inline bool torxp_shm_bulk_is_done(const torxp_shm_bulk_op_t *op)
{
    /* acquire: pairs with torxp_shm_bulk_complete, so the data and status it
     * published are visible once done is. */
    return __atomic_load_n(&op->b.done, __ATOMIC_ACQUIRE) != 0;
}

/* ---- Across the bulk files ------------------------------------------------- */

/* shm_bulk.c. pid_dead, peer_dead: whether a process, or the task at a
 * coordinate, is gone. report: the message for a failed operation,
 * recorded; returns its status. complete: finishes op with status (err:
 * the errno behind it). A device that cannot go on: torxp_dev_fail; a
 * device-internal packet no torx task would send: torxp_dev_malformed. */
bool torxp_shm_bulk_pid_dead(pid_t pid);
bool torxp_shm_bulk_peer_dead(const torxp_shm_dev_t *d, torx_coord_t c);
torx_status_t torxp_shm_bulk_report(const torxp_shm_dev_t *d, const torxp_shm_bulk_op_t *op);
void torxp_shm_bulk_complete(torxp_shm_dev_t *d, torxp_shm_bulk_op_t *op, torx_status_t status,
                             int err);

/* shm_bulk_fifo.c. registered, unregister: op's entry in the operation
 * table. drop_jobs: removes the jobs that work for op. send: one
 * device-internal packet. start_fifo: the first packets of a registered
 * get or put (queued when the FIFO is full). */
bool torxp_shm_bulk_registered(const struct torxp_shm_serve *s, const torxp_shm_bulk_op_t *op);
void torxp_shm_bulk_unregister(struct torxp_shm_serve *s, torxp_shm_bulk_op_t *op);
void torxp_shm_bulk_drop_jobs(torxp_shm_dev_t *d, const torxp_shm_bulk_op_t *op);
torx_status_t torxp_shm_bulk_send(torxp_shm_dev_t *d, torx_coord_t to,
                                  enum torxp_shm_bulk_type type, unsigned flags, uint64_t cookie,
                                  uint64_t addr, const void *data, size_t len);
torx_status_t torxp_shm_bulk_start_fifo(torxp_shm_dev_t *d, torxp_shm_bulk_op_t *op);

/* shm_bulk_cma.c. cma_copy: copies len bytes between local and remote in
 * pid; 0 or an errno, moved bytes added to *moved. start_cma: a whole get
 * or put by the cma path (a get shared when may_share). */
int torxp_shm_bulk_cma_copy(pid_t pid, bool put, uint64_t local, uint64_t remote, uint64_t len,
                            uint64_t *moved);
torx_status_t torxp_shm_bulk_start_cma(torxp_shm_dev_t *d, torxp_shm_bulk_op_t *op, bool may_share);

/* shm_bulk_shared.c. wanted: whether op is to be shared with its owner.
 * get: the reader's half, 0 or an errno. help: the owner's half, on
 * BULK_SHARE from the task at from. */
bool torxp_shm_share_wanted(const torxp_shm_dev_t *d, const torxp_shm_bulk_op_t *op);
int torxp_shm_share_get(torxp_shm_dev_t *d, torxp_shm_bulk_op_t *op, pid_t pid);
void torxp_shm_share_help(torxp_shm_dev_t *d, torx_coord_t from, uint64_t seq);

#endif /* TORXP_SHM_BULK_H */
