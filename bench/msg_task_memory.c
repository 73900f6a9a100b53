/* msg_task_memory: the heap bytes libtorx takes per task, by job size.
 *
 * For each job size N (fork bootstrap, shm device): a job that opens only
 * the device, then a job that runs torx_init and exchanges one one-packet
 * message with each of the task's torus neighbours (bench/task_memory.h
 * says how each figure is taken). Per N, over the tasks (max and mean):
 *   device     torx_pkt_open's private tables (not its shared segment)
 *   init       torx_init, everything it allocates
 *   msg        init - device: the message layer and the rank map
 *   map        the map's tables (shared by the tasks of one process on
 *              the sim device; each fork task has its own)
 *   msg_excl_map  msg - map: what each task pays on its own
 *   exchange   the growth over the exchange with the neighbours
 * What the message layer costs a task of a large job is msg_excl_map +
 * exchange; it must not grow with N.
 *
 * Usage: msg_task_memory [N ...]   (default: 2 64 512; N in 1..4096)
 * Output: "# " lines for people, then one line per N:
 *   "mem tasks=N device=.. init=.. msg=.. map=.. msg_excl_map=.. exchange=..
 *    neighbours=.." (the tasks' maxima), and "memavg tasks=N ..." (means).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <torx/msg.h>

#include "task_memory.h"

#include <stdio.h>
#include <stdlib.h>

enum { F_DEVICE, F_INIT, F_MSG, F_MAP, F_EXCL, F_EXCHANGE, F_NEIGHBOURS, NFIELDS };
static const char *const field_name[NFIELDS] = {"device",       "init",     "msg",       "map",
                                                "msg_excl_map", "exchange", "neighbours"};

static long long field(const task_mem_t *t, int f)
{
    switch (f) {
    case F_DEVICE:
        return t->device;
    case F_INIT:
        return t->init;
    case F_MSG:
        return t->init - t->device;
    case F_MAP:
        return t->map;
    case F_EXCL:
        return t->init - t->device - t->map;
    case F_EXCHANGE:
        return t->exchange;
    default:
        return t->neighbours;
    }
}

int main(int argc, char **argv)
{
    static const int def[] = {2, 64, 512};
    int sizes[64], nsizes = 0;
    for (int i = 1; i < argc && nsizes < 64; i++) {
        const int n = atoi(argv[i]);
        if (n < 1 || n > TASK_MEM_MAX_TASKS) {
            fprintf(stderr, "usage: msg_task_memory [N ...]  (N in 1..%d; default 2 64 512)\n",
                    TASK_MEM_MAX_TASKS);
            return 2;
        }
        sizes[nsizes++] = n;
    }
    for (int i = 0; nsizes == 0 && i < 3; i++)
        sizes[i] = def[i];
    if (nsizes == 0)
        nsizes = 3;
    task_mem_job_t *job = task_mem_job_map();
    if (!job) {
        perror("msg_task_memory: mmap");
        return 1;
    }
    printf("# bytes per task (mallinfo2 differences in each fork task; shm device, "
           "heater mode, XYZT)\n");
    int rc = 0;
    for (int s = 0; s < nsizes; s++) {
        const int n = sizes[s];
        if (task_mem_run(job, n) != 0) {
            fprintf(stderr, "msg_task_memory: the jobs of %d tasks failed: %s\n", n,
                    job->why[0] ? job->why : torx_last_error());
            rc = 1;
            continue;
        }
        long long max[NFIELDS], sum[NFIELDS] = {0};
        for (int f = 0; f < NFIELDS; f++)
            max[f] = field(&job->task[0], f);
        for (int r = 0; r < n; r++)
            for (int f = 0; f < NFIELDS; f++) {
                const long long v = field(&job->task[r], f);
                sum[f] += v;
                if (v > max[f])
                    max[f] = v;
            }
        printf("# %d tasks:", n);
        for (int f = 0; f < NFIELDS; f++)
            printf(" %s %lld (mean %.0f)", field_name[f], max[f], (double)sum[f] / n);
        printf("\nmem tasks=%d", n);
        for (int f = 0; f < NFIELDS; f++)
            printf(" %s=%lld", field_name[f], max[f]);
        printf("\nmemavg tasks=%d", n);
        for (int f = 0; f < NFIELDS; f++)
            printf(" %s=%.0f", field_name[f], (double)sum[f] / n);
        printf("\n");
        fflush(stdout);
    }
    return rc;
}
