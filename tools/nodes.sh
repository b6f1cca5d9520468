#!/usr/bin/env bash
# Starts or stops N independent local redis-server nodes for the demo and for
# manual experiments (the tests start their own).
#   tools/nodes.sh start [N=5] [BASE_PORT=7001]       prints REDLOCK_NODES=...
#   tools/nodes.sh start-tls [N=5] [BASE_PORT=7101]   TLS-only nodes (--port 0): prints
#                                                     REDLOCK_NODES=rediss://... and REDLOCK_TLS_CA=...
#   tools/nodes.sh stop
# start-tls makes a throw-away CA and a server certificate (SAN localhost and
# 127.0.0.1) with the openssl CLI, once, in $dir/tls; clients verify against
# $dir/tls/ca.crt (REDLOCK_TLS_CA). Data and logs live in
# ${REDLOCK_NODES_DIR:-/tmp/redlock-nodes}.
set -euo pipefail
dir=${REDLOCK_NODES_DIR:-/tmp/redlock-nodes}
cmd=${1:-start}
n=${2:-5}
tls=0
[ "$cmd" = start-tls ] && tls=1
base=${3:-$((tls ? 7101 : 7001))}

make_certs() { # a CA and a server certificate for localhost / 127.0.0.1, kept for later runs
  local t=$dir/tls
  [ -f "$t/server.crt" ] && [ -f "$t/ca.crt" ] && return 0
  mkdir -p "$t"
  (
    cd "$t"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.crt \
      -days 30 -subj "/CN=redlock demo CA" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key -out server.csr \
      -subj "/CN=localhost" 2>/dev/null
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 30 \
      -extfile server.ext 2>/dev/null
    chmod 600 ca.key server.key
  )
}

ping_node() { # port
  if [ "$tls" = 1 ]; then
    redis-cli --tls --cacert "$dir/tls/ca.crt" -h 127.0.0.1 -p "$1" ping
  else
    redis-cli -h 127.0.0.1 -p "$1" ping
  fi
}

case "$cmd" in
  start | start-tls)
    mkdir -p "$dir"
    [ "$tls" = 1 ] && make_certs
    uris=()
    for ((i = 0; i < n; i++)); do
      port=$((base + i))
      mkdir -p "$dir/$port"
      if [ -f "$dir/$port/pid" ] && kill -0 "$(cat "$dir/$port/pid")" 2>/dev/null; then
        :
      else
        listen=(--port "$port")
        if [ "$tls" = 1 ]; then
          listen=(--port 0 --tls-port "$port" --tls-cert-file "$dir/tls/server.crt"
            --tls-key-file "$dir/tls/server.key" --tls-ca-cert-file "$dir/tls/ca.crt" --tls-auth-clients no)
        fi
        redis-server "${listen[@]}" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
          --dir "$dir/$port" --pidfile "$dir/$port/pid" --logfile "$dir/$port/redis.log" >/dev/null
      fi
      if [ "$tls" = 1 ]; then uris+=("rediss://localhost:$port"); else uris+=("redis://127.0.0.1:$port"); fi
    done
    for ((i = 0; i < n; i++)); do
      port=$((base + i))
      for _ in $(seq 1 100); do
        ping_node "$port" >/dev/null 2>&1 && break
        sleep 0.05
      done
      ping_node "$port" >/dev/null || { echo "nodes: node on port $port did not start" >&2; exit 1; }
    done
    (IFS=,; echo "REDLOCK_NODES=${uris[*]}")
    if [ "$tls" = 1 ]; then echo "REDLOCK_TLS_CA=$dir/tls/ca.crt"; fi
    ;;
  stop)
    for pidfile in "$dir"/*/pid; do
      [ -f "$pidfile" ] || continue
      kill "$(cat "$pidfile")" 2>/dev/null || true
      rm -f "$pidfile"
    done
    ;;
  *)
    echo "usage: tools/nodes.sh start [N] [BASE_PORT] | start-tls [N] [BASE_PORT] | stop" >&2
    exit 64
    ;;
esac
