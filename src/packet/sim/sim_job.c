/* The sim device's job: SimGrid's engine and one actor per task
 * (docs/sim.md#how-a-job-runs).
 *
 * A job is ntasks actors of this process. Each runs either a test's task
 * function (torx_boot_fork_run under TORX_DEVICE=sim) or a whole program's
 * main (torx-sim). Actors are SimGrid's cooperative contexts: one runs at a
 * time, and only a blocking call of the simulation (a sleep, a condition
 * wait) lets another run. Every such call goes through this file, so that
 * when an actor resumes its task's private state is put back:
 *  - libtorx's per-task state (torx_last_error, the TORX_VERBOSE cache):
 *    each actor has its own, returned by the task-state hook;
 *  - a program's own globals, under torx-sim: the writable part of the
 *    executable's data (.data and .bss, not RELRO) is swapped in, one copy
 *    per task, only when the task that resumes is not the one whose copy is
 *    in place.
 *
 * Simulated time passes only in sleeps: a charge (compute time on the
 * actor's core) is owed until the actor next does something others can see,
 * then slept off (torxp_sim_sync). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "sim.h"

#include <torx/sim.h>

#include <simgrid/engine.h>
#include <simgrid/host.h>

#include <errno.h>
#include <limits.h>
#include <link.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct torxp_sim_job {
    char job_id[48]; /* first: torx_boot_job_id reads it from impl */
    int ntasks;
    torxp_sim_config_t config;
    torxp_sim_actor_t *actors; /* the tasks' main actors, by rank */
    /* what each task runs */
    torx_task_main_fn task_main;
    void *task_arg;
    int (*prog_main)(int, char **, char **);
    int argc;
    char **argv, **envp;
    int *status; /* by rank: the task's return value; -1 until it returns */
    int finished, aborted;
    double t0; /* SimGrid's clock when the job started */
    /* the bootstrap's collectives: a generation-counted rendezvous */
    int boot_arrived;
    int vote_failed, vote_result;
    uint64_t boot_gen;
    unsigned char *boot_buf;
    size_t boot_len;
    /* the program's private data (torx-sim) */
    struct data_part {
        unsigned char *at;
        size_t len;
    } part[2];
    size_t seg_len;
    unsigned char *seg_saves; /* ntasks copies */
    int seg_owner;
    torxp_sim_net_t *net;
    torxp_sim_net_t *net_retired;
    /* The horizon: a min-heap of every task's and thread's next wake
     * (actor_wakes_at), its root the earliest. Slot r is task r's actor,
     * ntasks + r its thread's. */
    double *wake_at; /* by slot */
    int *heap;       /* slots, heap-ordered on wake_at */
    int *heap_pos;   /* by slot: its index in heap */
};

/* Process-wide: never swapped with a task's data (TORXP_PROCESS_WIDE). */
static TORXP_PROCESS_WIDE torxp_sim_job_t *running_job;
static TORXP_PROCESS_WIDE sg_host_t the_host;
static TORXP_PROCESS_WIDE int engine_started;
static TORXP_PROCESS_WIDE size_t stack_bytes = 128 * 1024;

/* ---- per-actor state ----------------------------------------------------------- */

torxp_sim_actor_t *torxp_sim_self(void)
{
    if (!running_job)
        return NULL;
    return sg_actor_self_get_data();
}

int torxp_sim_job_running(void)
{
    return running_job != NULL;
}

static torxp_task_state_t *sim_task_state(void)
{
    torxp_sim_actor_t *a = torxp_sim_self();
    return a ? &a->state : NULL;
}

/* Each job's clock starts at zero, whatever jobs this process ran before:
 * the same job gives the same times, bit for bit. */
double torxp_sim_now(const torxp_sim_actor_t *a)
{
    return a ? simgrid_get_clock() - a->job->t0 + a->owed : 0;
}

const torxp_sim_config_t *torxp_sim_config(const torxp_sim_job_t *job)
{
    return &job->config;
}

torxp_sim_net_t **torxp_sim_job_net(torxp_sim_job_t *job)
{
    return &job->net;
}

int torxp_sim_job_size(const torxp_sim_job_t *job)
{
    return job->ntasks;
}

double torxp_sim_job_now(const torxp_sim_job_t *job)
{
    return simgrid_get_clock() - job->t0;
}

torxp_sim_net_t **torxp_sim_job_retired(torxp_sim_job_t *job)
{
    return &job->net_retired;
}

