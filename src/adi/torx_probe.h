/*
 * torx netmod: native probes over the unexpected queue (torx_p2p.c).
 */
#ifndef TORX_PROBE_H_INCLUDED
#define TORX_PROBE_H_INCLUDED

#include "torx_impl.h"

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_iprobe(int source, int tag, MPIR_Comm * comm,
                                                 int context_offset, MPIDI_av_entry_t * addr,
                                                 int *flag, MPI_Status * status)
{
    return MPIDI_TORX_probe(source, tag, comm, context_offset, flag, NULL, status);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_improbe(int source, int tag, MPIR_Comm * comm,
                                                  int context_offset, MPIDI_av_entry_t * addr,
                                                  int *flag, MPIR_Request ** message,
                                                  MPI_Status * status)
{
    return MPIDI_TORX_probe(source, tag, comm, context_offset, flag, message, status);
}

#endif /* TORX_PROBE_H_INCLUDED */
