/* libFuzzer harness: the message layer's receive side fed arbitrary packets.
 *
 * Every protocol's receive decode (one-packet, eager first and more,
 * adaptive first, more and token, rendezvous and virtual-node scouts,
 * clear-to-send, data and acks) sees packets whose type, source, per-type
 * word (handler, header length, flags, offsets, sequence numbers) and
 * payload (totals, cookies, lengths) come from the input, interleaved with
 * real messages this task sends itself, so that reassembly, parked adaptive
 * packets, cookies and waiting sends exist for the fuzzed packets to hit.
 *
 * Input: [sends byte] then records [type][src][word: 4][adaptive bit and
 * payload length][payload...]. One job (a singleton) stays up across
 * inputs, as a real task's state would; after each input the task advances
 * until nothing moves.
 *
 * Left out on purpose: a rendezvous or virtual-node scout whose data would
 * move by bulk get names an address in the sender's memory, which the
 * receiver trusts (the sender advertised it). The handler here discards
 * such messages (no get is started) unless the scout asks for the data as
 * packets, which needs no address. */
#include "msglayer/msg_internal.h"

#include <stdio.h>
#include <stdlib.h>

static torx_ctx_t *ctx;
static uint8_t sink[1 << 16];
static unsigned scout_flags; /* of the packet being dispatched */
static uint64_t received, sent_done;
/* Sends not completed yet: a fuzzed packet can strand one for good (a
 * token that never comes holds the peer's queue), so new ones start only
 * while few are out, or the queue would grow with every input. */
static unsigned outstanding;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void recv_done(torx_ctx_t *c, void *arg, torx_status_t status, size_t len)
{
    (void)c;
    (void)arg;
    (void)status;
    if (len > sizeof sink)
        abort(); /* the layer wrote or reported more than the buffer holds */
    received++;
}

/* Handler 0 takes messages into sink (truncating at a length from the
 * header), handler 1 into a small buffer, handler 2 discards; others are
 * not registered (the unregistered path). */
static void handler(torx_ctx_t *c, void *harg, const torx_recv_info_t *info, torx_recv_t *recv)
{
    (void)c;
    const uintptr_t id = (uintptr_t)harg;
    if (info->data_len && !info->data && info->protocol != TORX_PROTO_EAGER &&
        info->protocol != TORX_PROTO_ADAPTIVE && !(scout_flags & TORXM_SCOUT_PACKETS))
        return; /* data by bulk get from an address off the wire: see the top */
    if (id == 2)
        return;
    size_t cap = id == 1 ? 64 : sizeof sink;
    if (info->hdr_len > 0)
        cap = cap * ((const uint8_t *)info->hdr)[0] / 255;
    recv->buf = sink;
    recv->len = cap;
    recv->done = recv_done;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("TORX_VERBOSE", "-1", 1);
    setenv("TORX_DEVICE", "shm", 1);
    setenv("TORX_RZV_DATA", "packets", 1); /* our own rendezvous sends: see the top */
    if (torx_init(NULL, &ctx) != TORX_OK) {
        fprintf(stderr, "fuzz_msg: torx_init: %s\n", torx_last_error());
        exit(1);
    }
    for (uintptr_t id = 0; id < 3; id++)
        torx_register(ctx, (int)id, handler, (void *)id);
    return 0;
}

typedef struct {
    torx_msg_t msg;
} send_t;

static void send_done(torx_ctx_t *c, torx_msg_t *m, void *arg)
{
    (void)c;
    (void)m;
    /* The layer is done with the message: nothing of it is touched after
     * done runs (run_completions reads the next one first). */
    free(arg);
    sent_done++;
    outstanding--;
}

static const uint8_t payload[8192];

