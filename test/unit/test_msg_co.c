/* Coprocessor mode (TORX_MODE=co): the protocol runs of test_msg and the
 * chaos ordering run of test_msg_order with a communication thread per
 * task, both with the thread owning the network (TORX_CO_THREAD=own) and
 * with the task doing it because cores are short (shared); transient work
 * units (costart/cojoin) in both; a rendezvous that completes while the
 * task computes without advancing (own), and one the task moves itself
 * (shared); an idle co job that sleeps; a wait on a global-interrupt round
 * that ends with it; the node sized to fit the host
 * when TORX_CORES_PER_NODE is unset; one injection FIFO's slots shared
 * round the busy peers. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif

#include "harness.h"
#include "msg_test.h"

#include <math.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

/* A device whose tasks are not the host's processes (sim: actors of one
 * process, in simulated time): there the host's CPU counts and bindings
 * say nothing of a task, and a task's pauses and clock are the device's
 * (docs/packet-layer.md#time-waiting-and-threads). */
static int modelled(torx_ctx_t *ctx)
{
    return (torx_ctx_device(ctx)->caps & TORXP_CAP_MODELLED) != 0;
}

/* Who runs this: the thread on the host; on sim, where every task and
 * thread is an actor of one thread, the actor. Each has a per-task state
 * of its own (torxp_task_state: per thread, or the sim device's per
 * actor). */
static uintptr_t runner(void)
{
    return (uintptr_t)torxp_task_state();
}

/* ---- Protocols -------------------------------------------------------------------- */

/* Two-task variants first (NCO_TWO_TASK_VARIANTS of them), then the ones of
 * three tasks, which run in the "multi" case: test/ofi-threads.sh runs only
 * that case in its hybrid run, where a job of two tasks is one emulated host. */
static const variant_t co_variants[] = {
    {"co-onepkt", TORX_PROTO_ONEPKT, NULL, NULL, NULL, "co", NULL, 0, 0, 2, NULL, NULL, NULL},
    {"co-eager", TORX_PROTO_EAGER, NULL, NULL, NULL, "co", NULL, 1, 0, 2, NULL, NULL, NULL},
    {"co-adaptive", TORX_PROTO_ADAPTIVE, NULL, NULL, NULL, "co", NULL, 0, 0, 2, NULL, NULL, NULL},
    {"co-rzv", TORX_PROTO_RZV, NULL, NULL, NULL, "co", NULL, 1, 0, 2, NULL, NULL, NULL},
    {"co-rzv-packets", TORX_PROTO_RZV, NULL, NULL, "packets", "co", NULL, 1, 0, 2, NULL, NULL,
     NULL},
    {"co-rzv-fifo-bulk", TORX_PROTO_RZV, NULL, NULL, NULL, "co", "fifo", 0, 0, 2, NULL, NULL, NULL},
    {"co-cut-eager", TORX_PROTO_EAGER, NULL, NULL, NULL, "co", NULL, 0, 1, 2, NULL, NULL, NULL},
    {"co-staged-wrap", TORX_PROTO_EAGER, NULL, NULL, NULL, "co", NULL, 0, 0, 2, "1", "1000",
     "4096"},
    {"co-cut-rzv", TORX_PROTO_RZV, NULL, NULL, NULL, "co", NULL, 0, 1, 2, NULL, NULL, NULL},
    {"co-cut-rzv-fifo", TORX_PROTO_RZV, NULL, NULL, NULL, "co", "fifo", 0, 1, 2, NULL, NULL, NULL},
    {"co-auto-240", TORX_PROTO_AUTO, "240", NULL, NULL, "co", NULL, 0, 0, 3, NULL, NULL, NULL},
    {"co-auto-65536", TORX_PROTO_AUTO, "65536", NULL, NULL, "co", NULL, 0, 0, 3, NULL, NULL, NULL},
    {"co-auto-adaptive-1000", TORX_PROTO_AUTO, "65536", "1000", NULL, "co", NULL, 0, 0, 3, NULL,
     NULL, NULL},
    {"co-cut-auto-1000", TORX_PROTO_AUTO, "1000", NULL, NULL, "co", NULL, 0, 1, 3, NULL, NULL,
     NULL},
};
#define NCO_VARIANTS ((int)(sizeof co_variants / sizeof co_variants[0]))
#define NCO_TWO_TASK_VARIANTS 10

static const char *const co_roles[] = {"own", "shared"};

