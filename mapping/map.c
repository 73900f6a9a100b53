/* Rank mapping (include/torx/map.h): order strings, mapping files, the
 * TORX_MAPPING environment value and torus distances.
 *
 * A bad map found after start-up costs a whole job, so every rejection says
 * what was wrong and where: the file and line, the dimension, value and
 * extent, the earlier line that already holds a coordinate.
 *
 * Maps are immutable once made, and the tasks of one process (the sim
 * device runs a whole job in one) build the same one: a map's tables live
 * in one reference-counted block, and the blocks of order and file maps
 * stay in a cache while a map holds them, so that a second torx_map_from_*
 * asking the same (the order or the file, the shape, the ntasks) takes a
 * reference instead of building. A torx_map_t points into its block (coord
 * is the block's last member), and torx_map_free drops the reference. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <torx/map.h>

#include "map_internal.h"
#include "packet/pkt_internal.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define TORXM_NDIMS 4          /* x, y, z, t */
#define TORXM_REASON_BYTES 256 /* the reason part of a file error */
#define TORXM_TOKEN_SHOWN 40   /* longest token quoted back in a message */

static const char dim_name[TORXM_NDIMS] = {'x', 'y', 'z', 't'};

static void shape_extents(torx_shape_t s, unsigned ext[TORXM_NDIMS])
{
    ext[0] = s.x;
    ext[1] = s.y;
    ext[2] = s.z;
    ext[3] = s.t;
}

static torx_coord_t coord_make(const unsigned v[TORXM_NDIMS])
{
    return (torx_coord_t){(uint8_t)v[0], (uint8_t)v[1], (uint8_t)v[2], (uint8_t)v[3]};
}

static const char *plural(unsigned long n)
{
    return n == 1 ? "" : "s";
}

/* The shape must be usable and hold the job. ntasks 0 means "not known yet"
 * (a file read for as many ranks as it has). */
static torx_status_t check_shape(torx_shape_t s, int ntasks)
{
    if (!s.x || !s.y || !s.z || !s.t)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torus shape %ux%ux%u with %u tasks per node: every extent "
                           "must be at least 1",
                           s.x, s.y, s.z, s.t);
    unsigned long slots = torx_shape_slots(s);
    /* Ranks are ints; a shape with more slots could not be indexed by them. */
    if (slots > INT_MAX)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torus %ux%ux%u at %u tasks per node has %lu slots, more than "
                           "the %d ranks a job can have",
                           s.x, s.y, s.z, s.t, slots, INT_MAX);
    if (ntasks < 0)
        return torxp_error(TORX_ERR_INVAL, "torx: rank mapping for ntasks=%d: must not be negative",
                           ntasks);
    if ((unsigned long)ntasks > slots)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: the job's %d tasks do not fit the torus %ux%ux%u at %u task%s "
                           "per node (%lu slots); set TORX_TORUS to a larger shape, or run more "
                           "tasks per node",
                           ntasks, s.x, s.y, s.z, s.t, plural(s.t), slots);
    return TORX_OK;
}

/* ---- Map blocks and the cache of shared maps --------------------------------- */

enum { MAP_COORDS, MAP_ORDER, MAP_FILE }; /* what a block was made from */

/* The file a map was read from, as it was: a file map is shared only with a
 * request for the same path while the file is the same one, unchanged. */
typedef struct file_id {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
} file_id_t;

/* One map's tables: this header, coord[cap], then rank_of_slot[slots]. */
typedef struct map_block {
    struct map_block *next; /* in the cache, when cached */
    unsigned long refs;     /* maps that point here; under cache_lock */
    int cached;
    /* what was asked for (the cache's key) */
    int kind;
    torx_shape_t shape;
    int ntasks_asked; /* a file's 0: as many as it has */
    int ntasks;       /* what the map holds (set when cached) */
    char order[5];    /* MAP_ORDER, upper case */
    file_id_t file;   /* MAP_FILE */
    char *path;       /* MAP_FILE: the path the map names (map->path) */
    int cap;          /* room in coord */
    int *rank_of_slot;
    torx_coord_t coord[]; /* last: torx_map_free finds the block from map->coord */
} map_block_t;

