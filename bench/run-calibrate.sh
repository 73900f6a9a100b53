#!/usr/bin/env bash
# Places torx's protocol boundaries from measurements on this machine: the
# size from which eager (and vn) messages go through the staging area
# (TORX_STAGE_MIN), the staged piece (TORX_STAGE_CHUNK), and where eager
# hands over to rendezvous (TORX_EAGER_LIMIT), and up to which size a
# message to an idle pair goes staged instead (TORX_EAGER_IDLE_LIMIT).
# INSTALL=1 writes them into the tuning file libtorx reads at start-up.
#
# Runs torx MPICH's mpi_latency, mpi_bw and mpi_bibw (bench/mpi_*.c),
# 2 ranks bound one per core, under each candidate in interleaved rounds:
#   packets      eager by 240-byte packets      TORX_STAGE_MIN=0
#   staged-C     eager staged in pieces of C     TORX_STAGE_MIN=1 TORX_STAGE_CHUNK=C
#                (and up to 4 MiB to an idle pair: TORX_EAGER_IDLE_LIMIT=4194304)
#   rzv          rendezvous (bulk get)          TORX_EAGER_LIMIT=0 TORX_EAGER_IDLE_LIMIT=0
# (eager limit 1 MiB for the first two, so each covers every size), in
# heater mode, and in vn mode (where "packets" and "rzv" are both the vn
# protocol's cross-memory copy and ack). Then, per mode, from the medians:
#   chunk     the C with the best one-way bandwidth summed over 8-256 KiB
#   stage_min the smallest eager size (above 228 bytes: one packet holds 240
#             bytes, the MPI envelope takes 12) from which staged-C's
#             latency is never above packets' by more than 2%
#   eager     the largest size (up to 1 MiB) up to which staged-C is no
#             worse than rzv on latency and on one-way and bidirectional
#             bandwidth (2% tolerance), rounded down to a power of two
#   idle      the largest size above that up to which staged-C's latency
#             stays no worse than rzv's (2%), rounded down to a power of
#             two: an idle pair's messages stage that far; 0 (off) when
#             staged-C already lost on latency where eager stopped
# MPI messages up to 228 bytes go one-packet under every candidate: they
# are in the table as a check of the noise, not in the decisions.
# and prints the table and the recommended environment.
#
# Usage: bench/run-calibrate.sh
#   ROUNDS       interleaved rounds (default 3)
#   CHUNKS       candidate pieces (default "4096 8192 16384 32768")
#   MODES        "heater vn" (default)
#   TORX_PREFIX  torx MPICH prefix (default: ~/.cache/torx/current-prefix)
#   RESULTS_DIR  where calibrate-<stamp>.txt goes (default bench/results)
#   FROM_RAW     a raw file of an earlier run (build/calibrate/raw-*.txt):
#                analyse it again, run nothing
#   INSTALL      1: write the first mode's recommendation (heater by default)
#                to PREFIX/etc/torx.conf, the tuning file torx MPICH's libtorx
#                reads (README, "Message-layer environment"); the
#                environment still wins over it
# Exit status 0 when every run worked, 1 when one failed, 2 when something
# is missing.
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
rounds=${ROUNDS:-3}
chunks=${CHUNKS:-"4096 8192 16384 32768"}
modes=${MODES:-"heater vn"}
results=${RESULTS_DIR:-$root/bench/results}
prefix=${TORX_PREFIX:-$(cat "$HOME/.cache/torx/current-prefix" 2>/dev/null || true)}
die() {
    echo "run-calibrate: $*" >&2
    exit 2
}
[[ -n $prefix && -x $prefix/bin/mpicc ]] ||
    die "no torx MPICH (set TORX_PREFIX or run scripts/build-mpich.sh)"
"$prefix/bin/mpichversion" 2>/dev/null | grep -q 'ch4:torx' || die "$prefix is not ch4:torx"

bdir=$root/build/calibrate
mkdir -p "$bdir" "$results"
from_raw=${FROM_RAW:-}
if [[ -z $from_raw ]]; then
    for p in mpi_latency mpi_bw mpi_bibw; do
        "$prefix/bin/mpicc" -O2 -I"$here" -o "$bdir/$p" "$here/$p.c" || die "cannot build $p"
    done
fi

