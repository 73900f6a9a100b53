#!/usr/bin/env bash
# Builds torx out of tree (VPATH), so one source tree serves several builds.
#
#   scripts/build.sh                        build/ with --enable-werror
#   scripts/build.sh DIR [CONFIGURE_ARGS]   DIR configured with CONFIGURE_ARGS
#                                           (default --enable-werror), e.g.
#                                           build-asan --enable-sanitizers=asan
#
# The install prefix is $TORX_PREFIX, default $HOME/.local/torx: the one
# scripts/build-mpich.sh installs MPICH, libtorx, torx-map, the man pages and
# the module file into (it sets TORX_PREFIX to its --prefix). It is added as
# --prefix=... unless CONFIGURE_ARGS hold a --prefix; libtorx looks for its
# tuning file in that prefix's etc/ (configure's sysconfdir).
#
# Runs ./autogen.sh when configure is missing or older than configure.ac,
# Makefile.am or m4/; configures DIR when it has no config.status or was
# configured with other arguments; then make -j$TORX_JOBS (default 2). The
# compiler runs through ccache when it is installed (TORX_CCACHE=0: not).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

dir=${1:-build}
if [ $# -gt 1 ]; then
    shift
    args=("$@")
else
    args=(--enable-werror)
fi
jobs=${TORX_JOBS:-2}
prefix=${TORX_PREFIX:-$HOME/.local/torx}
case " ${args[*]:-} " in
*" --prefix="* | *" --prefix "*) ;;
*) args+=("--prefix=$prefix") ;;
esac

# ccache (Debian's package, scripts/install-deps.sh) for the compiler given
# as CC=... (default gcc): a rebuild compiles only what changed. Paths under
# the source tree are hashed relative to it (CCACHE_BASEDIR), so another
# clone's builds hit the same cache when the caller also sets
# CCACHE_NOHASHDIR (scripts/test-all.sh does, for its throw-away builds).
# TORX_CCACHE=0 turns it off.
if [ "${TORX_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null 2>&1; then
    cc_given=0
    for i in "${!args[@]}"; do
        case ${args[$i]} in
        "CC=ccache "*) cc_given=1 ;;
        CC=*) args[$i]="CC=ccache ${args[$i]#CC=}" cc_given=1 ;;
        esac
    done
    [ $cc_given = 1 ] || args+=("CC=ccache gcc")
    export CCACHE_BASEDIR=$top
fi
log() { echo "build.sh: $*"; }
die() {
    echo "build.sh: error: $*" >&2
    exit 1
}

if [ -f config.status ] || [ -f Makefile ]; then
    die "the source tree $top was configured in place; out-of-tree builds need a clean
source tree. Run 'make distclean' in $top (or delete config.status, config.h and
Makefile there), then run this script again."
fi

# ---- autogen ----
need_autogen=0
if [ ! -x configure ] || [ ! -f Makefile.in ]; then
    need_autogen=1
else
    for f in configure.ac Makefile.am m4/*.m4; do
        [ -f "$f" ] || continue
        case $f in m4/libtool.m4 | m4/lt*.m4) continue ;; esac
        if [ "$f" -nt configure ] || [ "$f" -nt Makefile.in ]; then
            need_autogen=1
            break
        fi
    done
fi
if [ $need_autogen = 1 ]; then
    log "running autogen.sh"
    ./autogen.sh
fi

# ---- configure ----
mkdir -p "$dir"
stamp="$dir/.torx-configure-args"
want="${args[*]:-}"
if [ ! -f "$dir/config.status" ] || [ ! -f "$dir/Makefile" ] || [ ! -f "$stamp" ] ||
    [ "$(cat "$stamp")" != "$want" ]; then
    log "configuring $dir/ (${want:-no options})"
    rm -f "$stamp"
    (cd "$dir" && "$top/configure" ${args[@]+"${args[@]}"}) || {
        echo "build.sh: configure failed; see $dir/config.log" >&2
        exit 1
    }
    printf '%s\n' "$want" >"$stamp"
fi

# ---- make ----
log "make -j$jobs in $dir/"
make -C "$dir" -j"$jobs"
log "$dir/ built"
