/* Hybrid jobs: what a network device (TORX_DEVICE=ofi, ucx) opens when
 * some host runs more than one task of the job. Tasks on the same host
 * reach each other through a shm device of that host's own (its FIFOs,
 * staging area and cross-memory attach); tasks on other hosts, and the
 * collective network and global interrupt of the whole job, go through the
 * network device. One job, one torus, one mapping: both devices see the
 * job's shape and coordinates, the shm one simply has tasks only at its
 * host's slots.
 *
 * Which tasks share a host. Every task contributes its host's identity to
 * one allgather over the job's bootstrap: the host name (gethostname; with
 * the device's TASKS_PER_HOST variable, e.g. TORX_OFI_TASKS_PER_HOST=N,
 * which tests use, every N consecutive ranks are a host of their own) and
 * the device and inode of /dev/shm, so two tasks are on one host only if
 * they could open the same segment. With the device's LOCAL variable set
 * to the device (TORX_OFI_LOCAL=ofi), or when no host runs two tasks, every
 * task opens the plain network device instead.
 *
 * The host's shm device starts through a bootstrap of its own whose
 * collectives ride on the job's (every task of the job takes part in each
 * and keeps its host's records), so every task opens one, even alone on
 * its host: the job's allgathers stay in step on every host.
 *
 * Routing. A packet goes through shm when its destination is on this
 * host, and through the network otherwise. A deposit line goes through shm
 * only if every node it visits is on this host, else whole through the
 * network (which sends it to each node in turn): a line's packets then
 * always take the same device, so they keep their order, and the message
 * layer keeps no order between line packets and others. Per-sender order
 * holds because each sender reaches a given receiver through one device
 * only.
 *
 * Receiving. Reading the network device means progressing its library,
 * which costs far more than a look at the shm FIFOs; it is looked at on
 * every NET_POLL_EVERY-th poll while it is quiet and on every poll while
 * its packets keep coming, so traffic between tasks of one host pays little
 * for the network it does not use. When both devices hold packets they
 * take turns. */
#include "../shm/shm.h"
#include "net.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* How often a quiet network device is polled: once every this many polls. */
#define NET_POLL_EVERY 8
/* The longest sleep on one device while the other may be the one to wake
 * us (ms): neither sleep can include the other's event. */
#define WAIT_SLICE_MS 1

#define HOST_NAME_BYTES 64

enum { LOCAL_SHM, LOCAL_NET };

typedef struct hybrid_dev {
    torx_pkt_dev_t base;
    torxp_dev_ops_t ops; /* hybrid_ops, named as the network device */
    torx_pkt_dev_t *shm, *net;
    uint8_t *local; /* per torus slot: 1 when that task is on this host */

    /* receive side (receiving thread only) */
    torx_pkt_dev_t *cur;           /* the device whose packet peek returned, or NULL */
    const torx_pkt_hdr_t *cur_hdr; /* that packet */
    int net_ready;                 /* the last look at the network found a packet */
    int net_countdown;             /* polls until the network is looked at again */
    int net_first;                 /* both hold packets: the network's turn */
    char bulk_path[64];
} hybrid_dev_t;

static inline hybrid_dev_t *hybrid_of(torx_pkt_dev_t *dev)
{
    return (hybrid_dev_t *)dev; /* base is the first member */
}

static inline const hybrid_dev_t *hybrid_of_const(const torx_pkt_dev_t *dev)
{
    return (const hybrid_dev_t *)dev;
}

static inline int is_local(const hybrid_dev_t *h, torx_coord_t c)
{
    return torx_coord_in_shape(h->base.shape, c) && h->local[torx_coord_index(h->base.shape, c)];
}

/* A sub-device's unrecoverable error becomes the hybrid's, which the layer
 * above reads. */
static inline void take_failure(hybrid_dev_t *h)
{
    if (TORXP_UNLIKELY(h->base.failed == TORX_OK)) {
        if (h->net->failed != TORX_OK)
            h->base.failed = h->net->failed;
        else if (h->shm->failed != TORX_OK)
            h->base.failed = h->shm->failed;
    }
}

/* ---- Torus ---------------------------------------------------------------------------- */