/* Process-wide (TORXP_PROCESS_WIDE): under torx-sim every task of the process
 * shares the cache, also where libtorx is linked into the program. */
static TORXP_PROCESS_WIDE pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static TORXP_PROCESS_WIDE map_block_t *cache; /* the blocks of live order and file maps */

static map_block_t *block_of(const torx_map_t *map)
{
    return (map_block_t *)(void *)((char *)map->coord - offsetof(map_block_t, coord));
}

/* A block for ncoord ranks (at least 1) on shape s, every slot empty,
 * refs 1, not cached. */
static map_block_t *block_new(torx_shape_t s, int ncoord)
{
    const size_t slots = torx_shape_slots(s), cap = (size_t)(ncoord > 0 ? ncoord : 1);
    static_assert(offsetof(map_block_t, coord) % _Alignof(int) == 0 &&
                      sizeof(torx_coord_t) % _Alignof(int) == 0,
                  "rank_of_slot follows coord aligned");
    map_block_t *b = torxp_malloc(offsetof(map_block_t, coord) + cap * sizeof(torx_coord_t) +
                                  slots * sizeof(int));
    if (!b)
        return NULL;
    memset(b, 0, offsetof(map_block_t, coord));
    b->refs = 1;
    b->shape = s;
    b->cap = (int)cap;
    b->rank_of_slot = (int *)(void *)(b->coord + cap);
    memset(b->coord, 0, cap * sizeof(torx_coord_t));
    for (size_t i = 0; i < slots; i++)
        b->rank_of_slot[i] = -1;
    return b;
}

/* Points map at b's tables. */
static void map_point(torx_map_t *map, map_block_t *b, int ntasks)
{
    map->shape = b->shape;
    map->ntasks = ntasks;
    map->coord = b->coord;
    map->rank_of_slot = b->rank_of_slot;
    map->path = b->path;
}

/* An empty map of shape s: room for ncoord ranks, no slot taken. */
static torx_status_t map_alloc(torx_shape_t s, int ncoord, torx_map_t *map)
{
    *map = (torx_map_t){.shape = s};
    map_block_t *b = block_new(s, ncoord);
    if (!b)
        return torxp_error(TORX_ERR_NOMEM,
                           "torx: no memory for the rank map of torus %ux%ux%u at %u tasks per "
                           "node (%u slots)",
                           s.x, s.y, s.z, s.t, torx_shape_slots(s));
    map_point(map, b, 0);
    return TORX_OK;
}

static void block_unref(map_block_t *b)
{
    pthread_mutex_lock(&cache_lock);
    const unsigned long left = --b->refs;
    if (!left && b->cached)
        for (map_block_t **pp = &cache; *pp; pp = &(*pp)->next)
            if (*pp == b) {
                *pp = b->next;
                break;
            }
    pthread_mutex_unlock(&cache_lock);
    if (!left) {
        free(b->path);
        free(b);
    }
}

void torx_map_free(torx_map_t *map)
{
    if (!map)
        return;
    if (map->coord)
        block_unref(block_of(map));
    *map = (torx_map_t){.ntasks = 0};
}

static int same_request(const map_block_t *a, const map_block_t *key)
{
    if (a->kind != key->kind || a->ntasks_asked != key->ntasks_asked ||
        a->shape.x != key->shape.x || a->shape.y != key->shape.y || a->shape.z != key->shape.z ||
        a->shape.t != key->shape.t)
        return 0;
    if (a->kind == MAP_ORDER)
        return memcmp(a->order, key->order, sizeof a->order) == 0;
    return a->file.dev == key->file.dev && a->file.ino == key->file.ino &&
           a->file.size == key->file.size && a->file.mtime.tv_sec == key->file.mtime.tv_sec &&
           a->file.mtime.tv_nsec == key->file.mtime.tv_nsec && strcmp(a->path, key->path) == 0;
}

/* The cached block that answers the request key, with a reference taken;
 * NULL when none is alive. Caller holds cache_lock. */
static map_block_t *cache_find_locked(const map_block_t *key)
{
    for (map_block_t *b = cache; b; b = b->next)
        if (same_request(b, key)) {
            b->refs++;
            return b;
        }
    return NULL;
}

