# gnuplot script for scripts/bench.sh: reads herd.dat from the results
# directory (set `dir` on the command line): the time per handoff against
# the number of waiting clients, one line per kind and fast wake-up setting.
set terminal pngcairo size 900,480 font ",10" noenhanced
set output dir."/herd.png"
set title "Herd: ms per handoff against waiting clients on one name"
set xlabel "waiting clients"
set ylabel "ms per handoff"
set logscale x 10
set logscale y
set xrange [0.8:130]
set key top left
set grid
set datafile missing "?"
plot for [i=2:5] dir."/herd.dat" using 1:i with linespoints lw 2 title columnheader(i)
