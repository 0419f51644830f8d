#!/usr/bin/env bash
# Peak resident memory of every rank of `mpirun -np R knnwb knn` on a generated NPY (never
# committed), split memory (the CPU default) against the whole input on every rank, and whether
# every run wrote the single-process bytes. Not a ctest: minutes on a small machine.
# Usage: [MODES="split whole"] [FORMAT=npy|tsv] mpi_memory.sh KNNWB [ROWS [COLS [K]]]
#        (defaults: split whole, npy, 200000 64 10)
set -euo pipefail
knnwb=$(realpath "$1")
rows=${2:-200000}
cols=${3:-64}
k=${4:-10}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
format=${FORMAT:-npy}
python3 - "$rows" "$cols" "$format" <<'PY'
import array, random, struct, sys
rows, cols = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(1)
if sys.argv[3] == "tsv":
    with open("data.tsv", "w") as out:
        out.write("row\t" + "\t".join("c%d" % j for j in range(cols)) + "\n")
        for i in range(rows):
            out.write("r%d\t" % i + "\t".join("%.6g" % rng.gauss(0.0, 1.0) for _ in range(cols)) + "\n")
    sys.exit(0)
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
header += " " * (64 - (10 + len(header) + 1) % 64) + "\n"
with open("data.npy", "wb") as out:
    out.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    for start in range(0, rows, 10000):
        n = min(10000, rows - start)
        out.write(array.array("f", [rng.gauss(0.0, 1.0) for _ in range(n * cols)]).tobytes())
PY
echo "input: $rows x $cols $format, $(($(stat -c %s "data.$format") / 1048576)) MiB; k = $k, pearson, cpu"
/usr/bin/time -f %M -o rss.one "$knnwb" knn "data.$format" -k "$k" -b cpu -q -o one.knn
echo "1 process: peak RSS $(($(cat rss.one) / 1024)) MiB"
for mode in ${MODES:-split whole}; do
  for ranks in 2 3; do
    start=$(date +%s.%N)
    mpiexec --oversubscribe --allow-run-as-root --mca btl self,vader \
      --mca btl_vader_single_copy_mechanism none -np "$ranks" \
      bash -c '/usr/bin/time -f %M -o "rss.$OMPI_COMM_WORLD_RANK" "$@"' rank \
      "$knnwb" knn "data.$format" -k "$k" -b cpu -q --mpi-input "$mode" -o "r$ranks-$mode.knn"
    seconds=$(echo "$(date +%s.%N) - $start" | bc)
    peaks=""
    for ((r = 0; r < ranks; r++)); do peaks="$peaks $(($(cat "rss.$r") / 1024))"; done
    same=$(cmp -s one.knn "r$ranks-$mode.knn" && echo "same bytes" || echo "DIFFERENT")
    echo "$ranks ranks, --mpi-input $mode: peak RSS per rank (MiB):$peaks; ${seconds%.*} s; $same"
  done
done
