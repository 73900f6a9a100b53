/*
 * torx netmod: datatype and reduction-operation hooks (nothing to do yet).
 */
#include "mpidimpl.h"
#include "torx_impl.h"

int MPIDI_TORX_mpi_type_commit_hook(MPIR_Datatype * datatype_p)
{
    return MPI_SUCCESS;
}

int MPIDI_TORX_mpi_type_free_hook(MPIR_Datatype * datatype_p)
{
    return MPI_SUCCESS;
}

int MPIDI_TORX_mpi_op_commit_hook(MPIR_Op * op_p)
{
    return MPI_SUCCESS;
}

int MPIDI_TORX_mpi_op_free_hook(MPIR_Op * op_p)
{
    return MPI_SUCCESS;
}
