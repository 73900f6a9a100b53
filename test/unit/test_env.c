/* Unit tests of the TORX_* environment parsers and the status/error/log
 * helpers (src/packet/env.c, src/packet/status.c). Table-driven: each row
 * sets the environment, calls the parser, and checks the value or, for an
 * error, that torx_last_error() names the variable and the offending value. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "packet/pkt_internal.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* value NULL means "unset" in every table below. */
static void set_or_unset(const char *name, const char *value)
{
    if (value)
        ck_assert_int_eq(setenv(name, value, 1), 0);
    else
        ck_assert_int_eq(unsetenv(name), 0);
}

/* The last error must name the variable, quote the value, and say why. */
static void assert_error_names(const char *var, const char *value, const char *why)
{
    const char *msg = torx_last_error();
    char quoted[256];
    snprintf(quoted, sizeof quoted, "%s='%s'", var, value);
    ck_assert_msg(strncmp(msg, "torx: ", 6) == 0, "message '%s' does not start with 'torx: '", msg);
    ck_assert_msg(strstr(msg, quoted) != NULL, "message '%s' does not contain %s", msg, quoted);
    if (why)
        ck_assert_msg(strstr(msg, why) != NULL, "message '%s' does not say '%s'", msg, why);
}

/* ---- torx_env_int -------------------------------------------------------- */

typedef struct {
    const char *value;
    torx_status_t status;
    long expect;     /* when TORX_OK */
    const char *why; /* substring of the message, when an error */
} int_case_t;

static const int_case_t int_cases[] = {
    {NULL, TORX_OK, 128, NULL},
    {"", TORX_OK, 128, NULL},
    {"16", TORX_OK, 16, NULL},
    {"65536", TORX_OK, 65536, NULL},
    {"1024", TORX_OK, 1024, NULL},
    {"+32", TORX_OK, 32, NULL},
    {"0128", TORX_OK, 128, NULL},
    {"12x", TORX_ERR_ENV, 0, "is not an integer (expected 16..65536)"},
    {"abc", TORX_ERR_ENV, 0, "is not an integer"},
    {" 32", TORX_ERR_ENV, 0, "is not an integer"},
    {"32 ", TORX_ERR_ENV, 0, "is not an integer"},
    {"0x20", TORX_ERR_ENV, 0, "is not an integer"},
    {"3.5", TORX_ERR_ENV, 0, "is not an integer"},
    {"-", TORX_ERR_ENV, 0, "is not an integer"},
    {"15", TORX_ERR_ENV, 0, "is out of range (expected 16..65536)"},
    {"65537", TORX_ERR_ENV, 0, "is out of range"},
    {"-1", TORX_ERR_ENV, 0, "is out of range"},
    {"99999999999999999999999", TORX_ERR_ENV, 0, "is out of range"},
    {"-99999999999999999999999", TORX_ERR_ENV, 0, "is out of range"},
};

START_TEST(env_int_table)
{
    const int_case_t *c = &int_cases[_i];
    set_or_unset("TORX_TEST_INT", c->value);
    long out = -12345;
    torx_status_t rc = torx_env_int("TORX_TEST_INT", 16, 65536, 128, &out);
    ck_assert_msg(rc == c->status, "TORX_TEST_INT='%s': got %s, expected %s",
                  c->value ? c->value : "(unset)", torx_status_str(rc), torx_status_str(c->status));
    if (c->status == TORX_OK)
        ck_assert_int_eq(out, c->expect);
    else {
        ck_assert_int_eq(out, -12345); /* untouched on error */
        assert_error_names("TORX_TEST_INT", c->value, c->why);
    }
}
END_TEST

