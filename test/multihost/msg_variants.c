/* The message layer's own protocol tests (test/unit/msg_test.h) in a job
 * that hydra launches, so that they run across the emulated hosts of
 * check-torx.sh over TORX_DEVICE=ofi, where test/unit's fork jobs cannot
 * go: every task sends its list of sizes (around each protocol boundary,
 * 1 MiB, optionally 64 MiB) to the next rank and receives the previous
 * rank's, each message's data and protocol checked; then the mixed-protocol
 * run (every task to every other, in order, under TORX_CHAOS when set).
 *
 *   mpiexec -n N [-ppn P] msg_variants VARIANT...
 *
 * VARIANT: eager, adaptive, rzv, rzv-packets, auto, vn (2 tasks per node:
 * run with -ppn 2), big (auto with 64 MiB) or mix. Rank 0 prints
 * " No Errors" when every task passed every variant; the exit status is
 * non-zero on any failure. Built by check-torx.sh against the installed
 * libtorx. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* clock_gettime, setenv in the test harness */
#endif
#include "harness.h"
#include "msg_test.h"

/* name, protocol, eager, adaptive, rzv data, mode, bulk, big, cut; the
 * number of tasks is the job's. */
static const variant_t variants[] = {
    {"eager", TORX_PROTO_EAGER, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, NULL, NULL, NULL},
    {"adaptive", TORX_PROTO_ADAPTIVE, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, NULL, NULL, NULL},
    {"rzv", TORX_PROTO_RZV, NULL, NULL, NULL, NULL, NULL, 0, 1, 0, NULL, NULL, NULL},
    {"rzv-packets", TORX_PROTO_RZV, NULL, NULL, "packets", NULL, NULL, 0, 0, 0, NULL, NULL, NULL},
    {"auto", TORX_PROTO_AUTO, NULL, "1000", NULL, NULL, NULL, 0, 1, 0, NULL, NULL, NULL},
    {"vn", TORX_PROTO_AUTO, NULL, NULL, NULL, "vn", NULL, 0, 0, 0, NULL, NULL, NULL},
    {"big", TORX_PROTO_AUTO, NULL, NULL, NULL, NULL, NULL, 1, 0, 0, NULL, NULL, NULL},
};

#define MIX_PER_PEER 300u

int main(int argc, char **argv)
{
    torx_boot_t boot;
    if (torx_boot_pmi_init(&boot) != TORX_OK) {
        fprintf(stderr, "msg_variants: %s\n", torx_last_error());
        return 2;
    }
    int failed = 0;
    for (int a = 1; a < argc; a++) {
        const double t0 = test_now();
        int rc;
        if (!strcmp(argv[a], "mix")) {
            uint32_t per_peer = MIX_PER_PEER;
            rc = mix_task(&boot, &per_peer);
        } else {
            const variant_t *v = NULL;
            for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++)
                if (!strcmp(argv[a], variants[i].name))
                    v = &variants[i];
            if (!v) {
                fprintf(stderr, "msg_variants: unknown variant '%s'\n", argv[a]);
                return 2;
            }
            variant_t job = *v;
            job.ntasks = boot.size;
            test_variant_env(&job);
            rc = proto_task(&boot, &job);
        }
        failed += rc != 0;
        if (boot.rank == 0)
            printf("msg_variants: %s on %d tasks: %s (%.1f s)\n", argv[a], boot.size,
                   rc ? "FAILED" : "ok", test_now() - t0);
        if (boot.barrier(&boot) != TORX_OK) {
            fprintf(stderr, "msg_variants: rank %d: barrier: %s\n", boot.rank, torx_last_error());
            return 1;
        }
    }
    int all[4096] = {0};
    if (boot.size > 4096 || boot.allgather(&boot, &failed, all, sizeof failed) != TORX_OK) {
        fprintf(stderr, "msg_variants: rank %d: allgather failed\n", boot.rank);
        return 1;
    }
    int total = 0;
    for (int r = 0; r < boot.size; r++)
        total += all[r];
    if (boot.rank == 0 && total == 0)
        printf(" No Errors\n");
    else if (boot.rank == 0)
        printf("msg_variants: %d failures over %d tasks\n", total, boot.size);
    if (boot.finalize)
        boot.finalize(&boot);
    return failed != 0;
}
