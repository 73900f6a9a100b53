/* The torus broadcast's routes (src/coll/coll_routes.c,
 * docs/collectives.md#torus-broadcast-routes) and the broadcast that sends
 * by them (src/coll/coll_torus.c).
 *
 * The plan checker runs every route's line sends from the root, as the
 * deposit bit delivers them (each line leaves a copy on every node it
 * passes, crossing one directed link per hop), and requires: no directed
 * link carries two routes (nor one route twice), every member but the root
 * receives every route exactly once and the root never, a node sends only
 * what it received, no line leaves the box (or laps a ring), and each
 * node's plan names the line that reaches it. It runs on 1-, 2- and 3-D
 * boxes of 2..8 nodes a side, runs and whole rings, from every root (from
 * some roots on the larger 3-D boxes), and it rejects the routes that
 * coll_torus.c sent before (the dimension-ordered line trees, below).
 *
 * Then the broadcast end to end, every byte from every root: on shm (fork
 * jobs on TORX_TORUS shapes, heater, co and vn, whole tori and sub-boxes)
 * and on the sim device (meshes and tori), and on sim the pipeline: on a
 * message of many packets the far corner places its first packet before
 * the root has injected its last, in simulated time.
 */
#include "harness.h"

#include <torx/coll.h>
#include <torx/msg.h>

#include "coll/coll_internal.h" /* the plan, and the bcast's clock stamps */

#include <inttypes.h>
#include <sys/mman.h>

/* ---- the plan checker ---------------------------------------------------------------- */

typedef void (*plan_fn)(const torxc_box_t *box, const unsigned root[3], const unsigned me[3],
                        int route, torxc_route_node_t *out);

static unsigned box_nodes(const torxc_box_t *box)
{
    unsigned n = 1;
    for (int d = 0; d < box->dims; d++)
        n *= box->len[d];
    return n;
}

static unsigned node_of(const torxc_box_t *box, const unsigned p[3])
{
    unsigned i = 0;
    for (int d = box->dims - 1; d >= 0; d--)
        i = i * box->len[d] + p[d];
    return i;
}

static void pos_of(const torxc_box_t *box, unsigned i, unsigned p[3])
{
    p[0] = p[1] = p[2] = 0;
    for (int d = 0; d < box->dims; d++) {
        p[d] = i % box->len[d];
        i /= box->len[d];
    }
}

static void box_name(const torxc_box_t *box, char *s, size_t n)
{
    size_t k = 0;
    s[0] = 0;
    for (int d = 0; d < box->dims && k < n; d++)
        k += (size_t)snprintf(s + k, n - k, "%s%u%s", d ? "x" : "", box->len[d],
                              box->ring[d] ? "r" : "");
}

/* 0 when routes 0..nroutes-1 of plan are edge-disjoint spanning trees of
 * box from root, as the lines deliver them; else 1 and why. */
