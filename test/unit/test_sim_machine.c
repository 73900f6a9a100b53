/* Unit tests of the sim device's machine-file reader
 * (src/packet/sim/sim_machine.c, docs/sim.md#machine-files): the shipped
 * bgl and bgp files give the published figures in SI units; a NAME is found
 * along TORX_SIM_MACHINE_PATH, first entry first, and a path is read as
 * given; and every class of bad file is refused with a message naming the
 * file, the line and the key, leaving the machine zeroed.
 *
 * The shipped files: $TORX_SRCDIR/src/packet/sim/machines (make check
 * exports TORX_SRCDIR), else that directory found from __FILE__. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "config.h" /* TORX_MACHINE_DIR */
#include "packet/sim/sim_machine.h"

#include <torx/packet.h>

#include <check.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const char *machines_dir(void)
{
    static char dir[PATH_MAX];
    const char *env = getenv("TORX_SRCDIR");
    if (env && *env) {
        snprintf(dir, sizeof dir, "%s/src/packet/sim/machines", env);
    } else {
        char file[PATH_MAX];
        snprintf(file, sizeof file, "%s", __FILE__);
        snprintf(dir, sizeof dir, "%s/../../src/packet/sim/machines", dirname(file));
    }
    return dir;
}

/* TORX_SIM_MACHINE_PATH: the shipped files only. */
static void use_shipped(void)
{
    ck_assert_int_eq(setenv("TORX_SIM_MACHINE_PATH", machines_dir(), 1), 0);
}

static void assert_eq_d(double got, double want, const char *what)
{
    ck_assert_msg(got == want, "%s: %.17g, expected %.17g", what, got, want);
}

/* A refused machine is all zero. */
static void assert_zeroed(const torxp_sim_machine_t *m)
{
    ck_assert_str_eq(m->name, "");
    ck_assert_str_eq(m->path, "");
    ck_assert_uint_eq(m->cores_per_node, 0);
    ck_assert_uint_eq(m->packet_bytes, 0);
    ck_assert(m->clock == 0 && m->link_bandwidth == 0 && m->cpu_match == 0);
    ck_assert_int_eq(m->bulk, TORXP_SIM_BULK_NONE);
}

/* rc is want, m is zeroed and the message starts "torx: " and holds every
 * NULL-terminated fragment. */
static void expect_error(torx_status_t rc, torx_status_t want, const torxp_sim_machine_t *m, ...)
{
    const char *msg = torx_last_error();
    ck_assert_msg(rc == want, "status %s, expected %s (message '%s')", torx_status_str(rc),
                  torx_status_str(want), msg);
    ck_assert_msg(strncmp(msg, "torx: ", 6) == 0, "message '%s' does not start with 'torx: '", msg);
    va_list ap;
    va_start(ap, m);
    for (const char *frag; (frag = va_arg(ap, const char *));)
        ck_assert_msg(strstr(msg, frag) != NULL, "message '%s' does not contain '%s'", msg, frag);
    va_end(ap);
    assert_zeroed(m);
}

/* ---- The shipped files ------------------------------------------------- */

