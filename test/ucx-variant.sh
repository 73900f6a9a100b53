#!/bin/sh
# The generic packet- and message-layer unit tests, rerun on the ucx device
# (TORX_DEVICE=ucx), chaos cases included, in four variants. Run by
# `make check` in a build with the ucx device; skipped (77) without it.
#
#   ucx      TORX_UCX_LOCAL=ucx: every packet crosses UCX, even between
#            tasks of one host (UCX picks tcp over lo here: its shared-
#            memory transports cannot wake a sleeping task, which the
#            device asks for)
#   hybrid   TORX_UCX_TASKS_PER_HOST=2: every two consecutive ranks are a
#            "host" of their own; tasks of one host reach each other through
#            its shm device, the others and the collective network through
#            ucx (src/packet/net/net_hybrid.c): the message layer's protocol
#            variants (staging and rendezvous across hosts) and coprocessor
#            mode; the hybrid's own routing runs in test/ofi-variant.sh,
#            whose net/ code is the same
#   tcp      TORX_UCX_TLS=tcp, the transport between hosts here, named as a
#            user would, on the packet tests
#   small    TORX_FIFO_PACKETS=16 (a credit message every 8 packets; replies
#            carry credits before that) on the ordering tests
#
# Left out, and why: as test/ofi-variant.sh (test_torus case "shm",
# test_bulk, test_stage: the shm device's own; test_coll: minutes over a
# network device on 2 cores).
set -u
dir=test/unit
if ! grep -q '^#define TORX_HAVE_UCX 1' config.h 2>/dev/null; then
    echo "ucx-variant: no ucx device in this build; skipped"
    exit 77
fi
TORX_DEVICE=ucx
export TORX_DEVICE
unset TORX_UCX_TLS TORX_CHAOS TORX_FIFO_PACKETS TORX_UCX_LOCAL TORX_UCX_TASKS_PER_HOST \
    2>/dev/null || true

fail=0
variant=""
run() { # test [check case]
    t=$1
    if [ $# -gt 1 ]; then
        echo "ucx-variant ($variant): $t (case $2)"
        CK_RUN_CASE=$2 "$dir/$t" || { fail=$((fail + 1)); echo "ucx-variant ($variant): $t FAILED"; }
    else
        echo "ucx-variant ($variant): $t"
        "$dir/$t" || { fail=$((fail + 1)); echo "ucx-variant ($variant): $t FAILED"; }
    fi
}

variant=ucx
TORX_UCX_LOCAL=ucx
export TORX_UCX_LOCAL
run test_torus torus
run test_cn
run test_doorbell
run test_msg api # the protocols' variants run in the hybrid variant
run test_msg_order
run test_msg_defer
run test_msg_map
unset TORX_UCX_LOCAL

variant=hybrid
TORX_UCX_TASKS_PER_HOST=2
export TORX_UCX_TASKS_PER_HOST
run test_msg
run test_msg_co
unset TORX_UCX_TASKS_PER_HOST

variant=tcp
TORX_UCX_TLS=tcp
TORX_UCX_LOCAL=ucx
export TORX_UCX_TLS TORX_UCX_LOCAL
run test_torus torus

variant=small
TORX_FIFO_PACKETS=16
export TORX_FIFO_PACKETS
run test_msg_order
unset TORX_UCX_TLS TORX_UCX_LOCAL TORX_FIFO_PACKETS

if [ $fail -ne 0 ]; then
    echo "ucx-variant: $fail test program(s) failed on TORX_DEVICE=ucx"
    exit 1
fi
echo "ucx-variant: every test passed on TORX_DEVICE=ucx, in all four variants"
