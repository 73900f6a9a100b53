/* The rendezvous data path's chooser (msg_path.c), table-driven: each row
 * is one combination of inputs and the answer the message layer must give
 * for it. See docs/message-layer.md#rendezvous-data-path. */
#include "msglayer/msg_internal.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

/* Sizes on either side of the boundaries: below TORXM_SLOW_RZV_MIN, from it
 * to TORXM_RZV_WAY_MIN, measured, and past the 32-bit stream offsets. */
#define SMALL 4096u
#define MID 16384u
#define LONG (1u << 20)
#define HUGE (TORXM_STREAM_MAX + 1)
#define MAX 150u /* TORX_STAGE_COST_MAX's default; a staged rendezvous: 150 / 4 * 3 = 111 */

#define AUTO TORX_RZV_DATA_AUTO
#define BULKS TORX_RZV_DATA_BULK
#define PKTS TORX_RZV_DATA_PACKETS
#define STAGES TORX_RZV_DATA_STAGED

#define B TORXM_PATH_BULK
#define S TORXM_PATH_STAGED
#define P TORXM_PATH_PACKETS
#define NONE TORXM_WAY_NONE

#define FS TORXM_SCOUT_STAGED
#define FP TORXM_SCOUT_PACKETS
#define FPR TORXM_SCOUT_PROBE

typedef struct row {
    const char *what;
    /* inputs */
    unsigned ask, setting, rzv, co_net, over, staged, way_host, leads;
    int way;
    unsigned flags, hold, probe_due, bulk_cost, copy_cost;
    uint64_t len;
    /* the answer */
    unsigned path, probe, count;
    int set_hold;
    unsigned way_open;
} row_t;

