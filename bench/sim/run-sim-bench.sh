#!/usr/bin/env bash
# The sim device's figures against the original's (docs/sim.md,
# bench/RESULTS.md "Modelled torus"):
#
#   bench/sim/run-sim-bench.sh [table1] [fig4a] [scale] [scale64k]
#
#   table1    Table 1, message-layer column: 1-byte half round trip to the
#             nearest neighbour per protocol, 8x8x8, co mode, bgl (the
#             calibration: it checks the fit holds)
#   fig4a     Fig 4(a): the same against Manhattan distance, 1 to 12 hops
#   scale     sim_scale (start, barrier, 8-byte allreduce, neighbour
#             exchange, finalize) at 512 and 4,096 nodes: simulated times,
#             wall time and peak memory
#   scale64k  the same at 64x32x32 (65,536 nodes; about 10 minutes, 6 GiB)
#   bgp       the BG/P MPI study's suite on bgp beside its published results
#             (bench/sim/bgp-bench.sh; one test: bgp-hops, bgp-congestion,
#             bgp-multistream, bgp-hotspot, bgp-fan; BGP_SCALE=1 for the
#             large partitions); plot with bench/sim/plot-bgp.gp
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
        bgp | bgp-hops | bgp-congestion | bgp-multistream | bgp-hotspot | bgp-fan)
            # shellcheck source=bench/sim/bgp-bench.sh
            . "$here/sim/bgp-bench.sh"
            bgp_bench "$w"
            ;;
        *)
            echo "$bench_name: unknown figure '$w' (table1, fig4a, scale, scale64k, bgp, bgp-hops," \
                "bgp-congestion, bgp-multistream, bgp-hotspot, bgp-fan)" >&2
            exit 2
            ;;
        esac
    done
} | tee "$report"
echo "$bench_name: report in $report" >&2
