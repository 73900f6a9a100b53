/* The sim device's network model (docs/sim.md#the-network-model).
 *
 * Torus packets move hop by hop as events, in simulated time order. A
 * packet's head reaches a router (its own node's, when injected) and waits
 * there for its next link, first come first served among the packets
 * waiting for that link; the link takes one packet at a time, for its wire
 * time (chunks of 32 bytes plus the link's overhead, over the link's
 * bandwidth), and the packet's head reaches the next router a hop latency
 * after it started (virtual cut-through). It is fully received a wire time
 * after its head reaches the destination. Uncongested, a packet of h hops
 * takes h * hop_latency + wire time: exactly linear in distance.
 *
 * Each router input holds router_buffer bytes per virtual channel, in whole
 * packets: a deterministic (escape) channel and a dynamic one. A link
 * starts a packet only when the buffer at its far end has a slot for it
 * (credits), and the slot frees when the packet starts on its next link,
 * or reaches its destination (reception FIFOs never fill). A packet that
 * waits thus holds the link behind it: congestion reaches back to the
 * senders' injection FIFOs. Deterministic packets go X, then Y, then Z on
 * the escape channel, under bubble flow control (a packet entering a ring,
 * from an injection FIFO or another dimension, needs two free slots, one
 * going on along it), which keeps the rings from deadlock. Adaptive packets
 * wait for every productive link's dynamic channel and for the escape
 * channel of their X-Y-Z link, and take the first that grants them. Deposit
 * packets leave a copy at every node they pass.
 *
 * Events are processed up to the simulated clock whenever a task calls in,
 * and ahead of it, up to the horizon, by each actor as it blocks; a daemon
 * actor of the job sleeps until the first wake those events ask for, so
 * that a packet reaches a sleeping receiver on time. The cost per packet
 * and hop is a few queue operations and a heap operation, whatever the
 * traffic. What this leaves out, on purpose: reception FIFOs never fill;
 * a router input queues its packets by the link they wait for, never
 * behind one that waits for another (no head-of-line blocking).
 *
 * The collective network and the global interrupt complete a round when
 * its last contribution is in, after the tree's latency (up and down
 * ceil(log_fanout(nodes)) levels) and one packet's wire time, or the
 * interrupt's latency.
 *
 * Each of their channels (TORX_CN_CHANNELS, TORX_GI_CHANNELS) is a
 * sequence of rounds of its own, with its own round numbers and pipeline
 * slots: callers that cannot agree on one order of rounds across channels
 * (nonblocking collectives of different communicators) take one each, and
 * every task may interleave the channels differently. A collective-network
 * channel is modelled as a class route of its own over the same tree: the
 * same latency and bandwidth, its rounds pipelined behind its own earlier
 * ones only. The channels' packets do not contend for the tree's links in
 * the model (the hardware's would interleave on them); channel 0 alone
 * times exactly as before there were channels. */
#include "sim.h"

#include <simgrid/host.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CN_DEPTH 4     /* rounds in flight per channel, as on the shm device */
#define BULK_WINDOW 16 /* packets the DMA engine takes at a time: transfers interleave */
#define SLAB 1024      /* flights and queue entries are allocated this many at a time */
#define NET_EPS 1e-12  /* as sim_dev.c's SIM_TIME_EPS: a sleep may end a rounding step early */

typedef struct cn_round {
    uint64_t round; /* the round in this slot (+1: 0 = never used) */
    int count, readers;
    uint8_t op, type;
    int nroots, root, second_root;
    int bad_task; /* the first task that disagreed, or -1 */
    uint8_t bad_op, bad_type;
    double last_in, enter, done_at; /* enter: when its packet enters the tree */
    unsigned char acc[TORX_CN_PACKET_BYTES];
} cn_round_t;

typedef struct gi_round {
    uint64_t round;
    int count;
    double done_at;
} gi_round_t;

/* A task's unread rounds of a channel fit its byte (torxp_sim_task_t). */
_Static_assert(CN_DEPTH <= UINT8_MAX, "cn_unread is a byte");

/* The queues of packets waiting for a link, by what they need of the
 * buffer at its far end: a slot of the escape channel going on along its
 * ring, two entering it, a slot of the dynamic channel. */
enum { Q_ON, Q_IN, Q_DYN, NQ };
enum { BUF_ESC, BUF_DYN };
enum { FL_PKT, FL_BULK, FL_REQ }; /* a task's packet, DMA data, a get's request */
enum { EV_HEAD, EV_LINK, EV_DMA, EV_JOIN, EV_INJECT };

typedef struct flight flight_t;

typedef struct entry {
    struct entry *next;
    flight_t *f;
    uint64_t stamp; /* f's wait when queued: stale once f moved on */
} entry_t;

typedef struct queue {
    entry_t *head, *tail;
} queue_t;

typedef struct link {
    double busy_until;     /* the packet on it has left */
    double wake_at;        /* the wake scheduled for it, if not yet due (else -1) */
    int16_t free_slots[2]; /* of the buffer at its far end: escape, dynamic */
    int in_work;           /* in the work list */
    queue_t q[NQ];
} link_t;

/* A link's load, kept only for TORX_SIM_LINKS (docs/sim.md#link-load). */
typedef struct link_load {
    uint64_t packets;
    double busy_s;        /* carrying packets */
    double blocked_s;     /* free, with packets waiting and no room at its far end */
    double blocked_since; /* -1: not blocked */
    double first_at, last_end;
} link_load_t;

/* A packet in the network. */
struct flight {
    flight_t *next_free;
    uint64_t stamp; /* its current wait, in join order (0: moving) */
    uint64_t rng;   /* adaptive: ties among links */
    double wire;
    torxp_sim_xfer_t *xfer; /* FL_BULK, FL_REQ */
    torx_coord_t at, to;    /* where its head is; its destination */
    uint8_t left[3];
    int8_t dir[3];
    uint8_t kind, in_buf;
    unsigned ctl;
    int in_link;  /* the link whose far buffer holds it, or -1 */
    int src_rank; /* whose injection FIFO slot it holds (slot >= 0) */
    int slot;
    unsigned src_gen;
    int queued;          /* in its node's injection FIFO */
    unsigned home;       /* its first X-Y-Z link: which of the node's injection queues */
    flight_t *inj_next;  /* the next packet of its node's injection queue */
    torxp_sim_pkt_t pkt; /* FL_PKT: as the receiver will see it */
};

typedef struct ev {
    double at;
    uint64_t seq;
    void *obj;
    unsigned link;
    int kind;
} ev_t;

