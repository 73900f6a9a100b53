/* The message layer's protocols: every protocol, forced and automatic, over
 * the sizes around each threshold, with unaligned buffers and the data
 * checked byte for byte; truncation and discard under each protocol; the
 * same tests under several TORX_EAGER_LIMIT settings; vn mode. */
#include "harness.h"
#include "msg_test.h"
#include "packet/shm/shm.h" /* the shm device's count of shared gets */

static const variant_t variants[] = {
    {"onepkt", TORX_PROTO_ONEPKT, NULL, NULL, NULL, NULL, NULL, 0, 0, 2, NULL, NULL, NULL},
    {"eager", TORX_PROTO_EAGER, NULL, NULL, NULL, NULL, NULL, 1, 0, 2, NULL, NULL, NULL},
    {"adaptive", TORX_PROTO_ADAPTIVE, NULL, NULL, NULL, NULL, NULL, 0, 0, 2, NULL, NULL, NULL},
    {"rzv", TORX_PROTO_RZV, NULL, NULL, "bulk", NULL, NULL, 1, 0, 2, NULL, NULL, NULL},
    {"rzv-packets", TORX_PROTO_RZV, NULL, NULL, "packets", NULL, NULL, 1, 0, 2, NULL, NULL, NULL},
    {"rzv-fifo-bulk", TORX_PROTO_RZV, NULL, NULL, NULL, NULL, "fifo", 0, 0, 2, NULL, NULL, NULL},
    {"auto-240", TORX_PROTO_AUTO, "240", NULL, NULL, NULL, NULL, 0, 0, 3, NULL, NULL, NULL},
    {"auto-1000", TORX_PROTO_AUTO, "1000", NULL, NULL, NULL, NULL, 0, 0, 3, NULL, NULL, NULL},
    {"auto-65536", TORX_PROTO_AUTO, "65536", NULL, NULL, NULL, NULL, 0, 0, 3, NULL, NULL, NULL},
    {"auto-adaptive-1000", TORX_PROTO_AUTO, "65536", "1000", NULL, NULL, NULL, 0, 0, 3, NULL, NULL,
     NULL},
    {"auto-65536-packets", TORX_PROTO_AUTO, "65536", NULL, "packets", NULL, NULL, 0, 0, 3, NULL,
     NULL, NULL},
    {"cut-onepkt", TORX_PROTO_ONEPKT, NULL, NULL, NULL, NULL, NULL, 0, 1, 2, NULL, NULL, NULL},
    {"cut-eager", TORX_PROTO_EAGER, NULL, NULL, NULL, NULL, NULL, 0, 1, 2, NULL, NULL, NULL},
    {"cut-adaptive", TORX_PROTO_ADAPTIVE, NULL, NULL, NULL, NULL, NULL, 0, 1, 2, NULL, NULL, NULL},
    {"cut-rzv", TORX_PROTO_RZV, NULL, NULL, "bulk", NULL, NULL, 0, 1, 2, NULL, NULL, NULL},
    {"cut-rzv-packets", TORX_PROTO_RZV, NULL, NULL, "packets", NULL, NULL, 0, 1, 2, NULL, NULL,
     NULL},
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
    /* Rendezvous data through the staging area after a clear-to-send: 64
     * MiB through the 1 MiB ring, truncated receives, pieces that wrap the
     * smallest area, vn scouts, three tasks. */
    {"rzv-staged", TORX_PROTO_RZV, NULL, NULL, "staged", NULL, NULL, 1, 0, 2, NULL, NULL, NULL},
    {"cut-rzv-staged", TORX_PROTO_RZV, NULL, NULL, "staged", NULL, NULL, 0, 1, 2, NULL, NULL, NULL},
    {"rzv-staged-wrap", TORX_PROTO_RZV, NULL, NULL, "staged", NULL, NULL, 0, 0, 2, NULL, "1000",
     "4096"},
    {"vn-rzv-staged", TORX_PROTO_VN, "1000", NULL, "staged", "vn", NULL, 0, 0, 2, NULL, NULL, NULL},
    {"cut-vn-rzv-staged", TORX_PROTO_VN, "1000", NULL, "staged", "vn", NULL, 0, 1, 2, NULL, NULL,
     NULL},
    {"auto-rzv-staged-3", TORX_PROTO_AUTO, "1000", NULL, "staged", NULL, NULL, 0, 0, 3, NULL, NULL,
     NULL},
    /* vn data is never streamed as packets, whatever TORX_RZV_DATA says */
    {"vn-rzv-packets", TORX_PROTO_VN, "1000", NULL, "packets", "vn", NULL, 0, 0, 2, NULL, NULL,
     NULL},
};
#define NVARIANTS ((int)(sizeof variants / sizeof variants[0]))

START_TEST(protocol_variant)
{
    const variant_t *v = &variants[_i];
    ck_assert_msg(test_run_variant(v) == 0, "variant %s failed", v->name);
}
END_TEST

/* ---- An idle pair stages past the eager limit -------------------------------------- */

/* A ping-pong of rendezvous-sized messages finds the pair idle every time
 * (each side has released the other's pieces before it replies) and the
 * peer heard from since the last one (but for the very first ping), so they
 * go staged: eager in heater mode, vn through the staging area in vn mode.
 * A stream sent while the receiver does not advance finds the area in use
 * after its first message, so the rest take the rendezvous (vn bulk get).
 * co mode and TORX_EAGER_IDLE_LIMIT=0 keep the rendezvous throughout.
 * Eager-sized messages (16 KiB) stage whatever the traffic, unless copies
 * run slow: then from 8 KiB they take the rendezvous too. A message longer
 * than the staging area ("-long": a 64 KiB ring) stages all the same and
 * streams through it as the receiver releases pieces. */

#define IDLE_SIZE 200000u /* 13 pieces of 16 KiB, the last one short */
#define IDLE_PINGS 4
#define IDLE_STREAM 6
#define IDLE_HANDLER 9

typedef struct idle_variant {
    const char *name, *mode, *limit, *cost;
    const char *stage_bytes; /* TORX_STAGE_BYTES, NULL: default */
    /* which messages stage: 1 every idle one; 2 only the first idle one
     * (slow copies); 3 all (eager-sized); 4 each side's first (eager-sized,
     * slow copies) */
    int promotes;
    size_t size; /* 0: IDLE_SIZE */
} idle_variant_t;

/* The cost limit at 65535 takes the copies' speed out of the test (under
 * make -j check the tasks share cores, and copies run slow); at 1 every
 * measured copy is too slow, so only each side's first message, before
 * any measurement, stages (the 64th would probe again). */
