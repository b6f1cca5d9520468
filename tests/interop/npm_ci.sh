#!/usr/bin/env bash
# The ctest fixture interop.npm_ci: installs node-redlock and ioredis, exactly as
# pinned in package-lock.json, into DIR/node_modules (DIR holds copies of package.json,
# package-lock.json and node_redlock.js, made by CMake). node and npm come from
# tools/deps.sh; without them this fails (no test skips).
#   tests/interop/npm_ci.sh DIR
set -euo pipefail
cd "$1"
for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "$tool is not in PATH: tools/deps.sh installs it (Debian: nodejs, npm)"; exit 1; }
done
echo "node $(node --version), npm $(npm --version)"
npm ci --no-audit --no-fund --loglevel=error
v=$(node -p 'JSON.parse(require("fs").readFileSync("node_modules/redlock/package.json")).version')
v=${v#v}  # its package.json says "v5.0.0-beta.2"
echo "redlock $v"
[ "$v" = 5.0.0-beta.2 ] || { echo "npm ci installed redlock $v, not the pinned 5.0.0-beta.2"; exit 1; }
