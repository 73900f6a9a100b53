/* Unit tests of the rank map (mapping/map.c): order strings against
 * hand-computed coordinates, the rank/slot tables, write -> read round trips,
 * every kind of bad mapping file (fixtures in test/maps/, each checked for
 * "torx: path:line: reason"), torus distances with wraparound, and
 * TORX_MAPPING / TORX_TORUS through torx_map_from_env.
 *
 * Fixtures: $TORX_TEST_MAPS, else $TORX_SRCDIR/test/maps (both exported by
 * make check), else MAPS_DIR when the build defines it, else test/maps next to
 * this source file (found from __FILE__, which the build gives relative to
 * the directory tests run in). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <torx/map.h>

#include <check.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const char *maps_dir(void)
{
    static char dir[PATH_MAX];
    const char *env = getenv("TORX_TEST_MAPS");
    if (env && *env)
        return env;
    env = getenv("TORX_SRCDIR");
    if (env && *env) {
        snprintf(dir, sizeof dir, "%s/test/maps", env);
        return dir;
    }
#ifdef MAPS_DIR
    return MAPS_DIR;
#else
    char file[PATH_MAX];
    snprintf(file, sizeof file, "%s", __FILE__);
    snprintf(dir, sizeof dir, "%s/../maps", dirname(file));
    return dir;
#endif
}

static void fixture(const char *name, char *path, size_t len)
{
    snprintf(path, len, "%s/%s", maps_dir(), name);
}

static void assert_msg_has(const char *needle)
{
    const char *msg = torx_last_error();
    ck_assert_msg(strncmp(msg, "torx: ", 6) == 0, "message '%s' does not start with 'torx: '", msg);
    ck_assert_msg(strstr(msg, needle) != NULL, "message '%s' does not contain '%s'", msg, needle);
}

/* A failed constructor leaves the map zeroed (so freeing it is harmless). */
static void assert_map_zeroed(const torx_map_t *m)
{
    ck_assert_ptr_null(m->coord);
    ck_assert_ptr_null(m->rank_of_slot);
    ck_assert_ptr_null(m->path);
    ck_assert_int_eq(m->ntasks, 0);
}

static void assert_coord(torx_coord_t got, unsigned x, unsigned y, unsigned z, unsigned t,
                         const char *what, int rank)
{
    ck_assert_msg(got.x == x && got.y == y && got.z == z && got.t == t,
                  "%s rank %d: got (%u,%u,%u,%u), expected (%u,%u,%u,%u)", what, rank, got.x, got.y,
                  got.z, got.t, x, y, z, t);
}

/* Every rank in the shape, no two alike, and rank_of_slot the exact inverse
 * of coord (-1 on every slot no rank took). */
static void assert_tables_consistent(const torx_map_t *m)
{
    unsigned slots = torx_shape_slots(m->shape);
    unsigned taken = 0;
    for (int r = 0; r < m->ntasks; r++) {
        torx_coord_t c = m->coord[r];
        ck_assert_msg(torx_coord_in_shape(m->shape, c), "rank %d (%u,%u,%u,%u) outside the shape",
                      r, c.x, c.y, c.z, c.t);
        ck_assert_int_eq(m->rank_of_slot[torx_coord_index(m->shape, c)], r);
        ck_assert_int_eq(torx_map_rank(m, c), r);
    }
    for (unsigned i = 0; i < slots; i++) {
        int r = m->rank_of_slot[i];
        ck_assert_msg(r >= -1 && r < m->ntasks, "slot %u holds rank %d", i, r);
        if (r >= 0) {
            taken++;
            ck_assert_uint_eq(torx_coord_index(m->shape, m->coord[r]), i);
        }
    }
    ck_assert_uint_eq(taken, (unsigned)m->ntasks);
}

/* ---- Order strings ----------------------------------------------------------- */

typedef struct {
    const char *order;
    const char *upper; /* map.order afterwards */
    int rank;
    unsigned x, y, z, t;
} order_case_t;

/* On 2x3x2 with 2 tasks per node (24 slots), computed by hand: rank r is
 * r = c0 + n0*(c1 + n1*(c2 + n2*c3)) with c0 the fastest dimension. */
static const torx_shape_t order_shape = {2, 3, 2, 2};
static const order_case_t order_cases[] = {
    {"XYZT", "XYZT", 0, 0, 0, 0, 0},  {"XYZT", "XYZT", 1, 1, 0, 0, 0},
    {"XYZT", "XYZT", 5, 1, 2, 0, 0},  {"XYZT", "XYZT", 7, 1, 0, 1, 0},
    {"XYZT", "XYZT", 13, 1, 0, 0, 1}, {"XYZT", "XYZT", 23, 1, 2, 1, 1},
    {"TXYZ", "TXYZ", 1, 0, 0, 0, 1},  {"TXYZ", "TXYZ", 2, 1, 0, 0, 0},
    {"TXYZ", "TXYZ", 5, 0, 1, 0, 1},  {"TXYZ", "TXYZ", 13, 0, 0, 1, 1},
    {"TXYZ", "TXYZ", 23, 1, 2, 1, 1}, {"ZYXT", "ZYXT", 1, 0, 0, 1, 0},
    {"ZYXT", "ZYXT", 2, 0, 1, 0, 0},  {"ZYXT", "ZYXT", 7, 1, 0, 1, 0},
    {"ZYXT", "ZYXT", 12, 0, 0, 0, 1}, {"ZYXT", "ZYXT", 17, 0, 2, 1, 1},
    {"tyzx", "TYZX", 1, 0, 0, 0, 1},  {"tyzx", "TYZX", 2, 0, 1, 0, 0},
    {"tyzx", "TYZX", 6, 0, 0, 1, 0},  {"tyzx", "TYZX", 12, 1, 0, 0, 0},
    {"tyzx", "TYZX", 23, 1, 2, 1, 1}, {"xYzT", "XYZT", 5, 1, 2, 0, 0},
};

