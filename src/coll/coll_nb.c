/* torx's nonblocking collectives: the barrier on the global interrupt;
 * allreduce, reduce and bcast on the collective network; alltoall(v)
 * paced (coll_alltoall.c), whose blocks name their exchange and so need no
 * channel of their own, but keep its queue's order and progress.
 *
 * Channels. MPI orders the collectives of one communicator, blocking and
 * nonblocking, the same way on every member, but not those of different
 * communicators: one task may start an Iallreduce on A and then an
 * Allreduce on B, another run B's first and start A's after. Rounds of one
 * device sequence would then pair A's contribution with B's. So a group
 * runs its nonblocking collectives on a channel of its own
 * (torx_coll_group_channel), which its caller guarantees no other live
 * group uses; blocking collectives keep channel 0
 * (docs/collectives.md#nonblocking).
 *
 * Queues. Within a channel the group's nonblocking collectives run one
 * after another in the order they were started, which is the order every
 * member started them in. Only the head of a queue has rounds in flight.
 *
 * Progress. torx_coll_progress moves every queue's head as far as it goes
 * without waiting; while anything is queued the message layer calls it
 * from every torx_advance (torx_advance_hook), so whatever advances the
 * message layer (MPI's progress engine, torx_wait, a blocking collective's
 * wait) completes them. The done callback runs there.
 */
#include "coll_internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

static_assert(TORX_CN_CHANNELS == TORX_GI_CHANNELS, "a group's channel names one of each");

struct torxc_nb {
    struct torxc_nb *next;
    torx_coll_group_t *g;
    torx_coll_kind_t kind;
    unsigned ch;
    int armed;            /* barrier: its global-interrupt round is entered */
    torxc_cn_op_t *cn;    /* collective network: its rounds */
    torxc_a2a_run_t *a2a; /* alltoall(v): its paced exchange */
    torx_coll_done_fn done;
    void *arg;
    /* co mode, its rounds on the communication thread: what the task hands
     * over (co) and asks (co_cancel), and what the thread answers, last
     * co_finished (release); the thread then never touches it again */
    int co;
    struct torxc_nb *co_next;
    int co_cancel, co_finished;
    torx_status_t co_status;
    char co_err[256]; /* the thread's torx_last_error when co_status is an error */
};

static const char *const nb_names[TORX_COLL_NKINDS][TORX_COLL_NALGS] = {
    [TORX_COLL_BARRIER] =
        {[TORX_COLL_ALG_FALLBACK] = "ibarrier:mpich", [TORX_COLL_ALG_GI] = "ibarrier:gi"},
    [TORX_COLL_BCAST] =
        {[TORX_COLL_ALG_FALLBACK] = "ibcast:mpich", [TORX_COLL_ALG_CN] = "ibcast:cn"},
    [TORX_COLL_ALLREDUCE] =
        {[TORX_COLL_ALG_FALLBACK] = "iallreduce:mpich", [TORX_COLL_ALG_CN] = "iallreduce:cn"},
    [TORX_COLL_REDUCE] =
        {[TORX_COLL_ALG_FALLBACK] = "ireduce:mpich", [TORX_COLL_ALG_CN] = "ireduce:cn"},
    [TORX_COLL_ALLGATHER] = {[TORX_COLL_ALG_FALLBACK] = "iallgather:mpich"},
    [TORX_COLL_ALLTOALL] =
        {[TORX_COLL_ALG_FALLBACK] = "ialltoall:mpich", [TORX_COLL_ALG_PACED] = "ialltoall:paced"},
    [TORX_COLL_ALLTOALLV] =
        {[TORX_COLL_ALG_FALLBACK] = "ialltoallv:mpich", [TORX_COLL_ALG_PACED] = "ialltoallv:paced"},
};

const char *torxc_nb_name(torx_coll_kind_t kind, torx_coll_alg_t alg)
{
    const char *n = nb_names[kind][alg];
    return n ? n : "none";
}

torx_status_t torx_coll_group_channel(torx_coll_group_t *g, unsigned channel)
{
    if (g == NULL)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_coll_group_channel: group is NULL");
    if (channel >= TORX_CN_CHANNELS)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_coll_group_channel: channel %u is out of range (1..%d; 0: "
                           "none)",
                           channel, TORX_CN_CHANNELS - 1);
    if (g->nb_queued)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_coll_group_channel: the group has nonblocking collectives "
                           "in flight");
    g->channel = channel;
    return TORX_OK;
}

