/* Collective network, global interrupt and the reproducible double sum.
 *
 * Most cases run the shm device's functions directly: a harness maps an
 * anonymous shared region holding the cn and gi regions, forks N tasks, and
 * gives each a zeroed torxp_shm_dev_t with rank, size, the region
 * pointers and an ops table without entries (harness_ops). That lets the
 * tests count rounds, probe the pipeline depth and make one task
 * deliberately slow. The double sum runs its core
 * (fpsum_internal.h) over those same functions, and, at the end, through the
 * public API on a real device (torx_pkt_open under torx_boot_fork_run).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "harness.h"
#include "packet/fpsum_internal.h"
#include "packet/shm/shm.h"

#include <check.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define TASK_SECONDS 20.0 /* a task gives up (and fails) after this long */
#define JOB_SECONDS 40.0  /* the parent kills tasks still running after this */
#define TIMED_OUT ((torx_status_t)100)
#define LANES64 (TORX_CN_PACKET_BYTES / 8)
#define LANES32 (TORX_CN_PACKET_BYTES / 4)

static const unsigned job_sizes[] = {1, 2, 3, 8, 16};
#define NJOB_SIZES (sizeof job_sizes / sizeof job_sizes[0])

/* ---- fork harness over the raw shm functions ------------------------------ */

typedef struct job_ctl {
    int fail_claimed;
    char fail_msg[1024]; /* first failing task's message */
} job_ctl_t;

typedef struct job {
    unsigned n;
    size_t bytes;
    char *base;
    void *cn, *gi;
    job_ctl_t *ctl;
    void *scratch; /* test data shared by parent and tasks */
} job_t;

typedef int (*task_fn)(torxp_shm_dev_t *d, job_t *job, const void *arg);

/* The harness's devices: no op of their own, so the layers above use the
 * host's time, waiting and threads (the reproducible sum's yields). */
static const torxp_dev_ops_t harness_ops = {.name = "test_cn harness"};

/* In a task: */
static int g_rank = -1;
static double g_deadline;
static job_ctl_t *g_ctl;

static size_t align64(size_t x)
{
    return (x + 63) & ~(size_t)63;
}

static job_t job_create(unsigned n, size_t scratch_bytes)
{
    job_t j = {.n = n};
    size_t cn_b = torxp_shm_cn_bytes(n), gi_b = torxp_shm_gi_bytes(n);
    size_t gi_off = align64(cn_b), ctl_off = align64(gi_off + gi_b);
    size_t scratch_off = align64(ctl_off + sizeof(job_ctl_t));
    j.bytes = scratch_off + scratch_bytes;
    j.base = mmap(NULL, j.bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_msg(j.base != MAP_FAILED, "mmap %zu bytes: %s", j.bytes, strerror(errno));
    j.cn = j.base;
    j.gi = j.base + gi_off;
    j.ctl = (job_ctl_t *)(j.base + ctl_off);
    j.scratch = j.base + scratch_off;
    torxp_shm_cn_init(j.cn, n);
    torxp_shm_gi_init(j.gi, n);
    return j;
}

static void job_destroy(job_t *j)
{
    munmap(j->base, j->bytes);
}

static int task_fail(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int task_fail(int line, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "test_cn.c:%d: rank %d: %s\n", line, g_rank, msg);
    int expect = 0;
    /* acq_rel: one task claims the message buffer; the parent reads it after
     * reaping every task, which orders it after the writes. */
    if (__atomic_compare_exchange_n(&g_ctl->fail_claimed, &expect, 1, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED))
        snprintf(g_ctl->fail_msg, sizeof g_ctl->fail_msg, "test_cn.c:%d: rank %d: %s", line, g_rank,
                 msg);
    return 1;
}

#define T_CHECK(cond, ...)                                                                         \
    do {                                                                                           \
        if (!(cond))                                                                               \
            return task_fail(__LINE__, __VA_ARGS__);                                               \
    } while (0)

/* Spin-wait step: yields often (up to 16 tasks share 2 cores); 1 when the
 * task is out of time. */
static int task_spin(unsigned *spins)
{
    if ((++*spins & 15) == 0)
        sched_yield();
    return (*spins & 1023) == 0 && test_now() > g_deadline;
}

/* Runs fn in n forked tasks and fails the test unless all return 0 in time. */
static void job_run(job_t *j, task_fn fn, const void *arg)
{
    pid_t pids[64];
    ck_assert_uint_le(j->n, 64);
    fflush(NULL);
    for (unsigned r = 0; r < j->n; r++) {
        pid_t pid = fork();
        ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            g_rank = (int)r;
            g_ctl = j->ctl;
            g_deadline = test_now() + TASK_SECONDS;
            torxp_shm_dev_t d;
            memset(&d, 0, sizeof d);
            d.base.ops = &harness_ops;
            d.base.rank = (int)r;
            d.base.size = (int)j->n;
            d.cn = j->cn;
            d.gi = j->gi;
            _exit(fn(&d, j, arg) == 0 ? 0 : 1);
        }
        pids[r] = pid;
    }
    unsigned failed = 0, running = j->n;
    double end = test_now() + JOB_SECONDS;
    while (running > 0) {
        for (unsigned r = 0; r < j->n; r++) {
            int status;
            if (pids[r] <= 0 || waitpid(pids[r], &status, WNOHANG) != pids[r])
                continue;
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                failed++;
            pids[r] = 0;
            running--;
        }
        if (running > 0 && test_now() > end) {
            for (unsigned r = 0; r < j->n; r++)
                if (pids[r] > 0) {
                    kill(pids[r], SIGKILL);
                    waitpid(pids[r], NULL, 0);
                    failed++;
                }
            break;
        }
        if (running > 0)
            usleep(1000);
    }
    ck_assert_msg(failed == 0, "%u of %u tasks failed: %s", failed, j->n,
                  j->ctl->fail_claimed ? j->ctl->fail_msg : "(killed or timed out)");
}

static const char *st_name(torx_status_t st)
{
    return st == TIMED_OUT ? "no result within the time limit" : torx_status_str(st);
}

static torx_status_t cn_read_wait(torxp_shm_dev_t *d, void *res)
{
    unsigned spins = 0;
    torx_status_t st;
    while ((st = torxp_shm_cn_read(&d->base, 0, res)) == TORX_AGAIN)
        if (task_spin(&spins))
            return TIMED_OUT;
    return st;
}

/* ---- inputs and an independent reference ALU ------------------------------ */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static int type_is64(unsigned type)
{
    return type == TORX_CN_S64 || type == TORX_CN_U64;
}

static uint64_t type_min(unsigned type)
{
    switch (type) {
    case TORX_CN_S32:
        return (uint32_t)INT32_MIN;
    case TORX_CN_S64:
        return (uint64_t)INT64_MIN;
    default:
        return 0;
    }
}

static uint64_t type_max(unsigned type)
{
    switch (type) {
    case TORX_CN_S32:
        return INT32_MAX;
    case TORX_CN_U32:
        return UINT32_MAX;
    case TORX_CN_S64:
        return INT64_MAX;
    default:
        return UINT64_MAX;
    }
}

/* Lane value of a task's input for round r: extremes, wrapping sums, small
 * signed values and random bits, varying with the round so lanes rotate. */
static uint64_t input_lane(uint64_t r, unsigned rank, unsigned n, unsigned type, unsigned lane)
{
    uint64_t mask = type_is64(type) ? UINT64_MAX : UINT32_MAX;
    switch ((lane + r) % 8) {
    case 0:
        return rank % 2 ? type_max(type) : type_min(type);
    case 1:
        return type_max(type); /* sums wrap */
    case 2:
        return mask; /* -1 */
    case 3:
        return (uint64_t)((int64_t)rank - (int64_t)n / 2) & mask;
    case 4:
        return type_min(type); /* INT_MIN + INT_MIN wraps to 0 */
    default:
        return mix64(r * 1000003 + rank * 131 + lane) & mask;
    }
}

