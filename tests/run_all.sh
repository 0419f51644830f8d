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

# Every stage needs its tools (clang, valgrind, Open MPI, the Python peers): a missing one would
# silently skip a stage, so the suite refuses to start instead. KNNWB_SKIP_DEPS_CHECK=1 skips this
# check (a machine that is not Debian, or a GPU machine set up by hand).
if [ "${KNNWB_SKIP_DEPS_CHECK:-0}" != 1 ] && ! bash share/install-deps.sh test --check; then
  echo "run_all.sh: install the test packages first: bash share/install-deps.sh test" >&2
  echo "  (or run bash share/test.sh, which installs them and runs this)" >&2
  exit 1
fi

echo "== normal build =="
cmake -S . -B build/ci -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKNNWB_CUDA=AUTO
cmake --build build/ci -j"$jobs"
ctest --test-dir build/ci --output-on-failure -j"$jobs"
[ "$quick" = 1 ] && exit 0

echo "== ASan + UBSan build =="
cmake -S . -B build/sanitize -DCMAKE_BUILD_TYPE=Debug -DKNNWB_CUDA=OFF -DKNNWB_ASAN=ON -DKNNWB_UBSAN=ON
cmake --build build/sanitize -j"$jobs"
# tests/lsan.supp lists one-time allocations inside system libraries only (never knnwb's own).
# test_host_install (label no-sanitize) builds outside programs with plain pkg-config flags against
# the installed library; an ASan library cannot be loaded by an uninstrumented program, so it runs in
# the normal build only.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  LSAN_OPTIONS=suppressions="$PWD/tests/lsan.supp":print_suppressions=0 \
  ctest --test-dir build/sanitize --output-on-failure -j"$jobs" -LE no-sanitize

if command -v valgrind >/dev/null; then
  echo "== valgrind memcheck subset =="
  # Fast, representative programs: the core matrix, every reader (good and malformed files), the
  # writers, and the host's command line (its knnwb children run natively).
  for t in build/ci/tests/core/test_core_matrix build/ci/tests/formats/test_formats_readers \
    build/ci/tests/formats/test_formats_writers build/ci/tests/host/test_host_cli; do
    [ -x "$t" ] || { echo "missing $t" >&2; exit 1; }
    echo "-- $t"
    valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite \
      --show-leak-kinds=definite --suppressions=tests/valgrind.supp -q "$t" >/dev/null
  done
fi

if command -v clang >/dev/null; then
  echo "== libFuzzer smoke =="
  CC=clang cmake -S . -B build/fuzz -DCMAKE_BUILD_TYPE=Debug -DKNNWB_CUDA=OFF -DKNNWB_FUZZ=ON -DBUILD_TESTING=ON
  cmake --build build/fuzz -j"$jobs"
  # Every target for KNNWB_FUZZ_SECONDS (30) on its seeds plus a scratch corpus, $jobs at a time;
  # any crash, leak or sanitizer report fails the run (the reproducer is left in build/fuzz/).
  # A file may declare a large matrix (a 10x header of 200 million barcodes, few entries): the
  # targets fail allocations above 2 GiB, as a small machine would (ASan writes an eighth of every
  # freed byte to its shadow: a freed 17 GB matrix took 2.1 GB resident), so libFuzzer's own
  # malloc cap is set out of the way at 64 GiB (without -malloc_limit_mb it flags any malloc above
  # the RSS cap, touched or not), while the resident memory stays capped at 2 GiB.
  fuzz_one() {
    name=$(basename "$1")
    seeds=tests/fuzz/corpus/${name##*_}
    dict=tests/fuzz/${name##*_}.dict
    mkdir -p build/fuzz/corpus-"$name"
    LSAN_OPTIONS=suppressions="$PWD/tests/lsan.supp":print_suppressions=0 \
      "$1" -max_total_time="${KNNWB_FUZZ_SECONDS:-30}" -rss_limit_mb=2048 -malloc_limit_mb=65536 \
      -print_final_stats=1 \
      $([ -f "$dict" ] && echo "-dict=$dict") \
      -artifact_prefix=build/fuzz/"$name"- build/fuzz/corpus-"$name" "$seeds" \
      >build/fuzz/"$name".log 2>&1 || { tail -n 40 build/fuzz/"$name".log; return 1; }
    echo "$name: $(grep -m1 -o 'stat::number_of_executed_units: [0-9]*' build/fuzz/"$name".log)"
  }
  export -f fuzz_one
  find build/fuzz/tests/fuzz -maxdepth 1 -type f -executable -name 'fuzz_*' | sort | xargs -P "$jobs" -I{} bash -c 'fuzz_one {}'
fi
echo "== all tests passed =="
