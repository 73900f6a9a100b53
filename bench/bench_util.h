/* Helpers shared by the torx benchmarks: a clock, pinning, statistics, the
 * output format, and the two references every figure is read against (the
 * cache-line handoff and a plain ring). Header-only so that bench/floors.c,
 * which must not depend on libtorx (it measures the machine, not torx), can
 * use it too. Prefix: bench_. The bench_torx_* helpers at the end exist
 * only when <torx/packet.h> is included before this header, and the
 * bench_msg_* ones only when <torx/msg.h> is; such programs must define
 * _GNU_SOURCE before their first system header.
 *
 * Output format. Every figure is printed twice:
 *   - one machine-readable line "<group> <metric>=<number>", e.g.
 *     "floor handoff_ns_min=45.1", which bench/run-packet-bench.sh collects;
 *   - human-readable text, always on lines starting with "# ", so the
 *     script can ignore it.
 * Metric names end in the statistic they hold (_min, _med, _max). Names
 * containing "_ns_" are latencies (lower is better); all others (gbs, mpps)
 * are rates (higher is better). The script relies on that to pick the best
 * of each metric across rounds.
 *
 * Latency is timed in batches: a sample is the mean of BENCH_BATCH (100)
 * consecutive round trips, timed with two clock reads. A single round trip here is 50-300 ns,
 * the same order as one clock_gettime on a VM, so timing each one would
 * measure the clock. min and median are over the batch samples.
 */
#ifndef TORX_BENCH_UTIL_H
#define TORX_BENCH_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* sched_setaffinity, CPU_* */
#endif

#include <errno.h>
#include <sched.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define BENCH_CACHELINE 64

/* ---- Clock ------------------------------------------------------------- */

/* CLOCK_MONOTONIC through the vDSO: tens of ns per call, negligible against
 * batches of thousands of operations, and comparable across the two pinned
 * processes (one clock for the whole host, unlike a raw TSC read on a VM
 * that might not be synchronised). Programs time torx with torx's own clock
 * once they have a device or context (bench_torx_now_ns, bench_msg_now_ns:
 * the same clock on shm and ofi, simulated time on the sim device); this one
 * serves floors.c and whatever runs before. */
static inline double bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ---- Spinning ------------------------------------------------------------ */

/* Set by bench_pin_setup() when fewer than two CPUs are usable: two spinning
 * tasks on one CPU would each burn a whole time slice per handoff, so spin
 * loops yield instead. Such runs are marked in the output; their figures
 * measure the scheduler, not the machine. */
static int bench_oversubscribed;

/* Called in every spin-wait loop, in the floors and the torx benches alike,
 * so both pay the same (a predictable branch) when the CPUs are dedicated.
 * No pause instruction: on AMD Zen it costs tens of cycles and would add to
 * the handoff we measure. */
static inline void bench_relax(void)
{
    if (__builtin_expect(bench_oversubscribed, 0))
        sched_yield();
}

/* ---- Pinning ------------------------------------------------------------- */

/* Number of CPUs this process may run on. */
static inline int bench_cpus_allowed(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 1;
    return CPU_COUNT(&set);
}

/* The index-th CPU of this process's original affinity mask, so "CPU 0 and
 * 1" still means two distinct CPUs inside a cgroup that hands out, say, 4
 * and 5. Returns -1 when there is no such CPU. */
static inline int bench_nth_cpu(const cpu_set_t *set, int index)
{
    for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE; cpu++) {
        if (CPU_ISSET(cpu, set) && seen++ == index)
            return cpu;
    }
    return -1;
}

/* Pins the calling thread to one CPU. Returns 0 or an errno value. */
static inline int bench_pin_cpu(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set) != 0 ? errno : 0;
}

/* Records whether two CPUs are available; call once at start-up, before
 * forking. Prints the verdict as a human line. */
static inline void bench_pin_setup(void)
{
    int n = bench_cpus_allowed();
    bench_oversubscribed = n < 2;
    if (bench_oversubscribed)
        printf("# WARNING: only %d CPU usable; the two tasks share it and spin loops yield. "
               "Latency and bandwidth figures below measure the scheduler.\n",
               n);
}

/* ---- Shared memory between forked processes ----------------------------- */

