/* torx collectives: what the files of src/coll/ share.
 *
 *   coll.c          init, environment, groups, selection, names, counters
 *   coll_cn.c       global-interrupt barrier; collective-network allreduce,
 *                   reduce, bcast, allgather
 *   coll_torus.c    deposit-bit mesh broadcast (rectangles of the torus)
 *   coll_routes.c   its edge-disjoint routes (a pure plan)
 *   coll_alltoall.c paced alltoall(v) over the message layer
 *   coll_exchange.c allreduce/reduce of short vectors by direct exchange
 *   coll_cost.c     each algorithm's time on the device's network (selection
 *                   on a torus)
 *   coll_nb.c       nonblocking barrier, allreduce, reduce and bcast on the
 *                   global interrupt and collective network, on a channel
 *                   of the group's own
 */
#ifndef TORX_COLL_INTERNAL_H
#define TORX_COLL_INTERNAL_H

#include <torx/coll.h>
#include <torx/msg.h>

#include "packet/pkt_internal.h" /* torxp_error: the library's one error record */

#include <stdalign.h>
#include <stdint.h>

/* Pure spins before a waiting collective starts yielding the CPU: a round
 * between tasks on cores of their own completes well within them; tasks
 * outnumbering cores hand the core over within microseconds. */
#define TORXC_SPINS 512

/* Direct exchange (coll_exchange.c): at most this many members; vectors
 * up to TORXC_EXCHANGE_MAX_BYTES go whole to every member, longer ones by
 * a reduce-scatter and an allgather. Auto takes the latter from
 * TORXC_SPLIT_AUTO_BYTES on groups of up to TORXC_SPLIT_AUTO_TASKS: at 2
 * tasks one per core it beat MPICH's algorithm over torx by 1.3x at 1-4
 * MiB; at 4 and 8 tasks on 2 cores it was 5-10x slower on double sums
 * (the reproducible combine sorts n terms per element) and level on
 * integers, and larger groups on cores of their own were not measured
 * (docs/collectives.md). */
#define TORXC_EXCHANGE_MAX_TASKS 8
#define TORXC_EXCHANGE_MAX_BYTES 16384
#define TORXC_SPLIT_AUTO_BYTES (512u * 1024u)
#define TORXC_SPLIT_AUTO_TASKS 2
/* Where the members read the parts in place instead (torxc_direct_applies:
 * one host, cross-memory attach, not co mode), auto takes that for groups
 * of more than 2 tasks from this size: at 4 and 8 tasks on 2 cores it
 * matched MPICH's algorithm over torx from 128 KiB and beat it by 1.2-2x
 * from 512 KiB (docs/collectives.md). Two tasks read at every size past
 * the exchange's (coll.c). */
#define TORXC_DIRECT_AUTO_BYTES (128u * 1024u)
/* Two members read each other's whole vector (direct_reduce2) above this
 * size, where the exchange sends it: 12 / 16 KiB 2.5-2.8 / 2.9-3.0 us
 * against 3.2-3.5 / 4.2-4.7, level at 8 KiB. */
#define TORXC_DIRECT2_MIN_BYTES 8192u
/* ... up to this size; past it each reads half of the other's and writes
 * its combined half into the other's result (direct_reduce), which moves
 * and folds half as much for one system call more. Doubles back to back,
 * 2 tasks one per core, 3 interleaved runs, whole / halves, us: allreduce
 * 64 KiB 9.3-11.1 / 9.7-12.0, 128 KiB 17.8-22.6 / 15.5-19.5, 1 MiB
 * 173-182 / 133-145; reduce 1 MiB 174-193 / 125-138
 * (docs/collectives.md#long-vectors). */
#define TORXC_DIRECT2_WHOLE_MAX_BYTES (64u * 1024u)
/* An allgather's blocks read in place, from this size of a block. */
#define TORXC_DIRECT_ALLGATHER_AUTO_BYTES (32u * 1024u)

/* The folds of long vectors (coll_exchange.c) are also built for AVX2 and
 * picked by the CPU at load time (function multi-versioning; an ifunc).
 * The baseline x86-64 build's SSE2 code took 2-4x as long: a 2-term double
 * sum of 16 KiB 0.9 against 0.23 us, of 128 KiB 11.6 against 5.5 us,
 * which at 128 KiB made the fold, not the reads, a 2-task reduce's cost
 * (docs/collectives.md#long-vectors). */
