/* The torus of the network devices: per-pair credits for back-pressure,
 * packets put back into send order, reception queues with chaos, deposit
 * lines by sender fan-out, device-internal messages, and the doorbell.
 * The device moves the bytes (its send_packet, sys_send and progress ops);
 * everything here is the same whatever library carries them.
 *
 * Order. Deterministic packets from one task to another must arrive in the
 * order they were injected. Libraries complete messages out of order at
 * times (libfabric's providers do, and a packet the ofi device carries
 * aboard a staged piece takes another queue), so every torus packet
 * carries its number per ordered pair (n->tx_order, mod 2^24), and the
 * receiver parks one that comes early until those before it have come
 * (on_torus_in_order), then appends each to the reception queue its sender
 * is pinned to.
 *
 * Chaos. As on shm, an adaptive packet goes to a reception queue picked by
 * a seeded generator when TORX_CHAOS is set, and peek starts its scan at a
 * random queue: adaptive packets really overtake each other, deterministic
 * ones never do.
 *
 * Back-pressure. On shm a packet takes a slot of the destination's FIFO
 * and TORX_NO_ROOM says the FIFO is full. Here every ordered pair of tasks
 * has a window of TORX_FIFO_PACKETS credits: a packet costs the sender one,
 * and the receiver gives them back as the layer above consumes: aboard its
 * next torus packet to that sender, where the library carries a word of
 * data beside a message (the device takes n->consumed[slot] then), else in
 * a CREDIT message once half the window is owed, and all of them before it
 * sleeps. A receiver therefore never holds more unconsumed packets from one
 * sender than the window, whatever the library buffers. The device may
 * need resources of its own for a send (a buffer until the library
 * completes it): its tx_room says how many it has, and torx_pkt_room
 * reports the smaller of that and the credits, a true lower bound.
 *
 * Deposit bit. The sender sends one copy to every node of the line, as the
 * shm device does. Receiver forwarding would make a receiving task inject
 * on the sender's behalf, which needs credits toward the next hop and the
 * injecting thread's state from the receiving thread; sender fan-out keeps
 * every copy an ordinary deterministic packet of the sender, so the order
 * between a deposit packet and the sender's other packets holds at every
 * node with no further rule, and the packet layer keeps no message state.
 * A line that runs out of credits or buffers midway is finished later from
 * a stash, and everything injected after it waits for it (TORX_NO_ROOM),
 * as on shm.
 *
 * Doorbell. torx_pkt_wait sleeps in poll(2) on the library's wait
 * descriptor (n->wait_fd) and an eventfd that torx_pkt_wake writes. Before
 * sleeping it asks the device to arm the descriptor (libfabric's
 * fi_trywait, UCX's ucp_worker_arm), which says whether events came since
 * the last progress: that closes the race between the last read and the
 * sleep. A device without a descriptor gets sleeps cut into slices of
 * WAIT_SLICE_MS with progress in between: its library progresses manually,
 * so nothing would wake a longer sleep. So does one whose descriptor stays
 * readable while nothing came: libfabric's net provider (1.17) nests its
 * progress epoll set in the queue's descriptor, and that set polls readable
 * with no socket ready, which would turn every idle wait into a busy loop
 * of system calls. A wake that brings no event (n->events unchanged) is
 * taken as such, and the rest of that wait sleeps in slices. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* ppoll */
#endif

#include "net.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* Longest sleep when the device offers no wait descriptor. */
#define WAIT_SLICE_MS 1
/* A nap while the device's own sends wait for the library. */
#define WAIT_NAP_NS 50000L

/* ---- Receive buffers -------------------------------------------------------- */

static inline int is_sys_buf(const torxp_net_t *n, unsigned i)
{
    return i >= n->nrx && i < n->nrx + n->nsysrx;
}

static inline int is_holder(const torxp_net_t *n, unsigned i)
{
    return i >= n->nrx + n->nsysrx;
}

/* Gives receive buffer i back: a holder to its stack; a posted buffer to
 * the list that the device posts at its next progress, before it reads its
 * completions. A ping-pong thus posts the buffer of the packet it answered
 * after the answer has left, not on the way to it. */
void torxp_net_rx_release(torxp_net_t *n, unsigned i)
{
    if (is_holder(n, i)) /* never the library's */
        n->hold_free[n->hold_nfree++] = i;
    else
        n->repost[n->nrepost++] = i;
}

/* ---- Credits ---------------------------------------------------------------------- */

