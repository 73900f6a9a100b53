# Message-layer figures from bench/run-msg-bench.sh, three PNGs shaped like
# the original BG/L papers' figures:
#   outlat  1-byte half round trip per protocol (bars, log scale) against the
#           one-way cache-line handoff between the same two tasks
#   outbw   bandwidth against message size, log-log, one way and both ways,
#           per protocol, with memcpy and the bare single copy
#           (process_vm_readv) of the same size as lines
#   outov   co vs heater: fraction of the rendezvous transfer overlapped
#           with the receiver's computation, per size
#
# The run script passes (gnuplot -e "..."):
#   latdat   rows "label median_ns min_ns cycles colour" (the floors are rows too)
#   bwuni, bwbi  rows "size memcpy cma cmabusy onepkt eager rzv rzvpkts
#            co_rzv co_cma" (GB/s; NaN: not measured)
#   ovdat    rows "size heater co heater_min heater_max co_min co_max"
#   handoff  one-way cache-line handoff of the heater job, ns (median)
#   outlat, outbw, outov  the PNGs to write
#   subtitle machine and date
# Missing figures are "NaN" in the data files and are simply not drawn.

if (!exists("subtitle")) subtitle = ""
set datafile missing "NaN"
stats latdat using 0 nooutput   # rows of the latency chart, before any range is set
nlat = STATS_records

# ---- 1: latency per protocol ------------------------------------------------
set terminal pngcairo size 1100,620 font "sans,10"
set output outlat
set title "torx message layer: half round trip of a 1-byte message (median, best of rounds)\n".subtitle
set ylabel "ns (log scale)"
set logscale y
set yrange [10:*]
set offsets 0, 0, graph 0.15, 0
set style fill solid 0.85 border -1
set boxwidth 0.7
set xtics rotate by -25 nomirror
set xrange [-0.6:nlat - 0.4]
set key inside top left samplen 2
set grid ytics
plot latdat using 0:2:5:xtic(1) with boxes lc rgb variable notitle, \
     ''     using 0:3 with points pt 7 ps 0.8 lc rgb "#08306b" title "min ns (bars: median ns)", \
     ''     using 0:2:(sprintf("%.0f ns\n%s cyc", $2, strcol(4))) with labels offset 0,1.6 font ",8" notitle, \
     NaN with boxes lc rgb "#999999" title "one-way cache-line handoff, same job (floor)", \
     NaN with boxes lc rgb "#1f77b4" title "heater job, 2x1x1 torus", \
     NaN with boxes lc rgb "#2ca02c" title "vn job, t=0 and t=1 of one node"
unset logscale y
unset xtics
set xtics
unset grid
set autoscale x

# ---- 2: bandwidth vs size -------------------------------------------------------
set terminal pngcairo size 1500,600 font "sans,10"
set output outbw
set multiplot layout 1,2 title "torx message layer: bandwidth vs message size (best of rounds)\n".subtitle
set logscale xy
set xlabel "message size, bytes"
set ylabel "GB/s"
set xtics ("1" 1, "16" 16, "256" 256, "4K" 4096, "64K" 65536, "1M" 1048576, "16M" 16777216, "64M" 67108864)
set xrange [0.7:1.2e8]
set yrange [0.0005:500]
set offsets 0, 0, 0, 0
set grid
set key inside top left Left reverse samplen 3 font ",9" maxrows 4
do for [i = 1:2] {
    f = (i == 1) ? bwuni : bwbi
    set title (i == 1) ? "One way (window of sends)" : "Both ways at once (sum of the directions)"
    plot f using 1:2 with lines lw 2 dt 2 lc rgb "#d62728" title "memcpy, same size", \
         f using 1:3 with lines lw 2 dt 4 lc rgb "#2ca02c" title "single copy (process\\_vm\\_readv)", \
         f using 1:5 with linespoints lw 2 pt 7 ps 0.7 lc rgb "#9467bd" title "one-packet", \
         f using 1:6 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#ff7f0e" title "eager", \
         f using 1:7 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#1f77b4" title "rendezvous, bulk get", \
         f using 1:8 with linespoints lw 2 pt 11 ps 0.8 lc rgb "#17becf" title "rendezvous, packets", \
         f using 1:9 with linespoints lw 1 pt 13 ps 0.8 lc rgb "#7f7f7f" title "co mode: rendezvous (oversubscribed)"
}
unset multiplot
unset logscale
unset xtics
set xtics
unset grid

# ---- 3: co vs heater overlap ----------------------------------------------------
set terminal pngcairo size 900,560 font "sans,10"
set output outov
set title "Rendezvous overlapped with the receiver's computation: (t_{comm} + t_{compute} - t_{total}) / t_{comm}\n".subtitle font ",9"
set xlabel "message size"
set ylabel "fraction of the transfer overlapped"
set yrange [-0.3:1.3]
set xrange [-0.6:2.6]
set style data histograms
set style histogram errorbars gap 1 lw 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set key inside top left samplen 2
set grid ytics
set xtics nomirror
plot ovdat using 2:4:5:xtic(sprintf("%g MiB", $1 / 1048576)) lc rgb "#ff7f0e" title "heater (median; bars: min..max over jobs)", \
     ''    using 3:6:7 lc rgb "#1f77b4" title "co: communication thread", \
     0 with lines lc rgb "black" notitle, \
     1 with lines dt 2 lc rgb "#2ca02c" title "full overlap"
