#!/usr/bin/env bash
# Issue 23's benchmark: the same `redlock bench` run over N plain nodes, then over N
# nodes that are each a Redis Cluster of S shard masters (S = 1, 2, 3), without and
# with one replica per master (the cost of replication confirmation), all in one run
# on this machine's loopback. Per configuration: pairs/s, pair p50 and p99, the
# client's CPU per pair (the redlock process's user + system time over its pairs) and
# the servers' CPU per pair (every server's utime + stime from /proc, before and after),
# with the busiest server's share (how the work spreads over the shards).
#
#   bench/deployments.sh REDLOCK_BINARY [NODES=3] [DURATION=5s] [CLIENTS=16]
#
# Every server is a child of this script on a free loopback port (21000-32000, below
# the ephemeral range), stopped by PID on exit. On a 2-core machine the servers, the
# client and its loop share two cores: the figures show the cost per pair, not the
# parallel speed-up separate hosts would give (docs/benchmarks.md says what they do).
set -euo pipefail

redlock=${1:?usage: bench/deployments.sh REDLOCK_BINARY [NODES] [DURATION] [CLIENTS]}
nodes=${2:-3}
duration=${3:-5s}
clients=${4:-16}
[ -x "$redlock" ] || { echo "deployments.sh: $redlock is not executable" >&2; exit 2; }
command -v redis-server >/dev/null && command -v redis-cli >/dev/null ||
  { echo "deployments.sh: needs redis-server and redis-cli" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/redlock-deployments.XXXXXX")
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

next_port=$((21000 + RANDOM % 8000))
got_port=0
port() { # sets got_port to a port nothing listens on (not in a subshell: it counts on)
  local i
  for ((i = 0; i < 200; i++)); do
    got_port=$next_port
    next_port=$((next_port + 1))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$got_port") 2>/dev/null; then return 0; fi
  done
  echo "deployments.sh: no free port" >&2
  return 1
}

server_pids=() # the servers of the configuration being measured
start_server() { # port, extra args...: starts redis-server, waits for PING
  local p=$1
  shift
  mkdir -p "$tmp/$p"
  redis-server --port "$p" --bind 127.0.0.1 --save "" --appendonly no --daemonize no --dir "$tmp/$p" \
    --logfile "$tmp/$p/log" "$@" &
  pids+=($!)
  server_pids+=($!)
  for ((i = 0; i < 200; i++)); do
    redis-cli -p "$p" ping >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "deployments.sh: redis-server on $p did not start" >&2
  return 1
}

stop_servers() {
  local p
  for p in "${server_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${server_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  server_pids=()
}

cluster_uri="" # set by start_cluster
start_cluster() { # shards, replicas per master: one Redis Cluster; sets cluster_uri
  local shards=$1 replicas=$2 masters=() all=() bus=() p id lo hi j r ok
  for ((j = 0; j < shards * (1 + replicas); j++)); do
    port
    p=$got_port
    port
    start_server "$p" --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000 \
      --cluster-port "$got_port"
    all+=("$p")
    bus+=("$got_port")
    [ "$j" -lt "$shards" ] && masters+=("$p")
  done
  for ((j = 0; j < shards; j++)); do # slots split evenly over the masters
    lo=$((16384 * j / shards))
    hi=$((16384 * (j + 1) / shards - 1))
    redis-cli -p "${masters[$j]}" cluster addslotsrange "$lo" "$hi" >/dev/null
  done
  j=1
  for p in "${all[@]}"; do # distinct config epochs, as redis-cli --cluster create sets them
    redis-cli -p "$p" cluster set-config-epoch "$j" >/dev/null
    j=$((j + 1))
  done
  for ((j = 1; j < ${#all[@]}; j++)); do # the bus port too: it is not port + 10000 here
    redis-cli -p "${all[0]}" cluster meet 127.0.0.1 "${all[$j]}" "${bus[$j]}" >/dev/null
  done
  for ((i = 0; i < 200; i++)); do # every node knows every other
    ok=1
    for p in "${all[@]}"; do
      [ "$(redis-cli -p "$p" cluster info | tr -d '\r' | sed -n 's/^cluster_known_nodes://p')" = "${#all[@]}" ] || ok=0
    done
    [ "$ok" = 1 ] && break
    sleep 0.05
  done
  for ((r = 0; r < shards * replicas; r++)); do # replica r follows master r % shards
    id=$(redis-cli -p "${masters[$((r % shards))]}" cluster myid)
    # known_nodes counts a node still in handshake, whose id is not known yet: until it
    # is, CLUSTER REPLICATE answers "Unknown node", so ask again until it says OK
    for ((i = 0; i < 200; i++)); do
      [ "$(redis-cli -p "${all[$((shards + r))]}" cluster replicate "$id" | tr -d '\r')" = OK ] && break
      sleep 0.05
    done
  done
  for ((i = 0; i < 400; i++)); do # cluster_state:ok everywhere, every replica's link up
    ok=1
    for p in "${all[@]}"; do
      redis-cli -p "$p" cluster info | grep -q '^cluster_state:ok' || ok=0
    done
    for p in "${all[@]:$shards}"; do
      redis-cli -p "$p" info replication | grep -q '^master_link_status:up' || ok=0
    done
    [ "$ok" = 1 ] && break
    sleep 0.05
  done
  if [ "$ok" != 1 ]; then
    echo "deployments.sh: a cluster of $shards shards did not settle:" >&2
    for p in "${all[@]}"; do
      echo "  $p: $(redis-cli -p "$p" cluster info | tr -d '\r' | grep -E '^cluster_(state|slots_assigned|known_nodes)' | paste -sd' ')" >&2
    done
    return 1
  fi
  cluster_uri="redis+cluster://127.0.0.1:${all[0]}"
}

ticks() { # the summed utime + stime (clock ticks) of the servers, then the busiest one's
  local p total=0 most=0 t
  for p in "${server_pids[@]}"; do
    t=$(awk '{ print $14 + $15 }' "/proc/$p/stat")
    total=$((total + t))
    [ "$t" -gt "$most" ] && most=$t
  done
  echo "$total $most"
}

hz=$(getconf CLK_TCK)
idle_s=2 # the servers' own cost with no client (cluster cron and bus gossip), per configuration
printf '%-34s %10s %9s %9s %12s %12s %10s %9s\n' configuration pairs/s p50_us p99_us client_us/pr server_us/pr busiest idle_core
measure() { # label, node URIs (comma-separated): one redlock bench run
  local label=$1 uris=$2 before after out t1 pairs client_us server_us share per p idle
  read -r -a before <<<"$(ticks)"
  sleep "$idle_s"
  read -r -a after <<<"$(ticks)"
  idle=$(awk -v d=$((after[0] - before[0])) -v hz="$hz" -v s="$idle_s" 'BEGIN { printf "%.1f%%", 100 * d / hz / s }')
  read -r -a before <<<"$(ticks)"
  declare -A start_ticks=()
  for p in "${server_pids[@]}"; do start_ticks[$p]=$(awk '{ print $14 + $15 }' "/proc/$p/stat"); done
  out=$(/usr/bin/time -f '%U %S' -o "$tmp/time" env REDLOCK_PREVIEW_CLUSTER=1 \
    "$redlock" bench --nodes="$uris" --clients "$clients" --resources 1000 --duration "$duration" \
    --ttl 30s --json -q)
  read -r -a after <<<"$(ticks)"
  # the busiest server over this run
  per=0
  for p in "${server_pids[@]}"; do
    t1=$(($(awk '{ print $14 + $15 }' "/proc/$p/stat") - start_ticks[$p]))
    [ "$t1" -gt "$per" ] && per=$t1
  done
  pairs=$(sed -nE 's/.*"acquired":([0-9]+).*/\1/p' <<<"$out")
  [ -n "$pairs" ] && [ "$pairs" -gt 0 ] || { echo "$label: nothing acquired: $out" >&2; return 1; }
  client_us=$(awk -v f="$(cat "$tmp/time")" -v n="$pairs" 'BEGIN { split(f, a, " "); printf "%.1f", (a[1] + a[2]) * 1e6 / n }')
  server_us=$(awk -v d=$((after[0] - before[0])) -v hz="$hz" -v n="$pairs" 'BEGIN { printf "%.1f", d * 1e6 / hz / n }')
  share=$(awk -v m="$per" -v d=$((after[0] - before[0])) 'BEGIN { if (d > 0) printf "%.0f%%", 100 * m / d; else print "-" }')
  printf '%-34s %10s %9s %9s %12s %12s %10s %9s\n' "$label" \
    "$(sed -nE 's/.*"pairs_per_s":([0-9.]+).*/\1/p' <<<"$out")" \
    "$(sed -nE 's/.*"pair":\{"p50_us":([0-9]+).*/\1/p' <<<"$out")" \
    "$(sed -nE 's/.*"pair":\{[^}]*"p99_us":([0-9]+).*/\1/p' <<<"$out")" \
    "$client_us" "$server_us" "$share" "$idle"
}

uris=()
for ((n = 0; n < nodes; n++)); do
  port
  p=$got_port
  start_server "$p"
  uris+=("redis://127.0.0.1:$p")
done
measure "$nodes plain nodes" "$(IFS=,; echo "${uris[*]}")"
stop_servers

IFS=, read -r -a shapes <<<"${REDLOCK_DEPLOY_SHAPES:-1 0,2 0,3 0,1 1,3 1}"
for shape in "${shapes[@]}"; do
  read -r shards replicas <<<"$shape"
  uris=()
  for ((n = 0; n < nodes; n++)); do
    start_cluster "$shards" "$replicas"
    uris+=("$cluster_uri")
  done
  measure "$nodes clusters x $shards shard(s), $replicas replica" "$(IFS=,; echo "${uris[*]}")"
  stop_servers
done