torx_coll_alg_t torx_coll_iselect(torx_coll_group_t *g, torx_coll_kind_t kind, size_t bytes,
                                  torx_coll_dtype_t dtype, torx_coll_op_t op)
{
    if (g == NULL || (unsigned)kind >= TORX_COLL_NKINDS)
        return TORX_COLL_ALG_FALLBACK;
    torx_coll_t *c = g->c;
    const int choice = c->choice[kind];
    torx_coll_alg_t alg = TORX_COLL_ALG_FALLBACK;
    /* The hardware only: on a channel of the group's own, on every task. A
     * forced torus or paced algorithm has no nonblocking form: MPICH's
     * runs. auto (bench/mpi_coll.c -m osu, docs/collectives.md#nonblocking):
     * the global interrupt for every barrier; the collective network up to
     * the blocking calls' limits, for reductions on more than 2 tasks (at
     * 2 MPICH's schedule was 1.2-1.5x faster, as the blocking direct
     * exchange is) and for the bcast where no host is oversubscribed
     * (there a round waits for every task to be scheduled: 13 us against
     * MPICH's 1.1 at 4 tasks on 2 cores); on a torus the hardware, as the
     * blocking calls' costs choose it. */
    const int a2a = kind == TORX_COLL_ALLTOALL || kind == TORX_COLL_ALLTOALLV;
    if (g->n > 1 && g->channel != 0 && (g->all_tasks || a2a) && bytes != TORX_COLL_NONCONTIG) {
        const int torus = c->net.kind == TORX_NET_TORUS;
        switch (kind) {
        case TORX_COLL_BARRIER:
            if (choice == TORXC_AUTO || choice == TORX_COLL_ALG_GI)
                alg = TORX_COLL_ALG_GI;
            break;
        case TORX_COLL_BCAST:
        case TORX_COLL_ALLREDUCE:
        case TORX_COLL_REDUCE: {
            const size_t limit =
                kind != TORX_COLL_BCAST && torxc_is_fpsum(dtype, op) ? c->cn_fpsum_max : c->cn_max;
            const int reduces = kind == TORX_COLL_BCAST || torxc_cn_reduces(dtype, op);
            const int pays = torus || (kind == TORX_COLL_BCAST ? !c->oversubscribed : g->n > 2);
            if (reduces &&
                ((choice == TORXC_AUTO && pays && bytes <= limit) || choice == TORX_COLL_ALG_CN))
                alg = TORX_COLL_ALG_CN;
            break;
        }
        case TORX_COLL_ALLTOALL:
        case TORX_COLL_ALLTOALLV:
            /* paced, as the blocking calls are wherever they apply */
            if (choice == TORXC_AUTO || choice == TORX_COLL_ALG_PACED)
                alg = TORX_COLL_ALG_PACED;
            break;
        default:
            break;
        }
    }
    return torxc_counted(g, c->nb_calls, c->nb_bytes, kind, alg, bytes, torxc_nb_name(kind, alg));
}

int torx_coll_icounters(const torx_coll_t *c, torx_coll_kind_t kind, torx_coll_alg_t alg,
                        uint64_t *calls, uint64_t *bytes)
{
    const int exists =
        (unsigned)kind < TORX_COLL_NKINDS && (unsigned)alg < TORX_COLL_NALGS && nb_names[kind][alg];
    if (calls)
        *calls = exists && c ? c->nb_calls[kind][alg] : 0;
    if (bytes)
        *bytes = exists && c ? c->nb_bytes[kind][alg] : 0;
    return exists;
}

/* ---- the queues ----------------------------------------------------------------- */

static int advance_hook(void *arg)
{
    return torx_coll_progress(arg);
}

