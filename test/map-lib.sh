# test/map-lib.sh: what test/map-tool.sh and test/map-traffic.sh share,
# sourced by both after setting name (the script's name, for messages):
# the tool ($TORX_MAP, else ./torx-map), the fixture directories, a clean
# TORX_* environment, a temporary directory, and the run/expect helpers.
# Sets failures and checks; the caller reports them.
# shellcheck shell=sh
# Sets maps and examples for the caller, reads its here and name:
# shellcheck disable=SC2034,SC2154
tool=${TORX_MAP:-./torx-map}
maps=$here/maps
examples=$here/../mapping/examples

# The tool falls back on these like a job does; the tests give every value.
unset TORX_TORUS TORX_MODE TORX_MAPPING TORX_CORES_PER_NODE

if [ ! -x "$tool" ]; then
    echo "$name: no torx-map at '$tool' (set TORX_MAP)" >&2
    exit 1
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/torx-$name.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

failures=0
checks=0

fail() {
    failures=$((failures + 1))
    echo "FAIL: $*" >&2
    echo "  command: $last" >&2
    echo "  exit status: $rc" >&2
    sed 's/^/  stdout: /' "$tmp/out" >&2
    sed 's/^/  stderr: /' "$tmp/err" >&2
}

# run ARGS...: runs the tool, keeping stdout, stderr and the exit status.
run() {
    last="torx-map $*"
    "$tool" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
}

expect_rc() {
    checks=$((checks + 1))
    [ "$rc" -eq "$1" ] || fail "expected exit status $1"
}

expect_out() { # the whole of stdout
    checks=$((checks + 1))
    printf '%s\n' "$1" >"$tmp/want"
    cmp -s "$tmp/want" "$tmp/out" || fail "expected stdout: $1"
}

expect_out_has() {
    checks=$((checks + 1))
    grep -qF -- "$1" "$tmp/out" || fail "stdout lacks: $1"
}

expect_err_has() {
    checks=$((checks + 1))
    grep -qF -- "$1" "$tmp/err" || fail "stderr lacks: $1"
}

expect_err_empty() {
    checks=$((checks + 1))
    [ ! -s "$tmp/err" ] || fail "expected nothing on stderr"
}
