/* Message-layer ordering and load: mixed protocols from every task to every
 * other under TORX_CHAOS (adaptive packets really reordered), checked per
 * sender in the handlers; and a many-to-one hot spot of a million
 * one-packet messages with nothing lost. */
#include "harness.h"
#include "msg_test.h" /* mix_task */

#include <sys/resource.h>

#define HANDLER 5

START_TEST(mixed_protocols_ordered_under_chaos)
{
    setenv("TORX_CHAOS", "4242", 1);
    setenv("TORX_ADAPTIVE_LIMIT", "2000", 1);
    if (_i == 1)
        setenv("TORX_RZV_DATA", "packets", 1);
    uint32_t per_peer = 1500 / SCALE;
    const double t0 = test_now();
    RUN_JOB(4, mix_task, &per_peer);
    fprintf(stderr, "mixed protocols under chaos (rzv data by %s): %.2f s\n",
            _i ? "packets" : "bulk get", test_now() - t0);
}
END_TEST

/* Eight tasks on two cores: the same, oversubscribed. */
START_TEST(mixed_protocols_oversubscribed)
{
    setenv("TORX_CHAOS", "99", 1);
    setenv("TORX_ADAPTIVE_LIMIT", "4096", 1);
    setenv("TORX_RZV_DATA", "packets", 1);
    uint32_t per_peer = 150 / SCALE;
    const double t0 = test_now();
    RUN_JOB(8, mix_task, &per_peer);
    fprintf(stderr, "mixed protocols, 8 tasks: %.2f s\n", test_now() - t0);
}
END_TEST

/* ---- Hot spot ----------------------------------------------------------------------- */

#define HOT_SENDERS 3
#define HOT_RING 1024

typedef struct hot {
    uint32_t per_sender;
    uint32_t next[HOT_SENDERS + 1];
    uint64_t got;
    volatile int all_in;
    int errors;
} hot_t;

static void hot_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                        torx_recv_t *recv)
{
    (void)ctx;
    (void)recv; /* buf stays NULL: the data is consumed from info->data */
    hot_t *hs = harg;
    test_hdr_t h;
    memcpy(&h, info->hdr, sizeof h);
    uint64_t check;
    if (info->data_len != sizeof check || !info->data || info->src < 1 || info->src > HOT_SENDERS) {
        RUN_CHECK(hs, 0, "bad message from %d: %zu bytes", info->src, info->data_len);
        return;
    }
    memcpy(&check, info->data, sizeof check);
    RUN_CHECK(hs, h.seq == hs->next[info->src], "from %d: seq %u when %u was due", info->src, h.seq,
              hs->next[info->src]);
    RUN_CHECK(hs, check == ((uint64_t)h.seq * 0x9E3779B97F4A7C15ULL ^ h.sender), "payload of %u/%u",
              h.sender, h.seq);
    hs->next[info->src] = h.seq + 1;
    if (++hs->got == (uint64_t)HOT_SENDERS * hs->per_sender)
        hs->all_in = 1;
}

