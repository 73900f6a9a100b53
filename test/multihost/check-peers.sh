#!/usr/bin/env bash
# test/multihost/check-peers.sh: the multi-host test bed, proven with the
# peers. On 2 emulated hosts (test/multihost/hosts.sh), 1 task each:
#
#   1. the hosts are hosts: own hostname, PID namespace, /dev/shm (a file
#      made on one is not on the other nor on the machine), SysV IPC, CPUs;
#   2. for Debian's MPICH (ch4:ucx, UCX_TLS=tcp on eth0; with tcp,self it
#      hung in MPI_Finalize in about half the mpi_bw runs: one rank in the
#      PMI barrier, the other spinning in ucp_worker_progress) and Open MPI
#      (btl tcp,self on the set's subnet): `hostname` through the launcher
#      lands one rank per host; then bench/mpi_latency and bench/mpi_bw
#      (small runs), whose every row must be verified ("ok"), and the veths'
#      counters must have moved at least the bytes the benchmark sent each
#      way (rank 0 on node1: node1's tx and node2's rx >= rank 0's bytes;
#      the reverse for rank 1's);
#   3. after teardown nothing is left (namespaces, processes, cgroups, state).
#
# A peer that is not installed is skipped with a message; when neither is,
# or namespaces cannot be made, the test prints "skipped: ..." and exits 77.
#
# Environment:
#   MH_BUILD   where the benchmarks are built, one directory per MPI
#              (default build/multihost in the source tree)
#   MH_PEERS   which peers (default "mpich openmpi")
#   MH_TIMEOUT seconds per MPI run (default 120)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source-path=SCRIPTDIR source=hosts.sh
. "$here/hosts.sh"
# shellcheck source-path=SCRIPTDIR source=check-lib.sh
. "$here/check-lib.sh"

build=${MH_BUILD:-$root/build/multihost}
peers=${MH_PEERS:-mpich openmpi}
tmo=${MH_TIMEOUT:-120}

mh_require

declare -A mpicc=([mpich]=mpicc.mpich [openmpi]=mpicc.openmpi)
declare -A runner=([mpich]=mpiexec.mpich [openmpi]=mpirun.openmpi)
to_run=()
for p in $peers; do
    [[ -n ${mpicc[$p]:-} ]] || { echo "check-peers: unknown peer '$p' (mpich, openmpi)" >&2; exit 2; }
    if ! command -v "${mpicc[$p]}" >/dev/null || ! command -v "${runner[$p]}" >/dev/null; then
        echo "check-peers: $p skipped: ${mpicc[$p]} or ${runner[$p]} not installed"
        continue
    fi
    mkdir -p "$build/$p"
    for prog in mpi_latency mpi_bw; do
        "${mpicc[$p]}" -O2 -std=c11 -Wall -Wextra -o "$build/$p/$prog" "$root/bench/$prog.c"
    done
    to_run+=("$p")
done
if ((${#to_run[@]} == 0)); then
    echo "skipped: no peer MPI installed (Debian mpich, openmpi-bin)"
    exit 77
fi

export TMH_NAME=tmhcp$$
mh_init_vars
trap 'mh_down' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mh_up 2
h1=$mh_net.1 h2=$mh_net.2

# ---- 1. the hosts are hosts ------------------------------------------------------
if [[ $(mh_run 1 hostname) == node1 && $(mh_run 2 hostname) == node2 ]]; then
    ok "hostnames node1, node2"
else
    fail "hostnames: $(mh_run 1 hostname), $(mh_run 2 hostname)"
fi
np=$(mh_run 1 ps -e --no-headers | wc -l)
if ((np <= 5)); then ok "node1's PID namespace: $np processes"; else fail "node1 sees $np processes"; fi
mark=torx-mh-check-$$
mh_run 1 touch "/dev/shm/$mark"
if mh_run 1 test -e "/dev/shm/$mark" && ! mh_run 2 test -e "/dev/shm/$mark" && [[ ! -e /dev/shm/$mark ]]; then
    ok "/dev/shm: private per host"
else
    fail "/dev/shm shared between hosts or with the machine"
fi
mh_run 1 rm -f "/dev/shm/$mark"
if command -v ipcmk >/dev/null; then
    q=$(mh_run 1 ipcmk -Q | awk '{ print $NF }')
    if mh_run 1 ipcs -q | grep -qw "$q" && ! mh_run 2 ipcs -q | grep -qw "0x[0-9a-f]* *$q"; then
        ok "SysV IPC: private per host"
    else
        fail "SysV IPC queue $q of node1 visible on node2"
    fi
    mh_run 1 ipcrm -q "$q"
fi
c1=$(mh_run 1 nproc) c2=$(mh_run 2 nproc)
ok "CPUs: node1 $(mh_run 1 sh -c 'taskset -pc $$ | sed "s/.*: //"') ($c1), node2 $(mh_run 2 sh -c 'taskset -pc $$ | sed "s/.*: //"') ($c2)"

# ---- 2. the peers --------------------------------------------------------------------

# run_peer PEER ARGS...: the peer's mpiexec / mpirun on the 2 hosts, 2 ranks;
# output (stdout and stderr) in the file $out
run_peer() {
    local p=$1
    shift
    out=$(mktemp "${TMPDIR:-/tmp}/torx-mh-out.XXXXXX")
    case $p in
    mpich)
        MPIEXEC=mpiexec.mpich timeout -k 5 "$tmo" "$here/hosts.sh" mpiexec \
            -n 2 -genv UCX_TLS tcp -genv UCX_NET_DEVICES eth0 "$@" >"$out" 2>&1 ;;
    openmpi)
        timeout -k 5 "$tmo" "$here/hosts.sh" mpirun -n 2 "$@" >"$out" 2>&1 ;;
    esac
}

for p in "${to_run[@]}"; do
    echo "== $p"
    if run_peer "$p" hostname && [[ $(sort "$out" | tr '\n' ' ') == "node1 node2 " ]]; then
        ok "$p: one rank on node1, one on node2"
    else
        fail "$p: hostname through the launcher: $(tr '\n' ' ' <"$out")"
    fi
    rm -f "$out"
    for run in "mpi_latency -s 8,1K,64K -n 1000" "mpi_bw -s 64K,1M -n 20"; do
        read -r prog args <<<"$run"
        veths_before
        # shellcheck disable=SC2086 # args: a word list
        if ! run_peer "$p" "$build/$p/$prog" $args; then
            fail "$p $prog failed:"
            sed 's/^/    /' "$out" | tail -20
            rm -f "$out"
            continue
        fi
        veths_after
        if rows_ok "$out"; then ok "$p $prog: every row verified"; else
            fail "$p $prog: rows not verified:"
            sed 's/^/    /' "$out" | tail -20
        fi
        if crossed "$out"; then
            ok "$p $prog: the bytes crossed the veths ($msg)"
        else
            fail "$p $prog: the veth counters moved less than the bytes sent ($msg)"
        fi
        grep -E '^(lat|bw) ' "$out" | sed "s/^/    $p: /"
        rm -f "$out"
    done
done

# ---- 3. nothing left ----------------------------------------------------------------
mh_down
trap - EXIT
if mh_check_clean; then ok "teardown: no namespace, process, cgroup or state left"; else fail "teardown left something"; fi

if ((fails)); then
    echo "check-peers: $fails failure(s)"
    exit 1
fi
echo "check-peers: all passed (${to_run[*]})"
