#!/usr/bin/env bash
# bench/run-coll-bench.sh: MPI collectives of torx against Debian's MPICH
# (ch4:ucx) and Open MPI, built from one source (bench/mpi_coll.c) with each
# MPI's mpicc, run in interleaved rounds.
#
# Implementations (each round runs every one, in this order):
#   torx        torx MPICH, TORX_COLL=auto (what a user gets)
#   torxmpich   torx MPICH, TORX_COLL=mpich: MPICH's own algorithms over
#               torx point-to-point
#   torxcn      torx MPICH, every bcast/allreduce/allgather on the collective
#               network (TORX_COLL_BCAST=cn, TORX_COLL_ALLREDUCE=cn,
#               TORX_COLL_ALLGATHER=cn, TORX_COLL_CN_MAX=2^30)
#   torxtorus   torx MPICH, every bcast on the torus with the deposit bit
#               (TORX_COLL_BCAST=torus); runs the bcast only
#   torxexch    torx MPICH, every allreduce, reduce and allgather on torx's
#               exchange and reads in place (TORX_COLL_ALLREDUCE=torus,
#               TORX_COLL_REDUCE=torus, TORX_COLL_ALLGATHER=torus); runs those
#               only (not in the default list)
#   torxpaced   torx MPICH, every bcast paced (TORX_COLL_BCAST=paced); runs
#               the bcast only (not in the default list)
#   torxnoms    torx MPICH, TORX_COLL=auto without the multi-reader staging
#               area (TORX_MSTAGE_BYTES=0): the paced bcast by eager and
#               rendezvous blocks, as before that area; runs the bcast only
#               (not in the default list)
#   mpich       mpiexec.mpich
#   openmpi     mpirun.openmpi
# Rank counts: NPS (default "2 4 8"). 2 ranks run bound one per core;
# more ranks run oversubscribed (unbound; Open MPI with --oversubscribe).
# Timing methods: METHODS (default "batch osu", bench/mpi_coll.c -m):
# back-to-back calls in batches, and each call alone between barriers,
# averaged over ranks, as the OSU micro-benchmarks and users' suites report.
# For the osu method the report also gives the whole iteration (barrier and
# call): a call that looks short may have done its waiting in the barrier.
#
# Output: bench/results/coll-<stamp>.txt (the report: per method and rank
# count, a table per collective with each implementation's median over rounds and the
# ratio of torx to the better peer, per-round ratios, and issue 9's targets
# met or missed), coll-<stamp>-raw/ (every run's output), and the PNGs
# coll-<stamp>-bcast.png (the original's Figure 5(b): broadcast bandwidth
# of MPICH's algorithm over torx, the torus deposit bit, the collective
# network and torx's choice) and coll-<stamp>-alltoall.png (Figure 6: alltoall, torx against
# MPICH's default over torx).
#
# At 2 ranks each round first probes the cache-line handoff between the two
# cores (bench/floors), and the report gives the times up to 256 B as
# multiples of it: the floor of a short collective of 2 ranks is one
# handoff per step that waits for the other task.
#
# Environment:
#   ROUNDS      interleaved rounds (default 3)
#   NPS         rank counts (default "2 4 8")
#   SIZES       bytes per rank (default 8 B .. 4 MiB)
#   ITERS       iterations per size up to 8 KiB (default 1000 at 2 ranks,
#               ITERS_OVER=1000 when oversubscribed)
#   TIME_MS     oversubscribed runs: time budget per size in ms (default
#               300; mpi_coll -t): Debian's MPICH, whose UCX spins without
#               yielding, takes 4-140 ms a call at 4-8 ranks on 2 cores and
#               gets fewer iterations, at least 20; the others keep theirs.
#               (With 60 iterations for everyone, a batch was 6 calls and
#               measured mostly how the batch's barrier let ranks out.)
#   IMPLS       a subset of the implementations above
#   METHODS     a subset of "batch osu"
#   COLLS       a subset of barrier,bcast,allreduce,allreduce_max,reduce,alltoall,
#               allgather,allreduce_float (float SUM), ibarrier,ibcast,
#               iallreduce,ialltoall (nonblocking, waited on at once; with
#               the osu method also OSU's overlap, shown after the ratio);
#               the last five are not in the default
#   TORX_PREFIX torx MPICH's prefix (default: the last build-mpich.sh)
#   TORX_BUILD  the torx build whose bench/floors probes the handoff (default build/)
#   FROM_RAW    a coll-<stamp>-raw directory: redo the report and plots
#               from it without running anything
set -uo pipefail
bench_name=run-coll-bench
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=bench/lib.sh
. "$here/lib.sh"

