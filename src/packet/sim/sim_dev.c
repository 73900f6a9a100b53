/* The sim device's packet-layer ops (docs/sim.md).
 *
 * Every call first sleeps off what the calling actor owes (torxp_sim_sync),
 * so it acts at its own simulated time, then charges its core the machine
 * file's cost for what it did: a packet injected or received, an empty
 * poll, a collective-network packet, and what the message layer reports
 * (torxp_charge: a message matched, bytes copied). An empty poll costs
 * time, so a task that polls in a loop lets the simulation go on; but the
 * device's wait is exact (TORXP_CAP_EXACT_WAIT): it returns when the next
 * packet or round is due, so idle tasks sleep instead of polling. */
#include "sim.h"

#include "torx_commit.h"
#include <torx/version.h>

#include <math.h>
#include <string.h>

/* Comparisons of simulated times: a sleep until t may wake a rounding step
 * before t. */
#define SIM_TIME_EPS 1e-12

typedef struct sim_dev {
    torx_pkt_dev_t base;
    torxp_sim_job_t *job;
    torxp_sim_task_t *task;
    /* the machine file's costs in seconds */
    double c_inject, c_receive, c_poll, c_match, c_copy_byte, c_cn, c_bulk;
    int dma; /* the machine has a DMA engine (bulk dma) */
} sim_dev_t;

static sim_dev_t *sim_of(torx_pkt_dev_t *dev)
{
    return (sim_dev_t *)dev;
}

/* The calling actor, its debts paid: its clock is the simulation's. */
static torxp_sim_actor_t *enter(void)
{
    torxp_sim_actor_t *a = torxp_sim_self();
    torxp_sim_sync(a);
    return a;
}

static double now_of(void)
{
    return torxp_sim_now(torxp_sim_self());
}

/* ---- torus packets ---------------------------------------------------------------- */

static torx_status_t sim_inject(torx_pkt_dev_t *dev, const torx_pkt_hdr_t *hdr,
                                const struct iovec *iov, int iovcnt)
{
    sim_dev_t *d = sim_of(dev);
    size_t len;
    const torx_status_t bad = torxp_inject_check(dev, hdr, iov, iovcnt, &len);
    if (TORXP_UNLIKELY(bad != TORX_OK))
        return bad;
    if (hdr->ctl & TORX_PKT_DEPOSIT) {
        unsigned hops;
        const torx_status_t rc = torxp_deposit_hops(dev, hdr, &hops);
        if (rc != TORX_OK)
            return rc;
        if (torxp_sim_config(d->job)->mesh) {
            const int dim = torx_pkt_hdr_deposit_dim(hdr);
            const unsigned a = dim == 0 ? dev->self.x : dim == 1 ? dev->self.y : dev->self.z;
            const unsigned b = dim == 0 ? hdr->dest.x : dim == 1 ? hdr->dest.y : hdr->dest.z;
            if ((hdr->ctl & TORX_PKT_DEPOSIT_NEG) ? b > a : b < a)
                return torxp_error(TORX_ERR_INVAL,
                                   "torx: deposit line from (%u,%u,%u) to (%u,%u,%u) wraps round, "
                                   "and this partition is a mesh (TORX_SIM_MESH=1)",
                                   dev->self.x, dev->self.y, dev->self.z, hdr->dest.x, hdr->dest.y,
                                   hdr->dest.z);
        }
    }
    torxp_sim_actor_t *a = enter();
    if (!torxp_sim_net_room(d->job, d->task, torxp_sim_now(a))) {
        torxp_sim_charge_s(a, d->c_poll);
        return TORX_NO_ROOM;
    }
    /* the core writes the packet into the FIFO before it can leave */
    torxp_sim_charge_s(a, d->c_inject);
    torxp_sim_sync(a);
    return torxp_sim_net_inject(d->job, d->task, torxp_sim_now(a), hdr, iov, iovcnt, len);
}

/* Up to 8 deterministic packets to one destination (torx_pkt_inject_batch
 * checked that much), all or none: the injection FIFO has room for all of
 * them now, or none is taken. Room only grows while the core writes them
 * (slots free as packets leave), so each then finds its slot. */
