/* Traffic matrices, hop-bytes and the mapping optimizer (include/torx/map.h).
 *
 * The traffic file is what TORX_STATS_FILE collects: one row per source
 * rank, "SRC B0 .. B(N-1)". Like a mapping file, a bad one is rejected with
 * file, line and reason, since a matrix cut short by a killed job is the
 * likely mistake.
 *
 * The optimizer works on slots (torx_coord_index order, x fastest) and on
 * the symmetric weights w(i,j) = B[i][j] + B[j][i] of the pairs that talk,
 * kept as adjacency lists, so one move costs the degree of the two ranks
 * it touches, not the job size. Costs inside the annealing are doubles (a
 * guide only); every candidate the caller may get is measured exactly in
 * 64-bit integers from the directed nonzeros. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <torx/map.h>

#include "map_internal.h"
#include "packet/pkt_internal.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TORXT_TOKEN_SHOWN 40  /* longest token quoted back in a message */
#define TORXT_MISSING_SHOWN 8 /* ranks without a row named in the message */

/* ---- Reading ------------------------------------------------------------------ */

void torx_traffic_free(torx_traffic_t *t)
{
    if (!t)
        return;
    free(t->bytes);
    *t = (torx_traffic_t){.ntasks = 0};
}

/* The next blank-separated token of buf[*i..len), or 0 at the end. */
static int next_token(const char *buf, size_t len, size_t *i, const char **tok, int *tlen)
{
    while (*i < len && torxm_is_blank(buf[*i]))
        (*i)++;
    if (*i == len)
        return 0;
    const size_t start = *i;
    while (*i < len && !torxm_is_blank(buf[*i]))
        (*i)++;
    *tok = buf + start;
    *tlen = (int)(*i - start);
    return 1;
}

static long count_tokens(const char *buf, size_t len)
{
    long n = 0;
    const char *tok;
    int tlen;
    for (size_t i = 0; next_token(buf, len, &i, &tok, &tlen);)
        n++;
    return n;
}

#define TOKEN_FMT "'%.*s%s'"
#define TOKEN_ARGS(p, n)                                                                           \
    ((n) > TORXT_TOKEN_SHOWN ? TORXT_TOKEN_SHOWN : (n)), (p), ((n) > TORXT_TOKEN_SHOWN ? "..." : "")

/* A byte count or rank: a non-negative decimal integer below 2^64. */
static torx_status_t parse_count(const char *path, unsigned long line, const char *what,
                                 const char *tok, int tlen, uint64_t *v)
{
    uint64_t acc = 0;
    int digits = 1;
    for (int i = 0; i < tlen; i++)
        if (tok[i] < '0' || tok[i] > '9')
            digits = 0;
    if (!digits) {
        int negative = tok[0] == '-' && tlen > 1;
        for (int i = 1; negative && i < tlen; i++)
            negative = tok[i] >= '0' && tok[i] <= '9';
        if (negative)
            return torxm_line_error(path, line,
                                    TOKEN_FMT " is negative: a %s is a non-negative "
                                              "decimal integer",
                                    TOKEN_ARGS(tok, tlen), what);
        return torxm_line_error(path, line,
                                TOKEN_FMT " is not a number: a %s is a non-negative "
                                          "decimal integer",
                                TOKEN_ARGS(tok, tlen), what);
    }
    for (int i = 0; i < tlen; i++) {
        const unsigned d = (unsigned)(tok[i] - '0');
        if (acc > (UINT64_MAX - d) / 10)
            return torxm_line_error(path, line, TOKEN_FMT " is too large for a %s (at most %llu)",
                                    TOKEN_ARGS(tok, tlen), what, (unsigned long long)UINT64_MAX);
        acc = acc * 10 + d;
    }
    *v = acc;
    return TORX_OK;
}

/* One row: "SRC B0 .. B(n-1)" with n = t->ntasks. at_eof: the line has no
 * newline, the file ended inside it. */
