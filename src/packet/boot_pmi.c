/* The PMI-1 bootstrap: the client side of the line protocol MPICH's hydra
 * mpiexec speaks over the socket it passes in PMI_FD (or, for launchers that
 * use it, a TCP connection to PMI_PORT). Without any PMI_* variable the task
 * is a singleton job of one.
 *
 * Every request is one line "cmd=NAME key=value ...\n" answered by one line.
 * Waits are bounded by TORX_BOOT_TIMEOUT (seconds, default 300), so a task
 * whose peers never reach the bootstrap fails with a message instead of
 * hanging.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "pkt_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PMI_KVSNAME_MAX 256 /* hydra's kvsname_max; longer names are refused */
#define PMI_WIRE_LINE 1024  /* PMIU_MAXLINE: the longest line a PMI-1 server takes, NUL included */
#define PMI_RECV_BUF 4096
#define PMI_KEY_BOUND 64 /* our keys: "torx-ag" + 3 decimal numbers, always shorter */
#define PMI_TIMEOUT_DEF 300

/* boot->impl of a PMI task. job_id must stay the first member:
 * torx_boot_job_id() reads the NUL-terminated string at the start of every
 * bootstrap's impl (boot_fork.c follows the same rule). */
typedef struct pmi_client {
    char job_id[PMI_KVSNAME_MAX + 1]; /* the kvsname, or "singleton-<pid>-<hex>" */
    int fd;                           /* -1 for a singleton */
    int keylen_max, vallen_max;       /* from cmd=maxes; both count the NUL */
    int timeout_s;                    /* TORX_BOOT_TIMEOUT */
    unsigned long seq;                /* allgathers so far: keys never repeat */
    size_t rlen;                      /* bytes buffered in rbuf */
    char rbuf[PMI_RECV_BUF];
} pmi_client_t;

const char *torx_boot_job_id(const torx_boot_t *boot)
{
    if (!boot || !boot->impl)
        return "";
    return (const char *)boot->impl;
}

/* ---- Environment --------------------------------------------------------- */

/* A PMI_* integer that is set: strict, and empty is malformed (not "unset"). */
static torx_status_t pmi_env_int(const char *name, long lo, long hi, long *out)
{
    const char *s = getenv(name);
    if (s && !*s)
        return torxp_error(TORX_ERR_ENV,
                           "torx: %s='' is not an integer (expected %ld..%ld); it is set by "
                           "mpiexec, unset it to run as a singleton",
                           name, lo, hi);
    return torx_env_int(name, lo, hi, 0, out);
}

/* ---- Wire ---------------------------------------------------------------- */

static torx_status_t peer_closed(const char *cmd)
{
    return torxp_error(TORX_ERR_PEER,
                       "torx: the PMI server (mpiexec) closed the connection during cmd=%s; "
                       "the job is being torn down or mpiexec died",
                       cmd);
}

static torx_status_t pmi_send(pmi_client_t *c, const char *line, const char *cmd)
{
    size_t len = strlen(line), off = 0;
    if (len >= PMI_WIRE_LINE)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: PMI cmd=%s line is %zu bytes, above the %d a PMI-1 server "
                           "accepts",
                           cmd, len, PMI_WIRE_LINE - 1);
    while (off < len) {
        /* MSG_NOSIGNAL: a dead mpiexec must give an error, not SIGPIPE. */
        ssize_t w = send(c->fd, line + off, len - off, MSG_NOSIGNAL);
        if (w < 0 && errno == ENOTSOCK)
            w = write(c->fd, line + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EPIPE || errno == ECONNRESET))
            return peer_closed(cmd);
        if (w < 0)
            return torxp_error(TORX_ERR_SYS, "torx: PMI cmd=%s: send on fd %d failed: %s", cmd,
                               c->fd, strerror(errno));
        off += (size_t)w;
    }
    return TORX_OK;
}

