/* The ofi device's life cycle: which provider and interface, the fabric,
 * domain, endpoint, queues and address vector, the address exchange over
 * the job's bootstrap, and the ops table.
 *
 * Provider choice. TORX_OFI_PROVIDER names one (as libfabric spells it,
 * e.g. "tcp;ofi_rxm"); unset or "auto" tries, in order, the ones Debian's
 * libfabric offers without RDMA hardware: net, tcp;ofi_rxm, udp;ofi_rxd,
 * sockets. net (libfabric 1.17's RDM over TCP without the rxm layer) comes
 * first because it is the fastest between hosts: libfabric's own
 * ping-pong over it takes 4.5 us where tcp;ofi_rxm takes 10.3 (8 bytes),
 * level with UCX over TCP (docs/multihost.md). TORX_OFI_IFACE
 * keeps the provider to one network interface (its domain, for the
 * socket-based providers). A provider that lacks something torx needs is a
 * start-up error that names the provider and the missing capability, found
 * by asking libfabric first for the provider alone and then for each need
 * in turn. RMA is wanted, not needed: TORX_OFI_BULK=auto (the default)
 * takes a provider without it and moves bulk data as tagged messages
 * (ofi_bulk.c); =rma makes its absence an error; =msg never uses it.
 *
 * Address exchange. Each task enables its endpoint, reads its address
 * (fi_getname) and contributes it, with its coordinate, to one allgather
 * over the bootstrap (the fork bootstrap's pipes on one host, PMI's key
 * space under hydra). Every task then inserts all addresses into an
 * FI_AV_TABLE in rank order, and keeps a table from torus slot to
 * fi_addr_t. A second allgather is the start-up vote, as on shm: one task's
 * failure fails all of them rather than leaving them talking to a task that
 * is not there. */
#include "ofi.h"
#include "torx_commit.h"
#include <torx/version.h>

#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define OFI_ADDR_MAX 64
#define OFI_PROV_MAX 32

/* Tried in this order when TORX_OFI_PROVIDER is unset or "auto". */
static const char *const auto_providers[] = {"net", "tcp;ofi_rxm", "udp;ofi_rxd", "sockets", NULL};

/* The endpoint's needs, each with the words of the error when missing;
 * OFI_RMA_CAPS only for bulk transfers by RMA. */
#define OFI_CAPS (FI_TAGGED | FI_MSG)
#define OFI_RMA_CAPS (FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)
#define OFI_MR_MODES (FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT)

/* ---- Environment ---------------------------------------------------------- */

typedef struct ofi_env {
    char provider[OFI_PROV_MAX]; /* "" = auto */
    char iface[IF_NAMESIZE];     /* "" = any */
    long tx_pool;
    int bulk; /* TORX_OFI_BULK: OFI_BULK_AUTO, _RMA or _MSG */
} ofi_env_t;

enum { OFI_BULK_AUTO, OFI_BULK_RMA, OFI_BULK_MSG };
static const char *const ofi_bulk_names[] = {"auto", "rma", "msg", NULL};

/* Reads a word made of the characters in allowed, at most max - 1 long. */
static torx_status_t env_word(const char *name, const char *allowed, size_t max, const char *what,
                              char *out)
{
    const char *s = getenv(name);
    out[0] = '\0';
    if (!s || !*s)
        return TORX_OK;
    const size_t n = strlen(s);
    if (n >= max || strspn(s, allowed) != n)
        return torxp_error(TORX_ERR_ENV, "torx: %s='%s' is not %s (at most %zu characters)", name,
                           s, what, max - 1);
    memcpy(out, s, n + 1);
    return TORX_OK;
}

