#!/usr/bin/env bash
# test/multihost/hosts.sh: emulated hosts on one machine, for running MPI
# jobs "across hosts" without a cluster (root needed).
#
# A set of N hosts is:
#   - a switch: a network namespace <name>-sw holding a bridge br0 with the
#     front-end address $TMH_NET.254/24; mpiexec / mpirun run there
#     ("front");
#   - hosts 1..N: each a network namespace <name>-h<i> whose eth0 (a veth,
#     the other end vethi on br0) has $TMH_NET.<i>/24, plus a long-lived
#     init process (bash, PID 1 of its own PID namespace) holding its own
#     UTS (hostname node<i>), IPC and mount namespaces; in the mount
#     namespace a private tmpfs on /dev/shm, /proc of the host's PID
#     namespace, and /etc/hosts naming every host. Commands enter a host
#     with nsenter on that init.
# So nothing is shared between hosts but the file system (like an NFS home)
# and the kernel: no /dev/shm, SysV IPC, abstract sockets or cross-memory
# attach (the peer's pid is not visible) across hosts; bytes between hosts
# cross the veths, whose counters say how many. Every address exists only
# inside the set's namespaces; the root namespace is never touched.
#
# Usage (as root):
#   hosts.sh up N [--netem 'ARGS']  make the set (N = 1..250 hosts); with
#                              --netem, every host's eth0 gets a netem qdisc
#                              (e.g. 'delay 1ms loss 0.1%'), or any other
#                              qdisc given whole ('tbf rate 1gbit burst 64kb
#                              latency 10ms'). netem needs a kernel with
#                              CONFIG_NET_SCH_NETEM (Debian's has it; the
#                              CI VMs' 6.18 kernel does not: a clear error)
#   hosts.sh down              tear the set down: kill every process in its
#                              namespaces, delete them, remove the state
#   hosts.sh with N CMD...     a fresh set with a unique name, CMD run on the
#                              machine (not in a namespace) with the
#                              TMH_* variables below set, then torn down,
#                              also on failure or Ctrl-C; exits with CMD's
#                              status (77 when namespaces are unavailable)
#   hosts.sh run HOST CMD...   run CMD (argv, no shell) on HOST: its index
#                              (1..N), its address or its name (node<i>)
#   hosts.sh front CMD...      run CMD in the switch namespace (the front end)
#   hosts.sh mpiexec ARGS...   hydra's mpiexec in the front end with
#                              -launcher ssh -launcher-exec ns-ssh -iface br0
#                              and, unless ARGS name hosts (-hosts/-host/-f),
#                              -hosts of every host; $MPIEXEC picks the
#                              mpiexec (default mpiexec.mpich; torx's:
#                              "$(cat ~/.cache/torx/current-prefix)/bin/mpiexec")
#   hosts.sh mpirun ARGS...    Open MPI's mpirun.openmpi in the front end,
#                              daemons started by ns-ssh, TCP only on the
#                              set's subnet (see mh_ompi_args), --host of
#                              every host unless ARGS name hosts, and
#                              --bind-to none unless ARGS bind (Open MPI
#                              would bind every host's first rank to the
#                              front end's core 0, outside the host's cpuset)
#   hosts.sh counters          per host: eth0 rx_bytes tx_bytes rx_packets
#                              tx_packets
#   hosts.sh netem HOST|all ARGS|off   change (or remove) the netem qdisc
#                              on a host's eth0, e.g. 'delay 5ms' 'loss 1%'
#   hosts.sh loss HOST|all PERMILLE|off  drop that many of every 1000
#                              packets arriving on a host's eth0 (at random,
#                              an nftables rule in the host's namespace):
#                              a lossy link where the kernel lacks netem
#   hosts.sh loss-dropped      how many packets those rules have dropped
#   hosts.sh kill HOST [--procs]   make HOST vanish: its link is cut (both
#                              veth ends deleted, so nothing more leaves it,
#                              not even a FIN), every process in it is
#                              killed, its namespace deleted; an ns-ssh
#                              "connection" to it then hangs as ssh would
#                              (until TMH_SSH_HANG_S, default 3600, or until
#                              killed). --procs: kill only its processes
#                              (the kernel closes their sockets; the link
#                              and namespace stay), as when every process of
#                              a live host dies
#   hosts.sh status            the set's hosts, namespaces and processes
#   hosts.sh check-clean       exit 1 when anything of the set is left
#                              (namespace, process, state)
#
# Sourced (". hosts.sh"), it only defines the mh_* functions (mh_up,
# mh_down, mh_run, mh_front, mh_mpiexec, mh_mpirun, mh_counters,
# mh_kill, mh_netem, mh_require, ...) for tests.
#
# Environment:
#   TMH_NAME   name of the set (default tmh; "with" picks tmh<pid>); the
#              namespaces are <name>-sw and <name>-h<i>
#   TMH_NET    first three octets of the /24 (default 10.213.0): hosts .1..N,
#              front end .254
#   TMH_CPUS   which CPUs each host has: every process started in a host
#              is in a cpuset cgroup of them (cgroup v1 cpuset hierarchy at
#              /sys/fs/cgroup/cpuset, cgroup torx-mh-<name>-h<i>; without it,
#              or with TMH_CGROUP=0, only bound to them by taskset, which
#              an MPI's own binding such as -bind-to core overrides): split (default; the CPUs dealt out among
#              the hosts: with 2 CPUs and 2 hosts, one each), all, or one
#              taskset list per host, e.g. "0 1"
#   TMH_ISOLATE  full (default) or net: hosts with a network namespace
#              only (shared hostname, /dev/shm, SysV IPC, PIDs): not hosts,
#              for showing what an MPI does when they leak
#   TMH_SHM    size of each host's /dev/shm tmpfs (default 512m)
#   TMH_RUN    where the sets' state lives (default /run/torx-multihost)
# Set for commands it runs (front, mpiexec, mpirun, with) and read by ns-ssh:
#   TMH_STATE  the set's state directory
#   TMH_HOSTS  the hosts' addresses, comma-separated
#   TMH_SSH    the launcher helper (ns-ssh)
#   TMH_IFACE  the front end's interface (br0)
#   TMH_SCRIPT this script
#
# When namespaces cannot be made (not root, no CAP_SYS_ADMIN, no ip or
# unshare), "up" and "with" print "skipped: needs root and network
# namespaces" and exit 77 (automake's skip).
set -euo pipefail

