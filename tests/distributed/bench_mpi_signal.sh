#!/usr/bin/env bash
# How long `mpirun -np 2 knnwb knn` takes to end after SIGINT/SIGTERM on mpirun (a benchmark, never
# run as a test: timing on a shared machine is not a pass/fail criterion). Open MPI ends a job with
# SIGCONT, SIGTERM a second later, then SIGKILL; knnwb's ranks stop at the SIGCONT
# (plugin/host/runtime/signals.c), so mpirun ends about 1 s after the signal (its own wait), about
# 2 s when the ranks wait for the SIGTERM.
# Usage: bench_mpi_signal.sh KNNWB MPIEXEC SOURCE_DIR [RUNS]   prints one line per run and the range.
set -euo pipefail
knnwb=$1
mpiexec=$2
here=$3/tests/distributed
runs=${4:-8}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
python3 "$here/make_npy.py" long.npy 60000 64 5
times=()
for run in $(seq "$runs"); do
  sig=$([ $((run % 2)) -eq 0 ] && echo TERM || echo INT)
  ("$mpiexec" --oversubscribe --allow-run-as-root --mca btl self,vader \
    --mca btl_vader_single_copy_mechanism none -np 2 "$knnwb" knn long.npy -k 10 -m manhattan \
    -b cpu -t 1 -o sig.knn 2>/dev/null) &
  pid=$!
  sleep 2
  start=$(date +%s%N)
  kill -"$sig" "$pid"
  wait "$pid" || true
  elapsed=$((($(date +%s%N) - start) / 1000000))
  echo "run $run: SIG$sig, mpirun ended $elapsed ms after the signal"
  times+=("$elapsed")
done
printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print "min " a[1] " ms, median " a[int((NR+1)/2)] " ms, max " a[NR] " ms"}'