static torx_status_t enqueue(torx_coll_group_t *g, torxc_nb_t *nb)
{
    torx_coll_t *c = g->c;
    const unsigned ch = g->channel;
    if (c->nb_total == 0) {
        torx_status_t st = torx_advance_hook(c->ctx, advance_hook, c);
        if (st != TORX_OK)
            return st;
    }
    nb->next = NULL;
    if (c->nb_head[ch] == NULL)
        c->nb_head[ch] = nb;
    else
        c->nb_tail[ch]->next = nb;
    c->nb_tail[ch] = nb;
    c->nb_total++;
    g->nb_queued++;
    return TORX_OK;
}

/* Moves a barrier's or a collective-network collective's rounds on
 * without waiting: TORX_AGAIN, or how it ended. Touches only nb, its
 * buffers and the device: the task's or the communication thread's. */
static torx_status_t device_step(torx_coll_t *c, torxc_nb_t *nb, int *moved)
{
    *moved = 0;
    if (nb->kind == TORX_COLL_BARRIER) {
        const unsigned ch = nb->ch;
        if (!nb->armed) {
            torx_status_t st = torx_gi_arm_on(c->dev, ch);
            if (st != TORX_OK)
                return st;
            nb->armed = 1;
            *moved = 1;
        }
        return torx_gi_poll_on(c->dev, ch);
    }
    return torxc_cn_op_step(c, nb->cn, moved);
}

/* ---- co mode: the rounds on the communication thread ---------------------------- */

/* The communication thread's poll (torx_copoll): takes what the task
 * handed over, in the order it was started, into its queues per channel,
 * and moves each queue's head as far as it goes. */
static torx_copoll_result_t co_poll(void *arg)
{
    torx_coll_t *c = arg;
    /* relaxed: a hint; the exchange below decides. */
    if (__atomic_load_n(&c->co_inbox, __ATOMIC_RELAXED)) {
        /* acquire: pairs with the task's release push: each op is whole. */
        torxc_nb_t *in = __atomic_exchange_n(&c->co_inbox, NULL, __ATOMIC_ACQUIRE), *fifo = NULL;
        while (in) { /* the inbox is newest first */
            torxc_nb_t *next = in->co_next;
            in->co_next = fifo;
            fifo = in;
            in = next;
        }
        while (fifo) {
            torxc_nb_t *next = fifo->co_next;
            fifo->co_next = NULL;
            if (c->co_head[fifo->ch] == NULL)
                c->co_head[fifo->ch] = fifo;
            else
                c->co_tail[fifo->ch]->co_next = fifo;
            c->co_tail[fifo->ch] = fifo;
            fifo = next;
        }
    }
    torx_copoll_result_t r = TORX_COPOLL_IDLE;
    for (unsigned ch = 1; ch < TORX_CN_CHANNELS; ch++) {
        torxc_nb_t *nb;
        while ((nb = c->co_head[ch]) != NULL) {
            int moved = 0;
            torx_status_t st = TORX_ERR_INVAL; /* discarded: never read */
            /* acquire: pairs with the release of co_cancel (a hint: the
             * task waits for co_finished either way). */
            if (!__atomic_load_n(&nb->co_cancel, __ATOMIC_ACQUIRE))
                st = device_step(c, nb, &moved);
            if (moved)
                r = TORX_COPOLL_MOVED;
            if (st == TORX_AGAIN) {
                if (r == TORX_COPOLL_IDLE)
                    r = TORX_COPOLL_WAITING;
                break;
            }
            c->co_head[ch] = nb->co_next;
            nb->co_status = st;
            if (st != TORX_OK)
                snprintf(nb->co_err, sizeof nb->co_err, "%s", torx_last_error());
            __atomic_fetch_add(&c->co_done, 1, __ATOMIC_RELAXED); /* read by tests meanwhile */
            /* release: the results and status happen before the task's
             * acquire; after it the op is the task's, to free. */
            __atomic_store_n(&nb->co_finished, 1, __ATOMIC_RELEASE);
            r = TORX_COPOLL_MOVED;
        }
    }
    return r;
}

/* Whether the communication thread runs nb's rounds: a barrier or a
 * collective-network collective in co mode with a thread that owns the
 * network (asked once). */
static int co_takes(torx_coll_t *c, const torxc_nb_t *nb)
{
    if (nb->a2a)
        return 0;
    if (!c->co_tried) {
        c->co_tried = 1;
        c->co_drive =
            torx_mode(c->ctx) == TORX_MODE_CO && torx_copoll(c->ctx, co_poll, c) == TORX_OK;
    }
    return c->co_drive;
}

