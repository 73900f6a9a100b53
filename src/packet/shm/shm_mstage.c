/* The shm device's multi-reader staging: one ring per task in the job's
 * segment, written only by its task, read by any (torx_mstage_put,
 * <torx/packet.h>).
 *
 * A piece is a one-line header and its data, both starting on a line:
 *
 *   header  readers: releases still to come; len: data bytes
 *   data    len bytes, padded to a line
 *
 * The writer keeps two positions privately (bytes since the start of the
 * job): head, where the next piece goes, and tail, its oldest piece that
 * some reader still holds. A put first walks tail over the pieces whose
 * readers count reached 0, so room comes back in the order it was taken
 * while readers release in any order. A piece that would cross the end of
 * the ring starts at its beginning; the writer marks the tail it skips
 * with a header of no readers, so the walk passes it like a released
 * piece. Readers need no position: the descriptor names the piece.
 *
 * The ring is TORX_MSTAGE_BYTES plus a page, so pieces of half of
 * TORX_MSTAGE_BYTES fit twice over with their headers.
 *
 * Ordering: the header's and data's stores are plain; the descriptor's
 * publication (a packet's release) orders them before a reader's loads.
 * A reader's release decrement orders its reads before the writer's
 * acquire load of 0 and the overwrite that follows. */
#include "shm.h"

#include <string.h>

/* Above this, a job's rings shrink (power of two steps) until they fit. */
#define MSTAGE_TOTAL_MAX ((uint64_t)64 << 20)
#define MSTAGE_MIN 65536u
#define MSTAGE_SLACK 4096u

typedef struct mstage_hdr {
    alignas(TORXP_CACHELINE) uint32_t readers;
    uint32_t len;
} mstage_hdr_t;

_Static_assert(sizeof(mstage_hdr_t) == TORXP_CACHELINE, "a piece header is one line");

#define HDR_BYTES ((uint64_t)sizeof(mstage_hdr_t))

uint32_t torxp_shm_mstage_bytes(unsigned ntasks, long want)
{
    return torxp_shm_fit_rings(want, ntasks, MSTAGE_TOTAL_MAX, MSTAGE_MIN);
}

uint64_t torxp_shm_mstage_stride(uint32_t mstage_bytes)
{
    return mstage_bytes ? (uint64_t)mstage_bytes + MSTAGE_SLACK : 0;
}

static inline uint8_t *ring_of(const torxp_shm_dev_t *d, unsigned rank)
{
    return torxp_shm_at(d, d->seg->mstage_off + (uint64_t)rank * d->mstage_ring);
}

static inline mstage_hdr_t *hdr_at(uint8_t *ring, uint64_t off)
{
    return (mstage_hdr_t *)(void *)(ring + off);
}

static inline uint64_t line_up(uint64_t n)
{
    return (n + TORXP_CACHELINE - 1) & ~(uint64_t)(TORXP_CACHELINE - 1);
}

void torxp_shm_mstage_setup(torxp_shm_dev_t *d)
{
    d->mstage_bytes = d->seg->mstage_bytes;
    d->mstage_ring = d->seg->mstage_stride;
    d->mstage_head = d->mstage_tail = 0;
    /* Map every ring's pages now (the segment is allocated already): a
     * broadcast's first laps through the rings otherwise take a page fault
     * per page in the root and in every member, which made a job's first
     * hundred 128 KiB broadcasts 3x slower than the rest (8 tasks on 2
     * cores). */
    if (d->mstage_bytes)
        torxp_shm_populate(ring_of(d, 0), (size_t)d->mstage_ring * (size_t)d->base.size);
}

size_t torxp_shm_mstage_max(const torx_pkt_dev_t *dev)
{
    return ((const torxp_shm_dev_t *)dev)->mstage_bytes / 2;
}

/* Moves tail past the pieces every reader has released. */
static void reclaim(torxp_shm_dev_t *d, uint8_t *ring)
{
    while (d->mstage_tail < d->mstage_head) {
        mstage_hdr_t *h = hdr_at(ring, d->mstage_tail % d->mstage_ring);
        /* acquire: pairs with the readers' release decrements. */
        if (__atomic_load_n(&h->readers, __ATOMIC_ACQUIRE) != 0)
            return;
        d->mstage_tail += HDR_BYTES + line_up(h->len);
    }
}

