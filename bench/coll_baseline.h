/* coll_baseline: MPICH 4.0.2's default collective algorithms, re-expressed
 * over torx's message layer (<torx/msg.h>), for benchmarks that cannot run
 * MPICH (message-layer programs under torx-sim). Not torx's collectives
 * (src/coll/): the baseline the original compared them against
 * (docs/collectives.md#mpichs-algorithms-as-a-baseline).
 *
 * Each algorithm is MPICH's, written afresh against a small tagged
 * point-to-point layer on torx_send: a blocking MPI send is a torx_send
 * whose done callback has run, a receive matches (group, call, step,
 * source) in posting order, and a message that arrives before its receive
 * is posted waits as MPICH's unexpected messages do (eager data in a
 * temporary buffer and copied once matched, rendezvous data deferred at
 * the sender: torx_recv_t.defer). Every message uses TORX_PROTO_AUTO, as
 * torx's MPICH netmod does.
 *
 * The "auto" choices follow MPICH 4.0.2's selection for blocking
 * intracommunicator collectives (maint/tuning/coll/mpir/generic.json):
 *   bcast      fewer than 8 tasks: binomial; else up to 12288 bytes
 *              binomial, then on a power-of-two group up to 524288 bytes
 *              scatter + recursive-doubling allgather, else scatter + ring
 *              allgather (the MPIR_CVAR_BCAST_SHORT_MSG_SIZE,
 *              _LONG_MSG_SIZE and _MIN_PROCS defaults)
 *   allreduce  up to 8 bytes, or fewer elements than the largest power of
 *              two not above the group size: recursive doubling; else
 *              Rabenseifner's reduce-scatter + allgather. Both fold a
 *              group that is not a power of two by pairing its first
 *              2 * (n - pof2) tasks first.
 *   alltoall   up to 256 bytes a block on 8 tasks or more: Bruck; up to
 *              32768: the scattered isend/irecv algorithm (at most 32
 *              pairs in flight, MPIR_CVAR_ALLTOALL_THROTTLE); else
 *              pairwise exchange
 *   barrier    dissemination
 * MPICH's nonblocking schedules (mpir_coll_sched_auto.c) read the same
 * sizes from the CVARs with a strict "<" and a 2048-byte allreduce switch;
 * the blocking calls above do not.
 *
 * Groups are lists of message-layer ranks (an MPI communicator): the job,
 * a split of it, a group per core. Every member makes the same calls in
 * the same order. One cb_ctx per task; a call blocks, advancing the
 * message layer, until this task's part is done. Local work (copies,
 * reductions) is not charged to the simulated core (docs/sim.md#limits);
 * the message layer's own copies are. */
#ifndef TORX_BENCH_COLL_BASELINE_H
#define TORX_BENCH_COLL_BASELINE_H

#include <torx/coll.h>
#include <torx/msg.h>

#include <stddef.h>
#include <stdint.h>

typedef struct cb_ctx cb_ctx;
typedef struct cb_group cb_group;

typedef enum cb_bcast_alg {
    CB_BCAST_AUTO,
    CB_BCAST_BINOMIAL,
    CB_BCAST_SCATTER_RDB, /* scatter + recursive-doubling allgather */
    CB_BCAST_SCATTER_RING /* scatter + ring allgather */
} cb_bcast_alg;

typedef enum cb_allreduce_alg {
    CB_ALLREDUCE_AUTO,
    CB_ALLREDUCE_RD,  /* recursive doubling */
    CB_ALLREDUCE_RSAG /* Rabenseifner: reduce-scatter + allgather */
} cb_allreduce_alg;

typedef enum cb_alltoall_alg {
    CB_ALLTOALL_AUTO,
    CB_ALLTOALL_BRUCK,
    CB_ALLTOALL_SCATTERED,
    CB_ALLTOALL_PAIRWISE
} cb_alltoall_alg;

typedef enum cb_barrier_alg { CB_BARRIER_AUTO, CB_BARRIER_DISSEMINATION } cb_barrier_alg;

/* Starts the baseline on ctx with message-layer handler id handler (one
 * that nothing else registers). NULL when out of memory or the handler id
 * is bad (cb_last_error says). */
cb_ctx *cb_init(torx_ctx_t *ctx, int handler);
void cb_finalize(cb_ctx *c);

/* A group of n tasks (tasks NULL: the job in rank order), me this task's
 * index, id the same on every member and distinct among groups in use at
 * once. NULL after a message in cb_last_error for a bad argument. */
cb_group *cb_group_create(cb_ctx *c, uint32_t id, int n, const int *tasks, int me);
void cb_group_free(cb_group *g);
int cb_group_size(const cb_group *g);
int cb_group_rank(const cb_group *g);

/* What auto runs for a call of this size on g (MPICH's choice above). */
cb_bcast_alg cb_bcast_choose(const cb_group *g, size_t bytes);
cb_allreduce_alg cb_allreduce_choose(const cb_group *g, size_t count, torx_coll_dtype_t dtype);
cb_alltoall_alg cb_alltoall_choose(const cb_group *g, size_t bytes);

/* Printable names ("binomial", "scatter_rdb", "scatter_ring", "rd", "rsag",
 * "bruck", "scattered", "pairwise", "dissemination", "auto"), and the
 * reverse (-1 for an unknown name). */
const char *cb_bcast_name(cb_bcast_alg a);
const char *cb_allreduce_name(cb_allreduce_alg a);
const char *cb_alltoall_name(cb_alltoall_alg a);
const char *cb_barrier_name(cb_barrier_alg a);
int cb_bcast_parse(const char *s);
int cb_allreduce_parse(const char *s);
int cb_alltoall_parse(const char *s);
int cb_barrier_parse(const char *s);

/* The calls. TORX_OK; TORX_ERR_INVAL for a bad argument or an algorithm
 * that does not apply (scatter_rdb on a group that is not a power of two,
 * rsag on fewer elements than that power of two: MPICH's auto never takes
 * them there); TORX_ERR_TRUNCATE when members disagreed on a size; errors
 * of the message layer. cb_last_error says what. */
torx_status_t cb_barrier(cb_group *g, cb_barrier_alg alg);
torx_status_t cb_bcast(cb_group *g, void *buf, size_t bytes, int root, cb_bcast_alg alg);
/* in NULL or == out: in place. Integer types with every op; float and
 * double with SUM, MIN and MAX. */
torx_status_t cb_allreduce(cb_group *g, const void *in, void *out, size_t count,
                           torx_coll_dtype_t dtype, torx_coll_op_t op, cb_allreduce_alg alg);
/* Block i of in (bytes each) goes to member i; block j of out comes from
 * member j. in and out must not overlap. */
torx_status_t cb_alltoall(cb_group *g, const void *in, void *out, size_t bytes,
                          cb_alltoall_alg alg);

/* out[i] = in[i] op out[i] for i < count: the reduction every algorithm
 * applies, for callers that compute a reference. TORX_ERR_INVAL for a
 * type and op it does not do. */
torx_status_t cb_reduce_local(const void *in, void *out, size_t count, torx_coll_dtype_t dtype,
                              torx_coll_op_t op);
size_t cb_dtype_size(torx_coll_dtype_t dtype);

/* What the last failed call of this task was about. */
const char *cb_last_error(void);

#endif /* TORX_BENCH_COLL_BASELINE_H */
