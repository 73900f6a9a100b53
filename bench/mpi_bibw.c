/* mpi_bibw: bidirectional streaming bandwidth between two ranks, per message
 * size (1 B to 4 MiB by powers of two; -m 16M for more, -s for chosen
 * sizes), as osu_bibw measures it.
 *
 * One window: each rank posts WINDOW (64) MPI_Irecv of size bytes into one
 * buffer, then WINDOW MPI_Isend from another, and waits for all of them;
 * both directions run at once. Each size: warm-up windows (untimed), then
 * batches of windows, each timed by rank 0 as one sample (the bytes of both
 * directions / time; with -i the sizes' batches interleaved, mpi_bench.h);
 * then a verified window of 4 messages each way, each
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

static void bibw_run(mb_ctx_t *c, const mb_plan_t *p, long reps)
{
    const mb_opts_t *o = c->o;
    for (long k = 0; k < reps; k++) {
        for (int w = 0; w < o->window; w++)
            MB_CALL(
                o, MPI_Irecv(c->rbuf, p->n, MPI_BYTE, c->peer, MB_TAG, MPI_COMM_WORLD, &c->req[w]));
        for (int w = 0; w < o->window; w++)
            MB_CALL(o, MPI_Isend(c->sbuf, p->n, MPI_BYTE, c->peer, MB_TAG, MPI_COMM_WORLD,
                                 &c->req[o->window + w]));
        mb_waitall(o, 2 * o->window, c->req);
    }
}

static double bibw_sample(const mb_ctx_t *c, const mb_plan_t *p, long reps, double ns)
{
    return 2.0 * (double)reps * c->o->window * (double)p->size / ns;
}

static void bibw_finish(mb_ctx_t *c, mb_plan_t *p)
{
    mb_verify(c->o, c->rank, p->size, c->sbuf, c->rbuf, MB_CHECK_MSGS, 1, 1, 2, "bibw");
    if (c->rank == 0)
        mb_bw_row("bibw", p->size, p->iters, c->o->window, p->batch, p->samples, p->nb);
}

int main(int argc, char **argv)
{
    mb_opts_t o;
    int rank;

    mb_parse(&o, argc, argv, "mpi_bibw", 1, 1000, 64);
    mb_init(&o, &argc, &argv, &rank);
    if (rank == 0)
        mb_bw_header("both ways: each rank sends a window and receives a window at once; "
                     "the sum of the two directions");

    const mb_prog_t prog = {bibw_run, bibw_sample, bibw_finish};
    return mb_run(&o, rank, MB_CHECK_MSGS, 2 * o.window, &prog);
}
