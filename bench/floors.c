/* floors: what this machine allows, measured in the same run as the torx
 * packet-layer benchmarks, so that torx's figures can be read as ratios.
 *
 *   (a) one-way cache-line handoff between two processes pinned to two
 *       CPUs: the latency floor of any shared-memory message;
 *   (b) memcpy bandwidth, warm, 4 MiB (plus a sweep of sizes): the
 *       bandwidth floor of any copy;
 *   (c) one process_vm_readv single copy of 4 MiB from a child's buffer:
 *       what the shm device's bulk path can reach;
 *   (d) a plain single-producer ring of 256-byte slots between the two
 *       processes: one-packet half round trip and 240-byte-payload
 *       streaming. This is the reference the packet-layer targets cite: it
 *       does what torx's shm torus must do, with nothing else.
 *
 * Does not use libtorx. Output format: see bench_util.h.
 *
 * Environment (counts, for quick runs or longer ones):
 *   FLOORS_PINGPONG_ITERS  round trips per latency figure (200000)
 *   FLOORS_STREAM_PACKETS  packets per streaming sample (262144)
 *   FLOORS_STREAM_REPS     streaming samples per payload size (12)
 *   FLOORS_ONLY=handoff    only (a): a probe of the vCPU placement, quick
 *                          enough to bracket every run of a benchmark
 *                          (bench/run-placement-ab.sh)
 */
#include "bench_util.h"

#include <signal.h>
#include <stdalign.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>

/* Any one test far past this is wedged (e.g. the peer died); the alarm
 * kills the process so a CI run fails instead of hanging. */
#define WATCHDOG_S 120

static int cpu_a, cpu_b; /* parent's and child's CPU */

/* ---- Running a test on two pinned processes ------------------------------- */

typedef void (*side_fn)(void *arg);

/* Runs child_fn in a forked child pinned to cpu_b and parent_fn here (on
 * cpu_a), then reaps the child. Exits the program if the child failed, as
 * the parent's figures would then be meaningless. */
static void run_pair(side_fn parent_fn, side_fn child_fn, void *arg)
{
    fflush(stdout); /* or the child would print the parent's buffered text again */
    pid_t pid = fork();
    if (pid < 0) {
        perror("floors: fork");
        exit(1);
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a dead parent */
        alarm(WATCHDOG_S);
        int err = bench_pin_cpu(cpu_b);
        if (err) {
            fprintf(stderr, "floors: pinning the child to CPU %d: %s\n", cpu_b, strerror(err));
            _exit(1);
        }
        child_fn(arg);
        _exit(0);
    }
    alarm(WATCHDOG_S);
    parent_fn(arg);
    alarm(0);
    int st = 0;
    if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "floors: child process failed (status 0x%x)\n", st);
        exit(1);
    }
}

/* ---- (a) one-way cache-line handoff ---------------------------------------- */

/* Side 0 (parent) times BATCH round trips per sample; see bench_handoff. */
static long handoff_iters;

static void handoff_parent(void *arg)
{
    bench_ref_end_t e = bench_ref_end(arg, 0);
    long nsamples = handoff_iters / BENCH_BATCH;
    double *ns = calloc((size_t)nsamples, sizeof *ns);
    bench_handoff(&e, handoff_iters / 10); /* warm-up */
    for (long s = 0; s < nsamples; s++) {
        double t0 = bench_now_ns();
        bench_handoff(&e, BENCH_BATCH);
        ns[s] = (bench_now_ns() - t0) / (2.0 * BENCH_BATCH);
    }
    bench_report_ns("floor", "handoff_ns", "one-way cache-line handoff",
                    bench_stats(ns, (int)nsamples));
    free(ns);
}

static void handoff_child(void *arg)
{
    bench_ref_end_t e = bench_ref_end(arg, 1);
    bench_handoff(&e, handoff_iters / 10 + (handoff_iters / BENCH_BATCH) * BENCH_BATCH);
}

static void floor_handoff(long iters)
{
    bench_ref_t *ref = bench_ref_alloc();
    handoff_iters = iters;
    run_pair(handoff_parent, handoff_child, ref);
    munmap(ref, sizeof *ref);
}

/* ---- (b) memcpy bandwidth ------------------------------------------------- */

