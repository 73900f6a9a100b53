#!/usr/bin/env bash
# What the libfabric device costs on one host: the same MPI latency and
# bandwidth programs (bench/mpi_latency.c, bench/mpi_bw.c, built with torx's
# mpicc), 2 ranks bound one per core, in interleaved rounds:
#
#   shm       TORX_DEVICE=shm (the default)
#   ofi       TORX_DEVICE=ofi TORX_OFI_LOCAL=ofi: every packet through
#             libfabric (over lo, the provider torx picks: net), as between
#             hosts
#   hybrid    TORX_DEVICE=ofi: tasks of one host use its shm device
#   ucx       TORX_DEVICE=ucx TORX_UCX_LOCAL=ucx: every packet through UCX
#             (tcp over lo: UCX's shared-memory transports cannot wake a
#             sleeping task), where libtorx has the device
#   fi        libfabric's own fi_pingpong (FABRIC_PROVIDER, default net, RDM,
#             tagged) over lo: the provider's floor for the ofi line
#             (latency only)
#
# Prints the median over rounds of each run's median, and the ratios ofi/shm
# and ofi/fi. Usage: bench/run-ofi-cost.sh   (ROUNDS, default 3; LAT_SIZES,
# default 8,1K,16K,64K; BW_SIZES, default 64K,1M,4M; TORX_PREFIX)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
bench_name=run-ofi-cost
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
rounds=${ROUNDS:-3}
fabric_prov=${FABRIC_PROVIDER:-net}
lat_sizes=${LAT_SIZES:-8,1K,16K,64K}
bw_sizes=${BW_SIZES:-64K,1M,4M}
prefix=$(bench_torx_prefix)
[[ -x $prefix/bin/mpicc ]] || { echo "run-ofi-cost: no torx MPICH (run scripts/build-mpich.sh)" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/torx-oficost.XXXXXX")
trap 'rm -rf "$work"' EXIT
for p in mpi_latency mpi_bw; do
    "$prefix/bin/mpicc" -O2 -std=c11 -o "$work/$p" "$root/bench/$p.c"
done
declare -A env=([shm]="-genv TORX_DEVICE shm"
    [ofi]="-genv TORX_DEVICE ofi -genv TORX_OFI_LOCAL ofi -genv TORX_OFI_IFACE lo"
    [hybrid]="-genv TORX_DEVICE ofi -genv TORX_OFI_IFACE lo"
    [ucx]="-genv TORX_DEVICE ucx -genv TORX_UCX_LOCAL ucx")
variants="shm ofi hybrid"
[ -f "$prefix/lib/torx/torx-dev-ucx.so" ] && variants+=" ucx"
: >"$work/data" # kind variant size value
bench_machine
echo "== $machine; $when; torx $rev; loadavg $(loadavg)"
for ((r = 1; r <= rounds; r++)); do
    for v in $variants; do
        # shellcheck disable=SC2086 # env: -genv word pairs
        "$prefix/bin/mpiexec" -n 2 -bind-to core ${env[$v]} "$work/mpi_latency" -s "$lat_sizes" -n 2000 |
            awk -v v="$v" '$1 == "lat" && $NF == "ok" { print "lat", v, $2, $7 / 1000 }' >>"$work/data"
        # shellcheck disable=SC2086
        "$prefix/bin/mpiexec" -n 2 -bind-to core ${env[$v]} "$work/mpi_bw" -s "$bw_sizes" -n 20 |
            awk -v v="$v" '$1 == "bw" && $NF == "ok" { print "bw", v, $2, $8 }' >>"$work/data"
    done
    if command -v fi_pingpong >/dev/null; then
        for s in ${lat_sizes//,/ }; do
            b=$(to_bytes "$s")
            port=$((47600 + RANDOM % 1000))
            taskset -c 0 fi_pingpong -p "$fabric_prov" -e rdm -m tagged -B "$port" -I 20000 -S "$b" >/dev/null 2>&1 &
            sleep 0.3
            taskset -c 1 fi_pingpong -p "$fabric_prov" -e rdm -m tagged -P "$port" -I 20000 -S "$b" 127.0.0.1 2>/dev/null |
                awk -v b="$b" '$1 ~ /^[0-9]/ { print "lat fipp", b, $7 }' >>"$work/data" || true
            wait || true
        done
    fi
    echo "   round $r done"
done
# med KIND VARIANT SIZE: the median over rounds (NaN when none)
med() { awk -v k="$1" -v v="$2" -v s="$3" '$1 == k && $2 == v && $3 == s { print $4 }' "$work/data" | median_of; }
echo
echo "Latency, half round trip, µs (median of $rounds rounds)"
echo "| size | shm | ofi | hybrid | ucx | fi_pingpong | ofi / shm | ucx / shm | ofi / fi_pingpong |"
echo "|---|---|---|---|---|---|---|---|---|"
for s in ${lat_sizes//,/ }; do
    b=$(to_bytes "$s")
    a=$(med lat shm "$b") o=$(med lat ofi "$b") h=$(med lat hybrid "$b") f=$(med lat fipp "$b")
    u=$(med lat ucx "$b")
    echo "| $s | $(fmt "$a" 4) | $(fmt "$o" 4) | $(fmt "$h" 4) | $(fmt "$u" 4) | $(fmt "$f" 2) | $(ratio "$o" "$a") | $(ratio "$u" "$a") | $(ratio "$o" "$f") |"
done
echo
echo "Bandwidth, one way, MB/s (median of $rounds rounds)"
echo "| size | shm | ofi | hybrid | ucx | ofi / shm | ucx / shm |"
echo "|---|---|---|---|---|---|---|"
for s in ${bw_sizes//,/ }; do
    b=$(to_bytes "$s")
    a=$(med bw shm "$b") o=$(med bw ofi "$b") h=$(med bw hybrid "$b") u=$(med bw ucx "$b")
    echo "| $s | $(fmt "$a" 2) | $(fmt "$o" 2) | $(fmt "$h" 2) | $(fmt "$u" 2) | $(ratio "$o" "$a") | $(ratio "$u" "$a") |"
done