START_TEST(order_table)
{
    const order_case_t *c = &order_cases[_i];
    torx_map_t m;
    ck_assert_msg(torx_map_from_order(c->order, order_shape, 24, &m) == TORX_OK, "%s: %s", c->order,
                  torx_last_error());
    ck_assert_int_eq(m.ntasks, 24);
    ck_assert_str_eq(m.order, c->upper);
    ck_assert_ptr_null(m.path);
    assert_coord(torx_map_coord(&m, c->rank), c->x, c->y, c->z, c->t, c->order, c->rank);
    assert_tables_consistent(&m);
    torx_map_free(&m);
}
END_TEST

/* Every permutation on shapes with distinct extents: a bijection onto the
 * first ntasks positions, and consecutive ranks step the fastest dimension. */
START_TEST(order_all_permutations)
{
    static const char letters[] = "XYZT";
    static const torx_shape_t shapes[] = {{2, 3, 4, 5}, {3, 1, 2, 2}, {1, 1, 1, 1}, {5, 4, 3, 2}};
    int n = 0;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 4; c++)
                for (int d = 0; d < 4; d++) {
                    if (a == b || a == c || a == d || b == c || b == d || c == d)
                        continue;
                    char order[5] = {letters[a], letters[b], letters[c], letters[d], 0};
                    ck_assert(torx_map_order_valid(order));
                    n++;
                    for (int s = 0; s < N_OF(shapes); s++) {
                        torx_shape_t sh = shapes[s];
                        int slots = (int)torx_shape_slots(sh);
                        /* The structs are four uint8_t in x,y,z,t order: index by dimension. */
                        int ext0 = (int)((const uint8_t *)&sh)[a]; /* fastest extent */
                        const int sizes[] = {1, 2, slots / 3 + 1, slots - 1, slots};
                        for (int k = 0; k < N_OF(sizes); k++) {
                            int ntasks = sizes[k];
                            if (ntasks < 1 || ntasks > slots)
                                continue;
                            torx_map_t m;
                            ck_assert_msg(torx_map_from_order(order, sh, ntasks, &m) == TORX_OK,
                                          "%s: %s", order, torx_last_error());
                            assert_tables_consistent(&m);
                            for (int r = 0; r + 1 < ntasks; r++) {
                                const uint8_t *p = (const uint8_t *)&m.coord[r];
                                const uint8_t *q = (const uint8_t *)&m.coord[r + 1];
                                if ((r + 1) % ext0)
                                    ck_assert_int_eq(q[a], p[a] + 1);
                                else
                                    ck_assert_int_eq(q[a], 0);
                            }
                            torx_map_free(&m);
                        }
                    }
                }
    ck_assert_int_eq(n, 24);
}
END_TEST

typedef struct {
    const char *order;
    const char *why;
} bad_order_t;

static const bad_order_t bad_orders[] = {
    {"XYZ", "it has 3 characters, not 4"},    {"XXYZ", "X appears twice"},
    {"XYZTQ", "it has 5 characters, not 4"},  {"", "it is empty"},
    {"XYZQ", "'Q' is not one of X, Y, Z, T"}, {"xyzx", "X appears twice"},
    {"XY T", "' ' is not one of X, Y, Z, T"},
};

START_TEST(order_bad)
{
    const bad_order_t *c = &bad_orders[_i];
    torx_map_t m;
    ck_assert(!torx_map_order_valid(c->order));
    ck_assert_int_eq(torx_map_from_order(c->order, order_shape, 4, &m), TORX_ERR_INVAL);
    assert_map_zeroed(&m);
    char quoted[32];
    snprintf(quoted, sizeof quoted, "'%s' is not a permutation of XYZT", c->order);
    assert_msg_has(quoted);
    assert_msg_has(c->why);
}
END_TEST

