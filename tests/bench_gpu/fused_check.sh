#!/usr/bin/env bash
# Issue 18: the fused tile (kernels/tile_fused.cu: FP16 GEMM and threshold filter in one kernel)
# against cuBLAS + the filter kernel (KNNWB_CUDA_FUSED=0), side by side in one call on one GPU:
# the CUDA tests against the CPU backend, the 1,533,876 x 295 benchmark in alternating runs (lists
# digest 78f71267a78e9b94 both ways, KNNWB_CUDA_TRACE=1 lines), the real-metafeature shape
# (d = 128), --gpu-memory 4G (streamed rows), memcheck, and ncu of the fused kernel beside the
# cuBLAS GEMM and filter of the same tiles.
# Usage (repository root, after `. .gpu/env.sh`): bash tests/bench_gpu/fused_check.sh OUT [BUILD] [full|quick|ncu|ab|wgmma]
# (quick: tests and the 1,533,876 x 295 runs; ncu: tests, one run, and ncu --set full of one fused launch;
# wgmma: tests, the wgmma kernel against cuBLAS + filter and mma.sync, memcheck and ncu of the wgmma kernel)
set -uo pipefail
out=$1; b=${2:-/tmp/knnwb-fused}; mode=${3:-full}; mkdir -p "$out"
SECONDS=0
{ cmake -S . -B "$b" -DKNNWB_CUDA=ON -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release &&
  cmake --build "$b" -j"$(nproc)" --target bench_knn_gpu test_cuda_knn test_cuda_select; } \
  >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
echo "build ${SECONDS} s"
bench=$b/tests/bench_gpu/bench_knn_gpu
export CUDA_VISIBLE_DEVICES=0
log=$out/runs.log; : >"$log"
sum() { grep -E "library \(|selection kernels|GEMM warm|candidates," "$1" | sed 's/^knnwb cuda //' | cut -c1-330; }
SECONDS=0
[ "$mode" = wgmma ] && only="-p /kernels/cuda-knn/fused-tiles" || only=""
if [ "$mode" != profile ]; then
  timeout 240 "$b/tests/kernels/test_cuda_knn" $only >"$out/tests.log" 2>&1; echo "test_cuda_knn $only rc=$? ${SECONDS} s"
  grep -E "^not ok|^ok|cpu .* cuda" "$out/tests.log" | head -20
  timeout 120 "$b/tests/kernels/test_cuda_select" >>"$out/tests.log" 2>&1; echo "test_cuda_select rc=$?"
fi
if [ "$mode" = profile ]; then
  # where the wgmma kernel's time goes: stall reasons, pipes and L2 beside cuBLAS's GEMM, and the
  # instructions the warps stall at (PC sampling, a -lineinfo build)
  { cmake -S . -B "$b-li" -DKNNWB_CUDA=ON -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CUDA_FLAGS=-lineinfo && cmake --build "$b-li" -j"$(nproc)" --target bench_knn_gpu; } \
    >>"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
  bl=$b-li/tests/bench_gpu/bench_knn_gpu
  m="regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,regex:sm__pipe_.*(gmma|tensor).*pct_of_peak_sustained_active,lts__t_sectors_op_read.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum"
  KNNWB_CUDA_FUSED=1 timeout 120 ncu --clock-control none -k regex:'fused_wgmma_kernel' --launch-skip 200 --launch-count 1 \
    --metrics "$m" "$bl" --n 200000 --no-lib --no-floor >"$out/ncu_metrics.txt" 2>&1
  KNNWB_CUDA_FUSED=0 timeout 120 ncu --clock-control none -k regex:'nvjet|gemm' --launch-skip 200 --launch-count 1 \
    --metrics "$m" "$bl" --n 200000 --no-lib --no-floor >>"$out/ncu_metrics.txt" 2>&1
  grep -vE "^==PROF|^ *$" "$out/ncu_metrics.txt" | grep -E "nvjet|gemm|fused|stalled|pipe|lts|duration|throughput|inst_exec" |
    awk '$NF+0 > 0.05 || /nvjet|gemm|fused/' | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | cut -c1-150
  KNNWB_CUDA_FUSED=1 timeout 200 ncu --clock-control none -k regex:'fused_wgmma_kernel' --launch-skip 200 --launch-count 1 \
    --section SourceCounters --section WarpStateStats --import-source yes -o "$out/src" -f "$bl" --n 200000 --no-lib \
    --no-floor >/dev/null 2>&1
  ncu -i "$out/src.ncu-rep" --page source --csv --print-source sass >"$out/src.csv" 2>&1
  rm -f "$out/src.ncu-rep"
  python3 - "$out/src.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr = next((i for i, r in enumerate(rows) if any('Sampling' in c for c in r)), None)
