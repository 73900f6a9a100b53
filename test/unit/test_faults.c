/* Fault injection sweep (a build configured with --enable-fault-injection):
 * exhaustion and failed injections are errors, never crashes, hangs or
 * silent successes.
 *
 * A 2-task job exchanges one-packet, adaptive eager, eager and rendezvous
 * messages both ways, every byte checked. In task 0, TORX_FAULT_ALLOC=N
 * fails its Nth allocation, or TORX_FAULT_INJECT=N its Nth packet
 * injection; for every N up to the number such calls a clean run makes (and
 * one past it), the job must either complete with all data correct, or end
 * within seconds with the tasks reporting an error whose message says what
 * failed. A task that hangs, dies by a signal or receives wrong data fails
 * the test. */
#include "harness.h"
#include "msglayer/msg_internal.h"

#include <torx/msg.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

enum { OUT_NONE = -1, OUT_OK = 0, OUT_ERROR = 3, OUT_HANG = 4, OUT_WRONG = 5 };
enum { NSIZES = 4 };
static const size_t sizes[NSIZES] = {100, 1500, 5000, 50000}; /* one-packet, adaptive, eager, rzv */
#define WAIT_S 5.0

/* Shared between the test and its forked tasks (MAP_SHARED). */
typedef struct shared {
    volatile int outcome[2];
    volatile int failed; /* a task ended with an error: its peer stops waiting */
    volatile int ready[2]; /* a task has all its data and would finalize */
    unsigned long calls[TORXP_FAULT_KINDS]; /* task 0's calls in a clean run */
    char why[2][256];
} shared_t;

static shared_t *sh;
static int fault_kind;
static long fault_n;

static uint8_t pattern(int sender, size_t i)
{
    return (uint8_t)(i * 131u + (i >> 8) * 17u + (unsigned)sender * 29u + 1u);
}

typedef struct rx_state {
    uint8_t buf[NSIZES][50000];
    volatile int done[NSIZES];
    torx_status_t status[NSIZES];
    size_t got[NSIZES];
} rx_state_t;

/* The handler's arg: which message of which state. */
typedef struct slot {
    rx_state_t *r;
    int k;
} slot_t;
static slot_t slots[NSIZES];

static void slot_done(torx_ctx_t *ctx, void *arg, torx_status_t st, size_t received)
{
    (void)ctx;
    slot_t *s = arg;
    s->r->status[s->k] = st;
    s->r->got[s->k] = received;
    s->r->done[s->k] = 1;
}

static void handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info, torx_recv_t *recv)
{
    (void)ctx;
    rx_state_t *r = harg;
    int k = 0;
    if (info->hdr_len == 1)
        k = ((const uint8_t *)info->hdr)[0] % NSIZES;
    recv->buf = r->buf[k];
    recv->len = sizeof r->buf[k];
    recv->done = slot_done;
    slots[k] = (slot_t){r, k};
    recv->arg = &slots[k];
}

static void sent(torx_ctx_t *ctx, torx_msg_t *msg, void *arg)
{
    (void)ctx;
    (void)msg;
    ++*(volatile int *)arg;
}

/* Ends the task with an error that must say what failed. */
static int ended_with_error(int rank, const char *why)
{
    snprintf(sh->why[rank], sizeof sh->why[rank], "%s", why && *why ? why : "(no message)");
    sh->failed = 1;
    sh->outcome[rank] = why && *why ? OUT_ERROR : OUT_WRONG;
    return 0;
}

