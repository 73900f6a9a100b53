/* sim_flowcheck: the traffic patterns of bench/sim/sim_linkcheck.c as
 * SimGrid flows, on SimGrid's own torus cluster and its fluid network model
 * CM02, to check the sim device's link model against it
 * (docs/sim.md#checked-against-simgrids-flow-model). A plain S4U program:
 * no torx.
 *
 *   sim_flowcheck --torus XxYxZ --pattern P --bytes S [--hops H] [--cfg=...]
 *
 * The platform is one cluster of X*Y*Z nodes, node i at (i % X, i / X % Y,
 * i / (X*Y)) as torx's XYZT map places rank i, with the bgl machine's links:
 *   <cluster id="bgl" prefix="node-" radical="0-N" speed="0.7Gf"
 *            bw="175MBps" lat="90ns" topology="TORUS" topo_parameters="X,Y,Z"/>
 * Every message is one SimGrid communication, all posted at time 0 with
 * their receives already waiting; the time of a flow is when its last byte
 * is in. CM02 is run without its corrections: latency and bandwidth
 * factors 1 and weight-S 0 (CM02's defaults, set again here), no
 * cross-traffic (the 5% reverse flow SimGrid adds for TCP acks) and no TCP
 * window bound (TCP-gamma 0). Further --cfg= options go to SimGrid.
 *
 * Patterns (S bytes per message; nodes by coordinate):
 *   hops     (0,0,0) -> a node H hops away, X first, then Y, then Z
 *   share    (0,0,0) -> (2,0,0) and (1,0,0) -> (2,0,0): both cross 1->2
 *   fanout   (0,0,0) -> each of its 6 neighbours
 *   alltoall every node -> every other node
 *   line     (0,0,0) -> (3,0,0) and (1,0,0) -> (2,0,0): the BG/P congestion
 *            test; the first passes through the second's sender and receiver
 *   stream   every node -> its +X neighbour, H messages
 * Prints one line:
 *   flowcheck pattern=P bytes=S hops=H msgs=M time_us=T flow0_us=.. flow1_us=..
 *            wall_s=W maxrss_mib=R
 * with flowK_us for the flows of share and line. */
#include <simgrid/actor.h>
#include <simgrid/comm.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/mailbox.h>
#include <xbt/config.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "flowcheck_patterns.h"

static fc_plan_t plan;
static double *flow_done; /* by message index */

static void node_actor(int argc, char **argv)
{
    (void)argc;
    const int me = atoi(argv[1]);
    char name[32];
    snprintf(name, sizeof name, "mb-%d", me);
    sg_mailbox_t mine = sg_mailbox_by_name(name);
    const int nin = plan.nin[me], nout = plan.nout[me];
    sg_comm_t *gets = malloc((size_t)nin * sizeof *gets);
    void **got = malloc((size_t)nin * sizeof *got);
    int *slot = malloc((size_t)nin * sizeof *slot);
    sg_comm_t *puts = malloc((size_t)nout * sizeof *puts);
    if ((nin && (!gets || !got || !slot)) || (nout && !puts)) {
        fprintf(stderr, "sim_flowcheck: out of memory\n");
        exit(1);
    }
    /* receives first, so every message starts flowing when it is posted */
    for (int i = 0; i < nin; i++) {
        gets[i] = sg_mailbox_get_async(mine, &got[i]);
        slot[i] = i;
    }
    int k = 0;
    for (int m = 0; m < plan.nmsgs; m++) {
        if (plan.msgs[m].src != me)
            continue;
        snprintf(name, sizeof name, "mb-%d", plan.msgs[m].dst);
        puts[k++] = sg_mailbox_put_async(sg_mailbox_by_name(name), (void *)(intptr_t)(m + 1),
                                         (long)plan.msgs[m].bytes);
    }
    /* the pending receives stay at the front of gets; got[] stays put, since
     * each receive writes its payload there */
    for (int left = nin; left > 0; left--) {
        const ssize_t i = sg_comm_wait_any(gets, (size_t)left);
        if (i < 0) {
            fprintf(stderr, "sim_flowcheck: node %d: a receive failed\n", me);
            exit(1);
        }
        flow_done[(intptr_t)got[slot[i]] - 1] = simgrid_get_clock();
        gets[i] = gets[left - 1];
        slot[i] = slot[left - 1];
    }
    sg_comm_wait_all(puts, (size_t)nout);
    free(puts);
    free(slot);
    free(got);
    free(gets);
}