static void make_input(uint64_t r, unsigned rank, unsigned n, unsigned type, unsigned char *buf)
{
    unsigned lanes = type_is64(type) ? LANES64 : LANES32;
    for (unsigned l = 0; l < lanes; l++) {
        uint64_t v = input_lane(r, rank, n, type, l);
        if (type_is64(type)) {
            memcpy(buf + 8 * l, &v, 8);
        } else {
            uint32_t w = (uint32_t)v;
            memcpy(buf + 4 * l, &w, 4);
        }
    }
}

/* One lane of the reference ALU, in the lanes' own C types. */
static uint64_t ref_op(unsigned op, unsigned type, uint64_t a, uint64_t b)
{
    switch (type) {
    case TORX_CN_S32: {
        int32_t x = (int32_t)(uint32_t)a, y = (int32_t)(uint32_t)b, z = 0;
        switch (op) {
        case TORX_CN_ADD:
            z = (int32_t)((uint32_t)x + (uint32_t)y);
            break;
        case TORX_CN_MIN:
            z = x < y ? x : y;
            break;
        case TORX_CN_MAX:
            z = x > y ? x : y;
            break;
        case TORX_CN_AND:
            z = x & y;
            break;
        case TORX_CN_OR:
            z = x | y;
            break;
        case TORX_CN_XOR:
            z = x ^ y;
            break;
        }
        return (uint32_t)z;
    }
    case TORX_CN_U32: {
        uint32_t x = (uint32_t)a, y = (uint32_t)b, z = 0;
        switch (op) {
        case TORX_CN_ADD:
            z = x + y;
            break;
        case TORX_CN_MIN:
            z = x < y ? x : y;
            break;
        case TORX_CN_MAX:
            z = x > y ? x : y;
            break;
        case TORX_CN_AND:
            z = x & y;
            break;
        case TORX_CN_OR:
            z = x | y;
            break;
        case TORX_CN_XOR:
            z = x ^ y;
            break;
        }
        return z;
    }
    case TORX_CN_S64: {
        int64_t x = (int64_t)a, y = (int64_t)b, z = 0;
        switch (op) {
        case TORX_CN_ADD:
            z = (int64_t)((uint64_t)x + (uint64_t)y);
            break;
        case TORX_CN_MIN:
            z = x < y ? x : y;
            break;
        case TORX_CN_MAX:
            z = x > y ? x : y;
            break;
        case TORX_CN_AND:
            z = x & y;
            break;
        case TORX_CN_OR:
            z = x | y;
            break;
        case TORX_CN_XOR:
            z = x ^ y;
            break;
        }
        return (uint64_t)z;
    }
    default: {
        uint64_t z = 0;
        switch (op) {
        case TORX_CN_ADD:
            z = a + b;
            break;
        case TORX_CN_MIN:
            z = a < b ? a : b;
            break;
        case TORX_CN_MAX:
            z = a > b ? a : b;
            break;
        case TORX_CN_AND:
            z = a & b;
            break;
        case TORX_CN_OR:
            z = a | b;
            break;
        case TORX_CN_XOR:
            z = a ^ b;
            break;
        }
        return z;
    }
    }
}

/* What a round's operation is. */
typedef struct spec {
    unsigned op, type, root;
} spec_t;

/* Every op with every type, BCAST from a rotating root: the schedule of the
 * pipelined test. */
static spec_t spec_of_round(uint64_t r, unsigned n)
{
    return (spec_t){.op = (unsigned)(r % TORX_CN_NOPS),
                    .type = (unsigned)((r / TORX_CN_NOPS) % TORX_CN_NTYPES),
                    .root = (unsigned)((r / 3) % n)};
}

static void make_expected(uint64_t r, spec_t s, unsigned n, unsigned char *out)
{
    if (s.op == TORX_CN_BCAST) {
        make_input(r, s.root, n, s.type, out);
        return;
    }
    unsigned lanes = type_is64(s.type) ? LANES64 : LANES32;
    for (unsigned l = 0; l < lanes; l++) {
        uint64_t acc = input_lane(r, 0, n, s.type, l);
        for (unsigned j = 1; j < n; j++)
            acc = ref_op(s.op, s.type, acc, input_lane(r, j, n, s.type, l));
        if (type_is64(s.type)) {
            memcpy(out + 8 * l, &acc, 8);
        } else {
            uint32_t w = (uint32_t)acc;
            memcpy(out + 4 * l, &w, 4);
        }
    }
}

/* Injects this task's part of round r. Non-roots of a BCAST pass NULL on
 * even rounds and a buffer of their own (which must be ignored) on odd. */
static torx_status_t inject_round(torxp_shm_dev_t *d, uint64_t r, spec_t s)
{
    unsigned rank = (unsigned)d->base.rank, n = (unsigned)d->base.size;
    unsigned char in[TORX_CN_PACKET_BYTES];
    make_input(r, rank, n, s.type, in);
    int is_root = s.op == TORX_CN_BCAST && rank == s.root;
    const void *data = in;
    if (s.op == TORX_CN_BCAST && !is_root && r % 2 == 0)
        data = NULL;
    return torxp_shm_cn_inject(&d->base, 0, s.op, s.type, is_root, data);
}

/* Reads round r (the task's oldest unread) and compares with the
 * reference; 0 when right. */
static int read_and_check(torxp_shm_dev_t *d, uint64_t r, spec_t s)
{
    unsigned n = (unsigned)d->base.size;
    unsigned char res[TORX_CN_PACKET_BYTES], want[TORX_CN_PACKET_BYTES];
    memset(res, 0xa5, sizeof res);
    torx_status_t st = cn_read_wait(d, res);
    T_CHECK(st == TORX_OK, "round %llu (op %u type %u): read gave %s: %s", (unsigned long long)r,
            s.op, s.type, st_name(st), torx_last_error());
    make_expected(r, s, n, want);
    if (memcmp(res, want, sizeof res) != 0) {
        unsigned lw = type_is64(s.type) ? 8 : 4;
        for (unsigned l = 0; l < TORX_CN_PACKET_BYTES / lw; l++) {
            uint64_t g = 0, w = 0;
            memcpy(&g, res + l * lw, lw);
            memcpy(&w, want + l * lw, lw);
            T_CHECK(g == w, "round %llu op %u type %u root %u: lane %u is 0x%llx, expected 0x%llx",
                    (unsigned long long)r, s.op, s.type, s.root, l, (unsigned long long)g,
                    (unsigned long long)w);
        }
    }
    return 0;
}

/* ---- collective network cases -------------------------------------------- */

/* Every op (BCAST from several roots) with every type, one round each. */
static int task_ops(torxp_shm_dev_t *d, job_t *job, const void *arg)
{
    (void)job;
    (void)arg;
    uint64_t r = 0;
    for (unsigned op = 0; op < TORX_CN_NOPS; op++)
        for (unsigned type = 0; type < TORX_CN_NTYPES; type++, r++) {
            spec_t s = {op, type, (unsigned)(r % (uint64_t)d->base.size)};
            torx_status_t st = inject_round(d, r, s);
            T_CHECK(st == TORX_OK, "round %llu: inject gave %s: %s", (unsigned long long)r,
                    torx_status_str(st), torx_last_error());
            if (read_and_check(d, r, s))
                return 1;
        }
    T_CHECK(d->cn_injected[0] == r && d->cn_read[0] == r, "counters %llu/%llu after %llu rounds",
            (unsigned long long)d->cn_injected[0], (unsigned long long)d->cn_read[0],
            (unsigned long long)r);
    return 0;
}