/* *map becomes a map of the cached block that answers key, if one is alive. */
static int cache_take(const map_block_t *key, torx_map_t *map)
{
    pthread_mutex_lock(&cache_lock);
    map_block_t *b = cache_find_locked(key);
    pthread_mutex_unlock(&cache_lock);
    if (!b)
        return 0;
    map_point(map, b, b->ntasks);
    return 1;
}

/* *map, a finished order or file map, answers later requests like key from
 * now on: its block goes into the cache, or, when another caller cached
 * the same map meanwhile, *map takes that one and drops its own. */
static void cache_put(torx_map_t *map, const map_block_t *key)
{
    map_block_t *b = block_of(map);
    b->kind = key->kind;
    b->ntasks_asked = key->ntasks_asked;
    b->ntasks = map->ntasks;
    memcpy(b->order, key->order, sizeof b->order);
    b->file = key->file;
    pthread_mutex_lock(&cache_lock);
    map_block_t *other = cache_find_locked(key);
    if (!other) {
        b->cached = 1;
        b->next = cache;
        cache = b;
    }
    pthread_mutex_unlock(&cache_lock);
    if (other) {
        block_unref(b);
        map_point(map, other, other->ntasks);
    }
}

/* ---- Order strings -------------------------------------------------------- */

/* Fills perm[k] with the dimension (0..3 for x,y,z,t) that varies k-th
 * fastest. On failure writes why s is not a permutation of XYZT. */
static int parse_order(const char *s, int perm[TORXM_NDIMS], char *why, size_t whylen)
{
    size_t len = s ? strlen(s) : 0;
    if (len == 0) {
        snprintf(why, whylen, "it is empty");
        return 0;
    }
    if (len != TORXM_NDIMS) {
        snprintf(why, whylen, "it has %zu characters, not 4", len);
        return 0;
    }
    int seen[TORXM_NDIMS] = {0};
    for (int k = 0; k < TORXM_NDIMS; k++) {
        char c = s[k];
        int d;
        switch (c) {
        case 'x':
        case 'X':
            d = 0;
            break;
        case 'y':
        case 'Y':
            d = 1;
            break;
        case 'z':
        case 'Z':
            d = 2;
            break;
        case 't':
        case 'T':
            d = 3;
            break;
        default:
            snprintf(why, whylen, "'%c' is not one of X, Y, Z, T", c);
            return 0;
        }
        if (seen[d]) {
            snprintf(why, whylen, "%c appears twice", dim_name[d] - 'a' + 'A');
            return 0;
        }
        seen[d] = 1;
        perm[k] = d;
    }
    return 1;
}

int torx_map_order_valid(const char *s)
{
    int perm[TORXM_NDIMS];
    char why[64];
    return parse_order(s, perm, why, sizeof why);
}

torx_status_t torx_map_from_order(const char *order, torx_shape_t shape, int ntasks,
                                  torx_map_t *map)
{
    if (!map)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_map_from_order: map is NULL");
    *map = (torx_map_t){.shape = shape};
    int perm[TORXM_NDIMS];
    char why[64];
    if (!parse_order(order, perm, why, sizeof why))
        return torxp_error(TORX_ERR_INVAL,
                           "torx: mapping order '%s' is not a permutation of XYZT (%s); use e.g. "
                           "XYZT or TXYZ",
                           order ? order : "(null)", why);
    torx_status_t rc = check_shape(shape, ntasks);
    if (rc != TORX_OK)
        return rc;
    if (ntasks == 0)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: mapping order '%s' for ntasks=0: must be at least 1", order);
    map_block_t key = {.kind = MAP_ORDER, .shape = shape, .ntasks_asked = ntasks};
    for (int k = 0; k < TORXM_NDIMS; k++)
        key.order[k] = (char)(dim_name[perm[k]] - 'a' + 'A');
    if (cache_take(&key, map)) {
        memcpy(map->order, key.order, sizeof map->order);
        return TORX_OK;
    }
    if ((rc = map_alloc(shape, ntasks, map)) != TORX_OK)
        return rc;

    unsigned ext[TORXM_NDIMS];
    shape_extents(shape, ext);
    for (int r = 0; r < ntasks; r++) {
        unsigned v[TORXM_NDIMS], rest = (unsigned)r;
        for (int k = 0; k < TORXM_NDIMS; k++) { /* mixed radix, fastest first */
            v[perm[k]] = rest % ext[perm[k]];
            rest /= ext[perm[k]];
        }
        map->coord[r] = coord_make(v);
        map->rank_of_slot[torx_coord_index(shape, map->coord[r])] = r;
    }
    map->ntasks = ntasks;
    memcpy(map->order, key.order, sizeof map->order);
    cache_put(map, &key);
    return TORX_OK;
}

