/* Bulk transfer for the shm device, the fifo path: the data streamed
 * through the torus FIFOs as device-internal packets (shm_bulk.h). */
#include "shm_bulk.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

/* ---- Operation table -------------------------------------------------------- */

static torx_status_t bulk_register(struct torxp_shm_serve *s, torxp_shm_bulk_op_t *op)
{
    if (s->free_op == BULK_NO_SLOT) {
        uint32_t n = s->nops ? s->nops * 2 : 16;
        if (n <= s->nops || n > UINT32_MAX / 2)
            return torxp_error(TORX_ERR_NOMEM, "torx: too many bulk transfers in flight (%u)",
                               s->nops);
        torxp_shm_bulk_slot_t *ops = torxp_realloc(s->ops, (size_t)n * sizeof *ops);
        if (!ops)
            return torxp_error(TORX_ERR_NOMEM,
                               "torx: out of memory growing the bulk transfer table to %u", n);
        for (uint32_t i = s->nops; i < n; i++)
            ops[i] = (torxp_shm_bulk_slot_t){.next_free = i + 1 < n ? i + 1 : BULK_NO_SLOT};
        s->free_op = s->nops;
        s->ops = ops;
        s->nops = n;
    }
    uint32_t i = s->free_op;
    torxp_shm_bulk_slot_t *e = &s->ops[i];
    s->free_op = e->next_free;
    e->gen = e->gen + 1 ? e->gen + 1 : 1;
    e->op = op;
    op->slot = i;
    op->gen = e->gen;
    return TORX_OK;
}

bool torxp_shm_bulk_registered(const struct torxp_shm_serve *s, const torxp_shm_bulk_op_t *op)
{
    return s && op->slot < s->nops && s->ops[op->slot].op == op && s->ops[op->slot].gen == op->gen;
}

void torxp_shm_bulk_unregister(struct torxp_shm_serve *s, torxp_shm_bulk_op_t *op)
{
    if (!torxp_shm_bulk_registered(s, op))
        return;
    torxp_shm_bulk_slot_t *e = &s->ops[op->slot];
    e->op = NULL;
    e->next_free = s->free_op;
    s->free_op = op->slot;
}

static uint64_t bulk_cookie(const torxp_shm_bulk_op_t *op)
{
    return (uint64_t)op->gen << 32 | op->slot;
}

/* The live operation a cookie names; aborts on a stale or forged one. */
static torxp_shm_bulk_op_t *bulk_lookup(torxp_shm_dev_t *d, uint64_t cookie, const char *what,
                                        torx_coord_t from)
{
    const struct torxp_shm_serve *s = d->serve;
    uint32_t i = (uint32_t)cookie, gen = (uint32_t)(cookie >> 32);
    if (!s || i >= s->nops || !s->ops[i].op || s->ops[i].gen != gen) {
        torxp_dev_malformed(&d->base,
                            "bulk %s from task (%u,%u,%u,%u) names cookie 0x%llx, which is no "
                            "transfer in flight here (stale or bogus)",
                            what, from.x, from.y, from.z, from.t, (unsigned long long)cookie);
        return NULL;
    }
    torxp_shm_bulk_op_t *op = s->ops[i].op;
    /* Our own memory, not the wire: the caller reused a torx_bulk_t whose
     * transfer was still running, and nothing it names can be trusted. */
    if (op->b.magic != TORXP_SHM_BULK_MAGIC || op->slot != i || op->gen != gen) {
        torxp_dev_fail(&d->base, TORX_ERR_INVAL,
                       "bulk %s from task (%u,%u,%u,%u): the torx_bulk_t at %p (cookie 0x%llx) was "
                       "overwritten or reused while its transfer was in flight",
                       what, from.x, from.y, from.z, from.t, (void *)op,
                       (unsigned long long)cookie);
        return NULL;
    }
    if (!torx_coord_equal(from, op->b.peer)) {
        torxp_dev_malformed(&d->base,
                            "bulk %s for cookie 0x%llx came from task (%u,%u,%u,%u), but that "
                            "transfer's peer is (%u,%u,%u,%u)",
                            what, (unsigned long long)cookie, from.x, from.y, from.z, from.t,
                            op->b.peer.x, op->b.peer.y, op->b.peer.z, op->b.peer.t);
        return NULL;
    }
    return op;
}

