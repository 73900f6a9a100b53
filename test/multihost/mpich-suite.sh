#!/usr/bin/env bash
# test/multihost/mpich-suite.sh: MPICH's own test suite (the CI subset's
# pt2pt, coll and rma directories by default) run by torx's MPICH across
# emulated hosts (hosts.sh), TORX_DEVICE=ofi. The suite's runtests calls
# "mpiexec -n N prog": here that is a wrapper, in a prefix of links to torx's
# MPICH, that runs hydra in the set's front end with the hosts and the
# ns-ssh launcher (hosts.sh mpiexec). Not part of scripts/test-all.sh (it
# takes several minutes on 2 CPUs); exit status as
# scripts/mpich-testsuite.sh --check, 77 without root.
#
# Environment: MH_HOSTS (default 2), MH_SUITE_DIRS (default pt2pt,coll,rma),
# TORX_PREFIX (default ~/.cache/torx/current-prefix), MH_SUITE_ENV (extra
# -genv NAME VALUE words for every run, e.g. "TORX_CHAOS 3").
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source-path=SCRIPTDIR source=hosts.sh
. "$here/hosts.sh"
prefix=${TORX_PREFIX:-$(cat "$HOME/.cache/torx/current-prefix" 2>/dev/null || true)}
[[ -x $prefix/bin/mpiexec ]] || { echo "mpich-suite: no torx MPICH (run scripts/build-mpich.sh)" >&2; exit 2; }
mh_require

export TMH_NAME=tmhms$$
mh_init_vars
# One path for the wrapper prefix, so that scripts/mpich-testsuite.sh keeps
# one configured copy of the suite for it (its cache is keyed by the path).
wrap=${TORX_CACHE:-$HOME/.cache/torx}/multihost-prefix
rm -rf "$wrap"
mkdir -p "$wrap"
trap 'mh_down; rm -rf "$wrap"' EXIT
mh_up "${MH_HOSTS:-2}"

# The prefix: every file of torx's MPICH linked, but bin/mpiexec.
mkdir -p "$wrap/bin"
for d in "$prefix"/*; do [[ $(basename "$d") == bin ]] || ln -s "$d" "$wrap/"; done
for f in "$prefix"/bin/*; do ln -s "$f" "$wrap/bin/"; done
rm -f "$wrap/bin/mpiexec"
# More hosts than CPUs: the hosts share CPUs none of them can see, and
# waiting ranks must yield as on an oversubscribed host.
yield=""
(("${MH_HOSTS:-2}" > $(nproc))) && yield="-genv TORX_PROGRESS_YIELD 1"
cat >"$wrap/bin/mpiexec" <<EOF
#!/bin/sh
# runtests' mpiexec: torx's hydra across the emulated hosts of set $TMH_NAME
TMH_NAME=$TMH_NAME MPIEXEC=$prefix/bin/mpiexec exec "$here/hosts.sh" mpiexec \\
    -genv TORX_DEVICE ofi -genv TORX_VERBOSE -1 $yield ${MH_SUITE_ENV:+-genv $MH_SUITE_ENV} "\$@"
EOF
chmod +x "$wrap/bin/mpiexec"

"$root/scripts/mpich-testsuite.sh" --subset ci --dirs "${MH_SUITE_DIRS:-pt2pt,coll,rma}" \
    --maxnp 4 --mpich "$wrap" --check </dev/null
