/* The shm device's collective network (combine/broadcast over every task)
 * and global interrupt (barrier).
 *
 * Channels: each of TORX_CN_CHANNELS (TORX_GI_CHANNELS) has its own copy of
 * everything below, its own task blocks and round numbers, so its rounds
 * pair up among themselves whatever order a task interleaves channels in
 * (nonblocking collectives of different communicators, docs/collectives.md).
 *
 * Collective network
 * ------------------
 * A pipeline of TORXP_CN_DEPTH rounds; round r lives in slot r % DEPTH.
 * Every task owns one block in the region:
 *
 *   done line     rounds this task has read (owner stores, injectors load)
 *   private line  owner-only bookkeeping (see below)
 *   DEPTH slots   per slot: a descriptor line (seq, op, type, is_root, used,
 *                 and the payload's first 48 bytes) and four lines for the
 *                 rest of the 256-byte payload, stored only as far as `used`
 *                 (the last nonzero byte, in 8-byte steps): an 8-byte
 *                 allreduce moves one line per task, not five
 *
 * inject(r): write the descriptor and payload into slot r % DEPTH of our
 * own block, then publish seq = r + 1 (release). No shared counter is
 * touched: a contribution costs stores to lines only this task writes.
 * read(r): wait until every task's slot shows seq == r + 1 (acquire), then
 * combine all contributions in rank order, locally. Every task runs the same
 * deterministic combine on the same bytes, so all get the same result (or
 * the same disagreement error). Finally publish done = r + 1 (release).
 *
 * Why every task combines instead of one combiner writing a shared result:
 * the reader waits on the contributions themselves, so a result needs one
 * hand-off (writer's lines -> reader) instead of two (contributions ->
 * combiner -> result line -> readers), and no read-modify-write is ever done
 * on a contended counter. With two tasks a round moves five lines each way.
 * The extra work (ntasks * 256 bytes of ALU per task) is small next to a
 * cache-line transfer for the job sizes one host runs.
 *
 * Why one seq word after the payload, not one per line: a reader polling
 * all five lines pulls them back while the writer is still filling them,
 * and measured slower (bench/cn_bench, 2 tasks: about 10% on allreduce,
 * 20-40% on the double sum). Deeper pipelines (8, 16) measured the same as 4.
 *
 * Slot reuse: round r may overwrite slot r % DEPTH once every task has read
 * round r - DEPTH, i.e. r < min(done) + DEPTH. The injector caches that bound
 * (free_below) and rescans the done words only when the cache says "full",
 * so the fast path reads nothing shared. When the rescan still says full,
 * the task is DEPTH rounds ahead of the slowest reader: TORX_NO_ROOM.
 *
 * Round numbers are 64-bit and never wrap; seq is r + 1 so that zeroed
 * memory (0) never looks like a published round.
 *
 * Global interrupt
 * ----------------
 * Each task owns an "armed" word holding the latest barrier round it
 * entered. arm() stores round k (release); poll() is done when every task's
 * word is >= k (acquire). Words only grow, so a fast task arming round k+1
 * before a slow one finished polling round k still satisfies ">= k": the
 * barrier is reusable back to back with no reset, generation or sense bit,
 * and no read-modify-write. Arming round k+1 before this task's poll
 * reported round k complete is refused (TORX_ERR_INVAL): leaving a barrier
 * without having seen everyone arrive would break its guarantee.
 *
 * Owner-private bookkeeping (scan cursors, cached bounds) sits in the shared
 * region on a line of its own, next to the owner's block, because the
 * device struct has no field for it; no other task touches that line.
 */
#include "shm.h"

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define TORXP_CN_DEPTH 4u                    /* rounds in flight; a power of two */
#define TORXP_CN_MAGIC 0x746f7278636e3031ULL /* "torxcn01" */
#define TORXP_GI_MAGIC 0x746f7278676931ULL   /* "torxgi1" */
#define TORXP_CN_LANES64 (TORX_CN_PACKET_BYTES / 8)
#define TORXP_CN_LANES32 (TORX_CN_PACKET_BYTES / 4)

static_assert((TORXP_CN_DEPTH & (TORXP_CN_DEPTH - 1)) == 0, "depth is a power of two");

/* Written once by init, read-only afterwards. */
typedef struct torxp_cn_hdr {
    alignas(TORXP_CACHELINE) uint64_t magic;
    uint32_t ntasks;
    uint32_t depth;
    uint64_t task_bytes; /* stride between task blocks, for layout checks */
} torxp_cn_hdr_t;

