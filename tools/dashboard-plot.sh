#!/usr/bin/env bash
# Draws docs/img/dashboard.png: six panels of docs/monitoring/redlock-dashboard.json
# from a real run, scraped as Prometheus would (no Grafana needed). Starts 5 local
# redis-server nodes (tools/nodes.sh, in a temporary directory), runs `redlock monitor
# --interval 1s --prometheus 127.0.0.1:PORT`, scrapes /metrics every second for 60 s
# and meanwhile: restarts node 5 empty at 10 s, pauses node 4 (SIGSTOP) at 15 s and
# resumes it at 45 s, sets node 3's maxmemory-policy to allkeys-lru at 35 s.
#
#   tools/dashboard-plot.sh [REDLOCK_BINARY=build/tools/redlock] [OUT=docs/img/dashboard.png] [BASE_PORT=7401]
#
# Needs redis-server, redis-cli, curl, awk and gnuplot (pngcairo; Debian: gnuplot-nox).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/tools/redlock}
out=${2:-docs/img/dashboard.png}
base=${3:-7401}
http_port=$((base + 50))
tmp=$(mktemp -d "${TMPDIR:-/tmp}/redlock-dashboard.XXXXXX")
export REDLOCK_NODES_DIR=$tmp/nodes
monitor=""
any_alive() { local p; for p in "$@"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
cleanup() {
  if [ -n "$monitor" ]; then kill "$monitor" 2>/dev/null || true; wait "$monitor" 2>/dev/null || true; fi
  local pids=() p _
  for port in $(seq "$base" $((base + 4))); do
    [ -f "$tmp/nodes/$port/pid" ] && pids+=("$(cat "$tmp/nodes/$port/pid")")
  done
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; done
  bash tools/nodes.sh stop || true
  for _ in $(seq 1 50); do # the nodes have exited (bounded: 5 s) before their directories go
    any_alive "${pids[@]}" || break
    sleep 0.1
  done
  rm -rf "$tmp" || true
}
trap cleanup EXIT

nodes=$(bash tools/nodes.sh start 5 "$base" | sed -n 's/^REDLOCK_NODES=//p')
"$bin" monitor --nodes "$nodes" --interval 1s --prometheus "127.0.0.1:$http_port" >/dev/null 2>"$tmp/monitor.err" &
monitor=$!
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$http_port/metrics" >/dev/null 2>&1 && break
  sleep 0.1
done

pid_of() { cat "$tmp/nodes/$1/pid"; }
t0=$(date +%s%N)
for t in $(seq 0 60); do
  case $t in
    10) redis-cli -p $((base + 4)) shutdown nosave >/dev/null 2>&1 || true
        bash tools/nodes.sh start 5 "$base" >/dev/null ;; # before the pause: it pings every node
    15) kill -STOP "$(pid_of $((base + 3)))" ;;
    35) redis-cli -p $((base + 2)) config set maxmemory-policy allkeys-lru >/dev/null ;;
    45) kill -CONT "$(pid_of $((base + 3)))" ;;
  esac
  now=$(date +%s%N)
  # "seconds-since-start sample value", one line per sample (HELP/TYPE lines dropped).
  curl -s --max-time 2 "http://127.0.0.1:$http_port/metrics" |
    awk -v t="$(((now - t0) / 1000000))" '!/^#/ && NF == 2 { print t / 1000, $1, $2 }' >>"$tmp/samples" || true
  left_ms=$((1000 - ($(date +%s%N) - now) / 1000000))
  [ "$left_ms" -gt 0 ] && sleep "0.$(printf '%03d' "$left_ms")"
done

