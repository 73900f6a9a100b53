/* Bulk transfer ("DMA") for the shm device.
 *
 * Two paths, chosen once per device by torxp_shm_bulk_setup:
 *
 *  - cma: process_vm_readv/writev copy straight between the two tasks'
 *    address spaces (one copy). Operations complete inside get/put. A long
 *    torx_bulk_get_shared is shared with the owner of the source ("Shared
 *    gets", below).
 *  - fifo: the data is streamed through the torus FIFOs as device-internal
 *    (TORX_PKT_SYS) deterministic packets, so a sender's packets arrive in
 *    order. The peer must keep polling. A get sends GET_REQ; the peer queues
 *    a reply job and its progress streams GET_DATA back. A put streams
 *    PUT_DATA, the last one flagged LAST; the peer answers PUT_ACK.
 *
 * Nothing here blocks: a full FIFO (TORX_NO_ROOM) leaves the work in a job
 * list that torxp_shm_bulk_progress (called from poll) resumes, in order.
 * Bulk packets share the reception FIFO with the sender's other packets, so
 * on the fifo path both tasks must keep polling and consuming what they
 * receive: a bulk packet waits behind one left unconsumed.
 *
 * Threading: bulk calls must run on the thread that receives, because
 * torxp_shm_bulk_test drives reception (torx_pkt_poll) and packet handlers
 * complete operations; so none of this state needs locks.
 *
 * Cookies: a fifo-path operation is registered in a per-device table and
 * packets name it by (generation << 32 | index). A reply is only applied
 * after the table says that index is live with that generation and the
 * operation still carries its magic, so a stale or forged cookie is caught
 * without ever dereferencing an address that came off the wire.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* process_vm_readv, process_vm_writev */
#endif

#include "shm.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>


/* Largest single process_vm_* request; the kernel caps one call near 2 GiB
 * anyway and the copy loop resumes partial transfers. */
#define BULK_CMA_CHUNK ((size_t)1 << 30)

/* bulk_test calls (and full-FIFO retries) between liveness checks of the
 * peer: a kill(2) and maybe a /proc read are cheap but not free. */
#define BULK_LIVENESS_EVERY 1024u

/* Under Yama ptrace_scope 1 a peer that has not yet run its
 * PR_SET_PTRACER call refuses our probe; give it this long. */
#define BULK_YAMA_RETRY_MS 200

/* ---- Wire format of device-internal bulk packets ------------------------ */

#define BULK_WIRE_VERSION 1u

enum bulk_type {
    BULK_GET_REQ = 1,  /* wire + uint64 len; addr = source address at the server */
    BULK_GET_DATA = 2, /* wire + data; addr = offset in the operation */
    BULK_PUT_DATA = 3, /* wire + data; addr = target address at the receiver */
    BULK_PUT_ACK = 4,  /* wire only: every PUT_DATA of the cookie is written */
    BULK_SHARE = 5     /* wire only; cookie = the sender's share seq: help with its get */
};

#define BULK_FLAG_LAST 0x01u /* PUT_DATA: the operation's final packet */

/* The header's 8 software bytes of a bulk packet. */
typedef struct bulk_sw {
    uint8_t type;    /* enum bulk_type */
    uint8_t flags;   /* BULK_FLAG_* */
    uint8_t version; /* BULK_WIRE_VERSION */
    uint8_t pad;
    torx_coord_t from; /* sender: the header carries only the destination */
} bulk_sw_t;
static_assert(sizeof(bulk_sw_t) == TORX_PKT_SW_BYTES, "bulk sw bytes fill the header's");

/* Start of every bulk payload. */
typedef struct bulk_wire {
    uint64_t cookie; /* the requester's operation (see bulk_cookie) */
    uint64_t addr;   /* meaning depends on the type (enum bulk_type) */
} bulk_wire_t;
static_assert(sizeof(bulk_wire_t) == 16, "bulk wire header is 16 bytes");

#define BULK_DATA_MAX (TORX_PKT_MAX_PAYLOAD - sizeof(bulk_wire_t)) /* 224 */

/* ---- Operation and device state ------------------------------------------ */

/* torxp_shm_bulk_t plus what the fifo path and error reports need; it all
 * fits the caller's torx_bulk_t. b.sent counts bytes streamed (put) or
 * received (get). */
typedef struct bulk_op {
    torxp_shm_bulk_t b;
    int32_t status; /* final status, once b.done */
    uint32_t slot;  /* index in the device's op table (fifo path) */
    uint32_t gen;   /* that entry's generation when registered */
    uint16_t tests; /* bulk_test calls since the last liveness check */
    uint16_t err;   /* errno behind a failed status, 0 if none */
} bulk_op_t;
static_assert(sizeof(bulk_op_t) <= sizeof(torx_bulk_t), "bulk op fits torx_bulk_t");

enum bulk_job_kind {
    JOB_GET_REQ,   /* our get's request is still to be sent */
    JOB_GET_REPLY, /* a peer's get: stream our memory to it */
    JOB_PUT,       /* our put: stream its data */
    JOB_PUT_ACK    /* acknowledge a peer's completed put */
};

typedef struct bulk_job {
    struct bulk_job *next;
    enum bulk_job_kind kind;
    torx_coord_t peer; /* where the packets go */
    uint32_t stalls;   /* full-FIFO retries since the last liveness check */
    uint64_t cookie;   /* GET_REPLY, PUT_ACK: the requester's cookie */
    uint64_t addr;     /* GET_REPLY: source address in this task */
    uint64_t len, off; /* GET_REPLY: bytes requested, bytes streamed */
    bulk_op_t *op;     /* GET_REQ, PUT: our operation */
} bulk_job_t;

typedef struct bulk_slot {
    bulk_op_t *op; /* NULL when free */
    uint32_t gen;  /* bumped at every registration; never 0 when live */
    uint32_t next_free;
} bulk_slot_t;

#define BULK_NO_SLOT UINT32_MAX

/* The device's bulk state (d->serve): pending streaming work, oldest first,
 * and the table of in-flight fifo-path operations. */
struct torxp_shm_serve {
    bulk_job_t *jobs;
    bulk_job_t **tail;
    bulk_slot_t *ops;
    uint32_t nops;
    uint32_t free_op; /* head of the free chain, BULK_NO_SLOT when full */
};

/* ---- Helpers ---------------------------------------------------------------- */

static unsigned bulk_peer_index(const torxp_shm_dev_t *d, torx_coord_t c)
{
    return torx_coord_index(d->base.shape, c);
}

static pid_t bulk_peer_pid(const torxp_shm_dev_t *d, torx_coord_t c)
{
    return d->tasks[bulk_peer_index(d, c)].pid;
}