#if defined(__SANITIZE_THREAD__)
#define TORXC_NO_CLONES 1 /* TSan instruments the resolver, which runs before its runtime */
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TORXC_NO_CLONES 1
#endif
#endif
#if defined(__x86_64__) && defined(__has_attribute) && !defined(TORXC_NO_CLONES)
#if __has_attribute(target_clones)
#define TORXC_VECTOR_KERNEL __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef TORXC_VECTOR_KERNEL
#define TORXC_VECTOR_KERNEL
#endif

/* Floating sums on the collective network of up to this many elements
 * first try one pass on a guess of their exponents (coll_cn.c), which
 * takes fewer rounds than the two-pass sum: every vector auto sends there
 * (TORXC_CN_MAX_DEFAULT, 512 bytes, is 128 floats). */
#define TORXC_FP_GUESS_MAX 128

/* Per collective: the choice in force (TORX_COLL and TORX_COLL_<KIND>). */
typedef enum torxc_choice {
    TORXC_AUTO = -1, /* torx picks */
    /* otherwise a torx_coll_alg_t: forced (FALLBACK: forbidden) */
} torxc_choice_t;

/* One paced exchange in progress (coll_alltoall.c): the blocking
 * collective's, or a nonblocking alltoall(v)'s. Its blocks are known by
 * the group and the group's sequence number of the exchange. */
typedef struct torxc_a2a_run {
    struct torxc_a2a_run *next; /* the task's running exchanges */
    torx_coll_t *c;
    torx_coll_group_t *g;
    uint32_t group_id, seq;
    int n;
    /* receiving: where each member's block goes; NULL in a broadcast,
     * whose one block (root's, root_bytes at out) needs no table */
    char *out;
    const size_t *rbytes, *rdispl;
    int root;
    size_t root_bytes;
    int received;  /* blocks in place, this task's own included */
    int expect;    /* blocks to place */
    int receiving; /* blocks whose data are still on their way in */
    int in_flight; /* sends not yet done */
    torx_status_t status;
    /* sending (an exchange's step) */
    torx_coll_kind_t kind;
    const char *in;
    const size_t *sbytes, *sdispl;
    int sparse; /* only the blocks of non-zero length move (the broadcast) */
    int spread; /* a torus: each member in its own order, blocks routed adaptively */
    size_t eager_upto;
    int started;       /* steps started */
    torx_status_t err; /* a send that could not start */
    torx_msg_t *msgs;  /* the send window (TORXC_A2A_WINDOW) */
    int *perm;         /* the step order (alltoall(v)) */
    int linked;        /* on the running list */
    int orphan;        /* discarded while the message layer holds it: freed by its last callback */
} torxc_a2a_run_t;

/* The paced exchanges this task runs (at most one blocking, and one per
 * channel of nonblocking ones), and the blocks that came before their
 * exchange (coll_alltoall.c). */
typedef struct torxc_a2a {
    torxc_a2a_run_t blocking;
    torxc_a2a_run_t *runs;
    struct torxc_unexp *unexp;
    struct torxc_unexp *unexp_free; /* records kept for reuse (coll_alltoall.c) */
    int unexp_nfree;
    int lost; /* early blocks dropped for want of memory */
} torxc_a2a_t;

/* The torus broadcast's box (coll_routes.c): its dimensions longer than
 * one node, each a whole ring (with its wraparound link) or a run. A
 * node's position along a dimension counts from the run's first node (a
 * ring's from any fixed one). */
typedef struct torxc_box {
    int dims;        /* 0..3 */
    unsigned len[3]; /* nodes along each, 2..255 */
    int ring[3];     /* 1: a whole ring; 0: a run */
} torxc_box_t;

/* A line of a route's plan: from a node along box dimension dim, way dir
 * (+1, -1), depositing on the hops nodes after it. */
typedef struct torxc_bline {
    int8_t dim, dir;
    unsigned hops;
} torxc_bline_t;

/* What one node does with one route's packets. */
#define TORXC_ROUTE_LINES 6
typedef struct torxc_route_node {
    int nlines;
    torxc_bline_t line[TORXC_ROUTE_LINES]; /* it sends each packet on these */
    /* the line that brings it (hops 0 at the root): sent by the node hops
     * back along dim against dir */
    torxc_bline_t from;
} torxc_route_node_t;