static const idle_variant_t idle_variants[] = {
    {"heater", "heater", NULL, "65535", NULL, 1, 0},
    {"vn", "vn", NULL, "65535", NULL, 1, 0},
    {"co", "co", NULL, "65535", NULL, 0, 0},
    {"heater-off", "heater", "0", "65535", NULL, 0, 0},
    {"heater-at", "heater", "200000", "65535", NULL, 1, 0},
    {"heater-below", "heater", "199999", "65535", NULL, 0, 0},
    {"heater-slow", "heater", NULL, "1", NULL, 2, 0},
    {"vn-slow", "vn", NULL, "1", NULL, 2, 0},
    {"heater-16k", "heater", NULL, "65535", NULL, 3, 16384},
    {"heater-16k-slow", "heater", NULL, "1", NULL, 4, 16384},
    {"vn-16k-slow", "vn", NULL, "1", NULL, 4, 16384},
    {"heater-8191-slow", "heater", NULL, "1", NULL, 3, 8191},
    {"heater-long", "heater", NULL, "65535", "65536", 1, 0},
    {"vn-long", "vn", NULL, "65535", "65536", 1, 0},
};

#define IDLE_MSGS (IDLE_PINGS + IDLE_STREAM)

/* Messages from one source are matched in send order but may complete out
 * of it (a scout's get finishes before the long staged message it passed),
 * so each has its own buffer and slot. */
typedef struct idle_state idle_state_t;
typedef struct idle_slot {
    idle_state_t *st;
    int seq;
    uint64_t pieces_at_match; /* ctx->staged_pieces when matched */
} idle_slot_t;

struct idle_state {
    const idle_variant_t *v;
    int rank, errors, matched;
    volatile int received, sent;
    torx_protocol_t proto[IDLE_MSGS];
    uint64_t pieces[IDLE_MSGS]; /* staged pieces the message took */
    idle_slot_t slot[IDLE_MSGS];
    size_t size;
    uint8_t *buf[IDLE_MSGS];
};

static void idle_recv_done(torx_ctx_t *ctx, void *arg, torx_status_t status, size_t received)
{
    idle_slot_t *slot = arg;
    idle_state_t *st = slot->st;
    const int seq = slot->seq;
    if (status != TORX_OK || received != st->size)
        st->errors++;
    const size_t wrong =
        test_pattern_wrong(st->buf[seq], st->size, (uint32_t)(1 - st->rank), (uint32_t)seq);
    if (wrong != SIZE_MAX) {
        fprintf(stderr, "idle %s: message %d byte %zu wrong\n", st->v->name, seq, wrong);
        st->errors++;
    }
    st->pieces[seq] = ctx->staged_pieces - slot->pieces_at_match;
    st->received++;
}

static void idle_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                         torx_recv_t *recv)
{
    idle_state_t *st = harg;
    const int seq = st->matched++;
    if (seq >= IDLE_MSGS) {
        st->errors++;
        recv->buf = NULL;
        return;
    }
    st->proto[seq] = info->protocol;
    st->slot[seq] = (idle_slot_t){.st = st, .seq = seq, .pieces_at_match = ctx->staged_pieces};
    recv->buf = st->buf[seq];
    recv->len = st->size;
    recv->done = idle_recv_done;
    recv->arg = &st->slot[seq];
}

static void idle_send_done(torx_ctx_t *ctx, torx_msg_t *msg, void *arg)
{
    (void)ctx;
    (void)msg;
    ((idle_state_t *)arg)->sent++;
}

static int idle_wait(torx_ctx_t *ctx, volatile int *counter, int want)
{
    const double deadline = test_now() + 60;
    while (*counter < want && test_now() < deadline)
        if (torx_advance(ctx) < 0)
            return -1;
    return *counter >= want ? 0 : -1;
}

static int idle_task(torx_boot_t *boot, void *argp)
{
    const idle_variant_t *v = argp;
    torx_ctx_t *ctx;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    static idle_state_t st;
    st = (idle_state_t){.v = v, .rank = boot->rank, .size = v->size ? v->size : IDLE_SIZE};
    static uint8_t out[IDLE_MSGS][IDLE_SIZE];
    for (int m = 0; m < IDLE_MSGS; m++) {
        TASK_CHECK((st.buf[m] = malloc(st.size)) != NULL, "out of memory");
        for (size_t i = 0; i < st.size; i++)
            out[m][i] = test_pattern((uint32_t)boot->rank, (uint32_t)m, i);
    }
    TASK_CHECK(torx_register(ctx, IDLE_HANDLER, idle_handler, &st) == TORX_OK, "%s",
               torx_last_error());
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    const int peer = 1 - boot->rank;
    static torx_msg_t msgs[IDLE_MSGS];

    /* Ping-pong: rank 0 sends, rank 1 answers once it has it all. */
    for (int i = 0; i < IDLE_PINGS; i++) {
        if (boot->rank == 1)
            TASK_CHECK(idle_wait(ctx, &st.received, i + 1) == 0, "%s: ping %d never came", v->name,
                       i);
        TASK_CHECK(torx_send(ctx, &msgs[i], peer, IDLE_HANDLER, NULL, 0, out[i], st.size,
                             TORX_PROTO_AUTO, idle_send_done, &st) == TORX_OK,
                   "%s", torx_last_error());
        if (boot->rank == 0)
            TASK_CHECK(idle_wait(ctx, &st.received, i + 1) == 0, "%s: pong %d never came", v->name,
                       i);
    }
    TASK_CHECK(idle_wait(ctx, &st.sent, IDLE_PINGS) == 0, "%s: ping-pong sends incomplete",
               v->name);
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");

    /* Stream: rank 0 sends them all while rank 1 waits in the barrier. */
    if (boot->rank == 0)
        for (int i = IDLE_PINGS; i < IDLE_MSGS; i++)
            TASK_CHECK(torx_send(ctx, &msgs[i], peer, IDLE_HANDLER, NULL, 0, out[i], st.size,
                                 TORX_PROTO_AUTO, idle_send_done, &st) == TORX_OK,
                       "%s", torx_last_error());
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    if (boot->rank == 0)
        TASK_CHECK(idle_wait(ctx, &st.sent, IDLE_MSGS) == 0, "%s: stream sends incomplete (%d)",
                   v->name, st.sent);
    else
        TASK_CHECK(idle_wait(ctx, &st.received, IDLE_MSGS) == 0, "%s: stream incomplete (%d)",
                   v->name, st.received);
    TASK_CHECK(st.errors == 0, "%s: %d errors", v->name, st.errors);

    /* What each message took, and whether its data came through the area. */
    const torx_protocol_t staged =
        torx_mode(ctx) == TORX_MODE_VN ? TORX_PROTO_VN : TORX_PROTO_EAGER;
    const torx_protocol_t unstaged =
        torx_mode(ctx) == TORX_MODE_VN ? TORX_PROTO_VN : TORX_PROTO_RZV;
    const int last = boot->rank == 1 ? IDLE_MSGS : IDLE_PINGS;
    /* The limit in force is the one asked for, whatever the area: a longer
     * message streams through it. Pieces are the context's, at most the
     * device's largest (smaller on the hybrid device of test/ofi-variant.sh). */
    const size_t asked = torx_mode(ctx) == TORX_MODE_CO ? 0
                         : v->limit                     ? strtoul(v->limit, NULL, 10)
                                                        : 4194304;
    TASK_CHECK(torx_ctx_limits(ctx)->idle_limit == asked, "%s: idle limit %zu in force, not %zu",
               v->name, torx_ctx_limits(ctx)->idle_limit, asked);
    const size_t max = torx_stage_max(torx_ctx_device(ctx));
    const size_t chunk =
        torx_ctx_limits(ctx)->stage_chunk < max ? torx_ctx_limits(ctx)->stage_chunk : max;
    for (int i = 0; i < last; i++) {
        /* Staged once the sender has heard from its peer since its last
         * long message: rank 1's pings but the first, and the stream's
         * first; all of rank 0's pongs. With slow copies only the first of
         * those, before any measurement. */
        const int first = boot->rank == 1 ? 1 : 0;
        const int idle = v->promotes == 1   ? i >= first && i < first + IDLE_PINGS
                         : v->promotes == 2 ? i == first
                         : v->promotes == 3 ? 1
                         : v->promotes == 4 ? i == 0
                                            : 0;
        const uint64_t pieces = st.pieces[i];
        TASK_CHECK(st.proto[i] == (idle ? staged : unstaged),
                   "%s: rank %d message %d came %s, expected %s", v->name, boot->rank, i,
                   torx_protocol_name(st.proto[i]), torx_protocol_name(idle ? staged : unstaged));
        TASK_CHECK(idle ? pieces == (st.size + chunk - 1) / chunk : pieces == 0,
                   "%s: rank %d message %d: %llu staged pieces", v->name, boot->rank, i,
                   (unsigned long long)pieces);
    }
    for (int m = 0; m < IDLE_MSGS; m++)
        free(st.buf[m]);
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    return 0;
}

