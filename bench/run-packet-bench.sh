#!/usr/bin/env bash
# Packet-layer benchmarks of torx, run the way docs/benchmarking.md
# describes: the floors and the candidates interleaved in rounds (floors,
# pingpong, stream, cn, floors, pingpong, ...), the best of each figure over
# the rounds, and every torx figure printed next to its floor from the same
# run, with the ratio.
#
# Two kinds of reference appear:
#   - bench/floors: the machine's floors (cache-line handoff, memcpy,
#     process_vm_readv, the plain 256-byte-slot ring), a program of its own;
#   - "paired": the torx programs also run the handoff and the plain ring
#     between their own two tasks, in blocks alternating with the torx
#     figures. On these VMs the vCPUs change physical placement during a run
#     (a handoff of ~10, ~40 or ~150 ns), so the ratios use the paired
#     references, which saw the same placements as the torx figures.
#
# Usage: bench/run-packet-bench.sh
#   TORX_BUILD    build directory holding the bench programs (default ./build
#                 relative to the repository root); looked up as
#                 $TORX_BUILD/bench/<prog>, then $TORX_BUILD/<prog>.
#                 This script builds nothing: run make there first.
#   ROUNDS        rounds (default 5, at least 1; BENCHMARKING.md asks for 3+)
#   RESULTS_DIR   where the report and the PNG go (default bench/results)
#   QUIET_WAIT_S  total time the script may spend waiting, before each
#                 program (at most QUIET_WAIT_EACH_S, default 10, each), for
#                 the machine to be idle: other processes sharing the two
#                 CPUs with the pinned, spinning tasks wreck the figures.
#                 Default 30; 0 never waits.
#   Iteration counts pass through to the programs: FLOORS_PINGPONG_ITERS,
#   FLOORS_STREAM_PACKETS, FLOORS_STREAM_REPS, PKT_PP_ITERS,
#   PKT_STREAM_PACKETS, PKT_STREAM_REPS, CN_ITERS.
#
# Exit status: 0 when every program ran (whether or not a target is met:
# this script reports, it does not judge); 1 when a program failed; 2 when
# the programs are missing or the arguments are bad.
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
bench_name=run-packet-bench
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
bench_build_dir
rounds=${ROUNDS:-5}
results=${RESULTS_DIR:-$here/results}
quiet_wait=${QUIET_WAIT_S:-30}
quiet_each=${QUIET_WAIT_EACH_S:-10}
progs=(floors pkt_pingpong pkt_stream cn_bench)

bench_check_counts ROUNDS:rounds QUIET_WAIT_S:quiet_wait QUIET_WAIT_EACH_S:quiet_each

declare -A bin
for p in "${progs[@]}"; do
    bin[$p]=$(bench_find_prog "$build" "$p" \
        "build the benchmarks there first (make), or point TORX_BUILD at the build directory") || exit 2
done

