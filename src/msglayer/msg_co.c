/* Coprocessor mode (TORX_MODE=co): a communication thread on the node's
 * second core, as Blue Gene/L's second processor.
 *
 * The thread runs permanent work units: it is the only reader of the
 * device's reception FIFOs (advancing the network, including the device's
 * own bulk traffic) and it performs the data movement of rendezvous and vn
 * receives (the bulk gets). Between them it runs the transient work units
 * of torx_costart. It never touches an object of the layer above, and never
 * a message-layer object either: it copies packets, moves bytes and
 * publishes completion records, all in the scratchpad below. The task's own
 * torx_advance turns those into handler calls and callbacks, so handlers
 * and callbacks run in the task's thread only, and an MPI_THREAD_SINGLE
 * program above stays correct.
 *
 * Scratchpad (struct torxm_co): one cache-line-aligned block shared by the
 * two threads, four single-producer single-consumer rings plus two wakeup
 * words. Every ring's producer fields and consumer fields sit on separate
 * lines; each side keeps a private copy of the other's index and re-reads
 * it only when the copy says full or empty.
 *
 *   stage   thread -> task   received packets, 256-byte slots as in a FIFO;
 *                            the task dispatches them with the same code as
 *                            heater mode, so protocols have no co-specific
 *                            receive path
 *   cmd     task -> thread   gets to perform {token, peer, remote, local, len}
 *   done    thread -> task   finished gets {token, status, error text}
 *   unit    task -> thread   transient work units {fn, arg}; the consumer
 *                            index counts finished units (handles)
 *
 * The task keeps at most CO_CMDS gets outstanding (handed over and not yet
 * reaped), so the thread always has a free operation slot and the done ring
 * never overflows; the rest wait in ctx->co_wait, in order.
 *
 * Injection: the task injects its sends, acks and control packets; the
 * thread injects only the device's own bulk packets (the FIFO path of bulk
 * gets, and replies to peers' gets). The device is opened with
 * TORX_PKT_SHARED_INJECT, which puts an uncontended lock around injection:
 * routing every send through the thread would add a hop and a ring to the
 * latency of every message, while the lock costs one atomic exchange per
 * packet in co mode only (heater and vn take no lock).
 *
 * Large gets are cut into CO_CHUNK pieces, one piece per loop of the thread,
 * so packets keep being staged while a 64 MiB transfer runs.
 *
 * Short of cores. All of the above needs the thread to have a core of its
 * own: on one it shares (a node of one core, more nodes than the host has
 * cores, or a launcher's one-core binding), a thread that owns the network
 * holds every packet until the scheduler runs it, and the task, spinning
 * in MPI's progress loop, keeps it from running: a 0-byte round trip grew
 * from 0.4 us to milliseconds. So torxm_co_start decides once
 * (TORX_CO_THREAD=auto|own|shared): with a core of its own the thread owns
 * the network ("own", all of the above); without one ("shared") the task
 * reads the network and moves rendezvous data itself, exactly as in heater
 * mode (ctx->co_net = 0), and the thread only runs work units, sleeping on
 * a word of its own (comm_bell) that only torx_costart and stop ring: it
 * takes no CPU from the task unless it has work. On a device that models
 * the node's cores itself (TORXP_CAP_EXACT_WAIT, sim) the host's cores say
 * nothing: auto is "own".
 *
 * Sleeping. While work comes, the thread spins (it owns its core); after a
 * while idle it yields, then sleeps on the device doorbell (torx_pkt_wait),
 * which an injector rings for a packet and the task rings (torx_pkt_wake) for
 * a command or work unit. The task, waiting, sleeps on a word in the
 * scratchpad (torxp_word_wait: a futex on the host) that the thread rings
 * when it staged, finished or completed something. Both use the same
 * protocol: set a flag, seq_cst fence, recheck, sleep; the other side
 * publishes, fences, tests the flag, rings. On a device with exact waits
 * (TORXP_CAP_EXACT_WAIT) neither spins nor yields: idle, both sleep at once.
 * The thread, its sleeps and its clock are the device's (torxp_thread_start
 * and the other calls of pkt_internal.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "msg_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define CO_STAGE 1024u               /* staged packets, power of two */
#define CO_CMDS 64u                  /* gets outstanding, power of two */
#define CO_UNITS 256u                /* transient work units queued, power of two */
#define CO_CHUNK ((uint64_t)1 << 20) /* bytes a get moves per loop of the thread */
#define CO_BUDGET 64                 /* packets staged, or dispatched by the task, per round */
#define CO_LINE 64

