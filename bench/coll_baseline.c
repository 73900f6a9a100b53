/* coll_baseline: MPICH 4.0.2's default collective algorithms over torx's
 * message layer. See coll_baseline.h for what is MPICH's and what is not. */
#include "coll_baseline.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ----------------------------------------------------------------- */

static char cb_err[256];

const char *cb_last_error(void)
{
    return cb_err;
}

static torx_status_t fail(torx_status_t st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cb_err, sizeof cb_err, fmt, ap);
    va_end(ap);
    return st;
}

/* ---- tagged point-to-point over the message layer ----------------------------- */

/* What every message carries: which group, which of its calls, which step,
 * and the sender's index in the group. */
typedef struct cb_hdr {
    uint32_t gid, seq;
    uint32_t tag;
    int32_t src;
} cb_hdr;
_Static_assert(sizeof(cb_hdr) <= TORX_MSG_MAX_HDR, "header fits the message layer's");

typedef struct cb_req cb_req;
typedef struct cb_unexp cb_unexp;

struct cb_req {
    cb_ctx *c;
    cb_hdr key; /* receives: the message to match */
    void *buf;
    size_t len, received;
    volatile int done;
    torx_status_t status;
    torx_msg_t msg; /* sends */
    cb_req *next;   /* posted receives, in posting order */
};

/* A message that came before its receive was posted. */
struct cb_unexp {
    cb_hdr h;
    size_t len;
    char *data;             /* eager data, or NULL while deferred */
    torx_deferred_t *defer; /* rendezvous data still at the sender */
    int complete;           /* data all here */
    torx_status_t status;
    cb_req *req; /* matched while its data was arriving */
    cb_unexp *next;
};

struct cb_ctx {
    torx_ctx_t *ctx;
    int handler;
    int spin; /* poll before sleeping: every device but one that simulates */
    cb_req *posted, **posted_tail;
    cb_unexp *unexp, **unexp_tail;
};

struct cb_group {
    cb_ctx *c;
    uint32_t id, seq;
    int n, me, pof2;
    int *tasks; /* NULL: the job in rank order */
};

static int hdr_match(const cb_hdr *a, const cb_hdr *b)
{
    return a->gid == b->gid && a->seq == b->seq && a->tag == b->tag && a->src == b->src;
}

static void req_finish(cb_req *r, torx_status_t st, size_t n)
{
    r->status = st;
    r->received = n;
    r->done = 1;
}

static void recv_done(torx_ctx_t *ctx, void *arg, torx_status_t st, size_t n)
{
    (void)ctx;
    req_finish(arg, st, n);
}

static void send_done(torx_ctx_t *ctx, torx_msg_t *msg, void *arg)
{
    (void)ctx;
    req_finish(arg, torx_msg_status(msg), 0);
}

/* Copies a complete unexpected message into its receive and frees it. */
static void unexp_deliver(cb_unexp *u, cb_req *r)
{
    torx_status_t st = u->status;
    size_t n = u->len;
    if (st == TORX_OK && n > r->len)
        st = TORX_ERR_TRUNCATE, n = r->len;
    if (n)
        memcpy(r->buf, u->data, n);
    free(u->data);
    free(u);
    req_finish(r, st, n);
}

static void unexp_done(torx_ctx_t *ctx, void *arg, torx_status_t st, size_t n)
{
    (void)ctx, (void)n;
    cb_unexp *u = arg;
    u->status = st;
    u->complete = 1;
    if (u->req)
        unexp_deliver(u, u->req);
}

static void on_msg(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info, torx_recv_t *recv)
{
    (void)ctx;
    cb_ctx *c = harg;
    cb_hdr h = {0};
    memcpy(&h, info->hdr, info->hdr_len < sizeof h ? info->hdr_len : sizeof h);
    for (cb_req **p = &c->posted; *p; p = &(*p)->next) {
        cb_req *r = *p;
        if (!hdr_match(&r->key, &h))
            continue;
        *p = r->next;
        if (!*p)
            c->posted_tail = p;
        if (info->data) {
            /* All here (as the netmod does: no later callback). */
            const size_t n = info->data_len < r->len ? info->data_len : r->len;
            if (n)
                memcpy(r->buf, info->data, n);
            req_finish(r, info->data_len > r->len ? TORX_ERR_TRUNCATE : TORX_OK, n);
            return;
        }
        *recv = (torx_recv_t){.buf = r->buf, .len = r->len, .done = recv_done, .arg = r};
        return;
    }
    cb_unexp *u = calloc(1, sizeof *u);
    if (u)
        u->data = info->deferrable ? NULL : malloc(info->data_len ? info->data_len : 1);
    if (!u || (!info->deferrable && !u->data)) {
        /* Nothing to keep it in: dropped, and the matching receive never
         * completes; say so. */
        fprintf(stderr, "coll_baseline: out of memory for an unexpected message\n");
        free(u);
        return;
    }
    u->h = h;
    u->len = info->data_len;
    *c->unexp_tail = u;
    c->unexp_tail = &u->next;
    if (info->data) {
        if (u->len)
            memcpy(u->data, info->data, u->len);
        u->complete = 1;
        u->status = TORX_OK;
    } else if (info->deferrable)
        recv->defer = &u->defer;
    else
        *recv = (torx_recv_t){.buf = u->data, .len = u->len, .done = unexp_done, .arg = u};
}

