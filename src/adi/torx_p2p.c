/*
 * torx netmod: native point-to-point. MPI send and receive map onto the
 * message layer's protocols; matching happens here, in the handler upcall
 * that the message layer makes when a message's first packet arrives (the
 * original BG/L design: an incoming message finds its request).
 *
 * Sending. One MPI message is one torx message to MPIDI_TORX_P2P_HANDLER:
 * header = the envelope (MPIDI_TORX_p2p_hdr_t), data = the user's bytes,
 * sent in place when contiguous and packed first when not (one copy each
 * side, but the message layer keeps its single-buffer protocols, including
 * the zero-copy bulk get, and ordering stays in one place). A contiguous
 * standard send that fits a packet, or a contiguous one the message layer
 * stages in one piece, is sent at once (torx_send_inject) and returns a
 * completed request: no request object, no later callback.
 * A synchronous send also carries its request; the receiver acks when the
 * message is matched.
 *
 * Receiving. The handler looks in the posted queue (posting order); a match
 * gets the data straight into the user's buffer, or into a bounce buffer to
 * unpack for non-contiguous types. Otherwise the message becomes an
 * unexpected entry (arrival order):
 *   - data already here (one-packet, or short): copied into the entry;
 *   - rendezvous or virtual-node: deferred (torx_recv_t.defer); the data
 *     stays at the sender until a receive matches, then moves once, to the
 *     user's buffer (torx_accept);
 *   - eager or adaptive, still arriving: streamed into the entry, copied on
 *     match (the protocols' receive-side bounce, bounded by the eager limit).
 * Truncation: the message layer never writes past the receive's size; the
 * request's status says MPI_ERR_TRUNCATE with the bytes that fit.
 */
#include "mpidimpl.h"
#include "torx_impl.h"

/* ch4 reads MPIDIG_REQUEST(req, req) on every request: the netmod's
 * request, in the same union, must end before it. */
_Static_assert(sizeof(MPIDI_TORX_request_t) <= offsetof(MPIDIG_req_t, req),
               "MPIDI_TORX_request_t overlaps MPIDIG_req_t.req");

#define HDR_LEN   ((size_t) sizeof(MPIDI_TORX_p2p_hdr_t))
#define SYNC_HDR_LEN (HDR_LEN + 8)

enum { UNEXP_COMPLETE, UNEXP_ARRIVING, UNEXP_DEFERRED };

struct MPIDI_TORX_unexp {
    MPIDI_TORX_unexp_t *next, *prev;
    int rank, tag, context_id, error_bits;
    int src;                    /* the sender's torx rank (for the ack) */
    int state;                  /* UNEXP_* */
    int orphan;                 /* finalize dropped it while arriving */
    uint64_t sync_sreq;         /* non-zero: a synchronous send to ack */
    size_t len;                 /* data bytes sent */
    torx_deferred_t *deferred;  /* UNEXP_DEFERRED: the data is at the sender */
    MPIR_Request *rreq;         /* UNEXP_ARRIVING: the receive it matched */
    uint64_t data[];            /* COMPLETE, ARRIVING: the data */
};

#define G MPIDI_TORX_global

/* ---- Envelopes and matching --------------------------------------------------------- */

static inline int envelope_matches(int want_rank, int want_tag, int want_ctx, int rank, int tag,
                                   int ctx)
{
    return ctx == want_ctx && (want_rank == MPI_ANY_SOURCE || want_rank == rank) &&
        (want_tag == MPI_ANY_TAG || want_tag == MPIR_TAG_MASK_ERROR_BITS(tag));
}

static void posted_remove(MPIR_Request * rreq)
{
    MPIDI_TORX_request_t *r = &MPIDI_TORX_REQ(rreq);
    if (r->u.recv.prev)
        MPIDI_TORX_REQ(r->u.recv.prev).u.recv.next = r->u.recv.next;
    else
        G.posted_head = r->u.recv.next;
    if (r->u.recv.next)
        MPIDI_TORX_REQ(r->u.recv.next).u.recv.prev = r->u.recv.prev;
    else
        G.posted_tail = r->u.recv.prev;
    r->flags &= ~MPIDI_TORX_REQ_F_POSTED;
}

