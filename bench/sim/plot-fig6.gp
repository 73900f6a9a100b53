# The sim device's Fig 6 (bench/sim/run-sim-bench.sh fig6, which writes the
# data), from the repository's root:
#   gnuplot bench/sim/plot-fig6.gp
#   gnuplot -e "dir='/elsewhere'" bench/sim/plot-fig6.gp
# reads  dir/sim-fig6.dat  rows "bytes baseline_fraction paced_fraction":
#                          the fraction of the 8x8x8 mesh's cross-section
#                          bandwidth (64 links each way at 175 MB/s) that
#                          one alltoall call reached
# writes docs/figures/sim-fig6.png, with the published fractions (the
# paced alltoall close to 100%, MPICH's default about 30%).
if (!exists("dir")) dir = "bench/results"

set terminal pngcairo size 900,600 font "sans,10"
set grid
set output "docs/figures/sim-fig6.png"
set title "Fig 6 on the sim device: alltoall, bgl 8x8x8 mesh, co mode\n{/*0.8 published: paced alltoall close to 100% of the cross-section bandwidth, MPICH's default about 30%}"
set logscale x 2
set format x "%.0b%BB"
set xlabel "bytes per pair"
set ylabel "fraction of the cross-section bandwidth"
set yrange [0:1.2]
set key top left
plot dir."/sim-fig6.dat" using 1:3 with linespoints lw 2 pt 7 lc 3 title "torx paced alltoall", \
     "" using 1:2 with linespoints lw 2 pt 5 lc 1 title "baseline (MPICH default alltoall)", \
     1.0 with lines dt 3 lw 1 lc 3 title "published: paced", \
     0.3 with lines dt 3 lw 1 lc 1 title "published: MPICH default"
