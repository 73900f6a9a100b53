/* Helpers shared by the message-layer tests (test_msg*.c): the protocol run
 * (every size around every threshold, data checked; test_msg, test_msg_co)
 * and the mixed-protocol run under chaos (test_msg_order, test_msg_co). */
#ifndef TORX_TEST_MSG_H
#define TORX_TEST_MSG_H

#include "harness.h"
#include "msglayer/msg_internal.h" /* ctx->parked: proof that reordering happened */

#include <torx/msg.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sanitized builds run smaller loads. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SCALE 10
#else
#define SCALE 1
#endif

#define MAX_TASKS 16
#define MIX_HANDLER 5

/* Every test message's header: who sent it, and its place in the sender's
 * sequence, so receivers check order per sender. */
typedef struct test_hdr {
    uint32_t sender;
    uint32_t seq;
} test_hdr_t;

/* Byte i of message seq from sender: varies with all three, and with i's
 * higher bits, so a misplaced 256-byte block shows. */
static inline uint8_t test_pattern(uint32_t sender, uint32_t seq, size_t i)
{
    return (uint8_t)(i * 131u + (i >> 8) * 17u + seq * 7u + sender * 29u);
}

/* The first of len bytes at buf that is not test_pattern(sender, seq, .),
 * or SIZE_MAX when all are. */
static inline size_t test_pattern_wrong(const uint8_t *buf, size_t len, uint32_t sender,
                                        uint32_t seq)
{
    for (size_t i = 0; i < len; i++)
        if (buf[i] != test_pattern(sender, seq, i))
            return i;
    return SIZE_MAX;
}

/* Records a failure inside a handler or callback, where a task cannot
 * return; the task checks r->errors at the end. Prints the first few. */
#define RUN_CHECK(r, cond, ...)                                                                    \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            if ((r)->errors++ < 10) {                                                              \
                fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);           \
                fprintf(stderr, __VA_ARGS__);                                                      \
                fputc('\n', stderr);                                                               \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static inline void test_bump(void *arg)
{
    ++*(int *)arg;
}

/* A send done callback counting into an int. */
static inline void test_count_msg(torx_ctx_t *ctx, torx_msg_t *msg, void *arg)
{
    (void)ctx;
    (void)msg;
    ++*(int *)arg;
}

/* ---- A protocol run: every task sends a list of messages to the next task
 * and receives the list from the previous one (both directions at once). */

typedef struct variant {
    const char *name;
    torx_protocol_t proto; /* forced, or AUTO */
    const char *eager;     /* TORX_EAGER_LIMIT, NULL: default */
    const char *adaptive;  /* TORX_ADAPTIVE_LIMIT, NULL: default */
    const char *rzv_data;  /* TORX_RZV_DATA, NULL: default */
    const char *mode;      /* TORX_MODE, NULL: default */
    const char *bulk;      /* TORX_BULK, NULL: default */
    int big;               /* add 64 MiB */
    int cut;               /* truncate and discard some receives */
    int ntasks;
    const char *stage_min;   /* TORX_STAGE_MIN, NULL: default */
    const char *stage_chunk; /* TORX_STAGE_CHUNK, NULL: default */
    const char *stage_bytes; /* TORX_STAGE_BYTES, NULL: default */
} variant_t;

#define MAX_SIZES 40

/* The sizes a variant sends: 0, 1, around a full packet, around each
 * threshold, 1 MiB, and 64 MiB for the big ones, except on the sim device:
 * there 64 MiB is 280,000 modelled packets, about 4 s a message, and tests
 * nothing of the device that 1 MiB does not (shm and ofi send it). */
static inline size_t variant_sizes(const variant_t *v, size_t eager, size_t adaptive, size_t *out)
{
    const size_t one = TORX_MSG_ONEPKT_MAX - sizeof(test_hdr_t);
    const size_t base[] = {
        0,         1,     one - 1,   one,          one + 1,  239,          240,          241,
        eager - 1, eager, eager + 1, adaptive - 1, adaptive, adaptive + 1, 4095,         4096,
        4097,      1000,  65535,     65536,        65537,    1u << 20,     3 * 240 + 17, 255,
        256,       257,   8191,      8192,         8193,     24577};
    size_t n = 0;
    for (size_t i = 0; i < sizeof base / sizeof base[0]; i++) {
        if (base[i] > (64u << 20))
            continue; /* adaptive - 1 when adaptive is 0 */
        if (v->proto == TORX_PROTO_ONEPKT && base[i] > one)
            continue;
        out[n++] = base[i];
    }
    const char *device = getenv("TORX_DEVICE");
    if (v->big && !(device && !strcmp(device, "sim")))
        out[n++] = 64u << 20;
    return n;
}