/* Copies of `bytes`, timed in batches of at least 1 MiB so small sizes are
 * not clock-bound. GB/s counts the bytes copied once (not read + written). */
static void floor_memcpy(size_t bytes, const char *name)
{
    char *src = bench_alloc(bytes), *dst = bench_alloc(bytes);
    int per_batch = bytes >= (1u << 20) ? 1 : (int)((1u << 20) / bytes);
    int nsamples = bytes >= (16u << 20) ? 30 : 100;
    double *gbs = calloc((size_t)nsamples, sizeof *gbs);
    for (int i = 0; i < 3; i++) { /* warm: both buffers in cache and TLB */
        memcpy(dst, src, bytes);
        bench_clobber(dst);
    }
    for (int s = 0; s < nsamples; s++) {
        double t0 = bench_now_ns();
        for (int i = 0; i < per_batch; i++) {
            memcpy(dst, src, bytes);
            bench_clobber(dst);
        }
        gbs[s] = (double)bytes * per_batch / (bench_now_ns() - t0);
    }
    char metric[64], what[96];
    snprintf(metric, sizeof metric, "memcpy_%s_gbs", name);
    snprintf(what, sizeof what, "memcpy %s, warm", name);
    bench_report_rate("floor", metric, what, "GB/s", bench_stats(gbs, nsamples));
    free(gbs);
    free(src);
    free(dst);
}

/* ---- (c) process_vm_readv single copy ------------------------------------ */

/* Twice: with buffers on ordinary 4 KiB pages (what malloc gives under the
 * usual THP "madvise" setting, and what torx's bulk path will mostly see),
 * and with MADV_HUGEPAGE buffers. The kernel pins and maps the remote
 * buffer page by page, so the page size changes the figure by about 2x on
 * these machines. */
#define CMA_BYTES (4u << 20)
#define CMA_SAMPLES 100

typedef struct cma_share {
    alignas(BENCH_CACHELINE) uint64_t addr; /* child's buffer, 0 until ready */
    uint32_t done;                          /* parent finished reading */
    int huge;                               /* read-only after fork */
} cma_share_t;

/* CMA_BYTES of pre-faulted memory, on 2 MiB pages when huge and the kernel
 * grants them (madvise failing just leaves 4 KiB pages; the figure then
 * says so by matching the plain one). */
static void *cma_alloc(int huge)
{
    void *p = NULL;
    if (posix_memalign(&p, huge ? (2u << 20) : 4096u, CMA_BYTES) != 0) {
        fprintf(stderr, "floors: posix_memalign(%u bytes) failed\n", CMA_BYTES);
        exit(1);
    }
    if (huge)
        (void)madvise(p, CMA_BYTES, MADV_HUGEPAGE);
    memset(p, 0x5a, CMA_BYTES);
    return p;
}

static void cma_child(cma_share_t *sh)
{
    char *buf = cma_alloc(sh->huge);
    __atomic_store_n(&sh->addr, (uint64_t)(uintptr_t)buf, __ATOMIC_RELEASE);
    /* The copy runs entirely in the parent's context; the child only has to
     * exist, so it sleeps rather than spin. */
    while (!__atomic_load_n(&sh->done, __ATOMIC_ACQUIRE))
        usleep(1000);
    free(buf);
}