START_TEST(env_int_negative_range_and_args)
{
    long out;
    setenv("TORX_TEST_INT", "-5", 1);
    ck_assert_int_eq(torx_env_int("TORX_TEST_INT", -5, 5, 0, &out), TORX_OK);
    ck_assert_int_eq(out, -5);
    setenv("TORX_TEST_INT", "-6", 1);
    ck_assert_int_eq(torx_env_int("TORX_TEST_INT", -5, 5, 0, &out), TORX_ERR_ENV);
    assert_error_names("TORX_TEST_INT", "-6", "expected -5..5");
    ck_assert_int_eq(torx_env_int("TORX_TEST_INT", 5, -5, 0, &out), TORX_ERR_INVAL);
    ck_assert_ptr_nonnull(strstr(torx_last_error(), "lo=5"));
    ck_assert_int_eq(torx_env_int(NULL, 0, 1, 0, &out), TORX_ERR_INVAL);
    ck_assert_int_eq(torx_env_int("TORX_TEST_INT", 0, 1, 0, NULL), TORX_ERR_INVAL);
}
END_TEST

/* ---- torx_env_choice ----------------------------------------------------- */

typedef struct {
    const char *value;
    torx_status_t status;
    int expect;
} choice_case_t;

static const choice_case_t choice_cases[] = {
    {NULL, TORX_OK, 0},         {"", TORX_OK, 0},          {"auto", TORX_OK, 0},
    {"cma", TORX_OK, 1},        {"fifo", TORX_OK, 2},      {"CMA", TORX_ERR_ENV, 0},
    {"dma", TORX_ERR_ENV, 0},   {"cma ", TORX_ERR_ENV, 0}, {"fif", TORX_ERR_ENV, 0},
    {"fifoo", TORX_ERR_ENV, 0},
};

START_TEST(env_choice_table)
{
    static const char *const words[] = {"auto", "cma", "fifo", NULL};
    const choice_case_t *c = &choice_cases[_i];
    set_or_unset("TORX_TEST_CHOICE", c->value);
    int idx = -7;
    torx_status_t rc = torx_env_choice("TORX_TEST_CHOICE", words, 0, &idx);
    ck_assert_msg(rc == c->status, "TORX_TEST_CHOICE='%s': got %s", c->value ? c->value : "",
                  torx_status_str(rc));
    if (rc == TORX_OK)
        ck_assert_int_eq(idx, c->expect);
    else {
        ck_assert_int_eq(idx, -7);
        assert_error_names("TORX_TEST_CHOICE", c->value, "auto, cma, fifo");
    }
}
END_TEST

START_TEST(env_choice_default_and_args)
{
    static const char *const words[] = {"heater", "co", "vn", NULL};
    static const char *const empty[] = {NULL};
    int idx = -1;
    unsetenv("TORX_TEST_CHOICE");
    ck_assert_int_eq(torx_env_choice("TORX_TEST_CHOICE", words, 2, &idx), TORX_OK);
    ck_assert_int_eq(idx, 2);
    ck_assert_int_eq(torx_env_choice("TORX_TEST_CHOICE", empty, 0, &idx), TORX_ERR_INVAL);
    ck_assert_int_eq(torx_env_choice("TORX_TEST_CHOICE", NULL, 0, &idx), TORX_ERR_INVAL);
}
END_TEST

/* ---- torx_env_shape ------------------------------------------------------ */

typedef struct {
    int ntasks, tpn;
    unsigned x, y, z;
} derived_case_t;

static const derived_case_t derived_cases[] = {
    {1, 1, 1, 1, 1},       {2, 1, 2, 1, 1},     {3, 1, 3, 1, 1},    {4, 1, 2, 2, 1},
    {6, 1, 3, 2, 1},       {8, 1, 2, 2, 2},     {12, 1, 3, 2, 2},   {7, 1, 7, 1, 1},
    {16, 1, 4, 2, 2},      {27, 1, 3, 3, 3},    {32, 1, 4, 4, 2},   {64, 1, 4, 4, 4},
    {72, 1, 6, 4, 3},      {100, 1, 5, 5, 4},   {255, 1, 17, 5, 3}, {256, 1, 8, 8, 4},
    {1000, 1, 10, 10, 10}, {16, 2, 2, 2, 2},    {15, 2, 2, 2, 2},   {3, 2, 2, 1, 1},
    {1, 2, 1, 1, 1},       {254, 1, 127, 2, 1}, {511, 1, 73, 7, 1}, {512, 1, 8, 8, 8},
};

