# scripts/plot_bench.gp — steps.png for `make bench`: update-phase and backward
# time of every step, one line per run (baseline-N, tierfs-N, ...), the floor
# and the pipeline model (scripts/bench_report.py) as dotted and dashed lines.
# The runs with the application changed (mlp-N, upd_plain-N, upd_mount-N)
# are dash-dotted; the updater's runs have no backward phase, so they are
# left out of the backward panel.
# Run in build/bench by scripts/bench.sh:
#   gnuplot -e "titles='baseline-1 tierfs-1 ...'; floor=1.23; model=1.5" plot_bench.gp
# steps.dat holds one data block per run (columns: step, update s, backward s).
if (!exists("titles")) titles = ""
if (!exists("floor")) floor = 0
if (!exists("model")) model = 0
set terminal pngcairo size 1400,600 noenhanced
set output "steps.png"
set multiplot layout 1,2 title "tierfs bench: time per step (lower is better)"
set grid
set key top right opaque font ",9"
set xlabel "step"
set ylabel "seconds"
set yrange [0:*]
set xtics 1
n = words(titles)
app(s) = (s[1:3] eq "mlp" || s[1:4] eq "upd_")
style(s) = (s[1:6] eq "tierfs") ? 1 : app(s) ? 4 : 2
nobwd(s) = (s[1:4] eq "upd_")
set title "update phase (read+Adam+write of every sub-group)"
set key outside right top font ",9" # many runs: beside the plot, not over it
plot for [i=1:n] "steps.dat" index (i-1) using 1:2 with linespoints \
	lw 2 dt style(word(titles,i)) title word(titles,i), \
	(floor > 0 ? floor : 1/0) with lines dt 3 lw 2 lc rgb "black" title "floor (Belady)", \
	(model > 0 ? model : 1/0) with lines dt 2 lw 2 lc rgb "gray40" title "model (DeepSpeed's pipeline)"
set title "backward (gradient writes)"
set key top right opaque font ",9"
plot for [i=1:n] "steps.dat" index (i-1) using 1:(nobwd(word(titles,i)) ? 1/0 : $3) \
	with linespoints lw 2 dt style(word(titles,i)) \
	title (nobwd(word(titles,i)) ? "" : word(titles,i))
unset multiplot
