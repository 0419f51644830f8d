#!/usr/bin/env bash
# What the GPUs' start costs a run the k-d tree takes (core/tree/, on the CPU), on a GPU host: the
# user's whole `knnwb knn sq.npy -k 15 -m euclidean -o g.npy` (1,000,000 points of a square) under
# the default backend and under `-b cpu`, and `knnwb cluster p1m3.npy --method single-linkage -m
# euclidean --clusters 20 -o sl.tsv` (1,000,000 points of 3 columns in 50 clusters), for this tree
# and the one in BEFORE (a `git archive --format=tar.gz` of another commit), ROUNDS (default 3)
# rounds alternating; then whether every run gave the same lists and clusters.
# Usage (repository root, after `. .gpu/env.sh`): BEFORE=old.tar.gz bash tests/bench_gpu/tree_start_check.sh OUT
set -uo pipefail
out=$1; mkdir -p "$out"; SECONDS=0
cfg="-DKNNWB_CUDA=ON -DKNNWB_MPI=OFF -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release"
build() { cmake -S "$1" -B "$2" $cfg && cmake --build "$2" -j"$(nproc)" --target knnwb_host knnwb_knn_plugin; }
rm -rf /tmp/knnwb-before && mkdir -p /tmp/knnwb-before && tar -xzf "$BEFORE" -C /tmp/knnwb-before || exit 1
build . /tmp/bn >"$out/bn.log" 2>&1 &
build /tmp/knnwb-before /tmp/bo >"$out/bo.log" 2>&1
wait
[ -x /tmp/bn/bin/knnwb ] && [ -x /tmp/bo/bin/knnwb ] || { tail -20 "$out/bn.log" "$out/bo.log"; exit 1; }
echo "built at $SECONDS s"
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
$py -c "
import numpy as np
r = np.random.default_rng(3)
np.save('/tmp/sq.npy', r.uniform(0, 10000, (1000000, 2)).astype(np.float32))
c = r.random((50, 3)); x = c[r.integers(0, 50, 1000000)] + r.normal(0, 0.05, (1000000, 3))
np.save('/tmp/p1m3.npy', x.astype(np.float32))
" || exit 1
# BUILD COMMAND...: the wall time, the exit status and knnwb's summary line.
t() {
  local s lib=$1; shift; s=$(date +%s.%N)
  LD_LIBRARY_PATH=$lib:${LD_LIBRARY_PATH:-} "$@" >"$out/one.log" 2>&1
  local rc=$?
  echo "$(awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b - a}') rc=$rc $(grep -E '^knnwb: [0-9]' "$out/one.log" | sed 's/.*-> //')"
}
for ((r = 1; r <= ${ROUNDS:-3}; r++)); do
  for w in bn bo; do
    echo "$w knn auto:  $(t /tmp/$w /tmp/$w/bin/knnwb knn /tmp/sq.npy -k 15 -m euclidean -o /tmp/g$w.npy)"
    echo "$w knn cpu:   $(t /tmp/$w /tmp/$w/bin/knnwb knn /tmp/sq.npy -k 15 -m euclidean -b cpu -o /tmp/c$w.npy)"
    echo "$w cluster:   $(t /tmp/$w /tmp/$w/bin/knnwb cluster /tmp/p1m3.npy --method single-linkage -m euclidean --clusters 20 -o /tmp/s$w.tsv)"
  done
done
cmp /tmp/gbn.npy /tmp/gbo.npy && cmp /tmp/gbn.npy /tmp/cbn.npy && cmp /tmp/sbn.tsv /tmp/sbo.tsv &&
  echo "same lists and clusters"
