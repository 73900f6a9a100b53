/* The ofi device (TORX_DEVICE=ofi) on its own: provider and environment
 * errors, back-pressure with a tiny send pool, deposit lines in order with a
 * sender's other packets, RMA bulk transfers, the collective network giving
 * the shm device's results and errors bit for bit, and a dead peer ending a
 * wait with an error that names it.
 *
 * Every job runs over loopback (TORX_OFI_IFACE=lo). The generic packet- and
 * message-layer tests run on this device as well, through
 * test/ofi-variant.sh. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "harness.h"
#include "packet/ofi/ofi.h"

#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void use_ofi(void)
{
    setenv("TORX_DEVICE", "ofi", 1);
    setenv("TORX_OFI_IFACE", "lo", 1);
    /* One host: without this, its tasks would reach each other through shm. */
    setenv("TORX_OFI_LOCAL", "ofi", 1);
    unsetenv("TORX_OFI_TASKS_PER_HOST");
    unsetenv("TORX_OFI_PROVIDER");
    unsetenv("TORX_OFI_TX_PACKETS");
    unsetenv("TORX_OFI_BULK");
    unsetenv("TORX_FIFO_PACKETS");
    unsetenv("TORX_CHAOS");
}

/* The cases every network device passes (net_cases.h). */
#define NET_NAME "ofi"
static void use_net(void)
{
    use_ofi();
}

static const char *net_bulk_path(void)
{
    const char *bulk = getenv("TORX_OFI_BULK");
    return bulk && !strcmp(bulk, "msg") ? "messages" : "rma";
}
#include "net_cases.h"

/* ---- Start-up errors ------------------------------------------------------- */

static const open_err_t open_errs[] = {
    {"TORX_OFI_PROVIDER", "nosuchprovider", TORX_ERR_UNSUPPORTED, "no provider nosuchprovider",
     NULL},
    {"TORX_OFI_PROVIDER", "tcp;;ofi_rxm", TORX_ERR_ENV, "TORX_OFI_PROVIDER='tcp;;ofi_rxm'",
     "empty component"},
    {"TORX_OFI_PROVIDER", "tcp ofi_rxm", TORX_ERR_ENV, "TORX_OFI_PROVIDER='tcp ofi_rxm'", NULL},
    {"TORX_OFI_IFACE", "nosuchif0", TORX_ERR_ENV, "TORX_OFI_IFACE='nosuchif0'",
     "no such network interface"},
    {"TORX_OFI_TX_PACKETS", "0", TORX_ERR_ENV, "TORX_OFI_TX_PACKETS='0'", "out of range"},
    {"TORX_OFI_TX_PACKETS", "12x", TORX_ERR_ENV, "TORX_OFI_TX_PACKETS='12x'", "not an integer"},
    {"TORX_BULK", "cma", TORX_ERR_UNSUPPORTED, "TORX_BULK=cma", "RMA"},
    {"TORX_OFI_LOCAL", "both", TORX_ERR_ENV, "TORX_OFI_LOCAL='both'", "shm, ofi"},
    {"TORX_OFI_TASKS_PER_HOST", "-2", TORX_ERR_ENV, "TORX_OFI_TASKS_PER_HOST='-2'", "out of range"},
    {"TORX_OFI_BULK", "dma", TORX_ERR_ENV, "TORX_OFI_BULK='dma'", "auto, rma, msg"},
};

START_TEST(startup_errors)
{
    const open_err_t *e = &open_errs[_i];
    use_ofi();
    setenv(e->var, e->value, 1);
    RUN_JOB(2, open_err_task, (void *)e);
    unsetenv(e->var);
}
END_TEST

/* A provider that lacks a need is named with the missing capability. Every
 * provider Debian's libfabric offers here has them all, so the check runs
 * on provider descriptions built to lack one thing each. */
typedef struct need_case {
    const char *name;
    enum fi_ep_type type;
    uint64_t caps, msg_order, mode;
    enum fi_threading threading;
    int mr_mode;
    const char *domain;
    const char *missing; /* in the answer; NULL: nothing is missing */
} need_case_t;

#define NEED_CAPS                                                                                  \
    (FI_TAGGED | FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)

