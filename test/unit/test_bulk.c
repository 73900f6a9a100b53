/* Bulk transfer on the shm device, through the public API, in two-task fork
 * jobs (shape 2x1x1x1, rank r at (r,0,0,0)): gets and puts of edge sizes at
 * unaligned offsets on both paths, many transfers in flight, a dead peer,
 * the path choice (forced, automatic, and with cross-memory attach made
 * impossible), the detection of a torx_bulk_t overwritten in flight, and
 * long gets shared with the owner of the source, or left to the reader. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* process_vm_readv */
#endif

#include "harness.h"
#include "packet/pkt_internal.h" /* dev->failed */
#include "packet/shm/shm.h"      /* the shared-get counts */

#include <errno.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static const torx_shape_t SHAPE2 = {2, 1, 1, 1};

/* Bytes around every destination range that no transfer may touch. */
#define GUARD 16
#define GUARD_BYTE 0xA5
/* Longest a single transfer or meeting may take before the task fails. */
#define WAIT_S 60.0

/* What task r's source buffer holds at index i: position-dependent, so a
 * shifted, reordered or misplaced chunk shows up. */
static inline uint8_t pat(int seed, uint64_t i)
{
    uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ULL ^ ((uint64_t)(seed + 1) << 40);
    return (uint8_t)(x >> 56 ^ x >> 29);
}

static void fill(uint8_t *buf, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = pat(seed, i);
}

/* Index of the first byte of buf[0..n) that is not pat(seed, base + i), or
 * -1 when all match. */
static long mismatch(const uint8_t *buf, size_t n, int seed, uint64_t base)
{
    for (size_t i = 0; i < n; i++)
        if (buf[i] != pat(seed, base + i))
            return (long)i;
    return -1;
}

/* Index of the first byte of buf[0..n) other than GUARD_BYTE, or -1. */
static long guard_broken(const uint8_t *buf, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (buf[i] != GUARD_BYTE)
            return (long)i;
    return -1;
}

/* Whether the n bytes at buf + at are seed's pattern from base and the
 * GUARD_BYTE bytes around them (buf[0..at), and GUARD after) are intact;
 * what is wrong goes to stderr, named by what. */
static bool landed(const uint8_t *buf, size_t at, size_t n, int seed, uint64_t base,
                   const char *what)
{
    const long bad = mismatch(buf + at, n, seed, base);
    if (bad >= 0) {
        fprintf(stderr, "%s of %zu bytes: byte %ld is 0x%02x, expected 0x%02x\n", what, n, bad,
                buf[at + (size_t)bad], pat(seed, base + (uint64_t)bad));
        return false;
    }
    if (guard_broken(buf, at) >= 0 || guard_broken(buf + at + n, GUARD) >= 0) {
        fprintf(stderr, "%s of %zu bytes wrote outside its range\n", what, n);
        return false;
    }
    return true;
}

/* Meeting packets received but not yet waited for, by step. Every loop
 * that waits for bulk transfers also takes these out of the FIFOs: on the
 * fifo path, bulk packets queued behind an unconsumed packet from the same
 * sender wait for it, as on the hardware. */
static unsigned mailbox[256];

/* Takes a waiting user packet, if any, into the mailbox. */
static void drain(torx_pkt_dev_t *dev)
{
    if (!torx_pkt_poll(dev))
        return;
    const torx_pkt_hdr_t *p = torx_pkt_peek(dev);
    if (p) {
        mailbox[p->sw[0]]++;
        torx_pkt_consume(dev);
    }
}

/* The two tasks meet: each sends the other a user packet tagged step and
 * waits for the peer's, polling all along so that bulk traffic keeps
 * flowing. 0 on success, -1 on timeout or an unexpected packet. */
static int task_sync(torx_pkt_dev_t *dev, torx_coord_t peer, uint8_t step)
{
    torx_pkt_hdr_t h;
    torx_pkt_hdr_init(&h, peer, 0);
    h.sw[0] = step;
    const double end = test_now() + WAIT_S;
    int sent = 0, got = 0;
    unsigned spins = 0;
    while (!sent || !got) {
        if (test_now() > end) {
            fprintf(stderr, "sync step %u: timed out (sent %d, received %d)\n", step, sent, got);
            return -1;
        }
        if (!sent) {
            torx_status_t st = torx_pkt_inject1(dev, &h, &step, 1);
            if (st == TORX_OK)
                sent = 1;
            else if (st != TORX_NO_ROOM) {
                fprintf(stderr, "sync step %u: inject: %s\n", step, torx_last_error());
                return -1;
            }
        }
        if (!got) {
            drain(dev);
            if (mailbox[step]) {
                mailbox[step]--;
                got = 1;
            }
        }
        test_relax(&spins);
    }
    for (unsigned i = 0; i < 256; i++)
        if (mailbox[i]) {
            fprintf(stderr, "sync step %u: a packet for step %u is left over\n", step, i);
            return -1;
        }
    return 0;
}

/* Tests op until it is no longer TORX_AGAIN, or WAIT_S passes (then
 * TORX_AGAIN). */
static torx_status_t wait_op(torx_pkt_dev_t *dev, torx_bulk_t *op, double wait_s)
{
    const double end = test_now() + wait_s;
    unsigned spins = 0;
    torx_status_t st;
    while ((st = torx_bulk_test(dev, op)) == TORX_AGAIN) {
        if (test_now() > end)
            return TORX_AGAIN;
        drain(dev);
        test_relax(&spins);
    }
    return st;
}

typedef struct task_addrs {
    uint64_t src, dst;
    int64_t pid;
} task_addrs_t;

/* Collective: whether this task can read its peer's memory with
 * process_vm_readv, tried directly. */