START_TEST(shipped_bgl)
{
    use_shipped();
    torxp_sim_machine_t m;
    ck_assert_msg(torxp_sim_machine_load("bgl", &m) == TORX_OK, "%s", torx_last_error());
    ck_assert_str_eq(m.name, "bgl");
    ck_assert_msg(strstr(m.path, "/machines/bgl") != NULL, "path %s", m.path);
    ck_assert_uint_eq(m.cores_per_node, 2);
    assert_eq_d(m.clock, 700e6, "clock");
    assert_eq_d(m.link_bandwidth, 175e6, "link_bandwidth");
    assert_eq_d(m.hop_latency, 90e-9, "hop_latency");
    ck_assert_uint_eq(m.packet_bytes, 256);
    ck_assert_uint_eq(m.packet_chunk, 32);
    ck_assert_uint_eq(m.packet_header, TORX_PKT_HDR_BYTES);
    ck_assert_uint_eq(m.link_overhead, 14);
    ck_assert_uint_eq(m.injection_fifo_packets, 8);
    ck_assert_uint_eq(m.reception_fifo_packets, 128);
    ck_assert_int_eq(m.bulk, TORXP_SIM_BULK_NONE);
    assert_eq_d(m.dma_bandwidth, 0, "dma_bandwidth");
    assert_eq_d(m.dma_local_bandwidth, 0, "dma_local_bandwidth");
    assert_eq_d(m.dma_startup, 0, "dma_startup");
    assert_eq_d(m.cn_bandwidth, 350e6, "cn_bandwidth");
    assert_eq_d(m.cn_hop_latency, 100e-9, "cn_hop_latency");
    ck_assert_uint_eq(m.cn_fanout, 2);
    assert_eq_d(m.gi_latency, 1.5e-6, "gi_latency");
    assert_eq_d(m.cpu_inject_packet, 643, "cpu_inject_packet");
    assert_eq_d(m.cpu_receive_packet, 643, "cpu_receive_packet");
    assert_eq_d(m.cpu_poll_empty, 40, "cpu_poll_empty");
    assert_eq_d(m.cpu_match, 643, "cpu_match");
    assert_eq_d(m.cpu_copy_byte, 0.5, "cpu_copy_byte");
    assert_eq_d(m.cpu_cn_packet, 643, "cpu_cn_packet");
    assert_eq_d(m.cpu_bulk_start, 0, "cpu_bulk_start");

    /* The helpers: 700 cycles are 1 us; 240 of 270 wire bytes are data. */
    assert_eq_d(torxp_sim_cycles_s(&m, 700), 1e-6, "700 cycles");
    assert_eq_d(torxp_sim_cycles_s(&m, 0), 0, "0 cycles");
    ck_assert_uint_eq(torxp_sim_wire_bytes(&m, TORX_PKT_MAX_PAYLOAD), 270);
    ck_assert_uint_eq(torxp_sim_wire_bytes(&m, 0), 32 + 14);
    ck_assert_uint_eq(torxp_sim_wire_bytes(&m, 16), 32 + 14);
    ck_assert_uint_eq(torxp_sim_wire_bytes(&m, 17), 64 + 14);
    for (unsigned len = 0; len <= TORX_PKT_MAX_PAYLOAD; len++)
        ck_assert_uint_eq(torxp_sim_wire_bytes(&m, len),
                          torx_pkt_chunks_for(len) * TORX_PKT_CHUNK + m.link_overhead);
}
END_TEST

START_TEST(shipped_bgp)
{
    use_shipped();
    torxp_sim_machine_t m;
    ck_assert_msg(torxp_sim_machine_load("bgp", &m) == TORX_OK, "%s", torx_last_error());
    ck_assert_str_eq(m.name, "bgp");
    ck_assert_uint_eq(m.cores_per_node, 4);
    assert_eq_d(m.clock, 850e6, "clock");
    assert_eq_d(m.link_bandwidth, 425e6, "link_bandwidth");
    assert_eq_d(m.hop_latency, 74e-9, "hop_latency");
    ck_assert_uint_eq(m.packet_bytes, 256);
    ck_assert_uint_eq(m.packet_chunk, 32);
    ck_assert_uint_eq(m.packet_header, 16);
    ck_assert_uint_eq(m.link_overhead, 14);
    ck_assert_int_eq(m.bulk, TORXP_SIM_BULK_DMA);
    assert_eq_d(m.dma_bandwidth, 2250e6, "dma_bandwidth"); /* 18,000 Mb/s */
    assert_eq_d(m.dma_bandwidth * 8, 18000e6, "dma_bandwidth in bits");
    assert_eq_d(m.dma_local_bandwidth, 6 * m.link_bandwidth, "dma_local_bandwidth");
    assert_eq_d(m.dma_startup, 200e-9, "dma_startup");
    assert_eq_d(m.cn_bandwidth, 850e6, "cn_bandwidth"); /* 5.1 GB/s over 3 links x 2 ways */
    ck_assert(fabs(m.cn_bandwidth * 3 * 2 - 5.1e9) < 1);
    assert_eq_d(m.cn_hop_latency, 82e-9, "cn_hop_latency");
    ck_assert_uint_eq(m.cn_fanout, 2);
    assert_eq_d(m.gi_latency, 1.3e-6, "gi_latency");
    assert_eq_d(m.cpu_bulk_start, 643, "cpu_bulk_start");
    assert_eq_d(torxp_sim_cycles_s(&m, 850), 1e-6, "850 cycles");
    ck_assert_uint_eq(torxp_sim_wire_bytes(&m, TORX_PKT_MAX_PAYLOAD), 270);
}
END_TEST

