/* torx rank mapping: which torus coordinate (x,y,z,t) each rank 0..N-1 takes.
 *
 * Two ways to say it (TORX_MAPPING):
 *  - an order string, a permutation of XYZT in any case, naming the
 *    dimensions from the fastest-varying to the slowest: XYZT (default) fills
 *    x first; TXYZ puts consecutive ranks on the tasks of one node first.
 *    Rank r is decomposed in mixed radix in that order; a job smaller than
 *    the shape takes the first ntasks positions;
 *  - a mapping file: one line per rank, in rank order, "x y z t" (exactly
 *    four non-negative decimal integers separated by blanks). Blank lines and
 *    lines whose first non-blank character is '#' are ignored.
 * The torus shape comes from TORX_TORUS ("XxYxZ") or is derived from the job
 * size; t ranges over the tasks per node of the mode (1 for heater and co,
 * TORX_CORES_PER_NODE, default 2, for vn).
 *
 * A bad file is rejected before any communication with TORX_ERR_INVAL and a
 * message "torx: path:line: reason": non-numbers, wrong field count,
 * out-of-range coordinates, t beyond the tasks per node, duplicates, too few
 * or too many rank lines. An empty or unreadable file has no line to name:
 * "torx: path: reason".
 *
 * On error every constructor leaves *map holding no memory (ntasks 0,
 * pointers NULL), so torx_map_free() on it is harmless; torx_last_error()
 * holds the message.
 *
 * Maps are read-only once made. The tables of order and file maps are
 * shared within the process: a constructor asked for a map that is alive
 * already (the same order, or the same file unchanged, with the same shape
 * and ntasks) returns a reference to its tables instead of building them,
 * and torx_map_free drops the reference; the tables go with the last one.
 * A job's tasks that share a process (the sim device) hold one copy.
 */
#ifndef TORX_MAP_H
#define TORX_MAP_H

#include <stdio.h>
#include <torx/packet.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The tables coord, rank_of_slot and the string path belong to the
 * constructor's allocation, possibly shared with other maps of the process:
 * read them, never write or free them; copy a map only as a view that the
 * original outlives. */
typedef struct torx_map {
    torx_shape_t shape; /* x,y,z extents; t = tasks per node */
    int ntasks;
    torx_coord_t *coord; /* by rank */
    int *rank_of_slot;   /* by torx_coord_index(); -1 where no rank sits */
    char order[5];       /* the order string in upper case, "" for a file */
    char *path;          /* the mapping file, NULL for an order */
} torx_map_t;

/* NAME     torx_map_order_valid - whether a string is a mapping order
 * DESCRIPTION
 *   Checks that s is a permutation of XYZT: exactly four letters, each of
 *   X, Y, Z and T once, in any case. s may be NULL.
 * RETURN VALUE
 *   1 when it is, 0 otherwise (NULL and "" included).
 * SEE ALSO torx_map_from_order, torx_map_from_spec
 */
int torx_map_order_valid(const char *s);

/* NAME     torx_map_from_order - map ranks by an order string
 * DESCRIPTION
 *   Maps ranks 0..ntasks-1 onto shape by order (any case, e.g. "txyz"): rank
 *   r, decomposed in mixed radix with the first letter varying fastest,
 *   takes the first ntasks positions. Free *map with torx_map_free.
 * RETURN VALUE
 *   TORX_OK: *map is the map. TORX_ERR_INVAL: map NULL; order not a
 *   permutation of XYZT (the message names it and why); a zero extent;
 *   ntasks < 1 or above the shape's slots. TORX_ERR_NOMEM: no memory.
 * NOTES
 *   While a map of the same order (in any case), shape and ntasks is alive
 *   in the process, *map shares its tables (no memory, no work). Safe to
 *   call from several threads at once.
 * SEE ALSO torx_map_from_spec, torx_map_free, torx_map_order_valid
 */
torx_status_t torx_map_from_order(const char *order, torx_shape_t shape, int ntasks,
                                  torx_map_t *map);

