/* torx collectives: init, environment, groups, selection, names, counters.
 *
 * Selection is a pure function of the group, the call (kind, bytes, dtype,
 * op) and the environment, so every member of a group picks the same
 * algorithm without talking: a collective whose members disagreed on the
 * algorithm would hang. The environment is the job's (hydra passes it to
 * every task).
 */
#include "coll_internal.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* auto takes the direct exchange for groups of at most this many tasks
 * and vectors of at most this many bytes (bench/run-coll-bench.sh). */
#define TORXC_EXCHANGE_AUTO_TASKS 2
#define TORXC_EXCHANGE_AUTO_BYTES 2048

/* auto's default size limit for the collective network (bytes of an
 * allreduce/reduce vector, or of an allgather's whole result). Measured
 * with bench/run-coll-bench.sh (docs/collectives.md): one round
 * costs about three cache-line transfers per task, and every task must be
 * running for a round to end, so past a couple of rounds MPICH's
 * point-to-point algorithms over torx win, and by far when tasks
 * outnumber cores. */
#define TORXC_CN_MAX_DEFAULT 512

/* ... and, in an oversubscribed job, for a floating-point SUM, whose
 * reproducible sum takes a round for the exponents before those of the
 * sum: at 512 B (64 doubles) MPICH's recursive doubling over torx was
 * 1.5-2.3x faster at 4 and 8 tasks on 2 cores, at 256 B level at 4 tasks.
 * An explicit TORX_COLL_CN_MAX holds for every type. */
#define TORXC_CN_FPSUM_OVERSUBSCRIBED_MAX 256

/* auto takes the paced bcast in an oversubscribed job for groups of more
 * than this many tasks (where MPICH's tree has three levels or more) and
 * buffers of at least this many bytes, or TORXC_STAGED_BCAST_MIN_BYTES
 * through a multi-reader staging area; in smaller groups from
 * TORXC_PACED_BCAST_SMALL_GROUP_BYTES through that area only. */
#define TORXC_PACED_BCAST_MIN_TASKS 4
#define TORXC_PACED_BCAST_MIN_BYTES 4096
#define TORXC_PACED_BCAST_SMALL_GROUP_BYTES 32768

static const char *const kind_names[TORX_COLL_NKINDS] = {
    [TORX_COLL_BARRIER] = "barrier",     [TORX_COLL_BCAST] = "bcast",
    [TORX_COLL_ALLREDUCE] = "allreduce", [TORX_COLL_REDUCE] = "reduce",
    [TORX_COLL_ALLGATHER] = "allgather", [TORX_COLL_ALLTOALL] = "alltoall",
    [TORX_COLL_ALLTOALLV] = "alltoallv",
};

static const char *const alg_names[TORX_COLL_NALGS] = {
    [TORX_COLL_ALG_FALLBACK] = "mpich", [TORX_COLL_ALG_GI] = "gi",       [TORX_COLL_ALG_CN] = "cn",
    [TORX_COLL_ALG_TORUS] = "torus",    [TORX_COLL_ALG_PACED] = "paced",
};

/* "<kind>:<alg>", the names torx_coll_last_algorithm returns. */
static const char *const full_names[TORX_COLL_NKINDS][TORX_COLL_NALGS] = {
    [TORX_COLL_BARRIER] = {"barrier:mpich", "barrier:gi", "barrier:cn", "barrier:torus",
                           "barrier:paced"},
    [TORX_COLL_BCAST] = {"bcast:mpich", "bcast:gi", "bcast:cn", "bcast:torus", "bcast:paced"},
    [TORX_COLL_ALLREDUCE] = {"allreduce:mpich", "allreduce:gi", "allreduce:cn", "allreduce:torus",
                             "allreduce:paced"},
    [TORX_COLL_REDUCE] = {"reduce:mpich", "reduce:gi", "reduce:cn", "reduce:torus", "reduce:paced"},
    [TORX_COLL_ALLGATHER] = {"allgather:mpich", "allgather:gi", "allgather:cn", "allgather:torus",
                             "allgather:paced"},
    [TORX_COLL_ALLTOALL] = {"alltoall:mpich", "alltoall:gi", "alltoall:cn", "alltoall:torus",
                            "alltoall:paced"},
    [TORX_COLL_ALLTOALLV] = {"alltoallv:mpich", "alltoallv:gi", "alltoallv:cn", "alltoallv:torus",
                             "alltoallv:paced"},
};

/* The algorithms each collective has in torx: what its TORX_COLL_<KIND>
 * accepts besides auto and mpich. */
static const unsigned kind_algs[TORX_COLL_NKINDS] = {
    [TORX_COLL_BARRIER] = 1u << TORX_COLL_ALG_GI,
    [TORX_COLL_BCAST] =
        1u << TORX_COLL_ALG_CN | 1u << TORX_COLL_ALG_TORUS | 1u << TORX_COLL_ALG_PACED,
    [TORX_COLL_ALLREDUCE] = 1u << TORX_COLL_ALG_CN | 1u << TORX_COLL_ALG_TORUS,
    [TORX_COLL_REDUCE] = 1u << TORX_COLL_ALG_CN | 1u << TORX_COLL_ALG_TORUS,
    [TORX_COLL_ALLGATHER] = 1u << TORX_COLL_ALG_CN | 1u << TORX_COLL_ALG_TORUS,
    [TORX_COLL_ALLTOALL] = 1u << TORX_COLL_ALG_PACED,
    [TORX_COLL_ALLTOALLV] = 1u << TORX_COLL_ALG_PACED,
};

const char *torx_coll_kind_name(torx_coll_kind_t kind)
{
    return (unsigned)kind < TORX_COLL_NKINDS ? kind_names[kind] : "unknown";
}

const char *torx_coll_alg_name(torx_coll_alg_t alg)
{
    return (unsigned)alg < TORX_COLL_NALGS ? alg_names[alg] : "unknown";
}