/* clang-format off */
static const row_t rows[] = {
    /* what                                   ask                setting rzv co ovr stg wh ld way  flags     hold due bulk copy len    path prb cnt hold open */
    /* the sender's scout */
    {"scout packets",                         TORXM_ASK_SCOUT,   PKTS,   1, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 300, 500, LONG,  P, 0, 0, -1, 0},
    {"scout packets, vn: bulk",               TORXM_ASK_SCOUT,   PKTS,   0, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 300, 500, LONG,  B, 0, 0, -1, 0},
    {"scout packets past 32 bits: bulk",      TORXM_ASK_SCOUT,   PKTS,   1, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 300, 0,   HUGE,  B, 0, 0, -1, 0},
    {"scout bulk",                            TORXM_ASK_SCOUT,   BULKS,  1, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 300, 0,   LONG,  B, 0, 0, -1, 0},
    {"scout auto, area out of reach",         TORXM_ASK_SCOUT,   AUTO,   1, 0, 0, 0, 0, 1, NONE, 0,        0, 0, 300, 0,   MID,   B, 0, 0, -1, 0},
    {"scout auto, co mode",                   TORXM_ASK_SCOUT,   AUTO,   1, 1, 0, 1, 1, 1, NONE, 0,        0, 0, 300, 0,   LONG,  B, 0, 0, -1, 0},
    {"scout auto past 32 bits",               TORXM_ASK_SCOUT,   AUTO,   1, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 300, 0,   HUGE,  B, 0, 0, -1, 0},
    {"scout staged",                          TORXM_ASK_SCOUT,   STAGES, 1, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 0,   0,   MID,   S, 0, 0, -1, 0},
    {"scout staged, slow copies",             TORXM_ASK_SCOUT,   STAGES, 1, 0, 0, 1, 0, 1, NONE, 0,        0, 0, 0,   500, MID,   S, 0, 0, -1, 0},
    {"scout staged, co mode",                 TORXM_ASK_SCOUT,   STAGES, 1, 1, 0, 1, 1, 1, NONE, 0,        0, 0, 0,   0,   MID,   B, 0, 0, -1, 0},
    {"scout staged, vn",                      TORXM_ASK_SCOUT,   STAGES, 0, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 0,   0,   MID,   S, 0, 0, -1, 0},
    {"scout measured, follower",              TORXM_ASK_SCOUT,   AUTO,   1, 0, 0, 1, 1, 0, NONE, 0,        0, 0, 100, 500, LONG,  S, 0, 0, -1, 0},
    {"scout measured, leader, way bulk",      TORXM_ASK_SCOUT,   AUTO,   1, 0, 0, 1, 1, 1, B,    0,        0, 0, 300, 0,   LONG,  B, 0, 0, -1, 0},
    {"scout measured, leader, way staged",    TORXM_ASK_SCOUT,   AUTO,   1, 0, 0, 1, 1, 1, S,    0,        0, 0, 100, 500, LONG,  S, 0, 0, -1, 0},
    {"scout measured at 64 KiB",              TORXM_ASK_SCOUT,   AUTO,   1, 0, 0, 1, 1, 1, B,    0,        0, 0, 300, 0,   65536, B, 0, 0, -1, 0},
    {"scout measured, no record, cost 300",   TORXM_ASK_SCOUT,   AUTO,   1, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 300, 500, LONG,  S, 0, 0, -1, 1},
    {"scout measured, no record, cost 150",   TORXM_ASK_SCOUT,   AUTO,   1, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 150, 0,   LONG,  B, 0, 0, -1, 1},
    {"scout short, copies fast",              TORXM_ASK_SCOUT,   AUTO,   1, 0, 0, 1, 1, 1, B,    0,        0, 0, 100, 100, MID,   S, 0, 0, 0,  0},
    {"scout short, copies at 3/4 of max",     TORXM_ASK_SCOUT,   AUTO,   1, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 100, 111, MID,   S, 0, 0, 0,  0},
    {"scout short, copies slow",              TORXM_ASK_SCOUT,   AUTO,   1, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 300, 112, MID,   B, 0, 1, 1,  0},
    {"scout short, copies slow, probe",       TORXM_ASK_SCOUT,   AUTO,   1, 0, 0, 1, 1, 1, NONE, 0,        0, 1, 300, 112, MID,   S, 1, 1, 1,  0},
    {"scout short, vn, copies slow",          TORXM_ASK_SCOUT,   AUTO,   0, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 300, 500, MID,   B, 0, 1, 1,  0},
    {"scout oversubscribed: not slow",        TORXM_ASK_SCOUT,   AUTO,   1, 0, 1, 1, 1, 1, NONE, 0,        0, 0, 300, 500, MID,   S, 0, 0, 0,  0},
    {"scout oversubscribed, long: unmeasured",TORXM_ASK_SCOUT,   AUTO,   1, 0, 1, 1, 1, 1, B,    0,        0, 0, 300, 0,   LONG,  S, 0, 0, 0,  0},
    {"scout long, bulk unmeasured, slow",     TORXM_ASK_SCOUT,   AUTO,   1, 0, 0, 1, 0, 1, NONE, 0,        0, 0, 0,   500, LONG,  B, 0, 1, 1,  0},
    {"scout long, bulk unmeasured, fast",     TORXM_ASK_SCOUT,   AUTO,   1, 0, 0, 1, 0, 1, NONE, 0,        0, 0, 0,   0,   LONG,  S, 0, 0, 0,  0},
    /* the receiver of a scout */
    {"take no offer",                         TORXM_ASK_TAKE,    AUTO,   1, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 300, 0,   MID,   B, 0, 0, -1, 0},
    {"take packets",                          TORXM_ASK_TAKE,    PKTS,   1, 0, 0, 1, 1, 1, NONE, FP,       0, 0, 300, 0,   MID,   P, 0, 0, -1, 0},
    {"take offer, cost 300",                  TORXM_ASK_TAKE,    AUTO,   1, 0, 0, 1, 1, 1, NONE, FS,       0, 0, 300, 500, MID,   S, 0, 0, -1, 0},
    {"take offer, cost 200",                  TORXM_ASK_TAKE,    AUTO,   1, 0, 0, 1, 1, 1, NONE, FS,       0, 0, 200, 0,   MID,   B, 0, 0, -1, 0},
    {"take offer, cost 201",                  TORXM_ASK_TAKE,    AUTO,   1, 0, 0, 1, 1, 1, NONE, FS,       0, 0, 201, 0,   MID,   S, 0, 0, -1, 0},
    {"take offer, held",                      TORXM_ASK_TAKE,    AUTO,   1, 0, 0, 1, 1, 1, NONE, FS,       1, 0, 300, 0,   MID,   B, 0, 0, -1, 0},
    {"take probe, held",                      TORXM_ASK_TAKE,    AUTO,   1, 0, 0, 1, 1, 1, NONE, FS | FPR, 1, 0, 300, 0,   MID,   S, 0, 0, -1, 0},
    {"take probe, held, cost 100",            TORXM_ASK_TAKE,    AUTO,   1, 0, 0, 1, 1, 1, NONE, FS | FPR, 1, 0, 100, 0,   MID,   B, 0, 0, -1, 0},
    {"take offer, staged",                    TORXM_ASK_TAKE,    STAGES, 1, 0, 0, 1, 1, 1, NONE, FS,       0, 0, 0,   0,   MID,   S, 0, 0, -1, 0},
    {"take offer, staged, held",              TORXM_ASK_TAKE,    STAGES, 1, 0, 0, 1, 1, 1, NONE, FS,       1, 0, 0,   0,   MID,   B, 0, 0, -1, 0},
    {"take offer, staged, co mode",           TORXM_ASK_TAKE,    STAGES, 1, 1, 0, 1, 1, 1, NONE, FS,       0, 0, 300, 0,   MID,   B, 0, 0, -1, 0},
    {"take offer, oversubscribed",            TORXM_ASK_TAKE,    AUTO,   1, 0, 1, 1, 1, 1, NONE, FS,       0, 0, 300, 0,   LONG,  B, 0, 0, -1, 0},
    {"take offer, bulk",                      TORXM_ASK_TAKE,    BULKS,  1, 0, 0, 1, 1, 1, NONE, FS,       0, 0, 300, 0,   MID,   B, 0, 0, -1, 0},
    {"take measured, follower, held",         TORXM_ASK_TAKE,    AUTO,   1, 0, 0, 1, 1, 0, NONE, FS,       1, 0, 100, 0,   LONG,  S, 0, 0, -1, 0},
    {"take measured, leader, way bulk",       TORXM_ASK_TAKE,    AUTO,   1, 0, 0, 1, 1, 1, B,    FS,       0, 0, 300, 0,   LONG,  B, 0, 0, -1, 0},
    {"take measured, leader, way staged held",TORXM_ASK_TAKE,    AUTO,   1, 0, 0, 1, 1, 1, S,    FS,       1, 0, 100, 0,   LONG,  S, 0, 0, -1, 0},
    {"take measured, no record, cost 300",    TORXM_ASK_TAKE,    AUTO,   1, 0, 0, 1, 1, 1, NONE, FS,       0, 0, 300, 0,   LONG,  S, 0, 0, -1, 1},
    {"take measured, no offer: no record",    TORXM_ASK_TAKE,    AUTO,   1, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 300, 0,   LONG,  B, 0, 0, -1, 0},
    {"take packets and offer, declined",      TORXM_ASK_TAKE,    AUTO,   1, 0, 0, 1, 1, 1, NONE, FS | FP,  0, 0, 100, 0,   MID,   P, 0, 0, -1, 0},
    {"take packets and offer, taken",         TORXM_ASK_TAKE,    AUTO,   1, 0, 0, 1, 1, 1, NONE, FS | FP,  0, 0, 300, 0,   MID,   S, 0, 0, -1, 0},
    /* the default way: the bulk-cost line */
    {"default auto, cost 201",                TORXM_ASK_DEFAULT, AUTO,   1, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 201, 0,   0,     S, 0, 0, -1, 0},
    {"default auto, cost 200",                TORXM_ASK_DEFAULT, AUTO,   1, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 200, 0,   0,     B, 0, 0, -1, 0},
    {"default auto, unmeasured",              TORXM_ASK_DEFAULT, AUTO,   1, 0, 0, 1, 0, 1, NONE, 0,        0, 0, 0,   0,   0,     B, 0, 0, -1, 0},
    {"default auto, oversubscribed",          TORXM_ASK_DEFAULT, AUTO,   1, 0, 1, 1, 1, 1, NONE, 0,        0, 0, 300, 0,   0,     B, 0, 0, -1, 0},
    {"default auto, co mode",                 TORXM_ASK_DEFAULT, AUTO,   1, 1, 0, 1, 1, 1, NONE, 0,        0, 0, 300, 0,   0,     B, 0, 0, -1, 0},
    {"default staged",                        TORXM_ASK_DEFAULT, STAGES, 1, 0, 1, 1, 1, 1, NONE, 0,        0, 0, 0,   0,   0,     S, 0, 0, -1, 0},
    {"default staged, co mode",               TORXM_ASK_DEFAULT, STAGES, 1, 1, 0, 1, 1, 1, NONE, 0,        0, 0, 0,   0,   0,     B, 0, 0, -1, 0},
    {"default bulk",                          TORXM_ASK_DEFAULT, BULKS,  1, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 300, 0,   0,     B, 0, 0, -1, 0},
    {"default packets",                       TORXM_ASK_DEFAULT, PKTS,   1, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 300, 0,   0,     B, 0, 0, -1, 0},
    /* the measured way */
    {"way follower",                          TORXM_ASK_WAY,     AUTO,   1, 0, 0, 1, 1, 0, B,    0,        0, 0, 100, 0,   LONG,  S, 0, 0, -1, 0},
    {"way leader, no record, cost 300",       TORXM_ASK_WAY,     AUTO,   1, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 300, 0,   LONG,  S, 0, 0, -1, 1},
    {"way leader, no record, cost 100",       TORXM_ASK_WAY,     AUTO,   1, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 100, 0,   LONG,  B, 0, 0, -1, 1},
    {"way leader, staged",                    TORXM_ASK_WAY,     AUTO,   1, 0, 0, 1, 1, 1, S,    0,        0, 0, 100, 0,   LONG,  S, 0, 0, -1, 0},
    {"way leader, bulk",                      TORXM_ASK_WAY,     AUTO,   1, 0, 0, 1, 1, 1, B,    0,        0, 0, 300, 0,   LONG,  B, 0, 0, -1, 0},
    /* an eager or vn message that would go staged */
    {"unstage below 8 KiB, slow",             TORXM_ASK_UNSTAGE, AUTO,   1, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 0,   500, 8191,  S, 0, 0, -1, 0},
    {"unstage 8 KiB, slow",                   TORXM_ASK_UNSTAGE, AUTO,   1, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 0,   151, 8192,  B, 0, 1, -1, 0},
    {"unstage 8 KiB, at max",                 TORXM_ASK_UNSTAGE, AUTO,   1, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 0,   150, 8192,  S, 0, 0, -1, 0},
    {"unstage 8 KiB, slow, probe",            TORXM_ASK_UNSTAGE, AUTO,   1, 0, 0, 1, 1, 1, NONE, 0,        0, 1, 0,   151, 8192,  S, 1, 1, -1, 0},
    {"unstage oversubscribed",                TORXM_ASK_UNSTAGE, AUTO,   1, 0, 1, 1, 1, 1, NONE, 0,        0, 0, 0,   500, MID,   S, 0, 0, -1, 0},
    {"unstage unmeasured",                    TORXM_ASK_UNSTAGE, AUTO,   1, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 0,   0,   MID,   S, 0, 0, -1, 0},
    {"unstage whatever TORX_RZV_DATA says",   TORXM_ASK_UNSTAGE, BULKS,  1, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 0,   151, MID,   B, 0, 1, -1, 0},
    /* a long message to an idle pair */
    {"idle, slow",                            TORXM_ASK_IDLE,    AUTO,   1, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 0,   151, 65536, B, 0, 1, -1, 0},
    {"idle, at max",                          TORXM_ASK_IDLE,    AUTO,   1, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 0,   150, 65536, S, 0, 0, -1, 0},
    {"idle, slow, probe",                     TORXM_ASK_IDLE,    AUTO,   1, 0, 0, 1, 1, 1, NONE, 0,        0, 1, 0,   151, 65536, S, 1, 1, -1, 0},
    {"idle, oversubscribed",                  TORXM_ASK_IDLE,    AUTO,   1, 0, 1, 1, 1, 1, NONE, 0,        0, 0, 0,   500, 65536, S, 0, 0, -1, 0},
    {"idle, short, slow",                     TORXM_ASK_IDLE,    AUTO,   1, 0, 0, 1, 1, 1, NONE, 0,        0, 0, 0,   500, SMALL, B, 0, 1, -1, 0},
};
/* clang-format on */
#define NROWS ((int)(sizeof rows / sizeof rows[0]))