/* Gives src back the credits for the packets consumed from it. */
static void credit_return(torxp_net_t *n, unsigned src)
{
    if (src == n->self_slot) { /* this task's own packets (send_packet): no message */
        n->credits[src] += (int32_t)n->consumed[src];
        n->consumed[src] = 0;
        return;
    }
    const torxp_net_sys_t m = {
        .type = TORXP_NET_SYS_CREDIT, .version = TORXP_NET_WIRE_VERSION, .arg = n->consumed[src]};
    n->consumed[src] = 0;
    n->net_ops->sys_send(n, src, &m, sizeof m);
}

static inline int sender_ok(const torxp_net_t *n, unsigned src)
{
    return src < n->nslots && n->slot_rank[src] >= 0;
}

void torxp_net_credits_back(torxp_net_t *n, unsigned src, uint64_t k)
{
    if (!k || !sender_ok(n, src)) /* none; or a sender the message's own check refuses */
        return;
    if (k > n->credit_max || n->credits[src] + (int64_t)k > (int64_t)n->credit_max)
        torxp_dev_malformed(&n->base, "slot %u returned %llu credits, more than it was given", src,
                            (unsigned long long)k);
    else
        n->credits[src] += (int32_t)k;
}

/* ---- Arrivals ---------------------------------------------------------------------- */

/* A torus packet arrived in buffer i from slot src: checked, then queued. */
static void on_torus(torxp_net_t *n, unsigned i, unsigned src, size_t len)
{
    torxp_net_rxbuf_t *b = &n->rxbufs[i];
    const torx_pkt_hdr_t *h = (const torx_pkt_hdr_t *)b->data;
    const char *bad = NULL;
    if (!sender_ok(n, src))
        bad = "sender slot outside the job";
    else if (len < TORX_PKT_HDR_BYTES || len != TORX_PKT_HDR_BYTES + (size_t)h->payload_len)
        bad = "message length disagrees with the header";
    else if ((bad = torxp_hdr_invalid(h, n->base.shape)) == NULL &&
             !torx_coord_equal(h->dest, n->base.self) && !(h->ctl & TORX_PKT_DEPOSIT))
        bad = "packet for another task";
    else if (!bad && (h->ctl & TORX_PKT_SYS))
        bad = "device-internal bit set on a torus packet";
    if (TORXP_UNLIKELY(bad != NULL)) {
        torxp_dev_malformed(&n->base, "torus packet of %zu bytes from slot %u (%s)", len, src, bad);
        if (sender_ok(n, src) && ++n->consumed[src] >= 1)
            credit_return(n, src); /* the sender spent a credit on it */
        torxp_net_rx_release(n, i);
        return;
    }
    b->src = src;
    b->len = (uint32_t)len;
    unsigned q = src % TORXP_NET_RXQ;
    if ((h->ctl & TORX_PKT_ADAPTIVE) && n->chaos_rx)
        q = (unsigned)(torxp_chaos_next(&n->chaos_rx) >> 33) % TORXP_NET_RXQ;
    torxp_net_rxq_t *rq = &n->rxq[q];
    rq->ring[rq->tail++ & n->rxq_mask] = i; /* never full: it takes every buffer and holder */
    n->rx_queued++;
}

/* Queues buffer i, a torus packet from src, once every packet src sent
 * before it is queued: early ones wait in src's parked list, sorted by
 * their number. */
void torxp_net_on_torus(torxp_net_t *n, unsigned i, unsigned src, uint32_t order, size_t len)
{
    torxp_net_rxbuf_t *b = &n->rxbufs[i];
    b->order = order & TORXP_NET_ORDER_MASK;
    if (!sender_ok(n, src)) {
        on_torus(n, i, src, len); /* refused there, by name */
        return;
    }
    const uint32_t ahead = (b->order - n->rx_order[src]) & TORXP_NET_ORDER_MASK;
    if (TORXP_LIKELY(ahead == 0)) {
        on_torus(n, i, src, len);
        n->rx_order[src] = (n->rx_order[src] + 1) & TORXP_NET_ORDER_MASK;
        while (n->parked[src] != UINT32_MAX) { /* the ones it held up */
            torxp_net_rxbuf_t *p = &n->rxbufs[n->parked[src]];
            if (p->order != n->rx_order[src])
                break;
            const unsigned j = n->parked[src];
            n->parked[src] = p->park_next;
            on_torus(n, j, src, p->len);
            n->rx_order[src] = (n->rx_order[src] + 1) & TORXP_NET_ORDER_MASK;
        }
        return;
    }
    if (ahead > n->credit_max) { /* more in flight than the credits allow */
        torxp_dev_fail(&n->base, TORX_ERR_PROTO,
                       "torus packet number %u from slot %u when %u was due: more packets in "
                       "flight than the %u credits allow",
                       b->order, src, n->rx_order[src], n->credit_max);
        torxp_net_rx_release(n, i);
        return;
    }
    n->early++;
    b->src = src;
    b->len = (uint32_t)len;
    uint32_t *at = &n->parked[src];
    while (*at != UINT32_MAX &&
           ((n->rxbufs[*at].order - n->rx_order[src]) & TORXP_NET_ORDER_MASK) < ahead)
        at = &n->rxbufs[*at].park_next;
    b->park_next = *at;
    *at = i;
}