static torx_status_t post_recv(cb_ctx *c, cb_req *r)
{
    r->next = NULL;
    for (cb_unexp **p = &c->unexp; *p; p = &(*p)->next) {
        cb_unexp *u = *p;
        if (!hdr_match(&u->h, &r->key))
            continue;
        *p = u->next;
        if (!*p)
            c->unexp_tail = p;
        if (u->defer) {
            torx_recv_t rv = {.buf = r->buf, .len = r->len, .done = recv_done, .arg = r};
            torx_status_t st = torx_accept(c->ctx, u->defer, &rv);
            free(u);
            return st;
        }
        if (u->complete)
            unexp_deliver(u, r);
        else
            u->req = r;
        return TORX_OK;
    }
    *c->posted_tail = r;
    c->posted_tail = &r->next;
    return TORX_OK;
}

static int task_of(const cb_group *g, int i)
{
    return g->tasks ? g->tasks[i] : i;
}

static torx_status_t irecv(cb_group *g, cb_req *r, void *buf, size_t len, int src, uint32_t tag)
{
    *r = (cb_req){.c = g->c, .buf = buf, .len = len};
    r->key = (cb_hdr){.gid = g->id, .seq = g->seq, .tag = tag, .src = src};
    return post_recv(g->c, r);
}

static torx_status_t isend(cb_group *g, cb_req *r, const void *buf, size_t len, int dst,
                           uint32_t tag)
{
    *r = (cb_req){.c = g->c};
    const cb_hdr h = {.gid = g->id, .seq = g->seq, .tag = tag, .src = g->me};
    /* What fits a packet or one staged piece goes at once, complete, as
     * torx's MPICH netmod sends it (torx_send_inject). */
    torx_status_t st = torx_send_inject(g->c->ctx, task_of(g, dst), g->c->handler, &h, sizeof h,
                                        len ? buf : NULL, len);
    if (st == TORX_OK) {
        r->done = 1;
        r->status = TORX_OK;
        return TORX_OK;
    }
    if (st != TORX_AGAIN)
        return fail(st, "torx_send_inject to member %d: %s", dst, torx_last_error());
    st = torx_send(g->c->ctx, &r->msg, task_of(g, dst), g->c->handler, &h, sizeof h,
                   len ? buf : NULL, len, TORX_PROTO_AUTO, send_done, r);
    if (st != TORX_OK)
        return fail(st, "torx_send to member %d: %s", dst, torx_last_error());
    return TORX_OK;
}

/* MPICH's waits poll its progress engine, which over torx is one
 * torx_advance a poke; so do these, for up to CB_SPIN idle polls, before
 * torx_wait may sleep (an oversubscribed job then lets the others run). On
 * a device that simulates, torx_wait sleeps exactly until the next event,
 * which is what polling would find, at no wall-clock cost. */
enum { CB_SPIN = 20000 };

static torx_status_t waitall(cb_group *g, cb_req *r, int n)
{
    cb_ctx *c = g->c;
    for (int i = 0; i < n; i++) {
        for (int idle = 0; !r[i].done;) {
            if (c->spin && idle < CB_SPIN) {
                const int ev = torx_advance(c->ctx);
                if (ev < 0)
                    return fail((torx_status_t)ev, "torx_advance: %s", torx_last_error());
                idle = ev ? 0 : idle + 1;
                continue;
            }
            /* on this request's own flag, not one every callback sets: the
             * wait returns once this request is done, and not after each
             * other message (docs/message-layer.md#waiting) */
            torx_status_t st = torx_wait(c->ctx, &r[i].done);
            if (st != TORX_OK)
                return fail(st, "torx_wait: %s", torx_last_error());
        }
    }
    for (int i = 0; i < n; i++)
        if (r[i].status != TORX_OK)
            return fail(r[i].status, "a message of call %u step %u: %s", g->seq, r[i].key.tag,
                        r[i].status == TORX_ERR_TRUNCATE ? "longer than its receive (members "
                                                           "disagree on a size)"
                                                         : torx_status_str(r[i].status));
    return TORX_OK;
}

static torx_status_t send_blk(cb_group *g, const void *buf, size_t len, int dst, uint32_t tag)
{
    cb_req r;
    torx_status_t st = isend(g, &r, buf, len, dst, tag);
    return st != TORX_OK ? st : waitall(g, &r, 1);
}

static torx_status_t recv_blk(cb_group *g, void *buf, size_t len, int src, uint32_t tag,
                              size_t *got)
{
    cb_req r;
    torx_status_t st = irecv(g, &r, buf, len, src, tag);
    if (st == TORX_OK)
        st = waitall(g, &r, 1);
    if (got)
        *got = r.received;
    return st;
}

/* MPIC_Sendrecv: the receive posted first, then the send, then both. */
static torx_status_t sendrecv(cb_group *g, const void *sbuf, size_t slen, int dst, void *rbuf,
                              size_t rlen, int src, uint32_t tag, size_t *got)
{
    cb_req r[2];
    torx_status_t st = irecv(g, &r[0], rbuf, rlen, src, tag);
    if (st == TORX_OK)
        st = isend(g, &r[1], sbuf, slen, dst, tag);
    if (st == TORX_OK)
        st = waitall(g, r, 2);
    if (got)
        *got = r[0].received;
    return st;
}

/* ---- context and groups --------------------------------------------------------- */

