#!/usr/bin/env bash
# Instructions per one-packet message (send plus receive) in the torx
# message layer, counted by callgrind, which gives the same count on every
# run: a figure that the noise of these VMs cannot move.
#
# bench/msg_onepkt_cg is a singleton job (one task, no launcher) that sends
# N 1-byte one-packet messages to itself, each sent (torx_send) and received
# (torx_advance: poll, peek, dispatch, handler, copy out, completion) before
# the next. Two ways to count, both printed:
#   - difference: total instructions of a run with 2N messages minus those
#     of a run with N, divided by N (start-up and finalize cancel out);
#   - toggle: --toggle-collect=onepkt_loop, the instructions inside the
#     message loop only, divided by N (includes the loop's own few).
# The same for the raw packet layer underneath (msg_onepkt_cg ... pkt:
# inject, poll, peek, copy out, consume), the reference that shows what the
# message layer adds.
#
# Usage: bench/callgrind-onepkt.sh
#   TORX_BUILD  build directory (default build/ of the repository)
#   CG_N        messages of the smaller run (default 20000)
#   CG_BYTES    payload bytes (default 1)
#   CG_EAGER_SIZES  eager message sizes for the staging comparison (default
#               "1024 4096"; empty: skip it). Larger sizes mislead: glibc
#               copies them with rep movsb, which callgrind counts once per
#               byte, while the packet path's 240-byte copies are vector
#               loops
# Prints "onepkt instructions/message = X" (the difference method) and
# "raw packet instructions/packet = Y", plus the detail; then, per eager
# size, the instructions per eager message (send and receive) by 240-byte
# packets (TORX_STAGE_MIN=0) and through the staging area (the default):
# "eager B bytes instructions/message: packets = P, staged = S".
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=${TORX_BUILD:-$root/build}
case $build in /*) ;; *) build=$root/$build ;; esac
n=${CG_N:-20000}
bytes=${CG_BYTES:-1}
prog=
for cand in "$build/bench/msg_onepkt_cg" "$build/msg_onepkt_cg"; do
    if [[ -x $cand && -f $cand ]]; then prog=$cand; break; fi
done
if [[ -z $prog ]]; then
    echo "callgrind-onepkt: no msg_onepkt_cg in $build/bench; build first (scripts/build.sh)" >&2
    exit 2
fi
if ! command -v valgrind >/dev/null 2>&1; then
    echo "callgrind-onepkt: valgrind not found (apt-get install valgrind)" >&2
    exit 2
fi
if ! [[ $n =~ ^[0-9]+$ && $n -gt 0 && $bytes =~ ^[0-9]+$ && $bytes -le 240 ]]; then
    echo "callgrind-onepkt: CG_N='$n' or CG_BYTES='$bytes' is not valid (N > 0, bytes 0..240)" >&2
    exit 2
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/torx-cg.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT

# count LAYER MESSAGES [TOGGLE]: total instructions of one run (the
# "Collected" line of callgrind; with TOGGLE, only inside that function).
count() {
    local layer=$1 msgs=$2 toggle=${3:-} out size=${CG_SIZE:-$bytes}
    local args=(--tool=callgrind --callgrind-out-file="$work/cg.out")
    [[ -n $toggle ]] && args+=(--toggle-collect="$toggle")
    # TORX_* from the caller's environment could change the path measured.
    if ! out=$(env -u TORX_CHAOS -u TORX_MODE -u TORX_STATS -u TORX_VERBOSE -u TORX_BULK \
        valgrind "${args[@]}" "$prog" "$msgs" "$size" "$layer" 2>&1); then
        echo "callgrind-onepkt: valgrind $prog $msgs $size $layer failed:" >&2
        echo "$out" >&2
        exit 1
    fi
    grep -q "received=$msgs" <<<"$out" || { echo "callgrind-onepkt: run incomplete:" >&2; echo "$out" >&2; exit 1; }
    awk '/Collected :/ { print $NF; found = 1 } END { if (!found) exit 1 }' <<<"$out" || {
        echo "callgrind-onepkt: no 'Collected' line from valgrind:" >&2; echo "$out" >&2; exit 1; }
}

per() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { printf "%.1f\n", (b - a) / n }'; }

msg1=$(count msg "$n") || exit 1
msg2=$(count msg $((2 * n))) || exit 1
msgt=$(count msg "$n" onepkt_loop) || exit 1
pkt1=$(count pkt "$n") || exit 1
pkt2=$(count pkt $((2 * n))) || exit 1
pktt=$(count pkt "$n" pkt_loop) || exit 1

msg_per=$(per "$msg1" "$msg2" "$n")
pkt_per=$(per "$pkt1" "$pkt2" "$n")
msg_tog=$(awk -v t="$msgt" -v n="$n" 'BEGIN { printf "%.1f\n", t / n }')
pkt_tog=$(awk -v t="$pktt" -v n="$n" 'BEGIN { printf "%.1f\n", t / n }')

echo "# valgrind $(valgrind --version 2>/dev/null); $prog, $bytes-byte payload, N = $n"
echo "# message layer: $msg1 instructions with N messages, $msg2 with 2N;" \
     "inside onepkt_loop with N: $msgt"
echo "# packet layer:  $pkt1 instructions with N packets, $pkt2 with 2N;" \
     "inside pkt_loop with N: $pktt"
echo "onepkt instructions/message = $msg_per"
echo "onepkt instructions/message (toggle-collect onepkt_loop) = $msg_tog"
echo "raw packet instructions/packet = $pkt_per"
echo "raw packet instructions/packet (toggle-collect pkt_loop) = $pkt_tog"
echo "message layer over the packet layer = $(awk -v a="$msg_per" -v b="$pkt_per" 'BEGIN { printf "%.1f instructions/message (%.2fx)\n", a - b, a / b }')"

for size in ${CG_EAGER_SIZES-1024 4096}; do
    ne=$((n / 10 > 0 ? n / 10 : 1))
    p1=$(TORX_STAGE_MIN=0 CG_SIZE=$size count eager "$ne") || exit 1
    p2=$(TORX_STAGE_MIN=0 CG_SIZE=$size count eager $((2 * ne))) || exit 1
    s1=$(TORX_STAGE_MIN=1 CG_SIZE=$size count eager "$ne") || exit 1
    s2=$(TORX_STAGE_MIN=1 CG_SIZE=$size count eager $((2 * ne))) || exit 1
    pp=$(per "$p1" "$p2" "$ne"); sp=$(per "$s1" "$s2" "$ne")
    echo "eager $size bytes instructions/message: packets = $pp, staged = $sp ($(awk -v a="$pp" -v b="$sp" 'BEGIN { printf "%.2fx fewer", a / b }'))"
done
