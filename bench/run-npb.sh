#!/usr/bin/env bash
# The NAS Parallel Benchmarks (NPB 3.4, MPI) over torx in heater, co and vn
# mode, beside Debian's MPICH and Open MPI: the original's Figure 5(a) in
# shape (per-task Mop/s, coprocessor against virtual node mode, per
# benchmark, and the throughput vn gains over co).
#
# Builds the chosen benchmarks and class from an NPB source tree, which is
# only read: it is copied, once per MPI, into a build cache, where
# config/make.def is written and `make <bench> CLASS=<class>` runs with that
# MPI's mpif90 / mpicc. Then runs them in interleaved rounds (round r: every
# benchmark, and for each one every configuration, in turn), checks that
# every run prints "Verification = SUCCESSFUL", and records Mop/s total and
# per task, mode, mapping, torus, task count and machine load.
#
# A node is CORES_PER_NODE cores (TORX_CORES_PER_NODE). Per NODES value the
# configurations are:
#
#   torx heater   TORX_MODE=heater, 1 task per node          NODES tasks
#   torx co       TORX_MODE=co, 1 task per node plus its      NODES tasks
#                 communication thread on the node's second core
#   torx vn       TORX_MODE=vn, one task per core             NODES x CORES_PER_NODE tasks
#   mpich         Debian MPICH, mpirun.mpich, one per core    NODES x CORES_PER_NODE tasks
#   openmpi       Debian Open MPI, mpirun.openmpi             NODES x CORES_PER_NODE tasks
#
# Each count is rounded down to what the benchmark accepts: a square for BT
# and SP, a power of two for the others (so BT and SP in vn mode on one node
# of 2 cores run 1 task). A configuration that another NODES value already
# runs with the same task count runs once. torx launches with its own
# binding (torx_init binds the task, co's thread and vn's tasks to the
# node's cores); the peers with -bind-to core, or unbound and oversubscribed
# when they need more CPUs than the host has. The report marks every run
# whose busy threads (co: 2 per task) exceed the host's CPUs.
#
# Usage: bench/run-npb.sh            (or: make npb in a build directory)
#   NPB_DIR         NPB3.4-MPI source tree, read only (default
#                   ../shared/npb/NPB3.4-MPI beside the repository)
#   BENCHMARKS      default "bt cg ep ft is lu mg sp" (DT is left out: it
#                   takes a graph argument and fixed rank counts)
#   CLASS           S, W, A, B, ... (default W)
#   IMPLS           any of "torx mpich openmpi" (default all three)
#   MODES           torx modes, any of "heater co vn" (default all three)
#   NODES           one or more node counts, e.g. "1 2" (default 1)
#   CORES_PER_NODE  cores per node (default 2, a Blue Gene/L node)
#   MAPPING         TORX_MAPPING of every torx run: an order (XYZT, TXYZ,
#                   ...) or a mapping file; %n in a file name becomes the
#                   task count, %m the mode (default XYZT)
#   MAPPING_HEATER, MAPPING_CO, MAPPING_VN   per mode, over MAPPING
#   TORX_TORUS      passed on when set; otherwise torx derives the shape
#   ROUNDS          rounds (default 2)
#   RUN_TIMEOUT_S   a run taking longer is killed and fails (default 900)
#   TORX_PREFIX     torx MPICH (default: the path in ~/.cache/torx/current-prefix)
#   NPB_BUILD       build cache: NPB_BUILD/<impl>/ (default
#                   ~/.cache/torx/npb-<hash of the source tree, that MPI's
#                   compilers and the flags>/<impl>/)
#   NPB_FFLAGS, NPB_CFLAGS   compiler flags (default -O3; Fortran also
#                   gets -fallow-argument-mismatch -fallow-invalid-boz)
#   RESULTS_DIR     where npb-<stamp>.txt, .md and .png go (default bench/results)
#   PLOT=0          no PNG
#   BUILD_ONLY=1    build (or find in the cache) and stop
#
# Exit status: 0 when every run verified; 1 when a run failed (each is
# named: no SUCCESSFUL verification, nonzero exit, timeout, wrong task
# count); 2 when something is missing or an argument is bad. The last line
# is "run-npb: N passed, N failed".
set -euo pipefail