static bool peer_readable(torx_boot_t *boot)
{
    const int peer = 1 - boot->rank;
    uint64_t word = 0x1122334455667788ULL ^ (uint64_t)boot->rank;
    task_addrs_t mine = {(uint64_t)(uintptr_t)&word, 0, getpid()}, all[2];
    if (boot->allgather(boot, &mine, all, sizeof mine) != TORX_OK)
        return false;
    uint64_t got = 0;
    struct iovec l = {&got, sizeof got}, r = {(void *)(uintptr_t)all[peer].src, sizeof got};
    const bool ok = process_vm_readv((pid_t)all[peer].pid, &l, 1, &r, 1, 0) == sizeof got &&
                    got == (0x1122334455667788ULL ^ (uint64_t)peer);
    /* The peer's word must outlive its reader's probe. */
    return boot->barrier(boot) == TORX_OK && ok;
}

/* Opens the device with TORX_BULK=mode. Returns 1 when open; 0 when mode is
 * cma and this host really forbids cross-memory attach, so the refusal is
 * all a cma test can check here; -1 on failure (reported). */
static int open_bulk(torx_boot_t *boot, const char *mode, torx_pkt_dev_t **dev)
{
    if (setenv("TORX_BULK", mode, 1) != 0) {
        fprintf(stderr, "rank %d: setenv: %s\n", boot->rank, strerror(errno));
        return -1;
    }
    torx_status_t st = test_open(boot, SHAPE2, dev);
    if (st == TORX_OK && strcmp(torx_bulk_path(*dev), mode) == 0)
        return 1;
    if (st == TORX_OK) {
        fprintf(stderr, "rank %d: TORX_BULK=%s gave path %s\n", boot->rank, mode,
                torx_bulk_path(*dev));
        return -1;
    }
    fprintf(stderr, "rank %d: open with TORX_BULK=%s: %s\n", boot->rank, mode, torx_last_error());
    if (st != TORX_ERR_UNSUPPORTED || strcmp(mode, "cma") != 0)
        return -1;
    if (peer_readable(boot)) {
        fprintf(stderr, "rank %d: ... yet process_vm_readv of the peer works\n", boot->rank);
        return -1;
    }
    fprintf(stderr,
            "rank %d: cross-memory attach is forbidden here: only the refusal was "
            "checked\n",
            boot->rank);
    return 0;
}

/* ---- Edge sizes on one path --------------------------------------------- */

/* Sizes around the 240-byte payload and the fifo path's 224 data bytes per
 * packet, a page plus a bit, a megabyte plus a bit, and 64 MiB. */
static const size_t SIZES[] = {
    0, 1, 223, 224, 225, 239, 240, 241, 448, 4096 + 3, (1u << 20) + 7, 64u << 20};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])
#define MAX_SIZE ((size_t)64 << 20)

static int task_sizes(torx_boot_t *boot, void *arg)
{
    const char *mode = arg;
    torx_pkt_dev_t *dev;
    const int opened = open_bulk(boot, mode, &dev);
    if (opened <= 0)
        return opened < 0;
    torx_status_t st;
    const int me = boot->rank, peer = 1 - me;
    const torx_coord_t pc = test_coord_of(SHAPE2, peer);
    const bool sync_path = strcmp(mode, "cma") == 0;

    uint8_t *src = malloc(MAX_SIZE + 2 * GUARD), *dst = malloc(MAX_SIZE + 2 * GUARD);
    TASK_CHECK(src && dst, "out of memory");
    fill(src, MAX_SIZE + 2 * GUARD, me);
    task_addrs_t mine = {(uint64_t)(uintptr_t)src, (uint64_t)(uintptr_t)dst, getpid()}, all[2];
    TASK_CHECK(boot->allgather(boot, &mine, all, sizeof mine) == TORX_OK, "allgather");

    uint8_t step = 0;
    for (size_t k = 0; k < NSIZES; k++) {
        const size_t n = SIZES[k];
        /* Offsets 1..7 and 3..9 so source and destination are unaligned and
         * differently so; the guards stay within GUARD bytes. */
        const size_t roff = 1 + (k * 3) % 7, loff = 3 + (k * 5) % 7;
        torx_bulk_t op;

        /* get: dst[loff..] <- peer's src[roff..] */
        memset(dst, GUARD_BYTE, n + 2 * GUARD);
        st = torx_bulk_get(dev, &op, pc, (const void *)(uintptr_t)(all[peer].src + roff),
                           dst + loff, n);
        TASK_CHECK(st == TORX_OK, "get of %zu bytes: %s", n, torx_last_error());
        if (n == 0 || sync_path)
            TASK_CHECK(torx_bulk_test(dev, &op) == TORX_OK,
                       "get of %zu bytes on path %s not complete at once", n, mode);
        st = wait_op(dev, &op, WAIT_S);
        TASK_CHECK(st == TORX_OK, "get of %zu bytes: %s (%s)", n, torx_status_str(st),
                   torx_last_error());
        TASK_CHECK(torx_bulk_test(dev, &op) == TORX_OK, "a completed get tests OK again");
        TASK_CHECK(landed(dst, loff, n, peer, roff, "get"), "get of %zu bytes", n);
        TASK_CHECK(task_sync(dev, pc, ++step) == 0, "sync after get of %zu", n);

        /* put: peer's dst[loff..] <- src[roff..]; each side resets its own
         * dst before either starts putting. */
        memset(dst, GUARD_BYTE, n + 2 * GUARD);
        TASK_CHECK(task_sync(dev, pc, ++step) == 0, "sync before put of %zu", n);
        st = torx_bulk_put(dev, &op, pc, (void *)(uintptr_t)(all[peer].dst + loff), src + roff, n);
        TASK_CHECK(st == TORX_OK, "put of %zu bytes: %s", n, torx_last_error());
        if (n == 0 || sync_path)
            TASK_CHECK(torx_bulk_test(dev, &op) == TORX_OK,
                       "put of %zu bytes on path %s not complete at once", n, mode);
        st = wait_op(dev, &op, WAIT_S);
        TASK_CHECK(st == TORX_OK, "put of %zu bytes: %s (%s)", n, torx_status_str(st),
                   torx_last_error());
        /* Complete means written at the target: the peer checks right after. */
        TASK_CHECK(task_sync(dev, pc, ++step) == 0, "sync after put of %zu", n);
        TASK_CHECK(landed(dst, loff, n, peer, roff, "put"), "put of %zu bytes", n);
    }
    TASK_CHECK(task_sync(dev, pc, ++step) == 0, "final sync");
    torx_pkt_close(dev);
    free(src);
    free(dst);
    return 0;
}

