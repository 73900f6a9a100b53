#!/bin/sh
# The links' load of a torx-sim run, summed up from its --links table
# (docs/sim.md#link-load):
#
#   bench/sim/link-load.sh FILE
#
# One row per dimension, way and position along the line (position p: the
# link between coordinates p and p + 1, whichever way it carries; on a
# torus position X-1 is the wraparound link between X-1 and 0), over
# every line of the partition: links, packets per link (mean, least,
# most), busy time per link (mean and most, in simulated µs) and the time
# a link was free with packets waiting for room at its far end (mean).
# Busy and blocked are also given as a share of the span, from the first
# packet any of the group's links started to the last one any finished.
set -eu

if [ $# -ne 1 ] || [ "$1" = --help ] || [ "$1" = -h ]; then
    echo "usage: bench/sim/link-load.sh FILE (a torx-sim --links table)" >&2
    exit 2
fi
if [ ! -r "$1" ]; then
    echo "link-load.sh: cannot read $1" >&2
    exit 1
fi
if [ "$(head -n 1 "$1")" != "x,y,z,dim,way,packets,busy_us,blocked_us,first_us,last_us" ]; then
    echo "link-load.sh: $1 is not a torx-sim --links table (its first line differs)" >&2
    exit 1
fi

awk -F, '
FNR == 1 { next }
NF != 10 { printf "link-load.sh: %s line %d: %d fields, expected 10\n", FILENAME, FNR, NF > "/dev/stderr"; bad = 1; exit 1 }
NR == FNR { # the first pass: the extents, for the wraparound links of a torus
    if ($1 >= ext["x"]) ext["x"] = $1 + 1
    if ($2 >= ext["y"]) ext["y"] = $2 + 1
    if ($3 >= ext["z"]) ext["z"] = $3 + 1
    next
}
{
    pos = $4 == "x" ? $1 : $4 == "y" ? $2 : $3
    if ($5 == "-") pos = pos > 0 ? pos - 1 : ext[$4] - 1
    k = $4 " " $5 " " pos
    if (!(k in links)) { links[k] = 0; pmin[k] = $6; pmax[k] = $6; first[k] = $9; last[k] = $10; bmax[k] = 0 }
    links[k]++; packets[k] += $6; busy[k] += $7; blocked[k] += $8
    if ($6 < pmin[k]) pmin[k] = $6
    if ($6 > pmax[k]) pmax[k] = $6
    if ($7 > bmax[k]) bmax[k] = $7
    if ($9 < first[k]) first[k] = $9
    if ($10 > last[k]) last[k] = $10
}
END {
    if (bad) exit 1
    printf "%-3s %-3s %-3s %5s %9s %7s %7s %10s %10s %10s %6s %7s\n", "dim", "way", "pos", "links",
           "packets", "least", "most", "busy_us", "most_us", "span_us", "busy", "blocked"
    for (k in links) {
        span = last[k] - first[k]
        split(k, f, " ")
        share = span > 0 ? 100 / links[k] / span : 0
        printf "%-3s %-3s %-3d %5d %9.1f %7d %7d %10.1f %10.1f %10.1f %5.1f%% %6.1f%%\n", f[1], f[2], f[3],
               links[k], packets[k] / links[k], pmin[k], pmax[k], busy[k] / links[k], bmax[k], span,
               busy[k] * share, blocked[k] * share
    }
}' "$1" "$1" | { IFS= read -r head; echo "$head"; sort -k1,1 -k2,2r -k3,3n; }
