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
 *  - bulk transfer (torx_bulk_*): remote get/put of a memory region;
 *  - staging (torx_stage_*): a descriptor-driven copy for mid-size data,
 *                 through an area both tasks of a pair can reach.
 *
 * Every call is nonblocking. A full FIFO gives TORX_NO_ROOM and takes
 * nothing; a packet accepted with TORX_OK is delivered exactly once.
 *
 * Threading: one thread at a time per device for each of inject, receive,
 * collective and bulk operations; inject and receive may run concurrently in
 * two threads (the coprocessor-mode split), and so may collective-network
 * and global-interrupt rounds on different channels (co mode's thread runs
 * the nonblocking collectives' channels while the task uses channel 0). Bulk operations belong to the
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
 *   TORX_STAGE_BYTES   staging area per ordered pair of tasks, a power of two
 *                      4096..16777216, or 0 for none (65536; shrunk so that a
 *                      large job's areas total at most 256 MiB)
 *   TORX_VERBOSE       -1..3, log start-up choices to stderr (-1: not even
 *                      warnings)
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

/* NAME     torx_shape_slots, torx_coord_index, torx_coord_in_shape,
 *          torx_coord_equal - coordinate arithmetic
 * DESCRIPTION
 *   torx_shape_slots: the task slots of a shape, x*y*z*t. torx_coord_index:
 *   the linear index of c in s, x varying fastest, then y, z, t (c must be
 *   in s). torx_coord_in_shape: whether c lies in s. torx_coord_equal:
 *   whether a and b are the same coordinate.
 * RETURN VALUE
 *   As above; 1 for true and 0 for false. Pure, inline, cannot fail.
 * SEE ALSO torx_map_coord, torx_map_rank
 */
static inline unsigned torx_shape_slots(torx_shape_t s)
{
    return (unsigned)s.x * s.y * s.z * s.t;
}

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
    torx_coord_t dest;             /* final destination */
    uint8_t ctl;                   /* TORX_PKT_* routing bits */
    uint8_t chunks;                /* packet size in 32-byte chunks, 1..8 (set by inject) */
    uint8_t payload_len;           /* payload bytes, 0..240 (set by inject) */
    uint8_t dev_tag;               /* owned by the device (FIFO bookkeeping) */
    uint8_t sw[TORX_PKT_SW_BYTES]; /* software header bytes for the layer above */
} torx_pkt_hdr_t;

_Static_assert(sizeof(torx_pkt_hdr_t) == TORX_PKT_HDR_BYTES, "torus header is 16 bytes");

/* NAME     torx_pkt_hdr_init - fill a packet header
 * DESCRIPTION
 *   Sets *h to a header for dest with the routing bits ctl (0: a
 *   deterministic packet; TORX_PKT_ADAPTIVE: adaptive) and zeroed software
 *   bytes sw[], which the caller then fills. chunks and payload_len are set
 *   by torx_pkt_inject.
 * RETURN VALUE
 *   None.
 * SEE ALSO torx_pkt_hdr_set_deposit, torx_pkt_inject
 */
static inline void torx_pkt_hdr_init(torx_pkt_hdr_t *h, torx_coord_t dest, unsigned ctl)
{
    *h = (torx_pkt_hdr_t){.dest = dest, .ctl = (uint8_t)ctl};
}

/* NAME     torx_pkt_hdr_set_deposit, torx_pkt_hdr_deposit_dim - line broadcast
 * DESCRIPTION
 *   set_deposit sets the deposit bit: the packet is copied to every node
 *   from the sender to dest along dim (TORX_DIM_X/Y/Z), stepping in
 *   direction dir (+1 or -1) with wraparound, the task t of dest on each.
 *   It clears TORX_PKT_ADAPTIVE: deposit packets are deterministic.
 *   deposit_dim reads the dimension back.
 * RETURN VALUE
 *   set_deposit: none. deposit_dim: the dimension, 0..2 (3 in a malformed
 *   header).
 * NOTES
 *   dest must differ from the sender only in dim, and not equal it;
 *   torx_pkt_inject checks (TORX_ERR_INVAL).
 * SEE ALSO torx_pkt_hdr_init, torx_pkt_inject
 */
static inline void torx_pkt_hdr_set_deposit(torx_pkt_hdr_t *h, int dim, int dir)
{
    h->ctl = (uint8_t)((h->ctl &
                        ~(TORX_PKT_ADAPTIVE | TORX_PKT_DEPOSIT_NEG | TORX_PKT_DEPOSIT_DIM_MASK)) |
                       TORX_PKT_DEPOSIT | (dir < 0 ? TORX_PKT_DEPOSIT_NEG : 0) |
                       ((unsigned)dim << TORX_PKT_DEPOSIT_DIM_SHIFT));
}

static inline int torx_pkt_hdr_deposit_dim(const torx_pkt_hdr_t *h)
{
    return (h->ctl & TORX_PKT_DEPOSIT_DIM_MASK) >> TORX_PKT_DEPOSIT_DIM_SHIFT;
}

/* NAME     torx_pkt_chunks_for, torx_pkt_payload - packet size and payload
 * DESCRIPTION
 *   torx_pkt_chunks_for: the 32-byte chunks a packet with a payload of len
 *   bytes (len <= 240) occupies, header included. torx_pkt_payload: the
 *   address of the payload that follows the header h in the FIFO.
 * RETURN VALUE
 *   chunks_for: 1..8. payload: a pointer valid as long as h is.
 * SEE ALSO torx_pkt_peek, torx_pkt_read
 */
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
    const char *device; /* NULL: $TORX_DEVICE, default "auto" */
    unsigned flags;     /* TORX_PKT_* attribute flags above; 0 for none */
} torx_pkt_attr_t;