cb_ctx *cb_init(torx_ctx_t *ctx, int handler)
{
    cb_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        fail(TORX_ERR_NOMEM, "out of memory");
        return NULL;
    }
    c->ctx = ctx;
    c->handler = handler;
    c->spin = strcmp(torx_pkt_device_name(torx_ctx_device(ctx)), "sim") != 0;
    c->posted_tail = &c->posted;
    c->unexp_tail = &c->unexp;
    if (torx_register(ctx, handler, on_msg, c) != TORX_OK) {
        fail(TORX_ERR_INVAL, "handler id %d: %s", handler, torx_last_error());
        free(c);
        return NULL;
    }
    return c;
}

void cb_finalize(cb_ctx *c)
{
    if (!c)
        return;
    torx_register(c->ctx, c->handler, NULL, NULL);
    for (cb_unexp *u = c->unexp, *next; u; u = next) {
        next = u->next;
        if (u->defer) {
            /* Its sender waits for it to be taken: discard it. */
            torx_recv_t none = {0};
            torx_accept(c->ctx, u->defer, &none);
        }
        free(u->data);
        free(u);
    }
    free(c);
}

cb_group *cb_group_create(cb_ctx *c, uint32_t id, int n, const int *tasks, int me)
{
    const int size = torx_size(c->ctx);
    if (n < 1 || me < 0 || me >= n || (!tasks && n != size)) {
        fail(TORX_ERR_INVAL, "group of %d tasks, me %d (job of %d)", n, me, size);
        return NULL;
    }
    if ((tasks ? tasks[me] : me) != torx_rank(c->ctx)) {
        fail(TORX_ERR_INVAL, "member %d of the group is not this task", me);
        return NULL;
    }
    /* Members that are ranks 0..n-1 in order (the job, or a split without
     * its last tasks) need no table: under torx-sim, where every task of a
     * job is one process's, a table each took 4 bytes a member per task. */
    int identity = 1;
    for (int i = 0; tasks && identity && i < n; i++)
        identity = tasks[i] == i;
    if (identity)
        tasks = NULL;
    cb_group *g = calloc(1, sizeof *g);
    if (!g || (tasks && !(g->tasks = malloc((size_t)n * sizeof *tasks)))) {
        free(g);
        fail(TORX_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (tasks) {
        for (int i = 0; i < n; i++)
            if (tasks[i] < 0 || tasks[i] >= size) {
                free(g->tasks);
                free(g);
                fail(TORX_ERR_INVAL, "member %d is task %d, outside the job", i, tasks[i]);
                return NULL;
            }
        memcpy(g->tasks, tasks, (size_t)n * sizeof *tasks);
    }
    g->c = c;
    g->id = id;
    g->n = n;
    g->me = me;
    g->pof2 = 1;
    while (g->pof2 * 2 <= n)
        g->pof2 *= 2;
    return g;
}

void cb_group_free(cb_group *g)
{
    if (g)
        free(g->tasks);
    free(g);
}

int cb_group_size(const cb_group *g)
{
    return g->n;
}

int cb_group_rank(const cb_group *g)
{
    return g->me;
}

/* ---- names ------------------------------------------------------------------------ */

static const char *const bcast_names[] = {"auto", "binomial", "scatter_rdb", "scatter_ring"};
static const char *const allreduce_names[] = {"auto", "rd", "rsag"};
static const char *const alltoall_names[] = {"auto", "bruck", "scattered", "pairwise"};
static const char *const barrier_names[] = {"auto", "dissemination"};
#define NNAMES(a) ((int)(sizeof a / sizeof a[0]))

static const char *name_of(const char *const *names, int n, int a)
{
    return a >= 0 && a < n ? names[a] : "unknown";
}

static int parse_name(const char *const *names, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i]))
            return i;
    return -1;
}

const char *cb_bcast_name(cb_bcast_alg a)
{
    return name_of(bcast_names, NNAMES(bcast_names), a);
}
const char *cb_allreduce_name(cb_allreduce_alg a)
{
    return name_of(allreduce_names, NNAMES(allreduce_names), a);
}
const char *cb_alltoall_name(cb_alltoall_alg a)
{
    return name_of(alltoall_names, NNAMES(alltoall_names), a);
}
const char *cb_barrier_name(cb_barrier_alg a)
{
    return name_of(barrier_names, NNAMES(barrier_names), a);
}
int cb_bcast_parse(const char *s)
{
    return parse_name(bcast_names, NNAMES(bcast_names), s);
}
int cb_allreduce_parse(const char *s)
{
    return parse_name(allreduce_names, NNAMES(allreduce_names), s);
}
int cb_alltoall_parse(const char *s)
{
    return parse_name(alltoall_names, NNAMES(alltoall_names), s);
}
int cb_barrier_parse(const char *s)
{
    return parse_name(barrier_names, NNAMES(barrier_names), s);
}

/* ---- MPICH 4.0.2's selection (maint/tuning/coll/mpir/generic.json) ---------------- */

cb_bcast_alg cb_bcast_choose(const cb_group *g, size_t bytes)
{
    if (g->n < 8 || bytes <= 12288)
        return CB_BCAST_BINOMIAL;
    if (g->pof2 == g->n && bytes <= 524288)
        return CB_BCAST_SCATTER_RDB;
    return CB_BCAST_SCATTER_RING;
}

cb_allreduce_alg cb_allreduce_choose(const cb_group *g, size_t count, torx_coll_dtype_t dtype)
{
    if (count * cb_dtype_size(dtype) <= 8 || count < (size_t)g->pof2)
        return CB_ALLREDUCE_RD;
    return CB_ALLREDUCE_RSAG;
}

