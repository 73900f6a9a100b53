/* The shm device: Blue Gene network hardware emulated in one shared segment
 * per job. Prefix: torxp_shm_.
 *
 * Segment layout (every reference is an offset from the segment base, so the
 * segment may map at different addresses in each task):
 *
 *   seg header     magic, version, shape, sizes, region offsets, attach count
 *   task table     one torxp_shm_task_t per torus slot (x*y*z*t), by
 *                  torx_coord_index(): pid, rank, state
 *   cn region      collective-network rounds (shm_cn.c)
 *   gi region      global-interrupt barrier (shm_cn.c)
 *   fifo region    per slot, fifos_per_task reception FIFOs (shm_fifo.h)
 *   stage region   per ordered pair of ranks (src, dst), a staging ring of
 *                  stage_bytes after a control block (shm_stage.c); absent
 *                  when stage_bytes is 0
 *   mstage region  per rank, the multi-reader staging ring it writes
 *                  (shm_mstage.c); absent when mstage_bytes is 0
 *   share region   per slot, one line: the long get its task offers to
 *                  share with the owner of the source (shm_bulk_shared.c)
 */
#ifndef TORXP_SHM_H
#define TORXP_SHM_H

#include "../pkt_internal.h"
#include "shm_fifo.h"

#include <assert.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>

#define TORXP_SHM_MAGIC 0x746f72787368ULL /* "torxsh" */
#define TORXP_SHM_VERSION 7u
#define TORXP_SHM_NAME_MAX 64

/* Every task's probe word holds this, so a peer can test cross-memory
 * attach by reading it (shm_bulk_setup.c). */
#define TORXP_SHM_PROBE_VALUE 0x746f72782d70726fULL

/* Reception FIFOs per task. Deterministic packets from one sender are pinned
 * to one of them; adaptive packets may take any (chaos), which is what makes
 * them arrive out of order. */
#define TORXP_SHM_FIFOS_PER_TASK 4

typedef struct torxp_shm_seg_hdr {
    uint64_t magic;
    uint32_t version;
    uint32_t header_bytes; /* sizeof(torxp_shm_seg_hdr_t), checked at attach */
    uint64_t total_bytes;
    torx_shape_t shape;
    uint32_t ntasks;         /* tasks in the job (attachers expected) */
    uint32_t nslots;         /* torx_shape_slots(shape) */
    uint32_t fifos_per_task; /* TORXP_SHM_FIFOS_PER_TASK */
    uint32_t fifo_packets;   /* slots per FIFO, power of two */
    uint32_t fifo_packets_log2;
    uint64_t task_table_off;
    uint64_t cn_off;
    uint64_t gi_off;
    uint64_t fifo_off;
    uint64_t fifo_stride; /* bytes per FIFO, control lines included */
    uint64_t stage_off;
    uint64_t stage_stride; /* bytes per staging ring, control block included */
    uint32_t stage_bytes;  /* data bytes per staging ring; 0: no staging */
    uint32_t stage_pad;
    uint64_t mstage_off;
    uint64_t mstage_stride; /* bytes per multi-reader ring */
    uint32_t mstage_bytes;  /* TORX_MSTAGE_BYTES as fitted to the job; 0: none */
    uint32_t mstage_pad;
    uint64_t share_off; /* one torxp_shm_share_t per slot */
    char name[TORXP_SHM_NAME_MAX];
    /* Incremented by each attaching task; the one that brings it to ntasks
     * unlinks the name. Own cache line: every task writes it once. */
    alignas(TORXP_CACHELINE) uint32_t attached;
} torxp_shm_seg_hdr_t;

enum { TORXP_SHM_TASK_EMPTY = 0, TORXP_SHM_TASK_ATTACHED = 1 };

/* One line per task slot. Injectors read it on every packet (state), so the
 * doorbell lives here too: testing sleeping costs no extra cache miss, and
 * the line is written only when the task goes to sleep or is woken. */
typedef struct torxp_shm_task {
    alignas(TORXP_CACHELINE) uint32_t state; /* TORXP_SHM_TASK_*; claimed by CAS */
    int32_t pid;
    int32_t rank;
    /* Doorbell (torxp_shm_wait): non-zero while the task's receiving thread
     * sleeps or is about to; an injector that sees it bumps doorbell and
     * wakes the futex on it. */
    uint32_t sleeping;
    uint64_t probe_word; /* address in the task of a known word, for the CMA probe */
    uint32_t doorbell;   /* futex word: bumped by every wake */
    uint32_t flags;      /* TORXP_SHM_TASK_F_* */
    uint32_t bulk_cost;  /* torx_bulk_cost as this task measured it; 0: not (yet) */
} torxp_shm_task_t;