START_TEST(order_partial_and_too_many)
{
    torx_map_t m;
    /* 5 of 16 slots, TXYZ: the first five positions of the order. */
    ck_assert_int_eq(torx_map_from_order("TXYZ", (torx_shape_t){2, 2, 2, 2}, 5, &m), TORX_OK);
    ck_assert_int_eq(m.ntasks, 5);
    assert_tables_consistent(&m);
    assert_coord(m.coord[4], 0, 1, 0, 0, "TXYZ", 4);
    torx_coord_t empty = {1, 1, 0, 0};
    ck_assert_int_eq(torx_map_rank(&m, empty), -1);
    torx_map_free(&m);
    torx_map_free(&m); /* freeing twice is harmless */

    ck_assert_int_eq(torx_map_from_order("XYZT", (torx_shape_t){2, 2, 1, 1}, 5, &m),
                     TORX_ERR_INVAL);
    assert_map_zeroed(&m);
    assert_msg_has("the job's 5 tasks do not fit the torus 2x2x1 at 1 task per node (4 slots)");
    assert_msg_has("TORX_TORUS");

    ck_assert_int_eq(torx_map_from_order("XYZT", (torx_shape_t){2, 0, 1, 1}, 1, &m),
                     TORX_ERR_INVAL);
    assert_msg_has("every extent must be at least 1");
    ck_assert_int_eq(torx_map_from_order("XYZT", (torx_shape_t){2, 2, 1, 1}, 0, &m),
                     TORX_ERR_INVAL);
    assert_msg_has("ntasks=0");
    ck_assert_int_eq(torx_map_from_order("XYZT", (torx_shape_t){2, 2, 1, 1}, -3, &m),
                     TORX_ERR_INVAL);
    assert_msg_has("ntasks=-3");
    ck_assert_int_eq(torx_map_from_order(NULL, (torx_shape_t){2, 2, 1, 1}, 1, &m), TORX_ERR_INVAL);
    assert_msg_has("it is empty");
    ck_assert_int_eq(torx_map_from_order("XYZT", (torx_shape_t){2, 2, 1, 1}, 1, NULL),
                     TORX_ERR_INVAL);
}
END_TEST

/* ---- Queries --------------------------------------------------------------------- */

START_TEST(rank_outside_shape)
{
    torx_map_t m;
    ck_assert_int_eq(torx_map_from_order("XYZT", (torx_shape_t){2, 2, 2, 1}, 8, &m), TORX_OK);
    ck_assert_int_eq(torx_map_rank(&m, (torx_coord_t){2, 0, 0, 0}), -1);
    ck_assert_int_eq(torx_map_rank(&m, (torx_coord_t){0, 0, 0, 1}), -1);
    ck_assert_int_eq(torx_map_rank(&m, (torx_coord_t){1, 1, 1, 0}), 7);
    torx_map_free(&m);
}
END_TEST

typedef struct {
    torx_shape_t shape;
    torx_coord_t a, b;
    unsigned hops;
} dist_case_t;

static const dist_case_t dist_cases[] = {
    {{5, 4, 3, 2}, {0, 0, 0, 0}, {1, 0, 0, 0}, 1},
    {{5, 4, 3, 2}, {0, 0, 0, 0}, {4, 0, 0, 0}, 1}, /* wraparound */
    {{5, 4, 3, 2}, {0, 0, 0, 0}, {2, 0, 0, 0}, 2},
    {{5, 4, 3, 2}, {0, 0, 0, 0}, {3, 0, 0, 0}, 2}, /* 3 forward, 2 back */
    {{5, 4, 3, 2}, {0, 0, 0, 0}, {0, 2, 0, 0}, 2}, /* half way round: 2 either way */
    {{5, 4, 3, 2}, {0, 0, 0, 0}, {0, 3, 0, 0}, 1},
    {{5, 4, 3, 2}, {0, 0, 0, 0}, {0, 0, 2, 0}, 1},
    {{5, 4, 3, 2}, {1, 1, 1, 0}, {1, 1, 1, 1}, 0}, /* same node, other task */
    {{5, 4, 3, 2}, {0, 0, 0, 0}, {3, 2, 2, 1}, 5},
    {{5, 4, 3, 2}, {4, 3, 2, 0}, {0, 0, 0, 1}, 3}, /* wraps in every dimension */
    {{5, 4, 3, 2}, {1, 2, 1, 0}, {3, 1, 2, 0}, 4},
    {{8, 1, 1, 1}, {0, 0, 0, 0}, {4, 0, 0, 0}, 4},
    {{8, 1, 1, 1}, {1, 0, 0, 0}, {7, 0, 0, 0}, 2},
    {{2, 2, 2, 1}, {0, 0, 0, 0}, {1, 1, 1, 0}, 3},
    {{1, 1, 1, 2}, {0, 0, 0, 0}, {0, 0, 0, 1}, 0},
};

START_TEST(distance_table)
{
    const dist_case_t *c = &dist_cases[_i];
    torx_map_t m;
    int slots = (int)torx_shape_slots(c->shape);
    ck_assert_int_eq(torx_map_from_order("XYZT", c->shape, slots, &m), TORX_OK);
    int a = torx_map_rank(&m, c->a), b = torx_map_rank(&m, c->b);
    ck_assert(a >= 0 && b >= 0);
    ck_assert_msg(torx_map_distance(&m, a, b) == c->hops,
                  "(%u,%u,%u,%u)-(%u,%u,%u,%u) on %ux%ux%u: %u hops, expected %u", c->a.x, c->a.y,
                  c->a.z, c->a.t, c->b.x, c->b.y, c->b.z, c->b.t, c->shape.x, c->shape.y,
                  c->shape.z, torx_map_distance(&m, a, b), c->hops);
    ck_assert_uint_eq(torx_map_distance(&m, b, a), c->hops);
    ck_assert_uint_eq(torx_map_distance(&m, a, a), 0);
    torx_map_free(&m);
}
END_TEST

