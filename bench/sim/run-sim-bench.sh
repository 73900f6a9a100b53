#!/usr/bin/env bash
# The sim device's figures against the original's (docs/sim.md,
# bench/RESULTS.md "Modelled torus"):
#
#   bench/sim/run-sim-bench.sh [table1] [fig4a] [fig4b] [fig4cf] [fig5b] [fig6] [scale] [scale64k]
#                              [flowcheck] [bgp...]
#
#   table1    Table 1, message-layer column: 1-byte half round trip to the
#             nearest neighbour per protocol, 8x8x8, co mode, bgl (the
#             calibration: it checks the fit holds)
#   fig4a     Fig 4(a): the same against Manhattan distance, 1 to 12 hops
#   fig4b     Fig 4(b): one bidirectional link, rank 0 and its +x neighbour
#             streaming to each other, 8 B to 1 MiB (auto protocol), co and
#             heater mode (sim_links); about 15 s
#   fig4cf    Fig 4(c)-(f): rank 0 exchanging 64 KiB messages with 1 to 6
#             neighbours at once, eager, rendezvous and adaptive eager, in
#             heater mode (one core does everything) and co mode (the
#             communication thread reads the network); about 80 s
#   nbcoll    OSU's overlap of the nonblocking barrier, double-sum allreduce
#             and bcast on the global interrupt and collective network,
#             heater against co mode (sim_nbcoll), 8x8x8; about a minute
#   scale     sim_scale (start, barrier, 8-byte allreduce, neighbour
#             exchange, finalize) at 512 and 4,096 nodes: simulated times,
#             wall time and peak memory
#   scale64k  the same at 64x32x32 (65,536 nodes; about 10 minutes, 6 GiB)
#   flowcheck the sim device's link model against SimGrid's flow model CM02
#             on small patterns (docs/sim.md#checked-against-simgrids-flow-model):
#             sim_linkcheck on a bgl without processor costs, sim_flowcheck
#             on SimGrid's torus cluster (about 5 minutes: the 64 KiB
#             alltoall is 1.1 million packets)
#   fig5b     Fig 5(b): bcast bandwidth against message size on a 4x4x2 mesh,
#             bgl, co and heater mode, root 0: MPICH 4.0.2's default
#             algorithms over the message layer (bench/coll_baseline.c),
#             torx's collective network (TORX_COLL_BCAST=cn) and torus
#             deposit-bit broadcast (TORX_COLL_BCAST=torus), 256 B to 4 MiB
#             (sim_coll); plot with bench/sim/plot-fig5b.gp
#   fig6      Fig 6: alltoall bandwidth as a fraction of the mesh's
#             cross-section bandwidth, 8x8x8 mesh, bgl, co mode, 256 B to
#             8 KiB per pair, one call per point: MPICH 4.0.2's default
#             alltoall over the message layer against torx's paced alltoall
#             (TORX_COLL_ALLTOALL=paced); FIG6_SIZES, bytes per pair
#             (default 256,512,1024,2048,4096,8192). Wall time grows with the
#             packets, 512 x 511 messages a call: at most 2.5 minutes a
#             point up to 2 KiB, 3.5-4.5 at 4 KiB and 7-10 at 8 KiB on
#             2 CPUs. Each run's links' table goes
#             beside the report (sim-fig6-links-SET-BYTES.csv), and a second
#             table splits each fraction into framing, load spread and the
#             busiest middle link's share of the call; plot with
#             bench/sim/plot-fig6.gp
#   bgp       the BG/P MPI study's suite on bgp beside its published results
#             (bench/sim/bgp-bench.sh; one test: bgp-hops, bgp-congestion,
#             bgp-multistream, bgp-hotspot, bgp-fan; BGP_SCALE=1 for the
#             large partitions); plot with bench/sim/plot-bgp.gp
#   halo      the BG/P study's HALO (bench/sim/halo.c) on bgp, 16,384 tasks
#             in vn mode, under the orders XYZT, TXYZ, ZYXT, TZYX and the
#             `torx-map opt` mapping of its recorded traffic
#             (bench/sim/halo-bench.sh; HALO_SCALE=1 adds 131,072 tasks,
#             about 16 GiB); plot with bench/sim/plot-halo.gp
#   halo-shm  the same orders on shm (mpiexec), the crossbar's answer
#
# Without arguments: table1 fig4a scale. Simulated times are the same on
# every machine (the model is deterministic); wall times and memory are this
# machine's. Writes a report to bench/results/sim-<date>.md and prints it.
# Environment: TORX_BUILD (the build tree, default build/, as the other runners).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/.." && pwd)
bench_name=run-sim-bench
# shellcheck source=../lib.sh
. "$here/lib.sh"
bench_build_dir
sim="$build/torx-sim"
if [ ! -x "$sim" ]; then
    echo "$bench_name: no $sim: build torx with SimGrid first (scripts/build.sh)" >&2
    exit 2
