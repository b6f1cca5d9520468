#!/usr/bin/env bash
# Checks lib/'s dependency rule (docs/design.md "The layers of lib/"): every quoted
# include of a lib/ file points to a folder its folder may use, and the system
# headers of the transport stay where they belong. Prints every wrong-way include
# as FILE:LINE: what it includes, and why that is not allowed; exit 1 if any.
#
#   folder       may include (besides itself and include/redlock/)
#   primitives   api ops engine pure
#   api          ops engine pure io/uv_reactor.h (the client builds its reactor)
#   ops          engine node protocol pure
#   engine       node io/reactor.h pure
#   node         protocol io/reactor.h pure
#   protocol     pure
#   io           pure
#   pure         (nothing)
#   observe      (nothing: public events in, text out)
#   testing      engine node protocol io pure (the simulated world)
#
# <hiredis/...> only in protocol/ and node/; <uv.h> only in io/; <openssl/...>
# only in io/ (TLS), pure/sha1.cc and testing/.
#
#   tools/check-layers.sh [LIB_DIR]     (default: this checkout's lib/)
set -euo pipefail
lib="$(cd "${1:-$(dirname "$0")/../lib}" && pwd)"
declare -A allow=(
  [primitives]="api ops engine pure"
  [api]="ops engine pure io/uv_reactor.h"
  [ops]="engine node protocol pure"
  [engine]="node io/reactor.h pure"
  [node]="protocol io/reactor.h pure"
  [protocol]="pure"
  [io]="pure"
  [pure]=""
  [observe]=""
  [testing]="engine node protocol io pure"
)
bad=0
files=0
cd "$lib"
for f in $(find . -name '*.h' -o -name '*.cc' | sed 's#^\./##' | sort); do
  folder=${f%%/*}
  if [ "$folder" = "$f" ]; then
    echo "lib/$f: a file directly in lib/ (every file belongs to a layer folder)"
    bad=$((bad + 1))
    continue
  fi
  if [ -z "${allow[$folder]+set}" ]; then
    echo "lib/$f: folder $folder/ is not a layer of docs/design.md (add it there and here)"
    bad=$((bad + 1))
    continue
  fi
  files=$((files + 1))
  while IFS=: read -r line text; do
    inc=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/' <<<"$text")
    case "$inc" in redlock/*) continue ;; esac
    if [ "$folder" = testing ] && [ "${inc%%/*}" = "$inc" ]; then continue; fi  # its own headers
    target=${inc%%/*}
    [ "$target" = "$folder" ] && continue
    ok=0
    for a in ${allow[$folder]}; do
      if [ "$a" = "$target" ] || [ "$a" = "$inc" ]; then ok=1; break; fi
    done
    if [ $ok = 0 ]; then
      echo "lib/$f:$line: includes \"$inc\": $folder/ may not use ${target}/ (allowed: ${allow[$folder]:-none})"
      bad=$((bad + 1))
    fi
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" || true)
  while IFS=: read -r line text; do
    sys=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*<([^>]+)>.*/\1/' <<<"$text")
    case "$sys" in
      hiredis/*) [ "$folder" = protocol ] || [ "$folder" = node ] || {
          echo "lib/$f:$line: includes <$sys>: hiredis only in protocol/ and node/"; bad=$((bad + 1)); } ;;
      uv.h | uv/*) [ "$folder" = io ] || {
          echo "lib/$f:$line: includes <$sys>: libuv only in io/ (below the reactor seam)"; bad=$((bad + 1)); } ;;
      openssl/*) [ "$folder" = io ] || [ "$f" = pure/sha1.cc ] || [ "$folder" = testing ] || {
          echo "lib/$f:$line: includes <$sys>: OpenSSL only in io/, pure/sha1.cc and testing/"; bad=$((bad + 1)); } ;;
    esac
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<(hiredis|uv|openssl)' "$f" || true)
done
if [ $bad -gt 0 ]; then
  echo "check-layers: $bad wrong-way include(s) in $files files (rule: tools/check-layers.sh, docs/design.md)"
  exit 1
fi
echo "check-layers: $files files in lib/ follow the layer rule"
