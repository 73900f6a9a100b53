/* Time, waiting and threads of the layers above the devices, and the
 * per-task state (pkt_internal.h, host_services.c, status.c;
 * docs/packet-layer.md#time-waiting-and-threads):
 *   - without a device (and on shm) the host's own: a monotonic clock, naps
 *     that last at least what was asked, a word wait that times out or is
 *     woken, threads;
 *   - a device's ops, where it has them, take every call over (a fake
 *     device here, as the sim device will);
 *   - the task-state hook: torx_last_error and the TORX_VERBOSE cache live
 *     in the state it returns;
 *   - on a device with a charge op the message layer charges one match per
 *     message and exactly the bytes it copies into user buffers;
 *   - torx_wtime and torx_pkt_wtime advance, on the host's clock. */
#include "harness.h"
#include "msglayer/msg_internal.h"
#include "packet/pkt_internal.h"

#include <torx/msg.h>

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t host_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- The host's own, without a device -------------------------------------------- */

START_TEST(host_clock_is_monotonic)
{
    uint64_t last = torxp_now_ns(NULL);
    for (int i = 0; i < 100000; i++) {
        const uint64_t t = torxp_now_ns(NULL);
        ck_assert_uint_ge(t, last);
        last = t;
    }
    /* The same clock as CLOCK_MONOTONIC, in ns and in s. */
    const uint64_t a = host_ns(), t = torxp_now_ns(NULL), b = host_ns();
    ck_assert_uint_ge(t, a);
    ck_assert_uint_le(t, b);
    const double s = torxp_now_s(NULL);
    ck_assert_double_ge(s, (double)a * 1e-9);
    ck_assert_double_le(s, (double)host_ns() * 1e-9 + 1e-6);
}
END_TEST

START_TEST(host_nap_sleeps_at_least_the_time_asked)
{
    static const uint64_t asked[] = {1000, 200000, 2000000, 15000000};
    for (size_t i = 0; i < sizeof asked / sizeof asked[0]; i++) {
        const uint64_t t0 = torxp_now_ns(NULL), h0 = host_ns();
        torxp_nap(NULL, asked[i]);
        const uint64_t t1 = torxp_now_ns(NULL), h1 = host_ns();
        ck_assert_msg(t1 - t0 >= asked[i] && h1 - h0 >= asked[i],
                      "torxp_nap(%llu ns) returned after %llu ns", (unsigned long long)asked[i],
                      (unsigned long long)(h1 - h0));
        ck_assert_msg(h1 - h0 < asked[i] + 2000000000u, "torxp_nap(%llu ns) took %llu ns",
                      (unsigned long long)asked[i], (unsigned long long)(h1 - h0));
    }
    torxp_yield(NULL); /* returns */
}
END_TEST

START_TEST(host_word_wait_times_out)
{
    uint32_t word = 5;
    /* Nobody wakes it: TORX_AGAIN after the timeout, not before. */
    const uint64_t t0 = host_ns();
    ck_assert_int_eq(torxp_word_wait(NULL, &word, 5, 20000000), TORX_AGAIN);
    ck_assert_uint_ge(host_ns() - t0, 20000000u);
    /* The word differs: TORX_OK at once. */
    const uint64_t t1 = host_ns();
    ck_assert_int_eq(torxp_word_wait(NULL, &word, 4, 5000000000LL), TORX_OK);
    ck_assert_uint_lt(host_ns() - t1, 1000000000u);
    /* A wake with no waiter is harmless. */
    torxp_word_wake(NULL, &word);
}
END_TEST

typedef struct waker {
    uint32_t word;
    uint64_t delay_ns;
    int woke;
} waker_t;

static void *waker_main(void *arg)
{
    waker_t *w = arg;
    torxp_nap(NULL, w->delay_ns);
    __atomic_store_n(&w->word, 1u, __ATOMIC_RELEASE);
    torxp_word_wake(NULL, &w->word);
    w->woke = 1;
    return NULL;
}

