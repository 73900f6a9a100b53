#!/usr/bin/env bash
# Proves that .ci/run fails on every failed step of the README's commands.
#
# Runs the real .ci/run against stand-in READMEs (TORX_CI_README) whose two
# commands are `&&` chains of small steps that record that they ran:
#   - every step succeeds             -> exit 0, every step ran;
#   - the first step of (1) fails     -> non-zero, no later step, (2) not run;
#   - a middle step of (1) fails      -> non-zero, (2) not run (the case that
#                                        `set -e` around a plain chain misses);
#   - the last step of (2) fails      -> non-zero;
#   - a failing step inside a pipe    -> non-zero (pipefail);
#   - a two-line block, a missing one -> refused;
#   - scripts/test-all.sh's npb stage without NPB source: a skip, but a
#     failure under CI=true.
# Prints "ci-run.sh: N passed, M failed"; exits 1 on any failure.
set -uo pipefail

src=${TORX_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
ci=$src/.ci/run
[ -r "$ci" ] || {
    echo "ci-run.sh: no $ci" >&2
    exit 1
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0
fail=0

# stand_in NAME CMD1 CMD2: a README with the two commands as ```sh blocks.
stand_in() {
    printf '# stand-in\n\ntext\n\n```sh\n%s\n```\n\nmore\n\n```sh\n%s\n```\n\n```sh\nnot-a-command\n```\n' \
        "$2" "$3" >"$work/$1.md"
}

# expect NAME WANT_RC(0|nonzero) WANT_RAN WANT_NOT_RAN: run .ci/run on
# NAME.md; steps record themselves in $work/ran.
expect() {
    local name=$1 want=$2 ran=$3 not_ran=$4 rc got ok=1
    rm -f "$work/ran"
    touch "$work/ran"
    TORX_CI_README=$work/$name.md RAN=$work/ran bash "$ci" >"$work/$name.out" 2>&1
    rc=$?
    got=$(tr '\n' ' ' <"$work/ran" | sed 's/ $//')
    if [ "$want" = 0 ] && [ $rc != 0 ]; then ok=0; fi
    if [ "$want" = nonzero ] && [ $rc = 0 ]; then ok=0; fi
    [ "$got" = "$ran" ] || ok=0
    for s in $not_ran; do
        grep -qx "$s" "$work/ran" && ok=0
    done
    if [ $ok = 1 ]; then
        pass=$((pass + 1))
        echo "ok   $name: exit $rc, ran: ${got:-nothing}"
    else
        fail=$((fail + 1))
        echo "FAIL $name: exit $rc (want $want), ran: '${got}' (want '$ran'); output:"
        sed 's/^/     /' "$work/$name.out"
    fi
}

step() { echo "echo $1 >>\"\$RAN\""; }
s1=$(step a) s2=$(step b) s3=$(step c) s4=$(step d) s5=$(step e)

stand_in all-ok "$s1 && $s2 && $s3" "$s4 && $s5"
expect all-ok 0 "a b c d e" ""

stand_in first-fails "false && $s1 && $s2" "$s4"
expect first-fails nonzero "" "a b d"

stand_in middle-fails "$s1 && false && $s2 && $s3" "$s4"
expect middle-fails nonzero "a" "b c d"

stand_in script-fails "$s1 && bash -c 'exit 3' && $s2" "$s4"
expect script-fails nonzero "a" "b d"

stand_in last-fails "$s1" "$s4 && false"
expect last-fails nonzero "a d" "e"

stand_in pipe-fails "$s1 && false | cat && $s2" "$s4"
expect pipe-fails nonzero "a" "b d"

printf '```sh\n%s\n%s\n```\n```sh\n%s\n```\n' "$s1" "$s2" "$s4" >"$work/two-lines.md"
expect two-lines nonzero "" "a b d"

printf '```sh\n%s\n```\n' "$s1" >"$work/one-block.md"
expect one-block nonzero "" "a"

# The exit status of the failing step is passed on.
stand_in status "$s1 && bash -c 'exit 7'" "$s4"
TORX_CI_README=$work/status.md RAN=$work/ran bash "$ci" >/dev/null 2>&1
rc=$?
if [ $rc = 7 ]; then
    pass=$((pass + 1))
    echo "ok   status: exit 7 passed on"
else
    fail=$((fail + 1))
    echo "FAIL status: exit $rc, want 7"
fi

# The real README parses: two one-line commands.
n=$(awk '/^```sh[[:space:]]*$/ { b = 1; l = 0; next } b && /^```/ { b = 0; if (l == 1) n++; if (++k == 2) exit; next } b { l++ } END { print n + 0 }' "$src/README.md")
if [ "$n" = 2 ]; then
    pass=$((pass + 1))
    echo "ok   README.md: two one-line commands at the top"
else
    fail=$((fail + 1))
    echo "FAIL README.md: $n one-line commands among its first two \`\`\`sh blocks, want 2"
fi

# scripts/test-all.sh (the second command): where CI has a prerequisite, its
# absence fails the stage under CI=true (as .ci/run sets) instead of being
# skipped; elsewhere it is a printed skip. The npb stage without NPB source
# returns before it builds anything.
for ci in false true; do
    CI=$ci TORX_TEST_BUILDS=npb NPB_DIR=$work/no-npb bash "$src/scripts/test-all.sh" \
        >"$work/npb-$ci.out" 2>&1 </dev/null
    rc=$?
    if [ $ci = true ]; then
        ok=0
        [ $rc != 0 ] && grep -q 'FAILED: no NPB3.4-MPI source' "$work/npb-$ci.out" && ok=1
    else
        ok=0
        [ $rc = 0 ] && grep -q 'SKIPPED: no NPB3.4-MPI source' "$work/npb-$ci.out" && ok=1
    fi
    if [ $ok = 1 ]; then
        pass=$((pass + 1))
        echo "ok   test-all npb without NPB source, CI=$ci: exit $rc"
    else
        fail=$((fail + 1))
        echo "FAIL test-all npb without NPB source, CI=$ci: exit $rc; output:"
        sed 's/^/     /' "$work/npb-$ci.out"
    fi
done

echo "ci-run.sh: $pass passed, $fail failed"
[ $fail = 0 ]