/* ---- Files: round trip, good fixture ------------------------------------------------ */

/* A fresh temporary file path (the file exists, empty). */
static void temp_path(char *path, size_t len)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(path, len, "%s/torx-map-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(path);
    ck_assert_msg(fd >= 0, "mkstemp %s: %s", path, strerror(errno));
    close(fd);
}

typedef struct {
    const char *order;
    torx_shape_t shape;
    int ntasks;
    const char *header; /* a line the header must hold */
} trip_case_t;

static const trip_case_t trip_cases[] = {
    {"XYZT", {2, 3, 2, 2}, 24, "# torus 2x3x2, 2 tasks per node, 24 ranks (24 slots)\n"},
    {"TXYZ", {4, 2, 1, 2}, 16, "# generated by libtorx from order TXYZ\n"},
    {"zxty", {3, 3, 3, 1}, 20, "# torus 3x3x3, 1 task per node, 20 ranks (27 slots)\n"},
    {"YTZX", {1, 5, 2, 3}, 30, "# torus 1x5x2, 3 tasks per node, 30 ranks (30 slots)\n"},
};

START_TEST(write_read_round_trip)
{
    const trip_case_t *c = &trip_cases[_i];
    torx_map_t m, back, counted;
    ck_assert_int_eq(torx_map_from_order(c->order, c->shape, c->ntasks, &m), TORX_OK);
    char path[PATH_MAX];
    temp_path(path, sizeof path);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_msg(torx_map_write(&m, f) == TORX_OK, "%s", torx_last_error());
    ck_assert_int_eq(fclose(f), 0);

    /* The header is there, and every line after it is a rank. */
    f = fopen(path, "r");
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    ck_assert_msg(strstr(text, c->header) != NULL, "header '%s' missing from:\n%s", c->header,
                  text);
    ck_assert(strncmp(text, "# torx mapping file", 19) == 0);

    ck_assert_msg(torx_map_from_file(path, c->shape, c->ntasks, &back) == TORX_OK, "%s",
                  torx_last_error());
    ck_assert_msg(torx_map_from_file(path, c->shape, 0, &counted) == TORX_OK, "%s",
                  torx_last_error());
    ck_assert_int_eq(back.ntasks, c->ntasks);
    ck_assert_int_eq(counted.ntasks, c->ntasks);
    ck_assert_str_eq(back.path, path);
    ck_assert_str_eq(back.order, "");
    for (int r = 0; r < c->ntasks; r++) {
        ck_assert(torx_coord_equal(back.coord[r], m.coord[r]));
        ck_assert(torx_coord_equal(counted.coord[r], m.coord[r]));
    }
    assert_tables_consistent(&back);
    assert_tables_consistent(&counted);

    /* A map read from a file writes back the same lines, naming the file. */
    f = tmpfile();
    ck_assert_int_eq(torx_map_write(&back, f), TORX_OK);
    rewind(f);
    n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    char from[PATH_MAX + 64];
    snprintf(from, sizeof from, "# generated by libtorx from file %s\n", path);
    ck_assert_msg(strstr(text, from) != NULL, "'%s' missing from:\n%s", from, text);

    unlink(path);
    torx_map_free(&m);
    torx_map_free(&back);
    torx_map_free(&counted);
}
END_TEST

START_TEST(write_error)
{
    torx_map_t m;
    ck_assert_int_eq(torx_map_from_order("XYZT", (torx_shape_t){2, 2, 2, 1}, 8, &m), TORX_OK);
    char path[PATH_MAX];
    temp_path(path, sizeof path);
    FILE *ro = fopen(path, "r"); /* writes to a read-only stream fail */
    ck_assert_ptr_nonnull(ro);
    ck_assert_int_eq(torx_map_write(&m, ro), TORX_ERR_SYS);
    assert_msg_has("writing the mapping failed: ");
    fclose(ro);
    unlink(path);

    /* /dev/full takes buffered writes and fails at the flush: a full disk. */
    FILE *full = fopen("/dev/full", "w");
    ck_assert_msg(full != NULL, "this test needs /dev/full: %s", strerror(errno));
    ck_assert_int_eq(torx_map_write(&m, full), TORX_ERR_SYS);
    assert_msg_has("writing the mapping failed: No space left on device");
    fclose(full);
    ck_assert_int_eq(torx_map_write(&m, NULL), TORX_ERR_INVAL);
    torx_map_free(&m);
    ck_assert_int_eq(torx_map_write(&m, stdout), TORX_ERR_INVAL);
}
END_TEST

START_TEST(good_fixture)
{
    static const unsigned want[8][4] = {{1, 1, 1, 0}, {0, 0, 0, 0}, {1, 0, 0, 0}, {0, 1, 0, 0},
                                        {1, 1, 0, 0}, {0, 0, 1, 0}, {1, 0, 1, 0}, {0, 1, 1, 0}};
    char path[PATH_MAX];
    fixture("good-mixed.map", path, sizeof path);
    for (int ntasks = 0; ntasks <= 8; ntasks += 8) {
        torx_map_t m;
        ck_assert_msg(torx_map_from_file(path, (torx_shape_t){2, 2, 2, 1}, ntasks, &m) == TORX_OK,
                      "%s", torx_last_error());
        ck_assert_int_eq(m.ntasks, 8);
        for (int r = 0; r < 8; r++)
            assert_coord(m.coord[r], want[r][0], want[r][1], want[r][2], want[r][3], path, r);
        assert_tables_consistent(&m);
        torx_map_free(&m);
    }
    /* The same file fits a larger torus and more tasks per node. */
    torx_map_t m;
    ck_assert_int_eq(torx_map_from_file(path, (torx_shape_t){3, 2, 4, 2}, 8, &m), TORX_OK);
    assert_tables_consistent(&m);
    torx_map_free(&m);
}
END_TEST

