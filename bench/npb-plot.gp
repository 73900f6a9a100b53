# The NAS Parallel Benchmarks in heater, co and vn mode, from
# bench/run-npb.sh: the original's Figure 5(a) in shape. Per benchmark, a
# cluster of bars, one per torx mode, each the Mop/s per task (the median
# over the rounds); above each cluster vn's throughput gain over co
# (Mop/s total, vn / co); the task count on each bar. Log scale: the
# benchmarks' rates differ by two orders of magnitude.
# The run script passes (gnuplot -e "..."):
#   dat       rows "BENCH <per-task Mop/s> <tasks> ... <ratio> <gain>", one
#             pair of columns per mode, in modes order (NaN where every
#             round failed), then vn / co per task and in total ("n/a"
#             without both)
#   modes     the modes, space-separated (e.g. "heater co vn")
#   klass     the NPB class; nodes, cpn  the node count, cores per node
#   out       the PNG to write; subtitle  machine, date and load
if (!exists("subtitle")) subtitle = ""
set datafile missing "NaN"
set terminal pngcairo size 1000,600 font "sans,10"
set output out
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics
set logscale y
set offsets 0, 0, graph 0.25, 0
set key top right
set ylabel "Mop/s per task (log scale)"
nm = words(modes)
label(m) = m eq "heater" ? "heater (1 task/node)" : \
           m eq "co" ? "co (1 task/node + communication thread)" : \
           sprintf("vn (%d tasks/node)", cpn)
colour(m) = m eq "heater" ? "#999999" : m eq "co" ? "#1f77b4" : "#d62728"
set title sprintf("NAS Parallel Benchmarks class %s, %d node%s of %d cores, torx modes (Figure 5(a) in shape)\n{/*0.8 task counts on the bars; above each group vn / co, per task and in total (throughput)}\n{/*0.8 %s}", \
                  klass, nodes, nodes > 1 ? "s" : "", cpn, subtitle)
# the tallest bar of a row, for the gain label
rowmax(dummy) = (m = 0, sum [k = 1:nm] (column(2 * k) > m ? (m = column(2 * k), 0) : 0), m)
plot for [k = 1:nm] dat using (column(2 * k)):xtic(1) title label(word(modes, k)) lc rgb colour(word(modes, k)), \
     dat using ($0):(rowmax(0)):(strcol(2 * nm + 3) eq "n/a" ? "" : strcol(2 * nm + 2)." per task\n".strcol(2 * nm + 3)." in total") \
         with labels offset 0, 2.2 font ",8" notitle, \
     for [k = 1:nm] dat using ($0 + (k - (nm + 1) / 2.0) / (nm + 1.0)):(column(2 * k)):(sprintf("%d", column(2 * k + 1))) \
         with labels offset 0, 0.5 font ",8" notitle