rounds=${ROUNDS:-3}
nps=${NPS:-2 4 8}
sizes=${SIZES:-8,32,128,512,2K,8K,32K,128K,512K,1M,4M}
iters=${ITERS:-1000}
iters_over=${ITERS_OVER:-1000}
time_ms=${TIME_MS:-300}
impls=${IMPLS:-torx torxmpich torxcn torxtorus mpich openmpi}
colls=${COLLS:-barrier,bcast,allreduce,allreduce_max,reduce,alltoall,allgather}
methods=${METHODS:-batch osu}
for m in $methods; do
    [[ $m == batch || $m == osu ]] ||
        { echo "$bench_name: METHODS='$methods': '$m' is not a method (batch, osu)" >&2; exit 2; }
done
from=${FROM_RAW:-}
bench_check_counts ROUNDS:rounds ITERS:iters ITERS_OVER:iters_over TIME_MS:time_ms

bench_machine
results=$root/bench/results
mkdir -p "$results"
if [[ -n $from ]]; then
    raw=$(cd "$from" && pwd) || exit 2
    stamp=$(basename "$raw" | sed -n 's/^coll-\(.*\)-raw$/\1/p')
    [[ -n $stamp ]] || { echo "$bench_name: FROM_RAW must be a coll-<stamp>-raw directory" >&2; exit 2; }
else
    raw=$results/coll-$stamp-raw
    mkdir -p "$raw"
fi
report=$results/coll-$stamp.txt

