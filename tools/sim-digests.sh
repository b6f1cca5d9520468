#!/usr/bin/env bash
# Proves a refactoring of lib/ did not change behaviour: the simulated world is
# deterministic, so the digest of every run's history (timeline, operations, holds,
# fenced writes: tests/sim/history.cc) must be byte-identical before and after.
#
#   tools/sim-digests.sh            compare with tests/sim/digests.txt; exit 1 on any difference
#   tools/sim-digests.sh --record   rewrite tests/sim/digests.txt (say why in the commit message)
#
# The runs: every line of the regression corpus (tests/sim/seeds.txt, guard-off lines
# included) and seeds 1..SEEDS (default 10) of every scenario. Builds `simulate`
# through tools/simulate (REDLOCK_BUILD_DIR, JOBS as there).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
want="$root/tests/sim/digests.txt"
seeds="${SEEDS:-10}"
tmp="$(mktemp "${TMPDIR:-/tmp}/redlock-digests.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
{
  echo "# tools/sim-digests.sh: <scenario> <seed> <guard-off> <history digest>; corpus lines, then seeds 1..$seeds"
  "$root/tools/simulate" --corpus tests/sim/seeds.txt --digests
  "$root/tools/simulate" --seeds "$seeds" --scenario all --digests
} >"$tmp"
if [ "${1:-}" = "--record" ]; then
  cp "$tmp" "$want"
  echo "sim-digests: recorded $(grep -vc '^#' "$want") digests in tests/sim/digests.txt"
  exit 0
fi
[ -f "$want" ] || { echo "sim-digests: no $want; run with --record on the base commit" >&2; exit 2; }
if diff -u "$want" "$tmp"; then
  echo "sim-digests: all $(grep -vc '^#' "$want") digests match"
else
  echo "sim-digests: the histories above differ from tests/sim/digests.txt (behaviour changed)" >&2
  exit 1
fi
