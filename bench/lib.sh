# bench/lib.sh: shell helpers shared by the bench/run-*.sh scripts.
# Sourced, not run:
#
#   bench_name=run-foo-bench          # prefix of this script's messages
#   . "$here/lib.sh"
#
# Some helpers use the caller's globals, named where they are used: $work
# (the script's temporary directory), $root (the repository),
# $quiet_left / $quiet_each (wait_quiet), $ncpu and $hz (bench_run_timed).
# shellcheck shell=bash
# The helpers set and read the callers' globals on purpose:
# shellcheck disable=SC2034,SC2154

# ---- Arguments ------------------------------------------------------------------

# bench_handoff_probe FLOORS: the cache-line handoff between the two cores
# now, in ns (bench/floors with FLOORS_ONLY=handoff, a few ms), or NaN. On
# these VMs it tells the two vCPU placements apart: near (30-60 ns) or far
# (150+ ns), which change within seconds and move every MPI's small-message
# figures two- to three-fold.
bench_handoff_probe() {
    FLOORS_ONLY=handoff FLOORS_PINGPONG_ITERS=20000 "$1" 2>/dev/null |
        awk -F= '/^floor handoff_ns_med=/ { print $2; f = 1 } END { if (!f) print "NaN" }'
}

# bench_check_counts ENV:var ...: each variable must hold a count (digits);
# the one named "rounds" must also be at least 1. Exits 2 otherwise.
bench_check_counts() {
    local pair var
    for pair in "$@"; do
        var=${pair#*:}
        if ! [[ ${!var} =~ ^[0-9]+$ ]] || [[ $var == rounds && ${!var} == 0 ]]; then
            echo "$bench_name: ${pair%%:*}='${!var}' is not a valid count" >&2
            exit 2
        fi
    done
}

# bench_torx_prefix: torx MPICH's install prefix: TORX_PREFIX, else the path
# scripts/build-mpich.sh recorded in ~/.cache/torx/current-prefix; empty when
# neither is there.
bench_torx_prefix() { echo "${TORX_PREFIX:-$(cat "$HOME/.cache/torx/current-prefix" 2>/dev/null || true)}"; }

# bench_build_dir: sets build, the torx build directory: TORX_BUILD (relative
# to the repository $root unless absolute), by default $root/build.
bench_build_dir() {
    build=${TORX_BUILD:-$root/build}
    case $build in /*) ;; *) build=$root/$build ;; esac
}

# bench_find_prog BUILD PROG HINT: prints BUILD/bench/PROG or BUILD/PROG,
# whichever is an executable file; otherwise says so (HINT: how to build
# it) and returns 1.
bench_find_prog() {
    local cand
    for cand in "$1/bench/$2" "$1/$2"; do
        if [[ -x $cand && -f $cand ]]; then
            echo "$cand"
            return 0
        fi
    done
    echo "$bench_name: no '$2' in $1/bench or $1; $3" >&2
    return 1
}

# ---- The machine ------------------------------------------------------------------

# bench_machine: sets stamp (file names), when (date), model, ncpu, hyper,
# machine (one line for the report) and rev (git describe of $root).
bench_machine() {
    stamp=$(date +%Y%m%d-%H%M%S)
    when=$(date '+%Y-%m-%d %H:%M:%S %Z')
    model=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
    ncpu=$(lscpu 2>/dev/null | sed -n 's/^CPU(s): *//p' | head -1)
    [[ $ncpu =~ ^[0-9]+$ ]] || ncpu=$(nproc)
    hyper=$(lscpu 2>/dev/null | sed -n 's/^Hypervisor vendor: *//p' | head -1)
    machine="${model:-unknown CPU}, $ncpu CPUs${hyper:+ ($hyper guest)}, Linux $(uname -r)"
    rev=$(git -C "$root" describe --always --dirty 2>/dev/null || echo "no commit")
}

# ---- Machine load -----------------------------------------------------------------

# /proc/stat "cpu" line: busy ticks (user nice system irq softirq steal) and
# idle ticks (idle iowait). Steal counts as busy: the hypervisor took the CPU.
cpu_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6; exit }' /proc/stat; }
hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# Waits until a 0.5 s window is at least 95% idle, for at most quiet_each s
# and what is left of the caller's quiet_left budget (seconds; the caller
# sets it, usually from QUIET_WAIT_S). Returns 1 when the machine stayed busy.
wait_quiet() {
    local start=$SECONDS limit=$((quiet_left < quiet_each ? quiet_left : quiet_each)) b0 i0 b1 i1 busy tot rc=1
    while :; do
        read -r b0 i0 < <(cpu_ticks)
        sleep 0.5
        read -r b1 i1 < <(cpu_ticks)
        busy=$((b1 - b0)); tot=$((busy + i1 - i0))
        if ((tot > 0 && busy * 100 <= tot * 5)); then rc=0; break; fi
        ((SECONDS - start >= limit)) && break
    done
    quiet_left=$((quiet_left - (SECONDS - start)))
    ((quiet_left < 0)) && quiet_left=0
    return $rc
}

