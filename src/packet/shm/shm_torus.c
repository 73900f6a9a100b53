/* The shm device's torus: injection straight into the destination task's
 * reception FIFO, FIFO pinning for deterministic packets, chaos for adaptive
 * ones, deposit-bit line broadcast, and the doorbell a receiver sleeps on.
 *
 * Doorbell. A receiver that found nothing may sleep (torxp_shm_wait):
 *
 *   waiter                                 injector
 *   b = doorbell                           publish packet (release tag)
 *   sleeping = 1                           compiler barrier
 *   membarrier(GLOBAL_EXPEDITED)           if sleeping: doorbell++, FUTEX_WAKE
 *   recheck FIFOs; if a packet: return
 *   FUTEX_WAIT(doorbell, b)
 *
 * This is a Dekker pair that needs a StoreLoad barrier on both sides: either
 * the injector's load sees sleeping, or the waiter's recheck sees the packet.
 * A seq_cst fence in the injector would be that barrier, but it stalls every
 * injection until the packet's stores have left the store buffer (measured:
 * about +8% on the one-packet ping-pong, and it serialises streaming). So the
 * barrier is asymmetric, as in liburcu: the waiter, which is about to sleep
 * anyway, runs membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED), a full barrier on
 * every CPU running a thread of a registered task (every task registers at
 * open), and the injector needs only a compiler barrier. FUTEX_WAIT sleeps
 * only while doorbell still equals b, so a bump between the recheck and the
 * sleep is not lost either.
 *
 * Where membarrier is missing or refused (old kernels, seccomp), a task's
 * registration fails and the whole job falls back: the waiter uses a plain
 * fence and sleeps in slices of WAIT_SLICE_MS, so a wakeup lost to the race
 * costs at most that, and injectors still pay nothing. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* syscall */
#endif

#include "shm.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

void torxp_shm_chaos_seed(torxp_shm_dev_t *d, long seed)
{
    /* Two streams: the injecting and the receiving thread may differ. */
    d->chaos = seed ? ((uint64_t)seed * 0x9E3779B97F4A7C15ULL) ^ (d->self_index + 1) : 0;
    if (seed && !d->chaos)
        d->chaos = 1;
    d->chaos_rx = d->chaos ? d->chaos ^ 0xD1B54A32D192ED03ULL : 0;
    if (d->chaos && !d->chaos_rx)
        d->chaos_rx = 1;
}

/* ---- Doorbell ------------------------------------------------------------------ */

/* Without membarrier: the longest sleep, which bounds a lost wakeup. */
#define WAIT_SLICE_MS 2

static long futex(uint32_t *word, int op, uint32_t val, const struct timespec *ts)
{
    /* Not FUTEX_PRIVATE_FLAG: the word is in a segment shared by processes. */
    return syscall(SYS_futex, word, op, val, ts, NULL, 0);
}

/* Bumps the doorbell of the task in slot and wakes its sleeper. */
static void __attribute__((noinline, cold)) ring(torxp_shm_dev_t *d, unsigned slot)
{
    torxp_shm_task_t *t = &d->tasks[slot];
    /* release: pairs with the waiter's acquire load of doorbell; orders
     * nothing essential (the packet's tag carries its own release) but
     * keeps the bump after what the ringer published. */
    __atomic_add_fetch(&t->doorbell, 1, __ATOMIC_RELEASE);
    futex(&t->doorbell, FUTEX_WAKE, INT_MAX, NULL);
}

/* After publishing a packet to slot: wakes its receiver if it sleeps. */
static inline void ring_if_sleeping(torxp_shm_dev_t *d, unsigned slot)
{
    /* Compiler barrier only: the load of sleeping stays after the publish in
     * program order; the waiter's membarrier supplies the StoreLoad barrier
     * on this CPU when it matters (see the top). */
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    /* relaxed: ordered by the waiter's membarrier (see the top). */
    if (TORXP_UNLIKELY(__atomic_load_n(&d->tasks[slot].sleeping, __ATOMIC_RELAXED)))
        ring(d, slot);
}

void torxp_shm_bell_register(torxp_shm_dev_t *d)
{
    const long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (cmds < 0 || !(cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) ||
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) != 0) {
        torxp_log(&d->base, 1, "membarrier(GLOBAL_EXPEDITED) unavailable (%s)",
                  cmds < 0 ? strerror(errno) : "not offered or refused");
        return;
    }
    d->tasks[d->self_index].flags |= TORXP_SHM_TASK_F_MEMBARRIER;
}

