/* torx packet layer: a thin, stateless interface to emulated Blue Gene-style
 * network hardware. The device owns every FIFO and all state; this layer
 * formats, injects, peeks and reads.
 *
 * Four "hardware" units per device:
 *  - torus:       32..256-byte packets, deterministic (FIFO-pinned, in order
 *                 per sender/receiver pair) or adaptive (may be reordered),
 *                 optional deposit bit (line broadcast);
 *  - collective network (torx_cn_*): 256-byte combine/broadcast over all
 *                 tasks of the job, integer ALU;
 *  - global interrupt (torx_gi_*): a hardware-style barrier;
 *  - bulk transfer (torx_bulk_*): remote get/put of a memory region.
 *
 * Every call is nonblocking. A full FIFO gives TORX_NO_ROOM and takes
 * nothing; a packet accepted with TORX_OK is delivered exactly once.
 *
 * Threading: one thread at a time per device for each of inject, receive,
 * collective and bulk operations; inject and receive may run concurrently in
 * two threads (the coprocessor-mode split). Bulk operations belong to the
 * receiving thread (they drive reception). The device injects packets of its
 * own from the receiving thread (bulk transfers over the FIFOs), so a task
 * that injects from one thread and receives in another opens the device with
 * TORX_PKT_SHARED_INJECT.
 *
 * Environment (read by torx_pkt_open):
 *   TORX_DEVICE        shm (default) | ofi
 *   TORX_CHAOS         seed > 0: adaptive packets really reorder; 0/unset: off
 *   TORX_FIFO_PACKETS  packets per reception FIFO, power of two, 16..65536 (128)
 *   TORX_BULK          auto (default) | cma | fifo: force the bulk path
 *   TORX_VERBOSE       0..3, log start-up choices to stderr
 */
#ifndef TORX_PACKET_H
#define TORX_PACKET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <torx/boot.h>
#include <torx/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Coordinates and shape -------------------------------------------- */

/* A task's place: node (x,y,z) on the torus, t the task within the node. */
typedef struct torx_coord {
    uint8_t x, y, z, t;
} torx_coord_t;

/* Torus extent per dimension; t is the number of tasks per node. */
typedef struct torx_shape {
    uint8_t x, y, z, t;
} torx_shape_t;

#define TORX_DIM_X 0
#define TORX_DIM_Y 1
#define TORX_DIM_Z 2

/* Task slots in a shape: x*y*z*t. */
static inline unsigned torx_shape_slots(torx_shape_t s)
{
    return (unsigned)s.x * s.y * s.z * s.t;
}

/* Linear index of a coordinate, x varying fastest, then y, z, t. */
static inline unsigned torx_coord_index(torx_shape_t s, torx_coord_t c)
{
    return ((unsigned)c.t * s.z + c.z) * ((unsigned)s.x * s.y) + (unsigned)c.y * s.x + c.x;
}

static inline int torx_coord_in_shape(torx_shape_t s, torx_coord_t c)
{
    return c.x < s.x && c.y < s.y && c.z < s.z && c.t < s.t;
}

static inline int torx_coord_equal(torx_coord_t a, torx_coord_t b)
{
    return a.x == b.x && a.y == b.y && a.z == b.z && a.t == b.t;
}

/* ---- Torus packets ----------------------------------------------------- */

#define TORX_PKT_CHUNK 32
#define TORX_PKT_MAX_BYTES 256
#define TORX_PKT_HDR_BYTES 16
#define TORX_PKT_MAX_PAYLOAD (TORX_PKT_MAX_BYTES - TORX_PKT_HDR_BYTES) /* 240 */
#define TORX_PKT_SW_BYTES 8