/* The number of edge-disjoint routes of a box: 2 x dims when every
 * dimension is a ring, dims otherwise, 1 for a single node. */
int torxc_routes(const torxc_box_t *box);
/* Route route's plan at the node at position me, the root at root
 * (positions along box dimensions 0..dims-1). */
void torxc_route_plan(const torxc_box_t *box, const unsigned root[3], const unsigned me[3],
                      int route, torxc_route_node_t *out);
/* The lines the node at me sends a packet on, summed over the routes. */
int torxc_route_lines(const torxc_box_t *box, const unsigned root[3], const unsigned me[3]);
/* The most lines a member other than the root sends a packet on, averaged
 * over the routes (whose parts are equal): the forwarding work of the
 * busiest member per packet it receives (the cost estimate's). Read off
 * the plans of the nodes whose offsets from the root take every value a
 * plan tells apart. */
double torxc_route_forwards(const torxc_box_t *box, const unsigned root[3]);

/* The torus broadcast this task is in (coll_torus.c). */
#define TORXC_BC_ROUTES 6 /* 2 x three rings; three runs' routes split in two in co mode */
typedef struct torxc_bcast {
    int active;
    uint32_t group_id, seq;
    unsigned char *buf;
    size_t bytes;
    int nparts; /* the message's parts, one per route (two in co mode if odd) */
    size_t lo[TORXC_BC_ROUTES], hi[TORXC_BC_ROUTES]; /* part k: packets [lo, hi) */
    size_t got[TORXC_BC_ROUTES];                     /* packets of part k in place here */
    size_t received, expect;                         /* packets in place here, and to come */
    torx_status_t status;                            /* a bad packet */
} torxc_bcast_t;

/* A nonblocking collective in its channel's queue (coll_nb.c). */
typedef struct torxc_nb torxc_nb_t;

struct torx_coll {
    torx_ctx_t *ctx;
    torx_pkt_dev_t *dev;
    int handler;
    void (*progress)(void *arg);
    void *progress_arg;
    int choice[TORX_COLL_NKINDS]; /* TORXC_AUTO or a torx_coll_alg_t */
    size_t cn_max;                /* TORX_COLL_CN_MAX */
    size_t cn_fpsum_max;          /* auto's limit for a floating-point SUM on it */
    int cn_max_set;               /* TORX_COLL_CN_MAX was set: the network's limit is the user's */
    int verbose;                  /* TORX_VERBOSE */
    int stats;                    /* TORX_STATS */
    int job_size, job_rank;
    int warned[TORX_COLL_NKINDS]; /* a forced algorithm fell back: said once */
    uint64_t calls[TORX_COLL_NKINDS][TORX_COLL_NALGS];
    uint64_t bytes[TORX_COLL_NKINDS][TORX_COLL_NALGS]; /* as torx_coll_select takes them */
    /* nonblocking: as torx_coll_iselect chose, and the queues of started
     * ones per channel (channel 0 unused: the blocking collectives') */
    uint64_t nb_calls[TORX_COLL_NKINDS][TORX_COLL_NALGS];
    uint64_t nb_bytes[TORX_COLL_NKINDS][TORX_COLL_NALGS];
    torxc_nb_t *nb_head[TORX_CN_CHANNELS], *nb_tail[TORX_CN_CHANNELS];
    int nb_total;
    /* co mode: the communication thread runs the rounds of nonblocking
     * barriers and collective-network collectives (torx_copoll): handed
     * over through co_inbox (the task pushes, the thread takes all), then
     * in the thread's own queues per channel; co_done counts the ones it
     * finished (TORX_STATS, and the tests' proof that it ran them) */
    int co_tried, co_drive;
    torxc_nb_t *co_inbox;
    alignas(64) torxc_nb_t *co_head[TORX_CN_CHANNELS], *co_tail[TORX_CN_CHANNELS];
    uint64_t co_done;
    alignas(64) int ngroups; /* the thread's fields above keep their line */
    torxc_a2a_t a2a;
    torxc_bcast_t bc;
    struct torxc_bc_early *bc_early, **bc_early_tail; /* packets before their bcast */
    struct torxc_bc_ready *bc_ready;                  /* members in a large bcast, at its root */
    int bc_lost; /* bcast packets dropped (no memory, malformed) */
    /* line sends of torus bcasts by this task and by its communication
     * thread (co mode): TORX_STATS, and the tests' proof that the thread
     * did its part */
    uint64_t bc_sent_task, bc_sent_thread;
    /* the last torus bcast, on the device's clock: when this task placed
     * its first packet, and (its root) when the last packet was injected
     * (the tests' proof of the pipeline) */
    double bc_first_s, bc_root_out_s;
    /* pieces this task staged as the root of paced bcasts (the tests'
     * proof that the multi-reader area carried them) */
    uint64_t bc_staged_pieces;
    int oversubscribed; /* some host runs more tasks than CPUs (agreed at init) */
    torx_net_t net;     /* the device's network and its costs (torx_pkt_network) */
    /* sizes (bit: floor(log2(bytes)) + 1) whose choice TORX_VERBOSE explained */
    uint64_t explained[TORX_COLL_NKINDS];
    int direct_reads; /* members may read each other's buffers (torxc_direct_init) */
    /* Per element, the exponents the last floating sum on the collective
     * network found (the same on every task: a MAX round's result; zero
     * before the first and after a disagreement, which no sum matches),
     * the guess of the next one (coll_cn.c); and how often a guess held or
     * missed (TORX_STATS, and the tests' proof of both paths). */
    int64_t fp_guess[TORXC_FP_GUESS_MAX];
    uint64_t fp_guess_held, fp_guess_missed;
    /* long torus reductions and torus allgathers: by direct reads, by
     * parts sent (TORX_STATS, and the tests' proof of each path) */
    uint64_t direct_calls, sent_calls;
};

