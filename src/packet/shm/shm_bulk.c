/* Bulk transfer ("DMA") for the shm device: the device calls (get, put,
 * test, path), and the checks, completion and error reports both paths
 * share. The paths and their files: shm_bulk.h. */
#include "shm_bulk.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

/* Whether the process pid is gone: no such process, or a zombie whose
 * parent has not reaped it yet (kill(pid, 0) still succeeds on those). */
bool torxp_shm_bulk_pid_dead(pid_t pid)
{
    if (pid <= 0)
        return true;
    if (kill(pid, 0) == -1 && errno == ESRCH)
        return true;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return errno == ENOENT;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* The state follows the command name, which may itself hold ')'. */
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X' || p[2] == 'x');
}

/* Whether the task at c has died (or its torus slot was released). */
bool torxp_shm_bulk_peer_dead(const torxp_shm_dev_t *d, torx_coord_t c)
{
    const torxp_shm_task_t *t = &d->tasks[torxp_shm_bulk_peer_index(d, c)];
    /* acquire: pairs with the segment code's publication of the entry. */
    if (__atomic_load_n(&t->state, __ATOMIC_ACQUIRE) != TORXP_SHM_TASK_ATTACHED)
        return true;
    return torxp_shm_bulk_pid_dead(t->pid);
}

/* Records the message for a failed operation and returns its status. Used
 * both when the failure happens and by every later bulk_test. */
torx_status_t torxp_shm_bulk_report(const torxp_shm_dev_t *d, const torxp_shm_bulk_op_t *op)
{
    const torx_coord_t p = op->b.peer;
    const char *dir = op->b.is_put ? "put to" : "get from";
    const int pid = (int)torxp_shm_bulk_peer_pid(d, p);

    if (op->status == TORX_ERR_PEER && (!d->bulk_cma || op->err != ESRCH))
        return torxp_error(TORX_ERR_PEER,
                           "torx: bulk %s task (%u,%u,%u,%u) pid %d: the peer task is dead "
                           "(%llu of %llu bytes moved)",
                           dir, p.x, p.y, p.z, p.t, pid, (unsigned long long)op->b.sent,
                           (unsigned long long)op->b.len);
    if (op->err) {
        const char *hint = "";
        if (op->err == ESRCH)
            hint = " (the peer task is dead)";
        else if (op->err == EPERM)
            hint = " (cross-memory attach refused; set TORX_BULK=fifo)";
        else if (op->err == EFAULT)
            hint = " (the local or remote range is not mapped)";
        return torxp_error(op->status,
                           "torx: bulk %s task (%u,%u,%u,%u) pid %d, %llu bytes, local %p, "
                           "remote 0x%llx: %s: %s%s",
                           dir, p.x, p.y, p.z, p.t, pid, (unsigned long long)op->b.len,
                           (void *)(uintptr_t)op->b.local, (unsigned long long)op->b.remote,
                           op->b.is_put ? "process_vm_writev" : "process_vm_readv",
                           strerror(op->err), hint);
    }
    return torxp_error(op->status, "torx: bulk %s task (%u,%u,%u,%u) failed: %s", dir, p.x, p.y,
                       p.z, p.t, torx_status_str(op->status));
}

/* Finishes op with status; err is the errno behind it (0 if none). */
void torxp_shm_bulk_complete(torxp_shm_dev_t *d, torxp_shm_bulk_op_t *op, torx_status_t status,
                             int err)
{
    torxp_shm_bulk_unregister(d->serve, op);
    op->status = status;
    op->err = (uint16_t)err;
    /* release: the data copied into the local buffer and the status happen
     * before a torxp_shm_bulk_is_done that sees done. */
    __atomic_store_n(&op->b.done, 1u, __ATOMIC_RELEASE);
}

/* ---- Public device calls -------------------------------------------------------- */

/* Validates the request and fills op; the common start of get and put. */
static torx_status_t bulk_begin(torxp_shm_dev_t *d, torxp_shm_bulk_op_t *op, torx_coord_t peer,
                                uint64_t remote, uint64_t local, size_t len, bool is_put)
{
    const char *dir = is_put ? "put to" : "get from";
    if (!op)
        return torxp_error(TORX_ERR_INVAL, "torx: bulk %s: the operation pointer is NULL", dir);
    if (op->b.magic == TORXP_SHM_BULK_MAGIC && !op->b.done &&
        torxp_shm_bulk_registered(d->serve, op))
        return torxp_error(TORX_ERR_INVAL,
                           "torx: bulk %s task (%u,%u,%u,%u): the torx_bulk_t at %p is still in "
                           "flight; wait for torx_bulk_test to return TORX_OK before reusing it",
                           dir, peer.x, peer.y, peer.z, peer.t, (void *)op);
    if (!torx_coord_in_shape(d->base.shape, peer))
        return torxp_error(TORX_ERR_INVAL,
                           "torx: bulk %s (%u,%u,%u,%u): outside the torus shape %ux%ux%ux%u", dir,
                           peer.x, peer.y, peer.z, peer.t, d->base.shape.x, d->base.shape.y,
                           d->base.shape.z, d->base.shape.t);
    const torxp_shm_task_t *t = &d->tasks[torxp_shm_bulk_peer_index(d, peer)];
    if (__atomic_load_n(&t->state, __ATOMIC_ACQUIRE) != TORXP_SHM_TASK_ATTACHED)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: bulk %s (%u,%u,%u,%u): no task at that coordinate", dir, peer.x,
                           peer.y, peer.z, peer.t);
    if (len && (!local || !remote))
        return torxp_error(TORX_ERR_INVAL,
                           "torx: bulk %s task (%u,%u,%u,%u): %zu bytes with a NULL %s address",
                           dir, peer.x, peer.y, peer.z, peer.t, len, local ? "remote" : "local");
    if (len && (local + len < local || remote + len < remote))
        return torxp_error(TORX_ERR_INVAL,
                           "torx: bulk %s task (%u,%u,%u,%u): %zu bytes wrap the address space",
                           dir, peer.x, peer.y, peer.z, peer.t, len);
    *op = (torxp_shm_bulk_op_t){.b = {.magic = TORXP_SHM_BULK_MAGIC,
                                      .len = len,
                                      .local = local,
                                      .remote = remote,
                                      .peer = peer,
                                      .is_put = is_put},
                                .slot = BULK_NO_SLOT};
    return TORX_OK;
}

