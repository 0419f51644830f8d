#!/usr/bin/env bash
# One batch on the 2-GPU machine (nvidia-h200-x2): build with CUDA and MPI; `knnwb knn` with the
# CUDA backend on 2 ranks (one GPU each) against one process and the CPU (bytes compared); then the
# benchmark (n = 1,533,876, d = 295, k = 20 Pearson) on 1 rank x 1 GPU, on 2 ranks x 1 GPU (with
# and without the ranks sharing thresholds) and on one process with both GPUs, with every rank's
# debug lines (exchange, merge, thresholds) and the CUDA trace (KNNWB_CUDA_TRACE=1) in the logs.
# Usage (repository root, after `. .gpu/env.sh`): bash tests/bench_gpu/mpi_gpu_check.sh OUTDIR [tests|quick|ratio|board|all]
# ("tests" also runs the GPU ctest label first; "quick": the byte checks and the 2-rank benchmark
# only; "ratio": the byte checks, 1 GPU and 2 ranks; "board": those, then 2 ranks with the
# thresholds as collective reductions (KNNWB_MPI_BOARD=0), on the board and as reductions again; "all" adds 2 ranks without threshold rounds, one process with both GPUs and Open MPI's CMA
# path). Default: 1 GPU, 2 ranks, 2 ranks with KNNWB_MPI_SHARED=0 (messages instead of the shared
# window), and bench_exchange (the transports alone). At most 8 files in OUTDIR. Open MPI's
# shared-memory segments go to /dev/shm (a container's /tmp may be an overlay on disk).
set -uo pipefail
out=${1:-/tmp/knnwb-mpi}
mkdir -p "$out"
b=/tmp/knnwb-build-mpi
# Open MPI outside PATH on some images (HPC-X, NGC containers).
for d in /usr/local/mpi/bin /opt/hpcx/ompi/bin /usr/mpi/gcc/openmpi-*/bin; do
  [ -x "$d/mpicc" ] && ! command -v mpicc >/dev/null && export PATH=$d:$PATH
done
{ mpicc -showme; mpirun --version | head -1; df -h /dev/shm; nproc
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; } >"$out/mpi.txt" 2>&1
cat "$out/mpi.txt"
mode=${2:-}
targets="bench_knn_gpu knnwb_host knnwb_knn_plugin"
[ "$mode" = ratio ] || [ "$mode" = quick ] || [ "$mode" = board ] || targets="$targets bench_exchange"
[ "$mode" = tests ] && targets="$targets test_cuda_select test_cuda_knn"
SECONDS=0
{ cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_MPI=ON -DKNNWB_CUDA_ARCHITECTURES=90 \
    -DCMAKE_BUILD_TYPE=Release \
  && cmake --build $b --target $targets -j"$(nproc)"; } \
  >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
echo "build ${SECONDS} s"
if [ "$mode" = tests ]; then
  timeout 150 ctest --test-dir $b -R 'test_cuda_(select|knn)$' --output-on-failure >"$out/ctest.log" 2>&1
  echo "ctest rc=$?"; grep "tests passed\|Passed\|Failed" "$out/ctest.log"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
shm=; [ -w /dev/shm ] && shm=/dev/shm
# One GPU per rank; no core binding (each rank's host threads prepare, merge and refine).
mpi() {
  # shellcheck disable=SC2086
  mpirun --allow-run-as-root --bind-to none --tag-output ${mpi_extra:-} --mca btl self,vader \
    ${shm:+--mca btl_vader_backing_directory $shm} \
    --mca btl_vader_single_copy_mechanism "${single_copy:-none}" -np "$1" \
    bash -c 'export CUDA_VISIBLE_DEVICES=$OMPI_COMM_WORLD_LOCAL_RANK; exec "$@"' rank "${@:2}"
}
knnwb=$b/bin/knnwb
python3 tests/distributed/make_npy.py /tmp/mpi-check.npy 30011 40 7
for metric in pearson euclidean manhattan; do
  CUDA_VISIBLE_DEVICES=0 $knnwb knn /tmp/mpi-check.npy -k 15 -m $metric -b cuda -q -o /tmp/one.knn
  mpi 2 $knnwb knn /tmp/mpi-check.npy -k 15 -m $metric -b cuda -q -o /tmp/two.knn
  $knnwb knn /tmp/mpi-check.npy -k 15 -m $metric -b cpu -q -o /tmp/cpu.knn
  cmp /tmp/one.knn /tmp/two.knn && cmp /tmp/one.knn /tmp/cpu.knn &&
    echo "knnwb knn 30011 x 40 $metric: 2 ranks x 1 GPU = 1 GPU = CPU bytes"