# The whole script is one block, read before any of it runs: editing this
# file during a run (an hour at class A) cannot change the run.
{
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
bench_name=run-npb
# shellcheck source=bench/lib.sh
. "$here/lib.sh"

die() {
    echo "$bench_name: $*" >&2
    exit 2
}

npb_dir=${NPB_DIR:-$(dirname "$root")/shared/npb/NPB3.4-MPI}
benches=${BENCHMARKS:-bt cg ep ft is lu mg sp}
benches=${benches,,}
class=${CLASS:-W}
class=${class^^}
impls=${IMPLS:-torx mpich openmpi}
modes=${MODES:-heater co vn}
modes=${modes,,}
nodes_list=${NODES:-1}
cpn=${CORES_PER_NODE:-2}
rounds=${ROUNDS:-2}
run_timeout=${RUN_TIMEOUT_S:-900}
results=${RESULTS_DIR:-$here/results}
plot=${PLOT:-1}
fflags=${NPB_FFLAGS:--O3}
cflags=${NPB_CFLAGS:--O3}
bench_check_counts ROUNDS:rounds CORES_PER_NODE:cpn RUN_TIMEOUT_S:run_timeout
((cpn >= 1)) || die "CORES_PER_NODE must be at least 1"
[[ $class =~ ^[SWABCDEF]$ ]] || die "CLASS='$class' is not one of S W A B C D E F"
for n in $nodes_list; do
    [[ $n =~ ^[0-9]+$ && $n != 0 ]] || die "NODES='$nodes_list' must be counts of at least 1"
done
for b in $benches; do
    case $b in bt | cg | ep | ft | is | lu | mg | sp) ;;
    *) die "BENCHMARKS: '$b' is not one of bt cg ep ft is lu mg sp" ;;
    esac
done
for i in $impls; do
    case $i in torx | mpich | openmpi) ;; *) die "IMPLS: '$i' is not one of torx mpich openmpi" ;; esac
done
for m in $modes; do
    case $m in heater | co | vn) ;; *) die "MODES: '$m' is not one of heater co vn" ;; esac
done
[[ -f $npb_dir/Makefile && -d $npb_dir/common ]] ||
    die "NPB_DIR='$npb_dir' is not an NPB3.4-MPI source tree (set NPB_DIR)"
