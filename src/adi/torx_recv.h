/*
 * torx netmod: recv. For now ch4's active-message fallback (MPIDIG over
 * torx active messages); the native version replaces this include.
 */
#ifndef TORX_RECV_H_INCLUDED
#define TORX_RECV_H_INCLUDED

#include "torx_impl.h"
#include "netmod_am_fallback_recv.h"

#endif /* TORX_RECV_H_INCLUDED */
