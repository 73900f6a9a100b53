/* Test cases every message-based network device must pass (src/packet/net/),
 * included by each device's test (test_ofi.c, test_ucx.c), which defines
 * first:
 *
 *   NET_NAME            the device's name, "ofi"
 *   use_net()           the environment that opens it alone on this host
 *   net_bulk_path()     the bulk path it reports ("rma")
 *
 * Helpers: open_err_t and open_err_task, for each device's table of bad
 * start-up values. Cases: stage_carries_descriptor (staged pieces in order, each with its
 * descriptor aboard, some left alone, some taken back), bulk_rma_sizes
 * (gets and puts of 1 B to 16 MiB, unaligned, with guards), cn_matches_shm_bitwise
 * (collective-network rounds, errors and the reproducible double sum bit for bit as on shm),
 * gi_rounds_hold (barrier rounds of 2 tasks, where the two words cross, and of 3, up and down
 * the tree: nobody leaves a round before every task entered it), dead_peer_named (a task that
 * vanishes is named by the barrier that waits for it). */
#ifndef TORX_TEST_NET_CASES_H
#define TORX_TEST_NET_CASES_H

#include "packet/net/net.h"

/* The device's own barrier (the global interrupt), polling the torus
 * meanwhile, so the credits of the last packets travel before anyone
 * closes. */
static torx_status_t dev_barrier(torx_pkt_dev_t *dev)
{
    torx_status_t st = torx_gi_arm(dev);
    if (st != TORX_OK)
        return st;
    while ((st = torx_gi_poll(dev)) == TORX_AGAIN)
        torx_pkt_poll(dev);
    return st;
}

static void *shared_map(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(p, MAP_FAILED);
    memset(p, 0, bytes);
    return p;
}

/* ---- Start-up errors: the device's table, open_errs, and its own case -------------- */

typedef struct open_err {
    const char *var, *value; /* set before the job */
    torx_status_t expect;
    const char *needle, *needle2; /* both in torx_last_error() */
} open_err_t;

/* A two-task job with a bad value set for both: the open fails on each,
 * with the status and a message naming the variable and value. */
static int open_err_task(torx_boot_t *boot, void *argp)
{
    const open_err_t *e = argp;
    torx_pkt_dev_t *dev = NULL;
    const torx_status_t rc = test_open(boot, (torx_shape_t){2, 1, 1, 1}, &dev);
    TASK_CHECK(rc != TORX_OK, "%s=%s: open succeeded", e->var, e->value);
    const char *msg = torx_last_error();
    TASK_CHECK(rc == e->expect, "%s=%s: status %s, expected %s (%s)", e->var, e->value,
               torx_status_str(rc), torx_status_str(e->expect), msg);
    TASK_CHECK(strstr(msg, e->needle) && (!e->needle2 || strstr(msg, e->needle2)),
               "%s=%s: message '%s' lacks '%s'/'%s'", e->var, e->value, msg, e->needle,
               e->needle2 ? e->needle2 : "");
    if (boot->rank == 0)
        fprintf(stderr, "%s='%s': %s\n", e->var, e->value, msg);
    return 0;
}

/* ---- A staged piece and its descriptor travel as one message --------------------- */

#define CARRY_N 300

/* Rank 0 stages CARRY_N pieces of assorted sizes (up to torx_stage_max)
 * toward rank 1, each followed by its descriptor packet, as the message
 * layer does; every 7th it polls between the two, so the piece leaves
 * alone; every 10th it takes the piece back (torx_stage_unput) before
 * staging it again. Rank 1 checks every piece against its descriptor, in
 * order. Rank 0 checks that the descriptors rode aboard their pieces: all
 * but the polled ones and those whose injection had to wait. */
