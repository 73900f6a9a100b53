# shellcheck shell=bash
# The BG/P study's HALO mapping study (bench/sim/halo.c), sourced by
# run-sim-bench.sh for its `halo` and `halo-shm` targets
# (docs/mapping.md#halo-on-the-modelled-torus).
#
#   halo      bgp, vn mode (4 tasks per node), 16x16x16 (16,384 tasks) under
#             the orders XYZT, TXYZ, ZYXT and TZYX; then the job's traffic
#             (TORX_STATS_FILE), `torx-map opt` on it, and HALO under the
#             optimised mapping file. HALO_SCALE=1 adds 32x32x32 (131,072
#             tasks: about 18 GiB and hours of wall time; the traffic matrix
#             is limited to 16,384 ranks, so no opt there). HALO_SIZES
#             (default 8,64,512,4K), HALO_ITERS (2), HALO_WARMUP (1),
#             HALO_TORUS (the partitions, default 16x16x16).
#   halo-shm  the same orders on the shm device (mpiexec, TORX_MAPPING and
#             TORX_TORUS): 2 tasks in vn mode (TORX_CORES_PER_NODE=2 on a
#             2x1x1 torus, so TXYZ puts both on one node), median of 3
#             interleaved rounds; then 4 tasks the same way, oversubscribed
#             on a 2-core host (correctness: the times there are the
#             scheduler's).
#
# Needs run-sim-bench.sh's sim, build, out_dir and root.

# halo_kv KEY: the value of KEY=... on each line of stdin.
halo_kv() { awk -v k="$1" '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) print kv[2] } }'; }

# halo_table RAW LABEL...: the time per exchange (max over tasks, us) for
# each size (rows) and mapping label (columns) of the halo lines in RAW,
# then the slowest of the first four over the fastest, and the last
# label's time over the fastest of the first four when there are five.
halo_table() {
    local raw=$1
    shift
    awk -v labels="$*" '
        BEGIN { n = split(labels, lab, " ") }
        /^halo / { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                   t[v["map"], v["bytes"]] = v["max_us"]
                   if (!(v["bytes"] in seen)) { seen[v["bytes"]] = 1; order[++ns] = v["bytes"] } }
        END {
            printf "| bytes |"; for (j = 1; j <= n; j++) printf " %s, us |", lab[j]
            printf " slowest / fastest of %s |", (n >= 4 ? "the four" : "them")
            if (n == 5) printf " %s / fastest of the four |", lab[5]
            print ""
            printf "|---|"; for (j = 1; j <= n; j++) printf "---|"; printf "---|"; if (n == 5) printf "---|"; print ""
            for (s = 1; s <= ns; s++) { b = order[s]; lo = 0; hi = 0
                printf "| %d |", b
                for (j = 1; j <= n; j++) { x = t[lab[j], b]; printf " %s |", (x == "" ? "-" : sprintf("%.3f", x))
                    if (j <= 4 && x != "") { if (lo == 0 || x + 0 < lo) lo = x + 0; if (x + 0 > hi) hi = x + 0 } }
                printf " %s |", (lo > 0 ? sprintf("%.2f", hi / lo) : "-")
                if (n == 5) { x = t[lab[5], b]; printf " %s |", (x != "" && lo > 0 ? sprintf("%.2f", x / lo) : "-") }
                print "" } }' "$raw"
}

# halo_dat RAW FILE LABEL...: the same times as columns for plot-halo.gp.
halo_dat() {
    local raw=$1 dat=$2
    shift 2
    awk -v labels="$*" '
        BEGIN { n = split(labels, lab, " ") }
        /^halo / { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                   t[v["map"], v["bytes"]] = v["max_us"]
                   if (!(v["bytes"] in seen)) { seen[v["bytes"]] = 1; order[++ns] = v["bytes"] } }
        END { printf "# bytes"; for (j = 1; j <= n; j++) printf " %s_us", lab[j]; print ""
              for (s = 1; s <= ns; s++) { printf "%d", order[s]
                  for (j = 1; j <= n; j++) printf " %s", (t[lab[j], order[s]] == "" ? "NaN" : t[lab[j], order[s]]); print "" } }' \
        "$raw" >"$dat"
}

