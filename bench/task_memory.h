/* The heap memory libtorx takes per task, shared by bench/msg_task_memory.c
 * and test/unit/test_msg_memory.c. Header-only; <torx/msg.h> must come
 * first, and _GNU_SOURCE before the first system header.
 *
 * Every figure is a difference of mallinfo2() (bytes in use in every arena,
 * plus chunks mapped on their own) taken in the task itself: fork tasks are
 * processes, so nothing of another task is in it. Two fork jobs of the same
 * size, one after the other:
 *   - device: torx_pkt_open of the device torx_init would open (shape from
 *     torx_env_shape, the XYZT coordinate), nothing else. The device's
 *     private tables; its shared segment is mapped, not allocated, and
 *     counts nowhere.
 *   - msg: torx_init (the device again, the rank map, the message layer),
 *     then one one-packet message to each of this task's torus neighbours
 *     (x, y and z, both ways; fewer where the torus is short or they
 *     coincide) and one from each, then the growth.
 * The message layer's share of torx_init is init - device: the context,
 * the peers, the rank map. The map's tables (coord by rank, rank by slot)
 * are shared by the tasks of one process (the sim device); fork tasks
 * each pay them, so map gives their size to subtract.
 *
 * hwloc keeps about 100 KiB for the rest of the process after its first
 * topology load (torx_init's binding loads one): the parent loads one
 * before it forks the tasks, so that this is not in any task's figures.
 * What each later load leaves (about 2 KiB with Debian 12's hwloc 2.9)
 * is, and counts as torx_init's.
 */
#ifndef TORX_BENCH_TASK_MEMORY_H
#define TORX_BENCH_TASK_MEMORY_H

#include <torx/map.h>
#include <torx/msg.h>

#include <hwloc.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define TASK_MEM_HANDLER 3
#define TASK_MEM_MAX_NEIGHBOURS 6
#define TASK_MEM_MAX_TASKS 4096 /* torx_boot_fork_run's limit */
#define TASK_MEM_TIMEOUT_S 600.0

/* One task's figures, in bytes. */
typedef struct task_mem {
    long long device;   /* torx_pkt_open alone */
    long long init;     /* torx_init, everything */
    long long map;      /* of it, the rank map's two tables (their element bytes) */
    long long exchange; /* growth over the exchange with the neighbours */
    int neighbours;     /* distinct torus neighbours messaged */
    int done;           /* 1: this task's figures are in */
} task_mem_t;

/* Shared with the fork tasks: mapped before the jobs start. */
typedef struct task_mem_job {
    int ntasks;
    char why[256]; /* the first task failure, for the parent */
    task_mem_t task[TASK_MEM_MAX_TASKS];
} task_mem_job_t;

static inline long long task_mem_in_use(void)
{
    const struct mallinfo2 mi = mallinfo2();
    return (long long)(mi.uordblks + mi.hblkhd);
}

static inline int task_mem_fail(task_mem_job_t *job, int rank, const char *what)
{
    if (!job->why[0])
        snprintf(job->why, sizeof job->why, "rank %d: %s: %s", rank, what, torx_last_error());
    return 1;
}

static inline int task_mem_device_task(torx_boot_t *boot, void *arg)
{
    task_mem_job_t *job = arg;
    torx_shape_t shape;
    torx_map_t map;
    if (torx_env_shape(boot->size, 1, &shape) != TORX_OK ||
        torx_map_from_order("XYZT", shape, boot->size, &map) != TORX_OK)
        return task_mem_fail(job, boot->rank, "shape");
    const torx_pkt_attr_t attr = {
        .boot = boot, .shape = shape, .self = torx_map_coord(&map, boot->rank)};
    torx_map_free(&map);
    torx_pkt_dev_t *dev;
    const long long m0 = task_mem_in_use();
    if (torx_pkt_open(&attr, &dev) != TORX_OK)
        return task_mem_fail(job, boot->rank, "torx_pkt_open");
    job->task[boot->rank].device = task_mem_in_use() - m0;
    const int bad = boot->barrier(boot) != TORX_OK;
    torx_pkt_close(dev);
    return bad ? task_mem_fail(job, boot->rank, "barrier") : 0;
}

typedef struct task_mem_state {
    volatile int got, sent, want;
    volatile int all;
} task_mem_state_t;

static inline void task_mem_update(task_mem_state_t *s)
{
    s->all = s->got == s->want && s->sent == s->want;
}

static inline void task_mem_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                                    torx_recv_t *recv)
{
    (void)ctx, (void)info, (void)recv; /* a one-packet message: its data is in info */
    task_mem_state_t *s = harg;
    s->got++;
    task_mem_update(s);
}

