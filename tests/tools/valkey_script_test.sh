#!/usr/bin/env bash
# tools/valkey.sh fails, naming the problem, on a missing tarball and on one whose
# sha256 differs, and reuses a cache entry without building (the entry's name is
# the version and the first 8 hex digits of the tarball's sha256).
# Usage: valkey_script_test.sh SOURCE_DIR
set -euo pipefail
src=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/redlock-valkey-sh.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
script=$src/tools/valkey.sh

if out=$(REDLOCK_VALKEY_TARBALL=$tmp/absent.tar.gz XDG_CACHE_HOME=$tmp/cache bash "$script" 2>&1); then
  echo "FAIL: a missing tarball passed"; exit 1
fi
grep -q "valkey: tarball not found: $tmp/absent.tar.gz" <<<"$out" || { echo "FAIL: no 'not found' line: $out"; exit 1; }
grep -q "REDLOCK_VALKEY_TARBALL" <<<"$out" || { echo "FAIL: the message does not say how to fix it: $out"; exit 1; }

echo "not valkey" >"$tmp/other.tar.gz"
if out=$(REDLOCK_VALKEY_TARBALL=$tmp/other.tar.gz XDG_CACHE_HOME=$tmp/cache bash "$script" 2>&1); then
  echo "FAIL: a tarball with another sha256 passed"; exit 1
fi
grep -q "expected bccb382a0f583fb419526348ed07c3d19e0b6fe8f5492aa3b3037793016ea478" <<<"$out" ||
  { echo "FAIL: no checksum line: $out"; exit 1; }
[ ! -e "$tmp/cache/redlock" ] || { echo "FAIL: a refused tarball created the cache"; exit 1; }

# A cache hit: the real tarball (the default path, or REDLOCK_VALKEY_TARBALL), an
# entry already there (a stub): its path is printed, nothing is built.
entry=$tmp/cache/redlock/valkey-8.0.1-bccb382a
mkdir -p "$entry/src"
printf '#!/bin/sh\nexit 0\n' >"$entry/src/valkey-server"
chmod +x "$entry/src/valkey-server"
out=$(XDG_CACHE_HOME=$tmp/cache bash "$script" 2>"$tmp/err") || { echo "FAIL: cache hit failed: $(cat "$tmp/err")"; exit 1; }
[ "$out" = "$entry/src/valkey-server" ] || { echo "FAIL: printed '$out', expected $entry/src/valkey-server"; exit 1; }
[ ! -s "$tmp/err" ] || { echo "FAIL: a cache hit printed: $(cat "$tmp/err")"; exit 1; }
[ "$(ls -A "$tmp/cache/redlock")" = "valkey-8.0.1-bccb382a" ] || { echo "FAIL: a cache hit left $(ls -A "$tmp/cache/redlock")"; exit 1; }
echo "ok: valkey.sh refuses a missing or altered tarball and reuses its cache"