/* NAME     torx_pkt_open - open the packet device of this task
 * DESCRIPTION
 *   Collective over the job (attr->boot). Reads the environment (TORX_DEVICE
 *   unless attr->device names one, TORX_CHAOS, TORX_FIFO_PACKETS, TORX_BULK,
 *   TORX_VERBOSE), creates (rank 0) or attaches the job's shared state,
 *   claims attr->self and returns once every task has attached. All tasks
 *   pass the same shape, each its own coordinate.
 * RETURN VALUE
 *   TORX_OK: *dev is open. Otherwise (one task failing to attach fails all):
 *   TORX_ERR_INVAL   no attr or boot; a zero extent; fewer slots than tasks;
 *                    unknown flags or device name; self outside the shape or
 *                    taken by another task
 *   TORX_ERR_ENV     a bad TORX_* value (named in the message)
 *   TORX_ERR_UNSUPPORTED  TORX_DEVICE=ofi in a build without it, or no usable
 *                    libfabric provider (the message names what it lacks);
 *                    TORX_BULK=cma where cross-memory attach is forbidden
 *                    (or on ofi)
 *   TORX_ERR_NOMEM   memory or /dev/shm space; TORX_ERR_SYS: shm_open, mmap
 *   TORX_ERR_PROTO   tasks disagree on shape, TORX_FIFO_PACKETS or version
 *   TORX_ERR_PEER    another task failed (see its message) or died
 * SEE ALSO torx_pkt_close, torx_boot_pmi_init, torx_boot_fork_run, torx_init
 */
torx_status_t torx_pkt_open(const torx_pkt_attr_t *attr, torx_pkt_dev_t **dev);

/* NAME     torx_pkt_close - close the packet device
 * DESCRIPTION
 *   Releases dev and unmaps the job's state. Not collective: finish the
 *   traffic first (a global-interrupt barrier), since packets sent to a
 *   closed task are never read. Pending bulk operations are abandoned. dev
 *   may be NULL.
 * RETURN VALUE
 *   None.
 * SEE ALSO torx_pkt_open, torx_gi_arm
 */
void torx_pkt_close(torx_pkt_dev_t *dev);

/* NAME     torx_pkt_device_name, torx_pkt_self, torx_pkt_shape - device facts
 * DESCRIPTION
 *   The device's name, this task's coordinate and the torus shape, as
 *   torx_pkt_open settled them.
 * RETURN VALUE
 *   "shm" (a static string); the coordinate; the shape. They cannot fail.
 * SEE ALSO torx_pkt_open
 */
const char *torx_pkt_device_name(const torx_pkt_dev_t *dev);
torx_coord_t torx_pkt_self(const torx_pkt_dev_t *dev);
torx_shape_t torx_pkt_shape(const torx_pkt_dev_t *dev);

/* What kind of network a device drives. */
typedef enum torx_net_kind {
    TORX_NET_CROSSBAR = 0, /* one host's shared memory: every task a copy away (shm) */
    TORX_NET_SWITCHED = 1, /* hosts joined by a switch, shared memory inside a host (ofi) */
    TORX_NET_TORUS = 2     /* nodes joined by links to their torus neighbours (sim) */
} torx_net_kind_t;

/* The network and its costs, in seconds and bytes per second. A cost the
 * device has no figure for is 0. */
typedef struct torx_net {
    torx_net_kind_t kind;
    torx_shape_t shape;      /* as torx_pkt_shape */
    unsigned wrap;           /* bit d (TORX_DIM_X..Z): dimension d has wraparound links */
    unsigned links;          /* torus links leaving a node (6 on a 3-D torus); 0: no torus */
    unsigned cores_per_node; /* cores of a node that run a task or its thread */
    size_t packet_payload;   /* payload bytes of a full torus packet */
    double hop_latency;      /* per router a packet passes */
    double link_bandwidth;   /* payload per link and direction; a host's link when switched */
    double packet_cpu;       /* a task's core per packet it injects or receives */
    double message_latency;  /* a one-packet message between the nearest tasks, software
                              * included: the alpha of point-to-point */
    double copy_bandwidth;   /* a copy by a task's core */
    double bulk_bandwidth;   /* a bulk transfer between two nodes (a DMA engine); 0: the
                              * device moves rendezvous data in packets */
    double cn_latency;       /* one collective-network round of the whole job */
    double cn_bandwidth;     /* payload through the collective network, rounds back to back */
    double gi_latency;       /* a global-interrupt barrier of the whole job */
} torx_net_t;

/* NAME     torx_pkt_network - the network the device drives, and its costs
 * DESCRIPTION
 *   Fills *net with what the layers above need to estimate how long a
 *   pattern of messages takes (docs/packet-layer.md#the-network): the
 *   network's kind, shape and wraparound, and the costs the device knows.
 *   The sim device answers from its machine file; shm and ofi answer with
 *   figures measured on their kind of host (docs/benchmarking.md), the
 *   same on every task, so that choices made from them agree.
 * RETURN VALUE
 *   None; it cannot fail.
 * SEE ALSO torx_pkt_shape
 */
void torx_pkt_network(const torx_pkt_dev_t *dev, torx_net_t *net);

/* NAME     torx_pkt_wtime - the task's clock, in seconds
 * DESCRIPTION
 *   Seconds since an arbitrary origin, as a double (like MPI_Wtime), read
 *   from the device's clock: CLOCK_MONOTONIC on shm and ofi, the same clock
 *   for every task of a host; simulated time on a device that simulates
 *   (sim). For timing a program that uses the packet layer directly; a
 *   message-layer program uses torx_wtime.
 * RETURN VALUE
 *   The time; it cannot fail. dev NULL: the host's monotonic clock.
 * NOTES
 *   Differences are meaningful, the origin is not. Cheap (a vDSO call on
 *   the host), but not free: time batches of operations, not single ones.
 * SEE ALSO torx_wtime, torx_pkt_open
 */
