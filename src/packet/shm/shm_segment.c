/* The shm device's life cycle: one shared segment per job, created by rank 0
 * with mode 0600 under a name unique to the job, attached by every task, and
 * unlinked as soon as the last task has attached, so a crash leaves nothing
 * in /dev/shm. */
#include "shm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define SHM_DIR "/dev/shm"
#define NAME_PREFIX "torx-"

static size_t align_up(size_t n, size_t a)
{
    return (n + a - 1) / a * a;
}

typedef struct layout {
    uint64_t task_table_off, cn_off, gi_off, fifo_off, stage_off, stage_stride, mstage_off,
        mstage_stride, share_off, total;
    uint32_t stage_bytes, mstage_bytes;
    torxp_fifo_geom_t geom;
} layout_t;

static layout_t compute_layout(unsigned nslots, unsigned ntasks, uint32_t fifo_log2,
                               long stage_want, long mstage_want)
{
    layout_t l;
    l.geom = torxp_fifo_geom(fifo_log2);
    l.task_table_off = align_up(sizeof(torxp_shm_seg_hdr_t), TORXP_CACHELINE);
    l.cn_off =
        align_up(l.task_table_off + (uint64_t)nslots * sizeof(torxp_shm_task_t), TORXP_CACHELINE);
    l.gi_off = align_up(l.cn_off + torxp_shm_cn_bytes(ntasks), TORXP_CACHELINE);
    l.fifo_off = align_up(l.gi_off + torxp_shm_gi_bytes(ntasks), 4096);
    l.stage_off =
        align_up(l.fifo_off + (uint64_t)nslots * TORXP_SHM_FIFOS_PER_TASK * l.geom.stride, 4096);
    l.stage_bytes = torxp_shm_stage_bytes(ntasks, stage_want);
    l.stage_stride = l.stage_bytes ? TORXP_SHM_STAGE_CTL + l.stage_bytes : 0;
    l.mstage_off = align_up(l.stage_off + (uint64_t)ntasks * ntasks * l.stage_stride, 4096);
    l.mstage_bytes = torxp_shm_mstage_bytes(ntasks, mstage_want);
    l.mstage_stride = torxp_shm_mstage_stride(l.mstage_bytes);
    l.share_off = align_up(l.mstage_off + (uint64_t)ntasks * l.mstage_stride, 4096);
    l.total = align_up(l.share_off + (uint64_t)nslots * sizeof(torxp_shm_share_t), 4096);
    return l;
}

/* Removes segments of this user whose creator is dead: what a job killed
 * between creation and the last attach left behind. */
static void remove_stale_segments(const torx_pkt_dev_t *dev)
{
    DIR *dir = opendir(SHM_DIR);
    if (!dir)
        return;
    char prefix[32];
    snprintf(prefix, sizeof prefix, NAME_PREFIX "%u-", (unsigned)getuid());
    for (struct dirent *e; (e = readdir(dir));) {
        if (strncmp(e->d_name, prefix, strlen(prefix)))
            continue;
        long pid = strtol(e->d_name + strlen(prefix), NULL, 10);
        if (pid <= 0 || !(kill((pid_t)pid, 0) == -1 && errno == ESRCH))
            continue;
        char name[300];
        snprintf(name, sizeof name, "/%s", e->d_name);
        if (shm_unlink(name) == 0)
            torxp_log(dev, 1, "removed stale segment %s%s (creator %ld is gone)", SHM_DIR, name,
                      pid);
    }
    closedir(dir);
}

