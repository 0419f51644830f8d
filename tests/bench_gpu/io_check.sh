#!/usr/bin/env bash
# The input and output phases of `knnwb knn X.npy -k K -o g.npy` on the GPU machine, timed apart
# from the search by tests/bench/bench_io (a CMake target of the build): the float32 NPY read as
# the command reads it (threads, NaN check) for 10,000,000 x 50 (2 GB) and 1,533,876 x 128
# (785 MB) from the page cache, the float64 one of 1,533,876 x 128 (1.57 GB, converted on the same
# threads), and the .npy lists written as the command writes them (temporary,
# fsync, rename) for 10M x 30 and 1,533,876 x 20, each beside its floors (one pread; one write(2)
# and one fsync per file), the writes also on one thread. About a minute on the GPU machine; needs
# 10 GB of disk under $TMPDIR (default /tmp).
# Usage (repository root, after `cmake -S . -B build -DKNNWB_CUDA=ON`): tests/bench_gpu/io_check.sh OUT
# Writes OUT/io.log (every line) and OUT/summary.txt (the best of each).
set -uo pipefail
out=${1:?usage: io_check.sh OUT}
mkdir -p "$out"
build=${KNNWB_BUILD:-build}
SECONDS=0
cmake --build "$build" --target bench_io -j"$(nproc)" >"$out/build.log" 2>&1 ||
  { tail -20 "$out/build.log"; exit 1; }
bench=$(find "$build" -name bench_io -type f -perm -u+x | head -1)
[ -x "$bench" ] || { echo "bench_io not found under $build" >&2; exit 1; }
export LD_LIBRARY_PATH=$build:$build/lib:${LD_LIBRARY_PATH:-}
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
data=$(mktemp -d "${TMPDIR:-/tmp}/knnwb-io-XXXXXX")
trap 'rm -rf "$data"' EXIT
$py - "$data" <<'PY'
import sys, numpy as np
d, r = sys.argv[1], np.random.default_rng(1)
np.save(d + "/x10m.npy", r.standard_normal((10_000_000, 50), dtype=np.float32))
np.save(d + "/x1533876.npy", r.standard_normal((1_533_876, 128), dtype=np.float32))
np.save(d + "/x1533876f8.npy", r.standard_normal((1_533_876, 128)))
PY
echo "build + data: ${SECONDS} s" | tee "$out/io.log"
{
  echo "== $(nproc) cores; $(free -g | awk '/Mem:/{print $2}') GiB; $(uname -r)"
  df -hT "$data" | tail -1
  cat /sys/kernel/mm/transparent_hugepage/enabled /proc/sys/vm/dirty_ratio 2>/dev/null
  for f in x10m x1533876 x1533876f8; do
    cat "$data/$f.npy" >/dev/null # in the page cache, as a file just written or read before is
    echo "file $f.npy" # names the reads below in the summary (two files share a shape)
    timeout 60 "$bench" read "$data/$f.npy" --repeat 3
    timeout 60 "$bench" read "$data/$f.npy" --repeat 3 --threads 1
  done
  timeout 100 "$bench" write --rows 10000000 --k 30 --dir "$data" --repeat 3
  timeout 60 "$bench" write --rows 10000000 --k 30 --dir "$data" --repeat 2 --threads 1
  timeout 60 "$bench" write --rows 1533876 --k 20 --dir "$data" --repeat 3
} >>"$out/io.log" 2>&1
# The best of each measurement (the first of a kind pays for memory the machine had elsewhere).
awk '$1 == "file" { file = $2 " " }
     $1 == "read" || $1 == "write" {
       key = ($1 == "read" ? file : "") $0; sub(/ +[0-9.]+ s +[0-9.]+ GB\/s$/, "", key);
       t = $(NF - 3); if (!(key in best) || t < best[key]) best[key] = t; if (!(key in seen)) { seen[key] = 1; order[++n] = key } }
     END { for (i = 1; i <= n; i++) printf "%-52s %8.3f s\n", order[i], best[order[i]] }' \
  "$out/io.log" >"$out/summary.txt"
cat "$out/summary.txt"
echo "total ${SECONDS} s"
