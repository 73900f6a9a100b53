/*
 * torx netmod: collectives. Maps a communicator onto a torx_coll group and
 * MPI datatypes and ops onto torx's, asks src/coll/ which algorithm a call
 * runs (<torx/coll.h>, torx_coll_select) and runs it, or MPICH's own
 * (MPIR_*_impl) when none of torx's applies or it is forbidden.
 *
 * Nonblocking collectives: MPI_Ibarrier on the global interrupt, and
 * MPI_Iallreduce, MPI_Ireduce and MPI_Ibcast on the collective network,
 * run on a hardware channel of their communicator's own (src/coll/
 * coll_nb.c says why); the others, and those of communicators without a
 * channel, run MPICH's schedules over torx point-to-point. A channel goes
 * to a communicator of every task whose context id is one of three
 * (comm_channel): MPICH never gives one id to two live communicators, so
 * no two share a channel, and every member derives the same one without
 * communicating. Under MPI_THREAD_MULTIPLE (two threads may run
 * collectives on two communicators at once) no communicator uses torx's
 * collectives.
 *
 * MPIX_Get_last_algorithm_name, for <mpix.h>, lives here: it reads what the
 * communicator's last collective ran.
 */
#include "mpidimpl.h"
#include "torx_impl.h"
#include <torx/coll.h>

static torx_coll_t *coll;

/* Nonblocking collectives, counted here (src/coll/ never sees them). */
enum { NB_BARRIER, NB_BCAST, NB_ALLREDUCE, NB_REDUCE, NB_ALLTOALL, NB_ALLTOALLV, NB_ALLGATHER,
    NB_KINDS
};
static const char *const nb_names[NB_KINDS] = {
    "ibarrier:mpich", "ibcast:mpich", "iallreduce:mpich", "ireduce:mpich", "ialltoall:mpich",
    "ialltoallv:mpich", "iallgather:mpich"
};

static uint64_t nb_calls[NB_KINDS];

/* ---- MPI_T: the counters as performance variables ------------------------------------ */

/* torx_coll_<kind>_<alg>_calls and _bytes for every algorithm a collective
 * has (mpich: MPICH's ran), from torx_coll_counters, and
 * torx_coll_i<kind>_mpich_calls for the nonblocking ones, as MPI_T pvars
 * (MPIDI_TORX_pvar_add). what: 0 calls, 1 bytes; 2 nonblocking calls of
 * MPICH's (kind: NB_*); 3 calls, 4 bytes of nonblocking collectives on
 * torx's algorithms. */
static unsigned long long coll_pvar_value(int kind, int alg, int what)
{
    uint64_t calls, bytes;
    if (what == 2)
        return nb_calls[kind];
    if (what >= 3) {
        torx_coll_icounters(coll, (torx_coll_kind_t) kind, (torx_coll_alg_t) alg, &calls, &bytes);
        return what == 4 ? bytes : calls;
    }
    torx_coll_counters(coll, (torx_coll_kind_t) kind, (torx_coll_alg_t) alg, &calls, &bytes);
    return what ? bytes : calls;
}

static void coll_pvars_register(void)
{
    static const char *const what_names[2] = { "calls", "bytes" };
    static const char *const what_descs[2] = {
        "calls by this task",
        "bytes of those calls by this task (the buffer of bcast, the vector of a reduction, "
            "one task's block of allgather and alltoall)"
    };
    char name[64], desc[256];
    /* blocking (torx_coll_counters), then torx's nonblocking algorithms
     * (torx_coll_icounters: torx_coll_ibarrier_gi_calls, ...; MPICH's
     * schedules are counted here, below) */
    for (int nb = 0; nb < 2; nb++)
        for (int k = 0; k < TORX_COLL_NKINDS; k++)
            for (int a = nb; a < TORX_COLL_NALGS; a++) {
                const torx_coll_kind_t kind = (torx_coll_kind_t) k;
                const torx_coll_alg_t alg = (torx_coll_alg_t) a;
                if (!(nb ? torx_coll_icounters : torx_coll_counters) (NULL, kind, alg, NULL, NULL))
                    continue;
                for (int w = 0; w < 2; w++) {
                    snprintf(name, sizeof name, "torx_coll_%s%s_%s_%s", nb ? "i" : "",
                             torx_coll_kind_name(kind), torx_coll_alg_name(alg), what_names[w]);
                    snprintf(desc, sizeof desc, "torx collectives, %s%s by the %s algorithm: %s",
                             nb ? "nonblocking " : "", torx_coll_kind_name(kind),
                             torx_coll_alg_name(alg), what_descs[w]);
                    MPIDI_TORX_pvar_add(name, desc, coll_pvar_value, k, a, nb ? 3 + w : w);
                }
            }
    for (int k = 0; k < NB_KINDS; k++) {
        /* "ibarrier:mpich" -> torx_coll_ibarrier_mpich_calls */
        const char *colon = strchr(nb_names[k], ':');
        snprintf(name, sizeof name, "torx_coll_%.*s_%s_calls", (int) (colon - nb_names[k]),
                 nb_names[k], colon + 1);
        snprintf(desc, sizeof desc, "torx netmod, nonblocking collectives: %s calls by this task",
                 nb_names[k]);
        MPIDI_TORX_pvar_add(name, desc, coll_pvar_value, k, 0, 2);
    }
}