START_TEST(env_shape_derived_table)
{
    const derived_case_t *c = &derived_cases[_i];
    unsetenv("TORX_TORUS");
    torx_shape_t s = {0};
    torx_status_t rc = torx_env_shape(c->ntasks, c->tpn, &s);
    ck_assert_msg(rc == TORX_OK, "ntasks=%d tpn=%d: %s", c->ntasks, c->tpn, torx_last_error());
    ck_assert_msg(s.x == c->x && s.y == c->y && s.z == c->z && s.t == c->tpn,
                  "ntasks=%d tpn=%d: got %ux%ux%u t=%u, expected %ux%ux%u t=%d", c->ntasks, c->tpn,
                  s.x, s.y, s.z, s.t, c->x, c->y, c->z, c->tpn);
    ck_assert_uint_ge(torx_shape_slots(s), (unsigned)c->ntasks);
}
END_TEST

typedef struct {
    const char *torus;
    int ntasks, tpn;
    torx_status_t status;
    unsigned x, y, z;
    const char *why;
} torus_case_t;

static const torus_case_t torus_cases[] = {
    {"4x2x1", 8, 1, TORX_OK, 4, 2, 1, NULL},
    {"2x2x2", 8, 1, TORX_OK, 2, 2, 2, NULL},
    {"4", 4, 1, TORX_OK, 4, 1, 1, NULL},
    {"4x2", 8, 1, TORX_OK, 4, 2, 1, NULL},
    {"2x2x1", 8, 2, TORX_OK, 2, 2, 1, NULL},
    {"255x255x255", 8, 1, TORX_OK, 255, 255, 255, NULL},
    {"8x8x8", 100, 1, TORX_OK, 8, 8, 8, NULL},
    {"2x2", 8, 1, TORX_ERR_ENV, 0, 0, 0,
     "has 4 node slots x 1 tasks per node = 4, fewer than the job's 8 tasks; use a larger torus "
     "or unset TORX_TORUS"},
    {"2x2x1", 8, 1, TORX_ERR_ENV, 0, 0, 0, "fewer than the job's 8 tasks"},
    {"0x2x2", 8, 1, TORX_ERR_ENV, 0, 0, 0, "dimension 1 is 0"},
    {"2x0", 8, 1, TORX_ERR_ENV, 0, 0, 0, "dimension 2 is 0"},
    {"2x2x2x2", 8, 1, TORX_ERR_ENV, 0, 0, 0, "more than 3 dimensions"},
    {"axb", 8, 1, TORX_ERR_ENV, 0, 0, 0, "dimension 1 is not a number"},
    {"256x1x1", 8, 1, TORX_ERR_ENV, 0, 0, 0, "dimension 1 is 256, must be 1..255"},
    {"1x1x99999999999999999999", 8, 1, TORX_ERR_ENV, 0, 0, 0,
     "dimension 3 is 99999999999999999999"},
    {"2x2x2junk", 8, 1, TORX_ERR_ENV, 0, 0, 0, "unexpected 'j'"},
    {"2x2x2 ", 8, 1, TORX_ERR_ENV, 0, 0, 0, "unexpected ' '"},
    {"2X2X2", 8, 1, TORX_ERR_ENV, 0, 0, 0, "unexpected 'X'"},
    {"2x", 8, 1, TORX_ERR_ENV, 0, 0, 0, "dimension 2 is not a number"},
    {"x2", 8, 1, TORX_ERR_ENV, 0, 0, 0, "dimension 1 is not a number"},
    {"2xx2", 8, 1, TORX_ERR_ENV, 0, 0, 0, "dimension 2 is not a number"},
    {"-2x2x2", 8, 1, TORX_ERR_ENV, 0, 0, 0, "not a number"},
    {"+2x2x2", 8, 1, TORX_ERR_ENV, 0, 0, 0, "not a number"},
};

