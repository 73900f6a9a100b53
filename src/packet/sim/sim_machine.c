/* The sim device's machine-file reader (sim_machine.h, docs/sim.md#machine-files).
 *
 * A machine file is read once, before a simulated job starts, and every
 * figure in it shapes every result the job reports. So the reader is
 * strict: an unknown, repeated or missing key, a number that is not one, a
 * missing or foreign unit, a value out of range, trailing words, an overlong
 * line or a byte that is not text all stop it, and each message names the
 * file, the line and the key ("torx: machine file bgl:7: link_bandwidth:
 * "17x" is not a number").
 *
 * Numbers are plain decimals (175, 0.5). The value and its unit's power of
 * ten are handed to strtod as "DIGITSeEXP", with no decimal point: the
 * result is correctly rounded (90 ns is exactly the double 90e-9) and does
 * not depend on the locale. */
#include "sim_machine.h"
#include "config.h" /* TORX_MACHINE_DIR */

#include "packet/pkt_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TORX_MACHINE_DIR
#error "TORX_MACHINE_DIR (the installed machine files' directory) comes from configure"
#endif

#define TOKEN_SHOWN 40 /* longest token quoted back in a message */
#define MSG_BYTES 512  /* as torx_last_error() holds */
#define MAX_TOKENS 4   /* tokens kept per line; more are only counted */

/* ---- The keys ------------------------------------------------------------ */

/* What a key's value is: the kind decides its units and its C type. */
typedef enum {
    K_NAME,      /* a word, [a-z0-9_-]+ (char[]) */
    K_BULK,      /* none | dma (torxp_sim_bulk_t) */
    K_COUNT,     /* a whole number, no unit (unsigned) */
    K_BYTES,     /* a whole number of B (unsigned) */
    K_BANDWIDTH, /* B/s .. GB/s (double, B/s) */
    K_TIME,      /* s .. ns (double, s) */
    K_CLOCK,     /* Hz .. GHz (double, Hz) */
    K_CYCLES     /* cycles (double) */
} kind_t;

typedef struct {
    const char *unit;
    int exp10; /* the unit is 10^exp10 of the SI unit */
} unit_t;

static const unit_t bandwidth_units[] = {{"B/s", 0}, {"kB/s", 3}, {"MB/s", 6}, {"GB/s", 9}, {0}};
static const unit_t time_units[] = {{"s", 0}, {"ms", -3}, {"us", -6}, {"ns", -9}, {0}};
static const unit_t clock_units[] = {{"Hz", 0}, {"kHz", 3}, {"MHz", 6}, {"GHz", 9}, {0}};
static const unit_t byte_units[] = {{"B", 0}, {0}};
static const unit_t cycle_units[] = {{"cycles", 0}, {0}};

typedef struct {
    const char *what;      /* "bandwidth", for messages */
    const unit_t *units;   /* NULL: the value takes no unit */
    const char *unit_list; /* for messages */
    const char *example;   /* the unit a "no unit" message shows */
} kind_info_t;

static const kind_info_t kind_info[] = {
    [K_NAME] = {"name", NULL, "", ""},
    [K_BULK] = {"bulk", NULL, "", ""},
    [K_COUNT] = {"count", NULL, "", ""},
    [K_BYTES] = {"size", byte_units, "B", "B"},
    [K_BANDWIDTH] = {"bandwidth", bandwidth_units, "B/s, kB/s, MB/s or GB/s", "MB/s"},
    [K_TIME] = {"time", time_units, "s, ms, us or ns", "ns"},
    [K_CLOCK] = {"clock rate", clock_units, "Hz, kHz, MHz or GHz", "MHz"},
    [K_CYCLES] = {"processor cost", cycle_units, "cycles", "cycles"},
};

typedef struct {
    const char *key;
    kind_t kind;
    int dma_only;      /* required with bulk dma, refused with bulk none */
    double min, max;   /* the range, in SI units (numeric kinds) */
    const char *range; /* the range as the message says it */
    size_t offset;     /* of the field in torxp_sim_machine_t */
} key_def_t;

