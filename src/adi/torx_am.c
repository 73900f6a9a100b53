/*
 * torx netmod: the receive side of MPIDIG active messages, and send
 * completions. See torx_am.h for the wire format.
 *
 * MPIDIG needs its per-pair message order (MPI matching order): the torx
 * handler runs once per message, in send order, at the message's first
 * packet. It calls MPIDIG_global.target_msg_cbs[id]:
 *  - synchronously with the data, when all of it is already here;
 *  - asynchronously (MPIDIG_AM_ATTR__IS_ASYNC) otherwise: MPIDIG matches and
 *    returns its request, the data lands directly in a contiguous receive
 *    buffer (or in a bounce buffer that MPIDIG_recv_copy_seg unpacks), and
 *    target_cmpl_cb runs when torx reports the data complete.
 * A message whose AM header travels in its data (large RMA headers) can only
 * be delivered once all of it is in; it and every later message from the
 * same source wait in a per-source queue (MPIDI_TORX_pending_t) and are
 * delivered in order as they complete.
 */
#include "mpidimpl.h"
#include "torx_impl.h"

#include <time.h>

struct MPIDI_TORX_pending {
    MPIDI_TORX_pending_t *next;
    int src;
    int complete;
    int handler_id;
    int flags;
    size_t am_hdr_sz;
    uint64_t hdr[TORX_MSG_MAX_HDR / 8]; /* the AM header, when it came inline */
    char *buf;                  /* the torx data */
    size_t len;
};

typedef struct {
    MPIR_Request *rreq;
    size_t len;
    uint64_t data[];
} bounce_t;

void MPIDI_TORX_fatal(const char *what, torx_status_t st)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "torx netmod, rank %d: %s failed: %s (%s)", MPIDI_TORX_global.rank,
             what, torx_status_str(st), torx_last_error());
    if (st == TORX_ERR_PEER) {
        /* A peer died. Give the launcher a moment to see that death and
         * name the dead rank (hydra then ends the job, this task with it)
         * before this task's own abort makes it look like the first to go;
         * a launcher that never notices costs this second once. */
        const struct timespec pause = { 1, 0 };
        nanosleep(&pause, NULL);
    }
    MPID_Abort(NULL, MPI_SUCCESS, 1, msg);
}

/* Memory for data that is already arriving: a handler has no caller to
 * return MPI_ERR_NO_MEM to, and going on would lose the message, so the job
 * ends naming what could not be allocated. */
static void *alloc_or_die(size_t n, const char *what)
{
    void *p = MPL_malloc(n, MPL_MEM_BUFFER);
    if (p == NULL)
        MPIDI_TORX_fatal(what, TORX_ERR_NOMEM);
    return p;
}

/* ---- Sending ----------------------------------------------------------------- */

void MPIDI_TORX_am_isend_done(torx_ctx_t * ctx, torx_msg_t * msg, void *arg)
{
    MPIDI_TORX_EVENT();
    MPIDI_TORX_am_request_t *slot = arg;
    MPIR_Request *sreq = slot->sreq;
    int handler_id = slot->handler_id;

    MPL_free(slot->pack_buf);
    slot->pack_buf = NULL;
    if (slot->is_heap)
        MPL_free(slot);
    else
        slot->in_flight = 0;
    MPIDIG_global.origin_cbs[handler_id] (sreq);
}

typedef struct {
    torx_msg_t msg;
    uint64_t data[];
} copy_send_t;

static void copy_send_done(torx_ctx_t * ctx, torx_msg_t * msg, void *arg)
{
    MPL_free(arg);
}

/* A send with no request, that keeps nothing of the caller's: one packet
 * goes out at once; otherwise the data is copied into a heap block that
 * lives until the message layer is done with it (torx_send copies the
 * header itself). what names the send in a fatal error. */
