/* Unit tests of the two bootstraps (src/packet/boot_fork.c, boot_pmi.c).
 *
 * fork: jobs of 1..16 tasks doing allgathers and barriers; failing, killed
 * and wedged tasks are counted, and their peers fail instead of hanging.
 *
 * PMI: singleton mode, strict PMI_* validation, a scripted fake PMI-1
 * server (over PMI_FD and over PMI_PORT) for splitting and error paths, and,
 * when hydra's mpiexec is installed, a real run: this binary re-executes
 * itself as "--pmi-child" under "mpiexec -n 3".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "packet/pkt_internal.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Task-side checks cannot use ck_assert (they run in fork_run's children):
 * they print what went wrong and return a nonzero exit code. */
#define TASK_CHECK(cond, code, ...)                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank %d: check failed (%s): ", boot->rank, #cond);                    \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, " [%s]\n", torx_last_error());                                         \
            return (code);                                                                         \
        }                                                                                          \
    } while (0)

/* ---- fork: a healthy job ------------------------------------------------- */

typedef struct {
    int32_t rank;
    int32_t pid;
    uint32_t magic;
} ag_rec_t;

static uint32_t magic_of(int rank)
{
    return (uint32_t)rank * 2654435761u ^ 0x5a5a5a5au;
}

/* Shared between the test and its tasks: mapped MAP_SHARED before the job. */
typedef struct {
    uint32_t counter;
} job_shared_t;

/* Allgathers (small record, 4096-byte record, job id), rejects an oversize
 * record, then 100 barriers that must really hold every task back. Also runs
 * under the PMI child (with shared == NULL: no shared counter there). */
static int healthy_task_body(torx_boot_t *boot, job_shared_t *shared, const char *job_prefix)
{
    const int n = boot->size;
    torx_status_t rc;
    ag_rec_t mine = {boot->rank, (int32_t)getpid(), magic_of(boot->rank)};
    ag_rec_t *all = calloc((size_t)n, sizeof *all);
    TASK_CHECK(all, 2, "calloc");
    rc = boot->allgather(boot, &mine, all, sizeof mine);
    TASK_CHECK(rc == TORX_OK, 3, "allgather rc=%d", rc);
    for (int r = 0; r < n; r++) {
        TASK_CHECK(all[r].rank == r && all[r].magic == magic_of(r) && all[r].pid > 0, 4,
                   "record %d is {%d,%d,%u}", r, all[r].rank, all[r].pid, all[r].magic);
        for (int q = 0; q < r; q++)
            TASK_CHECK(all[q].pid != all[r].pid, 5, "ranks %d and %d share pid %d", q, r,
                       all[r].pid);
    }
    TASK_CHECK(all[boot->rank].pid == getpid(), 6, "own pid");
    free(all);

    /* A record several PMI values long, different per rank and per byte. */
    const size_t big = 3000;
    unsigned char *bmine = malloc(big), *ball = malloc(big * (size_t)n);
    TASK_CHECK(bmine && ball, 2, "malloc");
    for (size_t i = 0; i < big; i++)
        bmine[i] = (unsigned char)(boot->rank * 31 + i * 7);
    rc = boot->allgather(boot, bmine, ball, big);
    TASK_CHECK(rc == TORX_OK, 7, "big allgather rc=%d", rc);
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < big; i++)
            TASK_CHECK(ball[(size_t)r * big + i] == (unsigned char)(r * 31 + i * 7), 8,
                       "big record %d byte %zu", r, i);
    free(bmine);
    free(ball);

    /* Every task is in the same job. */
    char id[64] = {0}, *ids = calloc((size_t)n, sizeof id);
    TASK_CHECK(ids, 2, "calloc");
    snprintf(id, sizeof id, "%s", torx_boot_job_id(boot));
    TASK_CHECK(strncmp(id, job_prefix, strlen(job_prefix)) == 0, 9, "job id '%s'", id);
    rc = boot->allgather(boot, id, ids, sizeof id);
    TASK_CHECK(rc == TORX_OK, 10, "job id allgather rc=%d", rc);
    for (int r = 0; r < n; r++)
        TASK_CHECK(strcmp(ids + (size_t)r * sizeof id, id) == 0, 11, "rank %d has job id '%s'", r,
                   ids + (size_t)r * sizeof id);
    free(ids);

    for (unsigned i = 0; i < 100; i++) {
        if (shared)
            __atomic_fetch_add(&shared->counter, 1, __ATOMIC_RELAXED);
        rc = boot->barrier(boot);
        TASK_CHECK(rc == TORX_OK, 12, "barrier %u rc=%d", i, rc);
        if (shared) {
            /* All n increments of round i happened before anyone left
             * barrier i; at most the other n-1 tasks got one further. */
            uint32_t c = __atomic_load_n(&shared->counter, __ATOMIC_RELAXED);
            TASK_CHECK(c >= (i + 1) * (unsigned)n && c <= (i + 1) * (unsigned)n + (unsigned)n - 1,
                       13, "after barrier %u the counter is %u, expected %u..%u", i, c, (i + 1) * n,
                       (i + 1) * n + n - 1);
        }
    }
    return 0;
}