/* Reads one line (without its newline) into out. */
static torx_status_t pmi_recv(pmi_client_t *c, char *out, size_t outlen, const char *cmd)
{
    const double deadline = torxp_mono_s() + c->timeout_s;
    for (;;) {
        char *nl = memchr(c->rbuf, '\n', c->rlen);
        if (nl) {
            size_t n = (size_t)(nl - c->rbuf);
            if (n >= outlen)
                return torxp_error(TORX_ERR_PEER,
                                   "torx: the PMI server's answer to cmd=%s is %zu bytes, "
                                   "longer than the %zu expected",
                                   cmd, n, outlen - 1);
            memcpy(out, c->rbuf, n);
            out[n] = '\0';
            c->rlen -= n + 1;
            memmove(c->rbuf, nl + 1, c->rlen);
            return TORX_OK;
        }
        if (c->rlen == sizeof c->rbuf)
            return torxp_error(TORX_ERR_PEER,
                               "torx: the PMI server's answer to cmd=%s exceeds %zu bytes "
                               "without a newline",
                               cmd, sizeof c->rbuf);
        double left = deadline - torxp_mono_s();
        if (left <= 0)
            return torxp_error(TORX_ERR_PEER,
                               "torx: no answer from the PMI server to cmd=%s within %d s "
                               "(TORX_BOOT_TIMEOUT); another task may be stuck or dead before "
                               "reaching the bootstrap",
                               cmd, c->timeout_s);
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        int ms = left > 1.0 ? 1000 : (int)(left * 1000) + 1;
        int pr = poll(&pfd, 1, ms);
        if (pr < 0 && errno != EINTR)
            return torxp_error(TORX_ERR_SYS, "torx: PMI cmd=%s: poll on fd %d failed: %s", cmd,
                               c->fd, strerror(errno));
        if (pr <= 0)
            continue;
        ssize_t r = read(c->fd, c->rbuf + c->rlen, sizeof c->rbuf - c->rlen);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (r == 0 || (r < 0 && errno == ECONNRESET))
            return peer_closed(cmd);
        if (r < 0)
            return torxp_error(TORX_ERR_SYS, "torx: PMI cmd=%s: read on fd %d failed: %s", cmd,
                               c->fd, strerror(errno));
        c->rlen += (size_t)r;
    }
}

/* The value of key in a reply line "cmd=x k1=v1 k2=v2", or NULL. The value
 * is copied into val (truncated to vallen - 1). */
static const char *pmi_getval(const char *line, const char *key, char *val, size_t vallen)
{
    size_t klen = strlen(key);
    const char *p = line;
    while (*p) {
        while (*p == ' ')
            p++;
        const char *tok = p;
        while (*p && *p != ' ')
            p++;
        if ((size_t)(p - tok) > klen && strncmp(tok, key, klen) == 0 && tok[klen] == '=') {
            size_t n = (size_t)(p - tok) - klen - 1;
            if (n >= vallen)
                n = vallen - 1;
            memcpy(val, tok + klen + 1, n);
            val[n] = '\0';
            return val;
        }
    }
    return NULL;
}

/* Sends request (one line), reads the answer into reply and checks that it
 * is cmd=expect and, when check_rc, carries rc=0. */
static torx_status_t pmi_call(pmi_client_t *c, const char *request, const char *cmd,
                              const char *expect, int check_rc, char *reply, size_t replylen)
{
    torx_status_t rc = pmi_send(c, request, cmd);
    if (rc == TORX_OK)
        rc = pmi_recv(c, reply, replylen, cmd);
    if (rc != TORX_OK)
        return rc;
    char got[64];
    if (!pmi_getval(reply, "cmd", got, sizeof got) || strcmp(got, expect) != 0)
        return torxp_error(TORX_ERR_PEER,
                           "torx: the PMI server answered cmd=%s with '%.200s', expected "
                           "cmd=%s; is this a PMI-1 launcher (MPICH hydra mpiexec)?",
                           cmd, reply, expect);
    if (check_rc) {
        char rcs[32], msg[200];
        if (!pmi_getval(reply, "rc", rcs, sizeof rcs) || strcmp(rcs, "0") != 0) {
            if (!pmi_getval(reply, "msg", msg, sizeof msg))
                strcpy(msg, "none");
            return torxp_error(TORX_ERR_PEER,
                               "torx: PMI cmd=%s failed: the server answered rc=%s (msg=%s)", cmd,
                               pmi_getval(reply, "rc", rcs, sizeof rcs) ? rcs : "missing", msg);
        }
    }
    return TORX_OK;
}

