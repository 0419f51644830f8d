#!/usr/bin/env bash
# Memory and wall time of each rank of the split search (`mpirun -np R knnwb knn X.npy ...
# --mpi-input split`, ranks sharing GPU 0), next to one process and the whole-input ranks: peak
# RSS and PSS per rank (tests/bench/memory_timeline.py; PSS counts the pages of the shared window
# once over the ranks that map them), on 1,000,000 x 50 in 50 clusters (euclidean k = 30) and, with
# ROWS (real_like_check.sh --rows), the real-like 1,533,876 x 128 metafeatures (Pearson k = 20; an
# NPY with its labels file beside it, as `knnwb metafeatures` writes it). Each rank's timeline,
# debug lines and largest mappings are in OUT/*.tsv*. With OLD (a `git archive` tarball) the same
# runs of that tree alternate with this one's; KNNWB_SPLIT_OWN_PACKED=0 runs (the own rows' prepared
# copy and the block as read kept beside their packed copy) and KNNWB_SPLIT_CROSS=0 runs (a pair of
# blocks as two panel jobs, not one job for both sides) alternate too. Every run must write the
# same lists.
# Usage (repository root, after `. .gpu/env.sh`): bash tests/bench_gpu/split_memory_check.sh OUT [ROWS [OLD]]
# (BUILD=DIR: this tree's build, made by CMake beforehand; CLUSTER_ROWS=N: N clustered rows, not
# 1,000,000: a quick look, on the CPU too; FORMS: which of "kept panels whole" run beside the split
# search, all by default; the whole-input ranks run on OLD's tree too)
set -uo pipefail
out=$1; rows=${2:-}; old=${3:-}; mkdir -p "$out"
for dir in /usr/local/mpi/bin /opt/hpcx/ompi/bin /usr/mpi/gcc/openmpi-*/bin; do
  [ -x "$dir/mpicc" ] && ! command -v mpicc >/dev/null && export PATH=$dir:$PATH
done
cfg="-DKNNWB_CUDA=ON -DKNNWB_MPI=ON -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release"
trees=new; SECONDS=0; forms=${FORMS-kept panels whole}
if [ -n "$old" ]; then
  trees="new old"; mkdir -p /tmp/knnwb-splitmem-old-src && tar -xf "$old" -C /tmp/knnwb-splitmem-old-src || exit 1
fi
if [ -n "${BUILD:-}" ]; then
  ln -sfn "$(realpath "$BUILD")" /tmp/knnwb-splitmem-new || exit 1
fi
for t in $trees; do
  [ $t = new ] && [ -n "${BUILD:-}" ] && continue
  src=.; [ $t = old ] && src=/tmp/knnwb-splitmem-old-src
  { cmake -S $src -B /tmp/knnwb-splitmem-$t $cfg &&
    cmake --build /tmp/knnwb-splitmem-$t -j"$(nproc)" --target knnwb_host knnwb_knn_plugin; } \
    >"$out/build-$t.log" 2>&1 || { tail -30 "$out/build-$t.log"; exit 1; }
done
echo "build ${SECONDS} s"
base=${LD_LIBRARY_PATH:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 KNNWB_SPLIT_OWN_PACKED=1 KNNWB_SPLIT_CROSS=1
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
d=/tmp/knnwb-splitmem-data; mkdir -p $d
$py tests/bench/make_clusters_table.py $d/clusters.npy "${CLUSTER_ROWS:-1000000}" 50 3 >/dev/null || exit 1
inputs=clusters
if [ -n "$rows" ]; then
  LD_LIBRARY_PATH=/tmp/knnwb-splitmem-new:$base /tmp/knnwb-splitmem-new/bin/knnwb metafeatures "$rows" \
    --ops all -q -o $d/real.npy || exit 1
  inputs="clusters real"
fi
run() { # NAME TREE RANKS(0: one process) INPUT ARGS...
  local name=$1 t=$2 np=$3 f=$4; shift 4
  local k=/tmp/knnwb-splitmem-$t/bin/knnwb
  rm -f $d/g.npy $d/g.distances.npy $d/g.labels.txt
  printf '%-26s ' "$name"
  if [ "$np" = 0 ]; then
    LD_LIBRARY_PATH=/tmp/knnwb-splitmem-$t:$base G_MESSAGES_DEBUG=all $py tests/bench/memory_timeline.py \
      "$out/$name.tsv" $k knn $d/$f.npy "$@" -o $d/g.npy | tr -d '\n'
  else
    LD_LIBRARY_PATH=/tmp/knnwb-splitmem-$t:$base G_MESSAGES_DEBUG=all $py tests/bench/memory_timeline.py \
      "$out/$name.tsv" mpirun --oversubscribe --allow-run-as-root --bind-to none -x CUDA_VISIBLE_DEVICES=0 \
      -x G_MESSAGES_DEBUG -x LD_LIBRARY_PATH -x KNNWB_SPLIT_OWN_PACKED -x KNNWB_SPLIT_CROSS -np "$np" \
      $k knn $d/$f.npy "$@" \
      -o $d/g.npy | tr -d '\n'
  fi
  echo "  $(sha256sum $d/g.npy 2>/dev/null | cut -c1-16)"
}
for f in $inputs; do
  if [ $f = clusters ]; then a=(-k 30 -m euclidean); else a=(-k 20 -m pearson); fi
  for round in 1 2; do
    for np in 2 4; do
      for t in $trees; do run $f-split$np-$t-$round $t $np $f "${a[@]}" --mpi-input split; done
      for form in $forms; do
        case $form in
          kept) [ $np = 2 ] && KNNWB_SPLIT_OWN_PACKED=0 run $f-split$np-kept-$round new $np $f "${a[@]}" --mpi-input split ;;
          panels) KNNWB_SPLIT_CROSS=0 run $f-split$np-panels-$round new $np $f "${a[@]}" --mpi-input split ;;
          whole) for t in $trees; do run $f-whole$np-$t-$round $t $np $f "${a[@]}" --mpi-input whole; done ;;
        esac
      done
    done
  done
  run $f-one new 0 $f "${a[@]}"
done
echo "total ${SECONDS} s"