/* Idle rounds of the thread before it yields, then before it sleeps. */
#define CO_SPINS 20000u
#define CO_YIELDS 2000u
#define CO_SLEEP_MS 100       /* longest doorbell sleep of the thread */
#define CO_SHARED_YIELDS 16u  /* "shared": idle rounds before the thread sleeps */
#define CO_FULL_NAP_NS 50000L /* staging ring full: the task drains it, nobody rings */
/* The task's wait: spins and yields before it sleeps, and its naps. */
#define TASK_SPINS 4096u
#define TASK_YIELDS 4096u
#define TASK_SLEEP_MS 20   /* longest sleep (deadlines are checked between) */
#define TASK_NAP_NS 50000L /* sends wait for room at a peer: nobody rings */

typedef struct co_cmd {
    uint64_t token; /* the task's receive record; the thread only echoes it */
    uint64_t remote, local, len;
    torx_coord_t peer;
    uint32_t pad;
} co_cmd_t;

#define CO_ERR_BYTES 244
typedef struct co_done {
    uint64_t token;
    int32_t status;
    char err[CO_ERR_BYTES]; /* torx_last_error() of the thread when status < 0 */
} co_done_t;
static_assert(sizeof(co_done_t) == 256, "a done record is four lines");

typedef struct co_unit {
    torx_cowork_fn fn;
    void *arg;
} co_unit_t;

/* A get in progress: the thread's own, never seen by the task. */
typedef struct co_op {
    torx_bulk_t bulk;
    uint64_t token, remote, local, len;
    uint64_t off;   /* bytes done */
    uint64_t piece; /* bytes of the piece in flight, 0 when none */
    torx_coord_t peer;
    int busy;
} co_op_t;

struct torxm_co {
    /* ---- stage ring: the thread produces, the task consumes ---- */
    alignas(CO_LINE) uint64_t stage_tail; /* thread writes */
    uint64_t stage_head_seen;             /* thread's copy of stage_head */
    uint32_t stage_full;                  /* thread: the last round found the ring full */
    alignas(CO_LINE) uint64_t stage_head; /* task writes */
    uint64_t stage_tail_seen;             /* task's copy of stage_tail */

    /* ---- cmd ring: the task produces, the thread consumes ---- */
    alignas(CO_LINE) uint64_t cmd_tail; /* task writes */
    uint64_t outstanding;               /* task: handed over, not yet reaped */
    uint64_t done_head;                 /* task: done records reaped */
    alignas(CO_LINE) uint64_t cmd_head; /* thread writes */

    /* ---- done ring: the thread produces (room: see the top) ---- */
    alignas(CO_LINE) uint64_t done_tail; /* thread writes */
    uint64_t gets_done;                  /* thread writes: finished gets, for tests */

    /* ---- unit ring: the task produces, the thread consumes ---- */
    alignas(CO_LINE) uint64_t unit_tail; /* task writes */
    uint64_t units_seen;                 /* task: unit_head when it last looked */
    alignas(CO_LINE) uint64_t unit_head; /* thread writes: units finished */

    /* ---- the poll (torx_copoll): the task sets it, the thread runs it ---- */
    alignas(CO_LINE) torx_copoll_fn poll_fn; /* task writes */
    void *poll_arg;                          /* task writes, before poll_fn */
    alignas(CO_LINE) uint32_t poll_busy;     /* thread writes: inside poll_fn */

    /* ---- wakeups ---- */
    alignas(CO_LINE) uint32_t task_sleeping; /* task writes */
    uint32_t stop;                           /* task writes, once */
    alignas(CO_LINE) uint32_t task_bell;     /* thread bumps: the task's wait word */
    alignas(CO_LINE) uint32_t comm_idle;     /* thread writes */
    alignas(CO_LINE) uint32_t comm_bell;     /* task bumps: the thread's wait word ("shared") */

    /* ---- slots ---- */
    alignas(CO_LINE) co_cmd_t cmds[CO_CMDS];
    alignas(CO_LINE) co_done_t dones[CO_CMDS];
    alignas(CO_LINE) co_unit_t units[CO_UNITS];
    alignas(CO_LINE) uint8_t stage[CO_STAGE][TORX_PKT_MAX_BYTES];

    /* ---- the thread's private state ---- */
    alignas(CO_LINE) co_op_t ops[CO_CMDS];
    unsigned nops; /* busy ops */

    /* ---- set before the thread starts, read-only after ---- */
    alignas(CO_LINE) torx_pkt_dev_t *dev;
    int owns_net; /* "own": the thread reads the network and moves gets */
    int oversubscribed;
    int exact_wait; /* the device's TORXP_CAP_EXACT_WAIT: idle, sleep at once */
    int started;
    torxp_thread_t thread;
};

static_assert(
    offsetof(struct torxm_co, stage_head) - offsetof(struct torxm_co, stage_tail) >= CO_LINE &&
        offsetof(struct torxm_co, cmd_head) - offsetof(struct torxm_co, cmd_tail) >= CO_LINE &&
        offsetof(struct torxm_co, unit_head) - offsetof(struct torxm_co, unit_tail) >= CO_LINE &&
        offsetof(struct torxm_co, task_bell) % CO_LINE == 0 &&
        offsetof(struct torxm_co, comm_idle) % CO_LINE == 0 &&
        offsetof(struct torxm_co, comm_bell) % CO_LINE == 0 &&
        offsetof(struct torxm_co, stage) % CO_LINE == 0,
    "producer and consumer fields of the scratchpad on separate lines");