static torx_status_t ofi_env_read(ofi_env_t *e)
{
    static const char prov_chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                     "0123456789_;-";
    static const char iface_chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                      "0123456789_.:-@";
    torx_status_t rc =
        env_word("TORX_OFI_PROVIDER", prov_chars, sizeof e->provider,
                 "a libfabric provider name such as tcp;ofi_rxm or auto", e->provider);
    if (rc != TORX_OK)
        return rc;
    const char *p = e->provider;
    if (p[0] == ';' || (*p && p[strlen(p) - 1] == ';') || strstr(p, ";;"))
        return torxp_error(TORX_ERR_ENV,
                           "torx: TORX_OFI_PROVIDER='%s' has an empty component (expected a "
                           "provider name such as tcp;ofi_rxm, or auto)",
                           p);
    if (!strcmp(p, "auto"))
        e->provider[0] = '\0';
    if ((rc = env_word("TORX_OFI_IFACE", iface_chars, sizeof e->iface, "a network interface name",
                       e->iface)) != TORX_OK)
        return rc;
    if (e->iface[0] && if_nametoindex(e->iface) == 0)
        return torxp_error(TORX_ERR_ENV,
                           "torx: TORX_OFI_IFACE='%s': this host has no such network interface "
                           "(see ip link)",
                           e->iface);
    if ((rc = torx_env_choice("TORX_OFI_BULK", ofi_bulk_names, OFI_BULK_AUTO, &e->bulk)) != TORX_OK)
        return rc;
    return torx_env_int("TORX_OFI_TX_PACKETS", 1, 65536, 256, &e->tx_pool);
}

/* ---- Provider choice ---------------------------------------------------------- */

/* Whether info sits on iface (socket providers name their domain after the
 * interface; others, like shm, have no interface and always match). */
static int on_iface(const struct fi_info *info, const char *iface)
{
    if (!iface[0])
        return 1;
    const uint32_t f = info->addr_format;
    if (f != FI_SOCKADDR && f != FI_SOCKADDR_IN && f != FI_SOCKADDR_IN6)
        return 1;
    return info->domain_attr && info->domain_attr->name && !strcmp(info->domain_attr->name, iface);
}

static struct fi_info *base_hints(const char *prov)
{
    struct fi_info *h = fi_allocinfo();
    if (!h)
        return NULL;
    h->fabric_attr->prov_name = strdup(prov);
    if (!h->fabric_attr->prov_name) {
        fi_freeinfo(h);
        return NULL;
    }
    return h;
}

/* The first info of list on iface, detached from the list (the caller frees
 * it); NULL when none. */
static struct fi_info *take_on_iface(struct fi_info *list, const char *iface)
{
    for (struct fi_info *p = list; p; p = p->next) {
        if (!on_iface(p, iface))
            continue;
        struct fi_info *one = fi_dupinfo(p);
        return one;
    }
    return NULL;
}

/* Why prov cannot carry the device: the first of torx's needs that the
 * provider's own description (asked with nothing but its name) lacks. */
const char *torxp_ofi_missing_need(const struct fi_info *list, const char *iface, int need_rma)
{
    const struct fi_info *rdm = NULL;
    for (const struct fi_info *p = list; p && !rdm; p = p->next)
        if (on_iface(p, iface) && p->ep_attr->type == FI_EP_RDM)
            rdm = p;
    if (!rdm)
        return "FI_EP_RDM (reliable unconnected endpoints)";
    if (!(rdm->caps & FI_TAGGED))
        return "FI_TAGGED (tagged messages)";
    if (!(rdm->caps & FI_MSG))
        return "FI_MSG (untagged messages, for staged pieces)";
    if (need_rma && (rdm->caps & OFI_RMA_CAPS) != OFI_RMA_CAPS)
        return "FI_RMA with FI_READ, FI_WRITE, FI_REMOTE_READ and FI_REMOTE_WRITE (bulk "
               "transfers by RMA, TORX_OFI_BULK=rma)";
    if (!(rdm->tx_attr->msg_order & FI_ORDER_SAS))
        return "FI_ORDER_SAS (send-after-send order, which keeps deterministic packets in "
               "order)";
    if (rdm->domain_attr->threading != FI_THREAD_SAFE &&
        rdm->domain_attr->threading != FI_THREAD_UNSPEC)
        return "FI_THREAD_SAFE";
    if (rdm->domain_attr->mr_mode & ~(OFI_MR_MODES | FI_MR_BASIC | FI_MR_SCALABLE))
        return "memory registration without FI_MR_LOCAL or FI_MR_RAW (the device registers only "
               "the memory of bulk transfers)";
    if (rdm->mode & ~(uint64_t)FI_BUFFERED_RECV)
        return "operation without FI_CONTEXT/FI_MSG_PREFIX modes";
    return "a combination of the above";
}

