#!/bin/sh
# Draws the benchmark plots from the data files bench_e2e writes with --data-dir.
#
#   bench/plot.sh [DATA_DIR] [OUT_DIR] [DATA_DIR2 [LABEL2 [LABEL1]]]
#
# DATA_DIR (default .) holds latency_vs_nodes.dat and throughput_vs_inflight.dat;
# OUT_DIR (default docs/img) receives latency_vs_nodes.png and
# throughput_vs_inflight.png. When DATA_DIR also holds nodes.dat (bench_e2e nodes)
# or distance.dat (bench_e2e distance), cpu_vs_nodes.png and distance.png are drawn
# too; a run of only those scenarios draws only those. DATA_DIR2, if given, holds the same files from a
# second configuration (e.g. bench_e2e --clock-sample-interval 100): its library
# curves are drawn too, named LABEL2; LABEL1 then names DATA_DIR's. The floors
# drawn are DATA_DIR's. Labels go through gnuplot's enhanced text: avoid '_' and
# '^'. Needs gnuplot with the pngcairo terminal (Debian: gnuplot-nox); nothing else.
set -eu

data=${1:-.}
out=${2:-docs/img}
data2=${3:-}
label2=${4:-second configuration}
label1=${5:-}
l1=${label1:+, $label1}

if ! command -v gnuplot >/dev/null 2>&1; then
  echo "plot.sh: gnuplot not found (Debian: apt-get install gnuplot-nox)" >&2
  exit 1
fi
# The two main plots need both files (with data lines, not only the header).
has_data() { [ -s "$1" ] && grep -qv '^#' "$1"; }
main=yes
for d in "$data" ${data2:+"$data2"}; do
  for f in latency_vs_nodes.dat throughput_vs_inflight.dat; do
    has_data "$d/$f" || main=no
  done
done
if [ "$main" = no ] && ! has_data "$data/nodes.dat" && ! has_data "$data/distance.dat" && ! has_data "$data/watchdog_extends.dat"; then
  echo "plot.sh: no data in $data (run bench_e2e --data-dir $data)" >&2
  exit 1
fi
mkdir -p "$out"
if [ "$main" = yes ]; then
# Extra plot clauses for the second configuration (empty without DATA_DIR2).
lat2=""
tp2=""
if [ -n "$data2" ]; then
  lat2=", \"$data2/latency_vs_nodes.dat\" using 1:4 with linespoints lw 2 pt 11 lc rgb \"#17becf\" title \"library p50 (sync call), $label2\""
  tp2=", \"$data2/throughput_vs_inflight.dat\" using 1:2 with linespoints lw 2 pt 11 lc rgb \"#17becf\" title \"library, $label2\""
fi

gnuplot <<GNUPLOT
set terminal pngcairo size 960,600 font "DejaVu Sans,11" enhanced
set grid ytics mytics xtics lc rgb "#dddddd"
set key box opaque

set output "$out/latency_vs_nodes.png"
set title "Lock + unlock pair latency, single client, vs node count\n{/*0.8 raw hiredis parallel floor measured in the same run; TTL 30 s, uncontended keys}"
set xlabel "nodes (N)"
set ylabel "microseconds per pair (log scale)"
set key bottom right
set logscale y
set xtics (1, 3, 5, 7)
set xrange [0.5:7.5]
plot "$data/latency_vs_nodes.dat" using 1:4 with linespoints lw 2 pt 7 lc rgb "#1f77b4" title "library p50 (sync call)$l1", \
     "$data/latency_vs_nodes.dat" using 1:5 with linespoints lw 2 pt 6 dt 2 lc rgb "#1f77b4" title "library p99 (sync call)$l1", \
     "$data/latency_vs_nodes.dat" using 1:8 with linespoints lw 2 pt 9 lc rgb "#9467bd" title "library p50 (async, from the loop)$l1", \
     "$data/latency_vs_nodes.dat" using 1:2 with linespoints lw 2 pt 5 lc rgb "#2ca02c" title "parallel floor p50", \
     "$data/latency_vs_nodes.dat" using 1:3 with linespoints lw 2 pt 4 dt 2 lc rgb "#2ca02c" title "parallel floor p99", \
     "$data/latency_vs_nodes.dat" using 1:7 with linespoints lw 2 pt 13 lc rgb "#ff7f0e" title "quorum floor p50 (first N/2+1 replies)"$lat2

