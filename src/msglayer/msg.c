/* The message layer's core: the protocol table, init and finalize, the
 * advance loop (peek -> dispatch by packet type -> consume), waiting without
 * burning a core, accessors and counters. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "config.h" /* TORX_SYSCONFDIR */
#include "msg_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

const torxm_proto_t torxm_protocols[TORX_PROTO_COUNT] = {
    [TORX_PROTO_AUTO] = {.name = "auto"},
    [TORX_PROTO_ONEPKT] = {.name = "one-packet",
                           .push = torxm_onepkt_push,
                           .rx = {{TORXM_PKT_ONEPKT, torxm_onepkt_rx},
                                  {TORXM_PKT_LINE, torxm_line_rx}}},
    [TORX_PROTO_EAGER] = {.name = "eager",
                          .push = torxm_eager_push,
                          .rx = {{TORXM_PKT_EAGER_FIRST, torxm_eager_first_rx},
                                 {TORXM_PKT_EAGER_MORE, torxm_eager_more_rx},
                                 {TORXM_PKT_EAGER_STAGED, torxm_staged_rx},
                                 {TORXM_PKT_EAGER_PIECE, torxm_piece_rx}}},
    [TORX_PROTO_ADAPTIVE] = {.name = "adaptive",
                             .push = torxm_adapt_push,
                             .rx = {{TORXM_PKT_ADAPT_FIRST, torxm_adapt_first_rx},
                                    {TORXM_PKT_ADAPT_MORE, torxm_adapt_more_rx},
                                    {TORXM_PKT_ADAPT_TOKEN, torxm_adapt_token_rx}}},
    [TORX_PROTO_RZV] = {.name = "rendezvous",
                        .push = torxm_rzv_push,
                        .rx = {{TORXM_PKT_RZV_SCOUT, torxm_scout_rx},
                               {TORXM_PKT_RZV_CTS, torxm_cts_rx},
                               {TORXM_PKT_RZV_DATA, torxm_rzv_data_rx},
                               {TORXM_PKT_RZV_ACK, torxm_ack_rx},
                               {TORXM_PKT_RZV_PIECE, torxm_rzv_piece_rx}}},
    [TORX_PROTO_VN] = {.name = "vn",
                       .push = torxm_vn_push,
                       .rx = {{TORXM_PKT_VN_SCOUT, torxm_scout_rx},
                              {TORXM_PKT_VN_ACK, torxm_ack_rx},
                              {TORXM_PKT_VN_STAGED, torxm_staged_rx},
                              {TORXM_PKT_VN_PIECE, torxm_piece_rx}}},
};

/* Packets taken per advance: enough to drain a burst, few enough that the
 * send queues and control packets get their turn. */
#define ADVANCE_BUDGET 64

/* Waiting: idle advances spun before yielding, yields before sleeping on
 * the device's doorbell (torx_pkt_wait), and the longest sleep (deadlines
 * and the bulk liveness checks run between sleeps). Naps serve where no
 * doorbell rings: sends waiting for room at a peer, the final barrier. On a
 * device with exact waits (TORXP_CAP_EXACT_WAIT) a wait starts past the
 * spins and yields (wait_until). */
#define WAIT_SPINS 4096u
#define WAIT_YIELDS 4096u
#define WAIT_SLEEP_MS 20
#define WAIT_NAP_NS 20000L      /* first naps */
#define WAIT_NAP_MAX_NS 200000L /* naps grow to this the longer the wait stays idle */

#define FINALIZE_TIMEOUT_S 120.0
/* The job's traffic totals (TORX_STATS) are one collective-network round
 * after the final barrier; a task that never joins it costs this long. */
#define STATS_TOTAL_TIMEOUT_S 10.0

#define COOKIE_NONE UINT32_MAX

/* ---- Init ------------------------------------------------------------------------ */

static const char *const mode_names[] = {"heater", "co", "vn", NULL};
/* In torx_rzv_data_t order. */
static const char *const rzv_data_names[] = {"auto", "bulk", "packets", "staged", NULL};

static void peer_init(const torx_ctx_t *ctx, torxm_peer_t *p, int rank);

/* TORX_VERBOSE's words for how rendezvous data moves to a task on this
 * host (auto: the default way, TORXM_ASK_DEFAULT, here, and why). */
static void rzv_data_describe(const torx_ctx_t *ctx, char *buf, size_t len)
{
    const unsigned cost = torx_bulk_cost(ctx->dev, ctx->self);
    torxm_peer_t self; /* as this task's own record would be: no page for it yet */
    peer_init(ctx, &self, ctx->rank);
    const torxm_path_in_t in = torxm_path_inputs(ctx, &self, TORXM_ASK_DEFAULT, 0, 0);
    const char *choice = torxm_path_choose(&in).path == TORXM_PATH_STAGED ? "staging" : "bulk get";
    switch (ctx->limits.rzv_data) {
    case TORX_RZV_DATA_BULK:
        snprintf(buf, len, "bulk get");
        break;
    case TORX_RZV_DATA_PACKETS:
        snprintf(buf, len, "packets");
        break;
    case TORX_RZV_DATA_STAGED:
        snprintf(buf, len, "%s%s", choice, ctx->co_net ? " (co mode)" : "");
        break;
    default:
        if (!cost)
            snprintf(buf, len, "bulk get (auto: its cost not measured)");
        else
            snprintf(buf, len,
                     "%s (auto: a bulk get takes %u%% of a copy's time here; a pair goes by the "
                     "mean of its two tasks' figures%s)",
                     choice, cost,
                     ctx->co_net           ? "; co mode"
                     : ctx->oversubscribed ? "; oversubscribed"
                                           : "");
        break;
    }
}

/* ---- The tuning file ------------------------------------------------------------ */

/* Defaults for the protocol boundaries, measured on the machine at hand by
 * bench/run-calibrate.sh (INSTALL=1 writes the file). The built-in ones
 * were measured on the development machine, where two copies through the
 * staging area beat one cross-memory copy; on other machines the opposite
 * holds, and a tuning file puts the boundaries where they belong there
 * (docs/tuning.md). The environment wins over the file, the file over the
 * built-in defaults. TORX_CONF names the file ("": none); without it,
 * SYSCONFDIR/torx.conf (configure's sysconfdir, PREFIX/etc by default),
 * which need not exist. Lines NAME=VALUE, '#' comments and blank lines; the
 * names in tuning_names only. */
static const char *const tuning_names[] = {"TORX_EAGER_LIMIT", "TORX_EAGER_IDLE_LIMIT",
                                           "TORX_STAGE_MIN", "TORX_STAGE_CHUNK",
                                           "TORX_STAGE_COST_MAX"};
#define TUNING_N (sizeof tuning_names / sizeof tuning_names[0])

typedef struct tuning {
    char path[512];
    char value[TUNING_N][24];
    int line[TUNING_N]; /* 0: not in the file */
    int used;           /* a boundary was taken from the file */
} tuning_t;

