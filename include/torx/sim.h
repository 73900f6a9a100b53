/* torx sim: running a message-layer program as every task of a job on a
 * modelled Blue Gene torus (docs/sim.md). Programs do not call
 * torx_sim_run_main themselves: the torx-sim launcher does, through
 * libtorx-simrun. A program may call torx_sim_compute. */
#ifndef TORX_SIM_H
#define TORX_SIM_H

#include <torx/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* NAME     torx_sim_run_main - run a program's main as every task of a simulated job
 * DESCRIPTION
 *   Runs main_fn(argc, argv, envp) as each of the TORX_SIM_TASKS tasks of a
 *   job on the sim device, each a SimGrid actor of this process, in
 *   simulated time, with the machine of TORX_SIM_MACHINE. Each task sees
 *   its own copy of the program's global variables. A task's torx_init with
 *   a NULL bootstrap joins the job. Returns when every task has returned
 *   from main_fn, or when TORX_SIM_TIME_LIMIT simulated seconds have passed.
 * RETURN VALUE
 *   0 when every task returned 0; 1 when some did not (each is named on
 *   stderr); 2 when the job could not start (a bad TORX_SIM_* value or
 *   machine file, named on stderr).
 * NOTES
 *   Only in a build with the sim device (configure found SimGrid).
 * SEE ALSO torx-sim(1), torx_init
 */
int torx_sim_run_main(int (*main_fn)(int, char **, char **), int argc, char **argv, char **envp);

/* NAME     torx_sim_compute - spend simulated time computing
 * DESCRIPTION
 *   In a task of a simulated job, charges seconds of computation to the
 *   calling task's core: its clock moves on by that much while the rest of
 *   the job (its node's communication thread included) runs. The program's
 *   own computation costs no simulated time otherwise, so a benchmark that
 *   overlaps communication with computation (bench/sim/sim_nbcoll) says
 *   how long its computation takes with this.
 * RETURN VALUE
 *   TORX_OK. TORX_ERR_UNSUPPORTED: not in a simulated job (or a build
 *   without the sim device): compute for real. TORX_ERR_INVAL: seconds is
 *   negative or not a number.
 * SEE ALSO torx-sim(1)
 */
torx_status_t torx_sim_compute(double seconds);

#ifdef __cplusplus
}
#endif

#endif /* TORX_SIM_H */
