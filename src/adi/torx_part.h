/*
 * torx netmod: part. For now ch4's active-message fallback (MPIDIG over
 * torx active messages); the native version replaces this include.
 */
#ifndef TORX_PART_H_INCLUDED
#define TORX_PART_H_INCLUDED

#include "torx_impl.h"
#include "netmod_am_fallback_part.h"

#endif /* TORX_PART_H_INCLUDED */
