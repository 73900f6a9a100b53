/* Bulk transfer for the shm device: shared gets (shm_bulk.h). */
#include "shm_bulk.h"

#include <errno.h>
#include <sched.h>

/* ---- Shared gets ------------------------------------------------------------------
 *
 * One process_vm_readv copies at a quarter of memcpy's speed on the machines
 * measured (the kernel pins and maps the source page by page: 1 MiB in 79 us
 * against memcpy's 21), while the owner of the source is often waiting in
 * its progress loop for this very transfer: a rendezvous sender waits for
 * the receiver's ack. So a torx_bulk_get_shared (the caller's word that the
 * owner has nothing else to copy for it) of share_min bytes or more is
 * offered to the owner: the reader fills its record in the share region
 * and sends the owner BULK_SHARE, and from then on both claim bytes from
 * the front of the record's counter, the reader reading what it claims
 * (process_vm_readv), the owner writing what it claims into the reader
 * (process_vm_writev). Each claim is half of what is left, at least
 * TORXP_BULK_SHARE_PIECE (each call costs a microsecond or two of its own),
 * so with the owner there at once the two split the get near the middle in
 * a few calls, and an owner that comes late takes half of what it finds.
 * Two cores copy at once: 1 MiB in 45 us there, against 41 for two fixed
 * halves and 79 alone.
 *
 * The reader never waits for help, only for bytes the owner has claimed
 * (one claim at a time): an owner busy elsewhere finds the counter spent
 * when it gets to the packet, and the reader has copied everything alone,
 * as in an unshared get. Claims carry the get's sequence number in the counter's top
 * bits, so a late BULK_SHARE, or one for a get that has ended, claims
 * nothing of the next. The get still completes inside the call. */

#define SHARE_OFF_MASK (((uint64_t)1 << TORXP_SHM_SHARE_OFF_BITS) - 1)
#define SHARE_SEQ_MASK ((1u << (64 - TORXP_SHM_SHARE_OFF_BITS)) - 1)

/* The next claim at offset off of a get of len bytes: half of the rest,
 * whole pages, at least a piece. */
static uint64_t share_claim_len(uint64_t off, uint64_t len)
{
    const uint64_t rest = len - off;
    uint64_t n = rest / 2 < TORXP_BULK_SHARE_PIECE ? TORXP_BULK_SHARE_PIECE : rest / 2;
    n = (n + 4095) & ~(uint64_t)4095;
    return n < rest ? n : rest;
}

/* Claims the next bytes of get seq: their offset in *off, their length
 * returned; 0 when the get has ended or is all claimed. */
