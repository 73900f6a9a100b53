/*
 * torx netmod (ch4:torx): the inline half of the netmod interface.
 *
 * One header per feature, as the ucx netmod is split. Today every MPI
 * feature (pt2pt, probe, RMA, collectives, partitioned) uses ch4's
 * active-message fallback (MPIDIG over torx active messages, torx_am.h);
 * a native implementation replaces the fallback one header at a time.
 */
#ifndef NETMOD_INLINE_H_INCLUDED
#define NETMOD_INLINE_H_INCLUDED

#include "torx_send.h"
#include "torx_recv.h"
#include "torx_probe.h"
#include "torx_rma.h"
#include "torx_coll.h"
#include "torx_part.h"

#include "torx_progress.h"
#include "torx_am.h"
#include "torx_proc.h"

/* Not-inlined torx netmod functions */
#include "torx_noinline.h"

#endif /* NETMOD_INLINE_H_INCLUDED */
