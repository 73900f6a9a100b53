#!/usr/bin/env bash
# The soak run (make soak; not part of CI): test/mpi/soak.c, mixed
# protocols and sizes with every byte and every stream's order checked, for
# SOAK_SECONDS in all (default 600), split over three jobs:
#   heater, 4 ranks, TORX_CHAOS on and adaptive eager up to 64 KiB
#   vn,     4 ranks (virtual-node protocol between the tasks of a node), chaos on
#   co,     2 ranks (the communication thread receives rendezvous data)
# Uses the MPICH that scripts/build-mpich.sh built ($TORX_CACHE/current-prefix,
# or $TORX_MPICH_PREFIX). Prints each job's totals, then
# "soak.sh: N passed, M failed"; exits 1 if any job failed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${TORX_CACHE:-$HOME/.cache/torx}
prefix=${TORX_MPICH_PREFIX:-$(cat "$cache/current-prefix" 2>/dev/null)}
[ -n "$prefix" ] && [ -x "$prefix/bin/mpicc" ] || {
    echo "soak.sh: no MPICH with ch4:torx (run scripts/build-mpich.sh)" >&2
    exit 2
}
total=${SOAK_SECONDS:-600}
[[ $total =~ ^[1-9][0-9]*$ ]] || {
    echo "soak.sh: SOAK_SECONDS=$total is not a number of seconds" >&2
    exit 2
}
each=$(((total + 2) / 3))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$prefix/bin/mpicc" -O2 -Wall -o "$work/soak" "$here/soak.c" || exit 2
pass=0
fail=0
seed=${SOAK_SEED:-$RANDOM}
echo "soak.sh: $total s in all, SOAK_SEED=$seed"
job() {
    local label=$1 np=$2
    shift 2
    local genv=() kv
    for kv in "$@" TORX_VERBOSE=-1; do genv+=(-genv "${kv%%=*}" "${kv#*=}"); done
    timeout -k 10 $((each + 120)) "$prefix/bin/mpiexec" -n "$np" -genv SOAK_SECONDS "$each" \
        -genv SOAK_SEED "$seed" "${genv[@]}" "$work/soak" >"$work/$label.log" 2>&1 </dev/null
    local rc=$?
    if [ $rc = 0 ] && grep -q '^ No Errors' "$work/$label.log"; then
        pass=$((pass + 1))
        echo "ok   $label: $(grep '^soak: [0-9]* ranks' "$work/$label.log")"
    else
        fail=$((fail + 1))
        echo "FAIL $label: exit $rc; output:"
        tail -n 20 "$work/$label.log" | sed 's/^/     /'
    fi
}
job heater-chaos-adaptive 4 TORX_MODE=heater TORX_CHAOS=$((seed + 1)) TORX_ADAPTIVE_LIMIT=65536
job vn-chaos 4 TORX_MODE=vn TORX_CHAOS=$((seed + 2))
job co 2 TORX_MODE=co
echo "soak.sh: $pass passed, $fail failed"
[ $fail = 0 ]