/* ---- Job list --------------------------------------------------------------- */

static void bulk_append(torxp_shm_dev_t *d, torxp_shm_bulk_job_t *j)
{
    struct torxp_shm_serve *s = d->serve;
    j->next = NULL;
    *s->tail = j;
    s->tail = &j->next;
    d->bulk_jobs++;
}

static torx_status_t bulk_queue(torxp_shm_dev_t *d, const torxp_shm_bulk_job_t *tmpl)
{
    torxp_shm_bulk_job_t *j = torxp_malloc(sizeof *j);
    if (!j)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory queuing a bulk transfer job");
    *j = *tmpl;
    bulk_append(d, j);
    return TORX_OK;
}

/* Removes the jobs that work for op (it failed, nothing more may be sent). */
void torxp_shm_bulk_drop_jobs(torxp_shm_dev_t *d, const torxp_shm_bulk_op_t *op)
{
    struct torxp_shm_serve *s = d->serve;
    torxp_shm_bulk_job_t **pp = &s->jobs;
    while (*pp) {
        torxp_shm_bulk_job_t *j = *pp;
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

torx_status_t torxp_shm_bulk_send(torxp_shm_dev_t *d, torx_coord_t to,
                                  enum torxp_shm_bulk_type type, unsigned flags, uint64_t cookie,
                                  uint64_t addr, const void *data, size_t len)
{
    torx_pkt_hdr_t h;
    /* Deterministic: a sender's bulk packets must arrive in injection order
     * (LAST after every other PUT_DATA of its put). */
    torx_pkt_hdr_init(&h, to, TORX_PKT_SYS);
    const torxp_shm_bulk_sw_t sw = {.type = (uint8_t)type,
                                    .flags = (uint8_t)flags,
                                    .version = BULK_WIRE_VERSION,
                                    .from = d->base.self};
    memcpy(h.sw, &sw, sizeof sw);
    const torxp_shm_bulk_wire_t w = {.cookie = cookie, .addr = addr};
    struct iovec iov[2] = {{(void *)&w, sizeof w}, {(void *)data, len}};
    return torxp_shm_inject(&d->base, &h, iov, len ? 2 : 1);
}

static torx_status_t bulk_send_get_req(torxp_shm_dev_t *d, const torxp_shm_bulk_op_t *op)
{
    const uint64_t len = op->b.len;
    return torxp_shm_bulk_send(d, op->b.peer, BULK_GET_REQ, 0, bulk_cookie(op), op->b.remote, &len,
                               sizeof len);
}

/* Streams the rest of a put; TORX_OK once every PUT_DATA is injected. */
static torx_status_t bulk_stream_put(torxp_shm_dev_t *d, torxp_shm_bulk_op_t *op)
{
    while (op->b.sent < op->b.len) {
        uint64_t n = op->b.len - op->b.sent;
        if (n > BULK_DATA_MAX)
            n = BULK_DATA_MAX;
        unsigned flags = op->b.sent + n == op->b.len ? BULK_FLAG_LAST : 0;
        torx_status_t st = torxp_shm_bulk_send(
            d, op->b.peer, BULK_PUT_DATA, flags, bulk_cookie(op), op->b.remote + op->b.sent,
            (const void *)(uintptr_t)(op->b.local + op->b.sent), (size_t)n);
        if (st != TORX_OK)
            return st;
        op->b.sent += n;
    }
    return TORX_OK;
}

/* Streams the rest of a peer's get; TORX_OK once every GET_DATA is injected. */
static torx_status_t bulk_stream_reply(torxp_shm_dev_t *d, torxp_shm_bulk_job_t *j)
{
    while (j->off < j->len) {
        uint64_t n = j->len - j->off;
        if (n > BULK_DATA_MAX)
            n = BULK_DATA_MAX;
        torx_status_t st =
            torxp_shm_bulk_send(d, j->peer, BULK_GET_DATA, 0, j->cookie, j->off,
                                (const void *)(uintptr_t)(j->addr + j->off), (size_t)n);
        if (st != TORX_OK)
            return st;
        j->off += n;
    }
    return TORX_OK;
}

static const char *bulk_job_name(enum torxp_shm_bulk_job_kind k)
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
static bool bulk_job_step(torxp_shm_dev_t *d, torxp_shm_bulk_job_t *j)
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
        st = torxp_shm_bulk_send(d, j->peer, BULK_PUT_ACK, 0, j->cookie, 0, NULL, 0);
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
        if (!torxp_shm_bulk_peer_dead(d, j->peer))
            return false;
        st = TORX_ERR_PEER;
    }
    if (j->op) {
        torxp_shm_bulk_complete(d, j->op, st, st == TORX_ERR_PEER ? ESRCH : 0);
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
    torxp_shm_bulk_job_t **pp = &s->jobs;
    while (*pp) {
        torxp_shm_bulk_job_t *j = *pp;
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

/* The fifo path's start of a get or put that bulk_start checked: the first
 * packets (queued when the FIFO is full). */
torx_status_t torxp_shm_bulk_start_fifo(torxp_shm_dev_t *d, torxp_shm_bulk_op_t *op)
{
    const bool is_put = op->b.is_put;
    torx_status_t st = bulk_register(d->serve, op);
    if (st != TORX_OK)
        return st;
    st = is_put ? bulk_stream_put(d, op) : bulk_send_get_req(d, op);
    if (st == TORX_NO_ROOM) {
        const torxp_shm_bulk_job_t j = {
            .kind = is_put ? JOB_PUT : JOB_GET_REQ, .peer = op->b.peer, .op = op};
        st = bulk_queue(d, &j);
    }
    if (st != TORX_OK) {
        /* A put may have some PUT_DATA out already; the peer writes them,
         * harmlessly, and never acknowledges since LAST was not sent. */
        torxp_shm_bulk_unregister(d->serve, op);
        op->b.magic = 0;
    }
    return st;
}

/* ---- Receiving device-internal packets --------------------------------------- */

void torxp_shm_bulk_on_sys(torxp_shm_dev_t *d, const torx_pkt_hdr_t *pkt)
{
    torxp_shm_bulk_sw_t sw;
    memcpy(&sw, pkt->sw, sizeof sw);
    if (sw.version != BULK_WIRE_VERSION || pkt->payload_len < sizeof(torxp_shm_bulk_wire_t) ||
        !torx_coord_in_shape(d->base.shape, sw.from)) {
        torxp_dev_malformed(
            &d->base,
            "malformed device-internal packet (type %u, version %u, %u payload bytes, "
            "from (%u,%u,%u,%u))",
            sw.type, sw.version, pkt->payload_len, sw.from.x, sw.from.y, sw.from.z, sw.from.t);
        return;
    }
    torxp_shm_bulk_wire_t w;
    const uint8_t *payload = torx_pkt_payload(pkt);
    memcpy(&w, payload, sizeof w);
    const uint8_t *data = payload + sizeof w;
    const size_t n = pkt->payload_len - sizeof w;

    switch (sw.type) {
    case BULK_GET_REQ: {
        uint64_t len;
        if (n != sizeof len) {
            torxp_dev_malformed(&d->base,
                                "bulk get request from task (%u,%u,%u,%u) has %zu length bytes",
                                sw.from.x, sw.from.y, sw.from.z, sw.from.t, n);
            return;
        }
        memcpy(&len, data, sizeof len);
        if (len == 0 || w.addr + len < w.addr) {
            torxp_dev_malformed(&d->base,
                                "bulk get request from task (%u,%u,%u,%u) for %llu bytes at 0x%llx",
                                sw.from.x, sw.from.y, sw.from.z, sw.from.t, (unsigned long long)len,
                                (unsigned long long)w.addr);
            return;
        }
        const torxp_shm_bulk_job_t j = {
            .kind = JOB_GET_REPLY, .peer = sw.from, .cookie = w.cookie, .addr = w.addr, .len = len};
        if (!d->serve || bulk_queue(d, &j) != TORX_OK)
            torxp_dev_fail(&d->base, d->serve ? TORX_ERR_NOMEM : TORX_ERR_INVAL,
                           "cannot queue the reply to a bulk get from task (%u,%u,%u,%u): %s",
                           sw.from.x, sw.from.y, sw.from.z, sw.from.t,
                           d->serve ? torx_last_error() : "bulk transfers not set up");
        return;
    }
    case BULK_GET_DATA: {
        torxp_shm_bulk_op_t *op = bulk_lookup(d, w.cookie, "get data", sw.from);
        if (!op)
            return;
        if (op->b.is_put || w.addr > op->b.len || n > op->b.len - w.addr ||
            op->b.sent + n > op->b.len) {
            torxp_dev_malformed(
                &d->base,
                "bulk get data from task (%u,%u,%u,%u) for offset %llu + %zu bytes does "
                "not fit the %s of %llu bytes (%llu received)",
                sw.from.x, sw.from.y, sw.from.z, sw.from.t, (unsigned long long)w.addr, n,
                op->b.is_put ? "put" : "get", (unsigned long long)op->b.len,
                (unsigned long long)op->b.sent);
            return;
        }
        memcpy((uint8_t *)(uintptr_t)op->b.local + w.addr, data, n);
        op->b.sent += n;
        if (op->b.sent == op->b.len)
            torxp_shm_bulk_complete(d, op, TORX_OK, 0);
        return;
    }
    case BULK_PUT_DATA:
        memcpy((void *)(uintptr_t)w.addr, data, n);
        if (sw.flags & BULK_FLAG_LAST) {
            torx_status_t st =
                torxp_shm_bulk_send(d, sw.from, BULK_PUT_ACK, 0, w.cookie, 0, NULL, 0);
            if (st == TORX_NO_ROOM) {
                const torxp_shm_bulk_job_t j = {
                    .kind = JOB_PUT_ACK, .peer = sw.from, .cookie = w.cookie};
                st = d->serve ? bulk_queue(d, &j) : TORX_ERR_INVAL;
            }
            if (st != TORX_OK)
                torxp_dev_fail(&d->base, st,
                               "cannot acknowledge a bulk put from task (%u,%u,%u,%u): %s",
                               sw.from.x, sw.from.y, sw.from.z, sw.from.t, torx_status_str(st));
        }
        return;
    case BULK_SHARE:
        if (n || !d->share)
            torxp_dev_malformed(&d->base, "shared get from task (%u,%u,%u,%u) with %zu bytes%s",
                                sw.from.x, sw.from.y, sw.from.z, sw.from.t, n,
                                d->share ? "" : " on a device without shared gets");
        else
            torxp_shm_share_help(d, sw.from, w.cookie);
        return;
    case BULK_PUT_ACK: {
        torxp_shm_bulk_op_t *op = bulk_lookup(d, w.cookie, "put acknowledgement", sw.from);
        if (!op)
            return;
        if (!op->b.is_put || op->b.sent != op->b.len) {
            torxp_dev_malformed(
                &d->base,
                "bulk put acknowledgement from task (%u,%u,%u,%u) for a %s that has "
                "streamed %llu of %llu bytes",
                sw.from.x, sw.from.y, sw.from.z, sw.from.t, op->b.is_put ? "put" : "get",
                (unsigned long long)op->b.sent, (unsigned long long)op->b.len);
            return;
        }
        torxp_shm_bulk_complete(d, op, TORX_OK, 0);
        return;
    }
    }
    torxp_dev_malformed(&d->base, "unknown device-internal packet type %u from task (%u,%u,%u,%u)",
                        sw.type, sw.from.x, sw.from.y, sw.from.z, sw.from.t);
}
