#!/usr/bin/env bash
# Small d on the GPU, the user's whole command: `knnwb knn X.npy -k 30 -o g.npy` on rows of 50
# Gaussian clusters (tests/bench/make_clusters_table.py), euclidean and cosine, with core's debug
# lines and the CUDA trace; the fused tile (KNNWB_CUDA_FUSED=1) against cuBLAS + filter at
# d = 32...295; ncu of the tile kernels at d = 50; 1 and all GPUs.
# Usage (repository root, after `. .gpu/env.sh`): bash tests/bench_gpu/small_d_check.sh OUT [BUILD] [ROWS]
set -uo pipefail
out=$1; b=${2:-/tmp/knnwb-small}; rows=${3:-2000000}; mkdir -p "$out"
for d in /usr/local/mpi/bin /opt/hpcx/ompi/bin; do [ -x "$d/mpicc" ] && ! command -v mpicc >/dev/null && export PATH=$d:$PATH; done
SECONDS=0
{ cmake -S . -B "$b" -DKNNWB_CUDA=ON -DKNNWB_MPI=ON -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release &&
  cmake --build "$b" -j"$(nproc)" --target knnwb_host; } >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
echo "build ${SECONDS} s"; nvidia-smi --query-gpu=name --format=csv,noheader | uniq -c
k=$b/bin/knnwb; export LD_LIBRARY_PATH=$b:${LD_LIBRARY_PATH:-}
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
d=/tmp/knnwb-small-data; mkdir -p $d
SECONDS=0
$py tests/bench/make_clusters_table.py $d/clusters.npy "$rows" 50
for dim in 32 64 128 295; do $py tests/bench/make_clusters_table.py $d/clusters-$dim.npy 1000000 $dim; done
$py tests/bench/make_clusters_table.py $d/small-clusters.npy 500000 50
echo "data ${SECONDS} s"
log=$out/runs.log; : >"$log"
# one whole command: NAME FILE METRIC [ENV...]; prints wall time, the select's trace summary, digest
one() {
  local name=$1 f=$2 m=$3; shift 3
  local t0 t1 r
  t0=$(date +%s.%N)
  env "$@" G_MESSAGES_DEBUG=all timeout 200 "$k" knn "$f" -k 30 -m "$m" -o $d/g.npy >$out/one.log 2>&1
  r=$?; t1=$(date +%s.%N)
  echo "== $name ($*) rc=$r" >>"$log"; cat $out/one.log >>"$log"
  printf '%-34s rc=%d %7.2f s  %s  %s\n' "$name" $r "$(awk -v a=$t0 -v b=$t1 'BEGIN{print b-a}')" "$(sha256sum $d/g.npy | cut -c1-16)" \
    "$(grep -m1 -oE "selection kernels [0-9.]+ ms per diagonal tile \([0-9]+\), [0-9.]+ ms per other tile \([0-9]+, of which [0-9]+ fused" $out/one.log)"
  grep -m1 -oE "tile loop on the GPU [0-9.]+ s = selection [0-9.]+|GEMM [0-9.]+ s;" $out/one.log | tr '\n' ' '
  grep -m1 -oE "tiles \+ extract [0-9.]+ s" $out/one.log; grep -m1 -oE "[0-9]+ candidates, .*" $out/one.log
}
export CUDA_VISIBLE_DEVICES=0
one "eucl ${rows}x50 1 GPU" $d/clusters.npy euclidean KNNWB_CUDA_TRACE=1
one "eucl ${rows}x50 1 GPU" $d/clusters.npy euclidean KNNWB_CUDA_TRACE=2
one "eucl ${rows}x50 float tiles" $d/clusters.npy euclidean KNNWB_CUDA_TRACE=1 KNNWB_SCREEN_FLOAT_SCORES=1
for f in 0 1; do one "cos ${rows}x50 fused=$f" $d/clusters.npy cosine KNNWB_CUDA_TRACE=1 KNNWB_CUDA_FUSED=$f; done
for dim in 32 64 128 295; do
  for f in 0 1 0 1; do one "cos 1Mx$dim fused=$f" $d/clusters-$dim.npy cosine KNNWB_CUDA_TRACE=1 KNNWB_CUDA_FUSED=$f; done
done
one "eucl 1Mx128 1 GPU" $d/c128.npy euclidean KNNWB_CUDA_TRACE=1
unset CUDA_VISIBLE_DEVICES
ngpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
if [ "$ngpu" -ge 2 ]; then
  one "eucl ${rows}x50 $ngpu GPUs" $d/clusters.npy euclidean KNNWB_CUDA_TRACE=1
  one "cos ${rows}x50 $ngpu GPUs" $d/clusters.npy cosine KNNWB_CUDA_TRACE=1
  CUDA_VISIBLE_DEVICES=0,1 one "eucl ${rows}x50 2 GPUs" $d/clusters.npy euclidean KNNWB_CUDA_TRACE=1
fi
# ncu: one GEMM, filter and merge launch mid-loop at 500,000 x 50 euclidean
CUDA_VISIBLE_DEVICES=0 timeout 120 ncu --clock-control none -k 'regex:nvjet|gemm|filter|merge' --launch-skip 3000 \
  --launch-count 6 --section SpeedOfLight "$k" knn $d/small-clusters.npy -k 30 -m euclidean -o $d/g.npy >"$out/ncu.txt" 2>&1
grep -E "^  [a-zA-Z_].*\(|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\)" "$out/ncu.txt" | cut -c1-120 | head -40
rm -rf $d