/* torxp_shm_task_t.flags: registered for membarrier(GLOBAL_EXPEDITED), so a
 * waiter's membarrier is a full barrier in this task's threads too. */
#define TORXP_SHM_TASK_F_MEMBARRIER 0x1u
/* torxp_shm_task_t.flags: the task scatters adaptive packets over the
 * reception FIFOs (TORX_CHAOS), so it may write any FIFO of a peer. */
#define TORXP_SHM_TASK_F_CHAOS 0x2u

static_assert(sizeof(torxp_shm_task_t) == TORXP_CACHELINE, "task entry is one cache line");
static_assert(sizeof(torxp_shm_seg_hdr_t) % TORXP_CACHELINE == 0, "header fills lines");

/* A bulk transfer in progress, kept inside the caller's torx_bulk_t. It
 * starts with its magic, by which the hybrid ofi device tells the shm
 * device's operations from its own (net/net_hybrid.c). */
#define TORXP_SHM_BULK_MAGIC 0x626c6b31u /* "blk1" */
typedef struct torxp_shm_bulk {
    uint32_t magic; /* TORXP_SHM_BULK_MAGIC while in flight or done */
    uint32_t done;
    uint64_t len;
    uint64_t local;  /* local address */
    uint64_t remote; /* remote address */
    torx_coord_t peer;
    uint32_t is_put;
    uint64_t sent; /* bytes streamed so far (fifo path) */
} torxp_shm_bulk_t;
static_assert(sizeof(torxp_shm_bulk_t) <= sizeof(torx_bulk_t), "bulk op fits torx_bulk_t");

/* Samples behind torx_stage_cost (shm_stage.c). */
#define TORXP_SHM_STAGE_COSTS 4

/* A long cma get that its reader offers to share with the task whose memory
 * it reads (shm_bulk_shared.c): one line per slot, written by the
 * reader, claimed from by both. */
#define TORXP_SHM_SHARE_OFF_BITS 40 /* claim: the low bits count bytes */
typedef struct torxp_shm_share {
    /* seq << 40 | the bytes claimed so far */
    alignas(TORXP_CACHELINE) uint64_t claim;
    uint64_t helped;        /* bytes the owner has written */
    uint64_t abandoned;     /* 1 + the offset of bytes the owner claimed but could not write */
    uint64_t abandoned_len; /* and how many */
    uint64_t src;           /* the source, in the owner's address space */
    uint64_t dst;           /* the destination, in the reader's */
    uint64_t len;
    uint32_t owner; /* slot of the task asked to help */
    uint32_t pad;
} torxp_shm_share_t;
static_assert(sizeof(torxp_shm_share_t) == TORXP_CACHELINE, "a share record is one line");

typedef struct torxp_shm_dev torxp_shm_dev_t;

struct torxp_shm_dev {
    torx_pkt_dev_t base;
    torxp_shm_seg_hdr_t *seg;
    size_t seg_bytes;
    torxp_shm_task_t *tasks;
    /* The rank in each torus slot, -1 where no task attached: a private
     * copy of the task table, made once the start-up vote has completed it
     * (torxp_shm_tx_setup), so a lookup reads no shared line. */
    int32_t *slot_rank;
    unsigned self_index; /* torx_coord_index(shape, self) */
    unsigned nslots;

    /* torus */
    torxp_fifo_geom_t geom;
    uint64_t *cached_head; /* per destination FIFO (nslots*fifos): last head seen */
    int cur_fifo;          /* FIFO holding the peeked packet, -1 when none */
    int last_fifo;         /* FIFO of the last consumed packet (peek_next), -1: none */
    /* 1: no reception FIFO of the job has two producers (every FIFO index
     * has at most one task of the segment, and no task scatters adaptive
     * packets), so a producer reserves a slot with a store instead of a
     * compare-and-swap (torxp_shm_tx_setup). */
    int sole_producer;
    /* This task's reading position in each of its reception FIFOs, and how
     * many pops it has not yet published to the producers; with the FIFO,
     * the slot at head and the tag that marks it full precomputed, so an
     * idle scan is a load and a compare per FIFO (torxp_shm_rx_setup). */
    struct {
        uint64_t head;
        uint32_t unpublished;
        uint8_t tag;
        torx_pkt_hdr_t *slot;
        torxp_fifo_t *fifo;
    } rx[TORXP_SHM_FIFOS_PER_TASK];
    uint32_t rx_batch;  /* pops per head publication */
    unsigned next_fifo; /* where the next scan starts */
    unsigned burst;     /* packets taken in a row from next_fifo */
    uint64_t chaos_rx;  /* xorshift state of the reception scan; 0 = chaos off */
    uint32_t bell_seen; /* doorbell value at the end of the last wait */
    /* 1: every task registered for membarrier(GLOBAL_EXPEDITED), so a sleep
     * is exact (see shm_torus.c); 0: sleeps are cut into short slices. */
    int bell_exact;

