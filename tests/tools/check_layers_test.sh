#!/usr/bin/env bash
# tools/check-layers.sh passes on lib/ and fails, naming file, line and rule, on a
# copy of lib/ with one wrong-way include, one libuv include above the seam, and
# one file outside the layer folders. Usage: check_layers_test.sh SOURCE_DIR
set -euo pipefail
src=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/redlock-layers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
bash "$src/tools/check-layers.sh" "$src/lib" >/dev/null || { echo "FAIL: lib/ itself does not pass"; exit 1; }
cp -r "$src/lib" "$tmp/lib"
printf '#include "ops/round.h"\n' >>"$tmp/lib/pure/retry.h"
printf '#include <uv.h>\n' >>"$tmp/lib/ops/round.h"
printf '// stray\n' >"$tmp/lib/stray.cc"
if out=$(bash "$src/tools/check-layers.sh" "$tmp/lib"); then
  echo "FAIL: the check passed a lib/ with wrong-way includes"; exit 1
fi
for want in 'lib/pure/retry.h:[0-9]+: includes "ops/round.h": pure/ may not use ops/' \
  'lib/ops/round.h:[0-9]+: includes <uv.h>: libuv only in io/' \
  'lib/stray.cc: a file directly in lib/' 'check-layers: 3 wrong-way include'; do
  grep -Eq "$want" <<<"$out" || { echo "FAIL: no line matching: $want"; echo "$out"; exit 1; }
done
echo "ok: check-layers passes lib/ and names each of the 3 breaks"
