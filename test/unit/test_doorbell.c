/* The packet layer's doorbell (torx_pkt_wait / torx_pkt_wake): a waiter
 * with nothing coming sleeps (little CPU) and times out; a packet sent to a
 * sleeping task wakes it promptly; a wake from another thread of the task
 * ends a sleep; packets keep waking it under a stream of sleeps (no lost
 * wakeup). */
#include "harness.h"
#include "packet/pkt_internal.h" /* torxp_nap, torxp_thread_start: the task's own */

#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

static const torx_shape_t shape2 = {2, 1, 1, 1};

/* Times are the device's clock, pauses the device's nap and the waker the
 * task's thread (docs/packet-layer.md#time-waiting-and-threads): on sim
 * they are simulated time and an actor, where the host's clock, a
 * nanosleep and a pthread would stall or escape the simulation. The CPU
 * a waiter uses is the host's only: on sim the process runs every task. */
static int host_cpu(torx_pkt_dev_t *dev)
{
    return strcmp(torx_pkt_device_name(dev), "sim") != 0;
}

/* Rank 0 sleeps; rank 1 sends, after a pause, a packet carrying the time it
 * was sent (the device's clock: one host, or one simulation, one clock).
 * Five rounds. */
static int wake_task(torx_boot_t *boot, void *arg)
{
    (void)arg;
    torx_pkt_dev_t *dev;
    TASK_CHECK(test_open(boot, shape2, &dev) == TORX_OK, "%s", torx_last_error());
    const torx_coord_t peer = test_coord_of(shape2, 1 - boot->rank);
    for (int round = 0; round < 5; round++) {
        TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
        if (boot->rank == 0) {
            const double w0 = torx_pkt_wtime(dev), c0 = cpu_seconds();
            int waits = 0;
            while (!torx_pkt_poll(dev)) {
                const torx_status_t rc = torx_pkt_wait(dev, 2000);
                TASK_CHECK(rc == TORX_OK || rc == TORX_AGAIN, "wait: %s", torx_status_str(rc));
                TASK_CHECK(torx_pkt_wtime(dev) - w0 < 10, "no packet after 10 s");
                waits++;
            }
            const double woke = torx_pkt_wtime(dev), wall = woke - w0, cpu = cpu_seconds() - c0;
            const torx_pkt_hdr_t *p = torx_pkt_peek(dev);
            double sent;
            TASK_CHECK(p->payload_len == sizeof sent, "payload %u", p->payload_len);
            torx_pkt_read(p, &sent, 0, sizeof sent);
            torx_pkt_consume(dev);
            fprintf(stderr,
                    "doorbell round %d: slept %.3f s in %d wait(s), %.1f%% CPU, woken "
                    "%.3f ms after the send\n",
                    round, wall, waits, 100 * cpu / wall, (woke - sent) * 1e3);
            TASK_CHECK(wall > 0.5, "woken too early (%.3f s)", wall);
            TASK_CHECK(!host_cpu(dev) || cpu < 0.1 * wall,
                       "a sleeping waiter used %.0f%% of a core", 100 * cpu / wall);
            TASK_CHECK(woke - sent < 0.05, "woken %.1f ms after the send", (woke - sent) * 1e3);
        } else {
            torxp_nap(dev, 600 * 1000 * 1000);
            torx_pkt_hdr_t h;
            torx_pkt_hdr_init(&h, peer, round & 1 ? TORX_PKT_ADAPTIVE : 0);
            const double now = torx_pkt_wtime(dev);
            TASK_CHECK(torx_pkt_inject1(dev, &h, &now, sizeof now) == TORX_OK, "%s",
                       torx_last_error());
        }
    }
    TASK_CHECK(torx_gi_arm(dev) == TORX_OK, "gi");
    while (torx_gi_poll(dev) == TORX_AGAIN)
        torx_pkt_poll(dev);
    torx_pkt_close(dev);
    return 0;
}

START_TEST(sleeping_task_woken_by_packet)
{
    RUN_JOB(2, wake_task, NULL);
}
END_TEST

/* A wait with nothing coming times out after about its timeout. */
static int timeout_task(torx_boot_t *boot, void *arg)
{
    (void)arg;
    torx_pkt_dev_t *dev;
    TASK_CHECK(test_open(boot, (torx_shape_t){1, 1, 1, 1}, &dev) == TORX_OK, "%s",
               torx_last_error());
    const double t0 = torx_pkt_wtime(dev), c0 = cpu_seconds();
    torx_status_t rc;
    int oks = 0;
    while ((rc = torx_pkt_wait(dev, 300)) == TORX_OK && oks < 3)
        oks++; /* a spurious return is allowed, not a stream of them */
    const double wall = torx_pkt_wtime(dev) - t0, cpu = cpu_seconds() - c0;
    TASK_CHECK(rc == TORX_AGAIN, "wait gave %s", torx_status_str(rc));
    TASK_CHECK(wall >= 0.29 && wall < 3, "a 300 ms wait took %.3f s", wall);
    TASK_CHECK(!host_cpu(dev) || cpu < 0.1 * wall, "waiting used %.0f%% of a core",
               100 * cpu / wall);
    TASK_CHECK(torx_pkt_wait(dev, 0) == TORX_AGAIN, "a zero wait");
    torx_pkt_close(dev);
    return 0;
}