double torx_pkt_wtime(const torx_pkt_dev_t *dev);

/* NAME     torx_pkt_inject - send one torus packet
 * DESCRIPTION
 *   Injects a packet with the fields dest, ctl and sw of *hdr and a payload
 *   gathered from iov[0..iovcnt-1] (at most 240 bytes in all; copied before
 *   the call returns). Deterministic packets from one task to another
 *   arrive in order; adaptive ones may not (TORX_CHAOS).
 * RETURN VALUE
 *   TORX_OK          accepted; it will be delivered exactly once.
 *   TORX_NO_ROOM     the FIFO is full, or a deposit line is still being
 *                    delivered: nothing taken, poll and retry.
 *   TORX_ERR_INVAL   payload above 240 bytes, dest outside the torus or
 *                    without a task, or a bad deposit line.
 * NOTES
 *   One injecting thread at a time, unless the device was opened with
 *   TORX_PKT_SHARED_INJECT.
 * SEE ALSO torx_pkt_inject1, torx_pkt_hdr_init, torx_pkt_room, torx_pkt_poll
 */
torx_status_t torx_pkt_inject(torx_pkt_dev_t *dev, const torx_pkt_hdr_t *hdr,
                              const struct iovec *iov, int iovcnt);

/* NAME     torx_pkt_inject1 - send one torus packet from one buffer
 * DESCRIPTION
 *   torx_pkt_inject with the payload in one buffer of len bytes (payload
 *   may be NULL when len is 0).
 * RETURN VALUE
 *   As torx_pkt_inject.
 * SEE ALSO torx_pkt_inject
 */
static inline torx_status_t torx_pkt_inject1(torx_pkt_dev_t *dev, const torx_pkt_hdr_t *hdr,
                                             const void *payload, size_t len)
{
    struct iovec iov = {(void *)payload, len};
    return torx_pkt_inject(dev, hdr, &iov, len ? 1 : 0);
}

/* NAME     torx_pkt_inject_batch - send a message's packets together, all or none
 * SYNOPSIS
 *   typedef struct { const torx_pkt_hdr_t *hdr; const struct iovec *iov;
 *                    int iovcnt; } torx_pkt_out_t;
 * DESCRIPTION
 *   Injects pkts[0..n-1], each as torx_pkt_inject would, as one unit: all
 *   of them, in order, or none. They must go to one destination and be
 *   deterministic (no TORX_PKT_ADAPTIVE, no TORX_PKT_DEPOSIT). A message
 *   layer sends a message of several packets this way when it must not
 *   leave it half sent (a send that completes at once); on the shm device
 *   the batch also takes one reservation of n FIFO slots. 1 <= n <=
 *   TORX_PKT_BATCH_MAX.
 * RETURN VALUE
 *   TORX_OK          all accepted, in order.
 *   TORX_NO_ROOM     nothing taken: the FIFO has room for fewer than n, a
 *                    deposit line is still being delivered, or the device
 *                    cannot promise all or none (ofi, where the provider may
 *                    refuse any one packet: there only n == 1); send them
 *                    one by one with torx_pkt_inject.
 *   TORX_ERR_INVAL   n out of range, mixed destinations, adaptive or
 *                    deposit packets, or what torx_pkt_inject rejects.
 * NOTES
 *   As torx_pkt_inject.
 * SEE ALSO torx_pkt_inject
 */
#define TORX_PKT_BATCH_MAX 8
typedef struct torx_pkt_out {
    const torx_pkt_hdr_t *hdr;
    const struct iovec *iov;
    int iovcnt;
} torx_pkt_out_t;
torx_status_t torx_pkt_inject_batch(torx_pkt_dev_t *dev, const torx_pkt_out_t *pkts, int n);

/* NAME     torx_pkt_poll - advance the device and look for a packet
 * DESCRIPTION
 *   Moves the device's own work on (the rest of a deposit line, bulk
 *   transfers over the FIFOs, device-internal packets, which it consumes)
 *   and looks for a packet for this task.
 * RETURN VALUE
 *   1 when a packet is waiting (torx_pkt_peek returns it), 0 otherwise.
 * NOTES
 *   Receiving thread only. Keep polling while peers may send: otherwise
 *   their injections find the FIFOs full, and FIFO-path bulk transfers
 *   with this task stall.
 * SEE ALSO torx_pkt_peek, torx_pkt_wait
 */
int torx_pkt_poll(torx_pkt_dev_t *dev);

/* NAME     torx_pkt_wait - sleep until a packet may be waiting (the doorbell)
 * DESCRIPTION
 *   Sleeps without using the CPU until a packet may be waiting for this
 *   task, at most timeout_ms milliseconds (negative: no limit). Call it from
 *   the receiving thread, after polling found nothing. An injector rings the
 *   destination's doorbell only when its receiver sleeps, so a busy
 *   receiver costs the senders nothing but a load of a flag.
 * RETURN VALUE
 *   TORX_OK     poll now: a packet came, torx_pkt_wake was called, or the
 *               sleep was interrupted; also after a brief nap when the
 *               device's own injections wait for room at a peer (no
 *               doorbell announces that).
 *   TORX_AGAIN  the time ran out and nothing came.
 * NOTES
 *   It knows nothing of the message layer: packets a torx context still
 *   has queued for other tasks (acknowledgements, a message's tail waiting
 *   for room) stay queued while it sleeps, and the tasks waiting for them
 *   wait as long. A message-layer program waits with torx_wait, and for a
 *   collective-network or global-interrupt round sets the round's poll as
 *   torx_advance_hook first (bench/sim/sim_round.h).
 * SEE ALSO torx_pkt_wake, torx_pkt_poll, torx_wait
 */