/* ---- Files: every rejection ---------------------------------------------------------- */

typedef struct {
    const char *file; /* in the fixture directory; "" for the directory itself */
    torx_shape_t shape;
    int ntasks;
    unsigned long line; /* 0: the message names no line */
    const char *reason;
} bad_file_t;

static const bad_file_t bad_files[] = {
    {"bad-notnum.map", {2, 2, 2, 1}, 4, 4, "'1a' is not a number"},
    {"bad-negative.map", {2, 2, 2, 1}, 2, 3, "'-1' is not a number"},
    {"bad-fields3.map", {2, 2, 2, 1}, 2, 3, "expected 4 fields (x y z t), found 3"},
    {"bad-fields5.map", {2, 2, 2, 1}, 2, 2, "expected 4 fields (x y z t), found 5"},
    {"bad-trailing-comment.map",
     {2, 2, 2, 1},
     2,
     3,
     "found 7; a comment must be on a line of its own"},
    {"bad-range.map",
     {2, 2, 2, 1},
     2,
     4,
     "y=2 is out of range: the torus has extent 2 in y (0..1)"},
    {"bad-range.map", {3, 3, 1, 1}, 3, 4, "file has 2 ranks, the job has 3"}, /* y=2 fits */
    {"bad-huge.map",
     {2, 2, 2, 1},
     1,
     2,
     "z=99999999999 is out of range: the torus has extent 2 in z"},
    {"bad-t-heater.map", {2, 2, 2, 1}, 2, 3, "t=1 but the mode runs 1 task per node (t must be 0)"},
    {"bad-t-vn.map", {2, 2, 2, 2}, 3, 4, "t=2 but the mode runs 2 tasks per node (t must be 0..1)"},
    {"bad-dup.map", {2, 2, 2, 1}, 7, 7, "(1,0,0,0) already used by rank 3 on line 5"},
    {"bad-dup.map", {2, 2, 2, 1}, 0, 7, "(1,0,0,0) already used by rank 3 on line 5"},
    {"bad-dup-rank0.map", {2, 2, 2, 1}, 3, 4, "(0,0,0,0) already used by rank 0 on line 2"},
    {"bad-few.map", {2, 2, 2, 1}, 4, 6, "file has 3 ranks, the job has 4"},
    {"bad-many.map",
     {2, 2, 2, 1},
     4,
     7,
     "file has 6 ranks, the job has 4 (the extra ranks start on this line)"},
    {"bad-comments-only.map",
     {2, 2, 2, 1},
     4,
     0,
     "no rank lines (only blank and comment lines); the job has 4 ranks"},
    {"bad-empty.map", {2, 2, 2, 1}, 0, 0, "no rank lines (the file is empty)"},
    {"does-not-exist.map",
     {2, 2, 2, 1},
     4,
     0,
     "cannot open the mapping file: No such file or directory"},
    {"", {2, 2, 2, 1}, 4, 0, "cannot read the mapping file: Is a directory"},
};

START_TEST(bad_file_table)
{
    const bad_file_t *c = &bad_files[_i];
    char path[PATH_MAX];
    if (*c->file)
        fixture(c->file, path, sizeof path);
    else
        snprintf(path, sizeof path, "%s", maps_dir());
    torx_map_t m;
    torx_status_t rc = torx_map_from_file(path, c->shape, c->ntasks, &m);
    ck_assert_msg(rc == TORX_ERR_INVAL, "%s: got %s (%s)", path, torx_status_str(rc),
                  torx_last_error());
    assert_map_zeroed(&m);
    char where[PATH_MAX + 32];
    if (c->line)
        snprintf(where, sizeof where, "torx: %s:%lu: ", path, c->line);
    else
        snprintf(where, sizeof where, "torx: %s: ", path);
    const char *msg = torx_last_error();
    ck_assert_msg(strncmp(msg, where, strlen(where)) == 0, "message '%s' does not start with '%s'",
                  msg, where);
    assert_msg_has(c->reason);
}
END_TEST

START_TEST(file_bad_args)
{
    const torx_shape_t s222 = {2, 2, 2, 1};
    torx_map_t m;
    char path[PATH_MAX];
    fixture("good-mixed.map", path, sizeof path);
    ck_assert_int_eq(torx_map_from_file(NULL, s222, 8, &m), TORX_ERR_INVAL);
    assert_msg_has("path is NULL");
    ck_assert_int_eq(torx_map_from_file(path, s222, 8, NULL), TORX_ERR_INVAL);
    ck_assert_int_eq(torx_map_from_file(path, s222, 9, &m), TORX_ERR_INVAL);
    assert_msg_has("the job's 9 tasks do not fit the torus 2x2x2");
    ck_assert_int_eq(torx_map_from_file(path, (torx_shape_t){2, 2, 0, 1}, 8, &m), TORX_ERR_INVAL);
    assert_msg_has("every extent must be at least 1");
    ck_assert_int_eq(torx_map_from_file(path, s222, -1, &m), TORX_ERR_INVAL);
    assert_msg_has("ntasks=-1");
}
END_TEST