void torxp_net_on_torus_copy(torxp_net_t *n, unsigned src, uint32_t order, const void *pkt,
                             size_t len)
{
    if (!n->hold_nfree || len > TORX_PKT_MAX_BYTES) { /* the device's bound failed us */
        torxp_dev_fail(&n->base, TORX_ERR_PROTO, "a packet of %zu bytes from slot %u: %s", len, src,
                       len > TORX_PKT_MAX_BYTES ? "too long" : "no holder free");
        return;
    }
    const unsigned i = n->hold_free[--n->hold_nfree];
    memcpy(n->rxbufs[i].data, pkt, len);
    torxp_net_on_torus(n, i, src, order, len);
}

void torxp_net_on_sys(torxp_net_t *n, unsigned src, const void *msg, size_t len)
{
    const torxp_net_sys_t *m = msg;
    if (!sender_ok(n, src) || len < sizeof *m || m->version != TORXP_NET_WIRE_VERSION) {
        torxp_dev_malformed(
            &n->base, "device message of %zu bytes from slot %u (bad sender, length or version)",
            len, src);
        return;
    }
    switch (m->type) {
    case TORXP_NET_SYS_CREDIT:
        torxp_net_credits_back(n, src, m->arg);
        break;
    case TORXP_NET_SYS_CN_UP:
    case TORXP_NET_SYS_CN_DOWN:
    case TORXP_NET_SYS_GI_UP:
    case TORXP_NET_SYS_GI_DOWN:
        torxp_net_cn_on_sys(n, src, m, len);
        break;
    case TORXP_NET_SYS_STAGE:
        torxp_net_stage_on_sys(n, src, m);
        break;
    case TORXP_NET_SYS_PING:
        if (n->heard && !n->heard[src]) {
            n->heard[src] = 1;
            n->nheard++;
        }
        break;
    default:
        if (!n->net_ops->on_sys || !n->net_ops->on_sys(n, src, m, len))
            torxp_dev_malformed(&n->base, "device message of unknown type %u from slot %u", m->type,
                                src);
    }
}

/* ---- Injection ---------------------------------------------------------------------- */

/* Sends one packet to slot; TORX_NO_ROOM when the window or the device's
 * resources are spent, with nothing taken. */
/* The packet, header h and its payload's pieces, in one buffer of
 * TORX_PKT_MAX_BYTES; returns its length. */
static size_t packet_flat(unsigned char *pkt, const torx_pkt_hdr_t *h, const struct iovec *iov,
                          int iovcnt)
{
    memcpy(pkt, h, sizeof *h);
    unsigned char *p = pkt + sizeof *h;
    for (int k = 0; k < iovcnt; k++) {
        memcpy(p, iov[k].iov_base, iov[k].iov_len);
        p += iov[k].iov_len;
    }
    return (size_t)(p - pkt);
}

static torx_status_t send_packet(torxp_net_t *n, unsigned slot, const torx_pkt_hdr_t *hdr,
                                 const struct iovec *iov, int iovcnt, size_t len)
{
    if (n->credits[slot] <= 0)
        return TORX_NO_ROOM;
    torx_pkt_hdr_t h = *hdr;
    h.chunks = (uint8_t)torx_pkt_chunks_for(len);
    h.payload_len = (uint8_t)len;
    h.dev_tag = 0;
    int carried = 0;
    torx_status_t rc = TORX_OK;
    if (TORXP_UNLIKELY(slot == n->self_slot)) {
        /* To itself: straight into one of its own holders, in order, under
         * the same credits, where the library would carry it out and back
         * (over tcp, a system call each way per packet). */
        unsigned char pkt[TORX_PKT_MAX_BYTES];
        torxp_net_on_torus_copy(n, slot, n->tx_order[slot], pkt, packet_flat(pkt, &h, iov, iovcnt));
        carried = 1;
    } else if (TORXP_UNLIKELY(torxp_net_stage_waiting(n, slot))) {
        /* A piece waits for this packet (its descriptor): one message for
         * both (net_stage.c). */
        unsigned char pkt[TORX_PKT_MAX_BYTES];
        rc = torxp_net_stage_carry(n, slot, pkt, packet_flat(pkt, &h, iov, iovcnt), &carried);
    }
    if (rc == TORX_OK && !carried)
        rc = n->net_ops->send_packet(n, slot, &h, iov, iovcnt, len);
    if (rc != TORX_OK)
        return rc;
    n->tx_order[slot] = (n->tx_order[slot] + 1) & TORXP_NET_ORDER_MASK;
    n->credits[slot]--;
    return TORX_OK;
}

