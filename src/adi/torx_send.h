/*
 * torx netmod: native sends. Each MPI send is one torx message to
 * MPIDI_TORX_P2P_HANDLER carrying the MPI envelope as its header; the
 * message layer picks the protocol by size (torx_p2p.c has the details).
 * Ready sends are standard sends; buffered sends reach here from MPIR's
 * bsend code as standard sends.
 */
#ifndef TORX_SEND_H_INCLUDED
#define TORX_SEND_H_INCLUDED

#include "torx_impl.h"

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_isend(const void *buf, MPI_Aint count,
                                                MPI_Datatype datatype, int rank, int tag,
                                                MPIR_Comm * comm, int context_offset,
                                                MPIDI_av_entry_t * addr, MPIR_Request ** request)
{
    return MPIDI_TORX_isend(buf, count, datatype, rank, tag, comm, context_offset, addr, request,
                            MPIDI_TORX_P2P_SEND, MPIR_ERR_NONE);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_issend(const void *buf, MPI_Aint count,
                                                 MPI_Datatype datatype, int rank, int tag,
                                                 MPIR_Comm * comm, int context_offset,
                                                 MPIDI_av_entry_t * addr, MPIR_Request ** request)
{
    return MPIDI_TORX_isend(buf, count, datatype, rank, tag, comm, context_offset, addr, request,
                            MPIDI_TORX_P2P_SSEND, MPIR_ERR_NONE);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_isend_coll(const void *buf, MPI_Aint count,
                                                 MPI_Datatype datatype, int rank, int tag,
                                                 MPIR_Comm * comm, int context_offset,
                                                 MPIDI_av_entry_t * addr, MPIR_Request ** request,
                                                 MPIR_Errflag_t * errflag)
{
    return MPIDI_TORX_isend(buf, count, datatype, rank, tag, comm, context_offset, addr, request,
                            MPIDI_TORX_P2P_SEND, *errflag);
}

/* A send cannot be taken back once the message layer has it (its first
 * packet may be in the peer's FIFO); MPI allows a cancel to fail, and
 * MPI_Test_cancelled then says false. */
MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_cancel_send(MPIR_Request * sreq)
{
    return MPI_SUCCESS;
}

#endif /* TORX_SEND_H_INCLUDED */
