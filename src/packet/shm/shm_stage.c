/* The shm device's staging area: a byte ring per ordered pair of ranks in
 * the job's segment, written only by the sender and read only by the
 * receiver, for pieces of mid-size data that a descriptor packet announces
 * (torx_stage_put, <torx/packet.h>).
 *
 *   control block  released: the receiver's read position, published after
 *                  it has read a piece (own lines: the sender polls it)
 *   data           stage_bytes, a power of two
 *
 * Positions count bytes since the start of the job and never wrap in
 * practice. A piece is contiguous: one that would cross the end of the ring
 * starts at its beginning instead, and sender and receiver both skip the
 * tail by the same rule, so a descriptor needs only the position (its low
 * 32 bits: ref.off) and length and the receiver can check that it names
 * exactly the next piece. The
 * sender re-reads released only when its cached copy says the ring is
 * full, so a streaming pair shares one line in each direction: the
 * descriptor's FIFO slot and released.
 *
 * Rewinding: a piece of up to TORX_STAGE_REWIND_MAX bytes may also start
 * the next lap early when the ring is empty, and does when exactly one
 * piece from the receiver was read here since the last put toward it: the
 * pair takes turns, so the ring is likely empty, and released, prefetched
 * then, is cheap to read. (A window of several pieces each way is a
 * stream, which is better off walking, below.) A ping-pong then reuses the
 * ring's first lines, which stay in the two cores' caches, instead of
 * walking the whole ring through the caches' far levels: walking, a 1 KiB
 * ping-pong took a third longer. Longer pieces walk: rewound, each of
 * their many lines waits for the receiver's copy of it to be invalidated,
 * which cost more than the walk (TORXP_STAGE_REWIND_MAX_DEFAULT). The
 * receiver takes a piece at the next lap's start where it expected another
 * as the same skip.
 *
 * Ordering: the piece's bytes are plain stores; the descriptor packet's
 * publication (release) orders them before the receiver's read. The
 * receiver's release store of released orders its reads before the
 * sender's acquire and next overwrite. */
#include "shm.h"

#include <string.h>

/* Above this, a job's rings shrink (power of two steps) until they fit. */
#define STAGE_TOTAL_MAX ((uint64_t)256 << 20)
#define STAGE_MIN 4096u

/* torx_stage_cost: one piece in COST_EVERY of this length or more is timed
 * (two clock reads, 50 ns on the development VM: near a tenth of a 4 KiB
 * message's half round trip if every piece paid them), and the cost is the least of the last
 * COST_SAMPLES: a copy the scheduler preempted is one slow sample among
 * fast ones, while cores far apart make every sample slow. */
#define COST_MIN_BYTES 4096u
#define COST_EVERY 8u
#define COST_SAMPLES TORXP_SHM_STAGE_COSTS

uint32_t torxp_shm_stage_bytes(unsigned ntasks, long want)
{
    return torxp_shm_fit_rings(want, (uint64_t)ntasks * ntasks, STAGE_TOTAL_MAX, STAGE_MIN);
}

static inline uint64_t *ring_released(const torxp_shm_dev_t *d, unsigned src, unsigned dst)
{
    return torxp_shm_at(d, d->seg->stage_off + ((uint64_t)src * (unsigned)d->base.size + dst) *
                                                   d->seg->stage_stride);
}

static inline uint8_t *ring_data(const torxp_shm_dev_t *d, unsigned src, unsigned dst)
{
    return (uint8_t *)ring_released(d, src, dst) + TORXP_SHM_STAGE_CTL;
}

/* No coordinate packs to this: every extent is at most 255. */
#define MEMO_NONE UINT32_MAX

torx_status_t torxp_shm_stage_setup(torxp_shm_dev_t *d, long rewind_max)
{
    d->stage_bytes = d->seg->stage_bytes;
    d->stage_rewind_max = (uint32_t)rewind_max;
    d->stage_tx_memo = d->stage_rx_memo = (struct torxp_shm_stage_memo){MEMO_NONE, -1};
    if (!d->stage_bytes)
        return TORX_OK;
    const size_t n = (size_t)d->base.size;
    d->stage_tx = torxp_calloc(n, sizeof *d->stage_tx);
    d->stage_rx = torxp_calloc(n, sizeof *d->stage_rx);
    if (!d->stage_tx || !d->stage_rx)
        return torxp_error(TORX_ERR_NOMEM,
                           "torx: out of memory for the staging positions of %zu "
                           "peers",
                           n);
    /* The rings' addresses, once: a put, a read and a release then do no
     * address arithmetic on the segment's header. */
    const unsigned self = (unsigned)d->base.rank;
    for (unsigned r = 0; r < n; r++) {
        d->stage_tx[r].data = ring_data(d, self, r);
        d->stage_tx[r].released = ring_released(d, self, r);
        d->stage_rx[r].data = ring_data(d, r, self);
        d->stage_rx[r].released = ring_released(d, r, self);
    }
    return TORX_OK;
}

