/* Deferred rendezvous (torx_recv_t.defer, torx_accept) in heater, co and vn
 * mode, with bulk and packet data; torx_send_inject (delivery, counters,
 * order against queued sends and owed tokens, bad arguments, eager
 * messages as one batch of packets, all or none); TORX_ONEPKT_LIMIT
 * (protocol choice, inject, bad values); and the tuning file (TORX_CONF:
 * the boundaries it sets, the environment over it, bad files named). */
#include "harness.h"
#include "msg_test.h" /* test_pattern, RUN_CHECK; msg_internal.h for tx_seq, tokens_owed */

#define H_DATA 11 /* the messages under test */
#define H_CTRL 12 /* control words between the two tasks */

enum { CTRL_DEFERRED = 1, CTRL_GO, CTRL_N };

static const char *const modes[] = {"heater", "co", "vn"};

/* Advances until *n reaches want or 30 s of the task's clock (simulated
 * on sim); 0 when it did. */
static int wait_count(torx_ctx_t *ctx, volatile int *n, int want)
{
    const double deadline = torx_wtime(ctx) + 30;
    while (*n < want && torx_wtime(ctx) < deadline)
        if (!torx_advance(ctx))
            sched_yield();
    return *n >= want ? 0 : -1;
}

/* ---- torx_send_inject: delivery and counters, in every mode ------------------------- */

#define NINJ 24

static size_t inj_len(uint32_t seq)
{
    static const size_t lens[] = {0, 1, 2, 100, 231, 232};
    return lens[seq % (sizeof lens / sizeof lens[0])];
}

#define H_FLOOD 13
#define FLOOD_MAX 1000000

typedef struct inj {
    uint32_t next;
    volatile int got;
    int empty; /* the message without header or data */
    int errors;
    volatile int flood; /* flood messages received */
} inj_t;

static void flood_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                          torx_recv_t *recv)
{
    (void)ctx;
    (void)recv;
    inj_t *s = harg;
    int n = -1;
    if (info->data_len == sizeof n)
        memcpy(&n, info->data, sizeof n);
    RUN_CHECK(s, n == s->flood, "flood message %d when %d was due", n, s->flood);
    s->flood++;
}

static void inj_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                        torx_recv_t *recv)
{
    (void)ctx;
    (void)recv;
    inj_t *s = harg;
    RUN_CHECK(s, info->protocol == TORX_PROTO_ONEPKT && info->data && info->src == 1,
              "protocol %s, data %p, src %d", torx_protocol_name(info->protocol), info->data,
              info->src);
    if (info->hdr_len == 0) {
        RUN_CHECK(s, info->data_len == 0 && s->next == NINJ, "empty message out of place");
        s->empty++;
        s->got++;
        return;
    }
    test_hdr_t h;
    RUN_CHECK(s, info->hdr_len == sizeof h, "header of %zu bytes", info->hdr_len);
    memcpy(&h, info->hdr, sizeof h);
    RUN_CHECK(s, h.sender == 1 && h.seq == s->next, "seq %u from %u, expected %u", h.seq, h.sender,
              s->next);
    s->next = h.seq + 1;
    RUN_CHECK(s, info->data_len == inj_len(h.seq), "seq %u: %zu bytes, expected %zu", h.seq,
              info->data_len, inj_len(h.seq));
    for (size_t i = 0; i < info->data_len && i < inj_len(h.seq); i++)
        if (((const uint8_t *)info->data)[i] != test_pattern(1, h.seq, i)) {
            RUN_CHECK(s, 0, "seq %u: byte %zu wrong", h.seq, i);
            break;
        }
    s->got++;
}

static int inject_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    inj_t s = {0};
    torx_ctx_t *ctx;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(torx_register(ctx, H_DATA, inj_handler, &s) == TORX_OK, "register");
    TASK_CHECK(torx_register(ctx, H_FLOOD, flood_handler, &s) == TORX_OK, "register");
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    torx_proto_stats_t st[TORX_PROTO_COUNT], st2[TORX_PROTO_COUNT];
    if (boot->rank == 1) {
        torxm_peer_t *peer = torxm_peer(ctx, 0);
        TASK_CHECK(peer != NULL, "%s", torx_last_error());
        uint64_t bytes = 0;
        uint8_t data[TORX_MSG_ONEPKT_MAX];
        for (uint32_t seq = 0; seq < NINJ; seq++) {
            const size_t len = inj_len(seq);
            for (size_t i = 0; i < len; i++)
                data[i] = test_pattern(1, seq, i);
            const test_hdr_t h = {.sender = 1, .seq = seq};
            const uint32_t tx_seq = peer->tx_seq;
            const torx_status_t rc = torx_send_inject(ctx, 0, H_DATA, &h, sizeof h, data, len);
            TASK_CHECK(rc == TORX_OK, "inject of %zu bytes: %s (%s)", len, torx_status_str(rc),
                       torx_last_error());
            TASK_CHECK(peer->tx_seq == tx_seq + 1, "tx_seq %u after %u", peer->tx_seq, tx_seq);
            memset(data, 0xEE, sizeof data); /* reusable at once: the packet has its copy */
            bytes += len;
        }
        torx_stats(ctx, st);
        TASK_CHECK(st[TORX_PROTO_ONEPKT].sent == NINJ &&
                       st[TORX_PROTO_ONEPKT].bytes_sent == bytes &&
                       st[TORX_PROTO_ONEPKT].packets_sent == NINJ,
                   "one-packet counters sent=%llu bytes=%llu packets=%llu, expected %d/%llu/%d",
                   (unsigned long long)st[TORX_PROTO_ONEPKT].sent,
                   (unsigned long long)st[TORX_PROTO_ONEPKT].bytes_sent,
                   (unsigned long long)st[TORX_PROTO_ONEPKT].packets_sent, NINJ,
                   (unsigned long long)bytes, NINJ);
        for (int p = TORX_PROTO_AUTO + 1; p < TORX_PROTO_COUNT; p++)
            TASK_CHECK(p == TORX_PROTO_ONEPKT || st[p].sent == 0, "%s sent %llu",
                       torx_protocol_name((torx_protocol_t)p), (unsigned long long)st[p].sent);

        /* Too big for one packet and too small to stage in vn mode (where
         * it takes a scout; heater and co send it as a batch of eager
         * packets, inject_eager_batches), or too big for one staged piece:
         * nothing happens. */
        const uint32_t tx_seq = peer->tx_seq;
        uint8_t big[TORX_MSG_MAX_HDR + TORX_MSG_ONEPKT_MAX] = {0};
        if (torx_mode(ctx) == TORX_MODE_VN) {
            TASK_CHECK(torx_send_inject(ctx, 0, H_DATA, big, 16, big, TORXM_STAGE_MIN - 1) ==
                           TORX_AGAIN,
                       "16 + %d bytes injected", TORXM_STAGE_MIN - 1);
            TASK_CHECK(torx_send_inject(ctx, 0, H_DATA, big, TORX_MSG_MAX_HDR, big,
                                        TORX_MSG_ONEPKT_MAX - TORX_MSG_MAX_HDR + 1) == TORX_AGAIN,
                       "64 + 177 bytes injected");
        }
        TASK_CHECK(torx_send_inject(ctx, 0, H_DATA, NULL, 0, big, 1u << 20) == TORX_AGAIN,
                   "1 MiB injected");
        /* Bad arguments. */
        TASK_CHECK(torx_send_inject(NULL, 0, H_DATA, NULL, 0, NULL, 0) == TORX_ERR_INVAL,
                   "ctx NULL");
        TASK_CHECK(torx_send_inject(ctx, 2, H_DATA, NULL, 0, NULL, 0) == TORX_ERR_INVAL &&
                       strstr(torx_last_error(), "torx_send_inject"),
                   "dest 2: %s", torx_last_error());
        TASK_CHECK(torx_send_inject(ctx, -1, H_DATA, NULL, 0, NULL, 0) == TORX_ERR_INVAL,
                   "dest -1");
        TASK_CHECK(torx_send_inject(ctx, 0, TORX_MSG_HANDLERS, NULL, 0, NULL, 0) == TORX_ERR_INVAL,
                   "handler 64");
        TASK_CHECK(torx_send_inject(ctx, 0, H_DATA, big, TORX_MSG_MAX_HDR + 1, NULL, 0) ==
                       TORX_ERR_INVAL,
                   "header of 65");
        TASK_CHECK(torx_send_inject(ctx, 0, H_DATA, NULL, 4, NULL, 0) == TORX_ERR_INVAL,
                   "header NULL");
        TASK_CHECK(torx_send_inject(ctx, 0, H_DATA, NULL, 0, NULL, 5) == TORX_ERR_INVAL,
                   "data NULL");
        torx_stats(ctx, st2);
        TASK_CHECK(!memcmp(st, st2, sizeof st) && peer->tx_seq == tx_seq,
                   "a refused inject changed the counters or tx_seq");
        /* Empty: header and data NULL. */
        TASK_CHECK(torx_send_inject(ctx, 0, H_DATA, NULL, 0, NULL, 0) == TORX_OK, "empty: %s",
                   torx_last_error());
    } else {
        TASK_CHECK(wait_count(ctx, &s.got, NINJ + 1) == 0 && s.got == NINJ + 1 && s.empty == 1,
                   "received %d of %d", s.got, NINJ + 1);
        TASK_CHECK(s.errors == 0, "%d errors", s.errors);
        torx_stats(ctx, st);
        TASK_CHECK(st[TORX_PROTO_ONEPKT].received == NINJ + 1, "received counter %llu",
                   (unsigned long long)st[TORX_PROTO_ONEPKT].received);
    }
    /* Flood while rank 0 sits in a barrier: once the network is full (co:
     * the staging ring too) inject says TORX_AGAIN, not TORX_NO_ROOM. */
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    int n = 0;
    if (boot->rank == 1) {
        torx_status_t rc;
        while ((rc = torx_send_inject(ctx, 0, H_FLOOD, NULL, 0, &n, sizeof n)) == TORX_OK &&
               ++n < FLOOD_MAX)
            ;
        TASK_CHECK(rc == TORX_AGAIN && n > 0, "after %d injects: %s", n, torx_status_str(rc));
    }
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    int all[2];
    TASK_CHECK(boot->allgather(boot, &n, all, sizeof n) == TORX_OK, "allgather");
    if (boot->rank == 0) {
        TASK_CHECK(wait_count(ctx, &s.flood, all[1]) == 0 && s.errors == 0,
                   "%d of %d flood messages, %d errors", s.flood, all[1], s.errors);
        fprintf(stderr, "inject (%s): the network took %d packets\n",
                torx_mode(ctx) == TORX_MODE_CO ? "co" : "heater/vn", all[1]);
    }
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    return 0;
}

