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
 * On error every constructor leaves *map zeroed, so torx_map_free() on it is
 * harmless; torx_last_error() holds the message.
 */
#ifndef TORX_MAP_H
#define TORX_MAP_H

#include <stdio.h>
#include <torx/packet.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct torx_map {
    torx_shape_t shape; /* x,y,z extents; t = tasks per node */
    int ntasks;
    torx_coord_t *coord; /* by rank */
    int *rank_of_slot;   /* by torx_coord_index(); -1 where no rank sits */
    char order[5];       /* the order string in upper case, "" for a file */
    char *path;          /* the mapping file, NULL for an order */
} torx_map_t;

/* 1 when s is a permutation of XYZT (exactly four letters, any case). */
int torx_map_order_valid(const char *s);

/* Maps ntasks ranks onto shape by an order string (any case, e.g. "txyz").
 * Errors name the string and why (not a permutation of XYZT, or the shape
 * has fewer slots than ranks). */
torx_status_t torx_map_from_order(const char *order, torx_shape_t shape, int ntasks,
                                  torx_map_t *map);

/* Reads a mapping file for ntasks ranks on shape; ntasks 0 takes as many
 * ranks as the file has lines. Errors carry "path:line:". */
torx_status_t torx_map_from_file(const char *path, torx_shape_t shape, int ntasks, torx_map_t *map);

/* An order string when spec is a permutation of XYZT, else a mapping file
 * (ntasks 0 as for torx_map_from_file; for an order it means every slot).
 * When spec is neither an order nor a readable file, the error names the
 * variable `name` (e.g. "TORX_MAPPING"; NULL for none) and the value. */
torx_status_t torx_map_from_spec(const char *spec, const char *name, torx_shape_t shape, int ntasks,
                                 torx_map_t *map);

/* The job's map from the environment: TORX_TORUS (or the derived shape) and
 * TORX_MAPPING (an order string, or else a file path; unset or empty: XYZT). */
torx_status_t torx_map_from_env(int ntasks, int tasks_per_node, torx_map_t *map);

void torx_map_free(torx_map_t *map);

/* Coordinate of rank (0 <= rank < map->ntasks). */
static inline torx_coord_t torx_map_coord(const torx_map_t *map, int rank)
{
    return map->coord[rank];
}

/* Rank at a coordinate, or -1 when none (or c is outside the shape). */
int torx_map_rank(const torx_map_t *map, torx_coord_t c);

/* Hops between the nodes of ranks a and b (both in 0..ntasks-1): Manhattan
 * distance on the torus, each dimension the shorter way round (wraparound
 * links). 0 for the same node; t does not count. */
unsigned torx_map_distance(const torx_map_t *map, int a, int b);

/* Writes the map in mapping-file form, with a '#' header naming the shape,
 * the tasks per node, the rank count and where the map came from. A write
 * error (e.g. a full disk) gives TORX_ERR_SYS. */
torx_status_t torx_map_write(const torx_map_t *map, FILE *out);

#ifdef __cplusplus
}
#endif

#endif /* TORX_MAP_H */
