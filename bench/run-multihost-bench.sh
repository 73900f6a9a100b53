#!/usr/bin/env bash
# MPI latency and bandwidth between two emulated hosts (test/multihost/
# hosts.sh: own network, UTS, IPC, mount and PID namespaces and CPUs each,
# joined by veths on a bridge), one rank per host, for each MPI in IMPLS,
# run the way docs/benchmarking.md describes: the same source
# (bench/mpi_latency.c, bench/mpi_bw.c, bench/mpi_bibw.c) built with each
# MPI's mpicc, in interleaved rounds (round r: the TCP floor, latency of
# every MPI, then bandwidth one way of every MPI, then both ways; then round
# r+1). Every figure is the median over
# rounds of each run's median over timed batches (the best over rounds in
# parentheses).
#
# The floor (same rounds): test/multihost/tcp_floor, a plain TCP ping-pong
# and stream between the same two hosts, busy-polling, TCP_NODELAY: what an
# MPI over TCP between these hosts pays at least.
#
# The MPIs (one line each in the table below; a new one is one more line):
#   torx     torx MPICH with TORX_DEVICE=ofi (libfabric between hosts):
#            $TORX_PREFIX/bin/mpicc, its hydra mpiexec; the provider torx
#            picks by itself
#   torx-net, torx-rxm  the same with TORX_OFI_PROVIDER net or tcp;ofi_rxm
#   torx-ucx torx MPICH with TORX_DEVICE=ucx over UCX's tcp on eth0 (the
#            same transport as mpich below)
#   mpich    Debian's MPICH (ch4:ucx), UCX_TLS=tcp on eth0
#   openmpi  Debian's Open MPI, btl tcp,self on the hosts' subnet
# Each is probed first (a 2-rank 8-byte ping-pong across the hosts); one
# that is not installed or fails the probe is skipped with the reason.
# Every run's veth counters are read before and after: the report gives the
# bytes that crossed the wire per byte of payload.
#
# Usage (as root): bench/run-multihost-bench.sh
#   IMPLS        which MPIs, in order (default "torx mpich openmpi")
#   ROUNDS       rounds (default 3)
#   LAT_SIZES    mpi_latency sizes (default 8,1K,64K,1M); LAT_ITERS (-n,
#                default 2000)
#   BW_SIZES     mpi_bw and mpi_bibw sizes (default 64K,1M,4M); BW_ITERS (-n,
#                default 20)
#   NETEM        netem arguments for both hosts' eth0, e.g. "delay 50us"
#                (default none)
#   RUN_TIMEOUT_S  a run taking longer is killed and counts as failed
#                (default 120)
#   TORX_PREFIX  torx MPICH install prefix (default: the path in
#                ~/.cache/torx/current-prefix)
#   TORX_OFI_ENV extra -genv pairs for torx, e.g. "FI_PROVIDER tcp"
#   FABRIC_PROVIDERS  libfabric providers whose own ping-pong (fi_pingpong)
#                is measured as a floor (default "net tcp;ofi_rxm"; "" for none)
#   MH_BUILD     where the programs are built (default build/multihost)
#   RESULTS_DIR  where the report goes (default bench/results)
#
# Writes $RESULTS_DIR/multihost-<stamp>.txt (the summary, then every run's
# raw output) and multihost-section.md (the summary, for bench/RESULTS.md);
# prints the summary. Exit status: 0 when every run of every available MPI
# worked; 1 when a run failed; 2 when something is missing or an argument
# is bad; 77 when namespaces cannot be made (not root).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
bench_name=run-multihost-bench
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
# shellcheck source=test/multihost/hosts.sh
. "$root/test/multihost/hosts.sh"
set +e # lib.sh's helpers run commands that may fail and read $?; checked by hand below
set -u -o pipefail