static void coll_progress(void *arg)
{
    (void) arg;
    /* Errors of the torx context end the job inside (MPIDI_NM_progress). */
    (void) MPID_Progress_test(NULL);
}

int MPIDI_TORX_coll_init(void)
{
    torx_coll_attr_t attr = {
        .handler = MPIDI_TORX_COLL_HANDLER,
        .progress = coll_progress,
        .progress_arg = NULL,
        .oversubscribed = MPIDI_TORX_host_oversubscribed(),
    };
    torx_status_t st = torx_coll_init(MPIDI_TORX_global.ctx, &attr, &coll);
    if (st != TORX_OK)     /* a bad TORX_COLL* value: an error naming the variable */
        return MPIDI_TORX_startup_failed();
    coll_pvars_register();
    return MPI_SUCCESS;
}

void MPIDI_TORX_coll_finalize(void)
{
    long stats = 0;             /* checked by torx_init already */
    if (torx_env_int("TORX_STATS", 0, 1, 0, &stats) == TORX_OK && stats) {
        char line[512];
        int len = snprintf(line, sizeof line, "torx netmod rank %d: nonblocking collectives",
                           MPIDI_TORX_global.rank);
        for (int k = 0; k < NB_KINDS && len < (int) sizeof line; k++)
            len += snprintf(line + len, sizeof line - len, " %s %llu", nb_names[k],
                            (unsigned long long) nb_calls[k]);
        fprintf(stderr, "%s\n", line);
    }
    torx_coll_finalize(coll);   /* prints its counters at TORX_STATS=1 */
    coll = NULL;
}

/* ---- communicators ----------------------------------------------------------- */

void MPIDI_TORX_coll_comm_init(MPIR_Comm * comm)
{
    MPIDI_TORX_comm_t *tc = &comm->dev.ch4.netmod.torx;
    tc->coll_group = NULL;
    tc->coll_state = 0;
    tc->last_algorithm = NULL;
}

void MPIDI_TORX_coll_comm_free(MPIR_Comm * comm)
{
    MPIDI_TORX_comm_t *tc = &comm->dev.ch4.netmod.torx;
    /* After MPIDI_TORX_coll_finalize the groups went with the module. */
    if (tc->coll_state == 1 && coll != NULL)
        torx_coll_group_free(tc->coll_group);
    tc->coll_group = NULL;
    tc->coll_state = 0;
}

/* The hardware channel of comm's nonblocking collectives: 1 for
 * MPI_COMM_WORLD (context id prefix 0), 2 and 3 for the communicators with
 * the prefixes MPICH hands out first (31 and 30: contextid.c's
 * locate_context_bit takes the highest free bit of its mask's first word;
 * typically a program's or a library's first duplicates of WORLD), when
 * they span every task; 0 (none) for the others. Only plain
 * communicators: the subcommunicators MPICH derives (node, node roots)
 * carry the parent's prefix with other low bits. MPICH frees an id only
 * when no member holds the communicator any more, so a channel's last
 * owner is gone on every task before its next one exists
 * (docs/collectives.md#nonblocking). */
static unsigned comm_channel(const MPIR_Comm * comm)
{
    const int id = comm->context_id;
    if (comm->local_size != MPIDI_TORX_global.size || (id & ~MPIR_CONTEXT_PREFIX_MASK) != 0)
        return 0;
    const int prefix = id >> MPIR_CONTEXT_PREFIX_SHIFT;
    return prefix == 0 ? 1 : prefix == 31 ? 2 : prefix == 30 ? 3 : 0;
}

/* The communicator's group, made at its first collective (most
 * communicators never run one); NULL for intercommunicators and under
 * MPI_THREAD_MULTIPLE. */
static torx_coll_group_t *comm_group(MPIR_Comm * comm)
{
    MPIDI_TORX_comm_t *tc = &comm->dev.ch4.netmod.torx;
    if (likely(tc->coll_state == 1))
        return tc->coll_group;
    if (tc->coll_state < 0 || coll == NULL)
        return NULL;
    tc->coll_state = -1;
    if (comm->comm_kind != MPIR_COMM_KIND__INTRACOMM ||
        MPIR_ThreadInfo.thread_provided == MPI_THREAD_MULTIPLE)
        return NULL;
    int n = comm->local_size;
    int *tasks = MPL_malloc(n * sizeof(int), MPL_MEM_COMM);
    if (tasks == NULL)
        return NULL;            /* MPICH's algorithms need no table */
    for (int i = 0; i < n; i++)
        tasks[i] = MPIDI_TORX_AV(MPIDIU_comm_rank_to_av(comm, i)).rank;
    if (torx_coll_group_create(coll, (uint32_t) comm->context_id, n, tasks, comm->rank,
                               &tc->coll_group) == TORX_OK)
        tc->coll_state = 1;
    MPL_free(tasks);
    if (tc->coll_state == 1) {
        const unsigned ch = comm_channel(comm);
        if (ch != 0)
            torx_coll_group_channel(tc->coll_group, ch);
        long verbose = 0;
        if (torx_env_int("TORX_VERBOSE", -1, 3, 0, &verbose) == TORX_OK && verbose >= 2)
            fprintf(stderr, "torx rank %d: communicator of %d tasks, context id %#x: "
                    "nonblocking collectives on %s %u\n", MPIDI_TORX_global.rank, n,
                    (unsigned) comm->context_id, ch ? "hardware channel" : "MPICH's schedules,",
                    ch);
    }
    return tc->coll_state == 1 ? tc->coll_group : NULL;
}

