/* Packet-layer internals shared by the device-independent code and the
 * devices. Prefix: torxp_. */
#ifndef TORXP_INTERNAL_H
#define TORXP_INTERNAL_H

#include <torx/boot.h>
#include <torx/packet.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define TORXP_LIKELY(x) __builtin_expect(!!(x), 1)
#define TORXP_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TORXP_CACHELINE 64

/* A thread of libtorx (co mode's communication thread): a pthread on the
 * host; a device that runs tasks itself (sim) keeps its own handle in
 * dev_thread. */
typedef struct torxp_thread {
    pthread_t pthread;
    void *dev_thread;
} torxp_thread_t;

/* Work of the layers above that a device may charge to the task's core
 * (torxp_charge). */
typedef enum {
    TORXP_CPU_MATCH, /* a message matched: its handler ran; n = 1 */
    TORXP_CPU_COPY   /* n bytes copied by the message layer between a packet or staging area
                      * and a user buffer */
} torxp_cpu_event_t;

/* What every device provides. The packet layer's public calls are thin
 * wrappers over this table; a device fills it with designated initializers. */
typedef struct torxp_dev_ops {
    const char *name;
    torx_status_t (*inject)(torx_pkt_dev_t *dev, const torx_pkt_hdr_t *hdr, const struct iovec *iov,
                            int iovcnt);
    /* NULL: batches of one packet only (torx_pkt_inject_batch). Called
     * with packets checked to share a destination and be deterministic. */
    torx_status_t (*inject_batch)(torx_pkt_dev_t *dev, const torx_pkt_out_t *pkts, int n);
    int (*poll)(torx_pkt_dev_t *dev);
    const torx_pkt_hdr_t *(*peek)(torx_pkt_dev_t *dev);
    void (*consume)(torx_pkt_dev_t *dev);
    /* NULL: torx_pkt_peek_next is peek (devices with one queue) */
    const torx_pkt_hdr_t *(*peek_next)(torx_pkt_dev_t *dev);
    int (*room)(torx_pkt_dev_t *dev, torx_coord_t dest);
    torx_status_t (*wait)(torx_pkt_dev_t *dev, int timeout_ms);
    void (*wake)(torx_pkt_dev_t *dev);
    /* ch: a channel below TORX_CN_CHANNELS / TORX_GI_CHANNELS (checked
     * by packet.c) */
    torx_status_t (*cn_inject)(torx_pkt_dev_t *dev, unsigned ch, torx_cn_op_t op,
                               torx_cn_type_t type, int is_root, const void *data);
    torx_status_t (*cn_read)(torx_pkt_dev_t *dev, unsigned ch, void *result);
    torx_status_t (*gi_arm)(torx_pkt_dev_t *dev, unsigned ch);
    torx_status_t (*gi_poll)(torx_pkt_dev_t *dev, unsigned ch);
    /* flags: TORXP_BULK_F_* */
    torx_status_t (*bulk_get)(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer,
                              const void *remote, void *local, size_t len, unsigned flags);
    torx_status_t (*bulk_put)(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer, void *remote,
                              const void *local, size_t len);
    torx_status_t (*bulk_test)(torx_pkt_dev_t *dev, torx_bulk_t *op);
    const char *(*bulk_path)(const torx_pkt_dev_t *dev);
    unsigned (*bulk_cost)(const torx_pkt_dev_t *dev, torx_coord_t peer); /* NULL: 0 */
    size_t (*stage_max)(const torx_pkt_dev_t *dev);
    int (*stage_reaches)(const torx_pkt_dev_t *dev, torx_coord_t dest);
    torx_status_t (*stage_put)(torx_pkt_dev_t *dev, torx_coord_t dest, const void *data, size_t len,
                               torx_stage_ref_t *ref);
    const void *(*stage_data)(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref);
    void (*stage_release)(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref);
    void (*stage_unput)(torx_pkt_dev_t *dev, torx_coord_t dest, torx_stage_ref_t ref);
    int (*stage_idle)(torx_pkt_dev_t *dev, torx_coord_t dest);
    size_t (*stage_idle_max)(torx_pkt_dev_t *dev, torx_coord_t dest); /* NULL: SIZE_MAX */
    unsigned (*stage_cost)(const torx_pkt_dev_t *dev, torx_coord_t dest);
    /* multi-reader staging: NULL on a device without it */
    size_t (*mstage_max)(const torx_pkt_dev_t *dev);
    torx_status_t (*mstage_put)(torx_pkt_dev_t *dev, const void *data, size_t len, unsigned readers,
                                torx_stage_ref_t *ref);
    const void *(*mstage_data)(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref);
    void (*mstage_release)(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref);
    void (*close)(torx_pkt_dev_t *dev);
    /* Time, waiting and threads (docs/packet-layer.md#time-waiting-and-threads).
     * NULL: the host's own: CLOCK_MONOTONIC, nanosleep, sched_yield, a private
     * futex, pthreads. */
    double (*now_s)(const torx_pkt_dev_t *dev); /* seconds, full precision */
    void (*nap)(torx_pkt_dev_t *dev, uint64_t ns);
    void (*yield)(torx_pkt_dev_t *dev);
    /* Sleeps while *word == expected, at most timeout_ns (< 0: no limit);
     * TORX_OK when woken or the word differs, TORX_AGAIN on timeout. */
    torx_status_t (*word_wait)(torx_pkt_dev_t *dev, uint32_t *word, uint32_t expected,
                               int64_t timeout_ns);
    void (*word_wake)(torx_pkt_dev_t *dev, uint32_t *word); /* wakes every waiter */
    /* As word_wait, and also ends when a slot of the task's injection FIFO
     * frees. NULL: torxp_room_wait polls (a yield). */
    torx_status_t (*room_wait)(torx_pkt_dev_t *dev, uint32_t *word, uint32_t expected,
                               int64_t timeout_ns);
    torx_status_t (*thread_start)(torx_pkt_dev_t *dev, torxp_thread_t *thread, void *(*fn)(void *),
                                  void *arg);
    void (*thread_join)(torx_pkt_dev_t *dev, torxp_thread_t *thread);
    /* Charges the task's core for work the layer above did (sim only). */
    void (*charge)(torx_pkt_dev_t *dev, torxp_cpu_event_t ev, size_t n);
    /* Fills the network's description (torx_pkt_network): kind, costs. */
    void (*network)(const torx_pkt_dev_t *dev, torx_net_t *net);
} torxp_dev_ops_t;

