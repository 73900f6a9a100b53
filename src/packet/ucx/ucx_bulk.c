/* Bulk transfer ("DMA") for the ucx device: UCP RMA with packed remote keys.
 *
 * torx_bulk_get and torx_bulk_put name a plain address in the peer, with no
 * key, so the initiator maps its own buffer and asks the peer to move the
 * data against it, as the ofi device does:
 *
 *   get   initiator maps local (ucp_mem_map), packs its key
 *         (ucp_rkey_pack) and sends GET_REQ {the peer's source address,
 *         len, its buffer's address, the packed key}; the peer unpacks the
 *         key, ucp_put_nbx's its memory into the buffer, flushes the
 *         endpoint (so the data are in place, whatever UCX's order of RMA
 *         and active messages) and sends GET_DONE with the status.
 *   put   the same with PUT_REQ; the peer ucp_get_nbx's the buffer into
 *         its memory and, once the get has completed, sends PUT_DONE.
 *
 * Two messages and one RMA per operation; nobody maps memory it does not
 * own, and no key has to be exchanged at start-up. An operation whose peer
 * is silent probes it every BULK_PING_EVERY tests (the ping op). */
#include "ucx.h"

#include <stdio.h>
#include <string.h>

#define BULK_MAGIC 0x75626c6bu /* "ublk" */
#define BULK_PING_EVERY 4096u

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

/* An operation this task started, in the device's list until tested done. */
typedef struct bulk_rec {
    struct bulk_rec *next;
    uint64_t cookie;
    ucp_mem_h memh;
    unsigned peer; /* slot */
    int is_put, done;
    torx_status_t status;
    size_t len;
    unsigned tests;
} bulk_rec_t;

/* What the caller's torx_bulk_t holds. */
typedef struct bulk_op {
    uint32_t magic; /* BULK_MAGIC once started */
    int32_t status; /* the final status, once finished */
    uint32_t finished;
    uint32_t pad;
    bulk_rec_t *rec; /* while running */
} bulk_op_t;
static_assert(sizeof(bulk_op_t) <= sizeof(torx_bulk_t), "bulk op fits torx_bulk_t");

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
    bulk_rec_t *ops;
    uint64_t next_cookie;
};

torx_status_t torxp_ucx_bulk_setup(torxp_ucx_dev_t *d)
{
    d->bulk = torxp_calloc(1, sizeof *d->bulk);
    if (!d->bulk)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for bulk transfers");
    d->bulk->next_cookie = 1;
    return TORX_OK;
}

void torxp_ucx_bulk_fini(torxp_ucx_dev_t *d)
{
    torxp_ucx_bulk_t *b = d->bulk;
    if (!b)
        return;
    while (b->ops) {
        bulk_rec_t *r = b->ops;
        b->ops = r->next;
        if (r->memh)
            ucp_mem_unmap(d->context, r->memh);
        free(r);
    }
    free(b);
    d->bulk = NULL;
}

const char *torxp_ucx_bulk_path(const torx_pkt_dev_t *dev)
{
    (void)dev;
    return "rma";
}

/* ---- serving a peer ---------------------------------------------------------- */

static void serve_finish(bulk_serve_t *s)
{
    torxp_ucx_dev_t *d = s->dev;
    const torxp_net_sys_t done = {.type =
                                      s->is_put ? TORXP_NET_SYS_PUT_DONE : TORXP_NET_SYS_GET_DONE,
                                  .version = TORXP_NET_WIRE_VERSION,
                                  .arg = (uint32_t)-s->status, /* UCS errors are negative */
                                  .round = s->cookie};
    d->net.net_ops->sys_send(&d->net, s->peer, &done, sizeof done);
    if (s->rkey)
        ucp_rkey_destroy(s->rkey);
    free(s);
}

static void on_flushed(void *request, ucs_status_t status, void *user_data)
{
    bulk_serve_t *s = user_data;
    if (status != UCS_OK && s->status == UCS_OK)
        s->status = status;
    ucp_request_free(request);
    serve_finish(s);
}

/* After a get's put: a flush of the endpoint, then GET_DONE. */
static void flush_then_finish(bulk_serve_t *s)
{
    torxp_ucx_dev_t *d = s->dev;
    const ucp_request_param_t p = {.op_attr_mask =
                                       UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                                   .cb.send = on_flushed,
                                   .user_data = s};
    const ucs_status_ptr_t req = ucp_ep_flush_nbx(d->eps[s->peer], &p);
    if (UCS_PTR_IS_PTR(req))
        return; /* on_flushed finishes */
    if (UCS_PTR_IS_ERR(req) && s->status == UCS_OK)
        s->status = UCS_PTR_STATUS(req);
    serve_finish(s);
}

static void on_rma_done(void *request, ucs_status_t status, void *user_data)
{
    bulk_serve_t *s = user_data;
    if (status != UCS_OK)
        s->status = status;
    ucp_request_free(request);
    if (s->is_put || s->status != UCS_OK)
        serve_finish(s); /* a get into our memory is in place at its completion */
    else
        flush_then_finish(s);
}

