/* The sim device as libtorx calls it: through a module, torx-dev-sim.so
 * (docs/packet-layer.md#device-modules), loaded only by a process that runs
 * a simulated job. No other process loads SimGrid and the libraries it
 * links (ns-3, Boost), which cost every MPI process 26 ms and tens of MiB
 * at start-up when libtorx linked them.
 *
 * A job is running only once its process has loaded the module (torx-sim's
 * torx_sim_run_main, or torx_boot_fork_run under TORX_DEVICE=sim), so the
 * calls that serve a running job ask for no load. This file is libtorx's;
 * the rest of src/packet/sim/ but sim_machine.c is the module's. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_DEFAULT */
#endif
#include "../pkt_internal.h"

#include <dlfcn.h>
#include <stdio.h>
#include <torx/sim.h>

/* Process-wide: a simulated task's copy of libtorx's data must see it. */
static TORXP_PROCESS_WIDE const torxp_sim_module_t *sim;

static const torxp_sim_module_t *loaded(void)
{
    return __atomic_load_n(&sim, __ATOMIC_ACQUIRE);
}

static torx_status_t load(void)
{
    if (loaded())
        return TORX_OK;
    const torxp_module_t *m;
    const torx_status_t rc = torxp_module_load("sim", &m);
    if (rc == TORX_OK)
        __atomic_store_n(&sim, (const torxp_sim_module_t *)m->ops, __ATOMIC_RELEASE);
    return rc;
}

static torx_status_t not_running(const char *what)
{
    return torxp_error(TORX_ERR_UNSUPPORTED,
                       "torx: %s runs only inside a simulated job: start the program with "
                       "torx-sim (docs/sim.md)",
                       what);
}

torx_status_t torxp_sim_open(const torx_pkt_attr_t *attr, const torxp_env_t *env,
                             torx_pkt_dev_t **dev)
{
    const torxp_sim_module_t *s = loaded();
    return s ? s->open(attr, env, dev) : not_running("TORX_DEVICE=sim");
}

int torxp_sim_run_tasks(int ntasks, torx_task_main_fn task_main, void *arg)
{
    const torx_status_t rc = load();
    return rc == TORX_OK ? loaded()->run_tasks(ntasks, task_main, arg) : rc;
}

int torxp_sim_running(void)
{
    const torxp_sim_module_t *s = loaded();
    return s && s->running();
}

torx_status_t torxp_sim_boot_init(torx_boot_t *boot)
{
    const torxp_sim_module_t *s = loaded();
    return s ? s->boot_init(boot) : not_running("the sim bootstrap");
}

torx_status_t torx_sim_compute(double seconds)
{
    const torxp_sim_module_t *s = loaded();
    return s ? s->compute(seconds) : not_running("torx_sim_compute");
}

/* This libtorx's process-wide section: the executable's when libtorx is
 * linked into it. The module cannot name it (the linker gives each object
 * the bounds of its own section of that name). */
extern char __start_torx_process[] __attribute__((weak));
extern char __stop_torx_process[] __attribute__((weak));

int torx_sim_run_main(int (*main_fn)(int, char **, char **), int argc, char **argv, char **envp)
{
    if (load() != TORX_OK) {
        fprintf(stderr, "torx-sim: %s\n", torx_last_error());
        return 2;
    }
    return loaded()->run_main(main_fn, argc, argv, envp, __start_torx_process, __stop_torx_process);
}

/* Under torx-sim (TORX_SIM_TASKS set), tell the preloaded libtorx-simrun
 * that this libtorx runs the program's tasks. */
__attribute__((constructor)) static void claim_the_run(void)
{
    if (!getenv("TORX_SIM_TASKS"))
        return;
    void (*claim)(int (*)(int (*)(int, char **, char **), int, char **, char **));
    *(void **)&claim = dlsym(RTLD_DEFAULT, "torx_simrun_claim");
    if (claim)
        claim(torx_sim_run_main);
}