START_TEST(host_word_wait_is_woken)
{
    /* Another thread changes the word and wakes us well before the 30 s
     * limit; repeated, so a wake that beats the wait is covered too. */
    for (int round = 0; round < 20; round++) {
        waker_t w = {.word = 0, .delay_ns = round % 2 ? 0 : 2000000};
        torxp_thread_t th;
        ck_assert_int_eq(torxp_thread_start(NULL, &th, waker_main, &w), TORX_OK);
        ck_assert_ptr_null(th.dev_thread);
        const uint64_t t0 = host_ns();
        torx_status_t st = TORX_OK;
        while (__atomic_load_n(&w.word, __ATOMIC_ACQUIRE) == 0 &&
               (st = torxp_word_wait(NULL, &w.word, 0, 30000000000LL)) == TORX_OK)
            ;
        ck_assert_int_eq(st, TORX_OK);
        ck_assert_uint_eq(__atomic_load_n(&w.word, __ATOMIC_ACQUIRE), 1);
        ck_assert_uint_lt(host_ns() - t0, 10000000000u);
        torxp_thread_join(NULL, &th);
        ck_assert_int_eq(w.woke, 1);
    }
}
END_TEST

/* ---- A device's ops take over --------------------------------------------------- */

/* A device that has only the new ops: a clock that advances only by its
 * naps and yields, and counters. */
typedef struct fake_dev {
    torx_pkt_dev_t base;
    uint64_t now, naps, yields, waits, wakes, starts, joins;
    size_t charged[2];
} fake_dev_t;

static double fake_now(const torx_pkt_dev_t *dev)
{
    return (double)((const fake_dev_t *)dev)->now * 1e-9;
}

static void fake_nap(torx_pkt_dev_t *dev, uint64_t ns)
{
    fake_dev_t *f = (fake_dev_t *)dev;
    f->now += ns;
    f->naps++;
}

static void fake_yield(torx_pkt_dev_t *dev)
{
    fake_dev_t *f = (fake_dev_t *)dev;
    f->now += 1;
    f->yields++;
}

static torx_status_t fake_word_wait(torx_pkt_dev_t *dev, uint32_t *word, uint32_t expected,
                                    int64_t timeout_ns)
{
    fake_dev_t *f = (fake_dev_t *)dev;
    f->waits++;
    if (*word != expected)
        return TORX_OK;
    f->now += timeout_ns < 0 ? 0 : (uint64_t)timeout_ns;
    return TORX_AGAIN;
}

static void fake_word_wake(torx_pkt_dev_t *dev, uint32_t *word)
{
    (void)word;
    ((fake_dev_t *)dev)->wakes++;
}

static torx_status_t fake_thread_start(torx_pkt_dev_t *dev, torxp_thread_t *thread,
                                       void *(*fn)(void *), void *arg)
{
    fake_dev_t *f = (fake_dev_t *)dev;
    f->starts++;
    thread->dev_thread = f;
    fn(arg); /* a device's "thread" may run it however it models threads */
    return TORX_OK;
}

static void fake_thread_join(torx_pkt_dev_t *dev, torxp_thread_t *thread)
{
    ck_assert_ptr_eq(thread->dev_thread, dev);
    ((fake_dev_t *)dev)->joins++;
}

static void fake_charge(torx_pkt_dev_t *dev, torxp_cpu_event_t ev, size_t n)
{
    ((fake_dev_t *)dev)->charged[ev] += n;
}

static const torxp_dev_ops_t fake_ops = {.name = "fake",
                                         .now_s = fake_now,
                                         .nap = fake_nap,
                                         .yield = fake_yield,
                                         .word_wait = fake_word_wait,
                                         .word_wake = fake_word_wake,
                                         .thread_start = fake_thread_start,
                                         .thread_join = fake_thread_join,
                                         .charge = fake_charge};

static void *count_run(void *arg)
{
    (*(int *)arg)++;
    return NULL;
}

