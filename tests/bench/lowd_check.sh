#!/usr/bin/env bash
# Rows of a few columns, the user's whole command (`knnwb knn X.npy -k K -m METRIC -b cpu -o
# g.npy`, the k-d tree of core/tree/) side by side with SciPy's cKDTree on every core
# (tests/bench/kdtree_peer.py), through farm-bench (A = knnwb, B = SciPy, alternating; medians), on:
#   - 1,000,000 points spread evenly over a square (spatial coordinates), euclidean and manhattan
#     k = 15;
#   - a Visium-like grid of 1,000,000 spots (integer coordinates: neighbours tied), k = 6;
#   - 1,000,000 x 3 rows in 50 Gaussian clusters (an embedding), euclidean k = 30, and 200,000 x 8
#     (the tree's widest rows);
# with the tile search (KNNWB_TREE=0) once on 100,000 of the even points for scale, and every
# pair of lists compared with the tile search's on 100,000 rows (the same bytes).
# Usage (repository root): bash tests/bench/lowd_check.sh BUILD OUT   (RUNS=N, default 3; the
# report also goes to OUT/lowd.txt)
set -uo pipefail
build=$1; out=$2; k=$build/bin/knnwb; d=/tmp/knnwb-lowd; mkdir -p "$out" $d
exec > >(tee "$out/lowd.txt") 2>&1
py=python3; $py -c "import scipy" 2>/dev/null || py=/usr/bin/python3
$py - $d <<'PY'
import sys, numpy as np
d = sys.argv[1]; r = np.random.default_rng(11)
np.save(f"{d}/square.npy", r.uniform(0, 10000, (1000000, 2)).astype(np.float32))
g = np.stack(np.meshgrid(np.arange(1000), np.arange(1000)), -1).reshape(-1, 2)
np.save(f"{d}/grid.npy", g.astype(np.float32))
for cols, n in ((3, 1000000), (8, 200000)):
    c = r.normal(0, 3, (50, cols)); x = c[r.integers(0, 50, n)] + r.standard_normal((n, cols))
    np.save(f"{d}/embedding{cols}.npy", x.astype(np.float32))
np.save(f"{d}/square100k.npy", np.load(f"{d}/square.npy")[:100000])
np.save(f"{d}/embedding100k.npy", np.load(f"{d}/embedding8.npy")[:100000])
PY
case_() { # NAME FILE K METRIC
  echo "== $1 (k = $3, $4)"
  farm-bench -n "${RUNS:-3}" --timeout 1800 --vs "$py tests/bench/kdtree_peer.py $2 $3 $4 $d/peer.npy" \
    -- "$k" knn "$2" -k "$3" -m "$4" -b cpu -o $d/g.npy 2>&1 | grep -E "wall|peak|A/B"
}
case_ "1,000,000 points over a square" $d/square.npy 15 euclidean
case_ "a grid of 1,000 x 1,000 spots" $d/grid.npy 6 euclidean
case_ "1,000,000 points over a square" $d/square.npy 15 manhattan
case_ "1,000,000 x 3 in 50 clusters" $d/embedding3.npy 30 euclidean
case_ "200,000 x 8 in 50 clusters" $d/embedding8.npy 30 euclidean
echo "== the tile search, 100,000 of the points over the square (k = 15)"
/usr/bin/time -f "%e s, %M KiB" env KNNWB_TREE=0 "$k" knn $d/square100k.npy -k 15 -m euclidean -b cpu \
  -o $d/t.npy 2>&1 | tail -2
echo "== the same bytes as the tile search (100,000 rows)"
for f in square100k:15:euclidean embedding100k:30:euclidean embedding100k:30:manhattan; do
  IFS=: read -r name kk metric <<<"$f"
  "$k" knn $d/$name.npy -k $kk -m $metric -b cpu -o $d/a.npy >/dev/null 2>&1
  KNNWB_TREE=0 "$k" knn $d/$name.npy -k $kk -m $metric -b cpu -o $d/b.npy >/dev/null 2>&1
  a=$(cat $d/a.npy $d/a.distances.npy | sha256sum | cut -c1-16)
  b=$(cat $d/b.npy $d/b.distances.npy | sha256sum | cut -c1-16)
  echo "$name $metric k=$kk: tree $a, tiles $b $([ "$a" = "$b" ] && echo same || echo DIFFER)"
done
