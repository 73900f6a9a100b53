/* Staging on the ofi device: net/net_stage.c's pieces as untagged
 * messages, one per piece, into posted receive buffers.
 *
 * Pieces travel untagged: the providers find a tagged message's buffer by
 * walking the posted ones, and the staging buffers would lengthen that
 * walk for every torus packet. The receiver keeps window x (tasks - 1)
 * buffers posted, so a piece always finds one; the window shrinks from 16
 * so that this stays within TORXP_OFI_STAGE_RX_MAX buffers (the provider's
 * receive queue is shared with the torus's), and past 257 tasks it is zero
 * and staging is off (the message layer then sends packets). Torus credits
 * ride aboard a piece as remote CQ data, as aboard a packet (tsend). */
#include "ofi.h"

#include <string.h>

/* A piece, its header and a packet aboard. Pieces of 16 KiB, the message
 * layer's TORX_STAGE_CHUNK, so an MPI message of 16 KiB is one piece; over
 * tcp;ofi_rxm the whole message stays within its eager size (16 KiB)
 * instead, since a longer one takes its rendezvous, a round trip more. */
#define STAGE_MSG_MAX (TORXP_NET_STAGE_HDR + 16384u + TORX_PKT_MAX_BYTES)
#define STAGE_MSG_MAX_RXM 16384u
/* Pieces in flight per ordered pair. One host over net on lo, against 4:
 * one-way bandwidth +15-19% from 256 B to 16 KiB, both ways +25% at 4 and
 * 16 KiB, latency level (docs/multihost.md). */
#define STAGE_WINDOW 16u
#define STAGE_TX 16u /* send buffers */
static_assert(STAGE_MSG_MAX >= STAGE_MSG_MAX_RXM, "buffers take the longest message");

/* A staging buffer: completions point at ctx, net/ holds net. */
typedef struct stage_buf {
    torxp_ofi_ctx_t ctx; /* TORXP_OFI_CTX_STAGE_TX / _RX; ctx.peer = the other slot */
    torxp_net_stage_buf_t net;
    alignas(16) unsigned char msg[STAGE_MSG_MAX];
} stage_buf_t;

struct torxp_ofi_stage {
    stage_buf_t *tx, *rx;
    unsigned nrx;
};

static stage_buf_t *buf_of(torxp_net_stage_buf_t *b)
{
    return (stage_buf_t *)(void *)((char *)b - offsetof(stage_buf_t, net));
}

static void post_stage_rx(torxp_ofi_dev_t *d, stage_buf_t *b)
{
    const ssize_t rc = fi_recv(d->ep, b->msg, sizeof b->msg, NULL, FI_ADDR_UNSPEC, &b->ctx.fi);
    if (rc != 0) /* the buffers were counted at set-up: the provider took them then */
        torxp_ofi_fi_fail(d, "fi_trecv (staging buffer)", -1, (int)rc);
}

torx_status_t torxp_ofi_stage_setup(torxp_ofi_dev_t *d, long stage_bytes)
{
    torxp_ofi_stage_t *s = torxp_calloc(1, sizeof *s);
    if (!s)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for the staging state");
    d->stage = s;
    const unsigned peers = (unsigned)d->net.base.size - 1;
    unsigned w = stage_bytes > 0 && peers ? STAGE_WINDOW : 0; /* TORX_STAGE_BYTES=0: off */
    while (w && w * peers > TORXP_OFI_STAGE_RX_MAX)
        w /= 2;
    if (!w && stage_bytes > 0 && peers)
        torxp_log(&d->net.base, 1,
                  "ofi device: %u peers: no staging (a piece in flight from each would take more "
                  "than %u receive buffers)",
                  peers, TORXP_OFI_STAGE_RX_MAX);
    if (w) {
        s->nrx = w * peers;
        s->tx = torxp_calloc(STAGE_TX, sizeof *s->tx);
        s->rx = torxp_calloc(s->nrx, sizeof *s->rx);
        if (!s->tx || !s->rx)
            return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for %u staging buffers",
                               s->nrx + STAGE_TX);
        for (unsigned i = 0; i < STAGE_TX; i++) {
            s->tx[i].ctx.kind = TORXP_OFI_CTX_STAGE_TX;
            s->tx[i].net.msg = s->tx[i].msg;
        }
        for (unsigned i = 0; i < s->nrx; i++) {
            s->rx[i].ctx.kind = TORXP_OFI_CTX_STAGE_RX;
            s->rx[i].net.msg = s->rx[i].msg;
            post_stage_rx(d, &s->rx[i]);
        }
    }
    const size_t msg_max = strstr(d->prov, "ofi_rxm") ? STAGE_MSG_MAX_RXM : STAGE_MSG_MAX;
    const torx_status_t rc = torxp_net_stage_setup(&d->net, w, msg_max, w ? &s->tx[0].net : NULL,
                                                   sizeof *s->tx, w ? STAGE_TX : 0);
    return rc != TORX_OK ? rc : d->net.base.failed;
}

void torxp_ofi_stage_fini(torxp_ofi_dev_t *d)
{
    torxp_ofi_stage_t *s = d->stage;
    if (!s)
        return;
    d->stage = NULL; /* net/'s fini gives queued pieces back: not to be posted again */
    torxp_net_stage_fini(&d->net);
    free(s->tx);
    free(s->rx);
    free(s);
}

/* ---- net.h's stage_send and stage_rx_done (locked) --------------------------------- */

torx_status_t torxp_ofi_stage_send(torxp_net_t *n, unsigned slot, torxp_net_stage_buf_t *nb,
                                   size_t total)
{
    torxp_ofi_dev_t *d = (torxp_ofi_dev_t *)n;
    stage_buf_t *b = buf_of(nb);
    b->ctx.peer = slot;
    const ssize_t frc = torxp_ofi_tsend_retry(d, b->msg, total, slot, TORXP_OFI_UNTAGGED, &b->ctx);
    if (frc == -FI_EAGAIN)
        return TORX_NO_ROOM;
    if (frc != 0) {
        torxp_net_stage_tx_done(n, nb);
        return torxp_ofi_fi_fail(d, "fi_tsendmsg (staged piece)", (int)slot, (int)frc);
    }
    if (total <= d->inject_size) /* sent inline: the provider copied it */
        torxp_net_stage_tx_done(n, nb);
    return TORX_OK;
}

void torxp_ofi_stage_rx_done(torxp_net_t *n, torxp_net_stage_buf_t *nb)
{
    torxp_ofi_dev_t *d = (torxp_ofi_dev_t *)n;
    if (d->stage) /* not at close */
        post_stage_rx(d, buf_of(nb));
}

/* ---- Completions (locked) ------------------------------------------------------------- */

void torxp_ofi_stage_on_tx(torxp_ofi_dev_t *d, torxp_ofi_ctx_t *ctx, int err)
{
    stage_buf_t *b = (stage_buf_t *)ctx;
    if (err)
        torxp_ofi_fi_fail(d, "a staged piece's fi_tsend", (int)ctx->peer, err);
    torxp_net_stage_tx_done(&d->net, &b->net);
}

void torxp_ofi_stage_on_rx(torxp_ofi_dev_t *d, torxp_ofi_ctx_t *ctx, size_t len, uint64_t credits)
{
    stage_buf_t *b = (stage_buf_t *)ctx;
    uint32_t src = UINT32_MAX; /* the header's first field */
    if (len >= sizeof src)
        memcpy(&src, b->msg, sizeof src);
    torxp_net_credits_back(&d->net, src, credits); /* torus credits, aboard (tsend) */
    torxp_net_stage_on_rx(&d->net, &b->net, len);
}