/* _i: variant * 2 + role */
START_TEST(co_protocol_variant)
{
    const variant_t *v = &co_variants[_i / 2];
    ck_assert_msg((_i / 2 < NCO_TWO_TASK_VARIANTS) == (v->ntasks == 2),
                  "co_variants: %s is out of its place (two-task variants first)", v->name);
    setenv("TORX_CO_THREAD", co_roles[_i % 2], 1);
    ck_assert_msg(test_run_variant(v) == 0, "variant %s (TORX_CO_THREAD=%s) failed", v->name,
                  co_roles[_i % 2]);
}
END_TEST

/* ---- Ordering under chaos ------------------------------------------------------------ */

START_TEST(co_mixed_protocols_ordered_under_chaos)
{
    setenv("TORX_MODE", "co", 1);
    setenv("TORX_CO_THREAD", co_roles[_i / 2], 1);
    setenv("TORX_CHAOS", "4242", 1);
    setenv("TORX_ADAPTIVE_LIMIT", "2000", 1);
    if (_i % 2 == 1)
        setenv("TORX_RZV_DATA", "packets", 1);
    uint32_t per_peer = 600 / SCALE;
    const double t0 = test_now();
    RUN_JOB(4, mix_task, &per_peer);
    fprintf(stderr, "co (%s): mixed protocols under chaos (rzv data by %s): %.2f s\n",
            co_roles[_i / 2], _i % 2 ? "packets" : "bulk get", test_now() - t0);
}
END_TEST

static int init_fails_naming_co_thread(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_ctx_t *ctx = NULL;
    torx_init_attr_t attr = {.boot = boot, .mode = TORX_MODE_CO};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_ERR_ENV && ctx == NULL, "init accepted it");
    TASK_CHECK(strstr(torx_last_error(), "TORX_CO_THREAD") && strstr(torx_last_error(), "maybe"),
               "the error does not name the variable and value: %s", torx_last_error());
    return 0;
}

static void fit_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                        torx_recv_t *recv)
{
    (void)ctx;
    (void)recv;
    if (info->data && info->data_len == sizeof(uint64_t))
        memcpy(harg, info->data, sizeof(uint64_t));
}

/* ---- Work units ------------------------------------------------------------------------ */

#define UNITS 3000 /* more than the thread's queue holds */

typedef struct unit_arg {
    uint64_t in, out;
    uint32_t order;       /* the unit's place in the run order */
    uint32_t *next_order; /* shared counter: only the communication thread runs units */
    uintptr_t *ran_on;
} unit_arg_t;

static void unit_fn(void *p)
{
    unit_arg_t *u = p;
    uint64_t x = u->in;
    for (int i = 0; i < 100; i++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    u->out = x;
    u->order = (*u->next_order)++;
    *u->ran_on = runner();
}

static int units_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_ctx_t *ctx;
    torx_init_attr_t attr = {.boot = boot, .mode = TORX_MODE_CO};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(torx_mode(ctx) == TORX_MODE_CO && torx_tasks_per_node(ctx) == 1, "mode");
    unit_arg_t *u = calloc(UNITS, sizeof *u);
    uintptr_t *ran_on = calloc(UNITS, sizeof *ran_on);
    int *handles = calloc(UNITS, sizeof *handles);
    uint32_t next_order = 0;
    for (int i = 0; i < UNITS; i++) {
        u[i] = (unit_arg_t){.in = (uint64_t)i * 977 + (uint64_t)boot->rank,
                            .next_order = &next_order,
                            .ran_on = &ran_on[i]};
        TASK_CHECK(torx_costart(ctx, unit_fn, &u[i], &handles[i]) == TORX_OK, "costart %d: %s", i,
                   torx_last_error());
        TASK_CHECK(i == 0 || handles[i] > handles[i - 1], "handles grow");
        if (i % 500 == 499) /* join some on the way, the rest at the end */
            TASK_CHECK(torx_cojoin(ctx, handles[i - 250]) == TORX_OK, "cojoin");
    }
    TASK_CHECK(torx_cojoin(ctx, handles[UNITS - 1]) == TORX_OK, "%s", torx_last_error());
    for (int i = 0; i < UNITS; i++) {
        uint64_t x = u[i].in;
        for (int k = 0; k < 100; k++)
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        TASK_CHECK(u[i].out == x, "unit %d computed %llx, expected %llx", i,
                   (unsigned long long)u[i].out, (unsigned long long)x);
        TASK_CHECK(u[i].order == (uint32_t)i, "unit %d ran as number %u", i, u[i].order);
        TASK_CHECK(ran_on[i] != runner(), "unit %d ran in the task's thread", i);
    }
    TASK_CHECK(torx_cojoin(ctx, handles[UNITS - 1] + 1) == TORX_ERR_INVAL, "bad handle");
    TASK_CHECK(torx_cojoin(ctx, 0) == TORX_ERR_INVAL, "handle 0");
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    free(u);
    free(ran_on);
    free(handles);
    return 0;
}

