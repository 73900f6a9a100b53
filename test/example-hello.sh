#!/bin/sh
# Tests of the example program examples/msg_hello.c (shown in README.md):
# fork jobs of 2 and 3 tasks in every mode give the greeting and the reply
# and exit 0; a job of one task, a singleton run and a bad TORX_MODE fail
# with a message; a bad command line exits 2. And README.md shows the
# program exactly as it is.
#
# The program is $TORX_BUILDDIR/examples/msg_hello (make check sets
# TORX_BUILDDIR), else ./examples/msg_hello (the build directory). The
# sources are found next to this script. Exits nonzero when any check fails.

name=example-hello.sh
prog=${TORX_BUILDDIR:-.}/examples/msg_hello
label=msg_hello
prog_var=TORX_BUILDDIR
here=$(cd "$(dirname "$0")" && pwd) || exit 1
top=$here/..

# The defaults of a job: every test sets what it needs.
unset TORX_TORUS TORX_MODE TORX_MAPPING TORX_CORES_PER_NODE TORX_EAGER_LIMIT \
    TORX_ADAPTIVE_LIMIT TORX_RZV_DATA TORX_STATS TORX_CHAOS TORX_DEVICE TORX_BULK \
    TORX_EAGER_IDLE_LIMIT TORX_STAGE_COST_MAX
# Not started by mpiexec: no PMI.
unset PMI_FD PMI_PORT PMI_RANK PMI_SIZE PMI_ID

# shellcheck source=test/lib.sh
. "$here/lib.sh"

# The two lines of a good run, in any order (the tasks print concurrently).
expect_hello() {
    checks=$((checks + 1))
    printf '%s\n' "rank 0: reply from rank 1: hello back" \
        "rank 1: greeting from rank 0: hello" >"$tmp/want"
    sort "$tmp/out" >"$tmp/got"
    cmp -s "$tmp/want" "$tmp/got" || fail "expected the greeting and the reply on stdout"
}

for mode in heater co vn; do
    for n in 2 3; do
        TORX_MODE=$mode run --fork "$n"
        last="TORX_MODE=$mode $last"
        expect_rc 0
        expect_hello
    done
done

# Adaptive packets really reordered, and a tiny FIFO: the same two lines.
TORX_CHAOS=7 TORX_FIFO_PACKETS=16 run --fork 2
expect_rc 0
expect_hello

# One task: there is no rank 1 to greet.
run --fork 1
expect_rc 1
expect_err_has "msg_hello: torx: torx_send: destination rank 1 is not in the job (0..0)"
expect_err_has "msg_hello: torx: fork job fork-"

# Without mpiexec and without --fork: a singleton job of one task.
run
expect_rc 1
expect_err_has "destination rank 1 is not in the job"

TORX_MODE=bogus run --fork 2
expect_rc 1
expect_err_has "TORX_MODE='bogus' is not one of: heater, co, vn"

run --fork 0
expect_rc 1
expect_err_has "msg_hello: torx: torx_boot_fork_run: ntasks=0, must be 1..4096"

run --fork
expect_rc 2
expect_err_has "usage: msg_hello [--fork NTASKS]"

# The README's copy (the C block of its "Message layer" section) is the file.
last="README.md's example vs examples/msg_hello.c"
rc=0
# shellcheck disable=SC2016 # the backquotes are Markdown, not expansions
sed -n '/^## Message layer/,/^## /p' "$top/README.md" | sed -n '/^```c$/,/^```$/p' |
    sed '1d;$d' >"$tmp/readme.c"
diff "$tmp/readme.c" "$top/examples/msg_hello.c" >"$tmp/out" 2>"$tmp/err"
checks=$((checks + 1))
if [ ! -s "$tmp/readme.c" ] || [ -s "$tmp/out" ]; then
    fail "README.md must show examples/msg_hello.c verbatim (diff README file on stdout)"
fi

finish
