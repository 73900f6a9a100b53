#!/usr/bin/env bash
# The NAS Parallel Benchmarks across two emulated hosts (test/multihost/
# hosts.sh), beside the same job on one host: torx in heater mode, 4 tasks,
# built by bench/run-npb.sh (BUILD_ONLY=1) into its cache. In interleaved
# rounds, per benchmark:
#
#   1 host     4 tasks on this machine, TORX_DEVICE=shm
#   2 hosts    2 hosts x 2 tasks, for each network device in NET_DEVICES
#              (TORX_DEVICE=ofi, ucx): each host's two tasks through its shm
#              device, the hosts through libfabric or UCX (veths)
#
# Every run must print "Verification = SUCCESSFUL" (else the script fails).
# Prints Mop/s total per run and the median over rounds. Root (namespaces).
#
# Usage: bench/run-npb-multihost.sh
#   CLASS (default W), BENCHMARKS (default "bt cg ft mg"), ROUNDS (default 2),
#   NET_DEVICES (default ofi, and ucx where libtorx has it),
#   RUN_TIMEOUT_S (default 600), TORX_PREFIX, NPB_DIR as bench/run-npb.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
bench_name=run-npb-multihost
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
# shellcheck source=test/multihost/hosts.sh
. "$root/test/multihost/hosts.sh"
class=${CLASS:-W}
benches=${BENCHMARKS:-bt cg ft mg}
rounds=${ROUNDS:-2}
tmo=${RUN_TIMEOUT_S:-600}
prefix=$(bench_torx_prefix)
[[ -x $prefix/bin/mpiexec ]] || { echo "run-npb-multihost: no torx MPICH (run scripts/build-mpich.sh)" >&2; exit 2; }
mh_require

built=$(CLASS=$class BENCHMARKS=$benches IMPLS=torx BUILD_ONLY=1 "$here/run-npb.sh" | sed -n 's/^run-npb: built (BUILD_ONLY=1): //p')
declare -A bin
for f in $built; do
    b=$(basename "$f")
    bin[${b%%.*}]=$f
done

work=$(mktemp -d "${TMPDIR:-/tmp}/torx-npbmh.XXXXXX")
export TMH_NAME=tmhnpb$$ MPIEXEC=$prefix/bin/mpiexec
mh_init_vars
trap 'mh_down; rm -rf "$work"' EXIT
nets=${NET_DEVICES:-ofi$([ -f "$prefix/lib/torx/torx-dev-ucx.so" ] && echo " ucx")}
mh_up 2
bench_machine
echo "== $machine; $when; torx $rev; class $class"
failed=0
: >"$work/data" # bench where mops round
for ((r = 1; r <= rounds; r++)); do
    for b in $benches; do
        [[ -n ${bin[$b]:-} ]] || { echo "run-npb-multihost: no binary for $b" >&2; exit 2; }
        for where in 1host $(printf '2hosts-%s ' $nets); do
            out=$work/$b-$where-$r.out
            rc=0
            if [[ $where == 1host ]]; then
                timeout -k 5 "$tmo" "$prefix/bin/mpiexec" -n 4 -genv TORX_DEVICE shm "${bin[$b]}" >"$out" 2>&1 </dev/null || rc=$?
            else
                timeout -k 5 "$tmo" "$root/test/multihost/hosts.sh" mpiexec -n 4 -ppn 2 \
                    -genv TORX_DEVICE "${where#2hosts-}" "${bin[$b]}" >"$out" 2>&1 </dev/null || rc=$?
            fi
            mops=$(awk '/Mop\/s total/ { print $NF }' "$out")
            if ((rc == 0)) && grep -Eq '^[[:space:]]*Verification[[:space:]]*=[[:space:]]*SUCCESSFUL' "$out"; then
                printf '   round %d  %-3s %-11s verified  %10s Mop/s total\n' "$r" "$b" "$where" "$mops"
                echo "$b $where $mops $r" >>"$work/data"
            else
                printf '   round %d  %-3s %-11s FAILED (exit %d)\n' "$r" "$b" "$where" "$rc"
                tail -n 15 "$out" | sed 's/^/     /'
                failed=1
            fi
        done
    done
done
# med BENCH WHERE: the median Mop/s over rounds (NaN when none)
med() { awk -v b="$1" -v w="$2" '$1 == b && $2 == w { print $3 }' "$work/data" | median_of; }
echo
echo "NPB class $class, 4 tasks, torx heater; Mop/s total, median of $rounds rounds"
head="| benchmark | 1 host (shm) |" rule="|---|---|"
for n in $nets; do
    head+=" 2 hosts x 2 (shm + $n) | / 1 host |"
    rule+="---|---|"
done
echo "$head"
echo "$rule"
for b in $benches; do
    o=$(med "$b" 1host) row="| ${b^^}.$class | $(fmt "$o" 2) |"
    for n in $nets; do
        t=$(med "$b" "2hosts-$n")
        row+=" $(fmt "$t" 2) | $(ratio "$t" "$o") |"
    done
    echo "$row"
done
exit $failed
