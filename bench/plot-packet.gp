# Packet-layer figures from bench/run-packet-bench.sh, one PNG, three panels
# shaped like the original BG/L papers' figures: latency per payload size as
# bars against the machine's floor, streaming bandwidth against payload size
# against the copy limits, and collective latencies against the floor.
#
# The run script passes (gnuplot -e "..."):
#   latdat    rows "payload det adapt ring det_med adapt_med ring_med" (half
#             round trip, ns: min and median over samples, best of rounds)
#   bwdat     rows "payload torx_gbs ring_gbs torx_mpps ring_mpps"
#   colldat   rows "label ns"
#   handoff   one-way cache-line handoff paired with the ping-pong, ns (min)
#   handoffmed  the same, median
#   cnhandoff the same, paired with the collectives, ns
#   memcpy    memcpy 4 MiB, GB/s
#   cma       process_vm_readv 4 MiB, GB/s (0 when forbidden)
#   outfile   the PNG to write
#   subtitle  machine and date
# Missing figures are "NaN" in the data files and are simply not drawn.

if (!exists("subtitle")) subtitle = ""
set terminal pngcairo size 1650,560 font "sans,10"
set output outfile
set datafile missing "NaN"
set multiplot layout 1,3 title "torx packet layer (shm device), 2 tasks pinned to 2 cores\n".subtitle

# ---- 1: one-packet latency vs payload ------------------------------------
# Medians: the handoff's min is its luckiest sample and makes a min/min
# ratio swing; the median is the typical case (the report has both).
set title "One-packet half round trip (median, best of rounds)"
set ylabel "ns"
set xlabel "payload bytes"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set key inside top left Left reverse maxrows 5 samplen 2 font ",9"
set yrange [0:*]
set offsets 0, 0, graph 0.5, 0   # headroom above the bars for the key
set xrange [-0.6:3.6]
plot latdat using 5:xtic(1) title "torx deterministic" lc rgb "#1f77b4", \
     ''     using 6          title "torx adaptive" lc rgb "#6baed6", \
     ''     using 7          title "plain 256-B ring (paired)" lc rgb "#999999", \
     handoffmed   with lines lw 2 dt 2 lc rgb "#d62728" title sprintf("cache-line handoff (paired) %.0f ns", handoffmed), \
     2*handoffmed with lines lw 1 dt 3 lc rgb "#d62728" title "target: 2x handoff"

# ---- 2: streaming bandwidth vs payload ------------------------------------
unset xrange
set title "One-way streaming, copy out to a 4 MiB buffer"
set ylabel "payload GB/s"
set xlabel "payload bytes per packet"
set style data linespoints
set logscale y
set offsets 0, 0, 0, 0
set yrange [0.1:3000]   # room above memcpy for the key
set xrange [0:256]
set xtics (32, 64, 128, 240)
set key inside top left Left reverse maxrows 5 samplen 2 font ",9"
plot bwdat using 1:2 title "torx" lw 2 pt 7 lc rgb "#1f77b4", \
     ''    using 1:3 title "plain 256-B ring (paired)" lw 2 pt 5 lc rgb "#999999", \
     memcpy        with lines lw 2 dt 2 lc rgb "#d62728" title sprintf("memcpy 4 MiB %.1f GB/s", memcpy), \
     0.2*memcpy    with lines lw 1 dt 3 lc rgb "#d62728" title "target: 20% of memcpy", \
     (cma > 0 ? cma : 1/0) with lines lw 1 dt 4 lc rgb "#2ca02c" title sprintf("process\\_vm\\_readv 4 MiB %.1f GB/s", cma)
unset logscale y
unset xtics
set xtics

# ---- 3: collectives vs the floor ------------------------------------------
set title "Collectives, 2 tasks (min, best of rounds)"
set ylabel "ns per operation"
set xlabel ""
set style data histograms
set style histogram clustered gap 1
set boxwidth 0.8
set yrange [0:*]
set autoscale x
set offsets 0, 0, graph 0.2, 0
set key inside top left Left reverse samplen 2 font ",9"
plot colldat using 2:xtic(1) lc rgb "#1f77b4" title "ns per operation", \
     cnhandoff with lines lw 2 dt 2 lc rgb "#d62728" title sprintf("cache-line handoff (paired) %.0f ns", cnhandoff)

unset multiplot