static void posted_append(MPIR_Request * rreq)
{
    MPIDI_TORX_request_t *r = &MPIDI_TORX_REQ(rreq);
    r->u.recv.next = NULL;
    r->u.recv.prev = G.posted_tail;
    if (G.posted_tail)
        MPIDI_TORX_REQ(G.posted_tail).u.recv.next = rreq;
    else
        G.posted_head = rreq;
    G.posted_tail = rreq;
    r->flags |= MPIDI_TORX_REQ_F_POSTED;
}

static MPIR_Request *posted_find(int rank, int tag, int ctx)
{
    for (MPIR_Request * q = G.posted_head; q; q = MPIDI_TORX_REQ(q).u.recv.next) {
        const MPIDI_TORX_request_t *r = &MPIDI_TORX_REQ(q);
        if (envelope_matches(r->u.recv.rank, r->u.recv.tag, r->u.recv.context_id, rank, tag, ctx))
            return q;
    }
    return NULL;
}

static void unexp_remove(MPIDI_TORX_unexp_t * u)
{
    if (u->prev)
        u->prev->next = u->next;
    else
        G.unexp_head = u->next;
    if (u->next)
        u->next->prev = u->prev;
    else
        G.unexp_tail = u->prev;
    u->next = u->prev = NULL;
}

static void unexp_append(MPIDI_TORX_unexp_t * u)
{
    u->next = NULL;
    u->prev = G.unexp_tail;
    if (G.unexp_tail)
        G.unexp_tail->next = u;
    else
        G.unexp_head = u;
    G.unexp_tail = u;
}

static MPIDI_TORX_unexp_t *unexp_find(int rank, int tag, int ctx)
{
    for (MPIDI_TORX_unexp_t * u = G.unexp_head; u; u = u->next)
        if (envelope_matches(rank, tag, ctx, u->rank, u->tag, u->context_id))
            return u;
    return NULL;
}

/* ---- Synchronous-send acks ----------------------------------------------------------- */

/* Runs when a synchronous send's message is matched. */
static void send_ack(int src, uint64_t sreq)
{
    char hdr[SYNC_HDR_LEN];
    MPIDI_TORX_p2p_hdr_t h = {.kind = MPIDI_TORX_P2P_SSEND_ACK };
    memcpy(hdr, &h, HDR_LEN);
    memcpy(hdr + HDR_LEN, &sreq, 8);
    MPIDI_TORX_send_copy(src, MPIDI_TORX_P2P_HANDLER, hdr, sizeof hdr, NULL, 0,
                         "sending a synchronous-send ack");
}

/* ---- Receive completion -------------------------------------------------------------- */

/* Where a receive's bytes go: the contiguous span of its buffer, or NULL
 * (non-contiguous) with its capacity in *cap. */
static void *recv_target(MPIR_Request * rreq, size_t *cap)
{
    const MPIDI_TORX_request_t *r = &MPIDI_TORX_REQ(rreq);
    int dt_contig;
    size_t data_sz;
    MPI_Aint dt_true_lb;
    MPIR_Datatype *dt_ptr;
    MPIDI_Datatype_get_info(r->u.recv.count, r->u.recv.datatype, dt_contig, data_sz, dt_ptr,
                            dt_true_lb);
    (void) dt_ptr;
    *cap = data_sz;
    if (!dt_contig)
        return NULL;
    return data_sz ? MPIR_get_contig_ptr(r->u.recv.buf, dt_true_lb) : NULL;
}

/* The envelope goes into the status at match time; the count holds the
 * bytes sent until the data is in (for the truncation message). */
