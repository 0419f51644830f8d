#!/usr/bin/env bash
# The sampled float64 oracle of large runs (tests/bench_gpu/sample_oracle.py) passes knnwb's lists
# and fails lists with two neighbours swapped or a distance off (two float steps, 1e-12 for 1 - r), for euclidean
# and pearson, with the input read in several chunks (ORACLE_CHUNK), rows copied and tied, and
# euclidean rows far from the origin (a common offset, as raw intensities have).
# Usage: check_sample_oracle.sh KNNWB PYTHON3 SOURCE_DIR
set -euo pipefail
knnwb=$1 py=$2 src=$3
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
oracle="$src/tests/bench_gpu/sample_oracle.py"
"$py" - "$dir/x.npy" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(5)
x = rng.normal(0, 1, (3001, 9)).astype(np.float32)
x[100] = x[7]; x[2000] = x[7]            # copies: ties at distance 0
x[300:340] = np.round(x[300:340] * 2)    # few distinct values: tied distances
np.save(sys.argv[1], x)
np.save(sys.argv[1][:-4] + "-offset.npy", (x * 0.01 + 1e4).astype(np.float32))  # raw intensities
PY
for case in x:euclidean x:pearson x-offset:euclidean; do
  input="$dir/${case%%:*}.npy" metric=${case#*:}
  "$knnwb" knn "$input" -k 7 -m "$metric" -b cpu -q -o "$dir/g.npy"
  ORACLE_CHUNK=700 "$py" "$oracle" "$input" "$dir/g.npy" 7 "$metric" 600
  "$py" - "$dir" "$metric" <<'PY'
import sys
import numpy as np
d = sys.argv[1]
i, s = np.load(d + "/g.npy"), np.load(d + "/g.distances.npy")
swapped = i.copy(); swapped[:, [2, 5]] = swapped[:, [5, 2]]
np.save(d + "/swapped.npy", swapped); np.save(d + "/swapped.distances.npy", s)
off = s.copy()
if sys.argv[2] == "euclidean":  # two float steps; pearson's 1 - r has the oracle's slack
    off[:, 3] = np.nextafter(np.nextafter(off[:, 3], np.inf), np.inf)
else:
    off[:, 3] += 1e-12
np.save(d + "/off.npy", i); np.save(d + "/off.distances.npy", off)
PY
  for bad in swapped off; do
    if ORACLE_CHUNK=700 "$py" "$oracle" "$input" "$dir/$bad.npy" 7 "$metric" 600 >"$dir/out" 2>&1; then
      echo "$metric: lists with $bad entries passed the oracle:"; cat "$dir/out"; exit 1
    fi
    grep -q "differ" "$dir/out" || { cat "$dir/out"; exit 1; }
  done
done
echo "sample oracle: passes knnwb's lists, refuses swapped neighbours and distances off"
