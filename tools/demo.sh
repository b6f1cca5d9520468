#!/usr/bin/env bash
# The README's first command: install dependencies, build, start 5 local Redis
# nodes, demonstrate a lock (library demo, then `redlock run` guarding a command),
# then the same over TLS (5 TLS-only nodes, certificates verified against a
# throw-away CA), and stop the nodes again.
set -euo pipefail
cd "$(dirname "$0")/.."
REDLOCK_DEPS_VALKEY=0 bash tools/deps.sh  # Valkey is for the tests only
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREDLOCK_BUILD_TESTS=OFF -DREDLOCK_BUILD_BENCH=OFF >/dev/null
cmake --build build -j"$(nproc)" --target redlock_demo redlock_cli >/dev/null
trap 'bash tools/nodes.sh stop' EXIT
eval "$(bash tools/nodes.sh start 5 7001 | sed 's/^/export /')"
echo "== nodes: $REDLOCK_NODES"
./build/redlock_demo
echo
echo "== redlock run: a job that must run on one host only"
./build/tools/redlock run nightly-report --ttl 5s --fencing -- sh -c 'echo "  job running on $(hostname) with fence $REDLOCK_FENCE"; sleep 1; echo "  job done"'
echo "== while it is not running, the lock is free:"
./build/tools/redlock status nightly-report
echo
eval "$(bash tools/nodes.sh start-tls 5 7101 | sed 's/^/export /')"
echo "== TLS: 5 TLS-only nodes, verified against $REDLOCK_TLS_CA (REDLOCK_TLS_CA)"
echo "   nodes: $REDLOCK_NODES"
./build/tools/redlock run nightly-report --ttl 5s -- sh -c 'echo "  job running over TLS"'