static int healthy_task(torx_boot_t *boot, void *arg)
{
    int rc = healthy_task_body(boot, arg, "fork-");
    if (rc)
        return rc;
    /* The fork bootstrap caps records at 4096 bytes. */
    static unsigned char big[4097 * 16];
    if (boot->allgather(boot, big, big, 4097) != TORX_ERR_INVAL ||
        !strstr(torx_last_error(), "len=4097"))
        return 14;
    static unsigned char rec[4096], all[4096 * 16];
    memset(rec, boot->rank + 1, sizeof rec);
    if (boot->allgather(boot, rec, all, sizeof rec) != TORX_OK)
        return 15;
    for (int r = 0; r < boot->size; r++)
        if (all[(size_t)r * 4096] != r + 1 || all[(size_t)r * 4096 + 4095] != r + 1)
            return 16;
    return 0;
}

static job_shared_t *map_shared(void)
{
    job_shared_t *s =
        mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(s, MAP_FAILED);
    return s;
}

static const int job_sizes[] = {1, 2, 8, 16};

START_TEST(fork_healthy_jobs)
{
    const int n = job_sizes[_i];
    job_shared_t *shared = map_shared();
    int failed = torx_boot_fork_run(n, healthy_task, shared, 60.0, 0);
    ck_assert_msg(failed == 0, "%d-task job: %d tasks failed (%s)", n, failed, torx_last_error());
    ck_assert_uint_eq(shared->counter, 100u * (unsigned)n);
    munmap(shared, sizeof *shared);
}
END_TEST

/* ---- fork: failures ------------------------------------------------------ */

static int exit3_task(torx_boot_t *boot, void *arg)
{
    (void)arg;
    return boot->rank == 2 ? 3 : 0;
}

static int negative_task(torx_boot_t *boot, void *arg)
{
    (void)arg;
    return boot->rank == 1 ? TORX_ERR_PEER : 0;
}

START_TEST(fork_failed_task_counted)
{
    ck_assert_int_eq(torx_boot_fork_run(4, exit3_task, NULL, 30.0, 0), 1);
    ck_assert_ptr_nonnull(strstr(torx_last_error(), "1 of 4 tasks failed (first: rank 2)"));
    /* A negative result must not wrap to exit status 0. */
    ck_assert_int_eq(torx_boot_fork_run(3, negative_task, NULL, 30.0, 0), 1);
}
END_TEST

/* Rank 1 dies by SIGKILL after the first barrier; the others block in a
 * barrier (ranks 0, 2) or an allgather (rank 3) that can never complete and
 * must come back with TORX_ERR_PEER naming rank 1. */
static int killed_peer_task(torx_boot_t *boot, void *arg)
{
    (void)arg;
    torx_status_t rc = boot->barrier(boot);
    TASK_CHECK(rc == TORX_OK, 20, "first barrier rc=%d", rc);
    if (boot->rank == 1)
        raise(SIGKILL);
    if (boot->rank == 3) {
        int mine = 3, all[4];
        rc = boot->allgather(boot, &mine, all, sizeof mine);
    } else {
        rc = boot->barrier(boot);
    }
    TASK_CHECK(rc == TORX_ERR_PEER, 21, "rc=%d, expected TORX_ERR_PEER", rc);
    TASK_CHECK(strstr(torx_last_error(), "rank 1 (pid") != NULL, 22, "message names rank 1");
    TASK_CHECK(strstr(torx_last_error(), "signal 9") != NULL, 23, "message names SIGKILL");
    return 0;
}

START_TEST(fork_killed_peer_releases_barrier)
{
    double t0 = now_s();
    ck_assert_int_eq(torx_boot_fork_run(4, killed_peer_task, NULL, 30.0, 0), 1);
    /* The peers returned on their own, long before the 30 s timeout. */
    ck_assert_double_lt(now_s() - t0, 10.0);
}
END_TEST

/* A task returning 0 early still leaves peers unable to finish a barrier. */
static int early_exit_task(torx_boot_t *boot, void *arg)
{
    (void)arg;
    if (boot->rank == 0)
        return 0;
    torx_status_t rc = boot->barrier(boot);
    TASK_CHECK(rc == TORX_ERR_PEER, 30, "rc=%d", rc);
    TASK_CHECK(strstr(torx_last_error(), "rank 0") && strstr(torx_last_error(), "status 0"), 31,
               "message");
    return 0;
}

