/* The traffic patterns shared by bench/sim/sim_flowcheck.c (SimGrid flows)
 * and bench/sim/sim_linkcheck.c (torx packets), so both run exactly the same
 * messages. Nodes are numbered as torx's XYZT map numbers ranks: node
 * x + X * (y + Y * z). Plain C, no torx and no SimGrid. */
#ifndef FLOWCHECK_PATTERNS_H
#define FLOWCHECK_PATTERNS_H

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fc_msg {
    int src, dst;
    long bytes;
    int index; /* in the whole pattern */
} fc_msg_t;

/* A pattern, or (only >= 0) the part of it that one node sends or
 * receives, so that a task of a large job keeps O(its messages). */
typedef struct fc_plan {
    int only;
    int total; /* messages in the whole pattern */
    int nmsgs; /* in msgs[] */
    int cap;
    fc_msg_t *msgs;
    int *nin, *nout; /* messages each node receives and sends (only < 0) */
    int nnamed;      /* messages 0..nnamed-1 are reported one by one */
} fc_plan_t;

/* A count: digits only, at most 2^31 - 1; -1 when it is not one. */
static inline long fc_parse_count(const char *s)
{
    if (!s || !*s || strspn(s, "0123456789") != strlen(s))
        return -1;
    errno = 0;
    const long v = strtol(s, NULL, 10);
    return errno || v > INT_MAX ? -1 : v;
}

/* "XxYxZ", each extent 1..255. */
static inline int fc_parse_torus(const char *s, unsigned dims[3], char *why, size_t whylen)
{
    unsigned x, y, z;
    char end;
    if (sscanf(s, "%ux%ux%u%c", &x, &y, &z, &end) != 3 || !x || !y || !z || x > 255 || y > 255 ||
        z > 255) {
        snprintf(why, whylen, "torus \"%s\" is not XxYxZ with extents 1 to 255", s);
        return -1;
    }
    dims[0] = x, dims[1] = y, dims[2] = z;
    return 0;
}

static inline int fc_node(const unsigned d[3], unsigned x, unsigned y, unsigned z)
{
    return (int)(x + d[0] * (y + d[1] * z));
}

/* Adds message `index` of the pattern, if it is one p keeps. */
static inline int fc_add(fc_plan_t *p, int index, int src, int dst, long bytes)
{
    if (p->only >= 0 && src != p->only && dst != p->only)
        return 0;
    if (p->nmsgs == p->cap) {
        const int cap = p->cap ? 2 * p->cap : 64;
        fc_msg_t *m = realloc(p->msgs, (size_t)cap * sizeof *m);
        if (!m)
            return -1;
        p->msgs = m;
        p->cap = cap;
    }
    p->msgs[p->nmsgs++] = (fc_msg_t){src, dst, bytes, index};
    if (p->nout) {
        p->nout[src]++;
        p->nin[dst]++;
    }
    return 0;
}

static inline void fc_plan_free(fc_plan_t *p)
{
    free(p->msgs);
    free(p->nin);
    free(p->nout);
    memset(p, 0, sizeof *p);
}

/* Fills p with pattern `name` on a torus of extents d (wrap: 1 for a
 * torus), messages of `bytes` bytes; hops: the distance (hops) or the
 * messages per node (stream); only: a node, or -1 for all. 0, or -1 with
 * the reason in why. */
