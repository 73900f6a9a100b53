#!/usr/bin/env bash
# The original's Figure 2 in small: NAS BT and CG on a torus that holds the
# job, under three mappings (the default XYZT, a deliberately poor one, and
# what `torx-map opt` proposes for the traffic the job itself recorded),
# with the hop-bytes TORX_STATS reports and the run times.
#
#   bench/run-mapping-bench.sh                 BT and CG, class S, 16 ranks on 4x2x2
#   CLASS=W NP=16 TORUS=4x4x1 ROUNDS=5 bench/run-mapping-bench.sh
#
# Variables:
#   CLASS    NPB class (S)            NP      ranks (16: BT needs a square, CG a power of 2)
#   TORUS    torus XxYxZ (4x2x2)      MODE    heater, co or vn (heater)
#   ROUNDS   rounds; each runs every mapping once, interleaved (3)
#   BENCHES  which NPB benchmarks ("bt cg")
#   NPB      NPB3.4-MPI source, only read (../shared/npb/NPB3.4-MPI)
#   WORK     where NPB is copied and built (/tmp/torx-mapping-bench)
#   PREFIX   the MPICH with ch4:torx ($(cat ~/.cache/torx/current-prefix))
#   TORX_LIBDIR  libtorx the netmod loads (build/.libs of this tree)
#   OUT      results folder (bench/results/mapping-<date>)
#
# The shm device has no per-hop cost: hop-bytes show what the mapping would
# cost on a real torus; run time on one host need not follow them.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
CLASS=${CLASS:-S}
NP=${NP:-16}
TORUS=${TORUS:-4x2x2}
MODE=${MODE:-heater}
ROUNDS=${ROUNDS:-3}
BENCHES=${BENCHES:-bt cg}
NPB=${NPB:-$top/../shared/npb/NPB3.4-MPI}
WORK=${WORK:-/tmp/torx-mapping-bench}
PREFIX=${PREFIX:-$(cat ~/.cache/torx/current-prefix)}
TORX_LIBDIR=${TORX_LIBDIR:-$top/build/.libs}
OUT=${OUT:-$top/bench/results/mapping-$(date -u +%Y%m%d-%H%M%S)}
TORX_MAP=${TORX_MAP:-$top/build/torx-map}

log() { echo "run-mapping-bench.sh: $*" >&2; }
die() {
    log "error: $*"
    exit 1
}

[ -d "$NPB" ] || die "no NPB source at $NPB (set NPB)"
[ -x "$PREFIX/bin/mpif90" ] || die "no mpif90 under $PREFIX (set PREFIX; scripts/build-mpich.sh builds it)"
[ -f "$TORX_LIBDIR/libtorx.so" ] || die "no libtorx.so in $TORX_LIBDIR (run scripts/build.sh)"
[ -x "$TORX_MAP" ] || die "no torx-map at $TORX_MAP"
case $MODE in heater | co | vn) ;; *) die "MODE '$MODE': expected heater, co or vn" ;; esac
mkdir -p "$OUT" "$WORK"

# ---- Build (out of tree: the NPB source stays untouched) --------------------
src=$WORK/NPB3.4-MPI
if [ ! -d "$src" ]; then
    log "copying $NPB to $src"
    cp -r "$NPB" "$src"
fi
cat >"$src/config/make.def" <<EOF
MPIFC = $PREFIX/bin/mpif90
FLINK = \$(MPIFC)
FFLAGS = -O2 -fallow-argument-mismatch
FLINKFLAGS = \$(FFLAGS)
MPICC = $PREFIX/bin/mpicc
CLINK = \$(MPICC)
CFLAGS = -O2
CLINKFLAGS = \$(CFLAGS)
CC = gcc
BINDIR = ../bin
CONVERTFLAG = -DFORTRAN_REC_SIZE=1
RAND = randdp
EOF
mkdir -p "$src/bin" # NPB links into bin/, which the source tree may lack
for b in $BENCHES; do
    if [ ! -x "$src/bin/$b.$CLASS.x" ]; then
        log "building $b class $CLASS"
        make -C "$src" "$b" CLASS="$CLASS" >"$OUT/build-$b.log" 2>&1 ||
            die "building $b failed: see $OUT/build-$b.log"
    fi
done

# ---- Runs ------------------------------------------------------------------------
tpn=1
[ "$MODE" = vn ] && tpn=${TORX_CORES_PER_NODE:-2}
modeopt=(--mode "$MODE")

