#!/usr/bin/env bash
# The half-tile filters of DOT and ABS_DOT scores (kernels/tile_filter_half.cu), one GPU: ordinary
# tiles streamed (the default), streamed without the L2 prefetch (KNNWB_CUDA_HALF_FILTER=noprefetch)
# and the 8-row block kernel (=block). The CUDA tests, the CPU = GPU differential check,
# compute-sanitizer memcheck, the stream kernel's spills in SASS, ncu of one mid-loop launch, and
# in alternating runs the selection time per tile with the lists' digests on the real-like
# workload (ROWS: real_like_check.sh --rows) and bench_knn_gpu d = 295.
# QUICK=1: only the half filters' CUDA test, no differential check, no memcheck.
# Usage (repository root, after `. .gpu/env.sh`): bash tests/bench_gpu/filter_check.sh OUT ROWS [CASES]
set -uo pipefail
out=$1; rows=$2; cases=${3:-60}; b=/tmp/knnwb-filter; d=/tmp/knnwb-filter-data; mkdir -p "$out" $d
SECONDS=0
{ cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_MPI=OFF -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release &&
  cmake --build $b -j"$(nproc)"; } >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
echo "build ${SECONDS} s"
k=$b/bin/knnwb; bench=$b/tests/bench_gpu/bench_knn_gpu; export LD_LIBRARY_PATH=$b:${LD_LIBRARY_PATH:-}
obj=$(find $b -name 'tile_filter_half.cu.o' | head -1)
cuobjdump -sass "$obj" 2>/dev/null | awk '/Function :/{f=$3} /STL|LDL/{n[f]++} END{for (x in n) print "    spill instructions", n[x], x}' | grep -E "stream|filter_half" || echo "    no spill instructions in the half filters"
if [ -n "${QUICK:-}" ]; then
  $b/tests/kernels/test_cuda_knn -p /kernels/cuda-knn/half-filters >"$out/ctest.log" 2>&1
  echo "test_cuda_knn -p /kernels/cuda-knn/half-filters rc=$? $(grep -cE '^ok' "$out/ctest.log") ok"
else
  ctest --test-dir $b -R "test_cuda" --output-on-failure >"$out/ctest.log" 2>&1
  echo "ctest rc=$? $(grep -E 'tests passed|tests failed' "$out/ctest.log")"
fi
if [ -z "${QUICK:-}" ]; then
  bash tests/bench_gpu/differential_check.sh "$out/diff" "$k" "$cases" >"$out/diff.log" 2>&1
  echo "differential rc=$? $(tail -1 "$out/diff.log")"
  timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 "$bench" --n 20011 --d 37 --no-floor \
    >"$out/memcheck.log" 2>&1
  echo "memcheck (n = 20011, d = 37) rc=$? $(grep -E 'ERROR SUMMARY' "$out/memcheck.log")"
fi
$k metafeatures "$rows" --ops all -o $d/real.npy -q || exit 1
sel() { grep -oE "selection kernels [0-9.]+ ms per diagonal tile \([0-9]+\), [0-9.]+ ms per other|tile loop on the GPU [0-9.]+ s = selection [0-9.]+|GEMM [0-9.]+ s;" "$1" | tr '\n' ' '; }
for mode in block stream16 block4 stream block stream16 block4; do
  KNNWB_CUDA_HALF_FILTER=$mode KNNWB_CUDA_TRACE=1 G_MESSAGES_DEBUG=all $k knn $d/real.npy -k 20 -m pearson -o $d/g.npy >"$out/one.log" 2>&1
  echo "real-like $mode rc=$? $(sha256sum $d/g.npy | cut -c1-16) $(grep -E '^knnwb: [0-9]+ x' "$out/one.log" | grep -oE '\(read.*')"
  echo "    $(sel "$out/one.log")"
done
for mode in block stream16 block4; do
  KNNWB_CUDA_HALF_FILTER=$mode KNNWB_CUDA_SERIAL_TILES=1 KNNWB_CUDA_TRACE=1 $k knn $d/real.npy -k 20 -m pearson -o $d/g.npy >"$out/one.log" 2>&1
  echo "real-like serial tiles $mode rc=$? $(sha256sum $d/g.npy | cut -c1-16)"
  echo "    $(sel "$out/one.log")"
done
for mode in ${D295_MODES:-block stream16 block4}; do
  KNNWB_CUDA_HALF_FILTER=$mode KNNWB_CUDA_TRACE=1 timeout 120 "$bench" --n 1533876 --no-select --no-floor >"$out/one.log" 2>&1
  echo "bench d = 295 $mode rc=$? $(grep -iE 'digest|end to end' "$out/one.log" | head -2 | tr '\n' ' ')"
  echo "    $(sel "$out/one.log")"
done
for mode in ${NCU_MODES:-stream16 block4 block}; do
  KNNWB_CUDA_HALF_FILTER=$mode timeout 200 ncu --clock-control none -k regex:'filter_half' --launch-skip 9000 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats \
    $k knn $d/real.npy -k 20 -m pearson -o $d/g2.npy >"$out/ncu-$mode.txt" 2>&1
  echo "ncu $mode rc=$?"; grep -E "filter_half|Duration|DRAM Throughput|Achieved Occupancy|Eligible Warps|Registers" "$out/ncu-$mode.txt" | sed 's/(SelectState.*//' | awk '{$1=$1; print "    " $0}' | head -8
done
echo "total ${SECONDS} s"