static torxm_path_in_t row_input(const row_t *r)
{
    return (torxm_path_in_t){.ask = (uint8_t)r->ask,
                             .setting = (uint8_t)r->setting,
                             .rzv = (uint8_t)r->rzv,
                             .co_net = (uint8_t)r->co_net,
                             .oversubscribed = (uint8_t)r->over,
                             .staged = (uint8_t)r->staged,
                             .way_host = (uint8_t)r->way_host,
                             .leads = (uint8_t)r->leads,
                             .way = (int8_t)r->way,
                             .flags = (uint8_t)r->flags,
                             .hold = (uint8_t)r->hold,
                             .probe_due = (uint8_t)r->probe_due,
                             .bulk_cost = r->bulk_cost,
                             .copy_cost = r->copy_cost,
                             .copy_cost_max = MAX,
                             .len = r->len};
}

START_TEST(each_row_gets_its_answer)
{
    const row_t *r = &rows[_i];
    const torxm_path_in_t in = row_input(r);
    const torxm_path_out_t out = torxm_path_choose(&in);
    ck_assert_msg(out.path == r->path && out.probe == r->probe && out.count == r->count &&
                      out.hold == r->set_hold && out.way_open == r->way_open,
                  "row %d \"%s\": path %u probe %u count %u hold %d open %u; expected path %u "
                  "probe %u count %u hold %d open %u",
                  _i, r->what, out.path, out.probe, out.count, out.hold, out.way_open, r->path,
                  r->probe, r->count, r->set_hold, r->way_open);
    /* pure: the same inputs, the same answer */
    const torxm_path_out_t again = torxm_path_choose(&in);
    ck_assert(again.path == out.path && again.probe == out.probe && again.count == out.count &&
              again.hold == out.hold && again.way_open == out.way_open);
}
END_TEST

