/* The way a pair moves long rendezvous data, by measurement (see
 * TORXM_RZV_WAY_MIN in msg_internal.h for why).
 *
 * The leader (the pair's lower rank) keeps, per size class, the way now
 * and the pair's rate in each: the bytes of its long transfers, both
 * directions, over the time they took to complete, in epochs of at least
 * EPOCH_TRANSFERS transfers, EPOCH_BYTES bytes and EPOCH_NS. A transfer
 * completes when its receiver has the data: a get's end comes in its ack
 * (CLOCK_MONOTONIC is one clock for the host's tasks). An epoch counts only
 * transfers that went its way: after a switch the transfers whose scouts
 * were out already complete the old way first, and the epoch's clock
 * starts at the first one of the new way. The first epoch goes the
 * default way (staged where a bulk get costs more than two copies) and is
 * not counted: its buffers are fresh and fault their pages in (a first
 * staged epoch read 6-13 GB/s where later ones read 50-68). The second
 * goes the default way, the third the other; from then on the faster,
 * with one epoch the other way after every EXPLORE_NEAR chosen ones for
 * the first EXPLORE_EARLY explorations and while the two are within a
 * factor of CLEAR, after every EXPLORE_FAR when they are not, so that a
 * placement that changes is noticed. The choice flips when the other way
 * measured SWITCH faster: at once after an exploring epoch, or after two
 * epochs of the chosen way in a row (one slow epoch is a preempted task as
 * often as a placement). */
#include "msg_internal.h"

#define CLASSES 4 /* 64-256 KiB, 256 KiB-1 MiB, 1-4 MiB, 4 MiB on */
#define EPOCH_TRANSFERS 16
/* 64 MiB: an epoch of bulk gets after staging starts with source buffers
 * the receiver has not read lately. Far apart, 8 MiB epochs read 12.5-15.6
 * GB/s for them at 256 KiB and 64 MiB ones 21.9-23.9, where a steady
 * stream of them ran at 29 (bench/RESULTS.md, eighteenth session). */
#define EPOCH_BYTES ((uint64_t)64 << 20)
#define EPOCH_NS 200000u
#define EXPLORE_NEAR 8
#define EXPLORE_FAR 32
#define EXPLORE_EARLY 4
#define CLEAR 1.5
#define SWITCH 1.1

typedef struct way_class {
    uint8_t bulk;         /* the way now: 1 bulk gets, 0 staging */
    uint8_t exploring;    /* this epoch goes the other way */
    uint8_t measured;     /* bit 1 << way: rate[way] is a measurement */
    uint8_t epochs;       /* chosen-way epochs since the last exploring one */
    uint8_t warm;         /* the first epoch ended (it is not counted) */
    uint8_t explored;     /* exploring epochs so far, up to EXPLORE_EARLY */
    uint8_t strikes;      /* chosen-way epochs in a row that lost to the other's figure */
    uint32_t transfers;   /* this epoch's */
    uint64_t first, last; /* ns: its earliest and latest completion; first 0: none yet */
    uint64_t bytes;       /* its bytes but the first transfer's */
    double rate[2];       /* bytes per ns, by way (0 staged, 1 bulk) */
} way_class_t;

struct torxm_rzv_way {
    way_class_t c[CLASSES];
};

static int class_of(uint64_t len)
{
    int c = 0;
    for (len >>= 18; len && c < CLASSES - 1; len >>= 2)
        c++;
    return c;
}

/* The leader's record for peer, made on first use; NULL without memory
 * (the default way then holds). */
static struct torxm_rzv_way *way_of(torx_ctx_t *ctx, torxm_peer_t *peer)
{
    if (TORXM_UNLIKELY(!peer->way)) {
        if (!(peer->way = torxp_calloc(1, sizeof *peer->way)))
            return NULL;
        const uint8_t bulk = !torxm_rzv_takes_stage(ctx, peer);
        for (int c = 0; c < CLASSES; c++)
            peer->way->c[c].bulk = bulk;
    }
    return peer->way;
}