START_TEST(idle_pair_stages)
{
    const idle_variant_t *v = &idle_variants[_i];
    setenv("TORX_MODE", v->mode, 1);
    if (v->limit)
        setenv("TORX_EAGER_IDLE_LIMIT", v->limit, 1);
    setenv("TORX_STAGE_COST_MAX", v->cost, 1);
    if (v->stage_bytes)
        setenv("TORX_STAGE_BYTES", v->stage_bytes, 1);
    /* What is not idle-staged takes the bulk get, whatever auto would say
     * on this machine: the test counts the pieces of each message. */
    setenv("TORX_RZV_DATA", "bulk", 1);
    RUN_JOB(2, idle_task, (void *)v);
    unsetenv("TORX_RZV_DATA");
    unsetenv("TORX_STAGE_BYTES");
    unsetenv("TORX_EAGER_IDLE_LIMIT");
    unsetenv("TORX_STAGE_COST_MAX");
    unsetenv("TORX_MODE");
}
END_TEST

/* ---- Messages behind a long staged message go first ------------------------------- */

/* Rank 0 hears from rank 1, so its next long message (PASS_LONG bytes, four
 * times the 64 KiB ring) goes staged; rank 1 then stays in the bootstrap's
 * barrier without advancing, the ring fills, and the staged message waits
 * for room. Of the messages sent behind it, a one-packet message and a
 * rendezvous (vn: bulk) scout need neither the ring nor the receiver's
 * eager slot and go first: the one-packet send completes and the scout is
 * counted sent while the long message is unfinished. An eager-sized
 * message needs the ring and waits, and so does the one-packet message
 * behind it. Once rank 1 advances it matches all five in send order, each
 * by the protocol expected, every byte right. */
#define PASS_MSGS 5
#define PASS_HANDLER 11
static const size_t pass_sizes[PASS_MSGS] = {262147, 8, 100003, 20000, 8};

typedef struct pass_state pass_state_t;
typedef struct pass_slot {
    pass_state_t *st;
    int i;
} pass_slot_t;

struct pass_state {
    int rank, errors, matched;
    volatile int received, sent, hello;
    torx_protocol_t proto[PASS_MSGS];
    pass_slot_t slot[PASS_MSGS];
    uint8_t *buf[PASS_MSGS];
};

static void pass_recv_done(torx_ctx_t *ctx, void *arg, torx_status_t status, size_t received)
{
    (void)ctx;
    const pass_slot_t *slot = arg;
    pass_state_t *st = slot->st;
    const int i = slot->i;
    if (status != TORX_OK || received != pass_sizes[i])
        st->errors++;
    const size_t wrong = test_pattern_wrong(st->buf[i], pass_sizes[i], 0, (uint32_t)i);
    if (wrong != SIZE_MAX) {
        fprintf(stderr, "pass: message %d byte %zu wrong\n", i, wrong);
        st->errors++;
    }
    st->received++;
}

static void pass_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                         torx_recv_t *recv)
{
    (void)ctx;
    pass_state_t *st = harg;
    const int i = st->matched++;
    uint32_t idx = UINT32_MAX;
    if (info->hdr_len == sizeof idx)
        memcpy(&idx, info->hdr, sizeof idx);
    if (i >= PASS_MSGS || idx != (uint32_t)i || info->data_len != pass_sizes[i]) {
        fprintf(stderr, "pass: message %u (%zu bytes) matched as message %d\n", idx, info->data_len,
                i);
        st->errors++;
        recv->buf = NULL;
        return;
    }
    st->proto[i] = info->protocol;
    st->slot[i] = (pass_slot_t){.st = st, .i = i};
    recv->buf = st->buf[i];
    recv->len = pass_sizes[i];
    recv->done = pass_recv_done;
    recv->arg = &st->slot[i];
}

static void pass_send_done(torx_ctx_t *ctx, torx_msg_t *msg, void *arg)
{
    (void)ctx;
    (void)msg;
    ((pass_state_t *)arg)->sent++;
}

static void pass_hello(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info, torx_recv_t *recv)
{
    (void)ctx;
    (void)info;
    ((pass_state_t *)harg)->hello = 1;
    recv->buf = NULL;
}