    /* Injection state: cached heads (above), the chaos of pick_fifo and the
     * stash. With TORX_PKT_SHARED_INJECT two threads inject, and all of it
     * is touched only under tx_lock, which sits on its own line. */
    int shared_inject;                         /* TORX_PKT_SHARED_INJECT: take tx_lock */
    alignas(TORXP_CACHELINE) uint32_t tx_lock; /* 0 free, 1 held */
    /* A deposit packet whose line is only partly delivered: the rest waits
     * in stash and everything injected after it waits too, so order holds.
     * stash_active is written under the lock but read (atomically) without
     * it, so a poll in the other thread takes the lock only when needed. */
    uint32_t stash_active;
    uint64_t chaos; /* xorshift state of pick_fifo; 0 = chaos off */
    /* The destination of the last packet that took its FIFO by sender
     * (pick_fifo without chaos), checked, with that FIFO and its cached
     * head: a packet to it again skips the checks and the lookups. */
    struct {
        uint32_t dest;     /* the coordinate's bytes; UINT32_MAX: none */
        unsigned ctl_mask; /* packets with these ctl bits do not use it */
        unsigned slot;
        torxp_fifo_t *fifo;
        uint64_t *cached_head;
    } tx_memo;
    torxp_deposit_stash_t stash;

    /* collective network and global interrupt (shm_cn.c); a new line, away
     * from the injection state */
    alignas(TORXP_CACHELINE) void *cn;
    uint64_t cn_injected[TORX_CN_CHANNELS], cn_read[TORX_CN_CHANNELS];
    void *gi;
    uint64_t gi_armed[TORX_GI_CHANNELS];

    /* staging (shm_stage.c): this task's write position and its view of the
     * receiver's release count, per destination rank; its read position,
     * per source rank. Positions count bytes since the start of the job. */
    uint32_t stage_bytes;      /* per ring, 0 when off */
    uint32_t stage_rewind_max; /* pieces up to this long rewind (TORX_STAGE_REWIND_MAX) */
    /* the last coordinate the staging (tx) and the receiving (rx) thread
     * named, packed, and its rank: a pair's calls skip the translation */
    struct torxp_shm_stage_memo {
        uint32_t coord;
        int rank;
    } stage_tx_memo, stage_rx_memo;
    struct torxp_shm_stage_tx {
        uint64_t wr, seen;
        uint64_t undo;      /* wr before the last put, +1; 0 when none to undo */
        uint32_t cost_next; /* torx_stage_cost: where the next sample goes */
        uint32_t cost_skip; /* pieces long enough to time, timed or not */
        /* the last samples, ns per KiB; 0: none */
        uint16_t cost[TORXP_SHM_STAGE_COSTS];
        uint8_t mapped; /* its pages are in this task's page tables */
        /* pieces from that rank read since the last put toward it, up to
         * 2 (written by the receiving thread: atomic) */
        uint8_t heard;
        uint8_t *data;      /* the ring toward that rank */
        uint64_t *released; /* its control block */
    } * stage_tx;
    struct torxp_shm_stage_rx {
        uint64_t rd;
        /* the piece torx_stage_data last returned (ref packed, 0: none)
         * and its position, for its release */
        uint64_t taken_ref, taken_pos;
        uint8_t mapped;
        const uint8_t *data; /* the ring from that rank */
        uint64_t *released;
    } * stage_rx;

    /* multi-reader staging (shm_mstage.c): this task's own ring, and the
     * positions since the start of the job of its next piece (head) and of
     * its oldest piece not yet released by every reader (tail) */
    uint32_t mstage_bytes; /* 0 when off */
    uint64_t mstage_ring;  /* bytes in each task's ring, headers included */
    uint64_t mstage_head, mstage_tail;

