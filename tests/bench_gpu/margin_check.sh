#!/usr/bin/env bash
# The margin planner (core/engine/margin.c) and the GPUs' early start (kernels/device_start.cu) on
# the user's whole command, `knnwb knn X.npy -k 30 -o g.npy`, rows of 50 Gaussian clusters
# (tests/bench/make_clusters_table.py): CPU = GPU bytes with the planner on and off
# (KNNWB_MARGIN_PILOT=0), 2,000,000 x 50 euclidean and cosine on 1 GPU both ways, on every GPU,
# 10,000,000 x 50 euclidean on every GPU and on one. Every run prints its wall time, the lists' digest
# (sha256 of g.npy, 16 hex digits), the planner's choice and the re-selected rows.
# Usage (repository root, after `. .gpu/env.sh`): bash tests/bench_gpu/margin_check.sh OUT [BUILD] [BIG_ROWS] [short]
# (short: the byte checks and the 2,000,000-row runs on 1 GPU and on every GPU only)
set -uo pipefail
out=$1; b=${2:-/tmp/knnwb-margin}; big=${3:-10000000}; mode=${4:-full}; mkdir -p "$out"
for d in /usr/local/mpi/bin /opt/hpcx/ompi/bin; do [ -x "$d/mpicc" ] && ! command -v mpicc >/dev/null && export PATH=$d:$PATH; done
SECONDS=0
{ cmake -S . -B "$b" -DKNNWB_CUDA=ON -DKNNWB_MPI=ON -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release &&
  cmake --build "$b" -j"$(nproc)" --target knnwb_host test_cuda_knn test_cuda_select test_core_margin; } \
  >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
echo "build ${SECONDS} s"; nvidia-smi --query-gpu=name --format=csv,noheader | uniq -c
k=$b/bin/knnwb; export LD_LIBRARY_PATH=$b:${LD_LIBRARY_PATH:-}
SECONDS=0
tests="tests/core/test_core_margin tests/kernels/test_cuda_knn"; [ "$mode" = short ] && tests=tests/core/test_core_margin
for t in $tests; do
  timeout 200 "$b/$t" >>"$out/tests.log" 2>&1; echo "$t rc=$? (${SECONDS} s)"
done
grep -E "^not ok" "$out/tests.log" | head
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
d=/tmp/knnwb-margin-data; mkdir -p $d
SECONDS=0
$py tests/bench/make_clusters_table.py $d/clusters-200k.npy 200003 50
$py tests/bench/make_clusters_table.py $d/clusters-2M.npy 2000000 50
echo "data ${SECONDS} s"
log=$out/runs.log; : >"$log"
now() { date +%s%N; }
# one whole command: NAME FILE METRIC [ENV...] (ARGS: more options of knn)
one() {
  local name=$1 f=$2 m=$3; shift 3
  local t0 t1 r
  t0=$(now)
  env "$@" G_MESSAGES_DEBUG=all timeout 300 "$k" knn "$f" -k 30 -m "$m" ${ARGS:-} -o $d/g.npy >$out/one.log 2>&1
  r=$?; t1=$(now)
  echo "== $name ($*) rc=$r" >>"$log"; grep -v "lists of [0-9]* candidates to the host" $out/one.log >>"$log"
  printf '%-32s rc=%d %8.2f s  %s  %s; %s\n' "$name" $r "$(awk -v a=$t0 -v b=$t1 'BEGIN{print (b-a)/1e9}')" \
    "$(sha256sum $d/g.npy | cut -c1-16)" \
    "$(grep -m1 -oE "margin planner: .*candidates per row \(the screen's [0-9]+\), [0-9.]+ s" $out/one.log)" \
    "$(grep -m1 -oE "[0-9]+ row\(s\) re-selected in all" $out/one.log)"
  grep -m1 -oE "prepare [0-9.]+ s" $out/one.log | tr '\n' ' '
  grep -m1 -oE "DEBUG: [0-9:.]+: knnwb: duplicate rows" $out/one.log | tr '\n' ' '
  grep -m1 -oE "DEBUG: [0-9:.]+: knnwb: prepare" $out/one.log | tr '\n' ' '
  grep -m1 -oE "[0-9]+ rows, [0-9]+ candidates: select [0-9.]+ s" $out/one.log | tr '\n' ' '
  grep -oE "worker [0-9] \(GPU [0-9]\): setup [0-9.]+ s" $out/one.log | tr '\n' ' '; echo
}
export CUDA_VISIBLE_DEVICES=0
for m in euclidean cosine; do
  ARGS="--backend cpu" one "$m 200003x50 cpu" $d/clusters-200k.npy $m; cp $d/g.npy $d/cpu.npy
  one "$m 200003x50 gpu" $d/clusters-200k.npy $m; cmp -s $d/g.npy $d/cpu.npy && echo "  cpu = gpu bytes" || echo "  DIFFERENT"
  one "$m 200003x50 gpu, no planner" $d/clusters-200k.npy $m KNNWB_MARGIN_PILOT=0
  cmp -s $d/g.npy $d/cpu.npy && echo "  cpu = gpu bytes" || echo "  DIFFERENT"
done
one "euclidean 2Mx50 1 GPU" $d/clusters-2M.npy euclidean
[ "$mode" = short ] || one "euclidean 2Mx50 1 GPU, no planner" $d/clusters-2M.npy euclidean KNNWB_MARGIN_PILOT=0
one "euclidean 2Mx50 1 GPU" $d/clusters-2M.npy euclidean
[ "$mode" = short ] || one "cosine 2Mx50 1 GPU" $d/clusters-2M.npy cosine
[ "$mode" = short ] || one "cosine 2Mx50 1 GPU, no planner" $d/clusters-2M.npy cosine KNNWB_MARGIN_PILOT=0
unset CUDA_VISIBLE_DEVICES
ngpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
one "euclidean 2Mx50 $ngpu GPUs" $d/clusters-2M.npy euclidean KNNWB_CUDA_TRACE=1
one "euclidean 2Mx50 $ngpu GPUs" $d/clusters-2M.npy euclidean
[ "$mode" = short ] && { rm -rf $d; exit 0; }
rm -f $d/clusters-200k.npy
SECONDS=0; $py tests/bench/make_clusters_table.py $d/big.npy "$big" 50; echo "data $big x 50: ${SECONDS} s"
one "euclidean ${big}x50 $ngpu GPUs" $d/big.npy euclidean KNNWB_CUDA_TRACE=1
export CUDA_VISIBLE_DEVICES=0
one "euclidean ${big}x50 1 GPU" $d/big.npy euclidean KNNWB_CUDA_TRACE=1
rm -rf $d