struct torxp_sim_net {
    torx_shape_t shape;
    int wrap;
    unsigned nnodes, nlinks;
    int ntasks, attached;
    torxp_sim_job_t *job;
    link_t *links;       /* nnodes * 6: node index * 6 + dim * 2 + (negative) */
    link_load_t *load;   /* nnodes * 6, with TORX_SIM_LINKS only */
    flight_t **inj_last; /* nnodes * 6: the last packet injected for each link, until it leaves */
    double *dma_free;    /* nnodes: each node's DMA engine (bulk dma) */
    double dma_byte_s, dma_local_byte_s, dma_startup;
    torxp_sim_task_t *tasks;         /* by rank */
    torxp_sim_task_t **task_of_slot; /* by torx_coord_index */
    torxp_sim_pkt_t *free_pkts;
    flight_t *free_flights;
    entry_t *free_entries;
    void **slabs;
    size_t nslabs, capslabs;
    ev_t *ev; /* min-heap on (at, seq) */
    size_t nev, capev;
    unsigned *work; /* links to look at again, a ring of nlinks */
    unsigned work_head, nwork;
    int *wakes; /* tasks to wake once the events are done; -1 - rank: its
                 * main actor only, for a slot of its injection FIFO */
    int nwakes;
    uint64_t seq, stamp;
    double byte_s, hop_s, link_overhead;
    int slots; /* packets a router buffer holds */
    unsigned inject_cap;
    double cn_latency, cn_wire_s, gi_latency;
    torxp_sim_xfer_t *orphans; /* transfers of closed tasks still in the network */
    /* the daemon */
    sg_actor_t daemon;
    sg_sem_t dsem; /* the daemon sleeps on it: one simcall a sleep, where a
                    * condition's wait takes three (lock, wait, unlock) */
    int daemon_started, dparked, dwake, closing;
    int flushing;    /* wakes are being sent (flush) */
    double wake_due; /* when the wakes queued ahead of the clock are due; -inf: none */
    double ahead;    /* events up to this time were processed ahead of the clock */
    torxp_sim_net_t *next_retired;
    cn_round_t cn[TORX_CN_CHANNELS][CN_DEPTH]; /* round r of channel ch: cn[ch][r % CN_DEPTH] */
    gi_round_t gi[TORX_GI_CHANNELS][2];
};

struct torxp_sim_xfer {
    torxp_sim_xfer_t *next;
    torx_coord_t src, dst; /* the data flows src -> dst */
    int src_rank, dst_rank, owner;
    const unsigned char *from;
    unsigned char *to;
    size_t len, reserved;
    unsigned outstanding; /* its packets (or its request) in the network */
    double done_at;       /* the last packet in */
    uint64_t rng;
    int local, dma_ev, complete, orphan;
};

static void oom(const char *what)
{
    fprintf(stderr, "torx: sim: out of memory for %s\n", what);
    abort();
}

/* ---- events ------------------------------------------------------------------------ */

static int ev_before(const ev_t *a, const ev_t *b)
{
    return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

static void ev_push(torxp_sim_net_t *n, double at, int kind, void *obj, unsigned link)
{
    if (n->nev == n->capev) {
        const size_t cap = n->capev ? n->capev * 2 : 1024;
        ev_t *ev = realloc(n->ev, cap * sizeof *ev);
        if (!ev)
            oom("the network's events");
        n->ev = ev;
        n->capev = cap;
    }
    const ev_t e = {.at = at, .seq = n->seq++, .obj = obj, .link = link, .kind = kind};
    size_t i = n->nev++;
    while (i > 0) {
        const size_t up = (i - 1) / 2;
        if (!ev_before(&e, &n->ev[up]))
            break;
        n->ev[i] = n->ev[up];
        i = up;
    }
    n->ev[i] = e;
}

static ev_t ev_pop(torxp_sim_net_t *n)
{
    const ev_t top = n->ev[0];
    const ev_t last = n->ev[--n->nev];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n->nev)
            break;
        if (c + 1 < n->nev && ev_before(&n->ev[c + 1], &n->ev[c]))
            c++;
        if (!ev_before(&n->ev[c], &last))
            break;
        n->ev[i] = n->ev[c];
        i = c;
    }
    if (n->nev)
        n->ev[i] = last;
    return top;
}

/* ---- allocation ---------------------------------------------------------------------- */

static void *slab_new(torxp_sim_net_t *n, size_t each)
{
    if (n->nslabs == n->capslabs) {
        const size_t cap = n->capslabs ? n->capslabs * 2 : 16;
        void **s = realloc(n->slabs, cap * sizeof *s);
        if (!s)
            return NULL;
        n->slabs = s;
        n->capslabs = cap;
    }
    void *p = malloc(SLAB * each);
    if (p)
        n->slabs[n->nslabs++] = p;
    return p;
}

static flight_t *flight_alloc(torxp_sim_net_t *n)
{
    if (!n->free_flights) {
        flight_t *f = slab_new(n, sizeof *f);
        if (!f)
            return NULL;
        for (int i = 0; i < SLAB; i++) {
            f[i].next_free = n->free_flights;
            n->free_flights = &f[i];
        }
    }
    flight_t *f = n->free_flights;
    n->free_flights = f->next_free;
    return f;
}

static void flight_free(torxp_sim_net_t *n, flight_t *f)
{
    f->stamp = 0;
    f->next_free = n->free_flights;
    n->free_flights = f;
}

static entry_t *entry_alloc(torxp_sim_net_t *n)
{
    if (!n->free_entries) {
        entry_t *e = slab_new(n, sizeof *e);
        if (!e)
            oom("the links' queues");
        for (int i = 0; i < SLAB; i++) {
            e[i].next = n->free_entries;
            n->free_entries = &e[i];
        }
    }
    entry_t *e = n->free_entries;
    n->free_entries = e->next;
    return e;
}

/* ---- attaching ----------------------------------------------------------------- */

static unsigned levels(unsigned nodes, unsigned fanout)
{
    unsigned l = 0;
    for (unsigned long reach = 1; reach < nodes; reach *= fanout)
        l++;
    return l;
}

static void net_free(torxp_sim_net_t *n)
{
    for (int r = 0; r < n->ntasks; r++) {
        torxp_sim_task_t *t = &n->tasks[r];
        if (!t->open)
            continue;
        for (unsigned i = 0; i < t->nrx; i++)
            free(t->rx[i]);
        free(t->rx);
        free(t->inject);
        while (t->bulk) {
            torxp_sim_xfer_t *b = t->bulk;
            t->bulk = b->next;
            free(b);
        }
    }
    while (n->orphans) {
        torxp_sim_xfer_t *b = n->orphans;
        n->orphans = b->next;
        free(b);
    }
    while (n->free_pkts) {
        torxp_sim_pkt_t *p = n->free_pkts;
        n->free_pkts = p->next_free;
        free(p);
    }
    for (size_t i = 0; i < n->nslabs; i++)
        free(n->slabs[i]);
    free(n->slabs);
    free(n->ev);
    free(n->work);
    free(n->wakes);
    free(n->links);
    free(n->load);
    free(n->inj_last);
    free(n->dma_free);
    free(n->tasks);
    free(n->task_of_slot);
    if (n->dsem)
        sg_sem_destroy(n->dsem);
    free(n);
}

