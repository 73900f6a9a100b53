/* sim_linkcheck: the traffic patterns of bench/sim/sim_flowcheck.c on the
 * sim device's own torus link model, through torx's packet layer, to check
 * that model against SimGrid's flow model CM02
 * (docs/sim.md#checked-against-simgrids-flow-model). A packet-layer program
 * for torx-sim, one task per node (heater mode):
 *
 *   torx-sim --torus XxYxZ --machine M sim_linkcheck --pattern P --bytes S [--hops H]
 *            [--late]
 *
 * The patterns are those of bench/sim/flowcheck_patterns.h. A message of S
 * bytes is ceil(S / 240) deterministic packets (dimension-ordered, as
 * SimGrid's torus routes). After a global-interrupt barrier every task
 * injects its messages' packets round robin, one packet of each message in
 * turn, so that its messages share its links as flows would; when the
 * injection FIFO is full it reads what has arrived and retries. The time of
 * a message is from the barrier to its last packet read. With --late a
 * task reads nothing until every task has injected everything (a second
 * barrier): every packet of the pattern is then in flight at once, for
 * measuring what packets in flight cost the model (the times are then
 * meaningless).
 *
 * Measure the network alone with a machine whose processor costs are zero
 * but cpu_poll_empty's (bench/sim/run-sim-bench.sh flowcheck writes one):
 * then a packet costs no core time to inject or read, and the only core
 * time is the empty polls of a sender that waits for room in its FIFO.
 *
 * Rank 0 prints one line:
 *   linkcheck pattern=P bytes=S hops=H msgs=M packets=N time_us=T
 *             flow0_us=.. flow1_us=.. start_spread_ns=D no_room=F waits=W
 *             wall_s=W maxrss_mib=R
 * flowK_us for the flows of share and line; start_spread_ns: how far apart
 * the tasks left the barrier (0 when they all start together); no_room:
 * injections refused for a full FIFO, waits: torx_pkt_wait calls, summed
 * over the tasks. */
#include <torx/map.h>
#include <torx/packet.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "flowcheck_patterns.h"

#define PS 1e12 /* results travel as whole picoseconds on the collective network */

typedef struct out_msg {
    int index; /* in the plan */
    torx_coord_t to;
    long left; /* bytes not yet injected */
} out_msg_t;

static int die(int rank, const char *what)
{
    fprintf(stderr, "sim_linkcheck: rank %d: %s: %s\n", rank, what, torx_last_error());
    return 1;
}

