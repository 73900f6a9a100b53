#!/usr/bin/env bash
# Runs MPICH's own test suite (test/mpi of the same MPICH source that
# scripts/build-mpich.sh builds) against an installed MPICH: ours with the
# torx netmod, or any other MPICH 4 (Debian's ch4:ucx, for a comparison).
#
#   scripts/mpich-testsuite.sh [--dirs pt2pt,coll,...] [--maxnp N] [--mpich PREFIX]
#                              [--out DIR] [--dir-time SEC] [--mpich-src DIR]
#
#   --dirs      test directories of test/mpi (default pt2pt,coll,comm,datatype,
#               rma,info,attr,errhan)
#   --maxnp     most ranks per run (default 4); tests that ask for more run
#               with this many (runtests -maxnp)
#   --mpich     the MPICH install: PREFIX/bin/mpicc and PREFIX/bin/mpiexec.
#               Default: the last scripts/build-mpich.sh build
#               ($TORX_CACHE/current-prefix). Where PREFIX/bin has
#               mpicc.mpich (Debian: --mpich /usr, whose plain mpicc may be
#               Open MPI's), the *.mpich names are used.
#   --out       where the results go (default
#               $TORX_CACHE/testsuite-runs/<label>-<date>): per directory the
#               runtests log, TAP and JUnit files; summary.txt
#   --dir-time  time box per directory in seconds (default 600): runtests
#               then starts no further test (the running one finishes), and
#               the directory is reported as partial
#   --mpich-src an MPICH source tree (default: the one build-mpich.sh uses,
#               $TORX_CACHE/src/mpich-*)
#
# The suite is copied once per MPICH install to
# $TORX_CACHE/testsuite-<version>-<key>/ and configured there against that
# install (--disable-spawn --disable-ft-tests --disable-fortran
# --disable-cxx); runtests compiles each test when it first runs it.
#
# Environment: TORX_VERBOSE=-1 is exported (silences torx's start-up
# warnings, e.g. "oversubscribed": runtests counts any stderr output as a
# failure). MPITEST_TIMEOUT (default 60 s for tests without their own limit)
# and MPITEST_TIMEOUT_MULTIPLIER (default 2: 4 ranks share 2 cores here)
# can be overridden.
#
# Prints "<dir>: N passed, M failed" per directory (", K skipped" when the
# suite skipped some; "(partial ...)" when the time box hit), the failing
# runs, and a total line. Exits 0 when it ran (failures are results), 2 on
# a usage or setup error.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cache=${TORX_CACHE:-$HOME/.cache/torx}
dirs=pt2pt,coll,comm,datatype,rma,info,attr,errhan
maxnp=4
prefix=""
out=""
dir_time=600
mpich_src=""

die() {
    echo "mpich-testsuite: error: $*" >&2
    exit 2
}
log() { echo "mpich-testsuite: $*"; }

while [ $# -gt 0 ]; do
    case $1 in
    --dirs) dirs=${2:?--dirs needs a list}; shift 2 ;;
    --dirs=*) dirs=${1#*=}; shift ;;
    --maxnp) maxnp=${2:?--maxnp needs N}; shift 2 ;;
    --maxnp=*) maxnp=${1#*=}; shift ;;
    --mpich) prefix=${2:?--mpich needs PREFIX}; shift 2 ;;
    --mpich=*) prefix=${1#*=}; shift ;;
    --out) out=${2:?--out needs DIR}; shift 2 ;;
    --out=*) out=${1#*=}; shift ;;
    --dir-time) dir_time=${2:?--dir-time needs SEC}; shift 2 ;;
    --dir-time=*) dir_time=${1#*=}; shift ;;
    --mpich-src) mpich_src=${2:?--mpich-src needs DIR}; shift 2 ;;
    --mpich-src=*) mpich_src=${1#*=}; shift ;;
    -h | --help) sed -n '2,42p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
    esac
done

# ---- the MPICH install ------------------------------------------------------------
if [ -z "$prefix" ]; then
    [ -f "$cache/current-prefix" ] || die "no --mpich and no $cache/current-prefix (run scripts/build-mpich.sh)"
    prefix=$(cat "$cache/current-prefix")
fi
[ -d "$prefix/bin" ] || die "--mpich $prefix: no bin/ there"
prefix=$(cd "$prefix" && pwd)
sfx=""
[ -x "$prefix/bin/mpicc.mpich" ] && sfx=.mpich
mpicc=$prefix/bin/mpicc$sfx
mpiexec=$prefix/bin/mpiexec$sfx
[ -x "$mpicc" ] || die "no $mpicc"
[ -x "$mpiexec" ] || die "no $mpiexec"
# mpichversion is not renamed by Debian; take the one beside mpicc if any.
mv=$prefix/bin/mpichversion
[ -x "$mv$sfx" ] && mv=$mv$sfx
[ -x "$mv" ] || die "no $mv: $prefix does not look like an MPICH install"
device=$("$mv" | sed -n 's/^MPICH Device:[[:space:]]*//p')
version=$("$mv" | sed -n 's/^MPICH Version:[[:space:]]*//p')
[ -n "$version" ] || die "$mv printed no MPICH version"
label=$(echo "${device:-unknown}" | tr ':/' '--')

# ---- the test suite, configured for this install ---------------------------------
if [ -z "$mpich_src" ]; then
    mpich_src=$(find "$cache/src" -maxdepth 1 -type d -name 'mpich-[0-9]*' 2>/dev/null | sort -V | tail -n 1)
    [ -n "$mpich_src" ] || die "no MPICH source in $cache/src (run scripts/build-mpich.sh, or give --mpich-src)"
