#!/usr/bin/env bash
# Builds MPICH with the torx netmod (--with-device=ch4:torx) from MPICH's own
# source, overlaid with this repository's src/adi/, and installs it together
# with libtorx: one prefix holds mpicc, mpif90, mpiexec, libtorx (lib/,
# include/torx/), torx-map, the man pages (man torx) and the module file
# (share/modulefiles/torx/VERSION: module use PREFIX/share/modulefiles;
# module load torx).
#
#   scripts/build-mpich.sh [--mpich-src DIR|TARBALL] [--prefix DIR] [--jobs N]
#                          [--print-prefix] [-- EXTRA_CONFIGURE_ARGS...]
#
#   --mpich-src   an unpacked MPICH source tree or a release tarball (never
#                 modified: it is copied). Default: Debian's source package
#                 (`apt-get source mpich`, bookworm: 4.0.2), fetched once into
#                 $TORX_CACHE/src/.
#   --prefix      where to install. Default: $HOME/.local/torx (stable: the
#                 same for every build, so the module file and PATH stay put)
#   --jobs        make -j (default $TORX_JOBS or 2)
#   --print-prefix  print the install prefix this command line maps to, and exit
#
# Caching. Everything lives under $TORX_CACHE (default ~/.cache/torx):
#   src/                      the pristine MPICH source (apt-get source / tarball)
#   mpich-<ver>-<key>/src     a copy, overlaid and regenerated (autoreconf)
#   mpich-<ver>-<key>/build   the configured VPATH build tree
#   current-prefix            the prefix of the last successful build (test/mpi/run.sh)
# <key> hashes the MPICH version and source, the configure line (with the
# prefix) and the overlay's build files (src/adi/subconfigure.m4,
# src/adi/Makefile.mk). A run with the same key only re-runs `make`
# (incremental) and `make install`.
# The netmod sources are symlinked into the MPICH tree, so an edited
# src/adi/*.c or *.h rebuilds just what depends on it. libtorx is linked
# dynamically (libtorx.so is copied into PREFIX/lib on every run): a libtorx
# change needs no MPICH rebuild at all.
#
# libtorx itself comes from scripts/build.sh (build/, or $TORX_BUILD_DIR),
# configured with the same prefix (TORX_PREFIX), so that its tuning file is
# PREFIX/etc/torx.conf; its `make install` goes into the prefix through a
# staging directory, and only files whose content changed are replaced.
#
# torx's version: MPICH is configured with
# --with-custom-version-string="torx VERSION (COMMIT)", taken from the
# libtorx build (torx-map --version), so mpichversion and
# MPI_Get_library_version show it as "MPICH Custom Information" next to
# MPICH's version. The string is not part of the cache key: a new commit
# rewrites it in the build tree's mpichinfo.h, and one file recompiles.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
# Bump when the overlay/patch recipe below changes: it invalidates the cache.
RECIPE=5

cache=${TORX_CACHE:-$HOME/.cache/torx}
jobs=${TORX_JOBS:-2}
torx_build=${TORX_BUILD_DIR:-$top/build}
mpich_src=""
prefix=""
print_prefix=0
extra=()

log() { echo "build-mpich: $*"; }
die() {
    echo "build-mpich: error: $*" >&2
    exit 1
}
t0=$SECONDS
phase_t=$SECONDS
phase() {
    log "[$((SECONDS - phase_t)) s] $*"
    phase_t=$SECONDS
}

while [ $# -gt 0 ]; do
    case $1 in
    --mpich-src) mpich_src=${2:?--mpich-src needs DIR or TARBALL}; shift 2 ;;
    --mpich-src=*) mpich_src=${1#*=}; shift ;;
    --prefix) prefix=${2:?--prefix needs DIR}; shift 2 ;;
    --prefix=*) prefix=${1#*=}; shift ;;
    --jobs) jobs=${2:?--jobs needs N}; shift 2 ;;
    --jobs=*) jobs=${1#*=}; shift ;;
    --print-prefix) print_prefix=1; shift ;;
    --) shift; extra=("$@"); break ;;
    -h | --help) sed -n '2,30p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
    esac
done

mkdir -p "$cache/src"