START_TEST(fork_early_exit_releases_barrier)
{
    double t0 = now_s();
    ck_assert_int_eq(torx_boot_fork_run(3, early_exit_task, NULL, 30.0, 0), 0);
    ck_assert_double_lt(now_s() - t0, 10.0);
}
END_TEST

static int sleeper_task(torx_boot_t *boot, void *arg)
{
    int *who = arg;
    if (*who < 0 || boot->rank == *who)
        for (;;)
            pause();
    return 0;
}

START_TEST(fork_timeout_kills)
{
    int who = 1;
    double t0 = now_s();
    ck_assert_int_eq(torx_boot_fork_run(2, sleeper_task, &who, 1.0, 0), 1);
    double dt = now_s() - t0;
    ck_assert_double_ge(dt, 0.95);
    ck_assert_double_lt(dt, 5.0);
    who = -1; /* everyone hangs */
    ck_assert_int_eq(torx_boot_fork_run(3, sleeper_task, &who, 0.5, 0), 3);
}
END_TEST

static int mismatch_task(torx_boot_t *boot, void *arg)
{
    (void)arg;
    unsigned char mine[16] = {0}, all[16 * 4];
    torx_status_t rc = boot->allgather(boot, mine, all, boot->rank == 0 ? 8 : 16);
    TASK_CHECK(rc == TORX_ERR_PROTO, 40, "rc=%d", rc);
    TASK_CHECK(strstr(torx_last_error(), "sizes differ"), 41, "message");
    /* The bootstrap stays usable after the disagreement. */
    rc = boot->barrier(boot);
    TASK_CHECK(rc == TORX_OK, 42, "barrier rc=%d", rc);
    return 0;
}

START_TEST(fork_allgather_len_mismatch)
{
    ck_assert_int_eq(torx_boot_fork_run(4, mismatch_task, NULL, 30.0, 0), 0);
}
END_TEST

static int finalize_task(torx_boot_t *boot, void *arg)
{
    (void)arg;
    char id[64];
    snprintf(id, sizeof id, "%s", torx_boot_job_id(boot));
    boot->finalize(boot);
    TASK_CHECK(boot->barrier(boot) == TORX_ERR_INVAL, 50, "barrier after finalize");
    TASK_CHECK(strcmp(torx_boot_job_id(boot), id) == 0, 51, "job id after finalize");
    return 0;
}

START_TEST(fork_finalize)
{
    ck_assert_int_eq(torx_boot_fork_run(2, finalize_task, NULL, 30.0, 0), 0);
}
END_TEST

START_TEST(fork_bad_arguments)
{
    ck_assert_int_lt(torx_boot_fork_run(0, healthy_task, NULL, 1.0, 0), 0);
    ck_assert_ptr_nonnull(strstr(torx_last_error(), "ntasks=0"));
    ck_assert_int_lt(torx_boot_fork_run(2, NULL, NULL, 1.0, 0), 0);
    ck_assert_ptr_nonnull(strstr(torx_last_error(), "task_main"));
    ck_assert_int_lt(torx_boot_fork_run(2, healthy_task, NULL, 0.0, 0), 0);
    ck_assert_ptr_nonnull(strstr(torx_last_error(), "timeout_s=0"));
    ck_assert_int_lt(torx_boot_fork_run(2, healthy_task, NULL, 1.0, -1), 0);
    ck_assert_ptr_nonnull(strstr(torx_last_error(), "cpus_per_task=-1"));
}
END_TEST

/* ---- fork: pinning ------------------------------------------------------- */

typedef struct {
    int ncpus;
    int cpus[CPU_SETSIZE];
    int per_task;
} pin_arg_t;

static int pin_task(torx_boot_t *boot, void *arg)
{
    const pin_arg_t *p = arg;
    cpu_set_t got, want;
    CPU_ZERO(&want);
    for (int k = 0; k < p->per_task && k < p->ncpus; k++)
        CPU_SET(p->cpus[(boot->rank * p->per_task + k) % p->ncpus], &want);
    TASK_CHECK(sched_getaffinity(0, sizeof got, &got) == 0, 60, "sched_getaffinity");
    TASK_CHECK(CPU_EQUAL(&got, &want), 61, "bound to %d CPUs, expected %d", CPU_COUNT(&got),
               CPU_COUNT(&want));
    return 0;
}