void MPIDI_TORX_send_copy(int dest, int handler, const void *hdr, size_t hdr_len,
                          const void *data, size_t len, const char *what)
{
    torx_status_t st = torx_send_inject(MPIDI_TORX_global.ctx, dest, handler, hdr, hdr_len,
                                        data, len);
    if (st == TORX_OK)
        return;
    if (st != TORX_AGAIN)
        MPIDI_TORX_fatal(what, st);
    copy_send_t *s = MPL_malloc(sizeof(*s) + len, MPL_MEM_BUFFER);
    if (s == NULL)
        MPIDI_TORX_fatal(what, TORX_ERR_NOMEM);
    if (len)
        memcpy(s->data, data, len);
    st = torx_send(MPIDI_TORX_global.ctx, &s->msg, dest, handler, hdr, hdr_len,
                   len ? s->data : NULL, len, TORX_PROTO_AUTO, copy_send_done, s);
    if (st != TORX_OK)
        MPIDI_TORX_fatal(what, st);
}

/* An AM header alone (am_send_hdr): it rides in the torx header when it
 * fits, else as the torx data. */
int MPIDI_TORX_am_send_hdr(int dest, int handler_id, const void *am_hdr, MPI_Aint am_hdr_sz)
{
    union {
        MPIDI_TORX_am_wire_t w;
        char c[TORX_MSG_MAX_HDR];
    } h;
    size_t hlen = sizeof(MPIDI_TORX_am_wire_t);
    const void *data = NULL;
    size_t len = 0;

    MPIR_Assert(am_hdr_sz <= MPIDI_TORX_AM_HDR_MAX);
    h.w.handler_id = (uint8_t) handler_id;
    h.w.flags = 0;
    h.w.am_hdr_sz = (uint16_t) am_hdr_sz;
    if (am_hdr_sz <= MPIDI_TORX_AM_INLINE_HDR_MAX) {
        memcpy(h.c + hlen, am_hdr, am_hdr_sz);
        hlen += am_hdr_sz;
    } else {
        h.w.flags |= MPIDI_TORX_AM_F_HDR_IN_DATA;
        data = am_hdr;
        len = am_hdr_sz;
    }
    MPIDI_TORX_global.am_sent++;
    MPIDI_TORX_send_copy(dest, MPIDI_TORX_AM_HANDLER, h.c, hlen, data, len,
                         "sending an active message");
    return MPI_SUCCESS;
}

/* ---- Receiving ---------------------------------------------------------------- */

static uint32_t am_attr(void)
{
    uint32_t attr = 0;
    MPIDIG_AM_ATTR_SET_VCIS(attr, 0, 0);
    return attr;
}

static void check_recv_status(torx_status_t st)
{
    /* truncation is MPIDIG's to report (MPIDIG_recv_setup set MPI_ERR_TRUNCATE) */
    if (st != TORX_OK && st != TORX_ERR_TRUNCATE)
        MPIDI_TORX_fatal("receiving an active message", st);
}

static void async_direct_done(torx_ctx_t * ctx, void *arg, torx_status_t st, size_t received)
{
    MPIDI_TORX_EVENT();
    MPIR_Request *rreq = arg;
    check_recv_status(st);
    MPIDIG_REQUEST(rreq, req->recv_async).in_data_sz = 0;
    MPIDIG_REQUEST(rreq, req->target_cmpl_cb) (rreq);
}

static void async_bounce_done(torx_ctx_t * ctx, void *arg, torx_status_t st, size_t received)
{
    MPIDI_TORX_EVENT();
    bounce_t *b = arg;
    MPIR_Request *rreq = b->rreq;
    check_recv_status(st);
    int done = MPIDIG_recv_copy_seg(b->data, (MPI_Aint) received, rreq);
    MPIR_Assert(done);
    (void) done;
    MPL_free(b);
    MPIDIG_REQUEST(rreq, req->target_cmpl_cb) (rreq);
}

/* MPIDIG took the message asynchronously (rreq, or NULL: nothing to receive):
 * say where torx puts the data_len bytes still to come. */
