/*
 * torx netmod: progress. One torx context serves VCI 0 (the netmod exposes
 * one VCI); torx_advance pushes queued sends and runs the AM handler
 * (torx_am.c), which delivers to MPIDIG_global.target_msg_cbs.
 */
#ifndef TORX_PROGRESS_H_INCLUDED
#define TORX_PROGRESS_H_INCLUDED

#include "torx_impl.h"

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_progress(int vci, int blocking)
{
    if (vci != 0 || MPIDI_TORX_global.ctx == NULL)
        return MPI_SUCCESS;
    torx_advance(MPIDI_TORX_global.ctx);
    return MPI_SUCCESS;
}

#endif /* TORX_PROGRESS_H_INCLUDED */
