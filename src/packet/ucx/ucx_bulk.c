/* Bulk transfer ("DMA") for the ucx device: the data as one UCP active
 * message, which UCX sends eagerly or by its own rendezvous, as it sends
 * an MPI message for MPICH's ch4:ucx.
 *
 * torx_bulk_get and torx_bulk_put name a plain address in the peer, so the
 * peer moves the data from or into its own memory:
 *
 *   get   initiator sends GET_REQ {the peer's source address, len}; the
 *         peer sends the range as AM id BULK, the operation's cookie in the
 *         AM header; the initiator receives it straight into its buffer
 *         (ucp_am_recv_data_nbx for a rendezvous, a copy for an eager
 *         message), which ends the get. A peer that cannot send answers
 *         GET_DONE with the error instead.
 *   put   initiator sends its buffer as AM id BULK_PUT, the destination
 *         address and length in the AM header; the peer receives it into
 *         its memory and answers PUT_DONE with the status.
 *
 * One message and one data transfer per operation, no registration, and
 * UCX's large-message protocol on every transport: over tcp its RMA is
 * emulated, and a put against a packed key measured 844 MB/s at 64 KiB
 * between two emulated hosts where MPICH's ch4:ucx moved 3,206. The
 * operations' books (arguments, cookies, the test) are net/net_bulk.c's. */
#include "ucx.h"

#include <stdio.h>
#include <string.h>

/* The longest get whose data go eagerly. Between two emulated hosts over
 * tcp (3 rounds): 64 KiB 50.3 us eager, 66.8 by UCX's rendezvous; 256 KiB
 * 98.0 eager, 108.1 by rendezvous; 1 MiB level. */
#define BULK_EAGER_MAX (256u << 10)

/* The AM header of a bulk transfer's data. */
typedef struct bulk_hdr {
    uint32_t src; /* the sender's slot */
    uint32_t pad;
    uint64_t cookie; /* the initiator's operation */
    uint64_t addr;   /* BULK_PUT: where in the receiver the data go */
    uint64_t len;
} bulk_hdr_t;

/* GET_REQ's body after the sys header (round = cookie). */
typedef struct bulk_req {
    torxp_net_sys_t h;
    uint64_t peer_addr; /* the source, in the receiver of the request */
    uint64_t len;
} bulk_req_t;

/* An operation this task started (net/'s record first). */
typedef struct bulk_rec {
    torxp_net_bulk_rec_t net;
    void *local;
    bulk_hdr_t hdr; /* a put's AM header, kept until the send completes */
    int sending;    /* a put's data are still on their way out */
    int released;   /* tested done while sending: freed by the send's completion */
} bulk_rec_t;

/* A transfer this task performs for a peer. */
typedef struct bulk_serve {
    torxp_ucx_dev_t *dev;
    unsigned peer;
    int is_put;
    uint64_t cookie;
    bulk_hdr_t hdr;
} bulk_serve_t;

struct torxp_ucx_bulk {
    torxp_net_bulk_list_t list;
};

static void release(torxp_net_t *n, torxp_net_bulk_rec_t *nr)
{
    (void)n;
    bulk_rec_t *r = (bulk_rec_t *)nr;
    if (r->sending)
        r->released = 1; /* the send's completion frees it */
    else
        free(r);
}

static void fail_op(torxp_ucx_dev_t *d, torxp_net_bulk_rec_t *r, const char *what, ucs_status_t st)
{
    const torx_coord_t c = torxp_net_coord_of(&d->net, r->peer);
    r->done = 1;
    r->status = st == UCS_ERR_INVALID_PARAM ? TORX_ERR_INVAL : TORX_ERR_SYS;
    torxp_error(r->status,
                "torx: bulk %s of %zu bytes with rank %d at (%u,%u,%u,%u): %s failed (UCX): %s",
                r->is_put ? "put" : "get", r->len, d->net.slot_rank[r->peer], c.x, c.y, c.z, c.t,
                what, ucs_status_string(st));
}

/* ---- The data's way in: AM ids BULK (a get's data) and BULK_PUT ------------------- */

/* Receives a message's data into dst: a rendezvous by ucp_am_recv_data_nbx
 * (done() at its completion), an eager message by a copy (done() at
 * once). */