/* torx_pkt_dev.caps: what the layers above may rely on.
 * TORXP_CAP_EXACT_WAIT: torx_pkt_wait returns exactly when a packet arrives
 * or a wake comes, and spinning costs simulated time: idle waiters go
 * straight to torx_pkt_wait / word_wait and do not spin or yield first. */
#define TORXP_CAP_EXACT_WAIT 0x1u
/* TORXP_CAP_MODELLED: the device's tasks are not processes of the host but
 * tasks of a modelled machine (sim): no binding to the host's cores. */
#define TORXP_CAP_MODELLED 0x2u
/* TORXP_CAP_NO_BULK: no bulk transfers (torx_bulk_get refuses): the layers
 * above move bulk data in packets (sim on a machine without DMA, BG/L). */
#define TORXP_CAP_NO_BULK 0x4u
/* TORXP_CAP_ONE_FIFO: all of a task's torus packets leave through one
 * injection FIFO, whatever their destination (sim, as on Blue Gene/L): an
 * injection that finds no room means none for any destination. */
#define TORXP_CAP_ONE_FIFO 0x8u
/* The caps of the device torx_pkt_open will open for device (NULL:
 * TORX_DEVICE), known before it opens: for what a task does first, such
 * as binding to its core. 0 for a name it does not know. */
