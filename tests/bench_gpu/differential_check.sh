#!/usr/bin/env bash
# CPU = GPU bytes on hostile shapes and values (the release's differential check, one GPU): random
# matrices with odd sizes (1 to 20,011 rows, 1 to 301 columns), every metric, k from 1 to rows - 1,
# every GPU screening precision, small --gpu-memory budgets (streamed rows, small tiles), and rows
# that break arithmetic: exact duplicates, near-ties 1e-4 apart, constant and zero rows (with
# --drop-degenerate), NaN rows (with --drop-missing), components 1e-30 beside 1e30, values near the
# float32 limit. Each case runs `knnwb knn` with --backend cpu and --backend cuda and compares the
# .npy lists (indices and distances) byte for byte and the exit status and first message line when
# the input is refused (a GPU refusing a --gpu-memory too small for the input is counted apart). Prints one line per case and a summary; exit 1 on any difference.
# Usage (repository root, after `. .gpu/env.sh`): bash tests/bench_gpu/differential_check.sh OUT KNNWB [CASES]
set -uo pipefail
out=$1; knnwb=$2; cases=${3:-120}; mkdir -p "$out/d"
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
$py - "$out/d" "$cases" <<'PY'
import sys, numpy as np
d, cases = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(20261123)
metrics = ["pearson", "abs-pearson", "spearman", "euclidean", "manhattan", "cosine"]
screens = ["auto", "fp32", "tf32", "fp16"]
sizes = [1, 2, 3, 5, 17, 128, 129, 1001, 4097, 8193, 20011]
with open(d + "/cases.txt", "w") as f:
    for c in range(cases):
        n = int(rng.choice(sizes[1:] if c % 7 else sizes))
        dim = int(rng.choice([1, 2, 3, 8, 17, 64, 127, 295, 301]))
        kind = rng.integers(0, 8)
        x = rng.standard_normal((n, dim)).astype(np.float32)
        flags = []
        if kind == 1 and n > 4:   # duplicates and near-ties
            x[rng.integers(0, n, n // 4)] = x[0]
            x[1::3] = x[0] + np.float32(1e-4) * rng.integers(-2, 3, (len(x[1::3]), 1)).astype(np.float32)
        elif kind == 2 and n > 4:  # constant and zero rows
            x[rng.integers(0, n, max(1, n // 10))] = 3.0
            x[2] = 0.0
            flags.append("--drop-degenerate")
        elif kind == 3 and n > 4:  # NaN rows
            x[rng.integers(0, n, max(1, n // 20)), 0] = np.nan
            flags.append("--drop-missing")
        elif kind == 4:            # tiny beside huge components
            x *= np.where(rng.random((n, dim)) < 0.5, np.float32(1e-30), np.float32(1e30)).astype(np.float32)
        elif kind == 5:            # near the float32 limit
            x = np.clip(x * np.float32(3e37), -3.4e38, 3.4e38).astype(np.float32)
        elif kind == 6:            # clustered: many rows close together
            x = (rng.standard_normal((8, dim))[rng.integers(0, 8, n)] + 1e-3 * x).astype(np.float32)
        k = max(1, min(n - 1, int(rng.choice([1, 2, 5, 20, n - 1, 257]))))
        m = metrics[c % len(metrics)]
        if m in ("pearson", "abs-pearson", "spearman") and dim < 2:
            x = np.hstack([x, rng.standard_normal((n, 2)).astype(np.float32)])
        s = screens[(c // len(metrics)) % len(screens)]
        mem = rng.choice(["-", "-", "128M", "256M"])
        np.save("%s/c%03d.npy" % (d, c), x)
        f.write("%03d %d %d %d %s %s %s %s\n" % (c, n, x.shape[1], k, m, s, mem, ",".join(flags) or "-"))
PY
same=0 diff=0 refused=0 budget=0
while read -r c n dim k m s mem flags; do
  args=(knn "$out/d/c$c.npy" -k "$k" -m "$m" --quiet)
  [ "$flags" != - ] && args+=(${flags//,/ })
  cpu_args=() gpu_args=()
  [ "$mem" != - ] && gpu_args=(--gpu-memory "$mem")
  timeout 120 "$knnwb" "${args[@]}" --backend cpu "${cpu_args[@]}" -o "$out/d/cpu.npy" 2>"$out/d/cpu.err"; rc_c=$?
  gpu_screen=(--screen "$s"); [ "$m" = manhattan ] && [ "$s" != auto ] && [ "$s" != fp32 ] && gpu_screen=()
  # GPU_BACKEND=cpu: a dry run of the script itself where no GPU exists
  [ "${GPU_BACKEND:-cuda}" = cpu ] && gpu_screen=() gpu_args=()
  timeout 120 "$knnwb" "${args[@]}" --backend "${GPU_BACKEND:-cuda}" "${gpu_screen[@]}" "${gpu_args[@]}" -o "$out/d/gpu.npy" 2>"$out/d/gpu.err"; rc_g=$?
  line="case $c: ${n}x$dim k=$k $m screen=$s gpu-memory=$mem flags=$flags rc cpu=$rc_c gpu=$rc_g"
  if [ $rc_c = 0 ] && [ $rc_g = 0 ]; then
    if cmp -s "$out/d/cpu.npy" "$out/d/gpu.npy"; then same=$((same + 1)); echo "$line same"
    else diff=$((diff + 1)); echo "$line DIFFERENT"; cp "$out/d/c$c.npy" "$out/diff_c$c.npy" 2>/dev/null; fi
  elif [ $rc_c = 0 ] && [ "$mem" != - ] && grep -q "out of GPU memory" "$out/d/gpu.err"; then
    budget=$((budget + 1)); echo "$line GPU budget too small: $(head -c 200 "$out/d/gpu.err" | head -1)"
  elif [ $rc_c = $rc_g ] && [ $rc_c != 0 ]; then
    refused=$((refused + 1)); echo "$line refused by both: $(head -c 150 "$out/d/cpu.err" | head -1)"
  else
    diff=$((diff + 1)); echo "$line EXIT DIFFERS: cpu: $(head -c 150 "$out/d/cpu.err" | head -1) | gpu: $(head -c 150 "$out/d/gpu.err" | head -1)"
  fi
  rm -f "$out/d/cpu.npy" "$out/d/gpu.npy" "$out/d/c$c.npy"
done <"$out/d/cases.txt"
rm -rf "$out/d"
echo "differential: $same same, $refused refused alike, $budget refused by the GPU for its --gpu-memory, $diff different"
[ $diff = 0 ]
