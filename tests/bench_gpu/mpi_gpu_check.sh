#!/usr/bin/env bash
# One batch on the 2-GPU machine (nvidia-h200-x2): build with CUDA and MPI; `knnwb knn` with the
# CUDA backend on 2 ranks (one GPU each) against one process (bytes compared); then the benchmark
# (n = 1,533,876, d = 295, k = 20 Pearson) on 1 rank x 1 GPU and on 2 ranks x 1 GPU, with the
# time spent exchanging candidates and gathering lists (G_MESSAGES_DEBUG lines of every rank).
# Usage (repository root, after `. .gpu/env.sh`): bash tests/bench_gpu/mpi_gpu_check.sh OUTDIR
set -uo pipefail
out=${1:-/tmp/knnwb-mpi}
mkdir -p "$out"
b=/tmp/knnwb-build-mpi
# Open MPI outside PATH on some images (HPC-X, NGC containers).
for d in /usr/local/mpi/bin /opt/hpcx/ompi/bin /usr/mpi/gcc/openmpi-*/bin; do
  [ -x "$d/mpicc" ] && ! command -v mpicc >/dev/null && export PATH=$d:$PATH
done
{ mpicc -showme; mpirun --version | head -1; } >"$out/mpi.txt" 2>&1
cat "$out/mpi.txt"
{ cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_MPI=ON -DKNNWB_CUDA_ARCHITECTURES=90 \
    -DCMAKE_BUILD_TYPE=Release \
  && cmake --build $b --target bench_knn_gpu knnwb_host knnwb_knn_plugin -j"$(nproc)"; } \
  >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/gpu.txt"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# One GPU per rank; no core binding (each rank's host threads prepare, merge and refine).
mpi() {
  mpirun --allow-run-as-root --bind-to none --mca btl self,vader \
    --mca btl_vader_single_copy_mechanism none -np "$1" \
    bash -c 'export CUDA_VISIBLE_DEVICES=$OMPI_COMM_WORLD_LOCAL_RANK; exec "$@"' rank "${@:2}"
}
knnwb=$b/bin/knnwb
python3 tests/distributed/make_npy.py /tmp/mpi-check.npy 30011 40 7
for metric in pearson euclidean; do
  CUDA_VISIBLE_DEVICES=0 $knnwb knn /tmp/mpi-check.npy -k 15 -m $metric -b cuda -q -o /tmp/one.knn
  mpi 2 $knnwb knn /tmp/mpi-check.npy -k 15 -m $metric -b cuda -q -o /tmp/two.knn
  $knnwb knn /tmp/mpi-check.npy -k 15 -m $metric -b cpu -q -o /tmp/cpu.knn
  cmp /tmp/one.knn /tmp/two.knn && cmp /tmp/one.knn /tmp/cpu.knn &&
    echo "knnwb knn 30011 x 40 $metric: 2 ranks x 1 GPU = 1 GPU = CPU bytes"
done 2>&1 | tee "$out/identity.txt"
export G_MESSAGES_DEBUG=all
CUDA_VISIBLE_DEVICES=0 $b/tests/bench_gpu/bench_knn_gpu --n 1533876 --no-select --no-floor \
  >"$out/bench1.log" 2>&1
mpi 2 $b/tests/bench_gpu/bench_knn_gpu --n 1533876 --no-select --no-floor >"$out/bench2.log" 2>&1
for f in bench1 bench2; do
  echo "== $f"
  grep "library (\|MPI:" "$out/$f.log"
  grep "DEBUG.*\(exchange\|gathered\|select .* refine\|prepare\|whole call\)" "$out/$f.log" |
    sed 's/.*DEBUG: //' | tail -8
done