static_assert(sizeof(torxp_cn_hdr_t) == TORXP_CACHELINE, "cn header is one line");

/* Payload bytes that travel in the descriptor line. */
#define TORXP_CN_HEAD 48u

/* One task's contribution to one round. */
typedef struct torxp_cn_slot {
    /* Descriptor line: written by the owner, read by every task. */
    alignas(TORXP_CACHELINE) uint64_t seq; /* round + 1 once published */
    uint8_t op;                            /* torx_cn_op_t */
    uint8_t type;                          /* torx_cn_type_t */
    uint8_t is_root;                       /* BCAST only; 0 for every other op */
    uint8_t pad;
    uint32_t used;                     /* payload bytes past which all are zero */
    unsigned char head[TORXP_CN_HEAD]; /* payload bytes 0..47 */
    /* Payload lines: written by the owner, read by every task, and only as
     * far as `used` says. */
    alignas(TORXP_CACHELINE) unsigned char tail[TORX_CN_PACKET_BYTES - TORXP_CN_HEAD];
} torxp_cn_slot_t;

static_assert(offsetof(torxp_cn_slot_t, tail) == TORXP_CACHELINE,
              "the descriptor and the payload's head fill one line");
static_assert(sizeof(torxp_cn_slot_t) == TORXP_CACHELINE + TORX_CN_PACKET_BYTES,
              "cn slot is a descriptor line plus four payload lines");

typedef struct torxp_cn_task {
    /* Read by injecting tasks when their cached bound runs out. */
    alignas(TORXP_CACHELINE) uint64_t done; /* rounds read by this task */
    /* Owner-private. */
    alignas(TORXP_CACHELINE) uint64_t free_below; /* rounds < this may be injected */
    uint32_t scan; /* tasks already seen to have contributed to round cn_read */
    torxp_cn_slot_t slot[TORXP_CN_DEPTH];
} torxp_cn_task_t;

static_assert(sizeof(torxp_cn_task_t) ==
                  2 * TORXP_CACHELINE + TORXP_CN_DEPTH * sizeof(torxp_cn_slot_t),
              "cn task block: done line, private line, slots");

typedef struct torxp_gi_hdr {
    alignas(TORXP_CACHELINE) uint64_t magic;
    uint32_t ntasks;
} torxp_gi_hdr_t;

static_assert(sizeof(torxp_gi_hdr_t) == TORXP_CACHELINE, "gi header is one line");

typedef struct torxp_gi_task {
    /* Owner stores, every task loads. */
    alignas(TORXP_CACHELINE) uint64_t armed; /* latest round entered */
    /* Owner-private. */
    alignas(TORXP_CACHELINE) uint64_t complete; /* latest round seen complete */
    uint32_t scan;                              /* tasks already seen in round `armed` */
} torxp_gi_task_t;

static_assert(sizeof(torxp_gi_task_t) == 2 * TORXP_CACHELINE, "gi task: shared line, private line");

/* ---- helpers ------------------------------------------------------------- */

/* Task rank's block of a channel: the channels' blocks follow the header,
 * ntasks of them per channel. */
static inline torxp_cn_task_t *cn_task(void *region, unsigned ntasks, unsigned ch, unsigned rank)
{
    return (torxp_cn_task_t *)((char *)region + sizeof(torxp_cn_hdr_t)) + (size_t)ch * ntasks +
           rank;
}

static inline torxp_gi_task_t *gi_task(void *region, unsigned ntasks, unsigned ch, unsigned rank)
{
    return (torxp_gi_task_t *)((char *)region + sizeof(torxp_gi_hdr_t)) + (size_t)ch * ntasks +
           rank;
}

/* The shared regions are set up by the segment code; a mismatch here means
 * the device and the segment disagree on the job, so say which. Cold: run
 * only on the first inject / arm of a task. */
static torx_status_t cn_check_region(const torxp_shm_dev_t *d)
{
    const torxp_cn_hdr_t *h = d->cn;
    if (h == NULL || h->magic != TORXP_CN_MAGIC || h->depth != TORXP_CN_DEPTH ||
        h->task_bytes != sizeof(torxp_cn_task_t))
        return torxp_error(TORX_ERR_INVAL,
                           "torx: collective network region of task %d is not initialized "
                           "(torxp_shm_cn_init not run on it)",
                           d->base.rank);
    if (h->ntasks != (uint32_t)d->base.size || d->base.rank < 0 || d->base.rank >= d->base.size)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: collective network region is set up for %u tasks but task %d "
                           "belongs to a job of %d",
                           h->ntasks, d->base.rank, d->base.size);
    return TORX_OK;
}

