/* Shared helpers for the unit tests that start fork jobs. */
#ifndef TORX_TEST_HARNESS_H
#define TORX_TEST_HARNESS_H

#include <torx/packet.h>

#include <check.h>
#include <dirent.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Seconds a fork job may run before its tasks are killed and counted failed. */
#define TEST_JOB_TIMEOUT 120.0

/* Inside a task: report and fail the task (its exit status) without Check,
 * which only runs in the parent. */
#define TASK_CHECK(cond, ...)                                                                     \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            fprintf(stderr, "%s:%d: rank %d: check failed: %s: ", __FILE__, __LINE__,             \
                    boot ? boot->rank : -1, #cond);                                               \
            fprintf(stderr, __VA_ARGS__);                                                         \
            fputc('\n', stderr);                                                                  \
            return 1;                                                                             \
        }                                                                                         \
    } while (0)

/* Coordinate of rank r when ranks fill the shape x fastest (XYZT order). */
static inline torx_coord_t test_coord_of(torx_shape_t s, int r)
{
    torx_coord_t c;
    c.x = (uint8_t)(r % s.x);
    r /= s.x;
    c.y = (uint8_t)(r % s.y);
    r /= s.y;
    c.z = (uint8_t)(r % s.z);
    c.t = (uint8_t)(r / s.z);
    return c;
}

static inline torx_status_t test_open(torx_boot_t *boot, torx_shape_t shape, torx_pkt_dev_t **dev)
{
    torx_pkt_attr_t attr = {.boot = boot, .shape = shape, .self = test_coord_of(shape, boot->rank)};
    return torx_pkt_open(&attr, dev);
}

static inline double test_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Spin-wait helper for oversubscribed runs: yields every so often. */
static inline void test_relax(unsigned *spins)
{
    if ((++*spins & 63) == 0)
        sched_yield();
}

/* Injects a packet of type sw[0] = type with n payload bytes toward to,
 * polling while the FIFO is full, for at most 60 s. */
static inline torx_status_t test_inject_wait(torx_pkt_dev_t *dev, torx_coord_t to, unsigned type,
                                             const void *p, size_t n)
{
    torx_pkt_hdr_t h;
    torx_pkt_hdr_init(&h, to, 0);
    h.sw[0] = (uint8_t)type;
    unsigned spins = 0;
    const double t0 = test_now();
    torx_status_t rc;
    while ((rc = torx_pkt_inject1(dev, &h, p, n)) == TORX_NO_ROOM && test_now() - t0 < 60.0) {
        torx_pkt_poll(dev);
        test_relax(&spins);
    }
    return rc;
}

/* Number of this user's torx shared segments named in /dev/shm. */
static inline int test_count_segments(void)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "torx-%u-", (unsigned)getuid());
    DIR *dir = opendir("/dev/shm");
    int n = 0;
    for (struct dirent *e; dir && (e = readdir(dir));)
        n += !strncmp(e->d_name, prefix, strlen(prefix));
    if (dir)
        closedir(dir);
    return n;
}

/* Runs a suite, prints Check's summary, and gives main()'s exit status. */
static inline int test_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#define RUN_JOB(n, fn, arg) ck_assert_int_eq(torx_boot_fork_run((n), (fn), (arg), TEST_JOB_TIMEOUT, 0), 0)

#endif