static int check_plan(const torxc_box_t *box, const unsigned root[3], plan_fn plan, int nroutes,
                      char *why, size_t whylen)
{
    const unsigned N = box_nodes(box), ri = node_of(box, root);
    int *owner = malloc((size_t)N * 6 * sizeof *owner); /* route+1 per directed link */
    unsigned *got = malloc((size_t)N * sizeof *got), *queue = malloc((size_t)N * sizeof *queue);
    char name[64];
    box_name(box, name, sizeof name);
    int bad = 0;
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        int k_ = snprintf(why, whylen, "box %s root %u (%u,%u,%u) route %d: ", name, ri, root[0],  \
                          root[1], root[2], r);                                                    \
        if (k_ >= 0 && (size_t)k_ < whylen)                                                        \
            snprintf(why + k_, whylen - (size_t)k_, __VA_ARGS__);                                  \
        bad = 1;                                                                                   \
        goto out;                                                                                  \
    } while (0)
    int r = -1;
    if (!owner || !got || !queue)
        FAIL("out of memory");
    memset(owner, 0, (size_t)N * 6 * sizeof *owner);
    for (r = 0; r < nroutes; r++) {
        memset(got, 0, (size_t)N * sizeof *got);
        unsigned qh = 0, qt = 0;
        queue[qt++] = ri;
        while (qh < qt) {
            const unsigned u = queue[qh++];
            unsigned up[3];
            pos_of(box, u, up);
            torxc_route_node_t pl;
            plan(box, root, up, r, &pl);
            for (int l = 0; l < pl.nlines; l++) {
                const torxc_bline_t ln = pl.line[l];
                if (ln.dim < 0 || ln.dim >= box->dims || (ln.dir != 1 && ln.dir != -1) ||
                    ln.hops < 1 || ln.hops >= box->len[ln.dim])
                    FAIL("node %u sends a bad line (dim %d, way %d, %u hops)", u, ln.dim, ln.dir,
                         ln.hops);
                unsigned p[3] = {up[0], up[1], up[2]};
                for (unsigned h = 1; h <= ln.hops; h++) {
                    const unsigned from = node_of(box, p), len = box->len[ln.dim];
                    const int link = (int)from * 6 + ln.dim * 2 + (ln.dir < 0);
                    if (owner[link])
                        FAIL("node %u's link along dim %d way %d carries route %d too", from,
                             ln.dim, ln.dir, owner[link] - 1);
                    owner[link] = r + 1;
                    if (box->ring[ln.dim])
                        p[ln.dim] = (p[ln.dim] + len + (unsigned)ln.dir) % len;
                    else if ((ln.dir > 0 && p[ln.dim] + 1 >= len) || (ln.dir < 0 && p[ln.dim] == 0))
                        FAIL("node %u's line along dim %d way %d leaves the box", u, ln.dim,
                             ln.dir);
                    else
                        p[ln.dim] = (unsigned)((int)p[ln.dim] + ln.dir);
                    const unsigned w = node_of(box, p);
                    if (w == ri)
                        FAIL("node %u's line deposits on the root", u);
                    if (++got[w] > 1)
                        FAIL("node %u receives it twice (again from node %u)", w, u);
                    torxc_route_node_t wp;
                    plan(box, root, p, r, &wp);
                    if (wp.from.dim != ln.dim || wp.from.dir != ln.dir || wp.from.hops != h)
                        FAIL("node %u's plan says it comes along dim %d way %d from %u hops "
                             "back, but node %u's line brings it %u hops",
                             w, wp.from.dim, wp.from.dir, wp.from.hops, u, h);
                    queue[qt++] = w;
                }
            }
        }
        for (unsigned v = 0; v < N; v++)
            if (v != ri && got[v] != 1)
                FAIL("node %u never receives it", v);
    }
out:
#undef FAIL
    free(owner);
    free(got);
    free(queue);
    return bad;
}

/* The routes coll_torus.c sent before: route k the dimension-ordered line
 * tree in the order k, k+1, ... (a whole ring's lines the + way round, a
 * run's both ways), D routes. */
static void legacy_plan(const torxc_box_t *box, const unsigned root[3], const unsigned me[3],
                        int route, torxc_route_node_t *out)
{
    memset(out, 0, sizeof *out);
    const int D = box->dims;
    int from = 0;
    for (int j = 0; j < D; j++) {
        const int d = (route + j) % D;
        if (me[d] != root[d]) {
            from = j + 1;
            const unsigned len = box->len[d];
            const int dir = box->ring[d] || me[d] > root[d] ? 1 : -1;
            const unsigned hops = box->ring[d] ? (me[d] + len - root[d]) % len
                                  : dir > 0    ? me[d] - root[d]
                                               : root[d] - me[d];
            out->from = (torxc_bline_t){.dim = (int8_t)d, .dir = (int8_t)dir, .hops = hops};
        }
    }
    for (int j = from; j < D; j++) {
        const int d = (route + j) % D;
        const unsigned len = box->len[d];
        if (box->ring[d]) {
            out->line[out->nlines++] = (torxc_bline_t){.dim = (int8_t)d, .dir = 1, .hops = len - 1};
        } else {
            if (root[d] + 1 < len)
                out->line[out->nlines++] =
                    (torxc_bline_t){.dim = (int8_t)d, .dir = 1, .hops = len - 1 - root[d]};
            if (root[d] > 0)
                out->line[out->nlines++] =
                    (torxc_bline_t){.dim = (int8_t)d, .dir = -1, .hops = root[d]};
        }
    }
}

