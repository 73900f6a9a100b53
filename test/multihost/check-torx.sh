#!/usr/bin/env bash
# test/multihost/check-torx.sh: torx jobs across emulated hosts
# (test/multihost/hosts.sh: own network, UTS, mount, IPC and PID namespaces
# each, joined by veths), launched by torx's hydra (`mpiexec -hosts ...`,
# ns-ssh as its ssh), TORX_DEVICE=ofi:
#
#   2 hosts x 1 task   torx's MPI tests (test/mpi: hello, ring,
#                      p2p_semantics, probe_unexp, rma_coll, coll; and
#                      p2p_semantics with TORX_OFI_BULK=msg), the message
#                      layer's protocol tests (msg_variants.c, chaos), then
#                      bench/mpi_latency and mpi_bw with every row verified
#                      and the veth counters showing the bytes crossed
#   2 hosts x 2 tasks  hybrid jobs: each host's two tasks reach each other
#                      through its shm device (TORX_VERBOSE=1 must say so),
#                      the others through ofi; the same with no TORX_DEVICE
#                      at all (auto must find the two hosts); heater, and vn mode with
#                      TXYZ (node-mates on one host) and chaos; the
#                      message layer's tests, heater with chaos and vn
#   slow link          tbf at 200 Mbit/s on every host: p2p_semantics (all
#                      protocols, chaos) and rma_coll; then the same on a
#                      lossy link (netem, or an nftables rule without it)
#   3 hosts x 1 and x 2  the same tests with chaos, the collectives, and
#                      the message layer's tests (3 x 1)
#   vanished host      test/multihost/vanished-host.sh MH_IMPL=torx
#                      MH_EXPECT=pass, both kill modes: the job ends within
#                      30 s naming the lost rank or host, nothing left behind
#   ucx                where libtorx has the ucx device, in each section
#                      above: TORX_DEVICE=ucx jobs (2x1 and 2x2 with chaos,
#                      vn, the collectives, TORX_VERBOSE naming UCX's tcp;
#                      the lossy link; 3x1 and 3x2; a vanished host);
#                      without it, a line saying they were skipped
#   teardown           no namespace, process, cgroup or state left
#
# Prints "skipped: ..." and exits 77 when namespaces cannot be made (not
# root); a torx MPICH that is missing is a failure (exit 2), not a skip.
#
# Environment:
#   TORX_PREFIX  torx MPICH (default: ~/.cache/torx/current-prefix)
#   MH_BUILD     where the programs are built (default build/multihost)
#   MH_TIMEOUT   seconds per MPI run (default 180)
#   MH_VANISH    0 to leave out the vanished-host runs (default 1)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source-path=SCRIPTDIR source=hosts.sh
. "$here/hosts.sh"
# shellcheck source-path=SCRIPTDIR source=check-lib.sh
. "$here/check-lib.sh"

build=${MH_BUILD:-$root/build/multihost}/torx-tests
tmo=${MH_TIMEOUT:-180}
prefix=${TORX_PREFIX:-$(cat "$HOME/.cache/torx/current-prefix" 2>/dev/null || true)}

mh_require
if [[ -z $prefix || ! -x $prefix/bin/mpicc || ! -x $prefix/bin/mpiexec ]]; then
    echo "check-torx: no torx MPICH (TORX_PREFIX or ~/.cache/torx/current-prefix; run scripts/build-mpich.sh)" >&2
    exit 2
fi
export MPIEXEC=$prefix/bin/mpiexec
# The ucx device's runs, where this libtorx has it.
ucx=0
if [ -f "$prefix/lib/torx/torx-dev-ucx.so" ]; then
    ucx=1
else
    echo "check-torx: the ucx runs skipped: this libtorx has no ucx device (configure found no UCX)"
fi

mkdir -p "$build"
for t in hello ring p2p_semantics probe_unexp rma_coll coll; do
    "$prefix/bin/mpicc" -O2 -Wall -o "$build/$t" "$root/test/mpi/$t.c"
