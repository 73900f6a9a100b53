/* Bulk transfer ("DMA") for the ofi device: libfabric RMA, or one tagged
 * message per transfer where the device does without it (see below).
 *
 * torx_bulk_get and torx_bulk_put name a plain address in the peer, with no
 * key, so the peer's memory cannot be read or written by RMA before it has
 * been registered. Instead the initiator registers its own buffer and asks
 * the peer to move the data against it:
 *
 *   get   initiator registers local (FI_REMOTE_WRITE), sends GET_REQ
 *         {its buffer's address and key, the peer's source address, len};
 *         the peer fi_writes its memory into the buffer and, once the write
 *         has completed, sends GET_DONE with the status.
 *   put   initiator registers local (FI_REMOTE_READ), sends PUT_REQ; the
 *         peer fi_reads the buffer into its memory and sends PUT_DONE.
 *
 * Two messages and one RMA per operation; nobody registers memory it does
 * not own, and no key or window has to be set up at start-up. GET_DONE is
 * sent only after the write's completion, so the data are in place before
 * the initiator learns of it whatever the provider's write-after-send
 * order. Transfers longer than the provider's largest message go as several
 * RMA operations, all done before the DONE.
 *
 * Where the provider carries remote CQ data (d->cq_data), a get that is
 * one write goes as fi_writedata with the cookie as its data: the
 * initiator's completion queue reports the write itself, once its data are
 * in place, and no GET_DONE follows (one send less, a system call over
 * TCP, on the rendezvous's way). A failed write then fails the device: the
 * initiator may already hold the completion, and the only failure of a
 * write into a live task's registered buffer is a broken connection.
 *
 * The registration follows the provider's mr_mode: with FI_MR_VIRT_ADDR the
 * remote address is the buffer's virtual address, else an offset from its
 * start; with FI_MR_PROV_KEY the provider picks the key, else the device
 * does (a counter, unique in the domain); with FI_MR_ENDPOINT the region is
 * bound to the endpoint and enabled. Providers that need local
 * registration (FI_MR_LOCAL) are refused at open.
 *
 * Without RMA (a provider that lacks it, or TORX_OFI_BULK=msg) the data
 * travel as one tagged message (TORXP_OFI_TAG_BULK, the cookie in the tag)
 * straight between the two ranges, which the providers stream over their
 * connection: for a get the initiator posts the receive into its buffer
 * before it sends GET_REQ, and the peer sends from its memory; the
 * receive's completion ends the get. For a put the initiator sends PUT_REQ
 * and then the data, the peer posts the receive when the request comes
 * (the data wait in the provider until then) and answers PUT_DONE once it
 * completes. Same messages, same order, no registration.
 *
 * An operation that cannot progress because the peer vanished ends in the
 * device's failure, which names the peer: net/net_bulk.c, which keeps the
 * operations' books, probes the peer of a running one now and then, and a
 * probe the provider cannot deliver fails the device. */
#include "ofi.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define BULK_RMA_MAX ((size_t)1 << 30)

/* The request's body after the sys header (round = cookie). */
typedef struct bulk_req {
    torxp_net_sys_t h;
    uint64_t peer_addr; /* address in the receiver of the request */
    uint64_t len;
    uint64_t buf_addr; /* the initiator's buffer as RMA addresses it */
    uint64_t key;
} bulk_req_t;

/* An operation this task started: the data message's completion (without
 * RMA) points at ctx, net/'s books hold net. */
typedef struct bulk_rec {
    torxp_ofi_ctx_t ctx;
    torxp_net_bulk_rec_t net;
    struct fid_mr *mr;
} bulk_rec_t;

static bulk_rec_t *rec_of(torxp_net_bulk_rec_t *nr)
{
    return nr ? (bulk_rec_t *)(void *)((char *)nr - offsetof(bulk_rec_t, net)) : NULL;
}

/* An RMA operation this task performs for a peer. */
typedef struct bulk_serve {
    torxp_ofi_ctx_t ctx; /* first: completions point here */
    struct bulk_serve *next;
    uint64_t cookie;
    int is_put; /* the peer's put: we read; else we write */
    uint64_t local, len, remote, key;
    uint64_t posted;      /* bytes handed to the provider */
    unsigned outstanding; /* RMA operations not yet completed */
    int err;              /* first failure, a libfabric error number */
    int told;             /* the write carried the cookie: no GET_DONE */
} bulk_serve_t;