static_assert(sizeof(struct torxm_co) % CO_LINE == 0, "the scratchpad fills whole lines");
static_assert((CO_STAGE & (CO_STAGE - 1)) == 0 && (CO_CMDS & (CO_CMDS - 1)) == 0 &&
                  (CO_UNITS & (CO_UNITS - 1)) == 0,
              "ring sizes are powers of two");
static_assert(sizeof(co_cmd_t) == 40, "a command is 40 bytes");

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* ---- The thread ----------------------------------------------------------------- */

/* After publishing something for the task: wakes it if it sleeps. */
static void ring_task(struct torxm_co *co)
{
    /* seq_cst fence: StoreLoad between our publish (a ring index) and the
     * load of task_sleeping; pairs with the fence in sleep_task. */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    /* relaxed: ordered by the fence. */
    if (__atomic_load_n(&co->task_sleeping, __ATOMIC_RELAXED)) {
        /* release: nothing rides on the bell (the rings carry their own
         * release), but the bump comes after what we published. */
        __atomic_add_fetch(&co->task_bell, 1, __ATOMIC_RELEASE);
        torxp_word_wake(co->dev, &co->task_bell);
    }
}

static void op_finish(struct torxm_co *co, co_op_t *op, torx_status_t st)
{
    /* relaxed: only this thread writes done_tail. */
    const uint64_t t = __atomic_load_n(&co->done_tail, __ATOMIC_RELAXED);
    co_done_t *d = &co->dones[t & (CO_CMDS - 1)];
    d->token = op->token;
    d->status = st;
    if (st < 0)
        snprintf(d->err, sizeof d->err, "%s", torx_last_error());
    /* release: the record, and the bytes the get wrote into the task's
     * buffer, happen before the task's acquire of done_tail. */
    __atomic_store_n(&co->done_tail, t + 1, __ATOMIC_RELEASE);
    /* release: pairs with torxm_co_gets_done's acquire, so a test that sees
     * the count sees the data too. Only this thread writes it. */
    __atomic_store_n(&co->gets_done, co->gets_done + 1, __ATOMIC_RELEASE);
    op->busy = 0;
    co->nops--;
}

/* Moves the next piece of op; returns 1 when something happened. */
static int op_step(struct torxm_co *co, co_op_t *op)
{
    torx_pkt_dev_t *dev = co->dev;
    if (op->piece) {
        const torx_status_t st = torx_bulk_test(dev, &op->bulk);
        if (st == TORX_AGAIN)
            return 0;
        if (st != TORX_OK) {
            op_finish(co, op, st);
            return 1;
        }
        op->off += op->piece;
        op->piece = 0;
    }
    if (op->off == op->len) {
        op_finish(co, op, TORX_OK);
        return 1;
    }
    const uint64_t n = op->len - op->off < CO_CHUNK ? op->len - op->off : CO_CHUNK;
    torx_status_t st =
        torx_bulk_get(dev, &op->bulk, op->peer, (const void *)(uintptr_t)(op->remote + op->off),
                      (void *)(uintptr_t)(op->local + op->off), (size_t)n);
    if (st == TORX_OK)
        st = torx_bulk_test(dev, &op->bulk); /* cross-memory attach is done already */
    if (st == TORX_OK) {
        op->off += n;
        if (op->off == op->len)
            op_finish(co, op, TORX_OK);
    } else if (st == TORX_AGAIN) {
        op->piece = n;
    } else {
        op_finish(co, op, st);
    }
    return 1;
}

/* Takes new commands and moves every get one piece on. */
static int comm_gets(struct torxm_co *co)
{
    int n = 0;
    /* acquire: pairs with the task's release of cmd_tail: the slot's
     * contents are visible. */
    const uint64_t tail = __atomic_load_n(&co->cmd_tail, __ATOMIC_ACQUIRE);
    /* relaxed: only this thread writes cmd_head. */
    uint64_t head = __atomic_load_n(&co->cmd_head, __ATOMIC_RELAXED);
    for (; head != tail && co->nops < CO_CMDS; head++) {
        const co_cmd_t *c = &co->cmds[head & (CO_CMDS - 1)];
        co_op_t *op = co->ops;
        while (op->busy)
            op++;
        *op = (co_op_t){.token = c->token,
                        .remote = c->remote,
                        .local = c->local,
                        .len = c->len,
                        .peer = c->peer,
                        .busy = 1};
        co->nops++;
        /* release: our reads of the slot happen before the task reuses it
         * (it also waits for the done record; see the top). */
        __atomic_store_n(&co->cmd_head, head + 1, __ATOMIC_RELEASE);
        n++;
    }
    for (unsigned i = 0; co->nops && i < CO_CMDS; i++)
        if (co->ops[i].busy)
            n += op_step(co, &co->ops[i]);
    return n;
}

