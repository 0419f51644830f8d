#!/usr/bin/env bash
# Byte checks of the split search on a GPU (`mpirun -np R knnwb knn X.npy --mpi-input split -b cuda`,
# ranks sharing GPU 0) against the CPU backend in one process, every metric, 2 and 3 ranks: a pair
# of blocks as one job for both sides (the default) and as two panels (KNNWB_SPLIT_CROSS=0), the
# own rows read from the shared window (KNNWB_MPI_SHARED=1); then the split and the whole-input
# ranks (`--mpi-input whole`) with their first round planned from one process's sample rows
# (KNNWB_MARGIN_PILOT=always: the planner at any row count). Data: 30,011 x 40 Gaussian rows with
# copies of rows, and 20,011 x 6 small integers (many ties; constant rows, dropped for the pearson
# family and cosine with --drop-degenerate). Prints one line per input and metric; exits non-zero
# when a run's lists differ.
# Usage (repository root, after `. .gpu/env.sh`): bash tests/bench_gpu/split_bytes_check.sh OUT
# (BUILD=DIR: a build made by CMake beforehand; FORMS="cross1 whole-planned": only those forms;
# DEVICES=0,0: each rank's --devices, e.g. GPU 0 listed twice, so that every rank runs two GPU
# workers on one GPU; GPU_MEMORY=110M: each rank's --gpu-memory, so that the rows stream and pairs
# of blocks are declined; KNNWB_CUDA_NO_PEER_ACCESS=1 in the environment reaches the ranks)
set -uo pipefail
out=$1; mkdir -p "$out"
for dir in /usr/local/mpi/bin /opt/hpcx/ompi/bin /usr/mpi/gcc/openmpi-*/bin; do
  [ -x "$dir/mpicc" ] && ! command -v mpicc >/dev/null && export PATH=$dir:$PATH
done
build=${BUILD:-/tmp/knnwb-splitbytes}
SECONDS=0
if [ -z "${BUILD:-}" ]; then
  { cmake -S . -B "$build" -DKNNWB_CUDA=ON -DKNNWB_MPI=ON -DKNNWB_CUDA_ARCHITECTURES=90 \
      -DCMAKE_BUILD_TYPE=Release && cmake --build "$build" -j"$(nproc)" --target knnwb_host knnwb_knn_plugin; } \
    >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
fi
echo "build ${SECONDS} s"
export LD_LIBRARY_PATH=$build:${LD_LIBRARY_PATH:-} OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
d=$out/data; mkdir -p $d
$py - "$d" <<'PY' || exit 1
import sys
import numpy as np
d = sys.argv[1]
r = np.random.default_rng(5)
a = r.normal(size=(30011, 40)).astype(np.float32)
a[100:140] = a[7]  # copies of one row
a[5000:5003] = a[20000:20003]
np.save(d + '/g.npy', a)
np.save(d + '/t.npy', r.integers(0, 4, size=(20011, 6)).astype(np.float32))
PY
k=$build/bin/knnwb
fails=0
for f in g t; do
  for m in pearson abs-pearson spearman euclidean manhattan cosine; do
    $k knn $d/$f.npy -k 10 -m $m --drop-degenerate -b cpu -q -o $d/ref.knn 2>"$out/ref.err" ||
      { echo "$f $m: the CPU run failed"; tail -3 "$out/ref.err"; fails=$((fails + 1)); continue; }
    line="$f $m:"
    for np in 2 3; do
      for form in ${FORMS:-cross1 cross0 split-planned whole-planned}; do
        rm -f $d/x.knn
        mode=${form%-planned}; cross=${form#cross}; pilot=
        case $form in cross*) mode=split ;; *) cross=1 pilot=always ;; esac
        KNNWB_SPLIT_CROSS=$cross KNNWB_MARGIN_PILOT=$pilot mpirun --oversubscribe --allow-run-as-root --bind-to none \
          -x CUDA_VISIBLE_DEVICES=0 -x LD_LIBRARY_PATH -x KNNWB_SPLIT_CROSS -x KNNWB_MARGIN_PILOT -x KNNWB_MPI_SHARED=1 \
          -x KNNWB_CUDA_NO_PEER_ACCESS=${KNNWB_CUDA_NO_PEER_ACCESS:-0} \
          -np $np $k knn ${DEVICES:+--devices $DEVICES} ${GPU_MEMORY:+--gpu-memory $GPU_MEMORY} $d/$f.npy -k 10 -m $m --drop-degenerate --mpi-input $mode -b cuda -q \
          -o $d/x.knn 2>>"$out/mpi.err"
        if cmp -s $d/ref.knn $d/x.knn; then
          line="$line ${np}r/$form=ok"
        else
          line="$line ${np}r/$form=DIFF"
          fails=$((fails + 1))
        fi
      done
    done
    echo "$line"
  done
done
echo "differences $fails; ${SECONDS} s"
[ $fails = 0 ]