torx_status_t torx_pkt_wait(torx_pkt_dev_t *dev, int timeout_ms);

/* NAME     torx_pkt_wake - ring this task's own doorbell
 * DESCRIPTION
 *   Makes this task's current or next torx_pkt_wait return TORX_OK at once;
 *   for another thread of the task that has work for the receiving thread.
 * RETURN VALUE
 *   None.
 * SEE ALSO torx_pkt_wait
 */
void torx_pkt_wake(torx_pkt_dev_t *dev);

/* NAME     torx_pkt_peek - look at the next packet without unloading it
 * DESCRIPTION
 *   Returns the header of the waiting packet, left in its FIFO. Repeated
 *   peeks return the same packet until torx_pkt_consume; the header and its
 *   payload (torx_pkt_payload) stay valid until then. Device-internal
 *   packets are handled on the way and never returned.
 * RETURN VALUE
 *   The header, or NULL when no packet is waiting.
 * SEE ALSO torx_pkt_read, torx_pkt_consume, torx_pkt_poll
 */
const torx_pkt_hdr_t *torx_pkt_peek(torx_pkt_dev_t *dev);

/* NAME     torx_pkt_read - copy payload bytes out of a peeked packet
 * DESCRIPTION
 *   Copies len payload bytes starting at off from pkt (as torx_pkt_peek
 *   returned it) to dst, which may have any alignment. off + len must not
 *   exceed pkt->payload_len (not checked).
 * RETURN VALUE
 *   None.
 * SEE ALSO torx_pkt_peek, torx_pkt_payload
 */
void torx_pkt_read(const torx_pkt_hdr_t *pkt, void *dst, size_t off, size_t len);

/* NAME     torx_pkt_consume - unload the peeked packet
 * DESCRIPTION
 *   Discards the packet torx_pkt_peek returned, freeing its FIFO slot; its
 *   header and payload are no longer valid. Does nothing when no packet is
 *   peeked.
 * RETURN VALUE
 *   None.
 * SEE ALSO torx_pkt_peek
 */
void torx_pkt_consume(torx_pkt_dev_t *dev);

/* NAME     torx_pkt_peek_next - the next packet of the queue just consumed
 * DESCRIPTION
 *   torx_pkt_peek for a loop that drains packets after torx_pkt_poll: it
 *   looks only at the reception queue whose packet was consumed last, for
 *   as long as that queue's turn lasts, instead of scanning every queue.
 *   When nothing has been consumed yet, or the queue has had its turn (a
 *   queue yields to the others after a burst of packets, so that one
 *   flooding sender cannot starve the rest), the same as torx_pkt_peek.
 * RETURN VALUE
 *   The header, or NULL when that queue is empty: a packet may still wait
 *   in another queue, for the next torx_pkt_poll or torx_pkt_peek to find.
 * NOTES
 *   Why: in a ping-pong, the scan of the other queues that finds nothing
 *   lies between a handler's completion and its caller's next move.
 * SEE ALSO torx_pkt_peek, torx_pkt_consume, torx_pkt_poll
 */
const torx_pkt_hdr_t *torx_pkt_peek_next(torx_pkt_dev_t *dev);

/* NAME     torx_pkt_room - free slots on the way to a destination
 * DESCRIPTION
 *   The free packet slots in the reception FIFO that deterministic packets
 *   from this task to dest use.
 * RETURN VALUE
 *   The number of slots, a lower bound (other senders share the FIFO and
 *   the receiver frees slots); 0 when dest is outside the torus.
 * SEE ALSO torx_pkt_inject
 */
int torx_pkt_room(torx_pkt_dev_t *dev, torx_coord_t dest);

/* ---- Collective network -------------------------------------------------- */

#define TORX_CN_PACKET_BYTES 256

/* Independent channels of the collective network and of the global
 * interrupt (Blue Gene/L's global interrupt network has four; its
 * collective network two virtual channels and sixteen class routes). Each
 * channel has its own sequence of rounds, so callers that cannot agree on
 * one order of rounds across channels (nonblocking collectives of
 * different communicators) each take their own. The calls without "_on"
 * use channel 0. */
#define TORX_CN_CHANNELS 4
#define TORX_GI_CHANNELS 4

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

/* NAME     torx_cn_inject - contribute to the next collective-network round
 * DESCRIPTION
 *   Contributes the 256 bytes at data to this task's next round. Every task
 *   of the job injects once per round, with the same op and type, in the
 *   same order; the ALU combines lanes of type (32 or 64 bits). For
 *   TORX_CN_BCAST, is_root marks the one task whose data counts; the others
 *   may pass data == NULL. Rounds pipeline: up to 4 may be in flight.
 * RETURN VALUE
 *   TORX_OK          contributed; read the result with torx_cn_read.
 *   TORX_NO_ROOM     this task is as many rounds ahead of the slowest reader
 *                    as the device pipelines: read, then retry.
 *   TORX_ERR_INVAL   op or type out of range; data NULL where it counts.
 * SEE ALSO torx_cn_read, torx_cn_allreduce_sum_double
 */
torx_status_t torx_cn_inject(torx_pkt_dev_t *dev, torx_cn_op_t op, torx_cn_type_t type, int is_root,
                             const void *data);