START_TEST(fork_pinning)
{
    static pin_arg_t p;
    cpu_set_t set;
    ck_assert_int_eq(sched_getaffinity(0, sizeof set, &set), 0);
    p.ncpus = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            p.cpus[p.ncpus++] = c;
    for (p.per_task = 1; p.per_task <= 2; p.per_task++)
        ck_assert_int_eq(torx_boot_fork_run(p.ncpus + 1, pin_task, &p, 30.0, p.per_task), 0);
}
END_TEST

/* ---- PMI: singleton and environment validation --------------------------- */

static void unset_pmi(void)
{
    unsetenv("PMI_FD");
    unsetenv("PMI_RANK");
    unsetenv("PMI_SIZE");
    unsetenv("PMI_PORT");
    unsetenv("PMI_ID");
    unsetenv("TORX_BOOT_TIMEOUT");
}

START_TEST(pmi_singleton)
{
    unset_pmi();
    torx_boot_t boot;
    ck_assert_int_eq(torx_boot_pmi_init(&boot), TORX_OK);
    ck_assert_int_eq(boot.rank, 0);
    ck_assert_int_eq(boot.size, 1);
    char expect[32];
    snprintf(expect, sizeof expect, "singleton-%d-", (int)getpid());
    ck_assert_msg(strncmp(torx_boot_job_id(&boot), expect, strlen(expect)) == 0, "job id '%s'",
                  torx_boot_job_id(&boot));
    ck_assert_uint_eq(strlen(torx_boot_job_id(&boot)), strlen(expect) + 16);
    ag_rec_t mine = {0, 1234, 99}, all = {0};
    ck_assert_int_eq(boot.allgather(&boot, &mine, &all, sizeof mine), TORX_OK);
    ck_assert_mem_eq(&mine, &all, sizeof mine);
    ck_assert_int_eq(boot.barrier(&boot), TORX_OK);
    /* Two singletons are two jobs. */
    torx_boot_t other;
    ck_assert_int_eq(torx_boot_pmi_init(&other), TORX_OK);
    ck_assert_str_ne(torx_boot_job_id(&boot), torx_boot_job_id(&other));
    other.finalize(&other);
    boot.finalize(&boot);
    ck_assert_ptr_null(boot.impl);
    ck_assert_int_eq(boot.barrier(&boot), TORX_ERR_INVAL);
}
END_TEST

typedef struct {
    const char *fd, *rank, *size, *port, *id, *timeout;
    const char *names; /* the message must contain this */
} pmi_env_case_t;

#define GOODFD "@" /* replaced by an open socket's fd number */

static const pmi_env_case_t pmi_env_cases[] = {
    {GOODFD, "1x", "4", NULL, NULL, NULL, "PMI_RANK='1x' is not an integer"},
    {GOODFD, "4", "4", NULL, NULL, NULL, "PMI_RANK='4' is out of range (expected 0..3)"},
    {GOODFD, "-1", "4", NULL, NULL, NULL, "PMI_RANK='-1' is out of range"},
    {GOODFD, "", "4", NULL, NULL, NULL, "PMI_RANK='' is not an integer"},
    {GOODFD, "0", "0", NULL, NULL, NULL, "PMI_SIZE='0' is out of range"},
    {GOODFD, "0", "four", NULL, NULL, NULL, "PMI_SIZE='four' is not an integer"},
    {"abc", "0", "4", NULL, NULL, NULL, "PMI_FD='abc' is not an integer"},
    {"987", "0", "4", NULL, NULL, NULL, "PMI_FD='987' is not an open file descriptor"},
    {NULL, "0", NULL, NULL, NULL, NULL, "PMI_RANK is set but neither PMI_FD nor PMI_PORT"},
    {NULL, NULL, "2", NULL, NULL, NULL, "PMI_SIZE is set but neither PMI_FD nor PMI_PORT"},
    {GOODFD, "0", NULL, NULL, NULL, NULL, "PMI_FD is set but PMI_SIZE is not"},
    {GOODFD, NULL, "2", NULL, NULL, NULL, "PMI_FD is set but PMI_RANK is not"},
    {NULL, "0", "1", "localhost", NULL, NULL, "PMI_PORT='localhost' is not host:port"},
    {NULL, "0", "1", "localhost:0", NULL, NULL, "PMI_PORT='localhost:0' is not host:port"},
    {NULL, "0", "1", "localhost:80x", NULL, NULL, "PMI_PORT='localhost:80x'"},
    {NULL, NULL, NULL, "127.0.0.1:1", "x", NULL, "PMI_ID='x' is not an integer"},
    {NULL, NULL, NULL, NULL, NULL, "0", "TORX_BOOT_TIMEOUT='0' is out of range"},
};

