/* The message layer's protocols: every protocol, forced and automatic, over
 * the sizes around each threshold, with unaligned buffers and the data
 * checked byte for byte; truncation and discard under each protocol; the
 * same tests under several TORX_EAGER_LIMIT settings; vn mode. */
#include "harness.h"
#include "msg_test.h"

/* ---- A protocol run: every task sends a list of messages to the next task
 * and receives the list from the previous one (both directions at once). */

typedef struct variant {
    const char *name;
    torx_protocol_t proto;  /* forced, or AUTO */
    const char *eager;      /* TORX_EAGER_LIMIT, NULL: default */
    const char *adaptive;   /* TORX_ADAPTIVE_LIMIT, NULL: default */
    const char *rzv_data;   /* TORX_RZV_DATA, NULL: default */
    const char *mode;       /* TORX_MODE, NULL: default */
    int big;                /* add 64 MiB */
    int cut;                /* truncate and discard some receives */
    int ntasks;
} variant_t;

static const variant_t variants[] = {
    {"onepkt", TORX_PROTO_ONEPKT, NULL, NULL, NULL, NULL, 0, 0, 2},
    {"eager", TORX_PROTO_EAGER, NULL, NULL, NULL, NULL, 1, 0, 2},
    {"adaptive", TORX_PROTO_ADAPTIVE, NULL, NULL, NULL, NULL, 0, 0, 2},
    {"rzv", TORX_PROTO_RZV, NULL, NULL, NULL, NULL, 1, 0, 2},
    {"rzv-packets", TORX_PROTO_RZV, NULL, NULL, "packets", NULL, 1, 0, 2},
    {"rzv-fifo-bulk", TORX_PROTO_RZV, NULL, NULL, NULL, NULL, 0, 0, 2}, /* TORX_BULK=fifo */
    {"auto-240", TORX_PROTO_AUTO, "240", NULL, NULL, NULL, 0, 0, 3},
    {"auto-1000", TORX_PROTO_AUTO, "1000", NULL, NULL, NULL, 0, 0, 3},
    {"auto-65536", TORX_PROTO_AUTO, "65536", NULL, NULL, NULL, 0, 0, 3},
    {"auto-adaptive-1000", TORX_PROTO_AUTO, "65536", "1000", NULL, NULL, 0, 0, 3},
    {"auto-65536-packets", TORX_PROTO_AUTO, "65536", NULL, "packets", NULL, 0, 0, 3},
    {"cut-onepkt", TORX_PROTO_ONEPKT, NULL, NULL, NULL, NULL, 0, 1, 2},
    {"cut-eager", TORX_PROTO_EAGER, NULL, NULL, NULL, NULL, 0, 1, 2},
    {"cut-adaptive", TORX_PROTO_ADAPTIVE, NULL, NULL, NULL, NULL, 0, 1, 2},
    {"cut-rzv", TORX_PROTO_RZV, NULL, NULL, NULL, NULL, 0, 1, 2},
    {"cut-rzv-packets", TORX_PROTO_RZV, NULL, NULL, "packets", NULL, 0, 1, 2},
    {"cut-auto-1000", TORX_PROTO_AUTO, "1000", NULL, NULL, NULL, 0, 1, 3},
    {"vn", TORX_PROTO_VN, NULL, NULL, NULL, "vn", 0, 0, 2},
    {"cut-vn", TORX_PROTO_VN, NULL, NULL, NULL, "vn", 0, 1, 2},
    {"auto-vn-4", TORX_PROTO_AUTO, "1000", NULL, NULL, "vn", 0, 0, 4},
};
#define NVARIANTS ((int)(sizeof variants / sizeof variants[0]))

#define MAX_SIZES 40

/* The sizes a variant sends: 0, 1, around a full packet, around each
 * threshold, 1 MiB, and 64 MiB for the big ones. */
