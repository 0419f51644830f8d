#!/usr/bin/env bash
# The user's whole real-like command (1,533,876 x 128 Pearson k = 20, from ROWS = the 876 rows of
# real_like_check.sh --rows), untraced, built from this tree and from an earlier one (OLD: a
# `git archive` tarball of it), in alternating rounds: output to the disk (/tmp) and to /dev/shm,
# each run's wall time, knnwb's summary and a digest of its three files (lists, distances, labels),
# which must agree between the trees. CLUSTERS=1 adds 2,000,000 x 50 in 50 clusters (euclidean
# k = 30, the partitioned search, to the disk); BENCH=1 adds bench_knn_gpu d = 295 (library call,
# its tile loop and selection from the CUDA trace), by default and with fused tiles forced on.
# Usage (repository root, after `. .gpu/env.sh`):
#   git archive -o old.tar COMMIT    (on a machine with the repository)
#   bash tests/bench_gpu/commit_ab_check.sh OUT ROWS old.tar    (ROUNDS=4, CLUSTERS=, BENCH=)
set -uo pipefail
out=$1; rows=$2; old=$3; rounds=${ROUNDS:-4}
d=/tmp/knnwb-ab-data; src=/tmp/knnwb-ab-old-src; mkdir -p "$out" $d $src
cfg="-DKNNWB_CUDA=ON -DKNNWB_MPI=OFF -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release"
SECONDS=0
tar -xf "$old" -C $src || exit 1
jobs=$(( $(nproc) / 2 > 0 ? $(nproc) / 2 : 1 ))
targets="knnwb_host knnwb_knn_plugin${BENCH:+ bench_knn_gpu}"
( cmake -S $src -B /tmp/knnwb-ab-old $cfg && cmake --build /tmp/knnwb-ab-old -j$jobs --target $targets ) >"$out/build-old.log" 2>&1 &
( cmake -S . -B /tmp/knnwb-ab-new $cfg && cmake --build /tmp/knnwb-ab-new -j$jobs --target $targets ) >"$out/build-new.log" 2>&1
wait
echo "builds ${SECONDS} s"
for v in old new; do [ -x /tmp/knnwb-ab-$v/bin/knnwb ] || { tail -20 "$out/build-$v.log"; exit 1; }; done
/tmp/knnwb-ab-new/bin/knnwb metafeatures "$rows" --ops all -o $d/real.npy -q || exit 1
run() { # TREE OUTPUT ARGS...
  local v=$1 to=$2; shift 2; rm -f "${to%.npy}".*npy "${to%.npy}".labels.txt
  local t0 t1; t0=$(date +%s.%N)
  LD_LIBRARY_PATH=/tmp/knnwb-ab-$v:${LD_LIBRARY_PATH:-} /tmp/knnwb-ab-$v/bin/knnwb knn "$@" -o "$to" 2>"$out/one.log"
  local r=$?; t1=$(date +%s.%N)
  printf '  %-3s %-22s rc=%d wall %.2f s %s %s\n' $v "$to" $r "$(awk -v a=$t0 -v b=$t1 'BEGIN{print b-a}')" \
    "$(cat "$to" "${to%.npy}.distances.npy" "${to%.npy}.labels.txt" 2>/dev/null | sha256sum | cut -c1-16)" \
    "$(grep -oE '\(read.*' "$out/one.log")"
}
for ((r = 1; r <= rounds; r++)); do
  echo "real-like 1,533,876 x 128 pearson k = 20, round $r"
  for v in old new; do for to in /dev/shm/knnwb-ab.npy $d/g.npy; do run $v $to $d/real.npy -k 20 -m pearson; done; done
done
rm -f /dev/shm/knnwb-ab.*
if [ -n "${CLUSTERS:-}" ]; then
  py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
  [ -s $d/c2M.npy ] || $py tests/bench/make_clusters_table.py $d/c2M.npy 2000000 50 >/dev/null
  for ((r = 1; r <= 2; r++)); do
    echo "2,000,000 x 50 clusters euclidean k = 30, round $r"
    for v in old new; do run $v $d/g.npy $d/c2M.npy -k 30 -m euclidean; done
  done
fi
if [ -n "${BENCH:-}" ]; then
  for ((r = 1; r <= 2; r++)); do
    echo "bench_knn_gpu --n 1533876 (d = 295), round $r"
    for v in old new; do for fused in "" 1; do
      KNNWB_CUDA_FUSED=$fused KNNWB_CUDA_TRACE=1 LD_LIBRARY_PATH=/tmp/knnwb-ab-$v:${LD_LIBRARY_PATH:-} timeout 120 \
        /tmp/knnwb-ab-$v/tests/bench_gpu/bench_knn_gpu --n 1533876 --no-select --no-floor >"$out/one.log" 2>&1
      printf '  %-3s fused %-7s rc=%d %s\n      %s\n' $v "${fused:-chosen}" $? \
        "$(grep -oE 'library \(.*: [0-9.]+ s|lists digest [0-9a-f]+' "$out/one.log" | tr '\n' ' ')" \
        "$(grep -oE 'of which [0-9]+ fused|tile loop on the GPU [0-9.]+ s = selection [0-9.]+|GEMM [0-9.]+ s;' "$out/one.log" | tr '\n' ' ')"
    done; done
  done
fi
echo "total ${SECONDS} s"