struct torxp_ofi_bulk {
    torxp_net_bulk_list_t list;
    bulk_serve_t *serving; /* with RMA still to post or complete */
    uint64_t next_key;
    int virt_addr, prov_key, mr_endpoint;
    size_t rma_max;
};

torx_status_t torxp_ofi_bulk_setup(torxp_ofi_dev_t *d)
{
    torxp_ofi_bulk_t *b = torxp_calloc(1, sizeof *b);
    if (!b)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for bulk transfers");
    const uint64_t mode = (uint64_t)d->info->domain_attr->mr_mode;
    b->virt_addr = (mode & FI_MR_VIRT_ADDR) != 0;
    b->prov_key = (mode & FI_MR_PROV_KEY) != 0;
    b->mr_endpoint = (mode & FI_MR_ENDPOINT) != 0;
    b->rma_max = d->info->ep_attr->max_msg_size;
    if (b->rma_max == 0 || b->rma_max > BULK_RMA_MAX)
        b->rma_max = BULK_RMA_MAX;
    b->list.next_cookie = 1;
    b->next_key = 1;
    d->bulk = b;
    return TORX_OK;
}

static void release(torxp_net_t *n, torxp_net_bulk_rec_t *nr)
{
    (void)n;
    bulk_rec_t *r = rec_of(nr);
    if (r->mr)
        fi_close(&r->mr->fid);
    free(r);
}

void torxp_ofi_bulk_fini(torxp_ofi_dev_t *d)
{
    torxp_ofi_bulk_t *b = d->bulk;
    if (!b)
        return;
    torxp_net_bulk_fini(&d->net, &b->list, release);
    while (b->serving) {
        bulk_serve_t *s = b->serving;
        b->serving = s->next;
        free(s);
    }
    free(b);
    d->bulk = NULL;
}

const char *torxp_ofi_bulk_path(const torx_pkt_dev_t *dev)
{
    return ((const torxp_ofi_dev_t *)dev)->rma ? "rma" : "messages";
}

/* The tag of a bulk transfer's data message, from sender_slot. */
static uint64_t bulk_tag(uint64_t cookie, unsigned sender_slot)
{
    return torxp_ofi_tag(TORXP_OFI_TAG_BULK | (uint32_t)(cookie & TORXP_OFI_ORDER_MASK) << 8,
                         sender_slot);
}

/* ---- serving a peer ---------------------------------------------------------- */

static void serve_finish(torxp_ofi_dev_t *d, bulk_serve_t *s)
{
    torxp_ofi_bulk_t *b = d->bulk;
    for (bulk_serve_t **p = &b->serving; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            break;
        }
    if (s->told) {
        if (s->err)
            torxp_ofi_fi_fail(d, "a bulk get's fi_writedata", (int)s->ctx.peer, s->err);
        free(s);
        return;
    }
    const torxp_net_sys_t done = {.type =
                                      s->is_put ? TORXP_NET_SYS_PUT_DONE : TORXP_NET_SYS_GET_DONE,
                                  .version = TORXP_NET_WIRE_VERSION,
                                  .arg = (uint32_t)s->err,
                                  .round = s->cookie};
    torxp_ofi_sys_send(d, s->ctx.peer, &done, sizeof done);
    free(s);
}

/* Without RMA: sends the got range as one message (the initiator's receive
 * ends the get: no GET_DONE), or posts the receive of a put's data. */
static void serve_post_msg(torxp_ofi_dev_t *d, bulk_serve_t *s)
{
    void *mine = (void *)(uintptr_t)s->local;
    ssize_t rc;
    if (s->len > d->info->ep_attr->max_msg_size) {
        rc = -FI_EMSGSIZE;
    } else if (s->is_put) {
        s->ctx.kind = TORXP_OFI_CTX_SERVE_RX;
        rc = fi_trecv(d->ep, mine, s->len, NULL, FI_ADDR_UNSPEC, bulk_tag(s->cookie, s->ctx.peer),
                      0, &s->ctx.fi);
    } else {
        rc = fi_tsend(d->ep, mine, s->len, NULL, d->slot_addr[s->ctx.peer],
                      bulk_tag(s->cookie, d->net.self_slot), &s->ctx.fi);
        s->told = rc == 0;
    }
    if (rc == -FI_EAGAIN)
        return; /* torxp_ofi_bulk_progress tries again */
    if (rc != 0) {
        s->err = (int)-rc;
        serve_finish(d, s);
        return;
    }
    s->posted = s->len;
    s->outstanding++;
}

