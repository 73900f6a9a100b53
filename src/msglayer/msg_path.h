/* The rendezvous data path, chosen in one place (msg_path.c): whether a
 * message's data moves through the staging area (two copies, no system
 * call), by a bulk get (one cross-memory copy) or as packets
 * (TORX_RZV_DATA=packets). See docs/message-layer.md#rendezvous-data-path.
 *
 * torxm_path_choose is a pure function of a torxm_path_in_t: the
 * variable's setting, the message's size, the mode and oversubscription,
 * the device's bulk cost and whether it measures bulk gets, the pair's
 * slow-copies evidence and probe state, and the pair's measured way
 * (rzv_way.c). It answers a path and what the caller's state must record
 * (the probe counter, the hold, a new measurement record). The state stays
 * where it is kept: peer->stage_probe and peer->rzv_hold in the peer,
 * the measured epochs in rzv_way.c. torxm_path_inputs reads it for a
 * question, torxm_path_apply records the answer's effects. Prefix: torxm_. */
#ifndef TORXM_PATH_H
#define TORXM_PATH_H

#include <torx/msg.h>

#include "msg_policy.h"
#include "msg_types.h"
#include "msg_wire.h"

#include <stdint.h>

/* The answer. */
enum torxm_path {
    TORXM_PATH_BULK = 0, /* a bulk get; for TORXM_ASK_UNSTAGE and _IDLE: not staged (the
                            rendezvous, vn: its bulk get) */
    TORXM_PATH_STAGED,   /* through the staging area */
    TORXM_PATH_PACKETS   /* adaptive packets after a clear-to-send */
};

/* The question. */
enum torxm_path_ask {
    /* The sender of a rendezvous or vn scout: what the scout offers
     * (packets, the staging area, or nothing: a bulk get). */
    TORXM_ASK_SCOUT = 0,
    /* The receiver of a scout with flags: how its data comes. */
    TORXM_ASK_TAKE,
    /* A pair's way before anything is measured, and the receiver's choice
     * for an offer outside measurement: the bulk-cost line. */
    TORXM_ASK_DEFAULT,
    /* The measured way of a long transfer (rzv_way.c): the leader's
     * record, or the default while it has none; the other task always
     * stages. */
    TORXM_ASK_WAY,
    /* An eager or vn message that would go staged: staged, or for slow
     * copies from TORXM_SLOW_RZV_MIN bytes the rendezvous (vn: the bulk
     * get). */
    TORXM_ASK_UNSTAGE,
    /* A message past the eager limit to an idle pair that could go staged:
     * staged, or for slow copies the rendezvous. */
    TORXM_ASK_IDLE
};

/* The pair's measured way, in torxm_path_in_t.way: none recorded yet. */
#define TORXM_WAY_NONE (-1)

typedef struct torxm_path_in {
    uint8_t ask;            /* enum torxm_path_ask */
    uint8_t setting;        /* TORX_RZV_DATA (torx_rzv_data_t) */
    uint8_t rzv;            /* a rendezvous message (0: vn; vn data never comes as packets) */
    uint8_t co_net;         /* co mode's thread moves rendezvous data */
    uint8_t oversubscribed; /* more tasks than CPUs */
    uint8_t staged;         /* the staging area reaches the peer */
    uint8_t way_host;       /* the staging area reaches the peer and the device measured its
                               bulk gets (torx_bulk_cost != 0): the pair measures its way */
    uint8_t leads;          /* this task leads the pair's measurement (the lower rank) */
    int8_t way;             /* the leader's recorded way for len: TORXM_PATH_STAGED,
                               TORXM_PATH_BULK or TORXM_WAY_NONE */
    uint8_t flags;          /* TORXM_ASK_TAKE: the scout's flags (TORXM_SCOUT_*) */
    uint8_t hold;           /* TORXM_ASK_TAKE: this task's slow-copies verdict holds
                               (peer->rzv_hold was not 0) */
    uint8_t probe_due;      /* the next message kept off the area for slow copies is the one
                               in TORXM_STAGE_PROBE that measures again */
    unsigned bulk_cost;     /* torx_bulk_cost toward the peer, percent of a memcpy */
    unsigned copy_cost;     /* torx_stage_cost toward the peer, ns per KiB */
    unsigned copy_cost_max; /* limits.stage_cost_max (TORX_STAGE_COST_MAX) */
    uint64_t len;           /* the message's data bytes */
} torxm_path_in_t;

typedef struct torxm_path_out {
    uint8_t path;     /* enum torxm_path */
    uint8_t probe;    /* kept off for slow copies but staged anyway, to measure again
                         (a scout's TORXM_SCOUT_PROBE) */
    uint8_t count;    /* a message kept off for slow copies: the probe counter advances */
    int8_t hold;      /* TORXM_ASK_SCOUT: 1 set peer->rzv_hold to TORXM_RZV_HOLD, 0 clear
                         it, -1 leave it */
    uint8_t way_open; /* the answer is the default of a pair whose leader has no record
                         yet: open it, starting this way */
} torxm_path_out_t;

/* The chooser: pure, reads only in. */
torxm_path_out_t torxm_path_choose(const torxm_path_in_t *in);

/* Whether rendezvous data of len bytes streams as packets after a
 * clear-to-send (TORX_RZV_DATA=packets; streamed offsets are 32-bit, so
 * larger messages take the bulk get). */