/* Records what ran, for MPIX_Get_last_algorithm_name. */
static inline void ran(MPIR_Comm * comm, torx_coll_group_t * g, const char *fallback_name)
{
    comm->dev.ch4.netmod.torx.last_algorithm = g ? torx_coll_last_algorithm(g) : fallback_name;
}

/* A torx collective failed: a dead peer ends the job (as in
 * point-to-point); anything else (members that disagreed on the call) is
 * the collective's MPI error. */
static int coll_error(torx_status_t st, const char *what)
{
    if (st == TORX_ERR_PEER)
        MPIDI_TORX_fatal(what, st);
    int mpi_errno = MPI_SUCCESS;
    MPIR_ERR_SET2(mpi_errno, MPI_ERR_OTHER, "**fail", "**fail %s: %s", what,
                  torx_last_error());
    return mpi_errno;
}

/* Whether count elements of dt are one contiguous run of bytes; then
 * *bytes and *lb (where the run starts, from the buffer address). */
static int contig_bytes(MPI_Aint count, MPI_Datatype dt, size_t * bytes, MPI_Aint * lb)
{
    int contig;
    size_t sz;
    MPIR_Datatype *dtp;
    MPI_Aint true_lb;
    MPIDI_Datatype_get_info(count, dt, contig, sz, dtp, true_lb);
    if (!contig || (dtp != NULL && count > 1 && dtp->extent != (MPI_Aint) dtp->size))
        return 0;
    *bytes = sz;
    *lb = true_lb;
    return 1;
}

/* MPI's predefined types that are 32- or 64-bit integers or IEEE floats.
 * (MPI_LONG_LONG and MPI_LONG_LONG_INT are one handle.) */
static torx_coll_dtype_t map_dtype(MPI_Datatype dt)
{
    static const MPI_Datatype sints[] = {
        MPI_INT, MPI_LONG, MPI_LONG_LONG_INT, MPI_INT32_T, MPI_INT64_T, MPI_INTEGER,
        MPI_INTEGER4, MPI_INTEGER8, MPI_AINT, MPI_OFFSET, MPI_COUNT
    };
    static const MPI_Datatype uints[] = {
        MPI_UNSIGNED, MPI_UNSIGNED_LONG, MPI_UNSIGNED_LONG_LONG, MPI_UINT32_T, MPI_UINT64_T
    };
    /* the common ones first */
    if (dt == MPI_DOUBLE)
        return TORX_COLL_DOUBLE;
    if (dt == MPI_INT)
        return sizeof(int) == 4 ? TORX_COLL_S32 : TORX_COLL_NDTYPES;
    if (dt == MPI_INT64_T)
        return TORX_COLL_S64;
    if (!HANDLE_IS_BUILTIN(dt))
        return TORX_COLL_NDTYPES;
    int size = MPIR_Datatype_get_basic_size(dt);
    for (size_t i = 0; i < sizeof sints / sizeof sints[0]; i++)
        if (dt == sints[i])
            return size == 4 ? TORX_COLL_S32 : size == 8 ? TORX_COLL_S64 : TORX_COLL_NDTYPES;
    for (size_t i = 0; i < sizeof uints / sizeof uints[0]; i++)
        if (dt == uints[i])
            return size == 4 ? TORX_COLL_U32 : size == 8 ? TORX_COLL_U64 : TORX_COLL_NDTYPES;
    if (dt == MPI_FLOAT || dt == MPI_REAL || dt == MPI_REAL4)
        return size == 4 ? TORX_COLL_FLOAT : TORX_COLL_NDTYPES;
    if (dt == MPI_DOUBLE || dt == MPI_DOUBLE_PRECISION || dt == MPI_REAL8)
        return size == 8 ? TORX_COLL_DOUBLE : TORX_COLL_NDTYPES;
    return TORX_COLL_NDTYPES;
}

static torx_coll_op_t map_op(MPI_Op op)
{
    switch (op) {
        case MPI_SUM:
            return TORX_COLL_SUM;
        case MPI_MIN:
            return TORX_COLL_MIN;
        case MPI_MAX:
            return TORX_COLL_MAX;
        case MPI_BAND:
            return TORX_COLL_BAND;
        case MPI_BOR:
            return TORX_COLL_BOR;
        case MPI_BXOR:
            return TORX_COLL_BXOR;
        case MPI_LAND:
            return TORX_COLL_LAND;
        case MPI_LOR:
            return TORX_COLL_LOR;
        default:
            return TORX_COLL_NOPS;
    }
}

/* What an allreduce or reduce of count elements of datatype with op runs
 * on group g (NULL: fallback), with torx's names of the type and op;
 * nonblocking: as torx_coll_iselect chooses. */
