/* Traffic and hop-bytes (include/torx/map.h, TORX_STATS in <torx/msg.h>):
 *  - torus hops with wraparound, table-driven;
 *  - hop-bytes of a matrix worked out by hand;
 *  - the traffic-matrix reader on good and bad files (file:line: reason);
 *  - torx_map_from_coords and the optimizer (valid, never worse than the
 *    orders, optimal on a ring, deterministic, vn mode);
 *  - jobs: the per-destination counters count every protocol's messages
 *    once (against torx_stats and against what was sent), and
 *    TORX_STATS_FILE collects the job's matrix. */
#include "harness.h"

#include <torx/map.h>
#include <torx/msg.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmp_path[64];

static const char *write_tmp(const char *text)
{
    snprintf(tmp_path, sizeof tmp_path, "/tmp/torx-traffic-%d.txt", (int)getpid());
    FILE *f = fopen(tmp_path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
    return tmp_path;
}

/* ---- Hops ------------------------------------------------------------------------ */

START_TEST(hops_wrap_around)
{
    static const struct {
        torx_shape_t shape;
        torx_coord_t a, b;
        unsigned hops;
    } cases[] = {
        {{5, 1, 1, 1}, {0, 0, 0, 0}, {4, 0, 0, 0}, 1}, /* the wraparound link */
        {{5, 1, 1, 1}, {0, 0, 0, 0}, {2, 0, 0, 0}, 2},
        {{5, 1, 1, 1}, {1, 0, 0, 0}, {4, 0, 0, 0}, 2}, /* 3 forward, 2 back */
        {{4, 1, 1, 1}, {0, 0, 0, 0}, {2, 0, 0, 0}, 2}, /* halfway: either way */
        {{4, 1, 1, 1}, {3, 0, 0, 0}, {0, 0, 0, 0}, 1},
        {{2, 2, 2, 1}, {0, 0, 0, 0}, {1, 1, 1, 0}, 3},
        {{8, 4, 6, 1}, {0, 0, 0, 0}, {7, 3, 5, 0}, 3}, /* wraps in all three */
        {{8, 4, 6, 1}, {1, 1, 1, 0}, {5, 3, 4, 0}, 9}, /* 4 + 2 + 3: the longest */
        {{3, 3, 3, 2}, {1, 2, 0, 0}, {1, 2, 0, 1}, 0}, /* two tasks of one node */
        {{3, 3, 3, 2}, {0, 0, 0, 1}, {2, 2, 2, 0}, 3}, /* t does not count */
        {{1, 1, 1, 2}, {0, 0, 0, 0}, {0, 0, 0, 1}, 0},
        {{255, 1, 1, 1}, {0, 0, 0, 0}, {200, 0, 0, 0}, 55},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const torx_coord_t c[2] = {cases[i].a, cases[i].b};
        torx_map_t m;
        ck_assert_msg(torx_map_from_coords(c, cases[i].shape, 2, &m) == TORX_OK, "case %zu: %s", i,
                      torx_last_error());
        ck_assert_msg(torx_map_distance(&m, 0, 1) == cases[i].hops &&
                          torx_map_distance(&m, 1, 0) == cases[i].hops,
                      "case %zu: %u hops, expected %u", i, torx_map_distance(&m, 0, 1),
                      cases[i].hops);
        torx_map_free(&m);
    }
}
END_TEST

START_TEST(from_coords_checks)
{
    torx_map_t m;
    const torx_coord_t dup[3] = {{0, 0, 0, 0}, {1, 0, 0, 0}, {1, 0, 0, 0}};
    ck_assert_int_eq(torx_map_from_coords(dup, (torx_shape_t){2, 1, 1, 1}, 3, &m), TORX_ERR_INVAL);
    ck_assert_int_eq(torx_map_from_coords(dup, (torx_shape_t){2, 2, 1, 1}, 3, &m), TORX_ERR_INVAL);
    ck_assert_ptr_nonnull(strstr(torx_last_error(), "rank 2 at (1,0,0,0): already used by rank 1"));
    ck_assert_ptr_null(m.coord);
    const torx_coord_t out[2] = {{0, 0, 0, 0}, {0, 0, 0, 1}};
    ck_assert_int_eq(torx_map_from_coords(out, (torx_shape_t){2, 1, 1, 1}, 2, &m), TORX_ERR_INVAL);
    ck_assert_ptr_nonnull(strstr(torx_last_error(), "rank 1 at (0,0,0,1) is outside the torus"));
    ck_assert_int_eq(torx_map_from_coords(out, (torx_shape_t){2, 1, 1, 2}, 2, &m), TORX_OK);
    ck_assert_int_eq(torx_map_rank(&m, (torx_coord_t){0, 0, 0, 1}), 1);
    torx_map_free(&m);
}
END_TEST

/* ---- Hop-bytes --------------------------------------------------------------------- */

/* 4 ranks in XYZT order on a 4x1x1 ring: rank r at x = r. Hops: |i-j|
 * with 0-3 wrapping to 1. */
START_TEST(hop_bytes_known_matrix)
{
    const char *path = write_tmp("# hand-made\n"
                                 "0 5 10 20 40\n"
                                 "2 1 2 0 8\n"
                                 "\n"
                                 "1 100 0 0 0\r\n"
                                 "3 0 0 1000 7\n");
    torx_traffic_t t;
    ck_assert_msg(torx_traffic_read(path, &t) == TORX_OK, "%s", torx_last_error());
    ck_assert_int_eq(t.ntasks, 4);
    ck_assert_uint_eq(t.bytes[0 * 4 + 3], 40);
    ck_assert_uint_eq(t.bytes[2 * 4 + 3], 8);
    ck_assert_uint_eq(t.bytes[1 * 4 + 0], 100);
    torx_map_t m;
    ck_assert_int_eq(torx_map_from_order("XYZT", (torx_shape_t){4, 1, 1, 1}, 4, &m), TORX_OK);
    /* row 0: 5*0 + 10*1 + 20*2 + 40*1 = 90; row 1: 100*1 = 100;
     * row 2: 1*2 + 2*1 + 0 + 8*1 = 12; row 3: 1000*1 + 7*0 = 1000. */
    torx_hop_bytes_t hb;
    ck_assert_int_eq(torx_map_hop_bytes_row(&m, 0, t.bytes, &hb), TORX_OK);
    ck_assert_uint_eq(hb.hop_bytes, 90);
    ck_assert_uint_eq(hb.bytes, 75);
    ck_assert_uint_eq(hb.local_bytes, 5);
    ck_assert_int_eq(torx_map_hop_bytes(&m, &t, &hb), TORX_OK);
    ck_assert_uint_eq(hb.hop_bytes, 90 + 100 + 12 + 1000);
    ck_assert_uint_eq(hb.bytes, 75 + 100 + 11 + 1007);
    ck_assert_uint_eq(hb.local_bytes, 5 + 7);
    ck_assert(torx_hops_per_byte(&hb) > 1.0075 && torx_hops_per_byte(&hb) < 1.0076);
    torx_map_free(&m);

    /* The same traffic on 2x2x1 in TXYZ with 2 tasks per node: ranks 0,1
     * share node (0,0), ranks 2,3 share (1,0); every pair across is 1 hop. */
    ck_assert_int_eq(torx_map_from_order("TXYZ", (torx_shape_t){2, 2, 1, 2}, 4, &m), TORX_OK);
    ck_assert_int_eq(torx_map_hop_bytes(&m, &t, &hb), TORX_OK);
    ck_assert_uint_eq(hb.hop_bytes, (20 + 40) + 0 + (1 + 2) + 0);
    ck_assert_uint_eq(hb.local_bytes, (5 + 10) + 100 + 8 + (1000 + 7));
    torx_map_free(&m);

    /* A map of another size, a rank outside the map. */
    ck_assert_int_eq(torx_map_from_order("XYZT", (torx_shape_t){4, 1, 1, 1}, 3, &m), TORX_OK);
    ck_assert_int_eq(torx_map_hop_bytes(&m, &t, &hb), TORX_ERR_INVAL);
    ck_assert_ptr_nonnull(strstr(torx_last_error(), "4 ranks against a map of 3"));
    ck_assert_int_eq(torx_map_hop_bytes_row(&m, 3, t.bytes, &hb), TORX_ERR_INVAL);
    torx_map_free(&m);
    torx_traffic_free(&t);
    unlink(path);
}
END_TEST

START_TEST(hop_bytes_overflow)
{
    const char *path = write_tmp("0 0 9223372036854775808\n1 0 0\n");
    torx_traffic_t t;
    ck_assert_msg(torx_traffic_read(path, &t) == TORX_OK, "%s", torx_last_error());
    torx_map_t m;
    ck_assert_int_eq(torx_map_from_order("XYZT", (torx_shape_t){2, 1, 1, 1}, 2, &m), TORX_OK);
    torx_hop_bytes_t hb;
    ck_assert_int_eq(torx_map_hop_bytes(&m, &t, &hb), TORX_OK); /* 2^63 x 1 hop fits */
    ck_assert_uint_eq(hb.hop_bytes, 9223372036854775808ull);
    torx_map_free(&m);
    const torx_coord_t far[2] = {{0, 0, 0, 0}, {0, 2, 0, 0}}; /* 2 hops: 2^64 */
    ck_assert_int_eq(torx_map_from_coords(far, (torx_shape_t){1, 4, 1, 1}, 2, &m), TORX_OK);
    ck_assert_int_eq(torx_map_hop_bytes(&m, &t, &hb), TORX_ERR_INVAL);
    ck_assert_ptr_nonnull(strstr(torx_last_error(), "exceed 2^64-1"));
    torx_map_free(&m);
    torx_traffic_free(&t);
    unlink(path);

    /* The optimizer skips maps whose hop-bytes overflow: 3 ranks on 5x1x1
     * with 2 tasks per node, 2^63 bytes from rank 0 to rank 2. XYZT puts
     * them 2 hops apart (2^64: too many); TXYZ 1 hop. */
    torx_traffic_t big = {.ntasks = 3, .bytes = calloc(9, sizeof(uint64_t))};
    ck_assert_ptr_nonnull(big.bytes);
    big.bytes[0 * 3 + 2] = 1ull << 63;
    torx_map_opt_report_t rep;
    ck_assert_msg(torx_map_optimize(&big, (torx_shape_t){5, 1, 1, 2}, NULL, &m, &rep) == TORX_OK,
                  "%s", torx_last_error());
    ck_assert_uint_eq(rep.xyzt.hop_bytes, UINT64_MAX);
    ck_assert_uint_le(rep.result.hop_bytes, 1ull << 63);
    ck_assert_int_eq(torx_map_hop_bytes(&m, &big, &hb), TORX_OK);
    ck_assert_uint_eq(hb.hop_bytes, rep.result.hop_bytes);
    torx_map_free(&m);
    /* 2^63 bytes each way: 2^64 bytes, too many under any map. */
    big.bytes[0 * 3 + 2] = 0;
    big.bytes[0 * 3 + 1] = big.bytes[1 * 3 + 0] = 1ull << 63;
    ck_assert_int_eq(torx_map_optimize(&big, (torx_shape_t){4, 1, 1, 1}, NULL, &m, &rep),
                     TORX_ERR_INVAL);
    ck_assert_ptr_nonnull(strstr(torx_last_error(), "exceed 2^64-1"));
    ck_assert_ptr_null(m.coord);
    torx_traffic_free(&big);
}
END_TEST

/* ---- The reader on bad files ------------------------------------------------------ */

START_TEST(traffic_bad_files)
{
    static const struct {
        const char *text, *where, *reason;
    } cases[] = {
        {"0 1 2\n1 3 4 5\n", ":2:",
         "expected 3 fields (the source rank, then the bytes to each "
         "of 2 ranks, as the first row has), found 4"},
        {"0 1 2 3\n1 3 4\n2 0 0 0\n", ":2:", "expected 4 fields"},
        {"0 1 -2\n1 0 0\n", ":1:", "'-2' is negative"},
        {"0 0 0\n1 0 x7\n", ":2:", "'x7' is not a number"},
        {"0 0 0\n1 0 1.5\n", ":2:", "'1.5' is not a number"},
        {"0 0 18446744073709551616\n1 0 0\n", ":1:", "is too large for a byte count"},
        {"0 1 2 3\n1 4 5 6\n2 7 8", ":3:", "the file ends inside this line (cut short?)"},
        {"0 1 2 3\n1 4 5 6\n", ":2:", "rows for 2 of the 3 ranks; no row for rank 2"},
        {"# x\n2 1 2 3\n\n", ":3:", "rows for 1 of the 3 ranks; no row for ranks 0, 1"},
        {"0 1 2\n0 3 4\n", ":2:", "rank 0 already has a row, on line 1"},
        {"0 1 2\n2 3 4\n", ":2:", "source rank 2 is not in the job (0..1"},
        {"-1 1 2\n", ":1:", "'-1' is negative: a source rank"},
        {"7\n", ":1:", "expected the source rank and the bytes to each rank, found 1 field"},
        {"0 1 2 # two ranks\n1 0 0\n", ":1:", "a comment must be on a line of its own"},
        {"0 1 2\n1 0 0 #\n", ":2:", "a comment must be on a line of its own"},
        {"", "", ": no rows (the file is empty)"},
        {"# only\n\n", "", ": no rows (only blank and comment lines)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *path = write_tmp(cases[i].text);
        torx_traffic_t t;
        ck_assert_msg(torx_traffic_read(path, &t) == TORX_ERR_INVAL, "case %zu accepted", i);
        ck_assert_ptr_null(t.bytes);
        char want[128];
        snprintf(want, sizeof want, "%s%s", path, cases[i].where);
        ck_assert_msg(strstr(torx_last_error(), want) && strstr(torx_last_error(), cases[i].reason),
                      "case %zu: '%s' lacks '%s' or '%s'", i, torx_last_error(), want,
                      cases[i].reason);
        unlink(path);
    }
    torx_traffic_t t;
    ck_assert_int_eq(torx_traffic_read("/nonexistent/traffic.txt", &t), TORX_ERR_INVAL);
    ck_assert_ptr_nonnull(strstr(torx_last_error(), "/nonexistent/traffic.txt: cannot open the "
                                                    "traffic matrix: No such file"));
}
END_TEST

/* ---- The optimizer -------------------------------------------------------------------- */

/* A matrix of n ranks with bytes w between ring neighbours i, i+1 (both
 * ways), plus extra[] pairs. */
static void ring_traffic(torx_traffic_t *t, int n, uint64_t w)
{
    t->ntasks = n;
    t->bytes = calloc((size_t)n * n, sizeof *t->bytes);
    ck_assert_ptr_nonnull(t->bytes);
    for (int i = 0; i < n; i++) {
        t->bytes[(size_t)i * n + (i + 1) % n] += w;
        t->bytes[(size_t)((i + 1) % n) * n + i] += w;
    }
}

/* The optimizer's map passes the mapping-file checks: written, then read
 * back as a job reads TORX_MAPPING. */
static void check_valid_file(const torx_map_t *m)
{
    snprintf(tmp_path, sizeof tmp_path, "/tmp/torx-opt-%d.map", (int)getpid());
    FILE *f = fopen(tmp_path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(torx_map_write(m, f), TORX_OK);
    ck_assert_int_eq(fclose(f), 0);
    torx_map_t back;
    ck_assert_msg(torx_map_from_file(tmp_path, m->shape, m->ntasks, &back) == TORX_OK, "%s",
                  torx_last_error());
    for (int r = 0; r < m->ntasks; r++)
        ck_assert(torx_coord_equal(back.coord[r], m->coord[r]));
    torx_map_free(&back);
    unlink(tmp_path);
}

START_TEST(optimize_ring_is_optimal)
{
    /* A ring of 8 on 2x2x2: XYZT puts 3 -> 4 and 7 -> 0 three hops apart;
     * a Gray-code fold makes every ring step one hop. */
    torx_traffic_t t;
    ring_traffic(&t, 8, 1000);
    torx_map_t m;
    torx_map_opt_report_t rep;
    ck_assert_msg(torx_map_optimize(&t, (torx_shape_t){2, 2, 2, 1}, NULL, &m, &rep) == TORX_OK,
                  "%s", torx_last_error());
    ck_assert_uint_eq(rep.xyzt.hop_bytes, 28000);
    ck_assert_uint_eq(rep.result.hop_bytes, 16000);
    torx_hop_bytes_t hb;
    ck_assert_int_eq(torx_map_hop_bytes(&m, &t, &hb), TORX_OK);
    ck_assert_uint_eq(hb.hop_bytes, 16000);
    for (int i = 0; i < 8; i++)
        ck_assert_uint_eq(torx_map_distance(&m, i, (i + 1) % 8), 1);
    check_valid_file(&m);
    torx_map_free(&m);
    torx_traffic_free(&t);
}
END_TEST

START_TEST(optimize_valid_and_deterministic)
{
    /* Shapes and sizes: jobs that fill the torus or not, vn with t > 1. */
    static const struct {
        torx_shape_t shape;
        int n;
    } cases[] = {
        {{4, 2, 2, 1}, 16}, {{4, 4, 4, 1}, 37}, {{3, 3, 1, 2}, 18},
        {{2, 2, 2, 2}, 11}, {{5, 3, 1, 4}, 60}, {{1, 1, 1, 1}, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int n = cases[c].n;
        torx_traffic_t t = {.ntasks = n, .bytes = calloc((size_t)n * n, sizeof(uint64_t))};
        ck_assert_ptr_nonnull(t.bytes);
        uint64_t x = 12345 + c;
        for (int i = 0; i < 4 * n; i++) { /* sparse, lopsided */
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            const int a = (int)((x >> 33) % (uint64_t)n), b = (int)((x >> 13) % (uint64_t)n);
            t.bytes[(size_t)a * n + b] += (x >> 40) % 100000;
        }
        const torx_map_opt_attr_t attr = {.seed = 42, .moves = 30000};
        torx_map_t m, m2;
        torx_map_opt_report_t rep, rep2;
        ck_assert_msg(torx_map_optimize(&t, cases[c].shape, &attr, &m, &rep) == TORX_OK,
                      "case %zu: %s", c, torx_last_error());
        ck_assert_int_eq(m.ntasks, n);
        ck_assert_uint_le(rep.result.hop_bytes, rep.order.hop_bytes);
        ck_assert_uint_le(rep.order.hop_bytes, rep.xyzt.hop_bytes);
        torx_hop_bytes_t hb;
        ck_assert_int_eq(torx_map_hop_bytes(&m, &t, &hb), TORX_OK);
        ck_assert_uint_eq(hb.hop_bytes, rep.result.hop_bytes);
        check_valid_file(&m);
        ck_assert_int_eq(torx_map_optimize(&t, cases[c].shape, &attr, &m2, &rep2), TORX_OK);
        for (int r = 0; r < n; r++)
            ck_assert_msg(torx_coord_equal(m.coord[r], m2.coord[r]),
                          "case %zu: same seed, "
                          "another map",
                          c);
        torx_map_free(&m);
        torx_map_free(&m2);
        torx_traffic_free(&t);
    }
    /* A job that does not fit. */
    torx_traffic_t t;
    ring_traffic(&t, 9, 1);
    torx_map_t m;
    ck_assert_int_eq(torx_map_optimize(&t, (torx_shape_t){2, 2, 2, 1}, NULL, &m, NULL),
                     TORX_ERR_INVAL);
    ck_assert_ptr_nonnull(strstr(torx_last_error(), "do not fit the torus 2x2x2"));
    torx_traffic_free(&t);
}
END_TEST

/* ---- Jobs: the counters ------------------------------------------------------------- */

#define NTASKS 4
#define STATS_HANDLER 9
#define NSIZES 6
#define BIG 40000 /* above the default eager limit: rendezvous */

typedef struct variant {
    const char *name;
    const char *mode, *mapping, *stage_min, *adaptive;
    torx_protocol_t want[4]; /* protocols that must have sent; AUTO ends */
} variant_t;

/* The bytes rank s sends to rank d in message k: sizes that take every
 * protocol of the variant, different per pair so a misplaced count shows. */
static size_t msg_len(int k, int s, int d)
{
    static const size_t base[NSIZES] = {24, 200, 1000, 1500, 5000, BIG};
    return base[k] + (size_t)(7 * s + 3 * d);
}

static uint64_t expected(int s, int d)
{
    uint64_t sum = 0;
    if (s == d)
        return 0;
    for (int k = 0; k < NSIZES; k++)
        sum += msg_len(k, s, d);
    return sum + 40 + (uint64_t)s; /* and one torx_send_inject */
}

typedef struct {
    int received;
    int sent;
} job_state_t;

static uint8_t scratch[BIG + 256];

static void count_recv(torx_ctx_t *ctx, void *arg, torx_status_t status, size_t received)
{
    (void)ctx;
    (void)status;
    (void)received;
    ((job_state_t *)arg)->received++;
}

static void stats_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                          torx_recv_t *recv)
{
    (void)ctx;
    recv->buf = scratch; /* the data is not checked here: test_msg does that */
    recv->len = info->data_len;
    recv->done = count_recv;
    recv->arg = harg;
}

static void count_sent(torx_ctx_t *ctx, torx_msg_t *msg, void *arg)
{
    (void)ctx;
    (void)msg;
    ((job_state_t *)arg)->sent++;
}

static int stats_task(torx_boot_t *boot, void *argp)
{
    const variant_t *v = argp;
    torx_ctx_t *ctx;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    const uint64_t *row = torx_stats_bytes_to(ctx);
    TASK_CHECK(row != NULL, "TORX_STATS_FILE is set, yet no counters");
    job_state_t st = {0};
    TASK_CHECK(torx_register(ctx, STATS_HANDLER, stats_handler, &st) == TORX_OK, "register");
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    static uint8_t data[BIG + 256];
    static torx_msg_t msgs[NTASKS][NSIZES];
    const int me = boot->rank;
    int nsend = 0;
    for (int d = 0; d < NTASKS; d++) {
        if (d == me)
            continue;
        /* The rendezvous first, the adaptive ones early: the small ones
         * behind them may then wait in the queue (the queued one-packet
         * push), as well as go at once. */
        for (int k = NSIZES - 1; k >= 0; k--) {
            const uint32_t hdr = (uint32_t)k;
            TASK_CHECK(torx_send(ctx, &msgs[d][k], d, STATS_HANDLER, &hdr, sizeof hdr, data,
                                 msg_len(k, me, d), TORX_PROTO_AUTO, count_sent, &st) == TORX_OK,
                       "send: %s", torx_last_error());
            nsend++;
        }
        /* And one through the inject-only path. */
        torx_status_t rc;
        while ((rc = torx_send_inject(ctx, d, STATS_HANDLER, NULL, 0, data, 40 + (size_t)me)) ==
               TORX_AGAIN)
            TASK_CHECK(torx_advance(ctx) >= 0, "advance: %s", torx_last_error());
        TASK_CHECK(rc == TORX_OK, "inject: %s", torx_last_error());
    }
    const int nrecv = (NTASKS - 1) * (NSIZES + 1);
    const double deadline = test_now() + 60;
    unsigned spins = 0;
    while ((st.sent < nsend || st.received < nrecv) && test_now() < deadline) {
        TASK_CHECK(torx_advance(ctx) >= 0, "advance: %s", torx_last_error());
        test_relax(&spins);
    }
    TASK_CHECK(st.sent == nsend && st.received == nrecv, "sent %d/%d received %d/%d", st.sent,
               nsend, st.received, nrecv);

    /* Each destination's bytes, and the same total as the protocols'. */
    uint64_t total = 0;
    for (int d = 0; d < NTASKS; d++) {
        TASK_CHECK(row[d] == expected(me, d), "%s: rank %d counted %llu bytes to %d, sent %llu",
                   v->name, me, (unsigned long long)row[d], d, (unsigned long long)expected(me, d));
        total += row[d];
    }
    torx_proto_stats_t ps[TORX_PROTO_COUNT];
    torx_stats(ctx, ps);
    uint64_t by_proto = 0;
    for (int p = 0; p < TORX_PROTO_COUNT; p++)
        by_proto += ps[p].bytes_sent;
    TASK_CHECK(by_proto == total, "%s: the protocols counted %llu bytes, the destinations %llu",
               v->name, (unsigned long long)by_proto, (unsigned long long)total);
    for (int i = 0; i < 4 && v->want[i] != TORX_PROTO_AUTO; i++)
        TASK_CHECK(ps[v->want[i]].sent > 0, "%s: no %s message: the variant misses its point",
                   v->name, torx_protocol_name(v->want[i]));
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    return 0;
}

static void set_or_unset(const char *name, const char *value)
{
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
}

static const variant_t variants[] = {
    {"heater, staged eager",
     NULL,
     NULL,
     NULL,
     NULL,
     {TORX_PROTO_ONEPKT, TORX_PROTO_EAGER, TORX_PROTO_RZV, TORX_PROTO_AUTO}},
    {"heater, plain eager and adaptive",
     NULL,
     NULL,
     "0",
     "1200",
     {TORX_PROTO_ONEPKT, TORX_PROTO_EAGER, TORX_PROTO_ADAPTIVE, TORX_PROTO_RZV}},
    {"co",
     "co",
     NULL,
     NULL,
     NULL,
     {TORX_PROTO_ONEPKT, TORX_PROTO_EAGER, TORX_PROTO_RZV, TORX_PROTO_AUTO}},
    {"vn TXYZ",
     "vn",
     "TXYZ",
     NULL,
     NULL,
     {TORX_PROTO_ONEPKT, TORX_PROTO_VN, TORX_PROTO_EAGER, TORX_PROTO_RZV}},
    {"vn TXYZ, no staging",
     "vn",
     "TXYZ",
     "0",
     NULL,
     {TORX_PROTO_VN, TORX_PROTO_EAGER, TORX_PROTO_RZV, TORX_PROTO_AUTO}},
};

START_TEST(stats_count_bytes_per_destination)
{
    const variant_t *v = &variants[_i];
    char path[64];
    snprintf(path, sizeof path, "/tmp/torx-stats-%d.txt", (int)getpid());
    /* A stale file: rank 0 empties it at init, so its rows do not count. */
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("0 1 1 1 1\n", f);
    fclose(f);
    setenv("TORX_STATS_FILE", path, 1);
    set_or_unset("TORX_MODE", v->mode);
    set_or_unset("TORX_MAPPING", v->mapping);
    set_or_unset("TORX_STAGE_MIN", v->stage_min);
    set_or_unset("TORX_ADAPTIVE_LIMIT", v->adaptive);
    /* Every protocol a variant names must carry bytes: no idle pair's
     * message may leave the rendezvous for the staging area. */
    setenv("TORX_EAGER_IDLE_LIMIT", "0", 1);
    setenv("TORX_STAGE_COST_MAX", "65535", 1);
    unsetenv("TORX_TORUS");
    RUN_JOB(NTASKS, stats_task, (void *)v);

    /* The job's matrix, as torx-map reads it. */
    torx_traffic_t t;
    ck_assert_msg(torx_traffic_read(path, &t) == TORX_OK, "%s", torx_last_error());
    ck_assert_int_eq(t.ntasks, NTASKS);
    for (int s = 0; s < NTASKS; s++)
        for (int d = 0; d < NTASKS; d++)
            ck_assert_uint_eq(t.bytes[s * NTASKS + d], expected(s, d));
    torx_traffic_free(&t);
    char line[256];
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    ck_assert_ptr_nonnull(strstr(line, "# torx traffic matrix (TORX_STATS_FILE)"));
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    ck_assert_ptr_nonnull(strstr(line, v->mapping ? "mapping TXYZ" : "mapping XYZT"));
    fclose(f);
    unlink(path);
    unsetenv("TORX_STATS_FILE");
    unsetenv("TORX_MODE");
    unsetenv("TORX_MAPPING");
    unsetenv("TORX_STAGE_MIN");
    unsetenv("TORX_ADAPTIVE_LIMIT");
    unsetenv("TORX_EAGER_IDLE_LIMIT");
    unsetenv("TORX_STAGE_COST_MAX");
}
END_TEST

static int off_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_ctx_t *ctx;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(torx_stats_bytes_to(ctx) == NULL, "counters without TORX_STATS");
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    return 0;
}

static int bad_file_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_ctx_t *ctx = NULL;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_ERR_ENV && !ctx, "a bad TORX_STATS_FILE passed");
    TASK_CHECK(strstr(torx_last_error(), "TORX_STATS_FILE='/nonexistent/dir/traffic'") &&
                   strstr(torx_last_error(), "No such file or directory"),
               "message: %s", torx_last_error());
    return 0;
}

START_TEST(stats_off_and_bad_file)
{
    unsetenv("TORX_STATS");
    unsetenv("TORX_STATS_FILE");
    RUN_JOB(2, off_task, NULL);
    setenv("TORX_STATS_FILE", "/nonexistent/dir/traffic", 1);
    RUN_JOB(2, bad_file_task, NULL);
    unsetenv("TORX_STATS_FILE");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("map_traffic");
    TCase *tc = tcase_create("offline");
    tcase_add_test(tc, hops_wrap_around);
    tcase_add_test(tc, from_coords_checks);
    tcase_add_test(tc, hop_bytes_known_matrix);
    tcase_add_test(tc, hop_bytes_overflow);
    tcase_add_test(tc, traffic_bad_files);
    tcase_add_test(tc, optimize_ring_is_optimal);
    tcase_add_test(tc, optimize_valid_and_deterministic);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    TCase *jobs = tcase_create("jobs");
    tcase_add_loop_test(jobs, stats_count_bytes_per_destination, 0,
                        (int)(sizeof variants / sizeof variants[0]));
    tcase_add_test(jobs, stats_off_and_bad_file);
    tcase_set_timeout(jobs, 120);
    suite_add_tcase(s, jobs);
    return test_run_suite(s);
}
