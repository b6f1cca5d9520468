#!/usr/bin/env bash
# The simulator against the defects of the hardening issue (docs/verification.md).
#
# Each patch in tests/sim/mutants/ puts one defect found by review (docs/safety.md,
# "Found by review") back into the current lib/, restoring the code of 6bcc8ae. For
# each one this script builds the `simulate` tool from a temporary git worktree of
# HEAD with the patch applied, explores its scenario's seeds from 1 up to its budget,
# stopping at the first violation, and reports FOUND (checker, first failing seed, the
# replay command, runs and CPU seconds it took) or MISSED. First it runs the same
# scenarios and budgets on HEAD without any patch: every seed must pass there (no
# false positive).
#
#   tools/mutants.sh                      every mutant
#   tools/mutants.sh 08-lost-rollbacks    one (or several), by patch name
#
# Exit: 0 when HEAD passes every budget and every mutant is found; 1 otherwise; 2 on
# a setup or build failure. Committed code only (the worktree is of HEAD).
# Environment: MUTANTS_DIR (worktree and build, default $TMPDIR/redlock-mutants-$UID;
# kept between runs so rebuilds are incremental), KEEP=0 removes it at the end,
# JOBS (default 2).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

# name  scenario  seeds (budget: seeds 1..N, each a run of the scenario)
table=(
  "01-shorter-extension              mixed            200"
  "02-clock-sample-reset-on-reconnect clock_reconnect  400"
  "07-stall-detector-idle            idle_pauses      100"
  "08-lost-rollbacks                 rollbacks        300"
  "10-permanent-error-rule           permissions      200"
  "11-fence-key-collision            fence_names      100"
)

want=("$@")
selected=()
for row in "${table[@]}"; do
  read -r name _ _ <<<"$row"
  if [ ${#want[@]} -eq 0 ]; then
    selected+=("$row")
    continue
  fi
  for w in "${want[@]}"; do
    if [ "$w" = "$name" ] || [ "$w" = "${name%%-*}" ]; then selected+=("$row"); fi
  done
done
if [ ${#selected[@]} -eq 0 ]; then
  echo "mutants.sh: no mutant named ${want[*]}; known:" >&2
  for row in "${table[@]}"; do read -r name _ _ <<<"$row"; echo "  $name" >&2; done
  exit 2
fi

dir="${MUTANTS_DIR:-${TMPDIR:-/tmp}/redlock-mutants-$(id -u)}"
wt="$dir/wt"
build="$dir/build"
mkdir -p "$dir"
if [ -d "$wt" ]; then
  git worktree remove --force "$wt" >/dev/null 2>&1 || rm -rf "$wt"
  git worktree prune
fi
git worktree add --detach "$wt" HEAD >/dev/null 2>&1 || { echo "mutants.sh: cannot create a worktree at $wt" >&2; exit 2; }
cleanup() {
  if [ "${KEEP:-1}" = "0" ]; then
    git -C "$root" worktree remove --force "$wt" >/dev/null 2>&1 || true
    rm -rf "$dir"
  fi
}
trap cleanup EXIT
head="$(git rev-parse --short HEAD)"

export CCACHE_BASEDIR="$wt"
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
log="$dir/build.log"
if ! cmake -S "$wt" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >"$log" 2>&1; then
  cat "$log" >&2
  echo "mutants.sh: configuring $build failed" >&2
  exit 2
fi
build_sim() {
  if ! cmake --build "$build" -j"${JOBS:-2}" --target simulate >"$log" 2>&1; then
    cat "$log" >&2
    echo "mutants.sh: building simulate ($1) failed" >&2
    exit 2
  fi
}
sim="$build/tests/sim/simulate"

# --- HEAD, no patch: every budget passes.
echo "== HEAD $head without a patch: the same scenarios and budgets must pass"
build_sim "HEAD"
bad=0
declare -A head_cpu=()
for row in "${selected[@]}"; do
  read -r name scenario seeds <<<"$row"
  key="$scenario/$seeds"
  [ -n "${head_cpu[$key]:-}" ] && continue
  out="$("$sim" --seeds "$seeds" --scenario "$scenario" --no-shrink 2>&1)" && rc=0 || rc=$?
  cpu="$(sed -n 's/.* in \([0-9.]*\) s CPU.*/\1/p' <<<"$out" | head -1)"
  head_cpu[$key]="$cpu"
  if [ "$rc" -eq 0 ]; then
    echo "  pass  $scenario seeds 1..$seeds ($cpu s CPU)"
  else
    bad=1
    echo "  FAIL  $scenario seeds 1..$seeds: HEAD itself violates a checker (a false positive, or a real finding):"
    grep -E '^  tools/simulate' <<<"$out" | head -5
  fi
done

# --- each mutant
results=()
for row in "${selected[@]}"; do
  read -r name scenario seeds <<<"$row"
  patch="$root/tests/sim/mutants/$name.patch"
  git -C "$wt" checkout -q -- lib
  if ! git -C "$wt" apply "$patch"; then
    echo "mutants.sh: $name.patch does not apply to HEAD" >&2
    exit 2
  fi
  echo "== $name ($scenario, seeds 1..$seeds)"
  build_sim "$name"
  out="$("$sim" --seeds "$seeds" --scenario "$scenario" --first-failure --no-shrink 2>&1)" || true
  line="$(grep -E '^first failure:' <<<"$out" | head -1 || true)"
  if [ -n "$line" ]; then
    seed="$(sed -n 's/.*seed=\([0-9]*\).*/\1/p' <<<"$line")"
    checker="$(sed -n 's/.*checker=\([a-z_]*\).*/\1/p' <<<"$line")"
    runs="$(sed -n 's/.* after \([0-9]*\) run(s).*/\1/p' <<<"$line")"
    cpu="$(sed -n 's/.*, \([0-9.]*\) s CPU.*/\1/p' <<<"$line")"
    summary="$(grep -A1 -m1 '^VIOLATION' <<<"$out" | tail -1 | sed 's/^ *//')"
    echo "  FOUND by $checker at seed $seed after $runs run(s), $cpu s CPU"
    echo "  $summary"
    echo "  replay: git apply tests/sim/mutants/$name.patch && tools/simulate --seed $seed --scenario $scenario --verbose"
    results+=("FOUND  $name  $scenario  1..$seeds  seed $seed  $checker  ${runs} runs  ${cpu} s")
  else
    bad=1
    cpu="$(sed -n 's/.* in \([0-9.]*\) s CPU.*/\1/p' <<<"$out" | head -1)"
    echo "  MISSED: no violation in seeds 1..$seeds ($cpu s CPU)"
    results+=("MISSED $name  $scenario  1..$seeds  -  -  $seeds runs  ${cpu} s")
  fi
done
git -C "$wt" checkout -q -- lib

echo "== summary (HEAD $head)"
for r in "${results[@]}"; do echo "  $r"; done
exit "$bad"