int torx_coll_counters(const torx_coll_t *c, torx_coll_kind_t kind, torx_coll_alg_t alg,
                       uint64_t *calls, uint64_t *bytes)
{
    const int exists = (unsigned)kind < TORX_COLL_NKINDS && (unsigned)alg < TORX_COLL_NALGS &&
                       (alg == TORX_COLL_ALG_FALLBACK || (kind_algs[kind] & 1u << alg));
    if (calls)
        *calls = exists && c ? c->calls[kind][alg] : 0;
    if (bytes)
        *bytes = exists && c ? c->bytes[kind][alg] : 0;
    return exists;
}

size_t torxc_dtype_size(torx_coll_dtype_t dtype)
{
    switch (dtype) {
    case TORX_COLL_S32:
    case TORX_COLL_U32:
    case TORX_COLL_FLOAT:
        return 4;
    case TORX_COLL_S64:
    case TORX_COLL_U64:
    case TORX_COLL_DOUBLE:
        return 8;
    default:
        return 0;
    }
}

int torxc_cn_reduces(torx_coll_dtype_t dtype, torx_coll_op_t op)
{
    if ((unsigned)op >= TORX_COLL_NOPS || torxc_dtype_size(dtype) == 0)
        return 0;
    if (dtype == TORX_COLL_FLOAT || dtype == TORX_COLL_DOUBLE)
        return op == TORX_COLL_SUM || op == TORX_COLL_MIN || op == TORX_COLL_MAX;
    return 1;
}

/* ---- init, environment --------------------------------------------------- */

/* TORX_COLL_<KIND>: "auto", "mpich", or one of the kind's algorithms. */
static torx_status_t read_choice(torx_coll_t *c, torx_coll_kind_t kind, int global_mpich)
{
    char var[64];
    snprintf(var, sizeof var, "TORX_COLL_%s", kind_names[kind]);
    for (char *p = var; *p; p++)
        if (*p >= 'a' && *p <= 'z')
            *p = (char)(*p - 'a' + 'A');
    const char *words[2 + TORX_COLL_NALGS];
    int algs[2 + TORX_COLL_NALGS];
    int n = 0;
    words[n] = "auto", algs[n++] = TORXC_AUTO;
    words[n] = "mpich", algs[n++] = TORX_COLL_ALG_FALLBACK;
    for (int a = 1; a < TORX_COLL_NALGS; a++)
        if (kind_algs[kind] & 1u << a)
            words[n] = alg_names[a], algs[n++] = a;
    words[n] = NULL;
    int idx;
    torx_status_t st = torx_env_choice(var, words, 0, &idx);
    if (st != TORX_OK)
        return st;
    /* TORX_COLL=mpich forbids torx's algorithms unless a collective's own
     * variable asks for one. */
    c->choice[kind] = algs[idx] == TORXC_AUTO && global_mpich ? TORX_COLL_ALG_FALLBACK : algs[idx];
    return TORX_OK;
}

/* c->oversubscribed: whether any task's host is, by one collective-network
 * round (a MAX), so that selection, which must come out the same on every
 * task, sees the same value everywhere, even where hosts differ. */
static torx_status_t agree_oversubscribed(torx_coll_t *c, int mine)
{
    c->oversubscribed = mine;
    if (c->job_size < 2)
        return TORX_OK;
    int64_t lane[TORX_CN_PACKET_BYTES / 8] = {mine};
    torx_status_t st;
    while ((st = torx_cn_inject(c->dev, TORX_CN_MAX, TORX_CN_S64, 0, lane)) == TORX_NO_ROOM)
        torx_advance(c->ctx);
    if (st != TORX_OK)
        return st;
    while ((st = torx_cn_read(c->dev, lane)) == TORX_AGAIN)
        torx_advance(c->ctx);
    if (st == TORX_OK)
        c->oversubscribed = lane[0] != 0;
    return st;
}

torx_status_t torx_coll_init(torx_ctx_t *ctx, const torx_coll_attr_t *attr, torx_coll_t **out)
{
    if (ctx == NULL || out == NULL)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_coll_init: %s is NULL",
                           ctx == NULL ? "ctx" : "out");
    *out = NULL;
    torx_coll_attr_t def = {.handler = TORX_COLL_DEFAULT_HANDLER};
    if (attr == NULL)
        attr = &def;
    if (attr->handler < 0 || attr->handler >= TORX_MSG_HANDLERS)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_coll_init: handler %d, must be 0..%d",
                           attr->handler, TORX_MSG_HANDLERS - 1);

    torx_coll_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        return torxp_error(TORX_ERR_NOMEM, "torx: torx_coll_init: out of memory");
    c->ctx = ctx;
    c->dev = torx_ctx_device(ctx);
    c->handler = attr->handler;
    c->progress = attr->progress;
    c->progress_arg = attr->progress_arg;
    c->job_size = torx_size(ctx);
    c->job_rank = torx_rank(ctx);
    torx_pkt_network(c->dev, &c->net);

    static const char *const global_words[] = {"auto", "mpich", NULL};
    int global;
    long cn_max, verbose, stats;
    torx_status_t st = torx_env_choice("TORX_COLL", global_words, 0, &global);
    for (int k = 0; st == TORX_OK && k < TORX_COLL_NKINDS; k++)
        st = read_choice(c, (torx_coll_kind_t)k, global == 1);
    if (st == TORX_OK)
        st = torx_env_int("TORX_COLL_CN_MAX", 0, 1L << 30, TORXC_CN_MAX_DEFAULT, &cn_max);
    if (st == TORX_OK)
        st = torx_env_int("TORX_VERBOSE", -1, 3, 0, &verbose);
    if (st == TORX_OK)
        st = torx_env_int("TORX_STATS", 0, 1, 0, &stats);
    if (st != TORX_OK) {
        free(c);
        return st;
    }
    c->bc_early_tail = &c->bc_early;
    st = torx_register(ctx, c->handler, torxc_handler, c);
    if (st == TORX_OK)
        st = agree_oversubscribed(c, attr->oversubscribed != 0);
    if (st != TORX_OK) {
        torx_register(ctx, c->handler, NULL, NULL);
        free(c);
        return st;
    }
    c->cn_max = (size_t)cn_max;
    const char *cn_env = getenv("TORX_COLL_CN_MAX");
    c->cn_max_set = cn_env && *cn_env;
    c->cn_fpsum_max =
        c->oversubscribed && !c->cn_max_set && c->cn_max > TORXC_CN_FPSUM_OVERSUBSCRIBED_MAX
            ? TORXC_CN_FPSUM_OVERSUBSCRIBED_MAX
            : c->cn_max;
    c->direct_reads = torxc_direct_init(c);
    c->verbose = (int)verbose;
    c->stats = (int)stats;

    if (c->verbose >= 1 && c->job_rank == 0) {
        char line[512];
        int len = snprintf(line, sizeof line, "torx coll: TORX_COLL=%s;", global_words[global]);
        for (int k = 0; k < TORX_COLL_NKINDS && len < (int)sizeof line; k++)
            len += snprintf(line + len, sizeof line - (size_t)len, " %s %s", kind_names[k],
                            c->choice[k] == TORXC_AUTO ? "auto" : alg_names[c->choice[k]]);
        if (len < (int)sizeof line)
            snprintf(line + len, sizeof line - (size_t)len,
                     "; collective network up to %zu B; %soversubscribed", c->cn_max,
                     c->oversubscribed ? "" : "not ");
        fprintf(stderr, "%s\n", line);
    }
    *out = c;
    return TORX_OK;
}

