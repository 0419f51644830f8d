#!/usr/bin/env bash
# Where the user's whole command goes on the real-like workload (1,533,876 x 128 Pearson k = 20,
# from ROWS = the 876 rows of real_like_check.sh --rows) and on a tiny input: the process's start
# (exec to "command started"), read, search, write (knnwb's summary), and its teardown ("command
# finished" to the process's exit), from the debug log's clock and the shell's.
# With CLUSTERS=1 also 10,000,000 x 50 in 50 clusters, euclidean k = 30 (the partitioned search);
# with MPI=1 (an MPI build) that one also as 2 ranks (one GPU each, or both on GPU 0). EXTRA=1
# adds the real-like matrix as float64 (numpy's default), the PyTorch peer of the whole command
# (torch_baseline.py --npy) and the tile loop with serial tiles (KNNWB_CUDA_SERIAL_TILES=1).
# Usage (repository root, after `. .gpu/env.sh`): bash tests/bench_gpu/whole_command_check.sh OUT ROWS
set -uo pipefail
out=$1; rows=$2; b=/tmp/knnwb-whole; d=/tmp/knnwb-whole-data; mkdir -p "$out" $d
for dir in /usr/local/mpi/bin /opt/hpcx/ompi/bin; do
  [ -n "${MPI:-}" ] && [ -x "$dir/mpicc" ] && ! command -v mpicc >/dev/null && export PATH=$dir:$PATH
done
SECONDS=0
{ cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_MPI=$([ -n "${MPI:-}" ] && echo ON || echo OFF) -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release &&
  cmake --build $b -j"$(nproc)" --target knnwb_host knnwb_knn_plugin; } >"$out/build.log" 2>&1 ||
  { tail -30 "$out/build.log"; exit 1; }
echo "build ${SECONDS} s"; nvidia-smi --query-gpu=name --format=csv,noheader | uniq -c
k=$b/bin/knnwb; export LD_LIBRARY_PATH=$b:${LD_LIBRARY_PATH:-}
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
$k metafeatures "$rows" --ops all -o $d/real.npy || exit 1
$py -c "import numpy as np; np.save('$d/tiny.npy', np.random.RandomState(1).rand(2001, 16).astype(np.float32))"
secs() { date +%s.%N; }
clock() { # HH:MM:SS.mmm of a debug line -> seconds of the day
  awk -F: '{printf "%.6f\n", $1 * 3600 + $2 * 60 + $3}' <<<"$1"; }
run() { # NAME FILE ARGS...
  local name=$1 f=$2; shift 2
  rm -f $d/g.npy $d/g.distances.npy $d/g.labels.txt; sync
  local t0 t1 r
  t0=$(date +%T.%N); G_MESSAGES_DEBUG=all "$k" knn "$f" "$@" -o $d/g.npy >$out/one.log 2>&1; r=$?; t1=$(date +%T.%N)
  local first last
  first=$(grep -m1 -oE "[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}: knnwb: command started" $out/one.log | cut -c1-12)
  last=$(grep -oE "[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}: knnwb: command finished" $out/one.log | tail -1 | cut -c1-12)
  awk -v a="$(clock "$t0")" -v f="$(clock "$first")" -v l="$(clock "$last")" -v b="$(clock "$t1")" -v n="$name" -v r=$r \
    'BEGIN{printf "%-34s rc=%d wall %6.2f s: start %.3f s, command %.3f s, teardown %.3f s\n", n, r, b-a, f-a, l-f, b-l}'
  grep -E "^knnwb: [0-9]+ x" $out/one.log | sed 's/^/    /'
  grep -oE "(prepare|duplicate rows searched in|margin planner:.*|select [0-9.]+ s, refine [0-9.]+ s|whole call|partition: (not used|done) in|devices? start).*" $out/one.log | head -12 | sed 's/^/      /'
  echo "== $name" >>$out/runs.log; cat $out/one.log >>$out/runs.log
  sha256sum $d/g.npy | cut -c1-16 | sed 's/^/    digest /'
}
for i in 1 2; do
  run "tiny 2001 x 16, cuda" $d/tiny.npy -k 10 -b cuda
  run "tiny 2001 x 16, cpu" $d/tiny.npy -k 10 -b cpu
  run "real-like, 1 GPU" $d/real.npy -k 20 -m pearson
done
KNNWB_CUDA_TRACE=1 run "real-like, 1 GPU, traced" $d/real.npy -k 20 -m pearson
if [ -n "${EXTRA:-}" ]; then
  $py -c "import numpy as np; np.save('$d/real64.npy', np.load('$d/real.npy').astype(np.float64))"
  cp $d/real.labels.txt $d/real64.labels.txt
  run "real-like as float64, 1 GPU" $d/real64.npy -k 20 -m pearson
  rm -f $d/real64.npy
  timeout 150 python3 tests/bench_gpu/torch_baseline.py --npy $d/real.npy --out $d/torch --k 20 2>&1 | tail -1 | sed 's/^/PyTorch peer: /'
  rm -f $d/torch*.npy
  for r in 1 2; do
    KNNWB_CUDA_SERIAL_TILES=1 KNNWB_CUDA_TRACE=1 run "real-like, serial tiles" $d/real.npy -k 20 -m pearson
    grep -oE "selection kernels [0-9.]+ ms per diagonal tile \([0-9]+\), [0-9.]+ ms per other" $out/one.log | head -1 | sed 's/^/    /'
  done
fi
if [ -n "${CLUSTERS:-}" ]; then
  [ -s $d/c10M.npy ] || $py tests/bench/make_clusters_table.py $d/c10M.npy 10000000 50
  for i in 1 2; do run "10M x 50 clusters, 1 GPU" $d/c10M.npy -k 30 -m euclidean; done
  if [ -n "${MPI:-}" ]; then
    gpus=$(nvidia-smi -L | wc -l)
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    rm -f $d/g.npy $d/g.distances.npy $d/g.labels.txt; t0=$(date +%s.%N)
    mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 bash -c \
      'g=$OMPI_COMM_WORLD_LOCAL_RANK; [ "$g" -lt '"$gpus"' ] || g=0; CUDA_VISIBLE_DEVICES=$g exec "$@"' rank \
      "$k" knn $d/c10M.npy -k 30 -m euclidean --mpi-input whole -o $d/g.npy >$out/one.log 2>&1
    r=$?; t1=$(date +%s.%N)
    echo "10M x 50 clusters, 2 ranks         rc=$r wall $(awk -v a=$t0 -v b=$t1 'BEGIN{printf "%.2f", b-a}') s"
    grep -E "^knnwb: [0-9]+ x" $out/one.log | sed 's/^/    /'
    sha256sum $d/g.npy | cut -c1-16 | sed 's/^/    digest /'
  fi
fi
echo "total ${SECONDS} s"