/* ---- The environment ----------------------------------------------------------------- */

static void clean_env(void)
{
    unsetenv("TORX_TORUS");
    unsetenv("TORX_MAPPING");
}

START_TEST(env_default_and_orders)
{
    clean_env();
    torx_map_t m;
    setenv("TORX_TORUS", "2x3x2", 1);
    ck_assert_msg(torx_map_from_env(24, 2, &m) == TORX_OK, "%s", torx_last_error());
    ck_assert_str_eq(m.order, "XYZT");
    ck_assert(m.shape.x == 2 && m.shape.y == 3 && m.shape.z == 2 && m.shape.t == 2);
    assert_coord(m.coord[13], 1, 0, 0, 1, "TORX_MAPPING unset", 13);
    torx_map_free(&m);

    setenv("TORX_MAPPING", "", 1); /* empty is the default */
    ck_assert_int_eq(torx_map_from_env(24, 2, &m), TORX_OK);
    ck_assert_str_eq(m.order, "XYZT");
    torx_map_free(&m);

    setenv("TORX_MAPPING", "txyz", 1);
    ck_assert_int_eq(torx_map_from_env(20, 2, &m), TORX_OK);
    ck_assert_str_eq(m.order, "TXYZ");
    ck_assert_int_eq(m.ntasks, 20);
    assert_coord(m.coord[13], 0, 0, 1, 1, "TORX_MAPPING=txyz", 13);
    assert_tables_consistent(&m);
    torx_map_free(&m);

    /* No TORX_TORUS: the derived shape (8 nodes -> 2x2x2), t from the mode. */
    unsetenv("TORX_TORUS");
    setenv("TORX_MAPPING", "TXYZ", 1);
    ck_assert_int_eq(torx_map_from_env(16, 2, &m), TORX_OK);
    ck_assert(m.shape.x == 2 && m.shape.y == 2 && m.shape.z == 2 && m.shape.t == 2);
    assert_coord(m.coord[3], 1, 0, 0, 1, "derived TXYZ", 3);
    torx_map_free(&m);
}
END_TEST

START_TEST(env_file)
{
    clean_env();
    torx_map_t m;
    char path[PATH_MAX];
    fixture("good-mixed.map", path, sizeof path);
    setenv("TORX_TORUS", "2x2x2", 1);
    setenv("TORX_MAPPING", path, 1);
    ck_assert_msg(torx_map_from_env(8, 1, &m) == TORX_OK, "%s", torx_last_error());
    ck_assert_str_eq(m.path, path);
    ck_assert_str_eq(m.order, "");
    assert_coord(m.coord[0], 1, 1, 1, 0, path, 0);
    assert_coord(m.coord[7], 0, 1, 1, 0, path, 7);
    torx_map_free(&m);

    /* A readable file with a bad line reports the line, not "neither". */
    fixture("bad-dup.map", path, sizeof path);
    setenv("TORX_MAPPING", path, 1);
    ck_assert_int_eq(torx_map_from_env(7, 1, &m), TORX_ERR_INVAL);
    assert_map_zeroed(&m);
    assert_msg_has(":7: (1,0,0,0) already used by rank 3 on line 5");

    /* The job size is the job's, not the file's. */
    fixture("good-mixed.map", path, sizeof path);
    setenv("TORX_MAPPING", path, 1);
    ck_assert_int_eq(torx_map_from_env(6, 1, &m), TORX_ERR_INVAL);
    assert_msg_has("file has 8 ranks, the job has 6");
}
END_TEST

typedef struct {
    const char *value;
    const char *why; /* as an order */
    const char *io;  /* as a file */
} env_garbage_t;

static const env_garbage_t env_garbage[] = {
    {"garbage", "it has 7 characters, not 4", "No such file or directory"},
    {"XYZ", "it has 3 characters, not 4", "No such file or directory"},
    {"XXYZ", "X appears twice", "No such file or directory"},
    {"/nonexistent/dir/map.txt", "it has 24 characters, not 4", "No such file or directory"},
    {".", "it has 1 characters, not 4", "Is a directory"},
};

START_TEST(env_garbage_table)
{
    const env_garbage_t *c = &env_garbage[_i];
    clean_env();
    setenv("TORX_TORUS", "2x2x2", 1);
    setenv("TORX_MAPPING", c->value, 1);
    torx_map_t m;
    ck_assert_int_eq(torx_map_from_env(8, 1, &m), TORX_ERR_ENV);
    assert_map_zeroed(&m);
    char want[256];
    snprintf(want, sizeof want,
             "TORX_MAPPING='%s' is neither a permutation of XYZT nor a readable file", c->value);
    assert_msg_has(want);
    assert_msg_has(c->why);
    assert_msg_has(c->io);
}
END_TEST

