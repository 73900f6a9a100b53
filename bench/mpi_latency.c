/* mpi_latency: MPI ping-pong between two ranks, the half round trip per
 * message size (0 B, then powers of two up to 4 MiB; -s for chosen sizes).
 *
 * Rank 0 sends size bytes with MPI_Send, rank 1 receives them with MPI_Recv
 * and sends them back; rank 0's MPI_Recv ends the round trip. Each size:
 * warm-up round trips (untimed), then batches of round trips, each timed by
 * rank 0 as one sample (ns per half round trip = batch time / 2 / round
 * trips); then a verified exchange: rank 0 sends its pattern, rank 1 checks
 * every byte, answers with its own pattern, rank 0 checks it. Separate send
 * and receive buffers, as osu_latency.
 *
 * Pure MPI-3.1 C (mpi_bench.h): built unchanged by the mpicc of torx MPICH,
 * Debian's MPICH and Open MPI; run by bench/run-mpi-bench.sh.
 *
 *   mpiexec -n 2 -bind-to core ./mpi_latency [-s 8] [-n 20000] ...
 *
 * Output: "# " lines, then one row per size (mpi_bench.h):
 *   lat size_B iters batch samples min_ns med_ns mean_ns max_ns ok
 */
#include "mpi_bench.h"

int main(int argc, char **argv)
{
    mb_opts_t o;
    int rank;

    mb_parse(&o, argc, argv, "mpi_latency", 0, 20000, 0);
    mb_init(&o, &argc, &argv, &rank);
    if (rank == 0)
        mb_lat_header();

    unsigned char *sbuf = mb_alloc(&o, o.max_size);
    unsigned char *rbuf = mb_alloc(&o, o.max_size);
    int peer = 1 - rank;

    for (int i = 0; i < o.nsizes; i++) {
        mb_plan_t p = mb_plan(&o, i, rank, sbuf);
        for (long b = -1; b < p.nb; b++) { /* b == -1: the warm-up */
            long reps = b < 0 ? p.warm : p.batch;
            double t0 = mb_now_ns();
            if (rank == 0) {
                for (long k = 0; k < reps; k++) {
                    MB_CALL(&o, MPI_Send(sbuf, p.n, MPI_BYTE, peer, MB_TAG, MPI_COMM_WORLD));
                    MB_CALL(&o, MPI_Recv(rbuf, p.n, MPI_BYTE, peer, MB_TAG, MPI_COMM_WORLD,
                                         MPI_STATUS_IGNORE));
                }
            } else {
                for (long k = 0; k < reps; k++) {
                    MB_CALL(&o, MPI_Recv(rbuf, p.n, MPI_BYTE, peer, MB_TAG, MPI_COMM_WORLD,
                                         MPI_STATUS_IGNORE));
                    MB_CALL(&o, MPI_Send(sbuf, p.n, MPI_BYTE, peer, MB_TAG, MPI_COMM_WORLD));
                }
            }
            if (b >= 0)
                p.samples[b] = (mb_now_ns() - t0) / (2.0 * (double)reps);
        }

        /* There and back, each direction checked by its receiver. */
        mb_verify(&o, rank, p.size, sbuf, rbuf, 1, rank == 0, rank == 1, 2, "ping");
        mb_verify(&o, rank, p.size, sbuf, rbuf, 1, rank == 1, rank == 0, 3, "pong");

        if (rank == 0)
            mb_lat_row(p.size, p.iters, p.batch, p.samples, p.nb);
        mb_plan_free(&p);
    }

    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
