/* bgp_common.h: what the BG/P MPI suite's programs (bench/sim/bgp_*.c)
 * share: start-up, argument parsing, a global-interrupt barrier, hop
 * counts on a torus or mesh, a data sink, windowed streams, and the
 * reports the tasks send rank 0. Each program is an ordinary
 * message-layer program (docs/sim.md#running-a-program): torx_init with a
 * NULL boot, torx_wtime for time, so it runs under torx-sim and under
 * mpiexec on shm and ofi alike. */
#ifndef BGP_COMMON_H
#define BGP_COMMON_H

#include <torx/map.h>
#include <torx/msg.h>
#include <torx/packet.h>

#include "sim_round.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define BGP_H_DATA 1   /* stream and ping data, into the sink */
#define BGP_H_ACK 2    /* a one-packet "all received" or "go" */
#define BGP_H_REPORT 3 /* a task's results, to rank 0 */
#define BGP_MAXLIST 32
#define BGP_REPORT_MAX 16 /* doubles per report: 128 bytes, one packet */

typedef struct bgp {
    const char *prog;
    torx_ctx_t *ctx;
    int rank, size, tpn, mesh, modelled;
    const torx_map_t *map;
    char *sink; /* where every BGP_H_DATA message lands (contents unused) */
    size_t sink_len;
    volatile long got, acks, sent, reports;
    volatile int ev; /* set by every callback, for torx_wait */
    double got_at;   /* torx_wtime of the last BGP_H_DATA completion */
    double *report;  /* rank 0: size x BGP_REPORT_MAX */
    double wall0;
} bgp_t;

static inline double bgp_wall(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline double bgp_maxrss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

static inline int bgp_die(const bgp_t *b, const char *what)
{
    fprintf(stderr, "%s: rank %d: %s: %s\n", b->prog, b->rank, what, torx_last_error());
    return 1;
}

/* ---- arguments ----------------------------------------------------------- */

/* A byte count: decimal, optionally K, M or G (binary). -1 if bad. */
static inline long bgp_parse_size(const char *s)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || errno || v < 0)
        return -1;
    long mult = 1;
    if (*end == 'K' || *end == 'k')
        mult = 1L << 10, end++;
    else if (*end == 'M' || *end == 'm')
        mult = 1L << 20, end++;
    else if (*end == 'G' || *end == 'g')
        mult = 1L << 30, end++;
    if (*end || v > (1L << 40) / mult)
        return -1;
    return v * mult;
}

/* A comma-separated list of sizes; its count, or -1 after saying what was wrong. */
static inline int bgp_parse_sizes(const char *prog, const char *opt, const char *s, long *out)
{
    int n = 0;
    const char *p = s;
    char tok[64];
    while (*p) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof tok || n == BGP_MAXLIST) {
            fprintf(stderr,
                    "%s: %s: bad list '%s' (comma-separated sizes such as 0,1K,1M, at most %d)\n",
                    prog, opt, s, BGP_MAXLIST);
            return -1;
        }
        memcpy(tok, p, len);
        tok[len] = 0;
        if ((out[n++] = bgp_parse_size(tok)) < 0) {
            fprintf(stderr, "%s: %s: '%s' is not a size (bytes, optionally with K, M or G)\n", prog,
                    opt, tok);
            return -1;
        }
        p += len;
        if (*p == ',' && *++p == 0) {
            fprintf(stderr, "%s: %s: list '%s' ends with a comma\n", prog, opt, s);
            return -1;
        }
    }
    if (n == 0)
        fprintf(stderr, "%s: %s: empty list\n", prog, opt);
    return n ? n : -1;
}

/* A whole number in [lo, hi]; 0, or -1 after saying what was wrong. */
static inline int bgp_parse_long(const char *prog, const char *opt, const char *s, long lo, long hi,
                                 long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "%s: %s: '%s' is not a whole number from %ld to %ld\n", prog, opt, s, lo,
                hi);
        return -1;
    }
    *out = v;
    return 0;
}

/* ---- callbacks ----------------------------------------------------------- */

/* The streaming programs' arguments: --sizes LIST, --count N (messages per
 * stream, 1..2^20), --window W (in flight, 1..64); defaults set by the
 * caller. Non-zero after a message naming what is wrong. */
typedef struct bgp_stream_args {
    long sizes[BGP_MAXLIST], count, window;
    int nsizes;
} bgp_stream_args_t;

static inline int bgp_stream_args(const char *prog, int argc, char **argv, bgp_stream_args_t *a)
{
    for (int i = 1; i < argc; i += 2) {
        const char *o = argv[i];
        if (i + 1 >= argc ||
            (strcmp(o, "--sizes") && strcmp(o, "--count") && strcmp(o, "--window"))) {
            fprintf(stderr,
                    "%s: bad argument '%s'\nusage: %s [--sizes LIST] [--count N] [--window W]\n",
                    prog, o, prog);
            return 2;
        }
        if (!strcmp(o, "--sizes") &&
            (a->nsizes = bgp_parse_sizes(prog, o, argv[i + 1], a->sizes)) < 0)
            return 2;
        if (!strcmp(o, "--count") && bgp_parse_long(prog, o, argv[i + 1], 1, 1 << 20, &a->count))
            return 2;
        if (!strcmp(o, "--window") && bgp_parse_long(prog, o, argv[i + 1], 1, 64, &a->window))
            return 2;
    }
    return 0;
}