static size_t variant_sizes(const variant_t *v, size_t eager, size_t adaptive, size_t *out)
{
    const size_t one = TORX_MSG_ONEPKT_MAX - sizeof(test_hdr_t);
    const size_t base[] = {0,    1,        one - 1,     one,          one + 1,     239,
                           240,  241,      eager - 1,   eager,        eager + 1,   adaptive - 1,
                           adaptive, adaptive + 1, 4095, 4096, 4097, 1000,
                           65535, 65536, 65537, 1u << 20, 3 * 240 + 17};
    size_t n = 0;
    for (size_t i = 0; i < sizeof base / sizeof base[0]; i++) {
        if (base[i] > (64u << 20))
            continue; /* adaptive - 1 when adaptive is 0 */
        if (v->proto == TORX_PROTO_ONEPKT && base[i] > one)
            continue;
        out[n++] = base[i];
    }
    if (v->big)
        out[n++] = 64u << 20;
    return n;
}

typedef struct run {
    const variant_t *v;
    int rank, ntasks, src, dst;
    size_t sizes[MAX_SIZES];
    size_t nsizes;
    size_t eager, adaptive;
    int vn;
    torx_ctx_t *ctx;
    /* receive side */
    uint32_t next_seq;
    int received;
    /* send side */
    int sent;
    volatile int all_done;
    int errors;
} run_t;

typedef struct rbuf {
    run_t *run;
    uint32_t seq;
    size_t len, cap;
    int discard;
    uint8_t *base, *buf;
} rbuf_t;

#define GUARD 61

static void update_done(run_t *r)
{
    r->all_done = r->sent == (int)r->nsizes && r->received == (int)r->nsizes;
}

/* What the receiver expects AUTO to have picked (computed here, apart from
 * the library's own choice). */
static torx_protocol_t expected_protocol(const run_t *r, size_t len)
{
    if (r->v->proto != TORX_PROTO_AUTO)
        return r->v->proto;
    if (sizeof(test_hdr_t) + len <= TORX_MSG_ONEPKT_MAX)
        return TORX_PROTO_ONEPKT;
    if (r->vn)
        return TORX_PROTO_VN;
    if (len <= r->adaptive)
        return TORX_PROTO_ADAPTIVE;
    if (len <= r->eager)
        return TORX_PROTO_EAGER;
    return TORX_PROTO_RZV;
}

static void proto_recv_done(torx_ctx_t *ctx, void *arg, torx_status_t status, size_t received)
{
    (void)ctx;
    rbuf_t *b = arg;
    run_t *r = b->run;
    const torx_status_t want_st =
        b->discard ? TORX_OK : (b->len > b->cap ? TORX_ERR_TRUNCATE : TORX_OK);
    const size_t want_n = b->discard ? 0 : (b->len < b->cap ? b->len : b->cap);
    RUN_CHECK(r, status == want_st, "seq %u (%zu bytes, cap %zu): status %s, expected %s", b->seq,
              b->len, b->cap, torx_status_str(status), torx_status_str(want_st));
    RUN_CHECK(r, received == want_n, "seq %u: received %zu, expected %zu", b->seq, received,
              want_n);
    if (!b->discard) {
        for (size_t i = 0; i < want_n; i++)
            if (b->buf[i] != test_pattern((uint32_t)r->src, b->seq, i)) {
                RUN_CHECK(r, 0, "seq %u (%zu bytes): byte %zu is %u, expected %u", b->seq, b->len,
                          i, b->buf[i], test_pattern((uint32_t)r->src, b->seq, i));
                break;
            }
        for (size_t i = 0; i < 3; i++)
            RUN_CHECK(r, b->base[i] == 0xAB, "seq %u: written before the buffer", b->seq);
        for (size_t i = b->cap; i < b->cap + GUARD; i++)
            if (b->buf[i] != 0xAB) {
                RUN_CHECK(r, 0, "seq %u: byte %zu past the %zu-byte buffer was written", b->seq,
                          i, b->cap);
                break;
            }
        free(b->base);
    }
    free(b);
    r->received++;
    update_done(r);
}