static torx_status_t sim_inject_batch(torx_pkt_dev_t *dev, const torx_pkt_out_t *pkts, int n)
{
    sim_dev_t *d = sim_of(dev);
    size_t len[TORX_PKT_BATCH_MAX];
    for (int i = 0; i < n; i++) {
        const torx_status_t bad =
            torxp_inject_check(dev, pkts[i].hdr, pkts[i].iov, pkts[i].iovcnt, &len[i]);
        if (TORXP_UNLIKELY(bad != TORX_OK))
            return bad;
    }
    torxp_sim_actor_t *a = enter();
    if (torxp_sim_net_room(d->job, d->task, torxp_sim_now(a)) < n) {
        torxp_sim_charge_s(a, d->c_poll);
        return TORX_NO_ROOM;
    }
    for (int i = 0; i < n; i++) {
        torxp_sim_charge_s(a, d->c_inject);
        torxp_sim_sync(a);
        const torx_status_t rc = torxp_sim_net_inject(
            d->job, d->task, torxp_sim_now(a), pkts[i].hdr, pkts[i].iov, pkts[i].iovcnt, len[i]);
        if (rc != TORX_OK)
            return rc;
    }
    return TORX_OK;
}

static const torx_pkt_hdr_t *sim_peek(torx_pkt_dev_t *dev)
{
    sim_dev_t *d = sim_of(dev);
    torxp_sim_actor_t *a = enter();
    torxp_sim_pkt_t *p = torxp_sim_net_peek(d->job, d->task, torxp_sim_now(a) + SIM_TIME_EPS);
    if (p)
        return &p->hdr;
    /* an empty peek is an empty poll: a task that peeks in a loop must let
     * time pass, or the actors that would send it a packet never run */
    torxp_sim_charge_s(a, d->c_poll);
    return NULL;
}

static int sim_poll(torx_pkt_dev_t *dev)
{
    sim_dev_t *d = sim_of(dev);
    torxp_sim_actor_t *a = enter();
    if (torxp_sim_net_peek(d->job, d->task, torxp_sim_now(a) + SIM_TIME_EPS))
        return 1;
    torxp_sim_charge_s(a, d->c_poll);
    return 0;
}

static void sim_consume(torx_pkt_dev_t *dev)
{
    sim_dev_t *d = sim_of(dev);
    torxp_sim_actor_t *a = torxp_sim_self();
    torxp_sim_net_pop(d->job, d->task);
    torxp_sim_charge_s(a, d->c_receive);
    /* A communication thread hands the packet to its task in memory next
     * (co mode's staging ring), where no call of this device pays what the
     * thread owes: it pays the receive first, so the task sees the packet
     * when the thread has read it, polling or woken. */
    if (a->is_helper)
        torxp_sim_sync(a);
}

static int sim_room(torx_pkt_dev_t *dev, torx_coord_t dest)
{
    (void)dest;
    sim_dev_t *d = sim_of(dev);
    return torxp_sim_net_room(d->job, d->task, now_of());
}

/* Sleeps until a packet or a round is due, a wake, or the timeout. */
static torx_status_t sim_wait(torx_pkt_dev_t *dev, int timeout_ms)
{
    sim_dev_t *d = sim_of(dev);
    torxp_sim_task_t *t = d->task;
    torxp_sim_actor_t *a = enter();
    const double deadline = timeout_ms < 0 ? INFINITY : torxp_sim_now(a) + timeout_ms * 1e-3;
    const int who = a->is_helper != 0; /* the task's actor or its thread's */
    torx_status_t rc;
    for (;;) {
        const double now = torxp_sim_now(a);
        if (t->rung[who]) {
            t->rung[who] = 0;
            rc = TORX_OK;
            break;
        }
        const double next = torxp_sim_net_next_event(d->job, t);
        if (next <= now + SIM_TIME_EPS) {
            rc = TORX_OK; /* a packet, a round, or a transfer's end */
            break;
        }
        if (now + SIM_TIME_EPS >= deadline) {
            rc = TORX_AGAIN;
            break;
        }
        const double until = next < deadline ? next : deadline;
        t->asleep_until[who] = until;
        torxp_sim_park(a, isinf(until) ? -1 : until - now); /* -1: no time limit */
        t->asleep_until[who] = INFINITY;
    }
    return rc;
}

static void sim_wake(torx_pkt_dev_t *dev)
{
    torxp_sim_task_t *t = sim_of(dev)->task;
    t->rung[0] = t->rung[1] = 1;
    torxp_sim_wake_task(t->job, t->rank);
}

/* ---- collective network and global interrupt ----------------------------------- */