START_TEST(sizes_cma)
{
    RUN_JOB(2, task_sizes, "cma");
}
END_TEST

START_TEST(sizes_fifo)
{
    RUN_JOB(2, task_sizes, "fifo");
}
END_TEST

/* ---- Shared gets ------------------------------------------------------------ */

/* The least shared get, a megabyte and 4 MiB at odd lengths and offsets,
 * and 64 MiB (milliseconds: the owner joins in whatever its timing). */
static const size_t SHARE_SIZES[] = {TORXP_BULK_SHARE_MIN_DEFAULT, (1u << 20) + 5,
                                     (4u << 20) + 4093, 64u << 20};
#define NSHARE (sizeof SHARE_SIZES / sizeof SHARE_SIZES[0])
#define SHARE_MARK 0x5A

typedef struct share_counts {
    uint64_t gets, written_for_us, helped;
} share_counts_t;

/* Rank 0 gets SHARE_SIZES from rank 1 (torx_bulk_get_shared), then 64 MiB
 * with a plain torx_bulk_get, which must not be offered. With arg NULL rank 1 polls meanwhile
 * (waiting in task_sync) and must write part of the long gets; with arg
 * non-NULL it is away (in the bootstrap's barrier, not polling), so rank 0
 * copies alone, and the BULK_SHARE that rank 1 handles afterwards must not
 * write a byte into what rank 0 has since overwritten. */
static int task_shared(torx_boot_t *boot, void *arg)
{
    const bool away = arg != NULL;
    torx_pkt_dev_t *dev;
    const int opened = open_bulk(boot, "cma", &dev);
    if (opened <= 0)
        return opened < 0;
    const torxp_shm_dev_t *d = (const torxp_shm_dev_t *)dev;
    TASK_CHECK(d->share_min == (uint64_t)TORXP_BULK_SHARE_MIN_DEFAULT,
               "gets shared from %llu bytes, not the default", (unsigned long long)d->share_min);
    const int me = boot->rank, peer = 1 - me;
    const torx_coord_t pc = test_coord_of(SHAPE2, peer);
    const size_t max = SHARE_SIZES[NSHARE - 1] + 2 * GUARD;
    uint8_t *buf = malloc(max);
    TASK_CHECK(buf, "out of memory");
    if (me == 1)
        fill(buf, max, me);
    task_addrs_t mine = {(uint64_t)(uintptr_t)buf, 0, getpid()}, all[2];
    TASK_CHECK(boot->allgather(boot, &mine, all, sizeof mine) == TORX_OK, "allgather");

    uint8_t step = 0;
    for (size_t k = 0; k < NSHARE; k++) {
        const size_t n = SHARE_SIZES[k], roff = 1 + k, loff = 3 + 2 * k;
        if (me == 0)
            memset(buf, GUARD_BYTE, n + 2 * GUARD);
        TASK_CHECK(task_sync(dev, pc, ++step) == 0, "sync before get of %zu", n);
        if (me == 1) {
            if (away)
                TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
            /* Present: polls in here, while rank 0 gets. */
            TASK_CHECK(task_sync(dev, pc, ++step) == 0, "sync after get of %zu", n);
            continue;
        }
        torx_bulk_t op;
        torx_status_t st = torx_bulk_get_shared(
            dev, &op, pc, (const void *)(uintptr_t)(all[1].src + roff), buf + loff, n);
        TASK_CHECK(st == TORX_OK, "get of %zu bytes: %s", n, torx_last_error());
        TASK_CHECK(torx_bulk_test(dev, &op) == TORX_OK, "cma get of %zu not complete at once", n);
        TASK_CHECK(landed(buf, loff, n, 1, roff, "shared get"), "shared get of %zu bytes", n);
        if (away) {
            memset(buf + loff, SHARE_MARK, n);
            TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
        }
        /* Rank 1 takes our BULK_SHARE before this meeting's packet. */
        TASK_CHECK(task_sync(dev, pc, ++step) == 0, "sync after get of %zu", n);
        for (size_t i = 0; away && i < n; i++)
            TASK_CHECK(buf[loff + i] == SHARE_MARK,
                       "byte %zu of a get of %zu bytes was written after the get returned", i, n);
    }
    /* A plain torx_bulk_get is never offered, owner present or not. */
    TASK_CHECK(task_sync(dev, pc, ++step) == 0, "sync before a plain get");
    if (me == 0) {
        torx_bulk_t op;
        TASK_CHECK(torx_bulk_get(dev, &op, pc, (const void *)(uintptr_t)all[1].src, buf,
                                 SHARE_SIZES[NSHARE - 1]) == TORX_OK,
                   "plain get: %s", torx_last_error());
        TASK_CHECK(mismatch(buf, SHARE_SIZES[NSHARE - 1], 1, 0) < 0, "plain get: wrong data");
    }
    TASK_CHECK(task_sync(dev, pc, ++step) == 0, "sync after a plain get");
    share_counts_t c = {d->shared_gets, d->bytes_written_for_us, d->bytes_helped}, both[2];
    TASK_CHECK(boot->allgather(boot, &c, both, sizeof c) == TORX_OK, "allgather");
    TASK_CHECK(both[0].gets == NSHARE && both[1].gets == 0, "gets offered: %llu and %llu",
               (unsigned long long)both[0].gets, (unsigned long long)both[1].gets);
    TASK_CHECK(both[0].written_for_us == both[1].helped,
               "rank 1 wrote %llu bytes, rank 0 counted %llu", (unsigned long long)both[1].helped,
               (unsigned long long)both[0].written_for_us);
    if (away)
        TASK_CHECK(both[1].helped == 0, "rank 1 wrote %llu bytes while away",
                   (unsigned long long)both[1].helped);
    else
        TASK_CHECK(both[1].helped >= TORXP_BULK_SHARE_PIECE,
                   "rank 1 polled all along but wrote only %llu bytes",
                   (unsigned long long)both[1].helped);
    TASK_CHECK(task_sync(dev, pc, ++step) == 0, "final sync");
    torx_pkt_close(dev);
    free(buf);
    return 0;
}