START_TEST(test_cn_ops)
{
    unsigned n = job_sizes[_i];
    job_t j = job_create(n, 0);
    job_run(&j, task_ops, NULL);
    job_destroy(&j);
}
END_TEST

/* BCAST from every root, every type. */
static int task_bcast(torxp_shm_dev_t *d, job_t *job, const void *arg)
{
    (void)job;
    (void)arg;
    uint64_t r = 0;
    for (unsigned root = 0; root < (unsigned)d->base.size; root++)
        for (unsigned type = 0; type < TORX_CN_NTYPES; type++, r++) {
            spec_t s = {TORX_CN_BCAST, type, root};
            torx_status_t st = inject_round(d, r, s);
            T_CHECK(st == TORX_OK, "bcast root %u: inject gave %s: %s", root, torx_status_str(st),
                    torx_last_error());
            if (read_and_check(d, r, s))
                return 1;
        }
    return 0;
}

START_TEST(test_cn_bcast)
{
    unsigned n = job_sizes[_i];
    job_t j = job_create(n, 0);
    job_run(&j, task_bcast, NULL);
    job_destroy(&j);
}
END_TEST

#define PIPE_ROUNDS 1200

typedef struct pipe_shared {
    unsigned depth[64]; /* depth each task measured */
    int slow_release;   /* rank 0 sets it once peers' slowness gave it NO_ROOM */
} pipe_shared_t;

/* 1. Probe the depth D: inject until NO_ROOM (must be the same D on every
 *    task, >= 2). Read those rounds.
 * 2. With n >= 2: the other tasks inject round D but do not read it yet;
 *    rank 0 reads it and injects rounds D+1 .. 2D-1, and must then get
 *    NO_ROOM for round 2D (it is D rounds ahead of the slowest reader) for
 *    as long as they wait.
 * 3. Free-running to PIPE_ROUNDS rounds: task k keeps up to 1 + k % D
 *    rounds in flight; every result is checked against the reference. */
static int task_pipeline(torxp_shm_dev_t *d, job_t *job, const void *arg)
{
    (void)arg;
    pipe_shared_t *sh = job->scratch;
    unsigned n = (unsigned)d->base.size, rank = (unsigned)d->base.rank;
    uint64_t injected = 0, read = 0;
    torx_status_t st;

    for (;;) {
        st = inject_round(d, injected, spec_of_round(injected, n));
        if (st == TORX_NO_ROOM)
            break;
        T_CHECK(st == TORX_OK, "probe round %llu: inject gave %s: %s", (unsigned long long)injected,
                torx_status_str(st), torx_last_error());
        injected++;
        T_CHECK(injected <= 64, "no TORX_NO_ROOM after 64 rounds in flight");
    }
    unsigned depth = (unsigned)injected;
    T_CHECK(depth >= 2, "pipeline depth %u: need at least 2 rounds in flight", depth);
    T_CHECK(d->cn_injected[0] == injected, "cn_injected %llu after a NO_ROOM, expected %llu",
            (unsigned long long)d->cn_injected[0], (unsigned long long)injected);
    sh->depth[rank] = depth;
    for (; read < injected; read++)
        if (read_and_check(d, read, spec_of_round(read, n)))
            return 1;

    if (n >= 2) {
        uint64_t D = depth;
        spec_t s = spec_of_round(D, n);
        unsigned spins = 0;
        do
            st = inject_round(d, D, s);
        while (st == TORX_NO_ROOM && !task_spin(&spins));
        T_CHECK(st == TORX_OK, "round %llu: inject gave %s: %s", (unsigned long long)D,
                torx_status_str(st), torx_last_error());
        injected++;
        if (rank == 0) {
            if (read_and_check(d, read++, s))
                return 1;
            for (; injected < 2 * D; injected++) {
                do
                    st = inject_round(d, injected, spec_of_round(injected, n));
                while (st == TORX_NO_ROOM && !task_spin(&spins));
                T_CHECK(st == TORX_OK, "round %llu: inject gave %s: %s",
                        (unsigned long long)injected, torx_status_str(st), torx_last_error());
            }
            /* Every peer has read D rounds and waits before reading round D,
             * so round 2D's slot (round D's) cannot be free. */
            for (int i = 0; i < 200; i++) {
                st = inject_round(d, injected, spec_of_round(injected, n));
                T_CHECK(st == TORX_NO_ROOM,
                        "round %llu injected while peers have not read round %llu: %s "
                        "(expected TORX_NO_ROOM)",
                        (unsigned long long)injected, (unsigned long long)D, torx_status_str(st));
                sched_yield();
            }
            T_CHECK(d->cn_injected[0] == injected, "a refused inject moved cn_injected");
            /* release: the peers' acquire orders their reads after our checks. */
            __atomic_store_n(&sh->slow_release, 1, __ATOMIC_RELEASE);
        } else {
            /* acquire: pairs with rank 0's release above. */
            while (!__atomic_load_n(&sh->slow_release, __ATOMIC_ACQUIRE))
                T_CHECK(!task_spin(&spins), "timed out waiting for rank 0's NO_ROOM check");
        }
    }

    unsigned want = 1 + rank % depth;
    unsigned spins = 0;
    while (read < PIPE_ROUNDS) {
        int refused = 0;
        while (injected < PIPE_ROUNDS && injected - read < want) {
            st = inject_round(d, injected, spec_of_round(injected, n));
            if (st == TORX_NO_ROOM) {
                refused = 1;
                break;
            }
            T_CHECK(st == TORX_OK, "round %llu: inject gave %s: %s", (unsigned long long)injected,
                    torx_status_str(st), torx_last_error());
            injected++;
        }
        if (injected > read) {
            if (read_and_check(d, read, spec_of_round(read, n)))
                return 1;
            read++;
        } else if (refused) {
            T_CHECK(!task_spin(&spins), "timed out at round %llu", (unsigned long long)read);
        }
    }
    T_CHECK(d->cn_injected[0] == PIPE_ROUNDS && d->cn_read[0] == PIPE_ROUNDS,
            "counters %llu/%llu after %d rounds", (unsigned long long)d->cn_injected[0],
            (unsigned long long)d->cn_read[0], PIPE_ROUNDS);
    return 0;
}

START_TEST(test_cn_pipeline)
{
    unsigned n = job_sizes[_i];
    job_t j = job_create(n, sizeof(pipe_shared_t));
    job_run(&j, task_pipeline, NULL);
    pipe_shared_t *sh = j.scratch;
    for (unsigned r = 1; r < n; r++)
        ck_assert_uint_eq(sh->depth[r], sh->depth[0]);
    job_destroy(&j);
}
END_TEST

/* Disagreements: every task must get TORX_ERR_PROTO for the same round, with
 * a message naming what differed, and the next round must work. */
static int expect_proto(torxp_shm_dev_t *d, const char *what, const char *const *needles)
{
    unsigned char res[TORX_CN_PACKET_BYTES];
    uint64_t r = d->cn_read[0];
    torx_status_t st = cn_read_wait(d, res);
    T_CHECK(st == TORX_ERR_PROTO, "%s (round %llu): read gave %s, expected TORX_ERR_PROTO", what,
            (unsigned long long)r, st_name(st));
    const char *msg = torx_last_error();
    char round_str[48];
    snprintf(round_str, sizeof round_str, "round %llu", (unsigned long long)r);
    T_CHECK(strstr(msg, round_str) != NULL, "%s: message does not name %s: %s", what, round_str,
            msg);
    for (; *needles; needles++)
        T_CHECK(strstr(msg, *needles) != NULL, "%s: message lacks '%s': %s", what, *needles, msg);
    T_CHECK(d->cn_read[0] == r + 1, "%s: the failed round was not consumed", what);
    return 0;
}

