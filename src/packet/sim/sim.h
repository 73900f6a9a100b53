/* The sim device: a Blue Gene torus modelled in simulated time, its tasks
 * SimGrid actors of one process (docs/sim.md).
 *
 *   sim_job.c   the job: SimGrid's engine, one actor per task (and per
 *               communication thread), the bootstrap, per-task state of
 *               libtorx, private program data, blocking and waking
 *   sim_net.c   the network model: links, routes, packets in flight,
 *               deposit lines, the collective network, the global interrupt
 *   sim_dev.c   the packet-layer ops over both
 *
 * Prefix: torxp_sim_ (shared by the files), sim_ (static). */
#ifndef TORXP_SIM_H
#define TORXP_SIM_H

#include "../pkt_internal.h"
#include "sim_machine.h"

#include <simgrid/actor.h>
#include <simgrid/semaphore.h>

#include <stdint.h>
#include <stdio.h>

/* ---- the job ----------------------------------------------------------- */

typedef struct torxp_sim_job torxp_sim_job_t;
typedef struct torxp_sim_task torxp_sim_task_t;

/* Who is running: one per actor. A task's communication thread is an actor
 * of its own (its own core) with the task's rank. */
typedef struct torxp_sim_actor {
    torxp_sim_job_t *job;
    int rank;
    int is_helper;            /* a communication thread, not the task's main actor */
    double owed;              /* compute time charged but not yet slept (seconds) */
    torxp_task_state_t state; /* torx_last_error, the TORX_VERBOSE cache */
    void *(*fn)(void *);      /* helper actors: what to run */
    void *arg;
    void *ret;
    sg_actor_t self;
    /* parking: each actor sleeps on a semaphore of its own, one simcall
     * a sleep (a condition's wait takes three: lock, wait, unlock) */
    sg_sem_t park;
    int parked, wake_pending;
    /* between its horizon entry and its park (torxp_sim_park); a task in
     * torxp_sim_thread_join; a thread whose function returned */
    int blocking, joining, ended;
    struct torxp_sim_actor *helper; /* a task's communication thread, if any */
} torxp_sim_actor_t;

/* The actor running now (NULL outside a sim job). */
torxp_sim_actor_t *torxp_sim_self(void);
/* Whether this process runs a sim job now. */
int torxp_sim_job_running(void);

/* Simulated time: SimGrid's clock plus what this actor owes. */
double torxp_sim_now(const torxp_sim_actor_t *a);
/* Charges the running actor's core for seconds of work. */
static inline void torxp_sim_charge_s(torxp_sim_actor_t *a, double s)
{
    a->owed += s;
}
/* Sleeps off what the actor owes, so that its clock is the simulation's
 * before it does something others can see. */
void torxp_sim_sync(torxp_sim_actor_t *a);
/* Blocking calls of the simulation, each followed by torxp_sim_resumed. */
void torxp_sim_sleep(torxp_sim_actor_t *a, double s);
/* Parks the running actor for at most s seconds (< 0: until woken); 1:
 * woken, 0: the time ran out. Callers look again at what they wait for:
 * a wake may be for something else. */
int torxp_sim_park(torxp_sim_actor_t *a, double s);
/* Wakes task rank's actors (its main actor and its thread) if parked. */
void torxp_sim_wake_task(torxp_sim_job_t *job, int rank);
/* Wakes task rank's main actor only. */
void torxp_sim_wake_main(torxp_sim_job_t *job, int rank);
/* After any blocking call: the running task's private program data in
 * place (sim_job.c). */
void torxp_sim_resumed(torxp_sim_actor_t *a);

/* Collective over the job's tasks: how many passed ok == 0. */
int torxp_sim_vote(torxp_sim_job_t *job, int ok);

/* The module's entries (torxp_sim_module_t, pkt_internal.h), from
 * sim_job.c: the bootstrap of the running actor's task, a job of task
 * functions (TORX_DEVICE=sim), a job of a program's main (torx-sim), and
 * torx_sim_compute. */
torx_status_t torxp_sim_job_boot_init(torx_boot_t *boot);
int torxp_sim_job_run_tasks(int ntasks, torx_task_main_fn task_main, void *arg);
int torxp_sim_job_run_main(int (*main_fn)(int, char **, char **), int argc, char **argv,
                           char **envp, const char *keep_lo, const char *keep_hi);