set output "$out/throughput_vs_inflight.png"
set title "Lock + unlock pairs per second vs operations in flight (5 nodes, distinct keys)\n{/*0.8 raw hiredis floors measured in the same run}"
set xlabel "operations in flight (log scale)"
set ylabel "pairs per second"
unset logscale y
set logscale x 2
set key bottom right
set xtics (1, 4, 16, 64, 256)
set xrange [0.7:360]
set yrange [0:*]
set format y "%.0f"
plot "$data/throughput_vs_inflight.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#1f77b4" title "library$l1", \
     "$data/throughput_vs_inflight.dat" using 1:3 with linespoints lw 2 pt 5 lc rgb "#2ca02c" title "raw floor, same batch per round", \
     "$data/throughput_vs_inflight.dat" using 1:4 with lines lw 1 dt 3 lc rgb "#2ca02c" title "raw floor, 64 pipelined", \
     "$data/throughput_vs_inflight.dat" using 1:(0.8*\$4) with lines lw 1 dt 2 lc rgb "#d62728" title "target: 0.8 x 64-pipelined floor"$tp2
GNUPLOT
echo "plot.sh: wrote $out/latency_vs_nodes.png and $out/throughput_vs_inflight.png"
fi

if has_data "$data/nodes.dat"; then
  gnuplot <<GNUPLOT
set terminal pngcairo size 960,600 font "DejaVu Sans,11" enhanced
set grid ytics xtics lc rgb "#dddddd"
set key box opaque top left
set output "$out/cpu_vs_nodes.png"
set title "Pair latency and CPU per pair vs node count (plain loopback)\n{/*0.8 single client, sync acquire + release; servers: all N redis-server processes together}"
set xlabel "nodes (N)"
set ylabel "microseconds"
set xtics (3, 5, 7, 9)
set xrange [2.5:9.5]
set yrange [0:*]
plot "$data/nodes.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#1f77b4" title "library pair p50", \
     "$data/nodes.dat" using 1:3 with linespoints lw 2 pt 5 lc rgb "#2ca02c" title "parallel floor pair p50", \
     "$data/nodes.dat" using 1:4 with linespoints lw 2 pt 9 dt 2 lc rgb "#d62728" title "server CPU per pair, library", \
     "$data/nodes.dat" using 1:5 with linespoints lw 2 pt 8 dt 2 lc rgb "#ff7f0e" title "server CPU per pair, floor", \
     "$data/nodes.dat" using 1:6 with linespoints lw 2 pt 11 dt 3 lc rgb "#9467bd" title "client CPU per pair, library"
GNUPLOT
  echo "plot.sh: wrote $out/cpu_vs_nodes.png"
fi

if has_data "$data/distance.dat"; then
  gnuplot <<GNUPLOT
set terminal pngcairo size 960,600 font "DejaVu Sans,11" enhanced
set grid ytics lc rgb "#dddddd"
set key box opaque top left
set output "$out/distance.png"
set title "Pair latency with nodes at a distance (5 nodes, per-node RTTs in ms)\n{/*0.8 network namespaces + veth on 127/8, a delay proxy process per node; limit = 2 RTTs to the 3rd nearest node}"
set ylabel "pair p50, milliseconds (log scale)"
set logscale y
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -20
plot "$data/distance.dat" using (\$3/1000):xtic(2) title "limit (2 RTTs to the quorum)" lc rgb "#7f7f7f", \
     "" using (\$4/1000) title "library" lc rgb "#1f77b4", \
     "" using (\$5/1000) title "raw client deciding at the quorum" lc rgb "#2ca02c", \
     "" using (\$6/1000) title "sequential client" lc rgb "#d62728"
GNUPLOT
  echo "plot.sh: wrote $out/distance.png"
fi

if has_data "$data/watchdog_extends.dat"; then
  # One gnuplot data block per run, titled by its "# ttl_ms T locks L" line.
  wd_plot=""
  idx=0
  while read -r _ _ ttl _ locks _; do
    wd_plot="$wd_plot${wd_plot:+, }\"$data/watchdog_extends.dat\" index $idx using 1:3 with steps lw 2 title \"TTL $((ttl / 1000)) s, $locks locks\""
    idx=$((idx + 1))
  done < <(grep '^# ttl_ms' "$data/watchdog_extends.dat")
  gnuplot <<GNUPLOT
set terminal pngcairo size 960,600 font "DejaVu Sans,11" enhanced
set grid ytics xtics lc rgb "#dddddd"
set key box opaque top right
set output "$out/watchdog_extends.png"
set title "Watchdog: extensions per second over the measured window\n{/*0.8 spread extensions keep every second near locks / (TTL/3)}"
set xlabel "second of the window"
set ylabel "extensions per second"
set yrange [0:*]
plot $wd_plot
GNUPLOT
  echo "plot.sh: wrote $out/watchdog_extends.png"
fi