typedef struct run {
    const variant_t *v;
    int rank, ntasks, src, dst;
    size_t sizes[MAX_SIZES];
    size_t nsizes;
    size_t eager, adaptive;
    size_t idle; /* rendezvous sizes up to this may go eager (idle pair) */
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

static inline void update_done(run_t *r)
{
    r->all_done = r->sent == (int)r->nsizes && r->received == (int)r->nsizes;
}

/* What the receiver expects AUTO to have picked (computed here, apart from
 * the library's own choice). */
static inline torx_protocol_t expected_protocol(const run_t *r, size_t len)
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

static inline void proto_recv_done(torx_ctx_t *ctx, void *arg, torx_status_t status,
                                   size_t received)
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
                RUN_CHECK(r, 0, "seq %u: byte %zu past the %zu-byte buffer was written", b->seq, i,
                          b->cap);
                break;
            }
        free(b->base);
    }
    free(b);
    r->received++;
    update_done(r);
}

static inline void proto_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
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
    RUN_CHECK(r, info->data_len == len, "seq %u: data_len %zu, expected %zu", h.seq, info->data_len,
              len);
    const torx_protocol_t want = expected_protocol(r, len);
    /* A rendezvous-sized message finds the pair idle or not, by timing. */
    const int idle_eager = want == TORX_PROTO_RZV && r->v->proto == TORX_PROTO_AUTO &&
                           len <= r->idle && info->protocol == TORX_PROTO_EAGER;
    RUN_CHECK(r, info->protocol == want || idle_eager,
              "seq %u (%zu bytes): protocol %s, expected %s", h.seq, len,
              torx_protocol_name(info->protocol), torx_protocol_name(want));
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
        case 0:
            b->cap = len / 2;
            break;
        case 1:
            b->cap = len ? len - 1 : 0;
            break;
        case 2:
            b->discard = 1;
            break;
        default:
            break;
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

static inline void proto_send_done(torx_ctx_t *ctx, torx_msg_t *msg, void *arg)
{
    (void)ctx;
    run_t *r = arg;
    RUN_CHECK(r, !torx_msg_pending(msg), "message still pending in its done callback");
    r->sent++;
    update_done(r);
}

