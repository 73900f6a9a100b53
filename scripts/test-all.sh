#!/usr/bin/env bash
# Runs the full test suite, in three out-of-tree builds of one source tree:
#
#   build/       -Werror build           make check-but-net-variants
#                                          (every test but test/ofi-variant.sh and
#                                          test/ucx-variant.sh, which wait on the
#                                          network more than they compute: the ASan
#                                          build runs them at about the same cost)
#   build-asan/  AddressSanitizer+UBSan   make check         (every test)
#   build-tsan/  ThreadSanitizer          make check-tsan    (threaded / lock-free tests;
#                                                               see the tsan line below)
#   build-faults/ fault injection+ASan    make check-faults  (every allocation / injection of a
#                                          small job made to fail in turn: test_faults)
#   build-fuzz/  libFuzzer+ASan+UBSan      make fuzz-regress  (every committed fuzz input once)
#                (CC=clang)                make fuzz-short    ($TORX_FUZZ_SECONDS per harness)
#   mpi          MPICH with ch4:torx       test/mpi/run.sh    (MPI programs over torx;
#                (scripts/build-mpich.sh, cached in ~/.cache/torx)
#   mpisuite     the same MPICH            scripts/mpich-testsuite.sh --subset ci
#                                          (a subset of MPICH's own test suite,
#                                          test/mpich-suite/ci/; the runs that
#                                          test/KNOWN_FAILURES lists are expected
#                                          failures; full suite: make mpich-testsuite);
#                                          where multihost cannot make namespaces, then
#                                          its pt2pt, coll and rma lists over the ofi
#                                          device on this host (make mpich-testsuite-ofi)
#   multihost    the same MPICH            test/multihost/check-torx.sh (torx jobs across
#                                          2 and 3 emulated hosts in network namespaces,
#                                          hybrid shm+ofi, a host that vanishes; needs
#                                          root: skipped with the reason elsewhere, a
#                                          failure under CI=true)
#   npb          the same MPICH            bench/run-npb.sh, class S (the NAS Parallel
#                                          Benchmarks in heater, co and vn mode on 1 and 2
#                                          nodes; every run must verify)
#
# Tests run one after another (no -j for make check: they fork up to 16 tasks
# and measure ordering under load); compiling uses -j$TORX_JOBS (default 2).
# Every build is attempted even if an earlier one failed. Prints one summary
# line per build and a final "total: N passed, N failed"; exits non-zero if
# anything failed, after printing the failing tests' logs. A stage whose
# command exits 0 without its result line, or with nothing passed, failed.
#
# Environment:
#   TORX_TEST_BUILDS    which builds to run (default "normal asan tsan faults fuzz mpi mpisuite
#                       multihost npb")
#   TORX_FUZZ_SECONDS   fuzzing time per harness in the fuzz stage (default 20; longer:
#                       make -C build-fuzz fuzz-short FUZZ_SECONDS=N, or fuzz-long)
#   TORX_JOBS           parallel compile jobs (default 2)
#   TORX_CHECK_TIMEOUT  seconds one build's test run may take (default 1800)
#   NPB_DIR             the NPB3.4-MPI source (default npb/NPB3.4-MPI in CI's directory
#                       beside the source tree, $npb_home below); without it the npb
#                       stage is skipped, or fails when CI=true (.ci/run) and NPB_DIR is
#                       set or $npb_home exists
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
# CI's directory beside the source tree, which holds the NPB source.
npb_home=$(dirname "$top")/shared

builds=${TORX_TEST_BUILDS:-normal asan tsan faults fuzz mpi mpisuite multihost npb}
fuzz_seconds=${TORX_FUZZ_SECONDS:-20}
jobs=${TORX_JOBS:-2}
check_timeout=${TORX_CHECK_TIMEOUT:-1800}

summary=()
why=() # the lines of failing logs that say why, printed just before the summary
total_pass=0
total_fail=0
total_skip=0
status=0
mpich_built="" # scripts/build-mpich.sh in this run: "" not run, 1 ok, 0 failed