/* Every question is asked in the table, and every answer given. */
START_TEST(the_table_covers_every_question)
{
    unsigned asks = 0, paths = 0;
    for (int i = 0; i < NROWS; i++) {
        asks |= 1u << rows[i].ask;
        paths |= 1u << rows[i].path;
    }
    ck_assert_uint_eq(asks, (1u << (TORXM_ASK_IDLE + 1)) - 1);
    ck_assert_uint_eq(paths, 7u);
}
END_TEST

/* The effects land where the state is kept: the probe counter, the hold,
 * the measured way's record (rzv_way.c). */
START_TEST(apply_records_the_effects)
{
    torxm_peer_t peer;
    memset(&peer, 0, sizeof peer);
    peer.stage_probe = 62;
    const torxm_path_out_t counted = {.path = B, .count = 1, .hold = 1};
    torxm_path_apply(NULL, &peer, &counted);
    ck_assert_uint_eq(peer.stage_probe, 63);
    ck_assert_uint_eq(peer.rzv_hold, TORXM_RZV_HOLD);
    const torxm_path_out_t cleared = {.path = S, .hold = 0};
    torxm_path_apply(NULL, &peer, &cleared);
    ck_assert_uint_eq(peer.stage_probe, 63);
    ck_assert_uint_eq(peer.rzv_hold, 0);
    peer.rzv_hold = 5;
    const torxm_path_out_t left = {.path = S, .hold = -1};
    torxm_path_apply(NULL, &peer, &left);
    ck_assert_uint_eq(peer.rzv_hold, 5);
    ck_assert_int_eq(torxm_rzv_way_peek(&peer, LONG), NONE);
    const torxm_path_out_t open = {.path = S, .hold = -1, .way_open = 1};
    torxm_path_apply(NULL, &peer, &open);
    ck_assert_ptr_nonnull(peer.way);
    ck_assert_int_eq(torxm_rzv_way_peek(&peer, LONG), S);
    ck_assert_int_eq(torxm_rzv_way_peek(&peer, 65536), S);
    free(peer.way);
    peer.way = NULL;
    const torxm_path_out_t open_bulk = {.path = B, .hold = -1, .way_open = 1};
    torxm_path_apply(NULL, &peer, &open_bulk);
    ck_assert_int_eq(torxm_rzv_way_peek(&peer, HUGE), B);
    free(peer.way);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("msg_path");
    TCase *tc = tcase_create("chooser");
    tcase_add_loop_test(tc, each_row_gets_its_answer, 0, NROWS);
    tcase_add_test(tc, the_table_covers_every_question);
    tcase_add_test(tc, apply_records_the_effects);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