static int hot_task(torx_boot_t *boot, void *argp)
{
    hot_t *hs = calloc(1, sizeof *hs);
    hs->per_sender = *(const uint32_t *)argp;
    torx_ctx_t *ctx;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(torx_register(ctx, HANDLER, hot_handler, hs) == TORX_OK, "register");
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    if (boot->rank == 0) {
        TASK_CHECK(torx_wait_timeout(ctx, &hs->all_in, 100) == TORX_OK,
                   "after 100 s only %llu of %llu messages arrived", (unsigned long long)hs->got,
                   (unsigned long long)HOT_SENDERS * hs->per_sender);
        TASK_CHECK(hs->errors == 0, "%d errors", hs->errors);
        torx_proto_stats_t st[TORX_PROTO_COUNT];
        torx_stats(ctx, st);
        TASK_CHECK(st[TORX_PROTO_ONEPKT].received == hs->got, "counter %llu",
                   (unsigned long long)st[TORX_PROTO_ONEPKT].received);
    } else {
        torx_msg_t *ring = calloc(HOT_RING, sizeof *ring);
        uint64_t *checks = calloc(HOT_RING, sizeof *checks); /* data lives until sent */
        const double deadline = torx_wtime(ctx) + 100;
        unsigned spins = 0;
        for (uint32_t seq = 0; seq < hs->per_sender; seq++) {
            torx_msg_t *m = &ring[seq % HOT_RING];
            while (torx_msg_pending(m)) { /* queued behind a full FIFO */
                if (!torx_advance(ctx))
                    test_relax(&spins);
                TASK_CHECK((spins & 1023) || torx_wtime(ctx) < deadline, "sender stuck at %u", seq);
            }
            const test_hdr_t h = {.sender = (uint32_t)boot->rank, .seq = seq};
            uint64_t *check = &checks[seq % HOT_RING];
            *check = (uint64_t)seq * 0x9E3779B97F4A7C15ULL ^ (uint64_t)boot->rank;
            TASK_CHECK(torx_send(ctx, m, 0, HANDLER, &h, sizeof h, check, sizeof *check,
                                 TORX_PROTO_AUTO, NULL, NULL) == TORX_OK,
                       "%s", torx_last_error());
        }
        /* Queued messages still point into ring and checks: finalize
         * (which drains them) comes first. */
        TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
        free(ring);
        free(checks);
        free(hs);
        return 0;
    }
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    free(hs);
    return 0;
}

START_TEST(hot_spot_million)
{
    uint32_t per_sender = (1000000 / SCALE + HOT_SENDERS - 1) / HOT_SENDERS;
    const double t0 = test_now();
    RUN_JOB(HOT_SENDERS + 1, hot_task, &per_sender);
    fprintf(stderr, "hot spot: %u one-packet messages in %.2f s\n", per_sender * HOT_SENDERS,
            test_now() - t0);
}
END_TEST

/* ---- An idle waiter does not burn its core ---------------------------------------------- */

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

typedef struct idle_arg {
    volatile int flag;
    int errors;
} idle_arg_t;

static void idle_wake(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info, torx_recv_t *recv)
{
    (void)ctx;
    (void)info;
    (void)recv;
    ((idle_arg_t *)harg)->flag = 1;
}

static int idle_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    idle_arg_t ia = {0};
    torx_ctx_t *ctx;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(torx_register(ctx, HANDLER, idle_wake, &ia) == TORX_OK, "register");
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    if (boot->rank == 0) {
        /* the task's clock and nap: simulated on sim, where the host's CPU
         * use says nothing of a task (docs/packet-layer.md#time-waiting-and-threads) */
        const double w0 = torx_wtime(ctx), c0 = cpu_seconds();
        TASK_CHECK(torx_wait(ctx, &ia.flag) == TORX_OK, "wait");
        const double wall = torx_wtime(ctx) - w0, cpu = cpu_seconds() - c0;
        const int host = !(torx_ctx_device(ctx)->caps & TORXP_CAP_MODELLED);
        fprintf(stderr, "idle wait: %.3f s wall, %.3f s CPU\n", wall, cpu);
        TASK_CHECK(wall > 0.5, "woken too early (%.3f s)", wall);
        TASK_CHECK(!host || cpu < 0.3 * wall, "an idle torx_wait burned %.0f%% of a core",
                   100 * cpu / wall);
    } else {
        torxp_nap(torx_ctx_device(ctx), 700 * 1000 * 1000);
        torx_msg_t m;
        TASK_CHECK(torx_send(ctx, &m, 0, HANDLER, NULL, 0, NULL, 0, TORX_PROTO_AUTO, NULL, NULL) ==
                       TORX_OK,
                   "%s", torx_last_error());
    }
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    return 0;
}

START_TEST(idle_wait_sleeps)
{
    RUN_JOB(2, idle_task, NULL);
}
END_TEST

