#!/usr/bin/env bash
# The several-GPU paths of one process, on a host with one GPU: `knnwb knn -b cuda --devices 0,0`
# lists GPU 0 twice, so two workers each take their share of the tiles on the one device and their
# lists meet as on two GPUs (peer copies between the workers' buffers); 0,0,0 and 0,0,0,0 do so
# with three and four, and KNNWB_CUDA_NO_PEER_ACCESS=1 takes the path of GPUs without peer access
# (each worker's kc lists merged on the host). Then 2 MPI ranks with one worker each and with two,
# split and whole-input. Every run's lists must equal one worker's byte for byte (one worker's are checked
# against the CPU and the double oracle elsewhere). Inputs that take many tiles: 400,003 x 50 in 50
# clusters (the partitioned search), 300,007 x 50 overlapping clusters (the plain search) and
# 200,003 x 128 Gaussian rows with copies of rows (pearson, spearman, manhattan).
# Usage (repository root, after `. .gpu/env.sh`): BUILD=DIR bash tests/bench_gpu/worker_count_check.sh OUT
# (BUILD: a CMake build with CUDA and MPI holding bin/knnwb; GPU_MEMORY=400M: every run's
# --gpu-memory, so that the rows and lists stream through a small part of the GPU; INPUTS="p o":
# only those inputs; DATA=DIR: where the inputs are made, kept when already there (OUT/data);
# KNNWB_CUDA_TRACE and KNNWB_CUDA_SYMMETRIC reach the ranks too; LISTS="0,1 0,1,0,1": the --devices
# lists compared with one worker (default "0,0 0,0,0 0,0,0,0"), on a host with several GPUs;
# RANK_GPUS=own: each rank sees the GPU of its local rank only, else every rank sees GPU 0).
# Prints one line per input and
# metric;
# exits non-zero when a run's lists differ or a run fails. A run whose lists differ leaves
# OUT/INPUT-METRIC-RUN.diff: how many rows differ and how (tests/bench_gpu/knn_diff.py).
set -uo pipefail
out=$1; mkdir -p "$out"
for dir in /usr/local/mpi/bin /opt/hpcx/ompi/bin /usr/mpi/gcc/openmpi-*/bin; do
  [ -x "$dir/mpicc" ] && ! command -v mpicc >/dev/null && export PATH=$dir:$PATH
done
build=${BUILD:?BUILD=DIR: a build with CUDA and MPI}
export LD_LIBRARY_PATH=$build:${LD_LIBRARY_PATH:-} OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
SECONDS=0
d=${DATA:-$out/data}; mkdir -p $d
want() { case " ${INPUTS:-c o p} " in *" $1 "*) [ ! -s $d/$1.npy ] ;; *) false ;; esac; }
want c && { $py tests/bench/make_clusters_table.py $d/c.npy 400003 50 >/dev/null || exit 1; }
want o && { $py tests/bench/make_clusters_table.py $d/o.npy 300007 50 2 >/dev/null || exit 1; }
want p && { $py - "$d" <<'PY' || exit 1
import sys
import numpy as np
r = np.random.default_rng(7)
a = r.normal(size=(200003, 128)).astype(np.float32)
a[1000:1040] = a[17]  # copies of one row: ties at distance zero
np.save(sys.argv[1] + '/p.npy', a)
PY
}
echo "data ${SECONDS} s"
k=$build/bin/knnwb
fails=0
rank_gpu='export CUDA_VISIBLE_DEVICES=0;'
[ "${RANK_GPUS:-}" = own ] && rank_gpu='export CUDA_VISIBLE_DEVICES=$OMPI_COMM_WORLD_LOCAL_RANK;'
workers() { # the workers a --devices list makes: one per number listed
  local list=${1//[^,]/}; echo $(( ${#list} + 1 ))
}
run() { # name, then the command's arguments after `knnwb knn`
  local name=$1; shift
  rm -f $d/x.knn
  local err="$out/$f-$m-$name.err"
  if ! "$@" -o $d/x.knn 2>"$err"; then
    line="$line $name=FAILED"; fails=$((fails + 1)); tail -3 "$err"
  elif cmp -s $d/ref.knn $d/x.knn; then
    line="$line $name=ok"
  else
    line="$line $name=DIFF"; fails=$((fails + 1))
    $py tests/bench_gpu/knn_diff.py $d/ref.knn $d/x.knn 3 > "$out/$f-$m-$name.diff"
  fi
}
for c in "c euclidean 30" "o euclidean 30" "o cosine 10" "p pearson 20" "p spearman 10" "p manhattan 10"; do
  set -- $c; f=$1 m=$2 kk=$3
  case " ${INPUTS:-c o p} " in *" $f "*) ;; *) continue ;; esac
  args="$d/$f.npy -k $kk -m $m -b cuda -q ${GPU_MEMORY:+--gpu-memory $GPU_MEMORY}"
  $k knn $args --devices 0 -o $d/ref.knn 2>"$out/ref.err" ||
    { echo "$f $m: one worker failed"; tail -3 "$out/ref.err"; fails=$((fails + 1)); continue; }
  line="$f $m k=$kk:"
  for dv in ${LISTS:-0,0 0,0,0 0,0,0,0}; do
    run "$(workers $dv)-workers" $k knn $args --devices $dv
  done
  KNNWB_CUDA_NO_PEER_ACCESS=1 run "2-workers-no-peer" $k knn $args --devices 0,0
  for mode in split whole; do
    for dv in 0 0,0; do
      run "2-ranks-of-$(workers $dv)-$mode" mpirun --oversubscribe --allow-run-as-root --bind-to none \
        -x LD_LIBRARY_PATH -x KNNWB_CUDA_TRACE=${KNNWB_CUDA_TRACE:-0} \
        -x KNNWB_CUDA_SYMMETRIC=${KNNWB_CUDA_SYMMETRIC:-1} -np 2 bash -c "$rank_gpu"' exec "$@"' rank \
        $k knn $args --devices $dv --mpi-input $mode
    done
  done
  echo "$line"
done
echo "differences $fails; ${SECONDS} s"
[ $fails = 0 ]
