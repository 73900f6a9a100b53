# The BG/P study's HALO under five mappings on the sim device: reads the
# sim-halo-16x16x16.dat that `run-sim-bench.sh halo` writes and draws
# docs/figures/sim-halo.png (docs/mapping.md#halo-on-the-modelled-torus).
#
#   gnuplot -e "dir='bench/results'" bench/sim/plot-halo.gp     (from the repository)
if (!exists("dir")) dir = 'bench/results'
if (!exists("figs")) figs = 'docs/figures'
if (!exists("part")) part = '16x16x16'

set terminal pngcairo size 800,500 font ",10" noenhanced
set output figs.'/sim-halo.png'
set title "HALO (2-D halo exchange, 4 neighbours) on bgp, ".part." torus, vn mode: 4 tasks per node (sim)"
set grid
set key top left
set logscale xy 2
set xlabel "bytes per message"
set ylabel "time per exchange, max over tasks, us (simulated)"
set format x "%.0s%cB"
f = dir.'/sim-halo-'.part.'.dat'
# the study: up to 2x between these four orders at 16K tasks, 3x at 128K
plot f using 1:2 with linespoints lw 2 pt 5 title "XYZT", \
     '' using 1:3 with linespoints lw 2 pt 7 title "TXYZ", \
     '' using 1:4 with linespoints lw 2 pt 9 title "ZYXT", \
     '' using 1:5 with linespoints lw 2 pt 11 title "TZYX", \
     '' using 1:6 with linespoints lw 2 dt 2 pt 13 lc rgb "black" title "torx-map opt (recorded traffic)", \
     '' using 1:7 with linespoints lw 2 dt 3 pt 15 lc rgb "red" title "fold (by hand: 2x2 grid blocks per node)"