void torx_coll_finalize(torx_coll_t *c)
{
    if (c == NULL)
        return;
    torxc_nb_finalize(c);
    torxc_a2a_finalize(c);
    torxc_torus_finalize(c);
    torx_register(c->ctx, c->handler, NULL, NULL);
    if (c->stats) {
        char line[1024];
        int len = snprintf(line, sizeof line, "torx coll rank %d: calls", c->job_rank);
        int any = 0;
        for (int k = 0; k < TORX_COLL_NKINDS; k++)
            for (int a = 0; a < TORX_COLL_NALGS; a++)
                if (c->calls[k][a] && len < (int)sizeof line) {
                    len += snprintf(line + len, sizeof line - (size_t)len, " %s %" PRIu64,
                                    full_names[k][a], c->calls[k][a]);
                    any = 1;
                }
        for (int k = 0; k < TORX_COLL_NKINDS; k++)
            for (int a = 0; a < TORX_COLL_NALGS; a++)
                if (c->nb_calls[k][a] && len < (int)sizeof line) {
                    len += snprintf(line + len, sizeof line - (size_t)len, " %s %" PRIu64,
                                    torxc_nb_name(k, a), c->nb_calls[k][a]);
                    any = 1;
                }
        if (!any && len < (int)sizeof line)
            snprintf(line + len, sizeof line - (size_t)len, " none");
        if ((c->bc_sent_task || c->bc_sent_thread) && len < (int)sizeof line)
            len += snprintf(line + len, sizeof line - (size_t)len,
                            "; torus bcast line sends: task %" PRIu64 ", thread %" PRIu64,
                            c->bc_sent_task, c->bc_sent_thread);
        if (c->co_done && len < (int)sizeof line)
            len += snprintf(line + len, sizeof line - (size_t)len,
                            "; nonblocking collectives run by the communication thread %" PRIu64,
                            c->co_done);
        if ((c->fp_guess_held || c->fp_guess_missed) && len < (int)sizeof line)
            len +=
                snprintf(line + len, sizeof line - (size_t)len,
                         "; floating sums on the exponent guess: held %" PRIu64 ", missed %" PRIu64,
                         c->fp_guess_held, c->fp_guess_missed);
        if ((c->direct_calls || c->sent_calls) && len < (int)sizeof line)
            len += snprintf(line + len, sizeof line - (size_t)len,
                            "; long torus reductions and torus allgathers: by direct reads %" PRIu64
                            ", by parts sent %" PRIu64,
                            c->direct_calls, c->sent_calls);
        fprintf(stderr, "%s\n", line);
    }
    free(c);
}

/* ---- groups ---------------------------------------------------------------- */

/* A group's task list and its members' coordinates, shared by the groups
 * of one process that hold the same tasks at the same coordinates: on the
 * sim device every task of a job is in one process, and a split of 32,768
 * tasks would otherwise hold 32,768 copies of 256 KiB
 * (docs/collectives.md#memory). In a job of one task a process, a table
 * is shared only by a group and its duplicates. */
struct torxc_group_table {
    struct torxc_group_table *next;
    unsigned long refs; /* groups that use it; under tables_lock */
    int n;
    uint64_t hash;
    int *tasks;
    torx_coord_t *coord;
};

static TORXP_PROCESS_WIDE pthread_mutex_t tables_lock = PTHREAD_MUTEX_INITIALIZER;
static TORXP_PROCESS_WIDE struct torxc_group_table *tables;

static uint64_t tasks_hash(int n, const int *tasks)
{
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)n;
    for (int i = 0; i < n; i++)
        h = (h ^ (uint32_t)tasks[i]) * 0x100000001b3ull;
    return h;
}

/* Whether t holds tasks[0..n-1] at the coordinates map gives them. */
static int table_holds(const struct torxc_group_table *t, const torx_map_t *map, int n,
                       const int *tasks, uint64_t h)
{
    if (t->n != n || t->hash != h || memcmp(t->tasks, tasks, (size_t)n * sizeof *tasks) != 0)
        return 0;
    for (int i = 0; i < n; i++)
        if (!torx_coord_equal(t->coord[i], torx_map_coord(map, tasks[i])))
            return 0;
    return 1;
}