START_TEST(env_shape_torus_table)
{
    const torus_case_t *c = &torus_cases[_i];
    setenv("TORX_TORUS", c->torus, 1);
    torx_shape_t s = {9, 9, 9, 9};
    torx_status_t rc = torx_env_shape(c->ntasks, c->tpn, &s);
    ck_assert_msg(rc == c->status, "TORX_TORUS='%s' ntasks=%d: got %s (%s)", c->torus, c->ntasks,
                  torx_status_str(rc), torx_last_error());
    if (rc == TORX_OK) {
        ck_assert_msg(s.x == c->x && s.y == c->y && s.z == c->z && s.t == c->tpn,
                      "TORX_TORUS='%s': got %ux%ux%u t=%u", c->torus, s.x, s.y, s.z, s.t);
    } else {
        ck_assert_msg(s.x == 9 && s.t == 9, "shape written on error");
        assert_error_names("TORX_TORUS", c->torus, c->why);
    }
}
END_TEST

START_TEST(env_shape_bad_args)
{
    torx_shape_t s;
    unsetenv("TORX_TORUS");
    ck_assert_int_eq(torx_env_shape(0, 1, &s), TORX_ERR_INVAL);
    ck_assert_ptr_nonnull(strstr(torx_last_error(), "ntasks=0"));
    ck_assert_int_eq(torx_env_shape(-3, 1, &s), TORX_ERR_INVAL);
    ck_assert_int_eq(torx_env_shape(8, 0, &s), TORX_ERR_INVAL);
    ck_assert_ptr_nonnull(strstr(torx_last_error(), "tasks_per_node=0"));
    ck_assert_int_eq(torx_env_shape(8, 256, &s), TORX_ERR_INVAL);
    ck_assert_ptr_nonnull(strstr(torx_last_error(), "tasks_per_node=256"));
    ck_assert_int_eq(torx_env_shape(8, 1, NULL), TORX_ERR_INVAL);
    /* 509 is prime: no torus with dimensions <= 255 has exactly 509 nodes;
     * the message suggests a cube that holds them. */
    ck_assert_int_eq(torx_env_shape(1018, 2, &s), TORX_ERR_ENV);
    ck_assert_ptr_nonnull(strstr(torx_last_error(), "509 nodes"));
    ck_assert_ptr_nonnull(strstr(torx_last_error(), "509x1x1"));
    ck_assert_ptr_nonnull(strstr(torx_last_error(), "TORX_TORUS=8x8x8"));
    /* More nodes than the largest torus holds. */
    ck_assert_int_eq(torx_env_shape(255 * 255 * 255 + 1, 1, &s), TORX_ERR_ENV);
    ck_assert_ptr_nonnull(strstr(torx_last_error(), "more than the largest torus"));
    /* Exactly the largest torus works. */
    ck_assert_int_eq(torx_env_shape(255 * 255 * 255, 1, &s), TORX_OK);
    ck_assert(s.x == 255 && s.y == 255 && s.z == 255 && s.t == 1);
}
END_TEST

/* ---- torxp_env_read ------------------------------------------------------ */

static void unset_all_torx(void)
{
    unsetenv("TORX_CHAOS");
    unsetenv("TORX_FIFO_PACKETS");
    unsetenv("TORX_BULK");
    unsetenv("TORX_VERBOSE");
}

START_TEST(env_read_defaults_and_values)
{
    torxp_env_t e;
    unset_all_torx();
    ck_assert_int_eq(torxp_env_read(&e), TORX_OK);
    ck_assert_int_eq(e.chaos_seed, 0);
    ck_assert_int_eq(e.fifo_packets, 128);
    ck_assert_int_eq(e.bulk_mode, TORXP_BULK_AUTO);
    ck_assert_int_eq(e.verbose, 0);

    setenv("TORX_CHAOS", "2147483647", 1);
    setenv("TORX_FIFO_PACKETS", "65536", 1);
    setenv("TORX_BULK", "fifo", 1);
    setenv("TORX_VERBOSE", "3", 1);
    ck_assert_int_eq(torxp_env_read(&e), TORX_OK);
    ck_assert_int_eq(e.chaos_seed, 2147483647L);
    ck_assert_int_eq(e.fifo_packets, 65536);
    ck_assert_int_eq(e.bulk_mode, TORXP_BULK_FIFO);
    ck_assert_int_eq(e.verbose, 3);

    setenv("TORX_FIFO_PACKETS", "16", 1);
    setenv("TORX_BULK", "cma", 1);
    ck_assert_int_eq(torxp_env_read(&e), TORX_OK);
    ck_assert_int_eq(e.fifo_packets, 16);
    ck_assert_int_eq(e.bulk_mode, TORXP_BULK_CMA);
    ck_assert_int_eq(torxp_env_read(NULL), TORX_ERR_INVAL);
}
END_TEST

