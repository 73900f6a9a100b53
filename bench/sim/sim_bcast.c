/* sim_bcast: broadcast bandwidth of the algorithm the environment selects
 * (TORX_COLL, TORX_COLL_BCAST; torx_coll_select), on every task of the
 * job: the original's Fig 5(b). A message-layer program: it runs under
 * torx-sim (simulated time) and under mpiexec on shm or ofi.
 *
 *   sim_bcast [--sizes LIST] [--iters N] [--root R]
 *
 * LIST is comma-separated sizes in bytes (default 64 KiB to 4 MiB by
 * powers of 2). For each size, N times (default 3): a barrier, the root
 * reads its clock, the broadcast, every task reads its clock when its copy
 * is complete, and the latest of those (an allreduce MAX) less the root's
 * start is the broadcast's time. Rank 0 prints the mean:
 *   bcast alg=bcast:torus tasks=32 root=0 bytes=65536 us=1234.5 MBps=53.1
 * (MB = 10^6 bytes). The times of different tasks are compared, so they
 * need one clock: simulated time on sim, the monotonic clock of one host
 * on shm. Every byte is checked after each broadcast. */
#include <torx/coll.h>
#include <torx/msg.h>

#include "sim_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXLIST 64

static int die(const char *what)
{
    fprintf(stderr, "sim_bcast: %s: %s\n", what, torx_last_error());
    return 1;
}

static unsigned char pattern(size_t i, long iter)
{
    return (unsigned char)((i * 131u + (size_t)iter * 7u) >> 3);
}

int main(int argc, char **argv)
{
    long sizes[MAXLIST];
    int nsizes = 0;
    for (long s = 64 * 1024; s <= 4 * 1024 * 1024; s *= 2)
        sizes[nsizes++] = s;
    long iters = 3, root = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) {
            fprintf(stderr, "usage: sim_bcast [--sizes LIST] [--iters N] [--root R]\n");
            return 2;
        }
        const char *v = argv[++i];
        char *end = NULL;
        if (!strcmp(argv[i - 1], "--sizes")) {
            nsizes = sim_parse_list("sim_bcast", v, sizes, MAXLIST, "size", 1, 1L << 30);
        } else if (!strcmp(argv[i - 1], "--iters")) {
            iters = strtol(v, &end, 10);
            if (*end || iters < 1 || iters > 1000000)
                iters = -1;
        } else if (!strcmp(argv[i - 1], "--root")) {
            root = strtol(v, &end, 10);
            if (*end || root < 0)
                root = -1;
        } else {
            nsizes = -1;
        }
        if (nsizes < 0 || iters < 1 || root < 0) {
            fprintf(stderr, "sim_bcast: bad argument %s %s\n", argv[i - 1], v);
            return 2;
        }
    }
    long maxsize = 1;
    for (int i = 0; i < nsizes; i++)
        if (sizes[i] > maxsize)
            maxsize = sizes[i];

    torx_ctx_t *ctx;
    if (torx_init(NULL, &ctx) != TORX_OK)
        return die("torx_init");
    const int rank = torx_rank(ctx), size = torx_size(ctx);
    if (root >= size) {
        fprintf(stderr, "sim_bcast: --root %ld, but the job has %d tasks\n", root, size);
        return 2;
    }
    torx_coll_t *c;
    torx_coll_group_t *g;
    if (torx_coll_init(ctx, NULL, &c) != TORX_OK)
        return die("torx_coll_init");
    if (torx_coll_group_create(c, 1, size, NULL, rank, &g) != TORX_OK)
        return die("torx_coll_group_create");
    const torx_coll_alg_t bar = torx_coll_select(g, TORX_COLL_BARRIER, 0, 0, 0);
    const torx_coll_alg_t max =
        torx_coll_select(g, TORX_COLL_ALLREDUCE, sizeof(double), TORX_COLL_DOUBLE, TORX_COLL_MAX);
    if (bar == TORX_COLL_ALG_FALLBACK || max == TORX_COLL_ALG_FALLBACK) {
        fprintf(stderr, "sim_bcast: the environment selects no torx barrier or allreduce "
                        "(TORX_COLL, TORX_COLL_BARRIER, TORX_COLL_ALLREDUCE)\n");
        return 1;
    }
    unsigned char *buf = malloc((size_t)maxsize);
    if (!buf)
        return die("out of memory");

    for (int z = 0; z < nsizes; z++) {
        const size_t len = (size_t)sizes[z];
        const torx_coll_alg_t alg = torx_coll_select(g, TORX_COLL_BCAST, len, 0, 0);
        const char *name = torx_coll_last_algorithm(g);
        if (alg == TORX_COLL_ALG_FALLBACK) {
            fprintf(stderr,
                    "sim_bcast: the environment selects %s for a bcast of %zu B, which this "
                    "program does not have (TORX_COLL_BCAST=torus, cn or paced)\n",
                    name, len);
            return 1;
        }
        double total = 0;
        for (long it = 0; it < iters; it++) {
            for (size_t i = 0; i < len; i++)
                buf[i] = rank == root ? pattern(i, it) : 0;
            if (torx_coll_barrier(g, bar) != TORX_OK)
                return die("barrier");
            const double t0 = torx_wtime(ctx);
            if (torx_coll_bcast(g, alg, buf, len, (int)root) != TORX_OK)
                return die("bcast");
            double t1 = torx_wtime(ctx);
            for (size_t i = 0; i < len; i++)
                if (buf[i] != pattern(i, it)) {
                    fprintf(stderr, "sim_bcast: rank %d: byte %zu of %zu is wrong\n", rank, i, len);
                    return 1;
                }
            if (torx_coll_allreduce(g, max, NULL, &t1, 1, TORX_COLL_DOUBLE, TORX_COLL_MAX) !=
                TORX_OK)
                return die("allreduce");
            total += t1 - t0; /* the root's start: t0 is only used there */
        }
        if (rank == root) {
            const double s = total / (double)iters;
            printf("bcast alg=%s tasks=%d root=%ld bytes=%zu us=%.1f MBps=%.1f\n", name, size, root,
                   len, s * 1e6, (double)len / s / 1e6);
            fflush(stdout);
        }
    }
    free(buf);
    torx_coll_group_free(g);
    torx_coll_finalize(c);
    if (torx_finalize(ctx) != TORX_OK)
        return die("torx_finalize");
    return 0;
}
