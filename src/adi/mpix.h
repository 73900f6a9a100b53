/*
 * <mpix.h>: torx's MPI extensions, installed beside mpi.h by
 * scripts/build-mpich.sh. Blue Gene/Q's MPICH offered the same names; a
 * code that used them there builds here unchanged.
 */
#ifndef MPIX_H_INCLUDED
#define MPIX_H_INCLUDED

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The algorithm of the last blocking or nonblocking collective called on
 * comm by this process, as "<collective>:<algorithm>": for example
 * "barrier:gi" (global interrupt), "allreduce:cn" (collective network),
 * "allreduce:torus" (direct exchange), "alltoall:paced", or
 * "<collective>:mpich" when MPICH's own algorithm ran; "none" before the
 * first. The name is copied into name, at most len - 1 characters and a
 * terminating NUL. Returns MPI_SUCCESS, MPI_ERR_COMM for a bad
 * communicator, or MPI_ERR_ARG when name is NULL or len < 1. */
int MPIX_Get_last_algorithm_name(MPI_Comm comm, char *name, int len);

#ifdef __cplusplus
}
#endif

#endif /* MPIX_H_INCLUDED */