impls_want=${IMPLS:-torx mpich openmpi}
rounds=${ROUNDS:-3}
lat_sizes=${LAT_SIZES:-8,1K,64K,1M}
lat_iters=${LAT_ITERS:-2000}
bw_sizes=${BW_SIZES:-64K,1M,4M}
bw_iters=${BW_ITERS:-20}
netem=${NETEM:-}
fabric_provs=${FABRIC_PROVIDERS-net tcp;ofi_rxm}
run_timeout=${RUN_TIMEOUT_S:-120}
build=${MH_BUILD:-$root/build/multihost}
results=${RESULTS_DIR:-$here/results}
prefix=$(bench_torx_prefix)
bench_check_counts ROUNDS:rounds LAT_ITERS:lat_iters BW_ITERS:bw_iters RUN_TIMEOUT_S:run_timeout
for s in "$lat_sizes" "$bw_sizes"; do
    [[ $s =~ ^[0-9]+[KM]?(,[0-9]+[KM]?)*$ ]] || { echo "$bench_name: bad size list '$s'" >&2; exit 2; }
done
mh=$root/test/multihost/hosts.sh

# ---- The MPIs: name, mpicc, the command that runs "PROG ARGS" on 2 hosts -------------
declare -A impl_cc impl_run impl_what
impl() { # impl NAME MPICC WHAT RUN...
    local name=$1
    impl_cc[$name]=$2
    impl_what[$name]=$3
    shift 3
    impl_run[$name]="$*"
}
# shellcheck disable=SC2016 # $mh and $prefix: expanded when run (eval)
{
impl torx "$prefix/bin/mpicc" "torx MPICH, TORX_DEVICE=ofi" \
    'MPIEXEC=$prefix/bin/mpiexec $mh mpiexec -n 2 -genv TORX_DEVICE ofi ${TORX_OFI_ENV:+-genv $TORX_OFI_ENV}'
impl torx-net "$prefix/bin/mpicc" "torx MPICH, TORX_DEVICE=ofi, TORX_OFI_PROVIDER=net" \
    'MPIEXEC=$prefix/bin/mpiexec $mh mpiexec -n 2 -genv TORX_DEVICE ofi -genv TORX_OFI_PROVIDER net ${TORX_OFI_ENV:+-genv $TORX_OFI_ENV}'
impl torx-rxm "$prefix/bin/mpicc" "torx MPICH, TORX_DEVICE=ofi, TORX_OFI_PROVIDER=tcp;ofi_rxm" \
    'MPIEXEC=$prefix/bin/mpiexec $mh mpiexec -n 2 -genv TORX_DEVICE ofi -genv TORX_OFI_PROVIDER "tcp;ofi_rxm" ${TORX_OFI_ENV:+-genv $TORX_OFI_ENV}'
impl torx-ucx "$prefix/bin/mpicc" "torx MPICH, TORX_DEVICE=ucx, TORX_UCX_TLS=tcp" \
    'MPIEXEC=$prefix/bin/mpiexec $mh mpiexec -n 2 -genv TORX_DEVICE ucx -genv TORX_UCX_TLS tcp -genv UCX_NET_DEVICES eth0'
impl mpich mpicc.mpich "Debian MPICH (ch4:ucx), UCX_TLS=tcp" \
    'MPIEXEC=mpiexec.mpich $mh mpiexec -n 2 -genv UCX_TLS tcp -genv UCX_NET_DEVICES eth0'
impl openmpi mpicc.openmpi "Debian Open MPI, btl tcp,self" \
    '$mh mpirun -n 2'
}

# run_cmd IMPL OUT ERR PROG ARGS...: runs PROG on the 2 hosts with IMPL
# (bench_run_timed: sets run_rc, run_wall, ...)
run_cmd() {
    local i=$1 out=$2 err=$3
    shift 3
    # $0 of that bash: the MPI's run line, with $prefix and $mh in it
    # shellcheck disable=SC2016
    bench_run_timed "$out" "$err" timeout -k 5 "$run_timeout" \
        env prefix="$prefix" mh="$mh" bash -c 'eval "$0 \"\$@\""' "${impl_run[$i]}" "$@" || true
}

mh_require
mkdir -p "$results" "$build"
bench_machine
work=$(mktemp -d "${TMPDIR:-/tmp}/torx-mhbench.XXXXXX")
export TMH_NAME=tmhb$$
mh_init_vars
trap 'mh_down; rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "== multi-host benchmarks: 2 emulated hosts, 1 rank each; $rounds rounds; IMPLS=$impls_want${netem:+; netem: $netem}"
echo "== $machine; $when; torx $rev; loadavg $(loadavg)"

