# shellcheck shell=bash
# The BG/P MPI study's suite on the sim device (bench/sim/bgp_*.c), beside
# the published results (docs/sim.md#limits). Sourced by run-sim-bench.sh,
# which sets sim, build and out_dir; bgp_bench NAME prints NAME's markdown
# tables and writes its data for bench/sim/plot-bgp.gp to
# $out_dir/sim-bgp-NAME.dat.
#
#   hops         latency between the farthest nodes against partition size
#   congestion   two pairs on a line, P0->P3 through P1 and P2, P1->P2
#   multistream  1-4 cores of a node each streaming to a neighbour's
#   hotspot      every task ping-pongs with rank 0
#   fan          fan-out and fan-in over 1-6 neighbours
#
# BGP_SCALE=1 adds the large partitions (hops up to 32x32x32, hot spot up
# to 16x16x16 in vn mode; several minutes and up to about 4 GiB each).
# Large partitions run in heater mode (one task per node): the farthest
# nodes' distance depends only on the torus shape, and heater and vn give
# the same times where both fit (the hops table shows 8x8x8 both ways).

bgp_run() {
    TORX_SIM_STACK_KIB=${TORX_SIM_STACK_KIB:-64} "$sim" --machine bgp "$@"
}

# "8x8x8 vn torus" -> the partition's torx-sim arguments
bgp_part() {
    echo "--$3 $1 --mode $2"
}

bgp_kv() { # KEY LINE: the value of KEY=... in LINE
    awk -v k="$1" '{ for (i = 1; i <= NF; i++) { n = index($i, "="); if (substr($i, 1, n - 1) == k) print substr($i, n + 1) } }' <<<"$2"
}

bgp_hops() {
    local parts=("1x1x1 vn torus" "4x4x2 vn mesh" "4x4x8 vn mesh" "8x8x8 vn torus" "8x8x8 heater torus")
    [ "${BGP_SCALE:-0}" = 1 ] && parts+=("8x8x16 vn torus" "16x16x16 vn torus"
        "16x16x16 heater torus" "16x16x32 heater torus" "16x32x32 heater torus"
        "32x32x32 heater torus")
    local dat="$out_dir/sim-bgp-hops.dat"
    echo "# cores hops us_0B us_1KiB mbps_1MiB (cores: tasks in vn mode, nodes x 4 in heater)" >"$dat"
    echo
    echo "## BG/P hops: ping-pong between the farthest nodes (bgp, bgp_hops, 5 round trips)"
    echo
    echo "| partition | mode | cores | hops | 0 B, us | 1 KiB, us | 1 MiB, Mb/s | wall to the test's end, s | peak, MiB |"
    echo "|---|---|---|---|---|---|---|---|---|"
    local p first0="" first1="" firstbw="" last0="" last1="" lastbw="" lastcores=""
    for p in "${parts[@]}"; do
        # shellcheck disable=SC2086 # "SHAPE MODE TOPOLOGY", split on purpose
        set -- $p
        local out
        # shellcheck disable=SC2046
        out=$(bgp_run $(bgp_part "$@") "$build/bench/sim/bgp_hops" --iters 5)
        local l0 l1 lb run cores
        l0=$(grep ' bytes=0 ' <<<"$out")
        l1=$(grep ' bytes=1024 ' <<<"$out")
        lb=$(grep ' bytes=1048576 ' <<<"$out")
        run=$(grep '^hops_run' <<<"$out")
        cores=$(bgp_kv tasks "$l0")
        [ "$2" = vn ] || cores=$((cores * 4)) # one task per node: the node's 4 cores
        printf '| %s %s | %s | %d | %s | %.3f | %.3f | %.0f | %s | %s |\n' "$1" "$3" "$2" "$cores" \
            "$(bgp_kv hops "$l0")" "$(bgp_kv half_rtt_us "$l0")" "$(bgp_kv half_rtt_us "$l1")" \
            "$(bgp_kv mbps "$lb")" "$(bgp_kv wall_s "$run")" "$(bgp_kv maxrss_mib "$run")"
        echo "$cores $(bgp_kv hops "$l0") $(bgp_kv half_rtt_us "$l0") $(bgp_kv half_rtt_us "$l1") $(bgp_kv mbps "$lb")" >>"$dat"
        if [ -z "$first0" ]; then
            first0=$(bgp_kv half_rtt_us "$l0") first1=$(bgp_kv half_rtt_us "$l1") firstbw=$(bgp_kv mbps "$lb")
        fi
        last0=$(bgp_kv half_rtt_us "$l0") last1=$(bgp_kv half_rtt_us "$l1") lastbw=$(bgp_kv mbps "$lb") lastcores=$cores
    done
    local n1
    n1=$(bgp_run --torus 8x8x8 --mode vn "$build/bench/sim/bgp_hops" --iters 5 --hops 1 --sizes 0,1M)
    echo
    echo "| from 4 cores (one node) to $lastcores | published | sim |"
    echo "|---|---|---|"
    awk -v a="$first0" -v b="$last0" 'BEGIN { printf "| 0 B latency | about +100%% | %+.0f%% |\n", (b / a - 1) * 100 }'
    awk -v a="$first1" -v b="$last1" 'BEGIN { printf "| 1 KiB latency | +40%% | %+.0f%% |\n", (b / a - 1) * 100 }'
    awk -v a="$(bgp_kv mbps "$(grep ' bytes=1048576 ' <<<"$n1")")" -v b="$lastbw" \
        'BEGIN { printf "| 1 MiB bandwidth, neighbours (8x8x8) -> farthest nodes | < 3%% change | %+.0f%% |\n", (b / a - 1) * 100 }'
    awk -v a="$firstbw" -v b="$lastbw" 'BEGIN { printf "| 1 MiB bandwidth, within a node -> farthest nodes | (within a node: about 6x between nodes) | %+.0f%% |\n", (b / a - 1) * 100 }'
    awk -v n="$(bgp_kv half_rtt_us "$(grep ' bytes=0 ' <<<"$n1")")" -v w="$first0" \
        'BEGIN { printf "| 0 B, within a node / neighbours (8x8x8) | about 2.8 / 2.8 us | %.2f / %.2f us |\n", w, n }'
    awk -v b="$(bgp_kv mbps "$(grep ' bytes=1048576 ' <<<"$n1")")" \
        'BEGIN { printf "| 1 MiB one way, neighbours | about 3,000 Mb/s | %.0f Mb/s |\n", b }'
}

