#!/bin/sh
# The generic packet- and message-layer unit tests, rerun on the sim device
# (TORX_DEVICE=sim: each fork job's tasks are actors of the test process,
# on a modelled torus): on bgl (no DMA engine: rendezvous data in packets)
# the list test/ofi-variant.sh runs on ofi, and on bgp (a DMA engine) the
# tests whose rendezvous data can move by bulk transfer. Run by `make check`
# in a build with the sim device; skipped (77) without it. The model's own
# properties are test_sim's. test_coll's nonblocking case ("nb") runs on
# bgl too: the modelled collective network and global interrupt channels.
#
# Left out, and why:
#   test_torus case "shm", test_fifo, test_bulk, test_stage, test_mstage
#                       the shm device's segment, FIFOs, bulk paths and
#                       staging areas (sim has no staging areas)
#   test_msg, all but case "api"
#                       its protocol variants force staging, TORX_RZV_DATA=bulk
#                       or the vn protocol's address passing, which a machine
#                       without them refuses at start-up, and its "idle" case
#                       measures the staging area; its generic cases run
#                       here under test_msg_order
#   test_msg_defer case "inject"
#                       fills the receiver's FIFO while it reads nothing;
#                       sim's reception FIFOs never fill
#                       (docs/sim.md#the-network-model)
#   test_msg_defer on bgl
#                       its vn variant's rendezvous between a node's two
#                       tasks is a bulk get, which bgl has none of
#                       (docs/sim.md#limits)
# Inside the tests run here, on sim only: test_torus's backpressure and
# batch cases (reception FIFOs again) and its chaos floor (sim reorders by
# its routing, not TORX_CHAOS); test_msg_co's overlap without bulk (bgl)
# and its host CPU binding; test_doorbell's and test_msg_co's host CPU use.
set -u
dir=test/unit
if [ ! -x "$dir/test_sim" ]; then
    echo "sim-variant: no sim device in this build; skipped"
    exit 77
fi
"$dir/test_sim" --sanitized >/dev/null 2>&1
if [ $? -eq 77 ]; then
    echo "sim-variant: a sanitized build (SimGrid's actors switch stacks unseen); skipped"
    exit 77
fi
TORX_DEVICE=sim
export TORX_DEVICE
# the sim device's module of this build (make check sets it already)
TORX_DEVICE_PATH=${TORX_DEVICE_PATH:-$(pwd)/.libs}
export TORX_DEVICE_PATH
unset TORX_CHAOS TORX_FIFO_PACKETS 2>/dev/null || true
fail=0
run() { # machine test [check case]
    m=$1
    t=$2
    if [ $# -gt 2 ]; then
        echo "sim-variant ($m): $t (case $3)"
        TORX_SIM_MACHINE=$m CK_RUN_CASE=$3 "$dir/$t" ||
            { fail=$((fail + 1)); echo "sim-variant ($m): $t (case $3) FAILED"; }
    else
        echo "sim-variant ($m): $t"
        TORX_SIM_MACHINE=$m "$dir/$t" || { fail=$((fail + 1)); echo "sim-variant ($m): $t FAILED"; }
    fi
}

run bgl test_torus torus
run bgl test_cn
run bgl test_doorbell
run bgl test_msg api
run bgl test_msg_order
run bgl test_msg_map
run bgl test_msg_co
run bgl test_coll nb

run bgp test_cn
run bgp test_msg_order
run bgp test_msg_defer defer
run bgp test_msg_defer onepkt_limit
run bgp test_msg_co

[ "$fail" -eq 0 ] || { echo "sim-variant: $fail test program(s) failed on TORX_DEVICE=sim"; exit 1; }
echo "sim-variant: every test passed on TORX_DEVICE=sim"