static void receive_into(torxp_ucx_dev_t *d, void *data, size_t length,
                         const ucp_am_recv_param_t *param, void *dst,
                         ucp_am_recv_data_nbx_callback_t done, void *arg)
{
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        memcpy(dst, data, length);
        done(NULL, UCS_OK, length, arg);
        return;
    }
    const ucp_request_param_t p = {.op_attr_mask =
                                       UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                                   .cb.recv_am = done,
                                   .user_data = arg};
    const ucs_status_ptr_t req = ucp_am_recv_data_nbx(d->worker, data, dst, length, &p);
    if (!UCS_PTR_IS_PTR(req))
        done(NULL, UCS_PTR_STATUS(req), length, arg);
}

static void on_get_data(void *request, ucs_status_t status, size_t length, void *user_data)
{
    bulk_rec_t *r = user_data;
    if (request)
        ucp_request_free(request);
    (void)length;
    r->net.done = 1;
    r->net.status = TORX_OK;
    if (status != UCS_OK) {
        r->net.status = TORX_ERR_SYS;
        torxp_error(TORX_ERR_SYS,
                    "torx: bulk get of %zu bytes: receiving the data failed (UCX): %s", r->net.len,
                    ucs_status_string(status));
    }
}

/* A bulk message's AM header copied into *h; 0 when its length is wrong
 * (counted and logged, what naming the message). */
static int bulk_header(torxp_ucx_dev_t *d, const void *header, size_t header_length,
                       const char *what, bulk_hdr_t *h)
{
    if (header_length != sizeof *h) {
        torxp_dev_malformed(&d->net.base, "%s with a %zu-byte header", what, header_length);
        return 0;
    }
    memcpy(h, header, sizeof *h);
    return 1;
}

static ucs_status_t on_bulk(void *arg, const void *header, size_t header_length, void *data,
                            size_t length, const ucp_am_recv_param_t *param)
{
    torxp_ucx_dev_t *d = arg;
    bulk_hdr_t h;
    if (!bulk_header(d, header, header_length, "bulk data", &h))
        return UCS_OK;
    torxp_net_bulk_rec_t *nr = torxp_net_bulk_find(&d->bulk->list, h.cookie);
    if (!nr || nr->peer != h.src || nr->done || nr->is_put || length != nr->len) {
        torxp_dev_malformed(&d->net.base,
                            "bulk data of %zu bytes for unknown get %llu from slot %u", length,
                            (unsigned long long)h.cookie, h.src);
        return UCS_OK;
    }
    bulk_rec_t *r = (bulk_rec_t *)nr;
    receive_into(d, data, length, param, r->local, on_get_data, r);
    return UCS_OK;
}

static void serve_done(bulk_serve_t *s, ucs_status_t st)
{
    const torxp_net_sys_t done = {.type =
                                      s->is_put ? TORXP_NET_SYS_PUT_DONE : TORXP_NET_SYS_GET_DONE,
                                  .version = TORXP_NET_WIRE_VERSION,
                                  .arg = (uint32_t)-st, /* UCS errors are negative */
                                  .round = s->cookie};
    s->dev->net.net_ops->sys_send(&s->dev->net, s->peer, &done, sizeof done);
}

static void on_put_data(void *request, ucs_status_t status, size_t length, void *user_data)
{
    bulk_serve_t *s = user_data;
    (void)length;
    if (request)
        ucp_request_free(request);
    serve_done(s, status);
    free(s);
}

static ucs_status_t on_bulk_put(void *arg, const void *header, size_t header_length, void *data,
                                size_t length, const ucp_am_recv_param_t *param)
{
    torxp_ucx_dev_t *d = arg;
    bulk_hdr_t h;
    if (!bulk_header(d, header, header_length, "bulk put", &h))
        return UCS_OK;
    if (h.src >= d->net.nslots || d->net.slot_rank[h.src] < 0) {
        torxp_dev_malformed(&d->net.base, "bulk put from slot %u, outside the job", h.src);
        return UCS_OK;
    }
    bulk_serve_t *s = torxp_calloc(1, sizeof *s);
    if (!s) {
        torxp_dev_fail(&d->net.base, TORX_ERR_NOMEM, "out of memory serving a bulk put");
        return UCS_OK;
    }
    *s = (bulk_serve_t){.dev = d, .peer = h.src, .is_put = 1, .cookie = h.cookie};
    if (h.len != length || !h.addr || h.addr + h.len < h.addr) {
        on_put_data(NULL, UCS_ERR_INVALID_PARAM, 0, s);
        return UCS_OK;
    }
    receive_into(d, data, length, param, (void *)(uintptr_t)h.addr, on_put_data, s);
    return UCS_OK;
}