static torx_coll_alg_t select_reduction(torx_coll_group_t * g, torx_coll_kind_t kind,
                                        MPI_Aint count, MPI_Datatype datatype, MPI_Op op,
                                        torx_coll_dtype_t * dt, torx_coll_op_t * top,
                                        int nonblocking)
{
    *dt = map_dtype(datatype);
    *top = map_op(op);
    if (g == NULL)
        return TORX_COLL_ALG_FALLBACK;
    size_t bytes = *dt == TORX_COLL_NDTYPES ? 0 : (size_t) count *
        MPIR_Datatype_get_basic_size(datatype);
    return nonblocking ? torx_coll_iselect(g, kind, bytes, *dt, *top)
        : torx_coll_select(g, kind, bytes, *dt, *top);
}

/* Whether a call of kind torx leaves to MPICH takes the algorithm below
 * instead of MPICH 4.0.2's own selection: the user left the choice to torx
 * (TORX_COLL_<KIND> auto) and to MPICH (mpich_auto: its CVAR is auto), the
 * op is built in, and the vector fits the eager limit. */
static int fallback_within_eager(torx_coll_group_t * g, torx_coll_kind_t kind, int mpich_auto,
                                 MPI_Op op, MPI_Aint count, MPI_Datatype datatype)
{
    MPI_Aint type_size;
    MPIR_Datatype_get_size_macro(datatype, type_size);
    return torx_coll_auto(g, kind) && mpich_auto && HANDLE_IS_BUILTIN(op) && count > 0 &&
        (size_t) count * (size_t) type_size <= torx_ctx_limits(MPIDI_TORX_global.ctx)->eager_limit;
}

/* MPICH's allreduce, for a call torx's algorithms leave to it. MPICH
 * 4.0.2's selection (maint/tuning/coll/mpir/generic.json) takes reduce-
 * scatter and allgather past 8 bytes: 2 log2 n steps. Recursive doubling
 * takes log2 n, each one eager message of the whole vector, and over torx
 * it was 1.1-2x faster up to the eager limit at 2, 4 and 8 ranks (level
 * with Open MPI or faster); past it each step is a rendezvous and it was
 * 2-3x slower (1000 calls a size; docs/collectives.md). So torx takes it
 * there when the user left the choice to torx and to MPICH
 * (TORX_COLL_ALLREDUCE and MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM auto). */
static int fallback_allreduce(torx_coll_group_t * g, const void *sendbuf, void *recvbuf,
                              MPI_Aint count, MPI_Datatype datatype, MPI_Op op,
                              MPIR_Comm * comm, MPIR_Errflag_t * errflag)
{
    if (fallback_within_eager(g, TORX_COLL_ALLREDUCE,
                              MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM ==
                              MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM_auto, op, count, datatype))
        return MPIR_Allreduce_intra_recursive_doubling(sendbuf, recvbuf, count, datatype, op, comm,
                                                       errflag);
    return MPIR_Allreduce_impl(sendbuf, recvbuf, count, datatype, op, comm, errflag);
}

/* MPICH's reduce, for a call torx's algorithms leave to it. MPICH 4.0.2
 * takes reduce-scatter and gather past 2 KiB: each member waits for the
 * others in every step, which oversubscribed costs a time slice each. The
 * binomial tree's leaves send once and leave: up to the eager limit it was
 * 1.1-1.3x faster at 2 ranks and 1.5-3.7x at 4 and 8 on 2 cores (8 KiB at
 * 8 ranks: 27-32 against 75-91 us back to back, 12 against 46 timed alone;
 * Open MPI 31-49 and 19-33), and mixed past it. So torx takes it there
 * when the user left the choice to torx and to MPICH
 * (TORX_COLL_REDUCE and MPIR_CVAR_REDUCE_INTRA_ALGORITHM auto). */
static int fallback_reduce(torx_coll_group_t * g, const void *sendbuf, void *recvbuf,
                           MPI_Aint count, MPI_Datatype datatype, MPI_Op op, int root,
                           MPIR_Comm * comm, MPIR_Errflag_t * errflag)
{
    if (fallback_within_eager(g, TORX_COLL_REDUCE,
                              MPIR_CVAR_REDUCE_INTRA_ALGORITHM ==
                              MPIR_CVAR_REDUCE_INTRA_ALGORITHM_auto, op, count, datatype))
        return MPIR_Reduce_intra_binomial(sendbuf, recvbuf, count, datatype, op, root, comm,
                                          errflag);
    return MPIR_Reduce_impl(sendbuf, recvbuf, count, datatype, op, root, comm, errflag);
}

/* ---- blocking collectives ----------------------------------------------------- */

int MPIDI_TORX_barrier(MPIR_Comm * comm, MPIR_Errflag_t * errflag)
{
    torx_coll_group_t *g = comm_group(comm);
    torx_coll_alg_t alg = g ? torx_coll_select(g, TORX_COLL_BARRIER, 0, 0, 0)
        : TORX_COLL_ALG_FALLBACK;
    ran(comm, g, "barrier:mpich");
    if (alg == TORX_COLL_ALG_FALLBACK)
        return MPIR_Barrier_impl(comm, errflag);
    torx_status_t st = torx_coll_barrier(g, alg);
    return st == TORX_OK ? MPI_SUCCESS : coll_error(st, "MPI_Barrier");
}