done 2>&1 | tee "$out/identity.txt"
export G_MESSAGES_DEBUG=all KNNWB_CUDA_TRACE=1 KNNWB_MPI_VERBOSE=1
bench="--n 1533876 --no-select --no-floor"
runs="bench2"
if [ "$mode" = ratio ] || [ "$mode" = board ]; then
  runs="bench1 bench2"
  CUDA_VISIBLE_DEVICES=0 $b/tests/bench_gpu/bench_knn_gpu $bench >"$out/bench1.log" 2>&1
elif [ "$mode" != quick ]; then
  # The transports alone: the candidates' size each way, the threshold rounds' reduction.
  for shared in 0 1 auto; do
    KNNWB_MPI_SHARED=$shared mpi 2 $b/tests/distributed/bench_exchange --mib 383 --reps 3
  done 2>&1 | grep -v "^\[1,1\]" | tee "$out/exchange.txt"
  runs="bench1 bench2 bench2-messages"
  CUDA_VISIBLE_DEVICES=0 $b/tests/bench_gpu/bench_knn_gpu $bench >"$out/bench1.log" 2>&1
fi
mpi 2 $b/tests/bench_gpu/bench_knn_gpu $bench >"$out/bench2.log" 2>&1
if [ "$mode" = board ]; then
  # The ranks' thresholds on the board (default) and as collective reductions, alternating.
  runs="$runs bench2-reduce bench2-board bench2-reduce2"
  KNNWB_MPI_BOARD=0 mpi 2 $b/tests/bench_gpu/bench_knn_gpu $bench >"$out/bench2-reduce.log" 2>&1
  mpi 2 $b/tests/bench_gpu/bench_knn_gpu $bench >"$out/bench2-board.log" 2>&1
  KNNWB_MPI_BOARD=0 mpi 2 $b/tests/bench_gpu/bench_knn_gpu $bench >"$out/bench2-reduce2.log" 2>&1
fi
if [ "$mode" != quick ] && [ "$mode" != ratio ] && [ "$mode" != board ]; then
  KNNWB_MPI_SHARED=0 mpi 2 $b/tests/bench_gpu/bench_knn_gpu $bench >"$out/bench2-messages.log" 2>&1
fi
if [ "$mode" = all ]; then
  runs="$runs bench2-nobounds bench1x2 bench2-cma"
  KNNWB_CUDA_NO_SHARE_BOUNDS=1 mpi 2 $b/tests/bench_gpu/bench_knn_gpu $bench >"$out/bench2-nobounds.log" 2>&1
  CUDA_VISIBLE_DEVICES=0,1 $b/tests/bench_gpu/bench_knn_gpu $bench >"$out/bench1x2.log" 2>&1
  # Open MPI's single-copy path (CMA: process_vm_readv) where the container allows it.
  KNNWB_MPI_SHARED=0 single_copy=cma mpi_extra="--timeout 120" mpi 2 $b/tests/bench_gpu/bench_knn_gpu $bench \
    >"$out/bench2-cma.log" 2>&1 || echo "cma run failed: $?"
fi
for f in $runs; do
  echo "== $f"
  grep "library (\|MPI:\|gathering" "$out/$f.log"
  grep "DEBUG.*\(candidates received\|thresholds shared\|duplicate rows\|checks and\|gathered\|select .* refine\|prepare\|whole call\|re-selected\|exchange and merge\)\|knnwb cuda" "$out/$f.log" |
    sed 's/\*\* (process:[0-9]*): .*DEBUG.*: //' | cut -c1-220
done
# Every run must give the one-GPU run's lists (rank 0's digest of the gathered lists).
digests=$(for f in $runs; do grep -ohE "lists digest [0-9a-f]+" "$out/$f.log" | sort -u; done | sort -u)
echo "digests: $(echo "$digests" | tr '\n' ' ')"
[ "$(echo "$digests" | wc -l)" -eq 1 ] || { echo "the runs' lists differ"; exit 1; }
