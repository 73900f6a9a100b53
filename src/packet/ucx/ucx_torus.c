/* The ucx device's messages: torus packets and device-internal messages as
 * UCP active messages, their receive callbacks, progress, sleeping on the
 * worker's event descriptor, and liveness probes.
 *
 * Sends. A message is assembled in a buffer that stays put until UCX
 * completes the send: most complete at once (ucp_am_send_nbx returns no
 * request), and the buffer is free again before the call returns. Torus
 * packets take buffers from a pool (TORX_UCX_TX_PACKETS): an empty pool is
 * TORX_NO_ROOM, nothing taken. Device messages are allocated one by one:
 * UCX queues what it cannot send yet, so they are never refused.
 *
 * Credits aboard. A torus packet's AM header gives back the credits owed
 * to its destination, so a reply costs no credit message.
 *
 * Receiving. The callbacks run inside ucp_worker_progress (under the
 * device's lock, from net/'s progress): a torus packet is copied into one
 * of net/'s holders, of which there are as many as the credit windows of
 * all senders together allow to be unconsumed; a device message is handled
 * in place.
 *
 * Staging. A staged piece (net/net_stage.c) is one AM, sent from one of
 * STAGE_TX buffers; the receiver keeps UCX's data (the handler asks for it
 * persistent) until the piece's release, with no copy of its own.
 *
 * Sleeping. net/'s wait sleeps on ucp_worker_get_efd's descriptor after
 * ucp_worker_arm says nothing is pending (UCS_ERR_BUSY: progress again).
 *
 * Dead peers. Endpoints are created with UCP_ERR_HANDLING_MODE_PEER: a
 * peer whose connection broke fails the device, naming it, at the next
 * send to it or probe of it (not at once: a peer that finished first
 * closes its connections while this task finishes too). A probe (the
 * ping op, which the collective network and bulk transfers send while they
 * wait) that UCX has not completed after TORXP_NET_PEER_TIMEOUT_S fails it
 * too; net/'s liveness watch names a host that vanished. */
#include "ucx.h"

#include <stdio.h>
#include <string.h>

torx_status_t torxp_ucx_am_handler(torxp_ucx_dev_t *d, unsigned id, ucp_am_recv_callback_t cb,
                                   uint32_t flags)
{
    const ucp_am_handler_param_t p = {
        .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                      UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG,
        .id = id,
        .flags = flags,
        .cb = cb,
        .arg = d};
    const ucs_status_t st = ucp_worker_set_am_recv_handler(d->worker, &p);
    return st == UCS_OK
               ? TORX_OK
               : torxp_error(TORX_ERR_SYS, "torx: ucx device: ucp_worker_set_am_recv_handler: %s",
                             ucs_status_string(st));
}

torx_status_t torxp_ucx_fail(torxp_ucx_dev_t *d, const char *call, int peer_slot,
                             ucs_status_t status)
{
    if (d->net.closing) { /* the peers may be gone already; nothing waits for us */
        torxp_log(&d->net.base, 2, "at close: %s: %s", call, ucs_status_string(status));
        return TORX_OK;
    }
    if (peer_slot < 0 || d->net.slot_rank[peer_slot] < 0)
        return torxp_dev_fail(&d->net.base, TORX_ERR_SYS, "%s failed (UCX, transports %s): %s",
                              call, d->tls, ucs_status_string(status));
    const torx_coord_t c = torxp_net_coord_of(&d->net, (unsigned)peer_slot);
    return torxp_dev_fail(&d->net.base, TORX_ERR_PEER,
                          "rank %d at (%u,%u,%u,%u) is unreachable: %s failed (UCX, transports "
                          "%s): %s",
                          d->net.slot_rank[peer_slot], c.x, c.y, c.z, c.t, call, d->tls,
                          ucs_status_string(status));
}

/* ---- Sends ---------------------------------------------------------------------------- */

static void release_txbuf(torxp_ucx_dev_t *d, torxp_ucx_txbuf_t *t)
{
    if (t->pooled) {
        t->next_free = d->tx_free;
        d->tx_free = t;
        d->tx_nfree++;
    } else {
        free(t);
    }
}

static void on_send_done(void *request, ucs_status_t status, void *user_data)
{
    torxp_ucx_txbuf_t *t = user_data;
    torxp_ucx_dev_t *d = t->dev;
    d->inflight--;
    if (status != UCS_OK)
        torxp_ucx_fail(d, t->pooled ? "a torus packet's send" : "a device message's send",
                       (int)t->peer, status);
    if (t->hdr.pad == TORXP_NET_SYS_PING)
        d->ping_sent[t->peer] = 0;
    release_txbuf(d, t);
    ucp_request_free(request);
}

