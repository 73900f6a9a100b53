/*
 * torx netmod: start-up and shut-down.
 *
 * The message layer is started in init_world with a torx_boot_t whose
 * allgather and barrier are MPICH's own PMI calls (MPIR_pmi_allgather,
 * MPIR_pmi_barrier): MPICH already holds the PMI-1 connection hydra passes
 * in PMI_FD, and a second PMI client on the same socket would interleave its
 * requests with MPICH's.
 */
#include "mpidimpl.h"
#include "torx_impl.h"
#include <sched.h>
#include <unistd.h>

/* Oversubscribed hosts (more ranks here than CPUs, as when MPICH's test
 * suite runs 4 ranks on 2 cores): MPICH's progress loop polls without ever
 * giving up the core (its MPIDI_PROGRESS_YIELD does nothing in a
 * single-threaded run), so a rank waiting for a message spins through the
 * time slice that the rank that would send it needs. Then a progress hook
 * (MPIR_Progress_hook_register: it runs before every netmod progress call)
 * yields the core after a few polls in a row in which no torx handler or
 * callback ran (MPIDI_TORX_EVENT). (Sleeping on torx's doorbell after a run of idle
 * polls, through torx_wait_timeout, measured no faster on this machine's
 * 3- and 4-rank runs; the plain yield stays.)
 * TORX_PROGRESS_YIELD: auto (default: when oversubscribed) | 0 | 1. */
static int yield_hook_id = -1;

/* Yield after this many polls in a row that brought nothing, not after
 * each: a task that has sent its part of an exchange often finds a peer's
 * reply on the next polls, from the rank on the other core. 4 ranks on 2
 * cores, back to back: an 8-byte alltoall 4.1-5.0 us (1 KiB 6.7-8.4)
 * against 8.7-10.2 (11.8-13.9) with a yield per idle poll, Open MPI's
 * 4.4-6.8 (8.2-12.1); at 8 ranks 18.7-20.3 against 41.8-43.3 (Open MPI
 * 24-28); barrier, allreduce, allgather and bcast level within the runs'
 * noise; 2 and 4 polls alike for those, 2 only half the alltoall's gain. */
#define IDLE_POLLS_PER_YIELD 4
static unsigned idle_polls;

static int yield_hook(int *made_progress)
{
    (void) made_progress;
    if (MPIDI_TORX_global.event) {
        MPIDI_TORX_global.event = 0;
        idle_polls = 0;
    } else if (++idle_polls == IDLE_POLLS_PER_YIELD) {
        idle_polls = 0;
        sched_yield();
    }
    return MPI_SUCCESS;
}

/* Oversubscribed means more ranks on this host than it has CPUs for the
 * job: those hydra's proxy, the ranks' parent, may run on (a cpuset or a
 * container's limit shows there; the proxy itself is never bound), at most
 * the CPUs online. Not this task's own affinity mask: a launcher that binds
 * each rank to its own core (mpiexec -bind-to core) leaves one CPU in
 * every mask, and a yield per idle poll would then cost every rank a
 * system call. */
static long host_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    if (sched_getaffinity(getppid(), sizeof set, &set) == 0) {
        const int c = CPU_COUNT(&set);
        if (c > 0 && (n <= 0 || c < n))
            n = c;
    }
    return n;
}

int MPIDI_TORX_host_oversubscribed(void)
{
    const long ncpu = host_cpus();
    return ncpu > 0 && MPIR_Process.local_size > ncpu;
}

/* TORX_PROGRESS_YIELD: auto (default), 0 or 1; libtorx's parser refuses
 * anything else, naming the variable. */
static torx_status_t want_yield_hook(int *yield)
{
    static const char *const choices[] = { "auto", "0", "1", NULL };
    int c;
    torx_status_t st = torx_env_choice("TORX_PROGRESS_YIELD", choices, 0, &c);
    if (st != TORX_OK)
        return st;
    *yield = c ? c == 2 : MPIDI_TORX_host_oversubscribed();
    return TORX_OK;
}