static int int_cmp(const void *a, const void *b)
{
    const int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Why tasks[0..n-1] are not all ranks of the job (recorded), or TORX_OK. */
static torx_status_t check_ranges(const torx_coll_t *c, int n, const int *tasks)
{
    for (int i = 0; i < n; i++)
        if (tasks[i] < 0 || tasks[i] >= c->job_size)
            return torxp_error(TORX_ERR_INVAL,
                               "torx: torx_coll_group_create: task %d (index %d) is out of range",
                               tasks[i], i);
    return TORX_OK;
}

/* Why tasks[0..n-1] are not distinct (recorded), or TORX_OK. In O(n)
 * memory, whatever the job's size: a sorted copy. */
static torx_status_t check_distinct(int n, const int *tasks)
{
    int *sorted = malloc((size_t)n * sizeof *sorted);
    if (sorted == NULL)
        return torxp_error(TORX_ERR_NOMEM, "torx: torx_coll_group_create: out of memory");
    memcpy(sorted, tasks, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, int_cmp);
    int dup = -1;
    for (int i = 1; i < n && dup < 0; i++)
        if (sorted[i] == sorted[i - 1])
            dup = sorted[i];
    free(sorted);
    if (dup < 0)
        return TORX_OK;
    int at = 0;
    while (tasks[at] != dup)
        at++;
    while (tasks[++at] != dup)
        ;
    return torxp_error(TORX_ERR_INVAL,
                       "torx: torx_coll_group_create: task %d (index %d) is repeated", dup, at);
}

/* The table of tasks[0..n-1] under c's map, with a reference taken: the
 * one another group of this process made with the same tasks at the same
 * coordinates, or a new one. Only a new table's tasks are checked (a
 * table is shared only once checked): the check's sorted copy, made by
 * every task of a simulated job, fragmented its heap by 27 KiB a task at
 * 4,096 tasks. */
static torx_status_t table_get(const torx_coll_t *c, int n, const int *tasks,
                               struct torxc_group_table **out)
{
    const torx_status_t range = check_ranges(c, n, tasks);
    if (range != TORX_OK)
        return range;
    const torx_map_t *map = torx_ctx_map(c->ctx);
    const uint64_t h = tasks_hash(n, tasks);
    pthread_mutex_lock(&tables_lock);
    struct torxc_group_table *t = tables;
    while (t && !table_holds(t, map, n, tasks, h))
        t = t->next;
    if (t) {
        t->refs++;
        pthread_mutex_unlock(&tables_lock);
        *out = t;
        return TORX_OK;
    }
    pthread_mutex_unlock(&tables_lock);
    const torx_status_t bad = check_distinct(n, tasks);
    if (bad != TORX_OK)
        return bad;
    t = calloc(1, sizeof *t);
    if (t == NULL || (t->tasks = malloc((size_t)n * sizeof *t->tasks)) == NULL ||
        (t->coord = malloc((size_t)n * sizeof *t->coord)) == NULL) {
        if (t)
            free(t->tasks);
        free(t);
        return torxp_error(TORX_ERR_NOMEM, "torx: torx_coll_group_create: out of memory");
    }
    memcpy(t->tasks, tasks, (size_t)n * sizeof *tasks);
    for (int i = 0; i < n; i++)
        t->coord[i] = torx_map_coord(map, tasks[i]);
    t->n = n;
    t->hash = h;
    t->refs = 1;
    /* another thread may have added the same table meanwhile: a second
     * copy is harmless */
    pthread_mutex_lock(&tables_lock);
    t->next = tables;
    tables = t;
    pthread_mutex_unlock(&tables_lock);
    *out = t;
    return TORX_OK;
}

static void table_put(struct torxc_group_table *t)
{
    if (t == NULL)
        return;
    pthread_mutex_lock(&tables_lock);
    const unsigned long left = --t->refs;
    if (!left)
        for (struct torxc_group_table **pp = &tables; *pp; pp = &(*pp)->next)
            if (*pp == t) {
                *pp = t->next;
                break;
            }
    pthread_mutex_unlock(&tables_lock);
    if (!left) {
        free(t->tasks);
        free(t->coord);
        free(t);
    }
}

const torx_coord_t *torxc_group_coord(const torx_coll_group_t *g)
{
    return g->table ? g->table->coord : NULL;
}

torx_status_t torx_coll_group_create(torx_coll_t *c, uint32_t id, int n, const int *tasks, int me,
                                     torx_coll_group_t **out)
{
    if (c == NULL || out == NULL)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_coll_group_create: NULL argument");
    *out = NULL;
    if (n < 1 || n > c->job_size || me < 0 || me >= n)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_coll_group_create: %d tasks with me = %d (job of %d)", n, me,
                           c->job_size);
    if (tasks == NULL && n != c->job_size)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_coll_group_create: tasks NULL (the whole job) with %d "
                           "tasks, in a job of %d",
                           n, c->job_size);
    const int mine = tasks ? tasks[me] : me;
    if (mine != c->job_rank)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_coll_group_create: tasks[me = %d] is %d, not this task (%d)",
                           me, mine, c->job_rank);
    /* The job in rank order (MPI_COMM_WORLD and its duplicates) keeps no
     * table: member i is rank i. */
    int identity = n == c->job_size;
    for (int i = 0; tasks && identity && i < n; i++)
        identity = tasks[i] == i;
    torx_coll_group_t *g = calloc(1, sizeof *g);
    if (g == NULL)
        return torxp_error(TORX_ERR_NOMEM, "torx: torx_coll_group_create: out of memory");
    torx_status_t st = identity ? TORX_OK : table_get(c, n, tasks, &g->table);
    if (st != TORX_OK) {
        free(g);
        return st;
    }
    if (g->table)
        g->tasks = g->table->tasks;
    g->c = c;
    g->id = id;
    g->n = n;
    g->me = me;
    /* Distinct tasks, as many as the job has: every task, in some order. */
    g->all_tasks = n == c->job_size;
    g->last = "none";
    /* The members' addresses for collectives that read each other's
     * buffers, made now: a member short of memory at the call could not
     * take part in the exchange of addresses, and the others would wait. */
    if (torxc_direct_applies(g) &&
        (g->direct_addr = malloc((size_t)n * sizeof *g->direct_addr)) == NULL)
        st = torxp_error(TORX_ERR_NOMEM, "torx: torx_coll_group_create: out of memory");
    if (st == TORX_OK)
        st = torxc_torus_group_init(g);
    if (st == TORX_OK)
        torxc_cost_group_init(g);
    if (st != TORX_OK) {
        free(g->direct_addr);
        table_put(g->table);
        free(g);
        return st;
    }
    c->ngroups++;
    *out = g;
    return TORX_OK;
}

