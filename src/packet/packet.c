/* The packet layer's public entry points: argument checks at open, then a
 * thin dispatch to the device's ops table. */
#include "pkt_internal.h"

#include <torx/sim.h>

#include <string.h>
#include <sys/random.h>
#include <unistd.h>

static const char *const device_names[] = {"auto", "shm", "ofi", "ucx", "sim", NULL};
enum { DEVICE_AUTO, DEVICE_SHM, DEVICE_OFI, DEVICE_UCX, DEVICE_SIM };

static torx_status_t check_attr(const torx_pkt_attr_t *attr)
{
    if (!attr || !attr->boot)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_pkt_open needs attributes with a bootstrap");
    const torx_shape_t s = attr->shape;
    if (!s.x || !s.y || !s.z || !s.t)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torus shape %ux%ux%u with %u tasks per node has "
                           "a zero extent",
                           s.x, s.y, s.z, s.t);
    if (torx_shape_slots(s) < (unsigned)attr->boot->size)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torus shape %ux%ux%u x %u tasks per node has %u slots, fewer "
                           "than the job's %d tasks",
                           s.x, s.y, s.z, s.t, torx_shape_slots(s), attr->boot->size);
    if (attr->flags & ~TORX_PKT_SHARED_INJECT)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_pkt_open: unknown attribute flags 0x%x",
                           attr->flags & ~TORX_PKT_SHARED_INJECT);
    if (!torx_coord_in_shape(s, attr->self))
        return torxp_error(TORX_ERR_INVAL,
                           "torx: rank %d's coordinate (%u,%u,%u,%u) is outside the torus "
                           "%ux%ux%u with %u tasks per node",
                           attr->boot->rank, attr->self.x, attr->self.y, attr->self.z, attr->self.t,
                           s.x, s.y, s.z, s.t);
    return TORX_OK;
}

unsigned torxp_device_caps(const char *device)
{
    if (!device)
        device = getenv("TORX_DEVICE");
    return device && !strcmp(device, "sim") ? TORXP_CAP_EXACT_WAIT | TORXP_CAP_MODELLED : 0;
}

torx_status_t torx_pkt_open(const torx_pkt_attr_t *attr, torx_pkt_dev_t **dev)
{
    torx_status_t rc = check_attr(attr);
    if (rc != TORX_OK)
        return rc;

    int device = DEVICE_AUTO;
    if (attr->device) {
        for (device = 0; device_names[device]; device++)
            if (!strcmp(device_names[device], attr->device))
                break;
        if (!device_names[device])
            return torxp_error(TORX_ERR_INVAL,
                               "torx: unknown device '%s' (expected auto, shm, ofi, ucx or sim)",
                               attr->device);
    } else {
        rc = torx_env_choice("TORX_DEVICE", device_names, DEVICE_AUTO, &device);
        if (rc != TORX_OK)
            return rc;
    }

    torxp_env_t env;
    rc = torxp_env_read(&env);
    if (rc != TORX_OK)
        return rc;

    switch (device) {
    case DEVICE_AUTO:
        /* shm when every task is on one host, else a network device between
         * hosts with shm within each (net_hybrid.c): ofi where the build has
         * it, which measured level with ucx or faster at every size between
         * hosts over tcp (docs/multihost.md#choosing-a-network-device), else
         * ucx. */
#if defined(TORX_HAVE_OFI)
        return torxp_net_hybrid_open(&torxp_ofi_kind, 1, attr, &env, dev);
#elif defined(TORX_HAVE_UCX)
        return torxp_net_hybrid_open(&torxp_ucx_kind, 1, attr, &env, dev);
#else
        return torxp_shm_open(attr, &env, dev);
#endif
    case DEVICE_SHM:
        return torxp_shm_open(attr, &env, dev);
    case DEVICE_UCX:
#ifdef TORX_HAVE_UCX
        return torxp_net_hybrid_open(&torxp_ucx_kind, 0, attr, &env, dev);
#else
        return torxp_error(TORX_ERR_UNSUPPORTED,
                           "torx: TORX_DEVICE=ucx: this build has no UCX device (configured "
                           "--without-ucx or libucx-dev missing)");
#endif
    case DEVICE_SIM:
#ifdef TORX_HAVE_SIMGRID
        return torxp_sim_open(attr, &env, dev);
#else
        return torxp_error(TORX_ERR_UNSUPPORTED,
                           "torx: TORX_DEVICE=sim: this build has no sim device (configured "
                           "--without-simgrid or libsimgrid-dev missing)");
#endif
    default:
#ifdef TORX_HAVE_OFI
        return torxp_net_hybrid_open(&torxp_ofi_kind, 0, attr, &env, dev);
#else
        return torxp_error(TORX_ERR_UNSUPPORTED,
                           "torx: TORX_DEVICE=ofi: this build has no libfabric device "
                           "(configured --without-ofi or libfabric-dev missing); use "
                           "TORX_DEVICE=shm (one host)");
#endif
    }
}