static int task_mismatch(torxp_shm_dev_t *d, job_t *job, const void *arg)
{
    (void)job;
    (void)arg;
    unsigned n = (unsigned)d->base.size, rank = (unsigned)d->base.rank, last = n - 1;
    unsigned char in[TORX_CN_PACKET_BYTES];
    char last_task[32];
    snprintf(last_task, sizeof last_task, "task %u", last);
    memset(in, rank, sizeof in);
    torx_status_t st;

    if (n >= 2) {
        /* op: the last task says MAX, the rest ADD */
        st = torxp_shm_cn_inject(&d->base, 0, rank == last ? TORX_CN_MAX : TORX_CN_ADD, TORX_CN_S32,
                                 0, in);
        T_CHECK(st == TORX_OK, "inject: %s", torx_status_str(st));
        if (expect_proto(d, "op mismatch",
                         (const char *const[]){"ADD", "MAX", "task 0", last_task, NULL}))
            return 1;
        /* type: task 0 says U64, the rest S64 */
        st = torxp_shm_cn_inject(&d->base, 0, TORX_CN_AND, rank == 0 ? TORX_CN_U64 : TORX_CN_S64, 0,
                                 in);
        T_CHECK(st == TORX_OK, "inject: %s", torx_status_str(st));
        if (expect_proto(d, "type mismatch", (const char *const[]){"AND/U64", "AND/S64", NULL}))
            return 1;
        /* two roots */
        st = torxp_shm_cn_inject(&d->base, 0, TORX_CN_BCAST, TORX_CN_U32, rank == 0 || rank == last,
                                 in);
        T_CHECK(st == TORX_OK, "inject: %s", torx_status_str(st));
        char two[64];
        snprintf(two, sizeof two, "tasks 0 and %u", last);
        if (expect_proto(d, "two roots", (const char *const[]){"BCAST", two, NULL}))
            return 1;
    }
    /* no root */
    st = torxp_shm_cn_inject(&d->base, 0, TORX_CN_BCAST, TORX_CN_U32, 0, NULL);
    T_CHECK(st == TORX_OK, "inject: %s", torx_status_str(st));
    if (expect_proto(d, "no root", (const char *const[]){"BCAST", "no root", NULL}))
        return 1;

    /* The pipeline is still in step: a good round follows. */
    uint64_t r = d->cn_injected[0];
    spec_t s = {TORX_CN_ADD, TORX_CN_S64, 0};
    st = inject_round(d, r, s);
    T_CHECK(st == TORX_OK, "inject after errors: %s", torx_status_str(st));
    return read_and_check(d, r, s);
}

START_TEST(test_cn_mismatch)
{
    unsigned n = job_sizes[_i];
    job_t j = job_create(n, 0);
    job_run(&j, task_mismatch, NULL);
    job_destroy(&j);
}
END_TEST

/* Bad arguments are refused at once and take no round. */
static int task_inval(torxp_shm_dev_t *d, job_t *job, const void *arg)
{
    (void)job;
    (void)arg;
    unsigned char buf[TORX_CN_PACKET_BYTES] = {0};
    torx_pkt_dev_t *dev = &d->base;
    torx_status_t st;

    st = torxp_shm_cn_read(dev, 0, buf);
    T_CHECK(st == TORX_ERR_INVAL, "read before any inject gave %s", torx_status_str(st));
    st = torxp_shm_cn_inject(dev, 0, TORX_CN_NOPS, TORX_CN_S32, 0, buf);
    T_CHECK(st == TORX_ERR_INVAL && strstr(torx_last_error(), "op 7"),
            "op TORX_CN_NOPS gave %s: %s", torx_status_str(st), torx_last_error());
    st = torxp_shm_cn_inject(dev, 0, (torx_cn_op_t)-1, TORX_CN_S32, 0, buf);
    T_CHECK(st == TORX_ERR_INVAL, "op -1 gave %s", torx_status_str(st));
    st = torxp_shm_cn_inject(dev, 0, TORX_CN_ADD, TORX_CN_NTYPES, 0, buf);
    T_CHECK(st == TORX_ERR_INVAL && strstr(torx_last_error(), "type 4"),
            "type TORX_CN_NTYPES gave %s: %s", torx_status_str(st), torx_last_error());
    st = torxp_shm_cn_inject(dev, 0, TORX_CN_ADD, (torx_cn_type_t)-3, 0, buf);
    T_CHECK(st == TORX_ERR_INVAL, "type -3 gave %s", torx_status_str(st));
    st = torxp_shm_cn_inject(dev, 0, TORX_CN_XOR, TORX_CN_U64, 0, NULL);
    T_CHECK(st == TORX_ERR_INVAL && strstr(torx_last_error(), "NULL"),
            "XOR with NULL data gave %s: %s", torx_status_str(st), torx_last_error());
    st = torxp_shm_cn_inject(dev, 0, TORX_CN_BCAST, TORX_CN_U64, 1, NULL);
    T_CHECK(st == TORX_ERR_INVAL, "BCAST root with NULL data gave %s", torx_status_str(st));
    T_CHECK(d->cn_injected[0] == 0 && d->cn_read[0] == 0, "refused calls moved the counters");

    /* A region that was never initialized, and one set up for another job
     * size, are named rather than used. */
    torxp_shm_dev_t other = *d;
    size_t bytes = torxp_shm_cn_bytes((unsigned)d->base.size + 1);
    void *blank = aligned_alloc(64, align64(bytes));
    T_CHECK(blank != NULL, "aligned_alloc");
    memset(blank, 0, align64(bytes));
    other.cn = blank;
    st = torxp_shm_cn_inject(&other.base, 0, TORX_CN_ADD, TORX_CN_U64, 0, buf);
    T_CHECK(st == TORX_ERR_INVAL && strstr(torx_last_error(), "not initialized"),
            "uninitialized region gave %s: %s", torx_status_str(st), torx_last_error());
    torxp_shm_cn_init(blank, (unsigned)d->base.size + 1);
    st = torxp_shm_cn_inject(&other.base, 0, TORX_CN_ADD, TORX_CN_U64, 0, buf);
    T_CHECK(st == TORX_ERR_INVAL && strstr(torx_last_error(), "set up for"),
            "region of another job size gave %s: %s", torx_status_str(st), torx_last_error());
    free(blank);

    /* Round 0 is still the next round, and works; a NULL result buffer is
     * refused without consuming it. */
    spec_t s = {TORX_CN_MIN, TORX_CN_S32, 0};
    st = inject_round(d, 0, s);
    T_CHECK(st == TORX_OK, "inject after refusals: %s", torx_status_str(st));
    st = torxp_shm_cn_read(dev, 0, NULL);
    T_CHECK(st == TORX_ERR_INVAL && d->cn_read[0] == 0, "read into NULL gave %s, cn_read %llu",
            torx_status_str(st), (unsigned long long)d->cn_read[0]);
    return read_and_check(d, 0, s);
}

START_TEST(test_cn_inval)
{
    unsigned n = job_sizes[_i];
    job_t j = job_create(n, 0);
    job_run(&j, task_inval, NULL);
    job_destroy(&j);
}
END_TEST

/* ---- global interrupt ------------------------------------------------------ */

#define GI_ROUNDS 1000

typedef struct gi_shared {
    unsigned entered[GI_ROUNDS + 1]; /* tasks that entered round k */
} gi_shared_t;

/* Round after round: count in, arm, poll to completion, and check that every
 * task had entered before anyone left. Tasks dawdle on different rounds so
 * the arrival order changes. */