START_TEST(shared_get_owner_helps)
{
    RUN_JOB(2, task_shared, NULL);
}
END_TEST

START_TEST(shared_get_owner_away)
{
    RUN_JOB(2, task_shared, "away");
}
END_TEST

/* Rank 1 plays the owner by hand on rank 0's share record (white box):
 * it claims bytes of a 64 MiB get as the device would, then, 100 ms later,
 * either writes them (arg "late": rank 0's get must not return before,
 * since the bytes are not there until then) or gives them up (arg
 * "abandon": rank 0 must copy them itself). */
static int task_shared_by_hand(torx_boot_t *boot, void *arg)
{
    const bool abandon = strcmp(arg, "abandon") == 0;
    torx_pkt_dev_t *dev;
    const int opened = open_bulk(boot, "cma", &dev);
    if (opened <= 0)
        return opened < 0;
    const torxp_shm_dev_t *d = (const torxp_shm_dev_t *)dev;
    const int me = boot->rank, peer = 1 - me;
    const torx_coord_t pc = test_coord_of(SHAPE2, peer);
    const size_t n = (size_t)64 << 20, roff = 5, loff = 7;
    uint8_t *buf = malloc(n + 2 * GUARD);
    TASK_CHECK(buf, "out of memory");
    if (me == 1)
        fill(buf, n + 2 * GUARD, me);
    else
        memset(buf, GUARD_BYTE, n + 2 * GUARD);
    task_addrs_t mine = {(uint64_t)(uintptr_t)buf, 0, getpid()}, all[2];
    TASK_CHECK(boot->allgather(boot, &mine, all, sizeof mine) == TORX_OK, "allgather");
    TASK_CHECK(task_sync(dev, pc, 1) == 0, "sync before the get");
    uint64_t mine_bytes = 0;
    if (me == 1) {
        torxp_shm_share_t *r = &d->share[torx_coord_index(SHAPE2, pc)];
        const double end = test_now() + WAIT_S;
        uint64_t w, at, len;
        for (;;) { /* rank 0's get is on, and bytes are left */
            TASK_CHECK(test_now() < end, "rank 0's get never showed in its share record");
            w = __atomic_load_n(&r->claim, __ATOMIC_ACQUIRE);
            at = w & (((uint64_t)1 << TORXP_SHM_SHARE_OFF_BITS) - 1);
            len = __atomic_load_n(&r->len, __ATOMIC_RELAXED);
            if (w >> TORXP_SHM_SHARE_OFF_BITS && len == n && at + 4096 < len) {
                mine_bytes = (len - at) / 2 & ~(uint64_t)4095;
                if (__atomic_compare_exchange_n(&r->claim, &w, w + mine_bytes, false,
                                                __ATOMIC_RELAXED, __ATOMIC_RELAXED))
                    break;
            }
        }
        usleep(100000);
        if (abandon) {
            __atomic_store_n(&r->abandoned_len, mine_bytes, __ATOMIC_RELAXED);
            __atomic_store_n(&r->abandoned, at + 1, __ATOMIC_RELEASE);
        } else {
            struct iovec l = {buf + roff + at, mine_bytes},
                         rv = {(void *)(uintptr_t)(all[0].src + loff + at), mine_bytes};
            TASK_CHECK(process_vm_writev((pid_t)all[0].pid, &l, 1, &rv, 1, 0) ==
                           (ssize_t)mine_bytes,
                       "process_vm_writev: %s", strerror(errno));
            __atomic_fetch_add(&r->helped, mine_bytes, __ATOMIC_RELEASE);
        }
    } else {
        torx_bulk_t op;
        torx_status_t st = torx_bulk_get_shared(
            dev, &op, pc, (const void *)(uintptr_t)(all[1].src + roff), buf + loff, n);
        TASK_CHECK(st == TORX_OK, "get: %s", torx_last_error());
        TASK_CHECK(landed(buf, loff, n, 1, roff, "shared get"), "the get returned early (owner %s)",
                   abandon ? "gave its bytes up" : "wrote late");
    }
    uint64_t counts[2] = {me ? mine_bytes : d->bytes_written_for_us, 0}, both[2][2];
    TASK_CHECK(boot->allgather(boot, counts, both, sizeof counts) == TORX_OK, "allgather");
    TASK_CHECK(both[1][0] >= 4096, "rank 1 claimed %llu bytes", (unsigned long long)both[1][0]);
    TASK_CHECK(both[0][0] == (abandon ? 0 : both[1][0]),
               "rank 0 counted %llu bytes written for it; rank 1 %s %llu",
               (unsigned long long)both[0][0], abandon ? "gave up" : "wrote",
               (unsigned long long)both[1][0]);
    TASK_CHECK(task_sync(dev, pc, 2) == 0, "final sync");
    torx_pkt_close(dev);
    free(buf);
    return 0;
}