# ---- 1. the pristine MPICH source --------------------------------------------
if [ -z "$mpich_src" ]; then
    pristine=$(find "$cache/src" -maxdepth 1 -type d -name 'mpich-[0-9]*' | sort -V | tail -n 1)
    if [ -z "$pristine" ]; then
        command -v dpkg-source >/dev/null || die "apt-get source needs dpkg-dev (scripts/install-deps.sh)"
        log "fetching Debian's MPICH source (apt-get source mpich) into $cache/src/"
        (cd "$cache/src" && apt-get source mpich) >"$cache/src/apt-source.log" 2>&1 ||
            die "apt-get source mpich failed (is a deb-src entry configured? scripts/install-deps.sh adds one); see $cache/src/apt-source.log"
        pristine=$(find "$cache/src" -maxdepth 1 -type d -name 'mpich-[0-9]*' | sort -V | tail -n 1)
        [ -n "$pristine" ] || die "apt-get source mpich left no mpich-* directory in $cache/src"
    fi
elif [ -d "$mpich_src" ]; then
    pristine=$(cd "$mpich_src" && pwd)
elif [ -f "$mpich_src" ]; then
    tb=$(cd "$(dirname "$mpich_src")" && pwd)/$(basename "$mpich_src")
    topdir=$(tar tf "$tb" | head -n 1 | cut -d/ -f1)
    [ -n "$topdir" ] || die "cannot read tarball $tb"
    tsum=$(sha256sum "$tb" | cut -c1-12)
    pristine=$cache/src/tarball-$tsum/$topdir
    if [ ! -d "$pristine" ]; then
        log "unpacking $tb"
        mkdir -p "$cache/src/tarball-$tsum"
        tar xf "$tb" -C "$cache/src/tarball-$tsum"
    fi
else
    die "--mpich-src $mpich_src: no such directory or file"
fi
[ -f "$pristine/configure.ac" ] && [ -f "$pristine/maint/gen_ch4_api.py" ] &&
    [ -d "$pristine/src/mpid/ch4/netmod" ] || die "$pristine does not look like an MPICH (>= 4) source tree"
version=$(sed -n 's/^m4_define(\[MPICH_VERSION_m4\],\[\([^]]*\)\].*/\1/p' "$pristine/maint/version.m4")
[ -n "$version" ] || die "cannot read the MPICH version from $pristine/maint/version.m4"