/* The plan without its one-hop entries into the plane v_a = 0 (on boxes
 * longer than 2 a side, where no line to the end is one hop). */
static void no_entry_plan(const torxc_box_t *box, const unsigned root[3], const unsigned me[3],
                          int route, torxc_route_node_t *out)
{
    torxc_route_plan(box, root, me, route, out);
    int k = 0;
    for (int l = 0; l < out->nlines; l++)
        if (out->line[l].hops != 1)
            out->line[k++] = out->line[l];
    out->nlines = k;
}

/* The box of D dimensions len[0..D-1] long, dimension d a ring where bit d
 * of wrap is set. */
static torxc_box_t make_box(int D, const unsigned len[3], int wrap)
{
    torxc_box_t box = {.dims = D};
    for (int d = 0; d < D; d++) {
        box.len[d] = len[d];
        box.ring[d] = wrap >> d & 1;
    }
    return box;
}

/* The next lengths of D dimensions, each 2..top, as an odometer: 0 after
 * the last. */
static int next_lens(unsigned len[3], int D, unsigned top)
{
    int d = 0;
    while (d < D && ++len[d] > top)
        len[d++] = 2;
    return d < D;
}

/* Checks box from every root (or, with sample, from its corners, its
 * middle and a few more): 0 or the failures. */
static int check_box(const torxc_box_t *box, int sample)
{
    const unsigned N = box_nodes(box);
    const int R = torxc_routes(box);
    char why[512];
    int fails = 0;
    for (unsigned ri = 0; ri < N; ri += sample && N > 64 ? 1 + N / 13 : 1) {
        unsigned root[3];
        pos_of(box, ri, root);
        if (check_plan(box, root, torxc_route_plan, R, why, sizeof why)) {
            if (fails++ < 5)
                fprintf(stderr, "plan: %s\n", why);
        }
    }
    if (sample) { /* the far corner and the middle too */
        unsigned root[3] = {0, 0, 0};
        for (int d = 0; d < box->dims; d++)
            root[d] = box->len[d] - 1;
        fails += check_plan(box, root, torxc_route_plan, R, why, sizeof why);
        for (int d = 0; d < box->dims; d++)
            root[d] = box->len[d] / 2;
        fails += check_plan(box, root, torxc_route_plan, R, why, sizeof why);
    }
    return fails;
}

START_TEST(plan_disjoint_and_exactly_once)
{
    int boxes = 0, fails = 0;
    for (int D = 1; D <= 3; D++) {
        unsigned len[3] = {2, 2, 2};
        do {
            for (int wrap = 0; wrap < 1 << D; wrap++) {
                const torxc_box_t box = make_box(D, len, wrap);
                /* every root up to 6 a side in 3-D, sampled roots past that */
                const int sample = D == 3 && (len[0] > 6 || len[1] > 6 || len[2] > 6);
                fails += check_box(&box, sample);
                boxes++;
            }
        } while (next_lens(len, D, 8));
    }
    /* the largest, from every root */
    torxc_box_t t888 = {.dims = 3, .len = {8, 8, 8}, .ring = {1, 1, 1}};
    torxc_box_t m888 = {.dims = 3, .len = {8, 8, 8}, .ring = {0, 0, 0}};
    torxc_box_t x873 = {.dims = 3, .len = {8, 7, 3}, .ring = {1, 0, 1}};
    fails += check_box(&t888, 0) + check_box(&m888, 0) + check_box(&x873, 0);
    printf("plan: %d boxes checked, %d failures\n", boxes + 3, fails);
    ck_assert_int_eq(fails, 0);
}
END_TEST

