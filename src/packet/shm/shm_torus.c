/* The shm device's torus: injection straight into the destination task's
 * reception FIFO, FIFO pinning for deterministic packets, chaos for adaptive
 * ones, and deposit-bit line broadcast. */
#include "shm.h"

#include <string.h>

/* A FIFO drained this many packets in a row yields to the others, so one
 * flooding sender cannot starve the rest. */
#define TORXP_SHM_BURST 16

static inline uint64_t chaos_next(uint64_t *state)
{
    /* xorshift64*: cheap, seeded, reproducible per task. */
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

void torxp_shm_chaos_seed(torxp_shm_dev_t *d, long seed)
{
    d->chaos = seed ? ((uint64_t)seed * 0x9E3779B97F4A7C15ULL) ^ (d->self_index + 1) : 0;
    if (seed && !d->chaos)
        d->chaos = 1;
}

/* The reception FIFO a packet from this task takes at its destination:
 * deterministic packets are pinned by sender, which is what keeps them in
 * order; adaptive ones scatter when chaos is on. */
static inline unsigned pick_fifo(torxp_shm_dev_t *d, unsigned ctl)
{
    if ((ctl & TORX_PKT_ADAPTIVE) && d->chaos)
        return (unsigned)(chaos_next(&d->chaos) >> 33) % TORXP_SHM_FIFOS_PER_TASK;
    return d->self_index % TORXP_SHM_FIFOS_PER_TASK;
}

static inline torx_status_t deliver(torxp_shm_dev_t *d, unsigned slot, unsigned fifo,
                                    const torx_pkt_hdr_t *hdr, const struct iovec *iov, int iovcnt,
                                    size_t len)
{
    torxp_fifo_t *f = torxp_shm_fifo(d, slot, fifo);
    uint64_t pos;
    if (!torxp_fifo_reserve(f, d->geom, &d->cached_head[slot * TORXP_SHM_FIFOS_PER_TASK + fifo],
                            &pos))
        return TORX_NO_ROOM;
    torx_pkt_hdr_t *s = torxp_fifo_slot(f, d->geom, pos);
    torxp_fifo_write_hdr(s, hdr, (uint8_t)torx_pkt_chunks_for(len), (uint8_t)len);
    char *p = (char *)(s + 1);
    for (int i = 0; i < iovcnt; i++) {
        memcpy(p, iov[i].iov_base, iov[i].iov_len);
        p += iov[i].iov_len;
    }
    torxp_fifo_publish(s, pos, d->geom);
    return TORX_OK;
}

static inline int task_present(const torxp_shm_dev_t *d, unsigned slot)
{
    /* relaxed: slots are claimed before the start-up barrier, which orders
     * them for every later inject. */
    return __atomic_load_n(&d->tasks[slot].state, __ATOMIC_RELAXED) == TORXP_SHM_TASK_ATTACHED;
}

/* The slot of the k-th node (k >= 1) on a deposit line, or -1 when no task
 * sits there (a partly filled torus). */
static int deposit_hop_slot(const torxp_shm_dev_t *d, const torx_pkt_hdr_t *h, unsigned k)
{
    const torx_shape_t s = d->base.shape;
    const unsigned ext[3] = {s.x, s.y, s.z};
    const int dim = torx_pkt_hdr_deposit_dim(h);
    uint8_t c[3] = {d->base.self.x, d->base.self.y, d->base.self.z};
    const unsigned n = ext[dim];
    c[dim] = (uint8_t)((h->ctl & TORX_PKT_DEPOSIT_NEG) ? (c[dim] + n - k % n) % n
                                                        : (c[dim] + k) % n);
    const torx_coord_t at = {c[0], c[1], c[2], h->dest.t};
    const unsigned slot = torx_coord_index(s, at);
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
    d->stash.active = 0;
}

static torx_status_t inject_deposit(torxp_shm_dev_t *d, const torx_pkt_hdr_t *hdr,
                                    const struct iovec *iov, int iovcnt, size_t len)
{
    const torx_shape_t s = d->base.shape;
    const torx_coord_t me = d->base.self, to = hdr->dest;
    const int dim = torx_pkt_hdr_deposit_dim(hdr);
    const uint8_t mine[3] = {me.x, me.y, me.z}, theirs[3] = {to.x, to.y, to.z};
    const unsigned ext[3] = {s.x, s.y, s.z};
    if (dim > TORX_DIM_Z)
        return torxp_error(TORX_ERR_INVAL, "torx: deposit packet names dimension %d (0..2)", dim);
    for (int i = 0; i < 3; i++)
        if (i != dim && mine[i] != theirs[i])
            return torxp_error(TORX_ERR_INVAL,
                               "torx: deposit line from (%u,%u,%u) to (%u,%u,%u) along dimension "
                               "%d leaves that line",
                               me.x, me.y, me.z, to.x, to.y, to.z, dim);
    const unsigned n = ext[dim];
    const unsigned hops = (hdr->ctl & TORX_PKT_DEPOSIT_NEG) ? (mine[dim] + n - theirs[dim]) % n
                                                             : (theirs[dim] + n - mine[dim]) % n;
    if (hops == 0)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: deposit line from (%u,%u,%u) ends where it starts; name the "
                           "last node of the line as destination",
                           me.x, me.y, me.z);

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
        d->stash.active = 1;
        d->stash.next_hop = k;
        d->stash.hops = hops;
        d->stash.hdr = *hdr;
        d->stash.hdr.payload_len = (uint8_t)len;
        char *p = (char *)d->stash.payload;
        for (int i = 0; i < iovcnt; i++) {
            memcpy(p, iov[i].iov_base, iov[i].iov_len);
            p += iov[i].iov_len;
        }
    }
    return TORX_OK;
}

