#!/usr/bin/env bash
# One batch on an nvidia-h200-x2 machine for the tile loop.
#   check: the CUDA tests on both GPUs, compute-sanitizer memcheck of a small FP16 run, the selection
#          kernels and the score GEMM under ncu (a few mid-loop launches each, profiled alone), then
#          1,533,876 x 295 (and x 128) on 1 and 2 GPUs with KNNWB_CUDA_TRACE=1.
#   final: the benchmark set side by side: 1,533,876 x 295 Pearson k = 20 on 1 GPU (with both GEMM
#          floors), under --gpu-memory 4G, with float32 tiles, with the 4-column half filter
#          (KNNWB_CUDA_HALF_FILTER=4) and on 2 GPUs; 384,126 x 295 (k = 20 and 4096) and
#          1,533,876 x 128 on 1 and 2 GPUs; PyTorch's chunked GEMM + topk in the same call, on the
#          second GPU while the first runs knnwb (the CUDA tests run there first).
# Every run prints its lists digest: 1,533,876 x 295 must give 78f71267a78e9b94 everywhere.
# Usage (repository root, after `. .gpu/env.sh`):
#   bash tests/bench_gpu/tile_loop_check.sh OUTDIR [BUILD] [check|final]
# The logs end up packed in OUTDIR/logs.tar.gz.
# BUILD: a CUDA build holding bench_knn_gpu and the CUDA tests (carried from a machine with the
# same CUDA, or built here when absent or unable to start on this machine).
set -uo pipefail
out=${1:-/tmp/knnwb-tile-loop}
b=${2:-/tmp/knnwb-build-tile-loop}
mode=${3:-final}
mkdir -p "$out"
export LD_LIBRARY_PATH=$b:${LD_LIBRARY_PATH:-}
if ! "$b/tests/kernels/test_cuda_select" -l >/dev/null 2>"$out/carried.log"; then
  echo "no usable build in $b ($(head -c 200 "$out/carried.log")): building"
  b=/tmp/knnwb-build-tile-loop
  export LD_LIBRARY_PATH=$b:$LD_LIBRARY_PATH
  { cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    && cmake --build $b --target test_cuda_select test_cuda_knn bench_knn_gpu -j"$(nproc)"; } \
    >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
fi
bench=$b/tests/bench_gpu/bench_knn_gpu
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem --format=csv,noheader
export KNNWB_CUDA_TRACE=1 G_MESSAGES_DEBUG=all
# the lines that say where the time goes
# at most 8 files come back from a device call: pack the logs into one (run.log, if the caller
# tees into OUTDIR, stays beside it)
pack() {
  (cd "$out" && ls | grep -v '^run\.log$\|^logs\.tar\.gz$' | tar -czf logs.tar.gz -T - --remove-files)
}
trap pack EXIT
sum() {
  grep "library (\|select alone\|floor\|GEMM\|^| [0-9]\|^knnwb cuda worker\|DEBUG.*knnwb:" "$1" |
    sed 's/.*DEBUG: [0-9:.]* //'
}
sections="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
  --section WarpStateStats --section SchedulerStats --section LaunchStats"

if [ "$mode" = check ]; then
  t0=$(date +%s)
  { KNNWB_CUDA_TRACE=0 G_MESSAGES_DEBUG= $b/tests/kernels/test_cuda_select \
    && KNNWB_CUDA_TRACE=0 G_MESSAGES_DEBUG= $b/tests/kernels/test_cuda_knn; } >"$out/tests.log" 2>&1
  echo "tests rc=$? ($(grep -c '^ok' "$out/tests.log") ok, $(($(date +%s) - t0)) s)"
  grep "^not ok\|ERROR\|FAIL\|Bail" "$out/tests.log" | head
  CUDA_VISIBLE_DEVICES=0 KNNWB_CUDA_TRACE=0 G_MESSAGES_DEBUG= timeout 200 compute-sanitizer \
    --tool memcheck --error-exitcode 9 $bench --n 20000 --screen fp16 --no-floor \
    >"$out/memcheck.log" 2>&1
  echo "memcheck (fp16, n = 20000) rc=$?"
  grep "ERROR SUMMARY\|digest" "$out/memcheck.log"
  # 384,126 rows: 47 blocks, 1,128 tiles; skipping 1,200 selection launches lands mid-loop
  CUDA_VISIBLE_DEVICES=0 KNNWB_CUDA_TRACE=0 timeout 150 ncu --clock-control none \
    -k regex:'filter_kernel|merge_kernel' --launch-skip 1200 --launch-count 6 $sections \
    "$bench" --n 384126 --no-lib --no-floor >"$out/ncu_select.txt" 2>&1
  echo "ncu selection rc=$?"
  CUDA_VISIBLE_DEVICES=0 KNNWB_CUDA_TRACE=0 timeout 120 ncu --clock-control none \
    -k regex:'nvjet|gemm|xmma|cutlass' --launch-skip 300 --launch-count 1 $sections \
    "$bench" --n 384126 --no-lib --no-floor >"$out/ncu_gemm.txt" 2>&1
  echo "ncu gemm rc=$?"
  cat "$out/ncu_select.txt" "$out/ncu_gemm.txt" |
    grep -E "filter_kernel|merge_kernel|nvjet|gemm|^ +(Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Compute \(SM\) Throughput)" |
    grep -v "==PROF==" | sed 's/(SelectState, TileGeom.*Context 1, //' | head -60
  echo "== 1 GPU"
  CUDA_VISIBLE_DEVICES=0 $bench --n 1533876 >"$out/b1.log" 2>&1
  sum "$out/b1.log"
  echo "== 2 GPUs"
  $bench --n 1533876 --no-floor >"$out/b2.log" 2>&1
  sum "$out/b2.log"
  exit 0