static torx_pkt_dev_t *route(hybrid_dev_t *h, const torx_pkt_hdr_t *hdr)
{
    if (!(hdr->ctl & TORX_PKT_DEPOSIT))
        return is_local(h, hdr->dest) ? h->shm : h->net;
    unsigned hops;
    if (torxp_deposit_hops(&h->base, hdr, &hops) != TORX_OK)
        return h->net; /* which reports what is wrong with the line */
    for (unsigned k = 1; k <= hops; k++)
        if (!h->local[torxp_deposit_hop_slot(&h->base, hdr, k)])
            return h->net;
    return h->shm;
}

static torx_status_t hybrid_inject(torx_pkt_dev_t *dev, const torx_pkt_hdr_t *hdr,
                                   const struct iovec *iov, int iovcnt)
{
    torx_pkt_dev_t *sub = route(hybrid_of(dev), hdr);
    return sub->ops->inject(sub, hdr, iov, iovcnt);
}

static torx_status_t hybrid_inject_batch(torx_pkt_dev_t *dev, const torx_pkt_out_t *pkts, int n)
{
    return torxp_inject_batch(route(hybrid_of(dev), pkts[0].hdr), pkts, n);
}

static int hybrid_poll(torx_pkt_dev_t *dev)
{
    hybrid_dev_t *h = hybrid_of(dev);
    if (h->net_ready || --h->net_countdown <= 0) {
        h->net_ready = h->net->ops->poll(h->net);
        h->net_countdown = NET_POLL_EVERY;
    }
    const int shm_ready = h->shm->ops->poll(h->shm);
    take_failure(h);
    return h->cur_hdr || shm_ready || h->net_ready;
}

/* Peeks at sub; a quiet network device only on every NET_POLL_EVERY-th look. */
static const torx_pkt_hdr_t *look(hybrid_dev_t *h, torx_pkt_dev_t *sub)
{
    if (sub == h->net) {
        if (!h->net_ready && --h->net_countdown > 0)
            return NULL;
        h->net_countdown = NET_POLL_EVERY;
    }
    const torx_pkt_hdr_t *p = sub->ops->peek(sub);
    if (sub == h->net)
        h->net_ready = p != NULL;
    if (p) {
        h->cur = sub;
        h->cur_hdr = p;
    }
    return p;
}

static const torx_pkt_hdr_t *hybrid_peek(torx_pkt_dev_t *dev)
{
    hybrid_dev_t *h = hybrid_of(dev);
    if (h->cur_hdr)
        return h->cur_hdr;
    torx_pkt_dev_t *first = h->net_first ? h->net : h->shm;
    torx_pkt_dev_t *second = h->net_first ? h->shm : h->net;
    const torx_pkt_hdr_t *p = look(h, first);
    return p ? p : look(h, second);
}

static void hybrid_consume(torx_pkt_dev_t *dev)
{
    hybrid_dev_t *h = hybrid_of(dev);
    if (!h->cur)
        return;
    h->cur->ops->consume(h->cur);
    h->net_first = h->cur == h->shm;
    h->cur = NULL;
    h->cur_hdr = NULL;
}

static int hybrid_room(torx_pkt_dev_t *dev, torx_coord_t dest)
{
    hybrid_dev_t *h = hybrid_of(dev);
    torx_pkt_dev_t *sub = is_local(h, dest) ? h->shm : h->net;
    return sub->ops->room(sub, dest);
}

/* Neither device's sleep includes the other's event (a futex on the host,
 * descriptors on the network), so a task that waits first looks at both
 * and naps between looks, each nap twice the last, from NAP_MIN_NS up to
 * NAP_MAX_NS: a task in the middle of an exchange (more tasks than CPUs,
 * where waiting matters most) sees a packet from either device within
 * microseconds, and an idle one settles into sleeps of WAIT_SLICE_MS on
 * each device in turn, which cost next to no CPU. */
#define NAP_MIN_NS 2000L
#define NAP_MAX_NS 256000L

static torx_status_t hybrid_wait(torx_pkt_dev_t *dev, int timeout_ms)
{
    hybrid_dev_t *h = hybrid_of(dev);
    if (h->cur_hdr)
        return TORX_OK;
    const double deadline = timeout_ms < 0 ? -1 : torxp_mono_s() + timeout_ms * 1e-3;
    h->net_countdown = 0; /* after any sleep, look at the network at once */
    long nap_ns = NAP_MIN_NS;
    for (;;) {
        if (h->net->ops->wait(h->net, 0) == TORX_OK)
            return TORX_OK;
        int slice = 0;
        if (nap_ns > NAP_MAX_NS) {
            slice = WAIT_SLICE_MS;
            if (deadline >= 0) {
                const double left_ms = (deadline - torxp_mono_s()) * 1e3;
                if (left_ms < slice)
                    slice = left_ms > 0 ? (int)left_ms : 0;
            }
        }
        if (h->shm->ops->wait(h->shm, slice) == TORX_OK)
            return TORX_OK;
        if (deadline >= 0 && torxp_mono_s() >= deadline)
            return TORX_AGAIN;
        if (nap_ns <= NAP_MAX_NS) {
            const struct timespec ts = {0, nap_ns};
            nanosleep(&ts, NULL);
            nap_ns *= 2;
        }
    }
}