int MPIDI_TORX_bcast(void *buffer, MPI_Aint count, MPI_Datatype datatype, int root,
                     MPIR_Comm * comm, MPIR_Errflag_t * errflag)
{
    torx_coll_group_t *g = comm_group(comm);
    torx_coll_alg_t alg = TORX_COLL_ALG_FALLBACK;
    size_t bytes = TORX_COLL_NONCONTIG;
    MPI_Aint lb = 0;
    if (g) {
        if (!contig_bytes(count, datatype, &bytes, &lb))
            bytes = TORX_COLL_NONCONTIG;
        alg = torx_coll_select(g, TORX_COLL_BCAST, bytes, 0, 0);
    }
    ran(comm, g, "bcast:mpich");
    if (alg == TORX_COLL_ALG_FALLBACK)
        return MPIR_Bcast_impl(buffer, count, datatype, root, comm, errflag);
    torx_status_t st = torx_coll_bcast(g, alg, (char *) buffer + lb, bytes, root);
    return st == TORX_OK ? MPI_SUCCESS : coll_error(st, "MPI_Bcast");
}

int MPIDI_TORX_allreduce(const void *sendbuf, void *recvbuf, MPI_Aint count,
                         MPI_Datatype datatype, MPI_Op op, MPIR_Comm * comm,
                         MPIR_Errflag_t * errflag)
{
    torx_coll_group_t *g = comm_group(comm);
    torx_coll_dtype_t dt;
    torx_coll_op_t top;
    torx_coll_alg_t alg = select_reduction(g, TORX_COLL_ALLREDUCE, count, datatype, op, &dt, &top,
                                           0);
    ran(comm, g, "allreduce:mpich");
    if (alg == TORX_COLL_ALG_FALLBACK)
        return fallback_allreduce(g, sendbuf, recvbuf, count, datatype, op, comm, errflag);
    torx_status_t st = torx_coll_allreduce(g, alg, sendbuf == MPI_IN_PLACE ? NULL : sendbuf,
                                           recvbuf, (size_t) count, dt, top);
    return st == TORX_OK ? MPI_SUCCESS : coll_error(st, "MPI_Allreduce");
}

int MPIDI_TORX_reduce(const void *sendbuf, void *recvbuf, MPI_Aint count, MPI_Datatype datatype,
                      MPI_Op op, int root, MPIR_Comm * comm, MPIR_Errflag_t * errflag)
{
    torx_coll_group_t *g = comm_group(comm);
    torx_coll_dtype_t dt;
    torx_coll_op_t top;
    torx_coll_alg_t alg = select_reduction(g, TORX_COLL_REDUCE, count, datatype, op, &dt, &top, 0);
    ran(comm, g, "reduce:mpich");
    if (alg == TORX_COLL_ALG_FALLBACK)
        return fallback_reduce(g, sendbuf, recvbuf, count, datatype, op, root, comm, errflag);
    torx_status_t st = torx_coll_reduce(g, alg, sendbuf == MPI_IN_PLACE ? NULL : sendbuf,
                                        recvbuf, (size_t) count, dt, top, root);
    return st == TORX_OK ? MPI_SUCCESS : coll_error(st, "MPI_Reduce");
}

int MPIDI_TORX_allgather(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                         void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype,
                         MPIR_Comm * comm, MPIR_Errflag_t * errflag)
{
    torx_coll_group_t *g = comm_group(comm);
    torx_coll_alg_t alg = TORX_COLL_ALG_FALLBACK;
    size_t block = TORX_COLL_NONCONTIG, sbytes;
    MPI_Aint rlb = 0, slb = 0;
    if (g) {
        /* The whole receive buffer must be one run, and the send block as
         * long as a receive block. */
        size_t all;
        if (!contig_bytes(recvcount * comm->local_size, recvtype, &all, &rlb) ||
            (sendbuf != MPI_IN_PLACE && (!contig_bytes(sendcount, sendtype, &sbytes, &slb) ||
                                         sbytes != all / comm->local_size)))
            block = TORX_COLL_NONCONTIG;
        else
            block = all / comm->local_size;
        alg = torx_coll_select(g, TORX_COLL_ALLGATHER, block, 0, 0);
    }
    ran(comm, g, "allgather:mpich");
    if (alg == TORX_COLL_ALG_FALLBACK)
        return MPIR_Allgather_impl(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                   comm, errflag);
    torx_status_t st = torx_coll_allgather(g, alg, sendbuf == MPI_IN_PLACE ? NULL :
                                           (const char *) sendbuf + slb, (char *) recvbuf + rlb,
                                           block);
    return st == TORX_OK ? MPI_SUCCESS : coll_error(st, "MPI_Allgather");
}

/* An alltoall's bytes per block, when the send and receive buffers are
 * each one run of equal length (and their types' lower bounds); else
 * TORX_COLL_NONCONTIG. */
