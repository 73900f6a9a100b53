/* Bulk transfer ("DMA") for the ucx device: UCP RMA with packed remote keys.
 *
 * torx_bulk_get and torx_bulk_put name a plain address in the peer, with no
 * key, so the initiator maps its own buffer and asks the peer to move the
 * data against it, as the ofi device does:
 *
 *   get   initiator maps local (ucp_mem_map), packs its key
 *         (ucp_rkey_pack) and sends GET_REQ {the peer's source address,
 *         len, its buffer's address, the packed key}; the peer unpacks the
 *         key, ucp_put_nbx's its memory into the buffer and sends
 *         GET_DONE behind a ucp_worker_fence (so the data are in place when
 *         it arrives, whatever UCX's order of RMA and active messages).
 *   put   the same with PUT_REQ; the peer ucp_get_nbx's the buffer into
 *         its memory and, once the get has completed, sends PUT_DONE.
 *
 * Two messages and one RMA per operation; nobody maps memory it does not
 * own, and no key has to be exchanged at start-up. The operations'
 * bookkeeping (arguments, cookies, the test) is net/net_bulk.c's. */
#include "ucx.h"

#include <stdio.h>
#include <string.h>

/* The request's body after the sys header (round = cookie). */
typedef struct bulk_req {
    torxp_net_sys_t h;
    uint64_t peer_addr; /* address in the receiver of the request */
    uint64_t len;
    uint64_t buf_addr; /* the initiator's buffer */
    uint32_t key_len;
    uint32_t pad;
    unsigned char key[TORXP_NET_SYS_MAX - sizeof(torxp_net_sys_t) - 32];
} bulk_req_t;
static_assert(sizeof(bulk_req_t) == TORXP_NET_SYS_MAX, "a bulk request fills a device message");

/* An operation this task started (net/'s record first). */
typedef struct bulk_rec {
    torxp_net_bulk_rec_t net;
    ucp_mem_h memh;
} bulk_rec_t;

/* An RMA operation this task performs for a peer. */
typedef struct bulk_serve {
    torxp_ucx_dev_t *dev;
    unsigned peer;
    int is_put;
    uint64_t cookie;
    ucp_rkey_h rkey;
    ucs_status_t status; /* the first failure */
} bulk_serve_t;

struct torxp_ucx_bulk {
    torxp_net_bulk_list_t list;
};

torx_status_t torxp_ucx_bulk_setup(torxp_ucx_dev_t *d)
{
    d->bulk = torxp_calloc(1, sizeof *d->bulk);
    if (!d->bulk)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for bulk transfers");
    d->bulk->list.next_cookie = 1;
    return TORX_OK;
}

static void release(torxp_net_t *n, torxp_net_bulk_rec_t *nr)
{
    bulk_rec_t *r = (bulk_rec_t *)nr;
    if (r->memh)
        ucp_mem_unmap(torxp_ucx_of(n)->context, r->memh);
    free(r);
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
    return "rma";
}

/* ---- serving a peer ---------------------------------------------------------- */

/* Answers the initiator (DONE with s's status, negated: UCS errors are
 * negative). */
static void send_done(bulk_serve_t *s)
{
    torxp_ucx_dev_t *d = s->dev;
    const torxp_net_sys_t done = {.type =
                                      s->is_put ? TORXP_NET_SYS_PUT_DONE : TORXP_NET_SYS_GET_DONE,
                                  .version = TORXP_NET_WIRE_VERSION,
                                  .arg = (uint32_t)-s->status,
                                  .round = s->cookie};
    d->net.net_ops->sys_send(&d->net, s->peer, &done, sizeof done);
}

static void serve_free(bulk_serve_t *s)
{
    if (s->rkey)
        ucp_rkey_destroy(s->rkey);
    free(s);
}

static void on_rma_done(void *request, ucs_status_t status, void *user_data)
{
    bulk_serve_t *s = user_data;
    ucp_request_free(request);
    if (s->is_put) { /* our get of the initiator's data: in place now */
        s->status = status;
        send_done(s);
    } else if (status != UCS_OK) { /* a put whose GET_DONE has gone: the connection broke */
        torxp_ucx_fail(s->dev, "a bulk get's ucp_put_nbx", (int)s->peer, status);
    }
    serve_free(s);
}

/* Starts the RMA a peer asked for. A get's put is followed by a fence and
 * GET_DONE at once: UCX completes the put before any later operation to the
 * peer, so the data are in place when GET_DONE arrives, and no flush costs
 * a round trip on the rendezvous's way. The key lives until the put's
 * completion. */
static void serve_request(torxp_ucx_dev_t *d, unsigned src, const bulk_req_t *q, int is_put)
{
    bulk_serve_t *s = torxp_calloc(1, sizeof *s);
    if (!s) {
        torxp_dev_fail(&d->net.base, TORX_ERR_NOMEM,
                       "out of memory serving a bulk %s of %llu bytes", is_put ? "put" : "get",
                       (unsigned long long)q->len);
        return;
    }
    *s = (bulk_serve_t){.dev = d, .peer = src, .is_put = is_put, .cookie = q->h.round};
    if (q->len == 0 || q->peer_addr + q->len < q->peer_addr || q->key_len > sizeof q->key)
        s->status = UCS_ERR_INVALID_PARAM;
    else if ((s->status = ucp_ep_rkey_unpack(d->eps[src], q->key, &s->rkey)) != UCS_OK)
        s->rkey = NULL;
    if (s->status != UCS_OK) {
        send_done(s);
        serve_free(s);
        return;
    }
    const ucp_request_param_t p = {.op_attr_mask =
                                       UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                                   .cb.send = on_rma_done,
                                   .user_data = s};
    void *mine = (void *)(uintptr_t)q->peer_addr;
    const ucs_status_ptr_t req =
        is_put ? ucp_get_nbx(d->eps[src], mine, q->len, q->buf_addr, s->rkey, &p)
               : ucp_put_nbx(d->eps[src], mine, q->len, q->buf_addr, s->rkey, &p);
    if (UCS_PTR_IS_ERR(req))
        s->status = UCS_PTR_STATUS(req);
    if (!is_put && s->status == UCS_OK) {
        const ucs_status_t st = ucp_worker_fence(d->worker);
        if (st != UCS_OK)
            s->status = st;
    }
    if (!is_put || s->status != UCS_OK)
        send_done(s);
    if (!UCS_PTR_IS_PTR(req))
        serve_free(s); /* done, or failed; else on_rma_done frees it */
}