torx_status_t torxp_shm_mstage_put(torx_pkt_dev_t *dev, const void *data, size_t len,
                                   unsigned readers, torx_stage_ref_t *ref)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    if (TORXP_UNLIKELY(!len || len > d->mstage_bytes / 2 || !readers || !data || !ref))
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_mstage_put: %zu bytes at %p for %u readers: %s", len, data,
                           readers,
                           !d->mstage_bytes ? "this device has no multi-reader staging area "
                                              "(TORX_MSTAGE_BYTES=0)"
                           : !data || !ref  ? "NULL data or descriptor"
                           : !readers       ? "no readers"
                                            : "not 1..torx_mstage_max bytes");
    uint8_t *ring = ring_of(d, (unsigned)dev->rank);
    const uint64_t size = d->mstage_ring, need = HDR_BYTES + line_up(len);
    reclaim(d, ring);
    uint64_t off = d->mstage_head % size;
    if (off + need > size) {
        /* Skip to the start of the ring, when the skip and the piece fit. */
        if (d->mstage_head + (size - off) + need - d->mstage_tail > size)
            return TORX_NO_ROOM;
        mstage_hdr_t *skip = hdr_at(ring, off);
        skip->len = (uint32_t)(size - off - HDR_BYTES);
        __atomic_store_n(&skip->readers, 0, __ATOMIC_RELAXED);
        if (d->mstage_tail == d->mstage_head) /* nothing held: start afresh */
            d->mstage_tail += size - off;
        d->mstage_head += size - off;
        off = 0;
    }
    if (d->mstage_head + need - d->mstage_tail > size)
        return TORX_NO_ROOM;
    mstage_hdr_t *h = hdr_at(ring, off);
    h->len = (uint32_t)len;
    __atomic_store_n(&h->readers, readers, __ATOMIC_RELAXED);
    memcpy(ring + off + HDR_BYTES, data, len);
    d->mstage_head += need;
    *ref = (torx_stage_ref_t){.off = (uint32_t)(off + HDR_BYTES), .len = (uint32_t)len};
    return TORX_OK;
}

/* The header of the piece ref names in src's ring, or NULL when ref cannot
 * name one there. */
static mstage_hdr_t *piece(torxp_shm_dev_t *d, torx_coord_t src, torx_stage_ref_t ref,
                           uint8_t **ring)
{
    const int s = torxp_shm_rank_at(d, src);
    if (TORXP_UNLIKELY(s < 0 || !d->mstage_bytes || !ref.len || ref.len > d->mstage_bytes / 2 ||
                       ref.off < HDR_BYTES || ref.off % TORXP_CACHELINE ||
                       (uint64_t)ref.off + ref.len > d->mstage_ring))
        return NULL;
    *ring = ring_of(d, (unsigned)s);
    mstage_hdr_t *h = hdr_at(*ring, ref.off - HDR_BYTES);
    if (__atomic_load_n(&h->readers, __ATOMIC_RELAXED) == 0 ||
        __atomic_load_n(&h->len, __ATOMIC_RELAXED) != ref.len)
        return NULL;
    return h;
}

const void *torxp_shm_mstage_data(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref)
{
    uint8_t *ring;
    return piece(torxp_shm_of(dev), src, ref, &ring) ? ring + ref.off : NULL;
}

void torxp_shm_mstage_release(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref)
{
    uint8_t *ring;
    mstage_hdr_t *h = piece(torxp_shm_of(dev), src, ref, &ring);
    if (!h)
        return;
    /* A compare-and-swap, not a decrement: a stray second release must not
     * wrap the count and pin the writer's ring for good. release: this
     * reader's loads of the piece happen before the writer reuses it. */
    uint32_t v = __atomic_load_n(&h->readers, __ATOMIC_RELAXED);
    while (v != 0 && !__atomic_compare_exchange_n(&h->readers, &v, v - 1, true, __ATOMIC_RELEASE,
                                                  __ATOMIC_RELAXED))
        ;
}