static void proto_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                          torx_recv_t *recv)
{
    (void)ctx;
    run_t *r = harg;
    test_hdr_t h;
    RUN_CHECK(r, info->hdr_len == sizeof h, "header of %zu bytes", info->hdr_len);
    memcpy(&h, info->hdr, sizeof h);
    RUN_CHECK(r, info->src == r->src && h.sender == (uint32_t)r->src,
              "message from %d (header says %u), expected %d", info->src, h.sender, r->src);
    RUN_CHECK(r, h.seq == r->next_seq, "seq %u arrived when %u was due", h.seq, r->next_seq);
    r->next_seq = h.seq + 1;
    if (h.seq >= r->nsizes) {
        RUN_CHECK(r, 0, "seq %u beyond the list", h.seq);
        return;
    }
    const size_t len = r->sizes[h.seq];
    RUN_CHECK(r, info->data_len == len, "seq %u: data_len %zu, expected %zu", h.seq,
              info->data_len, len);
    const torx_protocol_t want = expected_protocol(r, len);
    RUN_CHECK(r, info->protocol == want, "seq %u (%zu bytes): protocol %s, expected %s", h.seq,
              len, torx_protocol_name(info->protocol), torx_protocol_name(want));
    if (info->data) /* all here already: it must be right too */
        for (size_t i = 0; i < len; i++)
            if (((const uint8_t *)info->data)[i] != test_pattern(h.sender, h.seq, i)) {
                RUN_CHECK(r, 0, "seq %u: info->data byte %zu wrong", h.seq, i);
                break;
            }
    rbuf_t *b = calloc(1, sizeof *b);
    b->run = r;
    b->seq = h.seq;
    b->len = len;
    b->cap = len;
    if (r->v->cut) {
        switch (h.seq % 4) {
        case 0: b->cap = len / 2; break;
        case 1: b->cap = len ? len - 1 : 0; break;
        case 2: b->discard = 1; break;
        default: break;
        }
    }
    if (!b->discard) {
        b->base = malloc(b->cap + 3 + GUARD);
        memset(b->base, 0xAB, b->cap + 3 + GUARD);
        b->buf = b->base + 3; /* unaligned */
        recv->buf = b->buf;
        recv->len = b->cap;
    }
    recv->done = proto_recv_done;
    recv->arg = b;
}

static void proto_send_done(torx_ctx_t *ctx, torx_msg_t *msg, void *arg)
{
    (void)ctx;
    run_t *r = arg;
    RUN_CHECK(r, !torx_msg_pending(msg), "message still pending in its done callback");
    r->sent++;
    update_done(r);
}