/* A bad TORX_* variable or mapping file at start-up: every task fails
 * alike. Rank 0 says so itself, at once, and every task then waits a
 * moment: hydra ends the job at the first abort and drops output it has
 * not forwarded yet, including MPICH's error stack. Returns the MPI error. */
int MPIDI_TORX_startup_failed(void)
{
    int mpi_errno = MPI_SUCCESS;
    if (MPIR_Process.rank == 0)
        fprintf(stderr, "MPI_Init: %s\n", torx_last_error());
    usleep(MPIR_Process.rank == 0 ? 200 * 1000 : 500 * 1000);
    MPIR_ERR_SET1(mpi_errno, MPI_ERR_OTHER, "**fail", "**fail %s", torx_last_error());
    return mpi_errno;
}

/* TORX_VERBOSE >= 1: rank 0 says which protocol an MPI message of each size
 * takes (the message layer's limits minus the MPI envelope). */
static void print_thresholds(void)
{
    long verbose;               /* checked by torx_init already */
    if (torx_env_int("TORX_VERBOSE", -1, 3, 0, &verbose) != TORX_OK || verbose < 1 ||
        MPIDI_TORX_global.rank != 0)
        return;
    torx_ctx_t *ctx = MPIDI_TORX_global.ctx;
    const torx_limits_t *lim = torx_ctx_limits(ctx);
    const size_t env = sizeof(MPIDI_TORX_p2p_hdr_t);
    static const char *const modes[] = { "heater", "co", "vn" };
    char onepkt[64], adaptive[64];
    if (lim->onepkt_limit > env)
        snprintf(onepkt, sizeof onepkt, "one-packet <= %zu B, ", lim->onepkt_limit - env);
    else
        snprintf(onepkt, sizeof onepkt, "one-packet off, ");
    if (lim->adaptive_limit)
        snprintf(adaptive, sizeof adaptive, "adaptive eager <= %zu B, ", lim->adaptive_limit);
    else
        adaptive[0] = '\0';
    char staged[96];
    if (lim->stage_min && torx_stage_max(torx_ctx_device(ctx)))
        snprintf(staged, sizeof staged, " (staged from %zu B, in pieces of up to %zu B)",
                 lim->stage_min, lim->stage_chunk);
    else
        snprintf(staged, sizeof staged, " (by packets: staging off)");
    char idle[96] = "";
    if (lim->stage_min && torx_stage_max(torx_ctx_device(ctx)) &&
        lim->idle_limit > lim->eager_limit)
        snprintf(idle, sizeof idle, ", staged up to %zu B to a task exchanging one at a time",
                 lim->idle_limit);
    static const char *const rzv_data[] = {
        [TORX_RZV_DATA_AUTO] = "auto: through the staging area where a bulk get costs more "
            "than two copies, else bulk get",
        [TORX_RZV_DATA_BULK] = "bulk get",
        [TORX_RZV_DATA_PACKETS] = "adaptive packets",
        [TORX_RZV_DATA_STAGED] = "through the staging area",
    };
    fprintf(stderr, "torx netmod: %d tasks, mode %s (%d per node); MPI messages: %s%s"
            "eager <= %zu B%s, rendezvous above (%s)%s%s; RMA active messages eager <= %ld B\n",
            MPIDI_TORX_global.size, modes[torx_mode(ctx)], torx_tasks_per_node(ctx), onepkt,
            adaptive, lim->eager_limit, staged, rzv_data[lim->rzv_data],
            idle,
            torx_mode(ctx) == TORX_MODE_VN ? ", virtual node within a node above one packet" : "",
            (long) MPIDI_TORX_global.am_eager_limit);
}

/* ---- MPI_T performance variables ---------------------------------------------- */
/* torx's counters as MPI_T pvars named torx_<protocol>_<counter> and
 * torx_netmod_<counter>: readable by any MPI_T tool (MPI_T_pvar_get_num,
 * _get_info, a pvar session, _read). Class COUNTER, unsigned long long, bound to
 * no object, read-only and continuous. MPICH registers them through its
 * own table (MPIR_T_PVAR_REGISTER_impl, always built: no configure option
 * is needed); the value is read from libtorx when a tool reads it, so the
 * message path pays nothing. After MPI_Finalize a read returns the last
 * values (pvars_freeze), since the torx context is gone. */
