/* libFuzzer harness: the TORX_* environment parsers (src/packet/env.c):
 * torx_env_int, torx_env_choice, torx_env_shape and the packet layer's own
 * variables (torxp_env_read), with values taken from the input.
 *
 * Input: NUL- or newline-separated values for TORX_TORUS, TORX_FIFO_PACKETS,
 * TORX_CHAOS, TORX_BULK, TORX_VERBOSE, TORX_MODE, then two bytes of task
 * counts. What a parser accepts must be in range; what it refuses must come
 * with a message naming the variable. */
#include "packet/pkt_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const names[] = {"TORX_TORUS", "TORX_FIFO_PACKETS", "TORX_CHAOS",
                                    "TORX_BULK",  "TORX_VERBOSE",      "TORX_MODE"};
enum { NVARS = sizeof names / sizeof names[0] };

/* A refusal names the variable it refused. */
static void expect_named(const char *name)
{
    if (!strstr(torx_last_error(), name))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char buf[4096];
    if (size >= sizeof buf)
        size = sizeof buf - 1;
    memcpy(buf, data, size);
    buf[size] = 0;
    char *p = buf, *end = buf + size;
    for (int i = 0; i < NVARS; i++) {
        char *v = p;
        while (p < end && *p && *p != '\n')
            p++;
        const int last = p >= end;
        *p = 0;
        setenv(names[i], v, 1);
        if (!last)
            p++;
    }
    const int ntasks = size >= 2 ? (uint8_t)data[size - 2] : 1;
    const int tpn = size >= 1 ? 1 + data[size - 1] % 4 : 1;

    torx_shape_t s;
    if (torx_env_shape(ntasks, tpn, &s) == TORX_OK) {
        if (s.t != tpn || torx_shape_slots(s) < (unsigned)ntasks)
            abort();
    } else if (ntasks > 0) {
        expect_named("TORX_");
    }
    long v;
    if (torx_env_int("TORX_FIFO_PACKETS", 16, 65536, 128, &v) == TORX_OK) {
        if (v < 16 || v > 65536)
            abort();
    } else {
        expect_named("TORX_FIFO_PACKETS");
    }
    static const char *const modes[] = {"heater", "co", "vn", NULL};
    int m;
    if (torx_env_choice("TORX_MODE", modes, 0, &m) == TORX_OK) {
        if (m < 0 || m > 2)
            abort();
    } else {
        expect_named("TORX_MODE");
    }
    torxp_env_t env;
    if (torxp_env_read(&env) == TORX_OK) {
        if (env.fifo_packets < 16 || env.fifo_packets > 65536 ||
            (env.fifo_packets & (env.fifo_packets - 1)) || env.chaos_seed < 0)
            abort();
    } else {
        expect_named("TORX_");
    }
    return 0;
}