START_TEST(pmi_env_validation)
{
    const pmi_env_case_t *c = &pmi_env_cases[_i];
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    char fdbuf[16];
    snprintf(fdbuf, sizeof fdbuf, "%d", sv[0]);
    unset_pmi();
    const char *vals[] = {c->fd, c->rank, c->size, c->port, c->id, c->timeout};
    const char *vars[] = {"PMI_FD",   "PMI_RANK", "PMI_SIZE",
                          "PMI_PORT", "PMI_ID",   "TORX_BOOT_TIMEOUT"};
    for (int i = 0; i < 6; i++)
        if (vals[i])
            setenv(vars[i], strcmp(vals[i], GOODFD) == 0 ? fdbuf : vals[i], 1);
    torx_boot_t boot = {.rank = -1};
    torx_status_t rc = torx_boot_pmi_init(&boot);
    ck_assert_msg(rc == TORX_ERR_ENV, "case %d: got %s (%s)", _i, torx_status_str(rc),
                  torx_last_error());
    ck_assert_msg(strstr(torx_last_error(), c->names), "case %d: message '%s' lacks '%s'", _i,
                  torx_last_error(), c->names);
    ck_assert_int_eq(boot.rank, -1); /* untouched on error */
    /* Nothing was sent on the inherited socket. */
    char b;
    ck_assert_int_lt(recv(sv[1], &b, 1, MSG_DONTWAIT), 0);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

/* ---- PMI: a scripted fake server ----------------------------------------- */

enum fake_mode {
    FAKE_OK,             /* a well-behaved PMI-1 server with a tiny vallen_max */
    FAKE_PUT_FAILS,      /* answers every put with rc=-1 */
    FAKE_CLOSE,          /* hangs up after get_my_kvsname */
    FAKE_SILENT,         /* never answers barrier_in */
    FAKE_BAD_INIT,       /* answers init with rc=-2 */
    FAKE_PORT_HANDSHAKE, /* FAKE_OK preceded by the PMI_PORT initack handshake */
};

#define FAKE_VALLEN 40 /* 39 value chars: forces records into several keys */
#define FAKE_KVS "kvs_fake_42"

typedef struct {
    char key[64];
    char val[FAKE_VALLEN];
} fake_kv_t;

static int fake_getline(int fd, char *buf, size_t len)
{
    size_t n = 0;
    while (n + 1 < len) {
        char ch;
        ssize_t r = read(fd, &ch, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        if (ch == '\n')
            break;
        buf[n++] = ch;
    }
    buf[n] = '\0';
    return (int)n;
}

static void fake_say(int fd, const char *line)
{
    size_t len = strlen(line);
    if (write(fd, line, len) != (ssize_t)len)
        _exit(90);
}

static const char *field(const char *line, const char *key, char *out, size_t len)
{
    char pat[40];
    snprintf(pat, sizeof pat, " %s=", key);
    const char *p = strstr(line, pat);
    if (!p)
        return NULL;
    p += strlen(pat);
    size_t n = strcspn(p, " ");
    if (n >= len)
        n = len - 1;
    memcpy(out, p, n);
    out[n] = '\0';
    return out;
}

/* Serves one client on fd; exits 0 after finalize, nonzero when the client
 * broke the protocol (a repeated key, a line over 1023 bytes, a value over
 * vallen_max, a wrong kvsname). */
static void fake_server(int fd, enum fake_mode mode)
{
    static fake_kv_t kv[512];
    int nkv = 0;
    char line[2048], key[64], val[2048], kvs[64], out[256];
    if (mode == FAKE_PORT_HANDSHAKE) {
        if (fake_getline(fd, line, sizeof line) < 0 || strcmp(line, "cmd=initack pmiid=7") != 0)
            _exit(80);
        fake_say(fd, "cmd=initack\ncmd=set size=1\ncmd=set rank=0\ncmd=set debug=0\n");
    }
    for (;;) {
        int n = fake_getline(fd, line, sizeof line);
        if (n < 0)
            _exit(mode == FAKE_CLOSE ? 0 : 81);
        if (n >= 1023)
            _exit(82);
        if (strncmp(line, "cmd=init ", 9) == 0) {
            if (!strstr(line, "pmi_version=1") || !strstr(line, "pmi_subversion=1"))
                _exit(83);
            fake_say(fd, mode == FAKE_BAD_INIT
                             ? "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-2\n"
                             : "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n");
        } else if (strcmp(line, "cmd=get_maxes") == 0) {
            snprintf(out, sizeof out, "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=%d\n",
                     FAKE_VALLEN);
            fake_say(fd, out);
        } else if (strcmp(line, "cmd=get_my_kvsname") == 0) {
            fake_say(fd, "cmd=my_kvsname kvsname=" FAKE_KVS "\n");
            if (mode == FAKE_CLOSE)
                _exit(0);
        } else if (strncmp(line, "cmd=put ", 8) == 0) {
            if (!field(line, "kvsname", kvs, sizeof kvs) || strcmp(kvs, FAKE_KVS) != 0 ||
                !field(line, "key", key, sizeof key) || !field(line, "value", val, sizeof val))
                _exit(84);
            if (mode == FAKE_PUT_FAILS) {
                fake_say(fd, "cmd=put_result rc=-1 msg=kvs_full\n");
                continue;
            }
            if (strlen(val) >= FAKE_VALLEN)
                _exit(85);
            for (int i = 0; i < nkv; i++)
                if (strcmp(kv[i].key, key) == 0)
                    _exit(86);
            if (nkv == 512)
                _exit(87);
            memcpy(kv[nkv].key, key, sizeof kv[nkv].key);
            memcpy(kv[nkv].val, val, strlen(val) + 1); /* < FAKE_VALLEN, checked above */
            nkv++;
            fake_say(fd, "cmd=put_result rc=0 msg=success\n");
        } else if (strcmp(line, "cmd=barrier_in") == 0) {
            if (mode == FAKE_SILENT) {
                pause();
                _exit(0);
            }
            fake_say(fd, "cmd=barrier_out\n");
        } else if (strncmp(line, "cmd=get ", 8) == 0) {
            if (!field(line, "key", key, sizeof key))
                _exit(88);
            int found = -1;
            for (int i = 0; i < nkv; i++)
                if (strcmp(kv[i].key, key) == 0)
                    found = i;
            if (found < 0)
                snprintf(out, sizeof out,
                         "cmd=get_result rc=-1 msg=key_%s_not_found value=unknown\n", key);
            else
                snprintf(out, sizeof out, "cmd=get_result rc=0 msg=success value=%s\n",
                         kv[found].val);
            fake_say(fd, out);
        } else if (strcmp(line, "cmd=finalize") == 0) {
            fake_say(fd, "cmd=finalize_ack\n");
            _exit(0);
        } else {
            _exit(89);
        }
    }
}

static pid_t start_fake_on_socketpair(enum fake_mode mode, int *client_fd)
{
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(sv[0]);
        alarm(30); /* a broken test must not leave a server behind */
        fake_server(sv[1], mode);
        _exit(0);
    }
    close(sv[1]);
    *client_fd = sv[0];
    char buf[16];
    snprintf(buf, sizeof buf, "%d", sv[0]);
    unset_pmi();
    setenv("PMI_FD", buf, 1);
    setenv("PMI_RANK", "0", 1);
    setenv("PMI_SIZE", "1", 1);
    return pid;
}

static int reap(pid_t pid)
{
    int st = 0;
    for (int i = 0; i < 500; i++) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

/* A client session against a well-behaved server: records split across
 * several keys, fresh keys for every allgather, finalize. */
static void fake_session(torx_boot_t *boot)
{
    ck_assert_int_eq(boot->rank, 0);
    ck_assert_int_eq(boot->size, 1);
    ck_assert_str_eq(torx_boot_job_id(boot), FAKE_KVS);
    for (int round = 0; round < 3; round++) {
        unsigned char mine[100], all[100];
        for (int i = 0; i < 100; i++)
            mine[i] = (unsigned char)(i * 13 + round);
        memset(all, 0, sizeof all);
        ck_assert_int_eq(boot->allgather(boot, mine, all, sizeof mine), TORX_OK);
        ck_assert_mem_eq(mine, all, sizeof mine);
    }
    uint8_t one = 0xa5, got = 0;
    ck_assert_int_eq(boot->allgather(boot, &one, &got, 1), TORX_OK);
    ck_assert_uint_eq(got, 0xa5);
    ck_assert_int_eq(boot->allgather(boot, NULL, NULL, 0), TORX_OK);
    ck_assert_int_eq(boot->barrier(boot), TORX_OK);
    boot->finalize(boot);
}

START_TEST(pmi_fake_server_fd)
{
    int fd;
    pid_t srv = start_fake_on_socketpair(FAKE_OK, &fd);
    torx_boot_t boot;
    ck_assert_msg(torx_boot_pmi_init(&boot) == TORX_OK, "%s", torx_last_error());
    fake_session(&boot);
    ck_assert_int_eq(reap(srv), 0);
}
END_TEST

START_TEST(pmi_fake_server_port)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(ls, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(bind(ls, (struct sockaddr *)&sa, sizeof sa), 0);
    socklen_t slen = sizeof sa;
    ck_assert_int_eq(getsockname(ls, (struct sockaddr *)&sa, &slen), 0);
    ck_assert_int_eq(listen(ls, 1), 0);
    pid_t srv = fork();
    ck_assert_int_ge(srv, 0);
    if (srv == 0) {
        alarm(30);
        int fd = accept(ls, NULL, NULL);
        if (fd < 0)
            _exit(91);
        fake_server(fd, FAKE_PORT_HANDSHAKE);
        _exit(0);
    }
    close(ls);
    unset_pmi();
    char port[64];
    snprintf(port, sizeof port, "127.0.0.1:%d", ntohs(sa.sin_port));
    setenv("PMI_PORT", port, 1);
    setenv("PMI_ID", "7", 1);
    torx_boot_t boot;
    ck_assert_msg(torx_boot_pmi_init(&boot) == TORX_OK, "%s", torx_last_error());
    fake_session(&boot);
    ck_assert_int_eq(reap(srv), 0);
}
END_TEST

START_TEST(pmi_fake_server_errors)
{
    int fd;
    torx_boot_t boot;
    int rec = 7, all;

    /* rc != 0 on put: TORX_ERR_PEER naming the command and the answer. */
    pid_t srv = start_fake_on_socketpair(FAKE_PUT_FAILS, &fd);
    ck_assert_int_eq(torx_boot_pmi_init(&boot), TORX_OK);
    ck_assert_int_eq(boot.allgather(&boot, &rec, &all, sizeof rec), TORX_ERR_PEER);
    ck_assert_ptr_nonnull(strstr(torx_last_error(), "cmd=put failed"));
    ck_assert_ptr_nonnull(strstr(torx_last_error(), "rc=-1 (msg=kvs_full)"));
    boot.finalize(&boot);
    ck_assert_int_eq(reap(srv), 0);

    /* The server hangs up: TORX_ERR_PEER naming the command in flight. */
    srv = start_fake_on_socketpair(FAKE_CLOSE, &fd);
    ck_assert_int_eq(torx_boot_pmi_init(&boot), TORX_OK);
    ck_assert_int_eq(reap(srv), 0);
    ck_assert_int_eq(boot.barrier(&boot), TORX_ERR_PEER);
    ck_assert_ptr_nonnull(strstr(torx_last_error(), "closed the connection during cmd=barrier_in"));
    boot.finalize(&boot);

    /* The server never answers: bounded by TORX_BOOT_TIMEOUT. */
    srv = start_fake_on_socketpair(FAKE_SILENT, &fd);
    setenv("TORX_BOOT_TIMEOUT", "1", 1);
    ck_assert_int_eq(torx_boot_pmi_init(&boot), TORX_OK);
    double t0 = now_s();
    ck_assert_int_eq(boot.barrier(&boot), TORX_ERR_PEER);
    ck_assert_double_lt(now_s() - t0, 3.0);
    ck_assert_ptr_nonnull(strstr(torx_last_error(), "cmd=barrier_in within 1 s"));
    kill(srv, SIGKILL);
    reap(srv);
    boot.finalize(&boot); /* its finalize_ack never comes either: bounded too */

    /* init refused. */
    srv = start_fake_on_socketpair(FAKE_BAD_INIT, &fd);
    ck_assert_int_eq(torx_boot_pmi_init(&boot), TORX_ERR_PEER);
    ck_assert_ptr_nonnull(strstr(torx_last_error(), "cmd=init failed"));
    ck_assert_ptr_nonnull(strstr(torx_last_error(), "rc=-2"));
    close(fd);
    ck_assert_int_eq(reap(srv), 81); /* it saw the connection close */
}
END_TEST

/* ---- PMI: hydra ---------------------------------------------------------- */

/* The program run under mpiexec: the same healthy job as the fork tests,
 * then a check that rank and size match what hydra exported. */
static int pmi_child_main(void)
{
    torx_boot_t b, *boot = &b;
    b.rank = -1;
    torx_status_t rc = torx_boot_pmi_init(boot);
    TASK_CHECK(rc == TORX_OK, 70, "torx_boot_pmi_init rc=%d", rc);
    TASK_CHECK(b.rank == atoi(getenv("PMI_RANK")) && b.size == atoi(getenv("PMI_SIZE")), 71,
               "rank %d size %d", b.rank, b.size);
    TASK_CHECK(b.size == 3, 72, "size %d", b.size);
    int code = healthy_task_body(boot, NULL, "kvs_");
    if (code)
        return code;
    boot->finalize(boot);
    printf("pmi child %d of %d: OK\n", b.rank, b.size);
    return 0;
}

static char hydra_path[4096];

/* A hydra mpiexec on PATH: mpiexec.mpich or mpiexec.hydra, or an mpiexec
 * whose --version says HYDRA (Open MPI's does not speak PMI-1). */
static int find_hydra(void)
{
    static const char *const names[] = {"mpiexec.mpich", "mpiexec.hydra", "mpiexec"};
    const char *path = getenv("PATH");
    if (!path)
        return 0;
    for (int i = 0; i < 3; i++) {
        const char *p = path;
        while (*p) {
            size_t n = strcspn(p, ":");
            snprintf(hydra_path, sizeof hydra_path, "%.*s/%s", (int)n, p, names[i]);
            if (n && access(hydra_path, X_OK) == 0) {
                if (i < 2)
                    return 1;
                char cmd[4200], line[256];
                snprintf(cmd, sizeof cmd, "'%s' --version 2>/dev/null", hydra_path);
                FILE *f = popen(cmd, "r");
                int hydra = 0;
                while (f && fgets(line, sizeof line, f))
                    hydra |= strstr(line, "HYDRA") != NULL;
                if (f)
                    pclose(f);
                if (hydra)
                    return 1;
            }
            p += n + (p[n] == ':');
        }
    }
    return 0;
}

START_TEST(pmi_hydra_job)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    ck_assert_int_gt(n, 0);
    self[n] = '\0';
    unset_pmi();
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        setpgid(0, 0); /* so a timeout can kill mpiexec, its proxy and the tasks */
        setenv("MPIEXEC_TIMEOUT", "100", 1);
        execl(hydra_path, hydra_path, "-n", "3", self, "--pmi-child", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    double deadline = now_s() + 110;
    pid_t w;
    while ((w = waitpid(pid, &st, WNOHANG)) == 0 && now_s() < deadline)
        usleep(20000);
    if (w == 0) {
        kill(-pid, SIGKILL);
        waitpid(pid, &st, 0);
        ck_abort_msg("%s -n 3 %s --pmi-child did not finish in 110 s", hydra_path, self);
    }
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "%s -n 3 %s --pmi-child failed (wait status 0x%x)", hydra_path, self, st);
}
END_TEST

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

static Suite *boot_suite(void)
{
    Suite *s = suite_create("boot");
    TCase *tc = tcase_create("fork");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, fork_healthy_jobs, 0, N_OF(job_sizes));
    tcase_add_test(tc, fork_failed_task_counted);
    tcase_add_test(tc, fork_killed_peer_releases_barrier);
    tcase_add_test(tc, fork_early_exit_releases_barrier);
    tcase_add_test(tc, fork_timeout_kills);
    tcase_add_test(tc, fork_allgather_len_mismatch);
    tcase_add_test(tc, fork_finalize);
    tcase_add_test(tc, fork_bad_arguments);
    tcase_add_test(tc, fork_pinning);
    suite_add_tcase(s, tc);

    tc = tcase_create("pmi");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, pmi_singleton);
    tcase_add_loop_test(tc, pmi_env_validation, 0, N_OF(pmi_env_cases));
    tcase_add_test(tc, pmi_fake_server_fd);
    tcase_add_test(tc, pmi_fake_server_port);
    tcase_add_test(tc, pmi_fake_server_errors);
    suite_add_tcase(s, tc);

    return s;
}