void torx_coll_group_free(torx_coll_group_t *g)
{
    if (g == NULL)
        return;
    torxc_nb_group_free(g);
    g->c->ngroups--;
    free(g->a2a_msgs);
    free(g->a2a_perm);
    free(g->a2a_descs);
    free(g->a2a_v);
    free(g->xchg);
    free(g->split);
    free(g->direct_addr);
    table_put(g->table);
    free(g);
}

const char *torx_coll_last_algorithm(const torx_coll_group_t *g)
{
    return g ? g->last : "none";
}

/* ---- selection --------------------------------------------------------------- */

/* Whether alg can run this call on this group. */
static int applies(const torx_coll_group_t *g, torx_coll_kind_t kind, torx_coll_alg_t alg,
                   size_t bytes, torx_coll_dtype_t dtype, torx_coll_op_t op)
{
    if (bytes == TORX_COLL_NONCONTIG)
        return 0;
    switch (alg) {
    case TORX_COLL_ALG_GI:
        return kind == TORX_COLL_BARRIER && g->all_tasks;
    case TORX_COLL_ALG_PACED:
        return kind == TORX_COLL_ALLTOALL || kind == TORX_COLL_ALLTOALLV || kind == TORX_COLL_BCAST;
    case TORX_COLL_ALG_TORUS:
        if (kind == TORX_COLL_BCAST)
            return torxc_torus_applies(g, bytes);
        if (kind == TORX_COLL_ALLREDUCE || kind == TORX_COLL_REDUCE)
            return g->n <= TORXC_EXCHANGE_MAX_TASKS && torxc_cn_reduces(dtype, op);
        if (kind == TORX_COLL_ALLGATHER)
            return bytes <= SIZE_MAX / (size_t)g->n;
        return 0;
    case TORX_COLL_ALG_CN:
        if (!g->all_tasks)
            return 0;
        if (kind == TORX_COLL_ALLREDUCE || kind == TORX_COLL_REDUCE)
            return torxc_cn_reduces(dtype, op);
        if (kind == TORX_COLL_ALLGATHER)
            return bytes <= SIZE_MAX / (size_t)g->n;
        return kind == TORX_COLL_BCAST;
    default:
        return 0;
    }
}

/* What auto runs on one host or hosts joined by a switch: the crossovers
 * measured there (bench/run-coll-bench.sh, docs/collectives.md#choosing),
 * where scheduling on shared cores, not the network, decides. */