done
for t in mpi_latency mpi_bw; do
    "$prefix/bin/mpicc" -O2 -std=c11 -Wall -Wextra -o "$build/$t" "$root/bench/$t.c"
done
# The message layer's own protocol tests (test/unit/msg_test.h), launched by
# hydra, against the libtorx of that MPICH (built from this tree).
# shellcheck disable=SC2046
cc -O2 -std=c11 -Wall -Wextra -I"$root/include" -I"$root/src" -I"$root/test/unit" \
    -o "$build/msg_variants" "$root/test/multihost/msg_variants.c" -L"$prefix/lib" \
    -Wl,-rpath,"$prefix/lib" -ltorx $(pkg-config --libs check 2>/dev/null || echo -lcheck)

out=$(mktemp "${TMPDIR:-/tmp}/torx-mh-torx.XXXXXX")
trap 'rm -f "$out"' EXIT

# job NP PPN PROG [NAME=VALUE...] -- ARGS: PROG on the set's hosts, PPN tasks
# each, TORX_DEVICE=$device (default ofi; empty: not set) and each
# NAME=VALUE by -genv; output in $out.
job() {
    local np=$1 ppn=$2 prog=$3 genv=() kv
    shift 3
    while (($#)) && [[ $1 != -- ]]; do
        kv=$1
        genv+=(-genv "${kv%%=*}" "${kv#*=}")
        shift
    done
    (($#)) && shift
    local dev=${device-ofi}
    [[ -z $dev ]] || genv+=(-genv TORX_DEVICE "$dev")
    timeout -k 5 "$tmo" "$here/hosts.sh" mpiexec -n "$np" -ppn "$ppn" \
        -genv P2PS_TIMEOUT $((tmo - 10)) "${genv[@]}" "$build/$prog" "$@" >"$out" 2>&1 </dev/null
}

# test LABEL NP PPN PROG [NAME=VALUE...]: passes when PROG exits 0 and
# prints " No Errors".
test_run() {
    local label=$1 np=$2 ppn=$3 prog=$4 start=$SECONDS rc=0
    shift 4
    job "$np" "$ppn" "$prog" "$@" || rc=$?
    if ((rc == 0)) && grep -q '^ No Errors' "$out"; then
        ok "$label: $prog, $np tasks, $ppn per host${*:+ ($*)} ($((SECONDS - start)) s)"
    else
        fail "$label: $prog, $np tasks, $ppn per host${*:+ ($*)}: exit $rc$( ((rc == 124)) && echo ' (timeout)'), output:"
        tail -n 25 "$out" | sed 's/^/    /'
    fi
}

# ---- 2 hosts -------------------------------------------------------------------------
export TMH_NAME=tmhct$$
mh_init_vars
trap 'mh_down; rm -f "$out"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mh_up 2
h1=$mh_net.1 h2=$mh_net.2

if job 2 1 hello && grep -q 'No Errors' "$out"; then ok "hello: 2 tasks, 1 per host"; else
    fail "hello: $(tail -n 5 "$out" | tr '\n' ' ')"
fi
for prog in ring p2p_semantics probe_unexp rma_coll coll; do
    test_run 2x1 2 1 "$prog"
done
# bulk data as messages between hosts, as over a provider without RMA
test_run 2x1-bulk-msg 2 1 p2p_semantics TORX_OFI_BULK=msg
# the message layer's tests: every protocol forced and automatic, with
# truncation and 64 MiB, then mixed protocols in order under chaos
test_run 2x1-msg 2 1 msg_variants -- eager adaptive rzv rzv-packets auto big
test_run 2x1-msg-mix 2 1 msg_variants TORX_CHAOS=11 -- mix

# The bytes crossed the veths: at least what each rank sent, each way.
for run in "mpi_latency -s 8,1K,64K -n 1000" "mpi_bw -s 64K,1M -n 20"; do
    read -r prog args <<<"$run"
    veths_before
    rc=0
    # shellcheck disable=SC2086 # args: a word list
    job 2 1 "$prog" -- $args || rc=$?
    veths_after
    if ((rc != 0)) || ! rows_ok "$out"; then
        fail "2x1 $prog: exit $rc or rows not verified:"
        tail -n 20 "$out" | sed 's/^/    /'
        continue
    fi
    if crossed "$out"; then
        ok "2x1 $prog: every row verified, the bytes crossed the veths ($msg)"
    else
        fail "2x1 $prog: the veth counters moved less than the bytes sent ($msg)"
    fi
    grep -E '^(lat|bw) ' "$out" | sed 's/^/    /'
done

# Hybrid: two tasks per host, shm between them.
if job 4 2 hello TORX_VERBOSE=1 && [[ $(grep -c "2 of the job's 4 tasks on this host (node[12]) reach each other through shm" "$out") == 4 ]]; then
    ok "2x2: every task reaches its node-mate through shm, the others through ofi"
else
    fail "2x2: TORX_VERBOSE=1 does not show the hosts' shm devices:"
    grep 'torx\[' "$out" | head -n 10 | sed 's/^/    /'
fi
test_run 2x2 4 2 p2p_semantics
# No device variable, as a new user runs it: TORX_DEVICE=auto finds the hosts.
if device="" job 4 2 p2p_semantics TORX_VERBOSE=1 && grep -q '^ No Errors' "$out" &&
    grep -q "TORX_DEVICE=auto: the job's 4 tasks are on 2 hosts: ofi between hosts" "$out"; then
    ok "2x2-auto: no TORX_DEVICE: ofi between the 2 hosts, shm within each, p2p_semantics passed"
else
    fail "2x2-auto: without TORX_DEVICE the job did not run over ofi between hosts:"
    grep -E 'torx\[|Errors|rror' "$out" | head -n 10 | sed 's/^/    /'
fi
test_run 2x2 4 2 rma_coll
test_run 2x2 4 2 coll
test_run 2x2-vn 4 2 p2p_semantics TORX_MODE=vn TORX_MAPPING=TXYZ TORX_CHAOS=7 TORX_ADAPTIVE_LIMIT=65536
test_run 2x2-vn 4 2 coll TORX_MODE=vn TORX_MAPPING=TXYZ
test_run 2x2-msg 4 2 msg_variants TORX_CHAOS=13 -- eager rzv auto mix
test_run 2x2-vn-msg 4 2 msg_variants TORX_MODE=vn TORX_MAPPING=TXYZ -- vn
if ((ucx)); then
    if device=ucx job 2 1 hello TORX_VERBOSE=1 TORX_UCX_TLS=tcp &&
        [[ $(grep -c 'UCX chose tcp/eth0' "$out") == 2 ]]; then
        ok "2x1-ucx: TORX_UCX_TLS=tcp: both tasks say UCX chose tcp over the hosts' link"
    else
        fail "2x1-ucx: TORX_VERBOSE=1 does not show UCX's tcp between the hosts:"
        grep -E 'torx\[|rror' "$out" | head -n 10 | sed 's/^/    /'
    fi
    device=ucx test_run 2x1-ucx 2 1 p2p_semantics TORX_CHAOS=11 TORX_ADAPTIVE_LIMIT=65536
    device=ucx test_run 2x1-ucx-msg 2 1 msg_variants -- eager adaptive rzv rzv-packets auto big
    device=ucx test_run 2x2-ucx 4 2 coll
    device=ucx test_run 2x2-ucx-vn 4 2 p2p_semantics TORX_MODE=vn TORX_MAPPING=TXYZ TORX_CHAOS=7
fi

# Stress on a slowed link (tbf: 200 Mbit/s, a 32 KiB bucket), then a lossy
# one (netem where the kernel has it, else an nftables rule dropping 20 of
# every 1000 packets that arrive): every protocol, mixed, in order, nothing
# lost (p2p_semantics checks each message's data, order and status).
mh_netem all "tbf rate 200mbit burst 32kb latency 50ms"
test_run 2x2-tbf 4 2 p2p_semantics TORX_CHAOS=9 TORX_ADAPTIVE_LIMIT=65536
test_run 2x1-tbf 2 1 rma_coll
mh_netem all off
if (mh_netem all "netem delay 100us loss 0.5%") 2>/dev/null; then
    test_run 2x2-lossy 4 2 p2p_semantics TORX_CHAOS=9
    ((ucx)) && device=ucx test_run 2x2-ucx-lossy 4 2 p2p_semantics TORX_CHAOS=9
    mh_netem all off
elif (mh_loss all 20) 2>/dev/null; then
    test_run 2x2-lossy-nft 4 2 p2p_semantics TORX_CHAOS=9
    test_run 2x1-lossy-nft 2 1 rma_coll
    ((ucx)) && device=ucx test_run 2x2-ucx-lossy-nft 4 2 p2p_semantics TORX_CHAOS=9
    dropped=$(mh_loss_dropped)
    if ((dropped > 0)); then
        ok "lossy link: $dropped packets dropped on arrival, and every message came whole"
    else
        fail "lossy link: the loss rules dropped nothing, so the lossy runs tested no loss"
    fi
    mh_loss all off
else
    echo "note: no lossy-link run: this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM) and nft cannot drop packets here"
fi
mh_down

# ---- 3 hosts -------------------------------------------------------------------------
# 3 hosts share this machine's 2 CPUs, which no host can see (each has one
# in its cpuset): TORX_PROGRESS_YIELD=1 makes waiting ranks yield as on an
# oversubscribed host (without it MPICH's test pt2pt/sendflood takes minutes
# instead of 3 s).
mh_up 3
test_run 3x1 3 1 p2p_semantics TORX_CHAOS=3 TORX_ADAPTIVE_LIMIT=65536 TORX_PROGRESS_YIELD=1
test_run 3x1 3 1 coll TORX_PROGRESS_YIELD=1
test_run 3x1-msg 3 1 msg_variants TORX_CHAOS=3 TORX_PROGRESS_YIELD=1 -- eager rzv auto mix
test_run 3x2 6 2 ring TORX_PROGRESS_YIELD=1
test_run 3x2 6 2 p2p_semantics TORX_CHAOS=5 TORX_PROGRESS_YIELD=1
test_run 3x2 6 2 coll TORX_PROGRESS_YIELD=1
if ((ucx)); then
    device=ucx test_run 3x1-ucx 3 1 coll TORX_PROGRESS_YIELD=1
    device=ucx test_run 3x2-ucx 6 2 p2p_semantics TORX_CHAOS=5 TORX_PROGRESS_YIELD=1
fi
mh_down
trap 'rm -f "$out"' EXIT

# ---- a host vanishes -----------------------------------------------------------------
if [[ ${MH_VANISH:-1} != 0 ]]; then
    runs="ofi:vanish ofi:procs"
    ((ucx)) && runs+=" ucx:vanish"
    for run in $runs; do
        dev=${run%%:*} kill=${run#*:} rc=0
        MH_IMPL=torx MH_TORX_DEVICE=$dev MH_KILL=$kill MH_EXPECT=pass \
            MH_BUILD=${MH_BUILD:-$root/build/multihost} TORX_PREFIX=$prefix \
            "$here/vanished-host.sh" >"$out" 2>&1 || rc=$?
        if ((rc == 0)); then
            ok "vanished host ($dev, $kill): $(grep '^== torx' "$out" | tail -n 1 | sed 's/^== //')"
        else
            fail "vanished host ($dev, $kill): exit $rc:"
            tail -n 25 "$out" | sed 's/^/    /'
        fi
    done
fi

if mh_check_clean; then ok "teardown: no namespace, process, cgroup or state left"; else fail "teardown left something"; fi
if ((fails)); then
    echo "check-torx: $fails failure(s)"
    exit 1
fi
echo "check-torx: all passed"