# ---- Build ----------------------------------------------------------------------------
if ! cc -O2 -std=c11 -Wall -Wextra -o "$build/tcp_floor" "$root/test/multihost/tcp_floor.c" 2>"$work/cc.log"; then
    echo "$bench_name: building tcp_floor failed:" >&2
    cat "$work/cc.log" >&2
    exit 2
fi
cand=()
declare -A skipped
for i in $impls_want; do
    if [[ -z ${impl_cc[$i]:-} ]]; then
        echo "$bench_name: unknown MPI '$i' (known: ${!impl_cc[*]})" >&2
        exit 2
    fi
    cc_i=${impl_cc[$i]}
    if ! command -v "$cc_i" >/dev/null 2>&1; then
        skipped[$i]="$cc_i not found"
        continue
    fi
    mkdir -p "$build/$i"
    ok=1
    for p in mpi_latency mpi_bw mpi_bibw; do
        if ! "$cc_i" -O2 -std=c11 -Wall -Wextra -o "$build/$i/$p" "$here/$p.c" >"$work/cc.log" 2>&1; then
            skipped[$i]="building $p with $cc_i failed: $(tail -3 "$work/cc.log" | tr '\n' ' ')"
            ok=0
            break
        fi
    done
    if ((ok)); then cand+=("$i"); fi
done

# ---- Hosts and probes -------------------------------------------------------------------
# (hosts.sh as a command: its set -e guards every step of "up")
netem_arg=()
[[ -n $netem ]] && netem_arg=(--netem "$netem")
if ! "$mh" up 2 "${netem_arg[@]}"; then
    echo "$bench_name: could not make the hosts" >&2
    exit 2
fi
h1=$mh_net.1 h2=$mh_net.2
impls=()
for i in "${cand[@]}"; do
    run_cmd "$i" "$work/probe-$i.out" "$work/probe-$i.err" "$build/$i/mpi_latency" -s 8 -n 20
    if ((run_rc == 0)) && grep -q '^lat 8 .* ok$' "$work/probe-$i.out"; then
        impls+=("$i")
    else
        skipped[$i]="probe run failed (exit $run_rc): $(cat "$work/probe-$i.out" "$work/probe-$i.err" | grep -v '^#' | tail -4 | tr '\n' ' ')"
    fi
done
for i in $impls_want; do
    if [[ -n ${skipped[$i]:-} ]]; then echo "   $i skipped: ${skipped[$i]}"; fi
