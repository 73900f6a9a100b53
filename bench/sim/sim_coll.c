/* sim_coll: times one collective over a group of tasks, with MPICH 4.0.2's
 * default algorithms re-expressed over the message layer
 * (bench/coll_baseline.h) or with torx's own (<torx/coll.h>), for the
 * original's Figs 5(b) and 6 and the BG/P study's collectives. A
 * message-layer program: it runs under torx-sim (simulated time) and under
 * mpiexec on shm or ofi.
 *
 *   sim_coll --kind barrier|bcast|allreduce|alltoall [--sizes LIST]
 *            [--iters N] [--alg baseline|baseline-NAME|torx]
 *            [--comm world|dup|split|percore|core0|box:XxYxZ] [--root R|rotate]
 *            [--warmup N]
 *            [--check]
 *
 * --sizes: bytes per call (bcast: the buffer; allreduce: the vector of
 * doubles, a multiple of 8; alltoall: one member's block for another),
 * with K, M or G; ignored for barrier. --alg baseline: MPICH's choice for
 * the size (coll_baseline.h); baseline-NAME forces one of its algorithms
 * (bcast: binomial, scatter_rdb, scatter_ring; allreduce: rd, rsag;
 * alltoall: bruck, scattered, pairwise; barrier: dissemination); torx:
 * torx_coll_select, which honours TORX_COLL and TORX_COLL_<KIND>, and
 * MPICH's choice where it falls back (as torx's MPI does). --comm: the
 * job (world), a second group of the same tasks (dup), the job without its
 * last task (split; that task only waits), or one group per core of a
 * node (percore: the tasks of each t, all groups at once; in heater and
 * co mode that is the job), or core 0's group of those alone while the
 * other tasks only wait (core0: percore's single-group reference), or the
 * tasks of the nodes in an X by Y by Z box at the torus's origin, every
 * core's (box: a rectangle that is not the whole partition, where the
 * deposit-bit broadcast applies and the collective network does not; the
 * other tasks only wait). --root:
 * the bcast's root, or rotate (the default): member k mod n on call k, as
 * bench/mpi_coll.c, so that a root cannot run ahead of its receivers.
 *
 * For each size every task joins a global-interrupt barrier, runs
 * --warmup untimed calls (default 1), meets the others again (sim: the global interrupt) and
 * runs N timed calls; on shm and ofi, as bench/mpi_coll.c, in 10 batches,
 * each after the baseline's barrier among the members, keeping the
 * median batch. Rank 0 then
 * prints
 *   coll kind=bcast comm=world tasks=32 members=32 alg=baseline:binomial
 *        bytes=256 iters=20 us=12.3456 mbps=20.74 check=off wall_s=0.41
 *        maxrss_mib=80
 * us: the slowest member's time per call (simulated on sim); mbps: bytes
 * per microsecond (alltoall: all the blocks members send each other,
 * n (n - 1) bytes); alg: what ran on rank 0's group.
 *
 * --check: each call's result is compared with one computed locally:
 * bcast (root k mod n on call k, whatever --root) and alltoall byte for byte; allreduce in
 * turn s32 sum and s64 max (exact) and double sum, which for the baseline
 * must equal bit for bit the order its algorithms reduce in (the pairs of
 * the fold, then a binary tree over the power-of-two group) and for torx's
 * be within n ulps of the sum's magnitude (its order depends on the
 * values); barrier: member k mod n enters 20 us late, and no member may
 * leave before the last one entered. check=ok or check=fail(ERRORS);
 * the program exits 1 on any failure. Times then include the checking. */
#include "../coll_baseline.h"
#include "bgp_common.h"

#include <torx/coll.h>

#include <limits.h>
#include <math.h>
#include <sys/mman.h>

#define H_CB 10 /* the baseline's messages; bgp_common uses 1..3 */

enum { K_BARRIER, K_BCAST, K_ALLREDUCE, K_ALLTOALL };
static const char *const kind_names[] = {"barrier", "bcast", "allreduce", "alltoall"};
static const torx_coll_kind_t torx_kinds[] = {TORX_COLL_BARRIER, TORX_COLL_BCAST,
                                              TORX_COLL_ALLREDUCE, TORX_COLL_ALLTOALL};