/* ch: the channel, each with rounds of its own (sim_net.c) */
static torx_status_t sim_cn_inject(torx_pkt_dev_t *dev, unsigned ch, torx_cn_op_t op,
                                   torx_cn_type_t type, int is_root, const void *data)
{
    sim_dev_t *d = sim_of(dev);
    const torx_status_t bad = torxp_cn_inject_check(op, type, is_root, data);
    if (bad != TORX_OK)
        return bad;
    torxp_sim_actor_t *a = enter();
    const torx_status_t rc =
        torxp_sim_cn_inject(d->job, d->task, ch, torxp_sim_now(a), op, type, is_root, data);
    torxp_sim_charge_s(a, rc == TORX_OK ? d->c_cn : d->c_poll);
    return rc;
}

static torx_status_t sim_cn_read(torx_pkt_dev_t *dev, unsigned ch, void *result)
{
    sim_dev_t *d = sim_of(dev);
    const torxp_sim_task_t *t = d->task;
    const torx_status_t bad =
        torxp_cn_read_check(dev, t->cn_injected[ch] - t->cn_unread[ch], t->cn_injected[ch], result);
    if (bad != TORX_OK)
        return bad;
    torxp_sim_actor_t *a = enter();
    const torx_status_t rc =
        torxp_sim_cn_read(d->job, d->task, ch, torxp_sim_now(a) + SIM_TIME_EPS, result);
    torxp_sim_charge_s(a, rc == TORX_AGAIN ? d->c_poll : d->c_cn);
    return rc;
}

static torx_status_t sim_gi_arm(torx_pkt_dev_t *dev, unsigned ch)
{
    sim_dev_t *d = sim_of(dev);
    const torxp_sim_task_t *t = d->task;
    const torx_status_t bad =
        torxp_gi_arm_check(dev, t->gi_armed[ch], t->gi_armed[ch] - t->gi_unseen[ch]);
    if (bad != TORX_OK)
        return bad;
    torxp_sim_actor_t *a = enter();
    return torxp_sim_gi_arm(d->job, d->task, ch, torxp_sim_now(a));
}

static torx_status_t sim_gi_poll(torx_pkt_dev_t *dev, unsigned ch)
{
    sim_dev_t *d = sim_of(dev);
    const torx_status_t bad = torxp_gi_poll_check(dev, d->task->gi_armed[ch]);
    if (bad != TORX_OK)
        return bad;
    torxp_sim_actor_t *a = enter();
    const torx_status_t rc =
        torxp_sim_gi_poll(d->job, d->task, ch, torxp_sim_now(a) + SIM_TIME_EPS);
    if (rc == TORX_AGAIN)
        torxp_sim_charge_s(a, d->c_poll);
    return rc;
}

/* ---- bulk transfers: the DMA engine (bulk dma), or none (bulk none: BG/L's
 * cores move rendezvous data in packets) ---------------------------------------------- */

#define BULK_LIVE 0x73696d62756c6b31ull /* "simbulk1": priv[1] of a started op */
#define BULK_DONE 0x73696d62756c6b32ull /* priv[1] once finished; priv[2]: status */

static torx_status_t bulk_start(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer, int get,
                                const void *remote, void *local, size_t len)
{
    sim_dev_t *d = sim_of(dev);
    if (!d->dma)
        return torxp_error(TORX_ERR_UNSUPPORTED,
                           "torx: sim: the %s machine has no DMA engine (bulk none): rendezvous "
                           "data moves in packets",
                           torxp_sim_config(d->job)->machine.name);
    if (!op || op->priv[1] == BULK_LIVE)
        return torxp_error(TORX_ERR_INVAL, "torx: bulk transfer: op %s",
                           op ? "is still in flight" : "is NULL");
    if (len && (!remote || !local))
        return torxp_error(TORX_ERR_INVAL, "torx: bulk transfer of %zu bytes from a NULL address",
                           len);
    torxp_sim_actor_t *a = enter();
    torxp_sim_xfer_t *b;
    const torx_status_t rc =
        torxp_sim_bulk_start(d->job, d->task, torxp_sim_now(a), get, peer, remote, local, len, &b);
    if (rc != TORX_OK)
        return rc;
    memset(op, 0, sizeof *op);
    op->priv[0] = (uint64_t)(uintptr_t)b;
    op->priv[1] = BULK_LIVE;
    torxp_sim_charge_s(a, d->c_bulk);
    return TORX_OK;
}

