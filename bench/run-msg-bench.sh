#!/usr/bin/env bash
# Message-layer benchmarks of torx, run the way docs/benchmarking.md
# describes: the programs interleaved in rounds (pingpong, bw heater, bw packets,
# bw co, overlap, pingpong, ...), every figure next to its reference measured
# in the same program run between the same two tasks, the best of each figure
# over the rounds, and the ratios.
#
#   msg_pingpong      1-byte half round trip per protocol (one-packet, eager,
#                     adaptive eager, rendezvous; virtual node in a vn job),
#                     the raw packet layer, and the paired cache-line handoff
#                     (the floor); cycles from the TSC rate
#   msg_bw heater     bandwidth vs size, one way and both ways: one-packet,
#                     eager, rendezvous (bulk get), with memcpy and a bare
#                     process_vm_readv single copy of the same size
#   msg_bw packets    the same for rendezvous with TORX_RZV_DATA=packets
#   msg_bw co         rendezvous in TORX_MODE=co (oversubscribed on 2 CPUs)
#   msg_overlap       heater vs co: rendezvous transfer overlapped with the
#                     receiver's computation
#   callgrind-onepkt.sh   instructions per one-packet message (once: the
#                     count is the same on every run)
#
# Usage: bench/run-msg-bench.sh
#   TORX_BUILD    build directory holding the bench programs (default ./build
#                 of the repository); looked up as $TORX_BUILD/bench/<prog>.
#                 This script builds nothing: run scripts/build.sh first.
#   ROUNDS        rounds (default 5, at least 1; BENCHMARKING.md asks for 3+)
#   RESULTS_DIR   where the report, the PNGs and msg-section.md go (default
#                 bench/results)
#   QUIET_WAIT_S  total seconds the script may spend waiting, before each
#                 program (at most QUIET_WAIT_EACH_S, default 5, each), for
#                 the machine to be idle (default 20; 0 never waits). The
#                 programs run anyway when it stays busy; the report says how
#                 busy ("other load").
#   Counts pass through: MSG_PP_ITERS, MSG_BW_*, MSG_OV_*, MSG_CO_PLACEMENT,
#   CG_N.
#   FROM_REPORT   a report this script wrote (msg-<stamp>.txt): run nothing,
#                 rebuild the tables, the PNGs and msg-section.md from the raw
#                 program outputs kept in it (its date, machine, command and
#                 per-run loads stay those of the original run); the report
#                 and its PNGs are rewritten in place.
#
# Writes $RESULTS_DIR/msg-<stamp>.txt (tables, then every program's raw
# output), msg-<stamp>-lat.png, msg-<stamp>-bw.png, msg-<stamp>-overlap.png
# and msg-section.md (the "Message layer" section for bench/RESULTS.md).
# Exit status: 0 when every program ran (targets are reported, not
# enforced); 1 when a program failed; 2 when programs are missing or the
# arguments are bad.
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
bench_name=run-msg-bench
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
bench_build_dir
rounds=${ROUNDS:-5}
results=${RESULTS_DIR:-$here/results}
quiet_wait=${QUIET_WAIT_S:-20}
quiet_each=${QUIET_WAIT_EACH_S:-5}

bench_check_counts ROUNDS:rounds QUIET_WAIT_S:quiet_wait QUIET_WAIT_EACH_S:quiet_each

# Runs of a round: id, then the command line (program and arguments).
run_ids=(pp bwh bwp bwc ov)
declare -A run_cmd=([pp]="msg_pingpong" [bwh]="msg_bw heater" [bwp]="msg_bw packets"
                    [bwc]="msg_bw co" [ov]="msg_overlap")
from=${FROM_REPORT:-}
if [[ -n $from && ! -f $from ]]; then
    echo "run-msg-bench: FROM_REPORT='$from' is not a file" >&2
    exit 2
fi
declare -A bin
for p in msg_pingpong msg_bw msg_overlap msg_onepkt_cg; do
    [[ -n $from ]] && break
    bin[$p]=$(bench_find_prog "$build" "$p" \
        "build the benchmarks there first (scripts/build.sh), or point TORX_BUILD at them") || exit 2
done