done
if ((${#impls[@]} == 0)); then
    echo "$bench_name: no MPI to measure" >&2
    exit 2
fi
echo "   measuring: ${impls[*]}"

counters() { mh_counters | awk -v h="$1" '$1 == h { print $2, $3 }'; }

# ---- Rounds -------------------------------------------------------------------------------
fabric_col() { # the column of provider $1's fi_pingpong: fi-net, fi-rxm, ...
    local c=${1#tcp;ofi_}
    echo "fi-${c//;/-}"
}
port=$((20000 + $$ % 20000))
failed=0
: >"$work/data.txt" # kind impl size value round
: >"$work/wire.txt" # impl kind round payload_bytes wire_bytes
declare -A broken
for ((r = 1; r <= rounds; r++)); do
    # floor: tcp_floor between the hosts
    port=$((port + 1))
    mh_run 2 "$build/tcp_floor" serve "$port" >"$work/r$r-floor-srv.out" 2>&1 &
    srv=$!
    bench_run_timed "$work/r$r-floor.out" "$work/r$r-floor.err" timeout -k 5 "$run_timeout" \
        "$mh" run 1 "$build/tcp_floor" run "$h2" "$port" "$lat_sizes" "$lat_iters" "$bw_sizes" || true
    ((run_rc == 0)) || { failed=1; kill "$srv" 2>/dev/null; }
    wait "$srv" || true
    printf '   round %d  %-12s %s  %6.1f s  other load %3s%%\n' "$r" floor \
        "$( ((run_rc == 0)) && echo ok || echo "FAILED (exit $run_rc)")" "$run_wall" "$run_other"
    awk -v r="$r" '$1 == "tcplat" { print "lat floor", $2, $6, r } $1 == "tcpbw" { print "bw floor", $2, $4, r }' \
        "$work/r$r-floor.out" >>"$work/data.txt"
    # libfabric's own ping-pong (fi_pingpong, RDM, tagged) between the same
    # hosts, per provider: the floor of the ofi device over that provider
    if command -v fi_pingpong >/dev/null; then
        for fp in $fabric_provs; do
            col=$(fabric_col "$fp")
            for s in ${lat_sizes//,/ }; do
                b=$(to_bytes "$s")
                port=$((port + 1))
                mh_run 2 fi_pingpong -p "$fp" -e rdm -m tagged -B "$port" -I "$lat_iters" -S "$b" \
                    >"$work/r$r-$col-srv.out" 2>&1 &
                srv=$!
                sleep 0.3
                timeout -k 5 "$run_timeout" "$mh" run 1 fi_pingpong -p "$fp" -e rdm -m tagged \
                    -P "$port" -I "$lat_iters" -S "$b" "$h2" >"$work/r$r-$col-$b.out" 2>&1 || true
                wait "$srv" || true
                awk -v r="$r" -v b="$b" -v c="$col" '$1 ~ /^[0-9]/ && NF >= 7 { print "lat", c, b, $7 * 1000, r }' \
                    "$work/r$r-$col-$b.out" >>"$work/data.txt"
            done
            printf '   round %d  %-12s done\n' "$r" "fi_pingpong $fp"
        done
    fi
    for kind in lat bw bibw; do
        for i in "${impls[@]}"; do
            [[ -n ${broken[$kind-$i]:-} ]] && continue
            if [[ $kind == lat ]]; then args=(-s "$lat_sizes" -n "$lat_iters"); prog=mpi_latency
            else args=(-s "$bw_sizes" -n "$bw_iters"); prog=mpi_$kind; fi
            read -r rx1a tx1a <<<"$(counters "$h1")"
            read -r rx2a tx2a <<<"$(counters "$h2")"
            run_cmd "$i" "$work/r$r-$kind-$i.out" "$work/r$r-$kind-$i.err" "$build/$i/$prog" "${args[@]}"
            read -r rx1b tx1b <<<"$(counters "$h1")"
            read -r rx2b tx2b <<<"$(counters "$h2")"
            ok=0
            if ((run_rc == 0)) && awk '$1 == "lat" || $1 == "bw" || $1 == "bibw" { n++; if ($NF != "ok") b++ } END { exit !(n && !b) }' \
                "$work/r$r-$kind-$i.out"; then ok=1; fi
            printf '   round %d  %-12s %s  %6.1f s  other load %3s%%\n' "$r" "$kind $i" \
                "$( ((ok)) && echo ok || echo "FAILED (exit $run_rc)")" "$run_wall" "$run_other"
            if ((!ok)); then
                sed 's/^/     /' "$work/r$r-$kind-$i.err" | tail -15 >&2
                broken[$kind-$i]=1
                failed=1
                continue
            fi
            awk -v r="$r" -v i="$i" '$1 == "lat" { print "lat", i, $2, $7, r } $1 == "bw" || $1 == "bibw" { print $1, i, $2, $8, r }' \
                "$work/r$r-$kind-$i.out" >>"$work/data.txt"
            # payload: lat: size x iters each way; bw: size x windows x window one
            # way; bibw: that both ways
            payload=$(awk '$1 == "lat" { s += 2 * $2 * $3 } $1 == "bw" { s += $2 * $3 * $4 }
                           $1 == "bibw" { s += 2 * $2 * $3 * $4 } END { printf "%.0f", s }' \
                "$work/r$r-$kind-$i.out")
            echo "$i $kind $r $payload $((tx1b - tx1a + tx2b - tx2a)) $((rx1b - rx1a + rx2b - rx2a))" >>"$work/wire.txt"
        done
    done
done

# ---- Summary ----------------------------------------------------------------------------
# stat KIND IMPL SIZE: "median best" over rounds (best: min for lat, max for bw)
stat() {
    awk -v k="$1" -v i="$2" -v s="$3" '$1 == k && $2 == i && $3 == s { print $4 }' "$work/data.txt" \
        | sort -g | awk -v k="$1" '{ a[++n] = $1 } END {
            if (!n) { print "NaN NaN"; exit }
            m = (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
            print m, (k == "lat") ? a[1] : a[n] }'
}
# round_ratios KIND IMPL SIZE PEER...: IMPL / the better peer in each round
# (the VM's speed changes within minutes, so each round is compared with
# itself), comma-separated
round_ratios() {
    local k=$1 i=$2 s=$3
    shift 3
    awk -v k="$k" -v i="$i" -v s="$s" -v peers="$*" '
        BEGIN { n = split(peers, p, " "); for (j = 1; j <= n; j++) isp[p[j]] = 1 }
        $1 == k && $3 == s && $2 == i { mine[$5] = $4; if ($5 > last) last = $5 }
        $1 == k && $3 == s && ($2 in isp) {
            if (!($5 in best) || (k == "lat" ? $4 < best[$5] : $4 > best[$5])) best[$5] = $4 }
        END {
            out = ""
            for (r = 1; r <= last; r++)
                if ((r in mine) && (r in best) && best[r] > 0)
                    out = out (out == "" ? "" : ", ") sprintf("%.2f", mine[r] / best[r])
            print out == "" ? "-" : out }' "$work/data.txt"
}
cell() { # cell MED BEST DIGITS
    if [[ $1 == NaN ]]; then echo "-"; else echo "$(fmt "$1" "$3") ($(fmt "$2" "$3"))"; fi
}
summary=$results/multihost-$stamp.txt
section=$results/multihost-section.md
cols=(floor)
for fp in $fabric_provs; do
    grep -q "^lat $(fabric_col "$fp") " "$work/data.txt" && cols+=("$(fabric_col "$fp")")
done
cols+=("${impls[@]}")
{
    echo "### MPI between two emulated hosts (test/multihost), $when"
    echo
    echo "Command: \`ROUNDS=$rounds IMPLS=\"$impls_want\"${netem:+ NETEM=\"$netem\"} bench/run-multihost-bench.sh\`;" \
         "$machine; torx $rev. Two hosts (network, UTS, IPC, mount, PID namespaces, one CPU each), one rank" \
         "each, joined by veths on a bridge${netem:+ with netem \"$netem\"}; $rounds interleaved rounds; median over" \
         "rounds of each run's median (best over rounds in parentheses). floor: test/multihost/tcp_floor," \
         "busy-polling TCP between the same hosts; fi-PROVIDER: libfabric's own fi_pingpong over that" \
         "provider (RDM, tagged; fi-rxm is tcp;ofi_rxm) between them, the ofi device's floor over it" \
         "(latency only)."
    for i in "${impls[@]}"; do echo "$i: ${impl_what[$i]}."; done
    for i in $impls_want; do
        if [[ -n ${skipped[$i]:-} ]]; then echo "Skipped: $i (${skipped[$i]})."; fi
    done
    echo
    for kind in lat bw bibw; do
        if [[ $kind == lat ]]; then
            echo "**Latency**, half round trip, µs"; sizes=$lat_sizes; div=1000; dig=1
        elif [[ $kind == bw ]]; then
            echo "**Bandwidth**, one way, MB/s (10^6 B/s)"; sizes=$bw_sizes; div=1; dig=0
        else
            echo "**Bandwidth**, both ways at once, MB/s (the sum)"; sizes=$bw_sizes; div=1; dig=0
        fi
        echo
        hdr="| size |"; sep="|---|"
        for c in "${cols[@]}"; do hdr+=" $c |"; sep+="---|"; done
        # the first MPI against the better of the peers (mpich, openmpi)
        r1=${impls[0]} peers=()
        for i in "${impls[@]}"; do [[ $i == mpich || $i == openmpi ]] && peers+=("$i"); done
        if ((${#peers[@]})) && [[ $r1 != mpich && $r1 != openmpi ]]; then
            hdr+=" $r1 / better peer | per round |"; sep+="---|---|"
        else
            peers=()
        fi
        echo "$hdr"; echo "$sep"
        for s in ${sizes//,/ }; do
            b=$(to_bytes "$s")
            row="| $s |"
            for c in "${cols[@]}"; do
                read -r med best <<<"$(stat "$kind" "$c" "$b")"
                if [[ $med != NaN ]]; then
                    med=$(awk -v x="$med" -v d="$div" 'BEGIN { print x / d }')
                    best=$(awk -v x="$best" -v d="$div" 'BEGIN { print x / d }')
                fi
                row+=" $(cell "$med" "$best" "$dig") |"
            done
            if ((${#peers[@]})); then
                better=$(for p in "${peers[@]}"; do stat "$kind" "$p" "$b" | cut -d' ' -f1; done \
                    | awk -v k="$kind" '$1 != "NaN" { if (!n++ || (k == "lat" ? $1 < v : $1 > v)) v = $1 }
                                         END { print n ? v : "NaN" }')
                row+=" $(ratio "$(stat "$kind" "$r1" "$b" | cut -d' ' -f1)" "$better") |"
                row+=" $(round_ratios "$kind" "$r1" "$b" "${peers[@]}") |"
            fi
            echo "$row"
        done
        echo
    done
    echo "**Wire bytes per payload byte** (both veths' tx over the timed payload, median over rounds; the" \
         "untimed warm-up, N/10 or at least 2 rounds, and the checks add to the wire but not to the payload):" \
        "$(for i in "${impls[@]}"; do for k in lat bw bibw; do
            v=$(awk -v i="$i" -v k="$k" '$1 == i && $2 == k && $4 > 0 { print $5 / $4 }' "$work/wire.txt" | median_of)
            printf '%s %s %s; ' "$i" "$k" "$(fmt "$v" 2)"; done; done | sed 's/; $//')."
} >"$work/summary.md"
{
    cat "$work/summary.md"
    echo
    echo "---- wire: impl kind round payload_bytes tx_bytes(both hosts) rx_bytes(both hosts)"
    cat "$work/wire.txt"
    echo "---- data: kind impl size value round"
    cat "$work/data.txt"
    for f in "$work"/probe-*.out "$work"/r*-*.out; do
        [[ -f $f ]] || continue
        echo
        echo "---- $(basename "$f" .out)"
        cat "$f"
        if [[ -s ${f%.out}.err ]]; then echo "-- stderr"; cat "${f%.out}.err"; fi
    done
} >"$summary"
# Plots: latency and bandwidth against size, one line per MPI and the floor
# (medians over rounds), as $results/multihost-<stamp>-{lat,bw,bibw}.png.
if bench_have_gnuplot; then
    for kind in lat bw bibw; do
        plotcmd="plot"
        for c in "${cols[@]}"; do
            : >"$work/plot-$kind-$c.dat"
            for b in $(awk -v k="$kind" -v c="$c" '$1 == k && $2 == c { print $3 }' "$work/data.txt" | sort -gu); do
                echo "$b $(stat "$kind" "$c" "$b" | cut -d' ' -f1)" >>"$work/plot-$kind-$c.dat"
            done
            [[ -s $work/plot-$kind-$c.dat ]] || continue
            plotcmd+=" '$work/plot-$kind-$c.dat' using 1:(\$2/$([[ $kind == lat ]] && echo 1000 || echo 1)) with linespoints title '$c',"
        done
        case $kind in
        lat) ylabel="half round trip (us)" title="latency" ;;
        bw) ylabel="MB/s" title="bandwidth, one way" ;;
        *) ylabel="MB/s" title="bandwidth, both ways at once (the sum)" ;;
        esac
        bench_gnuplot "out='$results/multihost-$stamp-$kind.png'" <(cat <<GP
set terminal png size 800,500
set output out
set logscale x 2
set logscale y
set xlabel "message size (bytes)"
set ylabel "$ylabel"
set title "MPI between two emulated hosts: $title ($machine)"
set key top left
${plotcmd%,}
GP
) && echo "plot:    $results/multihost-$stamp-$kind.png"
    done
fi
cp "$work/summary.md" "$section"
echo
cat "$work/summary.md"
echo "report:  $summary"
echo "section: $section"
mh_down
trap - EXIT
rm -rf "$work"
mh_check_clean || failed=1
exit $((failed ? 1 : 0))