static torx_status_t net_create(torxp_sim_job_t *job, torx_shape_t shape, torxp_sim_net_t **out)
{
    const torxp_sim_config_t *c = torxp_sim_config(job);
    const torxp_sim_machine_t *m = &c->machine;
    torxp_sim_net_t *n = torxp_calloc(1, sizeof *n);
    if (!n)
        return torxp_error(TORX_ERR_NOMEM, "torx: sim: no memory for the network");
    n->job = job;
    n->shape = shape;
    n->wrap = !c->mesh;
    n->nnodes = (unsigned)shape.x * shape.y * shape.z;
    n->nlinks = n->nnodes * 6;
    n->ntasks = torxp_sim_job_size(job);
    n->links = torxp_calloc(n->nlinks, sizeof *n->links);
    n->inj_last = torxp_calloc(n->nlinks, sizeof *n->inj_last);
    n->work = torxp_calloc(n->nlinks, sizeof *n->work);
    n->wakes = torxp_calloc(2 * (size_t)n->ntasks, sizeof *n->wakes);
    n->tasks = torxp_calloc((size_t)n->ntasks, sizeof *n->tasks);
    n->task_of_slot = torxp_calloc(torx_shape_slots(shape), sizeof *n->task_of_slot);
    n->dma_free = torxp_calloc(n->nnodes, sizeof *n->dma_free);
    if (!n->links || !n->inj_last || !n->work || !n->wakes || !n->tasks || !n->task_of_slot ||
        !n->dma_free) {
        net_free(n);
        return torxp_error(TORX_ERR_NOMEM, "torx: sim: no memory for a %ux%ux%u torus", shape.x,
                           shape.y, shape.z);
    }
    n->byte_s = 1.0 / m->link_bandwidth;
    n->hop_s = m->hop_latency;
    n->link_overhead = m->link_overhead;
    n->slots = (int)(m->router_buffer / m->packet_bytes);
    if (n->slots > INT16_MAX)
        n->slots = INT16_MAX;
    for (unsigned i = 0; i < n->nlinks; i++) {
        n->links[i].free_slots[BUF_ESC] = (int16_t)n->slots;
        n->links[i].free_slots[BUF_DYN] = (int16_t)n->slots;
        n->links[i].wake_at = -1;
    }
    if (c->links_out) {
        n->load = torxp_calloc(n->nlinks, sizeof *n->load);
        if (!n->load) {
            net_free(n);
            return torxp_error(TORX_ERR_NOMEM, "torx: sim: no memory for TORX_SIM_LINKS's table");
        }
        for (unsigned i = 0; i < n->nlinks; i++)
            n->load[i].blocked_since = -1;
    }
    n->inject_cap = (unsigned)m->injection_fifo_packets;
    n->cn_latency = 2.0 * levels(n->nnodes, (unsigned)m->cn_fanout) * m->cn_hop_latency;
    n->cn_wire_s = (TORX_CN_PACKET_BYTES + m->link_overhead) / m->cn_bandwidth;
    n->gi_latency = m->gi_latency;
    if (m->bulk == TORXP_SIM_BULK_DMA) {
        n->dma_byte_s = 1.0 / m->dma_bandwidth;
        n->dma_local_byte_s = 1.0 / m->dma_local_bandwidth;
        n->dma_startup = m->dma_startup;
    }
    n->wake_due = -INFINITY;
    *out = n;
    return TORX_OK;
}

static void net_daemon(int argc, char **argv);

/* The daemon: an actor of the job's that is no task (torxp_sim_self() is
 * NULL in it), handed the network by address. */
static void daemon_start(torxp_sim_net_t *n)
{
    n->dsem = sg_sem_init(0);
    char addr[32];
    snprintf(addr, sizeof addr, "%p", (void *)n);
    char *argv[] = {addr, NULL};
    n->daemon = sg_actor_init("torus", sg_host_self());
    sg_actor_start(n->daemon, net_daemon, 1, argv);
}

torx_status_t torxp_sim_net_attach(torxp_sim_job_t *job, torx_shape_t shape, torx_coord_t self,
                                   int rank, torxp_sim_task_t **task)
{
    torxp_sim_net_t **np = torxp_sim_job_net(job);
    torx_status_t rc;
    if (!*np && (rc = net_create(job, shape, np)) != TORX_OK)
        return rc;
    torxp_sim_net_t *n = *np;
    const torx_shape_t s = n->shape;
    if (s.x != shape.x || s.y != shape.y || s.z != shape.z || s.t != shape.t)
        return torxp_error(TORX_ERR_PROTO,
                           "torx: sim: rank %d opened a %ux%ux%u x %u torus, the job's is "
                           "%ux%ux%u x %u",
                           rank, shape.x, shape.y, shape.z, shape.t, s.x, s.y, s.z, s.t);
    const unsigned slot = torx_coord_index(s, self);
    if (n->task_of_slot[slot])
        return torxp_error(TORX_ERR_INVAL,
                           "torx: sim: rank %d's coordinate (%u,%u,%u,%u) is taken by rank %d",
                           rank, self.x, self.y, self.z, self.t, n->task_of_slot[slot]->rank);
    torxp_sim_task_t *t = &n->tasks[rank];
    /* gen: packets of an earlier opening hold no slot of this one */
    *t = (torxp_sim_task_t){.rank = rank,
                            .coord = self,
                            .asleep_until = {INFINITY, INFINITY},
                            .gen = t->gen + 1,
                            .wake_queued = t->wake_queued};
    t->inject = torxp_calloc(n->inject_cap, sizeof *t->inject);
    t->job = job;
    if (!t->inject)
        return torxp_error(TORX_ERR_NOMEM, "torx: sim: no memory for rank %d", rank);
    uint64_t seed = torxp_sim_config(job)->seed * 0x9E3779B97F4A7C15ull + (uint64_t)rank + 1;
    t->rng = seed ? seed : 1;
    t->open = 1;
    n->task_of_slot[slot] = t;
    n->attached++;
    *task = t;
    if (!n->daemon_started) {
        n->daemon_started = 1; /* starting it is a simcall: other tasks may attach meanwhile */
        daemon_start(n);
        torxp_sim_actor_t *me = torxp_sim_self();
        if (me)
            torxp_sim_resumed(me);
    }
    return TORX_OK;
}

static void wake_daemon(torxp_sim_net_t *n)
{
    n->dwake = 1;
    if (n->dparked) {
        n->dparked = 0; /* one release a sleep */
        sg_sem_release(n->dsem);
        torxp_sim_actor_t *me = torxp_sim_self();
        if (me)
            torxp_sim_resumed(me);
    }
}

/* Every link that carried a packet, as TORX_SIM_LINKS's table (times in
 * simulated µs from the job's start; docs/sim.md#link-load). */
static void links_write(const torxp_sim_net_t *n, FILE *out)
{
    if (!out || !n->load)
        return;
    static const char dims[] = "xyz";
    for (unsigned li = 0; li < n->nlinks; li++) {
        const link_load_t *L = &n->load[li];
        if (!L->packets)
            continue;
        const unsigned node = li / 6, d = li % 6 / 2;
        const unsigned x = node % n->shape.x, y = node / n->shape.x % n->shape.y,
                       z = node / n->shape.x / n->shape.y;
        fprintf(out, "%u,%u,%u,%c,%c,%" PRIu64 ",%.4f,%.4f,%.4f,%.4f\n", x, y, z, dims[d],
                li % 2 ? '-' : '+', L->packets, L->busy_s * 1e6, L->blocked_s * 1e6,
                L->first_at * 1e6, L->last_end * 1e6);
    }
}

void torxp_sim_net_detach(torxp_sim_job_t *job, torxp_sim_task_t *t)
{
    torxp_sim_net_t **np = torxp_sim_job_net(job);
    torxp_sim_net_t *n = *np;
    if (!n || !t || !t->open)
        return;
    for (unsigned i = 0; i < t->nrx; i++) {
        t->rx[i]->next_free = n->free_pkts;
        n->free_pkts = t->rx[i];
    }
    free(t->rx);
    free(t->inject);
    while (t->bulk) { /* abandoned, as torx_pkt_close says */
        torxp_sim_xfer_t *b = t->bulk;
        t->bulk = b->next;
        if (b->outstanding || b->dma_ev) { /* the network still holds it */
            b->orphan = 1;
            b->next = n->orphans;
            n->orphans = b;
        } else {
            free(b);
        }
    }
    n->task_of_slot[torx_coord_index(n->shape, t->coord)] = NULL;
    t->open = 0;
    if (--n->attached == 0) {
        links_write(n, torxp_sim_config(job)->links_out);
        /* the daemon may be inside a simcall: the network is freed when
         * the job ends (torxp_sim_net_job_end) */
        *np = NULL;
        torxp_sim_net_t **retired = torxp_sim_job_retired(job);
        n->next_retired = *retired;
        *retired = n;
        n->closing = 1;
        wake_daemon(n);
    }
}