mkdir -p "$results" || exit 2
bench_machine
cmd="ROUNDS=$rounds QUIET_WAIT_S=$quiet_wait bench/run-msg-bench.sh   (TORX_BUILD=${TORX_BUILD:-build})"
total_note=""
if [[ -n $from ]]; then
    # The original run's identity, from the report's header.
    b=$(basename "$from" .txt)
    stamp=${b#msg-}
    results=$(cd "$(dirname "$from")" && pwd)
    when=$(sed -n 's/^date: *\(.*[^ ]\) *torx: .*/\1/p' "$from" | head -1)
    rev=$(sed -n 's/^date:.*torx: *//p' "$from" | head -1)
    machine=$(sed -n 's/^machine: *//p' "$from" | head -1)
    cmd=$(sed -n 's/^command: *//p' "$from" | head -1)
    rounds=$(sed -n 's/^---- round \([0-9]*\): .*/\1/p' "$from" | sort -n | tail -1)
    total_note=$(sed -n 's/^  total \([0-9]*\) s$/\1/p' "$from" | head -1)
    if [[ -z $when || -z $rounds ]]; then
        echo "run-msg-bench: $from is not a report of this script" >&2
        exit 2
    fi
fi
report=$results/msg-$stamp.txt
png_lat=$results/msg-$stamp-lat.png
png_bw=$results/msg-$stamp-bw.png
png_ov=$results/msg-$stamp-overlap.png
section=$results/msg-section.md
shown=${results#"$root"/}                 # relative to the repository
from_results_md=${results#"$root"/bench/} # relative to bench/RESULTS.md when inside bench/
work=$(mktemp -d "${TMPDIR:-/tmp}/torx-msgbench.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
start_s=$SECONDS

# Machine load: wait_quiet (lib.sh) spends at most the QUIET_WAIT_S budget.
quiet_left=$quiet_wait

failed=0
if [[ -n $from ]]; then
    echo "== re-rendering $from ($rounds rounds, run $when)"
    # Raw outputs: "---- round R: CMD" blocks (stderr after "-- stderr"), and
    # the callgrind block.
    awk -v dir="$work" '
        BEGIN { id["msg_pingpong"] = "pp"; id["msg_bw heater"] = "bwh"; id["msg_bw packets"] = "bwp"
                id["msg_bw co"] = "bwc"; id["msg_overlap"] = "ov" }
        # The report puts a blank line before each header: hold blank lines
        # back until the block goes on.
        /^---- round [0-9]+: / { r = $3; sub(/:$/, "", r); c = $0; sub(/^---- round [0-9]+: /, "", c)
                                 out = dir "/round" r "-" id[c] ".out"; printf "" > out; held = 0; next }
        /^---- callgrind-onepkt.sh$/ { out = dir "/cg.out"; printf "" > out; held = 0; next }
        /^---- / { out = ""; next }
        /^-- stderr$/ && out ~ /\.out$/ { sub(/\.out$/, ".err", out); printf "" > out; held = 0; next }
        out == "" { next }
        /^$/ { held++; next }
        { while (held > 0) { print "" > out; held-- } print > out }' "$from"
    # Loads: the "Runs" lines of the report.
    sed -n -E 's/^  ([0-9]+) (msg_[a-z_]+( [a-z]+)?) +([0-9.]+) s  other load +([0-9]+)%  loadavg ([0-9.,]+) -> ([0-9.,]+)(.*)$/\1|\2|\5|\8|\4|\6|\7/p' "$from" |
        awk -F'|' 'BEGIN { id["msg_pingpong"] = "pp"; id["msg_bw heater"] = "bwh"; id["msg_bw packets"] = "bwp"
                          id["msg_bw co"] = "bwc"; id["msg_overlap"] = "ov" }
                   { print $1, id[$2], $3, ($4 ~ /busy/) ? "no" : "yes", $5, $6, $7 }' >"$work/load.txt"
else
    echo "== torx message-layer benchmarks: $rounds rounds of: ${run_ids[*]/#/ }" | tr -s ' '
    echo "== $machine; $when; torx $rev"

    # ---- Run, interleaved ----------------------------------------------------------------
    # Each run records the load average before and after, and "other load": the
    # CPU time other processes used meanwhile, in % of all CPUs (busy time from
    # /proc/stat minus the run's own user+system time).
    declare -A broken
    : >"$work/load.txt"
    for ((r = 1; r <= rounds; r++)); do
        for id in "${run_ids[@]}"; do
            [[ -n ${broken[$id]:-} ]] && continue
            quiet=yes
            wait_quiet || quiet=no
            read -r prog args <<<"${run_cmd[$id]}"
            # shellcheck disable=SC2086 # args is a word list on purpose
            bench_run_timed "$work/round$r-$id.out" "$work/round$r-$id.err" "${bin[$prog]}" $args
            echo "$r $id $run_other $quiet $run_wall ${run_la0// /,} ${run_la1// /,}" >>"$work/load.txt"
            if ((run_rc == 0)); then
                printf '   round %d  %-16s ok  %6.1f s   other load %3s%%   loadavg %s -> %s%s\n' "$r" \
                    "${run_cmd[$id]}" "$run_wall" "$run_other" "$run_la0" "$run_la1" \
                    "$([[ $quiet == no ]] && echo "  (machine busy at start)")"
            else
                echo "   round $r  ${run_cmd[$id]} FAILED (exit $run_rc); its stderr:" >&2
                sed 's/^/     /' "$work/round$r-$id.err" >&2
                broken[$id]=1
                failed=1
            fi
        done
    done

    echo "   callgrind-onepkt.sh (once: instruction counts do not vary) ..."
    if ! TORX_BUILD=$build "$here/callgrind-onepkt.sh" >"$work/cg.out" 2>"$work/cg.err"; then
        echo "   callgrind-onepkt.sh FAILED:" >&2
        sed 's/^/     /' "$work/cg.err" >&2
        failed=1
    fi
fi
max_other=$(awk '$3 > m { m = $3 } END { print m + 0 }' "$work/load.txt")

# ---- Collect ----------------------------------------------------------------------------
# Every "group metric=value" line of every run, tagged with its round and run:
# "round run group.metric value".
for f in "$work"/round*.out; do
    [[ -f $f ]] || continue
    b=$(basename "$f" .out); r=${b%%-*}; r=${r#round}; id=${b#*-}
    awk -v r="$r" -v id="$id" '/^[a-z]+ [A-Za-z0-9_]+=[-+0-9.eEnaif]+$/ {
        split($2, kv, "="); print r, id, $1 "." kv[1], kv[2] }' "$f"
done >"$work/all.txt"

# Per key: best over rounds (latency keys "_ns_": lowest; others: highest),
# and the median of all values (overlap figures are read that way: their
# "best" would be the luckiest run, not the typical one).
awk '{ k = $3; v = $4 + 0; n[k]++; vals[k, n[k]] = v
       lower = (k ~ /_ns_/)
       if (!(k in b) || (lower && v < b[k]) || (!lower && v > b[k])) b[k] = v }
     END { for (k in n) {
             m = n[k]; for (i = 1; i <= m; i++) a[i] = vals[k, i]
             for (i = 2; i <= m; i++) { x = a[i]; j = i - 1; while (j >= 1 && a[j] > x) { a[j + 1] = a[j]; j-- } a[j + 1] = x }
             med = (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
             printf "%s %.6g %.6g %d\n", k, b[k], med, m } }' "$work/all.txt" | sort >"$work/agg.txt"

# v KEY: best of rounds, or NaN.  vm KEY: median of all values, or NaN.
v() { lookup "$1" "$work/agg.txt"; }
vm() { lookup "$1" "$work/agg.txt" 3; }
# vr ROUND KEY: the value in one round (first occurrence), or NaN.
vr() { awk -v r="$1" -v k="$2" '$1 == r && $3 == k { print $4; f = 1; exit } END { if (!f) print "NaN" }' "$work/all.txt"; }
# (ratio, fmt, verdict, human and lookup come from lib.sh.)
# per_round KEY_A KEY_B: A/B within each round (same program run).
per_round() {
    local r out=""
    for ((r = 1; r <= rounds; r++)); do
        out+="$(ratio "$(vr "$r" "$1")" "$(vr "$r" "$2")" "${3:-2}") "
    done
    echo "${out% }"
}
# stats of a space-separated list (n/a skipped): "min median max".
list_stats() {
    tr ' ' '\n' <<<"$1" | awk '$1 != "n/a" && $1 != "" { a[++n] = $1 + 0 }
        END { if (!n) { print "n/a n/a n/a"; exit }
              for (i = 2; i <= n; i++) { x = a[i]; j = i - 1; while (j >= 1 && a[j] > x) { a[j + 1] = a[j]; j-- } a[j + 1] = x }
              med = (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
              printf "%.2f %.2f %.2f\n", a[1], med, a[n] }'
}
cyc() { awk -v ns="$1" -v mhz="$tsc" 'BEGIN { if (ns == "NaN" || mhz == "NaN") print "-"; else printf "%.0f\n", ns * mhz / 1000 }'; }

tsc=$(v "msg.tsc_mhz")
cpuinfo=$(v "msg.cpuinfo_mhz")
oversub=$(awk '$3 ~ /oversubscribed$/ && $4 + 0 > 0 { o = 1 } END { print o + 0 }' "$work/all.txt")

# ---- Table 1: latency ----------------------------------------------------------------------
ho=$(v "msg.handoff_ns_min"); ho_med=$(v "msg.handoff_ns_med")
vho=$(v "msgvn.handoff_ns_min"); vho_med=$(v "msgvn.handoff_ns_med")
pkt_med=$(v "msg.pingpong_pkt_1_ns_med"); vpkt_med=$(v "msgvn.pingpong_pkt_1_ns_med")
lat_row() { # group mode label handoff_min handoff_med pkt_med
    local mn md
    mn=$(v "$1.pingpong_$2_1_ns_min"); md=$(v "$1.pingpong_$2_1_ns_med")
    printf '  %-28s %8s %8s %8s %9s %9s %8s\n' "$3" "$(fmt "$mn")" "$(fmt "$md")" "$(cyc "$md")" \
        "$(ratio "$mn" "$4")" "$(ratio "$md" "$5")" "$(ratio "$md" "$6")"
}
on_med=$(v "msg.pingpong_onepkt_1_ns_med"); ea_med=$(v "msg.pingpong_eager_1_ns_med")
ad_med=$(v "msg.pingpong_adaptive_1_ns_med"); rz_med=$(v "msg.pingpong_rzv_1_ns_med")
shape=$(awk -v a="$on_med" -v b="$ea_med" -v c="$ad_med" -v d="$rz_med" 'BEGIN {
    if (a == "NaN" || b == "NaN" || c == "NaN" || d == "NaN") print "not measured";
    else if (a < b && b < c && c < d) print "holds";
    else print "DOES NOT HOLD" }')
shape_rounds=""
for ((r = 1; r <= rounds; r++)); do
    shape_rounds+=$(awk -v a="$(vr "$r" msg.pingpong_onepkt_1_ns_med)" -v b="$(vr "$r" msg.pingpong_eager_1_ns_med)" \
        -v c="$(vr "$r" msg.pingpong_adaptive_1_ns_med)" -v d="$(vr "$r" msg.pingpong_rzv_1_ns_med)" 'BEGIN {
        if (a == "NaN" || d == "NaN") printf "-"; else if (a < b && b < c && c < d) printf "y"; else printf "n" }')
done

# ---- Bandwidth ----------------------------------------------------------------------------
sizes=$(awk '$3 ~ /^bw\.heater_memcpy_uni_[0-9]+_gbs_max$/ { split($3, p, "_"); print p[4] }' "$work/all.txt" | sort -n -u)
bw_cols=(heater_memcpy heater_cma heater_cmabusy heater_onepkt heater_eager heater_rzv packets_rzv co_rzv co_cma)
bw_head=(memcpy cma cma-busy onepkt eager rzv-get rzv-pkts co-rzv co-cma)
bw_table() { # dir
    printf '  %-8s' size
    for h in "${bw_head[@]}"; do printf ' %8s' "$h"; done
    echo
    for s in $sizes; do
        printf '  %-8s' "$(human "$s")"
        for c in "${bw_cols[@]}"; do printf ' %8s' "$(fmt "$(v "bw.${c}_$1_${s}_gbs_max")" 2)"; done
        echo
    done
}
for dir in uni bi; do
    {
        echo "# size ${bw_cols[*]} (GB/s, best of rounds; NaN: not measured)"
        for s in $sizes; do
            line="$s"
            for c in "${bw_cols[@]}"; do line+=" $(v "bw.${c}_${dir}_${s}_gbs_max")"; done
            echo "$line"
        done
    } >"$work/bw-$dir.dat"
done
M4=4194304
rzv4=$(v "bw.heater_rzv_uni_${M4}_gbs_max"); cma4=$(v "bw.heater_cma_uni_${M4}_gbs_max")
cmab4=$(v "bw.heater_cmabusy_uni_${M4}_gbs_max"); memcpy4=$(v "bw.heater_memcpy_uni_${M4}_gbs_max")
rzv4_ratio=$(ratio "$rzv4" "$cma4")
rzv4_rounds=$(per_round bw.heater_rzv_uni_${M4}_gbs_max bw.heater_cma_uni_${M4}_gbs_max)
read -r rzv4_rmin rzv4_rmed rzv4_rmax <<<"$(list_stats "$rzv4_rounds")"
rzv4_med_ratio=$(ratio "$(v "bw.heater_rzv_uni_${M4}_gbs_med")" "$(v "bw.heater_cma_uni_${M4}_gbs_med")")
rzv4_busy_ratio=$(ratio "$rzv4" "$cmab4")
rzv4bi=$(v "bw.heater_rzv_bi_${M4}_gbs_max"); cma4bi=$(v "bw.heater_cma_bi_${M4}_gbs_max")
co4=$(v "bw.co_rzv_uni_${M4}_gbs_max"); cocma4=$(v "bw.co_cma_uni_${M4}_gbs_max")
co4_rounds=$(per_round bw.co_rzv_uni_${M4}_gbs_max bw.co_cma_uni_${M4}_gbs_max)
pk4=$(v "bw.packets_rzv_uni_${M4}_gbs_max"); pkcma4=$(v "bw.packets_cma_uni_${M4}_gbs_max")
# Half-bandwidth point: the smallest size reaching half the protocol's best
# one-way figure (the original: half of peak at 500-byte messages).
half_point() { # column
    local best=0 s x
    for s in $sizes; do
        x=$(v "bw.${1}_uni_${s}_gbs_max")
        [[ $x == NaN ]] && continue
        best=$(awk -v a="$best" -v b="$x" 'BEGIN { print (b > a) ? b : a }')
    done
    for s in $sizes; do
        x=$(v "bw.${1}_uni_${s}_gbs_max")
        [[ $x == NaN ]] && continue
        if awk -v a="$x" -v b="$best" 'BEGIN { exit !(a >= b / 2) }'; then
            echo "$(human "$s") (peak $(fmt "$best" 2) GB/s)"
            return
        fi
    done
    echo "-"
}

# ---- Overlap -------------------------------------------------------------------------------
ov_sizes=$(awk '$3 ~ /^ov\.heater_[0-9]+_overlap$/ { split($3, p, "_"); print p[2] }' "$work/all.txt" | sort -n -u)
{
    echo "# size heater_overlap co_overlap heater_min heater_max co_min co_max (median over jobs of the per-repetition median; min/max over jobs)"
    for s in $ov_sizes; do
        hmin=$(awk -v k="ov.heater_${s}_overlap_rep_med" '$3 == k { if (!n++ || $4 < m) m = $4 } END { print n ? m : "NaN" }' "$work/all.txt")
        hmax=$(awk -v k="ov.heater_${s}_overlap_rep_med" '$3 == k { if (!n++ || $4 > m) m = $4 } END { print n ? m : "NaN" }' "$work/all.txt")
        cmin=$(awk -v k="ov.co_${s}_overlap_rep_med" '$3 == k { if (!n++ || $4 < m) m = $4 } END { print n ? m : "NaN" }' "$work/all.txt")
        cmax=$(awk -v k="ov.co_${s}_overlap_rep_med" '$3 == k { if (!n++ || $4 > m) m = $4 } END { print n ? m : "NaN" }' "$work/all.txt")
        echo "$s $(vm "ov.heater_${s}_overlap_rep_med") $(vm "ov.co_${s}_overlap_rep_med") $hmin $hmax $cmin $cmax"
    done
} >"$work/ov.dat"
ov_table() {
    printf '  %-8s %-7s %10s %10s %10s %9s %9s %9s %9s %5s\n' size mode "t_comm" "t_compute" "t_total" \
        overlap "(medians)" "GB/s alone" "with work" jobs
    for s in $ov_sizes; do
        for m in heater co; do
            printf '  %-8s %-7s %10s %10s %10s %9s %9s %9s %9s %5s\n' "$(human "$s")" "$m" \
                "$(fmt "$(awk -v x="$(vm "ov.${m}_${s}_tcomm_ns_med")" 'BEGIN { print x == "NaN" ? x : x / 1000 }')")" \
                "$(fmt "$(awk -v x="$(vm "ov.${m}_${s}_tcompute_ns_med")" 'BEGIN { print x == "NaN" ? x : x / 1000 }')")" \
                "$(fmt "$(awk -v x="$(vm "ov.${m}_${s}_ttotal_ns_med")" 'BEGIN { print x == "NaN" ? x : x / 1000 }')")" \
                "$(fmt "$(vm "ov.${m}_${s}_overlap_rep_med")" 2)" "$(fmt "$(vm "ov.${m}_${s}_overlap")" 2)" \
                "$(fmt "$(v "ov.${m}_${s}_bw_gbs_max")" 2)" \
                "$(fmt "$(awk -v x="$(vm "ov.${m}_${s}_ttotal_ns_med")" -v s="$s" 'BEGIN { print x == "NaN" ? x : s / x }')" 2)" \
                "$(awk -v k="ov.${m}_${s}_overlap" '$3 == k { n++ } END { print n + 0 }' "$work/all.txt")"
        done
    done
}

# ---- Callgrind ------------------------------------------------------------------------------
cg_msg=$(sed -n 's/^onepkt instructions\/message = //p' "$work/cg.out" 2>/dev/null)
cg_msg_t=$(sed -n 's/^onepkt instructions\/message (toggle-collect onepkt_loop) = //p' "$work/cg.out" 2>/dev/null)
cg_pkt=$(sed -n 's/^raw packet instructions\/packet = //p' "$work/cg.out" 2>/dev/null)
cg_over=$(sed -n 's/^message layer over the packet layer = //p' "$work/cg.out" 2>/dev/null)

# ---- Report table ---------------------------------------------------------------------------
table=$work/table.txt
{
    echo "torx message layer, best of $rounds interleaved rounds (latency: lowest; bandwidth: highest;"
    echo "overlap: median over all jobs)"
    echo "machine: $machine"
    echo "date:    $when    torx: $rev"
    echo "command: $cmd"
    [[ $oversub == 1 ]] && echo "WARNING: fewer than 2 CPUs were usable; the figures measure the scheduler"
    if ((max_other > 10)); then
        echo "WARNING: other processes used up to ${max_other}% of the CPUs during a run (see 'Runs'"
        echo "         below); pinned spinning tasks then wait for each other's time slices."
    fi
    echo
    echo "1. Half round trip, 1 byte, nearest neighbours (heater job: 2x1x1 torus), ns; paired references"
    echo "   cycles = median ns x TSC $(fmt "$tsc") MHz (rdtsc calibrated against CLOCK_MONOTONIC;"
    echo "   /proc/cpuinfo cpu MHz $(fmt "$cpuinfo"); the KVM guest's TSC runs at the host's nominal clock)"
    printf '  %-28s %8s %8s %8s %9s %9s %8s\n' "" min median cycles "/handoff" "(med)" "/pkt med"
    printf '  %-28s %8s %8s %8s\n' "cache-line handoff (floor)" "$(fmt "$ho")" "$(fmt "$ho_med")" "$(cyc "$ho_med")"
    lat_row msg pkt "raw packet layer" "$ho" "$ho_med" "$pkt_med"
    lat_row msg onepkt "one-packet" "$ho" "$ho_med" "$pkt_med"
    lat_row msg eager "eager" "$ho" "$ho_med" "$pkt_med"
    lat_row msg adaptive "adaptive eager" "$ho" "$ho_med" "$pkt_med"
    lat_row msg rzv "rendezvous (bulk get)" "$ho" "$ho_med" "$pkt_med"
    echo "  vn job: the two tasks are t=0 and t=1 of one node"
    printf '  %-28s %8s %8s %8s\n' "cache-line handoff (floor)" "$(fmt "$vho")" "$(fmt "$vho_med")" "$(cyc "$vho_med")"
    lat_row msgvn pkt "raw packet layer" "$vho" "$vho_med" "$vpkt_med"
    lat_row msgvn onepkt "one-packet" "$vho" "$vho_med" "$vpkt_med"
    lat_row msgvn vn "virtual node" "$vho" "$vho_med" "$vpkt_med"
    echo "  shape one-packet < eager < adaptive < rendezvous (medians, best of rounds): $shape;"
    echo "      per round: $shape_rounds  (y: holds, n: not)"
    echo "  relative to one-packet (medians): eager $(ratio "$ea_med" "$on_med"), adaptive $(ratio "$ad_med" "$on_med")," \
         "rendezvous $(ratio "$rz_med" "$on_med")  (original BG/L: 1.69, 2.06, 7.5)"
    echo
    echo "2. Bandwidth, GB/s (best of rounds). rzv-get, rzv-pkts: rendezvous by bulk get / by packets;"
    echo "   memcpy, cma (one process_vm_readv of the whole message from the peer), cma-busy (the same"
    echo "   with the peer spinning, as a torx sender does) are the references of the heater job;"
    echo "   co-rzv and co-cma come from the co job (TORX_MODE=co: 4 threads on $ncpu CPUs)."
    echo "   One way (window of ${MSG_BW_WINDOW:-16} sends):"
    bw_table uni
    echo "   Both ways (sum of the two directions):"
    bw_table bi
    echo "  rendezvous (bulk get) at 4 MiB / single copy at 4 MiB, target >= 0.90:"
    echo "      best / best       = $rzv4_ratio ($(verdict "$rzv4_ratio" 0.9)): $(fmt "$rzv4" 2) / $(fmt "$cma4" 2) GB/s"
    echo "      per round (same run): $rzv4_rounds  (min $rzv4_rmin, median $rzv4_rmed, max $rzv4_rmax)"
    echo "      median / median   = $rzv4_med_ratio;  vs cma with the peer spinning: $rzv4_busy_ratio"
    echo "      both ways: $(fmt "$rzv4bi" 2) / $(fmt "$cma4bi" 2) GB/s = $(ratio "$rzv4bi" "$cma4bi")"
    echo "      rendezvous / memcpy 4 MiB = $(ratio "$rzv4" "$memcpy4")"
    echo "  rendezvous by packets at 4 MiB / its job's single copy: $(ratio "$pk4" "$pkcma4") ($(fmt "$pk4" 2) / $(fmt "$pkcma4" 2) GB/s)"
    echo "  co mode rendezvous at 4 MiB / its job's single copy: $(ratio "$co4" "$cocma4") ($(fmt "$co4" 2) / $(fmt "$cocma4" 2) GB/s);" \
         "per round: $co4_rounds"
    echo "  half of the best one-way figure reached at: one-packet $(half_point heater_onepkt)," \
         "eager $(half_point heater_eager), rzv-get $(half_point heater_rzv), rzv-pkts $(half_point packets_rzv)"
    echo
    echo "3. Coprocessor vs heater: rank 0 receives a rendezvous message and computes (fixed work sized"
    echo "   to the transfer), t in us (median over jobs of each job's median); overlap = (t_comm +"
    echo "   t_compute - t_total) / t_comm, median over jobs of the per-repetition median (and from the"
    echo "   medians). GB/s alone: size / t_comm (best); with work: size / t_total, the rate the message"
    echo "   was delivered at while the receiver was busy computing for about as long as the transfer."
    echo "   co: main threads on CPU 0/1, communication threads on the other CPU (placement"
    echo "   ${MSG_CO_PLACEMENT:-cross}); 4 threads on $ncpu CPUs."
    ov_table
    echo
    echo "4. Instructions per one-packet message (send + receive, 1 byte; callgrind, same every run):"
    if [[ -n $cg_msg ]]; then
        echo "  onepkt instructions/message = $cg_msg (toggle-collect: $cg_msg_t)"
        echo "  raw packet layer: $cg_pkt instructions/packet; the message layer adds $cg_over"
    else
        echo "  not measured (callgrind-onepkt.sh failed)"
    fi
    echo
    echo "Runs (round, program, wall s, other processes' CPU load during the run, loadavg before -> after)"
    awk 'BEGIN { name["pp"] = "msg_pingpong"; name["bwh"] = "msg_bw heater"; name["bwp"] = "msg_bw packets"
                 name["bwc"] = "msg_bw co"; name["ov"] = "msg_overlap" }
         { printf "  %s %-16s %6.1f s  other load %3s%%  loadavg %s -> %s%s\n", $1, name[$2], $5, $3, $6, $7,
                  ($4 == "no") ? "  (busy at start)" : "" }' "$work/load.txt"
    echo "  total ${total_note:-$((SECONDS - start_s))} s"
} >"$table"
echo
cat "$table"

# ---- Plots ------------------------------------------------------------------------------------
{
    echo "# label median_ns min_ns cycles colour (grey: the job's paired cache-line handoff, the floor)"
    echo "\"handoff (floor)\" $ho_med $ho $(cyc "$ho_med") 0x999999"
    for m in pkt onepkt eager adaptive rzv; do
        case $m in pkt) l="raw packet";; onepkt) l="one-packet";; adaptive) l="adaptive eager";; rzv) l="rendezvous";; *) l=$m;; esac
        echo "\"$l\" $(v "msg.pingpong_${m}_1_ns_med") $(v "msg.pingpong_${m}_1_ns_min") $(cyc "$(v "msg.pingpong_${m}_1_ns_med")") 0x1f77b4"
    done
    echo "\"vn: handoff (floor)\" $vho_med $vho $(cyc "$vho_med") 0x999999"
    for m in pkt:"vn: raw packet" onepkt:"vn: one-packet" vn:"vn: virtual node"; do
        IFS=: read -r k l <<<"$m"
        echo "\"$l\" $(v "msgvn.pingpong_${k}_1_ns_med") $(v "msgvn.pingpong_${k}_1_ns_min") $(cyc "$(v "msgvn.pingpong_${k}_1_ns_med")") 0x2ca02c"
    done
} >"$work/lat.dat"
have_plot=0
if ! bench_have_gnuplot; then
    :
