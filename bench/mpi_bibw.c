/* mpi_bibw: bidirectional streaming bandwidth between two ranks, per message
 * size (1 B to 4 MiB by powers of two; -m 16M for more, -s for chosen
 * sizes), as osu_bibw measures it.
 *
 * One window: each rank posts WINDOW (64) MPI_Irecv of size bytes into one
 * buffer, then WINDOW MPI_Isend from another, and waits for all of them;
 * both directions run at once. Each size: warm-up windows (untimed), then
 * batches of windows, each timed by rank 0 as one sample (the bytes of both
 * directions / time); then a verified window of 4 messages each way, each
 * with its own pattern and buffer slice, checked byte by byte by both ranks.
 *
 * Pure MPI-3.1 C (mpi_bench.h): built unchanged by the mpicc of torx MPICH,
 * Debian's MPICH and Open MPI; run by bench/run-mpi-bench.sh.
 *
 *   mpiexec -n 2 -bind-to core ./mpi_bibw [-s 1M,4M] [-n 1000] [-W 64] ...
 *
 * Output: "# " lines, then one row per size (mpi_bench.h), the sum of the
 * two directions:
 *   bibw size_B windows window batch samples best_MBps med_MBps worst_MBps
 *        best_GBps med_GBps ok
 */
#include "mpi_bench.h"

int main(int argc, char **argv)
{
    mb_opts_t o;
    int rank;

    mb_parse(&o, argc, argv, "mpi_bibw", 1, 1000, 64);
    mb_init(&o, &argc, &argv, &rank);
    if (rank == 0)
        mb_bw_header("both ways: each rank sends a window and receives a window at once; "
                     "the sum of the two directions");

    unsigned char *sbuf = mb_alloc(&o, (size_t)MB_CHECK_MSGS * o.max_size);
    unsigned char *rbuf = mb_alloc(&o, (size_t)MB_CHECK_MSGS * o.max_size);
    MPI_Request *req = malloc(2 * (size_t)o.window * sizeof *req);
    int peer = 1 - rank;
    if (!req)
        mb_die(&o, "out of memory");

    for (int i = 0; i < o.nsizes; i++) {
        mb_plan_t p = mb_plan(&o, i, rank, sbuf);
        for (long b = -1; b < p.nb; b++) { /* b == -1: the warm-up */
            long reps = b < 0 ? p.warm : p.batch;
            double t0 = mb_now_ns();
            for (long k = 0; k < reps; k++) {
                for (int w = 0; w < o.window; w++)
                    MB_CALL(&o, MPI_Irecv(rbuf, p.n, MPI_BYTE, peer, MB_TAG, MPI_COMM_WORLD,
                                          &req[w]));
                for (int w = 0; w < o.window; w++)
                    MB_CALL(&o, MPI_Isend(sbuf, p.n, MPI_BYTE, peer, MB_TAG, MPI_COMM_WORLD,
                                          &req[o.window + w]));
                mb_waitall(&o, 2 * o.window, req);
            }
            if (b >= 0)
                p.samples[b] = 2.0 * (double)reps * o.window * (double)p.size / (mb_now_ns() - t0);
        }

        mb_verify(&o, rank, p.size, sbuf, rbuf, MB_CHECK_MSGS, 1, 1, 2, "bibw");

        if (rank == 0)
            mb_bw_row("bibw", p.size, p.iters, o.window, p.batch, p.samples, p.nb);
        mb_plan_free(&p);
    }

    free(req);
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
