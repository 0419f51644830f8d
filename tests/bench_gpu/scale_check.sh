#!/usr/bin/env bash
# Rows at scale, the user's whole command (`knnwb knn X.npy -k 30 -m euclidean -o g.npy`) on rows
# of 50 Gaussian clusters x 50 (tests/bench/make_clusters_table.py): for each row count, the wall
# time, the peak resident memory of the knnwb process (VmHWM, sampled every 0.2 s) against the
# input and output bytes, the lists digest, knnwb's summary and the partitioned search's lines
# (the choice, the groups' own lists, the bounds pass). The data is made once per row count and
# removed after its runs, so that the disk holds one size at a time (30,000,000 rows: 6.0 GB in,
# 14.4 GB out; 100,000,000 rows: 20 GB in, 24 GB out with --lists-dtype 32). RUNS=N runs each size N times (1); GPUS="0 0,1" runs each size on each of those
# CUDA_VISIBLE_DEVICES values in turn (default: every GPU); VARIANTS="|--lists-dtype 32" runs each
# also with those extra arguments ('|' between variants; the empty one is the plain command).
# ORACLE=N checks N sampled rows of each run's lists against a float64 brute force on the GPU
# (tests/bench_gpu/sample_oracle.py; PyTorch, else NumPy on the host).
# Usage (repository root; on the GPU machine after `. .gpu/env.sh`):
#   bash tests/bench_gpu/scale_check.sh OUT [ROWS...]        (ROWS: 10000000 30000000)
# BUILD=DIR uses that build (a CPU build works too); else a -DKNNWB_CUDA=ON Release build is made.
set -uo pipefail
out=$1; shift; sizes=("$@"); [ ${#sizes[@]} -gt 0 ] || sizes=(10000000 30000000)
runs=${RUNS:-1}; d=${DATA:-/tmp/knnwb-scale-data}; mkdir -p "$out" "$d"
read -r -a ways <<<"${GPUS:-all}"
IFS='|' read -r -a variants <<<"${VARIANTS:-}"; [ ${#variants[@]} -gt 0 ] || variants=("")
SECONDS=0
if [ -z "${BUILD:-}" ]; then
  BUILD=/tmp/knnwb-scale
  { cmake -S . -B $BUILD -DKNNWB_CUDA=ON -DKNNWB_MPI=OFF -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release &&
    cmake --build $BUILD -j"$(nproc)" --target knnwb_host knnwb_knn_plugin; } >"$out/build.log" 2>&1 ||
    { tail -30 "$out/build.log"; exit 1; }
  echo "build ${SECONDS} s"
fi
k=$BUILD/bin/knnwb; export LD_LIBRARY_PATH=$BUILD:${LD_LIBRARY_PATH:-}
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3

# The command's wall time and the largest VmHWM of the process tree it starts, in KiB.
peak_run() {
  local log=$1; shift
  local pid c h hwm=0 t0 t1 rc
  t0=$(date +%s.%N)
  "$@" >"$log" 2>&1 &
  pid=$!
  while kill -0 $pid 2>/dev/null; do
    for c in $pid $(pgrep -P $pid); do
      h=$(awk '/VmHWM/{print $2}' /proc/$c/status 2>/dev/null)
      [ -n "$h" ] && [ "$h" -gt "$hwm" ] && hwm=$h
    done
    sleep 0.2
  done
  wait $pid; rc=$?; t1=$(date +%s.%N)
  echo "$rc $(awk -v a=$t0 -v b=$t1 'BEGIN{printf "%.2f", b-a}') $hwm"
}

for n in "${sizes[@]}"; do
  x=$d/c$n.npy g=$d/g$n.npy
  SECONDS=0; $py tests/bench/make_clusters_table.py $x $n 50 >/dev/null || exit 1
  echo "$n x 50: data ${SECONDS} s"
  for ((r = 1; r <= runs; r++)); do for w in "${ways[@]}"; do for v in "${variants[@]}"; do
    rm -f $g ${g%.npy}.distances.npy
    vis=KNNWB_GPUS=all; [ "$w" = all ] || vis=CUDA_VISIBLE_DEVICES=$w
    [ "$w" = all ] && [ -z "$v" ] || echo "  GPUs $w${v:+ ($v)}:"
    read -r -a extra <<<"$v"
    read -r rc wall hwm < <(peak_run "$out/one.log" env $vis G_MESSAGES_DEBUG=all KNNWB_CUDA_TRACE=1 \
      $k knn $x -k 30 -m euclidean "${extra[@]}" -o $g)
    cat "$out/one.log" >>"$out/runs.log"
    in_out=$(($(stat -c %s $x) + $(stat -c %s $g 2>/dev/null || echo 0) + $(stat -c %s ${g%.npy}.distances.npy 2>/dev/null || echo 0)))
    echo "  rc=$rc wall $wall s, peak memory $((hwm / 1024)) MiB = $(awk -v h=$hwm -v b=$in_out 'BEGIN{printf "%.2f", h * 1024 / b}')x input + output, digest $(sha256sum $g 2>/dev/null | cut -c1-16)"
    echo "  $(grep -E '^knnwb: [0-9]+ x' "$out/one.log" | grep -oE '\(read.*')"
    grep -E "clusters \(|partition: [0-9]+ groups" "$out/one.log" | sed -E 's/^.*DEBUG: [0-9:.]+: knnwb: /  /'
    if [ -n "${ORACLE:-}" ] && [ "$rc" = 0 ]; then
      SECONDS_ORACLE=$SECONDS
      echo "  $($py tests/bench_gpu/sample_oracle.py $x $g 30 euclidean "$ORACLE" 2>&1 | tail -6) ($((SECONDS - SECONDS_ORACLE)) s)"
    fi
  done; done; done
  rm -f $x $g ${g%.npy}.distances.npy
done
