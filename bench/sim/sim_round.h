/* sim_round.h: waiting for a collective-network or global-interrupt round
 * in a message-layer program (bench/sim/).
 *
 * The wait goes through the message layer (torx_wait), with the round's
 * poll as its advance hook, so that the packets the message layer still
 * owes other tasks leave while this task waits: a rendezvous's
 * acknowledgement, a message's tail waiting for room in the injection
 * FIFO. A bare torx_pkt_wait sleeps on them until its timeout: in HALO at
 * 4 KiB a task waiting for a neighbour stalled 10 ms behind the
 * neighbour's torx_pkt_wait (docs/mapping.md#halo-on-the-modelled-torus).
 */
#ifndef TORX_BENCH_SIM_ROUND_H
#define TORX_BENCH_SIM_ROUND_H

#include <torx/msg.h>
#include <torx/packet.h>

#include <stdint.h>

typedef struct sim_round {
    torx_pkt_dev_t *dev;
    uint64_t *lanes; /* a collective-network round's result; NULL: the global interrupt */
    torx_status_t rc;
    volatile int done;
} sim_round_t;

/* The advance hook: the round's poll, once. */
static inline int sim_round_poll(void *arg)
{
    sim_round_t *r = arg;
    if (r->done)
        return 0;
    const torx_status_t rc = r->lanes ? torx_cn_read(r->dev, r->lanes) : torx_gi_poll(r->dev);
    if (rc == TORX_AGAIN)
        return 0;
    r->rc = rc;
    r->done = 1;
    return 1;
}

/* Advances ctx until the round this task joined ends: a collective-network
 * round into lanes (TORX_CN_PACKET_BYTES), or with lanes NULL an armed
 * global interrupt. The round's status, or the wait's error. */
static inline torx_status_t sim_round_wait(torx_ctx_t *ctx, uint64_t *lanes)
{
    sim_round_t r = {torx_ctx_device(ctx), lanes, TORX_OK, 0};
    if (sim_round_poll(&r))
        return r.rc;
    torx_status_t rc = torx_advance_hook(ctx, sim_round_poll, &r);
    if (rc != TORX_OK)
        return rc;
    rc = torx_wait(ctx, &r.done);
    torx_advance_hook(ctx, NULL, NULL);
    return rc != TORX_OK ? rc : r.rc;
}

#endif