if [[ -z $from ]]; then
    prefix=$(bench_torx_prefix)
    [[ -n $prefix && -x $prefix/bin/mpicc && -x $prefix/bin/mpiexec ]] ||
        { echo "$bench_name: no torx MPICH at '${prefix:-?}' (run scripts/build-mpich.sh)" >&2; exit 1; }
    for t in mpicc.mpich mpiexec.mpich mpicc.openmpi mpirun.openmpi timeout; do
        command -v "$t" >/dev/null || { echo "$bench_name: '$t' not found (scripts/install-deps.sh)" >&2; exit 1; }
    done
    # the cache-line handoff, probed before each 2-rank round (the floor of a
    # small collective of 2 ranks: one handoff per step that waits)
    bench_build_dir
    bin_floors=$(bench_find_prog "$build" floors "run scripts/build.sh" 2>/dev/null) || bin_floors=
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    declare -A mpicc=([torx]="$prefix/bin/mpicc" [mpich]=mpicc.mpich [openmpi]=mpicc.openmpi)
    for i in torx mpich openmpi; do
        "${mpicc[$i]}" -O2 -std=c11 -Wall -Wextra -o "$work/mpi_coll.$i" "$here/mpi_coll.c" \
            2>"$work/cc.$i.log" || { cat "$work/cc.$i.log" >&2; echo "$bench_name: building with ${mpicc[$i]} failed" >&2; exit 1; }
    done
    {
        echo "# machine: $machine"
        echo "# date: $when; torx $rev; prefix $prefix"
        echo "# rounds $rounds; ranks $nps; methods $methods; sizes $sizes; iterations $iters (oversubscribed $iters_over, at most $time_ms ms a size)"
        echo "# load at start: $(loadavg)"
    } >"$raw/info.txt"
    failed=0
    for r in $(seq 1 "$rounds"); do
        for np in $nps; do
            limits=(-n "$iters")
            ((np > 2)) && limits=(-n "$iters_over" -t "$time_ms")
            for method in $methods; do
                if ((np <= 2)) && [[ -n $bin_floors ]]; then
                    echo "handoff_ns=$(bench_handoff_probe "$bin_floors")" >"$raw/r$r-np$np-handoff-$method.txt"
                fi
                for impl in $impls; do
                    case $impl in
                    torx | torxmpich | torxcn | torxtorus | torxnoms | torxexch | torxpaced)
                        argv=("$prefix/bin/mpiexec" -n "$np")
                        ((np <= 2)) && argv+=(-bind-to core)
                        [[ $impl == torxmpich ]] && argv+=(-genv TORX_COLL mpich)
                        [[ $impl == torxcn ]] && argv+=(-genv TORX_COLL_BCAST cn -genv TORX_COLL_ALLREDUCE cn
                            -genv TORX_COLL_ALLGATHER cn -genv TORX_COLL_CN_MAX 1073741824)
                        [[ $impl == torxtorus ]] && argv+=(-genv TORX_COLL_BCAST torus)
                        [[ $impl == torxnoms ]] && argv+=(-genv TORX_MSTAGE_BYTES 0)
                        [[ $impl == torxexch ]] && argv+=(-genv TORX_COLL_ALLREDUCE torus
                            -genv TORX_COLL_REDUCE torus -genv TORX_COLL_ALLGATHER torus)
                        [[ $impl == torxpaced ]] && argv+=(-genv TORX_COLL_BCAST paced)
                        argv+=("$work/mpi_coll.torx") ;;
                    mpich)
                        argv=(mpiexec.mpich -n "$np")
                        if ((np <= 2)); then argv+=(-bind-to core); else argv+=(-bind-to none); fi
                        argv+=("$work/mpi_coll.mpich") ;;
                    openmpi)
                        argv=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun.openmpi -n "$np")
                        if ((np <= 2)); then argv+=(--bind-to core); else argv+=(--oversubscribe --bind-to none); fi
                        argv+=("$work/mpi_coll.openmpi") ;;
                    *) echo "$bench_name: unknown implementation '$impl'" >&2; exit 2 ;;
                    esac
                    run_colls=$colls
                    if [[ $impl == torxtorus || $impl == torxnoms || $impl == torxpaced ]]; then
                        [[ ,$colls, == *,bcast,* ]] || continue
                        run_colls=bcast
                    elif [[ $impl == torxexch ]]; then
                        run_colls=
                        for k in ${colls//,/ }; do
                            [[ $k == allreduce* || $k == reduce || $k == allgather ]] &&
                                run_colls=${run_colls:+$run_colls,}$k
                        done
                        [[ -n $run_colls ]] || continue
                    fi
                    out=$raw/r$r-np$np-$impl-$method.txt
                    printf '   round %d/%d, %d ranks, %-5s %-10s ' "$r" "$rounds" "$np" "$method" "$impl"
                    start=$SECONDS
                    if timeout -k 10 1200 "${argv[@]}" -c "$run_colls" -s "$sizes" -m "$method" "${limits[@]}" \
                        >"$out" 2>&1 </dev/null &&
                        grep -q '^coll ' "$out"; then
                        echo "$((SECONDS - start)) s"
                    else
                        echo "FAILED (see $out)"
                        failed=1
                    fi
                done
            done
        done
    done
    echo "# load at end: $(loadavg)" >>"$raw/info.txt"
fi

# ---- report ---------------------------------------------------------------------------
python3 - "$raw" "$report" "$results/coll-$stamp" <<'PY'
import glob, os, re, statistics, sys
raw, report, base = sys.argv[1:4]
runs = {}   # (method, np, impl) -> {round: {(coll, size): mean_us}}
ovl = {}    # the same -> overlap % (nonblocking collectives, method osu)
loops = {}  # the same -> the whole iteration, barrier and call, us (method osu)
handoff = {}  # (method, np, round) -> ns, probed before the round's runs
for f in glob.glob(os.path.join(raw, "r*-np*-handoff-*.txt")):
    m = re.match(r"r(\d+)-np(\d+)-handoff-(batch|osu)\.txt$", os.path.basename(f))
    v = open(f).read().strip().split("=")[-1]
    if m and v not in ("", "NaN"):
        handoff[(m[3], int(m[2]), int(m[1]))] = float(v)
for f in glob.glob(os.path.join(raw, "r*-np*-*.txt")):
    m = re.match(r"r(\d+)-np(\d+)-(\w+?)(?:-(batch|osu))?\.txt$", os.path.basename(f))
    if not m or "-handoff-" in os.path.basename(f):
        continue
    rnd, np_, impl, method = int(m[1]), int(m[2]), m[3], m[4] or "batch"
    d = runs.setdefault((method, np_, impl), {}).setdefault(rnd, {})
    o = ovl.setdefault((method, np_, impl), {}).setdefault(rnd, {})
    lp = loops.setdefault((method, np_, impl), {}).setdefault(rnd, {})
    for line in open(f, errors="replace"):
        w = line.split()
        if len(w) >= 4 and w[0] == "coll":
            d[(w[1], int(w[2]))] = float(w[3].split("=")[1])
            for x in w[4:]:
                if x.startswith("overlap="):
                    o[(w[1], int(w[2]))] = float(x.split("=")[1])
                if x.startswith("loop_us="):
                    lp[(w[1], int(w[2]))] = float(x.split("=")[1])
methods = [m for m in ("batch", "osu") if any(k[0] == m for k in runs)]
nps = sorted({k[1] for k in runs})
impls = [i for i in ["torx", "torxnoms", "torxmpich", "torxcn", "torxtorus", "torxexch", "torxpaced", "mpich",
                     "openmpi"] if any(k[2] == i for k in runs)]
colls = ["barrier", "bcast", "allreduce", "allreduce_float", "allreduce_max", "reduce", "alltoall", "allgather",
         "ibarrier", "ibcast", "iallreduce", "ialltoall"]
out = []
info = os.path.join(raw, "info.txt")
if os.path.exists(info):
    out += [l.rstrip("\n") for l in open(info)]
out.append("# times: microseconds per call, the mean over ranks of each rank's figure (bench/mpi_coll.c: batch,")
out.append("# its median batch of back-to-back calls; osu, its mean call timed alone after a barrier),")
out.append("# then the median over rounds; ratio = torx / the better of mpich and openmpi (ratio of")
out.append("# medians), per-round ratios in brackets; targets (issue 9): 2 ranks: barrier and 8-byte")
out.append("# allreduce <= 1.0, bcast and allreduce <= 1.2 at every size, alltoall <= 1.2; 4 and 8")
out.append("# ranks: every collective <= 1.5 at every size; at 2 ranks, up to 256 B, each time as a")
out.append("# multiple of the cache-line handoff probed before the round (bench/floors), median over rounds;")
out.append("# osu: loop = the whole iteration, barrier and call (us, median over rounds), torx's and the")
out.append("# better peer's: what a user's loop of barrier and call takes")

def med(np_, impl, key):
    v = [r[key] for r in runs.get((method, np_, impl), {}).values() if key in r]
    return statistics.median(v) if v else None

def med_ovl(np_, impl, key):
    v = [r[key] for r in ovl.get((method, np_, impl), {}).values() if key in r]
    return statistics.median(v) if v else None

def med_loop(np_, impl, key):
    v = [r[key] for r in loops.get((method, np_, impl), {}).values() if key in r]
    return statistics.median(v) if v else None

def per_round(np_, key):
    res = []
    for rnd in sorted(runs.get((method, np_, "torx"), {})):
        t = runs[(method, np_, "torx")][rnd].get(key)
        peers = [runs.get((method, np_, p), {}).get(rnd, {}).get(key) for p in ("mpich", "openmpi")]
        peers = [p for p in peers if p]
        if t and peers:
            res.append(t / min(peers))
    return res

def handoffs(np_, key):
    """Median over rounds of torx's and the better peer's time in handoffs
    probed before that round (bench/floors), or None."""
    t, p = [], []
    for rnd in sorted(runs.get((method, np_, "torx"), {})):
        h = handoff.get((method, np_, rnd))
        x = runs[(method, np_, "torx")][rnd].get(key)
        peers = [runs.get((method, np_, q), {}).get(rnd, {}).get(key) for q in ("mpich", "openmpi")]
        peers = [q for q in peers if q]
        if h and x and peers:
            t.append(x * 1e3 / h)
            p.append(min(peers) * 1e3 / h)
    return (statistics.median(t), statistics.median(p)) if t else None

plots = {}
tallies = []
for method in methods:
    met = missed = 0
    misses = []
    out.append("")
    out.append(f"# method {method}" + (": back-to-back calls in batches" if method == "batch"
                                         else ": each call alone after a barrier (OSU)"))
    for np_ in nps:
        out.append("")
        out.append(f"## {np_} ranks" + (" (one per core)" if np_ <= 2 else " (oversubscribed)") + f", {method}")
        for c in colls:
            keys = sorted({k for i in impls for r in runs.get((method, np_, i), {}).values() for k in r if k[0] == c},
                          key=lambda k: k[1])
            if not keys:
                continue
            out.append("")
            out.append(f"{c:14s} " + " ".join(f"{i:>10s}" for i in impls) + "   ratio  per round          target")
            for k in keys:
                vals = [med(np_, i, k) for i in impls]
                t = med(np_, "torx", k)
                peers = [x for x in (med(np_, "mpich", k), med(np_, "openmpi", k)) if x]
                ratio = t / min(peers) if t and peers else None
                if np_ <= 2:
                    limit = 1.0 if c == "barrier" or (c in ("allreduce", "allreduce_max") and k[1] == 8) \
                        else 1.2 if c in ("bcast", "allreduce", "allreduce_float", "allreduce_max", "alltoall") else None
                else:
                    limit = 1.5
                if c.startswith("i"):
                    limit = None  # nonblocking: reported, no target
                verdict = ""
                if limit and ratio is not None:
                    ok = ratio <= limit
                    verdict = f"<= {limit:.1f} {'met' if ok else 'MISSED'}"
                    if ok:
                        met += 1
                    else:
                        missed += 1
                        misses.append(f"{np_} ranks {c} {k[1]} B: {ratio:.2f}")
                pr = " ".join(f"{x:.2f}" for x in per_round(np_, k))
                ov = [med_ovl(np_, i, k) for i in impls]
                ovs = ("  overlap % " + " ".join("-" if x is None else f"{x:.0f}" for x in ov)) \
                    if any(x is not None for x in ov) else ""
                lt = med_loop(np_, "torx", k)
                lpeers = [x for x in (med_loop(np_, "mpich", k), med_loop(np_, "openmpi", k)) if x]
                if lt and lpeers and c != "barrier":
                    ovs += "  loop torx %.3f, better peer %.3f" % (lt, min(lpeers))
                if np_ <= 2 and k[1] <= 256:
                    ho = handoffs(np_, k)
                    if ho:
                        ovs += "  handoffs torx %.1f, better peer %.1f" % ho
                out.append(f"{k[1]:>14d} " + " ".join(f"{v:10.3f}" if v else f"{'-':>10s}" for v in vals)
                           + (f"   {ratio:5.2f}" if ratio else "       -") + f"  [{pr}]".ljust(20) + f" {verdict}"
                           + ovs)
                if method == methods[0]:
                    plots.setdefault((np_, c), []).append((k[1], vals))
    tallies.append(f"targets, {method}: {met} met, {missed} missed" + (": " + "; ".join(misses) if misses else ""))
out.append("")
out += tallies
open(report, "w").write("\n".join(out) + "\n")
print("\n".join(out))

# data for the plots: size, then each implementation's MB/s (size / us)
for (np_, c), rows in plots.items():
    if c not in ("bcast", "alltoall", "allreduce"):
        continue
    with open(f"{base}-np{np_}-{c}.dat", "w") as f:
        f.write("# size " + " ".join(impls) + " (MB/s)\n")
        for size, vals in rows:
            f.write(f"{size} " + " ".join(f"{size / v:.3f}" if v and size else "NaN" for v in vals) + "\n")
open(f"{base}-impls.txt", "w").write(" ".join(impls) + "\n")
PY
[[ -f $report ]] || exit 1

if bench_have_gnuplot; then
    for np in $nps; do
        for c in bcast alltoall; do
            dat=$results/coll-$stamp-np$np-$c.dat
            [[ -f $dat ]] || continue
            gnuplot -e "dat='$dat'; out='$results/coll-$stamp-np$np-$c.png'; coll='$c'; np=$np; impls='$(cat "$results/coll-$stamp-impls.txt")'; subtitle='$machine, $when'" \
                "$here/coll-plot.gp" || echo "$bench_name: gnuplot failed for $dat" >&2
        done
    done
fi
echo "$bench_name: report $report"
[[ ${failed:-0} = 0 ]]