MH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MH_SCRIPT=$MH_DIR/hosts.sh
MH_SSH=$MH_DIR/ns-ssh
MH_SKIP_MSG="skipped: needs root and network namespaces"

mh_log() { echo "hosts.sh: $*" >&2; }
mh_die() {
    echo "hosts.sh: error: $*" >&2
    exit 1
}

# Sets the globals describing set $TMH_NAME (state directory, namespaces).
mh_init_vars() {
    mh_name=${TMH_NAME:-tmh}
    [[ $mh_name =~ ^[A-Za-z0-9_]{1,24}$ ]] || mh_die "TMH_NAME='$mh_name': letters, digits, _ (at most 24)"
    mh_run_dir=${TMH_RUN:-/run/torx-multihost}
    mh_state=$mh_run_dir/$mh_name
    mh_sw=$mh_name-sw
    mh_net=${TMH_NET:-10.213.0}
    [[ $mh_net =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || mh_die "TMH_NET='$mh_net': three octets such as 10.213.0"
    mh_front_ip=$mh_net.254
    mh_iface=br0
    mh_isolate=${TMH_ISOLATE:-full}
    [[ $mh_isolate == full || $mh_isolate == net ]] || mh_die "TMH_ISOLATE='$mh_isolate': full or net"
    # cgroup v1 cpuset hierarchy, for the hosts' CPUs (TMH_CPUS)
    mh_cg_root=""
    if [[ ${TMH_CGROUP:-1} == 1 && -w /sys/fs/cgroup/cpuset/cpuset.mems ]]; then
        mh_cg_root=/sys/fs/cgroup/cpuset
    fi
}

# mh_probe: returns 0 when network, UTS, IPC, mount and PID namespaces,
# veths and bridges can be made here; otherwise prints why on stderr and
# returns 1.
mh_probe() {
    local t ns
    for t in ip unshare nsenter setsid timeout pgrep; do
        if ! command -v "$t" >/dev/null 2>&1; then
            echo "hosts.sh: '$t' not found (Debian: iproute2, util-linux, procps, coreutils)" >&2
            return 1
        fi
    done
    if [[ $EUID != 0 ]]; then
        echo "hosts.sh: not root" >&2
        return 1
    fi
    ns=tmhprobe$$
    if ! ip netns add "$ns" 2>/dev/null; then
        echo "hosts.sh: cannot make a network namespace (ip netns add)" >&2
        return 1
    fi
    local ok=1
    if ! ip -n "$ns" link add tmhb type bridge 2>/dev/null \
        || ! ip -n "$ns" link add tmhv0 type veth peer name tmhv1 2>/dev/null; then
        echo "hosts.sh: cannot make a bridge or a veth pair in a namespace" >&2
        ok=0
    elif ! ip netns exec "$ns" unshare --uts --ipc --mount --pid --fork --mount-proc \
        sh -c 'mount -t tmpfs tmpfs /dev/shm && hostname tmhprobe' 2>/dev/null; then
        echo "hosts.sh: cannot make UTS, IPC, mount and PID namespaces (unshare)" >&2
        ok=0
    fi
    ip netns del "$ns" 2>/dev/null || true
    ((ok))
}

# mh_require: mh_probe, or print the skip message and exit 77.
mh_require() {
    if ! mh_probe; then
        echo "$MH_SKIP_MSG"
        exit 77
    fi
}

# mh_resolve HOST: sets mh_i (index), mh_ip, mh_ns, mh_initpid for HOST (an
# index, address or node name) of the current set.
mh_resolve() {
    local h=$1 f
    [[ -d $mh_state ]] || mh_die "no set '$mh_name' ($mh_state); run 'hosts.sh up N' first (or set TMH_NAME)"
    case $h in
    node[0-9]*) h=${h#node} ;;
    "$mh_net".*) h=${h#"$mh_net".} ;;
    esac
    [[ $h =~ ^[0-9]+$ ]] || mh_die "unknown host '$1' (an index, $mh_net.<i> or node<i>)"
    f=$mh_state/host/$mh_net.$h
    [[ -f $f ]] || mh_die "no host '$1' in set '$mh_name'"
    mh_i=$h
    mh_ip=$mh_net.$h
    read -r mh_ns mh_initpid _ mh_hcpus mh_hcg mh_hiso <"$f"
    mh_nsopts=(--net --uts --ipc --mount --pid)
    [[ $mh_hiso == net ]] && mh_nsopts=(--net)
    return 0
}

# mh_count: number of hosts of the current set.
mh_count() { cat "$mh_state/n"; }

# mh_env: exports the TMH_* variables for commands run in the set.
mh_env() {
    local n i hosts=""
    n=$(mh_count)
    for ((i = 1; i <= n; i++)); do hosts+="${hosts:+,}$mh_net.$i"; done
    export TMH_NAME=$mh_name TMH_STATE=$mh_state TMH_HOSTS=$hosts TMH_SSH=$MH_SSH \
        TMH_IFACE=$mh_iface TMH_SCRIPT=$MH_SCRIPT TMH_NET=$mh_net
}

# mh_split_cpus N: sets mh_cpus[1..N], the CPU list of each host (taskset
# -c syntax) from TMH_CPUS: "split" (default): the machine's CPUs dealt out
# round-robin, host i gets those with index = i-1 mod N (when there are
# fewer CPUs than hosts, CPU (i-1) mod ncpu); "all": every CPU for every
# host; else a space-separated list of N lists, e.g. "0 1" or "0-1 2-3".
mh_split_cpus() {
    local n=$1 i c mode=${TMH_CPUS:-split} all=()
    mh_cpus=()
    read -r -a all < <(taskset -pc $$ | sed 's/.*: //' | tr ',' '\n' \
        | awk -F- '{ e = (NF > 1) ? $2 : $1; for (c = $1; c <= e; c++) printf "%d ", c } END { print "" }')
    case $mode in
    split)
        for ((i = 1; i <= n; i++)); do
            if ((${#all[@]} >= n)); then
                mh_cpus[i]=""
                for ((c = i - 1; c < ${#all[@]}; c += n)); do mh_cpus[i]+="${mh_cpus[i]:+,}${all[c]}"; done
            else
                mh_cpus[i]=${all[(i - 1) % ${#all[@]}]}
            fi
        done
        ;;
    all)
        for ((i = 1; i <= n; i++)); do mh_cpus[i]=$(taskset -pc $$ | sed 's/.*: //'); done
        ;;
    *)
        read -r -a all <<<"$mode"
        ((${#all[@]} == n)) || mh_die "TMH_CPUS='$mode': $n CPU lists wanted (or split, all)"
        for ((i = 1; i <= n; i++)); do mh_cpus[i]=${all[i - 1]}; done
        ;;
    esac
}

# mh_up N [--netem ARGS]
mh_up() {
    local n=${1:-} netem="" i ns pid t0 ip cg
    shift || true
    if [[ ${1:-} == --netem ]]; then
        netem=${2:?--netem needs its arguments, e.g. --netem "delay 1ms"}
    fi
    if ! [[ $n =~ ^[0-9]+$ ]] || ((n < 1 || n > 250)); then mh_die "up: N='$n' must be 1..250"; fi
    mh_init_vars
    mh_require
    if [[ -e $mh_state ]] || ip netns list | grep -q "^$mh_sw\b"; then
        mh_die "set '$mh_name' exists already ('hosts.sh down' first, or another TMH_NAME)"
    fi
    mh_split_cpus "$n"
    mh_created=1
    mkdir -p "$mh_state/host" "$mh_state/vanished"
    echo "$n" >"$mh_state/n"
    # From here on a failure leaves a partial set: the caller's trap (or
    # "hosts.sh down") removes it; mh_down works on partial sets.
    {
        echo "127.0.0.1 localhost"
        echo "$mh_front_ip front"
        for ((i = 1; i <= n; i++)); do echo "$mh_net.$i node$i"; done
    } >"$mh_state/etc-hosts"

    ip netns add "$mh_sw"
    ip netns exec "$mh_sw" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    ip -n "$mh_sw" link set lo up
    ip -n "$mh_sw" link add "$mh_iface" type bridge stp_state 0 forward_delay 0
    ip -n "$mh_sw" addr add "$mh_front_ip/24" dev "$mh_iface"
    ip -n "$mh_sw" link set "$mh_iface" up
    for ((i = 1; i <= n; i++)); do
        ns=$mh_name-h$i
        ip=$mh_net.$i
        ip netns add "$ns"
        # no IPv6: its router solicitations and the like would move the
        # counters that tests read
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
        ip -n "$ns" link set lo up
        ip -n "$mh_sw" link add "veth$i" type veth peer name eth0 netns "$ns"
        ip -n "$mh_sw" link set "veth$i" master "$mh_iface" up
        ip -n "$ns" addr add "$ip/24" dev eth0
        ip -n "$ns" link set eth0 up
        if [[ -n $netem ]]; then mh_netem_one "$ns" "$netem"; fi
        # The host's init: PID 1 of its PID namespace, in its own UTS, IPC
        # and mount namespaces. unshare --kill-child: if unshare dies, so does
        # the init, and with it every process of the PID namespace. setsid: no
        # terminal signals (Ctrl-C goes to the caller, whose trap tears down).
        cg=-
        if [[ -n $mh_cg_root ]]; then
            cg=$mh_cg_root/torx-mh-$ns
            mkdir "$cg"
            echo "${mh_cpus[i]}" >"$cg/cpuset.cpus"
            cat "$mh_cg_root/cpuset.mems" >"$cg/cpuset.mems"
        fi
        # TMH_ISOLATE=net: a network namespace only (for comparison).
        local uns=(--uts --ipc --mount --pid --mount-proc --propagation private)
        [[ $mh_isolate == net ]] && uns=()
        # shellcheck disable=SC2016 # expanded by those bash
        setsid bash -c '[[ $0 == - ]] || echo $$ >"$0/cgroup.procs"; exec "$@"' "$cg" \
            taskset -c "${mh_cpus[i]}" ip netns exec "$ns" unshare "${uns[@]}" --fork --kill-child \
            -- bash -c '
                if [[ $5 == full ]]; then
                    set -e
                    hostname "$1"
                    mount -t tmpfs -o "mode=1777,size=$2" tmpfs /dev/shm
                    mount --bind "$3" /etc/hosts
                fi
                set +e
                trap "exit 0" TERM
                : >"$4"
                while :; do sleep 3600 & wait $!; done' \
            tmh-init "node$i" "${TMH_SHM:-512m}" "$mh_state/etc-hosts" "$mh_state/ready.$i" "$mh_isolate" \
            </dev/null >"$mh_state/init.$i.log" 2>&1 &
        pid=$!
        disown "$pid" # no "Killed" notice from bash at teardown
        t0=$SECONDS
        while [[ ! -e $mh_state/ready.$i ]]; do
            if ! kill -0 "$pid" 2>/dev/null || ((SECONDS - t0 > 10)); then
                cat "$mh_state/init.$i.log" >&2 || true
                mh_die "host $i: its init did not start"
            fi
            sleep 0.05
        done
        local init
        init=$(pgrep -P "$pid" -x bash | head -1)
        [[ -n $init ]] || mh_die "host $i: no init process under unshare ($pid)"
        echo "$ns $init $pid ${mh_cpus[i]} $cg $mh_isolate" >"$mh_state/host/$ip"
    done
    # Every host answers the front end (a refused TCP connection is an
    # answer: the address is reachable through the bridge).
    for ((i = 1; i <= n; i++)); do
        t0=$SECONDS
        until [[ $(ip netns exec "$mh_sw" timeout 2 bash -c "echo >/dev/tcp/$mh_net.$i/9" 2>&1) == *refused* ]]; do
            ((SECONDS - t0 > 10)) && mh_die "host $i ($mh_net.$i) does not answer from the front end"
            sleep 0.2
        done
    done
    mh_log "set '$mh_name' up: $n hosts $mh_net.1..$mh_net.$n (node1..node$n), front end $mh_front_ip on $mh_iface in $mh_sw${netem:+, netem: $netem}"
}

# mh_pids_of_set: every pid in one of the set's namespaces (network
# namespace: the front end's, hosts'; PID namespace: anything under an init).
mh_pids_of_set() {
    local ns f init
    for ns in $(ip netns list 2>/dev/null | awk -v p="$mh_name-" 'index($1, p) == 1 { print $1 }'); do
        [[ $ns == "$mh_sw" || $ns =~ ^$mh_name-h[0-9]+$ ]] || continue
        ip netns pids "$ns" 2>/dev/null || true
    done
    if [[ -d $mh_state/host ]]; then
        for f in "$mh_state"/host/*; do
            [[ -f $f ]] || continue
            read -r _ init _ <"$f"
            [[ -n $init ]] && echo "$init"
        done
    fi
    # ns-ssh processes of this set that hang for a vanished host
    pgrep -f "^(/usr/bin/env )?bash $MH_SSH " 2>/dev/null | while read -r p; do
        if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "TMH_STATE=$mh_state"; then echo "$p"; fi
    done
}

# mh_down: kills every process of the set, deletes its namespaces and
# state. Safe on a partial or absent set; never fails.
mh_down() {
    mh_init_vars
    local pids ns
    for _ in 1 2 3 4 5; do
        # live ones only (a killed init stays a zombie until unshare reaps it)
        pids=$(mh_pids_of_set | sort -un | grep -vx "$$" | while read -r p; do
            [[ $(awk '{ print $3 }' "/proc/$p/stat" 2>/dev/null) =~ ^[RSDTtWP]$ ]] && echo "$p"
        done || true)
        [[ -z $pids ]] && break
        # shellcheck disable=SC2086 # a list of pids
        kill -9 $pids 2>/dev/null || true
        sleep 0.2
    done
    for ns in $(ip netns list 2>/dev/null | awk '{ print $1 }'); do
        [[ $ns == "$mh_sw" || $ns =~ ^$mh_name-h[0-9]+$ ]] || continue
        ip netns del "$ns" 2>/dev/null || mh_log "could not delete namespace $ns"
    done
    local cg
    if [[ -n $mh_cg_root ]]; then
        for cg in "$mh_cg_root/torx-mh-$mh_name"-h*; do
            [[ -d $cg ]] || continue
            for _ in 1 2 3 4 5 6 7 8 9 10; do
                rmdir "$cg" 2>/dev/null && break
                sleep 0.2
            done
            [[ -d $cg ]] && mh_log "could not remove cgroup $cg"
        done
    fi
    rm -rf "$mh_state"
    rmdir "$mh_run_dir" 2>/dev/null || true
}

# mh_check_clean: prints what is left of the set and returns 1, or returns 0.
mh_check_clean() {
    mh_init_vars
    local left=0 ns pids
    ns=$(ip netns list 2>/dev/null | awk '{ print $1 }' | grep -E "^$mh_name-(sw|h[0-9]+)$" || true)
    if [[ -n $ns ]]; then
        echo "hosts.sh: namespaces left: $(echo "$ns" | tr '\n' ' ')" >&2
        left=1
    fi
    pids=$(mh_pids_of_set | sort -un | while read -r p; do
        [[ $(awk '{ print $3 }' "/proc/$p/stat" 2>/dev/null) =~ ^[RSDTtWP]$ ]] && echo "$p"
    done || true)
    if [[ -n $pids ]]; then
        echo "hosts.sh: processes left:" >&2
        # shellcheck disable=SC2086
        ps -o pid,ppid,args -p $pids >&2 || true
        left=1
    fi
    if [[ -e $mh_state ]]; then
        echo "hosts.sh: state left: $mh_state" >&2
        left=1
    fi
    if [[ -n $mh_cg_root ]] && compgen -G "$mh_cg_root/torx-mh-$mh_name-h*" >/dev/null; then
        echo "hosts.sh: cgroups left: $(echo "$mh_cg_root/torx-mh-$mh_name"-h*)" >&2
        left=1
    fi
    return $left
}

# mh_run HOST CMD...: CMD (argv) on HOST, in the current directory.
mh_run() {
    mh_init_vars
    mh_resolve "${1:?run: HOST}"
    shift
    (($#)) || mh_die "run: no command"
    mh_env
    if [[ ${mh_exec:-0} == 1 ]]; then
        [[ $mh_hcg == - ]] || echo "$$" >"$mh_hcg/cgroup.procs"
        exec taskset -c "$mh_hcpus" nsenter -t "$mh_initpid" "${mh_nsopts[@]}" --wd="$PWD" -- "$@"
    fi
    (
        [[ $mh_hcg == - ]] || echo "$BASHPID" >"$mh_hcg/cgroup.procs"
        exec taskset -c "$mh_hcpus" nsenter -t "$mh_initpid" "${mh_nsopts[@]}" --wd="$PWD" -- "$@"
    )
}

# mh_front CMD...: CMD in the switch namespace, with the TMH_* variables.
mh_front() {
    mh_init_vars
    [[ -d $mh_state ]] || mh_die "no set '$mh_name'; run 'hosts.sh up N' first"
    (($#)) || mh_die "front: no command"
    mh_env
    # nsenter, not "ip netns exec", which mounts the namespace's own sysfs on
    # /sys and so hides /sys/fs/cgroup from ns-ssh.
    # From the command line (mh_main), exec: a signal to hosts.sh (timeout,
    # Ctrl-C) then reaches mpiexec itself rather than leaving it orphaned.
    if [[ ${mh_exec:-0} == 1 ]]; then exec nsenter --net="/run/netns/$mh_sw" -- "$@"; fi
    nsenter --net="/run/netns/$mh_sw" -- "$@"
}

# mh_has_hosts ARGS...: true when the arguments name hosts themselves.
mh_has_hosts() {
    local a
    for a in "$@"; do
        case $a in -host | -hosts | -f | -hostfile | -machinefile | --host | -H | --hostfile | --machinefile) return 0 ;; esac
    done
    return 1
}

# mh_mpiexec ARGS...: hydra's mpiexec ($MPIEXEC, default mpiexec.mpich) in
# the front end, launching through ns-ssh.
mh_mpiexec() {
    mh_init_vars
    mh_env
    local mpiexec=${MPIEXEC:-mpiexec.mpich}
    local argv=("$mpiexec" -launcher ssh -launcher-exec "$MH_SSH" -iface "$mh_iface")
    mh_has_hosts "$@" || argv+=(-hosts "$TMH_HOSTS")
    mh_front "${argv[@]}" "$@"
}

# mh_ompi_args: sets mh_ompi (argv prefix for mpirun.openmpi): daemons
# started by ns-ssh (no tree spawn: mpirun starts each itself), run as
# root allowed, out-of-band and MPI traffic over TCP on the set's subnet
# only (CIDR: the front end's br0 and the hosts' eth0).
mh_ompi_args() {
    # shellcheck disable=SC2054 # the commas are Open MPI's
    mh_ompi=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
        "${MPIRUN:-mpirun.openmpi}"
        --mca plm rsh --mca plm_rsh_agent "$MH_SSH" --mca plm_rsh_no_tree_spawn 1
        --mca oob tcp --mca oob_tcp_if_include "$mh_net.0/24"
        --mca btl tcp,self --mca btl_tcp_if_include "$mh_net.0/24"
        --mca pml ob1 --mca orte_hetero_nodes 1)
}

# mh_mpirun ARGS...: Open MPI's mpirun in the front end (see mh_ompi_args).
mh_mpirun() {
    mh_init_vars
    mh_env
    mh_ompi_args
    local argv=("${mh_ompi[@]}") a bind=0
    mh_has_hosts "$@" || argv+=(--host "$TMH_HOSTS")
    # Open MPI binds by the front end's topology (core 0 for the first rank
    # of every host), which a host's cpuset forbids: no binding by default;
    # the host's cpuset already holds its processes to its CPUs.
    for a in "$@"; do [[ $a == --bind-to || $a == -bind-to ]] && bind=1; done
    ((bind)) || argv+=(--bind-to none)
    mh_front "${argv[@]}" "$@"
}

# mh_counters: "HOST rx_bytes tx_bytes rx_packets tx_packets" per live host.
mh_counters() {
    mh_init_vars
    local n i ns s
    n=$(mh_count)
    for ((i = 1; i <= n; i++)); do
        ns=$mh_name-h$i
        if ! ip netns list | grep -q "^$ns\b"; then
            echo "$mh_net.$i - - - -"
            continue
        fi
        # shellcheck disable=SC2016 # expanded by that sh
        s=$(ip netns exec "$ns" sh -c 'cd /sys/class/net/eth0/statistics 2>/dev/null && echo $(cat rx_bytes tx_bytes rx_packets tx_packets)' || true)
        echo "$mh_net.$i ${s:-- - - -}"
    done
}

# mh_netem_one NS ARGS|off: ARGS are netem's ("delay 1ms loss 0.1%"), or
# a whole qdisc when they start with its kind ("tbf rate 1gbit burst 64kb
# latency 10ms", "netem delay 1ms").
mh_netem_one() {
    local ns=$1 args=$2 a
    if [[ $args == off ]]; then
        tc -n "$ns" qdisc del dev eth0 root 2>/dev/null || true
        return 0
    fi
    read -r -a a <<<"$args"
    case ${a[0]} in netem | tbf | htb | fq | fq_codel | pfifo | bfifo | sfq | cake | red) ;; *) a=(netem "${a[@]}") ;; esac
    if ! tc -n "$ns" qdisc replace dev eth0 root "${a[@]}"; then
        if ! tc -n "$ns" qdisc replace dev eth0 root "${a[0]}" 2>/dev/null \
            && [[ $(tc -n "$ns" qdisc replace dev eth0 root "${a[0]}" 2>&1) == *unknown* ]]; then
            mh_die "tc: this kernel has no '${a[0]}' qdisc (netem needs CONFIG_NET_SCH_NETEM; $(uname -r))"
        fi
        mh_die "tc qdisc replace dev eth0 root ${a[*]}: failed"
    fi
}

mh_loss_one() {
    local ns=$1 permille=$2
    ip netns exec "$ns" nft delete table inet tmh_loss 2>/dev/null || true
    [[ $permille == off ]] && return 0
    ip netns exec "$ns" nft -f - <<NFT || mh_die "nft: cannot add the loss rule in $ns (nf_tables?)"
table inet tmh_loss {
    chain input {
        type filter hook input priority 0; policy accept;
        iifname "eth0" numgen random mod 1000 < $permille counter drop
    }
}
NFT
}

# mh_on_hosts HOST|all FN ARG: FN NAMESPACE ARG for that host, or for each.
mh_on_hosts() {
    local h=$1 fn=$2 arg=$3 i n
    if [[ $h == all ]]; then
        n=$(mh_count)
        for ((i = 1; i <= n; i++)); do "$fn" "$mh_name-h$i" "$arg"; done
    else
        mh_resolve "$h"
        "$fn" "$mh_ns" "$arg"
    fi
}

# mh_loss HOST|all PERMILLE|off: random loss on arrival at eth0 (both ways
# when given for every host).
mh_loss() {
    mh_init_vars
    local h=${1:?loss: HOST or all} permille=${2:?loss: PERMILLE or off}
    [[ $permille == off || ($permille =~ ^[0-9]+$ && $permille -le 1000) ]] ||
        mh_die "loss: '$permille' is not 0..1000 (packets dropped per 1000) or off"
    command -v nft >/dev/null || mh_die "nft not found (nftables)"
    mh_on_hosts "$h" mh_loss_one "$permille"
}

# mh_loss_dropped: packets the loss rules of every host have dropped.
mh_loss_dropped() {
    mh_init_vars
    local i n total=0 c
    n=$(mh_count)
    for ((i = 1; i <= n; i++)); do
        # A host without the rule (loss given for others only) counts 0.
        c=$({ ip netns exec "$mh_name-h$i" nft list table inet tmh_loss 2>/dev/null || true; } |
            sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
        total=$((total + ${c:-0}))
    done
    echo "$total"
}

# mh_netem HOST|all ARGS|off
mh_netem() {
    mh_init_vars
    local h=${1:?netem: HOST or all} args=${2:?netem: ARGS or off}
    command -v tc >/dev/null || mh_die "tc not found (iproute2)"
    mh_on_hosts "$h" mh_netem_one "$args"
}

# mh_kill HOST [--procs]: see the usage at the top.
mh_kill() {
    mh_init_vars
    mh_resolve "${1:?kill: HOST}"
    local procs=0 pids
    [[ ${2:-} == --procs ]] && procs=1
    if ((!procs)); then
        # The link first, so that the host's kernel sends nothing more.
        : >"$mh_state/vanished/$mh_ip"
        ip -n "$mh_sw" link del "veth$mh_i" 2>/dev/null || true
    fi
    # SIGKILL to PID 1 of a PID namespace kills every process in it.
    kill -9 "$mh_initpid" 2>/dev/null || true
    # What is left in the network namespace: the nsenter processes in the
    # root PID namespace that started commands there.
    pids=$(ip netns pids "$mh_ns" 2>/dev/null || true)
    # shellcheck disable=SC2086
    if [[ -n $pids ]]; then kill -9 $pids 2>/dev/null || true; fi
    if ((!procs)); then
        ip netns del "$mh_ns" 2>/dev/null || true
        mh_log "host $mh_i ($mh_ip) vanished: link cut, processes killed, namespace deleted"
    else
        mh_log "host $mh_i ($mh_ip): every process killed; link and namespace kept"
    fi
}

mh_status() {
    mh_init_vars
    [[ -d $mh_state ]] || {
        echo "no set '$mh_name'"
        return 0
    }
    local n i f ns init
    n=$(mh_count)
    echo "set $mh_name: $n hosts, front end $mh_front_ip ($mh_sw, $mh_iface), state $mh_state"
    for ((i = 1; i <= n; i++)); do
        f=$mh_state/host/$mh_net.$i
        read -r ns init _ <"$f"
        if kill -0 "$init" 2>/dev/null; then
            echo "  node$i $mh_net.$i  $ns  init $init: $(nsenter -t "$init" --pid --mount ps -e --no-headers 2>/dev/null | wc -l) processes"
        else
            echo "  node$i $mh_net.$i  $ns  (down)"
        fi
    done
    echo "namespaces: $(ip netns list | awk '{ print $1 }' | grep -E "^$mh_name-" | tr '\n' ' ')"
}

# mh_with N CMD...: CMD under a fresh set, torn down afterwards.
mh_with() {
    local n=${1:?with: N} rc=0
    shift
    (($#)) || mh_die "with: no command"
    export TMH_NAME=${TMH_NAME_WITH:-tmh$$}
    mh_init_vars
    mh_require
    trap 'mh_down' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    trap 'exit 129' HUP
    mh_up "$n"
    mh_env
    "$@" || rc=$?
    mh_down
    trap - EXIT
    if ! mh_check_clean; then
        mh_log "teardown left something behind"
        ((rc == 0)) && rc=1
    fi
    return $rc
}

mh_main() {
    local cmd=${1:-}
    shift || true
    case $cmd in
    up)
        # A failed "up" removes what it made.
        trap 'rc=$?; ((rc == 0 || !${mh_created:-0})) || mh_down; exit $rc' EXIT
        trap 'exit 130' INT
        mh_up "$@"
        ;;
    down) mh_down ;;
    with) mh_with "$@" ;;
    run) mh_exec=1 mh_run "$@" ;;
    front) mh_exec=1 mh_front "$@" ;;
    mpiexec) mh_exec=1 mh_mpiexec "$@" ;;
    mpirun) mh_exec=1 mh_mpirun "$@" ;;
    counters) mh_counters ;;
    netem) mh_netem "$@" ;;
    loss) mh_loss "$@" ;;
    loss-dropped) mh_loss_dropped ;;
    kill) mh_kill "$@" ;;
    status) mh_status ;;
    check-clean) mh_check_clean ;;
    probe) mh_probe && echo "namespaces: available" ;;
    -h | --help | help | "") sed -n '2,/^set -euo/p' "$MH_SCRIPT" | sed '$d; s/^# \{0,1\}//' ;;
    *) mh_die "unknown command '$cmd' (hosts.sh help)" ;;
    esac
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    mh_main "$@"
else
    mh_init_vars
fi
