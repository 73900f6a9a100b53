#!/bin/sh
# Tests of the example program examples/msg_hello.c (shown in the docs):
# fork jobs of 2 and 3 tasks in every mode give the greeting and the reply
# and exit 0; a job of one task, a singleton run and a bad TORX_MODE fail
# with a message; a bad command line exits 2. And README.md or a page of
# docs/ shows the program exactly as it is.
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

# A document shows the program as it is: one ```c block of README.md or of
# a page of docs/ is examples/msg_hello.c exactly.
last="README.md's and docs/*.md's C blocks vs examples/msg_hello.c"
rc=0
n=0
for doc in "$top/README.md" "$top"/docs/*.md; do
    [ -f "$doc" ] || continue
    n=$((n + 1))
    # shellcheck disable=SC2016 # the backquotes are Markdown, not expansions
    awk -v out="$tmp/block.$n" '/^```c$/ { k++; f = out "." k; printf "" >f; inb = 1; next }
        inb && /^```$/ { inb = 0; close(f); next }
        inb { print >f }' "$doc"
done
checks=$((checks + 1))
found=0
for block in "$tmp"/block.*; do
    [ -f "$block" ] && cmp -s "$block" "$top/examples/msg_hello.c" && found=1
done
: >"$tmp/out"
: >"$tmp/err"
if [ "$found" -eq 0 ]; then
    fail "README.md or a page of docs/ must show examples/msg_hello.c verbatim in a \`\`\`c block"
fi

finish