/* ---- Finding the file ---------------------------------------------------- */

static char tmpdir[PATH_MAX];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "%s/torx-machine-XXXXXX", P_tmpdir);
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void write_file(const char *dir, const char *name, const void *data, size_t len)
{
    char path[2 * PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

static void remove_tmpdir(void)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/* A whole valid machine, one key per line; line i + 1 is base[i]. */
static const char *const base[] = {
    "name test",                     /* 1 */
    "cores_per_node 2",              /* 2 */
    "clock 700 MHz",                 /* 3 */
    "link_bandwidth 175 MB/s",       /* 4 */
    "hop_latency 90 ns",             /* 5 */
    "packet_bytes 256 B",            /* 6 */
    "packet_chunk 32 B",             /* 7 */
    "packet_header 16 B",            /* 8 */
    "link_overhead 14 B",            /* 9 */
    "injection_fifo_packets 8",      /* 10 */
    "reception_fifo_packets 128",    /* 11 */
    "bulk none",                     /* 12 */
    "cn_bandwidth 350 MB/s",         /* 13 */
    "cn_hop_latency 100 ns",         /* 14 */
    "cn_fanout 2",                   /* 15 */
    "gi_latency 1.5 us",             /* 16 */
    "cpu_inject_packet 300 cycles",  /* 17 */
    "cpu_receive_packet 400 cycles", /* 18 */
    "cpu_poll_empty 40 cycles",      /* 19 */
    "cpu_match 600 cycles",          /* 20 */
    "cpu_copy_byte 0.5 cycles",      /* 21 */
    "cpu_cn_packet 300 cycles",      /* 22 */
};

/* The base text with the line of key replaced by line (NULL: dropped, so
 * the later lines move up one), or, when no line has that key, line added
 * as line 23. */
static const char *text_with(const char *key, const char *line)
{
    static char text[16384];
    size_t used = 0, klen = key ? strlen(key) : 0;
    int replaced = 0;
    text[0] = '\0';
    for (int i = 0; i < N_OF(base); i++) {
        const char *l = base[i];
        if (key && strncmp(l, key, klen) == 0 && l[klen] == ' ') {
            replaced = 1;
            if (!line)
                continue;
            l = line;
        }
        used += (size_t)snprintf(text + used, sizeof text - used, "%s\n", l);
    }
    if (!replaced && line)
        snprintf(text + used, sizeof text - used, "%s\n", line);
    return text;
}

static torx_status_t parse_with(const char *key, const char *line, torxp_sim_machine_t *m)
{
    return torxp_sim_machine_parse(text_with(key, line), "t.machine", m);
}

START_TEST(lookup_path_order)
{
    torxp_sim_machine_t m;
    make_tmpdir();
    /* an override of bgl in a directory before the shipped ones */
    char override[4096];
    snprintf(override, sizeof override, "%s", text_with("name", "name my-bgl"));
    write_file(tmpdir, "bgl", override, strlen(override));
    char search[3 * PATH_MAX];
    snprintf(search, sizeof search, "/nonexistent/torx::%s/:%s", tmpdir, machines_dir());
    ck_assert_int_eq(setenv("TORX_SIM_MACHINE_PATH", search, 1), 0);
    ck_assert_msg(torxp_sim_machine_load("bgl", &m) == TORX_OK, "%s", torx_last_error());
    ck_assert_str_eq(m.name, "my-bgl");
    char want[PATH_MAX + 8];
    snprintf(want, sizeof want, "%s/bgl", tmpdir); /* the trailing '/' of the entry dropped */
    ck_assert_str_eq(m.path, want);
    /* bgp only in the last entry */
    ck_assert_msg(torxp_sim_machine_load("bgp", &m) == TORX_OK, "%s", torx_last_error());
    ck_assert_str_eq(m.name, "bgp");

    /* a path is read as given, whatever the search path */
    snprintf(want, sizeof want, "%s/bgp", machines_dir());
    ck_assert_int_eq(setenv("TORX_SIM_MACHINE_PATH", "/nonexistent", 1), 0);
    ck_assert_msg(torxp_sim_machine_load(want, &m) == TORX_OK, "%s", torx_last_error());
    ck_assert_str_eq(m.name, "bgp");
    ck_assert_str_eq(m.path, want);
    remove_tmpdir();
}
END_TEST

START_TEST(lookup_failures)
{
    torxp_sim_machine_t m;
    use_shipped();
    expect_error(torxp_sim_machine_load("bgq", &m), TORX_ERR_ENV, &m, "torx: machine bgq not found",
                 "TORX_SIM_MACHINE_PATH (", machines_dir(), TORX_MACHINE_DIR, NULL);
    ck_assert_int_eq(unsetenv("TORX_SIM_MACHINE_PATH"), 0);
    expect_error(torxp_sim_machine_load("bgq", &m), TORX_ERR_ENV, &m,
                 "TORX_SIM_MACHINE_PATH (unset)", TORX_MACHINE_DIR, NULL);
    expect_error(torxp_sim_machine_load("", &m), TORX_ERR_ENV, &m, "no machine given", NULL);
    expect_error(torxp_sim_machine_load(NULL, &m), TORX_ERR_ENV, &m, "no machine given", NULL);
    expect_error(torxp_sim_machine_load("b g l", &m), TORX_ERR_ENV, &m,
                 "\"b g l\" is neither a machine name", NULL);
    expect_error(torxp_sim_machine_load("..", &m), TORX_ERR_ENV, &m, "neither a machine name",
                 NULL);
    expect_error(torxp_sim_machine_load("/nonexistent/bgl", &m), TORX_ERR_ENV, &m,
                 "machine file /nonexistent/bgl: cannot open: No such file or directory", NULL);
    ck_assert_int_eq(torxp_sim_machine_load("bgl", NULL), TORX_ERR_INVAL);

    make_tmpdir();
    char path[PATH_MAX + 16];
    /* a directory where the file should be */
    snprintf(path, sizeof path, "%s/bgl", tmpdir);
    ck_assert_int_eq(mkdir(path, 0700), 0);
    ck_assert_int_eq(setenv("TORX_SIM_MACHINE_PATH", tmpdir, 1), 0);
    expect_error(torxp_sim_machine_load("bgl", &m), TORX_ERR_ENV, &m, path, "cannot read", NULL);
    /* a NUL byte: not text */
    static const char nul[] = "name test\nclock 7\0000 MHz\n";
    write_file(tmpdir, "nul", nul, sizeof nul - 1);
    snprintf(path, sizeof path, "%s/nul", tmpdir);
    expect_error(torxp_sim_machine_load(path, &m), TORX_ERR_INVAL, &m,
                 "/nul:2: clock: byte 0x00 in column 8", NULL);
    /* too large */
    static char big[TORXP_SIM_FILE_MAX + 2];
    memset(big, '\n', sizeof big);
    write_file(tmpdir, "big", big, sizeof big);
    expect_error(torxp_sim_machine_load("big", &m), TORX_ERR_INVAL, &m, "/big: larger than 65536",
                 NULL);
    /* exactly the largest size: read, and refused only for its (lack of) keys */
    write_file(tmpdir, "big", big, TORXP_SIM_FILE_MAX);
    expect_error(torxp_sim_machine_load("big", &m), TORX_ERR_INVAL, &m, "/big: no keys", NULL);
    remove_tmpdir();
}
END_TEST

/* ---- The format ------------------------------------------------------------ */

START_TEST(format_accepts)
{
    torxp_sim_machine_t m;
    ck_assert_msg(parse_with(NULL, NULL, &m) == TORX_OK, "%s", torx_last_error());
    ck_assert_str_eq(m.path, "t.machine");
    ck_assert_str_eq(m.name, "test");

    /* units scale exactly, whatever the spelling of the value */
    static const struct {
        const char *key, *line;
        double want;
        size_t offset;
    } same[] = {
        {"hop_latency", "hop_latency 0.09 us", 90e-9, offsetof(torxp_sim_machine_t, hop_latency)},
        {"hop_latency", "hop_latency 0.00000009 s", 90e-9,
         offsetof(torxp_sim_machine_t, hop_latency)},
        {"hop_latency", "hop_latency 0 ns", 0, offsetof(torxp_sim_machine_t, hop_latency)},
        {"clock", "clock 0.7 GHz", 700e6, offsetof(torxp_sim_machine_t, clock)},
        {"clock", "clock 700000 kHz", 700e6, offsetof(torxp_sim_machine_t, clock)},
        {"clock", "clock 700000000 Hz", 700e6, offsetof(torxp_sim_machine_t, clock)},
        {"link_bandwidth", "link_bandwidth 0.175 GB/s", 175e6,
         offsetof(torxp_sim_machine_t, link_bandwidth)},
        {"link_bandwidth", "link_bandwidth 175000 kB/s", 175e6,
         offsetof(torxp_sim_machine_t, link_bandwidth)},
        {"link_bandwidth", "link_bandwidth 0175.000 MB/s", 175e6,
         offsetof(torxp_sim_machine_t, link_bandwidth)},
        {"gi_latency", "gi_latency 1500 ns", 1.5e-6, offsetof(torxp_sim_machine_t, gi_latency)},
        {"gi_latency", "gi_latency 0.0015 ms", 1.5e-6, offsetof(torxp_sim_machine_t, gi_latency)},
        {"cpu_copy_byte", "cpu_copy_byte 0.25 cycles", 0.25,
         offsetof(torxp_sim_machine_t, cpu_copy_byte)},
        {"cpu_match", "cpu_match 1000000000 cycles", 1e9, offsetof(torxp_sim_machine_t, cpu_match)},
    };
    for (int i = 0; i < N_OF(same); i++) {
        ck_assert_msg(parse_with(same[i].key, same[i].line, &m) == TORX_OK, "%s: %s", same[i].line,
                      torx_last_error());
        const double got = *(const double *)((const char *)&m + same[i].offset);
        ck_assert_msg(got == same[i].want, "%s: %.17g, expected %.17g", same[i].line, got,
                      same[i].want);
    }

    /* whole counts may be written with a zero fraction; the ends of ranges */
    ck_assert(parse_with("cores_per_node", "cores_per_node 4.0", &m) == TORX_OK);
    ck_assert_uint_eq(m.cores_per_node, 4);
    ck_assert(parse_with("cores_per_node", "cores_per_node 64", &m) == TORX_OK);
    ck_assert(parse_with("injection_fifo_packets", "injection_fifo_packets 1024", &m) == TORX_OK);
    ck_assert(parse_with("injection_fifo_packets", "injection_fifo_packets 1", &m) == TORX_OK);

    /* blanks, tabs, comments after a value, CRLF, no final newline, any order */
    ck_assert_msg(parse_with("clock", "\t clock\t700   MHz  # the core clock ", &m) == TORX_OK,
                  "%s", torx_last_error());
    ck_assert_msg(parse_with("cn_fanout", "cn_fanout 2#two", &m) != TORX_OK, "'2#two' is a token");
    char crlf[8192], *p = crlf;
    for (int i = N_OF(base) - 1; i >= 0; i--)
        p += sprintf(p, "# comment %d\r\n\r\n%s%s", i, base[i], i ? "\r\n" : "");
    ck_assert_msg(torxp_sim_machine_parse(crlf, "crlf", &m) == TORX_OK, "%s", torx_last_error());
    assert_eq_d(m.gi_latency, 1.5e-6, "gi_latency");

    /* a line of exactly TORXP_SIM_LINE_MAX characters (and its CR) is fine */
    char line[TORXP_SIM_LINE_MAX + 8];
    snprintf(line, sizeof line, "%-*s#\r", TORXP_SIM_LINE_MAX - 1, "name test");
    ck_assert_uint_eq(strlen(line), TORXP_SIM_LINE_MAX + 1);
    ck_assert_msg(parse_with("name", line, &m) == TORX_OK, "%s", torx_last_error());

    /* bulk dma with its keys */
    char dma[8192];
    snprintf(dma, sizeof dma, "%s",
             text_with("bulk", "bulk dma\ndma_bandwidth 2250 MB/s\ndma_local_bandwidth 2.55 GB/s\n"
                               "dma_startup 200 ns\ncpu_bulk_start 400 cycles"));
    ck_assert_msg(torxp_sim_machine_parse(dma, "dma", &m) == TORX_OK, "%s", torx_last_error());
    ck_assert_int_eq(m.bulk, TORXP_SIM_BULK_DMA);
    assert_eq_d(m.dma_local_bandwidth, 2550e6, "dma_local_bandwidth");
    assert_eq_d(m.dma_startup, 200e-9, "dma_startup");
    assert_eq_d(m.cpu_bulk_start, 400, "cpu_bulk_start");
}
END_TEST

START_TEST(refuses_unknown_duplicate_missing)
{
    torxp_sim_machine_t m;
    expect_error(parse_with("link_bandwidth", "link_bandwith 175 MB/s", &m), TORX_ERR_INVAL, &m,
                 "torx: machine file t.machine:4: \"link_bandwith\" is not a machine-file key",
                 "did you mean link_bandwidth?", NULL);
    expect_error(parse_with("clock", "CLOCK 700 MHz", &m), TORX_ERR_INVAL, &m,
                 "t.machine:3: \"CLOCK\"", "did you mean clock?", NULL);
    expect_error(parse_with(NULL, "colour blue", &m), TORX_ERR_INVAL, &m,
                 "t.machine:23: \"colour\" is not a machine-file key (docs/sim.md", NULL);
    expect_error(parse_with(NULL, "clock 800 MHz", &m), TORX_ERR_INVAL, &m,
                 "t.machine:23: clock: given twice (first on line 3)", NULL);
    expect_error(parse_with("cpu_match", NULL, &m), TORX_ERR_INVAL, &m,
                 "torx: machine file t.machine: missing key cpu_match (every key is required",
                 NULL);
    expect_error(parse_with("clock", NULL, &m), TORX_ERR_INVAL, &m, "t.machine: missing key clock ",
                 NULL);
    expect_error(torxp_sim_machine_parse("name x\n", "few", &m), TORX_ERR_INVAL, &m,
                 "few: missing keys cores_per_node, clock, link_bandwidth", "cpu_cn_packet", NULL);
    expect_error(torxp_sim_machine_parse("", "empty", &m), TORX_ERR_INVAL, &m,
                 "machine file empty: no keys (the file is empty or all comments)", NULL);
    expect_error(torxp_sim_machine_parse("# only\n\n  # comments\n", "c", &m), TORX_ERR_INVAL, &m,
                 "machine file c: no keys", NULL);
    ck_assert_int_eq(torxp_sim_machine_parse(NULL, "x", &m), TORX_ERR_INVAL);
    ck_assert_int_eq(torxp_sim_machine_parse("", NULL, &m), TORX_ERR_INVAL);
    ck_assert_int_eq(torxp_sim_machine_parse("", "x", NULL), TORX_ERR_INVAL);
}
END_TEST

/* One bad line: its key (the line is put in that key's place) and the
 * fragments its message must hold (the file, line and key always). */
typedef struct {
    const char *key, *line, *frag;
} bad_line_t;

static void check_bad_lines(const bad_line_t *bad, int n)
{
    torxp_sim_machine_t m;
    for (int i = 0; i < n; i++) {
        int line = 23;
        for (int j = 0; j < N_OF(base); j++)
            if (!strncmp(base[j], bad[i].key, strlen(bad[i].key)) &&
                base[j][strlen(bad[i].key)] == ' ')
                line = j + 1;
        char where[128];
        snprintf(where, sizeof where, "torx: machine file t.machine:%d: %s: ", line, bad[i].key);
        const torx_status_t rc = parse_with(bad[i].key, bad[i].line, &m);
        ck_assert_msg(rc == TORX_ERR_INVAL, "'%s' accepted", bad[i].line);
        const char *msg = torx_last_error();
        ck_assert_msg(strstr(msg, where) == msg, "'%s': message '%s' does not start '%s'",
                      bad[i].line, msg, where);
        ck_assert_msg(strstr(msg, bad[i].frag), "'%s': message '%s' does not contain '%s'",
                      bad[i].line, msg, bad[i].frag);
        assert_zeroed(&m);
    }
}

START_TEST(refuses_bad_values)
{
    static const bad_line_t bad[] = {
        /* not numbers */
        {"link_bandwidth", "link_bandwidth 17x MB/s", "\"17x\" is not a number"},
        {"link_bandwidth", "link_bandwidth 17x", "\"17x\" is not a number"},
        {"link_bandwidth", "link_bandwidth 1e6 B/s", "\"1e6\" is not a number"},
        {"link_bandwidth", "link_bandwidth -175 MB/s", "\"-175\" is not a number"},
        {"link_bandwidth", "link_bandwidth +175 MB/s", "\"+175\" is not a number"},
        {"link_bandwidth", "link_bandwidth 0x10 MB/s", "\"0x10\" is not a number"},
        {"link_bandwidth", "link_bandwidth .5 GB/s", "\".5\" is not a number"},
        {"link_bandwidth", "link_bandwidth 5. GB/s", "\"5.\" is not a number"},
        {"link_bandwidth", "link_bandwidth 1.2.3 GB/s", "\"1.2.3\" is not a number"},
        {"link_bandwidth", "link_bandwidth 1,000 MB/s", "\"1,000\" is not a number"},
        {"link_bandwidth", "link_bandwidth inf MB/s", "\"inf\" is not a number"},
        {"link_bandwidth", "link_bandwidth nan MB/s", "\"nan\" is not a number"},
        {"cores_per_node", "cores_per_node two", "\"two\" is not a number"},
        {"link_bandwidth", "link_bandwidth 175MB/s",
         "put a blank between the number and its unit "
         "(\"175 MB/s\")"},
        /* units */
        {"link_bandwidth", "link_bandwidth 175",
         "\"175\" has no unit: a bandwidth takes one of "
         "B/s, kB/s, MB/s or GB/s (e.g. \"175 MB/s\")"},
        {"hop_latency", "hop_latency 90", "\"90\" has no unit"},
        {"clock", "clock 700", "\"700\" has no unit"},
        {"packet_bytes", "packet_bytes 256", "\"256\" has no unit"},
        {"cpu_match", "cpu_match 600", "\"600\" has no unit"},
        {"link_bandwidth", "link_bandwidth 175 ns", "\"ns\" is not a unit of bandwidth"},
        {"link_bandwidth", "link_bandwidth 1400 Mb/s", "did you mean MB/s?"},
        {"link_bandwidth", "link_bandwidth 175 MiB/s", "is not a unit of bandwidth"},
        {"hop_latency", "hop_latency 90 \xc2\xb5s", "is not a unit of time (s, ms, us or ns)"},
        {"clock", "clock 700 mhz", "did you mean MHz?"},
        {"packet_bytes", "packet_bytes 256 bytes", "\"bytes\" is not a unit of size (B)"},
        {"cpu_match", "cpu_match 600 cycle", "is not a unit of processor cost (cycles)"},
        {"cores_per_node", "cores_per_node 2 cores",
         "unexpected \"cores\" after the value: a "
         "count takes no unit"},
        /* trailing words */
        {"link_bandwidth", "link_bandwidth 175 MB/s each", "unexpected \"each\" after the unit"},
        {"name", "name bgl extra", "unexpected \"extra\" after the value"},
        {"bulk", "bulk none dma", "unexpected \"dma\""},
        /* no value */
        {"clock", "clock", "no value (a clock rate in Hz, kHz, MHz or GHz)"},
        {"cn_fanout", "cn_fanout   # two", "no value (a count)"},
        {"name", "name", "no value"},
        {"bulk", "bulk", "no value (none or dma)"},
        /* out of range */
        {"cores_per_node", "cores_per_node 0", "0 is out of range (1 to 64)"},
        {"cores_per_node", "cores_per_node 65", "65 is out of range (1 to 64)"},
        {"injection_fifo_packets", "injection_fifo_packets 1025", "out of range (1 to 1024)"},
        {"injection_fifo_packets", "injection_fifo_packets 0", "out of range (1 to 1024)"},
        {"reception_fifo_packets", "reception_fifo_packets 65537", "out of range (1 to 65536)"},
        {"cn_fanout", "cn_fanout 0", "out of range (1 to 16)"},
        {"link_bandwidth", "link_bandwidth 0 MB/s", "0 MB/s is out of range (1 kB/s to 1000 GB/s)"},
        {"link_bandwidth", "link_bandwidth 1001 GB/s", "1001 GB/s is out of range"},
        {"link_bandwidth",
         "link_bandwidth 99999999999999999999999999999999999999999999999999999999999999 GB/s",
         "... GB/s is out of range (1 kB/s to 1000 GB/s)"},
        {"clock", "clock 999 kHz", "999 kHz is out of range (1 MHz to 100 GHz)"},
        {"hop_latency", "hop_latency 2 s", "2 s is out of range (0 s to 1 s)"},
        {"cpu_match", "cpu_match 1000000001 cycles", "out of range (0 to 1e9 cycles)"},
        {"packet_bytes", "packet_bytes 0 B", "out of range (1 B to 65536 B)"},
        /* whole numbers */
        {"cores_per_node", "cores_per_node 2.5", "\"2.5\" is not a whole number"},
        {"packet_bytes", "packet_bytes 256.5 B", "\"256.5\" is not a whole number"},
        /* words */
        {"name", "name BG/L", "\"BG/L\" is not a machine name"},
        {"name", "name bgl.2", "is not a machine name"},
        {"name", "name abcdefghijklmnopqrstuvwxyz0123456", "at most 31 characters"},
        {"bulk", "bulk DMA", "\"DMA\" is not none or dma"},
        {"bulk", "bulk yes", "\"yes\" is not none or dma"},
        /* not text */
        {"clock", "clock 700\x01 MHz", "byte 0x01 in column 10 is not text"},
        {"clock", "clock 700\r MHz", "byte 0x0d in column 10"},
    };
    check_bad_lines(bad, N_OF(bad));

    /* a line over TORXP_SIM_LINE_MAX characters; its key is still named */
    char line[TORXP_SIM_LINE_MAX + 8];
    snprintf(line, sizeof line, "%-*s#", TORXP_SIM_LINE_MAX, "name test");
    torxp_sim_machine_t m;
    expect_error(parse_with("name", line, &m), TORX_ERR_INVAL, &m,
                 "torx: machine file t.machine:1: name: the line has 256 characters, more than 255",
                 NULL);
    snprintf(line, sizeof line, "%-*s#", TORXP_SIM_LINE_MAX, "?");
    expect_error(parse_with("name", line, &m), TORX_ERR_INVAL, &m,
                 "torx: machine file t.machine:1: the line has 256 characters", NULL);
}
END_TEST

START_TEST(refuses_inconsistent)
{
    static const bad_line_t bad[] = {
        {"dma_bandwidth", "dma_bandwidth 2250 MB/s", "given, but bulk is none (line 12)"},
        {"dma_local_bandwidth", "dma_local_bandwidth 2550 MB/s", "given, but bulk is none"},
        {"dma_startup", "dma_startup 200 ns", "given, but bulk is none"},
        {"cpu_bulk_start", "cpu_bulk_start 400 cycles", "go with bulk dma only"},
        {"packet_bytes", "packet_bytes 250 B",
         "250 B is not a whole number of packet_chunk (32 B, line 7)"},
    };
    check_bad_lines(bad, N_OF(bad));

    torxp_sim_machine_t m;
    /* the header leaves less than torx's 240-byte payload: named on its line */
    expect_error(parse_with("packet_header", "packet_header 32 B", &m), TORX_ERR_INVAL, &m,
                 "t.machine:8: packet_header: 32 B leaves 224 B of payload in a packet of 256 B "
                 "(packet_bytes, line 6); torx's packets carry up to 240 B",
                 NULL);
    expect_error(parse_with("packet_header", "packet_header 300 B", &m), TORX_ERR_INVAL, &m,
                 "t.machine:8: packet_header: 300 B leaves -44 B", NULL);
    /* bulk dma with keys missing: all named, with the bulk line */
    expect_error(parse_with("bulk", "bulk dma", &m), TORX_ERR_INVAL, &m,
                 "t.machine: bulk dma (line 12) needs dma_bandwidth, dma_local_bandwidth, "
                 "dma_startup, cpu_bulk_start too, and the file has no line for them",
                 NULL);
    expect_error(parse_with("bulk",
                            "bulk dma\ndma_bandwidth 2250 MB/s\ndma_local_bandwidth 2550 MB/s\n"
                            "dma_startup 200 ns",
                            &m),
                 TORX_ERR_INVAL, &m,
                 "bulk dma (line 12) needs cpu_bulk_start too, and the file has no line for it",
                 NULL);
    /* a bulk key before bulk none: the order of lines does not matter */
    char text[8192];
    snprintf(text, sizeof text, "dma_startup 1 us\n%s", text_with(NULL, NULL));
    expect_error(torxp_sim_machine_parse(text, "t.machine", &m), TORX_ERR_INVAL, &m,
                 "t.machine:1: dma_startup: given, but bulk is none (line 13)", NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sim_machine");
    TCase *tc = tcase_create("sim_machine");
    tcase_add_test(tc, shipped_bgl);
    tcase_add_test(tc, shipped_bgp);
    tcase_add_test(tc, lookup_path_order);
    tcase_add_test(tc, lookup_failures);
    tcase_add_test(tc, format_accepts);
    tcase_add_test(tc, refuses_unknown_duplicate_missing);
    tcase_add_test(tc, refuses_bad_values);
    tcase_add_test(tc, refuses_inconsistent);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