START_TEST(inject_delivers_and_counts)
{
    setenv("TORX_MODE", modes[_i], 1);
    RUN_JOB(2, inject_task, NULL);
}
END_TEST

/* ---- torx_send_inject: eager messages as one batch of packets --------------------- */

/* With TORX_STAGE_MIN=2048 and a 16-packet FIFO: messages of 2..8 eager
 * packets go whole or not at all. The first EB_FILL messages are 1000
 * bytes, 5 packets: three fill 15 slots, and the fourth must find too
 * little room. */
#define EB_FIFO 16
#define EB_FILL_PKTS 5
#define EB_FILL (EB_FIFO / EB_FILL_PKTS)
#define EB_N 400

static size_t eb_len(uint32_t seq)
{
    /* With the 8-byte header: 2 packets from 233 bytes (one-packet up to
     * 232), 3 from 469, 8 up to 1908. */
    static const size_t lens[] = {233, 300, 468, 469, 700, 1000, 1500, 1907, 1908};
    return seq < EB_FILL ? 1000 : lens[seq % (sizeof lens / sizeof lens[0])];
}

static uint64_t eb_pkts(size_t len)
{
    const size_t first = TORX_PKT_MAX_PAYLOAD - TORXM_EAGER_FIRST_PREFIX - sizeof(test_hdr_t);
    return 1 + (len - first + TORX_PKT_MAX_PAYLOAD - 1) / TORX_PKT_MAX_PAYLOAD;
}

typedef struct eb {
    uint32_t next; /* the seq due */
    volatile int got;
    int errors;
    size_t want_len;
    uint8_t buf[2048];
} eb_t;

static void eb_done(torx_ctx_t *ctx, void *arg, torx_status_t st, size_t len)
{
    (void)ctx;
    eb_t *s = arg;
    RUN_CHECK(s, st == TORX_OK && len == s->want_len, "seq %u: status %d, %zu of %zu bytes",
              s->next, st, len, s->want_len);
    for (size_t i = 0; i < len && i < s->want_len; i++)
        if (s->buf[i] != test_pattern(1, s->next, i)) {
            RUN_CHECK(s, 0, "seq %u: byte %zu wrong", s->next, i);
            break;
        }
    s->next++;
    s->got++;
}

static void eb_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info, torx_recv_t *recv)
{
    (void)ctx;
    eb_t *s = harg;
    test_hdr_t h = {0};
    if (info->hdr_len == sizeof h)
        memcpy(&h, info->hdr, sizeof h);
    RUN_CHECK(s,
              info->protocol == TORX_PROTO_EAGER && info->src == 1 && h.seq == s->next &&
                  info->data_len == eb_len(h.seq),
              "protocol %s from %d, seq %u of %zu bytes, expected seq %u of %zu",
              torx_protocol_name(info->protocol), info->src, h.seq, info->data_len, s->next,
              eb_len(s->next));
    s->want_len = info->data_len;
    recv->buf = s->buf;
    recv->len = sizeof s->buf;
    recv->done = eb_done;
    recv->arg = s;
}

/* Sends seq by torx_send_inject, once; its status. */
static torx_status_t eb_send(torx_ctx_t *ctx, uint32_t seq)
{
    static uint8_t data[2048];
    const size_t len = eb_len(seq);
    for (size_t i = 0; i < len; i++)
        data[i] = test_pattern(1, seq, i);
    const test_hdr_t h = {.sender = 1, .seq = seq};
    const torx_status_t rc = torx_send_inject(ctx, 0, H_DATA, &h, sizeof h, data, len);
    memset(data, 0xEE, len); /* reusable at once: the packets have their copy */
    return rc;
}

