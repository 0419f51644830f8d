#!/usr/bin/env bash
# Settings of the CUDA backend's environment knobs side by side in one call on one GPU, in
# alternating rounds, on what the user runs: the whole `knnwb knn` command on the real-like matrix
# (ROWS: real_like_check.sh --rows; Pearson k = 20) and on 2,000,000 x 50 clusters (euclidean k =
# 30), then bench_knn_gpu d = 295 (library call). Each run: wall time, lists digest (the same for
# every setting), knnwb's own summary, from the trace the tile loop and selection per tile, and
# the fixed parts around the loop (phases.py: the process's start and end, the partition's choice,
# the wait for the GPUs' start, each GPU's upload, loop and lists out). Every run writes new files
# (the previous run's are removed first), as a user's first run does.
# A setting is "default" or comma-separated VAR=VALUE pairs. GPUS="0 0,1" runs every setting
# on each of those CUDA_VISIBLE_DEVICES values in turn (default: every GPU, one way).
# Usage (repository root, after `. .gpu/env.sh`):
#   bash tests/bench_gpu/whole_knob_check.sh OUT ROWS SETTING [SETTING...]   (ROUNDS=2, GPUS=)
# e.g. bash tests/bench_gpu/whole_knob_check.sh /tmp/out all876.tsv default KNNWB_CUDA_LAZY_LIMIT=16
set -uo pipefail
out=$1; rows=$2; shift 2; settings=("$@"); rounds=${ROUNDS:-2}
read -r -a ways <<<"${GPUS:-all}"
b=/tmp/knnwb-knobs; d=/tmp/knnwb-knobs-data; mkdir -p "$out" $d
SECONDS=0
{ cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_MPI=OFF -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release &&
  cmake --build $b -j"$(nproc)" --target knnwb_host knnwb_knn_plugin bench_knn_gpu test_cuda_select; } \
  >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
echo "build ${SECONDS} s"
k=$b/bin/knnwb; bench=$b/tests/bench_gpu/bench_knn_gpu; export LD_LIBRARY_PATH=$b:${LD_LIBRARY_PATH:-}
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
$k metafeatures "$rows" --ops all -o $d/real.npy -q || exit 1
[ -s $d/c2M.npy ] || $py tests/bench/make_clusters_table.py $d/c2M.npy 2000000 50 >/dev/null
envs() { [ "$1" = default ] && echo "KNNWB_KNOB=default" || echo "$1" | tr ',' ' '; }
# the GPUs of a way: nothing for all, else CUDA_VISIBLE_DEVICES
gpus() { [ "$1" = all ] && echo "KNNWB_GPUS=all" || echo "CUDA_VISIBLE_DEVICES=$1"; }
trace() { grep -oE "tile loop on the GPU [0-9.]+ s|[0-9.]+ ms per other tile \([0-9]+" "$1" | sort -u | tr '\n' ';'; }
whole() { # way, setting, then the knn arguments
  local w=$1 s=$2; shift 2; rm -f $d/g.npy $d/g.distances.npy $d/g.labels.txt; local t0 t1 r; t0=$(date +%s.%N)
  env $(gpus "$w") $(envs "$s") KNNWB_CUDA_TRACE=1 G_MESSAGES_DEBUG=all $k knn "$@" -o $d/g.npy >"$out/one.log" 2>&1; r=$?
  t1=$(date +%s.%N); cat "$out/one.log" >>"$out/runs.log"
  printf '  %-40s rc=%d wall %s s %s %s\n      %s\n      %s\n' "$s ($w)" $r "$(awk -v a=$t0 -v b=$t1 'BEGIN{printf "%.2f", b-a}')" \
    "$(sha256sum $d/g.npy 2>/dev/null | cut -c1-16)" "$(grep -E '^knnwb: [0-9]+ x' "$out/one.log" | grep -oE '\(read.*')" \
    "$(trace "$out/one.log")" "$($py tests/bench_gpu/phases.py "$out/one.log" "$t0" "$t1")"
}
for ((r = 1; r <= rounds; r++)); do
  echo "real-like 1,533,876 x 128 pearson k = 20, round $r"
  for s in "${settings[@]}"; do for w in "${ways[@]}"; do whole "$w" "$s" $d/real.npy -k 20 -m pearson; done; done
done
for ((r = 1; r <= rounds; r++)); do
  echo "2,000,000 x 50 clusters euclidean k = 30, round $r"
  for s in "${settings[@]}"; do for w in "${ways[@]}"; do whole "$w" "$s" $d/c2M.npy -k 30 -m euclidean; done; done
done
echo "bench_knn_gpu --n 1533876 (d = 295)"
for s in "${settings[@]}"; do for w in "${ways[@]}"; do
  env $(gpus "$w") $(envs "$s") KNNWB_CUDA_TRACE=1 timeout 120 "$bench" --n 1533876 --no-select --no-floor >"$out/one.log" 2>&1
  printf '  %-40s rc=%d %s\n      %s\n' "$s ($w)" $? "$(grep -oE 'library \(.*: [0-9.]+ s|lists digest [0-9a-f]+' "$out/one.log" | head -2 | tr '\n' ' ')" "$(trace "$out/one.log")"
done; done
echo "total ${SECONDS} s"
