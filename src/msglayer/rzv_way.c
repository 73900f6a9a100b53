/* The way a pair moves long rendezvous data, by measurement (see
 * TORXM_RZV_WAY_MIN in msg_policy.h for why, and
 * docs/message-layer.md#rendezvous-data-path).
 *
 * The leader (the pair's lower rank) keeps, per size class, the way now
 * and the pair's rate in each: the bytes of its long transfers, both
 * directions, that completed within an epoch, over the epoch's time. A
 * transfer completes when its receiver has the data: a get's end comes in
 * its ack (torxp_now_ns: CLOCK_MONOTONIC, one clock for the host's tasks;
 * the simulated clock on sim). An epoch is an interval of that clock. It
 * ends once it holds more than EPOCH_TRANSFERS transfers, EPOCH_BYTES bytes
 * and EPOCH_NS; its figure is taken once every transfer that completed
 * before its end has reported: the acks of the leader's sends wait in its
 * FIFO behind the scouts of a whole window of its receives (each a bulk get
 * run in the handler), so they report up to a window late. Epochs counted
 * in the order reports arrived read bulk gets at half their rate (13.8 GB/s
 * in epochs of a stream that ran at 28), and the pair kept staging where
 * the two ways ran level.
 *
 * An epoch counts only transfers that went its way: after a switch the
 * transfers whose scouts were out already complete the old way, and the
 * epoch starts after the last of them. The first epoch goes the default
 * way (staged where a bulk get costs more than two copies) and is not
 * counted: its buffers are fresh and fault their pages in (a first staged
 * epoch read 6-13 GB/s where later ones read 50-68). The second goes the
 * default way, the third the other; from then on the faster, with one
 * epoch the other way after every EXPLORE_NEAR chosen ones for the first
 * EXPLORE_EARLY explorations and while the two are within a factor of
 * CLEAR, after every EXPLORE_FAR when they are not, so that a placement
 * that changes is noticed. The choice flips when the other way measured
 * SWITCH faster: at once after an exploring epoch, or after two epochs of
 * the chosen way in a row (one slow epoch is a preempted task as often as
 * a placement). */
#include "msg_internal.h"

#include <string.h>

#define CLASSES 4 /* 64-256 KiB, 256 KiB-1 MiB, 1-4 MiB, 4 MiB on */
#define EPOCH_TRANSFERS 16
/* 64 MiB: chosen while epochs were counted in the order reports arrived,
 * when far apart 8 MiB epochs read bulk gets at 256 KiB at 12.5-15.6 GB/s
 * and 64 MiB ones at 21.9-23.9, where a steady stream of them ran at 29: a
 * longer epoch diluted the late
 * acks. Epochs by the clock do not need it; it is kept, not measured again. */
#define EPOCH_BYTES ((uint64_t)64 << 20)
#define EPOCH_NS 200000u
#define EXPLORE_NEAR 8
#define EXPLORE_FAR 32
#define EXPLORE_EARLY 4
#define CLEAR 1.5
#define SWITCH 1.1

/* The completions of an epoch: [start, end) of the host's clock, in ns. */
typedef struct way_epoch {
    uint64_t start; /* 0: no transfer yet */
    uint64_t end;   /* 0: open (it needs more) */
    uint64_t last;  /* the latest completion so far */
    uint64_t bytes; /* completed in it; a fresh epoch starts at its first
                       completion, whose bytes moved before and are left out */
    uint32_t transfers;
} way_epoch_t;