enum { PVAR_PROTO_FIELDS = 6, PVAR_NETMOD = 8, PVAR_DATA = 6 };
static const char *const pvar_proto_names[TORX_PROTO_COUNT] = {
    NULL, "onepkt", "eager", "adaptive", "rzv", "vn"
};
static const char *const pvar_proto_fields[PVAR_PROTO_FIELDS] = {
    "messages_sent", "messages_received", "bytes_sent", "bytes_received",
    "packets_sent", "packets_received"
};
static const char *const pvar_netmod_names[PVAR_NETMOD] = {
    "p2p_sent", "p2p_injected", "p2p_received", "p2p_unexpected", "p2p_deferred",
    "am_sent", "am_received", "am_deferred"
};
/* How rendezvous and vn data came (torx_stats_data): by a bulk get, or
 * instead through the staging area or as packets. */
static const char *const pvar_data_names[PVAR_DATA] = {
    "bulk_transfers", "bulk_bytes", "staged_transfers", "staged_bytes", "packets_transfers",
    "packets_bytes"
};
static const char *const pvar_data_descs[PVAR_DATA] = {
    "rendezvous and vn messages whose data this task received by a bulk get",
    "their data bytes",
    "rendezvous and vn messages whose data this task received through the staging area instead",
    "their data bytes",
    "rendezvous and vn messages whose data this task received as packets instead",
    "their data bytes"
};
/* Every registered pvar (these and torx_coll.c's): its reader, and its
 * last value once MPI_Finalize has frozen them. */
enum { PVARS_MAX = 256 };
static struct pvar {
    MPIDI_TORX_pvar_read_fn read;
    int a, b, c;
    unsigned long long final;
} pvars[PVARS_MAX];
static int npvars, pvars_frozen;

static void pvar_get(void *addr, void *obj_handle, int count, void *buf)
{
    (void) obj_handle;
    (void) count;
    const struct pvar *v = addr;
    *(unsigned long long *) buf = pvars_frozen || !MPIDI_TORX_global.ctx
        ? v->final : v->read(v->a, v->b, v->c);
}

void MPIDI_TORX_pvar_add(const char *name, const char *desc, MPIDI_TORX_pvar_read_fn read, int a,
                         int b, int c)
{
    MPIR_Assert(npvars < PVARS_MAX);
    struct pvar *v = &pvars[npvars++];
    *v = (struct pvar) {.read = read,.a = a,.b = b,.c = c };
    MPIR_T_PVAR_REGISTER_impl(MPI_T_PVAR_CLASS_COUNTER, MPI_UNSIGNED_LONG_LONG, name, v, 1,
                              MPI_T_ENUM_NULL, MPI_T_VERBOSITY_USER_BASIC, MPI_T_BIND_NO_OBJECT,
                              MPIR_T_PVAR_FLAG_READONLY | MPIR_T_PVAR_FLAG_CONTINUOUS, pvar_get,
                              NULL, "torx", desc);
}

/* Keeps the last values for tools that read after MPI_Finalize: before the
 * collectives and the torx context go. */
static void pvars_freeze(void)
{
    for (int i = 0; i < npvars; i++)
        pvars[i].final = pvars[i].read(pvars[i].a, pvars[i].b, pvars[i].c);
    pvars_frozen = 1;
}

/* proto: a protocol's counter; 0: a netmod counter; -1: a data-path
 * counter; field its index. */
static unsigned long long pvar_value(int proto, int field, int unused)
{
    (void) unused;
    const MPIDI_TORX_global_t *g = &MPIDI_TORX_global;
    if (proto < 0) {
        torx_data_stats_t d;
        torx_stats_data(g->ctx, &d);
        const uint64_t f[PVAR_DATA] = {
            d.bulk, d.bulk_bytes, d.staged, d.staged_bytes, d.packets, d.packets_bytes
        };
        return f[field];
    }
    if (proto == 0) {
        const uint64_t netmod[PVAR_NETMOD] = {
            g->p2p_sent, g->p2p_inject, g->p2p_received, g->p2p_unexpected, g->p2p_deferred,
            g->am_sent, g->am_received, g->am_deferred
        };
        return netmod[field];
    }
    torx_proto_stats_t st[TORX_PROTO_COUNT];
    torx_stats(g->ctx, st);
    const torx_proto_stats_t *p = &st[proto];
    const uint64_t f[PVAR_PROTO_FIELDS] = {
        p->sent, p->received, p->bytes_sent, p->bytes_received, p->packets_sent,
        p->packets_received
    };
    return f[field];
}