START_TEST(wait_times_out)
{
    RUN_JOB(1, timeout_task, NULL);
}
END_TEST

/* torx_pkt_wake from another thread ends a sleep, and a wake before the
 * wait makes it return at once. */
typedef struct waker {
    torx_pkt_dev_t *dev;
    volatile int go;
} waker_t;

static void *waker_main(void *p)
{
    waker_t *w = p;
    torxp_nap(w->dev, 200 * 1000 * 1000);
    /* release: pairs with the acquire below (orders nothing else). */
    __atomic_store_n(&w->go, 1, __ATOMIC_RELEASE);
    torx_pkt_wake(w->dev);
    return NULL;
}

static int thread_wake_task(torx_boot_t *boot, void *arg)
{
    (void)arg;
    torx_pkt_dev_t *dev;
    TASK_CHECK(test_open(boot, (torx_shape_t){1, 1, 1, 1}, &dev) == TORX_OK, "%s",
               torx_last_error());
    waker_t w = {.dev = dev};
    torxp_thread_t t;
    TASK_CHECK(torxp_thread_start(dev, &t, waker_main, &w) == TORX_OK, "%s", torx_last_error());
    const double t0 = torx_pkt_wtime(dev);
    /* acquire: pairs with the waker's release. */
    while (!__atomic_load_n(&w.go, __ATOMIC_ACQUIRE) && torx_pkt_wtime(dev) - t0 < 10)
        torx_pkt_wait(dev, 5000);
    const double took = torx_pkt_wtime(dev) - t0;
    torxp_thread_join(dev, &t);
    TASK_CHECK(took < 2, "the wake took %.3f s to end the sleep", took);
    torx_pkt_wake(dev);
    const double t1 = torx_pkt_wtime(dev);
    TASK_CHECK(torx_pkt_wait(dev, 5000) == TORX_OK && torx_pkt_wtime(dev) - t1 < 1,
               "a wake before the wait was lost");
    torx_pkt_close(dev);
    return 0;
}

START_TEST(wake_from_another_thread)
{
    RUN_JOB(1, thread_wake_task, NULL);
}
END_TEST

/* Many short exchanges where the receiver sleeps between packets: every
 * packet must end its sleep (a lost wakeup would show as a 1 s stall). */
#define PINGS 300

static int pingpong_task(torx_boot_t *boot, void *arg)
{
    (void)arg;
    torx_pkt_dev_t *dev;
    TASK_CHECK(test_open(boot, shape2, &dev) == TORX_OK, "%s", torx_last_error());
    const torx_coord_t peer = test_coord_of(shape2, 1 - boot->rank);
    torx_pkt_hdr_t h;
    torx_pkt_hdr_init(&h, peer, 0);
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    double worst = 0;
    for (int i = 0; i < PINGS; i++) {
        if ((i & 1) == boot->rank) {
            while (torx_pkt_inject1(dev, &h, &i, sizeof i) == TORX_NO_ROOM)
                torx_pkt_poll(dev);
        } else {
            const double t0 = torx_pkt_wtime(dev);
            while (!torx_pkt_poll(dev))
                torx_pkt_wait(dev, 1000); /* sleeps at once: no spinning first */
            const double t = torx_pkt_wtime(dev) - t0;
            worst = t > worst ? t : worst;
            int got;
            torx_pkt_read(torx_pkt_peek(dev), &got, 0, sizeof got);
            torx_pkt_consume(dev);
            TASK_CHECK(got == i, "ping %d carried %d", i, got);
        }
    }
    fprintf(stderr, "doorbell ping-pong rank %d: longest sleep %.3f ms\n", boot->rank, worst * 1e3);
    TASK_CHECK(worst < 0.9, "a packet waited %.3f s for its sleeping receiver", worst);
    TASK_CHECK(torx_gi_arm(dev) == TORX_OK, "gi");
    while (torx_gi_poll(dev) == TORX_AGAIN)
        torx_pkt_poll(dev);
    torx_pkt_close(dev);
    return 0;
}

START_TEST(no_lost_wakeup)
{
    RUN_JOB(2, pingpong_task, NULL);
}
END_TEST

Suite *doorbell_suite(void);

Suite *doorbell_suite(void)
{
    Suite *s = suite_create("doorbell");
    TCase *tc = tcase_create("doorbell");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, sleeping_task_woken_by_packet);
    tcase_add_test(tc, wait_times_out);
    tcase_add_test(tc, wake_from_another_thread);
    tcase_add_test(tc, no_lost_wakeup);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(doorbell_suite());
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
