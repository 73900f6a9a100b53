/* The sim device's model (docs/sim.md#the-network-model): deterministic
 * order, adaptive packets that overtake under a seed and arrive exactly
 * once, deposit lines reaching every node, latency exactly linear in
 * Manhattan distance with the machine file's per-hop term, two flows
 * keeping a shared link busy, the packet that reaches a link first going
 * first, the same simulated times for the same seed, the links' load
 * table (TORX_SIM_LINKS), the collective network's combine and the global
 * interrupt, and a malformed machine file refused at start-up with file,
 * line and field.
 *
 * Every job runs its tasks as actors of the test process
 * (torx_boot_fork_run under TORX_DEVICE=sim), so tasks can leave results
 * in this file's globals for the test to compare. */
#include "harness.h"

#include <math.h>
#include <stdint.h>
#include <sys/wait.h>

#define HOP_NS 90.0 /* bgl's hop_latency */

static void sim_env(void)
{
    setenv("TORX_DEVICE", "sim", 1);
    setenv("TORX_SIM_MACHINE", "bgl", 1);
    setenv("TORX_SIM_MESH", "0", 1);
    setenv("TORX_SIM_SEED", "1", 1);
    unsetenv("TORX_CHAOS");
}

static void stamp(torx_pkt_hdr_t *h, uint32_t sender, uint32_t seq)
{
    memcpy(h->sw, &sender, 4);
    memcpy(h->sw + 4, &seq, 4);
}

static void unstamp(const torx_pkt_hdr_t *h, uint32_t *sender, uint32_t *seq)
{
    memcpy(sender, h->sw, 4);
    memcpy(seq, h->sw + 4, 4);
}

static torx_status_t inject(torx_pkt_dev_t *dev, torx_coord_t to, unsigned ctl, uint32_t sender,
                            uint32_t seq, const void *p, size_t len)
{
    torx_pkt_hdr_t h;
    torx_pkt_hdr_init(&h, to, ctl);
    stamp(&h, sender, seq);
    torx_status_t rc;
    while ((rc = torx_pkt_inject1(dev, &h, p, len)) == TORX_NO_ROOM)
        torx_pkt_poll(dev);
    return rc;
}

/* The next packet, waiting for it (the device's wait is exact). */
static const torx_pkt_hdr_t *next_packet(torx_pkt_dev_t *dev)
{
    const torx_pkt_hdr_t *p;
    while (!(p = torx_pkt_peek(dev)))
        if (torx_pkt_wait(dev, 10000) != TORX_OK)
            return NULL;
    return p;
}

/* ---- order ------------------------------------------------------------------------ */

#define PER_SENDER 2000
static uint32_t arrival_order[4 * PER_SENDER];
static double arrival_time[4 * PER_SENDER];

typedef struct {
    torx_shape_t shape;
    unsigned ctl;
    torx_coord_t to;
    int reordered; /* out: packets that arrived before an earlier one of their sender */
} flow_arg_t;