# Tests must not run in parallel, whatever the caller's make flags say.
unset MAKEFLAGS MFLAGS GNUMAKEFLAGS
# The builds here are for testing only: let ccache (scripts/build.sh) reuse
# objects compiled in another clone's build directories. Their debug
# information may then name that other directory.
export CCACHE_NOHASHDIR=1

banner() {
    echo
    echo "==== test-all: $* ===="
}

# nothing_passed RC PASS WHAT: true (and says so) when a stage's command
# exited 0 but its result line was missing or counted no pass: the counts
# would then default to "0 passed, 0 failed" and the stage pass unseen.
nothing_passed() {
    local what="printed no result line"
    [ "$1" = 0 ] || return 1
    [ -n "$2" ] && [ "$2" -gt 0 ] && return 1
    [ -z "$2" ] || what="passed no test"
    echo "test-all: $3 exited 0, but $what: counted as a failure" >&2
    return 0
}

# run_build NAME DIR CHECK_TARGET CONFIGURE_ARGS...
run_build() {
    local name=$1 dir=$2 target=$3
    shift 3
    local start=$SECONDS rc

    banner "$name build in $dir/ (configure ${*:-no options})"
    if ! scripts/build.sh "$dir" "$@"; then
        summary+=("$(printf '%-7s %-12s BUILD FAILED (see above)' "$name" "$dir/")")
        total_fail=$((total_fail + 1))
        status=1
        return
    fi
    if ! make -C "$dir" -j"$jobs" check-programs; then
        summary+=("$(printf '%-7s %-12s TEST BUILD FAILED (see above)' "$name" "$dir/")")
        total_fail=$((total_fail + 1))
        status=1
        return
    fi

    banner "$name: make $target in $dir/"
    rm -f "$dir/test-suite.log"
    # VERBOSE=yes: on failure automake prints test-suite.log, which holds the
    # full log of every failing test (and only those).
    timeout -k 30 "$check_timeout" make -C "$dir" "$target" VERBOSE=yes </dev/null
    rc=$?
    if [ $rc = 124 ] || [ $rc = 137 ]; then
        echo "test-all: make $target in $dir/ timed out after ${check_timeout} s;" \
            "the tests' logs so far:" >&2
        find "$dir/test" -name '*.log' -newer "$dir/config.status" -print |
            while read -r f; do
                echo "---- $f (last 60 lines)"
                tail -n 60 "$f"
            done
    fi

    local pass=0 fail=0 skip=0 counted=0 failing=""
    if [ -f "$dir/test-suite.log" ]; then
        read -r pass fail skip < <(awk '
            /^# PASS:/ { p = $3 } /^# XFAIL:/ { p += $3 }
            /^# FAIL:/ { f += $3 } /^# ERROR:/ { f += $3 } /^# XPASS:/ { f += $3 }
            /^# SKIP:/ { s = $3 }
            END { print p + 0, f + 0, s + 0 }' "$dir/test-suite.log")
        counted=1
    fi
    if nothing_passed "$rc" "$([ $counted = 1 ] && echo "$pass")" "make $target in $dir/"; then
        rc=1
    fi
    if [ $rc != 0 ]; then
        status=1
        # A harness failure that no test accounts for still counts once.
        [ "$fail" -gt 0 ] || fail=1
        if [ $counted = 1 ]; then
            failing=$(sed -n 's/^\(FAIL\|ERROR\|XPASS\): \(.*\)$/\2/p' "$dir/test-suite.log" |
                sort -u | tr '\n' ' ' | sed 's/ $//')
            # CI shows only the head and tail of this output: repeat, at the
            # end, the lines that say why (Check's failures and errors, a
            # script's FAILED lines, sanitizer reports, timeouts).
            while IFS= read -r line; do
                why+=("$name: $line")
            done < <(grep -E ':[FE]:|FAILED|Sanitizer|runtime error|timed out|Assertion|Aborted|core dumped' \
                "$dir/test-suite.log" | grep -v '^# ' | head -n 30)
        fi
    fi
    total_pass=$((total_pass + pass))
    total_fail=$((total_fail + fail))
    total_skip=$((total_skip + skip))
    local verdict=ok
    [ $rc = 0 ] || verdict=FAILED
    summary+=("$(printf '%-7s %-12s make %-11s %s: %d passed, %d failed, %d skipped (%d s)%s' \
        "$name" "$dir/" "$target" "$verdict" "$pass" "$fail" "$skip" $((SECONDS - start)) \
        "${failing:+ failing: $failing}")")
}

# The MPI level: MPICH built with the torx netmod (incremental when cached),
# then torx's own MPI programs, which also prove torx carried the traffic.
run_mpi() {
    local start=$SECONDS log rc pass=0 fail=0 skip=0
    banner "mpi: MPICH with ch4:torx (scripts/build-mpich.sh), then test/mpi/run.sh"
    if ! scripts/build-mpich.sh </dev/null; then
        mpich_built=0
        summary+=("$(printf '%-7s %-12s BUILD FAILED (see above)' mpi "MPICH")")
        total_fail=$((total_fail + 1))
        status=1
        return
    fi
    mpich_built=1
    log=$(mktemp)
    test/mpi/run.sh </dev/null 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    read -r pass fail < <(sed -n 's/^run\.sh: \([0-9]*\) passed, \([0-9]*\) failed.*/\1 \2/p' "$log")
    skip=$(sed -n 's/^run\.sh: .* \([0-9][0-9]*\) skipped,.*/\1/p' "$log")
    rm -f "$log"
    nothing_passed "$rc" "${pass:-}" test/mpi/run.sh && rc=1
    pass=${pass:-0}
    fail=${fail:-0}
    skip=${skip:-0}
    if [ "$rc" != 0 ]; then
        status=1
        [ "$fail" -gt 0 ] || fail=1
    fi
    total_pass=$((total_pass + pass))
    total_fail=$((total_fail + fail))
    total_skip=$((total_skip + skip))
    summary+=("$(printf '%-7s %-12s test/mpi/run.sh %s: %d passed, %d failed, %d skipped (%d s)' mpi \
        "MPICH" "$([ "$rc" = 0 ] && echo ok || echo FAILED)" "$pass" "$fail" "$skip" \
        $((SECONDS - start)))")
}

# need_mpich STAGE: true when MPICH with the torx netmod is built, building
# it now if no stage has tried yet; otherwise records STAGE as not run (the
# failed build counts once, where it was attempted) and returns false.
need_mpich() {
    if [ -z "$mpich_built" ]; then
        if scripts/build-mpich.sh </dev/null; then mpich_built=1; else mpich_built=0; fi
        if [ $mpich_built = 0 ]; then
            summary+=("$(printf '%-7s %-12s BUILD FAILED (see above)' "$1" "MPICH")")
            total_fail=$((total_fail + 1))
            status=1
            return 1
        fi
    elif [ "$mpich_built" = 0 ]; then
        summary+=("$(printf '%-7s %-12s NOT RUN (the MPICH build failed, see mpi)' "$1" "MPICH")")
        status=1
        return 1
    fi
    return 0
}

# A subset of MPICH's own test suite (test/mpi of the MPICH source) against
# the same MPICH: scripts/mpich-testsuite.sh --subset ci --check. Failing runs
# that test/KNOWN_FAILURES lists ("mpich-suite DIR/TEST NP -- why") are
# expected and reported as known; any other failure, or a directory that did
# not run all its entries, fails the stage.
# mpisuite_pass LABEL DIRS [NAME=VALUE...]: one run of the CI subset (DIRS:
# "" for all its directories) with NAME=VALUE in the environment, which
# hydra hands to every task; one summary line.
mpisuite_pass() {
    local label=$1 dirs=$2 start=$SECONDS log rc pass=0 fail=0 known=0 skip=0 incomplete=0 failing
    shift 2
    log=$(mktemp)
    # Limits with room for a loaded CI machine: the subset takes about 430 s
    # on a quiet 2-core one, but 1190 s in a fresh-clone run beside other
    # jobs, where sendflood (4 ranks on 2 cores) passed the 120 s limit and
    # rma its 600 s box. A test that needs more than 240 s is still a failure.
    env "$@" MPITEST_TIMEOUT_MULTIPLIER="${MPITEST_TIMEOUT_MULTIPLIER:-4}" \
        scripts/mpich-testsuite.sh --subset ci ${dirs:+--dirs "$dirs"} --maxnp 5 --dir-time 1500 \
        --check </dev/null 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    read -r pass fail known skip incomplete < <(sed -n \
        's/^mpich-testsuite: result: \([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) known, \([0-9]*\) skipped, \([0-9]*\) incomplete$/\1 \2 \3 \4 \5/p' \
        "$log")
    # the failing runs that KNOWN_FAILURES does not list
    failing=$(sed -n '/^failing runs/,/^total:/{/^  /{/ (known)$/!{s/^  \([^ ]* [0-9]*\).*/\1/p}}}' "$log" |
        tr '\n' ',' | sed 's/,$//; s/,/, /g')
    rm -f "$log"
    nothing_passed "$rc" "${pass:-}" scripts/mpich-testsuite.sh && rc=1
    pass=${pass:-0}
    fail=${fail:-0}
    known=${known:-0}
    skip=${skip:-0}
    incomplete=${incomplete:-0}
    if [ "$rc" != 0 ]; then
        status=1
        # incomplete directories, or a harness failure, count once each
        fail=$((fail + incomplete))
        [ "$fail" -gt 0 ] || fail=1
    fi
    total_pass=$((total_pass + pass))
    total_fail=$((total_fail + fail))
    total_skip=$((total_skip + skip))
    summary+=("$(printf '%-7s %-12s mpich-testsuite %s: %d passed, %d failed, %d known failures, %d skipped (%d s)%s%s' \
        mpisuite "$label" "$([ "$rc" = 0 ] && echo ok || echo FAILED)" "$pass" "$fail" "$known" "$skip" \
        $((SECONDS - start)) "${failing:+ failing: $failing}" \
        "$([ "$incomplete" = 0 ] || echo " ($incomplete directories incomplete)")")")
}

# A subset of MPICH's own test suite (test/mpi of the MPICH source) against
# the same MPICH: scripts/mpich-testsuite.sh --subset ci --check. Failing runs
# that test/KNOWN_FAILURES lists ("mpich-suite DIR/TEST NP -- why") are
# expected and reported as known; any other failure, or a directory that did
# not run all its entries, fails the stage. Where the multihost stage cannot
# make namespaces (not root), its pt2pt, coll and rma lists run again over
# the ofi device on this host (every packet through libfabric over
# loopback), so the device is still covered at the MPI level; where it can,
# that stage's MPI jobs across hosts cover it, and this pass is
# `make mpich-testsuite-ofi` (docs/testing.md#mpichs-test-suite).
run_mpisuite() {
    banner "mpisuite: MPICH's test suite, CI subset (scripts/mpich-testsuite.sh --subset ci)"
    need_mpich mpisuite || return
    mpisuite_pass MPICH ""
    if [[ " $builds " == *" multihost "* ]] && test/multihost/hosts.sh probe >/dev/null 2>&1; then
        echo "test-all: the network devices' MPICH-suite passes are left to the multihost stage (make mpich-testsuite-ofi, mpich-testsuite-ucx run them)"
        return
    fi
    banner "mpisuite: its pt2pt, coll and rma lists over the ofi device (TORX_DEVICE=ofi, loopback)"
    mpisuite_pass "MPICH, ofi" pt2pt,coll,rma TORX_DEVICE=ofi TORX_OFI_LOCAL=ofi TORX_OFI_IFACE=lo
    # The ucx pass where the installed libtorx has the device.
    local prefix
    prefix=$(cat "${TORX_CACHE:-$HOME/.cache/torx}/current-prefix" 2>/dev/null)
    if [ -f "$prefix/lib/torx/torx-dev-ucx.so" ]; then
        banner "mpisuite: its pt2pt, coll and rma lists over the ucx device (TORX_DEVICE=ucx)"
        mpisuite_pass "MPICH, ucx" pt2pt,coll,rma TORX_DEVICE=ucx TORX_UCX_LOCAL=ucx
    fi
}

# The NAS Parallel Benchmarks (bench/run-npb.sh; source NPB_DIR, built
# once into ~/.cache/torx/npb-*) at class S: every benchmark in heater, co and
# vn mode, on 1 node of 2 cores and on 2 (oversubscribed here, but co's
# communication threads and the torus carry traffic only there). Every run
# must print "Verification = SUCCESSFUL" within TORX_NPB_TIMEOUT seconds.
run_npb() {
    local start=$SECONDS log rc pass=0 fail=0 failing
    banner "npb: NAS Parallel Benchmarks class S in heater, co and vn mode (bench/run-npb.sh)"
    local npb=${NPB_DIR:-$npb_home/npb/NPB3.4-MPI}
    if [ ! -f "$npb/Makefile" ]; then
        # CI has the source (in $npb_home): there, its absence is a failure,
        # or the stage would pass having run nothing. A clone with no
        # $npb_home at all (NPB_DIR unset) is somewhere else: a printed skip.
        if [ "${CI:-}" = true ] && { [ -n "${NPB_DIR:-}" ] || [ -d "$npb_home" ]; }; then
            echo "test-all: no NPB3.4-MPI source at $npb (set NPB_DIR); CI=true: npb FAILED" >&2
            summary+=("$(printf '%-7s %-12s FAILED: no NPB3.4-MPI source at %s (CI=true; set NPB_DIR)' npb "MPICH" "$npb")")
            total_fail=$((total_fail + 1))
            status=1
            return
        fi
        echo "test-all: SKIP: no NPB3.4-MPI source at $npb (set NPB_DIR); npb skipped"
        summary+=("$(printf '%-7s %-12s SKIPPED: no NPB3.4-MPI source at %s (set NPB_DIR)' npb "MPICH" "$npb")")
        total_skip=$((total_skip + 1))
        return
    fi
    need_mpich npb || return
    log=$(mktemp)
    CLASS=S IMPLS=torx NODES="1 2" ROUNDS=1 PLOT=0 RUN_TIMEOUT_S=${TORX_NPB_TIMEOUT:-180} \
        bench/run-npb.sh </dev/null 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    read -r pass fail < <(sed -n 's/^run-npb: \([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' "$log")
    failing=$(sed -n 's/^  round [0-9]*: \([^:]*\):.*/\1/p' "$log" | sort -u | tr '\n' ';' | sed 's/;$//; s/;/; /g')
    rm -f "$log"
    nothing_passed "$rc" "${pass:-}" bench/run-npb.sh && rc=1
    pass=${pass:-0}
    fail=${fail:-0}
    if [ "$rc" != 0 ]; then
        status=1
        [ "$fail" -gt 0 ] || fail=1
    fi
    total_pass=$((total_pass + pass))
    total_fail=$((total_fail + fail))
    summary+=("$(printf '%-7s %-12s bench/run-npb.sh %s: %d passed, %d failed (%d s)%s' npb "MPICH" \
        "$([ "$rc" = 0 ] && echo ok || echo FAILED)" "$pass" "$fail" $((SECONDS - start)) \
        "${failing:+ failing: $failing}")")
}

# torx across emulated hosts (test/multihost/check-torx.sh): one pass or
# failure per check it prints. It needs root and network namespaces; where
# they cannot be made it says so and exits 77, a skip, except under CI=true,
# which runs as root and must run it.
run_multihost() {
    local start=$SECONDS log rc pass=0 fail=0
    banner "multihost: torx across emulated hosts (test/multihost/check-torx.sh)"
    need_mpich multihost || return
    log=$(mktemp)
    test/multihost/check-torx.sh </dev/null 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    pass=$(grep -c '^ok: ' "$log")
    fail=$(grep -c '^FAIL: ' "$log")
    if [ "$rc" = 77 ]; then
        rm -f "$log"
        if [ "${CI:-}" = true ]; then
            echo "test-all: multihost skipped under CI=true (needs root and network namespaces): a failure" >&2
            summary+=("$(printf '%-7s %-12s FAILED: skipped under CI=true (needs root and network namespaces)' multihost "namespaces")")
            total_fail=$((total_fail + 1))
            status=1
        else
            summary+=("$(printf '%-7s %-12s SKIPPED: needs root and network namespaces' multihost "namespaces")")
            total_skip=$((total_skip + 1))
        fi
        return
    fi
    rm -f "$log"
    nothing_passed "$rc" "$pass" test/multihost/check-torx.sh && rc=1
    if [ "$rc" != 0 ]; then
        status=1
        [ "$fail" -gt 0 ] || fail=1
    fi
    total_pass=$((total_pass + pass))
    total_fail=$((total_fail + fail))
    summary+=("$(printf '%-7s %-12s check-torx.sh %s: %d passed, %d failed (%d s)' multihost \
        "namespaces" "$([ "$rc" = 0 ] && echo ok || echo FAILED)" "$pass" "$fail" $((SECONDS - start)))")
}

# The libFuzzer harnesses of test/fuzz/ (test/fuzz/README.md): every
# committed input once, then a short fuzzing pass from the corpus. One pass
# or failure per harness and pass, as test/fuzz/run.sh counts them.
run_fuzz() {
    local start=$SECONDS rc log pass=0 fail=0 p f
    banner "fuzz build in build-fuzz/ (CC=clang --enable-sanitizers=fuzz)"
    if ! scripts/build.sh build-fuzz CC=clang --enable-sanitizers=fuzz; then
        summary+=("$(printf '%-7s %-12s BUILD FAILED (see above)' fuzz build-fuzz/)")
        total_fail=$((total_fail + 1))
        status=1
        return
    fi
    log=$(mktemp)
    rc=0
    for target in fuzz-regress fuzz-short; do
        banner "fuzz: make $target in build-fuzz/"
        make -C build-fuzz "$target" FUZZ_SECONDS="$fuzz_seconds" </dev/null 2>&1 | tee -a "$log"
        [ "${PIPESTATUS[0]}" = 0 ] || rc=1
    done
    while read -r p f; do
        pass=$((pass + p))
        fail=$((fail + f))
    done < <(sed -n 's/^fuzz: \([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' "$log")
    rm -f "$log"
    nothing_passed "$rc" "$pass" "make fuzz-regress fuzz-short in build-fuzz/" && rc=1
    if [ $rc != 0 ]; then
        status=1
        [ "$fail" -gt 0 ] || fail=1
    fi
    total_pass=$((total_pass + pass))
    total_fail=$((total_fail + fail))
    summary+=("$(printf '%-7s %-12s make fuzz-regress fuzz-short %s: %d passed, %d failed (%d s)' fuzz \
        build-fuzz/ "$([ $rc = 0 ] && echo ok || echo FAILED)" "$pass" "$fail" $((SECONDS - start)))")
}

for b in $builds; do
    case $b in
    normal) run_build normal build check-but-net-variants --enable-werror ;;
    asan) run_build asan build-asan check --enable-sanitizers=asan ;;
    # No test of check-tsan opens the ucx device, so none loads its module:
    # UCX's libucm patches malloc and mmap when it loads, under
    # ThreadSanitizer's own interceptors, and threaded tests would crash.
    tsan) run_build tsan build-tsan check-tsan --enable-sanitizers=tsan ;;
    faults) run_build faults build-faults check-faults --enable-fault-injection --enable-sanitizers=asan ;;
    fuzz) run_fuzz ;;
    mpi) run_mpi ;;
    mpisuite) run_mpisuite ;;
    multihost) run_multihost ;;
    npb) run_npb ;;
    *)
        echo "test-all: unknown build '$b' in TORX_TEST_BUILDS (normal, asan, tsan, faults, fuzz, mpi, mpisuite, multihost, npb)" >&2
        summary+=("$b: unknown build")
        total_fail=$((total_fail + 1))
        status=1
        ;;
    esac
done

if [ ${#why[@]} -gt 0 ]; then
    banner "why the failing tests failed (from their logs; the full logs are above)"
    for line in "${why[@]}"; do
        echo "$line"
    done
fi
banner "summary"
for line in "${summary[@]}"; do
    echo "$line"
done
if [ $total_skip -gt 0 ]; then
    echo "total: $total_pass passed, $total_fail failed, $total_skip skipped"
else
    echo "total: $total_pass passed, $total_fail failed"
fi
if [ $status != 0 ]; then
    echo "test-all: FAILED" >&2
fi
exit $status
