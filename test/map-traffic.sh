#!/bin/sh
# Tests of torx-map eval and opt (mapping/torx-map.c, mapping/map_traffic.c):
# hop-bytes of known mappings, opt -> check -> eval round trips on several
# shapes (vn with t > 1 and jobs smaller than the torus included), every
# bad traffic-matrix fixture (exit 1, "FILE:LINE: reason" on stderr), and
# usage errors (exit 2).
#
# The tool is $TORX_MAP, else ./torx-map (the build directory, where make
# check runs). Fixtures: test/maps/ (traffic-*.txt, bad-traffic-*.txt) and
# mapping/examples/. Exits nonzero when any check fails.

# shellcheck disable=SC2034
name=map-traffic.sh # for map-lib.sh's messages
here=$(cd "$(dirname "$0")" && pwd) || exit 1
# shellcheck source=test/map-lib.sh
. "$here/map-lib.sh"

# hop_bytes LABEL: the hop_bytes= value of stdout's line starting "LABEL: ".
hop_bytes() {
    awk -v want="$1: hop_bytes=" 'index($0, want) == 1 {
        v = substr($0, length(want) + 1); sub(/ .*/, "", v); print v }' "$tmp/out"
}

# matrix N SEED FILE: a sparse, lopsided N-rank traffic matrix (each rank
# talks to its two ring neighbours and to a few pseudo-random ranks), rows
# written in reverse order as a job's tasks may append them.
matrix() {
    awk -v n="$1" -v seed="$2" 'BEGIN {
        x = seed
        for (s = 0; s < n; s++) {
            for (d = 0; d < n; d++) b[s, d] = 0
            b[s, (s + 1) % n] += 4096; b[s, (s + n - 1) % n] += 4096
            for (k = 0; k < 3; k++) {
                x = (x * 1103515245 + 12345) % 2147483648
                d = int(x / 65536) % n
                x = (x * 1103515245 + 12345) % 2147483648
                b[s, d] += int(x / 65536) % 20000
            }
        }
        print "# generated: " n " ranks, seed " seed
        for (s = n - 1; s >= 0; s--) {
            line = s
            for (d = 0; d < n; d++) line = line " " b[s, d]
            print line
        }
    }' >"$3"
}

# ---- eval: hop-bytes of known mappings -------------------------------------------

# The ring of 8 on 2x2x2: XYZT has two 3-hop steps (3 -> 4, 7 -> 0) and two
# 2-hop ones (1 -> 2, 5 -> 6), each both ways; the Gray-code fold is all 1-hop.
run eval "$maps/traffic-ring8.txt" XYZT "$examples/ring-2x2x2.map" --torus 2x2x2
expect_rc 0
expect_err_empty
expect_out "# $maps/traffic-ring8.txt: 8 ranks on 2x2x2, 1 task per node
XYZT: hop_bytes=28000 bytes=16000 hops_per_byte=1.750 local_bytes=0
$examples/ring-2x2x2.map: hop_bytes=16000 bytes=16000 hops_per_byte=1.000 local_bytes=0"

# Without mappings: XYZT; without a torus: the shape a job of 8 would take.
run eval "$maps/traffic-ring8.txt"
expect_rc 0
expect_out_has "8 ranks on 2x2x2, 1 task per node"
expect_out_has "XYZT: hop_bytes=28000 bytes=16000"

# Wraparound: on an 8x1x1 ring XYZT is the ring itself.
run eval "$maps/traffic-ring8.txt" XYZT --torus 8x1x1
expect_out_has "XYZT: hop_bytes=16000 bytes=16000 hops_per_byte=1.000"

# vn: TXYZ puts ranks 2k, 2k+1 on one node; half the ring's bytes stay local.
run eval "$maps/traffic-ring8.txt" TXYZ --torus 4x1x1 --mode vn
expect_rc 0
expect_out_has "TXYZ: hop_bytes=8000 bytes=16000 hops_per_byte=0.500 local_bytes=8000"

# A mapping of another size, and a bad one, among good ones: named, exit 1.
run eval "$maps/traffic-ring8.txt" XYZT "$maps/bad-dup.map" "$maps/bad-few.map" --torus 2x2x2
expect_rc 1
expect_out_has "XYZT: hop_bytes=28000"
expect_err_has "$maps/bad-dup.map:7: (1,0,0,0) already used by rank 3 on line 5"
expect_err_has "$maps/bad-few.map:6: file has 3 ranks, the job has 8"
run eval "$maps/traffic-ring8.txt" XYZT --torus 2x2x1
expect_rc 1
expect_err_has "the job's 8 tasks do not fit the torus 2x2x1"

# ---- opt -> check -> eval round trips ----------------------------------------------

# The ring: opt finds the 1-hop fold.
run opt "$maps/traffic-ring8.txt" --torus 2x2x2 -o "$tmp/ring.map"
expect_rc 0
expect_err_empty
expect_out_has "opt: hop_bytes=16000 bytes=16000 hops_per_byte=1.000"
run check "$tmp/ring.map" --torus 2x2x2
expect_out "$tmp/ring.map: ok (8 ranks on 2x2x2, 1 task per node)"