enum { C_WORLD, C_DUP, C_SPLIT, C_PERCORE, C_CORE0, C_BOX };
static const char *const comm_names[] = {"world", "dup", "split", "percore", "core0", "box"};

typedef struct opts {
    int kind, comm, torx, alg, check;
    unsigned box[3]; /* --comm box:XxYxZ */
    long sizes[BGP_MAXLIST], iters, root, warmup;
    int nsizes;
} opts_t;

typedef struct run {
    bgp_t b;
    opts_t o;
    cb_ctx *cc;
    cb_group *cg;
    torx_coll_t *tc; /* every task's: torx_coll_init is collective over the job */
    torx_coll_group_t *tg;
    int n, me; /* in the group; me < 0: not a member */
    char alg_name[96];
} run_t;

static int usage(const char *what, const char *v)
{
    fprintf(
        stderr,
        "sim_coll: bad argument %s%s%s\nusage: sim_coll --kind barrier|bcast|allreduce|alltoall "
        "[--sizes LIST] [--iters N] [--alg baseline|baseline-NAME|torx] "
        "[--comm world|dup|split|percore|core0|box:XxYxZ] [--root R|rotate] [--warmup N] "
        "[--check]\n",
        what, v ? " " : "", v ? v : "");
    return 2;
}

static int pick(const char *const *names, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i]))
            return i;
    return -1;
}

static int parse_alg(opts_t *o, const char *v)
{
    if (!strcmp(v, "torx")) {
        o->torx = 1;
        return 0;
    }
    if (!strcmp(v, "baseline"))
        return 0;
    if (strncmp(v, "baseline-", 9))
        return -1;
    const char *name = v + 9;
    const int a = o->kind == K_BCAST       ? cb_bcast_parse(name)
                  : o->kind == K_ALLREDUCE ? cb_allreduce_parse(name)
                  : o->kind == K_ALLTOALL  ? cb_alltoall_parse(name)
                                           : cb_barrier_parse(name);
    if (a <= 0) {
        fprintf(stderr, "sim_coll: no baseline %s algorithm '%s'\n", kind_names[o->kind], name);
        return -1;
    }
    o->alg = a;
    return 0;
}

static int parse_args(int argc, char **argv, opts_t *o)
{
    const char *alg = "baseline";
    *o = (opts_t){.kind = -1, .iters = 20, .nsizes = 1, .sizes = {8}, .root = -1, .warmup = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--check")) {
            o->check = 1;
            continue;
        }
        if (i + 1 >= argc)
            return usage(a, NULL);
        const char *v = argv[++i];
        if (!strcmp(a, "--kind")) {
            if ((o->kind = pick(kind_names, 4, v)) < 0)
                return usage(a, v);
        } else if (!strcmp(a, "--comm")) {
            char end;
            if (!strncmp(v, "box:", 4)) {
                if (sscanf(v + 4, "%ux%ux%u%c", &o->box[0], &o->box[1], &o->box[2], &end) != 3 ||
                    !o->box[0] || !o->box[1] || !o->box[2])
                    return usage(a, v);
                o->comm = C_BOX;
            } else if ((o->comm = pick(comm_names, 5, v)) < 0) {
                return usage(a, v);
            }
        } else if (!strcmp(a, "--sizes")) {
            if ((o->nsizes = bgp_parse_sizes("sim_coll", a, v, o->sizes)) < 0)
                return 2;
        } else if (!strcmp(a, "--iters")) {
            if (bgp_parse_long("sim_coll", a, v, 1, 1000000, &o->iters))
                return 2;
        } else if (!strcmp(a, "--warmup")) {
            if (bgp_parse_long("sim_coll", a, v, 0, 1000, &o->warmup))
                return 2;
        } else if (!strcmp(a, "--root")) {
            if (!strcmp(v, "rotate"))
                o->root = -1;
            else if (bgp_parse_long("sim_coll", a, v, 0, 1 << 24, &o->root))
                return 2;
        } else if (!strcmp(a, "--alg")) {
            alg = v;
        } else {
            return usage(a, v);
        }
    }
    if (o->kind < 0) {
        fprintf(stderr, "sim_coll: --kind is required (barrier, bcast, allreduce or alltoall)\n");
        return 2;
    }
    if (parse_alg(o, alg))
        return usage("--alg", alg);
    if (o->kind == K_BARRIER) {
        o->nsizes = 1;
        o->sizes[0] = 0;
    }
    for (int i = 0; i < o->nsizes; i++)
        if (o->kind == K_ALLREDUCE && o->sizes[i] % 8) {
            fprintf(stderr, "sim_coll: allreduce size %ld is not a multiple of 8 (doubles)\n",
                    o->sizes[i]);
            return 2;
        }
    if (o->check && o->kind == K_ALLREDUCE && o->iters < 3) {
        fprintf(stderr, "sim_coll: --check on allreduce needs --iters 3 or more (one call per "
                        "type)\n");
        return 2;
    }
    return 0;
}