# bench_run_timed OUT ERR CMD...: runs CMD with stdout to OUT and stderr to
# ERR, and sets run_rc (its exit status), run_wall, run_usr, run_sys
# (seconds; user and system time include the waited-for descendants, so an
# mpiexec's ranks count), run_la0 / run_la1 (load average before / after)
# and run_other: the CPU time other processes used meanwhile, in % of all
# CPUs (busy time from /proc/stat minus the command's own user+system time).
bench_run_timed() {
    local out=$1 err=$2 b0 b1 TIMEFORMAT='%R %U %S'
    shift 2
    run_la0=$(loadavg)
    read -r b0 _ < <(cpu_ticks)
    { time "$@" >"$out" 2>"$err"; } 2>"$work/time"
    run_rc=$?
    read -r b1 _ < <(cpu_ticks)
    run_la1=$(loadavg)
    read -r run_wall run_usr run_sys <"$work/time"
    run_other=$(awk -v b="$((b1 - b0))" -v hz="$hz" -v w="$run_wall" -v u="$run_usr" -v s="$run_sys" -v n="$ncpu" \
        'BEGIN { o = (b / hz - u - s) / (w * n) * 100; if (o < 0) o = 0; printf "%.0f", o }')
}

# ---- Numbers ----------------------------------------------------------------------

# to_bytes SIZE: a size as the programs take it (8, 1K, 4M) in bytes.
to_bytes() {
    awk -v s="$1" 'BEGIN { m = 1; if (s ~ /K$/) m = 1024; if (s ~ /M$/) m = 1048576; sub(/[KM]$/, "", s); print s * m }'
}
# ratio A B [digits]: A/B, or "n/a".
ratio() {
    awk -v a="$1" -v b="$2" -v d="${3:-2}" 'BEGIN {
        if (a == "NaN" || b == "NaN" || b + 0 == 0) print "n/a"; else printf "%.*f\n", d, a / b }'
}
# human BYTES: a size for people: "512 B", "4 KiB", "1 MiB".
human() { awk -v s="$1" 'BEGIN { if (s >= 1048576) printf "%g MiB\n", s / 1048576; else if (s >= 1024) printf "%g KiB\n", s / 1024; else printf "%d B\n", s }'; }
# lookup KEY FILE [COLUMN]: column COLUMN (default 2) of FILE's lines whose
# first field is KEY, or "NaN" when there is none.
lookup() { awk -v k="$1" -v c="${3:-2}" '$1 == k { print $c; f = 1 } END { if (!f) print "NaN" }' "$2"; }
# fmt X [digits]: X rounded, or "-" when NaN or empty.
fmt() { awk -v x="$1" -v d="${2:-1}" 'BEGIN { if (x == "NaN" || x == "") print "-"; else printf "%.*f\n", d, x }'; }
# verdict RATIO LIMIT [ge|le]: "met" when RATIO >= LIMIT (ge, the default)
# or <= LIMIT (le); "MISSED" otherwise; "not measured" for n/a.
verdict() {
    awk -v x="$1" -v lim="$2" -v dir="${3:-ge}" 'BEGIN {
        if (x == "n/a") print "not measured";
        else if ((dir == "le" && x + 0 <= lim) || (dir == "ge" && x + 0 >= lim)) print "met";
        else print "MISSED" }'
}
# median_of: the median of the numbers on stdin, one or more per line
# ("NaN", "n/a" and empty words skipped), or NaN when there are none.
median_of() {
    awk '{ for (i = 1; i <= NF; i++) if ($i != "NaN" && $i != "n/a") a[++n] = $i + 0 }
         END { if (!n) { print "NaN"; exit }
               for (i = 2; i <= n; i++) { x = a[i]; j = i - 1; while (j >= 1 && a[j] > x) { a[j + 1] = a[j]; j-- } a[j + 1] = x }
               printf "%.6g\n", (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }'
}

# ---- Report -----------------------------------------------------------------------

# bench_report_rounds [--no-stderr] ROUNDS DIR LABELS ID...: prints every
# run's raw output for the report, round by round, the runs in the order
# given: for each DIR/round<R>-<ID>.out that exists, an empty line,
# "---- round R: LABEL" and the file; then, when DIR/round<R>-<ID>.err is
# not empty, "-- stderr" and that file (not with --no-stderr). LABEL is the
# ID's entry in the associative array named LABELS, or the ID itself when
# LABELS is "-".
bench_report_rounds() {
    local with_err=1 nr dir labels r id key label
    if [[ $1 == --no-stderr ]]; then with_err=0; shift; fi
    nr=$1 dir=$2 labels=$3
    shift 3
    for ((r = 1; r <= nr; r++)); do
        for id in "$@"; do
            [[ -f $dir/round$r-$id.out ]] || continue
            label=$id
            if [[ $labels != - ]]; then key="${labels}[$id]"; label=${!key}; fi
            echo
            echo "---- round $r: $label"
            cat "$dir/round$r-$id.out"
            if ((with_err)) && [[ -s $dir/round$r-$id.err ]]; then
                echo "-- stderr"
                cat "$dir/round$r-$id.err"
            fi
        done
    done
}

# ---- Plots ------------------------------------------------------------------------

# bench_have_gnuplot: true when gnuplot is installed; otherwise says so.
bench_have_gnuplot() {
    command -v gnuplot >/dev/null 2>&1 && return 0
    echo "$bench_name: gnuplot not found; no PNG (apt-get install gnuplot-nox)" >&2
    return 1
}
# bench_gnuplot DEFINITIONS SCRIPT: gnuplot -e DEFINITIONS SCRIPT; on
# failure prints gnuplot's errors and returns 1.
bench_gnuplot() {
    if gnuplot -e "$1" "$2" 2>"$work/gnuplot.err"; then
        return 0
    fi
    echo "$bench_name: gnuplot failed; no PNG:" >&2
    cat "$work/gnuplot.err" >&2
    return 1
}