void torxp_shm_bell_setup(torxp_shm_dev_t *d)
{
    /* The start-up vote ordered every task's flags before this. */
    d->bell_exact = 1;
    for (unsigned i = 0; i < d->nslots; i++)
        if (__atomic_load_n(&d->tasks[i].state, __ATOMIC_ACQUIRE) == TORXP_SHM_TASK_ATTACHED &&
            !(d->tasks[i].flags & TORXP_SHM_TASK_F_MEMBARRIER))
            d->bell_exact = 0;
    if (d->bell_exact)
        torxp_log(&d->base, 1, "doorbell: exact (membarrier)");
    else
        torxp_log(&d->base, 1, "doorbell: sleeps in slices of %d ms (a task has no membarrier)",
                  WAIT_SLICE_MS);
}

/* ---- Injection lock (TORX_PKT_SHARED_INJECT) ----------------------------------- */

static inline void tx_lock(torxp_shm_dev_t *d)
{
    unsigned spins = 0;
    /* acquire: the previous holder's writes to the injection state (cached
     * heads, stash, chaos) happen before ours. */
    while (__atomic_exchange_n(&d->tx_lock, 1u, __ATOMIC_ACQUIRE)) {
        /* relaxed: only a hint that the lock may be free; the exchange
         * decides. The holder may be preempted on a busy host: yield. */
        while (__atomic_load_n(&d->tx_lock, __ATOMIC_RELAXED))
            if ((++spins & 127) == 0)
                sched_yield();
    }
}

static inline void tx_unlock(torxp_shm_dev_t *d)
{
    /* release: our writes to the injection state happen before the next
     * holder's acquire. */
    __atomic_store_n(&d->tx_lock, 0u, __ATOMIC_RELEASE);
}

static inline int stash_active(const torxp_shm_dev_t *d)
{
    /* relaxed: a hint read without the lock; the lock holder rechecks. */
    return (int)__atomic_load_n(&d->stash_active, __ATOMIC_RELAXED);
}

static inline void set_stash_active(torxp_shm_dev_t *d, uint32_t v)
{
    /* relaxed: written under the lock (or by the only injecting thread);
     * the lock orders the stash contents. */
    __atomic_store_n(&d->stash_active, v, __ATOMIC_RELAXED);
}

/* A coordinate as one word, for equality. */
static inline uint32_t coord_bits(torx_coord_t c)
{
    uint32_t v;
    memcpy(&v, &c, sizeof v);
    return v;
}

/* The reception FIFO a packet from this task takes at its destination:
 * deterministic packets are pinned by sender, which is what keeps them in
 * order; adaptive ones scatter when chaos is on. */
static inline unsigned pick_fifo(torxp_shm_dev_t *d, unsigned ctl)
{
    if ((ctl & TORX_PKT_ADAPTIVE) && d->chaos)
        return (unsigned)(torxp_chaos_next(&d->chaos) >> 33) % TORXP_SHM_FIFOS_PER_TASK;
    return d->self_index % TORXP_SHM_FIFOS_PER_TASK;
}

/* Writes the packet into position pos of FIFO f, reserved, and publishes it. */
static inline __attribute__((always_inline)) void
write_slot(torxp_shm_dev_t *d, torxp_fifo_t *f, uint64_t pos, const torx_pkt_hdr_t *hdr,
           const struct iovec *iov, int iovcnt, size_t len)
{
    torx_pkt_hdr_t *s = torxp_fifo_slot(f, d->geom, pos);
    torxp_fifo_write_hdr(s, hdr, (uint8_t)torx_pkt_chunks_for(len), (uint8_t)len);
    char *p = (char *)(s + 1);
    for (int i = 0; i < iovcnt; i++) {
        memcpy(p, iov[i].iov_base, iov[i].iov_len);
        p += iov[i].iov_len;
    }
    torxp_fifo_publish(s, pos, d->geom);
}

/* Reserves n slots of FIFO f: without a compare-and-swap where this task is
 * its only producer. */
static inline __attribute__((always_inline)) bool
reserve(torxp_shm_dev_t *d, torxp_fifo_t *f, uint64_t *cached_head, unsigned n, uint64_t *pos)
{
    return d->sole_producer ? torxp_fifo_reserve_sole_n(f, d->geom, cached_head, n, pos)
                            : torxp_fifo_reserve_n(f, d->geom, cached_head, n, pos);
}

/* Writes the packet into FIFO f of the task in slot, whose head this task
 * last saw in *cached_head. */