/* ---- private program data ------------------------------------------------------ */

static void save_data(torxp_sim_job_t *job, int rank)
{
    unsigned char *to = job->seg_saves + (size_t)rank * job->seg_len;
    memcpy(to, job->part[0].at, job->part[0].len);
    if (job->part[1].len)
        memcpy(to + job->part[0].len, job->part[1].at, job->part[1].len);
}

static void load_data(torxp_sim_job_t *job, int rank)
{
    const unsigned char *from = job->seg_saves + (size_t)rank * job->seg_len;
    memcpy(job->part[0].at, from, job->part[0].len);
    if (job->part[1].len)
        memcpy(job->part[1].at, from + job->part[0].len, job->part[1].len);
}

void torxp_sim_resumed(torxp_sim_actor_t *a)
{
    torxp_sim_job_t *job = a->job;
    if (!job->seg_len || job->seg_owner == a->rank)
        return;
    save_data(job, job->seg_owner);
    load_data(job, a->rank);
    job->seg_owner = a->rank;
}

void *torxp_sim_task_addr(torxp_sim_job_t *job, int rank, void *ptr)
{
    if (!job->seg_len || rank == job->seg_owner)
        return ptr;
    unsigned char *p = ptr, *save = job->seg_saves + (size_t)rank * job->seg_len;
    if (p >= job->part[0].at && p < job->part[0].at + job->part[0].len)
        return save + (p - job->part[0].at);
    if (p >= job->part[1].at && p < job->part[1].at + job->part[1].len)
        return save + job->part[0].len + (p - job->part[1].at);
    return ptr;
}

struct seg_find {
    uintptr_t lo, hi;
};

/* The executable's writable data less its RELRO part (read-only once
 * relocated): the first object dl_iterate_phdr reports. */
static int find_data(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct seg_find *f = arg;
    uintptr_t lo = 0, hi = 0, relro_hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        if (p->p_type == PT_LOAD && (p->p_flags & PF_W)) {
            lo = info->dlpi_addr + p->p_vaddr;
            hi = lo + p->p_memsz;
        } else if (p->p_type == PT_GNU_RELRO) {
            relro_hi = info->dlpi_addr + p->p_vaddr + p->p_memsz;
        }
    }
    if (relro_hi > lo && relro_hi <= hi)
        lo = relro_hi;
    f->lo = lo;
    f->hi = hi;
    return 1; /* the executable only */
}

/* keep_lo..keep_hi: libtorx's own process-wide variables (its
 * torx_process section, which libtorx's sim_module.c names: this module
 * has a section of that name of its own). When libtorx is linked into the
 * executable the section sits inside the data this swaps, and is left out
 * of it; else it lies outside. */
static torx_status_t privatize(torxp_sim_job_t *job, const char *keep_lo_p, const char *keep_hi_p)
{
    struct seg_find f = {0, 0};
    dl_iterate_phdr(find_data, &f);
    if (f.hi <= f.lo)
        return TORX_OK;
    const uintptr_t keep_lo = (uintptr_t)keep_lo_p, keep_hi = (uintptr_t)keep_hi_p;
    if (keep_lo && keep_hi > keep_lo && keep_lo >= f.lo && keep_hi <= f.hi) {
        job->part[0] = (struct data_part){(unsigned char *)f.lo, keep_lo - f.lo};
        job->part[1] = (struct data_part){(unsigned char *)keep_hi, f.hi - keep_hi};
    } else {
        job->part[0] = (struct data_part){(unsigned char *)f.lo, f.hi - f.lo};
    }
    job->seg_len = job->part[0].len + job->part[1].len;
    job->seg_saves = torxp_malloc((size_t)job->ntasks * job->seg_len);
    if (!job->seg_saves)
        return torxp_error(TORX_ERR_NOMEM,
                           "torx: sim: no memory for %d copies of the program's %zu bytes of "
                           "data",
                           job->ntasks, job->seg_len);
    for (int r = 0; r < job->ntasks; r++)
        save_data(job, r);
    job->seg_owner = 0;
    return TORX_OK;
}

/* ---- the horizon ----------------------------------------------------------------- */

/* No actor of the job acts before the horizon: the network's daemon
 * processes the events due before it without waking at each
 * (docs/sim.md#the-network-model). Each actor's entry is when it next
 * runs: -inf while it runs or may run now, the end of its sleep, the limit
 * of its park (+inf: none, or the actor is gone). */