/* Sends t (its header filled in, len bytes of data) as AM id to t->peer;
 * t is released when UCX is done with it: at once, or (*pending = 1) at
 * the send's completion. */
static torx_status_t am_send(torxp_ucx_dev_t *d, unsigned id, torxp_ucx_txbuf_t *t, size_t len,
                             int *pending)
{
    *pending = 0;
    const ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                                                       UCP_OP_ATTR_FIELD_USER_DATA |
                                                       UCP_OP_ATTR_FIELD_FLAGS,
                                       .flags = UCP_AM_SEND_FLAG_EAGER,
                                       .cb.send = on_send_done,
                                       .user_data = t};
    t->dev = d;
    if (TORXP_UNLIKELY(d->peers[t->peer].gone != UCS_OK)) {
        const int peer = (int)t->peer;
        release_txbuf(d, t);
        return torxp_ucx_fail(d, "the connection", peer, d->peers[peer].gone);
    }
    const ucs_status_ptr_t req =
        ucp_am_send_nbx(d->eps[t->peer], id, NULL, 0, &t->hdr, sizeof t->hdr + len, &param);
    if (req == NULL) { /* done already */
        release_txbuf(d, t);
        return TORX_OK;
    }
    if (UCS_PTR_IS_ERR(req)) {
        const int peer = (int)t->peer;
        release_txbuf(d, t);
        return torxp_ucx_fail(d, "ucp_am_send_nbx", peer, UCS_PTR_STATUS(req));
    }
    d->inflight++;
    *pending = 1;
    return TORX_OK;
}

static torx_status_t send_packet(torxp_net_t *n, unsigned slot, const torx_pkt_hdr_t *hdr,
                                 const struct iovec *iov, int iovcnt, size_t len)
{
    torxp_ucx_dev_t *d = torxp_ucx_of(n);
    torxp_ucx_txbuf_t *t = d->tx_free;
    if (!t) {
        ucp_worker_progress(d->worker); /* completions give buffers back */
        if (!(t = d->tx_free))
            return TORX_NO_ROOM;
    }
    d->tx_free = t->next_free;
    d->tx_nfree--;
    unsigned char *p = t->data;
    memcpy(p, hdr, sizeof *hdr);
    p += sizeof *hdr;
    for (int k = 0; k < iovcnt; k++) {
        memcpy(p, iov[k].iov_base, iov[k].iov_len);
        p += iov[k].iov_len;
    }
    t->peer = slot;
    t->hdr = (torxp_ucx_hdr_t){
        .src = n->self_slot, .order = n->tx_order[slot], .credits = n->consumed[slot]};
    n->consumed[slot] = 0; /* given back aboard */
    int pending;
    return am_send(d, TORXP_UCX_AM_TORUS, t, TORX_PKT_HDR_BYTES + len, &pending);
}

static unsigned tx_room(torxp_net_t *n)
{
    return torxp_ucx_of(n)->tx_nfree;
}

/* A device message to slot; *pending as am_send's. */
static torx_status_t send_sys(torxp_net_t *n, unsigned slot, const void *msg, size_t len,
                              int *pending)
{
    torxp_ucx_dev_t *d = torxp_ucx_of(n);
    assert(len <= TORXP_NET_SYS_MAX && len >= sizeof(torxp_net_sys_t));
    torxp_ucx_txbuf_t *t = torxp_malloc(sizeof *t);
    if (!t)
        return torxp_dev_fail(&n->base, TORX_ERR_NOMEM,
                              "out of memory for a device-internal message to slot %u", slot);
    t->pooled = 0;
    t->peer = slot;
    /* pad: the message's type, for on_send_done */
    t->hdr = (torxp_ucx_hdr_t){.src = n->self_slot, .pad = ((const torxp_net_sys_t *)msg)->type};
    memcpy(t->data, msg, len);
    return am_send(d, TORXP_UCX_AM_SYS, t, len, pending);
}

static torx_status_t sys_send(torxp_net_t *n, unsigned slot, const void *msg, size_t len)
{
    int pending;
    return send_sys(n, slot, msg, len, &pending);
}

/* UCX queues every send it takes: nothing waits on the device's side. */
static int sys_pending(torxp_net_t *n)
{
    (void)n;
    return 0;
}

int torxp_ucx_sends_busy(torxp_net_t *n)
{
    return torxp_ucx_of(n)->inflight != 0;
}

/* ---- Receiving --------------------------------------------------------------------------- */

