#!/usr/bin/env bash
# Ctrl-C and SIGTERM in the middle of long GPU commands: `knnwb knn` on 10,000,000 x 50 rows in 50
# clusters (the partitioned search: several sub-searches on the GPU at once), the same rows with the
# partition off (one long tile loop), and two MPI ranks sharing GPU 0. Each run starts in a folder
# holding an earlier output (g.npy and its distances); the signal comes after the given seconds.
# Prints, per run, the signal, how long the process took to end after it, its exit status, whether
# the earlier output is untouched and no temporary is left, and the last debug line before the stop
# (which phase it hit). A benchmark of the GPU machine, never a unit test (timing on a loaded
# machine is no pass/fail criterion); exits non-zero when a run's earlier output changed, a
# temporary was left, a run ended with status 0, or one took more than 5 s to stop.
# Usage (repository root, after `. .gpu/env.sh`): BUILD=DIR bash tests/bench_gpu/stop_check.sh OUT [ROWS]
# (BUILD: a CMake build with CUDA, and MPI for the ranks' runs; ROWS: 10000000; ALL876=all876.tsv
# adds the real-like matrix, stopped 1.2 s in: its GPUs' start or tile loop)
set -uo pipefail
out=$1; rows=${2:-10000000}; mkdir -p "$out"
build=${BUILD:?BUILD=DIR: a build with CUDA}
for dir in /usr/local/mpi/bin /opt/hpcx/ompi/bin /usr/mpi/gcc/openmpi-*/bin; do
  [ -x "$dir/mpicc" ] && ! command -v mpicc >/dev/null && export PATH=$dir:$PATH
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$build:${LD_LIBRARY_PATH:-}
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
k=$build/bin/knnwb
d=${DATA:-/tmp/knnwb-stop-data}; mkdir -p "$d"
[ -s "$d/c.npy" ] || $py tests/bench/make_clusters_table.py "$d/c.npy" "$rows" 50 >/dev/null || exit 1
# the earlier output every run must leave as it was
$py -c "import numpy as np; np.save('$d/old.npy', np.arange(12, dtype=np.int64).reshape(3, 4))"
bad=0
# name, signal, seconds, then the command (run in a fresh folder w, output w/g.npy)
stop() {
  local name=$1 sig=$2 after=$3; shift 3
  local w=$d/w-$name; rm -rf "$w"; mkdir -p "$w"
  cp "$d/old.npy" "$w/g.npy"; cp "$d/old.npy" "$w/g.distances.npy"
  local before; before=$(cat "$w/g.npy" "$w/g.distances.npy" | sha1sum)
  (cd "$w" && exec env G_MESSAGES_DEBUG=all "$@" >"$out/$name.log" 2>&1) &
  local pid=$!
  sleep "$after"
  local t0; t0=$(date +%s%N)
  kill -"$sig" $pid 2>/dev/null
  wait $pid; local rc=$?
  local ms=$((($(date +%s%N) - t0) / 1000000))
  local after_sum; after_sum=$(cat "$w/g.npy" "$w/g.distances.npy" 2>/dev/null | sha1sum)
  local kept=yes; [ "$before" = "$after_sum" ] || { kept=NO; bad=1; }
  local litter; litter=$(find "$w" -name '.knnwb-tmp-*' | wc -l)
  [ "$litter" = 0 ] || bad=1
  [ "$rc" != 0 ] || bad=1
  [ "$ms" -le 5000 ] || bad=1
  printf "%-22s SIG%-4s at %4s s: ended %5d ms later, status %3d, earlier output kept %s, temporaries %s\n" \
    "$name" "$sig" "$after" "$ms" "$rc" "$kept" "$litter"
  # the phase the signal hit: the last debug line before the run said it stopped
  sed -n '/interrupted\|stopped/q;p' "$out/$name.log" | grep "DEBUG" | tail -1 |
    sed 's/.*DEBUG: //' | cut -c1-160 | sed 's/^/    hit: /'
  grep -i "interrupt\|stopped" "$out/$name.log" | tail -1 | cut -c1-200 | sed 's/^/    says: /'
}
args="$d/c.npy -k 30 -m euclidean -o g.npy"
stop partition-int INT 2 $k knn $args
stop partition-term TERM 3.5 $k knn $args
stop partition-late INT 4.5 $k knn $args
if [ -n "${ALL876:-}" ]; then
  $k metafeatures "$ALL876" --ops all -q -o "$d/real.npy" || exit 1
  stop real-int INT 1.2 $k knn "$d/real.npy" -k 20 -m pearson -o g.npy
  stop real-term TERM 0.6 $k knn "$d/real.npy" -k 20 -m pearson -o g.npy
fi
stop plain-int INT 8 env KNNWB_PARTITION=off $k knn $args
stop plain-term TERM 20 env KNNWB_PARTITION=off $k knn $args
if command -v mpirun >/dev/null; then
  stop ranks-int INT 4 mpirun --bind-to none -np 2 -x CUDA_VISIBLE_DEVICES=0 -x G_MESSAGES_DEBUG $k knn $args
  stop ranks-split-term TERM 8 mpirun --bind-to none -np 2 -x CUDA_VISIBLE_DEVICES=0 -x G_MESSAGES_DEBUG \
    $k knn $args --mpi-input split
fi
exit $bad