static torx_coll_alg_t pick_on_hosts(const torx_coll_group_t *g, torx_coll_kind_t kind,
                                     size_t bytes, torx_coll_dtype_t dtype, torx_coll_op_t op)
{
    const torx_coll_t *c = g->c;
    switch (kind) {
    case TORX_COLL_BARRIER:
        return applies(g, kind, TORX_COLL_ALG_GI, 0, dtype, op) ? TORX_COLL_ALG_GI
                                                                : TORX_COLL_ALG_FALLBACK;
    case TORX_COLL_ALLREDUCE:
    case TORX_COLL_REDUCE:
        if (g->n <= TORXC_EXCHANGE_AUTO_TASKS && bytes <= TORXC_EXCHANGE_AUTO_BYTES &&
            applies(g, kind, TORX_COLL_ALG_TORUS, bytes, dtype, op))
            return TORX_COLL_ALG_TORUS;
        /* A reduce of tasks that outnumber the cores, in the collective
         * network's range: the exchange lets every member but the root
         * send its vector and leave, where a round keeps them all to its
         * end, and every member must be scheduled for the round to move.
         * 4 and 8 tasks on 2 cores, 8-256 B, both timing methods, three
         * runs: 0.34-1.19x Open MPI's time, where the round's ranged from
         * 0.27x to 2.6x; 0.24-1.26x the round's own (docs/collectives.md).
         * A TORX_COLL_CN_MAX that the user set keeps the network's range;
         * groups the network does not serve keep MPICH's binomial tree,
         * whose leaves leave early too (not measured against it). */
        const size_t cn_limit = torxc_is_fpsum(dtype, op) ? c->cn_fpsum_max : c->cn_max;
        if (bytes <= cn_limit && applies(g, kind, TORX_COLL_ALG_CN, bytes, dtype, op))
            return kind == TORX_COLL_REDUCE && c->oversubscribed && !c->cn_max_set &&
                           applies(g, kind, TORX_COLL_ALG_TORUS, bytes, dtype, op)
                       ? TORX_COLL_ALG_TORUS
                       : TORX_COLL_ALG_CN;
        /* Two tasks that read each other's buffers: the exchange up to
         * 8 KiB and the reads past it beat MPICH's algorithms over torx
         * at every size and type, one task per core: doubles of 2 / 8 /
         * 32 / 64 KiB 1.07-1.17 / 2.19-2.28 / 4.23-4.34 / 6.8 us against
         * 1.82-1.92 / 2.95-3.02 / 8.39-9.24 / 12.0-12.2 (int64 MAX and
         * float sums alike). */
        if (g->n == 2 && torxc_direct_applies(g) &&
            applies(g, kind, TORX_COLL_ALG_TORUS, bytes, dtype, op))
            return TORX_COLL_ALG_TORUS;
        /* A float sum of 2 tasks: MPICH's operator adds floats one at a
         * time, so its recursive doubling took 1.3-1.5x as long as for
         * doubles of the same bytes, while torx's exchange adds them
         * vectorized: 4 / 16 KiB 1.67 / 5.2 us against MPICH's 2.1 / 6.5
         * (doubles by MPICH's: 1.6 / 4.5). Up to where the whole-vector
         * exchange ends. */
        if (kind == TORX_COLL_ALLREDUCE && g->n == 2 && dtype == TORX_COLL_FLOAT &&
            op == TORX_COLL_SUM && bytes <= TORXC_EXCHANGE_MAX_BYTES &&
            applies(g, kind, TORX_COLL_ALG_TORUS, bytes, dtype, op))
            return TORX_COLL_ALG_TORUS;
        if (torxc_direct_applies(g)
                ? bytes >= TORXC_DIRECT_AUTO_BYTES
                : bytes >= TORXC_SPLIT_AUTO_BYTES && g->n <= TORXC_SPLIT_AUTO_TASKS)
            if (applies(g, kind, TORX_COLL_ALG_TORUS, bytes, dtype, op))
                return TORX_COLL_ALG_TORUS;
        return TORX_COLL_ALG_FALLBACK;
    case TORX_COLL_BCAST: {
        /* The collective network and the torus only when asked for: a
         * collective-network round ends when every task has entered it,
         * and the deposit bit moves 224 bytes a packet, while MPICH's bcast
         * over torx lets the root go as soon as its eager sends are out.
         * When tasks outnumber cores, each level of MPICH's tree waits for
         * its tasks to be scheduled in turn; in the paced bcast every
         * member waits on the root alone. At 6-8 tasks on 2 cores, 1000
         * calls a size, the paced bcast by eager and rendezvous blocks was
         * level with MPICH's tree at 2-8 KiB, 3-4x faster at 16 KiB (where
         * MPICH turns to scatter and allgather) and 1.3-1.6x past it, and
         * 10-30% slower up to 1 KiB; at 4 tasks (a tree of two levels)
         * MPICH's was level or faster at every size. Through the root's multi-reader staging area
         * it was faster than MPICH's tree at 8 tasks from 1 KiB and level at 512 B; at 4 tasks
         * level up to 16 KiB and 3-4x faster from 32 KiB
         * (docs/collectives.md). */
        if (!applies(g, kind, TORX_COLL_ALG_PACED, bytes, dtype, op))
            return TORX_COLL_ALG_FALLBACK;
        /* Two tasks on cores of their own, one packet: the root injects it
         * and returns, where MPICH's bcast goes through its tree and a
         * request on each side (8 B, 5 rounds: 0.23-0.44 against
         * 0.38-0.75 us back to back, 0.39-0.50 against 0.54-0.63 timed
         * alone). Oversubscribed, a root that returns at once only runs
         * ahead into the next call's wait. */
        if (!c->oversubscribed)
            return g->n == 2 && bytes <= TORXC_A2A_INJECT_MAX ? TORX_COLL_ALG_PACED
                                                              : TORX_COLL_ALG_FALLBACK;
        const int staged = torxc_staged_bcast_applies(g, bytes);
        if (g->n > TORXC_PACED_BCAST_MIN_TASKS)
            return staged || bytes >= TORXC_PACED_BCAST_MIN_BYTES ? TORX_COLL_ALG_PACED
                                                                  : TORX_COLL_ALG_FALLBACK;
        return g->n > 2 && staged && bytes >= TORXC_PACED_BCAST_SMALL_GROUP_BYTES
                   ? TORX_COLL_ALG_PACED
                   : TORX_COLL_ALG_FALLBACK;
    }
    case TORX_COLL_ALLGATHER:
        /* Not at 2 tasks: there MPICH's algorithm over torx (one message
         * each way) beat a collective-network round, 0.41 against 0.50 us
         * at 8-32 B; and the exchange's one injected packet each way beat
         * both: 8 / 64 / 200 B 0.47 / 0.65 / 0.66 us against MPICH's over
         * torx 0.66 / 0.77 / 0.84 (Open MPI 0.59 / 0.79 / 0.82). */
        if (g->n == 2 && bytes <= TORXC_A2A_INJECT_MAX &&
            applies(g, kind, TORX_COLL_ALG_TORUS, bytes, dtype, op))
            return TORX_COLL_ALG_TORUS;
        if (g->n > 2 && applies(g, kind, TORX_COLL_ALG_CN, bytes, dtype, op) &&
            bytes * (size_t)g->n <= c->cn_max)
            return TORX_COLL_ALG_CN;
        if (torxc_direct_applies(g) && bytes >= TORXC_DIRECT_ALLGATHER_AUTO_BYTES &&
            applies(g, kind, TORX_COLL_ALG_TORUS, bytes, dtype, op))
            return TORX_COLL_ALG_TORUS;
        return TORX_COLL_ALG_FALLBACK;
    case TORX_COLL_ALLTOALL:
    case TORX_COLL_ALLTOALLV:
        return applies(g, kind, TORX_COLL_ALG_PACED, bytes, dtype, op) ? TORX_COLL_ALG_PACED
                                                                       : TORX_COLL_ALG_FALLBACK;
    default:
        return TORX_COLL_ALG_FALLBACK;
    }
}

/* Says once per collective and power-of-two size (on the group's first
 * member) what auto chose and why: each candidate's estimate, or the
 * host's crossovers. */
static void explain(torx_coll_group_t *g, torx_coll_kind_t kind, size_t bytes,
                    const double *estimate, torx_coll_alg_t alg)
{
    torx_coll_t *c = g->c;
    int bucket = 0;
    while (bucket < 63 && bytes >> bucket)
        bucket++;
    if (c->verbose < 1 || g->me != 0 || (c->explained[kind] >> bucket & 1u))
        return;
    c->explained[kind] |= UINT64_C(1) << bucket;
    static const char *const nets[] = {"shm", "switched", "torus"};
    char line[512];
    int len = snprintf(line, sizeof line,
                       "torx coll: %s of %zu B on %d tasks (%s network):", kind_names[kind], bytes,
                       g->n, nets[c->net.kind % 3]);
    if (estimate == NULL) {
        len += snprintf(line + len, sizeof line - (size_t)len, " the host's crossovers");
    } else {
        for (int a = 0; a < TORX_COLL_NALGS && len < (int)sizeof line; a++)
            if (estimate[a] < INFINITY)
                len += snprintf(line + len, sizeof line - (size_t)len, " %s %.4g us", alg_names[a],
                                estimate[a] * 1e6);
    }
    if (len < (int)sizeof line)
        snprintf(line + len, sizeof line - (size_t)len, " -> %s", alg_names[alg]);
    fprintf(stderr, "%s\n", line);
}