static torx_status_t gi_check_region(const torxp_shm_dev_t *d)
{
    const torxp_gi_hdr_t *h = d->gi;
    if (h == NULL || h->magic != TORXP_GI_MAGIC)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: global interrupt region of task %d is not initialized "
                           "(torxp_shm_gi_init not run on it)",
                           d->base.rank);
    if (h->ntasks != (uint32_t)d->base.size || d->base.rank < 0 || d->base.rank >= d->base.size)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: global interrupt region is set up for %u tasks but task %d "
                           "belongs to a job of %d",
                           h->ntasks, d->base.rank, d->base.size);
    return TORX_OK;
}

/* Task j's payload for a slot: the head, the tail as far as used, zeros
 * beyond (the injector found them zero and did not store them). */
static void slot_payload(const torxp_cn_slot_t *c, unsigned char out[TORX_CN_PACKET_BYTES])
{
    uint32_t used = c->used;
    memcpy(out, c->head, TORXP_CN_HEAD);
    if (used > TORXP_CN_HEAD) {
        memcpy(out + TORXP_CN_HEAD, c->tail, used - TORXP_CN_HEAD);
        memset(out + used, 0, TORX_CN_PACKET_BYTES - used);
    } else {
        memset(out + TORXP_CN_HEAD, 0, TORX_CN_PACKET_BYTES - TORXP_CN_HEAD);
    }
}

/* Combines round r from slot s of every task into result, in rank order.
 * The caller has acquired every task's seq for r, so all descriptors and
 * payloads read here are complete, and no task overwrites them before this
 * task publishes done > r. */
static torx_status_t cn_combine(void *region, unsigned ntasks, unsigned ch, unsigned s, uint64_t r,
                                void *result)
{
    const torxp_cn_slot_t *first = &cn_task(region, ntasks, ch, 0)->slot[s];
    unsigned op = first->op, type = first->type;

    for (unsigned j = 1; j < ntasks; j++) {
        const torxp_cn_slot_t *c = &cn_task(region, ntasks, ch, j)->slot[s];
        if (c->op != op || c->type != type)
            return torxp_error(TORX_ERR_PROTO,
                               "torx: collective network round %llu: task 0 injected %s/%s but "
                               "task %u injected %s/%s (every task must use the same op and "
                               "type in the same round)",
                               (unsigned long long)r, torxp_cn_op_name(op),
                               torxp_cn_type_name(type), j, torxp_cn_op_name(c->op),
                               torxp_cn_type_name(c->type));
    }

    if (op == TORX_CN_BCAST) {
        unsigned nroots = 0, root = 0, second = 0;
        for (unsigned j = 0; j < ntasks; j++) {
            if (!cn_task(region, ntasks, ch, j)->slot[s].is_root)
                continue;
            if (nroots == 0)
                root = j;
            else if (nroots == 1)
                second = j;
            nroots++;
        }
        if (nroots == 0)
            return torxp_error(TORX_ERR_PROTO,
                               "torx: collective network round %llu: BCAST/%s with no root "
                               "(exactly one task must pass is_root)",
                               (unsigned long long)r, torxp_cn_type_name(type));
        if (nroots > 1)
            return torxp_error(TORX_ERR_PROTO,
                               "torx: collective network round %llu: BCAST/%s with %u roots, "
                               "tasks %u and %u among them (exactly one task must pass is_root)",
                               (unsigned long long)r, torxp_cn_type_name(type), nroots, root,
                               second);
        unsigned char data[TORX_CN_PACKET_BYTES];
        slot_payload(&cn_task(region, ntasks, ch, root)->slot[s], data);
        memcpy(result, data, TORX_CN_PACKET_BYTES);
        return TORX_OK;
    }

    int is_signed = type == TORX_CN_S32 || type == TORX_CN_S64;
    unsigned char data[TORX_CN_PACKET_BYTES];
    if (type == TORX_CN_S64 || type == TORX_CN_U64) {
        uint64_t acc[TORXP_CN_LANES64];
        slot_payload(first, data);
        memcpy(acc, data, sizeof acc);
        for (unsigned j = 1; j < ntasks; j++) {
            slot_payload(&cn_task(region, ntasks, ch, j)->slot[s], data);
            torxp_cn_alu64(op, is_signed, acc, data);
        }
        memcpy(result, acc, sizeof acc);
    } else {
        uint32_t acc[TORXP_CN_LANES32];
        slot_payload(first, data);
        memcpy(acc, data, sizeof acc);
        for (unsigned j = 1; j < ntasks; j++) {
            slot_payload(&cn_task(region, ntasks, ch, j)->slot[s], data);
            torxp_cn_alu32(op, is_signed, acc, data);
        }
        memcpy(result, acc, sizeof acc);
    }
    return TORX_OK;
}

