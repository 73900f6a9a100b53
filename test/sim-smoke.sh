#!/bin/sh
# torx-sim end to end, as a user runs it (docs/sim.md): examples/msg_hello
# unchanged in heater, co and vn modes; a program's globals kept per task
# (test/sim/sim_globals); the 512-node (8x8x8) ping-pong of
# Table 1 and Fig 4(a) on bgl, checked against the model's exact per-hop
# term; and the scale program at 512 nodes (barrier, collective-network
# allreduce, neighbour exchange); the links' table (--links) and its
# summary. Skipped (77) in a build without the sim device or in a sanitized
# one.
set -u
if [ ! -x ./torx-sim ]; then
    echo "sim-smoke: no torx-sim in this build; skipped"
    exit 77
fi
test/unit/test_sim --sanitized >/dev/null 2>&1
if [ $? -eq 77 ]; then
    echo "sim-smoke: a sanitized build; skipped"
    exit 77
fi
TORX_SIM_PRELOAD=$(pwd)/.libs/libtorx-simrun.so
# the sim device's module of this build (make check sets it already)
TORX_DEVICE_PATH=${TORX_DEVICE_PATH:-$(pwd)/.libs}
export TORX_SIM_PRELOAD TORX_DEVICE_PATH
fail() {
    echo "sim-smoke: $*" >&2
    exit 1
}
for mode in heater co vn; do
    out=$(./torx-sim --torus 2x1x1 --mode $mode examples/msg_hello 2>&1) ||
        fail "msg_hello ($mode) failed: $out"
    echo "$out" | grep -q "rank 0: reply from rank 1: hello back" || fail "msg_hello ($mode): $out"
done
# each task's globals stay its own, across the wakes that let others run
# (bgp in vn mode: eager, DMA and vn transfers; bgl: the torus within a node)
for run in "bgp 1024" "bgp 16384" "bgl 16384"; do
    set -- $run
    out=$(./torx-sim --machine $1 --torus 2x2x2 --mode vn test/sim/sim_globals $2 2>&1) ||
        fail "sim_globals ($run): $out"
    echo "$out" | grep -q "^sim_globals: ok" || fail "sim_globals ($run): $out"
done
out=$(./torx-sim --torus 8x8x8 --mode co bench/sim/sim_pingpong --protos onepkt,rzv --hops 1,2,12 \
    --iters 5 2>&1) || fail "sim_pingpong failed: $out"
echo "$out"
# 11 hops more: exactly 11 x 90 ns more (bgl's hop_latency)
echo "$out" | awk '$2 == "proto=onepkt" { split($4, h, "="); split($6, t, "="); us[h[2]] = t[2] }
    END { d = (us[12] - us[1]) * 1000; if (d < 989.9 || d > 990.1) { print "sim-smoke: 12 hops took " d " ns more than 1, not 990"; exit 1 } }' ||
    exit 1
out=$(./torx-sim --torus 8x8x8 bench/sim/sim_scale 2>&1) || fail "sim_scale failed: $out"
echo "$out"
echo "$out" | grep -q "^scale tasks=512 " || fail "sim_scale printed no result"
# the links' table of a 4x4x4 mesh alltoall, summed up by bench/sim/link-load.sh: the middle
# x links (position 1) carry more than the outer ones (0 and 2), and a path that cannot be
# written stops the job, naming the variable
links=$(mktemp "${TMPDIR:-/tmp}/torx-sim-links.XXXXXX") || fail "mktemp"
trap 'rm -f "$links"' EXIT
out=$(./torx-sim --mesh 4x4x4 --mode co --links "$links" bench/sim/sim_coll --kind alltoall \
    --sizes 1024 --alg torx --iters 1 --warmup 0 2>&1) || fail "sim_coll --links failed: $out"
load=$("${TORX_SRCDIR:-..}/bench/sim/link-load.sh" "$links") || fail "link-load.sh: $load"
echo "$load" | awk '$1 == "x" && $2 == "+" { p[$3] = $5 }
    END { if (!(p[1] > p[0] && p[1] > p[2])) { print "sim-smoke: x+ packets by position " p[0] " " p[1] " " p[2]; exit 1 } }' ||
    exit 1
./torx-sim --mesh 2x1x1 --links /nonexistent-dir/links.csv examples/msg_hello 2>&1 |
    grep -q "TORX_SIM_LINKS=/nonexistent-dir/links.csv" || fail "an unwritable --links was not refused"
# a bad partition and a bad machine are refused, naming what is wrong
./torx-sim --torus 8x8 examples/msg_hello 2>&1 | grep -q "'8x8' is not a partition" ||
    fail "a bad --torus was not refused"
./torx-sim --torus 2x1x1 --machine nosuchmachine examples/msg_hello 2>&1 | grep -q nosuchmachine ||
    fail "an unknown --machine was not refused by name"
echo "sim-smoke: ok"
