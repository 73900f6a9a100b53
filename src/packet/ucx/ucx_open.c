/* The ucx device's start and end: UCP context and worker, the transports
 * (TORX_UCX_TLS, else UCX's own UCX_TLS and defaults), the address exchange
 * over the job's bootstrap, an endpoint to every task with peer error
 * handling, the start-up connect, the ops table, and close.
 *
 * Transports. TORX_UCX_TLS is handed to UCX as its transport list (the
 * TLS setting, the same words as UCX_TLS: tcp, sm, posix, cma, rc, ud, ...);
 * a value UCX refuses, or one that leaves no transport to some task, is a
 * start-up error naming the variable. Every other UCX_* variable works as
 * usual. TORX_VERBOSE=1 prints the transports UCX chose toward the next
 * rank.
 *
 * The liveness watch (net_live.c) needs an IP address of this host that
 * the others can reach: TORX_UCX_IFACE names the interface, else the first
 * interface that is up, not loopback, and has an IPv4 address, else
 * loopback. */
#include "torx_commit.h"
#include "ucx.h"
#include <torx/version.h>

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#define CONNECT_TIMEOUT_S 60.0
/* The largest worker address the exchange carries. */
#define UCX_ADDR_MAX 4000u

typedef struct ucx_env {
    char tls[128]; /* TORX_UCX_TLS, "" when unset */
    char iface[IF_NAMESIZE];
    long tx_pool;
} ucx_env_t;

/* A word of letters, digits and chars, at most max - 1 long, or unset. */
static torx_status_t env_word(const char *name, const char *chars, size_t max, char *out)
{
    const char *v = getenv(name);
    out[0] = '\0';
    if (!v || !*v)
        return TORX_OK;
    const size_t len = strlen(v);
    if (len >= max || strspn(v, chars) != len)
        return torxp_error(TORX_ERR_ENV,
                           "torx: %s='%s': expected at most %zu of letters, digits and \"%s\"",
                           name, v, max - 1, chars + 62);
    memcpy(out, v, len + 1);
    return TORX_OK;
}

#define ALNUM "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

static torx_status_t ucx_env_read(ucx_env_t *e)
{
    torx_status_t rc = env_word("TORX_UCX_TLS", ALNUM "_,:^-", sizeof e->tls, e->tls);
    if (rc == TORX_OK)
        rc = env_word("TORX_UCX_IFACE", ALNUM "_.:-", sizeof e->iface, e->iface);
    if (rc == TORX_OK)
        rc = torx_env_int("TORX_UCX_TX_PACKETS", 1, 65536, 256, &e->tx_pool);
    return rc;
}

/* The address the liveness watch listens on (see the top). */
static torx_status_t watch_address(const char *iface, struct sockaddr_in *out)
{
    struct ifaddrs *list = NULL;
    if (getifaddrs(&list) != 0)
        return torxp_error(TORX_ERR_SYS, "torx: ucx device: getifaddrs: %s", strerror(errno));
    const struct sockaddr_in *pick = NULL, *lo = NULL;
    for (const struct ifaddrs *i = list; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP))
            continue;
        const struct sockaddr_in *a = (const struct sockaddr_in *)(const void *)i->ifa_addr;
        if (iface[0]) {
            if (!strcmp(i->ifa_name, iface) && !pick)
                pick = a;
        } else if (i->ifa_flags & IFF_LOOPBACK) {
            if (!lo)
                lo = a;
        } else if (!pick) {
            pick = a;
        }
    }
    if (!pick)
        pick = iface[0] ? NULL : lo;
    if (pick)
        *out = *pick;
    freeifaddrs(list);
    if (!pick)
        return torxp_error(TORX_ERR_ENV,
                           iface[0] ? "torx: TORX_UCX_IFACE='%s': no such interface with an IPv4 "
                                      "address that is up"
                                    : "torx: ucx device: no interface with an IPv4 address is up%s",
                           iface);
    return TORX_OK;
}