static int eager_batch_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    static eb_t s;
    memset(&s, 0, sizeof s);
    torx_ctx_t *ctx;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(torx_register(ctx, H_DATA, eb_handler, &s) == TORX_OK, "register");
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    int nobatch = 0;
    if (boot->rank == 1) {
        torxm_peer_t *peer = torxm_peer(ctx, 0);
        TASK_CHECK(peer != NULL, "%s", torx_last_error());
        /* Rank 0 sits in the barrier and reads nothing. The network devices
         * take batches of one: there such a message is left to torx_send,
         * whole, and nothing else is tried. (Hybrid jobs reach a task of
         * their own host through shm: batches.) */
        const torx_status_t first = eb_send(ctx, 0);
        nobatch =
            first == TORX_AGAIN && test_is_net_device(torx_pkt_device_name(torx_ctx_device(ctx)));
        TASK_CHECK(first == TORX_OK || (nobatch && peer->tx_seq == 0),
                   "a 5-packet message: %s (%s)", torx_status_str(first), torx_last_error());
        for (uint32_t seq = 1; seq < EB_FILL && !nobatch; seq++)
            TASK_CHECK(eb_send(ctx, seq) == TORX_OK, "seq %u: %s", seq, torx_last_error());
    }
    int flags[2];
    TASK_CHECK(boot->allgather(boot, &nobatch, flags, sizeof nobatch) == TORX_OK, "allgather");
    if (flags[1]) {
        TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
        return 0;
    }
    if (boot->rank == 1) {
        torxm_peer_t *peer = torxm_peer(ctx, 0);
        TASK_CHECK(peer != NULL, "%s", torx_last_error());
        torx_proto_stats_t st[TORX_PROTO_COUNT], st2[TORX_PROTO_COUNT];
        TASK_CHECK(eb_send(ctx, EB_FILL) == TORX_AGAIN,
                   "a %d-packet message injected into %d free slots", (int)eb_pkts(eb_len(EB_FILL)),
                   EB_FIFO - EB_FILL * EB_FILL_PKTS);
        torx_stats(ctx, st);
        TASK_CHECK(st[TORX_PROTO_EAGER].sent == EB_FILL &&
                       st[TORX_PROTO_EAGER].packets_sent == EB_FILL * EB_FILL_PKTS &&
                       st[TORX_PROTO_EAGER].bytes_sent == EB_FILL * 1000 && peer->tx_seq == EB_FILL,
                   "eager counters sent=%llu packets=%llu bytes=%llu, tx_seq %u",
                   (unsigned long long)st[TORX_PROTO_EAGER].sent,
                   (unsigned long long)st[TORX_PROTO_EAGER].packets_sent,
                   (unsigned long long)st[TORX_PROTO_EAGER].bytes_sent, peer->tx_seq);
        /* Nine packets: more than a batch, left to torx_send. */
        uint8_t big[1901] = {0};
        TASK_CHECK(torx_send_inject(ctx, 0, H_DATA, big, 16, big, sizeof big) == TORX_AGAIN,
                   "a 9-packet message injected");
        torx_stats(ctx, st2);
        TASK_CHECK(!memcmp(st, st2, sizeof st) && peer->tx_seq == EB_FILL,
                   "a refused inject changed the counters or tx_seq");
    }
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    if (boot->rank == 1) {
        /* Rank 0 reads now: the rest, of every length, as the FIFO frees. */
        uint64_t pkts = EB_FILL * EB_FILL_PKTS;
        for (uint32_t seq = EB_FILL; seq < EB_N; seq++) {
            torx_status_t rc;
            const double deadline = torx_wtime(ctx) + 30;
            while ((rc = eb_send(ctx, seq)) == TORX_AGAIN && torx_wtime(ctx) < deadline)
                torx_advance(ctx);
            TASK_CHECK(rc == TORX_OK, "seq %u (%zu bytes): %s (%s)", seq, eb_len(seq),
                       torx_status_str(rc), torx_last_error());
            pkts += eb_pkts(eb_len(seq));
        }
        torx_proto_stats_t st[TORX_PROTO_COUNT];
        torx_stats(ctx, st);
        TASK_CHECK(st[TORX_PROTO_EAGER].sent == EB_N && st[TORX_PROTO_EAGER].packets_sent == pkts,
                   "%llu eager messages in %llu packets, expected %d in %llu",
                   (unsigned long long)st[TORX_PROTO_EAGER].sent,
                   (unsigned long long)st[TORX_PROTO_EAGER].packets_sent, EB_N,
                   (unsigned long long)pkts);
    } else {
        TASK_CHECK(wait_count(ctx, &s.got, EB_N) == 0 && s.errors == 0,
                   "received %d of %d, %d errors", s.got, EB_N, s.errors);
        torx_proto_stats_t st[TORX_PROTO_COUNT];
        torx_stats(ctx, st);
        TASK_CHECK(st[TORX_PROTO_EAGER].received == EB_N && ctx->malformed == 0,
                   "eager received %llu of %d, %llu malformed",
                   (unsigned long long)st[TORX_PROTO_EAGER].received, EB_N,
                   (unsigned long long)ctx->malformed);
    }
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    return 0;
}

/* heater and co (shared injection); vn sends these by scout. The second
 * pair runs with chaos. */
START_TEST(inject_eager_batches)
{
    setenv("TORX_MODE", modes[_i % 2], 1);
    setenv("TORX_STAGE_MIN", "2048", 1);
    setenv("TORX_FIFO_PACKETS", "16", 1);
    if (_i >= 2)
        setenv("TORX_CHAOS", "7", 1);
    RUN_JOB(2, eager_batch_task, NULL);
    unsetenv("TORX_CHAOS");
    unsetenv("TORX_FIFO_PACKETS");
    unsetenv("TORX_STAGE_MIN");
}
END_TEST

/* ---- torx_send_inject keeps the order behind queued sends and owed tokens --------- */

#define ORD_QUEUED 64 /* one-packet sends while the receiver does not read: 16 fit */
#define ORD_TOTAL (ORD_QUEUED + 4)

typedef struct ord {
    uint32_t next;
    volatile int got;
    volatile int sent;
    int errors;
} ord_t;

static size_t ord_len(uint32_t seq)
{
    return seq == ORD_QUEUED + 1 ? 100 : 16; /* seq 65 goes adaptive */
}

static void ord_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                        torx_recv_t *recv)
{
    (void)ctx;
    (void)recv;
    ord_t *s = harg;
    test_hdr_t h;
    memcpy(&h, info->hdr, sizeof h);
    RUN_CHECK(s, h.seq == s->next, "seq %u matched when %u was due (%s)", h.seq, s->next,
              torx_protocol_name(info->protocol));
    s->next = h.seq + 1;
    const torx_protocol_t want = h.seq == ORD_QUEUED + 1 ? TORX_PROTO_ADAPTIVE : TORX_PROTO_ONEPKT;
    RUN_CHECK(s, info->protocol == want && info->data && info->data_len == ord_len(h.seq),
              "seq %u: %s, %zu bytes", h.seq, torx_protocol_name(info->protocol), info->data_len);
    for (size_t i = 0; info->data && i < info->data_len; i++)
        if (((const uint8_t *)info->data)[i] != test_pattern(1, h.seq, i)) {
            RUN_CHECK(s, 0, "seq %u: byte %zu wrong", h.seq, i);
            break;
        }
    s->got++;
}

