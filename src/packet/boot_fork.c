/* The fork bootstrap: the caller forks the tasks of a job on this host and
 * waits for them. Tasks meet in one anonymous MAP_SHARED region created
 * before the fork, so nothing is left behind in any namespace when the job
 * ends, however it ends.
 *
 * A bootstrap barrier must not hang when a peer is dead: the parent, which
 * reaps the tasks, records the first task that left the job in the shared
 * region and wakes the waiters, who then fail with TORX_ERR_PEER naming it.
 * The parent's timeout bounds everything else (a task stuck outside a
 * barrier), since it kills every task still running.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "pkt_internal.h"

#include <errno.h>
#include <hwloc.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdalign.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FORK_MAX_TASKS 4096
#define FORK_AG_MAX 4096 /* allgather record bytes per task */
#define FORK_JOB_ID_MAX 48
#define FORK_MAGIC 0x746f7278666f726bULL /* "torxfork" */
#define FORK_VERSION 1u
#define FORK_SPIN_YIELDS 32           /* sched_yield rounds before sleeping on the futex */
#define FORK_WAIT_SLICE_NS 100000000L /* re-check dead peers every 100 ms */

/* The shared region: this header, then pids[ntasks], lens[ntasks] and the
 * allgather slots (FORK_AG_MAX bytes per task), found by offset. */
typedef struct fork_shared {
    uint64_t magic;
    uint32_t version;
    uint32_t ntasks;
    uint64_t pids_off; /* int32_t[ntasks]: each task's pid, written by the parent */
    uint64_t lens_off; /* uint32_t[ntasks]: len passed to the current allgather */
    uint64_t ag_off;   /* ntasks slots of FORK_AG_MAX bytes */
    char job_id[FORK_JOB_ID_MAX];
    /* Barrier: arrivals in the current generation, and the generation
     * itself, which is also the futex word the waiters sleep on. Separate
     * lines: every arrival writes the first, waiters poll the second. */
    alignas(TORXP_CACHELINE) uint32_t arrived;
    alignas(TORXP_CACHELINE) uint32_t generation;
    /* Written only by the parent: the first task that left the job while
     * others may still wait for it. gone_rank/pid/status are published by
     * the release store of gone. */
    alignas(TORXP_CACHELINE) uint32_t gone;
    int32_t gone_rank;
    int32_t gone_pid;
    int32_t gone_status; /* waitpid status */
} fork_shared_t;

_Static_assert(sizeof(fork_shared_t) % TORXP_CACHELINE == 0, "header fills whole lines");

/* boot->impl of a fork task. job_id must stay the first member:
 * torx_boot_job_id() (boot_pmi.c) reads the NUL-terminated string at the
 * start of every bootstrap's impl. */
typedef struct fork_task {
    char job_id[FORK_JOB_ID_MAX];
    fork_shared_t *sh;
    pid_t parent;
    int finalized;
} fork_task_t;

static inline int32_t *sh_pids(fork_shared_t *sh)
{
    return (int32_t *)((char *)sh + sh->pids_off);
}

static inline uint32_t *sh_lens(fork_shared_t *sh)
{
    return (uint32_t *)((char *)sh + sh->lens_off);
}

static inline unsigned char *sh_slot(fork_shared_t *sh, int rank)
{
    return (unsigned char *)sh + sh->ag_off + (size_t)rank * FORK_AG_MAX;
}

/* Shared futex (no FUTEX_PRIVATE_FLAG): the waiters are separate processes
 * sharing the page. Errors (EAGAIN: the word changed; ETIMEDOUT; EINTR) all
 * mean "look again", which the caller does. */
static void futex_wait(uint32_t *word, uint32_t expected, long ns)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = ns};
    syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, NULL, 0);
}

