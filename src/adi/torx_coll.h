/*
 * torx netmod: collectives.
 *
 * The collectives torx has algorithms for (src/coll/: global-interrupt
 * barrier, collective-network reductions and broadcast, torus broadcast,
 * paced alltoall) go to torx_coll.c, which picks a torx algorithm when one
 * applies and otherwise runs MPICH's own (MPIR_*_impl). Their nonblocking
 * forms go there too, so that they are counted and named; they always run
 * MPICH's schedules (see torx_coll.c for why). Every other collective is
 * MPICH's algorithm over torx point-to-point, taken unchanged from ch4's
 * fallback header: the entry points torx defines are renamed out of the way
 * before it is included, so nothing of it is copied here.
 *
 * These hooks see the communicator the user called with because
 * scripts/build-mpich.sh installs ch4_coll_selection.json as ch4's default
 * selection (see that script and docs/collectives.md).
 */
#ifndef TORX_COLL_H_INCLUDED
#define TORX_COLL_H_INCLUDED

#include "torx_impl.h"

#define MPIDI_NM_mpi_barrier     MPIDI_TORX_fallback_barrier_unused
#define MPIDI_NM_mpi_bcast       MPIDI_TORX_fallback_bcast_unused
#define MPIDI_NM_mpi_allreduce   MPIDI_TORX_fallback_allreduce_unused
#define MPIDI_NM_mpi_reduce      MPIDI_TORX_fallback_reduce_unused
#define MPIDI_NM_mpi_alltoall    MPIDI_TORX_fallback_alltoall_unused
#define MPIDI_NM_mpi_alltoallv   MPIDI_TORX_fallback_alltoallv_unused
#define MPIDI_NM_mpi_allgather   MPIDI_TORX_fallback_allgather_unused
#define MPIDI_NM_mpi_ibarrier    MPIDI_TORX_fallback_ibarrier_unused
#define MPIDI_NM_mpi_ibcast      MPIDI_TORX_fallback_ibcast_unused
#define MPIDI_NM_mpi_iallreduce  MPIDI_TORX_fallback_iallreduce_unused
#define MPIDI_NM_mpi_ireduce     MPIDI_TORX_fallback_ireduce_unused
#define MPIDI_NM_mpi_ialltoall   MPIDI_TORX_fallback_ialltoall_unused
#define MPIDI_NM_mpi_ialltoallv  MPIDI_TORX_fallback_ialltoallv_unused
#define MPIDI_NM_mpi_iallgather  MPIDI_TORX_fallback_iallgather_unused
#include "netmod_am_fallback_coll.h"
#undef MPIDI_NM_mpi_barrier
#undef MPIDI_NM_mpi_bcast
#undef MPIDI_NM_mpi_allreduce
#undef MPIDI_NM_mpi_reduce
#undef MPIDI_NM_mpi_alltoall
#undef MPIDI_NM_mpi_alltoallv
#undef MPIDI_NM_mpi_allgather
#undef MPIDI_NM_mpi_ibarrier
#undef MPIDI_NM_mpi_ibcast
#undef MPIDI_NM_mpi_iallreduce
#undef MPIDI_NM_mpi_ireduce
#undef MPIDI_NM_mpi_ialltoall
#undef MPIDI_NM_mpi_ialltoallv
#undef MPIDI_NM_mpi_iallgather

/* torx_coll.c */
int MPIDI_TORX_barrier(MPIR_Comm * comm, MPIR_Errflag_t * errflag);
int MPIDI_TORX_bcast(void *buffer, MPI_Aint count, MPI_Datatype datatype, int root,
                     MPIR_Comm * comm, MPIR_Errflag_t * errflag);
int MPIDI_TORX_allreduce(const void *sendbuf, void *recvbuf, MPI_Aint count,
                         MPI_Datatype datatype, MPI_Op op, MPIR_Comm * comm,
                         MPIR_Errflag_t * errflag);
int MPIDI_TORX_reduce(const void *sendbuf, void *recvbuf, MPI_Aint count, MPI_Datatype datatype,
                      MPI_Op op, int root, MPIR_Comm * comm, MPIR_Errflag_t * errflag);
int MPIDI_TORX_alltoall(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                        void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype,
                        MPIR_Comm * comm, MPIR_Errflag_t * errflag);
int MPIDI_TORX_alltoallv(const void *sendbuf, const MPI_Aint * sendcounts,
                         const MPI_Aint * sdispls, MPI_Datatype sendtype, void *recvbuf,
                         const MPI_Aint * recvcounts, const MPI_Aint * rdispls,
                         MPI_Datatype recvtype, MPIR_Comm * comm, MPIR_Errflag_t * errflag);
int MPIDI_TORX_allgather(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                         void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype,
                         MPIR_Comm * comm, MPIR_Errflag_t * errflag);
int MPIDI_TORX_ibarrier(MPIR_Comm * comm, MPIR_Request ** req);
int MPIDI_TORX_ibcast(void *buffer, MPI_Aint count, MPI_Datatype datatype, int root,
                      MPIR_Comm * comm, MPIR_Request ** req);
int MPIDI_TORX_iallreduce(const void *sendbuf, void *recvbuf, MPI_Aint count,
                          MPI_Datatype datatype, MPI_Op op, MPIR_Comm * comm,
                          MPIR_Request ** req);