/* NAME     torx_cn_read - read the result of a collective-network round
 * DESCRIPTION
 *   Reads the result of this task's oldest unread round into result (256
 *   bytes) once every task has contributed to it.
 * RETURN VALUE
 *   TORX_OK          result holds the combined packet.
 *   TORX_AGAIN       not every task has contributed yet.
 *   TORX_ERR_PROTO   tasks disagreed on op, type or root (torx_last_error
 *                    names them); the round is consumed all the same, on
 *                    every task, so the pipeline stays in step.
 *   TORX_ERR_INVAL   no unread round (inject first), or result is NULL.
 * SEE ALSO torx_cn_inject
 */
torx_status_t torx_cn_read(torx_pkt_dev_t *dev, void *result);

/* NAME     torx_cn_inject_on, torx_cn_read_on - a round on one channel
 * DESCRIPTION
 *   torx_cn_inject and torx_cn_read on channel 0..TORX_CN_CHANNELS-1. The
 *   channels' rounds are independent: every task injects the rounds of a
 *   channel in the same order, but rounds of different channels may be
 *   injected and read in any order relative to each other.
 * RETURN VALUE
 *   As torx_cn_inject and torx_cn_read; TORX_ERR_INVAL for a channel out
 *   of range.
 */
torx_status_t torx_cn_inject_on(torx_pkt_dev_t *dev, unsigned channel, torx_cn_op_t op,
                                torx_cn_type_t type, int is_root, const void *data);
torx_status_t torx_cn_read_on(torx_pkt_dev_t *dev, unsigned channel, void *result);

/* NAME     torx_cn_allreduce_sum_double - reproducible sum of doubles
 * DESCRIPTION
 *   Sums in[0..n-1] (n <= 32 per call) element-wise over the job into out
 *   (which may alias in) on the integer ALU: a max of exponents, then an
 *   integer sum of mantissas aligned to it, so the result does not depend
 *   on which task holds which value. Collective, blocking: two rounds,
 *   driving the device until done. Every task passes the same n.
 * RETURN VALUE
 *   TORX_OK (at once for n == 0). TORX_ERR_INVAL: n outside 0..32, in or
 *   out NULL. TORX_ERR_UNSUPPORTED: 2^21 tasks or more. TORX_ERR_PROTO:
 *   the tasks disagreed (as torx_cn_read).
 * NOTES
 *   No collective-network round of this task may be unread when it starts.
 *   Values far below the largest lose low-order bits (bound, inf and nan
 *   rules: src/packet/fpsum_internal.h).
 * SEE ALSO torx_cn_inject, torx_cn_read
 */
torx_status_t torx_cn_allreduce_sum_double(torx_pkt_dev_t *dev, const double *in, double *out,
                                           int n);

/* NAME     torx_cn_fpsum_headroom, torx_cn_fpsum_exponent, torx_cn_fpsum_encode,
 *          torx_cn_fpsum_decode - the lanes of the reproducible double sum
 * DESCRIPTION
 *   The two rounds of torx_cn_allreduce_sum_double, for callers that
 *   pipeline them with rounds of their own (src/coll/). For a job of ntasks
 *   tasks, h = torx_cn_fpsum_headroom(ntasks); per double x in a lane:
 *     round 1  TORX_CN_MAX over TORX_CN_S64 lanes of torx_cn_fpsum_exponent(x),
 *              giving the lane's emax;
 *     round 2  TORX_CN_ADD over TORX_CN_S64 lanes of
 *              torx_cn_fpsum_encode(x, emax, h), giving sum;
 *     result   torx_cn_fpsum_decode(sum, emax, h).
 *   Unused lanes contribute 0 to both rounds. Pure functions.
 * RETURN VALUE
 *   headroom: h (ntasks >= 1; 0 when ntasks is outside 1..2^21 - 1, which
 *   the sum refuses). The others: the lane value, or the summed double.
 * SEE ALSO torx_cn_allreduce_sum_double
 */
int torx_cn_fpsum_headroom(int ntasks);
int64_t torx_cn_fpsum_exponent(double x);
int64_t torx_cn_fpsum_encode(double x, int64_t emax, int headroom);
double torx_cn_fpsum_decode(int64_t sum, int64_t emax, int headroom);

/* ---- Global interrupt (barrier) ------------------------------------------ */

/* NAME     torx_gi_arm - enter the next global-interrupt barrier round
 * DESCRIPTION
 *   Marks this task as arrived at its next barrier round; what it did
 *   before is visible to every task once they leave the round. Poll the
 *   round to completion with torx_gi_poll before arming the next.
 * RETURN VALUE
 *   TORX_OK; TORX_ERR_INVAL when the previous round was not yet polled to
 *   completion.
 * SEE ALSO torx_gi_poll
 */
torx_status_t torx_gi_arm(torx_pkt_dev_t *dev);
/* NAME     torx_gi_poll - whether the armed barrier round is complete
 * DESCRIPTION
 *   Checks whether every task has entered the round this task armed.
 *   Nonblocking: loop on it, and keep polling the torus meanwhile if peers
 *   may still send to this task.
 * RETURN VALUE
 *   TORX_OK once every task has entered the round (and on later calls);
 *   TORX_AGAIN before; TORX_ERR_INVAL when no round was ever armed.
 * SEE ALSO torx_gi_arm
 */
torx_status_t torx_gi_poll(torx_pkt_dev_t *dev);

/* NAME     torx_gi_arm_on, torx_gi_poll_on - a barrier round on one channel
 * DESCRIPTION
 *   torx_gi_arm and torx_gi_poll on channel 0..TORX_GI_CHANNELS-1, each
 *   with its own rounds, independent of the others'.
 * RETURN VALUE
 *   As torx_gi_arm and torx_gi_poll; TORX_ERR_INVAL for a channel out of
 *   range.
 */
