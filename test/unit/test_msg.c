/* The message layer's protocols: every protocol, forced and automatic, over
 * the sizes around each threshold, with unaligned buffers and the data
 * checked byte for byte; truncation and discard under each protocol; the
 * same tests under several TORX_EAGER_LIMIT settings; vn mode. */
#include "harness.h"
#include "msg_test.h"

static const variant_t variants[] = {
    {"onepkt", TORX_PROTO_ONEPKT, NULL, NULL, NULL, NULL, NULL, 0, 0, 2, NULL, NULL, NULL},
    {"eager", TORX_PROTO_EAGER, NULL, NULL, NULL, NULL, NULL, 1, 0, 2, NULL, NULL, NULL},
    {"adaptive", TORX_PROTO_ADAPTIVE, NULL, NULL, NULL, NULL, NULL, 0, 0, 2, NULL, NULL, NULL},
    {"rzv", TORX_PROTO_RZV, NULL, NULL, NULL, NULL, NULL, 1, 0, 2, NULL, NULL, NULL},
    {"rzv-packets", TORX_PROTO_RZV, NULL, NULL, "packets", NULL, NULL, 1, 0, 2, NULL, NULL, NULL},
    {"rzv-fifo-bulk", TORX_PROTO_RZV, NULL, NULL, NULL, NULL, "fifo", 0, 0, 2, NULL, NULL, NULL},
    {"auto-240", TORX_PROTO_AUTO, "240", NULL, NULL, NULL, NULL, 0, 0, 3, NULL, NULL, NULL},
    {"auto-1000", TORX_PROTO_AUTO, "1000", NULL, NULL, NULL, NULL, 0, 0, 3, NULL, NULL, NULL},
    {"auto-65536", TORX_PROTO_AUTO, "65536", NULL, NULL, NULL, NULL, 0, 0, 3, NULL, NULL, NULL},
    {"auto-adaptive-1000", TORX_PROTO_AUTO, "65536", "1000", NULL, NULL, NULL, 0, 0, 3, NULL, NULL, NULL},
    {"auto-65536-packets", TORX_PROTO_AUTO, "65536", NULL, "packets", NULL, NULL, 0, 0, 3, NULL, NULL, NULL},
    {"cut-onepkt", TORX_PROTO_ONEPKT, NULL, NULL, NULL, NULL, NULL, 0, 1, 2, NULL, NULL, NULL},
    {"cut-eager", TORX_PROTO_EAGER, NULL, NULL, NULL, NULL, NULL, 0, 1, 2, NULL, NULL, NULL},
    {"cut-adaptive", TORX_PROTO_ADAPTIVE, NULL, NULL, NULL, NULL, NULL, 0, 1, 2, NULL, NULL, NULL},
    {"cut-rzv", TORX_PROTO_RZV, NULL, NULL, NULL, NULL, NULL, 0, 1, 2, NULL, NULL, NULL},
    {"cut-rzv-packets", TORX_PROTO_RZV, NULL, NULL, "packets", NULL, NULL, 0, 1, 2, NULL, NULL, NULL},
    {"cut-auto-1000", TORX_PROTO_AUTO, "1000", NULL, NULL, NULL, NULL, 0, 1, 3, NULL, NULL, NULL},
    {"vn", TORX_PROTO_VN, NULL, NULL, NULL, "vn", NULL, 0, 0, 2, NULL, NULL, NULL},
    {"cut-vn", TORX_PROTO_VN, NULL, NULL, NULL, "vn", NULL, 0, 1, 2, NULL, NULL, NULL},
    {"auto-vn-4", TORX_PROTO_AUTO, "1000", NULL, NULL, "vn", NULL, 0, 0, 4, NULL, NULL, NULL},
    /* Staging: pieces of odd sizes through the smallest area, so pieces
     * wrap, skip the ring's tail and wait for the receiver's release. */
    {"staged-wrap", TORX_PROTO_EAGER, NULL, NULL, NULL, NULL, NULL, 0, 0, 2, "1", "1000", "4096"},
    {"cut-staged", TORX_PROTO_EAGER, NULL, NULL, NULL, NULL, NULL, 0, 1, 2, "1", "777", "4096"},
    {"auto-staged-3", TORX_PROTO_AUTO, "65536", NULL, NULL, NULL, NULL, 0, 0, 3, "300", "1500",
     "8192"},
    {"eager-unstaged", TORX_PROTO_EAGER, NULL, NULL, NULL, NULL, NULL, 0, 0, 2, "0", NULL, NULL},
    {"vn-staged-wrap", TORX_PROTO_AUTO, "65536", NULL, NULL, "vn", NULL, 0, 0, 2, "1", "1000",
     "4096"},
    {"cut-vn-staged", TORX_PROTO_AUTO, "65536", NULL, NULL, "vn", NULL, 0, 1, 2, "1", "1000",
     "4096"},
    {"auto-vn-4-staged", TORX_PROTO_AUTO, "65536", NULL, NULL, "vn", NULL, 0, 0, 4, "200", "3000",
     "8192"},
};
#define NVARIANTS ((int)(sizeof variants / sizeof variants[0]))