static torx_status_t open_worker(torxp_ucx_dev_t *d, const ucx_env_t *e, unsigned ntasks)
{
    ucp_config_t *cfg = NULL;
    ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
    if (st != UCS_OK)
        return torxp_error(TORX_ERR_ENV,
                           "torx: ucx device: UCX cannot read its configuration "
                           "(check the UCX_* variables): %s",
                           ucs_status_string(st));
    if (e->tls[0] && (st = ucp_config_modify(cfg, "TLS", e->tls)) != UCS_OK) {
        ucp_config_release(cfg);
        return torxp_error(TORX_ERR_ENV, "torx: TORX_UCX_TLS='%s': UCX refused it: %s", e->tls,
                           ucs_status_string(st));
    }
    const char *asked = e->tls[0] ? e->tls : getenv("UCX_TLS");
    snprintf(d->tls, sizeof d->tls, "%s", asked && *asked ? asked : "UCX's default");
    const ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES |
                                               UCP_PARAM_FIELD_ESTIMATED_NUM_EPS |
                                               UCP_PARAM_FIELD_NAME,
                                 .features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP,
                                 .estimated_num_eps = ntasks,
                                 .name = "torx"};
    st = ucp_init(&params, cfg, &d->context);
    ucp_config_release(cfg);
    if (st != UCS_OK)
        return e->tls[0] ? torxp_error(TORX_ERR_ENV,
                                       "torx: TORX_UCX_TLS='%s': UCX cannot start with these "
                                       "transports: %s",
                                       e->tls, ucs_status_string(st))
                         : torxp_error(TORX_ERR_SYS, "torx: ucx device: ucp_init: %s",
                                       ucs_status_string(st));
    const ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                                    .thread_mode = d->net.shared ? UCS_THREAD_MODE_SERIALIZED
                                                                 : UCS_THREAD_MODE_SINGLE};
    if ((st = ucp_worker_create(d->context, &wp, &d->worker)) != UCS_OK)
        return torxp_error(TORX_ERR_SYS, "torx: ucx device: ucp_worker_create: %s",
                           ucs_status_string(st));
    int fd = -1;
    if (ucp_worker_get_efd(d->worker, &fd) == UCS_OK)
        d->net.wait_fd = fd;
    return TORX_OK;
}

/* ---- Endpoints ---------------------------------------------------------------------- */

/* A peer's endpoint failed. Not an error yet: a peer that finished first
 * closes its worker, and the connection ends while this task finishes too.
 * The next send to it, or probe of it, fails the device (ucx_torus.c); a
 * task that died is named sooner by the liveness watch (net_live.c). */
static void on_peer_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)ep;
    torxp_ucx_peer_t *p = arg;
    p->gone = status;
    torxp_log(&p->dev->net.base, 2, "ucx device: the connection to rank %d ended: %s",
              p->dev->net.slot_rank[p->slot], ucs_status_string(status));
}

static torx_status_t create_eps(torxp_ucx_dev_t *d, const unsigned char *addrs, size_t stride)
{
    torxp_net_t *n = &d->net;
    d->eps = torxp_calloc(n->nslots, sizeof *d->eps);
    d->peers = torxp_calloc(n->nslots, sizeof *d->peers);
    if (!d->eps || !d->peers)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for %u endpoints", n->nslots);
    for (int r = 0; r < n->base.size; r++) {
        const unsigned slot = n->rank_slot[r];
        d->peers[slot] = (torxp_ucx_peer_t){.dev = d, .slot = slot};
        const ucp_ep_params_t ep = {
            .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                          UCP_EP_PARAM_FIELD_ERR_HANDLER,
            .address = (const ucp_address_t *)(const void *)(addrs + (size_t)r * stride),
            .err_mode = UCP_ERR_HANDLING_MODE_PEER,
            .err_handler = {.cb = on_peer_error, .arg = &d->peers[slot]}};
        const ucs_status_t st = ucp_ep_create(d->worker, &ep, &d->eps[slot]);
        if (st != UCS_OK) {
            d->eps[slot] = NULL;
            return getenv("TORX_UCX_TLS") && *getenv("TORX_UCX_TLS")
                       ? torxp_error(TORX_ERR_ENV,
                                     "torx: TORX_UCX_TLS='%s' leaves no transport from rank %d "
                                     "to rank %d: %s",
                                     getenv("TORX_UCX_TLS"), n->base.rank, r, ucs_status_string(st))
                       : torxp_error(TORX_ERR_PEER,
                                     "torx: ucx device: rank %d cannot reach rank %d "
                                     "(transports %s): %s",
                                     n->base.rank, r, d->tls, ucs_status_string(st));
        }
    }
    return TORX_OK;
}

/* The transports UCX chose toward slot, from its own description of the
 * endpoint ("tcp/eth0 cma/memory"), for TORX_VERBOSE=1. */
static void chosen_transports(torxp_ucx_dev_t *d, unsigned slot, char *out, size_t max)
{
    out[0] = '\0';
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (!f)
        return;
    ucp_ep_print_info(d->eps[slot], f);
    fclose(f);
    size_t used = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char *lane = strstr(line, "lane[");
        char *colon = lane ? strchr(lane, ':') : NULL;
        if (!colon)
            continue;
        char tl[64];
        if (sscanf(colon + 1, " %*[0-9]:%63[^ ]", tl) != 1)
            continue;
        char *dot = strrchr(tl, '.');
        if (dot && dot > strchr(tl, '/'))
            *dot = '\0'; /* tcp/lo.0: the device, not its index */
        if (strstr(out, tl))
            continue;
        const int k = snprintf(out + used, max - used, "%s%s", used ? " " : "", tl);
        if (k < 0 || (size_t)k >= max - used)
            break;
        used += (size_t)k;
    }
    free(text);
}

