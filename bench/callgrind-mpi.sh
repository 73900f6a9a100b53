#!/usr/bin/env bash
# Instructions per MPI round trip, counted by callgrind: the repeatable
# figure behind the latency of small messages, for torx MPICH and the peers
# alike, which the noise of these VMs cannot move.
#
# bench/mpi_latency (the source run-mpi-bench.sh uses), built with each
# MPI's mpicc, runs a ping-pong of one size on 2 ranks with rank 1 under
# callgrind. Rank 0 runs natively and answers at once, so rank 1 finds each
# message waiting: its count is the work of one receive and one send through
# the whole stack (MPI library, netmod, message and packet layers), with
# few idle polls. Two runs, with N and 2N round trips (plus the program's
# warm-up of a tenth); the difference, divided by the extra round trips,
# cancels start-up and finalize.
#
# Usage: bench/callgrind-mpi.sh
#   IMPLS        which MPIs (default "torx openmpi mpich"): torx = torx MPICH
#                ($TORX_PREFIX), mpich = Debian's MPICH (ch4:ucx),
#                openmpi = Debian's Open MPI
#   CG_SIZE      message size in bytes (default 8)
#   CG_N         round trips of the smaller run (default 10000)
#   TORX_PREFIX  torx MPICH install prefix (default: ~/.cache/torx/current-prefix)
#   TORX_ENV     extra environment for the torx runs, as VAR=VALUE words
#                (e.g. "TORX_MODE=vn"; LD_LIBRARY_PATH=DIR compares libtorx builds)
#   CG_DETAIL    1: also each function's own instructions per round trip
#                (the same difference, function by function; top 40). The
#                total moves by a few dozen between runs with the polls
#                that find nothing (torx_advance, torxp_shm_peek,
#                MPID_Progress_wait); the functions that do a message's
#                work give the same count every run.
# Prints "IMPL S bytes: X instructions/round trip" per MPI.
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
impls=${IMPLS:-torx openmpi mpich}
size=${CG_SIZE:-8}
n=${CG_N:-10000}
prefix=${TORX_PREFIX:-$(cat "$HOME/.cache/torx/current-prefix" 2>/dev/null)}
if ! [[ $n =~ ^[0-9]+$ && $n -ge 20 && $size =~ ^[0-9]+$ && $size -le 8192 ]]; then
    echo "callgrind-mpi: CG_N='$n' or CG_SIZE='$size' is not valid (N >= 20, size 0..8192)" >&2
    exit 2
fi
command -v valgrind >/dev/null 2>&1 || {
    echo "callgrind-mpi: valgrind not found (apt-get install valgrind)" >&2
    exit 2
}
work=$(mktemp -d "${TMPDIR:-/tmp}/torx-cgmpi.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT

# Rank 1 (hydra's PMI_RANK, Open MPI's OMPI_COMM_WORLD_RANK) under callgrind.
cat >"$work/rank1.sh" <<'EOF'
#!/bin/sh
r=${PMI_RANK:-${OMPI_COMM_WORLD_RANK:-}}
[ "$r" = 1 ] && exec valgrind --tool=callgrind --callgrind-out-file="$CG_OUT" "$@" 2>"$CG_OUT.log"
exec "$@"
EOF
chmod +x "$work/rank1.sh"

# count IMPL ROUNDTRIPS: the total instructions of rank 1.
count() {
    local impl=$1 rt=$2 out=$work/$1.$2.cg cmd
    case $impl in
    torx)
        cmd=("$prefix/bin/mpiexec" -n 2 -bind-to core -genv CG_OUT "$out")
        for kv in ${TORX_ENV:-}; do cmd+=(-genv "${kv%%=*}" "${kv#*=}"); done ;;
    mpich) cmd=(mpiexec.mpich -n 2 -bind-to core -genv CG_OUT "$out") ;;
    openmpi)
        cmd=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun.openmpi -n 2
            --bind-to core -x CG_OUT="$out") ;;
    esac
    if ! timeout 600 "${cmd[@]}" "$work/rank1.sh" "$work/$impl/mpi_latency" -s "$size" -n "$rt" \
            >"$work/run.log" 2>&1; then
        echo "callgrind-mpi: $impl run with $rt round trips failed:" >&2
        cat "$work/run.log" >&2
        exit 1
    fi
    grep -q "^lat $size .* ok$" "$work/run.log" || {
        echo "callgrind-mpi: $impl: no checked result line:" >&2; cat "$work/run.log" >&2; exit 1; }
    awk '/^summary:/ { print $2; found = 1 } END { if (!found) exit 1 }' "$out" || {
        echo "callgrind-mpi: $impl: no callgrind summary in $out" >&2; exit 1; }
}

# functions IMPL ROUNDTRIPS: "function instructions" of that run, own cost
# (callgrind_annotate's function table; a name in several files adds up).
functions() {
    callgrind_annotate --threshold=100 --auto=no "$work/$1.$2.cg" 2>/dev/null |
        awk '/^ *[0-9,]+ \(/ { v = $1; gsub(",", "", v); f = $0
                 sub(/^ *[0-9,]+ \([ 0-9.%]+\) +/, "", f); sub(/ \[.*/, "", f); sub(/.*:/, "", f)
                 a[f] += v }
             END { for (k in a) print k, a[k] }' | sort
}

echo "# valgrind $(valgrind --version 2>/dev/null); bench/mpi_latency -s $size, rank 1 counted;" \
    "N = $n round trips (and 2N)"
# mpi_latency adds a warm-up of a tenth of the iterations (at least 2).
rt1=$((n + (n / 10 > 2 ? n / 10 : 2)))
rt2=$((2 * n + (2 * n / 10 > 2 ? 2 * n / 10 : 2)))
declare -A mpicc=([torx]="$prefix/bin/mpicc" [mpich]=mpicc.mpich [openmpi]=mpicc.openmpi)
for impl in $impls; do
    [[ -n ${mpicc[$impl]:-} ]] || { echo "callgrind-mpi: unknown MPI '$impl'" >&2; exit 2; }
    mkdir -p "$work/$impl"
    if ! "${mpicc[$impl]}" -O2 -std=c11 -o "$work/$impl/mpi_latency" "$here/mpi_latency.c" \
            >"$work/cc.log" 2>&1; then
        echo "callgrind-mpi: building mpi_latency with ${mpicc[$impl]} failed:" >&2
        cat "$work/cc.log" >&2
        exit 2
    fi
    c1=$(count "$impl" "$n") || exit 1
    c2=$(count "$impl" $((2 * n))) || exit 1
    awk -v i="$impl" -v s="$size" -v a="$c1" -v b="$c2" -v r="$((rt2 - rt1))" \
        'BEGIN { printf "%s %s bytes: %.0f instructions/round trip\n", i, s, (b - a) / r }'
    if [ "${CG_DETAIL:-0}" = 1 ]; then
        join -a1 -a2 -e0 -o 0,1.2,2.2 <(functions "$impl" "$n") <(functions "$impl" $((2 * n))) |
            awk -v r="$((rt2 - rt1))" '{ d = ($3 - $2) / r; if (d >= 1) printf "  %-44s %7.1f\n", $1, d }' |
            sort -k2 -g -r | head -40
    fi
done