static const need_case_t need_cases[] = {
    {"complete", FI_EP_RDM, NEED_CAPS, FI_ORDER_SAS, 0, FI_THREAD_SAFE, 0, "lo", NULL},
    {"datagram", FI_EP_DGRAM, NEED_CAPS, FI_ORDER_SAS, 0, FI_THREAD_SAFE, 0, "lo", "FI_EP_RDM"},
    {"untagged", FI_EP_RDM, NEED_CAPS & ~FI_TAGGED, FI_ORDER_SAS, 0, FI_THREAD_SAFE, 0, "lo",
     "FI_TAGGED"},
    {"tagged only", FI_EP_RDM, NEED_CAPS & ~FI_MSG, FI_ORDER_SAS, 0, FI_THREAD_SAFE, 0, "lo",
     "FI_MSG"},
    {"no rma", FI_EP_RDM, FI_TAGGED | FI_MSG, FI_ORDER_SAS, 0, FI_THREAD_SAFE, 0, "lo", "FI_RMA"},
    {"unordered", FI_EP_RDM, NEED_CAPS, FI_ORDER_RAW, 0, FI_THREAD_SAFE, 0, "lo", "FI_ORDER_SAS"},
    {"single thread", FI_EP_RDM, NEED_CAPS, FI_ORDER_SAS, 0, FI_THREAD_DOMAIN, 0, "lo",
     "FI_THREAD_SAFE"},
    {"local mr", FI_EP_RDM, NEED_CAPS, FI_ORDER_SAS, 0, FI_THREAD_SAFE, FI_MR_LOCAL, "lo",
     "FI_MR_LOCAL"},
    {"context mode", FI_EP_RDM, NEED_CAPS, FI_ORDER_SAS, FI_CONTEXT, FI_THREAD_SAFE, 0, "lo",
     "FI_CONTEXT"},
    {"other iface", FI_EP_RDM, NEED_CAPS, FI_ORDER_SAS, 0, FI_THREAD_SAFE, 0, "eth9", "FI_EP_RDM"},
};

START_TEST(missing_capability_named)
{
    const need_case_t *c = &need_cases[_i];
    struct fi_info *info = fi_allocinfo();
    ck_assert_ptr_nonnull(info);
    info->ep_attr->type = c->type;
    info->caps = c->caps;
    info->tx_attr->msg_order = c->msg_order;
    info->mode = c->mode;
    info->domain_attr->threading = c->threading;
    info->domain_attr->mr_mode = c->mr_mode;
    info->domain_attr->name = strdup(c->domain);
    info->addr_format = FI_SOCKADDR_IN;
    const char *why = torxp_ofi_missing_need(info, "lo", 1);
    if (c->missing)
        ck_assert_msg(strstr(why, c->missing), "%s: '%s' does not name %s", c->name, why,
                      c->missing);
    else
        ck_assert_msg(strstr(why, "combination"), "%s: '%s' names a need it has", c->name, why);
    if (c->missing &&
        !strcmp(c->missing, "FI_RMA")) { /* wanted, needed only for TORX_OFI_BULK=rma */
        why = torxp_ofi_missing_need(info, "lo", 0);
        ck_assert_msg(strstr(why, "combination"), "%s without RMA needed: '%s'", c->name, why);
    }
    fi_freeinfo(info);
}
END_TEST

/* The provider and interface are shown at TORX_VERBOSE=1. */
static int verbose_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_pkt_dev_t *dev;
    const torx_shape_t shape = {2, 1, 1, 1};
    TASK_CHECK(test_open(boot, shape, &dev) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(strcmp(torx_pkt_device_name(dev), "ofi") == 0, "device %s",
               torx_pkt_device_name(dev));
    TASK_CHECK(strcmp(torx_bulk_path(dev), "rma") == 0, "bulk path %s", torx_bulk_path(dev));
    TASK_CHECK(torx_stage_max(dev) == 16384 - 32 - TORX_PKT_MAX_BYTES, "staged pieces of %zu bytes",
               torx_stage_max(dev));
    TASK_CHECK(torx_stage_reaches(dev, test_coord_of(shape, 1 - boot->rank)) &&
                   !torx_stage_reaches(dev, test_coord_of(shape, boot->rank)),
               "staging reaches the other task and not this one");
    torx_pkt_close(dev);
    return 0;
}