static void setup_async(MPIR_Request * rreq, size_t data_len, torx_recv_t * recv)
{
    if (rreq == NULL) {
        recv->buf = NULL;
        return;
    }
    MPIDIG_rreq_async_t *p = &(MPIDIG_REQUEST(rreq, req->recv_async));
    if (p->recv_type == MPIDIG_RECV_DATATYPE && !p->is_device_buffer) {
        int dt_contig;
        MPI_Aint sz, lb;
        MPIR_Datatype *dtp;
        MPIDI_Datatype_get_info(MPIDIG_REQUEST(rreq, count), MPIDIG_REQUEST(rreq, datatype),
                                dt_contig, sz, dtp, lb);
        (void) sz;
        (void) lb;
        (void) dtp;
        if (dt_contig)
            MPIDIG_convert_datatype(rreq);
    }
    MPIDIG_recv_setup(rreq);
    if (p->recv_type == MPIDIG_RECV_CONTIG && !p->is_device_buffer) {
        /* zero-copy: straight into the receive buffer (torx truncates) */
        recv->buf = p->iov_one.iov_base;
        recv->len = p->iov_one.iov_len;
        recv->done = async_direct_done;
        recv->arg = rreq;
    } else {
        bounce_t *b = alloc_or_die(sizeof(*b) + data_len + 1, "a bounce buffer for an active message");
        b->rreq = rreq;
        b->len = data_len;
        recv->buf = b->data;
        recv->len = data_len;
        recv->done = async_bounce_done;
        recv->arg = b;
    }
}

static void deliver_pending(MPIDI_TORX_pending_t * p)
{
    void *am_hdr;
    char *data = p->buf;
    size_t len = p->len;
    if (p->flags & MPIDI_TORX_AM_F_HDR_IN_DATA) {
        am_hdr = p->buf;
        data += p->am_hdr_sz;
        len -= p->am_hdr_sz;
    } else {
        am_hdr = p->hdr;
    }
    MPIDIG_global.target_msg_cbs[p->handler_id] (am_hdr, len ? data : NULL, len, am_attr(),
                                                 NULL);
}

static void drain(int src)
{
    MPIDI_TORX_pending_t **head = &MPIDI_TORX_global.pending_head[src];
    while (*head && (*head)->complete) {
        MPIDI_TORX_pending_t *p = *head;
        *head = p->next;
        if (*head == NULL)
            MPIDI_TORX_global.pending_tail[src] = NULL;
        deliver_pending(p);
        MPL_free(p->buf);
        MPL_free(p);
    }
}

static void pending_done(torx_ctx_t * ctx, void *arg, torx_status_t st, size_t received)
{
    MPIDI_TORX_EVENT();
    MPIDI_TORX_pending_t *p = arg;
    if (st != TORX_OK)
        MPIDI_TORX_fatal("receiving an active message", st);
    p->complete = 1;
    drain(p->src);
}

/* A message that no torx netmod sends: the job ends, naming the sender and
 * what was wrong. Dropping it is no option: MPIDIG's requests wait for every
 * active message, so a lost one would be a hang instead of an error. */
static void __attribute__((noreturn)) malformed(int src, const char *what)
{
    char msg[512];
    snprintf(msg, sizeof msg, "torx netmod, rank %d: malformed active message from rank %d: %s",
             MPIDI_TORX_global.rank, src, what);
    MPID_Abort(NULL, MPI_SUCCESS, 1, msg);
    abort();                    /* MPID_Abort does not return */
}

/* Why an active message's wire header does not fit what came with it, or
 * NULL: every length is checked before anything is copied. */
