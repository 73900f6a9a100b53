/* sim_links: bandwidth of bidirectional torus links through the torx
 * message layer, per protocol and message size: the original's Fig 4(b)
 * (one bidirectional link against message size) and Fig 4(c)-(f) (1 to 6
 * bidirectional links at once: a node exchanging with that many of its
 * torus neighbours). A message-layer program: it runs under torx-sim
 * (simulated time) and under mpiexec on shm or ofi.
 *
 *   sim_links [--protos LIST] [--sizes LIST] [--links LIST] [--bytes N]
 *             [--window N]
 *
 * LIST is comma-separated: protocols auto, onepkt, eager, adaptive, rzv;
 * sizes in bytes; links 1..6, the neighbours of rank 0's node taken in the
 * order +x, -x, +y, -y, +z, -z. For each (protocol, size, links) rank 0 and
 * each of its partners stream messages to each other at once: each side
 * sends msgs = N / size messages (at least 4, at most 4096; N is --bytes,
 * default 2 MiB) with up to --window sends outstanding per partner
 * (default 8), and each partner reports when it has received everything.
 * Rank 0 times from its go to the last partner's report and prints
 *   links proto=eager mode=co bytes=65536 links=2 msgs=32 window=8 us=...
 *         mbps=...
 * mbps: the bytes rank 0 sent and received, per microsecond (decimal MB/s,
 * as the link's 175 MB/s), both directions of every link together. Ranks
 * other than 0 and its partners wait. Times come from torx_wtime:
 * simulated on sim, the monotonic clock elsewhere. */
#include <torx/map.h>
#include <torx/msg.h>

#include "sim_args.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define H_DATA 1
#define H_CTRL 2
#define H_FIN 3
#define MAXLIST 64
#define MAXLINKS 6
#define MAXWINDOW 256
#define MSGS_MIN 4
#define MSGS_MAX 4096

typedef struct state state_t;

/* One side of a link as this task sees it: what it sends to peer, and
 * what it has received from it. */
typedef struct link {
    state_t *s;
    int peer;
    char *in; /* receive buffer: every message overwrites it */
    long sent, done, got, failed;
    torx_msg_t *msgs; /* window slots */
    int *free_slot, nfree;
} link_t;

struct state {
    torx_ctx_t *ctx;
    char *out; /* the data every send reads */
    size_t len;
    int window;
    link_t link[MAXLINKS];
    int nlinks;
    volatile int ev;   /* set by every callback, for torx_wait */
    volatile int ctrl; /* a control message came (partners) */
    int ctrl_msg[4];   /* proto, size, msgs, window; proto -1: done */
    volatile int fins; /* partners finished (rank 0) */
};

static link_t *link_of(state_t *s, int rank)
{
    for (int i = 0; i < s->nlinks; i++)
        if (s->link[i].peer == rank)
            return &s->link[i];
    return NULL;
}

static void got_done(torx_ctx_t *ctx, void *arg, torx_status_t st, size_t n)
{
    (void)ctx, (void)n;
    link_t *l = arg;
    if (st == TORX_OK)
        l->got++;
    else
        l->failed++;
    l->s->ev = 1;
}

static void on_data(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info, torx_recv_t *recv)
{
    (void)ctx;
    state_t *s = harg;
    link_t *l = link_of(s, info->src);
    if (!l || info->data_len > s->len) {
        fprintf(stderr, "sim_links: %zu unexpected bytes from rank %d\n", info->data_len,
                info->src);
        exit(1);
    }
    *recv = (torx_recv_t){.buf = l->in, .len = info->data_len, .done = got_done, .arg = l};
}

static void links_reset(state_t *s)
{
    for (int i = 0; i < s->nlinks; i++) {
        link_t *l = &s->link[i];
        l->sent = l->done = l->got = l->failed = 0;
        l->nfree = s->window;
        for (int k = 0; k < s->window; k++)
            l->free_slot[k] = k;
    }
}

/* Control and finish messages are one packet: their data is here already.
 * A partner starts its round here, not after its wait returns: rank 0's
 * data follows the control message at once, and the same advance may
 * complete some of it. */
static void on_ctrl(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info, torx_recv_t *recv)
{
    (void)ctx;
    state_t *s = harg;
    memcpy(s->ctrl_msg, info->data, sizeof s->ctrl_msg);
    recv->buf = NULL;
    if (s->ctrl_msg[0] >= 0 && s->link[0].in) {
        s->len = (size_t)s->ctrl_msg[1];
        s->window = s->ctrl_msg[3];
        s->nlinks = 1;
        links_reset(s);
    }
    s->ctrl = 1;
    s->ev = 1;
}

static void on_fin(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info, torx_recv_t *recv)
{
    (void)ctx, (void)info;
    state_t *s = harg;
    recv->buf = NULL;
    s->fins++;
    s->ev = 1;
}

