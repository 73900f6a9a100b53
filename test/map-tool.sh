#!/bin/sh
# Tests of the torx-map tool (mapping/torx-map.c): gen -> check round trips,
# check on every bad fixture (exit 1, "FILE:LINE: reason" on stderr), show
# tables and --distance, the example maps, and usage errors (exit 2).
#
# The tool is $TORX_MAP, else ./torx-map (the build directory, where make
# check runs). Fixtures are found next to this script: test/maps/ and
# mapping/examples/. Exits nonzero when any check fails.

# shellcheck disable=SC2034
name=map-tool.sh # for map-lib.sh's messages
here=$(cd "$(dirname "$0")" && pwd) || exit 1
# shellcheck source=test/map-lib.sh
. "$here/map-lib.sh"

# ---- gen -> check round trips ------------------------------------------------

# torus, options, ranks, tasks per node
for spec in "2x2x2||8|1" "4x2x1|--order TXYZ --mode vn|16|2" "3x2x2|--order zyxt --ntasks 7|7|1" \
    "2x3x1|--order TZYX --tasks-per-node 3|18|3" "1x1x1|--mode co|1|1"; do
    torus=${spec%%|*}
    rest=${spec#*|}
    opts=${rest%%|*}
    rest=${rest#*|}
    n=${rest%%|*}
    t=${rest#*|}
    tpn=
    case $opts in *vn*) tpn="--mode vn" ;; *tasks-per-node*) tpn="--tasks-per-node $t" ;; esac
    # shellcheck disable=SC2086 # opts are words
    run gen --torus "$torus" $opts -o "$tmp/gen.map"
    expect_rc 0
    expect_err_empty
    [ "$t" = 1 ] && per="1 task per node" || per="$t tasks per node"
    [ "$n" = 1 ] && ranks="1 rank" || ranks="$n ranks"
    # shellcheck disable=SC2086
    run check "$tmp/gen.map" --torus "$torus" $tpn
    expect_rc 0
    expect_out "$tmp/gen.map: ok ($ranks on $torus, $per)"
    # shellcheck disable=SC2086
    run check "$tmp/gen.map" --torus "$torus" $tpn --ntasks "$n"
    expect_rc 0
    # The same ranks on standard output; only the command comment differs.
    # shellcheck disable=SC2086
    run gen --torus "$torus" $opts
    expect_rc 0
    grep -v '^#' "$tmp/out" >"$tmp/a"
    grep -v '^#' "$tmp/gen.map" >"$tmp/b"
    checks=$((checks + 1))
    cmp -s "$tmp/a" "$tmp/b" || fail "gen to stdout and gen -o differ for $torus $opts"
    checks=$((checks + 1))
    [ "$(wc -l <"$tmp/a")" -eq "$n" ] || fail "gen $torus $opts: expected $n rank lines"
done

# What gen writes, line by line: TXYZ on 2x2x1 in vn mode.
run gen --torus 2x2x1 --order txyz --mode vn
expect_rc 0
expect_out_has "# torx-map gen --torus 2x2x1 --order txyz --mode vn"
expect_out_has "# torus 2x2x1, 2 tasks per node, 8 ranks (8 slots)"
grep -v '^#' "$tmp/out" | tr '\n' ',' >"$tmp/a"
checks=$((checks + 1))
[ "$(cat "$tmp/a")" = "0 0 0 0,0 0 0 1,1 0 0 0,1 0 0 1,0 1 0 0,0 1 0 1,1 1 0 0,1 1 0 1," ] ||
    fail "gen TXYZ 2x2x1 vn wrote $(cat "$tmp/a")"

# A job larger than its file, and a file larger than its job.
run gen --torus 2x2x2 --ntasks 5 -o "$tmp/five.map"
expect_rc 0
run check "$tmp/five.map" --torus 2x2x2 --ntasks 6
expect_rc 1
expect_err_has "$tmp/five.map:"
expect_err_has "file has 5 ranks, the job has 6"
run check "$tmp/five.map" --torus 2x2x2 --ntasks 4
expect_rc 1
expect_err_has "file has 5 ranks, the job has 4 (the extra ranks start on this line)"

# A job that does not fit the torus.
run gen --torus 2x2x1 --ntasks 5
expect_rc 1
expect_err_has "the job's 5 tasks do not fit the torus 2x2x1"

# TORX_CORES_PER_NODE sets vn's tasks per node; --tasks-per-node overrides it.
TORX_CORES_PER_NODE=4 run gen --torus 2x1x1 --mode vn -o "$tmp/vn4.map"
expect_rc 0
run check "$tmp/vn4.map" --torus 2x1x1 --tasks-per-node 4
expect_out "$tmp/vn4.map: ok (8 ranks on 2x1x1, 4 tasks per node)"
TORX_CORES_PER_NODE=4 run check "$tmp/vn4.map" --torus 2x1x1 --mode vn --tasks-per-node 2
expect_rc 1
expect_err_has "t=2 but the mode runs 2 tasks per node (t must be 0..1)"

# TORX_TORUS and TORX_MODE stand in for --torus and --mode, as in a job.
TORX_TORUS=4x2x1 TORX_MODE=vn run check "$examples/txyz-4x2x1-vn.map"
expect_rc 0
expect_out "$examples/txyz-4x2x1-vn.map: ok (16 ranks on 4x2x1, 2 tasks per node)"

# ---- check on every bad fixture -------------------------------------------------

# file|options|"line: reason" expected on stderr after the path
while IFS='|' read -r file opts want; do
    [ -n "$file" ] || continue
    # shellcheck disable=SC2086
    run check "$maps/$file" $opts
    expect_rc 1
    expect_err_has "$maps/$file$want"
    checks=$((checks + 1))
    [ ! -s "$tmp/out" ] || fail "check $file printed on stdout"
done <<EOF
bad-notnum.map|--torus 2x2x2|:4: '1a' is not a number
bad-negative.map|--torus 2x2x2|:3: '-1' is not a number
bad-fields3.map|--torus 2x2x2|:3: expected 4 fields (x y z t), found 3
bad-fields5.map|--torus 2x2x2|:2: expected 4 fields (x y z t), found 5
bad-trailing-comment.map|--torus 2x2x2|:3: expected 4 fields (x y z t), found 7; a comment must be on a line of its own
bad-range.map|--torus 2x2x2|:4: y=2 is out of range: the torus has extent 2 in y (0..1)
bad-huge.map|--torus 2x2x2|:2: z=99999999999 is out of range
bad-t-heater.map|--torus 2x2x2 --mode heater|:3: t=1 but the mode runs 1 task per node (t must be 0)
bad-t-heater.map|--torus 2x2x2 --mode co|:3: t=1 but the mode runs 1 task per node (t must be 0)
bad-t-vn.map|--torus 2x2x2 --mode vn|:4: t=2 but the mode runs 2 tasks per node (t must be 0..1)
bad-dup.map|--torus 2x2x2|:7: (1,0,0,0) already used by rank 3 on line 5
bad-dup-rank0.map|--torus 2x2x2|:4: (0,0,0,0) already used by rank 0 on line 2
bad-few.map|--torus 2x2x2 --ntasks 4|:6: file has 3 ranks, the job has 4
bad-many.map|--torus 2x2x2 --ntasks 4|:7: file has 6 ranks, the job has 4
bad-comments-only.map|--torus 2x2x2|: no rank lines (only blank and comment lines)
bad-empty.map|--torus 2x2x2|: no rank lines (the file is empty)
does-not-exist.map|--torus 2x2x2|: cannot open the mapping file: No such file or directory
EOF

# A fixture that is only bad for its mode passes with more tasks per node.
run check "$maps/bad-t-vn.map" --torus 2x2x2 --tasks-per-node 3
expect_rc 0
expect_out "$maps/bad-t-vn.map: ok (3 ranks on 2x2x2, 3 tasks per node)"
run check "$maps/good-mixed.map" --torus 2x2x2
expect_rc 0
expect_out "$maps/good-mixed.map: ok (8 ranks on 2x2x2, 1 task per node)"

# ---- show ------------------------------------------------------------------------

run show XYZT --torus 2x2x2
expect_rc 0
expect_out_has "# 8 ranks on 2x2x2, 1 task per node, order XYZT"
expect_out_has "   5 -> (1,0,1,0)"
checks=$((checks + 1))
[ "$(grep -c -- '->' "$tmp/out")" -eq 9 ] || fail "show XYZT 2x2x2: expected a header and 8 rows"

run show txyz --torus 2x2x1 --mode vn --ntasks 3
expect_rc 0
expect_out_has "   2 -> (1,0,0,0)"
checks=$((checks + 1))
grep -q -- '^   3 ->' "$tmp/out" && fail "show --ntasks 3 printed rank 3"

run show "$examples/ring-2x2x2.map" --torus 2x2x2
expect_rc 0
expect_out_has "   4 -> (0,1,1,0)"

run show XYZT --torus 2x2x2 --distance 3 4
expect_rc 0
expect_out "rank 3 (1,1,0,0) to rank 4 (0,0,1,0): 3 hops"
run show XYZT --torus 4x1x1 --distance 0 3 # the wraparound link
expect_out "rank 0 (0,0,0,0) to rank 3 (3,0,0,0): 1 hop"
run show XYZT --torus 5x1x1 --distance 0,2
expect_out "rank 0 (0,0,0,0) to rank 2 (2,0,0,0): 2 hops"
run show TXYZ --torus 2x1x1 --mode vn --distance 0 1 # same node
expect_out "rank 0 (0,0,0,0) to rank 1 (0,0,0,1): 0 hops"

# The folded ring: every ring neighbour, the closing pair too, is 1 hop away.
i=0
while [ $i -lt 8 ]; do
    run show "$examples/ring-2x2x2.map" --torus 2x2x2 --distance $i $(((i + 1) % 8))
    expect_rc 0
    expect_out_has ": 1 hop"
    i=$((i + 1))
done

run show "$maps/bad-dup.map" --torus 2x2x2
expect_rc 1
expect_err_has "$maps/bad-dup.map:7: (1,0,0,0) already used by rank 3 on line 5"
run show XYQT --torus 2x2x2
expect_rc 1
expect_err_has "'XYQT' is neither a permutation of XYZT nor a readable file"

# ---- examples -------------------------------------------------------------------------

run check "$examples/xyzt-2x2x2.map" --torus 2x2x2
expect_out "$examples/xyzt-2x2x2.map: ok (8 ranks on 2x2x2, 1 task per node)"
run check "$examples/txyz-4x2x1-vn.map" --torus 4x2x1 --mode vn
expect_out "$examples/txyz-4x2x1-vn.map: ok (16 ranks on 4x2x1, 2 tasks per node)"
run check "$examples/ring-2x2x2.map" --torus 2x2x2
expect_out "$examples/ring-2x2x2.map: ok (8 ranks on 2x2x2, 1 task per node)"
# The examples made by gen still match what gen writes.
run gen --torus 4x2x1 --order TXYZ --mode vn
grep -v '^#' "$tmp/out" >"$tmp/a"
grep -v '^#' "$examples/txyz-4x2x1-vn.map" >"$tmp/b"
checks=$((checks + 1))
cmp -s "$tmp/a" "$tmp/b" || fail "txyz-4x2x1-vn.map differs from gen's output"

# ---- usage ----------------------------------------------------------------------------

run --help
expect_rc 0
expect_out_has "Usage: torx-map check FILE"
run show -h
expect_rc 0
expect_out_has "--distance A B"

# args|what stderr must say
expect_usage <<EOF
|missing command
frob --torus 2x2x2|unknown command 'frob'
gen --torus 2x2x2 --frobnicate|--frobnicate
check --torus 2x2x2|check takes one FILE argument, got 0
check a.map b.map --torus 2x2x2|check takes one FILE argument, got 2
gen --torus 2x2x2 extra|gen takes no file or order argument
gen --torus 2x2x2 --ntasks many|--ntasks 'many': expected an integer
gen --torus 2x2x2 --ntasks 0|--ntasks '0': expected an integer 1..
gen --torus 2x2x2 --mode turbo|--mode 'turbo': expected heater, co or vn
gen --torus 2x2x2 --mode heater --tasks-per-node 2|--mode heater runs 1 task per node
gen --torus 2x2x2 --tasks-per-node 256|--tasks-per-node '256'
gen --torus 2x2x2 --distance 0 1|--distance is for show only
check x.map --torus 2x2x2 --order TXYZ|--order is for gen
show XYZT --torus 2x2x2 --distance 1|--distance needs two ranks
show XYZT --torus 2x2x2 --distance 1,x|--distance 'x'
gen --mode vn|needs --torus
gen --torus|requires an argument
EOF

run show XYZT --torus 2x2x2 --distance 0 8
expect_rc 2
expect_err_has "rank 8 is not in the job (ranks 0..7)"

run gen --torus 2y2
expect_rc 1
expect_err_has "--torus 2y2: TORX_TORUS='2y2'"

run gen --torus 2x2x2 -o "$tmp/no/such/dir/out.map"
expect_rc 1
expect_err_has "cannot create $tmp/no/such/dir/out.map"

finish