# One data file per panel: "t value..." columns; node columns in port order.
s=$tmp/samples
node_col() { # metric [label match]: t, then one column per node (NaN where absent)
  awk -v m="$1" -v extra="${2:-}" -v base="$base" '
    { split($2, a, "{"); if (a[1] != m || (extra != "" && index($2, extra) == 0)) next
      match($2, /:[0-9]+"/); port = substr($2, RSTART + 1, RLENGTH - 2)
      if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
      v[$1, port - base] = $3 }
    END { for (i = 1; i <= n; i++) { t = order[i]; line = t
            for (k = 0; k < 5; k++) line = line " " (((t, k) in v) ? v[t, k] : "NaN")
            print line } }' "$s"
}
scalar_col() { # metric...: t, then one column per metric (every scrape)
  awk -v list="$*" '
    BEGIN { c = split(list, ms, " ") }
    { if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
      for (i = 1; i <= c; i++) if ($2 == ms[i]) v[$1, i] = $3 }
    END { for (j = 1; j <= n; j++) { t = order[j]; line = t
            for (i = 1; i <= c; i++) line = line " " (((t, i) in v) ? v[t, i] : "NaN")
            print line } }' "$s"
}
node_col redlock_monitor_node_up >"$tmp/up.dat"
node_col redlock_monitor_node_quarantined >"$tmp/quarantined.dat"
node_col redlock_monitor_node_eviction_risk >"$tmp/eviction.dat"
node_col redlock_monitor_node_rtt_seconds 'quantile="0.99"' >"$tmp/rtt.dat"
scalar_col redlock_monitor_quorum_ok redlock_monitor_voting_nodes redlock_monitor_quorum redlock_monitor_warnings >"$tmp/quorum.dat"
scalar_col redlock_monitor_lock_pair_seconds >"$tmp/lockpair.dat"
# Acquisitions per second by outcome, from the counter's increase between scrapes.
awk '$2 ~ /^redlock_operations_total\{op="acquire"/ {
       match($2, /outcome="[a-z_]+"/); o = substr($2, RSTART + 9, RLENGTH - 10)
       if ((o in last) && $1 > lt[o]) print o, $1, ($3 - last[o]) / ($1 - lt[o])
       last[o] = $3; lt[o] = $1 }' "$s" >"$tmp/acquires.dat"

others=""
if grep -qv '^ok ' "$tmp/acquires.dat"; then
  others=", \"< grep -v '^ok ' $tmp/acquires.dat\" using 2:3 with impulses lw 3 lc rgb \"#d62728\" title \"other outcomes\""
fi

mkdir -p "$(dirname "$out")"
gnuplot <<GNUPLOT
set terminal pngcairo size 1200,900 font "DejaVu Sans,10" enhanced
set output "$out"
set multiplot layout 3,2 title "Panels of docs/monitoring/redlock-dashboard.json from 60 s of a real run of redlock monitor --prometheus\n{/*0.9 5 nodes: node 5 restarted empty at 10 s (quarantined), node 4 paused 15-45 s, node 3 set to allkeys-lru at 35 s}" font ",11"
set grid lc rgb "#dddddd"
set key top left horizontal font ",8"
set xrange [0:60]
set xlabel "s"
set style data steps
colors = "#1f77b4 #ff7f0e #2ca02c #d62728 #9467bd"
node(i) = sprintf("node %d (:%d)", i + 1, $base + i)

set title "Quorum: voting nodes, quorum needed, warnings"
set yrange [-0.2:5.8]
plot "$tmp/quorum.dat" using 1:3 lw 2 lc rgb "#2ca02c" title "voting nodes", \
     "" using 1:4 lw 2 dt 2 lc rgb "#d62728" title "quorum", \
     "" using 1:5 lw 1 lc rgb "#ff7f0e" title "warnings", \
     "" using 1:(\$2 * 0.3) with filledcurves y1=0 lc rgb "#a02ca02c" title "quorum ok"

set title "Node up (monitor PING), one lane per node"
set yrange [-0.3:5]
set ytics ("node 1" 0.4, "node 2" 1.4, "node 3" 2.4, "node 4" 3.4, "node 5" 4.4)
plot for [k=0:4] "$tmp/up.dat" using 1:(column(k + 2) * 0.8 + k) lw 2 lc rgb word(colors, k + 1) notitle
set ytics autofreq

set title "PING round trip p99 (last 60 replies), ms"
set yrange [*:*]
set logscale y
plot for [k=0:4] "$tmp/rtt.dat" using 1:(column(k + 2) * 1000) lw 2 lc rgb word(colors, k + 1) title node(k)
unset logscale y

set title "Test lock acquire + release, ms"
set yrange [0:*]
plot "$tmp/lockpair.dat" using 1:(\$2 * 1000) lw 2 lc rgb "#1f77b4" title "lock pair"

set title "Quarantined (solid) and eviction risk (dashed), one lane per node"
set yrange [-0.3:5]
set ytics ("node 1" 0.4, "node 2" 1.4, "node 3" 2.4, "node 4" 3.4, "node 5" 4.4)
plot for [k=0:4] "$tmp/quarantined.dat" using 1:(column(k + 2) * 0.8 + k) lw 2 lc rgb word(colors, k + 1) notitle, \
     for [k=0:4] "$tmp/eviction.dat" using 1:(column(k + 2) * 0.6 + k) lw 2 dt 2 lc rgb word(colors, k + 1) notitle
set ytics autofreq

set title "Acquisitions by outcome (the monitor's client), per second"
set yrange [0:*]
plot "< grep '^ok ' $tmp/acquires.dat" using 2:3 lw 2 lc rgb "#2ca02c" title "ok"$others
unset multiplot
GNUPLOT
echo "dashboard-plot: wrote $out from $(wc -l <"$s") samples"