static void futex_wake_all(uint32_t *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void describe_status(int status, char *buf, size_t len)
{
    if (WIFEXITED(status))
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "was killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(buf, len, "ended with wait status 0x%x", (unsigned)status);
}

static torx_status_t peer_gone_error(fork_task_t *ft, int rank, const char *what)
{
    fork_shared_t *sh = ft->sh;
    char how[96];
    describe_status(sh->gone_status, how, sizeof how);
    return torxp_error(TORX_ERR_PEER,
                       "torx: fork job %s: rank %d cannot finish the %s: rank %d (pid %d) %s "
                       "before joining it",
                       ft->job_id, rank, what, sh->gone_rank, sh->gone_pid, how);
}

static torx_status_t fork_barrier_named(torx_boot_t *boot, const char *what)
{
    fork_task_t *ft = boot->impl;
    if (!ft || ft->finalized)
        return torxp_error(TORX_ERR_INVAL, "torx: fork bootstrap %s after finalize", what);
    fork_shared_t *sh = ft->sh;
    /* The generation must be read before our arrival counts: once we have
     * arrived, the last arriver may bump it at any moment. The release half
     * of the RMW below keeps this load before it, so relaxed suffices; the
     * data comes with the acquire loads in the wait loop. */
    uint32_t gen = __atomic_load_n(&sh->generation, __ATOMIC_RELAXED);
    /* acq_rel: release publishes what this task wrote before the barrier
     * (allgather slots); acquire lets the last arriver see everyone's. */
    uint32_t before = __atomic_fetch_add(&sh->arrived, 1, __ATOMIC_ACQ_REL);
    if (before == (uint32_t)boot->size - 1) {
        /* Last to arrive. The reset is ordered before the release store of
         * the new generation, and nobody arrives for the next barrier
         * before acquiring that generation, so relaxed is enough. */
        __atomic_store_n(&sh->arrived, 0, __ATOMIC_RELAXED);
        /* release: everything the arrivals published (carried to us by the
         * acq_rel RMW chain on arrived) becomes visible to each waiter that
         * acquires the new generation. */
        __atomic_store_n(&sh->generation, gen + 1, __ATOMIC_RELEASE);
        futex_wake_all(&sh->generation);
        return TORX_OK;
    }
    for (unsigned round = 0;; round++) {
        if (__atomic_load_n(&sh->generation, __ATOMIC_ACQUIRE) != gen)
            return TORX_OK;
        /* acquire: pairs with the parent's release store of gone, so the
         * gone_* details read in the message are complete. */
        if (__atomic_load_n(&sh->gone, __ATOMIC_ACQUIRE)) {
            /* The barrier may have completed just before that task left
             * (it can only leave a completed barrier); look once more. */
            if (__atomic_load_n(&sh->generation, __ATOMIC_ACQUIRE) != gen)
                return TORX_OK;
            return peer_gone_error(ft, boot->rank, what);
        }
        if (getppid() != ft->parent)
            return torxp_error(TORX_ERR_PEER,
                               "torx: fork job %s: rank %d: the parent process (pid %d) is gone",
                               ft->job_id, boot->rank, (int)ft->parent);
        /* Oversubscribed (16 tasks on 2 cores): give the CPU away at once,
         * then sleep on the generation word, waking every 100 ms to look for
         * dead peers even if no wake-up comes. */
        if (round < FORK_SPIN_YIELDS)
            sched_yield();
        else
            futex_wait(&sh->generation, gen, FORK_WAIT_SLICE_NS);
    }
}

static torx_status_t fork_barrier(torx_boot_t *boot)
{
    return fork_barrier_named(boot, "barrier");
}

static torx_status_t fork_allgather(torx_boot_t *boot, const void *mine, void *all, size_t len)
{
    fork_task_t *ft = boot->impl;
    if (!ft || ft->finalized)
        return torxp_error(TORX_ERR_INVAL, "torx: fork bootstrap allgather after finalize");
    if (len > FORK_AG_MAX)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: fork bootstrap allgather: len=%zu exceeds the %d bytes per "
                           "task the fork bootstrap supports",
                           len, FORK_AG_MAX);
    if (len && (!mine || !all))
        return torxp_error(TORX_ERR_INVAL, "torx: fork bootstrap allgather: mine=%p all=%p", mine,
                           all);
    fork_shared_t *sh = ft->sh;
    /* Plain writes: the barrier's release/acquire publishes them. */
    sh_lens(sh)[boot->rank] = (uint32_t)len;
    if (len)
        memcpy(sh_slot(sh, boot->rank), mine, len);
    torx_status_t rc = fork_barrier_named(boot, "allgather");
    if (rc != TORX_OK)
        return rc;
    int bad = -1;
    for (int r = 0; r < boot->size && bad < 0; r++)
        if (sh_lens(sh)[r] != len)
            bad = r;
    uint32_t bad_len = bad >= 0 ? sh_lens(sh)[bad] : 0;
    if (bad < 0)
        for (int r = 0; r < boot->size; r++)
            memcpy((char *)all + (size_t)r * len, sh_slot(sh, r), len);
    /* Nobody may start the next allgather (overwriting its slot) before all
     * have copied this one out. */
    rc = fork_barrier_named(boot, "allgather");
    if (rc != TORX_OK)
        return rc;
    if (bad >= 0)
        return torxp_error(TORX_ERR_PROTO,
                           "torx: fork job %s: allgather record sizes differ: rank %d passed "
                           "len=%zu, rank %d passed len=%u",
                           ft->job_id, boot->rank, len, bad, bad_len);
    return TORX_OK;
}