START_TEST(shared_get_owner_late)
{
    RUN_JOB(2, task_shared_by_hand, "late");
}
END_TEST

START_TEST(shared_get_owner_gives_up)
{
    RUN_JOB(2, task_shared_by_hand, "abandon");
}
END_TEST

START_TEST(shared_get_bad_min)
{
    static const char *const bad[] = {"65536", "-1", "1M", "131071"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        test_env_case_t e = {"TORX_BULK_SHARE_MIN", bad[i], NULL};
        RUN_JOB(1, test_env_refused_task, &e);
    }
    unsetenv("TORX_BULK_SHARE_MIN");
}
END_TEST

/* ---- Many transfers in flight on the fifo path ------------------------------ */

#define NOUT 12
static const size_t OUT_SIZES[NOUT] = {1, 5000, 224,   100000, 225, (1u << 20) + 5,
                                       3, 777,  65537, 240,    448, 300001};

static int task_outstanding(torx_boot_t *boot, void *arg)
{
    (void)arg;
    TASK_CHECK(setenv("TORX_BULK", "fifo", 1) == 0, "setenv: %s", strerror(errno));
    torx_pkt_dev_t *dev;
    torx_status_t st = test_open(boot, SHAPE2, &dev);
    TASK_CHECK(st == TORX_OK, "open: %s", torx_last_error());
    const int me = boot->rank, peer = 1 - me;
    const torx_coord_t pc = test_coord_of(SHAPE2, peer);

    /* Region i of src and dst starts at off[i]: disjoint, unaligned. */
    size_t off[NOUT], total = 0;
    for (int i = 0; i < NOUT; i++) {
        off[i] = total + (size_t)i % 7 + 1;
        total = off[i] + OUT_SIZES[i] + GUARD;
    }
    uint8_t *src = malloc(total), *dst = malloc(total);
    TASK_CHECK(src && dst, "out of memory");
    fill(src, total, me);
    memset(dst, GUARD_BYTE, total);
    task_addrs_t mine = {(uint64_t)(uintptr_t)src, (uint64_t)(uintptr_t)dst, getpid()}, all[2];
    TASK_CHECK(boot->allgather(boot, &mine, all, sizeof mine) == TORX_OK, "allgather");
    TASK_CHECK(task_sync(dev, pc, 1) == 0, "sync before the transfers");

    /* Two gets for every put, all started before any is tested: region i of
     * my dst ends up holding region i of the peer's src either way. */
    torx_bulk_t ops[NOUT];
    for (int i = 0; i < NOUT; i++) {
        if (i % 3 == 2)
            st = torx_bulk_put(dev, &ops[i], pc, (void *)(uintptr_t)(all[peer].dst + off[i]),
                               src + off[i], OUT_SIZES[i]);
        else
            st = torx_bulk_get(dev, &ops[i], pc, (const void *)(uintptr_t)(all[peer].src + off[i]),
                               dst + off[i], OUT_SIZES[i]);
        TASK_CHECK(st == TORX_OK, "start of transfer %d: %s", i, torx_last_error());
        if (i == 0) {
            /* Not complete yet: nothing polled since it started. */
            st = torx_bulk_get(dev, &ops[0], pc, (const void *)(uintptr_t)all[peer].src, dst, 1);
            TASK_CHECK(st == TORX_ERR_INVAL, "reusing an in-flight torx_bulk_t gave %s",
                       torx_status_str(st));
        }
    }
    int done[NOUT] = {0}, left = NOUT;
    const double end = test_now() + WAIT_S;
    unsigned spins = 0;
    while (left) {
        TASK_CHECK(test_now() < end, "%d transfers still running after %.0f s", left, WAIT_S);
        for (int i = 0; i < NOUT; i++) {
            if (done[i])
                continue;
            st = torx_bulk_test(dev, &ops[i]);
            TASK_CHECK(st == TORX_OK || st == TORX_AGAIN, "transfer %d: %s", i, torx_last_error());
            if (st == TORX_OK) {
                done[i] = 1;
                left--;
            }
        }
        drain(dev);
        test_relax(&spins);
    }
    TASK_CHECK(task_sync(dev, pc, 2) == 0, "sync after the transfers");
    for (int i = 0; i < NOUT; i++) {
        long bad = mismatch(dst + off[i], OUT_SIZES[i], peer, off[i]);
        TASK_CHECK(bad < 0, "%s %d (%zu bytes): byte %ld wrong", i % 3 == 2 ? "put" : "get", i,
                   OUT_SIZES[i], bad);
        TASK_CHECK(guard_broken(dst + off[i] + OUT_SIZES[i], GUARD) < 0,
                   "transfer %d wrote past its end", i);
    }
    TASK_CHECK(guard_broken(dst, off[0]) < 0, "transfer 0 wrote before its start");
    torx_pkt_close(dev);
    free(src);
    free(dst);
    return 0;
}

START_TEST(outstanding_fifo)
{
    RUN_JOB(2, task_outstanding, NULL);
}
END_TEST

/* ---- Argument checks and transfers within one task --------------------------- */

