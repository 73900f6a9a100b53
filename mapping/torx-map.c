/* torx-map: checks, writes and shows torx rank mappings (include/torx/map.h),
 * weighs them against a recorded traffic matrix (eval) and proposes one
 * with fewer hop-bytes (opt).
 *
 * Every map is built by libtorx itself, so `torx-map check` accepts exactly
 * the files a job accepts and prints the very message a job would fail with.
 *
 * Exit status: 0 success; 1 the map is bad or could not be made (a bad file,
 * order or torus, too small a shape, an output error); 2 the command line is
 * wrong (unknown option, missing or malformed argument, conflicting options). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <torx/map.h>
#include <torx/version.h>

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_BAD_MAP 1
#define EXIT_USAGE 2

static const char usage_text[] =
    "Usage: torx-map check FILE --torus XxYxZ [--mode heater|co|vn | --tasks-per-node T]\n"
    "                      [--ntasks N]\n"
    "       torx-map gen --torus XxYxZ [--order ORDER] [--mode heater|co|vn | --tasks-per-node T]\n"
    "                    [--ntasks N] [-o FILE]\n"
    "       torx-map show FILE|ORDER --torus XxYxZ [--mode heater|co|vn | --tasks-per-node T]\n"
    "                     [--ntasks N] [--distance A B]\n"
    "       torx-map eval MATRIX [FILE|ORDER...] --torus XxYxZ [--mode heater|co|vn |\n"
    "                     --tasks-per-node T]\n"
    "       torx-map opt MATRIX --torus XxYxZ [--mode heater|co|vn | --tasks-per-node T]\n"
    "                    [--seed S] [--moves M] [-o FILE]\n"
    "       torx-map -h|--help\n"
    "       torx-map --version\n";

static const char help_text[] =
    "\n"
    "Checks, writes and shows torx rank mappings: which torus coordinate (x,y,z,t)\n"
    "each MPI rank takes (the TORX_MAPPING of a job); weighs them against a job's\n"
    "recorded traffic and proposes one with fewer hop-bytes.\n"
    "\n"
    "Commands:\n"
    "  check FILE      validate a mapping file as a job would; prints\n"
    "                  \"FILE: ok (N ranks on XxYxZ, T tasks per node)\", or the job's error\n"
    "                  (\"FILE:LINE: reason\") on stderr and exits 1\n"
    "  gen             write the mapping file of an order string (default XYZT)\n"
    "  show FILE|ORDER print the rank -> (x,y,z,t) table of a file or an order string\n"
    "  eval MATRIX [FILE|ORDER...]\n"
    "                  the hop-bytes of a traffic matrix (TORX_STATS_FILE) under each\n"
    "                  mapping (default XYZT): bytes x torus hops, and hops per byte\n"
    "  opt MATRIX      write a mapping file with fewer hop-bytes for the matrix: the best\n"
    "                  order string, greedy placement, then simulated annealing\n"
    "\n"
    "Options:\n"
    "  --torus XxYxZ          torus extents, 1..255 each (default: $TORX_TORUS; with\n"
    "                         neither, --ntasks derives the shape as a job would)\n"
    "  --mode heater|co|vn    node mode: heater and co run 1 task per node, vn runs\n"
    "                         $TORX_CORES_PER_NODE (default 2); default: $TORX_MODE, else heater\n"
    "  --tasks-per-node T     tasks per node (t = 0..T-1), 1..255; overrides vn's count\n"
    "  --ntasks N             ranks in the job (default: the file's rank lines for check\n"
    "                         and show FILE, every slot of the torus for gen and show ORDER;\n"
    "                         eval and opt take it from the matrix)\n"
    "  --order ORDER          gen: a permutation of XYZT, fastest-varying first (XYZT)\n"
    "  -o, --output FILE      gen, opt: write to FILE instead of standard output\n"
    "  --seed S               opt: seed of the annealing (default 1; same seed, same map)\n"
    "  --moves M              opt: annealing moves (default: from the job size)\n"
    "  --distance A B         show: print the hop count between ranks A and B instead of\n"
    "                         the table (also --distance A,B)\n"
    "  -h, --help             this text\n"
    "  --version              print \"torx-map (torx) VERSION (COMMIT)\" and exit\n"
    "\n"
    "Mapping files: one line per rank, in rank order, \"x y z t\"; blank lines and lines\n"
    "starting with '#' are ignored. Order strings name the dimensions from the\n"
    "fastest-varying to the slowest: XYZT fills x first, TXYZ fills the tasks of a node\n"
    "first.\n"
    "\n"
    "Traffic matrices (what TORX_STATS_FILE collects): one row per source rank, in any\n"
    "order, \"SRC B0 B1 ... B(N-1)\": the bytes SRC sent to each rank; '#' lines and\n"
    "blank lines are ignored.\n"
    "\n"
    "Exit status: 0 ok, 1 bad map (or output error), 2 bad command line.\n";

enum command { CMD_CHECK, CMD_GEN, CMD_SHOW, CMD_EVAL, CMD_OPT };

enum {
    OPT_TORUS = 256,
    OPT_MODE,
    OPT_TPN,
    OPT_NTASKS,
    OPT_ORDER,
    OPT_DISTANCE,
    OPT_SEED,
    OPT_MOVES,
};

typedef struct {
    enum command cmd;
    const char *torus;   /* NULL: $TORX_TORUS or derived */
    const char *mode;    /* NULL: $TORX_MODE */
    long tasks_per_node; /* 0: from the mode */
    long ntasks;         /* 0: from the file or the shape */
    const char *order;   /* gen */
    const char *output;  /* gen; NULL: stdout */
    long dist_a, dist_b; /* show; -1: no --distance */
    const char *spec;    /* check FILE, show FILE|ORDER, eval and opt MATRIX */
    char **specs;        /* eval: the mappings after MATRIX */
    int nspecs;
    long seed, moves; /* opt; -1: the default */
} options_t;

