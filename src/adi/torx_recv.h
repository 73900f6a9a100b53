/*
 * torx netmod: native receives, matched in torx_p2p.c against the posted
 * and unexpected queues.
 */
#ifndef TORX_RECV_H_INCLUDED
#define TORX_RECV_H_INCLUDED

#include "torx_impl.h"

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_irecv(void *buf, MPI_Aint count, MPI_Datatype datatype,
                                                int rank, int tag, MPIR_Comm * comm,
                                                int context_offset, MPIDI_av_entry_t * addr,
                                                MPIR_Request ** request, MPIR_Request * partner)
{
    /* partner: only with a shared-memory module, which ch4:torx never has */
    return MPIDI_TORX_irecv(buf, count, datatype, rank, tag, comm, context_offset, request);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_imrecv(void *buf, MPI_Aint count, MPI_Datatype datatype,
                                                 MPIR_Request * message)
{
    return MPIDI_TORX_imrecv(buf, count, datatype, message);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_cancel_recv(MPIR_Request * rreq)
{
    return MPIDI_TORX_cancel_recv(rreq);
}

#endif /* TORX_RECV_H_INCLUDED */