/* A positive decimal field of a reply, strictly parsed. */
static torx_status_t reply_int(const char *reply, const char *key, const char *cmd, long lo,
                               long hi, long *out)
{
    char v[32];
    char *end;
    if (!pmi_getval(reply, key, v, sizeof v))
        return torxp_error(TORX_ERR_PEER,
                           "torx: the PMI server's answer to cmd=%s lacks %s: '%.200s'", cmd, key,
                           reply);
    errno = 0;
    long l = strtol(v, &end, 10);
    if (end == v || *end || errno || l < lo || l > hi)
        return torxp_error(TORX_ERR_PEER,
                           "torx: the PMI server's answer to cmd=%s has %s=%s, expected %ld..%ld",
                           cmd, key, v, lo, hi);
    *out = l;
    return TORX_OK;
}

/* ---- Bootstrap operations ------------------------------------------------ */

static torx_status_t pmi_barrier(torx_boot_t *boot)
{
    pmi_client_t *c = boot->impl;
    if (!c)
        return torxp_error(TORX_ERR_INVAL, "torx: PMI bootstrap barrier after finalize");
    if (c->fd < 0)
        return TORX_OK; /* singleton */
    char reply[256];
    return pmi_call(c, "cmd=barrier_in\n", "barrier_in", "barrier_out", 0, reply, sizeof reply);
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    return -1;
}

static int decimal_digits(unsigned long v)
{
    int d = 1;
    while (v >= 10) {
        v /= 10;
        d++;
    }
    return d;
}

/* Records travel as hex values, split into parts when a record is longer
 * than one value may be; each part is key "torx-ag<seq>-<rank>-<part>". */
static torx_status_t pmi_allgather(torx_boot_t *boot, const void *mine, void *all, size_t len)
{
    pmi_client_t *c = boot->impl;
    if (!c)
        return torxp_error(TORX_ERR_INVAL, "torx: PMI bootstrap allgather after finalize");
    if (len && (!mine || !all))
        return torxp_error(TORX_ERR_INVAL, "torx: PMI bootstrap allgather: mine=%p all=%p", mine,
                           all);
    if (c->fd < 0) {
        if (len)
            memmove(all, mine, len);
        return TORX_OK;
    }
    if (len == 0)
        return pmi_barrier(boot);

    const unsigned long seq = c->seq++;
    /* Longest key of this allgather, and the value chars one put line has
     * room for: within vallen_max (which counts the NUL) and within the
     * server's line limit. Even, so a byte's two hex digits stay together. */
    const size_t keylen = 7 + (size_t)decimal_digits(seq) + 1 +
                          (size_t)decimal_digits((unsigned long)boot->size) + 1 + 10;
    if (keylen >= (size_t)c->keylen_max)
        return torxp_error(TORX_ERR_PEER,
                           "torx: the PMI server allows keys of %d bytes, too short for the "
                           "bootstrap's %zu-byte keys",
                           c->keylen_max, keylen);
    const size_t fixed = strlen("cmd=put kvsname= key= value=\n") + strlen(c->job_id) + keylen;
    size_t chunk = (size_t)c->vallen_max - 1;
    if (chunk > PMI_WIRE_LINE - 1 - fixed)
        chunk = PMI_WIRE_LINE - 1 - fixed;
    chunk &= ~(size_t)1;
    if (chunk < 2)
        return torxp_error(TORX_ERR_PEER,
                           "torx: the PMI server allows values of %d bytes, too short for the "
                           "bootstrap",
                           c->vallen_max);
    const size_t hexlen = 2 * len;
    const size_t parts = (hexlen + chunk - 1) / chunk;
    static const char digits[] = "0123456789abcdef";
    char line[PMI_WIRE_LINE], reply[PMI_RECV_BUF], val[PMI_RECV_BUF], key[PMI_KEY_BOUND];
    torx_status_t rc;

    for (size_t p = 0; p < parts; p++) {
        size_t first = p * chunk / 2, nbytes = chunk / 2;
        if (first + nbytes > len)
            nbytes = len - first;
        snprintf(key, sizeof key, "torx-ag%lu-%d-%zu", seq, boot->rank, p);
        int off = snprintf(line, sizeof line, "cmd=put kvsname=%s key=%s value=", c->job_id, key);
        const unsigned char *src = (const unsigned char *)mine + first;
        for (size_t i = 0; i < nbytes; i++) {
            line[off++] = digits[src[i] >> 4];
            line[off++] = digits[src[i] & 15];
        }
        line[off++] = '\n';
        line[off] = '\0';
        if ((rc = pmi_call(c, line, "put", "put_result", 1, reply, sizeof reply)) != TORX_OK)
            return rc;
    }
    if ((rc = pmi_barrier(boot)) != TORX_OK)
        return rc;
    for (int r = 0; r < boot->size; r++) {
        for (size_t p = 0; p < parts; p++) {
            size_t first = p * chunk / 2, nbytes = chunk / 2;
            if (first + nbytes > len)
                nbytes = len - first;
            snprintf(key, sizeof key, "torx-ag%lu-%d-%zu", seq, r, p);
            snprintf(line, sizeof line, "cmd=get kvsname=%s key=%s\n", c->job_id, key);
            if ((rc = pmi_call(c, line, "get", "get_result", 1, reply, sizeof reply)) != TORX_OK)
                return rc;
            if (!pmi_getval(reply, "value", val, sizeof val))
                return torxp_error(TORX_ERR_PEER,
                                   "torx: the PMI server's answer to cmd=get key=%s has no "
                                   "value: '%.200s'",
                                   key, reply);
            if (strlen(val) != 2 * nbytes)
                return torxp_error(TORX_ERR_PROTO,
                                   "torx: PMI allgather: key %s holds %zu hex digits, this task "
                                   "expected %zu; did the tasks pass different record sizes "
                                   "(this one: len=%zu)?",
                                   key, strlen(val), 2 * nbytes, len);
            unsigned char *dst = (unsigned char *)all + (size_t)r * len + first;
            for (size_t i = 0; i < nbytes; i++) {
                int hi = hexval(val[2 * i]), lo = hexval(val[2 * i + 1]);
                if (hi < 0 || lo < 0)
                    return torxp_error(TORX_ERR_PEER,
                                       "torx: PMI allgather: key %s holds non-hex value "
                                       "'%.40s'",
                                       key, val);
                dst[i] = (unsigned char)(hi << 4 | lo);
            }
        }
    }
    return TORX_OK;
}