/* Inputs should not pile up state for later ones: receptions that a
 * fuzzed packet left half done (an adaptive message whose data never
 * comes, packets parked for a turn that never comes, an eager message cut
 * short) are forgotten after each input, their records returned to the
 * free lists, as if the sender had been declared gone. Without this every
 * later packet scans lists that only grow, and the harness slows from 30k
 * to 2k executions a second. */
static void forget_partial_receives(void)
{
    for (int r = 0; r < ctx->size; r++) {
        torxm_peer_t *p = ctx->peer_pages[r >> TORXM_PEER_PAGE_SHIFT]
                              ? torxm_peer_known(ctx, r)
                              : NULL; /* no record: nothing to forget */
        if (!p)
            continue;
        while (p->early) {
            torxm_early_t *e = p->early;
            p->early = e->next;
            e->next = ctx->early_free;
            ctx->early_free = e;
        }
        while (p->adapt) {
            torxm_rx_t *rx = p->adapt;
            p->adapt = rx->next;
            rx->next = ctx->rx_free;
            ctx->rx_free = rx;
        }
        if (p->eager) {
            p->eager->next = ctx->rx_free;
            ctx->rx_free = p->eager;
            p->eager = NULL;
        }
    }
}

static void advance_until_quiet(void)
{
    for (int idle = 0, i = 0; idle < 4 && i < 10000; i++)
        idle = torx_advance(ctx) ? 0 : idle + 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    /* Real messages to ourselves, one per protocol bit; a send that a
     * fuzzed packet stranded (its reply spoofed away) cannot be reused, so
     * its object is left to the layer (it stays reachable from ctx). */
    const unsigned sends = data[0];
    data++;
    size--;
    for (unsigned p = 0; p < TORX_PROTO_COUNT; p++) {
        if (!(sends & (1u << p)) || p == TORX_PROTO_VN || outstanding >= 8)
            continue;
        send_t *s = calloc(1, sizeof *s);
        if (!s)
            return 0;
        const size_t len = p == TORX_PROTO_ONEPKT ? 100 : (sends & 0x80) ? 5000 : 600;
        const uint8_t hdr[2] = {255, (uint8_t)p};
        if (torx_send(ctx, &s->msg, ctx->rank, (int)(p % 3), hdr, sizeof hdr, payload, len,
                      (torx_protocol_t)p, send_done, s) != TORX_OK)
            free(s);
        else
            outstanding++;
    }
    _Alignas(8) uint8_t buf[sizeof(torx_pkt_hdr_t) + TORX_PKT_MAX_PAYLOAD];
    torx_pkt_hdr_t *pkt = (torx_pkt_hdr_t *)(void *)buf;
    while (size >= 7) {
        const unsigned type = data[0] % (TORXM_PKT_NTYPES + 1);
        const unsigned src = data[1] < 250 ? 0 : data[1]; /* mostly a real rank */
        uint32_t word;
        memcpy(&word, data + 2, 4);
        const unsigned adaptive = data[6] & 0x80, want = data[6] & 0x7f;
        data += 7;
        size -= 7;
        /* Lengths a packet layer would deliver: at most 240 bytes. */
        size_t n = want * 2u;
        if (n > TORX_PKT_MAX_PAYLOAD)
            n = TORX_PKT_MAX_PAYLOAD;
        if (n > size)
            n = size;
        torx_pkt_hdr_init(pkt, ctx->self, adaptive ? TORX_PKT_ADAPTIVE : 0);
        pkt->payload_len = (uint8_t)n;
        pkt->chunks = (uint8_t)torx_pkt_chunks_for(n);
        torxm_sw_set(pkt, type, src, word);
        memcpy(buf + sizeof *pkt, data, n);
        data += n;
        size -= n;
        scout_flags = word >> 16;
        torxm_dispatch(ctx, pkt);
        scout_flags = 0;
        /* Let real traffic interleave with the fuzzed packets. */
        if (word & 0x1000000u)
            torx_advance(ctx);
    }
    advance_until_quiet();
    forget_partial_receives();
    return 0;
}