torx_status_t torxp_sim_job_compute(double seconds);
/* ... and from sim_dev.c: the device. */
torx_status_t torxp_sim_dev_open(const torx_pkt_attr_t *attr, const torxp_env_t *env,
                                 torx_pkt_dev_t **out);

/* Starts and joins a communication thread of the running task. */
torx_status_t torxp_sim_thread_start(torxp_thread_t *t, void *(*fn)(void *), void *arg);
void torxp_sim_thread_join(torxp_thread_t *t);

/* The job's settings (sim_job.c reads them from the environment). */
typedef struct torxp_sim_config {
    torxp_sim_machine_t machine;
    int mesh;          /* TORX_SIM_MESH: no wraparound links */
    uint64_t seed;     /* TORX_SIM_SEED: adaptive routing */
    double time_limit; /* TORX_SIM_TIME_LIMIT: simulated seconds, 0: none */
    FILE *links_out;   /* TORX_SIM_LINKS: each link's load, written when its network ends */
    char links_path[256];
} torxp_sim_config_t;
const torxp_sim_config_t *torxp_sim_config(const torxp_sim_job_t *job);

/* The network state of a job, created by the first task to open its
 * device and shared by all (sim_net.c). */
typedef struct torxp_sim_net torxp_sim_net_t;
torxp_sim_net_t **torxp_sim_job_net(torxp_sim_job_t *job);
int torxp_sim_job_size(const torxp_sim_job_t *job);
/* The job's simulated clock (SimGrid's, from the job's start). */
double torxp_sim_job_now(const torxp_sim_job_t *job);
/* No task or thread of the job acts before this simulated time, less
 * SIM_TIMING_PRECISION (sim_job.c). */
double torxp_sim_job_horizon(const torxp_sim_job_t *job);
/* SimGrid's surf/precision, which the job sets: a sleep or a timed wait
 * may end this much before its time. */
#define SIM_TIMING_PRECISION 1e-9
/* Networks whose tasks all closed, freed when the job ends. */
torxp_sim_net_t **torxp_sim_job_retired(torxp_sim_job_t *job);
/* Frees the job's networks once SimGrid has run it (sim_net.c). */
void torxp_sim_net_job_end(torxp_sim_job_t *job);
/* The calling actor is about to block, its wake time in the horizon: the
 * network processes the events no actor can act before, and arms its
 * daemon for the first wake they ask for (a simcall). */
void torxp_sim_net_blocking(torxp_sim_job_t *job);

/* ---- the network (sim_net.c) ------------------------------------------- */

/* A packet in flight or waiting to be read. */
typedef struct torxp_sim_pkt {
    double arrive; /* fully received at its destination */
    uint64_t seq;  /* the job's injection order: ties, and determinism */
    struct torxp_sim_pkt *next_free;
    union {
        torx_pkt_hdr_t hdr;
        unsigned char bytes[TORX_PKT_MAX_BYTES];
    };
} torxp_sim_pkt_t;

typedef struct torxp_sim_xfer torxp_sim_xfer_t;

/* What the net keeps of one task. */
struct torxp_sim_task {
    int rank;
    torx_coord_t coord;
    torxp_sim_pkt_t **rx; /* min-heap on (arrive, seq) */
    unsigned nrx, caprx;
    double *inject; /* when each injection FIFO slot's packet started on its first
                     * link (+inf: it still waits) */
    unsigned ninject;
    /* Each channel's rounds of the collective network and of the global
     * interrupt, a sequence of its own (sim_net.c): the rounds injected
     * and armed so far, and of these the ones not yet read (at most
     * CN_DEPTH: a task cannot inject further ahead of its reads) and not
     * yet seen complete (0 or 1: one barrier round at a time). A byte holds
     * each difference, to keep the per-task state small (72 bytes for all
     * channels; 65,536 tasks). */
    uint64_t cn_injected[TORX_CN_CHANNELS], gi_armed[TORX_GI_CHANNELS];
    uint8_t cn_unread[TORX_CN_CHANNELS], gi_unseen[TORX_GI_CHANNELS];
    uint64_t rng;
    /* waiting: the task's main actor and its thread park (torxp_sim_park) */
    torxp_sim_job_t *job;
    /* Per actor (the task's, its thread's: both may wait at once, and a
     * wake or an event one of them takes must not be lost to the other):
     * when its torx_pkt_wait sleeps until (+inf: it does not), and a
     * torx_pkt_wake since its last wait. */
    double asleep_until[2];
    int rung[2];
    int open;
    unsigned gen;           /* its openings: packets of an earlier one hold no slot */
    int wake_queued;        /* in the network's list of tasks to wake */
    int room_waiting;       /* its main actor sleeps until a FIFO slot frees */
    torxp_sim_xfer_t *bulk; /* its transfers in flight (bulk dma) */
};