static inline int proto_task(torx_boot_t *boot, void *argp)
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
    r->idle = lim->stage_min && lim->idle_limit > lim->eager_limit ? lim->idle_limit : 0;
    if (v->mode && !strcmp(v->mode, "co")) {
        TASK_CHECK(torx_mode(ctx) == TORX_MODE_CO && torx_tasks_per_node(ctx) == 1,
                   "mode %d, %d tasks per node", torx_mode(ctx), torx_tasks_per_node(ctx));
    } else if (v->mode) {
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
    /* A forced rendezvous: each message with data counts once in the data
     * paths (torx_stats_data), with all its bytes; by packets when asked. */
    if (proto == TORX_PROTO_RZV && !v->cut) {
        torx_data_stats_t d;
        torx_stats_data(ctx, &d);
        uint64_t n = 0, bytes = 0;
        for (size_t i = 0; i < r->nsizes; i++)
            n += r->sizes[i] > 0, bytes += r->sizes[i];
        TASK_CHECK(d.bulk + d.staged + d.packets == n &&
                       d.bulk_bytes + d.staged_bytes + d.packets_bytes == bytes,
                   "%s data paths: bulk %llu (%llu B), staged %llu (%llu B), packets %llu (%llu "
                   "B); expected %llu messages, %llu B",
                   v->name, (unsigned long long)d.bulk, (unsigned long long)d.bulk_bytes,
                   (unsigned long long)d.staged, (unsigned long long)d.staged_bytes,
                   (unsigned long long)d.packets, (unsigned long long)d.packets_bytes,
                   (unsigned long long)n, (unsigned long long)bytes);
        const int packets = v->rzv_data && !strcmp(v->rzv_data, "packets");
        TASK_CHECK(!packets || d.packets == n,
                   "%s: TORX_RZV_DATA=packets, and %llu of %llu came so", v->name,
                   (unsigned long long)d.packets, (unsigned long long)n);
    }
    /* Staging asked for, sizes that take it (eager, or vn up to the eager
     * limit) and a sender the staging area reaches (on ofi with hosts of
     * several tasks, only this host's tasks): the pieces must really have
     * gone through the area. */
    const int staged_wanted =
        v->stage_min && strcmp(v->stage_min, "0") &&
        (proto == TORX_PROTO_EAGER || proto == TORX_PROTO_AUTO) &&
        torx_stage_reaches(torx_ctx_device(ctx), torx_map_coord(torx_ctx_map(ctx), r->src));
    TASK_CHECK(!staged_wanted || ctx->staged_pieces > 0, "%s: no piece came through staging",
               v->name);
    TASK_CHECK(staged_wanted || (v->stage_min && !strcmp(v->stage_min, "0")) == 0 ||
                   ctx->staged_pieces == 0,
               "%s: TORX_STAGE_MIN=0 and still %llu staged pieces", v->name,
               (unsigned long long)ctx->staged_pieces);
    /* Rendezvous data: staged when asked for (a forced rendezvous stages
     * nothing else), and by bulk get, never staged, when that is asked. */
    const int rzv_staged = v->rzv_data && !strcmp(v->rzv_data, "staged");
    const int rzv_bulk = v->rzv_data && !strcmp(v->rzv_data, "bulk");
    const int rzv_reaches =
        torx_stage_reaches(torx_ctx_device(ctx), torx_map_coord(torx_ctx_map(ctx), r->src));
    TASK_CHECK(!rzv_staged || !rzv_reaches || ctx->staged_pieces > 0,
               "%s: no rendezvous piece came through staging", v->name);
    TASK_CHECK(!(rzv_bulk && proto == TORX_PROTO_RZV) || ctx->staged_pieces == 0,
               "%s: TORX_RZV_DATA=bulk and still %llu staged pieces", v->name,
               (unsigned long long)ctx->staged_pieces);
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    for (size_t i = 0; i < r->nsizes; i++)
        free(bufs[i]);
    free(bufs);
    free(msgs);
    free(r);
    return 0;
}

static inline void set_or_unset(const char *name, const char *value)
{
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
}

/* Sets the environment variant v runs under (every task of its job, before
 * torx_init). */
static inline void test_variant_env(const variant_t *v)
{
    set_or_unset("TORX_EAGER_LIMIT", v->eager);
    set_or_unset("TORX_ADAPTIVE_LIMIT", v->adaptive);
    set_or_unset("TORX_RZV_DATA", v->rzv_data);
    set_or_unset("TORX_MODE", v->mode);
    set_or_unset("TORX_BULK", v->bulk);
    set_or_unset("TORX_STAGE_MIN", v->stage_min);
    set_or_unset("TORX_STAGE_CHUNK", v->stage_chunk);
    set_or_unset("TORX_STAGE_BYTES", v->stage_bytes);
    /* Each message's protocol is checked: copies slowed by a loaded machine
     * must not send staged sizes by rendezvous (test_msg's idle case tests
     * that rule). */
    setenv("TORX_STAGE_COST_MAX", "65535", 1);
    if (v->mode && !strcmp(v->mode, "vn") && v->ntasks > 2)
        setenv("TORX_MAPPING", "TXYZ", 1); /* ranks 0,1 share a node, 2,3 the next */
    else
        unsetenv("TORX_MAPPING");
}

