#!/usr/bin/env bash
# Runs MPICH's own test suite (test/mpi of the same MPICH source that
# scripts/build-mpich.sh builds) against an installed MPICH: ours with the
# torx netmod, or any other MPICH 4 (Debian's ch4:ucx, for a comparison).
#
#   scripts/mpich-testsuite.sh [--subset full|NAME] [--dirs pt2pt,coll,...]
#                              [--maxnp N] [--mpich PREFIX] [--out DIR]
#                              [--dir-time SEC] [--mpich-src DIR] [--check]
#
#   --subset    full (default): every entry of each directory's testlist.
#               NAME: the committed lists test/mpich-suite/NAME/<dir>.testlist
#               (runtests -tests=FILE); `--subset ci` is the subset that
#               scripts/test-all.sh runs (see test/mpich-suite/README).
#               Every entry of such a list must be a line of the directory's
#               testlist, or the script stops.
#   --dirs      test directories of test/mpi (default pt2pt,coll,comm,datatype,
#               rma,info,attr,errhan; with a subset: the directories it has)
#   --maxnp     most ranks per run (default 4); tests that ask for more run
#               with this many (runtests -maxnp). A subset list's line
#               "# maxnp: N" sets it for that directory.
#   --mpich     the MPICH install: PREFIX/bin/mpicc and PREFIX/bin/mpiexec.
#               Default: the last scripts/build-mpich.sh build
#               ($TORX_CACHE/current-prefix). Where PREFIX/bin has
#               mpicc.mpich (Debian: --mpich /usr, whose plain mpicc may be
#               Open MPI's), the *.mpich names are used.
#   --out       where the results go (default
#               $TORX_CACHE/testsuite-runs/<label>-<subset>-<date>): per
#               directory the build and runtests logs, TAP, JUnit and XML
#               files; summary.txt
#   --dir-time  time box per directory in seconds (default 1800): runtests
#               then starts no further test (the running one finishes), and
#               the directory is reported as incomplete
#   --mpich-src an MPICH source tree (default: the one build-mpich.sh uses,
#               $TORX_CACHE/src/mpich-*)
#   --check     exit 1 when a run failed that test/KNOWN_FAILURES does not
#               list, or when a directory did not run all its entries
#   --classify  only classify failures read from standard input (see Known
#               failures below), and exit
#
# The suite is copied once per MPICH install to
# $TORX_CACHE/testsuite-<version>-<key>/ and configured there against that
# install (--disable-spawn --disable-ft-tests --disable-fortran
# --disable-cxx). Before a directory runs, its test programs are compiled
# with make -j$TORX_JOBS (default 2); runtests then finds them built.
#
# Environment: TORX_VERBOSE=-1 is exported (silences torx's start-up
# warnings, e.g. "oversubscribed": runtests counts any stderr output as a
# failure). MPITEST_TIMEOUT (default 60 s for tests without their own limit)
# and MPITEST_TIMEOUT_MULTIPLIER (default 2: 4 ranks share 2 cores here)
# can be overridden.
#
# Known failures: test/KNOWN_FAILURES lines
#   mpich-suite DIR/TEST NP "REASON" -- why
# A failing run "DIR/TEST NP" (NP: the ranks it ran with) is known only when
# the first line of its output (as the failing-runs list prints it: e.g.
# "timeout after 121 s; ...") contains REASON, so a known test that starts
# failing another way is a failure again. A listed run that passes is
# reported too (XPASS). --classify reads "DIR/TEST NP FIRST-LINE" lines on
# standard input and prints "known" or "new" for each (test/mpich-suite/
# known-failures.sh tests the matching with it).
#
# Prints "<dir>: N passed, M failed" per directory (", K skipped" when the
# suite skipped some; "(incomplete ...)" when not every entry ran), the
# failing runs with their arguments/environment and the first line of their
# output, a total line, and last a line
#   mpich-testsuite: result: P passed, F failed, K known, S skipped, I incomplete
# (F counts the failures KNOWN_FAILURES does not list; I the incomplete
# directories). Exits 0 when it ran (failures are results; with --check see
# above), 2 on a usage or setup error.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cache=${TORX_CACHE:-$HOME/.cache/torx}
default_dirs=pt2pt,coll,comm,datatype,rma,info,attr,errhan
dirs=""
subset=full
maxnp=4
prefix=""
out=""
dir_time=1800
mpich_src=""
check=0
classify_only=0
known_file=${TORX_KNOWN_FAILURES:-$top/test/KNOWN_FAILURES}
jobs=${TORX_JOBS:-2}

die() {
    echo "mpich-testsuite: error: $*" >&2
    exit 2
}
log() { echo "mpich-testsuite: $*"; }