static int order_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    ord_t s = {0};
    torx_ctx_t *ctx;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(torx_register(ctx, H_DATA, ord_handler, &s) == TORX_OK, "register");
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    if (boot->rank == 1) {
        torxm_peer_t *peer = torxm_peer(ctx, 0);
        TASK_CHECK(peer != NULL, "%s", torx_last_error());
        static torx_msg_t msgs[ORD_TOTAL];
        static uint8_t data[ORD_TOTAL][128];
        for (uint32_t seq = 0; seq < ORD_TOTAL; seq++)
            for (size_t i = 0; i < ord_len(seq); i++)
                data[seq][i] = test_pattern(1, seq, i);
        test_hdr_t h = {.sender = 1};
        /* Rank 0 sits in the barrier below: its FIFO fills and sends queue. */
        for (h.seq = 0; h.seq < ORD_QUEUED; h.seq++)
            TASK_CHECK(torx_send(ctx, &msgs[h.seq], 0, H_DATA, &h, sizeof h, data[h.seq],
                                 ord_len(h.seq), TORX_PROTO_AUTO, test_count_msg,
                                 (void *)&s.sent) == TORX_OK,
                       "%s", torx_last_error());
        TASK_CHECK(peer->head != NULL, "nothing queued: the test proves nothing");
        uint32_t tx_seq = peer->tx_seq;
        TASK_CHECK(torx_send_inject(ctx, 0, H_DATA, &h, sizeof h, data[h.seq], ord_len(h.seq)) ==
                       TORX_AGAIN,
                   "inject overtook %d queued sends", ORD_QUEUED);
        TASK_CHECK(peer->tx_seq == tx_seq, "a refused inject moved tx_seq");
        TASK_CHECK(torx_send(ctx, &msgs[h.seq], 0, H_DATA, &h, sizeof h, data[h.seq],
                             ord_len(h.seq), TORX_PROTO_AUTO, test_count_msg,
                             (void *)&s.sent) == TORX_OK,
                   "%s", torx_last_error());
        TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
        /* Rank 0 has emptied its FIFO, we have not advanced: the network has
         * room, the queue is still there, and it is the queue that must say
         * no. */
        TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
        TASK_CHECK(peer->head != NULL, "queue drained without an advance");
        h.seq = ORD_QUEUED + 1;
        TASK_CHECK(torx_send_inject(ctx, 0, H_DATA, &h, sizeof h, data[h.seq], ord_len(h.seq)) ==
                       TORX_AGAIN,
                   "inject overtook queued sends while the FIFO had room");
        TASK_CHECK(peer->tx_seq == tx_seq, "a refused inject moved tx_seq");
        TASK_CHECK(wait_count(ctx, &s.sent, ORD_QUEUED + 1) == 0, "sent %d", s.sent);

        /* An adaptive message owes a token until rank 0 matched it: inject
         * waits for it too. */
        h.seq = ORD_QUEUED + 1;
        TASK_CHECK(torx_send(ctx, &msgs[h.seq], 0, H_DATA, &h, sizeof h, data[h.seq],
                             ord_len(h.seq), TORX_PROTO_ADAPTIVE, test_count_msg,
                             (void *)&s.sent) == TORX_OK,
                   "%s", torx_last_error());
        TASK_CHECK(peer->tokens_owed == 1 && peer->head == NULL, "tokens owed %u, queue %p",
                   peer->tokens_owed, (void *)peer->head);
        h.seq++;
        tx_seq = peer->tx_seq;
        TASK_CHECK(torx_send_inject(ctx, 0, H_DATA, &h, sizeof h, data[h.seq], ord_len(h.seq)) ==
                       TORX_AGAIN,
                   "inject overtook an adaptive message");
        TASK_CHECK(peer->tx_seq == tx_seq, "a refused inject moved tx_seq");
        TASK_CHECK(torx_send(ctx, &msgs[h.seq], 0, H_DATA, &h, sizeof h, data[h.seq],
                             ord_len(h.seq), TORX_PROTO_AUTO, test_count_msg,
                             (void *)&s.sent) == TORX_OK,
                   "%s", torx_last_error());
        /* Once the token is in and the queue drained, inject goes. */
        h.seq++;
        const double deadline = torx_wtime(ctx) + 30;
        torx_status_t rc;
        int again = 0;
        while ((rc = torx_send_inject(ctx, 0, H_DATA, &h, sizeof h, data[h.seq], ord_len(h.seq))) ==
                   TORX_AGAIN &&
               torx_wtime(ctx) < deadline) {
            again++;
            if (!torx_advance(ctx))
                sched_yield();
        }
        TASK_CHECK(rc == TORX_OK && again > 0, "inject: %s after %d tries", torx_status_str(rc),
                   again);
        TASK_CHECK(wait_count(ctx, &s.sent, ORD_TOTAL - 1) == 0, "sent %d", s.sent);
        torx_proto_stats_t st[TORX_PROTO_COUNT];
        torx_stats(ctx, st);
        TASK_CHECK(st[TORX_PROTO_ONEPKT].sent == ORD_TOTAL - 1 &&
                       st[TORX_PROTO_ONEPKT].packets_sent == ORD_TOTAL - 1 &&
                       st[TORX_PROTO_ADAPTIVE].sent == 1,
                   "counters: one-packet %llu, adaptive %llu",
                   (unsigned long long)st[TORX_PROTO_ONEPKT].sent,
                   (unsigned long long)st[TORX_PROTO_ADAPTIVE].sent);
    } else {
        TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
        /* Take what reached the FIFO, until nothing more comes. */
        double quiet = torx_wtime(ctx) + 0.1;
        const double deadline = torx_wtime(ctx) + 10;
        for (int got = 0; (s.got == 0 || torx_wtime(ctx) < quiet) && torx_wtime(ctx) < deadline;) {
            if (!torx_advance(ctx))
                sched_yield();
            if (s.got != got) {
                got = s.got;
                quiet = torx_wtime(ctx) + 0.1;
            }
        }
        TASK_CHECK(s.got > 0 && s.got < ORD_QUEUED, "%d arrived before the sender advanced", s.got);
        TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
        TASK_CHECK(wait_count(ctx, &s.got, ORD_TOTAL) == 0, "received %d of %d", s.got, ORD_TOTAL);
        TASK_CHECK(s.errors == 0, "%d errors", s.errors);
    }
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    return 0;
}

START_TEST(inject_keeps_order)
{
    setenv("TORX_MODE", "heater", 1); /* co's thread would drain the FIFO */
    setenv("TORX_FIFO_PACKETS", "16", 1);
    RUN_JOB(2, order_task, NULL);
}
END_TEST

/* ---- Deferred rendezvous ---------------------------------------------------------------- */

/* The messages rank 1 sends rank 0, in order. */
enum {
    D_FULL,    /* rendezvous or vn, deferred, accepted with a whole buffer */
    D_ONE,     /* one-packet by torx_send: its handler runs while D_FULL waits */
    D_INJECT,  /* one-packet by torx_send_inject: not held up by D_FULL either */
    D_DISCARD, /* deferred, accepted with buf NULL */
    D_SHORT,   /* deferred, accepted with half a buffer, from a handler */
    D_EAGER,   /* eager: a defer request is refused (NULL stored), data as usual */
    D_EMPTY,   /* zero-length rendezvous: all here, cannot be deferred */
    D_LAST,    /* one-packet */
    D_N
};

#define DBIG ((size_t)200000)
#define DGUARD 64

typedef struct dvar {
    const char *name, *mode, *rzv_data, *bulk;
} dvar_t;

static const dvar_t dvars[] = {
    {"heater-bulk", "heater", NULL, NULL},        {"heater-packets", "heater", "packets", NULL},
    {"heater-fifo-bulk", "heater", NULL, "fifo"}, {"co-bulk", "co", NULL, NULL},
    {"co-packets", "co", "packets", NULL},        {"vn", "vn", NULL, NULL},
};
#define NDVARS ((int)(sizeof dvars / sizeof dvars[0]))

typedef struct dstate dstate_t;

typedef struct rslot {
    dstate_t *st;
    int seq;
    uint8_t *base; /* cap + DGUARD bytes, guard set to 0xAB */
    size_t cap;
    torx_status_t status;
    size_t received;
    int done;
} rslot_t;

struct dstate {
    torx_ctx_t *ctx;
    torx_protocol_t rzv; /* RZV, or VN in vn mode */
    int errors;
    /* receiver */
    uint32_t next;
    volatile int matched;
    volatile int rdone; /* receive dones run */
    torx_deferred_t *handle[D_N];
    rslot_t slot[D_N];
    uint8_t decoy[8];
    /* both */
    volatile int ctrl[CTRL_N];
    torx_msg_t cmsg[CTRL_N];
    /* sender */
    torx_msg_t msg[D_N];
    volatile int sdone[D_N];
    volatile int nsdone;
};

static size_t d_len(int seq)
{
    switch (seq) {
    case D_FULL:
    case D_DISCARD:
    case D_SHORT:
        return DBIG;
    case D_ONE:
        return 10;
    case D_INJECT:
        return 20;
    case D_EAGER:
        return 1000;
    case D_EMPTY:
        return 0;
    default:
        return 5;
    }
}

static int d_deferrable(int seq)
{
    return seq == D_FULL || seq == D_DISCARD || seq == D_SHORT;
}

/* A receive buffer of cap bytes followed by a guard. */
static void slot_alloc(rslot_t *r, size_t cap)
{
    r->cap = cap;
    r->base = malloc(cap + DGUARD);
    memset(r->base, 0xAB, cap + DGUARD);
}

static void d_recv_done(torx_ctx_t *ctx, void *arg, torx_status_t status, size_t received)
{
    (void)ctx;
    rslot_t *r = arg;
    RUN_CHECK(r->st, !r->done, "seq %d: done ran twice", r->seq);
    r->status = status;
    r->received = received;
    r->done = 1;
    r->st->rdone++;
}

static void decoy_done(torx_ctx_t *ctx, void *arg, torx_status_t status, size_t received)
{
    (void)ctx;
    (void)status;
    (void)received;
    dstate_t *st = arg;
    RUN_CHECK(st, 0, "the handler's done of a deferred message ran");
}