/* Runs one transient work unit, if any. */
static int comm_unit(struct torxm_co *co)
{
    /* relaxed: only this thread writes unit_head. */
    const uint64_t head = __atomic_load_n(&co->unit_head, __ATOMIC_RELAXED);
    /* acquire: pairs with torx_costart's release: the unit and what the
     * task prepared for it are visible. */
    if (head == __atomic_load_n(&co->unit_tail, __ATOMIC_ACQUIRE))
        return 0;
    const co_unit_t u = co->units[head & (CO_UNITS - 1)];
    u.fn(u.arg);
    /* release: the unit's effects happen before torx_cojoin's acquire. */
    __atomic_store_n(&co->unit_head, head + 1, __ATOMIC_RELEASE);
    return 1;
}

/* Copies arrived packets into the stage ring. */
static int comm_stage(struct torxm_co *co)
{
    torx_pkt_dev_t *dev = co->dev;
    co->stage_full = 0;
    if (!torx_pkt_poll(dev))
        return 0;
    /* relaxed: only this thread writes stage_tail. */
    uint64_t tail = __atomic_load_n(&co->stage_tail, __ATOMIC_RELAXED);
    int n = 0;
    for (; n < CO_BUDGET; n++) {
        if (tail - co->stage_head_seen >= CO_STAGE) {
            /* acquire: pairs with the task's release of stage_head: its
             * reads of the slot are done before we overwrite it. */
            co->stage_head_seen = __atomic_load_n(&co->stage_head, __ATOMIC_ACQUIRE);
            if (tail - co->stage_head_seen >= CO_STAGE) {
                co->stage_full = 1;
                break;
            }
        }
        const torx_pkt_hdr_t *pkt = torx_pkt_peek(dev);
        if (!pkt)
            break;
        memcpy(co->stage[tail & (CO_STAGE - 1)], pkt, TORX_PKT_HDR_BYTES + pkt->payload_len);
        torx_pkt_consume(dev);
        tail++;
        /* release: the copied packet happens before the task's acquire of
         * stage_tail. */
        __atomic_store_n(&co->stage_tail, tail, __ATOMIC_RELEASE);
        /* Exact waits (sim): a task asleep in torx_idle takes each packet
         * when a polling one would, not after the thread's whole round of
         * receive costs. */
        if (co->exact_wait)
            ring_task(co);
    }
    return n;
}

/* Runs the task's poll, if set: its torx_copoll_result_t. */
static torx_copoll_result_t comm_poll(struct torxm_co *co)
{
    /* relaxed: a hint; the seq_cst load below decides. */
    if (!__atomic_load_n(&co->poll_fn, __ATOMIC_RELAXED))
        return TORX_COPOLL_IDLE;
    /* seq_cst: busy is visible before poll_fn is read (pairs with the
     * task's store of NULL and its load of busy in torxm_co_poll_set):
     * either we see NULL or the task waits for us. */
    __atomic_store_n(&co->poll_busy, 1u, __ATOMIC_SEQ_CST);
    torx_copoll_result_t r = TORX_COPOLL_IDLE;
    const torx_copoll_fn fn = __atomic_load_n(&co->poll_fn, __ATOMIC_SEQ_CST);
    if (fn)
        r = fn(__atomic_load_n(&co->poll_arg, __ATOMIC_RELAXED));
    /* release: the poll's effects happen before the task sees busy 0. */
    __atomic_store_n(&co->poll_busy, 0u, __ATOMIC_RELEASE);
    return r;
}

static int comm_has_orders(struct torxm_co *co)
{
    /* acquire: as in comm_gets and comm_unit (a hint here; they re-read). */
    return __atomic_load_n(&co->stop, __ATOMIC_ACQUIRE) ||
           __atomic_load_n(&co->cmd_tail, __ATOMIC_ACQUIRE) !=
               __atomic_load_n(&co->cmd_head, __ATOMIC_RELAXED) ||
           __atomic_load_n(&co->unit_tail, __ATOMIC_ACQUIRE) !=
               __atomic_load_n(&co->unit_head, __ATOMIC_RELAXED);
}

/* The thread sleeps until a packet, a command, a work unit or stop. 1: a
 * device with exact waits ended the sleep for an event that may be the
 * task's (a collective-network or global-interrupt round, a bulk
 * transfer's end), not only a packet. */