static void pmi_finalize(torx_boot_t *boot)
{
    pmi_client_t *c = boot->impl;
    if (!c)
        return;
    if (c->fd >= 0) {
        char reply[256];
        if (pmi_call(c, "cmd=finalize\n", "finalize", "finalize_ack", 0, reply, sizeof reply) !=
            TORX_OK) {
            /* finalize cannot fail the job; say why at verbose level 1. */
            const char *m = torx_last_error();
            torxp_log(NULL, 1, "PMI finalize: %s", strncmp(m, "torx: ", 6) ? m : m + 6);
        }
        close(c->fd);
    }
    free(c);
    boot->impl = NULL;
}

/* ---- Connection set-up --------------------------------------------------- */

/* Connects to PMI_PORT ("host:port", host may be "[v6addr]") within the
 * timeout. */
static torx_status_t connect_port(const char *spec, int timeout_s, int *fd_out)
{
    char host[256];
    const char *colon = strrchr(spec, ':');
    size_t hlen = colon ? (size_t)(colon - spec) : 0;
    const char *h = spec;
    if (hlen >= 2 && spec[0] == '[' && spec[hlen - 1] == ']') {
        h++;
        hlen -= 2;
    }
    long port = 0;
    char *end = NULL;
    if (colon) {
        errno = 0;
        port = strtol(colon + 1, &end, 10);
    }
    if (!colon || hlen == 0 || hlen >= sizeof host || end == colon + 1 || *end || errno ||
        port < 1 || port > 65535)
        return torxp_error(TORX_ERR_ENV,
                           "torx: PMI_PORT='%s' is not host:port (port 1..65535); it is set by "
                           "the launcher, unset it to run as a singleton",
                           spec);
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    char portstr[8];
    snprintf(portstr, sizeof portstr, "%ld", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int gai = getaddrinfo(host, portstr, &hints, &res);
    if (gai != 0)
        return torxp_error(TORX_ERR_ENV, "torx: PMI_PORT='%s': cannot resolve host '%s': %s", spec,
                           host, gai_strerror(gai));
    int err = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd =
            socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        /* Non-blocking connect, so an unreachable host costs the timeout at
         * most, not the kernel's minutes of SYN retries. */
        int cr = connect(fd, ai->ai_addr, ai->ai_addrlen);
        if (cr < 0 && errno == EINPROGRESS) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            int pr;
            do
                pr = poll(&pfd, 1, timeout_s * 1000);
            while (pr < 0 && errno == EINTR);
            socklen_t elen = sizeof err;
            if (pr == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err == 0)
                cr = 0;
            else if (pr == 0)
                err = ETIMEDOUT;
        } else if (cr < 0) {
            err = errno;
        }
        if (cr == 0 && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0) {
            freeaddrinfo(res);
            *fd_out = fd;
            return TORX_OK;
        }
        close(fd);
    }
    freeaddrinfo(res);
    return torxp_error(TORX_ERR_PEER, "torx: PMI_PORT='%s': cannot connect to the PMI server: %s",
                       spec, strerror(err ? err : ECONNREFUSED));
}