static double wall(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int usage(const char *why)
{
    fprintf(stderr,
            "sim_flowcheck: %s\nusage: sim_flowcheck --torus XxYxZ --pattern "
            "hops|share|fanout|alltoall|line|stream --bytes S [--hops H] [--cfg=NAME:VALUE...]\n",
            why);
    return 2;
}

int main(int argc, char **argv)
{
    const double wall0 = wall();
    /* CM02 as it is, its corrections off (the file's comment) */
    int sargc = 0;
    char **sargv = calloc((size_t)argc + 16, sizeof *sargv);
    if (!sargv)
        return 1;
    sargv[sargc++] = argv[0];
    sargv[sargc++] = "--cfg=network/model:CM02";
    sargv[sargc++] = "--cfg=network/latency-factor:1";
    sargv[sargc++] = "--cfg=network/bandwidth-factor:1";
    sargv[sargc++] = "--cfg=network/weight-S:0";
    sargv[sargc++] = "--cfg=network/crosstraffic:0";
    sargv[sargc++] = "--cfg=network/TCP-gamma:0";
    sargv[sargc++] = "--cfg=contexts/stack-size:64";
    sargv[sargc++] = "--cfg=contexts/guard-size:0";
    sargv[sargc++] = "--log=root.thres:critical";
    for (int i = 1; i < argc; i++)
        sargv[sargc++] = argv[i];
    const char *torus = NULL, *pattern = NULL;
    long bytes = -1, hops = 1;
    char why[200];
    /* options of ours; SimGrid takes its --cfg= and --log= out in simgrid_init */
    for (int i = 1; i < argc; i++) {
        if (!strncmp(argv[i], "--cfg=", 6) || !strncmp(argv[i], "--log=", 6))
            continue;
        const int known = !strcmp(argv[i], "--torus") || !strcmp(argv[i], "--pattern") ||
                          !strcmp(argv[i], "--bytes") || !strcmp(argv[i], "--hops");
        if (!known || i + 1 >= argc) {
            snprintf(why, sizeof why, known ? "%s without its value" : "unknown option %s",
                     argv[i]);
            return usage(why);
        }
        if (!strcmp(argv[i], "--torus"))
            torus = argv[++i];
        else if (!strcmp(argv[i], "--pattern"))
            pattern = argv[++i];
        else if (!strcmp(argv[i], "--bytes") || !strcmp(argv[i], "--hops")) {
            const long v = fc_parse_count(argv[i + 1]);
            if (v < 1) {
                snprintf(why, sizeof why, "%s \"%s\" is not a whole number from 1 to 2147483647",
                         argv[i], argv[i + 1]);
                return usage(why);
            }
            *(argv[i][2] == 'b' ? &bytes : &hops) = v;
            i++;
        }
    }
    if (!torus || !pattern || bytes < 0)
        return usage("--torus, --pattern and --bytes are required");
    unsigned dims[3];
    if (fc_parse_torus(torus, dims, why, sizeof why) != 0)
        return usage(why);
    if (fc_plan(pattern, dims, 1, bytes, hops, -1, &plan, why, sizeof why) != 0)
        return usage(why);
    flow_done = calloc((size_t)plan.nmsgs, sizeof *flow_done);
    if (!flow_done)
        return 1;

    const unsigned n = dims[0] * dims[1] * dims[2];
    char tmpl[] = "/tmp/sim-flowcheck-XXXXXX";
    const int fd = mkstemp(tmpl);
    if (fd < 0) {
        fprintf(stderr, "sim_flowcheck: cannot create a platform file: %s\n", strerror(errno));
        return 1;
    }
    FILE *f = fdopen(fd, "w");
    fprintf(
        f,
        "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
        "<platform version=\"4.1\">\n"
        "<cluster id=\"bgl\" prefix=\"node-\" radical=\"0-%u\" suffix=\"\" speed=\"0.7Gf\" "
        "bw=\"175MBps\" lat=\"90ns\" sharing_policy=\"SPLITDUPLEX\" topology=\"TORUS\" "
        "topo_parameters=\"%u,%u,%u\"/>\n</platform>\n",
        n - 1, dims[0], dims[1], dims[2]);
    fclose(f);
    simgrid_init(&sargc, sargv);
    simgrid_load_platform(tmpl);
    unlink(tmpl);
    for (unsigned i = 0; i < n; i++) {
        if (!plan.nin[i] && !plan.nout[i])
            continue;
        char host[32], id[16];
        snprintf(host, sizeof host, "node-%u", i);
        snprintf(id, sizeof id, "%u", i);
        const char *args[] = {"node", id};
        sg_actor_create_("node", sg_host_by_name(host), node_actor, 2, args);
    }
    simgrid_run();

    double last = 0;
    for (int m = 0; m < plan.nmsgs; m++)
        if (flow_done[m] > last)
            last = flow_done[m];
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("flowcheck pattern=%s bytes=%ld hops=%ld msgs=%d time_us=%.4f", pattern, bytes, hops,
           plan.nmsgs, last * 1e6);
    for (int k = 0; k < plan.nnamed; k++)
        printf(" flow%d_us=%.4f", k, flow_done[k] * 1e6);
    printf(" wall_s=%.3f maxrss_mib=%.1f\n", wall() - wall0, (double)ru.ru_maxrss / 1024.0);
    fc_plan_free(&plan);
    free(flow_done);
    free(sargv);
    return 0;
}