/* Every task but the one at arg->to sends PER_SENDER packets there. */
static int flow_task(torx_boot_t *boot, void *argp)
{
    flow_arg_t *arg = argp;
    torx_pkt_dev_t *dev;
    TASK_CHECK(test_open(boot, arg->shape, &dev) == TORX_OK, "%s", torx_last_error());
    const torx_coord_t me = test_coord_of(arg->shape, boot->rank);
    uint8_t payload[TORX_PKT_MAX_PAYLOAD] = {0};
    if (!torx_coord_equal(me, arg->to)) {
        for (uint32_t seq = 0; seq < PER_SENDER; seq++)
            TASK_CHECK(inject(dev, arg->to, arg->ctl, (uint32_t)boot->rank, seq, payload,
                              TORX_PKT_MAX_PAYLOAD) == TORX_OK,
                       "%s", torx_last_error());
    } else {
        const unsigned total = (unsigned)(boot->size - 1) * PER_SENDER;
        unsigned seen[64][PER_SENDER / 32 + 1];
        uint32_t highest[64];
        memset(seen, 0, sizeof seen);
        memset(highest, 0, sizeof highest);
        arg->reordered = 0;
        for (unsigned got = 0; got < total; got++) {
            const torx_pkt_hdr_t *p = next_packet(dev);
            TASK_CHECK(p, "only %u of %u packets arrived", got, total);
            uint32_t sender, seq;
            unstamp(p, &sender, &seq);
            TASK_CHECK(sender < 64 && seq < PER_SENDER, "bad stamp %u/%u", sender, seq);
            TASK_CHECK(!(seen[sender][seq / 32] & (1u << seq % 32)), "sender %u seq %u twice",
                       sender, seq);
            seen[sender][seq / 32] |= 1u << seq % 32;
            if (seq < highest[sender])
                arg->reordered++;
            if (seq > highest[sender])
                highest[sender] = seq;
            if (!(arg->ctl & TORX_PKT_ADAPTIVE))
                TASK_CHECK(seq == 0 || seq == highest[sender], "sender %u: %u after %u", sender,
                           seq, highest[sender]);
            if (got < sizeof arrival_order / sizeof *arrival_order) {
                arrival_order[got] = sender << 16 | seq;
                arrival_time[got] = torx_pkt_wtime(dev);
            }
            torx_pkt_consume(dev);
        }
        TASK_CHECK(torx_pkt_peek(dev) == NULL, "extra packets");
    }
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    torx_pkt_close(dev);
    return 0;
}

START_TEST(deterministic_in_order)
{
    sim_env();
    /* a 4x4 torus, everyone sends to (1,1): routes cross and merge */
    flow_arg_t arg = {.shape = {4, 4, 1, 1}, .ctl = 0, .to = {1, 1, 0, 0}};
    ck_assert_int_eq(torx_boot_fork_run(16, flow_task, &arg, TEST_JOB_TIMEOUT, 0), 0);
    ck_assert_int_eq(arg.reordered, 0);
}
END_TEST

/* One job of flow_task in a child process, whose simulated clock starts
 * at zero: its arrivals into *out (shared with the parent). */
typedef struct {
    uint32_t order[4 * PER_SENDER];
    double time[4 * PER_SENDER];
    int reordered, rc;
} arrivals_t;

static void run_in_child(flow_arg_t *arg, arrivals_t *out)
{
    const pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        out->rc = torx_boot_fork_run(16, flow_task, arg, TEST_JOB_TIMEOUT, 0);
        memcpy(out->order, arrival_order, sizeof out->order);
        memcpy(out->time, arrival_time, sizeof out->time);
        out->reordered = arg->reordered;
        _exit(0);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_int_eq(out->rc, 0);
}

