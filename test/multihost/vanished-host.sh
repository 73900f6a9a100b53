#!/usr/bin/env bash
# test/multihost/vanished-host.sh: what an MPI job does when one of its
# hosts vanishes. On 2 emulated hosts (hosts.sh), 1 rank each, a long
# bench/mpi_latency ping-pong runs; after a few seconds node2 is made to
# vanish (`hosts.sh kill 2`: its link cut first, so it sends nothing more,
# then every process killed and its namespace deleted; MH_KILL=procs: only
# its processes killed, so their kernel closes their sockets). Then:
#
#   ended      the job (mpiexec / mpirun) ended within MH_LIMIT_S (30) s of
#              the kill, with a non-zero status
#   names      its output names the lost rank (1) or host (node2 / address)
#   shm        the survivor (node1) has no /dev/shm entries left
#   procs      the survivor has no processes left but its init
#
# Each is printed with what was seen (exit status, time, the output's
# error lines, node1's processes and /dev/shm). A job still running
# MH_LIMIT_S + MH_GRACE_S (30) s after the kill is sent SIGTERM (as a user's
# Ctrl-C would be), and what that leaves is printed too.
#
# MH_IMPL     mpich (default; Debian MPICH, UCX_TLS=tcp), openmpi, or torx
#             (torx MPICH with TORX_DEVICE=$MH_TORX_DEVICE, default ofi,
#             $TORX_PREFIX or ~/.cache/torx/current-prefix)
# MH_KILL     vanish (default) or procs
# MH_EXPECT   observe (default: report, exit 0 whatever happened) or pass
#             (exit 1 unless all four hold: the test torx must pass)
# MH_BUILD    where the benchmark is built (default build/multihost)
# Exit 77 with "skipped: ..." when namespaces cannot be made or the MPI is
# not installed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source-path=SCRIPTDIR source=hosts.sh
. "$here/hosts.sh"

impl=${MH_IMPL:-mpich}
kill_mode=${MH_KILL:-vanish}
expect=${MH_EXPECT:-observe}
limit=${MH_LIMIT_S:-30}
grace=${MH_GRACE_S:-30}
build=${MH_BUILD:-$root/build/multihost}
mh=$here/hosts.sh

mh_require
prefix=${TORX_PREFIX:-$(cat "$HOME/.cache/torx/current-prefix" 2>/dev/null || true)}
case $impl in
mpich) cc=mpicc.mpich run=(env MPIEXEC=mpiexec.mpich "$mh" mpiexec -n 2 -genv UCX_TLS tcp -genv UCX_NET_DEVICES eth0) ;;
openmpi) cc=mpicc.openmpi run=("$mh" mpirun -n 2) ;;
torx) cc=$prefix/bin/mpicc run=(env MPIEXEC="$prefix/bin/mpiexec" "$mh" mpiexec -n 2 -genv TORX_DEVICE "${MH_TORX_DEVICE:-ofi}") ;;
*) echo "vanished-host: MH_IMPL='$impl': mpich, openmpi or torx" >&2; exit 2 ;;
esac
case $kill_mode in vanish) kill_args=() ;; procs) kill_args=(--procs) ;;
*) echo "vanished-host: MH_KILL='$kill_mode': vanish or procs" >&2; exit 2 ;; esac
if ! command -v "$cc" >/dev/null 2>&1; then
    echo "skipped: $impl not installed ($cc)"
    exit 77
fi
mkdir -p "$build/$impl"
"$cc" -O2 -std=c11 -Wall -Wextra -o "$build/$impl/mpi_latency" "$root/bench/mpi_latency.c"

export TMH_NAME=tmhv$$
mh_init_vars
out=$(mktemp "${TMPDIR:-/tmp}/torx-mh-vanish.XXXXXX")
trap 'mh_down; rm -f "$out"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mh_up 2