/* Posts what the provider takes of s's RMA operations. */
static void serve_post(torxp_ofi_dev_t *d, bulk_serve_t *s)
{
    if (!d->rma) {
        serve_post_msg(d, s);
        return;
    }
    const torxp_ofi_bulk_t *b = d->bulk;
    const fi_addr_t to = d->slot_addr[s->ctx.peer];
    while (!s->err && s->posted < s->len) {
        const size_t n = s->len - s->posted < b->rma_max ? s->len - s->posted : b->rma_max;
        void *mine = (void *)(uintptr_t)(s->local + s->posted);
        const uint64_t theirs = s->remote + s->posted;
        const int tell = !s->is_put && d->cq_data && s->posted == 0 && n == s->len;
        const ssize_t rc =
            s->is_put ? fi_read(d->ep, mine, n, NULL, to, theirs, s->key, &s->ctx.fi)
            : tell ? fi_writedata(d->ep, mine, n, NULL, s->cookie, to, theirs, s->key, &s->ctx.fi)
                   : fi_write(d->ep, mine, n, NULL, to, theirs, s->key, &s->ctx.fi);
        if (rc == -FI_EAGAIN)
            return; /* torxp_ofi_bulk_progress tries again */
        if (rc != 0) {
            s->err = (int)-rc;
            break;
        }
        s->posted += n;
        s->outstanding++;
        s->told = tell;
    }
    if (!s->outstanding && (s->err || s->posted == s->len))
        serve_finish(d, s);
}

void torxp_ofi_bulk_on_msg(torxp_ofi_dev_t *d, torxp_ofi_ctx_t *ctx, int err)
{
    if (ctx->kind == TORXP_OFI_CTX_SERVE_RX) { /* a peer's put landed here */
        torxp_ofi_bulk_on_rma(d, ctx, err);
        return;
    }
    bulk_rec_t *r = (bulk_rec_t *)ctx;
    if (ctx->kind == TORXP_OFI_CTX_BULK_TX) { /* a put's data left; PUT_DONE ends it */
        if (err)
            torxp_ofi_fi_fail(d, "a bulk put's data message", (int)ctx->peer, err);
        return;
    }
    r->net.done = 1; /* a get's data came */
    r->net.status = TORX_OK;
    if (err) {
        r->net.status = err == FI_ETRUNC ? TORX_ERR_PROTO : TORX_ERR_SYS;
        torxp_error(r->net.status,
                    "torx: bulk get of %zu bytes from rank %d: the data message failed "
                    "(provider %s): %s",
                    r->net.len, d->net.slot_rank[ctx->peer], d->prov, fi_strerror(err));
    }
}

void torxp_ofi_bulk_on_rma(torxp_ofi_dev_t *d, torxp_ofi_ctx_t *ctx, int err)
{
    bulk_serve_t *s = (bulk_serve_t *)ctx;
    s->outstanding--;
    if (err && !s->err)
        s->err = err;
    if (!s->outstanding && (s->err || s->posted == s->len))
        serve_finish(d, s);
}

/* Starts the RMA a peer asked for. */
static void serve_request(torxp_ofi_dev_t *d, unsigned src, const bulk_req_t *q, int is_put)
{
    bulk_serve_t *s = torxp_calloc(1, sizeof *s);
    if (!s) {
        torxp_dev_fail(&d->net.base, TORX_ERR_NOMEM,
                       "out of memory serving a bulk %s of %llu bytes", is_put ? "put" : "get",
                       (unsigned long long)q->len);
        return;
    }
    s->ctx.kind = TORXP_OFI_CTX_RMA;
    s->ctx.peer = src;
    s->cookie = q->h.round;
    s->is_put = is_put;
    s->local = q->peer_addr;
    s->len = q->len;
    s->remote = q->buf_addr;
    s->key = q->key;
    if (q->len == 0 || q->peer_addr + q->len < q->peer_addr)
        s->err = FI_EINVAL;
    s->next = d->bulk->serving;
    d->bulk->serving = s;
    serve_post(d, s);
}