# ranks|torus|mode options|seed
while IFS='|' read -r n torus modeopt seed; do
    [ -n "$n" ] || continue
    m=$tmp/m$n.txt
    matrix "$n" "$seed" "$m"
    # shellcheck disable=SC2086 # modeopt is words
    run opt "$m" --torus "$torus" $modeopt -o "$tmp/opt.map"
    expect_rc 0
    expect_err_empty
    want=$(hop_bytes opt)
    xyzt=$(hop_bytes XYZT)
    checks=$((checks + 1))
    [ -n "$want" ] && [ -n "$xyzt" ] && [ "$want" -le "$xyzt" ] ||
        fail "opt $n on $torus $modeopt: '$want' hop-bytes, more than XYZT's '$xyzt'"
    # What opt writes, a job accepts: check with the job's size.
    # shellcheck disable=SC2086
    run check "$tmp/opt.map" --torus "$torus" $modeopt --ntasks "$n"
    expect_rc 0
    expect_out_has "ok ($n rank"
    expect_out_has " on $torus"
    # eval weighs the file as opt said.
    # shellcheck disable=SC2086
    run eval "$m" "$tmp/opt.map" --torus "$torus" $modeopt
    expect_rc 0
    checks=$((checks + 1))
    [ "$(hop_bytes "$tmp/opt.map")" = "$want" ] ||
        fail "eval of opt's map: $(hop_bytes "$tmp/opt.map") hop-bytes, opt said $want"
    # Deterministic: the same map on standard output (only the command
    # comment differs).
    # shellcheck disable=SC2086
    run opt "$m" --torus "$torus" $modeopt
    expect_rc 0
    grep -v '^#' "$tmp/out" >"$tmp/a"
    grep -v '^#' "$tmp/opt.map" >"$tmp/b"
    checks=$((checks + 1))
    cmp -s "$tmp/a" "$tmp/b" || fail "opt $n on $torus: stdout and -o differ"
done <<EOF
16|4x2x2||7
16|2x2x2|--mode vn|3
18|3x3x1|--mode vn|5
37|4x4x4||11
30|2x2x2|--tasks-per-node 4|13
12|3x2x2|--mode co|17
1|1x1x1||1
EOF

# A seed is a seed: another may give another map, each valid.
matrix 27 9 "$tmp/m27.txt"
run opt "$tmp/m27.txt" --torus 3x3x3 --seed 99 --moves 5000 -o "$tmp/s99.map"
expect_rc 0
run check "$tmp/s99.map" --torus 3x3x3
expect_rc 0
expect_out_has "ok (27 ranks on 3x3x3"
checks=$((checks + 1))
grep -q '^# seed 99, 5000 annealing moves tried' "$tmp/s99.map" || fail "opt's comment on seed"

# The file opt writes names how it was made and what each stage reached.
checks=$((checks + 1))
grep -q "^# torx-map opt .*--seed 99 .*$tmp/m27.txt" "$tmp/s99.map" ||
    fail "opt's file lacks its command line"
for stage in "# XYZT:" "# best order " "# greedy:" "# this map:"; do
    checks=$((checks + 1))
    grep -q "^$stage" "$tmp/s99.map" || fail "opt's file lacks '$stage'"
done

# ---- bad traffic matrices -----------------------------------------------------------

# file|"line: reason" expected on stderr after the path
while IFS='|' read -r file want; do
    [ -n "$file" ] || continue
    for cmd in eval opt; do
        run "$cmd" "$maps/$file" --torus 4x4x4
        expect_rc 1
        expect_err_has "$maps/$file$want"
        checks=$((checks + 1))
        [ ! -s "$tmp/out" ] || fail "$cmd $file printed on stdout"
    done
done <<EOF
bad-traffic-size.txt|:4: expected 4 fields (the source rank, then the bytes to each of 3 ranks, as the first row has), found 5
bad-traffic-negative.txt|:2: '-20' is negative: a byte count is a non-negative decimal integer
bad-traffic-notnum.txt|:3: '2e3' is not a number: a byte count is a non-negative decimal integer
bad-traffic-truncated.txt|:4: expected 4 fields (the source rank, then the bytes to each of 3 ranks, as the first row has), found 3; the file ends inside this line (cut short?)
bad-traffic-missing.txt|:3: rows for 2 of the 4 ranks; no row for ranks 1, 2
bad-traffic-dup.txt|:3: rank 1 already has a row, on line 2
bad-traffic-src.txt|:3: source rank 3 is not in the job (0..2
bad-traffic-huge.txt|:1: '99999999999999999999' is too large for a byte count
bad-traffic-comment.txt|:1: '#' after a row: a comment must be on a line of its own
bad-traffic-empty.txt|: no rows (the file is empty)
does-not-exist.txt|: cannot open the traffic matrix: No such file or directory
EOF

# A mapping file is not a traffic matrix: its lines read as rows of 3
# ranks, and the second "1 ..." line is a second row of rank 1.
run eval "$examples/ring-2x2x2.map" --torus 2x2x2
expect_rc 1
expect_err_has "already has a row"

# ---- usage -------------------------------------------------------------------------

# args|what stderr must say
expect_usage <<EOF
eval --torus 2x2x2|eval takes a MATRIX argument
opt --torus 2x2x2|opt takes one MATRIX argument, got 0
opt a.txt b.txt --torus 2x2x2|opt takes one MATRIX argument, got 2
opt a.txt --torus 2x2x2 --ntasks 4|--ntasks is not for opt
eval a.txt --torus 2x2x2 --ntasks 4|--ntasks is not for eval
eval a.txt --torus 2x2x2 --seed 3|--seed is for opt only
gen --torus 2x2x2 --moves 3|--moves is for opt only
opt a.txt --torus 2x2x2 --seed 0|--seed '0': expected an integer 1..
opt a.txt --torus 2x2x2 --moves lots|--moves 'lots': expected an integer
eval a.txt --torus 2x2x2 -o x.map|-o/--output is for gen and opt only
EOF

run opt "$maps/traffic-ring8.txt" --torus 2x2x2 -o "$tmp/no/such/dir/out.map"
expect_rc 1
expect_err_has "cannot create $tmp/no/such/dir/out.map"

finish
