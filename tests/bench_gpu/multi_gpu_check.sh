#!/usr/bin/env bash
# One batch on a multi-GPU machine (nvidia-h200-x4): build with CUDA, the CUDA tests with every GPU
# visible (and compute-sanitizer memcheck of the several-GPU cases), then the benchmark on 1, 2 and
# all GPUs side by side (n = 1,533,876, d = 295, k = 20).
# Usage (repository root, after `. .gpu/env.sh`): bash tests/bench_gpu/multi_gpu_check.sh OUTDIR [stats]
#   stats: also a run with selection counters (KNNWB_CUDA_TRACE=2) on 1 and on all GPUs.
set -uo pipefail
out=${1:-/tmp/knnwb-multi}
mode=${2:-}
mkdir -p "$out"
b=/tmp/knnwb-build-multi
{ cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
  && cmake --build $b --target test_cuda_select test_cuda_knn bench_knn_gpu -j"$(nproc)"; } \
  >"$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/gpu.txt"
all=$(seq -s, 0 $(( $(nvidia-smi -L | wc -l) - 1 )))
{ $b/tests/kernels/test_cuda_select && $b/tests/kernels/test_cuda_knn; } >"$out/tests.log" 2>&1
echo "CUDA tests rc=$?"; grep -c "^ok" "$out/tests.log"; grep -v "^ok\|^#" "$out/tests.log" | tail -5
if command -v compute-sanitizer >/dev/null; then
  timeout 300 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 \
    $b/tests/kernels/test_cuda_select -p /kernels/cuda-select/two-devices >"$out/memcheck.log" 2>&1
  echo "compute-sanitizer (two-devices, every GPU) rc=$?"; tail -3 "$out/memcheck.log"
fi
export KNNWB_CUDA_TRACE=1 G_MESSAGES_DEBUG=all
for dv in 0 0,1 "$all"; do
  $b/tests/bench_gpu/bench_knn_gpu --n 1533876 --devices "$dv" --no-floor
done >"$out/bench.log" 2>&1
grep "select alone\|library (" "$out/bench.log"
grep "^knnwb cuda worker" "$out/bench.log" | tail -4
grep "DEBUG.*\(prepare\|refine\|release\|checks\)" "$out/bench.log" | sed 's/.*DEBUG: //' | tail -12
if [ "$mode" = stats ]; then
  export KNNWB_CUDA_TRACE=2
  for dv in 0 "$all"; do
    $b/tests/bench_gpu/bench_knn_gpu --n 1533876 --devices "$dv" --no-floor --no-lib
  done >"$out/stats.log" 2>&1
  grep "candidates\|select alone" "$out/stats.log" | tail -8
  unset KNNWB_CUDA_TRACE
  # the GEMM floor on every GPU at once (power and clocks under full load)
  for d in ${all//,/ }; do
    CUDA_VISIBLE_DEVICES=$d $b/tests/bench_gpu/bench_knn_gpu --n 1533876 --no-lib --no-select \
      >"$out/floor$d.log" 2>&1 &
  done
  wait
  grep -h "floor\|SGEMM" "$out"/floor*.log | tail -8
fi