START_TEST(verbose_names_provider_and_iface)
{
    use_ofi();
    setenv("TORX_OFI_PROVIDER", "tcp;ofi_rxm", 1);
    setenv("TORX_VERBOSE", "1", 1);
    char buf[8192];
    const int rc = test_job_stderr(2, verbose_task, NULL, buf, sizeof buf);
    unsetenv("TORX_VERBOSE");
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(strstr(buf, "provider tcp;ofi_rxm") && strstr(buf, "interface lo"),
                  "TORX_VERBOSE=1 output lacks the provider or interface:\n%s", buf);
}
END_TEST

/* ---- Back-pressure with a tiny send pool ------------------------------------- */

#define BP_WINDOW 16 /* TORX_FIFO_PACKETS: the credit window */
#define BP_POOL 2    /* TORX_OFI_TX_PACKETS */
#define BP_PACKETS 500
#define BP_LEN 200 /* above tcp;ofi_rxm's 64-byte inline size: needs a pool buffer */

static void bp_stamp(torx_pkt_hdr_t *h, uint32_t seq)
{
    memcpy(h->sw, &seq, 4);
}

static int backpressure_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_pkt_dev_t *dev;
    const torx_shape_t shape = {2, 1, 1, 1};
    TASK_CHECK(test_open(boot, shape, &dev) == TORX_OK, "%s", torx_last_error());
    const torx_coord_t r0 = {0, 0, 0, 0};
    uint8_t payload[BP_LEN];
    if (boot->rank == 1) {
        /* Rank 0 does not read yet: exactly a window's worth goes in, the
         * pool (2 buffers) refilling as the provider completes the sends;
         * room never claims more than the pool or the window holds. */
        uint32_t seq = 0, no_room = 0;
        const double until = test_now() + 1.0;
        while (test_now() < until && seq < BP_PACKETS) {
            const int room = torx_pkt_room(dev, r0);
            TASK_CHECK(room >= 0 && room <= BP_POOL && room <= BP_WINDOW - (int)seq,
                       "room %d with %u packets unread (pool %d, window %d)", room, seq, BP_POOL,
                       BP_WINDOW);
            torx_pkt_hdr_t h;
            torx_pkt_hdr_init(&h, r0, 0);
            bp_stamp(&h, seq);
            memset(payload, (int)(seq & 0xff), sizeof payload);
            const torx_status_t rc = torx_pkt_inject1(dev, &h, payload, sizeof payload);
            TASK_CHECK(rc == TORX_OK || rc == TORX_NO_ROOM, "inject: %s", torx_last_error());
            if (rc == TORX_OK)
                seq++;
            else
                no_room++;
            torx_pkt_poll(dev);
        }
        TASK_CHECK(seq == BP_WINDOW, "%u packets went in before the receiver read, expected %d",
                   seq, BP_WINDOW);
        TASK_CHECK(no_room > 0, "never told TORX_NO_ROOM");
        TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
        unsigned spins = 0;
        while (seq < BP_PACKETS) {
            torx_pkt_hdr_t h;
            torx_pkt_hdr_init(&h, r0, 0);
            bp_stamp(&h, seq);
            memset(payload, (int)(seq & 0xff), sizeof payload);
            const torx_status_t rc = torx_pkt_inject1(dev, &h, payload, sizeof payload);
            TASK_CHECK(rc == TORX_OK || rc == TORX_NO_ROOM, "inject: %s", torx_last_error());
            if (rc == TORX_OK)
                seq++;
            else
                torx_pkt_poll(dev), test_relax(&spins);
        }
    } else {
        TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
        const double deadline = test_now() + 60;
        unsigned spins = 0;
        for (uint32_t want = 0; want < BP_PACKETS;) {
            const torx_pkt_hdr_t *p = torx_pkt_peek(dev);
            if (!p) {
                TASK_CHECK(test_now() < deadline, "only %u of %d packets", want, BP_PACKETS);
                torx_pkt_poll(dev);
                test_relax(&spins);
                continue;
            }
            uint32_t seq;
            memcpy(&seq, p->sw, 4);
            TASK_CHECK(seq == want, "packet %u arrived when %u was due", seq, want);
            TASK_CHECK(p->payload_len == BP_LEN, "length %u", p->payload_len);
            torx_pkt_read(p, payload, 0, BP_LEN);
            for (int i = 0; i < BP_LEN; i++)
                TASK_CHECK(payload[i] == (uint8_t)(seq & 0xff), "packet %u byte %d", seq, i);
            torx_pkt_consume(dev);
            want++;
        }
    }
    torx_status_t st;
    TASK_CHECK((st = dev_barrier(dev)) == TORX_OK, "barrier: %s: %s", torx_status_str(st),
               torx_last_error());
    torx_pkt_close(dev);
    return 0;
}