static uint64_t share_claim(torxp_shm_share_t *r, uint64_t seq, uint64_t len, uint64_t *off)
{
    uint64_t w = __atomic_load_n(&r->claim, __ATOMIC_RELAXED);
    for (;;) {
        const uint64_t at = w & SHARE_OFF_MASK;
        if (w >> TORXP_SHM_SHARE_OFF_BITS != seq || at >= len)
            return 0;
        const uint64_t n = share_claim_len(at, len);
        if (__atomic_compare_exchange_n(&r->claim, &w, w + n, false, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
            *off = at;
            return n;
        }
    }
}

/* Whether the owner is itself in a get from this task: then both cores
 * copy already (both ways at once: a bidirectional stream), and sharing
 * would only add calls and contention (both-ways bandwidth 0.8x of the
 * unshared at 256 KiB-1 MiB). */
static bool share_owner_busy(const torxp_shm_dev_t *d, const torxp_shm_bulk_op_t *op)
{
    const torxp_shm_share_t *o = &d->share[torxp_shm_bulk_peer_index(d, op->b.peer)];
    const uint64_t w = __atomic_load_n(&o->claim, __ATOMIC_RELAXED);
    return w >> TORXP_SHM_SHARE_OFF_BITS &&
           (w & SHARE_OFF_MASK) < __atomic_load_n(&o->len, __ATOMIC_RELAXED) &&
           __atomic_load_n(&o->owner, __ATOMIC_RELAXED) == d->self_index;
}

bool torxp_shm_share_wanted(const torxp_shm_dev_t *d, const torxp_shm_bulk_op_t *op)
{
    return d->share_min && !op->b.is_put && op->b.len >= d->share_min &&
           op->b.len <= SHARE_OFF_MASK && !share_owner_busy(d, op);
}

/* The reader's half of a shared get: 0 or an errno, as torxp_shm_bulk_cma_copy. */
int torxp_shm_share_get(torxp_shm_dev_t *d, torxp_shm_bulk_op_t *op, pid_t pid)
{
    torxp_shm_share_t *r = &d->share[d->self_index];
    const uint64_t len = op->b.len;
    d->share_seq = (d->share_seq + 1) & SHARE_SEQ_MASK;
    if (!d->share_seq)
        d->share_seq = 1;
    const uint64_t seq = d->share_seq;
    /* relaxed: the claim word's release store below publishes them; the
     * owner reads them only after its acquire of that word. */
    __atomic_store_n(&r->src, op->b.remote, __ATOMIC_RELAXED);
    __atomic_store_n(&r->dst, op->b.local, __ATOMIC_RELAXED);
    __atomic_store_n(&r->len, len, __ATOMIC_RELAXED);
    __atomic_store_n(&r->owner, torxp_shm_bulk_peer_index(d, op->b.peer), __ATOMIC_RELAXED);
    __atomic_store_n(&r->helped, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&r->abandoned, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&r->claim, seq << TORXP_SHM_SHARE_OFF_BITS, __ATOMIC_RELEASE);
    /* A full FIFO: the owner is behind anyway; copy alone. */
    if (torxp_shm_bulk_send(d, op->b.peer, BULK_SHARE, 0, seq, 0, NULL, 0) == TORX_OK)
        d->shared_gets++;

    uint64_t own = 0, claimed = len, off, n;
    int err = 0;
    while ((n = share_claim(r, seq, len, &off))) {
        own += n;
        uint64_t moved = 0;
        if ((err = torxp_shm_bulk_cma_copy(pid, false, op->b.local + off, op->b.remote + off, n,
                                           &moved))) {
            /* Close the counter: the bytes after these are nobody's. */
            const uint64_t w = __atomic_exchange_n(&r->claim, seq << TORXP_SHM_SHARE_OFF_BITS | len,
                                                   __ATOMIC_RELAXED);
            claimed = (w & SHARE_OFF_MASK) < len ? (w & SHARE_OFF_MASK) : len;
            break;
        }
    }
    /* Wait for the bytes the owner claimed: it writes into our memory, so
     * nothing may return before it has finished. */
    const uint64_t theirs = claimed - own;
    unsigned spins = 0;
    for (;;) {
        /* acquire: pairs with the owner's releases after its copies. */
        const uint64_t gone = __atomic_load_n(&r->abandoned, __ATOMIC_ACQUIRE);
        const uint64_t gone_len = gone ? __atomic_load_n(&r->abandoned_len, __ATOMIC_RELAXED) : 0;
        const uint64_t helped = __atomic_load_n(&r->helped, __ATOMIC_ACQUIRE);
        if (helped + gone_len >= theirs) {
            if (gone && !err && gone_len <= len && gone - 1 <= len - gone_len) {
                /* The owner could not write them: they are ours. */
                uint64_t moved = 0;
                err = torxp_shm_bulk_cma_copy(pid, false, op->b.local + gone - 1,
                                              op->b.remote + gone - 1, gone_len, &moved);
            }
            d->bytes_written_for_us += helped;
            break;
        }
        if (++spins % 4096 == 0) {
            if (torxp_shm_bulk_pid_dead(pid)) {
                err = err ? err : ESRCH;
                break;
            }
            sched_yield(); /* the owner may be waiting for this core */
        }
    }
    if (!err)
        op->b.sent = len;
    return err;
}

/* The owner's half: the get of the task at from, if it is still on. */
void torxp_shm_share_help(torxp_shm_dev_t *d, torx_coord_t from, uint64_t seq)
{
    torxp_shm_share_t *r = &d->share[torxp_shm_bulk_peer_index(d, from)];
    /* acquire: pairs with the reader's release; its record is complete.
     * If a claim below succeeds, the reader was in this get all along, so
     * what is read here belongs to it. */
    const uint64_t w = __atomic_load_n(&r->claim, __ATOMIC_ACQUIRE);
    if (w >> TORXP_SHM_SHARE_OFF_BITS != seq)
        return; /* over, and maybe the next begun */
    const uint64_t src = __atomic_load_n(&r->src, __ATOMIC_RELAXED);
    const uint64_t dst = __atomic_load_n(&r->dst, __ATOMIC_RELAXED);
    const uint64_t len = __atomic_load_n(&r->len, __ATOMIC_RELAXED);
    const uint32_t owner = __atomic_load_n(&r->owner, __ATOMIC_RELAXED);
    if (owner != d->self_index || !len || len > SHARE_OFF_MASK || src + len < src ||
        dst + len < dst) {
        if (__atomic_load_n(&r->claim, __ATOMIC_RELAXED) == w)
            torxp_dev_malformed(
                &d->base,
                "shared get %llu of task (%u,%u,%u,%u): %llu bytes, owner slot %u (we "
                "are %u)",
                (unsigned long long)seq, from.x, from.y, from.z, from.t, (unsigned long long)len,
                owner, d->self_index);
        return;
    }
    const pid_t pid = torxp_shm_bulk_peer_pid(d, from);
    uint64_t off, n;
    while ((n = share_claim(r, seq, len, &off))) {
        uint64_t moved = 0;
        if (torxp_shm_bulk_cma_copy(pid, true, src + off, dst + off, n, &moved)) {
            /* Gone, or not writable by us: the reader copies them. */
            __atomic_store_n(&r->abandoned_len, n, __ATOMIC_RELAXED);
            __atomic_store_n(&r->abandoned, off + 1, __ATOMIC_RELEASE);
            return;
        }
        d->bytes_helped += n;
        /* release: our copy is in place before the reader counts it. */
        __atomic_fetch_add(&r->helped, n, __ATOMIC_RELEASE);
    }
}