/* The first info for prov on iface with caps and torx's other needs, or
 * NULL. */
static struct fi_info *ask(const char *prov, const char *iface, uint64_t caps)
{
    struct fi_info *h = base_hints(prov), *full = NULL;
    if (!h)
        return NULL;
    h->ep_attr->type = FI_EP_RDM;
    h->caps = caps;
    h->mode = 0; /* no modes: contexts and buffers stay ours */
    h->tx_attr->msg_order = FI_ORDER_SAS;
    h->rx_attr->msg_order = FI_ORDER_SAS;
    h->domain_attr->threading = FI_THREAD_SAFE;
    h->domain_attr->mr_mode = OFI_MR_MODES;
    h->domain_attr->av_type = FI_AV_TABLE;
    const int rc = fi_getinfo(TORXP_OFI_API, NULL, NULL, 0, h, &full);
    fi_freeinfo(h);
    struct fi_info *one = rc == 0 ? take_on_iface(full, iface) : NULL;
    if (full)
        fi_freeinfo(full);
    return one;
}

/* Finds prov on iface with everything torx needs, and RMA as bulk asks:
 * TORX_OK, *out and *rma, or an error that names what is missing. */
static torx_status_t try_provider(const char *prov, const char *iface, int bulk,
                                  struct fi_info **out, int *rma)
{
    *out = NULL;
    struct fi_info *h = base_hints(prov), *list = NULL;
    if (!h)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory asking libfabric for %s", prov);
    int rc = fi_getinfo(TORXP_OFI_API, NULL, NULL, 0, h, &list);
    if (rc != 0) {
        fi_freeinfo(h);
        return torxp_error(TORX_ERR_UNSUPPORTED,
                           "torx: ofi device: libfabric has no provider %s on this host (%s)", prov,
                           fi_strerror(-rc));
    }
    int any_iface = 0;
    for (struct fi_info *p = list; p && !any_iface; p = p->next)
        any_iface = on_iface(p, iface);
    if (!any_iface) {
        fi_freeinfo(list);
        fi_freeinfo(h);
        return torxp_error(TORX_ERR_UNSUPPORTED,
                           "torx: ofi device: provider %s offers nothing on interface %s "
                           "(TORX_OFI_IFACE)",
                           prov, iface);
    }

    fi_freeinfo(h);
    struct fi_info *one = NULL;
    *rma = 0;
    if (bulk != OFI_BULK_MSG && (one = ask(prov, iface, OFI_CAPS | OFI_RMA_CAPS)) != NULL)
        *rma = 1;
    else if (bulk != OFI_BULK_RMA)
        one = ask(prov, iface, OFI_CAPS);
    if (!one) {
        const char *why = torxp_ofi_missing_need(list, iface, bulk == OFI_BULK_RMA);
        fi_freeinfo(list);
        return torxp_error(TORX_ERR_UNSUPPORTED,
                           "torx: ofi device: provider %s lacks %s, which torx needs; pick "
                           "another with TORX_OFI_PROVIDER (e.g. tcp;ofi_rxm)",
                           prov, why);
    }
    fi_freeinfo(list);
    *out = one;
    return TORX_OK;
}

