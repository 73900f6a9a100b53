/*
 * torx netmod (ch4:torx): the types ch4 embeds in its objects.
 * Included by ch4's netmodpre.h (generated from @ch4_netmod_pre_include@).
 */
#ifndef TORX_PRE_H_INCLUDED
#define TORX_PRE_H_INCLUDED

#include <torx/msg.h>

/* netmod-global state lives in MPIDI_TORX_global (torx_impl.h) */
typedef struct {
    int dummy;
} MPIDI_TORX_Global_t;

/* An AM send (am_isend/am_isend_reply) in flight: the message-layer object
 * lives inside the MPICH request, so sending allocates nothing when the data
 * is contiguous and the AM header fits the torx header. The same struct,
 * allocated (is_heap), serves a request that is already sending. */
typedef struct MPIDI_TORX_am_slot {
    torx_msg_t msg;
    struct MPIR_Request *sreq;
    void *pack_buf;             /* packed data (non-contiguous, or header in data) */
    int handler_id;             /* MPIDIG handler: origin_cbs[handler_id] at completion */
    int in_flight;
    int is_heap;
} MPIDI_TORX_am_request_t;

/* A native point-to-point request (torx_p2p.c). Sends keep their
 * message-layer object here, so a send allocates nothing unless its data
 * must be packed; receives keep what was posted, for matching. The whole
 * struct must stay below MPIDIG_req_t's `req` field, which ch4 reads on
 * every request (torx_p2p.c asserts it). */
typedef struct MPIDI_TORX_request {
    union {
        struct {
            torx_msg_t msg;     /* the message in flight */
            void *pack;         /* packed non-contiguous data */
        } send;
        struct {
            struct MPIR_Request *next, *prev;   /* posted queue */
            void *buf;          /* what was posted */
            MPI_Aint count;
            MPI_Datatype datatype;
            int rank, tag;      /* match (wildcards allowed) */
            int context_id;
            void *bounce;       /* non-contiguous data, until unpacked */
            struct MPIDI_TORX_unexp *unexp;     /* mprobe'd message */
        } recv;
    } u;
    int flags;                  /* MPIDI_TORX_REQ_F_* */
} MPIDI_TORX_request_t;

/* Per communicator: src/coll's view of it (torx_coll_group_t, created at
 * the first collective; torx_coll.c) and what its last collective ran. */
struct torx_coll_group;
typedef struct {
    struct torx_coll_group *coll_group;
    int coll_state;             /* 0: not tried yet, 1: coll_group set, -1: none */
    const char *last_algorithm; /* MPIX_Get_last_algorithm_name */
} MPIDI_TORX_comm_t;

typedef struct {
    int dummy;
} MPIDI_TORX_dt_t;

typedef struct {
    int dummy;
} MPIDI_TORX_op_t;

typedef struct {
    int dummy;
} MPIDI_TORX_win_t;

/* Address vector entry: the torx rank (job-wide task number) of a process. */
typedef struct {
    int rank;
} MPIDI_TORX_addr_t;

typedef struct {
    int dummy;
} MPIDI_TORX_part_t;

#endif /* TORX_PRE_H_INCLUDED */
