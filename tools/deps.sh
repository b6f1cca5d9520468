#!/usr/bin/env bash
# Installs what building and testing redlock needs on Debian 12 (as root, or with sudo).
# Skips the install when everything is present already, then builds Valkey 8.0.1 from
# ../shared/servers/ once (tools/valkey.sh: cached, keyed by the tarball's sha256; the
# tests run chosen scenarios on Valkey nodes too). (systemd: systemd-analyze
# verifies docs/cli.md's unit and timer, tests/cli/cli_test.cc; zsh and fish: the
# syntax checks of the generated completions, tests/cli/cli_args_test.cc; prometheus: its
# promtool checks docs/monitoring/ and the monitor's /metrics, tests/CMakeLists.txt; nodejs
# and npm: the node-redlock interop tests, tests/interop/; npm installs node-redlock itself
# there, from tests/interop/package-lock.json; lintian: the Debian packages' check,
# tools/consumer-test.sh.)
set -euo pipefail
pkgs=(build-essential cmake pkg-config redis-server libhiredis-dev libuv1-dev libgtest-dev libgmock-dev
      libbenchmark-dev clang libclang-rt-14-dev gnuplot-nox spin libssl-dev openssl curl
      systemd zsh fish prometheus lintian)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js by command, not by package: a node from elsewhere (one that bundles npm) will do,
# and Debian's npm package would conflict with it.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi
# REDLOCK_DEPS_VALKEY=0: not Valkey (the demo needs no test server, and a user's machine
# has no shared/servers/ tarball to build it from).
valkey() { [ "${REDLOCK_DEPS_VALKEY:-1}" = 0 ] || bash "$(dirname "$0")/valkey.sh" >/dev/null; }
if [ ${#missing[@]} -eq 0 ]; then
  valkey
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
# Valkey's build needs only build-essential and libssl-dev: when the machine has both, it
# compiles while apt installs the rest (about 70 s of a fresh machine's setup saved).
valkey_pid=""
if ! printf '%s\n' "${missing[@]}" | grep -qxE 'build-essential|libssl-dev'; then
  valkey &
  valkey_pid=$!
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The packaged redis-server service is not used: tests and the demo start their own.
# Nor is the prometheus server's (only its promtool is).
for svc in redis-server prometheus; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
    $SUDO systemctl stop "$svc" || true
  fi
done
if [ -n "$valkey_pid" ]; then wait "$valkey_pid"; else valkey; fi