/* NAME     torx_map_from_file - read a mapping file
 * DESCRIPTION
 *   Reads the file at path (one "x y z t" line per rank, in rank order; see
 *   the top of this header) for ntasks ranks on shape; ntasks 0 takes as
 *   many ranks as the file has rank lines. Free *map with torx_map_free.
 * RETURN VALUE
 *   TORX_OK: *map is the map, map->path the file. TORX_ERR_INVAL: path or
 *   map NULL; a zero extent or more ranks than slots; the file cannot be
 *   opened or read; a bad line ("torx: path:line: reason": fields,
 *   numbers, range, t beyond the tasks per node, duplicates, too few or too
 *   many rank lines); no rank line at all. TORX_ERR_NOMEM: no memory.
 * NOTES
 *   While a map read from the same path, shape and ntasks is alive in the
 *   process and the file is still the one read (a regular file of the same
 *   device, inode, size and modification time), *map shares its tables and
 *   the file is not read again. A file rewritten in place to the same
 *   size within the file system's timestamp granularity is not noticed
 *   until every map of it is freed. Safe to call from several threads at
 *   once.
 * SEE ALSO torx_map_from_spec, torx_map_write, torx-map(1)
 */
torx_status_t torx_map_from_file(const char *path, torx_shape_t shape, int ntasks, torx_map_t *map);

/* NAME     torx_map_from_spec - map ranks by an order string or a file
 * DESCRIPTION
 *   torx_map_from_order when spec is a permutation of XYZT (NULL or "":
 *   XYZT), else torx_map_from_file on the path spec. ntasks 0 means as
 *   many ranks as the file has, or for an order every slot of the shape.
 *   name (e.g. "TORX_MAPPING", or NULL) is where spec came from, for the
 *   message.
 * RETURN VALUE
 *   As torx_map_from_order or torx_map_from_file. When spec is neither an
 *   order nor a readable file: TORX_ERR_ENV naming the variable name and
 *   the value, or TORX_ERR_INVAL when name is NULL; the message gives both
 *   reasons. TORX_ERR_INVAL also when map is NULL.
 * SEE ALSO torx_map_from_env, torx_map_from_order, torx_map_from_file
 */
torx_status_t torx_map_from_spec(const char *spec, const char *name, torx_shape_t shape, int ntasks,
                                 torx_map_t *map);

/* NAME     torx_map_from_env - the job's map from the environment
 * DESCRIPTION
 *   The shape from TORX_TORUS (or derived from the job size, see
 *   torx_env_shape) with t = tasks_per_node, and the ranks 0..ntasks-1 by
 *   TORX_MAPPING (an order string, else a file path; unset or empty: XYZT).
 *   This is what torx_init does; the tasks of a job that share a process
 *   share the map's tables (see torx_map_from_order, torx_map_from_file).
 * RETURN VALUE
 *   TORX_OK. TORX_ERR_ENV: a bad TORX_TORUS, or a TORX_MAPPING that is
 *   neither an order nor a readable file. Otherwise as
 *   torx_map_from_spec (TORX_ERR_INVAL for a bad file line, map NULL, or
 *   ntasks or tasks_per_node out of range; TORX_ERR_NOMEM).
 * SEE ALSO torx_map_from_spec, torx_env_shape, torx_init
 */
torx_status_t torx_map_from_env(int ntasks, int tasks_per_node, torx_map_t *map);

/* NAME     torx_map_free - release a map
 * DESCRIPTION
 *   Drops *map's reference to the tables a torx_map_from_* call made or
 *   shared, frees them when it was the last, and zeroes *map. map may be
 *   NULL, or a map a constructor failed on. Call it once per constructor
 *   call (not for copies of *map).
 * RETURN VALUE
 *   None.
 * SEE ALSO torx_map_from_spec
 */
void torx_map_free(torx_map_t *map);

/* NAME     torx_map_coord - the coordinate of a rank
 * DESCRIPTION
 *   The torus coordinate (x,y,z,t) of rank, 0 <= rank < map->ntasks (not
 *   checked). Inline.
 * RETURN VALUE
 *   The coordinate.
 * SEE ALSO torx_map_rank, torx_ctx_map
 */
static inline torx_coord_t torx_map_coord(const torx_map_t *map, int rank)
{
    return map->coord[rank];
}

/* NAME     torx_map_rank - the rank at a coordinate
 * DESCRIPTION
 *   The inverse of torx_map_coord.
 * RETURN VALUE
 *   The rank at c, or -1 when no rank sits there or c is outside the shape.
 * SEE ALSO torx_map_coord
 */
int torx_map_rank(const torx_map_t *map, torx_coord_t c);

