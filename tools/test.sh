#!/usr/bin/env bash
# The README's second command: the whole test suite. Installs dependencies, builds
# with warnings as errors, runs every test (they start their own redis-server
# processes on free loopback ports), then the same suite under ASan+UBSan and the
# concurrency tests under TSan, then a short smoke run of each benchmark.
# REDLOCK_TEST_QUICK=1 skips the sanitizer builds.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh
jobs=$(nproc)
start=$(date +%s)

run_suite() { # build-dir, extra cmake args...
  local dir=$1
  shift
  cmake -S . -B "$dir" -DREDLOCK_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j"$jobs"
  (cd "$dir" && ctest --output-on-failure --timeout 300 -j"$jobs" ${CTEST_ARGS:-})
}

echo "== build and test (RelWithDebInfo, -Werror)"
run_suite build-ci -DCMAKE_BUILD_TYPE=RelWithDebInfo
if [ "${REDLOCK_TEST_QUICK:-0}" != 1 ]; then
  echo "== ASan + UBSan"
  CC=clang CXX=clang++ run_suite build-asan -DCMAKE_BUILD_TYPE=Debug -DREDLOCK_SANITIZE=address -DREDLOCK_BUILD_BENCH=OFF
  echo "== TSan (concurrency tests)"
  CC=clang CXX=clang++ CTEST_ARGS="-L concurrency" run_suite build-tsan -DCMAKE_BUILD_TYPE=Debug -DREDLOCK_SANITIZE=thread -DREDLOCK_BUILD_BENCH=OFF
fi
echo "== all tests passed in $(( $(date +%s) - start )) s"