static void fork_finalize(torx_boot_t *boot)
{
    fork_task_t *ft = boot->impl;
    if (ft)
        ft->finalized = 1; /* the mapping goes away when the task exits */
}

static void random_hex(char *buf, size_t len)
{
    snprintf(buf, len, "%016llx", (unsigned long long)torxp_random64());
}

/* CPUs this process may run on, in OS index order, for pinning. NULL (and a
 * warning) when hwloc cannot tell: pinning is an optimisation. */
typedef struct pin_plan {
    hwloc_topology_t topo;
    int *cpus;
    int ncpus;
} pin_plan_t;

static void pin_plan_init(pin_plan_t *p)
{
    *p = (pin_plan_t){0};
    hwloc_bitmap_t set = NULL;
    if (hwloc_topology_init(&p->topo) < 0) {
        torxp_log(NULL, 0, "warning: hwloc_topology_init failed (%s); tasks not pinned",
                  strerror(errno));
        p->topo = NULL;
        return;
    }
    if (hwloc_topology_load(p->topo) < 0) {
        torxp_log(NULL, 0, "warning: hwloc_topology_load failed (%s); tasks not pinned",
                  strerror(errno));
        goto fail;
    }
    set = hwloc_bitmap_dup(hwloc_topology_get_allowed_cpuset(p->topo));
    hwloc_bitmap_t bound = hwloc_bitmap_alloc();
    if (!set || !bound) {
        hwloc_bitmap_free(bound);
        goto fail;
    }
    /* Respect an inherited binding (taskset, a batch system's cpuset). */
    if (hwloc_get_cpubind(p->topo, bound, HWLOC_CPUBIND_PROCESS) == 0)
        hwloc_bitmap_and(set, set, bound);
    hwloc_bitmap_free(bound);
    int n = hwloc_bitmap_weight(set);
    if (n <= 0) {
        torxp_log(NULL, 0, "warning: hwloc found no usable CPU; tasks not pinned");
        goto fail;
    }
    p->cpus = torxp_malloc((size_t)n * sizeof *p->cpus);
    if (!p->cpus)
        goto fail;
    unsigned idx;
    hwloc_bitmap_foreach_begin(idx, set) {
        p->cpus[p->ncpus++] = (int)idx;
    }
    hwloc_bitmap_foreach_end();
    hwloc_bitmap_free(set);
    return;
fail:
    hwloc_bitmap_free(set);
    free(p->cpus);
    hwloc_topology_destroy(p->topo);
    *p = (pin_plan_t){0};
}

static void pin_plan_destroy(pin_plan_t *p)
{
    free(p->cpus);
    if (p->topo)
        hwloc_topology_destroy(p->topo);
    *p = (pin_plan_t){0};
}

/* In the child: task rank gets cpus_per_task consecutive CPUs of the plan,
 * starting at CPU (rank * cpus_per_task) modulo the CPUs available, so a
 * coprocessor-mode task keeps its second core for the communication thread. */
static void pin_task(const pin_plan_t *p, int rank, int cpus_per_task)
{
    if (!p->topo)
        return;
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (!set)
        return;
    for (int k = 0; k < cpus_per_task && k < p->ncpus; k++)
        hwloc_bitmap_set(set, (unsigned)p->cpus[((long)rank * cpus_per_task + k) % p->ncpus]);
    if (hwloc_set_cpubind(p->topo, set, HWLOC_CPUBIND_PROCESS) < 0) {
        char *str = NULL;
        hwloc_bitmap_list_asprintf(&str, set);
        torxp_log(NULL, 0,
                  "warning: rank %d: binding to CPUs %s failed (%s); running "
                  "unpinned",
                  rank, str ? str : "?", strerror(errno));
        free(str);
    }
    hwloc_bitmap_free(set);
}

