/* A reception FIFO of the shm device: many producers (any task may inject),
 * one consumer (the owning task), fixed 256-byte packet slots.
 *
 *   tail  next position to reserve; producers CAS it (own cache line)
 *   head  next position to read; written only by the consumer (own line)
 *   slots packets * 256 bytes; slot i holds positions i, i+packets, ...
 *
 * A slot is full for position pos when its header's dev_tag equals
 * torxp_fifo_lap_tag(pos). Tags run 1..255 and differ between consecutive
 * laps, and zeroed memory (tag 0) is never full. The consumer never writes a
 * slot, so a packet's lines move one way only; producers learn that room
 * was made from head, which they re-read only when their cached copy says
 * the FIFO is full.
 *
 * Position counters are 64-bit and never wrap in practice; all room
 * arithmetic is on differences, so it would survive a wrap anyway.
 */
#ifndef TORXP_SHM_FIFO_H
#define TORXP_SHM_FIFO_H

#include <torx/packet.h>

#include <assert.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define TORXP_FIFO_CTL_BYTES 128 /* tail line + head line */
#define TORXP_FIFO_SLOT_BYTES TORX_PKT_MAX_BYTES

typedef struct torxp_fifo {
    alignas(64) uint64_t tail;
    alignas(64) uint64_t head;
} torxp_fifo_t;

static_assert(sizeof(torxp_fifo_t) == TORXP_FIFO_CTL_BYTES, "FIFO control is two lines");

typedef struct torxp_fifo_geom {
    uint32_t packets; /* power of two */
    uint32_t log2;
    uint64_t stride; /* control + slots, bytes */
} torxp_fifo_geom_t;

static inline torxp_fifo_geom_t torxp_fifo_geom(uint32_t packets_log2)
{
    torxp_fifo_geom_t g = {.packets = 1u << packets_log2, .log2 = packets_log2};
    g.stride = TORXP_FIFO_CTL_BYTES + (uint64_t)g.packets * TORXP_FIFO_SLOT_BYTES;
    return g;
}

static inline uint8_t torxp_fifo_lap_tag(uint64_t pos, uint32_t log2)
{
    return (uint8_t)((pos >> log2) % 255u + 1u);
}

static inline torx_pkt_hdr_t *torxp_fifo_slot(torxp_fifo_t *f, torxp_fifo_geom_t g, uint64_t pos)
{
    return (torx_pkt_hdr_t *)((char *)f + TORXP_FIFO_CTL_BYTES +
                              (pos & (g.packets - 1)) * TORXP_FIFO_SLOT_BYTES);
}

/* Producer: whether position pos is free. *cached_head is this producer's
 * private view of head, re-read only when it says the FIFO is full. */
static inline bool torxp_fifo_free_at(torxp_fifo_t *f, torxp_fifo_geom_t g, uint64_t *cached_head,
                                      uint64_t pos)
{
    if (pos - *cached_head < g.packets)
        return true;
    /* acquire: pairs with the consumer's release of head, so its reads of
     * the slot we are about to overwrite are finished. */
    *cached_head = __atomic_load_n(&f->head, __ATOMIC_ACQUIRE);
    return pos - *cached_head < g.packets;
}

/* Producer: reserves the next n positions (*pos_out and on), or returns
 * false, reserving nothing, when the FIFO has room for fewer. */
