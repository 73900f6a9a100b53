/* TORX_* environment parsing. Every value is parsed strictly (the whole
 * string, in range) and every error names the variable, its value and what
 * would have been accepted, so a typo never silently becomes a default. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "pkt_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TORXP_DIM_MAX 255 /* torus dims and tasks per node fit in uint8_t */

torx_status_t torx_env_int(const char *name, long lo, long hi, long def, long *out)
{
    if (!name || !out || lo > hi)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_env_int(name=%s, lo=%ld, hi=%ld): needs a name, an "
                           "output and lo <= hi",
                           name ? name : "NULL", lo, hi);
    const char *s = getenv(name);
    if (!s || !*s) {
        *out = def;
        return TORX_OK;
    }
    /* strtol skips leading blanks; a strict parse does not. */
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (s[0] == ' ' || s[0] == '\t' || end == s || *end != '\0')
        return torxp_error(TORX_ERR_ENV, "torx: %s='%s' is not an integer (expected %ld..%ld)",
                           name, s, lo, hi);
    if (errno == ERANGE || v < lo || v > hi)
        return torxp_error(TORX_ERR_ENV, "torx: %s='%s' is out of range (expected %ld..%ld)", name,
                           s, lo, hi);
    *out = v;
    return TORX_OK;
}

torx_status_t torx_env_choice(const char *name, const char *const *choices, int def, int *index)
{
    if (!name || !choices || !choices[0] || !index)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_env_choice(name=%s): needs a name, a non-empty "
                           "NULL-terminated list of choices and an output",
                           name ? name : "NULL");
    const char *s = getenv(name);
    if (!s || !*s) {
        *index = def;
        return TORX_OK;
    }
    for (int i = 0; choices[i]; i++) {
        if (strcmp(s, choices[i]) == 0) {
            *index = i;
            return TORX_OK;
        }
    }
    char words[256] = "";
    size_t used = 0;
    for (int i = 0; choices[i] && used < sizeof words; i++) {
        int n = snprintf(words + used, sizeof words - used, "%s%s", i ? ", " : "", choices[i]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    return torxp_error(TORX_ERR_ENV, "torx: %s='%s' is not one of: %s (case-sensitive)", name, s,
                       words);
}

/* Parses TORX_TORUS: 1 to 3 decimal dimensions, each 1..255, separated by a
 * lowercase 'x'. Missing dimensions are 1. */
static torx_status_t parse_torus(const char *s, unsigned dims[3])
{
    static const char form[] = "expected X, XxY or XxYxZ with each dimension 1..255, e.g. 4x2x2";
    int nd = 0;
    const char *p = s;
    dims[0] = dims[1] = dims[2] = 1;
    for (;;) {
        if (nd == 3)
            return torxp_error(TORX_ERR_ENV,
                               "torx: TORX_TORUS='%s' has more than 3 dimensions (%s)", s, form);
        if (*p < '0' || *p > '9')
            return torxp_error(TORX_ERR_ENV,
                               "torx: TORX_TORUS='%s': dimension %d is not a number (%s)", s,
                               nd + 1, form);
        const char *digits = p;
        unsigned long v = 0;
        while (*p >= '0' && *p <= '9') {
            if (v <= TORXP_DIM_MAX) /* saturate: past 255 only "too large" matters */
                v = v * 10 + (unsigned long)(*p - '0');
            p++;
        }
        if (v < 1 || v > TORXP_DIM_MAX)
            return torxp_error(TORX_ERR_ENV,
                               "torx: TORX_TORUS='%s': dimension %d is %.*s, must be 1..%d (%s)", s,
                               nd + 1, (int)(p - digits), digits, TORXP_DIM_MAX, form);
        dims[nd++] = (unsigned)v;
        if (*p == '\0')
            return TORX_OK;
        if (*p != 'x')
            return torxp_error(TORX_ERR_ENV,
                               "torx: TORX_TORUS='%s': unexpected '%c' after dimension %d (%s)", s,
                               *p, nd, form);
        p++;
    }
}

/* The most balanced X >= Y >= Z with X*Y*Z == n, like MPI_Dims_create: the
 * smallest largest dimension, then the largest smallest one. n <= 255^3. */
static void balanced_dims(unsigned long n, unsigned long dims[3])
{
    dims[0] = n;
    dims[1] = dims[2] = 1;
    for (unsigned long z = 1; z * z * z <= n; z++) {
        if (n % z)
            continue;
        unsigned long rest = n / z;
        for (unsigned long y = z; y * y <= rest; y++) {
            if (rest % y)
                continue;
            unsigned long x = rest / y; /* x >= y >= z */
            if (x < dims[0] || (x == dims[0] && z > dims[2])) {
                dims[0] = x;
                dims[1] = y;
                dims[2] = z;
            }
        }
    }
}

torx_status_t torx_env_shape(int ntasks, int tasks_per_node, torx_shape_t *shape)
{
    if (!shape)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_env_shape: shape is NULL");
    if (ntasks < 1)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_env_shape: ntasks=%d, must be at least 1",
                           ntasks);
    if (tasks_per_node < 1 || tasks_per_node > TORXP_DIM_MAX)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_env_shape: tasks_per_node=%d is out of range 1..%d",
                           tasks_per_node, TORXP_DIM_MAX);
    const unsigned long t = (unsigned long)tasks_per_node;
    const unsigned long nnodes = ((unsigned long)ntasks + t - 1) / t;

    const char *s = getenv("TORX_TORUS");
    if (s && *s) {
        unsigned dims[3];
        torx_status_t rc = parse_torus(s, dims);
        if (rc != TORX_OK)
            return rc;
        unsigned long nodes = (unsigned long)dims[0] * dims[1] * dims[2];
        if (nodes * t < (unsigned long)ntasks)
            return torxp_error(TORX_ERR_ENV,
                               "torx: TORX_TORUS='%s' has %lu node slots x %lu tasks per node = "
                               "%lu, fewer than the job's %d tasks; use a larger torus or unset "
                               "TORX_TORUS",
                               s, nodes, t, nodes * t, ntasks);
        *shape = (torx_shape_t){(uint8_t)dims[0], (uint8_t)dims[1], (uint8_t)dims[2], (uint8_t)t};
        return TORX_OK;
    }

    const unsigned long maxnodes = (unsigned long)TORXP_DIM_MAX * TORXP_DIM_MAX * TORXP_DIM_MAX;
    unsigned long d[3] = {nnodes, 1, 1};
    if (nnodes <= maxnodes)
        balanced_dims(nnodes, d);
    if (d[0] > TORXP_DIM_MAX) {
        /* Suggest the smallest cube that holds the nodes. */
        unsigned long c = 1;
        while (c * c * c < nnodes && c < TORXP_DIM_MAX)
            c++;
        if (c * c * c < nnodes)
            return torxp_error(TORX_ERR_ENV,
                               "torx: %d tasks at %lu per node need %lu nodes, more than the "
                               "largest torus (255x255x255) holds; use more tasks per node",
                               ntasks, t, nnodes);
        return torxp_error(TORX_ERR_ENV,
                           "torx: cannot derive a torus for %lu nodes (%d tasks, %lu per node): "
                           "the balanced shape %lux%lux%lu has a dimension above %d; set "
                           "TORX_TORUS to a shape with enough slots, e.g. TORX_TORUS=%lux%lux%lu",
                           nnodes, ntasks, t, d[0], d[1], d[2], TORXP_DIM_MAX, c, c, c);
    }
    *shape = (torx_shape_t){(uint8_t)d[0], (uint8_t)d[1], (uint8_t)d[2], (uint8_t)t};
    return TORX_OK;
}