sizes=64,128,192,229,232,248,256,384,512,768,1K,1536,2K,3K,4K,6K,8K,12K,16K,24K,32K,48K,64K,128K,256K,512K,1M,2M,4M
stamp=$(date -u +%Y%m%d-%H%M%S)
raw=$bdir/raw-$stamp.txt
report=$results/calibrate-$stamp.txt
if [[ -n $from_raw ]]; then
    [[ -f $from_raw ]] || die "FROM_RAW='$from_raw' is not a file"
    raw=$from_raw
    rounds=$(awk '$3 > m { m = $3 } END { print m + 0 }' "$raw")
else
    : >"$raw"
fi

cands="packets rzv"
for c in $chunks; do cands+=" staged-$c"; done

env_of() {
    case $1 in
    packets) echo "TORX_STAGE_MIN=0 TORX_EAGER_LIMIT=1048576 TORX_EAGER_IDLE_LIMIT=0" ;;
    rzv) echo "TORX_EAGER_LIMIT=0 TORX_EAGER_IDLE_LIMIT=0" ;;
    staged-*) echo "TORX_STAGE_MIN=1 TORX_STAGE_CHUNK=${1#staged-} TORX_EAGER_LIMIT=1048576 TORX_EAGER_IDLE_LIMIT=4194304" ;;
    esac
}