static void heap_put(torxp_sim_job_t *job, int i, int slot)
{
    job->heap[i] = slot;
    job->heap_pos[slot] = i;
}

static void actor_wakes_at(torxp_sim_actor_t *a, double at)
{
    torxp_sim_job_t *job = a->job;
    const int slot = a->rank + (a->is_helper ? job->ntasks : 0);
    if (job->wake_at[slot] == at)
        return;
    const int n = 2 * job->ntasks;
    job->wake_at[slot] = at;
    int i = job->heap_pos[slot];
    while (i > 0 && job->wake_at[job->heap[(i - 1) / 2]] > at) {
        heap_put(job, i, job->heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && job->wake_at[job->heap[c + 1]] < job->wake_at[job->heap[c]])
            c++;
        if (!(job->wake_at[job->heap[c]] < at))
            break;
        heap_put(job, i, job->heap[c]);
        i = c;
    }
    heap_put(job, i, slot);
}

double torxp_sim_job_horizon(const torxp_sim_job_t *job)
{
    return job->wake_at[job->heap[0]];
}

/* 0 when out of memory (run_job says so). */
static int horizon_init(torxp_sim_job_t *job)
{
    const size_t n = 2 * (size_t)job->ntasks;
    job->wake_at = torxp_malloc(n * sizeof *job->wake_at);
    job->heap = torxp_malloc(n * sizeof *job->heap);
    job->heap_pos = torxp_malloc(n * sizeof *job->heap_pos);
    if (!job->wake_at || !job->heap || !job->heap_pos)
        return 0;
    for (size_t i = 0; i < n; i++) {
        job->wake_at[i] = INFINITY; /* not started: +inf is a valid heap */
        heap_put(job, (int)i, (int)i);
    }
    return 1;
}

/* ---- blocking ------------------------------------------------------------------ */

/* The actor blocks until at (+inf: until woken, or for good): its entry in
 * the horizon, then the network run ahead to the new horizon. */
static void blocks_until(torxp_sim_actor_t *a, double at)
{
    actor_wakes_at(a, at);
    torxp_sim_net_blocking(a->job);
}

void torxp_sim_sleep(torxp_sim_actor_t *a, double s)
{
    if (s > 0) {
        blocks_until(a, torxp_sim_job_now(a->job) + s);
        sg_actor_sleep_for(s);
        actor_wakes_at(a, -INFINITY);
        torxp_sim_resumed(a);
    }
}

void torxp_sim_sync(torxp_sim_actor_t *a)
{
    if (a->owed > 0) {
        const double s = a->owed;
        a->owed = 0;
        torxp_sim_sleep(a, s);
    }
}

/* A wake sets wake_pending, and releases the semaphore only of an actor
 * already asleep on it (parked), once: a wake that comes while the actor
 * runs is kept by the flag, and the semaphore never holds a stale release. */
int torxp_sim_park(torxp_sim_actor_t *a, double s)
{
    int woken = 1;
    if (!a->wake_pending) {
        /* Before it parks, the actor runs the network ahead, which may wake
         * the daemon: a simcall, inside which a wake may come (unpark). */
        a->blocking = 1;
        blocks_until(a, s < 0 ? INFINITY : torxp_sim_job_now(a->job) + s);
        a->blocking = 0;
    }
    if (!a->wake_pending) {
        a->parked = 1; /* no simcall between this and the sleep */
        if (s < 0) {
            sg_sem_acquire(a->park);
        } else if (sg_sem_acquire_timeout(a->park, s)) {
            woken = 0;
            if (!a->parked)
                sg_sem_acquire(a->park); /* a wake after the timeout: take its release */
        }
        a->parked = 0;
    }
    actor_wakes_at(a, -INFINITY);
    a->wake_pending = 0;
    torxp_sim_resumed(a);
    return woken;
}

/* The release is a simcall: other actors may run inside it and swap their
 * program data in, so the caller takes its own back (torxp_sim_resumed). */
static void unpark(torxp_sim_actor_t *a)
{
    if (!a)
        return;
    a->wake_pending = 1;
    if (a->blocking) /* between its horizon entry and its park: it runs on now */
        actor_wakes_at(a, -INFINITY);
    if (a->parked) {
        a->parked = 0;
        actor_wakes_at(a, -INFINITY);
        sg_sem_release(a->park);
        torxp_sim_actor_t *self = torxp_sim_self();
        if (self)
            torxp_sim_resumed(self);
    }
}