START_TEST(co_work_units)
{
    setenv("TORX_CO_THREAD", co_roles[_i], 1);
    RUN_JOB(2, units_task, NULL);
}
END_TEST

/* ---- Overlap: the rendezvous data moves while the task computes ---------------------- */

#define OVERLAP_BYTES ((size_t)64 << 20)
#define OVERLAP_HANDLER 9

typedef struct overlap {
    volatile int matched, done;
    torx_status_t status;
    size_t received;
    uint8_t *buf;
} overlap_t;

static void overlap_done(torx_ctx_t *ctx, void *arg, torx_status_t status, size_t received)
{
    (void)ctx;
    overlap_t *o = arg;
    o->status = status;
    o->received = received;
    o->done = 1;
}

static void overlap_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                            torx_recv_t *recv)
{
    (void)ctx;
    overlap_t *o = harg;
    recv->buf = o->buf;
    recv->len = info->data_len;
    recv->done = overlap_done;
    recv->arg = o;
    o->matched = 1;
}

static int overlap_task(torx_boot_t *boot, void *argp)
{
    const int shared = argp != NULL;
    torx_ctx_t *ctx;
    torx_init_attr_t attr = {.boot = boot, .mode = TORX_MODE_CO};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    if (!strcmp(torx_bulk_path(torx_ctx_device(ctx)), "none")) {
        /* sim's bgl: rendezvous data moves in packets, no get to overlap */
        if (boot->rank == 0)
            printf("co overlap: not run without bulk transfers (bulk path none)\n");
        TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
        return 0;
    }
    overlap_t o = {0};
    o.buf = calloc(1, OVERLAP_BYTES);
    TASK_CHECK(o.buf, "memory");
    TASK_CHECK(torx_register(ctx, OVERLAP_HANDLER, overlap_handler, &o) == TORX_OK, "register");
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    if (boot->rank == 1) {
        for (size_t i = 0; i < OVERLAP_BYTES; i++)
            o.buf[i] = test_pattern(1, 0, i);
        torx_msg_t m;
        int sent = 0;
        TASK_CHECK(torx_send(ctx, &m, 0, OVERLAP_HANDLER, NULL, 0, o.buf, OVERLAP_BYTES,
                             TORX_PROTO_RZV, test_count_msg, &sent) == TORX_OK,
                   "%s", torx_last_error());
        volatile int *flag = &sent;
        TASK_CHECK(torx_wait_timeout(ctx, flag, 60) == TORX_OK, "send not done");
    } else {
        /* Advance until the scout is matched: the handler has chosen the
         * buffer and the get is handed to the communication thread. */
        TASK_CHECK(torx_wait_timeout(ctx, &o.matched, 60) == TORX_OK, "no scout");
        if (shared) {
            /* Short of cores: the task moves the data itself, as in heater
             * mode, and the thread moves none. */
            TASK_CHECK(torx_wait_timeout(ctx, &o.done, 60) == TORX_OK, "done never ran");
            TASK_CHECK(o.status == TORX_OK && o.received == OVERLAP_BYTES, "status %s, %zu bytes",
                       torx_status_str(o.status), o.received);
            for (size_t i = 0; i < OVERLAP_BYTES; i++)
                if (o.buf[i] != test_pattern(1, 0, i))
                    TASK_CHECK(0, "byte %zu is %u, expected %u", i, o.buf[i],
                               test_pattern(1, 0, i));
            TASK_CHECK(torxm_co_gets_done(ctx) == 0, "the thread moved %llu gets",
                       (unsigned long long)torxm_co_gets_done(ctx));
            TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
            free(o.buf);
            return 0;
        }
        const uint64_t before = torxm_co_gets_done(ctx);
        /* Compute, never advancing, until the thread says the get is done.
         * On sim a round of computing is a microsecond's nap: an actor that
         * only spins never lets the thread's actor run. */
        const double t0 = torx_wtime(ctx);
        uint64_t sum = 0, iters = 0;
        while (torxm_co_gets_done(ctx) == before && torx_wtime(ctx) - t0 < 60) {
            for (int k = 0; k < 1000; k++)
                sum = sum * 31 + (uint64_t)k;
            if (modelled(ctx))
                torxp_nap(torx_ctx_device(ctx), 1000);
            iters++;
        }
        const double t_compute = torx_wtime(ctx) - t0;
        TASK_CHECK(torxm_co_gets_done(ctx) == before + 1,
                   "the get did not finish in %.1f s of computing (%llu rounds, sum %llx)",
                   t_compute, (unsigned long long)iters, (unsigned long long)sum);
        /* The data is all there although the task has not advanced since the
         * match; the done callback waits for the task's next advance. */
        TASK_CHECK(!o.done, "done ran without an advance");
        for (size_t i = 0; i < OVERLAP_BYTES; i++)
            if (o.buf[i] != test_pattern(1, 0, i))
                TASK_CHECK(0, "byte %zu is %u, expected %u", i, o.buf[i], test_pattern(1, 0, i));
        TASK_CHECK(torx_wait_timeout(ctx, &o.done, 60) == TORX_OK, "done never ran");
        TASK_CHECK(o.status == TORX_OK && o.received == OVERLAP_BYTES, "status %s, %zu bytes",
                   torx_status_str(o.status), o.received);
        fprintf(stderr, "co overlap: 64 MiB arrived during %.1f ms of computing\n",
                t_compute * 1e3);
    }
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    free(o.buf);
    return 0;
}

