#!/usr/bin/env bash
# Tests how scripts/mpich-testsuite.sh tells a known failure from a new one:
# a failing run is known only when test/KNOWN_FAILURES lists its test and
# rank count AND the first line of its output holds the listed reason, so a
# known test that starts failing another way is caught. Also checks that
# the real test/KNOWN_FAILURES parses. Prints "known-failures.sh: N passed,
# M failed".
set -uo pipefail
src=${TORX_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
runner=$src/scripts/mpich-testsuite.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0
fail=0

cat >"$work/known" <<'KF'
# comment
mpich-suite coll/gatherv 4 "Number of processors must divide 10" -- needs 5 or 10 ranks
mpich-suite rma/slow 3 "timeout after" -- slow, not hung
KF

# expect WANT TEST NP FIRST-LINE
expect() {
    local want=$1 got
    shift
    got=$(printf '%s\n' "$*" | TORX_KNOWN_FAILURES=$work/known "$runner" --classify 2>&1)
    if [ "$got" = "$want" ]; then
        pass=$((pass + 1))
        echo "ok   $want: $*"
    else
        fail=$((fail + 1))
        echo "FAIL want $want, got '$got': $*"
    fi
}
expect known coll/gatherv 4 "Number of processors must divide 10"
expect known rma/slow 3 "timeout after 121 s; no output"
expect new coll/gatherv 4 "Fatal error in PMPI_Gatherv: Message truncated"
expect new rma/slow 3 "Found 3 errors"
expect new coll/gatherv 5 "Number of processors must divide 10"
expect new coll/other 4 "Number of processors must divide 10"

# A line without a reason is refused, not read as "any failure".
echo 'mpich-suite coll/x 4 -- no reason given' >"$work/bad"
if TORX_KNOWN_FAILURES=$work/bad "$runner" --classify </dev/null >"$work/out" 2>&1; then
    fail=$((fail + 1))
    echo "FAIL a KNOWN_FAILURES line without a reason was accepted"
else
    pass=$((pass + 1))
    echo "ok   a line without a reason is refused: $(head -n 1 "$work/out")"
fi
# The real list parses.
if "$runner" --classify </dev/null >"$work/out" 2>&1; then
    pass=$((pass + 1))
    echo "ok   test/KNOWN_FAILURES parses"
else
    fail=$((fail + 1))
    echo "FAIL test/KNOWN_FAILURES does not parse: $(cat "$work/out")"
fi
echo "known-failures.sh: $pass passed, $fail failed"
[ $fail = 0 ]