/* ---- Explicit coordinates ------------------------------------------------------ */

torx_status_t torx_map_from_coords(const torx_coord_t *coord, torx_shape_t shape, int ntasks,
                                   torx_map_t *map)
{
    if (!map || !coord)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_map_from_coords: %s is NULL",
                           map ? "coord" : "map");
    *map = (torx_map_t){.shape = shape};
    torx_status_t rc = check_shape(shape, ntasks);
    if (rc != TORX_OK)
        return rc;
    if (ntasks == 0)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_map_from_coords: ntasks=0: must be at "
                                           "least 1");
    if ((rc = map_alloc(shape, ntasks, map)) != TORX_OK)
        return rc;
    for (int r = 0; r < ntasks; r++) {
        const torx_coord_t c = coord[r];
        if (!torx_coord_in_shape(shape, c)) {
            rc = torxp_error(TORX_ERR_INVAL,
                             "torx: rank %d at (%u,%u,%u,%u) is outside the torus %ux%ux%u at "
                             "%u task%s per node",
                             r, c.x, c.y, c.z, c.t, shape.x, shape.y, shape.z, shape.t,
                             plural(shape.t));
            torx_map_free(map);
            return rc;
        }
        const unsigned slot = torx_coord_index(shape, c);
        if (map->rank_of_slot[slot] >= 0) {
            rc = torxp_error(TORX_ERR_INVAL,
                             "torx: rank %d at (%u,%u,%u,%u): already used by "
                             "rank %d",
                             r, c.x, c.y, c.z, c.t, map->rank_of_slot[slot]);
            torx_map_free(map);
            return rc;
        }
        map->coord[r] = c;
        map->rank_of_slot[slot] = r;
    }
    map->ntasks = ntasks;
    return TORX_OK;
}

/* ---- Mapping files --------------------------------------------------------- */

