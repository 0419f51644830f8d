#!/usr/bin/env bash
# One batch on a GPU machine for core's refine on the device (large k): build, the CUDA
# kNN tests (every GPU list against the CPU backend's, bit for bit), then 384,126 x 295 Pearson
# k = 4096 with the refine on the device and, for comparison, on the host
# (KNNWB_CUDA_HOST_REFINE=1), PyTorch's GEMM + topk in the same call, the FP16 screen at k = 4096,
# the CPU backend against the GPU on a 20,011-row subset (same lists digest), and compute-sanitizer
# memcheck of a small k = 4096 run. KNNWB_CUDA_TRACE=1 and G_MESSAGES_DEBUG=all show where the
# time goes (core's phases, the worker's tile loop, the lists' refine and download). The benchmarks
# run on one GPU (CUDA_VISIBLE_DEVICES=$ONE_GPU, default 0); the tests on every visible GPU.
# Usage (repository root, after `. .gpu/env.sh`): bash tests/bench_gpu/refine_check.sh OUTDIR [MODE]
#   bench: only the 384,126 runs and PyTorch (no tests, no subset, no memcheck);
#   full: also the whole of test_cuda_knn (else its refine and large-k cases only);
#   final: the whole of test_cuda_knn, the device refine on one and two GPUs and PyTorch at
#          384,126 (not the host refine nor FP16 there), the subset and memcheck.
set -uo pipefail
out=${1:-/tmp/knnwb-refine}
mode=${2:-}
mkdir -p "$out"
b=${KNNWB_BUILD:-/tmp/knnwb-build-refine}
{ cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
  && cmake --build $b --target test_cuda_knn bench_knn_gpu -j"$(nproc)"; } \
  >"$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null | sed 's/^/THP: /'
bench=$b/tests/bench_gpu/bench_knn_gpu
if [ "$mode" != bench ] && [ "$mode" != final ]; then
  timeout 150 $b/tests/kernels/test_cuda_knn -p /kernels/cuda-knn/refine-on-device \
    -p /kernels/cuda-knn/large-k --verbose >"$out/test_refine.log" 2>&1
  echo "refine-on-device and large-k tests rc=$?"
  grep "^not ok\|ERROR\|cpu .* cuda" "$out/test_refine.log" | head
fi
export KNNWB_CUDA_TRACE=1 G_MESSAGES_DEBUG=all
run() { # name, then the command
  local name=$1; shift
  CUDA_VISIBLE_DEVICES=${ONE_GPU:-0} timeout 200 "$@" >"$out/$name.log" 2>&1
  echo "== $name rc=$?"
  grep "library (\|^knnwb cuda\|floor" "$out/$name.log" | head -12
  grep "DEBUG.*knnwb: " "$out/$name.log" | sed 's/.*DEBUG: //' | grep -v "^knnwb: rank" | head -12
}
run k4096_device $bench --n 384126 --k 4096 --no-select --no-floor
[ "$mode" != final ] && KNNWB_CUDA_HOST_REFINE=1 run k4096_host $bench --n 384126 --k 4096 --no-select --no-floor
CUDA_VISIBLE_DEVICES=${ONE_GPU:-0} timeout 200 python3 tests/bench_gpu/torch_baseline.py --n 384126 --k 4096 >"$out/torch.log" 2>&1
echo "== torch rc=$?"; grep "^n = \|^| [0-9]" "$out/torch.log"
[ "$mode" != final ] && run k4096_fp16 $bench --n 384126 --k 4096 --screen fp16 --no-select --no-floor
[ "$mode" = final ] && ONE_GPU=0,1 run k4096_two_gpus $bench --n 384126 --k 4096 --no-select --no-floor
[ "$mode" = bench ] && exit 0
run subset_cuda $bench --n 20011 --k 4096 --no-select --no-floor
run subset_cpu $bench --n 20011 --k 4096 --backend cpu --no-select --no-floor
unset KNNWB_CUDA_TRACE G_MESSAGES_DEBUG
if [ "$mode" = full ] || [ "$mode" = final ]; then
  timeout 240 $b/tests/kernels/test_cuda_knn --verbose >"$out/tests.log" 2>&1
  echo "test_cuda_knn rc=$? ($(grep -c '^ok' "$out/tests.log") ok)"; grep "^not ok\|ERROR" "$out/tests.log" | head
fi
if command -v compute-sanitizer >/dev/null; then
  CUDA_VISIBLE_DEVICES=${ONE_GPU:-0} timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $bench --n 9001 --k 4096 \
    --no-select --no-floor >"$out/memcheck.log" 2>&1
  echo "memcheck (n = 9001, k = 4096) rc=$?"; grep "ERROR SUMMARY\|digest" "$out/memcheck.log"
fi