START_TEST(co_rendezvous_during_compute)
{
    setenv("TORX_CO_THREAD", "own", 1);
    RUN_JOB(2, overlap_task, NULL);
}
END_TEST

START_TEST(co_short_of_cores_task_moves_data)
{
    setenv("TORX_CO_THREAD", "shared", 1);
    RUN_JOB(2, overlap_task, "shared");
}
END_TEST

/* ---- An idle co job sleeps, and wakes promptly -------------------------------------- */

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru); /* every thread of the task: the communication one too */
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

typedef struct idle_arg {
    volatile int flag;
    double sent_at;
} idle_arg_t;

static void idle_wake(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info, torx_recv_t *recv)
{
    (void)ctx;
    (void)recv;
    idle_arg_t *ia = harg;
    if (info->data && info->data_len == sizeof ia->sent_at)
        memcpy(&ia->sent_at, info->data, sizeof ia->sent_at);
    ia->flag = 1;
}

/* Share of one core an idle co task (both threads) may use. The spin phase
 * before sleeping is bounded in iterations, which the sanitizers make
 * several times dearer (AddressSanitizer on a loaded CI machine: 10%); the
 * bound still catches a waiter that never sleeps. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define IDLE_CPU_MAX 0.3
#else
#define IDLE_CPU_MAX 0.1
#endif

/* A co task whose handler of tag 5 takes the other task's clock reading
 * into *ia, started with its peer. 0 on success. */
static int co_timed_start(torx_boot_t *boot, torx_ctx_t **ctx, idle_arg_t *ia)
{
    torx_init_attr_t attr = {.boot = boot, .mode = TORX_MODE_CO};
    TASK_CHECK(torx_init(&attr, ctx) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(torx_register(*ctx, 5, idle_wake, ia) == TORX_OK, "register");
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    return 0;
}

static int idle_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    idle_arg_t ia = {0};
    torx_ctx_t *ctx;
    if (co_timed_start(boot, &ctx, &ia))
        return 1;
    if (boot->rank == 0) {
        const double w0 = torx_wtime(ctx), c0 = cpu_seconds();
        TASK_CHECK(torx_wait(ctx, &ia.flag) == TORX_OK, "wait");
        const double woke = torx_wtime(ctx), wall = woke - w0, cpu = cpu_seconds() - c0;
        const double latency = woke - ia.sent_at;
        fprintf(stderr,
                "co idle wait: %.3f s wall, %.3f s CPU (both threads), woken %.2f ms "
                "after the send\n",
                wall, cpu, latency * 1e3);
        TASK_CHECK(wall > 0.5, "woken too early (%.3f s)", wall);
        TASK_CHECK(modelled(ctx) || cpu < IDLE_CPU_MAX * wall,
                   "an idle co task burned %.0f%% of a core", 100 * cpu / wall);
        TASK_CHECK(latency < 0.05, "woken %.1f ms after the send", latency * 1e3);
    } else {
        torxp_nap(torx_ctx_device(ctx), 800 * 1000 * 1000);
        torx_msg_t m;
        const double now = torx_wtime(ctx); /* one host (or simulation), one clock */
        TASK_CHECK(torx_send(ctx, &m, 0, 5, NULL, 0, &now, sizeof now, TORX_PROTO_AUTO, NULL,
                             NULL) == TORX_OK,
                   "%s", torx_last_error());
    }
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    return 0;
}

