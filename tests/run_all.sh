#!/usr/bin/env bash
# The whole test suite, as CI runs it: a normal build (CUDA compiled when nvcc is found; GPU tests
# skip without a GPU) with every CTest test, then an ASan+UBSan build with every test again,
# a valgrind memcheck subset, and a short libFuzzer smoke run of every fuzz target when clang exists.
# Usage: bash tests/run_all.sh [--quick]   (--quick: the normal build only)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
quick=0
[ "${1:-}" = "--quick" ] && quick=1

echo "== normal build =="
cmake -S . -B build/ci -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKNNWB_CUDA=AUTO
cmake --build build/ci -j"$jobs"
ctest --test-dir build/ci --output-on-failure -j"$jobs"
[ "$quick" = 1 ] && exit 0

echo "== ASan + UBSan build =="
cmake -S . -B build/sanitize -DCMAKE_BUILD_TYPE=Debug -DKNNWB_CUDA=OFF -DKNNWB_ASAN=ON -DKNNWB_UBSAN=ON
cmake --build build/sanitize -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build/sanitize --output-on-failure -j"$jobs" -LE no-sanitize

if command -v valgrind >/dev/null; then
  echo "== valgrind memcheck subset =="
  for t in build/ci/tests/core/test_core_matrix; do
    valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite -q "$t"
  done
fi

if command -v clang >/dev/null; then
  echo "== libFuzzer smoke =="
  CC=clang cmake -S . -B build/fuzz -DCMAKE_BUILD_TYPE=Debug -DKNNWB_CUDA=OFF -DKNNWB_FUZZ=ON -DBUILD_TESTING=ON
  cmake --build build/fuzz -j"$jobs"
  for f in build/fuzz/tests/fuzz/fuzz_*; do
    [ -x "$f" ] || continue
    name=$(basename "$f")
    corpus=tests/fuzz/corpus/${name#fuzz_read_}
    mkdir -p build/fuzz/corpus-"$name"
    "$f" -max_total_time="${KNNWB_FUZZ_SECONDS:-30}" -rss_limit_mb=2048 build/fuzz/corpus-"$name" \
      $( [ -d "$corpus" ] && echo "$corpus" )
  done
fi
echo "== all tests passed =="
