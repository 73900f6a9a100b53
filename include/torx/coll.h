/* torx collectives (src/coll/): barrier, broadcast, reductions, allgather
 * and alltoall(v) over a group of tasks, on the emulated Blue Gene hardware
 * of the packet layer (global interrupt, collective network, torus with the
 * deposit bit) and the message layer.
 *
 * It is public, not private to the MPICH netmod, so that message-layer
 * programs (GASNet-style runtimes, the unit tests) get the same collectives
 * without MPI. The netmod (src/adi/torx_coll.c) is one such caller: it maps
 * a communicator onto a group and MPI types and ops onto torx's.
 *
 * Model
 *  - One torx_coll_t per message-layer context (torx_coll_init), holding
 *    the algorithm choices from the environment and the counters.
 *  - A group is an ordered set of distinct tasks (an MPI communicator):
 *    torx_coll_group_create. Every member makes the same calls on it, in
 *    the same order, as MPI requires of blocking collectives.
 *  - torx_coll_select says which algorithm a call runs. It depends only on
 *    the group, the call and its size and the environment, so every member
 *    gets the same answer. TORX_COLL_ALG_FALLBACK means "none of torx's
 *    applies": the caller runs its own (for MPI, MPICH's). Otherwise the
 *    caller runs the call with that algorithm.
 *  - Calls block until this task's part is done, advancing the message
 *    layer (or the caller's progress function) while they wait, so that
 *    point-to-point traffic in flight keeps moving.
 *
 * Algorithms and where they apply
 *   gi     barrier on the global interrupt            groups of every task
 *   cn     allreduce, reduce, bcast, allgather on     groups of every task
 *          the collective network (integer ALU; the
 *          two-phase reproducible sum for floating SUM)
 *   torus  allreduce, reduce by direct exchange       groups of at most 8
 *          (up to 16 KiB every member sends its       tasks
 *          vector to every other, longer ones go by
 *          a reduce-scatter and an allgather;
 *          floating sums added in an order fixed by
 *          the values; on one host with cross-memory
 *          attach, outside co mode, on groups of
 *          every task, long vectors' parts are read
 *          in place and summed in group order)
 *   torus  allgather by direct exchange (blocks       any group
 *          read in place where long reductions are,
 *          else sent as the paced alltoall's)
 *   torus  bcast by pipelined deposit-bit line        groups filling a box of
 *          broadcasts (van de Geijn's mesh bcast,     the torus (every task
 *          one route per dimension, each carrying     of a product of
 *          its share of the packets; node-mates       contiguous x, y, z
 *          first in vn mode; in co mode the           ranges and a set of t)
 *          communication thread injects the root's
 *          share of half the routes)
 *   paced  alltoall(v) injected straight into the     any group
 *          message layer in a destination order that
 *          spreads link load, no per-peer requests
 * The collective network and global interrupt span every task of the job
 * (the hardware's class routes); a group of fewer tasks cannot use them.
 *
 * Environment (read by torx_coll_init; a bad value is TORX_ERR_ENV naming
 * the variable):
 *   TORX_COLL=auto|mpich        auto (default): torx's algorithms where they
 *                               apply and pay; mpich: always fall back
 *   TORX_COLL_BARRIER=auto|gi|mpich
 *   TORX_COLL_BCAST=auto|torus|cn|mpich
 *   TORX_COLL_ALLREDUCE=auto|torus|cn|mpich
 *   TORX_COLL_REDUCE=auto|torus|cn|mpich
 *   TORX_COLL_ALLGATHER=auto|cn|torus|mpich
 *   TORX_COLL_ALLTOALL=auto|paced|mpich
 *   TORX_COLL_ALLTOALLV=auto|paced|mpich
 *                               force or forbid one algorithm per call. A
 *                               forced algorithm that cannot apply to a call
 *                               (cn on a subset, a torus reduction past 8
 *                               tasks, a torus bcast on a group that is not a
 *                               box, an unsupported type) falls back, and
 *                               TORX_VERBOSE=1 says so once.
 *   TORX_COLL_CN_MAX            auto's size limit (bytes, default 512) for
 *                               the collective network: an allreduce/reduce
 *                               vector, an allgather's whole result (auto
 *                               never takes it for bcast: force it with
 *                               TORX_COLL_BCAST=cn)
 *   TORX_STATS=1                calls per collective and algorithm, printed
 *                               at torx_coll_finalize
 */
