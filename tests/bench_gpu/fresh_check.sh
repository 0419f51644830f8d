#!/usr/bin/env bash
# The first tile of fresh rows in one kernel (kernels/tile_fresh.cu) against the staged filter and
# merge (the default; KNNWB_CUDA_FRESH=kernel chooses the kernel), one GPU: the CUDA tests, the CPU = GPU differential check,
# compute-sanitizer memcheck, and the selection time per diagonal tile with the lists' digests on
# the real-like workload (ROWS: real_like_check.sh --rows), bench_knn_gpu d = 295 and 10,000,000 x
# 50 clusters (the partitioned search's sub-searches).
# QUICK=1: no differential check and no 10M runs, but ncu on one launch of the fresh kernel.
# Usage (repository root, after `. .gpu/env.sh`): bash tests/bench_gpu/fresh_check.sh OUT ROWS [CASES]
set -uo pipefail
out=$1; rows=$2; cases=${3:-60}; b=/tmp/knnwb-fresh; d=/tmp/knnwb-fresh-data; mkdir -p "$out" $d
SECONDS=0
{ cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_MPI=OFF -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release &&
  cmake --build $b -j"$(nproc)"; } >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
echo "build ${SECONDS} s"
k=$b/bin/knnwb; bench=$b/tests/bench_gpu/bench_knn_gpu; export LD_LIBRARY_PATH=$b:${LD_LIBRARY_PATH:-}
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
ctest --test-dir $b -R "test_cuda|test_core_partition" --output-on-failure >"$out/ctest.log" 2>&1
echo "ctest rc=$? $(grep -E 'tests passed|tests failed' "$out/ctest.log")"
if [ -z "${QUICK:-}" ]; then
  bash tests/bench_gpu/differential_check.sh "$out/diff" "$k" "$cases" >"$out/diff.log" 2>&1
  echo "differential rc=$? $(tail -1 "$out/diff.log")"
else
  timeout 120 ncu --clock-control none -k regex:fresh_select_kernel --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    "$bench" --n 200000 --d 128 --no-select --no-floor >"$out/ncu.txt" 2>&1
  echo "ncu rc=$?"; grep -E "Duration|Registers|Achieved Occupancy|Theoretical Occupancy|Memory Throughput|Compute \(SM\)|Stall" "$out/ncu.txt" | head -14
fi
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 "$bench" --n 20011 --d 37 --no-floor \
  >"$out/memcheck.log" 2>&1
echo "memcheck (n = 20011, d = 37) rc=$? $(grep -E 'ERROR SUMMARY' "$out/memcheck.log")"
sel() { grep -oE "selection kernels [0-9.]+ ms per diagonal tile \([0-9]+\), [0-9.]+ ms per other" "$1" | head -2 | tr '\n' ' '; }
$k metafeatures "$rows" --ops all -o $d/real.npy -q || exit 1
for mode in staged kernel staged kernel; do
  KNNWB_CUDA_FRESH=$mode KNNWB_CUDA_TRACE=1 G_MESSAGES_DEBUG=all $k knn $d/real.npy -k 20 -m pearson -o $d/g.npy >"$out/one.log" 2>&1
  echo "real-like $mode rc=$? $(sha256sum $d/g.npy | cut -c1-16) $(grep -E '^knnwb: [0-9]+ x' "$out/one.log" | grep -oE '\(read.*')"
  echo "    $(sel "$out/one.log") $(grep -oE 'select [0-9.]+ s, refine' "$out/one.log" | head -1)"
done
for mode in staged kernel; do
  KNNWB_CUDA_FRESH=$mode KNNWB_CUDA_TRACE=1 timeout 120 "$bench" --n 1533876 --no-select --no-floor >"$out/one.log" 2>&1
  echo "bench d = 295 $mode rc=$? $(grep -iE 'digest|end to end' "$out/one.log" | head -2 | tr '\n' ' ')"
  echo "    $(sel "$out/one.log")"
done
[ -n "${QUICK:-}" ] && { echo "total ${SECONDS} s"; exit 0; }
[ -s $d/c10M.npy ] || $py tests/bench/make_clusters_table.py $d/c10M.npy 10000000 50
for mode in kernel staged kernel; do
  t0=$(date +%s.%N)
  KNNWB_CUDA_FRESH=$mode KNNWB_CUDA_TRACE=1 G_MESSAGES_DEBUG=all $k knn $d/c10M.npy -k 30 -m euclidean -o $d/g.npy >"$out/one.log" 2>&1
  r=$?; t1=$(date +%s.%N)
  echo "10M $mode rc=$r wall $(awk -v a=$t0 -v b=$t1 'BEGIN{printf "%.2f", b-a}') s $(sha256sum $d/g.npy | cut -c1-16) $(grep -E '^knnwb: [0-9]+ x' "$out/one.log" | grep -oE '\(read.*')"
  grep "selection kernels" "$out/one.log" | awk '{for(i=1;i<=NF;i++){if($i=="diagonal"){x=$(i-3);n=substr($(i+2),2)} if($i=="other"){y=$(i-3);m=substr($(i+2),2)}} sd+=x*n; so+=y*m} END{printf "    selection: diagonal %.0f ms, other %.0f ms (GPU stream time, all sub-searches)\n", sd, so}'
  grep -oE "own lists [0-9.]+ s" "$out/one.log" | head -1 | sed 's/^/    /'
done
echo "total ${SECONDS} s"
