#!/bin/sh
# The whole `knnwb knn` process (read, kNN, write) against FAISS IndexFlatIP search alone, in the
# same run, alternating, on the ALL-shaped set (12,625 x 128, 48 planted modules), Pearson, k = 20.
# Not a test: prints the median of each over ROUNDS runs and the ratio.
#
# usage: sh tests/bench/bench_knn_process.sh BUILD_DIR [ROUNDS] [OUTPUT_EXTENSION]
# needs /usr/bin/python3 with numpy and faiss (python3-numpy, python3-faiss).
set -eu
build=$1
rounds=${2:-5}
extension=${3:-knn}
here=$(dirname "$0")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$here/make_modules.py" "$work/all.npy"
# FAISS gets the rows centred and normalised (Pearson = inner product), as bench_knn_cpu does.
/usr/bin/python3 - "$work/all.npy" "$work/all.f32" <<'PY'
import sys
import numpy as np
x = np.load(sys.argv[1]).astype(np.float64)
x -= x.mean(axis=1, keepdims=True)
x /= np.linalg.norm(x, axis=1, keepdims=True)
x.astype(np.float32).tofile(sys.argv[2])
PY
faiss_times=""
knnwb_times=""
i=0
while [ $i -lt "$rounds" ]; do
  f=$(/usr/bin/python3 "$here/faiss_baseline.py" "$work/all.f32" 12625 128 20 | awk '/faiss_seconds/ {print $2}')
  start=$(date +%s.%N)
  "$build/bin/knnwb" knn "$work/all.npy" -k 20 --metric pearson -q -o "$work/g.$extension"
  end=$(date +%s.%N)
  k=$(echo "$end - $start" | bc -l)
  faiss_times="$faiss_times $f"
  knnwb_times="$knnwb_times $k"
  echo "round $i: faiss search $f s, knnwb knn process $k s"
  i=$((i + 1))
done
median() { echo "$@" | tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mf=$(median $faiss_times)
mk=$(median $knnwb_times)
echo "median: faiss IndexFlatIP search $mf s, whole knnwb knn -o g.$extension $mk s, faiss/knnwb $(echo "$mf / $mk" | bc -l | cut -c1-5)x"
