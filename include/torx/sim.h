/* torx sim: running a message-layer program as every task of a job on a
 * modelled Blue Gene torus (docs/sim.md). Programs do not call this
 * themselves: the torx-sim launcher does, through libtorx-simrun. */
#ifndef TORX_SIM_H
#define TORX_SIM_H

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

#ifdef __cplusplus
}
#endif

#endif /* TORX_SIM_H */