/* The slot of the k-th node (k >= 1) on a deposit line, or -1 when no task
 * sits there (a partly filled torus). */
static int deposit_hop_slot(const torxp_net_t *n, const torx_pkt_hdr_t *h, unsigned k)
{
    const unsigned slot = torxp_deposit_hop_slot(&n->base, h, k);
    return n->slot_rank[slot] >= 0 ? (int)slot : -1;
}

/* Sends what the windows and the device now take of the stashed line. */
static void drain_stash(torxp_net_t *n)
{
    const struct iovec iov = {n->stash.payload, n->stash.hdr.payload_len};
    while (n->stash.next_hop <= n->stash.hops) {
        const int slot = deposit_hop_slot(n, &n->stash.hdr, n->stash.next_hop);
        if (slot >= 0 && send_packet(n, (unsigned)slot, &n->stash.hdr, &iov, iov.iov_len ? 1 : 0,
                                     iov.iov_len) == TORX_NO_ROOM)
            return;
        n->stash.next_hop++;
    }
    n->stash_active = 0;
}

static torx_status_t inject_deposit(torxp_net_t *n, const torx_pkt_hdr_t *hdr,
                                    const struct iovec *iov, int iovcnt, size_t len)
{
    unsigned hops;
    const torx_status_t bad = torxp_deposit_hops(&n->base, hdr, &hops);
    if (bad != TORX_OK)
        return bad;
    unsigned k = 1;
    for (; k <= hops; k++) {
        const int slot = deposit_hop_slot(n, hdr, k);
        if (slot < 0)
            continue;
        const torx_status_t rc = send_packet(n, (unsigned)slot, hdr, iov, iovcnt, len);
        if (rc == TORX_NO_ROOM) {
            if (k == 1)
                return TORX_NO_ROOM; /* nothing sent: nothing taken */
            break;
        }
        if (rc != TORX_OK)
            return rc;
    }
    if (k <= hops) { /* taken, but the rest of the line must wait */
        n->stash_active = 1;
        torxp_deposit_stash(&n->stash, hdr, iov, iovcnt, len, k, hops);
    }
    return TORX_OK;
}

static torx_status_t inject_locked(torxp_net_t *n, const torx_pkt_hdr_t *hdr,
                                   const struct iovec *iov, int iovcnt)
{
    torx_pkt_dev_t *dev = &n->base;
    if (TORXP_UNLIKELY(dev->failed != TORX_OK))
        return dev->failed;
    if (TORXP_UNLIKELY(n->stash_active)) {
        drain_stash(n); /* everything queues behind a partly sent line */
        if (n->stash_active)
            return TORX_NO_ROOM;
    }
    size_t len;
    const torx_status_t bad = torxp_inject_check(dev, hdr, iov, iovcnt, &len);
    if (TORXP_UNLIKELY(bad != TORX_OK))
        return bad;
    const unsigned slot = torx_coord_index(dev->shape, hdr->dest);
    if (TORXP_UNLIKELY(n->slot_rank[slot] < 0))
        return torxp_error(TORX_ERR_INVAL, "torx: no task at destination (%u,%u,%u,%u)",
                           hdr->dest.x, hdr->dest.y, hdr->dest.z, hdr->dest.t);
    if (TORXP_UNLIKELY(hdr->ctl & TORX_PKT_DEPOSIT))
        return inject_deposit(n, hdr, iov, iovcnt, len);
    return send_packet(n, slot, hdr, iov, iovcnt, len);
}

torx_status_t torxp_net_inject(torx_pkt_dev_t *dev, const torx_pkt_hdr_t *hdr,
                               const struct iovec *iov, int iovcnt)
{
    torxp_net_t *n = torxp_net_of(dev);
    torxp_net_lock(n);
    const torx_status_t rc = inject_locked(n, hdr, iov, iovcnt);
    torxp_net_unlock(n);
    return rc;
}