typedef struct {
    const char *var, *value, *why;
} read_case_t;

static const read_case_t read_cases[] = {
    {"TORX_FIFO_PACKETS", "100", "is not a power of two"},
    {"TORX_FIFO_PACKETS", "96", "is not a power of two"},
    {"TORX_FIFO_PACKETS", "8", "is out of range (expected 16..65536)"},
    {"TORX_FIFO_PACKETS", "131072", "is out of range"},
    {"TORX_FIFO_PACKETS", "128k", "is not an integer"},
    {"TORX_BULK", "dma", "auto, cma, fifo"},
    {"TORX_BULK", "FIFO", "auto, cma, fifo"},
    {"TORX_VERBOSE", "4", "is out of range (expected -1..3)"},
    {"TORX_VERBOSE", "yes", "is not an integer"},
    {"TORX_CHAOS", "-1", "is out of range (expected 0..2147483647)"},
    {"TORX_CHAOS", "2147483648", "is out of range"},
    {"TORX_CHAOS", "seed", "is not an integer"},
};

START_TEST(env_read_errors)
{
    const read_case_t *c = &read_cases[_i];
    unset_all_torx();
    setenv(c->var, c->value, 1);
    torxp_env_t e = {.chaos_seed = -9, .fifo_packets = -9, .bulk_mode = -9, .verbose = -9};
    ck_assert_int_eq(torxp_env_read(&e), TORX_ERR_ENV);
    assert_error_names(c->var, c->value, c->why);
    ck_assert_msg(e.chaos_seed == -9 && e.fifo_packets == -9 && e.bulk_mode == -9 &&
                      e.verbose == -9,
                  "env written on error");
}
END_TEST

/* ---- status.c ------------------------------------------------------------ */