START_TEST(backpressure_tiny_pool)
{
    use_ofi();
    setenv("TORX_FIFO_PACKETS", "16", 1);
    setenv("TORX_OFI_TX_PACKETS", "2", 1);
    RUN_JOB(2, backpressure_task, NULL);
}
END_TEST

/* ---- Deposit lines, in order with the sender's other packets ------------------- */

#define LINE_N 5 /* tasks along x */
#define LINE_ROUNDS 50

/* Rank 0 sends, per round: a plain packet to every task, then a deposit
 * line toward +x ending at x = LINE_N - 1, then one toward -x ending at
 * x = 1 (wrapping through LINE_N - 1 ...). Every other task must see, per
 * round, its plain packet, then both line copies, in that order. */
static int line_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_pkt_dev_t *dev;
    const torx_shape_t shape = {LINE_N, 1, 1, 1};
    TASK_CHECK(test_open(boot, shape, &dev) == TORX_OK, "%s", torx_last_error());
    if (boot->rank == 0) {
        unsigned spins = 0;
        for (uint32_t r = 0; r < LINE_ROUNDS; r++) {
            for (int k = 0; k < LINE_N + 1; k++) {
                torx_pkt_hdr_t h;
                uint32_t id = r * 3;
                if (k < LINE_N - 1) { /* plain packets to ranks 1 .. LINE_N - 1 */
                    torx_pkt_hdr_init(&h, test_coord_of(shape, k + 1), 0);
                } else if (k == LINE_N - 1) {
                    torx_pkt_hdr_init(&h, test_coord_of(shape, LINE_N - 1), 0);
                    torx_pkt_hdr_set_deposit(&h, TORX_DIM_X, 1);
                    id += 1;
                } else {
                    torx_pkt_hdr_init(&h, test_coord_of(shape, 1), 0);
                    torx_pkt_hdr_set_deposit(&h, TORX_DIM_X, -1);
                    id += 2;
                }
                memcpy(h.sw, &id, 4);
                torx_status_t rc;
                while ((rc = torx_pkt_inject1(dev, &h, &id, sizeof id)) == TORX_NO_ROOM)
                    torx_pkt_poll(dev), test_relax(&spins);
                TASK_CHECK(rc == TORX_OK, "inject: %s", torx_last_error());
            }
        }
    } else {
        const double deadline = test_now() + 60;
        unsigned spins = 0;
        for (uint32_t want = 0; want < 3 * LINE_ROUNDS;) {
            const torx_pkt_hdr_t *p = torx_pkt_peek(dev);
            if (!p) {
                TASK_CHECK(test_now() < deadline, "got %u of %d", want, 3 * LINE_ROUNDS);
                torx_pkt_poll(dev);
                test_relax(&spins);
                continue;
            }
            uint32_t id, body;
            memcpy(&id, p->sw, 4);
            torx_pkt_read(p, &body, 0, sizeof body);
            TASK_CHECK(id == want && body == want, "packet %u (body %u) when %u was due", id, body,
                       want);
            TASK_CHECK(!(want % 3) == !(p->ctl & TORX_PKT_DEPOSIT), "deposit bit of packet %u", id);
            torx_pkt_consume(dev);
            want++;
        }
    }
    torx_status_t st;
    TASK_CHECK((st = dev_barrier(dev)) == TORX_OK, "barrier: %s: %s", torx_status_str(st),
               torx_last_error());
    TASK_CHECK(torx_pkt_peek(dev) == NULL, "a copy too many");
    torx_pkt_close(dev);
    return 0;
}

START_TEST(deposit_line_in_order)
{
    use_ofi();
    RUN_JOB(LINE_N, line_task, NULL);
}
END_TEST

/* The same transfers without RMA, as a provider that lacks it would run
 * them (TORX_OFI_BULK=msg): each one tagged message, over net and over
 * tcp;ofi_rxm. */