static int exit_code_of(int rc)
{
    /* Keep every nonzero task result nonzero in the 8-bit exit status
     * (a negative torx_status_t -5 becomes 251). */
    int code = rc & 0xff;
    return rc != 0 && code == 0 ? 255 : code;
}

static void run_child(fork_shared_t *sh, int rank, int ntasks, pid_t parent,
                      torx_task_main_fn task_main, void *arg, const pin_plan_t *pin,
                      int cpus_per_task)
{
    /* Die with the parent; if it is already gone we missed the signal. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
        _exit(127);
    if (cpus_per_task > 0)
        pin_task(pin, rank, cpus_per_task);
    fork_task_t ft = {.sh = sh, .parent = parent};
    memcpy(ft.job_id, sh->job_id, sizeof ft.job_id);
    torx_boot_t boot = {
        .rank = rank,
        .size = ntasks,
        .allgather = fork_allgather,
        .barrier = fork_barrier,
        .finalize = fork_finalize,
        .impl = &ft,
    };
    int rc = task_main(&boot, arg);
    /* _exit skips stdio flushing; the task's printf output must not be lost. */
    fflush(NULL);
    _exit(exit_code_of(rc));
}

/* Parent: records a reaped task; returns 1 when it failed. */
static int reaped(fork_shared_t *sh, int rank, pid_t pid, int status, int nrunning)
{
    int failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (failed) {
        char how[96];
        describe_status(status, how, sizeof how);
        torxp_log(NULL, 0, "fork job %s: rank %d (pid %d) %s", sh->job_id, rank, (int)pid, how);
    }
    /* Tell the tasks still running that this one will never join another
     * barrier. Only the parent writes these, and only once. */
    if (nrunning > 0 && !__atomic_load_n(&sh->gone, __ATOMIC_RELAXED)) {
        sh->gone_rank = rank;
        sh->gone_pid = (int32_t)pid;
        sh->gone_status = status;
        /* release: publishes gone_* to the waiters' acquire load of gone. */
        __atomic_store_n(&sh->gone, 1, __ATOMIC_RELEASE);
        futex_wake_all(&sh->generation);
    }
    return failed;
}

int torx_boot_fork_run(int ntasks, torx_task_main_fn task_main, void *arg, double timeout_s,
                       int cpus_per_task)
{
    if (ntasks < 1 || ntasks > FORK_MAX_TASKS)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_boot_fork_run: ntasks=%d, must be 1..%d",
                           ntasks, FORK_MAX_TASKS);
    if (!task_main)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_boot_fork_run: task_main is NULL");
    if (!(timeout_s > 0 && timeout_s <= 1e7)) /* also rejects NaN */
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_boot_fork_run: timeout_s=%g, must be > 0 (seconds)",
                           timeout_s);
    if (cpus_per_task < 0)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_boot_fork_run: cpus_per_task=%d, must be >= 0",
                           cpus_per_task);

#ifdef TORX_HAVE_SIMGRID
    /* The tasks as actors of this process, in simulated time (docs/sim.md). */
    const char *device = getenv("TORX_DEVICE");
    if (device && !strcmp(device, "sim"))
        return torxp_sim_run_tasks(ntasks, task_main, arg);
