#!/usr/bin/env bash
# Where the tile loop's GPU time goes, kernel by kernel, over a whole run ("keep the
# selection below the GEMM time"): the 1,533,876 x 295 Pearson k = 20 select (no library around it)
# under Nsight Systems, then every kernel's duration summed by class (score GEMM, half filter,
# merges, diagonal-tile stages, the rest), the time some kernel runs (their union), the time two
# classes run at once, and the gaps when none runs. Falls back to ncu on every 500th launch of the
# filter, merge and GEMM kernels where nsys is missing.
# Usage (repository root, after `. .gpu/env.sh`): bash tests/bench_gpu/loop_timeline.sh OUT BUILD [N]
set -uo pipefail
out=$1; b=$2; n=${3:-1533876}; mkdir -p "$out"
SECONDS=0
{ cmake -S . -B "$b" -DKNNWB_CUDA=ON -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release &&
  cmake --build "$b" -j"$(nproc)" --target bench_knn_gpu; } >"$out/build.log" 2>&1 ||
  { tail -30 "$out/build.log"; exit 1; }
bench=$b/tests/bench_gpu/bench_knn_gpu
export CUDA_VISIBLE_DEVICES=0
nsys=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
if [ -n "$nsys" ]; then
  echo "nsys: $nsys"
  KNNWB_CUDA_TRACE=1 timeout 200 "$nsys" profile -t cuda -s none --cpuctxsw=none -o "$out/loop" -f true \
    "$bench" --n "$n" --no-lib --no-floor >"$out/run.log" 2>&1; echo "nsys rc=$?"
  grep -E "selection kernels|tile loop on|select \(" "$out/run.log" | cut -c1-300
  timeout 200 "$nsys" stats -q -r cuda_gpu_trace -f csv -o "$out/trace" "$out/loop.nsys-rep" >/dev/null 2>&1
  rm -f "$out/loop.nsys-rep" "$out/loop.sqlite"
  csv=$(ls "$out"/trace*.csv | head -1)
  python3 - "$csv" <<'PY'
import csv, sys, re
rows = list(csv.DictReader(open(sys.argv[1])))
def cls(name):
    if re.search(r'nvjet|gemm|Kernel2|cutlass', name, re.I): return 'GEMM'
    if 'filter' in name: return 'filter'
    if 'merge' in name: return 'merge'
    return 'other'
ev = []
for r in rows:
    name = r.get('Name', '')
    if not name or r.get('Start (ns)') in (None, ''): continue
    if any(s in name for s in ('[CUDA memcpy', '[CUDA memset')): c = 'copy'
    else: c = cls(name)
    s = int(r['Start (ns)']); d = int(r['Duration (ns)'])
    ev.append((s, s + d, c, name))
ev.sort()
tot = {}
for s, e, c, _ in ev: tot[c] = tot.get(c, 0) + (e - s)
kern = [x for x in ev if x[2] != 'copy']
# the loop: from the first GEMM to the last filter/merge
g = [x for x in kern if x[2] == 'GEMM']
t0, t1 = g[0][0], max(x[1] for x in kern)
print("span of the kernels from the first GEMM: %.3f s" % ((t1 - t0) / 1e9))
for c in sorted(tot): print("  %-6s %8.3f s total, %d launches" % (c, tot[c] / 1e9, sum(1 for x in ev if x[2] == c)))
# union of busy time, and time with GEMM and selection at once
pts = []
for s, e, c, _ in kern:
    if e <= t0: continue
    s = max(s, t0)
    k = 'G' if c == 'GEMM' else 'S'
    pts.append((s, 1, k)); pts.append((e, -1, k))
pts.sort()
busy = both = 0; cnt = {'G': 0, 'S': 0}; last = t0
for t, d, k in pts:
    if cnt['G'] + cnt['S'] > 0: busy += t - last
    if cnt['G'] > 0 and cnt['S'] > 0: both += t - last
    cnt[k] += d; last = t
print("some kernel running %.3f s, GEMM and selection at once %.3f s, no kernel %.3f s" %
      (busy / 1e9, both / 1e9, (t1 - t0 - busy) / 1e9))
names = {}
for s, e, c, nm in kern:
    key = re.sub(r'\(.*', '', nm)[:70]
    a = names.setdefault(key, [0, 0]); a[0] += e - s; a[1] += 1
for k, (t, m) in sorted(names.items(), key=lambda x: -x[1][0])[:12]:
    print("  %8.3f s %7d x %.1f us  %s" % (t / 1e9, m, t / m / 1e3, k))
PY
else
  # no nsys: ncu (each kernel alone) on 3 consecutive launches of the GEMM, filter and merge kernels
  # at points spread over the loop; the trace line gives the loop's tile count and time
  echo "no nsys: ncu at points spread over the loop"
  KNNWB_CUDA_TRACE=1 timeout 100 "$bench" --n "$n" --no-lib --no-floor >"$out/run.log" 2>&1
  grep -E "selection kernels|tile loop on|select \(" "$out/run.log" | cut -c1-300
  : >"$out/ncu.txt"
  for skip in 60 600 3000 9000 18000 27000 36000 45000 51000; do
    timeout 100 ncu --clock-control none -k regex:'filter_half_kernel|merge|nvjet|gemm' --launch-skip $skip \
      --launch-count 6 --metrics gpu__time_duration.sum "$bench" --n "$n" --no-lib --no-floor 2>&1 |
      grep -E "^  [a-zA-Z_].*\(|gpu__time_duration" | awk -v s=$skip '{$1=$1; print s, $0}' >>"$out/ncu.txt"
  done
  python3 - "$out/ncu.txt" <<'PY'
import sys, re
lines = [l.rstrip() for l in open(sys.argv[1])]
cur = None; by = {}
for l in lines:
    skip, rest = l.split(' ', 1)
    if 'gpu__time_duration' in rest:
        t = float(rest.split()[-1]); unit = rest.split()[-2]
        t = t / 1000 if unit == 'ns' else t * 1000 if unit == 'ms' else t
        by.setdefault(skip, []).append((cur, t))
    else:
        m = re.search(r'(nvjet\w*|\w*gemm\w*|filter_half_kernel|merge_warp_kernel|merge_kernel)', rest)
        cur = m.group(1) if m else rest[:40]
for skip in sorted(by, key=int):
    print("launch %6s: %s" % (skip, ", ".join("%s %.1f us" % (k[:24], t) for k, t in by[skip])))
PY
fi
echo "total ${SECONDS} s"