static torx_status_t choose_provider(const torx_pkt_dev_t *dev, const ofi_env_t *e,
                                     struct fi_info **out, int *rma)
{
    if (e->provider[0])
        return try_provider(e->provider, e->iface, e->bulk, out, rma);
    char tried[512] = "";
    size_t used = 0;
    for (int k = 0; auto_providers[k]; k++) {
        if (try_provider(auto_providers[k], e->iface, e->bulk, out, rma) == TORX_OK)
            return TORX_OK;
        torxp_log(dev, 1, "ofi: %s", torx_last_error() + sizeof "torx: " - 1);
        const int n =
            snprintf(tried + used, sizeof tried - used, "%s%s", k ? ", " : "", auto_providers[k]);
        if (n > 0 && (size_t)n < sizeof tried - used)
            used += (size_t)n;
    }
    return torxp_error(TORX_ERR_UNSUPPORTED,
                       "torx: ofi device: none of the providers %s works%s%s (TORX_VERBOSE=1 "
                       "says why); name one with TORX_OFI_PROVIDER",
                       tried, e->iface[0] ? " on interface " : "", e->iface);
}

/* ---- Objects ------------------------------------------------------------------- */

static torx_status_t fi_err(const char *call, const char *prov, int rc)
{
    return torxp_error(TORX_ERR_SYS, "torx: ofi device: %s failed (provider %s): %s", call, prov,
                       fi_strerror(-rc));
}

static torx_status_t open_cq(torxp_ofi_dev_t *d, size_t size, struct fid_cq **cq, int *fd)
{
    struct fi_cq_attr attr = {.size = size, .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_FD};
    *fd = -1;
    int rc = fi_cq_open(d->domain, &attr, cq, NULL);
    if (rc == 0 && fi_control(&(*cq)->fid, FI_GETWAIT, fd) != 0)
        *fd = -1;
    if (rc != 0) { /* no wait descriptors: the doorbell sleeps in slices */
        attr.wait_obj = FI_WAIT_NONE;
        rc = fi_cq_open(d->domain, &attr, cq, NULL);
    }
    return rc ? fi_err("fi_cq_open", d->prov, rc) : TORX_OK;
}

static torx_status_t open_endpoint(torxp_ofi_dev_t *d, unsigned ntasks)
{
    int rc;
    if ((rc = fi_fabric(d->info->fabric_attr, &d->fabric, NULL)) != 0)
        return fi_err("fi_fabric", d->prov, rc);
    if ((rc = fi_domain(d->fabric, d->info, &d->domain, NULL)) != 0)
        return fi_err("fi_domain", d->prov, rc);
    /* Room for a completion of every receive and send the provider takes. */
    const size_t rxq = d->info->rx_attr->size > 1024 ? d->info->rx_attr->size : 1024;
    const size_t txq = d->info->tx_attr->size > 1024 ? d->info->tx_attr->size : 1024;
    const torx_status_t st = open_cq(d, rxq + txq, &d->cq, &d->net.wait_fd);
    if (st != TORX_OK)
        return st;
    struct fi_av_attr av = {.type = FI_AV_TABLE, .count = ntasks};
    if ((rc = fi_av_open(d->domain, &av, &d->av, NULL)) != 0)
        return fi_err("fi_av_open", d->prov, rc);
    if ((rc = fi_endpoint(d->domain, d->info, &d->ep, NULL)) != 0)
        return fi_err("fi_endpoint", d->prov, rc);
    if ((rc = fi_ep_bind(d->ep, &d->av->fid, 0)) != 0 ||
        (rc = fi_ep_bind(d->ep, &d->cq->fid, FI_TRANSMIT | FI_RECV)) != 0)
        return fi_err("fi_ep_bind", d->prov, rc);
    if ((rc = fi_enable(d->ep)) != 0)
        return fi_err("fi_enable", d->prov, rc);
    d->cq_data = d->info->domain_attr->cq_data_size >= sizeof(uint64_t);
    d->inject_size = d->info->tx_attr->inject_size;
    if (d->inject_size > TORX_PKT_MAX_BYTES)
        d->inject_size = TORX_PKT_MAX_BYTES;
    return TORX_OK;
}

