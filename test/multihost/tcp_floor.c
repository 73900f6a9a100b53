/* tcp_floor: the floor of the network between two emulated hosts
 * (test/multihost/hosts.sh): a plain TCP ping-pong and stream over one
 * connection (TCP_NODELAY, busy-polling nonblocking send and recv), what
 * any MPI over TCP pays at least.
 *
 *   tcp_floor serve PORT                 on one host; serves one client
 *   tcp_floor run HOST PORT LAT_SIZES ITERS BW_SIZES
 *                          on the other: for each of LAT_SIZES (bytes, K/M
 *                          suffixes, comma-separated), a ping-pong of about
 *                          ITERS round trips (fewer above 64 KiB); then for
 *                          each of BW_SIZES a stream of 64 MiB (at most
 *                          100000 messages) acknowledged by 1 byte
 *
 * TCP_FLOOR_BLOCK=1: blocking calls instead of busy-polling (for
 * comparison: on these VMs each wake-up of an idle vCPU costs hundreds of
 * microseconds: 8 B half round trip 166-254 us blocking, 4.4-4.8 us
 * polling, best of 10 batches).
 *
 * Output, one line per size and kind:
 *   tcplat SIZE ITERS BATCHES min_ns med_ns      (half round trip)
 *   tcpbw SIZE BYTES MBps                        (10^6 B/s)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCHES 10
#define STREAM_BYTES (64L << 20)

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int spin = MSG_DONTWAIT; /* 0 with TCP_FLOOR_BLOCK=1: blocking calls */

static void full_io(int fd, void *buf, size_t n, int wr)
{
    char *p = buf;
    while (n > 0) {
        /* Busy-polling, as the MPIs do: a blocking read that sleeps pays
         * the wake-up of an idle vCPU (hundreds of us on these VMs). */
        ssize_t r = wr ? send(fd, p, n, spin | MSG_NOSIGNAL) : recv(fd, p, n, spin);
        if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (r <= 0) {
            fprintf(stderr, "tcp_floor: %s: %s\n", wr ? "write" : "read",
                    r == 0 ? "connection closed" : strerror(errno));
            exit(1);
        }
        p += r;
        n -= (size_t)r;
    }
}

static void nodelay(int fd)
{
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0)
        die("TCP_NODELAY");
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

struct hdr {
    uint32_t kind; /* 1 ping-pong, 2 stream, 0 end */
    uint32_t size;
    uint64_t count;
};

static int serve(int port)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (ls < 0)
        die("socket");
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 1) < 0)
        die("bind/listen");
    int fd = accept(ls, NULL, NULL);
    if (fd < 0)
        die("accept");
    nodelay(fd);
    char *buf = NULL;
    for (;;) {
        struct hdr h;
        full_io(fd, &h, sizeof h, 0);
        if (h.kind == 0)
            break;
        buf = realloc(buf, h.size ? h.size : 1);
        if (!buf)
            die("realloc");
        if (h.kind == 1) {
            for (uint64_t i = 0; i < h.count; i++) {
                full_io(fd, buf, h.size, 0);
                full_io(fd, buf, h.size, 1);
            }
        } else {
            for (uint64_t i = 0; i < h.count; i++)
                full_io(fd, buf, h.size, 0);
            full_io(fd, buf, 1, 1);
        }
    }
    free(buf);
    close(fd);
    close(ls);
    return 0;
}

static long parse_size(const char *s)
{
    char *end;
    long size = strtol(s, &end, 10);
    if (*end == 'K')
        size <<= 10;
    else if (*end == 'M')
        size <<= 20;
    return size;
}

static int run(const char *host, int port, char *sizes, long iters, char *bw_sizes)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
        fprintf(stderr, "tcp_floor: '%s' is not an IPv4 address\n", host);
        return 2;
    }
    int fd = -1;
    for (int t = 0; t < 100; t++) { /* the server may not listen yet */
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
            break;
        close(fd);
        fd = -1;
        usleep(50000);
    }
    if (fd < 0)
        die("connect");
    nodelay(fd);
    char *save;
    for (char *s = strtok_r(sizes, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
        long size = parse_size(s);
        char *buf = calloc(1, (size_t)(size ? size : 1));
        if (!buf)
            die("calloc");
        long per = iters / BATCHES > 0 ? iters / BATCHES : 1;
        if (size > 65536) /* fewer round trips for large sizes */
            per = per * 65536 / size > 0 ? per * 65536 / size : 1;
        struct hdr h = {1, (uint32_t)size, (uint64_t)(per * (BATCHES + 1))};
        full_io(fd, &h, sizeof h, 1);
        double ns[BATCHES];
        for (int b = -1; b < BATCHES; b++) { /* b == -1: warm-up */
            double t0 = now_ns();
            for (long i = 0; i < per; i++) {
                full_io(fd, buf, (size_t)size, 1);
                full_io(fd, buf, (size_t)size, 0);
            }
            if (b >= 0)
                ns[b] = (now_ns() - t0) / (2.0 * (double)per);
        }
        qsort(ns, BATCHES, sizeof ns[0], cmp_d);
        printf("tcplat %ld %ld %d %.1f %.1f\n", size, per * BATCHES, BATCHES, ns[0],
               (ns[BATCHES / 2 - 1] + ns[BATCHES / 2]) / 2);
        fflush(stdout);
        free(buf);
    }
    for (char *s = strtok_r(bw_sizes, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
        long size = parse_size(s);
        if (size <= 0)
            continue;
        char *buf = calloc(1, (size_t)size);
        if (!buf)
            die("calloc");
        long n = STREAM_BYTES / size > 0 ? STREAM_BYTES / size : 1;
        if (n > 100000)
            n = 100000;
        struct hdr hs = {2, (uint32_t)size, (uint64_t)n};
        full_io(fd, &hs, sizeof hs, 1);
        double t0 = now_ns();
        for (long i = 0; i < n; i++)
            full_io(fd, buf, (size_t)size, 1);
        full_io(fd, buf, 1, 0);
        double t = now_ns() - t0;
        printf("tcpbw %ld %ld %.2f\n", size, n * size, (double)(n * size) / t * 1e3);
        fflush(stdout);
        free(buf);
    }
    struct hdr e = {0, 0, 0};
    full_io(fd, &e, sizeof e, 1);
    close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    const char *blk = getenv("TCP_FLOOR_BLOCK");
    if (blk && strcmp(blk, "1") == 0)
        spin = 0;
    if (argc == 3 && strcmp(argv[1], "serve") == 0)
        return serve(atoi(argv[2]));
    if (argc == 7 && strcmp(argv[1], "run") == 0)
        return run(argv[2], atoi(argv[3]), argv[4], atol(argv[5]), argv[6]);
    fprintf(stderr, "usage: tcp_floor serve PORT | tcp_floor run HOST PORT LAT_SIZES ITERS BW_SIZES\n");
    return 2;
}