/* Runs variant v as a fork job, its environment set first; 0 when it passed. */
static inline int test_run_variant(const variant_t *v)
{
    test_variant_env(v);
    const double t0 = test_now();
    const int rc = torx_boot_fork_run(v->ntasks, proto_task, (void *)v, TEST_JOB_TIMEOUT, 0);
    fprintf(stderr, "msg variant %-20s %.2f s\n", v->name, test_now() - t0);
    return rc;
}

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
static inline size_t mix_len(uint32_t sender, uint32_t dest, uint32_t seq)
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
static inline torx_protocol_t mix_proto(uint32_t seq, size_t len)
{
    static const torx_protocol_t ps[] = {TORX_PROTO_AUTO,  TORX_PROTO_EAGER, TORX_PROTO_ADAPTIVE,
                                         TORX_PROTO_RZV,   TORX_PROTO_AUTO,  TORX_PROTO_ADAPTIVE,
                                         TORX_PROTO_ONEPKT};
    torx_protocol_t p = ps[(seq * 7u + (seq >> 3)) % (sizeof ps / sizeof ps[0])];
    if (p == TORX_PROTO_ONEPKT && len + sizeof(test_hdr_t) > TORX_MSG_ONEPKT_MAX)
        p = TORX_PROTO_AUTO;
    return p;
}

static inline uint8_t mix_byte(uint32_t sender, size_t j)
{
    return test_pattern(sender, 0, j);
}

static inline void mix_update(mix_t *mx)
{
    mx->all_done = mx->received == mx->expected_rx && mx->sent == mx->expected_tx;
}

static inline void mix_recv_done(torx_ctx_t *ctx, void *arg, torx_status_t status, size_t received)
{
    (void)ctx;
    mix_rbuf_t *b = arg;
    mix_t *mx = b->mx;
    RUN_CHECK(mx, status == TORX_OK && received == b->len, "%u/%u: %s, %zu of %zu bytes", b->sender,
              b->seq, torx_status_str(status), received, b->len);
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

static inline void mix_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
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

static inline void mix_send_done(torx_ctx_t *ctx, torx_msg_t *msg, void *arg)
{
    (void)ctx;
    (void)msg;
    mix_t *mx = arg;
    mx->sent++;
    mix_update(mx);
}

static inline int mix_task(torx_boot_t *boot, void *argp)
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
    TASK_CHECK(torx_register(ctx, MIX_HANDLER, mix_handler, mx) == TORX_OK, "register");
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");

    torx_msg_t *msgs = calloc(mx->expected_tx, sizeof *msgs);
    size_t k = 0;
    for (uint32_t seq = 0; seq < per_peer; seq++)
        for (int d = 1; d < boot->size; d++) {
            const int dest = (boot->rank + d) % boot->size;
            const size_t len = mix_len((uint32_t)boot->rank, (uint32_t)dest, seq);
            const test_hdr_t h = {.sender = (uint32_t)boot->rank, .seq = seq};
            const torx_status_t rc = torx_send(ctx, &msgs[k++], dest, MIX_HANDLER, &h, sizeof h,
                                               mx->pattern + seq % MIX_SHIFT, len,
                                               mix_proto(seq, len), mix_send_done, mx);
            TASK_CHECK(rc == TORX_OK, "send: %s", torx_last_error());
            if ((k & 15) == 0)
                torx_advance(ctx); /* keep receiving while sending */
        }
    const torx_status_t rc = torx_wait_timeout(ctx, &mx->all_done, 100);
    TASK_CHECK(rc == TORX_OK, "wait: %s (%s): sent %llu of %llu, received %llu of %llu",
               torx_status_str(rc), rc == TORX_AGAIN ? "100 s passed" : torx_last_error(),
               (unsigned long long)mx->sent, (unsigned long long)mx->expected_tx,
               (unsigned long long)mx->received, (unsigned long long)mx->expected_rx);
    TASK_CHECK(mx->errors == 0, "%d errors", mx->errors);

    /* Reordering must really have happened somewhere, or this test proves
     * nothing about the adaptive paths. Finalize before the allgather: this
     * task's receives are done, but an ack a peer's send waits for may still
     * sit in the control queue, and only advancing sends it (the boot
     * allgather does not; CI once timed out so, under ASan). */
    uint64_t parked = ctx->parked, all[MAX_TASKS];
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(boot->allgather(boot, &parked, all, sizeof parked) == TORX_OK, "allgather");
    uint64_t total = 0;
    for (int i = 0; i < boot->size; i++)
        total += all[i];
    if (boot->rank == 0)
        fprintf(stderr, "mix: %llu adaptive packets came early and were parked\n",
                (unsigned long long)total);
    TASK_CHECK(total > 0, "no adaptive packet ever came out of order");
    free(msgs);
    free(mx->pattern);
    free(mx);
    return 0;
}

#endif