static bool bulk_is_done(const bulk_op_t *op)
{
    /* acquire: pairs with bulk_complete, so the data and status it
     * published are visible once done is. */
    return __atomic_load_n(&op->b.done, __ATOMIC_ACQUIRE) != 0;
}

/* The device cannot go on (a reply or acknowledgement a peer waits for could
 * not be queued, or a transfer's own state was overwritten): the first such
 * error is kept in d->base.failed, which the message layer's advance reports,
 * so the task ends with this message instead of leaving a peer waiting or
 * writing to a wrong address. */
static void __attribute__((cold, format(printf, 3, 4)))
bulk_fail(torxp_shm_dev_t *d, torx_status_t st, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    torxp_log(&d->base, 0, "%s; the device cannot go on", msg);
    if (d->base.failed == TORX_OK) {
        d->base.failed = st;
        torxp_error(st, "torx: %s", msg);
    }
}

/* A device-internal packet that no torx task would send (bad lengths, a
 * stale cookie, an unknown type): named, counted and dropped. Nothing of it
 * is trusted, and the transfer it names, if any, is left as it was. */
static void __attribute__((noinline, cold, format(printf, 2, 3)))
bulk_malformed(torxp_shm_dev_t *d, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    d->base.malformed++;
    torxp_error(TORX_ERR_PROTO, "torx: protocol error: %s; packet dropped", msg);
    torxp_log(&d->base, 0, "protocol error: %s; packet dropped", msg);
}

/* Whether the process pid is gone: no such process, or a zombie whose
 * parent has not reaped it yet (kill(pid, 0) still succeeds on those). */
static bool bulk_pid_dead(pid_t pid)
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
static bool bulk_peer_dead(const torxp_shm_dev_t *d, torx_coord_t c)
{
    const torxp_shm_task_t *t = &d->tasks[bulk_peer_index(d, c)];
    /* acquire: pairs with the segment code's publication of the entry. */
    if (__atomic_load_n(&t->state, __ATOMIC_ACQUIRE) != TORXP_SHM_TASK_ATTACHED)
        return true;
    return bulk_pid_dead(t->pid);
}

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

/* Records the message for a failed operation and returns its status. Used
 * both when the failure happens and by every later bulk_test. */
