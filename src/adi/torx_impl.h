/*
 * torx netmod (ch4:torx): internal declarations shared by the netmod's
 * headers and sources.
 */
#ifndef TORX_IMPL_H_INCLUDED
#define TORX_IMPL_H_INCLUDED

#include <mpidimpl.h>
#include "mpidch4r.h"
#include "ch4_impl.h"
#include <torx/msg.h>

#define MPIDI_TORX_AV(av)       ((av)->netmod.torx)
#define MPIDI_TORX_AMREQ(req)   ((req)->dev.ch4.am.netmod_am.torx)

/* The message-layer handler id that carries MPIDIG active messages. */
#define MPIDI_TORX_AM_HANDLER 0

/* What the netmod puts in front of the AM header, in the torx header. */
typedef struct {
    uint8_t handler_id;         /* MPIDIG handler id */
    uint8_t flags;              /* MPIDI_TORX_AM_F_* */
    uint16_t am_hdr_sz;
} MPIDI_TORX_am_wire_t;

/* The AM header travels at the start of the torx data instead of in the torx
 * header (it is longer than TORX_MSG_MAX_HDR - sizeof(MPIDI_TORX_am_wire_t)). */
#define MPIDI_TORX_AM_F_HDR_IN_DATA 1

#define MPIDI_TORX_AM_INLINE_HDR_MAX (TORX_MSG_MAX_HDR - (int) sizeof(MPIDI_TORX_am_wire_t))
/* Largest AM header MPIDIG may hand us (RMA puts flattened datatypes there). */
#define MPIDI_TORX_AM_HDR_MAX 4096
/* MPIDIG eager limit: larger sends go through MPIDIG's RTS/CTS; the data
 * then moves as one torx message (torx rendezvous, zero-copy bulk get). It
 * must stay within MPIR_CVAR_CH4_AM_PACK_BUFFER_SIZE (unexpected eager data). */
#define MPIDI_TORX_AM_EAGER_LIMIT_DEFAULT 16384

typedef struct MPIDI_TORX_pending MPIDI_TORX_pending_t;

typedef struct {
    torx_ctx_t *ctx;
    torx_boot_t boot;
    char job_id[256];
    int rank, size;
    MPI_Aint am_eager_limit;    /* TORX_AM_EAGER_LIMIT, clamped */
    /* Per source: AM messages whose delivery to MPIDIG waits for earlier
     * ones (keeps MPIDIG's per-pair order when a message's header is only
     * known once all its data is in). */
    MPIDI_TORX_pending_t **pending_head, **pending_tail;
    uint64_t am_sent, am_received, am_deferred;
} MPIDI_TORX_global_t;

extern MPIDI_TORX_global_t MPIDI_TORX_global;

/* torx_am.c */
void MPIDI_TORX_am_handler(torx_ctx_t * ctx, void *harg, const torx_recv_info_t * info,
                           torx_recv_t * recv);
void MPIDI_TORX_am_isend_done(torx_ctx_t * ctx, torx_msg_t * msg, void *arg);
int MPIDI_TORX_am_send_copy(int dest, int handler_id, const void *am_hdr, MPI_Aint am_hdr_sz,
                            const void *data, MPI_Aint data_sz);
void MPIDI_TORX_fatal(const char *what, torx_status_t st);

#endif /* TORX_IMPL_H_INCLUDED */