static int carry_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_pkt_dev_t *dev;
    const torx_shape_t shape = {2, 1, 1, 1};
    TASK_CHECK(test_open(boot, shape, &dev) == TORX_OK, "%s", torx_last_error());
    const size_t max = torx_stage_max(dev);
    TASK_CHECK(max > 0, "no staging");
    const size_t sizes[] = {1, 97, 240, 4099, max - 1, max};
    static unsigned char buf[1u << 15];
    const torx_coord_t peer = test_coord_of(shape, 1 - boot->rank);
    unsigned spins = 0;
    if (boot->rank == 0) {
        /* Idle toward the peer until a piece is out, worth 64 KiB past the
         * eager limit there; the area does not reach this task itself. */
        TASK_CHECK(torx_stage_idle(dev, peer) == 1, "not idle before any put");
        TASK_CHECK(torx_stage_idle_max(dev, peer) == 65536, "idle max %zu toward the peer",
                   torx_stage_idle_max(dev, peer));
        TASK_CHECK(torx_stage_idle_max(dev, test_coord_of(shape, 0)) == 0,
                   "idle max %zu toward itself", torx_stage_idle_max(dev, test_coord_of(shape, 0)));
        unsigned long polled = 0, waited = 0;
        for (uint32_t i = 0; i < CARRY_N; i++) {
            const size_t len = sizes[i % (sizeof sizes / sizeof sizes[0])];
            for (size_t k = 0; k < len; k++)
                buf[k] = (unsigned char)(i * 31 + k);
            torx_stage_ref_t ref;
            torx_status_t rc;
            while ((rc = torx_stage_put(dev, peer, buf, len, &ref)) == TORX_NO_ROOM)
                torx_pkt_poll(dev), test_relax(&spins);
            TASK_CHECK(rc == TORX_OK, "put %u: %s", i, torx_last_error());
            TASK_CHECK(i > 0 || !torx_stage_idle(dev, peer), "idle with a piece out");
            if (i % 10 == 3) { /* taken back before it left, then again */
                torx_stage_unput(dev, peer, ref);
                while ((rc = torx_stage_put(dev, peer, buf, len, &ref)) == TORX_NO_ROOM)
                    torx_pkt_poll(dev), test_relax(&spins);
                TASK_CHECK(rc == TORX_OK, "put %u again: %s", i, torx_last_error());
            }
            if (i % 7 == 0) {
                torx_pkt_poll(dev); /* the piece leaves alone */
                polled++;
            }
            torx_pkt_hdr_t h;
            torx_pkt_hdr_init(&h, peer, 0);
            memcpy(h.sw, &i, 4);
            int first = 1;
            while ((rc = torx_pkt_inject1(dev, &h, &ref, sizeof ref)) == TORX_NO_ROOM) {
                waited += first;
                first = 0;
                torx_pkt_poll(dev), test_relax(&spins);
            }
            TASK_CHECK(rc == TORX_OK, "inject %u: %s", i, torx_last_error());
        }
        unsigned long carried, alone;
        torxp_net_stage_counts(torxp_net_of(dev), &carried, &alone);
        TASK_CHECK(carried + alone == CARRY_N, "%lu carried + %lu alone, %d staged", carried, alone,
                   CARRY_N);
        TASK_CHECK(alone >= polled && alone <= polled + waited,
                   "%lu pieces left alone; %lu were polled out, %lu waited for room", alone, polled,
                   waited);
        fprintf(stderr,
                "carry: %lu of %d pieces carried their descriptor (%lu polled out, %lu "
                "waited)\n",
                carried, CARRY_N, polled, waited);
    } else {
        const double deadline = test_now() + 60;
        for (uint32_t want = 0; want < CARRY_N;) {
            const torx_pkt_hdr_t *p = torx_pkt_peek(dev);
            if (!p) {
                TASK_CHECK(test_now() < deadline, "got %u of %d", want, CARRY_N);
                torx_pkt_poll(dev);
                test_relax(&spins);
                continue;
            }
            uint32_t id;
            torx_stage_ref_t ref;
            memcpy(&id, p->sw, 4);
            torx_pkt_read(p, &ref, 0, sizeof ref);
            TASK_CHECK(id == want, "descriptor %u when %u was due", id, want);
            const size_t len = sizes[want % (sizeof sizes / sizeof sizes[0])];
            TASK_CHECK(ref.len == len, "descriptor %u: %u bytes, %zu staged", id, ref.len, len);
            const unsigned char *d = torx_stage_data(dev, peer, ref);
            TASK_CHECK(d != NULL, "piece %u not found: %s", id, torx_last_error());
            for (size_t k = 0; k < len; k++)
                TASK_CHECK(d[k] == (unsigned char)(want * 31 + k), "piece %u byte %zu", id, k);
            torx_stage_release(dev, peer, ref);
            torx_pkt_consume(dev);
            want++;
        }
    }
    torx_status_t st;
    TASK_CHECK((st = dev_barrier(dev)) == TORX_OK, "barrier: %s: %s", torx_status_str(st),
               torx_last_error());
    TASK_CHECK(torx_pkt_peek(dev) == NULL, "a packet too many");
    torx_pkt_close(dev);
    return 0;
}