START_TEST(co_idle_wait_sleeps)
{
    setenv("TORX_CO_THREAD", co_roles[_i], 1);
    RUN_JOB(2, idle_task, NULL);
}
END_TEST

/* ---- A wait on the task's own round ends when the round does ------------------------ */

/* A global-interrupt round rings no doorbell: a co task waiting for one
 * through the message layer (torx_wait, the round's poll as advance hook)
 * must not sleep through its end (docs/message-layer.md#waiting). On sim
 * the communication thread's wait ends when the round does, and it rings
 * the task; on a host the task naps. First rank 1 arms 30 ms after rank 0,
 * whose wait must end within 5 ms of that; then ten rounds back to back
 * must take under 5 ms: on sim a task that went to sleep on its bell just
 * after the round ended slept the 20 ms the bell allows. Those bounds hold
 * in modelled time; on a host, where a loaded machine (4 threads of a
 * sanitized build on 2 CPUs beside other jobs) took 16 ms for the ten,
 * the bounds only tell a wait that sleeps its 20 ms from one that does not. */
typedef struct round_arg {
    torx_pkt_dev_t *dev;
    volatile int done;
    torx_status_t rc;
} round_arg_t;

static int round_poll(void *arg)
{
    round_arg_t *r = arg;
    if (r->done)
        return 0;
    const torx_status_t rc = torx_gi_poll(r->dev);
    if (rc == TORX_AGAIN)
        return 0;
    r->rc = rc;
    r->done = 1;
    return 1;
}