static torx_status_t parse_row(const char *path, unsigned long line, const char *buf, size_t len,
                               int at_eof, torx_traffic_t *t, unsigned long *row_line)
{
    const int n = t->ntasks;
    const long nfields = count_tokens(buf, len);
    if (nfields != (long)n + 1)
        return torxm_line_error(
            path, line,
            "expected %d fields (the source rank, then the bytes to each of %d "
            "ranks, as the first row has), found %ld%s",
            n + 1, n, nfields,
            at_eof && nfields < (long)n + 1 ? "; the file ends inside this line (cut short?)" : "");
    const char *tok;
    int tlen;
    size_t i = 0;
    uint64_t src;
    next_token(buf, len, &i, &tok, &tlen);
    torx_status_t rc = parse_count(path, line, "source rank", tok, tlen, &src);
    if (rc != TORX_OK)
        return rc;
    if (src >= (uint64_t)n)
        return torxm_line_error(path, line,
                                "source rank %llu is not in the job (0..%d: the rows have %d byte "
                                "counts)",
                                (unsigned long long)src, n - 1, n);
    if (row_line[src])
        return torxm_line_error(path, line, "rank %llu already has a row, on line %lu",
                                (unsigned long long)src, row_line[src]);
    uint64_t *row = t->bytes + src * (uint64_t)n;
    for (int d = 0; d < n; d++) {
        next_token(buf, len, &i, &tok, &tlen);
        if ((rc = parse_count(path, line, "byte count", tok, tlen, &row[d])) != TORX_OK)
            return rc;
    }
    row_line[src] = line;
    return TORX_OK;
}

torx_status_t torx_traffic_read(const char *path, torx_traffic_t *t)
{
    if (!path || !t)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_traffic_read: %s is NULL", t ? "path" : "t");
    *t = (torx_traffic_t){.ntasks = 0};
    FILE *f = fopen(path, "r");
    if (!f)
        return torxp_error(TORX_ERR_INVAL, "torx: %s: cannot open the traffic matrix: %s", path,
                           strerror(errno));
    torx_status_t rc = TORX_OK;
    char *buf = NULL;
    size_t bufsize = 0;
    unsigned long *row_line = NULL; /* line of each rank's row, 0: none yet */
    unsigned long line = 0;
    int any_line = 0, rows = 0;
    ssize_t len;
    errno = 0;
    while ((len = torxm_next_data_line(f, &buf, &bufsize, &line, &any_line)) >= 0) {
        const int at_eof = buf[len - 1] != '\n';
        if (memchr(buf, '#', (size_t)len)) {
            rc = torxm_line_error(path, line,
                                  "'#' after a row: a comment must be on a line of its own");
            goto fn_fail;
        }
        if (!t->bytes) { /* the first row sets the job size */
            const long nfields = count_tokens(buf, (size_t)len);
            if (nfields < 2) {
                rc = torxm_line_error(
                    path, line,
                    "expected the source rank and the bytes to each rank, found %ld "
                    "field%s",
                    nfields, nfields == 1 ? "" : "s");
                goto fn_fail;
            }
            if (nfields - 1 > TORX_TRAFFIC_MAX_RANKS) {
                rc = torxm_line_error(path, line,
                                      "a row of %ld byte counts; at most %d ranks are "
                                      "supported",
                                      nfields - 1, TORX_TRAFFIC_MAX_RANKS);
                goto fn_fail;
            }
            t->ntasks = (int)(nfields - 1);
            t->bytes = torxp_calloc((size_t)t->ntasks * (size_t)t->ntasks, sizeof *t->bytes);
            row_line = torxp_calloc((size_t)t->ntasks, sizeof *row_line);
            if (!t->bytes || !row_line) {
                rc = torxp_error(TORX_ERR_NOMEM, "torx: %s: no memory for a %dx%d traffic matrix",
                                 path, t->ntasks, t->ntasks);
                goto fn_fail;
            }
        }
        if ((rc = parse_row(path, line, buf, (size_t)len, at_eof, t, row_line)) != TORX_OK)
            goto fn_fail;
        rows++;
        errno = 0;
    }
    if (ferror(f)) {
        rc = torxp_error(TORX_ERR_INVAL, "torx: %s: cannot read the traffic matrix: %s", path,
                         strerror(errno ? errno : EIO));
        goto fn_fail;
    }
    if (rows == 0) {
        rc = torxp_error(TORX_ERR_INVAL, "torx: %s: no rows (%s)", path,
                         any_line ? "only blank and comment lines" : "the file is empty");
        goto fn_fail;
    }
    if (rows < t->ntasks) {
        char missing[TORXT_MISSING_SHOWN * 12 + 8] = "";
        size_t at = 0;
        int shown = 0;
        for (int r = 0; r < t->ntasks; r++) {
            if (row_line[r])
                continue;
            if (shown == TORXT_MISSING_SHOWN) {
                snprintf(missing + at, sizeof missing - at, ", ...");
                break;
            }
            at += (size_t)snprintf(missing + at, sizeof missing - at, "%s%d", shown ? ", " : "", r);
            shown++;
        }
        rc = torxm_line_error(path, line,
                              "rows for %d of the %d ranks; no row for rank%s %s (is the file cut "
                              "short, or did some tasks not write theirs?)",
                              rows, t->ntasks, t->ntasks - rows == 1 ? "" : "s", missing);
        goto fn_fail;
    }

fn_exit:
    free(buf);
    free(row_line);
    fclose(f);
    return rc;
fn_fail:
    torx_traffic_free(t);
    goto fn_exit;
}