START_TEST(env_shape_errors)
{
    clean_env();
    torx_map_t m;
    setenv("TORX_TORUS", "2x2x1", 1);
    ck_assert_int_eq(torx_map_from_env(9, 2, &m), TORX_ERR_ENV);
    assert_map_zeroed(&m);
    assert_msg_has("TORX_TORUS='2x2x1'");
    setenv("TORX_TORUS", "2x2y1", 1);
    ck_assert_int_eq(torx_map_from_env(4, 1, &m), TORX_ERR_ENV);
    assert_msg_has("TORX_TORUS='2x2y1'");
    ck_assert_int_eq(torx_map_from_env(4, 1, NULL), TORX_ERR_INVAL);
}
END_TEST

START_TEST(spec_without_name)
{
    const torx_shape_t s222 = {2, 2, 2, 1};
    torx_map_t m;
    ck_assert_int_eq(torx_map_from_spec("YZ", NULL, s222, 8, &m), TORX_ERR_INVAL);
    assert_msg_has("'YZ' is neither a permutation of XYZT nor a readable file");
    /* ntasks 0 on an order: every slot. */
    ck_assert_int_eq(torx_map_from_spec("zyxt", NULL, (torx_shape_t){2, 2, 2, 2}, 0, &m), TORX_OK);
    ck_assert_int_eq(m.ntasks, 16);
    ck_assert_str_eq(m.order, "ZYXT");
    torx_map_free(&m);
    ck_assert_int_eq(torx_map_from_spec(NULL, NULL, s222, 3, &m), TORX_OK);
    ck_assert_str_eq(m.order, "XYZT");
    torx_map_free(&m);
}
END_TEST

/* ---- Shared maps --------------------------------------------------------------------- */

/* Identical requests alive at once share one table; any difference in the
 * order, the shape or ntasks makes a map of its own; a map outlives the
 * others that shared its table. */
START_TEST(shared_orders)
{
    const torx_shape_t s222 = {2, 2, 2, 1}, s222t2 = {2, 2, 2, 2};
    torx_map_t a, b, c, d, e, f;
    ck_assert_int_eq(torx_map_from_order("xyzt", s222, 8, &a), TORX_OK);
    ck_assert_int_eq(torx_map_from_order("XYZT", s222, 8, &b), TORX_OK);
    ck_assert_int_eq(torx_map_from_spec(NULL, "TORX_MAPPING", s222, 8, &c), TORX_OK);
    ck_assert_ptr_eq(a.coord, b.coord);
    ck_assert_ptr_eq(a.rank_of_slot, b.rank_of_slot);
    ck_assert_ptr_eq(a.coord, c.coord);
    ck_assert_str_eq(b.order, "XYZT");
    ck_assert_str_eq(c.order, "XYZT");
    ck_assert_int_eq(torx_map_from_order("XYZT", s222, 7, &d), TORX_OK);
    ck_assert_int_eq(torx_map_from_order("TXYZ", s222, 8, &e), TORX_OK);
    ck_assert_int_eq(torx_map_from_order("XYZT", s222t2, 8, &f), TORX_OK);
    ck_assert_ptr_ne(d.coord, a.coord);
    ck_assert_ptr_ne(e.coord, a.coord);
    ck_assert_ptr_ne(f.coord, a.coord);
    ck_assert_int_eq(d.ntasks, 7);
    torx_map_free(&a);
    torx_map_free(&c);
    assert_tables_consistent(&b); /* still whole */
    assert_coord(b.coord[5], 1, 0, 1, 0, "XYZT after the others went", 5);
    torx_map_t g;
    ck_assert_int_eq(torx_map_from_order("XYZT", s222, 8, &g), TORX_OK);
    ck_assert_ptr_eq(g.coord, b.coord);
    /* a map of explicit coordinates is never shared */
    torx_map_t h;
    ck_assert_int_eq(torx_map_from_coords(b.coord, s222, 8, &h), TORX_OK);
    ck_assert_ptr_ne(h.coord, b.coord);
    assert_tables_consistent(&h);
    torx_map_free(&b);
    torx_map_free(&d);
    torx_map_free(&e);
    torx_map_free(&f);
    torx_map_free(&g);
    torx_map_free(&h);
    ck_assert_int_eq(torx_map_from_order("XYZT", s222, 8, &a), TORX_OK);
    assert_tables_consistent(&a);
    torx_map_free(&a);
}
END_TEST

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_ge(fputs(text, f), 0);
    ck_assert_int_eq(fclose(f), 0);
}

/* A file map is shared while the file is the one read, unchanged; a file
 * rewritten meanwhile (another size here) or replaced is read again. */