void torxp_sim_wake_task(torxp_sim_job_t *job, int rank)
{
    unpark(&job->actors[rank]);
    unpark(job->actors[rank].helper);
}

void torxp_sim_wake_main(torxp_sim_job_t *job, int rank)
{
    unpark(&job->actors[rank]);
}

static void park_init(torxp_sim_actor_t *a)
{
    a->park = sg_sem_init(0);
}

static void park_destroy(torxp_sim_actor_t *a)
{
    if (a->park)
        sg_sem_destroy(a->park);
}

/* ---- the bootstrap --------------------------------------------------------------- */

/* Every task of the job comes here; the last one in closes the round (the
 * vote's count with it) and wakes the rest. */
static void meet(torxp_sim_job_t *job, torxp_sim_actor_t *a)
{
    const uint64_t gen = job->boot_gen;
    if (++job->boot_arrived == job->ntasks) {
        job->boot_arrived = 0;
        job->vote_result = job->vote_failed;
        job->vote_failed = 0;
        job->boot_gen++;
        for (int r = 0; r < job->ntasks; r++)
            unpark(&job->actors[r]);
    } else {
        while (job->boot_gen == gen)
            torxp_sim_park(a, -1);
    }
}

/* Every task of the job reaches this; the last one in releases the rest.
 * With a buffer: each task's len bytes, gathered in rank order. */
static torx_status_t boot_collective(torx_boot_t *boot, const void *mine, void *all, size_t len)
{
    torxp_sim_job_t *job = boot->impl;
    torxp_sim_actor_t *a = torxp_sim_self();
    if (job->boot_arrived == 0) {
        free(job->boot_buf);
        job->boot_buf = len ? torxp_malloc((size_t)job->ntasks * len) : NULL;
        job->boot_len = len;
        if (len && !job->boot_buf)
            return torxp_error(TORX_ERR_NOMEM, "torx: sim bootstrap: no memory for an allgather");
    }
    if (len != job->boot_len)
        return torxp_error(TORX_ERR_PROTO,
                           "torx: sim bootstrap: rank %d gathers %zu bytes where others gather "
                           "%zu",
                           boot->rank, len, job->boot_len);
    if (len)
        memcpy(job->boot_buf + (size_t)boot->rank * len, mine, len);
    meet(job, a);
    if (len)
        memcpy(all, job->boot_buf, (size_t)job->ntasks * len);
    return TORX_OK;
}

int torxp_sim_vote(torxp_sim_job_t *job, int ok)
{
    job->vote_failed += !ok;
    meet(job, torxp_sim_self());
    return job->vote_result;
}

static torx_status_t boot_allgather(torx_boot_t *boot, const void *mine, void *all, size_t len)
{
    if (len && (!mine || !all))
        return torxp_error(TORX_ERR_INVAL, "torx: sim bootstrap: allgather of NULL buffers");
    return boot_collective(boot, mine, all, len);
}

static torx_status_t boot_barrier(torx_boot_t *boot)
{
    return boot_collective(boot, NULL, NULL, 0);
}

torx_status_t torxp_sim_job_boot_init(torx_boot_t *boot)
{
    torxp_sim_actor_t *a = torxp_sim_self();
    if (!boot)
        return torxp_error(TORX_ERR_INVAL, "torx: sim bootstrap: boot is NULL");
    if (!a || a->is_helper)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: the sim bootstrap serves a task's own actor only");
    *boot = (torx_boot_t){.rank = a->rank,
                          .size = a->job->ntasks,
                          .allgather = boot_allgather,
                          .barrier = boot_barrier,
                          .finalize = NULL,
                          .impl = a->job};
    return TORX_OK;
}

/* ---- actors ---------------------------------------------------------------------- */