int torxp_net_room(torx_pkt_dev_t *dev, torx_coord_t dest)
{
    torxp_net_t *n = torxp_net_of(dev);
    if (!torx_coord_in_shape(dev->shape, dest))
        return 0;
    const unsigned slot = torx_coord_index(dev->shape, dest);
    torxp_net_lock(n);
    int room = 0;
    if (n->slot_rank[slot] >= 0 && !n->stash_active) {
        room = n->credits[slot];
        const unsigned free = n->net_ops->tx_room(n);
        if (free < (unsigned)room)
            room = (int)free;
    }
    torxp_net_unlock(n);
    return room;
}

/* ---- Reception ----------------------------------------------------------------------- */

static inline int rx_ready(const torxp_net_t *n)
{
    return n->cur >= 0 || n->rx_queued;
}

/* Takes the next packet off the reception queues into cur; some queue holds
 * one (n->rx_queued). */
static void pick(torxp_net_t *n)
{
    unsigned q =
        n->chaos_rx ? (unsigned)(torxp_chaos_next(&n->chaos_rx) >> 33) % TORXP_NET_RXQ : n->next_q;
    while (n->rxq[q].head == n->rxq[q].tail)
        q = q + 1 < TORXP_NET_RXQ ? q + 1 : 0;
    torxp_net_rxq_t *rq = &n->rxq[q];
    n->cur = (int)rq->ring[rq->head++ & n->rxq_mask];
    n->rx_queued--;
    torxp_rx_burst(&n->next_q, &n->burst, q, TORXP_NET_RXQ);
}

const torx_pkt_hdr_t *torxp_net_peek(torx_pkt_dev_t *dev)
{
    torxp_net_t *n = torxp_net_of(dev);
    torxp_net_lock(n);
    /* Progress only for a caller that spins on peek: the usual round (poll,
     * then peek and consume until peek finds nothing) has just progressed,
     * and one more progress there would cost every message a system call
     * on its way up. */
    if (n->cur < 0 && !n->rx_queued) {
        if (n->polled_since_empty)
            n->polled_since_empty = 0;
        else
            n->net_ops->progress(n);
    }
    const torx_pkt_hdr_t *h = NULL;
    if (n->cur >= 0 || n->rx_queued) {
        if (n->cur < 0)
            pick(n);
        h = (const torx_pkt_hdr_t *)n->rxbufs[n->cur].data;
    }
    torxp_net_unlock(n);
    return h;
}

void torxp_net_consume(torx_pkt_dev_t *dev)
{
    torxp_net_t *n = torxp_net_of(dev);
    torxp_net_lock(n);
    if (n->cur >= 0) {
        const unsigned i = (unsigned)n->cur, src = n->rxbufs[i].src;
        n->cur = -1;
        torxp_net_rx_release(n, i);
        /* A credit message only when half the window is owed: replies
         * carry credits aboard before that, in a ping-pong always. */
        if (++n->consumed[src] >= (n->credit_max + 1) / 2)
            credit_return(n, src);
    }
    torxp_net_unlock(n);
}

int torxp_net_poll(torx_pkt_dev_t *dev)
{
    torxp_net_t *n = torxp_net_of(dev);
    torxp_net_lock(n);
    n->net_ops->progress(n);
    n->polled_since_empty = 1;
    if (TORXP_UNLIKELY(n->stash_active))
        drain_stash(n);
    const int ready = rx_ready(n);
    torxp_net_unlock(n);
    return ready;
}

/* ---- Waiting ------------------------------------------------------------------------- */

/* Whether the device's own sends wait for the library or the peers (a
 * stashed line, queued device messages): no descriptor announces room. */
static int tx_pending(torxp_net_t *n)
{
    return n->stash_active || n->net_ops->sys_pending(n);
}

static int take_wake(torxp_net_t *n)
{
    uint64_t v;
    return read(n->wake_fd, &v, sizeof v) == (ssize_t)sizeof v;
}

