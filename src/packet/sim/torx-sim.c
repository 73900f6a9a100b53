/* torx-sim: runs a message-layer program on a modelled Blue Gene torus
 * (docs/sim.md, torx-sim(1)).
 *
 *   torx-sim --torus XxYxZ | --mesh XxYxZ [--mode heater|co|vn] [--map ORDER|FILE]
 *            [--machine NAME|FILE] [--seed N] [--links FILE] PROGRAM [ARGS...]
 *
 * It checks its arguments and the machine file, sets the environment the
 * tasks read (TORX_DEVICE=sim, TORX_TORUS, TORX_MODE, TORX_MAPPING,
 * TORX_SIM_*), preloads libtorx-simrun and executes PROGRAM, whose main
 * then runs once per task in one process. */
#include "sim_machine.h"

#include <torx/version.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef TORX_SIM_PRELOAD
#define TORX_SIM_PRELOAD "libtorx-simrun.so"
#endif

static void usage(FILE *to)
{
    fprintf(to, "usage: torx-sim --torus XxYxZ | --mesh XxYxZ [--mode heater|co|vn]\n"
                "                [--map ORDER|FILE] [--machine NAME|FILE] [--seed N]\n"
                "                [--links FILE] PROGRAM [ARGS...]\n"
                "Runs a torx message-layer program with one task per node (vn: one per\n"
                "core) on a modelled Blue Gene torus, in simulated time. See torx-sim(1).\n");
}

static int die(const char *fmt, const char *arg)
{
    fprintf(stderr, "torx-sim: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    return 2;
}

/* "XxYxZ", each 1..255. */
static int parse_dims(const char *s, unsigned d[3])
{
    const char *p = s;
    for (int i = 0; i < 3; i++) {
        char *end;
        errno = 0;
        const unsigned long v = strtoul(p, &end, 10);
        if (end == p || errno || v < 1 || v > 255 || *p == '-' || *p == '+')
            return -1;
        d[i] = (unsigned)v;
        if (i < 2 && *end != 'x')
            return -1;
        if (i == 2 && *end)
            return -1;
        p = end + 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *dims_arg = NULL, *mode = "heater", *map = NULL, *machine = "bgl", *seed = "1",
               *links = NULL;
    int mesh = 0, i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *opt = argv[i];
        if (!strcmp(opt, "--help") || !strcmp(opt, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(opt, "--version")) {
            printf("torx-sim %s\n", torx_version());
            return 0;
        }
        if (!strcmp(opt, "--")) {
            i++;
            break;
        }
        if (i + 1 >= argc)
            return die("%s needs a value (torx-sim --help)", opt);
        const char *val = argv[++i];
        if (!strcmp(opt, "--torus") || !strcmp(opt, "--mesh")) {
            if (dims_arg)
                return die("give one of --torus and --mesh, once (%s)", opt);
            dims_arg = val;
            mesh = !strcmp(opt, "--mesh");
        } else if (!strcmp(opt, "--mode")) {
            mode = val;
        } else if (!strcmp(opt, "--map")) {
            map = val;
        } else if (!strcmp(opt, "--machine")) {
            machine = val;
        } else if (!strcmp(opt, "--seed")) {
            seed = val;
        } else if (!strcmp(opt, "--links")) {
            links = val;
        } else {
            fprintf(stderr, "torx-sim: unknown option %s\n", opt);
            usage(stderr);
            return 2;
        }
    }
    if (i >= argc) {
        usage(stderr);
        return 2;
    }
    if (!dims_arg)
        return die("%s", "say the partition: --torus XxYxZ or --mesh XxYxZ");
    unsigned d[3];
    if (parse_dims(dims_arg, d) != 0)
        return die("'%s' is not a partition XxYxZ (each 1..255)", dims_arg);
    if (strcmp(mode, "heater") && strcmp(mode, "co") && strcmp(mode, "vn"))
        return die("--mode %s: expected heater, co or vn", mode);
    char *end;
    errno = 0;
    const unsigned long long seed_v = strtoull(seed, &end, 10);
    if (end == seed || *end || errno || seed_v > 0x7fffffffffffffffULL || *seed == '-')
        return die("--seed %s: expected a whole number", seed);

    torxp_sim_machine_t m;
    if (torxp_sim_machine_load(machine, &m) != TORX_OK)
        return die("%s", torx_last_error());

    const unsigned long nodes = (unsigned long)d[0] * d[1] * d[2];
    const unsigned tpn = strcmp(mode, "vn") ? 1 : (unsigned)m.cores_per_node;
    char buf[64];
    snprintf(buf, sizeof buf, "%ux%ux%u", d[0], d[1], d[2]);
    setenv("TORX_TORUS", buf, 1);
    snprintf(buf, sizeof buf, "%lu", nodes * tpn);
    setenv("TORX_SIM_TASKS", buf, 1);
    snprintf(buf, sizeof buf, "%u", (unsigned)m.cores_per_node);
    setenv("TORX_CORES_PER_NODE", buf, 1);
    setenv("TORX_DEVICE", "sim", 1);
    setenv("TORX_MODE", mode, 1);
    setenv("TORX_SIM_MACHINE", machine, 1);
    setenv("TORX_SIM_MESH", mesh ? "1" : "0", 1);
    setenv("TORX_SIM_SEED", seed, 1);
    if (links)
        setenv("TORX_SIM_LINKS", links, 1);
    if (map)
        setenv("TORX_MAPPING", map, 1);

    const char *preload = getenv("TORX_SIM_PRELOAD");
    if (!preload || !*preload)
        preload = TORX_SIM_PRELOAD;
    if (access(preload, R_OK) != 0)
        return die("cannot read %s (TORX_SIM_PRELOAD, or the installed libtorx-simrun)", preload);
    const char *old = getenv("LD_PRELOAD");
    char *pre = malloc(strlen(preload) + (old ? strlen(old) : 0) + 2);
    if (!pre)
        return die("%s", "out of memory");
    sprintf(pre, "%s%s%s", preload, old && *old ? ":" : "", old && *old ? old : "");
    setenv("LD_PRELOAD", pre, 1);
    execvp(argv[i], &argv[i]);
    fprintf(stderr, "torx-sim: cannot run %s: %s\n", argv[i], strerror(errno));
    return 127;
}