static int pass_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_ctx_t *ctx;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    static pass_state_t st;
    st = (pass_state_t){.rank = boot->rank};
    for (int i = 0; i < PASS_MSGS; i++) {
        st.buf[i] = malloc(pass_sizes[i]);
        TASK_CHECK(st.buf[i] != NULL, "out of memory");
        for (size_t b = 0; boot->rank == 0 && b < pass_sizes[i]; b++)
            st.buf[i][b] = test_pattern(0, (uint32_t)i, b);
    }
    TASK_CHECK(torx_register(ctx, PASS_HANDLER, pass_handler, &st) == TORX_OK &&
                   torx_register(ctx, PASS_HANDLER + 1, pass_hello, &st) == TORX_OK,
               "%s", torx_last_error());
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    const int vn = torx_mode(ctx) == TORX_MODE_VN;
    const torx_protocol_t staged = vn ? TORX_PROTO_VN : TORX_PROTO_EAGER;
    const torx_protocol_t scout = vn ? TORX_PROTO_VN : TORX_PROTO_RZV;
    const torx_protocol_t expect[PASS_MSGS] = {staged, TORX_PROTO_ONEPKT, scout, staged,
                                               TORX_PROTO_ONEPKT};
    static torx_msg_t msgs[PASS_MSGS];
    static torx_msg_t hello;
    static const uint32_t idx[PASS_MSGS] = {0, 1, 2, 3, 4};

    if (boot->rank == 1) {
        /* The reply that lets rank 0's long message stage. */
        TASK_CHECK(torx_send(ctx, &hello, 0, PASS_HANDLER + 1, NULL, 0, NULL, 0, TORX_PROTO_AUTO,
                             pass_send_done, &st) == TORX_OK,
                   "%s", torx_last_error());
        TASK_CHECK(idle_wait(ctx, &st.sent, 1) == 0, "hello not sent");
        /* Two barriers: rank 0 sends after the first, and this task makes
         * no progress until rank 0 has looked, in the second (with one, a
         * slow task still advancing in the wait above took the messages
         * rank 0 expects to find pending). */
        TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
        TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
        TASK_CHECK(idle_wait(ctx, &st.received, PASS_MSGS) == 0, "only %d of %d messages came",
                   st.received, PASS_MSGS);
        TASK_CHECK(st.errors == 0, "%d errors", st.errors);
        for (int i = 0; i < PASS_MSGS; i++)
            TASK_CHECK(st.proto[i] == expect[i], "message %d came %s, expected %s", i,
                       torx_protocol_name(st.proto[i]), torx_protocol_name(expect[i]));
    } else {
        TASK_CHECK(idle_wait(ctx, &st.hello, 1) == 0, "rank 1's hello never came");
        TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
        torx_proto_stats_t before[TORX_PROTO_COUNT];
        torx_stats(ctx, before);
        for (int i = 0; i < PASS_MSGS; i++)
            TASK_CHECK(torx_send(ctx, &msgs[i], 1, PASS_HANDLER, &idx[i], sizeof idx[i], st.buf[i],
                                 pass_sizes[i], TORX_PROTO_AUTO, pass_send_done, &st) == TORX_OK,
                       "%s", torx_last_error());
        const double until = test_now() + 0.2;
        while (test_now() < until)
            TASK_CHECK(torx_advance(ctx) >= 0, "%s", torx_last_error());
        int pending[PASS_MSGS];
        for (int i = 0; i < PASS_MSGS; i++)
            pending[i] = torx_msg_pending(&msgs[i]);
        torx_proto_stats_t now[TORX_PROTO_COUNT];
        torx_stats(ctx, now);
        const uint64_t scouts = now[scout].sent - before[scout].sent - (vn ? 1 : 0);
        TASK_CHECK(pending[0] && !pending[1] && pending[2] && pending[3] && pending[4],
                   "pending while rank 1 waits: %d %d %d %d %d, expected 1 0 1 1 1", pending[0],
                   pending[1], pending[2], pending[3], pending[4]);
        TASK_CHECK(now[staged].sent - before[staged].sent >= 1 && scouts == 1,
                   "the scout of message 2 is not out (%llu)", (unsigned long long)scouts);
        TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
        TASK_CHECK(idle_wait(ctx, &st.sent, PASS_MSGS) == 0, "%d of %d sends done", st.sent,
                   PASS_MSGS);
    }
    for (int i = 0; i < PASS_MSGS; i++)
        free(st.buf[i]);
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    return 0;
}

static const char *const pass_modes[] = {"heater", "vn"};

START_TEST(scouts_pass_a_long_staged_message)
{
    setenv("TORX_MODE", pass_modes[_i], 1);
    setenv("TORX_STAGE_BYTES", "65536", 1);
    setenv("TORX_STAGE_COST_MAX", "65535", 1);
    setenv("TORX_RZV_DATA", "bulk", 1); /* the scout's data needs no ring */
    RUN_JOB(2, pass_task, NULL);
    unsetenv("TORX_RZV_DATA");
    unsetenv("TORX_STAGE_COST_MAX");
    unsetenv("TORX_STAGE_BYTES");
    unsetenv("TORX_MODE");
}
END_TEST

/* ---- A rendezvous receiver shares its copy with an idle sender ------------------ */

/* In a ping-pong each rendezvous sender has nothing else to copy for its
 * receiver, which asks it to help (torx_bulk_get_shared): every receive is
 * a shared get on the shm device's cma path. In an exchange, a receiver
 * whose own send to that peer still waits (here rank 0, its peer held in
 * the bootstrap's barrier so that nothing of rank 0's is acked) copies
 * alone. The counts are the shm device's; on other devices (test/ofi-
 * variant.sh) only the data are checked. */
#define SHARE_RZV_SIZE ((1u << 20) + 3)
#define SHARE_RZV_PINGS 3
#define SHARE_RZV_HANDLER 10

typedef struct share_rzv_state {
    int rank, errors;
    volatile int received, sent;
    int seq;
    uint8_t *buf;
} share_rzv_state_t;

static void share_rzv_recv_done(torx_ctx_t *ctx, void *arg, torx_status_t status, size_t received)
{
    (void)ctx;
    share_rzv_state_t *st = arg;
    if (status != TORX_OK || received != SHARE_RZV_SIZE)
        st->errors++;
    const size_t wrong = test_pattern_wrong(st->buf, SHARE_RZV_SIZE, (uint32_t)(1 - st->rank),
                                            (uint32_t)st->received);
    if (wrong != SIZE_MAX) {
        fprintf(stderr, "shared rzv: message %d byte %zu wrong\n", st->received, wrong);
        st->errors++;
    }
    st->received++;
}

