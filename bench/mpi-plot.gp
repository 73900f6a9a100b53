# MPI-level figures from bench/run-mpi-bench.sh, three PNGs in the style of
# plot-msg.gp and plot-packet.gp:
#   outlat   left: half round trip vs message size, log-log, torx MPICH,
#            Debian MPICH, Open MPI, with the one-way cache-line handoff
#            (the floor); right: the original's Table 1 at MPI level, a
#            1-byte half round trip per protocol, MPI beside the message layer
#   outbw    one-way bandwidth vs message size, log-log, the three MPIs,
#            with memcpy of the same size and process_vm_readv 4 MiB
#   outbibw  the same, both ways at once (sum of the two directions)
#
# The run script passes (gnuplot -e "..."):
#   latdat      rows "size torx mpich openmpi torxvn" (ns, median over rounds)
#   bwdat, bibwdat  rows "size torx mpich openmpi torxvn" (GB/s)
#   bonepkt, bstage, beager  torx's protocol boundaries in bytes (0: unknown),
#               drawn as vertical lines: one-packet limit, staged from, eager
#               limit; bidle, the idle-pair limit, named in the eager line's
#               label
#   memcpydat   rows "size memcpy_gbs" (bench/floors)
#   protodat    rows "label mpi_ns msg_ns"
#   handoff     one-way cache-line handoff, bench/floors, ns (0: unknown)
#   msghandoff  the same, paired inside msg_pingpong, ns (0: unknown)
#   cma         process_vm_readv 4 MiB, GB/s (0: unknown or forbidden)
#   outlat, outbw, outbibw  the PNGs to write
#   subtitle    machine and date
# Missing figures are "NaN" in the data files and are simply not drawn.

if (!exists("subtitle")) subtitle = ""
if (!exists("bonepkt")) bonepkt = 0
if (!exists("bstage")) bstage = 0
if (!exists("beager")) beager = 0
if (!exists("bidle")) bidle = 0
teager = (bidle > beager) ? \
    sprintf("eager limit %d B (ping-pongs staged to %d B)", beager, bidle) : \
    sprintf("eager limit %d B (rendezvous above)", beager)
set datafile missing "NaN"

# torx's protocol boundaries as labelled vertical lines (graph height),
# marked before each plot that shows them (eval mark_boundaries); the
# one-packet limit and staged-from usually sit side by side: one line.
mark_boundaries = 'do for [i = 1:3] { \
    b = (i == 1) ? bonepkt : (i == 2) ? bstage : beager; \
    t = (i == 1) ? sprintf("one-packet limit %d B", bonepkt) : \
        (i == 2) ? sprintf("staged from %d B", bstage) : teager; \
    if (i == 2 && bonepkt > 0 && bstage > 0 && bstage > bonepkt / 1.2 && bstage < bonepkt * 1.2) { b = 0 }; \
    if (i == 1 && bstage > 0 && bstage > bonepkt / 1.2 && bstage < bonepkt * 1.2) { \
        t = sprintf("one-packet limit %d B / staged from %d B", bonepkt, bstage) }; \
    if (b > 0) { \
        set arrow i from first b, graph 0 to first b, graph 1 nohead lw 1 dt 3 lc rgb "#555555"; \
        set label i t at first b, graph 0.03 rotate by 90 left offset -0.6,0 font ",8" tc rgb "#555555" \
    } \
}'
eval mark_boundaries

# ---- 1: latency ---------------------------------------------------------------
set terminal pngcairo size 1500,600 font "sans,10"
set output outlat
set multiplot layout 1,2 title "MPI half round trip, 2 ranks on 2 cores (median over rounds)\n".subtitle

set title "Half round trip vs message size"
set logscale xy
set xlabel "message size, bytes"
set ylabel "ns (log scale)"
set xtics ("1" 1, "8" 8, "64" 64, "1K" 1024, "8K" 8192, "64K" 65536, "1M" 1048576, "4M" 4194304, "16M" 16777216)
set xrange [0.7:6e6]
set grid
set key inside top left Left reverse samplen 3 font ",9"
plot latdat using 1:2 with linespoints lw 2 pt 7 ps 0.7 lc rgb "#1f77b4" title "torx MPICH", \
     latdat using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#ff7f0e" title "Debian MPICH (ch4:ucx)", \
     latdat using 1:4 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title "Open MPI", \
     latdat using 1:5 with linespoints lw 2 pt 6 ps 0.7 lc rgb "#9467bd" title "torx MPICH, vn mode", \
     (handoff > 0 ? handoff : 1/0) with lines lw 2 dt 2 lc rgb "#d62728" \
         title sprintf("one-way cache-line handoff %.0f ns (floor)", handoff)
unset logscale
unset xtics
set xtics
set autoscale x
unset arrow
unset label

set title "1-byte half round trip per protocol (torx)"
set xlabel ""
set ylabel "ns"
set logscale y
set yrange [10:*]
set offsets 0, 0, graph 0.15, 0
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set xtics nomirror
set grid ytics
set key inside top left Left reverse samplen 2 font ",9"
plot protodat using 2:xtic(1) lc rgb "#1f77b4" title "torx MPICH, protocol forced by environment", \
     ''       using 3 lc rgb "#9ecae1" title "torx message layer (msg\\_pingpong), same protocol", \
     ''       using ($0 - 1.0/6):2:(sprintf("%.0f", $2)) with labels offset 0,0.7 font ",8" notitle, \
     ''       using ($0 + 1.0/6):3:(sprintf("%.0f", $3)) with labels offset 0,0.7 font ",8" notitle, \
     (msghandoff > 0 ? msghandoff : 1/0) with lines lw 2 dt 2 lc rgb "#d62728" \
         title sprintf("cache-line handoff, paired %.0f ns", msghandoff)
unset multiplot
unset logscale
unset offsets
set yrange [*:*]
set style data lines

# ---- 2, 3: bandwidth -----------------------------------------------------------
set terminal pngcairo size 1000,620 font "sans,10"
eval mark_boundaries
set logscale xy
set xlabel "message size, bytes"
set ylabel "GB/s (10^9 B/s, log scale)"
set xtics ("1" 1, "16" 16, "256" 256, "4K" 4096, "64K" 65536, "1M" 1048576, "4M" 4194304, "16M" 16777216, "64M" 67108864)
set xrange [0.7:7e7]
set yrange [0.001:300]
set grid
set key inside top left Left reverse samplen 3 font ",9"
do for [i = 1:2] {
    f = (i == 1) ? bwdat : bibwdat
    set output (i == 1) ? outbw : outbibw
    set title ((i == 1) ? "MPI bandwidth, one way (window of 64 messages, then a 1-byte ack; median over rounds)" \
                        : "MPI bandwidth, both ways at once (sum of the directions; median over rounds)")."\n".subtitle
    plot f using 1:2 with linespoints lw 2 pt 7 ps 0.7 lc rgb "#1f77b4" title "torx MPICH", \
         f using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#ff7f0e" title "Debian MPICH (ch4:ucx)", \
         f using 1:4 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title "Open MPI", \
         f using 1:5 with linespoints lw 2 pt 6 ps 0.7 lc rgb "#9467bd" title "torx MPICH, vn mode", \
         memcpydat using 1:2 with linespoints lw 2 dt 2 pt 1 lc rgb "#d62728" title "memcpy, same size (floors)", \
         (cma > 0 ? cma : 1/0) with lines lw 1 dt 4 lc rgb "#7f7f7f" \
             title sprintf("process\\_vm\\_readv 4 MiB %.1f GB/s (floors)", cma)
}