/* Starts the RMA a peer asked for. */
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
    if (q->len == 0 || q->peer_addr + q->len < q->peer_addr || q->key_len > sizeof q->key) {
        s->status = UCS_ERR_INVALID_PARAM;
        serve_finish(s);
        return;
    }
    s->status = ucp_ep_rkey_unpack(d->eps[src], q->key, &s->rkey);
    if (s->status != UCS_OK) {
        s->rkey = NULL;
        serve_finish(s);
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
    if (UCS_PTR_IS_PTR(req))
        return; /* on_rma_done goes on */
    if (UCS_PTR_IS_ERR(req))
        s->status = UCS_PTR_STATUS(req);
    if (is_put || s->status != UCS_OK)
        serve_finish(s);
    else
        flush_then_finish(s);
}

/* ---- this task's operations -------------------------------------------------------- */

static bulk_rec_t *find_rec(torxp_ucx_bulk_t *b, uint64_t cookie)
{
    for (bulk_rec_t *r = b->ops; r; r = r->next)
        if (r->cookie == cookie)
            return r;
    return NULL;
}

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
    bulk_rec_t *r = find_rec(d->bulk, m->round);
    if (!r || r->peer != src || r->done || r->is_put != (m->type == TORXP_NET_SYS_PUT_DONE)) {
        torxp_dev_malformed(&d->net.base, "bulk completion for unknown operation %llu from slot %u",
                            (unsigned long long)m->round, src);
        return;
    }
    r->done = 1;
    r->status = TORX_OK;
    if (m->arg) {
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
    if (!op)
        return torxp_error(TORX_ERR_INVAL, "torx: %s: op is NULL", what);
    bulk_op_t *o = (bulk_op_t *)op;
    if (o->magic == BULK_MAGIC && !o->finished)
        return torxp_error(TORX_ERR_INVAL, "torx: %s: op is still in flight", what);
    if (!torx_coord_in_shape(dev->shape, peer) ||
        d->net.slot_rank[torx_coord_index(dev->shape, peer)] < 0)
        return torxp_error(TORX_ERR_INVAL, "torx: %s: no task at (%u,%u,%u,%u)", what, peer.x,
                           peer.y, peer.z, peer.t);
    if (len && (!remote || !local))
        return torxp_error(TORX_ERR_INVAL, "torx: %s: NULL address with %zu bytes", what, len);
    if (len && (remote + len < remote || (uintptr_t)local + len < (uintptr_t)local))
        return torxp_error(TORX_ERR_INVAL, "torx: %s: a range of %zu bytes wraps around", what,
                           len);
    *o = (bulk_op_t){.magic = BULK_MAGIC};
    const unsigned slot = torx_coord_index(dev->shape, peer);
    if (len == 0 || slot == d->net.self_slot) { /* nothing to move, or our own memory */
        if (len)
            memmove(is_put ? (void *)(uintptr_t)remote : local,
                    is_put ? local : (void *)(uintptr_t)remote, len);
        o->finished = 1;
        o->status = TORX_OK;
        return TORX_OK;
    }

    torxp_net_lock(&d->net);
    torx_status_t rc = dev->failed;
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
        if (r && r->memh)
            ucp_mem_unmap(d->context, r->memh);
        free(r);
        torxp_net_unlock(&d->net);
        o->magic = 0;
        return rc;
    }
    torxp_ucx_bulk_t *b = d->bulk;
    r->cookie = q.h.round = b->next_cookie++;
    r->peer = slot;
    r->is_put = is_put;
    r->len = len;
    r->next = b->ops;
    b->ops = r;
    rc = d->net.net_ops->sys_send(&d->net, slot, &q, offsetof(bulk_req_t, key) + q.key_len);
    o->rec = r;
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
    bulk_op_t *o = (bulk_op_t *)op;
    if (!o || o->magic != BULK_MAGIC)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_bulk_test: op was not started by torx_bulk_get or "
                           "torx_bulk_put");
    if (o->finished)
        return (torx_status_t)o->status;
    torxp_net_lock(&d->net);
    d->net.net_ops->progress(&d->net);
    bulk_rec_t *r = o->rec;
    torx_status_t rc = TORX_AGAIN;
    torxp_ucx_bulk_t *b = d->bulk;
    int linked = 0;
    for (bulk_rec_t *p = b->ops; p && !linked; p = p->next)
        linked = p == r;
    if (!linked) {
        rc = torxp_dev_fail(&d->net.base, TORX_ERR_INVAL,
                            "torx_bulk_test: the operation's state was overwritten while it ran");
    } else if (r->done || dev->failed != TORX_OK) {
        rc = r->done ? r->status : dev->failed;
        for (bulk_rec_t **p = &b->ops; *p; p = &(*p)->next)
            if (*p == r) {
                *p = r->next;
                break;
            }
        ucp_mem_unmap(d->context, r->memh);
        free(r);
    } else if (++r->tests % BULK_PING_EVERY == 0) {
        d->net.net_ops->ping(&d->net, r->peer);
    }
    if (rc != TORX_AGAIN) {
        o->finished = 1;
        o->status = rc;
        o->rec = NULL;
    }
    torxp_net_unlock(&d->net);
    return rc;
}