START_TEST(device_ops_take_over)
{
    fake_dev_t f = {.base = {.ops = &fake_ops, .caps = TORXP_CAP_EXACT_WAIT}, .now = 7000000000u};
    torx_pkt_dev_t *dev = &f.base;
    ck_assert_uint_eq(torxp_now_ns(dev), 7000000000u);
    ck_assert_double_eq_tol(torxp_now_s(dev), 7.0, 1e-12);
    ck_assert_double_eq_tol(torx_pkt_wtime(dev), 7.0, 1e-12);
    /* A nap of an hour returns at once: the device's clock moves instead. */
    const uint64_t h0 = host_ns();
    torxp_nap(dev, 3600000000000ull);
    ck_assert_uint_lt(host_ns() - h0, 1000000000u);
    ck_assert_uint_eq(torxp_now_ns(dev), 7000000000u + 3600000000000ull);
    torxp_yield(dev);
    ck_assert_uint_eq(f.naps, 1);
    ck_assert_uint_eq(f.yields, 1);
    uint32_t word = 3;
    ck_assert_int_eq(torxp_word_wait(dev, &word, 3, 3600000000000LL), TORX_AGAIN);
    ck_assert_int_eq(torxp_word_wait(dev, &word, 2, -1), TORX_OK);
    torxp_word_wake(dev, &word);
    ck_assert_uint_eq(f.waits, 2);
    ck_assert_uint_eq(f.wakes, 1);
    int ran = 0;
    torxp_thread_t th = {.dev_thread = NULL};
    ck_assert_int_eq(torxp_thread_start(dev, &th, count_run, &ran), TORX_OK);
    torxp_thread_join(dev, &th);
    ck_assert_int_eq(ran, 1);
    ck_assert_uint_eq(f.starts, 1);
    ck_assert_uint_eq(f.joins, 1);
    torxp_charge(dev, TORXP_CPU_MATCH, 1);
    torxp_charge(dev, TORXP_CPU_COPY, 4096);
    torxp_charge(dev, TORXP_CPU_COPY, 100);
    ck_assert_uint_eq(f.charged[TORXP_CPU_MATCH], 1);
    ck_assert_uint_eq(f.charged[TORXP_CPU_COPY], 4196);
}
END_TEST

START_TEST(device_without_ops_is_the_host)
{
    /* A device that leaves the ops NULL (shm, ofi) gets the host's. */
    static const torxp_dev_ops_t bare = {.name = "bare"};
    torx_pkt_dev_t dev = {.ops = &bare};
    const uint64_t a = host_ns(), t = torxp_now_ns(&dev), b = host_ns();
    ck_assert_uint_ge(t, a);
    ck_assert_uint_le(t, b);
    const uint64_t t0 = host_ns();
    torxp_nap(&dev, 3000000);
    ck_assert_uint_ge(host_ns() - t0, 3000000u);
    uint32_t word = 0;
    ck_assert_int_eq(torxp_word_wait(&dev, &word, 0, 1000000), TORX_AGAIN);
    torxp_charge(&dev, TORXP_CPU_COPY, 1); /* nothing to call: no crash */
}
END_TEST

/* ---- Per-task state --------------------------------------------------------------- */

static torxp_task_state_t hooked;

static torxp_task_state_t *hook(void)
{
    return &hooked;
}

START_TEST(task_state_hook_is_used)
{
    torxp_error(TORX_ERR_INVAL, "torx: the thread's own error");
    const char *own = torx_last_error();
    ck_assert_str_eq(own, "torx: the thread's own error");

    torxp_task_state_init(&hooked);
    torxp_set_task_state_hook(hook);
    ck_assert_ptr_eq(torxp_task_state(), &hooked);
    ck_assert_str_eq(torx_last_error(), ""); /* a new task: no error yet */
    ck_assert_int_eq(torxp_error(TORX_ERR_PEER, "torx: hooked error %d", 42), TORX_ERR_PEER);
    ck_assert_ptr_eq(torx_last_error(), hooked.last_error);
    ck_assert_str_eq(hooked.last_error, "torx: hooked error 42");
    /* TORX_VERBOSE is read once into the task's state (level 3 logs
     * nothing at 1). */
    ck_assert_int_eq(hooked.verbose, TORXP_VERBOSE_UNREAD);
    setenv("TORX_VERBOSE", "1", 1);
    torxp_log(NULL, 3, "not printed");
    ck_assert_int_eq(hooked.verbose, 1);
    setenv("TORX_VERBOSE", "2", 1);
    torxp_log(NULL, 3, "not printed");
    ck_assert_int_eq(hooked.verbose, 1); /* cached */
    unsetenv("TORX_VERBOSE");

    /* Back to the thread's own: untouched by the hooked task. */
    torxp_set_task_state_hook(NULL);
    ck_assert_ptr_ne(torxp_task_state(), &hooked);
    ck_assert_str_eq(torx_last_error(), "torx: the thread's own error");
    ck_assert_str_eq(hooked.last_error, "torx: hooked error 42");
}
END_TEST

static void *thread_error(void *arg)
{
    (void)arg;
    torxp_error(TORX_ERR_SYS, "torx: another thread's error");
    return NULL;
}