/* ---- this task's operations -------------------------------------------------------- */

void torxp_ucx_bulk_on_sys(torxp_ucx_dev_t *d, unsigned src, const torxp_net_sys_t *m, size_t len)
{
    const int req = m->type == TORXP_NET_SYS_GET_REQ || m->type == TORXP_NET_SYS_PUT_REQ;
    if (req ? len < offsetof(bulk_req_t, key) : len != sizeof(torxp_net_sys_t)) {
        torxp_dev_malformed(&d->net.base, "bulk message of %zu bytes (type %u) from slot %u", len,
                            m->type, src);
        return;
    }
    if (req) {
        bulk_req_t q;
        memset(&q, 0, sizeof q);
        memcpy(&q, m, len);
        if (len != offsetof(bulk_req_t, key) + q.key_len) {
            torxp_dev_malformed(&d->net.base, "bulk request of %zu bytes with a %u-byte key", len,
                                q.key_len);
            return;
        }
        serve_request(d, src, &q, m->type == TORXP_NET_SYS_PUT_REQ);
        return;
    }
    torxp_net_bulk_rec_t *r = torxp_net_bulk_on_done(&d->net, &d->bulk->list, src, m);
    if (r && m->arg) {
        const ucs_status_t st = -(ucs_status_t)m->arg;
        const torx_coord_t c = torxp_net_coord_of(&d->net, src);
        r->status = st == UCS_ERR_INVALID_PARAM ? TORX_ERR_INVAL : TORX_ERR_SYS;
        torxp_error(r->status,
                    "torx: bulk %s of %zu bytes with rank %d at (%u,%u,%u,%u): the peer's RMA %s "
                    "failed (UCX): %s",
                    r->is_put ? "put" : "get", r->len, d->net.slot_rank[src], c.x, c.y, c.z, c.t,
                    r->is_put ? "read" : "write", ucs_status_string(st));
    }
}

static torx_status_t bulk_start(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer,
                                uint64_t remote, void *local, size_t len, int is_put)
{
    torxp_ucx_dev_t *d = torxp_ucx_of(torxp_net_of(dev));
    const char *what = is_put ? "torx_bulk_put" : "torx_bulk_get";
    unsigned slot;
    torx_status_t rc = torxp_net_bulk_begin(&d->net, op, peer, remote, local, len, is_put, &slot);
    if (rc != TORX_OK)
        return rc == TORX_AGAIN ? TORX_OK : rc; /* AGAIN: finished here */

    torxp_net_lock(&d->net);
    rc = dev->failed;
    bulk_rec_t *r = rc == TORX_OK ? torxp_calloc(1, sizeof *r) : NULL;
    if (rc == TORX_OK && !r)
        rc = torxp_error(TORX_ERR_NOMEM, "torx: %s: out of memory", what);
    bulk_req_t q = {.h = {.type = is_put ? TORXP_NET_SYS_PUT_REQ : TORXP_NET_SYS_GET_REQ,
                          .version = TORXP_NET_WIRE_VERSION},
                    .peer_addr = remote,
                    .len = len,
                    .buf_addr = (uint64_t)(uintptr_t)local};
    if (rc == TORX_OK) {
        const ucp_mem_map_params_t mp = {.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                                                       UCP_MEM_MAP_PARAM_FIELD_LENGTH,
                                         .address = local,
                                         .length = len};
        ucs_status_t st = ucp_mem_map(d->context, &mp, &r->memh);
        void *key = NULL;
        size_t key_len = 0;
        if (st == UCS_OK)
            st = ucp_rkey_pack(d->context, r->memh, &key, &key_len);
        if (st != UCS_OK)
            rc = torxp_error(st == UCS_ERR_NO_MEMORY ? TORX_ERR_NOMEM : TORX_ERR_SYS,
                             "torx: %s: mapping %zu bytes at %p failed (UCX): %s", what, len, local,
                             ucs_status_string(st));
        else if (key_len > sizeof q.key)
            rc = torxp_error(TORX_ERR_UNSUPPORTED,
                             "torx: %s: UCX's packed key takes %zu bytes, more than the %zu a "
                             "request carries; narrow the transports (TORX_UCX_TLS)",
                             what, key_len, sizeof q.key);
        if (key) {
            if (rc == TORX_OK) {
                memcpy(q.key, key, key_len);
                q.key_len = (uint32_t)key_len;
            }
            ucp_rkey_buffer_release(key);
        }
    }
    if (rc != TORX_OK) {
        if (r)
            release(&d->net, &r->net);
        torxp_net_unlock(&d->net);
        torxp_net_bulk_abandon(op);
        return rc;
    }
    q.h.round = torxp_net_bulk_started(&d->bulk->list, op, &r->net, slot, is_put, len);
    rc = d->net.net_ops->sys_send(&d->net, slot, &q, offsetof(bulk_req_t, key) + q.key_len);
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