static void share_rzv_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                              torx_recv_t *recv)
{
    (void)ctx;
    share_rzv_state_t *st = harg;
    if (info->protocol != (torx_mode(ctx) == TORX_MODE_VN ? TORX_PROTO_VN : TORX_PROTO_RZV))
        st->errors++;
    recv->buf = st->buf;
    recv->len = SHARE_RZV_SIZE;
    recv->done = share_rzv_recv_done;
    recv->arg = st;
}

static void share_rzv_send_done(torx_ctx_t *ctx, torx_msg_t *msg, void *arg)
{
    (void)ctx;
    (void)msg;
    ((share_rzv_state_t *)arg)->sent++;
}

/* The shm device's count of shared gets, or -1 on another device. */
static long shared_gets(torx_ctx_t *ctx)
{
    torx_pkt_dev_t *dev = torx_ctx_device(ctx);
    const char *device = getenv("TORX_DEVICE");
    if ((device && strcmp(device, "shm")) || strcmp(torx_bulk_path(dev), "cma"))
        return -1;
    return (long)((const torxp_shm_dev_t *)dev)->shared_gets;
}

static int share_rzv_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_ctx_t *ctx;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    static share_rzv_state_t st;
    st = (share_rzv_state_t){.rank = boot->rank, .buf = malloc(SHARE_RZV_SIZE)};
    enum { NOUT = SHARE_RZV_PINGS + 1 };
    static uint8_t out[NOUT][SHARE_RZV_SIZE];
    static torx_msg_t msgs[NOUT];
    TASK_CHECK(st.buf, "out of memory");
    for (int m = 0; m < NOUT; m++)
        for (size_t i = 0; i < SHARE_RZV_SIZE; i++)
            out[m][i] = test_pattern((uint32_t)boot->rank, (uint32_t)m, i);
    TASK_CHECK(torx_register(ctx, SHARE_RZV_HANDLER, share_rzv_handler, &st) == TORX_OK, "%s",
               torx_last_error());
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    const int peer = 1 - boot->rank;
    const long before = shared_gets(ctx);

    /* Ping-pong: rank 0 sends, rank 1 answers once it has it all. */
    for (int i = 0; i < SHARE_RZV_PINGS; i++) {
        if (boot->rank == 1)
            TASK_CHECK(idle_wait(ctx, &st.received, i + 1) == 0, "ping %d never came", i);
        TASK_CHECK(torx_send(ctx, &msgs[i], peer, SHARE_RZV_HANDLER, NULL, 0, out[i],
                             SHARE_RZV_SIZE, TORX_PROTO_AUTO, share_rzv_send_done, &st) == TORX_OK,
                   "%s", torx_last_error());
        if (boot->rank == 0)
            TASK_CHECK(idle_wait(ctx, &st.received, i + 1) == 0, "pong %d never came", i);
    }
    TASK_CHECK(idle_wait(ctx, &st.sent, SHARE_RZV_PINGS) == 0, "ping-pong sends incomplete");
    const long pingpong = shared_gets(ctx);
    TASK_CHECK(before < 0 || pingpong - before == SHARE_RZV_PINGS,
               "rank %d shared %ld of its %d ping-pong receives", boot->rank, pingpong - before,
               SHARE_RZV_PINGS);

    /* Exchange: rank 1's send is out first; rank 0 sends its own and
     * receives while rank 1 waits in the barrier, so rank 0's send is
     * still waiting throughout its receive. */
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    if (boot->rank == 1)
        TASK_CHECK(torx_send(ctx, &msgs[NOUT - 1], peer, SHARE_RZV_HANDLER, NULL, 0, out[NOUT - 1],
                             SHARE_RZV_SIZE, TORX_PROTO_AUTO, share_rzv_send_done, &st) == TORX_OK,
                   "%s", torx_last_error());
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    if (boot->rank == 0) {
        TASK_CHECK(torx_send(ctx, &msgs[NOUT - 1], peer, SHARE_RZV_HANDLER, NULL, 0, out[NOUT - 1],
                             SHARE_RZV_SIZE, TORX_PROTO_AUTO, share_rzv_send_done, &st) == TORX_OK,
                   "%s", torx_last_error());
        TASK_CHECK(idle_wait(ctx, &st.received, NOUT) == 0, "exchange: nothing came");
        TASK_CHECK(pingpong < 0 || shared_gets(ctx) == pingpong,
                   "rank 0 shared its receive while its own send waited");
    }
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    TASK_CHECK(idle_wait(ctx, &st.received, NOUT) == 0, "exchange: rank %d received %d", boot->rank,
               st.received);
    TASK_CHECK(idle_wait(ctx, &st.sent, NOUT) == 0, "exchange: rank %d sent %d", boot->rank,
               st.sent);
    TASK_CHECK(st.errors == 0, "%d errors", st.errors);
    free(st.buf);
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    return 0;
}

static const char *const share_rzv_modes[] = {"heater", "vn"};

START_TEST(rzv_shares_with_idle_sender)
{
    setenv("TORX_MODE", share_rzv_modes[_i], 1);
    setenv("TORX_EAGER_IDLE_LIMIT", "0", 1);
    setenv("TORX_RZV_DATA", "bulk", 1); /* shared gets are the bulk path's */
    RUN_JOB(2, share_rzv_task, NULL);
    unsetenv("TORX_RZV_DATA");
    unsetenv("TORX_EAGER_IDLE_LIMIT");
    unsetenv("TORX_MODE");
}
END_TEST

/* ---- A pair's rendezvous data moves one way in both directions ------------------- */

/* PAIR_ROUNDS rounds exchange a rendezvous message each way (a barrier
 * between rounds, so each round's scouts meet the verdicts of that round's
 * sends); then rank 1 alone sends PAIR_AFTER messages. Each variant gives
 * each rank its own TORX_BULK_COST and TORX_STAGE_COST_MAX:
 *
 * PAIR_SLOW   Both bulk costs say auto stages; rank 0's copies count as slow
 *             as soon as one is measured (cost limit 0), rank 1's never.
 *             Round 0, before any measurement, stages both ways. From round
 *             1 on rank 0's scouts go without the staging offer, and rank 0
 *             declines rank 1's offers too: both directions take bulk gets,
 *             but rank 0's probe (its 64th slow scout, round 64), which rank
 *             1 stages. One way, rank 0's hold lasts more than a window of
 *             64 messages and lapses within TORXM_RZV_HOLD; the rest are
 *             staged. Before the pair rule, rank 1's messages
 *             were all staged while rank 0's took bulk gets.
 * PAIR_ALL    The two ranks' bulk costs straddle the line at 200 but their
 *             mean is above it: everything is staged, both ways and one way.
 * PAIR_NONE   Their mean is below it: nothing is staged. Before the pair's
 *             mean, each receiver went by its own figure, and one direction
 *             staged while the other took bulk gets.
 *
 * Auto stages only on the cma path (elsewhere torx_bulk_cost is 0, and
 * nothing may stage). */