/* ---- Line sends (the deposit bit) ------------------------------------------------------ */

#define LINE_HANDLER 6
#define LINE_PACKETS 3000

/* Per receiving task: the next line packet expected from each line, and the
 * next point-to-point message from rank 0. */
typedef struct line_rx {
    uint32_t next_line[2];
    uint32_t next_p2p;
    int errors;
} line_rx_t;

static void line_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                         torx_recv_t *recv)
{
    (void)ctx;
    (void)recv;
    line_rx_t *r = harg;
    test_hdr_t h; /* sender: which line (0: +x, 1: -x); seq */
    RUN_CHECK(r, info->hdr_len == sizeof h && info->data && info->protocol == TORX_PROTO_ONEPKT,
              "line packet: hdr %zu, data %p", info->hdr_len, info->data);
    memcpy(&h, info->hdr, sizeof h);
    RUN_CHECK(r, info->src == 0 && h.sender < 2, "line packet from %d, line %u", info->src,
              h.sender);
    if (h.sender >= 2)
        return;
    RUN_CHECK(r, h.seq == r->next_line[h.sender], "line %u: packet %u, expected %u", h.sender,
              h.seq, r->next_line[h.sender]);
    r->next_line[h.sender] = h.seq + 1;
    const uint8_t *d = info->data;
    RUN_CHECK(r, info->data_len == h.seq % 200, "line packet %u: %zu bytes", h.seq, info->data_len);
    for (size_t i = 0; i < info->data_len; i++)
        if (d[i] != test_pattern(h.sender, h.seq, i)) {
            RUN_CHECK(r, 0, "line packet %u: byte %zu", h.seq, i);
            break;
        }
}

static void line_p2p_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                             torx_recv_t *recv)
{
    (void)ctx;
    (void)recv;
    line_rx_t *r = harg;
    test_hdr_t h;
    memcpy(&h, info->hdr, sizeof h);
    RUN_CHECK(r, h.seq == r->next_p2p, "message %u from rank 0, expected %u", h.seq, r->next_p2p);
    r->next_p2p = h.seq + 1;
}

/* On a 4x1x1 torus rank 0 sends line packets along +x to the end (ranks 1,
 * 2, 3) and along -x for two hops (ranks 3 and 2), between adaptive
 * messages to rank 2 under chaos: every node of each line gets every packet
 * once and in order, and the messages' order is untouched. Bad lines are
 * refused. */