/* A message (our header at the head of its data, none of UCP's), checked;
 * the header is copied into *h and *length becomes the body's. 0 when it
 * is malformed (counted and logged). */
static int check_am(torxp_ucx_dev_t *d, size_t header_length, const void *data,
                    const ucp_am_recv_param_t *param, size_t *length, size_t max, const char *what,
                    torxp_ucx_hdr_t *h)
{
    if (header_length != 0 || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
        *length < sizeof *h || *length - sizeof *h > max) {
        torxp_dev_malformed(&d->net.base, "%s of %zu bytes with a %zu-byte UCP header%s", what,
                            *length, header_length,
                            param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV ? " by rendezvous" : "");
        return 0;
    }
    memcpy(h, data, sizeof *h);
    *length -= sizeof *h;
    return 1;
}

static ucs_status_t on_torus(void *arg, const void *header, size_t header_length, void *data,
                             size_t length, const ucp_am_recv_param_t *param)
{
    torxp_ucx_dev_t *d = arg;
    torxp_ucx_hdr_t h;
    (void)header;
    if (!check_am(d, header_length, data, param, &length, TORX_PKT_MAX_BYTES, "torus packet", &h))
        return UCS_OK;
    torxp_net_credits_back(&d->net, h.src, h.credits);
    torxp_net_on_torus_copy(&d->net, h.src, h.order, (const char *)data + sizeof h, length);
    return UCS_OK;
}

static ucs_status_t on_sys(void *arg, const void *header, size_t header_length, void *data,
                           size_t length, const ucp_am_recv_param_t *param)
{
    torxp_ucx_dev_t *d = arg;
    torxp_ucx_hdr_t h;
    (void)header;
    if (!check_am(d, header_length, data, param, &length, TORXP_NET_SYS_MAX, "device message", &h))
        return UCS_OK;
    /* Copied: the data need not be aligned for the message's structs. */
    alignas(16) unsigned char msg[TORXP_NET_SYS_MAX];
    memcpy(msg, (const char *)data + sizeof h, length);
    torxp_net_on_sys(&d->net, h.src, msg, length);
    return UCS_OK;
}

static int on_other_sys(torxp_net_t *n, unsigned src, const torxp_net_sys_t *m, size_t len)
{
    switch (m->type) {
    case TORXP_NET_SYS_GET_REQ:
    case TORXP_NET_SYS_GET_DONE:
    case TORXP_NET_SYS_PUT_REQ:
    case TORXP_NET_SYS_PUT_DONE:
        torxp_ucx_bulk_on_sys(torxp_ucx_of(n), src, m, len);
        return 1;
    default:
        return 0;
    }
}

/* ---- Staged pieces ---------------------------------------------------------------------- */

/* Pieces in flight per ordered pair, and send buffers, as on ofi. */
#define STAGE_WINDOW 16u
#define STAGE_TX 16u

/* A piece received: UCX's persistent data until its release. The records
 * are kept for reuse (d->stage_rx_free): a window bounds how many are out
 * at once, and a staged 1 KiB round trip spent 270 instructions of its
 * 5,150 in calloc and free. */
typedef struct torxp_ucx_stage_rx {
    torxp_net_stage_buf_t net;
    void *data;
    int in_callback, released; /* released while its callback ran */
    struct torxp_ucx_stage_rx *next_free;
} stage_rx_t;

static stage_rx_t *stage_rx_get(torxp_ucx_dev_t *d)
{
    stage_rx_t *r = d->stage_rx_free;
    if (r)
        d->stage_rx_free = r->next_free;
    else
        r = torxp_malloc(sizeof *r);
    return r;
}

static void stage_rx_put(torxp_ucx_dev_t *d, stage_rx_t *r)
{
    r->next_free = d->stage_rx_free;
    d->stage_rx_free = r;
}

static void on_stage_sent(void *request, ucs_status_t status, void *user_data)
{
    torxp_ucx_stage_tx_t *t = user_data;
    torxp_ucx_dev_t *d = t->dev;
    d->inflight--;
    if (status != UCS_OK)
        torxp_ucx_fail(d, "a staged piece's send", (int)t->net.peer, status);
    torxp_net_stage_tx_done(&d->net, &t->net);
    ucp_request_free(request);
}