bgp_congestion() {
    local dat="$out_dir/sim-bgp-congestion.dat"
    echo "# partition size phase p03_mbps p12_mbps" >"$dat"
    echo
    echo "## BG/P two-pair congestion (bgp, heater, bgp_congestion, 16 messages, 4 in flight)"
    echo
    echo "Published: P0-P3 keeps an uncongested link's bandwidth, P1-P2 loses a lot."
    echo
    echo "| partition | message | phase | P0->P3, Mb/s | P1->P2, Mb/s |"
    echo "|---|---|---|---|---|"
    local p
    for p in "8x8x8 torus" "4x1x1 mesh"; do
        # shellcheck disable=SC2086 # "SHAPE MODE TOPOLOGY", split on purpose
        set -- $p
        bgp_run "--$2" "$1" "$build/bench/sim/bgp_congestion" --sizes 16K,1M |
            awk -v part="$1 $2" -v dat="$dat" '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                   sz = (v["size"] >= 1048576) ? v["size"] / 1048576 " MiB" : v["size"] / 1024 " KiB"
                   printf "| %s | %s | %s | %.0f | %.0f |\n", part, sz, v["phase"], v["p03_mbps"], v["p12_mbps"]
                   key = part; gsub(" ", "-", key); print key, v["size"], v["phase"], v["p03_mbps"], v["p12_mbps"] >> dat }'
    done
}

bgp_multistream() {
    local dat="$out_dir/sim-bgp-multistream.dat"
    echo "# size streams aggregate_mbps" >"$dat"
    echo
    echo "## BG/P multistream (bgp, 8x8x8, vn, bgp_multistream, 16 messages per stream, 4 in flight)"
    echo
    echo "| message | streams | aggregate, Mb/s | per stream, Mb/s | published aggregate | sim / link (3,400 Mb/s) |"
    echo "|---|---|---|---|---|---|"
    bgp_run --torus 8x8x8 --mode vn "$build/bench/sim/bgp_multistream" --sizes 64K,1M |
        awk -v dat="$dat" '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
               sz = (v["size"] >= 1048576) ? v["size"] / 1048576 " MiB" : v["size"] / 1024 " KiB"
               printf "| %s | %d | %.0f | %.0f | the link, 425 MB/s = 3,400 Mb/s, for every count | %.2f |\n",
                      sz, v["streams"], v["aggregate_mbps"], v["per_stream_mbps"], v["aggregate_mbps"] / 3400
               print v["size"], v["streams"], v["aggregate_mbps"] >> dat }'
}