void torx_pkt_close(torx_pkt_dev_t *dev)
{
    if (dev)
        dev->ops->close(dev);
}

const char *torx_pkt_device_name(const torx_pkt_dev_t *dev)
{
    return dev->ops->name;
}

torx_coord_t torx_pkt_self(const torx_pkt_dev_t *dev)
{
    return dev->self;
}

torx_shape_t torx_pkt_shape(const torx_pkt_dev_t *dev)
{
    return dev->shape;
}

void torx_pkt_network(const torx_pkt_dev_t *dev, torx_net_t *net)
{
    *net = (torx_net_t){.kind = TORX_NET_CROSSBAR, .shape = dev->shape};
    dev->ops->network(dev, net);
    net->shape = dev->shape;
}

double torx_pkt_wtime(const torx_pkt_dev_t *dev)
{
    return torxp_now_s(dev);
}

torx_status_t torx_pkt_inject(torx_pkt_dev_t *dev, const torx_pkt_hdr_t *hdr,
                              const struct iovec *iov, int iovcnt)
{
    if (TORXP_FAULT(TORXP_FAULT_INJECT))
        return torxp_error(TORX_ERR_SYS, "torx: packet injection failed (fault injection, "
                                         "TORX_FAULT_INJECT)");
    return dev->ops->inject(dev, hdr, iov, iovcnt);
}

torx_status_t torx_pkt_inject_batch(torx_pkt_dev_t *dev, const torx_pkt_out_t *pkts, int n)
{
    if (n < 1 || n > TORX_PKT_BATCH_MAX || !pkts)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_pkt_inject_batch: %d packets (1..%d, from a non-NULL "
                           "array)",
                           n, TORX_PKT_BATCH_MAX);
    uint32_t dest0;
    memcpy(&dest0, &pkts[0].hdr->dest, sizeof dest0);
    for (int i = 0; i < n; i++) {
        uint32_t dest;
        memcpy(&dest, &pkts[i].hdr->dest, sizeof dest);
        if (TORXP_UNLIKELY(dest != dest0 ||
                           (pkts[i].hdr->ctl & (TORX_PKT_ADAPTIVE | TORX_PKT_DEPOSIT))))
            return torxp_error(TORX_ERR_INVAL, "torx: torx_pkt_inject_batch: packet %d of %d is %s",
                               i, n,
                               dest != dest0 ? "for another destination than packet 0"
                                             : "adaptive or a deposit line's");
    }
    if (TORXP_FAULT(TORXP_FAULT_INJECT))
        return torxp_error(TORX_ERR_SYS, "torx: packet injection failed (fault injection, "
                                         "TORX_FAULT_INJECT)");
    return torxp_inject_batch(dev, pkts, n);
}

int torx_pkt_poll(torx_pkt_dev_t *dev)
{
    return dev->ops->poll(dev);
}

const torx_pkt_hdr_t *torx_pkt_peek(torx_pkt_dev_t *dev)
{
    return dev->ops->peek(dev);
}

void torx_pkt_read(const torx_pkt_hdr_t *pkt, void *dst, size_t off, size_t len)
{
    memcpy(dst, (const char *)torx_pkt_payload(pkt) + off, len);
}

void torx_pkt_consume(torx_pkt_dev_t *dev)
{
    dev->ops->consume(dev);
}

const torx_pkt_hdr_t *torx_pkt_peek_next(torx_pkt_dev_t *dev)
{
    return dev->ops->peek_next ? dev->ops->peek_next(dev) : dev->ops->peek(dev);
}

int torx_pkt_room(torx_pkt_dev_t *dev, torx_coord_t dest)
{
    return dev->ops->room(dev, dest);
}

torx_status_t torx_pkt_wait(torx_pkt_dev_t *dev, int timeout_ms)
{
    return dev->ops->wait(dev, timeout_ms);
}

void torx_pkt_wake(torx_pkt_dev_t *dev)
{
    dev->ops->wake(dev);
}

torx_status_t torx_cn_inject(torx_pkt_dev_t *dev, torx_cn_op_t op, torx_cn_type_t type, int is_root,
                             const void *data)
{
    return dev->ops->cn_inject(dev, 0, op, type, is_root, data);
}

