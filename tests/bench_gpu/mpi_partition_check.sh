#!/usr/bin/env bash
# GPUs and MPI ranks that add up, the user's whole command (`knnwb knn X.npy -k K -o g.npy`, and
# `mpirun -np R knnwb knn X.npy ... --mpi-input whole` with one GPU a rank) on one GPU host:
#   - 2,000,000 and 10,000,000 x 50 in 50 clusters, euclidean k = 30 (the partitioned search):
#     1 GPU, every GPU in one process, R ranks (R = the GPUs; 2 ranks sharing GPU 0 on a 1-GPU
#     machine); the CPU backend on 2M with every core (its workers of 4 threads);
#   - with ROWS (real_like_check.sh --rows), the real-like 1,533,876 x 128 Pearson k = 20 (the
#     plain search) the same three ways;
# with the list digests (every way must give the same bytes) and the partition's lines (the 10M
# run on 1 GPU with the CUDA trace of every sub-search, KNNWB_CUDA_TRACE=1, in OUT/runs.log).
# About 5 minutes on two H200s with 32 cores.
# Usage (repository root, after `. .gpu/env.sh`): bash tests/bench_gpu/mpi_partition_check.sh OUT [ROWS]
# (NO_CPU=1 leaves out the CPU run; SPREAD=2 puts the clusters' centres 2 apart instead of 3, where
# rows visit other clusters; SIZES="10M" leaves out 2M; ROUNDS=N runs the GPU ways N times,
# alternating; SPLIT=1 adds the ranks with --mpi-input split, which search cluster by cluster on
# their blocks (before, they compared every pair of blocks: 44 s at 10M rows on two H200s);
# RANKS=R runs R ranks (they share GPU 0 past the GPUs);
# MEMORY=1 prints each knnwb process's peak proportional set (Pss, sampled every 0.1 s, with its
# anonymous, file-backed and shared-memory parts); DEVICES0=1 adds one GPU picked with --devices 0 while every GPU
# is visible, which the CUDA driver narrows to GPU 0; SHARE=1 adds ranks that see every GPU and
# take their share of them, narrowed and not (KNNWB_GPU_NARROW=0), and ranks each on every GPU;
# BEFORE=old.tar.gz, a `git archive` of another tree, builds it beside this one and runs every way
# with both builds in turn, the other's lines marked "(before)": a side-by-side comparison)
set -uo pipefail
out=$1; b=/tmp/knnwb-mpipart; mkdir -p "$out"
for dir in /usr/local/mpi/bin /opt/hpcx/ompi/bin /usr/mpi/gcc/openmpi-*/bin; do
  [ -x "$dir/mpicc" ] && ! command -v mpicc >/dev/null && export PATH=$dir:$PATH
done
SECONDS=0
# SOURCE BUILD LOG: the host and the kNN plugin, with CUDA and MPI
build() {
  { cmake -S "$1" -B "$2" -DKNNWB_CUDA=ON -DKNNWB_MPI=ON -DKNNWB_CUDA_ARCHITECTURES=90 \
      -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF &&
    cmake --build "$2" -j"$(nproc)" --target knnwb_host knnwb_knn_plugin; } >"$3" 2>&1 ||
    { tail -30 "$3"; exit 1; }
}
build . $b "$out/build.log"
k=$b/bin/knnwb; kb=; ld=${LD_LIBRARY_PATH:-}
if [ -n "${BEFORE:-}" ]; then
  rm -rf $b-before-src && mkdir -p $b-before-src && tar -xzf "$BEFORE" -C $b-before-src || exit 1
  build $b-before-src $b-before "$out/build-before.log"
  kb=$b-before/bin/knnwb