cb_alltoall_alg cb_alltoall_choose(const cb_group *g, size_t bytes)
{
    if (g->n >= 8 && bytes <= 256)
        return CB_ALLTOALL_BRUCK;
    return bytes <= 32768 ? CB_ALLTOALL_SCATTERED : CB_ALLTOALL_PAIRWISE;
}

/* ---- barrier: dissemination --------------------------------------------------------- */

/* Round k: a zero-byte message to me + 2^k, one from me - 2^k. */
torx_status_t cb_barrier(cb_group *g, cb_barrier_alg alg)
{
    if (alg != CB_BARRIER_AUTO && alg != CB_BARRIER_DISSEMINATION)
        return fail(TORX_ERR_INVAL, "barrier: unknown algorithm %d", (int)alg);
    g->seq++;
    const int n = g->n, me = g->me;
    uint32_t tag = 0;
    for (int mask = 1; mask < n; mask <<= 1, tag++) {
        torx_status_t st =
            sendrecv(g, NULL, 0, (me + mask) % n, NULL, 0, (me - mask + n) % n, tag, NULL);
        if (st != TORX_OK)
            return st;
    }
    return TORX_OK;
}

/* ---- bcast ------------------------------------------------------------------------------ */

/* Binomial tree from root: receive from the parent (the member that
 * differs in the lowest set bit of the rank relative to root), then send
 * to the children, the largest subtree first, each send finished before
 * the next (MPIC_Send). */
static torx_status_t bcast_binomial(cb_group *g, char *buf, size_t bytes, int root)
{
    const int n = g->n, rel = (g->me - root + n) % n;
    torx_status_t st;
    int mask = 1;
    for (; mask < n; mask <<= 1)
        if (rel & mask) {
            size_t got = 0;
            if ((st = recv_blk(g, buf, bytes, (g->me - mask + n) % n, 0, &got)) != TORX_OK)
                return st;
            if (got != bytes)
                return fail(TORX_ERR_TRUNCATE, "bcast: %zu bytes from the parent, %zu expected",
                            got, bytes);
            break;
        }
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (rel + mask < n && (st = send_blk(g, buf, bytes, (g->me + mask) % n, 0)) != TORX_OK)
            return st;
    return TORX_OK;
}

/* The binomial scatter that starts both long bcasts: the buffer in n
 * pieces of ceil(bytes / n), piece i for the member i after root, each
 * member's piece at its own offset. A subtree's pieces go in one message;
 * pieces past the end are empty and not sent. */
static torx_status_t bcast_scatter(cb_group *g, char *buf, size_t bytes, int root, size_t piece)
{
    const int n = g->n, rel = (g->me - root + n) % n;
    size_t have = g->me == root ? bytes : 0;
    torx_status_t st;
    int mask = 1;
    for (; mask < n; mask <<= 1)
        if (rel & mask) {
            const size_t off = (size_t)rel * piece;
            if (off < bytes && (st = recv_blk(g, buf + off, bytes - off, (g->me - mask + n) % n, 0,
                                              &have)) != TORX_OK)
                return st;
            break;
        }
    for (mask >>= 1; mask > 0; mask >>= 1) {
        const size_t keep = piece * (size_t)mask;
        if (rel + mask < n && have > keep) {
            const size_t send = have - keep;
            if ((st = send_blk(g, buf + piece * (size_t)(rel + mask), send, (g->me + mask) % n,
                               0)) != TORX_OK)
                return st;
            have -= send;
        }
    }
    return TORX_OK;
}

static size_t piece_len(size_t bytes, size_t piece, int rel)
{
    const size_t off = piece * (size_t)rel;
    return off >= bytes ? 0 : (bytes - off < piece ? bytes - off : piece);
}

/* Scatter, then a recursive-doubling allgather: in step i each member
 * swaps the pieces of its 2^i-member subtree with the partner subtree's
 * (relative rank XOR 2^i). Power-of-two groups only, where MPICH's auto
 * takes it. */
static torx_status_t bcast_scatter_rdb(cb_group *g, char *buf, size_t bytes, int root)
{
    const int n = g->n, rel = (g->me - root + n) % n;
    if (g->pof2 != n)
        return fail(TORX_ERR_INVAL,
                    "bcast scatter_rdb: %d members is not a power of two "
                    "(MPICH's auto takes it on powers of two only)",
                    n);
    const size_t piece = (bytes + (size_t)n - 1) / (size_t)n;
    torx_status_t st = bcast_scatter(g, buf, bytes, root, piece);
    if (st != TORX_OK)
        return st;
    size_t have = piece_len(bytes, piece, rel);
    for (int mask = 1, i = 0; mask < n; mask <<= 1, i++) {
        const int rdst = rel ^ mask;
        const size_t my_off = (size_t)(rel >> i << i) * piece;
        const size_t dst_off = (size_t)(rdst >> i << i) * piece;
        const size_t my = my_off < bytes ? my_off : bytes, dst = dst_off < bytes ? dst_off : bytes;
        size_t got = 0;
        if ((st = sendrecv(g, buf + my, have, (rdst + root) % n, buf + dst, bytes - dst,
                           (rdst + root) % n, 1 + (uint32_t)i, &got)) != TORX_OK)
            return st;
        have += got;
    }
    if (have != bytes)
        return fail(TORX_ERR_TRUNCATE, "bcast scatter_rdb: %zu bytes gathered of %zu", have, bytes);
    return TORX_OK;
}

