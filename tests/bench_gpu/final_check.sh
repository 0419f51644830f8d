#!/usr/bin/env bash
# The release check on a 2-GPU machine (nvidia-h200-x2), one call on the merged tree: a CUDA + MPI
# build, the whole ctest suite with the GPU, every metric's lists on finite values near the float32
# limit (CPU = GPU bytes), `knnwb knn` on 2 MPI ranks x 1 GPU in both input modes (= one process),
# and the three benchmark digests: 1,533,876 x 295 k = 20 on 1 and 2 GPUs (78f71267a78e9b94) and
# 384,126 x 295 k = 4096 on 1 GPU (864399a883b175a0 before the rows' statistics changed: not
# measured since).
# On a 1-GPU machine both MPI ranks share the GPU and the 2-GPU run is left out.
# Usage (repository root, after `. .gpu/env.sh`): bash tests/bench_gpu/final_check.sh OUTDIR
set -uo pipefail
out=$1; b=/tmp/knnwb-final; mkdir -p "$out"
for d in /usr/local/mpi/bin /opt/hpcx/ompi/bin; do [ -x "$d/mpicc" ] && ! command -v mpicc >/dev/null && export PATH=$d:$PATH; done
SECONDS=0
{ cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_MPI=ON -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
  && cmake --build $b -j"$(nproc)"; } >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
echo "build ${SECONDS} s"; nvidia-smi --query-gpu=name --format=csv,noheader
ngpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l); export KNNWB_NGPU=$ngpu
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SECONDS=0
(cd $b && timeout 240 ctest -j8 --timeout 200 >"$out/ctest.log" 2>&1); echo "ctest rc=$? ${SECONDS} s"
grep -E "tests passed|\(Failed\)|\(Timeout\)|Not Run|\*\*\*" "$out/ctest.log" | head -20
k=$b/bin/knnwb
export LD_LIBRARY_PATH=$b:${LD_LIBRARY_PATH:-}
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
# Manhattan (and every metric) on finite values near the float32 limit: CPU = GPU bytes
$py - "$out" <<'PY'
import sys, numpy as np
r = np.random.default_rng(7); x = (r.standard_normal((3001, 37)) * 3e37).astype(np.float32)
x = np.clip(x, -3.4e38, 3.4e38); x[5] = x[9]; x[100, :] = 3.4e38; x[101, :] = -3.4e38
np.save(sys.argv[1] + "/extreme.npy", x)
PY
for m in manhattan euclidean pearson cosine; do
  $k knn "$out/extreme.npy" -k 10 -m $m --backend cpu -o "$out/e_cpu.knn" --quiet 2>"$out/e_cpu.err"; a=$?
  $k knn "$out/extreme.npy" -k 10 -m $m --backend cuda -o "$out/e_gpu.knn" --quiet 2>"$out/e_gpu.err"; g=$?
  cmp -s "$out/e_cpu.knn" "$out/e_gpu.knn" && s=same || s=DIFFERENT
  echo "extreme $m: cpu rc=$a gpu rc=$g lists $s $(head -c 200 $out/e_gpu.err)"
done
# MPI: split mode on 2 ranks x 1 GPU (never run on a GPU before) and whole mode, against one process
mpi() { timeout 120 mpirun --allow-run-as-root --bind-to none --mca btl self,vader -np 2 \
  bash -c 'export CUDA_VISIBLE_DEVICES=$((OMPI_COMM_WORLD_LOCAL_RANK % KNNWB_NGPU)); exec "$@"' _ "$@"; }
$py -c "
import numpy as np; r=np.random.default_rng(3); np.save('$out/m.npy', r.standard_normal((30011,40)).astype(np.float32))"
for m in pearson euclidean manhattan; do
  $k knn "$out/m.npy" -k 15 -m $m --backend cuda -o "$out/m1.knn" --quiet
  for mode in split whole; do
    mpi $k knn "$out/m.npy" -k 15 -m $m --backend cuda --mpi-input $mode -o "$out/m2.knn" --quiet >"$out/mpi_${m}_${mode}.log" 2>&1
    r=$?; cmp -s "$out/m1.knn" "$out/m2.knn" && s=same || s=DIFFERENT
    echo "mpi 2x1 GPU $m $mode: rc=$r lists $s"; [ $r = 0 ] || tail -3 "$out/mpi_${m}_${mode}.log"
  done