torx_status_t torx_gi_arm_on(torx_pkt_dev_t *dev, unsigned channel);
torx_status_t torx_gi_poll_on(torx_pkt_dev_t *dev, unsigned channel);

/* ---- Bulk transfer ------------------------------------------------------- */

/* A caller-owned bulk operation; contents are private to the device. */
typedef struct torx_bulk {
    uint64_t priv[8];
} torx_bulk_t;

/* NAME     torx_bulk_get - start copying memory from another task
 * DESCRIPTION
 *   Starts copying len bytes from remote (an address in the task at peer)
 *   to local, in op (the caller's, untouched until the operation completes).
 *   Single-copy through cross-memory attach (process_vm_readv) where the
 *   kernel allows it, done before the call returns; else streamed through
 *   the FIFOs, and the peer must keep polling. Zero bytes, or peer == self,
 *   complete at once.
 * RETURN VALUE
 *   TORX_OK: started (or done); finish with torx_bulk_test.
 *   TORX_ERR_INVAL   op NULL or still in flight, no task at peer, a NULL
 *                    address with len > 0, a range that wraps, or (cma) an
 *                    unmapped range.
 *   TORX_ERR_PEER (peer dead), _NOMEM, _SYS: the copy failed or could not
 *                    be queued; torx_last_error says why.
 * SEE ALSO torx_bulk_test, torx_bulk_put, torx_bulk_path
 */
torx_status_t torx_bulk_get(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer,
                            const void *remote, void *local, size_t len);

/* NAME     torx_bulk_get_shared - a get the owner of remote may help with
 * DESCRIPTION
 *   As torx_bulk_get, for a caller that knows the task at peer is likely
 *   idle (a rendezvous sender waiting for its ack, with no copying of its
 *   own to do for this task). On the shm device's cma path a get of
 *   TORX_BULK_SHARE_MIN bytes or more is then offered to that task, which
 *   writes part of it into local from its own progress loop while this
 *   one reads the rest: two cores copy at once. Still done before the call
 *   returns; an owner that does not poll in the meantime leaves the whole
 *   copy to this task, as torx_bulk_get would. Other devices and paths:
 *   exactly torx_bulk_get.
 * RETURN VALUE
 *   As torx_bulk_get.
 * SEE ALSO torx_bulk_get
 */
torx_status_t torx_bulk_get_shared(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer,
                                   const void *remote, void *local, size_t len);

/* NAME     torx_bulk_put - start copying memory into another task
 * DESCRIPTION
 *   Starts copying len bytes from local to remote (an address in the task
 *   at peer), as torx_bulk_get in the other direction (process_vm_writev on
 *   the cma path).
 * RETURN VALUE
 *   As torx_bulk_get.
 * SEE ALSO torx_bulk_test, torx_bulk_get
 */
torx_status_t torx_bulk_put(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer, void *remote,
                            const void *local, size_t len);

/* NAME     torx_bulk_test - advance a bulk operation and test for completion
 * DESCRIPTION
 *   Polls the device (which moves FIFO transfers on) and tests op; now and
 *   then checks that the peer is still alive. Receiving thread only.
 * RETURN VALUE
 *   TORX_OK          op is complete; its memory may be reused.
 *   TORX_AGAIN       still running.
 *   TORX_ERR_PEER, _INVAL, _NOMEM, _SYS  op failed (e.g. the peer died);
 *                    every later test returns the same.
 *   TORX_ERR_INVAL   also: op was never started by torx_bulk_get or _put.
 * SEE ALSO torx_bulk_get, torx_bulk_put
 */
torx_status_t torx_bulk_test(torx_pkt_dev_t *dev, torx_bulk_t *op);

/* NAME     torx_bulk_path - the path bulk transfers take
 * DESCRIPTION
 *   Which path torx_pkt_open chose for bulk transfers (TORX_BULK, and
 *   whether the kernel allows cross-memory attach).
 * RETURN VALUE
 *   "cma" or "fifo", a static string.
 * SEE ALSO torx_bulk_get
 */
const char *torx_bulk_path(const torx_pkt_dev_t *dev);

/* NAME     torx_bulk_cost - what a bulk get from peer costs against a copy
 * DESCRIPTION
 *   The time of a single copy by the bulk path toward peer, in percent of a
 *   memcpy of the same bytes, as the device measured it when it opened
 *   (shm, cma path: a 1 MiB process_vm_readv against a 1 MiB memcpy, the
 *   best of twelve each, or TORX_BULK_COST). The shm device answers the mean
 *   of this task's figure and peer's, once peer has one, so that both ends
 *   of a pair answer the same. Cross-memory attach pins every page it copies, so
 *   on some machines it runs at a third of memcpy's speed and on others at
 *   two thirds; a layer above that can also move data by two copies through
 *   the staging area uses this to choose (TORX_RZV_DATA=auto, <torx/msg.h>).
 * RETURN VALUE
 *   Percent (300: the bulk copy takes three times a memcpy's time); 0 when
 *   not measured (the fifo path, or a device that does not measure: ofi).
 * SEE ALSO torx_bulk_get, torx_bulk_path, torx_stage_cost
 */
unsigned torx_bulk_cost(const torx_pkt_dev_t *dev, torx_coord_t peer);

/* ---- Staging --------------------------------------------------------------- */

/* The data movement the original's successor gave to its DMA engine, for
 * data too large for a few packets and too small to pay a rendezvous: the
 * sender copies a piece into a staging area toward one destination and
 * sends the returned descriptor in a packet of its own; the receiver reads
 * the piece in place and releases it. One copy in, one copy out, no system
 * call and no handshake. On shm the area is a ring per ordered pair of
 * tasks in the job's segment; another device may map it onto RMA.
 *
 * Pieces toward one destination are released by the receiver in the order
 * they were staged, so a descriptor must travel in a deterministic packet
 * injected after its piece was staged (the packet's ordering then orders
 * the piece too). */