npb_dir=$(cd "$npb_dir" && pwd)
case $results in /*) ;; *) results=$PWD/$results ;; esac

bench_machine
mkdir -p "$results" || die "cannot create $results"
work=$(mktemp -d "${TMPDIR:-/tmp}/torx-npb.XXXXXX") || die "no temporary directory"
trap 'rm -rf "$work"' EXIT

# ---- The MPIs -----------------------------------------------------------------------

declare -A fc cc launcher
prefix=""
for i in $impls; do
    case $i in
    torx)
        prefix=$(bench_torx_prefix)
        [[ -n $prefix && -x $prefix/bin/mpif90 && -x $prefix/bin/mpiexec ]] ||
            die "no torx MPICH with mpif90 at '${prefix:-?}'; run scripts/build-mpich.sh, or set TORX_PREFIX"
        "$prefix/bin/mpichversion" 2>/dev/null | grep -q '^MPICH Device:.*ch4:torx' ||
            die "$prefix/bin/mpichversion does not show ch4:torx: not a torx MPICH"
        fc[torx]=$prefix/bin/mpif90 cc[torx]=$prefix/bin/mpicc launcher[torx]=$prefix/bin/mpiexec
        ;;
    mpich) fc[mpich]=mpif90.mpich cc[mpich]=mpicc.mpich launcher[mpich]=mpiexec.mpich ;;
    openmpi) fc[openmpi]=mpif90.openmpi cc[openmpi]=mpicc.openmpi launcher[openmpi]=mpirun.openmpi ;;
    esac
    for t in "${fc[$i]}" "${cc[$i]}" "${launcher[$i]}"; do
        command -v "$t" >/dev/null 2>&1 ||
            die "'$t' not found (Debian packages mpich, libmpich-dev, openmpi-bin, libopenmpi-dev, gfortran)"
    done
done
command -v timeout >/dev/null 2>&1 || die "'timeout' not found (coreutils)"

# ---- Build: one copy of the source per MPI, cached --------------------------------------

# make.def for an MPI (gfortran 12 needs -fallow-argument-mismatch and -fallow-invalid-boz).
make_def() {
    cat <<EOF
# written by torx bench/run-npb.sh
MPIFC = ${fc[$1]}
FLINK = \$(MPIFC)
FMPI_LIB =
FMPI_INC =
FFLAGS = $fflags -fallow-argument-mismatch -fallow-invalid-boz
FLINKFLAGS = \$(FFLAGS)
MPICC = ${cc[$1]}
CLINK = \$(MPICC)
CMPI_LIB =
CMPI_INC =
CFLAGS = $cflags
CLINKFLAGS = \$(CFLAGS)
CC = gcc -g
BINDIR = ../bin
CONVERTFLAG = -DFORTRAN_REC_SIZE=1
RAND = randi8
EOF
}

# Each MPI's build directory: $NPB_BUILD/<impl>, or by default
# ~/.cache/torx/npb-<key>/<impl>, the key a hash of the source tree (names,
# sizes, times), that MPI's make.def (its compilers' paths: a rebuilt torx
# MPICH has a new prefix) and its Fortran compiler's version.
declare -A cdir
src_list=$(cd "$npb_dir" && find . -type f -printf '%P %s %T@\n' | LC_ALL=C sort)
for i in $impls; do
    if [[ -n ${NPB_BUILD:-} ]]; then
        cdir[$i]=$NPB_BUILD/$i
        case ${cdir[$i]} in /*) ;; *) cdir[$i]=$PWD/${cdir[$i]} ;; esac
    else
        key=$({
            echo "$npb_dir"
            echo "$src_list"
            make_def "$i"
            command -v "${fc[$i]}"
            "${fc[$i]}" --version 2>&1 | head -1
        } | sha1sum | cut -c1-12)
        cdir[$i]=$HOME/.cache/torx/npb-$key/$i
    fi
done

# build IMPL BENCH: sets bin to the binary, building it when missing.
build() {
    local i=$1 b=$2 dir=${cdir[$1]}
    bin=$dir/bin/$b.$class.x
    # the stamp says make finished: a build killed half-way left no stamp
    [[ -x $bin && -f $bin.built ]] && return 0
    if [[ ! -f $dir/.copied ]]; then
        rm -rf "$dir"
        mkdir -p "$dir"
        cp -R "$npb_dir/." "$dir/"
        chmod -R u+w "$dir"
        make_def "$i" >"$dir/config/make.def"
        mkdir -p "$dir/bin"
        touch "$dir/.copied"
    fi
    echo "   building $b.$class with ${fc[$i]} in $dir ..."
    if ! make -C "$dir" "$b" CLASS="$class" >"$dir/build-$b.$class.log" 2>&1 || [[ ! -x $bin ]]; then
        echo "$bench_name: building $b class $class with ${fc[$i]} failed; the end of $dir/build-$b.$class.log:" >&2
        tail -25 "$dir/build-$b.$class.log" >&2
        return 1
    fi
    touch "$bin.built"
}

# ---- The runs ---------------------------------------------------------------------------

# valid_tasks BENCH N: the largest count <= N that BENCH accepts.
valid_tasks() {
    local n=$2 k=1
    case $1 in
    bt | sp) while (((k + 1) * (k + 1) <= n)); do k=$((k + 1)); done; echo $((k * k)) ;;
    *) while ((k * 2 <= n)); do k=$((k * 2)); done; echo "$k" ;;
    esac
}

# The configurations: "impl mode" (mode "-" for the peers).
configs=()
for i in $impls; do
    if [[ $i == torx ]]; then
        for m in $modes; do configs+=("torx $m"); done
    else
        configs+=("$i -")
    fi
done

# Run IDs: bench.impl.mode.tasks, once each; the runs of every NODES value
# in runs_of["nodes bench impl mode"].
declare -A runs_of seen mapping_of
run_ids=()
for n in $nodes_list; do
    for b in $benches; do
        for c in "${configs[@]}"; do
            read -r i m <<<"$c"
            case $m in heater | co) slots=$n ;; *) slots=$((n * cpn)) ;; esac
            t=$(valid_tasks "$b" "$slots")
            map=-
            if [[ $i == torx ]]; then
                v=MAPPING_${m^^}
                map=${!v:-${MAPPING:-XYZT}}
                map=${map//%n/$t}
                map=${map//%m/$m}
                if [[ ! $map =~ ^[XYZTxyzt]{4}$ ]]; then
                    [[ -r $map ]] || die "$v/MAPPING: '$map' is neither an order such as XYZT nor a readable file"
                    map=$(cd "$(dirname "$map")" && pwd)/$(basename "$map")
                fi
            fi
            id=$b.$i.$m.$t
            runs_of["$n $b $i $m"]=$id
            mapping_of[$id]=$map
            [[ -n ${seen[$id]:-} ]] && continue
            seen[$id]=1
            run_ids+=("$id")
        done
    done
done

echo "== NPB $class: ${benches// /,}; ${impls// /,}; torx modes ${modes// /,}; NODES=${nodes_list// /,} x CORES_PER_NODE=$cpn; $rounds round(s)"
echo "== $machine; $when; harness $rev${prefix:+; torx MPICH $prefix}; loadavg $(loadavg)"
echo "== source $npb_dir (read only), builds in $(for i in $impls; do printf '%s ' "${cdir[$i]}"; done)"
declare -A bins
for i in $impls; do
    for b in $benches; do
        build "$i" "$b" || exit 2
        bins[$i.$b]=$bin
    done
done
if [[ " $impls " == *" torx "* ]]; then
    # torx's binaries must load torx MPICH's libmpi (RUNPATH), not Debian's.
    read -r first _ <<<"$benches"
    libs=$(ldd "${bins[torx.$first]}" 2>/dev/null | awk '/libmpi\.|libtorx/ { print $3 }' | tr '\n' ' ')
    [[ $libs == *"$prefix"* ]] || die "${bins[torx.$first]} does not load libmpi from $prefix ($libs)"
fi
if [[ ${BUILD_ONLY:-0} == 1 ]]; then
    echo "$bench_name: built (BUILD_ONLY=1): $(for k in "${!bins[@]}"; do echo "${bins[$k]}"; done | sort | tr '\n' ' ')"
    exit 0
fi

# make_argv ID: the command line into argv, the busy threads into busy.
make_argv() {
    local b i m t
    IFS=. read -r b i m t <<<"$1"
    case $i in
    torx)
        argv=("${launcher[torx]}" -n "$t" -genv TORX_MODE "$m" -genv TORX_CORES_PER_NODE "$cpn"
            -genv TORX_MAPPING "${mapping_of[$1]}" -genv TORX_VERBOSE 2)
        [[ -n ${TORX_TORUS:-} ]] && argv+=(-genv TORX_TORUS "$TORX_TORUS")
        busy=$t
        [[ $m == co ]] && busy=$((2 * t))
        ;;
    mpich)
        argv=(mpiexec.mpich -n "$t")
        if ((t <= ncpu)); then argv+=(-bind-to core); else argv+=(-bind-to none); fi
        busy=$t
        ;;
    openmpi)
        argv=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun.openmpi -n "$t")
        if ((t <= ncpu)); then argv+=(--bind-to core); else argv+=(--oversubscribe --bind-to none); fi
        busy=$t
        ;;
    esac
    argv+=("${bins[$i.$b]}")
}

# check_run OUT ERR TASKS: sets verdict ("ok" or why not), mops, mops_task,
# secs, torus (torx: occupied extents XxYxZ and tasks per node from the
# TORX_VERBOSE=2 coordinates).
check_run() {
    local out=$1 err=$2 t=$3 procs
    mops=$(sed -n 's/^ *Mop\/s total *= *\([0-9.eE+-]*\) *$/\1/p' "$out" | head -1)
    mops_task=$(sed -n 's/^ *Mop\/s\/process *= *\([0-9.eE+-]*\) *$/\1/p' "$out" | head -1)
    secs=$(sed -n 's/^ *Time in seconds *= *\([0-9.eE+-]*\) *$/\1/p' "$out" | head -1)
    procs=$(sed -n 's/^ *Total processes *= *\([0-9]*\) *$/\1/p' "$out" | head -1)
    torus=$(awk 'match($0, /coordinate \([0-9]+,[0-9]+,[0-9]+,[0-9]+\)/) {
                    split(substr($0, RSTART + 12, RLENGTH - 13), c, ",")
                    for (d = 1; d <= 4; d++) if (c[d] + 1 > e[d]) e[d] = c[d] + 1; n++ }
                 END { if (n) printf "%dx%dx%d,t%d", e[1], e[2], e[3], e[4]; else print "-" }' "$err")
    if ((run_rc == 124 || run_rc == 137)); then
        verdict="timed out after $run_timeout s (RUN_TIMEOUT_S)"
    elif ((run_rc != 0)); then
        verdict="exit status $run_rc"
    # The one line that counts: "Verification    =               SUCCESSFUL"
    # (UNSUCCESSFUL and anything else fail).
    elif ! grep -Eq '^[[:space:]]*Verification[[:space:]]*=[[:space:]]*SUCCESSFUL[[:space:]]*$' "$out"; then
        verdict="no 'Verification = SUCCESSFUL' line (it says: $(grep -E 'Verification *=' "$out" | head -1 | tr -s ' ' || echo nothing))"
    elif [[ $procs != "$t" ]]; then
        verdict="ran with '${procs:-?}' processes, not $t"
    elif [[ -z $mops || -z $mops_task ]]; then
        verdict="no Mop/s figures in the output"
    else
        verdict=ok
    fi
}

la_start=$(loadavg)
start_s=$SECONDS
pass=0
fail=0
failures=()
declare -A broken
: >"$work/runs.txt"
echo "== ${#run_ids[@]} runs per round:"
for id in "${run_ids[@]}"; do
    make_argv "$id"
    echo "   $id: ${argv[*]}"
done
for ((r = 1; r <= rounds; r++)); do
    for b in $benches; do
        for id in "${run_ids[@]}"; do
            [[ $id == "$b".* ]] || continue
            IFS=. read -r _ i m t <<<"$id"
            if [[ -n ${broken[$id]:-} ]]; then
                echo "   round $r  $id skipped: failed in an earlier round"
                continue
            fi
            make_argv "$id"
            over=no
            ((busy > ncpu)) && over=yes
            # bench_run_timed keeps the exit status in run_rc; "|| true" keeps set -e out of it.
            bench_run_timed "$work/round$r-$id.out" "$work/round$r-$id.err" \
                timeout -k 10 "$run_timeout" "${argv[@]}" </dev/null || true
            check_run "$work/round$r-$id.out" "$work/round$r-$id.err" "$t"
            echo "run $r $b $class $i $m $t ${mapping_of[$id]##*/} $torus $busy $over" \
                "${mops:-NaN} ${mops_task:-NaN} ${secs:-NaN} $run_wall $run_other ${run_la0// /,} ${run_la1// /,} $run_rc" \
                "$([[ $verdict == ok ]] && echo ok || echo FAILED)" >>"$work/runs.txt"
            if [[ $verdict == ok ]]; then
                pass=$((pass + 1))
                printf '   round %d  %-22s ok  %9s Mop/s total %9s per task  %6.1f s  other load %3s%%  loadavg %s\n' \
                    "$r" "$id" "$mops" "$mops_task" "$run_wall" "$run_other" "$run_la0"
            else
                fail=$((fail + 1))
                broken[$id]=1
                if [[ $i == torx ]]; then
                    what="round $r: ${b^^}.$class torx $m ($t tasks, TORX_MAPPING=${mapping_of[$id]})"
                else
                    what="round $r: ${b^^}.$class $i ($t tasks)"
                fi
                failures+=("$what: $verdict")
                echo "   round $r  $id FAILED: $verdict; command: ${argv[*]}" >&2
                echo "     end of its stdout:" >&2
                tail -8 "$work/round$r-$id.out" | sed 's/^/       /' >&2
                echo "     end of its stderr:" >&2
                tail -12 "$work/round$r-$id.err" | sed 's/^/       /' >&2
            fi
        done
    done
done
la_end=$(loadavg)
total_s=$((SECONDS - start_s))

# ---- Report -------------------------------------------------------------------------------

report=$results/npb-$stamp.txt
section=$results/npb-$stamp.md
cmd="CLASS=$class NODES='$nodes_list' CORES_PER_NODE=$cpn ROUNDS=$rounds"
[[ $benches != "bt cg ep ft is lu mg sp" ]] && cmd+=" BENCHMARKS='$benches'"
[[ $impls != "torx mpich openmpi" ]] && cmd+=" IMPLS='$impls'"
[[ $modes != "heater co vn" ]] && cmd+=" MODES='$modes'"
for v in MAPPING MAPPING_HEATER MAPPING_CO MAPPING_VN TORX_TORUS; do
    [[ -n ${!v:-} ]] && cmd+=" $v=${!v}"
done
cmd+=" bench/run-npb.sh"

# med ID FIELD: the median over the rounds that verified (field 12: Mop/s
# total, 13: per task, 15: wall), or NaN.
med() {
    local b i m t
    IFS=. read -r b i m t <<<"$1"
    awk -v b="$b" -v i="$i" -v m="$m" -v t="$t" -v f="$2" \
        '$3 == b && $5 == i && $6 == m && $7 == t && $NF == "ok" { print $f }' "$work/runs.txt" | median_of
}
maxload=$(awk '{ split($17, a, ","); if (a[1] > m) m = a[1] } END { printf "%.2f", m }' "$work/runs.txt")

# first_of ID FIELD: that field of the run's first verified round, or "-".
first_of() {
    local b i m t
    IFS=. read -r b i m t <<<"$1"
    awk -v b="$b" -v i="$i" -v m="$m" -v t="$t" -v f="$2" \
        '$3 == b && $5 == i && $6 == m && $7 == t && $NF == "ok" { print $f; x = 1; exit } END { if (!x) print "-" }' \
        "$work/runs.txt"
}
# loads_of ID: the 1-minute load average before each round's run, "a / b".
loads_of() {
    local b i m t
    IFS=. read -r b i m t <<<"$1"
    awk -v b="$b" -v i="$i" -v m="$m" -v t="$t" \
        '$3 == b && $5 == i && $6 == m && $7 == t { split($17, a, ","); s = s (s == "" ? "" : " / ") a[1] }
         END { print s == "" ? "-" : s }' "$work/runs.txt"
}
has_fig5=0
[[ " $impls " == *" torx "* && " $modes " == *" co "* && " $modes " == *" vn "* ]] && has_fig5=1

{
    echo "### NAS Parallel Benchmarks, class $class: heater, co and vn (Figure 5(a) in shape)"
    echo
    echo "Command: \`$cmd\`; $when; harness at $rev${prefix:+, torx MPICH $prefix}."
    echo "Machine: $machine. Load average at the start $la_start, at the end $la_end;"
    echo "the highest 1-minute load seen before a run: $maxload. $rounds round(s), medians;"
    echo "$pass runs verified, $fail failed; $total_s s."
    torx_env=$(env | grep '^TORX_' | LC_ALL=C sort | tr '\n' ' ' || true)
    [[ -n $torx_env ]] && echo "TORX_ variables in the environment (torx runs inherit them): ${torx_env% }."
    for n in $nodes_list; do
        echo
        echo "#### NODES=$n x CORES_PER_NODE=$cpn ($((n * cpn)) cores; this host has $ncpu CPUs$( ((n * cpn > ncpu)) && echo ": oversubscribed"))"
        echo
        echo "Mop/s per task (tasks):"
        echo
        printf '| bench |'
        for c in "${configs[@]}"; do
            read -r i m <<<"$c"
            case $i in torx) printf ' torx %s |' "$m" ;; mpich) printf ' Debian MPICH |' ;; *) printf ' Open MPI |' ;; esac
        done
        ((has_fig5)) && printf ' vn/co per task | vn/co total |'
        echo
        printf '|---|'
        for c in "${configs[@]}"; do printf -- '--:|'; done
        ((has_fig5)) && printf -- '--:|--:|'
        echo
        for b in $benches; do
            printf '| %s.%s |' "${b^^}" "$class"
            for c in "${configs[@]}"; do
                read -r i m <<<"$c"
                id=${runs_of["$n $b $i $m"]}
                printf ' %s (%s) |' "$(fmt "$(med "$id" 13)" 0)" "${id##*.}"
            done
            if ((has_fig5)); then
                co=${runs_of["$n $b torx co"]} vn=${runs_of["$n $b torx vn"]}
                printf ' %s | %s |' "$(ratio "$(med "$vn" 13)" "$(med "$co" 13)")" "$(ratio "$(med "$vn" 12)" "$(med "$co" 12)")"
            fi
            echo
        done
        echo
        echo "| bench | run | tasks | busy threads | torus | mapping | Mop/s total | Mop/s per task | wall s | load before |"
        echo "|---|---|--:|--:|---|---|--:|--:|--:|--:|"
        for b in $benches; do
            for c in "${configs[@]}"; do
                read -r i m <<<"$c"
                id=${runs_of["$n $b $i $m"]}
                name=$i
                [[ $i == torx ]] && name="torx $m"
                busy=$(first_of "$id" 10)
                [[ $(first_of "$id" 11) == yes ]] && busy+=" (over)"
                echo "| ${b^^}.$class | $name | ${id##*.} | $busy | $(first_of "$id" 9) | $(first_of "$id" 8)" \
                    "| $(fmt "$(med "$id" 12)" 0) | $(fmt "$(med "$id" 13)" 0) | $(fmt "$(med "$id" 15)" 1)" \
                    "| $(loads_of "$id") |"
            done
        done
    done
    echo
    echo "Medians over the rounds that verified (\"-\": none did). \"vn/co per task\" below 1 is"
    echo "vn's per-task loss, \"vn/co total\" its throughput gain (the original, 32 BG/L nodes at"
    echo "class B: per task 2-20% below co, so about 2x the throughput). Busy threads: tasks, plus"
    echo "co's communication threads; \"(over)\": more than the host's CPUs. Torus: the occupied"
    echo "extents XxYxZ and tasks per node t, from the coordinates TORX_VERBOSE=2 prints. Load"
    echo "before: /proc/loadavg's 1-minute figure before the run, per round."
    echo "Mappings: $(for m in $modes; do v=MAPPING_${m^^}; printf '%s %s; ' "$m" "${!v:-${MAPPING:-XYZT}}"; done | sed 's/; $//')."
    if ((fail)); then
        echo
        echo "Failed runs:"
        for f in "${failures[@]}"; do echo "- $f"; done
    fi
} >"$section"