void torxp_shm_stage_fini(torxp_shm_dev_t *d)
{
    free(d->stage_tx);
    free(d->stage_rx);
    d->stage_tx = NULL;
    d->stage_rx = NULL;
}

/* The first piece toward a rank, and the first from it, map that ring's
 * pages into this task at once (torxp_shm_populate), instead of a page
 * fault per page as the ring is first walked: about 1 us a fault on these
 * VMs, which a pair's first megabyte of mid-size messages paid (a
 * 300-round-trip 1 KiB ping-pong took 1.1-1.3 us a half round trip against
 * 0.35 warm). Per ring and when first used, so a task that talks to few
 * others maps few rings. The reader maps for writing too: it writes
 * nothing there, but a write mapping of a shared page costs it nothing
 * more. */
static void map_ring(const torxp_shm_dev_t *d, const uint8_t *data)
{
    torxp_shm_populate(data, d->stage_bytes);
}

/* torxp_shm_rank_at, remembered for the last coordinate: the rank of the
 * peer the calls of one message (or of a pair's stream) name again. */
static inline int memo_rank(const torxp_shm_dev_t *d, struct torxp_shm_stage_memo *m,
                            torx_coord_t c)
{
    uint32_t key;
    memcpy(&key, &c, sizeof key);
    if (TORXP_LIKELY(key == m->coord))
        return m->rank;
    const int r = torxp_shm_rank_at(d, c);
    if (r >= 0)
        *m = (struct torxp_shm_stage_memo){key, r};
    return r;
}

static inline uint64_t ref_key(torx_stage_ref_t ref)
{
    return (uint64_t)ref.off << 32 | ref.len; /* never 0: len >= 1 */
}

/* The copy of a piece that is timed for torx_stage_cost: out of line, so
 * that the untimed copy of every other piece saves no registers for it. */
static void __attribute__((noinline))
timed_copy(struct torxp_shm_stage_tx *tx, uint8_t *to, const void *data, size_t len)
{
    const double t0 = torxp_mono_s();
    memcpy(to, data, len);
    const double ns_per_kib = (torxp_mono_s() - t0) * 1e9 * 1024 / (double)len;
    tx->cost[tx->cost_next++ % COST_SAMPLES] = (uint16_t)(ns_per_kib < 1            ? 1
                                                          : ns_per_kib > UINT16_MAX ? UINT16_MAX
                                                                                    : ns_per_kib);
}

size_t torxp_shm_stage_max(const torx_pkt_dev_t *dev)
{
    return ((const torxp_shm_dev_t *)dev)->stage_bytes / 2;
}

int torxp_shm_stage_reaches(const torx_pkt_dev_t *dev, torx_coord_t dest)
{
    return ((const torxp_shm_dev_t *)dev)->stage_bytes && torx_coord_in_shape(dev->shape, dest);
}

torx_status_t torxp_shm_stage_put(torx_pkt_dev_t *dev, torx_coord_t dest, const void *data,
                                  size_t len, torx_stage_ref_t *ref)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    const uint64_t size = d->stage_bytes;
    const int dst = memo_rank(d, &d->stage_tx_memo, dest);
    if (TORXP_UNLIKELY(!len || len > size / 2 || !data || !ref || dst < 0))
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_stage_put: %zu bytes at %p to (%u,%u,%u,%u): %s", len, data,
                           dest.x, dest.y, dest.z, dest.t,
                           !size           ? "this device has no staging area (TORX_STAGE_BYTES=0)"
                           : dst < 0       ? "no task there"
                           : !data || !ref ? "NULL data or descriptor"
                                           : "not 1..torx_stage_max bytes");
    struct torxp_shm_stage_tx *tx = &d->stage_tx[dst];
    if (TORXP_UNLIKELY(!tx->mapped)) {
        map_ring(d, tx->data);
        tx->mapped = 1;
    }
    uint64_t pos = tx->wr;
    uint64_t off = pos & (size - 1);
    /* relaxed: a hint; released's acquire orders what matters. */
    const uint8_t heard = __atomic_load_n(&tx->heard, __ATOMIC_RELAXED);
    if (heard)
        __atomic_store_n(&tx->heard, 0, __ATOMIC_RELAXED);
    if (heard == 1 && len <= d->stage_rewind_max && off >= len) {
        if (tx->seen != pos)
            tx->seen = __atomic_load_n(tx->released, __ATOMIC_ACQUIRE);
        if (tx->seen == pos) { /* empty: rewind (above) */
            pos += size - off;
            off = 0;
        }
    }
    if (off + len > size) { /* the piece starts the next lap */
        pos += size - off;
        off = 0;
    }
    if (pos + len - tx->seen > size) {
        /* acquire: pairs with the receiver's release; its reads of the
         * bytes we are about to overwrite are finished. */
        tx->seen = __atomic_load_n(tx->released, __ATOMIC_ACQUIRE);
        if (pos + len - tx->seen > size)
            return TORX_NO_ROOM;
    }
    if (len >= COST_MIN_BYTES && tx->cost_skip++ % COST_EVERY == 0)
        timed_copy(tx, tx->data + off, data, len);
    else
        memcpy(tx->data + off, data, len);
    tx->undo = tx->wr + 1;
    tx->wr = pos + len;
    *ref = (torx_stage_ref_t){.off = (uint32_t)pos, .len = (uint32_t)len};
    return TORX_OK;
}