static void d_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info, torx_recv_t *recv)
{
    (void)ctx;
    dstate_t *st = harg;
    test_hdr_t h;
    memcpy(&h, info->hdr, sizeof h);
    const int seq = (int)h.seq;
    RUN_CHECK(st, h.seq == st->next && seq < D_N, "seq %u matched when %u was due", h.seq,
              st->next);
    st->next = h.seq + 1;
    if (seq >= D_N)
        return;
    RUN_CHECK(st, info->data_len == d_len(seq), "seq %d: %zu bytes", seq, info->data_len);
    st->matched++;
    if (d_deferrable(seq)) {
        RUN_CHECK(st, info->protocol == st->rzv && !info->data, "seq %d: %s, data %p", seq,
                  torx_protocol_name(info->protocol), info->data);
        /* Ignored once defer is set: a decoy proves it. */
        recv->buf = st->decoy;
        recv->len = sizeof st->decoy;
        recv->done = decoy_done;
        recv->arg = st;
        st->handle[seq] = NULL;
        recv->defer = &st->handle[seq];
        return;
    }
    /* Not deferrable: the layer must store NULL and go on with buf. */
    st->handle[seq] = (torx_deferred_t *)(void *)st; /* anything but NULL */
    recv->defer = &st->handle[seq];
    rslot_t *r = &st->slot[seq];
    slot_alloc(r, info->data_len);
    recv->buf = r->base;
    recv->len = r->cap;
    recv->done = d_recv_done;
    recv->arg = r;
    const torx_protocol_t want = seq == D_EAGER   ? TORX_PROTO_EAGER
                                 : seq == D_EMPTY ? TORX_PROTO_RZV
                                                  : TORX_PROTO_ONEPKT;
    /* 1000 eager bytes do not fit the first packet (they may all be in one
     * staged piece); the others are all here. None may be deferred. */
    RUN_CHECK(st,
              info->protocol == want && (seq == D_EAGER || info->data != NULL) && !info->deferrable,
              "seq %d: protocol %s, data %p, deferrable %d", seq,
              torx_protocol_name(info->protocol), info->data, info->deferrable);
}

/* Half a buffer for D_SHORT, accepted from the GO handler: torx_accept may
 * be called from a handler, and its done must still wait. */
static void ctrl_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                         torx_recv_t *recv)
{
    (void)recv;
    dstate_t *st = harg;
    uint32_t code = 0;
    if (info->hdr_len == sizeof code)
        memcpy(&code, info->hdr, sizeof code);
    RUN_CHECK(st, code > 0 && code < CTRL_N, "control word %u", code);
    if (code == 0 || code >= CTRL_N)
        return;
    st->ctrl[code] = 1;
    if (code == CTRL_GO && torx_rank(ctx) == 0) {
        rslot_t *r = &st->slot[D_SHORT];
        slot_alloc(r, DBIG / 2);
        const torx_recv_t acc = {.buf = r->base, .len = r->cap, .done = d_recv_done, .arg = r};
        const int before = st->rdone;
        RUN_CHECK(st, torx_accept(ctx, st->handle[D_SHORT], &acc) == TORX_OK, "accept: %s",
                  torx_last_error());
        RUN_CHECK(st, st->rdone == before, "done ran inside torx_accept (from a handler)");
    }
}

static torx_status_t ctrl_send(dstate_t *st, int dest, uint32_t code)
{
    return torx_send(st->ctx, &st->cmsg[code], dest, H_CTRL, &code, sizeof code, NULL, 0,
                     TORX_PROTO_ONEPKT, NULL, NULL);
}

static void d_sent(torx_ctx_t *ctx, torx_msg_t *msg, void *arg)
{
    (void)ctx;
    dstate_t *st = arg;
    const int seq = (int)(msg - st->msg);
    RUN_CHECK(st, seq >= 0 && seq < D_N && !st->sdone[seq], "send done of %d", seq);
    st->sdone[seq] = 1;
    st->nsdone++;
}

/* Advances until *flag or 30 s; 0 when the flag is up. */
static int d_wait(torx_ctx_t *ctx, volatile int *flag)
{
    return torx_wait_timeout(ctx, flag, 30) == TORX_OK ? 0 : -1;
}

static int check_data(const rslot_t *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (r->base[i] != test_pattern(1, (uint32_t)r->seq, i))
            return (int)i + 1;
    for (size_t i = r->cap; i < r->cap + DGUARD; i++)
        if (r->base[i] != 0xAB)
            return -1;
    return 0;
}