static int task_gi(torxp_shm_dev_t *d, job_t *job, const void *arg)
{
    (void)arg;
    gi_shared_t *sh = job->scratch;
    torx_pkt_dev_t *dev = &d->base;
    unsigned n = (unsigned)dev->size, rank = (unsigned)dev->rank;
    torx_status_t st = torxp_shm_gi_poll(dev, 0);
    T_CHECK(st == TORX_ERR_INVAL, "poll before any arm gave %s", torx_status_str(st));

    for (unsigned k = 1; k <= GI_ROUNDS; k++) {
        if ((k + rank) % 7 == 0)
            for (int i = 0; i < 3; i++)
                sched_yield();
        /* relaxed: the barrier itself must order this before the check
         * below in every task; that is what is being tested. */
        __atomic_fetch_add(&sh->entered[k], 1, __ATOMIC_RELAXED);
        st = torxp_shm_gi_arm(dev, 0);
        T_CHECK(st == TORX_OK, "arm round %u gave %s: %s", k, torx_status_str(st),
                torx_last_error());
        if (k == 1) {
            st = torxp_shm_gi_arm(dev, 0);
            T_CHECK(st == TORX_ERR_INVAL && strstr(torx_last_error(), "twice"),
                    "arming round 1 twice gave %s: %s", torx_status_str(st), torx_last_error());
        }
        unsigned spins = 0;
        while ((st = torxp_shm_gi_poll(dev, 0)) == TORX_AGAIN)
            T_CHECK(!task_spin(&spins), "timed out in barrier round %u", k);
        T_CHECK(st == TORX_OK, "poll round %u gave %s", k, torx_status_str(st));
        unsigned seen = __atomic_load_n(&sh->entered[k], __ATOMIC_RELAXED);
        T_CHECK(seen == n, "left barrier round %u when %u of %u tasks had entered it", k, seen, n);
        st = torxp_shm_gi_poll(dev, 0);
        T_CHECK(st == TORX_OK, "polling completed round %u again gave %s", k, torx_status_str(st));
    }
    T_CHECK(d->gi_armed[0] == GI_ROUNDS, "gi_armed %llu after %d rounds",
            (unsigned long long)d->gi_armed[0], GI_ROUNDS);
    return 0;
}

START_TEST(test_gi_rounds)
{
    unsigned n = job_sizes[_i];
    job_t j = job_create(n, sizeof(gi_shared_t));
    job_run(&j, task_gi, NULL);
    job_destroy(&j);
}
END_TEST

/* A barrier must hold a task until the last one arrives: rank 0 arms and
 * sees TORX_AGAIN for as long as the others hold back. */
typedef struct gi_hold_shared {
    int go;
} gi_hold_shared_t;

static int task_gi_hold(torxp_shm_dev_t *d, job_t *job, const void *arg)
{
    (void)arg;
    gi_hold_shared_t *sh = job->scratch;
    torx_pkt_dev_t *dev = &d->base;
    unsigned spins = 0;
    torx_status_t st;
    if (dev->rank == 0) {
        T_CHECK(torxp_shm_gi_arm(dev, 0) == TORX_OK, "arm: %s", torx_last_error());
        for (int i = 0; i < 500; i++) {
            st = torxp_shm_gi_poll(dev, 0);
            T_CHECK(st == TORX_AGAIN, "barrier completed with only task 0 in it (%s)",
                    torx_status_str(st));
            sched_yield();
        }
        /* release/acquire: only a flag; the barrier orders the rest. */
        __atomic_store_n(&sh->go, 1, __ATOMIC_RELEASE);
    } else {
        while (!__atomic_load_n(&sh->go, __ATOMIC_ACQUIRE))
            T_CHECK(!task_spin(&spins), "timed out waiting for task 0");
        T_CHECK(torxp_shm_gi_arm(dev, 0) == TORX_OK, "arm: %s", torx_last_error());
    }
    while ((st = torxp_shm_gi_poll(dev, 0)) == TORX_AGAIN)
        T_CHECK(!task_spin(&spins), "timed out in the barrier");
    T_CHECK(st == TORX_OK, "poll gave %s", torx_status_str(st));
    return 0;
}

START_TEST(test_gi_hold)
{
    unsigned n = job_sizes[1 + _i]; /* 2 tasks and up */
    job_t j = job_create(n, sizeof(gi_hold_shared_t));
    job_run(&j, task_gi_hold, NULL);
    job_destroy(&j);
}
END_TEST

/* ---- reproducible double sum ---------------------------------------------- */

static int shm_poll_nothing(torx_pkt_dev_t *dev)
{
    (void)dev; /* the shm collective network needs no progress calls */
    return 0;
}

static torx_status_t shm_inject0(torx_pkt_dev_t *dev, torx_cn_op_t op, torx_cn_type_t type,
                                 int is_root, const void *data)
{
    return torxp_shm_cn_inject(dev, 0, op, type, is_root, data);
}

static torx_status_t shm_read0(torx_pkt_dev_t *dev, void *result)
{
    return torxp_shm_cn_read(dev, 0, result);
}

static const torxp_fpsum_io_t shm_io = {
    .inject = shm_inject0,
    .read = shm_read0,
    .poll = shm_poll_nothing,
};

static uint64_t dbits(double x)
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

static double from_bits(uint64_t b)
{
    double x;
    memcpy(&x, &b, sizeof x);
    return x;
}