START_TEST(adaptive_overtakes_exactly_once_and_repeats)
{
    sim_env();
    flow_arg_t arg = {.shape = {4, 4, 1, 1}, .ctl = TORX_PKT_ADAPTIVE, .to = {1, 1, 0, 0}};
    arrivals_t *run =
        mmap(NULL, 3 * sizeof *run, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert(run != MAP_FAILED);
    run_in_child(&arg, &run[0]);
    ck_assert_msg(run[0].reordered > 0, "no adaptive packet overtook another");
    /* the same seed: the same arrivals at the same simulated times, bit for bit */
    run_in_child(&arg, &run[1]);
    ck_assert_int_eq(run[1].reordered, run[0].reordered);
    ck_assert(memcmp(run[0].order, run[1].order, sizeof run[0].order) == 0);
    ck_assert(memcmp(run[0].time, run[1].time, sizeof run[0].time) == 0);
    /* another seed: another interleaving, still exactly once */
    setenv("TORX_SIM_SEED", "7", 1);
    run_in_child(&arg, &run[2]);
    ck_assert(memcmp(run[0].order, run[2].order, sizeof run[0].order) != 0);
    munmap(run, 3 * sizeof *run);
}
END_TEST

/* ---- deposit lines ----------------------------------------------------------------- */

static int deposit_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    const torx_shape_t shape = {8, 2, 1, 1};
    torx_pkt_dev_t *dev;
    TASK_CHECK(test_open(boot, shape, &dev) == TORX_OK, "%s", torx_last_error());
    const torx_coord_t me = test_coord_of(shape, boot->rank);
    if (boot->rank == 0) { /* along x from (0,0) to (7,0): 7 nodes get a copy */
        torx_pkt_hdr_t h;
        torx_pkt_hdr_init(&h, (torx_coord_t){7, 0, 0, 0}, 0);
        torx_pkt_hdr_set_deposit(&h, TORX_DIM_X, 1);
        stamp(&h, 0, 42);
        TASK_CHECK(torx_pkt_inject1(dev, &h, "line", 5) == TORX_OK, "%s", torx_last_error());
    } else if (me.y == 0) {
        const torx_pkt_hdr_t *p = next_packet(dev);
        TASK_CHECK(p, "node (%u,0) got no copy", me.x);
        uint32_t s, q;
        unstamp(p, &s, &q);
        TASK_CHECK(q == 42 && p->payload_len == 5, "wrong packet");
        TASK_CHECK(!memcmp(torx_pkt_payload(p), "line", 5), "wrong payload");
        torx_pkt_consume(dev);
    }
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    TASK_CHECK(torx_pkt_peek(dev) == NULL, "rank %d: an unexpected packet", boot->rank);
    torx_pkt_close(dev);
    return 0;
}

START_TEST(deposit_line_reaches_every_node)
{
    sim_env();
    ck_assert_int_eq(torx_boot_fork_run(16, deposit_task, NULL, TEST_JOB_TIMEOUT, 0), 0);
}
END_TEST

/* ---- latency against distance ------------------------------------------------------ */

static double one_way[8];

/* Rank 0 sends one packet to each rank on its x line in turn, idle
 * between; each receiver records how long the packet took. */
static int latency_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    const torx_shape_t shape = {16, 1, 1, 1};
    torx_pkt_dev_t *dev;
    TASK_CHECK(test_open(boot, shape, &dev) == TORX_OK, "%s", torx_last_error());
    if (boot->rank == 0) {
        for (int h = 1; h <= 8; h++) {
            const double t = torx_pkt_wtime(dev);
            TASK_CHECK(inject(dev, (torx_coord_t){(uint8_t)h, 0, 0, 0}, 0, 0, 0, &t, sizeof t) ==
                           TORX_OK,
                       "%s", torx_last_error());
            const double until = torx_pkt_wtime(dev) + 1e-4;
            while (torx_pkt_wtime(dev) < until)
                torx_pkt_wait(dev, 1);
        }
    } else if (boot->rank <= 8) {
        const torx_pkt_hdr_t *p = next_packet(dev);
        TASK_CHECK(p, "no packet");
        double sent;
        torx_pkt_read(p, &sent, 0, sizeof sent);
        one_way[boot->rank - 1] = torx_pkt_wtime(dev) - sent;
        torx_pkt_consume(dev);
    }
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    torx_pkt_close(dev);
    return 0;
}

START_TEST(latency_linear_in_distance)
{
    sim_env();
    ck_assert_int_eq(torx_boot_fork_run(16, latency_task, NULL, TEST_JOB_TIMEOUT, 0), 0);
    for (int h = 2; h <= 8; h++) {
        const double step = (one_way[h - 1] - one_way[h - 2]) * 1e9;
        ck_assert_msg(fabs(step - HOP_NS) < 1e-3, "hop %d adds %.6f ns, not %.0f", h, step, HOP_NS);
    }
}
END_TEST

/* ---- two flows on one link ------------------------------------------------------- */

static double flow_done[2];

/* On a 4x1x1 mesh rank 0 (x=0) and rank 1 (x=1) both stream N full packets
 * to rank 2 (x=2): both cross the link 1->2. */