static void hybrid_wake(torx_pkt_dev_t *dev)
{
    hybrid_dev_t *h = hybrid_of(dev);
    h->shm->ops->wake(h->shm);
    h->net->ops->wake(h->net);
}

/* ---- Collective network and global interrupt: the job's, over the network ------------- */

static torx_status_t hybrid_cn_inject(torx_pkt_dev_t *dev, unsigned ch, torx_cn_op_t op,
                                      torx_cn_type_t type, int is_root, const void *data)
{
    hybrid_dev_t *h = hybrid_of(dev);
    return h->net->ops->cn_inject(h->net, ch, op, type, is_root, data);
}

static torx_status_t hybrid_cn_read(torx_pkt_dev_t *dev, unsigned ch, void *result)
{
    hybrid_dev_t *h = hybrid_of(dev);
    const torx_status_t rc = h->net->ops->cn_read(h->net, ch, result);
    take_failure(h);
    return rc;
}

static torx_status_t hybrid_gi_arm(torx_pkt_dev_t *dev, unsigned ch)
{
    hybrid_dev_t *h = hybrid_of(dev);
    return h->net->ops->gi_arm(h->net, ch);
}

static torx_status_t hybrid_gi_poll(torx_pkt_dev_t *dev, unsigned ch)
{
    hybrid_dev_t *h = hybrid_of(dev);
    const torx_status_t rc = h->net->ops->gi_poll(h->net, ch);
    take_failure(h);
    return rc;
}

/* ---- Bulk: cross-memory attach on the host, RMA between hosts -------------------------- */

static torx_status_t hybrid_bulk_get(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer,
                                     const void *remote, void *local, size_t len, unsigned flags)
{
    hybrid_dev_t *h = hybrid_of(dev);
    torx_pkt_dev_t *sub = is_local(h, peer) ? h->shm : h->net;
    return sub->ops->bulk_get(sub, op, peer, remote, local, len, flags);
}

static torx_status_t hybrid_bulk_put(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer,
                                     void *remote, const void *local, size_t len)
{
    hybrid_dev_t *h = hybrid_of(dev);
    torx_pkt_dev_t *sub = is_local(h, peer) ? h->shm : h->net;
    return sub->ops->bulk_put(sub, op, peer, remote, local, len);
}

/* An operation belongs to the device whose mark it carries: the shm
 * device's ops start with TORXP_SHM_BULK_MAGIC, and anything else is the
 * network device's to judge (including an op never started). */
static torx_status_t hybrid_bulk_test(torx_pkt_dev_t *dev, torx_bulk_t *op)
{
    hybrid_dev_t *h = hybrid_of(dev);
    const int on_shm =
        op && ((const torxp_shm_bulk_t *)(const void *)op)->magic == TORXP_SHM_BULK_MAGIC;
    torx_pkt_dev_t *sub = on_shm ? h->shm : h->net;
    const torx_status_t rc = sub->ops->bulk_test(sub, op);
    take_failure(h);
    return rc;
}

static const char *hybrid_bulk_path(const torx_pkt_dev_t *dev)
{
    return hybrid_of_const(dev)->bulk_path;
}

/* ---- Staging: the host's shm area on the host, the network's between hosts -------- */

static inline torx_pkt_dev_t *stage_dev(const hybrid_dev_t *h, torx_coord_t peer)
{
    return is_local(h, peer) ? h->shm : h->net;
}

/* The smaller of the two, so one piece size serves every peer. */
static size_t hybrid_stage_max(const torx_pkt_dev_t *dev)
{
    const hybrid_dev_t *h = hybrid_of_const(dev);
    const size_t a = h->shm->ops->stage_max(h->shm), b = h->net->ops->stage_max(h->net);
    return !a ? b : !b ? a : a < b ? a : b;
}

