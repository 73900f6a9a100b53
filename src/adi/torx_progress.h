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
    /* A failed torx context (memory for an arriving message, or a packet a
     * peer waits for, could not be had) cannot go on: the job ends, saying
     * why, instead of waiting for what will never complete. */
    const int n = torx_advance(MPIDI_TORX_global.ctx);
    if (unlikely(n < 0))
        MPIDI_TORX_fatal("the torx context", (torx_status_t) n);
    return MPI_SUCCESS;
}

#endif /* TORX_PROGRESS_H_INCLUDED */