/* NAME     torx_map_distance - torus hops between two ranks
 * DESCRIPTION
 *   The hops between the nodes of ranks a and b (both in 0..ntasks-1, not
 *   checked): the Manhattan distance on the torus, each dimension the
 *   shorter way round (wraparound links).
 * RETURN VALUE
 *   The hop count; 0 for two tasks of one node (t does not count).
 * SEE ALSO torx_map_coord
 */
unsigned torx_map_distance(const torx_map_t *map, int a, int b);

/* NAME     torx_map_write - write a map as a mapping file
 * DESCRIPTION
 *   Writes map to out in mapping-file form: '#' header lines naming the
 *   shape, the tasks per node, the rank count and where the map came from,
 *   then one "x y z t" line per rank. Flushes out; does not close it.
 * RETURN VALUE
 *   TORX_OK. TORX_ERR_INVAL: map or out NULL, or map empty. TORX_ERR_SYS:
 *   a write or flush failed (e.g. a full disk).
 * SEE ALSO torx_map_from_file, torx-map(1)
 */
torx_status_t torx_map_write(const torx_map_t *map, FILE *out);

/* NAME     torx_map_from_coords - map ranks to explicit coordinates
 * DESCRIPTION
 *   Maps rank r (0..ntasks-1) to coord[r] on shape: what a mapping file
 *   says, given as an array. Checks what a file's lines are checked for:
 *   every coordinate inside the shape (t below the tasks per node), no
 *   coordinate twice. Free *map with torx_map_free; its order and path
 *   are empty, and its tables its own (never shared).
 * RETURN VALUE
 *   TORX_OK. TORX_ERR_INVAL: map or coord NULL; a zero extent; ntasks < 1
 *   or above the shape's slots; a coordinate out of range or used twice
 *   (the message names the ranks). TORX_ERR_NOMEM: no memory.
 * SEE ALSO torx_map_from_file, torx_map_optimize
 */
torx_status_t torx_map_from_coords(const torx_coord_t *coord, torx_shape_t shape, int ntasks,
                                   torx_map_t *map);

/* ---- Traffic and hop-bytes -----------------------------------------------
 *
 * A traffic matrix says how many bytes of message data each rank sent to
 * each other rank. The file form (what TORX_STATS_FILE collects, see
 * <torx/msg.h>) is text, one row per source rank, in any order:
 *
 *     # comment lines and blank lines are ignored
 *     SRC B0 B1 ... B(N-1)
 *
 * SRC is the sending rank and Bd the bytes it sent to rank d, all
 * non-negative decimal integers (bytes up to 2^64-1). The first row sets N,
 * the job size: every row has N+1 fields, and each rank 0..N-1 has exactly
 * one row. A bad file is rejected with "torx: path:line: reason".
 *
 * Hop-bytes weigh each byte by the torus hops it travels under a map: the
 * sum over (src, dst) of bytes x hops, each dimension the shorter way round
 * (torx_map_distance; tasks of one node are 0 hops apart). Divided by the
 * bytes, it gives the average hops per byte.
 */

#define TORX_TRAFFIC_MAX_RANKS 16384 /* a dense N x N matrix: 2 GiB at this size */

typedef struct torx_traffic {
    int ntasks;
    uint64_t *bytes; /* bytes[src * ntasks + dst]: bytes src sent to dst */
} torx_traffic_t;

/* NAME     torx_traffic_read - read a traffic matrix file
 * DESCRIPTION
 *   Reads the traffic matrix at path (format above) into *t. Free it with
 *   torx_traffic_free.
 * RETURN VALUE
 *   TORX_OK. TORX_ERR_INVAL: path or t NULL; the file cannot be opened or
 *   read; no rows; a bad row ("torx: path:line: reason": a field that is
 *   not a non-negative decimal integer, a byte count above 2^64-1, a row
 *   with the wrong number of fields, a line cut short at the end of the
 *   file, a source rank outside 0..N-1 or with two rows); rows missing for
 *   some ranks (named, with the last line); more than
 *   TORX_TRAFFIC_MAX_RANKS ranks. TORX_ERR_NOMEM: no memory.
 * SEE ALSO torx_traffic_free, torx_map_hop_bytes
 */
torx_status_t torx_traffic_read(const char *path, torx_traffic_t *t);

