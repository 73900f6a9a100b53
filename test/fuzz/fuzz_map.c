/* libFuzzer harness: the mapping-file and order-string parsers
 * (mapping/map.c), as torx_init and torx-map meet them.
 *
 * Input: [x][y][z][tasks per node][ntasks][mode] then the rest, which is
 * tried both as an order string (TORX_MAPPING=TXYZ style) and as the
 * contents of a mapping file. A map the parser accepts must be a real one:
 * every rank on a distinct coordinate inside the torus, and torx_map_rank
 * must invert it. */
#define _GNU_SOURCE /* memfd_create */
#include <torx/map.h>
#include <torx/packet.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int memfd = -1;
static char path[64];

static void check_map(const torx_map_t *m, int ntasks)
{
    if (ntasks > 0 && m->ntasks != ntasks)
        abort();
    for (int r = 0; r < m->ntasks; r++) {
        const torx_coord_t c = m->coord[r];
        if (!torx_coord_in_shape(m->shape, c) || torx_map_rank(m, c) != r)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 6)
        return 0;
    if (memfd < 0) {
        memfd = memfd_create("fuzz_map", 0);
        if (memfd < 0)
            abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", memfd);
    }
    /* Small shapes: a large one only costs time in the slot arrays. */
    const torx_shape_t shape = {.x = (uint8_t)(data[0] % 9), .y = (uint8_t)(data[1] % 5),
                                .z = (uint8_t)(data[2] % 5), .t = (uint8_t)(data[3] % 4)};
    const int ntasks = data[4] % 40; /* 0: the file says how many */
    data += 6;
    size -= 6;

    /* As an order string (NUL-terminated copy). */
    char order[16];
    const size_t on = size < sizeof order - 1 ? size : sizeof order - 1;
    memcpy(order, data, on);
    order[on] = 0;
    torx_map_t m;
    if (torx_map_order_valid(order) && ntasks > 0 &&
        torx_map_from_order(order, shape, ntasks, &m) == TORX_OK) {
        check_map(&m, ntasks);
        torx_map_free(&m);
    }

    /* As a file. */
    if (ftruncate(memfd, 0) != 0 || pwrite(memfd, data, size, 0) != (ssize_t)size)
        abort();
    if (torx_map_from_file(path, shape, ntasks, &m) == TORX_OK) {
        check_map(&m, ntasks);
        torx_map_free(&m);
    } else if (!strstr(torx_last_error(), "torx: ")) {
        abort(); /* a refusal must say why */
    }
    return 0;
}