bgp_hotspot() {
    local parts=("1x1x1 vn torus" "2x2x2 vn mesh" "4x4x2 vn mesh" "4x4x8 vn mesh" "8x8x8 vn torus")
    # 16,384 tasks: one size and one timed round trip, since the wall time
    # grows faster than the tasks (the master serves them all)
    [ "${BGP_SCALE:-0}" = 1 ] && parts+=("8x8x16 vn torus" "16x16x16 vn torus --sizes 0 --iters 1")
    local dat="$out_dir/sim-bgp-hotspot.dat"
    echo "# tasks bytes avg_us min_us max_us" >"$dat"
    echo
    echo "## BG/P hot spot: every other task ping-pongs with rank 0 (bgp, vn, bgp_hotspot, 3 timed round trips each unless said)"
    echo
    echo "Published: the workers' latency grows steeply (log-log) with system size, for every message size."
    echo
    echo "| partition | tasks | message | workers' mean half round trip, us | lowest | highest | wall to the test's end, s | peak, MiB |"
    echo "|---|---|---|---|---|---|---|---|"
    local p
    for p in "${parts[@]}"; do
        # shellcheck disable=SC2086 # "SHAPE MODE TOPOLOGY", split on purpose
        set -- $p
        local args=(--sizes "0,1K" --iters 3) note=""
        if [ $# -gt 3 ]; then
            args=("${@:4}") note=" (${*:4})"
        fi
        # shellcheck disable=SC2046
        bgp_run $(bgp_part "$@") "$build/bench/sim/bgp_hotspot" "${args[@]}" |
            awk -v part="$1 $3$note" -v dat="$dat" '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
                   /^hotspot / { n++; t[n] = v["tasks"]; b[n] = v["bytes"]; a[n] = v["avg_us"]; lo[n] = v["min_us"]; hi[n] = v["max_us"]
                                 print v["tasks"], v["bytes"], v["avg_us"], v["min_us"], v["max_us"] >> dat }
                   /^hotspot_run/ { for (i = 1; i <= n; i++)
                                      printf "| %s | %d | %d B | %.1f | %.1f | %.1f | %s | %s |\n", part, t[i], b[i], a[i], lo[i], hi[i], v["wall_s"], v["maxrss_mib"] }'
    done
}

bgp_fan() {
    local dat="$out_dir/sim-bgp-fan.dat"
    echo "# neighbours out_mbps in_mbps" >"$dat"
    echo
    echo "## BG/P fan-out and fan-in (bgp, 8x8x8, heater, bgp_fan, 1 MiB messages, 8 per neighbour, 4 in flight)"
    echo
    echo "Published: fan-out peaks at about 18,000 Mb/s (the DMA engine; the machine file's"
    echo "dma_bandwidth was taken from this figure, so fan-out agrees by construction);"
    echo "fan-in saturates at about 13,000 Mb/s (a prediction here)."
    echo
    echo "| neighbours | fan-out, Mb/s | fan-in, Mb/s |"
    echo "|---|---|---|"
    bgp_run --torus 8x8x8 "$build/bench/sim/bgp_fan" |
        awk -v dat="$dat" '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
               r[v["dir"], v["neighbours"]] = v["aggregate_mbps"]; if (v["neighbours"] > n) n = v["neighbours"] }
             END { for (k = 1; k <= n; k++) { printf "| %d | %.0f | %.0f |\n", k, r["out", k], r["in", k]
                                              print k, r["out", k], r["in", k] >> dat }
                   printf "| published peak | about 18,000 | about 13,000 |\n"
                   printf "| sim / published | %.2f | %.2f |\n", r["out", n] / 18000, r["in", n] / 13000 }'
}

bgp_bench() {
    case $1 in
    bgp) bgp_hops && bgp_congestion && bgp_multistream && bgp_hotspot && bgp_fan ;;
    bgp-hops) bgp_hops ;;
    bgp-congestion) bgp_congestion ;;
    bgp-multistream) bgp_multistream ;;
    bgp-hotspot) bgp_hotspot ;;
    bgp-fan) bgp_fan ;;
    esac
}
