#!/bin/sh
# The generic packet- and message-layer unit tests, rerun on the sim device
# (TORX_DEVICE=sim: each fork job's tasks are actors of the test process,
# on a modelled torus), on both shipped machines: bgl (no DMA engine:
# rendezvous data in packets) and bgp (a DMA engine). Run by `make check`
# in a build with the sim device; skipped (77) without it. The model's own
# properties are test_sim's.
#
# Left out, and why:
#   test_torus, test_fifo, test_bulk, test_stage, test_mstage
#                       the shm device's FIFOs, segment, bulk paths and
#                       staging areas (sim has no staging areas)
#   test_msg            its protocol variants force staging, TORX_RZV_DATA=bulk
#                       or the vn protocol's address passing, which a machine
#                       without them refuses at start-up, and its "idle" case
#                       measures the staging area; its generic cases run
#                       here under test_msg_order
#   test_msg_co, test_msg_defer
#                       do not finish on sim yet (docs/sim.md#limits)
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
unset TORX_CHAOS TORX_FIFO_PACKETS 2>/dev/null || true
fail=0
for machine in bgl bgp; do
    for t in test_msg_order test_cn; do
        echo "sim-variant ($machine): $t"
        TORX_SIM_MACHINE=$machine "$dir/$t" ||
            { fail=$((fail + 1)); echo "sim-variant ($machine): $t FAILED"; }
    done
done
[ "$fail" -eq 0 ] || { echo "sim-variant: $fail test program(s) failed on TORX_DEVICE=sim"; exit 1; }
echo "sim-variant: every test passed on TORX_DEVICE=sim"