/* Bits of torx_pkt_hdr_t.ctl */
#define TORX_PKT_ADAPTIVE 0x01u    /* adaptive routing: may be reordered */
#define TORX_PKT_DEPOSIT 0x02u     /* deposit bit: copy to every node on the line */
#define TORX_PKT_DEPOSIT_NEG 0x04u /* deposit direction: toward lower coordinates */
#define TORX_PKT_DEPOSIT_DIM_SHIFT 3
#define TORX_PKT_DEPOSIT_DIM_MASK 0x18u /* deposit dimension: TORX_DIM_X/Y/Z */
#define TORX_PKT_SYS 0x80u              /* device-internal; never seen by users */

/* The 16-byte packet header, as it sits in a FIFO. The payload follows it
 * contiguously (torx_pkt_payload). */
typedef struct torx_pkt_hdr {
    torx_coord_t dest;   /* final destination */
    uint8_t ctl;         /* TORX_PKT_* routing bits */
    uint8_t chunks;      /* packet size in 32-byte chunks, 1..8 (set by inject) */
    uint8_t payload_len; /* payload bytes, 0..240 (set by inject) */
    uint8_t dev_tag;     /* owned by the device (FIFO bookkeeping) */
    uint8_t sw[TORX_PKT_SW_BYTES]; /* software header bytes for the layer above */
} torx_pkt_hdr_t;

_Static_assert(sizeof(torx_pkt_hdr_t) == TORX_PKT_HDR_BYTES, "torus header is 16 bytes");

/* Fills a header for a deterministic packet to dest, with zeroed sw bytes. */
static inline void torx_pkt_hdr_init(torx_pkt_hdr_t *h, torx_coord_t dest, unsigned ctl)
{
    *h = (torx_pkt_hdr_t){.dest = dest, .ctl = (uint8_t)ctl};
}

/* Sets the deposit bit: the packet is copied to every node from the sender
 * to dest along dim, stepping in direction dir (+1 or -1) with wraparound.
 * dest must differ from the sender only in dim. Deposit packets are
 * deterministic. */
static inline void torx_pkt_hdr_set_deposit(torx_pkt_hdr_t *h, int dim, int dir)
{
    h->ctl = (uint8_t)((h->ctl & ~(TORX_PKT_ADAPTIVE | TORX_PKT_DEPOSIT_NEG |
                                   TORX_PKT_DEPOSIT_DIM_MASK)) |
                       TORX_PKT_DEPOSIT | (dir < 0 ? TORX_PKT_DEPOSIT_NEG : 0) |
                       ((unsigned)dim << TORX_PKT_DEPOSIT_DIM_SHIFT));
}

static inline int torx_pkt_hdr_deposit_dim(const torx_pkt_hdr_t *h)
{
    return (h->ctl & TORX_PKT_DEPOSIT_DIM_MASK) >> TORX_PKT_DEPOSIT_DIM_SHIFT;
}

/* Chunks needed for a payload of len bytes (len <= 240). */
static inline unsigned torx_pkt_chunks_for(size_t len)
{
    return (unsigned)((TORX_PKT_HDR_BYTES + len + TORX_PKT_CHUNK - 1) / TORX_PKT_CHUNK);
}

static inline const void *torx_pkt_payload(const torx_pkt_hdr_t *h)
{
    return h + 1;
}

/* ---- Device ------------------------------------------------------------ */

typedef struct torx_pkt_dev torx_pkt_dev_t;

/* torx_pkt_attr_t.flags */
/* Two threads inject: the application's and the device's own (bulk replies
 * from the receiving thread). Injection is then serialised by a lock, which
 * stays uncontended unless both really inject at once; without this flag
 * injection takes no lock at all. */
#define TORX_PKT_SHARED_INJECT 0x1u

typedef struct torx_pkt_attr {
    torx_boot_t *boot;  /* job bootstrap (rank, size, allgather, barrier) */
    torx_shape_t shape; /* all tasks must pass the same shape */
    torx_coord_t self;  /* this task's coordinate, unique in the job */
    const char *device; /* NULL: $TORX_DEVICE, default "shm" */
    unsigned flags;     /* TORX_PKT_* attribute flags above; 0 for none */
} torx_pkt_attr_t;