START_TEST(stage_carries_descriptor)
{
    use_net();
    RUN_JOB(2, carry_task, NULL);
}
END_TEST

/* ---- Bulk transfers by RMA ------------------------------------------------------- */

static const size_t bulk_sizes[] = {1, 63, 64, 65, 240, 4099, (1u << 20) + 7, 16u << 20};
#define NBULK (sizeof bulk_sizes / sizeof bulk_sizes[0])
#define BULK_MAX ((size_t)16 << 20)
#define GUARD 64

typedef struct bulk_addrs {
    uint64_t src, dst;
} bulk_addrs_t;

static uint8_t pat(int rank, size_t i)
{
    return (uint8_t)(i * 7 + (i >> 9) + (unsigned)rank * 101 + 3);
}

static torx_status_t bulk_wait(torx_pkt_dev_t *dev, torx_bulk_t *op)
{
    torx_status_t st;
    const double deadline = test_now() + 30;
    while ((st = torx_bulk_test(dev, op)) == TORX_AGAIN && test_now() < deadline)
        ;
    return st;
}

/* A barrier that keeps the device polled (a peer's bulk requests are
 * served from poll). */
static int bulk_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_pkt_dev_t *dev;
    const torx_shape_t shape = {2, 1, 1, 1};
    TASK_CHECK(test_open(boot, shape, &dev) == TORX_OK, "%s", torx_last_error());
    const char *path = net_bulk_path();
    TASK_CHECK(strcmp(torx_bulk_path(dev), path) == 0, "bulk path %s, expected %s",
               torx_bulk_path(dev), path);
    const int me = boot->rank, peer = 1 - me;
    const torx_coord_t pc = test_coord_of(shape, peer);
    uint8_t *src = malloc(BULK_MAX + 2 * GUARD), *dst = malloc(BULK_MAX + 2 * GUARD);
    TASK_CHECK(src && dst, "out of memory");
    for (size_t i = 0; i < BULK_MAX + 2 * GUARD; i++)
        src[i] = pat(me, i);
    bulk_addrs_t mine = {(uint64_t)(uintptr_t)src, (uint64_t)(uintptr_t)dst}, all[2];
    TASK_CHECK(boot->allgather(boot, &mine, all, sizeof mine) == TORX_OK, "allgather");
    torx_status_t st;
    for (size_t k = 0; k < NBULK; k++) {
        const size_t n = bulk_sizes[k], off = 1 + k % 5;
        torx_bulk_t op;
        /* get: dst[GUARD..] <- peer's src[off..] */
        memset(dst, 0xEE, n + 2 * GUARD);
        TASK_CHECK(torx_bulk_get(dev, &op, pc, (const void *)(uintptr_t)(all[peer].src + off),
                                 dst + GUARD, n) == TORX_OK,
                   "get %zu: %s", n, torx_last_error());
        st = bulk_wait(dev, &op);
        TASK_CHECK(st == TORX_OK, "get %zu: %s (%s)", n, torx_status_str(st), torx_last_error());
        TASK_CHECK(torx_bulk_test(dev, &op) == TORX_OK, "a finished get tests OK again");
        for (size_t i = 0; i < n; i++)
            TASK_CHECK(dst[GUARD + i] == pat(peer, off + i), "get %zu: byte %zu", n, i);
        for (size_t i = 0; i < GUARD; i++)
            TASK_CHECK(dst[i] == 0xEE && dst[GUARD + n + i] == 0xEE, "get %zu wrote outside", n);
        TASK_CHECK((st = dev_barrier(dev)) == TORX_OK, "barrier: %s: %s", torx_status_str(st),
                   torx_last_error());
        /* put: peer's dst[GUARD..] <- src[off..] */
        memset(dst, 0xEE, n + 2 * GUARD);
        TASK_CHECK((st = dev_barrier(dev)) == TORX_OK, "barrier: %s: %s", torx_status_str(st),
                   torx_last_error());
        TASK_CHECK(torx_bulk_put(dev, &op, pc, (void *)(uintptr_t)(all[peer].dst + GUARD),
                                 src + off, n) == TORX_OK,
                   "put %zu: %s", n, torx_last_error());
        st = bulk_wait(dev, &op);
        TASK_CHECK(st == TORX_OK, "put %zu: %s (%s)", n, torx_status_str(st), torx_last_error());
        TASK_CHECK((st = dev_barrier(dev)) == TORX_OK, "barrier: %s: %s", torx_status_str(st),
                   torx_last_error());
        for (size_t i = 0; i < n; i++)
            TASK_CHECK(dst[GUARD + i] == pat(peer, off + i), "put %zu: byte %zu", n, i);
        for (size_t i = 0; i < GUARD; i++)
            TASK_CHECK(dst[i] == 0xEE && dst[GUARD + n + i] == 0xEE, "put %zu wrote outside", n);
    }
    /* Misuse: never started, no task there. */
    torx_bulk_t fresh = {{0}};
    TASK_CHECK(torx_bulk_test(dev, &fresh) == TORX_ERR_INVAL, "test of an op never started");
    torx_bulk_t op;
    TASK_CHECK(torx_bulk_get(dev, &op, (torx_coord_t){5, 0, 0, 0}, src, dst, 8) == TORX_ERR_INVAL,
               "get from outside the torus");
    TASK_CHECK((st = dev_barrier(dev)) == TORX_OK, "barrier: %s: %s", torx_status_str(st),
               torx_last_error());
    torx_pkt_close(dev);
    free(src);
    free(dst);
    return 0;
}