static inline __attribute__((always_inline)) torx_status_t
deliver_to(torxp_shm_dev_t *d, unsigned slot, torxp_fifo_t *f, uint64_t *cached_head,
           const torx_pkt_hdr_t *hdr, const struct iovec *iov, int iovcnt, size_t len)
{
    uint64_t pos;
    if (!reserve(d, f, cached_head, 1, &pos))
        return TORX_NO_ROOM;
    write_slot(d, f, pos, hdr, iov, iovcnt, len);
    ring_if_sleeping(d, slot);
    return TORX_OK;
}

static inline __attribute__((always_inline)) torx_status_t
deliver(torxp_shm_dev_t *d, unsigned slot, unsigned fifo, const torx_pkt_hdr_t *hdr,
        const struct iovec *iov, int iovcnt, size_t len)
{
    return deliver_to(d, slot, torxp_shm_fifo(d, slot, fifo),
                      &d->cached_head[slot * TORXP_SHM_FIFOS_PER_TASK + fifo], hdr, iov, iovcnt,
                      len);
}

/* Whether a task sits in slot: the private copy of the task table
 * (torxp_shm_tx_setup), like every lookup after start-up. */
static inline int task_present(const torxp_shm_dev_t *d, unsigned slot)
{
    return d->slot_rank[slot] >= 0;
}

/* The slot of the k-th node (k >= 1) on a deposit line, or -1 when no task
 * sits there (a partly filled torus). */
static int deposit_hop_slot(const torxp_shm_dev_t *d, const torx_pkt_hdr_t *h, unsigned k)
{
    const unsigned slot = torxp_deposit_hop_slot(&d->base, h, k);
    return task_present(d, slot) ? (int)slot : -1;
}

/* Delivers the stashed deposit line as far as the FIFOs allow. */
static void drain_stash(torxp_shm_dev_t *d)
{
    const struct iovec iov = {d->stash.payload, d->stash.hdr.payload_len};
    const unsigned fifo = d->self_index % TORXP_SHM_FIFOS_PER_TASK;
    while (d->stash.next_hop <= d->stash.hops) {
        const int slot = deposit_hop_slot(d, &d->stash.hdr, d->stash.next_hop);
        if (slot >= 0 && deliver(d, (unsigned)slot, fifo, &d->stash.hdr, &iov, iov.iov_len ? 1 : 0,
                                 iov.iov_len) == TORX_NO_ROOM)
            return;
        d->stash.next_hop++;
    }
    set_stash_active(d, 0);
}

static torx_status_t inject_deposit(torxp_shm_dev_t *d, const torx_pkt_hdr_t *hdr,
                                    const struct iovec *iov, int iovcnt, size_t len)
{
    unsigned hops;
    const torx_status_t bad = torxp_deposit_hops(&d->base, hdr, &hops);
    if (bad != TORX_OK)
        return bad;

    /* Deliver hop by hop; the first hop decides whether the packet is taken. */
    const unsigned fifo = d->self_index % TORXP_SHM_FIFOS_PER_TASK;
    unsigned k = 1;
    for (; k <= hops; k++) {
        const int slot = deposit_hop_slot(d, hdr, k);
        if (slot < 0)
            continue;
        if (deliver(d, (unsigned)slot, fifo, hdr, iov, iovcnt, len) == TORX_NO_ROOM) {
            if (k == 1)
                return TORX_NO_ROOM;
            break;
        }
    }
    if (k <= hops) { /* taken, but the rest of the line must wait */
        set_stash_active(d, 1);
        torxp_deposit_stash(&d->stash, hdr, iov, iovcnt, len, k, hops);
    }
    return TORX_OK;
}

/* Whether injection must wait: everything queues behind a partly
 * delivered deposit line, which this delivers as far as the FIFOs allow. */
static inline int stash_blocks(torxp_shm_dev_t *d)
{
    if (TORXP_LIKELY(!stash_active(d)))
        return 0;
    drain_stash(d);
    return stash_active(d);
}

/* The slot of destination dest, checked: inside the torus, a task there. */
static torx_status_t dest_slot(const torxp_shm_dev_t *d, torx_coord_t dest, unsigned *slot)
{
    if (TORXP_UNLIKELY(!torx_coord_in_shape(d->base.shape, dest)))
        return torxp_error(TORX_ERR_INVAL, "torx: destination (%u,%u,%u,%u) is outside the torus",
                           dest.x, dest.y, dest.z, dest.t);
    *slot = torx_coord_index(d->base.shape, dest);
    if (TORXP_UNLIKELY(!task_present(d, *slot)))
        return torxp_error(TORX_ERR_INVAL, "torx: no task at destination (%u,%u,%u,%u)", dest.x,
                           dest.y, dest.z, dest.t);
    return TORX_OK;
}