/* Anonymous MAP_SHARED memory survives fork() as one physical copy, which
 * is how the floors put a cache line or a ring between two processes. */
static inline void *bench_shared_alloc(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "bench: mmap(%zu bytes, MAP_SHARED|MAP_ANONYMOUS) failed: %s\n", bytes,
                strerror(errno));
        exit(1);
    }
    memset(p, 0, bytes); /* fault every page in now, not inside a timed loop */
    return p;
}

/* Private, page-aligned and pre-faulted memory for copy sources and
 * destinations. */
static inline void *bench_alloc(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, bytes) != 0) {
        fprintf(stderr, "bench: posix_memalign(%zu bytes) failed\n", bytes);
        exit(1);
    }
    memset(p, 0x5a, bytes);
    return p;
}

/* ---- Statistics ------------------------------------------------------------ */

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct bench_stats {
    double min, med, max;
    int n;
} bench_stats_t;

/* Sorts v in place and returns min, median and max. */
static inline bench_stats_t bench_stats(double *v, int n)
{
    bench_stats_t s = {0, 0, 0, n};
    if (n <= 0)
        return s;
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    s.min = v[0];
    s.max = v[n - 1];
    s.med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    return s;
}

/* ---- Output ---------------------------------------------------------------- */

/* One machine-readable line: "<group> <metric>=<value>". */
static inline void bench_kv(const char *group, const char *metric, double value)
{
    printf("%s %s=%.4g\n", group, metric, value);
}

/* Latency figure: prints <metric>_min and <metric>_med, plus a human line. */
static inline void bench_report_ns(const char *group, const char *metric, const char *what,
                                   bench_stats_t s)
{
    char key[128];
    printf("# %-48s min %8.1f ns  median %8.1f ns  (%d samples)\n", what, s.min, s.med, s.n);
    snprintf(key, sizeof key, "%s_min", metric);
    bench_kv(group, key, s.min);
    snprintf(key, sizeof key, "%s_med", metric);
    bench_kv(group, key, s.med);
}

/* Rate figure: prints <metric>_max and <metric>_med, plus a human line. */
static inline void bench_report_rate(const char *group, const char *metric, const char *what,
                                     const char *unit, bench_stats_t s)
{
    char key[128];
    printf("# %-48s best %8.3f %s  median %8.3f %s  (%d samples)\n", what, s.max, unit, s.med, unit,
           s.n);
    snprintf(key, sizeof key, "%s_max", metric);
    bench_kv(group, key, s.max);
    snprintf(key, sizeof key, "%s_med", metric);
    bench_kv(group, key, s.med);
}

/* Human line, prefixed "# ". */
static inline void bench_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void bench_note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("# ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
}

/* Integer from the environment, for iteration counts; def when unset. */
static inline long bench_env_long(const char *name, long def)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || x <= 0) {
        fprintf(stderr, "bench: %s='%s' is not a positive integer; using %ld\n", name, v, def);
        return def;
    }
    return x;
}

/* Keeps the compiler from dropping a copy whose result is never read. */
static inline void bench_clobber(void *p)
{
    __asm__ volatile("" : : "r"(p) : "memory");
}

/* ---- References: cache-line handoff and a plain ring ------------------------ */

/* The two references every torx latency and streaming figure is read
 * against, between the same two pinned tasks. floors.c runs them alone; the
 * torx benches also run them block by block between their own figures,
 * because on these VMs the two vCPUs move between physical placements
 * (handoffs of ~10 ns, ~40 ns or ~150 ns) during a run, and a ratio only
 * means something when both sides saw the same placements.
 *
 * The ring: one producer, one consumer, 128 slots of 256 bytes, the same
 * geometry as a torx shm reception FIFO (TORX_FIFO_PACKETS default 128,
 * 16-byte header, payload up to 240 bytes), but no multi-producer CAS, no
 * FIFO choice, no header formatting: the least any such ring must do. */

#define BENCH_BATCH 100 /* round trips per latency sample */
#define BENCH_RING_SLOTS 128u
#define BENCH_SLOT_BYTES 256u
#define BENCH_SLOT_PAYLOAD 240u