void torxp_shm_stage_unput(torx_pkt_dev_t *dev, torx_coord_t dest, torx_stage_ref_t ref)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    const int dst = memo_rank(d, &d->stage_tx_memo, dest);
    if (dst < 0 || !d->stage_bytes)
        return;
    struct torxp_shm_stage_tx *tx = &d->stage_tx[dst];
    if (!tx->undo || !ref.len || tx->wr - tx->undo + 1 < ref.len ||
        (uint32_t)(tx->wr - ref.len) != ref.off)
        return;
    tx->wr = tx->undo - 1;
    tx->undo = 0;
}

int torxp_shm_stage_idle(torx_pkt_dev_t *dev, torx_coord_t dest)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    const int dst = memo_rank(d, &d->stage_tx_memo, dest);
    if (dst < 0 || !d->stage_bytes)
        return 0;
    struct torxp_shm_stage_tx *tx = &d->stage_tx[dst];
    if (tx->seen == tx->wr)
        return 1;
    /* acquire, as in put: a caller that now stages a whole ring's worth
     * overwrites bytes the receiver has finished reading. */
    tx->seen = __atomic_load_n(tx->released, __ATOMIC_ACQUIRE);
    return tx->seen == tx->wr;
}

unsigned torxp_shm_stage_cost(const torx_pkt_dev_t *dev, torx_coord_t dest)
{
    const torxp_shm_dev_t *d = (const torxp_shm_dev_t *)dev;
    const int dst = torxp_shm_rank_at(d, dest);
    if (dst < 0 || !d->stage_bytes)
        return 0;
    unsigned least = 0;
    for (unsigned i = 0; i < COST_SAMPLES; i++) {
        const unsigned c = d->stage_tx[dst].cost[i];
        if (c && (!least || c < least))
            least = c;
    }
    return least;
}

/* Whether ref is the next piece from src: where the last one ended, or
 * the next lap's start (a wrap or a rewind); *pos gets its position. */
static inline bool next_piece(const torxp_shm_dev_t *d, int src, torx_stage_ref_t ref,
                              uint64_t *pos)
{
    const uint64_t size = d->stage_bytes;
    if (TORXP_UNLIKELY(src < 0 || !ref.len || ref.len > size / 2))
        return false;
    uint64_t p = d->stage_rx[src].rd;
    const uint64_t off = p & (size - 1);
    if ((uint32_t)p == ref.off) {
        if (TORXP_UNLIKELY(off + ref.len > size)) /* it had to wrap */
            return false;
    } else {
        p += size - off;
        if (!off || (uint32_t)p != ref.off)
            return false;
    }
    *pos = p;
    return true;
}

const void *torxp_shm_stage_data(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    const int s = memo_rank(d, &d->stage_rx_memo, src);
    uint64_t pos;
    if (!next_piece(d, s, ref, &pos))
        return NULL;
    struct torxp_shm_stage_rx *rx = &d->stage_rx[s];
    rx->taken_ref = ref_key(ref);
    rx->taken_pos = pos;
    /* The first piece from s since the last put toward it: the next put
     * may rewind, and will read what s released (see Rewinding). */
    struct torxp_shm_stage_tx *tx = &d->stage_tx[s];
    const uint8_t heard = __atomic_load_n(&tx->heard, __ATOMIC_RELAXED);
    if (heard < 2) {
        if (!heard)
            __builtin_prefetch(tx->released);
        __atomic_store_n(&tx->heard, (uint8_t)(heard + 1), __ATOMIC_RELAXED);
    }
    if (TORXP_UNLIKELY(!rx->mapped)) {
        map_ring(d, rx->data);
        rx->mapped = 1;
    }
    return rx->data + (pos & (d->stage_bytes - 1));
}

void torxp_shm_stage_release(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    const int s = memo_rank(d, &d->stage_rx_memo, src);
    if (TORXP_UNLIKELY(s < 0 || !d->stage_bytes))
        return;
    struct torxp_shm_stage_rx *rx = &d->stage_rx[s];
    uint64_t pos = rx->taken_pos;
    /* The piece torx_stage_data checked and returned, as a rule; any other
     * ref is checked here. */
    if (TORXP_UNLIKELY(rx->taken_ref != ref_key(ref)) && !next_piece(d, s, ref, &pos))
        return;
    rx->taken_ref = 0;
    rx->rd = pos + ref.len;
    /* release: our reads of the piece happen before the sender's acquire
     * lets it overwrite them. */
    __atomic_store_n(rx->released, pos + ref.len, __ATOMIC_RELEASE);
}
