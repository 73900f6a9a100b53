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

/* NAME     torx_boot_pmi_init - bootstrap from hydra's PMI-1
 * DESCRIPTION
 *   Fills *boot for a task started by hydra's mpiexec: PMI-1 over the
 *   PMI_FD socket (or a connection to PMI_PORT), with PMI_RANK and
 *   PMI_SIZE. Without any PMI_* variable the task is a singleton job (rank
 *   0 of 1). Every wait on the PMI server is bounded by TORX_BOOT_TIMEOUT
 *   (seconds, 1..86400, default 300). Release with boot->finalize.
 * RETURN VALUE
 *   TORX_OK. TORX_ERR_ENV: malformed or incomplete PMI_* variables, PMI_FD
 *   not open, a bad TORX_BOOT_TIMEOUT. TORX_ERR_PEER: the PMI server cannot
 *   be reached, closed the connection, answered badly or not in time.
 *   TORX_ERR_SYS: a socket call failed. TORX_ERR_INVAL: boot NULL.
 *   TORX_ERR_NOMEM: no memory.
 * SEE ALSO torx_boot_fork_run, torx_boot_job_id, torx_init
 */
torx_status_t torx_boot_pmi_init(torx_boot_t *boot);

/* NAME     torx_boot_job_id - the unique name of a job
 * DESCRIPTION
 *   The job's name, the same in every task: the PMI kvsname,
 *   "singleton-<pid>-<hex>", or a fork job's "fork-<pid>-<hex>". Usable as
 *   a key for per-job resources.
 * RETURN VALUE
 *   The name, valid until boot->finalize; never NULL after a successful
 *   init ("" for a boot that was never initialized).
 * SEE ALSO torx_boot_pmi_init, torx_boot_fork_run
 */
const char *torx_boot_job_id(const torx_boot_t *boot);

/* Entry point of one task of a fork job. Its return value is the task's exit
 * status (0 for success). */
typedef int (*torx_task_main_fn)(torx_boot_t *boot, void *arg);

/* NAME     torx_boot_fork_run - run a job of forked tasks on this host
 * DESCRIPTION
 *   Forks ntasks processes (ranks 0..ntasks-1), each running
 *   task_main(boot, arg) with a fork bootstrap valid during the call, and
 *   waits for all of them; the calling process is not a task. A task's
 *   return value is its exit status. Tasks still running after timeout_s
 *   seconds are killed, so a wedged job never hangs the caller; each child
 *   dies with its parent. When cpus_per_task > 0, task r is pinned to
 *   cpus_per_task CPUs from CPU (r * cpus_per_task) modulo the CPUs it may use.
 * RETURN VALUE
 *   0 when every task exited 0. > 0: the number of tasks that failed, were
 *   killed or timed out (each reported on stderr; torx_last_error sums up).
 *   < 0, a torx_status_t, when no job ran: TORX_ERR_INVAL (ntasks outside
 *   1..4096, task_main NULL, timeout_s not in (0, 1e7], cpus_per_task < 0),
 *   TORX_ERR_NOMEM, TORX_ERR_SYS (fork failed; the started tasks are killed).
 * NOTES
 *   stdio is flushed before forking and at each task's exit. The bootstrap's
 *   allgather takes at most 4096 bytes per task.
 * SEE ALSO torx_boot_pmi_init, torx_init
 */
int torx_boot_fork_run(int ntasks, torx_task_main_fn task_main, void *arg, double timeout_s,
                       int cpus_per_task);

#ifdef __cplusplus
}
#endif

#endif /* TORX_BOOT_H */