/* What a member publishes before a collective that reads the others'
 * buffers in place (coll_exchange.c): where its data starts, where its
 * result goes (a reduction; 0: it has none), and the call, which must be
 * the same on every member (count; kind: root + 1, type and op). 32 bytes:
 * 8 members in one round of the collective network; in: 0 when the member
 * ran out of memory. */
typedef struct torxc_direct_addr {
    uint64_t in, out, count, kind;
} torxc_direct_addr_t;

/* Where a group's tasks lie on the network, for the cost estimates
 * (torxc_cost_group_init). */
typedef struct torxc_geometry {
    unsigned extent[3];    /* distinct coordinates the members use along x, y, z */
    int wrap[3];           /* the members fill a whole ring of the dimension */
    unsigned nodes;        /* nodes the members occupy (at most n) */
    double tasks_per_node; /* n / nodes */
    double mean_hops;      /* mean hops between two members */
    unsigned depth;        /* hops from a corner of the members' box to the farthest */
    double shift_hot_hops; /* expected longest per-dimension distance of a shift */
    /* MPICH's recursive doubling and halving, step k (member i with
     * i ^ 2^k): the pair's hops, and the longest of its per-dimension
     * distances, which is how many of the step's flows share a link */
    unsigned xor_steps;
    unsigned char xor_hops[31], xor_load[31];
    /* the torus bcast's busiest member's lines a packet
     * (torxc_torus_forwards), read off the routes at the first estimate;
     * negative until then */
    double bcast_forwards;
} torxc_geometry_t;

