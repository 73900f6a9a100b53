/*
 * torx netmod: global state.
 */
#include "mpidimpl.h"
#include "torx_impl.h"

MPIDI_TORX_global_t MPIDI_TORX_global;
