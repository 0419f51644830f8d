#!/usr/bin/env bash
# The user's whole `knnwb knn` command on one GPU (picked with --devices 0, and the only one visible:
# the driver starts every GPU it sees), on two GPUs of one process and as two MPI ranks
# of one GPU each (reading the input whole, and --mpi-input split), alternating, on a host with two
# GPUs (nvidia-h200-x2): the real-like matrix (pearson k = 20) and 10,000,000 x 50 rows in 50
# clusters (euclidean k = 30). Outputs are removed before each run (a run that replaces an earlier
# output syncs it). Prints each run's wall time and lists digest (SHA-1 of both arrays); the runs
# of one input must agree. Logs (G_MESSAGES_DEBUG=all) go to OUT.
# Usage (repository root, after `. .gpu/env.sh`): bash tests/bench_gpu/gpus_ranks_check.sh OUT ALL876_TSV
# (all876.tsv from tests/bench_gpu/real_like_check.sh --rows; BUILD=DIR: a CUDA + MPI build with
# bin/knnwb, else one is made; ROUNDS=N (2); ROWS=N (10000000); SPLIT=0: no split runs of the
# clusters, which compare every pair of blocks: 44 s at 10 M rows on two H200s)
set -uo pipefail
out=$1; tsv=$2; mkdir -p "$out"
for dir in /usr/local/mpi/bin /opt/hpcx/ompi/bin /usr/mpi/gcc/openmpi-*/bin; do
  [ -x "$dir/mpicc" ] && ! command -v mpicc >/dev/null && export PATH=$dir:$PATH
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SECONDS=0
build=${BUILD:-/tmp/knnwb-gpus-ranks}
if [ -z "${BUILD:-}" ]; then
  { cmake -S . -B "$build" -DKNNWB_CUDA=ON -DKNNWB_MPI=ON -DKNNWB_CUDA_ARCHITECTURES=90 \
      -DCMAKE_BUILD_TYPE=Release && cmake --build "$build" -j"$(nproc)" --target knnwb_host knnwb_knn_plugin; } \
    >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
  echo "build ${SECONDS} s"
fi
k=$build/bin/knnwb
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
d=${DATA:-/tmp/knnwb-gpus-ranks-data}; mkdir -p "$d"
$k metafeatures "$tsv" --ops all -q -o $d/real.npy || exit 1
rows=${ROWS:-10000000}
$py tests/bench/make_clusters_table.py $d/clusters.npy "$rows" 50 >/dev/null || exit 1
echo "data ${SECONDS} s"
# name, log, then the command; prints "name: wall s digest"
timed() {
  local name=$1 log=$2; shift 2
  rm -f $d/g.npy $d/g.distances.npy
  local s e rc; s=$(date +%s.%N); "$@" >"$log" 2>&1; rc=$?; e=$(date +%s.%N)
  printf "  %-28s rc=%d %6.2f s  %s\n" "$name" $rc "$(awk -v a=$s -v b=$e 'BEGIN{print b-a}')" \
    "$(cat $d/g.npy $d/g.distances.npy 2>/dev/null | sha1sum | cut -c1-16)"
  grep -h "edges -> " "$log" | sed 's/.*edges -> [^ ]* /    /'
}
ranks() { # each rank sees the GPU of its local rank only
  mpirun --bind-to none -np 2 -x G_MESSAGES_DEBUG bash -c \
    'export CUDA_VISIBLE_DEVICES=$OMPI_COMM_WORLD_LOCAL_RANK; exec "$@"' rank "$@"
}
export G_MESSAGES_DEBUG=all
for input in "real -k 20 -m pearson" "clusters -k 30 -m euclidean"; do
  set -- $input; name=$1; shift
  echo "$name:"
  for ((r = 1; r <= ${ROUNDS:-2}; r++)); do
    timed "one GPU (--devices 0)" $out/$name-1gpu-$r.log $k knn $d/$name.npy "$@" --devices 0 -o $d/g.npy
    timed "one GPU visible" $out/$name-1vis-$r.log env CUDA_VISIBLE_DEVICES=0 $k knn $d/$name.npy "$@" \
      -o $d/g.npy
    timed "two GPUs" $out/$name-2gpu-$r.log $k knn $d/$name.npy "$@" --devices 0,1 -o $d/g.npy
    timed "2 ranks, input whole" $out/$name-whole-$r.log ranks $k knn $d/$name.npy "$@" \
      --mpi-input whole -o $d/g.npy
    [ "$name" = clusters ] && [ "${SPLIT:-1}" = 0 ] && continue
    [ "$name" = clusters ] && [ "$r" -gt 1 ] && continue
    timed "2 ranks, --mpi-input split" $out/$name-split-$r.log ranks $k knn $d/$name.npy "$@" \
      --mpi-input split -o $d/g.npy
  done
done
echo "all ${SECONDS} s"