/* One global-interrupt round, waited for by torx_wait; 0 on success. */
static int round_wait(torx_boot_t *boot, torx_ctx_t *ctx)
{
    round_arg_t r = {torx_ctx_device(ctx), 0, TORX_OK};
    TASK_CHECK(torx_gi_arm(r.dev) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(torx_advance_hook(ctx, round_poll, &r) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(torx_wait(ctx, &r.done) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(torx_advance_hook(ctx, NULL, NULL) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(r.rc == TORX_OK, "the round ended with %d", (int)r.rc);
    return 0;
}

static int round_wait_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    idle_arg_t ia = {0};
    torx_ctx_t *ctx;
    if (co_timed_start(boot, &ctx, &ia))
        return 1;
    if (boot->rank == 1)
        torxp_nap(torx_ctx_device(ctx), 30 * 1000 * 1000);
    const double armed = torx_wtime(ctx);
    if (round_wait(boot, ctx))
        return 1;
    const double left = torx_wtime(ctx);
    if (boot->rank == 1) {
        torx_msg_t m;
        volatile int sent = 0;
        TASK_CHECK(torx_send(ctx, &m, 0, 5, NULL, 0, &armed, sizeof armed, TORX_PROTO_AUTO,
                             test_count_msg, (void *)&sent) == TORX_OK,
                   "%s", torx_last_error());
        TASK_CHECK(torx_wait(ctx, &sent) == TORX_OK, "%s", torx_last_error());
    } else {
        TASK_CHECK(torx_wait(ctx, &ia.flag) == TORX_OK, "%s", torx_last_error());
        const double late = left - ia.sent_at; /* one host (or simulation), one clock */
        fprintf(stderr, "co round wait: left %.3f ms after the last task armed\n", late * 1e3);
        TASK_CHECK(late < (modelled(ctx) ? 5e-3 : 15e-3),
                   "the wait left %.1f ms after the round's end", late * 1e3);
    }
    const double t0 = torx_wtime(ctx);
    for (int i = 0; i < 10; i++)
        if (round_wait(boot, ctx))
            return 1;
    const double ten = torx_wtime(ctx) - t0;
    if (boot->rank == 0)
        fprintf(stderr, "co round wait: 10 rounds back to back in %.3f ms\n", ten * 1e3);
    TASK_CHECK(ten < (modelled(ctx) ? 5e-3 : 150e-3),
               "rank %d: 10 rounds back to back took %.1f ms", boot->rank, ten * 1e3);
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    return 0;
}

START_TEST(co_round_wait_wakes)
{
    setenv("TORX_CO_THREAD", "own", 1);
    RUN_JOB(2, round_wait_task, NULL);
}
END_TEST

/* ---- A task sees a packet only once its thread has read it ------------------------ */

/* On a modelled device the communication thread pays each packet's receive
 * cost before the task can see it, whichever actor the simulation runs
 * first at that instant (docs/sim.md#calibration). A 1-byte one-packet half
 * round trip then takes at least the device's message latency (inject,
 * one link, receive, match); an adaptive one a reception more, since the
 * sender's thread reads the token before the reply. When the thread handed
 * the packet over before paying for it, the one-packet round trip took
 * 0.70 of that, or the adaptive one lost its token's reception. */
static void pong_wake(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info, torx_recv_t *recv)
{
    (void)ctx;
    (void)info;
    (void)recv;
    *(volatile int *)harg = 1;
}

static int pingpong_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_init_attr_t attr = {.boot = boot, .mode = TORX_MODE_CO};
    torx_ctx_t *ctx;
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    volatile int got = 0;
    TASK_CHECK(torx_register(ctx, 6, pong_wake, (void *)&got) == TORX_OK, "register");
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    if (!modelled(ctx)) {
        if (boot->rank == 0)
            printf("co_thread_reads_before_the_task_sees: not run off sim (host times vary)\n");
        TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
        return 0;
    }
    torx_net_t net;
    torx_pkt_network(torx_ctx_device(ctx), &net);
    const torx_protocol_t protos[] = {TORX_PROTO_ONEPKT, TORX_PROTO_ADAPTIVE};
    const char byte = 1;
    enum { ROUNDS = 10 };
    for (int k = 0; k < 2; k++) {
        const double t0 = torx_wtime(ctx);
        for (int i = 0; i < ROUNDS; i++) {
            torx_msg_t m;
            if (boot->rank == 0) {
                got = 0;
                TASK_CHECK(torx_send(ctx, &m, 1, 6, NULL, 0, &byte, 1, protos[k], NULL, NULL) ==
                               TORX_OK,
                           "%s", torx_last_error());
                TASK_CHECK(torx_wait(ctx, &got) == TORX_OK, "%s", torx_last_error());
            } else {
                TASK_CHECK(torx_wait(ctx, &got) == TORX_OK, "%s", torx_last_error());
                got = 0;
                TASK_CHECK(torx_send(ctx, &m, 0, 6, NULL, 0, &byte, 1, protos[k], NULL, NULL) ==
                               TORX_OK,
                           "%s", torx_last_error());
            }
        }
        const double half = (torx_wtime(ctx) - t0) / (2.0 * ROUNDS);
        const double floor = net.message_latency + (k ? net.packet_cpu : 0.0);
        if (boot->rank == 0) {
            fprintf(stderr, "co %s half round trip %.4f us, floor %.4f us\n",
                    torx_protocol_name(protos[k]), half * 1e6, floor * 1e6);
            TASK_CHECK(half >= floor - 10e-9, /* SimGrid ends a sleep up to 1 ns early */
                       "%s: a half round trip of %.4f us, under the %.4f us of its events",
                       torx_protocol_name(protos[k]), half * 1e6, floor * 1e6);
        }
        TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    }
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    return 0;
}

START_TEST(co_thread_reads_before_the_task_sees)
{
    setenv("TORX_CO_THREAD", "own", 1);
    RUN_JOB(2, pingpong_task, NULL);
}
END_TEST

START_TEST(co_bad_thread_role_stops_init)
{
    setenv("TORX_CO_THREAD", "maybe", 1);
    RUN_JOB(1, init_fails_naming_co_thread, NULL);
}
END_TEST

/* ---- One injection FIFO's slots go round the busy peers --------------------------- */

/* Where a task's packets all leave through one injection FIFO (sim), the
 * message layer ends a push round at the first peer that finds it full,
 * and starts the next round with the peer after it
 * (docs/packet-layer.md#one-injection-fifo). On a 4x1x1 mesh task 0 sends
 * an eager message of SPREAD_BYTES to each of tasks 1-3 at once, many
 * times the FIFO's slots, all over its one link. The first send fills the
 * FIFO before the other two are posted, and gets that much ahead; from
 * then on its packets go out a packet for each peer in turn, so the last
 * two messages end within a few packets' time of each other, and the
 * first not long before. Draining the first busy peer's queue first, they
 * end at a third, two thirds and all of the time. */
enum { SPREAD_BYTES = 16384, SPREAD_TAG = 7 };

typedef struct spread_rx {
    char buf[SPREAD_BYTES];
    volatile double done_at;
    volatile int got; /* task 0: receivers' times */
    double times[4];
} spread_rx_t;

static void spread_done(torx_ctx_t *ctx, void *arg, torx_status_t status, size_t received)
{
    spread_rx_t *rx = arg;
    rx->done_at = status == TORX_OK && received == SPREAD_BYTES ? torx_wtime(ctx) : -1.0;
}

static void spread_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                           torx_recv_t *recv)
{
    (void)ctx;
    spread_rx_t *rx = harg;
    if (info->data_len == sizeof(double)) { /* at task 0: a receiver's end time */
        memcpy(&rx->times[info->src], info->data, sizeof(double));
        rx->got++;
        recv->buf = NULL;
        return;
    }
    recv->buf = rx->buf;
    recv->len = sizeof rx->buf;
    recv->done = spread_done;
    recv->arg = rx;
}

static int spread_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_init_attr_t attr = {.boot = boot, .mode = TORX_MODE_CO};
    torx_ctx_t *ctx;
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    static spread_rx_t rxs[4]; /* per task: on sim each task's data is its own */
    spread_rx_t *rx = &rxs[boot->rank];
    rx->done_at = 0;
    rx->got = 0;
    TASK_CHECK(torx_register(ctx, SPREAD_TAG, spread_handler, rx) == TORX_OK, "register");
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    if (!(torx_ctx_device(ctx)->caps & TORXP_CAP_ONE_FIFO)) {
        if (boot->rank == 0)
            printf("one_fifo_goes_round_the_peers: not run (this device's destinations each "
                   "have their own room)\n");
        TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
        return 0;
    }
    if (boot->rank == 0) {
        static char data[SPREAD_BYTES];
        torx_msg_t m[3];
        volatile int sent = 0;
        const double t0 = torx_wtime(ctx);
        for (int to = 1; to <= 3; to++)
            TASK_CHECK(torx_send(ctx, &m[to - 1], to, SPREAD_TAG, NULL, 0, data, sizeof data,
                                 TORX_PROTO_EAGER, test_count_msg, (void *)&sent) == TORX_OK,
                       "%s", torx_last_error());
        while (sent < 3 || rx->got < 3)
            TASK_CHECK(torx_advance(ctx) >= 0, "%s", torx_last_error());
        for (int r = 1; r <= 3; r++)
            TASK_CHECK(rx->times[r] > 0, "task %d's message did not arrive whole", r);
        const double t1 = rx->times[1] - t0, t2 = rx->times[2] - t0, t3 = rx->times[3] - t0;
        const double last = t2 > t3 ? t2 : t3;
        fprintf(stderr, "one FIFO: the three messages ended %.3f, %.3f, %.3f us after the sends\n",
                t1 * 1e6, t2 * 1e6, t3 * 1e6);
        TASK_CHECK(fabs(t2 - t3) < 0.05 * last && t1 > 0.6 * last,
                   "the FIFO's slots did not go round the peers: the messages ended %.3f, %.3f "
                   "and %.3f us after the sends",
                   t1 * 1e6, t2 * 1e6, t3 * 1e6);
    } else {
        while (rx->done_at == 0)
            TASK_CHECK(torx_advance(ctx) >= 0, "%s", torx_last_error());
        const double at = rx->done_at;
        torx_msg_t m;
        volatile int sent = 0;
        TASK_CHECK(torx_send(ctx, &m, 0, SPREAD_TAG, NULL, 0, &at, sizeof at, TORX_PROTO_ONEPKT,
                             test_count_msg, (void *)&sent) == TORX_OK,
                   "%s", torx_last_error());
        while (!sent)
            TASK_CHECK(torx_advance(ctx) >= 0, "%s", torx_last_error());
    }
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    return 0;
}