/* ---- The data's way out ------------------------------------------------------------ */

static void on_get_sent(void *request, ucs_status_t status, void *user_data)
{
    bulk_serve_t *s = user_data;
    ucp_request_free(request);
    if (status != UCS_OK) /* the initiator may hold part of it: the connection broke */
        torxp_ucx_fail(s->dev, "a bulk get's data", (int)s->peer, status);
    free(s);
}

/* A get a peer asked for: the range as one message. */
static void serve_get(torxp_ucx_dev_t *d, unsigned src, const bulk_req_t *q)
{
    bulk_serve_t *s = torxp_calloc(1, sizeof *s);
    if (!s) {
        torxp_dev_fail(&d->net.base, TORX_ERR_NOMEM,
                       "out of memory serving a bulk get of %llu bytes",
                       (unsigned long long)q->len);
        return;
    }
    *s = (bulk_serve_t){.dev = d,
                        .peer = src,
                        .cookie = q->h.round,
                        .hdr = {.src = d->net.self_slot, .cookie = q->h.round, .len = q->len}};
    if (q->len == 0 || !q->peer_addr || q->peer_addr + q->len < q->peer_addr) {
        serve_done(s, UCS_ERR_INVALID_PARAM);
        free(s);
        return;
    }
    /* Up to BULK_EAGER_MAX eagerly: UCX's rendezvous would add its own
     * handshake to the one the get already made. */
    const ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                                                   UCP_OP_ATTR_FIELD_USER_DATA |
                                                   UCP_OP_ATTR_FIELD_FLAGS,
                                   .flags = q->len <= BULK_EAGER_MAX ? UCP_AM_SEND_FLAG_EAGER : 0,
                                   .cb.send = on_get_sent,
                                   .user_data = s};
    const ucs_status_ptr_t req =
        ucp_am_send_nbx(d->eps[src], TORXP_UCX_AM_BULK, &s->hdr, sizeof s->hdr,
                        (const void *)(uintptr_t)q->peer_addr, q->len, &p);
    if (UCS_PTR_IS_PTR(req))
        return; /* on_get_sent frees s */
    if (UCS_PTR_IS_ERR(req))
        serve_done(s, UCS_PTR_STATUS(req));
    free(s);
}

static void on_put_sent(void *request, ucs_status_t status, void *user_data)
{
    bulk_rec_t *r = user_data;
    ucp_request_free(request);
    r->sending = 0;
    if (status != UCS_OK && !r->net.done) {
        r->net.done = 1;
        r->net.status = TORX_ERR_SYS;
        torxp_error(TORX_ERR_SYS, "torx: bulk put of %zu bytes: sending the data failed (UCX): %s",
                    r->net.len, ucs_status_string(status));
    }
    if (r->released)
        free(r);
}

/* ---- Set-up, messages, ops ------------------------------------------------------------ */

torx_status_t torxp_ucx_bulk_setup(torxp_ucx_dev_t *d)
{
    d->bulk = torxp_calloc(1, sizeof *d->bulk);
    if (!d->bulk)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for bulk transfers");
    d->bulk->list.next_cookie = 1;
    torx_status_t st = torxp_ucx_am_handler(d, TORXP_UCX_AM_BULK, on_bulk, UCP_AM_FLAG_WHOLE_MSG);
    if (st == TORX_OK)
        st = torxp_ucx_am_handler(d, TORXP_UCX_AM_BULK_PUT, on_bulk_put, UCP_AM_FLAG_WHOLE_MSG);
    return st;
}

void torxp_ucx_bulk_fini(torxp_ucx_dev_t *d)
{
    if (!d->bulk)
        return;
    torxp_net_bulk_fini(&d->net, &d->bulk->list, release);
    free(d->bulk);
    d->bulk = NULL;
}

const char *torxp_ucx_bulk_path(const torx_pkt_dev_t *dev)
{
    (void)dev;
    return "messages";
}

