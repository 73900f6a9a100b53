/* libFuzzer harness: the traffic-matrix reader and the mapping optimizer
 * (mapping/map_traffic.c), as torx-map eval and opt meet them.
 *
 * Input: [x][y][z][tasks per node][seed] then the rest, the contents of a
 * traffic file (through a memfd). A refusal must say why. An accepted
 * matrix must be square with a row per rank; on a small torus that holds
 * it, its hop-bytes under XYZT are computed, and the optimizer's map must
 * be a valid one (every rank on a distinct slot in the torus), weighed as
 * reported, and never worse than XYZT. */
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 5)
        return 0;
    if (memfd < 0) {
        memfd = memfd_create("fuzz_traffic", 0);
        if (memfd < 0)
            abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", memfd);
    }
    /* Small shapes: the optimizer's work grows with the slots. */
    const torx_shape_t shape = {.x = (uint8_t)(1 + data[0] % 6),
                                .y = (uint8_t)(1 + data[1] % 4),
                                .z = (uint8_t)(1 + data[2] % 3),
                                .t = (uint8_t)(1 + data[3] % 3)};
    const uint64_t seed = data[4];
    data += 5;
    size -= 5;
    if (ftruncate(memfd, 0) != 0 || pwrite(memfd, data, size, 0) != (ssize_t)size)
        abort();
    torx_traffic_t t;
    if (torx_traffic_read(path, &t) != TORX_OK) {
        if (!strstr(torx_last_error(), "torx: ") || t.bytes || t.ntasks)
            abort(); /* a refusal says why and holds nothing */
        return 0;
    }
    if (t.ntasks < 1 || t.ntasks > TORX_TRAFFIC_MAX_RANKS || !t.bytes)
        abort();
    if ((unsigned)t.ntasks <= torx_shape_slots(shape)) {
        torx_map_t xyzt, m;
        torx_hop_bytes_t hx, hm;
        if (torx_map_from_order("XYZT", shape, t.ntasks, &xyzt) != TORX_OK)
            abort();
        const torx_status_t rx = torx_map_hop_bytes(&xyzt, &t, &hx);
        torx_map_free(&xyzt);
        const torx_map_opt_attr_t attr = {.seed = seed + 1, .moves = 2000};
        torx_map_opt_report_t rep;
        if (rx == TORX_OK) {
            if (torx_map_optimize(&t, shape, &attr, &m, &rep) != TORX_OK)
                abort(); /* XYZT fits and weighs: the optimizer must succeed */
            if (m.ntasks != t.ntasks || rep.xyzt.hop_bytes != hx.hop_bytes)
                abort();
            for (int r = 0; r < m.ntasks; r++)
                if (!torx_coord_in_shape(shape, m.coord[r]) || torx_map_rank(&m, m.coord[r]) != r)
                    abort();
            if (torx_map_hop_bytes(&m, &t, &hm) != TORX_OK ||
                hm.hop_bytes != rep.result.hop_bytes || hm.hop_bytes > hx.hop_bytes)
                abort();
            torx_map_free(&m);
        }
    }
    torx_traffic_free(&t);
    return 0;
}