#define F(field) offsetof(torxp_sim_machine_t, field)
#define BW_RANGE 1e3, 1e12, "1 kB/s to 1000 GB/s"
#define TIME_RANGE 0, 1, "0 s to 1 s"
#define CYCLE_RANGE 0, 1e9, "0 to 1e9 cycles"

/* In the order docs/sim.md and the shipped files list them. */
static const key_def_t keys[] = {
    {"name", K_NAME, 0, 0, 0, "", F(name)},
    {"cores_per_node", K_COUNT, 0, 1, 64, "1 to 64", F(cores_per_node)},
    {"clock", K_CLOCK, 0, 1e6, 1e11, "1 MHz to 100 GHz", F(clock)},
    {"link_bandwidth", K_BANDWIDTH, 0, BW_RANGE, F(link_bandwidth)},
    {"hop_latency", K_TIME, 0, TIME_RANGE, F(hop_latency)},
    {"packet_bytes", K_BYTES, 0, 1, 65536, "1 B to 65536 B", F(packet_bytes)},
    {"packet_chunk", K_BYTES, 0, 1, 65536, "1 B to 65536 B", F(packet_chunk)},
    {"packet_header", K_BYTES, 0, 0, 65535, "0 B to 65535 B", F(packet_header)},
    {"link_overhead", K_BYTES, 0, 0, 65536, "0 B to 65536 B", F(link_overhead)},
    {"injection_fifo_packets", K_COUNT, 0, 1, 1024, "1 to 1024", F(injection_fifo_packets)},
    {"reception_fifo_packets", K_COUNT, 0, 1, 65536, "1 to 65536", F(reception_fifo_packets)},
    {"router_buffer", K_BYTES, 0, 2, 1048576, "2 B to 1048576 B", F(router_buffer)},
    {"bulk", K_BULK, 0, 0, 0, "", F(bulk)},
    {"dma_bandwidth", K_BANDWIDTH, 1, BW_RANGE, F(dma_bandwidth)},
    {"dma_local_bandwidth", K_BANDWIDTH, 1, BW_RANGE, F(dma_local_bandwidth)},
    {"dma_startup", K_TIME, 1, TIME_RANGE, F(dma_startup)},
    {"cn_bandwidth", K_BANDWIDTH, 0, BW_RANGE, F(cn_bandwidth)},
    {"cn_hop_latency", K_TIME, 0, TIME_RANGE, F(cn_hop_latency)},
    {"cn_fanout", K_COUNT, 0, 1, 16, "1 to 16", F(cn_fanout)},
    {"gi_latency", K_TIME, 0, TIME_RANGE, F(gi_latency)},
    {"cpu_inject_packet", K_CYCLES, 0, CYCLE_RANGE, F(cpu_inject_packet)},
    {"cpu_receive_packet", K_CYCLES, 0, CYCLE_RANGE, F(cpu_receive_packet)},
    {"cpu_poll_empty", K_CYCLES, 0, CYCLE_RANGE, F(cpu_poll_empty)},
    {"cpu_match", K_CYCLES, 0, CYCLE_RANGE, F(cpu_match)},
    {"cpu_copy_byte", K_CYCLES, 0, CYCLE_RANGE, F(cpu_copy_byte)},
    {"cpu_cn_packet", K_CYCLES, 0, CYCLE_RANGE, F(cpu_cn_packet)},
    {"cpu_bulk_start", K_CYCLES, 1, CYCLE_RANGE, F(cpu_bulk_start)},
};
#undef F
enum { NKEYS = sizeof keys / sizeof keys[0] };

/* ---- Tokens and messages ------------------------------------------------- */

typedef struct {
    const char *p;
    int len;
} token_t;