torx_status_t torxm_line_error(const char *path, unsigned long line, const char *fmt, ...)
{
    char reason[TORXM_REASON_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    return torxp_error(TORX_ERR_INVAL, "torx: %s:%lu: %s", path, line, reason);
}

ssize_t torxm_next_data_line(FILE *f, char **buf, size_t *bufsize, unsigned long *line,
                             int *any_line)
{
    ssize_t len;
    while ((len = getline(buf, bufsize, f)) >= 0) {
        ++*line;
        *any_line = 1;
        if (torxm_line_has_data(*buf, (size_t)len))
            break;
    }
    return len;
}

typedef struct {
    const char *p;
    int len;
} token_t;

/* Quotes at most TORXM_TOKEN_SHOWN characters of a token back to the user. */
#define TOKEN_TEXT "%.*s%s"
#define TOKEN_FMT "'" TOKEN_TEXT "'"
#define TOKEN_ARGS(tk)                                                                             \
    ((tk).len > TORXM_TOKEN_SHOWN ? TORXM_TOKEN_SHOWN : (tk).len), (tk).p,                         \
        ((tk).len > TORXM_TOKEN_SHOWN ? "..." : "")

/* A decimal coordinate; values past any extent saturate, only "too large"
 * matters for them. 0 when the token has a non-digit. */
static int token_value(token_t tk, unsigned *v)
{
    unsigned long acc = 0;
    for (int i = 0; i < tk.len; i++) {
        if (tk.p[i] < '0' || tk.p[i] > '9')
            return 0;
        if (acc <= UINT8_MAX)
            acc = acc * 10 + (unsigned long)(tk.p[i] - '0');
    }
    *v = acc > UINT8_MAX ? UINT8_MAX + 1u : (unsigned)acc;
    return 1;
}

/* Parses and checks one rank line (x y z t); *c is its coordinate. */
static torx_status_t parse_rank_line(const char *path, unsigned long line, const char *buf,
                                     size_t len, torx_shape_t shape, torx_coord_t *c)
{
    token_t tk[TORXM_NDIMS];
    int ntok = 0, hash = 0;
    for (size_t i = 0; i < len;) {
        if (torxm_is_blank(buf[i])) {
            i++;
            continue;
        }
        size_t start = i;
        while (i < len && !torxm_is_blank(buf[i]))
            i++;
        if (buf[start] == '#')
            hash = 1;
        if (ntok < TORXM_NDIMS)
            tk[ntok] = (token_t){buf + start, (int)(i - start)};
        if (ntok < INT_MAX)
            ntok++;
    }
    if (ntok != TORXM_NDIMS)
        return torxm_line_error(path, line, "expected 4 fields (x y z t), found %d%s", ntok,
                                hash ? "; a comment must be on a line of its own" : "");

    unsigned ext[TORXM_NDIMS], v[TORXM_NDIMS];
    shape_extents(shape, ext);
    for (int d = 0; d < TORXM_NDIMS; d++) {
        if (!token_value(tk[d], &v[d]))
            return torxm_line_error(path, line,
                                    TOKEN_FMT " is not a number (%c must be a non-negative decimal "
                                              "integer)",
                                    TOKEN_ARGS(tk[d]), dim_name[d]);
        if (v[d] < ext[d])
            continue;
        if (d < 3)
            return torxm_line_error(
                path, line,
                "%c=" TOKEN_TEXT " is out of range: the torus has extent %u in %c (0..%u)",
                dim_name[d], TOKEN_ARGS(tk[d]), ext[d], dim_name[d], ext[d] - 1);
        if (ext[d] == 1)
            return torxm_line_error(
                path, line, "t=" TOKEN_TEXT " but the mode runs 1 task per node (t must be 0)",
                TOKEN_ARGS(tk[d]));
        return torxm_line_error(
            path, line, "t=" TOKEN_TEXT " but the mode runs %u tasks per node (t must be 0..%u)",
            TOKEN_ARGS(tk[d]), ext[d], ext[d] - 1);
    }
    *c = coord_make(v);
    return TORX_OK;
}

/* Grows the per-rank arrays of a map read for "as many ranks as lines". */
static int grow(torx_map_t *map, unsigned long **lines, int *cap)
{
    int ncap = *cap < INT_MAX / 2 ? *cap * 2 : INT_MAX;
    map_block_t *old = block_of(map), *b = block_new(map->shape, ncap);
    if (!b)
        return 0;
    memcpy(b->coord, old->coord, (size_t)old->cap * sizeof *b->coord);
    memcpy(b->rank_of_slot, old->rank_of_slot, torx_shape_slots(map->shape) * sizeof(int));
    b->path = old->path; /* the block is the map's alone while it is read */
    free(old);
    map_point(map, b, map->ntasks);
    unsigned long *l = torxp_realloc(*lines, (size_t)ncap * sizeof *l);
    if (!l)
        return 0;
    *lines = l;
    *cap = ncap;
    return 1;
}

/* The reader behind torx_map_from_file. When the file cannot be opened or
 * read, *io_errno is the reason (callers choose how to report it) and the
 * message is already set. */
static torx_status_t read_map_file(const char *path, torx_shape_t shape, int ntasks,
                                   torx_map_t *map, int *io_errno)
{
    *io_errno = 0;
    torx_status_t rc = check_shape(shape, ntasks);
    if (rc != TORX_OK)
        return rc;
    /* The same regular file, unchanged, for the same request: share. */
    map_block_t key = {
        .kind = MAP_FILE, .shape = shape, .ntasks_asked = ntasks, .path = (char *)path};
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
        key.file = (file_id_t){st.st_dev, st.st_ino, st.st_size, st.st_mtim};
        if (cache_take(&key, map))
            return TORX_OK;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        *io_errno = errno;
        return torxp_error(TORX_ERR_INVAL, "torx: %s: cannot open the mapping file: %s", path,
                           strerror(errno));
    }
    /* What was read is what the map says: the identity of the file opened. */
    const int shareable = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
    if (shareable)
        key.file = (file_id_t){st.st_dev, st.st_ino, st.st_size, st.st_mtim};
    /* ntasks 0: the file says how many; it cannot exceed the slots without a
     * duplicate, so the arrays grow from a small start. */
    int cap = ntasks > 0 ? ntasks : 64;
    unsigned long *lines = torxp_malloc((size_t)cap * sizeof *lines); /* line of each rank */
    char *buf = NULL;
    size_t bufsize = 0;
    if ((rc = map_alloc(shape, cap, map)) != TORX_OK || !lines) {
        rc = rc != TORX_OK
                 ? rc
                 : torxp_error(TORX_ERR_NOMEM, "torx: %s: no memory for %d ranks", path, cap);
        goto fn_fail;
    }
    if (!(block_of(map)->path = map->path = strdup(path))) {
        rc = torxp_error(TORX_ERR_NOMEM, "torx: %s: no memory for the path", path);
        goto fn_fail;
    }

    unsigned long line = 0, first_extra = 0;
    int nranks = 0, any_line = 0;
    ssize_t len;
    errno = 0;
    while ((len = torxm_next_data_line(f, &buf, &bufsize, &line, &any_line)) >= 0) {
        if (ntasks > 0 && nranks >= ntasks) {
            /* Only counted: the count is the error, whatever the lines say. */
            if (!first_extra)
                first_extra = line;
            if (nranks < INT_MAX)
                nranks++;
            continue;
        }
        torx_coord_t c;
        if ((rc = parse_rank_line(path, line, buf, (size_t)len, shape, &c)) != TORX_OK)
            goto fn_fail;
        unsigned slot = torx_coord_index(shape, c);
        int owner = map->rank_of_slot[slot];
        if (owner >= 0) {
            rc = torxm_line_error(path, line, "(%u,%u,%u,%u) already used by rank %d on line %lu",
                                  c.x, c.y, c.z, c.t, owner, lines[owner]);
            goto fn_fail;
        }
        if (nranks == cap && !grow(map, &lines, &cap)) {
            rc = torxp_error(TORX_ERR_NOMEM, "torx: %s:%lu: no memory for more ranks", path, line);
            goto fn_fail;
        }
        map->coord[nranks] = c;
        lines[nranks] = line;
        map->rank_of_slot[slot] = nranks++;
        errno = 0;
    }
    if (ferror(f)) {
        *io_errno = errno ? errno : EIO;
        rc = torxp_error(TORX_ERR_INVAL, "torx: %s: cannot read the mapping file: %s", path,
                         strerror(*io_errno));
        goto fn_fail;
    }
    if (nranks == 0) {
        char job[48] = "";
        if (ntasks > 0)
            snprintf(job, sizeof job, "; the job has %d rank%s", ntasks, plural((unsigned)ntasks));
        rc = torxp_error(TORX_ERR_INVAL, "torx: %s: no rank lines (%s)%s", path,
                         any_line ? "only blank and comment lines" : "the file is empty", job);
        goto fn_fail;
    }
    if (ntasks > 0 && nranks > ntasks) {
        rc = torxm_line_error(
            path, first_extra,
            "file has %d ranks, the job has %d (the extra ranks start on this line)", nranks,
            ntasks);
        goto fn_fail;
    }
    if (ntasks > 0 && nranks < ntasks) {
        rc = torxm_line_error(path, line, "file has %d rank%s, the job has %d", nranks,
                              plural((unsigned)nranks), ntasks);
        goto fn_fail;
    }
    map->ntasks = nranks;
    if (shareable)
        cache_put(map, &key);

fn_exit:
    free(buf);
    free(lines);
    fclose(f);
    return rc;
fn_fail:
    torx_map_free(map);
    goto fn_exit;
}