static void recv_matched(MPIR_Request * rreq, int rank, int tag, int error_bits, size_t len)
{
    rreq->status.MPI_SOURCE = rank;
    rreq->status.MPI_TAG = tag;
    rreq->status.MPI_ERROR = error_bits;
    MPIR_STATUS_SET_COUNT(rreq->status, len);
}

static void recv_complete(MPIR_Request * rreq, size_t received)
{
    MPIDI_TORX_request_t *r = &MPIDI_TORX_REQ(rreq);
    MPI_Aint sent = MPIR_STATUS_GET_COUNT(rreq->status);
    if ((MPI_Aint) received < sent) {
        rreq->status.MPI_ERROR =
            MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                 MPI_ERR_TRUNCATE, "**truncate", "**truncate %d %d %d %d",
                                 rreq->status.MPI_SOURCE, rreq->status.MPI_TAG, (int) sent,
                                 (int) received);
    }
    MPIR_STATUS_SET_COUNT(rreq->status, received);
    MPL_free(r->u.recv.bounce);
    r->u.recv.bounce = NULL;
    MPIR_Datatype_release_if_not_builtin(r->u.recv.datatype);
    G.p2p_received++;
    MPIDIU_request_complete(rreq);
}

/* Into a non-contiguous receive buffer; a truncated message may end in the
 * middle of an element, whose bytes the type engine may leave out. */
static size_t recv_unpack(MPIR_Request * rreq, const void *data, size_t n)
{
    const MPIDI_TORX_request_t *r = &MPIDI_TORX_REQ(rreq);
    MPI_Aint actual = 0;
    int mpi_errno = MPIR_Typerep_unpack(data, n, r->u.recv.buf, r->u.recv.count,
                                        r->u.recv.datatype, 0, &actual);
    if (mpi_errno != MPI_SUCCESS)
        MPIDI_TORX_fatal("unpacking into a non-contiguous receive buffer", TORX_ERR_INVAL);
    return (size_t) actual;
}

/* Bytes that are all here: into the user's buffer now. */
static void recv_copy(MPIR_Request * rreq, const void *data, size_t len)
{
    size_t cap;
    void *dst = recv_target(rreq, &cap);
    size_t n = len < cap ? len : cap;
    if (n == 0) {
        recv_complete(rreq, 0);
        return;
    }
    if (dst) {
        memcpy(dst, data, n);
    } else {
        n = recv_unpack(rreq, data, n);
    }
    recv_complete(rreq, n);
}

static void recv_data_done(torx_ctx_t * ctx, void *arg, torx_status_t st, size_t received)
{
    MPIDI_TORX_EVENT();
    MPIR_Request *rreq = arg;
    MPIDI_TORX_request_t *r = &MPIDI_TORX_REQ(rreq);
    if (st != TORX_OK && st != TORX_ERR_TRUNCATE)
        MPIDI_TORX_fatal("receiving a message", st);
    if (r->u.recv.bounce && received)
        received = recv_unpack(rreq, r->u.recv.bounce, received);
    recv_complete(rreq, received);
}

/* The data is still to come (len bytes): say where the message layer puts
 * it. The message layer truncates at recv->len. */
static void recv_setup(MPIR_Request * rreq, size_t len, torx_recv_t * recv)
{
    size_t cap;
    void *dst = recv_target(rreq, &cap);
    size_t n = len < cap ? len : cap;
    if (dst == NULL && n) {
        void *b = MPL_malloc(n, MPL_MEM_BUFFER);
        if (b == NULL)
            MPIDI_TORX_fatal("allocating a receive bounce buffer", TORX_ERR_NOMEM);
        MPIDI_TORX_REQ(rreq).u.recv.bounce = b;
        dst = b;
    }
    recv->buf = n ? dst : NULL;
    recv->len = n;
    recv->done = recv_data_done;
    recv->arg = rreq;
}

/* ---- Unexpected messages ------------------------------------------------------------- */