static void task_actor(int argc, char **argv)
{
    (void)argc, (void)argv;
    torxp_sim_actor_t *a = sg_actor_self_get_data();
    torxp_sim_job_t *job = a->job;
    torxp_sim_resumed(a);
    int rc;
    if (job->prog_main) {
        rc = job->prog_main(job->argc, job->argv, job->envp);
    } else {
        torx_boot_t boot;
        torxp_sim_job_boot_init(&boot);
        rc = job->task_main(&boot, job->task_arg);
    }
    job->status[a->rank] = rc;
    job->finished++;
    blocks_until(a, INFINITY);
    if (rc != 0 && !job->aborted) { /* as mpiexec does: one failed task ends the job */
        job->aborted = 1;
        fprintf(stderr, "torx-sim: task %d failed (status %d): ending the job\n", a->rank, rc);
        /* its own thread too: left running, it polled on until the time
         * limit (an hour of simulated time, minutes of wall time) */
        if (a->helper)
            sg_actor_kill(a->helper->self);
        for (int r = 0; r < job->ntasks; r++)
            if (job->status[r] == -1 && r != a->rank) {
                if (job->actors[r].helper)
                    sg_actor_kill(job->actors[r].helper->self);
                sg_actor_kill(job->actors[r].self);
            }
    }
}

/* Ends a job that runs past TORX_SIM_TIME_LIMIT simulated seconds: its
 * tasks are killed and reported. A daemon: it dies with the last task. */
static void watchdog_actor(int argc, char **argv)
{
    (void)argc, (void)argv;
    torxp_sim_job_t *job = sg_actor_self_get_data();
    sg_actor_daemonize(sg_actor_self());
    sg_actor_sleep_for(job->config.time_limit);
    for (int r = 0; r < job->ntasks; r++)
        if (job->status[r] == -1) {
            fprintf(stderr,
                    "torx-sim: task %d did not finish within %.0f simulated seconds "
                    "(TORX_SIM_TIME_LIMIT)\n",
                    r, job->config.time_limit);
            sg_actor_kill(job->actors[r].self);
        }
}

static void helper_actor(int argc, char **argv)
{
    (void)argc, (void)argv;
    torxp_sim_actor_t *a = sg_actor_self_get_data();
    torxp_sim_resumed(a);
    a->ret = a->fn(a->arg);
    a->ended = 1;
    torxp_sim_actor_t *task = &a->job->actors[a->rank];
    if (task->joining) /* its task runs on as it ends */
        actor_wakes_at(task, -INFINITY);
    blocks_until(a, INFINITY);
}

static sg_actor_t start_actor(torxp_sim_actor_t *a, const char *name, void (*code)(int, char **))
{
    sg_actor_t actor = sg_actor_init(name, the_host);
    sg_actor_set_data(actor, a);
    sg_actor_set_stacksize(actor, (unsigned)stack_bytes);
    a->self = actor;
    actor_wakes_at(a, -INFINITY);
    sg_actor_ref(actor);
    sg_actor_start(actor, code, 0, NULL);
    return actor;
}

torx_status_t torxp_sim_thread_start(torxp_thread_t *t, void *(*fn)(void *), void *arg)
{
    torxp_sim_actor_t *self = torxp_sim_self();
    if (!self)
        return torxp_error(TORX_ERR_INVAL, "torx: sim: a thread started outside a sim task");
    torxp_sim_actor_t *a = torxp_calloc(1, sizeof *a);
    if (!a)
        return torxp_error(TORX_ERR_NOMEM, "torx: sim: no memory for a thread");
    *a = (torxp_sim_actor_t){
        .job = self->job, .rank = self->rank, .is_helper = 1, .fn = fn, .arg = arg};
    a->state.verbose = self->state.verbose;
    park_init(a);
    self->helper = a;
    char name[32];
    snprintf(name, sizeof name, "comm-%d", self->rank);
    start_actor(a, name, helper_actor);
    torxp_sim_resumed(self); /* as after any simcall (unpark) */
    t->dev_thread = a;
    return TORX_OK;
}

void torxp_sim_thread_join(torxp_thread_t *t)
{
    torxp_sim_actor_t *a = t->dev_thread;
    torxp_sim_actor_t *self = torxp_sim_self();
    /* The task acts next when its thread ends, and the thread says so
     * (helper_actor): until then the network may run ahead of it. */
    if (self && self->helper == a && !a->ended) {
        self->joining = 1;
        blocks_until(self, INFINITY);
    }
    sg_actor_join(a->self, -1);
    if (self) {
        self->joining = 0;
        actor_wakes_at(self, -INFINITY);
        torxp_sim_resumed(self);
    }
    sg_actor_unref(a->self);
    if (self)
        self->helper = NULL;
    park_destroy(a);
    free(a);
    t->dev_thread = NULL;
}

/* ---- settings -------------------------------------------------------------------- */