if hdr is None:
    print("no sampling columns:", rows[:3]); sys.exit(0)
h = rows[hdr]
col = next(i for i, c in enumerate(h) if c.startswith('Warp Stall Sampling (All'))
src = next((i for i, c in enumerate(h) if c == 'Source'), 1)
body = [r for r in rows[hdr + 1:] if len(r) > col]
def val(r):
    try: return float(r[col].replace(',', ''))
    except ValueError: return 0.0
total = sum(val(r) for r in body) or 1
print("samples", total, "columns:", [c for c in h if 'stall' in c.lower()][:20])
for r in sorted(body, key=val, reverse=True)[:45]:
    print("%5.1f%%  %s" % (100 * val(r) / total, r[src][:110]))
PY
  exit 0
fi
if [ "$mode" = wgmma ]; then
  # the wgmma kernel (tile_fused_wgmma.cu) against cuBLAS + filter and the mma.sync kernel
  sass=$(find "$b" -name 'tile_fused_wgmma.cu.o' | head -1)
  cuobjdump -sass "$sass" >"$out/sass.txt" 2>&1
  echo "SASS of the wgmma kernels (instructions of the DOT kernel by opcode):"
  awk '/Function :.*ILi0E/{on=1} /Function :.*ILi1E/{on=0} on && /^ +\/\*[0-9a-f]+\*\//{print $2}' "$out/sass.txt" |
    sed 's/\..*//; s/;//' | sort | uniq -c | sort -rn | head -25 | tr '\n' ' '; echo
  for f in 1 0 1 0; do
    [ $f = sync ] && env="KNNWB_CUDA_FUSED=1 KNNWB_CUDA_FUSED_MMA=sync" || env="KNNWB_CUDA_FUSED=$f"
    env $env KNNWB_CUDA_TRACE=1 timeout 100 "$bench" --n 1533876 --no-select --no-floor >"$out/one.log" 2>&1
    echo "== 1533876 x 295, fused=$f"; sum "$out/one.log"; cat "$out/one.log" >>"$log"
  done
  for f in 1 0; do
    KNNWB_CUDA_FUSED=$f KNNWB_CUDA_TRACE=2 timeout 100 "$bench" --n 1533876 --d 128 --no-select --no-floor >"$out/one.log" 2>&1
    echo "== 1533876 x 128, fused=$f (trace 2: counters)"; sum "$out/one.log"; cat "$out/one.log" >>"$log"
  done
  KNNWB_CUDA_FUSED=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$bench" --n 20000 \
    --screen fp16 --no-floor >"$out/memcheck.log" 2>&1
  echo "memcheck (fp16, n = 20000, fused wgmma) rc=$?"; grep "ERROR SUMMARY\|digest" "$out/memcheck.log"
  KNNWB_CUDA_FUSED=1 timeout 150 ncu --clock-control none -k regex:'fused_wgmma_kernel' --launch-skip 200 \
    --launch-count 1 --set full "$bench" --n 200000 --no-lib --no-floor >"$out/ncu_full.txt" 2>&1
  echo "ncu rc=$?"
  grep -E "Duration|Throughput|Occupancy|Registers|Stall|Issue|Pipe|Warp Cycles|Eligible|Bank|Shared Memory Config|Block Limit" \
    "$out/ncu_full.txt" | head -50
  exit 0