START_TEST(protocol_variant)
{
    const variant_t *v = &variants[_i];
    ck_assert_msg(test_run_variant(v) == 0, "variant %s failed", v->name);
}
END_TEST

/* ---- API checks ----------------------------------------------------------------- */

static int api_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_ctx_t *ctx;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(torx_rank(ctx) == boot->rank && torx_size(ctx) == boot->size, "rank/size");
    TASK_CHECK(torx_mode(ctx) == TORX_MODE_HEATER && torx_tasks_per_node(ctx) == 1, "mode");
    TASK_CHECK(torx_ctx_device(ctx) != NULL, "device");
    const torx_limits_t *lim = torx_ctx_limits(ctx);
    TASK_CHECK(lim->eager_limit == TORXM_EAGER_LIMIT && lim->stage_min == TORXM_STAGE_MIN &&
                   lim->stage_chunk == TORXM_STAGE_CHUNK,
               "default limits: eager %zu, staged from %zu in pieces of %zu", lim->eager_limit,
               lim->stage_min, lim->stage_chunk);
    torx_msg_t m;
    char big[300] = {0};
    const int peer = 1 - boot->rank;
    TASK_CHECK(torx_send(ctx, &m, peer, 0, big, 8, big, 233, TORX_PROTO_ONEPKT, NULL, NULL) ==
                   TORX_ERR_INVAL,
               "forced one-packet too large accepted");
    TASK_CHECK(strstr(torx_last_error(), "one-packet") != NULL, "message: %s",
               torx_last_error());
    TASK_CHECK(torx_send(ctx, &m, 2, 0, NULL, 0, NULL, 0, TORX_PROTO_AUTO, NULL, NULL) ==
                   TORX_ERR_INVAL,
               "bad rank accepted");
    TASK_CHECK(torx_send(ctx, &m, peer, 64, NULL, 0, NULL, 0, TORX_PROTO_AUTO, NULL, NULL) ==
                   TORX_ERR_INVAL,
               "bad handler accepted");
    TASK_CHECK(torx_send(ctx, &m, peer, 0, big, 65, NULL, 0, TORX_PROTO_AUTO, NULL, NULL) ==
                   TORX_ERR_INVAL,
               "65-byte header accepted");
    TASK_CHECK(torx_send(ctx, &m, peer, 0, NULL, 0, big, 300, TORX_PROTO_VN, NULL, NULL) ==
                   TORX_ERR_INVAL,
               "vn protocol accepted in heater mode");
    TASK_CHECK(torx_send(ctx, &m, peer, 0, NULL, 0, big, 300, TORX_PROTO_COUNT, NULL, NULL) ==
                   TORX_ERR_INVAL,
               "bad protocol accepted");
    TASK_CHECK(torx_register(ctx, 64, NULL, NULL) == TORX_ERR_INVAL, "bad handler id");
    TASK_CHECK(torx_choose_protocol(ctx, peer, 8, 232) == TORX_PROTO_ONEPKT, "choose 232");
    TASK_CHECK(torx_choose_protocol(ctx, peer, 8, 233) == TORX_PROTO_EAGER, "choose 233");
    TASK_CHECK(torx_choose_protocol(ctx, peer, 0, TORXM_EAGER_LIMIT) == TORX_PROTO_EAGER,
               "choose the eager limit");
    TASK_CHECK(torx_choose_protocol(ctx, peer, 0, TORXM_EAGER_LIMIT + 1) == TORX_PROTO_RZV,
               "choose one past the eager limit");
    TASK_CHECK(!strcmp(torx_protocol_name(TORX_PROTO_ONEPKT), "one-packet"), "name");

    /* A wait with nothing coming times out, and advance is idle. */
    volatile int never = 0;
    const double t0 = test_now();
    TASK_CHECK(torx_wait_timeout(ctx, &never, 0.05) == TORX_AGAIN, "wait did not time out");
    TASK_CHECK(test_now() - t0 < 5, "wait overran its timeout");

    /* Work units run at once outside co mode. */
    int hits = 0, h1 = 0;
    TASK_CHECK(torx_costart(ctx, test_bump, &hits, &h1) == TORX_OK && hits == 1, "costart");
    TASK_CHECK(torx_cojoin(ctx, h1) == TORX_OK, "cojoin");
    TASK_CHECK(torx_cojoin(ctx, h1 + 1) == TORX_ERR_INVAL, "cojoin of a bad handle");

    /* Messages for an unregistered handler are discarded, and their
     * senders still complete, under every protocol. */
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    static uint8_t data[100000];
    torx_msg_t ms[4];
    int sent = 0;
    const torx_protocol_t ps[4] = {TORX_PROTO_ONEPKT, TORX_PROTO_EAGER, TORX_PROTO_ADAPTIVE,
                                   TORX_PROTO_RZV};
    for (int i = 0; i < 4; i++)
        TASK_CHECK(torx_send(ctx, &ms[i], peer, 33, NULL, 0, data,
                             ps[i] == TORX_PROTO_ONEPKT ? 10 : sizeof data, ps[i], test_count_msg,
                             &sent) == TORX_OK,
                   "%s", torx_last_error());
    const double deadline = test_now() + 30;
    while (sent < 4 && test_now() < deadline)
        if (!torx_advance(ctx))
            sched_yield();
    TASK_CHECK(sent == 4, "only %d sends to an unregistered handler completed", sent);
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    return 0;
}

