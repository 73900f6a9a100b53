/* The list arguments of the sim benchmarks (sim_pingpong, sim_links):
 * comma-separated protocol names or whole numbers. */
#ifndef TORX_BENCH_SIM_ARGS_H
#define TORX_BENCH_SIM_ARGS_H

#include <torx/msg.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const sim_proto_names[] = {"auto", "onepkt", "eager", "adaptive", "rzv"};
static const torx_protocol_t sim_proto_ids[] = {
    TORX_PROTO_AUTO, TORX_PROTO_ONEPKT, TORX_PROTO_EAGER, TORX_PROTO_ADAPTIVE, TORX_PROTO_RZV};

/* Parses s into out[0..max): indices into sim_proto_names when what is
 * "protocol", else whole numbers from lo to hi. The count, or -1 after a
 * message from prog naming what is wrong (an empty list included). */
static inline int sim_parse_list(const char *prog, const char *s, long *out, int max,
                                 const char *what, long lo, long hi)
{
    int n = 0;
    char *copy = strdup(s), *save = NULL;
    if (!copy)
        return -1;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long v = -1;
        if (!strcmp(what, "protocol")) {
            for (int i = 0; i < 5; i++)
                if (!strcmp(tok, sim_proto_names[i]))
                    v = i;
        } else {
            char *end;
            v = strtol(tok, &end, 10);
            if (*end || v < lo || v > hi)
                v = -1;
        }
        if (v < 0 || n == max) {
            if (n == max)
                fprintf(stderr, "%s: more than %d %ss\n", prog, max, what);
            else if (!strcmp(what, "protocol"))
                fprintf(stderr, "%s: bad protocol '%s' (auto, onepkt, eager, adaptive or rzv)\n",
                        prog, tok);
            else
                fprintf(stderr, "%s: bad %s '%s' (a whole number from %ld to %ld)\n", prog, what,
                        tok, lo, hi);
            free(copy);
            return -1;
        }
        out[n++] = v;
    }
    free(copy);
    if (n == 0)
        fprintf(stderr, "%s: empty %s list\n", prog, what);
    return n ? n : -1;
}

#endif /* TORX_BENCH_SIM_ARGS_H */