fi
[ -x "$mpich_src/test/mpi/configure" ] || die "$mpich_src/test/mpi/configure missing"
srcver=$(sed -n 's/^m4_define(\[MPICH_VERSION_m4\],\[\([^]]*\)\].*/\1/p' "$mpich_src/maint/version.m4" 2>/dev/null)
[ "$srcver" = "$version" ] || log "warning: the test suite is MPICH ${srcver:-?}'s, the install is $version"
key=$(printf '%s\n' "$mpich_src" "$prefix" "$mpicc" "$mpiexec" | sha256sum | cut -c1-12)
ts=$cache/testsuite-$srcver-$key
conf=(--with-mpi="$prefix" --disable-spawn --disable-ft-tests --disable-fortran --disable-cxx
    MPICC="$mpicc" MPIEXEC="$mpiexec")
if [ ! -f "$ts/.configured" ]; then
    log "configuring the test suite for $prefix ($device) in $ts (log: $ts.configure.log)"
    rm -rf "$ts" && mkdir -p "$(dirname "$ts")"
    cp -a "$mpich_src/test/mpi" "$ts" || die "cannot copy $mpich_src/test/mpi"
    (cd "$ts" && ./configure "${conf[@]}") >"$ts.configure.log" 2>&1 || {
        tail -n 30 "$ts.configure.log" >&2
        die "configure failed (log: $ts.configure.log)"
    }
    touch "$ts/.configured"
fi

[ -n "$out" ] || out=$cache/testsuite-runs/$label-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out" && out=$(cd "$out" && pwd)

export TORX_VERBOSE=-1
export MPITEST_TIMEOUT=${MPITEST_TIMEOUT:-60}
export MPITEST_TIMEOUT_MULTIPLIER=${MPITEST_TIMEOUT_MULTIPLIER:-2}
log "MPICH $version ($device) at $prefix: $mpiexec"
log "suite $ts; results in $out"
log "maxnp $maxnp, MPITEST_TIMEOUT=$MPITEST_TIMEOUT x $MPITEST_TIMEOUT_MULTIPLIER, time box ${dir_time} s per directory"

tot_pass=0
tot_fail=0
tot_skip=0
summary=()
failures=()
IFS=, read -r -a dirlist <<<"$dirs"
for d in "${dirlist[@]}"; do
    [ -d "$ts/$d" ] || {
        summary+=("$d: no such test directory")
        continue
    }
    stop=$out/$d.stop
    rm -f "$stop"
    start=$SECONDS
    (
        cd "$ts" &&
            MPITEST_STOPTEST=$stop exec ./runtests -srcdir=. -tests=testlist -testdirs="$d" \
                -mpiexec="$mpiexec" -maxnp="$maxnp" -tapfile="$out/$d.tap" \
                -junitfile="$out/$d.junit.xml" -xmlfile="$out/$d.xml"
    ) >"$out/$d.log" 2>&1 </dev/null &
    rt=$!
    # The time box: a stop file (runtests then starts no further test), and
    # if the running test does not end, a kill.
    (
        sleep "$dir_time" && echo stop >"$stop" &&
            sleep $((MPITEST_TIMEOUT * MPITEST_TIMEOUT_MULTIPLIER * 3 + 120)) &&
            kill -- "$rt" 2>/dev/null
    ) 2>/dev/null &
    wd=$!
    wait "$rt"
    pkill -P "$wd" 2>/dev/null # its sleep
    kill "$wd" 2>/dev/null
    wait "$wd" 2>/dev/null
    secs=$((SECONDS - start))
    partial=""
    [ -s "$stop" ] && partial=" (partial: time box of ${dir_time} s hit, later tests not run)"
    tap=$out/$d.tap
    p=0 f=0 s=0
    if [ -f "$tap" ]; then
        s=$(grep -c '^ok .*# SKIP' "$tap")
        p=$(($(grep -c '^ok ' "$tap") - s))
        f=$(grep -c '^not ok ' "$tap")
    else
        partial=" (no results: see $out/$d.log)"
    fi
    line="$d: $p passed, $f failed"
    [ "$s" = 0 ] || line+=", $s skipped"
    summary+=("$line$partial [${secs} s]")
    log "$line$partial [${secs} s]"
    tot_pass=$((tot_pass + p))
    tot_fail=$((tot_fail + f))
    tot_skip=$((tot_skip + s))
    # Failing runs, with their arguments and environment (from the JUnit file).
    if [ "$f" -gt 0 ] && [ -f "$out/$d.junit.xml" ]; then
        while IFS= read -r t; do failures+=("$t"); done < <(
            awk '/<testcase name=/ { n = $0; sub(/.*<testcase name="[0-9]* *- */, "", n); sub(/".*/, "", n) }
                 /<failure/ { gsub(/ +/, " ", n); sub(/ $/, "", n); print n }' "$out/$d.junit.xml")
    fi
done

{
    echo "MPICH $version ($device) at $prefix; maxnp $maxnp; MPITEST_TIMEOUT=$MPITEST_TIMEOUT x $MPITEST_TIMEOUT_MULTIPLIER"
    printf '%s\n' "${summary[@]}"
    if [ ${#failures[@]} -gt 0 ]; then
        echo "failing runs (directory/test np [args/env]):"
        printf '  %s\n' "${failures[@]}"
    fi
    t="total: $tot_pass passed, $tot_fail failed"
    [ "$tot_skip" = 0 ] || t+=", $tot_skip skipped"
    echo "$t"
} | tee "$out/summary.txt"