/* The tuning file libtorx was configured with: SYSCONFDIR/torx.conf. */
static void tuning_default_path(char *path, size_t len)
{
    snprintf(path, len, "%s/torx.conf", TORX_SYSCONFDIR);
}

static char *trim(char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    char *e = p + strlen(p);
    while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
        *--e = '\0';
    return p;
}

static torx_status_t tuning_read(tuning_t *t)
{
    memset(t, 0, sizeof *t);
    const char *named = getenv("TORX_CONF");
    if (named)
        snprintf(t->path, sizeof t->path, "%s", named);
    else
        tuning_default_path(t->path, sizeof t->path);
    if (!t->path[0])
        return TORX_OK;
    FILE *f = fopen(t->path, "r");
    if (!f) {
        if (!named && errno == ENOENT)
            return TORX_OK;
        return torxp_error(TORX_ERR_ENV, "torx: tuning file %s%s: %s", t->path,
                           named ? " (TORX_CONF)" : "", strerror(errno));
    }
    char buf[256];
    torx_status_t rc = TORX_OK;
    for (int ln = 1; rc == TORX_OK && fgets(buf, sizeof buf, f); ln++) {
        const size_t n = strlen(buf);
        if (n == sizeof buf - 1 && buf[n - 1] != '\n' && !feof(f)) {
            rc = torxp_error(TORX_ERR_ENV, "torx: tuning file %s line %d: longer than %zu bytes",
                             t->path, ln, sizeof buf - 2);
            break;
        }
        char *p = trim(buf);
        if (!*p || *p == '#')
            continue;
        char *eq = strchr(p, '=');
        if (!eq) {
            rc = torxp_error(TORX_ERR_ENV, "torx: tuning file %s line %d: '%s' is not NAME=VALUE",
                             t->path, ln, p);
            break;
        }
        *eq = '\0';
        const char *name = trim(p), *value = trim(eq + 1);
        size_t i = 0;
        while (i < TUNING_N && strcmp(name, tuning_names[i]) != 0)
            i++;
        if (i == TUNING_N)
            rc = torxp_error(TORX_ERR_ENV,
                             "torx: tuning file %s line %d: %s is not one of the boundaries it "
                             "may set (TORX_EAGER_LIMIT, TORX_EAGER_IDLE_LIMIT, TORX_STAGE_MIN, "
                             "TORX_STAGE_CHUNK, TORX_STAGE_COST_MAX)",
                             t->path, ln, name);
        else if (t->line[i])
            rc = torxp_error(TORX_ERR_ENV,
                             "torx: tuning file %s line %d: %s set again (first on line %d)",
                             t->path, ln, name, t->line[i]);
        else if (!*value || strlen(value) >= sizeof t->value[i])
            rc = torxp_error(TORX_ERR_ENV, "torx: tuning file %s line %d: %s has %s value", t->path,
                             ln, name, *value ? "too long a" : "no");
        else {
            snprintf(t->value[i], sizeof t->value[i], "%s", value);
            t->line[i] = ln;
        }
    }
    if (rc == TORX_OK && ferror(f))
        rc = torxp_error(TORX_ERR_ENV, "torx: tuning file %s: read error", t->path);
    fclose(f);
    return rc;
}

/* torx_env_int, falling back to the tuning file's value before def. */
static torx_status_t limit_int(tuning_t *t, const char *name, long lo, long hi, long def, long *out)
{
    const char *env = getenv(name);
    for (size_t i = 0; i < TUNING_N && !(env && *env); i++) {
        if (!t->line[i] || strcmp(name, tuning_names[i]) != 0)
            continue;
        char *end = NULL;
        errno = 0;
        const long v = strtol(t->value[i], &end, 10);
        if (end == t->value[i] || *end != '\0' || errno == ERANGE || v < lo || v > hi)
            return torxp_error(TORX_ERR_ENV,
                               "torx: tuning file %s line %d: %s=%s is not an integer in "
                               "%ld..%ld",
                               t->path, t->line[i], name, t->value[i], lo, hi);
        *out = v;
        t->used = 1;
        return TORX_OK;
    }
    return torx_env_int(name, lo, hi, def, out);
}

/* *lim from attr, or from the environment, the tuning file and the defaults;
 * tuning_used gets the tuning file's path when it set a boundary. */
static torx_status_t read_limits(const torx_init_attr_t *attr, torx_mode_t mode, torx_limits_t *lim,
                                 char *tuning_used, size_t len)
{
    tuning_used[0] = '\0';
    if (attr && attr->limits) {
        *lim = *attr->limits;
        if (lim->onepkt_limit > TORX_MSG_ONEPKT_MAX)
            return torxp_error(TORX_ERR_INVAL,
                               "torx: torx_init: limits onepkt_limit=%zu; it must be at most %d "
                               "(a packet's payload)",
                               lim->onepkt_limit, TORX_MSG_ONEPKT_MAX);
        if (lim->eager_limit > TORXM_STREAM_MAX || lim->adaptive_limit > TORXM_STREAM_MAX ||
            lim->idle_limit > TORXM_STREAM_MAX)
            return torxp_error(TORX_ERR_INVAL,
                               "torx: torx_init: limits eager_limit=%zu adaptive_limit=%zu "
                               "idle_limit=%zu; each must be at most %llu (32-bit offsets)",
                               lim->eager_limit, lim->adaptive_limit, lim->idle_limit,
                               (unsigned long long)TORXM_STREAM_MAX);
        if (lim->rzv_data < TORX_RZV_DATA_AUTO || lim->rzv_data > TORX_RZV_DATA_STAGED)
            return torxp_error(TORX_ERR_INVAL,
                               "torx: torx_init: limits rzv_data=%d; it must be a torx_rzv_data_t "
                               "(0 auto, 1 bulk, 2 packets, 3 staged)",
                               lim->rzv_data);
        if (lim->stage_min && (lim->stage_chunk < 1 || lim->stage_chunk > TORXM_STREAM_MAX))
            return torxp_error(TORX_ERR_INVAL,
                               "torx: torx_init: limits stage_min=%zu with stage_chunk=%zu; a "
                               "staged piece needs 1..%llu bytes",
                               lim->stage_min, lim->stage_chunk,
                               (unsigned long long)TORXM_STREAM_MAX);
        return TORX_OK;
    }
    long onepkt, eager, adaptive, stage_min, stage_chunk, idle, cost_max;
    int rzv;
    tuning_t t;
    tuning_t no_tuning = {0};
    torx_status_t rc;
    if ((rc = tuning_read(&t)) ||
        (rc = torx_env_int("TORX_ONEPKT_LIMIT", 0, TORX_MSG_ONEPKT_MAX, TORX_MSG_ONEPKT_MAX,
                           &onepkt)) ||
        (rc = limit_int(&t, "TORX_EAGER_LIMIT", 0, (long)TORXM_STREAM_MAX, TORXM_EAGER_LIMIT,
                        &eager)) ||
        (rc = torx_env_int("TORX_ADAPTIVE_LIMIT", 0, (long)TORXM_STREAM_MAX, 0, &adaptive)) ||
        (rc = torx_env_choice("TORX_RZV_DATA", rzv_data_names, 0, &rzv)) ||
        (rc = limit_int(&t, "TORX_STAGE_MIN", 0, (long)TORXM_STREAM_MAX, TORXM_STAGE_MIN,
                        &stage_min)) ||
        (rc = limit_int(&t, "TORX_STAGE_CHUNK", 256, 1L << 24, TORXM_STAGE_CHUNK, &stage_chunk)) ||
        /* co mode keeps the idle rule off unless the environment turns it
         * on: the file's figure was measured without a communication thread. */
        (rc = limit_int(mode == TORX_MODE_CO ? &no_tuning : &t, "TORX_EAGER_IDLE_LIMIT", 0,
                        (long)TORXM_STREAM_MAX, mode == TORX_MODE_CO ? 0 : TORXM_EAGER_IDLE_LIMIT,
                        &idle)) ||
        (rc = limit_int(&t, "TORX_STAGE_COST_MAX", 0, UINT16_MAX, TORXM_STAGE_COST_MAX, &cost_max)))
        return rc;
    *lim = (torx_limits_t){.onepkt_limit = (size_t)onepkt,
                           .eager_limit = (size_t)eager,
                           .adaptive_limit = (size_t)adaptive,
                           .rzv_data = rzv,
                           .stage_min = (size_t)stage_min,
                           .stage_chunk = (size_t)stage_chunk,
                           .idle_limit = (size_t)idle,
                           .stage_cost_max = (unsigned)cost_max};
    if (t.used)
        snprintf(tuning_used, len, "%s", t.path);
    return TORX_OK;
}