static int comm_sleep(struct torxm_co *co)
{
    int event = 0;
    /* relaxed: ordered by the fence. */
    __atomic_store_n(&co->comm_idle, 1u, __ATOMIC_RELAXED);
    /* seq_cst fence: StoreLoad between comm_idle and the recheck of the
     * rings; pairs with the fence in wake_comm. */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (!comm_has_orders(co)) {
        if (!co->owns_net) {
            /* "shared": only torx_costart and stop ring comm_bell; a wake
             * after the fence changed it, so the wait returns at once. */
            /* relaxed: ordered by the fence; the wait compares it. */
            const uint32_t bell = __atomic_load_n(&co->comm_bell, __ATOMIC_RELAXED);
            if (!comm_has_orders(co))
                torxp_word_wait(co->dev, &co->comm_bell, bell, CO_SLEEP_MS * 1000000LL);
        } else if (co->stage_full) {
            torxp_nap(co->dev, CO_FULL_NAP_NS);
        } else {
            /* A wake by the task after the fence makes this return at once
             * (the doorbell remembers bumps since the last wait). */
            event = torx_pkt_wait(co->dev, CO_SLEEP_MS) == TORX_OK && co->exact_wait;
        }
    }
    /* relaxed: a late wake only costs the next sleep a spurious return. */
    __atomic_store_n(&co->comm_idle, 0u, __ATOMIC_RELAXED);
    return event;
}

static void *comm_main(void *arg)
{
    struct torxm_co *co = arg;
    unsigned idle = 0;
    int event = 0; /* the last sleep ended for an event (comm_sleep) */
    /* acquire: pairs with the release of stop in torxm_co_stop. */
    while (!__atomic_load_n(&co->stop, __ATOMIC_ACQUIRE)) {
        int work = comm_unit(co);
        if (!co->owns_net) { /* "shared": work units only; sleep soon */
            if (work) {
                ring_task(co);
                idle = 0;
            } else if (++idle < CO_SHARED_YIELDS && !co->exact_wait) {
                torxp_yield(co->dev);
            } else {
                comm_sleep(co);
            }
            continue;
        }
        work += comm_gets(co);
        work += comm_stage(co);
        const torx_copoll_result_t polled = comm_poll(co);
        work += polled == TORX_COPOLL_MOVED;
        if (work) {
            ring_task(co);
            idle = 0;
            event = 0;
            continue;
        }
        /* The sleep ended for an event that was none of ours: the task's
         * round, which rings nobody, so the task may sleep through it
         * (a message-layer wait with a round's poll as its advance hook,
         * docs/message-layer.md#waiting). */
        if (event) {
            ring_task(co);
            event = 0;
        }
        if (idle < UINT_MAX)
            idle++;
        /* Oversubscribed: no spin phase at all, only the yields (counting
         * the spin budget as yields made an idle thread yield 22000 times,
         * about 5% of a core, before it slept). Exact waits: neither. A
         * poll waiting on other tasks keeps the thread from sleeping: what
         * it waits for (a collective-network round) rings no doorbell,
         * except on a device with exact waits. */
        const unsigned spins = co->oversubscribed || co->exact_wait ? 0 : CO_SPINS;
        const unsigned yields = co->exact_wait ? 0 : CO_YIELDS;
        if (idle < spins)
            cpu_relax();
        else if (idle < spins + yields || (polled == TORX_COPOLL_WAITING && !co->exact_wait))
            torxp_yield(co->dev);
        else
            event = comm_sleep(co);
    }
    return NULL;
}

/* ---- The task's side --------------------------------------------------------------- */

/* After handing the thread a command or unit: wakes it if it sleeps. */
static void wake_comm(struct torxm_co *co)
{
    /* seq_cst fence: StoreLoad between our release of the ring index and the
     * load of comm_idle; pairs with the fence in comm_sleep. */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    /* relaxed: ordered by the fence. */
    if (!__atomic_load_n(&co->comm_idle, __ATOMIC_RELAXED))
        return;
    if (co->owns_net) {
        torx_pkt_wake(co->dev);
    } else {
        /* release: after the order we published (the ring carries its own). */
        __atomic_add_fetch(&co->comm_bell, 1, __ATOMIC_RELEASE);
        torxp_word_wake(co->dev, &co->comm_bell);
    }
}

enum { CO_ROLE_AUTO, CO_ROLE_OWN, CO_ROLE_SHARED };
static const char *const co_role_names[] = {"auto", "own", "shared", NULL};

/* Why the thread has no core of its own, or NULL when it has one. */
static const char *core_short(const torx_ctx_t *ctx)
{
    if (ctx->prebound_cpus == 1)
        return "the launcher bound the task to one CPU";
    if (ctx->cores_per_node < 2)
        return "nodes of one core (TORX_CORES_PER_NODE=1, or the host has fewer than 2 cores "
               "per node)";
    if (!ctx->nodes_fit)
        return "the host has fewer cores than the nodes need";
    return NULL;
}

