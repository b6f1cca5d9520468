#!/usr/bin/env bash
# Installs what building and testing redlock needs on Debian 12 (as root, or with sudo).
# Skips the install when everything is present already. (systemd: systemd-analyze
# verifies docs/cli.md's unit and timer, tests/cli/cli_test.cc; zsh and fish: the
# syntax checks of the generated completions, tests/cli/cli_args_test.cc; lintian: the
# Debian packages' check, tools/consumer-test.sh.)
set -euo pipefail
pkgs=(build-essential cmake pkg-config redis-server libhiredis-dev libuv1-dev libgtest-dev libgmock-dev
      libbenchmark-dev clang libclang-rt-14-dev gnuplot-nox spin libssl-dev openssl curl
      systemd zsh fish lintian)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The packaged redis-server service is not used: tests and the demo start their own.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet redis-server 2>/dev/null; then
  $SUDO systemctl stop redis-server || true
fi
