#!/usr/bin/env bash
# Placement-matched comparison of MPI candidates (torx settings, torx library
# builds, the peers) on one program and a few sizes.
#
# Why: the two vCPUs of these VMs sit either near each other (a cache-line
# handoff of 30-60 ns) or far apart (150+ ns), and the placement flips
# within seconds. A ratio between two runs that landed in different
# placements measures the hypervisor, not the code. So every run here is
# bracketed by a handoff probe (bench/floors with FLOORS_ONLY=handoff, a few
# milliseconds), the candidates run one after another in rotation, and the
# summary compares candidates only within one placement: runs whose two
# probes were both near, and runs whose two probes were both far. Runs that
# changed placement are counted and left out.
#
# Usage: bench/run-placement-ab.sh
#   CANDIDATES  space-separated, the first is the reference of the ratios
#               (default "torx openmpi mpich"):
#                 torx                torx MPICH as installed
#                 torx:VAR=VAL:...    the same with -genv VAR VAL ...
#                 lib=DIR[:VAR=VAL]   torx MPICH with DIR/libtorx.so.0 first
#                                     (LD_LIBRARY_PATH): another libtorx build
#                 mpich, openmpi      Debian's MPICH (ch4:ucx), Open MPI
#   PROG        mpi_latency, mpi_bw or mpi_bibw (default mpi_bw)
#   SIZES       message sizes, comma-separated (default 8,1024)
#   ARGS        more arguments for PROG (default "-n 300": short runs, so
#               that many land inside one placement)
#   TRIALS      runs in all, rotating over the candidates (default 300)
#   FAR_NS      a probe above this many ns is "far" (default 110)
#   TORX_PREFIX torx MPICH install prefix (default ~/.cache/torx/current-prefix)
#   TORX_BUILD  torx build directory with bench/floors (default ./build)
#   OUT         raw lines kept here (default: a temporary file)
#
# Prints the raw line of every run ("probe_before probe_after candidate
# size=figure ...") and then, per placement, the median figure of each
# candidate at each size over its runs in that placement, with the run
# count and the ratio to the first candidate's median.
set -u
bench_name=run-placement-ab
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=bench/lib.sh
. "$here/lib.sh"

candidates=${CANDIDATES:-torx openmpi mpich}
prog=${PROG:-mpi_bw}
sizes=${SIZES:-8,1024}
args=${ARGS:--n 300}
trials=${TRIALS:-300}
far_ns=${FAR_NS:-110}
build=${TORX_BUILD:-$root/build}
prefix=$(bench_torx_prefix)
bench_check_counts TRIALS:trials FAR_NS:far_ns
case $prog in
mpi_latency | mpi_bw | mpi_bibw) ;;
*) echo "$bench_name: PROG='$prog' is not mpi_latency, mpi_bw or mpi_bibw" >&2; exit 2 ;;
esac
if [[ -z $prefix || ! -x $prefix/bin/mpicc || ! -x $prefix/bin/mpiexec ]]; then
    echo "$bench_name: no torx MPICH at '${prefix:-?}'; run scripts/build-mpich.sh or set TORX_PREFIX" >&2
    exit 2
fi
floors=$(bench_find_prog "$build" floors "build it first (scripts/build.sh), or set TORX_BUILD") || exit 2

work=$(mktemp -d "${TMPDIR:-/tmp}/torx-placement.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
out=${OUT:-$work/raw.txt}
: >"$out" || exit 2

# The program, built from the one source with each MPI's mpicc that is used.
declare -A mpicc=([torx]="$prefix/bin/mpicc" [mpich]=mpicc.mpich [openmpi]=mpicc.openmpi)
impl_of() { case $1 in torx* | lib=*) echo torx ;; *) echo "$1" ;; esac; }
for c in $candidates; do
    impl=$(impl_of "$c")
    if [[ -z ${mpicc[$impl]:-} ]]; then
        echo "$bench_name: unknown candidate '$c'" >&2
        exit 2
    fi
    [[ -x $work/$impl/$prog ]] && continue
    mkdir -p "$work/$impl" || exit 2
    if ! "${mpicc[$impl]}" -O2 -std=c11 -o "$work/$impl/$prog" "$here/$prog.c" >"$work/cc.log" 2>&1; then
        echo "$bench_name: building $prog with ${mpicc[$impl]} failed:" >&2
        cat "$work/cc.log" >&2
        exit 2
    fi
