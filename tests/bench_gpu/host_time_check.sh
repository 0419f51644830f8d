#!/usr/bin/env bash
# Core's fixed host time around the GPU select: 1,533,876 x 295 Pearson k = 20, the
# library alone (host matrix to exact host lists), with the debug lines that time each phase of
# core and the CUDA trace. Runs a baseline build (BASE: e.g. main before a change; optional) and
# this build (BUILD) alternately, twice each on 1 GPU, then once each on 2 GPUs, so that the virtual
# machine's memory growth (fresh memory is slow to fault in at first) weighs on both alike.
# Every run prints its lists digest: 78f71267a78e9b94.
# Usage (repository root, after `. .gpu/env.sh`):
#   bash tests/bench_gpu/host_time_check.sh OUTDIR BUILD [BASE]
# BUILD and BASE: CUDA builds holding tests/bench_gpu/bench_knn_gpu (Release, -DKNNWB_CUDA=ON).
set -uo pipefail
out=$1
new=$2
base=${3:-}
mkdir -p "$out"
export G_MESSAGES_DEBUG=all KNNWB_CUDA_TRACE=1
# the lines that say where the time goes
phases() {
  grep "library (\|DEBUG.*knnwb:\|^knnwb cuda worker" "$1" | sed 's/.*DEBUG: [0-9:.]* //'
}
run() { # name build gpus
  local log=$out/$1.log
  echo "== $1 ($3 GPU)"
  if [ "$3" = 1 ]; then
    CUDA_VISIBLE_DEVICES=0 LD_LIBRARY_PATH=$2:${LD_LIBRARY_PATH:-} \
      "$2/tests/bench_gpu/bench_knn_gpu" --n 1533876 --no-select --no-floor >"$log" 2>&1
  else
    LD_LIBRARY_PATH=$2:${LD_LIBRARY_PATH:-} \
      "$2/tests/bench_gpu/bench_knn_gpu" --n 1533876 --no-select --no-floor >"$log" 2>&1
  fi
  echo "rc=$?"
  phases "$log"
}
for round in 1 2; do
  [ -n "$base" ] && run base-1gpu-$round "$base" 1
  run new-1gpu-$round "$new" 1
done
[ -n "$base" ] && run base-2gpu "$base" 2
run new-2gpu "$new" 2
