/* Shared helpers for the unit tests that start fork jobs. */
#ifndef TORX_TEST_HARNESS_H
#define TORX_TEST_HARNESS_H

#include <torx/packet.h>

#include <check.h>
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* Seconds a fork job may run before its tasks are killed and counted failed. */
#define TEST_JOB_TIMEOUT 120.0

/* Inside a task: report and fail the task (its exit status) without Check,
 * which only runs in the parent. */
#define TASK_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: rank %d: check failed: %s: ", __FILE__, __LINE__,              \
                    boot ? boot->rank : -1, #cond);                                                \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            return 1;                                                                              \
        }                                                                                          \
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

/* The pids of the tasks this test binary's jobs ran, in memory the tasks
 * share with it: a shm segment is named after the pid of the task that
 * created it, so the segment checks count only this binary's segments and
 * not those of another test binary that `make -j check` runs beside it.
 * Mapped before main, so every forked test and task inherits it. */
enum { TEST_TASK_PIDS_MAX = 1 << 14 };
typedef struct test_task_pids {
    unsigned n;
    pid_t pid[TEST_TASK_PIDS_MAX];
} test_task_pids_t;
static test_task_pids_t *test_task_pids;

__attribute__((constructor)) static void test_task_pids_map(void)
{
    void *p = mmap(NULL, sizeof *test_task_pids, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED) {
        perror("test harness: mmap of the task pid table");
        exit(EXIT_FAILURE);
    }
    test_task_pids = p;
}

/* A task records itself (once) before it may create a segment. */
static inline void test_record_task(void)
{
    static pid_t recorded; /* a forked child inherits its parent's pid here */
    if (recorded == getpid())
        return;
    recorded = getpid();
    const unsigned i = __atomic_fetch_add(&test_task_pids->n, 1, __ATOMIC_RELAXED);
    if (i >= TEST_TASK_PIDS_MAX) {
        fprintf(stderr, "test harness: more than %d tasks; raise TEST_TASK_PIDS_MAX\n",
                TEST_TASK_PIDS_MAX);
        abort();
    }
    __atomic_store_n(&test_task_pids->pid[i], getpid(), __ATOMIC_RELEASE);
}

static inline int test_is_our_task(pid_t pid)
{
    unsigned n = __atomic_load_n(&test_task_pids->n, __ATOMIC_ACQUIRE);
    if (n > TEST_TASK_PIDS_MAX)
        n = TEST_TASK_PIDS_MAX;
    for (unsigned i = 0; i < n; i++)
        if (__atomic_load_n(&test_task_pids->pid[i], __ATOMIC_ACQUIRE) == pid)
            return 1;
    return 0;
}

static inline torx_status_t test_open(torx_boot_t *boot, torx_shape_t shape, torx_pkt_dev_t **dev)
{
    test_record_task();
    torx_pkt_attr_t attr = {.boot = boot, .shape = shape, .self = test_coord_of(shape, boot->rank)};
    return torx_pkt_open(&attr, dev);
}

/* Whether name is a message-based network device (src/packet/net/): ofi,
 * ucx. They take batches of one packet, and credits stand for FIFOs. */
static inline int test_is_net_device(const char *name)
{
    return name && (!strcmp(name, "ofi") || !strcmp(name, "ucx"));
}

/* Runs a job of n tasks with the test's stderr (and so every task's)
 * going to a file, then puts back; what they wrote is in buf (size bytes,
 * NUL-terminated). Returns torx_boot_fork_run's result. */
static inline int test_job_stderr(int n, int (*fn)(torx_boot_t *, void *), void *arg, char *buf,
                                  size_t size)
{
    char path[] = "/tmp/torx-test-stderr-XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    fflush(stderr);
    const int saved = dup(2);
    dup2(fd, 2);
    const int rc = torx_boot_fork_run(n, fn, arg, TEST_JOB_TIMEOUT, 0);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    const ssize_t got = pread(fd, buf, size - 1, 0);
    buf[got > 0 ? got : 0] = '\0';
    close(fd);
    unlink(path);
    return rc;
}

static inline double test_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Page faults this task has taken that needed no I/O: the tests that
 * shared memory is mapped before the traffic that would fault it in. A
 * sanitized build (ASan, TSan) faults in shadow memory beside every page
 * the program touches (CI: 41 and 1969 faults where the plain build takes
 * none), so there the counts say nothing of torx: TEST_SANITIZED. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TEST_SANITIZED 1
#else
#define TEST_SANITIZED 0
#endif
static inline long test_minor_faults(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_minflt : -1;
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

/* An environment variable the device must refuse or see disagree: var
 * set to value (value_rank0 on rank 0 in a mismatch job). */
typedef struct test_env_case {
    const char *var, *value, *value_rank0;
} test_env_case_t;

/* A task of a one-task job: var=value makes torx_pkt_open fail with
 * TORX_ERR_ENV and a message naming var. */
static inline int test_env_refused_task(torx_boot_t *boot, void *arg)
{
    const test_env_case_t *e = arg;
    setenv(e->var, e->value, 1);
    torx_pkt_dev_t *dev = NULL;
    const torx_status_t rc = test_open(boot, (torx_shape_t){1, 1, 1, 1}, &dev);
    TASK_CHECK(rc == TORX_ERR_ENV, "%s=%s accepted (%s)", e->var, e->value, torx_status_str(rc));
    TASK_CHECK(strstr(torx_last_error(), e->var) != NULL, "message: %s", torx_last_error());
    return 0;
}

/* A task of a two-task job whose ranks set var differently: the open
 * fails, and rank 1's message names var. */
static inline int test_env_mismatch_task(torx_boot_t *boot, void *arg)
{
    const test_env_case_t *e = arg;
    setenv(e->var, boot->rank ? e->value : e->value_rank0, 1);
    torx_pkt_dev_t *dev = NULL;
    const torx_status_t rc = test_open(boot, (torx_shape_t){2, 1, 1, 1}, &dev);
    TASK_CHECK(rc != TORX_OK, "tasks with different %s opened", e->var);
    TASK_CHECK(boot->rank == 0 || strstr(torx_last_error(), e->var) != NULL, "rank 1's message: %s",
               torx_last_error());
    return 0;
}

/* Number of torx shared segments named in /dev/shm that a task of this
 * test binary created (names are torx-<uid>-<creator pid>-<salt>). */
static inline int test_count_segments(void)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "torx-%u-", (unsigned)getuid());
    DIR *dir = opendir("/dev/shm");
    int n = 0;
    for (struct dirent *e; dir && (e = readdir(dir));)
        if (!strncmp(e->d_name, prefix, strlen(prefix)))
            n += test_is_our_task((pid_t)strtol(e->d_name + strlen(prefix), NULL, 10));
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

#define RUN_JOB(n, fn, arg)                                                                        \
    ck_assert_int_eq(torx_boot_fork_run((n), (fn), (arg), TEST_JOB_TIMEOUT, 0), 0)

#endif