#ifndef TORX_COLL_H
#define TORX_COLL_H

#include <stddef.h>
#include <stdint.h>
#include <torx/msg.h>
#include <torx/status.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct torx_coll torx_coll_t;
typedef struct torx_coll_group torx_coll_group_t;

typedef enum torx_coll_kind {
    TORX_COLL_BARRIER,
    TORX_COLL_BCAST,
    TORX_COLL_ALLREDUCE,
    TORX_COLL_REDUCE,
    TORX_COLL_ALLGATHER,
    TORX_COLL_ALLTOALL,
    TORX_COLL_ALLTOALLV,
    TORX_COLL_NKINDS
} torx_coll_kind_t;

typedef enum torx_coll_alg {
    TORX_COLL_ALG_FALLBACK = 0, /* the caller's own algorithm ("mpich") */
    TORX_COLL_ALG_GI,
    TORX_COLL_ALG_CN,
    TORX_COLL_ALG_TORUS,
    TORX_COLL_ALG_PACED,
    TORX_COLL_NALGS
} torx_coll_alg_t;

/* Element types of reductions (C types and MPI types map onto these). */
typedef enum torx_coll_dtype {
    TORX_COLL_S32,
    TORX_COLL_U32,
    TORX_COLL_S64,
    TORX_COLL_U64,
    TORX_COLL_FLOAT,
    TORX_COLL_DOUBLE,
    TORX_COLL_NDTYPES
} torx_coll_dtype_t;

typedef enum torx_coll_op {
    TORX_COLL_SUM,
    TORX_COLL_MIN,
    TORX_COLL_MAX,
    TORX_COLL_BAND,
    TORX_COLL_BOR,
    TORX_COLL_BXOR,
    TORX_COLL_LAND,
    TORX_COLL_LOR,
    TORX_COLL_NOPS
} torx_coll_op_t;

typedef struct torx_coll_attr {
    int handler; /* message-layer handler id for torx_coll's own messages */
    /* Called while a collective waits, instead of torx_advance(ctx): an
     * MPI layer passes its progress engine. NULL: torx_advance. */
    void (*progress)(void *arg);
    void *progress_arg;
    /* Non-zero: this task's host runs more tasks than it has CPUs for them.
     * The tasks agree at torx_coll_init (any host makes the job
     * oversubscribed), and auto then takes algorithms whose members wait
     * on fewer others in turn (the bcast: "paced"). */
    int oversubscribed;
} torx_coll_attr_t;

/* The handler id torx_coll_init takes when attr is NULL. */
#define TORX_COLL_DEFAULT_HANDLER 62

/* NAME     torx_coll_init - start the collectives on a context
 * DESCRIPTION
 *   Reads the TORX_COLL* environment and registers attr->handler (NULL
 *   attr: TORX_COLL_DEFAULT_HANDLER, torx_advance) with the message layer.
 * RETURN VALUE
 *   TORX_OK; TORX_ERR_ENV for a bad TORX_COLL* value (torx_last_error
 *   names it); TORX_ERR_INVAL for a bad handler id; TORX_ERR_NOMEM.
 * SEE ALSO torx_coll_finalize, torx_coll_group_create
 */
torx_status_t torx_coll_init(torx_ctx_t *ctx, const torx_coll_attr_t *attr, torx_coll_t **out);

/* NAME     torx_coll_finalize - stop the collectives
 * DESCRIPTION
 *   Prints the counters when TORX_STATS=1, then frees c. Groups must have
 *   been freed. NULL is ignored.
 */
void torx_coll_finalize(torx_coll_t *c);