/* NAME     torx_traffic_free - release a traffic matrix
 * DESCRIPTION
 *   Frees what torx_traffic_read allocated and zeroes *t; t may be NULL.
 * RETURN VALUE
 *   None.
 */
void torx_traffic_free(torx_traffic_t *t);

typedef struct torx_hop_bytes {
    uint64_t bytes;       /* data bytes */
    uint64_t hop_bytes;   /* the sum of bytes x hops */
    uint64_t local_bytes; /* of the bytes, those that travel 0 hops (same node) */
} torx_hop_bytes_t;

/* NAME     torx_map_hop_bytes_row, torx_map_hop_bytes - hop-bytes of traffic
 * DESCRIPTION
 *   torx_map_hop_bytes_row: the bytes and hop-bytes of one source rank
 *   src, whose row[d] bytes went to rank d (map->ntasks entries).
 *   torx_map_hop_bytes: the same summed over every row of t, whose size
 *   must be map->ntasks.
 * RETURN VALUE
 *   TORX_OK: *out holds the sums. TORX_ERR_INVAL: an argument NULL, src
 *   outside the map, t of another size than the map, or a sum beyond
 *   2^64-1.
 * SEE ALSO torx_hops_per_byte, torx_map_distance, torx_stats_bytes_to
 */
torx_status_t torx_map_hop_bytes_row(const torx_map_t *map, int src, const uint64_t *row,
                                     torx_hop_bytes_t *out);
torx_status_t torx_map_hop_bytes(const torx_map_t *map, const torx_traffic_t *t,
                                 torx_hop_bytes_t *out);

/* NAME     torx_hops_per_byte - average hops per byte
 * RETURN VALUE
 *   h->hop_bytes / h->bytes, 0 when no byte was sent. Inline.
 */
static inline double torx_hops_per_byte(const torx_hop_bytes_t *h)
{
    return h->bytes ? (double)h->hop_bytes / (double)h->bytes : 0.0;
}

typedef struct torx_map_opt_attr {
    uint64_t seed;  /* of the annealing's random numbers; 0: 1 */
    uint64_t moves; /* annealing moves tried; 0: a default from the job size */
} torx_map_opt_attr_t;

typedef struct torx_map_opt_report {
    torx_hop_bytes_t xyzt;    /* under the default order XYZT */
    torx_hop_bytes_t order;   /* under the best of the 24 order strings */
    char best_order[5];       /* which one */
    torx_hop_bytes_t greedy;  /* after greedy placement (hop_bytes 0 and bytes 0 when skipped) */
    int greedy_ran;           /* 0: skipped, the job was too large for it */
    torx_hop_bytes_t result;  /* of the map returned */
    uint64_t moves, accepted; /* annealing moves tried and taken */
} torx_map_opt_report_t;

/* NAME     torx_map_optimize - a map with fewer hop-bytes for some traffic
 * DESCRIPTION
 *   Proposes a map of t's ranks onto shape that lowers the hop-bytes of t:
 *   the best of the 24 order strings; a greedy placement (the rank most
 *   bound to those already placed goes to the free slot nearest to its
 *   partners); then simulated annealing from the better of the two, moving
 *   a rank to another slot (swapping with the rank there, or into a free
 *   slot), half the time next to one of its partners. Deterministic for a
 *   given attr->seed. The result is never worse than the best order
 *   string, and is a valid map (it passes every check of a mapping file).
 *   attr may be NULL (defaults). report, when not NULL, receives the
 *   hop-bytes at each stage (UINT64_MAX for a stage whose hop-bytes exceed
 *   64 bits: it counts as the worst, and another may still fit).
 * RETURN VALUE
 *   TORX_OK: *map is the proposal (free with torx_map_free). TORX_ERR_INVAL:
 *   t, map NULL or t empty; shape unusable or too small for t's ranks; the
 *   hop-bytes exceed 64 bits under every map tried. TORX_ERR_NOMEM: no
 *   memory.
 * SEE ALSO torx_map_hop_bytes, torx_map_write, torx-map(1)
 */
torx_status_t torx_map_optimize(const torx_traffic_t *t, torx_shape_t shape,
                                const torx_map_opt_attr_t *attr, torx_map_t *map,
                                torx_map_opt_report_t *report);

#ifdef __cplusplus
}
#endif

#endif /* TORX_MAP_H */
