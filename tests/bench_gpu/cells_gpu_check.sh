#!/usr/bin/env bash
# On a GPU host: the GPU tests and the exact searches' host tests on this tree (a build with CUDA),
# then single linkage of rows of many columns on the host's cores, the cells of the rows against
# the tile search (tests/bench/linkage_cells_check.sh, -b cpu) and the GPU's tile search (GPU=1).
# Logs and the tables go to OUT.
# Usage (repository root, after `. .gpu/env.sh`): bash tests/bench_gpu/cells_gpu_check.sh OUT
# STEP=tests or STEP=bench runs one half (each fits a device call); ROWS as linkage_cells_check.sh's
# (default 200000 here).
set -uo pipefail
out=$1; b=/tmp/knnwb-cells-gpu; mkdir -p "$out"; SECONDS=0
tests="test_knn_gpu_command|test_cuda_select$|test_cuda_knn|test_core_knn$|test_core_tree|test_core_partition_outside|test_clustering_mst$|test_distributed_group"
if [ ! -x $b/bin/knnwb ] || [ "${STEP:-tests}" = tests ]; then
  { cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
    cmake --build $b -j"$(nproc)" --target knnwb_host knnwb_knn_plugin \
      test_cuda_select test_cuda_knn test_core_knn test_core_tree test_core_partition_outside \
      test_clustering_mst test_distributed_group; } >"$out/build.log" 2>&1 ||
    { tail -30 "$out/build.log"; exit 1; }
  echo "build ${SECONDS} s; $(nproc) cores; $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
fi
if [ "${STEP:-all}" != bench ]; then
  (cd $b && ctest -R "$tests" --timeout 300 --output-on-failure) >"$out/tests.log" 2>&1
  grep -E "tests passed|tests failed|Failed|Passed|Skipped" "$out/tests.log" | tail -14
  echo "tests done at ${SECONDS} s"
fi
if [ "${STEP:-all}" != tests ]; then
  GPU=1 ROWS=${ROWS:-200000} TIMEOUT=${TIMEOUT:-240} bash tests/bench/linkage_cells_check.sh $b/bin/knnwb "$out/cells"
  echo "bench done at ${SECONDS} s"
fi