/* ---- groups ---------------------------------------------------------------- */

/* A group's task list while the groups are made: room for every rank,
 * mapped, not from the heap. Under torx-sim every task of the job is one
 * process's actor, and one such list per task, freed between the tasks'
 * lasting allocations, fragmented that process's heap by about its size
 * per task. NULL: no memory. */
static int *task_list_new(const bgp_t *b)
{
    void *p = mmap(NULL, (size_t)b->size * sizeof(int), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void task_list_free(const bgp_t *b, int *tasks)
{
    if (tasks)
        munmap(tasks, (size_t)b->size * sizeof *tasks);
}

/* The ranks whose coordinates lie in [lo, hi) (x, y, z, t), in rank order:
 * a new list (task_list_new) of *n; *me is this task's place in it, or -1.
 * NULL: no memory. */
static int *tasks_within(const bgp_t *b, const unsigned lo[4], const unsigned hi[4], int *n,
                         int *me)
{
    int *tasks = task_list_new(b);
    if (!tasks)
        return NULL;
    *n = 0;
    *me = -1;
    for (int i = 0; i < b->size; i++) {
        const torx_coord_t c = torx_map_coord(b->map, i);
        const unsigned v[4] = {c.x, c.y, c.z, c.t};
        int in = 1;
        for (int d = 0; d < 4; d++)
            in &= v[d] >= lo[d] && v[d] < hi[d];
        if (in) {
            if (i == b->rank)
                *me = *n;
            tasks[(*n)++] = i;
        }
    }
    return tasks;
}

static int make_groups(run_t *r)
{
    bgp_t *b = &r->b;
    int *tasks = NULL, n = b->size, me = b->rank;
    uint32_t id = 1;
    if (r->o.comm == C_DUP)
        id = 2;
    if (r->o.comm == C_SPLIT) {
        id = 3;
        n = b->size - 1;
        me = b->rank < n ? b->rank : -1;
        tasks = task_list_new(b);
        if (!tasks)
            return bgp_die(b, "out of memory");
        for (int i = 0; i < n; i++)
            tasks[i] = i;
    }
    if (r->o.comm == C_PERCORE || r->o.comm == C_CORE0) {
        const unsigned t = r->o.comm == C_CORE0 ? 0 : torx_map_coord(b->map, b->rank).t;
        id = 16 + t;
        const unsigned lo[4] = {0, 0, 0, t}, hi[4] = {UINT_MAX, UINT_MAX, UINT_MAX, t + 1};
        if (!(tasks = tasks_within(b, lo, hi, &n, &me))) /* core0: the others only wait */
            return bgp_die(b, "out of memory");
    }
    if (r->o.comm == C_BOX) {
        const torx_shape_t sh = b->map->shape;
        if (r->o.box[0] > sh.x || r->o.box[1] > sh.y || r->o.box[2] > sh.z) {
            if (b->rank == 0)
                fprintf(stderr, "sim_coll: --comm box:%ux%ux%u does not fit the %ux%ux%u torus\n",
                        r->o.box[0], r->o.box[1], r->o.box[2], sh.x, sh.y, sh.z);
            return 2;
        }
        id = 4;
        const unsigned lo[4] = {0, 0, 0, 0},
                       hi[4] = {r->o.box[0], r->o.box[1], r->o.box[2], UINT_MAX};
        if (!(tasks = tasks_within(b, lo, hi, &n, &me))) /* outside the box: only waits */
            return bgp_die(b, "out of memory");
    }
    r->n = n;
    r->me = me;
    if (!(r->cc = cb_init(b->ctx, H_CB))) {
        fprintf(stderr, "sim_coll: rank %d: %s\n", b->rank, cb_last_error());
        return 1;
    }
    if (r->o.torx && torx_coll_init(b->ctx, NULL, &r->tc) != TORX_OK)
        return bgp_die(b, "torx_coll_init");
    if (me >= 0) {
        if (!(r->cg = cb_group_create(r->cc, id, n, tasks, me))) {
            fprintf(stderr, "sim_coll: rank %d: %s\n", b->rank, cb_last_error());
            return 1;
        }
        if (r->o.torx && torx_coll_group_create(r->tc, id, n, tasks, me, &r->tg) != TORX_OK)
            return bgp_die(b, "torx_coll_group_create");
    }
    task_list_free(b, tasks);
    return 0;
}

/* ---- data and references --------------------------------------------------- */

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

static unsigned char byte_of(long k, int a, int b, size_t i)
{
    return (unsigned char)mix(((uint64_t)k << 40) ^ ((uint64_t)a << 28) ^ ((uint64_t)b << 16) ^ i);
}

/* Member m's element i on call k: integers of every sign and size, and
 * doubles whose magnitudes span 2^30, so that a sum's rounding depends on
 * its order. */
static void element(long k, int m, size_t i, torx_coll_dtype_t dt, void *out)
{
    const uint64_t h = mix(((uint64_t)k << 44) ^ ((uint64_t)m << 24) ^ i);
    if (dt == TORX_COLL_S32) {
        const int32_t v = (int32_t)(uint32_t)h;
        memcpy(out, &v, 4);
    } else if (dt == TORX_COLL_S64) {
        const int64_t v = (int64_t)h;
        memcpy(out, &v, 8);
    } else {
        const double v = ((double)(h >> 11) / 9007199254740992.0 - 0.5) * ldexp(1.0, (int)(h % 31));
        memcpy(out, &v, 8);
    }
}

static const torx_coll_dtype_t check_types[3] = {TORX_COLL_S32, TORX_COLL_S64, TORX_COLL_DOUBLE};
static const torx_coll_op_t check_ops[3] = {TORX_COLL_SUM, TORX_COLL_MAX, TORX_COLL_SUM};

/* The reference of element i: integers in member order (exact); doubles
 * as the baseline reduces them: the fold's pairs, then a binary tree over
 * the power-of-two group. tree: scratch of n doubles. */
static void reference(long k, int n, size_t i, torx_coll_dtype_t dt, torx_coll_op_t op,
                      double *tree, void *out, double *sumabs)
{
    char v[8], acc[8];
    if (dt != TORX_COLL_DOUBLE) {
        element(k, 0, i, dt, acc);
        for (int m = 1; m < n; m++) {
            element(k, m, i, dt, v);
            cb_reduce_local(v, acc, 1, dt, op);
        }
        memcpy(out, acc, cb_dtype_size(dt));
        return;
    }
    int pof2 = 1;
    while (pof2 * 2 <= n)
        pof2 *= 2;
    const int rem = n - pof2;
    *sumabs = 0;
    for (int m = 0; m < n; m++) {
        element(k, m, i, dt, &tree[m]);
        *sumabs += fabs(tree[m]);
    }
    double *w = tree + n;
    for (int j = 0; j < pof2; j++)
        w[j] = j < rem ? tree[2 * j] + tree[2 * j + 1] : tree[j + rem];
    for (int s = 1; s < pof2; s *= 2)
        for (int j = 0; j + s < pof2; j += 2 * s)
            w[j] = w[j] + w[j + s];
    memcpy(out, &w[0], 8);
}

/* ---- one call --------------------------------------------------------------- */

typedef struct bufs {
    char *a, *b;       /* bcast: a; allreduce: in a, out b; alltoall: in a, out b */
    size_t alen, blen; /* mapped lengths */
    double *tree;
} bufs_t;

static char *map_buf(size_t len)
{
    /* Anonymous pages: a buffer only ever read (the timed runs' send
     * buffers) stays on the zero page, so 512 tasks' alltoall inputs cost
     * no memory. */
    void *p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void set_name(run_t *r, const char *fmt, const char *a, const char *b)
{
    snprintf(r->alg_name, sizeof r->alg_name, fmt, a, b);
}

/* Runs call k of size bytes; adds to *errors what the check found. */
static int one_call(run_t *r, bufs_t *bf, size_t bytes, long k, long *errors)
{
    const opts_t *o = &r->o;
    const int n = r->n, me = r->me, check = o->check && k >= 0;
    const long kk = k < 0 ? 0 : k;
    torx_status_t st = TORX_OK;
    torx_coll_alg_t ta = TORX_COLL_ALG_FALLBACK;
    torx_coll_dtype_t dt = TORX_COLL_DOUBLE;
    torx_coll_op_t op = TORX_COLL_SUM;
    if (o->kind == K_ALLREDUCE && o->check) {
        dt = check_types[kk % 3];
        op = check_ops[kk % 3];
    }
    const size_t count = bytes / 8 * 8 / (cb_dtype_size(dt) ? cb_dtype_size(dt) : 8);
    if (o->torx)
        ta = torx_coll_select(r->tg, torx_kinds[o->kind], bytes, dt, op);

    switch (o->kind) {
    case K_BARRIER: {
        double enter, leave;
        if (check && me == kk % n) {
            volatile int never = 0;
            torx_wait_timeout(r->b.ctx, &never, 20e-6);
        }
        enter = torx_wtime(r->b.ctx);
        if (ta != TORX_COLL_ALG_FALLBACK) {
            st = torx_coll_barrier(r->tg, ta);
            set_name(r, "torx:%s%s", torx_coll_last_algorithm(r->tg), "");
        } else {
            st = cb_barrier(r->cg, o->alg);
            set_name(r, o->torx ? "torx:barrier:mpich->baseline:%s%s" : "baseline:%s%s",
                     cb_barrier_name(CB_BARRIER_DISSEMINATION), "");
        }
        leave = torx_wtime(r->b.ctx);
        if (check && st == TORX_OK) {
            double t[2] = {enter, -leave};
            st = cb_allreduce(r->cg, NULL, t, 2, TORX_COLL_DOUBLE, TORX_COLL_MAX, CB_ALLREDUCE_RD);
            if (st == TORX_OK && -t[1] < t[0])
                ++*errors;
        }
        break;
    }
    case K_BCAST: {
        const int root = check || o->root < 0 ? (int)(kk % n) : (int)o->root;
        if (check)
            for (size_t i = 0; i < bytes; i++)
                bf->a[i] = me == root ? (char)byte_of(kk, root, 0, i) : (char)0xee;
        if (ta != TORX_COLL_ALG_FALLBACK) {
            st = torx_coll_bcast(r->tg, ta, bf->a, bytes, root);
            set_name(r, "torx:%s%s", torx_coll_last_algorithm(r->tg), "");
        } else {
            const cb_bcast_alg a = o->alg ? (cb_bcast_alg)o->alg : cb_bcast_choose(r->cg, bytes);
            st = cb_bcast(r->cg, bf->a, bytes, root, a);
            set_name(r, o->torx ? "torx:bcast:mpich->baseline:%s%s" : "baseline:%s%s",
                     cb_bcast_name(a), "");
        }
        if (check && st == TORX_OK)
            for (size_t i = 0; i < bytes; i++)
                *errors += (unsigned char)bf->a[i] != byte_of(kk, root, 0, i);
        break;
    }
    case K_ALLREDUCE: {
        const size_t es = cb_dtype_size(dt);
        if (check)
            for (size_t i = 0; i < count; i++)
                element(kk, me, i, dt, bf->a + i * es);
        if (ta != TORX_COLL_ALG_FALLBACK) {
            st = torx_coll_allreduce(r->tg, ta, bf->a, bf->b, count, dt, op);
            set_name(r, "torx:%s%s", torx_coll_last_algorithm(r->tg), "");
        } else {
            const cb_allreduce_alg a =
                o->alg ? (cb_allreduce_alg)o->alg : cb_allreduce_choose(r->cg, count, dt);
            st = cb_allreduce(r->cg, bf->a, bf->b, count, dt, op, a);
            set_name(r, o->torx ? "torx:allreduce:mpich->baseline:%s%s" : "baseline:%s%s",
                     cb_allreduce_name(a), "");
        }
        if (check && st == TORX_OK) {
            const int exact = dt != TORX_COLL_DOUBLE || ta == TORX_COLL_ALG_FALLBACK;
            for (size_t i = 0; i < count; i++) {
                char ref[8];
                double sumabs = 0;
                reference(kk, n, i, dt, op, bf->tree, ref, &sumabs);
                if (exact) {
                    *errors += memcmp(ref, bf->b + i * es, es) != 0;
                } else {
                    double x, y;
                    memcpy(&x, ref, 8);
                    memcpy(&y, bf->b + i * es, 8);
                    *errors += !(fabs(x - y) <= (double)n * 0x1p-52 * sumabs);
                }
            }
        }
        break;
    }
    case K_ALLTOALL:
        if (check)
            for (int j = 0; j < n; j++)
                for (size_t i = 0; i < bytes; i++) {
                    bf->a[(size_t)j * bytes + i] = (char)byte_of(kk, me, j, i);
                    bf->b[(size_t)j * bytes + i] = (char)0xee;
                }
        if (ta != TORX_COLL_ALG_FALLBACK) {
            st = torx_coll_alltoall(r->tg, ta, bf->a, bf->b, bytes);
            set_name(r, "torx:%s%s", torx_coll_last_algorithm(r->tg), "");
        } else {
            const cb_alltoall_alg a =
                o->alg ? (cb_alltoall_alg)o->alg : cb_alltoall_choose(r->cg, bytes);
            st = cb_alltoall(r->cg, bf->a, bf->b, bytes, a);
            set_name(r, o->torx ? "torx:alltoall:mpich->baseline:%s%s" : "baseline:%s%s",
                     cb_alltoall_name(a), "");
        }
        if (check && st == TORX_OK)
            for (int j = 0; j < n; j++)
                for (size_t i = 0; i < bytes; i++)
                    *errors += (unsigned char)bf->b[(size_t)j * bytes + i] != byte_of(kk, j, me, i);
        break;
    }
    if (st != TORX_OK) {
        fprintf(stderr, "sim_coll: rank %d: %s of %zu bytes, call %ld: %s\n", r->b.rank,
                kind_names[o->kind], bytes, k, o->torx ? torx_last_error() : cb_last_error());
        return 1;
    }
    return 0;
}

static int alloc_bufs(run_t *r, size_t bytes, bufs_t *bf)
{
    const size_t n = (size_t)r->n;
    *bf = (bufs_t){0};
    switch (r->o.kind) {
    case K_BCAST:
        bf->alen = bytes;
        break;
    case K_ALLREDUCE:
        bf->alen = bf->blen = bytes;
        break;
    case K_ALLTOALL:
        bf->alen = bf->blen = bytes * n;
        break;
    }
    if (!(bf->a = map_buf(bf->alen)) || !(bf->b = map_buf(bf->blen)) ||
        !(bf->tree = malloc(2 * n * sizeof(double))))
        return bgp_die(&r->b, "out of memory");
    return 0;
}

static void free_bufs(bufs_t *bf)
{
    munmap(bf->a, bf->alen ? bf->alen : 1);
    munmap(bf->b, bf->blen ? bf->blen : 1);
    free(bf->tree);
}

int main(int argc, char **argv)
{
    run_t r = {0};
    int rc = parse_args(argc, argv, &r.o);
    if (rc)
        return rc;
    bgp_t *b = &r.b;
    if (bgp_start(b, "sim_coll", NULL, 0))
        return 1;
    if (r.o.comm == C_SPLIT && (rc = bgp_needs_tasks(b, 2)))
        return rc;
    if ((rc = make_groups(&r)))
        return rc;
    char comm[48];
    if (r.o.comm == C_BOX)
        snprintf(comm, sizeof comm, "box:%ux%ux%u", r.o.box[0], r.o.box[1], r.o.box[2]);
    else
        snprintf(comm, sizeof comm, "%s", comm_names[r.o.comm]);
    if (r.o.root >= r.n && r.me >= 0) {
        if (b->rank == 0)
            fprintf(stderr, "sim_coll: --root %ld outside the group of %d\n", r.o.root, r.n);
        return 2;
    }
    long failed = 0;
    for (int z = 0; z < r.o.nsizes; z++) {
        const size_t bytes = (size_t)r.o.sizes[z];
        const double wall0 = bgp_wall();
        bufs_t bf = {0};
        long errors = 0;
        double us = 0;
        if (r.me >= 0 && alloc_bufs(&r, bytes, &bf))
            return 1;
        if (bgp_barrier(b))
            return 1;
        for (long w = 0; w < r.o.warmup; w++)
            if (r.me >= 0 && one_call(&r, &bf, bytes, -1, &errors))
                return 1;
        /* Timed in batches, each after the members meet: on sim one batch
         * after the global interrupt, which lets every task out at once;
         * elsewhere, as bench/mpi_coll.c, 10 batches after the baseline's
         * barrier (a task may sleep in the global interrupt for
         * milliseconds after its round) and the median batch, so that a
         * batch in which another job took the core does not count. */
        const int nb = b->modelled || r.o.iters < 10 ? 1 : 10;
        double batch[10];
        for (int j = 0; j < nb; j++) {
            if (b->modelled ? bgp_barrier(b) : r.me >= 0 && cb_barrier(r.cg, CB_BARRIER_AUTO)) {
                fprintf(stderr, "sim_coll: rank %d: barrier: %s\n", b->rank, cb_last_error());
                return 1;
            }
            const long k0 = r.o.iters * j / nb, k1 = r.o.iters * (j + 1) / nb;
            const double t0 = torx_wtime(b->ctx);
            if (r.me >= 0)
                for (long k = k0; k < k1; k++)
                    if (one_call(&r, &bf, bytes, k, &errors))
                        return 1;
            batch[j] = (torx_wtime(b->ctx) - t0) / (double)(k1 - k0) * 1e6;
        }
        for (int j = 1; j < nb; j++)
            for (int i = j; i > 0 && batch[i] < batch[i - 1]; i--) {
                const double t = batch[i];
                batch[i] = batch[i - 1];
                batch[i - 1] = t;
            }
        us = batch[nb / 2];
        if (r.me >= 0)
            free_bufs(&bf);
        /* Every task reports only once the members are done: a task outside
         * the group (split, core0) would otherwise send rank 0 its report
         * while rank 0 is still timing, and its matching would count. */
        if (bgp_barrier(b))
            return 1;
        const double rep[3] = {r.me >= 0 ? us : -1, (double)errors, 0};
        if (bgp_report(b, rep, 3) ||
            (b->rank == 0 && bgp_wait_for(b, &b->reports, (long)b->size * (z + 1), "reports")))
            return 1;
        if (b->rank != 0)
            continue;
        double worst = 0, errs = 0;
        for (int t = 0; t < b->size; t++) {
            const double *v = b->report + (size_t)t * BGP_REPORT_MAX;
            worst = v[0] > worst ? v[0] : worst;
            errs += v[1];
        }
        failed += errs > 0;
        const double moved =
            r.o.kind == K_ALLTOALL ? (double)bytes * r.n * (r.n - 1) : (double)bytes;
        char chk[32];
        snprintf(chk, sizeof chk, r.o.check ? (errs > 0 ? "fail(%.0f)" : "ok") : "off", errs);
        printf("coll kind=%s comm=%s tasks=%d members=%d alg=%s bytes=%zu iters=%ld us=%.4f "
               "mbps=%.2f check=%s wall_s=%.2f maxrss_mib=%.0f\n",
               kind_names[r.o.kind], comm, b->size, r.n, r.alg_name, bytes,
               r.o.iters, worst, worst > 0 ? moved / worst : 0, chk, bgp_wall() - wall0,
               bgp_maxrss_mib());
        fflush(stdout);
    }
    if (r.tg)
        torx_coll_group_free(r.tg);
    torx_coll_finalize(r.tc);
    cb_group_free(r.cg);
    cb_finalize(r.cc);
    if (bgp_finish(b))
        return 1;
    return failed ? 1 : 0;
}