int torxm_rzv_way_staged(torx_ctx_t *ctx, torxm_peer_t *peer, uint64_t len)
{
    const struct torxm_rzv_way *w = way_of(ctx, peer);
    if (!w)
        return torxm_rzv_takes_stage(ctx, peer);
    const way_class_t *k = &w->c[class_of(len)];
    return !(k->bulk ^ k->exploring);
}

/* An epoch of class k ended at rate going way: the choice, and when next
 * to explore. */
static void epoch_end(way_class_t *k, unsigned way, double rate)
{
    if (!k->warm) { /* fresh buffers fault their pages in: measure again */
        k->warm = 1;
        return;
    }
    const int explored = k->exploring;
    if (explored && k->explored < EXPLORE_EARLY)
        k->explored++;
    /* the way taken: the mean with its last figure, so that one slow epoch
     * (a preempted task) does not flip the choice alone; the other way's
     * figure is this one fresh measurement */
    k->rate[way] = explored || !(k->measured & (1u << way)) ? rate : (k->rate[way] + rate) / 2;
    k->measured |= (uint8_t)(1u << way);
    k->exploring = 0;
    if (k->measured != 3) { /* the other way next, to measure it */
        k->exploring = 1;
        return;
    }
    const unsigned now = k->bulk, other = !now;
    if (k->rate[other] > k->rate[now] * SWITCH && (explored || ++k->strikes >= 2)) {
        k->bulk = (uint8_t)other;
        k->epochs = 0;
        k->strikes = 0;
        return;
    }
    if (k->rate[other] <= k->rate[now] * SWITCH)
        k->strikes = 0;
    const double lead = k->rate[now] / k->rate[other];
    if (++k->epochs >=
        (lead > CLEAR && k->explored >= EXPLORE_EARLY ? EXPLORE_FAR : EXPLORE_NEAR)) {
        k->epochs = 0;
        k->exploring = 1;
    }
}

void torxm_rzv_way_done(torx_ctx_t *ctx, torxm_peer_t *peer, uint64_t len, int staged,
                        uint64_t when)
{
    struct torxm_rzv_way *w = way_of(ctx, peer);
    if (!w)
        return;
    way_class_t *k = &w->c[class_of(len)];
    const unsigned way = k->bulk ^ k->exploring;
    if ((unsigned)!staged != way) { /* one from before a switch: the epoch starts after it */
        k->first = 0;
        return;
    }
    /* Times come from both tasks' clocks (an ack's), not in order. */
    const uint64_t t = when ? when : torxp_mono_ns();
    if (!k->first) {
        k->first = k->last = t;
        k->transfers = 1;
        k->bytes = 0;
        return;
    }
    k->first = t < k->first ? t : k->first;
    k->last = t > k->last ? t : k->last;
    k->transfers++;
    k->bytes += len;
    if (k->transfers <= EPOCH_TRANSFERS || k->bytes < EPOCH_BYTES || k->last - k->first < EPOCH_NS)
        return;
    const double rate = (double)k->bytes / (double)(k->last - k->first);
    k->first = 0;
    epoch_end(k, way, rate);
}

void torxm_rzv_way_log(const torx_ctx_t *ctx)
{
    static const char *const names[CLASSES] = {"64-256K", "256K-1M", "1-4M", "4M+"};
    if (ctx->dev->verbose < 2)
        return;
    for (int r = 0; r < ctx->size; r++) {
        const struct torxm_rzv_way *w = ctx->peers[r].way;
        for (int c = 0; w && c < CLASSES; c++) {
            const way_class_t *k = &w->c[c];
            if (!k->measured)
                continue;
            torxp_log(ctx->dev, 2,
                      "rendezvous data with rank %d, %s bytes: staged %.1f GB/s, bulk get %.1f "
                      "GB/s (0: not measured); the pair takes %s",
                      r, names[c], k->rate[0], k->rate[1], k->bulk ? "bulk gets" : "staging");
        }
    }
}