static void unexp_arrived(torx_ctx_t * ctx, void *arg, torx_status_t st, size_t received)
{
    MPIDI_TORX_EVENT();
    MPIDI_TORX_unexp_t *u = arg;
    if (st != TORX_OK)
        MPIDI_TORX_fatal("receiving an unexpected message", st);
    u->state = UNEXP_COMPLETE;
    if (u->orphan) {
        MPL_free(u);
    } else if (u->rreq) {
        recv_copy(u->rreq, u->data, u->len);
        MPL_free(u);
    }
}

/* A receive (irecv, or imrecv of a probed message) takes unexpected
 * message u, which is off the queue already. */
static void unexp_claim(MPIR_Request * rreq, MPIDI_TORX_unexp_t * u)
{
    recv_matched(rreq, u->rank, u->tag, u->error_bits, u->len);
    if (u->sync_sreq)
        send_ack(u->src, u->sync_sreq);
    switch (u->state) {
        case UNEXP_COMPLETE:
            recv_copy(rreq, u->data, u->len);
            MPL_free(u);
            break;
        case UNEXP_ARRIVING:
            u->rreq = rreq;     /* unexp_arrived finishes it */
            break;
        case UNEXP_DEFERRED:{
                torx_recv_t recv = { 0 };
                recv_setup(rreq, u->len, &recv);
                torx_status_t st = torx_accept(G.ctx, u->deferred, &recv);
                if (st != TORX_OK)
                    MPIDI_TORX_fatal("torx_accept", st);
                MPL_free(u);
                break;
            }
    }
}

/* ---- The handler ------------------------------------------------------------------- */

static void ack_arrived(const torx_recv_info_t * info)
{
    uint64_t p;
    if (info->hdr_len < SYNC_HDR_LEN)
        MPIDI_TORX_fatal("a short synchronous-send ack", TORX_ERR_PROTO);
    memcpy(&p, (const char *) info->hdr + HDR_LEN, 8);
    MPIDIU_request_complete((MPIR_Request *) (uintptr_t) p);
}

void MPIDI_TORX_p2p_handler(torx_ctx_t * ctx, void *harg, const torx_recv_info_t * info,
                            torx_recv_t * recv)
{
    MPIDI_TORX_EVENT();
    MPIDI_TORX_p2p_hdr_t h;
    if (info->hdr_len < HDR_LEN)
        MPIDI_TORX_fatal("a point-to-point message without its envelope", TORX_ERR_PROTO);
    memcpy(&h, info->hdr, HDR_LEN);
    if (h.kind == MPIDI_TORX_P2P_SSEND_ACK) {
        ack_arrived(info);
        return;
    }
    uint64_t sync_sreq = 0;
    if (h.kind == MPIDI_TORX_P2P_SSEND) {
        if (info->hdr_len < SYNC_HDR_LEN)
            MPIDI_TORX_fatal("a short synchronous-send envelope", TORX_ERR_PROTO);
        memcpy(&sync_sreq, (const char *) info->hdr + HDR_LEN, 8);
    }
    const int have_all = info->data != NULL || info->data_len == 0;

    MPIR_Request *rreq = posted_find(h.rank, h.tag, h.context_id);
    if (rreq) {
        posted_remove(rreq);
        recv_matched(rreq, h.rank, h.tag, h.error_bits, info->data_len);
        if (sync_sreq)
            send_ack(info->src, sync_sreq);
        if (have_all)
            recv_copy(rreq, info->data, info->data_len);
        else
            recv_setup(rreq, info->data_len, recv);
        return;
    }

    const int defer = info->deferrable;
    MPIDI_TORX_unexp_t *u = MPL_malloc(sizeof(*u) + (defer ? 0 : info->data_len),
                                       MPL_MEM_BUFFER);
    if (u == NULL)
        MPIDI_TORX_fatal("allocating an unexpected message", TORX_ERR_NOMEM);
    u->rank = h.rank;
    u->tag = h.tag;
    u->context_id = h.context_id;
    u->error_bits = h.error_bits;
    u->src = info->src;
    u->orphan = 0;
    u->sync_sreq = sync_sreq;
    u->len = info->data_len;
    u->deferred = NULL;
    u->rreq = NULL;
    if (have_all) {
        if (info->data_len)
            memcpy(u->data, info->data, info->data_len);
        u->state = UNEXP_COMPLETE;
    } else if (defer) {
        recv->defer = &u->deferred;
        u->state = UNEXP_DEFERRED;
        G.p2p_deferred++;
    } else {
        recv->buf = u->data;
        recv->len = info->data_len;
        recv->done = unexp_arrived;
        recv->arg = u;
        u->state = UNEXP_ARRIVING;
    }
    G.p2p_unexpected++;
    unexp_append(u);
}

