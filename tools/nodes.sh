#!/usr/bin/env bash
# Starts or stops N independent local redis-server nodes for the demo and for
# manual experiments (the tests start their own).
#   tools/nodes.sh start [N=5] [BASE_PORT=7001]   prints REDLOCK_NODES=...
#   tools/nodes.sh stop
# Data and logs live in ${REDLOCK_NODES_DIR:-/tmp/redlock-nodes}.
set -euo pipefail
dir=${REDLOCK_NODES_DIR:-/tmp/redlock-nodes}
cmd=${1:-start}
n=${2:-5}
base=${3:-7001}
case "$cmd" in
  start)
    mkdir -p "$dir"
    uris=()
    for ((i = 0; i < n; i++)); do
      port=$((base + i))
      mkdir -p "$dir/$port"
      if [ -f "$dir/$port/pid" ] && kill -0 "$(cat "$dir/$port/pid")" 2>/dev/null; then
        :
      else
        redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
          --dir "$dir/$port" --pidfile "$dir/$port/pid" --logfile "$dir/$port/redis.log" >/dev/null
      fi
      uris+=("redis://127.0.0.1:$port")
    done
    for ((i = 0; i < n; i++)); do
      port=$((base + i))
      for _ in $(seq 1 100); do
        redis-cli -p "$port" ping >/dev/null 2>&1 && break
        sleep 0.05
      done
      redis-cli -p "$port" ping >/dev/null || { echo "nodes: node on port $port did not start" >&2; exit 1; }
    done
    (IFS=,; echo "REDLOCK_NODES=${uris[*]}")
    ;;
  stop)
    for pidfile in "$dir"/*/pid; do
      [ -f "$pidfile" ] || continue
      kill "$(cat "$pidfile")" 2>/dev/null || true
      rm -f "$pidfile"
    done
    ;;
  *)
    echo "usage: tools/nodes.sh start [N] [BASE_PORT] | stop" >&2
    exit 64
    ;;
esac
