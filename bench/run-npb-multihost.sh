#!/usr/bin/env bash
# The NAS Parallel Benchmarks across two emulated hosts (test/multihost/
# hosts.sh), beside the same job on one host: torx in heater mode, 2 hosts x
# PER_HOST tasks, built by bench/run-npb.sh (BUILD_ONLY=1) into its cache.
# In interleaved rounds, per benchmark:
#
#   1 host     the same number of tasks on this machine, TORX_DEVICE=shm
#   2 hosts    2 hosts x PER_HOST tasks, for each network device in NET_DEVICES
#              (TORX_DEVICE=ofi, ucx): each host's two tasks through its shm
#              device, the hosts through libfabric or UCX (veths)
#   peers      the same 2 hosts x PER_HOST tasks with each MPI of PEERS, built
#              from the same source by bench/run-npb.sh: Debian's MPICH
#              (ch4:ucx, UCX_TLS=tcp on eth0 between hosts, UCX's shared
#              memory within one) and Open MPI (btl tcp,self on the hosts'
#              subnet, as test/multihost/hosts.sh runs it)
#
# Every run must print "Verification = SUCCESSFUL" (else the script fails).
# Prints Mop/s total per run and the median over rounds. Root (namespaces).
#
# Usage: bench/run-npb-multihost.sh
#   CLASS (default W), BENCHMARKS (default "bt cg ft mg"), ROUNDS (default 2),
#   PER_HOST (default 2: 4 tasks; 1: 2 tasks, one per host and CPU, where
#   the peers, which spin while they wait, are not oversubscribed; BT and SP
#   need a square number of tasks),
#   NET_DEVICES (default ofi, and ucx where libtorx has it),
#   PEERS (default "mpich openmpi"; empty: torx alone),
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
per_host=${PER_HOST:-2}
[[ $per_host =~ ^[12]$ ]] || { echo "run-npb-multihost: PER_HOST='$per_host': 1 or 2" >&2; exit 2; }
np=$((2 * per_host))
prefix=$(bench_torx_prefix)
[[ -x $prefix/bin/mpiexec ]] || { echo "run-npb-multihost: no torx MPICH (run scripts/build-mpich.sh)" >&2; exit 2; }
mh_require

peers=${PEERS-mpich openmpi}
built=$(CLASS=$class BENCHMARKS=$benches IMPLS="torx $peers" BUILD_ONLY=1 "$here/run-npb.sh" |
    sed -n 's/^run-npb: built (BUILD_ONLY=1): //p')
declare -A bin # IMPL.BENCH: the binary (run-npb.sh builds in .../IMPL/bin/BENCH.CLASS.x)
for f in $built; do
    b=$(basename "$f")
    bin[$(basename "$(dirname "$(dirname "$f")")").${b%%.*}]=$f
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
declare -A hung # peers whose MPI_Finalize did not return
: >"$work/data" # bench where mops round
# Open MPI: PER_HOST slots on each host (hosts.sh passes every host, one slot each).
ompi_hosts=$(mh_env && echo "$TMH_HOSTS" | sed "s/,/:$per_host,/g; s/\$/:$per_host/")
for ((r = 1; r <= rounds; r++)); do
    for b in $benches; do
        for where in 1host $(printf '2hosts-%s ' $nets) $peers; do
            impl=torx
            [[ $where == mpich || $where == openmpi ]] && impl=$where
            x=${bin[$impl.$b]:-}
            [[ -n $x ]] || { echo "run-npb-multihost: no $impl binary for $b" >&2; exit 2; }
            out=$work/$b-$where-$r.out
            rc=0
            case $where in
            1host)
                timeout -k 5 "$tmo" "$prefix/bin/mpiexec" -n "$np" -genv TORX_DEVICE shm "$x" >"$out" 2>&1 </dev/null || rc=$? ;;
            mpich)
                MPIEXEC=mpiexec.mpich timeout -k 5 "$tmo" "$root/test/multihost/hosts.sh" mpiexec -n "$np" \
                    -ppn "$per_host" -genv UCX_TLS tcp,sm,self -genv UCX_NET_DEVICES eth0 "$x" >"$out" 2>&1 </dev/null || rc=$? ;;
            openmpi)
                timeout -k 5 "$tmo" "$root/test/multihost/hosts.sh" mpirun -n "$np" --host "$ompi_hosts" \
                    "$x" >"$out" 2>&1 </dev/null || rc=$? ;;
            *)
                timeout -k 5 "$tmo" "$root/test/multihost/hosts.sh" mpiexec -n "$np" -ppn "$per_host" \
                    -genv TORX_DEVICE "${where#2hosts-}" "$x" >"$out" 2>&1 </dev/null || rc=$? ;;
            esac
            mops=$(awk '/Mop\/s total/ { print $NF }' "$out")
            verified=0
            grep -Eq '^[[:space:]]*Verification[[:space:]]*=[[:space:]]*SUCCESSFUL' "$out" && verified=1
            if ((verified)) && ((rc == 124)) && [[ $impl != torx ]]; then
                # Debian MPICH (ch4:ucx) between these hosts finishes the
                # benchmark, prints its verified result, then never returns
                # from MPI_Finalize: the figure stands, the hang is reported.
                printf '   round %d  %-3s %-11s verified  %10s Mop/s total (MPI_Finalize did not return in %d s)\n' \
                    "$r" "$b" "$where" "$mops" "$tmo"
                echo "$b $where $mops $r" >>"$work/data"
                hung[$where]=1
            elif ((rc == 0 && verified)); then
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
echo "NPB class $class, $np tasks, torx heater; Mop/s total, median of $rounds rounds"
head="| benchmark | 1 host (shm) |" rule="|---|---|"
for n in $nets; do
    head+=" 2 hosts x $per_host ($( ((per_host > 1)) && echo "shm + " || true)$n) | / 1 host |"
    rule+="---|---|"
done
for p in $peers; do
    head+=" $p, 2 hosts x $per_host |"
    rule+="---|"
done
[[ -n $peers ]] && { head+=" best torx / best peer |"; rule+="---|"; }
echo "$head"
echo "$rule"
for b in $benches; do
    o=$(med "$b" 1host) row="| ${b^^}.$class | $(fmt "$o" 2) |" best_t=NaN best_p=NaN
    for n in $nets; do
        t=$(med "$b" "2hosts-$n")
        row+=" $(fmt "$t" 2) | $(ratio "$t" "$o") |"
        best_t=$(awk -v a="$best_t" -v b="$t" 'BEGIN { print (a == "NaN" || (b != "NaN" && b + 0 > a + 0)) ? b : a }')
    done
    for p in $peers; do
        t=$(med "$b" "$p")
        row+=" $(fmt "$t" 2) |"
        best_p=$(awk -v a="$best_p" -v b="$t" 'BEGIN { print (a == "NaN" || (b != "NaN" && b + 0 > a + 0)) ? b : a }')
    done
    [[ -n $peers ]] && row+=" $(ratio "$best_t" "$best_p") |"
    echo "$row"
done
for p in "${!hung[@]}"; do
    echo "$p: verified, but MPI_Finalize did not return within RUN_TIMEOUT_S ($tmo s) in some runs"
done
exit $failed
