#!/usr/bin/env bash
# Where MPI ranks lose to one process after their lists are made: the write of the .npy lists and
# the process's end, side by side in alternating rounds on one GPU host. Workload: 10,000,000 x 50
# in 50 clusters (make_clusters_table.py, centres SPREAD apart), k = 30 (METRIC, euclidean by
# default), the whole `knnwb knn X.npy -k 30 -m METRIC -o g.npy`: one process on one GPU, then `mpirun -np R ... --mpi-input
# whole` (one GPU a rank; R = the GPUs, 2 sharing GPU 0 on a 1-GPU host) once per SETTING (a
# setting is "default" or comma-separated VAR=VALUE pairs, e.g. KNNWB_MPI_SHARED=0 for the
# combining's messages path). The page cache is synced between runs (`sync`, 3 s), so that one run's
# disk writes do not land in the next. Each line: wall time, lists digest (the same for every run),
# knnwb's summary (rank 0's), and every rank's debug lines of the write (when its lists were ready,
# its slices, its sync) and of its knn step's end.
# Usage (repository root, after `. .gpu/env.sh`):
#   bash tests/bench_gpu/mpi_write_check.sh OUT SETTING [SETTING...]   (ROUNDS=2, ROWS=10000000, SPREAD=3,
#   METRIC=euclidean)
set -uo pipefail
out=$1; shift; settings=("$@"); rounds=${ROUNDS:-2}; rows=${ROWS:-10000000}; spread=${SPREAD:-3}
metric=${METRIC:-euclidean}
b=/tmp/knnwb-mpiwrite; d=/tmp/knnwb-mpipart-data; mkdir -p "$out" $d
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
f=$d/c$rows-$spread.npy
[ -s "$f" ] || $py tests/bench/make_clusters_table.py "$f" "$rows" 50 "$spread" >/dev/null || exit 1
echo "data ready at ${SECONDS} s"
gpus=$(nvidia-smi -L | wc -l); ranks=$((gpus > 1 ? gpus : 2))
envs() { [ "$1" = default ] && echo "KNNWB_KNOB=default" || echo "$1" | tr ',' ' '; }
run() { # NAME SETTING(or "one")
  local name=$1 s=$2 t0 t1 r
  rm -f $d/g.npy $d/g.distances.npy; sync; sleep 3
  t0=$(date +%s.%N)
  if [ "$s" = one ]; then
    CUDA_VISIBLE_DEVICES=0 G_MESSAGES_DEBUG=all timeout 300 "$k" knn "$f" -k 30 -m $metric -o $d/g.npy >"$out/one.log" 2>&1
  else
    env $(envs "$s") KNNWB_MPI_VERBOSE=1 G_MESSAGES_DEBUG=all timeout 300 mpirun --allow-run-as-root \
      --oversubscribe --bind-to none --tag-output -np $ranks \
      bash -c 'g=$OMPI_COMM_WORLD_LOCAL_RANK; [ "$g" -lt '"$gpus"' ] || g=0; CUDA_VISIBLE_DEVICES=$g exec "$@"' rank \
      "$k" knn "$f" -k 30 -m $metric --mpi-input whole -o $d/g.npy >"$out/one.log" 2>&1
  fi
  r=$?; t1=$(date +%s.%N)
  { echo "== $name rc=$r"; cat "$out/one.log"; } >>"$out/runs.log"
  printf '%-44s rc=%d wall %6.2f s  %s\n' "$name" $r "$(awk -v a=$t0 -v b=$t1 'BEGIN{print b-a}')" \
    "$(sha256sum $d/g.npy 2>/dev/null | cut -c1-16)"
  grep -E "\(read [0-9.]+ s, knn " "$out/one.log" | sed -E 's/^(\[[0-9],[0-9]\])?.*(\(read .*)/    \1 \2/'
  grep -oE "(\[[0-9],[0-9]\]<stderr>: )?.*(distributed write: .*|combined in .*|command (started|finished).*)" \
    "$out/one.log" | sed -E 's/^(\[[0-9],[0-9]\])<stderr>: .*DEBUG: ([0-9:.]+): /\1 \2 /; s/^.*DEBUG: ([0-9:.]+): /\1 /' |
    cut -c1-190 | sed 's/^/    /'
}
for ((round = 1; round <= rounds; round++)); do
  echo "round $round"
  run "1 GPU, one process" one
  for s in "${settings[@]}"; do run "$ranks ranks, $s" "$s"; done
done
echo "total ${SECONDS} s"