/* Collective over the job: opens the device, creates or attaches the job's
 * state, and returns once every task has attached. Checks the environment
 * (TORX_* values named in the error), the shape (x*y*z*t >= job size) and the
 * coordinates (in range, unique). */
torx_status_t torx_pkt_open(const torx_pkt_attr_t *attr, torx_pkt_dev_t **dev);

/* Releases the device. Not collective; pending bulk operations are abandoned. */
void torx_pkt_close(torx_pkt_dev_t *dev);

/* Device name ("shm") and this task's coordinate. */
const char *torx_pkt_device_name(const torx_pkt_dev_t *dev);
torx_coord_t torx_pkt_self(const torx_pkt_dev_t *dev);
torx_shape_t torx_pkt_shape(const torx_pkt_dev_t *dev);

/* Injects one packet: header fields dest, ctl and sw from *hdr, the payload
 * gathered from iov (at most 240 bytes in all). TORX_OK: accepted, will be
 * delivered exactly once. TORX_NO_ROOM: nothing taken, retry later.
 * TORX_ERR_INVAL: no task at dest, payload too long, or bad deposit line. */
torx_status_t torx_pkt_inject(torx_pkt_dev_t *dev, const torx_pkt_hdr_t *hdr,
                              const struct iovec *iov, int iovcnt);

/* Injects with one contiguous payload. */
static inline torx_status_t torx_pkt_inject1(torx_pkt_dev_t *dev, const torx_pkt_hdr_t *hdr,
                                             const void *payload, size_t len)
{
    struct iovec iov = {(void *)payload, len};
    return torx_pkt_inject(dev, hdr, &iov, len ? 1 : 0);
}

/* Advances the device (pending injections, device-internal traffic) and
 * returns 1 when a packet is waiting, 0 otherwise. */
int torx_pkt_poll(torx_pkt_dev_t *dev);

/* Sleeps until a packet may be waiting for this task, at most timeout_ms
 * milliseconds (negative: no limit), without using the CPU: the doorbell.
 * TORX_OK: poll now (a packet came, torx_pkt_wake was called, or the sleep
 * was interrupted; when the device has injections of its own waiting for
 * room at a peer, which no doorbell announces, it naps only briefly and
 * returns TORX_OK). TORX_AGAIN: the time ran out and nothing came. Call it
 * from the receiving thread, after polling found nothing. An injector rings
 * the destination's doorbell only when its receiver sleeps, so a busy
 * receiver costs the senders nothing but a load of a flag. */
torx_status_t torx_pkt_wait(torx_pkt_dev_t *dev, int timeout_ms);

/* Makes this task's current or next torx_pkt_wait return TORX_OK at once;
 * for another thread of the task that has work for the receiving thread. */
void torx_pkt_wake(torx_pkt_dev_t *dev);

/* The header of the waiting packet, left in the FIFO, or NULL. Repeated
 * peeks return the same packet until torx_pkt_consume(). The header and its
 * payload (torx_pkt_payload) stay valid until then. */
const torx_pkt_hdr_t *torx_pkt_peek(torx_pkt_dev_t *dev);

/* Copies len payload bytes starting at off from the peeked packet to dst,
 * which may have any alignment. */
void torx_pkt_read(const torx_pkt_hdr_t *pkt, void *dst, size_t off, size_t len);

/* Unloads (discards) the peeked packet, freeing its FIFO slot. */
void torx_pkt_consume(torx_pkt_dev_t *dev);

/* Free packet slots in the reception FIFO that deterministic packets from
 * this task to dest use (a lower bound; other senders share it). */
int torx_pkt_room(torx_pkt_dev_t *dev, torx_coord_t dest);

/* ---- Collective network -------------------------------------------------- */

#define TORX_CN_PACKET_BYTES 256