# run BENCH MAPPING TAG: one run; prints "seconds hop_bytes bytes".
run() {
    local b=$1 mapping=$2 tag=$3
    local err=$OUT/$b-$tag.err
    LD_LIBRARY_PATH=$TORX_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
        TORX_TORUS=$TORUS TORX_MODE=$MODE TORX_MAPPING=$mapping TORX_STATS=1 \
        TORX_STATS_FILE=$OUT/$b-$tag.traffic \
        "$PREFIX/bin/mpiexec" -n "$NP" "$src/bin/$b.$CLASS.x" >"$OUT/$b-$tag.out" 2>"$err" ||
        die "$b under $mapping failed: see $OUT/$b-$tag.out and $err"
    grep -q "Verification    =               SUCCESSFUL" "$OUT/$b-$tag.out" ||
        die "$b under $mapping did not verify: see $OUT/$b-$tag.out"
    local secs job
    secs=$(sed -n 's/^ *Time in seconds = *\([0-9.]*\).*/\1/p' "$OUT/$b-$tag.out")
    job=$(grep 'stats job ' "$err" | head -1) ||
        die "no 'stats job' line in $err: is $TORX_LIBDIR/libtorx.so the one the netmod loads?"
    echo "$secs $(echo "$job" | sed 's/.*bytes=\([0-9]*\) hop_bytes=\([0-9]*\).*/\2 \1/')"
}

# random_map SEED: the ranks on a pseudo-random permutation of the slots
# (Fisher-Yates, x fastest).
random_map() {
    local x y z
    IFS=x read -r x y z <<<"$TORUS"
    awk -v n="$NP" -v X="$x" -v Y="$y" -v Z="$z" -v T="$tpn" -v seed="$1" 'BEGIN {
        slots = X * Y * Z * T
        for (s = 0; s < slots; s++) p[s] = s
        r = seed
        for (s = slots - 1; s > 0; s--) {
            r = (r * 1103515245 + 12345) % 2147483648
            j = int(r / 65536) % (s + 1)
            t = p[s]; p[s] = p[j]; p[j] = t
        }
        print "# random permutation of the slots, seed " seed
        for (k = 0; k < n; k++) {
            s = p[k]
            print s % X, int(s / X) % Y, int(s / (X * Y)) % Z, int(s / (X * Y * Z))
        }
    }'
}

# poor_map TRAFFIC: a deliberately poor map, the worst of 20 random ones by
# the hop-bytes of the recorded traffic (torx-map eval weighs them).
poor_map() {
    local traffic=$1 dir=$OUT/random i worst
    mkdir -p "$dir"
    for ((i = 1; i <= 20; i++)); do
        random_map "$i" >"$dir/r$i.map"
    done
    worst=$("$TORX_MAP" eval "$traffic" "$dir"/r*.map --torus "$TORUS" "${modeopt[@]}" |
        sed -n 's/^\(.*\): hop_bytes=\([0-9]*\) .*/\2 \1/p' | sort -n | tail -1 | cut -d' ' -f2-)
    [ -n "$worst" ] || die "no random map to choose from"
    cat "$worst"
}

results=$OUT/results.txt
{
    echo "# NPB class $CLASS, $NP ranks on torus $TORUS, mode $MODE, $ROUNDS rounds"
    echo "# $(date -u +%Y-%m-%dT%H:%MZ), $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs"
    echo "# bench mapping hop_bytes bytes hops_per_byte seconds(best) seconds(all rounds)"
} >"$results"

for b in $BENCHES; do
    log "$b: recording its traffic under XYZT"
    run "$b" XYZT record >/dev/null
    traffic=$OUT/$b-record.traffic
    poor_map "$traffic" >"$OUT/$b-poor.map"
    "$TORX_MAP" check "$OUT/$b-poor.map" --torus "$TORUS" "${modeopt[@]}" --ntasks "$NP" >/dev/null
    "$TORX_MAP" opt "$traffic" --torus "$TORUS" "${modeopt[@]}" -o "$OUT/$b-opt.map" \
        >"$OUT/$b-opt.txt"
    "$TORX_MAP" eval "$traffic" XYZT "$OUT/$b-poor.map" "$OUT/$b-opt.map" --torus "$TORUS" \
        "${modeopt[@]}" >"$OUT/$b-eval.txt"
    declare -A times=() hb=() by=()
    for ((r = 1; r <= ROUNDS; r++)); do
        for m in xyzt poor opt; do
            case $m in
            xyzt) spec=XYZT ;;
            *) spec=$OUT/$b-$m.map ;;
            esac
            read -r secs hop bytes < <(run "$b" "$spec" "$m-$r")
            log "$b $m round $r: $secs s, $hop hop-bytes"
            times[$m]="${times[$m]:-} $secs"
            hb[$m]=$hop
            by[$m]=$bytes
        done
    done
    for m in xyzt poor opt; do
        best=$(tr ' ' '\n' <<<"${times[$m]}" | grep . | sort -g | head -1)
        hpb=$(awk -v h="${hb[$m]}" -v b="${by[$m]}" 'BEGIN { printf "%.3f", b ? h / b : 0 }')
        echo "$b $m ${hb[$m]} ${by[$m]} $hpb $best${times[$m]}" >>"$results"
    done
    unset times hb by
done
cat "$results"
log "results in $OUT"