static torx_status_t read_mode(const torx_init_attr_t *attr, torx_mode_t *mode, int *tpn, int *cpn)
{
    int m;
    torx_status_t rc;
    if (attr && attr->mode >= 0) {
        if (attr->mode > TORX_MODE_VN)
            return torxp_error(TORX_ERR_INVAL,
                               "torx: torx_init: mode %d (expected 0..2, or -1 "
                               "for TORX_MODE)",
                               attr->mode);
        m = attr->mode;
    } else if ((rc = torx_env_choice("TORX_MODE", mode_names, TORX_MODE_HEATER, &m)) != TORX_OK) {
        return rc;
    }
    /* Unset: 0, "fit the host" (torxm_bind picks the node size once the
     * torus is known). vn's node is 2 cores, as the original's. */
    long cores;
    if ((rc = torx_env_int("TORX_CORES_PER_NODE", 1, 255, 0, &cores)) != TORX_OK)
        return rc;
    *mode = (torx_mode_t)m;
    *tpn = m == TORX_MODE_VN ? (cores ? (int)cores : 2) : 1;
    *cpn = m == TORX_MODE_VN ? *tpn : (int)cores;
    return TORX_OK;
}

/* Where the mapping in force came from, for the stats lines. */
static const char *map_origin(const torx_map_t *map)
{
    return map->order[0] ? map->order : map->path ? map->path : "(explicit)";
}

/* TORX_STATS and TORX_STATS_FILE: the per-destination byte counters, and
 * the traffic file this task appends its row to at finalize. Every task
 * opens the file now, so a bad path stops every task before any traffic;
 * rank 0 empties it and writes the header. The rows come after the final
 * barrier, which rank 0 reaches only after this, so none is lost to the
 * truncation. */
static torx_status_t stats_open(torx_ctx_t *ctx)
{
    const char *path = getenv("TORX_STATS_FILE");
    if (path && *path) {
        const int flags =
            O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (ctx->rank == 0 ? O_TRUNC : 0);
        if ((ctx->stats_fd = open(path, flags, 0666)) < 0)
            return torxp_error(TORX_ERR_ENV,
                               "torx: TORX_STATS_FILE='%s': cannot open it to append this task's "
                               "traffic row: %s (expected the path of a file in a writable "
                               "directory)",
                               path, strerror(errno));
        const torx_shape_t s = ctx->map.shape;
        if (ctx->rank == 0 &&
            dprintf(ctx->stats_fd,
                    "# torx traffic matrix (TORX_STATS_FILE): one row per source rank, in any "
                    "order: SRC, then the data bytes it sent to ranks 0..%d\n"
                    "# job of %d task%s on torus %ux%ux%u, %u task%s per node, mapping %s\n",
                    ctx->size - 1, ctx->size, ctx->size == 1 ? "" : "s", s.x, s.y, s.z, s.t,
                    s.t == 1 ? "" : "s", map_origin(&ctx->map)) < 0)
            return torxp_error(TORX_ERR_ENV, "torx: TORX_STATS_FILE='%s': cannot write: %s", path,
                               strerror(errno));
    }
    if ((ctx->stats_print || ctx->stats_fd >= 0) &&
        !(ctx->bytes_to = torxp_calloc((size_t)ctx->size, sizeof *ctx->bytes_to)))
        return torxp_error(TORX_ERR_NOMEM,
                           "torx: out of memory for the traffic counters of %d "
                           "ranks",
                           ctx->size);
    return TORX_OK;
}

/* A packet's receive function on a device that charges the task's core
 * (sim): the protocol's, then the charge of the bytes it copied into user
 * buffers (ctx->copied), once the packet is done with. Every copy of the
 * receive paths happens inside a receive function, so none is missed; the
 * shm hot path only counts them (one add), and tests nothing. */
static void charged_rx(torx_ctx_t *ctx, torxm_peer_t *peer, const torx_pkt_hdr_t *pkt)
{
    const uint64_t before = ctx->copied;
    ctx->charged_rx[torxm_sw_type(pkt)](ctx, peer, pkt);
    if (ctx->copied != before)
        torxp_charge(ctx->dev, TORXP_CPU_COPY, (size_t)(ctx->copied - before));
}

/* A handler on a device that charges the task's core (sim): the match's
 * charge, then the registered handler (arg: its entry in ctx->charged).
 * Installed in its place by torx_register, so that matching on the other
 * devices tests nothing for it. */
static void charged_handler(torx_ctx_t *ctx, void *arg, const torx_recv_info_t *info,
                            torx_recv_t *recv)
{
    const torxm_handler_t *h = arg;
    torxp_charge(ctx->dev, TORXP_CPU_MATCH, 1);
    h->fn(ctx, h->arg, info, recv);
}

