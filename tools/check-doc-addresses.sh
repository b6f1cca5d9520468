#!/usr/bin/env bash
# Example addresses in the docs stay on this machine or on names that resolve
# nowhere: a reader who copies an example connects to loopback, or to nothing.
#
#   check-doc-addresses.sh [SOURCE_DIR]     checks README.md and docs/*.md
#   check-doc-addresses.sh -- FILE...       checks the files given
#
# Prints "FILE:LINE: ..." for each
#   - IPv4 address outside 127.0.0.0/8; 0.0.0.0 passes only on a line that says
#     it is a bind address (the line contains bind, bound or listen);
#   - host in a URI (scheme://[user@]host[:port]...) other than localhost, a
#     loopback address, [::1], example.com, *.example.com or *.example, or one of
#     the metavariables of URI grammars (host, h: "redis://host:port") and the
#     simulated world's node names (node0, node1, ...: redlock/testing.h);
#     unix:// and file:// URIs (paths) and markdown link targets (citations:
#     "[text](https://...)", "<https://...>") are not examples;
#   - host after redis-cli's -h, under the same rule;
# then "check-doc-addresses: N address(es) ..." and exits 1; or exits 0 silently.
set -euo pipefail

if [ "${1:-}" = "--" ]; then
  shift
  files=("$@")
else
  cd "${1:-$(dirname "$0")/..}"
  files=(README.md docs/*.md)
fi

bad=0
report() { # file, line, message
  echo "$1:$2: $3"
  bad=$((bad + 1))
}

host_ok() { # host (lower case)
  case $1 in
    '' | localhost | '[::1]' | example.com | *.example.com | *.example | host | h | node[0-9]*) return 0 ;;
    '...' | '…' | '*'*) return 0 ;; # elided in prose: "unix://…?db=1", "rediss://..."
  esac
  [[ $1 =~ ^127\.[0-9]+\.[0-9]+\.[0-9]+$ ]]
}

ipv4_re='([0-9]{1,3}\.){3}[0-9]{1,3}'
uri_re='[A-Za-z][A-Za-z0-9+.-]*://[^[:space:]`"'"'"'<>(){}]*'

for f in "${files[@]}"; do
  [ -f "$f" ] || { echo "check-doc-addresses: no file $f" >&2; exit 2; }
  # IPv4 addresses (not part of a longer dotted number such as a version 1.2.3.4.5).
  while IFS=: read -r line addr; do
    addr=${addr//[^0-9.]/}
    IFS=. read -r a b c d <<<"$addr"
    if [ "$a" -gt 255 ] || [ "$b" -gt 255 ] || [ "$c" -gt 255 ] || [ "$d" -gt 255 ]; then continue; fi
    [ "$a" = 127 ] && continue
    if [ "$addr" = 0.0.0.0 ]; then
      sed -n "${line}p" "$f" | grep -Eqi 'bind|bound|listen' && continue
      report "$f" "$line" "0.0.0.0 outside a bind address (say bind, bound or listen on the line, or use 127.0.0.1)"
      continue
    fi
    report "$f" "$line" "IPv4 address $addr outside 127.0.0.0/8 (use 127.0.0.1 or a *.example name)"
  done < <(grep -noE "(^|[^0-9.])$ipv4_re([^0-9.]|\$)" "$f" | sed -E 's/^([0-9]+):[^0-9]?/\1:/' || true)

  # URIs, markdown link targets removed first (line numbers kept).
  while IFS=: read -r line uri; do
    scheme=${uri%%://*}
    scheme=${scheme,,}
    case $scheme in unix | file) continue ;; esac
    rest=${uri#*://}
    authority=${rest%%[/?#]*}
    host=${authority##*@}
    host=${host#"${host%%[!]]*}"} # grammar brackets: "[user[:password]@]host"
    if [[ $host == \[* ]]; then
      host=${host%%]*}]
    else
      host=${host%%[:[]*}
    fi
    host=${host,,}
    [[ $host =~ ^$ipv4_re$ ]] && continue # the IPv4 rule above has it
    host_ok "$host" && continue
    report "$f" "$line" "host '$host' in $uri is not localhost, loopback or a *.example / example.com name"
  done < <(sed -E 's/\]\([^)]*\)/]()/g; s/<[A-Za-z][A-Za-z0-9+.-]*:\/\/[^>]*>/<>/g' "$f" | grep -noE "$uri_re" || true)

  # redis-cli -h HOST
  while IFS=: read -r line host; do
    host=${host##* }
    host=${host,,}
    [[ $host =~ ^$ipv4_re$ ]] && continue
    host_ok "$host" && continue
    report "$f" "$line" "host '$host' after redis-cli -h is not localhost, loopback or a *.example / example.com name"
  done < <(grep -noE 'redis-cli( [^ ]+)* -h +[^ `"'"'"']+' "$f" | sed -E 's/^([0-9]+):.* -h +/\1: /' || true)
done

if [ "$bad" -gt 0 ]; then
  echo "check-doc-addresses: $bad address(es) outside loopback and the example names"
  exit 1
fi
