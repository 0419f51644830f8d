#!/usr/bin/env bash
# Where a row's first tile (a symmetric run's diagonal tile: +inf thresholds, filtered in column
# stages of doubling width, every row merged after each) spends its time, kernel by kernel: ncu's
# duration and DRAM bytes of every filter and merge launch with serial tiles, for the diagonal tiles
# and the first ordinary ones, on Pearson d = 128 (bench_knn_gpu, kc = 40: warp merges) and on
# euclidean d = 50 k = 30 without the partition (kc = 200: the block's radix select). Each setting
# given (as in whole_knob_check.sh: "default" or comma-separated VAR=VALUE pairs) is profiled in
# turn, e.g. KNNWB_CUDA_NARROW_FILTER=0 for the filter's wide layout. One GPU.
# Usage (repository root, after `. .gpu/env.sh`):
#   bash tests/bench_gpu/diagonal_tile_check.sh OUT SETTING [SETTING...]
# e.g. bash tests/bench_gpu/diagonal_tile_check.sh /tmp/out default KNNWB_CUDA_NARROW_FILTER=0
set -uo pipefail
out=$1; shift; settings=("$@")
b=/tmp/knnwb-diagonal; d=/tmp/knnwb-diagonal-data; mkdir -p "$out" $d
SECONDS=0
{ cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_MPI=OFF -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release &&
  cmake --build $b -j"$(nproc)" --target knnwb_host knnwb_knn_plugin bench_knn_gpu; } \
  >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
echo "build ${SECONDS} s"
k=$b/bin/knnwb; bench=$b/tests/bench_gpu/bench_knn_gpu; export LD_LIBRARY_PATH=$b:${LD_LIBRARY_PATH:-}
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
[ -s $d/c100k.npy ] || $py tests/bench/make_clusters_table.py $d/c100k.npy 100000 50 >/dev/null
envs() { [ "$1" = default ] && echo "KNNWB_KNOB=default" || echo "$1" | tr ',' ' '; }
# ncu's CSV (--page raw) as one line a launch: kernel, grid, microseconds, MB read or written
table() {
  $py - "$1" <<'EOF'
import csv, sys
lines = open(sys.argv[1]).read().splitlines()
start = [i for i, l in enumerate(lines) if l.startswith('"ID"')]
if not start:
    sys.exit("no ncu table")
rows = list(csv.reader(lines[start[0]:]))
h = rows[0]
name, grid = h.index('Kernel Name'), h.index('Grid Size')
time, dram = h.index('gpu__time_duration.sum'), h.index('dram__bytes.sum')
total = 0.0
for r in rows[2:]:
    us = float(r[time].replace(',', '')) / 1e3
    total += us
    kernel = r[name].split('(S')[0].split('::')[-1]
    print(f"    {kernel[-40:]:40s} {r[grid]:16s} {us:9.1f} us {float(r[dram].replace(',', '')) / 1e6:9.1f} MB")
print(f"    these launches in all: {total / 1e3:.2f} ms")
EOF
}
metrics="--metrics gpu__time_duration.sum,dram__bytes.sum"
for s in "${settings[@]}"; do
  echo "== $s: Pearson d = 128, 100,000 rows (bench_knn_gpu), the first 30 launches"
  env $(envs "$s") CUDA_VISIBLE_DEVICES=0 KNNWB_CUDA_SERIAL_TILES=1 timeout 300 ncu --clock-control none $metrics \
    -k regex:'filter|merge' --launch-count 30 --csv --page raw "$bench" --n 100000 --d 128 --no-select --no-floor \
    >"$out/ncu-pearson.csv" 2>"$out/ncu-pearson.err" && table "$out/ncu-pearson.csv"
  echo "== $s: euclidean d = 50 k = 30, 100,000 rows (knnwb knn, no partition), the first 16 launches"
  env $(envs "$s") KNNWB_PARTITION=off CUDA_VISIBLE_DEVICES=0 KNNWB_CUDA_SERIAL_TILES=1 timeout 300 ncu --clock-control none \
    $metrics -k regex:'filter|merge' --launch-count 16 --csv --page raw $k knn $d/c100k.npy -k 30 -m euclidean -o $d/g.npy \
    >"$out/ncu-euclidean.csv" 2>"$out/ncu-euclidean.err" && table "$out/ncu-euclidean.csv"
  echo "   lists $(sha256sum $d/g.npy | cut -c1-16)"
done
echo "total ${SECONDS} s"