/* ---- Hop-bytes ------------------------------------------------------------------ */

static torx_status_t overflow(void)
{
    return torxp_error(TORX_ERR_INVAL, "torx: the traffic's hop-bytes exceed 2^64-1");
}

/* Adds bytes b at h hops to *out; 0 on overflow. */
static int add_bytes(torx_hop_bytes_t *out, uint64_t b, unsigned h)
{
    uint64_t hb;
    if (__builtin_add_overflow(out->bytes, b, &out->bytes) ||
        __builtin_mul_overflow(b, (uint64_t)h, &hb) ||
        __builtin_add_overflow(out->hop_bytes, hb, &out->hop_bytes))
        return 0;
    if (h == 0)
        out->local_bytes += b; /* at most out->bytes: cannot overflow */
    return 1;
}

torx_status_t torx_map_hop_bytes_row(const torx_map_t *map, int src, const uint64_t *row,
                                     torx_hop_bytes_t *out)
{
    if (!map || !row || !out || !map->coord)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_map_hop_bytes_row: a NULL argument");
    *out = (torx_hop_bytes_t){0};
    if (src < 0 || src >= map->ntasks)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_map_hop_bytes_row: rank %d is not in the map (0..%d)", src,
                           map->ntasks - 1);
    for (int d = 0; d < map->ntasks; d++)
        if (row[d] && !add_bytes(out, row[d], torx_map_distance(map, src, d)))
            return overflow();
    return TORX_OK;
}

torx_status_t torx_map_hop_bytes(const torx_map_t *map, const torx_traffic_t *t,
                                 torx_hop_bytes_t *out)
{
    if (!map || !t || !out || !map->coord || !t->bytes)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_map_hop_bytes: a NULL or empty argument");
    *out = (torx_hop_bytes_t){0};
    if (t->ntasks != map->ntasks)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: a traffic matrix of %d ranks against a map of %d ranks",
                           t->ntasks, map->ntasks);
    for (int s = 0; s < t->ntasks; s++) {
        torx_hop_bytes_t r;
        torx_status_t rc =
            torx_map_hop_bytes_row(map, s, t->bytes + (size_t)s * (size_t)t->ntasks, &r);
        if (rc != TORX_OK)
            return rc;
        if (__builtin_add_overflow(out->bytes, r.bytes, &out->bytes) ||
            __builtin_add_overflow(out->hop_bytes, r.hop_bytes, &out->hop_bytes))
            return overflow();
        out->local_bytes += r.local_bytes;
    }
    return TORX_OK;
}