/* ---- collective network ---------------------------------------------------- */

size_t torxp_shm_cn_bytes(unsigned ntasks)
{
    return sizeof(torxp_cn_hdr_t) + (size_t)TORX_CN_CHANNELS * ntasks * sizeof(torxp_cn_task_t);
}

void torxp_shm_cn_init(void *region, unsigned ntasks)
{
    /* The region must start on a cache line so the per-line layout holds;
     * the segment code places every region at a line-aligned offset. */
    assert(((uintptr_t)region & (TORXP_CACHELINE - 1)) == 0);
    torxp_cn_hdr_t *h = region;
    h->ntasks = ntasks;
    h->depth = TORXP_CN_DEPTH;
    h->task_bytes = sizeof(torxp_cn_task_t);
    /* Everything else starts at zero: no round published (seq 0 never equals
     * r + 1), nothing read, free_below 0 so the first inject scans (and
     * checks this header). The segment's creation is ordered before any
     * task's use by the attach handshake, so plain stores suffice. */
    h->magic = TORXP_CN_MAGIC;
}

torx_status_t torxp_shm_cn_inject(torx_pkt_dev_t *dev, unsigned ch, torx_cn_op_t op,
                                  torx_cn_type_t type, int is_root, const void *data)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);

    const torx_status_t bad = torxp_cn_inject_check(op, type, is_root, data);
    if (TORXP_UNLIKELY(bad != TORX_OK))
        return bad;
    const int root = op == TORX_CN_BCAST && is_root;
    const int has_data = op != TORX_CN_BCAST || root;

    uint64_t r = d->cn_injected[ch];
    if (TORXP_UNLIKELY(r == 0)) {
        /* Until the first round is in, check the region before touching it
         * (a compare on a value already loaded; nothing on later rounds). */
        torx_status_t st = cn_check_region(d);
        if (st != TORX_OK)
            return st;
    }
    const unsigned ntasks = (unsigned)dev->size;
    torxp_cn_task_t *me = cn_task(d->cn, ntasks, ch, (unsigned)dev->rank);
    if (TORXP_UNLIKELY(r >= me->free_below)) {
        /* Cached bound used up (or first round): rescan. */
        uint64_t lo = UINT64_MAX;
        for (unsigned j = 0; j < ntasks; j++) {
            /* acquire: pairs with the reader's release of done, so its reads
             * of the slot we are about to overwrite have finished. */
            uint64_t v = __atomic_load_n(&cn_task(d->cn, ntasks, ch, j)->done, __ATOMIC_ACQUIRE);
            lo = v < lo ? v : lo;
        }
        me->free_below = lo + TORXP_CN_DEPTH;
        if (r >= me->free_below)
            return TORX_NO_ROOM; /* DEPTH rounds ahead of the slowest reader */
    }

    torxp_cn_slot_t *c = &me->slot[r & (TORXP_CN_DEPTH - 1)];
    c->op = (uint8_t)op;
    c->type = (uint8_t)type;
    c->is_root = (uint8_t)root;
    uint32_t used = 0;
    if (has_data) {
        /* Store only as far as the last nonzero 8 bytes: a short vector (the
         * common 8-byte allreduce) is then one line per task, the
         * descriptor's own, and readers fetch no more. */
        uint64_t w[TORXP_CN_LANES64];
        memcpy(w, data, sizeof w);
        used = TORX_CN_PACKET_BYTES;
        while (used > 0 && w[used / 8 - 1] == 0)
            used -= 8;
        memcpy(c->head, w, TORXP_CN_HEAD);
        if (used > TORXP_CN_HEAD)
            memcpy(c->tail, (const unsigned char *)w + TORXP_CN_HEAD, used - TORXP_CN_HEAD);
    }
    c->used = used;
    /* release: the descriptor and payload stores above happen before any
     * reader's acquire of seq == r + 1 lets it read them. */
    __atomic_store_n(&c->seq, r + 1, __ATOMIC_RELEASE);
    d->cn_injected[ch] = r + 1;
    return TORX_OK;
}

