/* <torx/version.h> and torx_version(): the macros agree with each other and
 * with configure's version, and the library reports "VERSION (COMMIT)" with
 * the commit make recorded (src/torx_commit.h). */
#include "config.h" /* PACKAGE_VERSION */
#include "harness.h"

#include <torx/version.h>

#include "torx_commit.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

START_TEST(macros_agree)
{
    char parts[32];
    snprintf(parts, sizeof parts, "%d.%d.%d", TORX_VERSION_MAJOR, TORX_VERSION_MINOR,
             TORX_VERSION_PATCH);
    ck_assert_str_eq(parts, TORX_VERSION);
    ck_assert_str_eq(TORX_VERSION, PACKAGE_VERSION);
    ck_assert_int_eq(TORX_VERSION_NUM,
                     TORX_VERSION_MAJOR * 10000 + TORX_VERSION_MINOR * 100 + TORX_VERSION_PATCH);
#if TORX_VERSION_NUM < 900
#error "TORX_VERSION_NUM is not usable in #if"
#endif
}
END_TEST

START_TEST(library_reports_version_and_commit)
{
    const char *v = torx_version();
    ck_assert_ptr_nonnull(v);
    ck_assert_ptr_eq(v, torx_version());
    char expect[128];
    snprintf(expect, sizeof expect, "%s (%s)", TORX_VERSION, TORX_COMMIT);
    ck_assert_str_eq(v, expect);
    /* The commit: a short hash, or "unknown"; never empty. */
    const char *c = TORX_COMMIT;
    ck_assert_uint_gt(strlen(c), 0);
    for (; *c; c++)
        ck_assert_msg(isalnum((unsigned char)*c) || strchr("._-", *c), "commit '%s'", TORX_COMMIT);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("version");
    TCase *tc = tcase_create("version");
    tcase_add_test(tc, macros_agree);
    tcase_add_test(tc, library_reports_version_and_commit);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