static void sent_done(torx_ctx_t *ctx, torx_msg_t *msg, void *arg)
{
    (void)ctx;
    link_t *l = arg;
    if (torx_msg_status(msg) != TORX_OK)
        l->failed++;
    l->free_slot[l->nfree++] = (int)(msg - l->msgs);
    l->done++;
    l->s->ev = 1;
}

static int die(const char *what)
{
    fprintf(stderr, "sim_links: %s: %s\n", what, torx_last_error());
    return 1;
}

static const char *const mode_names[] = {"heater", "co", "vn"};

/* The distinct torus neighbours of rank's node, +x, -x, +y, -y, +z, -z
 * (an extent of 2 has one neighbour, of 1 none); returns how many. */
static int neighbours(const torx_ctx_t *ctx, int rank, int out[MAXLINKS])
{
    const torx_map_t *map = torx_ctx_map(ctx);
    const torx_coord_t me = torx_map_coord(map, rank);
    int n = 0;
    for (int d = 0; d < 3; d++) {
        const unsigned ext = d == 0 ? map->shape.x : d == 1 ? map->shape.y : map->shape.z;
        for (int dir = 1; dir >= -1; dir -= 2) {
            if (ext < 2 || (ext == 2 && dir < 0))
                continue;
            torx_coord_t c = me;
            uint8_t *f = d == 0 ? &c.x : d == 1 ? &c.y : &c.z;
            *f = (uint8_t)((*f + ext + (unsigned)dir) % ext);
            const int peer = torx_map_rank(map, c);
            if (peer >= 0 && peer != rank)
                out[n++] = peer;
        }
    }
    return n;
}

/* Streams msgs messages of s->len bytes to every link's peer, and waits
 * until they are sent and msgs have come from every peer. */
static int stream(state_t *s, torx_protocol_t proto, long msgs)
{
    for (;;) {
        int busy = 0;
        for (int i = 0; i < s->nlinks; i++) {
            link_t *l = &s->link[i];
            while (l->sent < msgs && l->nfree > 0) {
                torx_msg_t *m = &l->msgs[l->free_slot[--l->nfree]];
                if (torx_send(s->ctx, m, l->peer, H_DATA, NULL, 0, s->out, s->len, proto, sent_done,
                              l) != TORX_OK)
                    return -1;
                l->sent++;
            }
            if (l->failed)
                return -1;
            busy |= l->done < msgs || l->got < msgs;
        }
        if (!busy)
            return 0;
        s->ev = 0;
        if (torx_wait(s->ctx, &s->ev) != TORX_OK)
            return -1;
    }
}

static int send_small(state_t *s, int dest, int handler, const void *data, size_t len)
{
    torx_msg_t msg;
    if (torx_send(s->ctx, &msg, dest, handler, NULL, 0, data, len, TORX_PROTO_ONEPKT, NULL, NULL) !=
        TORX_OK)
        return -1;
    while (torx_msg_pending(&msg))
        if (torx_advance(s->ctx) < 0)
            return -1;
    return torx_msg_status(&msg) == TORX_OK ? 0 : -1;
}

static int wait_until(state_t *s, volatile int *what, int want)
{
    while (*what < want) {
        s->ev = 0;
        if (torx_wait(s->ctx, &s->ev) != TORX_OK)
            return -1;
    }
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: sim_links [--protos LIST] [--sizes LIST] [--links LIST] [--bytes N] "
                    "[--window N]\n");
}

