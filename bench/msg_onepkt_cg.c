/* msg_onepkt_cg: the per-message cost of the one-packet protocol, for
 * callgrind (bench/callgrind-onepkt.sh).
 *
 * One task (a singleton job: torx_init without a launcher) sends N 1-byte
 * one-packet messages to itself, one at a time: torx_send, then
 * torx_advance until the handler has run and the receive completed. Every
 * message therefore costs one send (header formatting, injection into the
 * FIFO) plus one receive (poll, peek, dispatch by type, the handler, the
 * copy out, the completion callback, consume), which is the one-packet path
 * at both ends. Nothing in the loop waits on another process, so the
 * instruction count is the same on every run.
 *
 * The timed work is the function onepkt_loop (noinline), for
 * valgrind --toggle-collect=onepkt_loop; the script also diffs the totals of
 * runs with N and 2N messages, which does not depend on the symbol.
 *
 * With "pkt", the same loop runs on the raw packet layer underneath
 * (pkt_loop: inject, poll, peek, copy out, consume), the reference that
 * says what the message layer adds.
 *
 * With "eager", the loop sends BYTES-byte messages with the eager protocol
 * forced (up to 65536 bytes): by 240-byte packets with TORX_STAGE_MIN=0, or
 * through the staging area from TORX_STAGE_MIN on (the default), which is
 * how bench/callgrind-onepkt.sh compares the two per message.
 *
 * Usage: msg_onepkt_cg [N] [BYTES] [msg|pkt|eager]
 *        (10000, 1 (at most 240; eager: 65536), msg)
 * Prints "cg msg|pkt messages=N bytes=B received=R" (R must equal N).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <torx/msg.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HANDLER 3

static volatile long received;
#define EAGER_MAX 65536
static uint8_t inbuf[EAGER_MAX];
static int bad;
static torx_protocol_t want_proto = TORX_PROTO_ONEPKT;

static void cg_done(torx_ctx_t *ctx, void *arg, torx_status_t status, size_t n)
{
    (void)ctx;
    (void)arg;
    bad |= status != TORX_OK;
    (void)n;
    received++;
}

static void cg_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                       torx_recv_t *recv)
{
    (void)ctx;
    (void)harg;
    bad |= info->protocol != want_proto;
    recv->buf = inbuf;
    recv->len = sizeof inbuf;
    recv->done = cg_done;
}

/* The measured loops: external (not static) so that the compiler keeps
 * them whole under their own names, which --toggle-collect names. */
long onepkt_loop(torx_ctx_t *ctx, torx_msg_t *msg, const uint8_t *data, size_t bytes, long n);
long pkt_loop(torx_ctx_t *ctx, const uint8_t *data, size_t bytes, long n);

/* N messages, each sent and received before the next. */
__attribute__((noinline)) long onepkt_loop(torx_ctx_t *ctx, torx_msg_t *msg, const uint8_t *data,
                                           size_t bytes, long n)
{
    const int self = torx_rank(ctx);
    for (long i = 0; i < n; i++) {
        const long want = received + 1;
        if (torx_send(ctx, msg, self, HANDLER, NULL, 0, data, bytes, want_proto, NULL, NULL) !=
            TORX_OK)
            return -1;
        while (received < want)
            torx_advance(ctx);
    }
    return received;
}

/* The same through the raw packet layer underneath (reference): inject one
 * deterministic packet to ourselves, poll, peek, copy the payload out,
 * consume. Its type byte is one the message layer never uses. */
__attribute__((noinline)) long pkt_loop(torx_ctx_t *ctx, const uint8_t *data, size_t bytes, long n)
{
    torx_pkt_dev_t *dev = torx_ctx_device(ctx);
    torx_pkt_hdr_t h;
    torx_pkt_hdr_init(&h, torx_map_coord(torx_ctx_map(ctx), torx_rank(ctx)), 0);
    h.sw[0] = 0xEE;
    long got = 0;
    for (long i = 0; i < n; i++) {
        if (torx_pkt_inject1(dev, &h, data, bytes) != TORX_OK)
            return -1;
        const torx_pkt_hdr_t *p;
        while (!torx_pkt_poll(dev) || !(p = torx_pkt_peek(dev)))
            ;
        bad |= p->sw[0] != 0xEE;
        torx_pkt_read(p, inbuf, 0, p->payload_len);
        torx_pkt_consume(dev);
        got++;
    }
    return got;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 10000;
    long bytes = argc > 2 ? strtol(argv[2], NULL, 10) : 1;
    const int raw = argc > 3 && strcmp(argv[3], "pkt") == 0;
    const int eager = argc > 3 && strcmp(argv[3], "eager") == 0;
    if (eager)
        want_proto = TORX_PROTO_EAGER;
    if (n <= 0 || bytes < 0 || bytes > (eager ? EAGER_MAX : TORX_MSG_ONEPKT_MAX) ||
        (argc > 3 && !raw && !eager && strcmp(argv[3], "msg") != 0)) {
        fprintf(stderr, "usage: msg_onepkt_cg [N > 0] [BYTES 0..%d (eager: %d)] [msg|pkt|eager]\n",
                TORX_MSG_ONEPKT_MAX, EAGER_MAX);
        return 2;
    }
    torx_init_attr_t attr = {.boot = NULL, .mode = TORX_MODE_HEATER};
    torx_ctx_t *ctx;
    if (torx_init(&attr, &ctx) != TORX_OK) {
        fprintf(stderr, "msg_onepkt_cg: torx_init: %s\n", torx_last_error());
        return 1;
    }
    if (torx_size(ctx) != 1) {
        fprintf(stderr, "msg_onepkt_cg: run it alone (a singleton job), not under mpiexec\n");
        torx_finalize(ctx);
        return 1;
    }
    torx_register(ctx, HANDLER, cg_handler, NULL);
    static torx_msg_t msg;
    static uint8_t data[EAGER_MAX];
    memset(data, 0x42, sizeof data);
    const long got = raw ? pkt_loop(ctx, data, (size_t)bytes, n)
                         : onepkt_loop(ctx, &msg, data, (size_t)bytes, n);
    if (got != n || bad) {
        fprintf(stderr, "msg_onepkt_cg: sent %ld, received %ld%s: %s\n", n, got,
                bad ? " (a bad status or protocol)" : "", torx_last_error());
        torx_finalize(ctx);
        return 1;
    }
    printf("cg %s messages=%ld bytes=%ld received=%ld\n", raw ? "pkt" : eager ? "eager" : "msg", n,
           bytes, got);
    return torx_finalize(ctx) == TORX_OK ? 0 : 1;
}