static int share_task(torx_boot_t *boot, void *argp)
{
    const int both = *(int *)argp;
    const torx_shape_t shape = {4, 1, 1, 1};
    torx_pkt_dev_t *dev;
    TASK_CHECK(test_open(boot, shape, &dev) == TORX_OK, "%s", torx_last_error());
    uint8_t payload[TORX_PKT_MAX_PAYLOAD] = {0};
    const uint32_t n = 4000;
    const double t0 = torx_pkt_wtime(dev);
    if (boot->rank == 0 || (both && boot->rank == 1)) {
        for (uint32_t seq = 0; seq < n; seq++)
            TASK_CHECK(inject(dev, (torx_coord_t){2, 0, 0, 0}, 0, (uint32_t)boot->rank, seq,
                              payload, sizeof payload) == TORX_OK,
                       "%s", torx_last_error());
    } else if (boot->rank == 2) {
        for (uint32_t got = 0; got < (both ? 2 : 1) * n; got++) {
            const torx_pkt_hdr_t *p = next_packet(dev);
            TASK_CHECK(p, "packets missing");
            uint32_t s, q;
            unstamp(p, &s, &q);
            if (q == n - 1)
                flow_done[s] = torx_pkt_wtime(dev) - t0;
            torx_pkt_consume(dev);
        }
    }
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    torx_pkt_close(dev);
    return 0;
}

/* The both-flows job's TORX_SIM_LINKS table (docs/sim.md#link-load):
 * rank 0's first link 0->1 carried its 4,000 packets and, as the shared
 * link 1->2 ahead was full, waited for room; 1->2 carried all 8,000
 * packets without a pause and never waited (its far end reads all). */
static void check_links_table(const char *path, double wire_s)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "no links table at %s", path);
    char line[256];
    ck_assert(fgets(line, sizeof line, f) != NULL);
    ck_assert_str_eq(line, "x,y,z,dim,way,packets,busy_us,blocked_us,first_us,last_us\n");
    int rows = 0, seen01 = 0, seen12 = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned x, y, z;
        char dim, way;
        unsigned long long packets;
        double busy, blocked, first, last;
        ck_assert_int_eq(sscanf(line, "%u,%u,%u,%c,%c,%llu,%lf,%lf,%lf,%lf", &x, &y, &z, &dim,
                                &way, &packets, &busy, &blocked, &first, &last),
                         10);
        rows++;
        ck_assert_msg(dim == 'x' && way == '+' && y == 0 && z == 0 && x <= 1, "a link %s", line);
        ck_assert_msg(fabs(busy / (packets * wire_s * 1e6) - 1) < 1e-6, "busy: %s", line);
        if (x == 0) {
            seen01 = 1;
            ck_assert_msg(packets == 4000 && blocked > 0, "0->1: %s", line);
        } else {
            seen12 = 1;
            ck_assert_msg(packets == 8000 && blocked == 0 && busy / (last - first) > 0.999,
                          "1->2: %s", line);
        }
    }
    fclose(f);
    ck_assert_msg(rows == 2 && seen01 && seen12, "%d links in the table", rows);
}