/* The PMI bootstrap under a real hydra mpiexec: its own program
 * (test_boot_hydra), so that a machine without hydra reports it as skipped
 * (exit 77, automake's SKIP) rather than as passed; under CI=true, where
 * mpich is installed, as failed. */
static Suite *boot_hydra_suite(void)
{
    Suite *s = suite_create("boot_hydra");
    TCase *tc = tcase_create("pmi_hydra");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, pmi_hydra_job);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--pmi-child") == 0)
        return pmi_child_main();
#ifdef TEST_BOOT_HYDRA
    if (!find_hydra()) {
        /* CI (CI=true, .ci/run) installs mpich: there a missing hydra fails. */
        const char *ci = getenv("CI");
        if (ci && strcmp(ci, "true") == 0) {
            printf("test_boot_hydra: FAIL: no hydra mpiexec (mpiexec.mpich, mpiexec.hydra) on "
                   "PATH, and CI=true (scripts/install-deps.sh installs mpich)\n");
            return EXIT_FAILURE;
        }
        printf("test_boot_hydra: SKIP: no hydra mpiexec (mpiexec.mpich, mpiexec.hydra) on "
               "PATH; install mpich to run it\n");
        return 77;
    }
    (void)boot_suite;
    SRunner *sr = srunner_create(boot_hydra_suite());
#else
    (void)boot_hydra_suite;
    (void)find_hydra;
    SRunner *sr = srunner_create(boot_suite());
#endif
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