/* NAME     torx_coll_group_create - describe a group of tasks
 * DESCRIPTION
 *   tasks[0..n-1] are the group's tasks (message-layer ranks, distinct) in
 *   group order; me is this task's index. tasks NULL: every task of the
 *   job in rank order (n must be the job's size, me this task's rank).
 *   id names the group in its messages: the same on every member, and
 *   different from every other group whose members may be in a collective
 *   at the same time (an MPI communicator's context id). Works out, once,
 *   what the group can use: every task of the job (collective network,
 *   global interrupt), a box of the torus (the deposit-bit broadcast).
 *   Local: no communication.
 * RETURN VALUE
 *   TORX_OK; TORX_ERR_INVAL (n < 1, me out of range, tasks[me] is not this
 *   task, a task out of range or repeated, tasks NULL for fewer tasks than
 *   the job's); TORX_ERR_NOMEM.
 * NOTES
 *   The job in rank order (tasks NULL, or 0, 1, ..., n-1: an MPI world
 *   and its duplicates) keeps no per-member table: its memory does not
 *   grow with the job. Other groups keep their task list and coordinates
 *   (8 bytes per member). Where members read each other's buffers (a
 *   group of every task, one host, cross-memory attach, not co mode) the
 *   group also keeps 32 bytes per member for their addresses.
 */
torx_status_t torx_coll_group_create(torx_coll_t *c, uint32_t id, int n, const int *tasks, int me,
                                     torx_coll_group_t **out);
void torx_coll_group_free(torx_coll_group_t *g);

/* NAME     torx_coll_select - the algorithm a call runs
 * DESCRIPTION
 *   kind and bytes (the data of the call per task: the buffer of bcast,
 *   the vector of allreduce/reduce, one task's block of allgather and
 *   alltoall, 0 for barrier and alltoallv) and, for reductions, dtype and
 *   op (ignored otherwise; TORX_COLL_NDTYPES / TORX_COLL_NOPS for a type or
 *   op torx does not reduce). Also records the choice: it counts the call
 *   and becomes the group's last algorithm.
 * RETURN VALUE
 *   The algorithm; TORX_COLL_ALG_FALLBACK when the caller must run its own.
 */
/* bytes of a call whose data torx cannot move as plain bytes (a
 * non-contiguous datatype): counted, and always TORX_COLL_ALG_FALLBACK. A
 * reduction torx cannot do passes TORX_COLL_NDTYPES or TORX_COLL_NOPS. */
#define TORX_COLL_NONCONTIG SIZE_MAX

torx_coll_alg_t torx_coll_select(torx_coll_group_t *g, torx_coll_kind_t kind, size_t bytes,
                                 torx_coll_dtype_t dtype, torx_coll_op_t op);

/* Whether the job left kind's algorithm to torx (TORX_COLL and
 * TORX_COLL_<KIND> auto): then a caller that runs its own algorithm for a
 * fallback may also pick which; otherwise the user asked for MPICH's as it
 * stands, or for one of torx's. */
int torx_coll_auto(const torx_coll_group_t *g, torx_coll_kind_t kind);

/* The calls. alg is what torx_coll_select returned (not FALLBACK). They
 * return TORX_OK; TORX_ERR_INVAL when alg does not apply or an argument is
 * bad; TORX_ERR_PROTO when the members disagreed (different ops, sizes or
 * roots; torx_last_error says which); TORX_ERR_PEER and other errors of
 * the layers below. Buffers are contiguous bytes. */
torx_status_t torx_coll_barrier(torx_coll_group_t *g, torx_coll_alg_t alg);
torx_status_t torx_coll_bcast(torx_coll_group_t *g, torx_coll_alg_t alg, void *buf, size_t bytes,
                              int root);
/* in == out, or in == NULL, is in place. */
torx_status_t torx_coll_allreduce(torx_coll_group_t *g, torx_coll_alg_t alg, const void *in,
                                  void *out, size_t count, torx_coll_dtype_t dtype,
                                  torx_coll_op_t op);