START_TEST(route_counts)
{
    for (unsigned a = 2; a <= 8; a++)
        for (unsigned b = 2; b <= 8; b++)
            for (unsigned c = 2; c <= 8; c++) {
                const torxc_box_t t = {.dims = 3, .len = {a, b, c}, .ring = {1, 1, 1}};
                const torxc_box_t m = {.dims = 3, .len = {a, b, c}, .ring = {0, 0, 0}};
                const torxc_box_t x = {.dims = 3, .len = {a, b, c}, .ring = {1, 1, 0}};
                ck_assert_int_eq(torxc_routes(&t), 6);
                ck_assert_int_eq(torxc_routes(&m), 3);
                ck_assert_int_eq(torxc_routes(&x), 3);
            }
    const torxc_box_t ring = {.dims = 1, .len = {5}, .ring = {1}};
    const torxc_box_t run = {.dims = 1, .len = {5}, .ring = {0}};
    const torxc_box_t plane = {.dims = 2, .len = {3, 4}, .ring = {1, 1}};
    const torxc_box_t rect = {.dims = 2, .len = {3, 4}, .ring = {0, 1}};
    const torxc_box_t node = {.dims = 0};
    ck_assert_int_eq(torxc_routes(&ring), 2);
    ck_assert_int_eq(torxc_routes(&run), 1);
    ck_assert_int_eq(torxc_routes(&plane), 4);
    ck_assert_int_eq(torxc_routes(&rect), 2);
    ck_assert_int_eq(torxc_routes(&node), 1);
}
END_TEST

/* The busiest member's lines a packet, exhaustively: every node but the
 * root. */
static double forwards_exhaustive(const torxc_box_t *box, const unsigned root[3])
{
    const unsigned N = box_nodes(box);
    int most = 0;
    for (unsigned i = 0; i < N; i++) {
        unsigned me[3] = {0, 0, 0};
        pos_of(box, i, me);
        if (me[0] == root[0] && me[1] == root[1] && me[2] == root[2])
            continue;
        const int lines = torxc_route_lines(box, root, me);
        most = lines > most ? lines : most;
    }
    return (double)most / torxc_routes(box);
}

/* The cost estimate reads the busiest member's forwarding off a sample of
 * positions: it must equal the maximum over every node, on every box up
 * to 6 a side in 2-D and 5 in 3-D, rings, runs and mixed, from every root. */
START_TEST(forwards_sample_is_the_maximum)
{
    int cases = 0;
    for (int D = 1; D <= 3; D++) {
        unsigned len[3] = {2, 2, 2};
        do {
            for (int wrap = 0; wrap < 1 << D; wrap++) {
                const torxc_box_t box = make_box(D, len, wrap);
                const unsigned N = box_nodes(&box);
                for (unsigned ri = 0; ri < N; ri++) {
                    unsigned root[3] = {0, 0, 0};
                    pos_of(&box, ri, root);
                    const double want = forwards_exhaustive(&box, root);
                    const double got = torxc_route_forwards(&box, root);
                    if (got != want) {
                        char name[64];
                        box_name(&box, name, sizeof name);
                        ck_abort_msg("box %s, root (%u,%u,%u): sampled %.3f lines a packet, "
                                     "every node %.3f",
                                     name, root[0], root[1], root[2], got, want);
                    }
                    cases++;
                }
            }
        } while (next_lens(len, D, D == 3 ? 5 : 6));
    }
    /* the shapes the estimates are checked against (bench/RESULTS.md) */
    const torxc_box_t plane = {.dims = 2, .len = {8, 8}, .ring = {1, 1}};
    const torxc_box_t runs = {.dims = 3, .len = {4, 4, 4}, .ring = {0, 0, 0}};
    const unsigned corner[3] = {0, 0, 0};
    ck_assert_double_eq(torxc_route_forwards(&plane, corner), 0.5);
    ck_assert_double_eq(torxc_route_forwards(&runs, corner), 1.0);
    printf("forwards: %d boxes and roots, the sample's maximum is every node's\n", cases);
}
END_TEST

/* The checker fails on the routes the broadcast sent before: they share
 * the root's first line (and more), on tori and meshes, in 2-D and 3-D. */
