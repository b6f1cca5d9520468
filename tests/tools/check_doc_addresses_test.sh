#!/usr/bin/env bash
# tools/check-doc-addresses.sh passes README.md and docs/*.md, and on a file of
# examples fails each address outside loopback and the example names, naming
# file and line, while passing the allowed forms. Usage: check_doc_addresses_test.sh SOURCE_DIR
set -euo pipefail
src=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/redlock-doc-addresses.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if ! out=$(bash "$src/tools/check-doc-addresses.sh" "$src"); then
  echo "FAIL: README.md or docs/*.md has an example address outside loopback and the example names:"
  echo "$out"
  exit 1
fi
cat >"$tmp/doc.md" <<'DOC'
opts.nodes = {"redis://127.0.0.1:7001", "redis://:pw@localhost:7002/2", "rediss://redis-a.example:6380"};
redlock --nodes redis://[::1]:7001,redis://alice:pw@node1.example.com,unix:///run/redis/redis.sock?db=1 status x
Syntax: `redis://[user[:password]@]host[:port][/db]`; the simulated world's nodes are redis://node0:6379.
http.listen("0.0.0.0", 9464);  // bound to every interface
See [the format](https://prometheus.io/docs/instrumenting/exposition_formats/) and <https://github.com/redis/hiredis>.
Version 1.2.3.4.5 is not an address, nor is 0.0.4.
opts.nodes = {"redis://10.0.0.3:6379"};
redlock --nodes rediss://db.internal:6380 status x
curl http://0.0.0.0:9121/metrics
redis-cli -p 6379 -h redis.prod.corp ping
the node at 192.168.1.20 answered
DOC
if out=$(bash "$src/tools/check-doc-addresses.sh" -- "$tmp/doc.md"); then
  echo "FAIL: the check passed a file with five addresses off the machine"; exit 1
fi
for want in "doc.md:7: IPv4 address 10.0.0.3 " "doc.md:8: host 'db.internal' in rediss://db.internal:6380" \
  "doc.md:9: 0.0.0.0 outside a bind address" "doc.md:10: host 'redis.prod.corp' after redis-cli -h" \
  "doc.md:11: IPv4 address 192.168.1.20 " "check-doc-addresses: 5 address"; do
  grep -qF "$want" <<<"$out" || { echo "FAIL: no line containing: $want"; echo "$out"; exit 1; }
done
if grep -E 'doc.md:[1-6]:' <<<"$out"; then echo "FAIL: an allowed form was reported"; exit 1; fi
echo "ok: README.md and docs/*.md pass; the check names each of the 5 addresses off the machine"