torx_status_t torxp_shm_inject(torx_pkt_dev_t *dev, const torx_pkt_hdr_t *hdr,
                               const struct iovec *iov, int iovcnt)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    if (TORXP_UNLIKELY(d->stash.active)) {
        /* Everything queues behind a partly delivered deposit line. */
        drain_stash(d);
        if (d->stash.active)
            return TORX_NO_ROOM;
    }
    size_t len = 0;
    for (int i = 0; i < iovcnt; i++)
        len += iov[i].iov_len;
    if (TORXP_UNLIKELY(len > TORX_PKT_MAX_PAYLOAD))
        return torxp_error(TORX_ERR_INVAL, "torx: packet payload of %zu bytes exceeds %d", len,
                           TORX_PKT_MAX_PAYLOAD);
    if (TORXP_UNLIKELY(!torx_coord_in_shape(dev->shape, hdr->dest)))
        return torxp_error(TORX_ERR_INVAL, "torx: destination (%u,%u,%u,%u) is outside the torus",
                           hdr->dest.x, hdr->dest.y, hdr->dest.z, hdr->dest.t);
    const unsigned slot = torx_coord_index(dev->shape, hdr->dest);
    if (TORXP_UNLIKELY(!task_present(d, slot)))
        return torxp_error(TORX_ERR_INVAL, "torx: no task at destination (%u,%u,%u,%u)",
                           hdr->dest.x, hdr->dest.y, hdr->dest.z, hdr->dest.t);
    if (TORXP_UNLIKELY(hdr->ctl & TORX_PKT_DEPOSIT))
        return inject_deposit(d, hdr, iov, iovcnt, len);
    return deliver(d, slot, pick_fifo(d, hdr->ctl), hdr, iov, iovcnt, len);
}

const torx_pkt_hdr_t *torxp_shm_peek(torx_pkt_dev_t *dev)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    if (d->cur_fifo >= 0)
        return torxp_fifo_front(torxp_shm_fifo(d, d->self_index, (unsigned)d->cur_fifo), d->geom);
    for (;;) {
        const unsigned start = d->chaos ? (unsigned)(chaos_next(&d->chaos) >> 33) : d->next_fifo;
        torx_pkt_hdr_t *pkt = NULL;
        unsigned fi = 0;
        for (unsigned i = 0; i < TORXP_SHM_FIFOS_PER_TASK && !pkt; i++) {
            fi = (start + i) % TORXP_SHM_FIFOS_PER_TASK;
            pkt = torxp_fifo_front(torxp_shm_fifo(d, d->self_index, fi), d->geom);
        }
        if (!pkt)
            return NULL;
        torxp_fifo_t *f = torxp_shm_fifo(d, d->self_index, fi);
        if (TORXP_UNLIKELY(pkt->ctl & TORX_PKT_SYS)) {
            torxp_shm_bulk_on_sys(d, pkt);
            torxp_fifo_pop(f);
            continue;
        }
        if (fi != d->next_fifo) {
            d->next_fifo = fi;
            d->burst = 1;
        } else if (++d->burst >= TORXP_SHM_BURST) {
            d->next_fifo = (fi + 1) % TORXP_SHM_FIFOS_PER_TASK;
            d->burst = 0;
        }
        d->cur_fifo = (int)fi;
        return pkt;
    }
}

void torxp_shm_consume(torx_pkt_dev_t *dev)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    if (d->cur_fifo < 0)
        return;
    torxp_fifo_pop(torxp_shm_fifo(d, d->self_index, (unsigned)d->cur_fifo));
    d->cur_fifo = -1;
}

int torxp_shm_poll(torx_pkt_dev_t *dev)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    if (TORXP_UNLIKELY(d->stash.active))
        drain_stash(d);
    if (TORXP_UNLIKELY(d->serve != NULL))
        torxp_shm_bulk_progress(d);
    return torxp_shm_peek(dev) != NULL;
}

int torxp_shm_room(torx_pkt_dev_t *dev, torx_coord_t dest)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    if (!torx_coord_in_shape(dev->shape, dest))
        return 0;
    const unsigned slot = torx_coord_index(dev->shape, dest);
    return (int)torxp_fifo_room(
        torxp_shm_fifo(d, slot, d->self_index % TORXP_SHM_FIFOS_PER_TASK), d->geom);
}
