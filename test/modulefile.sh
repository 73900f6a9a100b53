#!/bin/sh
# The module file: `make install` into a temporary prefix, then in a clean
# shell `module use PREFIX/share/modulefiles; module load torx` must put
# PREFIX/bin on PATH (torx-map, and MPICH's mpicc and mpiexec when
# scripts/build-mpich.sh installs into the prefix) and PREFIX/share/man on
# MANPATH, so that `man -w torx` finds torx(7) and the system's pages still
# show; `module unload torx` takes them away again. With every module
# system found: environment-modules, Lmod. Skipped (77) when neither is
# installed (Debian: environment-modules or lmod; scripts/install-deps.sh).
#
# The build tree is $TORX_BUILDDIR (make check sets it), else the current
# directory.

build=${TORX_BUILDDIR:-.}
ver=${TORX_PACKAGE_VERSION:?TORX_PACKAGE_VERSION (make check sets it)}
inits=""
for f in /usr/share/modules/init/sh /usr/share/lmod/lmod/init/sh; do
    [ -r "$f" ] && inits="$inits $f"
done
[ -n "$inits" ] || {
    echo "modulefile.sh: neither environment-modules nor Lmod is installed; skipped"
    exit 77
}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/torx-module-test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
prefix=$tmp/prefix

# A make started by make check must not join its jobserver.
if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL ${MAKE:-make} -C "$build" install prefix="$prefix" \
    >"$tmp/install.log" 2>&1; then
    echo "FAIL: make install prefix=$prefix:" >&2
    tail -n 20 "$tmp/install.log" >&2
    exit 1
fi
checks=0
failures=0
fail() {
    failures=$((failures + 1))
    echo "FAIL: $*" >&2
}
mf=$prefix/share/modulefiles/torx/$ver
checks=$((checks + 1))
[ -f "$mf" ] || fail "no module file $mf"
checks=$((checks + 1))
grep -q "$prefix/bin" "$mf" || fail "$mf does not name $prefix/bin"

for init in $inits; do
    checks=$((checks + 1))
    # A clean shell: the system's PATH, no MANPATH, no module loaded.
    env -i HOME="$tmp" PATH=/usr/local/bin:/usr/bin:/bin TERM=dumb sh -c '
        . "$1" >/dev/null 2>&1 || { echo "cannot source $1"; exit 1; }
        module use "$2/share/modulefiles" || exit 1
        module load torx || exit 1
        echo "PATH=$PATH"
        echo "MANPATH=${MANPATH-}"
        echo "torx-map=$(command -v torx-map)"
        echo "man-torx=$(man -w torx 2>/dev/null)"
        echo "man-ls=$(man -w ls 2>/dev/null)"
        echo "version=$(torx-map --version)"
        module unload torx || exit 1
        echo "after-PATH=$PATH"
        echo "after-torx-map=$(command -v torx-map)"
    ' sh "$init" "$prefix" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    get() { sed -n "s|^$1=||p" "$tmp/out"; }
    what="$(basename "$(dirname "$(dirname "$(dirname "$init")")")")"
    [ "$what" = share ] && what=environment-modules
    [ $rc = 0 ] || fail "$what: the shell failed (exit $rc): $(cat "$tmp/out" "$tmp/err")"
    case ":$(get PATH):" in *":$prefix/bin:"*) ;; *) fail "$what: PATH lacks $prefix/bin: $(get PATH)" ;; esac
    case ":$(get MANPATH):" in *":$prefix/share/man:"*) ;; *) fail "$what: MANPATH lacks $prefix/share/man: $(get MANPATH)" ;; esac
    [ "$(get torx-map)" = "$prefix/bin/torx-map" ] || fail "$what: torx-map is '$(get torx-map)', not the installed one"
    case $(get man-torx) in "$prefix/share/man/man7/torx.7"*) ;; *) fail "$what: man -w torx gives '$(get man-torx)'" ;; esac
    if [ -n "$(env -i PATH=/usr/bin:/bin man -w ls 2>/dev/null)" ]; then
        [ -n "$(get man-ls)" ] || fail "$what: with the module loaded, man -w ls finds nothing (the system's pages hidden)"
    fi
    case $(get version) in "torx-map (torx) $ver ("*) ;; *) fail "$what: torx-map --version says '$(get version)'" ;; esac
    case ":$(get after-PATH):" in *":$prefix/bin:"*) fail "$what: module unload left $prefix/bin on PATH" ;; esac
    echo "modulefile.sh: $what: PATH $prefix/bin, MANPATH '$(get MANPATH)', man -w torx: $(get man-torx)"
done

echo "modulefile.sh: $checks checks, $failures failed"
[ "$failures" -eq 0 ]
