/* What the MPI test programs of test/mpi/run.sh share. */
#ifndef TORX_MPI_TEST_H
#define TORX_MPI_TEST_H

#include <mpi.h>
#include <stdio.h>

/* The end of a test: sums errs over MPI_COMM_WORLD, finalizes MPI, and on
 * rank 0 prints " No Errors" (what run.sh looks for) when no rank found
 * one. Returns main's exit status: nonzero when any rank found an error. */
static inline int mpi_test_finish(int rank, int errs)
{
    int all;
    MPI_Allreduce(&errs, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (rank == 0 && all == 0)
        printf(" No Errors\n");
    return all != 0;
}

#endif /* TORX_MPI_TEST_H */