/* Hands nb to the communication thread. */
static void co_hand_over(torx_coll_t *c, torxc_nb_t *nb)
{
    nb->co = 1;
    nb->co_next = __atomic_load_n(&c->co_inbox, __ATOMIC_RELAXED);
    /* release: nb is whole before the thread's acquire exchange. */
    while (!__atomic_compare_exchange_n(&c->co_inbox, &nb->co_next, nb, 1, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED))
        ;
    torx_cokick(c->ctx);
}

/* Takes nb back from the communication thread before it ended: the
 * thread drops it at its next poll. */
static void co_take_back(torx_coll_t *c, torxc_nb_t *nb)
{
    /* release: pairs with the thread's acquire of co_cancel. */
    __atomic_store_n(&nb->co_cancel, 1, __ATOMIC_RELEASE);
    torx_cokick(c->ctx);
    /* acquire: pairs with the thread's release of co_finished. */
    while (!__atomic_load_n(&nb->co_finished, __ATOMIC_ACQUIRE))
        torxp_yield(c->dev);
}

/* Moves nb on without waiting: TORX_AGAIN, or how it ended. */
static torx_status_t step(torx_coll_t *c, torxc_nb_t *nb, int *moved)
{
    *moved = 0;
    if (nb->co) {
        /* acquire: pairs with the thread's release of co_finished. */
        if (!__atomic_load_n(&nb->co_finished, __ATOMIC_ACQUIRE))
            return TORX_AGAIN;
        if (nb->co_status != TORX_OK && nb->co_err[0])
            torxp_error(nb->co_status, "%s", nb->co_err);
        return nb->co_status;
    }
    if (nb->a2a)
        return torxc_a2a_step(nb->a2a, moved);
    return device_step(c, nb, moved);
}

/* Frees a discarded nb, taking it back from the thread first. */
static void discard(torx_coll_t *c, torxc_nb_t *nb)
{
    if (nb->co)
        co_take_back(c, nb);
    free(nb->cn);
    torxc_a2a_discard(nb->a2a);
    free(nb);
}

int torx_coll_progress(torx_coll_t *c)
{
    if (c == NULL || c->nb_total == 0)
        return 0;
    int n = 0;
    for (unsigned ch = 1; ch < TORX_CN_CHANNELS; ch++) {
        torxc_nb_t *nb;
        while ((nb = c->nb_head[ch]) != NULL) {
            int moved;
            const torx_status_t st = step(c, nb, &moved);
            n += moved;
            if (st == TORX_AGAIN)
                break;
            /* Off the queue before the callback, which may start another. */
            c->nb_head[ch] = nb->next;
            c->nb_total--;
            nb->g->nb_queued--;
            n++;
            free(nb->cn);
            torxc_a2a_discard(nb->a2a);
            if (nb->done)
                nb->done(nb->arg, st);
            free(nb);
        }
    }
    if (c->nb_total == 0)
        torx_advance_hook(c->ctx, NULL, NULL);
    return n;
}

void torxc_nb_finalize(torx_coll_t *c)
{
    if (c->nb_total && c->verbose >= 0)
        fprintf(stderr,
                "torx coll rank %d: %d nonblocking collective(s) never completed (no wait or "
                "test on them); discarded\n",
                c->job_rank, c->nb_total);
    for (unsigned ch = 0; ch < TORX_CN_CHANNELS; ch++) {
        torxc_nb_t *nb = c->nb_head[ch];
        while (nb) {
            torxc_nb_t *next = nb->next;
            discard(c, nb);
            nb = next;
        }
        c->nb_head[ch] = NULL;
    }
    if (c->nb_total)
        torx_advance_hook(c->ctx, NULL, NULL);
    c->nb_total = 0;
    if (c->co_drive)
        torx_copoll(c->ctx, NULL, NULL);
    c->co_drive = 0;
}

