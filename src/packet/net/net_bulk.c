/* The bookkeeping of the network devices' bulk transfers: the operations
 * this task started, by cookie, until torx_bulk_test reports them done.
 *
 * Both devices move the data the same way round (ofi_bulk.c, ucx_bulk.c):
 * torx_bulk_get and torx_bulk_put name a plain address in the peer, with
 * no key, so the initiator registers its own buffer and asks the peer, in
 * a GET_REQ or PUT_REQ naming the operation's cookie, to move the data
 * against it; the peer answers GET_DONE or PUT_DONE with the cookie and a
 * status. What is the same on both is here: the arguments' checks, the
 * transfers that need no peer (nothing to move, or this task's own
 * memory), the list of running operations, a DONE matched to its
 * operation, and the test that ends one, with a probe of a silent peer
 * every TORXP_NET_BULK_PING_EVERY tests. */
#include "net.h"

#include <string.h>

#define BULK_MAGIC 0x6e626c6bu /* "nblk" */

/* What the caller's torx_bulk_t holds. */
typedef struct bulk_op {
    uint32_t magic; /* BULK_MAGIC once started */
    int32_t status; /* the final status, once finished */
    uint32_t finished;
    uint32_t pad;
    torxp_net_bulk_rec_t *rec; /* while running */
} bulk_op_t;
static_assert(sizeof(bulk_op_t) <= sizeof(torx_bulk_t), "bulk op fits torx_bulk_t");

torx_status_t torxp_net_bulk_begin(torxp_net_t *n, torx_bulk_t *op, torx_coord_t peer,
                                   uint64_t remote, void *local, size_t len, int is_put,
                                   unsigned *slot)
{
    const torx_pkt_dev_t *dev = &n->base;
    const char *what = is_put ? "torx_bulk_put" : "torx_bulk_get";
    if (!op)
        return torxp_error(TORX_ERR_INVAL, "torx: %s: op is NULL", what);
    bulk_op_t *o = (bulk_op_t *)op;
    if (o->magic == BULK_MAGIC && !o->finished)
        return torxp_error(TORX_ERR_INVAL, "torx: %s: op is still in flight", what);
    if (!torx_coord_in_shape(dev->shape, peer) ||
        n->slot_rank[torx_coord_index(dev->shape, peer)] < 0)
        return torxp_error(TORX_ERR_INVAL, "torx: %s: no task at (%u,%u,%u,%u)", what, peer.x,
                           peer.y, peer.z, peer.t);
    if (len && (!remote || !local))
        return torxp_error(TORX_ERR_INVAL, "torx: %s: NULL address with %zu bytes", what, len);
    if (len && (remote + len < remote || (uintptr_t)local + len < (uintptr_t)local))
        return torxp_error(TORX_ERR_INVAL, "torx: %s: a range of %zu bytes wraps around", what,
                           len);
    *o = (bulk_op_t){.magic = BULK_MAGIC};
    *slot = torx_coord_index(dev->shape, peer);
    if (len == 0 || *slot == n->self_slot) { /* nothing to move, or our own memory */
        if (len)
            memmove(is_put ? (void *)(uintptr_t)remote : local,
                    is_put ? local : (void *)(uintptr_t)remote, len);
        o->finished = 1;
        o->status = TORX_OK;
        return TORX_AGAIN;
    }
    return TORX_OK;
}

void torxp_net_bulk_abandon(torx_bulk_t *op)
{
    ((bulk_op_t *)op)->magic = 0;
}

uint64_t torxp_net_bulk_started(torxp_net_bulk_list_t *l, torx_bulk_t *op, torxp_net_bulk_rec_t *r,
                                unsigned slot, int is_put, size_t len)
{
    r->cookie = l->next_cookie++;
    r->peer = slot;
    r->is_put = is_put;
    r->len = len;
    r->next = l->ops;
    l->ops = r;
    ((bulk_op_t *)op)->rec = r;
    return r->cookie;
}

torxp_net_bulk_rec_t *torxp_net_bulk_find(torxp_net_bulk_list_t *l, uint64_t cookie)
{
    for (torxp_net_bulk_rec_t *r = l->ops; r; r = r->next)
        if (r->cookie == cookie)
            return r;
    return NULL;
}

torxp_net_bulk_rec_t *torxp_net_bulk_on_done(torxp_net_t *n, torxp_net_bulk_list_t *l, unsigned src,
                                             const torxp_net_sys_t *m)
{
    torxp_net_bulk_rec_t *r = torxp_net_bulk_find(l, m->round);
    if (!r || r->peer != src || r->done || r->is_put != (m->type == TORXP_NET_SYS_PUT_DONE)) {
        torxp_dev_malformed(&n->base, "bulk completion for unknown operation %llu from slot %u",
                            (unsigned long long)m->round, src);
        return NULL;
    }
    r->done = 1;
    r->status = TORX_OK;
    return r;
}

torx_status_t torxp_net_bulk_test(torxp_net_t *n, torxp_net_bulk_list_t *l, torx_bulk_t *op,
                                  void (*release)(torxp_net_t *n, torxp_net_bulk_rec_t *r))
{
    bulk_op_t *o = (bulk_op_t *)op;
    if (!o || o->magic != BULK_MAGIC)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_bulk_test: op was not started by torx_bulk_get or "
                           "torx_bulk_put");
    if (o->finished)
        return (torx_status_t)o->status;
    torxp_net_lock(n);
    n->net_ops->progress(n);
    torxp_net_bulk_rec_t *r = o->rec;
    torx_status_t rc = TORX_AGAIN;
    int linked = 0;
    for (torxp_net_bulk_rec_t *p = l->ops; p && !linked; p = p->next)
        linked = p == r;
    if (!linked) {
        rc = torxp_dev_fail(&n->base, TORX_ERR_INVAL,
                            "torx_bulk_test: the operation's state was overwritten while it ran");
    } else if (r->done || n->base.failed != TORX_OK) {
        rc = r->done ? r->status : n->base.failed;
        for (torxp_net_bulk_rec_t **p = &l->ops; *p; p = &(*p)->next)
            if (*p == r) {
                *p = r->next;
                break;
            }
        release(n, r);
    } else if (++r->tests % TORXP_NET_BULK_PING_EVERY == 0) {
        n->net_ops->ping(n, r->peer);
    }
    if (rc != TORX_AGAIN) {
        o->finished = 1;
        o->status = rc;
        o->rec = NULL;
    }
    torxp_net_unlock(n);
    return rc;
}

void torxp_net_bulk_fini(torxp_net_t *n, torxp_net_bulk_list_t *l,
                         void (*release)(torxp_net_t *n, torxp_net_bulk_rec_t *r))
{
    while (l->ops) {
        torxp_net_bulk_rec_t *r = l->ops;
        l->ops = r->next;
        release(n, r);
    }
}