static torx_status_t read_config(torxp_sim_config_t *c)
{
    const char *machine = getenv("TORX_SIM_MACHINE");
    torx_status_t rc = torxp_sim_machine_load(machine && *machine ? machine : "bgl", &c->machine);
    if (rc != TORX_OK)
        return rc;
    long v;
    if ((rc = torx_env_int("TORX_SIM_MESH", 0, 1, 0, &v)) != TORX_OK)
        return rc;
    c->mesh = (int)v;
    if ((rc = torx_env_int("TORX_SIM_SEED", 0, LONG_MAX, 1, &v)) != TORX_OK)
        return rc;
    c->seed = (uint64_t)v;
    if ((rc = torx_env_int("TORX_SIM_TIME_LIMIT", 0, 1000000000L, 3600, &v)) != TORX_OK)
        return rc;
    c->time_limit = (double)v;
    if ((rc = torx_env_int("TORX_SIM_STACK_KIB", 16, 1048576, 128, &v)) != TORX_OK)
        return rc;
    stack_bytes = (size_t)v * 1024;
    const char *links = getenv("TORX_SIM_LINKS");
    if (links && *links) {
        if (strlen(links) >= sizeof c->links_path)
            return torxp_error(TORX_ERR_INVAL,
                               "torx: sim: TORX_SIM_LINKS: a path of %zu bytes (at most %zu)",
                               strlen(links), sizeof c->links_path - 1);
        c->links_out = fopen(links, "w");
        if (!c->links_out)
            return torxp_error(TORX_ERR_SYS, "torx: sim: TORX_SIM_LINKS=%s: %s", links,
                               strerror(errno));
        strcpy(c->links_path, links);
        fputs("x,y,z,dim,way,packets,busy_us,blocked_us,first_us,last_us\n", c->links_out);
    }
    return TORX_OK;
}

/* SimGrid's engine, once per process: one host holds every actor (time
 * passes in sleeps; the cores are modelled by charges, the network by
 * sim_net.c). */
static torx_status_t engine_start(void)
{
    if (engine_started)
        return TORX_OK;
    char tmpl[] = "/tmp/torx-sim-platform-XXXXXX";
    const int fd = mkstemp(tmpl);
    if (fd < 0)
        return torxp_error(TORX_ERR_SYS, "torx: sim: cannot create the platform file: %s",
                           strerror(errno));
    static const char platform[] =
        "<?xml version='1.0'?>\n"
        "<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
        "<platform version=\"4.1\"><zone id=\"torx\" routing=\"None\">"
        "<host id=\"machine\" speed=\"1Gf\"/></zone></platform>\n";
    const ssize_t n = write(fd, platform, sizeof platform - 1);
    close(fd);
    if (n != (ssize_t)(sizeof platform - 1)) {
        unlink(tmpl);
        return torxp_error(TORX_ERR_SYS, "torx: sim: cannot write the platform file %s", tmpl);
    }
    char stack[64];
    snprintf(stack, sizeof stack, "--cfg=contexts/stack-size:%zu", stack_bytes / 1024);
    /* guard-size 0: a guard page costs each actor two mappings, and Linux
     * stops at 65,530 (vm.max_map_count). */
    char precision[64];
    snprintf(precision, sizeof precision, "--cfg=surf/precision:%g", SIM_TIMING_PRECISION);
    char *args[] = {"torx-sim",
                    stack,
                    "--cfg=contexts/guard-size:0",
                    "--log=root.thres:critical",
                    "--cfg=exception/cutpath:1",
                    precision, /* its default, set so the horizon's margin holds */
                    NULL};
    int argc = 6;
    simgrid_init(&argc, args);
    simgrid_load_platform(tmpl);
    unlink(tmpl);
    the_host = sg_host_by_name("machine");
    torxp_set_task_state_hook(sim_task_state);
    engine_started = 1;
    return TORX_OK;
}

