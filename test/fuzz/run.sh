#!/usr/bin/env bash
# Runs the libFuzzer harnesses of test/fuzz/ (built by a build configured
# with CC=clang --enable-sanitizers=fuzz; see test/fuzz/README.md).
#
#   test/fuzz/run.sh regress|short|long HARNESS...
#
#   regress  every committed input of the harness (test/fuzz/corpus/NAME/ and
#            test/fuzz/regress/NAME/, the reproducers of crashes found and
#            fixed) runs once: a regression test
#   short    fuzz for $FUZZ_SECONDS (default 60) from the committed corpus
#   long     fuzz for $FUZZ_RUNS executions (default 10^7) from the corpus
#
# short and long write new inputs to a scratch corpus, never to the
# committed one (merge them in by hand: see the README), and a crash's
# reproducer to test/fuzz/crash-NAME-*. Prints per harness one line with
# executions, time and the verdict, then "fuzz: N passed, M failed"; exits 1
# if any harness failed (a crash, a leak, a sanitizer report, a timeout).
set -uo pipefail

mode=${1:?usage: run.sh regress|short|long HARNESS...}
shift
src=$(cd "$(dirname "$0")" && pwd)
seconds=${FUZZ_SECONDS:-60}
runs=${FUZZ_RUNS:-10000000}
case $mode in regress | short | long) ;; *)
    echo "run.sh: unknown mode '$mode' (regress, short, long)" >&2
    exit 2
    ;;
esac
[ $# -gt 0 ] || {
    echo "run.sh: no harness named" >&2
    exit 2
}

# Sanitizer reports fail the run; leaks too.
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:abort_on_error=0:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
pass=0
fail=0
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

for h in "$@"; do
    name=$(basename "$h")
    corpus=$src/corpus/$name
    regress=$src/regress/$name
    log=$scratch/$name.log
    start=$SECONDS
    # -rss_limit_mb: the fuzzed task keeps one job up across inputs.
    common=(-rss_limit_mb=4096 -timeout=10 -print_final_stats=1)
    case $mode in
    regress)
        mapfile -t inputs < <(find "$corpus" "$regress" -type f 2>/dev/null | sort)
        if [ ${#inputs[@]} = 0 ]; then
            echo "FAIL $name: no committed inputs in $corpus or $regress"
            fail=$((fail + 1))
            continue
        fi
        "$h" "${common[@]}" "${inputs[@]}" >"$log" 2>&1
        ;;
    short | long)
        mkdir -p "$scratch/corpus-$name"
        limit=(-max_total_time="$seconds")
        [ "$mode" = long ] && limit=(-runs="$runs")
        "$h" "${common[@]}" "${limit[@]}" -artifact_prefix="$src/crash-$name-" \
            "$scratch/corpus-$name" "$corpus" >"$log" 2>&1
        ;;
    esac
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    [ -n "$execs" ] || execs=$(grep -c '^Running: ' "$log")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
    if [ $rc = 0 ]; then
        pass=$((pass + 1))
        echo "ok   $name: $mode, ${execs:-?} executions in $((SECONDS - start)) s${cov:+, $cov}"
    else
        fail=$((fail + 1))
        echo "FAIL $name: $mode, exit $rc after ${execs:-?} executions in $((SECONDS - start)) s; its log (last 40 lines):"
        tail -n 40 "$log" | sed 's/^/     /'
    fi
done
echo "fuzz: $pass passed, $fail failed"
[ $fail = 0 ]
