/* Bulk transfer for the shm device, the cma path: process_vm_readv and
 * process_vm_writev copy between the two tasks' address spaces
 * (shm_bulk.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* process_vm_readv, process_vm_writev */
#endif

#include "shm_bulk.h"

#include <errno.h>
#include <sys/uio.h>

/* Largest single process_vm_* request; the kernel caps one call near 2 GiB
 * anyway and the copy loop resumes partial transfers. */
#define BULK_CMA_CHUNK ((size_t)1 << 30)

static torx_status_t bulk_status_of_errno(int err)
{
    switch (err) {
    case ESRCH:
        return TORX_ERR_PEER;
    case EFAULT:
        return TORX_ERR_INVAL;
    case ENOMEM:
        return TORX_ERR_NOMEM;
    default:
        return TORX_ERR_SYS;
    }
}

/* ---- Cross-memory attach ------------------------------------------------------ */

/* Copies len bytes between local and remote in pid; 0 or an errno. Moved
 * bytes are added to *moved. */
int torxp_shm_bulk_cma_copy(pid_t pid, bool put, uint64_t local, uint64_t remote, uint64_t len,
                            uint64_t *moved)
{
    uint64_t off = 0;
    while (off < len) {
        size_t n = len - off > BULK_CMA_CHUNK ? BULK_CMA_CHUNK : (size_t)(len - off);
        struct iovec l = {(void *)(uintptr_t)(local + off), n};
        struct iovec r = {(void *)(uintptr_t)(remote + off), n};
        ssize_t got =
            put ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        /* A short count stops at an unmapped page; the next call would say
         * EFAULT, and a zero count would spin. */
        if (got == 0)
            return EFAULT;
        off += (uint64_t)got;
        *moved += (uint64_t)got;
    }
    return 0;
}

torx_status_t torxp_shm_bulk_start_cma(torxp_shm_dev_t *d, torxp_shm_bulk_op_t *op, bool may_share)
{
    const pid_t pid = torxp_shm_bulk_peer_pid(d, op->b.peer);
    int err = may_share && torxp_shm_share_wanted(d, op)
                  ? torxp_shm_share_get(d, op, pid)
                  : torxp_shm_bulk_cma_copy(pid, op->b.is_put, op->b.local, op->b.remote, op->b.len,
                                            &op->b.sent);
    if (!err) {
        torxp_shm_bulk_complete(d, op, TORX_OK, 0);
        return TORX_OK;
    }
    torxp_shm_bulk_complete(d, op, bulk_status_of_errno(err), err);
    return torxp_shm_bulk_report(d, op);
}
