/* Liveness of the job's tasks, for a host that vanishes.
 *
 * A host whose link goes down (or that is switched off) sends nothing more,
 * not even a FIN: a library's connections to it (libfabric's tcp;ofi_rxm,
 * UCX's tcp) stay open, and sends toward it complete into the kernel's
 * socket buffer or wait quietly. The devices' probes (their ping op, which
 * the collective network sends while it waits) catch a dead task whose kernel
 * still answers, not a dead host. Asking the peer's software to answer
 * would take a computing task for a dead one.
 *
 * So each task watches one other, the next rank, over a TCP connection of
 * its own (bound to the endpoint's address) with TCP_USER_TIMEOUT: every
 * LIVE_BEAT_S the watcher sends one byte, which the watched task's kernel
 * acknowledges whether or not the task is polling; bytes unacknowledged
 * for LIVE_TIMEOUT_MS make the kernel abort the connection, and the next
 * check names the rank. A task that dies on a live host closes its side
 * (the kernel sends a FIN), which both ends see at once. The ring of
 * watchers crosses every boundary between hosts, so any host that vanishes
 * is seen by the task before it in rank order, and that task's error ends
 * the job. A task that closes the device says goodbye first (LIVE_BYE on
 * both its connections), so an orderly finish is never taken for a death.
 *
 * Costs: two sockets per task, one byte a second, and a look at them every
 * LIVE_POLL_EVERY progress calls. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4 */
#endif
#include "net.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define LIVE_BEAT_S 1.0
#define LIVE_TIMEOUT_MS 8000
#define LIVE_CONNECT_MS 60000
#define LIVE_POLL_EVERY 256
#define LIVE_BEAT 'h'
#define LIVE_BYE 'B'

struct torxp_net_live {
    int listen_fd;
    int out_fd, in_fd;    /* to the task watched (next rank), from its watcher (previous) */
    int watched, watcher; /* their ranks */
    double next_beat;
    unsigned polls;
};

static socklen_t sockaddr_len(const struct sockaddr *sa)
{
    return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

torx_status_t torxp_net_live_listen(torxp_net_t *d, const void *bind_addr, size_t bind_len,
                                    torxp_net_live_addr_t *out)
{
    memset(out, 0, sizeof *out);
    struct torxp_net_live *l = torxp_calloc(1, sizeof *l);
    if (!l)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for the liveness watch");
    l->listen_fd = l->out_fd = l->in_fd = -1;
    d->live = l;
    struct sockaddr_storage ss = {0};
    if (bind_len < sizeof(struct sockaddr_in) || bind_len > sizeof ss)
        return torxp_error(TORX_ERR_UNSUPPORTED,
                           "torx: %s device: the network address (%zu bytes) is not an IP "
                           "socket address; the liveness watch needs one",
                           d->net_ops->name, bind_len);
    memcpy(&ss, bind_addr, bind_len);
    struct sockaddr *sa = (struct sockaddr *)&ss;
    if (sa->sa_family == AF_INET)
        ((struct sockaddr_in *)sa)->sin_port = 0;
    else if (sa->sa_family == AF_INET6)
        ((struct sockaddr_in6 *)sa)->sin6_port = 0;
    else
        return torxp_error(TORX_ERR_UNSUPPORTED,
                           "torx: %s device: the network address's family %d is not IP; the "
                           "liveness watch needs one",
                           d->net_ops->name, sa->sa_family);
    socklen_t len = sockaddr_len(sa);
    l->listen_fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l->listen_fd < 0 || bind(l->listen_fd, sa, len) != 0 || listen(l->listen_fd, 4) != 0 ||
        getsockname(l->listen_fd, (struct sockaddr *)&ss, &len) != 0)
        return torxp_error(TORX_ERR_SYS, "torx: %s device: liveness socket: %s", d->net_ops->name,
                           strerror(errno));
    static_assert(sizeof out->bytes >= sizeof(struct sockaddr_in6), "room for an IPv6 address");
    memcpy(out->bytes, &ss, len);
    out->len = (uint32_t)len;
    return TORX_OK;
}