/* ---- Optimizer -------------------------------------------------------------------- */

/* Work bounds: greedy placement scans every free slot for every rank, so it
 * is skipped above this many slot x partner visits; the annealing's default
 * number of moves is bounded by this many partner visits. */
#define OPT_GREEDY_WORK 1000000000.0
#define OPT_ANNEAL_WORK 400000000.0
#define OPT_MOVES_PER_RANK 2000u
#define OPT_MOVES_MIN 20000u
#define OPT_MOVES_MAX 4000000u
#define OPT_SAMPLE_MOVES 1000u /* to set the starting temperature */
#define OPT_COOL_TO 1e-4       /* final temperature, relative to the first */

typedef struct {
    int n;
    unsigned nslots;
    torx_shape_t shape;
    uint8_t *sx, *sy, *sz;     /* node coordinate of each slot */
    uint8_t *dx, *dy, *dz;     /* ring hops per dimension, ext x ext */
    int *adj_start, *adj_rank; /* partners of each rank (CSR), both directions merged */
    double *adj_w;             /* w(i,j) = B[i][j] + B[j][i] */
    int *active;               /* ranks with a partner */
    int nactive;
    uint64_t nnz;  /* directed nonzeros off the diagonal */
    unsigned *pos; /* rank -> slot */
    int *occ;      /* slot -> rank, -1 when free */
    uint64_t rng;
} opt_t;

