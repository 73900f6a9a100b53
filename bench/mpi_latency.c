/* mpi_latency: MPI ping-pong between two ranks, the half round trip per
 * message size (0 B, then powers of two up to 4 MiB; -s for chosen sizes).
 *
 * Rank 0 sends size bytes with MPI_Send, rank 1 receives them with MPI_Recv
 * and sends them back; rank 0's MPI_Recv ends the round trip. Each size:
 * warm-up round trips (untimed), then batches of round trips, each timed by
 * rank 0 as one sample (ns per half round trip = batch time / 2 / round
 * trips; with -i the sizes' batches interleaved, mpi_bench.h); then a
 * verified exchange: rank 0 sends its pattern, rank 1 checks
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

static void lat_run(mb_ctx_t *c, const mb_plan_t *p, long reps)
{
    const mb_opts_t *o = c->o;
    for (long k = 0; k < reps; k++) {
        if (c->rank == 0) {
            MB_CALL(o, MPI_Send(c->sbuf, p->n, MPI_BYTE, c->peer, MB_TAG, MPI_COMM_WORLD));
            MB_CALL(o, MPI_Recv(c->rbuf, p->n, MPI_BYTE, c->peer, MB_TAG, MPI_COMM_WORLD,
                                MPI_STATUS_IGNORE));
        } else {
            MB_CALL(o, MPI_Recv(c->rbuf, p->n, MPI_BYTE, c->peer, MB_TAG, MPI_COMM_WORLD,
                                MPI_STATUS_IGNORE));
            MB_CALL(o, MPI_Send(c->sbuf, p->n, MPI_BYTE, c->peer, MB_TAG, MPI_COMM_WORLD));
        }
    }
}

static double lat_sample(const mb_ctx_t *c, const mb_plan_t *p, long reps, double ns)
{
    (void)c, (void)p;
    return ns / (2.0 * (double)reps);
}

static void lat_finish(mb_ctx_t *c, mb_plan_t *p)
{
    /* There and back, each direction checked by its receiver. */
    mb_verify(c->o, c->rank, p->size, c->sbuf, c->rbuf, 1, c->rank == 0, c->rank == 1, 2, "ping");
    mb_verify(c->o, c->rank, p->size, c->sbuf, c->rbuf, 1, c->rank == 1, c->rank == 0, 3, "pong");
    if (c->rank == 0)
        mb_lat_row(p->size, p->iters, p->batch, p->samples, p->nb);
}

int main(int argc, char **argv)
{
    mb_opts_t o;
    int rank;

    mb_parse(&o, argc, argv, "mpi_latency", 0, 20000, 0);
    mb_init(&o, &argc, &argv, &rank);
    if (rank == 0)
        mb_lat_header();

    const mb_prog_t prog = {lat_run, lat_sample, lat_finish};
    return mb_run(&o, rank, 1, 0, &prog);
}