torx_status_t torxp_shm_cn_read(torx_pkt_dev_t *dev, unsigned ch, void *result)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    uint64_t r = d->cn_read[ch];

    const torx_status_t bad = torxp_cn_read_check(dev, r, d->cn_injected[ch], result);
    if (TORXP_UNLIKELY(bad != TORX_OK))
        return bad;

    void *region = d->cn;
    unsigned ntasks = (unsigned)dev->size;
    unsigned s = (unsigned)(r & (TORXP_CN_DEPTH - 1));
    torxp_cn_task_t *me = cn_task(region, ntasks, ch, (unsigned)dev->rank);
    unsigned j = me->scan;
    for (; j < ntasks; j++) {
        /* acquire: pairs with the injector's release of seq; the descriptor
         * and payload of task j for round r are read only after this load
         * has returned r + 1 (in cn_combine). */
        if (__atomic_load_n(&cn_task(region, ntasks, ch, j)->slot[s].seq, __ATOMIC_ACQUIRE) !=
            r + 1) {
            me->scan = j; /* tasks before j need not be rechecked */
            return TORX_AGAIN;
        }
    }

    torx_status_t st = cn_combine(region, ntasks, ch, s, r, result);
    me->scan = 0;
    /* release: our reads of every task's slot s (cn_combine) happen before
     * an injector that acquires done > r overwrites that slot. The round is
     * consumed even when the tasks disagreed, so the pipeline stays in step
     * and every task reports the same error for the same round. */
    __atomic_store_n(&me->done, r + 1, __ATOMIC_RELEASE);
    d->cn_read[ch] = r + 1;
    return st;
}

/* ---- global interrupt ------------------------------------------------------ */

size_t torxp_shm_gi_bytes(unsigned ntasks)
{
    return sizeof(torxp_gi_hdr_t) + (size_t)TORX_GI_CHANNELS * ntasks * sizeof(torxp_gi_task_t);
}

void torxp_shm_gi_init(void *region, unsigned ntasks)
{
    assert(((uintptr_t)region & (TORXP_CACHELINE - 1)) == 0);
    torxp_gi_hdr_t *h = region;
    h->ntasks = ntasks;
    /* armed = complete = 0 for every task: round 0 is the already-finished
     * "before the first barrier" round. Plain stores: ordered before use by
     * the segment attach handshake. */
    h->magic = TORXP_GI_MAGIC;
}

torx_status_t torxp_shm_gi_arm(torx_pkt_dev_t *dev, unsigned ch)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    uint64_t k = d->gi_armed[ch];

    if (TORXP_UNLIKELY(k == 0)) {
        torx_status_t st = gi_check_region(d);
        if (st != TORX_OK)
            return st;
    }
    torxp_gi_task_t *me = gi_task(d->gi, (unsigned)dev->size, ch, (unsigned)dev->rank);
    const torx_status_t bad = torxp_gi_arm_check(dev, k, me->complete);
    if (TORXP_UNLIKELY(bad != TORX_OK))
        return bad;
    me->scan = 0;
    /* release: everything this task did before entering the barrier happens
     * before a task whose acquire sees armed >= k + 1 leaves it. */
    __atomic_store_n(&me->armed, k + 1, __ATOMIC_RELEASE);
    d->gi_armed[ch] = k + 1;
    return TORX_OK;
}

torx_status_t torxp_shm_gi_poll(torx_pkt_dev_t *dev, unsigned ch)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    uint64_t k = d->gi_armed[ch];

    const torx_status_t bad = torxp_gi_poll_check(dev, k);
    if (TORXP_UNLIKELY(bad != TORX_OK))
        return bad;
    void *region = d->gi;
    unsigned ntasks = (unsigned)dev->size;
    torxp_gi_task_t *me = gi_task(region, ntasks, ch, (unsigned)dev->rank);
    if (me->complete == k)
        return TORX_OK;
    for (unsigned j = me->scan; j < ntasks; j++) {
        /* acquire: pairs with task j's release in arm, so its work before
         * the barrier is visible once we leave it. >=, not ==: j may
         * already have armed the next round. */
        if (__atomic_load_n(&gi_task(region, ntasks, ch, j)->armed, __ATOMIC_ACQUIRE) < k) {
            me->scan = j;
            return TORX_AGAIN;
        }
    }
    me->complete = k;
    return TORX_OK;
}