fi

# final. The CUDA tests, then PyTorch (1,533,876 and 384,126 rows), run on the second GPU
# meanwhile (the tests' two-GPU parts then use one GPU listed twice; the 2-GPU benchmark runs
# check the lists on both GPUs, after PyTorch is done).
t0=$(date +%s)
{ { CUDA_VISIBLE_DEVICES=1 KNNWB_CUDA_TRACE=0 G_MESSAGES_DEBUG= $b/tests/kernels/test_cuda_select \
  && CUDA_VISIBLE_DEVICES=1 KNNWB_CUDA_TRACE=0 G_MESSAGES_DEBUG= $b/tests/kernels/test_cuda_knn; } \
  >"$out/tests.log" 2>&1; echo "tests (GPU 1) rc=$? ($(grep -c '^ok' "$out/tests.log") ok, $(($(date +%s) - t0)) s)" >"$out/tests.rc"
  CUDA_VISIBLE_DEVICES=1 python3 tests/bench_gpu/torch_baseline.py --n 384126,1533876 \
  >"$out/torch.log" 2>&1; } &
side_pid=$!
CUDA_VISIBLE_DEVICES=0 KNNWB_CUDA_TRACE=0 G_MESSAGES_DEBUG= timeout 200 compute-sanitizer \
  --tool memcheck --error-exitcode 9 $bench --n 20000 --screen fp16 --no-floor \
  >"$out/memcheck.log" 2>&1
echo "memcheck (fp16, n = 20000) rc=$?"
grep "ERROR SUMMARY\|digest" "$out/memcheck.log"
CUDA_VISIBLE_DEVICES=0 KNNWB_CUDA_TRACE=0 timeout 150 ncu --clock-control none \
  -k regex:'filter|merge_|nvjet|gemm' --launch-skip 1800 --launch-count 8 $sections \
  "$bench" --n 384126 --no-lib --no-floor >"$out/ncu_select.txt" 2>&1
echo "ncu rc=$?"
grep -E "filter|merge_|nvjet|gemm|^ +(Duration|DRAM Throughput|Achieved Occupancy|Registers Per)" \
  "$out/ncu_select.txt" | grep -v "==PROF==" | sed 's/(knnwb_cuda::SelectState, knnwb_cuda::TileGeom.*Context 1, //' |
  cut -c1-140 | head -48
echo "== 1 GPU, 384,126 and 1,533,876 x 295 (select alone, library, floors)"
CUDA_VISIBLE_DEVICES=0 $bench --n 384126,1533876 >"$out/b1.log" 2>&1
sum "$out/b1.log" | grep -v "DEBUG"
echo "== 1 GPU, --gpu-memory 4G; float32 tiles; the 4-column half filter (KNNWB_CUDA_HALF_FILTER=4)"
CUDA_VISIBLE_DEVICES=0 $bench --n 1533876 --gpu-memory 4G --no-select --no-floor >"$out/b4g.log" 2>&1
sum "$out/b4g.log" | grep "library ("
CUDA_VISIBLE_DEVICES=0 KNNWB_SCREEN_FLOAT_SCORES=1 $bench --n 1533876 --no-select --no-floor \
  >"$out/bfloat.log" 2>&1
sum "$out/bfloat.log" | grep "library (\|selection kernels"
CUDA_VISIBLE_DEVICES=0 KNNWB_CUDA_HALF_FILTER=4 $bench --n 1533876 --no-select --no-floor \
  >"$out/bv4.log" 2>&1
sum "$out/bv4.log" | grep "library (\|selection kernels"
echo "== 1 GPU, 384,126 x 295, k = 4096"
CUDA_VISIBLE_DEVICES=0 $bench --n 384126 --k 4096 --no-select --no-floor >"$out/bk.log" 2>&1
sum "$out/bk.log" | grep "library ("
echo "== d = 128, 1 GPU"
CUDA_VISIBLE_DEVICES=0 $bench --n 1533876 --d 128 --no-select >"$out/b128.log" 2>&1
sum "$out/b128.log" | grep "library (\|FP16 GEMM\|^| [0-9]"
wait $side_pid
cat "$out/tests.rc"
grep "^not ok\|ERROR\|FAIL\|Bail" "$out/tests.log" | head
echo "== PyTorch, GPU 1 (beside the runs on GPU 0)"
tail -4 "$out/torch.log"
echo "== 2 GPUs, 384,126 and 1,533,876 x 295; d = 128"
$bench --n 384126,1533876 --no-floor >"$out/b2.log" 2>&1
sum "$out/b2.log" | grep "library (\|select alone\|^| [0-9]\|worker"
$bench --n 1533876 --d 128 --no-select --no-floor >"$out/b128x2.log" 2>&1
sum "$out/b128x2.log" | grep "library ("