/* three 16 KiB pieces: shorter than TORXM_RZV_WAY_MIN, where these rules hold */
#define PAIR_SIZE 49152u
static_assert(PAIR_SIZE < TORXM_RZV_WAY_MIN, "the pair rules are for shorter rendezvous");
#define PAIR_ROUNDS 70
#define PAIR_AFTER 300 /* more than TORXM_RZV_HOLD */
#define PAIR_PROBE_ROUND 64
#define PAIR_HANDLER 12

enum { PAIR_SLOW, PAIR_ALL, PAIR_NONE };

typedef struct pair_variant {
    const char *mode;
    const char *bulk_cost[2], *cost_max[2]; /* per rank */
    int expect;
} pair_variant_t;

static const pair_variant_t pair_variants[] = {
    {"heater", {"1000", "1000"}, {"0", "65535"}, PAIR_SLOW},
    {"vn", {"1000", "1000"}, {"0", "65535"}, PAIR_SLOW},
    {"heater", {"150", "300"}, {"65535", "65535"}, PAIR_ALL},
    {"heater", {"100", "250"}, {"65535", "65535"}, PAIR_NONE},
};

typedef struct pair_state {
    int errors;
    volatile int received, sent;
    uint64_t pieces_at_match;
    uint64_t pieces[PAIR_ROUNDS + PAIR_AFTER]; /* staged pieces each received message took */
    torx_protocol_t proto;
    uint8_t *buf;
} pair_state_t;

static void pair_recv_done(torx_ctx_t *ctx, void *arg, torx_status_t status, size_t received)
{
    pair_state_t *st = arg;
    if (status != TORX_OK || received != PAIR_SIZE)
        st->errors++;
    if (test_pattern_wrong(st->buf, PAIR_SIZE, 7, (uint32_t)st->received) != SIZE_MAX)
        st->errors++;
    st->pieces[st->received++] = ctx->staged_pieces - st->pieces_at_match;
}

static void pair_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                         torx_recv_t *recv)
{
    pair_state_t *st = harg;
    if (info->protocol != st->proto || st->received >= PAIR_ROUNDS + PAIR_AFTER)
        st->errors++;
    st->pieces_at_match = ctx->staged_pieces;
    recv->buf = st->buf;
    recv->len = PAIR_SIZE;
    recv->done = pair_recv_done;
    recv->arg = st;
}

static void pair_send_done(torx_ctx_t *ctx, torx_msg_t *msg, void *arg)
{
    (void)ctx;
    (void)msg;
    ((pair_state_t *)arg)->sent++;
}

/* Whether message i (rounds first, then the one-way ones) that this rank
 * received was expected staged; -1: either, as long as the one-way ones
 * are a prefix of bulk gets and then staged ones (checked apart). */
static int pair_expected(const pair_variant_t *v, int stages, int rank, int i)
{
    if (!stages || v->expect == PAIR_NONE)
        return 0;
    if (v->expect == PAIR_ALL)
        return 1;
    if (i >= PAIR_ROUNDS)
        return -1;
    return i == 0 || (rank == 1 && i == PAIR_PROBE_ROUND);
}

/* Sends message seq to peer from out, its pattern written first: one send
 * at a time, each complete before the next is written. */
static torx_status_t pair_send(torx_ctx_t *ctx, int peer, int seq, uint8_t *out, torx_msg_t *msg,
                               pair_state_t *st)
{
    for (size_t i = 0; i < PAIR_SIZE; i++)
        out[i] = test_pattern(7, (uint32_t)seq, i);
    return torx_send(ctx, msg, peer, PAIR_HANDLER, NULL, 0, out, PAIR_SIZE, TORX_PROTO_AUTO,
                     pair_send_done, st);
}

static int pair_task(torx_boot_t *boot, void *argp)
{
    const pair_variant_t *v = argp;
    setenv("TORX_BULK_COST", v->bulk_cost[boot->rank], 1);
    setenv("TORX_STAGE_COST_MAX", v->cost_max[boot->rank], 1);
    torx_ctx_t *ctx;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    static pair_state_t st;
    static uint8_t out[PAIR_SIZE]; /* pair_send's */
    static torx_msg_t msg;
    st = (pair_state_t){.buf = malloc(PAIR_SIZE),
                        .proto = torx_mode(ctx) == TORX_MODE_VN ? TORX_PROTO_VN : TORX_PROTO_RZV};
    TASK_CHECK(st.buf, "out of memory");
    TASK_CHECK(torx_register(ctx, PAIR_HANDLER, pair_handler, &st) == TORX_OK, "%s",
               torx_last_error());
    const int peer = 1 - boot->rank;
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    /* Both tasks have given theirs by the barrier: each answers the mean. */
    /* "cma", or on the hybrid ofi device "cma on this host, ..." (a host
     * is two consecutive ranks there) */
    const int cma = !strncmp(torx_bulk_path(torx_ctx_device(ctx)), "cma", 3);
    const unsigned mean =
        (unsigned)(strtoul(v->bulk_cost[0], NULL, 10) + strtoul(v->bulk_cost[1], NULL, 10) + 1) / 2;
    const unsigned cost =
        torx_bulk_cost(torx_ctx_device(ctx), torx_map_coord(torx_ctx_map(ctx), peer));
    TASK_CHECK(!cma || cost == mean, "rank %d: torx_bulk_cost %u, not the pair's mean %u",
               boot->rank, cost, mean);
    const int stages = cma && mean > 200;

    for (int r = 0; r < PAIR_ROUNDS; r++) {
        TASK_CHECK(pair_send(ctx, peer, r, out, &msg, &st) == TORX_OK, "%s", torx_last_error());
        TASK_CHECK(idle_wait(ctx, &st.received, r + 1) == 0, "round %d: nothing came", r);
        TASK_CHECK(idle_wait(ctx, &st.sent, r + 1) == 0, "round %d: send incomplete", r);
        TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    }
    if (boot->rank == 1)
        for (int i = PAIR_ROUNDS; i < PAIR_ROUNDS + PAIR_AFTER; i++) {
            TASK_CHECK(pair_send(ctx, peer, i, out, &msg, &st) == TORX_OK, "%s", torx_last_error());
            TASK_CHECK(idle_wait(ctx, &st.sent, i + 1) == 0, "one way: send %d incomplete", i);
        }
    else
        TASK_CHECK(idle_wait(ctx, &st.received, PAIR_ROUNDS + PAIR_AFTER) == 0,
                   "one way: %d of %d came", st.received, PAIR_ROUNDS + PAIR_AFTER);
    TASK_CHECK(st.errors == 0, "rank %d: %d errors", boot->rank, st.errors);

    const uint64_t whole = PAIR_SIZE / 16384;
    for (int i = 0; i < st.received; i++) {
        const int want = pair_expected(v, stages, boot->rank, i);
        if (want >= 0)
            TASK_CHECK(st.pieces[i] == (want ? whole : 0),
                       "%s: rank %d's message %d from rank %d took %llu staged pieces, expected "
                       "%llu",
                       v->mode, boot->rank, i, peer, (unsigned long long)st.pieces[i],
                       (unsigned long long)(want ? whole : 0));
    }
    if (boot->rank == 0 && v->expect == PAIR_SLOW) {
        /* one way: a prefix of held (bulk) messages, then staged ones */
        int held = 0;
        while (held < PAIR_AFTER && st.pieces[PAIR_ROUNDS + held] == 0)
            held++;
        for (int i = held; i < PAIR_AFTER; i++)
            TASK_CHECK(st.pieces[PAIR_ROUNDS + i] == whole,
                       "one way: message %d took %llu staged pieces after %d held", i,
                       (unsigned long long)st.pieces[PAIR_ROUNDS + i], held);
        /* more than a window's worth: the hold outlasts a peer's next window */
        TASK_CHECK(stages ? held > TORXM_STAGE_PROBE && held <= TORXM_RZV_HOLD : held == PAIR_AFTER,
                   "one way: %d of %d messages held on bulk gets", held, PAIR_AFTER);
    }
    free(st.buf);
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    return 0;
}

