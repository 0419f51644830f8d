#!/usr/bin/env bash
# Settings of environment knobs side by side on the partitioned search, in alternating rounds, on
# what the user runs: the whole `knnwb knn X.npy -k 30 -m euclidean` command on rows of 50
# Gaussian clusters (tests/bench/make_clusters_table.py; 10,000,000 and 2,000,000 rows by
# default). Each line: wall time, lists digest (the same for every setting), knnwb's own summary;
# the next line the partition's own-lists and bounds times, and summed over the sub-searches (from
# the trace) the GPU workers' setup (its streams, handles and memory) and release, the host's
# spreading of refined lists, the engine's prepare, and the tile loops. A setting is "default"
# or comma-separated VAR=VALUE pairs.
# GPUS="0 0,1" runs every setting on each of those CUDA_VISIBLE_DEVICES values (default: "0").
# Usage (repository root, after `. .gpu/env.sh`):
#   bash tests/bench_gpu/partition_knob_check.sh OUT SETTING [SETTING...]   (ROUNDS=2, ROWS="10000000 2000000", GPUS="0")
# e.g. GPUS="0 0,1" bash tests/bench_gpu/partition_knob_check.sh /tmp/out default KNNWB_PARTITION_KEEP=0
set -uo pipefail
out=$1; shift; settings=("$@"); rounds=${ROUNDS:-2}
read -r -a sizes <<<"${ROWS:-10000000 2000000}"
read -r -a ways <<<"${GPUS:-0}"
b=${BUILD:-/tmp/knnwb-partition-knobs}; d=/tmp/knnwb-partition-data; mkdir -p "$out" $d
SECONDS=0
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
( for n in "${sizes[@]}"; do [ -s $d/c$n.npy ] || $py tests/bench/make_clusters_table.py $d/c$n.npy "$n" 50 >/dev/null; done ) & gen=$!
if [ -z "${BUILD:-}" ]; then
  { cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_MPI=OFF -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release &&
    cmake --build $b -j"$(nproc)" --target knnwb_host knnwb_knn_plugin; } >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
fi
wait $gen
echo "build and data ${SECONDS} s"
k=$b/bin/knnwb; export LD_LIBRARY_PATH=$b:${LD_LIBRARY_PATH:-}
envs() { [ "$1" = default ] && echo "KNNWB_KNOB=default" || echo "$1" | tr ',' ' '; }
# sum of the numbers after PATTERN over every line of the trace that has it
total() { grep -oE "$2 [0-9.]+ s" "$1" | awk '{s += $(NF - 1); n++} END {printf "%.2f s (%d)", s, n}'; }
whole() { # way, setting, then the knn arguments
  local w=$1 s=$2; shift 2; rm -f $d/g.npy $d/g.distances.npy $d/g.labels.txt; local t0 t1 r; t0=$(date +%s.%N)
  env CUDA_VISIBLE_DEVICES="$w" $(envs "$s") KNNWB_CUDA_TRACE=1 G_MESSAGES_DEBUG=all $k knn "$@" -o $d/g.npy >"$out/one.log" 2>&1; r=$?
  t1=$(date +%s.%N); cat "$out/one.log" >>"$out/runs.log"
  printf '  %-36s rc=%d wall %s s %s %s\n' "$s (GPUs $w)" $r "$(awk -v a=$t0 -v b=$t1 'BEGIN{printf "%.2f", b-a}')" \
    "$(sha256sum $d/g.npy 2>/dev/null | cut -c1-16)" "$(grep -E '^knnwb: [0-9]+ x' "$out/one.log" | grep -oE '\(read.*')"
  printf '      %s, %s; setup %s (streams %s, handles %s, memory %s), release %s, spreading %s, prepare %s, tile loops %s\n' \
    "$(grep -oE 'own lists [0-9.]+ s' "$out/one.log" | head -1)" "$(grep -oE 'bounds [0-9.]+ s' "$out/one.log" | head -1)" \
    "$(total "$out/one.log" 'setup')" "$(total "$out/one.log" 'streams and events')" "$(total "$out/one.log" 'handles')" \
    "$(total "$out/one.log" 'device memory')" "$(total "$out/one.log" 'host merge [0-9.]+ s, release')" \
    "$(total "$out/one.log" 'spreading')" "$(total "$out/one.log" 'knnwb: prepare')" \
    "$(total "$out/one.log" 'tile loop on the GPU')"
}
for n in "${sizes[@]}"; do
  for ((r = 1; r <= rounds; r++)); do
    echo "$n x 50 clusters, euclidean k = 30, round $r ($SECONDS s)"
    for s in "${settings[@]}"; do for w in "${ways[@]}"; do whole "$w" "$s" $d/c$n.npy -k 30 -m euclidean; done; done
  done
done
gzip -f "$out/runs.log"; rm -f "$out/one.log"
echo "total ${SECONDS} s"
