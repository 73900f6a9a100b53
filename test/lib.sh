# test/lib.sh: what the shell tests of one program share (test/example-hello.sh,
# and test/map-tool.sh and test/map-traffic.sh through test/map-lib.sh).
# The caller sets, then sources this file:
#   name      the script's name, for messages
#   prog      the program that run starts
#   label     the program's name in a failure's "command:" line
#   prog_var  the variable that names another program, for the message
#             when prog is not there
# It exits 1 when prog is not executable, and otherwise makes a temporary
# directory $tmp (removed on exit), sets failures and checks, and defines
# run, the expect_* checks and finish (the summary line and the exit status).
# shellcheck shell=sh
# Reads the caller's name, prog, label and prog_var:
# shellcheck disable=SC2154

if [ ! -x "$prog" ]; then
    echo "$name: no $label at '$prog' (set $prog_var)" >&2
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

# run ARGS...: runs the program, keeping stdout, stderr and the exit status.
run() {
    last="$label $*"
    "$prog" "$@" >"$tmp/out" 2>"$tmp/err"
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

# finish: prints "NAME: N checks, M failed" (make check's summary shows it)
# and returns nonzero when a check failed; the script's last command.
finish() {
    echo "$name: $checks checks, $failures failed"
    [ "$failures" -eq 0 ]
}
