/* Message-layer ordering and load: mixed protocols from every task to every
 * other under TORX_CHAOS (adaptive packets really reordered), checked per
 * sender in the handlers; and a many-to-one hot spot of a million
 * one-packet messages with nothing lost. */
#include "harness.h"
#include "msg_test.h"
#include "msglayer/msg_internal.h" /* ctx->parked: proof that reordering happened */

#include <sys/resource.h>

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SCALE 10
#else
#define SCALE 1
#endif

#define MAX_TASKS 16
#define HANDLER 5

/* ---- Mixed protocols under chaos ---------------------------------------------------- */

#define MIX_MAX_LEN (150 * 1000)
#define MIX_SHIFT 251 /* message seq's data starts at (seq % MIX_SHIFT) in the pattern */

typedef struct mix {
    int rank, ntasks;
    uint32_t per_peer;
    uint32_t next[MAX_TASKS]; /* next seq due from each sender */
    uint64_t received, sent, expected_rx, expected_tx;
    volatile int all_done;
    int errors;
    uint8_t *pattern; /* MIX_MAX_LEN + MIX_SHIFT bytes of this task's pattern */
} mix_t;

typedef struct mix_rbuf {
    mix_t *mx;
    uint32_t sender, seq;
    size_t len;
    uint8_t buf[];
} mix_rbuf_t;

/* Message seq's length: mostly short, some medium, a few long; the same
 * function at both ends. */
static size_t mix_len(uint32_t sender, uint32_t dest, uint32_t seq)
{
    uint64_t x = ((uint64_t)sender << 40) ^ ((uint64_t)dest << 20) ^ seq;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    const unsigned bucket = (unsigned)(x % 100);
    const uint64_t r = x >> 8;
    if (bucket < 40)
        return (size_t)(r % 233);
    if (bucket < 80)
        return 233 + (size_t)(r % 3000);
    if (bucket < 96)
        return 3000 + (size_t)(r % 20000);
    return 20000 + (size_t)(r % (MIX_MAX_LEN - 20000));
}

/* The forced protocol of message seq, or AUTO. */
static torx_protocol_t mix_proto(uint32_t seq, size_t len)
{
    static const torx_protocol_t ps[] = {TORX_PROTO_AUTO, TORX_PROTO_EAGER, TORX_PROTO_ADAPTIVE,
                                         TORX_PROTO_RZV, TORX_PROTO_AUTO, TORX_PROTO_ADAPTIVE,
                                         TORX_PROTO_ONEPKT};
    torx_protocol_t p = ps[(seq * 7u + (seq >> 3)) % (sizeof ps / sizeof ps[0])];
    if (p == TORX_PROTO_ONEPKT && len + sizeof(test_hdr_t) > TORX_MSG_ONEPKT_MAX)
        p = TORX_PROTO_AUTO;
    return p;
}

static uint8_t mix_byte(uint32_t sender, size_t j)
{
    return test_pattern(sender, 0, j);
}

static void mix_update(mix_t *mx)
{
    mx->all_done = mx->received == mx->expected_rx && mx->sent == mx->expected_tx;
}

static void mix_recv_done(torx_ctx_t *ctx, void *arg, torx_status_t status, size_t received)
{
    (void)ctx;
    mix_rbuf_t *b = arg;
    mix_t *mx = b->mx;
    RUN_CHECK(mx, status == TORX_OK && received == b->len, "%u/%u: %s, %zu of %zu bytes",
              b->sender, b->seq, torx_status_str(status), received, b->len);
    const size_t shift = b->seq % MIX_SHIFT;
    for (size_t i = 0; i < b->len; i++)
        if (b->buf[i] != mix_byte(b->sender, shift + i)) {
            RUN_CHECK(mx, 0, "%u/%u (%zu bytes): byte %zu wrong", b->sender, b->seq, b->len, i);
            break;
        }
    free(b);
    mx->received++;
    mix_update(mx);
}

static void mix_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                        torx_recv_t *recv)
{
    (void)ctx;
    mix_t *mx = harg;
    test_hdr_t h;
    memcpy(&h, info->hdr, sizeof h);
    RUN_CHECK(mx, h.sender == (uint32_t)info->src && info->src < mx->ntasks, "sender %u/%d",
              h.sender, info->src);
    RUN_CHECK(mx, h.seq == mx->next[info->src],
              "from %d: seq %u matched when %u was due (%s protocol)", info->src, h.seq,
              mx->next[info->src], torx_protocol_name(info->protocol));
    mx->next[info->src] = h.seq + 1;
    const size_t len = mix_len(h.sender, (uint32_t)mx->rank, h.seq);
    RUN_CHECK(mx, info->data_len == len, "%u/%u: %zu bytes, expected %zu", h.sender, h.seq,
              info->data_len, len);
    mix_rbuf_t *b = malloc(sizeof *b + info->data_len + 1);
    b->mx = mx;
    b->sender = h.sender;
    b->seq = h.seq;
    b->len = info->data_len;
    recv->buf = b->buf;
    recv->len = info->data_len;
    recv->done = mix_recv_done;
    recv->arg = b;
}

static void mix_send_done(torx_ctx_t *ctx, torx_msg_t *msg, void *arg)
{
    (void)ctx;
    (void)msg;
    mix_t *mx = arg;
    mx->sent++;
    mix_update(mx);
}