struct torx_coll_group {
    torx_coll_t *c;
    uint32_t id; /* the caller's: the same on every member */
    int n, me;
    /* group index -> message-layer rank (torxc_task); NULL when the group
     * is the job in rank order (the world and its duplicates): no table.
     * Else the table's, which the groups of one process that hold the same
     * tasks at the same coordinates share (coll.c,
     * docs/collectives.md#memory) */
    const int *tasks;
    struct torxc_group_table *table;
    int all_tasks; /* spans every task of the job: collective network, GI */
    const char *last;
    /* auto's last pick per collective (pick): the same call again, as a
     * program's loop makes it, skips the rules (set: 0 until the first) */
    struct torxc_picked {
        size_t bytes;
        int dtype, op, alg, set;
    } picked[TORX_COLL_NKINDS];
    uint32_t a2a_seq;     /* alltoalls run on this group */
    torx_msg_t *a2a_msgs; /* the send window, made at the first */
    int *a2a_perm;
    struct torxc_piece_desc *a2a_descs; /* descriptors the window's sends carry */
    size_t *a2a_v;                      /* alltoall's counts and displacements */
    unsigned char *xchg;                /* direct exchange: the members' vectors */
    unsigned char *split; /* scratch (group_scratch): the split exchange's parts, direct
                           * reads' chunks, the allgather's counts */
    size_t split_cap;
    /* one per member, made with the group where members read each other's
     * buffers (torxc_direct_applies), else NULL */
    torxc_direct_addr_t *direct_addr;
    /* torus bcast (coll_torus.c): whether the group fills a box of the
     * torus, its dimensions longer than one node (their torus dimensions,
     * first coordinates and this task's positions), and this task's lines
     * along each, each way (+, -): to the box's end, and one hop
     * (box_line_ok: the line exists) */
    int box;
    int box_dims;
    uint8_t box_dim[3];
    uint8_t box_lo[3];
    unsigned box_pos[3];
    torxc_box_t box_geo;
    torx_line_t box_line[3][2][2];
    uint8_t box_line_ok[3][2][2];
    unsigned box_end_hops[3][2];
    /* group index -> torus coordinate: the rank map's own table when the
     * group is the job in rank order, else the shared group table's */
    const torx_coord_t *coord;
    uint32_t bc_seq;      /* torus bcasts run on this group */
    torxc_geometry_t geo; /* what the cost estimates need (coll_cost.c) */
    unsigned channel;     /* its nonblocking collectives' (coll_nb.c); 0: none */
    int nb_queued;        /* of those, started and not done */
};

/* The message-layer rank of member i of g. */
/* The members' coordinates of a group with a task list (coll.c's shared
 * table), or NULL. */
const torx_coord_t *torxc_group_coord(const torx_coll_group_t *g);
static inline int torxc_task(const torx_coll_group_t *g, int i)
{
    return g->tasks ? g->tasks[i] : i;
}

/* Device polls between two calls of the progress function while a
 * collective waits on the global interrupt or collective network: an MPI
 * progress engine call costs more than a round between two cores, so
 * calling it on every poll slowed an 8-byte allreduce by half. */
#define TORXC_POLLS_PER_PROGRESS 16

/* Waits for one step: the caller's progress (or torx_advance), then,
 * after TORXC_SPINS calls, a yield (torxp_yield) every 8th. */
static inline void torxc_progress(torx_coll_t *c, unsigned *spins)
{
    if (c->progress)
        c->progress(c->progress_arg);
    else
        torx_advance(c->ctx);
    if (++*spins >= TORXC_SPINS && (*spins & 7) == 0)
        torxp_yield(c->dev);
}

/* As torxc_progress, for a loop that waits only on the message layer: its
 * own sends and the blocks that come to it, never on a packet it injects
 * itself or a device round. Where waits are exact (sim, co mode), an
 * advance that found nothing sleeps until the next could find something
 * (torx_idle) instead of polling. */
static inline void torxc_progress_msgs(torx_coll_t *c, unsigned *spins)
{
    if (c->progress)
        c->progress(c->progress_arg);
    else if (torx_advance(c->ctx) == 0)
        torx_idle(c->ctx);
    if (++*spins >= TORXC_SPINS && (*spins & 7) == 0)
        torxp_yield(c->dev);
}

/* Waits for one step of a device round (a global-interrupt or collective-
 * network poll): progress on every TORXC_POLLS_PER_PROGRESS-th call only. */
static inline void torxc_poll_wait(torx_coll_t *c, unsigned *polls, unsigned *spins)
{
    if (++*polls % TORXC_POLLS_PER_PROGRESS == 0)
        torxc_progress(c, spins);
}

/* Whether op on dtype is a floating-point sum (the reproducible sum). */
static inline int torxc_is_fpsum(torx_coll_dtype_t dtype, torx_coll_op_t op)
{
    return (dtype == TORX_COLL_FLOAT || dtype == TORX_COLL_DOUBLE) && op == TORX_COLL_SUM;
}

/* Whether the collective network's ALU can reduce dtype with op. */
int torxc_cn_reduces(torx_coll_dtype_t dtype, torx_coll_op_t op);
size_t torxc_dtype_size(torx_coll_dtype_t dtype);

