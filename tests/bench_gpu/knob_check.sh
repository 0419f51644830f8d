#!/usr/bin/env bash
# One environment knob of the CUDA backend, side by side in one call on one GPU: the 1,533,876 x 295
# Pearson k = 20 benchmark (library, host matrix to exact host lists) for each value of VAR in
# alternating rounds (KNNWB_CUDA_TRACE=1: per-tile selection time, tile loop, end to end, lists
# digest), one KNNWB_CUDA_TRACE=2 run per value (candidates and merges per tile), and ncu of the
# half filter and the merge kernels at one mid-loop tile for each value.
# Usage (repository root, after `. .gpu/env.sh`):
#   bash tests/bench_gpu/knob_check.sh OUT BUILD VAR VALUE [VALUE...]   (ROUNDS=2, N=1533876;
#   QUICK=1: the timed rounds only)
# e.g. bash tests/bench_gpu/knob_check.sh /tmp/out /tmp/b KNNWB_CUDA_LAZY_LIMIT 48 24 16
set -uo pipefail
out=$1; b=$2; var=$3; shift 3; values=("$@"); mkdir -p "$out"
rounds=${ROUNDS:-2}; n=${N:-1533876}
SECONDS=0
{ cmake -S . -B "$b" -DKNNWB_CUDA=ON -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release &&
  cmake --build "$b" -j"$(nproc)" --target bench_knn_gpu test_cuda_knn; } \
  >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
echo "build ${SECONDS} s"
bench=$b/tests/bench_gpu/bench_knn_gpu
export CUDA_VISIBLE_DEVICES=0
log=$out/runs.log; : >"$log"
sum() { grep -E "library \(|selection kernels|tile loop on|candidates,|digest" "$1" | sed 's/^knnwb cuda //' | cut -c1-300; }
for ((r = 1; r <= rounds; r++)); do
  for v in "${values[@]}"; do
    env "$var=$v" KNNWB_CUDA_TRACE=1 timeout 100 "$bench" --n "$n" --no-select --no-floor >"$out/one.log" 2>&1
    echo "== round $r, $var=$v"; sum "$out/one.log"; cat "$out/one.log" >>"$log"
  done
done
[ -n "${QUICK:-}" ] && { echo "total ${SECONDS} s"; exit 0; }
for v in "${values[@]}"; do
  env "$var=$v" KNNWB_CUDA_TRACE=2 timeout 100 "$bench" --n "$n" --no-select --no-floor >"$out/one.log" 2>&1
  echo "== counters, $var=$v"; grep -E "candidates,|library \(" "$out/one.log" | cut -c1-250
done
for v in "${values[@]}"; do
  env "$var=$v" timeout 150 ncu --clock-control none -k regex:'filter_half_kernel|merge' --launch-skip 17000 \
    --launch-count 4 --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    "$bench" --n "$n" --no-lib --no-floor >"$out/ncu.txt" 2>&1
  echo "== ncu, $var=$v (4 launches after 17,000)"
  grep -E "filter_half_kernel|merge|duration|dram__" "$out/ncu.txt" | sed 's/(SelectState.*//' | awk '{$1=$1; print}' | cut -c1-120
done
echo "total ${SECONDS} s"
