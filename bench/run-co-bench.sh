#!/usr/bin/env bash
# bench_machine (bench/lib.sh) sets stamp, when, machine and rev:
# shellcheck disable=SC2154
# Coprocessor mode against heater mode, the two ways issue 10 asks:
#
#   short of cores  2 ranks, plain `mpiexec -n 2` (what a user types), in
#                   TORX_MODE=heater and TORX_MODE=co in the same rounds:
#                   mpi_latency and mpi_bw of torx's MPICH at every power of
#                   two from 8 B to 4 MiB. On a 2-CPU host co has no core
#                   for its threads; the target is co at least 0.5x heater
#                   (latency at most 2x, bandwidth at least 0.5x) at every
#                   size.
#   with a core     bench/msg_overlap (message layer, 2 tasks; rank 1 only
#                   answers and sleeps, so rank 0's thread has the second
#                   CPU; TORX_CO_THREAD=own): how much of a rendezvous
#                   transfer hides behind rank 0's computation, heater
#                   against co, jobs interleaved.
#
# Rounds interleave heater and co, so drift hits both alike; figures are
# the median over rounds of each run's median; every round's ratio is shown.
#
# Usage: bench/run-co-bench.sh
#   ROUNDS       rounds (default 3)
#   QUICK=1      fewer sizes and iterations (a smoke test)
#   TORX_PREFIX  torx MPICH prefix (default: ~/.cache/torx/current-prefix)
#   TORX_BUILD   libtorx build with bench/msg_overlap (default: build)
# Output: bench/results/co-<stamp>.txt (the report, printed too), its raw
# runs in bench/results/co-<stamp>-raw/, and bench/results/co-<stamp>.png
# (co / heater per size) when gnuplot is installed.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bench_name=run-co-bench
# shellcheck source=bench/lib.sh
. "$here/lib.sh"

