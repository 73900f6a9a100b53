/*
 * torx netmod: communicator hooks, hints, dynamic processes. A
 * communicator's collective state (torx_coll.c) starts and ends here.
 */
#include "mpidimpl.h"
#include "torx_impl.h"

int MPIDI_TORX_mpi_comm_commit_pre_hook(MPIR_Comm * comm)
{
    MPIDI_TORX_coll_comm_init(comm);
    return MPI_SUCCESS;
}

int MPIDI_TORX_mpi_comm_commit_post_hook(MPIR_Comm * comm)
{
    return MPI_SUCCESS;
}

int MPIDI_TORX_mpi_comm_free_hook(MPIR_Comm * comm)
{
    MPIDI_TORX_coll_comm_free(comm);
    return MPI_SUCCESS;
}

int MPIDI_TORX_comm_set_hints(MPIR_Comm * comm_ptr, MPIR_Info * info)
{
    return MPI_SUCCESS;
}

/* Dynamic processes (spawn, connect/accept) are not supported by torx. */
static int no_dynamic(void)
{
    int mpi_errno = MPI_SUCCESS;
    MPIR_ERR_SET1(mpi_errno, MPI_ERR_OTHER, "**notimpl", "**notimpl %s",
                  "dynamic processes (ch4:torx)");
    return mpi_errno;
}

int MPIDI_TORX_dynamic_send(uint64_t remote_gpid, int tag, const void *buf, int size, int timeout)
{
    return no_dynamic();
}

int MPIDI_TORX_dynamic_recv(int tag, void *buf, int size, int timeout)
{
    return no_dynamic();
}

int MPIDI_TORX_get_local_upids(MPIR_Comm * comm, int **local_upid_size, char **local_upids)
{
    return no_dynamic();
}

int MPIDI_TORX_upids_to_gpids(int size, int *remote_upid_size, char *remote_upids,
                              uint64_t * remote_gpids)
{
    return no_dynamic();
}