/* ---- Close and the ops table ------------------------------------------------------ */

static void close_eps(torxp_ucx_dev_t *d)
{
    if (!d->eps)
        return;
    /* Flushed closes while the peers may still be there, then whatever is
     * left forced. */
    void **reqs = torxp_calloc(d->net.nslots, sizeof *reqs);
    const double deadline = torxp_mono_s() + 2.0;
    for (unsigned s = 0; s < d->net.nslots; s++) {
        if (!d->eps[s])
            continue;
        const ucp_request_param_t p = {
            .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
            .flags = d->net.base.failed != TORX_OK ? UCP_EP_CLOSE_FLAG_FORCE : 0};
        void *req = ucp_ep_close_nbx(d->eps[s], &p);
        if (req && !UCS_PTR_IS_ERR(req) && reqs)
            reqs[s] = req;
        d->eps[s] = NULL;
    }
    for (unsigned s = 0; reqs && s < d->net.nslots; s++) {
        while (reqs[s] && ucp_request_check_status(reqs[s]) == UCS_INPROGRESS &&
               torxp_mono_s() < deadline)
            ucp_worker_progress(d->worker);
        if (reqs[s] && ucp_request_check_status(reqs[s]) != UCS_INPROGRESS)
            ucp_request_free(reqs[s]);
    }
    free(reqs);
}

static void ucx_close(torx_pkt_dev_t *dev)
{
    torxp_ucx_dev_t *d = torxp_ucx_of(torxp_net_of(dev));
    if (d->worker) {
        /* Let what is queued leave: a peer may wait for the last packets
         * or barrier messages. */
        d->net.closing = 1;
        torxp_ucx_flush(d, 2.0);
    }
    torxp_net_close_report(&d->net);
    torxp_net_live_fini(&d->net);
    torxp_ucx_bulk_fini(d);
    torxp_net_cn_fini(&d->net);
    torxp_ucx_stage_fini(d); /* before the worker: pieces hold UCX's data */
    if (d->worker) {
        close_eps(d);
        ucp_worker_destroy(d->worker);
    }
    if (d->context)
        ucp_cleanup(d->context);
    torxp_ucx_torus_fini(d);
    free(d->eps);
    free(d->peers);
    free(d->net.slot_rank);
    free(d->net.rank_slot);
    pthread_mutex_destroy(&d->net.lock);
    free(d);
}

static const torxp_dev_ops_t ucx_ops = {
    TORXP_NET_DEV_OPS,
    .name = "ucx",
    .bulk_get = torxp_ucx_bulk_get,
    .bulk_put = torxp_ucx_bulk_put,
    .bulk_test = torxp_ucx_bulk_test,
    .bulk_path = torxp_ucx_bulk_path,
    .close = ucx_close,
};

/* ---- Open ----------------------------------------------------------------------------- */

/* What each task contributes to the exchange, before its worker address. */
typedef struct addr_record {
    torxp_net_job_t job;
    torxp_net_live_addr_t live; /* the liveness watch's listening socket */
    uint32_t addrlen;
} addr_record_t;