static torx_status_t sim_bulk_get(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer,
                                  const void *remote, void *local, size_t len, unsigned flags)
{
    (void)flags;
    return bulk_start(dev, op, peer, 1, remote, local, len);
}

static torx_status_t sim_bulk_put(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer,
                                  void *remote, const void *local, size_t len)
{
    return bulk_start(dev, op, peer, 0, remote, (void *)local, len);
}

static torx_status_t sim_bulk_test(torx_pkt_dev_t *dev, torx_bulk_t *op)
{
    sim_dev_t *d = sim_of(dev);
    if (op->priv[1] == BULK_DONE)
        return (torx_status_t)(int64_t)op->priv[2];
    if (op->priv[1] != BULK_LIVE)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_bulk_test: op was never started");
    torxp_sim_actor_t *a = enter();
    const double now = torxp_sim_now(a) + SIM_TIME_EPS;
    const torx_status_t rc =
        torxp_sim_bulk_finish(d->job, d->task, (torxp_sim_xfer_t *)(uintptr_t)op->priv[0], now);
    if (rc == TORX_AGAIN) {
        torxp_sim_charge_s(a, d->c_poll);
        return rc;
    }
    op->priv[1] = BULK_DONE;
    op->priv[2] = (uint64_t)(int64_t)rc;
    return rc;
}

static const char *sim_bulk_path(const torx_pkt_dev_t *dev)
{
    return ((const sim_dev_t *)dev)->dma ? "dma" : "none";
}

static size_t sim_stage_max(const torx_pkt_dev_t *dev)
{
    (void)dev;
    return 0;
}

static int sim_stage_reaches(const torx_pkt_dev_t *dev, torx_coord_t dest)
{
    (void)dev, (void)dest;
    return 0;
}

/* ---- time, waiting and threads ---------------------------------------------------- */

static double sim_now_s(const torx_pkt_dev_t *dev)
{
    (void)dev;
    return now_of();
}

static void sim_nap(torx_pkt_dev_t *dev, uint64_t ns)
{
    (void)dev;
    torxp_sim_actor_t *a = enter();
    torxp_sim_sleep(a, (double)ns * 1e-9);
}

static void sim_yield(torx_pkt_dev_t *dev)
{
    torxp_sim_actor_t *a = torxp_sim_self();
    torxp_sim_charge_s(a, sim_of(dev)->c_poll);
    torxp_sim_sync(a);
}

/* Sleeps while *word == expected, at most timeout_ns; with room, also
 * until a slot of the task's injection FIFO frees. A co task whose FIFO is
 * full, polling, would do nothing else until a slot frees or its thread
 * publishes something: it sleeps until then instead, and acts when its
 * polls would have found either, less their lag
 * (docs/sim.md#what-the-model-costs). Any wake ends the sleep: the caller
 * looks again. */
static torx_status_t wait_word(sim_dev_t *d, uint32_t *word, uint32_t expected, int64_t timeout_ns,
                               int room)
{
    torxp_sim_actor_t *a = enter();
    const double deadline =
        timeout_ns < 0 ? INFINITY : torxp_sim_now(a) + (double)timeout_ns * 1e-9;
    torx_status_t rc = TORX_OK;
    while (__atomic_load_n(word, __ATOMIC_ACQUIRE) == expected) {
        const double now = torxp_sim_now(a);
        if (room && torxp_sim_net_room(d->job, d->task, now) > 0)
            break;
        if (now + SIM_TIME_EPS >= deadline) {
            rc = TORX_AGAIN;
            break;
        }
        /* the flag is the task's main actor's: a thread's word wait leaves it */
        if (room)
            d->task->room_waiting = 1;
        const int woken = torxp_sim_park(a, isinf(deadline) ? -1 : deadline - now);
        if (room)
            d->task->room_waiting = 0;
        if (woken)
            break;
    }
    return rc;
}

static torx_status_t sim_word_wait(torx_pkt_dev_t *dev, uint32_t *word, uint32_t expected,
                                   int64_t timeout_ns)
{
    return wait_word(sim_of(dev), word, expected, timeout_ns, 0);
}

static torx_status_t sim_room_wait(torx_pkt_dev_t *dev, uint32_t *word, uint32_t expected,
                                   int64_t timeout_ns)
{
    return wait_word(sim_of(dev), word, expected, timeout_ns, 1);
}