typedef struct way_class {
    uint8_t bulk;      /* the way now: 1 bulk gets, 0 staging */
    uint8_t exploring; /* this epoch goes the other way */
    uint8_t measured;  /* bit 1 << way: rate[way] is a measurement */
    uint8_t epochs;    /* chosen-way epochs since the last exploring one */
    uint8_t warm;      /* the first epoch ended (it is not counted) */
    uint8_t explored;  /* exploring epochs so far, up to EXPLORE_EARLY */
    uint8_t strikes;   /* chosen-way epochs in a row that lost to the other's figure */
    way_epoch_t now;   /* the epoch being measured */
    way_epoch_t next;  /* completions from now.end on, while now waits for late ones */
    uint64_t floor;    /* the last old-way completion or ended epoch: later ones start after it */
    double rate[2];    /* bytes per ns, by way (0 staged, 1 bulk) */
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

int torxm_rzv_way_peek(const torxm_peer_t *peer, uint64_t len)
{
    if (!peer->way)
        return TORXM_WAY_NONE;
    const way_class_t *k = &peer->way->c[class_of(len)];
    return k->bulk ^ k->exploring ? TORXM_PATH_BULK : TORXM_PATH_STAGED;
}

void torxm_rzv_way_open(torxm_peer_t *peer, int staged)
{
    if (peer->way || !(peer->way = torxp_calloc(1, sizeof *peer->way)))
        return;
    for (int c = 0; c < CLASSES; c++)
        peer->way->c[c].bulk = (uint8_t)!staged;
}

/* The leader's record for peer, opened on first use at the default way
 * (msg_path.c); NULL without memory (the default way then holds). */
static struct torxm_rzv_way *way_of(torx_ctx_t *ctx, torxm_peer_t *peer, uint64_t len)
{
    if (TORXM_UNLIKELY(!peer->way))
        torxm_path_decide(ctx, peer, TORXM_ASK_WAY, len);
    return peer->way;
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

static void epoch_add(way_epoch_t *e, uint64_t len, uint64_t t)
{
    if (!e->start) {
        e->start = e->last = t;
    } else {
        e->start = t < e->start ? t : e->start;
        e->last = t > e->last ? t : e->last;
        e->bytes += len;
    }
    e->transfers++;
}

/* A long transfer of len bytes finished at when (0: now), staged or by bulk
 * get; sent: one of this task's sends. */
static void way_done(torx_ctx_t *ctx, torxm_peer_t *peer, uint64_t len, int staged, int sent,
                     uint64_t when)
{
    struct torxm_rzv_way *w = way_of(ctx, peer, len);
    if (!w)
        return;
    way_class_t *k = &w->c[class_of(len)];
    const unsigned way = k->bulk ^ k->exploring;
    const uint64_t t = when ? when : torxp_now_ns(ctx->dev);
    if ((unsigned)!staged != way) { /* one from before a switch: the epoch starts after it */
        k->floor = t > k->floor ? t : k->floor;
        memset(&k->now, 0, sizeof k->now);
        memset(&k->next, 0, sizeof k->next);
        return;
    }
    if (t <= k->floor) /* it ran beside an old-way transfer, or its epoch has ended */
        return;
    way_epoch_t *e = &k->now;
    if (e->end && t >= e->end)
        e = &k->next;
    if (e == &k->next && !e->start) { /* it follows on: all its bytes count */
        e->start = k->now.end;
        e->last = t;
        e->bytes = len;
        e->transfers = 1;
    } else {
        epoch_add(e, len, t);
    }
    e = &k->now;
    if (!e->end && e->transfers > EPOCH_TRANSFERS && e->bytes >= EPOCH_BYTES &&
        e->last - e->start >= EPOCH_NS)
        e->end = e->last + 1;
    /* Everything before the end has reported once a later send has (acks
     * come in order) or none of ours waits; receives report at once. */
    if (!e->end || !(sent ? t >= e->end || peer->awaiting <= 1 : peer->awaiting == 0))
        return;
    epoch_end(k, way, (double)e->bytes / (double)(e->end - e->start));
    k->floor = e->end - 1 > k->floor ? e->end - 1 : k->floor; /* what is still to come is late */
    if ((k->bulk ^ k->exploring) == way) {
        k->now = k->next;
    } else { /* the next epoch starts after the transfers of this way */
        if (k->next.start)
            k->floor = k->next.last > k->floor ? k->next.last : k->floor;
        memset(&k->now, 0, sizeof k->now);
    }
    memset(&k->next, 0, sizeof k->next);
}

void torxm_rzv_way_sent(torx_ctx_t *ctx, torxm_peer_t *peer, uint64_t len, int staged,
                        uint64_t when)
{
    way_done(ctx, peer, len, staged, 1, when);
}

void torxm_rzv_way_received(torx_ctx_t *ctx, torxm_peer_t *peer, uint64_t len, int staged,
                            uint64_t when)
{
    way_done(ctx, peer, len, staged, 0, when);
}

void torxm_rzv_way_log(const torx_ctx_t *ctx)
{
    static const char *const names[CLASSES] = {"64-256K", "256K-1M", "1-4M", "4M+"};
    if (ctx->dev->verbose < 2)
        return;
    for (int r = 0; r < ctx->size; r++) {
        const torxm_peer_t *page = ctx->peer_pages[r >> TORXM_PEER_PAGE_SHIFT];
        if (!page) { /* no record, no way: on to the next page */
            r |= TORXM_PEER_PAGE - 1;
            continue;
        }
        const struct torxm_rzv_way *w = page[r & (TORXM_PEER_PAGE - 1)].way;
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