/* Scatter, then a ring allgather: n - 1 steps, each passing one piece to
 * the right neighbour and taking one from the left. */
static torx_status_t bcast_scatter_ring(cb_group *g, char *buf, size_t bytes, int root)
{
    const int n = g->n, me = g->me;
    const size_t piece = (bytes + (size_t)n - 1) / (size_t)n;
    torx_status_t st = bcast_scatter(g, buf, bytes, root, piece);
    if (st != TORX_OK)
        return st;
    const int left = (me - 1 + n) % n, right = (me + 1) % n;
    int j = me, jnext = left;
    for (int i = 1; i < n; i++) {
        const int rel_j = (j - root + n) % n, rel_jnext = (jnext - root + n) % n;
        const size_t slen = piece_len(bytes, piece, rel_j),
                     rlen = piece_len(bytes, piece, rel_jnext);
        const size_t soff = slen ? piece * (size_t)rel_j : 0;
        const size_t roff = rlen ? piece * (size_t)rel_jnext : 0;
        size_t got = 0;
        if ((st = sendrecv(g, buf + soff, slen, right, buf + roff, rlen, left, (uint32_t)i,
                           &got)) != TORX_OK)
            return st;
        if (got != rlen)
            return fail(TORX_ERR_TRUNCATE, "bcast scatter_ring: %zu bytes of %zu in step %d", got,
                        rlen, i);
        j = jnext;
        jnext = (jnext - 1 + n) % n;
    }
    return TORX_OK;
}

torx_status_t cb_bcast(cb_group *g, void *buf, size_t bytes, int root, cb_bcast_alg alg)
{
    if (root < 0 || root >= g->n)
        return fail(TORX_ERR_INVAL, "bcast: root %d outside the group of %d", root, g->n);
    if (bytes && !buf)
        return fail(TORX_ERR_INVAL, "bcast: NULL buffer");
    if (alg == CB_BCAST_AUTO)
        alg = cb_bcast_choose(g, bytes);
    g->seq++;
    if (g->n == 1 || bytes == 0)
        return TORX_OK;
    switch (alg) {
    case CB_BCAST_BINOMIAL:
        return bcast_binomial(g, buf, bytes, root);
    case CB_BCAST_SCATTER_RDB:
        return bcast_scatter_rdb(g, buf, bytes, root);
    case CB_BCAST_SCATTER_RING:
        return bcast_scatter_ring(g, buf, bytes, root);
    default:
        return fail(TORX_ERR_INVAL, "bcast: unknown algorithm %d", (int)alg);
    }
}

/* ---- local reductions --------------------------------------------------------------------- */

size_t cb_dtype_size(torx_coll_dtype_t dtype)
{
    switch (dtype) {
    case TORX_COLL_S32:
    case TORX_COLL_U32:
    case TORX_COLL_FLOAT:
        return 4;
    case TORX_COLL_S64:
    case TORX_COLL_U64:
    case TORX_COLL_DOUBLE:
        return 8;
    default:
        return 0;
    }
}