START_TEST(bulk_msg_sizes)
{
    use_ofi();
    setenv("TORX_OFI_BULK", "msg", 1);
    if (_i)
        setenv("TORX_OFI_PROVIDER", "tcp;ofi_rxm", 1);
    RUN_JOB(2, bulk_task, NULL);
    unsetenv("TORX_OFI_BULK");
    unsetenv("TORX_OFI_PROVIDER");
}
END_TEST

/* ---- Hybrid jobs: hosts of several tasks -------------------------------------- */

/* Four tasks, two "hosts" of two (TORX_OFI_TASKS_PER_HOST=2): packets
 * between node-mates go through the host's shm device, the others through
 * ofi. Every task streams packets to every other; rank 0 also sends deposit
 * lines that cross the hosts (x 0 -> 3: ranks 1, 2 and 3) and rank 2 lines
 * that stay on its host (x 2 -> 3). Each receiver checks every sender's
 * packets arrive once, in order and intact, and each line's packets in
 * order; then bulk transfers with a node-mate (cross-memory attach) and
 * with a task of the other host (RMA), and the job's global interrupt. */
#define HY_TASKS 4
#define HY_PACKETS 4000
#define HY_LINES 300

static void hy_stamp(torx_pkt_hdr_t *h, uint32_t seq, int sender, int kind)
{
    memcpy(h->sw, &seq, 4);
    h->sw[4] = (uint8_t)sender;
    h->sw[5] = (uint8_t)kind;
}

