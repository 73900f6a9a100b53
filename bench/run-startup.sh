#!/usr/bin/env bash
# How long a job takes to start and end: a program that calls MPI_Init and
# MPI_Finalize and nothing else, built with each MPI's mpicc and run as
# `mpiexec -n NP` on this host, timed from the launcher's start to its exit,
# in interleaved rounds. What a user waits for before any work, and what
# every program of a test suite pays. torx runs as a user gets it
# (TORX_DEVICE=auto: shm on one host).
#
# Usage: bench/run-startup.sh   (ROUNDS, default 10; NP, default 2;
#   IMPLS, default "torx mpich openmpi"; TORX_PREFIX)
# Prints the median and the best over rounds, seconds, per MPI.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
bench_name=run-startup
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
rounds=${ROUNDS:-10}
np=${NP:-2}
impls=${IMPLS:-torx mpich openmpi}
prefix=$(bench_torx_prefix)
work=$(mktemp -d "${TMPDIR:-/tmp}/torx-startup.XXXXXX")
trap 'rm -rf "$work"' EXIT
printf '#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); MPI_Finalize(); return 0; }\n' \
    >"$work/init.c"
declare -A cc=([torx]="$prefix/bin/mpicc" [mpich]=mpicc.mpich [openmpi]=mpicc.openmpi)
declare -A run=([torx]="$prefix/bin/mpiexec -n $np" [mpich]="mpiexec.mpich -n $np"
    [openmpi]="env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun.openmpi -n $np")
for i in $impls; do
    [[ -n ${cc[$i]:-} ]] || { echo "$bench_name: unknown MPI '$i'" >&2; exit 2; }
    "${cc[$i]}" -O2 -o "$work/init-$i" "$work/init.c" || { echo "$bench_name: ${cc[$i]} failed" >&2; exit 2; }
done
bench_machine
echo "== $machine; $when; torx $rev; $np tasks, $rounds rounds"
: >"$work/data"
for ((r = 1; r <= rounds; r++)); do
    for i in $impls; do
        t0=$(date +%s.%N)
        # shellcheck disable=SC2086 # run: the launcher's words
        ${run[$i]} "$work/init-$i" >/dev/null 2>&1 || { echo "$bench_name: $i failed" >&2; exit 1; }
        t1=$(date +%s.%N)
        echo "$i $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" >>"$work/data"
    done
done
echo "| MPI | seconds, median | best |"
echo "|---|---|---|"
for i in $impls; do
    m=$(awk -v i="$i" '$1 == i { print $2 }' "$work/data" | median_of)
    b=$(awk -v i="$i" '$1 == i { print $2 }' "$work/data" | sort -g | head -1)
    echo "| $i | $(fmt "$m" 3) | $(fmt "$b" 3) |"
done