torx_status_t torxp_net_wait(torx_pkt_dev_t *dev, int timeout_ms)
{
    torxp_net_t *n = torxp_net_of(dev);
    const double deadline = timeout_ms < 0 ? -1 : torxp_mono_s() + timeout_ms * 1e-3;
    int fds_lie = 0; /* the descriptor woke us with nothing to read */
    for (;;) {
        if (take_wake(n))
            return TORX_OK;
        torxp_net_lock(n);
        n->net_ops->progress(n);
        if (rx_ready(n) || dev->failed != TORX_OK) {
            torxp_net_unlock(n);
            return TORX_OK;
        }
        /* About to sleep: give every sender its credits, so none waits on us. */
        for (unsigned s = 0; s < n->nslots; s++)
            if (n->consumed[s])
                credit_return(n, s);
        const int nap = tx_pending(n);
        long slice_ns = -1;
        if (deadline >= 0) {
            const double left = deadline - torxp_mono_s();
            slice_ns = left > 0 ? (long)(left * 1e9) : 0;
        }
        if (nap && (slice_ns < 0 || slice_ns > WAIT_NAP_NS))
            slice_ns = WAIT_NAP_NS;
        int sleep_on_fd = n->wait_fd >= 0 && !fds_lie;
        if (sleep_on_fd) {
            const int armed = n->net_ops->arm(n);
            if (armed == TORXP_NET_ARM_BUSY) { /* events came meanwhile: act on them */
                torxp_net_unlock(n);
                continue;
            }
            if (armed != TORXP_NET_ARM_OK)
                sleep_on_fd = 0;
        }
        if (!sleep_on_fd && (slice_ns < 0 || slice_ns > WAIT_SLICE_MS * 1000000L))
            slice_ns = WAIT_SLICE_MS * 1000000L;
        torxp_net_unlock(n);

        struct pollfd fds[2] = {{.fd = n->wake_fd, .events = POLLIN},
                                {.fd = n->wait_fd, .events = POLLIN}};
        struct timespec ts, *tsp = NULL;
        if (slice_ns >= 0) {
            ts = (struct timespec){slice_ns / 1000000000L, slice_ns % 1000000000L};
            tsp = &ts;
        }
        const int got = ppoll(fds, sleep_on_fd ? 2 : 1, tsp, NULL);
        if (got < 0 && errno == EINTR)
            return TORX_OK; /* interrupted: poll now */
        if (got > 0) {
            if (fds[0].revents) {
                take_wake(n);
                return TORX_OK;
            }
            /* The library's descriptor: return if it brought an event. */
            torxp_net_lock(n);
            const unsigned long before = n->events;
            n->net_ops->progress(n);
            const int brought = n->events != before || rx_ready(n);
            torxp_net_unlock(n);
            if (brought)
                return TORX_OK;
            fds_lie = 1;
            continue;
        }
        if (nap)
            return TORX_OK;
        if (deadline >= 0 && torxp_mono_s() >= deadline) {
            torxp_net_lock(n);
            n->net_ops->progress(n);
            const int ready = rx_ready(n);
            torxp_net_unlock(n);
            return ready ? TORX_OK : TORX_AGAIN;
        }
        /* A slice ran out (no wait descriptor): progress and look again. */
    }
}

void torxp_net_wake(torx_pkt_dev_t *dev)
{
    torxp_net_t *n = torxp_net_of(dev);
    const uint64_t one = 1;
    /* An eventfd write fails only when the counter would overflow, and then
     * it is rung already. */
    if (write(n->wake_fd, &one, sizeof one) < 0) {
    }
}

/* Sends what the stash holds while the device flushes at close. */
int torxp_net_stash_drain(torxp_net_t *n)
{
    if (n->stash_active)
        drain_stash(n);
    return n->stash_active;
}

/* ---- The job ------------------------------------------------------------------------- */

void torxp_net_init(torxp_net_t *n, const torx_pkt_attr_t *attr, const torxp_env_t *env,
                    const torxp_dev_ops_t *ops, const torxp_net_ops_t *net_ops)
{
    n->base = (torx_pkt_dev_t){.ops = ops,
                               .shape = attr->shape,
                               .self = attr->self,
                               .rank = attr->boot->rank,
                               .size = attr->boot->size,
                               .verbose = (int)env->verbose};
    n->net_ops = net_ops;
    pthread_mutex_init(&n->lock, NULL);
    n->shared = (attr->flags & TORX_PKT_SHARED_INJECT) != 0;
    n->wake_fd = n->wait_fd = -1;
    n->nslots = torx_shape_slots(attr->shape);
    n->self_slot = torx_coord_index(attr->shape, attr->self);
}

torxp_net_job_t torxp_net_job_mine(const torxp_net_t *n, const torxp_env_t *env)
{
    return (torxp_net_job_t){.self = n->base.self,
                             .shape = n->base.shape,
                             .ntasks = (uint32_t)n->base.size,
                             .window = (uint32_t)env->fifo_packets};
}