void torxm_charges_start(torx_ctx_t *ctx)
{
    if (ctx->charges || !ctx->dev->ops->charge)
        return;
    ctx->charges = 1;
    for (unsigned type = 0; type < TORXM_PKT_NTYPES; type++)
        if (ctx->rx[type].fn) {
            ctx->charged_rx[type] = ctx->rx[type].fn;
            ctx->rx[type].fn = charged_rx;
        }
    for (int id = 0; id < TORX_MSG_HANDLERS; id++)
        if (ctx->handlers[id].fn) {
            ctx->charged[id] = ctx->handlers[id];
            ctx->handlers[id] = (torxm_handler_t){charged_handler, &ctx->charged[id]};
        }
}

static void build_dispatch(torx_ctx_t *ctx)
{
    for (unsigned p = 0; p < TORX_PROTO_COUNT; p++)
        for (unsigned i = 0; i < sizeof torxm_protocols[p].rx / sizeof torxm_protocols[p].rx[0];
             i++) {
            const unsigned type = torxm_protocols[p].rx[i].type;
            if (!type)
                break;
            assert(type < TORXM_PKT_NTYPES && !ctx->rx[type].fn);
            ctx->rx[type].fn = torxm_protocols[p].rx[i].fn;
            ctx->rx[type].proto = (uint8_t)p;
        }
}

static void free_rx_list(torxm_rx_t *r)
{
    for (torxm_rx_t *n; r; r = n) {
        n = r->next;
        free(r);
    }
}

