/* msg_hello: rank 0 greets rank 1 over the torx message layer; rank 1 replies. */
#include <torx/msg.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HELLO 1 /* handler id */

typedef struct inbox {
    char hdr[TORX_MSG_MAX_HDR + 1], text[64]; /* hdr: a copy, info->hdr dies with the handler */
    volatile int src, got, sent;              /* set by the handler and the callbacks */
} inbox_t;

static void received(torx_ctx_t *ctx, void *arg, torx_status_t status, size_t len)
{
    (void)ctx, (void)len;
    ((inbox_t *)arg)->got = status == TORX_OK ? 1 : -1;
}

/* Runs at the message's first packet: keep the header, say where data goes. */
static void on_hello(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info, torx_recv_t *recv)
{
    inbox_t *in = harg;
    (void)ctx;
    in->src = info->src;
    snprintf(in->hdr, sizeof in->hdr, "%.*s", (int)info->hdr_len, (const char *)info->hdr);
    *recv = (torx_recv_t){.buf = in->text, .len = sizeof in->text - 1, .done = received, .arg = in};
}

static void sent(torx_ctx_t *ctx, torx_msg_t *msg, void *arg)
{
    (void)ctx, (void)msg;
    ((inbox_t *)arg)->sent = 1;
}

static int fail(void)
{
    fprintf(stderr, "msg_hello: %s\n", torx_last_error());
    return 1;
}

static int task(torx_boot_t *boot, void *arg)
{
    const torx_init_attr_t attr = {.boot = boot, .mode = -1}; /* boot NULL: PMI */
    torx_ctx_t *ctx;
    inbox_t in = {.src = -1};
    (void)arg;
    if (torx_init(&attr, &ctx) != TORX_OK)
        return fail();
    int rank = torx_rank(ctx), rc = 0;
    torx_register(ctx, HELLO, on_hello, &in); /* handlers run only when we advance */
    if (rank < 2) { /* further ranks only take part in init and finalize */
        const char *hdr = rank ? "reply" : "greeting", *text = rank ? "hello back" : "hello";
        torx_msg_t msg; /* ours; must stay in place until sent() has run */
        if (rank == 1)
            torx_wait(ctx, &in.got); /* the greeting first */
        if (torx_send(ctx, &msg, 1 - rank, HELLO, hdr, strlen(hdr), text, strlen(text) + 1,
                      TORX_PROTO_AUTO, sent, &in) != TORX_OK) {
            rc = fail(); /* e.g. a job of one task: there is no rank 1 */
        } else {
            torx_wait(ctx, &in.sent);
            if (rank == 0)
                torx_wait(ctx, &in.got); /* the reply */
            printf("rank %d: %s from rank %d: %s\n", rank, in.hdr, in.src, in.text);
            rc = in.got != 1;
        }
    }
    return torx_finalize(ctx) == TORX_OK ? rc : fail();
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--fork") == 0)
        return torx_boot_fork_run(atoi(argv[2]), task, NULL, 60.0, 1) == 0 ? 0 : fail();
    if (argc == 1)
        return task(NULL, NULL);
    fprintf(stderr, "usage: msg_hello [--fork NTASKS]   (without --fork: under mpiexec)\n");
    return 2;
}