static size_t alltoall_block(MPIR_Comm * comm, const void *sendbuf, MPI_Aint sendcount,
                             MPI_Datatype sendtype, MPI_Aint recvcount, MPI_Datatype recvtype,
                             MPI_Aint * slb, MPI_Aint * rlb)
{
    int n = comm->local_size;
    size_t all, sall;
    if (sendbuf != MPI_IN_PLACE && contig_bytes(recvcount * n, recvtype, &all, rlb) &&
        contig_bytes(sendcount * n, sendtype, &sall, slb) && sall == all)
        return all / n;
    return TORX_COLL_NONCONTIG;
}

int MPIDI_TORX_alltoall(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                        void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype,
                        MPIR_Comm * comm, MPIR_Errflag_t * errflag)
{
    torx_coll_group_t *g = comm_group(comm);
    torx_coll_alg_t alg = TORX_COLL_ALG_FALLBACK;
    size_t block = TORX_COLL_NONCONTIG;
    MPI_Aint rlb = 0, slb = 0;
    if (g) {
        block = alltoall_block(comm, sendbuf, sendcount, sendtype, recvcount, recvtype, &slb, &rlb);
        alg = torx_coll_select(g, TORX_COLL_ALLTOALL, block, 0, 0);
    }
    ran(comm, g, "alltoall:mpich");
    if (alg == TORX_COLL_ALG_FALLBACK)
        return MPIR_Alltoall_impl(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                  comm, errflag);
    torx_status_t st = torx_coll_alltoall(g, alg, (const char *) sendbuf + slb,
                                          (char *) recvbuf + rlb, block);
    return st == TORX_OK ? MPI_SUCCESS : coll_error(st, "MPI_Alltoall");
}

/* An alltoallv's byte counts and displacements, for types of one element
 * that is contiguous and whose extent is its size: *v (send counts, send
 * displacements, receive counts, receive displacements; MPL_free it) and
 * the types' lower bounds, and 0; TORX_COLL_NONCONTIG (*v NULL) otherwise. */
static size_t alltoallv_bytes(MPIR_Comm * comm, const void *sendbuf, const MPI_Aint * sendcounts,
                              const MPI_Aint * sdispls, MPI_Datatype sendtype,
                              const MPI_Aint * recvcounts, const MPI_Aint * rdispls,
                              MPI_Datatype recvtype, size_t ** v, MPI_Aint * slb, MPI_Aint * rlb)
{
    int n = comm->local_size;
    size_t ssz, rsz;
    *v = NULL;
    if (sendbuf == MPI_IN_PLACE || !contig_bytes(2, sendtype, &ssz, slb) ||
        !contig_bytes(2, recvtype, &rsz, rlb) ||
        (*v = MPL_malloc(4 * n * sizeof(size_t), MPL_MEM_COLL)) == NULL)
        return TORX_COLL_NONCONTIG;
    ssz /= 2;
    rsz /= 2;
    for (int i = 0; i < n; i++) {
        (*v)[i] = sendcounts[i] * ssz;
        (*v)[n + i] = sdispls[i] * ssz;
        (*v)[2 * n + i] = recvcounts[i] * rsz;
        (*v)[3 * n + i] = rdispls[i] * rsz;
    }
    return 0;
}

int MPIDI_TORX_alltoallv(const void *sendbuf, const MPI_Aint * sendcounts,
                         const MPI_Aint * sdispls, MPI_Datatype sendtype, void *recvbuf,
                         const MPI_Aint * recvcounts, const MPI_Aint * rdispls,
                         MPI_Datatype recvtype, MPIR_Comm * comm, MPIR_Errflag_t * errflag)
{
    torx_coll_group_t *g = comm_group(comm);
    torx_coll_alg_t alg = TORX_COLL_ALG_FALLBACK;
    int n = comm->local_size;
    size_t *v = NULL;
    MPI_Aint slb = 0, rlb = 0;
    if (g)
        alg = torx_coll_select(g, TORX_COLL_ALLTOALLV,
                               alltoallv_bytes(comm, sendbuf, sendcounts, sdispls, sendtype,
                                               recvcounts, rdispls, recvtype, &v, &slb, &rlb),
                               0, 0);
    ran(comm, g, "alltoallv:mpich");
    int mpi_errno;
    if (alg == TORX_COLL_ALG_FALLBACK) {
        mpi_errno = MPIR_Alltoallv_impl(sendbuf, sendcounts, sdispls, sendtype, recvbuf,
                                        recvcounts, rdispls, recvtype, comm, errflag);
    } else {
        torx_status_t st = torx_coll_alltoallv(g, alg, (const char *) sendbuf + slb, v, v + n,
                                               (char *) recvbuf + rlb, v + 2 * n, v + 3 * n);
        mpi_errno = st == TORX_OK ? MPI_SUCCESS : coll_error(st, "MPI_Alltoallv");
    }
    MPL_free(v);
    return mpi_errno;
}

/* ---- nonblocking collectives ---------------------------------------------------- */

static inline void nb_ran(MPIR_Comm * comm, int kind)
{
    nb_calls[kind]++;
    comm->dev.ch4.netmod.torx.last_algorithm = nb_names[kind];
}