/* Remembers the FIFO this task's deterministic packets take at dest, in
 * slot (pick_fifo's answer without chaos: pinned by sender). */
static void memo_pin(torxp_shm_dev_t *d, torx_coord_t dest, unsigned slot)
{
    const unsigned fifo = d->self_index % TORXP_SHM_FIFOS_PER_TASK;
    d->tx_memo.dest = coord_bits(dest);
    d->tx_memo.slot = slot;
    d->tx_memo.fifo = torxp_shm_fifo(d, slot, fifo);
    d->tx_memo.cached_head = &d->cached_head[slot * TORXP_SHM_FIFOS_PER_TASK + fifo];
}

/* The injection proper; the caller holds tx_lock when injection is shared. */
static inline __attribute__((always_inline)) torx_status_t
inject_body(torxp_shm_dev_t *d, const torx_pkt_hdr_t *hdr, const struct iovec *iov, int iovcnt)
{
    if (TORXP_UNLIKELY(stash_blocks(d)))
        return TORX_NO_ROOM;
    size_t len;
    const torx_status_t too_long = torxp_payload_len(iov, iovcnt, &len);
    if (TORXP_UNLIKELY(too_long != TORX_OK))
        return too_long;
    /* The destination of the last deterministic packet again (a ping-pong,
     * a message's packets, a stream): checked then, its FIFO known. */
    if (TORXP_LIKELY(coord_bits(hdr->dest) == d->tx_memo.dest && !(hdr->ctl & d->tx_memo.ctl_mask)))
        return deliver_to(d, d->tx_memo.slot, d->tx_memo.fifo, d->tx_memo.cached_head, hdr, iov,
                          iovcnt, len);
    unsigned slot;
    const torx_status_t bad = dest_slot(d, hdr->dest, &slot);
    if (TORXP_UNLIKELY(bad != TORX_OK))
        return bad;
    if (TORXP_UNLIKELY(hdr->ctl & TORX_PKT_DEPOSIT))
        return inject_deposit(d, hdr, iov, iovcnt, len);
    if (hdr->ctl & d->tx_memo.ctl_mask)
        return deliver(d, slot, pick_fifo(d, hdr->ctl), hdr, iov, iovcnt, len);
    memo_pin(d, hdr->dest, slot);
    return deliver_to(d, slot, d->tx_memo.fifo, d->tx_memo.cached_head, hdr, iov, iovcnt, len);
}

/* torx_pkt_inject_batch proper (the caller holds tx_lock when injection is
 * shared): one reservation of n slots, filled and published in order, so
 * that the receiver works on the first while the next are written (filled
 * from the last to the first, a 512-byte ping-pong took 1.2x as long, 1 KiB
 * 1.3x: the receiver waited for the whole message). Packets checked
 * deterministic, one destination. */
static torx_status_t inject_batch_body(torxp_shm_dev_t *d, const torx_pkt_out_t *pkts, int n)
{
    if (TORXP_UNLIKELY(stash_blocks(d)))
        return TORX_NO_ROOM;
    size_t len[TORX_PKT_BATCH_MAX];
    for (int k = 0; k < n; k++) {
        const torx_status_t too_long = torxp_payload_len(pkts[k].iov, pkts[k].iovcnt, &len[k]);
        if (TORXP_UNLIKELY(too_long != TORX_OK))
            return too_long;
    }
    const torx_coord_t dest = pkts[0].hdr->dest;
    if (TORXP_UNLIKELY(coord_bits(dest) != d->tx_memo.dest)) {
        unsigned slot;
        const torx_status_t bad = dest_slot(d, dest, &slot);
        if (TORXP_UNLIKELY(bad != TORX_OK))
            return bad;
        memo_pin(d, dest, slot);
    }
    torxp_fifo_t *const f = d->tx_memo.fifo;
    uint64_t pos;
    if (!reserve(d, f, d->tx_memo.cached_head, (unsigned)n, &pos))
        return TORX_NO_ROOM;
    for (int k = 0; k < n; k++)
        write_slot(d, f, pos + (unsigned)k, pkts[k].hdr, pkts[k].iov, pkts[k].iovcnt, len[k]);
    ring_if_sleeping(d, d->tx_memo.slot);
    return TORX_OK;
}