static int hybrid_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    torx_pkt_dev_t *dev;
    const torx_shape_t shape = {HY_TASKS, 1, 1, 1};
    TASK_CHECK(test_open(boot, shape, &dev) == TORX_OK, "%s", torx_last_error());
    const int me = boot->rank;
    TASK_CHECK(strcmp(torx_pkt_device_name(dev), "ofi") == 0, "device %s",
               torx_pkt_device_name(dev));
    const char *path = torx_bulk_path(dev);
    TASK_CHECK(strstr(path, " on this host") && strstr(path, "rma between hosts"), "bulk path %s",
               path);
    for (int r = 0; r < HY_TASKS; r++)
        TASK_CHECK(r == me || torx_stage_reaches(dev, test_coord_of(shape, r)),
                   "no staging toward rank %d", r);

    /* Lines: rank 0's cross the hosts, rank 2's stay on its host. */
    const int line_to = me == 0 || me == 2 ? 3 : -1;
    uint32_t sent[HY_TASKS] = {0}, next[HY_TASKS] = {0}, next_line[HY_TASKS] = {0}, lines = 0;
    uint64_t got = 0;
    const uint64_t want = (uint64_t)(HY_TASKS - 1) * HY_PACKETS + (me == 3 ? 2 * HY_LINES
                                                                   : me == 1 || me == 2 ? HY_LINES
                                                                                        : 0);
    uint8_t payload[TORX_PKT_MAX_PAYLOAD];
    const double deadline = test_now() + 60;
    for (int busy = 1; busy || got < want;) {
        busy = 0;
        for (int d = 0; d < HY_TASKS; d++) {
            if (d == me || sent[d] == HY_PACKETS)
                continue;
            busy = 1;
            torx_pkt_hdr_t h;
            torx_pkt_hdr_init(&h, test_coord_of(shape, d), 0);
            hy_stamp(&h, sent[d], me, 0);
            const size_t len = sent[d] % (TORX_PKT_MAX_PAYLOAD + 1);
            for (size_t i = 0; i < len; i++)
                payload[i] = (uint8_t)(sent[d] + i + (unsigned)me);
            const torx_status_t rc = torx_pkt_inject1(dev, &h, payload, len);
            TASK_CHECK(rc == TORX_OK || rc == TORX_NO_ROOM, "inject: %s", torx_last_error());
            sent[d] += rc == TORX_OK;
        }
        if (line_to >= 0 && lines < HY_LINES) {
            busy = 1;
            torx_pkt_hdr_t h;
            torx_pkt_hdr_init(&h, test_coord_of(shape, line_to), 0);
            torx_pkt_hdr_set_deposit(&h, TORX_DIM_X, 1);
            hy_stamp(&h, lines, me, 1);
            const torx_status_t rc = torx_pkt_inject1(dev, &h, &lines, sizeof lines);
            TASK_CHECK(rc == TORX_OK || rc == TORX_NO_ROOM, "line: %s", torx_last_error());
            lines += rc == TORX_OK;
        }
        torx_pkt_poll(dev);
        for (const torx_pkt_hdr_t *p; (p = torx_pkt_peek(dev));) {
            uint32_t seq;
            memcpy(&seq, p->sw, 4);
            const int from = p->sw[4], kind = p->sw[5];
            TASK_CHECK(from < HY_TASKS && from != me, "packet from %d", from);
            if (kind == 1) {
                TASK_CHECK(from == 0 || from == 2, "a line from rank %d", from);
                TASK_CHECK(seq == next_line[from], "line from %d: %u arrived when %u was due", from,
                           seq, next_line[from]);
                next_line[from]++;
            } else {
                TASK_CHECK(seq == next[from], "from %d: %u arrived when %u was due", from, seq,
                           next[from]);
                const size_t len = seq % (TORX_PKT_MAX_PAYLOAD + 1);
                TASK_CHECK(p->payload_len == len, "length %u, expected %zu", p->payload_len, len);
                torx_pkt_read(p, payload, 0, len);
                for (size_t i = 0; i < len; i++)
                    TASK_CHECK(payload[i] == (uint8_t)(seq + i + (unsigned)from),
                               "from %d, packet %u: byte %zu", from, seq, i);
                next[from]++;
            }
            got++;
            torx_pkt_consume(dev);
        }
        TASK_CHECK(test_now() < deadline, "only %llu of %llu packets in 60 s",
                   (unsigned long long)got, (unsigned long long)want);
    }
    TASK_CHECK(got == want, "%llu packets, expected %llu", (unsigned long long)got,
               (unsigned long long)want);
    torx_status_t st;
    TASK_CHECK((st = dev_barrier(dev)) == TORX_OK, "barrier: %s: %s", torx_status_str(st),
               torx_last_error());

    /* Bulk: a get from the node-mate and one from a task of the other host. */
    const size_t n = (size_t)1 << 20;
    uint8_t *src = malloc(n), *dst = malloc(n);
    TASK_CHECK(src && dst, "out of memory");
    for (size_t i = 0; i < n; i++)
        src[i] = pat(me, i);
    bulk_addrs_t mine = {(uint64_t)(uintptr_t)src, (uint64_t)(uintptr_t)dst}, all[HY_TASKS];
    TASK_CHECK(boot->allgather(boot, &mine, all, sizeof mine) == TORX_OK, "allgather");
    const int peers[2] = {me ^ 1, (me + 2) % HY_TASKS};
    for (int k = 0; k < 2; k++) {
        const int peer = peers[k];
        torx_bulk_t op;
        memset(dst, 0, n);
        TASK_CHECK(torx_bulk_get(dev, &op, test_coord_of(shape, peer),
                                 (const void *)(uintptr_t)all[peer].src, dst, n) == TORX_OK,
                   "get from %d: %s", peer, torx_last_error());
        st = bulk_wait(dev, &op);
        TASK_CHECK(st == TORX_OK, "get from %d: %s (%s)", peer, torx_status_str(st),
                   torx_last_error());
        for (size_t i = 0; i < n; i++)
            TASK_CHECK(dst[i] == pat(peer, i), "get from %d: byte %zu", peer, i);
        TASK_CHECK((st = dev_barrier(dev)) == TORX_OK, "barrier: %s: %s", torx_status_str(st),
                   torx_last_error());
    }
    torx_pkt_close(dev);
    free(src);
    free(dst);
    return 0;
}

START_TEST(hybrid_routes_in_order)
{
    use_ofi();
    unsetenv("TORX_OFI_LOCAL");
    setenv("TORX_OFI_TASKS_PER_HOST", "2", 1);
    RUN_JOB(HY_TASKS, hybrid_task, NULL);
    unsetenv("TORX_OFI_TASKS_PER_HOST");
}
END_TEST

/* Every task must agree on TORX_OFI_LOCAL; one that differs fails them all,
 * naming the variable, rather than leaving half the job on another device. */
