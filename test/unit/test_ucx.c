/* The ucx device (src/packet/ucx/): start-up errors that name the variable,
 * the transports UCX chose in TORX_VERBOSE=1, and the cases every network
 * device passes (net_cases.h: staged pieces with their descriptors aboard,
 * bulk transfers by RMA, the collective network bit for bit as on shm, a
 * peer that vanishes). Every packet crosses UCX
 * (TORX_UCX_LOCAL=ucx); the generic tests rerun on it in
 * test/ucx-variant.sh. */
#include "harness.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void use_ucx(void)
{
    setenv("TORX_DEVICE", "ucx", 1);
    /* One host: without this, its tasks would reach each other through shm. */
    setenv("TORX_UCX_LOCAL", "ucx", 1);
    unsetenv("TORX_UCX_TASKS_PER_HOST");
    unsetenv("TORX_UCX_TLS");
    unsetenv("TORX_UCX_IFACE");
    unsetenv("TORX_UCX_TX_PACKETS");
    unsetenv("TORX_FIFO_PACKETS");
    unsetenv("TORX_CHAOS");
    unsetenv("TORX_BULK");
}

#define NET_NAME "ucx"
static void use_net(void)
{
    use_ucx();
}

static const char *net_bulk_path(void)
{
    return "messages";
}
#include "net_cases.h"

/* ---- Start-up errors ------------------------------------------------------- */

static const open_err_t open_errs[] = {
    {"TORX_UCX_TLS", "nosuchtransport", TORX_ERR_ENV, "TORX_UCX_TLS='nosuchtransport'", NULL},
    {"TORX_UCX_TLS", "tcp ud", TORX_ERR_ENV, "TORX_UCX_TLS='tcp ud'", "expected"},
    {"TORX_UCX_IFACE", "nosuchif0", TORX_ERR_ENV, "TORX_UCX_IFACE='nosuchif0'", NULL},
    {"TORX_UCX_TX_PACKETS", "0", TORX_ERR_ENV, "TORX_UCX_TX_PACKETS='0'", "out of range"},
    {"TORX_BULK", "cma", TORX_ERR_UNSUPPORTED, "TORX_BULK=cma", "UCX"},
    {"TORX_UCX_LOCAL", "both", TORX_ERR_ENV, "TORX_UCX_LOCAL='both'", "shm, ucx"},
};

START_TEST(startup_errors)
{
    const open_err_t *e = &open_errs[_i];
    use_ucx();
    setenv(e->var, e->value, 1);
    RUN_JOB(2, open_err_task, (void *)e);
    unsetenv(e->var);
}
END_TEST

/* ---- What TORX_VERBOSE=1 says ---------------------------------------------------- */

static int verbose_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_pkt_dev_t *dev;
    TASK_CHECK(test_open(boot, (torx_shape_t){2, 1, 1, 1}, &dev) == TORX_OK, "%s",
               torx_last_error());
    TASK_CHECK(strcmp(torx_pkt_device_name(dev), "ucx") == 0, "device %s",
               torx_pkt_device_name(dev));
    const torx_shape_t shape = {2, 1, 1, 1};
    TASK_CHECK(torx_stage_max(dev) == 16384, "staged pieces of %zu bytes", torx_stage_max(dev));
    TASK_CHECK(torx_stage_reaches(dev, test_coord_of(shape, 1 - boot->rank)) &&
                   !torx_stage_reaches(dev, test_coord_of(shape, boot->rank)),
               "staging reaches the other task and not this one");
    TASK_CHECK(dev_barrier(dev) == TORX_OK, "barrier: %s", torx_last_error());
    torx_pkt_close(dev);
    return 0;
}

START_TEST(verbose_names_transports)
{
    use_ucx();
    setenv("TORX_UCX_TLS", "tcp", 1);
    setenv("TORX_VERBOSE", "1", 1);
    char buf[8192];
    const int rc = test_job_stderr(2, verbose_task, NULL, buf, sizeof buf);
    unsetenv("TORX_VERBOSE");
    unsetenv("TORX_UCX_TLS");
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(strstr(buf, "transports asked for: tcp") && strstr(buf, "UCX chose tcp/"),
                  "TORX_VERBOSE=1 does not name the transports: %s", buf);
}
END_TEST

static Suite *ucx_suite(void)
{
    Suite *s = suite_create("ucx");
    TCase *tc = tcase_create("ucx");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, startup_errors, 0, (int)(sizeof open_errs / sizeof open_errs[0]));
    tcase_add_test(tc, verbose_names_transports);
    tcase_add_test(tc, stage_carries_descriptor);
    tcase_add_test(tc, bulk_rma_sizes);
    tcase_add_test(tc, cn_matches_shm_bitwise);
    tcase_add_loop_test(tc, gi_rounds_hold, 0, 2);
    tcase_add_test(tc, dead_peer_named);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return test_run_suite(ucx_suite());
}