void torxp_sim_net_job_end(torxp_sim_job_t *job)
{
    torxp_sim_net_t **np = torxp_sim_job_net(job);
    if (*np) {
        net_free(*np);
        *np = NULL;
    }
    torxp_sim_net_t **retired = torxp_sim_job_retired(job);
    while (*retired) {
        torxp_sim_net_t *n = *retired;
        *retired = n->next_retired;
        net_free(n);
    }
}

/* ---- waking ---------------------------------------------------------------------- */

/* Whether an event at when comes before the wake of an actor of t that
 * sleeps in torx_pkt_wait; that actor's wake becomes when (one wake per
 * earlier event). */
int torxp_sim_wakes_earlier(torxp_sim_task_t *t, double when)
{
    int earlier = 0;
    for (int i = 0; i < 2; i++)
        if (t->asleep_until[i] > when) {
            t->asleep_until[i] = when;
            earlier = 1;
        }
    return earlier;
}

void torxp_sim_notify(torxp_sim_task_t *t, double when)
{
    if (torxp_sim_wakes_earlier(t, when))
        torxp_sim_wake_task(t->job, t->rank);
}

/* As torxp_sim_notify, the wake itself left for flush: while events are
 * processed no simcall may let another actor in. */
static void notify_later(torxp_sim_net_t *n, torxp_sim_task_t *t, double when)
{
    if (torxp_sim_wakes_earlier(t, when)) {
        if (!t->wake_queued) {
            t->wake_queued = 1;
            n->wakes[n->nwakes++] = t->rank;
        }
    }
}

/* The wakes the events asked for, once due. Each is a simcall: other
 * actors may run, and one that blocks may queue wakes due later
 * (torxp_sim_net_blocking), which wait for their time. */
static void flush(torxp_sim_net_t *n)
{
    const double now = torxp_sim_job_now(n->job);
    n->flushing++; /* the woken run now: no actor runs the network ahead of them */
    while (n->nwakes && !(n->wake_due > now + SIM_TIMING_PRECISION)) {
        const int w = n->wakes[--n->nwakes];
        if (w < 0) {
            torxp_sim_task_t *t = &n->tasks[-1 - w];
            if (t->open)
                torxp_sim_wake_main(t->job, t->rank);
            continue;
        }
        torxp_sim_task_t *t = &n->tasks[w];
        t->wake_queued = 0;
        if (t->open)
            torxp_sim_wake_task(t->job, t->rank);
    }
    if (!n->nwakes)
        n->wake_due = -INFINITY;
    n->flushing--;
}

/* ---- reception: a heap per task -------------------------------------------------- */

static int pkt_before(const torxp_sim_pkt_t *a, const torxp_sim_pkt_t *b)
{
    return a->arrive < b->arrive || (a->arrive == b->arrive && a->seq < b->seq);
}

static void rx_push(torxp_sim_task_t *t, torxp_sim_pkt_t *p)
{
    if (t->nrx == t->caprx) {
        const unsigned cap = t->caprx ? t->caprx * 2 : 16;
        torxp_sim_pkt_t **rx = torxp_realloc(t->rx, cap * sizeof *rx);
        if (!rx)
            oom("a task's packets");
        t->rx = rx;
        t->caprx = cap;
    }
    unsigned i = t->nrx++;
    while (i > 0) {
        const unsigned up = (i - 1) / 2;
        if (!pkt_before(p, t->rx[up]))
            break;
        t->rx[i] = t->rx[up];
        i = up;
    }
    t->rx[i] = p;
}

void torxp_sim_net_pop(torxp_sim_job_t *job, torxp_sim_task_t *t)
{
    torxp_sim_net_t *n = *torxp_sim_job_net(job);
    torxp_sim_pkt_t *top = t->rx[0];
    torxp_sim_pkt_t *last = t->rx[--t->nrx];
    unsigned i = 0;
    for (;;) {
        unsigned c = 2 * i + 1;
        if (c >= t->nrx)
            break;
        if (c + 1 < t->nrx && pkt_before(t->rx[c + 1], t->rx[c]))
            c++;
        if (!pkt_before(t->rx[c], last))
            break;
        t->rx[i] = t->rx[c];
        i = c;
    }
    if (t->nrx)
        t->rx[i] = last;
    top->next_free = n->free_pkts;
    n->free_pkts = top;
}

/* A copy of src for task `to`, fully received at arrive. */
static void deliver(torxp_sim_net_t *n, torxp_sim_task_t *to, const torxp_sim_pkt_t *src,
                    double arrive)
{
    torxp_sim_pkt_t *p = n->free_pkts;
    if (p)
        n->free_pkts = p->next_free;
    else if (!(p = malloc(sizeof *p)))
        oom("a packet");
    memcpy(p->bytes, src->bytes, TORX_PKT_HDR_BYTES + src->hdr.payload_len);
    p->arrive = arrive;
    p->seq = n->seq++;
    rx_push(to, p);
    notify_later(n, to, arrive);
}

/* ---- routes ---------------------------------------------------------------------- */

static unsigned node_of(const torxp_sim_net_t *n, torx_coord_t c)
{
    return c.x + n->shape.x * (c.y + n->shape.y * (unsigned)c.z);
}

/* Hops and direction (+1, -1) from a to b along a dimension of extent len;
 * tie: both ways are shortest (a torus of even extent, half way round). */
static unsigned way(const torxp_sim_net_t *n, unsigned a, unsigned b, unsigned len, int *dir,
                    int *tie)
{
    *tie = 0;
    if (a == b) {
        *dir = 1;
        return 0;
    }
    if (!n->wrap) {
        *dir = b > a ? 1 : -1;
        return b > a ? b - a : a - b;
    }
    const unsigned up = (b + len - a) % len, down = len - up;
    *tie = up == down;
    *dir = up <= down ? 1 : -1;
    return up <= down ? up : down;
}

static uint8_t *coord_field(torx_coord_t *c, int dim)
{
    return dim == 0 ? &c->x : dim == 1 ? &c->y : &c->z;
}

static unsigned extent(const torxp_sim_net_t *n, int dim)
{
    return dim == 0 ? n->shape.x : dim == 1 ? n->shape.y : n->shape.z;
}

static double wire_s(const torxp_sim_net_t *n, unsigned chunks)
{
    return (chunks * TORX_PKT_CHUNK + n->link_overhead) * n->byte_s;
}

static torxp_sim_task_t *task_at(const torxp_sim_net_t *n, torx_coord_t c)
{
    return torx_coord_in_shape(n->shape, c) ? n->task_of_slot[torx_coord_index(n->shape, c)] : NULL;
}

/* A new flight from `from` to `to`: its hops and ways (rng: the tie of an
 * adaptive packet half way round a ring). */
static flight_t *flight_new(torxp_sim_net_t *n, uint64_t *rng, int kind, torx_coord_t from,
                            torx_coord_t to, unsigned ctl, double wire)
{
    flight_t *f = flight_alloc(n);
    if (!f)
        return NULL;
    f->stamp = 0;
    f->rng = (torxp_chaos_next(rng) | 1);
    f->wire = wire;
    f->xfer = NULL;
    f->at = from;
    f->at.t = to.t;
    f->to = to;
    f->kind = (uint8_t)kind;
    f->in_buf = BUF_ESC;
    f->ctl = ctl;
    f->in_link = -1;
    f->src_rank = -1;
    f->slot = -1;
    f->src_gen = 0;
    f->queued = 0;
    f->inj_next = NULL;
    for (int d = 0; d < 3; d++) {
        int dir, tie;
        f->left[d] = (uint8_t)way(n, *coord_field(&f->at, d), *coord_field(&f->to, d), extent(n, d),
                                  &dir, &tie);
        if (tie && (ctl & TORX_PKT_ADAPTIVE) && (torxp_chaos_next(rng) & 1))
            dir = -1;
        f->dir[d] = (int8_t)dir;
    }
    if (ctl & TORX_PKT_DEPOSIT) { /* along its line, the way it names */
        const int d = (int)((ctl & TORX_PKT_DEPOSIT_DIM_MASK) >> TORX_PKT_DEPOSIT_DIM_SHIFT);
        const unsigned len_d = extent(n, d);
        f->dir[d] = (ctl & TORX_PKT_DEPOSIT_NEG) ? -1 : 1;
        const unsigned a = *coord_field(&f->at, d), b = *coord_field(&f->to, d);
        f->left[d] = (uint8_t)(f->dir[d] > 0 ? (b + len_d - a) % len_d : (a + len_d - b) % len_d);
    }
    return f;
}