elif [[ $ho_med == NaN || -z $sizes ]]; then
    echo "run-msg-bench: figures missing; no PNG" >&2
else
    bench_gnuplot "latdat='$work/lat.dat'; bwuni='$work/bw-uni.dat'; bwbi='$work/bw-bi.dat'; \
ovdat='$work/ov.dat'; handoff=$ho_med; outlat='$png_lat'; outbw='$png_bw'; outov='$png_ov'; \
subtitle='$machine, $when, best of $rounds rounds'" "$here/plot-msg.gp" && have_plot=1
fi

# ---- The section for bench/RESULTS.md ------------------------------------------------------------
bwrow() { # label key-prefix size dir ref-prefix
    local x r name
    x=$(v "bw.$2_$4_$3_gbs_max"); r=$(v "bw.$5_$4_$3_gbs_max")
    case $5 in *_cma) name="single copy" ;; *_memcpy) name=memcpy ;; *) name=$5 ;; esac
    [[ $5 == co_* ]] && name="$name (co job)"
    [[ $5 == packets_* ]] && name="$name (packets job)"
    echo "| $1 | $(fmt "$x" 2) GB/s | $name $(fmt "$r" 2) GB/s | $(ratio "$x" "$r") |"
}
{
    echo "### Message layer"
    echo
    echo "#### $when"
    echo
    echo "- command: \`$cmd\` (programs \`bench/msg_pingpong\`, \`bench/msg_bw\`," \
         "\`bench/msg_overlap\`, \`bench/callgrind-onepkt.sh\`), torx $rev"
    echo "- machine: $machine"
    echo "- $rounds rounds, interleaved; best of rounds (overlap: median over jobs); other processes'" \
         "CPU load during runs: up to ${max_other}% (per run in the report)"
    echo "- report: \`$shown/msg-$stamp.txt\`"
    [[ $oversub == 1 ]] && echo "- **fewer than 2 CPUs were usable: the figures measure the scheduler**"
    echo
    echo "**Half round trip, 1 byte** (the original's Table 1 at message-layer level), heater mode," \
         "nearest neighbours; floor = one-way cache-line handoff between the same two pinned tasks," \
         "in the same program run. Cycles = median ns x $(fmt "$tsc") MHz, the TSC rate (rdtsc" \
         "calibrated against CLOCK_MONOTONIC; /proc/cpuinfo says $(fmt "$cpuinfo") MHz; on this KVM" \
         "guest the TSC runs at the host's nominal clock)."
    echo
    echo "| protocol | min ns | median ns | cycles | / handoff (median) | original BG/L, cycles |"
    echo "|---|---|---|---|---|---|"
    echo "| cache-line handoff (floor) | $(fmt "$ho") | $(fmt "$ho_med") | $(cyc "$ho_med") | 1 | |"
    for m in pkt:"raw packet layer": onepkt:one-packet:1600 eager:eager:2700 adaptive:"adaptive eager":3300 rzv:"rendezvous (bulk get)":12000; do
        IFS=: read -r k l o <<<"$m"
        echo "| $l | $(fmt "$(v "msg.pingpong_${k}_1_ns_min")") | $(fmt "$(v "msg.pingpong_${k}_1_ns_med")") |" \
             "$(cyc "$(v "msg.pingpong_${k}_1_ns_med")") | $(ratio "$(v "msg.pingpong_${k}_1_ns_med")" "$ho_med") | $o |"
    done
    echo "| vn mode (t=0 to t=1 of one node): handoff | $(fmt "$vho") | $(fmt "$vho_med") | $(cyc "$vho_med") | 1 | |"
    for m in pkt:"vn mode: raw packet layer" onepkt:"vn mode: one-packet" vn:"vn mode: virtual node"; do
        IFS=: read -r k l <<<"$m"
        echo "| $l | $(fmt "$(v "msgvn.pingpong_${k}_1_ns_min")") | $(fmt "$(v "msgvn.pingpong_${k}_1_ns_med")") |" \
             "$(cyc "$(v "msgvn.pingpong_${k}_1_ns_med")") | $(ratio "$(v "msgvn.pingpong_${k}_1_ns_med")" "$vho_med") | |"
    done
    echo
    echo "Shape one-packet < eager < adaptive eager < rendezvous (medians): **$shape** (per round: $shape_rounds)." \
         "Relative to one-packet: eager $(ratio "$ea_med" "$on_med"), adaptive $(ratio "$ad_med" "$on_med")," \
         "rendezvous $(ratio "$rz_med" "$on_med") (original: 1.69, 2.06, 7.5)."
    echo
    echo "**Bandwidth** against message size, window of ${MSG_BW_WINDOW:-16} sends, best of rounds;" \
         "references from the same program run: memcpy of the same size, and a bare single copy" \
         "(one \`process_vm_readv\` of the whole message from the peer)."
    echo
    echo "| figure | torx | reference | ratio |"
    echo "|---|---|---|---|"
    echo "| **rendezvous (bulk get), 4 MiB, one way** | $(fmt "$rzv4" 2) GB/s | single copy $(fmt "$cma4" 2) GB/s |" \
         "**$rzv4_ratio** (target >= 0.90: $(verdict "$rzv4_ratio" 0.9)); per round $rzv4_rounds |"
    echo "| same | $(fmt "$rzv4" 2) GB/s | single copy with the peer spinning $(fmt "$cmab4" 2) GB/s | $rzv4_busy_ratio |"
    echo "| same | $(fmt "$rzv4" 2) GB/s | memcpy $(fmt "$memcpy4" 2) GB/s | $(ratio "$rzv4" "$memcpy4") |"
    bwrow "rendezvous (bulk get), 4 MiB, both ways" heater_rzv $M4 bi heater_cma
    bwrow "rendezvous (bulk get), 64 MiB, one way" heater_rzv 67108864 uni heater_cma
    bwrow "rendezvous by packets, 4 MiB, one way" packets_rzv $M4 uni packets_cma
    bwrow "eager, 4 KiB, one way" heater_eager 4096 uni heater_cma
    bwrow "eager, 4 MiB, one way" heater_eager $M4 uni heater_memcpy
    bwrow "one-packet, 240 B, one way" heater_onepkt 240 uni heater_memcpy
    bwrow "one-packet, 240 B, both ways" heater_onepkt 240 bi heater_memcpy
    bwrow "co mode: rendezvous, 4 MiB, one way" co_rzv $M4 uni co_cma
    bwrow "co mode: rendezvous, 4 MiB, both ways" co_rzv $M4 bi co_cma
    echo
    echo "Half of the best one-way figure is reached at: one-packet $(half_point heater_onepkt)," \
         "eager $(half_point heater_eager), rendezvous $(half_point heater_rzv)," \
         "rendezvous by packets $(half_point packets_rzv). Co mode wants 2 cores per task: its 2-task" \
         "jobs run 4 threads on these $ncpu CPUs (oversubscribed); each task's communication thread" \
         "shares the other task's CPU."
    echo
    echo "**Coprocessor vs heater**: rank 0 receives a rendezvous message, computes (fixed work sized" \
         "to the transfer, no torx call), then waits; overlap = (t_comm + t_compute - t_total) / t_comm," \
         "median over jobs of the per-repetition median. Same oversubscription caveat."
    echo
    echo "| size | heater overlap | co overlap | heater t_comm / t_compute / t_total, us | co t_comm / t_compute / t_total, us | delivered while computing (size / t_total), heater / co |"
    echo "|---|---|---|---|---|---|"
    for s in $ov_sizes; do
        us() { awk -v x="$1" 'BEGIN { if (x == "NaN") print "-"; else printf "%.0f\n", x / 1000 }'; }
        gbs() { awk -v s="$1" -v x="$2" 'BEGIN { if (x == "NaN") print "-"; else printf "%.2f\n", s / x }'; }
        echo "| $(human "$s") | $(fmt "$(vm "ov.heater_${s}_overlap_rep_med")" 2) | $(fmt "$(vm "ov.co_${s}_overlap_rep_med")" 2) |" \
             "$(us "$(vm "ov.heater_${s}_tcomm_ns_med")") / $(us "$(vm "ov.heater_${s}_tcompute_ns_med")") / $(us "$(vm "ov.heater_${s}_ttotal_ns_med")") |" \
             "$(us "$(vm "ov.co_${s}_tcomm_ns_med")") / $(us "$(vm "ov.co_${s}_tcompute_ns_med")") / $(us "$(vm "ov.co_${s}_ttotal_ns_med")") |" \
             "$(gbs "$s" "$(vm "ov.heater_${s}_ttotal_ns_med")") / $(gbs "$s" "$(vm "ov.co_${s}_ttotal_ns_med")") GB/s |"
    done
    echo
    if [[ -n $cg_msg ]]; then
        echo "**Per-message cost** (callgrind, \`bench/callgrind-onepkt.sh\`; the same on every run):" \
             "onepkt instructions/message = **$cg_msg** (send plus receive of a 1-byte one-packet message," \
             "difference of runs with N and 2N messages; toggle-collect on the loop: $cg_msg_t). The raw" \
             "packet layer underneath: $cg_pkt instructions/packet; the message layer adds $cg_over."
        echo
    fi
    if [[ $have_plot == 1 ]]; then
        echo "![message-layer latency]($from_results_md/$(basename "$png_lat"))"
        echo "![message-layer bandwidth]($from_results_md/$(basename "$png_bw"))"
        echo "![co vs heater overlap]($from_results_md/$(basename "$png_ov"))"
    fi
} >"$section"

# ---- Report file ----------------------------------------------------------------------------------
{
    cat "$table"
    echo
    echo "---- msg-section.md (for bench/RESULTS.md)"
    cat "$section"
    echo
    echo "---- callgrind-onepkt.sh"
    cat "$work/cg.out" 2>/dev/null
    echo
    echo "---- aggregated: key, best of rounds, median of all values, count"
    cat "$work/agg.txt"
    bench_report_rounds "$rounds" "$work" run_cmd "${run_ids[@]}"
} >"$report"

echo
echo "report:  $report"
echo "section: $section"
[[ $have_plot == 1 ]] && echo "plots:   $png_lat $png_bw $png_ov"
if [[ $failed != 0 ]]; then
    echo "run-msg-bench: at least one benchmark program failed (see above)" >&2
    exit 1
fi
exit 0