START_TEST(host_task_state_is_per_thread)
{
    torxp_error(TORX_ERR_INVAL, "torx: this thread's error");
    torxp_thread_t th;
    ck_assert_int_eq(torxp_thread_start(NULL, &th, thread_error, NULL), TORX_OK);
    torxp_thread_join(NULL, &th);
    ck_assert_str_eq(torx_last_error(), "torx: this thread's error");
}
END_TEST

/* ---- The message layer's charges ------------------------------------------------ */

/* The shm device with a charge op added (what sim will have): the message
 * layer charges one match per message that reaches its handler, and the
 * bytes it copies into user buffers, whatever the protocol. */
#define CH_HANDLER 7
#define CH_BUF (1u << 17)

static uint64_t ch_charged[2]; /* by torxp_cpu_event_t, in this task */

static void ch_charge(torx_pkt_dev_t *dev, torxp_cpu_event_t ev, size_t n)
{
    (void)dev;
    ch_charged[ev] += n;
}

typedef struct ch_rx {
    int got, failed;
    uint64_t bytes;
    volatile int all;
    int expect;
    uint8_t *buf;
} ch_rx_t;

static void ch_done(torx_ctx_t *ctx, void *arg, torx_status_t st, size_t n)
{
    (void)ctx;
    ch_rx_t *r = arg;
    r->failed |= st != TORX_OK;
    r->bytes += n;
    if (++r->got == r->expect)
        r->all = 1;
}

static void ch_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info, torx_recv_t *recv)
{
    (void)ctx;
    (void)info;
    ch_rx_t *r = harg;
    recv->buf = r->buf;
    recv->len = CH_BUF;
    recv->done = ch_done;
    recv->arg = r;
}

static const struct {
    size_t len;
    torx_protocol_t proto;
} ch_msgs[] = {{0, TORX_PROTO_ONEPKT},   {1, TORX_PROTO_ONEPKT},    {200, TORX_PROTO_ONEPKT},
               {1000, TORX_PROTO_EAGER}, {20000, TORX_PROTO_EAGER}, {3000, TORX_PROTO_ADAPTIVE},
               {100000, TORX_PROTO_RZV}, {1, TORX_PROTO_AUTO},      {65536, TORX_PROTO_AUTO}};
#define CH_NMSGS ((int)(sizeof ch_msgs / sizeof ch_msgs[0]))

static int charge_task(torx_boot_t *boot, void *arg)
{
    (void)arg;
    torx_ctx_t *ctx;
    torx_init_attr_t attr = {.boot = boot, .mode = TORX_MODE_HEATER};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(!ctx->charges, "the shm device charges");
    static torxp_dev_ops_t ops;
    ops = *ctx->dev->ops;
    ops.charge = ch_charge;
    ctx->dev->ops = &ops;
    torxm_charges_start(ctx);
    TASK_CHECK(ctx->charges, "torxm_charges_start did not start charging");
    ch_rx_t r = {.expect = CH_NMSGS, .buf = malloc(CH_BUF)};
    TASK_CHECK(torx_register(ctx, CH_HANDLER, ch_handler, &r) == TORX_OK, "register");
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    uint64_t total = 0;
    if (boot->rank == 0) {
        static uint8_t data[100000];
        static torx_msg_t m[CH_NMSGS];
        const uint64_t hdr = 42; /* handed to the handler in place: no copy */
        for (int i = 0; i < CH_NMSGS; i++) {
            total += ch_msgs[i].len;
            TASK_CHECK(torx_send(ctx, &m[i], 1, CH_HANDLER, &hdr, sizeof hdr, data, ch_msgs[i].len,
                                 ch_msgs[i].proto, NULL, NULL) == TORX_OK,
                       "send %d: %s", i, torx_last_error());
        }
        for (int i = 0; i < CH_NMSGS; i++)
            while (torx_msg_pending(&m[i]))
                TASK_CHECK(torx_advance(ctx) >= 0, "%s", torx_last_error());
        /* Acks, tokens and clear-to-sends reached us: no handler ran. */
        TASK_CHECK(ch_charged[TORXP_CPU_MATCH] == 0 && ch_charged[TORXP_CPU_COPY] == 0,
                   "the sender was charged %llu matches and %llu bytes",
                   (unsigned long long)ch_charged[TORXP_CPU_MATCH],
                   (unsigned long long)ch_charged[TORXP_CPU_COPY]);
    } else {
        for (int i = 0; i < CH_NMSGS; i++)
            total += ch_msgs[i].len;
        TASK_CHECK(torx_wait_timeout(ctx, &r.all, 60) == TORX_OK, "received %d of %d", r.got,
                   CH_NMSGS);
        TASK_CHECK(!r.failed && r.bytes == total, "received %llu bytes of %llu",
                   (unsigned long long)r.bytes, (unsigned long long)total);
        TASK_CHECK(ch_charged[TORXP_CPU_MATCH] == CH_NMSGS, "%llu matches charged for %d messages",
                   (unsigned long long)ch_charged[TORXP_CPU_MATCH], CH_NMSGS);
        TASK_CHECK(ch_charged[TORXP_CPU_COPY] == total,
                   "%llu bytes of copies charged for %llu bytes received",
                   (unsigned long long)ch_charged[TORXP_CPU_COPY], (unsigned long long)total);
    }
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    free(r.buf);
    return 0;
}

