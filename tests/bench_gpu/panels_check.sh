#!/usr/bin/env bash
# Ordinary tiles in row panels (kernels/tile_panels.cu, KNNWB_CUDA_PANELS=N) against whole tiles,
# one GPU: in alternating runs the user's whole command on the real-like workload (ROWS:
# real_like_check.sh --rows; wall, phases, selection per tile, lists digest) and bench_knn_gpu
# d = 295; then the CUDA selection test and the engine's fused-tiles test on the panel path, and
# the CPU = GPU differential check with panels.
# Usage (repository root, after `. .gpu/env.sh`): bash tests/bench_gpu/panels_check.sh OUT ROWS [CASES]
set -uo pipefail
out=$1; rows=$2; cases=${3:-24}; b=/tmp/knnwb-panels; d=/tmp/knnwb-panels-data; mkdir -p "$out" $d
SECONDS=0
{ cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_MPI=OFF -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release &&
  cmake --build $b -j"$(nproc)"; } >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
echo "build ${SECONDS} s"
k=$b/bin/knnwb; bench=$b/tests/bench_gpu/bench_knn_gpu; export LD_LIBRARY_PATH=$b:${LD_LIBRARY_PATH:-}
$k metafeatures "$rows" --ops all -o $d/real.npy -q || exit 1
sel() { grep -oE "selection kernels [0-9.]+ ms per diagonal tile \([0-9]+\), [0-9.]+ ms per other|tile loop on the GPU [0-9.]+ s = selection [0-9.]+|GEMM [0-9.]+ s;|margin planner:.* [0-9.]+ s$|partition: .*(declin|would leave).*" "$1" | tr '\n' ' '; }
for p in 1 4 8 1 4 8 2; do
  t0=$(date +%s.%N)
  KNNWB_CUDA_PANELS=$p KNNWB_CUDA_TRACE=1 G_MESSAGES_DEBUG=all $k knn $d/real.npy -k 20 -m pearson -o $d/g.npy >"$out/one.log" 2>&1
  r=$?; t1=$(date +%s.%N)
  echo "real-like panels $p rc=$r wall $(awk -v a=$t0 -v b=$t1 'BEGIN{printf "%.2f", b-a}') s $(sha256sum $d/g.npy | cut -c1-16) $(grep -E '^knnwb: [0-9]+ x' "$out/one.log" | grep -oE '\(read.*')"
  echo "    $(sel "$out/one.log")"
done
for p in 1 4 1 4; do
  KNNWB_CUDA_PANELS=$p KNNWB_CUDA_TRACE=1 timeout 120 "$bench" --n 1533876 --no-select --no-floor >"$out/one.log" 2>&1
  echo "bench d = 295 panels $p rc=$? $(grep -oE 'library \(.*s;|lists digest [0-9a-f]+' "$out/one.log" | tr '\n' ' ')"
  echo "    $(sel "$out/one.log")"
done
KNNWB_CUDA_PANELS=3 timeout 200 $b/tests/kernels/test_cuda_select >"$out/select.log" 2>&1
echo "test_cuda_select, 3 panels rc=$? $(grep -cE '^ok' "$out/select.log") ok, $(grep -cE '^not ok' "$out/select.log") not ok"
KNNWB_CUDA_PANELS=4 timeout 200 $b/tests/kernels/test_cuda_knn -p /kernels/cuda-knn/fused-tiles >"$out/knn.log" 2>&1
echo "test_cuda_knn fused-tiles, 4 panels rc=$? $(grep -cE '^ok' "$out/knn.log") ok, $(grep -cE '^not ok' "$out/knn.log") not ok"
KNNWB_CUDA_PANELS=4 bash tests/bench_gpu/differential_check.sh "$out/diff" "$k" "$cases" >"$out/diff.log" 2>&1
echo "differential, 4 panels rc=$? $(tail -1 "$out/diff.log")"
echo "total ${SECONDS} s"