START_TEST(status_names_and_errors)
{
    static const struct {
        torx_status_t s;
        const char *name;
    } names[] = {
        {TORX_OK, "TORX_OK"},
        {TORX_AGAIN, "TORX_AGAIN"},
        {TORX_NO_ROOM, "TORX_NO_ROOM"},
        {TORX_ERR_INVAL, "TORX_ERR_INVAL"},
        {TORX_ERR_NOMEM, "TORX_ERR_NOMEM"},
        {TORX_ERR_SYS, "TORX_ERR_SYS"},
        {TORX_ERR_ENV, "TORX_ERR_ENV"},
        {TORX_ERR_PEER, "TORX_ERR_PEER"},
        {TORX_ERR_PROTO, "TORX_ERR_PROTO"},
        {TORX_ERR_UNSUPPORTED, "TORX_ERR_UNSUPPORTED"},
        {TORX_ERR_TRUNCATE, "TORX_ERR_TRUNCATE"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        ck_assert_str_eq(torx_status_str(names[i].s), names[i].name);
    ck_assert_str_eq(torx_status_str((torx_status_t)42), "TORX_UNKNOWN_STATUS");

    ck_assert_str_eq(torx_last_error(), "");
    ck_assert_int_eq(torxp_error(TORX_ERR_SYS, "torx: open(%s) failed: %s", "/x", "ENOENT"),
                     TORX_ERR_SYS);
    ck_assert_str_eq(torx_last_error(), "torx: open(/x) failed: ENOENT");
    /* Wrapping the previous message in a new one must work (same buffer). */
    torxp_error(TORX_ERR_PEER, "torx: attach failed: %s", torx_last_error());
    ck_assert_str_eq(torx_last_error(), "torx: attach failed: torx: open(/x) failed: ENOENT");
    /* Long messages are truncated, not overflowed. */
    char big[2000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    torxp_error(TORX_ERR_INVAL, "torx: %s", big);
    ck_assert_uint_gt(strlen(torx_last_error()), 100);
    ck_assert_uint_lt(strlen(torx_last_error()), sizeof big);
}
END_TEST

/* Runs fn with stderr captured; returns what was written (static buffer). */
static const char *capture_stderr(void (*fn)(void))
{
    static char out[4096];
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    FILE *tmp = tmpfile();
    ck_assert_ptr_nonnull(tmp);
    ck_assert_int_ge(dup2(fileno(tmp), STDERR_FILENO), 0);
    fn();
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(tmp);
    size_t n = fread(out, 1, sizeof out - 1, tmp);
    out[n] = '\0';
    fclose(tmp);
    return out;
}

static void log_with_dev(void)
{
    torx_pkt_dev_t dev = {.rank = 3, .verbose = 1};
    torxp_log(&dev, 0, "warning %d", 0);
    torxp_log(&dev, 1, "info %s", "one");
    torxp_log(&dev, 2, "debug %s", "hidden");
}

static void log_without_dev(void)
{
    torxp_log(NULL, 0, "no device %d", 7);
    torxp_log(NULL, 2, "level two");
    torxp_log(NULL, 3, "level three");
}

START_TEST(log_levels)
{
    ck_assert_str_eq(capture_stderr(log_with_dev), "torx[3]: warning 0\ntorx[3]: info one\n");
    /* Without a device, TORX_VERBOSE decides (read once, on first use; each
     * Check test runs in a fresh process). */
    setenv("TORX_VERBOSE", "2", 1);
    ck_assert_str_eq(capture_stderr(log_without_dev), "torx[?]: no device 7\ntorx[?]: level two\n");
    /* Logging leaves the last error alone. */
    torxp_error(TORX_ERR_ENV, "torx: keep me");
    capture_stderr(log_without_dev);
    ck_assert_str_eq(torx_last_error(), "torx: keep me");
}
END_TEST

static void log_with_quiet_dev(void)
{
    torx_pkt_dev_t dev = {.rank = 3, .verbose = -1};
    torxp_log(&dev, 0, "warning %d", 0);
}

START_TEST(log_silenced)
{
    ck_assert_str_eq(capture_stderr(log_with_quiet_dev), "");
    setenv("TORX_VERBOSE", "-1", 1); /* no device: even warnings are silent */
    ck_assert_str_eq(capture_stderr(log_without_dev), "");
}
END_TEST

START_TEST(log_bad_verbose_is_quiet)
{
    setenv("TORX_VERBOSE", "lots", 1);
    ck_assert_str_eq(capture_stderr(log_without_dev), "torx[?]: no device 7\n");
    ck_assert_str_eq(torx_last_error(), "");
}
END_TEST

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

static Suite *env_suite(void)
{
    Suite *s = suite_create("env");
    TCase *tc = tcase_create("env_int");
    tcase_add_loop_test(tc, env_int_table, 0, N_OF(int_cases));
    tcase_add_test(tc, env_int_negative_range_and_args);
    suite_add_tcase(s, tc);

    tc = tcase_create("env_choice");
    tcase_add_loop_test(tc, env_choice_table, 0, N_OF(choice_cases));
    tcase_add_test(tc, env_choice_default_and_args);
    suite_add_tcase(s, tc);

    tc = tcase_create("env_shape");
    tcase_add_loop_test(tc, env_shape_derived_table, 0, N_OF(derived_cases));
    tcase_add_loop_test(tc, env_shape_torus_table, 0, N_OF(torus_cases));
    tcase_add_test(tc, env_shape_bad_args);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);

    tc = tcase_create("env_read");
    tcase_add_test(tc, env_read_defaults_and_values);
    tcase_add_loop_test(tc, env_read_errors, 0, N_OF(read_cases));
    suite_add_tcase(s, tc);

    tc = tcase_create("status");
    tcase_add_test(tc, status_names_and_errors);
    tcase_add_test(tc, log_levels);
    tcase_add_test(tc, log_silenced);
    tcase_add_test(tc, log_bad_verbose_is_quiet);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(env_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
