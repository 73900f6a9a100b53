/*
 * torx netmod: coll. For now ch4's active-message fallback (MPIDIG over
 * torx active messages); the native version replaces this include.
 */
#ifndef TORX_COLL_H_INCLUDED
#define TORX_COLL_H_INCLUDED

#include "torx_impl.h"
#include "netmod_am_fallback_coll.h"

#endif /* TORX_COLL_H_INCLUDED */