static void cma_parent(cma_share_t *sh, pid_t child)
{
    char *local = cma_alloc(sh->huge);
    uint64_t addr;
    while (!(addr = __atomic_load_n(&sh->addr, __ATOMIC_ACQUIRE)))
        usleep(100);
    struct iovec l = {local, CMA_BYTES};
    struct iovec r = {(void *)(uintptr_t)addr, CMA_BYTES};
    double gbs[CMA_SAMPLES];
    int n = 0, ok = 1;
    for (int s = -3; s < CMA_SAMPLES; s++) { /* 3 warm-up copies */
        double t0 = bench_now_ns();
        ssize_t got = process_vm_readv(child, &l, 1, &r, 1, 0);
        double t = bench_now_ns() - t0;
        if (got != (ssize_t)CMA_BYTES) {
            bench_note("process_vm_readv of 4 MiB from a child: %s",
                       got < 0 ? strerror(errno) : "short read");
            bench_note("(the shm device's bulk transfers then fall back to FIFO copies)");
            ok = 0;
            break;
        }
        if (s >= 0)
            gbs[n++] = CMA_BYTES / t;
    }
    const char *key = sh->huge ? "cma_4m_huge" : "cma_4m";
    char metric[64];
    snprintf(metric, sizeof metric, "%s_ok", key);
    bench_kv("floor", metric, ok);
    if (ok) {
        snprintf(metric, sizeof metric, "%s_gbs", key);
        bench_report_rate("floor", metric,
                          sh->huge ? "process_vm_readv 4 MiB single copy, 2 MiB pages"
                                   : "process_vm_readv 4 MiB single copy, 4 KiB pages",
                          "GB/s", bench_stats(gbs, n));
    }
    __atomic_store_n(&sh->done, 1, __ATOMIC_RELEASE);
    free(local);
}

static void floor_cma(int huge)
{
    cma_share_t *sh = bench_shared_alloc(sizeof *sh);
    sh->huge = huge;
    /* The parent needs the child's pid, which run_pair keeps to itself. */
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("floors: fork");
        exit(1);
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        alarm(WATCHDOG_S);
        (void)bench_pin_cpu(cpu_b);
        cma_child(sh);
        _exit(0);
    }
    alarm(WATCHDOG_S);
    cma_parent(sh, pid);
    alarm(0);
    int st = 0;
    if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "floors: cma child failed (status 0x%x)\n", st);
        exit(1);
    }
    munmap(sh, sizeof *sh);
}

/* ---- (d) a plain ring of 256-byte slots ------------------------------------- */

/* The ring itself is in bench_util.h (bench_ring_*), shared with the torx
 * benches, which run it between their own figures. */
#define STREAM_BUF (4u << 20)

typedef struct ring_test {
    bench_ref_t *ref;
    uint32_t len;
    long iters;   /* ping-pong round trips */
    long packets; /* per streaming sample */
    int reps;     /* streaming samples */
} ring_test_t;

static void ringpp_parent(void *arg)
{
    ring_test_t *t = arg;
    bench_ref_end_t e = bench_ref_end(t->ref, 0);
    uint8_t buf[BENCH_SLOT_PAYLOAD];
    memset(buf, 0x11, sizeof buf);
    long nsamples = t->iters / BENCH_BATCH;
    double *ns = calloc((size_t)nsamples, sizeof *ns);
    bench_ring_pingpong(&e, t->len, t->iters / 10, buf); /* warm-up */
    for (long k = 0; k < nsamples; k++) {
        double t0 = bench_now_ns();
        bench_ring_pingpong(&e, t->len, BENCH_BATCH, buf);
        ns[k] = (bench_now_ns() - t0) / (2.0 * BENCH_BATCH);
    }
    char metric[64], what[96];
    snprintf(metric, sizeof metric, "pingpong_%u_ns", t->len);
    snprintf(what, sizeof what, "plain ring half round trip, %u-byte payload", t->len);
    bench_report_ns("ring", metric, what, bench_stats(ns, (int)nsamples));
    free(ns);
}

static void ringpp_child(void *arg)
{
    ring_test_t *t = arg;
    bench_ref_end_t e = bench_ref_end(t->ref, 1);
    uint8_t buf[BENCH_SLOT_PAYLOAD];
    bench_ring_pingpong(&e, t->len, t->iters / 10 + (t->iters / BENCH_BATCH) * BENCH_BATCH, buf);
}

/* Streaming: `packets` payloads from a 4 MiB source into a 4 MiB
 * destination, timed from the first send to the receiver's answer; one
 * untimed warm-up sample, then `reps`. The same shape as pkt_stream.c. */
#define MAX_REPS 64