torx_status_t torxp_net_place(torxp_net_t *n, const void *records, size_t stride)
{
    const int size = n->base.size;
    const unsigned char *at = records;
    const torxp_net_job_t *j0 = records;
    n->slot_rank = torxp_malloc(n->nslots * sizeof *n->slot_rank);
    n->rank_slot = torxp_calloc((size_t)size, sizeof *n->rank_slot);
    if (!n->slot_rank || !n->rank_slot)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for %u torus slots", n->nslots);
    for (unsigned s = 0; s < n->nslots; s++)
        n->slot_rank[s] = -1;
    const torx_shape_t t = j0->shape;
    for (int r = 0; r < size; r++) {
        const torxp_net_job_t *j = (const torxp_net_job_t *)(const void *)(at + (size_t)r * stride);
        const torx_shape_t s = j->shape;
        if (s.x != t.x || s.y != t.y || s.z != t.z || s.t != t.t || j->ntasks != j0->ntasks)
            return torxp_error(TORX_ERR_PROTO,
                               "torx: rank %d uses torus %ux%ux%u x %u for %u tasks but rank 0 "
                               "uses %ux%ux%u x %u for %u",
                               r, s.x, s.y, s.z, s.t, j->ntasks, t.x, t.y, t.z, t.t, j0->ntasks);
        if (j->window != j0->window)
            return torxp_error(TORX_ERR_PROTO,
                               "torx: rank %d uses TORX_FIFO_PACKETS=%u but rank 0 uses %u; set "
                               "the same value for every task",
                               r, j->window, j0->window);
        const torx_coord_t c = j->self;
        if (!torx_coord_in_shape(n->base.shape, c))
            return torxp_error(TORX_ERR_INVAL, "torx: rank %d's coordinate is outside the torus",
                               r);
        const unsigned slot = torx_coord_index(n->base.shape, c);
        if (n->slot_rank[slot] >= 0)
            return torxp_error(TORX_ERR_INVAL,
                               "torx: rank %d and rank %d both map to coordinate (%u,%u,%u,%u); "
                               "every rank needs its own coordinate",
                               n->slot_rank[slot], r, c.x, c.y, c.z, c.t);
        n->slot_rank[slot] = r;
        n->rank_slot[r] = slot;
    }
    return TORX_OK;
}

torx_status_t torxp_net_connect_all(torxp_net_t *n, double timeout_s, const char *over,
                                    int (*sends_busy)(torxp_net_t *n))
{
    const torxp_net_sys_t ping = {.type = TORXP_NET_SYS_PING, .version = TORXP_NET_WIRE_VERSION};
    const unsigned size = (unsigned)n->base.size;
    for (unsigned r = 0; r < size; r++)
        n->net_ops->sys_send(n, n->rank_slot[r], &ping, sizeof ping);
    const double t0 = torxp_mono_s();
    double waited = 0;
    while (n->base.failed == TORX_OK && waited < timeout_s && (n->nheard < size || sends_busy(n))) {
        n->net_ops->progress(n);
        waited = torxp_mono_s() - t0;
    }
    if (n->base.failed != TORX_OK || n->nheard >= size)
        return n->base.failed;
    int missing = -1;
    for (unsigned r = 0; r < size && missing < 0; r++)
        if (!n->heard[n->rank_slot[r]])
            missing = (int)r;
    return torxp_error(TORX_ERR_PEER,
                       "torx: %s device: rank %d heard nothing from rank %d (and %u more) in "
                       "%.0f s over %s; is the network between them up?",
                       n->net_ops->name, n->base.rank, missing, size - n->nheard - 1, timeout_s,
                       over);
}

/* A network device's network (torx_pkt_network): hosts joined by a switch,
 * shared memory inside a host. Fixed figures, measured between the
 * project's emulated hosts (docs/packet-layer.md#the-network), the same on
 * every task; the collective network and global interrupt are messages
 * up and down a tree of hosts. */
void torxp_net_network(const torx_pkt_dev_t *dev, torx_net_t *net)
{
    unsigned levels = 0;
    while (levels < 31 && (1 << levels) < dev->size)
        levels++;
    net->kind = TORX_NET_SWITCHED;
    net->wrap = 7u; /* the emulated torus's lines wrap round */
    net->cores_per_node = dev->shape.t;
    net->packet_payload = TORX_PKT_MAX_PAYLOAD;
    net->packet_cpu = 0.5e-6;      /* a provider's send or completion */
    net->link_bandwidth = 2.5e9;   /* one-way bandwidth between two hosts */
    net->message_latency = 7.5e-6; /* 8-byte half round trip between two hosts */
    net->copy_bandwidth = 49.0e9;
    net->cn_latency = 2.0 * (levels ? levels : 1) * net->message_latency;
    net->cn_bandwidth = TORX_CN_PACKET_BYTES / net->cn_latency;
    net->gi_latency = net->cn_latency;
}

