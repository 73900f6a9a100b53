/* mpi_bw: one-way streaming bandwidth between two ranks, per message size
 * (1 B to 4 MiB by powers of two; -m 16M for more, -s for chosen sizes), as
 * osu_bw measures it.
 *
 * One window: rank 0 posts WINDOW (64) MPI_Isend of size bytes from one
 * buffer and waits for them; rank 1 posts as many MPI_Irecv into one buffer,
 * waits for them, and sends a 1-byte acknowledgement, which rank 0 receives.
 * Each size: warm-up windows (untimed), then batches of windows, each timed
 * by rank 0 as one sample (bytes / time; with -i the sizes' batches
 * interleaved, mpi_bench.h); then a verified window of 4
 * messages, each with its own pattern and its own buffer slice, checked
 * byte by byte by rank 1.
 *
 * Pure MPI-3.1 C (mpi_bench.h): built unchanged by the mpicc of torx MPICH,
 * Debian's MPICH and Open MPI; run by bench/run-mpi-bench.sh.
 *
 *   mpiexec -n 2 -bind-to core ./mpi_bw [-s 1M,4M] [-n 1000] [-W 64] ...
 *
 * Output: "# " lines, then one row per size (mpi_bench.h):
 *   bw size_B windows window batch samples best_MBps med_MBps worst_MBps
 *      best_GBps med_GBps ok
 */
#include "mpi_bench.h"

static void bw_run(mb_ctx_t *c, const mb_plan_t *p, long reps)
{
    const mb_opts_t *o = c->o;
    unsigned char ack = 0;
    for (long k = 0; k < reps; k++) {
        if (c->rank == 0) {
            for (int w = 0; w < o->window; w++)
                MB_CALL(o, MPI_Isend(c->sbuf, p->n, MPI_BYTE, c->peer, MB_TAG, MPI_COMM_WORLD,
                                     &c->req[w]));
            mb_waitall(o, o->window, c->req);
            MB_CALL(o, MPI_Recv(&ack, 1, MPI_BYTE, c->peer, MB_ACK_TAG, MPI_COMM_WORLD,
                                MPI_STATUS_IGNORE));
        } else {
            for (int w = 0; w < o->window; w++)
                MB_CALL(o, MPI_Irecv(c->rbuf, p->n, MPI_BYTE, c->peer, MB_TAG, MPI_COMM_WORLD,
                                     &c->req[w]));
            mb_waitall(o, o->window, c->req);
            MB_CALL(o, MPI_Send(&ack, 1, MPI_BYTE, c->peer, MB_ACK_TAG, MPI_COMM_WORLD));
        }
    }
}

static double bw_sample(const mb_ctx_t *c, const mb_plan_t *p, long reps, double ns)
{
    return (double)reps * c->o->window * (double)p->size / ns;
}

static void bw_finish(mb_ctx_t *c, mb_plan_t *p)
{
    mb_verify(c->o, c->rank, p->size, c->sbuf, c->rbuf, MB_CHECK_MSGS, c->rank == 0, c->rank == 1,
              2, "bw");
    if (c->rank == 0)
        mb_bw_row("bw", p->size, p->iters, c->o->window, p->batch, p->samples, p->nb);
}

int main(int argc, char **argv)
{
    mb_opts_t o;
    int rank;

    mb_parse(&o, argc, argv, "mpi_bw", 1, 1000, 64);
    mb_init(&o, &argc, &argv, &rank);
    if (rank == 0)
        mb_bw_header("one way: rank 0 sends windows, rank 1 acknowledges each window with 1 byte");

    const mb_prog_t prog = {bw_run, bw_sample, bw_finish};
    return mb_run(&o, rank, MB_CHECK_MSGS, o.window, &prog);
}