/* A torx nonblocking collective ended (inside torx_advance, from the
 * progress engine): complete its request. */
static void nb_done(void *arg, torx_status_t st)
{
    MPIR_Request *req = arg;
    if (st != TORX_OK)
        req->status.MPI_ERROR = coll_error(st, "a nonblocking collective");
    MPID_Request_complete(req);
}

/* The request of a torx nonblocking collective: one reference for the
 * user, one for nb_done; it holds the communicator (and so its group)
 * until both are gone. */
static MPIR_Request *nb_request(MPIR_Comm * comm)
{
    MPIR_Request *req = MPIR_Request_create_from_pool(MPIR_REQUEST_KIND__COLL, 0, 2);
    if (req == NULL)
        return NULL;
    MPIR_Comm_add_ref(comm);
    req->comm = comm;
    return req;
}

/* A start that failed: drop nb_done's reference, and return the error. */
static int nb_failed(MPIR_Request * req, torx_status_t st, const char *what)
{
    MPIR_Request_free(req);
    MPIR_Request_free(req);
    return coll_error(st, what);
}

int MPIDI_TORX_ibarrier(MPIR_Comm * comm, MPIR_Request ** req)
{
    torx_coll_group_t *g = comm_group(comm);
    torx_coll_alg_t alg = g ? torx_coll_iselect(g, TORX_COLL_BARRIER, 0, 0, 0)
        : TORX_COLL_ALG_FALLBACK;
    if (alg == TORX_COLL_ALG_FALLBACK) {
        nb_ran(comm, NB_BARRIER);
        return MPIR_Ibarrier_impl(comm, req);
    }
    ran(comm, g, NULL);
    MPIR_Request *r = nb_request(comm);
    if (r == NULL)
        return MPI_ERR_OTHER;
    torx_status_t st = torx_coll_ibarrier(g, alg, nb_done, r);
    if (st != TORX_OK)
        return nb_failed(r, st, "MPI_Ibarrier");
    *req = r;
    return MPI_SUCCESS;
}

int MPIDI_TORX_ibcast(void *buffer, MPI_Aint count, MPI_Datatype datatype, int root,
                      MPIR_Comm * comm, MPIR_Request ** req)
{
    torx_coll_group_t *g = comm_group(comm);
    torx_coll_alg_t alg = TORX_COLL_ALG_FALLBACK;
    size_t bytes = TORX_COLL_NONCONTIG;
    MPI_Aint lb = 0;
    if (g) {
        if (!contig_bytes(count, datatype, &bytes, &lb))
            bytes = TORX_COLL_NONCONTIG;
        alg = torx_coll_iselect(g, TORX_COLL_BCAST, bytes, 0, 0);
    }
    if (alg == TORX_COLL_ALG_FALLBACK) {
        nb_ran(comm, NB_BCAST);
        return MPIR_Ibcast_impl(buffer, count, datatype, root, comm, req);
    }
    ran(comm, g, NULL);
    MPIR_Request *r = nb_request(comm);
    if (r == NULL)
        return MPI_ERR_OTHER;
    torx_status_t st = torx_coll_ibcast(g, alg, (char *) buffer + lb, bytes, root, nb_done, r);
    if (st != TORX_OK)
        return nb_failed(r, st, "MPI_Ibcast");
    *req = r;
    return MPI_SUCCESS;
}

int MPIDI_TORX_iallreduce(const void *sendbuf, void *recvbuf, MPI_Aint count,
                          MPI_Datatype datatype, MPI_Op op, MPIR_Comm * comm, MPIR_Request ** req)
{
    torx_coll_group_t *g = comm_group(comm);
    torx_coll_dtype_t dt;
    torx_coll_op_t top;
    torx_coll_alg_t alg = select_reduction(g, TORX_COLL_ALLREDUCE, count, datatype, op, &dt, &top,
                                           1);
    if (alg == TORX_COLL_ALG_FALLBACK) {
        nb_ran(comm, NB_ALLREDUCE);
        return MPIR_Iallreduce_impl(sendbuf, recvbuf, count, datatype, op, comm, req);
    }
    ran(comm, g, NULL);
    MPIR_Request *r = nb_request(comm);
    if (r == NULL)
        return MPI_ERR_OTHER;
    torx_status_t st = torx_coll_iallreduce(g, alg, sendbuf == MPI_IN_PLACE ? NULL : sendbuf,
                                            recvbuf, (size_t) count, dt, top, nb_done, r);
    if (st != TORX_OK)
        return nb_failed(r, st, "MPI_Iallreduce");
    *req = r;
    return MPI_SUCCESS;
}