/* ---- Close and the ops table ------------------------------------------------------ */

static void close_fid(struct fid *f)
{
    if (f)
        fi_close(f);
}

static void ofi_close(torx_pkt_dev_t *dev)
{
    torxp_ofi_dev_t *d = torxp_ofi_of(dev);
    if (d->ep) {
        /* Let what is queued leave: a provider that progresses manually may
         * still hold the last packets or barrier messages a peer waits for. */
        d->net.closing = 1;
        torxp_ofi_flush(d, 2.0);
    }
    torxp_net_close_report(&d->net);
    torxp_net_live_fini(&d->net);
    torxp_ofi_stage_fini(d);
    torxp_ofi_bulk_fini(d);
    torxp_net_cn_fini(&d->net);
    close_fid(d->ep ? &d->ep->fid : NULL);
    close_fid(d->av ? &d->av->fid : NULL);
    close_fid(d->cq ? &d->cq->fid : NULL);
    close_fid(d->domain ? &d->domain->fid : NULL);
    close_fid(d->fabric ? &d->fabric->fid : NULL);
    torxp_ofi_torus_fini(d);
    if (d->info)
        fi_freeinfo(d->info);
    free(d->net.slot_rank);
    free(d->net.rank_slot);
    free(d->slot_addr);
    pthread_mutex_destroy(&d->net.lock);
    free(d);
}

/* What net/ asks of the device (net.h). */
static void net_progress(torxp_net_t *n)
{
    torxp_ofi_progress((torxp_ofi_dev_t *)n);
}

static torx_status_t net_sys_send(torxp_net_t *n, unsigned slot, const void *msg, size_t len)
{
    return torxp_ofi_sys_send((torxp_ofi_dev_t *)n, slot, msg, len);
}

static void net_ping(torxp_net_t *n, unsigned slot)
{
    torxp_ofi_ping((torxp_ofi_dev_t *)n, slot);
}

static const torxp_net_ops_t ofi_net_ops = {
    .name = "ofi",
    .progress = net_progress,
    .send_packet = torxp_ofi_send_packet,
    .tx_room = torxp_ofi_tx_room,
    .sys_send = net_sys_send,
    .sys_pending = torxp_ofi_sys_pending,
    .on_sys = torxp_ofi_on_sys,
    .ping = net_ping,
    .arm = torxp_ofi_arm,
    .stage_send = torxp_ofi_stage_send,
    .stage_rx_done = torxp_ofi_stage_rx_done,
};

static const torxp_dev_ops_t ofi_ops = {
    TORXP_NET_DEV_OPS,
    .name = "ofi",
    .bulk_get = torxp_ofi_bulk_get,
    .bulk_put = torxp_ofi_bulk_put,
    .bulk_test = torxp_ofi_bulk_test,
    .bulk_path = torxp_ofi_bulk_path,
    .close = ofi_close,
};

/* ---- Connecting ----------------------------------------------------------------- */

/* Connects to every task before the job starts. A reception FIFO takes
 * packets whether or not its owner is polling; a provider that progresses
 * manually and connects on first use (tcp;ofi_rxm) cannot accept a packet
 * from a new peer until that peer's owner progresses, so a sender would
 * see TORX_NO_ROOM toward a task with an empty FIFO. Every task therefore
 * sends a PING to every task (itself included) and progresses until it has
 * heard from all and its own have left: then each pair's connection
 * exists, in both directions, while everyone is still progressing. */
#define CONNECT_TIMEOUT_S 60.0

static int sends_busy(torxp_net_t *n)
{
    const torxp_ofi_dev_t *d = (const torxp_ofi_dev_t *)n;
    return d->sys_head || d->sys_inflight || d->inj_inflight;
}