static void ctx_free(torx_ctx_t *ctx)
{
    torxm_co_stop(ctx); /* before the device closes: the thread uses it */
    if (ctx->dev)
        torx_pkt_close(ctx->dev);
    for (torxm_ctrl_t *c = ctx->ctrl_head, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    for (torxm_ctrl_t *c = ctx->ctrl_free, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    free_rx_list(ctx->rx_free);
    free_rx_list(ctx->bulk);
    free_rx_list(ctx->deferred);
    free_rx_list(ctx->rx_done_head);
    for (torxm_early_t *e = ctx->early_free, *n; e; e = n) {
        n = e->next;
        free(e);
    }
    for (int k = 0; ctx->peer_pages && k < torxm_peer_npages(ctx); k++) {
        torxm_peer_t *page = ctx->peer_pages[k];
        for (int i = 0; page && i < torxm_peer_page_len(ctx, k); i++) {
            torxm_peer_t *p = &page[i];
            for (torxm_early_t *e = p->early, *n; e; e = n) {
                n = e->next;
                free(e);
            }
            free_rx_list(p->adapt);
            free(p->eager); /* a pooled record, off the free list while in use */
            free(p->way);
        }
        free(page);
    }
    /* Receive records still waiting for rendezvous packets live only in
     * the cookie table, marked as ours. */
    for (uint32_t i = 0; i < ctx->ncookies; i++)
        if (ctx->cookies[i].p && ctx->cookies[i].owned)
            free(ctx->cookies[i].p);
    free(ctx->cookies);
    free(ctx->peer_pages);
    free(ctx->bytes_to);
    if (ctx->stats_fd >= 0)
        close(ctx->stats_fd);
    torx_map_free(&ctx->map);
    if (ctx->owns_boot && ctx->boot->finalize)
        ctx->boot->finalize(ctx->boot);
    free(ctx);
}

torx_status_t torx_init(const torx_init_attr_t *attr, torx_ctx_t **out)
{
    if (!out)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_init: ctx output is NULL");
    *out = NULL;
    torx_ctx_t *ctx = torxp_calloc(1, sizeof *ctx);
    if (!ctx)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for the message-layer context");
    ctx->done_tail = &ctx->done_head;
    ctx->rx_done_tail = &ctx->rx_done_head;
    ctx->cookie_free = COOKIE_NONE;
    ctx->stats_fd = -1;

    torx_status_t rc = TORX_OK;
    if (attr && attr->boot) {
        ctx->boot = attr->boot;
    } else {
        if ((rc = torx_boot_pmi_init(&ctx->own_boot)) != TORX_OK) {
            free(ctx);
            return rc;
        }
        ctx->boot = &ctx->own_boot;
        ctx->owns_boot = 1;
    }
    ctx->rank = ctx->boot->rank;
    ctx->size = ctx->boot->size;
    if (ctx->size < 1 || ctx->size > TORXM_RANK_MAX + 1) {
        rc = torxp_error(TORX_ERR_INVAL, "torx: a job of %d tasks; the message layer takes 1..%d",
                         ctx->size, TORXM_RANK_MAX + 1);
        goto fail;
    }

    long stats;
    if ((rc = read_mode(attr, &ctx->mode, &ctx->tasks_per_node, &ctx->cores_per_node)) != TORX_OK ||
        (rc = read_limits(attr, ctx->mode, &ctx->limits, ctx->tuning_file,
                          sizeof ctx->tuning_file)) != TORX_OK ||
        (rc = torx_env_int("TORX_STATS", 0, 1, 0, &stats)) != TORX_OK)
        goto fail;
    ctx->stats_print = (int)stats;

    if (attr && attr->mapping) {
        torx_shape_t shape;
        if ((rc = torx_env_shape(ctx->size, ctx->tasks_per_node, &shape)) != TORX_OK ||
            (rc = torx_map_from_spec(attr->mapping, NULL, shape, ctx->size, &ctx->map)) != TORX_OK)
            goto fail;
    } else if ((rc = torx_map_from_env(ctx->size, ctx->tasks_per_node, &ctx->map)) != TORX_OK) {
        goto fail;
    }
    ctx->self = torx_map_coord(&ctx->map, ctx->rank);
    if ((rc = stats_open(ctx)) != TORX_OK)
        goto fail;

    /* a modelled machine's tasks have no host cores to bind to */
    if (!(torxp_device_caps(NULL) & TORXP_CAP_MODELLED) && (rc = torxm_bind(ctx)) != TORX_OK)
        goto fail;

    /* co: the communication thread injects the device's own bulk packets
     * while the task injects its sends. */
    const torx_pkt_attr_t pattr = {.boot = ctx->boot,
                                   .shape = ctx->map.shape,
                                   .self = ctx->self,
                                   .flags = ctx->mode == TORX_MODE_CO ? TORX_PKT_SHARED_INJECT : 0};
    if ((rc = torx_pkt_open(&pattr, &ctx->dev)) != TORX_OK)
        goto fail;
    if (ctx->dev->caps & TORXP_CAP_NO_BULK) {
        /* BG/L's way: the cores move rendezvous data in packets */
        if (ctx->limits.rzv_data == TORX_RZV_DATA_BULK) {
            rc = torxp_error(TORX_ERR_ENV,
                             "torx: TORX_RZV_DATA=bulk, but the %s device has no bulk transfers "
                             "here; use auto or packets",
                             torx_pkt_device_name(ctx->dev));
            goto fail;
        }
        if (ctx->limits.rzv_data == TORX_RZV_DATA_AUTO)
            ctx->limits.rzv_data = TORX_RZV_DATA_PACKETS;
    }

    /* The peers' records come on first contact (torxm_peer_touch). */
    if (!(ctx->peer_pages = torxp_calloc((size_t)torxm_peer_npages(ctx), sizeof(torxm_peer_t *)))) {
        rc = torxp_error(TORX_ERR_NOMEM, "torx: out of memory for the peer table of %d ranks",
                         ctx->size);
        goto fail;
    }
    build_dispatch(ctx);
    torxm_charges_start(ctx);
    if (ctx->limits.stage_min) {
        const size_t max = torx_stage_max(ctx->dev);
        ctx->stage_chunk =
            (uint32_t)(ctx->limits.stage_chunk < max ? ctx->limits.stage_chunk : max);
    }
    /* The shm device runs every task on this host. A device with exact
     * waits (sim) models the tasks' cores itself: the host's say nothing. */
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    ctx->oversubscribed = !torxm_exact_wait(ctx) && cpus > 0 && ctx->size > cpus;
    if (ctx->mode == TORX_MODE_CO && (rc = torxm_co_start(ctx)) != TORX_OK)
        goto fail;
    char rzv[160];
    rzv_data_describe(ctx, rzv, sizeof rzv);
    torxp_log(ctx->dev, 1,
              "message layer: mode %s, %d task(s) per node, one-packet limit %zu, eager limit "
              "%zu (%zu to an idle pair), adaptive limit %zu, rendezvous data by %s, staged "
              "from %zu bytes in pieces of %u%s%s%s",
              mode_names[ctx->mode], ctx->tasks_per_node, ctx->limits.onepkt_limit,
              ctx->limits.eager_limit,
              ctx->stage_chunk && ctx->limits.idle_limit > ctx->limits.eager_limit
                  ? ctx->limits.idle_limit
                  : ctx->limits.eager_limit,
              ctx->limits.adaptive_limit, rzv, ctx->limits.stage_min, ctx->stage_chunk,
              ctx->stage_chunk ? "" : " (staging off)",
              ctx->tuning_file[0] ? "; boundaries from the tuning file " : "", ctx->tuning_file);
    *out = ctx;
    return TORX_OK;

fail:
    ctx_free(ctx);
    return rc;
}

/* ---- Peers -------------------------------------------------------------------------- */

/* A peer's record as it starts: its coordinate, and whether the staging
 * area reaches it (and the pair then measures its rendezvous ways). */
static void peer_init(const torx_ctx_t *ctx, torxm_peer_t *p, int rank)
{
    *p = (torxm_peer_t){.rank = rank, .coord = torx_map_coord(&ctx->map, rank)};
    if (ctx->stage_chunk) {
        p->staged = (uint8_t)torx_stage_reaches(ctx->dev, p->coord);
        p->way_host = p->staged && rank != ctx->rank && torx_bulk_cost(ctx->dev, p->coord) != 0;
    }
}

torxm_peer_t *torxm_peer_touch(torx_ctx_t *ctx, int rank)
{
    const int k = rank >> TORXM_PEER_PAGE_SHIFT, n = torxm_peer_page_len(ctx, k);
    torxm_peer_t *page = torxp_malloc((size_t)n * sizeof *page);
    if (!page) {
        torxp_error(TORX_ERR_NOMEM,
                    "torx: rank %d: out of memory for the peer records of ranks %d..%d (%zu "
                    "bytes), wanted for rank %d",
                    ctx->rank, k << TORXM_PEER_PAGE_SHIFT, (k << TORXM_PEER_PAGE_SHIFT) + n - 1,
                    (size_t)n * sizeof *page, rank);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        peer_init(ctx, &page[i], (k << TORXM_PEER_PAGE_SHIFT) + i);
    ctx->peer_pages[k] = page;
    return &page[rank & (TORXM_PEER_PAGE - 1)];
}

/* The first packet from a rank of a page without records: makes the page,
 * then dispatches. Out of memory, the context fails (torx_advance returns
 * TORX_ERR_NOMEM from now on) and the packet is dropped. A tail call from
 * torxm_dispatch, so that the hot path saves no registers for it. */
static void __attribute__((noinline, cold))
dispatch_first(torx_ctx_t *ctx, const torx_pkt_hdr_t *pkt)
{
    const uint32_t src = torxm_sw_src(pkt);
    if (torxm_peer_touch(ctx, (int)src)) {
        torxm_dispatch(ctx, pkt);
        return;
    }
    ctx->malformed++;
    torxm_fail(ctx, TORX_ERR_NOMEM,
               "out of memory for the record of rank %u, whose packet arrived; dropped (%s)", src,
               torx_last_error());
}

/* ---- Advance ------------------------------------------------------------------------ */

static void __attribute__((noinline, cold)) bad_dispatch(torx_ctx_t *ctx, const torx_pkt_hdr_t *pkt)
{
    ctx->malformed++;
    torxp_error(TORX_ERR_PROTO,
                "torx: protocol error: a packet of type %u from rank %u (job of %d tasks); dropped",
                torxm_sw_type(pkt), torxm_sw_src(pkt), ctx->size);
    torxp_log(ctx->dev, 0, "%s", torx_last_error() + sizeof "torx: " - 1);
}

static int run_completions(torx_ctx_t *ctx)
{
    torxm_msg_t *m = ctx->done_head;
    ctx->done_head = NULL;
    ctx->done_tail = &ctx->done_head;
    int n = 0;
    while (m) {
        torxm_msg_t *next = m->next; /* done may send m again */
        const torx_send_done_fn fn = m->done;
        void *arg = m->arg;
        m->state = TORXM_MSG_IDLE;
        fn(ctx, (torx_msg_t *)(void *)m, arg);
        m = next;
        n++;
    }
    return n;
}

void torxm_dispatch(torx_ctx_t *ctx, const torx_pkt_hdr_t *pkt)
{
    const unsigned type = torxm_sw_type(pkt);
    const uint32_t src = torxm_sw_src(pkt);
    if (TORXM_LIKELY(type < TORXM_PKT_NTYPES && ctx->rx[type].fn && src < (uint32_t)ctx->size)) {
        torxm_peer_t *page = ctx->peer_pages[src >> TORXM_PEER_PAGE_SHIFT];
        if (TORXM_UNLIKELY(!page)) {
            dispatch_first(ctx, pkt);
            return;
        }
        ctx->stats[ctx->rx[type].proto].packets_received++;
        ctx->rx[type].fn(ctx, &page[src & (TORXM_PEER_PAGE - 1)], pkt);
    } else {
        bad_dispatch(ctx, pkt);
    }
}

/* The failure torx_advance reports: the context's own, or the device's
 * (which then becomes the context's). */
static int __attribute__((noinline, cold)) ctx_failed(torx_ctx_t *ctx)
{
    if (ctx->failed == TORX_OK)
        torxm_fail(ctx, ctx->dev->failed, "the packet device failed: %s", torx_last_error());
    else /* what came since (a dropped packet, say) is not why it failed */
        torxp_error(ctx->failed, "torx: rank %d: %s", ctx->rank, ctx->failed_why);
    return ctx->failed;
}

int torx_advance(torx_ctx_t *ctx)
{
    if (TORXM_UNLIKELY(ctx->in_advance))
        return 0;
    if (TORXM_UNLIKELY(ctx->failed != TORX_OK || ctx->dev->failed != TORX_OK))
        return ctx_failed(ctx);
    ctx->in_advance = 1;
    int n = 0;
    if (TORXM_UNLIKELY(ctx->ctrl_head != NULL))
        n += torxm_ctrl_drain(ctx);
    if (TORXM_UNLIKELY(ctx->busy != NULL))
        n += torxm_push_all(ctx);
    if (ctx->co_net) {
        /* co: the communication thread reads the network; take what it
         * staged and finished. */
        n += torxm_co_advance(ctx);
        /* the task's side touches no device: where spinning must cost
         * simulated time (sim), an idle advance costs a poll */
        if (n == 0 && TORXM_UNLIKELY(torxm_exact_wait(ctx)))
            torxp_yield(ctx->dev);
    } else {
        if (TORXM_UNLIKELY(ctx->bulk != NULL))
            n += torxm_bulk_progress(ctx);
        if (torx_pkt_poll(ctx->dev)) {
            /* After the first packet, only its queue: the scan of the
             * others, which mostly finds nothing, waits for the next poll
             * instead of delaying the completion just made. */
            const torx_pkt_hdr_t *pkt = torx_pkt_peek(ctx->dev);
            for (int i = 0; pkt && i < ADVANCE_BUDGET; i++) {
                torxm_dispatch(ctx, pkt);
                torx_pkt_consume(ctx->dev);
                n++;
                /* A torx_wait whose flag a handler just set returns now,
                 * the packets behind left for the next advance: in a ring
                 * whose messages piled up behind a late one, draining a
                 * whole budget first held every member's next send back
                 * (docs/message-layer.md#waiting). */
                if (TORXM_UNLIKELY(ctx->wait_flag != NULL) && *ctx->wait_flag)
                    break;
                pkt = i + 1 < ADVANCE_BUDGET ? torx_pkt_peek_next(ctx->dev) : NULL;
            }
        }
    }
    if (ctx->done_head)
        n += run_completions(ctx);
    if (TORXM_UNLIKELY(ctx->rx_done_head != NULL))
        n += torxm_rx_done_run(ctx);
    if (TORXM_UNLIKELY(ctx->advance_hook != NULL))
        n += ctx->advance_hook(ctx->advance_hook_arg);
    ctx->in_advance = 0;
    return n;
}

void torx_idle(torx_ctx_t *ctx)
{
    if (ctx && ctx->co_net && torxm_exact_wait(ctx) && !ctx->in_advance)
        torxm_co_wait_news(ctx);
}

torx_status_t torx_advance_hook(torx_ctx_t *ctx, int (*fn)(void *arg), void *arg)
{
    if (ctx == NULL)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_advance_hook: ctx is NULL");
    if (fn && ctx->advance_hook && (ctx->advance_hook != fn || ctx->advance_hook_arg != arg))
        return torxp_error(TORX_ERR_INVAL, "torx: torx_advance_hook: another hook is set");
    ctx->advance_hook = fn;
    ctx->advance_hook_arg = fn ? arg : NULL;
    return TORX_OK;
}

/* One idle round of a wait: spin, then yield, then sleep until a packet
 * comes (doorbell: waiting for packets), or nap (!doorbell, or our sends wait
 * for room at a peer). deadline < 0: none. */
static void idle_backoff(torx_ctx_t *ctx, unsigned idle, double deadline, int doorbell)
{
    if (ctx->co_net && doorbell) {
        torxm_co_idle(ctx, idle, deadline);
        return;
    }
    if (!ctx->oversubscribed && idle < WAIT_SPINS)
        return;
    if (idle < WAIT_SPINS + WAIT_YIELDS) {
        torxp_yield(ctx->dev);
        return;
    }
    /* Exact waits (sim): a wait for room polls; sends that wait for a
     * packet sleep until one comes, as an idle task does. */
    if (torxm_exact_wait(ctx) && (ctx->busy || ctx->ctrl_head)) {
        if (torxm_fifo_was_full(ctx)) {
            torxp_yield(ctx->dev);
            return;
        }
        if (doorbell) {
            torx_pkt_wait(ctx->dev, WAIT_SLEEP_MS);
            return;
        }
    }
    /* A hook's work (the collective network's rounds) rings no doorbell,
     * except on a device with exact waits, whose wait ends when a round
     * is due (sim). */
    if (doorbell && !ctx->busy && !ctx->ctrl_head &&
        (!ctx->advance_hook || torxm_exact_wait(ctx))) {
        int ms = WAIT_SLEEP_MS;
        if (deadline >= 0) {
            const double left = deadline - torxp_now_s(ctx->dev);
            if (left <= 0)
                return;
            if (left * 1e3 < ms)
                ms = (int)(left * 1e3) + 1;
        }
        torx_pkt_wait(ctx->dev, ms);
        return;
    }
    /* Every 256 naps the nap grows by WAIT_NAP_NS: a waiter idle for long
     * costs less, one idle briefly still answers fast. */
    long ns = WAIT_NAP_NS * (long)(1 + (idle - WAIT_SPINS - WAIT_YIELDS) / 256);
    if (ns > WAIT_NAP_MAX_NS)
        ns = WAIT_NAP_MAX_NS;
    torxp_nap(ctx->dev, (uint64_t)ns);
}

/* The message layer's one wait loop: advances until ready(ctx, arg)
 * answers other than TORX_AGAIN and returns that answer, or an advance's
 * error. While idle it backs off (idle_backoff; doorbell 0 where no packet
 * ends the wait). deadline >= 0: past it, TORX_AGAIN; the clock is read
 * only while idle, and rarely while spinning. On a device with exact waits
 * the idle count starts past the spins and yields, so every idle round
 * sleeps on the device and reads its clock. Inlined, so that each wait's
 * ready is too. */
static inline __attribute__((always_inline)) torx_status_t
wait_until(torx_ctx_t *ctx, torx_status_t (*ready)(torx_ctx_t *, void *), void *arg,
           double deadline, int doorbell)
{
    const unsigned idle0 = torxm_exact_wait(ctx) ? WAIT_SPINS + WAIT_YIELDS : 0;
    unsigned idle = idle0;
    torx_status_t st;
    while ((st = ready(ctx, arg)) == TORX_AGAIN) {
        const int n = torx_advance(ctx);
        if (TORXM_UNLIKELY(n < 0))
            return (torx_status_t)n;
        if (n) {
            idle = idle0;
            continue;
        }
        idle_backoff(ctx, idle, deadline, doorbell);
        if (idle < UINT32_MAX)
            idle++;
        if (deadline >= 0 && ((idle & 255) == 0 || idle >= WAIT_SPINS + WAIT_YIELDS) &&
            torxp_now_s(ctx->dev) > deadline)
            return TORX_AGAIN;
    }
    return st;
}

static torx_status_t flag_set(torx_ctx_t *ctx, void *flag)
{
    (void)ctx;
    return *(volatile int *)flag ? TORX_OK : TORX_AGAIN;
}

torx_status_t torx_wait_timeout(torx_ctx_t *ctx, volatile int *flag, double timeout_s)
{
    if (!ctx || !flag)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_wait: %s is NULL", ctx ? "flag" : "ctx");
    const double deadline = timeout_s >= 0 ? torxp_now_s(ctx->dev) + timeout_s : -1;
    volatile int *const outer = ctx->wait_flag;
    ctx->wait_flag = flag;
    const torx_status_t rc = wait_until(ctx, flag_set, (void *)flag, deadline, 1);
    ctx->wait_flag = outer;
    if (rc == TORX_AGAIN)
        return *flag ? TORX_OK : TORX_AGAIN;
    return rc;
}

torx_status_t torx_wait(torx_ctx_t *ctx, volatile int *flag)
{
    return torx_wait_timeout(ctx, flag, -1);
}

/* ---- Finalize ----------------------------------------------------------------------- */

/* torx_finalize's drain: done once nothing is left to send, receive or
 * complete. Deferred messages are not work: only torx_accept moves them
 * (see torx_finalize). */
static torx_status_t drained(torx_ctx_t *ctx, void *arg)
{
    (void)arg;
    return ctx->busy || ctx->ctrl_head || ctx->awaiting || ctx->inflight_rx || ctx->done_head ||
                   ctx->rx_done_head || ctx->co_wait
               ? TORX_AGAIN
               : TORX_OK;
}

/* torx_finalize's final barrier on the global interrupt. */
static torx_status_t barrier_done(torx_ctx_t *ctx, void *arg)
{
    (void)arg;
    return torx_gi_poll(ctx->dev);
}

/* This task's traffic row, "SRC B0 .. B(N-1)", appended in one write so
 * that the rows of tasks sharing the file do not interleave. */
static void stats_write_row(const torx_ctx_t *ctx)
{
    const size_t cap = (size_t)ctx->size * 21 + 24; /* 20 digits and a blank per count */
    char *row = torxp_malloc(cap);
    if (!row) {
        torxp_log(ctx->dev, 0, "stats: no memory for the traffic row; TORX_STATS_FILE lacks it");
        return;
    }
    size_t len = (size_t)snprintf(row, cap, "%d", ctx->rank);
    for (int d = 0; d < ctx->size; d++)
        len +=
            (size_t)snprintf(row + len, cap - len, " %llu", (unsigned long long)ctx->bytes_to[d]);
    row[len++] = '\n';
    for (const char *p = row; len > 0;) {
        const ssize_t w = write(ctx->stats_fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            torxp_log(ctx->dev, 0, "stats: writing the traffic row to TORX_STATS_FILE failed: %s",
                      w < 0 ? strerror(errno) : "nothing written");
            break;
        }
        p += w;
        len -= (size_t)w;
    }
    free(row);
}

/* The job's sums of this task's counters: one collective-network round.
 * 0 when it did not complete. */
static int stats_job_totals(const torx_ctx_t *ctx, const torx_hop_bytes_t *mine,
                            torx_hop_bytes_t *job)
{
    uint64_t lane[TORX_CN_PACKET_BYTES / sizeof(uint64_t)] = {mine->bytes, mine->hop_bytes,
                                                              mine->local_bytes};
    const double deadline = torxp_now_s(ctx->dev) + STATS_TOTAL_TIMEOUT_S;
    torx_status_t rc;
    while ((rc = torx_cn_inject(ctx->dev, TORX_CN_ADD, TORX_CN_U64, 0, lane)) == TORX_NO_ROOM)
        if (torxp_now_s(ctx->dev) > deadline)
            return 0;
    if (rc != TORX_OK)
        return 0;
    while ((rc = torx_cn_read(ctx->dev, lane)) == TORX_AGAIN) {
        if (torxp_now_s(ctx->dev) > deadline)
            return 0;
        torxp_yield(ctx->dev);
    }
    if (rc != TORX_OK)
        return 0;
    *job = (torx_hop_bytes_t){.bytes = lane[0], .hop_bytes = lane[1], .local_bytes = lane[2]};
    return 1;
}

/* The traffic lines of TORX_STATS: this task's bytes and hop-bytes under
 * the map in force, then (rank 0) the job's. joined: every task met the
 * final barrier, so all take part in the totals' round. */
static void print_traffic(const torx_ctx_t *ctx, int joined)
{
    const torx_shape_t s = ctx->map.shape;
    torx_hop_bytes_t hb;
    if (torx_map_hop_bytes_row(&ctx->map, ctx->rank, ctx->bytes_to, &hb) != TORX_OK) {
        torxp_log(ctx->dev, 0, "stats traffic    %s", torx_last_error() + sizeof "torx: " - 1);
        hb = (torx_hop_bytes_t){0};
    }
    torxp_log(ctx->dev, 0,
              "stats traffic    bytes=%llu hop_bytes=%llu hops_per_byte=%.3f local_bytes=%llu "
              "(torus %ux%ux%u, %u task%s per node, mapping %s)",
              (unsigned long long)hb.bytes, (unsigned long long)hb.hop_bytes,
              torx_hops_per_byte(&hb), (unsigned long long)hb.local_bytes, s.x, s.y, s.z, s.t,
              s.t == 1 ? "" : "s", map_origin(&ctx->map));
    torx_hop_bytes_t job;
    if (!joined)
        return;
    if (!stats_job_totals(ctx, &hb, &job)) {
        torxp_log(ctx->dev, 0,
                  "stats job: the totals' collective-network round did not "
                  "complete (does every task run with TORX_STATS=1?)");
        return;
    }
    if (ctx->rank == 0)
        torxp_log(ctx->dev, 0,
                  "stats job        bytes=%llu hop_bytes=%llu hops_per_byte=%.3f "
                  "local_bytes=%llu (%d tasks)",
                  (unsigned long long)job.bytes, (unsigned long long)job.hop_bytes,
                  torx_hops_per_byte(&job), (unsigned long long)job.local_bytes, ctx->size);
}

static void print_stats(const torx_ctx_t *ctx, int joined)
{
    for (unsigned p = TORX_PROTO_AUTO + 1; p < TORX_PROTO_COUNT; p++) {
        const torx_proto_stats_t *s = &ctx->stats[p];
        torxp_log(ctx->dev, 0,
                  "stats %-10s sent=%llu received=%llu bytes_sent=%llu bytes_received=%llu "
                  "packets_sent=%llu packets_received=%llu",
                  torxm_protocols[p].name, (unsigned long long)s->sent,
                  (unsigned long long)s->received, (unsigned long long)s->bytes_sent,
                  (unsigned long long)s->bytes_received, (unsigned long long)s->packets_sent,
                  (unsigned long long)s->packets_received);
    }
    const torx_data_stats_t *d = &ctx->data_stats;
    if (d->bulk || d->staged || d->packets)
        torxp_log(ctx->dev, 0,
                  "stats data       bulk=%llu bulk_bytes=%llu (%s) staged=%llu staged_bytes=%llu "
                  "packets=%llu packets_bytes=%llu",
                  (unsigned long long)d->bulk, (unsigned long long)d->bulk_bytes,
                  torx_bulk_path(ctx->dev), (unsigned long long)d->staged,
                  (unsigned long long)d->staged_bytes, (unsigned long long)d->packets,
                  (unsigned long long)d->packets_bytes);
    print_traffic(ctx, joined);
}

torx_status_t torx_finalize(torx_ctx_t *ctx)
{
    if (!ctx)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_finalize: ctx is NULL");
    if (ctx->in_advance)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_finalize called from a handler or callback");
    /* A failed context cannot drain or meet its peers: it only closes. */
    torx_status_t rc = ctx->failed;
    const double deadline = torxp_now_s(ctx->dev) + FINALIZE_TIMEOUT_S;
    /* Deferred messages nobody accepted: discarding them lets their senders
     * complete (they wait for our ack or clear-to-send) instead of timing out
     * in their own finalize. */
    const int discarded = torxm_deferred_discard(ctx);
    if (discarded)
        torxp_log(ctx->dev, 0,
                  "torx_finalize: %d deferred message(s) were never accepted (torx_accept); "
                  "discarded",
                  discarded);
    /* Drain: everything this task sends must leave, and the rendezvous it
     * takes part in must finish; advancing also serves the peers. */
    if (rc == TORX_OK && (rc = wait_until(ctx, drained, NULL, deadline, 1)) == TORX_AGAIN)
        rc = torxp_error(TORX_ERR_PEER,
                         "torx: torx_finalize on rank %d: after %.0f s, %s%s%s%s still "
                         "pending (a peer died or stopped advancing)",
                         ctx->rank, FINALIZE_TIMEOUT_S, ctx->busy ? "queued sends, " : "",
                         ctx->ctrl_head ? "control packets, " : "",
                         ctx->awaiting ? "rendezvous sends, " : "",
                         ctx->inflight_rx ? "rendezvous receives" : "");
    /* Final barrier on the global interrupt, still advancing: a peer may be
     * waiting for our token, ack or data. The barrier rings no doorbell. */
    if (rc == TORX_OK && (rc = torx_gi_arm(ctx->dev)) == TORX_OK &&
        (rc = wait_until(ctx, barrier_done, NULL, deadline, 0)) == TORX_AGAIN)
        rc = torxp_error(TORX_ERR_PEER,
                         "torx: torx_finalize on rank %d: the final barrier did not "
                         "complete in %.0f s (a peer died or never finalized)",
                         ctx->rank, FINALIZE_TIMEOUT_S);
    if (ctx->stats_print)
        print_stats(ctx, rc == TORX_OK);
    if (ctx->stats_fd >= 0)
        stats_write_row(ctx);
    torxm_rzv_way_log(ctx);
    ctx_free(ctx);
    return rc;
}

/* ---- Accessors ---------------------------------------------------------------------- */

int torx_rank(const torx_ctx_t *ctx)
{
    return ctx->rank;
}

int torx_size(const torx_ctx_t *ctx)
{
    return ctx->size;
}

torx_mode_t torx_mode(const torx_ctx_t *ctx)
{
    return ctx->mode;
}

int torx_tasks_per_node(const torx_ctx_t *ctx)
{
    return ctx->tasks_per_node;
}

const torx_map_t *torx_ctx_map(const torx_ctx_t *ctx)
{
    return &ctx->map;
}

torx_pkt_dev_t *torx_ctx_device(torx_ctx_t *ctx)
{
    return ctx->dev;
}

double torx_wtime(const torx_ctx_t *ctx)
{
    return torxp_now_s(ctx->dev);
}

const torx_limits_t *torx_ctx_limits(const torx_ctx_t *ctx)
{
    return &ctx->limits;
}

torx_status_t torx_register(torx_ctx_t *ctx, int id, torx_handler_fn fn, void *harg)
{
    if (!ctx || id < 0 || id >= TORX_MSG_HANDLERS)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_register: handler id %d (expected 0..%d)",
                           id, TORX_MSG_HANDLERS - 1);
    if (ctx->charges && fn) {
        ctx->charged[id] = (torxm_handler_t){fn, harg};
        ctx->handlers[id] = (torxm_handler_t){charged_handler, &ctx->charged[id]};
    } else {
        ctx->handlers[id] = (torxm_handler_t){fn, harg};
    }
    ctx->warned_handlers &= ~(1ull << id);
    return TORX_OK;
}

void torx_stats(const torx_ctx_t *ctx, torx_proto_stats_t out[TORX_PROTO_COUNT])
{
    memcpy(out, ctx->stats, sizeof ctx->stats);
}

void torx_stats_data(const torx_ctx_t *ctx, torx_data_stats_t *out)
{
    *out = ctx->data_stats;
}

const uint64_t *torx_stats_bytes_to(const torx_ctx_t *ctx)
{
    return ctx->bytes_to;
}

const char *torx_protocol_name(torx_protocol_t p)
{
    return (unsigned)p < TORX_PROTO_COUNT ? torxm_protocols[p].name : "unknown";
}

/* ---- Coprocessor work units ------------------------------------------------------------ */

torx_status_t torx_costart(torx_ctx_t *ctx, torx_cowork_fn fn, void *arg, int *handle)
{
    if (!ctx || !fn)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_costart: %s is NULL", ctx ? "fn" : "ctx");
    if (ctx->co)
        return torxm_co_costart(ctx, fn, arg, handle);
    /* No communication thread in heater and vn modes: the work runs here. */
    fn(arg);
    if (handle)
        *handle = ++ctx->costarted;
    return TORX_OK;
}

torx_status_t torx_cojoin(torx_ctx_t *ctx, int handle)
{
    if (ctx && ctx->co)
        return torxm_co_cojoin(ctx, handle);
    if (!ctx || handle < 1 || handle > ctx->costarted)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_cojoin: handle %d was not returned by torx_costart", handle);
    return TORX_OK;
}

torx_status_t torx_copoll(torx_ctx_t *ctx, torx_copoll_fn fn, void *arg)
{
    if (!ctx)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_copoll: ctx is NULL");
    if (!ctx->co || !ctx->co_net)
        return torxp_error(TORX_ERR_UNSUPPORTED,
                           "torx: torx_copoll: no communication thread owns the network");
    torxm_co_poll_set(ctx, fn, arg);
    return TORX_OK;
}

void torx_cokick(torx_ctx_t *ctx)
{
    if (ctx && ctx->co)
        torxm_co_kick(ctx);
}