torx_status_t torxm_co_start(torx_ctx_t *ctx)
{
    struct torxm_co *co = aligned_alloc(CO_LINE, sizeof *co);
    if (!co)
        return torxp_error(TORX_ERR_NOMEM,
                           "torx: out of memory for the coprocessor scratchpad (%zu KiB)",
                           sizeof *co >> 10);
    memset(co, 0, sizeof *co);
    co->dev = ctx->dev;
    int role;
    torx_status_t rc = torx_env_choice("TORX_CO_THREAD", co_role_names, CO_ROLE_AUTO, &role);
    if (rc != TORX_OK) {
        free(co);
        return rc;
    }
    /* A device with exact waits models the node's cores itself: the host's
     * cores and bindings say nothing about whether the thread has one. */
    co->exact_wait = torxm_exact_wait(ctx);
    const char *why = NULL;
    if (role == CO_ROLE_AUTO && !co->exact_wait)
        why = core_short(ctx);
    co->owns_net = role == CO_ROLE_OWN || (role == CO_ROLE_AUTO && !why);
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    /* "own": two running threads per task. */
    co->oversubscribed = !co->exact_wait && cpus > 0 && (co->owns_net ? 2L : 1L) * ctx->size > cpus;
    ctx->oversubscribed = co->oversubscribed;
    ctx->co_wait_tail = &ctx->co_wait;
    if (ctx->rank == 0) {
        if (co->owns_net)
            torxp_log(ctx->dev, 1,
                      "co mode: the communication thread reads the network and moves "
                      "rendezvous data (%s)",
                      role == CO_ROLE_OWN ? "TORX_CO_THREAD=own"
                      : co->exact_wait    ? "the device models the node's cores"
                                          : "it has a core of its own");
        else
            torxp_log(ctx->dev, 1,
                      "co mode: %s: the task reads the network and moves rendezvous data as "
                      "in heater mode; the communication thread runs work units only",
                      why ? why : "TORX_CO_THREAD=shared");
    }

    /* The device's thread; on the host a pthread that takes no signals
     * (they belong to the application's thread). */
    if ((rc = torxp_thread_start(ctx->dev, &co->thread, comm_main, co)) != TORX_OK) {
        free(co);
        const char *err = torx_last_error();
        if (strncmp(err, "torx: ", 6) == 0)
            err += 6;
        return torxp_error(rc, "torx: cannot start the communication thread: %s", err);
    }
    co->started = 1;
    ctx->co = co;
    ctx->co_net = co->owns_net;
    if (co->owns_net && !ctx->dev->ops->thread_start) /* a host thread: bind it */
        torxm_bind_comm(ctx, co->thread.pthread);
    return TORX_OK;
}

void torxm_co_stop(torx_ctx_t *ctx)
{
    struct torxm_co *co = ctx->co;
    if (!co)
        return;
    if (co->started) {
        /* release: pairs with the thread's acquire of stop. */
        __atomic_store_n(&co->stop, 1u, __ATOMIC_RELEASE);
        wake_comm(co);
        torxp_thread_join(co->dev, &co->thread);
    }
    /* Receive records of gets that never finished (finalize timed out, or
     * init failed): handed over and not reaped, or never handed over. */
    for (uint64_t i = co->done_head; i < co->cmd_tail; i++)
        free((void *)(uintptr_t)co->cmds[i & (CO_CMDS - 1)].token);
    for (torxm_rx_t *rx = ctx->co_wait, *next; rx; rx = next) {
        next = rx->next;
        free(rx);
    }
    ctx->co_wait = NULL;
    ctx->co_wait_tail = &ctx->co_wait;
    ctx->co = NULL;
    ctx->co_net = 0;
    free(co);
}

static int co_post(torx_ctx_t *ctx)
{
    struct torxm_co *co = ctx->co;
    int n = 0;
    while (ctx->co_wait && co->outstanding < CO_CMDS) {
        torxm_rx_t *rx = ctx->co_wait;
        ctx->co_wait = rx->next;
        if (!ctx->co_wait)
            ctx->co_wait_tail = &ctx->co_wait;
        /* relaxed: only the task writes cmd_tail. */
        const uint64_t t = __atomic_load_n(&co->cmd_tail, __ATOMIC_RELAXED);
        co->cmds[t & (CO_CMDS - 1)] = (co_cmd_t){.token = (uint64_t)(uintptr_t)rx,
                                                 .remote = rx->raddr,
                                                 .local = (uint64_t)(uintptr_t)rx->buf,
                                                 .len = rx->want,
                                                 .peer = torx_map_coord(&ctx->map, rx->src)};
        /* release: the command happens before the thread's acquire. */
        __atomic_store_n(&co->cmd_tail, t + 1, __ATOMIC_RELEASE);
        co->outstanding++;
        n++;
    }
    if (n)
        wake_comm(co);
    return n;
}

void torxm_co_get(torx_ctx_t *ctx, torxm_rx_t *rx)
{
    rx->next = NULL;
    *ctx->co_wait_tail = rx;
    ctx->co_wait_tail = &rx->next;
    ctx->inflight_rx++;
    co_post(ctx);
}