static inline bool torxp_fifo_reserve_n(torxp_fifo_t *f, torxp_fifo_geom_t g, uint64_t *cached_head,
                                        unsigned n, uint64_t *pos_out)
{
    /* relaxed: the tail only hands out unique positions; it carries no data. */
    uint64_t pos = __atomic_load_n(&f->tail, __ATOMIC_RELAXED);
    for (;;) {
        if (!torxp_fifo_free_at(f, g, cached_head, pos + n - 1))
            return false;
        if (__atomic_compare_exchange_n(&f->tail, &pos, pos + n, true, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
            *pos_out = pos;
            return true;
        }
    }
}

static inline bool torxp_fifo_reserve(torxp_fifo_t *f, torxp_fifo_geom_t g, uint64_t *cached_head,
                                      uint64_t *pos_out)
{
    return torxp_fifo_reserve_n(f, g, cached_head, 1, pos_out);
}

/* Producer that is the FIFO's only one: torxp_fifo_reserve_n without the
 * compare-and-swap, whose locked instruction is a fence on the path of every
 * packet. Only for FIFOs no other task or thread ever writes. */
static inline bool torxp_fifo_reserve_sole_n(torxp_fifo_t *f, torxp_fifo_geom_t g,
                                             uint64_t *cached_head, unsigned n, uint64_t *pos_out)
{
    /* relaxed: only this producer writes tail; it is read for room only. */
    const uint64_t pos = __atomic_load_n(&f->tail, __ATOMIC_RELAXED);
    if (!torxp_fifo_free_at(f, g, cached_head, pos + n - 1))
        return false;
    __atomic_store_n(&f->tail, pos + n, __ATOMIC_RELAXED);
    *pos_out = pos;
    return true;
}

static inline bool torxp_fifo_reserve_sole(torxp_fifo_t *f, torxp_fifo_geom_t g,
                                           uint64_t *cached_head, uint64_t *pos_out)
{
    return torxp_fifo_reserve_sole_n(f, g, cached_head, 1, pos_out);
}

/* Producer: fills the reserved slot's header. dev_tag is left alone: it is
 * the consumer's "full" flag and is written last by torxp_fifo_publish. */
static inline void torxp_fifo_write_hdr(torx_pkt_hdr_t *slot, const torx_pkt_hdr_t *h,
                                        uint8_t chunks, uint8_t payload_len)
{
    slot->dest = h->dest;
    slot->ctl = h->ctl;
    slot->chunks = chunks;
    slot->payload_len = payload_len;
    memcpy(slot->sw, h->sw, sizeof slot->sw);
}

/* Producer: makes the slot visible to the consumer. */
static inline void torxp_fifo_publish(torx_pkt_hdr_t *slot, uint64_t pos, torxp_fifo_geom_t g)
{
    /* release: header and payload stores happen before the consumer's
     * acquire of the tag lets it read them. */
    __atomic_store_n(&slot->dev_tag, torxp_fifo_lap_tag(pos, g.log2), __ATOMIC_RELEASE);
}

/* Consumer: the packet at position head, or NULL when it has not been
 * published. The consumer keeps head privately and publishes it with
 * torxp_fifo_release, which it may do lazily, a batch of pops at a time:
 * every publication is a store to a line the producers read. */
static inline torx_pkt_hdr_t *torxp_fifo_front_at(torxp_fifo_t *f, torxp_fifo_geom_t g,
                                                  uint64_t head)
{
    torx_pkt_hdr_t *slot = torxp_fifo_slot(f, g, head);
    /* acquire: pairs with torxp_fifo_publish. */
    if (__atomic_load_n(&slot->dev_tag, __ATOMIC_ACQUIRE) != torxp_fifo_lap_tag(head, g.log2))
        return NULL;
    return slot;
}

/* Consumer: publishes head, freeing every slot before it. */
static inline void torxp_fifo_release(torxp_fifo_t *f, uint64_t head)
{
    /* release: our reads of the freed slots happen before a producer that
     * acquires the new head overwrites them. */
    __atomic_store_n(&f->head, head, __ATOMIC_RELEASE);
}

/* Consumer without a private head (tests, simple loops): the packet at the
 * published head. */
static inline torx_pkt_hdr_t *torxp_fifo_front(torxp_fifo_t *f, torxp_fifo_geom_t g)
{
    /* relaxed: only this consumer writes head. */
    return torxp_fifo_front_at(f, g, __atomic_load_n(&f->head, __ATOMIC_RELAXED));
}

/* Consumer without a private head: frees the slot at the published head. */
static inline void torxp_fifo_pop(torxp_fifo_t *f)
{
    torxp_fifo_release(f, __atomic_load_n(&f->head, __ATOMIC_RELAXED) + 1);
}

/* Free slots, as any task sees them now (a snapshot). */
static inline uint32_t torxp_fifo_room(torxp_fifo_t *f, torxp_fifo_geom_t g)
{
    uint64_t head = __atomic_load_n(&f->head, __ATOMIC_ACQUIRE);
    uint64_t tail = __atomic_load_n(&f->tail, __ATOMIC_RELAXED);
    uint64_t used = tail - head;
    return used >= g.packets ? 0 : (uint32_t)(g.packets - used);
}

#endif /* TORXP_SHM_FIFO_H */