static torx_status_t connect_all(torxp_ofi_dev_t *d)
{
    char over[64];
    snprintf(over, sizeof over, "provider %s", d->prov);
    torxp_ofi_lock(d);
    const torx_status_t rc = torxp_net_connect_all(&d->net, CONNECT_TIMEOUT_S, over, sends_busy);
    torxp_ofi_unlock(d);
    return rc;
}

/* ---- Open ----------------------------------------------------------------------------- */

/* What each task contributes to the address exchange. */
typedef struct addr_record {
    torxp_net_job_t job; /* torus, coordinate, credit window (net.h) */
    int32_t status;
    uint32_t addrlen;
    char prov[OFI_PROV_MAX];
    uint32_t rma; /* bulk by RMA, else as messages: both ends must agree */
    unsigned char addr[OFI_ADDR_MAX];
    torxp_net_live_addr_t live; /* the liveness watch's listening socket */
} addr_record_t;

/* Builds the slot tables and the address vector from every task's record. */
static torx_status_t insert_peers(torxp_ofi_dev_t *d, const addr_record_t *all)
{
    torx_status_t rc = torxp_net_place(&d->net, all, sizeof *all);
    for (int r = 0; rc == TORX_OK && r < d->net.base.size; r++) {
        if (strncmp(all[r].prov, d->prov, OFI_PROV_MAX))
            return torxp_error(TORX_ERR_PROTO,
                               "torx: ofi device: rank %d uses provider %.*s but rank %d uses %s; "
                               "set the same TORX_OFI_PROVIDER for every task",
                               r, OFI_PROV_MAX, all[r].prov, d->net.base.rank, d->prov);
        if (all[r].rma != (uint32_t)d->rma)
            return torxp_error(TORX_ERR_PROTO,
                               "torx: ofi device: rank %d moves bulk data %s but rank %d %s; set "
                               "the same TORX_OFI_BULK for every task",
                               r, all[r].rma ? "by RMA" : "as messages", d->net.base.rank,
                               d->rma ? "by RMA" : "as messages");
        fi_addr_t fa = FI_ADDR_NOTAVAIL;
        const int frc = fi_av_insert(d->av, all[r].addr, 1, &fa, 0, NULL);
        if (frc != 1)
            return torxp_error(TORX_ERR_SYS,
                               "torx: ofi device: fi_av_insert of rank %d's address failed "
                               "(provider %s): %s",
                               r, d->prov, fi_strerror(frc < 0 ? -frc : FI_EINVAL));
        d->slot_addr[d->net.rank_slot[r]] = fa;
    }
    return rc;
}