torx_status_t torx_map_from_file(const char *path, torx_shape_t shape, int ntasks, torx_map_t *map)
{
    if (!map || !path)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_map_from_file: %s is NULL",
                           map ? "path" : "map");
    *map = (torx_map_t){.shape = shape};
    int io_errno;
    return read_map_file(path, shape, ntasks, map, &io_errno);
}

torx_status_t torx_map_from_spec(const char *spec, const char *name, torx_shape_t shape, int ntasks,
                                 torx_map_t *map)
{
    if (!map)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_map_from_spec: map is NULL");
    *map = (torx_map_t){.shape = shape};
    if (!spec || !*spec)
        spec = "XYZT";
    int perm[TORXM_NDIMS];
    char why[64];
    if (parse_order(spec, perm, why, sizeof why)) {
        if (ntasks == 0) {
            torx_status_t rc = check_shape(shape, 0);
            if (rc != TORX_OK)
                return rc;
            ntasks = (int)torx_shape_slots(shape);
        }
        return torx_map_from_order(spec, shape, ntasks, map);
    }
    int io_errno;
    torx_status_t rc = read_map_file(spec, shape, ntasks, map, &io_errno);
    if (rc == TORX_OK || !io_errno)
        return rc; /* a map, or a readable file with a bad line: that message stands */
    /* Not an order, and no file to read: say both, the user may have meant
     * either. */
    if (name)
        return torxp_error(TORX_ERR_ENV,
                           "torx: %s='%s' is neither a permutation of XYZT nor a readable file "
                           "(as an order: %s; as a file: %s)",
                           name, spec, why, strerror(io_errno));
    return torxp_error(TORX_ERR_INVAL,
                       "torx: '%s' is neither a permutation of XYZT nor a readable file (as an "
                       "order: %s; as a file: %s)",
                       spec, why, strerror(io_errno));
}