int main(int argc, char **argv)
{
    long protos[MAXLIST] = {0}, sizes[MAXLIST] = {65536}, links[MAXLIST] = {1};
    int nprotos = 1, nsizes = 1, nlinks = 1;
    long bytes = 2 << 20, window = 8;
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc) {
            usage();
            return 2;
        }
        const char *opt = argv[i], *v = argv[i + 1];
        int bad = 0;
        char *end;
        if (!strcmp(opt, "--protos")) {
            bad = (nprotos = sim_parse_list("sim_links", v, protos, MAXLIST, "protocol", 0, 4)) < 0;
        } else if (!strcmp(opt, "--sizes")) {
            bad =
                (nsizes = sim_parse_list("sim_links", v, sizes, MAXLIST, "size", 0, 1L << 30)) < 0;
        } else if (!strcmp(opt, "--links")) {
            bad = (nlinks = sim_parse_list("sim_links", v, links, MAXLIST, "link count", 1,
                                           MAXLINKS)) < 0;
        } else if (!strcmp(opt, "--bytes")) {
            bytes = strtol(v, &end, 10);
            if (*end || bytes < 1 || bytes > (1L << 34)) {
                fprintf(stderr, "sim_links: bad --bytes '%s' (1 to 2^34)\n", v);
                bad = 1;
            }
        } else if (!strcmp(opt, "--window")) {
            window = strtol(v, &end, 10);
            if (*end || window < 1 || window > MAXWINDOW) {
                fprintf(stderr, "sim_links: bad --window '%s' (1 to %d)\n", v, MAXWINDOW);
                bad = 1;
            }
        } else {
            fprintf(stderr, "sim_links: unknown option '%s'\n", opt);
            usage();
            return 2;
        }
        if (bad)
            return 2;
    }
    long maxsize = 1, maxlinks = 1;
    for (int i = 0; i < nsizes; i++)
        maxsize = sizes[i] > maxsize ? sizes[i] : maxsize;
    for (int i = 0; i < nlinks; i++)
        maxlinks = links[i] > maxlinks ? links[i] : maxlinks;

    state_t s = {.len = (size_t)maxsize, .window = (int)window};
    if (torx_init(NULL, &s.ctx) != TORX_OK)
        return die("torx_init");
    const int rank = torx_rank(s.ctx), size = torx_size(s.ctx);
    int nb[MAXLINKS];
    const int nnb = neighbours(s.ctx, 0, nb);
    if (nnb < maxlinks) {
        if (rank == 0)
            fprintf(stderr,
                    "sim_links: %ld links asked for, but rank 0's node has %d distinct torus "
                    "neighbours (the torus is %ux%ux%u)\n",
                    maxlinks, nnb, torx_ctx_map(s.ctx)->shape.x, torx_ctx_map(s.ctx)->shape.y,
                    torx_ctx_map(s.ctx)->shape.z);
        torx_finalize(s.ctx);
        return 2;
    }
    s.out = calloc(1, s.len);
    if (!s.out)
        return die("out of memory");
    /* rank 0 has a link to each partner; a partner one to rank 0 */
    int mine = 0;
    for (int i = 0; i < maxlinks; i++)
        mine |= nb[i] == rank;
    const int slots = rank == 0 ? (int)maxlinks : mine ? 1 : 0;
    for (int i = 0; i < slots; i++) {
        link_t *l = &s.link[i];
        l->s = &s;
        l->peer = rank == 0 ? nb[i] : 0;
        l->in = malloc(s.len);
        l->msgs = calloc((size_t)window, sizeof *l->msgs);
        l->free_slot = calloc((size_t)window, sizeof *l->free_slot);
        if (!l->in || !l->msgs || !l->free_slot)
            return die("out of memory");
    }
    torx_register(s.ctx, H_DATA, on_data, &s);
    torx_register(s.ctx, H_CTRL, on_ctrl, &s);
    torx_register(s.ctx, H_FIN, on_fin, &s);
    int rc = 0;

    if (rank == 0) {
        for (int p = 0; p < nprotos; p++) {
            for (int z = 0; z < nsizes; z++) {
                for (int k = 0; k < nlinks; k++) {
                    const size_t len = (size_t)sizes[z];
                    long msgs = len ? bytes / (long)len : MSGS_MAX;
                    msgs = msgs < MSGS_MIN ? MSGS_MIN : msgs > MSGS_MAX ? MSGS_MAX : msgs;
                    s.len = len;
                    s.nlinks = (int)links[k];
                    links_reset(&s);
                    s.fins = 0;
                    const int ctrl[4] = {(int)protos[p], (int)len, (int)msgs, (int)window};
                    const double t0 = torx_wtime(s.ctx);
                    for (int i = 0; i < s.nlinks; i++)
                        if (send_small(&s, s.link[i].peer, H_CTRL, ctrl, sizeof ctrl))
                            return die("control message");
                    if (stream(&s, sim_proto_ids[protos[p]], msgs) ||
                        wait_until(&s, &s.fins, s.nlinks))
                        return die("stream");
                    const double us = (torx_wtime(s.ctx) - t0) * 1e6;
                    const double moved = 2.0 * (double)s.nlinks * (double)msgs * (double)len;
                    printf("links proto=%s mode=%s bytes=%zu links=%d msgs=%ld window=%ld "
                           "us=%.3f mbps=%.3f\n",
                           sim_proto_names[protos[p]], mode_names[torx_mode(s.ctx)], len, s.nlinks,
                           msgs, window, us, moved / us);
                    fflush(stdout);
                }
            }
        }
        const int done[4] = {-1, 0, 0, 0};
        for (int r = 1; r < size; r++)
            if (send_small(&s, r, H_CTRL, done, sizeof done))
                return die("control message");
    } else {
        for (;;) {
            s.ctrl = 0;
            if (torx_wait(s.ctx, &s.ctrl) != TORX_OK)
                return die("wait");
            if (s.ctrl_msg[0] < 0)
                break;
            if (!mine) {
                fprintf(stderr, "sim_links: rank %d is not a partner of rank 0\n", rank);
                return 1;
            }
            if (stream(&s, sim_proto_ids[s.ctrl_msg[0]], s.ctrl_msg[2]))
                return die("stream");
            const int fin = 1;
            if (send_small(&s, 0, H_FIN, &fin, sizeof fin))
                return die("finish message");
        }
    }
    for (int i = 0; i < slots; i++) {
        free(s.link[i].in);
        free(s.link[i].msgs);
        free(s.link[i].free_slot);
    }
    free(s.out);
    if (torx_finalize(s.ctx) != TORX_OK)
        return die("torx_finalize");
    return rc;
}