static int task(torx_boot_t *boot, void *arg)
{
    (void)arg;
    const int rank = boot->rank, peer = 1 - rank;
    if (rank == 0 && fault_n > 0) {
        char v[32];
        snprintf(v, sizeof v, "%ld", fault_n);
        setenv(fault_kind == TORXP_FAULT_ALLOC ? "TORX_FAULT_ALLOC" : "TORX_FAULT_INJECT", v, 1);
    }
    setenv("TORX_VERBOSE", "-1", 1);
    const torx_limits_t lim = {.onepkt_limit = 240, .eager_limit = 8000, .adaptive_limit = 2000};
    torx_init_attr_t attr = {.boot = boot, .mode = -1, .limits = &lim};
    torx_ctx_t *ctx;
    if (torx_init(&attr, &ctx) != TORX_OK)
        return ended_with_error(rank, torx_last_error());
    static rx_state_t r;
    memset((void *)&r, 0, sizeof r);
    torx_register(ctx, 7, handler, &r);
    static uint8_t out[NSIZES][50000];
    static torx_msg_t msg[NSIZES];
    volatile int nsent = 0;
    for (int k = 0; k < NSIZES; k++) {
        for (size_t i = 0; i < sizes[k]; i++)
            out[k][i] = pattern(rank, i + (size_t)k);
        const uint8_t hdr = (uint8_t)k;
        torx_status_t st = torx_send(ctx, &msg[k], peer, 7, &hdr, 1, out[k], sizes[k],
                                     TORX_PROTO_AUTO, sent, (void *)&nsent);
        if (st != TORX_OK)
            return ended_with_error(rank, torx_last_error());
    }
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        const int n = torx_advance(ctx);
        if (n < 0)
            return ended_with_error(rank, torx_last_error());
        int all = nsent == NSIZES;
        for (int k = 0; k < NSIZES; k++)
            all &= r.done[k];
        if (all)
            break;
        if (sh->failed) /* the peer ended with an error: so does this job */
            return ended_with_error(rank, "the peer task ended with an error");
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9 > WAIT_S) {
            sh->failed = 1;
            snprintf(sh->why[rank], sizeof sh->why[rank],
                     "nothing completed for %.0f s: sent %d of %d, received %d %d %d %d", WAIT_S,
                     nsent, NSIZES, r.done[0], r.done[1], r.done[2], r.done[3]);
            sh->outcome[rank] = OUT_HANG;
            return 0;
        }
    }
    for (int k = 0; k < NSIZES; k++) {
        if (torx_msg_status(&msg[k]) != TORX_OK)
            return ended_with_error(rank, torx_last_error());
        if (r.status[k] != TORX_OK) {
            /* The receive failed because the context did: advancing says
             * why again (torx_last_error may hold a later, lesser error). */
            if (torx_advance(ctx) < 0)
                return ended_with_error(rank, torx_last_error());
            char why[64];
            snprintf(why, sizeof why, "receive %d failed: %s", k, torx_status_str(r.status[k]));
            return ended_with_error(rank, why);
        }
        if (r.got[k] != sizes[k]) {
            sh->outcome[rank] = OUT_WRONG;
            snprintf(sh->why[rank], sizeof sh->why[rank], "message %d: %zu bytes, want %zu", k,
                     r.got[k], sizes[k]);
            return 0;
        }
        for (size_t i = 0; i < sizes[k]; i++)
            if (r.buf[k][i] != pattern(peer, i + (size_t)k)) {
                sh->outcome[rank] = OUT_WRONG;
                snprintf(sh->why[rank], sizeof sh->why[rank], "message %d: byte %zu wrong", k, i);
                return 0;
            }
    }
    if (rank == 0)
        for (int kind = 0; kind < TORXP_FAULT_KINDS; kind++)
            sh->calls[kind] = torxp_fault_calls(kind);
    /* As a launcher ends a job whose task failed: a task whose peer ended
     * with an error does not finalize (its final barrier would wait for a
     * task that is gone), it ends with that error too. */
    sh->ready[rank] = 1;
    while (!sh->ready[peer] && !sh->failed)
        if (torx_advance(ctx) < 0) /* a packet the peer waits for was lost */
            return ended_with_error(rank, torx_last_error());
    if (!sh->ready[peer])
        return ended_with_error(rank, "the peer task ended with an error");
    const torx_status_t st = torx_finalize(ctx);
    if (st != TORX_OK)
        return ended_with_error(rank, torx_last_error());
    sh->outcome[rank] = OUT_OK;
    return 0;
}

/* Runs the job with task 0's Nth call of kind failing (n 0: none); returns
 * a description of what went wrong, or NULL when the job completed or ended
 * with named errors. *completed says which. */
static const char *run_job(int kind, long n, int *completed)
{
    static char what[700];
    fault_kind = kind;
    fault_n = n;
    sh->outcome[0] = sh->outcome[1] = OUT_NONE;
    sh->failed = 0;
    sh->ready[0] = sh->ready[1] = 0;
    sh->why[0][0] = sh->why[1][0] = 0;
    torx_boot_fork_run(2, task, NULL, 30.0, 0);
    *completed = sh->outcome[0] == OUT_OK && sh->outcome[1] == OUT_OK;
    /* Task 0, where the fault is, must say what it was. */
    const char *cause = kind == TORXP_FAULT_ALLOC ? "memory" : "injection failed";
    if (sh->outcome[0] == OUT_ERROR && !strstr(sh->why[0], cause) &&
        !strstr(sh->why[0], "peer task ended")) {
        snprintf(what, sizeof what, "task 0 ended with an error that does not say \"%s\": %s",
                 cause, sh->why[0]);
        return what;
    }
    for (int r = 0; r < 2; r++) {
        const int o = sh->outcome[r];
        if (o == OUT_OK || o == OUT_ERROR)
            continue;
        snprintf(what, sizeof what, "task %d %s: %s", r,
                 o == OUT_NONE ? "crashed or was killed" : o == OUT_HANG ? "hung" : "got wrong data",
                 sh->why[r]);
        return what;
    }
    return NULL;
}

static void sweep(int kind)
{
    int completed;
    const char *bad = run_job(kind, 0, &completed);
    ck_assert_msg(!bad && completed, "the clean run failed: %s", bad ? bad : "an error");
    const unsigned long calls = sh->calls[kind];
    ck_assert_msg(calls > 0, "a clean run made no %s calls", kind ? "injection" : "allocation");
    unsigned long ok = 0, errors = 0;
    for (unsigned long n = 1; n <= calls + 1; n++) {
        bad = run_job(kind, (long)n, &completed);
        ck_assert_msg(!bad, "%s %lu of %lu failing: %s", kind ? "injection" : "allocation", n,
                      calls, bad);
        if (completed)
            ok++;
        else
            errors++;
    }
    printf("test_faults: %s: %lu calls in a clean run; failing each: %lu runs completed, %lu "
           "ended with a named error\n",
           kind ? "injection" : "allocation", calls, ok, errors);
    ck_assert_msg(errors > 0, "no failure was ever reported: is fault injection built in?");
}

START_TEST(alloc_sweep)
{
    sweep(TORXP_FAULT_ALLOC);
}
END_TEST

START_TEST(inject_sweep)
{
    sweep(TORXP_FAULT_INJECT);
}
END_TEST

int main(void)
{
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return 1;
    Suite *s = suite_create("faults");
    TCase *tc = tcase_create("sweep");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, alloc_sweep);
    tcase_add_test(tc, inject_sweep);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