static torx_status_t __attribute__((noinline))
inject_shared(torxp_shm_dev_t *d, const torx_pkt_hdr_t *hdr, const struct iovec *iov, int iovcnt)
{
    tx_lock(d);
    const torx_status_t rc = inject_body(d, hdr, iov, iovcnt);
    tx_unlock(d);
    return rc;
}

torx_status_t torxp_shm_inject(torx_pkt_dev_t *dev, const torx_pkt_hdr_t *hdr,
                               const struct iovec *iov, int iovcnt)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    if (TORXP_UNLIKELY(d->shared_inject))
        return inject_shared(d, hdr, iov, iovcnt);
    return inject_body(d, hdr, iov, iovcnt);
}

torx_status_t torxp_shm_inject_batch(torx_pkt_dev_t *dev, const torx_pkt_out_t *pkts, int n)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    if (TORXP_UNLIKELY(d->shared_inject)) {
        tx_lock(d);
        const torx_status_t rc = inject_batch_body(d, pkts, n);
        tx_unlock(d);
        return rc;
    }
    return inject_batch_body(d, pkts, n);
}

/* What the task table, which the start-up vote has made complete, says
 * once and for all: the rank in each slot, and whether this job's FIFOs
 * each have one producer at most. Every task computes the same answer. A
 * task's deterministic packets take FIFO (its slot mod
 * TORXP_SHM_FIFOS_PER_TASK) at every destination, device-internal and
 * deposit packets included, and its threads inject under tx_lock; only a
 * task with chaos writes other FIFOs. */
torx_status_t torxp_shm_tx_setup(torxp_shm_dev_t *d)
{
    d->slot_rank = torxp_calloc(d->nslots, sizeof *d->slot_rank);
    if (!d->slot_rank)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for the rank of %u torus slots",
                           d->nslots);
    unsigned producers[TORXP_SHM_FIFOS_PER_TASK] = {0};
    int sole = 1;
    for (unsigned s = 0; s < d->nslots; s++) {
        /* relaxed: the start-up vote ordered every claim before this. */
        const int attached =
            __atomic_load_n(&d->tasks[s].state, __ATOMIC_RELAXED) == TORXP_SHM_TASK_ATTACHED;
        const int r = d->tasks[s].rank;
        d->slot_rank[s] = attached && r >= 0 && r < d->base.size ? r : -1;
        if (d->slot_rank[s] < 0)
            continue;
        if (d->tasks[s].flags & TORXP_SHM_TASK_F_CHAOS)
            sole = 0;
        if (++producers[s % TORXP_SHM_FIFOS_PER_TASK] > 1)
            sole = 0;
    }
    d->sole_producer = sole;
    /* No coordinate has a byte of 255 (extents are at most 255): no memo
     * until a packet fills it. Deposit packets go down a line, and adaptive
     * ones scatter under chaos (seeded before this): never memoized. */
    d->tx_memo.dest = UINT32_MAX;
    d->tx_memo.ctl_mask = TORX_PKT_DEPOSIT | (d->chaos ? TORX_PKT_ADAPTIVE : 0);
    return TORX_OK;
}

/* Points the cursor of FIFO fi at the slot of its head. */
static inline void rx_aim(torxp_shm_dev_t *d, unsigned fi)
{
    d->rx[fi].slot = torxp_fifo_slot(d->rx[fi].fifo, d->geom, d->rx[fi].head);
    d->rx[fi].tag = torxp_fifo_lap_tag(d->rx[fi].head, d->geom.log2);
}

void torxp_shm_rx_setup(torxp_shm_dev_t *d)
{
    for (unsigned fi = 0; fi < TORXP_SHM_FIFOS_PER_TASK; fi++) {
        d->rx[fi].fifo = torxp_shm_fifo(d, d->self_index, fi);
        rx_aim(d, fi);
    }
    /* Every reception FIFO of the job mapped now, ours and those we inject
     * into: their first lap otherwise takes a page fault a page (nine per
     * FIFO of 128 packets) in the producer and in the consumer, inside a
     * pair's first messages, as the staging rings did (shm_stage.c). All
     * of them are used and they are small: 2 MiB in a 16-task job. */
    torxp_shm_populate(torxp_shm_at(d, d->seg->fifo_off),
                       (size_t)d->nslots * d->seg->fifos_per_task * d->seg->fifo_stride);
}

/* The packet at the head of FIFO fi, or NULL (torxp_fifo_front_at, with
 * the slot and its tag taken from the cursor). */