/* The PMI_PORT handshake of MPICH's simple PMI: the server learns which
 * process this is (PMI_ID) and answers with its size and rank. */
static torx_status_t port_handshake(pmi_client_t *c, long id, long *size, long *rank)
{
    char line[128], reply[512], cmd[32];
    snprintf(line, sizeof line, "cmd=initack pmiid=%ld\n", id);
    torx_status_t rc = pmi_call(c, line, "initack", "initack", 0, reply, sizeof reply);
    static const char *const keys[] = {"size", "rank", "debug"};
    static const long lows[] = {1, 0, 0};
    long vals[3];
    for (int i = 0; rc == TORX_OK && i < 3; i++) {
        rc = pmi_recv(c, reply, sizeof reply, "initack");
        if (rc != TORX_OK)
            break;
        if (!pmi_getval(reply, "cmd", cmd, sizeof cmd) || strcmp(cmd, "set") != 0)
            return torxp_error(TORX_ERR_PEER,
                               "torx: PMI_PORT handshake: expected 'cmd=set %s=...', got "
                               "'%.200s'",
                               keys[i], reply);
        rc = reply_int(reply, keys[i], "initack", lows[i], INT32_MAX, &vals[i]);
    }
    if (rc != TORX_OK)
        return rc;
    *size = vals[0];
    *rank = vals[1];
    if (*rank >= *size)
        return torxp_error(TORX_ERR_PEER,
                           "torx: PMI_PORT handshake gave rank %ld for a job of size %ld", *rank,
                           *size);
    return TORX_OK;
}

static torx_status_t singleton(torx_boot_t *boot, pmi_client_t *c)
{
    snprintf(c->job_id, sizeof c->job_id, "singleton-%d-%016llx", (int)getpid(),
             (unsigned long long)torxp_random64());
    c->fd = -1;
    boot->rank = 0;
    boot->size = 1;
    return TORX_OK;
}