START_TEST(bulk_rma_sizes)
{
    use_net();
    RUN_JOB(2, bulk_task, NULL);
}
END_TEST

/* ---- Collective network: the shm device's bits -------------------------------- */

#define CN_TASKS 5
#define CN_ROUNDS 12
#define CN_DOUBLES 32

typedef struct cn_record {
    int32_t status[CN_ROUNDS];
    unsigned char result[CN_ROUNDS][TORX_CN_PACKET_BYTES];
    char msg[CN_ROUNDS][200];
    double sum[CN_DOUBLES];
    int32_t sum_status;
} cn_record_t;

typedef struct cn_run {
    cn_record_t rec[2][CN_TASKS]; /* [0] shm, [1] the network device */
    int which;
} cn_run_t;

/* Round k's op, type and whether this rank is a BCAST root; rounds 9..11
 * are deliberate disagreements. */
static void cn_round(int k, int rank, torx_cn_op_t *op, torx_cn_type_t *type, int *root)
{
    static const torx_cn_op_t ops[CN_ROUNDS] = {
        TORX_CN_ADD, TORX_CN_ADD,   TORX_CN_MIN, TORX_CN_MAX, TORX_CN_AND,   TORX_CN_OR,
        TORX_CN_XOR, TORX_CN_BCAST, TORX_CN_MIN, TORX_CN_ADD, TORX_CN_BCAST, TORX_CN_BCAST};
    static const torx_cn_type_t types[CN_ROUNDS] = {
        TORX_CN_S64, TORX_CN_U32, TORX_CN_S32, TORX_CN_U64, TORX_CN_U32, TORX_CN_S64,
        TORX_CN_U64, TORX_CN_S32, TORX_CN_S64, TORX_CN_S64, TORX_CN_U64, TORX_CN_U64};
    *op = ops[k];
    *type = types[k];
    *root = 0;
    if (k == 7)
        *root = rank == 3;
    if (k == 9 && (rank == 2 || rank == 4)) /* ranks 2 and 4 disagree */
        *op = TORX_CN_MAX;
    if (k == 10) /* two roots */
        *root = rank == 1 || rank == 3;
    /* k == 11: no root */
}