static int defer_sender(torx_boot_t *boot, dstate_t *st)
{
    torx_ctx_t *ctx = st->ctx;
    uint8_t *data[D_N];
    for (int seq = 0; seq < D_N; seq++) {
        data[seq] = malloc(d_len(seq) + 1);
        for (size_t i = 0; i < d_len(seq); i++)
            data[seq][i] = test_pattern(1, (uint32_t)seq, i);
    }
    for (int seq = 0; seq < D_N; seq++) {
        const test_hdr_t h = {.sender = 1, .seq = (uint32_t)seq};
        torx_protocol_t p = TORX_PROTO_AUTO;
        if (d_deferrable(seq))
            p = st->rzv;
        else if (seq == D_EAGER)
            p = TORX_PROTO_EAGER;
        else if (seq == D_EMPTY)
            p = TORX_PROTO_RZV;
        if (seq == D_INJECT) {
            /* The deferred scout left the queue: nothing holds this back. */
            const torx_status_t rc =
                torx_send_inject(ctx, 0, H_DATA, &h, sizeof h, data[seq], d_len(seq));
            TASK_CHECK(rc == TORX_OK, "inject behind a deferred rendezvous: %s",
                       torx_status_str(rc));
            st->sdone[seq] = 1;
            st->nsdone++;
            continue;
        }
        TASK_CHECK(torx_send(ctx, &st->msg[seq], 0, H_DATA, &h, sizeof h, data[seq], d_len(seq), p,
                             d_sent, st) == TORX_OK,
                   "send %d: %s", seq, torx_last_error());
    }
    TASK_CHECK(d_wait(ctx, &st->ctrl[CTRL_DEFERRED]) == 0, "rank 0 never said it deferred");
    /* Rank 0 holds three messages; advance a while: they must not complete.
     * A wait on a flag nothing sets: it advances, and sleeps when idle (on
     * sim, 0.2 s of polling would be millions of polls). */
    volatile int never = 0;
    TASK_CHECK(torx_wait_timeout(ctx, &never, 0.2) == TORX_AGAIN, "a wait on nothing ended");
    for (int seq = 0; seq < D_N; seq++) {
        TASK_CHECK(st->sdone[seq] == !d_deferrable(seq), "seq %d: send done %d before accept", seq,
                   st->sdone[seq]);
        TASK_CHECK(torx_msg_pending(&st->msg[seq]) == d_deferrable(seq), "seq %d pending %d", seq,
                   torx_msg_pending(&st->msg[seq]));
    }
    TASK_CHECK(ctrl_send(st, 0, CTRL_GO) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(wait_count(ctx, &st->nsdone, D_N) == 0, "%d of %d sends done", st->nsdone, D_N);
    TASK_CHECK(st->errors == 0, "%d errors", st->errors);
    torx_proto_stats_t s[TORX_PROTO_COUNT];
    torx_stats(ctx, s);
    const uint64_t rzv_sent = st->rzv == TORX_PROTO_RZV ? 4 : 1;
    TASK_CHECK(s[st->rzv].sent == 3 + (st->rzv == TORX_PROTO_RZV) &&
                   s[TORX_PROTO_RZV].sent == rzv_sent && s[TORX_PROTO_EAGER].sent == 1 &&
                   s[TORX_PROTO_ONEPKT].sent == 3 + 1 /* and GO */,
               "counters: %s %llu, eager %llu, one-packet %llu", torx_protocol_name(st->rzv),
               (unsigned long long)s[st->rzv].sent, (unsigned long long)s[TORX_PROTO_EAGER].sent,
               (unsigned long long)s[TORX_PROTO_ONEPKT].sent);
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    for (int seq = 0; seq < D_N; seq++)
        free(data[seq]);
    return 0;
}

static int defer_receiver(torx_boot_t *boot, dstate_t *st)
{
    torx_ctx_t *ctx = st->ctx;
    /* Every handler has run (three deferred), the eager and empty ones
     * completed: the deferred messages did not hold up those behind them. */
    TASK_CHECK(wait_count(ctx, &st->matched, D_N) == 0, "matched %d of %d", st->matched, D_N);
    TASK_CHECK(wait_count(ctx, &st->rdone, D_N - 3) == 0, "%d receives done", st->rdone);
    for (int seq = 0; seq < D_N; seq++)
        TASK_CHECK((st->handle[seq] != NULL) == d_deferrable(seq), "seq %d: handle %p", seq,
                   (void *)st->handle[seq]);
    TASK_CHECK(st->handle[D_FULL] != st->handle[D_DISCARD] &&
                   st->handle[D_DISCARD] != st->handle[D_SHORT],
               "handles not distinct");
    for (int seq = 0; seq < D_N; seq++) {
        if (d_deferrable(seq))
            continue;
        const rslot_t *r = &st->slot[seq];
        TASK_CHECK(r->done && r->status == TORX_OK && r->received == d_len(seq),
                   "seq %d: done %d, %s, %zu bytes", seq, r->done, torx_status_str(r->status),
                   r->received);
        TASK_CHECK(check_data(r, d_len(seq)) == 0, "seq %d: data", seq);
    }
    torx_proto_stats_t s[TORX_PROTO_COUNT];
    torx_stats(ctx, s);
    TASK_CHECK(s[st->rzv].received == 3 + (st->rzv == TORX_PROTO_RZV), "%s received %llu",
               torx_protocol_name(st->rzv), (unsigned long long)s[st->rzv].received);

    /* Bad calls leave the handle alone. */
    const torx_recv_t none = {0};
    TASK_CHECK(torx_accept(NULL, st->handle[D_FULL], &none) == TORX_ERR_INVAL, "ctx NULL");
    TASK_CHECK(torx_accept(ctx, NULL, &none) == TORX_ERR_INVAL, "handle NULL");
    TASK_CHECK(torx_accept(ctx, st->handle[D_FULL], NULL) == TORX_ERR_INVAL, "recv NULL");

    TASK_CHECK(ctrl_send(st, 1, CTRL_DEFERRED) == TORX_OK, "%s", torx_last_error());
    /* GO comes once the sender has advanced a while; its handler accepts
     * D_SHORT. */
    TASK_CHECK(d_wait(ctx, &st->ctrl[CTRL_GO]) == 0, "no GO");
    const int before = st->rdone;
    rslot_t *r = &st->slot[D_FULL];
    slot_alloc(r, DBIG);
    torx_recv_t acc = {.buf = r->base, .len = r->cap, .done = d_recv_done, .arg = r};
    TASK_CHECK(torx_accept(ctx, st->handle[D_FULL], &acc) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(st->rdone == before, "done ran inside torx_accept");
    r = &st->slot[D_DISCARD];
    acc = (torx_recv_t){.buf = NULL, .len = 12345, .done = d_recv_done, .arg = r};
    TASK_CHECK(torx_accept(ctx, st->handle[D_DISCARD], &acc) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(st->rdone == before, "done ran inside torx_accept (discard)");
    TASK_CHECK(wait_count(ctx, &st->rdone, D_N) == 0, "%d receives done", st->rdone);

    r = &st->slot[D_FULL];
    TASK_CHECK(r->status == TORX_OK && r->received == DBIG, "full: %s, %zu bytes",
               torx_status_str(r->status), r->received);
    TASK_CHECK(check_data(r, DBIG) == 0, "full: data wrong (%d)", check_data(r, DBIG));
    r = &st->slot[D_DISCARD];
    TASK_CHECK(r->status == TORX_OK && r->received == 0, "discard: %s, %zu bytes",
               torx_status_str(r->status), r->received);
    r = &st->slot[D_SHORT];
    TASK_CHECK(r->status == TORX_ERR_TRUNCATE && r->received == DBIG / 2, "short: %s, %zu bytes",
               torx_status_str(r->status), r->received);
    TASK_CHECK(check_data(r, DBIG / 2) == 0, "short: data wrong or past the buffer (%d)",
               check_data(r, DBIG / 2));
    TASK_CHECK(st->errors == 0, "%d errors", st->errors);
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    for (int seq = 0; seq < D_N; seq++)
        free(st->slot[seq].base);
    return 0;
}

static int defer_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    dstate_t *st = calloc(1, sizeof *st);
    for (int seq = 0; seq < D_N; seq++)
        st->slot[seq] = (rslot_t){.st = st, .seq = seq};
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    TASK_CHECK(torx_init(&attr, &st->ctx) == TORX_OK, "%s", torx_last_error());
    st->rzv = torx_mode(st->ctx) == TORX_MODE_VN ? TORX_PROTO_VN : TORX_PROTO_RZV;
    TASK_CHECK(torx_register(st->ctx, H_DATA, d_handler, st) == TORX_OK, "register");
    TASK_CHECK(torx_register(st->ctx, H_CTRL, ctrl_handler, st) == TORX_OK, "register");
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    const int rc = boot->rank == 1 ? defer_sender(boot, st) : defer_receiver(boot, st);
    free(st);
    return rc;
}

START_TEST(defer_and_accept)
{
    const dvar_t *v = &dvars[_i];
    setenv("TORX_MODE", v->mode, 1);
    if (v->rzv_data)
        setenv("TORX_RZV_DATA", v->rzv_data, 1);
    if (v->bulk)
        setenv("TORX_BULK", v->bulk, 1);
    /* The deferrable messages are rendezvous and vn bulk gets, also when
     * the pair is idle. */
    setenv("TORX_EAGER_IDLE_LIMIT", "0", 1);
    setenv("TORX_STAGE_COST_MAX", "65535", 1); /* and eager stays eager */
    const double t0 = test_now();
    RUN_JOB(2, defer_task, NULL);
    unsetenv("TORX_EAGER_IDLE_LIMIT");
    unsetenv("TORX_STAGE_COST_MAX");
    fprintf(stderr, "defer %-16s %.2f s\n", v->name, test_now() - t0);
}
END_TEST

/* ---- A deferred message never accepted: finalize discards it, its sender completes ---- */

typedef struct fin {
    volatile int matched, sent;
    torx_deferred_t *h;
} fin_t;

static void fin_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                        torx_recv_t *recv)
{
    (void)ctx;
    (void)info;
    fin_t *f = harg;
    recv->defer = &f->h;
    f->matched = 1;
}

static int finalize_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    fin_t f = {0};
    torx_ctx_t *ctx;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(torx_register(ctx, H_DATA, fin_handler, &f) == TORX_OK, "register");
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    static uint8_t data[DBIG];
    torx_msg_t m;
    const double t0 = test_now();
    if (boot->rank == 1) {
        TASK_CHECK(torx_send(ctx, &m, 0, H_DATA, NULL, 0, data, sizeof data, TORX_PROTO_RZV,
                             test_count_msg, (void *)&f.sent) == TORX_OK,
                   "%s", torx_last_error());
    } else {
        TASK_CHECK(torx_wait_timeout(ctx, &f.matched, 30) == TORX_OK && f.h, "not deferred");
    }
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(boot->rank == 0 || f.sent == 1, "the send never completed");
    TASK_CHECK(test_now() - t0 < 20, "finalize took %.1f s", test_now() - t0);
    return 0;
}

START_TEST(finalize_discards_deferred)
{
    setenv("TORX_MODE", modes[_i], 1);
    RUN_JOB(2, finalize_task, NULL);
}
END_TEST

/* ---- TORX_ONEPKT_LIMIT -------------------------------------------------------------------- */