mkdir -p "$results" || exit 2
bench_machine
cmd="ROUNDS=$rounds bench/run-packet-bench.sh   (TORX_BUILD=${TORX_BUILD:-build})"
report=$results/packet-$stamp.txt
png=$results/packet-$stamp.png
shown=${results#"$root"/} # as RESULTS.md should name it: relative to the repository when inside it
work=$(mktemp -d "${TMPDIR:-/tmp}/torx-pktbench.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT

# Machine load: wait_quiet (lib.sh) spends at most the QUIET_WAIT_S budget.
quiet_left=$quiet_wait

echo "== torx packet-layer benchmarks: $rounds rounds of ${progs[*]}"
echo "== $machine; $when; torx $rev"

# ---- Run, interleaved ---------------------------------------------------------
# Each run also records how much CPU other processes used meanwhile
# ("other load", % of all CPUs): total busy time from /proc/stat minus the
# program's own user+system time.
failed=0
declare -A broken
: >"$work/load.txt"
for ((r = 1; r <= rounds; r++)); do
    for p in "${progs[@]}"; do
        [[ -n ${broken[$p]:-} ]] && continue
        quiet=yes
        wait_quiet || quiet=no
        bench_run_timed "$work/round$r-$p.out" "$work/round$r-$p.err" "${bin[$p]}"
        echo "$r $p $run_other $quiet" >>"$work/load.txt"
        if ((run_rc == 0)); then
            printf '   round %d  %-13s ok  %6.1f s   other load %3s%%%s\n' "$r" "$p" "$run_wall" "$run_other" \
                "$([[ $quiet == no ]] && echo "  (machine busy at start)")"
        else
            echo "   round $r  $p FAILED (exit $run_rc); its stderr:" >&2
            sed 's/^/     /' "$work/round$r-$p.err" >&2
            broken[$p]=1
            failed=1
        fi
    done
done
max_other=$(awk '{ if ($3 > m) m = $3 } END { print m + 0 }' "$work/load.txt")

# ---- Best of rounds -------------------------------------------------------------
# Lines "<group> <metric>=<value>" from every round. Latencies (names with
# "_ns_") keep their minimum over rounds, rates their maximum; the *_ok flags
# their minimum (one failed probe counts) and "oversubscribed" its maximum.
best() {
    awk '/^[a-z]+ [A-Za-z0-9_]+=[-+0-9.eEnaif]+$/ {
        split($2, kv, "="); k = $1 "." kv[1]; v = kv[2] + 0
        lower = (k ~ /_ns_/ || k ~ /_ok$/)
        if (k ~ /oversubscribed$/) lower = 0
        if (!(k in b) || (lower && v < b[k]) || (!lower && v > b[k])) b[k] = v
      }
      END { for (k in b) printf "%s %.6g\n", k, b[k] }' "$@" | sort
}
best "$work"/round*.out >"$work/best.txt" 2>/dev/null
for ((r = 1; r <= rounds; r++)); do
    best "$work"/round$r-*.out >"$work/best-r$r.txt" 2>/dev/null
done

# v KEY [FILE]: the value of KEY (best of rounds), or "NaN" when absent.
# (ratio, fmt, verdict, human and lookup come from lib.sh.)
v() { lookup "$1" "${2:-$work/best.txt}"; }
# per_round KEY_A KEY_B [digits]: A/B in each round, space-separated.
per_round() {
    local r out=""
    for ((r = 1; r <= rounds; r++)); do
        out+="$(ratio "$(v "$1" "$work/best-r$r.txt")" "$(v "$2" "$work/best-r$r.txt")" "${3:-2}") "
    done
    echo "${out% }"
}

fl_handoff=$(v floor.handoff_ns_min); fl_handoff_med=$(v floor.handoff_ns_med)
memcpy=$(v floor.memcpy_4m_gbs_max); memcpy_med=$(v floor.memcpy_4m_gbs_med)
cma_ok=$(v floor.cma_4m_ok)
ho=$(v pkt.handoff_ns_min); ho_med=$(v pkt.handoff_ns_med)
ho_chaos=$(v pkt.handoff_chaosjob_ns_min); ho_chaos_med=$(v pkt.handoff_chaosjob_ns_med)
cn_ho=$(v cn.handoff_ns_min); cn_ho_med=$(v cn.handoff_ns_med)
oversub=$(cat "$work"/round*.out 2>/dev/null | awk -F= '/ oversubscribed=/ && $2 + 0 > 0 { o = 1 } END { print o + 0 }')

pp=$(v pkt.pingpong_det_8_ns_min)
pp_ratio=$(ratio "$pp" "$ho")
pp_ratio_med=$(ratio "$(v pkt.pingpong_det_8_ns_med)" "$ho_med")
st=$(v pkt.stream_240_gbs_max)
st_ratio=$(ratio "$st" "$memcpy" 3)

# ---- Table ----------------------------------------------------------------------
table=$work/table.txt
{
    echo "torx packet layer, best of $rounds interleaved rounds (latency: lowest; bandwidth: highest)"
    echo "machine: $machine"
    echo "date:    $when    torx: $rev"
    echo "command: $cmd"
    [[ $oversub == 1 ]] && echo "WARNING: fewer than 2 CPUs were usable; the figures measure the scheduler"
    if ((max_other > 10)); then
        echo "WARNING: other processes used up to ${max_other}% of the CPUs during a run (see 'other load'"
        echo "         below); pinned spinning tasks then wait for each other's time slices, so"
        echo "         those runs' figures are worse than this machine can do."
    fi
    echo
    echo "Floors (bench/floors, same run)                     min/best    median"
    printf '  %-48s %8s %8s ns\n' "one-way cache-line handoff" "$(fmt "$fl_handoff")" "$(fmt "$fl_handoff_med")"
    printf '  %-48s %8s %8s GB/s\n' "memcpy 4 MiB, warm" "$(fmt "$memcpy")" "$(fmt "$memcpy_med")"
    if [[ $cma_ok == 1 ]]; then
        printf '  %-48s %8s %8s GB/s\n' "process_vm_readv 4 MiB, 4 KiB pages" \
            "$(fmt "$(v floor.cma_4m_gbs_max)")" "$(fmt "$(v floor.cma_4m_gbs_med)")"
        printf '  %-48s %8s %8s GB/s\n' "process_vm_readv 4 MiB, 2 MiB pages" \
            "$(fmt "$(v floor.cma_4m_huge_gbs_max)")" "$(fmt "$(v floor.cma_4m_huge_gbs_med)")"
    else
        echo "  process_vm_readv: not permitted or failed (see the round output in the report)"
    fi
    printf '  %-48s %8s %8s ns\n' "plain ring half round trip, 8 B" \
        "$(fmt "$(v ring.pingpong_8_ns_min)")" "$(fmt "$(v ring.pingpong_8_ns_med)")"
    printf '  %-48s %8s %8s GB/s\n' "plain ring streaming, 240 B payloads" \
        "$(fmt "$(v ring.stream_240_gbs_max)" 2)" "$(fmt "$(v ring.stream_240_gbs_med)" 2)"
    echo
    echo "One-packet half round trip, ns; ratios to the paired references (same tasks, alternating blocks)"
    printf '  %-14s %8s %8s\n' "paired handoff" "$(fmt "$ho")" "$(fmt "$ho_med")"
    printf '  %-8s %-6s %8s %8s %10s %8s %8s %8s\n' payload mode min median "/handoff" "(med)" "/ring" "(med)"
    for n in 0 8 64 240; do
        rmin=$(v pkt.pingpong_ring_${n}_ns_min); rmed=$(v pkt.pingpong_ring_${n}_ns_med)
        printf '  %-8s %-6s %8s %8s %10s %8s\n' "${n} B" ring "$(fmt "$rmin")" "$(fmt "$rmed")" \
            "$(ratio "$rmin" "$ho")" "$(ratio "$rmed" "$ho_med")"
        for m in det adapt; do
            tmin=$(v pkt.pingpong_${m}_${n}_ns_min); tmed=$(v pkt.pingpong_${m}_${n}_ns_med)
            printf '  %-8s %-6s %8s %8s %10s %8s %8s %8s\n' "" "$m" "$(fmt "$tmin")" "$(fmt "$tmed")" \
                "$(ratio "$tmin" "$ho")" "$(ratio "$tmed" "$ho_med")" \
                "$(ratio "$tmin" "$rmin")" "$(ratio "$tmed" "$rmed")"
        done
    done
    echo "  TORX_CHAOS=1 job (its own paired handoff $(fmt "$ho_chaos") / $(fmt "$ho_chaos_med") ns);" \
         "cdet = deterministic in that job"
    printf '  %-8s %-6s %8s %8s %10s %8s %8s %8s\n' payload mode min median "/handoff" "(med)" "/cdet" "(med)"
    for n in 0 8 64 240; do
        dmin=$(v pkt.pingpong_cdet_${n}_ns_min); dmed=$(v pkt.pingpong_cdet_${n}_ns_med)
        printf '  %-8s %-6s %8s %8s %10s %8s\n' "${n} B" cdet "$(fmt "$dmin")" "$(fmt "$dmed")" \
            "$(ratio "$dmin" "$ho_chaos")" "$(ratio "$dmed" "$ho_chaos_med")"
        tmin=$(v pkt.pingpong_chaos_${n}_ns_min); tmed=$(v pkt.pingpong_chaos_${n}_ns_med)
        printf '  %-8s %-6s %8s %8s %10s %8s %8s %8s\n' "" chaos "$(fmt "$tmin")" "$(fmt "$tmed")" \
            "$(ratio "$tmin" "$ho_chaos")" "$(ratio "$tmed" "$ho_chaos_med")" \
            "$(ratio "$tmin" "$dmin")" "$(ratio "$tmed" "$dmed")"
    done
    echo
    echo "Streaming one way, copied out to a 4 MiB buffer (best of rounds and samples; ring paired)"
    printf '  %-8s %10s %8s %10s %8s %8s %9s\n' payload "torx GB/s" "Mpkt/s" "ring GB/s" "Mpkt/s" "/ring" "/memcpy"
    for n in 32 64 128 240; do
        tg=$(v pkt.stream_${n}_gbs_max); rg=$(v pkt.stream_ring_${n}_gbs_max)
        printf '  %-8s %10s %8s %10s %8s %8s %9s\n' "${n} B" "$(fmt "$tg" 2)" \
            "$(fmt "$(v pkt.stream_${n}_mpps_max)" 1)" "$(fmt "$rg" 2)" \
            "$(fmt "$(v pkt.stream_ring_${n}_mpps_max)" 1)" "$(ratio "$tg" "$rg")" "$(ratio "$tg" "$memcpy" 3)"
    done
    echo
    echo "Collectives, 2 tasks, ns per operation (paired handoff $(fmt "$cn_ho") / $(fmt "$cn_ho_med") ns)"
    printf '  %-44s %8s %8s %10s %8s\n' "" min median "/handoff" "(med)"
    for op in allreduce:"collective-network allreduce, 1 packet" dsum:"reproducible double sum, 1 double" \
              barrier:"global-interrupt barrier"; do
        k=${op%%:*}; label=${op#*:}
        cmin=$(v "cn.${k}_ns_min"); cmed=$(v "cn.${k}_ns_med")
        printf '  %-44s %8s %8s %10s %8s\n' "$label" "$(fmt "$cmin")" "$(fmt "$cmed")" \
            "$(ratio "$cmin" "$cn_ho")" "$(ratio "$cmed" "$cn_ho_med")"
    done
    echo
    echo "Targets (reported, not enforced)"
    echo "  one-packet half round trip (8 B, deterministic) / paired handoff, target <= 2.00:"
    echo "      min / min       = $pp_ratio ($(verdict "$pp_ratio" 2 le));" \
         "per round: $(per_round pkt.pingpong_det_8_ns_min pkt.handoff_ns_min)"
    echo "      median / median = $pp_ratio_med ($(verdict "$pp_ratio_med" 2 le));" \
         "per round: $(per_round pkt.pingpong_det_8_ns_med pkt.handoff_ns_med)"
    echo "      (the handoff's min is its luckiest 100-round-trip sample; the median is the typical case)"
    echo "      vs the floors program's handoff (another time window): min $(ratio "$pp" "$fl_handoff")," \
         "median $(ratio "$(v pkt.pingpong_det_8_ns_med)" "$fl_handoff_med")"
    echo "  240-B streaming GB/s / memcpy 4 MiB GB/s                   = $st_ratio" \
         "(target >= 0.200: $(verdict "$st_ratio" 0.2 ge))"
    echo "      per round: $(per_round pkt.stream_240_gbs_max floor.memcpy_4m_gbs_max 3)"
    echo "  240-B streaming, torx / paired plain ring                  = $(ratio "$st" "$(v pkt.stream_ring_240_gbs_max)")"
    echo "      per round: $(per_round pkt.stream_240_gbs_max pkt.stream_ring_240_gbs_max)"
    echo "  plain ring 240-B streaming / memcpy (what the target assumes) = $(ratio "$(v pkt.stream_ring_240_gbs_max)" "$memcpy" 3)"
    echo
    echo "Runs (round, program, other processes' CPU load during the run, machine quiet at start)"
    awk '{ printf "  %s %-13s other load %3s%%  quiet at start: %s\n", $1, $2, $3, $4 }' "$work/load.txt"
} >"$table"
echo
cat "$table"

# ---- Lines for bench/RESULTS.md ---------------------------------------------------
paste=$work/paste.md
{
    echo "#### $when"
    echo
    echo "- command: \`$cmd\`, torx $rev"
    echo "- machine: $machine"
    echo "- $rounds rounds, interleaved; best of rounds; other processes' CPU load during runs: up to ${max_other}%"
    echo "- report: \`$shown/packet-$stamp.txt\`; plot: \`$shown/packet-$stamp.png\`"
    echo
    echo "| figure | torx | reference | ratio |"
    echo "|---|---|---|---|"
    echo "| one-packet half round trip, 8 B, deterministic, min | $(fmt "$pp") ns | paired handoff $(fmt "$ho") ns | **$pp_ratio** (target <= 2) |"
    echo "| same, median | $(fmt "$(v pkt.pingpong_det_8_ns_med)") ns | paired handoff $(fmt "$ho_med") ns | **$pp_ratio_med** (target <= 2) |"
    echo "| same vs plain ring, min | $(fmt "$pp") ns | paired ring $(fmt "$(v pkt.pingpong_ring_8_ns_min)") ns | $(ratio "$pp" "$(v pkt.pingpong_ring_8_ns_min)") |"
    echo "| one-packet half round trip, 240 B, deterministic, min | $(fmt "$(v pkt.pingpong_det_240_ns_min)") ns | paired ring $(fmt "$(v pkt.pingpong_ring_240_ns_min)") ns | $(ratio "$(v pkt.pingpong_det_240_ns_min)" "$(v pkt.pingpong_ring_240_ns_min)") |"
    echo "| one-packet half round trip, 8 B, adaptive, min | $(fmt "$(v pkt.pingpong_adapt_8_ns_min)") ns | paired handoff $(fmt "$ho") ns | $(ratio "$(v pkt.pingpong_adapt_8_ns_min)" "$ho") |"
    echo "| one-packet half round trip, 8 B, adaptive + TORX_CHAOS, median | $(fmt "$(v pkt.pingpong_chaos_8_ns_med)") ns | same job: handoff $(fmt "$ho_chaos_med") ns, deterministic $(fmt "$(v pkt.pingpong_cdet_8_ns_med)") ns | $(ratio "$(v pkt.pingpong_chaos_8_ns_med)" "$ho_chaos_med"), $(ratio "$(v pkt.pingpong_chaos_8_ns_med)" "$(v pkt.pingpong_cdet_8_ns_med)") |"
    echo "| streaming, 240 B payloads | $(fmt "$st" 2) GB/s, $(fmt "$(v pkt.stream_240_mpps_max)") Mpkt/s | memcpy 4 MiB $(fmt "$memcpy") GB/s | **$st_ratio** (target >= 0.20) |"
    echo "| streaming, 240 B payloads vs plain ring | $(fmt "$st" 2) GB/s | paired ring $(fmt "$(v pkt.stream_ring_240_gbs_max)" 2) GB/s | $(ratio "$st" "$(v pkt.stream_ring_240_gbs_max)") |"
    for n in 32 64 128; do
        echo "| streaming, $n B payloads | $(fmt "$(v pkt.stream_${n}_mpps_max)") Mpkt/s ($(fmt "$(v pkt.stream_${n}_gbs_max)" 2) GB/s) | paired ring $(fmt "$(v pkt.stream_ring_${n}_mpps_max)") Mpkt/s | $(ratio "$(v pkt.stream_${n}_mpps_max)" "$(v pkt.stream_ring_${n}_mpps_max)") |"
    done
    echo "| collective-network allreduce, 1 packet, min | $(fmt "$(v cn.allreduce_ns_min)") ns | paired handoff $(fmt "$cn_ho") ns | $(ratio "$(v cn.allreduce_ns_min)" "$cn_ho") |"
    echo "| reproducible double sum, 1 double, min | $(fmt "$(v cn.dsum_ns_min)") ns | paired handoff $(fmt "$cn_ho") ns | $(ratio "$(v cn.dsum_ns_min)" "$cn_ho") |"
    echo "| global-interrupt barrier, min | $(fmt "$(v cn.barrier_ns_min)") ns | paired handoff $(fmt "$cn_ho") ns | $(ratio "$(v cn.barrier_ns_min)" "$cn_ho") |"
    echo "| floors: handoff / memcpy 4 MiB / process_vm_readv 4 MiB (4 KiB, 2 MiB pages) | | $(fmt "$fl_handoff") ns / $(fmt "$memcpy") GB/s / $( [[ $cma_ok == 1 ]] && echo "$(fmt "$(v floor.cma_4m_gbs_max)"), $(fmt "$(v floor.cma_4m_huge_gbs_max)") GB/s" || echo "not permitted") | |"
} >"$paste"

# ---- Plot -------------------------------------------------------------------------
have_plot=0
{
    # The chaos job is left out: it ran in another window, maybe on another
    # vCPU placement, so its bars would not compare with these.
    echo "# payload det adapt ring (half round trip ns, min and median, best of rounds)"
    for n in 0 8 64 240; do
        echo "$n $(v pkt.pingpong_det_${n}_ns_min) $(v pkt.pingpong_adapt_${n}_ns_min)" \
             "$(v pkt.pingpong_ring_${n}_ns_min) $(v pkt.pingpong_det_${n}_ns_med)" \
             "$(v pkt.pingpong_adapt_${n}_ns_med) $(v pkt.pingpong_ring_${n}_ns_med)"
    done
} >"$work/lat.dat"
{
    echo "# payload torx_gbs ring_gbs torx_mpps ring_mpps"
    for n in 32 64 128 240; do
        echo "$n $(v pkt.stream_${n}_gbs_max) $(v pkt.stream_ring_${n}_gbs_max)" \
             "$(v pkt.stream_${n}_mpps_max) $(v pkt.stream_ring_${n}_mpps_max)"
    done
} >"$work/bw.dat"
{
    echo "# label ns"
    echo "\"handoff\" $cn_ho"
    echo "\"allreduce\" $(v cn.allreduce_ns_min)"
    echo "\"double sum\" $(v cn.dsum_ns_min)"
    echo "\"barrier\" $(v cn.barrier_ns_min)"
} >"$work/coll.dat"
if ! bench_have_gnuplot; then
    :
elif [[ $ho == NaN || $ho_med == NaN || $memcpy == NaN ]]; then
    echo "run-packet-bench: the references are missing; no PNG" >&2
else
    cma_plot=$(v floor.cma_4m_gbs_max)
    [[ $cma_ok == 1 && $cma_plot != NaN ]] || cma_plot=0
    [[ $cn_ho != NaN ]] || cn_ho=$ho
    bench_gnuplot "latdat='$work/lat.dat'; bwdat='$work/bw.dat'; colldat='$work/coll.dat'; \
handoff=$ho; handoffmed=$ho_med; cnhandoff=$cn_ho; memcpy=$memcpy; cma=$cma_plot; outfile='$png'; \
subtitle='$machine, $when, best of $rounds rounds'" "$here/plot-packet.gp" && have_plot=1
fi

# ---- Report file --------------------------------------------------------------------
{
    cat "$table"
    echo
    echo "---- for bench/RESULTS.md"
    cat "$paste"
    echo
    echo "---- best of rounds"
    cat "$work/best.txt"
    bench_report_rounds --no-stderr "$rounds" "$work" - "${progs[@]}"
} >"$report"

echo
echo "---- paste into bench/RESULTS.md (packet layer):"
cat "$paste"
echo
echo "report: $report"
[[ $have_plot == 1 ]] && echo "plot:   $png"
if [[ $failed != 0 ]]; then
    echo "run-packet-bench: at least one benchmark program failed (see above)" >&2
    exit 1
fi
exit 0
