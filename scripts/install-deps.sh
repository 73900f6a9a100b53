#!/usr/bin/env bash
# Installs what torx needs to build, test and benchmark on Debian bookworm.
#
#   scripts/install-deps.sh
#
# Idempotent, non-interactive, needs no terminal. When every package below is
# already installed and the deb-src entry exists, apt is not touched at all
# (this keeps CI fast on a machine that already has them).
#
# Besides the packages it makes sure a deb-src entry for the release exists
# (/etc/apt/sources.list.d/torx-deb-src.list), mirroring the machine's own
# Debian sources, so that `apt-get source mpich` works for the MPICH build.
#
# Environment:
#   TORX_SKIP_DEPS=1   do nothing (for machines managed by other means)
set -euo pipefail

if [ "${TORX_SKIP_DEPS:-0}" = 1 ]; then
    echo "install-deps: TORX_SKIP_DEPS=1, skipping"
    exit 0
fi

PACKAGES=(
    # toolchain and autotools
    build-essential autoconf automake libtool pkg-config gfortran
    # libraries torx builds against; Check for the unit tests
    check libsubunit-dev libhwloc-dev hwloc libfabric-dev libucx-dev
    # test/nocma-run.c: a seccomp filter that forbids cross-memory attach
    libseccomp-dev
    # tools for tests, benchmarks and plots; clang and its runtimes for the
    # libFuzzer harnesses (test/fuzz/, the fuzz stage of scripts/test-all.sh)
    valgrind gnuplot-nox python3 clang libclang-rt-14-dev
    # fi_pingpong: libfabric's own latency, the ofi device's floor (bench/run-ofi-cost.sh)
    libfabric-bin
    # compiler cache for the MPICH build (scripts/build-mpich.sh)
    ccache
    # the MPI peers torx is benchmarked against. Both provide the mpicc
    # alternative: always use mpicc.mpich / mpiexec.mpich and
    # mpicc.openmpi / mpirun.openmpi.
    mpich libmpich-dev openmpi-bin libopenmpi-dev
    # apt-get source mpich (the MPICH build with the torx netmod)
    dpkg-dev
    # test/multihost: emulated hosts (ip netns, veth, bridge, tc; unshare,
    # nsenter; pgrep, ps; nft for a lossy link where the kernel lacks netem)
    iproute2 util-linux procps nftables
    # the module file (PREFIX/share/modulefiles/torx/VERSION) and its test
    # (test/modulefile.sh; Debian's lmod, which replaces environment-modules,
    # passes it too); man-db for `man torx` and groff for the man pages' check
    environment-modules man-db groff-base
    # the sim device (src/packet/sim/): SimGrid's S4U API, and its C++ compiler
    libsimgrid-dev g++
)

APT_ETC=${TORX_APT_ETC:-/etc/apt} # overridable only to test this script
DEB_SRC_LIST=$APT_ETC/sources.list.d/torx-deb-src.list

log() { echo "install-deps: $*"; }
die() {
    echo "install-deps: error: $*" >&2
    exit 1
}

SUDO=()
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "not root and no sudo: run this script as root"
    SUDO=(sudo -n)
fi

export DEBIAN_FRONTEND=noninteractive
APT_OPTS=(-y -q -o DPkg::Lock::Timeout=600 -o Dpkg::Options::=--force-confdef
          -o Dpkg::Options::=--force-confold)

# --- deb-src entry ------------------------------------------------------------

codename=bookworm
if [ -r /etc/os-release ]; then
    # shellcheck disable=SC1091
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
fi