int MPIDI_TORX_ireduce(const void *sendbuf, void *recvbuf, MPI_Aint count, MPI_Datatype datatype,
                       MPI_Op op, int root, MPIR_Comm * comm, MPIR_Request ** req)
{
    torx_coll_group_t *g = comm_group(comm);
    torx_coll_dtype_t dt;
    torx_coll_op_t top;
    torx_coll_alg_t alg = select_reduction(g, TORX_COLL_REDUCE, count, datatype, op, &dt, &top, 1);
    if (alg == TORX_COLL_ALG_FALLBACK) {
        nb_ran(comm, NB_REDUCE);
        return MPIR_Ireduce_impl(sendbuf, recvbuf, count, datatype, op, root, comm, req);
    }
    ran(comm, g, NULL);
    MPIR_Request *r = nb_request(comm);
    if (r == NULL)
        return MPI_ERR_OTHER;
    torx_status_t st = torx_coll_ireduce(g, alg, sendbuf == MPI_IN_PLACE ? NULL : sendbuf,
                                         recvbuf, (size_t) count, dt, top, root, nb_done, r);
    if (st != TORX_OK)
        return nb_failed(r, st, "MPI_Ireduce");
    *req = r;
    return MPI_SUCCESS;
}

int MPIDI_TORX_ialltoall(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                         void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype,
                         MPIR_Comm * comm, MPIR_Request ** req)
{
    torx_coll_group_t *g = comm_group(comm);
    torx_coll_alg_t alg = TORX_COLL_ALG_FALLBACK;
    size_t block = TORX_COLL_NONCONTIG;
    MPI_Aint rlb = 0, slb = 0;
    if (g) {
        block = alltoall_block(comm, sendbuf, sendcount, sendtype, recvcount, recvtype, &slb, &rlb);
        alg = torx_coll_iselect(g, TORX_COLL_ALLTOALL, block, 0, 0);
    }
    if (alg == TORX_COLL_ALG_FALLBACK) {
        nb_ran(comm, NB_ALLTOALL);
        return MPIR_Ialltoall_impl(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                   comm, req);
    }
    ran(comm, g, NULL);
    MPIR_Request *r = nb_request(comm);
    if (r == NULL)
        return MPI_ERR_OTHER;
    torx_status_t st = torx_coll_ialltoall(g, alg, (const char *) sendbuf + slb,
                                           (char *) recvbuf + rlb, block, nb_done, r);
    if (st != TORX_OK)
        return nb_failed(r, st, "MPI_Ialltoall");
    *req = r;
    return MPI_SUCCESS;
}

int MPIDI_TORX_ialltoallv(const void *sendbuf, const MPI_Aint * sendcounts,
                          const MPI_Aint * sdispls, MPI_Datatype sendtype, void *recvbuf,
                          const MPI_Aint * recvcounts, const MPI_Aint * rdispls,
                          MPI_Datatype recvtype, MPIR_Comm * comm, MPIR_Request ** req)
{
    torx_coll_group_t *g = comm_group(comm);
    torx_coll_alg_t alg = TORX_COLL_ALG_FALLBACK;
    size_t *v = NULL;
    MPI_Aint slb = 0, rlb = 0;
    if (g)
        alg = torx_coll_iselect(g, TORX_COLL_ALLTOALLV,
                                alltoallv_bytes(comm, sendbuf, sendcounts, sdispls, sendtype,
                                                recvcounts, rdispls, recvtype, &v, &slb, &rlb),
                                0, 0);
    if (alg == TORX_COLL_ALG_FALLBACK) {
        MPL_free(v);
        nb_ran(comm, NB_ALLTOALLV);
        return MPIR_Ialltoallv_impl(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                                    rdispls, recvtype, comm, req);
    }
    ran(comm, g, NULL);
    int n = comm->local_size;
    MPIR_Request *r = nb_request(comm);
    torx_status_t st = r == NULL ? TORX_ERR_NOMEM :
        torx_coll_ialltoallv(g, alg, (const char *) sendbuf + slb, v, v + n,
                             (char *) recvbuf + rlb, v + 2 * n, v + 3 * n, nb_done, r);
    MPL_free(v);                /* the counts were copied */
    if (r == NULL)
        return MPI_ERR_OTHER;
    if (st != TORX_OK)
        return nb_failed(r, st, "MPI_Ialltoallv");
    *req = r;
    return MPI_SUCCESS;
}

int MPIDI_TORX_iallgather(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                          void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype,
                          MPIR_Comm * comm, MPIR_Request ** req)
{
    nb_ran(comm, NB_ALLGATHER);
    return MPIR_Iallgather_impl(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                                req);
}

/* ---- MPIX ----------------------------------------------------------------------- */

int MPIX_Get_last_algorithm_name(MPI_Comm comm, char *name, int len) MPICH_API_PUBLIC;

/* What the last collective on comm ran: "allreduce:cn", "barrier:gi",
 * "bcast:mpich", ... ("none" before the first); truncated to len - 1
 * characters. */
int MPIX_Get_last_algorithm_name(MPI_Comm comm, char *name, int len)
{
    if (comm == MPI_COMM_NULL || HANDLE_GET_MPI_KIND(comm) != MPIR_COMM)
        return MPI_ERR_COMM;
    if (name == NULL || len < 1)
        return MPI_ERR_ARG;
    MPIR_Comm *comm_ptr = NULL;
    MPIR_Comm_get_ptr(comm, comm_ptr);
    if (comm_ptr == NULL)
        return MPI_ERR_COMM;
    const char *s = comm_ptr->dev.ch4.netmod.torx.last_algorithm;
    MPL_strncpy(name, s ? s : "none", len);
    return MPI_SUCCESS;
}
