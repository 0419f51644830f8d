#!/usr/bin/env bash
# Fused tiles (kernels/tile_fused_wgmma.cu, their pairs kept for the selection stream by
# kernels/tile_fused_pairs.cu) against cuBLAS + the filter kernel, and the default that measures
# both as the loop goes (kernels/tile_issue.cu, fused_probe), with the tiles whose rows or columns
# saw fewer than KNNWB_CUDA_FUSED_AFTER tiles (default 2) left to the filter, side by side in one
# call: the fused-tiles test against the CPU backend, memcheck and racecheck of a fused run, the user's whole
# command on the real-like matrix (ROWS: real_like_check.sh --rows; Pearson k = 20) and on
# 1,000,000 rows of 50 clusters at d = 32, 64, 128 (cosine k = 30), in alternating rounds with the
# lists' digests, on each GPU set of GPUS, and ncu of one mid-loop launch of each kernel.
# Usage (repository root, after `. .gpu/env.sh`): bash tests/bench_gpu/fused_after_check.sh OUT ROWS
#   ROUNDS=2, QUICK=1 (the real-like runs only, no tests, memcheck or ncu), SETTINGS (see below),
#   GPUS="0" (CUDA_VISIBLE_DEVICES values, e.g. "0 0,1")
set -uo pipefail
out=$1; rows=$2; rounds=${ROUNDS:-2}; quick=${QUICK:-0}
b=/tmp/knnwb-after; d=/tmp/knnwb-after-data; mkdir -p "$out" $d
SECONDS=0
{ cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_MPI=OFF -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release &&
  cmake --build $b -j"$(nproc)" --target knnwb_host knnwb_knn_plugin test_cuda_knn; } \
  >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
echo "build ${SECONDS} s"
k=$b/bin/knnwb; export LD_LIBRARY_PATH=$b:${LD_LIBRARY_PATH:-} CUDA_VISIBLE_DEVICES=0
read -r -a gpu_sets <<<"${GPUS:-0}"
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
if [ "$quick" != 1 ]; then
  SECONDS=0
  timeout 300 $b/tests/kernels/test_cuda_knn -p /kernels/cuda-knn/fused-tiles >"$out/tests.log" 2>&1
  echo "fused-tiles test rc=$? ${SECONDS} s"; grep -E "^not ok|^ok|Bail|ERROR" "$out/tests.log" | head
fi
$k metafeatures "$rows" --ops all -o $d/real.npy -q || exit 1
for dim in 32 64 128; do $py tests/bench/make_clusters_table.py $d/c$dim.npy 1000000 $dim >/dev/null; done
$py tests/bench/make_clusters_table.py $d/small.npy 20011 37 >/dev/null
if [ "$quick" != 1 ]; then
  KNNWB_CUDA_FUSED=1 KNNWB_CUDA_FUSED_AFTER=0 timeout 300 compute-sanitizer --tool memcheck --leak-check no \
    $k knn $d/small.npy -k 20 -m pearson -o $d/m.npy >"$out/memcheck.log" 2>&1
  echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$out/memcheck.log")"
  # a pool of 50 pairs and tiles of 4,096: blocks and lines lose pairs, the merge recomputes them
  KNNWB_CUDA_FUSED=1 KNNWB_CUDA_FUSED_AFTER=0 KNNWB_CUDA_FUSED_ROOM=50 KNNWB_CUDA_MAX_TILE=4096 \
    timeout 300 compute-sanitizer --tool racecheck $k knn $d/small.npy -k 20 -m pearson -o $d/m.npy \
    >"$out/racecheck.log" 2>&1
  echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$out/racecheck.log" | head -1)"
fi
# SETTINGS: ";"-separated settings of space-separated VAR=VALUE pairs
# (KNNWB_CUDA_FUSED= is the default: the measurement decides)
IFS=';' read -r -a settings <<<"${SETTINGS:-KNNWB_CUDA_FUSED=0;KNNWB_CUDA_FUSED=;KNNWB_CUDA_FUSED=1}"
trace() { grep -oE "tile loop on the GPU [0-9.]+ s|[0-9.]+ ms per other tile \([0-9]+, of which [0-9]+ fused|fused tiles won [0-9]+ of [0-9]+" "$1" | sort -u | tr '\n' ';'; }
whole() { # setting, then the knn arguments, on every GPU set
  local s=$1; shift
  for g in "${gpu_sets[@]}"; do whole_on "$g" "$s" "$@"; done
}
whole_on() { # GPUs, setting, then the knn arguments
  local g=$1 s=$2; shift 2; rm -f $d/g.npy $d/g.distances.npy $d/g.labels.txt; local t0 t1 r; t0=$(date +%s.%N)
  env CUDA_VISIBLE_DEVICES=$g $s KNNWB_CUDA_TRACE=1 G_MESSAGES_DEBUG=all $k knn "$@" -o $d/g.npy >"$out/one.log" 2>&1; r=$?
  t1=$(date +%s.%N); { echo "== $g $s $*"; cat "$out/one.log"; } >>"$out/runs.log"
  printf '  gpus=%-4s %-40s rc=%d wall %s s %s %s\n      %s\n' "$g" "$s" $r "$(awk -v a=$t0 -v b=$t1 'BEGIN{printf "%.2f", b-a}')" \
    "$(sha256sum $d/g.npy 2>/dev/null | cut -c1-16)" "$(grep -E '^knnwb: [0-9]+ x' "$out/one.log" | grep -oE '\(read.*')" \
    "$(trace "$out/one.log")"
}
for ((r = 1; r <= rounds; r++)); do
  echo "real-like 1,533,876 x 128 pearson k = 20, round $r"
  for s in "${settings[@]}"; do whole "$s" $d/real.npy -k 20 -m pearson; done
done
[ "$quick" = 1 ] && exit 0
for dim in 32 64 128; do
  echo "1,000,000 x $dim clusters, cosine k = 30"
  for s in "${settings[@]}" "${settings[@]}"; do whole "$s" $d/c$dim.npy -k 30 -m cosine; done
done
# one mid-loop launch of each kernel (the fused one, cuBLAS's GEMM + filter)
sol="--section SpeedOfLight --section Occupancy --section LaunchStats"
KNNWB_CUDA_FUSED=1 timeout 150 ncu --clock-control none -k regex:fused_wgmma --launch-skip 150 --launch-count 1 $sol \
  $k knn $d/c128.npy -k 30 -m cosine -o $d/g.npy >"$out/ncu.txt" 2>&1
KNNWB_CUDA_FUSED=0 timeout 150 ncu --clock-control none -k 'regex:nvjet|gemm|filter' --launch-skip 300 --launch-count 2 $sol \
  $k knn $d/c128.npy -k 30 -m cosine -o $d/g.npy >>"$out/ncu.txt" 2>&1
grep -E "^  [a-zA-Z_].*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Grid Size" \
  "$out/ncu.txt" | cut -c1-130 | head -40
rm -rf $d
