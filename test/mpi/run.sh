#!/usr/bin/env bash
# Builds and runs torx's own small MPI tests with the MPICH that
# scripts/build-mpich.sh installed (its mpicc and hydra mpiexec), then proves
# that torx carried the traffic (TORX_STATS counters are non-zero).
#
#   test/mpi/run.sh [PREFIX]
#
# PREFIX: the MPICH install; default $TORX_MPICH_PREFIX, else the last one
# scripts/build-mpich.sh built ($TORX_CACHE/current-prefix).
# Environment: TORX_MPI_NP (ranks, default 4), TORX_MPI_TIMEOUT (s per run, 120).
# Exits non-zero when anything failed.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${TORX_CACHE:-$HOME/.cache/torx}
prefix=${1:-${TORX_MPICH_PREFIX:-}}
if [ -z "$prefix" ] && [ -f "$cache/current-prefix" ]; then
    prefix=$(cat "$cache/current-prefix")
fi
[ -n "$prefix" ] && [ -x "$prefix/bin/mpicc" ] || {
    echo "run.sh: no MPICH with ch4:torx found (${prefix:-none}); run scripts/build-mpich.sh" >&2
    exit 2
}
np=${TORX_MPI_NP:-4}
tmo=${TORX_MPI_TIMEOUT:-120}
out=$(mktemp -d "${TMPDIR:-/tmp}/torx-mpi-tests.XXXXXX")
trap 'rm -rf "$out"' EXIT

echo "run.sh: MPICH at $prefix ($("$prefix/bin/mpichversion" | sed -n 's/^MPICH Device:[[:space:]]*//p'))"
pass=0
fail=0
failed=()

for t in hello ring pingpong rma_coll probe_unexp; do
    if ! "$prefix/bin/mpicc" -O2 -Wall -o "$out/$t" "$here/$t.c" 2>"$out/$t.cc.log"; then
        echo "FAIL: $t (compile)"
        cat "$out/$t.cc.log"
        fail=$((fail + 1))
        failed+=("$t")
    fi
done

# run NAME NP [ENV...]: runs the test, passes when it exits 0 and prints " No Errors"
run() {
    local t=$1 n=$2 label=$1-np$2${3:+-${3%%=*}}
    shift 2
    [ -x "$out/$t" ] || return
    local start=$SECONDS
    env "$@" timeout -k 10 "$tmo" "$prefix/bin/mpiexec" -n "$n" "$out/$t" >"$out/$label.log" 2>&1 </dev/null
    local rc=$?
    if [ $rc = 0 ] && grep -q '^ No Errors' "$out/$label.log"; then
        echo "PASS: $label ${*:+($*) }($((SECONDS - start)) s)"
        pass=$((pass + 1))
    else
        echo "FAIL: $label ${*:+($*) }(exit $rc, $((SECONDS - start)) s); output:"
        tail -n 30 "$out/$label.log" | sed 's/^/    /'
        fail=$((fail + 1))
        failed+=("$label")
    fi
    if [ "$t" = pingpong ]; then
        grep -h "pingpong .* B:" "$out/$label.log" | sed 's/^/    /'
    fi
}

run hello 1
run hello "$np"
run ring 2
run ring "$np"
run pingpong 2
run pingpong "$np" TORX_CHAOS=7
run rma_coll 2
run rma_coll "$np"
run ring "$np" TORX_MODE=vn
run pingpong 2 TORX_EAGER_LIMIT=100000
run probe_unexp 2
run probe_unexp "$np"
run probe_unexp "$np" TORX_MODE=vn

# Proof that torx carried the traffic: the message layer's per-protocol
# counters (TORX_STATS=1, printed at finalize) and the netmod's AM counts.
if [ -x "$out/ring" ]; then
    TORX_STATS=1 timeout -k 10 "$tmo" "$prefix/bin/mpiexec" -n 2 "$out/ring" >"$out/stats.log" 2>&1 </dev/null
    rc=$?
    am=$(sed -n 's/.*torx netmod rank 0: active messages sent \([0-9]*\), received \([0-9]*\).*/\1 \2/p' "$out/stats.log")
    if [ $rc = 0 ] && [ -n "$am" ] && [ "${am% *}" -gt 0 ] && [ "${am#* }" -gt 0 ]; then
        echo "PASS: torx counters (rank 0: $am AM messages sent/received); TORX_STATS output:"
        grep -i 'torx' "$out/stats.log" | sed 's/^/    /' | head -n 20
        pass=$((pass + 1))
    else
        echo "FAIL: torx counters missing or zero (exit $rc); output:"
        tail -n 30 "$out/stats.log" | sed 's/^/    /'
        fail=$((fail + 1))
        failed+=(stats)
    fi
fi

echo "run.sh: $pass passed, $fail failed${failed[*]:+ (${failed[*]})}"
[ $fail = 0 ]