typedef struct torx_stage_ref {
    uint32_t off; /* where the piece starts in the area (device-defined) */
    uint32_t len; /* its bytes, 1..torx_stage_max */
} torx_stage_ref_t;

/* NAME     torx_stage_max - the largest piece the staging area takes
 * DESCRIPTION
 *   The most bytes one torx_stage_put may stage (on shm half of the area,
 *   so one piece can be read while the next is written; on ofi 16384, one
 *   message with its header and a packet, or 288 bytes less over
 *   tcp;ofi_rxm, so that message stays within the provider's eager size).
 * RETURN VALUE
 *   Bytes; 0 when the device has no staging area (TORX_STAGE_BYTES=0).
 * SEE ALSO torx_stage_put
 */
size_t torx_stage_max(const torx_pkt_dev_t *dev);

/* NAME     torx_stage_reaches - whether the staging area reaches a task
 * DESCRIPTION
 *   Whether torx_stage_put toward dest can succeed: the device has a
 *   staging area and dest is a task it reaches through it. On shm that is
 *   every task of the job; on ofi, every other task (a host's own tasks
 *   through its shm rings, the others one message per piece), unless
 *   TORX_STAGE_BYTES=0.
 * RETURN VALUE
 *   1 or 0.
 * SEE ALSO torx_stage_max, torx_stage_put
 */
int torx_stage_reaches(const torx_pkt_dev_t *dev, torx_coord_t dest);

/* NAME     torx_stage_put - stage a piece of data toward a destination
 * DESCRIPTION
 *   Copies len bytes (1..torx_stage_max) from data into the staging area
 *   toward dest and describes the piece in *ref, for a packet to carry.
 * RETURN VALUE
 *   TORX_OK          staged; send *ref in a deterministic packet.
 *   TORX_NO_ROOM     the area is full of pieces dest has not released:
 *                    nothing staged, poll and retry.
 *   TORX_ERR_INVAL   len outside 1..torx_stage_max, data or ref NULL, no
 *                    task at dest.
 * NOTES
 *   One staging thread at a time per device (the message layer's
 *   injecting thread).
 * SEE ALSO torx_stage_data, torx_stage_release
 */
torx_status_t torx_stage_put(torx_pkt_dev_t *dev, torx_coord_t dest, const void *data, size_t len,
                             torx_stage_ref_t *ref);

/* NAME     torx_stage_data, torx_stage_release - read and free a staged piece
 * DESCRIPTION
 *   torx_stage_data returns where the piece ref (as a packet from the task
 *   at src carried it) can be read, if it is the next piece src staged
 *   toward this task. torx_stage_release frees it; pieces from one source
 *   are released in order, and a piece's bytes are not valid afterwards.
 * RETURN VALUE
 *   torx_stage_data: the piece's first byte, or NULL when ref is not the
 *   next piece from src (a malformed or forged descriptor: drop the packet)
 *   or the device has no staging area. torx_stage_release: none; it does
 *   nothing for a ref torx_stage_data would refuse.
 * NOTES
 *   One receiving thread at a time per device for these two.
 * SEE ALSO torx_stage_put
 */
const void *torx_stage_data(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref);
void torx_stage_release(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref);

/* NAME     torx_stage_unput - take back the piece just staged
 * DESCRIPTION
 *   Undoes the last torx_stage_put toward dest, whose descriptor packet
 *   could not be injected (a full FIFO), as if it had never been staged.
 * RETURN VALUE
 *   None. Does nothing unless ref is that piece and nothing was staged
 *   toward dest since.
 * SEE ALSO torx_stage_put
 */
void torx_stage_unput(torx_pkt_dev_t *dev, torx_coord_t dest, torx_stage_ref_t ref);

/* NAME     torx_stage_idle - whether dest has released every staged piece
 * DESCRIPTION
 *   Whether every piece staged toward dest so far has been released by it,
 *   so that the whole area toward dest is free: what a sender asks before
 *   it stages a message longer than it otherwise would (a pair with
 *   nothing in flight, where the area's pipelined two copies beat a
 *   rendezvous). The answer may err toward "not idle", never the other way.
 * RETURN VALUE
 *   1 or 0 (also 0 when the area does not reach dest).
 * NOTES
 *   The staging thread's call, as torx_stage_put.
 * SEE ALSO torx_stage_put, torx_stage_release
 */
int torx_stage_idle(torx_pkt_dev_t *dev, torx_coord_t dest);

/* NAME     torx_stage_idle_max - the longest message worth staging toward an idle dest
 * DESCRIPTION
 *   How long a message may be that a sender stages toward dest, past its
 *   eager limit, when dest is idle (torx_stage_idle): beyond it a
 *   rendezvous is faster. Within a host the area's two pipelined copies
 *   beat a rendezvous at any length. Over a network every piece is a
 *   message of its own and the rendezvous one transfer, and between two
 *   hosts over TCP staging won to 64 KiB (48 KiB: 26-28 us against 33-36
 *   by rendezvous on the ucx device, 25-32 against 34-40 on ofi) and lost
 *   from 96 KiB.
 * RETURN VALUE
 *   Bytes: SIZE_MAX on the shm device; 65536 on the ofi and ucx devices
 *   between hosts; 0 where the area does not reach dest.
 * SEE ALSO torx_stage_idle
 */
size_t torx_stage_idle_max(torx_pkt_dev_t *dev, torx_coord_t dest);