START_TEST(checker_rejects_the_old_routes)
{
    static const torxc_box_t boxes[] = {
        {.dims = 3, .len = {4, 4, 4}, .ring = {1, 1, 1}},
        {.dims = 3, .len = {4, 4, 2}, .ring = {0, 0, 0}},
        {.dims = 2, .len = {3, 5}, .ring = {1, 0}},
    };
    for (size_t i = 0; i < sizeof boxes / sizeof boxes[0]; i++) {
        char why[512];
        const unsigned root[3] = {1, 1, 0};
        const int bad = check_plan(&boxes[i], root, legacy_plan, boxes[i].dims, why, sizeof why);
        printf("old routes: %s\n", bad ? why : "(passed)");
        ck_assert_int_eq(bad, 1);
        /* one route alone is a tree: the checker's failure is the sharing */
        ck_assert_int_eq(check_plan(&boxes[i], root, legacy_plan, 1, why, sizeof why), 0);
    }
    /* and on a plan that leaves a plane out */
    char why[512];
    const torxc_box_t t = {.dims = 3, .len = {4, 5, 3}, .ring = {1, 1, 1}};
    const unsigned root[3] = {2, 0, 1};
    ck_assert_int_eq(check_plan(&t, root, no_entry_plan, 6, why, sizeof why), 1);
    printf("without the one-hop entries: %s\n", why);
}
END_TEST

/* ---- end to end ------------------------------------------------------------------- */

static uint8_t byte_at(int root, int seed, size_t i)
{
    uint64_t x = (uint64_t)(root + 1) * 0x9e3779b97f4a7c15ull + (uint64_t)seed * 977 + i;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    return (uint8_t)(x >> 32);
}

typedef struct bc_job {
    /* the group: every task (tasks NULL), or those whose x lies in
     * [xlo, xhi) when xhi > 0 */
    unsigned xlo, xhi;
    const size_t *sizes;
    int nsizes;
    int root_step; /* roots 0, step, 2 step, ... (and the last) */
    int far;       /* stamp the pipeline: root 0 and the member farthest from it */
    int repeat;    /* calls per root and size, back to back (0: one) */
} bc_job_t;

/* Shared by a job's tasks (mapped before the fork; sim's actors share it too). */
typedef struct stamps {
    double root_out, far_first;
    int far_rank, routes, nmembers;
} stamps_t;
static stamps_t *st;

static int bc_task(torx_boot_t *boot, void *argp)
{
    const bc_job_t *job = argp;
    torx_init_attr_t attr = {.boot = boot, .mode = -1};
    torx_ctx_t *ctx;
    torx_coll_t *c;
    TASK_CHECK(torx_init(&attr, &ctx) == TORX_OK, "%s", torx_last_error());
    TASK_CHECK(torx_coll_init(ctx, NULL, &c) == TORX_OK, "%s", torx_last_error());
    const torx_map_t *map = torx_ctx_map(ctx);
    int tasks[1024], n = 0, me = -1;
    for (int r = 0; r < boot->size && n < 1024; r++) {
        const torx_coord_t k = torx_map_coord(map, r);
        if (job->xhi == 0 || (k.x >= job->xlo && k.x < job->xhi)) {
            if (r == boot->rank)
                me = n;
            tasks[n++] = r;
        }
    }
    torx_coll_group_t *g = NULL;
    if (me >= 0) {
        TASK_CHECK(torx_coll_group_create(c, 7, n, job->xhi ? tasks : NULL, me, &g) == TORX_OK,
                   "%s", torx_last_error());
        TASK_CHECK(g->box, "the group is not a box");
        if (me == 0) {
            st->routes = torxc_routes(&g->box_geo);
            st->nmembers = n;
        }
        for (int si = 0; si < job->nsizes; si++) {
            const size_t len = job->sizes[si];
            unsigned char *buf = malloc(len + 1);
            TASK_CHECK(buf != NULL, "malloc");
            for (int root = 0;; root = root + job->root_step < n ? root + job->root_step : n - 1) {
                for (int call = 0; call < (job->repeat ? job->repeat : 1); call++) {
                    for (size_t i = 0; i < len; i++)
                        buf[i] = me == root ? byte_at(root, si, i) : 0xee;
                    buf[len] = 0x77;
                    const double t0 = torx_wtime(ctx);
                    TASK_CHECK(torx_coll_bcast(g, TORX_COLL_ALG_TORUS, buf, len, root) == TORX_OK,
                               "bcast %zu from %d: %s", len, root, torx_last_error());
                    /* On a modelled machine a call takes microseconds to a
                     * millisecond; a lost wake-up sleeps a whole 20 ms
                     * (co mode's longest sleep: docs/message-layer.md#waiting). */
                    const double took = torx_wtime(ctx) - t0;
                    TASK_CHECK(!(torx_ctx_device(ctx)->caps & TORXP_CAP_MODELLED) || took < 5e-3,
                               "bcast %zu from %d took %.1f ms of modelled time", len, root,
                               took * 1e3);
                    for (size_t i = 0; i < len; i++)
                        TASK_CHECK(buf[i] == byte_at(root, si, i),
                                   "bcast %zu from %d: byte %zu is %#x", len, root, i, buf[i]);
                    TASK_CHECK(buf[len] == 0x77, "bcast wrote past the buffer");
                    if (job->far && root == 0 && si == job->nsizes - 1) {
                        if (me == 0)
                            st->root_out = c->bc_root_out_s;
                        if (me == st->far_rank)
                            st->far_first = c->bc_first_s;
                    }
                }
                if (root == n - 1)
                    break;
            }
            free(buf);
        }
        torx_coll_group_free(g);
    }
    torx_coll_finalize(c);
    TASK_CHECK(torx_finalize(ctx) == TORX_OK, "%s", torx_last_error());
    return 0;
}