static int hybrid_stage_reaches(const torx_pkt_dev_t *dev, torx_coord_t dest)
{
    const hybrid_dev_t *h = hybrid_of_const(dev);
    const torx_pkt_dev_t *sub = stage_dev(h, dest);
    return sub->ops->stage_max(sub) >= hybrid_stage_max(dev) && sub->ops->stage_reaches(sub, dest);
}

static torx_status_t hybrid_stage_put(torx_pkt_dev_t *dev, torx_coord_t dest, const void *data,
                                      size_t len, torx_stage_ref_t *ref)
{
    torx_pkt_dev_t *sub = stage_dev(hybrid_of(dev), dest);
    return sub->ops->stage_put(sub, dest, data, len, ref);
}

static const void *hybrid_stage_data(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref)
{
    torx_pkt_dev_t *sub = stage_dev(hybrid_of(dev), src);
    return sub->ops->stage_data(sub, src, ref);
}

static void hybrid_stage_release(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref)
{
    torx_pkt_dev_t *sub = stage_dev(hybrid_of(dev), src);
    sub->ops->stage_release(sub, src, ref);
}

static void hybrid_stage_unput(torx_pkt_dev_t *dev, torx_coord_t dest, torx_stage_ref_t ref)
{
    torx_pkt_dev_t *sub = stage_dev(hybrid_of(dev), dest);
    sub->ops->stage_unput(sub, dest, ref);
}

static int hybrid_stage_idle(torx_pkt_dev_t *dev, torx_coord_t dest)
{
    torx_pkt_dev_t *sub = stage_dev(hybrid_of(dev), dest);
    return torx_stage_idle(sub, dest);
}

static size_t hybrid_stage_idle_max(torx_pkt_dev_t *dev, torx_coord_t dest)
{
    return torx_stage_idle_max(stage_dev(hybrid_of(dev), dest), dest);
}

static unsigned hybrid_stage_cost(const torx_pkt_dev_t *dev, torx_coord_t dest)
{
    return torx_stage_cost(stage_dev(hybrid_of_const(dev), dest), dest);
}

/* The bulk path toward peer is the sub-device's (on the host, shm's). */
static unsigned hybrid_bulk_cost(const torx_pkt_dev_t *dev, torx_coord_t peer)
{
    const torx_pkt_dev_t *sub = stage_dev(hybrid_of_const(dev), peer);
    return sub->ops->bulk_cost ? sub->ops->bulk_cost(sub, peer) : 0;
}

static void hybrid_close(torx_pkt_dev_t *dev)
{
    hybrid_dev_t *h = hybrid_of(dev);
    /* The network first: its close lets the last packets and barrier messages leave
     * while the host's tasks can still be reached. */
    if (h->net)
        h->net->ops->close(h->net);
    if (h->shm)
        h->shm->ops->close(h->shm);
    free(h->local);
    free(h);
}

/* The network device's name and figures are filled in at open. */
static const torxp_dev_ops_t hybrid_ops = {
    .inject = hybrid_inject,
    .inject_batch = hybrid_inject_batch,
    .poll = hybrid_poll,
    .peek = hybrid_peek,
    .consume = hybrid_consume,
    .room = hybrid_room,
    .wait = hybrid_wait,
    .wake = hybrid_wake,
    .cn_inject = hybrid_cn_inject,
    .cn_read = hybrid_cn_read,
    .gi_arm = hybrid_gi_arm,
    .gi_poll = hybrid_gi_poll,
    .bulk_get = hybrid_bulk_get,
    .bulk_put = hybrid_bulk_put,
    .bulk_test = hybrid_bulk_test,
    .bulk_path = hybrid_bulk_path,
    .bulk_cost = hybrid_bulk_cost,
    .stage_max = hybrid_stage_max,
    .stage_reaches = hybrid_stage_reaches,
    .stage_put = hybrid_stage_put,
    .stage_data = hybrid_stage_data,
    .stage_release = hybrid_stage_release,
    .stage_unput = hybrid_stage_unput,
    .stage_idle = hybrid_stage_idle,
    .stage_idle_max = hybrid_stage_idle_max,
    .stage_cost = hybrid_stage_cost,
    .close = hybrid_close,
};

/* ---- The host's bootstrap -------------------------------------------------------------- */

/* The tasks of one host, as a job of their own for the shm device: rank i
 * is the i-th of the host's tasks in job rank order. Its collectives are
 * the job's, of which it keeps the host's part. */
typedef struct host_boot {
    torx_boot_t base;
    torx_boot_t *job;
    const int32_t *members; /* job ranks, base.size of them */
} host_boot_t;

