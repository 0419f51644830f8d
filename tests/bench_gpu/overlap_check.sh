#!/usr/bin/env bash
# The partitioned search on overlapping clusters, where rows visit other clusters (as cell types
# overlap in single-cell data): the user's whole command `knnwb knn X.npy -k 30 -m euclidean -o
# g.npy` on 50 Gaussian clusters whose centres lie SPREAD apart (tests/bench/make_clusters_table.py;
# 3 is the well-separated benchmark). Settings side by side in alternating rounds: the default (the
# visits' rows start from the k-th distance they hold), KNNWB_PARTITION_WITHIN=0 (the visits start
# from nothing, as before) and KNNWB_PARTITION=off (the plain search). Each line: wall time, lists
# digest (the same for every setting), knnwb's summary; then the choice, the own lists, bounds and
# visits times. GPUS="0 0,1" runs each setting on each of those CUDA_VISIBLE_DEVICES values.
# Usage (repository root, after `. .gpu/env.sh`):
#   bash tests/bench_gpu/overlap_check.sh OUT   (ROWS="2000000", SPREADS="2 2.5", GPUS="0", ROUNDS=2,
#                                                SETTINGS="default KNNWB_PARTITION_WITHIN=0 KNNWB_PARTITION=off")
set -uo pipefail
out=$1; rounds=${ROUNDS:-2}
read -r -a sizes <<<"${ROWS:-2000000}"
read -r -a spreads <<<"${SPREADS:-2 2.5}"
read -r -a ways <<<"${GPUS:-0}"
read -r -a settings <<<"${SETTINGS:-default KNNWB_PARTITION_WITHIN=0 KNNWB_PARTITION=off}"
b=${BUILD:-/tmp/knnwb-overlap}; d=/tmp/knnwb-overlap-data; mkdir -p "$out" $d
SECONDS=0
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
( for n in "${sizes[@]}"; do for s in "${spreads[@]}"; do
    [ -s $d/c$n-$s.npy ] || $py tests/bench/make_clusters_table.py $d/c$n-$s.npy "$n" 50 "$s" >/dev/null
  done; done ) & gen=$!
if [ -z "${BUILD:-}" ]; then
  { cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_MPI=OFF -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release &&
    cmake --build $b -j"$(nproc)" --target knnwb_host knnwb_knn_plugin; } >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
fi
wait $gen
echo "build and data ${SECONDS} s"
k=$b/bin/knnwb; export LD_LIBRARY_PATH=$b:${LD_LIBRARY_PATH:-}
envs() { [ "$1" = default ] && echo "KNNWB_KNOB=default" || echo "$1" | tr ',' ' '; }
whole() { # way, setting, then the knn arguments
  local w=$1 s=$2; shift 2; rm -f $d/g.npy $d/g.distances.npy $d/g.labels.txt; local t0 t1 r; t0=$(date +%s.%N)
  env CUDA_VISIBLE_DEVICES="$w" $(envs "$s") G_MESSAGES_DEBUG=all timeout 280 $k knn "$@" -o $d/g.npy >"$out/one.log" 2>&1; r=$?
  t1=$(date +%s.%N); cat "$out/one.log" >>"$out/runs.log"
  printf '  %-30s rc=%d wall %s s %s %s\n' "$s (GPUs $w)" $r "$(awk -v a=$t0 -v b=$t1 'BEGIN{printf "%.2f", b-a}')" \
    "$(sha256sum $d/g.npy 2>/dev/null | cut -c1-16)" "$(grep -E '^knnwb: [0-9]+ x' "$out/one.log" | grep -oE '\(read.*')"
  printf '      %s; %s; %s\n' "$(grep -oE 'expected [0-9.]+% of the work: [a-z ]+' "$out/one.log" | head -1)" \
    "$(grep -oE '[0-9]+ groups, .*bounds [0-9.]+ s.*' "$out/one.log" | head -1)" "$(grep -oE 'visits [0-9.]+ s' "$out/one.log" | head -1)"
}
for n in "${sizes[@]}"; do
  for s in "${spreads[@]}"; do
    for ((r = 1; r <= rounds; r++)); do
      echo "$n x 50, 50 clusters, centres' spread $s, euclidean k = 30, round $r ($SECONDS s)"
      for st in "${settings[@]}"; do for w in "${ways[@]}"; do whole "$w" "$st" $d/c$n-$s.npy -k 30 -m euclidean; done; done
    done
  done
done
gzip -f "$out/runs.log"; rm -f "$out/one.log"
echo "total ${SECONDS} s"
