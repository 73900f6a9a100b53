/* Bulk transfer for the shm device: set-up and probing (the start-up
 * probe of cross-memory attach, Yama's PR_SET_PTRACER, torx_bulk_cost's
 * timing) and fini (shm_bulk.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* process_vm_readv */
#endif

#include "shm_bulk.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* Under Yama ptrace_scope 1 a peer that has not yet run its
 * PR_SET_PTRACER call refuses our probe; give it this long. */
#define BULK_YAMA_RETRY_MS 200

/* The mean of this task's measurement and peer's, once peer has published
 * one: both ends of a pair then answer the same, so a choice made on it at
 * either end (TORX_RZV_DATA=auto) is the same choice. One task's 1 MiB
 * timing ranged 174-337% between starts on one VM, around the line the
 * message layer draws at 200, and a pair that disagreed staged one
 * direction and took bulk gets the other. */
unsigned torxp_shm_bulk_cost(const torx_pkt_dev_t *dev, torx_coord_t peer)
{
    const torxp_shm_dev_t *d = (const torxp_shm_dev_t *)dev;
    if (!d->bulk_cost || !torx_coord_in_shape(dev->shape, peer))
        return d->bulk_cost;
    const unsigned theirs =
        __atomic_load_n(&d->tasks[torxp_shm_bulk_peer_index(d, peer)].bulk_cost, __ATOMIC_RELAXED);
    return theirs ? (d->bulk_cost + theirs + 1) / 2 : d->bulk_cost;
}

/* ---- Set-up ------------------------------------------------------------------------ */

/* torx_bulk_cost: a copy of COST_BYTES by process_vm_readv from this task
 * itself (the same kernel path as from a peer: every page pinned, then
 * copied) against a memcpy of the same buffers, the best of COST_TRIES
 * each, so that a preempted or not yet steady try does not count. The
 * first few copies of fresh buffers run up to 3x slow: over 16 MPI starts
 * on one VM the figure ranged 137-468% at 3 tries and 254-509% at 12, and
 * a pair on each side of the line at 200 moved its rendezvous data at
 * 17-19 or 38-51 GB/s both ways at 64 KiB. 1 MiB: past the caches that hold one core's copies, as
 * the messages that take a bulk get are; the whole measurement takes about 1.5 ms once per task. */
#define COST_BYTES ((size_t)1 << 20)
#define COST_TRIES 12

static unsigned bulk_measure_cost(void)
{
    uint8_t *a = malloc(COST_BYTES), *b = malloc(COST_BYTES);
    unsigned pct = 0;
    if (!a || !b)
        goto out;
    memset(a, 1, COST_BYTES);
    memset(b, 2, COST_BYTES);
    double best_copy = 0, best_cma = 0;
    const pid_t self = getpid();
    for (int i = 0; i < COST_TRIES; i++) {
        double t0 = torxp_mono_s();
        memcpy(b, a, COST_BYTES);
        const double copy = torxp_mono_s() - t0;
        /* the copy must happen: b is read below */
        const struct iovec l = {b, COST_BYTES}, r = {a, COST_BYTES};
        t0 = torxp_mono_s();
        const ssize_t got = process_vm_readv(self, &l, 1, &r, 1, 0);
        const double cma = torxp_mono_s() - t0;
        if (got != (ssize_t)COST_BYTES)
            goto out;
        if (i == 0 || copy < best_copy)
            best_copy = copy;
        if (i == 0 || cma < best_cma)
            best_cma = cma;
    }
    if (best_copy > 0 && b[COST_BYTES - 1] == 1) {
        const double p = 100 * best_cma / best_copy;
        pct = p < 1 ? 1 : p > 100000 ? 100000 : (unsigned)p;
    }
out:
    free(a);
    free(b);
    return pct;
}

/* Yama's ptrace_scope, or 0 when Yama is absent. */
static int bulk_yama_scope(void)
{
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    int scope = 0;
    if (f) {
        if (fscanf(f, "%d", &scope) != 1)
            scope = 0;
        fclose(f);
    }
    return scope;
}

/* Reads a peer's probe word with process_vm_readv. Returns true when it
 * works; otherwise why[] says what failed and *err holds the errno. */
