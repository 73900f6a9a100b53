# test/multihost/check-lib.sh: what check-peers.sh and check-torx.sh share,
# sourced by both after hosts.sh: the pass and failure lines (ok, fail,
# fails), the checks of bench/mpi_latency's and mpi_bw's rows (rows_ok,
# sent_bytes) and of the veths' counters around a run (veths_before,
# veths_after, crossed; they read h1 and h2, node1's and node2's addresses).
# shellcheck shell=bash
# Reads the caller's h1 and h2, sets msg and the counters for it:
# shellcheck disable=SC2034,SC2154

fails=0
fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}
ok() { echo "ok: $*"; }

# Bytes rank 0 and rank 1 sent at least, from a benchmark's rows:
#   lat size iters ...: iters messages of size each way
#   bw size windows window ...: windows x window messages of size from rank 0
sent_bytes() {
    awk '$1 == "lat" && $NF == "ok" { s0 += $2 * $3; s1 += $2 * $3 }
         $1 == "bw" && $NF == "ok"  { s0 += $2 * $3 * $4 }
         END { printf "%.0f %.0f\n", s0, s1 }' "$1"
}
rows_ok() { # every data row verified, and at least one
    awk '$1 == "lat" || $1 == "bw" { n++; if ($NF != "ok") bad++ } END { exit !(n > 0 && !bad) }' "$1"
}

# HOST's eth0 rx_bytes and tx_bytes.
counters() { mh_counters | awk -v h="$1" '$1 == h { print $2, $3 }'; }
# node1's and node2's counters before a run (rx1a tx1a rx2a tx2a) and
# after it (rx1b tx1b rx2b tx2b).
veths_before() {
    read -r rx1a tx1a <<<"$(counters "$h1")"
    read -r rx2a tx2a <<<"$(counters "$h2")"
}
veths_after() {
    read -r rx1b tx1b <<<"$(counters "$h1")"
    read -r rx2b tx2b <<<"$(counters "$h2")"
}

# crossed FILE: whether, between veths_before and veths_after, the veths
# moved at least the bytes each rank of the benchmark whose output is FILE
# sent each way (rank 0 on node1: node1's tx and node2's rx; the reverse
# for rank 1). Sets msg to the figures.
crossed() {
    local s0 s1
    read -r s0 s1 <<<"$(sent_bytes "$1")"
    local d_tx1=$((tx1b - tx1a)) d_rx2=$((rx2b - rx2a)) d_tx2=$((tx2b - tx2a)) d_rx1=$((rx1b - rx1a))
    msg="rank 0 sent >= $s0 B: node1 tx $d_tx1, node2 rx $d_rx2; rank 1 sent >= $s1 B: node2 tx $d_tx2, node1 rx $d_rx1"
    ((s0 > 0 && d_tx1 >= s0 && d_rx2 >= s0 && d_tx2 >= s1 && d_rx1 >= s1))
}