static int task_misuse(torx_boot_t *boot, void *arg)
{
    const char *mode = arg;
    torx_pkt_dev_t *dev;
    const int opened = open_bulk(boot, mode, &dev);
    if (opened <= 0)
        return opened < 0;
    torx_status_t st;
    const torx_coord_t self = test_coord_of(SHAPE2, boot->rank);
    const torx_coord_t pc = test_coord_of(SHAPE2, 1 - boot->rank);
    uint8_t a[600], b[600];
    fill(a, sizeof a, 7);
    memset(b, GUARD_BYTE, sizeof b);
    torx_bulk_t op;

    /* Within the task: a copy, complete at once. */
    st = torx_bulk_get(dev, &op, self, a + 1, b + 2, 500);
    TASK_CHECK(st == TORX_OK && torx_bulk_test(dev, &op) == TORX_OK, "self get: %s",
               torx_last_error());
    TASK_CHECK(mismatch(b + 2, 500, 7, 1) < 0 && guard_broken(b + 502, 98) < 0, "self get data");
    st = torx_bulk_put(dev, &op, self, a + 3, b + 2, 400);
    TASK_CHECK(st == TORX_OK && torx_bulk_test(dev, &op) == TORX_OK, "self put: %s",
               torx_last_error());
    TASK_CHECK(mismatch(a + 3, 400, 7, 1) < 0, "self put data");

    const torx_coord_t outside = {2, 0, 0, 0};
    st = torx_bulk_get(dev, &op, outside, a, b, 1);
    TASK_CHECK(st == TORX_ERR_INVAL && strstr(torx_last_error(), "(2,0,0,0)"),
               "get from outside the shape gave %s: %s", torx_status_str(st), torx_last_error());
    st = torx_bulk_put(dev, &op, pc, NULL, a, 8);
    TASK_CHECK(st == TORX_ERR_INVAL, "put to NULL gave %s", torx_status_str(st));
    memset(&op, 0, sizeof op);
    st = torx_bulk_test(dev, &op);
    TASK_CHECK(st == TORX_ERR_INVAL, "testing a never-started op gave %s", torx_status_str(st));

    if (strcmp(mode, "cma") == 0) {
        /* A remote range that runs into an unmapped page: the first bytes
         * copy, then the rest fails; that is an error, not a short success. */
        const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
        uint8_t *pages =
            mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        TASK_CHECK(pages != MAP_FAILED && munmap(pages + pg, pg) == 0, "mmap: %s", strerror(errno));
        task_addrs_t mine = {(uint64_t)(uintptr_t)pages, 0, getpid()}, all[2];
        TASK_CHECK(boot->allgather(boot, &mine, all, sizeof mine) == TORX_OK, "allgather");
        uint8_t *edge = (uint8_t *)(uintptr_t)all[1 - boot->rank].src + pg - 100;
        st = torx_bulk_get(dev, &op, pc, edge, b, 300);
        TASK_CHECK(st == TORX_ERR_INVAL && strstr(torx_last_error(), strerror(EFAULT)),
                   "get across an unmapped page gave %s: %s", torx_status_str(st),
                   torx_last_error());
        st = torx_bulk_put(dev, &op, pc, edge, b, 300);
        TASK_CHECK(st == TORX_ERR_INVAL && strstr(torx_last_error(), strerror(EFAULT)),
                   "put across an unmapped page gave %s: %s", torx_status_str(st),
                   torx_last_error());
        TASK_CHECK(task_sync(dev, pc, 2) == 0, "sync after the unmapped-page checks");
        munmap(pages, pg);
    }
    TASK_CHECK(task_sync(dev, pc, 3) == 0, "final sync");
    torx_pkt_close(dev);
    return 0;
}

START_TEST(misuse_cma)
{
    RUN_JOB(2, task_misuse, "cma");
}
END_TEST

START_TEST(misuse_fifo)
{
    RUN_JOB(2, task_misuse, "fifo");
}
END_TEST

/* ---- A dead peer ------------------------------------------------------------------ */

static int task_dead_peer(torx_boot_t *boot, void *arg)
{
    const char *mode = arg;
    torx_pkt_dev_t *dev;
    const int opened = open_bulk(boot, mode, &dev);
    if (opened <= 0)
        return opened < 0;
    torx_status_t st;
    const size_t n = (size_t)1 << 20;
    uint8_t *buf = malloc(n);
    TASK_CHECK(buf, "out of memory");
    fill(buf, n, boot->rank);
    task_addrs_t mine = {(uint64_t)(uintptr_t)buf, 0, getpid()}, all[2];
    TASK_CHECK(boot->allgather(boot, &mine, all, sizeof mine) == TORX_OK, "allgather");
    if (boot->rank == 1)
        return 0; /* dies without closing or ever polling */

    const torx_coord_t pc = test_coord_of(SHAPE2, 1);
    void *remote = (void *)(uintptr_t)all[1].src;
    torx_bulk_t op;
    if (strcmp(mode, "cma") == 0) {
        /* Single-copy transfers succeed until the peer is gone. */
        const double end = test_now() + WAIT_S;
        while ((st = torx_bulk_get(dev, &op, pc, remote, buf, 4096)) == TORX_OK) {
            TASK_CHECK(test_now() < end, "gets from an exited peer kept succeeding");
            usleep(1000);
        }
        TASK_CHECK(st == TORX_ERR_PEER, "get from a dead peer gave %s: %s", torx_status_str(st),
                   torx_last_error());
        TASK_CHECK(strstr(torx_last_error(), "process_vm_readv") &&
                       strstr(torx_last_error(), strerror(ESRCH)),
                   "message lacks the call and errno text: %s", torx_last_error());
        TASK_CHECK(torx_bulk_test(dev, &op) == TORX_ERR_PEER, "test after the failed get");
        st = torx_bulk_put(dev, &op, pc, remote, buf, n);
        TASK_CHECK(st == TORX_ERR_PEER, "put to a dead peer gave %s", torx_status_str(st));
    } else {
        /* The peer never answers: the get must fail, not wait forever. */
        st = torx_bulk_get(dev, &op, pc, remote, buf, n);
        TASK_CHECK(st == TORX_OK, "get start: %s", torx_last_error());
        st = wait_op(dev, &op, WAIT_S);
        TASK_CHECK(st == TORX_ERR_PEER, "get from a dead peer gave %s: %s", torx_status_str(st),
                   torx_last_error());
        /* A put fills the dead peer's FIFO, then must fail the same way. */
        st = torx_bulk_put(dev, &op, pc, remote, buf, n);
        TASK_CHECK(st == TORX_OK || st == TORX_ERR_PEER, "put start: %s", torx_last_error());
        if (st == TORX_OK)
            st = wait_op(dev, &op, WAIT_S);
        TASK_CHECK(st == TORX_ERR_PEER, "put to a dead peer gave %s: %s", torx_status_str(st),
                   torx_last_error());
    }
    TASK_CHECK(strstr(torx_last_error(), "(1,0,0,0)") && strstr(torx_last_error(), "dead"),
               "message names neither the peer nor its death: %s", torx_last_error());
    torx_pkt_close(dev);
    free(buf);
    return 0;
}