static inline torx_pkt_hdr_t *rx_front(torxp_shm_dev_t *d, unsigned fi)
{
    torx_pkt_hdr_t *slot = d->rx[fi].slot;
    /* acquire: pairs with torxp_fifo_publish. */
    return __atomic_load_n(&slot->dev_tag, __ATOMIC_ACQUIRE) == d->rx[fi].tag ? slot : NULL;
}

/* Pops the packet at the front of FIFO fi. Producers learn of the room a
 * batch at a time (and whenever the FIFO runs empty, see rx_flush), which
 * keeps the head line from bouncing on every packet of a stream. */
static inline void rx_pop(torxp_shm_dev_t *d, unsigned fi)
{
    const uint64_t head = ++d->rx[fi].head;
    if (TORXP_LIKELY(head & (d->geom.packets - 1)))
        d->rx[fi].slot = (torx_pkt_hdr_t *)((char *)d->rx[fi].slot + TORXP_FIFO_SLOT_BYTES);
    else
        rx_aim(d, fi); /* a new lap: the first slot, the next tag */
    if (++d->rx[fi].unpublished >= d->rx_batch) {
        torxp_fifo_release(d->rx[fi].fifo, head);
        d->rx[fi].unpublished = 0;
    }
}

/* Publishes every pop of FIFO fi: it ran empty, or the task may sleep, and
 * a producer may be waiting for room. */
static inline void rx_flush(torxp_shm_dev_t *d, unsigned fi)
{
    if (d->rx[fi].unpublished) {
        torxp_fifo_release(d->rx[fi].fifo, d->rx[fi].head);
        d->rx[fi].unpublished = 0;
    }
}

/* A packet whose header could not have come from torx_pkt_inject: named,
 * counted and dropped, never trusted for a length. */
static void __attribute__((noinline, cold))
drop_malformed(torxp_shm_dev_t *d, unsigned fi, const torx_pkt_hdr_t *pkt, const char *why)
{
    torxp_dev_malformed(&d->base,
                        "malformed packet in reception FIFO %u (%s: ctl 0x%02x, %u chunks, %u "
                        "payload bytes)",
                        fi, why, pkt->ctl, pkt->chunks, pkt->payload_len);
}

/* Makes pkt, checked, the peeked packet of FIFO fi. */
static inline const torx_pkt_hdr_t *take_checked(torxp_shm_dev_t *d, unsigned fi,
                                                 const torx_pkt_hdr_t *pkt)
{
    /* The packet's other lines: their transfers from the sender's core
     * start now and overlap the dispatch, instead of waiting for the
     * receiver's copy to ask for them one by one (on a VM whose
     * cache-line handoff costs 200 ns this is most of a second line's
     * cost). A slot is four lines; unrolled, as the loop cost a dozen
     * instructions a packet. */
    _Static_assert(TORX_PKT_MAX_BYTES == 4 * TORXP_CACHELINE, "a slot is four lines");
    const unsigned end = (unsigned)pkt->chunks * TORX_PKT_CHUNK;
    const char *lines = (const char *)pkt;
    if (end > TORXP_CACHELINE)
        __builtin_prefetch(lines + TORXP_CACHELINE);
    if (end > 2 * TORXP_CACHELINE)
        __builtin_prefetch(lines + 2 * TORXP_CACHELINE);
    if (end > 3 * TORXP_CACHELINE)
        __builtin_prefetch(lines + 3 * TORXP_CACHELINE);
    torxp_rx_burst(&d->next_fifo, &d->burst, fi, TORXP_SHM_FIFOS_PER_TASK);
    d->cur_fifo = (int)fi;
    return pkt;
}

/* The packets take's quick test does not pass: deposit packets (whose
 * destination is a line's end, not this task), device-internal ones, and
 * malformed ones (named, counted and dropped). NULL: popped, scan again. */
static const torx_pkt_hdr_t *__attribute__((noinline))
take_rare(torxp_shm_dev_t *d, unsigned fi, torx_pkt_hdr_t *pkt)
{
    const char *bad = torxp_hdr_invalid(pkt, d->base.shape);
    if (!bad && !(pkt->ctl & TORX_PKT_DEPOSIT) && coord_bits(pkt->dest) != coord_bits(d->base.self))
        bad = "destination is another task";
    if (TORXP_UNLIKELY(bad != NULL)) {
        drop_malformed(d, fi, pkt, bad);
        rx_pop(d, fi);
        return NULL;
    }
    if (pkt->ctl & TORX_PKT_SYS) {
        torxp_shm_bulk_on_sys(d, pkt);
        rx_pop(d, fi);
        return NULL;
    }
    return take_checked(d, fi, pkt);
}

