#!/bin/sh
# The knn command on the GPUs as a user runs it: its lists equal the CPU backend's byte for byte
# with the GPUs given back while the lists are written (the default), with them left to the exit
# (KNNWB_GPU_RELEASE=0) and on GPU 0 alone (--devices 0: only its context is given back); the
# cluster command's table and GML equal the CPU's; every run exits 0 and leaves nothing but its
# output; a run with -q writes nothing to standard error, on rows enough for several columns of
# tiles (whose diagonal tiles one GPU takes a column ahead). Skips (77) where no GPU is usable or CUDA was not built.
# Usage: test_knn_gpu_command.sh KNNWB
set -eu
knnwb=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/knnwb-gpu-command-XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
# 3,001 rows of 17 columns from awk's generator with a fixed seed
awk 'BEGIN { srand(7); h = "id"; for (j = 0; j < 17; j++) h = h "\ts" j; print h;
             for (i = 0; i < 3001; i++) { line = "r" i;
               for (j = 0; j < 17; j++) line = line "\t" sprintf("%.6f", rand() * 2 - 1);
               print line } }' >"$work/x.tsv"
mkdir "$work/out"
status=0
"$knnwb" knn "$work/x.tsv" -k 9 --backend cuda -q -o "$work/out/gpu.knn" 2>"$work/err" || status=$?
if [ "$status" != 0 ]; then
  # no GPU, or no CUDA in the build; a GPU without cuBLAS is a failure
  if grep -q -e "no CUDA device is visible" -e "built without CUDA" "$work/err"; then
    echo "SKIP: $(cat "$work/err")"
    exit 77
  fi
  cat "$work/err"; echo "FAIL: the GPU run exited $status"; exit 1
fi
[ ! -s "$work/err" ] || { cat "$work/err"; echo "FAIL: a -q run wrote to standard error"; exit 1; }
"$knnwb" knn "$work/x.tsv" -k 9 --backend cpu -q -o "$work/out/cpu.knn"
awk 'BEGIN { srand(11); h = "id"; for (j = 0; j < 17; j++) h = h "\ts" j; print h;
             for (i = 0; i < 40001; i++) { line = "r" i;
               for (j = 0; j < 17; j++) line = line "\t" sprintf("%.5f", rand());
               print line } }' >"$work/big.tsv"
"$knnwb" knn "$work/big.tsv" -k 5 --backend cuda -q -o "$work/out/big.knn" 2>"$work/err"
[ ! -s "$work/err" ] || { cat "$work/err"; echo "FAIL: a -q run wrote to standard error"; exit 1; }
KNNWB_GPU_RELEASE=0 "$knnwb" knn "$work/x.tsv" -k 9 --backend cuda -q -o "$work/out/kept.knn"
"$knnwb" knn "$work/x.tsv" -k 9 --backend cuda --devices 0 -q -o "$work/out/one.knn"
for run in gpu kept one; do
  cmp -s "$work/out/cpu.knn" "$work/out/$run.knn" ||
    { echo "FAIL: the $run run's lists differ from the CPU's"; exit 1; }
done
# cluster gives its GPUs back after its searches too, while its outputs are written
for backend in cpu cuda; do
  "$knnwb" cluster "$work/x.tsv" --method mst-knn --backend $backend -q \
    -o "$work/out/$backend.tsv" --gml "$work/out/$backend.gml"
done
for ext in tsv gml; do
  cmp -s "$work/out/cpu.$ext" "$work/out/cuda.$ext" ||
    { echo "FAIL: cluster's $ext on the GPU differs from the CPU's"; exit 1; }
done
left=$(ls -A "$work/out" | grep -v -x -e cpu.knn -e gpu.knn -e kept.knn -e one.knn \
  -e big.knn -e cpu.tsv -e cuda.tsv -e cpu.summary.tsv -e cuda.summary.tsv -e cpu.gml -e cuda.gml || true)
[ -z "$left" ] || { echo "FAIL: left beside the outputs: $left"; exit 1; }
echo "ok: the GPU runs' lists and clusters equal the CPU's"