int torxm_co_advance(torx_ctx_t *ctx)
{
    struct torxm_co *co = ctx->co;
    int n = 0;
    /* Finished gets: ack the sender, complete the receive. */
    /* acquire: pairs with op_finish: the record and the data are visible. */
    const uint64_t done = __atomic_load_n(&co->done_tail, __ATOMIC_ACQUIRE);
    while (co->done_head != done) {
        const co_done_t *d = &co->dones[co->done_head & (CO_CMDS - 1)];
        torxm_rx_t *rx = (torxm_rx_t *)(uintptr_t)d->token;
        torx_status_t st = d->status;
        if (st < 0)
            st = torxp_error(st, "%s", d->err); /* the thread's message, for this thread */
        co->done_head++;
        co->outstanding--;
        ctx->inflight_rx--;
        torxm_bulk_done(ctx, rx, st);
        n++;
    }
    if (ctx->co_wait)
        n += co_post(ctx);
    /* Staged packets, dispatched as in heater mode. */
    for (int i = 0; i < CO_BUDGET; i++) {
        /* relaxed: only the task writes stage_head. */
        const uint64_t head = __atomic_load_n(&co->stage_head, __ATOMIC_RELAXED);
        if (head == co->stage_tail_seen) {
            /* acquire: pairs with comm_stage's release: the packet is
             * visible. */
            co->stage_tail_seen = __atomic_load_n(&co->stage_tail, __ATOMIC_ACQUIRE);
            if (head == co->stage_tail_seen)
                break;
        }
        torxm_dispatch(ctx, (const torx_pkt_hdr_t *)(void *)co->stage[head & (CO_STAGE - 1)]);
        /* release: our reads of the slot happen before the thread reuses it. */
        __atomic_store_n(&co->stage_head, head + 1, __ATOMIC_RELEASE);
        n++;
    }
    return n;
}

/* Whether the thread has published something the task has not taken: a
 * work unit counts until the task looks (units_seen), so one that finished
 * between a caller's own look (units_wait) and this is news too. */
static int task_has_news(struct torxm_co *co)
{
    /* acquire: as in torxm_co_advance (a hint; it re-reads). */
    const uint64_t units = __atomic_load_n(&co->unit_head, __ATOMIC_ACQUIRE);
    if (units != co->units_seen) {
        co->units_seen = units;
        return 1;
    }
    return __atomic_load_n(&co->stage_tail, __ATOMIC_ACQUIRE) !=
               __atomic_load_n(&co->stage_head, __ATOMIC_RELAXED) ||
           __atomic_load_n(&co->done_tail, __ATOMIC_ACQUIRE) != co->done_head;
}

/* The task sleeps until the thread publishes something, at most ms; with
 * room, also until a slot of its injection FIFO frees. */
static void sleep_task(struct torxm_co *co, int ms, int room)
{
    /* acquire: pairs with ring_task's release. */
    const uint32_t bell = __atomic_load_n(&co->task_bell, __ATOMIC_ACQUIRE);
    /* relaxed: ordered by the fence. */
    __atomic_store_n(&co->task_sleeping, 1u, __ATOMIC_RELAXED);
    /* seq_cst fence: StoreLoad between task_sleeping and the recheck;
     * pairs with the fence in ring_task. */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (!task_has_news(co)) {
        if (room)
            torxp_room_wait(co->dev, &co->task_bell, bell, (int64_t)ms * 1000000);
        else
            torxp_word_wait(co->dev, &co->task_bell, bell, (int64_t)ms * 1000000);
    }
    /* relaxed: a late ring only bumps the bell. */
    __atomic_store_n(&co->task_sleeping, 0u, __ATOMIC_RELAXED);
}

void torxm_co_wait_news(torx_ctx_t *ctx)
{
    sleep_task(ctx->co, TASK_SLEEP_MS, torxm_fifo_was_full(ctx));
}