echo "== $impl: 2 hosts x 1 rank, mpi_latency running; node2 made to vanish ($kill_mode)"
"${run[@]}" "$build/$impl/mpi_latency" -s 8 -n 1000000000 >"$out" 2>&1 &
job=$!
# running on both hosts?
t0=$SECONDS
until [[ $(mh_run 1 pgrep -c mpi_latency || true) -ge 1 && $(mh_run 2 pgrep -c mpi_latency || true) -ge 1 ]]; do
    if ! kill -0 "$job" 2>/dev/null || ((SECONDS - t0 > 30)); then
        echo "vanished-host: the job did not start on both hosts:"
        cat "$out"
        exit 1
    fi
    sleep 0.5
done
sleep 3
echo "-- before the kill: node1 /dev/shm: $(mh_run 1 ls -A /dev/shm | tr '\n' ' ')"
mh_kill 2 "${kill_args[@]}"
tk=$(date +%s.%N)
ended=""
while kill -0 "$job" 2>/dev/null; do
    el=$(awk -v a="$tk" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    if awk -v e="$el" -v l="$((limit + grace))" 'BEGIN { exit !(e >= l) }'; then break; fi
    sleep 0.2
done
el=$(awk -v a="$tk" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
rc=""
if ! kill -0 "$job" 2>/dev/null; then
    ended=$el
    rc=0
    wait "$job" || rc=$?
fi

snapshot() {
    echo "   node1 processes: $(mh_run 1 ps -eo pid=,args= | grep -v -e 'tmh-init' -e 'sleep 3600' -e ' ps -eo' \
        | sed 's/^ *//' | cut -c1-100 | tr '\n' ';' | sed 's/;$//')"
    echo "   node1 /dev/shm: $(mh_run 1 ls -A /dev/shm | tr '\n' ' ')"
}
verdicts=()
if [[ -n $ended ]]; then
    echo "-- the job ended ${ended} s after the kill, exit status $rc"
    if awk -v e="$ended" -v l="$limit" 'BEGIN { exit !(e <= l) }' && ((rc != 0)); then
        verdicts+=("ended: yes (${ended} s, exit $rc)")
    else
        verdicts+=("ended: NO (${ended} s, exit $rc)")
    fi
else
    echo "-- the job is still running ${el} s after the kill"
    verdicts+=("ended: NO (still running after ${el} s)")
fi
echo "-- the job's output (the last lines but the header):"
{ grep -v '^#' "$out" || true; } | tail -15 | sed 's/^/   | /'
pat="rank[ :=]*1\\b|node2|${mh_net//./\\.}\\.2\\b"
if grep -v '^#' "$out" | grep -Eiq "$pat"; then
    verdicts+=("names: yes ($(grep -v '^#' "$out" | grep -Eio "$pat" | sort -u | tr '\n' ' ' | sed 's/ $//'))")
else
    verdicts+=("names: NO (neither rank 1 nor node2 / $mh_net.2 in the output)")
fi
echo "-- node1, the survivor, now:"
snapshot
left_procs=$(mh_run 1 ps -eo args= | grep -vc -e 'tmh-init' -e '^sleep 3600' -e '^ps -eo' || true)
left_shm=$(mh_run 1 ls -A /dev/shm | wc -l)
if [[ -z $ended ]]; then
    echo "-- SIGTERM to the job (as Ctrl-C); 5 s later:"
    kill -TERM "$job" 2>/dev/null || true
    sleep 5
    if kill -0 "$job" 2>/dev/null; then echo "   the job is still running"; else
        rc=0
        wait "$job" || rc=$?
        echo "   the job ended, exit status $rc"
    fi
    snapshot
    { grep -v '^#' "$out" || true; } | tail -5 | sed 's/^/   | /'
fi
if ((left_shm == 0)); then verdicts+=("shm: yes (none left)"); else verdicts+=("shm: NO ($left_shm entries)"); fi
if ((left_procs == 0)); then verdicts+=("procs: yes (none left)"); else verdicts+=("procs: NO ($left_procs left)"); fi

summary=$(IFS=";"; echo "${verdicts[*]}")
echo "== $impl, $kill_mode: ${summary//;/; }"
disown "$job" 2>/dev/null || true # no "Killed" notice when mh_down kills it
mh_down
trap - EXIT
rm -f "$out"
mh_check_clean
if [[ $expect == pass ]]; then
    for v in "${verdicts[@]}"; do
        if [[ $v == *": NO"* ]]; then exit 1; fi
    done
fi
exit 0
