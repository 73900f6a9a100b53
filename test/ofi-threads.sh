#!/bin/sh
# The coprocessor-mode tests (test_msg_co: an injecting and a receiving
# thread on one device) on the ofi device, where the two threads share the
# device's lock (TORX_PKT_SHARED_INJECT): every packet through libfabric
# (TORX_OFI_LOCAL=ofi, over lo), and hybrid (TORX_OFI_TASKS_PER_HOST=2:
# each host's shm device and ofi between hosts). In TSAN_TESTS only (make
# check-tsan, scripts/test-all.sh stage tsan): the normal and ASan builds
# run the same test in the hybrid variant of test/ofi-variant.sh. Skipped
# (77) in a build without the ofi device.
set -u
dir=test/unit
if [ ! -x "$dir/test_msg_co" ] || [ ! -x "$dir/test_ofi" ]; then
    echo "ofi-threads: no ofi device in this build; skipped"
    exit 77
fi
TORX_DEVICE=ofi
TORX_OFI_IFACE=lo
export TORX_DEVICE TORX_OFI_IFACE
unset TORX_OFI_PROVIDER TORX_CHAOS TORX_FIFO_PACKETS TORX_OFI_TASKS_PER_HOST 2>/dev/null || true
fail=0
echo "ofi-threads: test_msg_co, every packet through libfabric"
TORX_OFI_LOCAL=ofi "$dir/test_msg_co" || fail=$((fail + 1))
# Only the jobs of three and four tasks: a job of two is one emulated host,
# whose packets all go through its shm device (and the hybrid's wait and
# collective network through ofi are tested under TSan by test_msg_co's
# own runs and by the first run here).
echo "ofi-threads: test_msg_co's multi case, hybrid (2 tasks per emulated host)"
TORX_OFI_TASKS_PER_HOST=2 CK_RUN_CASE=multi "$dir/test_msg_co" || fail=$((fail + 1))
if [ $fail -ne 0 ]; then
    echo "ofi-threads: $fail run(s) failed"
    exit 1
fi
echo "ofi-threads: both runs passed"