static void ringst_parent(void *arg)
{
    ring_test_t *t = arg;
    bench_ref_end_t e = bench_ref_end(t->ref, 0);
    uint8_t *src = bench_alloc(STREAM_BUF);
    double gbs[MAX_REPS], mpps[MAX_REPS];
    for (int r = -1; r < t->reps; r++) {
        double t0 = bench_now_ns();
        bench_ring_stream(&e, t->len, t->packets, src, STREAM_BUF);
        double ns = bench_now_ns() - t0;
        if (r >= 0) {
            gbs[r] = (double)t->len * t->packets / ns;
            mpps[r] = t->packets / ns * 1e3;
        }
    }
    char metric[64], what[96];
    snprintf(metric, sizeof metric, "stream_%u_gbs", t->len);
    snprintf(what, sizeof what, "plain ring streaming, %u-byte payload", t->len);
    bench_report_rate("ring", metric, what, "GB/s", bench_stats(gbs, t->reps));
    snprintf(metric, sizeof metric, "stream_%u_mpps", t->len);
    bench_report_rate("ring", metric, what, "Mpkt/s", bench_stats(mpps, t->reps));
    free(src);
}

static void ringst_child(void *arg)
{
    ring_test_t *t = arg;
    bench_ref_end_t e = bench_ref_end(t->ref, 1);
    uint8_t *dst = bench_alloc(STREAM_BUF);
    for (int r = -1; r < t->reps; r++)
        bench_ring_stream(&e, t->len, t->packets, dst, STREAM_BUF);
    free(dst);
}

static void floor_ring_pingpong(uint32_t len, long iters)
{
    ring_test_t t = {.ref = bench_ref_alloc(), .len = len, .iters = iters};
    run_pair(ringpp_parent, ringpp_child, &t);
    munmap(t.ref, sizeof *t.ref);
}

static void floor_ring_stream(uint32_t len, long packets, int reps)
{
    ring_test_t t = {.ref = bench_ref_alloc(), .len = len, .packets = packets,
                     .reps = reps < MAX_REPS ? reps : MAX_REPS};
    run_pair(ringst_parent, ringst_child, &t);
    munmap(t.ref, sizeof *t.ref);
}

/* ---- main ----------------------------------------------------------------- */

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    long pp_iters = bench_env_long("FLOORS_PINGPONG_ITERS", 200000);
    long st_packets = bench_env_long("FLOORS_STREAM_PACKETS", 262144);
    int st_reps = (int)bench_env_long("FLOORS_STREAM_REPS", 12);
    if (pp_iters < BENCH_BATCH)
        pp_iters = BENCH_BATCH;

    cpu_set_t orig;
    if (sched_getaffinity(0, sizeof orig, &orig) != 0) {
        perror("floors: sched_getaffinity");
        return 1;
    }
    bench_pin_setup();
    cpu_a = bench_nth_cpu(&orig, 0);
    cpu_b = bench_oversubscribed ? cpu_a : bench_nth_cpu(&orig, 1);
    int err = bench_pin_cpu(cpu_a);
    if (err) {
        fprintf(stderr, "floors: pinning to CPU %d: %s\n", cpu_a, strerror(err));
        return 1;
    }
    bench_note("floors: processes pinned to CPU %d and CPU %d; %ld round trips per latency, "
               "%ld packets x %d samples per stream",
               cpu_a, cpu_b, pp_iters, st_packets, st_reps);
    bench_kv("floor", "oversubscribed", bench_oversubscribed);

    floor_handoff(pp_iters);
    const char *only = getenv("FLOORS_ONLY");
    if (only && strcmp(only, "handoff") == 0)
        return 0;

    static const uint32_t pp_sizes[] = {0, 8, 64, 240};
    for (size_t i = 0; i < sizeof pp_sizes / sizeof pp_sizes[0]; i++)
        floor_ring_pingpong(pp_sizes[i], pp_iters);

    static const struct {
        size_t bytes;
        const char *name;
    } mc[] = {{4u << 10, "4k"}, {64u << 10, "64k"}, {1u << 20, "1m"},
              {4u << 20, "4m"}, {16u << 20, "16m"}, {64u << 20, "64m"}};
    for (size_t i = 0; i < sizeof mc / sizeof mc[0]; i++)
        floor_memcpy(mc[i].bytes, mc[i].name);

    floor_cma(0);
    floor_cma(1);

    static const uint32_t st_sizes[] = {32, 64, 128, 240};
    for (size_t i = 0; i < sizeof st_sizes / sizeof st_sizes[0]; i++)
        floor_ring_stream(st_sizes[i], st_packets, st_reps);
    return 0;
}