static torx_status_t create_segment(torxp_shm_dev_t *d, const torxp_env_t *env, const layout_t *l,
                                    char *name)
{
    const torx_pkt_dev_t *dev = &d->base;
    remove_stale_segments(dev);

    struct statvfs vfs;
    if (statvfs(SHM_DIR, &vfs) == 0 && (uint64_t)vfs.f_bavail * vfs.f_frsize < l->total)
        return torxp_error(TORX_ERR_NOMEM,
                           "torx: %s has %llu MiB free; the shm device needs %llu MiB for %u "
                           "task slots with TORX_FIFO_PACKETS=%ld, TORX_STAGE_BYTES=%ld and "
                           "TORX_MSTAGE_BYTES=%ld. Free space in %s or lower one of them",
                           SHM_DIR, (unsigned long long)vfs.f_bavail * vfs.f_frsize >> 20,
                           (unsigned long long)(l->total + (1 << 20) - 1) >> 20, d->nslots,
                           env->fifo_packets, env->stage_bytes, env->mstage_bytes, SHM_DIR);

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    const unsigned salt = (unsigned)(ts.tv_nsec ^ (ts.tv_sec << 10) ^ ((uint64_t)getpid() << 16));
    snprintf(name, TORXP_SHM_NAME_MAX, "/" NAME_PREFIX "%u-%ld-%08x", (unsigned)getuid(),
             (long)getpid(), salt);

    const int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0)
        return torxp_error(TORX_ERR_SYS, "torx: shm_open(%s) failed: %s", name, strerror(errno));
    /* Reserve the pages now: running out of /dev/shm later would be a SIGBUS
     * in the middle of a run. */
    int err = ftruncate(fd, (off_t)l->total) ? errno : posix_fallocate(fd, 0, (off_t)l->total);
    void *base = MAP_FAILED;
    if (!err) {
        base = mmap(NULL, l->total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (base == MAP_FAILED)
            err = errno;
    }
    close(fd);
    if (err) {
        shm_unlink(name);
        return torxp_error(err == ENOSPC ? TORX_ERR_NOMEM : TORX_ERR_SYS,
                           "torx: cannot size shared segment %s%s to %llu MiB: %s", SHM_DIR, name,
                           (unsigned long long)l->total >> 20, strerror(err));
    }

    torxp_shm_seg_hdr_t *h = base;
    h->version = TORXP_SHM_VERSION;
    h->header_bytes = sizeof *h;
    h->total_bytes = l->total;
    h->shape = d->base.shape;
    h->ntasks = (uint32_t)d->base.size;
    h->nslots = d->nslots;
    h->fifos_per_task = TORXP_SHM_FIFOS_PER_TASK;
    h->fifo_packets = l->geom.packets;
    h->fifo_packets_log2 = l->geom.log2;
    h->task_table_off = l->task_table_off;
    h->cn_off = l->cn_off;
    h->gi_off = l->gi_off;
    h->fifo_off = l->fifo_off;
    h->fifo_stride = l->geom.stride;
    h->stage_off = l->stage_off;
    h->stage_stride = l->stage_stride;
    h->stage_bytes = l->stage_bytes;
    h->mstage_off = l->mstage_off;
    h->mstage_stride = l->mstage_stride;
    h->mstage_bytes = l->mstage_bytes;
    h->share_off = l->share_off;
    snprintf(h->name, sizeof h->name, "%s", name);
    torxp_shm_cn_init((char *)base + l->cn_off, h->ntasks);
    torxp_shm_gi_init((char *)base + l->gi_off, h->ntasks);
    /* release: attachers check the magic last, after everything above. */
    __atomic_store_n(&h->magic, TORXP_SHM_MAGIC, __ATOMIC_RELEASE);
    munmap(base, l->total);
    torxp_log(dev, 1, "created shared segment %s%s (%llu KiB, mode 0600)", SHM_DIR, name,
              (unsigned long long)l->total >> 10);
    return TORX_OK;
}

