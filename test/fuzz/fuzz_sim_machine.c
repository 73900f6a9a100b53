/* libFuzzer harness: the sim device's machine-file reader
 * (src/packet/sim/sim_machine.c).
 *
 * Input: the bytes of a machine file, read twice: from a memfd through
 * torxp_sim_machine_load (a path, so NUL bytes and the size limit are met)
 * and, up to the first NUL, through torxp_sim_machine_parse. A refusal must
 * say why, name the machine file and leave the machine zeroed. An accepted
 * machine must hold what the format promises: a valid name, every value in
 * its range, the dma keys set exactly with bulk dma, whole chunks in a
 * packet and room for torx's payload. When the input has no NUL, both reads
 * must agree. */
#define _GNU_SOURCE /* memfd_create */
#include "packet/sim/sim_machine.h"

#include <torx/packet.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int memfd = -1;
static char path[64];

static void check_refused(const torxp_sim_machine_t *m, const char *file)
{
    const char *msg = torx_last_error();
    char want[96];
    snprintf(want, sizeof want, "torx: machine file %s", file);
    if (strncmp(msg, want, strlen(want)) != 0)
        abort(); /* a refusal names the file */
    if (m->name[0] || m->path[0] || m->cores_per_node || m->clock != 0 || m->packet_bytes ||
        m->cpu_match != 0 || m->bulk != TORXP_SIM_BULK_NONE)
        abort(); /* and holds nothing */
}

static int in(double x, double lo, double hi)
{
    return x >= lo && x <= hi;
}

static void check_accepted(const torxp_sim_machine_t *m)
{
    const size_t n = strlen(m->name);
    if (n < 1 || n > TORXP_SIM_NAME_MAX ||
        strspn(m->name, "abcdefghijklmnopqrstuvwxyz0123456789_-") != n)
        abort();
    if (m->cores_per_node < 1 || m->cores_per_node > 64 || !in(m->clock, 1e6, 1e11))
        abort();
    if (!in(m->link_bandwidth, 1e3, 1e12) || !in(m->hop_latency, 0, 1) ||
        !in(m->cn_bandwidth, 1e3, 1e12) || !in(m->cn_hop_latency, 0, 1) || !in(m->gi_latency, 0, 1))
        abort();
    if (m->packet_chunk < 1 || m->packet_bytes % m->packet_chunk ||
        m->packet_bytes - m->packet_header < TORX_PKT_MAX_PAYLOAD ||
        m->packet_header >= m->packet_bytes || m->packet_bytes > 65536 || m->link_overhead > 65536)
        abort();
    if (m->injection_fifo_packets < 1 || m->injection_fifo_packets > 1024 ||
        m->reception_fifo_packets < 1 || m->reception_fifo_packets > 65536 || m->cn_fanout < 1 ||
        m->cn_fanout > 16)
        abort();
    const double cpu[] = {m->cpu_inject_packet, m->cpu_receive_packet, m->cpu_poll_empty,
                          m->cpu_match,         m->cpu_copy_byte,      m->cpu_cn_packet,
                          m->cpu_bulk_start};
    for (size_t i = 0; i < sizeof cpu / sizeof cpu[0]; i++)
        if (!in(cpu[i], 0, 1e9))
            abort();
    if (m->bulk == TORXP_SIM_BULK_DMA) {
        if (!in(m->dma_bandwidth, 1e3, 1e12) || !in(m->dma_local_bandwidth, 1e3, 1e12) ||
            !in(m->dma_startup, 0, 1))
            abort();
    } else if (m->bulk != TORXP_SIM_BULK_NONE || m->dma_bandwidth != 0 ||
               m->dma_local_bandwidth != 0 || m->dma_startup != 0 || m->cpu_bulk_start != 0) {
        abort();
    }
    /* the helpers on what the reader accepted */
    const unsigned wire = torxp_sim_wire_bytes(m, TORX_PKT_MAX_PAYLOAD);
    if (wire < TORX_PKT_MAX_PAYLOAD + m->packet_header || wire > m->packet_bytes + m->link_overhead)
        abort();
    if (!(torxp_sim_cycles_s(m, 1) > 0))
        abort();
}

/* Every field but the path (struct padding is not compared). */
static int same_machine(const torxp_sim_machine_t *a, const torxp_sim_machine_t *b)
{
#define SAME(f) (a->f == b->f)
    return !strcmp(a->name, b->name) && SAME(cores_per_node) && SAME(clock) &&
           SAME(link_bandwidth) && SAME(hop_latency) && SAME(packet_bytes) && SAME(packet_chunk) &&
           SAME(packet_header) && SAME(link_overhead) && SAME(injection_fifo_packets) &&
           SAME(reception_fifo_packets) && SAME(bulk) && SAME(dma_bandwidth) &&
           SAME(dma_local_bandwidth) && SAME(dma_startup) && SAME(cn_bandwidth) &&
           SAME(cn_hop_latency) && SAME(cn_fanout) && SAME(gi_latency) && SAME(cpu_inject_packet) &&
           SAME(cpu_receive_packet) && SAME(cpu_poll_empty) && SAME(cpu_match) &&
           SAME(cpu_copy_byte) && SAME(cpu_cn_packet) && SAME(cpu_bulk_start);
#undef SAME
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (memfd < 0) {
        memfd = memfd_create("fuzz_sim_machine", 0);
        if (memfd < 0)
            abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", memfd);
    }
    if (ftruncate(memfd, 0) != 0 || pwrite(memfd, data, size, 0) != (ssize_t)size)
        abort();
    torxp_sim_machine_t loaded, parsed;
    const torx_status_t rl = torxp_sim_machine_load(path, &loaded);
    if (rl == TORX_OK)
        check_accepted(&loaded);
    else if (rl == TORX_ERR_INVAL)
        check_refused(&loaded, path);
    else
        abort(); /* the memfd is always readable */

    char *text = malloc(size + 1);
    if (!text)
        abort();
    memcpy(text, data, size);
    text[size] = '\0';
    const torx_status_t rp = torxp_sim_machine_parse(text, "fuzz", &parsed);
    free(text);
    if (rp == TORX_OK)
        check_accepted(&parsed);
    else if (rp == TORX_ERR_INVAL)
        check_refused(&parsed, "fuzz");
    else
        abort();

    /* Without a NUL and within the size limit, both reads see the same text. */
    if (!memchr(data, 0, size) && size <= TORXP_SIM_FILE_MAX) {
        if (rl != rp)
            abort();
        if (rl == TORX_OK && !same_machine(&loaded, &parsed))
            abort();
    }
    return 0;
}