static int arrived_at_end(const flight_t *f)
{
    return !(f->left[0] | f->left[1] | f->left[2]);
}

/* ---- links ----------------------------------------------------------------------- */

/* The link f takes next going X, then Y, then Z. */
static unsigned first_link(const torxp_sim_net_t *n, const flight_t *f)
{
    int d = 0;
    while (!f->left[d])
        d++;
    return node_of(n, f->at) * 6 + 2 * (unsigned)d + (f->dir[d] < 0);
}

static void enqueue(torxp_sim_net_t *n, unsigned li, int q, flight_t *f)
{
    entry_t *e = entry_alloc(n);
    e->next = NULL;
    e->f = f;
    e->stamp = f->stamp;
    queue_t *qu = &n->links[li].q[q];
    if (qu->tail)
        qu->tail->next = e;
    else
        qu->head = e;
    qu->tail = e;
}

/* The first entry of a queue whose packet still waits there. */
static entry_t *live_head(torxp_sim_net_t *n, queue_t *qu)
{
    entry_t *e;
    while ((e = qu->head) && e->stamp != e->f->stamp) {
        qu->head = e->next;
        if (!qu->head)
            qu->tail = NULL;
        e->next = n->free_entries;
        n->free_entries = e;
    }
    return e;
}

static int waiting(const link_t *L)
{
    return L->q[Q_ON].head || L->q[Q_IN].head || L->q[Q_DYN].head;
}

/* Look at link li again once this event is done (a slot freed). */
static void kick(torxp_sim_net_t *n, unsigned li)
{
    link_t *L = &n->links[li];
    if (L->in_work || !waiting(L))
        return;
    L->in_work = 1;
    n->work[(n->work_head + n->nwork++) % n->nlinks] = li;
}

/* A packet leaves the buffer it was in: the link into it may go on. */
static void release(torxp_sim_net_t *n, flight_t *f)
{
    if (f->in_link < 0)
        return;
    n->links[f->in_link].free_slots[f->in_buf]++;
    kick(n, (unsigned)f->in_link);
    f->in_link = -1;
}

static void schedule_wake(torxp_sim_net_t *n, unsigned li)
{
    link_t *L = &n->links[li];
    if (L->wake_at != L->busy_until && waiting(L)) {
        L->wake_at = L->busy_until;
        ev_push(n, L->busy_until, EV_LINK, NULL, li);
    }
}

static void grant(torxp_sim_net_t *n, unsigned li, int q, double t)
{
    link_t *L = &n->links[li];
    queue_t *qu = &L->q[q];
    entry_t *e = qu->head;
    qu->head = e->next;
    if (!qu->head)
        qu->tail = NULL;
    flight_t *f = e->f;
    e->next = n->free_entries;
    n->free_entries = e;
    f->stamp = 0; /* its other entries are stale */
    const int buf = q == Q_DYN ? BUF_DYN : BUF_ESC;
    L->free_slots[buf]--;
    L->busy_until = t + f->wire;
    if (n->load) {
        link_load_t *ld = &n->load[li];
        if (ld->packets++ == 0)
            ld->first_at = t;
        ld->busy_s += f->wire;
        ld->last_end = L->busy_until;
        if (ld->blocked_since >= 0) {
            ld->blocked_s += t - ld->blocked_since;
            ld->blocked_since = -1;
        }
    }
    release(n, f);
    if (f->slot >= 0) { /* out of its injection FIFO */
        torxp_sim_task_t *s = &n->tasks[f->src_rank];
        if (s->open && s->gen == f->src_gen) {
            s->inject[f->slot] = t;
            if (s->room_waiting) { /* sim_dev.c's room wait */
                s->room_waiting = 0;
                n->wakes[n->nwakes++] = -1 - s->rank;
            }
        }
        f->slot = -1;
    }
    if (f->queued) { /* the next of its node's packets for this way reaches the router */
        f->queued = 0;
        if (n->inj_last[f->home] == f)
            n->inj_last[f->home] = NULL;
        if (f->inj_next)
            ev_push(n, t, EV_JOIN, f->inj_next, 0);
        f->inj_next = NULL;
    }
    f->in_link = (int)li;
    f->in_buf = (uint8_t)buf;
    const int d = (int)(li % 6) / 2;
    uint8_t *c = coord_field(&f->at, d);
    const unsigned len_d = extent(n, d);
    *c = (uint8_t)(f->dir[d] > 0 ? (*c + 1u) % len_d : (*c + len_d - 1u) % len_d);
    f->left[d]--;
    ev_push(n, t + n->hop_s, EV_HEAD, f, 0);
    schedule_wake(n, li);
}

/* If link li is free at t, it takes the packet that came first among those
 * its far buffer has room for. */
static void try_link(torxp_sim_net_t *n, unsigned li, double t)
{
    link_t *L = &n->links[li];
    if (L->busy_until > t) {
        schedule_wake(n, li);
        return;
    }
    static const int need[NQ] = {[Q_ON] = 1, [Q_IN] = 2, [Q_DYN] = 1};
    int best = -1, any = 0;
    uint64_t first = UINT64_MAX;
    for (int q = Q_DYN; q >= Q_ON; q--) { /* dynamic first: a tie is one packet's entries */
        const entry_t *e = live_head(n, &L->q[q]);
        any |= e != NULL;
        if (e && e->stamp < first && L->free_slots[q == Q_DYN ? BUF_DYN : BUF_ESC] >= need[q]) {
            best = q;
            first = e->stamp;
        }
    }
    if (best >= 0) {
        grant(n, li, best, t);
    } else if (n->load) {
        link_load_t *ld = &n->load[li];
        if (any && ld->blocked_since < 0) {
            ld->blocked_since = t;
        } else if (!any && ld->blocked_since >= 0) { /* its waiters took other links */
            ld->blocked_s += t - ld->blocked_since;
            ld->blocked_since = -1;
        }
    }
}

static void drain(torxp_sim_net_t *n, double t)
{
    while (n->nwork) {
        const unsigned li = n->work[n->work_head];
        n->work_head = (n->work_head + 1) % n->nlinks;
        n->nwork--;
        n->links[li].in_work = 0;
        try_link(n, li, t);
    }
}

/* f's head is at a router at t, its next hop still to take: it waits for
 * its links (the file's comment). */
