#!/bin/sh
# Tests of the devices as loadable modules (docs/packet-layer.md#device-modules):
#
# - libtorx.so links no network library (libfabric, UCX) and no simulator
#   (SimGrid);
# - each built module (torx-dev-NAME.so) exports its descriptor alone, and
#   every internal function it calls is one that libtorx.so exports (the
#   test programs export everything, so only this check sees a name missing
#   from Makefile.am's MODULE_API lists);
# - a job that asks for a device whose module is missing, is not a module,
#   or comes from another build fails at start-up with a message naming it,
#   and a job on one host (TORX_DEVICE=auto) needs no module at all.
#
# The programs are in $TORX_BUILDDIR (make check sets it, and
# TORX_TEST_PKGLIBDIR, the install directory of modules), else the current
# directory. Exits nonzero when any check fails.

name=modules.sh
build=${TORX_BUILDDIR:-.}
prog=$build/examples/msg_hello
label=msg_hello
prog_var=TORX_BUILDDIR
unset TORX_TORUS TORX_MODE TORX_MAPPING TORX_DEVICE TORX_CHAOS PMI_FD PMI_PORT PMI_RANK PMI_SIZE \
    PMI_ID
here=$(cd "$(dirname "$0")" && pwd) || exit 1
# shellcheck source=test/lib.sh
. "$here/lib.sh"

lib=$build/.libs/libtorx.so
modules=$(ls "$build"/.libs/torx-dev-*.so 2>/dev/null)

# check WHAT CONDITION...: one check, failed with WHAT unless CONDITION holds.
check() {
    what=$1
    shift
    checks=$((checks + 1))
    last=$what
    rc=0
    : >"$tmp/out"
    : >"$tmp/err"
    "$@" || fail "$what"
}

if [ -f "$lib" ]; then
    readelf -d "$lib" | awk '/NEEDED/ { print $NF }' >"$tmp/needed"
    check "libtorx.so links no network library and no simulator" \
        sh -c "! grep -E 'libfabric|libucp|libucs|libuct|libsimgrid|libns3' '$tmp/needed'"
    nm -D --defined-only "$lib" | awk '{ print $NF }' | sort >"$tmp/exported"
    for m in $modules; do
        nm -D --undefined-only "$m" | awk '$NF ~ /^torxp_/ { print $NF }' | sort >"$tmp/needs"
        comm -23 "$tmp/needs" "$tmp/exported" >"$tmp/missing"
        check "libtorx.so exports what $(basename "$m") calls (missing: $(tr '\n' ' ' <"$tmp/missing"))" \
            test ! -s "$tmp/missing"
        nm -D --defined-only "$m" | awk '$NF ~ /^torx/ { print $NF }' >"$tmp/mine"
        check "$(basename "$m") exports torxp_module alone (it exports: $(tr '\n' ' ' <"$tmp/mine"))" \
            test "$(cat "$tmp/mine")" = torxp_module
    done
else
    echo "$name: no $lib (a static-only build): the link checks are skipped" >&2
fi

# A job on one host loads no module, wherever the modules are.
TORX_DEVICE_PATH=$tmp/none run --fork 2
expect_rc 0
expect_out_has "rank 0: reply from rank 1: hello back"

# Devices whose modules cannot be used: the start-up error names the file.
mkdir "$tmp/bad" "$tmp/none"
devs="ofi ucx"
# sim where the build has it (elsewhere TORX_DEVICE=sim is refused by name)
[ -e "$build/.libs/torx-dev-sim.so" ] && devs="$devs sim"
for dev in $devs; do
    # After TORX_DEVICE_PATH the install directory is searched, which may
    # hold a module already (make install): then "not installed" cannot be.
    if [ -e "${TORX_TEST_PKGLIBDIR:-/nonexistent}/torx-dev-$dev.so" ]; then
        echo "$name: $TORX_TEST_PKGLIBDIR holds torx-dev-$dev.so: the missing-module check is skipped" >&2
    else
        TORX_DEVICE=$dev TORX_DEVICE_PATH=$tmp/none:$tmp/none2 run --fork 2
        last="TORX_DEVICE=$dev TORX_DEVICE_PATH=(empty directories) $last"
        expect_rc 1
        expect_err_has "the $dev device is not installed: no torx-dev-$dev.so in $tmp/none:$tmp/none2 (TORX_DEVICE_PATH) or "
    fi

    echo "not a library" >"$tmp/bad/torx-dev-$dev.so"
    TORX_DEVICE=$dev TORX_DEVICE_PATH=$tmp/bad run --fork 2
    last="TORX_DEVICE=$dev TORX_DEVICE_PATH=(a text file as the module) $last"
    expect_rc 1
    expect_err_has "cannot load the $dev device: $tmp/bad/torx-dev-$dev.so"
done

# A module of another device under this one's name, then the real one.
set -- $modules
if [ $# -ge 1 ]; then
    real=$(basename "$1" .so)
    real=${real#torx-dev-}
    other=ofi
    [ "$real" = ofi ] && other=ucx
    cp "$1" "$tmp/bad/torx-dev-$other.so"
    TORX_DEVICE=$other TORX_DEVICE_PATH=$tmp/bad run --fork 2
    last="TORX_DEVICE=$other TORX_DEVICE_PATH=($real's module as $other's) $last"
    expect_rc 1
    expect_err_has "torx-dev-$other.so holds the $real device, not $other"

    TORX_DEVICE=$real TORX_DEVICE_PATH=$build/.libs run --fork 2
    last="TORX_DEVICE=$real TORX_DEVICE_PATH=$build/.libs $last"
    expect_rc 0
    expect_out_has "rank 1: greeting from rank 0: hello"
fi

finish
