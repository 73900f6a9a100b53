# test/map-lib.sh: what test/map-tool.sh and test/map-traffic.sh share,
# sourced by both after setting here and name (the script's name, for
# messages): the tool ($TORX_MAP, else ./torx-map), the fixture directories,
# a clean TORX_* environment, test/lib.sh's run and expect helpers, and
# expect_usage.
# shellcheck shell=sh
# Sets maps and examples for the caller, reads its here and name:
# shellcheck disable=SC2034,SC2154
prog=${TORX_MAP:-./torx-map}
label=torx-map
prog_var=TORX_MAP
maps=$here/maps
examples=$here/../mapping/examples

# The tool falls back on these like a job does; the tests give every value.
unset TORX_TORUS TORX_MODE TORX_MAPPING TORX_CORES_PER_NODE

# shellcheck source=test/lib.sh
. "$here/lib.sh"

# expect_usage: for each line "ARGS|TEXT" of stdin, torx-map ARGS exits 2
# with TEXT and the usage on stderr.
expect_usage() {
    while IFS='|' read -r args want; do
        # shellcheck disable=SC2086 # args are words
        run $args
        expect_rc 2
        expect_err_has "$want"
        expect_err_has "Usage: torx-map"
    done
}