typedef struct bench_slot {
    uint64_t seq; /* position + 1 once full: the consumer's "ready" flag */
    uint32_t len;
    uint32_t pad;
    uint8_t payload[BENCH_SLOT_PAYLOAD];
} bench_slot_t;
_Static_assert(sizeof(bench_slot_t) == BENCH_SLOT_BYTES, "ring slot is 256 bytes");

typedef struct bench_ring {
    /* Consumer's position, its own line: written by the consumer for every
     * packet, read by the producer only when its cached copy says full. */
    alignas(BENCH_CACHELINE) uint64_t head;
    alignas(BENCH_CACHELINE) bench_slot_t slots[BENCH_RING_SLOTS];
} bench_ring_t;

/* What the two sides share; mapped MAP_SHARED before fork. */
typedef struct bench_ref {
    alignas(BENCH_CACHELINE) uint64_t line;        /* the handoff counter, alone on its line */
    alignas(BENCH_CACHELINE) bench_ring_t ring[2]; /* ring[i] carries packets to side i */
} bench_ref_t;

/* One side's private view. Side 0 is the timing side (parent, rank 0). */
typedef struct bench_ref_end {
    bench_ref_t *ref;
    int side;
    uint64_t line_v;            /* last handoff value seen */
    uint64_t tail, cached_head; /* producer state for ring[1 - side] */
    uint64_t head;              /* consumer state for ring[side] */
} bench_ref_end_t;

static inline bench_ref_t *bench_ref_alloc(void)
{
    return bench_shared_alloc(sizeof(bench_ref_t));
}

static inline bench_ref_end_t bench_ref_end(bench_ref_t *ref, int side)
{
    return (bench_ref_end_t){.ref = ref, .side = side};
}

/* n round trips of the handoff line: side 0 writes odd values, side 1 even;
 * each waits for the other's and answers with the next, so a round trip is
 * two one-way handoffs. Acquire/release only keep the compiler from caching
 * the line; on x86 they are plain moves. */
static inline void bench_handoff(bench_ref_end_t *e, long n)
{
    uint64_t *line = &e->ref->line, v = e->line_v;
    for (long i = 0; i < n; i++) {
        if (e->side == 0) {
            __atomic_store_n(line, ++v, __ATOMIC_RELEASE);
            ++v;
            while (__atomic_load_n(line, __ATOMIC_ACQUIRE) != v)
                bench_relax();
        } else {
            ++v;
            while (__atomic_load_n(line, __ATOMIC_ACQUIRE) != v)
                bench_relax();
            __atomic_store_n(line, ++v, __ATOMIC_RELEASE);
        }
    }
    e->line_v = v;
}

/* Ring: sends len bytes to the other side, waiting while the ring is full. */
static inline void bench_ring_send(bench_ref_end_t *e, const void *payload, uint32_t len)
{
    bench_ring_t *r = &e->ref->ring[1 - e->side];
    while (e->tail - e->cached_head >= BENCH_RING_SLOTS) {
        /* acquire: the consumer's copy out of the slot we will overwrite is
         * finished (pairs with the release in bench_ring_pop). */
        e->cached_head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
        if (e->tail - e->cached_head >= BENCH_RING_SLOTS)
            bench_relax();
    }
    bench_slot_t *s = &r->slots[e->tail & (BENCH_RING_SLOTS - 1)];
    memcpy(s->payload, payload, len);
    s->len = len;
    /* release: payload and len are visible before the flag. */
    __atomic_store_n(&s->seq, e->tail + 1, __ATOMIC_RELEASE);
    e->tail++;
}

/* Ring: the next packet for this side, waiting for it. */
static inline const bench_slot_t *bench_ring_front(bench_ref_end_t *e)
{
    bench_slot_t *s = &e->ref->ring[e->side].slots[e->head & (BENCH_RING_SLOTS - 1)];
    /* acquire: pairs with the release of seq in bench_ring_send. */
    while (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) != e->head + 1)
        bench_relax();
    return s;
}

/* Ring: frees the packet bench_ring_front returned. */
static inline void bench_ring_pop(bench_ref_end_t *e)
{
    /* release: our reads of the slot are done before the producer reuses it. */
    __atomic_store_n(&e->ref->ring[e->side].head, ++e->head, __ATOMIC_RELEASE);
}