/* ---- Set-up ---------------------------------------------------------------------------- */

torx_status_t torxp_net_torus_setup(torxp_net_t *n, const torxp_env_t *env, unsigned nrx,
                                    unsigned nsysrx, unsigned nhold)
{
    n->cur = -1;
    n->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (n->wake_fd < 0)
        return torxp_error(TORX_ERR_SYS, "torx: %s device: eventfd: %s", n->net_ops->name,
                           strerror(errno));
    n->credit_max = (uint32_t)env->fifo_packets;
    n->nrx = nrx;
    n->nsysrx = nsysrx;
    n->nhold = nhold;
    n->rxq_mask = 1;
    while (n->rxq_mask < n->nrx + n->nhold)
        n->rxq_mask <<= 1;
    n->rxq_mask--;
    if (env->chaos_seed) {
        n->chaos_rx = ((uint64_t)env->chaos_seed * 0x9E3779B97F4A7C15ULL) ^ (n->self_slot + 1);
        if (!n->chaos_rx)
            n->chaos_rx = 1;
    }
    const unsigned nbufs = nrx + nsysrx + nhold;
    n->credits = torxp_calloc(n->nslots, sizeof *n->credits);
    n->consumed = torxp_calloc(n->nslots, sizeof *n->consumed);
    n->tx_order = torxp_calloc(n->nslots, sizeof *n->tx_order);
    n->rx_order = torxp_calloc(n->nslots, sizeof *n->rx_order);
    n->parked = torxp_calloc(n->nslots, sizeof *n->parked);
    n->heard = torxp_calloc(n->nslots, 1);
    n->rxbufs = torxp_calloc(nbufs, sizeof *n->rxbufs);
    n->hold_free = torxp_calloc(nhold ? nhold : 1, sizeof *n->hold_free);
    n->repost = torxp_calloc(nrx + nsysrx ? nrx + nsysrx : 1, sizeof *n->repost);
    for (unsigned q = 0; q < TORXP_NET_RXQ; q++)
        if (!(n->rxq[q].ring = torxp_calloc(n->rxq_mask + 1, sizeof *n->rxq[q].ring)))
            return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for the %s device's queues",
                               n->net_ops->name);
    if (!n->credits || !n->consumed || !n->tx_order || !n->rx_order || !n->parked || !n->heard ||
        !n->rxbufs || !n->hold_free || !n->repost)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for the %s device's buffers",
                           n->net_ops->name);
    for (unsigned s = 0; s < n->nslots; s++) {
        n->parked[s] = UINT32_MAX;
        n->credits[s] = n->slot_rank[s] >= 0 ? (int32_t)n->credit_max : 0;
    }
    for (unsigned i = 0; i < nrx + nsysrx; i++)
        torxp_net_rx_release(n, i);
    for (unsigned k = 0; k < nhold; k++)
        n->hold_free[n->hold_nfree++] = nrx + nsysrx + nhold - 1 - k;
    return TORX_OK;
}

void torxp_net_close_report(torxp_net_t *n)
{
    const char *name = n->net_ops->name;
    if (n->early)
        torxp_log(&n->base, 2,
                  "%s device: %lu torus packets came before one sent earlier, and waited", name,
                  n->early);
    if (n->stage) {
        unsigned long carried, alone;
        torxp_net_stage_counts(n, &carried, &alone);
        if (carried + alone)
            torxp_log(&n->base, 2,
                      "%s device: %lu staged pieces sent, %lu with their descriptor aboard", name,
                      carried + alone, carried);
    }
}

void torxp_net_torus_fini(torxp_net_t *n)
{
    for (unsigned q = 0; q < TORXP_NET_RXQ; q++)
        free(n->rxq[q].ring);
    free(n->credits);
    free(n->consumed);
    free(n->tx_order);
    free(n->rx_order);
    free(n->parked);
    free(n->heard);
    free(n->rxbufs);
    free(n->hold_free);
    free(n->repost);
    if (n->wake_fd >= 0)
        close(n->wake_fd);
    n->wake_fd = -1;
}