static int mix_task(torx_boot_t *boot, void *argp)
{
    const uint32_t per_peer = *(const uint32_t *)argp;
    mix_t *mx = calloc(1, sizeof *mx);
    mx->rank = boot->rank;
    mx->ntasks = boot->size;
    mx->per_peer = per_peer;
    mx->expected_rx = mx->expected_tx = (uint64_t)per_peer * (uint64_t)(boot->size - 1);
    mx->pattern = malloc(MIX_MAX_LEN + MIX_SHIFT);
    for (size_t j = 0; j < MIX_MAX_LEN + MIX_SHIFT; j++)
        mx->pattern[j] = mix_byte((uint32_t)boot->rank, j);

    torx_ctx_t *ctx;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(torx_register(ctx, HANDLER, mix_handler, mx) == TORX_OK, "register");
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");

    torx_msg_t *msgs = calloc(mx->expected_tx, sizeof *msgs);
    size_t k = 0;
    for (uint32_t seq = 0; seq < per_peer; seq++)
        for (int d = 1; d < boot->size; d++) {
            const int dest = (boot->rank + d) % boot->size;
            const size_t len = mix_len((uint32_t)boot->rank, (uint32_t)dest, seq);
            const test_hdr_t h = {.sender = (uint32_t)boot->rank, .seq = seq};
            const torx_status_t rc =
                torx_send(ctx, &msgs[k++], dest, HANDLER, &h, sizeof h,
                          mx->pattern + seq % MIX_SHIFT, len, mix_proto(seq, len), mix_send_done,
                          mx);
            TASK_CHECK(rc == TORX_OK, "send: %s", torx_last_error());
            if ((k & 15) == 0)
                torx_advance(ctx); /* keep receiving while sending */
        }
    const torx_status_t rc = torx_wait_timeout(ctx, &mx->all_done, 100);
    TASK_CHECK(rc == TORX_OK, "after 100 s: sent %llu of %llu, received %llu of %llu",
               (unsigned long long)mx->sent, (unsigned long long)mx->expected_tx,
               (unsigned long long)mx->received, (unsigned long long)mx->expected_rx);
    TASK_CHECK(mx->errors == 0, "%d errors", mx->errors);

    /* Reordering must really have happened somewhere, or this test proves
     * nothing about the adaptive paths. */
    uint64_t parked = ctx->parked, all[MAX_TASKS];
    TASK_CHECK(boot->allgather(boot, &parked, all, sizeof parked) == TORX_OK, "allgather");
    uint64_t total = 0;
    for (int i = 0; i < boot->size; i++)
        total += all[i];
    if (boot->rank == 0)
        fprintf(stderr, "mix: %llu adaptive packets came early and were parked\n",
                (unsigned long long)total);
    TASK_CHECK(total > 0, "no adaptive packet ever came out of order");
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    free(msgs);
    free(mx->pattern);
    free(mx);
    return 0;
}

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
    if (info->data_len != sizeof check || !info->data || info->src < 1 ||
        info->src > HOT_SENDERS) {
        RUN_CHECK(hs, 0, "bad message from %d: %zu bytes", info->src, info->data_len);
        return;
    }
    memcpy(&check, info->data, sizeof check);
    RUN_CHECK(hs, h.seq == hs->next[info->src], "from %d: seq %u when %u was due", info->src,
              h.seq, hs->next[info->src]);
    RUN_CHECK(hs, check == ((uint64_t)h.seq * 0x9E3779B97F4A7C15ULL ^ h.sender),
              "payload of %u/%u", h.sender, h.seq);
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
                   "after 100 s only %llu of %llu messages arrived",
                   (unsigned long long)hs->got,
                   (unsigned long long)HOT_SENDERS * hs->per_sender);
        TASK_CHECK(hs->errors == 0, "%d errors", hs->errors);
        torx_proto_stats_t st[TORX_PROTO_COUNT];
        torx_stats(ctx, st);
        TASK_CHECK(st[TORX_PROTO_ONEPKT].received == hs->got, "counter %llu",
                   (unsigned long long)st[TORX_PROTO_ONEPKT].received);
    } else {
        torx_msg_t *ring = calloc(HOT_RING, sizeof *ring);
        uint64_t *checks = calloc(HOT_RING, sizeof *checks); /* data lives until sent */
        const double deadline = test_now() + 100;
        unsigned spins = 0;
        for (uint32_t seq = 0; seq < hs->per_sender; seq++) {
            torx_msg_t *m = &ring[seq % HOT_RING];
            while (torx_msg_pending(m)) { /* queued behind a full FIFO */
                if (!torx_advance(ctx))
                    test_relax(&spins);
                TASK_CHECK((spins & 1023) || test_now() < deadline, "sender stuck at %u", seq);
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

static void idle_wake(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                      torx_recv_t *recv)
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
        const double w0 = test_now(), c0 = cpu_seconds();
        TASK_CHECK(torx_wait(ctx, &ia.flag) == TORX_OK, "wait");
        const double wall = test_now() - w0, cpu = cpu_seconds() - c0;
        fprintf(stderr, "idle wait: %.3f s wall, %.3f s CPU\n", wall, cpu);
        TASK_CHECK(wall > 0.5, "woken too early (%.3f s)", wall);
        TASK_CHECK(cpu < 0.3 * wall, "an idle torx_wait burned %.0f%% of a core",
                   100 * cpu / wall);
    } else {
        const struct timespec pause = {0, 700 * 1000 * 1000};
        nanosleep(&pause, NULL);
        torx_msg_t m;
        TASK_CHECK(torx_send(ctx, &m, 0, HANDLER, NULL, 0, NULL, 0, TORX_PROTO_AUTO, NULL,
                             NULL) == TORX_OK,
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