/* coll_cn.c: the algorithms on the global interrupt and collective network */
torx_status_t torxc_gi_barrier(torx_coll_group_t *g);
torx_status_t torxc_cn_reduce(torx_coll_group_t *g, const void *in, void *out, size_t count,
                              torx_coll_dtype_t dtype, torx_coll_op_t op);
torx_status_t torxc_cn_bcast(torx_coll_group_t *g, void *buf, size_t bytes, int root);
torx_status_t torxc_cn_allgather(torx_coll_group_t *g, const void *in, void *out, size_t bytes);

/* coll_cn.c: a collective-network collective a step at a time, on channel
 * ch (coll_nb.c); torxc_cn_op_step: TORX_AGAIN, or how it ended (*moved:
 * a round was read). Free the op with free(). */
typedef struct torxc_cn_op torxc_cn_op_t;
torx_status_t torxc_cn_ireduce(torx_coll_group_t *g, unsigned ch, const void *in, void *out,
                               size_t count, torx_coll_dtype_t dtype, torx_coll_op_t op,
                               torxc_cn_op_t **out_op);
torx_status_t torxc_cn_ibcast(torx_coll_group_t *g, unsigned ch, void *buf, size_t bytes, int root,
                              torxc_cn_op_t **out_op);
torx_status_t torxc_cn_op_step(torx_coll_t *c, torxc_cn_op_t *op, int *moved);

/* coll_nb.c: the name of a nonblocking collective's algorithm
 * ("iallreduce:cn"); what torx_coll_finalize runs for those never done */
const char *torxc_nb_name(torx_coll_kind_t kind, torx_coll_alg_t alg);
void torxc_nb_finalize(torx_coll_t *c);
void torxc_nb_group_free(torx_coll_group_t *g); /* drops its queued ones, saying so */

/* The end of torx_coll_select and torx_coll_iselect: counts the call of
 * kind with alg (and its bytes, unless non-contiguous) in the tables
 * given, and makes name the group's last algorithm. */
static inline torx_coll_alg_t torxc_counted(torx_coll_group_t *g, uint64_t calls[][TORX_COLL_NALGS],
                                            uint64_t bytes_by[][TORX_COLL_NALGS],
                                            torx_coll_kind_t kind, torx_coll_alg_t alg,
                                            size_t bytes, const char *name)
{
    calls[kind][alg]++;
    if (bytes != TORX_COLL_NONCONTIG)
        bytes_by[kind][alg] += bytes;
    g->last = name;
    return alg;
}

/* coll.c: an alltoall's counts and displacements for blocks of bytes
 * each (in g's scratch: valid until the group's next alltoall); NULL when
 * memory is short. */
const size_t *torxc_uniform_counts(torx_coll_group_t *g, size_t bytes);

/* coll_alltoall.c: the paced alltoall(v), and the handler of its blocks */
torx_status_t torxc_paced_alltoallv(torx_coll_group_t *g, torx_coll_kind_t kind, const void *in,
                                    const size_t *sbytes, const size_t *sdispl, void *out,
                                    const size_t *rbytes, const size_t *rdispl);
/* ... moving only the blocks of non-zero length, where every member knows
 * which those are (a reduce's vectors, all to its root): a member leaves
 * once its own blocks are sent and placed. */
torx_status_t torxc_paced_sparse(torx_coll_group_t *g, torx_coll_kind_t kind, const void *in,
                                 const size_t *sbytes, const size_t *sdispl, void *out,
                                 const size_t *rbytes, const size_t *rdispl);
/* ... between the two members of a group, one block of bytes (at most
 * TORXC_A2A_INJECT_MAX) each way or one way: this task sends in (send)
 * and places the other's block at other (non-NULL: it takes one). The
 * same blocks on the wire as the exchanges above, without their tables,
 * step order and send window: an 8-byte allreduce of 2 tasks spent about
 * 320 instructions of its 2,260 on those. */
torx_status_t torxc_paced_pair(torx_coll_group_t *g, torx_coll_kind_t kind, const void *in,
                               size_t bytes, int send, void *other);
/* the header of a paced block (a2a_hdr_t in coll_alltoall.c) */
#define TORXC_A2A_HDR_BYTES 16
/* the broadcast as a sparse paced exchange: the root sends to every member,
 * from this many bytes through its multi-reader staging area when the
 * device has one (torxc_staged_bcast_applies). At 8 tasks on 2 cores it
 * was level with the eager blocks at 512 B and faster from 1 KiB (2.5-4.1
 * against 3.9-5.7 us at 1-16 KiB), and slower at 8 B, where a block is one
 * packet. */
