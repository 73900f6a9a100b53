# Collective figures from bench/run-coll-bench.sh, one PNG per call:
#   coll=bcast     the original's Figure 5(b) in shape: broadcast bandwidth
#                  (bytes per rank / time) against message size for MPICH's
#                  algorithm over torx point-to-point (torxmpich), every
#                  size on the collective network (torxcn) and on the torus
#                  with the deposit bit (torxtorus) and torx's own choice
#                  (torx), without the multi-reader staging area
#                  (torxnoms), with Debian's MPICH and Open MPI
#   coll=alltoall  Figure 6 in shape: alltoall bandwidth per rank, torx's
#                  paced alltoall against MPICH's default over torx, with
#                  the peers
# The run script passes (gnuplot -e "..."):
#   dat       rows "size <MB/s per implementation>", columns in impls order
#   impls     the implementations' names, space-separated
#   coll, np  the collective and the rank count
#   out       the PNG to write; subtitle  machine and date
if (!exists("subtitle")) subtitle = ""
set datafile missing "NaN"
set terminal pngcairo size 900,600 font "sans,10"
set output out
set logscale xy
set format x "%.0s%cB"
set xlabel "bytes per rank"
set ylabel "MB/s per rank (bytes / time)"
set grid
set key top left
name(i) = word(impls, i)
label(n) = n eq "torx" ? "torx (TORX\\_COLL=auto)" : \
           n eq "torxmpich" ? "MPICH's algorithm over torx (TORX\\_COLL=mpich)" : \
           n eq "torxcn" ? "collective network (TORX\\_COLL\\_".(coll eq "alltoall" ? "ALLTOALL" : "BCAST")."=cn)" : \
           n eq "torxtorus" ? "torus deposit bit (TORX\\_COLL\\_BCAST=torus)" : \
           n eq "torxnoms" ? "torx without the multi-reader area (TORX\\_MSTAGE\\_BYTES=0)" : \
           n eq "mpich" ? "Debian MPICH 4.0.2 (ch4:ucx)" : "Open MPI 4.1"
set title sprintf("%s, %d ranks%s\n{/*0.8 %s}", coll eq "bcast" ? "MPI\\_Bcast (Figure 5(b) in shape)" : "MPI\\_Alltoall (Figure 6 in shape)", np, np > 2 ? ", oversubscribed" : ", one per core", subtitle)
# the collective network and the deposit bit have no alltoall: leave their
# columns out there
plot for [i = 1:words(impls)] (coll eq "alltoall" && (name(i) eq "torxcn" || name(i) eq "torxtorus" || name(i) eq "torxnoms")) ? 1/0 : dat \
     using 1:(column(i + 1)) with linespoints lw 2 title label(name(i))