static torx_status_t bulk_report(const torxp_shm_dev_t *d, const bulk_op_t *op)
{
    const torx_coord_t p = op->b.peer;
    const char *dir = op->b.is_put ? "put to" : "get from";
    const int pid = (int)bulk_peer_pid(d, p);

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

/* ---- Operation table -------------------------------------------------------- */

static torx_status_t bulk_register(struct torxp_shm_serve *s, bulk_op_t *op)
{
    if (s->free_op == BULK_NO_SLOT) {
        uint32_t n = s->nops ? s->nops * 2 : 16;
        if (n <= s->nops || n > UINT32_MAX / 2)
            return torxp_error(TORX_ERR_NOMEM, "torx: too many bulk transfers in flight (%u)",
                               s->nops);
        bulk_slot_t *ops = torxp_realloc(s->ops, (size_t)n * sizeof *ops);
        if (!ops)
            return torxp_error(TORX_ERR_NOMEM,
                               "torx: out of memory growing the bulk transfer table to %u", n);
        for (uint32_t i = s->nops; i < n; i++)
            ops[i] = (bulk_slot_t){.next_free = i + 1 < n ? i + 1 : BULK_NO_SLOT};
        s->free_op = s->nops;
        s->ops = ops;
        s->nops = n;
    }
    uint32_t i = s->free_op;
    bulk_slot_t *e = &s->ops[i];
    s->free_op = e->next_free;
    e->gen = e->gen + 1 ? e->gen + 1 : 1;
    e->op = op;
    op->slot = i;
    op->gen = e->gen;
    return TORX_OK;
}

static bool bulk_registered(const struct torxp_shm_serve *s, const bulk_op_t *op)
{
    return s && op->slot < s->nops && s->ops[op->slot].op == op && s->ops[op->slot].gen == op->gen;
}

static void bulk_unregister(struct torxp_shm_serve *s, bulk_op_t *op)
{
    if (!bulk_registered(s, op))
        return;
    bulk_slot_t *e = &s->ops[op->slot];
    e->op = NULL;
    e->next_free = s->free_op;
    s->free_op = op->slot;
}

static uint64_t bulk_cookie(const bulk_op_t *op)
{
    return (uint64_t)op->gen << 32 | op->slot;
}

/* The live operation a cookie names; aborts on a stale or forged one. */
static bulk_op_t *bulk_lookup(torxp_shm_dev_t *d, uint64_t cookie, const char *what,
                              torx_coord_t from)
{
    const struct torxp_shm_serve *s = d->serve;
    uint32_t i = (uint32_t)cookie, gen = (uint32_t)(cookie >> 32);
    if (!s || i >= s->nops || !s->ops[i].op || s->ops[i].gen != gen) {
        bulk_malformed(d,
                       "bulk %s from task (%u,%u,%u,%u) names cookie 0x%llx, which is no "
                       "transfer in flight here (stale or bogus)",
                       what, from.x, from.y, from.z, from.t, (unsigned long long)cookie);
        return NULL;
    }
    bulk_op_t *op = s->ops[i].op;
    /* Our own memory, not the wire: the caller reused a torx_bulk_t whose
     * transfer was still running, and nothing it names can be trusted. */
    if (op->b.magic != TORXP_SHM_BULK_MAGIC || op->slot != i || op->gen != gen) {
        bulk_fail(d, TORX_ERR_INVAL,
                  "bulk %s from task (%u,%u,%u,%u): the torx_bulk_t at %p (cookie 0x%llx) was "
                  "overwritten or reused while its transfer was in flight",
                  what, from.x, from.y, from.z, from.t, (void *)op, (unsigned long long)cookie);
        return NULL;
    }
    if (!torx_coord_equal(from, op->b.peer)) {
        bulk_malformed(d,
                       "bulk %s for cookie 0x%llx came from task (%u,%u,%u,%u), but that "
                       "transfer's peer is (%u,%u,%u,%u)",
                       what, (unsigned long long)cookie, from.x, from.y, from.z, from.t,
                       op->b.peer.x, op->b.peer.y, op->b.peer.z, op->b.peer.t);
        return NULL;
    }
    return op;
}

/* Finishes op with status; err is the errno behind it (0 if none). */
static void bulk_complete(torxp_shm_dev_t *d, bulk_op_t *op, torx_status_t status, int err)
{
    bulk_unregister(d->serve, op);
    op->status = status;
    op->err = (uint16_t)err;
    /* release: the data copied into the local buffer and the status happen
     * before a bulk_is_done that sees done. */
    __atomic_store_n(&op->b.done, 1u, __ATOMIC_RELEASE);
}

/* ---- Job list --------------------------------------------------------------- */

static void bulk_append(torxp_shm_dev_t *d, bulk_job_t *j)
{
    struct torxp_shm_serve *s = d->serve;
    j->next = NULL;
    *s->tail = j;
    s->tail = &j->next;
    d->bulk_jobs++;
}

static torx_status_t bulk_queue(torxp_shm_dev_t *d, const bulk_job_t *tmpl)
{
    bulk_job_t *j = torxp_malloc(sizeof *j);
    if (!j)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory queuing a bulk transfer job");
    *j = *tmpl;
    bulk_append(d, j);
    return TORX_OK;
}

/* Removes the jobs that work for op (it failed, nothing more may be sent). */
static void bulk_drop_jobs(torxp_shm_dev_t *d, const bulk_op_t *op)
{
    struct torxp_shm_serve *s = d->serve;
    bulk_job_t **pp = &s->jobs;
    while (*pp) {
        bulk_job_t *j = *pp;
        if (j->op == op) {
            *pp = j->next;
            free(j);
            d->bulk_jobs--;
        } else {
            pp = &j->next;
        }
    }
    s->tail = pp;
}

/* ---- Packet injection ------------------------------------------------------- */

static torx_status_t bulk_send(torxp_shm_dev_t *d, torx_coord_t to, enum bulk_type type,
                               unsigned flags, uint64_t cookie, uint64_t addr, const void *data,
                               size_t len)
{
    torx_pkt_hdr_t h;
    /* Deterministic: a sender's bulk packets must arrive in injection order
     * (LAST after every other PUT_DATA of its put). */
    torx_pkt_hdr_init(&h, to, TORX_PKT_SYS);
    const bulk_sw_t sw = {.type = (uint8_t)type,
                          .flags = (uint8_t)flags,
                          .version = BULK_WIRE_VERSION,
                          .from = d->base.self};
    memcpy(h.sw, &sw, sizeof sw);
    const bulk_wire_t w = {.cookie = cookie, .addr = addr};
    struct iovec iov[2] = {{(void *)&w, sizeof w}, {(void *)data, len}};
    return torxp_shm_inject(&d->base, &h, iov, len ? 2 : 1);
}

static torx_status_t bulk_send_get_req(torxp_shm_dev_t *d, const bulk_op_t *op)
{
    const uint64_t len = op->b.len;
    return bulk_send(d, op->b.peer, BULK_GET_REQ, 0, bulk_cookie(op), op->b.remote, &len,
                     sizeof len);
}

/* Streams the rest of a put; TORX_OK once every PUT_DATA is injected. */
static torx_status_t bulk_stream_put(torxp_shm_dev_t *d, bulk_op_t *op)
{
    while (op->b.sent < op->b.len) {
        uint64_t n = op->b.len - op->b.sent;
        if (n > BULK_DATA_MAX)
            n = BULK_DATA_MAX;
        unsigned flags = op->b.sent + n == op->b.len ? BULK_FLAG_LAST : 0;
        torx_status_t st = bulk_send(
            d, op->b.peer, BULK_PUT_DATA, flags, bulk_cookie(op), op->b.remote + op->b.sent,
            (const void *)(uintptr_t)(op->b.local + op->b.sent), (size_t)n);
        if (st != TORX_OK)
            return st;
        op->b.sent += n;
    }
    return TORX_OK;
}

/* Streams the rest of a peer's get; TORX_OK once every GET_DATA is injected. */
static torx_status_t bulk_stream_reply(torxp_shm_dev_t *d, bulk_job_t *j)
{
    while (j->off < j->len) {
        uint64_t n = j->len - j->off;
        if (n > BULK_DATA_MAX)
            n = BULK_DATA_MAX;
        torx_status_t st = bulk_send(d, j->peer, BULK_GET_DATA, 0, j->cookie, j->off,
                                     (const void *)(uintptr_t)(j->addr + j->off), (size_t)n);
        if (st != TORX_OK)
            return st;
        j->off += n;
    }
    return TORX_OK;
}

static const char *bulk_job_name(enum bulk_job_kind k)
{
    switch (k) {
    case JOB_GET_REQ:
        return "get request";
    case JOB_GET_REPLY:
        return "get reply";
    case JOB_PUT:
        return "put data";
    case JOB_PUT_ACK:
        return "put acknowledgement";
    }
    return "?";
}

/* Injects what it can of j. Returns true when j is finished (sent, or
 * abandoned because its peer is gone) and may be freed. */
static bool bulk_job_step(torxp_shm_dev_t *d, bulk_job_t *j)
{
    torx_status_t st = TORX_OK;
    switch (j->kind) {
    case JOB_GET_REQ:
        st = bulk_send_get_req(d, j->op);
        break;
    case JOB_GET_REPLY:
        st = bulk_stream_reply(d, j);
        break;
    case JOB_PUT:
        st = bulk_stream_put(d, j->op);
        break;
    case JOB_PUT_ACK:
        st = bulk_send(d, j->peer, BULK_PUT_ACK, 0, j->cookie, 0, NULL, 0);
        break;
    }
    if (st == TORX_OK)
        return true;
    if (st == TORX_NO_ROOM) {
        /* A FIFO that stays full may belong to a task that died: it will
         * never drain, so stop retrying then. */
        if (++j->stalls < BULK_LIVENESS_EVERY)
            return false;
        j->stalls = 0;
        if (!bulk_peer_dead(d, j->peer))
            return false;
        st = TORX_ERR_PEER;
    }
    if (j->op) {
        bulk_complete(d, j->op, st, st == TORX_ERR_PEER ? ESRCH : 0);
    } else {
        torxp_log(&d->base, 1, "dropping bulk %s to task (%u,%u,%u,%u): %s", bulk_job_name(j->kind),
                  j->peer.x, j->peer.y, j->peer.z, j->peer.t,
                  st == TORX_ERR_PEER ? "the task is dead" : torx_status_str(st));
    }
    return true;
}

void torxp_shm_bulk_progress(torxp_shm_dev_t *d)
{
    struct torxp_shm_serve *s = d->serve;
    if (!s || !s->jobs)
        return;
    bulk_job_t **pp = &s->jobs;
    while (*pp) {
        bulk_job_t *j = *pp;
        if (bulk_job_step(d, j)) {
            *pp = j->next;
            free(j);
            d->bulk_jobs--;
        } else {
            pp = &j->next;
        }
    }
    s->tail = pp;
}

/* ---- Receiving device-internal packets --------------------------------------- */

static void share_help(torxp_shm_dev_t *d, torx_coord_t from, uint64_t seq);

void torxp_shm_bulk_on_sys(torxp_shm_dev_t *d, const torx_pkt_hdr_t *pkt)
{
    bulk_sw_t sw;
    memcpy(&sw, pkt->sw, sizeof sw);
    if (sw.version != BULK_WIRE_VERSION || pkt->payload_len < sizeof(bulk_wire_t) ||
        !torx_coord_in_shape(d->base.shape, sw.from)) {
        bulk_malformed(d,
                       "malformed device-internal packet (type %u, version %u, %u payload bytes, "
                       "from (%u,%u,%u,%u))",
                       sw.type, sw.version, pkt->payload_len, sw.from.x, sw.from.y, sw.from.z,
                       sw.from.t);
        return;
    }
    bulk_wire_t w;
    const uint8_t *payload = torx_pkt_payload(pkt);
    memcpy(&w, payload, sizeof w);
    const uint8_t *data = payload + sizeof w;
    const size_t n = pkt->payload_len - sizeof w;

    switch (sw.type) {
    case BULK_GET_REQ: {
        uint64_t len;
        if (n != sizeof len) {
            bulk_malformed(d, "bulk get request from task (%u,%u,%u,%u) has %zu length bytes",
                           sw.from.x, sw.from.y, sw.from.z, sw.from.t, n);
            return;
        }
        memcpy(&len, data, sizeof len);
        if (len == 0 || w.addr + len < w.addr) {
            bulk_malformed(d, "bulk get request from task (%u,%u,%u,%u) for %llu bytes at 0x%llx",
                           sw.from.x, sw.from.y, sw.from.z, sw.from.t, (unsigned long long)len,
                           (unsigned long long)w.addr);
            return;
        }
        const bulk_job_t j = {
            .kind = JOB_GET_REPLY, .peer = sw.from, .cookie = w.cookie, .addr = w.addr, .len = len};
        if (!d->serve || bulk_queue(d, &j) != TORX_OK)
            bulk_fail(d, d->serve ? TORX_ERR_NOMEM : TORX_ERR_INVAL,
                      "cannot queue the reply to a bulk get from task (%u,%u,%u,%u): %s",
                      sw.from.x, sw.from.y, sw.from.z, sw.from.t,
                      d->serve ? torx_last_error() : "bulk transfers not set up");
        return;
    }
    case BULK_GET_DATA: {
        bulk_op_t *op = bulk_lookup(d, w.cookie, "get data", sw.from);
        if (!op)
            return;
        if (op->b.is_put || w.addr > op->b.len || n > op->b.len - w.addr ||
            op->b.sent + n > op->b.len) {
            bulk_malformed(d,
                           "bulk get data from task (%u,%u,%u,%u) for offset %llu + %zu bytes does "
                           "not fit the %s of %llu bytes (%llu received)",
                           sw.from.x, sw.from.y, sw.from.z, sw.from.t, (unsigned long long)w.addr,
                           n, op->b.is_put ? "put" : "get", (unsigned long long)op->b.len,
                           (unsigned long long)op->b.sent);
            return;
        }
        memcpy((uint8_t *)(uintptr_t)op->b.local + w.addr, data, n);
        op->b.sent += n;
        if (op->b.sent == op->b.len)
            bulk_complete(d, op, TORX_OK, 0);
        return;
    }
    case BULK_PUT_DATA:
        memcpy((void *)(uintptr_t)w.addr, data, n);
        if (sw.flags & BULK_FLAG_LAST) {
            torx_status_t st = bulk_send(d, sw.from, BULK_PUT_ACK, 0, w.cookie, 0, NULL, 0);
            if (st == TORX_NO_ROOM) {
                const bulk_job_t j = {.kind = JOB_PUT_ACK, .peer = sw.from, .cookie = w.cookie};
                st = d->serve ? bulk_queue(d, &j) : TORX_ERR_INVAL;
            }
            if (st != TORX_OK)
                bulk_fail(d, st, "cannot acknowledge a bulk put from task (%u,%u,%u,%u): %s",
                          sw.from.x, sw.from.y, sw.from.z, sw.from.t, torx_status_str(st));
        }
        return;
    case BULK_SHARE:
        if (n || !d->share)
            bulk_malformed(d, "shared get from task (%u,%u,%u,%u) with %zu bytes%s", sw.from.x,
                           sw.from.y, sw.from.z, sw.from.t, n,
                           d->share ? "" : " on a device without shared gets");
        else
            share_help(d, sw.from, w.cookie);
        return;
    case BULK_PUT_ACK: {
        bulk_op_t *op = bulk_lookup(d, w.cookie, "put acknowledgement", sw.from);
        if (!op)
            return;
        if (!op->b.is_put || op->b.sent != op->b.len) {
            bulk_malformed(d,
                           "bulk put acknowledgement from task (%u,%u,%u,%u) for a %s that has "
                           "streamed %llu of %llu bytes",
                           sw.from.x, sw.from.y, sw.from.z, sw.from.t, op->b.is_put ? "put" : "get",
                           (unsigned long long)op->b.sent, (unsigned long long)op->b.len);
            return;
        }
        bulk_complete(d, op, TORX_OK, 0);
        return;
    }
    }
    bulk_malformed(d, "unknown device-internal packet type %u from task (%u,%u,%u,%u)", sw.type,
                   sw.from.x, sw.from.y, sw.from.z, sw.from.t);
}

/* ---- Cross-memory attach ------------------------------------------------------ */

/* Copies len bytes between local and remote in pid; 0 or an errno. Moved
 * bytes are added to *moved. */
static int bulk_cma_copy(pid_t pid, bool put, uint64_t local, uint64_t remote, uint64_t len,
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

/* ---- Public device calls -------------------------------------------------------- */

/* Validates the request and fills op; the common start of get and put. */
static torx_status_t bulk_begin(torxp_shm_dev_t *d, bulk_op_t *op, torx_coord_t peer,
                                uint64_t remote, uint64_t local, size_t len, bool is_put)
{
    const char *dir = is_put ? "put to" : "get from";
    if (!op)
        return torxp_error(TORX_ERR_INVAL, "torx: bulk %s: the operation pointer is NULL", dir);
    if (op->b.magic == TORXP_SHM_BULK_MAGIC && !op->b.done && bulk_registered(d->serve, op))
        return torxp_error(TORX_ERR_INVAL,
                           "torx: bulk %s task (%u,%u,%u,%u): the torx_bulk_t at %p is still in "
                           "flight; wait for torx_bulk_test to return TORX_OK before reusing it",
                           dir, peer.x, peer.y, peer.z, peer.t, (void *)op);
    if (!torx_coord_in_shape(d->base.shape, peer))
        return torxp_error(TORX_ERR_INVAL,
                           "torx: bulk %s (%u,%u,%u,%u): outside the torus shape %ux%ux%ux%u", dir,
                           peer.x, peer.y, peer.z, peer.t, d->base.shape.x, d->base.shape.y,
                           d->base.shape.z, d->base.shape.t);
    const torxp_shm_task_t *t = &d->tasks[bulk_peer_index(d, peer)];
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
    *op = (bulk_op_t){.b = {.magic = TORXP_SHM_BULK_MAGIC,
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
static bool bulk_trivial(torxp_shm_dev_t *d, bulk_op_t *op)
{
    if (op->b.len && !torx_coord_equal(op->b.peer, d->base.self))
        return false;
    if (op->b.len) {
        void *dst = (void *)(uintptr_t)(op->b.is_put ? op->b.remote : op->b.local);
        const void *src = (const void *)(uintptr_t)(op->b.is_put ? op->b.local : op->b.remote);
        memmove(dst, src, (size_t)op->b.len);
        op->b.sent = op->b.len;
    }
    bulk_complete(d, op, TORX_OK, 0);
    return true;
}

/* ---- Shared gets ------------------------------------------------------------------
 *
 * One process_vm_readv copies at a quarter of memcpy's speed on the machines
 * measured (the kernel pins and maps the source page by page: 1 MiB in 79 us
 * against memcpy's 21), while the owner of the source is often waiting in
 * its progress loop for this very transfer: a rendezvous sender waits for
 * the receiver's ack. So a torx_bulk_get_shared (the caller's word that the
 * owner has nothing else to copy for it) of share_min bytes or more is
 * offered to the owner: the reader fills its record in the share region
 * and sends the owner BULK_SHARE, and from then on both claim bytes from
 * the front of the record's counter, the reader reading what it claims
 * (process_vm_readv), the owner writing what it claims into the reader
 * (process_vm_writev). Each claim is half of what is left, at least
 * TORXP_BULK_SHARE_PIECE (each call costs a microsecond or two of its own),
 * so with the owner there at once the two split the get near the middle in
 * a few calls, and an owner that comes late takes half of what it finds.
 * Two cores copy at once: 1 MiB in 45 us there, against 41 for two fixed
 * halves and 79 alone.
 *
 * The reader never waits for help, only for bytes the owner has claimed
 * (one claim at a time): an owner busy elsewhere finds the counter spent
 * when it gets to the packet, and the reader has copied everything alone,
 * as before. Claims carry the get's sequence number in the counter's top
 * bits, so a late BULK_SHARE, or one for a get that has ended, claims
 * nothing of the next. The get still completes inside the call. */

#define SHARE_OFF_MASK (((uint64_t)1 << TORXP_SHM_SHARE_OFF_BITS) - 1)
#define SHARE_SEQ_MASK ((1u << (64 - TORXP_SHM_SHARE_OFF_BITS)) - 1)

/* The next claim at offset off of a get of len bytes: half of the rest,
 * whole pages, at least a piece. */
static uint64_t share_claim_len(uint64_t off, uint64_t len)
{
    const uint64_t rest = len - off;
    uint64_t n = rest / 2 < TORXP_BULK_SHARE_PIECE ? TORXP_BULK_SHARE_PIECE : rest / 2;
    n = (n + 4095) & ~(uint64_t)4095;
    return n < rest ? n : rest;
}

/* Claims the next bytes of get seq: their offset in *off, their length
 * returned; 0 when the get has ended or is all claimed. */
static uint64_t share_claim(torxp_shm_share_t *r, uint64_t seq, uint64_t len, uint64_t *off)
{
    uint64_t w = __atomic_load_n(&r->claim, __ATOMIC_RELAXED);
    for (;;) {
        const uint64_t at = w & SHARE_OFF_MASK;
        if (w >> TORXP_SHM_SHARE_OFF_BITS != seq || at >= len)
            return 0;
        const uint64_t n = share_claim_len(at, len);
        if (__atomic_compare_exchange_n(&r->claim, &w, w + n, false, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
            *off = at;
            return n;
        }
    }
}

/* Whether the owner is itself in a get from this task: then both cores
 * copy already (both ways at once: a bidirectional stream), and sharing
 * would only add calls and contention (both-ways bandwidth 0.8x of the
 * unshared at 256 KiB-1 MiB, bench/RESULTS.md). */
static bool share_owner_busy(const torxp_shm_dev_t *d, const bulk_op_t *op)
{
    const torxp_shm_share_t *o = &d->share[bulk_peer_index(d, op->b.peer)];
    const uint64_t w = __atomic_load_n(&o->claim, __ATOMIC_RELAXED);
    return w >> TORXP_SHM_SHARE_OFF_BITS &&
           (w & SHARE_OFF_MASK) < __atomic_load_n(&o->len, __ATOMIC_RELAXED) &&
           __atomic_load_n(&o->owner, __ATOMIC_RELAXED) == d->self_index;
}

static bool share_wanted(const torxp_shm_dev_t *d, const bulk_op_t *op)
{
    return d->share_min && !op->b.is_put && op->b.len >= d->share_min &&
           op->b.len <= SHARE_OFF_MASK && !share_owner_busy(d, op);
}

/* The reader's half of a shared get: 0 or an errno, as bulk_cma_copy. */
static int share_get(torxp_shm_dev_t *d, bulk_op_t *op, pid_t pid)
{
    torxp_shm_share_t *r = &d->share[d->self_index];
    const uint64_t len = op->b.len;
    d->share_seq = (d->share_seq + 1) & SHARE_SEQ_MASK;
    if (!d->share_seq)
        d->share_seq = 1;
    const uint64_t seq = d->share_seq;
    /* relaxed: the claim word's release store below publishes them; the
     * owner reads them only after its acquire of that word. */
    __atomic_store_n(&r->src, op->b.remote, __ATOMIC_RELAXED);
    __atomic_store_n(&r->dst, op->b.local, __ATOMIC_RELAXED);
    __atomic_store_n(&r->len, len, __ATOMIC_RELAXED);
    __atomic_store_n(&r->owner, bulk_peer_index(d, op->b.peer), __ATOMIC_RELAXED);
    __atomic_store_n(&r->helped, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&r->abandoned, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&r->claim, seq << TORXP_SHM_SHARE_OFF_BITS, __ATOMIC_RELEASE);
    /* A full FIFO: the owner is behind anyway; copy alone. */
    if (bulk_send(d, op->b.peer, BULK_SHARE, 0, seq, 0, NULL, 0) == TORX_OK)
        d->shared_gets++;

    uint64_t own = 0, claimed = len, off, n;
    int err = 0;
    while ((n = share_claim(r, seq, len, &off))) {
        own += n;
        uint64_t moved = 0;
        if ((err = bulk_cma_copy(pid, false, op->b.local + off, op->b.remote + off, n, &moved))) {
            /* Close the counter: the bytes after these are nobody's. */
            const uint64_t w = __atomic_exchange_n(&r->claim, seq << TORXP_SHM_SHARE_OFF_BITS | len,
                                                   __ATOMIC_RELAXED);
            claimed = (w & SHARE_OFF_MASK) < len ? (w & SHARE_OFF_MASK) : len;
            break;
        }
    }
    /* Wait for the bytes the owner claimed: it writes into our memory, so
     * nothing may return before it has finished. */
    const uint64_t theirs = claimed - own;
    unsigned spins = 0;
    for (;;) {
        /* acquire: pairs with the owner's releases after its copies. */
        const uint64_t gone = __atomic_load_n(&r->abandoned, __ATOMIC_ACQUIRE);
        const uint64_t gone_len = gone ? __atomic_load_n(&r->abandoned_len, __ATOMIC_RELAXED) : 0;
        const uint64_t helped = __atomic_load_n(&r->helped, __ATOMIC_ACQUIRE);
        if (helped + gone_len >= theirs) {
            if (gone && !err && gone_len <= len && gone - 1 <= len - gone_len) {
                /* The owner could not write them: they are ours. */
                uint64_t moved = 0;
                err = bulk_cma_copy(pid, false, op->b.local + gone - 1, op->b.remote + gone - 1,
                                    gone_len, &moved);
            }
            d->bytes_written_for_us += helped;
            break;
        }
        if (++spins % 4096 == 0) {
            if (bulk_pid_dead(pid)) {
                err = err ? err : ESRCH;
                break;
            }
            sched_yield(); /* the owner may be waiting for this core */
        }
    }
    if (!err)
        op->b.sent = len;
    return err;
}

/* The owner's half: the get of the task at from, if it is still on. */
static void share_help(torxp_shm_dev_t *d, torx_coord_t from, uint64_t seq)
{
    torxp_shm_share_t *r = &d->share[bulk_peer_index(d, from)];
    /* acquire: pairs with the reader's release; its record is complete.
     * If a claim below succeeds, the reader was in this get all along, so
     * what is read here belongs to it. */
    const uint64_t w = __atomic_load_n(&r->claim, __ATOMIC_ACQUIRE);
    if (w >> TORXP_SHM_SHARE_OFF_BITS != seq)
        return; /* over, and maybe the next begun */
    const uint64_t src = __atomic_load_n(&r->src, __ATOMIC_RELAXED);
    const uint64_t dst = __atomic_load_n(&r->dst, __ATOMIC_RELAXED);
    const uint64_t len = __atomic_load_n(&r->len, __ATOMIC_RELAXED);
    const uint32_t owner = __atomic_load_n(&r->owner, __ATOMIC_RELAXED);
    if (owner != d->self_index || !len || len > SHARE_OFF_MASK || src + len < src ||
        dst + len < dst) {
        if (__atomic_load_n(&r->claim, __ATOMIC_RELAXED) == w)
            bulk_malformed(d,
                           "shared get %llu of task (%u,%u,%u,%u): %llu bytes, owner slot %u (we "
                           "are %u)",
                           (unsigned long long)seq, from.x, from.y, from.z, from.t,
                           (unsigned long long)len, owner, d->self_index);
        return;
    }
    const pid_t pid = bulk_peer_pid(d, from);
    uint64_t off, n;
    while ((n = share_claim(r, seq, len, &off))) {
        uint64_t moved = 0;
        if (bulk_cma_copy(pid, true, src + off, dst + off, n, &moved)) {
            /* Gone, or not writable by us: the reader copies them. */
            __atomic_store_n(&r->abandoned_len, n, __ATOMIC_RELAXED);
            __atomic_store_n(&r->abandoned, off + 1, __ATOMIC_RELEASE);
            return;
        }
        d->bytes_helped += n;
        /* release: our copy is in place before the reader counts it. */
        __atomic_fetch_add(&r->helped, n, __ATOMIC_RELEASE);
    }
}

static torx_status_t bulk_start_cma(torxp_shm_dev_t *d, bulk_op_t *op, bool may_share)
{
    const pid_t pid = bulk_peer_pid(d, op->b.peer);
    int err =
        may_share && share_wanted(d, op)
            ? share_get(d, op, pid)
            : bulk_cma_copy(pid, op->b.is_put, op->b.local, op->b.remote, op->b.len, &op->b.sent);
    if (!err) {
        bulk_complete(d, op, TORX_OK, 0);
        return TORX_OK;
    }
    bulk_complete(d, op, bulk_status_of_errno(err), err);
    return bulk_report(d, op);
}

/* The one start path of get and put: checks, the trivial and cma cases
 * (a get shared when may_share: torx_bulk_get_shared), then the first
 * packets of the fifo path (queued when the FIFO is full). */
static torx_status_t bulk_start(torx_pkt_dev_t *dev, torx_bulk_t *opp, torx_coord_t peer,
                                uint64_t remote, uint64_t local, size_t len, bool is_put,
                                bool may_share)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    bulk_op_t *op = (bulk_op_t *)opp;
    torx_status_t st = bulk_begin(d, op, peer, remote, local, len, is_put);
    if (st != TORX_OK)
        return st;
    if (bulk_trivial(d, op))
        return TORX_OK;
    if (d->bulk_cma)
        return bulk_start_cma(d, op, may_share);
    if (!d->serve)
        return torxp_error(TORX_ERR_INVAL, "torx: bulk %s before the device's bulk setup",
                           is_put ? "put" : "get");
    st = bulk_register(d->serve, op);
    if (st != TORX_OK)
        return st;
    st = is_put ? bulk_stream_put(d, op) : bulk_send_get_req(d, op);
    if (st == TORX_NO_ROOM) {
        const bulk_job_t j = {.kind = is_put ? JOB_PUT : JOB_GET_REQ, .peer = peer, .op = op};
        st = bulk_queue(d, &j);
    }
    if (st != TORX_OK) {
        /* A put may have some PUT_DATA out already; the peer writes them,
         * harmlessly, and never acknowledges since LAST was not sent. */
        bulk_unregister(d->serve, op);
        op->b.magic = 0;
    }
    return st;
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
static void bulk_fail_dead(torxp_shm_dev_t *d, bulk_op_t *op)
{
    /* Its last packets may still sit in our FIFOs; poll until they stop
     * changing anything (a dead task sends no more). */
    for (int idle = 0; idle < 16 && !bulk_is_done(op); idle++) {
        uint64_t before = op->b.sent;
        torx_pkt_poll(&d->base);
        if (op->b.sent != before)
            idle = 0;
    }
    if (bulk_is_done(op))
        return;
    bulk_drop_jobs(d, op);
    bulk_complete(d, op, TORX_ERR_PEER, ESRCH);
}

torx_status_t torxp_shm_bulk_test(torx_pkt_dev_t *dev, torx_bulk_t *opp)
{
    torxp_shm_dev_t *d = torxp_shm_of(dev);
    bulk_op_t *op = (bulk_op_t *)opp;
    if (!op || op->b.magic != TORXP_SHM_BULK_MAGIC)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_bulk_test on a torx_bulk_t at %p that no bulk get or put "
                           "started (or whose memory was overwritten)",
                           (void *)op);
    if (!bulk_is_done(op)) {
        torx_pkt_poll(dev);
        if (!bulk_is_done(op) && ++op->tests >= BULK_LIVENESS_EVERY) {
            op->tests = 0;
            if (bulk_peer_dead(d, op->b.peer))
                bulk_fail_dead(d, op);
        }
        if (!bulk_is_done(op))
            return TORX_AGAIN;
    }
    return op->status == TORX_OK ? TORX_OK : bulk_report(d, op);
}

const char *torxp_shm_bulk_path(const torx_pkt_dev_t *dev)
{
    return ((const torxp_shm_dev_t *)dev)->bulk_cma ? "cma" : "fifo";
}

/* The mean of this task's measurement and peer's, once peer has published
 * one: both ends of a pair then answer the same, so a choice made on it at
 * either end (TORX_RZV_DATA=auto) is the same choice. One task's 1 MiB
 * timing ranged 174-337% between starts on one VM, around the line the
 * message layer draws at 200, and a pair that disagreed staged one
 * direction and took bulk gets the other (bench/RESULTS.md, fourteenth
 * session). */
unsigned torxp_shm_bulk_cost(const torx_pkt_dev_t *dev, torx_coord_t peer)
{
    const torxp_shm_dev_t *d = (const torxp_shm_dev_t *)dev;
    if (!d->bulk_cost || !torx_coord_in_shape(dev->shape, peer))
        return d->bulk_cost;
    const unsigned theirs =
        __atomic_load_n(&d->tasks[bulk_peer_index(d, peer)].bulk_cost, __ATOMIC_RELAXED);
    return theirs ? (d->bulk_cost + theirs + 1) / 2 : d->bulk_cost;
}

/* ---- Set-up ------------------------------------------------------------------------ */

/* torx_bulk_cost: a copy of COST_BYTES by process_vm_readv from this task
 * itself (the same kernel path as from a peer: every page pinned, then
 * copied) against a memcpy of the same buffers, the best of COST_TRIES
 * each, so that a preempted or not yet steady try does not count. The
 * first few copies of fresh buffers run up to 3x slow: over 16 MPI starts
 * on one VM the figure ranged 137-468% at 3 tries and 254-509% at 12, and
 * a pair on each side of the line at 200 moved its rendezvous data at
 * 17-19 or 38-51 GB/s both ways at 64 KiB (bench/RESULTS.md, seventeenth
 * session). 1 MiB: past the caches that hold one core's copies, as the
 * messages that take a bulk get are; the whole measurement takes about
 * 1.5 ms once per task. */
#define COST_BYTES ((size_t)1 << 20)
#define COST_TRIES 12

static unsigned bulk_measure_cost(void)
{
    uint8_t *a = malloc(COST_BYTES), *b = malloc(COST_BYTES);
    unsigned pct = 0;
    if (!a || !b)
        goto out;
    memset(a, 1, COST_BYTES);
    memset(b, 2, COST_BYTES);
    double best_copy = 0, best_cma = 0;
    const pid_t self = getpid();
    for (int i = 0; i < COST_TRIES; i++) {
        double t0 = torxp_mono_s();
        memcpy(b, a, COST_BYTES);
        const double copy = torxp_mono_s() - t0;
        /* the copy must happen: b is read below */
        const struct iovec l = {b, COST_BYTES}, r = {a, COST_BYTES};
        t0 = torxp_mono_s();
        const ssize_t got = process_vm_readv(self, &l, 1, &r, 1, 0);
        const double cma = torxp_mono_s() - t0;
        if (got != (ssize_t)COST_BYTES)
            goto out;
        if (i == 0 || copy < best_copy)
            best_copy = copy;
        if (i == 0 || cma < best_cma)
            best_cma = cma;
    }
    if (best_copy > 0 && b[COST_BYTES - 1] == 1) {
        const double p = 100 * best_cma / best_copy;
        pct = p < 1 ? 1 : p > 100000 ? 100000 : (unsigned)p;
    }
out:
    free(a);
    free(b);
    return pct;
}

/* Yama's ptrace_scope, or 0 when Yama is absent. */
static int bulk_yama_scope(void)
{
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    int scope = 0;
    if (f) {
        if (fscanf(f, "%d", &scope) != 1)
            scope = 0;
        fclose(f);
    }
    return scope;
}

/* Reads a peer's probe word with process_vm_readv. Returns true when it
 * works; otherwise why[] says what failed and *err holds the errno. */
static bool bulk_probe(const torxp_shm_dev_t *d, char *why, size_t why_len, int *err,
                       unsigned *probed)
{
    unsigned peer = d->self_index;
    for (unsigned k = 1; k < d->nslots; k++) {
        unsigned i = (d->self_index + k) % d->nslots;
        if (__atomic_load_n(&d->tasks[i].state, __ATOMIC_ACQUIRE) == TORXP_SHM_TASK_ATTACHED) {
            peer = i;
            break;
        }
    }
    *probed = peer;
    const torxp_shm_task_t *t = &d->tasks[peer];
    if (!t->probe_word) {
        snprintf(why, why_len, "task pid %d published no probe word", (int)t->pid);
        *err = EINVAL;
        return false;
    }
    const int yama = bulk_yama_scope();
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        uint64_t word = 0;
        struct iovec l = {&word, sizeof word};
        struct iovec r = {(void *)(uintptr_t)t->probe_word, sizeof word};
        ssize_t got = process_vm_readv(t->pid, &l, 1, &r, 1, 0);
        if (got == (ssize_t)sizeof word && word == TORXP_SHM_PROBE_VALUE)
            return true;
        if (got == (ssize_t)sizeof word) {
            snprintf(why, why_len, "process_vm_readv read 0x%llx, not the probe value 0x%llx",
                     (unsigned long long)word, (unsigned long long)TORXP_SHM_PROBE_VALUE);
            *err = EIO;
            return false;
        }
        *err = got < 0 ? errno : EIO;
        snprintf(why, why_len, "process_vm_readv: %s", got < 0 ? strerror(*err) : "short read");
        /* Under Yama scope 1 the peer may not have run its PR_SET_PTRACER
         * yet; it does so at the start of its own set-up. */
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long ms = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (*err != EPERM || yama != 1 || peer == d->self_index || ms >= BULK_YAMA_RETRY_MS)
            return false;
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
}

/* Why the ptracer permission: under Yama's ptrace_scope 1 a process may
 * read another's memory with process_vm_readv only if it may ptrace it, that
 * is, if it is an ancestor or the pid the target named with PR_SET_PTRACER.
 * Our readers are the other tasks on this host, siblings under the launcher,
 * so cross-memory attach needs the grant; nothing else in torx does, and it
 * is given only when the bulk path may use it. At scope 0 (or without Yama)
 * nothing is needed; at 2 and 3 no grant helps, the probe fails and bulk
 * data streams through the FIFOs. PR_SET_PTRACER names one pid: with one
 * other task on the host that is the narrowest grant the kernel has; with
 * more, PR_SET_PTRACER_ANY is the only form that covers them all. Peers that
 * probe before the grant is in place retry (bulk_probe). */
static void bulk_allow_readers(torxp_shm_dev_t *d, int yama)
{
    if (yama != 1)
        return;
    unsigned others = 0;
    pid_t only = 0;
    for (unsigned i = 0; i < d->nslots; i++)
        if (i != d->self_index &&
            __atomic_load_n(&d->tasks[i].state, __ATOMIC_ACQUIRE) == TORXP_SHM_TASK_ATTACHED) {
            others++;
            only = (pid_t)d->tasks[i].pid;
        }
    if (others == 0)
        return;
    const unsigned long who = others == 1 ? (unsigned long)only : PR_SET_PTRACER_ANY;
    if (prctl(PR_SET_PTRACER, who, 0, 0, 0) == -1)
        torxp_log(&d->base, 1, "prctl(PR_SET_PTRACER, %s): %s",
                  others == 1 ? "the one other task" : "ANY", strerror(errno));
    else
        torxp_log(&d->base, 2, "Yama ptrace_scope 1: ptracer permission given to %s%d%s",
                  others == 1 ? "pid " : "", others == 1 ? (int)only : (int)others,
                  others == 1 ? "" : " tasks (PR_SET_PTRACER_ANY)");
}

torx_status_t torxp_shm_bulk_setup(torxp_shm_dev_t *d, int bulk_mode, long share_min, long cost)
{
    /* Every task helps the others' shared gets, whatever its own setting. */
    d->share = torxp_shm_at(d, d->seg->share_off);

    d->serve = torxp_calloc(1, sizeof *d->serve);
    if (!d->serve)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for the bulk transfer state");
    d->serve->tail = &d->serve->jobs;
    d->serve->free_op = BULK_NO_SLOT;

    if (bulk_mode == TORXP_BULK_FIFO) {
        d->bulk_cma = 0;
        torxp_log(&d->base, 1, "bulk path: fifo (copy through the torus FIFOs; TORX_BULK=fifo)");
        return TORX_OK;
    }
    const int yama = bulk_yama_scope();
    bulk_allow_readers(d, yama);
    char why[160];
    int err = 0;
    unsigned probed;
    if (bulk_probe(d, why, sizeof why, &err, &probed)) {
        d->bulk_cma = 1;
        /* More tasks than cores: the owner may not be running, and a piece
         * it claimed would keep the reader waiting for a time slice. */
        const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        d->share_min = cpus > 0 && d->base.size > cpus ? 0 : (uint64_t)share_min;
        if (d->share_min)
            torxp_log(&d->base, 1,
                      "bulk path: cma (process_vm_readv single copy; gets of %llu bytes or more "
                      "shared with the owner, TORX_BULK_SHARE_MIN)",
                      (unsigned long long)d->share_min);
        else
            torxp_log(&d->base, 1, "bulk path: cma (process_vm_readv single copy%s)",
                      share_min ? "; gets not shared: more tasks than cores" : "");
        /* Not measured with more tasks than cores: every task's copies
         * would time the others' time slices. */
        d->bulk_cost = cost                              ? (unsigned)cost
                       : cpus > 0 && d->base.size > cpus ? 0
                                                         : bulk_measure_cost();
        __atomic_store_n(&d->tasks[d->self_index].bulk_cost, d->bulk_cost, __ATOMIC_RELAXED);
        if (cost)
            torxp_log(&d->base, 1, "bulk path: torx_bulk_cost %u%% (TORX_BULK_COST)", d->bulk_cost);
        else if (d->bulk_cost)
            torxp_log(&d->base, 1,
                      "bulk path: a 1 MiB process_vm_readv takes %u%% of a 1 MiB memcpy's "
                      "time (torx_bulk_cost)",
                      d->bulk_cost);
        return TORX_OK;
    }
    if (bulk_mode == TORXP_BULK_CMA) {
        const torxp_shm_task_t *t = &d->tasks[probed];
        torxp_shm_bulk_fini(d);
        return torxp_error(TORX_ERR_UNSUPPORTED,
                           "torx: TORX_BULK=cma, but cross-memory attach is forbidden (probe of "
                           "task rank %d pid %d: %s); unset TORX_BULK or set TORX_BULK=fifo",
                           (int)t->rank, (int)t->pid, why);
    }
    d->bulk_cma = 0;
    /* Said once, at TORX_VERBOSE=1: a fallback that works, not a fault
     * (containers often forbid these calls). */
    torxp_log(&d->base, 1, "cross-memory attach forbidden (%s%s), bulk transfers use FIFO copy",
              why, yama >= 2 ? "; Yama ptrace_scope is 2 or more" : "");
    torxp_log(&d->base, 1, "bulk path: fifo (copy through the torus FIFOs)");
    return TORX_OK;
}

void torxp_shm_bulk_fini(torxp_shm_dev_t *d)
{
    struct torxp_shm_serve *s = d->serve;
    if (!s)
        return;
    if (d->shared_gets || d->bytes_helped)
        torxp_log(&d->base, 2,
                  "bulk: %llu gets shared, %llu of their bytes written by the owner; %llu bytes "
                  "written for others' gets",
                  (unsigned long long)d->shared_gets, (unsigned long long)d->bytes_written_for_us,
                  (unsigned long long)d->bytes_helped);
    /* In-flight operations are abandoned (torx_pkt_close): their
     * torx_bulk_t may be gone already, so they are not touched. */
    while (s->jobs) {
        bulk_job_t *j = s->jobs;
        s->jobs = j->next;
        free(j);
    }
    d->bulk_jobs = 0;
    free(s->ops);
    free(s);
    d->serve = NULL;
}