typedef struct lim {
    size_t limit;
    uint32_t next;
    volatile int got;
    int errors;
} lim_t;

#define LIM_N 5

/* Message seq: header bytes, data bytes, how it is sent (1: inject first). */
static const struct {
    size_t len;
    torx_protocol_t force;
    int inject;
} lim_msgs[LIM_N] = {
    {1, TORX_PROTO_AUTO, 0},     {0, TORX_PROTO_AUTO, 0},
    {200, TORX_PROTO_ONEPKT, 0}, /* forcing overrides the limit */
    {92, TORX_PROTO_AUTO, 1},    /* 8 + 92 = 100 */
    {93, TORX_PROTO_AUTO, 1},
};

static torx_protocol_t lim_expect(size_t limit, uint32_t seq)
{
    if (lim_msgs[seq].force != TORX_PROTO_AUTO)
        return lim_msgs[seq].force;
    return limit && sizeof(test_hdr_t) + lim_msgs[seq].len <= limit ? TORX_PROTO_ONEPKT
                                                                    : TORX_PROTO_EAGER;
}

static void lim_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                        torx_recv_t *recv)
{
    (void)ctx;
    (void)recv;
    lim_t *l = harg;
    test_hdr_t h;
    memcpy(&h, info->hdr, sizeof h);
    RUN_CHECK(l, h.seq == l->next && h.seq < LIM_N, "seq %u when %u was due", h.seq, l->next);
    l->next = h.seq + 1;
    if (h.seq >= LIM_N)
        return;
    const torx_protocol_t want = lim_expect(l->limit, h.seq);
    RUN_CHECK(l, info->protocol == want, "seq %u (%zu bytes): %s, expected %s", h.seq,
              info->data_len, torx_protocol_name(info->protocol), torx_protocol_name(want));
    RUN_CHECK(l, info->data_len == lim_msgs[h.seq].len && info->data, "seq %u: %zu bytes", h.seq,
              info->data_len);
    for (size_t i = 0; info->data && i < info->data_len; i++)
        if (((const uint8_t *)info->data)[i] != test_pattern(1, h.seq, i)) {
            RUN_CHECK(l, 0, "seq %u: byte %zu wrong", h.seq, i);
            break;
        }
    l->got++;
}

static int limit_task(torx_boot_t *boot, void *argp)
{
    lim_t l = {.limit = *(const size_t *)argp};
    torx_ctx_t *ctx;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(torx_ctx_limits(ctx)->onepkt_limit == l.limit, "limit %zu, expected %zu",
               torx_ctx_limits(ctx)->onepkt_limit, l.limit);
    const torx_protocol_t small = l.limit ? TORX_PROTO_ONEPKT : TORX_PROTO_EAGER;
    /* Empty, with one-packet off: eager, not adaptive (adaptive_limit 0 is off). */
    TASK_CHECK(torx_choose_protocol(ctx, 0, 0, 0) == small, "empty: %s",
               torx_protocol_name(torx_choose_protocol(ctx, 0, 0, 0)));
    TASK_CHECK(torx_choose_protocol(ctx, 0, 8, 1) == small, "9 bytes");
    TASK_CHECK(torx_choose_protocol(ctx, 0, 8, 92) == small, "100 bytes");
    TASK_CHECK(torx_choose_protocol(ctx, 0, 8, 93) ==
                   (l.limit > 100 ? TORX_PROTO_ONEPKT : TORX_PROTO_EAGER),
               "101 bytes");
    TASK_CHECK(torx_register(ctx, H_DATA, lim_handler, &l) == TORX_OK, "register");
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    torx_proto_stats_t st[TORX_PROTO_COUNT];
    if (boot->rank == 1) {
        static torx_msg_t msgs[LIM_N];
        static uint8_t data[LIM_N][TORX_MSG_ONEPKT_MAX];
        int sent = 0, onepkt = 0, eager = 0;
        for (uint32_t seq = 0; seq < LIM_N; seq++) {
            const size_t len = lim_msgs[seq].len;
            for (size_t i = 0; i < len; i++)
                data[seq][i] = test_pattern(1, seq, i);
            const test_hdr_t h = {.sender = 1, .seq = seq};
            const torx_protocol_t want = lim_expect(l.limit, seq);
            *(want == TORX_PROTO_ONEPKT ? &onepkt : &eager) += 1;
            if (lim_msgs[seq].inject) {
                const torx_status_t rc =
                    torx_send_inject(ctx, 0, H_DATA, &h, sizeof h, data[seq], len);
                /* One packet, or eager as one batch of packets (heater). */
                TASK_CHECK(rc == TORX_OK, "inject of 8 + %zu bytes under limit %zu: %s", len,
                           l.limit, torx_status_str(rc));
                if (rc == TORX_OK) {
                    sent++;
                    continue;
                }
            }
            TASK_CHECK(torx_send(ctx, &msgs[seq], 0, H_DATA, &h, sizeof h, data[seq], len,
                                 lim_msgs[seq].force, test_count_msg, &sent) == TORX_OK,
                       "send %u: %s", seq, torx_last_error());
        }
        volatile int *all = &sent;
        const double deadline = torx_wtime(ctx) + 30;
        while (*all < LIM_N && torx_wtime(ctx) < deadline)
            if (!torx_advance(ctx))
                sched_yield();
        TASK_CHECK(sent == LIM_N, "%d of %d sent", sent, LIM_N);
        torx_stats(ctx, st);
        TASK_CHECK(st[TORX_PROTO_ONEPKT].sent == (uint64_t)onepkt &&
                       st[TORX_PROTO_EAGER].sent == (uint64_t)eager &&
                       st[TORX_PROTO_ADAPTIVE].sent == 0,
                   "one-packet %llu (expected %d), eager %llu (expected %d)",
                   (unsigned long long)st[TORX_PROTO_ONEPKT].sent, onepkt,
                   (unsigned long long)st[TORX_PROTO_EAGER].sent, eager);
    } else {
        const double deadline = torx_wtime(ctx) + 30;
        while (l.got < LIM_N && torx_wtime(ctx) < deadline)
            if (!torx_advance(ctx))
                sched_yield();
        TASK_CHECK(l.got == LIM_N && l.errors == 0, "received %d of %d, %d errors", l.got, LIM_N,
                   l.errors);
    }
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    return 0;
}

START_TEST(onepkt_limit_env)
{
    static const char *const vals[] = {"0", "100", NULL};
    static const size_t lims[] = {0, 100, TORX_MSG_ONEPKT_MAX};
    if (vals[_i])
        setenv("TORX_ONEPKT_LIMIT", vals[_i], 1);
    else
        unsetenv("TORX_ONEPKT_LIMIT");
    RUN_JOB(2, limit_task, (void *)&lims[_i]);
}
END_TEST

static int limit_fail_task(torx_boot_t *boot, void *argp)
{
    const char *value = argp;
    torx_ctx_t *ctx = NULL;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    const torx_status_t rc = torx_init(&attr, &ctx);
    TASK_CHECK(rc == TORX_ERR_ENV && ctx == NULL, "init: %s", torx_status_str(rc));
    TASK_CHECK(strstr(torx_last_error(), "TORX_ONEPKT_LIMIT") && strstr(torx_last_error(), value),
               "message '%s' lacks the variable or '%s'", torx_last_error(), value);
    return 0;
}

