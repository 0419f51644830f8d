#!/usr/bin/env bash
# Where the k-d tree (core/tree/, on the CPU) and the GPUs' tile search cross, on a GPU host: the
# user's whole command `knnwb knn X.npy -k K -m euclidean -b cuda -o g.npy` with the GPUs' search
# (KNNWB_TREE=0) against the tree's (`-b cpu`, KNNWB_TREE=1: the tree at any column count up to
# the CPU's 8, which is what the tree does under `-b cuda` too), alternating, on
#   - 1,000,000 points spread over a square (2 columns), k = 15;
#   - 1,000,000 rows in 50 overlapping Gaussian clusters (an embedding) of 2, 3, 4, 5, 6 and 8
#     columns, k = 30 (tests/bench/lowd_check.sh's clusters);
#   - 4,000,000 of those rows at 3 and 4 columns.
# Each line: the worst of ROUNDS (default 2) runs of each way, the winner, and whether both ways
# gave the same lists (digests). KNNWB_TREE_MAX_COLUMNS_GPU (core/tree/tree.h) is the most columns
# at which the tree wins.
# Usage (repository root, after `. .gpu/env.sh`): bash tests/bench_gpu/lowd_gpu_check.sh OUT
# (COLS="3 4" picks the clusters' columns, BIG=0 leaves out the 4 M rows, SQUARE=0 the square;
# TIMEOUT=S, default 300, ends a run: the GPU's tiles took over 300 s on 1 M x 2 clusters.)
# DRY=BUILD checks the script without a GPU: BUILD's knnwb, the CPU both ways, a hundredth of the
# rows.
set -uo pipefail
out=$1; b=/tmp/knnwb-lowd-gpu; d=/tmp/knnwb-lowd-gpu-data${DRY:+-dry}; mkdir -p "$out" $d
SECONDS=0; gpu=cuda; scale=1
[ -z "${DRY:-}" ] || { b=$DRY; gpu=cpu; scale=100; }
[ -n "${DRY:-}" ] || { cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_MPI=OFF -DKNNWB_CUDA_ARCHITECTURES=90 \
    -DCMAKE_BUILD_TYPE=Release &&
  cmake --build $b -j"$(nproc)" --target knnwb_host knnwb_knn_plugin; } >"$out/build.log" 2>&1 ||
  { tail -30 "$out/build.log"; exit 1; }
k=$b/bin/knnwb; export LD_LIBRARY_PATH=$b:${LD_LIBRARY_PATH:-}
echo "build ${SECONDS} s; $(nproc) cores; $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
$py - $d $scale <<'PY' || exit 1
import sys, numpy as np
d = sys.argv[1]; m = 1000000 // int(sys.argv[2]); r = np.random.default_rng(11)
np.save(f"{d}/square.npy", r.uniform(0, 10000, (m, 2)).astype(np.float32))
for cols in (2, 3, 4, 5, 6, 8):
    n = 4 * m if cols in (3, 4) else m
    c = r.normal(0, 3, (50, cols)); x = c[r.integers(0, 50, n)] + r.standard_normal((n, cols))
    np.save(f"{d}/c{cols}-4M.npy" if n > m else f"{d}/c{cols}.npy", x.astype(np.float32))
    if n > m:
        np.save(f"{d}/c{cols}.npy", x[:m].astype(np.float32))
PY
echo "data ready at ${SECONDS} s"
printf '%-34s %-14s %-14s %-6s %s\n' rows tree "GPU tiles" faster lists
# NAME FILE K: both ways, ROUNDS times, alternating.
case_() {
  local tree="" tiles="" a b t0 t1 r way
  for ((round = 1; round <= ${ROUNDS:-2}; round++)); do
    for way in 1 0; do
      rm -f $d/g.npy $d/g.distances.npy
      t0=$(date +%s.%N)
      KNNWB_TREE=$way G_MESSAGES_DEBUG=all timeout "${TIMEOUT:-300}" "$k" knn "$2" -k "$3" -m euclidean \
        -b "$([ $way = 1 ] && echo cpu || echo $gpu)" \
        -o $d/g.npy >"$out/one.log" 2>&1
      r=$?; t1=$(date +%s.%N)
      { echo "== $1 KNNWB_TREE=$way rc=$r"; grep -E "^knnwb: [0-9]|tree:|partition|error" "$out/one.log"; } >>"$out/runs.log"
      local w; w=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b - a}')
      local g="failed"
      [ $r = 0 ] && g=$(cat $d/g.npy $d/g.distances.npy | sha256sum | cut -c1-16)
      [ $r = 0 ] || w=">${TIMEOUT:-300}(rc=$r)"
      if [ $way = 1 ]; then tree+="$w "; a=$g; else tiles+="$w "; b=$g; fi
    done
  done
  local worst_tree worst_tiles
  worst_tree=$(tr ' ' '\n' <<<"$tree" | grep . | sed 's/^>\([0-9]*\).*/\1/' | sort -g | tail -1)
  worst_tiles=$(tr ' ' '\n' <<<"$tiles" | grep . | sed 's/^>\([0-9]*\).*/\1/' | sort -g | tail -1)
  printf '%-34s %-14s %-14s %-6s %s\n' "$1" "$tree" "$tiles" \
    "$(awk -v a="$worst_tree" -v b="$worst_tiles" 'BEGIN{print (a + 0 < b + 0) ? "tree" : "GPU"}')" \
    "$([ "$a" = "$b" ] && echo "same $a" || echo "DIFFER $a $b")"
}
[ "${SQUARE:-1}" = 0 ] || case_ "1M points over a square, k=15" $d/square.npy 15
for cols in ${COLS:-2 3 4 5 6 8}; do case_ "1M x $cols clusters, k=30" $d/c$cols.npy 30; done
[ "${BIG:-1}" = 0 ] || for cols in 3 4; do case_ "4M x $cols clusters, k=30" $d/c$cols-4M.npy 30; done
echo "total ${SECONDS} s"