static torx_status_t ucx_open(const torx_pkt_attr_t *attr, const torxp_env_t *env,
                              torx_pkt_dev_t **out)
{
    torx_boot_t *boot = attr->boot;
    torxp_ucx_dev_t *d = torxp_calloc(1, sizeof *d);
    if (!d)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory opening the ucx device");
    torxp_net_init(&d->net, attr, env, &ucx_ops, &torxp_ucx_net_ops);

    /* Every task takes part in every allgather whatever happens, so one
     * task's failure never leaves the others waiting. */
    ucx_env_t ue;
    torx_status_t rc = ucx_env_read(&ue);
    d->tx_pool = rc == TORX_OK ? (unsigned)ue.tx_pool : 1;
    if (rc == TORX_OK && env->bulk_mode == TORXP_BULK_CMA)
        rc = torxp_error(TORX_ERR_UNSUPPORTED,
                         "torx: TORX_BULK=cma: the ucx device moves bulk data as UCX messages; use "
                         "TORX_BULK=auto");
    if (rc == TORX_OK)
        rc = open_worker(d, &ue, (unsigned)boot->size);
    ucp_address_t *myaddr = NULL;
    size_t mylen = 0;
    addr_record_t mine = {.job = torxp_net_job_mine(&d->net, env)};
    if (rc == TORX_OK) {
        const ucs_status_t st = ucp_worker_get_address(d->worker, &myaddr, &mylen);
        if (st != UCS_OK)
            rc = torxp_error(TORX_ERR_SYS, "torx: ucx device: ucp_worker_get_address: %s",
                             ucs_status_string(st));
        else if (mylen > UCX_ADDR_MAX)
            rc = torxp_error(TORX_ERR_UNSUPPORTED,
                             "torx: ucx device: the worker's address takes %zu bytes, more than "
                             "the %u the exchange carries; narrow the transports (TORX_UCX_TLS)",
                             mylen, UCX_ADDR_MAX);
        mine.addrlen = (uint32_t)mylen;
    }
    if (rc == TORX_OK && boot->size > 1) {
        struct sockaddr_in sa;
        rc = watch_address(ue.iface, &sa);
        if (rc == TORX_OK)
            rc = torxp_net_live_listen(&d->net, &sa, sizeof sa, &mine.live);
    }
    addr_record_t *all = torxp_calloc((size_t)boot->size, sizeof *all);
    if (rc == TORX_OK && !all)
        rc = torxp_error(TORX_ERR_NOMEM, "torx: out of memory for %d addresses", boot->size);
    rc = torxp_boot_vote(boot, rc, "open the ucx device");
    if (rc == TORX_OK)
        rc = boot->allgather(boot, &mine, all, sizeof mine);
    /* The addresses, each in a slot of the longest one's size. */
    uint32_t stride = 0;
    for (int r = 0; rc == TORX_OK && r < boot->size; r++)
        if (all[r].addrlen > stride)
            stride = all[r].addrlen;
    unsigned char *addrs = NULL, *myslot = NULL;
    if (rc == TORX_OK) {
        addrs = torxp_calloc((size_t)boot->size, stride);
        myslot = torxp_calloc(1, stride);
        if (!addrs || !myslot)
            rc = torxp_error(TORX_ERR_NOMEM, "torx: out of memory for %d addresses", boot->size);
        else
            memcpy(myslot, myaddr, mylen);
    }
    rc = torxp_boot_vote(boot, rc, "open the ucx device");
    if (rc == TORX_OK)
        rc = boot->allgather(boot, myslot, addrs, stride);
    free(myslot);
    if (myaddr)
        ucp_worker_release_address(d->worker, myaddr);
    if (rc == TORX_OK)
        rc = torxp_net_place(&d->net, all, sizeof *all);
    if (rc == TORX_OK)
        rc = create_eps(d, addrs, stride);
    free(addrs);
    if (rc == TORX_OK && boot->size > 1) {
        const int next = (boot->rank + 1) % boot->size;
        rc = torxp_net_live_connect(&d->net, next, (boot->rank + boot->size - 1) % boot->size,
                                    &all[next].live);
    }
    free(all);
    if (rc == TORX_OK)
        rc = torxp_ucx_torus_setup(d, env);
    if (rc == TORX_OK)
        rc = torxp_ucx_stage_setup(d, env->stage_bytes);
    if (rc == TORX_OK)
        rc = torxp_net_cn_setup(&d->net);
    if (rc == TORX_OK)
        rc = torxp_ucx_bulk_setup(d);
    if (rc == TORX_OK) {
        char over[160];
        snprintf(over, sizeof over, "UCX (transports %s)", d->tls);
        torxp_net_lock(&d->net);
        rc = torxp_net_connect_all(&d->net, CONNECT_TIMEOUT_S, over, torxp_ucx_sends_busy);
        torxp_net_unlock(&d->net);
    }
    rc = torxp_boot_vote(boot, rc, "open the ucx device");
    if (rc != TORX_OK)
        goto fail;

    if (env->verbose >= 1) {
        char chose[160];
        const unsigned next = d->net.rank_slot[(boot->rank + 1) % boot->size];
        chosen_transports(d, next, chose, sizeof chose);
        torxp_log(&d->net.base, 1,
                  "ucx device: transports asked for: %s (TORX_UCX_TLS, UCX_TLS); UCX chose %s "
                  "toward rank %d; bulk %s",
                  d->tls, chose[0] ? chose : "(not reported)", (boot->rank + 1) % boot->size,
                  torxp_ucx_bulk_path(&d->net.base));
    }
    torxp_log(&d->net.base, 2,
              "ucx device: coordinate (%u,%u,%u,%u), credit window %u packets, %u holders, send "
              "pool %u",
              attr->self.x, attr->self.y, attr->self.z, attr->self.t, d->net.credit_max,
              d->net.nhold, d->tx_pool);
    *out = &d->net.base;
    return TORX_OK;

fail:
    ucx_close(&d->net.base);
    return rc;
}

/* What libtorx loads (net/net_module.c). */
TORXP_NET_MODULE("ucx", ucx_open);