static const char *prog = "torx-map";

static void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void usage_error(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n%sRun '%s --help' for more.\n", usage_text, prog);
    exit(EXIT_USAGE);
}

/* A library error, printed as the library wrote it (the same text a job
 * shows), then exit 1. */
static void map_error(void)
{
    fprintf(stderr, "%s\n", torx_last_error());
    exit(EXIT_BAD_MAP);
}

static const char *plural(long n)
{
    return n == 1 ? "" : "s";
}

/* A whole-string decimal integer in [lo, hi], else a usage error. */
static long parse_long(const char *opt, const char *s, long lo, long hi)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*s < '0' || *s > '9' || end == s || *end != '\0' || errno == ERANGE || v < lo || v > hi)
        usage_error("%s '%s': expected an integer %ld..%ld", opt, s, lo, hi);
    return v;
}

static void parse_args(int argc, char **argv, options_t *o)
{
    static const struct option longopts[] = {
        {"torus", required_argument, NULL, OPT_TORUS},
        {"mode", required_argument, NULL, OPT_MODE},
        {"tasks-per-node", required_argument, NULL, OPT_TPN},
        {"ntasks", required_argument, NULL, OPT_NTASKS},
        {"order", required_argument, NULL, OPT_ORDER},
        {"output", required_argument, NULL, 'o'},
        {"distance", required_argument, NULL, OPT_DISTANCE},
        {"seed", required_argument, NULL, OPT_SEED},
        {"moves", required_argument, NULL, OPT_MOVES},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    if (argc < 2)
        usage_error("missing command (check, gen, show, eval or opt)");
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        printf("%s%s", usage_text, help_text);
        exit(EXIT_SUCCESS);
    }
    if (!strcmp(argv[1], "--version")) {
        printf("torx-map (torx) %s\n", torx_version());
        exit(EXIT_SUCCESS);
    }
    if (!strcmp(argv[1], "check"))
        o->cmd = CMD_CHECK;
    else if (!strcmp(argv[1], "gen"))
        o->cmd = CMD_GEN;
    else if (!strcmp(argv[1], "show"))
        o->cmd = CMD_SHOW;
    else if (!strcmp(argv[1], "eval"))
        o->cmd = CMD_EVAL;
    else if (!strcmp(argv[1], "opt"))
        o->cmd = CMD_OPT;
    else
        usage_error("unknown command '%s' (expected check, gen, show, eval or opt)", argv[1]);
    const char *cmdname = argv[1];

    optind = 2; /* past the command; getopt prefixes its messages with argv[0] */
    int c;
    while ((c = getopt_long(argc, argv, "ho:", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_TORUS:
            o->torus = optarg;
            break;
        case OPT_MODE:
            o->mode = optarg;
            break;
        case OPT_TPN:
            o->tasks_per_node = parse_long("--tasks-per-node", optarg, 1, 255);
            break;
        case OPT_NTASKS:
            if (o->cmd == CMD_EVAL || o->cmd == CMD_OPT)
                usage_error("--ntasks is not for %s: the matrix's rows give the job size", cmdname);
            o->ntasks = parse_long("--ntasks", optarg, 1, INT_MAX);
            break;
        case OPT_SEED:
        case OPT_MOVES:
            if (o->cmd != CMD_OPT)
                usage_error("--%s is for opt only", c == OPT_SEED ? "seed" : "moves");
            if (c == OPT_SEED)
                o->seed = parse_long("--seed", optarg, 1, LONG_MAX);
            else
                o->moves = parse_long("--moves", optarg, 1, LONG_MAX);
            break;
        case OPT_ORDER:
            if (o->cmd != CMD_GEN)
                usage_error("--order is for gen; %s takes the order as its argument", cmdname);
            o->order = optarg;
            break;
        case 'o':
            if (o->cmd != CMD_GEN && o->cmd != CMD_OPT)
                usage_error("-o/--output is for gen and opt only");
            o->output = optarg;
            break;
        case OPT_DISTANCE: {
            if (o->cmd != CMD_SHOW)
                usage_error("--distance is for show only");
            /* Two ranks: "A B" (B is the next word, taken here so getopt
             * does not see it as a positional argument) or "A,B". */
            char a[32];
            const char *comma = strchr(optarg, ',');
            const char *b;
            if (comma) {
                snprintf(a, sizeof a, "%.*s", (int)(comma - optarg), optarg);
                b = comma + 1;
            } else {
                if (optind >= argc)
                    usage_error("--distance needs two ranks: --distance A B");
                snprintf(a, sizeof a, "%s", optarg);
                b = argv[optind++];
            }
            o->dist_a = parse_long("--distance", a, 0, INT_MAX);
            o->dist_b = parse_long("--distance", b, 0, INT_MAX);
            break;
        }
        case 'h':
            printf("%s%s", usage_text, help_text);
            exit(EXIT_SUCCESS);
        default: /* getopt has said what was wrong */
            fprintf(stderr, "%sRun '%s --help' for more.\n", usage_text, prog);
            exit(EXIT_USAGE);
        }
    }

    int npos = argc - optind;
    if (o->cmd == CMD_GEN) {
        if (npos != 0)
            usage_error("gen takes no file or order argument ('%s'); use --order or -o",
                        argv[optind]);
    } else if (o->cmd == CMD_EVAL) {
        if (npos < 1)
            usage_error("eval takes a MATRIX argument, then the mappings (FILE or ORDER) to "
                        "weigh");
        o->spec = argv[optind];
        o->specs = argv + optind + 1;
        o->nspecs = npos - 1;
    } else if (o->cmd == CMD_OPT) {
        if (npos != 1)
            usage_error("opt takes one MATRIX argument, got %d", npos);
        o->spec = argv[optind];
    } else {
        if (npos != 1)
            usage_error("%s takes one %s argument, got %d", cmdname,
                        o->cmd == CMD_CHECK ? "FILE" : "FILE or ORDER", npos);
        o->spec = argv[optind];
    }
}

/* Tasks per node from --tasks-per-node, --mode, or $TORX_MODE like a job. */
static int tasks_per_node(const options_t *o)
{
    static const char *const modes[] = {"heater", "co", "vn", NULL};
    int mode;
    const char *from = "--mode";
    if (o->mode) {
        for (mode = 0; modes[mode] && strcmp(o->mode, modes[mode]); mode++)
            ;
        if (!modes[mode])
            usage_error("--mode '%s': expected heater, co or vn", o->mode);
    } else {
        if (torx_env_choice("TORX_MODE", modes, 0, &mode) != TORX_OK)
            map_error();
        from = "TORX_MODE";
    }
    if (mode == 2) { /* vn: one task per core of the node */
        long cores;
        if (o->tasks_per_node)
            return (int)o->tasks_per_node;
        if (torx_env_int("TORX_CORES_PER_NODE", 1, 255, 2, &cores) != TORX_OK)
            map_error();
        return (int)cores;
    }
    if (o->tasks_per_node > 1 && o->mode)
        usage_error("%s %s runs 1 task per node; --tasks-per-node %ld contradicts it", from,
                    modes[mode], o->tasks_per_node);
    return o->tasks_per_node ? (int)o->tasks_per_node : 1;
}

/* The torus from --torus or $TORX_TORUS (parsed by libtorx, as in a job),
 * else derived from --ntasks. */
static torx_shape_t shape_of(const options_t *o, int tpn)
{
    torx_shape_t shape;
    const char *env = getenv("TORX_TORUS");
    if (o->torus) {
        if (setenv("TORX_TORUS", o->torus, 1) != 0) {
            fprintf(stderr, "%s: setenv TORX_TORUS: %s\n", prog, strerror(errno));
            exit(EXIT_BAD_MAP);
        }
    } else if ((!env || !*env) && !o->ntasks) {
        usage_error("needs --torus XxYxZ (or TORX_TORUS, or --ntasks to derive the shape)");
    }
    /* eval, opt: with no torus given, the shape a job of the matrix's size
     * would take. */
    /* With a torus given, the slot check against the job is the map's. */
    int n = o->torus || (env && *env) ? 1 : (int)o->ntasks;
    if (torx_env_shape(n, tpn, &shape) != TORX_OK) {
        const char *msg = torx_last_error();
        if (o->torus && !strncmp(msg, "torx: ", 6))
            fprintf(stderr, "%s: --torus %s: %s\n", prog, o->torus, msg + 6);
        else
            fprintf(stderr, "%s\n", msg);
        exit(EXIT_BAD_MAP);
    }
    return shape;
}

static int cmd_check(const options_t *o, torx_shape_t shape)
{
    torx_map_t map;
    if (torx_map_from_file(o->spec, shape, (int)o->ntasks, &map) != TORX_OK)
        map_error();
    printf("%s: ok (%d rank%s on %ux%ux%u, %u task%s per node)\n", o->spec, map.ntasks,
           plural(map.ntasks), shape.x, shape.y, shape.z, shape.t, plural(shape.t));
    torx_map_free(&map);
    return EXIT_SUCCESS;
}

/* Opens gen's and opt's output (-o FILE, else stdout) and writes the
 * command that made the file as its first line, so it can be made again;
 * NULL (reported) if the file cannot be created. */
static FILE *open_output(const options_t *o, int argc, char **argv)
{
    FILE *out = o->output ? fopen(o->output, "w") : stdout;
    if (!out) {
        fprintf(stderr, "%s: cannot create %s: %s\n", prog, o->output, strerror(errno));
        return NULL;
    }
    fputs("# torx-map", out);
    for (int i = 1; i < argc; i++) {
        fputc(' ', out);
        for (const char *p = argv[i]; *p; p++)
            fputc(*p == '\n' || *p == '\r' ? ' ' : *p, out);
    }
    fputc('\n', out);
    return out;
}

/* Writes the map's rank lines to out and closes it (unless stdout):
 * EXIT_SUCCESS, or EXIT_BAD_MAP (reported). */
static int write_map(const options_t *o, const torx_map_t *map, FILE *out)
{
    int rc = EXIT_SUCCESS;
    if (torx_map_write(map, out) != TORX_OK) {
        fprintf(stderr, "%s\n", torx_last_error());
        rc = EXIT_BAD_MAP;
    }
    if (out != stdout && fclose(out) != 0 && rc == EXIT_SUCCESS) {
        fprintf(stderr, "%s: writing %s: %s\n", prog, o->output, strerror(errno));
        rc = EXIT_BAD_MAP;
    }
    return rc;
}

static int cmd_gen(const options_t *o, torx_shape_t shape, int argc, char **argv)
{
    torx_map_t map;
    int ntasks = o->ntasks ? (int)o->ntasks : (int)torx_shape_slots(shape);
    if (torx_map_from_order(o->order ? o->order : "XYZT", shape, ntasks, &map) != TORX_OK)
        map_error();
    FILE *out = open_output(o, argc, argv);
    if (!out) {
        torx_map_free(&map);
        return EXIT_BAD_MAP;
    }
    int rc = write_map(o, &map, out);
    if (rc != EXIT_SUCCESS && o->output)
        remove(o->output); /* no half-written map for a job to pick up */
    torx_map_free(&map);
    return rc;
}

static int cmd_show(const options_t *o, torx_shape_t shape)
{
    torx_map_t map;
    if (torx_map_from_spec(o->spec, NULL, shape, (int)o->ntasks, &map) != TORX_OK)
        map_error();
    if (o->dist_a >= 0) {
        if (o->dist_a >= map.ntasks || o->dist_b >= map.ntasks) {
            fprintf(stderr, "%s: --distance %ld %ld: rank %ld is not in the job (ranks 0..%d)\n",
                    prog, o->dist_a, o->dist_b, o->dist_a >= map.ntasks ? o->dist_a : o->dist_b,
                    map.ntasks - 1);
            torx_map_free(&map);
            return EXIT_USAGE;
        }
        int a = (int)o->dist_a, b = (int)o->dist_b;
        torx_coord_t p = torx_map_coord(&map, a), q = torx_map_coord(&map, b);
        unsigned hops = torx_map_distance(&map, a, b);
        printf("rank %d (%u,%u,%u,%u) to rank %d (%u,%u,%u,%u): %u hop%s\n", a, p.x, p.y, p.z, p.t,
               b, q.x, q.y, q.z, q.t, hops, plural(hops));
    } else {
        printf("# %d rank%s on %ux%ux%u, %u task%s per node, %s %s\n", map.ntasks,
               plural(map.ntasks), shape.x, shape.y, shape.z, shape.t, plural(shape.t),
               map.order[0] ? "order" : "file", map.order[0] ? map.order : map.path);
        printf("rank -> (x,y,z,t)\n");
        for (int r = 0; r < map.ntasks; r++) {
            torx_coord_t c = torx_map_coord(&map, r);
            printf("%4d -> (%u,%u,%u,%u)\n", r, c.x, c.y, c.z, c.t);
        }
    }
    torx_map_free(&map);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "%s: writing standard output: %s\n", prog, strerror(errno));
        return EXIT_BAD_MAP;
    }
    return EXIT_SUCCESS;
}