int MPIDI_TORX_ireduce(const void *sendbuf, void *recvbuf, MPI_Aint count, MPI_Datatype datatype,
                       MPI_Op op, int root, MPIR_Comm * comm, MPIR_Request ** req);
int MPIDI_TORX_ialltoall(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                         void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype,
                         MPIR_Comm * comm, MPIR_Request ** req);
int MPIDI_TORX_ialltoallv(const void *sendbuf, const MPI_Aint * sendcounts,
                          const MPI_Aint * sdispls, MPI_Datatype sendtype, void *recvbuf,
                          const MPI_Aint * recvcounts, const MPI_Aint * rdispls,
                          MPI_Datatype recvtype, MPIR_Comm * comm, MPIR_Request ** req);
int MPIDI_TORX_iallgather(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                          void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype,
                          MPIR_Comm * comm, MPIR_Request ** req);

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_barrier(MPIR_Comm * comm, MPIR_Errflag_t * errflag)
{
    return MPIDI_TORX_barrier(comm, errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_bcast(void *buffer, MPI_Aint count, MPI_Datatype datatype,
                                                int root, MPIR_Comm * comm,
                                                MPIR_Errflag_t * errflag)
{
    return MPIDI_TORX_bcast(buffer, count, datatype, root, comm, errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_allreduce(const void *sendbuf, void *recvbuf,
                                                    MPI_Aint count, MPI_Datatype datatype,
                                                    MPI_Op op, MPIR_Comm * comm,
                                                    MPIR_Errflag_t * errflag)
{
    return MPIDI_TORX_allreduce(sendbuf, recvbuf, count, datatype, op, comm, errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_reduce(const void *sendbuf, void *recvbuf,
                                                 MPI_Aint count, MPI_Datatype datatype, MPI_Op op,
                                                 int root, MPIR_Comm * comm,
                                                 MPIR_Errflag_t * errflag)
{
    return MPIDI_TORX_reduce(sendbuf, recvbuf, count, datatype, op, root, comm, errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_alltoall(const void *sendbuf, MPI_Aint sendcount,
                                                   MPI_Datatype sendtype, void *recvbuf,
                                                   MPI_Aint recvcount, MPI_Datatype recvtype,
                                                   MPIR_Comm * comm, MPIR_Errflag_t * errflag)
{
    return MPIDI_TORX_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                               errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_alltoallv(const void *sendbuf,
                                                    const MPI_Aint * sendcounts,
                                                    const MPI_Aint * sdispls,
                                                    MPI_Datatype sendtype, void *recvbuf,
                                                    const MPI_Aint * recvcounts,
                                                    const MPI_Aint * rdispls,
                                                    MPI_Datatype recvtype, MPIR_Comm * comm,
                                                    MPIR_Errflag_t * errflag)
{
    return MPIDI_TORX_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                                rdispls, recvtype, comm, errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_allgather(const void *sendbuf, MPI_Aint sendcount,
                                                    MPI_Datatype sendtype, void *recvbuf,
                                                    MPI_Aint recvcount, MPI_Datatype recvtype,
                                                    MPIR_Comm * comm, MPIR_Errflag_t * errflag)
{
    return MPIDI_TORX_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                                errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_ibarrier(MPIR_Comm * comm, MPIR_Request ** req)
{
    return MPIDI_TORX_ibarrier(comm, req);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_ibcast(void *buffer, MPI_Aint count,
                                                 MPI_Datatype datatype, int root,
                                                 MPIR_Comm * comm, MPIR_Request ** req)
{
    return MPIDI_TORX_ibcast(buffer, count, datatype, root, comm, req);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_iallreduce(const void *sendbuf, void *recvbuf,
                                                     MPI_Aint count, MPI_Datatype datatype,
                                                     MPI_Op op, MPIR_Comm * comm,
                                                     MPIR_Request ** req)
{
    return MPIDI_TORX_iallreduce(sendbuf, recvbuf, count, datatype, op, comm, req);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_ireduce(const void *sendbuf, void *recvbuf,
                                                  MPI_Aint count, MPI_Datatype datatype,
                                                  MPI_Op op, int root, MPIR_Comm * comm,
                                                  MPIR_Request ** req)
{
    return MPIDI_TORX_ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, req);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_ialltoall(const void *sendbuf, MPI_Aint sendcount,
                                                    MPI_Datatype sendtype, void *recvbuf,
                                                    MPI_Aint recvcount, MPI_Datatype recvtype,
                                                    MPIR_Comm * comm, MPIR_Request ** req)
{
    return MPIDI_TORX_ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                                req);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_ialltoallv(const void *sendbuf,
                                                     const MPI_Aint * sendcounts,
                                                     const MPI_Aint * sdispls,
                                                     MPI_Datatype sendtype, void *recvbuf,
                                                     const MPI_Aint * recvcounts,
                                                     const MPI_Aint * rdispls,
                                                     MPI_Datatype recvtype, MPIR_Comm * comm,
                                                     MPIR_Request ** req)
{
    return MPIDI_TORX_ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                                 rdispls, recvtype, comm, req);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_iallgather(const void *sendbuf, MPI_Aint sendcount,
                                                     MPI_Datatype sendtype, void *recvbuf,
                                                     MPI_Aint recvcount, MPI_Datatype recvtype,
                                                     MPIR_Comm * comm, MPIR_Request ** req)
{
    return MPIDI_TORX_iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                                 req);
}

#endif /* TORX_COLL_H_INCLUDED */