static int local_mismatch_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    if (boot->rank == 1)
        setenv("TORX_OFI_LOCAL", "ofi", 1);
    torx_pkt_dev_t *dev = NULL;
    const torx_shape_t shape = {2, 1, 1, 1};
    const torx_status_t rc = test_open(boot, shape, &dev);
    TASK_CHECK(rc == TORX_ERR_ENV, "open: %s (%s)", torx_status_str(rc), torx_last_error());
    TASK_CHECK(strstr(torx_last_error(), "TORX_OFI_LOCAL=ofi") &&
                   strstr(torx_last_error(), "same value"),
               "message: %s", torx_last_error());
    return 0;
}

START_TEST(hybrid_local_mismatch_named)
{
    use_ofi();
    unsetenv("TORX_OFI_LOCAL");
    RUN_JOB(2, local_mismatch_task, NULL);
}
END_TEST

/* TORX_DEVICE=auto: the device follows the hosts. arg: tasks per emulated
 * host; the device's name is "shm" when they are all on one. */
static int auto_task(torx_boot_t *boot, void *argp)
{
    const char *want = argp;
    torx_pkt_dev_t *dev = NULL;
    const torx_shape_t shape = {2, 1, 1, 1};
    TASK_CHECK(test_open(boot, shape, &dev) == TORX_OK, "open: %s", torx_last_error());
    TASK_CHECK(!strcmp(torx_pkt_device_name(dev), want), "device %s, expected %s",
               torx_pkt_device_name(dev), want);
    TASK_CHECK(dev_barrier(dev) == TORX_OK, "barrier: %s", torx_last_error());
    torx_pkt_close(dev);
    return 0;
}

START_TEST(auto_follows_hosts)
{
    unsetenv("TORX_OFI_LOCAL");
    setenv("TORX_DEVICE", "auto", 1);
    setenv("TORX_OFI_IFACE", "lo", 1);
    setenv("TORX_OFI_TASKS_PER_HOST", "2", 1); /* both on one host */
    RUN_JOB(2, auto_task, "shm");
    setenv("TORX_OFI_TASKS_PER_HOST", "1", 1); /* a host each */
    RUN_JOB(2, auto_task, "ofi");
    unsetenv("TORX_OFI_TASKS_PER_HOST");
    unsetenv("TORX_DEVICE");
    RUN_JOB(2, auto_task, "shm"); /* the default, on this one host */
}
END_TEST

/* A task that fails to start is named by the others with its host and its
 * own message. */
static int vote_task(torx_boot_t *boot, void *argp)
{
    (void)argp;
    if (boot->rank == 1)
        setenv("TORX_OFI_PROVIDER", "no-such-provider", 1);
    torx_pkt_dev_t *dev = NULL;
    const torx_status_t rc = test_open(boot, (torx_shape_t){2, 1, 1, 1}, &dev);
    TASK_CHECK(rc != TORX_OK, "open succeeded");
    if (boot->rank == 0)
        TASK_CHECK(strstr(torx_last_error(), "rank 1 on host ") &&
                       strstr(torx_last_error(), "failed to open the ofi device: ") &&
                       strstr(torx_last_error(), "no-such-provider"),
                   "message: %s", torx_last_error());
    return 0;
}

START_TEST(failed_start_named_with_its_words)
{
    use_ofi();
    RUN_JOB(2, vote_task, NULL);
}
END_TEST

static Suite *ofi_suite(void)
{
    Suite *s = suite_create("ofi");
    TCase *tc = tcase_create("ofi");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, startup_errors, 0, (int)(sizeof open_errs / sizeof open_errs[0]));
    tcase_add_loop_test(tc, missing_capability_named, 0,
                        (int)(sizeof need_cases / sizeof need_cases[0]));
    tcase_add_test(tc, verbose_names_provider_and_iface);
    tcase_add_test(tc, backpressure_tiny_pool);
    tcase_add_test(tc, deposit_line_in_order);
    tcase_add_test(tc, stage_carries_descriptor);
    tcase_add_test(tc, bulk_rma_sizes);
    tcase_add_loop_test(tc, bulk_msg_sizes, 0, 2);
    tcase_add_test(tc, cn_matches_shm_bitwise);
    tcase_add_loop_test(tc, gi_rounds_hold, 0, 2);
    tcase_add_test(tc, dead_peer_named);
    tcase_add_test(tc, hybrid_routes_in_order);
    tcase_add_test(tc, hybrid_local_mismatch_named);
    tcase_add_test(tc, auto_follows_hosts);
    tcase_add_test(tc, failed_start_named_with_its_words);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return test_run_suite(ofi_suite());
}