static inline void bgp_got_done(torx_ctx_t *ctx, void *arg, torx_status_t st, size_t n)
{
    (void)n;
    bgp_t *b = arg;
    b->got += st == TORX_OK ? 1 : 1L << 40; /* a failure ends every wait */
    b->got_at = torx_wtime(ctx);
    b->ev = 1;
}

static inline void bgp_on_data(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                               torx_recv_t *recv)
{
    (void)ctx;
    bgp_t *b = harg;
    const size_t len = info->data_len < b->sink_len ? info->data_len : b->sink_len;
    *recv = (torx_recv_t){.buf = b->sink, .len = len, .done = bgp_got_done, .arg = b};
}

static inline void bgp_ack_done(torx_ctx_t *ctx, void *arg, torx_status_t st, size_t n)
{
    (void)ctx, (void)st, (void)n;
    bgp_t *b = arg;
    b->acks++;
    b->ev = 1;
}

static inline void bgp_on_ack(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                              torx_recv_t *recv)
{
    (void)ctx, (void)info;
    *recv = (torx_recv_t){.buf = NULL, .done = bgp_ack_done, .arg = harg};
}

static inline void bgp_report_done(torx_ctx_t *ctx, void *arg, torx_status_t st, size_t n)
{
    (void)ctx, (void)st, (void)n;
    bgp_t *b = arg;
    b->reports++;
    b->ev = 1;
}

static inline void bgp_on_report(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                                 torx_recv_t *recv)
{
    (void)ctx;
    bgp_t *b = harg;
    *recv = (torx_recv_t){.buf = b->report + (size_t)info->src * BGP_REPORT_MAX,
                          .len = BGP_REPORT_MAX * sizeof(double),
                          .done = bgp_report_done,
                          .arg = b};
}

static inline void bgp_sent_done(torx_ctx_t *ctx, torx_msg_t *msg, void *arg)
{
    (void)ctx, (void)msg;
    bgp_t *b = arg;
    b->sent++;
    b->ev = 1;
}

/* ---- start, barrier, waits ----------------------------------------------- */

/* torx_init and the handlers; the sink holds the largest of the nsizes
 * message sizes this task takes. */
static inline int bgp_start(bgp_t *b, const char *prog, const long *sizes, int nsizes)
{
    long sink_len = 1;
    for (int i = 0; i < nsizes; i++)
        sink_len = sizes[i] > sink_len ? sizes[i] : sink_len;
    memset(b, 0, sizeof *b);
    b->prog = prog;
    b->wall0 = bgp_wall();
    if (torx_init(NULL, &b->ctx) != TORX_OK)
        return bgp_die(b, "torx_init");
    b->rank = torx_rank(b->ctx);
    b->size = torx_size(b->ctx);
    b->tpn = torx_tasks_per_node(b->ctx);
    b->map = torx_ctx_map(b->ctx);
    b->modelled = !strcmp(torx_pkt_device_name(torx_ctx_device(b->ctx)), "sim");
    const char *mesh = getenv("TORX_SIM_MESH");
    b->mesh = b->modelled && mesh && !strcmp(mesh, "1");
    b->sink_len = (size_t)sink_len;
    b->sink = malloc(b->sink_len);
    if (b->rank == 0)
        b->report = calloc((size_t)b->size * BGP_REPORT_MAX, sizeof(double));
    if (!b->sink || (b->rank == 0 && !b->report))
        return bgp_die(b, "out of memory");
    memset(b->sink, 0, b->sink_len);
    torx_register(b->ctx, BGP_H_DATA, bgp_on_data, b);
    torx_register(b->ctx, BGP_H_ACK, bgp_on_ack, b);
    torx_register(b->ctx, BGP_H_REPORT, bgp_on_report, b);
    return 0;
}

static inline int bgp_finish(bgp_t *b)
{
    free(b->sink);
    free(b->report);
    if (torx_finalize(b->ctx) != TORX_OK)
        return bgp_die(b, "torx_finalize");
    return 0;
}

/* Every task, on the global interrupt, advancing meanwhile. */
/* Whether the job has min tasks at least; if not, rank 0 says so and the
 * job ends (2). */
static inline int bgp_needs_tasks(bgp_t *b, int min)
{
    if (b->size >= min)
        return 0;
    if (b->rank == 0)
        fprintf(stderr, "%s: needs %d tasks at least (it has %d)\n", b->prog, min, b->size);
    bgp_finish(b);
    return 2;
}

static inline int bgp_barrier(bgp_t *b)
{
    torx_pkt_dev_t *dev = torx_ctx_device(b->ctx);
    torx_status_t rc = torx_gi_arm(dev);
    if (rc != TORX_OK || (rc = sim_round_wait(b->ctx, NULL)) != TORX_OK)
        return bgp_die(b, "barrier");
    return 0;
}