void torxm_co_idle(torx_ctx_t *ctx, unsigned idle, double deadline)
{
    const int exact = ctx->co->exact_wait;
    if (!ctx->co_net) {
        /* "shared": waiting for a work unit that runs on our own core.
         * Exact waits: sleep until the thread says it finished one. */
        if (exact)
            sleep_task(ctx->co, TASK_SLEEP_MS, 0);
        else
            torxp_yield(ctx->dev);
        return;
    }
    /* as in comm_main */
    const unsigned spins = ctx->oversubscribed || exact ? 0 : TASK_SPINS;
    const unsigned yields = exact ? 0 : TASK_YIELDS;
    if (idle < spins) {
        cpu_relax();
        return;
    }
    if (idle < spins + yields) {
        torxp_yield(ctx->dev);
        return;
    }
    if (ctx->busy || ctx->ctrl_head) {
        /* Our sends wait for room at a peer, which rings nobody: nap.
         * Exact waits (sim): a wait for room in the task's own injection
         * FIFO sleeps until a slot frees, and one for a packet (a token, a
         * clear-to-send) until the thread stages one; either ends on the
         * thread's ring (torxm_fifo_was_full). */
        if (!exact) {
            torxp_nap(ctx->dev, TASK_NAP_NS);
            return;
        }
        if (torxm_fifo_was_full(ctx)) {
            sleep_task(ctx->co, TASK_SLEEP_MS, 1);
            return;
        }
    }
    /* A hook's work (a round) rings no one on a host; on a device with
     * exact waits the thread rings the task when a round is due. */
    if (ctx->advance_hook && !exact) {
        torxp_nap(ctx->dev, TASK_NAP_NS);
        return;
    }
    int ms = TASK_SLEEP_MS;
    if (deadline >= 0) {
        const double left = deadline - torxp_now_s(ctx->dev);
        if (left <= 0)
            return;
        if (left * 1e3 < ms)
            ms = (int)(left * 1e3) + 1;
    }
    sleep_task(ctx->co, ms, 0);
}

/* ---- Transient work units ------------------------------------------------------------- */

/* Waits, advancing, until the thread has finished count work units. */
static void units_wait(torx_ctx_t *ctx, uint64_t count)
{
    struct torxm_co *co = ctx->co;
    unsigned idle = 0;
    /* acquire: pairs with comm_unit's release: a unit's slot is free, and
     * its effects visible, once it counts as finished. Units finish in
     * order. */
    uint64_t head;
    while ((head = __atomic_load_n(&co->unit_head, __ATOMIC_ACQUIRE)) < count) {
        /* a unit that finishes from here on, even before the task's
         * sleep below begins, ends that sleep (task_has_news) */
        co->units_seen = head;
        if (torx_advance(ctx) > 0) /* a failed context still lets units finish */
            idle = 0;
        else
            torxm_co_idle(ctx, idle++, -1);
    }
}

torx_status_t torxm_co_costart(torx_ctx_t *ctx, torx_cowork_fn fn, void *arg, int *handle)
{
    struct torxm_co *co = ctx->co;
    /* relaxed: only the task writes unit_tail. */
    const uint64_t t = __atomic_load_n(&co->unit_tail, __ATOMIC_RELAXED);
    if (t >= (uint64_t)INT_MAX)
        return torxp_error(TORX_ERR_NOMEM,
                           "torx: torx_costart: %llu work units started; the "
                           "handles are used up",
                           (unsigned long long)t);
    /* The ring is full: wait for the thread (advancing, so it can finish)
     * until unit t - CO_UNITS has, whose slot t takes. */
    units_wait(ctx, t >= CO_UNITS ? t - CO_UNITS + 1 : 0);
    co->units[t & (CO_UNITS - 1)] = (co_unit_t){fn, arg};
    /* release: the unit, and what the caller prepared for it, happen before
     * the thread's acquire. */
    __atomic_store_n(&co->unit_tail, t + 1, __ATOMIC_RELEASE);
    wake_comm(co);
    if (handle)
        *handle = (int)(t + 1);
    return TORX_OK;
}

torx_status_t torxm_co_cojoin(torx_ctx_t *ctx, int handle)
{
    struct torxm_co *co = ctx->co;
    /* relaxed: only the task writes unit_tail. */
    if (handle < 1 || (uint64_t)handle > __atomic_load_n(&co->unit_tail, __ATOMIC_RELAXED))
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_cojoin: handle %d was not returned by torx_costart", handle);
    units_wait(ctx, (uint64_t)handle);
    return TORX_OK;
}

uint64_t torxm_co_gets_done(const torx_ctx_t *ctx)
{
    /* acquire: pairs with op_finish's release. */
    return ctx->co ? __atomic_load_n(&ctx->co->gets_done, __ATOMIC_ACQUIRE) : 0;
}

/* ---- The poll --------------------------------------------------------------------- */

void torxm_co_poll_set(torx_ctx_t *ctx, torx_copoll_fn fn, void *arg)
{
    struct torxm_co *co = ctx->co;
    if (fn) {
        /* relaxed: published by the release store of poll_fn. */
        __atomic_store_n(&co->poll_arg, arg, __ATOMIC_RELAXED);
        __atomic_store_n(&co->poll_fn, fn, __ATOMIC_SEQ_CST);
        wake_comm(co);
        return;
    }
    __atomic_store_n(&co->poll_fn, (torx_copoll_fn)NULL, __ATOMIC_SEQ_CST);
    /* seq_cst: pairs with comm_poll's store of busy before its load of
     * poll_fn; acquire: the old poll's effects are visible after. */
    while (__atomic_load_n(&co->poll_busy, __ATOMIC_SEQ_CST))
        torxp_yield(co->dev);
}

void torxm_co_kick(torx_ctx_t *ctx)
{
    wake_comm(ctx->co);
}