/* A packet the scan found at the front of FIFO fi: checked, and made the
 * peeked packet (returned); or, malformed or device-internal, dealt with
 * and popped (NULL: scan again). Out of line, so that the scan, which
 * mostly finds nothing, stays small: no registers to save, four loads and
 * compares. The usual packet, addressed to this task, passes one quick
 * test and take saves no registers: a reception FIFO only holds packets
 * for its task, so the destination must be this task (torxp_hdr_invalid's
 * check of it against the torus, and of a deposit's dimension, is for the
 * deposit packets that take_rare sees). */
static const torx_pkt_hdr_t *__attribute__((noinline))
take(torxp_shm_dev_t *d, unsigned fi, torx_pkt_hdr_t *pkt)
{
    const unsigned len = pkt->payload_len;
    if (TORXP_UNLIKELY(len > TORX_PKT_MAX_PAYLOAD || pkt->chunks != torx_pkt_chunks_for(len) ||
                       (pkt->ctl & (TORX_PKT_SYS | TORX_PKT_DEPOSIT)) ||
                       coord_bits(pkt->dest) != coord_bits(d->base.self)))
        return take_rare(d, fi, pkt);
    return take_checked(d, fi, pkt);
}

const torx_pkt_hdr_t *torxp_shm_peek(torx_pkt_dev_t *dev)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    if (d->cur_fifo >= 0)
        return rx_front(d, (unsigned)d->cur_fifo);
    for (;;) {
        const unsigned start = TORXP_UNLIKELY(d->chaos_rx)
                                   ? (unsigned)(torxp_chaos_next(&d->chaos_rx) >> 33)
                                   : d->next_fifo;
        unsigned i = 0, fi = start % TORXP_SHM_FIFOS_PER_TASK;
        torx_pkt_hdr_t *pkt;
        while (!(pkt = rx_front(d, fi))) {
            rx_flush(d, fi);
            if (++i == TORXP_SHM_FIFOS_PER_TASK)
                return NULL;
            fi = (fi + 1) % TORXP_SHM_FIFOS_PER_TASK;
        }
        const torx_pkt_hdr_t *taken = take(d, fi, pkt);
        if (taken)
            return taken;
    }
}

void torxp_shm_consume(torx_pkt_dev_t *dev)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    if (d->cur_fifo < 0)
        return;
    rx_pop(d, (unsigned)d->cur_fifo);
    d->last_fifo = d->cur_fifo;
    d->cur_fifo = -1;
}

const torx_pkt_hdr_t *torxp_shm_peek_next(torx_pkt_dev_t *dev)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    const int last = d->last_fifo;
    /* A peeked packet, nothing consumed yet, chaos's random scan order, or
     * the last FIFO's burst is over (take moved next_fifo on): the scan. */
    if (d->cur_fifo >= 0 || last < 0 || d->chaos_rx || d->next_fifo != (unsigned)last)
        return torxp_shm_peek(dev);
    torx_pkt_hdr_t *pkt = rx_front(d, (unsigned)last);
    if (!pkt) {
        rx_flush(d, (unsigned)last); /* it ran empty, as in the scan */
        return NULL;
    }
    const torx_pkt_hdr_t *taken = take(d, (unsigned)last, pkt);
    return taken ? taken : torxp_shm_peek(dev);
}

/* Delivers what the FIFOs now take of a stashed deposit line. */
static void progress_stash(torxp_shm_dev_t *d)
{
    if (!d->shared_inject) {
        drain_stash(d);
        return;
    }
    tx_lock(d);
    if (stash_active(d))
        drain_stash(d);
    tx_unlock(d);
}

/* Injections the device itself must retry when a peer makes room: a stashed
 * deposit line, bulk packets queued behind a full FIFO. */
static inline int tx_pending(const torxp_shm_dev_t *d)
{
    return stash_active(d) || torxp_shm_bulk_pending(d);
}

/* Retries them: out of line, so that an idle poll saves no registers. */
static void __attribute__((noinline)) poll_tx(torxp_shm_dev_t *d)
{
    if (stash_active(d))
        progress_stash(d);
    if (torxp_shm_bulk_pending(d))
        torxp_shm_bulk_progress(d);
}

int torxp_shm_poll(torx_pkt_dev_t *dev)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    if (TORXP_UNLIKELY(tx_pending(d)))
        poll_tx(d);
    return torxp_shm_peek(dev) != NULL;
}