START_TEST(test_fpsum_helpers)
{
    static const int sizes[][2] = {{1, 1},  {2, 2},  {3, 3},    {4, 3},    {5, 4},     {8, 4},
                                   {16, 5}, {17, 6}, {512, 10}, {513, 11}, {1024, 11}, {65536, 17}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        ck_assert_msg(torxp_fpsum_headroom(sizes[i][0]) == sizes[i][1], "headroom(%d) = %d, not %d",
                      sizes[i][0], torxp_fpsum_headroom(sizes[i][0]), sizes[i][1]);

    ck_assert_int_eq(torxp_fpsum_exp(0.0), 1);
    ck_assert_int_eq(torxp_fpsum_exp(-0.0), 1);
    ck_assert_int_eq(torxp_fpsum_exp(DBL_TRUE_MIN), 1);
    ck_assert_int_eq(torxp_fpsum_exp(DBL_MIN), 1);
    ck_assert_int_eq(torxp_fpsum_exp(1.0), 1023);
    ck_assert_int_eq(torxp_fpsum_exp(-2.0), 1024);
    ck_assert_int_eq(torxp_fpsum_exp(DBL_MAX), 2046);
    ck_assert_int_eq(torxp_fpsum_exp(-INFINITY), 2047);
    ck_assert_int_eq(torxp_fpsum_exp(NAN), 2047);

    /* Alone at its own exponent, a value survives encode/decode exactly
     * while h <= 10 (no bit falls off the 63-bit lane). */
    for (uint64_t i = 0; i < 20000; i++) {
        uint64_t b = mix64(i);
        if (i % 4 == 0)
            b &= 0x800fffffffffffffULL; /* subnormals and zeros */
        double x = from_bits(b);
        if (isnan(x) || isinf(x))
            continue;
        for (int h = 1; h <= 10; h += 9) {
            int64_t e = torxp_fpsum_exp(x);
            double y = torxp_fpsum_decode(torxp_fpsum_encode(x, e, h), e, h);
            ck_assert_msg(dbits(y) == dbits(x) || (x == 0 && y == 0 && !signbit(y)),
                          "h=%d: %a came back as %a", h, x, y);
        }
    }
    /* With h = 11 the lowest significand bit is truncated. */
    double odd = 1.0 + DBL_EPSILON;
    ck_assert(torxp_fpsum_decode(torxp_fpsum_encode(odd, 1023, 11), 1023, 11) == 1.0);
    ck_assert(torxp_fpsum_decode(torxp_fpsum_encode(-odd, 1023, 11), 1023, 11) == -1.0);
    /* Below the lane maximum: 1.0 under a max exponent 60 higher keeps its
     * leading bit at 52 + 9 - 60 = 1, and bits too far down vanish. */
    ck_assert_int_eq(torxp_fpsum_encode(1.0, 1023 + 60, 1), 2);
    ck_assert(torxp_fpsum_decode(2, 1023 + 60, 1) == 1.0);
    ck_assert_int_eq(torxp_fpsum_encode(-1.0, 1023 + 62, 1), 0);
    ck_assert_int_eq(torxp_fpsum_encode(-3.0, 1024, 1), -(int64_t)(3ULL << 60));

    /* Specials. */
    ck_assert_int_eq(torxp_fpsum_encode(1.0, 2047, 3), 0);
    ck_assert_int_eq(torxp_fpsum_encode(INFINITY, 2047, 3), TORXP_FPSUM_CODE_PINF);
    ck_assert_int_eq(torxp_fpsum_encode(-INFINITY, 2047, 3), TORXP_FPSUM_CODE_NINF);
    ck_assert_int_eq(torxp_fpsum_encode(-NAN, 2047, 3), TORXP_FPSUM_CODE_NAN);
    ck_assert(torxp_fpsum_decode(3 * TORXP_FPSUM_CODE_PINF, 2047, 3) == INFINITY);
    ck_assert(torxp_fpsum_decode(5 * TORXP_FPSUM_CODE_NINF, 2047, 3) == -INFINITY);
    ck_assert(isnan(torxp_fpsum_decode(TORXP_FPSUM_CODE_PINF + TORXP_FPSUM_CODE_NINF, 2047, 3)));
    ck_assert(isnan(torxp_fpsum_decode(TORXP_FPSUM_CODE_NAN + TORXP_FPSUM_CODE_PINF, 2047, 3)));
}
END_TEST

START_TEST(test_fpsum_inval)
{
    torxp_shm_dev_t d;
    memset(&d, 0, sizeof d);
    d.base.ops = &harness_ops;
    d.base.size = 1;
    double in[33] = {0}, out[33];
    ck_assert_int_eq(torxp_fpsum_run(&d.base, &shm_io, in, out, 33), TORX_ERR_INVAL);
    ck_assert_ptr_nonnull(strstr(torx_last_error(), "n = 33"));
    ck_assert_int_eq(torxp_fpsum_run(&d.base, &shm_io, in, out, -1), TORX_ERR_INVAL);
    ck_assert_int_eq(torxp_fpsum_run(&d.base, &shm_io, NULL, out, 2), TORX_ERR_INVAL);
    ck_assert_int_eq(torxp_fpsum_run(&d.base, &shm_io, NULL, NULL, 0), TORX_OK);
    d.base.size = TORXP_FPSUM_MAX_TASKS;
    ck_assert_int_eq(torxp_fpsum_run(&d.base, &shm_io, in, out, 1), TORX_ERR_UNSUPPORTED);
    /* None of these touched the (absent) regions. */
    ck_assert_uint_eq(d.cn_injected[0], 0);
}
END_TEST

#define FP_LANES TORXP_FPSUM_MAX
#define FP_PERMS 6

/* Lanes of the permutation test, by kind. */
enum {
    FPL_MID = 0,        /* 0..13: exponents within +-30 */
    FPL_WIDE = 14,      /* 14..19: exponents within +-1000 */
    FPL_CANCEL = 20,    /* big values that cancel pairwise, small remainders */
    FPL_SUBNORMAL = 21, /* subnormals only */
    FPL_TINY = 22,      /* subnormals with the smallest normals */
    FPL_OVERFLOW = 23,  /* 0.75 * DBL_MAX each: +inf from two tasks on */
    FPL_ZEROS = 24,     /* +0 and -0 */
    FPL_INTEGERS = 25,  /* exact */
    FPL_PINF = 26,      /* one +inf among finite values */
    FPL_NINF = 27,      /* one -inf */
    FPL_INF_BOTH = 28,  /* +inf and -inf: nan (n >= 2) */
    FPL_NAN = 29,       /* one nan */
    FPL_SPREAD = 30,    /* 1e308 with 1e-308s: they vanish */
    FPL_SAME = 31,      /* 0.1 everywhere: exact sum, one rounding */
};

typedef struct fp_shared {
    double values[16][FP_LANES]; /* value set s */
    unsigned perm[FP_PERMS][16]; /* task r holds set perm[p][r] */
    double results[FP_PERMS][16][FP_LANES];
} fp_shared_t;

static double rand_double(uint64_t seed, int emin, int emax)
{
    uint64_t a = mix64(seed), b = mix64(seed ^ 0x5555);
    double m = (double)(a >> 11) * 0x1p-53 + 0.5; /* [0.5, 1.5) */
    int e = emin + (int)(b % (uint64_t)(emax - emin + 1));
    return ((b >> 40) & 1 ? -1.0 : 1.0) * ldexp(m, e);
}

static void fp_make_values(fp_shared_t *sh, unsigned n)
{
    for (unsigned s = 0; s < n; s++) {
        double *v = sh->values[s];
        uint64_t seed = 1000u * s + 7;
        for (int l = FPL_MID; l < FPL_WIDE; l++)
            v[l] = rand_double(seed + (uint64_t)l, -30, 30);
        for (int l = FPL_WIDE; l < FPL_CANCEL; l++)
            v[l] = rand_double(seed + (uint64_t)l, -1000, 1000);
        double big = fabs(rand_double(100 + s / 2, 40, 44));
        v[FPL_CANCEL] = (s % 2 ? -big : big) + rand_double(seed + 99, -12, -8);
        v[FPL_SUBNORMAL] = from_bits(mix64(seed + 200) & 0x800fffffffffffffULL);
        v[FPL_TINY] = s % 2 ? from_bits(mix64(seed + 300) & 0x800fffffffffffffULL)
                            : (s % 4 ? -DBL_MIN : DBL_MIN * 1.5);
        v[FPL_OVERFLOW] = 0.75 * DBL_MAX;
        v[FPL_ZEROS] = s % 2 ? -0.0 : 0.0;
        v[FPL_INTEGERS] = (double)((int64_t)(mix64(seed + 400) % 2000001) - 1000000);
        v[FPL_PINF] = s == 0 ? INFINITY : rand_double(seed + 500, 0, 10);
        v[FPL_NINF] = s == n - 1 ? -INFINITY : -1.0;
        v[FPL_INF_BOTH] = s == 0 ? INFINITY : s == n - 1 ? -INFINITY : 2.0;
        v[FPL_NAN] = s == n / 2 ? NAN : 3.0;
        v[FPL_SPREAD] = s == 0 ? 1e308 : 1e-308;
        v[FPL_SAME] = 0.1;
    }
}

static void fp_make_perms(fp_shared_t *sh, unsigned n)
{
    for (unsigned r = 0; r < n; r++) {
        sh->perm[0][r] = r;               /* identity */
        sh->perm[1][r] = n - 1 - r;       /* reversed */
        sh->perm[2][r] = (r + 1) % n;     /* rotated by one */
        sh->perm[3][r] = (r + n / 2) % n; /* rotated by half */
        sh->perm[4][r] = sh->perm[5][r] = r;
    }
    for (unsigned p = 4; p < FP_PERMS; p++) /* Fisher-Yates shuffles */
        for (unsigned r = n - 1; r > 0; r--) {
            unsigned k = (unsigned)(mix64(p * 977u + r) % (r + 1));
            unsigned t = sh->perm[p][r];
            sh->perm[p][r] = sh->perm[p][k];
            sh->perm[p][k] = t;
        }
}

static int task_fpsum(torxp_shm_dev_t *d, job_t *job, const void *arg)
{
    (void)arg;
    fp_shared_t *sh = job->scratch;
    unsigned rank = (unsigned)d->base.rank;
    for (unsigned p = 0; p < FP_PERMS; p++) {
        torx_status_t st = torxp_fpsum_run(&d->base, &shm_io, sh->values[sh->perm[p][rank]],
                                           sh->results[p][rank], FP_LANES);
        T_CHECK(st == TORX_OK, "permutation %u: %s: %s", p, torx_status_str(st), torx_last_error());
    }
    T_CHECK(d->cn_injected[0] == 2 * FP_PERMS && d->cn_read[0] == 2 * FP_PERMS,
            "%llu rounds injected, %llu read: expected two per sum",
            (unsigned long long)d->cn_injected[0], (unsigned long long)d->cn_read[0]);
    return 0;
}

/* Checks one lane of a sum over sets 0..n-1 against a long-double
 * reference, within the bound documented in fpsum_internal.h plus the
 * reference's own rounding error. */
static void fp_check_lane(const fp_shared_t *sh, unsigned n, int lane, double got)
{
    long double ref = 0, mag = 0;
    int64_t emax = 1;
    for (unsigned s = 0; s < n; s++) {
        double x = sh->values[s][lane];
        ref += x;
        mag += fabsl((long double)x);
        int64_t e = torxp_fpsum_exp(x);
        emax = e > emax ? e : emax;
    }
    switch (lane) {
    case FPL_PINF:
        ck_assert_msg(got == INFINITY, "lane %d: %a, expected +inf", lane, got);
        return;
    case FPL_NINF:
        ck_assert_msg(got == -INFINITY, "lane %d: %a, expected -inf", lane, got);
        return;
    case FPL_INF_BOTH:
        ck_assert_msg(n >= 2 ? isnan(got) : got == INFINITY, "lane %d: %a, expected %s", lane, got,
                      n >= 2 ? "nan" : "+inf");
        return;
    case FPL_NAN:
        ck_assert_msg(isnan(got), "lane %d: %a, expected nan", lane, got);
        return;
    case FPL_OVERFLOW:
        ck_assert_msg(n >= 2 ? got == INFINITY : got == 0.75 * DBL_MAX, "lane %d: %a (n=%u)", lane,
                      got, n);
        return;
    case FPL_ZEROS:
        ck_assert_msg(dbits(got) == 0, "lane %d: %a, expected +0", lane, got);
        return;
    case FPL_INTEGERS:
    case FPL_SAME:
    case FPL_SPREAD:
        /* Exact integer sums (or nothing lost), rounded once. */
        ck_assert_msg(got == (double)ref, "lane %d: %a, expected exactly %a", lane, got,
                      (double)ref);
        return;
    }
    int h = torxp_fpsum_headroom((int)n);
    long double q = ldexpl(1.0L, (int)(emax - 1085 + h));
    long double ulp = got == 0 ? ldexpl(1.0L, -1074)
                               : ldexpl(1.0L, ilogb(got) - 52 < -1074 ? -1074 : ilogb(got) - 52);
    long double ref_err = mag * n * ldexpl(1.0L, -63);
    long double bound = n * q + ulp + ref_err;
    long double err = fabsl((long double)got - ref);
    ck_assert_msg(isfinite(got) && err <= bound,
                  "lane %d: %a, reference %La, error %Lg > bound %Lg", lane, got, ref, err, bound);
}

/* Every task under every permutation got the same bits, and those are
 * right. */
static void fp_check_results(const fp_shared_t *sh, unsigned n)
{
    for (unsigned p = 0; p < FP_PERMS; p++)
        for (unsigned r = 0; r < n; r++)
            for (int l = 0; l < FP_LANES; l++)
                ck_assert_msg(dbits(sh->results[p][r][l]) == dbits(sh->results[0][0][l]),
                              "lane %d: task %u under permutation %u got %a, task 0 under the "
                              "identity %a",
                              l, r, p, sh->results[p][r][l], sh->results[0][0][l]);
    for (int l = 0; l < FP_LANES; l++)
        fp_check_lane(sh, n, l, sh->results[0][0][l]);
}

START_TEST(test_fpsum_permutations)
{
    unsigned n = job_sizes[_i];
    job_t j = job_create(n, sizeof(fp_shared_t));
    fp_shared_t *sh = j.scratch;
    fp_make_values(sh, n);
    fp_make_perms(sh, n);
    job_run(&j, task_fpsum, NULL);
    fp_check_results(sh, n);
    job_destroy(&j);
}
END_TEST

/* A task alone gets its values back bitwise (zero as +0, nan as a nan). */
static int task_fpsum_alone(torxp_shm_dev_t *d, job_t *job, const void *arg)
{
    (void)job;
    (void)arg;
    double in[FP_LANES], out[FP_LANES];
    for (int i = 0; i < 2000; i++) {
        for (int l = 0; l < FP_LANES; l++)
            in[l] = from_bits(mix64((uint64_t)i * FP_LANES + (uint64_t)l) &
                              (l % 3 ? UINT64_MAX : 0x800fffffffffffffULL));
        torx_status_t st = torxp_fpsum_run(&d->base, &shm_io, in, out, FP_LANES);
        T_CHECK(st == TORX_OK, "sum %d: %s", i, torx_status_str(st));
        for (int l = 0; l < FP_LANES; l++) {
            double x = in[l], y = out[l];
            int ok = isnan(x) ? isnan(y) : x == 0 ? dbits(y) == 0 : dbits(x) == dbits(y);
            T_CHECK(ok, "sum %d lane %d: %a came back as %a", i, l, x, y);
        }
    }
    /* In place, and fewer than 32 lanes. */
    in[0] = 1.5;
    in[1] = -DBL_TRUE_MIN;
    in[2] = 123.0;
    torx_status_t st = torxp_fpsum_run(&d->base, &shm_io, in, in, 2);
    T_CHECK(st == TORX_OK && in[0] == 1.5 && in[1] == -DBL_TRUE_MIN && in[2] == 123.0,
            "in-place sum of 2: %s, %a %a %a", torx_status_str(st), in[0], in[1], in[2]);
    return 0;
}

START_TEST(test_fpsum_alone)
{
    job_t j = job_create(1, 0);
    job_run(&j, task_fpsum_alone, NULL);
    job_destroy(&j);
}
END_TEST

/* When another task injects something else, the sum reports the
 * disagreement instead of a number, and the next sum works. */
static int task_fpsum_mismatch(torxp_shm_dev_t *d, job_t *job, const void *arg)
{
    (void)job;
    (void)arg;
    double in[2] = {1.0, -2.5}, out[2] = {0, 0};
    torx_status_t st;
    if (d->base.rank == 0) {
        st = torxp_fpsum_run(&d->base, &shm_io, in, out, 2);
        T_CHECK(st == TORX_ERR_PROTO && strstr(torx_last_error(), "MAX/S64") &&
                    strstr(torx_last_error(), "ADD/S64"),
                "sum against a foreign ADD gave %s: %s", torx_status_str(st), torx_last_error());
    } else {
        unsigned char buf[TORX_CN_PACKET_BYTES] = {0};
        st = torxp_shm_cn_inject(&d->base, 0, TORX_CN_ADD, TORX_CN_S64, 0, buf);
        T_CHECK(st == TORX_OK, "inject: %s", torx_status_str(st));
        st = cn_read_wait(d, buf);
        T_CHECK(st == TORX_ERR_PROTO, "read gave %s", st_name(st));
    }
    st = torxp_fpsum_run(&d->base, &shm_io, in, out, 2);
    T_CHECK(st == TORX_OK, "sum after the error: %s: %s", torx_status_str(st), torx_last_error());
    double n = d->base.size;
    T_CHECK(out[0] == n && out[1] == -2.5 * n, "sum after the error: %a %a", out[0], out[1]);
    return 0;
}

START_TEST(test_fpsum_mismatch)
{
    job_t j = job_create(job_sizes[1 + _i], 0);
    job_run(&j, task_fpsum_mismatch, NULL);
    job_destroy(&j);
}
END_TEST

/* ---- through the public API, on a real device ----------------------------- */

/* Each task sums the value sets under every permutation with
 * torx_cn_allreduce_sum_double into the shared results (checked by the
 * parent like the direct runs), then runs a public cn round and public
 * barriers. */
static int task_public(torx_boot_t *boot, void *arg)
{
    fp_shared_t *sh = arg; /* MAP_SHARED, set up by the parent */
    unsigned n = (unsigned)boot->size, rank = (unsigned)boot->rank;
    torx_shape_t shape = {.x = (uint8_t)n, .y = 1, .z = 1, .t = 1};
    torx_pkt_dev_t *dev = NULL;
    torx_status_t st = test_open(boot, shape, &dev);
    TASK_CHECK(st == TORX_OK, "torx_pkt_open: %s", torx_last_error());

    for (unsigned p = 0; p < FP_PERMS; p++) {
        st = torx_cn_allreduce_sum_double(dev, sh->values[sh->perm[p][rank]], sh->results[p][rank],
                                          FP_LANES);
        TASK_CHECK(st == TORX_OK, "sum %u: %s", p, torx_last_error());
    }
    st = torx_cn_allreduce_sum_double(dev, sh->values[0], sh->results[0][rank], 33);
    TASK_CHECK(st == TORX_ERR_INVAL, "33 doubles gave %s", torx_status_str(st));

    uint64_t v[LANES64], res[LANES64];
    for (unsigned l = 0; l < LANES64; l++)
        v[l] = rank + l;
    st = torx_cn_inject(dev, TORX_CN_ADD, TORX_CN_U64, 0, v);
    TASK_CHECK(st == TORX_OK, "torx_cn_inject: %s", torx_last_error());
    unsigned spins = 0;
    double end = test_now() + TASK_SECONDS;
    while ((st = torx_cn_read(dev, res)) == TORX_AGAIN) {
        torx_pkt_poll(dev);
        test_relax(&spins);
        TASK_CHECK(test_now() < end, "torx_cn_read timed out");
    }
    TASK_CHECK(st == TORX_OK, "torx_cn_read: %s", torx_last_error());
    for (unsigned l = 0; l < LANES64; l++)
        TASK_CHECK(res[l] == (uint64_t)n * (n - 1) / 2 + (uint64_t)n * l, "lane %u: %llu", l,
                   (unsigned long long)res[l]);

    /* Channels: every channel's rounds pair up among themselves, whatever
     * order a task interleaves them in. Even ranks go through the channels
     * upward, odd ranks downward; round k of channel c sums rank * 10 + c
     * + k in lane 0. */
    for (int k = 0; k < 3; k++) {
        for (unsigned i = 0; i < TORX_CN_CHANNELS; i++) {
            unsigned c = rank % 2 ? TORX_CN_CHANNELS - 1 - i : i;
            memset(v, 0, sizeof v);
            v[0] = (uint64_t)rank * 10 + c + (uint64_t)k;
            st = torx_cn_inject_on(dev, c, TORX_CN_ADD, TORX_CN_U64, 0, v);
            TASK_CHECK(st == TORX_OK, "torx_cn_inject_on(%u): %s", c, torx_last_error());
        }
        for (unsigned i = 0; i < TORX_CN_CHANNELS; i++) {
            unsigned c = rank % 2 ? i : TORX_CN_CHANNELS - 1 - i;
            while ((st = torx_cn_read_on(dev, c, res)) == TORX_AGAIN) {
                torx_pkt_poll(dev);
                test_relax(&spins);
                TASK_CHECK(test_now() < end, "torx_cn_read_on(%u) timed out", c);
            }
            TASK_CHECK(st == TORX_OK, "torx_cn_read_on(%u): %s", c, torx_last_error());
            uint64_t want = (uint64_t)n * (n - 1) / 2 * 10 + (uint64_t)n * (c + (uint64_t)k);
            TASK_CHECK(res[0] == want, "channel %u round %d: %llu, expected %llu", c, k,
                       (unsigned long long)res[0], (unsigned long long)want);
        }
        for (unsigned i = 0; i < TORX_GI_CHANNELS; i++) {
            unsigned c = rank % 2 ? TORX_GI_CHANNELS - 1 - i : i;
            st = torx_gi_arm_on(dev, c);
            TASK_CHECK(st == TORX_OK, "torx_gi_arm_on(%u): %s", c, torx_last_error());
        }
        for (unsigned i = 0; i < TORX_GI_CHANNELS; i++) {
            unsigned c = rank % 2 ? i : TORX_GI_CHANNELS - 1 - i;
            while ((st = torx_gi_poll_on(dev, c)) == TORX_AGAIN) {
                torx_pkt_poll(dev);
                test_relax(&spins);
                TASK_CHECK(test_now() < end, "torx_gi_poll_on(%u) timed out", c);
            }
            TASK_CHECK(st == TORX_OK, "torx_gi_poll_on(%u): %s", c, torx_last_error());
        }
    }
    TASK_CHECK(torx_cn_inject_on(dev, TORX_CN_CHANNELS, TORX_CN_ADD, TORX_CN_U64, 0, v) ==
                       TORX_ERR_INVAL &&
                   strstr(torx_last_error(), "channel 4") != NULL,
               "channel %d accepted", TORX_CN_CHANNELS);
    TASK_CHECK(torx_gi_arm_on(dev, 99) == TORX_ERR_INVAL, "GI channel 99 accepted");

    for (int k = 0; k < 10; k++) {
        st = torx_gi_arm(dev);
        TASK_CHECK(st == TORX_OK, "torx_gi_arm: %s", torx_last_error());
        while ((st = torx_gi_poll(dev)) == TORX_AGAIN) {
            test_relax(&spins);
            TASK_CHECK(test_now() < end, "torx_gi_poll timed out");
        }
        TASK_CHECK(st == TORX_OK, "torx_gi_poll: %s", torx_last_error());
    }
    torx_pkt_close(dev);
    return 0;
}

START_TEST(test_public_api)
{
    static const unsigned sizes[] = {2, 3, 8};
    unsigned n = sizes[_i];
    fp_shared_t *sh =
        mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_msg(sh != MAP_FAILED, "mmap: %s", strerror(errno));
    fp_make_values(sh, n);
    fp_make_perms(sh, n);
    RUN_JOB((int)n, task_public, sh);
    fp_check_results(sh, n);
    munmap(sh, sizeof *sh);
}
END_TEST

static Suite *cn_suite(void)
{
    Suite *s = suite_create("cn");
    TCase *tc = tcase_create("cn");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_cn_ops, 0, NJOB_SIZES);
    tcase_add_loop_test(tc, test_cn_bcast, 0, NJOB_SIZES);
    tcase_add_loop_test(tc, test_cn_pipeline, 0, NJOB_SIZES);
    tcase_add_loop_test(tc, test_cn_mismatch, 0, NJOB_SIZES);
    tcase_add_loop_test(tc, test_cn_inval, 0, NJOB_SIZES);
    tcase_add_loop_test(tc, test_gi_rounds, 0, NJOB_SIZES);
    tcase_add_loop_test(tc, test_gi_hold, 0, NJOB_SIZES - 1);
    tcase_add_test(tc, test_fpsum_helpers);
    tcase_add_test(tc, test_fpsum_inval);
    tcase_add_loop_test(tc, test_fpsum_permutations, 0, NJOB_SIZES);
    tcase_add_test(tc, test_fpsum_alone);
    tcase_add_loop_test(tc, test_fpsum_mismatch, 0, NJOB_SIZES - 1);
    tcase_add_loop_test(tc, test_public_api, 0, 3);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(cn_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