    /* bulk (shm_bulk.h) */
    int bulk_cma;                  /* 1: process_vm_readv/writev; 0: FIFO streaming */
    unsigned bulk_cost;            /* this task's torx_bulk_cost, measured at setup (cma); 0: not */
    struct torxp_shm_serve *serve; /* fifo path: get requests being streamed */
    unsigned bulk_jobs;            /* jobs on serve's list: poll resumes them when non-zero */
    uint64_t probe_word;
    /* shared gets (shm_bulk_shared.c): the records, by slot; gets of share_min
     * bytes or more are offered (0: none); this task's last offer; counts
     * for TORX_VERBOSE and the tests */
    torxp_shm_share_t *share;
    uint64_t share_min;
    uint32_t share_seq;
    uint64_t shared_gets, bytes_helped, bytes_written_for_us;
};

static_assert(offsetof(torxp_shm_dev_t, tx_lock) % TORXP_CACHELINE == 0 &&
                  offsetof(torxp_shm_dev_t, cn) % TORXP_CACHELINE == 0,
              "the injection state has cache lines of its own");

static inline torxp_shm_dev_t *torxp_shm_of(torx_pkt_dev_t *dev)
{
    return (torxp_shm_dev_t *)dev; /* base is the first member */
}

static inline void *torxp_shm_at(const torxp_shm_dev_t *d, uint64_t off)
{
    return (char *)d->seg + off;
}

/* The rank of the task at c, or -1 when c is off the torus or holds none. */
static inline int torxp_shm_rank_at(const torxp_shm_dev_t *d, torx_coord_t c)
{
    if (TORXP_UNLIKELY(!torx_coord_in_shape(d->base.shape, c)))
        return -1;
    return d->slot_rank[torx_coord_index(d->base.shape, c)];
}

/* FIFO f (0..fifos_per_task-1) of the task in torus slot. */
static inline torxp_fifo_t *torxp_shm_fifo(const torxp_shm_dev_t *d, unsigned slot, unsigned f)
{
    return (torxp_fifo_t *)torxp_shm_at(
        d, d->seg->fifo_off + ((uint64_t)slot * d->seg->fifos_per_task + f) * d->seg->fifo_stride);
}

/* Collective network and global interrupt (shm_cn.c). The segment creator
 * reserves *_bytes(ntasks) and calls *_init on zeroed memory. Participants
 * are the job's ranks 0..ntasks-1 (base.rank). */
size_t torxp_shm_cn_bytes(unsigned ntasks);
void torxp_shm_cn_init(void *region, unsigned ntasks);
torx_status_t torxp_shm_cn_inject(torx_pkt_dev_t *dev, unsigned ch, torx_cn_op_t op,
                                  torx_cn_type_t type, int is_root, const void *data);
torx_status_t torxp_shm_cn_read(torx_pkt_dev_t *dev, unsigned ch, void *result);
size_t torxp_shm_gi_bytes(unsigned ntasks);
void torxp_shm_gi_init(void *region, unsigned ntasks);
torx_status_t torxp_shm_gi_arm(torx_pkt_dev_t *dev, unsigned ch);
torx_status_t torxp_shm_gi_poll(torx_pkt_dev_t *dev, unsigned ch);

/* Bulk transfer (shm_bulk.h names the files). */
/* Chooses the bulk path (TORX_BULK) and, on cma, offers gets of share_min
 * bytes or more to be shared (TORX_BULK_SHARE_MIN; 0: none). */
torx_status_t torxp_shm_bulk_setup(torxp_shm_dev_t *d, int bulk_mode, long share_min, long cost);
unsigned torxp_shm_bulk_cost(const torx_pkt_dev_t *dev, torx_coord_t peer);
torx_status_t torxp_shm_bulk_get(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer,
                                 const void *remote, void *local, size_t len, unsigned flags);
torx_status_t torxp_shm_bulk_put(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer,
                                 void *remote, const void *local, size_t len);
torx_status_t torxp_shm_bulk_test(torx_pkt_dev_t *dev, torx_bulk_t *op);
const char *torxp_shm_bulk_path(const torx_pkt_dev_t *dev);
/* Handles a device-internal (TORX_PKT_SYS) packet; the caller consumes it. */
void torxp_shm_bulk_on_sys(torxp_shm_dev_t *d, const torx_pkt_hdr_t *pkt);
/* Streams pending fifo-path get replies; called from poll. */
void torxp_shm_bulk_progress(torxp_shm_dev_t *d);
/* Whether bulk packets wait for room in a peer's FIFO: a field, since
 * every poll asks. */
static inline bool torxp_shm_bulk_pending(const torxp_shm_dev_t *d)
{
    return d->bulk_jobs != 0;
}
void torxp_shm_bulk_fini(torxp_shm_dev_t *d);

/* The bytes of each of a region's rings: want, halved until the region's
 * rings total at most total_max; 0 (the region left out) when want is 0
 * or that leaves less than min. */
