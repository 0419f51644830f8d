#!/usr/bin/env bash
# The partitioned search over MPI ranks that hold every row (`--mpi-input whole`), the user's whole
# command (`mpirun -np R knnwb knn X.npy -k 30 -m euclidean -o g.npy`) on one GPU host:
#   - the CPU backend on 2,000,000 x 50 in 50 clusters: 1 process with every core, then 2 and 4
#     ranks sharing the cores (the ranks split the groups, the bounds and the row assignment);
#   - the CUDA backend: 1 process, then 2 ranks sharing GPU 0 (on a 1-GPU machine) or one GPU each,
#     at 2M and 10M rows;
# with the list digests (every run must give the same bytes) and rank 0's partition lines.
# About 4 minutes on one H200 with 16 cores.
# Usage (repository root, after `. .gpu/env.sh`): bash tests/bench_gpu/mpi_partition_check.sh OUT
set -uo pipefail
out=$1; b=/tmp/knnwb-mpipart; mkdir -p "$out"
for dir in /usr/local/mpi/bin /opt/hpcx/ompi/bin /usr/mpi/gcc/openmpi-*/bin; do
  [ -x "$dir/mpicc" ] && ! command -v mpicc >/dev/null && export PATH=$dir:$PATH
done
SECONDS=0
{ cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_MPI=ON -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release &&
  cmake --build $b -j"$(nproc)" --target knnwb_host knnwb_knn_plugin; } >"$out/build.log" 2>&1 ||
  { tail -30 "$out/build.log"; exit 1; }
echo "build ${SECONDS} s; $(nproc) cores; $(nvidia-smi -L | wc -l) GPU(s)"
k=$b/bin/knnwb; export LD_LIBRARY_PATH=$b:${LD_LIBRARY_PATH:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
d=/tmp/knnwb-mpipart-data; mkdir -p $d
[ -s $d/c2M.npy ] || $py tests/bench/make_clusters_table.py $d/c2M.npy 2000000 50
[ -s $d/c10M.npy ] || $py tests/bench/make_clusters_table.py $d/c10M.npy 10000000 50
gpus=$(nvidia-smi -L | wc -l)
log=$out/runs.log; : >"$log"
run() { # NAME RANKS FILE BACKEND
  local name=$1 ranks=$2 f=$3 backend=$4 t0 t1 r
  rm -f $d/g.npy
  t0=$(date +%s.%N)
  if [ "$ranks" = 1 ]; then
    G_MESSAGES_DEBUG=all timeout 300 "$k" knn "$f" -k 30 -m euclidean -b "$backend" -q -o $d/g.npy >$out/one.log 2>&1
  else
    # one GPU per rank where there are enough, else all on GPU 0
    G_MESSAGES_DEBUG=all timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$ranks" \
      bash -c 'g=$OMPI_COMM_WORLD_LOCAL_RANK; [ "$g" -lt '"$gpus"' ] || g=0; CUDA_VISIBLE_DEVICES=$g exec "$@"' rank \
      "$k" knn "$f" -k 30 -m euclidean -b "$backend" -q --mpi-input whole -o $d/g.npy >$out/one.log 2>&1
  fi
  r=$?; t1=$(date +%s.%N)
  echo "== $name rc=$r" >>"$log"; cat $out/one.log >>"$log"
  printf '%-36s rc=%d %7.2f s  %s\n' "$name" $r "$(awk -v a=$t0 -v b=$t1 'BEGIN{print b-a}')" \
    "$(sha256sum $d/g.npy 2>/dev/null | cut -c1-16)"
  grep -oE "partition: [0-9]+ (clusters|groups).*|partition: (done|not used) in [0-9.]+ s" $out/one.log | head -3 | sed 's/^/    /'
}
run "cpu 2M, 1 process" 1 $d/c2M.npy cpu
run "cpu 2M, 2 ranks" 2 $d/c2M.npy cpu
run "cpu 2M, 4 ranks" 4 $d/c2M.npy cpu
run "cuda 2M, 1 process" 1 $d/c2M.npy cuda
run "cuda 2M, 2 ranks" 2 $d/c2M.npy cuda
run "cuda 10M, 1 process" 1 $d/c10M.npy cuda
run "cuda 10M, 2 ranks" 2 $d/c10M.npy cuda
echo "total ${SECONDS} s"