static void join(torxp_sim_net_t *n, flight_t *f, double t)
{
    const unsigned node = node_of(n, f->at);
    const unsigned li_do = first_link(n, f);
    const int going_on =
        f->in_link >= 0 && f->in_buf == BUF_ESC && (unsigned)f->in_link % 6 == li_do % 6;
    f->stamp = ++n->stamp;
    enqueue(n, li_do, going_on ? Q_ON : Q_IN, f);
    if (!(f->ctl & TORX_PKT_ADAPTIVE) || (f->ctl & TORX_PKT_DEPOSIT)) {
        try_link(n, li_do, t);
        return;
    }
    unsigned cand[3];
    int nc = 0;
    for (int k = 0; k < 3; k++)
        if (f->left[k]) {
            cand[nc] = node * 6 + 2 * (unsigned)k + (f->dir[k] < 0);
            enqueue(n, cand[nc++], Q_DYN, f);
        }
    /* tried in turn, the free link with the most room at its far end first
     * (ties: the packet's generator), until one takes it */
    while (nc && f->stamp) {
        int best = 0, nbest = 0;
        long best_room = -1;
        for (int i = 0; i < nc; i++) {
            const link_t *L = &n->links[cand[i]];
            const long room = L->busy_until > t ? 0 : 1 + L->free_slots[BUF_DYN];
            if (room > best_room) {
                best_room = room;
                best = i;
                nbest = 1;
            } else if (room == best_room && torxp_chaos_next(&f->rng) % (unsigned)++nbest == 0) {
                best = i;
            }
        }
        try_link(n, cand[best], t);
        cand[best] = cand[--nc];
    }
}

/* f enters its node's injection FIFO at t. It reaches the router, and
 * waits for its links, once the node's packets before it for the same
 * first link have left: one queue per link, so that a packet for a busy
 * link holds up no other link's. */
static void inject_queue(torxp_sim_net_t *n, flight_t *f, double t)
{
    f->home = first_link(n, f);
    f->queued = 1;
    flight_t *last = n->inj_last[f->home];
    n->inj_last[f->home] = f;
    if (last)
        last->inj_next = f;
    else
        join(n, f, t);
}

/* ---- bulk transfers by the DMA engine (bulk dma) ------------------------------- */

static void xfer_check(torxp_sim_net_t *n, torxp_sim_xfer_t *b)
{
    if (b->complete || b->reserved < b->len || b->outstanding || b->dma_ev)
        return;
    b->complete = 1;
    if (!b->orphan)
        notify_later(n, &n->tasks[b->owner], b->done_at);
}

/* The engine of b's source node takes b's next window at t. */
static void dma_window(torxp_sim_net_t *n, torxp_sim_xfer_t *b, double t)
{
    b->dma_ev = 0;
    if (b->orphan) {
        b->reserved = b->len; /* abandoned: no more of it enters the network */
        return;
    }
    double *engine = &n->dma_free[node_of(n, b->src)];
    if (b->local) {
        const double start = *engine > t ? *engine : t;
        *engine = start + (double)b->len * n->dma_local_byte_s;
        b->done_at = *engine;
        b->reserved = b->len;
        xfer_check(n, b);
        return;
    }
    for (int k = 0; k < BULK_WINDOW && b->reserved < b->len; k++) {
        const size_t piece = b->len - b->reserved < TORX_PKT_MAX_PAYLOAD ? b->len - b->reserved
                                                                         : TORX_PKT_MAX_PAYLOAD;
        const double wire = wire_s(n, torx_pkt_chunks_for(piece));
        const double at = *engine > t ? *engine : t;
        *engine = at + wire / n->byte_s * n->dma_byte_s;
        flight_t *f = flight_new(n, &b->rng, FL_BULK, b->src, b->dst, TORX_PKT_ADAPTIVE, wire);
        if (!f)
            oom("a bulk transfer's packet");
        f->xfer = b;
        b->outstanding++;
        b->reserved += piece;
        ev_push(n, at, EV_INJECT, f, 0);
    }
    if (b->reserved < b->len) {
        b->dma_ev = 1;
        ev_push(n, *engine, EV_DMA, b, 0);
    }
}

/* ---- events in time order ------------------------------------------------------ */

/* f's head reaches the router at f->at, at t. */
static void on_head(torxp_sim_net_t *n, flight_t *f, double t)
{
    const double arrive = t + f->wire;
    if (!arrived_at_end(f)) {
        if ((f->ctl & TORX_PKT_DEPOSIT) && f->kind == FL_PKT) {
            torxp_sim_task_t *mid = task_at(n, f->at);
            if (mid)
                deliver(n, mid, &f->pkt, arrive);
        }
        join(n, f, t);
        return;
    }
    release(n, f); /* into the reception FIFO, which never fills */
    torxp_sim_xfer_t *b = f->xfer;
    switch (f->kind) {
    case FL_PKT: {
        torxp_sim_task_t *to = task_at(n, f->to);
        if (to)
            deliver(n, to, &f->pkt, arrive);
        break;
    }
    case FL_BULK:
        if (arrive > b->done_at)
            b->done_at = arrive;
        b->outstanding--;
        xfer_check(n, b);
        break;
    case FL_REQ: /* the request is at the peer's engine */
        b->outstanding--;
        b->dma_ev = 1;
        ev_push(n, arrive, EV_DMA, b, 0);
        break;
    }
    flight_free(n, f);
}

/* Every event due by `until`, in time order. No simcall in here. */
static void advance(torxp_sim_net_t *n, double until)
{
    while (n->nev && n->ev[0].at <= until) {
        const ev_t e = ev_pop(n);
        switch (e.kind) {
        case EV_HEAD:
            on_head(n, e.obj, e.at);
            break;
        case EV_JOIN:
            join(n, e.obj, e.at);
            break;
        case EV_INJECT:
            inject_queue(n, e.obj, e.at);
            break;
        case EV_LINK:
            if (n->links[e.link].wake_at == e.at)
                n->links[e.link].wake_at =
                    -1; /* a packet that comes before it is due needs another */
            try_link(n, e.link, e.at);
            break;
        case EV_DMA:
            dma_window(n, e.obj, e.at);
            break;
        }
        drain(n, e.at);
    }
}

/* The network as it stands at the simulated clock, and its wakes sent. */
static torxp_sim_net_t *catch_up(torxp_sim_job_t *job)
{
    torxp_sim_net_t *n = *torxp_sim_job_net(job);
    const double now = torxp_sim_job_now(job);
    /* A sleep may end SimGrid's precision early, the daemon's before it
     * sends a wake too: an actor may act that much before events run
     * ahead. Earlier, it is one the horizon did not know of, and the
     * events it may change are gone (a bug of sim_job.c's horizon). */
    if (TORXP_UNLIKELY(now + 2 * SIM_TIMING_PRECISION < n->ahead)) {
        fprintf(stderr,
                "torx: sim: an actor acts at %.17g s, after the network ran ahead to %.17g s\n",
                now, n->ahead);
        abort();
    }
    advance(n, now + NET_EPS);
    flush(n);
    return n;
}

/* Processes the events due before any actor of the job can act
 * (torxp_sim_job_horizon, less twice SimGrid's timing precision, by which
 * a sleep may end early): nobody can change them, or see them, before
 * then. Stops at the first that wakes an actor: whether it did, the wake
 * then due at n->wake_due, when the daemon must send it. */
static int run_ahead(torxp_sim_net_t *n)
{
    while (!n->nwakes && n->nev) {
        const double at = n->ev[0].at;
        if (!(at + 2 * SIM_TIMING_PRECISION < torxp_sim_job_horizon(n->job)))
            break;
        advance(n, at + NET_EPS);
        n->ahead = at + NET_EPS;
        if (n->nwakes)
            n->wake_due = at;
    }
    return n->nwakes != 0;
}

/* The daemon sends the wakes that events processed ahead of the clock
 * asked for, when they are due. It does not wake for the other events:
 * every actor, as it blocks, processes the events no actor can act
 * before (torxp_sim_net_blocking), and arms the daemon for the first
 * wake they ask for. */
