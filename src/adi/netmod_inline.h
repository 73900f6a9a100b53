/*
 * torx netmod (ch4:torx): the inline half of the netmod interface.
 *
 * One header per feature, as the ucx netmod is split. Point-to-point and
 * probe are native (torx_send.h, torx_recv.h, torx_probe.h over
 * torx_p2p.c); collectives go to torx's algorithms or MPICH's
 * (torx_coll.h over torx_coll.c and src/coll/). RMA and partitioned
 * communication use ch4's active-message fallback: MPIDIG over torx active
 * messages (torx_am.h).
 * The inline headers only forward: the work lives in .c files, so most
 * changes rebuild one object instead of all of MPICH.
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
