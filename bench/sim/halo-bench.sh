# shellcheck shell=bash
# The BG/P study's HALO mapping study (bench/sim/halo.c), sourced by
# run-sim-bench.sh for its `halo` and `halo-shm` targets
# (docs/mapping.md#halo-on-the-modelled-torus).
#
#   halo      bgp, vn mode (4 tasks per node), 16x16x16 (16,384 tasks) under
#             the orders XYZT, TXYZ, ZYXT and TZYX; then the job's traffic
#             (TORX_STATS_FILE), `torx-map opt` on it, and HALO under the
#             optimised mapping file. HALO_SCALE=1 adds 32x32x32 (131,072
#             tasks: about 16 GiB and 1.5-9 minutes a run, half an hour for
#             the default sizes; the traffic matrix is limited to 16,384
#             ranks, so no opt there). HALO_SIZES
#             (default 8,64,512: 4K adds more than 25 minutes per mapping at
#             16,384 tasks), HALO_ITERS (2), HALO_WARMUP (1), HALO_TORUS
#             (the partitions, default 16x16x16). Besides opt's map, a map
#             folded by hand (halo_fold_map) where the grid folds onto the
#             torus. About 15 minutes and 3 GiB at most (the recording run).
#   halo-shm  the same orders on the shm device (mpiexec, TORX_MAPPING and
#             TORX_TORUS): N tasks in vn mode, TORX_CORES_PER_NODE=2 on an
#             Nx1x1 torus (XYZT puts every task on a node of its own, TXYZ
#             two to a node, where they talk by the vn protocol), median of
#             3 interleaved rounds; N = 2, then 4, oversubscribed on a 2-core
#             host (correctness: the times there are the scheduler's).
#
# Needs run-sim-bench.sh's sim, build, out_dir and root.

# halo_kv KEY: the value of KEY=... on each line of stdin.
halo_kv() { awk -v k="$1" '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) print kv[2] } }'; }

# halo_table RAW LABEL...: the time per exchange (max over tasks, us) for
# each size (rows) and mapping label (columns) of the halo lines in RAW,
# then the slowest of the first four over the fastest, and each further
# label's time over the fastest of the first four.
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
            for (j = 5; j <= n; j++) printf " %s / fastest of the four |", lab[j]
            print ""
            printf "|---|"; for (j = 1; j <= n; j++) printf "---|"; printf "---|"
            for (j = 5; j <= n; j++) printf "---|"; print ""
            for (s = 1; s <= ns; s++) { b = order[s]; lo = 0; hi = 0
                printf "| %d |", b
                for (j = 1; j <= n; j++) { x = t[lab[j], b]; printf " %s |", (x == "" ? "-" : sprintf("%.3f", x))
                    if (j <= 4 && x != "") { if (lo == 0 || x + 0 < lo) lo = x + 0; if (x + 0 > hi) hi = x + 0 } }
                printf " %s |", (lo > 0 ? sprintf("%.2f", hi / lo) : "-")
                for (j = 5; j <= n; j++) { x = t[lab[j], b]; printf " %s |", (x != "" && lo > 0 ? sprintf("%.2f", x / lo) : "-") }
                print "" } }' "$raw"
}

# halo_fold_map X Y Z PX PY: a mapping file for HALO's PX x PY grid on an
# XxYxZ torus with 4 tasks per node, made by hand for comparison with opt's:
# each 2x2 block of the grid on one node (two of a task's four partners
# there), the node grid's columns snaked along x and its rows along y, the
# folds stacked in z, so that nearly every other partner is one hop away.
# Fails when the grid does not fold that way (PX / 2X times PY / 2Y must be Z).
halo_fold_map() {
    awk -v X="$1" -v Y="$2" -v Z="$3" -v PX="$4" -v PY="$5" 'BEGIN {
        A = PX / (2 * X); D = PY / (2 * Y)
        if (A != int(A) || D != int(D) || A * D != Z) exit 1
        print "# HALO grid " PX "x" PY " folded onto " X "x" Y "x" Z ": a 2x2 block of the grid per node, snaked"
        for (r = 0; r < PY; r++)
            for (c = 0; c < PX; c++) {
                u = int(c / 2); a = int(u / X); b = u % X; x = (a % 2 == 0) ? b : X - 1 - b
                v = int(r / 2); d = int(v / Y); e = v % Y; y = (d % 2 == 0) ? e : Y - 1 - e
                z = A * d + ((d % 2 == 0) ? a : A - 1 - a)
                print x, y, z, (c % 2) + 2 * (r % 2)
            } }'
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
    local prog="$build/bench/sim/halo" sizes=${HALO_SIZES:-8,64,512}
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
        local fold="$out_dir/sim-halo-$part-fold.map" grid
        grid=$(awk '/^halo / { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "grid") { print kv[2]; exit } } }' "$raw")
        # shellcheck disable=SC2046 # X Y Z PX PY as words
        if halo_fold_map $(echo "$part $grid" | tr 'x' ' ') >"$fold"; then
            /usr/bin/time -f "wall_s=%e maxrss_kib=%M" "$sim" --machine bgp --torus "$part" --mode vn \
                --map "$fold" "$prog" --sizes "$sizes" --iters "$iters" --warmup "$warmup" \
                2>>"$raw.err" | sed "s/ map=[^ ]* / map=fold /" >>"$raw"
            labels="$labels fold"
        else
            rm -f "$fold"
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
        echo "## HALO on shm, $n tasks, vn mode (TORX_CORES_PER_NODE=2, TORX_TORUS=${n}x1x1)$([ "$n" -gt 2 ] && echo ', oversubscribed on 2 cores: correctness only')"
        echo
        echo "Time per exchange, max over tasks, median of 3 rounds (the orders interleaved in each);"
        echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)."
        echo
        for r in 1 2 3; do
            # -bind-to core: torx binds only when every node of the torus
            # fits the host's cores, and this torus has more slots than tasks
            for o in XYZT TXYZ ZYXT TZYX; do
                TORX_MODE=vn TORX_CORES_PER_NODE=2 TORX_TORUS=${n}x1x1 TORX_MAPPING=$o \
                    timeout 300 "$mpiexec" -n "$n" -bind-to core "$prog" --sizes "$sizes" \
                    --iters 200 --warmup 20 \
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