fi
export TORX_SIM_MACHINE_PATH="$root/src/packet/sim/machines"
export TORX_SIM_PRELOAD="$build/.libs/libtorx-simrun.so"
export TORX_DEVICE_PATH="$build/.libs" # the sim device's module of this build
out_dir=${RESULTS_DIR:-$root/bench/results}
mkdir -p "$out_dir"
report="$out_dir/sim-$(date +%Y%m%d-%H%M%S).md"
what=("$@")
[ ${#what[@]} -gt 0 ] || what=(table1 fig4a scale)
bench_machine

{
    echo "# sim device figures, commit $rev, $when, $machine"
    for w in "${what[@]}"; do
        case $w in
        table1)
            echo
            echo "## Table 1 (bgl, 8x8x8, co mode, message layer, 1 byte, 1 hop)"
            echo
            echo "| protocol | published, cycles | sim, us | sim, cycles | sim / published |"
            echo "|---|---|---|---|---|"
            "$sim" --torus 8x8x8 --mode co "$build/bench/sim/sim_pingpong" \
                --protos onepkt,eager,adaptive,rzv --iters 10 |
                awk 'BEGIN { pub["onepkt"] = 1600; pub["eager"] = 2700; pub["adaptive"] = 3300; pub["rzv"] = 12000 }
                     { split($2, p, "="); split($6, u, "="); c = u[2] * 700
                       printf "| %s | %d | %.3f | %.0f | %.2f |\n", p[2], pub[p[2]], u[2], c, c / pub[p[2]] }'
            ;;
        fig4a)
            echo
            echo "## Fig 4(a): half round trip against distance (bgl, 8x8x8, co mode, one-packet, 1 byte)"
            echo
            echo "| hops | sim, us | published (MPI): 3.35 + 0.09 (hops - 1) us |"
            echo "|---|---|---|"
            "$sim" --torus 8x8x8 --mode co "$build/bench/sim/sim_pingpong" --protos onepkt \
                --hops 1,2,3,4,5,6,7,8,9,10,11,12 --iters 10 |
                awk '{ split($4, h, "="); split($6, u, "=")
                       printf "| %d | %.4f | %.2f |\n", h[2], u[2], 3.35 + 0.09 * (h[2] - 1) }'
            ;;
        nbcoll)
            echo
            echo "## Nonblocking collectives: OSU's overlap, heater against co mode (bgl, 8x8x8)"
            echo
            echo "Each call started, then the task computes as long as the call alone took"
            echo "(torx_sim_compute), then waits; overlap = 100 (1 - (t_total - t_pure) / t_pure)."
            echo "iallreduce is a double sum (two passes of collective-network rounds)."
            echo
            echo "| collective | bytes | heater t_pure, us | heater overlap, % | co t_pure, us | co overlap, % | run by the thread |"
            echo "|---|---|---|---|---|---|---|"
            for m in heater co; do
                "$sim" --torus 8x8x8 --mode "$m" "$build/bench/sim/sim_nbcoll" --sizes 8,1024,8192 --iters 3
            done |
                awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                       k = v["kind"] " " v["bytes"]; if (!(k in seen)) { seen[k] = 1; order[++n] = k }
                       p[k, v["mode"]] = v["pure_us"]; o[k, v["mode"]] = v["overlap"]; t[k] = v["by_thread"] }
                     END { for (i = 1; i <= n; i++) { k = order[i]; split(k, kb, " ")
                           printf "| %s | %s | %s | %s | %s | %s | %s |\n", kb[1], kb[2], p[k, "heater"], o[k, "heater"], p[k, "co"], o[k, "co"], t[k] } }'
            ;;
        fig4b)
            echo
            echo "## Fig 4(b): one bidirectional link against message size (bgl, 8x8x8, auto protocol)"
            echo
            echo "MB/s: bytes both ways per microsecond. Published: about 311 MB/s net"
            echo "(2 x 175 MB/s x 240/270), half of the peak near 500-byte messages."
            echo
            sizes=8,16,32,64,128,256,512,1024,2048,4096,8192,16384,32768,65536,131072,262144,524288,1048576
            fig4b_raw=$(for m in co heater; do
                "$sim" --torus 8x8x8 --mode "$m" "$build/bench/sim/sim_links" --protos auto \
                    --sizes "$sizes" --links 1
            done)
            # columns for bench/sim/plot-fig4.gp: bytes, co MB/s, heater MB/s
            echo "$fig4b_raw" |
                awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                       bw[v["mode"], v["bytes"]] = v["mbps"]; if (!(v["bytes"] in seen)) { seen[v["bytes"]] = 1; order[++n] = v["bytes"] } }
                     END { print "# bytes co_mbps heater_mbps"
                           for (i = 1; i <= n; i++) print order[i], bw["co", order[i]], bw["heater", order[i]] }' \
                    >"$out_dir/sim-fig4b.dat"
            echo "| bytes | sim co, MB/s | co / 311 | sim heater, MB/s | heater / 311 |"
            echo "|---|---|---|---|---|"
            echo "$fig4b_raw" |
                awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                       bw[v["mode"], v["bytes"]] = v["mbps"]; if (!(v["bytes"] in seen)) { seen[v["bytes"]] = 1; order[++n] = v["bytes"] } }
                     END { for (i = 1; i <= n; i++) { b = order[i]
                             printf "| %d | %.1f | %.2f | %.1f | %.2f |\n", b, bw["co", b], bw["co", b] / 311,
                                    bw["heater", b], bw["heater", b] / 311 } }'
            echo
            echo "| quantity | published | sim co | co / published | sim heater | heater / published |"
            echo "|---|---|---|---|---|---|"
            # half of each mode's own peak, log-interpolated between the sizes around it
            echo "$fig4b_raw" |
                awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                       m = v["mode"]; k = ++n[m]; sz[m, k] = v["bytes"]; bw[m, k] = v["mbps"]
                       if (v["mbps"] > peak[m]) peak[m] = v["mbps"] }
                     function half(m,   k, h) { h = peak[m] / 2
                       for (k = 2; k <= n[m]; k++) if (bw[m, k] >= h && bw[m, k - 1] < h)
                         return exp(log(sz[m, k - 1]) + (log(sz[m, k] / sz[m, k - 1])) * (h - bw[m, k - 1]) / (bw[m, k] - bw[m, k - 1]))
                       return 0 }
                     END { printf "| peak, MB/s | 311 | %.1f | %.2f | %.1f | %.2f |\n", peak["co"], peak["co"] / 311,
                                  peak["heater"], peak["heater"] / 311
                           printf "| bytes at half of the peak | 500 | %.0f | %.2f | %.0f | %.2f |\n", half("co"),
                                  half("co") / 500, half("heater"), half("heater") / 500 }'
            ;;
        fig4cf)
            echo
            echo "## Fig 4(c)-(f): 1 to 6 bidirectional links at once (bgl, 8x8x8, 64 KiB messages)"
            echo
            echo "Rank 0 exchanges with 1..6 torus neighbours at once; MB/s: bytes it sent and"
            echo "received per microsecond; fraction: of links x 311 MB/s; links' worth: MB/s / 311."
            echo "heater: one core does all the protocol work; co: the communication thread reads"
            echo "the network on the node's second core."
            echo
            fig4cf_raw=$(for m in heater co; do
                "$sim" --torus 8x8x8 --mode "$m" "$build/bench/sim/sim_links" \
                    --protos eager,rzv,adaptive --sizes 65536 --links 1,2,3,4,5,6
            done)
            # columns for bench/sim/plot-fig4.gp: links, then MB/s per protocol and mode
            echo "$fig4cf_raw" |
                awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                       bw[v["proto"] "_" v["mode"], v["links"]] = v["mbps"] }
                     END { split("eager_heater rzv_heater adaptive_heater eager_co rzv_co adaptive_co", c, " ")
                           printf "# links"; for (j = 1; j <= 6; j++) printf " %s", c[j]; print ""
                           for (l = 1; l <= 6; l++) { printf "%d", l
                             for (j = 1; j <= 6; j++) printf " %s", bw[c[j], l]; print "" } }' \
                    >"$out_dir/sim-fig4cf.dat"
            echo "| protocol | mode | 1 link | 2 | 3 | 4 | 5 | 6 | links' worth (best) |"
            echo "|---|---|---|---|---|---|---|---|---|"
            echo "$fig4cf_raw" |
                awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                       key = v["proto"] " | " v["mode"]; if (!(key in seen)) { seen[key] = 1; order[++n] = key }
                       bw[key, v["links"]] = v["mbps"]; if (v["mbps"] > best[key]) best[key] = v["mbps"] }
                     END { for (i = 1; i <= n; i++) { k = order[i]; printf "| %s", k
                             for (l = 1; l <= 6; l++) printf " | %.0f (%.2f)", bw[k, l], bw[k, l] / (311 * l)
                             printf " | %.2f |\n", best[k] / 311 } }'
            echo
            echo "| figure | protocol | published, links' worth | sim, mode | sim, links' worth | sim / published |"
            echo "|---|---|---|---|---|---|"
            echo "$fig4cf_raw" |
                awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                       k = v["proto"] " " v["mode"]; if (v["mbps"] > best[k]) best[k] = v["mbps"] }
                     function row(fig, name, pub, bound, k) {
                       printf "| %s | %s | %s | %s | %.2f | %.2f |\n", fig, name, pub, k, best[k] / 311, best[k] / 311 / bound }
                     END { row("4(c)", "eager", "about 2", 2, "eager heater")
                           row("4(d)", "rendezvous", "about 2", 2, "rzv heater")
                           row("4(e)", "adaptive eager", "below 2", 2, "adaptive heater")
                           row("4(f)", "rendezvous, coprocessor", "above 3", 3, "rzv co") }'
            ;;
        scale | scale64k)
            echo
            echo "## Scale: sim_scale (bgl, heater)"
            echo
            echo "| nodes | barrier, us | allreduce 8 B, us | exchange, us | wall, s | peak memory, MiB |"
            echo "|---|---|---|---|---|---|"
            if [ "$w" = scale ]; then dims="8x8x8 16x16x16"; else dims="64x32x32"; fi
            for d in $dims; do
                "$sim" --torus "$d" "$build/bench/sim/sim_scale" |
                    awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                           printf "| %s | %.3f | %.3f | %.3f | %s | %s |\n", v["tasks"], v["barrier_us"],
                                  v["allreduce_us"], v["exchange_us"], v["wall_s"], v["maxrss_mib"] }'
            done
            ;;
        flowcheck)
            # The network alone: bgl with every processor cost zero but the
            # empty poll's, which only paces a sender's retries while its
            # injection FIFO is full (docs/sim.md#checked-against-simgrids-flow-model).
            fc_dir=$(mktemp -d)
            sed -e 's/^name .*/name bgl-net/' \
                -e 's/^\(cpu_\(inject_packet\|receive_packet\|match\|copy_byte\|cn_packet\)\) .*/\1 0 cycles/' \
                "$root/src/packet/sim/machines/bgl" >"$fc_dir/bgl-net"
            fc_kv() { awk -v k="$1" '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) print kv[2] } }'; }
            # fc_row LABEL TORUS KEY WHY ARGS...: one row from both programs;
            # KEY: time_us, flow0_us or flow1_us. Leaves each program's
            # whole wall time (s) and peak memory (MiB) in fc_cm_* and fc_sim_*.
            fc_row() {
                local label=$1 torus=$2 key=$3 why=$4 out_cm out_sim t
                shift 4
                t=$(date +%s%N)
                out_cm=$(/usr/bin/time -f "maxrss_kib=%M" "$build/bench/sim/sim_flowcheck" \
                    --torus "$torus" "$@" 2>&1)
                fc_cm_wall=$(awk -v a="$t" -v b="$(date +%s%N)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
                fc_cm_mib=$(echo "$out_cm" | fc_kv maxrss_kib | awk '{ printf "%.0f", $1 / 1024 }')
                t=$(date +%s%N)
                out_sim=$(/usr/bin/time -f "maxrss_kib=%M" "$sim" --torus "$torus" \
                    --machine "$fc_dir/bgl-net" "$build/bench/sim/sim_linkcheck" "$@" 2>&1)
                fc_sim_wall=$(awk -v a="$t" -v b="$(date +%s%N)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
                fc_sim_mib=$(echo "$out_sim" | fc_kv maxrss_kib | awk '{ printf "%.0f", $1 / 1024 }')
                fc_sim_pkts=$(echo "$out_sim" | fc_kv packets)
                awk -v l="$label" -v c="$(echo "$out_cm" | fc_kv "$key")" \
                    -v s="$(echo "$out_sim" | fc_kv "$key")" -v w="$why" \
                    'BEGIN { printf "| %s | %.3f | %.3f | %.3f | %s |\n", l, c, s, s / c, w }'
            }
            fc_walls=()
            pk="packetisation: 270 wire bytes per 240 of data (1.125)"
            echo
            echo "## Link model against SimGrid CM02 (bgl links: 175 MB/s, 90 ns per hop; sim: bgl without processor costs)"
            echo
            echo "| pattern | CM02, us | sim, us | sim / CM02 | why they differ |"
            echo "|---|---|---|---|---|"
            fc_row "(a) 240 B, 1 hop" 8x8x8 time_us "one full packet: 270 B on the wire (1.543 us) against 240 B (1.371 us); the 90 ns hop is the same" --pattern hops --bytes 240 --hops 1
            fc_row "(a) 240 B, 12 hops" 8x8x8 time_us "as 1 hop; 11 more hops add 0.990 us in both" --pattern hops --bytes 240 --hops 12
            fc_row "(a) 64 KiB, 1 hop" 8x8x8 time_us "$pk" --pattern hops --bytes 65536 --hops 1
            fc_row "(a) 64 KiB, 12 hops" 8x8x8 time_us "$pk; cut-through pipelines the packets, so a hop adds 90 ns, as CM02's latency" --pattern hops --bytes 65536 --hops 12
            fc_row "(b) 2 x 64 KiB on one link, last" 8x8x8 time_us "$pk: the shared link is busy all along in both" --pattern share --bytes 65536
            fc_row "(b) through flow (0,0,0)->(2,0,0)" 8x8x8 flow0_us "CM02 weighs a flow by 1/route latency: the 2-hop flow gets 1/3 until the other ends; sim: packets served in the order they reach the link, the through flow (waiting in the router buffer) gets 3/4 and ends first" --pattern share --bytes 65536
            fc_row "(b) local flow (1,0,0)->(2,0,0)" 8x8x8 flow1_us "CM02 gives the 1-hop flow 2/3 of the link" --pattern share --bytes 65536
            fc_row "(c) 64 KiB to each of 6 neighbours" 8x8x8 time_us "$pk; six links in parallel in both (the 8-packet FIFO keeps all six busy)" --pattern fanout --bytes 65536
            fc_row "(d) alltoall 2 KiB, 4x4x4" 4x4x4 time_us "CM02 reaches the busiest link's bound (48 messages on each of the busiest X+ links); sim: packetisation (1.125) and 1 KiB router buffers, where a waiting packet holds a slot the link behind could use" --pattern alltoall --bytes 2048
            fc_walls+=("| 2 KiB | 4,032 | $fc_sim_pkts | $fc_cm_wall | $fc_cm_mib | $fc_sim_wall | $fc_sim_mib |")
            fc_row "(d) alltoall 64 KiB, 4x4x4" 4x4x4 time_us "as 2 KiB" --pattern alltoall --bytes 65536
            fc_walls+=("| 64 KiB | 4,032 | $fc_sim_pkts | $fc_cm_wall | $fc_cm_mib | $fc_sim_wall | $fc_sim_mib |")
            fc_row "(e) line: P0->P3" 8x8x8 flow0_us "CM02: the 3-hop flow gets 1/4 of the shared link; sim 3/4 (through traffic waits in the router buffer ahead of P1's next packet); BG/P's hardware gave it the whole link" --pattern line --bytes 65536
            fc_row "(e) line: P1->P2" 8x8x8 flow1_us "CM02: 3/4 of the link; sim 1/4 until P0->P3 ends" --pattern line --bytes 65536
            echo
            echo "### Wall cost of (d), this machine (one run each: repeat and take the minimum)"
            echo
            echo "| alltoall, 64 nodes | messages | sim packets | CM02 wall, s | CM02 memory, MiB | sim wall, s | sim memory, MiB |"
            echo "|---|---|---|---|---|---|---|"
            printf '%s\n' "${fc_walls[@]}"
            rm -rf "$fc_dir"
            ;;
        fig5b)
            echo
            echo "## Fig 5(b): bcast bandwidth against message size (bgl, 4x4x2 mesh, root 0)"
            echo
            echo "MB/s: bytes per microsecond of the slowest task's time per call, calls back to"
            echo "back (sim_coll). baseline: MPICH 4.0.2's default algorithm for the size"
            echo "(bench/coll_baseline.h), over the message layer; cn: the collective network;"
            echo "torus: the deposit-bit broadcast (edge-disjoint routes). Published: the"
            echo "baseline tops out near 60 MB/s, the torus bcast at about 60% of its peak (a bit"
            echo "under two links' worth: taken as 0.6 x 3 links x 175 MB/s x 240/270 = 280 MB/s"
            echo "from a corner of the mesh), the collective network at 350 MB/s."
            echo
            f5_sizes=256,1K,4K,16K,64K,256K,1M,4M
            f5_raw=$(for m in co heater; do
                for a in baseline cn torus; do
                    if [ "$a" = baseline ]; then
                        "$sim" --mesh 4x4x2 --mode "$m" "$build/bench/sim/sim_coll" --kind bcast \
                            --sizes "$f5_sizes" --iters 3 --root 0 --alg baseline
                    else
                        env TORX_COLL_BCAST="$a" "$sim" --mesh 4x4x2 --mode "$m" \
                            "$build/bench/sim/sim_coll" --kind bcast --sizes "$f5_sizes" --iters 3 \
                            --root 0 --alg torx
                    fi | sed "s/^coll /coll mode=$m set=$a /"
                done
            done)
            f5_kv='{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }'
            # columns for bench/sim/plot-fig5b.gp: bytes, then MB/s of baseline, cn, torus in co, then heater
            echo "$f5_raw" |
                awk "$f5_kv"'{ bw[v["mode"] "_" v["set"], v["bytes"]] = v["mbps"]
                       if (!(v["bytes"] in seen)) { seen[v["bytes"]] = 1; order[++n] = v["bytes"] } }
                     END { split("co_baseline co_cn co_torus heater_baseline heater_cn heater_torus", c, " ")
                           printf "# bytes"; for (j = 1; j <= 6; j++) printf " %s", c[j]; print ""
                           for (i = 1; i <= n; i++) { printf "%d", order[i]
                             for (j = 1; j <= 6; j++) printf " %s", ((c[j], order[i]) in bw) ? bw[c[j], order[i]] : "NaN"
                             print "" } }' \
                    >"$out_dir/sim-fig5b.dat"
            echo "| bytes | baseline co, MB/s (algorithm) | cn co | torus co | baseline heater | cn heater | torus heater |"
            echo "|---|---|---|---|---|---|---|"
            echo "$f5_raw" |
                awk "$f5_kv"'{ k = v["mode"] "_" v["set"]; bw[k, v["bytes"]] = v["mbps"]
                       sub(/^baseline:/, "", v["alg"]); alg[k, v["bytes"]] = v["alg"]
                       if (!(v["bytes"] in seen)) { seen[v["bytes"]] = 1; order[++n] = v["bytes"] } }
                     function f(k, b) { return ((k, b) in bw) ? sprintf("%.1f", bw[k, b]) : "-" }
                     END { for (i = 1; i <= n; i++) { b = order[i]
                             printf "| %d | %s (%s) | %s | %s | %s | %s | %s |\n", b,
                                    f("co_baseline", b), alg["co_baseline", b], f("co_cn", b), f("co_torus", b),
                                    f("heater_baseline", b), f("heater_cn", b), f("heater_torus", b) } }'
            echo
            echo "| quantity | published | sim co | co / published | sim heater | heater / published |"
            echo "|---|---|---|---|---|---|"
            echo "$f5_raw" |
                awk "$f5_kv"'{ k = v["mode"] "_" v["set"]; if (v["mbps"] > peak[k]) peak[k] = v["mbps"] }
                     function row(name, pub, set) {
                       printf "| %s | %.0f | %.1f | %.2f | %.1f | %.2f |\n", name, pub, peak["co_" set],
                              peak["co_" set] / pub, peak["heater_" set], peak["heater_" set] / pub }
                     END { row("baseline (MPICH default) peak, MB/s", 60, "baseline")
                           row("torus bcast peak, MB/s", 280, "torus")
                           row("collective network peak, MB/s", 350, "cn") }'
            echo
            echo "Wall time of the runs above: $(echo "$f5_raw" | awk "$f5_kv"'{ w += v["wall_s"] } END { printf "%.0f s", w }')."
            ;;
        fig6)
            FIG6_SIZES=${FIG6_SIZES:-256,512,1024,2048,4096,8192}
            echo
            echo "## Fig 6: alltoall against the cross-section bandwidth (bgl, 8x8x8 mesh, co mode)"
            echo
            echo "Cross-section: cutting the 8x8x8 mesh in two halves along x severs one plane of"
            echo "8 x 8 links, 64 links each way at 175 MB/s: 11,200 MB/s each way. An alltoall of"
            echo "b bytes per pair sends 256 x 256 x b bytes across the cut each way, so it takes at"
            echo "least 65536 b / 11200 us; fraction = that bound / the slowest task's time for one"
            echo "call (sim_coll --iters 1 --warmup 0). Published: the paced alltoall close to 100%,"
            echo "MPICH's default about 30%."
            echo
            f6_raw=$(for a in baseline paced; do
                for b in ${FIG6_SIZES//,/ }; do
                    links="$out_dir/sim-fig6-links-$a-$b.csv"
                    if [ "$a" = baseline ]; then
                        "$sim" --mesh 8x8x8 --mode co --links "$links" "$build/bench/sim/sim_coll" \
                            --kind alltoall --sizes "$b" --iters 1 --warmup 0 --alg baseline
                    else
                        env TORX_COLL_ALLTOALL=paced "$sim" --mesh 8x8x8 --mode co --links "$links" \
                            "$build/bench/sim/sim_coll" --kind alltoall --sizes "$b" --iters 1 \
                            --warmup 0 --alg torx
                    fi | sed "s/^coll /coll set=$a /"
                done
            done)
            f6_kv='{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                     bound = 65536 * v["bytes"] / 11200 }'
            echo "$f6_raw" |
                awk "$f6_kv"'{ fr[v["set"], v["bytes"]] = bound / v["us"]
                       if (!(v["bytes"] in seen)) { seen[v["bytes"]] = 1; order[++n] = v["bytes"] } }
                     END { print "# bytes baseline_fraction paced_fraction"
                           for (i = 1; i <= n; i++) print order[i], fr["baseline", order[i]], fr["paced", order[i]] }' \
                    >"$out_dir/sim-fig6.dat"
            echo "| bytes per pair | set | algorithm | time, us | bound, us | fraction | published | wall, s | memory, MiB |"
            echo "|---|---|---|---|---|---|---|---|---|"
            echo "$f6_raw" |
                awk "$f6_kv"'{ printf "| %d | %s | %s | %.1f | %.1f | %.2f | %s | %s | %s |\n", v["bytes"], v["set"],
                              v["alg"], v["us"], bound, bound / v["us"], v["set"] == "paced" ? "about 1.0" : "about 0.3",
                              v["wall_s"], v["maxrss_mib"] }'
            echo
            echo "What bounds each point, from its links' table (torx-sim --links, bench/sim/link-load.sh;"
            echo "docs/collectives.md#the-paced-alltoall): the middle links (position 3 of every line)."
            echo "framing = bound / their mean busy time; spread = mean / the busiest one's busy time;"
            echo "busiest = its busy time / the call's time. Their product is the fraction."
            echo
            echo "| bytes per pair | set | framing | spread | busiest | product |"
            echo "|---|---|---|---|---|---|"
            echo "$f6_raw" | awk "$f6_kv"'{ print v["set"], v["bytes"], v["us"] }' |
                while read -r set b us; do
                    "$here/sim/link-load.sh" "$out_dir/sim-fig6-links-$set-$b.csv" |
                        awk -v b="$b" -v us="$us" -v set="$set" '$3 == 3 { busy += $4 * $8; n += $4; if ($9 > most) most = $9 }
                            END { bound = 65536 * b / 11200; mean = busy / n
                                  printf "| %d | %s | %.3f | %.3f | %.3f | %.3f |\n", b, set, bound / mean,
                                         mean / most, most / us, bound / us }'
                done
            ;;
        bgp | bgp-hops | bgp-congestion | bgp-multistream | bgp-hotspot | bgp-fan)
            # shellcheck source=bench/sim/bgp-bench.sh
            . "$here/sim/bgp-bench.sh"
            bgp_bench "$w"
            ;;
        halo | halo-shm)
            # shellcheck source=bench/sim/halo-bench.sh
            . "$here/sim/halo-bench.sh"
            halo_bench "$w"
            ;;
        *)
            echo "$bench_name: unknown figure '$w' (table1, fig4a, fig4b, fig4cf, fig5b, fig6, scale, scale64k," \
                "flowcheck, nbcoll, bgp, bgp-hops, bgp-congestion, bgp-multistream, bgp-hotspot, bgp-fan, halo, halo-shm)" >&2
            exit 2
            ;;
        esac
    done
} | tee "$report"
echo "$bench_name: report in $report" >&2
