#!/usr/bin/env bash
# Single linkage (the exact MST's Borůvka rounds) on a GPU host, the user's whole command
# `knnwb cluster X.npy --method single-linkage -m euclidean --clusters 20 -o sl.tsv`, with the k-d
# tree (core/tree/: the kNN lists and each round's nearest point outside its component, on the
# CPU, up to 6 columns where the run is on GPUs) against the GPUs' tile search (KNNWB_TREE=0),
# alternating, on points in 50 Gaussian clusters (standard deviation 0.05 about centres in the unit
# cube, as docs/performance-clustering.md's):
#   - 200,000 and 1,000,000 points of 3 columns (the tree's);
#   - 200,000 rows of 50 columns (tests/bench/make_clusters_table.py: the tile search both ways).
# Each line: the worst of ROUNDS (default 1) runs of each way and whether both gave the same
# clusters (cmp). TIMEOUT=S (default 240) ends a run.
# Usage (repository root, after `. .gpu/env.sh`): bash tests/bench_gpu/linkage_gpu_check.sh OUT
# BUILD=DIR takes DIR's knnwb (built with CUDA) instead of building one; DRY=BUILD checks the
# script without a GPU: BUILD's knnwb on the CPU, a hundredth of the rows.
set -uo pipefail
out=$1; b=/tmp/knnwb-linkage-gpu; d=/tmp/knnwb-linkage-gpu-data${DRY:+-dry}; mkdir -p "$out" $d
SECONDS=0; scale=1
[ -z "${DRY:-}" ] || { b=$DRY; scale=100; }
[ -z "${BUILD:-}" ] || b=$BUILD
[ -n "${DRY:-}${BUILD:-}" ] || { cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_MPI=OFF -DKNNWB_CUDA_ARCHITECTURES=90 \
    -DCMAKE_BUILD_TYPE=Release &&
  cmake --build $b -j"$(nproc)" --target knnwb_host knnwb_knn_plugin; } \
  >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
k=$b/bin/knnwb; export LD_LIBRARY_PATH=$b:${LD_LIBRARY_PATH:-}
echo "build ${SECONDS} s; $(nproc) cores; $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
$py - $d $scale <<'PY' || exit 1
import sys, numpy as np
d = sys.argv[1]; s = int(sys.argv[2]); r = np.random.default_rng(3)
for n in (200000, 1000000):
    c = r.random((50, 3)); x = c[r.integers(0, 50, n // s)] + r.normal(0, 0.05, (n // s, 3))
    np.save(f"{d}/p{n // 1000}k.npy", x.astype(np.float32))
PY
$py tests/bench/make_clusters_table.py $d/c200k50.npy $((200000 / scale)) 50 >/dev/null || exit 1
echo "data ready at ${SECONDS} s"
printf '%-32s %-14s %-14s %s\n' rows tree "tile search" clusters
# NAME FILE: both ways, ROUNDS times, alternating.
case_() {
  local tree="" tiles="" t0 t1 r way w
  for ((round = 1; round <= ${ROUNDS:-1}; round++)); do
    for way in 1 0; do
      rm -f $d/sl$way.tsv
      t0=$(date +%s.%N)
      KNNWB_TREE=$way G_MESSAGES_DEBUG=all timeout "${TIMEOUT:-240}" "$k" cluster "$2" \
        --method single-linkage -m euclidean --clusters 20 -o $d/sl$way.tsv >"$out/one.log" 2>&1
      r=$?; t1=$(date +%s.%N)
      { echo "== $1 KNNWB_TREE=$way rc=$r"; grep -E "^knnwb: [0-9]|exact MST|tree:|error" "$out/one.log"; } >>"$out/runs.log"
      w=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b - a}')
      [ $r = 0 ] || w=">${TIMEOUT:-240}(rc=$r)"
      if [ $way = 1 ]; then tree+="$w "; else tiles+="$w "; fi
    done
  done
  printf '%-32s %-14s %-14s %s\n' "$1" "$tree" "$tiles" \
    "$(cmp -s $d/sl1.tsv $d/sl0.tsv && echo same || echo DIFFER)"
}
case_ "200k x 3 in clusters" $d/p200k.npy
case_ "1M x 3 in clusters" $d/p1000k.npy
case_ "200k x 50 in clusters" $d/c200k50.npy
echo "total ${SECONDS} s"