# ---- 2. the cache key ---------------------------------------------------------
# The configure line, except the prefix when it is the default (which itself
# depends on the key).
conf_common=(
    --with-device=ch4:torx
    --with-ch4-shmmods=none
    --with-datatype-engine=dataloop
    --with-pm=hydra
    --with-hwloc
    --enable-fortran=all
    --enable-romio
    # Shared libraries only: libtool would otherwise compile every one of
    # MPICH's files twice (PIC and not) for a libmpi.a nothing links.
    --disable-static
    FFLAGS=-fallow-argument-mismatch
    FCFLAGS=-fallow-argument-mismatch
)
# ccache (Debian's package, scripts/install-deps.sh) for the C and C++
# compilers: a rebuild, or a fresh build of the same MPICH in another cache
# directory (a new clone: the key holds the checkout's path), compiles only
# what changed. CCACHE_BASEDIR makes the paths under $cache relative in what
# ccache hashes, so the key directory's name does not matter. A machine that
# never built MPICH gains nothing. TORX_CCACHE=0 turns it off.
if [ "${TORX_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null 2>&1; then
    conf_common+=("CC=ccache gcc" "CXX=ccache g++")
    export CCACHE_BASEDIR=$cache
fi
conf_common+=(${extra[@]+"${extra[@]}"})
[ -n "$prefix" ] || prefix=$HOME/.local/torx
mkdir -p "$prefix" && prefix=$(cd "$prefix" && pwd)
key=$({
    echo "recipe $RECIPE"
    echo "mpich $version $pristine"
    echo "torx $top"
    printf '%s\n' "${conf_common[@]}"
    echo "prefix $prefix"
    cat "$top/src/adi/subconfigure.m4" "$top/src/adi/Makefile.mk"
} | sha256sum | cut -c1-12)
kdir=$cache/mpich-$version-$key
if [ $print_prefix = 1 ]; then
    echo "$prefix"
    exit 0
fi
# libtorx and its headers are installed into PREFIX (below) and MPICH is
# built against those copies: every MPICH object includes <torx/msg.h>
# (through the netmod's inline headers), so pointing at the live include/
# would rebuild all of MPICH whenever anyone touches a torx header; the
# copy changes only when a header's content does (and then a full rebuild
# is right).
conf=(--prefix="$prefix" "${conf_common[@]}" --with-torx-include="$prefix/include"
    --with-torx-lib="$prefix/lib")
log "MPICH $version from $pristine"
log "cache $kdir"
log "prefix $prefix"

# ---- 3. libtorx -----------------------------------------------------------------
if [ "${TORX_BUILD_DIR:-}" = "" ]; then
    TORX_PREFIX=$prefix "$top/scripts/build.sh" >"$cache/libtorx-build.log" 2>&1 || {
        tail -n 40 "$cache/libtorx-build.log" >&2
        die "scripts/build.sh failed (log: $cache/libtorx-build.log)"
    }
fi
[ -f "$torx_build/Makefile" ] || die "no $torx_build/Makefile (run scripts/build.sh)"
built_prefix=$(sed -n 's/^prefix = //p' "$torx_build/Makefile")
[ "$built_prefix" = "$prefix" ] ||
    die "$torx_build is configured with --prefix=$built_prefix, not $prefix: configure it with --prefix=$prefix (TORX_PREFIX=$prefix scripts/build.sh $torx_build ...)"
so=$(find "$torx_build/.libs" -maxdepth 1 -name 'libtorx.so.*' -type f 2>/dev/null | head -n 1)
[ -n "$so" ] || die "no $torx_build/.libs/libtorx.so.* (run scripts/build.sh)"
syms=$(nm -D --defined-only "$so")
grep -q ' T torx_init$' <<<"$syms" ||
    die "$so has no torx_init: the message layer (src/msglayer/) is not built into libtorx yet"
torx_version=$("$torx_build/torx-map" --version | sed -n 's/^torx-map (torx) //p')
[ -n "$torx_version" ] || die "$torx_build/torx-map --version gave no version"
custom="torx $torx_version"
conf+=("--with-custom-version-string=$custom")
# libtorx's `make install`, staged, then copied into the prefix file by file
# where the content differs: MPICH is built against PREFIX/include and
# PREFIX/lib, and every MPICH object includes <torx/msg.h> (through the
# netmod's inline headers), so a header reinstalled with a new timestamp
# would rebuild all of MPICH; a changed header does (and must).
stage=$cache/libtorx-stage
rm -rf "$stage"
make -C "$torx_build" install DESTDIR="$stage" >"$cache/libtorx-install.log" 2>&1 || {
    tail -n 30 "$cache/libtorx-install.log" >&2
    die "libtorx's make install failed (log: $cache/libtorx-install.log)"
}
[ -d "$stage$prefix" ] || die "libtorx's make install left nothing in $stage$prefix"
hdr_changed=()
while IFS= read -r -d '' rel; do
    rel=${rel#./}
    f=$stage$prefix/$rel
    dst=$prefix/$rel
    mkdir -p "$(dirname "$dst")"
    if [ -L "$f" ]; then
        [ "$(readlink "$dst" 2>/dev/null)" = "$(readlink "$f")" ] || ln -sfn "$(readlink "$f")" "$dst"
    elif ! cmp -s "$f" "$dst"; then
        cp -p "$f" "$dst.tmp" && mv -f "$dst.tmp" "$dst"
        case $rel in include/torx/*) hdr_changed+=("${rel#include/torx/}") ;; esac
    fi
done < <(cd "$stage$prefix" && find . \( -type f -o -type l \) -print0)
rm -rf "$stage"
[ ${#hdr_changed[@]} = 0 ] || [ ! -f "$kdir/build/.configured" ] ||
    log "torx headers changed (${hdr_changed[*]}): all of MPICH recompiles (the netmod is inline)"
phase "libtorx $torx_version installed into $prefix ($(basename "$so"), torx-map, man pages, module file)"

# ---- 4. copy, overlay, regenerate -------------------------------------------------
src=$kdir/src
nmdir=$src/src/mpid/ch4/netmod/torx
if [ ! -f "$kdir/.regen-done" ]; then
    log "copying the MPICH source into $src"
    rm -rf "$kdir/src" "$kdir/build" && mkdir -p "$kdir"
    cp -a "$pristine" "$src"
    phase "copied"

    # Register the netmod with automake.
    mk=$src/src/mpid/ch4/netmod/Makefile.mk
    grep -q 'netmod/torx/Makefile.mk' "$mk" ||
        echo 'include $(top_srcdir)/src/mpid/ch4/netmod/torx/Makefile.mk' >>"$mk"

    # The gen_ch4_api.py trap: it hardcodes __netmod_inline_<nm>__ numbers for
    # ofi/ucx/stubnm; without a torx entry NETMOD_INLINE==__netmod_inline_stubnm__
    # compares 0 with 0 and the build silently uses stubnm's stubs.
    python3 - "$src/maint/gen_ch4_api.py" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
if "__netmod_inline_torx__" not in s:
    a = 'print("#define __netmod_inline_ucx__   2", file=Out)'
    b = 'print("#include \\"../ucx/netmod_inline.h\\"", file=Out)'
    assert s.count(a) == 1 and s.count(b) == 1, "gen_ch4_api.py: unexpected layout"
    ind = s[:s.index(a)].rsplit("\n", 1)[1]
    s = s.replace(a, a + "\n" + ind + 'print("#define __netmod_inline_torx__   3", file=Out)')
    s = s.replace(b, b + "\n" + ind + 'print("#elif NETMOD_INLINE==__netmod_inline_torx__", file=Out)'
                  + "\n" + ind + 'print("#include \\"../torx/netmod_inline.h\\"", file=Out)')
    open(p, "w").write(s)
PY
    mkdir -p "$nmdir"
    for f in "$top"/src/adi/*; do ln -sfn "$f" "$nmdir/$(basename "$f")"; done

    log "regenerating (gen_subcfg_m4, gen_ch4_api.py, autoreconf)"
    # One && chain: set -e does not act inside a subshell on the left of ||,
    # so a failing step would otherwise be hidden by the next one's success.
    (
        cd "$src" &&
            ./maint/gen_subcfg_m4 &&
            python3 maint/gen_ch4_api.py &&
            autoreconf -if
    ) >"$kdir/regen.log" 2>&1 || {
        tail -n 40 "$kdir/regen.log" >&2
        die "regeneration failed (log: $kdir/regen.log)"
    }
    grep -q '__netmod_inline_torx__' "$src/src/mpid/ch4/netmod/include/netmod_impl.h" ||
        die "netmod_impl.h has no __netmod_inline_torx__ (gen_ch4_api.py patch failed)"
    grep -q 'src_mpid_ch4_netmod_torx' "$src/subsys_include.m4" ||
        die "gen_subcfg_m4 did not pick up src/mpid/ch4/netmod/torx/subconfigure.m4"
    touch "$kdir/.regen-done"
    phase "regenerated"
fi
# Refresh the symlinks: new files in src/adi/, removed ones.
for l in "$nmdir"/*; do [ -L "$l" ] && [ ! -e "$l" ] && rm -f "$l"; done
for f in "$top"/src/adi/*; do
    [ "$(readlink "$nmdir/$(basename "$f")" 2>/dev/null)" = "$f" ] || ln -sfn "$f" "$nmdir/$(basename "$f")"
done

# ch4's collective selection. MPICH 4.0.2's default (maint/tuning/coll/ch4/
# generic.json, compiled into csel_json_autogen.c) splits Bcast, Barrier,
# Allreduce and Reduce into node-level steps; with no shared-memory module
# every task looks node-local, so the netmod's hooks would receive
# comm->node_comm and the like instead of the user's communicator, and a
# 2-rank MPI_Allreduce ran as a reduce plus a bcast. torx's selection
# (src/adi/ch4_coll_selection.json) sends every intracommunicator
# collective straight to the netmod (torx_coll.h), which picks torx's
# algorithm or MPICH's own on the communicator the user called with.
# Idempotent: regenerated (one .c recompiles) only when the file differs.
# MPIR_CVAR_CH4_COLL_SELECTION_TUNING_JSON_FILE still overrides it.
sel=$src/maint/tuning/coll/ch4/generic.json
if ! cmp -s "$top/src/adi/ch4_coll_selection.json" "$sel"; then
    cp -f "$top/src/adi/ch4_coll_selection.json" "$sel"
    (cd "$src" && sh maint/tuning/coll/json_gen.sh) >"$kdir/json_gen.log" 2>&1 ||
        die "regenerating ch4's collective selection failed (log: $kdir/json_gen.log)"
    grep -q "MPIDI_coll_generic_json" "$src/src/mpi/coll/src/csel_json_autogen.c" ||
        die "json_gen.sh left no MPIDI_coll_generic_json in csel_json_autogen.c"
    log "installed torx's ch4 collective selection (src/adi/ch4_coll_selection.json)"
fi

# Fixes to MPICH itself, applied to the copy (idempotent, so an existing
# cache gets them too; only the patched .c recompiles). A source whose code
# differs (another MPICH version) is left alone, with a note.
#  1. MPIDIG (ch4/src/mpidig_pt2pt_callbacks.c, handle_unexp_cmpl): an
#     unexpected eager message whose data is still arriving when a receive
#     matches it (MPIDIG_REQ_BUSY, then MATCHED: typically MPI_Probe, then
#     MPI_Recv) is completed into the matching request's buffer, but that
#     request's status (source, tag, count, error) is never set. ofi and ucx
#     deliver eager AM data synchronously and never take this path; torx
#     delivers a message at its first packet (MPIDIG_AM_ATTR__IS_ASYNC), so
#     every eager message of more than one packet can (MPICH test
#     pt2pt/probe_unexp, torx test test/mpi/probe_unexp.c).
python3 - "$src/src/mpid/ch4/src/mpidig_pt2pt_callbacks.c" <<'PY' || die "patching MPICH failed"
import sys
p = sys.argv[1]
s = open(p).read()
mark = "/* torx build: status of the matching request */"
if mark not in s:
    a = ("    mpi_errno = MPIDIG_handle_unexpected(MPIDIG_REQUEST(match_req, buffer),\n"
         "                                         MPIDIG_REQUEST(match_req, count),\n"
         "                                         MPIDIG_REQUEST(match_req, datatype), rreq);\n"
         "    MPIR_ERR_CHECK(mpi_errno);\n")
    if s.count(a) == 1:
        s = s.replace(a, a + "    " + mark + "\n    match_req->status = rreq->status;\n")
        open(p, "w").write(s)
        print("build-mpich: patched handle_unexp_cmpl (status of a probed, still-arriving unexpected message)")
    else:
        print("build-mpich: note: handle_unexp_cmpl differs from MPICH 4.0.2's; not patched")
PY

#  2. Hydra (pm/pmiserv): when a process dies, hydra's proxy kills the rest
#     of the job, and mpiexec's "BAD TERMINATION" banner then shows the PID
#     of whichever process it reaps first, often a survivor it killed, and
#     never a rank. The proxy knows the dead process's rank: it now says
#     which rank died, and how, before it cleans up (once per proxy: the
#     processes it kills itself are not reported).
python3 - "$src/src/pm/hydra/pm/pmiserv/pmip_cb.c" "$src/src/pm/hydra/pm/pmiserv/pmip.c" <<'PY' || die "patching hydra failed"
import sys
cb, main = sys.argv[1], sys.argv[2]
mark = "/* torx build: name the dead rank */"
s = open(cb).read()
if mark not in s:
    a = ("            if (HYD_pmcd_pmip.user_global.auto_cleanup) {\n"
         "                /* kill all processes */\n"
         "                HYD_pmcd_pmip_send_signal(SIGKILL);\n")
    if s.count(a) == 1:
        s = s.replace(a, "            " + mark + "\n"
                      "            if (!HYD_pmcd_pmip.downstream.forced_cleanup)\n"
                      "                HYDU_dump_noprefix(stderr, \"[mpiexec] rank %d (pid %d) "
                      "ended without MPI_Finalize (its PMI connection closed); ending the job\\n\",\n"
                      "                                   HYD_pmcd_pmip.downstream.pmi_rank[pid],\n"
                      "                                   HYD_pmcd_pmip.downstream.pid[pid]);\n" + a)
        open(cb, "w").write(s)
        print("build-mpich: patched hydra's proxy to name a rank that ends without MPI_Finalize")
    else:
        print("build-mpich: note: hydra's pmip_cb.c differs from MPICH 4.0.2's; not patched")
s = open(main).read()
if mark not in s:
    a = ("                    if (WIFSIGNALED(ret_status)) {\n"
         "                        /* kill all processes */\n")
    if s.count(a) == 1:
        s = s.replace(a, a + "                        " + mark + "\n"
                      "                        if (!HYD_pmcd_pmip.downstream.forced_cleanup)\n"
                      "                            HYDU_dump_noprefix(stderr, \"[mpiexec] rank %d "
                      "(pid %d) was killed by signal %d; ending the job\\n\",\n"
                      "                                               HYD_pmcd_pmip.downstream.pmi_rank[i],\n"
                      "                                               pid, WTERMSIG(ret_status));\n")
        open(main, "w").write(s)
        print("build-mpich: patched hydra's proxy to name a rank killed by a signal")
    else:
        print("build-mpich: note: hydra's pmip.c differs from MPICH 4.0.2's; not patched")
PY

#  3. Hydra (utils/sock): a host that vanishes (power, link) sends no FIN,
#     so mpiexec keeps its control connection to that host's proxy open
#     forever and waits for it even after every other rank has aborted.
#     Connections mpiexec accepts now carry TCP keepalive (first probe
#     after 3 s idle, every 2 s) and TCP_USER_TIMEOUT (10 s): the kernel
#     drops a connection to a host that acknowledges nothing, and mpiexec
#     ends the job as when a proxy dies, naming the host it lost
#     (test/multihost/vanished-host.sh). torx's own watch (8 s,
#     src/packet/net/net_live.c) usually names the rank first.
python3 - "$src/src/pm/hydra/utils/sock/sock.c" "$src/src/pm/hydra/pm/pmiserv/pmiserv_cb.c" <<'PY' || die "patching hydra failed"
import sys
p = sys.argv[1]
s = open(p).read()
mark = "/* torx build: notice a vanished host */"
if mark not in s:
    a = ("accept error (%s)\\n\", MPL_strerror(errno));\n"
         "\n"
         "    /* Disable nagle */\n"
         "    if (setsockopt(*fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(int)) < 0)\n"
         "        HYDU_ERR_SETANDJUMP(status, HYD_SOCK_ERROR, \"cannot set TCP_NODELAY\\n\");\n")
    if s.count(a) == 1:
        s = s.replace(a, a + "\n    " + mark + "\n"
                      "    {\n"
                      "        int idle = 3, intvl = 2, cnt = 3;\n"
                      "        unsigned user_timeout_ms = 10000;\n"
                      "        if (setsockopt(*fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(int)) < 0 ||\n"
                      "            setsockopt(*fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(int)) < 0 ||\n"
                      "            setsockopt(*fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(int)) < 0 ||\n"
                      "            setsockopt(*fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(int)) < 0 ||\n"
                      "            setsockopt(*fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms,\n"
                      "                       sizeof user_timeout_ms) < 0)\n"
                      "            HYDU_ERR_SETANDJUMP(status, HYD_SOCK_ERROR, \"cannot set TCP keepalive\\n\");\n"
                      "    }\n")
        open(p, "w").write(s)
        print("build-mpich: patched hydra's sockets to notice a vanished host")
    else:
        print("build-mpich: note: hydra's sock.c differs from MPICH 4.0.2's; not patched")
p = sys.argv[2]
s = open(p).read()
mark = "/* torx build: name the lost host */"
if mark not in s:
    a = ("        status = HYDU_sock_read(fd, &hdr, sizeof(hdr), &count, &closed, HYDU_SOCK_COMM_MSGWAIT);\n"
         "        HYDU_ERR_POP(status, \"unable to read command from proxy\\n\");\n"
         "        HYDU_ASSERT(!closed, status);\n")
    if s.count(a) == 1:
        s = s.replace(a, "        status = HYDU_sock_read(fd, &hdr, sizeof(hdr), &count, &closed, HYDU_SOCK_COMM_MSGWAIT);\n"
                      "        " + mark + "\n"
                      "        if (status != HYD_SUCCESS || closed)\n"
                      "            HYDU_dump_noprefix(stderr, \"[mpiexec] lost the connection to the proxy on host %s; \"\n"
                      "                               \"ending the job\\n\", proxy->node->hostname);\n"
                      "        HYDU_ERR_POP(status, \"unable to read command from proxy\\n\");\n"
                      "        HYDU_ASSERT(!closed, status);\n")
        open(p, "w").write(s)
        print("build-mpich: patched hydra's mpiexec to name a host whose proxy it lost")
    else:
        print("build-mpich: note: hydra's pmiserv_cb.c differs from MPICH 4.0.2's; not patched")
PY

# ---- 5. configure --------------------------------------------------------------------
bdir=$kdir/build
if [ ! -f "$bdir/config.status" ] || [ ! -f "$bdir/.configured" ]; then
    log "configuring in $bdir (log: $kdir/configure.log)"
    rm -rf "$bdir" && mkdir -p "$bdir"
    printf '%q ' "$src/configure" "${conf[@]}" >"$kdir/configure-line"
    echo >>"$kdir/configure-line"
    (cd "$bdir" && "$src/configure" "${conf[@]}") >"$kdir/configure.log" 2>&1 || {
        tail -n 40 "$kdir/configure.log" >&2
        die "configure failed (log: $kdir/configure.log; config.log in $bdir)"
    }
    touch "$bdir/.configured"
    phase "configured"
fi

# torx's version in mpichversion and MPI_Get_library_version: configure
# substitutes it into src/include/mpichinfo.h (read by initinfo.c only);
# a later commit rewrites that line there. First bring the build system up
# to date (am--refresh): the overlay's m4 files are symlinks into this
# checkout, so a fresh clone makes them newer than the cached configure,
# and make's own `config.status --recheck` would rewrite mpichinfo.h with
# the string of the cache's first configure after our edit.
make -C "$bdir" am--refresh >"$kdir/refresh.log" 2>&1 || {
    tail -n 30 "$kdir/refresh.log" >&2
    die "regenerating MPICH's build system failed (log: $kdir/refresh.log)"
}
info=$bdir/src/include/mpichinfo.h
[ -f "$info" ] || die "configure left no $info"
want_line="#define MPICH_CUSTOM_STRING \"$custom\""
if [ "$(grep '^#define MPICH_CUSTOM_STRING ' "$info")" != "$want_line" ]; then
    sed -i "s|^#define MPICH_CUSTOM_STRING .*|$want_line|" "$info"
    log "MPICH's custom version string: $custom"
fi

# ---- 6. make, install -------------------------------------------------------------------
log "make -j$jobs (log: $kdir/make.log)"
make -C "$bdir" -j"$jobs" >"$kdir/make.log" 2>&1 || {
    grep -n -B2 -A6 'error' "$kdir/make.log" | head -n 60 >&2
    die "make failed (log: $kdir/make.log)"
}
phase "make done"
# install -C leaves a file whose contents did not change untouched, mtime
# included: mpi.h keeps its date across rebuilds, so programs built against
# it (MPICH's test suite, scripts/mpich-testsuite.sh) are not all rebuilt.
make -C "$bdir" -j"$jobs" install INSTALL="$(command -v install) -C -c" >"$kdir/install.log" 2>&1 || {
    tail -n 30 "$kdir/install.log" >&2
    die "make install failed (log: $kdir/install.log)"
}
phase "installed"
# <mpix.h>: torx's MPIX extensions (MPIX_Get_last_algorithm_name), beside mpi.h.
cmp -s "$top/src/adi/mpix.h" "$prefix/include/mpix.h" || cp -f "$top/src/adi/mpix.h" "$prefix/include/mpix.h"

# ---- 7. checks ----------------------------------------------------------------------------
dev=$("$prefix/bin/mpichversion" | sed -n 's/^MPICH Device:[[:space:]]*//p')
[ "$dev" = "ch4:torx" ] || die "$prefix/bin/mpichversion says device '$dev', not ch4:torx"
said=$("$prefix/bin/mpichversion" | sed -n 's/^MPICH Custom Information:[[:space:]]*//p')
[ "$said" = "$custom" ] || die "$prefix/bin/mpichversion says custom information '$said', not '$custom'"
libmpi=$(ls "$prefix"/lib/libmpi.so.* 2>/dev/null | head -n 1)
[ -n "$libmpi" ] || die "no $prefix/lib/libmpi.so.*"
dyn=$(readelf -d "$libmpi")
grep -q 'NEEDED.*libtorx\.so' <<<"$dyn" || die "$libmpi does not link libtorx.so"
# The netmod's own code is in libmpi (not stubnm's stubs): its symbols are
# hidden, so look in the static symbol table.
ntorx=$(nm "$libmpi" 2>/dev/null | grep -c 'MPIDI_TORX_' || true)
[ "${ntorx:-0}" -gt 0 ] || log "warning: no MPIDI_TORX_ symbols found in $libmpi (stripped?)"
echo "$prefix" >"$cache/current-prefix"
log "done in $((SECONDS - t0)) s: $prefix (device $dev)"
log "  $prefix/bin/mpicc, mpif90, mpiexec, torx-map; test with test/mpi/run.sh"
log "  module use $prefix/share/modulefiles && module load torx   (or PATH=$prefix/bin:\$PATH)"