#endif
    const size_t n = (size_t)ntasks;
    const size_t pids_off = sizeof(fork_shared_t);
    const size_t lens_off = pids_off + n * sizeof(int32_t);
    const size_t ag_off =
        (lens_off + n * sizeof(uint32_t) + TORXP_CACHELINE - 1) & ~(size_t)(TORXP_CACHELINE - 1);
    const size_t total = ag_off + n * FORK_AG_MAX;
    /* Anonymous and shared: inherited by every child, gone when the last
     * process unmaps it, nothing to unlink after a crash. */
    fork_shared_t *sh =
        mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return torxp_error(TORX_ERR_NOMEM,
                           "torx: torx_boot_fork_run: mmap of %zu shared bytes for %d tasks "
                           "failed: %s",
                           total, ntasks, strerror(errno));
    sh->magic = FORK_MAGIC;
    sh->version = FORK_VERSION;
    sh->ntasks = (uint32_t)ntasks;
    sh->pids_off = pids_off;
    sh->lens_off = lens_off;
    sh->ag_off = ag_off;
    sh->gone_rank = -1;
    const pid_t parent = getpid();
    char rnd[20];
    random_hex(rnd, sizeof rnd);
    snprintf(sh->job_id, sizeof sh->job_id, "fork-%d-%s", (int)parent, rnd);

    pin_plan_t pin = {0};
    if (cpus_per_task > 0)
        pin_plan_init(&pin);

    pid_t *pids = torxp_calloc(n, sizeof *pids);
    if (!pids) {
        pin_plan_destroy(&pin);
        munmap(sh, total);
        return torxp_error(TORX_ERR_NOMEM, "torx: torx_boot_fork_run: out of memory");
    }
    /* Buffered output would otherwise be written once per child too. */
    fflush(NULL);
    for (int r = 0; r < ntasks; r++) {
        pid_t pid = fork();
        if (pid == 0)
            run_child(sh, r, ntasks, parent, task_main, arg, &pin, cpus_per_task);
        if (pid < 0) {
            int err = errno;
            for (int k = 0; k < r; k++)
                kill(pids[k], SIGKILL);
            for (int k = 0; k < r; k++)
                while (waitpid(pids[k], NULL, 0) < 0 && errno == EINTR)
                    ;
            free(pids);
            pin_plan_destroy(&pin);
            munmap(sh, total);
            return torxp_error(TORX_ERR_SYS,
                               "torx: torx_boot_fork_run: fork of rank %d of %d failed: %s "
                               "(process limit? see ulimit -u)",
                               r, ntasks, strerror(err));
        }
        pids[r] = pid;
        /* Written before any task can fail, read only for messages. */
        sh_pids(sh)[r] = (int32_t)pid;
    }

    int running = ntasks, failures = 0, first_failed = -1;
    const double deadline = torxp_mono_s() + timeout_s;
    long sleep_ns = 1000000; /* 1 ms, backing off to 50 ms while nothing happens */
    while (running > 0) {
        int progressed = 0;
        for (int r = 0; r < ntasks; r++) {
            if (pids[r] <= 0)
                continue;
            int status;
            pid_t w = waitpid(pids[r], &status, WNOHANG);
            if (w == 0 || (w < 0 && errno == EINTR))
                continue;
            progressed = 1;
            running--;
            if (w < 0) {
                /* ECHILD: reaped elsewhere (SIGCHLD ignored?), result lost;
                 * count it as "exited with status 255". */
                torxp_log(NULL, 0,
                          "fork job %s: rank %d (pid %d): waitpid failed (%s); "
                          "counted as failed (is SIGCHLD ignored?)",
                          sh->job_id, r, (int)pids[r], strerror(errno));
                status = 0xff00;
            }
            if (reaped(sh, r, pids[r], status, running)) {
                failures++;
                if (first_failed < 0)
                    first_failed = r;
            }
            pids[r] = 0;
        }
        if (running == 0)
            break;
        double now = torxp_mono_s();
        if (now >= deadline) {
            for (int r = 0; r < ntasks; r++)
                if (pids[r] > 0)
                    kill(pids[r], SIGKILL);
            for (int r = 0; r < ntasks; r++) {
                if (pids[r] <= 0)
                    continue;
                while (waitpid(pids[r], NULL, 0) < 0 && errno == EINTR)
                    ;
                torxp_log(NULL, 0,
                          "fork job %s: rank %d (pid %d) still running after "
                          "%.1f s, killed (SIGKILL)",
                          sh->job_id, r, (int)pids[r], timeout_s);
                failures++;
                if (first_failed < 0)
                    first_failed = r;
                pids[r] = 0;
            }
            break;
        }
        if (progressed) {
            sleep_ns = 1000000;
            continue;
        }
        double left_ns = (deadline - now) * 1e9;
        long ns = (double)sleep_ns < left_ns ? sleep_ns : (long)left_ns + 1;
        struct timespec ts = {.tv_sec = ns / 1000000000L, .tv_nsec = ns % 1000000000L};
        nanosleep(&ts, NULL);
        if (sleep_ns < 50000000L)
            sleep_ns *= 2;
    }
    if (failures)
        torxp_error(TORX_ERR_PEER,
                    "torx: fork job %s: %d of %d tasks failed (first: rank %d); "
                    "see the messages above on stderr",
                    sh->job_id, failures, ntasks, first_failed);
    free(pids);
    pin_plan_destroy(&pin);
    munmap(sh, total);
    return failures;
}
