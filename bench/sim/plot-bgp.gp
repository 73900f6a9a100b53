# The BG/P MPI study's suite on the sim device (bench/sim/bgp-bench.sh):
# reads the sim-bgp-*.dat files that `run-sim-bench.sh bgp` writes and
# draws docs/figures/sim-bgp-*.png, the published figures beside them.
#
#   gnuplot -e "dir='bench/results'" bench/sim/plot-bgp.gp     (from the repository)
if (!exists("dir")) dir = 'bench/results'
if (!exists("figs")) figs = 'docs/figures'

set terminal pngcairo size 800,500 font ",10" noenhanced
set grid
set key top left

# ---- latency between the farthest nodes against system size -----------------
set output figs.'/sim-bgp-hops.png'
set title "BG/P: ping-pong between the farthest nodes (sim, bgp)"
set logscale x 2
set xlabel "cores (tasks in vn mode; nodes x 4 where run one task per node)"
set ylabel "half round trip, us"
set yrange [0:12]
set xrange [2:262144]
set key bottom right
# published, 0 B: about 2.8 us on one node and close to 100% slower at
# 131,072 cores (the two ends only: the figure's shape between is not given)
plot dir.'/sim-bgp-hops.dat' using 1:3 with linespoints lw 2 title "sim, 0 B", \
     '' using 1:4 with linespoints lw 2 title "sim, 1 KiB", \
     '-' using 1:2 with points pt 7 ps 1.5 title "published 0 B: about 2.8 us, about +100% at 131,072 cores"
4 2.8
131072 5.6
e
unset logscale x
set xrange [*:*]
set key top left

# ---- hot spot -----------------------------------------------------------------
set output figs.'/sim-bgp-hotspot.png'
set title "BG/P hot spot: every task ping-pongs with rank 0 (sim, bgp, vn)"
set logscale xy
set xlabel "tasks"
set ylabel "workers' mean half round trip, us"
set yrange [*:*]
plot '< awk ''$2 == 0'' '.dir.'/sim-bgp-hotspot.dat' using 1:3 with linespoints lw 2 title "sim, 0 B", \
     '< awk ''$2 == 1024'' '.dir.'/sim-bgp-hotspot.dat' using 1:3 with linespoints lw 2 title "sim, 1 KiB"
unset logscale xy

# ---- fan-out and fan-in ---------------------------------------------------------
set output figs.'/sim-bgp-fan.png'
set title "BG/P fan-out and fan-in, 1 MiB messages (sim, bgp, 8x8x8)"
set xlabel "neighbours"
set ylabel "aggregate, Mb/s"
set xrange [0.5:6.5]
set yrange [0:22000]
set xtics 1
set key bottom right
plot dir.'/sim-bgp-fan.dat' using 1:2 with linespoints lw 2 title "sim, fan-out", \
     '' using 1:3 with linespoints lw 2 title "sim, fan-in", \
     18000 with lines dt 2 lw 2 title "published fan-out peak (= the machine file's dma_bandwidth)", \
     13000 with lines dt 3 lw 2 title "published fan-in saturation"

# ---- multistream ----------------------------------------------------------------
set output figs.'/sim-bgp-multistream.png'
set title "BG/P multistream: k cores of a node each to a neighbour's (sim, bgp, vn, 8x8x8)"
set xlabel "streams"
set ylabel "aggregate, Mb/s"
set xrange [0.5:4.5]
set yrange [0:4000]
set xtics 1
set key bottom right
plot '< awk ''$1 == 65536'' '.dir.'/sim-bgp-multistream.dat' using 2:3 with linespoints lw 2 title "sim, 64 KiB", \
     '< awk ''$1 == 1048576'' '.dir.'/sim-bgp-multistream.dat' using 2:3 with linespoints lw 2 title "sim, 1 MiB", \
     3400 with lines dt 2 lw 2 title "published: the link, 425 MB/s"

# ---- two-pair congestion --------------------------------------------------------
set output figs.'/sim-bgp-congestion.png'
set title "BG/P two-pair congestion, 1 MiB messages (sim, bgp, 8x8x8)"
set xlabel ""
set ylabel "Mb/s"
set xrange [*:*]
set yrange [0:3500]
set xtics autofreq
set key top right
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.7 border -1
set boxwidth 0.9
plot '< awk ''$1 == "8x8x8-torus" && $2 == 1048576'' '.dir.'/sim-bgp-congestion.dat' \
        using 4:xtic(3) title "P0 -> P3 (through P1, P2)", \
     '' using 5 title "P1 -> P2"