void torxc_nb_group_free(torx_coll_group_t *g)
{
    torx_coll_t *c = g->c;
    if (g->nb_queued == 0)
        return;
    fprintf(stderr,
            "torx coll rank %d: a group was freed with %d nonblocking collective(s) in flight; "
            "discarded\n",
            c->job_rank, g->nb_queued);
    torxc_nb_t **at = &c->nb_head[g->channel], *last = NULL;
    while (*at) {
        torxc_nb_t *nb = *at;
        if (nb->g != g) {
            last = nb;
            at = &nb->next;
            continue;
        }
        *at = nb->next;
        c->nb_total--;
        discard(c, nb);
    }
    c->nb_tail[g->channel] = last;
    g->nb_queued = 0;
    if (c->nb_total == 0)
        torx_advance_hook(c->ctx, NULL, NULL);
}

/* ---- the calls ------------------------------------------------------------------- */

static torx_status_t start(torx_coll_group_t *g, torx_coll_kind_t kind, torx_coll_alg_t alg,
                           torxc_cn_op_t *cn, torxc_a2a_run_t *a2a, torx_coll_done_fn done,
                           void *arg)
{
    torxc_nb_t *nb = calloc(1, sizeof *nb);
    if (nb == NULL) {
        free(cn);
        torxc_a2a_discard(a2a);
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for a nonblocking %s",
                           torx_coll_kind_name(kind));
    }
    (void)alg;
    *nb = (torxc_nb_t){
        .g = g, .kind = kind, .ch = g->channel, .cn = cn, .a2a = a2a, .done = done, .arg = arg};
    torx_status_t st = enqueue(g, nb);
    if (st != TORX_OK) {
        free(cn);
        torxc_a2a_discard(a2a);
        free(nb);
        return st;
    }
    if (co_takes(g->c, nb))
        co_hand_over(g->c, nb);
    /* A first step now: a round whose members are all in already ends
     * here, and the others see this task's contribution at once. */
    torx_coll_progress(g->c);
    return TORX_OK;
}

/* Whether g may run alg for kind nonblocking (what torx_coll_iselect can
 * return, forced or not). */
static int nb_applies(const torx_coll_group_t *g, torx_coll_kind_t kind, torx_coll_alg_t alg,
                      torx_coll_dtype_t dtype, torx_coll_op_t op)
{
    if (g == NULL || g->channel == 0 || g->n < 2)
        return 0;
    if (kind == TORX_COLL_ALLTOALL || kind == TORX_COLL_ALLTOALLV)
        return alg == TORX_COLL_ALG_PACED;
    if (!g->all_tasks)
        return 0;
    switch (kind) {
    case TORX_COLL_BARRIER:
        return alg == TORX_COLL_ALG_GI;
    case TORX_COLL_BCAST:
        return alg == TORX_COLL_ALG_CN;
    case TORX_COLL_ALLREDUCE:
    case TORX_COLL_REDUCE:
        return alg == TORX_COLL_ALG_CN && torxc_cn_reduces(dtype, op);
    default:
        return 0;
    }
}

static torx_status_t nb_not_applicable(const torx_coll_group_t *g, torx_coll_kind_t kind,
                                       torx_coll_alg_t alg)
{
    return torxp_error(TORX_ERR_INVAL,
                       "torx: torx_coll_i%s: algorithm %s does not apply nonblocking (%d of %d "
                       "tasks, channel %u)",
                       torx_coll_kind_name(kind), torx_coll_alg_name(alg), g ? g->n : 0,
                       g ? g->c->job_size : 0, g ? g->channel : 0);
}

torx_status_t torx_coll_ibarrier(torx_coll_group_t *g, torx_coll_alg_t alg, torx_coll_done_fn done,
                                 void *arg)
{
    if (!nb_applies(g, TORX_COLL_BARRIER, alg, 0, 0))
        return nb_not_applicable(g, TORX_COLL_BARRIER, alg);
    return start(g, TORX_COLL_BARRIER, alg, NULL, NULL, done, arg);
}

torx_status_t torx_coll_ibcast(torx_coll_group_t *g, torx_coll_alg_t alg, void *buf, size_t bytes,
                               int root, torx_coll_done_fn done, void *arg)
{
    if (!nb_applies(g, TORX_COLL_BCAST, alg, 0, 0) || root < 0 || root >= g->n)
        return nb_not_applicable(g, TORX_COLL_BCAST, alg);
    torxc_cn_op_t *cn;
    torx_status_t st = torxc_cn_ibcast(g, g->channel, buf, bytes, root, &cn);
    return st != TORX_OK ? st : start(g, TORX_COLL_BCAST, alg, cn, NULL, done, arg);
}

