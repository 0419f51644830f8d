#!/usr/bin/env bash
# One batch on an nvidia-h200-x2 machine for the tile loop (issue 18): the selection kernels and the
# score GEMM under ncu on a few tiles (kernels profiled alone, a handful of launches each), the CUDA
# tests, and the benchmark set (every run prints its lists digest; 1,533,876 x 295 must give
# 839ee8e3b912cbe5 on 1 GPU, on 2 and under --gpu-memory 4G).
# Usage (repository root, after `. .gpu/env.sh`):
#   bash tests/bench_gpu/tile_loop_check.sh OUTDIR [BUILD] [profile|final]
# BUILD: a CUDA build holding bench_knn_gpu and the CUDA tests (carried, or built here when absent
# or unable to start on this machine).
set -uo pipefail
out=${1:-/tmp/knnwb-tile-loop}
b=${2:-/tmp/knnwb-build-tile-loop}
mode=${3:-final}
mkdir -p "$out"
export LD_LIBRARY_PATH=$b:${LD_LIBRARY_PATH:-}
if ! "$b/tests/kernels/test_cuda_select" -l >/dev/null 2>"$out/carried.log"; then
  echo "carried build does not start here ($(head -c 200 "$out/carried.log")): building"
  b=/tmp/knnwb-build-tile-loop
  export LD_LIBRARY_PATH=$b:$LD_LIBRARY_PATH
  { cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    && cmake --build $b --target test_cuda_select test_cuda_knn bench_knn_gpu -j"$(nproc)"; } \
    >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
fi
bench=$b/tests/bench_gpu/bench_knn_gpu
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem --format=csv,noheader
export KNNWB_CUDA_TRACE=1 G_MESSAGES_DEBUG=all
# CUDA tests on the second GPU while the first profiles (test_cuda_* skip their two-GPU parts then;
# the final mode runs them on both GPUs).
if [ "$mode" = profile ]; then
  (CUDA_VISIBLE_DEVICES=1 KNNWB_CUDA_TRACE=0 G_MESSAGES_DEBUG= $b/tests/kernels/test_cuda_select \
     && CUDA_VISIBLE_DEVICES=1 KNNWB_CUDA_TRACE=0 G_MESSAGES_DEBUG= $b/tests/kernels/test_cuda_knn) \
    >"$out/tests.log" 2>&1 &
  tests_pid=$!
  sections="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
    --section WarpStateStats --section SchedulerStats --section LaunchStats"
  # 384,126 rows: 47 blocks, 1,128 tiles; skipping 1,200 selection launches lands mid-loop.
  for v in 1 0; do
    CUDA_VISIBLE_DEVICES=0 KNNWB_FILTER_V1=$v timeout 150 ncu --clock-control none \
      -k regex:'filter_kernel|merge_kernel' --launch-skip 1200 --launch-count 6 $sections \
      "$bench" --n 384126 --no-lib --no-floor >"$out/ncu_filter_v1_$v.txt" 2>&1
    echo "ncu v1=$v rc=$?"
    grep -E "filter_kernel|merge_kernel|^ +(Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Registers Per|Compute \(SM\) Throughput|Grid Size)" \
      "$out/ncu_filter_v1_$v.txt" | head -60
  done
  CUDA_VISIBLE_DEVICES=0 timeout 120 ncu --clock-control none -k regex:'nvjet|gemm|xmma|cutlass' \
    --launch-skip 300 --launch-count 1 $sections "$bench" --n 384126 --no-lib --no-floor \
    >"$out/ncu_gemm.txt" 2>&1
  echo "ncu gemm rc=$?"
  grep -E "^  [a-z_0-9]+.*\(|^ +(Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Grid Size|Registers Per)" \
    "$out/ncu_gemm.txt" | head -12
  wait $tests_pid
  echo "tests (GPU 1) rc=$? ($(grep -c '^ok' "$out/tests.log") ok)"
  grep "^not ok\|ERROR\|FAIL\|Bail" "$out/tests.log" | head
  # candidates and merges per tile (counters slow the kernels a little)
  CUDA_VISIBLE_DEVICES=0 KNNWB_CUDA_TRACE=2 $bench --n 384126 --no-lib --no-floor 2>&1 |
    grep "candidates\|per diagonal"
  for v in 1 0; do
    echo "== filter v1=$v, 1 GPU, n = 1,533,876"
    CUDA_VISIBLE_DEVICES=0 KNNWB_FILTER_V1=$v $bench --n 1533876 --no-select --no-floor \
      >"$out/bench_v1_$v.log" 2>&1
    grep "library (\|^knnwb cuda worker\|DEBUG.*knnwb:" "$out/bench_v1_$v.log" |
      sed 's/.*DEBUG: //' | head -12
  done
  echo "== 2 GPUs, n = 1,533,876"
  $bench --n 1533876 --no-select --no-floor >"$out/bench_2gpu.log" 2>&1
  grep "library (\|^knnwb cuda worker\|DEBUG.*knnwb:" "$out/bench_2gpu.log" |
    sed 's/.*DEBUG: //' | head -12
  exit 0
fi