static void net_daemon(int argc, char **argv)
{
    torxp_sim_net_t *n = NULL;
    if (argc < 1 || sscanf(argv[argc - 1], "%p", (void **)&n) != 1 || !n)
        return;
    sg_actor_daemonize(sg_actor_self()); /* it dies with the job's last task */
    while (!n->closing) {
        const double now = torxp_sim_job_now(n->job);
        advance(n, now + NET_EPS);
        if (!n->nwakes)
            run_ahead(n);
        if (n->nwakes && n->wake_due > now + SIM_TIMING_PRECISION) {
            sg_actor_sleep_for(n->wake_due - now); /* no actor is due before: nobody can wake it */
            continue;
        }
        flush(n);
        if (n->closing)
            break;
        if (!n->dwake) {
            n->dparked = 1; /* no simcall between this and the sleep */
            sg_sem_acquire(n->dsem);
            n->dparked = 0;
        }
        n->dwake = 0;
    }
}

void torxp_sim_net_blocking(torxp_sim_job_t *job)
{
    torxp_sim_net_t *n = *torxp_sim_job_net(job);
    if (!n || !n->daemon_started || n->closing || n->nwakes || n->flushing)
        return;
    if (run_ahead(n))
        wake_daemon(n);
}

/* ---- the packet layer's calls ----------------------------------------------------- */

torxp_sim_pkt_t *torxp_sim_net_peek(torxp_sim_job_t *job, torxp_sim_task_t *t, double now)
{
    catch_up(job);
    return t->nrx && t->rx[0]->arrive <= now ? t->rx[0] : NULL;
}

int torxp_sim_net_room(torxp_sim_job_t *job, torxp_sim_task_t *t, double now)
{
    torxp_sim_net_t *n = catch_up(job);
    int room = 0;
    for (unsigned i = 0; i < n->inject_cap; i++)
        room += t->inject[i] <= now;
    return room;
}

torx_status_t torxp_sim_net_inject(torxp_sim_job_t *job, torxp_sim_task_t *t, double now,
                                   const torx_pkt_hdr_t *hdr, const struct iovec *iov, int iovcnt,
                                   size_t len)
{
    torxp_sim_net_t *n = catch_up(job);
    unsigned slot_i = n->inject_cap;
    for (unsigned i = 0; i < n->inject_cap; i++)
        if (t->inject[i] <= now) {
            slot_i = i;
            break;
        }
    if (slot_i == n->inject_cap)
        return TORX_NO_ROOM;
    torxp_sim_task_t *to = task_at(n, hdr->dest);
    if (!to && !(hdr->ctl & TORX_PKT_DEPOSIT))
        return torxp_error(TORX_ERR_INVAL, "torx: no task at destination (%u,%u,%u,%u)",
                           hdr->dest.x, hdr->dest.y, hdr->dest.z, hdr->dest.t);
    const unsigned chunks = torx_pkt_chunks_for(len);
    flight_t *f = flight_new(n, &t->rng, FL_PKT, t->coord, hdr->dest, hdr->ctl, wire_s(n, chunks));
    if (!f)
        return torxp_error(TORX_ERR_NOMEM, "torx: sim: no memory for a packet in flight");
    /* the packet as the receiver will see it */
    f->pkt.hdr = *hdr;
    f->pkt.hdr.payload_len = (uint8_t)len;
    f->pkt.hdr.chunks = (uint8_t)chunks;
    f->pkt.hdr.dev_tag = 0;
    size_t off = 0;
    for (int i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len)
            memcpy(f->pkt.bytes + TORX_PKT_HDR_BYTES + off, iov[i].iov_base, iov[i].iov_len);
        off += iov[i].iov_len;
    }
    if (arrived_at_end(f)) { /* within its node */
        t->inject[slot_i] = now;
        if (to)
            deliver(n, to, &f->pkt, now);
        flight_free(n, f);
    } else {
        t->inject[slot_i] = INFINITY; /* until it starts on its first link */
        f->src_rank = t->rank;
        f->src_gen = t->gen;
        f->slot = (int)slot_i;
        inject_queue(n, f, now);
        drain(n, now);
    }
    flush(n);
    return TORX_OK;
}

/* ---- bulk transfers: the packet layer's calls ---------------------------------- */

torx_status_t torxp_sim_bulk_start(torxp_sim_job_t *job, torxp_sim_task_t *t, double now, int get,
                                   torx_coord_t peer, const void *remote, void *local, size_t len,
                                   torxp_sim_xfer_t **out)
{
    torxp_sim_net_t *n = catch_up(job);
    torxp_sim_task_t *p = task_at(n, peer);
    if (!p)
        return torxp_error(TORX_ERR_INVAL, "torx: bulk transfer: no task at (%u,%u,%u,%u)", peer.x,
                           peer.y, peer.z, peer.t);
    torxp_sim_xfer_t *b = torxp_calloc(1, sizeof *b);
    if (!b)
        return torxp_error(TORX_ERR_NOMEM, "torx: sim: no memory for a bulk transfer");
    b->src = get ? peer : t->coord;
    b->dst = get ? t->coord : peer;
    b->src_rank = get ? p->rank : t->rank;
    b->dst_rank = get ? t->rank : p->rank;
    b->owner = t->rank;
    b->from = get ? remote : local;
    b->to = get ? local : (void *)remote;
    b->len = len;
    b->rng = torxp_chaos_next(&t->rng) | 1;
    b->local = b->src.x == b->dst.x && b->src.y == b->dst.y && b->src.z == b->dst.z;
    const double start = now + n->dma_startup;
    if (!len) {
        b->complete = 1;
        b->done_at = now;
    } else if (get && !b->local) { /* the request travels to the peer's engine first */
        flight_t *f =
            flight_new(n, &b->rng, FL_REQ, t->coord, peer, TORX_PKT_ADAPTIVE, wire_s(n, 1));
        if (!f) {
            free(b);
            return torxp_error(TORX_ERR_NOMEM, "torx: sim: no memory for a bulk transfer");
        }
        f->xfer = b;
        b->outstanding = 1;
        ev_push(n, start, EV_INJECT, f, 0);
    } else {
        b->dma_ev = 1;
        ev_push(n, start, EV_DMA, b, 0);
    }
    b->next = t->bulk;
    t->bulk = b;
    *out = b;
    catch_up(job);
    return TORX_OK;
}

/* When t next has a transfer done (+inf: none yet). */
double torxp_sim_bulk_next(const torxp_sim_task_t *t)
{
    double next = INFINITY;
    for (const torxp_sim_xfer_t *b = t->bulk; b; b = b->next)
        if (b->complete && b->done_at < next)
            next = b->done_at;
    return next;
}

/* TORX_OK (and b freed, its bytes copied) once done by now; TORX_AGAIN. */
torx_status_t torxp_sim_bulk_finish(torxp_sim_job_t *job, torxp_sim_task_t *t, torxp_sim_xfer_t *b,
                                    double now)
{
    catch_up(job);
    if (!b->complete || b->done_at > now)
        return TORX_AGAIN;
    if (b->len)
        memcpy(torxp_sim_task_addr(job, b->dst_rank, b->to),
               torxp_sim_task_addr(job, b->src_rank, (void *)b->from), b->len);
    for (torxp_sim_xfer_t **pp = &t->bulk; *pp; pp = &(*pp)->next)
        if (*pp == b) {
            *pp = b->next;
            break;
        }
    free(b);
    return TORX_OK;
}

/* ---- the collective network ---------------------------------------------------- */