/* NAME     torx_stage_cost - what copying into the area toward dest costs now
 * DESCRIPTION
 *   The recent time torx_stage_put took to copy a piece of 4 KiB or more
 *   toward dest, per KiB: the least of the last four pieces timed (one
 *   such piece in eight is). Where the
 *   two tasks' cores share a cache it is a memcpy's; where the lines cross
 *   to a far core (another die, or a vCPU the hypervisor moved there) it
 *   can be ten times that, and then a staged message pays it twice.
 * RETURN VALUE
 *   Nanoseconds per KiB; 0 when nothing has been measured (no piece that
 *   long yet, or a device that does not measure: ofi).
 * SEE ALSO torx_stage_put, torx_stage_idle
 */
unsigned torx_stage_cost(const torx_pkt_dev_t *dev, torx_coord_t dest);

/* ---- Multi-reader staging -------------------------------------------------- */

/* Staging for one writer and many readers: a task copies a piece once
 * into its own area and sends the descriptor to every reader, and each
 * reader copies the piece out in place and releases it. The piece's room
 * is reused once all its readers have released it, in any order. What a
 * broadcast needs where each of the per-pair rings above would take its
 * own copy of the same data.
 *
 * On shm the area is one ring per task in the job's segment
 * (TORX_MSTAGE_BYTES, 0 turns it off); the ofi device has none
 * (torx_mstage_max says 0), so callers keep another path. A piece's
 * descriptor must reach its readers after the put (in a packet, or in a
 * message the packet layer carries), which orders the piece's bytes before
 * their reads. */

/* NAME     torx_mstage_max - the largest piece the multi-reader area takes
 * RETURN VALUE
 *   Bytes (half of the area, so a piece can be written while the one
 *   before it is read); 0 when the device has none.
 * SEE ALSO torx_mstage_put
 */
size_t torx_mstage_max(const torx_pkt_dev_t *dev);

/* NAME     torx_mstage_put - stage a piece for several readers
 * DESCRIPTION
 *   Copies len bytes (1..torx_mstage_max) from data into this task's
 *   multi-reader area, for readers releases, and sets *ref. Every task of
 *   the job can read it (torx_mstage_data with this task's coordinate).
 *   Room is taken back from the oldest pieces whose readers have all
 *   released them.
 * RETURN VALUE
 *   TORX_OK          staged; send *ref to each of the readers.
 *   TORX_NO_ROOM     the area holds pieces not yet released: nothing
 *                    staged; poll and retry.
 *   TORX_ERR_INVAL   len outside 1..torx_mstage_max, readers 0, data or
 *                    ref NULL, or the device has no such area.
 * NOTES
 *   One thread at a time per device puts.
 * SEE ALSO torx_mstage_data, torx_mstage_release
 */
torx_status_t torx_mstage_put(torx_pkt_dev_t *dev, const void *data, size_t len, unsigned readers,
                              torx_stage_ref_t *ref);

/* NAME     torx_mstage_data, torx_mstage_release - read and free a piece
 * DESCRIPTION
 *   torx_mstage_data returns where the piece ref that the task at src
 *   staged can be read. torx_mstage_release counts this reader's release;
 *   each reader releases each piece once, after its last read.
 * RETURN VALUE
 *   torx_mstage_data: the piece's first byte, or NULL when ref does not
 *   name a piece src staged and its readers have not all released (a
 *   malformed or stale descriptor), or the device has no such area.
 *   torx_mstage_release: none; it does nothing for such a ref.
 * SEE ALSO torx_mstage_put
 */
const void *torx_mstage_data(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref);
void torx_mstage_release(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref);

/* ---- Environment helpers (used by every layer) --------------------------- */

/* NAME     torx_env_shape - the torus shape of a job
 * DESCRIPTION
 *   Parses TORX_TORUS ("X", "XxY" or "XxYxZ", each 1..255) or, when unset or
 *   empty, derives the most balanced shape for ceil(ntasks /
 *   tasks_per_node) nodes. tasks_per_node becomes shape->t.
 * RETURN VALUE
 *   TORX_OK: *shape is set. TORX_ERR_ENV: TORX_TORUS malformed or with too
 *   few slots for the job, or no shape up to 255x255x255 fits (the message
 *   names the variable, value and reason). TORX_ERR_INVAL: shape NULL,
 *   ntasks < 1, or tasks_per_node outside 1..255.
 * SEE ALSO torx_map_from_env, torx_init
 */
torx_status_t torx_env_shape(int ntasks, int tasks_per_node, torx_shape_t *shape);

/* NAME     torx_env_int - read an integer environment variable strictly
 * DESCRIPTION
 *   Reads the variable name as a decimal integer in [lo, hi] into *out;
 *   def when it is unset or empty. The whole value must be the number (no
 *   blanks, no trailing characters).
 * RETURN VALUE
 *   TORX_OK. TORX_ERR_ENV: not an integer, or out of range (the message
 *   names the variable, its value and the range). TORX_ERR_INVAL: name or
 *   out NULL, or lo > hi.
 * SEE ALSO torx_env_choice
 */
torx_status_t torx_env_int(const char *name, long lo, long hi, long def, long *out);

/* NAME     torx_env_choice - read a word from a list in the environment
 * DESCRIPTION
 *   Looks the variable name up in the NULL-terminated list choices
 *   (case-sensitive) and sets *index to its position; def when it is unset
 *   or empty.
 * RETURN VALUE
 *   TORX_OK. TORX_ERR_ENV: not in the list (the message lists the choices).
 *   TORX_ERR_INVAL: name, choices or index NULL, or choices empty.
 * SEE ALSO torx_env_int
 */
torx_status_t torx_env_choice(const char *name, const char *const *choices, int def, int *index);

#ifdef __cplusplus
}
#endif

#endif /* TORX_PACKET_H */