torx_status_t torxp_sim_net_attach(torxp_sim_job_t *job, torx_shape_t shape, torx_coord_t self,
                                   int rank, torxp_sim_task_t **task);
void torxp_sim_net_detach(torxp_sim_job_t *job, torxp_sim_task_t *task);

/* Injects one packet at time now; TORX_NO_ROOM when the injection FIFO is
 * full. */
torx_status_t torxp_sim_net_inject(torxp_sim_job_t *job, torxp_sim_task_t *task, double now,
                                   const torx_pkt_hdr_t *hdr, const struct iovec *iov, int iovcnt,
                                   size_t len);
int torxp_sim_net_room(torxp_sim_job_t *job, torxp_sim_task_t *task, double now);
/* The first packet arrived by now, or NULL; pop removes it. */
torxp_sim_pkt_t *torxp_sim_net_peek(torxp_sim_job_t *job, torxp_sim_task_t *task, double now);
void torxp_sim_net_pop(torxp_sim_job_t *job, torxp_sim_task_t *task);
/* When something this task may wait for happens next (+inf: nothing
 * scheduled). */
double torxp_sim_net_next_event(torxp_sim_job_t *job, torxp_sim_task_t *task);
/* One collective-network round of the whole job without processor costs:
 * up and down the tree, and one packet's wire time (torx_pkt_network). */
double torxp_sim_net_cn_round(torxp_sim_job_t *job);
int torxp_sim_wakes_earlier(torxp_sim_task_t *task, double when);

/* A round of the collective network or the global interrupt on channel ch
 * (below TORX_CN_CHANNELS, TORX_GI_CHANNELS): each channel has its own
 * rounds, independent of the others'. */
torx_status_t torxp_sim_cn_inject(torxp_sim_job_t *job, torxp_sim_task_t *task, unsigned ch,
                                  double now, torx_cn_op_t op, torx_cn_type_t type, int is_root,
                                  const void *data);
torx_status_t torxp_sim_cn_read(torxp_sim_job_t *job, torxp_sim_task_t *task, unsigned ch,
                                double now, void *result);
torx_status_t torxp_sim_gi_arm(torxp_sim_job_t *job, torxp_sim_task_t *task, unsigned ch,
                               double now);
torx_status_t torxp_sim_gi_poll(torxp_sim_job_t *job, torxp_sim_task_t *task, unsigned ch,
                                double now);

/* Bulk transfers by the DMA engine: start (get: the data flows from peer
 * to this task), when one is next done, and finish (TORX_OK: done and
 * copied, b freed). The engine works on its own, in the network's events. */
torx_status_t torxp_sim_bulk_start(torxp_sim_job_t *job, torxp_sim_task_t *t, double now, int get,
                                   torx_coord_t peer, const void *remote, void *local, size_t len,
                                   torxp_sim_xfer_t **b);
double torxp_sim_bulk_next(const torxp_sim_task_t *t);
torx_status_t torxp_sim_bulk_finish(torxp_sim_job_t *job, torxp_sim_task_t *t, torxp_sim_xfer_t *b,
                                    double now);

/* Where task rank's copy of ptr is: ptr itself, unless it points into the
 * program's private data and another task's copy is in place (sim_job.c). */
void *torxp_sim_task_addr(torxp_sim_job_t *job, int rank, void *ptr);

/* Wakes task's waiters if they sleep past when. */
void torxp_sim_notify(torxp_sim_task_t *task, double when);

#endif /* TORXP_SIM_H */