static int limit_attr_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_limits_t lim = {.onepkt_limit = TORX_MSG_ONEPKT_MAX + 1, .eager_limit = 4096};
    torx_init_attr_t attr = {.boot = boot, .mode = -1, .limits = &lim};
    torx_ctx_t *ctx = NULL;
    torx_status_t rc = torx_init(&attr, &ctx);
    TASK_CHECK(rc == TORX_ERR_INVAL && ctx == NULL && strstr(torx_last_error(), "onepkt_limit"),
               "onepkt_limit 241: %s (%s)", torx_status_str(rc), torx_last_error());
    lim.onepkt_limit = 0;
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(torx_ctx_limits(ctx)->onepkt_limit == 0 &&
                   torx_choose_protocol(ctx, 0, 0, 1) == TORX_PROTO_EAGER,
               "limit 0 from attr");
    /* With one-packet off, the empty message goes eager (one batch). */
    torx_proto_stats_t st[TORX_PROTO_COUNT];
    TASK_CHECK(torx_send_inject(ctx, 0, H_DATA, NULL, 0, NULL, 0) == TORX_OK,
               "inject with one-packet off: %s", torx_last_error());
    torx_stats(ctx, st);
    TASK_CHECK(st[TORX_PROTO_EAGER].sent == 1 && st[TORX_PROTO_ONEPKT].sent == 0,
               "inject with one-packet off: eager %llu, one-packet %llu",
               (unsigned long long)st[TORX_PROTO_EAGER].sent,
               (unsigned long long)st[TORX_PROTO_ONEPKT].sent);
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    return 0;
}

START_TEST(onepkt_limit_rejected)
{
    static const char *const bad[] = {"241", "-1", "12x", "1000"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("TORX_ONEPKT_LIMIT", bad[i], 1);
        RUN_JOB(1, limit_fail_task, (void *)bad[i]);
    }
    setenv("TORX_ONEPKT_LIMIT", "100", 1); /* attr->limits wins over the environment */
    RUN_JOB(1, limit_attr_task, NULL);
}
END_TEST

/* ---- The tuning file (TORX_CONF) ----------------------------------------------------- */

typedef struct tune_want {
    size_t eager, idle, stage_min, chunk;
    unsigned cost_max;
    const char *file; /* expected in the context's tuning_file; NULL: none */
} tune_want_t;

static int tune_task(torx_boot_t *boot, void *argp)
{
    const tune_want_t *w = argp;
    torx_ctx_t *ctx = NULL;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    const torx_limits_t *l = torx_ctx_limits(ctx);
    TASK_CHECK(l->eager_limit == w->eager && l->idle_limit == w->idle &&
                   l->stage_min == w->stage_min && l->stage_chunk == w->chunk &&
                   l->stage_cost_max == w->cost_max,
               "limits eager %zu idle %zu stage_min %zu chunk %zu cost_max %u; expected %zu %zu "
               "%zu %zu %u",
               l->eager_limit, l->idle_limit, l->stage_min, l->stage_chunk, l->stage_cost_max,
               w->eager, w->idle, w->stage_min, w->chunk, w->cost_max);
    TASK_CHECK(w->file ? strcmp(ctx->tuning_file, w->file) == 0 : ctx->tuning_file[0] == '\0',
               "tuning file '%s'", ctx->tuning_file);
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    return 0;
}

static int tune_fail_task(torx_boot_t *boot, void *argp)
{
    const char *const *needles = argp;
    torx_ctx_t *ctx = NULL;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    const torx_status_t rc = torx_init(&attr, &ctx);
    TASK_CHECK(rc == TORX_ERR_ENV && ctx == NULL, "init: %s", torx_status_str(rc));
    for (int i = 0; needles[i]; i++)
        TASK_CHECK(strstr(torx_last_error(), needles[i]), "message '%s' lacks '%s'",
                   torx_last_error(), needles[i]);
    return 0;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

START_TEST(tuning_file)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/torx-tune-%d.conf", (int)getpid());
    setenv("TORX_CONF", path, 1);
    unsetenv("TORX_EAGER_LIMIT");
    unsetenv("TORX_EAGER_IDLE_LIMIT");
    setenv("TORX_MODE", "heater", 1);
    write_file(path, "# measured here\n\n  TORX_EAGER_LIMIT = 8192\nTORX_EAGER_IDLE_LIMIT=0\r\n"
                     "TORX_STAGE_COST_MAX=40 ns\n");
    /* A value with trailing words is not an integer: named with file and line. */
    const char *const trailing[] = {path, "line 5", "TORX_STAGE_COST_MAX", NULL};
    RUN_JOB(1, tune_fail_task, (void *)trailing);

    write_file(path, "# measured here\n\n  TORX_EAGER_LIMIT = 8192\nTORX_EAGER_IDLE_LIMIT=0\r\n"
                     "TORX_STAGE_COST_MAX=40\n");
    tune_want_t w = {8192, 0, TORXM_STAGE_MIN, TORXM_STAGE_CHUNK, 40, path};
    RUN_JOB(2, tune_task, &w);
    /* The environment wins over the file. */
    setenv("TORX_EAGER_LIMIT", "4096", 1);
    w.eager = 4096;
    RUN_JOB(1, tune_task, &w);
    unsetenv("TORX_EAGER_LIMIT");
    /* co mode keeps the idle rule off whatever the file says. */
    write_file(path, "TORX_EAGER_IDLE_LIMIT=65536\n");
    setenv("TORX_MODE", "co", 1);
    w = (tune_want_t){TORXM_EAGER_LIMIT,    0,   TORXM_STAGE_MIN, TORXM_STAGE_CHUNK,
                      TORXM_STAGE_COST_MAX, NULL};
    RUN_JOB(1, tune_task, &w);
    setenv("TORX_MODE", "heater", 1);
    w.idle = 65536;
    w.file = path;
    RUN_JOB(1, tune_task, &w);
    /* TORX_CONF="": no file; the built-in defaults. */
    setenv("TORX_CONF", "", 1);
    w = (tune_want_t){TORXM_EAGER_LIMIT, TORXM_EAGER_IDLE_LIMIT, TORXM_STAGE_MIN,
                      TORXM_STAGE_CHUNK, TORXM_STAGE_COST_MAX,   NULL};
    RUN_JOB(1, tune_task, &w);
    setenv("TORX_CONF", path, 1);

    /* Bad files: each named, with the line and what is wrong. */
    static const struct {
        const char *text;
        const char *needle;
    } bad[] = {
        {"TORX_EAGER_LIMT=8192\n", "TORX_EAGER_LIMT is not one of"},
        {"TORX_STAGE_MIN=300\nTORX_STAGE_MIN=400\n", "set again (first on line 1)"},
        {"TORX_EAGER_LIMIT 8192\n", "is not NAME=VALUE"},
        {"TORX_STAGE_CHUNK=100\n", "is not an integer in 256.."},
        {"TORX_EAGER_LIMIT=\n", "has no value"},
        {"TORX_MODE=vn\n", "TORX_MODE is not one of"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(path, bad[i].text);
        const char *const needles[] = {path, bad[i].needle, NULL};
        RUN_JOB(1, tune_fail_task, (void *)needles);
    }
    unlink(path);
    const char *const missing[] = {path, "TORX_CONF", "No such file", NULL};
    RUN_JOB(1, tune_fail_task, (void *)missing);
    unsetenv("TORX_CONF");
    unsetenv("TORX_MODE");
}
END_TEST

Suite *msg_defer_suite(void);

Suite *msg_defer_suite(void)
{
    Suite *s = suite_create("msg_defer");
    TCase *inj = tcase_create("inject");
    tcase_set_timeout(inj, 90);
    tcase_add_loop_test(inj, inject_delivers_and_counts, 0, 3);
    tcase_add_test(inj, inject_keeps_order);
    tcase_add_loop_test(inj, inject_eager_batches, 0, 4);
    suite_add_tcase(s, inj);
    TCase *def = tcase_create("defer");
    tcase_set_timeout(def, 90);
    tcase_add_loop_test(def, defer_and_accept, 0, NDVARS);
    tcase_add_loop_test(def, finalize_discards_deferred, 0, 3);
    suite_add_tcase(s, def);
    TCase *lim = tcase_create("onepkt_limit");
    tcase_set_timeout(lim, 60);
    tcase_add_loop_test(lim, onepkt_limit_env, 0, 3);
    tcase_add_test(lim, onepkt_limit_rejected);
    tcase_add_test(lim, tuning_file);
    suite_add_tcase(s, lim);
    return s;
}

int main(void)
{
    return test_run_suite(msg_defer_suite());
}