void torxp_ucx_bulk_on_sys(torxp_ucx_dev_t *d, unsigned src, const torxp_net_sys_t *m, size_t len)
{
    if (m->type == TORXP_NET_SYS_GET_REQ) {
        if (len != sizeof(bulk_req_t)) {
            torxp_dev_malformed(&d->net.base, "bulk request of %zu bytes from slot %u", len, src);
            return;
        }
        bulk_req_t q;
        memcpy(&q, m, sizeof q);
        serve_get(d, src, &q);
        return;
    }
    if (m->type == TORXP_NET_SYS_PUT_REQ || len != sizeof(torxp_net_sys_t)) {
        torxp_dev_malformed(&d->net.base, "bulk message of %zu bytes (type %u) from slot %u", len,
                            m->type, src);
        return;
    }
    torxp_net_bulk_rec_t *r = torxp_net_bulk_on_done(&d->net, &d->bulk->list, src, m);
    if (r && m->arg)
        fail_op(d, r, r->is_put ? "the peer's receive" : "the peer's send", -(ucs_status_t)m->arg);
}

static torx_status_t bulk_start(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer,
                                uint64_t remote, void *local, size_t len, int is_put)
{
    torxp_ucx_dev_t *d = torxp_ucx_of(torxp_net_of(dev));
    unsigned slot;
    torx_status_t rc = torxp_net_bulk_begin(&d->net, op, peer, remote, local, len, is_put, &slot);
    if (rc != TORX_OK)
        return rc == TORX_AGAIN ? TORX_OK : rc; /* AGAIN: finished here */

    torxp_net_lock(&d->net);
    rc = dev->failed;
    bulk_rec_t *r = rc == TORX_OK ? torxp_calloc(1, sizeof *r) : NULL;
    if (rc == TORX_OK && !r)
        rc = torxp_error(TORX_ERR_NOMEM, "torx: %s: out of memory",
                         is_put ? "torx_bulk_put" : "torx_bulk_get");
    if (rc != TORX_OK) {
        torxp_net_unlock(&d->net);
        torxp_net_bulk_abandon(op);
        return rc;
    }
    r->local = local;
    const uint64_t cookie = torxp_net_bulk_started(&d->bulk->list, op, &r->net, slot, is_put, len);
    if (!is_put) {
        const bulk_req_t q = {.h = {.type = TORXP_NET_SYS_GET_REQ,
                                    .version = TORXP_NET_WIRE_VERSION,
                                    .round = cookie},
                              .peer_addr = remote,
                              .len = len};
        rc = d->net.net_ops->sys_send(&d->net, slot, &q, sizeof q);
    } else if (d->peers[slot].gone != UCS_OK) {
        rc = torxp_ucx_fail(d, "the connection", (int)slot, d->peers[slot].gone);
    } else {
        r->hdr =
            (bulk_hdr_t){.src = d->net.self_slot, .cookie = cookie, .addr = remote, .len = len};
        const ucp_request_param_t p = {.op_attr_mask =
                                           UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                                       .cb.send = on_put_sent,
                                       .user_data = r};
        const ucs_status_ptr_t req = ucp_am_send_nbx(d->eps[slot], TORXP_UCX_AM_BULK_PUT, &r->hdr,
                                                     sizeof r->hdr, local, len, &p);
        if (UCS_PTR_IS_PTR(req))
            r->sending = 1;
        else if (UCS_PTR_IS_ERR(req))
            fail_op(d, &r->net, "sending the data", UCS_PTR_STATUS(req));
    }
    torxp_net_unlock(&d->net);
    return rc;
}

torx_status_t torxp_ucx_bulk_get(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer,
                                 const void *remote, void *local, size_t len, unsigned flags)
{
    (void)flags;
    return bulk_start(dev, op, peer, (uint64_t)(uintptr_t)remote, local, len, 0);
}

torx_status_t torxp_ucx_bulk_put(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer,
                                 void *remote, const void *local, size_t len)
{
    return bulk_start(dev, op, peer, (uint64_t)(uintptr_t)remote, (void *)local, len, 1);
}

torx_status_t torxp_ucx_bulk_test(torx_pkt_dev_t *dev, torx_bulk_t *op)
{
    torxp_ucx_dev_t *d = torxp_ucx_of(torxp_net_of(dev));
    return torxp_net_bulk_test(&d->net, &d->bulk->list, op, release);
}