double torxp_sim_net_next_event(torxp_sim_job_t *job, torxp_sim_task_t *t)
{
    torxp_sim_net_t *n = catch_up(job);
    double next = t->nrx ? t->rx[0]->arrive : INFINITY;
    const double bulk = torxp_sim_bulk_next(t);
    if (bulk < next)
        next = bulk;
    /* every channel: the task may wait on any of them */
    for (unsigned ch = 0; ch < TORX_CN_CHANNELS; ch++) {
        if (!t->cn_unread[ch])
            continue;
        const uint64_t r = t->cn_injected[ch] - t->cn_unread[ch]; /* its next to read */
        const cn_round_t *c = &n->cn[ch][r % CN_DEPTH];
        if (c->round == r + 1 && c->count == n->ntasks && c->done_at < next)
            next = c->done_at;
    }
    for (unsigned ch = 0; ch < TORX_GI_CHANNELS; ch++) {
        if (!t->gi_unseen[ch])
            continue;
        const uint64_t k = t->gi_armed[ch];
        const gi_round_t *g = &n->gi[ch][k & 1];
        if (g->round == k && g->count == n->ntasks && g->done_at < next)
            next = g->done_at;
    }
    return next;
}

static void notify_all(torxp_sim_net_t *n, double when)
{
    for (int r = 0; r < n->ntasks; r++)
        if (n->tasks[r].open)
            torxp_sim_notify(&n->tasks[r], when);
}

torx_status_t torxp_sim_cn_inject(torxp_sim_job_t *job, torxp_sim_task_t *t, unsigned ch,
                                  double now, torx_cn_op_t op, torx_cn_type_t type, int is_root,
                                  const void *data)
{
    torxp_sim_net_t *n = *torxp_sim_job_net(job);
    cn_round_t *const slots = n->cn[ch];
    const uint64_t r = t->cn_injected[ch];
    cn_round_t *c = &slots[r % CN_DEPTH];
    if (t->cn_unread[ch] >= CN_DEPTH) /* never when each task reads each round: keeps the byte */
        return TORX_NO_ROOM;
    if (c->round != r + 1) {
        if (c->round && c->readers < n->ntasks)
            return TORX_NO_ROOM; /* a reader is CN_DEPTH rounds behind */
        *c = (cn_round_t){.round = r + 1,
                          .op = (uint8_t)op,
                          .type = (uint8_t)type,
                          .bad_task = -1,
                          .root = -1,
                          .second_root = -1};
    }
    const int has_data = op != TORX_CN_BCAST || is_root;
    if (c->count == 0) {
        if (has_data && op != TORX_CN_BCAST)
            memcpy(c->acc, data, TORX_CN_PACKET_BYTES);
    } else if (c->op != op || c->type != type) {
        if (c->bad_task < 0) {
            c->bad_task = t->rank;
            c->bad_op = (uint8_t)op;
            c->bad_type = (uint8_t)type;
        }
    } else if (op != TORX_CN_BCAST) {
        torxp_cn_alu(op, type, c->acc, data);
    }
    if (op == TORX_CN_BCAST && is_root) {
        if (c->nroots == 0) {
            c->root = t->rank;
            memcpy(c->acc, data, TORX_CN_PACKET_BYTES);
        } else if (c->nroots == 1) {
            c->second_root = t->rank;
        }
        c->nroots++;
    }
    if (now > c->last_in)
        c->last_in = now;
    t->cn_injected[ch] = r + 1;
    t->cn_unread[ch]++;
    if (++c->count == n->ntasks) {
        /* a channel's rounds pipeline: the tree takes a packet of the
         * channel per wire time (channels do not contend, see the top) */
        const cn_round_t *prev = &slots[(r + CN_DEPTH - 1) % CN_DEPTH];
        c->enter = c->last_in;
        if (r && prev->round == r && prev->enter + n->cn_wire_s > c->enter)
            c->enter = prev->enter + n->cn_wire_s;
        c->done_at = c->enter + n->cn_latency + n->cn_wire_s;
        notify_all(n, c->done_at);
    }
    return TORX_OK;
}

torx_status_t torxp_sim_cn_read(torxp_sim_job_t *job, torxp_sim_task_t *t, unsigned ch, double now,
                                void *result)
{
    torxp_sim_net_t *n = *torxp_sim_job_net(job);
    const uint64_t r = t->cn_injected[ch] - t->cn_unread[ch];
    cn_round_t *c = &n->cn[ch][r % CN_DEPTH];
    if (c->round != r + 1 || c->count < n->ntasks || now < c->done_at)
        return TORX_AGAIN;
    t->cn_unread[ch]--;
    c->readers++;
    if (c->bad_task < 0 && (c->op != TORX_CN_BCAST || c->nroots == 1)) {
        memcpy(result, c->acc, TORX_CN_PACKET_BYTES);
        return TORX_OK;
    }
    /* the errors name the channel, but channel 0's read as before channels */
    char chan[24] = "";
    if (ch)
        snprintf(chan, sizeof chan, " channel %u", ch);
    if (c->bad_task >= 0)
        return torxp_error(TORX_ERR_PROTO,
                           "torx: collective network%s round %llu: the first task injected %s/%s "
                           "but task %d injected %s/%s (every task must use the same op and "
                           "type in the same round)",
                           chan, (unsigned long long)r, torxp_cn_op_name(c->op),
                           torxp_cn_type_name(c->type), c->bad_task, torxp_cn_op_name(c->bad_op),
                           torxp_cn_type_name(c->bad_type));
    return c->nroots == 0
               ? torxp_error(TORX_ERR_PROTO,
                             "torx: collective network%s round %llu: BCAST/%s with no root "
                             "(exactly one task must pass is_root)",
                             chan, (unsigned long long)r, torxp_cn_type_name(c->type))
               : torxp_error(TORX_ERR_PROTO,
                             "torx: collective network%s round %llu: BCAST/%s with %d roots, "
                             "tasks %d and %d among them (exactly one task must pass "
                             "is_root)",
                             chan, (unsigned long long)r, torxp_cn_type_name(c->type), c->nroots,
                             c->root, c->second_root);
}

/* ---- the global interrupt ------------------------------------------------------ */

torx_status_t torxp_sim_gi_arm(torxp_sim_job_t *job, torxp_sim_task_t *t, unsigned ch, double now)
{
    torxp_sim_net_t *n = *torxp_sim_job_net(job);
    const uint64_t k = ++t->gi_armed[ch];
    t->gi_unseen[ch] = 1;
    gi_round_t *g = &n->gi[ch][k & 1];
    if (g->round != k)
        *g = (gi_round_t){.round = k};
    if (now > g->done_at)
        g->done_at = now; /* the latest arrival, until the last is in */
    if (++g->count == n->ntasks) {
        g->done_at += n->gi_latency;
        notify_all(n, g->done_at);
    }
    return TORX_OK;
}

torx_status_t torxp_sim_gi_poll(torxp_sim_job_t *job, torxp_sim_task_t *t, unsigned ch, double now)
{
    torxp_sim_net_t *n = *torxp_sim_job_net(job);
    if (!t->gi_unseen[ch])
        return TORX_OK;
    const uint64_t k = t->gi_armed[ch];
    const gi_round_t *g = &n->gi[ch][k & 1];
    if (g->round != k || g->count < n->ntasks || now < g->done_at)
        return TORX_AGAIN;
    t->gi_unseen[ch] = 0;
    return TORX_OK;
}

double torxp_sim_net_cn_round(torxp_sim_job_t *job)
{
    const torxp_sim_net_t *n = *torxp_sim_job_net(job);
    return n ? n->cn_latency + n->cn_wire_s : 0.0;
}
