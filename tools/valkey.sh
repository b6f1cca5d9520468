#!/usr/bin/env bash
# Builds Valkey 8.0.1 from its source tarball once, into a cache keyed by the
# tarball's sha256, and prints the path of the cached valkey-server on stdout.
# tools/deps.sh calls it; the CMake configure finds the binary in the same cache
# (or through REDLOCK_VALKEY_SERVER), and the Valkey tests fail without it.
#
# Environment:
#   REDLOCK_VALKEY_TARBALL  the tarball (default: shared/servers/valkey-8.0.1.tar.gz beside
#                           the repository root or beside the nearest ancestor that has
#                           one, or beside a worktree's main checkout; see its README.md)
#   XDG_CACHE_HOME          the cache root (default ~/.cache); the build lands in
#                           $XDG_CACHE_HOME/redlock/valkey-8.0.1-<first 8 hex of the sha256>/
#
# Idempotent: a cache entry that holds src/valkey-server is reused (without the
# tarball: the entry's name is the sha256 it was verified against). Atomic: the build
# runs in a temporary directory beside the entry and is renamed into place only when
# it succeeded, so an interrupted build leaves no half-built entry behind.
# Exits non-zero with a message naming the problem when the tarball is missing or its
# checksum differs (the Valkey tests are never skipped, so there is no fallback).
set -euo pipefail

version=8.0.1
sha256=bccb382a0f583fb419526348ed07c3d19e0b6fe8f5492aa3b3037793016ea478
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/redlock
entry=$cache/valkey-$version-${sha256:0:8}
# An entry is only ever made from a tarball with this sha256 (below): reuse it first,
# so a clone that has no shared/ beside it (CI's, anywhere) still finds its Valkey.
if [ -z "${REDLOCK_VALKEY_TARBALL:-}" ] && [ -x "$entry/src/valkey-server" ]; then
  echo "$entry/src/valkey-server"
  exit 0
fi

tarball=${REDLOCK_VALKEY_TARBALL:-}
if [ -z "$tarball" ]; then
  # shared/servers/ beside the repository root, or beside any of its ancestors (a
  # clone made deeper in the workplace), or beside the main checkout of a worktree.
  starts=("$root")
  if common=$(git -C "$root" rev-parse --git-common-dir 2>/dev/null); then
    starts+=("$(cd "$root" && cd "$(dirname "$common")" && pwd)")
  fi
  for start in "${starts[@]}"; do
    dir=$start
    while [ -z "$tarball" ] && [ "$dir" != / ]; do
      [ -f "$dir/../shared/servers/valkey-$version.tar.gz" ] && tarball=$(cd "$dir/../shared/servers" && pwd)/valkey-$version.tar.gz
      dir=$(dirname "$dir")
    done
    [ -n "$tarball" ] && break
  done
  # Last, the workplace's own shared/ (DEVELOPERS.md: /work/shared), for a clone made
  # outside it.
  [ -n "$tarball" ] || [ ! -f "/work/shared/servers/valkey-$version.tar.gz" ] ||
    tarball=/work/shared/servers/valkey-$version.tar.gz
  [ -n "$tarball" ] || tarball=$root/../shared/servers/valkey-$version.tar.gz
fi

if [ ! -f "$tarball" ]; then
  echo "valkey: tarball not found: $tarball (nor shared/servers/ beside any parent directory)" >&2
  echo "valkey: the Valkey tests need it; set REDLOCK_VALKEY_TARBALL to valkey-$version.tar.gz" \
       "(sha256 $sha256)" >&2
  exit 1
fi
actual=$(sha256sum "$tarball" | cut -d' ' -f1)
if [ "$actual" != "$sha256" ]; then
  echo "valkey: $tarball has sha256 $actual, expected $sha256 (valkey-$version)" >&2
  exit 1
fi

if [ -x "$entry/src/valkey-server" ]; then
  echo "$entry/src/valkey-server"
  exit 0
fi

mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.valkey-build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "valkey: building valkey-$version into $entry (about 70 s on 2 cores)" >&2
tar xzf "$tarball" -C "$tmp"
if ! nice -n 10 make -C "$tmp/valkey-$version" -j2 BUILD_TLS=yes MALLOC=libc >"$tmp/build.log" 2>&1; then
  tail -n 30 "$tmp/build.log" >&2
  echo "valkey: make failed (needs build-essential and libssl-dev)" >&2
  exit 1
fi
"$tmp/valkey-$version/src/valkey-server" --version >/dev/null
mv "$tmp/build.log" "$tmp/valkey-$version/"
# Another run may have finished first: keep its entry, drop ours.
if ! mv -T "$tmp/valkey-$version" "$entry" 2>/dev/null; then
  [ -x "$entry/src/valkey-server" ] || { echo "valkey: cannot move the build to $entry" >&2; exit 1; }
fi
echo "$entry/src/valkey-server"