typedef enum torx_cn_op {
    TORX_CN_ADD,
    TORX_CN_MIN,
    TORX_CN_MAX,
    TORX_CN_AND,
    TORX_CN_OR,
    TORX_CN_XOR,
    TORX_CN_BCAST, /* the root's packet reaches everyone; others send none */
    TORX_CN_NOPS
} torx_cn_op_t;

typedef enum torx_cn_type {
    TORX_CN_S32,
    TORX_CN_U32,
    TORX_CN_S64,
    TORX_CN_U64,
    TORX_CN_NTYPES
} torx_cn_type_t;

/* Contributes one 256-byte packet to the job's next collective round. Every
 * task of the job injects once per round, with the same op and type, in the
 * same order. For TORX_CN_BCAST, is_root marks the one task whose data
 * counts; the others may pass data == NULL. TORX_NO_ROOM when this task is
 * as many rounds ahead as the device pipelines. */
torx_status_t torx_cn_inject(torx_pkt_dev_t *dev, torx_cn_op_t op, torx_cn_type_t type,
                             int is_root, const void *data);

/* Reads the result of this task's oldest unread round into result (256
 * bytes). TORX_AGAIN until every task has contributed; TORX_ERR_PROTO when
 * tasks disagreed on op, type or root (torx_last_error names them). */
torx_status_t torx_cn_read(torx_pkt_dev_t *dev, void *result);

/* Bitwise reproducible sum of n doubles (n <= 32 per call) over the job, on
 * the integer ALU: a max of exponents, then an integer sum of mantissas
 * aligned to it. The result does not depend on which task holds which value.
 * Blocking (drives the device until done). */
torx_status_t torx_cn_allreduce_sum_double(torx_pkt_dev_t *dev, const double *in,
                                           double *out, int n);

/* ---- Global interrupt (barrier) ------------------------------------------ */

/* Enters the next barrier round. */
torx_status_t torx_gi_arm(torx_pkt_dev_t *dev);
/* TORX_OK once every task has entered the round this task armed, TORX_AGAIN
 * before. */
torx_status_t torx_gi_poll(torx_pkt_dev_t *dev);

/* ---- Bulk transfer ------------------------------------------------------- */

/* A caller-owned bulk operation; contents are private to the device. */
typedef struct torx_bulk {
    uint64_t priv[8];
} torx_bulk_t;

/* Starts copying len bytes from remote (an address in the task at peer) to
 * local. Single-copy through cross-memory attach where the kernel allows it,
 * else streamed through the FIFOs (the peer must keep polling). */
torx_status_t torx_bulk_get(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer,
                            const void *remote, void *local, size_t len);

/* Starts copying len bytes from local to remote in the task at peer. */
torx_status_t torx_bulk_put(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer, void *remote,
                            const void *local, size_t len);

/* TORX_OK when op is complete, TORX_AGAIN while it runs (and advances it). */
torx_status_t torx_bulk_test(torx_pkt_dev_t *dev, torx_bulk_t *op);

/* "cma" or "fifo": the path bulk transfers take on this device. */
const char *torx_bulk_path(const torx_pkt_dev_t *dev);

/* ---- Environment helpers (used by every layer) --------------------------- */

/* Parses TORX_TORUS ("XxYxZ") or derives a near-cubic shape for nnodes nodes
 * when unset. tasks_per_node becomes shape->t. Errors name the variable,
 * value and reason (e.g. too few slots for the job). */
torx_status_t torx_env_shape(int ntasks, int tasks_per_node, torx_shape_t *shape);

/* Integer environment value within [lo, hi]; def when unset or empty.
 * TORX_ERR_ENV with a message naming the variable and value otherwise. */
torx_status_t torx_env_int(const char *name, long lo, long hi, long def, long *out);

/* One of a list of words; *index is the position in choices, def when unset. */
torx_status_t torx_env_choice(const char *name, const char *const *choices, int def, int *index);

#ifdef __cplusplus
}
#endif

#endif /* TORX_PACKET_H */
