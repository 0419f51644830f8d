#!/usr/bin/env bash
# Peak resident memory of every rank of `mpirun -np R knnwb knn` on a generated NPY (never
# committed), split memory (the CPU default) against the whole input on every rank, and whether
# every run wrote the single-process bytes. Not a ctest: minutes on a small machine.
# COMMAND=run measures `knnwb run` of a pipeline (load-matrix, knn-graph, write-graph .knn) instead:
# its kNN step runs split under mpirun; COMMAND=neighbourhood (FORMAT=tsv: it needs row labels)
# the order-2 neighbourhood of row r7 in both directions (the whole graph, split; GML compared).
# MODES is ignored for both. RANKS="2 3" (the default) lists the rank counts. OUTPUT=npy|npz|mtx|tsv (knn only) writes that format instead of .knn
# (with -g union|mutual in GRAPH=, .knn and .mtx); side files are compared too.
# Usage: [MODES="split whole"] [FORMAT=npy|tsv] [COMMAND=knn|run|neighbourhood] [OUTPUT=knn|npy|...]
#        [GRAPH=directed|union|mutual] mpi_memory.sh KNNWB [ROWS [COLS [K]]]
#        (defaults: split whole, npy, knn, knn, directed, 200000 64 10)
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
command=${COMMAND:-knn}
output=${OUTPUT:-knn}
graph=${GRAPH:-directed}
[ "$command" = knn ] || output=knn
cat >pipeline.xml <<XML
<?xml version="1.0" encoding="UTF-8"?><pipeline name="memory" version="1">
<variable name="out" value="x"/>
<step id="data" type="load-matrix"><param name="path" value="data.$format"/></step>
<step id="graph" type="knn-graph"><input name="data" step="data"/><param name="k" value="$k"/>
<param name="backend" value="cpu"/></step>
<step id="write" type="write-graph"><input name="graph" step="graph"/>
<param name="path" value="\${out}.knn"/></step>
</pipeline>
XML
# The command line of one run writing $1 (split or whole: $2; a pipeline has no such option).
args() {
  if [ "$command" = run ]; then
    echo run pipeline.xml -q --set "out=${1%.knn}"
  elif [ "$command" = neighbourhood ]; then
    echo neighbourhood "data.$format" --focus r7 -k "$k" -r 2 --direction both -b cpu -q -o "$1"
  else
    echo knn "data.$format" -k "$k" -b cpu -q -g "$graph" ${2:+--mpi-input "$2"} -o "$1"
  fi
}
[ "$command" = knn ] || MODES=split
echo "input: $rows x $cols $format, $(($(stat -c %s "data.$format") / 1048576)) MiB; k = $k, pearson, cpu; output .$output ($graph)"
# shellcheck disable=SC2046 # args prints words
/usr/bin/time -f "%M %e" -o rss.one "$knnwb" $(args "one.$output")
read -r one_rss one_seconds <rss.one
echo "1 process: peak RSS $((one_rss / 1024)) MiB; $one_seconds s"
for mode in ${MODES:-split whole}; do
  for ranks in ${RANKS:-2 3}; do
    start=$(date +%s.%N)
    mpiexec --oversubscribe --allow-run-as-root --mca btl self,vader \
      --mca btl_vader_single_copy_mechanism none -np "$ranks" \
      bash -c '/usr/bin/time -f %M -o "rss.$OMPI_COMM_WORLD_RANK" "$@"' rank \
      "$knnwb" $(args "r$ranks-$mode.$output" "$mode")
    seconds=$(echo "$(date +%s.%N) - $start" | bc)
    peaks=""
    for ((r = 0; r < ranks; r++)); do peaks="$peaks $(($(cat "rss.$r") / 1024))"; done
    same="same bytes"
    for f in one.*; do
      [ "$f" = one.$output ] || [ "$f" = one.distances.npy ] || [ "$f" = one.rows.txt ] || continue
      cmp -s "$f" "r$ranks-$mode${f#one}" || same="DIFFERENT (${f#one})"
    done
    echo "$ranks ranks, $command, --mpi-input $mode: peak RSS per rank (MiB):$peaks; $(printf %.1f "$seconds") s; $same"
  done
done