/* Runs a job to its end: the tasks' status in job->status. */
static int run_job(torxp_sim_job_t *job)
{
    static TORXP_PROCESS_WIDE unsigned jobs;
    snprintf(job->job_id, sizeof job->job_id, "sim-%ld-%u", (long)getpid(), jobs++);
    job->actors = torxp_calloc((size_t)job->ntasks, sizeof *job->actors);
    job->status = torxp_malloc((size_t)job->ntasks * sizeof *job->status);
    if (!job->actors || !job->status || !horizon_init(job)) {
        torxp_error(TORX_ERR_NOMEM, "torx: sim: no memory for %d tasks", job->ntasks);
        return -1;
    }
    /* Actor stacks and per-task state from the heap, never one mapping each
     * (vm.max_map_count). */
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    running_job = job;
    job->t0 = simgrid_get_clock();
    for (int r = 0; r < job->ntasks; r++) {
        torxp_sim_actor_t *a = &job->actors[r];
        *a = (torxp_sim_actor_t){.job = job, .rank = r};
        a->state.verbose = -2;
        park_init(a);
        job->status[r] = -1;
        char name[32];
        snprintf(name, sizeof name, "task-%d", r);
        start_actor(a, name, task_actor);
    }
    if (job->config.time_limit > 0) {
        sg_actor_t w = sg_actor_init("watchdog", the_host);
        sg_actor_set_data(w, job);
        sg_actor_start(w, watchdog_actor, 0, NULL);
    }
    simgrid_run();
    torxp_sim_net_job_end(job);
    int failed = 0;
    for (int r = 0; r < job->ntasks; r++)
        if (job->status[r] != 0)
            failed++;
    running_job = NULL;
    return failed;
}

/* Closes what read_config opened. */
static void config_close(torxp_sim_config_t *c)
{
    FILE *links = c->links_out;
    c->links_out = NULL;
    if (links && (ferror(links) | fclose(links)))
        fprintf(stderr, "torx-sim: TORX_SIM_LINKS=%s: could not write it\n", c->links_path);
}

static void job_free(torxp_sim_job_t *job)
{
    config_close(&job->config);
    if (job->actors)
        for (int r = 0; r < job->ntasks; r++)
            if (job->actors[r].self) {
                sg_actor_unref(job->actors[r].self);
                park_destroy(&job->actors[r]);
            }
    free(job->actors);
    free(job->status);
    free(job->wake_at);
    free(job->heap);
    free(job->heap_pos);
    free(job->boot_buf);
    free(job->seg_saves);
}

int torxp_sim_job_run_tasks(int ntasks, torx_task_main_fn task_main, void *arg)
{
    torxp_sim_job_t job = {.ntasks = ntasks, .task_main = task_main, .task_arg = arg};
    torx_status_t rc;
    if ((rc = read_config(&job.config)) != TORX_OK)
        return rc;
    if ((rc = engine_start()) != TORX_OK) {
        config_close(&job.config);
        return rc;
    }
    const int failed = run_job(&job);
    job_free(&job);
    return failed;
}

torx_status_t torxp_sim_job_compute(double seconds)
{
    torxp_sim_actor_t *a = torxp_sim_self();
    if (!a)
        return torxp_error(TORX_ERR_UNSUPPORTED, "torx: torx_sim_compute: not in a simulated job");
    if (!(seconds >= 0))
        return torxp_error(TORX_ERR_INVAL, "torx: torx_sim_compute: %g seconds", seconds);
    torxp_sim_charge_s(a, seconds);
    torxp_sim_sync(a);
    return TORX_OK;
}

int torxp_sim_job_run_main(int (*main_fn)(int, char **, char **), int argc, char **argv,
                           char **envp, const char *keep_lo, const char *keep_hi)
{
    long ntasks;
    torxp_sim_job_t job = {.prog_main = main_fn, .argc = argc, .argv = argv, .envp = envp};
    torx_status_t rc;
    if ((rc = torx_env_int("TORX_SIM_TASKS", 1, 1L << 22, 0, &ntasks)) != TORX_OK ||
        (rc = read_config(&job.config)) != TORX_OK) {
        fprintf(stderr, "torx-sim: %s\n", torx_last_error());
        return 2;
    }
    if (ntasks == 0) {
        fprintf(stderr, "torx-sim: TORX_SIM_TASKS is not set (start programs with torx-sim)\n");
        config_close(&job.config);
        return 2;
    }
    job.ntasks = (int)ntasks;
    if ((rc = engine_start()) != TORX_OK || (rc = privatize(&job, keep_lo, keep_hi)) != TORX_OK) {
        fprintf(stderr, "torx-sim: %s\n", torx_last_error());
        config_close(&job.config);
        return 2;
    }
    const int failed = run_job(&job);
    if (failed < 0)
        fprintf(stderr, "torx-sim: %s\n", torx_last_error());
    else if (failed)
        fprintf(stderr, "torx-sim: %d of %d tasks failed\n", failed, job.ntasks);
    job_free(&job);
    return failed ? 1 : 0;
}
