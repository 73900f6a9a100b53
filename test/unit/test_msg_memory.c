/* What the message layer allocates per task must not grow with the job:
 * peers are made on first contact, the rank map's tables are shared, the
 * traffic counters exist only when asked for. Fork jobs of 2 and 64 tasks
 * on the shm device, measured in each task by bench/task_memory.h
 * (mallinfo2 differences; the device's own tables measured apart and
 * taken off). Skipped under sanitizers, whose allocators mallinfo2 does
 * not see. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <torx/msg.h>

#include "../../bench/task_memory.h"
#include "harness.h"

/* The growth allowed from 2 to 64 tasks: the map's tables (8 bytes a
 * task in a fork job, where each task has its own) and the peer table's
 * page pointers fit with room to spare. A record per task of the job
 * (the 280 bytes a peer took before) would not. */
#define GROWTH_MAX 4096
/* A task of the 64-task job messages its 6 torus neighbours, all in the
 * one page of 64 peer records (6 KiB): the exchange may take that page
 * and the receive records it pools, not a record per rank. */
#define EXCHANGE_MAX (8 * 1024)

static task_mem_job_t *job;

/* The tasks' largest message-layer share of torx_init (init - device),
 * and largest exchange growth, in a job of n tasks. */
static void measure(int n, long long *msg, long long *exchange)
{
    ck_assert_msg(task_mem_run(job, n) == 0, "the jobs of %d tasks failed: %s", n,
                  job->why[0] ? job->why : torx_last_error());
    *msg = *exchange = 0;
    for (int r = 0; r < n; r++) {
        const task_mem_t *t = &job->task[r];
        if (t->init - t->device > *msg)
            *msg = t->init - t->device;
        if (t->exchange > *exchange)
            *exchange = t->exchange;
    }
    fprintf(stderr,
            "test_msg_memory: %d tasks: torx_init takes %lld bytes beyond the device's (map "
            "%lld), the neighbour exchange %lld more\n",
            n, *msg, job->task[0].map, *exchange);
}

START_TEST(per_task_memory_flat)
{
    if (TEST_SANITIZED) {
        fprintf(stderr, "test_msg_memory: skipped under a sanitizer (mallinfo2 sees nothing)\n");
        return;
    }
    unsetenv("TORX_STATS");
    unsetenv("TORX_STATS_FILE");
    unsetenv("TORX_MODE");
    unsetenv("TORX_MAPPING");
    unsetenv("TORX_TORUS");
    long long msg2, msg64, ex2, ex64;
    measure(2, &msg2, &ex2);
    measure(64, &msg64, &ex64);
    ck_assert_msg(msg64 - msg2 <= GROWTH_MAX,
                  "the message layer takes %lld bytes per task after torx_init at 64 tasks, %lld "
                  "at 2: it grows with the job (by more than %d)",
                  msg64, msg2, GROWTH_MAX);
    ck_assert_msg(ex64 <= EXCHANGE_MAX,
                  "messages to 6 neighbours took %lld bytes per task at 64 tasks (at most %d: one "
                  "page of peer records)",
                  ex64, EXCHANGE_MAX);
}
END_TEST

int main(void)
{
    job = task_mem_job_map();
    if (!job) {
        perror("test_msg_memory: mmap");
        return EXIT_FAILURE;
    }
    Suite *s = suite_create("msg_memory");
    TCase *tc = tcase_create("memory");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, per_task_memory_flat);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