START_TEST(one_fifo_goes_round_the_peers)
{
    setenv("TORX_CO_THREAD", "own", 1);
    setenv("TORX_TORUS", "4x1x1", 1);
    setenv("TORX_SIM_MESH", "1", 1);
    setenv("TORX_SIM_MACHINE", "bgl", 1); /* bgp's cores inject slower than its links take */
    RUN_JOB(4, spread_task, NULL);
}
END_TEST

/* ---- The node fits the host ---------------------------------------------------------- */

/* With TORX_CORES_PER_NODE unset, as many tasks as the host has CPUs get
 * one CPU each, bound, in every mode (heater and co by 1-core nodes, vn by
 * its 2-core nodes), and the fit costs co its thread's own core. */
static int fit_task(torx_boot_t *boot, void *argp)
{
    const torx_mode_t mode = (torx_mode_t)(intptr_t)argp;
    torx_ctx_t *ctx;
    torx_init_attr_t attr = {.boot = boot, .mode = mode};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    if (modelled(ctx)) { /* sim: tasks bound to no host CPU, one process runs them all */
        if (boot->rank == 0)
            printf("nodes_fit_the_host_when_unset: not run on sim (no host CPUs to fit)\n");
        TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
        return 0;
    }
    cpu_set_t set;
    TASK_CHECK(sched_getaffinity(0, sizeof set, &set) == 0, "sched_getaffinity");
    TASK_CHECK(CPU_COUNT(&set) == 1, "mode %d: rank %d may run on %d CPUs, expected 1 (bound)",
               (int)mode, boot->rank, CPU_COUNT(&set));
    int cpu = -1;
    for (int c = 0; c < CPU_SETSIZE && cpu < 0; c++)
        if (CPU_ISSET(c, &set))
            cpu = c;
    /* Each rank on its own CPU: exchange them through a message. */
    uint64_t got = UINT64_MAX;
    volatile int flag = 0;
    TASK_CHECK(torx_register(ctx, 6, fit_handler, (void *)&got) == TORX_OK, "register");
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    const uint64_t mine = (uint64_t)cpu;
    torx_msg_t m;
    TASK_CHECK(torx_send(ctx, &m, 1 - boot->rank, 6, NULL, 0, &mine, sizeof mine, TORX_PROTO_AUTO,
                         test_count_msg, (void *)&flag) == TORX_OK,
               "%s", torx_last_error());
    while (got == UINT64_MAX || !flag)
        TASK_CHECK(torx_advance(ctx) >= 0, "%s", torx_last_error());
    TASK_CHECK(got != mine, "both ranks bound to CPU %d", cpu);
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    return 0;
}

