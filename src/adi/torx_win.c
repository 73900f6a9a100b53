/*
 * torx netmod: RMA windows and partitioned communication, all through
 * MPIDIG (ch4's active-message implementation) for now.
 */
#include "mpidimpl.h"
#include "torx_impl.h"

static int win_init(MPIR_Win * win)
{
    /* one VCI */
    MPIDI_WIN(win, am_vci) = 0;
    return MPI_SUCCESS;
}

int MPIDI_TORX_mpi_win_set_info(MPIR_Win * win, MPIR_Info * info)
{
    return MPIDIG_mpi_win_set_info(win, info);
}

int MPIDI_TORX_mpi_win_get_info(MPIR_Win * win, MPIR_Info ** info_p_p)
{
    return MPIDIG_mpi_win_get_info(win, info_p_p);
}

int MPIDI_TORX_mpi_win_free(MPIR_Win ** win_ptr)
{
    return MPIDIG_mpi_win_free(win_ptr);
}

int MPIDI_TORX_mpi_win_create(void *base, MPI_Aint length, int disp_unit, MPIR_Info * info,
                              MPIR_Comm * comm_ptr, MPIR_Win ** win_ptr)
{
    return MPIDIG_mpi_win_create(base, length, disp_unit, info, comm_ptr, win_ptr);
}

int MPIDI_TORX_mpi_win_attach(MPIR_Win * win, void *base, MPI_Aint size)
{
    return MPIDIG_mpi_win_attach(win, base, size);
}

int MPIDI_TORX_mpi_win_allocate_shared(MPI_Aint size, int disp_unit, MPIR_Info * info_ptr,
                                       MPIR_Comm * comm_ptr, void **base_ptr, MPIR_Win ** win_ptr)
{
    return MPIDIG_mpi_win_allocate_shared(size, disp_unit, info_ptr, comm_ptr, base_ptr, win_ptr);
}

int MPIDI_TORX_mpi_win_detach(MPIR_Win * win, const void *base)
{
    return MPIDIG_mpi_win_detach(win, base);
}

int MPIDI_TORX_mpi_win_allocate(MPI_Aint length, int disp_unit, MPIR_Info * info,
                                MPIR_Comm * comm_ptr, void *baseptr, MPIR_Win ** win_ptr)
{
    return MPIDIG_mpi_win_allocate(length, disp_unit, info, comm_ptr, baseptr, win_ptr);
}

int MPIDI_TORX_mpi_win_create_dynamic(MPIR_Info * info, MPIR_Comm * comm, MPIR_Win ** win)
{
    return MPIDIG_mpi_win_create_dynamic(info, comm, win);
}

int MPIDI_TORX_mpi_win_create_hook(MPIR_Win * win)
{
    return win_init(win);
}

int MPIDI_TORX_mpi_win_allocate_hook(MPIR_Win * win)
{
    return win_init(win);
}

int MPIDI_TORX_mpi_win_allocate_shared_hook(MPIR_Win * win)
{
    return win_init(win);
}

int MPIDI_TORX_mpi_win_create_dynamic_hook(MPIR_Win * win)
{
    return win_init(win);
}

int MPIDI_TORX_mpi_win_attach_hook(MPIR_Win * win, void *base, MPI_Aint size)
{
    return MPI_SUCCESS;
}

int MPIDI_TORX_mpi_win_detach_hook(MPIR_Win * win, const void *base)
{
    return MPI_SUCCESS;
}

int MPIDI_TORX_mpi_win_free_hook(MPIR_Win * win)
{
    return MPI_SUCCESS;
}

int MPIDI_TORX_mpi_psend_init(const void *buf, int partitions, MPI_Aint count,
                              MPI_Datatype datatype, int dest, int tag,
                              MPIR_Comm * comm, MPIR_Info * info,
                              MPIDI_av_entry_t * av, MPIR_Request ** request)
{
    return MPIDIG_mpi_psend_init(buf, partitions, count, datatype, dest, tag, comm, info, request);
}

int MPIDI_TORX_mpi_precv_init(void *buf, int partitions, MPI_Aint count,
                              MPI_Datatype datatype, int source, int tag,
                              MPIR_Comm * comm, MPIR_Info * info,
                              MPIDI_av_entry_t * av, MPIR_Request ** request)
{
    return MPIDIG_mpi_precv_init(buf, partitions, count, datatype, source, tag, comm,
                                 info, request);
}
