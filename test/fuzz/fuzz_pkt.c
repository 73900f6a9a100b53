/* libFuzzer harness: the packet layer's receive side (shm device) fed
 * arbitrary packets.
 *
 * A reception FIFO is shared memory that every task of a job writes, so what
 * a receiver finds there must be checked before a length in it is trusted.
 * This harness writes raw slots, header bytes included (chunks, payload
 * length, routing bits, destination), straight into its own reception FIFOs
 * and then reads them the way the message layer does: peek, read the
 * payload, consume. Device-internal (TORX_PKT_SYS) packets take the bulk
 * decode (torxp_shm_bulk_on_sys).
 *
 * Input: a sequence of records [fifo byte][16 header bytes][payload bytes
 * up to 240]. One job (a singleton: one task, the whole torus one node)
 * stays up across inputs; the FIFOs are drained after each input.
 *
 * Left out on purpose: bulk get requests and put data carry an address in
 * the receiving task's own memory that the layer above advertised to the
 * peer (a scout's buffer); the device trusts it, as DMA hardware does, so a
 * fuzzed one would only prove that a wild address faults. Their type byte
 * is flipped to an unknown type, which still exercises the decode. */
#include "msglayer/msg_internal.h"
#include "packet/shm/shm.h"
#include "packet/shm/shm_fifo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static torx_ctx_t *ctx;
static torxp_shm_dev_t *shm;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("TORX_VERBOSE", "-1", 1); /* one line per dropped packet would swamp the run */
    setenv("TORX_DEVICE", "shm", 1);
    if (torx_init(NULL, &ctx) != TORX_OK) {
        fprintf(stderr, "fuzz_pkt: torx_init: %s\n", torx_last_error());
        exit(1);
    }
    shm = torxp_shm_of(ctx->dev);
    return 0;
}

/* Writes one raw slot into reception FIFO fi, as a producer would, but with
 * whatever header the input says. False when the FIFO is full. */
static bool put_raw(unsigned fi, const uint8_t hdr[16], const uint8_t *payload, size_t n)
{
    torxp_fifo_t *f = torxp_shm_fifo(shm, shm->self_index, fi);
    uint64_t *cached = &shm->cached_head[shm->self_index * TORXP_SHM_FIFOS_PER_TASK + fi];
    uint64_t pos;
    if (!torxp_fifo_reserve(f, shm->geom, cached, &pos))
        return false;
    torx_pkt_hdr_t *slot = torxp_fifo_slot(f, shm->geom, pos);
    torx_pkt_hdr_t h;
    memcpy(&h, hdr, sizeof h);
    if ((h.ctl & TORX_PKT_SYS) && (h.sw[0] == 1 || h.sw[0] == 3))
        h.sw[0] |= 0x80; /* get request, put data: see the top of this file */
    torxp_fifo_write_hdr(slot, &h, h.chunks, h.payload_len);
    memset(slot + 1, 0, TORX_PKT_MAX_PAYLOAD);
    memcpy(slot + 1, payload, n);
    torxp_fifo_publish(slot, pos, shm->geom);
    return true;
}

static void drain(void)
{
    uint8_t buf[TORX_PKT_MAX_PAYLOAD];
    const torx_pkt_hdr_t *p;
    while ((p = torx_pkt_peek(ctx->dev)) != NULL) {
        /* Whatever peek hands out must be a sane packet: the layer above
         * reads payload_len bytes of it. */
        if (p->payload_len > TORX_PKT_MAX_PAYLOAD || torxp_hdr_invalid(p, ctx->dev->shape))
            abort();
        /* and addressed to this task, unless it passes through on a line */
        if (!(p->ctl & TORX_PKT_DEPOSIT) && memcmp(&p->dest, &ctx->dev->self, sizeof p->dest))
            abort();
        torx_pkt_read(p, buf, 0, p->payload_len);
        torx_pkt_consume(ctx->dev);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    while (size >= 1 + 16) {
        const unsigned fi = data[0] % TORXP_SHM_FIFOS_PER_TASK;
        const uint8_t *hdr = data + 1;
        data += 17;
        size -= 17;
        size_t n = size < TORX_PKT_MAX_PAYLOAD ? size : TORX_PKT_MAX_PAYLOAD;
        /* A payload length byte in the record bounds how much it takes, so
         * that an input holds several packets. */
        if (n > hdr[6])
            n = hdr[6];
        if (!put_raw(fi, hdr, data, n)) {
            drain();
            if (!put_raw(fi, hdr, data, n))
                abort(); /* drained FIFOs must have room */
        }
        data += n;
        size -= n;
    }
    drain();
    torx_pkt_poll(ctx->dev);
    return 0;
}
