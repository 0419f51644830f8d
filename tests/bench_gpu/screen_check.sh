#!/usr/bin/env bash
# One batch on a GPU machine for the screening precisions: build with CUDA, the CUDA
# tests (every precision against the CPU backend), compute-sanitizer memcheck of a small FP16 run,
# then the benchmark: auto (FP16) with both floors at n = 384,126 and 1,533,876, the 4 GiB budget,
# and FP32 / TF32 at 1,533,876 (each run prints its lists digest: all must be 78f71267a78e9b94).
# Usage (repository root, after `. .gpu/env.sh`): bash tests/bench_gpu/screen_check.sh OUTDIR [quick]
set -uo pipefail
out=${1:-/tmp/knnwb-screen}
mode=${2:-}
mkdir -p "$out"
b=/tmp/knnwb-build-screen
{ cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
  && cmake --build $b --target test_cuda_select test_cuda_knn bench_knn_gpu test_select_plan -j"$(nproc)"; } \
  >"$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
$b/tests/kernels/test_select_plan >"$out/tests.log" 2>&1
{ $b/tests/kernels/test_cuda_select && $b/tests/kernels/test_cuda_knn --verbose; } >>"$out/tests.log" 2>&1
echo "tests rc=$? ($(grep -c '^ok' "$out/tests.log") ok)"; grep "^not ok\|re-selected\|ERROR\|FAIL" "$out/tests.log" | head
if command -v compute-sanitizer >/dev/null; then
  timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 $b/tests/bench_gpu/bench_knn_gpu \
    --n 40000 --screen fp16 --no-floor >"$out/memcheck.log" 2>&1
  echo "memcheck (fp16, n = 40000) rc=$?"; grep "ERROR SUMMARY\|digest" "$out/memcheck.log"
fi
[ "$mode" = quick ] && exit 0
export KNNWB_CUDA_TRACE=1 G_MESSAGES_DEBUG=all
bench=$b/tests/bench_gpu/bench_knn_gpu
{ $bench --n 384126,1533876
  $bench --n 1533876 --gpu-memory 4G --no-select --no-floor
  $bench --n 1533876 --screen fp32 --no-select --no-floor
  $bench --n 1533876 --screen tf32 --no-select --no-floor; } >"$out/bench.log" 2>&1
grep "library (\|select alone\|floor\|GEMM\|^| [0-9]" "$out/bench.log"
grep "^knnwb cuda worker" "$out/bench.log" | tail -8
grep "DEBUG.*\(prepare\|refine\|screen\)" "$out/bench.log" | sed 's/.*DEBUG: //' | tail -12
