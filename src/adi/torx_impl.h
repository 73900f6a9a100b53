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

/* ---- Native point-to-point (torx_p2p.c) ---------------------------------- */

/* The message-layer handler id of MPI point-to-point messages. */
#define MPIDI_TORX_P2P_HANDLER 1

/* The torx header of a point-to-point message: the MPI envelope. 12 bytes,
 * so one-packet messages carry up to 228 data bytes. A synchronous send
 * appends its request (8 bytes), which the receiver's ack echoes. */
typedef struct {
    int32_t tag;
    int32_t rank;               /* the sender's rank in the communicator */
    uint16_t context_id;
    uint8_t kind;               /* MPIDI_TORX_P2P_* */
    uint8_t error_bits;         /* a collective's MPIR_Errflag_t */
} MPIDI_TORX_p2p_hdr_t;

enum {
    MPIDI_TORX_P2P_SEND = 0,    /* standard, ready, buffered (via MPIR) */
    MPIDI_TORX_P2P_SSEND,       /* synchronous: ack once matched */
    MPIDI_TORX_P2P_SSEND_ACK    /* header followed by the sender's request */
};

/* MPIDI_TORX_request_t.flags */
#define MPIDI_TORX_REQ_F_POSTED 1       /* in the posted queue */

typedef struct MPIDI_TORX_unexp MPIDI_TORX_unexp_t;

/* Short aliases for the netmod fields of a point-to-point request. */
#define MPIDI_TORX_REQ(req)     ((req)->dev.ch4.netmod.torx)

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
    /* Matching: posted receives in posting order, unexpected messages in
     * arrival order (per sender, that is send order). One of each per
     * process, as ch3 keeps them: ANY_SOURCE needs one order across
     * senders, and queues stay short in the codes we serve. */
    MPIR_Request *posted_head, *posted_tail;
    MPIDI_TORX_unexp_t *unexp_head, *unexp_tail;
    uint64_t p2p_sent, p2p_received, p2p_unexpected, p2p_deferred, p2p_inject;
    /* Set by every handler and completion callback (MPIDI_TORX_EVENT): the
     * oversubscribed progress hook (torx_init.c) yields while it stays 0. */
    volatile int event;
} MPIDI_TORX_global_t;

extern MPIDI_TORX_global_t MPIDI_TORX_global;

#define MPIDI_TORX_EVENT() (MPIDI_TORX_global.event = 1)

/* torx_am.c */
void MPIDI_TORX_am_handler(torx_ctx_t * ctx, void *harg, const torx_recv_info_t * info,
                           torx_recv_t * recv);
void MPIDI_TORX_am_isend_done(torx_ctx_t * ctx, torx_msg_t * msg, void *arg);
int MPIDI_TORX_am_send_hdr(int dest, int handler_id, const void *am_hdr, MPI_Aint am_hdr_sz);
void MPIDI_TORX_send_copy(int dest, int handler, const void *hdr, size_t hdr_len,
                          const void *data, size_t len, const char *what);
void MPIDI_TORX_fatal(const char *what, torx_status_t st);

/* torx_init.c: MPI_Init's error for what torx_last_error() says (rank 0
 * prints it; the others wait so that it gets out before the job ends) */
int MPIDI_TORX_startup_failed(void);
/* whether this host runs more of the job's ranks than it has CPUs for them */
int MPIDI_TORX_host_oversubscribed(void);
/* An MPI_T performance variable: a read-only continuous unsigned long long
 * counter bound to no object, whose value is read(a, b, c) when a tool
 * reads it, and its last value after MPI_Finalize. */
typedef unsigned long long (*MPIDI_TORX_pvar_read_fn) (int a, int b, int c);
void MPIDI_TORX_pvar_add(const char *name, const char *desc, MPIDI_TORX_pvar_read_fn read, int a,
                         int b, int c);

/* torx_coll.c: the message-layer handler id of src/coll's messages */
#define MPIDI_TORX_COLL_HANDLER 2
int MPIDI_TORX_coll_init(void);
void MPIDI_TORX_coll_finalize(void);
void MPIDI_TORX_coll_comm_init(MPIR_Comm * comm);
void MPIDI_TORX_coll_comm_free(MPIR_Comm * comm);

/* torx_p2p.c */
void MPIDI_TORX_p2p_handler(torx_ctx_t * ctx, void *harg, const torx_recv_info_t * info,
                            torx_recv_t * recv);
int MPIDI_TORX_isend(const void *buf, MPI_Aint count, MPI_Datatype datatype, int rank, int tag,
                     MPIR_Comm * comm, int context_offset, MPIDI_av_entry_t * addr,
                     MPIR_Request ** request, int kind, MPIR_Errflag_t error_bits);
int MPIDI_TORX_irecv(void *buf, MPI_Aint count, MPI_Datatype datatype, int rank, int tag,
                     MPIR_Comm * comm, int context_offset, MPIR_Request ** request);
int MPIDI_TORX_imrecv(void *buf, MPI_Aint count, MPI_Datatype datatype, MPIR_Request * message);
int MPIDI_TORX_cancel_recv(MPIR_Request * rreq);
int MPIDI_TORX_probe(int source, int tag, MPIR_Comm * comm, int context_offset, int *flag,
                     MPIR_Request ** message, MPI_Status * status);
void MPIDI_TORX_p2p_finalize(void);

#endif /* TORX_IMPL_H_INCLUDED */
