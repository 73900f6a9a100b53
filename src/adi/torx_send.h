/*
 * torx netmod: send. For now ch4's active-message fallback (MPIDIG over
 * torx active messages); the native version replaces this include.
 */
#ifndef TORX_SEND_H_INCLUDED
#define TORX_SEND_H_INCLUDED

#include "torx_impl.h"
#include "netmod_am_fallback_send.h"

#endif /* TORX_SEND_H_INCLUDED */