while [ $# -gt 0 ]; do
    case $1 in
    --subset) subset=${2:?--subset needs full or a NAME}; shift 2 ;;
    --subset=*) subset=${1#*=}; shift ;;
    --dirs) dirs=${2:?--dirs needs a list}; shift 2 ;;
    --dirs=*) dirs=${1#*=}; shift ;;
    --maxnp) maxnp=${2:?--maxnp needs N}; shift 2 ;;
    --maxnp=*) maxnp=${1#*=}; shift ;;
    --mpich) prefix=${2:?--mpich needs PREFIX}; shift 2 ;;
    --mpich=*) prefix=${1#*=}; shift ;;
    --out) out=${2:?--out needs DIR}; shift 2 ;;
    --out=*) out=${1#*=}; shift ;;
    --dir-time) dir_time=${2:?--dir-time needs SEC}; shift 2 ;;
    --dir-time=*) dir_time=${1#*=}; shift ;;
    --mpich-src) mpich_src=${2:?--mpich-src needs DIR}; shift 2 ;;
    --mpich-src=*) mpich_src=${1#*=}; shift ;;
    --check) check=1; shift ;;
    --classify) classify_only=1; shift ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
    esac
done
[[ $maxnp =~ ^[1-9][0-9]*$ ]] || die "--maxnp $maxnp: not a number"
[[ $dir_time =~ ^[1-9][0-9]*$ ]] || die "--dir-time $dir_time: not a number of seconds"