void torxp_ofi_bulk_progress(torxp_ofi_dev_t *d)
{
    bulk_serve_t *s = d->bulk ? d->bulk->serving : NULL;
    while (s) {
        bulk_serve_t *next = s->next; /* serve_post may finish and free s */
        if (s->posted < s->len && !s->err)
            serve_post(d, s);
        s = next;
    }
}

/* ---- this task's operations -------------------------------------------------------- */

void torxp_ofi_bulk_on_sys(torxp_ofi_dev_t *d, unsigned src, const torxp_net_sys_t *m, size_t len)
{
    const int req = m->type == TORXP_NET_SYS_GET_REQ || m->type == TORXP_NET_SYS_PUT_REQ;
    if (len != (req ? sizeof(bulk_req_t) : sizeof(torxp_net_sys_t))) {
        d->net.base.malformed++;
        torxp_log(&d->net.base, 0,
                  "protocol error: bulk message of %zu bytes (type %u) from slot %u; "
                  "dropped",
                  len, m->type, src);
        return;
    }
    if (req) {
        serve_request(d, src, (const bulk_req_t *)m, m->type == TORXP_NET_SYS_PUT_REQ);
        return;
    }
    torxp_net_bulk_rec_t *r = torxp_net_bulk_on_done(&d->net, &d->bulk->list, src, m);
    if (r && m->arg) {
        const torx_coord_t c = torxp_net_coord_of(&d->net, src);
        r->status = m->arg == FI_EINVAL || m->arg == FI_EFAULT ? TORX_ERR_INVAL : TORX_ERR_SYS;
        torxp_error(r->status,
                    "torx: bulk %s of %zu bytes with rank %d at (%u,%u,%u,%u): the peer's RMA %s "
                    "failed (provider %s): %s",
                    r->is_put ? "put" : "get", r->len, d->net.slot_rank[src], c.x, c.y, c.z, c.t,
                    r->is_put ? "read" : "write", d->prov, fi_strerror((int)m->arg));
    }
}

void torxp_ofi_bulk_on_write_data(torxp_ofi_dev_t *d, uint64_t cookie)
{
    torxp_net_bulk_rec_t *r = torxp_net_bulk_find(&d->bulk->list, cookie);
    if (!r || r->done || r->is_put) {
        d->net.base.malformed++;
        torxp_log(&d->net.base, 0,
                  "protocol error: a remote write for unknown bulk get %llu; dropped",
                  (unsigned long long)cookie);
        return;
    }
    r->done = 1;
    r->status = TORX_OK;
}

/* Without RMA: posts the receive of a get's data into local, or sends a
 * put's from it (after PUT_REQ), with the progress-and-retry of a busy
 * provider; a refusal fails the device (the peer would wait for ever). */
static torx_status_t post_data(torxp_ofi_dev_t *d, bulk_rec_t *r, void *local, size_t len, int send)
{
    if (len > d->info->ep_attr->max_msg_size)
        return torxp_dev_fail(&d->net.base, TORX_ERR_INVAL,
                              "a bulk transfer of %zu bytes exceeds provider %s's largest "
                              "message (%zu bytes)",
                              len, d->prov, d->info->ep_attr->max_msg_size);
    const double give_up = torxp_mono_s() + TORXP_OFI_EAGAIN_SPIN_S;
    for (;;) {
        const ssize_t frc = send ? fi_tsend(d->ep, local, len, NULL, d->slot_addr[r->net.peer],
                                            bulk_tag(r->net.cookie, d->net.self_slot), &r->ctx.fi)
                                 : fi_trecv(d->ep, local, len, NULL, FI_ADDR_UNSPEC,
                                            bulk_tag(r->net.cookie, r->net.peer), 0, &r->ctx.fi);
        if (frc == 0)
            return TORX_OK;
        if (frc != -FI_EAGAIN || torxp_mono_s() > give_up)
            return torxp_ofi_fi_fail(d, send ? "fi_tsend (bulk put data)" : "fi_trecv (bulk get)",
                                     (int)r->net.peer, (int)frc);
        torxp_ofi_progress(d);
    }
}

