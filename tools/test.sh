#!/usr/bin/env bash
# The README's second command: the whole test suite. Installs dependencies, builds
# with warnings as errors, runs every test (they start their own redis-server
# processes on free loopback ports), then a short smoke run of each benchmark, then
# the same suite under ASan+UBSan and the integration tests (the ones that drive the
# client from several threads against real servers) under TSan.
# REDLOCK_TEST_QUICK=1 skips the sanitizer builds. A failed test is run once more
# (ctest --repeat until-pass:2): the timing bounds of the fault and watchdog tests
# are real, and a shared 2-core machine can miss one by chance; a test that fails
# twice fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh
jobs=$(nproc)
start=$(date +%s)

passed=0
failed=0
count() { # log: adds its ctest summary to the totals; fails without one or on an empty selection
  local line total bad
  line=$(grep -E "tests passed, [0-9]+ tests failed out of [0-9]+" "$1" | tail -n 1)
  [ -n "$line" ] || { echo "no ctest summary in $1 (no tests selected?)"; return 1; }
  total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
  [ "$total" -gt 0 ] || { echo "no tests selected in $1"; return 1; }
  bad=$(sed -E 's/.* ([0-9]+) tests failed.*/\1/' <<<"$line")
  passed=$((passed + total - bad))
  failed=$((failed + bad))
}
run_ctest() { # dir, log, ctest args...
  local dir=$1 log=$2
  shift 2
  (cd "$dir" && ctest --output-on-failure --timeout 300 --repeat until-pass:2 "$@") 2>&1 | tee "$log" || ctest_rc=1
  count "$log" || ctest_rc=1
}
run_suite() { # build-dir, extra cmake args... (CTEST_ARGS: label filter)
  local dir=$1
  shift
  cmake -S . -B "$dir" -DREDLOCK_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j"$jobs"
  ctest_rc=0
  # Everything but the fault scenarios in parallel; the scenarios one at a time,
  # since each sizes its load for the whole machine.
  run_ctest "$dir" "$dir/ctest.log" -j"${CTEST_JOBS:-$jobs}" -LE fault ${CTEST_ARGS:-}
  if [ "${FAULT_SCENARIOS:-1}" = 1 ]; then
    run_ctest "$dir" "$dir/ctest-fault.log" -j1 -L fault
  fi
  if [ "$ctest_rc" -ne 0 ]; then
    echo "tests: $passed passed, $((failed > 0 ? failed : 1)) failed"
    exit 1
  fi
}

echo "== build and test (RelWithDebInfo, -Werror)"
run_suite build-ci -DCMAKE_BUILD_TYPE=RelWithDebInfo
echo "== benchmark smoke runs (prove they work; figures in docs/benchmarks.md)"
./build-ci/bench/bench_micro --benchmark_min_time=0.01 >/dev/null
./build-ci/bench/bench_e2e --quick >/dev/null
echo "benchmarks ran"
if [ "${REDLOCK_TEST_QUICK:-0}" != 1 ]; then
  echo "== ASan + UBSan"
  # Sanitized builds run 2-10x slower: one test at a time keeps their timing bounds honest.
  CC=clang CXX=clang++ FAULT_SCENARIOS=0 CTEST_JOBS=1 run_suite build-asan -DCMAKE_BUILD_TYPE=Debug -DREDLOCK_SANITIZE=address -DREDLOCK_BUILD_BENCH=OFF
  echo "== TSan (integration tests and fault scenarios)"
  # ctest labels are single words here: gtest_discover_tests flattens "a;b".
  CC=clang CXX=clang++ CTEST_JOBS=1 CTEST_ARGS="-L integration" run_suite build-tsan -DCMAKE_BUILD_TYPE=Debug -DREDLOCK_SANITIZE=thread -DREDLOCK_BUILD_BENCH=OFF
fi
echo "== all tests passed in $(( $(date +%s) - start )) s"
echo "tests: $passed passed, $failed failed"