unsigned torxp_device_caps(const char *device);

/* The base every device embeds first (container_of style). */
struct torx_pkt_dev {
    const torxp_dev_ops_t *ops;
    torx_shape_t shape;
    torx_coord_t self;
    int rank, size;       /* from the bootstrap */
    int verbose;          /* TORX_VERBOSE */
    unsigned caps;        /* TORXP_CAP_*; 0 on shm and ofi */
    uint64_t malformed;   /* received packets dropped by torxp_hdr_invalid */
    torx_status_t failed; /* an error the device cannot recover from, else TORX_OK */
};

/* 64 random bits for names that must differ between jobs (packet.c):
 * getrandom, or when it has none to give at once, the clock and the pid. */
uint64_t torxp_random64(void);

/* The host's monotonic clock, for the devices and the bootstraps only (shm,
 * ofi, boot_fork.c, boot_pmi.c): code above the devices reads the task's
 * clock, torxp_now_ns / torxp_now_s. In seconds, for deadlines and timeouts
 * (not the hot path). */
static inline double torxp_mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
/* The same clock in whole nanoseconds: one clock for every task of a host,
 * so one task's reading can travel to another (rzv_way.c's acks). */
static inline uint64_t torxp_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- Time, waiting and threads of the layers above the devices -------------------- *
 *
 * Everything outside the devices that reads a clock, sleeps, yields, waits
 * on a word or starts a thread goes through these, so that a device that
 * runs many tasks in one process in simulated time (sim) can take them
 * over (docs/packet-layer.md#time-waiting-and-threads). Each calls dev's
 * op, or where it has none (shm, ofi) the host's own (host_services.c). */

/* The task's clock in ns, and in seconds: monotonic; on the host
 * CLOCK_MONOTONIC, one clock for every task of a host, so one task's
 * reading can travel to another (rzv_way.c's acks). dev may be NULL: the
 * host's clock. */
static inline uint64_t torxp_now_ns(const torx_pkt_dev_t *dev)
{
    if (dev && TORXP_UNLIKELY(dev->ops->now_s != NULL))
        return (uint64_t)(dev->ops->now_s(dev) * 1e9 + 0.5);
    return torxp_mono_ns();
}

static inline double torxp_now_s(const torx_pkt_dev_t *dev)
{
    if (dev && TORXP_UNLIKELY(dev->ops->now_s != NULL))
        return dev->ops->now_s(dev);
    return torxp_mono_s();
}

/* Sleeps at least ns (the host: nanosleep, resumed after a signal). */
void torxp_nap(torx_pkt_dev_t *dev, uint64_t ns);
/* Lets other threads (tasks) run (the host: sched_yield). */
void torxp_yield(torx_pkt_dev_t *dev);
/* Sleeps while *word == expected, at most timeout_ns (< 0: no limit).
 * TORX_OK when woken or the word differs (or, on the host, a signal cut
 * the sleep short: callers recheck), TORX_AGAIN on timeout. The host's is
 * a process-private futex: waiter and waker are threads of one process. */
torx_status_t torxp_word_wait(torx_pkt_dev_t *dev, uint32_t *word, uint32_t expected,
                              int64_t timeout_ns);
/* Wakes every waiter on word (after the caller changed it). */
void torxp_word_wake(torx_pkt_dev_t *dev, uint32_t *word);
/* A sender whose injection FIFO is full waits for a slot, or for *word to
 * change, at most timeout_ns. On a device with exact waits that sleeps
 * until the slot frees (sim); elsewhere it is one yield, and the caller
 * polls again. */
torx_status_t torxp_room_wait(torx_pkt_dev_t *dev, uint32_t *word, uint32_t expected,
                              int64_t timeout_ns);
/* Starts fn(arg) in a thread of the task. The host's is a pthread that
 * takes no signals (they belong to the application's threads). TORX_OK, or
 * TORX_ERR_SYS with the reason recorded. */
torx_status_t torxp_thread_start(torx_pkt_dev_t *dev, torxp_thread_t *thread, void *(*fn)(void *),
                                 void *arg);
/* Waits for a thread torxp_thread_start started to return. */
void torxp_thread_join(torx_pkt_dev_t *dev, torxp_thread_t *thread);

/* Charges the task's core for n units of ev (sim only). Nothing but a
 * predictable branch on the other devices: the shm hot path calls it. */
static inline void torxp_charge(torx_pkt_dev_t *dev, torxp_cpu_event_t ev, size_t n)
{
    if (TORXP_UNLIKELY(dev->ops->charge != NULL))
        dev->ops->charge(dev, ev, n);
}

/* ---- Per-task state -------------------------------------------------------------- */

#define TORXP_ERRMSG_BYTES 512
#define TORXP_VERBOSE_UNREAD (-2)
/* Per-task state of libtorx outside any device: on the host one per thread;
 * a device that runs many tasks in one thread (sim) installs a hook that
 * returns the running task's (torxp_set_task_state_hook). */
typedef struct torxp_task_state {
    char last_error[TORXP_ERRMSG_BYTES];
    int verbose; /* TORX_VERBOSE as read, or -2: not read yet */
} torxp_task_state_t;
/* Makes ts a new task's state: no error, TORX_VERBOSE not read yet. */
static inline void torxp_task_state_init(torxp_task_state_t *ts)
{
    ts->last_error[0] = '\0';
    ts->verbose = TORXP_VERBOSE_UNREAD;
}
/* The running task's state: the hook's answer, or this thread's own (also
 * when the hook answers NULL: no task of its device runs now). */
torxp_task_state_t *torxp_task_state(void);
/* Installs hook (NULL: back to one state per thread). Process-wide: set it
 * once, before any task runs; each state it returns starts as
 * torxp_task_state_init makes it. */
void torxp_set_task_state_hook(torxp_task_state_t *(*hook)(void));

/* Fault injection (configure --enable-fault-injection, tests only):
 * TORX_FAULT_ALLOC=N makes the Nth allocation through torxp_malloc,
 * torxp_calloc or torxp_realloc fail, TORX_FAULT_INJECT=N the Nth
 * torx_pkt_inject fail hard. Without the option the hooks are constant 0. */
enum { TORXP_FAULT_ALLOC, TORXP_FAULT_INJECT, TORXP_FAULT_KINDS };
#ifdef TORX_FAULT_INJECTION
bool torxp_fault(int kind);
/* How many calls of kind this process made so far (tests size their sweeps). */
unsigned long torxp_fault_calls(int kind);
#define TORXP_FAULT(kind) TORXP_UNLIKELY(torxp_fault(kind))
#else
#define TORXP_FAULT(kind) 0
#endif

/* libtorx's allocations: malloc, calloc, realloc, with the fault hook. */
static inline void *torxp_malloc(size_t n)
{
    return TORXP_FAULT(TORXP_FAULT_ALLOC) ? NULL : malloc(n);
}

static inline void *torxp_calloc(size_t n, size_t size)
{
    return TORXP_FAULT(TORXP_FAULT_ALLOC) ? NULL : calloc(n, size);
}

static inline void *torxp_realloc(void *p, size_t n)
{
    return TORXP_FAULT(TORXP_FAULT_ALLOC) ? NULL : realloc(p, n);
}

/* Chaos (TORX_CHAOS) on every device: xorshift64*, cheap, seeded,
 * reproducible per task. */
static inline uint64_t torxp_chaos_next(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Reception fairness on every device: a queue drained TORXP_RX_BURST packets
 * in a row yields to the others, so one flooding sender cannot starve the
 * rest. A packet was just taken from queue q of nq; *next is where the next
 * scan starts, *burst the packets taken from it in a row. */
#define TORXP_RX_BURST 16
static inline void torxp_rx_burst(unsigned *next, unsigned *burst, unsigned q, unsigned nq)
{
    if (q != *next) {
        *next = q;
        *burst = 1;
    } else if (++*burst >= TORXP_RX_BURST) {
        *next = (q + 1) % nq;
        *burst = 0;
    }
}

/* Why h is not a header that torx_pkt_inject could have written in this
 * job, or NULL when it is. A reception FIFO is memory that every task of the
 * job writes, so a receiver checks a header's lengths before it trusts
 * them: a payload that does not fit the packet, chunks that disagree with
 * it, a destination off the torus, a deposit dimension beyond Z. */
static inline const char *torxp_hdr_invalid(const torx_pkt_hdr_t *h, torx_shape_t shape)
{
    if (TORXP_UNLIKELY(h->payload_len > TORX_PKT_MAX_PAYLOAD))
        return "payload longer than a packet holds";
    if (TORXP_UNLIKELY(h->chunks != torx_pkt_chunks_for(h->payload_len)))
        return "chunk count disagrees with the payload length";
    if (TORXP_UNLIKELY(!torx_coord_in_shape(shape, h->dest)))
        return "destination outside the torus";
    if (TORXP_UNLIKELY((h->ctl & TORX_PKT_DEPOSIT) && torx_pkt_hdr_deposit_dim(h) > TORX_DIM_Z))
        return "deposit dimension beyond Z";
    return NULL;
}

/* dev's inject_batch, or where it has none the one batch it can take: a
 * single packet (torx_pkt_inject_batch, packets already checked). */
static inline torx_status_t torxp_inject_batch(torx_pkt_dev_t *dev, const torx_pkt_out_t *pkts,
                                               int n)
{
    if (dev->ops->inject_batch)
        return dev->ops->inject_batch(dev, pkts, n);
    return n == 1 ? dev->ops->inject(dev, pkts[0].hdr, pkts[0].iov, pkts[0].iovcnt) : TORX_NO_ROOM;
}

/* Deposit lines, the same on every device. torxp_deposit_hops checks that
 * hdr (TORX_PKT_DEPOSIT set) names a line through dev's node: a dimension
 * 0..2, a destination on that line and not the sender's own node; it sets
 * *hops, the nodes the line visits (TORX_ERR_INVAL, naming what is wrong,
 * otherwise). torxp_deposit_hop_slot: the slot (torx_coord_index) of the
 * line's k-th node, 1 <= k <= hops, for the destination's t. */
torx_status_t torxp_deposit_hops(const torx_pkt_dev_t *dev, const torx_pkt_hdr_t *hdr,
                                 unsigned *hops);
unsigned torxp_deposit_hop_slot(const torx_pkt_dev_t *dev, const torx_pkt_hdr_t *hdr, unsigned k);
/* A deposit packet whose line is only partly delivered, the same on every
 * device: it waits here for the line's hops next_hop..hops, and everything
 * the task injects after it waits too, so order holds. torxp_deposit_stash
 * keeps hdr and the len payload bytes gathered from iov, to go on from hop
 * k of hops. */
typedef struct torxp_deposit_stash {
    unsigned next_hop, hops;
    torx_pkt_hdr_t hdr;
    uint8_t payload[TORX_PKT_MAX_PAYLOAD];
} torxp_deposit_stash_t;
void torxp_deposit_stash(torxp_deposit_stash_t *s, const torx_pkt_hdr_t *hdr,
                         const struct iovec *iov, int iovcnt, size_t len, unsigned k,
                         unsigned hops);

/* The collective network's ALU (cn_alu.c), the same for every device: acc
 * op= src lane by lane over one packet (TORX_CN_PACKET_BYTES), src read
 * through memcpy at any alignment; ADD wraps. torxp_cn_alu takes acc as
 * bytes too; the typed forms keep acc in lanes across many calls. Names
 * of ops and types for messages ("?" when out of range). */
void torxp_cn_alu64(unsigned op, int is_signed, uint64_t *restrict acc, const unsigned char *src);
void torxp_cn_alu32(unsigned op, int is_signed, uint32_t *restrict acc, const unsigned char *src);
void torxp_cn_alu(unsigned op, unsigned type, unsigned char *acc, const unsigned char *src);
const char *torxp_cn_op_name(unsigned op);
const char *torxp_cn_type_name(unsigned type);
/* The checks of torx_cn_inject's arguments and of a torx_cn_read (cn_alu.c),
 * the same for every device: TORX_OK, or TORX_ERR_INVAL with the message
 * recorded. read, injected: the rounds read and injected so far. */
torx_status_t torxp_cn_inject_check(torx_cn_op_t op, torx_cn_type_t type, int is_root,
                                    const void *data);
torx_status_t torxp_cn_read_check(const torx_pkt_dev_t *dev, uint64_t read, uint64_t injected,
                                  const void *result);
/* The same for the global interrupt: torx_gi_arm with the rounds armed and
 * completed so far, torx_gi_poll with the rounds armed. */
torx_status_t torxp_gi_arm_check(const torx_pkt_dev_t *dev, uint64_t armed, uint64_t complete);
torx_status_t torxp_gi_poll_check(const torx_pkt_dev_t *dev, uint64_t armed);

/* Options every device reads from the environment, parsed once in
 * torx_pkt_open so the errors are uniform. */
typedef struct torxp_env {
    long chaos_seed;       /* TORX_CHAOS; 0 = off */
    long fifo_packets;     /* TORX_FIFO_PACKETS */
    int bulk_mode;         /* TORX_BULK: TORXP_BULK_* */
    long verbose;          /* TORX_VERBOSE */
    long stage_bytes;      /* TORX_STAGE_BYTES; 0 = no staging area */
    long stage_rewind_max; /* TORX_STAGE_REWIND_MAX; 0 = pieces never rewind */
    long mstage_bytes;     /* TORX_MSTAGE_BYTES; 0 = no multi-reader staging */
    long bulk_share_min;   /* TORX_BULK_SHARE_MIN; 0 = gets not shared */
    long bulk_cost;        /* TORX_BULK_COST; 0 = measured at start-up */
} torxp_env_t;

enum { TORXP_BULK_AUTO, TORXP_BULK_CMA, TORXP_BULK_FIFO };

/* bulk_get flags: torx_bulk_get_shared (the device may ask the owner). */
#define TORXP_BULK_F_SHARE 0x1u

/* Shared gets (shm_bulk_shared.c): the least the reader or the owner
 * claims at a time, and the shortest get shared by default
 * (TORX_BULK_SHARE_MIN, docs/tuning.md). */
#define TORXP_BULK_SHARE_PIECE 65536u
#define TORXP_BULK_SHARE_MIN_DEFAULT 131072L
/* Staged pieces up to this many bytes rewind to the ring's start when it is
 * empty (shm_stage.c). On the development VMs a 1-3 KiB ping-pong took
 * 0.75-0.87 of its time rewinding and 4-16 KiB took 1.02-1.65 (the sender's
 * writes then wait for the receiver's copies of the same lines to be
 * invalidated, 64 or more lines a piece). */
#define TORXP_STAGE_REWIND_MAX_DEFAULT 3072L

torx_status_t torxp_env_read(torxp_env_t *env);

/* Device constructors. */
torx_status_t torxp_shm_open(const torx_pkt_attr_t *attr, const torxp_env_t *env,
                             torx_pkt_dev_t **dev);
/* The network devices (src/packet/net/net.h): what TORX_DEVICE=ofi opens
 * is torxp_net_hybrid_open(&torxp_ofi_kind, 0, ...), the ofi device with a
 * shm device for the tasks of one host when a host runs several. With
 * automatic (TORX_DEVICE=auto), a job whose tasks are all on one host gets
 * the shm device alone. */
typedef struct torxp_net_kind torxp_net_kind_t;
torx_status_t torxp_net_hybrid_open(const torxp_net_kind_t *kind, int automatic,
                                    const torx_pkt_attr_t *attr, const torxp_env_t *env,
                                    torx_pkt_dev_t **out);
/* The network devices' names; their code is in modules (net/net_module.c). */
extern const torxp_net_kind_t torxp_ofi_kind, torxp_ucx_kind;

/* ---- module.c: devices as loadable modules (docs/packet-layer.md#device-modules) */

/* What a device module (PKGLIBDIR/torx-dev-NAME.so, or in a directory of
 * TORX_DEVICE_PATH) exports, under the name TORXP_MODULE_SYMBOL. It shares
 * libtorx's internal structures, so it must come from the same build:
 * build and dev_size are checked before anything else is used. */
#define TORXP_MODULE_SYMBOL "torxp_module"
typedef struct torxp_module {
    const char *build; /* TORX_VERSION " (" TORX_COMMIT ")" of the module's build */
    size_t dev_size;   /* sizeof(torx_pkt_dev_t) there */
    const char *name;  /* "ofi": the file is torx-dev-ofi.so */
    const void *ops;   /* the device's own table: torxp_net_module_t, torxp_sim_module_t */
} torxp_module_t;

/* The descriptor, in the module's source (which includes torx_commit.h and
 * <torx/version.h>); the module's other symbols stay hidden
 * (-fvisibility=hidden). */
#define TORXP_MODULE(name_, ops_)                                                                  \
    __attribute__((visibility("default"))) extern const torxp_module_t torxp_module;               \
    const torxp_module_t torxp_module = {.build = TORX_VERSION " (" TORX_COMMIT ")",               \
                                         .dev_size = sizeof(torx_pkt_dev_t),                       \
                                         .name = (name_),                                          \
                                         .ops = (ops_)}

/* name's module into *out, loaded once per process and never unloaded; an
 * error naming the files when it cannot be loaded, is not a module, holds
 * another device or comes from another build. */
torx_status_t torxp_module_load(const char *name, const torxp_module_t **out);

#ifdef TORX_HAVE_SIMGRID
/* The sim device (src/packet/sim/), a module (torx-dev-sim.so) whose calls
 * libtorx makes through sim_module.c:
 *   open       the device, for a task of a simulated job only;
 *   run_tasks  torx_boot_fork_run's job as actors of this process
 *              (TORX_DEVICE=sim); its return value is torx_boot_fork_run's;
 *   run_main   torx_sim_run_main (torx-sim); keep_lo..keep_hi is libtorx's
 *              process-wide section (TORXP_PROCESS_WIDE), which the tasks
 *              share when libtorx is linked into the program;
 *   running    whether this process runs a simulated job now;
 *   boot_init  a task's bootstrap in that job;
 *   compute    torx_sim_compute. */
typedef struct torxp_sim_module {
    torx_status_t (*open)(const torx_pkt_attr_t *attr, const torxp_env_t *env,
                          torx_pkt_dev_t **dev);
    int (*run_tasks)(int ntasks, torx_task_main_fn task_main, void *arg);
    int (*run_main)(int (*main_fn)(int, char **, char **), int argc, char **argv, char **envp,
                    const char *keep_lo, const char *keep_hi);
    int (*running)(void);
    torx_status_t (*boot_init)(torx_boot_t *boot);
    torx_status_t (*compute)(double seconds);
} torxp_sim_module_t;

/* The same calls in libtorx, which load the module where they need it. */
torx_status_t torxp_sim_open(const torx_pkt_attr_t *attr, const torxp_env_t *env,
                             torx_pkt_dev_t **dev);
int torxp_sim_run_tasks(int ntasks, torx_task_main_fn task_main, void *arg);
int torxp_sim_running(void);
torx_status_t torxp_sim_boot_init(torx_boot_t *boot);
#endif

/* Mutable state that every task of a process shares, and that torx-sim
 * must not give each task a copy of when libtorx is linked into the
 * program (docs/sim.md#how-a-job-runs). */
#define TORXP_PROCESS_WIDE __attribute__((section("torx_process")))

/* Records a formatted error message for torx_last_error() and returns status.
 * Messages start with "torx: ". */
torx_status_t torxp_error(torx_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* *len: the payload iov gathers, checked against a packet's payload (every
 * device). TORX_OK, or TORX_ERR_INVAL recorded. */
static inline torx_status_t torxp_payload_len(const struct iovec *iov, int iovcnt, size_t *len)
{
    size_t n = 0;
    for (int i = 0; i < iovcnt; i++)
        n += iov[i].iov_len;
    *len = n;
    if (TORXP_UNLIKELY(n > TORX_PKT_MAX_PAYLOAD))
        return torxp_error(TORX_ERR_INVAL, "torx: packet payload of %zu bytes exceeds %d", n,
                           TORX_PKT_MAX_PAYLOAD);
    return TORX_OK;
}

/* The checks of torx_pkt_inject's arguments that every message device makes
 * (ofi, sim): the payload fits a packet (torxp_payload_len), and the
 * destination is on the torus. TORX_OK, or TORX_ERR_INVAL recorded. */
static inline torx_status_t torxp_inject_check(const torx_pkt_dev_t *dev, const torx_pkt_hdr_t *hdr,
                                               const struct iovec *iov, int iovcnt, size_t *len)
{
    const torx_status_t rc = torxp_payload_len(iov, iovcnt, len);
    if (TORXP_UNLIKELY(rc != TORX_OK))
        return rc;
    if (TORXP_UNLIKELY(!torx_coord_in_shape(dev->shape, hdr->dest)))
        return torxp_error(TORX_ERR_INVAL, "torx: destination (%u,%u,%u,%u) is outside the torus",
                           hdr->dest.x, hdr->dest.y, hdr->dest.z, hdr->dest.t);
    return TORX_OK;
}

/* The start-up vote (status.c): every task of boot says whether its part
 * went well (mine); TORX_OK when all did. Otherwise the first task that
 * failed is named with its host and its own message ("rank 2 on host b
 * failed to <what>: <its message>"), recorded for torx_last_error(), and
 * the result is mine, or TORX_ERR_PEER for a task that did well. Costs one
 * allgather of a status per task, and one more only when a task failed. */
torx_status_t torxp_boot_vote(torx_boot_t *boot, torx_status_t mine, const char *what);

/* Logs a line to stderr, prefixed "torx[rank]: ", when level <= verbose.
 * Level 0 lines (warnings) always print. */
void torxp_log(const torx_pkt_dev_t *dev, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Errors of every device (status.c). torxp_dev_fail: dev cannot go on (a
 * reply a peer waits for could not be queued, a provider failed, a
 * transfer's own state was overwritten): the first such error is kept in
 * dev->failed, which the message layer's advance reports, recorded for
 * torx_last_error() and logged; later ones only return st. So the task
 * ends with this message instead of leaving a peer waiting or writing to a
 * wrong address. torxp_dev_malformed: a received packet or device message
 * that no torx task would send: counted in dev->malformed, recorded and
 * logged as a protocol error, and dropped by the caller. Nothing of it is
 * trusted, and the transfer it names, if any, is left as it was. */
torx_status_t torxp_dev_fail(torx_pkt_dev_t *dev, torx_status_t st, const char *fmt, ...)
    __attribute__((cold, format(printf, 3, 4)));
void torxp_dev_malformed(torx_pkt_dev_t *dev, const char *fmt, ...)
    __attribute__((noinline, cold, format(printf, 2, 3)));

#endif /* TORXP_INTERNAL_H */
