#!/usr/bin/env bash
# The partitioned search (core/partition/) on the GPU machines, the user's whole command
# (`knnwb knn X.npy -k 30 -o g.npy`): 2M and 10M rows of 50 Gaussian clusters in 50 dimensions
# (tests/bench/make_clusters_table.py), euclidean and cosine, with the automatic choice and with
# KNNWB_PARTITION=off; overlapping clusters and an unclustered cloud (the choice must fall back);
# the seed-scale benchmark at d = 295; CPU = GPU bytes with the partition forced on small data.
# Prints wall times, the partition's debug lines and list digests. About 3 minutes on one H200 (10M rows: 1 minute).
# Usage (repository root, after `. .gpu/env.sh`): bash tests/bench_gpu/partition_check.sh OUT
set -uo pipefail
out=$1; b=/tmp/knnwb-part; mkdir -p "$out"
SECONDS=0
{ cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_MPI=OFF -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release &&
  cmake --build $b -j"$(nproc)" --target knnwb_host bench_knn_gpu; } >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
echo "build ${SECONDS} s"; nvidia-smi --query-gpu=name --format=csv,noheader | uniq -c
k=$b/bin/knnwb; export LD_LIBRARY_PATH=$b:${LD_LIBRARY_PATH:-}
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
d=/tmp/knnwb-part-data; mkdir -p $d
SECONDS=0
$py tests/bench/make_clusters_table.py $d/clusters-2M.npy 2000000 50
$py tests/bench/make_clusters_table.py $d/clusters-10M.npy 10000000 50
$py - $d <<'PY'
import sys, numpy as np
d = sys.argv[1]; r = np.random.default_rng(2)
centres = r.normal(0, 1, (50, 50))   # overlapping: centres as far apart as a cluster is wide
np.save(d + "/overlap-2M.npy", (centres[r.integers(0, 50, 2000000)] + r.normal(0, 1, (2000000, 50))).astype(np.float32))
np.save(d + "/cloud-1M.npy", r.normal(0, 1, (1000000, 50)).astype(np.float32))
centres = r.normal(0, 10, (20, 13)); lab = r.integers(0, 20, 30011)
x = (centres[lab] + r.normal(0, 1, (30011, 13))).astype(np.float32); x[5] = x[7]; x[100] = x[7]
np.save(d + "/small.npy", x)
PY
echo "data ${SECONDS} s"
log=$out/runs.log; : >"$log"
one() { # NAME FILE METRIC [ENV...]
  local name=$1 f=$2 m=$3; shift 3
  local t0 t1 r
  t0=$(date +%s.%N)
  env "$@" G_MESSAGES_DEBUG=all timeout 250 "$k" knn "$f" -k 30 -m "$m" -o $d/g.npy >$out/one.log 2>&1
  r=$?; t1=$(date +%s.%N)
  echo "== $name ($*) rc=$r" >>"$log"; cat $out/one.log >>"$log"
  printf '%-40s rc=%d %7.2f s  %s\n' "$name" $r "$(awk -v a=$t0 -v b=$t1 'BEGIN{print b-a}')" "$(sha256sum $d/g.npy | cut -c1-16)"
  grep -oE "partition: [0-9]+ (clusters|groups).*|partition: (done|not used) in [0-9.]+ s" $out/one.log | sed 's/^/    /'
}
export CUDA_VISIBLE_DEVICES=0
one "eucl 2Mx50 off" $d/clusters-2M.npy euclidean KNNWB_PARTITION=off
one "eucl 2Mx50 auto" $d/clusters-2M.npy euclidean
one "cos 2Mx50 auto" $d/clusters-2M.npy cosine
one "eucl 10Mx50 auto" $d/clusters-10M.npy euclidean
one "eucl 10Mx50 auto, cells not grouped" $d/clusters-10M.npy euclidean KNNWB_PARTITION_GROUPS=off
one "eucl overlap 2Mx50 auto" $d/overlap-2M.npy euclidean
one "eucl overlap 2Mx50 off" $d/overlap-2M.npy euclidean KNNWB_PARTITION=off
one "eucl cloud 1Mx50 auto" $d/cloud-1M.npy euclidean
for m in euclidean cosine pearson abs-pearson; do
  KNNWB_PARTITION=off $k knn $d/small.npy -k 7 -m $m --backend cpu -o $d/s_cpu.knn --quiet
  KNNWB_PARTITION=on KNNWB_PARTITION_ROWS=2000 $k knn $d/small.npy -k 7 -m $m --backend cuda -o $d/s_gpu.knn --quiet
  cmp -s $d/s_cpu.knn $d/s_gpu.knn && echo "small $m: cpu plain = cuda partitioned" || echo "small $m: DIFFERENT"
done
bench=$b/tests/bench_gpu/bench_knn_gpu
for p in off auto; do
  KNNWB_PARTITION=$p KNNWB_CUDA_TRACE=0 G_MESSAGES_DEBUG=all timeout 120 $bench --n 1533876 --no-select --no-floor >"$out/b_$p.log" 2>&1
  echo "bench 1533876 x 295 partition=$p:"; grep "library (\|digest\|^| [0-9]\|partition:" "$out/b_$p.log" | head -8
done
rm -rf $d