START_TEST(shared_files)
{
    const torx_shape_t s211 = {2, 1, 1, 1};
    char path[PATH_MAX];
    temp_path(path, sizeof path);
    write_text(path, "0 0 0 0\n1 0 0 0\n");
    torx_map_t a, b, c, d;
    ck_assert_msg(torx_map_from_file(path, s211, 2, &a) == TORX_OK, "%s", torx_last_error());
    ck_assert_int_eq(torx_map_from_spec(path, "TORX_MAPPING", s211, 2, &b), TORX_OK);
    ck_assert_int_eq(torx_map_from_file(path, s211, 0, &c), TORX_OK); /* another request */
    ck_assert_ptr_eq(a.coord, b.coord);
    ck_assert_ptr_ne(a.coord, c.coord);
    ck_assert_str_eq(b.path, path);
    ck_assert_str_eq(b.order, "");
    ck_assert_int_eq(c.ntasks, 2);
    write_text(path, "# swapped\n1 0 0 0\n0 0 0 0\n");
    ck_assert_int_eq(torx_map_from_file(path, s211, 2, &d), TORX_OK);
    ck_assert_ptr_ne(d.coord, a.coord);
    assert_coord(d.coord[0], 1, 0, 0, 0, "the rewritten file", 0);
    assert_coord(a.coord[0], 0, 0, 0, 0, "the map of the file as it was", 0);
    torx_map_free(&a);
    torx_map_free(&b);
    torx_map_free(&c);
    torx_map_free(&d);
    /* replaced by another file of the same size: read again */
    ck_assert_int_eq(torx_map_from_file(path, s211, 2, &a), TORX_OK);
    char other[PATH_MAX];
    temp_path(other, sizeof other);
    write_text(other, "# swapped\n0 0 0 0\n1 0 0 0\n");
    ck_assert_int_eq(rename(other, path), 0);
    ck_assert_int_eq(torx_map_from_file(path, s211, 2, &b), TORX_OK);
    ck_assert_ptr_ne(a.coord, b.coord);
    assert_coord(b.coord[0], 0, 0, 0, 0, "the replaced file", 0);
    assert_coord(a.coord[0], 1, 0, 0, 0, "the map of the file replaced", 0);
    torx_map_free(&a);
    torx_map_free(&b);
    unlink(path);
}
END_TEST

/* Threads building, sharing and freeing the same maps at once (the cache's
 * lock; ThreadSanitizer runs see the races it prevents). */
#define SHARE_THREADS 4
#define SHARE_ROUNDS 300
static void *share_thread(void *arg)
{
    const torx_shape_t s = {8, 8, 8, 1};
    const int seed = (int)(intptr_t)arg;
    torx_map_t keep[2] = {{.ntasks = 0}, {.ntasks = 0}};
    for (int i = 0; i < SHARE_ROUNDS; i++) {
        torx_map_t *m = &keep[(i + seed) & 1];
        torx_map_free(m);
        if (torx_map_from_order((i + seed) % 3 ? "XYZT" : "ZYXT", s, 512 - (i % 2), m) != TORX_OK)
            return (void *)1;
        const int r = (i * 37 + seed) % m->ntasks;
        if (torx_map_rank(m, torx_map_coord(m, r)) != r)
            return (void *)1;
    }
    torx_map_free(&keep[0]);
    torx_map_free(&keep[1]);
    return NULL;
}

START_TEST(shared_threads)
{
    pthread_t t[SHARE_THREADS];
    for (int i = 0; i < SHARE_THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, share_thread, (void *)(intptr_t)i), 0);
    for (int i = 0; i < SHARE_THREADS; i++) {
        void *bad;
        ck_assert_int_eq(pthread_join(t[i], &bad), 0);
        ck_assert_msg(bad == NULL, "thread %d: a map came out wrong: %s", i, torx_last_error());
    }
}
END_TEST

static Suite *map_suite(void)
{
    Suite *s = suite_create("map");
    TCase *tc = tcase_create("order");
    tcase_add_loop_test(tc, order_table, 0, N_OF(order_cases));
    tcase_add_test(tc, order_all_permutations);
    tcase_add_loop_test(tc, order_bad, 0, N_OF(bad_orders));
    tcase_add_test(tc, order_partial_and_too_many);
    suite_add_tcase(s, tc);

    tc = tcase_create("query");
    tcase_add_test(tc, rank_outside_shape);
    tcase_add_loop_test(tc, distance_table, 0, N_OF(dist_cases));
    suite_add_tcase(s, tc);

    tc = tcase_create("file");
    tcase_add_loop_test(tc, write_read_round_trip, 0, N_OF(trip_cases));
    tcase_add_test(tc, write_error);
    tcase_add_test(tc, good_fixture);
    tcase_add_loop_test(tc, bad_file_table, 0, N_OF(bad_files));
    tcase_add_test(tc, file_bad_args);
    suite_add_tcase(s, tc);

    tc = tcase_create("env");
    tcase_add_test(tc, env_default_and_orders);
    tcase_add_test(tc, env_file);
    tcase_add_loop_test(tc, env_garbage_table, 0, N_OF(env_garbage));
    tcase_add_test(tc, env_shape_errors);
    tcase_add_test(tc, spec_without_name);
    suite_add_tcase(s, tc);

    tc = tcase_create("shared");
    tcase_add_test(tc, shared_orders);
    tcase_add_test(tc, shared_files);
    tcase_add_test(tc, shared_threads);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    char probe[PATH_MAX];
    fixture("good-mixed.map", probe, sizeof probe);
    if (access(probe, R_OK) != 0) {
        fprintf(stderr, "test_map: no fixtures at %s (%s); set TORX_TEST_MAPS to test/maps\n",
                maps_dir(), strerror(errno));
        return EXIT_FAILURE;
    }
    return test_run_suite(map_suite());
}