/* Quotes at most TOKEN_SHOWN characters of a token back to the user. */
#define TOKEN_TEXT "%.*s%s"
#define TOKEN_FMT "\"" TOKEN_TEXT "\""
#define TOKEN_ARGS(tk)                                                                             \
    ((tk).len > TOKEN_SHOWN ? TOKEN_SHOWN : (tk).len), (tk).p, ((tk).len > TOKEN_SHOWN ? "..." : "")

static int token_is(token_t tk, const char *s)
{
    return (size_t)tk.len == strlen(s) && memcmp(tk.p, s, (size_t)tk.len) == 0;
}

static int token_is_nocase(token_t tk, const char *s)
{
    if ((size_t)tk.len != strlen(s))
        return 0;
    for (int i = 0; i < tk.len; i++)
        if (tolower((unsigned char)tk.p[i]) != tolower((unsigned char)s[i]))
            return 0;
    return 1;
}

typedef struct {
    const char *file;
    unsigned long line;
} where_t;

/* "torx: machine file FILE:LINE: KEY: reason". key NULL: no key known. */
static torx_status_t line_error(where_t w, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static torx_status_t line_error(where_t w, const char *key, const char *fmt, ...)
{
    char reason[MSG_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    return torxp_error(TORX_ERR_INVAL, "torx: machine file %s:%lu: %s%s%s", w.file, w.line,
                       key ? key : "", key ? ": " : "", reason);
}

/* The edit distance of a (case folded) and b, for "did you mean"; both
 * short (a is cut off by the caller). */
static int edit_distance(token_t a, const char *b)
{
    int prev[TOKEN_SHOWN + 1], cur[TOKEN_SHOWN + 1];
    const int n = a.len;
    for (int j = 0; j <= n; j++)
        prev[j] = j;
    for (int i = 1; b[i - 1]; i++) {
        cur[0] = i;
        for (int j = 1; j <= n; j++) {
            const int same = tolower((unsigned char)a.p[j - 1]) == b[i - 1];
            int d = prev[j - 1] + !same;
            if (prev[j] + 1 < d)
                d = prev[j] + 1;
            if (cur[j - 1] + 1 < d)
                d = cur[j - 1] + 1;
            cur[j] = d;
        }
        memcpy(prev, cur, sizeof(int) * (size_t)(n + 1));
    }
    return prev[n];
}

/* The key an unknown one was probably meant to be, or NULL. */
static const char *nearest_key(token_t tk)
{
    if (tk.len > TOKEN_SHOWN)
        return NULL;
    const char *best = NULL;
    int best_d = 3; /* at most 2 edits away */
    for (int k = 0; k < NKEYS; k++) {
        const int d = edit_distance(tk, keys[k].key);
        if (d < best_d) {
            best_d = d;
            best = keys[k].key;
        }
    }
    return best;
}

static int key_index(const char *key)
{
    for (int k = 0; k < NKEYS; k++)
        if (!strcmp(keys[k].key, key))
            return k;
    return -1; /* not reached for the keys above */
}

static const key_def_t *find_key(token_t tk)
{
    for (int k = 0; k < NKEYS; k++)
        if (token_is(tk, keys[k].key))
            return &keys[k];
    return NULL;
}

/* ---- Values -------------------------------------------------------------- */

/* A plain decimal (digits, optionally '.' and digits) times 10^exp10,
 * correctly rounded. *whole: no non-zero digit after the point. 0 when tk
 * is not such a number. */
static int decimal_value(token_t tk, int exp10, double *v, int *whole)
{
    char buf[TORXP_SIM_LINE_MAX + 16];
    size_t n = 0;
    int point = 0, before = 0, after = 0;
    *whole = 1;
    for (int i = 0; i < tk.len; i++) {
        const char c = tk.p[i];
        if (c >= '0' && c <= '9') {
            if (n >= TORXP_SIM_LINE_MAX)
                return 0; /* not reached: a line has no more characters */
            buf[n++] = c;
            if (point) {
                after++;
                if (c != '0')
                    *whole = 0;
            } else {
                before++;
            }
        } else if (c == '.' && !point) {
            point = 1;
        } else {
            return 0;
        }
    }
    if (!before || (point && !after))
        return 0;
    /* At most 255 digits and units of 10^-9..10^9: 10^-264..10^264, well
     * inside the double range (no overflow, no underflow to 0). */
    snprintf(buf + n, sizeof buf - n, "e%d", exp10 - after);
    *v = strtod(buf, NULL);
    return 1;
}

/* The length of the longest prefix of tk that is a plain decimal. */
static int number_prefix(token_t tk)
{
    int i = 0;
    while (i < tk.len && tk.p[i] >= '0' && tk.p[i] <= '9')
        i++;
    if (i == 0)
        return 0;
    if (i + 1 < tk.len && tk.p[i] == '.' && tk.p[i + 1] >= '0' && tk.p[i + 1] <= '9')
        for (i += 1; i < tk.len && tk.p[i] >= '0' && tk.p[i] <= '9'; i++)
            ;
    return i;
}

static const unit_t *find_unit(const unit_t *units, token_t tk)
{
    for (const unit_t *u = units; u && u->unit; u++)
        if (token_is(tk, u->unit))
            return u;
    return NULL;
}

static const unit_t *find_unit_nocase(const unit_t *units, token_t tk)
{
    for (const unit_t *u = units; u && u->unit; u++)
        if (token_is_nocase(tk, u->unit))
            return u;
    return NULL;
}

static int name_valid(token_t tk)
{
    if (tk.len < 1 || tk.len > TORXP_SIM_NAME_MAX)
        return 0;
    for (int i = 0; i < tk.len; i++) {
        const char c = tk.p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

/* Reads one key's value (tk[1..ntok-1]) into m. */
static torx_status_t parse_value(where_t w, const key_def_t *def, const token_t *tk, int ntok,
                                 torxp_sim_machine_t *m)
{
    const kind_info_t *ki = &kind_info[def->kind];
    const char *key = def->key;
    void *field = (char *)m + def->offset;
    const int want = ki->units ? 3 : 2; /* key value [unit] */

    if (ntok < 2) {
        if (def->kind == K_NAME)
            return line_error(w, key, "no value (a name such as bgl)");
        if (def->kind == K_BULK)
            return line_error(w, key, "no value (none or dma)");
        return line_error(w, key, "no value (a %s%s%s)", ki->what, ki->units ? " in " : "",
                          ki->unit_list);
    }
    if (ntok > want) {
        const token_t x = tk[want];
        if (def->kind == K_COUNT)
            return line_error(w, key,
                              "unexpected " TOKEN_FMT " after the value: a count takes no unit "
                              "(a comment starts with #)",
                              TOKEN_ARGS(x));
        return line_error(w, key, "unexpected " TOKEN_FMT " after the %s (a comment starts with #)",
                          TOKEN_ARGS(x), ki->units ? "unit" : "value");
    }

    const token_t v = tk[1];
    if (def->kind == K_NAME) {
        if (!name_valid(v))
            return line_error(w, key,
                              TOKEN_FMT " is not a machine name (lower-case letters, digits, _ "
                                        "and -, at most %d characters)",
                              TOKEN_ARGS(v), TORXP_SIM_NAME_MAX);
        memcpy(field, v.p, (size_t)v.len);
        ((char *)field)[v.len] = '\0';
        return TORX_OK;
    }
    if (def->kind == K_BULK) {
        if (token_is(v, "none"))
            *(torxp_sim_bulk_t *)field = TORXP_SIM_BULK_NONE;
        else if (token_is(v, "dma"))
            *(torxp_sim_bulk_t *)field = TORXP_SIM_BULK_DMA;
        else
            return line_error(w, key, TOKEN_FMT " is not none or dma", TOKEN_ARGS(v));
        return TORX_OK;
    }

    /* A number, then (but for counts) its unit. */
    double x;
    int whole;
    if (!decimal_value(v, 0, &x, &whole)) {
        const int np = number_prefix(v);
        const token_t rest = {v.p + np, v.len - np};
        if (ntok == 2 && np > 0 && find_unit(ki->units, rest))
            return line_error(w, key,
                              TOKEN_FMT " is not a number: put a blank between the number and "
                                        "its unit (\"%.*s %.*s\")",
                              TOKEN_ARGS(v), np, v.p, rest.len, rest.p);
        return line_error(w, key, TOKEN_FMT " is not a number (a plain decimal such as 175 or 0.5)",
                          TOKEN_ARGS(v));
    }
    if (ki->units) {
        if (ntok < 3)
            return line_error(
                w, key, TOKEN_FMT " has no unit: a %s takes one of %s (e.g. \"" TOKEN_TEXT " %s\")",
                TOKEN_ARGS(v), ki->what, ki->unit_list, TOKEN_ARGS(v), ki->example);
        const unit_t *u = find_unit(ki->units, tk[2]);
        if (!u) {
            const unit_t *near = find_unit_nocase(ki->units, tk[2]);
            return line_error(w, key, TOKEN_FMT " is not a unit of %s (%s)%s%s%s",
                              TOKEN_ARGS(tk[2]), ki->what, ki->unit_list,
                              near ? "; units are case-sensitive: did you mean " : "",
                              near ? near->unit : "", near ? "?" : "");
        }
        if (!decimal_value(v, u->exp10, &x, &whole))
            return line_error(w, key, "internal error: " TOKEN_FMT " parsed once only",
                              TOKEN_ARGS(v));
    }
    if ((def->kind == K_COUNT || def->kind == K_BYTES) && !whole)
        return line_error(w, key, TOKEN_FMT " is not a whole number", TOKEN_ARGS(v));
    if (!(x >= def->min && x <= def->max)) {
        if (ki->units)
            return line_error(w, key, TOKEN_TEXT " " TOKEN_TEXT " is out of range (%s)",
                              TOKEN_ARGS(v), TOKEN_ARGS(tk[2]), def->range);
        return line_error(w, key, TOKEN_TEXT " is out of range (%s)", TOKEN_ARGS(v), def->range);
    }
    if (def->kind == K_COUNT || def->kind == K_BYTES)
        *(unsigned *)field = (unsigned)x;
    else
        *(double *)field = x;
    return TORX_OK;
}

/* ---- The file ------------------------------------------------------------ */

/* Splits a line into blank-separated tokens, up to a token that starts with
 * '#'. Returns how many (only MAX_TOKENS are kept). */
static int tokenize(const char *p, size_t len, token_t tk[MAX_TOKENS])
{
    int n = 0;
    for (size_t i = 0; i < len;) {
        if (p[i] == ' ' || p[i] == '\t') {
            i++;
            continue;
        }
        if (p[i] == '#')
            break;
        const size_t start = i;
        while (i < len && p[i] != ' ' && p[i] != '\t')
            i++;
        if (n < MAX_TOKENS)
            tk[n] = (token_t){p + start, (int)(i - start)};
        n++;
    }
    return n;
}

/* After every line: the keys that must be there are, the dma keys go with
 * bulk dma only, and the packet figures fit together. */
static torx_status_t check_whole(const char *file, const unsigned long line_of[NKEYS],
                                 const torxp_sim_machine_t *m)
{
    char list[MSG_BYTES];
    size_t used = 0;
    int missing = 0, any = 0;
    const int router_key = key_index("router_buffer");
    for (int k = 0; k < NKEYS; k++) {
        any |= line_of[k] != 0;
        if (line_of[k] || keys[k].dma_only || k == router_key) /* router_buffer has a default */
            continue;
        used += (size_t)snprintf(list + used, used < sizeof list ? sizeof list - used : 0, "%s%s",
                                 missing ? ", " : "", keys[k].key);
        missing++;
        if (used >= sizeof list)
            used = sizeof list;
    }
    if (!any)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: machine file %s: no keys (the file is empty or all comments)",
                           file);
    if (missing)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: machine file %s: missing key%s %s (every key is required; "
                           "docs/sim.md#machine-files lists them)",
                           file, missing > 1 ? "s" : "", list);

    const unsigned long bulk_line = line_of[key_index("bulk")];
    used = 0;
    missing = 0;
    for (int k = 0; k < NKEYS; k++) {
        if (!keys[k].dma_only)
            continue;
        if (m->bulk == TORXP_SIM_BULK_NONE && line_of[k])
            return line_error((where_t){file, line_of[k]}, keys[k].key,
                              "given, but bulk is none (line %lu): the dma_* keys and "
                              "cpu_bulk_start go with bulk dma only",
                              bulk_line);
        if (m->bulk == TORXP_SIM_BULK_DMA && !line_of[k]) {
            used += (size_t)snprintf(list + used, used < sizeof list ? sizeof list - used : 0,
                                     "%s%s", missing ? ", " : "", keys[k].key);
            missing++;
            if (used >= sizeof list)
                used = sizeof list;
        }
    }
    if (missing)
        return torxp_error(TORX_ERR_INVAL,
                           "torx: machine file %s: bulk dma (line %lu) needs %s too, and the "
                           "file has no line for %s",
                           file, bulk_line, list, missing > 1 ? "them" : "it");

    const unsigned long bytes_line = line_of[key_index("packet_bytes")];
    const unsigned long chunk_line = line_of[key_index("packet_chunk")];
    const unsigned long header_line = line_of[key_index("packet_header")];
    if (m->packet_bytes % m->packet_chunk)
        return line_error((where_t){file, bytes_line}, "packet_bytes",
                          "%u B is not a whole number of packet_chunk (%u B, line %lu)",
                          m->packet_bytes, m->packet_chunk, chunk_line);
    if (m->packet_header >= m->packet_bytes ||
        m->packet_bytes - m->packet_header < TORX_PKT_MAX_PAYLOAD)
        return line_error((where_t){file, header_line}, "packet_header",
                          "%u B leaves %d B of payload in a packet of %u B (packet_bytes, line "
                          "%lu); torx's packets carry up to %d B",
                          m->packet_header, (int)m->packet_bytes - (int)m->packet_header,
                          m->packet_bytes, bytes_line, TORX_PKT_MAX_PAYLOAD);
    /* bubble flow control: a packet enters a ring only with room for two
     * (docs/sim.md#the-network-model) */
    if (m->router_buffer < 2 * m->packet_bytes && !line_of[router_key])
        return torxp_error(TORX_ERR_INVAL,
                           "torx: machine file %s: router_buffer: the default %u B holds fewer "
                           "than two packets of packet_bytes (%u B, line %lu); give "
                           "router_buffer, at least %u B",
                           file, m->router_buffer, m->packet_bytes, bytes_line,
                           2 * m->packet_bytes);
    if (m->router_buffer < 2 * m->packet_bytes)
        return line_error((where_t){file, line_of[router_key]}, "router_buffer",
                          "%u B holds fewer than two packets of packet_bytes (%u B, line %lu); "
                          "a router input must hold two",
                          m->router_buffer, m->packet_bytes, bytes_line);
    return TORX_OK;
}

/* Parses len bytes of text (NUL bytes are refused as not text). */
static torx_status_t parse_text(const char *text, size_t len, const char *file,
                                torxp_sim_machine_t *out)
{
    torxp_sim_machine_t m = {.bulk = TORXP_SIM_BULK_NONE,
                             .router_buffer = TORXP_SIM_ROUTER_BUFFER_DEFAULT};
    unsigned long line_of[NKEYS] = {0};
    where_t w = {file, 0};
    size_t pos = 0;

    while (pos < len) {
        const char *p = text + pos;
        const char *nl = memchr(p, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - p) : len - pos;
        pos += n + (nl != NULL);
        w.line++;
        if (n > 0 && p[n - 1] == '\r')
            n--; /* CRLF */

        /* The key, when the line starts with one, for the messages below. */
        token_t tk[MAX_TOKENS];
        const int ntok = tokenize(p, n, tk);
        const key_def_t *def = ntok > 0 ? find_key(tk[0]) : NULL;
        const char *key = def ? def->key : NULL;
        if (n > TORXP_SIM_LINE_MAX)
            return line_error(w, key, "the line has %zu characters, more than %d", n,
                              TORXP_SIM_LINE_MAX);
        for (size_t i = 0; i < n; i++) {
            const unsigned char c = (unsigned char)p[i];
            if ((c < 0x20 && c != '\t') || c == 0x7f)
                return line_error(w, key,
                                  "byte 0x%02x in column %zu is not text (is this a machine "
                                  "file?)",
                                  c, i + 1);
        }

        if (ntok == 0)
            continue;
        if (!def) {
            const char *near = nearest_key(tk[0]);
            if (near)
                return line_error(w, NULL, TOKEN_FMT " is not a machine-file key; did you mean %s?",
                                  TOKEN_ARGS(tk[0]), near);
            return line_error(w, NULL,
                              TOKEN_FMT " is not a machine-file key (docs/sim.md#machine-files "
                                        "lists them)",
                              TOKEN_ARGS(tk[0]));
        }
        const int k = (int)(def - keys);
        if (line_of[k])
            return line_error(w, def->key, "given twice (first on line %lu)", line_of[k]);
        torx_status_t rc = parse_value(w, def, tk, ntok < MAX_TOKENS ? ntok : MAX_TOKENS, &m);
        if (rc != TORX_OK)
            return rc;
        line_of[k] = w.line;
    }

    torx_status_t rc = check_whole(file, line_of, &m);
    if (rc != TORX_OK)
        return rc;
    snprintf(m.path, sizeof m.path, "%s", file);
    *out = m;
    return TORX_OK;
}

torx_status_t torxp_sim_machine_parse(const char *text, const char *filename,
                                      torxp_sim_machine_t *m)
{
    if (!m)
        return torxp_error(TORX_ERR_INVAL, "torx: torxp_sim_machine_parse: m is NULL");
    *m = (torxp_sim_machine_t){.bulk = TORXP_SIM_BULK_NONE};
    if (!text || !filename)
        return torxp_error(TORX_ERR_INVAL, "torx: torxp_sim_machine_parse: %s is NULL",
                           text ? "filename" : "text");
    return parse_text(text, strlen(text), filename, m);
}

/* ---- Finding and reading the file ---------------------------------------- */

/* A name to look up (not a path): letters, digits, '.', '_', '-', not
 * starting with '.'. */
static int lookup_name_valid(const char *s)
{
    if (!*s || *s == '.')
        return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '.' && *s != '_' && *s != '-')
            return 0;
    return 1;
}

/* Opens DIR/NAME into path. NULL with *err the errno when it cannot. */
static FILE *open_in(const char *dir, size_t dirlen, const char *name, char *path, int *err)
{
    while (dirlen > 1 && dir[dirlen - 1] == '/')
        dirlen--;
    const int n = snprintf(path, TORXP_SIM_PATH_MAX, "%.*s/%s", (int)dirlen, dir, name);
    if (n < 0 || n >= TORXP_SIM_PATH_MAX) {
        *err = ENAMETOOLONG;
        return NULL;
    }
    FILE *f = fopen(path, "r");
    *err = f ? 0 : errno;
    return f;
}

/* Finds NAME along TORX_SIM_MACHINE_PATH, then TORX_MACHINE_DIR. */
static torx_status_t find_machine(const char *name, char *path, FILE **f)
{
    const char *search = getenv("TORX_SIM_MACHINE_PATH");
    int err = 0;
    for (const char *d = search; d && *d;) {
        const char *colon = strchr(d, ':');
        const size_t dlen = colon ? (size_t)(colon - d) : strlen(d);
        if (dlen > 0) {
            *f = open_in(d, dlen, name, path, &err);
            if (*f)
                return TORX_OK;
            if (err != ENOENT && err != ENOTDIR)
                return torxp_error(TORX_ERR_ENV,
                                   "torx: machine file %s (machine %s, from "
                                   "TORX_SIM_MACHINE_PATH): cannot open: %s",
                                   path, name, strerror(err));
        }
        d = colon ? colon + 1 : d + dlen;
    }
    *f = open_in(TORX_MACHINE_DIR, strlen(TORX_MACHINE_DIR), name, path, &err);
    if (*f)
        return TORX_OK;
    if (err != ENOENT && err != ENOTDIR)
        return torxp_error(TORX_ERR_ENV, "torx: machine file %s (machine %s): cannot open: %s",
                           path, name, strerror(err));
    return torxp_error(TORX_ERR_ENV,
                       "torx: machine %s not found: no file %s in TORX_SIM_MACHINE_PATH (%s) or "
                       "in %s; torx ships bgl and bgp, and a path (with a '/') names any file",
                       name, name, search ? search : "unset", TORX_MACHINE_DIR);
}

torx_status_t torxp_sim_machine_load(const char *name_or_path, torxp_sim_machine_t *m)
{
    if (!m)
        return torxp_error(TORX_ERR_INVAL, "torx: torxp_sim_machine_load: m is NULL");
    *m = (torxp_sim_machine_t){.bulk = TORXP_SIM_BULK_NONE};
    if (!name_or_path || !*name_or_path)
        return torxp_error(TORX_ERR_ENV,
                           "torx: no machine given: name one (bgl, bgp) or give a machine file's "
                           "path");

    char path[TORXP_SIM_PATH_MAX];
    FILE *f;
    torx_status_t rc;
    if (strchr(name_or_path, '/')) {
        if (strlen(name_or_path) >= sizeof path)
            return torxp_error(TORX_ERR_ENV,
                               "torx: machine file path of %zu characters: longer than %d",
                               strlen(name_or_path), TORXP_SIM_PATH_MAX - 1);
        snprintf(path, sizeof path, "%s", name_or_path);
        if (!(f = fopen(path, "r")))
            return torxp_error(TORX_ERR_ENV, "torx: machine file %s: cannot open: %s", path,
                               strerror(errno));
    } else {
        if (!lookup_name_valid(name_or_path))
            return torxp_error(TORX_ERR_ENV,
                               "torx: machine \"%.*s%s\" is neither a machine name (letters, "
                               "digits, '.', '_' and '-') nor a path (with a '/')",
                               TOKEN_SHOWN, name_or_path,
                               strlen(name_or_path) > TOKEN_SHOWN ? "..." : "");
        if ((rc = find_machine(name_or_path, path, &f)) != TORX_OK)
            return rc;
    }

    char *buf = torxp_malloc(TORXP_SIM_FILE_MAX + 1);
    if (!buf) {
        fclose(f);
        return torxp_error(TORX_ERR_NOMEM, "torx: machine file %s: no memory to read it", path);
    }
    const size_t len = fread(buf, 1, TORXP_SIM_FILE_MAX + 1, f);
    const int read_err = ferror(f) ? errno : 0;
    fclose(f);
    if (read_err)
        rc = torxp_error(TORX_ERR_ENV, "torx: machine file %s: cannot read: %s", path,
                         strerror(read_err));
    else if (len > TORXP_SIM_FILE_MAX)
        rc = torxp_error(TORX_ERR_INVAL,
                         "torx: machine file %s: larger than %d bytes (is this a machine file?)",
                         path, TORXP_SIM_FILE_MAX);
    else
        rc = parse_text(buf, len, path, m);
    free(buf);
    return rc;
}