/* A wake is something others see: the waker pays what it owes first, so
 * that what it published before the wake (the thread's completions, in co
 * mode) is seen when it is done. */
static void sim_word_wake(torx_pkt_dev_t *dev, uint32_t *word)
{
    (void)word;
    enter();
    torxp_sim_task_t *t = sim_of(dev)->task;
    torxp_sim_wake_task(t->job, t->rank);
}

static torx_status_t sim_thread_start(torx_pkt_dev_t *dev, torxp_thread_t *t, void *(*fn)(void *),
                                      void *arg)
{
    (void)dev;
    return torxp_sim_thread_start(t, fn, arg);
}

static void sim_thread_join(torx_pkt_dev_t *dev, torxp_thread_t *t)
{
    (void)dev;
    torxp_sim_thread_join(t);
}

static void sim_charge(torx_pkt_dev_t *dev, torxp_cpu_event_t ev, size_t n)
{
    sim_dev_t *d = sim_of(dev);
    torxp_sim_charge_s(torxp_sim_self(),
                       ev == TORXP_CPU_MATCH ? d->c_match * (double)n : d->c_copy_byte * (double)n);
}

static void sim_close(torx_pkt_dev_t *dev)
{
    sim_dev_t *d = sim_of(dev);
    torxp_sim_net_detach(d->job, d->task);
    free(d);
}

/* The modelled machine's network (torx_pkt_network), from its machine
 * file: what a packet, a message, a round of the collective network and a
 * copy cost there, processor time included, in the model's own terms
 * (docs/sim.md#the-network-model). */
static void sim_network(const torx_pkt_dev_t *dev, torx_net_t *net)
{
    const sim_dev_t *d = (const sim_dev_t *)dev;
    const torxp_sim_machine_t *m = &torxp_sim_config(d->job)->machine;
    const double wire = (double)(m->packet_bytes + m->link_overhead);
    net->kind = TORX_NET_TORUS;
    net->wrap = torxp_sim_config(d->job)->mesh ? 0u : 7u;
    net->links = 6;
    net->cores_per_node = m->cores_per_node;
    net->packet_payload = m->packet_bytes - m->packet_header;
    net->hop_latency = m->hop_latency;
    net->link_bandwidth = m->link_bandwidth * (double)net->packet_payload / wire;
    net->packet_cpu = d->c_inject > d->c_receive ? d->c_inject : d->c_receive;
    /* a one-chunk packet: injected, crossing one link, received, matched */
    net->message_latency = d->c_inject + d->c_receive + d->c_match + m->hop_latency +
                           (m->packet_chunk + m->link_overhead) / m->link_bandwidth;
    net->copy_bandwidth = d->c_copy_byte > 0 ? 1.0 / d->c_copy_byte : 0.0;
    net->bulk_bandwidth = d->dma ? m->dma_bandwidth : 0.0;
    /* every task injects and reads each round's packet */
    net->cn_latency = torxp_sim_net_cn_round(d->job) + 2.0 * d->c_cn;
    const double cn_wire = (TORX_CN_PACKET_BYTES + m->link_overhead) / m->cn_bandwidth;
    net->cn_bandwidth = TORX_CN_PACKET_BYTES / (2.0 * d->c_cn > cn_wire ? 2.0 * d->c_cn : cn_wire);
    net->gi_latency = m->gi_latency;
}

static const torxp_dev_ops_t sim_ops = {
    .name = "sim",
    .inject = sim_inject,
    .inject_batch = sim_inject_batch,
    .poll = sim_poll,
    .peek = sim_peek,
    .consume = sim_consume,
    .room = sim_room,
    .wait = sim_wait,
    .wake = sim_wake,
    .cn_inject = sim_cn_inject,
    .cn_read = sim_cn_read,
    .gi_arm = sim_gi_arm,
    .gi_poll = sim_gi_poll,
    .bulk_get = sim_bulk_get,
    .bulk_put = sim_bulk_put,
    .bulk_test = sim_bulk_test,
    .bulk_path = sim_bulk_path,
    .stage_max = sim_stage_max,
    .stage_reaches = sim_stage_reaches,
    .close = sim_close,
    .now_s = sim_now_s,
    .nap = sim_nap,
    .yield = sim_yield,
    .word_wait = sim_word_wait,
    .word_wake = sim_word_wake,
    .room_wait = sim_room_wait,
    .thread_start = sim_thread_start,
    .thread_join = sim_thread_join,
    .charge = sim_charge,
    .network = sim_network,
};

