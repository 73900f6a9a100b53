#!/bin/sh
# The man pages: torx(7) and torx-map(1) (man/, written by hand) and the
# section-3 pages made from the public headers' comments (man/man3/ of the
# build tree, scripts/gen-man3.awk). Each renders without a warning
# (groff -man -ww -z); there is a page for every name of every NAME comment
# in include/torx/*.h, each with the #include and its declaration in
# SYNOPSIS; and `man -l` renders torx_send(3).
#
# Skipped (77) without groff. The build tree is $TORX_BUILDDIR (make check
# sets it), else the current directory.

here=$(cd "$(dirname "$0")" && pwd) || exit 1
top=$here/..
build=${TORX_BUILDDIR:-.}
command -v groff >/dev/null 2>&1 || {
    echo "man-pages.sh: no groff (Debian: groff-base); skipped"
    exit 77
}
checks=0
failures=0
fail() {
    failures=$((failures + 1))
    echo "FAIL: $*" >&2
}

man3=$build/man/man3
[ -d "$man3" ] || {
    echo "man-pages.sh: no $man3 (run make)" >&2
    exit 1
}
for p in "$top/man/torx.7" "$top/man/torx-map.1" "$man3"/*.3; do
    checks=$((checks + 1))
    w=$(groff -man -ww -z "$p" 2>&1)
    [ -z "$w" ] || fail "$p: groff warns: $w"
done

# Every name in a NAME comment of the headers (the generated version.h too,
# once: an in-tree build makes it among the others) has its page, whose
# SYNOPSIS holds the #include and a declaration.
gen_version=$build/include/torx/version.h
[ "$gen_version" -ef "$top/include/torx/version.h" ] && gen_version=
names=$(cat "$top"/include/torx/*.h ${gen_version:+"$gen_version"} | awk '
    /^\/\* NAME[ \t]/ { t = $0; sub(/^\/\* NAME[ \t]+/, "", t); going = 1 }
    going && !/^\/\* NAME/ { l = $0; sub(/^ \*[ \t]*/, "", l); t = t " " l }
    going && index(t, " - ") {
        t = substr(t, 1, index(t, " - ") - 1); gsub(/[ ,]+/, "\n", t); print t; going = 0 }')
n=0
for f in $names; do
    n=$((n + 1))
    checks=$((checks + 1))
    p=$man3/$f.3
    if [ ! -f "$p" ]; then
        fail "no page $p"
        continue
    fi
    syn=$(sed -n '/^\.SH SYNOPSIS/,/^\.SH DESCRIPTION/p' "$p")
    printf '%s\n' "$syn" | grep -q '^\.B #include <torx/[a-z]*\.h>$' || fail "$p: no #include in SYNOPSIS"
    printf '%s\n' "$syn" | grep -Eq "(^|[^A-Za-z0-9_])$f[ ]*\(" || fail "$p: SYNOPSIS does not declare $f"
done
pages=$(ls "$man3" | grep -c '\.3$')
checks=$((checks + 1))
[ "$pages" = "$n" ] || fail "$pages pages in $man3 for $n names"
[ "$n" -gt 50 ] || fail "only $n names found in the headers' NAME comments"

checks=$((checks + 1))
if command -v man >/dev/null 2>&1; then
    out=$(MANWIDTH=80 man -l "$man3/torx_send.3" 2>&1)
    printf '%s\n' "$out" | grep -q 'torx_send - send an active message' &&
        printf '%s\n' "$out" | grep -q 'torx_status_t torx_send(' ||
        fail "man -l torx_send.3 does not show the NAME line and the declaration: $out"
fi

echo "man-pages.sh: $n section-3 pages; $checks checks, $failures failed"
[ "$failures" -eq 0 ]
