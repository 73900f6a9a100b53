/*
 * torx netmod: rma. For now ch4's active-message fallback (MPIDIG over
 * torx active messages); the native version replaces this include.
 */
#ifndef TORX_RMA_H_INCLUDED
#define TORX_RMA_H_INCLUDED

#include "torx_impl.h"
#include "netmod_am_fallback_rma.h"

#endif /* TORX_RMA_H_INCLUDED */
