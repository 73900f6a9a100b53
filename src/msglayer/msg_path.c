/* The rendezvous data path, chosen in one place (msg_path.h; see
 * docs/message-layer.md#rendezvous-data-path).
 *
 * Four rules meet here:
 *  - TORX_RZV_DATA: bulk gets, packets, staged, or auto;
 *  - the bulk-cost line: under auto a bulk get costing more than
 *    TORXM_RZV_STAGE_COST percent of a memcpy loses to staging, never in
 *    co mode (its thread moves the data) nor oversubscribed (a staged
 *    stream needs both tasks running, a bulk get only the receiver);
 *  - slow copies: copies into the staging area toward the peer costing more
 *    than TORX_STAGE_COST_MAX ns per KiB (for a staged rendezvous three
 *    quarters of it, max / 4 * 3: 111 by default) keep messages off the area, except one in
 *    TORXM_STAGE_PROBE that measures again; a sender whose scouts go
 *    without the offer declines the peer's offers too for TORXM_RZV_HOLD
 *    scouts, but for probes, so that both directions of a pair move their
 *    data the same way: measured both ways at 1 MiB, windows where one
 *    direction staged and the other took bulk gets ran at 5.5 GB/s against
 *    19.6 all staged and 14.0 all bulk (the task doing a bulk get also
 *    fills the area the other way, so one core makes two of the three
 *    copies). Never oversubscribed: a copy is slow there
 *    because its task lost its core;
 *  - the measured way: long transfers (TORXM_RZV_WAY_MIN) of a pair on one
 *    host go the way its leader measured faster (rzv_way.c); the other task
 *    offers staging on every long scout and takes every offer. */
#include "msg_internal.h"

/* The bulk-cost line (TORXM_ASK_DEFAULT). */
static uint8_t default_path(const torxm_path_in_t *in)
{
    if (in->co_net)
        return TORXM_PATH_BULK;
    if (in->setting == TORX_RZV_DATA_STAGED)
        return TORXM_PATH_STAGED;
    return in->setting == TORX_RZV_DATA_AUTO && !in->oversubscribed &&
                   in->bulk_cost > TORXM_RZV_STAGE_COST
               ? TORXM_PATH_STAGED
               : TORXM_PATH_BULK;
}

/* The measured way (TORXM_ASK_WAY). */
static void measured_way(const torxm_path_in_t *in, torxm_path_out_t *out)
{
    if (!in->leads) { /* the follower offers and takes; the leader decides */
        out->path = TORXM_PATH_STAGED;
        return;
    }
    if (in->way == TORXM_WAY_NONE) {
        out->path = default_path(in);
        out->way_open = 1;
        return;
    }
    out->path = (uint8_t)in->way;
}

/* Whether copies into the area cost more than max now (never
 * oversubscribed). */
static int copies_measured_slow(const torxm_path_in_t *in, unsigned max)
{
    return !in->oversubscribed && in->copy_cost > max;
}

/* Whether a message that could go either way leaves the area for slow
 * copies: the copies cost more than max, and it is not the one in
 * TORXM_STAGE_PROBE that goes staged anyway. */
static int copies_slow(const torxm_path_in_t *in, unsigned max, torxm_path_out_t *out)
{
    if (!copies_measured_slow(in, max))
        return 0;
    out->count = 1;
    out->probe = in->probe_due;
    return !in->probe_due;
}

torxm_path_out_t torxm_path_choose(const torxm_path_in_t *in)
{
    torxm_path_out_t out = {.path = TORXM_PATH_BULK, .hold = -1};
    switch (in->ask) {
    case TORXM_ASK_SCOUT:
        if (in->rzv && torxm_path_streams(in->setting, in->len)) {
            out.path = TORXM_PATH_PACKETS;
        } else if (!torxm_path_offers_stage(in->setting, in->co_net, in->staged, in->len)) {
            out.path = TORXM_PATH_BULK;
        } else if (in->setting == TORX_RZV_DATA_STAGED) {
            out.path = TORXM_PATH_STAGED;
        } else if (torxm_path_measured(in->setting, in->co_net, in->oversubscribed, in->way_host,
                                       in->len)) {
            measured_way(in, &out);
        } else if (!copies_measured_slow(in, in->copy_cost_max / 4 * 3)) {
            out.path = TORXM_PATH_STAGED;
            out.hold = 0;
        } else {
            out.hold = 1;
            out.count = 1;
            out.probe = in->probe_due;
            out.path = in->probe_due ? TORXM_PATH_STAGED : TORXM_PATH_BULK;
        }
        break;
    case TORXM_ASK_TAKE: {
        int staged;
        if (!(in->flags & TORXM_SCOUT_STAGED)) {
            staged = 0;
        } else if (torxm_path_measured(in->setting, in->co_net, in->oversubscribed, in->way_host,
                                       in->len)) {
            measured_way(in, &out);
            staged = out.path == TORXM_PATH_STAGED;
        } else {
            staged = default_path(in) == TORXM_PATH_STAGED &&
                     (!in->hold || (in->flags & TORXM_SCOUT_PROBE));
        }
        out.path = staged                              ? TORXM_PATH_STAGED
                   : (in->flags & TORXM_SCOUT_PACKETS) ? TORXM_PATH_PACKETS
                                                       : TORXM_PATH_BULK;
        break;
    }
    case TORXM_ASK_DEFAULT:
        out.path = default_path(in);
        break;
    case TORXM_ASK_WAY:
        measured_way(in, &out);
        break;
    case TORXM_ASK_UNSTAGE:
        out.path = torxm_path_may_unstage(in->len) && copies_slow(in, in->copy_cost_max, &out)
                       ? TORXM_PATH_BULK
                       : TORXM_PATH_STAGED;
        break;
    case TORXM_ASK_IDLE:
        out.path = copies_slow(in, in->copy_cost_max, &out) ? TORXM_PATH_BULK : TORXM_PATH_STAGED;
        break;
    default:
        break;
    }
    return out;
}