START_TEST(two_flows_share_a_link)
{
    sim_env();
    setenv("TORX_SIM_MESH", "1", 1);
    int both = 0;
    ck_assert_int_eq(torx_boot_fork_run(4, share_task, &both, TEST_JOB_TIMEOUT, 0), 0);
    const double alone = flow_done[0];
    /* alone: the link's rate (256 + 14 wire bytes at 175 MB/s per packet) */
    const double wire = 4000 * 270 / 175e6;
    ck_assert_msg(fabs(alone / wire - 1) < 0.02, "one flow: %.6f s, the link takes %.6f s", alone,
                  wire);
    both = 1;
    char links[] = "/tmp/torx-test-links-XXXXXX";
    const int fd = mkstemp(links);
    ck_assert_int_ge(fd, 0);
    close(fd);
    setenv("TORX_SIM_LINKS", links, 1);
    ck_assert_int_eq(torx_boot_fork_run(4, share_task, &both, TEST_JOB_TIMEOUT, 0), 0);
    unsetenv("TORX_SIM_LINKS");
    check_links_table(links, wire / 4000);
    unlink(links);
    /* the shared link is busy all along: the last flow ends when the link
     * has carried both */
    const double last = flow_done[0] > flow_done[1] ? flow_done[0] : flow_done[1];
    ck_assert_msg(fabs(last / (2 * wire) - 1) < 0.02, "two flows: %.6f s, the link takes %.6f s",
                  last, 2 * wire);
    /* a link serves packets in the order they reach it: the through flow's
     * packets wait in the router's buffer, rank 1's next packet reaches the
     * router only when its last one has left, so the through flow goes
     * first (docs/sim.md#the-network-model) */
    ck_assert_msg(flow_done[0] < flow_done[1], "through flow %.6f s, local flow %.6f s",
                  flow_done[0], flow_done[1]);
}
END_TEST

/* ---- the first packet to reach a link goes first ---------------------------------- */

static double meet_at[8];
static uint32_t meet_from[2];

/* On an 8x1x1 mesh, rank 0 and rank 3 each send one full packet to rank 5:
 * both cross the links 3->4 and 4->5. Rank 0 injects first, but its head
 * reaches router 3 three hops later; rank 3 injects after two empty polls
 * (114 ns), before that. */
static int meet_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    const torx_shape_t shape = {8, 1, 1, 1};
    torx_pkt_dev_t *dev;
    TASK_CHECK(test_open(boot, shape, &dev) == TORX_OK, "%s", torx_last_error());
    uint8_t payload[TORX_PKT_MAX_PAYLOAD] = {0};
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    if (boot->rank == 0 || boot->rank == 3) {
        if (boot->rank == 3)
            for (int i = 0; i < 2; i++)
                TASK_CHECK(torx_pkt_poll(dev) == 0, "rank 3 got a packet");
        TASK_CHECK(inject(dev, (torx_coord_t){5, 0, 0, 0}, 0, (uint32_t)boot->rank, 0, payload,
                          sizeof payload) == TORX_OK,
                   "%s", torx_last_error());
    } else if (boot->rank == 5) {
        for (int got = 0; got < 2; got++) {
            const torx_pkt_hdr_t *p = next_packet(dev);
            TASK_CHECK(p, "packets missing");
            uint32_t q;
            unstamp(p, &meet_from[got], &q);
            meet_at[got] = torx_pkt_wtime(dev);
            torx_pkt_consume(dev);
        }
    }
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    torx_pkt_close(dev);
    return 0;
}

START_TEST(first_to_reach_a_link_goes_first)
{
    sim_env();
    setenv("TORX_SIM_MESH", "1", 1);
    ck_assert_int_eq(torx_boot_fork_run(8, meet_task, NULL, TEST_JOB_TIMEOUT, 0), 0);
    /* granted in order of injection (reservation), rank 0's would come first */
    ck_assert_msg(meet_from[0] == 3 && meet_from[1] == 0,
                  "rank %u's packet arrived first, then rank %u's", meet_from[0], meet_from[1]);
    /* rank 0's waited at router 3 for the link, then followed one wire time
     * behind */
    const double wire = 270 / 175e6;
    ck_assert_msg(fabs(meet_at[1] - meet_at[0] - wire) < 1e-12,
                  "the second packet came %.6f us after the first, not one wire time (%.6f us)",
                  (meet_at[1] - meet_at[0]) * 1e6, wire * 1e6);
}
END_TEST

/* ---- collective network and global interrupt ------------------------------------- */

