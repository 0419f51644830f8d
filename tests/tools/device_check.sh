#!/usr/bin/env bash
# One batch on a GPU machine (see README "GPU machine"): build with CUDA, run the whole test suite
# (GPU tests included), compute-sanitizer memcheck on a small GPU case, and the GPU benchmarks.
# Usage (from the repository root, after `. .gpu/env.sh` where the dependencies are carried):
#   bash tests/tools/device_check.sh OUTDIR [quick]
set -uo pipefail
out=${1:-/tmp/knnwb-device}
mode=${2:-full}
mkdir -p "$out"
b=/tmp/knnwb-build
{ cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
  && cmake --build $b -j"$(nproc)"; } >"$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
nvidia-smi --query-gpu=name,memory.total --format=csv | tee "$out/gpu.txt"
(cd $b && ctest --output-on-failure -j4 --timeout 400) >"$out/ctest.log" 2>&1
tail -25 "$out/ctest.log"
$b/tests/kernels/test_cuda_knn -p /kernels/cuda-knn/groups-and-exact-mst --verbose >"$out/groups.log" 2>&1
tail -3 "$out/groups.log"
if command -v compute-sanitizer >/dev/null; then
  timeout 240 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 \
    $b/tests/kernels/test_cuda_select -p /kernels/cuda-select/k1 >"$out/memcheck.log" 2>&1
  echo "compute-sanitizer rc=$?"; tail -4 "$out/memcheck.log"
fi
[ "$mode" = quick ] && exit 0
G_MESSAGES_DEBUG=knnwb,all timeout 300 $b/tests/bench_gpu/bench_knn_gpu --n 384126,1533876 >"$out/bench_knn.log" 2>&1
grep -v DEBUG "$out/bench_knn.log" | tail -20; grep "refine\|prepare" "$out/bench_knn.log" | tail -4
G_MESSAGES_DEBUG=all timeout 200 $b/tests/bench_clustering/bench_clustering_exact_mst --n 384126 --d 295 --k 16 \
  --modules 2000 --backend cuda >"$out/exact_mst.log" 2>&1
echo "exact MST rc=$?"; grep -v "DEBUG.*refine\|prepare" "$out/exact_mst.log" | tail -25