static double wall(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static torx_status_t barrier(torx_pkt_dev_t *dev)
{
    torx_status_t rc = torx_gi_arm(dev);
    if (rc != TORX_OK)
        return rc;
    while ((rc = torx_gi_poll(dev)) == TORX_AGAIN)
        torx_pkt_wait(dev, 100); /* exact: wakes when the round completes */
    return rc;
}

/* op (MAX or ADD) over every task of lanes[0..31] (64-bit). */
static torx_status_t allreduce(torx_pkt_dev_t *dev, torx_cn_op_t op, uint64_t lanes[32])
{
    torx_status_t rc = torx_cn_inject(dev, op, TORX_CN_U64, 0, lanes);
    if (rc != TORX_OK)
        return rc;
    while ((rc = torx_cn_read(dev, lanes)) == TORX_AGAIN)
        torx_pkt_wait(dev, 100);
    return rc;
}

/* What a task has received: packets, and when messages ended. */
typedef struct rx {
    long got;
    double last_end;      /* the latest message end */
    double named_end[30]; /* the ends of the pattern's named messages */
} rx_t;

/* Reads every packet that has arrived: the message it ends, if any, is
 * done now. */
static void drain(torx_pkt_dev_t *dev, int nnamed, rx_t *rx)
{
    const torx_pkt_hdr_t *p;
    while ((p = torx_pkt_peek(dev))) {
        uint32_t msg, last;
        memcpy(&msg, p->sw, 4);
        memcpy(&last, p->sw + 4, 4);
        if (last) {
            const double now = torx_pkt_wtime(dev);
            if (now > rx->last_end)
                rx->last_end = now;
            if (msg < (uint32_t)nnamed)
                rx->named_end[msg] = now;
        }
        rx->got++;
        torx_pkt_consume(dev);
    }
}

static long packets_of(long bytes)
{
    return (bytes + TORX_PKT_MAX_PAYLOAD - 1) / TORX_PKT_MAX_PAYLOAD;
}

/* The arguments; 0, or -1 with the reason in why. */
static int parse_args(int argc, char **argv, const char **pattern, long *bytes, long *hops,
                      int *late, char *why, size_t whylen)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--late")) {
            *late = 1;
            continue;
        }
        if (i + 1 >= argc) {
            snprintf(why, whylen, "%s without its value", argv[i]);
            return -1;
        }
        const char *opt = argv[i], *val = argv[++i];
        if (!strcmp(opt, "--pattern")) {
            *pattern = val;
        } else if (!strcmp(opt, "--bytes") || !strcmp(opt, "--hops")) {
            const long v = fc_parse_count(val);
            if (v < 1) {
                snprintf(why, whylen, "%s \"%s\" is not a whole number from 1 to 2147483647", opt,
                         val);
                return -1;
            }
            *(opt[2] == 'b' ? bytes : hops) = v;
        } else {
            snprintf(why, whylen, "unknown option %s", opt);
            return -1;
        }
    }
    if (!*pattern || *bytes < 0) {
        snprintf(why, whylen, "--pattern and --bytes are required");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const double wall0 = wall();
    const char *pattern = NULL;
    long bytes = -1, hops = 1;
    int late = 0;
    char why[200];
    const int bad_args = parse_args(argc, argv, &pattern, &bytes, &hops, &late, why, sizeof why);

    torx_boot_t boot;
    if (torx_boot_pmi_init(&boot) != TORX_OK)
        return die(-1, "bootstrap");
    const int rank = boot.rank;
    /* every task finds the same mistakes: rank 0 names them */
    if (bad_args) {
        if (rank == 0)
            fprintf(stderr,
                    "sim_linkcheck: %s\nusage: sim_linkcheck --pattern "
                    "hops|share|fanout|alltoall|line|stream --bytes S [--hops H] [--late]\n",
                    why);
        return 2;
    }
    torx_map_t map;
    if (torx_map_from_env(boot.size, 1, &map) != TORX_OK)
        return die(rank, "map");
    const unsigned d[3] = {map.shape.x, map.shape.y, map.shape.z};
    if ((unsigned)boot.size != d[0] * d[1] * d[2]) {
        if (rank == 0)
            fprintf(stderr,
                    "sim_linkcheck: %d tasks on %ux%ux%u nodes: run one task per node "
                    "(torx-sim --mode heater)\n",
                    boot.size, d[0], d[1], d[2]);
        return 2;
    }
    fc_plan_t plan;
    const char *mesh = getenv("TORX_SIM_MESH");
    if (fc_plan(pattern, d, !(mesh && !strcmp(mesh, "1")), bytes, hops, rank, &plan, why,
                sizeof why) != 0) {
        if (rank == 0)
            fprintf(stderr, "sim_linkcheck: %s\n", why);
        return 2;
    }
    const torx_pkt_attr_t attr = {
        .boot = &boot, .shape = map.shape, .self = torx_map_coord(&map, rank)};
    torx_pkt_dev_t *dev;
    if (torx_pkt_open(&attr, &dev) != TORX_OK)
        return die(rank, "torx_pkt_open");

    /* this task's messages, and the packets it expects */
    out_msg_t *out = calloc((size_t)plan.nmsgs + 1, sizeof *out);
    if (!out)
        return die(rank, "out of memory");
    int nout = 0;
    long expect = 0;
    for (int m = 0; m < plan.nmsgs; m++) {
        const fc_msg_t *g = &plan.msgs[m];
        if (g->src == rank)
            out[nout++] = (out_msg_t){g->index, torx_map_coord(&map, g->dst), g->bytes};
        if (g->dst == rank)
            expect += packets_of(g->bytes);
    }
    rx_t rx = {0};
    uint64_t no_room = 0, waits = 0;

    if (barrier(dev) != TORX_OK)
        return die(rank, "barrier");
    const double t0 = torx_pkt_wtime(dev);
    static const char payload[TORX_PKT_MAX_PAYLOAD];
    int live = nout, at = 0;
    while (live) {
        out_msg_t *o = &out[at];
        const long len = o->left < TORX_PKT_MAX_PAYLOAD ? o->left : TORX_PKT_MAX_PAYLOAD;
        torx_pkt_hdr_t h;
        torx_pkt_hdr_init(&h, o->to, 0);
        const uint32_t msg = (uint32_t)o->index, last = o->left == len;
        memcpy(h.sw, &msg, 4);
        memcpy(h.sw + 4, &last, 4);
        const torx_status_t rc = torx_pkt_inject1(dev, &h, payload, (size_t)len);
        if (rc == TORX_NO_ROOM) { /* the empty poll it cost lets time pass */
            no_room++;
            if (!late)
                drain(dev, plan.nnamed, &rx);
            continue;
        }
        if (rc != TORX_OK)
            return die(rank, "inject");
        if ((o->left -= len) == 0)
            out[at] = out[--live]; /* its slot takes the last live message */
        else
            at++;
        if (at >= live)
            at = 0;
    }
    if (late) {
        if (barrier(dev) != TORX_OK)
            return die(rank, "barrier");
    }
    while (rx.got < expect) {
        drain(dev, plan.nnamed, &rx);
        if (rx.got < expect) {
            waits++;
            torx_pkt_wait(dev, 100);
        }
    }

    /* lanes: 0 latest start, 1 earliest start (as its complement), 2 latest
     * end, 3.. the named flows' ends */
    uint64_t lanes[32] = {0};
    lanes[0] = (uint64_t)(t0 * PS);
    lanes[1] = UINT64_MAX - (uint64_t)(t0 * PS);
    lanes[2] = (uint64_t)(rx.last_end * PS);
    for (int k = 0; k < plan.nnamed; k++)
        lanes[3 + k] = (uint64_t)(rx.named_end[k] * PS);
    if (allreduce(dev, TORX_CN_MAX, lanes) != TORX_OK)
        return die(rank, "result reduction");
    /* what the run cost: packet-layer calls that did no work */
    uint64_t counts[32] = {no_room, waits};
    if (allreduce(dev, TORX_CN_ADD, counts) != TORX_OK)
        return die(rank, "count reduction");
    const double start = (double)(UINT64_MAX - lanes[1]) / PS;
    /* every message of the pattern has the same size */
    const long packets = (long)plan.total * packets_of(bytes);
    if (rank == 0) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        printf("linkcheck pattern=%s bytes=%ld hops=%ld msgs=%d packets=%ld time_us=%.4f", pattern,
               bytes, hops, plan.total, packets, ((double)lanes[2] / PS - start) * 1e6);
        for (int k = 0; k < plan.nnamed; k++)
            printf(" flow%d_us=%.4f", k, ((double)lanes[3 + k] / PS - start) * 1e6);
        printf(" start_spread_ns=%.3f no_room=%llu waits=%llu wall_s=%.3f maxrss_mib=%.1f\n",
               ((double)lanes[0] / PS - start) * 1e9, (unsigned long long)counts[0],
               (unsigned long long)counts[1], wall() - wall0, (double)ru.ru_maxrss / 1024.0);
        fflush(stdout);
    }
    if (barrier(dev) != TORX_OK)
        return die(rank, "barrier");
    torx_pkt_close(dev);
    fc_plan_free(&plan);
    torx_map_free(&map);
    free(out);
    if (boot.finalize)
        boot.finalize(&boot);
    return 0;
}