static torx_status_t host_allgather(torx_boot_t *boot, const void *mine, void *all, size_t len)
{
    host_boot_t *b = (host_boot_t *)boot;
    unsigned char *every = torxp_malloc((size_t)b->job->size * len);
    if (!every)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for a start-up allgather");
    const torx_status_t rc = b->job->allgather(b->job, mine, every, len);
    if (rc == TORX_OK)
        for (int i = 0; i < b->base.size; i++)
            memcpy((unsigned char *)all + (size_t)i * len, every + (size_t)b->members[i] * len,
                   len);
    free(every);
    return rc;
}

static torx_status_t host_barrier(torx_boot_t *boot)
{
    host_boot_t *b = (host_boot_t *)boot;
    return b->job->barrier(b->job);
}

/* ---- Open -------------------------------------------------------------------------------- */

/* What each task tells the others about its host. */
typedef struct host_record {
    int32_t status;
    int32_t local_mode; /* the device's LOCAL variable: LOCAL_SHM or LOCAL_NET */
    torx_coord_t self;
    uint64_t shm_dev, shm_ino;
    char name[HOST_NAME_BYTES];
} host_record_t;

static int same_host(const host_record_t *a, const host_record_t *b)
{
    return a->shm_dev == b->shm_dev && a->shm_ino == b->shm_ino &&
           !strncmp(a->name, b->name, HOST_NAME_BYTES);
}

static torx_status_t read_host(const torxp_net_kind_t *kind, host_record_t *r, int rank)
{
    const char *const local_names[] = {"shm", kind->name, NULL};
    int mode = LOCAL_SHM;
    long per_host = 0;
    torx_status_t rc = torx_env_choice(kind->local_var, local_names, LOCAL_SHM, &mode);
    if (rc == TORX_OK)
        rc = torx_env_int(kind->per_host_var, 0, 1L << 20, 0, &per_host);
    if (rc != TORX_OK)
        return rc;
    r->local_mode = mode;
    if (per_host > 0) { /* hosts emulated on one machine (tests) */
        snprintf(r->name, sizeof r->name, "torx-emulated-host-%ld", rank / per_host);
    } else if (gethostname(r->name, sizeof r->name - 1) != 0) {
        return torxp_error(TORX_ERR_SYS, "torx: %s device: gethostname: %s", kind->name,
                           strerror(errno));
    }
    struct stat st;
    if (stat("/dev/shm", &st) == 0) {
        r->shm_dev = (uint64_t)st.st_dev;
        r->shm_ino = (uint64_t)st.st_ino;
    }
    return TORX_OK;
}

/* TORX_VERBOSE=1 on rank 0: what TORX_DEVICE=auto chose. */
static void say_auto_choice(const torxp_net_kind_t *kind, const torx_pkt_attr_t *attr,
                            const torxp_env_t *env, const host_record_t *all, int nhosts)
{
    if (env->verbose < 1 || attr->boot->rank != 0)
        return;
    if (nhosts == 1)
        fprintf(stderr, "torx[0]: TORX_DEVICE=auto: the job's %d tasks are on one host (%s): shm\n",
                attr->boot->size, all[0].name);
    else
        fprintf(stderr,
                "torx[0]: TORX_DEVICE=auto: the job's %d tasks are on %d hosts: %s between "
                "hosts, shm within one\n",
                attr->boot->size, nhosts, kind->name);
}