static torx_status_t map_segment(torxp_shm_dev_t *d, const char *name, const layout_t *l)
{
    const int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0)
        return torxp_error(TORX_ERR_SYS, "torx: rank %d cannot open shared segment %s%s: %s",
                           d->base.rank, SHM_DIR, name, strerror(errno));
    struct stat st;
    void *base = MAP_FAILED;
    int err = fstat(fd, &st) ? errno : 0;
    if (!err && (size_t)st.st_size < sizeof(torxp_shm_seg_hdr_t))
        err = EPROTO;
    if (!err) {
        base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (base == MAP_FAILED)
            err = errno;
    }
    close(fd);
    if (err)
        return torxp_error(TORX_ERR_SYS, "torx: rank %d cannot map shared segment %s%s: %s",
                           d->base.rank, SHM_DIR, name, strerror(err));
    d->seg = base;
    d->seg_bytes = (size_t)st.st_size;
    const torxp_shm_seg_hdr_t *h = d->seg;
    /* acquire: pairs with the creator's release of the magic. */
    if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != TORXP_SHM_MAGIC ||
        h->version != TORXP_SHM_VERSION || h->header_bytes != sizeof *h)
        return torxp_error(TORX_ERR_PROTO,
                           "torx: segment %s has version %u (header %u bytes); this libtorx "
                           "speaks version %u (%zu bytes): mixed torx builds in one job?",
                           name, h->version, h->header_bytes, TORXP_SHM_VERSION, sizeof *h);
    const torx_shape_t s = d->base.shape, t = h->shape;
    if (s.x != t.x || s.y != t.y || s.z != t.z || s.t != t.t || h->ntasks != (uint32_t)d->base.size)
        return torxp_error(TORX_ERR_PROTO,
                           "torx: rank %d uses torus %ux%ux%u x %u for %d tasks but rank 0 uses "
                           "%ux%ux%u x %u for %u",
                           d->base.rank, s.x, s.y, s.z, s.t, d->base.size, t.x, t.y, t.z, t.t,
                           h->ntasks);
    if (h->stage_bytes != l->stage_bytes)
        return torxp_error(TORX_ERR_PROTO,
                           "torx: rank %d stages %u bytes per pair of tasks but rank 0 stages %u; "
                           "set the same TORX_STAGE_BYTES for every task",
                           d->base.rank, l->stage_bytes, h->stage_bytes);
    if (h->mstage_bytes != l->mstage_bytes)
        return torxp_error(TORX_ERR_PROTO,
                           "torx: rank %d has a multi-reader staging ring of %u bytes but rank 0 "
                           "has %u; set the same TORX_MSTAGE_BYTES for every task",
                           d->base.rank, l->mstage_bytes, h->mstage_bytes);
    if (h->fifo_packets != l->geom.packets || h->total_bytes != l->total ||
        d->seg_bytes != l->total)
        return torxp_error(TORX_ERR_PROTO,
                           "torx: rank %d uses TORX_FIFO_PACKETS=%u but rank 0 uses %u; set the "
                           "same value for every task",
                           d->base.rank, l->geom.packets, h->fifo_packets);
    return TORX_OK;
}

/* Claims this task's torus slot. */
static torx_status_t claim_slot(torxp_shm_dev_t *d)
{
    torxp_shm_task_t *me = &d->tasks[d->self_index];
    uint32_t expected = TORXP_SHM_TASK_EMPTY;
    /* acq_rel: the winner's pid/rank stores below are published by the
     * start-up barrier; the loser reads the winner's rank. */
    if (!__atomic_compare_exchange_n(&me->state, &expected, TORXP_SHM_TASK_ATTACHED, false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        const torx_coord_t c = d->base.self;
        return torxp_error(TORX_ERR_INVAL,
                           "torx: rank %d and another rank both map to coordinate (%u,%u,%u,%u); "
                           "every rank needs its own coordinate",
                           d->base.rank, c.x, c.y, c.z, c.t);
    }
    /* The ptracer permission that cross-memory attach may need is given
     * later, and only then (torxp_shm_bulk_setup). */
    me->pid = (int32_t)getpid();
    me->rank = d->base.rank;
    d->probe_word = TORXP_SHM_PROBE_VALUE;
    me->probe_word = (uint64_t)(uintptr_t)&d->probe_word;
    if (d->chaos)
        me->flags |= TORXP_SHM_TASK_F_CHAOS;
    torxp_shm_bell_register(d);
    return TORX_OK;
}

static void shm_close(torx_pkt_dev_t *dev)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    torxp_shm_bulk_fini(d);
    torxp_shm_stage_fini(d);
    if (d->seg)
        munmap(d->seg, d->seg_bytes);
    free(d->cached_head);
    free(d->slot_rank);
    free(d);
}

/* The shm device's network (torx_pkt_network): one host's memory, every
 * task a copy from every other. Fixed figures, measured on the project's
 * 2-core hosts by the benchmarks docs/packet-layer.md#the-network names,
 * so that every task answers the same. */
