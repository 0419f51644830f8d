#!/usr/bin/env bash
# The lists' element types side by side on what the user runs: the whole `knnwb knn X.npy -k 30
# -m euclidean -o g.npy` command on rows of 50 Gaussian clusters (tests/bench/make_clusters_table.py),
# with the default int64/float64 lists and with `--lists-dtype 32`, alternating, ROUNDS rounds on
# each of GPUS (CUDA_VISIBLE_DEVICES values). Each line: wall time, lists digest, the two files'
# bytes, knnwb's summary (read, knn, write). At the end the 32-bit lists are checked against the
# 64-bit ones narrowed with NumPy (the same neighbours, each distance rounded to float32).
# Usage (repository root, after `. .gpu/env.sh`):
#   bash tests/bench_gpu/lists_dtype_check.sh OUT     (ROWS=10000000, GPUS="0 0,1", ROUNDS=2, BUILD=DIR)
set -uo pipefail
out=$1; mkdir -p "$out"; rows=${ROWS:-10000000}; rounds=${ROUNDS:-2}
read -r -a ways <<<"${GPUS:-0 0,1}"
b=${BUILD:-/tmp/knnwb-lists-dtype}; d=/tmp/knnwb-partition-data; mkdir -p $d; SECONDS=0
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
( [ -s $d/c$rows.npy ] || $py tests/bench/make_clusters_table.py $d/c$rows.npy "$rows" 50 >/dev/null ) & gen=$!
if [ -z "${BUILD:-}" ]; then
  { cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_MPI=OFF -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release &&
    cmake --build $b -j"$(nproc)" --target knnwb_host knnwb_knn_plugin; } >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
fi
wait $gen; echo "build and data ${SECONDS} s"
export LD_LIBRARY_PATH=$b:${LD_LIBRARY_PATH:-}
run() { # gpus, name, extra arguments
  local g=$1 n=$2; shift 2; rm -f $d/$n.npy $d/$n.distances.npy; local t0 t1
  t0=$(date +%s.%N)
  CUDA_VISIBLE_DEVICES=$g G_MESSAGES_DEBUG=all $b/bin/knnwb knn $d/c$rows.npy -k 30 -m euclidean -o $d/$n.npy "$@" >"$out/one.log" 2>&1
  t1=$(date +%s.%N); cat "$out/one.log" >>"$out/runs.log"
  echo "GPUs $g $n $*: wall $(awk -v a=$t0 -v b=$t1 'BEGIN{printf "%.2f", b-a}') s $(sha256sum $d/$n.npy | cut -c1-16)" \
    "$(du -b $d/$n.npy $d/$n.distances.npy | awk '{s += $1} END {printf "%.2f GB", s / 1e9}')" \
    "$(grep -E '^knnwb: [0-9]+ x' "$out/one.log" | grep -oE '\(read.*')"
}
for ((r = 1; r <= rounds; r++)); do for g in "${ways[@]}"; do run "$g" wide; run "$g" narrow --lists-dtype 32; done; done
D=$d $py - <<'PY'
import os
import numpy as np
d = os.environ["D"]
a, b = np.load(f"{d}/wide.npy", mmap_mode="r"), np.load(f"{d}/narrow.npy", mmap_mode="r")
ad, bd = np.load(f"{d}/wide.distances.npy", mmap_mode="r"), np.load(f"{d}/narrow.distances.npy", mmap_mode="r")
ok = b.dtype == np.int32 and bd.dtype == np.float32
for s in range(0, a.shape[0], 1000000):
    ok &= bool((a[s:s + 1000000] == b[s:s + 1000000]).all())
    ok &= bool((ad[s:s + 1000000].astype(np.float32) == bd[s:s + 1000000]).all())
print("32-bit lists == the 64-bit ones narrowed:", ok)
PY
rm -f $d/wide.npy $d/wide.distances.npy $d/narrow.npy $d/narrow.distances.npy
gzip -f "$out/runs.log"; rm -f "$out/one.log"
echo "total ${SECONDS} s"
