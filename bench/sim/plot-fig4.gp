# The sim device's Fig 4(b) and Fig 4(c)-(f) (bench/sim/run-sim-bench.sh
# fig4b fig4cf, which write the data), from the repository's root:
#   gnuplot bench/sim/plot-fig4.gp
#   gnuplot -e "dir='/elsewhere'" bench/sim/plot-fig4.gp
# reads  dir/sim-fig4b.dat   rows "bytes co_mbps heater_mbps"
#        dir/sim-fig4cf.dat  rows "links" then MB/s of eager, rzv, adaptive
#                            in heater mode, then the same in co mode
# writes docs/figures/sim-fig4b.png and docs/figures/sim-fig4cf.png.
# The published figures are drawn as what the original reports: the net
# limit of one bidirectional link (2 x 175 MB/s x 240/270 = 311 MB/s) and
# the links' worth each protocol reached (docs/sim.md, bench/RESULTS.md).
if (!exists("dir")) dir = "bench/results"
link = 2 * 175 * 240.0 / 270

set terminal pngcairo size 900,600 font "sans,10"
set grid

# ---- Fig 4(b): one bidirectional link against message size ----
set output "docs/figures/sim-fig4b.png"
set title "Fig 4(b) on the sim device: one bidirectional link, bgl 8x8x8, auto protocol\n{/*0.8 published: about 311 MB/s, half of it near 500-byte messages}"
set logscale x 2
set format x "%.0b%BB"
set xlabel "message size"
set ylabel "MB/s, both directions"
set yrange [0:350]
set key bottom right
set arrow 1 from 500, graph 0 to 500, graph 1 nohead dt 3 lc rgb "gray40"
set label 1 "500 B" at 500, graph 0.95 offset 0.5, 0 tc rgb "gray40"
plot dir."/sim-fig4b.dat" using 1:2 with linespoints lw 2 pt 7 title "sim, co mode", \
     "" using 1:3 with linespoints lw 2 pt 5 title "sim, heater mode", \
     link with lines dt 2 lw 2 lc rgb "black" title "published net limit (311 MB/s)", \
     link / 2 with lines dt 3 lw 1 lc rgb "gray40" title "half of it"
unset arrow 1
unset label 1
unset logscale x
unset format x

# ---- Fig 4(c)-(f): 1 to 6 bidirectional links at once ----
set output "docs/figures/sim-fig4cf.png"
set title "Fig 4(c)-(f) on the sim device: rank 0 exchanging 64 KiB messages with 1-6 neighbours, bgl 8x8x8\n{/*0.8 published: eager and rendezvous about 2 links' worth, adaptive eager below 2, rendezvous with the coprocessor above 3}"
set xlabel "bidirectional links at once"
set ylabel "MB/s, all links both ways"
set xrange [0.8:6.2]
set xtics 1
set yrange [0:1500]
set key top right
plot x * link with lines dt 2 lw 1 lc rgb "black" title "links x 311 MB/s", \
     2 * link with lines dt 3 lw 2 lc rgb "dark-green" title "published: eager, rendezvous (about 2 links)", \
     3 * link with lines dt 3 lw 2 lc rgb "dark-red" title "published: rendezvous + coprocessor (above 3)", \
     dir."/sim-fig4cf.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "dark-green" title "sim (c) eager, heater", \
     "" using 1:3 with linespoints lw 2 pt 5 lc rgb "blue" title "sim (d) rendezvous, heater", \
     "" using 1:4 with linespoints lw 2 pt 9 lc rgb "orange" title "sim (e) adaptive eager, heater", \
     "" using 1:6 with linespoints lw 2 pt 7 lc rgb "dark-red" title "sim (f) rendezvous, co", \
     "" using 1:5 with linespoints lw 1 pt 6 dt 4 lc rgb "dark-green" title "sim eager, co", \
     "" using 1:7 with linespoints lw 1 pt 8 dt 4 lc rgb "orange" title "sim adaptive eager, co"