# Prints one-line "deb-src" entries mirroring every enabled "deb" source of
# this release, from one-line .list files and deb822 .sources files. Third
# party repositories (suites not named after the release) are left out.
# Prints "HAVE-DEB-SRC" if the machine already has a deb-src for the release.
deb_src_lines()
{
    local files=() f
    [ -f "$APT_ETC/sources.list" ] && files+=("$APT_ETC/sources.list")
    for f in "$APT_ETC"/sources.list.d/*.list "$APT_ETC"/sources.list.d/*.sources; do
        [ -f "$f" ] && [ "$f" != "$DEB_SRC_LIST" ] && files+=("$f")
    done
    [ ${#files[@]} -gt 0 ] || return 0
    awk -v rel="$codename" '
        function relsuite(s) { return s == rel || index(s, rel "-") == 1 }
        function emit(type, opts, uri, suite, comps) {
            if (!relsuite(suite)) return
            if (type == "deb-src") { have = 1; return }
            line = "deb-src " (opts != "" ? "[" opts "] " : "") uri " " suite " " comps
            if (!(line in seen)) { seen[line] = 1; out[n++] = line }
        }
        function flush(   i, j, k, nt, nu, ns, t, u, s, opts) {
            if (st_types != "" && tolower(st_enabled) != "no") {
                nt = split(st_types, t, " "); nu = split(st_uris, u, " ")
                ns = split(st_suites, s, " ")
                opts = (st_signed ~ /^\// ? "signed-by=" st_signed : "")
                for (i = 1; i <= nt; i++)
                    for (j = 1; j <= nu; j++)
                        for (k = 1; k <= ns; k++)
                            emit(t[i], opts, u[j], s[k], st_comps)
            }
            st_types = st_uris = st_suites = st_comps = st_signed = st_enabled = ""
        }
        FNR == 1 { flush(); deb822 = (FILENAME ~ /\.sources$/) }
        /^[ \t]*#/ { next }
        deb822 {
            if ($0 ~ /^[ \t]*$/) { flush(); next }
            if ($0 ~ /^[ \t]/) next          # continuation (inline key): ignore
            key = tolower($1); sub(/:$/, "", key)
            val = $0; sub(/^[^:]*:[ \t]*/, "", val)
            if (key == "types") st_types = val
            else if (key == "uris") st_uris = val
            else if (key == "suites") st_suites = val
            else if (key == "components") st_comps = val
            else if (key == "signed-by") st_signed = val
            else if (key == "enabled") st_enabled = val
            next
        }
        $1 == "deb" || $1 == "deb-src" {
            type = $1; opts = ""; i = 2
            if ($2 ~ /^\[/) {                 # [ option=value ... ]
                opts = $0; sub(/^[^[]*\[[ \t]*/, "", opts); sub(/[ \t]*\].*$/, "", opts)
                while (i <= NF && $i !~ /\]$/) i++
                i++
            }
            uri = $i; suite = $(i + 1); comps = ""
            for (j = i + 2; j <= NF; j++) comps = comps (comps == "" ? "" : " ") $j
            emit(type, opts, uri, suite, comps)
        }
        END {
            flush()
            if (have) { print "HAVE-DEB-SRC"; exit }
            for (i = 0; i < n; i++) print out[i]
        }
    ' "${files[@]}"
}

need_update=0
src=$(deb_src_lines)
if [ "$src" = HAVE-DEB-SRC ]; then
    log "deb-src entries for $codename already configured"
else
    [ -n "$src" ] || src="deb-src http://deb.debian.org/debian $codename main"
    want=$(printf '# Written by torx scripts/install-deps.sh: source packages (apt-get source mpich)\n%s\n' "$src")
    if [ ! -f "$DEB_SRC_LIST" ] || [ "$(cat "$DEB_SRC_LIST")" != "$want" ]; then
        log "writing $DEB_SRC_LIST"
        printf '%s\n' "$want" | "${SUDO[@]}" tee "$DEB_SRC_LIST" >/dev/null
        need_update=1
    else
        log "$DEB_SRC_LIST is up to date"
    fi
fi

# --- packages -----------------------------------------------------------------

missing=()
for p in "${PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
    [ "${status:0:2}" = ii ] || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ] && [ $need_update = 0 ]; then
    log "all ${#PACKAGES[@]} packages already installed; apt not needed"
else
    # apt-get update can race with another apt run holding the lists lock:
    # retry a few times rather than fail the whole build.
    for attempt in 1 2 3 4 5; do
        if "${SUDO[@]}" apt-get "${APT_OPTS[@]}" update </dev/null; then
            break
        fi
        [ $attempt -lt 5 ] || die "apt-get update failed 5 times"
        log "apt-get update failed (attempt $attempt), retrying in 15 s"
        sleep 15
    done
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing: ${missing[*]}"
        "${SUDO[@]}" apt-get "${APT_OPTS[@]}" install "${PACKAGES[@]}" </dev/null
    fi
fi

# --- verification -------------------------------------------------------------

bad=()
for p in "${PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
    [ "${status:0:2}" = ii ] || bad+=("$p")
done
[ ${#bad[@]} -eq 0 ] || die "packages still not installed: ${bad[*]}"

for tool in autoreconf libtoolize pkg-config gcc clang gfortran mpicc.mpich mpiexec.mpich \
    mpicc.openmpi mpirun.openmpi gnuplot valgrind python3 dpkg-source; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found after installing"
done
pkg-config --exists 'check >= 0.11' || die "pkg-config cannot find check"
pkg-config --exists 'hwloc >= 2.0' || die "pkg-config cannot find hwloc >= 2.0"
# configure builds the ofi device (and its tests) only when it finds this;
# without it they would silently drop out of the build and of make check.
pkg-config --exists 'libfabric >= 1.11' || die "pkg-config cannot find libfabric >= 1.11"

log "ok: gcc $(gcc -dumpfullversion), check $(pkg-config --modversion check)," \
    "hwloc $(pkg-config --modversion hwloc), mpich $(dpkg-query -W -f='${Version}' mpich)," \
    "openmpi $(dpkg-query -W -f='${Version}' openmpi-bin)"