/* Ring ping-pong, n round trips: side 0 sends len bytes and copies the
 * reply out into buf; side 1 copies each packet out into buf and sends it
 * back. The same work as a torx one-packet ping-pong with torx_pkt_read. */
static inline void bench_ring_pingpong(bench_ref_end_t *e, uint32_t len, long n, uint8_t *buf)
{
    for (long i = 0; i < n; i++) {
        if (e->side == 0)
            bench_ring_send(e, buf, len);
        const bench_slot_t *s = bench_ring_front(e);
        uint32_t got = s->len;
        memcpy(buf, s->payload, got);
        bench_ring_pop(e);
        if (e->side == 1)
            bench_ring_send(e, buf, got);
    }
}

/* Ring streaming: side 0 sends n packets of len bytes read in order from
 * buf (wrapped at the last whole payload within bytes) and waits for one
 * packet back; side 1 copies each payload in order into its buf, then
 * answers. Side 0's elapsed time is the figure. */
static inline void bench_ring_stream(bench_ref_end_t *e, uint32_t len, long n, uint8_t *buf,
                                     size_t bytes)
{
    const size_t wrap = bytes - bytes % len;
    size_t off = 0;
    for (long i = 0; i < n; i++) {
        if (e->side == 0) {
            bench_ring_send(e, buf + off, len);
        } else {
            const bench_slot_t *s = bench_ring_front(e);
            memcpy(buf + off, s->payload, len);
            bench_ring_pop(e);
        }
        off += len;
        if (off == wrap)
            off = 0;
    }
    if (e->side == 0) {
        (void)bench_ring_front(e);
        bench_ring_pop(e);
    } else {
        bench_ring_send(e, buf, 0);
    }
    bench_clobber(buf);
}

/* ---- torx helpers (only for programs that include <torx/packet.h> first) -- */

#ifdef TORX_PACKET_H
/* Opens the packet device for a job of boot->size tasks on a line: shape
 * size x 1 x 1 x 1, rank r at (r,0,0,0). Prints torx's own message on
 * failure. */
static inline torx_pkt_dev_t *bench_torx_open_line(torx_boot_t *boot)
{
    torx_pkt_attr_t attr = {
        .boot = boot,
        .shape = {(uint8_t)boot->size, 1, 1, 1},
        .self = {(uint8_t)boot->rank, 0, 0, 0},
    };
    torx_pkt_dev_t *dev = NULL;
    torx_status_t rc = torx_pkt_open(&attr, &dev);
    if (rc != TORX_OK) {
        fprintf(stderr, "bench[%d]: torx_pkt_open: %s: %s\n", boot->rank, torx_status_str(rc),
                torx_last_error());
        return NULL;
    }
    return dev;
}

/* The device's clock (torx_pkt_wtime) in ns, for timing torx. */
static inline double bench_torx_now_ns(const torx_pkt_dev_t *dev)
{
    return torx_pkt_wtime(dev) * 1e9;
}

/* The next packet, waiting for it. */
static inline const torx_pkt_hdr_t *bench_torx_wait(torx_pkt_dev_t *dev)
{
    const torx_pkt_hdr_t *h;
    while (!(h = torx_pkt_peek(dev)))
        bench_relax();
    return h;
}

/* Injects one packet, retrying while the destination FIFO is full (flow
 * control, not an error). Returns TORX_OK or the error; prints errors. */
static inline torx_status_t bench_torx_send(torx_pkt_dev_t *dev, const torx_pkt_hdr_t *h,
                                            const void *payload, size_t len)
{
    torx_status_t rc;
    while ((rc = torx_pkt_inject1(dev, h, payload, len)) == TORX_NO_ROOM)
        bench_relax();
    if (rc != TORX_OK)
        fprintf(stderr, "bench: torx_pkt_inject: %s: %s\n", torx_status_str(rc), torx_last_error());
    return rc;
}

/* The 64-bit sequence number the benches carry in the software header, so
 * every receive checks it got the packet it expected, in order. */
static inline void bench_torx_set_seq(torx_pkt_hdr_t *h, uint64_t seq)
{
    memcpy(h->sw, &seq, sizeof seq);
}