static int cn_task(torx_boot_t *boot, void *argp)
{
    cn_run_t *run = argp;
    cn_record_t *rec = &run->rec[run->which][boot->rank];
    torx_pkt_dev_t *dev;
    const torx_shape_t shape = {CN_TASKS, 1, 1, 1};
    TASK_CHECK(test_open(boot, shape, &dev) == TORX_OK, "%s", torx_last_error());
    torx_status_t st;
    for (int k = 0; k < CN_ROUNDS; k++) {
        uint64_t lanes[TORX_CN_PACKET_BYTES / 8];
        for (int i = 0; i < TORX_CN_PACKET_BYTES / 8; i++)
            lanes[i] = (uint64_t)(boot->rank + 1) * 0x9E3779B97F4A7C15ULL * (uint64_t)(i + k + 1) ^
                       ((uint64_t)i << 60);
        torx_cn_op_t op;
        torx_cn_type_t type;
        int root;
        cn_round(k, boot->rank, &op, &type, &root);
        while ((st = torx_cn_inject(dev, op, type, root, lanes)) == TORX_NO_ROOM)
            torx_pkt_poll(dev);
        TASK_CHECK(st == TORX_OK, "round %d inject: %s", k, torx_last_error());
        while ((st = torx_cn_read(dev, rec->result[k])) == TORX_AGAIN)
            torx_pkt_poll(dev);
        rec->status[k] = st;
        if (st != TORX_OK)
            snprintf(rec->msg[k], sizeof rec->msg[k], "%s", torx_last_error());
    }
    double in[CN_DOUBLES];
    for (int i = 0; i < CN_DOUBLES; i++)
        in[i] =
            (i % 2 ? -1.0 : 1.0) * (1.0 + boot->rank) * (i % 3 ? 1e-7 : 3.0e12) / (1.0 + 3.0 * i) +
            (boot->rank == i % CN_TASKS ? 0.1 : 0.0);
    rec->sum_status = torx_cn_allreduce_sum_double(dev, in, rec->sum, CN_DOUBLES);
    TASK_CHECK((st = dev_barrier(dev)) == TORX_OK, "barrier: %s: %s", torx_status_str(st),
               torx_last_error());
    torx_pkt_close(dev);
    return 0;
}

START_TEST(cn_matches_shm_bitwise)
{
    cn_run_t *run = shared_map(sizeof *run);
    use_net();
    setenv("TORX_DEVICE", "shm", 1);
    run->which = 0;
    RUN_JOB(CN_TASKS, cn_task, run);
    use_net();
    run->which = 1;
    RUN_JOB(CN_TASKS, cn_task, run);
    for (int r = 0; r < CN_TASKS; r++) {
        const cn_record_t *a = &run->rec[0][r], *b = &run->rec[1][r];
        for (int k = 0; k < CN_ROUNDS; k++) {
            ck_assert_msg(a->status[k] == b->status[k], "rank %d round %d: shm %s, " NET_NAME " %s",
                          r, k, torx_status_str(a->status[k]), torx_status_str(b->status[k]));
            ck_assert_msg(strcmp(a->msg[k], b->msg[k]) == 0,
                          "rank %d round %d: shm says '%s', " NET_NAME " says '%s'", r, k,
                          a->msg[k], b->msg[k]);
            if (a->status[k] == TORX_OK)
                ck_assert_msg(memcmp(a->result[k], b->result[k], TORX_CN_PACKET_BYTES) == 0,
                              "rank %d round %d: results differ", r, k);
        }
        ck_assert_int_eq(a->sum_status, TORX_OK);
        ck_assert_int_eq(b->sum_status, TORX_OK);
        ck_assert_msg(memcmp(a->sum, b->sum, sizeof a->sum) == 0,
                      "rank %d: the double sums differ in their bits", r);
    }
    /* The rounds meant to disagree did, and the others did not. */
    for (int k = 0; k < CN_ROUNDS; k++)
        ck_assert_int_eq(run->rec[1][0].status[k], k >= 9 ? TORX_ERR_PROTO : TORX_OK);
    fprintf(stderr, "cn: %d rounds and a %d-double sum identical on shm and " NET_NAME " (%s)\n",
            CN_ROUNDS, CN_DOUBLES, run->rec[1][0].msg[9]);
    munmap(run, sizeof *run);
}
END_TEST