fi
echo "build ${SECONDS} s; $(nproc) cores; $(nvidia-smi -L | wc -l) GPU(s)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
d=/tmp/knnwb-mpipart-data; mkdir -p $d
spread=${SPREAD:-3}; sfx=$([ "$spread" = 3 ] || echo "-$spread")
read -r -a sizes <<<"${SIZES:-2M 10M}"
for n in "${sizes[@]}"; do
  [ -s $d/c$n$sfx.npy ] || $py tests/bench/make_clusters_table.py $d/c$n$sfx.npy ${n%M}000000 50 "$spread"
done
gpus=$(nvidia-smi -L | wc -l); ranks=${RANKS:-$((gpus > 1 ? gpus : 2))}
log=$out/runs.log; : >"$log"
# Each knnwb process's peak Pss in MiB, sampled every 0.1 s until the file $1 exists, into $2,
# with its anonymous, file-backed and shared-memory parts at the peak: "PSS (ANON/FILE/SHMEM)".
pss_peaks() {
  local pid line; declare -A peak=() parts=()
  while [ ! -e "$1" ]; do
    for pid in $(pgrep -f "^($k|${kb:-$k}) knn" || true); do
      line=$(awk '/^(Pss|Pss_Anon|Pss_File|Pss_Shmem):/ {v[$1] = $2}
        END {if (v["Pss:"] != "") printf "%d %d (%d/%d/%d)\n", v["Pss:"], v["Pss:"] / 1024,
          v["Pss_Anon:"] / 1024, v["Pss_File:"] / 1024, v["Pss_Shmem:"] / 1024}' \
        "/proc/$pid/smaps_rollup" 2>/dev/null || true)
      [ -n "$line" ] && [ "${peak[$pid]:-0}" -lt "${line%% *}" ] || continue
      peak[$pid]=${line%% *}; parts[$pid]=${line#* }
    done
    sleep 0.1
  done
  for pid in $(printf '%s\n' "${!peak[@]}" | sort -n); do printf '%s ' "${parts[$pid]}"; done >"$2"
}
run() { # NAME WAY(1|all|ranks) FILE BACKEND METRIC K
  local name=$1 way=$2 f=$3 backend=$4 metric=$5 kk=$6 t0 t1 r sampler=
  export LD_LIBRARY_PATH=${k%/bin/knnwb}:$ld # (each build its own libraries)
  rm -f $d/g.npy $d/g.distances.npy $d/g.labels.txt $d/pss.stop $d/pss.txt
  [ -z "${MEMORY:-}" ] || { pss_peaks $d/pss.stop $d/pss.txt & sampler=$!; }
  t0=$(date +%s.%N)
  case $way in
  1) CUDA_VISIBLE_DEVICES=0 G_MESSAGES_DEBUG=all timeout 300 "$k" knn "$f" -k $kk -m $metric -b $backend -o $d/g.npy >$out/one.log 2>&1 ;;
  all) G_MESSAGES_DEBUG=all timeout 300 "$k" knn "$f" -k $kk -m $metric -b $backend -o $d/g.npy >$out/one.log 2>&1 ;;
  dev0) G_MESSAGES_DEBUG=all timeout 300 "$k" knn "$f" -k $kk -m $metric -b $backend --devices 0 \
    -o $d/g.npy >$out/one.log 2>&1 ;;
  share|share0|every) # ranks that see every GPU: each takes its share (narrowed, or with
    # KNNWB_GPU_NARROW=0 not), or each runs on every GPU (--devices 0,..,G-1)
    local narrow=1 devices=(); [ "$way" = share0 ] && narrow=0
    [ "$way" = every ] && devices=(--devices "$(seq -s, 0 $((gpus - 1)))")
    G_MESSAGES_DEBUG=all timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none -np $ranks \
      -x G_MESSAGES_DEBUG -x KNNWB_GPU_NARROW=$narrow "$k" knn "$f" -k $kk -m $metric -b $backend \
      "${devices[@]}" -o $d/g.npy >$out/one.log 2>&1 ;;
  *) # ranks|split: one GPU per rank where there are enough, else all on GPU 0
    local input=whole; [ "$way" = split ] && input=split
    # (every rank's debug lines in runs.log: what one rank waits for is often another's step)
    KNNWB_MPI_VERBOSE=1 G_MESSAGES_DEBUG=all timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none -np $ranks \
      bash -c 'g=$OMPI_COMM_WORLD_LOCAL_RANK; [ "$g" -lt '"$gpus"' ] || g=0; CUDA_VISIBLE_DEVICES=$g exec "$@"' rank \
      "$k" knn "$f" -k $kk -m $metric -b $backend --mpi-input $input -o $d/g.npy >$out/one.log 2>&1 ;;
  esac
  r=$?; t1=$(date +%s.%N)
  [ -z "$sampler" ] || { touch $d/pss.stop; wait $sampler; }
  echo "== $name rc=$r" >>"$log"; cat $out/one.log >>"$log"
  printf '%-40s rc=%d %7.2f s  %s\n' "$name" $r "$(awk -v a=$t0 -v b=$t1 'BEGIN{print b-a}')" \
    "$(sha256sum $d/g.npy 2>/dev/null | cut -c1-16)"
  # knnwb's own summary (rank 0's under mpirun): read, knn step, write
  grep -m1 -oE "\(read [0-9.]+ s, knn .*" $out/one.log | sed 's/^/    /'
  grep -oE "partition: [0-9]+ (clusters \(|groups,).*|partition: bounds (of|on) .*|partition: (done|not used) in [0-9.]+ s|combined in .*|whole call [0-9.]+ s$" \
    $out/one.log | grep -v "whole call 0\." | head -6 | cut -c1-200 | sed 's/^/    /'
  [ -z "$sampler" ] || echo "    peak Pss (anonymous/file/shared) in MiB per process: $(cat $d/pss.txt)"
}
[ -n "${NO_CPU:-}" ] || [ ! -s $d/c2M$sfx.npy ] || run "cpu 2M, 1 process" all $d/c2M$sfx.npy cpu euclidean 30
# NAME FILE METRIC K [TRACE]: every way of the GPU runs, in turn; with BEFORE, each way again
# with the other build
ways() {
  local now=$k
  waysof "$@"
  [ -z "$kb" ] && return
  k=$kb
  waysof "$1 (before)" "${@:2}"
  k=$now
}
waysof() {
  local name=$1 f=$2 metric=$3 kk=$4
  KNNWB_CUDA_TRACE=${5:-0} run "$name, 1 GPU" 1 $f cuda $metric $kk
  [ "$gpus" -gt 1 ] && [ -n "${DEVICES0:-}" ] && run "$name, --devices 0" dev0 $f cuda $metric $kk
  [ "$gpus" -gt 1 ] && run "$name, $gpus GPUs, 1 process" all $f cuda $metric $kk
  run "$name, $ranks ranks" ranks $f cuda $metric $kk
  [ -n "${SPLIT:-}" ] && run "$name, $ranks ranks, split" split $f cuda $metric $kk
  if [ -n "${SHARE:-}" ]; then
    run "$name, $ranks ranks, share" share $f cuda $metric $kk
    run "$name, $ranks ranks, share not narrowed" share0 $f cuda $metric $kk
    run "$name, $ranks ranks, each on every GPU" every $f cuda $metric $kk
  fi
}
[ -z "${2:-}" ] || LD_LIBRARY_PATH=$b:$ld "$k" metafeatures "$2" --ops all -o $d/real.npy || exit 1
for ((round = 1; round <= ${ROUNDS:-1}; round++)); do
  for n in "${sizes[@]}"; do
    ways "cuda $n" $d/c$n$sfx.npy euclidean 30 $([ $n = 10M ] && [ $round = 1 ] && echo 1 || echo 0)
  done
  [ -z "${2:-}" ] || ways "real-like" $d/real.npy pearson 20
done
echo "total ${SECONDS} s"