#define TORXC_STAGED_BCAST_MIN_BYTES 512
/* A paced block of up to this many bytes (the one-packet limit less the
 * block's header) is injected when the network has room: no message
 * object, no completion; a short paced bcast goes so to every member. */
#define TORXC_A2A_INJECT_MAX (TORX_MSG_ONEPKT_MAX - TORXC_A2A_HDR_BYTES)
torx_status_t torxc_paced_bcast(torx_coll_group_t *g, void *buf, size_t bytes, int root);
static inline int torxc_staged_bcast_applies(const torx_coll_group_t *g, size_t bytes)
{
    return g->n > 1 && bytes >= TORXC_STAGED_BCAST_MIN_BYTES && torx_mstage_max(g->c->dev) > 0;
}
void torxc_a2a_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info,
                       torx_recv_t *recv);
void torxc_a2a_finalize(torx_coll_t *c);
/* A nonblocking alltoall(v): started now (its sequence number taken, its
 * own block placed, its blocks received from now on), its sends moved by
 * torxc_a2a_step, TORX_AGAIN until it ends; the count arrays are copied. */
torx_status_t torxc_a2a_start(torx_coll_group_t *g, torx_coll_kind_t kind, const void *in,
                              const size_t *sbytes, const size_t *sdispl, void *out,
                              const size_t *rbytes, const size_t *rdispl,
                              torxc_a2a_run_t **out_run);
torx_status_t torxc_a2a_step(torxc_a2a_run_t *r, int *moved);
/* Ends a run: freed at once, or (sends or receives still in the message
 * layer's hands) by its last callback, its blocks no longer placed. */
void torxc_a2a_discard(torxc_a2a_run_t *r);

/* coll_torus.c: the deposit-bit mesh broadcast; the coll handler, which
 * sends its messages here or to the alltoall's */
torx_status_t torxc_torus_group_init(torx_coll_group_t *g);
int torxc_torus_applies(const torx_coll_group_t *g, size_t bytes);
torx_status_t torxc_torus_bcast(torx_coll_group_t *g, void *buf, size_t bytes, int root);
void torxc_torus_finalize(torx_coll_t *c);
void torxc_handler(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info, torx_recv_t *recv);

/* coll_exchange.c: allgather by direct exchange (in NULL: in place) */
torx_status_t torxc_exchange_allgather(torx_coll_group_t *g, const void *in, void *out,
                                       size_t bytes);
/* coll_exchange.c: allreduce/reduce by direct exchange; out NULL: this
 * task keeps no result (a reduce off its root); root: the reduce's root,
 * -1 for an allreduce */
torx_status_t torxc_exchange_reduce(torx_coll_group_t *g, const void *in, void *out, size_t count,
                                    torx_coll_dtype_t dtype, torx_coll_op_t op, int root);
/* whether this task's collectives may read other tasks' buffers in place
 * (fixed for the job: set once by torx_coll_init) */
int torxc_direct_init(const torx_coll_t *c);
/* whether long vectors on g are read in place (direct_reduce) rather than
 * sent (the split exchange) */
static inline int torxc_direct_applies(const torx_coll_group_t *g)
{
    return g->all_tasks && g->c->direct_reads;
}

/* coll_cost.c: the group's geometry, made once with the group; an
 * algorithm's estimated time in seconds (INFINITY: no estimate), for a call
 * of bytes as torx_coll_select counts them; fpsum: a reproducible
 * floating-point sum. The torus bcast's estimate completes the geometry
 * at its first use. */
void torxc_cost_group_init(torx_coll_group_t *g);
double torxc_cost(torx_coll_group_t *g, torx_coll_kind_t kind, torx_coll_alg_t alg, size_t bytes,
                  int fpsum);
/* coll_torus.c: the routes a torus broadcast on g splits its data among. */
int torxc_torus_routes(const torx_coll_group_t *g);
/* torxc_route_forwards for the group's box, the root at member 0's node:
 * lines per packet sent on by the busiest member (0: no box). */
double torxc_torus_forwards(const torx_coll_group_t *g);

#endif /* TORX_COLL_INTERNAL_H */