static torx_status_t stage_send(torxp_net_t *n, unsigned slot, torxp_net_stage_buf_t *nb,
                                size_t total)
{
    torxp_ucx_dev_t *d = torxp_ucx_of(n);
    torxp_ucx_stage_tx_t *t =
        (torxp_ucx_stage_tx_t *)(void *)((char *)nb - offsetof(torxp_ucx_stage_tx_t, net));
    if (TORXP_UNLIKELY(d->peers[slot].gone != UCS_OK)) {
        torxp_net_stage_tx_done(n, nb);
        return torxp_ucx_fail(d, "the connection", (int)slot, d->peers[slot].gone);
    }
    t->dev = d;
    t->hdr = (torxp_ucx_hdr_t){.src = n->self_slot, .credits = n->consumed[slot]};
    n->consumed[slot] = 0; /* given back aboard */
    const ucp_request_param_t param = {.op_attr_mask =
                                           UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                                       .cb.send = on_stage_sent,
                                       .user_data = t};
    const ucs_status_ptr_t req = ucp_am_send_nbx(d->eps[slot], TORXP_UCX_AM_STAGE, &t->hdr,
                                                 sizeof t->hdr, t->msg, total, &param);
    if (UCS_PTR_IS_PTR(req)) {
        d->inflight++;
        return TORX_OK;
    }
    torxp_net_stage_tx_done(n, nb);
    return UCS_PTR_IS_ERR(req)
               ? torxp_ucx_fail(d, "ucp_am_send_nbx (staged piece)", (int)slot, UCS_PTR_STATUS(req))
               : TORX_OK;
}

static void stage_rx_done(torxp_net_t *n, torxp_net_stage_buf_t *nb)
{
    stage_rx_t *r = (stage_rx_t *)(void *)nb;
    if (r->in_callback) { /* the callback returns UCS_OK: UCX frees the data */
        r->released = 1;
        return;
    }
    ucp_am_data_release(torxp_ucx_of(n)->worker, r->data);
    stage_rx_put(torxp_ucx_of(n), r);
}

static ucs_status_t on_stage(void *arg, const void *header, size_t header_length, void *data,
                             size_t length, const ucp_am_recv_param_t *param)
{
    torxp_ucx_dev_t *d = arg;
    if (header_length != sizeof(torxp_ucx_hdr_t) ||
        !(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA)) {
        torxp_dev_malformed(&d->net.base, "staged piece of %zu bytes with a %zu-byte header%s",
                            length, header_length,
                            param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV ? " by rendezvous" : "");
        return UCS_OK;
    }
    torxp_ucx_hdr_t h;
    memcpy(&h, header, sizeof h);
    stage_rx_t *r = stage_rx_get(d);
    if (!r) {
        torxp_dev_fail(&d->net.base, TORX_ERR_NOMEM, "out of memory for a staged piece");
        return UCS_OK;
    }
    torxp_net_credits_back(&d->net, h.src, h.credits);
    *r = (stage_rx_t){.net = {.msg = data}, .data = data, .in_callback = 1};
    torxp_net_stage_on_rx(&d->net, &r->net, length);
    if (r->released) { /* refused, or voided at once */
        stage_rx_put(d, r);
        return UCS_OK;
    }
    r->in_callback = 0;
    return UCS_INPROGRESS; /* kept until stage_rx_done */
}

torx_status_t torxp_ucx_stage_setup(torxp_ucx_dev_t *d, long stage_bytes)
{
    const unsigned w = stage_bytes > 0 && d->net.base.size > 1 ? STAGE_WINDOW : 0;
    if (w) {
        d->stage_tx = torxp_calloc(STAGE_TX, sizeof *d->stage_tx);
        if (!d->stage_tx)
            return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for staging buffers");
        for (unsigned i = 0; i < STAGE_TX; i++)
            d->stage_tx[i].net.msg = d->stage_tx[i].msg;
        const torx_status_t st = torxp_ucx_am_handler(
            d, TORXP_UCX_AM_STAGE, on_stage, UCP_AM_FLAG_WHOLE_MSG | UCP_AM_FLAG_PERSISTENT_DATA);
        if (st != TORX_OK)
            return st;
    }
    return torxp_net_stage_setup(&d->net, w, sizeof d->stage_tx->msg,
                                 w ? &d->stage_tx[0].net : NULL, sizeof *d->stage_tx,
                                 w ? STAGE_TX : 0);
}

void torxp_ucx_stage_fini(torxp_ucx_dev_t *d)
{
    torxp_net_stage_fini(&d->net); /* every piece held goes back (stage_rx_done) */
    free(d->stage_tx);
    d->stage_tx = NULL;
    while (d->stage_rx_free) {
        stage_rx_t *r = d->stage_rx_free;
        d->stage_rx_free = r->next_free;
        free(r);
    }
}

/* ---- Progress ------------------------------------------------------------------------------- */

