/* torx job bootstrap: how the tasks of a job find each other.
 *
 * A bootstrap tells a task its rank and the job size, and offers two
 * collective, blocking operations used only at start-up: an allgather of
 * small fixed-size records and a barrier. Devices use it to agree on the
 * shared segment or the fabric addresses; nothing on the data path uses it.
 *
 * Two bootstraps come with libtorx:
 *  - PMI-1, for tasks started by hydra's mpiexec (PMI_FD, PMI_RANK,
 *    PMI_SIZE); without those variables the task is a singleton job of one.
 *  - fork, for tests and standalone programs that start their own tasks on
 *    one host.
 */
#ifndef TORX_BOOT_H
#define TORX_BOOT_H

#include <stddef.h>
#include <torx/status.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct torx_boot torx_boot_t;

struct torx_boot {
    int rank; /* 0 .. size-1 */
    int size; /* tasks in the job */
    /* Everyone contributes len bytes; all receives size*len bytes, rank order. */
    torx_status_t (*allgather)(torx_boot_t *boot, const void *mine, void *all, size_t len);
    torx_status_t (*barrier)(torx_boot_t *boot);
    /* Releases the bootstrap's resources; the job goes on. May be NULL. */
    void (*finalize)(torx_boot_t *boot);
    void *impl; /* bootstrap-private */
};

/* PMI-1 over the PMI_FD socket hydra passes; a singleton job when the PMI_*
 * variables are absent. Malformed PMI_* values give TORX_ERR_ENV. */
torx_status_t torx_boot_pmi_init(torx_boot_t *boot);

/* The unique name of this job (PMI kvsname, or a fork job's id), usable as a
 * key for per-job resources. Never NULL after a successful init. */
const char *torx_boot_job_id(const torx_boot_t *boot);

/* Entry point of one task of a fork job. Its return value is the task's exit
 * status (0 for success). */
typedef int (*torx_task_main_fn)(torx_boot_t *boot, void *arg);

/* Runs task_main in ntasks forked processes (ranks 0..ntasks-1) and waits
 * for all of them. The calling process is not a task. Returns 0 when every
 * task exited 0; otherwise the number of tasks that failed, were killed, or
 * were still running after timeout_s seconds (those are killed, so a wedged
 * job never hangs the caller). Each child dies with its parent. When
 * cpus_per_task > 0, task r is pinned to CPU (r * cpus_per_task) modulo the
 * CPUs available. */
int torx_boot_fork_run(int ntasks, torx_task_main_fn task_main, void *arg, double timeout_s,
                       int cpus_per_task);

#ifdef __cplusplus
}
#endif

#endif /* TORX_BOOT_H */
