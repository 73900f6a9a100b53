#!/bin/sh
# torx's version where a user sees it: `torx-map --version` prints
# "torx-map (torx) VERSION (COMMIT)", VERSION being configure.ac's (make check
# passes it as TORX_PACKAGE_VERSION) and COMMIT the source tree's git short
# hash when the tree is a git checkout, else the tarball's .commit, else
# "unknown"; `--version` ends with status 0 and shows in --help.
#
# torx-map is $TORX_MAP (make check sets it), else ./torx-map.

map=${TORX_MAP:-./torx-map}
here=$(cd "$(dirname "$0")" && pwd) || exit 1
top=$here/..
checks=0
failures=0
check() { # check DESCRIPTION CONDITION...
    what=$1
    shift
    checks=$((checks + 1))
    if ! "$@"; then
        failures=$((failures + 1))
        echo "FAIL: $what" >&2
    fi
}

ver=${TORX_PACKAGE_VERSION:-$(sed -n 's/^AC_INIT(\[torx\], \[\([^]]*\)\].*/\1/p' "$top/configure.ac")}
out=$("$map" --version)
rc=$?
echo "torx-map --version: $out (exit $rc)"
check "torx-map --version exits 0" test "$rc" = 0
check "configure.ac's version is MAJOR.MINOR.PATCH ('$ver')" \
    sh -c 'printf "%s\n" "$1" | grep -Eq "^[0-9]+\.[0-9]+\.[0-9]+$"' - "$ver"
check "the output is 'torx-map (torx) $ver (COMMIT)'" \
    sh -c 'printf "%s\n" "$1" | grep -Eq "^torx-map \(torx\) $2 \([A-Za-z0-9._-]+\)$"' - "$out" "$ver"
commit=$(printf '%s\n' "$out" | sed -n 's/.*(\([^()]*\))$/\1/p')
if [ -f "$top/.commit" ]; then
    want=$(sed -n 1p "$top/.commit")
    check "the commit is the tarball's .commit ($want), not '$commit'" test "$commit" = "$want"
elif [ -e "$top/.git" ] && command -v git >/dev/null 2>&1; then
    want=$(git -C "$top" rev-parse --short HEAD)
    check "the commit is the checkout's HEAD ($want), not '$commit'" test "$commit" = "$want"
else
    check "the commit of a tree without git or .commit is 'unknown', not '$commit'" \
        test "$commit" = unknown
fi
check "--help names --version" sh -c '"$1" --help | grep -q -- "--version"' - "$map"

echo "version.sh: $checks checks, $failures failed"
[ "$failures" -eq 0 ]