halo_sim() {
    local prog="$build/bench/sim/halo" sizes=${HALO_SIZES:-8,64,512,4K}
    local iters=${HALO_ITERS:-2} warmup=${HALO_WARMUP:-1} parts part raw tasks o
    local tm="$build/torx-map"
    read -r -a parts <<<"${HALO_TORUS:-16x16x16}"
    [ "${HALO_SCALE:-0}" = 1 ] && parts+=(32x32x32)
    for part in "${parts[@]}"; do
        tasks=$(echo "$part" | awk -F x '{ print $1 * $2 * $3 * 4 }')
        raw="$out_dir/sim-halo-$part.txt"
        : >"$raw"
        echo
        echo "## HALO on bgp, $part torus, vn mode ($tasks tasks, 4 per node), periodic 2-D grid"
        echo
        echo "Time per exchange (a message to each of 4 grid neighbours and one from each), the"
        echo "maximum over tasks, simulated; $iters timed exchanges after $warmup. Published (BG/P"
        echo "study): up to 2x between these mappings at 16K tasks, up to 3x at 128K."
        echo
        for o in XYZT TXYZ ZYXT TZYX; do
            /usr/bin/time -f "wall_s=%e maxrss_kib=%M" "$sim" --machine bgp --torus "$part" --mode vn \
                --map "$o" "$prog" --sizes "$sizes" --iters "$iters" --warmup "$warmup" >>"$raw" \
                2>>"$raw.err"
        done
        local labels="XYZT TXYZ ZYXT TZYX"
        if [ "$tasks" -le 16384 ]; then
            # the traffic is the grid's whatever the mapping: one 8-byte exchange records it
            local traffic="$out_dir/sim-halo-$part-traffic.txt" map="$out_dir/sim-halo-$part-opt.map"
            TORX_STATS_FILE=$traffic "$sim" --machine bgp --torus "$part" --mode vn --map XYZT \
                "$prog" --sizes 8 --iters 1 --warmup 0 >/dev/null 2>>"$raw.err"
            /usr/bin/time -f "opt wall_s=%e maxrss_kib=%M" "$tm" opt "$traffic" --torus "$part" \
                --tasks-per-node 4 -o "$map" >"$raw.opt" 2>>"$raw.err"
            "$tm" eval "$traffic" XYZT TXYZ ZYXT TZYX "$map" --torus "$part" --tasks-per-node 4 \
                >"$raw.eval"
            /usr/bin/time -f "wall_s=%e maxrss_kib=%M" "$sim" --machine bgp --torus "$part" --mode vn \
                --map "$map" "$prog" --sizes "$sizes" --iters "$iters" --warmup "$warmup" \
                2>>"$raw.err" | sed "s/ map=[^ ]* / map=opt /" >>"$raw"
            rm -f "$traffic"
            labels="$labels opt"
        fi
        # shellcheck disable=SC2086 # the labels are words
        halo_table "$raw" $labels
        # shellcheck disable=SC2086
        halo_dat "$raw" "$out_dir/sim-halo-$part.dat" $labels
        echo
        echo "Hops of the grid's messages under each mapping (hop-bytes: of one exchange of 8-byte messages):"
        echo
        echo "| mapping | hops per message | most hops | hop-bytes, 8 B |"
        echo "|---|---|---|---|"
        awk '/^halo / && / bytes=8 / { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
               printf "| %s | %s | %s | %s |\n", v["map"], v["hops_per_msg"], v["max_hops"], v["hop_bytes_per_exchange"] }' "$raw"
        if [ -s "$raw.opt" ]; then
            echo
            echo "\`torx-map opt\` (its hop-bytes per stage; the matrix is one 8-byte exchange):"
            echo
            sed 's/^/    /' "$raw.opt"
        fi
        echo
        echo "Wall time and memory per run (this machine):"
        echo
        sed 's/^/    /' "$raw.err"
    done
}

halo_shm() {
    local prefix mpiexec prog="$build/bench/sim/halo" sizes=8,64,512,4K,32K,64K n r o raw
    prefix=$(bench_torx_prefix)
    mpiexec="$prefix/bin/mpiexec"
    if [ ! -x "$mpiexec" ]; then
        echo "$bench_name: halo-shm: no torx mpiexec ($mpiexec): build MPICH with torx first" >&2
        return 2
    fi
    for n in 2 4; do
        raw="$out_dir/shm-halo-n$n.txt"
        : >"$raw"
        echo
        echo "## HALO on shm, $n tasks, vn mode (TORX_CORES_PER_NODE=2, TORX_TORUS=$((n / 2))x1x1)$([ "$n" -gt 2 ] && echo ', oversubscribed on 2 cores: correctness only')"
        echo
        echo "Time per exchange, max over tasks, median of 3 rounds (the orders interleaved in each);"
        echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)."
        echo
        for r in 1 2 3; do
            for o in XYZT TXYZ ZYXT TZYX; do
                TORX_MODE=vn TORX_CORES_PER_NODE=2 TORX_TORUS=$((n / 2))x1x1 TORX_MAPPING=$o \
                    timeout 300 "$mpiexec" -n "$n" "$prog" --sizes "$sizes" --iters 200 --warmup 20 \
                    2>/dev/null | sed "s/^halo /halo round=$r /" >>"$raw"
            done
        done
        awk '/^halo / { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                        k = v["map"] SUBSEP v["bytes"]; t[k] = t[k] " " v["max_us"]; h[v["map"]] = v["hops_per_msg"] }
             END { for (k in t) { n = split(t[k], a, " "); split(k, p, SUBSEP)
                     for (i = 2; i <= n; i++) { x = a[i]; j = i - 1; while (j >= 1 && a[j] + 0 > x + 0) { a[j + 1] = a[j]; j-- } a[j + 1] = x }
                     printf "halo map=%s bytes=%s max_us=%s hops_per_msg=%s\n", p[1], p[2], a[int((n + 1) / 2)], h[p[1]] } }' \
            "$raw" | sort -t= -k3 -n >"$raw.median"
        halo_table "$raw.median" XYZT TXYZ ZYXT TZYX
        echo
        echo "Hops per message (what a torus would pay; shm pays none):" \
            "$(awk '{ split($2, m, "="); split($5, h, "="); if (!(m[2] in s)) { s[m[2]] = 1; printf "%s %s; ", m[2], h[2] } }' "$raw.median")"
    done
}

halo_bench() {
    case $1 in
    halo) halo_sim ;;
    halo-shm) halo_shm ;;
    esac
}