done

# The command line of candidate $1 into the array argv.
make_argv() {
    local c=$1 kv genv=() env=()
    local opts=${c#*:}
    [[ $opts == "$c" ]] && opts=
    case $c in
    lib=*)
        local dir=${c%%:*}
        dir=${dir#lib=}
        env=(env "LD_LIBRARY_PATH=$dir")
        genv=(-genv LD_LIBRARY_PATH "$dir") ;;
    esac
    for kv in ${opts//:/ }; do genv+=(-genv "${kv%%=*}" "${kv#*=}"); done
    case $c in
    torx* | lib=*) argv=("${env[@]}" "$prefix/bin/mpiexec" -n 2 -bind-to core "${genv[@]}" "$work/torx/$prog") ;;
    mpich) argv=(mpiexec.mpich -n 2 -bind-to core "$work/mpich/$prog") ;;
    openmpi) argv=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
                   mpirun.openmpi -n 2 --bind-to core "$work/openmpi/$prog") ;;
    esac
}

probe() { bench_handoff_probe "$floors"; }

# mpi_latency reports the median half round trip in column 7, the
# bandwidth programs their median in column 8.
col=8
[[ $prog == mpi_latency ]] && col=7
read -r -a cands <<<"$candidates"
echo "== $bench_name: $prog -s $sizes $args; $trials runs over: $candidates; far above $far_ns ns"
failed=0
for ((t = 0; t < trials; t++)); do
    c=${cands[t % ${#cands[@]}]}
    make_argv "$c"
    h1=$(probe)
    # shellcheck disable=SC2086 # ARGS is a word list on purpose
    fig=$(timeout 120 "${argv[@]}" -s "$sizes" $args 2>"$work/err.log" |
        awk -v c="$col" '$1 ~ /^(lat|bw|bibw)$/ && $NF == "ok" { printf " %s=%s", $2, $c }')
    h2=$(probe)
    if [[ -z $fig ]]; then
        echo "$bench_name: run of '$c' gave no checked figure:" >&2
        head -5 "$work/err.log" >&2
        failed=$((failed + 1))
        ((failed > 3)) && exit 1
        continue
    fi
    echo "$h1 $h2 $c$fig" | tee -a "$out"
done

echo
echo "== medians per placement (runs; ratio to ${cands[0]})"
python3 - "$out" "$far_ns" "$candidates" <<'EOF'
import collections, statistics, sys
path, far, cands = sys.argv[1], float(sys.argv[2]), sys.argv[3].split()
runs = collections.defaultdict(lambda: collections.defaultdict(list))
mixed = collections.Counter()
for line in open(path):
    f = line.split()
    try:
        h1, h2 = float(f[0]), float(f[1])
    except (ValueError, IndexError):
        continue
    where = "far" if h1 > far and h2 > far else "near" if h1 <= far and h2 <= far else None
    if where is None:
        mixed[f[2]] += 1
        continue
    for kv in f[3:]:
        size, value = kv.split("=")
        runs[where][(f[2], int(size))].append(float(value))
for where in ("near", "far"):
    if not runs[where]:
        print(f"{where}: no runs")
        continue
    sizes = sorted({s for (_, s) in runs[where]})
    print(f"{where}:")
    print("| size | " + " | ".join(cands) + " |")
    print("|---" * (len(cands) + 1) + "|")
    for s in sizes:
        ref = runs[where].get((cands[0], s))
        ref_med = statistics.median(ref) if ref else None
        cells = []
        for c in cands:
            v = runs[where].get((c, s))
            if not v:
                cells.append("-")
                continue
            m = statistics.median(v)
            ratio = f", {m / ref_med:.2f}" if ref_med and c != cands[0] else ""
            cells.append(f"{m:.4g} ({len(v)}{ratio})")
        print(f"| {s} | " + " | ".join(cells) + " |")
print("changed placement during the run (left out): " +
      (", ".join(f"{c} {n}" for c, n in sorted(mixed.items())) or "none"))
EOF