static torx_status_t ofi_open(const torx_pkt_attr_t *attr, const torxp_env_t *env,
                              torx_pkt_dev_t **out)
{
    torx_boot_t *boot = attr->boot;
    torxp_ofi_dev_t *d = torxp_calloc(1, sizeof *d);
    if (!d)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory opening the ofi device");
    torxp_net_init(&d->net, attr, env, &ofi_ops, &ofi_net_ops);

    /* Every task takes part in both allgathers whatever happens, so one
     * task's failure never leaves the others waiting. */
    ofi_env_t oe;
    torx_status_t rc = ofi_env_read(&oe);
    if (rc == TORX_OK && env->bulk_mode == TORXP_BULK_CMA)
        rc = torxp_error(TORX_ERR_UNSUPPORTED,
                         "torx: TORX_BULK=cma: the ofi device moves bulk data by RMA; use "
                         "TORX_BULK=auto");
    if (rc == TORX_OK)
        rc = choose_provider(&d->net.base, &oe, &d->info, &d->rma);
    if (rc == TORX_OK) {
        d->prov = d->info->fabric_attr->prov_name;
        d->slot_addr = torxp_malloc(d->net.nslots * sizeof *d->slot_addr);
        if (!d->slot_addr)
            rc = torxp_error(TORX_ERR_NOMEM, "torx: out of memory for %u torus slots",
                             d->net.nslots);
        for (unsigned s = 0; rc == TORX_OK && s < d->net.nslots; s++)
            d->slot_addr[s] = FI_ADDR_NOTAVAIL;
    }
    if (rc == TORX_OK)
        rc = open_endpoint(d, (unsigned)boot->size);

    addr_record_t mine = {.job = torxp_net_job_mine(&d->net, env)};
    if (rc == TORX_OK) {
        size_t len = sizeof mine.addr;
        const int frc = fi_getname(&d->ep->fid, mine.addr, &len);
        if (frc != 0)
            rc = fi_err("fi_getname", d->prov, frc);
        else
            mine.addrlen = (uint32_t)len;
        if (rc == TORX_OK && boot->size > 1)
            rc = torxp_net_live_listen(&d->net, mine.addr, len, &mine.live);
        snprintf(mine.prov, sizeof mine.prov, "%s", d->prov);
        mine.rma = (uint32_t)d->rma;
    }
    mine.status = rc;
    addr_record_t *all = torxp_calloc((size_t)boot->size, sizeof *all);
    torx_status_t brc = all ? boot->allgather(boot, &mine, all, sizeof mine) : TORX_ERR_NOMEM;
    if (brc != TORX_OK) { /* the bootstrap is broken (a task died): nobody can wait */
        free(all);
        rc = rc == TORX_OK ? brc : rc;
        goto fail;
    }
    rc = torxp_boot_vote(boot, rc, "open the ofi device");
    if (rc == TORX_OK)
        rc = insert_peers(d, all);
    if (rc == TORX_OK && boot->size > 1) {
        const int next = (boot->rank + 1) % boot->size;
        rc = torxp_net_live_connect(&d->net, next, (boot->rank + boot->size - 1) % boot->size,
                                    &all[next].live);
    }
    free(all);
    if (rc == TORX_OK)
        rc = torxp_ofi_torus_setup(d, env, oe.tx_pool);
    if (rc == TORX_OK)
        rc = torxp_ofi_stage_setup(d, env->stage_bytes);
    if (rc == TORX_OK)
        rc = torxp_net_cn_setup(&d->net);
    if (rc == TORX_OK)
        rc = torxp_ofi_bulk_setup(d);
    if (rc == TORX_OK)
        rc = connect_all(d);

    rc = torxp_boot_vote(boot, rc, "open the ofi device");
    if (rc != TORX_OK)
        goto fail;

    torxp_log(&d->net.base, 1,
              "ofi device: provider %s, interface %s (fabric %s, domain %s), inject %zu bytes, "
              "%s progress, %s, bulk %s",
              d->prov, oe.iface[0] ? oe.iface : "any", d->info->fabric_attr->name,
              d->info->domain_attr->name, d->inject_size,
              d->info->domain_attr->data_progress == FI_PROGRESS_MANUAL ? "manual" : "auto",
              d->net.wait_fd >= 0 ? "sleeps on a wait descriptor" : "sleeps in slices",
              torxp_ofi_bulk_path(&d->net.base));
    torxp_log(&d->net.base, 2,
              "ofi device: coordinate (%u,%u,%u,%u), credit window %u packets, %u receive "
              "buffers, send pool %u",
              attr->self.x, attr->self.y, attr->self.z, attr->self.t, d->net.credit_max, d->net.nrx,
              d->tx_pool);
    *out = &d->net.base;
    return TORX_OK;

fail:
    if (d->ep) { /* no flush: nothing was sent that anyone waits for */
        fi_close(&d->ep->fid);
        d->ep = NULL;
    }
    ofi_close(&d->net.base);
    return rc;
}

/* What libtorx loads (net/net_module.c). */
TORXP_NET_MODULE("ofi", ofi_open);