START_TEST(rzv_pair_moves_data_one_way)
{
    const pair_variant_t *v = &pair_variants[_i];
    setenv("TORX_MODE", v->mode, 1);
    setenv("TORX_EAGER_IDLE_LIMIT", "0", 1);
    setenv("TORX_RZV_DATA", "auto", 1);
    RUN_JOB(2, pair_task, (void *)v);
    unsetenv("TORX_RZV_DATA");
    unsetenv("TORX_EAGER_IDLE_LIMIT");
    unsetenv("TORX_MODE");
}
END_TEST

/* ---- The pair's way for long rendezvous data (rzv_way.c) ---------------------- */

/* Rank 0 leads its pair with rank 1. It reports transfers of WAY_LEN bytes,
 * sent and received in turn, that went the way torxm_rzv_way_staged chose
 * and took WAY_FAST_NS or ten times that, by spinning: the pair must settle
 * on the fast way, and follow when the two trade places. */
#define WAY_LEN (1u << 20)
#define WAY_FAST_NS 20000u

static void spin_ns(uint64_t ns)
{
    const double end = test_now() + (double)ns * 1e-9;
    while (test_now() < end)
        ;
}

/* n transfers with staging fast or not; how many of the last n/4 went the
 * fast way. */
static int way_phase(torx_ctx_t *ctx, torxm_peer_t *peer, int staging_fast, int n)
{
    int fast = 0;
    for (int i = 0; i < n; i++) {
        const int staged = torxm_rzv_way_staged(ctx, peer, WAY_LEN);
        spin_ns(staged == staging_fast ? WAY_FAST_NS : 10 * WAY_FAST_NS);
        if (i & 1)
            torxm_rzv_way_sent(ctx, peer, WAY_LEN, staged, 0);
        else
            torxm_rzv_way_received(ctx, peer, WAY_LEN, staged, 0);
        if (i >= n - n / 4 && staged == staging_fast)
            fast++;
    }
    return fast;
}

static int way_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_ctx_t *ctx;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    if (boot->rank == 0) {
        torxm_peer_t *peer = torxm_peer(ctx, 1);
        TASK_CHECK(peer && torxm_rzv_way_leads(ctx, peer) &&
                       !torxm_rzv_way_leads(ctx, torxm_peer(ctx, 0)),
                   "the lower rank leads");
        /* bulk gets fast: the first epochs explore, then the pair keeps them */
        int fast = way_phase(ctx, peer, 0, 600);
        TASK_CHECK(!torxm_rzv_way_staged(ctx, peer, WAY_LEN) && fast >= 150 * 3 / 4,
                   "bulk gets ten times faster: the pair takes %s, %d of the last 150 went "
                   "fast",
                   torxm_rzv_way_staged(ctx, peer, WAY_LEN) ? "staging" : "bulk gets", fast);
        /* another size class is measured apart: still the default way. The
         * default reads the device's bulk cost, a live measurement that a
         * change of the vCPUs' placement moves: the answer must match the
         * default as read just before or just after it. */
        const torxm_path_in_t def0 = torxm_path_inputs(ctx, peer, TORXM_ASK_DEFAULT, 0, 0);
        const int staged = torxm_rzv_way_staged(ctx, peer, TORXM_RZV_WAY_MIN);
        const torxm_path_in_t def1 = torxm_path_inputs(ctx, peer, TORXM_ASK_DEFAULT, 0, 0);
        TASK_CHECK(staged == (torxm_path_choose(&def0).path == TORXM_PATH_STAGED) ||
                       staged == (torxm_path_choose(&def1).path == TORXM_PATH_STAGED),
                   "64 KiB took the 1 MiB class's way");
        /* the placement changes: staging now fast; an exploring epoch finds it */
        fast = way_phase(ctx, peer, 1, 1600);
        TASK_CHECK(torxm_rzv_way_staged(ctx, peer, WAY_LEN) && fast >= 400 * 3 / 4,
                   "staging now ten times faster: the pair takes %s, %d of the last 400 went "
                   "fast",
                   torxm_rzv_way_staged(ctx, peer, WAY_LEN) ? "staging" : "bulk gets", fast);
    }
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    return 0;
}

START_TEST(rzv_way_follows_the_faster)
{
    RUN_JOB(2, way_task, NULL);
}
END_TEST

/* Windows as mpi_bibw runs them: WAY_WINDOW transfers each way, the next
 * window once the last is done, times on a clock of the test's own (ns,
 * WAY_FAST_NS a MiB). Staged, both directions run side by side in
 * period_staged and report at once. By bulk get, the peer's gets of
 * rank 0's sends run first and its own gets half a window later, and the
 * acks of the sends report after all its receives, as they do behind the
 * scouts in its FIFO; a window takes 1.5 times period_bulk. How many of
 * the last n/4 windows went staged. */