{
    echo "date: $when"
    echo "machine: $machine"
    echo "command: $cmd"
    echo "torx: $rev"
    echo "npb: $npb_dir, built in $(for i in $impls; do printf '%s ' "${cdir[$i]}"; done)"
    echo "loadavg start: $la_start; end: $la_end; total: $total_s s"
    echo
    cat "$section"
    echo
    echo "---- runs"
    echo "# run round bench class impl mode tasks mapping torus busy-threads oversubscribed" \
        "Mop/s-total Mop/s-task npb-secs wall-s other-load-% loadavg-before loadavg-after exit verdict"
    cat "$work/runs.txt"
    echo
    echo "---- commands"
    for id in "${run_ids[@]}"; do
        make_argv "$id"
        echo "$id: ${argv[*]}"
    done
    bench_report_rounds "$rounds" "$work" - "${run_ids[@]}"
} >"$report"

# Figure 5(a) in shape: per-task Mop/s per benchmark for heater, co and vn,
# labelled with vn's throughput gain over co. One PNG per NODES value.
pngs=()
if [[ $plot == 1 && " $impls " == *" torx "* ]] && ((pass)) && bench_have_gnuplot; then
    for n in $nodes_list; do
        dat=$work/fig-$n.dat
        cols=""
        for m in $modes; do cols+=" $m"; done
        for b in $benches; do
            line="${b^^}"
            for m in $modes; do
                id=${runs_of["$n $b torx $m"]}
                line+=" $(med "$id" 13) ${id##*.}"
            done
            per=n/a gain=n/a
            if ((has_fig5)); then
                co=${runs_of["$n $b torx co"]} vn=${runs_of["$n $b torx vn"]}
                per=$(ratio "$(med "$vn" 13)" "$(med "$co" 13)")
                gain=$(ratio "$(med "$vn" 12)" "$(med "$co" 12)")
            fi
            echo "$line $per $gain"
        done >"$dat"
        png=$results/npb-$stamp-nodes$n.png
        if bench_gnuplot "dat='$dat'; out='$png'; modes='${cols# }'; klass='$class'; nodes=$n; cpn=$cpn; subtitle='$machine, $when, load $la_start'" \
            "$here/npb-plot.gp"; then
            pngs+=("$png")
        fi
    done
fi

echo
cat "$section"
echo
echo "report: ${report#"$root"/}; table: ${section#"$root"/}${pngs[*]:+; plots: ${pngs[*]#"$root"/}}"
[[ $results == "$here/results" ]] && echo "(bench/results is ignored by git: copy what is worth keeping into bench/RESULTS.md)"
if ((fail)); then
    echo "$bench_name: FAILED runs:" >&2
    for f in "${failures[@]}"; do echo "  $f" >&2; done
fi
echo "$bench_name: $pass passed, $fail failed"
((fail == 0)) || exit 1
exit 0
}