static torx_status_t pmi_connect(torx_boot_t *boot, pmi_client_t *c)
{
    const char *fd_s = getenv("PMI_FD"), *port_s = getenv("PMI_PORT");
    const char *rank_s = getenv("PMI_RANK"), *size_s = getenv("PMI_SIZE");
    const char *id_s = getenv("PMI_ID");
    long size = 0, rank = 0, fd = -1, id = 0;
    torx_status_t rc;

    if (!fd_s && !port_s && !rank_s && !size_s)
        return singleton(boot, c);
    if (!fd_s && !port_s)
        return torxp_error(TORX_ERR_ENV,
                           "torx: %s is set but neither PMI_FD nor PMI_PORT is; start the "
                           "program with mpiexec, or unset PMI_RANK and PMI_SIZE to run it as "
                           "a singleton",
                           rank_s ? "PMI_RANK" : "PMI_SIZE");
    /* PMI_ID + PMI_PORT: the server tells size and rank in the handshake. */
    const int from_handshake = !fd_s && id_s;
    if (!from_handshake) {
        if (!size_s || !rank_s)
            return torxp_error(TORX_ERR_ENV,
                               "torx: %s is set but %s is not; start the program with mpiexec, "
                               "or unset the PMI_* variables to run it as a singleton",
                               fd_s ? "PMI_FD" : "PMI_PORT", !size_s ? "PMI_SIZE" : "PMI_RANK");
        if ((rc = pmi_env_int("PMI_SIZE", 1, INT32_MAX, &size)) != TORX_OK ||
            (rc = pmi_env_int("PMI_RANK", 0, size - 1, &rank)) != TORX_OK)
            return rc;
    }
    if (fd_s) {
        if ((rc = pmi_env_int("PMI_FD", 0, INT32_MAX, &fd)) != TORX_OK)
            return rc;
        if (fcntl((int)fd, F_GETFD) < 0)
            return torxp_error(TORX_ERR_ENV,
                               "torx: PMI_FD='%s' is not an open file descriptor (fcntl: %s); "
                               "start the program with mpiexec, or unset the PMI_* variables "
                               "to run it as a singleton",
                               fd_s, strerror(errno));
        /* Programs this task execs must not hold the job's PMI socket. */
        fcntl((int)fd, F_SETFD, FD_CLOEXEC);
        c->fd = (int)fd;
    } else {
        if (id_s && (rc = pmi_env_int("PMI_ID", 0, INT32_MAX, &id)) != TORX_OK)
            return rc;
        int sfd = -1;
        if ((rc = connect_port(port_s, c->timeout_s, &sfd)) != TORX_OK)
            return rc;
        c->fd = sfd;
        if (from_handshake && (rc = port_handshake(c, id, &size, &rank)) != TORX_OK)
            return rc;
    }
    boot->rank = (int)rank;
    boot->size = (int)size;

    char reply[PMI_RECV_BUF];
    long l;
    if ((rc = pmi_call(c, "cmd=init pmi_version=1 pmi_subversion=1\n", "init", "response_to_init",
                       1, reply, sizeof reply)) != TORX_OK)
        return rc;
    if ((rc = pmi_call(c, "cmd=get_maxes\n", "get_maxes", "maxes", 0, reply, sizeof reply)) !=
        TORX_OK)
        return rc;
    if ((rc = reply_int(reply, "keylen_max", "get_maxes", 1, 1 << 20, &l)) != TORX_OK)
        return rc;
    c->keylen_max = (int)l;
    if ((rc = reply_int(reply, "vallen_max", "get_maxes", 1, 1 << 20, &l)) != TORX_OK)
        return rc;
    c->vallen_max = (int)l;
    if ((rc = pmi_call(c, "cmd=get_my_kvsname\n", "get_my_kvsname", "my_kvsname", 0, reply,
                       sizeof reply)) != TORX_OK)
        return rc;
    char kvs[PMI_RECV_BUF];
    if (!pmi_getval(reply, "kvsname", kvs, sizeof kvs) || !kvs[0] ||
        strlen(kvs) >= sizeof c->job_id)
        return torxp_error(TORX_ERR_PEER,
                           "torx: the PMI server's answer to cmd=get_my_kvsname has no usable "
                           "kvsname (at most %d characters): '%.200s'",
                           PMI_KVSNAME_MAX, reply);
    strcpy(c->job_id, kvs);
    return TORX_OK;
}

torx_status_t torx_boot_pmi_init(torx_boot_t *boot)
{
    if (!boot)
        return torxp_error(TORX_ERR_INVAL, "torx: torx_boot_pmi_init: boot is NULL");
#ifdef TORX_HAVE_SIMGRID
    if (torxp_sim_running()) /* a task of a simulated job (torx-sim) */
        return torxp_sim_boot_init(boot);
#endif
    long timeout;
    torx_status_t rc = torx_env_int("TORX_BOOT_TIMEOUT", 1, 86400, PMI_TIMEOUT_DEF, &timeout);
    if (rc != TORX_OK)
        return rc;
    pmi_client_t *c = torxp_calloc(1, sizeof *c);
    if (!c)
        return torxp_error(TORX_ERR_NOMEM, "torx: torx_boot_pmi_init: out of memory");
    c->fd = -1;
    c->timeout_s = (int)timeout;
    torx_boot_t b = {0};
    rc = pmi_connect(&b, c);
    if (rc != TORX_OK) {
        /* An inherited PMI_FD is not ours to close; a PMI_PORT socket is. */
        if (c->fd >= 0 && !getenv("PMI_FD"))
            close(c->fd);
        free(c);
        return rc;
    }
    *boot = (torx_boot_t){
        .rank = b.rank,
        .size = b.size,
        .allgather = pmi_allgather,
        .barrier = pmi_barrier,
        .finalize = pmi_finalize,
        .impl = c,
    };
    return TORX_OK;
}
