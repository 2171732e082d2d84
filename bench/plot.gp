# gnuplot script for scripts/bench.sh: reads throughput.dat and handoff.dat
# from the results directory (set `dir` on the command line).
set terminal pngcairo size 1100,480 font ",10" noenhanced
set output dir."/throughput.png"
set title "Throughput on distinct names (lock+unlock cycles / s)"
set xlabel "threads"
set ylabel "cycles / s"
set logscale x 2
set xrange [0.8:20]
set xtics (1, 4, 16)
set key top left
set grid
plot for [i=2:7] dir."/throughput.dat" using 1:i with linespoints lw 2 title columnheader(i)

set output dir."/handoff.png"
unset logscale x
set title "Contended handoff: unlock() returning -> waiter's lock() returning (ms, log scale)"
set xlabel ""
set ylabel "ms"
set logscale y
set yrange [0.005:3000]
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -20 font ",8"
set key top left
plot dir."/handoff.dat" using 2:xtic(1) title "median", "" using 3 title "p99"