static void progress(torxp_net_t *n)
{
    torxp_ucx_dev_t *d = torxp_ucx_of(n);
    torxp_net_stage_flush(n);
    /* One pass: over tcp each pass reads the sockets' events with a system
     * call, and one more after a message came would delay its delivery by
     * that call. The caller polls again when it wants more. */
    n->events += ucp_worker_progress(d->worker);
    torxp_net_live_check(n);
}

static int arm(torxp_net_t *n)
{
    const ucs_status_t st = ucp_worker_arm(torxp_ucx_of(n)->worker);
    return st == UCS_OK         ? TORXP_NET_ARM_OK
           : st == UCS_ERR_BUSY ? TORXP_NET_ARM_BUSY
                                : TORXP_NET_ARM_NOFD;
}

/* ---- Liveness ------------------------------------------------------------------------------ */

static void ping(torxp_net_t *n, unsigned slot)
{
    torxp_ucx_dev_t *d = torxp_ucx_of(n);
    if (d->peers[slot].gone != UCS_OK) {
        torxp_ucx_fail(d, "the connection", (int)slot, d->peers[slot].gone);
        return;
    }
    const double now = torxp_mono_s();
    if (d->ping_sent[slot] == 0) {
        const torxp_net_sys_t m = {.type = TORXP_NET_SYS_PING, .version = TORXP_NET_WIRE_VERSION};
        int pending = 0;
        if (send_sys(n, slot, &m, sizeof m, &pending) == TORX_OK && pending)
            d->ping_sent[slot] = now; /* on_send_done clears it */
        return;
    }
    if (now - d->ping_sent[slot] > TORXP_NET_PEER_TIMEOUT_S) {
        const torx_coord_t c = torxp_net_coord_of(n, slot);
        torxp_dev_fail(&n->base, TORX_ERR_PEER,
                       "rank %d at (%u,%u,%u,%u) is unreachable: UCX has not delivered a probe "
                       "to it in %.0f s (the task died, or the network to it is down)",
                       n->slot_rank[slot], c.x, c.y, c.z, c.t, now - d->ping_sent[slot]);
    }
}

/* ---- Set-up ---------------------------------------------------------------------------------- */

const torxp_net_ops_t torxp_ucx_net_ops = {
    .name = "ucx",
    .progress = progress,
    .send_packet = send_packet,
    .tx_room = tx_room,
    .sys_send = sys_send,
    .sys_pending = sys_pending,
    .on_sys = on_other_sys,
    .ping = ping,
    .arm = arm,
    .stage_send = stage_send,
    .stage_rx_done = stage_rx_done,
};

torx_status_t torxp_ucx_torus_setup(torxp_ucx_dev_t *d, const torxp_env_t *env)
{
    /* Holders for every packet the senders' windows allow unconsumed. */
    const unsigned nhold = (unsigned)env->fifo_packets * (unsigned)d->net.base.size;
    torx_status_t rc = torxp_net_torus_setup(&d->net, env, 0, 0, nhold);
    if (rc != TORX_OK)
        return rc;
    d->txbufs = torxp_calloc(d->tx_pool, sizeof *d->txbufs);
    d->ping_sent = torxp_calloc(d->net.nslots, sizeof *d->ping_sent);
    if (!d->txbufs || !d->ping_sent)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for the ucx device's buffers");
    for (unsigned i = 0; i < d->tx_pool; i++) {
        d->txbufs[i].pooled = 1;
        d->txbufs[i].next_free = d->tx_free;
        d->tx_free = &d->txbufs[i];
    }
    d->tx_nfree = d->tx_pool;
    torx_status_t st = torxp_ucx_am_handler(d, TORXP_UCX_AM_TORUS, on_torus, UCP_AM_FLAG_WHOLE_MSG);
    if (st == TORX_OK)
        st = torxp_ucx_am_handler(d, TORXP_UCX_AM_SYS, on_sys, UCP_AM_FLAG_WHOLE_MSG);
    return st;
}

void torxp_ucx_torus_fini(torxp_ucx_dev_t *d)
{
    torxp_net_torus_fini(&d->net);
    free(d->txbufs);
    free(d->ping_sent);
}

void torxp_ucx_flush(torxp_ucx_dev_t *d, double timeout_s)
{
    const double deadline = torxp_mono_s() + timeout_s;
    while ((d->inflight || d->net.stash_active || torxp_net_stage_busy(&d->net)) &&
           d->net.base.failed == TORX_OK && torxp_mono_s() < deadline) {
        progress(&d->net);
        torxp_net_stash_drain(&d->net);
    }
    if (d->inflight)
        torxp_log(&d->net.base, 1, "closing with %lu sends not completed after %.1f s", d->inflight,
                  timeout_s);
}