/* out is written at root only (others may pass NULL). */
torx_status_t torx_coll_reduce(torx_coll_group_t *g, torx_coll_alg_t alg, const void *in, void *out,
                               size_t count, torx_coll_dtype_t dtype, torx_coll_op_t op, int root);
/* out holds n blocks of bytes, in group order; in == NULL: in place (this
 * task's block is already at out + me * bytes). */
torx_status_t torx_coll_allgather(torx_coll_group_t *g, torx_coll_alg_t alg, const void *in,
                                  void *out, size_t bytes);
/* Block i of in goes to member i; block j of out comes from member j. */
torx_status_t torx_coll_alltoall(torx_coll_group_t *g, torx_coll_alg_t alg, const void *in,
                                 void *out, size_t bytes);
/* Byte counts and displacements per member. */
torx_status_t torx_coll_alltoallv(torx_coll_group_t *g, torx_coll_alg_t alg, const void *in,
                                  const size_t *send_bytes, const size_t *send_displs, void *out,
                                  const size_t *recv_bytes, const size_t *recv_displs);

/* NAME     torx_coll_last_algorithm - what the group's last call ran
 * RETURN VALUE
 *   A static name such as "allreduce:cn", "barrier:gi", "allreduce:torus" or
 *   "bcast:mpich" (fallback); "none" before the first call.
 */
const char *torx_coll_last_algorithm(const torx_coll_group_t *g);

/* Names for messages and counters: "barrier", ...; "mpich", "gi", ... */
const char *torx_coll_kind_name(torx_coll_kind_t kind);
const char *torx_coll_alg_name(torx_coll_alg_t alg);

/* NAME     torx_coll_counters - this task's calls and bytes per collective and algorithm
 * DESCRIPTION
 *   Sets *calls to the calls of kind for which torx_coll_select returned
 *   alg since torx_coll_init (TORX_COLL_ALG_FALLBACK: the caller's own
 *   algorithm ran), and *bytes to the sum of their bytes as torx_coll_select
 *   takes them (a non-contiguous call adds none). Either pointer may be
 *   NULL; c NULL gives zeros, so that a caller can ask which pairs exist
 *   before it has a torx_coll_t. These are the counts TORX_STATS=1 prints;
 *   the MPICH netmod publishes them as MPI_T performance variables
 *   (docs/collectives.md#counters).
 * RETURN VALUE
 *   1 when alg is one of kind's algorithms (fallback included), else 0 and
 *   zeros.
 */
int torx_coll_counters(const torx_coll_t *c, torx_coll_kind_t kind, torx_coll_alg_t alg,
                       uint64_t *calls, uint64_t *bytes);

/* ---- Nonblocking collectives ---------------------------------------------------
 *
 * The barrier on the global interrupt, allreduce, reduce and bcast on the
 * collective network, and the paced alltoall(v), started now and completed
 * later. MPI orders one
 * communicator's collectives the same way on every member but not those
 * of different communicators, so a group runs its nonblocking collectives
 * on a hardware channel of its own (torx_coll_group_channel), and they
 * run one after another in the order they were started. A group without
 * a channel has none of torx's: torx_coll_iselect says FALLBACK.
 *
 * Progress: started collectives move in torx_coll_progress, which every
 * torx_advance of the context runs while any are in flight; done(arg,
 * status) runs there when one ends, with TORX_OK or its error (as the
 * blocking call's). Buffers must stay untouched until then.
 */
typedef void (*torx_coll_done_fn)(void *arg, torx_status_t status);

/* NAME     torx_coll_group_channel - give a group a hardware channel
 * DESCRIPTION
 *   channel 1..TORX_CN_CHANNELS-1 (<torx/packet.h>; 0: none) for g's
 *   nonblocking collectives. The caller guarantees that no other group
 *   uses the channel while g lives, on any task, and gives g the same
 *   channel on every member (the MPI netmod derives it from the
 *   communicator's context id: docs/collectives.md#nonblocking).
 * RETURN VALUE
 *   TORX_OK; TORX_ERR_INVAL for a channel out of range, or while g has
 *   nonblocking collectives in flight.
 */