/* Advances until *counter >= want. */
static inline int bgp_wait_for(bgp_t *b, volatile long *counter, long want, const char *what)
{
    while (*counter < want) {
        b->ev = 0;
        if (*counter >= want)
            break;
        if (torx_wait(b->ctx, &b->ev) != TORX_OK)
            return bgp_die(b, what);
        if (b->got >= 1L << 40) {
            fprintf(stderr, "%s: rank %d: %s: a receive failed\n", b->prog, b->rank, what);
            return 1;
        }
    }
    return 0;
}

/* Sends len bytes to dest with handler and waits until the send is done. */
static inline int bgp_send_wait(bgp_t *b, int dest, int handler, const void *data, size_t len)
{
    torx_msg_t msg;
    const long before = b->sent;
    if (torx_send(b->ctx, &msg, dest, handler, NULL, 0, data, len, TORX_PROTO_AUTO, bgp_sent_done,
                  b) != TORX_OK)
        return bgp_die(b, "send");
    return bgp_wait_for(b, &b->sent, before + 1, "send");
}

/* count messages of len bytes to each of ndest ranks, at most window in
 * flight per destination, round robin; returns once every send is done. */
static inline int bgp_stream(bgp_t *b, const int *dest, int ndest, const char *data, size_t len,
                             long count, int window)
{
    torx_msg_t *msg = calloc((size_t)ndest * (size_t)window, sizeof *msg);
    long *posted = calloc((size_t)ndest, sizeof *posted);
    if (!msg || !posted)
        return bgp_die(b, "out of memory");
    const long base = b->sent, total = count * ndest;
    long nposted = 0;
    while (nposted < total || b->sent < base + total) {
        int progress = 0;
        for (int d = 0; d < ndest; d++)
            for (int w = 0; w < window && posted[d] < count; w++) {
                torx_msg_t *m = &msg[(size_t)d * (size_t)window + (size_t)w];
                if (torx_msg_pending(m))
                    continue;
                if (torx_send(b->ctx, m, dest[d], BGP_H_DATA, NULL, 0, data, len, TORX_PROTO_AUTO,
                              bgp_sent_done, b) != TORX_OK)
                    return bgp_die(b, "stream send");
                posted[d]++;
                nposted++;
                progress = 1;
            }
        if (progress)
            continue;
        b->ev = 0;
        if (torx_wait(b->ctx, &b->ev) != TORX_OK)
            return bgp_die(b, "stream");
    }
    free(msg);
    free(posted);
    return 0;
}

/* Sends rank 0 n doubles (rank 0 stores its own). */
static inline int bgp_report(bgp_t *b, const double *v, int n)
{
    double buf[BGP_REPORT_MAX] = {0};
    memcpy(buf, v, (size_t)n * sizeof *v);
    if (b->rank == 0) {
        memcpy(b->report, buf, sizeof buf);
        b->reports++;
        return 0;
    }
    return bgp_send_wait(b, 0, BGP_H_REPORT, buf, sizeof buf);
}

/* ---- the torus ------------------------------------------------------------- */

static inline unsigned bgp_ring(const bgp_t *b, unsigned a, unsigned c, unsigned n)
{
    const unsigned d = a > c ? a - c : c - a;
    return b->mesh || d <= n - d ? d : n - d;
}

/* Hops between the nodes of ranks r and s: each dimension the shorter way
 * round on a torus, straight across on a mesh (TORX_SIM_MESH). */
static inline unsigned bgp_hops(const bgp_t *b, int r, int s)
{
    const torx_coord_t p = torx_map_coord(b->map, r), q = torx_map_coord(b->map, s);
    const torx_shape_t sh = b->map->shape;
    return bgp_ring(b, p.x, q.x, sh.x) + bgp_ring(b, p.y, q.y, sh.y) + bgp_ring(b, p.z, q.z, sh.z);
}

/* The rank at (x, y, z, t), or -1 (off the shape, or no task there). */
static inline int bgp_rank_at(const bgp_t *b, int x, int y, int z, int t)
{
    const torx_shape_t sh = b->map->shape;
    if (x < 0 || y < 0 || z < 0 || t < 0 || x >= (int)sh.x || y >= (int)sh.y || z >= (int)sh.z ||
        t >= (int)sh.t)
        return -1;
    const torx_coord_t c = {(uint8_t)x, (uint8_t)y, (uint8_t)z, (uint8_t)t};
    return torx_map_rank(b->map, c);
}

/* "8x8x8" (a torus) or "4x4x2-mesh", for the reports. */
static inline const char *bgp_shape_str(const bgp_t *b, char *buf, size_t n)
{
    const torx_shape_t sh = b->map->shape;
    snprintf(buf, n, "%ux%ux%u%s", sh.x, sh.y, sh.z, b->mesh ? "-mesh" : "");
    return buf;
}

#endif /* BGP_COMMON_H */