/* A size that must be a power of two in lo..hi, or 0 when zero_off (the
 * feature turned off); def when unset. */
static torx_status_t env_pow2(const char *name, long lo, long hi, long def, int zero_off, long *out)
{
    torx_status_t rc = torx_env_int(name, zero_off ? 0 : lo, hi, def, out);
    if (rc != TORX_OK || (zero_off && *out == 0))
        return rc;
    if (*out < lo || (*out & (*out - 1)))
        return torxp_error(TORX_ERR_ENV,
                           "torx: %s='%s' is not %sa power of two in %ld..%ld (e.g. %ld)", name,
                           getenv(name), zero_off ? "0 or " : "", lo, hi, def);
    return TORX_OK;
}

torx_status_t torxp_env_read(torxp_env_t *env)
{
    static const char *const bulk_words[] = {"auto", "cma", "fifo", NULL};
    _Static_assert(TORXP_BULK_AUTO == 0 && TORXP_BULK_CMA == 1 && TORXP_BULK_FIFO == 2,
                   "bulk_words follows the TORXP_BULK_* order");
    if (!env)
        return torxp_error(TORX_ERR_INVAL, "torx: torxp_env_read: env is NULL");
    torxp_env_t e;
    torx_status_t rc;
    if ((rc = torx_env_int("TORX_CHAOS", 0, INT32_MAX, 0, &e.chaos_seed)) != TORX_OK)
        return rc;
    if ((rc = env_pow2("TORX_FIFO_PACKETS", 16, 65536, 128, 0, &e.fifo_packets)) != TORX_OK)
        return rc;
    if ((rc = torx_env_choice("TORX_BULK", bulk_words, TORXP_BULK_AUTO, &e.bulk_mode)) != TORX_OK)
        return rc;
    if ((rc = torx_env_int("TORX_VERBOSE", -1, 3, 0, &e.verbose)) != TORX_OK)
        return rc;
    if ((rc = env_pow2("TORX_STAGE_BYTES", 4096, 1L << 24, 1L << 20, 1, &e.stage_bytes)) != TORX_OK)
        return rc;
    if ((rc = torx_env_int("TORX_STAGE_REWIND_MAX", 0, 1L << 24, TORXP_STAGE_REWIND_MAX_DEFAULT,
                           &e.stage_rewind_max)) != TORX_OK)
        return rc;
    if ((rc = env_pow2("TORX_MSTAGE_BYTES", 65536, 1L << 26, 1L << 22, 1, &e.mstage_bytes)) !=
        TORX_OK)
        return rc;
    /* Shared gets: below two pieces the owner has nothing to take. */
    if ((rc = torx_env_int("TORX_BULK_SHARE_MIN", 0, LONG_MAX, TORXP_BULK_SHARE_MIN_DEFAULT,
                           &e.bulk_share_min)) != TORX_OK)
        return rc;
    if (e.bulk_share_min && e.bulk_share_min < 2 * (long)TORXP_BULK_SHARE_PIECE)
        return torxp_error(TORX_ERR_ENV,
                           "torx: TORX_BULK_SHARE_MIN='%s' is neither 0 (gets not shared) nor at "
                           "least two pieces of %u bytes",
                           getenv("TORX_BULK_SHARE_MIN"), TORXP_BULK_SHARE_PIECE);
    /* torx_bulk_cost given instead of measured: the same choice on every
     * run, and tests that do not depend on this machine's copy speeds. */
    if ((rc = torx_env_int("TORX_BULK_COST", 0, 100000, 0, &e.bulk_cost)) != TORX_OK)
        return rc;
    *env = e;
    return TORX_OK;
}