#define WAY_WINDOW 64
static int way_windows(torx_ctx_t *ctx, torxm_peer_t *peer, uint64_t *clock, double period_staged,
                       double period_bulk, int n)
{
    int staged_windows = 0;
    for (int i = 0; i < n; i++) {
        const uint64_t t0 = *clock;
        const int staged = torxm_rzv_way_staged(ctx, peer, WAY_LEN);
        if (i >= n - n / 4)
            staged_windows += staged;
        peer->awaiting = WAY_WINDOW;
        if (staged) {
            const double d = period_staged / WAY_WINDOW;
            for (int j = 1; j <= WAY_WINDOW; j++) {
                const uint64_t t = t0 + (uint64_t)(j * d);
                torxm_rzv_way_received(ctx, peer, WAY_LEN, 1, t);
                torxm_rzv_way_sent(ctx, peer, WAY_LEN, 1, t);
                peer->awaiting--;
            }
            *clock = t0 + (uint64_t)period_staged + 1000;
            continue;
        }
        const double d = period_bulk / WAY_WINDOW;
        for (int j = 1; j <= WAY_WINDOW; j++)
            torxm_rzv_way_received(ctx, peer, WAY_LEN, 0, t0 + (uint64_t)(period_bulk / 2 + j * d));
        for (int j = 1; j <= WAY_WINDOW; j++) {
            torxm_rzv_way_sent(ctx, peer, WAY_LEN, 0, t0 + (uint64_t)(j * d));
            peer->awaiting--;
        }
        *clock = t0 + (uint64_t)(1.5 * period_bulk) + 1000;
    }
    return staged_windows;
}

static int way_late_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_ctx_t *ctx;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    if (boot->rank == 0) {
        torxm_peer_t *peer = torxm_peer(ctx, 1);
        TASK_CHECK(peer != NULL, "%s", torx_last_error());
        uint64_t clock = 1000000000;
        const double bulk = WAY_WINDOW * (double)WAY_FAST_NS;
        /* bulk gets move the pair's bytes 1.4x as fast as staging (a window
         * 1.5 * bulk against 2.1 * bulk), but their sends report late:
         * counted in the order they report, they read at half their rate */
        int staged = way_windows(ctx, peer, &clock, 2.1 * bulk, bulk, 200);
        TASK_CHECK(!torxm_rzv_way_staged(ctx, peer, WAY_LEN) && staged <= 50 / 4,
                   "bulk gets 1.4x faster, their acks late: the pair takes %s, %d of the last "
                   "50 windows staged",
                   torxm_rzv_way_staged(ctx, peer, WAY_LEN) ? "staging" : "bulk gets", staged);
        /* staging now twice as fast: it must still be found */
        staged = way_windows(ctx, peer, &clock, 0.75 * bulk, bulk, 400);
        TASK_CHECK(torxm_rzv_way_staged(ctx, peer, WAY_LEN) && staged >= 100 * 3 / 4,
                   "staging twice as fast: the pair takes %s, %d of the last 100 windows staged",
                   torxm_rzv_way_staged(ctx, peer, WAY_LEN) ? "staging" : "bulk gets", staged);
        peer->awaiting = 0;
    }
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    return 0;
}

START_TEST(rzv_way_waits_for_late_acks)
{
    RUN_JOB(2, way_late_task, NULL);
}
END_TEST

/* ---- API checks ----------------------------------------------------------------- */

static volatile int *queued_flag; /* set with each message count_and_flag counts */

static void count_and_flag(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                           torx_recv_t *recv)
{
    (void)ctx, (void)info, (void)recv;
    ++*(int *)harg;
    if (queued_flag)
        *queued_flag = 1;
}

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
    TASK_CHECK(strstr(torx_last_error(), "one-packet") != NULL, "message: %s", torx_last_error());
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

    /* A wait returns once a handler has set its flag: the messages queued
     * behind the first are left for the next advance (msg.c). */
    static struct {
        volatile int flag;
        int count;
    } queued;
    TASK_CHECK(torx_register(ctx, 34, count_and_flag, (void *)&queued.count) == TORX_OK, "%s",
               torx_last_error());
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    enum { QUEUED = 20 };
    if (boot->rank == 1) {
        int done = 0;
        torx_msg_t qm[QUEUED];
        for (int i = 0; i < QUEUED; i++)
            TASK_CHECK(torx_send(ctx, &qm[i], 0, 34, NULL, 0, big, 8, TORX_PROTO_ONEPKT,
                                 test_count_msg, &done) == TORX_OK,
                       "%s", torx_last_error());
        const double qd = test_now() + 30;
        while (done < QUEUED && test_now() < qd)
            torx_advance(ctx);
        TASK_CHECK(done == QUEUED, "only %d of %d sends done", done, QUEUED);
    }
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    if (boot->rank == 0) {
        queued_flag = &queued.flag;
        TASK_CHECK(torx_wait(ctx, &queued.flag) == TORX_OK, "%s", torx_last_error());
        TASK_CHECK(queued.count == 1, "the wait matched %d messages before returning",
                   queued.count);
        const double qd = test_now() + 30;
        while (queued.count < QUEUED && test_now() < qd)
            torx_advance(ctx);
        TASK_CHECK(queued.count == QUEUED, "%d of %d messages", queued.count, QUEUED);
    }

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
    /* One bad variable at a time: init fails with a message naming it. */
    static const test_env_case_t bad[] = {{"TORX_MODE", "warm", NULL},
                                          {"TORX_EAGER_LIMIT", "12k", NULL},
                                          {"TORX_RZV_DATA", "dma", NULL},
                                          {"TORX_EAGER_IDLE_LIMIT", "-1", NULL},
                                          {"TORX_STAGE_COST_MAX", "70000", NULL},
                                          {"TORX_BULK_COST", "lots", NULL}};
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv(bad[i].var, bad[i].value, 1);
        RUN_JOB(1, init_fail_task, (void *)bad[i].var);
        unsetenv(bad[i].var);
    }
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
    TCase *idle = tcase_create("idle");
    tcase_set_timeout(idle, 150);
    tcase_add_loop_test(idle, idle_pair_stages, 0,
                        (int)(sizeof idle_variants / sizeof idle_variants[0]));
    tcase_add_loop_test(idle, scouts_pass_a_long_staged_message, 0,
                        (int)(sizeof pass_modes / sizeof pass_modes[0]));
    tcase_add_loop_test(idle, rzv_shares_with_idle_sender, 0,
                        (int)(sizeof share_rzv_modes / sizeof share_rzv_modes[0]));
    tcase_add_test(idle, rzv_way_follows_the_faster);
    tcase_add_test(idle, rzv_way_waits_for_late_acks);
    tcase_add_loop_test(idle, rzv_pair_moves_data_one_way, 0,
                        (int)(sizeof pair_variants / sizeof pair_variants[0]));
    suite_add_tcase(s, idle);
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