static int line_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    line_rx_t r = {{0, 0}, 0, 0};
    torx_ctx_t *ctx;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(torx_register(ctx, LINE_HANDLER, line_handler, &r) == TORX_OK, "register");
    TASK_CHECK(torx_register(ctx, HANDLER, line_p2p_handler, &r) == TORX_OK, "register");
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    if (boot->rank == 0) {
        static const struct {
            int dim, dir, hops, handler;
            const char *what;
        } bad_lines[] = {
            {TORX_DIM_X, 1, 4, LINE_HANDLER, "4 hops on a ring of 4"},
            {TORX_DIM_X, 1, 0, LINE_HANDLER, "0 hops"},
            {TORX_DIM_Y, 1, 1, LINE_HANDLER, "a line along a dimension of one node"},
            {TORX_DIM_X, 0, 1, LINE_HANDLER, "direction 0"},
            {3, 1, 1, LINE_HANDLER, "dimension 3"},
            {TORX_DIM_X, 1, 1, TORX_MSG_HANDLERS, "a handler out of range"},
        };
        for (size_t i = 0; i < sizeof bad_lines / sizeof bad_lines[0]; i++) {
            torx_line_t bad;
            TASK_CHECK(torx_line_init(ctx, &bad, bad_lines[i].dim, bad_lines[i].dir,
                                      bad_lines[i].hops, bad_lines[i].handler, 8) == TORX_ERR_INVAL,
                       "%s accepted", bad_lines[i].what);
        }
        torx_line_t line[2];
        TASK_CHECK(torx_line_init(ctx, &line[0], TORX_DIM_X, 1, 3, LINE_HANDLER,
                                  sizeof(test_hdr_t)) == TORX_OK,
                   "%s", torx_last_error());
        TASK_CHECK(torx_line_init(ctx, &line[1], TORX_DIM_X, -1, 2, LINE_HANDLER,
                                  sizeof(test_hdr_t)) == TORX_OK,
                   "%s", torx_last_error());
        uint8_t data[240];
        TASK_CHECK(torx_line_send(&line[0], &(test_hdr_t){0, 0}, data, 240 - 7) == TORX_ERR_INVAL,
                   "a line packet over 240 bytes accepted");
        torx_msg_t msgs[LINE_PACKETS / 10];
        static uint8_t big[5000];
        for (uint32_t k = 0; k < LINE_PACKETS; k++) {
            for (int l = 0; l < 2; l++) {
                const test_hdr_t h = {(uint32_t)l, k};
                for (size_t i = 0; i < k % 200; i++)
                    data[i] = test_pattern((uint32_t)l, k, i);
                torx_status_t st;
                while ((st = torx_line_send(&line[l], &h, data, k % 200)) == TORX_AGAIN)
                    TASK_CHECK(torx_advance(ctx) >= 0, "%s", torx_last_error());
                TASK_CHECK(st == TORX_OK, "line send: %s", torx_last_error());
            }
            if (k % 10 == 0) {
                const test_hdr_t h = {0, k / 10};
                TASK_CHECK(torx_send(ctx, &msgs[k / 10], 2, HANDLER, &h, sizeof h, big,
                                     k % 20 ? 300 : sizeof big, TORX_PROTO_ADAPTIVE, NULL,
                                     NULL) == TORX_OK,
                           "%s", torx_last_error());
            }
        }
        for (uint32_t k = 0; k < LINE_PACKETS / 10; k++)
            while (torx_msg_pending(&msgs[k]))
                TASK_CHECK(torx_advance(ctx) >= 0, "%s", torx_last_error());
    } else {
        /* rank 1: +x only; 2: both lines and the messages; 3: both lines */
        const uint32_t want_pos = LINE_PACKETS, want_neg = boot->rank == 1 ? 0 : LINE_PACKETS;
        const uint32_t want_p2p = boot->rank == 2 ? LINE_PACKETS / 10 : 0;
        while (r.next_line[0] < want_pos || r.next_line[1] < want_neg || r.next_p2p < want_p2p)
            TASK_CHECK(torx_advance(ctx) >= 0 && !r.errors, "%s", torx_last_error());
        TASK_CHECK(r.next_line[1] == want_neg, "rank %d got %u packets of the -x line", boot->rank,
                   r.next_line[1]);
    }
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    TASK_CHECK(!r.errors, "%d errors", r.errors);
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    return 0;
}

START_TEST(line_sends_reach_every_node_in_order)
{
    setenv("TORX_CHAOS", "77", 1);
    setenv("TORX_TORUS", "4x1x1", 1);
    setenv("TORX_MODE", "heater", 1);
    RUN_JOB(4, line_task, NULL);
    unsetenv("TORX_TORUS");
    unsetenv("TORX_MODE");
    unsetenv("TORX_CHAOS");
}
END_TEST

Suite *msg_order_suite(void);

Suite *msg_order_suite(void)
{
    Suite *s = suite_create("msg_order");
    TCase *tc = tcase_create("order");
    tcase_set_timeout(tc, 150);
    tcase_add_loop_test(tc, mixed_protocols_ordered_under_chaos, 0, 2);
    tcase_add_test(tc, mixed_protocols_oversubscribed);
    tcase_add_test(tc, hot_spot_million);
    tcase_add_test(tc, idle_wait_sleeps);
    tcase_add_test(tc, line_sends_reach_every_node_in_order);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(msg_order_suite());
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