rounds=${ROUNDS:-3}
quick=${QUICK:-0}
bench_check_counts ROUNDS:rounds QUICK:quick
results=$root/bench/results
build=${TORX_BUILD:-$root/build}
[[ $build == /* ]] || build=$root/$build
prefix=$(bench_torx_prefix)
if [[ -z $prefix || ! -x $prefix/bin/mpicc ]]; then
    echo "$bench_name: no torx MPICH (bin/mpicc) in '${prefix:-?}'; run scripts/build-mpich.sh" >&2
    exit 2
fi
bin_ov=$(bench_find_prog "$build" msg_overlap "run scripts/build.sh") || exit 2

if ((quick)); then
    sizes=8,64,1K,8K,64K,1M,4M
    lat_n="-n 2000"
    bw_n="-n 50"
    ov_env=(MSG_OV_REPS=3 MSG_OV_PAIRS=1)
else
    sizes=8,16,32,64,128,256,512,1K,2K,4K,8K,16K,32K,64K,128K,256K,512K,1M,2M,4M
    lat_n=""
    bw_n=""
    ov_env=(MSG_OV_REPS=8 MSG_OV_PAIRS=1)
fi
modes=(heater co)

bench_machine
mkdir -p "$results" || exit 2
raw=$results/co-$stamp-raw
mkdir -p "$raw" || exit 2
report=$results/co-$stamp.txt
work=$(mktemp -d "${TMPDIR:-/tmp}/torx-cobench.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT

for p in mpi_latency mpi_bw; do
    "$prefix/bin/mpicc" -O2 -I"$here" -o "$work/$p" "$here/$p.c" || {
        echo "$bench_name: cannot build $p with $prefix/bin/mpicc" >&2
        exit 2
    }
done

failed=0
la_start=$(loadavg)
for ((r = 1; r <= rounds; r++)); do
    for prog in mpi_latency mpi_bw; do
        for m in "${modes[@]}"; do
            out=$raw/r$r-$prog-$m.txt
            n=$lat_n
            [[ $prog == mpi_bw ]] && n=$bw_n
            echo "round $r/$rounds: $prog $m" >&2
            # shellcheck disable=SC2086 # $n is a word list on purpose
            if ! timeout 600 "$prefix/bin/mpiexec" -n 2 -genv TORX_MODE "$m" -genv TORX_VERBOSE 1 \
                "$work/$prog" -s "$sizes" $n >"$out" 2>&1; then
                echo "$bench_name: round $r: $prog in $m mode failed (see $out)" >&2
                failed=1
            fi
        done
    done
    echo "round $r/$rounds: msg_overlap" >&2
    if ! timeout 900 env "${ov_env[@]}" "$bin_ov" >"$raw/r$r-overlap.txt" 2>&1; then
        echo "$bench_name: round $r: msg_overlap failed (see $raw/r$r-overlap.txt)" >&2
        failed=1
    fi
done
la_end=$(loadavg)

# ---- Report --------------------------------------------------------------------------

# value ROUND PROG MODE SIZE: the run's median (lat: ns, column 7; bw: MB/s, column 8)
value() {
    local col=7
    [[ $2 == mpi_bw ]] && col=8
    awk -v s="$4" -v c="$col" '$1 !~ /^#/ && $2 == s && NF > 8 { print $c; exit }' \
        "$raw/r$1-$2-$3.txt" 2>/dev/null
}
med() { printf '%s\n' "$@" | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { if (!NR) print ""; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

met=0
missed=0
{
    echo "# co against heater mode, $when"
    echo
    echo "- machine: $machine; torx $rev"
    echo "- command: \`ROUNDS=$rounds QUICK=$quick bench/run-co-bench.sh\`"
    echo "- load average: $la_start at the start, $la_end at the end"
    echo "- 2 ranks, plain \`mpiexec -n 2 -genv TORX_MODE heater|co\` (torx binds one task per core;"
    echo "  co's threads have no core of their own: $(grep -ho 'co mode: [^:]*' "$raw"/r1-mpi_latency-co.txt | head -1))"
    echo
    echo "## Short of cores: co / heater, same rounds (target: latency ratio <= 2, bandwidth ratio >= 0.5)"
    echo
    echo "| size | heater lat ns | co lat ns | co/heater (rounds) | | heater MB/s | co MB/s | co/heater (rounds) | |"
    echo "|---|---|---|---|---|---|---|---|---|"
    for s in ${sizes//,/ }; do
        b=$s
        [[ $s == *K ]] && b=$((${s%K} * 1024))
        [[ $s == *M ]] && b=$((${s%M} * 1048576))
        lh=() lc=() lr=() bh=() bc=() br=()
        for ((r = 1; r <= rounds; r++)); do
            h=$(value "$r" mpi_latency heater "$b") c=$(value "$r" mpi_latency co "$b")
            lh+=("$h") lc+=("$c")
            [[ -n $h && -n $c ]] && lr+=("$(awk -v a="$c" -v b="$h" 'BEGIN { printf "%.2f", a / b }')")
            h=$(value "$r" mpi_bw heater "$b") c=$(value "$r" mpi_bw co "$b")
            bh+=("$h") bc+=("$c")
            [[ -n $h && -n $c ]] && br+=("$(awk -v a="$c" -v b="$h" 'BEGIN { printf "%.2f", a / b }')")
        done
        lm=$(med "${lr[@]}") bm=$(med "${br[@]}")
        lv=- bv=-
        if [[ -n $lm ]]; then
            if awk -v x="$lm" 'BEGIN { exit !(x <= 2.0) }'; then lv=met; met=$((met + 1)); else lv=MISSED; missed=$((missed + 1)); fi
        fi
        if [[ -n $bm ]]; then
            if awk -v x="$bm" 'BEGIN { exit !(x >= 0.5) }'; then bv=met; met=$((met + 1)); else bv=MISSED; missed=$((missed + 1)); fi
        fi
        echo "| $s | $(med "${lh[@]}") | $(med "${lc[@]}") | $lm (${lr[*]}) | $lv | $(med "${bh[@]}") | $(med "${bc[@]}") | $bm (${br[*]}) | $bv |"
        echo "$b $lm $bm" >>"$work/plot.dat"
    done
    echo
    echo "targets: $met met, $missed missed"
    echo
    echo "## With a core: rendezvous overlapped with computation (bench/msg_overlap, TORX_CO_THREAD=own)"
    echo
    echo "overlap = (t_comm + t_compute - t_total) / t_comm: 0 when nothing moved while rank 0"
    echo "computed, 1 when the whole transfer hid behind the work; median over rounds."
    echo
    echo "| size | heater overlap (rounds) | co overlap (rounds) |"
    echo "|---|---|---|"
    for s in $(grep -ho 'heater_[0-9]*_overlap=' "$raw"/r*-overlap.txt 2>/dev/null | tr -dc '0-9\n' | sort -n -u); do
        ho=() co=()
        for ((r = 1; r <= rounds; r++)); do
            ho+=("$(sed -n "s/.*heater_${s}_overlap=\([-0-9.]*\).*/\1/p" "$raw/r$r-overlap.txt" | head -1)")
            co+=("$(sed -n "s/.*co_${s}_overlap=\([-0-9.]*\).*/\1/p" "$raw/r$r-overlap.txt" | head -1)")
        done
        echo "| $((s / 1048576)) MiB | $(med "${ho[@]}") (${ho[*]}) | $(med "${co[@]}") (${co[*]}) |"
    done
} | tee "$report"

if bench_have_gnuplot && [[ -s $work/plot.dat ]]; then
    gnuplot <<EOF || echo "$bench_name: gnuplot failed; no plot" >&2
set terminal pngcairo size 900,500
set output "$results/co-$stamp.png"
set title "co mode against heater mode, 2 ranks on 2 CPUs (threads share cores), $when"
set logscale x 2
set xlabel "message size (bytes)"
set ylabel "co / heater"
set yrange [0:*]
set key bottom right
set grid
plot "$work/plot.dat" using 1:(1/\$2) with linespoints title "latency (heater / co)", \
     "" using 1:3 with linespoints title "bandwidth (co / heater)", \
     0.5 with lines dashtype 2 title "target 0.5"
EOF
    echo "plot: $results/co-$stamp.png"
fi
echo "report: $report"
exit $failed