static inline int fc_plan(const char *name, const unsigned d[3], int wrap, long bytes, long hops,
                          int only, fc_plan_t *p, char *why, size_t whylen)
{
    memset(p, 0, sizeof *p);
    p->only = only;
    const unsigned n = d[0] * d[1] * d[2];
    long cap;
    if (!strcmp(name, "hops") || !strcmp(name, "share") || !strcmp(name, "line"))
        cap = 2;
    else if (!strcmp(name, "fanout"))
        cap = 6;
    else if (!strcmp(name, "alltoall"))
        cap = (long)n * (n - 1);
    else if (!strcmp(name, "stream"))
        cap = (long)n * hops;
    else {
        snprintf(why, whylen, "pattern \"%s\" is not hops, share, fanout, alltoall, line or stream",
                 name);
        return -1;
    }
    if (bytes < 1 || hops < 1 || cap > INT_MAX / 2) {
        snprintf(why, whylen, "bytes and hops must be at least 1 (and the pattern smaller)");
        return -1;
    }
    if (only < 0) {
        p->nin = calloc(n, sizeof *p->nin);
        p->nout = calloc(n, sizeof *p->nout);
        if (!p->nin || !p->nout) {
            fc_plan_free(p);
            snprintf(why, whylen, "out of memory");
            return -1;
        }
    }
    int bad = 0;
    p->total = (int)cap;
    if (!strcmp(name, "hops")) {
        /* X first, then Y, then Z, each at most half way round (a torus) */
        unsigned to[3] = {0, 0, 0};
        long left = hops;
        for (int k = 0; k < 3 && left; k++) {
            const unsigned most = wrap ? d[k] / 2 : d[k] - 1;
            to[k] = (unsigned)(left < (long)most ? left : (long)most);
            left -= to[k];
        }
        if (left) {
            snprintf(why, whylen, "no node is %ld hops from (0,0,0) on this torus", hops);
            fc_plan_free(p);
            return -1;
        }
        p->total = 1;
        bad |= fc_add(p, 0, 0, fc_node(d, to[0], to[1], to[2]), bytes);
    } else if (!strcmp(name, "share") || !strcmp(name, "line")) {
        const int line = !strcmp(name, "line");
        if (d[0] < (wrap ? 7u : 4u)) {
            snprintf(why, whylen, "%s needs X of at least %u, so that its route stays on the line",
                     name, wrap ? 7u : 4u);
            fc_plan_free(p);
            return -1;
        }
        bad |= fc_add(p, 0, 0, fc_node(d, line ? 3 : 2, 0, 0), bytes);
        bad |= fc_add(p, 1, 1, fc_node(d, 2, 0, 0), bytes);
        p->nnamed = 2;
    } else if (!strcmp(name, "fanout")) {
        for (int k = 0; k < 3; k++) {
            if (d[k] < 3 || !wrap) {
                snprintf(why, whylen, "fanout needs a torus of extents 3 or more");
                fc_plan_free(p);
                return -1;
            }
            unsigned up[3] = {0, 0, 0}, down[3] = {0, 0, 0};
            up[k] = 1;
            down[k] = d[k] - 1;
            bad |= fc_add(p, 2 * k, 0, fc_node(d, up[0], up[1], up[2]), bytes);
            bad |= fc_add(p, 2 * k + 1, 0, fc_node(d, down[0], down[1], down[2]), bytes);
        }
    } else if (!strcmp(name, "alltoall")) {
        /* message s * (n - 1) + k - 1: from s to s + k (mod n), so that each
         * node's messages go in order of destination, starting after itself;
         * one node's part alone costs O(n), not O(n^2) */
        for (unsigned s = 0; s < n; s++) {
            if (only >= 0 && s != (unsigned)only) {
                const unsigned k = ((unsigned)only + n - s) % n; /* s sends to only */
                bad |= fc_add(p, (int)(s * (n - 1) + k - 1), (int)s, only, bytes);
                continue;
            }
            for (unsigned k = 1; k < n; k++)
                bad |= fc_add(p, (int)(s * (n - 1) + k - 1), (int)s, (int)((s + k) % n), bytes);
        }
    } else { /* stream: message m * n + s from s to its +X neighbour */
        if (d[0] < 2) {
            snprintf(why, whylen, "stream needs X of at least 2");
            fc_plan_free(p);
            return -1;
        }
        for (long m = 0; m < hops; m++) {
            if (only >= 0) {
                const unsigned x = (unsigned)only % d[0];
                const int left = only - (int)x + (int)((x + d[0] - 1) % d[0]);
                bad |= fc_add(p, (int)(m * n) + only, only, only - (int)x + (int)((x + 1) % d[0]),
                              bytes);
                bad |= fc_add(p, (int)(m * n) + left, left, only, bytes);
                continue;
            }
            for (unsigned s = 0; s < n; s++) {
                const unsigned x = s % d[0];
                bad |= fc_add(p, (int)(m * n + s), (int)s, (int)(s - x + (x + 1) % d[0]), bytes);
            }
        }
    }
    if (bad) {
        fc_plan_free(p);
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    return 0;
}

#endif
