/* The message layer takes its rank map from TORX_TORUS and TORX_MAPPING:
 * a mapping file places each rank where the file says and traffic flows;
 * a bad file stops torx_init on every task, with file, line and reason,
 * before any device (and so any traffic) exists. */
#include "harness.h"

#include <torx/msg.h>

#include <dirent.h>
#include <string.h>
#include <unistd.h>

/* A hand-made placement of 4 ranks on a 2x2x1 torus, not the XYZT order. */
static const torx_coord_t placed[4] = {{1, 1, 0, 0}, {0, 0, 0, 0}, {1, 0, 0, 0}, {0, 1, 0, 0}};

static char map_path[64];

static void write_map(const char *text)
{
    snprintf(map_path, sizeof map_path, "/tmp/torx-test-%d.map", (int)getpid());
    FILE *f = fopen(map_path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void ring_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                         torx_recv_t *recv)
{
    (void)ctx;
    int *from = harg;
    *from = info->src;
    recv->buf = NULL; /* the header says it all */
}

static int mapped_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_ctx_t *ctx;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    const torx_map_t *map = torx_ctx_map(ctx);
    for (int r = 0; r < 4; r++)
        TASK_CHECK(torx_coord_equal(torx_map_coord(map, r), placed[r]),
                   "rank %d not where the file put it", r);
    TASK_CHECK(torx_coord_equal(torx_pkt_self(torx_ctx_device(ctx)), placed[boot->rank]),
               "device opened at another coordinate");
    TASK_CHECK(torx_map_distance(map, 0, 1) == 2, "distance (1,1)-(0,0) on 2x2");
    volatile int from = -1;
    TASK_CHECK(torx_register(ctx, 5, ring_handler, (void *)&from) == TORX_OK, "%s",
               torx_last_error());
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    torx_msg_t msg;
    const int next = (boot->rank + 1) % 4, prev = (boot->rank + 3) % 4;
    TASK_CHECK(torx_send(ctx, &msg, next, 5, &next, sizeof next, NULL, 0, TORX_PROTO_AUTO, NULL,
                         NULL) == TORX_OK,
               "%s", torx_last_error());
    const double deadline = test_now() + 30;
    while (from < 0 && test_now() < deadline)
        if (!torx_advance(ctx))
            sched_yield();
    TASK_CHECK(from == prev, "ring message from %d, expected %d", from, prev);
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    return 0;
}

START_TEST(mapping_file_places_ranks)
{
    write_map("# 4 ranks on 2x2x1, placed by hand\n1 1 0 0\n0 0 0 0\n\n1 0 0 0\n0 1 0 0\n");
    setenv("TORX_TORUS", "2x2x1", 1);
    setenv("TORX_MAPPING", map_path, 1);
    RUN_JOB(4, mapped_task, NULL);
    unlink(map_path);
}
END_TEST

typedef struct {
    const char *needle[3];
} bad_arg_t;

static int bad_map_task(torx_boot_t *boot, void *argp)
{
    const bad_arg_t *a = argp;
    torx_ctx_t *ctx = NULL;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    test_record_task(); /* a segment it created would count */
    const torx_status_t rc = torx_init(&attr, &ctx);
    TASK_CHECK(rc < 0 && ctx == NULL, "a bad mapping file was accepted");
    for (int i = 0; i < 3 && a->needle[i]; i++)
        TASK_CHECK(strstr(torx_last_error(), a->needle[i]), "message '%s' lacks '%s'",
                   torx_last_error(), a->needle[i]);
    /* No device was opened, so no segment was ever created. */
    TASK_CHECK(test_count_segments() == 0, "a shared segment exists: traffic could have started");
    return 0;
}

START_TEST(bad_mapping_file_stops_init)
{
    ck_assert_int_eq(test_count_segments(), 0);
    setenv("TORX_TORUS", "2x2x1", 1);
    static const struct {
        const char *text, *line, *reason;
    } cases[] = {
        {"0 0 0 0\n1 0 0 0\n0 1 0 0\n1 0 0 0\n", ":4:", "already used"},
        {"0 0 0 0\n1 0 0 0\n0 1 0 0\n", ":3:", "3"},
        {"0 0 0 0\n1 0 0 0\n0 x 0 0\n1 1 0 0\n", ":3:", "not a number"},
        {"0 0 0 0\n1 0 0 0\n0 2 0 0\n1 1 0 0\n", ":3:", "2"},
        {"0 0 0 0\n1 0 0 1\n0 1 0 0\n1 1 0 0\n", ":2:", "t=1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_map(cases[i].text);
        setenv("TORX_MAPPING", map_path, 1);
        bad_arg_t a = {{map_path, cases[i].line, cases[i].reason}};
        RUN_JOB(4, bad_map_task, &a);
        unlink(map_path);
    }
    setenv("TORX_MAPPING", "XYZQ", 1);
    bad_arg_t junk = {{"TORX_MAPPING", "XYZQ", NULL}};
    RUN_JOB(2, bad_map_task, &junk);
}
END_TEST

static int vn_order_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_ctx_t *ctx;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(torx_mode(ctx) == TORX_MODE_VN && torx_tasks_per_node(ctx) == 2, "vn mode");
    const torx_map_t *map = torx_ctx_map(ctx);
    /* TXYZ: t varies fastest, so ranks 2k and 2k+1 share node k. */
    for (int r = 0; r < 4; r++) {
        const torx_coord_t c = torx_map_coord(map, r);
        TASK_CHECK(c.t == r % 2 && c.x == r / 2, "rank %d at (%u,%u,%u,%u)", r, c.x, c.y, c.z,
                   c.t);
    }
    TASK_CHECK(torx_map_distance(map, 0, 1) == 0 && torx_map_distance(map, 0, 2) == 1, "hops");
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    return 0;
}

START_TEST(order_string_txyz_in_vn)
{
    setenv("TORX_MODE", "vn", 1);
    setenv("TORX_MAPPING", "txyz", 1);
    unsetenv("TORX_TORUS");
    RUN_JOB(4, vn_order_task, NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("msg_map");
    TCase *tc = tcase_create("mapping");
    tcase_add_test(tc, mapping_file_places_ranks);
    tcase_add_test(tc, bad_mapping_file_stops_init);
    tcase_add_test(tc, order_string_txyz_in_vn);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