START_TEST(nodes_fit_the_host_when_unset)
{
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
        return; /* one CPU: nothing to spread over */
    unsetenv("TORX_CORES_PER_NODE");
    static const torx_mode_t modes[] = {TORX_MODE_HEATER, TORX_MODE_CO, TORX_MODE_VN};
    RUN_JOB(2, fit_task, (void *)(intptr_t)modes[_i]);
}
END_TEST

Suite *msg_co_suite(void);

Suite *msg_co_suite(void)
{
    Suite *s = suite_create("msg_co");
    TCase *tc = tcase_create("co");
    tcase_set_timeout(tc, 200);
    tcase_add_loop_test(tc, co_protocol_variant, 0, 2 * NCO_TWO_TASK_VARIANTS);
    tcase_add_loop_test(tc, co_work_units, 0, 2);
    tcase_add_test(tc, co_rendezvous_during_compute);
    tcase_add_test(tc, co_short_of_cores_task_moves_data);
    tcase_add_loop_test(tc, co_idle_wait_sleeps, 0, 2);
    tcase_add_test(tc, co_round_wait_wakes);
    tcase_add_test(tc, co_thread_reads_before_the_task_sees);
    tcase_add_test(tc, co_bad_thread_role_stops_init);
    tcase_add_loop_test(tc, nodes_fit_the_host_when_unset, 0, 3);
    suite_add_tcase(s, tc);
    TCase *multi = tcase_create("multi"); /* jobs of three and four tasks */
    tcase_set_timeout(multi, 200);
    tcase_add_loop_test(multi, co_protocol_variant, 2 * NCO_TWO_TASK_VARIANTS, 2 * NCO_VARIANTS);
    tcase_add_loop_test(multi, co_mixed_protocols_ordered_under_chaos, 0, 4);
    tcase_add_test(multi, one_fifo_goes_round_the_peers);
    suite_add_tcase(s, multi);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(msg_co_suite());
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