/* "hop_bytes=H bytes=B hops_per_byte=X local_bytes=L", as the TORX_STATS
 * traffic lines print them. */
static void print_hop_bytes(FILE *out, const char *prefix, const torx_hop_bytes_t *h)
{
    fprintf(out, "%shop_bytes=%llu bytes=%llu hops_per_byte=%.3f local_bytes=%llu\n", prefix,
            (unsigned long long)h->hop_bytes, (unsigned long long)h->bytes, torx_hops_per_byte(h),
            (unsigned long long)h->local_bytes);
}

static int flush_stdout(void)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "%s: writing standard output: %s\n", prog, strerror(errno));
        return EXIT_BAD_MAP;
    }
    return EXIT_SUCCESS;
}

static int cmd_eval(const options_t *o, torx_shape_t shape, const torx_traffic_t *t)
{
    static char *const xyzt[] = {"XYZT"};
    char *const *specs = o->nspecs ? o->specs : xyzt;
    const int nspecs = o->nspecs ? o->nspecs : 1;
    printf("# %s: %d rank%s on %ux%ux%u, %u task%s per node\n", o->spec, t->ntasks,
           plural(t->ntasks), shape.x, shape.y, shape.z, shape.t, plural(shape.t));
    int rc = EXIT_SUCCESS;
    for (int i = 0; i < nspecs; i++) {
        torx_map_t map;
        torx_hop_bytes_t hb;
        if (torx_map_from_spec(specs[i], NULL, shape, t->ntasks, &map) != TORX_OK ||
            torx_map_hop_bytes(&map, t, &hb) != TORX_OK) {
            /* Say which mapping failed, go on with the others, exit 1. */
            fflush(stdout);
            fprintf(stderr, "%s\n", torx_last_error());
            torx_map_free(&map);
            rc = EXIT_BAD_MAP;
            continue;
        }
        char prefix[PATH_MAX + 8];
        snprintf(prefix, sizeof prefix, "%s: ", specs[i]);
        print_hop_bytes(stdout, prefix, &hb);
        torx_map_free(&map);
    }
    const int frc = flush_stdout();
    return rc != EXIT_SUCCESS ? rc : frc;
}