static int set_nonblocking(int fd)
{
    const int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Waits for fd to be ready for events, at most ms; 1 ready, 0 timeout, -1 error. */
static int wait_fd(int fd, short events, int ms)
{
    struct pollfd p = {.fd = fd, .events = events};
    int rc;
    while ((rc = poll(&p, 1, ms)) < 0 && errno == EINTR)
        ;
    return rc;
}

torx_status_t torxp_net_live_connect(torxp_net_t *d, int watched, int watcher,
                                     const torxp_net_live_addr_t *to)
{
    struct torxp_net_live *l = d->live;
    l->watched = watched;
    l->watcher = watcher;
    const struct sockaddr *sa = (const struct sockaddr *)to->bytes;
    const unsigned timeout_ms = LIVE_TIMEOUT_MS;
    const int one = 1;
    l->out_fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l->out_fd < 0 ||
        setsockopt(l->out_fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &timeout_ms, sizeof timeout_ms) ||
        setsockopt(l->out_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) ||
        set_nonblocking(l->out_fd))
        return torxp_error(TORX_ERR_SYS, "torx: %s device: liveness socket: %s", d->net_ops->name,
                           strerror(errno));
    if (connect(l->out_fd, sa, (socklen_t)to->len) != 0) {
        int err = errno;
        if (err == EINPROGRESS) {
            socklen_t el = sizeof err;
            err = wait_fd(l->out_fd, POLLOUT, LIVE_CONNECT_MS) == 1 &&
                          getsockopt(l->out_fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0
                      ? err
                      : ETIMEDOUT;
        }
        if (err)
            return torxp_error(TORX_ERR_PEER,
                               "torx: %s device: rank %d cannot connect to rank %d to watch "
                               "it: %s",
                               d->net_ops->name, d->base.rank, watched, strerror(err));
    }
    if (wait_fd(l->listen_fd, POLLIN, LIVE_CONNECT_MS) != 1 ||
        (l->in_fd = accept4(l->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) < 0)
        return torxp_error(TORX_ERR_PEER,
                           "torx: %s device: rank %d did not hear from rank %d, which watches "
                           "it, in %d s",
                           d->net_ops->name, d->base.rank, watcher, LIVE_CONNECT_MS / 1000);
    close(l->listen_fd); /* one watcher, and it has come */
    l->listen_fd = -1;
    l->next_beat = torxp_mono_s() + LIVE_BEAT_S;
    return TORX_OK;
}

/* Reads what came on *fd; 0 while the other side lives, else closes *fd and
 * returns 1 when it said goodbye first, -errno (or -EPIPE at a bare end)
 * when it did not. */
static int drain(int *fd)
{
    char buf[64];
    for (;;) {
        const ssize_t n = recv(*fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
            if (memchr(buf, LIVE_BYE, (size_t)n)) {
                close(*fd);
                *fd = -1;
                return 1;
            }
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return 0;
        const int err = n == 0 ? EPIPE : errno;
        close(*fd);
        *fd = -1;
        return -err;
    }
}

static void dead(torxp_net_t *d, int rank, int err)
{
    const unsigned slot = d->rank_slot[rank];
    const torx_coord_t c = torxp_net_coord_of(d, slot);
    if (err == ETIMEDOUT)
        torxp_dev_fail(&d->base, TORX_ERR_PEER,
                       "rank %d at (%u,%u,%u,%u) is unreachable: its host has acknowledged "
                       "nothing for %d s (the host or the network to it is down)",
                       rank, c.x, c.y, c.z, c.t, LIVE_TIMEOUT_MS / 1000);
    else
        torxp_dev_fail(&d->base, TORX_ERR_PEER,
                       "rank %d at (%u,%u,%u,%u) is gone: its connection ended without a "
                       "goodbye (%s; the task died)",
                       rank, c.x, c.y, c.z, c.t, err == EPIPE ? "closed" : strerror(err));
}

void torxp_net_live_check(torxp_net_t *d)
{
    struct torxp_net_live *l = d->live;
    if (!l || d->closing || ++l->polls % LIVE_POLL_EVERY)
        return;
    int rc;
    if (l->in_fd >= 0 && (rc = drain(&l->in_fd)) < 0)
        dead(d, l->watcher, -rc);
    if (l->out_fd >= 0 && (rc = drain(&l->out_fd)) < 0)
        dead(d, l->watched, -rc);
    const double now = torxp_mono_s();
    if (l->out_fd < 0 || now < l->next_beat)
        return;
    l->next_beat = now + LIVE_BEAT_S;
    const char beat = LIVE_BEAT;
    if (send(l->out_fd, &beat, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EAGAIN &&
        errno != EWOULDBLOCK && errno != EINTR) {
        const int err = errno;
        close(l->out_fd);
        l->out_fd = -1;
        dead(d, l->watched, err);
    }
}

void torxp_net_live_fini(torxp_net_t *d)
{
    struct torxp_net_live *l = d->live;
    if (!l)
        return;
    /* Read what came first: closing a socket with unread bytes resets the
     * connection instead of ending it, and the goodbye could be lost. */
    const char bye = LIVE_BYE;
    int *fds[] = {&l->out_fd, &l->in_fd};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
        if (*fds[i] < 0 || drain(fds[i]) != 0)
            continue;
        (void)!send(*fds[i], &bye, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        shutdown(*fds[i], SHUT_WR);
        close(*fds[i]);
    }
    if (l->listen_fd >= 0)
        close(l->listen_fd);
    free(l);
    d->live = NULL;
}