static void map_stamps(void)
{
    st = mmap(NULL, sizeof *st, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(st, MAP_FAILED);
    memset(st, 0, sizeof *st);
}

static void clear_env(void)
{
    static const char *const vars[] = {"TORX_MODE",
                                       "TORX_CHAOS",
                                       "TORX_MAPPING",
                                       "TORX_TORUS",
                                       "TORX_COLL",
                                       "TORX_COLL_BCAST",
                                       "TORX_DEVICE",
                                       "TORX_CORES_PER_NODE",
                                       "TORX_SIM_MESH",
                                       "TORX_SIM_SEED",
                                       NULL};
    for (int i = 0; vars[i]; i++)
        unsetenv(vars[i]);
}

static void run_bc(const char *torus, const char *mode, int ntasks, bc_job_t *job)
{
    setenv("TORX_TORUS", torus, 1);
    if (mode)
        setenv("TORX_MODE", mode, 1);
    else
        unsetenv("TORX_MODE");
    if (mode && !strcmp(mode, "vn"))
        setenv("TORX_CORES_PER_NODE", "2", 1);
    else
        unsetenv("TORX_CORES_PER_NODE");
    map_stamps();
    RUN_JOB(ntasks, bc_task, job);
    munmap(st, sizeof *st);
}

static const size_t shm_sizes[] = {1, 1343, 5000, 70000, 300000};

START_TEST(bcast_shm_tori)
{
    clear_env();
    bc_job_t job = {.sizes = shm_sizes, .nsizes = 5, .root_step = 1};
    run_bc("2x2x2", NULL, 8, &job); /* three rings of 2: 6 routes */
    run_bc("4x2x1", NULL, 8, &job);
    run_bc("8x1x1", NULL, 8, &job);
    run_bc("3x2x1", "co", 6, &job); /* 4 routes, 2 a core */
    run_bc("7x1x1", "co", 7, &job);
}
END_TEST

START_TEST(bcast_shm_runs_and_vn)
{
    clear_env();
    bc_job_t job = {.sizes = shm_sizes, .nsizes = 5, .root_step = 1};
    /* x in 1..2 of 3: a run of 2 by a ring of 3 (2 routes; co splits them) */
    job.xlo = 1, job.xhi = 3;
    run_bc("3x3x1", NULL, 9, &job);
    /* x in 0..2 of 4: a run of 3 by a ring of 2, in co mode (a route, split) */
    job.xlo = 0, job.xhi = 3;
    run_bc("4x2x1", "co", 8, &job);
    /* vn: two t-planes of a 2x2 torus */
    job.xlo = 0, job.xhi = 0;
    run_bc("2x2x1", "vn", 8, &job);
    clear_env();
}
END_TEST

/* Not in sanitized builds: SimGrid switches its actors' stacks without
 * telling the sanitizers. */
#if defined(TORX_HAVE_SIMGRID) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
static void sim_env(const char *mesh)
{
    clear_env();
    setenv("TORX_DEVICE", "sim", 1);
    setenv("TORX_SIM_MACHINE", "bgl", 1);
    setenv("TORX_SIM_MESH", mesh, 1);
    setenv("TORX_SIM_SEED", "1", 1);
}

static const size_t sim_sizes[] = {1, 3000, 70000};

START_TEST(bcast_sim)
{
    /* a sample of roots (every root: the shm cases and the plan checker) */
    bc_job_t job = {.sizes = sim_sizes, .nsizes = 3, .root_step = 4};
    sim_env("1"); /* meshes: every dimension a run */
    run_bc("3x3x3", NULL, 27, &job);
    job.root_step = 5;
    run_bc("2x2x3", "vn", 24, &job);
    run_bc("4x3x2", "co", 24, &job);
    /* Fig 5(b)'s short broadcasts, back to back from one root: the root
     * waits for its thread's part (torx_cojoin) after every call */
    static const size_t short_sizes[] = {256, 1024};
    bc_job_t back = {.sizes = short_sizes, .nsizes = 2, .root_step = 31, .repeat = 4};
    run_bc("4x4x2", "co", 32, &back);
    sim_env("0"); /* tori: rings */
    job.root_step = 21;
    run_bc("4x4x4", "co", 64, &job);
    job.root_step = 9;
    run_bc("4x4x4", NULL, 64, &job);
    job.root_step = 3;
    run_bc("5x2x1", NULL, 10, &job);
    /* a sub-box of a torus: x in 1..3 of 5, a run, by rings of 3 and 2 */
    job.xlo = 1, job.xhi = 4;
    run_bc("5x3x2", NULL, 30, &job);
    clear_env();
}
END_TEST

/* The pipeline: on a message of many packets, the member farthest from the
 * root places its first packet before the root has injected its last. */
static void overlap(const char *torus, const char *mesh, const char *mode, int ntasks, int far,
                    int routes, size_t bytes)
{
    const size_t big[] = {bytes};
    bc_job_t job = {.sizes = big, .nsizes = 1, .root_step = ntasks, .far = 1};
    sim_env(mesh);
    setenv("TORX_TORUS", torus, 1);
    if (mode)
        setenv("TORX_MODE", mode, 1);
    map_stamps();
    st->far_rank = far;
    RUN_JOB(ntasks, bc_task, &job);
    printf("pipeline %s%s %s: %d routes; far corner (rank %d) first packet at %.1f us, root's "
           "last injected at %.1f us\n",
           torus, mesh[0] == '1' ? " mesh" : " torus", mode ? mode : "heater", st->routes, far,
           st->far_first * 1e6, st->root_out * 1e6);
    ck_assert_int_eq(st->routes, routes);
    ck_assert(st->far_first > 0 && st->root_out > 0);
    /* one packet: the root is done before anything arrives (the check
     * tells a pipeline from none) */
    if (bytes <= 224)
        ck_assert(st->far_first > st->root_out);
    else
        ck_assert(st->far_first < st->root_out);
    munmap(st, sizeof *st);
    clear_env();
}

START_TEST(pipeline_overlaps_on_sim)
{
    overlap("4x4x4", "1", NULL, 64, 63, 3, 128 * 1024); /* (3,3,3): 586 packets */
    overlap("4x4x4", "0", NULL, 64, 42, 6, 128 * 1024); /* (2,2,2) */
    overlap("4x4x4", "0", NULL, 64, 42, 6, 200);
}
END_TEST
#endif

int main(void)
{
    Suite *s = suite_create("coll_routes");
    TCase *plan = tcase_create("plan");
    tcase_set_timeout(plan, 600);
    tcase_add_test(plan, plan_disjoint_and_exactly_once);
    tcase_add_test(plan, route_counts);
    tcase_add_test(plan, checker_rejects_the_old_routes);
    tcase_add_test(plan, forwards_sample_is_the_maximum);
    suite_add_tcase(s, plan);
    TCase *shm = tcase_create("shm");
    tcase_set_timeout(shm, 600);
    tcase_add_test(shm, bcast_shm_tori);
    tcase_add_test(shm, bcast_shm_runs_and_vn);
    suite_add_tcase(s, shm);
#if defined(TORX_HAVE_SIMGRID) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    TCase *sim = tcase_create("sim");
    tcase_set_timeout(sim, 900);
    tcase_add_test(sim, bcast_sim);
    tcase_add_test(sim, pipeline_overlaps_on_sim);
    suite_add_tcase(s, sim);
#endif
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
