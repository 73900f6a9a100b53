/* nocma-run: runs a command with cross-memory attach forbidden, as many
 * container runtimes forbid it.
 *
 *   nocma-run COMMAND [ARG...]
 *   nocma-run --check      exit 0 when the ban holds in this process
 *
 * Installs a seccomp filter (libseccomp) that makes process_vm_readv and
 * process_vm_writev fail with EPERM, then execs COMMAND. The filter is
 * inherited across fork and exec, so mpiexec, hydra's proxies and every
 * rank run under it: torx must notice at start-up, fall back to streaming
 * bulk data through the FIFOs, and pass everything (test/mpi/nocma.sh).
 * --check proves the ban is real: with the filter in place a
 * process_vm_readv of this process's own memory must fail with EPERM. */
#define _GNU_SOURCE
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static int ban_cma(void)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW); /* sets no_new_privs */
    if (!ctx)
        return -ENOMEM;
    int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(process_vm_readv), 0);
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(process_vm_writev), 0);
    if (rc == 0)
        rc = seccomp_load(ctx);
    seccomp_release(ctx);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: nocma-run COMMAND [ARG...] | nocma-run --check\n");
        return 2;
    }
    int rc = ban_cma();
    if (rc != 0) {
        fprintf(stderr, "nocma-run: installing the seccomp filter failed: %s\n", strerror(-rc));
        return 2;
    }
    if (strcmp(argv[1], "--check") == 0) {
        char src[16] = "probe", dst[16] = "";
        struct iovec l = {dst, sizeof dst}, r = {src, sizeof src};
        ssize_t n = process_vm_readv(getpid(), &l, 1, &r, 1, 0);
        if (n >= 0 || errno != EPERM) {
            fprintf(stderr, "nocma-run: process_vm_readv was not banned (%s)\n",
                    n >= 0 ? "it copied" : strerror(errno));
            return 1;
        }
        printf("nocma-run: process_vm_readv fails with EPERM under the filter\n");
        return 0;
    }
    execvp(argv[1], argv + 1);
    fprintf(stderr, "nocma-run: cannot run %s: %s\n", argv[1], strerror(errno));
    return 127;
}