START_TEST(dead_peer_cma)
{
    RUN_JOB(2, task_dead_peer, "cma");
}
END_TEST

START_TEST(dead_peer_fifo)
{
    RUN_JOB(2, task_dead_peer, "fifo");
}
END_TEST

/* ---- The path choice ------------------------------------------------------------ */

/* TORX_BULK unset: the device takes cma exactly when this task can itself
 * read the peer's memory with process_vm_readv. */
static int task_auto_path(torx_boot_t *boot, void *arg)
{
    (void)arg;
    TASK_CHECK(unsetenv("TORX_BULK") == 0, "unsetenv: %s", strerror(errno));
    torx_pkt_dev_t *dev;
    torx_status_t st = test_open(boot, SHAPE2, &dev);
    TASK_CHECK(st == TORX_OK, "open: %s", torx_last_error());
    const int peer = 1 - boot->rank;
    const bool cma_works = peer_readable(boot);
    TASK_CHECK(strcmp(torx_bulk_path(dev), cma_works ? "cma" : "fifo") == 0,
               "process_vm_readv %s, yet the automatic path is %s", cma_works ? "works" : "fails",
               torx_bulk_path(dev));
    TASK_CHECK(task_sync(dev, test_coord_of(SHAPE2, peer), 1) == 0, "final sync");
    torx_pkt_close(dev);
    return 0;
}

START_TEST(auto_path)
{
    RUN_JOB(2, task_auto_path, NULL);
}
END_TEST

/* Makes this task unreadable by its peer: not dumpable, and without
 * CAP_SYS_PTRACE (which would override that for root). */