static const char *am_wire_invalid(const torx_recv_info_t * info, const MPIDI_TORX_am_wire_t * w)
{
    if (w->handler_id >= MPIDI_AM_HANDLERS_MAX || !MPIDIG_global.target_msg_cbs[w->handler_id])
        return "its MPIDIG handler id is not registered";
    if (w->flags & ~MPIDI_TORX_AM_F_HDR_IN_DATA)
        return "unknown flags";
    if (w->flags & MPIDI_TORX_AM_F_HDR_IN_DATA) {
        if (w->am_hdr_sz > info->data_len)
            return "its AM header is longer than the data that should carry it";
    } else if (w->am_hdr_sz > MPIDI_TORX_AM_INLINE_HDR_MAX ||
               w->am_hdr_sz > info->hdr_len - sizeof(*w)) {
        return "its inline AM header is longer than the torx header";
    }
    return NULL;
}

void MPIDI_TORX_am_handler(torx_ctx_t * ctx, void *harg, const torx_recv_info_t * info,
                           torx_recv_t * recv)
{
    MPIDI_TORX_EVENT();
    MPIDI_TORX_am_wire_t w;
    int src = info->src;
    if (info->hdr_len < sizeof(w))
        malformed(src, "its torx header is shorter than the AM wire header");
    memcpy(&w, info->hdr, sizeof(w));
    const char *bad = am_wire_invalid(info, &w);
    if (bad)
        malformed(src, bad);
    size_t am_hdr_sz = w.am_hdr_sz;
    int in_data = (w.flags & MPIDI_TORX_AM_F_HDR_IN_DATA) != 0;
    const char *inline_hdr = (const char *) info->hdr + sizeof(w);
    int have_all = info->data != NULL || info->data_len == 0;

    MPIDI_TORX_global.am_received++;

    if (MPIDI_TORX_global.pending_head[src] == NULL && (!in_data || have_all)) {
        /* deliver now, in order */
        if (!in_data) {
            uint64_t hb[TORX_MSG_MAX_HDR / 8];
            memcpy(hb, inline_hdr, am_hdr_sz);
            if (have_all) {
                MPIDIG_global.target_msg_cbs[w.handler_id] (hb, (void *) info->data,
                                                            info->data_len, am_attr(), NULL);
                recv->buf = NULL;
            } else {
                MPIR_Request *rreq = NULL;
                MPIDIG_global.target_msg_cbs[w.handler_id] (hb, NULL, info->data_len,
                                                            am_attr() | MPIDIG_AM_ATTR__IS_ASYNC,
                                                            &rreq);
                setup_async(rreq, info->data_len, recv);
            }
        } else {
            /* header at the front of the data: copy it out, aligned */
            void *hb = alloc_or_die(am_hdr_sz ? am_hdr_sz : 1, "copying an active message's header");
            memcpy(hb, info->data, am_hdr_sz);
            size_t len = info->data_len - am_hdr_sz;
            MPIDIG_global.target_msg_cbs[w.handler_id] (hb,
                                                        len ? (char *) info->data +
                                                        am_hdr_sz : NULL, len, am_attr(), NULL);
            MPL_free(hb);
            recv->buf = NULL;
        }
        return;
    }

    /* deliver later, after the earlier messages of this source */
    MPIDI_TORX_pending_t *p = alloc_or_die(sizeof(*p), "holding an early active message");
    p->next = NULL;
    p->src = src;
    p->complete = 0;
    p->handler_id = w.handler_id;
    p->flags = w.flags;
    p->am_hdr_sz = am_hdr_sz;
    if (!in_data)
        memcpy(p->hdr, inline_hdr, am_hdr_sz);
    p->len = info->data_len;
    p->buf = alloc_or_die(p->len + 1, "holding an early active message's data");
    if (MPIDI_TORX_global.pending_tail[src])
        MPIDI_TORX_global.pending_tail[src]->next = p;
    else
        MPIDI_TORX_global.pending_head[src] = p;
    MPIDI_TORX_global.pending_tail[src] = p;
    MPIDI_TORX_global.am_deferred++;
    if (have_all) {
        if (p->len)
            memcpy(p->buf, info->data, p->len);
        p->complete = 1;
        recv->buf = NULL;
        drain(src);
    } else {
        recv->buf = p->buf;
        recv->len = p->len;
        recv->done = pending_done;
        recv->arg = p;
    }
}
