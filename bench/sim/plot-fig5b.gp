# The sim device's Fig 5(b) (bench/sim/run-sim-bench.sh fig5b, which writes
# the data), from the repository's root:
#   gnuplot bench/sim/plot-fig5b.gp
#   gnuplot -e "dir='/elsewhere'" bench/sim/plot-fig5b.gp
# reads  dir/sim-fig5b.dat  rows "bytes" then MB/s of the baseline (MPICH
#                           4.0.2's default algorithms over the message
#                           layer), the collective network and the torus
#                           bcast in co mode, then the same in heater mode
# writes docs/figures/sim-fig5b.png. The published figure is drawn as what
# the original reports: the baseline near 60 MB/s at most, the torus bcast
# at about 60% of its peak (0.6 x 3 links x 175 MB/s x 240/270 from a
# corner of the mesh) and the collective network at 350 MB/s.
if (!exists("dir")) dir = "bench/results"

set terminal pngcairo size 900,600 font "sans,10"
set grid
set output "docs/figures/sim-fig5b.png"
set title "Fig 5(b) on the sim device: bcast from root 0, bgl 4x4x2 mesh\n{/*0.8 published: MPICH's default near 60 MB/s at most, torus bcast about 280 MB/s (60% of its peak), collective network 350 MB/s}"
set logscale x 2
set format x "%.0b%BB"
set xlabel "message size"
set ylabel "MB/s (bytes / time per call)"
set yrange [0:400]
set key right center
plot dir."/sim-fig5b.dat" using 1:2 with linespoints lw 2 pt 7 lc 1 title "baseline (MPICH default), co", \
     "" using 1:5 with linespoints lw 1 pt 6 dt 2 lc 1 title "baseline, heater", \
     "" using 1:3 with linespoints lw 2 pt 5 lc 2 title "collective network, co", \
     "" using 1:6 with linespoints lw 1 pt 4 dt 2 lc 2 title "collective network, heater", \
     "" using 1:4 with linespoints lw 2 pt 9 lc 3 title "torus bcast, co", \
     "" using 1:7 with linespoints lw 1 pt 8 dt 2 lc 3 title "torus bcast, heater", \
     60 with lines dt 3 lw 1 lc 1 title "published: baseline peak", \
     280 with lines dt 3 lw 1 lc 3 title "published: torus bcast", \
     350 with lines dt 3 lw 1 lc 2 title "published: collective network"