static uint64_t rng_next(opt_t *o)
{
    /* splitmix64: small, fast, and the same sequence on every platform */
    uint64_t z = (o->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rng_below(opt_t *o, uint64_t n)
{
    return rng_next(o) % n; /* the bias is below 2^-32 for the sizes here */
}

static double rng_unit(opt_t *o)
{
    return (double)(rng_next(o) >> 11) * 0x1.0p-53;
}

static unsigned ring(unsigned a, unsigned b, unsigned n)
{
    const unsigned d = a > b ? a - b : b - a;
    return d < n - d ? d : n - d;
}

static unsigned slot_dist(const opt_t *o, unsigned a, unsigned b)
{
    const torx_shape_t s = o->shape;
    return (unsigned)o->dx[o->sx[a] * s.x + o->sx[b]] + o->dy[o->sy[a] * s.y + o->sy[b]] +
           o->dz[o->sz[a] * s.z + o->sz[b]];
}

static void opt_free(opt_t *o)
{
    free(o->sx);
    free(o->sy);
    free(o->sz);
    free(o->dx);
    free(o->dy);
    free(o->dz);
    free(o->adj_start);
    free(o->adj_rank);
    free(o->adj_w);
    free(o->active);
    free(o->pos);
    free(o->occ);
}

static uint8_t *ring_table(unsigned ext)
{
    uint8_t *t = torxp_malloc((size_t)ext * ext);
    if (t)
        for (unsigned a = 0; a < ext; a++)
            for (unsigned b = 0; b < ext; b++)
                t[a * ext + b] = (uint8_t)ring(a, b, ext);
    return t;
}

static torx_status_t opt_init(opt_t *o, const torx_traffic_t *t, torx_shape_t shape, uint64_t seed)
{
    const int n = t->ntasks;
    *o = (opt_t){.n = n, .nslots = torx_shape_slots(shape), .shape = shape, .rng = seed};
    const unsigned ns = o->nslots;
    o->sx = torxp_malloc(ns);
    o->sy = torxp_malloc(ns);
    o->sz = torxp_malloc(ns);
    o->dx = ring_table(shape.x);
    o->dy = ring_table(shape.y);
    o->dz = ring_table(shape.z);
    o->adj_start = torxp_calloc((size_t)n + 1, sizeof *o->adj_start);
    o->active = torxp_malloc((size_t)n * sizeof *o->active);
    o->pos = torxp_malloc((size_t)n * sizeof *o->pos);
    o->occ = torxp_malloc((size_t)ns * sizeof *o->occ);
    if (!o->sx || !o->sy || !o->sz || !o->dx || !o->dy || !o->dz || !o->adj_start || !o->active ||
        !o->pos || !o->occ)
        goto nomem;
    for (unsigned s = 0; s < ns; s++) {
        o->sx[s] = (uint8_t)(s % shape.x);
        o->sy[s] = (uint8_t)(s / shape.x % shape.y);
        o->sz[s] = (uint8_t)(s / ((unsigned)shape.x * shape.y) % shape.z);
    }
    /* Partners: (i,j) when either direction carries bytes. Count, then fill. */
    const uint64_t *B = t->bytes;
    size_t npairs = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            if (i == j)
                continue;
            const int nz = B[(size_t)i * n + j] || B[(size_t)j * n + i];
            if (B[(size_t)i * n + j])
                o->nnz++;
            if (nz) {
                o->adj_start[i + 1]++;
                npairs++;
            }
        }
    for (int i = 0; i < n; i++)
        o->adj_start[i + 1] += o->adj_start[i];
    o->adj_rank = torxp_malloc((npairs ? npairs : 1) * sizeof *o->adj_rank);
    o->adj_w = torxp_malloc((npairs ? npairs : 1) * sizeof *o->adj_w);
    if (!o->adj_rank || !o->adj_w)
        goto nomem;
    for (int i = 0; i < n; i++) {
        int k = o->adj_start[i];
        for (int j = 0; j < n; j++) {
            if (i == j || !(B[(size_t)i * n + j] || B[(size_t)j * n + i]))
                continue;
            o->adj_rank[k] = j;
            o->adj_w[k++] = (double)B[(size_t)i * n + j] + (double)B[(size_t)j * n + i];
        }
        if (o->adj_start[i + 1] > o->adj_start[i])
            o->active[o->nactive++] = i;
    }
    return TORX_OK;
nomem:
    opt_free(o);
    return torxp_error(TORX_ERR_NOMEM, "torx: no memory to optimize a map of %d ranks on %u slots",
                       n, ns);
}

static void place_from_map(opt_t *o, const torx_map_t *m)
{
    for (unsigned s = 0; s < o->nslots; s++)
        o->occ[s] = -1;
    for (int r = 0; r < o->n; r++) {
        o->pos[r] = torx_coord_index(o->shape, m->coord[r]);
        o->occ[o->pos[r]] = r;
    }
}

static torx_coord_t slot_coord(const opt_t *o, unsigned s)
{
    const unsigned node = (unsigned)o->shape.x * o->shape.y * o->shape.z;
    return (torx_coord_t){o->sx[s], o->sy[s], o->sz[s], (uint8_t)(s / node)};
}

/* The map of placement pos (validated as a mapping file would be). */
static torx_status_t map_of(const opt_t *o, const unsigned *pos, torx_map_t *m)
{
    torx_coord_t *c = torxp_malloc((size_t)o->n * sizeof *c);
    if (!c)
        return torxp_error(TORX_ERR_NOMEM, "torx: no memory for a map of %d ranks", o->n);
    for (int r = 0; r < o->n; r++)
        c[r] = slot_coord(o, pos[r]);
    const torx_status_t rc = torx_map_from_coords(c, o->shape, o->n, m);
    free(c);
    return rc;
}

/* What the current placement's hop-bytes would change by if rank a moved
 * to slot sb (swapping with the rank there, if any). */
static double move_delta(const opt_t *o, int a, unsigned sb)
{
    const unsigned sa = o->pos[a];
    const int b = o->occ[sb];
    double d = 0;
    for (int k = o->adj_start[a]; k < o->adj_start[a + 1]; k++) {
        const int p = o->adj_rank[k];
        if (p == b)
            continue; /* the pair a-b keeps its distance */
        d += o->adj_w[k] *
             ((double)slot_dist(o, sb, o->pos[p]) - (double)slot_dist(o, sa, o->pos[p]));
    }
    if (b >= 0)
        for (int k = o->adj_start[b]; k < o->adj_start[b + 1]; k++) {
            const int p = o->adj_rank[k];
            if (p == a)
                continue;
            d += o->adj_w[k] *
                 ((double)slot_dist(o, sa, o->pos[p]) - (double)slot_dist(o, sb, o->pos[p]));
        }
    return d;
}

static void move_apply(opt_t *o, int a, unsigned sb)
{
    const unsigned sa = o->pos[a];
    const int b = o->occ[sb];
    o->occ[sb] = a;
    o->pos[a] = sb;
    o->occ[sa] = b;
    if (b >= 0)
        o->pos[b] = sa;
}

/* A target for rank a: half the time a slot of a partner's node or of a
 * node next to it, else any slot. */
static unsigned pick_target(opt_t *o, int a)
{
    const int deg = o->adj_start[a + 1] - o->adj_start[a];
    if (deg > 0 && (rng_next(o) & 1)) {
        const int p = o->adj_rank[o->adj_start[a] + (int)rng_below(o, (uint64_t)deg)];
        const unsigned sp = o->pos[p];
        unsigned v[3] = {o->sx[sp], o->sy[sp], o->sz[sp]};
        const unsigned ext[3] = {o->shape.x, o->shape.y, o->shape.z};
        const uint64_t r = rng_below(o, 7); /* stay, or one of 6 neighbours */
        if (r < 6) {
            const unsigned d = (unsigned)(r / 2);
            v[d] = r & 1 ? (v[d] + 1) % ext[d] : (v[d] + ext[d] - 1) % ext[d];
        }
        const unsigned t = (unsigned)rng_below(o, o->shape.t);
        return ((t * o->shape.z + v[2]) * o->shape.y + v[1]) * o->shape.x + v[0];
    }
    return (unsigned)rng_below(o, o->nslots);
}

/* Greedy placement into o->pos: the first rank is the most talkative; then
 * the rank most bound to those placed goes to the free slot closest to its
 * placed partners (ties: the lowest slot). */
static torx_status_t greedy(opt_t *o)
{
    const int n = o->n;
    double *conn = torxp_calloc((size_t)n, sizeof *conn);
    double *total = torxp_calloc((size_t)n, sizeof *total);
    uint8_t *placed = torxp_calloc((size_t)n, 1);
    if (!conn || !total || !placed) {
        free(conn);
        free(total);
        free(placed);
        return torxp_error(TORX_ERR_NOMEM, "torx: no memory for greedy placement");
    }
    for (int i = 0; i < n; i++)
        for (int k = o->adj_start[i]; k < o->adj_start[i + 1]; k++)
            total[i] += o->adj_w[k];
    for (unsigned s = 0; s < o->nslots; s++)
        o->occ[s] = -1;
    for (int step = 0; step < n; step++) {
        int u = -1;
        for (int i = 0; i < n; i++) {
            if (placed[i])
                continue;
            if (u < 0 || conn[i] > conn[u] || (conn[i] == conn[u] && total[i] > total[u]))
                u = i;
        }
        unsigned best = UINT_MAX;
        double best_cost = INFINITY;
        for (unsigned s = 0; s < o->nslots; s++) {
            if (o->occ[s] >= 0)
                continue;
            double c = 0;
            if (conn[u] > 0)
                for (int k = o->adj_start[u]; k < o->adj_start[u + 1]; k++)
                    if (placed[o->adj_rank[k]])
                        c += o->adj_w[k] * slot_dist(o, s, o->pos[o->adj_rank[k]]);
            if (c < best_cost) {
                best_cost = c;
                best = s;
                if (c == 0)
                    break;
            }
        }
        o->pos[u] = best;
        o->occ[best] = u;
        placed[u] = 1;
        for (int k = o->adj_start[u]; k < o->adj_start[u + 1]; k++)
            conn[o->adj_rank[k]] += o->adj_w[k];
    }
    free(conn);
    free(total);
    free(placed);
    return TORX_OK;
}

/* The current placement's hop-bytes, as doubles (the annealing's guide). */
static double guide_cost(const opt_t *o)
{
    double c = 0;
    for (int i = 0; i < o->n; i++)
        for (int k = o->adj_start[i]; k < o->adj_start[i + 1]; k++)
            if (o->adj_rank[k] > i)
                c += o->adj_w[k] * slot_dist(o, o->pos[i], o->pos[o->adj_rank[k]]);
    return c;
}

/* Simulated annealing from the current placement; the best placement seen
 * is left in best_pos. */
static void anneal(opt_t *o, uint64_t moves, unsigned *best_pos, torx_map_opt_report_t *rep)
{
    memcpy(best_pos, o->pos, (size_t)o->n * sizeof *best_pos);
    if (o->nactive == 0 || o->nslots < 2 || moves == 0)
        return;
    /* Starting temperature: the mean uphill step of random moves, so that
     * at first about a third of them are taken. */
    double up = 0;
    unsigned nup = 0;
    for (unsigned i = 0; i < OPT_SAMPLE_MOVES; i++) {
        const int a = o->active[rng_below(o, (uint64_t)o->nactive)];
        const unsigned sb = pick_target(o, a);
        if (sb == o->pos[a])
            continue;
        const double d = move_delta(o, a, sb);
        if (d > 0) {
            up += d;
            nup++;
        }
    }
    if (nup == 0)
        return; /* no move makes anything worse: nothing can be better either */
    const double t0 = up / nup;
    const double cool = pow(OPT_COOL_TO, 1.0 / (double)moves);
    double temp = t0, cur = guide_cost(o), best = cur;
    for (uint64_t m = 0; m < moves; m++, temp *= cool) {
        const int a = o->active[rng_below(o, (uint64_t)o->nactive)];
        const unsigned sb = pick_target(o, a);
        if (sb == o->pos[a])
            continue;
        const double d = move_delta(o, a, sb);
        if (d > 0 && rng_unit(o) >= exp(-d / temp))
            continue;
        move_apply(o, a, sb);
        rep->accepted++;
        cur += d;
        /* Rounding in cur is relative to its size; demand a real gain. */
        if (cur < best - 1e-9 * (best > 1 ? best : 1)) {
            best = cur;
            memcpy(best_pos, o->pos, (size_t)o->n * sizeof *best_pos);
        }
    }
    rep->moves = moves;
}

/* The hop-bytes of t under m. 0 when they exceed 64 bits: *hb then says
 * UINT64_MAX, the worst there is (another map may still fit). */
static int weigh(const torx_map_t *m, const torx_traffic_t *t, torx_hop_bytes_t *hb)
{
    if (torx_map_hop_bytes(m, t, hb) == TORX_OK)
        return 1;
    *hb = (torx_hop_bytes_t){.bytes = UINT64_MAX, .hop_bytes = UINT64_MAX};
    return 0;
}

torx_status_t torx_map_optimize(const torx_traffic_t *t, torx_shape_t shape,
                                const torx_map_opt_attr_t *attr, torx_map_t *map,
                                torx_map_opt_report_t *report)
{
    if (!map)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_map_optimize: map is NULL");
    *map = (torx_map_t){.shape = shape};
    if (!t || !t->bytes || t->ntasks < 1)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_map_optimize: no traffic matrix");
    torx_map_opt_report_t rep = {.greedy_ran = 0};
    torx_map_opt_report_t *r = report ? report : &rep;
    *r = (torx_map_opt_report_t){.greedy_ran = 0};

    /* The 24 orders, XYZT first: ties keep the default. */
    static const char *const orders[] = {"XYZT", "XYTZ", "XZYT", "XZTY", "XTYZ", "XTZY",
                                         "YXZT", "YXTZ", "YZXT", "YZTX", "YTXZ", "YTZX",
                                         "ZXYT", "ZXTY", "ZYXT", "ZYTX", "ZTXY", "ZTYX",
                                         "TXYZ", "TXZY", "TYXZ", "TYZX", "TZXY", "TZYX"};
    torx_map_t best = {.ntasks = 0};
    torx_hop_bytes_t best_hb = {0};
    int best_fits = 0; /* best's hop-bytes fit 64 bits */
    torx_status_t rc;
    for (size_t i = 0; i < sizeof orders / sizeof orders[0]; i++) {
        torx_map_t m;
        torx_hop_bytes_t hb;
        if ((rc = torx_map_from_order(orders[i], shape, t->ntasks, &m)) != TORX_OK)
            goto fn_fail;
        const int fits = weigh(&m, t, &hb);
        if (i == 0)
            r->xyzt = hb;
        if (i == 0 || (fits && (!best_fits || hb.hop_bytes < best_hb.hop_bytes))) {
            torx_map_free(&best);
            best = m;
            best_hb = hb;
            best_fits = fits;
            memcpy(r->best_order, orders[i], 5);
        } else {
            torx_map_free(&m);
        }
    }
    r->order = best_hb;

    opt_t o;
    const uint64_t seed = attr && attr->seed ? attr->seed : 1;
    if ((rc = opt_init(&o, t, shape, seed)) != TORX_OK)
        goto fn_fail;
    unsigned *best_pos = torxp_malloc((size_t)o.n * sizeof *best_pos);
    if (!best_pos) {
        rc = torxp_error(TORX_ERR_NOMEM, "torx: no memory to optimize a map of %d ranks", o.n);
        goto fn_fail_opt;
    }

    /* Greedy placement, where it is affordable, when it beats the orders. */
    if ((double)o.nslots * (double)(o.adj_start[o.n] + 1) <= OPT_GREEDY_WORK && o.nactive) {
        torx_map_t g;
        torx_hop_bytes_t hb;
        if ((rc = greedy(&o)) != TORX_OK || (rc = map_of(&o, o.pos, &g)) != TORX_OK)
            goto fn_fail_pos;
        const int fits = weigh(&g, t, &hb);
        r->greedy = hb;
        r->greedy_ran = 1;
        if (fits && (!best_fits || hb.hop_bytes < best_hb.hop_bytes)) {
            torx_map_free(&best);
            best = g;
            best_hb = hb;
            best_fits = 1;
        } else {
            torx_map_free(&g);
        }
    }

    /* Annealing from the best so far. */
    uint64_t moves = attr && attr->moves ? attr->moves : 0;
    if (!moves) {
        const double deg = o.nactive ? (double)o.adj_start[o.n] / o.nactive : 1;
        double m = (double)OPT_MOVES_MIN + (double)OPT_MOVES_PER_RANK * o.n;
        if (m > OPT_MOVES_MAX)
            m = OPT_MOVES_MAX;
        if (m * 2 * deg > OPT_ANNEAL_WORK)
            m = OPT_ANNEAL_WORK / (2 * deg);
        moves = (uint64_t)m;
    }
    place_from_map(&o, &best);
    anneal(&o, moves, best_pos, r);
    {
        torx_map_t a;
        torx_hop_bytes_t hb;
        if ((rc = map_of(&o, best_pos, &a)) != TORX_OK)
            goto fn_fail_pos;
        const int fits = weigh(&a, t, &hb);
        if (fits && (!best_fits || hb.hop_bytes < best_hb.hop_bytes)) {
            torx_map_free(&best);
            best = a;
            best_hb = hb;
            best_fits = 1;
        } else {
            torx_map_free(&a);
        }
    }
    r->result = best_hb;
    if (!best_fits) {
        rc = overflow();
        goto fn_fail_pos;
    }
    /* The caller gets a map of explicit coordinates, whichever stage won. */
    best.order[0] = '\0';
    best.path = NULL; /* its block's, if it came from a file */
    *map = best;
    free(best_pos);
    opt_free(&o);
    return TORX_OK;

fn_fail_pos:
    free(best_pos);
fn_fail_opt:
    opt_free(&o);
fn_fail:
    torx_map_free(&best);
    return rc;
}