static inline uint64_t bench_torx_seq(const torx_pkt_hdr_t *h)
{
    uint64_t seq;
    memcpy(&seq, h->sw, sizeof seq);
    return seq;
}

/* Runs task_main in a job of two forked tasks (torx_boot_fork_run with
 * timeout_s and cpus_per_task) and, when tasks fail, says so on stderr as
 * "WHAT: N task(s) failed: <torx's last error>". Returns the number of
 * tasks that failed (0: the job ran). */
static inline int bench_torx_job(const char *what, torx_task_main_fn task_main, void *arg,
                                 double timeout_s, int cpus_per_task)
{
    const int failed = torx_boot_fork_run(2, task_main, arg, timeout_s, cpus_per_task);
    if (failed)
        fprintf(stderr, "%s: %d task(s) failed: %s\n", what, failed, torx_last_error());
    return failed;
}
#endif /* TORX_PACKET_H */

/* ---- Message-layer helpers (only for programs that include <torx/msg.h> first) */

#ifdef TORX_MSG_H
#include <dirent.h>
#include <sys/syscall.h>

/* Placement in co mode (MSG_CO_PLACEMENT): "cross" (default) pins a task's
 * main thread to CPU rank and every other thread of the process (the
 * communication thread torx_init started) to the other CPU, so on a 2-CPU
 * host each task's communication thread shares the other task's core;
 * "unbound" pins only the main thread and leaves the communication thread
 * to the scheduler, which may well put it beside the main thread. */
static inline int bench_msg_co_cross(void)
{
    const char *v = getenv("MSG_CO_PLACEMENT");
    return !v || strcmp(v, "unbound") != 0;
}

/* Pins this co-mode task's threads as bench_msg_co_cross says, among the
 * CPUs of launch (the task's CPUs before torx_init, which binds a task to
 * one core when the host has a core per task). Returns 0 or an errno. */
static inline int bench_msg_pin_co_threads(int rank, const cpu_set_t *launch)
{
    cpu_set_t all = *launch;
    const int n = CPU_COUNT(&all);
    const int mine = bench_nth_cpu(&all, n ? rank % n : 0),
              other = bench_nth_cpu(&all, n ? (rank + 1) % n : 0);
    if (mine < 0 || other < 0)
        return EINVAL;
    int err = bench_pin_cpu(mine);
    if (err || !bench_msg_co_cross())
        return err;
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return errno;
    const pid_t self = (pid_t)syscall(SYS_gettid);
    struct dirent *e;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(other, &set);
    while ((e = readdir(d)) != NULL) {
        const pid_t tid = (pid_t)atoi(e->d_name);
        if (tid > 0 && tid != self && sched_setaffinity(tid, sizeof set, &set) != 0)
            err = errno;
    }
    closedir(d);
    return err;
}

/* The program's clock (torx_wtime) in ns, for timing torx. */
static inline double bench_msg_now_ns(const torx_ctx_t *ctx)
{
    return torx_wtime(ctx) * 1e9;
}

/* A send completion that only wakes the waiting task: arg is the flag its
 * waits watch (bench_msg_wait_for's wake). */
static inline void bench_msg_sent_wake(torx_ctx_t *ctx, torx_msg_t *msg, void *arg)
{
    (void)ctx;
    (void)msg;
    *(volatile int *)arg = 1;
}

/* Advances ctx until cond() holds: spinning on torx_advance (heater mode or
 * packets: each task owns its CPU), or with use_wait through torx_wait (co
 * mode, oversubscribed: waiting must yield the CPU to the communication
 * threads). Every condition must be made true by a callback that also sets
 * *wake. Returns 0, or -1 when torx_wait failed. */
static inline int bench_msg_wait_for(torx_ctx_t *ctx, int use_wait, volatile int *wake,
                                     int (*cond)(void))
{
    if (!use_wait) {
        while (!cond())
            if (!torx_advance(ctx))
                bench_relax();
        return 0;
    }
    while (!cond()) {
        *wake = 0;
        if (cond())
            break;
        if (torx_wait(ctx, wake) != TORX_OK)
            return -1;
    }
    return 0;
}
#endif /* TORX_MSG_H */

#endif /* TORX_BENCH_UTIL_H */