# ---- known failures ---------------------------------------------------------------
# "mpich-suite DIR/TEST NP \"REASON\" -- why" -> known[DIR/TEST NP]=REASON
declare -A known
if [ -f "$known_file" ]; then
    while IFS= read -r line; do
        [[ $line == mpich-suite[[:space:]]* ]] || continue
        if [[ $line =~ ^mpich-suite[[:space:]]+([^[:space:]]+)[[:space:]]+([0-9]+)[[:space:]]+\"([^\"]+)\"[[:space:]]+--[[:space:]] ]]; then
            known["${BASH_REMATCH[1]} ${BASH_REMATCH[2]}"]=${BASH_REMATCH[3]}
        else
            die "$known_file: '$line' is not 'mpich-suite DIR/TEST NP \"REASON\" -- why'"
        fi
    done <"$known_file"
fi
# is_known TEST NP WHY: the run is listed and failed for the listed reason
is_known() {
    local reason=${known[$1 $2]:-}
    [ -n "$reason" ] && [[ $3 == *"$reason"* ]]
}
if [ $classify_only = 1 ]; then
    while read -r t n why; do
        if is_known "$t" "$n" "$why"; then echo "known"; else echo "new"; fi
    done
    exit 0
fi

# ---- which lists ------------------------------------------------------------------
subset_dir=""
if [ "$subset" != full ]; then
    subset_dir=$top/test/mpich-suite/$subset
    [ -d "$subset_dir" ] || die "--subset $subset: no $subset_dir"
    if [ -z "$dirs" ]; then
        # the subset's directories, in the default order first
        dirs=$(
            {
                tr , '\n' <<<"$default_dirs"
                for f in "$subset_dir"/*.testlist; do basename "$f" .testlist; done
            } | awk 'NF && !seen[$0]++' | while read -r d; do
                [ -f "$subset_dir/$d.testlist" ] && echo "$d"
            done | paste -sd, -
        )
        [ -n "$dirs" ] || die "--subset $subset: no *.testlist in $subset_dir"
    fi
fi
[ -n "$dirs" ] || dirs=$default_dirs

# ---- the MPICH install ------------------------------------------------------------
if [ -z "$prefix" ]; then
    [ -f "$cache/current-prefix" ] || die "no --mpich and no $cache/current-prefix (run scripts/build-mpich.sh)"
    prefix=$(cat "$cache/current-prefix")
fi
[ -d "$prefix/bin" ] || die "--mpich $prefix: no bin/ there"
prefix=$(cd "$prefix" && pwd)
sfx=""
[ -x "$prefix/bin/mpicc.mpich" ] && sfx=.mpich
mpicc=$prefix/bin/mpicc$sfx
mpiexec=$prefix/bin/mpiexec$sfx
[ -x "$mpicc" ] || die "no $mpicc"
[ -x "$mpiexec" ] || die "no $mpiexec"
# mpichversion is not renamed by Debian; take the one beside mpicc if any.
mv=$prefix/bin/mpichversion
[ -x "$mv$sfx" ] && mv=$mv$sfx
[ -x "$mv" ] || die "no $mv: $prefix does not look like an MPICH install"
device=$("$mv" | sed -n 's/^MPICH Device:[[:space:]]*//p')
version=$("$mv" | sed -n 's/^MPICH Version:[[:space:]]*//p')
[ -n "$version" ] || die "$mv printed no MPICH version"
label=$(echo "${device:-unknown}" | tr ':/' '--')

# ---- the test suite, configured for this install ---------------------------------
if [ -z "$mpich_src" ]; then
    mpich_src=$(find "$cache/src" -maxdepth 1 -type d -name 'mpich-[0-9]*' 2>/dev/null | sort -V | tail -n 1)
    [ -n "$mpich_src" ] || die "no MPICH source in $cache/src (run scripts/build-mpich.sh, or give --mpich-src)"
fi
[ -x "$mpich_src/test/mpi/configure" ] || die "$mpich_src/test/mpi/configure missing"
srcver=$(sed -n 's/^m4_define(\[MPICH_VERSION_m4\],\[\([^]]*\)\].*/\1/p' "$mpich_src/maint/version.m4" 2>/dev/null)
[ "$srcver" = "$version" ] || log "warning: the test suite is MPICH ${srcver:-?}'s, the install is $version"
key=$(printf '%s\n' "$mpich_src" "$prefix" "$mpicc" "$mpiexec" | sha256sum | cut -c1-12)
ts=$cache/testsuite-$srcver-$key
conf=(--with-mpi="$prefix" --disable-spawn --disable-ft-tests --disable-fortran --disable-cxx
    MPICC="$mpicc" MPIEXEC="$mpiexec")
t_start=$SECONDS
if [ ! -f "$ts/.configured" ]; then
    log "configuring the test suite for $prefix ($device) in $ts (log: $ts.configure.log)"
    rm -rf "$ts" && mkdir -p "$(dirname "$ts")"
    cp -a "$mpich_src/test/mpi" "$ts" || die "cannot copy $mpich_src/test/mpi"
    (cd "$ts" && ./configure "${conf[@]}") >"$ts.configure.log" 2>&1 || {
        tail -n 30 "$ts.configure.log" >&2
        die "configure failed (log: $ts.configure.log)"
    }
    touch "$ts/.configured"
    log "configured in $((SECONDS - t_start)) s"
fi

# The entries of a list file as runtests reads them: comments and leading and
# repeated blanks removed, "!dir:target" lines and empty lines dropped.
entries() {
    sed -e 's/#.*//' -e 's/[[:space:]]\+/ /g' -e 's/^ //' -e 's/ $//' "$1" | grep -v '^$\|^!'
}

# runs DIR LIST: "SUBDIR PROGRAM" for every run of LIST in $ts/DIR, going into
# subdirectories as runtests does (an entry that is a directory: that
# directory's list of the same name).
runs() {
    local dir=$1 list=$2 p lp
    lp=$list
    [[ $lp == /* ]] || lp=$ts/$dir/$list
    [ -f "$lp" ] || return 0
    while read -r p _; do
        if [ -d "$ts/$dir/$p" ]; then
            runs "$dir/$p" "$list"
        elif [[ $p == */* ]]; then
            echo "$dir/${p%/*} ${p##*/}" # runtests runs it in that directory
        else
            echo "$dir $p"
        fi
    done < <(entries "$lp")
}

IFS=, read -r -a dirlist <<<"$dirs"
declare -A listfile
for d in "${dirlist[@]}"; do
    [ -f "$ts/$d/testlist" ] || die "no test directory $d (with a testlist) in $ts"
    if [ -z "$subset_dir" ]; then
        listfile[$d]=testlist
        continue
    fi
    lf=$subset_dir/$d.testlist
    [ -f "$lf" ] || die "--subset $subset has no list for $d ($lf)"
    [[ $lf != *,* ]] || die "$lf: runtests cannot take a path with a comma"
    # Every entry must be one of the directory's own: a subset, never a
    # changed test.
    bad=$(grep -vxF -f <(entries "$ts/$d/testlist") <(entries "$lf"))
    [ -z "$bad" ] || die "$lf: not entries of $d/testlist (MPICH $srcver):"$'\n'"$bad"
    while read -r p _; do
        [ ! -d "$ts/$d/$p" ] || die "$lf: '$p' is a directory (runtests would read this same list there)"
    done < <(entries "$lf")
    listfile[$d]=$lf
done

[ -n "$out" ] || out=$cache/testsuite-runs/$label-$subset-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out" && out=$(cd "$out" && pwd)

export TORX_VERBOSE=-1
export MPITEST_TIMEOUT=${MPITEST_TIMEOUT:-60}
export MPITEST_TIMEOUT_MULTIPLIER=${MPITEST_TIMEOUT_MULTIPLIER:-2}
log "MPICH $version ($device) at $prefix: $mpiexec"
log "suite $ts; subset $subset; results in $out"
log "maxnp $maxnp, MPITEST_TIMEOUT=$MPITEST_TIMEOUT x $MPITEST_TIMEOUT_MULTIPLIER, time box ${dir_time} s per directory"

# results FILE.junit.xml LOG: one line per run of the JUnit file, fields
# separated by \x1f (a tab would merge empty fields in read):
#   STATUS DIR/TEST NP ARGS-AND-ENV REASON
# STATUS pass, fail or skip; REASON (failures): the first telling line of the
# output, "timeout after N s" when the run took its whole time limit.
results() {
    perl -e '
        my ($junit, $log) = @ARGV;
        open(my $J, "<", $junit) or exit 0;
        my @logl = ();
        if (open(my $L, "<", $log)) { @logl = <$L>; close $L; }
        local $/; my $x = <$J>; close $J;
        while ($x =~ m{<testcase\s+name="([^"]*)"([^>]*)>(.*?)(?=<testcase\s|</testsuite>|\z)}gs) {
            my ($name, $attr, $body) = ($1, $2, $3);
            $name =~ s/^\s*\d*\s*-\s*(\.\/)?//;
            my ($test, $np, @rest) = split(/\s+/, $name);
            my $extra = join(" ", @rest);
            my $time = ($attr =~ /time="([0-9.]+)"/) ? $1 : 0;
            my ($st, $why) = ("pass", "");
            if ($body =~ /<skipped/) { $st = "skip"; }
            elsif ($body =~ /<failure/) {
                $st = "fail";
                my $tmo = ($body =~ /^\s*Timeout:\s*(\d+)/m) ? $1 : 0;
                my @out = ();
                my $in = 0;
                for my $l (split /\n/, $body) {
                    if ($l =~ /^## Test output/) { $in = 1; next; }
                    next unless $in && $l =~ s/^## ?//;
                    $l =~ s/\s+/ /g; $l =~ s/^ //; $l =~ s/ $//;
                    push @out, $l if $l ne "";
                }
                my @tell = grep { !/^=+$/ && !/^=\s/ && !/^No Errors$/ } @out;
                my @ext = grep { /EXIT (CODE|STRING)|KILLED|signal/i } @out;
                my $first = @tell ? $tell[0] : (@ext ? $ext[0] : (@out ? $out[0] : ""));
                if ($first eq "") {
                    my $p = $test; $p =~ s{.*/}{};
                    my ($st2) = grep { /^Program \Q$p\E exited with / } @logl;
                    $first = "no output";
                    if ($st2) { chomp $st2; $st2 =~ s/^Program \S+ //; $first .= ", $st2"; }
                    else { $first .= " (no \"No Errors\")"; }
                }
                if ($tmo > 0 && $time >= $tmo - 2) {
                    $first = sprintf("timeout after %d s; %s", $time, $first);
                }
                $first = substr($first, 0, 157) . "..." if length($first) > 160;
                $why = $first;
            }
            print join("\x1f", $st, $test, $np, $extra, $why), "\n";
        }' "$@"
}

tot_pass=0
tot_fail=0
tot_known=0
tot_skip=0
incomplete=0
summary=()
failures=()
xpasses=()
for d in "${dirlist[@]}"; do
    lf=${listfile[$d]}
    all_runs=$(runs "$d" "$lf")
    want=$(grep -c . <<<"$all_runs")
    start=$SECONDS

    # Compile the directory's programs first, in parallel (runtests would
    # compile them one at a time); a program that does not build is then
    # reported by runtests as a failure with the compiler output.
    make -C "$ts/util" libmtest_single.la >"$out/$d.build.log" 2>&1 </dev/null
    while read -r sub; do
        mapfile -t progs < <(awk -v s="$sub" '$1 == s { print $2 }' <<<"$all_runs" | sort -u)
        make -C "$ts/$sub" -k -j"$jobs" "${progs[@]}" >>"$out/$d.build.log" 2>&1 </dev/null
    done < <(awk '{ print $1 }' <<<"$all_runs" | sort -u)
    built=$((SECONDS - start))

    # A subset list may raise the rank cap for its directory ("# maxnp: N"),
    # so that a test that needs many ranks runs with them (oversubscribed).
    dmaxnp=$maxnp
    if [ -n "$subset_dir" ]; then
        n=$(sed -n 's/^# maxnp: *\([0-9][0-9]*\) *$/\1/p' "$subset_dir/$d.testlist" | head -n 1)
        [ -z "$n" ] || dmaxnp=$n
    fi

    stop=$out/$d.stop
    rm -f "$stop" "$out/$d.tap" "$out/$d.junit.xml" "$out/$d.xml"
    (
        cd "$ts" &&
            MPITEST_STOPTEST=$stop exec ./runtests -srcdir=. -tests="$lf" -testdirs="$d" \
                -mpiexec="$mpiexec" -maxnp="$dmaxnp" -tapfile="$out/$d.tap" \
                -junitfile="$out/$d.junit.xml" -xmlfile="$out/$d.xml"
    ) >"$out/$d.log" 2>&1 </dev/null &
    rt=$!
    # The time box: a stop file (runtests then starts no further test), and
    # if the running test does not end, a kill.
    (
        sleep "$dir_time" && echo stop >"$stop" &&
            sleep $((MPITEST_TIMEOUT * MPITEST_TIMEOUT_MULTIPLIER * 3 + 120)) &&
            kill -- "$rt" 2>/dev/null
    ) 2>/dev/null &
    wd=$!
    wait "$rt"
    pkill -P "$wd" 2>/dev/null # its sleep
    kill "$wd" 2>/dev/null
    wait "$wd" 2>/dev/null
    secs=$((SECONDS - start))

    res=$(results "$out/$d.junit.xml" "$out/$d.log")
    p=0 f=0 k=0 s=0
    while IFS=$'\x1f' read -r st test np extra why; do
        case $st in
        pass)
            p=$((p + 1))
            [ -z "${known[$test $np]:-}" ] ||
                xpasses+=("$test $np${extra:+ [$extra]} passes: remove it from test/KNOWN_FAILURES")
            ;;
        skip) s=$((s + 1)) ;;
        fail)
            if is_known "$test" "$np" "$why"; then
                k=$((k + 1))
                failures+=("$test $np${extra:+ [$extra]} -- $why (known)")
            elif [ -n "${known[$test $np]:-}" ]; then
                f=$((f + 1))
                failures+=("$test $np${extra:+ [$extra]} -- $why (listed as known for \"${known[$test $np]}\", but failed otherwise)")
            else
                f=$((f + 1))
                failures+=("$test $np${extra:+ [$extra]} -- $why")
            fi
            ;;
        esac
    done <<<"$res"
    ran=$((p + f + k + s))
    line="$d: $p passed, $((f + k)) failed"
    [ "$k" = 0 ] || line+=" ($k known)"
    [ "$s" = 0 ] || line+=", $s skipped"
    if [ "$ran" -lt "$want" ]; then
        incomplete=$((incomplete + 1))
        why="runtests stopped"
        if [ -s "$stop" ]; then
            why="time box of ${dir_time} s hit"
        elif grep -q 'Terminating test because of too many timeout' "$out/$d.log"; then
            why="runtests gave up after too many timeouts"
        elif [ ! -s "$out/$d.junit.xml" ]; then
            why="no results, see $out/$d.log"
        fi
        line+=" (incomplete: $ran of $want entries ran; $why)"
    fi
    line+=" [${secs} s, compiling ${built} s]"
    summary+=("$line")
    log "$line"
    tot_pass=$((tot_pass + p))
    tot_fail=$((tot_fail + f))
    tot_known=$((tot_known + k))
    tot_skip=$((tot_skip + s))
done

{
    echo "MPICH $version ($device) at $prefix; subset $subset; maxnp $maxnp;" \
        "MPITEST_TIMEOUT=$MPITEST_TIMEOUT x $MPITEST_TIMEOUT_MULTIPLIER"
    printf '%s\n' "${summary[@]}"
    if [ ${#failures[@]} -gt 0 ]; then
        echo "failing runs (directory/test np [args env] -- first line of the output):"
        printf '  %s\n' "${failures[@]}"
    fi
    if [ ${#xpasses[@]} -gt 0 ]; then
        echo "known failures that passed:"
        printf '  %s\n' "${xpasses[@]}"
    fi
    t="total: $tot_pass passed, $((tot_fail + tot_known)) failed"
    [ "$tot_known" = 0 ] || t+=" ($tot_known known)"
    [ "$tot_skip" = 0 ] || t+=", $tot_skip skipped"
    echo "$t [$((SECONDS - t_start)) s]"
    echo "mpich-testsuite: result: $tot_pass passed, $tot_fail failed, $tot_known known," \
        "$tot_skip skipped, $incomplete incomplete"
} | tee "$out/summary.txt"

if [ $check = 1 ] && [ $((tot_fail + incomplete)) -gt 0 ]; then
    exit 1
fi
exit 0