static bool bulk_probe(const torxp_shm_dev_t *d, char *why, size_t why_len, int *err,
                       unsigned *probed)
{
    unsigned peer = d->self_index;
    for (unsigned k = 1; k < d->nslots; k++) {
        unsigned i = (d->self_index + k) % d->nslots;
        if (__atomic_load_n(&d->tasks[i].state, __ATOMIC_ACQUIRE) == TORXP_SHM_TASK_ATTACHED) {
            peer = i;
            break;
        }
    }
    *probed = peer;
    const torxp_shm_task_t *t = &d->tasks[peer];
    if (!t->probe_word) {
        snprintf(why, why_len, "task pid %d published no probe word", (int)t->pid);
        *err = EINVAL;
        return false;
    }
    const int yama = bulk_yama_scope();
    const uint64_t start = torxp_mono_ns();
    for (;;) {
        uint64_t word = 0;
        struct iovec l = {&word, sizeof word};
        struct iovec r = {(void *)(uintptr_t)t->probe_word, sizeof word};
        ssize_t got = process_vm_readv(t->pid, &l, 1, &r, 1, 0);
        if (got == (ssize_t)sizeof word && word == TORXP_SHM_PROBE_VALUE)
            return true;
        if (got == (ssize_t)sizeof word) {
            snprintf(why, why_len, "process_vm_readv read 0x%llx, not the probe value 0x%llx",
                     (unsigned long long)word, (unsigned long long)TORXP_SHM_PROBE_VALUE);
            *err = EIO;
            return false;
        }
        *err = got < 0 ? errno : EIO;
        snprintf(why, why_len, "process_vm_readv: %s", got < 0 ? strerror(*err) : "short read");
        /* Under Yama scope 1 the peer may not have run its PR_SET_PTRACER
         * yet; it does so at the start of its own set-up. */
        const uint64_t ms = (torxp_mono_ns() - start) / 1000000;
        if (*err != EPERM || yama != 1 || peer == d->self_index || ms >= BULK_YAMA_RETRY_MS)
            return false;
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
}

/* Why the ptracer permission: under Yama's ptrace_scope 1 a process may
 * read another's memory with process_vm_readv only if it may ptrace it, that
 * is, if it is an ancestor or the pid the target named with PR_SET_PTRACER.
 * Our readers are the other tasks on this host, siblings under the launcher,
 * so cross-memory attach needs the grant; nothing else in torx does, and it
 * is given only when the bulk path may use it. At scope 0 (or without Yama)
 * nothing is needed; at 2 and 3 no grant helps, the probe fails and bulk
 * data streams through the FIFOs. PR_SET_PTRACER names one pid: with one
 * other task on the host that is the narrowest grant the kernel has; with
 * more, PR_SET_PTRACER_ANY is the only form that covers them all. Peers that
 * probe before the grant is in place retry (bulk_probe). */
static void bulk_allow_readers(torxp_shm_dev_t *d, int yama)
{
    if (yama != 1)
        return;
    unsigned others = 0;
    pid_t only = 0;
    for (unsigned i = 0; i < d->nslots; i++)
        if (i != d->self_index &&
            __atomic_load_n(&d->tasks[i].state, __ATOMIC_ACQUIRE) == TORXP_SHM_TASK_ATTACHED) {
            others++;
            only = (pid_t)d->tasks[i].pid;
        }
    if (others == 0)
        return;
    const unsigned long who = others == 1 ? (unsigned long)only : PR_SET_PTRACER_ANY;
    if (prctl(PR_SET_PTRACER, who, 0, 0, 0) == -1)
        torxp_log(&d->base, 1, "prctl(PR_SET_PTRACER, %s): %s",
                  others == 1 ? "the one other task" : "ANY", strerror(errno));
    else
        torxp_log(&d->base, 2, "Yama ptrace_scope 1: ptracer permission given to %s%d%s",
                  others == 1 ? "pid " : "", others == 1 ? (int)only : (int)others,
                  others == 1 ? "" : " tasks (PR_SET_PTRACER_ANY)");
}

torx_status_t torxp_shm_bulk_setup(torxp_shm_dev_t *d, int bulk_mode, long share_min, long cost)
{
    /* Every task helps the others' shared gets, whatever its own setting. */
    d->share = torxp_shm_at(d, d->seg->share_off);

    d->serve = torxp_calloc(1, sizeof *d->serve);
    if (!d->serve)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for the bulk transfer state");
    d->serve->tail = &d->serve->jobs;
    d->serve->free_op = BULK_NO_SLOT;

    if (bulk_mode == TORXP_BULK_FIFO) {
        d->bulk_cma = 0;
        torxp_log(&d->base, 1, "bulk path: fifo (copy through the torus FIFOs; TORX_BULK=fifo)");
        return TORX_OK;
    }
    const int yama = bulk_yama_scope();
    bulk_allow_readers(d, yama);
    char why[160];
    int err = 0;
    unsigned probed;
    if (bulk_probe(d, why, sizeof why, &err, &probed)) {
        d->bulk_cma = 1;
        /* More tasks than cores: the owner may not be running, and a piece
         * it claimed would keep the reader waiting for a time slice. */
        const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        d->share_min = cpus > 0 && d->base.size > cpus ? 0 : (uint64_t)share_min;
        if (d->share_min)
            torxp_log(&d->base, 1,
                      "bulk path: cma (process_vm_readv single copy; gets of %llu bytes or more "
                      "shared with the owner, TORX_BULK_SHARE_MIN)",
                      (unsigned long long)d->share_min);
        else
            torxp_log(&d->base, 1, "bulk path: cma (process_vm_readv single copy%s)",
                      share_min ? "; gets not shared: more tasks than cores" : "");
        /* Not measured with more tasks than cores: every task's copies
         * would time the others' time slices. */
        d->bulk_cost = cost                              ? (unsigned)cost
                       : cpus > 0 && d->base.size > cpus ? 0
                                                         : bulk_measure_cost();
        __atomic_store_n(&d->tasks[d->self_index].bulk_cost, d->bulk_cost, __ATOMIC_RELAXED);
        if (cost)
            torxp_log(&d->base, 1, "bulk path: torx_bulk_cost %u%% (TORX_BULK_COST)", d->bulk_cost);
        else if (d->bulk_cost)
            torxp_log(&d->base, 1,
                      "bulk path: a 1 MiB process_vm_readv takes %u%% of a 1 MiB memcpy's "
                      "time (torx_bulk_cost)",
                      d->bulk_cost);
        return TORX_OK;
    }
    if (bulk_mode == TORXP_BULK_CMA) {
        const torxp_shm_task_t *t = &d->tasks[probed];
        torxp_shm_bulk_fini(d);
        return torxp_error(TORX_ERR_UNSUPPORTED,
                           "torx: TORX_BULK=cma, but cross-memory attach is forbidden (probe of "
                           "task rank %d pid %d: %s); unset TORX_BULK or set TORX_BULK=fifo",
                           (int)t->rank, (int)t->pid, why);
    }
    d->bulk_cma = 0;
    /* Said once, at TORX_VERBOSE=1: a fallback that works, not a fault
     * (containers often forbid these calls). */
    torxp_log(&d->base, 1, "cross-memory attach forbidden (%s%s), bulk transfers use FIFO copy",
              why, yama >= 2 ? "; Yama ptrace_scope is 2 or more" : "");
    torxp_log(&d->base, 1, "bulk path: fifo (copy through the torus FIFOs)");
    return TORX_OK;
}

void torxp_shm_bulk_fini(torxp_shm_dev_t *d)
{
    struct torxp_shm_serve *s = d->serve;
    if (!s)
        return;
    if (d->shared_gets || d->bytes_helped)
        torxp_log(&d->base, 2,
                  "bulk: %llu gets shared, %llu of their bytes written by the owner; %llu bytes "
                  "written for others' gets",
                  (unsigned long long)d->shared_gets, (unsigned long long)d->bytes_written_for_us,
                  (unsigned long long)d->bytes_helped);
    /* In-flight operations are abandoned (torx_pkt_close): their
     * torx_bulk_t may be gone already, so they are not touched. */
    while (s->jobs) {
        torxp_shm_bulk_job_t *j = s->jobs;
        s->jobs = j->next;
        free(j);
    }
    d->bulk_jobs = 0;
    free(s->ops);
    free(s);
    d->serve = NULL;
}