/* Rendezvous data by packets, so that the message layer copies it too
 * (a bulk get is the device's to charge); eager by packets, then staged. */
START_TEST(msg_charges_matches_and_copies)
{
    setenv("TORX_RZV_DATA", "packets", 1);
    setenv("TORX_STAGE_MIN", _i ? "1" : "0", 1);
    RUN_JOB(2, charge_task, NULL);
    unsetenv("TORX_RZV_DATA");
    unsetenv("TORX_STAGE_MIN");
}
END_TEST

/* ---- torx_wtime ---------------------------------------------------------------------- */

static int wtime_task(torx_boot_t *boot, void *arg)
{
    (void)arg;
    torx_ctx_t *ctx;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(!torxm_exact_wait(ctx), "the shm device claims exact waits");
    const double h0 = (double)host_ns() * 1e-9;
    const double t0 = torx_wtime(ctx);
    const double p0 = torx_pkt_wtime(torx_ctx_device(ctx));
    TASK_CHECK(t0 >= h0 && t0 - h0 < 1.0, "torx_wtime %.9f, CLOCK_MONOTONIC %.9f", t0, h0);
    TASK_CHECK(p0 >= t0 && p0 - t0 < 1.0, "torx_pkt_wtime %.9f, torx_wtime %.9f", p0, t0);
    double last = t0;
    for (int i = 0; i < 10000; i++) {
        const double t = torx_wtime(ctx);
        TASK_CHECK(t >= last, "torx_wtime went back: %.9f after %.9f", t, last);
        last = t;
    }
    torxp_nap(NULL, 10000000);
    const double t1 = torx_wtime(ctx);
    TASK_CHECK(t1 - t0 >= 0.010, "torx_wtime advanced %.9f s over a 10 ms nap", t1 - t0);
    TASK_CHECK(t1 - t0 < 5.0, "torx_wtime advanced %.9f s over a 10 ms nap", t1 - t0);
    /* torx_wait_timeout keeps its time by the same clock. */
    volatile int never = 0;
    TASK_CHECK(torx_wait_timeout(ctx, &never, 0.05) == TORX_AGAIN, "%s", torx_last_error());
    const double t2 = torx_wtime(ctx);
    TASK_CHECK(t2 - t1 >= 0.05, "a 50 ms wait_timeout took %.9f s of torx_wtime", t2 - t1);
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    return 0;
}

START_TEST(wtime_advances)
{
    RUN_JOB(1, wtime_task, NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("services");
    TCase *host = tcase_create("host");
    tcase_add_test(host, host_clock_is_monotonic);
    tcase_add_test(host, host_nap_sleeps_at_least_the_time_asked);
    tcase_add_test(host, host_word_wait_times_out);
    tcase_add_test(host, host_word_wait_is_woken);
    tcase_set_timeout(host, 60);
    suite_add_tcase(s, host);
    TCase *dev = tcase_create("device");
    tcase_add_test(dev, device_ops_take_over);
    tcase_add_test(dev, device_without_ops_is_the_host);
    suite_add_tcase(s, dev);
    TCase *state = tcase_create("task_state");
    tcase_add_test(state, task_state_hook_is_used);
    tcase_add_test(state, host_task_state_is_per_thread);
    suite_add_tcase(s, state);
    TCase *ch = tcase_create("charges");
    tcase_add_loop_test(ch, msg_charges_matches_and_copies, 0, 2);
    tcase_set_timeout(ch, 150);
    suite_add_tcase(s, ch);
    TCase *wt = tcase_create("wtime");
    tcase_add_test(wt, wtime_advances);
    tcase_set_timeout(wt, 150);
    suite_add_tcase(s, wt);
    return test_run_suite(s);
}