static int proto_task(torx_boot_t *boot, void *argp)
{
    const variant_t *v = argp;
    run_t *r = calloc(1, sizeof *r);
    r->v = v;
    r->rank = boot->rank;
    r->ntasks = boot->size;
    r->dst = (boot->rank + 1) % boot->size;
    r->src = (boot->rank + boot->size - 1) % boot->size;

    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    TASK_CHECK(torx_init(&attr, &r->ctx) == TORX_OK, "%s", torx_last_error());
    torx_ctx_t *ctx = r->ctx;
    const torx_limits_t *lim = torx_ctx_limits(ctx);
    r->eager = lim->eager_limit;
    r->adaptive = lim->adaptive_limit;
    if (v->mode) {
        TASK_CHECK(torx_mode(ctx) == TORX_MODE_VN && torx_tasks_per_node(ctx) == 2,
                   "mode %d, %d tasks per node", torx_mode(ctx), torx_tasks_per_node(ctx));
        const torx_map_t *map = torx_ctx_map(ctx);
        const torx_coord_t a = torx_map_coord(map, r->rank), b = torx_map_coord(map, r->src);
        r->vn = a.x == b.x && a.y == b.y && a.z == b.z;
    }
    r->nsizes = variant_sizes(v, r->eager, r->adaptive, r->sizes);
    TASK_CHECK(torx_register(ctx, 7, proto_handler, r) == TORX_OK, "%s", torx_last_error());
    /* Nobody sends before everyone's handler is registered. */
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");

    torx_msg_t *msgs = calloc(r->nsizes, sizeof *msgs);
    uint8_t **bufs = calloc(r->nsizes, sizeof *bufs);
    torx_protocol_t proto = v->proto;
    if (proto == TORX_PROTO_VN) {
        const torx_map_t *map = torx_ctx_map(ctx);
        const torx_coord_t a = torx_map_coord(map, r->rank), b = torx_map_coord(map, r->dst);
        TASK_CHECK(a.x == b.x && a.y == b.y && a.z == b.z, "vn variant needs one node");
    }
    for (uint32_t seq = 0; seq < r->nsizes; seq++) {
        const size_t len = r->sizes[seq];
        bufs[seq] = malloc(len + 8);
        uint8_t *data = bufs[seq] + 1 + seq % 7; /* unaligned */
        for (size_t i = 0; i < len; i++)
            data[i] = test_pattern((uint32_t)r->rank, seq, i);
        const test_hdr_t h = {.sender = (uint32_t)r->rank, .seq = seq};
        torx_status_t rc = torx_send(ctx, &msgs[seq], r->dst, 7, &h, sizeof h, data, len, proto,
                                     proto_send_done, r);
        TASK_CHECK(rc == TORX_OK, "send of %zu bytes (%s): %s", len, v->name, torx_last_error());
    }
    torx_status_t rc = torx_wait_timeout(ctx, &r->all_done, 90);
    TASK_CHECK(rc == TORX_OK, "%s: after 90 s: sent %d, received %d of %zu", v->name, r->sent,
               r->received, r->nsizes);
    TASK_CHECK(r->errors == 0, "%d errors", r->errors);

    torx_proto_stats_t st[TORX_PROTO_COUNT];
    torx_stats(ctx, st);
    if (proto != TORX_PROTO_AUTO) {
        TASK_CHECK(st[proto].sent == r->nsizes && st[proto].received == r->nsizes,
                   "%s counters: sent %llu received %llu, expected %zu", v->name,
                   (unsigned long long)st[proto].sent, (unsigned long long)st[proto].received,
                   r->nsizes);
        uint64_t bytes = 0;
        for (size_t i = 0; i < r->nsizes; i++)
            bytes += r->sizes[i];
        TASK_CHECK(st[proto].bytes_sent == bytes && st[proto].bytes_received == bytes,
                   "byte counters %llu/%llu, expected %llu",
                   (unsigned long long)st[proto].bytes_sent,
                   (unsigned long long)st[proto].bytes_received, (unsigned long long)bytes);
        TASK_CHECK(st[proto].packets_sent >= r->nsizes && st[proto].packets_received >= r->nsizes,
                   "packet counters");
    }
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    for (size_t i = 0; i < r->nsizes; i++)
        free(bufs[i]);
    free(bufs);
    free(msgs);
    free(r);
    return 0;
}

static void set_or_unset(const char *name, const char *value)
{
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
}

START_TEST(protocol_variant)
{
    const variant_t *v = &variants[_i];
    set_or_unset("TORX_EAGER_LIMIT", v->eager);
    set_or_unset("TORX_ADAPTIVE_LIMIT", v->adaptive);
    set_or_unset("TORX_RZV_DATA", v->rzv_data);
    set_or_unset("TORX_MODE", v->mode);
    if (!strcmp(v->name, "rzv-fifo-bulk"))
        setenv("TORX_BULK", "fifo", 1);
    if (v->mode && v->ntasks > 2)
        setenv("TORX_MAPPING", "TXYZ", 1); /* ranks 0,1 share a node, 2,3 the next */
    const double t0 = test_now();
    ck_assert_msg(torx_boot_fork_run(v->ntasks, proto_task, (void *)v, TEST_JOB_TIMEOUT, 0) == 0,
                  "variant %s failed", v->name);
    fprintf(stderr, "msg variant %-20s %.2f s\n", v->name, test_now() - t0);
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
    TASK_CHECK(torx_ctx_limits(ctx)->eager_limit == 4096, "default eager limit");
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
    TASK_CHECK(torx_choose_protocol(ctx, peer, 0, 4096) == TORX_PROTO_EAGER, "choose 4096");
    TASK_CHECK(torx_choose_protocol(ctx, peer, 0, 4097) == TORX_PROTO_RZV, "choose 4097");
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
    setenv("TORX_MODE", "co", 1);
    RUN_JOB(1, init_fail_task, "TORX_MODE=co");
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