/* What auto runs on a torus: the algorithm of least estimated time on the
 * device's network (coll_cost.c); a tie goes to torx's own. */
static torx_coll_alg_t pick_by_cost(torx_coll_group_t *g, torx_coll_kind_t kind, size_t bytes,
                                    torx_coll_dtype_t dtype, torx_coll_op_t op, double *estimate)
{
    static const torx_coll_alg_t order[] = {TORX_COLL_ALG_GI, TORX_COLL_ALG_CN, TORX_COLL_ALG_TORUS,
                                            TORX_COLL_ALG_PACED, TORX_COLL_ALG_FALLBACK};
    /* the two passes of the reproducible sum: a reduction's alone (a bcast
     * or allgather is handed a type and op by some callers, and moves bytes) */
    const int fpsum =
        (kind == TORX_COLL_ALLREDUCE || kind == TORX_COLL_REDUCE) && torxc_is_fpsum(dtype, op);
    torx_coll_alg_t best = TORX_COLL_ALG_FALLBACK;
    double least = INFINITY;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        const torx_coll_alg_t a = order[i];
        estimate[a] = INFINITY;
        if (a != TORX_COLL_ALG_FALLBACK &&
            (!(kind_algs[kind] & 1u << a) || !applies(g, kind, a, bytes, dtype, op)))
            continue;
        estimate[a] = torxc_cost(g, kind, a, bytes, fpsum);
        if (estimate[a] < least)
            least = estimate[a], best = a;
    }
    return best;
}

/* What auto runs. */
static torx_coll_alg_t pick(torx_coll_group_t *g, torx_coll_kind_t kind, size_t bytes,
                            torx_coll_dtype_t dtype, torx_coll_op_t op)
{
    if (g->n == 1)
        return TORX_COLL_ALG_FALLBACK; /* nothing to move: MPICH's local copy */
    if (bytes == TORX_COLL_NONCONTIG)
        return TORX_COLL_ALG_FALLBACK;
    /* The rules read only the call and what is fixed at init (the
     * network, the job's shape, the limits): a repeated call picks the
     * same, about 250 instructions sooner (callgrind, 8-byte allreduce). */
    struct torxc_picked *p = &g->picked[kind];
    if (p->set && p->bytes == bytes && p->dtype == (int)dtype && p->op == (int)op)
        return (torx_coll_alg_t)p->alg;
    torx_coll_alg_t alg;
    double estimate[TORX_COLL_NALGS];
    const int by_cost = g->c->net.kind == TORX_NET_TORUS;
    if (by_cost)
        alg = pick_by_cost(g, kind, bytes, dtype, op, estimate);
    else
        alg = pick_on_hosts(g, kind, bytes, dtype, op);
    if (g->c->verbose >= 1)
        explain(g, kind, bytes, by_cost ? estimate : NULL, alg);
    *p = (struct torxc_picked){
        .bytes = bytes, .dtype = (int)dtype, .op = (int)op, .alg = (int)alg, .set = 1};
    return alg;
}

torx_coll_alg_t torx_coll_select(torx_coll_group_t *g, torx_coll_kind_t kind, size_t bytes,
                                 torx_coll_dtype_t dtype, torx_coll_op_t op)
{
    if (g == NULL || (unsigned)kind >= TORX_COLL_NKINDS)
        return TORX_COLL_ALG_FALLBACK;
    torx_coll_t *c = g->c;
    int choice = c->choice[kind];
    torx_coll_alg_t alg;
    if (choice == TORXC_AUTO) {
        alg = pick(g, kind, bytes, dtype, op);
    } else if (choice == TORX_COLL_ALG_FALLBACK) {
        alg = TORX_COLL_ALG_FALLBACK;
    } else if (applies(g, kind, (torx_coll_alg_t)choice, bytes, dtype, op)) {
        alg = (torx_coll_alg_t)choice;
    } else {
        alg = TORX_COLL_ALG_FALLBACK;
        if (c->verbose >= 1 && !c->warned[kind]) {
            c->warned[kind] = 1;
            fprintf(stderr,
                    "torx coll rank %d: TORX_COLL_%s=%s does not apply to a %s of %zu B on %d "
                    "of %d tasks; running mpich's (said once)\n",
                    c->job_rank, kind_names[kind], alg_names[choice], kind_names[kind], bytes, g->n,
                    c->job_size);
        }
    }
    return torxc_counted(g, c->calls, c->bytes, kind, alg, bytes, full_names[kind][alg]);
}

int torx_coll_auto(const torx_coll_group_t *g, torx_coll_kind_t kind)
{
    return g && (unsigned)kind < TORX_COLL_NKINDS && g->c->choice[kind] == TORXC_AUTO;
}

/* ---- the calls ------------------------------------------------------------------- */

static torx_status_t not_applicable(const torx_coll_group_t *g, torx_coll_kind_t kind,
                                    torx_coll_alg_t alg)
{
    return torxp_error(
        TORX_ERR_INVAL, "torx: torx_coll_%s: algorithm %s does not apply (%d of %d tasks)",
        torx_coll_kind_name(kind), torx_coll_alg_name(alg), g ? g->n : 0, g ? g->c->job_size : 0);
}

torx_status_t torx_coll_barrier(torx_coll_group_t *g, torx_coll_alg_t alg)
{
    if (g == NULL || !applies(g, TORX_COLL_BARRIER, alg, 0, 0, 0))
        return not_applicable(g, TORX_COLL_BARRIER, alg);
    return torxc_gi_barrier(g);
}