/* Reads the file opt wrote back as a job would, and checks that it holds
 * the map and its hop-bytes: opt never leaves a file a job would reject. */
static int opt_verify(const char *path, const torx_map_t *want, const torx_traffic_t *t,
                      const torx_hop_bytes_t *hb)
{
    torx_map_t got;
    torx_hop_bytes_t ghb;
    if (torx_map_from_file(path, want->shape, want->ntasks, &got) != TORX_OK) {
        fprintf(stderr, "%s: internal error: the map written to %s does not read back: %s\n", prog,
                path, torx_last_error());
        return 0;
    }
    int same = torx_map_hop_bytes(&got, t, &ghb) == TORX_OK && ghb.hop_bytes == hb->hop_bytes;
    for (int r = 0; same && r < want->ntasks; r++)
        same = torx_coord_equal(got.coord[r], want->coord[r]);
    torx_map_free(&got);
    if (!same)
        fprintf(stderr, "%s: internal error: the map written to %s reads back different\n", prog,
                path);
    return same;
}

static int cmd_opt(const options_t *o, torx_shape_t shape, const torx_traffic_t *t, int argc,
                   char **argv)
{
    const torx_map_opt_attr_t attr = {.seed = o->seed > 0 ? (uint64_t)o->seed : 1,
                                      .moves = o->moves > 0 ? (uint64_t)o->moves : 0};
    torx_map_t map;
    torx_map_opt_report_t rep;
    if (torx_map_optimize(t, shape, &attr, &map, &rep) != TORX_OK)
        map_error();
    FILE *out = open_output(o, argc, argv);
    if (!out) {
        torx_map_free(&map);
        return EXIT_BAD_MAP;
    }
    fprintf(out, "# seed %llu, %llu annealing moves tried, %llu taken\n",
            (unsigned long long)attr.seed, (unsigned long long)rep.moves,
            (unsigned long long)rep.accepted);
    print_hop_bytes(out, "# XYZT:       ", &rep.xyzt);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "# best order %s: ", rep.best_order);
    print_hop_bytes(out, prefix, &rep.order);
    if (rep.greedy_ran)
        print_hop_bytes(out, "# greedy:     ", &rep.greedy);
    else
        fputs("# greedy:     skipped (too many slots x partners)\n", out);
    print_hop_bytes(out, "# this map:   ", &rep.result);
    int rc = write_map(o, &map, out);
    if (rc == EXIT_SUCCESS && o->output && !opt_verify(o->output, &map, t, &rep.result))
        rc = EXIT_BAD_MAP;
    if (rc != EXIT_SUCCESS && o->output)
        remove(o->output); /* no half-written or wrong map for a job to pick up */
    if (rc == EXIT_SUCCESS && o->output) {
        printf("%s: %d rank%s on %ux%ux%u, %u task%s per node\n", o->output, map.ntasks,
               plural(map.ntasks), shape.x, shape.y, shape.z, shape.t, plural(shape.t));
        print_hop_bytes(stdout, "XYZT: ", &rep.xyzt);
        snprintf(prefix, sizeof prefix, "%s (best order): ", rep.best_order);
        print_hop_bytes(stdout, prefix, &rep.order);
        print_hop_bytes(stdout, "opt: ", &rep.result);
        rc = flush_stdout();
    }
    torx_map_free(&map);
    return rc;
}

int main(int argc, char **argv)
{
    options_t o = {.dist_a = -1, .dist_b = -1, .seed = -1, .moves = -1};
    parse_args(argc, argv, &o);
    int tpn = tasks_per_node(&o);
    torx_traffic_t traffic = {.ntasks = 0};
    if (o.cmd == CMD_EVAL || o.cmd == CMD_OPT) {
        if (torx_traffic_read(o.spec, &traffic) != TORX_OK)
            map_error();
        o.ntasks = traffic.ntasks; /* derives the shape when no torus is given */
    }
    torx_shape_t shape = shape_of(&o, tpn);
    int rc;
    switch (o.cmd) {
    case CMD_EVAL:
        rc = cmd_eval(&o, shape, &traffic);
        torx_traffic_free(&traffic);
        return rc;
    case CMD_OPT:
        rc = cmd_opt(&o, shape, &traffic, argc, argv);
        torx_traffic_free(&traffic);
        return rc;
    case CMD_CHECK:
        return cmd_check(&o, shape);
    case CMD_GEN:
        return cmd_gen(&o, shape, argc, argv);
    case CMD_SHOW:
        return cmd_show(&o, shape);
    }
    return EXIT_USAGE;
}