static void shm_network(const torx_pkt_dev_t *dev, torx_net_t *net)
{
    const double tasks = dev->size > 0 ? (double)dev->size : 1.0;
    net->kind = TORX_NET_CROSSBAR;
    net->wrap = 7u; /* the emulated torus's lines wrap round */
    net->cores_per_node = dev->shape.t;
    net->packet_payload = TORX_PKT_MAX_PAYLOAD;
    net->packet_cpu = 65e-9;        /* 240-byte packets streamed at 7.9 million a second */
    net->link_bandwidth = 1.89e9;   /* ... that is, 1.89 GB/s through a FIFO */
    net->message_latency = 0.30e-6; /* one-packet half round trip, median */
    net->copy_bandwidth = 49.0e9;   /* memcpy of 4 MiB */
    /* a round costs about three cache-line transfers per task: 138 ns at 2 */
    net->cn_latency = 69e-9 * tasks;
    net->cn_bandwidth = TORX_CN_PACKET_BYTES / net->cn_latency;
    net->gi_latency = net->cn_latency;
}

static const torxp_dev_ops_t shm_ops = {
    .name = "shm",
    .inject = torxp_shm_inject,
    .inject_batch = torxp_shm_inject_batch,
    .poll = torxp_shm_poll,
    .peek = torxp_shm_peek,
    .consume = torxp_shm_consume,
    .peek_next = torxp_shm_peek_next,
    .room = torxp_shm_room,
    .wait = torxp_shm_wait,
    .wake = torxp_shm_wake,
    .cn_inject = torxp_shm_cn_inject,
    .cn_read = torxp_shm_cn_read,
    .gi_arm = torxp_shm_gi_arm,
    .gi_poll = torxp_shm_gi_poll,
    .bulk_get = torxp_shm_bulk_get,
    .bulk_put = torxp_shm_bulk_put,
    .bulk_test = torxp_shm_bulk_test,
    .bulk_path = torxp_shm_bulk_path,
    .bulk_cost = torxp_shm_bulk_cost,
    .stage_max = torxp_shm_stage_max,
    .stage_reaches = torxp_shm_stage_reaches,
    .stage_put = torxp_shm_stage_put,
    .stage_data = torxp_shm_stage_data,
    .stage_release = torxp_shm_stage_release,
    .stage_unput = torxp_shm_stage_unput,
    .stage_idle = torxp_shm_stage_idle,
    .stage_cost = torxp_shm_stage_cost,
    .mstage_max = torxp_shm_mstage_max,
    .mstage_put = torxp_shm_mstage_put,
    .mstage_data = torxp_shm_mstage_data,
    .mstage_release = torxp_shm_mstage_release,
    .close = shm_close,
    .network = shm_network,
};

/* What rank 0 tells everyone at start-up. */
typedef struct create_record {
    int32_t status;
    char name[TORXP_SHM_NAME_MAX];
} create_record_t;