torx_status_t torxp_net_hybrid_open(const torxp_net_kind_t *kind, int automatic,
                                    const torx_pkt_attr_t *attr, const torxp_env_t *env,
                                    torx_pkt_dev_t **out)
{
    torx_boot_t *job = attr->boot;
    const int n = job->size;
    /* Every task takes part in the exchange whatever happens, so one
     * task's failure never leaves the others waiting. */
    host_record_t *all = torxp_calloc((size_t)n, sizeof *all);
    int32_t *members = torxp_calloc((size_t)n, sizeof *members);
    host_record_t mine = {.self = attr->self};
    mine.status = members ? read_host(kind, &mine, job->rank)
                          : torxp_error(TORX_ERR_NOMEM, "torx: out of memory for %d hosts", n);
    torx_status_t rc = mine.status;
    torx_status_t brc = all ? job->allgather(job, &mine, all, sizeof mine)
                            : torxp_error(TORX_ERR_NOMEM, "torx: out of memory for %d hosts", n);
    if (brc != TORX_OK) {
        free(all);
        free(members);
        return rc != TORX_OK ? rc : brc;
    }
    char what[64];
    snprintf(what, sizeof what, "open the %s device", kind->name);
    rc = torxp_boot_vote(job, rc, what);
    for (int r = 1; rc == TORX_OK && r < n; r++)
        if (all[r].local_mode != all[0].local_mode)
            rc = torxp_error(TORX_ERR_ENV,
                             "torx: rank %d has %s=%s but rank 0 has %s; set the "
                             "same value for every task",
                             r, kind->local_var, all[r].local_mode ? kind->name : "shm",
                             all[0].local_mode ? kind->name : "shm");
    if (rc != TORX_OK) {
        free(all);
        free(members);
        return rc;
    }

    /* This host's tasks, whether any host runs two, and how many hosts. */
    int nlocal = 0, my_local_rank = 0, shared = 0, nhosts = 0;
    for (int r = 0; r < n; r++) {
        int on_host = 0, first = 1;
        for (int q = 0; q < n; q++) {
            on_host += same_host(&all[r], &all[q]);
            first &= q >= r || !same_host(&all[r], &all[q]);
        }
        nhosts += first;
        shared |= on_host > 1;
        if (same_host(&all[r], &all[job->rank])) {
            if (r == job->rank)
                my_local_rank = nlocal;
            members[nlocal++] = r;
        }
    }
    if (automatic) {
        say_auto_choice(kind, attr, env, all, nhosts);
        if (nhosts == 1) { /* one host: its shared memory is the whole network */
            free(all);
            free(members);
            return torxp_shm_open(attr, env, out);
        }
    }
    /* The device's module, loaded by every task, and agreed on before
     * any task opens it: the opens exchange addresses with each other. */
    const torxp_net_module_t *mod;
    rc = torxp_boot_vote(job, torxp_net_module_load(kind, &mod), what);
    if (rc != TORX_OK || all[0].local_mode == LOCAL_NET || !shared) {
        free(all);
        free(members);
        return rc != TORX_OK ? rc : mod->open(attr, env, out);
    }

    hybrid_dev_t *h = torxp_calloc(1, sizeof *h);
    if (h && !(h->local = torxp_calloc(torx_shape_slots(attr->shape), 1))) {
        free(h);
        h = NULL;
    }
    for (int i = 0; h && i < nlocal; i++)
        h->local[torx_coord_index(attr->shape, all[members[i]].self)] = 1;
    host_boot_t hb = {.base = {.rank = my_local_rank,
                               .size = nlocal,
                               .allgather = host_allgather,
                               .barrier = host_barrier},
                      .job = job,
                      .members = members};
    torx_pkt_attr_t host_attr = *attr;
    host_attr.boot = &hb.base;

    /* Every task opens both devices (see the top), failing or not, then
     * votes: the shm device's own vote spans only its host. */
    torx_pkt_dev_t *shm = NULL, *net = NULL;
    rc = torxp_shm_open(&host_attr, env, &shm);
    const torx_status_t orc = mod->open(attr, env, &net);
    if (rc == TORX_OK)
        rc = orc;
    if (rc == TORX_OK && !h)
        rc = torxp_error(TORX_ERR_NOMEM, "torx: out of memory opening the %s device", kind->name);
    rc = torxp_boot_vote(job, rc, what);
    free(all);
    free(members);
    if (rc != TORX_OK) {
        if (net)
            net->ops->close(net);
        if (shm)
            shm->ops->close(shm);
        if (h)
            free(h->local);
        free(h);
        return rc;
    }
    h->ops = hybrid_ops;
    h->ops.name = kind->name;
    h->ops.network = mod->network;
    h->base = (torx_pkt_dev_t){.ops = &h->ops,
                               .shape = attr->shape,
                               .self = attr->self,
                               .rank = job->rank,
                               .size = n,
                               .verbose = (int)env->verbose};
    h->shm = shm;
    h->net = net;
    h->net_countdown = 1;
    snprintf(h->bulk_path, sizeof h->bulk_path, "%s on this host, %s between hosts",
             shm->ops->bulk_path(shm), net->ops->bulk_path(net));
    torxp_log(&h->base, 1,
              "%s device: %d of the job's %d tasks on this host (%s) reach each other through "
              "shm (%s=shm), the others through %s; bulk %s",
              kind->name, nlocal, n, mine.name, kind->local_var, kind->name, h->bulk_path);
    *out = &h->base;
    return TORX_OK;
}