done
rm -f "$out"/*.npy "$out"/*.knn
bench=$b/tests/bench_gpu/bench_knn_gpu
export KNNWB_CUDA_TRACE=0
CUDA_VISIBLE_DEVICES=0 timeout 120 $bench --n 1533876 --no-select --no-floor >"$out/b1.log" 2>&1
grep "library (\|digest\|^| [0-9]" "$out/b1.log"
if [ "$ngpu" -ge 2 ]; then
  timeout 120 $bench --n 1533876 --no-select --no-floor >"$out/b2.log" 2>&1
  grep "library (\|digest\|^| [0-9]" "$out/b2.log"
fi
CUDA_VISIBLE_DEVICES=0 timeout 150 $bench --n 384126 --k 4096 --no-select --no-floor >"$out/bk.log" 2>&1
grep "library (\|digest\|^| [0-9]" "$out/bk.log"
# Rows with a common offset (cosine and euclidean: every pair's score near the same value, the
# case where the CPU's BF16 screen needed far more candidates than FP32):
# --screen auto (FP16 on the GPU) against --screen fp32, time and bytes.
$py -c "
import numpy as np; r=np.random.default_rng(5); x=5+r.standard_normal((200003,128)); np.save('$out/o.npy', x.astype(np.float32))"
for m in cosine euclidean; do
  for s in auto fp32; do
    t0=$(date +%s.%N)
    $k knn "$out/o.npy" -k 20 -m $m --backend cuda --screen $s -o "$out/o_$s.knn" --quiet 2>"$out/o_$s.err"
    r=$?; t1=$(date +%s.%N)
    echo "offset rows $m --screen $s: rc=$r $(awk -v a=$t0 -v b=$t1 'BEGIN{printf "%.2f", b - a}') s $(tail -1 $out/o_$s.err | cut -c1-150)"
  done
  cmp -s "$out/o_auto.knn" "$out/o_fp32.knn" && echo "offset rows $m: auto = fp32 bytes" || echo "offset rows $m: DIFFERENT"
done
# 1,000,000 x 64 rows in 50 Gaussian clusters (on the CPU, BF16's window re-selected most
# such rows): GPU --screen auto (FP16) against fp32, the re-selected rows, time and bytes
$py tests/bench/make_clusters_table.py "$out/mix.npy" 1000000 64
for s in auto fp32; do
  t0=$(date +%s.%N)
  G_MESSAGES_DEBUG=all $k knn "$out/mix.npy" -k 20 --backend cuda --screen $s -o "$out/mix_$s.knn" --quiet \
    >"$out/mix_$s.err" 2>&1
  r=$?; t1=$(date +%s.%N)
  echo "clusters 1e6 x 64 --screen $s: rc=$r $(awk -v a=$t0 -v b=$t1 'BEGIN{printf "%.2f", b - a}') s;" \
    "$(grep -o "screen [a-z0-9]*, [0-9]* candidates per row, [0-9]* row(s) re-selected[^;]*" "$out/mix_$s.err" | head -1)"
done
cmp -s "$out/mix_auto.knn" "$out/mix_fp32.knn" && echo "clusters: auto = fp32 bytes" || echo "clusters: DIFFERENT"
# dense ties (20,011 x 2 rows: every abs-pearson distance is 0 up to rounding; before core's
# exhaustive rows the GPU run had not finished in 120 s): CPU against GPU, time and bytes
$py -c "
import numpy as np; r=np.random.default_rng(1); x=r.standard_normal((20011,2)).astype(np.float32)
x[r.integers(0,20011,2001)]=3.0; x[2]=0; np.save('$out/ties.npy', x)"
for b in cpu cuda; do
  t0=$(date +%s.%N)
  G_MESSAGES_DEBUG=all timeout 120 $k knn "$out/ties.npy" -k 1 -m abs-pearson --drop-degenerate --backend $b \
    -o "$out/ties_$b.knn" >"$out/ties_$b.err" 2>&1
  r=$?; t1=$(date +%s.%N)
  echo "dense ties 20011 x 2 --backend $b: rc=$r $(awk -v a=$t0 -v b=$t1 'BEGIN{printf "%.2f", b - a}') s;" \
    "$(grep -o "re-selected in all.*" "$out/ties_$b.err" | head -1)"
done
cmp -s "$out/ties_cpu.knn" "$out/ties_cuda.knn" && echo "dense ties: cpu = cuda bytes" || echo "dense ties: DIFFERENT"
# the fused tile (wgmma) on the merged tree, beside the default
KNNWB_CUDA_FUSED=1 KNNWB_CUDA_TRACE=1 CUDA_VISIBLE_DEVICES=0 timeout 120 $bench --n 1533876 --no-select --no-floor >"$out/bf.log" 2>&1
grep "library (\|of which" "$out/bf.log" | cut -c1-200
# streamed rows (--gpu-memory 4G: the copies that order against fused tiles), fused and not
for f in 1 0; do
  KNNWB_CUDA_FUSED=$f CUDA_VISIBLE_DEVICES=0 timeout 120 $bench --n 1533876 --gpu-memory 4G --no-select --no-floor \
    >"$out/bs.log" 2>&1
  echo "--gpu-memory 4G, fused=$f: $(grep "library (" "$out/bs.log" | cut -c1-200)"
done
rm -f "$out"/*.npy "$out"/*.knn
