#!/usr/bin/env bash
# The GEMMs and the selection on disjoint SMs (KNNWB_CUDA_GEMM_SMS, kernels/sm_split.cu) against
# every stream on every SM, one GPU, alternating runs: the real-like whole command (ROWS:
# real_like_check.sh --rows), 2,000,000 x 50 clusters euclidean and bench_knn_gpu d = 295, with
# the lists' digests (the same in every run) and the tile loop's time from the trace; then the
# CUDA selection tests with the split.
# Usage (repository root, after `. .gpu/env.sh`): bash tests/bench_gpu/split_check.sh OUT ROWS [SPLITS]
set -uo pipefail
out=$1; rows=$2; splits=${3:-"48 64 80"}; b=/tmp/knnwb-split; d=/tmp/knnwb-split-data
mkdir -p "$out" $d
SECONDS=0
{ cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_MPI=OFF -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release &&
  cmake --build $b -j"$(nproc)" --target knnwb_host knnwb_knn_plugin bench_knn_gpu test_cuda_select; } \
  >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
echo "build ${SECONDS} s"
k=$b/bin/knnwb; bench=$b/tests/bench_gpu/bench_knn_gpu; export LD_LIBRARY_PATH=$b:${LD_LIBRARY_PATH:-}
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
$k metafeatures "$rows" --ops all -o $d/real.npy -q || exit 1
[ -s $d/c2M.npy ] || $py tests/bench/make_clusters_table.py $d/c2M.npy 2000000 50 >/dev/null
loop() { grep -oE "tile loop on the GPU [0-9.]+ s|SMs for the GEMMs [0-9]+, for the selection [0-9]+[^;]*|selection kernels [0-9.]+ ms per diagonal tile \([0-9]+\), [0-9.]+ ms per other" "$1" | sort -u | tr '\n' ';'; }
whole() { # name, env..., then the knn arguments after --
  local name=$1; shift; local envs=(); while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  rm -f $d/g.npy; local t0 t1 r; t0=$(date +%s.%N)
  env "${envs[@]}" KNNWB_CUDA_TRACE=1 G_MESSAGES_DEBUG=all $k knn "$@" -o $d/g.npy >"$out/one.log" 2>&1; r=$?
  t1=$(date +%s.%N); cat "$out/one.log" >>"$out/runs.log"
  printf '%-26s rc=%d wall %s s %s %s\n' "$name" $r "$(awk -v a=$t0 -v b=$t1 'BEGIN{printf "%.2f", b-a}')" \
    "$(sha256sum $d/g.npy 2>/dev/null | cut -c1-16)" "$(grep -E '^knnwb: [0-9]+ x' "$out/one.log" | grep -oE '\(read.*')"
  echo "    $(loop "$out/one.log")"
}
for round in 1 2; do
  whole "real-like all SMs" KNNWB_X=0 -- $d/real.npy -k 20 -m pearson
  for s in $splits; do whole "real-like GEMM on $s" KNNWB_CUDA_GEMM_SMS=$s -- $d/real.npy -k 20 -m pearson; done
done
for round in 1 2; do
  whole "2M x 50 all SMs" KNNWB_X=0 -- $d/c2M.npy -k 30 -m euclidean
  for s in $splits; do whole "2M x 50 GEMM on $s" KNNWB_CUDA_GEMM_SMS=$s -- $d/c2M.npy -k 30 -m euclidean; done
done
for s in 0 $splits; do
  KNNWB_CUDA_GEMM_SMS=$s KNNWB_CUDA_TRACE=1 timeout 120 "$bench" --n 1533876 --no-select --no-floor >"$out/one.log" 2>&1
  echo "bench d = 295 GEMM on ${s:-all} rc=$? $(grep -iE 'digest|end to end' "$out/one.log" | head -2 | tr '\n' ' ')"
  echo "    $(loop "$out/one.log")"
done
first=${splits%% *}
KNNWB_CUDA_GEMM_SMS=$first ctest --test-dir $b -R "test_cuda_select" --output-on-failure >"$out/ctest.log" 2>&1
echo "ctest test_cuda_select with GEMM on $first: rc=$? $(grep -E 'tests passed|tests failed' "$out/ctest.log")"
echo "total ${SECONDS} s"