torx_status_t torxp_shm_open(const torx_pkt_attr_t *attr, const torxp_env_t *env,
                             torx_pkt_dev_t **out)
{
    torx_boot_t *boot = attr->boot;
    /* Aligned: the injection state has cache lines of its own. */
    torxp_shm_dev_t *d = aligned_alloc(TORXP_CACHELINE, sizeof *d);
    if (!d)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory opening the shm device");
    memset(d, 0, sizeof *d);
    d->base = (torx_pkt_dev_t){.ops = &shm_ops,
                               .shape = attr->shape,
                               .self = attr->self,
                               .rank = boot->rank,
                               .size = boot->size,
                               .verbose = (int)env->verbose};
    d->shared_inject = (attr->flags & TORX_PKT_SHARED_INJECT) != 0;
    d->nslots = torx_shape_slots(attr->shape);
    d->self_index = torx_coord_index(attr->shape, attr->self);
    d->cur_fifo = -1;
    d->last_fifo = -1;
    /* A quarter of a FIFO, at most 32 packets: producers see room in big
     * enough steps, and a full FIFO still frees up well before it drains. */
    d->rx_batch = (uint32_t)(env->fifo_packets / 4 < 32 ? env->fifo_packets / 4 : 32);
    torxp_shm_chaos_seed(d, env->chaos_seed);
    uint32_t log2 = 0;
    while ((1L << log2) < env->fifo_packets)
        log2++;
    const layout_t l =
        compute_layout(d->nslots, (unsigned)boot->size, log2, env->stage_bytes, env->mstage_bytes);
    d->geom = l.geom;
    d->cached_head = torxp_calloc((size_t)d->nslots * TORXP_SHM_FIFOS_PER_TASK, sizeof(uint64_t));

    /* Every task takes part in both allgathers whatever
     * happens, so one task's failure never leaves the others waiting. */
    torx_status_t rc =
        d->cached_head ? TORX_OK : torxp_error(TORX_ERR_NOMEM, "torx: out of memory");
    create_record_t mine = {.status = TORX_OK},
                    *all = torxp_calloc((size_t)boot->size, sizeof mine);
    if (!all && rc == TORX_OK)
        rc = torxp_error(TORX_ERR_NOMEM, "torx: out of memory");
    if (boot->rank == 0 && rc == TORX_OK)
        rc = create_segment(d, env, &l, mine.name);
    mine.status = rc;
    torx_status_t brc = all ? boot->allgather(boot, &mine, all, sizeof mine) : TORX_ERR_NOMEM;
    if (brc != TORX_OK) { /* the bootstrap is broken (a task died): nobody can wait */
        if (boot->rank == 0 && rc == TORX_OK)
            shm_unlink(mine.name);
        rc = brc;
        goto fail;
    }
    char name[TORXP_SHM_NAME_MAX];
    memcpy(name, all[0].name, sizeof name);
    name[sizeof name - 1] = '\0';
    if (rc == TORX_OK && all[0].status != TORX_OK)
        rc = torxp_error(TORX_ERR_PEER, "torx: rank 0 could not create the shared segment (see "
                                        "its message)");
    if (rc == TORX_OK)
        rc = map_segment(d, name, &l);
    if (rc == TORX_OK) {
        d->tasks = torxp_shm_at(d, d->seg->task_table_off);
        d->cn = torxp_shm_at(d, d->seg->cn_off);
        d->gi = torxp_shm_at(d, d->seg->gi_off);
        rc = claim_slot(d);
        /* acq_rel: the last attacher must see every earlier attach. */
        if (__atomic_add_fetch(&d->seg->attached, 1, __ATOMIC_ACQ_REL) == d->seg->ntasks)
            shm_unlink(name);
    }
    /* The start-up barrier doubles as a vote: everyone learns whether any
     * task failed to attach, so all fail together rather than talk to a
     * task that is not there. */
    rc = torxp_boot_vote(boot, rc, "attach to the shm device");
    if (boot->rank == 0 && all[0].status == TORX_OK)
        shm_unlink(name); /* in case a task never attached; ENOENT otherwise */
    if (rc == TORX_OK) {
        torxp_shm_rx_setup(d);
        rc = torxp_shm_tx_setup(d);
        torxp_shm_bell_setup(d);
        if (rc == TORX_OK)
            rc = torxp_shm_bulk_setup(d, env->bulk_mode, env->bulk_share_min, env->bulk_cost);
        if (rc == TORX_OK)
            rc = torxp_shm_stage_setup(d, env->stage_rewind_max);
        torxp_shm_mstage_setup(d);
    }
    if (rc != TORX_OK)
        goto fail;
    free(all);
    torxp_log(&d->base, 2,
              "shm device: coordinate (%u,%u,%u,%u), %u FIFOs of %u packets, bulk %s, staging "
              "%u bytes per pair, multi-reader staging %u bytes per task, %s",
              attr->self.x, attr->self.y, attr->self.z, attr->self.t, TORXP_SHM_FIFOS_PER_TASK,
              d->geom.packets, torxp_shm_bulk_path(&d->base), d->stage_bytes, d->mstage_bytes,
              d->sole_producer ? "one producer per FIFO" : "FIFOs shared by producers");
    *out = &d->base;
    return TORX_OK;

fail:
    free(all);
    shm_close(&d->base);
    return rc;
}

void torxp_shm_populate(const void *p, size_t len)
{
#ifdef MADV_POPULATE_WRITE
    static uintptr_t page;
    if (!page) {
        const long sz = sysconf(_SC_PAGESIZE);
        page = sz > 0 ? (uintptr_t)sz : 4096;
    }
    const uintptr_t lo = (uintptr_t)p & ~(page - 1);
    const uintptr_t hi = ((uintptr_t)p + len + page - 1) & ~(page - 1);
    (void)madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
#else
    (void)p;
    (void)len;
#endif
}