static void pvars_register(void)
{
    char name[64], desc[160];
    for (int proto = TORX_PROTO_ONEPKT; proto < TORX_PROTO_COUNT; proto++)
        for (int f = 0; f < PVAR_PROTO_FIELDS; f++) {
            snprintf(name, sizeof name, "torx_%s_%s", pvar_proto_names[proto],
                     pvar_proto_fields[f]);
            snprintf(desc, sizeof desc, "torx message layer, %s protocol: %s by this task",
                     pvar_proto_names[proto], pvar_proto_fields[f]);
            MPIDI_TORX_pvar_add(name, desc, pvar_value, proto, f, 0);
        }
    for (int f = 0; f < PVAR_NETMOD; f++) {
        snprintf(name, sizeof name, "torx_netmod_%s", pvar_netmod_names[f]);
        snprintf(desc, sizeof desc, "torx netmod: %s by this task (as TORX_STATS=1 prints)",
                 pvar_netmod_names[f]);
        MPIDI_TORX_pvar_add(name, desc, pvar_value, 0, f, 0);
    }
    for (int f = 0; f < PVAR_DATA; f++) {
        snprintf(name, sizeof name, "torx_data_%s", pvar_data_names[f]);
        snprintf(desc, sizeof desc, "torx message layer: %s", pvar_data_descs[f]);
        MPIDI_TORX_pvar_add(name, desc, pvar_value, -1, f, 0);
    }
}

static torx_status_t boot_allgather(torx_boot_t * boot, const void *mine, void *all, size_t len)
{
    int mpi_errno = MPIR_pmi_allgather(mine, (int) len, all, (int) len, MPIR_PMI_DOMAIN_ALL);
    return mpi_errno == MPI_SUCCESS ? TORX_OK : TORX_ERR_PEER;
}

static torx_status_t boot_barrier(torx_boot_t * boot)
{
    return MPIR_pmi_barrier() == MPI_SUCCESS ? TORX_OK : TORX_ERR_PEER;
}

int MPIDI_TORX_init_local(int *tag_bits)
{
    /* the envelope carries a full 32-bit tag */
    *tag_bits = MPIR_TAG_BITS_DEFAULT;

    /* the MPIDIG eager limit; unexpected eager data must fit a pack buffer */
    MPI_Aint cap = MPIR_CVAR_CH4_AM_PACK_BUFFER_SIZE - MPIDI_TORX_AM_HDR_MAX;
    long lim;
    if (torx_env_int("TORX_AM_EAGER_LIMIT", 0, cap, MPL_MIN(MPIDI_TORX_AM_EAGER_LIMIT_DEFAULT, cap),
                     &lim) != TORX_OK)
        return MPIDI_TORX_startup_failed();
    MPIDI_TORX_global.am_eager_limit = lim;
    return MPI_SUCCESS;
}

