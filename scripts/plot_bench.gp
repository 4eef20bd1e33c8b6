# scripts/plot_bench.gp — steps.png for `make bench`: update-phase and backward
# time of every step, one line per run (baseline-N, tierfs-N), the floor as a
# dashed line. Run in build/bench by scripts/bench.sh:
#   gnuplot -e "titles='baseline-1 tierfs-1 ...'; floor=1.23" plot_bench.gp
# steps.dat holds one data block per run (columns: step, update s, backward s).
if (!exists("titles")) titles = ""
if (!exists("floor")) floor = 0
set terminal pngcairo size 1100,450 noenhanced
set output "steps.png"
set multiplot layout 1,2 title "tierfs bench: time per step (lower is better)"
set grid
set key top right
set xlabel "step"
set ylabel "seconds"
set yrange [0:*]
set xtics 1
n = words(titles)
style(s) = (s[1:6] eq "tierfs") ? 1 : 2
set title "update phase (read+Adam+write of every sub-group)"
plot for [i=1:n] "steps.dat" index (i-1) using 1:2 with linespoints \
	lw 2 dt style(word(titles,i)) title word(titles,i), \
	(floor > 0 ? floor : 1/0) with lines dt 3 lw 2 lc rgb "black" title "floor (Belady)"
set title "backward (gradient writes)"
plot for [i=1:n] "steps.dat" index (i-1) using 1:3 with linespoints \
	lw 2 dt style(word(titles,i)) title word(titles,i)
unset multiplot