START_TEST(api_checks)
{
    RUN_JOB(2, api_task, NULL);
}
END_TEST

static int init_fail_task(torx_boot_t *boot, void *argp)
{
    const char *want = argp;
    torx_ctx_t *ctx = NULL;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    torx_status_t rc = torx_init(&attr, &ctx);
    TASK_CHECK(rc < 0 && ctx == NULL, "init succeeded (%s)", torx_status_str(rc));
    TASK_CHECK(strstr(torx_last_error(), want) != NULL, "message '%s' lacks '%s'",
               torx_last_error(), want);
    return 0;
}

START_TEST(init_rejects_bad_environment)
{
    setenv("TORX_MODE", "warm", 1);
    RUN_JOB(1, init_fail_task, "TORX_MODE");
    unsetenv("TORX_MODE");
    setenv("TORX_EAGER_LIMIT", "12k", 1);
    RUN_JOB(1, init_fail_task, "TORX_EAGER_LIMIT");
    unsetenv("TORX_EAGER_LIMIT");
    setenv("TORX_RZV_DATA", "dma", 1);
    RUN_JOB(1, init_fail_task, "TORX_RZV_DATA");
    unsetenv("TORX_RZV_DATA");
    setenv("TORX_MODE", "vn", 1);
    setenv("TORX_CORES_PER_NODE", "100", 1);
    RUN_JOB(1, init_fail_task, "TORX_CORES_PER_NODE");
}
END_TEST

Suite *msg_suite(void);

Suite *msg_suite(void)
{
    Suite *s = suite_create("msg");
    TCase *tc = tcase_create("protocols");
    tcase_set_timeout(tc, 150);
    tcase_add_loop_test(tc, protocol_variant, 0, NVARIANTS);
    suite_add_tcase(s, tc);
    TCase *api = tcase_create("api");
    tcase_set_timeout(api, 60);
    tcase_add_test(api, api_checks);
    tcase_add_test(api, init_rejects_bad_environment);
    suite_add_tcase(s, api);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(msg_suite());
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
