/* libtorx-simrun: what torx-sim preloads (docs/sim.md#how-a-job-runs).
 *
 * It takes the program's main from __libc_start_main and, when a libtorx
 * in the program has claimed the run (torx_simrun_claim, called by
 * libtorx's constructor when TORX_SIM_TASKS is set), runs main as every
 * task of a simulated job instead of once. A process without libtorx (a
 * shell wrapper on the way to the program) runs as usual. Linked against
 * nothing of torx: the program's own libtorx, shared or static, does the
 * work. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef int (*main_fn)(int, char **, char **);
typedef int (*run_fn)(main_fn, int, char **, char **);
typedef int (*start_fn)(main_fn, int, char **, void (*)(void), void (*)(void), void (*)(void),
                        void *);

void torx_simrun_claim(run_fn run);
int __libc_start_main(main_fn main, int argc, char **argv, void (*init)(void), void (*fini)(void),
                      void (*rtld_fini)(void), void *stack_end);

static main_fn program_main;
static run_fn claimed;

/* Called by libtorx's constructor, before main. */
__attribute__((visibility("default"))) void torx_simrun_claim(run_fn run)
{
    if (!claimed)
        claimed = run;
}

static int simrun_main(int argc, char **argv, char **envp)
{
    if (!claimed)
        return program_main(argc, argv, envp);
    return claimed(program_main, argc, argv, envp);
}

__attribute__((visibility("default"))) int __libc_start_main(main_fn main, int argc, char **argv,
                                                             void (*init)(void), void (*fini)(void),
                                                             void (*rtld_fini)(void),
                                                             void *stack_end)
{
    start_fn real = (start_fn)dlsym(RTLD_NEXT, "__libc_start_main");
    if (!real) {
        fprintf(stderr, "torx-sim: cannot find __libc_start_main: %s\n", dlerror());
        exit(127);
    }
    program_main = main;
    return real(simrun_main, argc, argv, init, fini, rtld_fini, stack_end);
}