/* ---- A peer that vanishes ----------------------------------------------------------- */

typedef struct dead_run {
    char msg[3][300];
    int32_t status[3];
    double seconds[3];
} dead_run_t;

static int dead_task(torx_boot_t *boot, void *argp)
{
    dead_run_t *run = argp;
    torx_pkt_dev_t *dev;
    const torx_shape_t shape = {3, 1, 1, 1};
    TASK_CHECK(test_open(boot, shape, &dev) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    if (boot->rank == 2)
        _exit(0); /* vanish without closing */
    const double t0 = test_now();
    torx_status_t st = torx_gi_arm(dev);
    if (st == TORX_OK)
        while ((st = torx_gi_poll(dev)) == TORX_AGAIN && test_now() < t0 + 30)
            torx_pkt_poll(dev);
    run->status[boot->rank] = st;
    run->seconds[boot->rank] = test_now() - t0;
    snprintf(run->msg[boot->rank], sizeof run->msg[0], "%s", torx_last_error());
    TASK_CHECK(st != TORX_OK && st != TORX_AGAIN, "barrier with a dead task: %s",
               torx_status_str(st));
    torx_pkt_close(dev);
    return 0;
}

START_TEST(dead_peer_named)
{
    dead_run_t *run = shared_map(sizeof *run);
    use_net();
    RUN_JOB(3, dead_task, run);
    /* Rank 0 waits for rank 2 directly (its child in the tree) and must
     * name it; rank 1 waits for rank 0 and may fail either way. */
    fprintf(stderr, "dead peer: rank 0 after %.2f s: %s\n", run->seconds[0], run->msg[0]);
    ck_assert_int_eq(run->status[0], TORX_ERR_PEER);
    ck_assert_msg(strstr(run->msg[0], "rank 2"), "message '%s' does not name rank 2", run->msg[0]);
    munmap(run, sizeof *run);
}
END_TEST
/* ---- Barrier rounds ------------------------------------------------------------------ */

#define GI_ROUNDS 300

typedef struct gi_run {
    unsigned entered[GI_ROUNDS + 1]; /* tasks that entered round k */
} gi_run_t;

/* Round after round: count in, arm, poll to completion, and check that
 * every task had entered before this one left. Tasks dawdle on different
 * rounds, so each one is sometimes first: of two tasks, rank 0's word then
 * reaches rank 1 before rank 1 arms. */
static int gi_task(torx_boot_t *boot, void *argp)
{
    gi_run_t *run = argp;
    torx_pkt_dev_t *dev;
    const unsigned n = (unsigned)boot->size;
    TASK_CHECK(test_open(boot, (torx_shape_t){n, 1, 1, 1}, &dev) == TORX_OK, "%s",
               torx_last_error());
    for (unsigned k = 1; k <= GI_ROUNDS; k++) {
        if ((k + (unsigned)boot->rank) % 5 == 0)
            usleep(200);
        /* relaxed: the barrier itself must order it before the check */
        __atomic_fetch_add(&run->entered[k], 1, __ATOMIC_RELAXED);
        torx_status_t st = torx_gi_arm(dev);
        TASK_CHECK(st == TORX_OK, "arm round %u: %s", k, torx_last_error());
        const double t0 = test_now();
        while ((st = torx_gi_poll(dev)) == TORX_AGAIN) {
            TASK_CHECK(test_now() < t0 + 30, "round %u never completed", k);
            torx_pkt_poll(dev);
        }
        TASK_CHECK(st == TORX_OK, "poll round %u: %s", k, torx_last_error());
        const unsigned seen = __atomic_load_n(&run->entered[k], __ATOMIC_RELAXED);
        TASK_CHECK(seen == n, "left round %u when %u of %u tasks had entered it", k, seen, n);
    }
    torx_pkt_close(dev);
    return 0;
}

START_TEST(gi_rounds_hold)
{
    const int n = 2 + _i; /* 2: the crossing words; 3: the tree */
    gi_run_t *run = shared_map(sizeof *run);
    use_net();
    RUN_JOB(n, gi_task, run);
    munmap(run, sizeof *run);
}
END_TEST

#endif /* TORX_TEST_NET_CASES_H */
