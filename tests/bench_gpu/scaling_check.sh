#!/usr/bin/env bash
# Two GPUs in one process against one: 1,533,876 x 295 Pearson k = 20, the
# library alone (host matrix to exact host lists), with KNNWB_CUDA_TRACE=1, whose timeline line
# gives each GPU's phases (set up, uploaded, own diagonal tiles, every GPU's, tiles done, lists
# out) and splits the tile loop's GPU time into selection, threshold imports and the rest.
# Variants (each must keep the digest 78f71267a78e9b94):
#   KNNWB_CUDA_WARM_UP=1/0    the first score GEMM warmed up on a helper thread, or not (default 0)
#   KNNWB_CUDA_DIAGONALS=shared  diagonal tiles from a shared counter, a latch instead of a barrier
#   KNNWB_CUDA_IMPORT=all     every threshold import takes all n rows (default: the piece's rows)
#   KNNWB_CUDA_PIECE=N        N off-diagonal tiles per work item (default: whole columns)
#   KNNWB_CUDA_EXCHANGE=N     thresholds imported every N pieces (default 1)
# and KNNWB_CUDA_TRACE=2 (candidate and merge counters, slightly slower).
# full: every variant on 2 GPUs, then the CUDA tests on both GPUs and --gpu-memory 4G (streaming)
# on 2 GPUs; short (default): the warm-up and the shared diagonal tiles, on and off, then
# test_cuda_knn with both on.
# Usage (repository root, after `. .gpu/env.sh`):
#   bash tests/bench_gpu/scaling_check.sh OUTDIR [BUILD] [short|full]
# BUILD: a CUDA build holding bench_knn_gpu and the CUDA tests (carried from a machine with the
# same CUDA, or built here when absent or unable to start). The logs end up in OUTDIR/logs.tar.gz.
set -uo pipefail
out=${1:-/tmp/knnwb-scaling}
b=${2:-/tmp/knnwb-build-scaling}
mode=${3:-short}
mkdir -p "$out"
export LD_LIBRARY_PATH=$b:${LD_LIBRARY_PATH:-}
if ! "$b/tests/kernels/test_cuda_select" -l >/dev/null 2>"$out/carried.log"; then
  echo "no usable build in $b ($(head -c 200 "$out/carried.log")): building"
  b=/tmp/knnwb-build-scaling
  export LD_LIBRARY_PATH=$b:$LD_LIBRARY_PATH
  { cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_CUDA_ARCHITECTURES=90 -DKNNWB_ONEDNN=OFF \
    -DCMAKE_BUILD_TYPE=Release \
    && cmake --build $b --target test_cuda_select test_cuda_knn bench_knn_gpu -j"$(nproc)"; } \
    >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
fi
bench=$b/tests/bench_gpu/bench_knn_gpu
pack() {
  (cd "$out" && ls | grep -v '^run\.log$\|^logs\.tar\.gz$' | tar -czf logs.tar.gz -T - --remove-files)
}
trap pack EXIT
nvidia-smi topo -m >"$out/topo.txt" 2>&1
grep "GPU0\|GPU1" "$out/topo.txt" | head -3
export KNNWB_CUDA_TRACE=1 G_MESSAGES_DEBUG=all
# name gpus [VAR=value ...] [-- bench options]
run() {
  local name=$1 gpus=$2
  shift 2
  local log=$out/$name.log vis=0
  [ "$gpus" = 2 ] && vis=0,1
  env CUDA_VISIBLE_DEVICES=$vis "$@" "$bench" --n 1533876 --no-select --no-floor >"$log" 2>&1
  echo "== $name ($gpus GPU): rc=$? $*"
  grep "library (\|^knnwb cuda worker\|DEBUG.*knnwb: \(whole\|rank\|[0-9]* rows\)" "$log" |
    grep -v "lists of\|per diagonal tile (1)" | sed 's/.*DEBUG: [0-9:.]* //'
}
if [ "$mode" = short ]; then
  run two-warm-up 2 KNNWB_CUDA_WARM_UP=1
  run two-shared-diagonals 2 KNNWB_CUDA_DIAGONALS=shared
  run two-both 2 KNNWB_CUDA_WARM_UP=1 KNNWB_CUDA_DIAGONALS=shared
  run two-neither 2 KNNWB_CUDA_WARM_UP=0
  run one-warm-up 1 KNNWB_CUDA_WARM_UP=1
  run one-no-warm-up 1 KNNWB_CUDA_WARM_UP=0
  run two-both-again 2 KNNWB_CUDA_WARM_UP=1 KNNWB_CUDA_DIAGONALS=shared
  t0=$(date +%s)
  KNNWB_CUDA_TRACE=0 G_MESSAGES_DEBUG= KNNWB_CUDA_WARM_UP=1 KNNWB_CUDA_DIAGONALS=shared \
    $b/tests/kernels/test_cuda_knn >"$out/tests.log" 2>&1
  echo "test_cuda_knn (2 GPUs, warm-up, shared diagonals) rc=$? ($(grep -c '^ok' "$out/tests.log") ok, $(($(date +%s) - t0)) s)"
  grep "^not ok\|ERROR\|FAIL\|Bail" "$out/tests.log" | head
  exit 0
fi
run one 1
run two 2
run two-no-warm-up 2 KNNWB_CUDA_WARM_UP=0
run two-warm-up 2 KNNWB_CUDA_WARM_UP=1
run two-import-all 2 KNNWB_CUDA_IMPORT=all
run two-piece-4 2 KNNWB_CUDA_PIECE=4
run two-piece-16 2 KNNWB_CUDA_PIECE=16
run two-piece-64 2 KNNWB_CUDA_PIECE=64
run two-no-exchange 2 KNNWB_CUDA_EXCHANGE=1000000
run one-stats 1 KNNWB_CUDA_TRACE=2
run two-stats 2 KNNWB_CUDA_TRACE=2
run two-again 2
t0=$(date +%s)
KNNWB_CUDA_TRACE=0 G_MESSAGES_DEBUG= $b/tests/kernels/test_cuda_select >"$out/tests.log" 2>&1 &&
  KNNWB_CUDA_TRACE=0 G_MESSAGES_DEBUG= $b/tests/kernels/test_cuda_knn >>"$out/tests.log" 2>&1
echo "tests (2 GPUs) rc=$? ($(grep -c '^ok' "$out/tests.log") ok, $(($(date +%s) - t0)) s)"
grep "^not ok\|ERROR\|FAIL\|Bail" "$out/tests.log" | head
KNNWB_CUDA_TRACE=0 "$bench" --n 1533876 --no-select --no-floor --gpu-memory 4G >"$out/two-4g.log" 2>&1
echo "== two-4g rc=$?"
grep "library (" "$out/two-4g.log"