static int cn_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    const torx_shape_t shape = {4, 2, 2, 1};
    torx_pkt_dev_t *dev;
    TASK_CHECK(test_open(boot, shape, &dev) == TORX_OK, "%s", torx_last_error());
    for (int round = 0; round < 10; round++) {
        uint64_t in[32] = {0}, out[32];
        in[0] = (uint64_t)boot->rank + 1;
        in[1] = (uint64_t)round;
        TASK_CHECK(torx_cn_inject(dev, TORX_CN_ADD, TORX_CN_U64, 0, in) == TORX_OK, "%s",
                   torx_last_error());
        torx_status_t rc;
        while ((rc = torx_cn_read(dev, out)) == TORX_AGAIN)
            torx_pkt_wait(dev, 100);
        TASK_CHECK(rc == TORX_OK, "%s", torx_last_error());
        TASK_CHECK(out[0] == 16 * 17 / 2 && out[1] == 16u * (uint64_t)round, "round %d", round);
        double x = boot->rank * 0.1, sum;
        TASK_CHECK(torx_cn_allreduce_sum_double(dev, &x, &sum, 1) == TORX_OK, "%s",
                   torx_last_error());
        double want = 0;
        for (int r = 0; r < boot->size; r++)
            want += r * 0.1;
        TASK_CHECK(fabs(sum - want) < 1e-12, "double sum %.17g, expected %.17g", sum, want);
        TASK_CHECK(torx_gi_arm(dev) == TORX_OK, "%s", torx_last_error());
        while ((rc = torx_gi_poll(dev)) == TORX_AGAIN)
            torx_pkt_wait(dev, 100);
        TASK_CHECK(rc == TORX_OK, "%s", torx_last_error());
    }
    torx_pkt_close(dev);
    return 0;
}

START_TEST(collective_network_and_interrupt)
{
    sim_env();
    ck_assert_int_eq(torx_boot_fork_run(16, cn_task, NULL, TEST_JOB_TIMEOUT, 0), 0);
}
END_TEST

/* ---- a bad machine file ----------------------------------------------------------- */

static int open_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_pkt_dev_t *dev;
    TASK_CHECK(test_open(boot, (torx_shape_t){2, 1, 1, 1}, &dev) == TORX_OK, "%s",
               torx_last_error());
    torx_pkt_close(dev);
    return 0;
}

START_TEST(bad_machine_file_refused)
{
    sim_env();
    char path[] = "/tmp/torx-test-machine-XXXXXX";
    const int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    static const char bad[] =
        "name bad\ncores_per_node 2\nclock 700 MHz\nlink_bandwidth 17x MB/s\n";
    ck_assert_int_eq(write(fd, bad, sizeof bad - 1), (ssize_t)(sizeof bad - 1));
    close(fd);
    setenv("TORX_SIM_MACHINE", path, 1);
    const int rc = torx_boot_fork_run(2, open_task, NULL, TEST_JOB_TIMEOUT, 0);
    unlink(path);
    ck_assert_int_lt(rc, 0);
    ck_assert_msg(strstr(torx_last_error(), path) && strstr(torx_last_error(), ":4:") &&
                      strstr(torx_last_error(), "link_bandwidth"),
                  "message: %s", torx_last_error());
}
END_TEST

/* With --sanitized: only whether this build is sanitized (77) or not (0),
 * for test/sim-variant.sh. */
int main(int argc, char **argv)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    /* SimGrid switches its actors' stacks without telling the sanitizers */
    (void)argc, (void)argv;
    puts("test_sim: skipped in a sanitized build");
    return 77;
#else
    if (argc > 1 && !strcmp(argv[1], "--sanitized"))
        return 0;
#endif
    Suite *s = suite_create("sim");
    TCase *tc = tcase_create("model");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, deterministic_in_order);
    tcase_add_test(tc, adaptive_overtakes_exactly_once_and_repeats);
    tcase_add_test(tc, deposit_line_reaches_every_node);
    tcase_add_test(tc, latency_linear_in_distance);
    tcase_add_test(tc, two_flows_share_a_link);
    tcase_add_test(tc, first_to_reach_a_link_goes_first);
    tcase_add_test(tc, collective_network_and_interrupt);
    tcase_add_test(tc, bad_machine_file_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