torx_status_t torx_map_from_env(int ntasks, int tasks_per_node, torx_map_t *map)
{
    if (!map)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_map_from_env: map is NULL");
    torx_shape_t shape;
    *map = (torx_map_t){.ntasks = 0};
    torx_status_t rc = torx_env_shape(ntasks, tasks_per_node, &shape);
    if (rc != TORX_OK)
        return rc;
    return torx_map_from_spec(getenv("TORX_MAPPING"), "TORX_MAPPING", shape, ntasks, map);
}

/* ---- Queries ------------------------------------------------------------------ */

int torx_map_rank(const torx_map_t *map, torx_coord_t c)
{
    if (!torx_coord_in_shape(map->shape, c))
        return -1;
    return map->rank_of_slot[torx_coord_index(map->shape, c)];
}

/* Hops along one ring of n nodes: the shorter way round. */
static unsigned ring_hops(unsigned a, unsigned b, unsigned n)
{
    unsigned d = a > b ? a - b : b - a;
    return d < n - d ? d : n - d;
}

unsigned torx_map_distance(const torx_map_t *map, int a, int b)
{
    torx_coord_t p = map->coord[a], q = map->coord[b];
    return ring_hops(p.x, q.x, map->shape.x) + ring_hops(p.y, q.y, map->shape.y) +
           ring_hops(p.z, q.z, map->shape.z);
}

torx_status_t torx_map_write(const torx_map_t *map, FILE *out)
{
    if (!map || !map->coord || !out)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_map_write: %s",
                           !out ? "out is NULL" : "map is NULL or empty");
    const torx_shape_t s = map->shape;
    int ok = fprintf(out,
                     "# torx mapping file: one line per rank, in rank order: x y z t\n"
                     "# torus %ux%ux%u, %u task%s per node, %d rank%s (%u slots)\n",
                     s.x, s.y, s.z, s.t, plural(s.t), map->ntasks, plural((unsigned)map->ntasks),
                     torx_shape_slots(s)) >= 0;
    if (ok && map->order[0])
        ok = fprintf(out, "# generated by libtorx from order %s\n", map->order) >= 0;
    else if (ok && map->path)
        ok = fprintf(out, "# generated by libtorx from file %s\n", map->path) >= 0;
    else if (ok)
        ok = fprintf(out, "# generated by libtorx from explicit coordinates\n") >= 0;
    int saved = ok ? 0 : errno;
    for (int r = 0; ok && r < map->ntasks; r++) {
        torx_coord_t c = map->coord[r];
        if (fprintf(out, "%u %u %u %u\n", c.x, c.y, c.z, c.t) < 0) {
            saved = errno;
            ok = 0;
        }
    }
    /* Buffered output fails only when flushed: a full disk shows up here. */
    if (fflush(out) != 0 && ok) {
        saved = errno;
        ok = 0;
    }
    if (!ok || ferror(out))
        return torxp_error(TORX_ERR_SYS, "torx: writing the mapping failed: %s",
                           strerror(saved ? saved : EIO));
    return TORX_OK;
}