torx_status_t torx_cn_read(torx_pkt_dev_t *dev, void *result)
{
    return dev->ops->cn_read(dev, 0, result);
}

torx_status_t torx_gi_arm(torx_pkt_dev_t *dev)
{
    return dev->ops->gi_arm(dev, 0);
}

torx_status_t torx_gi_poll(torx_pkt_dev_t *dev)
{
    return dev->ops->gi_poll(dev, 0);
}

static torx_status_t bad_channel(const char *fn, unsigned channel, unsigned n)
{
    return torxp_error(TORX_ERR_INVAL, "torx: %s: channel %u is out of range (0..%u)", fn, channel,
                       n - 1);
}

torx_status_t torx_cn_inject_on(torx_pkt_dev_t *dev, unsigned channel, torx_cn_op_t op,
                                torx_cn_type_t type, int is_root, const void *data)
{
    if (TORXP_UNLIKELY(channel >= TORX_CN_CHANNELS))
        return bad_channel("torx_cn_inject_on", channel, TORX_CN_CHANNELS);
    return dev->ops->cn_inject(dev, channel, op, type, is_root, data);
}

torx_status_t torx_cn_read_on(torx_pkt_dev_t *dev, unsigned channel, void *result)
{
    if (TORXP_UNLIKELY(channel >= TORX_CN_CHANNELS))
        return bad_channel("torx_cn_read_on", channel, TORX_CN_CHANNELS);
    return dev->ops->cn_read(dev, channel, result);
}

torx_status_t torx_gi_arm_on(torx_pkt_dev_t *dev, unsigned channel)
{
    if (TORXP_UNLIKELY(channel >= TORX_GI_CHANNELS))
        return bad_channel("torx_gi_arm_on", channel, TORX_GI_CHANNELS);
    return dev->ops->gi_arm(dev, channel);
}

torx_status_t torx_gi_poll_on(torx_pkt_dev_t *dev, unsigned channel)
{
    if (TORXP_UNLIKELY(channel >= TORX_GI_CHANNELS))
        return bad_channel("torx_gi_poll_on", channel, TORX_GI_CHANNELS);
    return dev->ops->gi_poll(dev, channel);
}

torx_status_t torx_bulk_get(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer,
                            const void *remote, void *local, size_t len)
{
    return dev->ops->bulk_get(dev, op, peer, remote, local, len, 0);
}

torx_status_t torx_bulk_get_shared(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer,
                                   const void *remote, void *local, size_t len)
{
    return dev->ops->bulk_get(dev, op, peer, remote, local, len, TORXP_BULK_F_SHARE);
}

torx_status_t torx_bulk_put(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer, void *remote,
                            const void *local, size_t len)
{
    return dev->ops->bulk_put(dev, op, peer, remote, local, len);
}

torx_status_t torx_bulk_test(torx_pkt_dev_t *dev, torx_bulk_t *op)
{
    return dev->ops->bulk_test(dev, op);
}

const char *torx_bulk_path(const torx_pkt_dev_t *dev)
{
    return dev->ops->bulk_path(dev);
}

size_t torx_stage_max(const torx_pkt_dev_t *dev)
{
    return dev->ops->stage_max(dev);
}

int torx_stage_reaches(const torx_pkt_dev_t *dev, torx_coord_t dest)
{
    return dev->ops->stage_reaches(dev, dest);
}

torx_status_t torx_stage_put(torx_pkt_dev_t *dev, torx_coord_t dest, const void *data, size_t len,
                             torx_stage_ref_t *ref)
{
    return dev->ops->stage_put(dev, dest, data, len, ref);
}

const void *torx_stage_data(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref)
{
    return dev->ops->stage_data(dev, src, ref);
}

void torx_stage_release(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref)
{
    dev->ops->stage_release(dev, src, ref);
}

void torx_stage_unput(torx_pkt_dev_t *dev, torx_coord_t dest, torx_stage_ref_t ref)
{
    dev->ops->stage_unput(dev, dest, ref);
}

/* stage_idle and stage_cost are optional: a device without staging areas
 * (stage_max 0) leaves them out. */
int torx_stage_idle(torx_pkt_dev_t *dev, torx_coord_t dest)
{
    return dev->ops->stage_idle ? dev->ops->stage_idle(dev, dest) : 1;
}

size_t torx_stage_idle_max(torx_pkt_dev_t *dev, torx_coord_t dest)
{
    if (!torx_stage_reaches(dev, dest))
        return 0;
    return dev->ops->stage_idle_max ? dev->ops->stage_idle_max(dev, dest) : SIZE_MAX;
}