failed=0
for ((r = 1; r <= rounds && ${#from_raw} == 0; r++)); do
    for mode in $modes; do
        for cand in $cands; do
            genv=(-genv TORX_MODE "$mode")
            for kv in $(env_of "$cand"); do genv+=(-genv "${kv%%=*}" "${kv#*=}"); done
            for prog in mpi_latency mpi_bw mpi_bibw; do
                out=$(timeout 300 "$prefix/bin/mpiexec" -n 2 -bind-to core "${genv[@]}" \
                    "$bdir/$prog" -s "$sizes" -n 5000 2>&1) || {
                    echo "run-calibrate: $prog $mode $cand failed:" >&2
                    echo "$out" | tail -5 >&2
                    failed=1
                    continue
                }
                echo "$out" | awk -v m="$mode" -v c="$cand" -v r="$r" \
                    '$1=="lat" {print m, c, r, "lat", $2, $7} $1=="bw" || $1=="bibw" {print m, c, r, $1, $2, $8}' \
                    >>"$raw"
            done
            echo "run-calibrate: round $r/$rounds $mode $cand done" >&2
        done
    done
done

{
    echo "# torx protocol calibration, $(date -u '+%F %T') UTC, $(uname -n), $rounds rounds"
    echo "# $(git -C "$root" describe --always --dirty 2>/dev/null), prefix ${prefix/#$HOME/\~}; measurements: ${raw#"$root"/}"
    echo "# medians over rounds of each run's median: latency ns (half round trip), one-way and bidirectional MB/s"
    awk -v chunks="$chunks" -v modes="$modes" '
    function median(key,   n, i, j, t, a) {
        n = split(vals[key], a, " ")
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    { k = $1 SUBSEP $2 SUBSEP $4 SUBSEP $5; vals[k] = vals[k] " " $6; if (!($5 in seen)) { seen[$5] = 1; sz[++ns] = $5 } }
    END {
        for (i = 1; i <= ns; i++) for (j = i + 1; j <= ns; j++) if (sz[j] + 0 < sz[i] + 0) { t = sz[i]; sz[i] = sz[j]; sz[j] = t }
        nc = split(chunks, ch, " "); nm = split(modes, md, " ")
        for (mi = 1; mi <= nm; mi++) {
            m = md[mi]
            printf "\n## mode %s\n\n| size | packets lat | rzv lat |", m
            for (c = 1; c <= nc; c++) printf " staged-%s lat |", ch[c]
            printf " packets bw | rzv bw |"
            for (c = 1; c <= nc; c++) printf " staged-%s bw |", ch[c]
            printf " packets bibw | rzv bibw |"
            for (c = 1; c <= nc; c++) printf " staged-%s bibw |", ch[c]
            printf "\n|---|---|---|"; for (c = 1; c <= 3 * nc + 4; c++) printf "---|"; printf "\n"
            best = ""; bestsum = -1
            for (c = 1; c <= nc; c++) {
                s = 0
                for (i = 1; i <= ns; i++) if (sz[i] >= 8192) s += median(m SUBSEP "staged-" ch[c] SUBSEP "bw" SUBSEP sz[i])
                if (s > bestsum) { bestsum = s; best = ch[c] }
            }
            for (i = 1; i <= ns; i++) {
                z = sz[i]
                printf "| %d | %.0f | %.0f |", z, median(m SUBSEP "packets" SUBSEP "lat" SUBSEP z), median(m SUBSEP "rzv" SUBSEP "lat" SUBSEP z)
                for (c = 1; c <= nc; c++) printf " %.0f |", median(m SUBSEP "staged-" ch[c] SUBSEP "lat" SUBSEP z)
                printf " %.0f | %.0f |", median(m SUBSEP "packets" SUBSEP "bw" SUBSEP z), median(m SUBSEP "rzv" SUBSEP "bw" SUBSEP z)
                for (c = 1; c <= nc; c++) printf " %.0f |", median(m SUBSEP "staged-" ch[c] SUBSEP "bw" SUBSEP z)
                printf " %.0f | %.0f |", median(m SUBSEP "packets" SUBSEP "bibw" SUBSEP z), median(m SUBSEP "rzv" SUBSEP "bibw" SUBSEP z)
                for (c = 1; c <= nc; c++) printf " %.0f |", median(m SUBSEP "staged-" ch[c] SUBSEP "bibw" SUBSEP z)
                printf "\n"
            }
            st = "staged-" best
            smin = 0
            for (i = ns; i >= 1 && sz[i] > 228; i--) {
                z = sz[i]
                if (z > 262144) continue
                if (median(m SUBSEP st SUBSEP "lat" SUBSEP z) > 1.02 * median(m SUBSEP "packets" SUBSEP "lat" SUBSEP z)) break
                smin = z
            }
            eager = 0
            for (i = 1; i <= ns; i++) {
                z = sz[i]
                if (z <= 228) continue
                if (z > 1048576 || \
                    median(m SUBSEP st SUBSEP "lat" SUBSEP z) > 1.02 * median(m SUBSEP "rzv" SUBSEP "lat" SUBSEP z) || \
                    median(m SUBSEP st SUBSEP "bw" SUBSEP z) < 0.98 * median(m SUBSEP "rzv" SUBSEP "bw" SUBSEP z) || \
                    median(m SUBSEP st SUBSEP "bibw" SUBSEP z) < 0.98 * median(m SUBSEP "rzv" SUBSEP "bibw" SUBSEP z)) break
                eager = z
            }
            # An idle pair (one message at a time): latency only, from the
            # size where eager stopped on; none when staging lost latency there.
            idle = eager
            for (; i <= ns; i++) {
                z = sz[i]
                if (median(m SUBSEP st SUBSEP "lat" SUBSEP z) > 1.02 * median(m SUBSEP "rzv" SUBSEP "lat" SUBSEP z)) break
                idle = z
            }
            p = 1; while (p * 2 <= eager) p *= 2
            q = 1; while (q * 2 <= idle) q *= 2
            if (q <= p) q = 0
            printf "\nmode %s: chunk %s (best 8-256 KiB bandwidth); staged beats packets from %d B; staged beats rendezvous up to %d B (power of two: %d), to an idle pair up to %d B (%d; 0: off)\n", m, best, smin, eager, p, idle, q
            printf "recommend %s TORX_STAGE_CHUNK=%s TORX_STAGE_MIN=%d TORX_EAGER_LIMIT=%d TORX_EAGER_IDLE_LIMIT=%d\n", m, best, smin, p, q
        }
    }' "$raw"
} | tee "$report"
echo "run-calibrate: report $report" >&2
if [[ ${INSTALL:-0} == 1 ]]; then
    rec=$(awk '/^recommend / { $1 = ""; $2 = ""; print; exit }' "$report")
    if [[ $failed != 0 || -z $rec ]]; then
        echo "run-calibrate: INSTALL=1: no complete recommendation; $prefix/etc/torx.conf left as it was" >&2
        exit 1
    fi
    mkdir -p "$prefix/etc"
    {
        echo "# torx tuning file: protocol boundaries measured on $(uname -n) by bench/run-calibrate.sh"
        echo "# ($(date -u '+%F %T') UTC, mode ${modes%% *}, report ${report#"$root"/})."
        echo "# The environment wins over these; TORX_CONF names another file (\"\" for none)."
        for kv in $rec; do echo "$kv"; done
    } >"$prefix/etc/torx.conf.tmp" && mv "$prefix/etc/torx.conf.tmp" "$prefix/etc/torx.conf"
    echo "run-calibrate: wrote $prefix/etc/torx.conf:" >&2
    sed 's/^/    /' "$prefix/etc/torx.conf" >&2
fi
exit $failed