/* ---- Send ---------------------------------------------------------------------------- */

static void send_done(torx_ctx_t * ctx, torx_msg_t * msg, void *arg)
{
    MPIDI_TORX_EVENT();
    MPIR_Request *sreq = arg;
    MPIDI_TORX_request_t *r = &MPIDI_TORX_REQ(sreq);
    MPL_free(r->u.send.pack);
    r->u.send.pack = NULL;
    MPIDIU_request_complete(sreq);
}

int MPIDI_TORX_isend(const void *buf, MPI_Aint count, MPI_Datatype datatype, int rank, int tag,
                     MPIR_Comm * comm, int context_offset, MPIDI_av_entry_t * addr,
                     MPIR_Request ** request, int kind, MPIR_Errflag_t error_bits)
{
    int mpi_errno = MPI_SUCCESS;
    if (unlikely(rank == MPI_PROC_NULL)) {
        *request = MPIR_Request_create_complete(MPIR_REQUEST_KIND__SEND);
        return MPI_SUCCESS;
    }
    const int dest = MPIDI_TORX_AV(addr).rank;
    char hdr[SYNC_HDR_LEN];
    const MPIDI_TORX_p2p_hdr_t h = {
        .tag = tag,
        .rank = comm->rank,
        .context_id = (uint16_t) (comm->context_id + context_offset),
        .kind = (uint8_t) kind,
        .error_bits = (uint8_t) error_bits,
    };
    memcpy(hdr, &h, HDR_LEN);
    size_t hlen = HDR_LEN;

    int dt_contig;
    size_t data_sz;
    MPI_Aint dt_true_lb;
    MPIR_Datatype *dt_ptr;
    MPIDI_Datatype_get_info(count, datatype, dt_contig, data_sz, dt_ptr, dt_true_lb);
    (void) dt_ptr;
    const void *data = NULL;
    if (data_sz)
        data = dt_contig ? MPIR_get_contig_ptr(buf, dt_true_lb) : NULL;

    const int fits_packet = HDR_LEN + data_sz <= TORX_MSG_ONEPKT_MAX;
    if (kind != MPIDI_TORX_P2P_SSEND && (fits_packet || dt_contig)) {
        /* One packet, or contiguous data that the message layer may stage
         * in one piece: inject now and hand back a completed request. */
        char packed[TORX_MSG_ONEPKT_MAX];
        if (data_sz && !dt_contig) {
            MPI_Aint actual;
            mpi_errno = MPIR_Typerep_pack(buf, count, datatype, 0, packed, data_sz, &actual);
            MPIR_ERR_CHECK(mpi_errno);
            data = packed;
        }
        torx_status_t st = torx_send_inject(G.ctx, dest, MPIDI_TORX_P2P_HANDLER, hdr, hlen,
                                            data, data_sz);
        if (st == TORX_OK) {
            G.p2p_sent++;
            G.p2p_inject++;
            *request = MPIR_Request_create_complete(MPIR_REQUEST_KIND__SEND);
            return MPI_SUCCESS;
        }
        if (st != TORX_AGAIN)
            MPIDI_TORX_fatal("torx_send_inject", st);
    }

    MPIR_Request *sreq = MPIR_Request_create_from_pool(MPIR_REQUEST_KIND__SEND, 0, 2);
    MPIR_ERR_CHKANDSTMT(sreq == NULL, mpi_errno, MPIX_ERR_NOREQ, goto fn_fail, "**nomemreq");
    MPIDI_TORX_request_t *r = &MPIDI_TORX_REQ(sreq);
    r->flags = 0;
    r->u.send.pack = NULL;
    if (data_sz && !dt_contig) {
        r->u.send.pack = MPL_malloc(data_sz, MPL_MEM_BUFFER);
        MPIR_ERR_CHKANDJUMP(r->u.send.pack == NULL, mpi_errno, MPI_ERR_NO_MEM, "**nomem");
        MPI_Aint actual;
        mpi_errno = MPIR_Typerep_pack(buf, count, datatype, 0, r->u.send.pack, data_sz, &actual);
        MPIR_ERR_CHECK(mpi_errno);
        data = r->u.send.pack;
    }
    if (kind == MPIDI_TORX_P2P_SSEND) {
        /* complete after both the local send and the receiver's ack */
        uint64_t p = (uint64_t) (uintptr_t) sreq;
        memcpy(hdr + HDR_LEN, &p, 8);
        hlen = SYNC_HDR_LEN;
        MPIR_cc_inc(sreq->cc_ptr);
    }
    torx_status_t st = torx_send(G.ctx, &r->u.send.msg, dest, MPIDI_TORX_P2P_HANDLER, hdr, hlen,
                                 data, data_sz, TORX_PROTO_AUTO, send_done, sreq);
    if (st != TORX_OK)
        MPIDI_TORX_fatal("torx_send", st);
    G.p2p_sent++;
    *request = sreq;

  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* ---- Receive ------------------------------------------------------------------------- */

static void recv_init(MPIR_Request * rreq, void *buf, MPI_Aint count, MPI_Datatype datatype)
{
    MPIDI_TORX_request_t *r = &MPIDI_TORX_REQ(rreq);
    r->flags = 0;
    r->u.recv.buf = buf;
    r->u.recv.count = count;
    r->u.recv.datatype = datatype;
    r->u.recv.bounce = NULL;
    r->u.recv.unexp = NULL;
    MPIR_Datatype_add_ref_if_not_builtin(datatype);
}

int MPIDI_TORX_irecv(void *buf, MPI_Aint count, MPI_Datatype datatype, int rank, int tag,
                     MPIR_Comm * comm, int context_offset, MPIR_Request ** request)
{
    int mpi_errno = MPI_SUCCESS;
    MPIR_Request *rreq = *request;
    if (rreq == NULL) {
        rreq = MPIR_Request_create_from_pool(MPIR_REQUEST_KIND__RECV, 0, 2);
        MPIR_ERR_CHKANDSTMT(rreq == NULL, mpi_errno, MPIX_ERR_NOREQ, goto fn_fail, "**nomemreq");
    } else {
        MPIR_Request_add_ref(rreq);
    }
    *request = rreq;
    if (unlikely(rank == MPI_PROC_NULL)) {
        rreq->status.MPI_SOURCE = MPI_PROC_NULL;
        rreq->status.MPI_TAG = MPI_ANY_TAG;
        rreq->status.MPI_ERROR = MPI_SUCCESS;
        MPIR_STATUS_SET_COUNT(rreq->status, 0);
        MPIDIU_request_complete(rreq);
        goto fn_exit;
    }
    recv_init(rreq, buf, count, datatype);
    MPIDI_TORX_request_t *r = &MPIDI_TORX_REQ(rreq);
    r->u.recv.rank = rank;
    r->u.recv.tag = tag;
    r->u.recv.context_id = comm->recvcontext_id + context_offset;

    MPIDI_TORX_unexp_t *u = unexp_find(rank, tag, r->u.recv.context_id);
    if (u) {
        unexp_remove(u);
        unexp_claim(rreq, u);
    } else {
        posted_append(rreq);
    }
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_TORX_imrecv(void *buf, MPI_Aint count, MPI_Datatype datatype, MPIR_Request * message)
{
    /* MPID_Imrecv turned the message into the receive request already */
    MPIDI_TORX_unexp_t *u = MPIDI_TORX_REQ(message).u.recv.unexp;
    MPIR_Assert(u != NULL);
    recv_init(message, buf, count, datatype);
    unexp_claim(message, u);
    return MPI_SUCCESS;
}

int MPIDI_TORX_cancel_recv(MPIR_Request * rreq)
{
    MPIDI_TORX_request_t *r = &MPIDI_TORX_REQ(rreq);
    if (MPIR_Request_is_complete(rreq) || !(r->flags & MPIDI_TORX_REQ_F_POSTED))
        return MPI_SUCCESS;     /* matched already: too late to cancel */
    posted_remove(rreq);
    MPIR_STATUS_SET_CANCEL_BIT(rreq->status, TRUE);
    MPIR_STATUS_SET_COUNT(rreq->status, 0);
    MPIR_Datatype_release_if_not_builtin(r->u.recv.datatype);
    MPIDIU_request_complete(rreq);
    return MPI_SUCCESS;
}

/* ---- Probe --------------------------------------------------------------------------- */

int MPIDI_TORX_probe(int source, int tag, MPIR_Comm * comm, int context_offset, int *flag,
                     MPIR_Request ** message, MPI_Status * status)
{
    int mpi_errno = MPI_SUCCESS;
    const int ctx_id = comm->recvcontext_id + context_offset;
    MPIDI_TORX_unexp_t *u = unexp_find(source, tag, ctx_id);
    if (u == NULL) {
        /* a polling MPI_Iprobe loop must make progress */
        const int n = torx_advance(G.ctx);
        if (n < 0)
            MPIDI_TORX_fatal("the torx context", (torx_status_t) n);
        u = unexp_find(source, tag, ctx_id);
    }
    if (u == NULL) {
        *flag = 0;
        goto fn_exit;
    }
    *flag = 1;
    if (status != MPI_STATUS_IGNORE) {
        status->MPI_SOURCE = u->rank;
        status->MPI_TAG = u->tag;
        MPIR_STATUS_SET_COUNT(*status, u->len);
        MPIR_STATUS_SET_CANCEL_BIT(*status, FALSE);
    }
    if (message) {
        MPIR_Request *req = MPIR_Request_create_from_pool(MPIR_REQUEST_KIND__MPROBE, 0, 2);
        MPIR_ERR_CHKANDSTMT(req == NULL, mpi_errno, MPIX_ERR_NOREQ, goto fn_fail, "**nomemreq");
        unexp_remove(u);
        MPIDI_TORX_REQ(req).flags = 0;
        MPIDI_TORX_REQ(req).u.recv.unexp = u;
        req->comm = comm;
        MPIR_Comm_add_ref(comm);
        req->status.MPI_SOURCE = u->rank;
        req->status.MPI_TAG = u->tag;
        req->status.MPI_ERROR = MPI_SUCCESS;
        MPIR_STATUS_SET_COUNT(req->status, u->len);
        *message = req;
    }
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* ---- Finalize ------------------------------------------------------------------------ */

/* Messages nobody received: deferred ones are discarded so their senders'
 * torx_finalize completes; arriving ones are freed when they are in. */
void MPIDI_TORX_p2p_finalize(void)
{
    while (G.unexp_head) {
        MPIDI_TORX_unexp_t *u = G.unexp_head;
        unexp_remove(u);
        if (u->state == UNEXP_DEFERRED) {
            torx_recv_t discard = { 0 };
            torx_accept(G.ctx, u->deferred, &discard);
            MPL_free(u);
        } else if (u->state == UNEXP_ARRIVING) {
            u->orphan = 1;
        } else {
            MPL_free(u);
        }
    }
}