fi
[ "$mode" = ncu ] || [ "$mode" = ab ] && runs="1 0" || runs="1 0 1 0"
for f in $runs; do
  KNNWB_CUDA_FUSED=$f KNNWB_CUDA_TRACE=1 timeout 100 "$bench" --n 1533876 --no-select --no-floor >"$out/one.log" 2>&1
  echo "== 1533876 x 295, fused=$f"; sum "$out/one.log"; cat "$out/one.log" >>"$log"
done
[ "$mode" = quick ] && exit 0
if [ "$mode" = ab ]; then
  # warps of 64 x 64 (4 a block) against 64 x 32 (8 a block, the default build above)
  { cmake -S . -B "$b-warp64" -DKNNWB_CUDA=ON -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CUDA_FLAGS=-DKNNWB_FUSED_WARP_N=64 && cmake --build "$b-warp64" -j"$(nproc)" --target bench_knn_gpu; } \
    >>"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
  for v in warp64 warp32 warp64; do
    [ $v = warp64 ] && bb=$b-warp64/tests/bench_gpu/bench_knn_gpu || bb=$bench
    KNNWB_CUDA_FUSED=1 KNNWB_CUDA_TRACE=1 timeout 100 "$bb" --n 1533876 --no-select --no-floor >"$out/one.log" 2>&1
    echo "== 1533876 x 295, fused, warps $v"; sum "$out/one.log"; cat "$out/one.log" >>"$log"
  done
  exit 0
fi
if [ "$mode" = ncu ]; then
  # one fused launch mid-loop, every section: where its time goes
  timeout 150 ncu --clock-control none -k regex:'fused_kernel' --launch-skip 200 --launch-count 1 --set full \
    "$bench" --n 200000 --no-lib --no-floor >"$out/ncu_full.txt" 2>&1
  echo "ncu rc=$?"
  grep -E "Duration|Throughput|Occupancy|Registers|Stall|Issue|Pipe|Warp Cycles|Eligible|Bank|L2 Hit|L1/TEX Hit|Executed Ipc" \
    "$out/ncu_full.txt" | head -60
  exit 0
fi
for f in 1 0; do
  KNNWB_CUDA_FUSED=$f KNNWB_CUDA_TRACE=2 timeout 100 "$bench" --n 1533876 --d 128 --no-select --no-floor >"$out/one.log" 2>&1
  echo "== 1533876 x 128, fused=$f (trace 2: counters)"; sum "$out/one.log"; cat "$out/one.log" >>"$log"
done
KNNWB_CUDA_TRACE=1 timeout 100 "$bench" --n 1533876 --gpu-memory 4G --no-select --no-floor >"$out/one.log" 2>&1
echo "== 1533876 x 295, --gpu-memory 4G, fused"; sum "$out/one.log"; cat "$out/one.log" >>"$log"
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$bench" --n 20000 --screen fp16 --no-floor \
  >"$out/memcheck.log" 2>&1
echo "memcheck (fp16, n = 20000, fused) rc=$?"; grep "ERROR SUMMARY\|digest" "$out/memcheck.log"
sections="--section SpeedOfLight --section Occupancy --section LaunchStats"
timeout 120 ncu --clock-control none -k regex:'fused_kernel' --launch-skip 300 --launch-count 3 $sections \
  "$bench" --n 384126 --no-lib --no-floor >"$out/ncu.txt" 2>&1
echo "ncu fused rc=$?"
KNNWB_CUDA_FUSED=0 timeout 120 ncu --clock-control none -k regex:'nvjet|gemm|filter_half_kernel|merge_kernel' \
  --launch-skip 900 --launch-count 6 $sections "$bench" --n 384126 --no-lib --no-floor >>"$out/ncu.txt" 2>&1
echo "ncu cublas + filter rc=$?"
grep -E "fused_kernel|filter_half|merge_kernel|nvjet|gemm|^ +(Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Compute \(SM\) Throughput)" \
  "$out/ncu.txt" | grep -v "==PROF==" | sed 's/(SelectState, TileGeom.*Context 1, //' | head -60
