/* The sim device's machine file (docs/sim.md#machine-files): the modelled
 * Blue Gene machine's link, packet, collective-network, global-interrupt and
 * processor-cost figures, read strictly from a `key value unit` text file.
 *
 * Plain C with no SimGrid in it, so it builds and is tested everywhere; the
 * device (C or C++) includes it. Prefix: torxp_sim_. */
#ifndef TORXP_SIM_MACHINE_H
#define TORXP_SIM_MACHINE_H

#include <torx/status.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TORXP_SIM_NAME_MAX 31    /* longest machine name (the `name` key) */
#define TORXP_SIM_PATH_MAX 4096  /* longest machine-file path, NUL included */
#define TORXP_SIM_LINE_MAX 255   /* longest line of a machine file, line end excluded */
#define TORXP_SIM_FILE_MAX 65536 /* largest machine file, in bytes */
/* router_buffer when a file leaves it out (docs/sim.md#keys) */
#define TORXP_SIM_ROUTER_BUFFER_DEFAULT 1024

/* How bulk (rendezvous) data moves: by packets the cores inject (BG/L), or
 * by a DMA engine (BG/P). */
typedef enum torxp_sim_bulk { TORXP_SIM_BULK_NONE = 0, TORXP_SIM_BULK_DMA = 1 } torxp_sim_bulk_t;

/* One machine, every value in SI units: bytes/s, seconds, Hz, bytes, and
 * processor costs in cycles of `clock` (torxp_sim_cycles_s converts). The
 * fields are named as the file's keys. */
typedef struct torxp_sim_machine {
    char name[TORXP_SIM_NAME_MAX + 1]; /* [a-z0-9_-]+ */
    char path[TORXP_SIM_PATH_MAX];     /* the file read (for reports); "" if unknown */
    unsigned cores_per_node;           /* 1..64 */
    double clock;                      /* Hz */

    /* Torus */
    double link_bandwidth;           /* B/s, each direction of each of the 6 links */
    double hop_latency;              /* s, per router passed */
    unsigned packet_bytes;           /* largest packet, link overhead excluded */
    unsigned packet_chunk;           /* packets are whole chunks; divides packet_bytes */
    unsigned packet_header;          /* bytes of a packet that carry no payload */
    unsigned link_overhead;          /* wire bytes per packet beyond the packet */
    unsigned injection_fifo_packets; /* packets a node may queue for injection */
    unsigned reception_fifo_packets; /* packets a node's reception FIFO holds */
    unsigned router_buffer;          /* bytes per router input and virtual channel */

    /* Bulk data: the dma_* fields and cpu_bulk_start are 0 with BULK_NONE */
    torxp_sim_bulk_t bulk;
    double dma_bandwidth;       /* B/s, the engine's total, shared by all links */
    double dma_local_bandwidth; /* B/s, copies within a node through the engine */
    double dma_startup;         /* s, per transfer (descriptor) */

    /* Collective network */
    double cn_bandwidth;   /* B/s, per link and direction */
    double cn_hop_latency; /* s, per tree level */
    unsigned cn_fanout;    /* children per tree node */

    /* Global interrupt */
    double gi_latency; /* s, a whole-machine barrier, constant in the model */

    /* Processor costs, cycles, charged as compute time on the task's core */
    double cpu_inject_packet;  /* inject one torus packet */
    double cpu_receive_packet; /* take one torus packet off the reception FIFO */
    double cpu_poll_empty;     /* a poll that finds nothing */
    double cpu_match;          /* match one message */
    double cpu_copy_byte;      /* per byte the message layer copies */
    double cpu_cn_packet;      /* inject or read one collective-network packet */
    double cpu_bulk_start;     /* start one bulk (DMA) transfer; 0 with BULK_NONE */
} torxp_sim_machine_t;

/* Reads a machine file. name_or_path: a path when it contains '/', else a
 * NAME looked up as DIR/NAME in each directory of TORX_SIM_MACHINE_PATH
 * (colon-separated, searched first) and then TORX_MACHINE_DIR (the installed
 * PREFIX/share/torx/machines). TORX_OK; TORX_ERR_ENV when the file cannot
 * be found or read; TORX_ERR_INVAL when its contents are wrong (the message
 * names file, line and key); TORX_ERR_NOMEM. On error *m is zeroed and
 * torx_last_error() says why. */
torx_status_t torxp_sim_machine_load(const char *name_or_path, torxp_sim_machine_t *m);

/* Parses a machine file's text (NUL-terminated); filename is what messages
 * name as the file and what m->path records. TORX_OK or TORX_ERR_INVAL, as
 * torxp_sim_machine_load. For tests and fuzzing; the device calls load. */
torx_status_t torxp_sim_machine_parse(const char *text, const char *filename,
                                      torxp_sim_machine_t *m);

/* Simulated seconds for a cost in cycles of the machine's clock. */
static inline double torxp_sim_cycles_s(const torxp_sim_machine_t *m, double cycles)
{
    return cycles / m->clock;
}

/* Bytes on the wire for a torus packet carrying payload bytes (at most
 * packet_bytes - packet_header): the header and payload rounded up to
 * whole chunks, plus the link overhead. BG/L: 240 B of payload -> 270. */
static inline unsigned torxp_sim_wire_bytes(const torxp_sim_machine_t *m, unsigned payload)
{
    const unsigned chunks = (m->packet_header + payload + m->packet_chunk - 1) / m->packet_chunk;
    return chunks * m->packet_chunk + m->link_overhead;
}

#ifdef __cplusplus
}
#endif

#endif /* TORXP_SIM_MACHINE_H */