static inline void task_mem_sent(torx_ctx_t *ctx, torx_msg_t *msg, void *arg)
{
    (void)ctx, (void)msg;
    task_mem_state_t *s = arg;
    s->sent++;
    task_mem_update(s);
}

/* This task's distinct torus neighbours (both ways along x, y and z). */
static inline int task_mem_neighbours(torx_ctx_t *ctx, int out[TASK_MEM_MAX_NEIGHBOURS])
{
    const torx_map_t *map = torx_ctx_map(ctx);
    const torx_coord_t me = torx_map_coord(map, torx_rank(ctx));
    const unsigned ext[3] = {map->shape.x, map->shape.y, map->shape.z};
    int n = 0;
    for (int d = 0; d < 3; d++)
        for (int way = -1; way <= 1; way += 2) {
            torx_coord_t c = me;
            uint8_t *v = d == 0 ? &c.x : d == 1 ? &c.y : &c.z;
            *v = (uint8_t)((*v + ext[d] + (unsigned)way) % ext[d]);
            const int r = torx_map_rank(map, c);
            int dup = r < 0 || r == torx_rank(ctx);
            for (int i = 0; i < n && !dup; i++)
                dup = out[i] == r;
            if (!dup)
                out[n++] = r;
        }
    return n;
}

static inline int task_mem_msg_task(torx_boot_t *boot, void *arg)
{
    task_mem_job_t *job = arg;
    task_mem_t *me = &job->task[boot->rank];
    const torx_init_attr_t attr = {.boot = boot, .mode = -1};
    torx_ctx_t *ctx;
    const long long m0 = task_mem_in_use();
    if (torx_init(&attr, &ctx) != TORX_OK)
        return task_mem_fail(job, boot->rank, "torx_init");
    const long long m1 = task_mem_in_use();
    me->init = m1 - m0;
    const torx_map_t *map = torx_ctx_map(ctx);
    me->map = (long long)map->ntasks * (long long)sizeof *map->coord +
              (long long)torx_shape_slots(map->shape) * (long long)sizeof *map->rank_of_slot;
    int nb[TASK_MEM_MAX_NEIGHBOURS];
    task_mem_state_t st = {0};
    st.want = me->neighbours = task_mem_neighbours(ctx, nb);
    task_mem_update(&st);
    torx_msg_t msg[TASK_MEM_MAX_NEIGHBOURS];
    const uint64_t word = (uint64_t)boot->rank;
    int rc = torx_register(ctx, TASK_MEM_HANDLER, task_mem_handler, &st) != TORX_OK ||
             boot->barrier(boot) != TORX_OK;
    for (int i = 0; !rc && i < st.want; i++)
        rc = torx_send(ctx, &msg[i], nb[i], TASK_MEM_HANDLER, NULL, 0, &word, sizeof word,
                       TORX_PROTO_ONEPKT, task_mem_sent, &st) != TORX_OK;
    if (!rc)
        rc = torx_wait_timeout(ctx, &st.all, TASK_MEM_TIMEOUT_S / 2) != TORX_OK;
    if (rc) {
        task_mem_fail(job, boot->rank, "the exchange");
        torx_finalize(ctx);
        return 1;
    }
    me->exchange = task_mem_in_use() - m1;
    me->done = 1;
    return torx_finalize(ctx) == TORX_OK ? 0 : task_mem_fail(job, boot->rank, "torx_finalize");
}

/* Runs the two jobs of ntasks tasks; 0 when both ran, with job->task[] filled. */
static inline int task_mem_run(task_mem_job_t *job, int ntasks)
{
    memset(job, 0, sizeof *job);
    job->ntasks = ntasks;
    static int hwloc_warm;
    hwloc_topology_t topo;
    if (!hwloc_warm && hwloc_topology_init(&topo) == 0) {
        hwloc_warm = 1;
        hwloc_topology_load(topo);
        hwloc_topology_destroy(topo);
    }
    if (torx_boot_fork_run(ntasks, task_mem_device_task, job, TASK_MEM_TIMEOUT_S, 0) != 0 ||
        torx_boot_fork_run(ntasks, task_mem_msg_task, job, TASK_MEM_TIMEOUT_S, 0) != 0)
        return -1;
    for (int r = 0; r < ntasks; r++)
        if (!job->task[r].done)
            return -1;
    return 0;
}

static inline task_mem_job_t *task_mem_job_map(void)
{
    void *p = mmap(NULL, sizeof(task_mem_job_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

#endif /* TORX_BENCH_TASK_MEMORY_H */
