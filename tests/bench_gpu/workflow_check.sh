#!/usr/bin/env bash
# The seed workflow on a GPU machine, in one go: build with CUDA, run the workflow tests
# (backend auto = the GPU), check CPU and GPU give the same neighbourhood and whole-graph lists on a
# small case, then the benchmark at the paper's scale (876 x 295 -> 1,533,876 rows).
#   bash tests/bench_gpu/workflow_check.sh OUT [BUILD_DIR]
# Logs in OUT; each phase is time-limited so that a slow one still leaves the others' logs.
set -uo pipefail
out=${1:?usage: workflow_check.sh OUT [BUILD_DIR]}
build=${2:-build-workflow}
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  nproc
} > "$out/machine.txt" 2>&1
start=$(date +%s)
# Carried Debian packages (.gpu/env.sh) may hold zlib's libz.so as a link to a runtime library the
# box has under another version: CMake then links libz.a, which cannot go into a shared library.
zlib_option=""
libdir="$(pkg-config --variable=libdir zlib 2>/dev/null)" # the sysroot is prefixed already
if [ ! -e "$libdir/libz.so" ]; then
  for f in /lib/x86_64-linux-gnu/libz.so.1 /usr/lib/x86_64-linux-gnu/libz.so.1; do
    if [ -e "$f" ]; then zlib_option="-Dpkgcfg_lib_ZLIB_z=$f"; break; fi
  done
fi
timeout 170 bash -c "cmake -S '$src' -B '$build' -DKNNWB_CUDA=ON -DCMAKE_BUILD_TYPE=Release \
  -DKNNWB_CUDA_ARCHITECTURES=90 $zlib_option > '$out/configure.log' 2>&1 && \
  cmake --build '$build' -j\$(nproc) --target bench_workflow knnwb_host knnwb_knn_plugin \
    test_workflow_neighbourhood test_workflow_classify test_workflow_cli > '$out/build.log' 2>&1"
echo "build: exit $? after $(( $(date +%s) - start )) s" | tee -a "$out/summary.txt"
bench="$build/tests/bench_gpu/bench_workflow"
# The paper's scale: focused pipeline, then the whole-graph pipeline.
timeout 120 "$bench" --rows 876 --backend cuda --dir /tmp > "$out/bench-876.log" 2>&1
echo "bench 876 x 295: exit $?" | tee -a "$out/summary.txt"
# CPU = GPU: same digests of the focused neighbourhood and of the whole lists on a small case.
timeout 30 "$bench" --rows 150 --backend cpu > "$out/small-cpu.log" 2>&1
timeout 30 "$bench" --rows 150 --backend cuda > "$out/small-cuda.log" 2>&1
if diff <(grep -o 'digest [0-9a-f]*' "$out/small-cpu.log") \
        <(grep -o 'digest [0-9a-f]*' "$out/small-cuda.log") > /dev/null &&
   grep -q digest "$out/small-cpu.log"; then
  echo "small case: CPU and GPU digests identical" | tee -a "$out/summary.txt"
else
  echo "small case: CPU and GPU digests DIFFER (or a run failed)" | tee -a "$out/summary.txt"
fi
timeout 40 ctest --test-dir "$build" -R 'workflow_(neighbourhood|classify|cli)' --output-on-failure \
  > "$out/ctest.log" 2>&1
echo "workflow tests (GPU backend by auto): exit $?" | tee -a "$out/summary.txt"
echo "total $(( $(date +%s) - start )) s" | tee -a "$out/summary.txt"
