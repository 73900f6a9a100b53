/*
 * torx netmod: probe. For now ch4's active-message fallback (MPIDIG over
 * torx active messages); the native version replaces this include.
 */
#ifndef TORX_PROBE_H_INCLUDED
#define TORX_PROBE_H_INCLUDED

#include "torx_impl.h"
#include "netmod_am_fallback_probe.h"

#endif /* TORX_PROBE_H_INCLUDED */