static inline uint32_t torxp_shm_fit_rings(long want, uint64_t rings, uint64_t total_max,
                                           uint32_t min)
{
    uint64_t bytes = want > 0 ? (uint64_t)want : 0;
    while (bytes >= min && rings * bytes > total_max)
        bytes /= 2;
    return bytes >= min ? (uint32_t)bytes : 0;
}

/* Maps the segment's pages under [p, p+len) into this task's page tables
 * now, the whole pages around it included, so that traffic through them
 * takes no page fault a page on its first lap (shm_segment.c). Best
 * effort: before Linux 5.14 (no MADV_POPULATE_WRITE) the pages fault in as
 * they are first touched. */
void torxp_shm_populate(const void *p, size_t len);

/* Staging (shm_stage.c). The layout's per-ring data bytes for a job of
 * ntasks with TORX_STAGE_BYTES=want (0 when staging is off), the control
 * block ahead of each ring, and the ops. */
#define TORXP_SHM_STAGE_CTL 128u
uint32_t torxp_shm_stage_bytes(unsigned ntasks, long want);
torx_status_t torxp_shm_stage_setup(torxp_shm_dev_t *d, long rewind_max);
void torxp_shm_stage_fini(torxp_shm_dev_t *d);
size_t torxp_shm_stage_max(const torx_pkt_dev_t *dev);
int torxp_shm_stage_reaches(const torx_pkt_dev_t *dev, torx_coord_t dest);
torx_status_t torxp_shm_stage_put(torx_pkt_dev_t *dev, torx_coord_t dest, const void *data,
                                  size_t len, torx_stage_ref_t *ref);
const void *torxp_shm_stage_data(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref);
void torxp_shm_stage_release(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref);
void torxp_shm_stage_unput(torx_pkt_dev_t *dev, torx_coord_t dest, torx_stage_ref_t ref);
int torxp_shm_stage_idle(torx_pkt_dev_t *dev, torx_coord_t dest);
unsigned torxp_shm_stage_cost(const torx_pkt_dev_t *dev, torx_coord_t dest);

/* Multi-reader staging (shm_mstage.c). The layout's TORX_MSTAGE_BYTES for
 * a job of ntasks (0 when off), each ring's bytes, and the ops. */
uint32_t torxp_shm_mstage_bytes(unsigned ntasks, long want);
uint64_t torxp_shm_mstage_stride(uint32_t mstage_bytes);
void torxp_shm_mstage_setup(torxp_shm_dev_t *d);
size_t torxp_shm_mstage_max(const torx_pkt_dev_t *dev);
torx_status_t torxp_shm_mstage_put(torx_pkt_dev_t *dev, const void *data, size_t len,
                                   unsigned readers, torx_stage_ref_t *ref);
const void *torxp_shm_mstage_data(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref);
void torxp_shm_mstage_release(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref);

/* Torus (shm_torus.c); shm_bulk_fifo.c injects its device-internal packets
 * through torxp_shm_inject too. */
torx_status_t torxp_shm_inject(torx_pkt_dev_t *dev, const torx_pkt_hdr_t *hdr,
                               const struct iovec *iov, int iovcnt);
torx_status_t torxp_shm_inject_batch(torx_pkt_dev_t *dev, const torx_pkt_out_t *pkts, int n);
/* Aims the reception cursors at the FIFOs (after the segment is mapped). */
void torxp_shm_rx_setup(torxp_shm_dev_t *d);
/* Doorbell: registration at open (before the start-up vote; sets the task's
 * TORXP_SHM_TASK_F_MEMBARRIER), the job-wide choice after it, sleep until a
 * packet may have come, wake this task's sleeper. */
void torxp_shm_bell_register(torxp_shm_dev_t *d);
void torxp_shm_bell_setup(torxp_shm_dev_t *d);
torx_status_t torxp_shm_wait(torx_pkt_dev_t *dev, int timeout_ms);
void torxp_shm_wake(torx_pkt_dev_t *dev);
int torxp_shm_poll(torx_pkt_dev_t *dev);
const torx_pkt_hdr_t *torxp_shm_peek(torx_pkt_dev_t *dev);
void torxp_shm_consume(torx_pkt_dev_t *dev);
const torx_pkt_hdr_t *torxp_shm_peek_next(torx_pkt_dev_t *dev);
torx_status_t torxp_shm_tx_setup(torxp_shm_dev_t *d);
int torxp_shm_room(torx_pkt_dev_t *dev, torx_coord_t dest);
void torxp_shm_chaos_seed(torxp_shm_dev_t *d, long seed);

#endif /* TORXP_SHM_H */