torx_status_t torxp_sim_dev_open(const torx_pkt_attr_t *attr, const torxp_env_t *env,
                                 torx_pkt_dev_t **out)
{
    torxp_sim_actor_t *a = torxp_sim_self();
    if (!a)
        return torxp_error(TORX_ERR_UNSUPPORTED,
                           "torx: TORX_DEVICE=sim runs only inside a simulated job: start the "
                           "program with torx-sim (docs/sim.md)");
    if (a->is_helper)
        return torxp_error(TORX_ERR_INVAL, "torx: sim: a task's thread cannot open a device");
    sim_dev_t *d = torxp_calloc(1, sizeof *d);
    if (!d)
        return torxp_error(TORX_ERR_NOMEM, "torx: sim: no memory for the device");
    d->base.ops = &sim_ops;
    d->base.shape = attr->shape;
    d->base.self = attr->self;
    d->base.rank = attr->boot->rank;
    d->base.size = attr->boot->size;
    d->base.verbose = (int)env->verbose;
    d->base.caps = TORXP_CAP_EXACT_WAIT | TORXP_CAP_MODELLED | TORXP_CAP_ONE_FIFO;
    d->job = a->job;
    const torxp_sim_machine_t *m = &torxp_sim_config(d->job)->machine;
    d->c_inject = torxp_sim_cycles_s(m, m->cpu_inject_packet);
    d->c_receive = torxp_sim_cycles_s(m, m->cpu_receive_packet);
    /* at least a cycle: a task that polls in a loop must let time pass */
    d->c_poll = torxp_sim_cycles_s(m, m->cpu_poll_empty > 1 ? m->cpu_poll_empty : 1);
    d->c_match = torxp_sim_cycles_s(m, m->cpu_match);
    d->c_copy_byte = torxp_sim_cycles_s(m, m->cpu_copy_byte);
    d->c_cn = torxp_sim_cycles_s(m, m->cpu_cn_packet);
    d->c_bulk = torxp_sim_cycles_s(m, m->cpu_bulk_start);
    d->dma = m->bulk == TORXP_SIM_BULK_DMA;
    if (!d->dma)
        d->base.caps |= TORXP_CAP_NO_BULK;
    torx_status_t rc;
    if (attr->shape.t > m->cores_per_node)
        rc = torxp_error(TORX_ERR_ENV,
                         "torx: sim: %u tasks per node (TORX_CORES_PER_NODE in vn mode), but the "
                         "%s machine's nodes have %u cores",
                         attr->shape.t, m->name, m->cores_per_node);
    else if (attr->boot->size != torxp_sim_job_size(d->job))
        rc = torxp_error(TORX_ERR_INVAL,
                         "torx: sim: the bootstrap has %d tasks, the simulated job %d",
                         attr->boot->size, torxp_sim_job_size(d->job));
    else
        rc = torxp_sim_net_attach(d->job, attr->shape, attr->self, attr->boot->rank, &d->task);
    /* collective: every task attached, or every task fails */
    const int failed = torxp_sim_vote(d->job, rc == TORX_OK);
    const int all_ok = failed == 0;
    if (!all_ok && rc == TORX_OK)
        rc =
            torxp_error(TORX_ERR_PEER, "torx: sim: %d task(s) failed to attach to the job", failed);
    if (!all_ok) {
        if (d->task)
            torxp_sim_net_detach(d->job, d->task);
        free(d);
        return rc != TORX_OK ? rc : torxp_error(TORX_ERR_NOMEM, "torx: sim: open failed");
    }
    torxp_log(&d->base, 1, "sim device: %s machine, %ux%ux%u %s, %u task(s) per node", m->name,
              attr->shape.x, attr->shape.y, attr->shape.z,
              torxp_sim_config(d->job)->mesh ? "mesh" : "torus", attr->shape.t);
    *out = &d->base;
    return TORX_OK;
}

/* The module's descriptor (libtorx's side: sim_module.c). */
static const torxp_sim_module_t sim_module_ops = {
    .open = torxp_sim_dev_open,
    .run_tasks = torxp_sim_job_run_tasks,
    .run_main = torxp_sim_job_run_main,
    .running = torxp_sim_job_running,
    .boot_init = torxp_sim_job_boot_init,
    .compute = torxp_sim_job_compute,
};
TORXP_MODULE("sim", &sim_module_ops);