torxm_path_in_t torxm_path_inputs(const torx_ctx_t *ctx, const torxm_peer_t *peer, unsigned ask,
                                  uint64_t len, unsigned flags)
{
    torxm_path_in_t in = {
        .ask = (uint8_t)ask,
        .setting = (uint8_t)ctx->limits.rzv_data,
        .rzv = 1,
        .co_net = (uint8_t)(ctx->co_net != 0),
        .oversubscribed = (uint8_t)(ctx->oversubscribed != 0),
        .staged = peer->staged,
        .way_host = peer->way_host,
        .leads = (uint8_t)torxm_rzv_way_leads(ctx, peer),
        .way = TORXM_WAY_NONE,
        .flags = (uint8_t)flags,
        .probe_due = (uint8_t)((uint8_t)(peer->stage_probe + 1) % TORXM_STAGE_PROBE == 0),
        .copy_cost_max = ctx->limits.stage_cost_max,
        .len = len,
    };
    /* The device and the way's record are read only where the answer can
     * depend on them: these reads are on every rendezvous, and a peer's
     * bulk cost sits in a line its task writes. */
    const int measured =
        torxm_path_measured(in.setting, in.co_net, in.oversubscribed, in.way_host, len);
    if (peer->way &&
        (ask == TORXM_ASK_WAY || (measured && (ask == TORXM_ASK_SCOUT || ask == TORXM_ASK_TAKE))))
        in.way = (int8_t)torxm_rzv_way_peek(peer, len);
    /* the bulk-cost line is drawn under auto, outside co mode and
     * oversubscription, for the default way or a leader with no record */
    const int line = in.setting == TORX_RZV_DATA_AUTO && !in.co_net && !in.oversubscribed;
    const int no_record = in.leads && in.way == TORXM_WAY_NONE;
    int bulk = 0, copy = 0;
    switch (ask) {
    case TORXM_ASK_SCOUT:
        bulk = measured && no_record;
        copy = line && !measured && torxm_path_offers_stage(in.setting, in.co_net, in.staged, len);
        break;
    case TORXM_ASK_TAKE:
        bulk = line && (flags & TORXM_SCOUT_STAGED) && (!measured || no_record);
        break;
    case TORXM_ASK_DEFAULT:
        bulk = line;
        break;
    case TORXM_ASK_WAY:
        bulk = line && no_record;
        break;
    case TORXM_ASK_UNSTAGE:
        copy = !in.oversubscribed && torxm_path_may_unstage(len);
        break;
    case TORXM_ASK_IDLE:
        copy = !in.oversubscribed;
        break;
    default:
        break;
    }
    if (bulk)
        in.bulk_cost = torx_bulk_cost(ctx->dev, peer->coord);
    if (copy)
        in.copy_cost = torx_stage_cost(ctx->dev, peer->coord);
    return in;
}

void torxm_path_apply(torx_ctx_t *ctx, torxm_peer_t *peer, const torxm_path_out_t *out)
{
    (void)ctx;
    if (out->count)
        peer->stage_probe++;
    if (out->hold >= 0)
        peer->rzv_hold = out->hold ? TORXM_RZV_HOLD : 0;
    if (out->way_open)
        torxm_rzv_way_open(peer, out->path == TORXM_PATH_STAGED);
}

torxm_path_out_t torxm_path_decide(torx_ctx_t *ctx, torxm_peer_t *peer, unsigned ask, uint64_t len)
{
    const torxm_path_in_t in = torxm_path_inputs(ctx, peer, ask, len, 0);
    const torxm_path_out_t out = torxm_path_choose(&in);
    torxm_path_apply(ctx, peer, &out);
    return out;
}

int torxm_rzv_way_staged(torx_ctx_t *ctx, torxm_peer_t *peer, uint64_t len)
{
    return torxm_path_decide(ctx, peer, TORXM_ASK_WAY, len).path == TORXM_PATH_STAGED;
}