static torx_status_t ireduce(torx_coll_group_t *g, torx_coll_kind_t kind, torx_coll_alg_t alg,
                             const void *in, void *out, size_t count, torx_coll_dtype_t dtype,
                             torx_coll_op_t op, int root, torx_coll_done_fn done, void *arg)
{
    if (!nb_applies(g, kind, alg, dtype, op) ||
        (kind == TORX_COLL_REDUCE && (root < 0 || root >= g->n)))
        return nb_not_applicable(g, kind, alg);
    if (in == NULL)
        in = out; /* in place */
    if (kind == TORX_COLL_REDUCE && g->me != root)
        out = NULL;
    torxc_cn_op_t *cn;
    torx_status_t st = torxc_cn_ireduce(g, g->channel, in, out, count, dtype, op, &cn);
    return st != TORX_OK ? st : start(g, kind, alg, cn, NULL, done, arg);
}

torx_status_t torx_coll_iallreduce(torx_coll_group_t *g, torx_coll_alg_t alg, const void *in,
                                   void *out, size_t count, torx_coll_dtype_t dtype,
                                   torx_coll_op_t op, torx_coll_done_fn done, void *arg)
{
    return ireduce(g, TORX_COLL_ALLREDUCE, alg, in, out, count, dtype, op, -1, done, arg);
}

torx_status_t torx_coll_ireduce(torx_coll_group_t *g, torx_coll_alg_t alg, const void *in,
                                void *out, size_t count, torx_coll_dtype_t dtype, torx_coll_op_t op,
                                int root, torx_coll_done_fn done, void *arg)
{
    return ireduce(g, TORX_COLL_REDUCE, alg, in, out, count, dtype, op, root, done, arg);
}

static torx_status_t ialltoallv(torx_coll_group_t *g, torx_coll_kind_t kind, torx_coll_alg_t alg,
                                const void *in, const size_t *send_bytes, const size_t *send_displs,
                                void *out, const size_t *recv_bytes, const size_t *recv_displs,
                                torx_coll_done_fn done, void *arg)
{
    if (!nb_applies(g, kind, alg, 0, 0))
        return nb_not_applicable(g, kind, alg);
    torxc_a2a_run_t *run;
    torx_status_t st =
        torxc_a2a_start(g, kind, in, send_bytes, send_displs, out, recv_bytes, recv_displs, &run);
    return st != TORX_OK ? st : start(g, kind, alg, NULL, run, done, arg);
}

torx_status_t torx_coll_ialltoall(torx_coll_group_t *g, torx_coll_alg_t alg, const void *in,
                                  void *out, size_t bytes, torx_coll_done_fn done, void *arg)
{
    if (g != NULL && bytes > 0 && (in == NULL || out == NULL || bytes > SIZE_MAX / (size_t)g->n))
        return torxp_error(TORX_ERR_INVAL, "torx: torx_coll_ialltoall: %zu bytes, in %p, out %p",
                           bytes, in, out);
    if (g == NULL)
        return nb_not_applicable(g, TORX_COLL_ALLTOALL, alg);
    const size_t *v = torxc_uniform_counts(g, bytes); /* the start copies them */
    if (v == NULL)
        return torxp_error(TORX_ERR_NOMEM, "torx: torx_coll_ialltoall: out of memory");
    const size_t n = (size_t)g->n;
    return ialltoallv(g, TORX_COLL_ALLTOALL, alg, in, v, v + n, out, v, v + n, done, arg);
}

torx_status_t torx_coll_ialltoallv(torx_coll_group_t *g, torx_coll_alg_t alg, const void *in,
                                   const size_t *send_bytes, const size_t *send_displs, void *out,
                                   const size_t *recv_bytes, const size_t *recv_displs,
                                   torx_coll_done_fn done, void *arg)
{
    if (!send_bytes || !send_displs || !recv_bytes || !recv_displs)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_coll_ialltoallv: NULL counts");
    return ialltoallv(g, TORX_COLL_ALLTOALLV, alg, in, send_bytes, send_displs, out, recv_bytes,
                      recv_displs, done, arg);
}