static int forbid_cma(void)
{
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
    if (syscall(SYS_capget, &hdr, data) != 0)
        return -1;
    data[CAP_TO_INDEX(CAP_SYS_PTRACE)].effective &= ~CAP_TO_MASK(CAP_SYS_PTRACE);
    data[CAP_TO_INDEX(CAP_SYS_PTRACE)].permitted &= ~CAP_TO_MASK(CAP_SYS_PTRACE);
    if (syscall(SYS_capset, &hdr, data) != 0)
        return -1;
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

/* Reads what a task wrote to the file at fd; a static buffer. */
static const char *read_log(int fd)
{
    static char text[16384];
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    return text;
}

static int task_forbidden(torx_boot_t *boot, void *arg)
{
    const int log_fd = *(const int *)arg;
    TASK_CHECK(forbid_cma() == 0, "dropping CAP_SYS_PTRACE: %s", strerror(errno));
    TASK_CHECK(dup2(log_fd, STDERR_FILENO) == STDERR_FILENO, "dup2: %s", strerror(errno));
    torx_pkt_dev_t *dev;

    TASK_CHECK(setenv("TORX_BULK", "cma", 1) == 0, "setenv: %s", strerror(errno));
    torx_status_t st = test_open(boot, SHAPE2, &dev);
    TASK_CHECK(st == TORX_ERR_UNSUPPORTED, "forced cma without attach rights gave %s",
               torx_status_str(st));
    TASK_CHECK(strstr(torx_last_error(), "TORX_BULK=fifo") &&
                   strstr(torx_last_error(), strerror(EPERM)),
               "message lacks the way out or the errno text: %s", torx_last_error());

    TASK_CHECK(unsetenv("TORX_BULK") == 0, "unsetenv: %s", strerror(errno));
    /* The fallback is said at TORX_VERBOSE=1, once per task. */
    TASK_CHECK(setenv("TORX_VERBOSE", "1", 1) == 0, "setenv: %s", strerror(errno));
    st = test_open(boot, SHAPE2, &dev);
    TASK_CHECK(st == TORX_OK, "automatic path without attach rights: %s", torx_last_error());
    TASK_CHECK(strcmp(torx_bulk_path(dev), "fifo") == 0, "fell back to %s", torx_bulk_path(dev));

    /* The fallback moves data. */
    const int peer = 1 - boot->rank;
    const torx_coord_t pc = test_coord_of(SHAPE2, peer);
    const size_t n = 100003;
    uint8_t *src = malloc(n), *dst = malloc(n);
    TASK_CHECK(src && dst, "out of memory");
    fill(src, n, boot->rank);
    task_addrs_t mine = {(uint64_t)(uintptr_t)src, 0, getpid()}, all[2];
    TASK_CHECK(boot->allgather(boot, &mine, all, sizeof mine) == TORX_OK, "allgather");
    torx_bulk_t op;
    st = torx_bulk_get(dev, &op, pc, (const void *)(uintptr_t)all[peer].src, dst, n);
    TASK_CHECK(st == TORX_OK, "get: %s", torx_last_error());
    st = wait_op(dev, &op, WAIT_S);
    TASK_CHECK(st == TORX_OK, "get: %s", torx_last_error());
    TASK_CHECK(mismatch(dst, n, peer, 0) < 0, "fallback get data wrong");
    TASK_CHECK(task_sync(dev, pc, 1) == 0, "final sync");
    torx_pkt_close(dev);
    free(src);
    free(dst);
    return 0;
}

START_TEST(forbidden_falls_back)
{
    char path[] = "/tmp/torx-test-bulk-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    unlink(path);
    const int failed = torx_boot_fork_run(2, task_forbidden, &fd, TEST_JOB_TIMEOUT, 0);
    const char *log = read_log(fd);
    ck_assert_msg(failed == 0, "%d task(s) failed; their output:\n%s", failed, log);
    const char *said = "cross-memory attach forbidden (process_vm_readv: Operation not "
                       "permitted), bulk transfers use FIFO copy";
    int times = 0;
    for (const char *p = strstr(log, said); p; p = strstr(p + 1, said))
        times++;
    ck_assert_msg(times == 2, "the fallback was said %d times by 2 tasks, not once each:\n%s",
                  times, log);
    close(fd);
}
END_TEST

/* ---- A torx_bulk_t overwritten while in flight --------------------------------- */

typedef struct stale_ctx {
    int log_fd;
    volatile sig_atomic_t *failed; /* shared with the tasks: the device said so */
} stale_ctx_t;

/* Whether pid has exited (gone, or a zombie not yet reaped). */
static bool pid_gone(pid_t pid)
{
    if (kill(pid, 0) == -1 && errno == ESRCH)
        return true;
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return true;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    return p && (p[2] == 'Z' || p[2] == 'X');
}

static int task_stale(torx_boot_t *boot, void *arg)
{
    const stale_ctx_t *ctx = arg;
    TASK_CHECK(setenv("TORX_BULK", "fifo", 1) == 0, "setenv: %s", strerror(errno));
    torx_pkt_dev_t *dev;
    torx_status_t st = test_open(boot, SHAPE2, &dev);
    TASK_CHECK(st == TORX_OK, "open: %s", torx_last_error());
    const size_t n = 65536;
    uint8_t *buf = malloc(n);
    TASK_CHECK(buf, "out of memory");
    fill(buf, n, boot->rank);
    task_addrs_t mine = {(uint64_t)(uintptr_t)buf, 0, getpid()}, all[2];
    TASK_CHECK(boot->allgather(boot, &mine, all, sizeof mine) == TORX_OK, "allgather");
    const double end = test_now() + 10.0;
    unsigned spins = 0;
    if (boot->rank == 1) {
        /* Serve until the requester has died of its check. */
        while (!pid_gone((pid_t)all[0].pid)) {
            TASK_CHECK(test_now() < end, "the requester is still alive after 10 s");
            torx_pkt_poll(dev);
            test_relax(&spins);
        }
        torx_pkt_close(dev);
        return 0;
    }
    TASK_CHECK(dup2(ctx->log_fd, STDERR_FILENO) == STDERR_FILENO, "dup2: %s", strerror(errno));
    uint8_t *dst = malloc(n);
    TASK_CHECK(dst, "out of memory");
    torx_bulk_t op;
    st = torx_bulk_get(dev, &op, test_coord_of(SHAPE2, 1), (const void *)(uintptr_t)all[1].src, dst,
                       n);
    TASK_CHECK(st == TORX_OK, "get: %s", torx_last_error());
    memset(&op, 0, sizeof op); /* the caller reuses the memory too early */
    /* The device must refuse (writing where the zeroed op points would
     * crash) and fail, naming the cause, not abort the task. */
    while (test_now() < end && dev->failed == TORX_OK) {
        torx_pkt_poll(dev);
        test_relax(&spins);
    }
    TASK_CHECK(dev->failed == TORX_ERR_INVAL, "the device did not fail (status %d)", dev->failed);
    *ctx->failed = 1;
    torx_pkt_close(dev);
    return 0;
}

START_TEST(overwritten_op_fails_device)
{
    char path[] = "/tmp/torx-test-bulk-XXXXXX";
    stale_ctx_t ctx = {.log_fd = mkstemp(path)};
    ck_assert_int_ge(ctx.log_fd, 0);
    unlink(path);
    void *shared =
        mmap(NULL, sizeof *ctx.failed, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(shared, MAP_FAILED);
    ctx.failed = shared;
    *ctx.failed = 0;
    ck_assert_int_eq(torx_boot_fork_run(2, task_stale, &ctx, TEST_JOB_TIMEOUT, 0), 0);
    ck_assert_msg(*ctx.failed, "rank 0's device did not fail");
    const char *log = read_log(ctx.log_fd);
    ck_assert_msg(strstr(log, "overwritten or reused while its transfer was in flight"),
                  "the device named no cause:\n%s", log);
    close(ctx.log_fd);
}
END_TEST

static Suite *bulk_suite(void)
{
    Suite *s = suite_create("bulk");
    TCase *tc = tcase_create("shm");
    tcase_set_timeout(tc, 2 * TEST_JOB_TIMEOUT + 60);
    tcase_add_test(tc, sizes_cma);
    tcase_add_test(tc, sizes_fifo);
    tcase_add_test(tc, outstanding_fifo);
    tcase_add_test(tc, misuse_cma);
    tcase_add_test(tc, misuse_fifo);
    tcase_add_test(tc, dead_peer_cma);
    tcase_add_test(tc, dead_peer_fifo);
    tcase_add_test(tc, auto_path);
    tcase_add_test(tc, forbidden_falls_back);
    tcase_add_test(tc, overwritten_op_fails_device);
    tcase_add_test(tc, shared_get_owner_helps);
    tcase_add_test(tc, shared_get_owner_away);
    tcase_add_test(tc, shared_get_owner_late);
    tcase_add_test(tc, shared_get_owner_gives_up);
    tcase_add_test(tc, shared_get_bad_min);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(bulk_suite());
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