#define CB_ARITH(T)                                                                                \
    do {                                                                                           \
        const T *a = in;                                                                           \
        T *b = out;                                                                                \
        switch (op) {                                                                              \
        case TORX_COLL_SUM:                                                                        \
            for (size_t i = 0; i < count; i++)                                                     \
                b[i] = a[i] + b[i];                                                                \
            return TORX_OK;                                                                        \
        case TORX_COLL_MIN:                                                                        \
            for (size_t i = 0; i < count; i++)                                                     \
                b[i] = a[i] < b[i] ? a[i] : b[i];                                                  \
            return TORX_OK;                                                                        \
        case TORX_COLL_MAX:                                                                        \
            for (size_t i = 0; i < count; i++)                                                     \
                b[i] = a[i] > b[i] ? a[i] : b[i];                                                  \
            return TORX_OK;                                                                        \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

#define CB_BITS(T)                                                                                 \
    do {                                                                                           \
        const T *a = in;                                                                           \
        T *b = out;                                                                                \
        switch (op) {                                                                              \
        case TORX_COLL_BAND:                                                                       \
            for (size_t i = 0; i < count; i++)                                                     \
                b[i] = a[i] & b[i];                                                                \
            return TORX_OK;                                                                        \
        case TORX_COLL_BOR:                                                                        \
            for (size_t i = 0; i < count; i++)                                                     \
                b[i] = a[i] | b[i];                                                                \
            return TORX_OK;                                                                        \
        case TORX_COLL_BXOR:                                                                       \
            for (size_t i = 0; i < count; i++)                                                     \
                b[i] = a[i] ^ b[i];                                                                \
            return TORX_OK;                                                                        \
        case TORX_COLL_LAND:                                                                       \
            for (size_t i = 0; i < count; i++)                                                     \
                b[i] = a[i] && b[i];                                                               \
            return TORX_OK;                                                                        \
        case TORX_COLL_LOR:                                                                        \
            for (size_t i = 0; i < count; i++)                                                     \
                b[i] = a[i] || b[i];                                                               \
            return TORX_OK;                                                                        \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

/* Unsigned arithmetic for the signed sums: wraparound is then defined,
 * the same on every member and in the reference. */
torx_status_t cb_reduce_local(const void *in, void *out, size_t count, torx_coll_dtype_t dtype,
                              torx_coll_op_t op)
{
    switch (dtype) {
    case TORX_COLL_S32:
        if (op == TORX_COLL_SUM)
            dtype = TORX_COLL_U32;
        else {
            CB_ARITH(int32_t);
            CB_BITS(int32_t);
        }
        /* fall through */
    case TORX_COLL_U32:
        CB_ARITH(uint32_t);
        CB_BITS(uint32_t);
        break;
    case TORX_COLL_S64:
        if (op == TORX_COLL_SUM)
            dtype = TORX_COLL_U64;
        else {
            CB_ARITH(int64_t);
            CB_BITS(int64_t);
        }
        /* fall through */
    case TORX_COLL_U64:
        CB_ARITH(uint64_t);
        CB_BITS(uint64_t);
        break;
    case TORX_COLL_FLOAT:
        CB_ARITH(float);
        break;
    case TORX_COLL_DOUBLE:
        CB_ARITH(double);
        break;
    default:
        break;
    }
    return fail(TORX_ERR_INVAL, "no reduction %d on type %d", (int)op, (int)dtype);
}

/* ---- allreduce ------------------------------------------------------------------------------ */

/* The fold of a group that is not a power of two: among the first 2 * rem
 * members (rem = n - pof2) each even one sends its vector to the odd one
 * after it, which reduces it and carries on as member me / 2 of a
 * power-of-two group; the rest are me - rem. Returns the new rank, -1 for
 * a member that sits out. */
static torx_status_t fold_in(cb_group *g, char *out, char *tmp, size_t len, size_t count,
                             torx_coll_dtype_t dt, torx_coll_op_t op, int *newrank)
{
    const int rem = g->n - g->pof2, me = g->me;
    torx_status_t st = TORX_OK;
    if (me >= 2 * rem) {
        *newrank = me - rem;
    } else if (me % 2 == 0) {
        st = send_blk(g, out, len, me + 1, 0);
        *newrank = -1;
    } else {
        size_t got = 0;
        st = recv_blk(g, tmp, len, me - 1, 0, &got);
        if (st == TORX_OK && got != len)
            st = fail(TORX_ERR_TRUNCATE, "allreduce: %zu bytes from member %d, %zu expected", got,
                      me - 1, len);
        if (st == TORX_OK)
            st = cb_reduce_local(tmp, out, count, dt, op);
        *newrank = me / 2;
    }
    return st;
}

/* The members that sat out get the result from their odd neighbour. */
static torx_status_t fold_out(cb_group *g, char *out, size_t len, uint32_t tag)
{
    const int rem = g->n - g->pof2, me = g->me;
    if (me >= 2 * rem)
        return TORX_OK;
    if (me % 2)
        return send_blk(g, out, len, me - 1, tag);
    size_t got = 0;
    torx_status_t st = recv_blk(g, out, len, me + 1, tag, &got);
    if (st == TORX_OK && got != len)
        st = fail(TORX_ERR_TRUNCATE, "allreduce: %zu bytes of the result, %zu expected", got, len);
    return st;
}

static int real_rank(const cb_group *g, int newrank)
{
    const int rem = g->n - g->pof2;
    return newrank < rem ? newrank * 2 + 1 : newrank + rem;
}

/* Recursive doubling: log2(pof2) exchanges of the whole vector with the
 * partner newrank XOR 2^k, each followed by a reduction. */
static torx_status_t allreduce_rd(cb_group *g, char *out, char *tmp, size_t count,
                                  torx_coll_dtype_t dt, torx_coll_op_t op)
{
    const size_t len = count * cb_dtype_size(dt);
    int newrank;
    torx_status_t st = fold_in(g, out, tmp, len, count, dt, op, &newrank);
    if (st != TORX_OK)
        return st;
    uint32_t tag = 1;
    if (newrank >= 0)
        for (int mask = 1; mask < g->pof2; mask <<= 1, tag++) {
            const int dst = real_rank(g, newrank ^ mask);
            size_t got = 0;
            if ((st = sendrecv(g, out, len, dst, tmp, len, dst, tag, &got)) != TORX_OK)
                return st;
            if (got != len)
                return fail(TORX_ERR_TRUNCATE, "allreduce: %zu bytes from member %d, %zu expected",
                            got, dst, len);
            if ((st = cb_reduce_local(tmp, out, count, dt, op)) != TORX_OK)
                return st;
        }
    return fold_out(g, out, len, 64);
}

/* Rabenseifner: a reduce-scatter by recursive halving (partner newrank
 * XOR 1, 2, 4, ...; each keeps the half of the current range on its side
 * and reduces the partner's copy of it into its own) leaves each member
 * one of pof2 pieces (count / pof2 elements, the first count % pof2 one
 * more); an allgather by recursive doubling in the reverse order of
 * partners puts the pieces back together. */
static torx_status_t allreduce_rsag(cb_group *g, char *out, char *tmp, size_t count,
                                    torx_coll_dtype_t dt, torx_coll_op_t op)
{
    const int pof2 = g->pof2;
    if (count < (size_t)pof2)
        return fail(TORX_ERR_INVAL,
                    "allreduce rsag: %zu elements, fewer than %d (MPICH's auto "
                    "takes recursive doubling there)",
                    count, pof2);
    const size_t es = cb_dtype_size(dt), len = count * es;
    int newrank;
    torx_status_t st = fold_in(g, out, tmp, len, count, dt, op, &newrank);
    if (st != TORX_OK)
        return st;
    if (newrank >= 0) {
        /* Piece i's first element, in closed form where MPICH keeps
         * tables of pof2 counts and displacements: the same pieces, in
         * constant memory and time (a simulated job of 32,768 tasks holds
         * every task's tables at once). */
        const size_t q = count / (size_t)pof2, rem = count % (size_t)pof2;
#define CB_DISP(i) ((size_t)(i)*q + ((size_t)(i) < rem ? (size_t)(i) : rem))
#define CB_SUM_CNT(a, b, acc) ((acc) = CB_DISP(b) - CB_DISP(a))
        int send_idx = 0, recv_idx = 0, last_idx = pof2, mask = 1;
        uint32_t tag = 1;
        for (; mask < pof2 && st == TORX_OK; tag++) {
            const int newdst = newrank ^ mask, dst = real_rank(g, newdst);
            size_t scnt, rcnt, got = 0;
            if (newrank < newdst) {
                send_idx = recv_idx + pof2 / (mask * 2);
                CB_SUM_CNT(send_idx, last_idx, scnt);
                CB_SUM_CNT(recv_idx, send_idx, rcnt);
            } else {
                recv_idx = send_idx + pof2 / (mask * 2);
                CB_SUM_CNT(send_idx, recv_idx, scnt);
                CB_SUM_CNT(recv_idx, last_idx, rcnt);
            }
            st = sendrecv(g, out + CB_DISP(send_idx) * es, scnt * es, dst,
                          tmp + CB_DISP(recv_idx) * es, rcnt * es, dst, tag, &got);
            if (st == TORX_OK && got != rcnt * es)
                st = fail(TORX_ERR_TRUNCATE, "allreduce: %zu bytes from member %d, %zu expected",
                          got, dst, rcnt * es);
            if (st == TORX_OK)
                st = cb_reduce_local(tmp + CB_DISP(recv_idx) * es, out + CB_DISP(recv_idx) * es,
                                     rcnt, dt, op);
            send_idx = recv_idx;
            mask <<= 1;
            if (mask < pof2)
                last_idx = recv_idx + pof2 / mask;
        }
        for (mask >>= 1; mask > 0 && st == TORX_OK; mask >>= 1, tag++) {
            const int newdst = newrank ^ mask, dst = real_rank(g, newdst);
            size_t scnt, rcnt, got = 0;
            if (newrank < newdst) {
                if (mask != pof2 / 2)
                    last_idx = last_idx + pof2 / (mask * 2);
                recv_idx = send_idx + pof2 / (mask * 2);
                CB_SUM_CNT(send_idx, recv_idx, scnt);
                CB_SUM_CNT(recv_idx, last_idx, rcnt);
            } else {
                recv_idx = send_idx - pof2 / (mask * 2);
                CB_SUM_CNT(send_idx, last_idx, scnt);
                CB_SUM_CNT(recv_idx, send_idx, rcnt);
            }
            st = sendrecv(g, out + CB_DISP(send_idx) * es, scnt * es, dst,
                          out + CB_DISP(recv_idx) * es, rcnt * es, dst, tag, &got);
            if (st == TORX_OK && got != rcnt * es)
                st = fail(TORX_ERR_TRUNCATE, "allreduce: %zu bytes from member %d, %zu expected",
                          got, dst, rcnt * es);
            if (newrank > newdst)
                send_idx = recv_idx;
        }
#undef CB_SUM_CNT
#undef CB_DISP
        if (st != TORX_OK)
            return st;
    }
    return fold_out(g, out, len, 64);
}

torx_status_t cb_allreduce(cb_group *g, const void *in, void *out, size_t count,
                           torx_coll_dtype_t dtype, torx_coll_op_t op, cb_allreduce_alg alg)
{
    const size_t es = cb_dtype_size(dtype), len = count * es;
    if (!es || (count && !out))
        return fail(TORX_ERR_INVAL, "allreduce: bad type %d or NULL buffer", (int)dtype);
    {
        /* Whether the type and op reduce, before any message. */
        char a[8] = {0}, b[8] = {0};
        if (cb_reduce_local(a, b, 1, dtype, op) != TORX_OK)
            return TORX_ERR_INVAL;
    }
    if (alg == CB_ALLREDUCE_AUTO)
        alg = cb_allreduce_choose(g, count, dtype);
    if (alg != CB_ALLREDUCE_RD && alg != CB_ALLREDUCE_RSAG)
        return fail(TORX_ERR_INVAL, "allreduce: unknown algorithm %d", (int)alg);
    g->seq++;
    if (in && in != out && len)
        memcpy(out, in, len);
    if (g->n == 1 || count == 0)
        return TORX_OK;
    char *tmp = malloc(len);
    if (!tmp)
        return fail(TORX_ERR_NOMEM, "out of memory");
    torx_status_t st = alg == CB_ALLREDUCE_RD ? allreduce_rd(g, out, tmp, count, dtype, op)
                                              : allreduce_rsag(g, out, tmp, count, dtype, op);
    free(tmp);
    return st;
}

/* ---- alltoall ------------------------------------------------------------------------------- */

/* Bruck: rotate so block i is the one for member me + i, then in step k
 * send every block whose index has bit k set to me + 2^k (packed into one
 * message) and take the same blocks from me - 2^k; then undo the rotation,
 * reversing the block order. */
static torx_status_t alltoall_bruck(cb_group *g, const char *in, char *out, size_t bytes)
{
    const int n = g->n, me = g->me;
    const size_t total = bytes * (size_t)n;
    char *pack = malloc(2 * total + 1), *unpack = pack + total;
    if (!pack)
        return fail(TORX_ERR_NOMEM, "out of memory");
    memcpy(out, in + (size_t)me * bytes, (size_t)(n - me) * bytes);
    memcpy(out + (size_t)(n - me) * bytes, in, (size_t)me * bytes);
    torx_status_t st = TORX_OK;
    uint32_t tag = 0;
    for (int pof2 = 1; pof2 < n && st == TORX_OK; pof2 <<= 1, tag++) {
        size_t len = 0, got = 0;
        for (int b = 1; b < n; b++)
            if (b & pof2) {
                memcpy(pack + len, out + (size_t)b * bytes, bytes);
                len += bytes;
            }
        st = sendrecv(g, pack, len, (me + pof2) % n, unpack, len, (me - pof2 + n) % n, tag, &got);
        if (st == TORX_OK && got != len)
            st = fail(TORX_ERR_TRUNCATE, "alltoall bruck: %zu bytes in step %u, %zu expected", got,
                      tag, len);
        len = 0;
        for (int b = 1; b < n && st == TORX_OK; b++)
            if (b & pof2) {
                memcpy(out + (size_t)b * bytes, unpack + len, bytes);
                len += bytes;
            }
    }
    if (st == TORX_OK) {
        /* Rotate up by me + 1 blocks, then reverse. */
        memcpy(pack, out + (size_t)(me + 1) * bytes, (size_t)(n - me - 1) * bytes);
        memcpy(pack + (size_t)(n - me - 1) * bytes, out, (size_t)(me + 1) * bytes);
        for (int i = 0; i < n; i++)
            memcpy(out + (size_t)(n - i - 1) * bytes, pack + (size_t)i * bytes, bytes);
    }
    free(pack);
    return st;
}

/* Scattered: in batches of 32 members, receives from me + i and sends to
 * me - i posted together, then all waited for. The member's own block is
 * a local copy (MPICH sends it to itself through its self path). */
static torx_status_t alltoall_scattered(cb_group *g, const char *in, char *out, size_t bytes)
{
    enum { THROTTLE = 32 };
    const int n = g->n, me = g->me;
    cb_req *r = malloc(2 * THROTTLE * sizeof *r);
    if (!r)
        return fail(TORX_ERR_NOMEM, "out of memory");
    torx_status_t st = TORX_OK;
    for (int ii = 0; ii < n && st == TORX_OK; ii += THROTTLE) {
        const int ss = n - ii < THROTTLE ? n - ii : THROTTLE;
        int nr = 0;
        for (int i = 0; i < ss && st == TORX_OK; i++) {
            const int src = (me + i + ii) % n;
            if (src == me)
                memcpy(out + (size_t)me * bytes, in + (size_t)me * bytes, bytes);
            else
                st = irecv(g, &r[nr++], out + (size_t)src * bytes, bytes, src, 0);
        }
        for (int i = 0; i < ss && st == TORX_OK; i++) {
            const int dst = (me - i - ii + n) % n;
            if (dst != me)
                st = isend(g, &r[nr++], in + (size_t)dst * bytes, bytes, dst, 0);
        }
        torx_status_t wst = waitall(g, r, nr);
        if (st == TORX_OK)
            st = wst;
    }
    free(r);
    return st;
}

/* Pairwise exchange: n - 1 steps, each a send to and a receive from one
 * partner (me XOR i on a power of two, else me + i and me - i). */
static torx_status_t alltoall_pairwise(cb_group *g, const char *in, char *out, size_t bytes)
{
    const int n = g->n, me = g->me;
    memcpy(out + (size_t)me * bytes, in + (size_t)me * bytes, bytes);
    for (int i = 1; i < n; i++) {
        const int src = g->pof2 == n ? me ^ i : (me - i + n) % n;
        const int dst = g->pof2 == n ? me ^ i : (me + i) % n;
        size_t got = 0;
        torx_status_t st = sendrecv(g, in + (size_t)dst * bytes, bytes, dst,
                                    out + (size_t)src * bytes, bytes, src, (uint32_t)i, &got);
        if (st != TORX_OK)
            return st;
        if (got != bytes)
            return fail(TORX_ERR_TRUNCATE,
                        "alltoall pairwise: %zu bytes from member %d, %zu "
                        "expected",
                        got, src, bytes);
    }
    return TORX_OK;
}

torx_status_t cb_alltoall(cb_group *g, const void *in, void *out, size_t bytes, cb_alltoall_alg alg)
{
    if (bytes && (!in || !out))
        return fail(TORX_ERR_INVAL, "alltoall: NULL buffer");
    if (alg == CB_ALLTOALL_AUTO)
        alg = cb_alltoall_choose(g, bytes);
    g->seq++;
    if (bytes == 0)
        return TORX_OK;
    switch (alg) {
    case CB_ALLTOALL_BRUCK:
        return alltoall_bruck(g, in, out, bytes);
    case CB_ALLTOALL_SCATTERED:
        return alltoall_scattered(g, in, out, bytes);
    case CB_ALLTOALL_PAIRWISE:
        return alltoall_pairwise(g, in, out, bytes);
    default:
        return fail(TORX_ERR_INVAL, "alltoall: unknown algorithm %d", (int)alg);
    }
}