torx_status_t torx_coll_group_channel(torx_coll_group_t *g, unsigned channel);

/* NAME     torx_coll_iselect - the algorithm a nonblocking call runs
 * DESCRIPTION
 *   As torx_coll_select, for the nonblocking calls: TORX_COLL_ALG_GI for a
 *   barrier and TORX_COLL_ALG_CN for bcast, allreduce and reduce where the
 *   group has a channel and spans every task (TORX_COLL and
 *   TORX_COLL_<KIND> apply; auto takes the collective network up to
 *   TORX_COLL_CN_MAX); TORX_COLL_ALG_PACED for alltoall(v) where the group
 *   has a channel; else TORX_COLL_ALG_FALLBACK. Counts the call (torx_coll_icounters) and
 *   makes it the group's last algorithm ("iallreduce:cn").
 */
torx_coll_alg_t torx_coll_iselect(torx_coll_group_t *g, torx_coll_kind_t kind, size_t bytes,
                                  torx_coll_dtype_t dtype, torx_coll_op_t op);

/* The calls, with alg from torx_coll_iselect (not FALLBACK): arguments as
 * the blocking calls'. They return TORX_OK once started (done may run
 * before they return, when the first step already ends the collective);
 * TORX_ERR_INVAL when alg does not apply or an argument is bad;
 * TORX_ERR_NOMEM. A group is freed only when none of its nonblocking
 * collectives is in flight. */
torx_status_t torx_coll_ibarrier(torx_coll_group_t *g, torx_coll_alg_t alg, torx_coll_done_fn done,
                                 void *arg);
torx_status_t torx_coll_ibcast(torx_coll_group_t *g, torx_coll_alg_t alg, void *buf, size_t bytes,
                               int root, torx_coll_done_fn done, void *arg);
torx_status_t torx_coll_iallreduce(torx_coll_group_t *g, torx_coll_alg_t alg, const void *in,
                                   void *out, size_t count, torx_coll_dtype_t dtype,
                                   torx_coll_op_t op, torx_coll_done_fn done, void *arg);
torx_status_t torx_coll_ireduce(torx_coll_group_t *g, torx_coll_alg_t alg, const void *in,
                                void *out, size_t count, torx_coll_dtype_t dtype, torx_coll_op_t op,
                                int root, torx_coll_done_fn done, void *arg);
/* The count and displacement arrays are copied: only in and out must stay
 * untouched until done. */
torx_status_t torx_coll_ialltoall(torx_coll_group_t *g, torx_coll_alg_t alg, const void *in,
                                  void *out, size_t bytes, torx_coll_done_fn done, void *arg);
torx_status_t torx_coll_ialltoallv(torx_coll_group_t *g, torx_coll_alg_t alg, const void *in,
                                   const size_t *send_bytes, const size_t *send_displs, void *out,
                                   const size_t *recv_bytes, const size_t *recv_displs,
                                   torx_coll_done_fn done, void *arg);

/* NAME     torx_coll_progress - move the nonblocking collectives on
 * DESCRIPTION
 *   Moves every channel's oldest started collective as far as it goes
 *   without waiting, and the next when one ends, running done callbacks.
 *   torx_advance calls it while any are in flight; call it directly only
 *   where the context is not advanced. Not from a done callback.
 * RETURN VALUE
 *   Rounds read and collectives ended (0: nothing moved).
 */
int torx_coll_progress(torx_coll_t *c);

/* As torx_coll_counters, for the nonblocking calls as torx_coll_iselect
 * chose: 1 for the pairs that exist (each kind's FALLBACK, ibarrier/gi,
 * ibcast, iallreduce and ireduce on cn). */
int torx_coll_icounters(const torx_coll_t *c, torx_coll_kind_t kind, torx_coll_alg_t alg,
                        uint64_t *calls, uint64_t *bytes);

#ifdef __cplusplus
}
#endif

#endif /* TORX_COLL_H */