int MPIDI_TORX_init_world(void)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_TORX_global_t *g = &MPIDI_TORX_global;

    g->rank = MPIR_Process.rank;
    g->size = MPIR_Process.size;
    const char *job = MPIR_pmi_job_id();
    snprintf(g->job_id, sizeof g->job_id, "%s", job && *job ? job : "mpich-singleton");
    g->boot.rank = g->rank;
    g->boot.size = g->size;
    g->boot.allgather = boot_allgather;
    g->boot.barrier = boot_barrier;
    g->boot.finalize = NULL;
    g->boot.impl = g->job_id;   /* torx_boot_job_id() reads the string at impl */

    g->pending_head = MPL_calloc(g->size, sizeof(*g->pending_head), MPL_MEM_OTHER);
    g->pending_tail = MPL_calloc(g->size, sizeof(*g->pending_tail), MPL_MEM_OTHER);
    MPIR_ERR_CHKANDJUMP(!g->pending_head || !g->pending_tail, mpi_errno, MPI_ERR_NO_MEM, "**nomem");

    int yield;
    if (want_yield_hook(&yield) != TORX_OK) {
        mpi_errno = MPIDI_TORX_startup_failed();
        goto fn_fail;
    }
    torx_init_attr_t attr = {.boot = &g->boot, .mode = -1, .mapping = NULL, .limits = NULL };
    torx_status_t st = torx_init(&attr, &g->ctx);
    if (st != TORX_OK) {
        mpi_errno = MPIDI_TORX_startup_failed();
        goto fn_fail;
    }
    MPIR_Assert(torx_rank(g->ctx) == g->rank && torx_size(g->ctx) == g->size);
    st = torx_register(g->ctx, MPIDI_TORX_AM_HANDLER, MPIDI_TORX_am_handler, NULL);
    if (st == TORX_OK)
        st = torx_register(g->ctx, MPIDI_TORX_P2P_HANDLER, MPIDI_TORX_p2p_handler, NULL);
    if (st != TORX_OK)
        MPIDI_TORX_fatal("torx_register", st);
    print_thresholds();
    pvars_register();
    mpi_errno = MPIDI_TORX_coll_init();
    MPIR_ERR_CHECK(mpi_errno);

    if (yield) {
        mpi_errno = MPIR_Progress_hook_register(yield_hook, &yield_hook_id);
        MPIR_ERR_CHECK(mpi_errno);
        mpi_errno = MPIR_Progress_hook_activate(yield_hook_id);
        MPIR_ERR_CHECK(mpi_errno);
    }

    /* world rank i is torx rank i */
    for (int i = 0; i < g->size; i++)
        MPIDI_TORX_AV(&MPIDIU_get_av(0, i)).rank = i;

  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_TORX_post_init(void)
{
    return MPI_SUCCESS;
}

int MPIDI_TORX_mpi_finalize_hook(void)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_TORX_global_t *g = &MPIDI_TORX_global;

    if (yield_hook_id >= 0) {
        MPIR_Progress_hook_deregister(yield_hook_id);
        yield_hook_id = -1;
    }
    if (g->ctx) {
        MPIDI_TORX_p2p_finalize();
        long stats;             /* checked by torx_init already */
        if (torx_env_int("TORX_STATS", 0, 1, 0, &stats) == TORX_OK && stats) {
            fprintf(stderr, "torx netmod rank %d: point-to-point sent %llu (injected at once "
                    "%llu), received %llu, unexpected %llu (rendezvous deferred %llu)\n",
                    g->rank, (unsigned long long) g->p2p_sent, (unsigned long long) g->p2p_inject,
                    (unsigned long long) g->p2p_received, (unsigned long long) g->p2p_unexpected,
                    (unsigned long long) g->p2p_deferred);
            fprintf(stderr, "torx netmod rank %d: active messages sent %llu, received %llu, "
                    "deferred %llu\n", g->rank, (unsigned long long) g->am_sent,
                    (unsigned long long) g->am_received, (unsigned long long) g->am_deferred);
        }
        pvars_freeze();
        MPIDI_TORX_coll_finalize();
        torx_status_t st = torx_finalize(g->ctx);
        g->ctx = NULL;
        if (st != TORX_OK)
            MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_OTHER, "**fail", "**fail %s",
                                 torx_last_error());
    }
  fn_exit:
    MPL_free(g->pending_head);
    MPL_free(g->pending_tail);
    g->pending_head = g->pending_tail = NULL;
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

void *MPIDI_TORX_mpi_alloc_mem(MPI_Aint size, MPIR_Info * info_ptr)
{
    return MPIDIG_mpi_alloc_mem(size, info_ptr);
}

int MPIDI_TORX_mpi_free_mem(void *ptr)
{
    return MPIDIG_mpi_free_mem(ptr);
}