static torx_status_t bulk_start(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer,
                                uint64_t remote, void *local, size_t len, int is_put)
{
    torxp_ofi_dev_t *d = torxp_ofi_of(dev);
    const char *what = is_put ? "torx_bulk_put" : "torx_bulk_get";
    unsigned slot;
    torx_status_t rc = torxp_net_bulk_begin(&d->net, op, peer, remote, local, len, is_put, &slot);
    if (rc != TORX_OK)
        return rc == TORX_AGAIN ? TORX_OK : rc; /* AGAIN: finished here */

    torxp_ofi_lock(d);
    torxp_ofi_bulk_t *b = d->bulk;
    rc = dev->failed;
    bulk_rec_t *r = rc == TORX_OK ? torxp_calloc(1, sizeof *r) : NULL;
    if (rc == TORX_OK && !r)
        rc = torxp_error(TORX_ERR_NOMEM, "torx: %s: out of memory", what);
    int frc = 0;
    if (rc == TORX_OK && d->rma) {
        frc = fi_mr_reg(d->domain, local, len, is_put ? FI_REMOTE_READ : FI_REMOTE_WRITE, 0,
                        b->prov_key ? 0 : b->next_key++, 0, &r->mr, NULL);
        if (frc == 0 && b->mr_endpoint) {
            frc = fi_mr_bind(r->mr, &d->ep->fid, 0);
            if (frc == 0)
                frc = fi_mr_enable(r->mr);
        }
        if (frc != 0)
            rc = torxp_error(frc == -FI_ENOMEM ? TORX_ERR_NOMEM : TORX_ERR_SYS,
                             "torx: %s: registering %zu bytes at %p failed (provider %s): %s", what,
                             len, local, d->prov, fi_strerror(-frc));
    }
    if (rc != TORX_OK) {
        if (r && r->mr)
            fi_close(&r->mr->fid);
        free(r);
        torxp_ofi_unlock(d);
        torxp_net_bulk_abandon(op);
        return rc;
    }
    const uint64_t cookie = torxp_net_bulk_started(&b->list, op, &r->net, slot, is_put, len);
    const bulk_req_t q = {.h = {.type = is_put ? TORXP_NET_SYS_PUT_REQ : TORXP_NET_SYS_GET_REQ,
                                .version = TORXP_NET_WIRE_VERSION,
                                .round = cookie},
                          .peer_addr = remote,
                          .len = len,
                          .buf_addr = b->virt_addr ? (uint64_t)(uintptr_t)local : 0,
                          .key = r->mr ? fi_mr_key(r->mr) : 0};
    if (!d->rma) {
        r->ctx.kind = is_put ? TORXP_OFI_CTX_BULK_TX : TORXP_OFI_CTX_BULK_RX;
        r->ctx.peer = slot;
        if (!is_put) /* the receive first: the data never come unexpected */
            rc = post_data(d, r, local, len, 0);
    }
    if (rc == TORX_OK)
        rc = torxp_ofi_sys_send(d, slot, &q, sizeof q);
    if (rc == TORX_OK && !d->rma && is_put)
        rc = post_data(d, r, local, len, 1);
    torxp_ofi_unlock(d);
    return rc == TORX_OK ? TORX_OK : rc;
}

torx_status_t torxp_ofi_bulk_get(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer,
                                 const void *remote, void *local, size_t len, unsigned flags)
{
    (void)flags;
    return bulk_start(dev, op, peer, (uint64_t)(uintptr_t)remote, local, len, 0);
}

torx_status_t torxp_ofi_bulk_put(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer,
                                 void *remote, const void *local, size_t len)
{
    return bulk_start(dev, op, peer, (uint64_t)(uintptr_t)remote, (void *)local, len, 1);
}

torx_status_t torxp_ofi_bulk_test(torx_pkt_dev_t *dev, torx_bulk_t *op)
{
    torxp_ofi_dev_t *d = torxp_ofi_of(dev);
    return torxp_net_bulk_test(&d->net, &d->bulk->list, op, release);
}