int torxp_shm_room(torx_pkt_dev_t *dev, torx_coord_t dest)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    if (!torx_coord_in_shape(dev->shape, dest))
        return 0;
    const unsigned slot = torx_coord_index(dev->shape, dest);
    return (int)torxp_fifo_room(torxp_shm_fifo(d, slot, d->self_index % TORXP_SHM_FIFOS_PER_TASK),
                                d->geom);
}

/* ---- Waiting -------------------------------------------------------------------- */

/* Whether any of this task's reception FIFOs holds a published packet. */
static int any_packet(torxp_shm_dev_t *d)
{
    if (d->cur_fifo >= 0)
        return 1;
    for (unsigned f = 0; f < TORXP_SHM_FIFOS_PER_TASK; f++) {
        if (rx_front(d, f))
            return 1;
        rx_flush(d, f); /* about to sleep: give waiting producers their room */
    }
    return 0;
}

/* A nap for tx_pending: no doorbell rings when a peer makes room. */
#define WAIT_ROOM_NAP_NS 50000L

torx_status_t torxp_shm_wait(torx_pkt_dev_t *dev, int timeout_ms)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    torxp_shm_task_t *me = &d->tasks[d->self_index];
    /* acquire: pairs with ring()'s release; a bump since the last wait
     * (torx_pkt_wake, or a late injector) means work may be waiting. */
    const uint32_t bell = __atomic_load_n(&me->doorbell, __ATOMIC_ACQUIRE);
    if (bell != d->bell_seen) {
        d->bell_seen = bell;
        return TORX_OK;
    }
    if (any_packet(d))
        return TORX_OK;
    /* How long one futex sleep may last (ms, -1: no limit). */
    int nap = 0;
    long slice_ns = timeout_ms < 0 ? -1 : (long)timeout_ms * 1000000L;
    if (tx_pending(d) && (slice_ns < 0 || slice_ns > WAIT_ROOM_NAP_NS)) {
        slice_ns = WAIT_ROOM_NAP_NS;
        nap = 1;
    }
    if (!d->bell_exact && (slice_ns < 0 || slice_ns > WAIT_SLICE_MS * 1000000L))
        slice_ns = WAIT_SLICE_MS * 1000000L;
    const double deadline = timeout_ms < 0 ? -1 : torxp_mono_s() + timeout_ms * 1e-3;

    /* relaxed: ordered by the barrier below. */
    __atomic_store_n(&me->sleeping, 1u, __ATOMIC_RELAXED);
    /* The waiter's half of the StoreLoad pair (see the top): membarrier runs a
     * full barrier on every CPU that runs an injector; without it, a seq_cst
     * fence orders at least our side and the slices bound what is lost. */
    if (d->bell_exact && syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) != 0) {
        /* Refused after all: sliced sleeps from now on. */
        d->bell_exact = 0;
        torxp_log(dev, 1, "membarrier: %s; the doorbell sleeps in slices of %d ms", strerror(errno),
                  WAIT_SLICE_MS);
        if (slice_ns < 0 || slice_ns > WAIT_SLICE_MS * 1000000L)
            slice_ns = WAIT_SLICE_MS * 1000000L;
    }
    if (!d->bell_exact)
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
    int woken = 0;
    for (;;) {
        if (any_packet(d)) {
            woken = 1;
            break;
        }
        struct timespec ts, *tsp = NULL;
        if (slice_ns >= 0) {
            ts = (struct timespec){slice_ns / 1000000000L, slice_ns % 1000000000L};
            tsp = &ts;
        }
        const long rc = futex(&me->doorbell, FUTEX_WAIT, bell, tsp);
        if (rc == 0 || errno != ETIMEDOUT) { /* woken, bumped already, or a signal */
            woken = 1;
            break;
        }
        if (nap || (deadline >= 0 && torxp_mono_s() >= deadline))
            break;
        /* A sliced sleep ran out: look again (a wakeup may have been lost). */
    }
    /* relaxed: a late injector that still sees 1 only bumps the doorbell,
     * which makes the next wait return at once. */
    __atomic_store_n(&me->sleeping, 0u, __ATOMIC_RELAXED);
    /* acquire: as above. */
    d->bell_seen = __atomic_load_n(&me->doorbell, __ATOMIC_ACQUIRE);
    if (woken || nap || d->bell_seen != bell || any_packet(d))
        return TORX_OK;
    return TORX_AGAIN;
}

void torxp_shm_wake(torx_pkt_dev_t *dev)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    ring(d, d->self_index);
}