static inline int torxm_path_streams(unsigned setting, uint64_t len)
{
    return setting == TORX_RZV_DATA_PACKETS && len <= TORXM_STREAM_MAX;
}
/* Whether a scout may offer its data through the staging area
 * (TORXM_SCOUT_STAGED): the area reaches the peer, the offsets fit, and
 * TORX_RZV_DATA is auto or staged. Not in co mode, whose thread moves
 * rendezvous data while the task computes. */
static inline int torxm_path_offers_stage(unsigned setting, int co_net, int staged, uint64_t len)
{
    return staged && !co_net && len <= TORXM_STREAM_MAX &&
           (setting == TORX_RZV_DATA_AUTO || setting == TORX_RZV_DATA_STAGED);
}
/* Whether a transfer of len bytes goes the pair's measured way (rzv_way.c):
 * TORX_RZV_DATA=auto, neither co mode's thread nor oversubscription, a
 * peer on this host whose bulk gets the device measured, and
 * TORXM_RZV_WAY_MIN bytes or more. */
static inline int torxm_path_measured(unsigned setting, int co_net, int oversubscribed,
                                      int way_host, uint64_t len)
{
    return setting == TORX_RZV_DATA_AUTO && !co_net && !oversubscribed && way_host &&
           len >= TORXM_RZV_WAY_MIN && len <= TORXM_STREAM_MAX;
}

/* ---- The context's side ------------------------------------------------------------ */

/* Whether TORXM_ASK_UNSTAGE can answer anything but staged for len bytes:
 * below this, its callers skip the question and the reads of its inputs,
 * which a staged 1 KiB message paid on every send. */
static inline int torxm_path_may_unstage(uint64_t len)
{
    return len >= TORXM_SLOW_RZV_MIN;
}

/* The inputs for question ask about a message of len bytes with peer
 * (TORXM_ASK_TAKE: a scout with flags), read from ctx, peer, the device and
 * rzv_way.c; only what the answer can depend on is read (hold: 0, the
 * caller of TORXM_ASK_TAKE sets it; rzv: 1, the caller of TORXM_ASK_SCOUT
 * sets it). */
torxm_path_in_t torxm_path_inputs(const torx_ctx_t *ctx, const torxm_peer_t *peer, unsigned ask,
                                  uint64_t len, unsigned flags);
/* Records out's effects on peer: the probe counter, the hold, the way's
 * record (rzv_way.c). */
void torxm_path_apply(torx_ctx_t *ctx, torxm_peer_t *peer, const torxm_path_out_t *out);
/* Inputs, chooser and effects in one call, for questions that need no more
 * than torxm_path_inputs reads. */
torxm_path_out_t torxm_path_decide(torx_ctx_t *ctx, torxm_peer_t *peer, unsigned ask, uint64_t len);

static inline int torxm_rzv_streams(const torx_ctx_t *ctx, const torxm_msg_t *m)
{
    return torxm_path_streams(ctx->limits.rzv_data, m->len);
}
static inline int torxm_rzv_offers_stage(const torx_ctx_t *ctx, const torxm_peer_t *peer,
                                         const torxm_msg_t *m)
{
    return torxm_path_offers_stage(ctx->limits.rzv_data, ctx->co_net, peer->staged, m->len);
}
static inline int torxm_rzv_way_measured(const torx_ctx_t *ctx, const torxm_peer_t *peer,
                                         uint64_t len)
{
    return torxm_path_measured(ctx->limits.rzv_data, ctx->co_net, ctx->oversubscribed,
                               peer->way_host, len);
}
static inline int torxm_rzv_way_leads(const torx_ctx_t *ctx, const torxm_peer_t *peer)
{
    return ctx->rank < peer->rank;
}
/* Whether this task counts a measured transfer of len bytes with peer
 * (torxm_rzv_way_sent, torxm_rzv_way_received): it leads the pair. */
static inline int torxm_rzv_way_counts(const torx_ctx_t *ctx, const torxm_peer_t *peer,
                                       uint64_t len)
{
    return torxm_rzv_way_measured(ctx, peer, len) && torxm_rzv_way_leads(ctx, peer);
}

/* ---- The pair's measured way (rzv_way.c) ------------------------------------------- */

/* The leader's recorded way for transfers of len bytes with peer:
 * TORXM_PATH_STAGED, TORXM_PATH_BULK, or TORXM_WAY_NONE before its first
 * use. Reads only. */
int torxm_rzv_way_peek(const torxm_peer_t *peer, uint64_t len);
/* Opens the leader's record for peer, every size class starting staged or
 * not (the default way). Without memory it stays closed and the default
 * holds. */
void torxm_rzv_way_open(torxm_peer_t *peer, int staged);
/* For a measured transfer of len bytes with peer, either direction:
 * whether the pair stages it (TORXM_ASK_WAY). */
int torxm_rzv_way_staged(torx_ctx_t *ctx, torxm_peer_t *peer, uint64_t len);
/* The leader counts each long transfer of the pair as it completes, staged
 * or by bulk get, one of its sends or of its receives, finished at when
 * (torxp_now_ns of the receiving task: a get's ack carries it; 0: now). */
void torxm_rzv_way_sent(torx_ctx_t *ctx, torxm_peer_t *peer, uint64_t len, int staged,
                        uint64_t when);
void torxm_rzv_way_received(torx_ctx_t *ctx, torxm_peer_t *peer, uint64_t len, int staged,
                            uint64_t when);
/* TORX_VERBOSE=2, at finalize: what the pairs measured. */
void torxm_rzv_way_log(const torx_ctx_t *ctx);

#endif /* TORXM_PATH_H */