unsigned torx_stage_cost(const torx_pkt_dev_t *dev, torx_coord_t dest)
{
    return dev->ops->stage_cost ? dev->ops->stage_cost(dev, dest) : 0;
}

unsigned torx_bulk_cost(const torx_pkt_dev_t *dev, torx_coord_t peer)
{
    return dev->ops->bulk_cost ? dev->ops->bulk_cost(dev, peer) : 0;
}

size_t torx_mstage_max(const torx_pkt_dev_t *dev)
{
    return dev->ops->mstage_max ? dev->ops->mstage_max(dev) : 0;
}

torx_status_t torx_mstage_put(torx_pkt_dev_t *dev, const void *data, size_t len, unsigned readers,
                              torx_stage_ref_t *ref)
{
    if (!dev->ops->mstage_put)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_mstage_put: this device has no multi-reader staging area");
    return dev->ops->mstage_put(dev, data, len, readers, ref);
}

const void *torx_mstage_data(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref)
{
    return dev->ops->mstage_data ? dev->ops->mstage_data(dev, src, ref) : NULL;
}

void torx_mstage_release(torx_pkt_dev_t *dev, torx_coord_t src, torx_stage_ref_t ref)
{
    if (dev->ops->mstage_release)
        dev->ops->mstage_release(dev, src, ref);
}

/* ---- Deposit lines --------------------------------------------------------- */

torx_status_t torxp_deposit_hops(const torx_pkt_dev_t *dev, const torx_pkt_hdr_t *hdr,
                                 unsigned *hops)
{
    const torx_shape_t s = dev->shape;
    const torx_coord_t me = dev->self, to = hdr->dest;
    const int dim = torx_pkt_hdr_deposit_dim(hdr);
    const uint8_t mine[3] = {me.x, me.y, me.z}, theirs[3] = {to.x, to.y, to.z};
    const unsigned ext[3] = {s.x, s.y, s.z};
    if (dim > TORX_DIM_Z)
        return torxp_error(TORX_ERR_INVAL, "torx: deposit packet names dimension %d (0..2)", dim);
    for (int i = 0; i < 3; i++)
        if (i != dim && mine[i] != theirs[i])
            return torxp_error(TORX_ERR_INVAL,
                               "torx: deposit line from (%u,%u,%u) to (%u,%u,%u) along dimension "
                               "%d leaves that line",
                               me.x, me.y, me.z, to.x, to.y, to.z, dim);
    const unsigned n = ext[dim];
    *hops = (hdr->ctl & TORX_PKT_DEPOSIT_NEG) ? (mine[dim] + n - theirs[dim]) % n
                                              : (theirs[dim] + n - mine[dim]) % n;
    if (*hops == 0)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: deposit line from (%u,%u,%u) ends where it starts; name the "
                           "last node of the line as destination",
                           me.x, me.y, me.z);
    return TORX_OK;
}

unsigned torxp_deposit_hop_slot(const torx_pkt_dev_t *dev, const torx_pkt_hdr_t *hdr, unsigned k)
{
    const torx_shape_t s = dev->shape;
    const unsigned ext[3] = {s.x, s.y, s.z};
    const int dim = torx_pkt_hdr_deposit_dim(hdr);
    uint8_t c[3] = {dev->self.x, dev->self.y, dev->self.z};
    const unsigned n = ext[dim];
    c[dim] =
        (uint8_t)((hdr->ctl & TORX_PKT_DEPOSIT_NEG) ? (c[dim] + n - k % n) % n : (c[dim] + k) % n);
    return torx_coord_index(s, (torx_coord_t){c[0], c[1], c[2], hdr->dest.t});
}

void torxp_deposit_stash(torxp_deposit_stash_t *s, const torx_pkt_hdr_t *hdr,
                         const struct iovec *iov, int iovcnt, size_t len, unsigned k, unsigned hops)
{
    s->next_hop = k;
    s->hops = hops;
    s->hdr = *hdr;
    s->hdr.payload_len = (uint8_t)len;
    uint8_t *p = s->payload;
    for (int i = 0; i < iovcnt; i++) {
        memcpy(p, iov[i].iov_base, iov[i].iov_len);
        p += iov[i].iov_len;
    }
}

uint64_t torxp_random64(void)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
        r = torxp_mono_ns() ^ ((uint64_t)getpid() << 40);
    return r;
}

#ifndef TORX_HAVE_SIMGRID
/* Without the sim device no job is simulated (include/torx/sim.h). */
torx_status_t torx_sim_compute(double seconds)
{
    (void)seconds;
    return torxp_error(TORX_ERR_UNSUPPORTED,
                       "torx: torx_sim_compute: this build has no sim device (no simulated job)");
}
#endif