torx_status_t torx_coll_bcast(torx_coll_group_t *g, torx_coll_alg_t alg, void *buf, size_t bytes,
                              int root)
{
    if (g == NULL || !applies(g, TORX_COLL_BCAST, alg, bytes, 0, 0))
        return not_applicable(g, TORX_COLL_BCAST, alg);
    if (root < 0 || root >= g->n || (bytes > 0 && buf == NULL))
        return torxp_error(TORX_ERR_INVAL, "torx: torx_coll_bcast: root %d of %d, buf %p", root,
                           g->n, buf);
    if (alg == TORX_COLL_ALG_TORUS)
        return torxc_torus_bcast(g, buf, bytes, root);
    if (alg == TORX_COLL_ALG_PACED)
        return bytes ? torxc_paced_bcast(g, buf, bytes, root) : TORX_OK;
    return torxc_cn_bcast(g, buf, bytes, root);
}

/* Whether alg applies to a reduction of count elements of dtype with op
 * on g (a vector whose size in bytes overflows never does). */
static int reduction_applies(const torx_coll_group_t *g, torx_coll_kind_t kind, torx_coll_alg_t alg,
                             size_t count, torx_coll_dtype_t dtype, torx_coll_op_t op)
{
    size_t es = torxc_dtype_size(dtype);
    return g != NULL && !(es && count > SIZE_MAX / es - 1) &&
           applies(g, kind, alg, count * es, dtype, op);
}

torx_status_t torx_coll_allreduce(torx_coll_group_t *g, torx_coll_alg_t alg, const void *in,
                                  void *out, size_t count, torx_coll_dtype_t dtype,
                                  torx_coll_op_t op)
{
    if (!reduction_applies(g, TORX_COLL_ALLREDUCE, alg, count, dtype, op))
        return not_applicable(g, TORX_COLL_ALLREDUCE, alg);
    if (count > 0 && out == NULL)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_coll_allreduce: out is NULL");
    if (alg == TORX_COLL_ALG_TORUS)
        return torxc_exchange_reduce(g, in ? in : out, out, count, dtype, op, -1);
    return torxc_cn_reduce(g, in ? in : out, out, count, dtype, op);
}

torx_status_t torx_coll_reduce(torx_coll_group_t *g, torx_coll_alg_t alg, const void *in, void *out,
                               size_t count, torx_coll_dtype_t dtype, torx_coll_op_t op, int root)
{
    if (!reduction_applies(g, TORX_COLL_REDUCE, alg, count, dtype, op))
        return not_applicable(g, TORX_COLL_REDUCE, alg);
    if (root < 0 || root >= g->n)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_coll_reduce: root %d of %d", root, g->n);
    int at_root = g->me == root;
    if (count > 0 && ((at_root && out == NULL) || (!at_root && in == NULL)))
        return torxp_error(TORX_ERR_INVAL, "torx: torx_coll_reduce: %s is NULL",
                           at_root ? "out (at the root)" : "in (off the root)");
    if (alg == TORX_COLL_ALG_TORUS)
        return torxc_exchange_reduce(g, in ? in : out, at_root ? out : NULL, count, dtype, op,
                                     root);
    return torxc_cn_reduce(g, in ? in : out, at_root ? out : NULL, count, dtype, op);
}

torx_status_t torx_coll_allgather(torx_coll_group_t *g, torx_coll_alg_t alg, const void *in,
                                  void *out, size_t bytes)
{
    if (g == NULL || !applies(g, TORX_COLL_ALLGATHER, alg, bytes, 0, 0))
        return not_applicable(g, TORX_COLL_ALLGATHER, alg);
    if (bytes > 0 && out == NULL)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_coll_allgather: out is NULL");
    if (alg == TORX_COLL_ALG_TORUS)
        return torxc_exchange_allgather(g, in, out, bytes);
    return torxc_cn_allgather(g, in, out, bytes);
}

torx_status_t torx_coll_alltoall(torx_coll_group_t *g, torx_coll_alg_t alg, const void *in,
                                 void *out, size_t bytes)
{
    if (g == NULL || !applies(g, TORX_COLL_ALLTOALL, alg, bytes, 0, 0))
        return not_applicable(g, TORX_COLL_ALLTOALL, alg);
    if (bytes > 0 && (in == NULL || out == NULL || bytes > SIZE_MAX / (size_t)g->n))
        return torxp_error(TORX_ERR_INVAL, "torx: torx_coll_alltoall: %zu bytes, in %p, out %p",
                           bytes, in, out);
    const size_t *v = torxc_uniform_counts(g, bytes);
    if (v == NULL)
        return torxp_error(TORX_ERR_NOMEM, "torx: torx_coll_alltoall: out of memory");
    const size_t n = (size_t)g->n;
    return torxc_paced_alltoallv(g, TORX_COLL_ALLTOALL, in, v, v + n, out, v, v + n);
}

const size_t *torxc_uniform_counts(torx_coll_group_t *g, size_t bytes)
{
    const size_t n = (size_t)g->n;
    if (g->a2a_v == NULL && (g->a2a_v = malloc(2 * n * sizeof(size_t))) == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        g->a2a_v[i] = bytes;
        g->a2a_v[n + i] = i * bytes;
    }
    return g->a2a_v;
}

torx_status_t torx_coll_alltoallv(torx_coll_group_t *g, torx_coll_alg_t alg, const void *in,
                                  const size_t *send_bytes, const size_t *send_displs, void *out,
                                  const size_t *recv_bytes, const size_t *recv_displs)
{
    if (g == NULL || !applies(g, TORX_COLL_ALLTOALLV, alg, 0, 0, 0))
        return not_applicable(g, TORX_COLL_ALLTOALLV, alg);
    if (!send_bytes || !send_displs || !recv_bytes || !recv_displs)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_coll_alltoallv: NULL counts");
    return torxc_paced_alltoallv(g, TORX_COLL_ALLTOALLV, in, send_bytes, send_displs, out,
                                 recv_bytes, recv_displs);
}
