/* Message-layer policy: the tuned protocol boundaries (the defaults of
 * torx_limits_t, <torx/msg.h>), and the thresholds of the staging and
 * rendezvous choices (msg_path.c). Prefix: torxm_. */
#ifndef TORXM_POLICY_H
#define TORXM_POLICY_H

/* Default protocol boundaries (TORX_EAGER_LIMIT, TORX_STAGE_MIN,
 * TORX_STAGE_CHUNK): measured on the development machine with
 * bench/run-calibrate.sh (docs/tuning.md).
 * The eager limit: with the shm device's 1 MiB staging rings a staged
 * message beats the rendezvous on latency and on both bandwidths up to
 * 32 KiB; at 64 KiB the rendezvous's single copy wins both ways (48 KiB
 * was not measured staged, so the limit stays a power of two). */
#define TORXM_EAGER_LIMIT 32768
#define TORXM_STAGE_MIN 232
#define TORXM_STAGE_CHUNK 16384
/* TORX_EAGER_IDLE_LIMIT: to an idle pair (nothing in flight, a reply
 * since the last long message), staged up to here instead of the
 * rendezvous. One message at a time the two tasks' copies overlap piece by
 * piece, where the rendezvous pays a handshake and a process_vm_readv
 * (about 10 GB/s on the development VM): 48 KiB to 4 MiB took 0.4-0.6 of
 * the rendezvous's half round trip, with no step at the eager limit (32 KiB 2.5 us, 48 KiB 3.4
 * instead of 5.7 by rendezvous). Streams are left alone: one message per window of a bandwidth test
 * goes staged. A message longer than the staging area streams through it as the receiver releases
 * pieces, while the scouts and one-packet messages behind it go first (msg_send.c, pass_staged):
 * 1-4 MiB took 0.67-0.8 of the shared rendezvous's time, with no step at 1 MiB, and both-ways
 * windows kept their bandwidth. 4 MiB bounds what an unexpected message costs the receiver: a
 * buffer of its size, as any eager message does. Above it, the shared
 * rendezvous. */
#define TORXM_EAGER_IDLE_LIMIT 4194304
/* TORX_STAGE_COST_MAX: copies into the staging area slower than this (ns
 * per KiB, torx_stage_cost) count as slow: an idle pair's long messages
 * keep the rendezvous, and eager and vn messages from TORXM_SLOW_RZV_MIN
 * bytes take it too (vn: the bulk get); one in TORXM_STAGE_PROBE goes
 * staged anyway, to measure again. On the development VM a piece's copy
 * took 22-62 ns per KiB with the two vCPUs near each other and 300-515 far
 * apart, where a staged 16 KiB message took 8.5-9.5 us, 32 KiB 14.9-17.2
 * and 64 KiB 25.8-30.1, against 5.7 and 6.8 for 48 and 64 KiB by
 * rendezvous in the same runs; at 2 KiB the staged message was level with
 * Open MPI there, and a rendezvous costs 2.3 us before its first byte. */
#define TORXM_STAGE_COST_MAX 150
#define TORXM_SLOW_RZV_MIN 8192
#define TORXM_STAGE_PROBE 64
/* How many scouts from a peer a task's slow-copies verdict holds for it
 * when none of its own go between (torxm_peer_t.rzv_hold): four windows of
 * a 64-message bandwidth test. A peer that finishes its window first
 * sends the next one's scouts while this task still waits on its own, so
 * one window's worth would lapse mid-exchange (traced: a rank took 186
 * offers while its own scouts were off). */
#define TORXM_RZV_HOLD 256
/* A bulk get costing more than this, in percent of a memcpy
 * (torx_bulk_cost), loses to staging: a staged byte is copied twice (into
 * the area, out of it), on two cores at once one way and on each core both
 * ways. On one machine of this VM type the floors were memcpy 59 GB/s and
 * process_vm_readv 33-36 (about 170), and the bulk get beat staging both
 * ways from 64 KiB; on another, 31 and 9 GB/s, torx_bulk_cost 205-454, and
 * staging beat the bulk get 1.3-2.8x one way and both ways at 64 KiB-4 MiB
 * (docs/message-layer.md#rendezvous-data-path). */
#define TORXM_RZV_STAGE_COST 200u
/* Long rendezvous data goes the way the pair measured faster (rzv_way.c).
 * Whether two copies through the staging area beat one bulk get depends on
 * where the hypervisor put the two cores, and it moves them: near (one
 * L3) staging moved 64 KiB-1 MiB at 2.0-2.5x a bulk get both ways; in one
 * far placement staging lost to the peers' single copy (0.49-0.85x at
 * 256 KiB-1 MiB both ways), in another it still beat it 1.3-2x one way,
 * with the same cache-line handoff time. Neither a copy-time line nor the handoff told
 * the cases apart, so under TORX_RZV_DATA=auto the pair tries both. One
 * task decides for both directions (the lower rank, torxm_rzv_way_leads):
 * a window where one direction staged while the other took bulk gets ran
 * slower than either (msg_path.c), and so would any
 * measurement of it. The other task offers staging on every long scout and
 * takes every offer. */
#define TORXM_RZV_WAY_MIN 65536

#endif /* TORXM_POLICY_H */