/* Work every path finishes at once: nothing to move, or a copy within this
 * task. Returns true when op is complete. */
static bool bulk_trivial(torxp_shm_dev_t *d, torxp_shm_bulk_op_t *op)
{
    if (op->b.len && !torx_coord_equal(op->b.peer, d->base.self))
        return false;
    if (op->b.len) {
        void *dst = (void *)(uintptr_t)(op->b.is_put ? op->b.remote : op->b.local);
        const void *src = (const void *)(uintptr_t)(op->b.is_put ? op->b.local : op->b.remote);
        memmove(dst, src, (size_t)op->b.len);
        op->b.sent = op->b.len;
    }
    torxp_shm_bulk_complete(d, op, TORX_OK, 0);
    return true;
}

/* The one start path of get and put: checks, the trivial and cma cases
 * (a get shared when may_share: torx_bulk_get_shared), then the first
 * packets of the fifo path (queued when the FIFO is full). */
static torx_status_t bulk_start(torx_pkt_dev_t *dev, torx_bulk_t *opp, torx_coord_t peer,
                                uint64_t remote, uint64_t local, size_t len, bool is_put,
                                bool may_share)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    torxp_shm_bulk_op_t *op = (torxp_shm_bulk_op_t *)opp;
    torx_status_t st = bulk_begin(d, op, peer, remote, local, len, is_put);
    if (st != TORX_OK)
        return st;
    if (bulk_trivial(d, op))
        return TORX_OK;
    if (d->bulk_cma)
        return torxp_shm_bulk_start_cma(d, op, may_share);
    if (!d->serve)
        return torxp_error(TORX_ERR_INVAL, "torx: bulk %s before the device's bulk setup",
                           is_put ? "put" : "get");
    return torxp_shm_bulk_start_fifo(d, op);
}

torx_status_t torxp_shm_bulk_get(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer,
                                 const void *remote, void *local, size_t len, unsigned flags)
{
    return bulk_start(dev, op, peer, (uint64_t)(uintptr_t)remote, (uint64_t)(uintptr_t)local, len,
                      false, (flags & TORXP_BULK_F_SHARE) != 0);
}

torx_status_t torxp_shm_bulk_put(torx_pkt_dev_t *dev, torx_bulk_t *op, torx_coord_t peer,
                                 void *remote, const void *local, size_t len)
{
    return bulk_start(dev, op, peer, (uint64_t)(uintptr_t)remote, (uint64_t)(uintptr_t)local, len,
                      true, false);
}

/* The peer of op was seen dead: take what it sent before dying, then fail
 * op if that was not enough. */
static void bulk_fail_dead(torxp_shm_dev_t *d, torxp_shm_bulk_op_t *op)
{
    /* Its last packets may still sit in our FIFOs; poll until they stop
     * changing anything (a dead task sends no more). */
    for (int idle = 0; idle < 16 && !torxp_shm_bulk_is_done(op); idle++) {
        uint64_t before = op->b.sent;
        torx_pkt_poll(&d->base);
        if (op->b.sent != before)
            idle = 0;
    }
    if (torxp_shm_bulk_is_done(op))
        return;
    torxp_shm_bulk_drop_jobs(d, op);
    torxp_shm_bulk_complete(d, op, TORX_ERR_PEER, ESRCH);
}

torx_status_t torxp_shm_bulk_test(torx_pkt_dev_t *dev, torx_bulk_t *opp)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    torxp_shm_bulk_op_t *op = (torxp_shm_bulk_op_t *)opp;
    if (!op || op->b.magic != TORXP_SHM_BULK_MAGIC)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_bulk_test on a torx_bulk_t at %p that no bulk get or put "
                           "started (or whose memory was overwritten)",
                           (void *)op);
    if (!torxp_shm_bulk_is_done(op)) {
        torx_pkt_poll(dev);
        if (!torxp_shm_bulk_is_done(op) && ++op->tests >= BULK_LIVENESS_EVERY) {
            op->tests = 0;
            if (torxp_shm_bulk_peer_dead(d, op->b.peer))
                bulk_fail_dead(d, op);
        }
        if (!torxp_shm_bulk_is_done(op))
            return TORX_AGAIN;
    }
    return op->status == TORX_OK ? TORX_OK : torxp_shm_bulk_report(d, op);
}

const char *torxp_shm_bulk_path(const torx_pkt_dev_t *dev)
{
    return ((const torxp_shm_dev_t *)dev)->bulk_cma ? "cma" : "fifo";
}
