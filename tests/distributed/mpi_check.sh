#!/usr/bin/env bash
# `mpirun -np R knnwb ...` gives the single-process bytes: R = 1, 2, 3 on the CPU backend (ranks
# oversubscribe the cores), every metric, the self graph (knnwb knn: each rank writes its rows into
# one .knn/.tsv/.mtx/.npy/.npz, the union/mutual graph's .knn/.mtx too; rank 0 writes the GML of
# the union graph) and query panels (a pipeline), odd sizes, points of the plane (the k-d tree)
# (fewer rows than ranks, tiles that do not divide the rows), `knnwb neighbourhood` and pipelines
# with split input (each rank reads its rows; rank 0 clusters and writes), and a rank
# that alone sees bad input.
# Usage: mpi_check.sh KNNWB MPIEXEC SOURCE_DIR
set -euo pipefail
knnwb=$1
mpiexec=$2
here=$3/tests/distributed
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Shared memory without the single-copy (CMA) path, which containers often forbid; one thread per
# rank so that oversubscribed ranks do not fight over the two cores of a CI box.
mpi() {
  local ranks=$1
  shift
  "$mpiexec" --oversubscribe --allow-run-as-root --mca btl self,vader \
    --mca btl_vader_single_copy_mechanism none -np "$ranks" "$knnwb" "$@"
}
# As mpi, replacing the (sub)shell that runs it: `(exec_mpi ...) &` makes $! mpirun itself.
exec_mpi() {
  local ranks=$1
  shift
  exec "$mpiexec" --oversubscribe --allow-run-as-root --mca btl self,vader \
    --mca btl_vader_single_copy_mechanism none -np "$ranks" "$knnwb" "$@"
}
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# knnwb's own lines of a stderr file: under mpirun, stderr also holds the launcher's and its
# libraries' notices (hwloc's "failed to find sysfs cpu topology directory" where /sys is not
# mounted, Open MPI's warnings in containers), which are no part of what knnwb says.
knnwb_lines() {
  grep -a '^knnwb: ' "$1" || true
}
# Waits (at most 20 s) until the ranks of the mpirun $1, its children, catch SIGINT, SIGTERM and
# SIGCONT (/proc's SigCgt mask): a signal sent before would find a rank started late under load
# without knnwb's handlers (the launcher's SIGCONT/SIGTERM then kill it without its message).
wait_ranks_ready() {
  local ready child mask
  for _ in $(seq 2000); do
    ready=0
    for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do
      mask=$(awk '/^SigCgt:/ {print $2}' "/proc/$child/status" 2>/dev/null || true)
      [ -n "$mask" ] && (((0x$mask >> 1 & 1) && (0x$mask >> 14 & 1) && (0x$mask >> 17 & 1))) &&
        ready=$((ready + 1))
    done
    [ "$ready" -ge 2 ] && return 0
    sleep 0.01
  done
  return 1
}

python3 "$here/make_npy.py" data.npy 307 13 1
python3 "$here/make_npy.py" small.npy 2 5 2
python3 "$here/make_npy.py" queries.npy 41 13 3
python3 "$here/make_npy.py" bad.npy 307 13 1 300
python3 "$here/make_npy.py" slices.npy 9001 8 4
"$knnwb" knn slices.npy -k 40 -m euclidean -b cpu -q -o one-slices.knn
# .npy lists of 2.2 MB a rank and array at 2 ranks, 1.4 MB at 3 (9001 rows: uneven blocks), more
# than one write slice: each rank writes the indices and the distances at once, a slice of each
# in turn (distributed/write_file.c).
"$knnwb" knn slices.npy -k 60 -m euclidean -b cpu -q -o one-slices.npy
# The same lists in 32 bits (--lists-dtype 32): each rank narrows its rows, then writes them.
"$knnwb" knn slices.npy -k 60 -m euclidean -b cpu -q --lists-dtype 32 -o one-slices32.npy
"$knnwb" knn slices.npy -k 7 -m euclidean -b cpu -q --lists-dtype 32 -o one-slices32.npz
# Points of the plane (25,013 rows of 2 columns: the k-d tree's, core/tree/), with copies.
python3 "$here/make_npy.py" points.npy 25013 2 5
"$knnwb" knn points.npy -k 12 -m manhattan -b cpu -q -o one-points.knn
"$knnwb" knn points.npy -k 12 -m euclidean -b cpu -q -g union -o one-points.mtx
# Genes of a few samples under Pearson (20,011 rows of 5 columns): the tree of their scored rows.
python3 "$here/make_npy.py" genes.npy 20011 5 6
"$knnwb" knn genes.npy -k 10 -m pearson -b cpu -q -o one-genes.knn
# The same matrix as float64 NPY (read in converted chunks) and as TSV text (read whole by every
# rank, which then keeps a view of its block).
python3 - <<'PY'
import struct
raw = open("data.npy", "rb").read()
length = struct.unpack("<H", raw[8:10])[0]
values = struct.unpack("<%df" % (307 * 13), raw[10 + length:])
header = "{'descr': '<f8', 'fortran_order': False, 'shape': (307, 13), }"
header += " " * (64 - (10 + len(header) + 1) % 64) + "\n"
with open("data64.npy", "wb") as out:
    out.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    out.write(struct.pack("<%dd" % len(values), *values))
with open("data.tsv", "w") as out:
    out.write("row\t" + "\t".join("c%d" % j for j in range(13)) + "\n")
    for i in range(307):
        out.write("r%d\t" % i + "\t".join(repr(v) for v in values[i * 13:(i + 1) * 13]) + "\n")
PY

# data.npy with a labels side file (one label not ASCII, one repeated): each rank reads its block's
# rows and labels; and with one label too few (not the array's: a warning, no labels).
cp data.npy labelled.npy
python3 -c 'import sys; sys.stdout.write("".join("g\u00e9ne%d\n" % (i if i != 200 else 7) for i in range(307)))' >labelled.labels.txt
cp data.npy short.npy
head -n 306 labelled.labels.txt >short.labels.txt
python3 - <<'PY'
import struct
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (9, 4), }"
header += " " * (64 - (10 + len(header) + 1) % 64) + "\n"
with open("allnan.npy", "wb") as out:
    out.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    out.write(struct.pack("<36f", *([float("nan")] * 36)))
with open("allnan.labels.txt", "w") as out:
    out.write("".join("a%d\n" % i for i in range(9)))
PY
for ext in tsv gml npy; do
  "$knnwb" knn labelled.npy -k 9 -m pearson -b cpu --memory 4K -t 1 -q -o "one-labelled.$ext"
done
grep -q 'ne186' one-labelled.tsv || { echo "FAIL: one-labelled.tsv has no labels"; exit 1; }
"$knnwb" knn short.npy -k 9 -m pearson -b cpu --memory 4K -t 1 -q -o one-short.tsv 2>one-short.err
grep -q "not its rows'" one-short.err || { echo "FAIL: short labels: no warning"; exit 1; }

# data.tsv with one quoted label (row 150), and with a value on line 300 (rank 2's byte range of 3) that is not a number.
sed '152s/^r150/"r150"/' data.tsv >quoted.tsv
grep -q '^"r150"' quoted.tsv || { echo "FAIL: quoted.tsv has no quoted label"; exit 1; }
sed '300s/\t[^\t]*$/\tabc/' data.tsv >bad.tsv
"$knnwb" knn quoted.tsv -k 9 -m spearman -b cpu --memory 4K -t 1 -q -o one-quoted.tsv

# The self graph through `knnwb knn`: 4 KiB of tile memory makes 32-row blocks (55 tiles of 10 x 10).
metrics="pearson abs-pearson spearman euclidean manhattan cosine"
for metric in $metrics; do
  "$knnwb" knn data.npy -k 9 -m "$metric" -b cpu --memory 4K -t 1 -q -o "one-$metric.knn"
done
"$knnwb" knn data.npy -k 9 -m spearman -b cpu --memory 4K -t 1 -q -o one.tsv
"$knnwb" knn data.npy -k 9 -m cosine -b cpu --memory 4K -t 1 -q -g union -o one.gml
"$knnwb" knn small.npy -k 1 -m euclidean -b cpu -q -o one-small.knn
# The NumPy arrays and the Matrix Market file, written in place by every rank (labels from text,
# none from NPY; 2 rows: a rank without rows at 3 ranks).
for ext in npy npz mtx; do
  "$knnwb" knn data.tsv -k 9 -m spearman -b cpu --memory 4K -t 1 -q -o "one-text.$ext"
  "$knnwb" knn data.npy -k 9 -m manhattan -b cpu --memory 4K -t 1 -q -o "one-lists.$ext"
  "$knnwb" knn small.npy -k 1 -m euclidean -b cpu -q -o "one-small.$ext"
done
# The union and mutual graphs' edges: each rank writes those whose smaller end is one of its rows.
for graph in union mutual; do
  for ext in knn mtx; do
    "$knnwb" knn data.tsv -k 9 -m euclidean -b cpu --memory 4K -t 1 -q -g "$graph" \
      -o "one-$graph.$ext"
    "$knnwb" knn small.npy -k 1 -m euclidean -b cpu -q -g "$graph" -o "one-small-$graph.$ext"
  done
done
# Query panels and the self graph inside a pipeline, for every metric (one run per rank count).
{
  echo '<?xml version="1.0" encoding="UTF-8"?><pipeline name="mpi-check" version="1">'
  echo '<variable name="out" value="x"/>'
  echo '<step id="data" type="load-matrix"><param name="path" value="data.npy"/></step>'
  echo '<step id="queries" type="load-matrix"><param name="path" value="queries.npy"/></step>'
  for metric in $metrics; do
    echo "<step id=\"self-$metric\" type=\"knn-graph\"><input name=\"data\" step=\"data\"/>"
    echo "<param name=\"k\" value=\"7\"/><param name=\"metric\" value=\"$metric\"/>"
    echo '<param name="backend" value="cpu"/><param name="memory" value="4K"/>'
    echo '<param name="graph" value="union"/></step>'
    echo "<step id=\"query-$metric\" type=\"knn-query\"><input name=\"query\" step=\"queries\"/>"
    echo "<input name=\"reference\" step=\"data\"/><param name=\"k\" value=\"5\"/>"
    echo "<param name=\"metric\" value=\"$metric\"/><param name=\"backend\" value=\"cpu\"/></step>"
    echo "<step id=\"write-self-$metric\" type=\"write-graph\"><input name=\"graph\" step=\"self-$metric\"/>"
    echo "<param name=\"path\" value=\"\${out}-self-$metric.knn\"/></step>"
    echo "<step id=\"write-query-$metric\" type=\"write-graph\"><input name=\"graph\" step=\"query-$metric\"/>"
    echo "<param name=\"path\" value=\"\${out}-query-$metric.tsv\"/></step>"
  done
  echo '</pipeline>'
} >check.xml
"$knnwb" run check.xml -q --set out=one
# A pipeline on labelled text: load-matrix reads each rank's byte range, knn-graph runs split,
# rank 0 alone clusters and writes (GML with labels and clusters, the labels table).
cat >labels.xml <<'XML'
<?xml version="1.0" encoding="UTF-8"?><pipeline name="mpi-labels" version="1">
<variable name="out" value="x"/><variable name="in" value="data.tsv"/>
<step id="data" type="load-matrix"><param name="path" value="${in}"/></step>
<step id="self" type="knn-graph"><input name="data" step="data"/><param name="k" value="7"/>
<param name="metric" value="euclidean"/><param name="backend" value="cpu"/>
<param name="memory" value="4K"/><param name="graph" value="union"/></step>
<step id="clusters" type="community"><input name="graph" step="self"/></step>
<step id="gml" type="write-graph"><input name="graph" step="self"/>
<input name="clusters" step="clusters"/><param name="path" value="${out}.gml"/></step>
<step id="labels" type="write-labels"><input name="clusters" step="clusters"/>
<param name="path" value="${out}-labels.tsv"/></step>
</pipeline>
XML
"$knnwb" run labels.xml -q --set out=one-labels
# kNN steps fed by a step of rank 0's own (metafeatures of 40 rows, on rank 0 because the exact
# MST of the same matrix needs it whole there): rank 0 scatters the pair rows into every rank's
# block, the kNN work is shared, rank 0 writes.
for i in $(seq 0 39); do echo "r$i"; done >pair-rows.txt
cat >scatter.xml <<'XML'
<?xml version="1.0" encoding="UTF-8"?><pipeline name="mpi-scatter" version="1">
<variable name="out" value="x"/>
<step id="data" type="load-matrix"><param name="path" value="data.tsv"/></step>
<step id="tree" type="mst"><input name="data" step="data"/></step>
<step id="pairs" type="metafeatures"><input name="data" step="data"/>
<param name="rows" value="pair-rows.txt"/></step>
<step id="graph" type="knn-graph"><input name="data" step="pairs"/><param name="k" value="6"/>
<param name="metric" value="manhattan"/><param name="backend" value="cpu"/>
<param name="memory" value="16K"/><param name="graph" value="mutual"/></step>
<step id="query" type="knn-query"><input name="query" step="data"/>
<input name="reference" step="pairs"/><param name="k" value="4"/>
<param name="metric" value="euclidean"/><param name="backend" value="cpu"/></step>
<step id="write-graph" type="write-graph"><input name="graph" step="graph"/>
<param name="path" value="${out}.gml"/></step>
<step id="write-query" type="write-graph"><input name="graph" step="query"/>
<param name="path" value="${out}-query.tsv"/></step>
</pipeline>
XML
"$knnwb" run scatter.xml -q --set out=one-scatter
# The neighbourhood step: on rows split by load-matrix (both directions), and in the seed's own
# pipeline after rank 0's metafeatures and phenotype row (scattered).
cat >nb.xml <<'XML'
<?xml version="1.0" encoding="UTF-8"?><pipeline name="mpi-neighbourhood" version="1">
<variable name="out" value="x"/>
<step id="data" type="load-matrix"><param name="path" value="data.tsv"/></step>
<step id="nb" type="neighbourhood"><input name="data" step="data"/>
<param name="focus" value="r250,r3"/><param name="k" value="6"/><param name="order" value="2"/>
<param name="direction" value="both"/><param name="metric" value="euclidean"/>
<param name="backend" value="cpu"/><param name="memory" value="4K"/>
<param name="gml" value="${out}.gml"/><param name="table" value="${out}.tsv"/></step>
<step id="points" type="write-graph"><input name="graph" step="nb"/>
<param name="path" value="${out}-graph.tsv"/></step>
</pipeline>
XML
"$knnwb" run nb.xml -q --set out=one-nb
mkdir one-seed-run
"$knnwb" run "$3/share/examples/seed-neighbourhood.xml" -q -O one-seed-run
# Every step of it runs on split rows (metafeatures: each rank its share of the pairs).
[ "$("$knnwb" run "$3/share/examples/seed-neighbourhood.xml" --dry-run | grep -c "rows split$")" = 4 ] ||
  fail "seed-neighbourhood.xml does not run split"
"$knnwb" run scatter.xml --dry-run | grep -q "rows split from rank 0's matrices" ||
  fail "the dry run does not show the scattered steps"
# The neighbourhood command: kNN queries of the rows found (out), and the whole graph (both).
demo=$3/share/examples/demo-expression.txt
# The seed's own workflow (share/examples/README.md): metafeatures of 120 probes (each rank
# generates its share of the pair rows), the phenotype row (the last rank's), its neighbourhood.
synthetic=$3/share/examples/data
seed_args=("$synthetic/synthetic_expression.tsv" --metafeatures difference
  --pair-rows "$synthetic/synthetic_pair_rows.txt"
  --phenotype "$synthetic/synthetic_clinical.tsv:YearsToRelapse" --focus YearsToRelapse -k 20
  --order 2 -b cpu -q)
for direction in out both; do
  "$knnwb" neighbourhood "$demo" --focus YearsToRelapse -k 5 -r 2 --direction "$direction" -b cpu \
    -q -o "one-$direction.gml" --table "one-$direction.tsv"
  "$knnwb" neighbourhood "${seed_args[@]}" --direction "$direction" -o "one-seed-$direction.gml" \
    --table "one-seed-$direction.tsv"
  # Labelled TSV rows read by byte ranges (split memory), two focus rows.
  "$knnwb" neighbourhood data.tsv --focus r250,r3 -k 6 -r 2 -m euclidean --direction "$direction" \
    -b cpu --memory 4K -q -o "one-text-$direction.gml" --table "one-text-$direction.tsv"
done

for ranks in 1 2 3; do
  for metric in $metrics; do
    mpi "$ranks" knn data.npy -k 9 -m "$metric" -b cpu --memory 4K -q -o "r$ranks-$metric.knn"
    cmp "one-$metric.knn" "r$ranks-$metric.knn" || fail "$ranks ranks, $metric .knn differs"
  done
  mpi "$ranks" knn data.npy -k 9 -m spearman -b cpu --memory 4K -q -o "r$ranks.tsv"
  cmp one.tsv "r$ranks.tsv" || fail "$ranks ranks: .tsv differs"
  mpi "$ranks" knn data.npy -k 9 -m cosine -b cpu --memory 4K -q -g union -o "r$ranks.gml"
  cmp one.gml "r$ranks.gml" || fail "$ranks ranks: union .gml differs"
  # Each rank's own lists gathered on rank 0 alone, from the whole-input mode's shares too.
  mpi "$ranks" knn data.npy -k 9 -m cosine -b cpu --memory 4K -q -g union --mpi-input whole \
    -o "r$ranks-whole.gml"
  cmp one.gml "r$ranks-whole.gml" || fail "$ranks ranks: union .gml (--mpi-input whole) differs"
  mpi "$ranks" knn small.npy -k 1 -m euclidean -b cpu -q -o "r$ranks-small.knn"
  cmp one-small.knn "r$ranks-small.knn" || fail "$ranks ranks: 2-row .knn differs"
  # A rank's bytes above the writer's 1 MB slice (distributed/write_file.c): 4.5 MB of .knn a rank
  # at 2 ranks, each slice at its own offset; the two .npy files, written at once, slice by slice.
  if [ "$ranks" = 2 ]; then
    mpi 2 knn slices.npy -k 40 -m euclidean -b cpu -q -o r2-slices.knn
    cmp one-slices.knn r2-slices.knn || fail "2 ranks: .knn over several write slices differs"
  fi
  if [ "$ranks" = 2 ]; then
    # Outputs written by the ranks together follow one process's policy (atomic_file.h): new ones
    # are left to the system's cache, ones that replace data are synced, by every rank alike.
    rm -f r2-sync.npy r2-sync.distances.npy
    for run in new replacing; do
      G_MESSAGES_DEBUG=all mpi 2 knn slices.npy -k 60 -m euclidean -b cpu -q -o r2-sync.npy \
        2>"sync-$run.err" || fail "2 ranks: .npy lists ($run files) failed"
      cmp one-slices.npy r2-sync.npy || fail "2 ranks: .npy lists ($run files) differ"
    done
    grep -aq "distributed write: .* left to the system's cache and closed" sync-new.err ||
      fail "2 ranks: new .npy lists were synced (or the write's debug line is missing)"
    grep -aq "distributed write: .* synced and closed" sync-replacing.err ||
      fail "2 ranks: .npy lists replacing earlier ones were not synced"
  fi
  if [ "$ranks" != 1 ]; then
    mpi "$ranks" knn slices.npy -k 60 -m euclidean -b cpu -q -o "r$ranks-slices.npy"
    cmp one-slices.npy "r$ranks-slices.npy" ||
      fail "$ranks ranks: .npy over several write slices (written with its distances) differs"
    cmp one-slices.distances.npy "r$ranks-slices.distances.npy" ||
      fail "$ranks ranks: .distances.npy over several write slices (written with .npy) differs"
    for mode in split whole; do
      mpi "$ranks" knn slices.npy -k 60 -m euclidean -b cpu -q --lists-dtype 32 --mpi-input $mode \
        -o "r$ranks-slices32-$mode.npy"
      cmp one-slices32.npy "r$ranks-slices32-$mode.npy" &&
        cmp one-slices32.distances.npy "r$ranks-slices32-$mode.distances.npy" ||
        fail "$ranks ranks ($mode): 32-bit .npy lists differ"
      mpi "$ranks" knn slices.npy -k 7 -m euclidean -b cpu -q --lists-dtype 32 --mpi-input $mode \
        -o "r$ranks-slices32-$mode.npz"
      cmp one-slices32.npz "r$ranks-slices32-$mode.npz" ||
        fail "$ranks ranks ($mode): 32-bit .npz lists differ"
    done
    # Every rank builds the tree of every row and searches its share; split ranks (the default,
    # and asked for) put their blocks together first.
    for mode in auto split whole; do
      mpi "$ranks" knn points.npy -k 12 -m manhattan -b cpu --mpi-input $mode \
        -o "r$ranks-points-$mode.knn" 2>"points-$mode.err"
      grep -aq "on cpu (k-d tree) x $ranks ranks" "points-$mode.err" ||
        fail "$ranks ranks ($mode): the points did not go through the tree"
      cmp one-points.knn "r$ranks-points-$mode.knn" || fail "$ranks ranks ($mode): tree .knn differs"
    done
    for mode in split whole; do
      mpi "$ranks" knn genes.npy -k 10 -m pearson -b cpu --mpi-input $mode \
        -o "r$ranks-genes-$mode.knn" 2>"genes-$mode.err"
      grep -aq "on cpu (k-d tree) x $ranks ranks" "genes-$mode.err" ||
        fail "$ranks ranks ($mode): the genes did not go through the tree"
      cmp one-genes.knn "r$ranks-genes-$mode.knn" || fail "$ranks ranks ($mode): pearson tree differs"
    done
    mpi "$ranks" knn points.npy -k 12 -m euclidean -b cpu -q -g union -o "r$ranks-points.mtx"
    cmp one-points.mtx "r$ranks-points.mtx" || fail "$ranks ranks: tree union .mtx differs"
  fi
  # An NPY with labels beside it, read by rows: every output names the rows as one process's.
  for ext in tsv gml npy; do
    mpi "$ranks" knn labelled.npy -k 9 -m pearson -b cpu --memory 4K -q -o "r$ranks-labelled.$ext" \
      2>"r$ranks-labelled.err"
    [ "$(grep -c "repeats an earlier row's label" "r$ranks-labelled.err")" = 1 ] ||
      fail "$ranks ranks: labelled NPY: the repeated label is not told once"
    cmp "one-labelled.$ext" "r$ranks-labelled.$ext" || fail "$ranks ranks: labelled NPY .$ext differs"
  done
  cmp one-labelled.labels.txt "r$ranks-labelled.labels.txt" ||
    fail "$ranks ranks: labelled NPY: the .npy lists' labels differ"
  mpi "$ranks" knn short.npy -k 9 -m pearson -b cpu --memory 4K -q -o "r$ranks-short.tsv" \
    2>"r$ranks-short.err" || fail "$ranks ranks: an NPY with a labels file too short failed"
  cmp one-short.tsv "r$ranks-short.tsv" || fail "$ranks ranks: NPY with a short labels file differs"
  # Every row dropped for missing values (blocks read by rows): the error of one process.
  if mpi "$ranks" knn allnan.npy -k 2 -b cpu --drop-missing -q -o "r$ranks-allnan.knn" \
    2>"r$ranks-allnan.err"; then fail "$ranks ranks: an NPY without rows left succeeded"; fi
  grep -q "^knnwb: allnan.npy: no rows are left (9 with missing values)" "r$ranks-allnan.err" ||
    fail "$ranks ranks: an NPY without rows left: not one process's message"
  [ ! -e "r$ranks-allnan.knn" ] || fail "$ranks ranks: an NPY without rows left wrote lists"
  grep -q "not its rows'" "r$ranks-short.err" || fail "$ranks ranks: short labels: no warning"
  # Every rank writes its rows of .npy (and .distances.npy), .npz and .mtx (and .rows.txt).
  for ext in npy npz mtx; do
    for input in text lists small; do
      case $input in
      text) args=(data.tsv -k 9 -m spearman --memory 4K) ;;
      lists) args=(data.npy -k 9 -m manhattan --memory 4K) ;;
      small) args=(small.npy -k 1 -m euclidean) ;;
      esac
      mpi "$ranks" knn "${args[@]}" -b cpu -q -o "r$ranks-$input.$ext"
      cmp "one-$input.$ext" "r$ranks-$input.$ext" || fail "$ranks ranks: $input .$ext differs"
    done
  done
  for input in text lists small; do
    cmp "one-$input.distances.npy" "r$ranks-$input.distances.npy" ||
      fail "$ranks ranks: $input .distances.npy differs"
  done
  cmp one-text.rows.txt "r$ranks-text.rows.txt" || fail "$ranks ranks: .mtx row labels differ"
  for graph in union mutual; do
    for ext in knn mtx; do
      mpi "$ranks" knn data.tsv -k 9 -m euclidean -b cpu --memory 4K -q -g "$graph" \
        -o "r$ranks-$graph.$ext"
      cmp "one-$graph.$ext" "r$ranks-$graph.$ext" || fail "$ranks ranks: $graph .$ext differs"
      mpi "$ranks" knn small.npy -k 1 -m euclidean -b cpu -q -g "$graph" \
        -o "r$ranks-small-$graph.$ext"
      cmp "one-small-$graph.$ext" "r$ranks-small-$graph.$ext" ||
        fail "$ranks ranks: 2-row $graph .$ext differs"
    done
    mpi "$ranks" knn data.npy -k 9 -m cosine -b cpu --memory 4K -q -g "$graph" --mpi-input whole \
      -o "r$ranks-whole-$graph.knn"
    "$knnwb" knn data.npy -k 9 -m cosine -b cpu --memory 4K -t 1 -q -g "$graph" \
      -o "one-whole-$graph.knn"
    cmp "one-whole-$graph.knn" "r$ranks-whole-$graph.knn" ||
      fail "$ranks ranks: $graph .knn (--mpi-input whole) differs"
  done
  cmp one-union.rows.txt "r$ranks-union.rows.txt" || fail "$ranks ranks: union .mtx labels differ"
  [ ! -e "r$ranks-lists.rows.txt" ] || fail "$ranks ranks: row labels written for an NPY input"
  # Split memory is the CPU default (each rank reads its rows of an NPY); the whole input on every
  # rank stays available, and text formats are read whole and split after.
  mpi "$ranks" knn data64.npy -k 9 -m euclidean -b cpu --memory 4K -q -o "r$ranks-64.knn"
  cmp one-euclidean.knn "r$ranks-64.knn" || fail "$ranks ranks: float64 NPY blocks differ"
  mpi "$ranks" knn data.npy -k 9 -m manhattan -b cpu --memory 4K -q --mpi-input whole \
    -o "r$ranks-whole.knn"
  cmp one-manhattan.knn "r$ranks-whole.knn" || fail "$ranks ranks: --mpi-input whole differs"
  # Every exchange and reduction through Open MPI's shared-memory window (the default takes it
  # for large ones only), and none at all.
  for shared in 1 0; do
    KNNWB_MPI_SHARED=$shared mpi "$ranks" knn data.npy -k 9 -m pearson -b cpu --memory 4K -q \
      --mpi-input whole -o "r$ranks-shared$shared.knn"
    cmp one-pearson.knn "r$ranks-shared$shared.knn" || fail "$ranks ranks: KNNWB_MPI_SHARED=$shared differs"
  done
  # Split memory with the blocks in the window (each rank's own rows read from their packed copy
  # there, its prepared copy and then its input block freed; or kept: KNNWB_SPLIT_OWN_PACKED=0),
  # every metric's layout. Each rank frees its block once, and only where its rows are packed
  # (KNNWB_MPI_VERBOSE: every rank's debug lines).
  for metric in pearson spearman euclidean manhattan; do
    for packed in 1 0; do
      KNNWB_MPI_SHARED=1 KNNWB_SPLIT_OWN_PACKED=$packed G_MESSAGES_DEBUG=all KNNWB_MPI_VERBOSE=1 \
        mpi "$ranks" knn data.npy -k 9 -m $metric -b cpu --memory 4K -q --mpi-input split \
        -o "r$ranks-window-$metric-$packed.knn" 2>"r$ranks-window-$metric-$packed.err"
      cmp "one-$metric.knn" "r$ranks-window-$metric-$packed.knn" ||
        fail "$ranks ranks: split, $metric, blocks in the window (own rows packed: $packed) differs"
      freed=$(grep -ac "the input block's values freed" "r$ranks-window-$metric-$packed.err" || true)
      [ "$freed" = $((ranks > 1 && packed == 1 ? ranks : 0)) ] ||
        fail "$ranks ranks: split, $metric, own rows packed: $packed: $freed input blocks freed"
    done
  done
  # Text every rank reads whole (a quoted label), each rank a view of its block: its free frees the
  # whole's values (and spearman's ranks as read), and the writers still name the rows.
  KNNWB_MPI_SHARED=1 G_MESSAGES_DEBUG=all KNNWB_MPI_VERBOSE=1 mpi "$ranks" knn quoted.tsv -k 9 \
    -m spearman -b cpu --memory 4K -q --mpi-input split -o "r$ranks-window-quoted.tsv" \
    2>"r$ranks-window-quoted.err"
  cmp one-quoted.tsv "r$ranks-window-quoted.tsv" ||
    fail "$ranks ranks: quoted text input, its blocks freed after the packing, differs"
  freed=$(grep -ac "the input block's values freed" "r$ranks-window-quoted.err" || true)
  [ "$freed" = $((ranks > 1 ? ranks : 0)) ] ||
    fail "$ranks ranks: quoted text input: $freed input blocks freed"
  # The partitioned search (forced on) with every rank holding every row: each group is searched
  # on one rank and each row's pieces are merged on the rank of its block.
  KNNWB_PARTITION=on KNNWB_PARTITION_ROWS=40 G_MESSAGES_DEBUG=all mpi "$ranks" knn data.npy -k 9 \
    -m euclidean -b cpu -q --mpi-input whole -o "r$ranks-partition.knn" 2>"r$ranks-partition.err"
  grep -q 'partition: done' "r$ranks-partition.err" || fail "$ranks ranks: no partitioned search"
  cmp one-euclidean.knn "r$ranks-partition.knn" || fail "$ranks ranks: the partitioned search differs"
  # ... through the shared window whatever the size, in rounds of 2000 bytes a rank (the window
  # refilled each round), and a rank short of memory after phase one: the plain search runs.
  if [ "$ranks" -gt 1 ]; then
    KNNWB_MPI_SHARED=1 KNNWB_PARTITION_ROUND_BYTES=2000 KNNWB_PARTITION=on KNNWB_PARTITION_ROWS=40 \
      G_MESSAGES_DEBUG=all mpi "$ranks" knn data.npy -k 9 -m euclidean -b cpu -q --mpi-input whole \
      -o "r$ranks-partition-shm.knn" 2>"r$ranks-partition-shm.err"
    grep -Eq 'combined in .* through shared memory in ([2-9]|[1-9][0-9]+) round' \
      "r$ranks-partition-shm.err" ||
      fail "$ranks ranks: the partitioned search's lists not combined through shared memory in rounds"
    cmp one-euclidean.knn "r$ranks-partition-shm.knn" ||
      fail "$ranks ranks: the partitioned search through shared memory differs"
    KNNWB_PARTITION_BOUNDS_SHORT_RANK=1 KNNWB_MPI_SHARED=1 KNNWB_PARTITION=on KNNWB_PARTITION_ROWS=40 \
      G_MESSAGES_DEBUG=all mpi "$ranks" knn data.npy -k 9 -m euclidean -b cpu -q --mpi-input whole \
      -o "r$ranks-partition-short.knn" 2>"r$ranks-partition-short.err"
    ! grep -q 'partition: done' "r$ranks-partition-short.err" ||
      fail "$ranks ranks: a rank short of memory in the bounds did not stop the partitioned search"
    cmp one-euclidean.knn "r$ranks-partition-short.knn" ||
      fail "$ranks ranks: the plain search after the partition gave up differs"
  fi
  # Split memory (the CPU default) on rows the partition takes: each rank keeps to its block, from
  # which it brings the rows it searches (by default and with --mpi-input split); with
  # KNNWB_PARTITION_SPLIT=0 the ranks put their blocks together for it. The same bytes every way.
  KNNWB_PARTITION_SPLIT=0 KNNWB_PARTITION=on KNNWB_PARTITION_ROWS=40 G_MESSAGES_DEBUG=all \
    mpi "$ranks" knn data.npy -k 9 \
    -m euclidean -b cpu -q -o "r$ranks-gathered.knn" 2>"r$ranks-gathered.err"
  [ "$ranks" -eq 1 ] || grep -q 'rows put together for the partitioned search' "r$ranks-gathered.err" ||
    fail "$ranks ranks: split rows not put together for the partitioned search"
  cmp one-euclidean.knn "r$ranks-gathered.knn" || fail "$ranks ranks: the gathered partition differs"
  KNNWB_PARTITION_ROUND_BYTES=2000 KNNWB_PARTITION=on KNNWB_PARTITION_ROWS=40 G_MESSAGES_DEBUG=all \
    mpi "$ranks" knn data.npy -k 9 -m euclidean -b cpu --mpi-input split -o "r$ranks-kept.knn" \
    2>"r$ranks-kept.err"
  [ "$ranks" -eq 1 ] || ! grep -q 'rows put together' "r$ranks-kept.err" ||
    fail "$ranks ranks: --mpi-input split gathered"
  [ "$ranks" -eq 1 ] || { grep -q 'each rank keeps its block' "r$ranks-kept.err" &&
    grep -q 'partition: done' "r$ranks-kept.err"; } ||
    fail "$ranks ranks: --mpi-input split did not search cluster by cluster"
  cmp one-euclidean.knn "r$ranks-kept.knn" || fail "$ranks ranks: --mpi-input split differs"
  # Text read by byte ranges gives uneven blocks: put together all the same, the lists re-cut.
  # Text every rank reads whole (a quoted label): every row is there already, nothing travels.
  for text in data:'rows put together' quoted:'holds every row already'; do
    name=${text%%:*}
    KNNWB_PARTITION=on KNNWB_PARTITION_ROWS=40 "$knnwb" knn "$name.tsv" -k 9 -m euclidean -b cpu \
      -q -o "one-$name-gathered.tsv"
    KNNWB_PARTITION_SPLIT=0 KNNWB_PARTITION=on KNNWB_PARTITION_ROWS=40 G_MESSAGES_DEBUG=all \
      mpi "$ranks" knn "$name.tsv" \
      -k 9 -m euclidean -b cpu -q -o "r$ranks-$name-gathered.tsv" 2>"r$ranks-$name-gathered.err"
    [ "$ranks" -eq 1 ] || grep -q "${text#*:}" "r$ranks-$name-gathered.err" ||
      fail "$ranks ranks: $name.tsv: no line '${text#*:}'"
    # (text read by byte ranges is held by no rank whole: its rows travel)
    [ "$name" = quoted ] || ! grep -q 'holds every row already' "r$ranks-$name-gathered.err" ||
      fail "$ranks ranks: $name.tsv: rows taken as held"
    cmp "one-$name-gathered.tsv" "r$ranks-$name-gathered.tsv" ||
      fail "$ranks ranks: gathered $name.tsv differs"
  done
  # ... and by default kept to them: each rank brings the rows it searches.
  KNNWB_PARTITION=on KNNWB_PARTITION_ROWS=40 G_MESSAGES_DEBUG=all mpi "$ranks" knn data.tsv -k 9 \
    -m euclidean -b cpu -q -o "r$ranks-data-kept.tsv" 2>"r$ranks-data-kept.err"
  [ "$ranks" -eq 1 ] || grep -q 'each rank keeps its block' "r$ranks-data-kept.err" ||
    fail "$ranks ranks: data.tsv not searched cluster by cluster on the blocks"
  cmp one-data-gathered.tsv "r$ranks-data-kept.tsv" || fail "$ranks ranks: kept data.tsv differs"
  # The last rank finds no room for the window: every rank must take messages with it.
  KNNWB_MPI_SHARED=1 KNNWB_MPI_SHARED_NO_ROOM_RANK=$((ranks - 1)) mpi "$ranks" knn data.npy -k 9 \
    -m pearson -b cpu --memory 4K -q --mpi-input whole -o "r$ranks-noroom.knn"
  cmp one-pearson.knn "r$ranks-noroom.knn" || fail "$ranks ranks: no room on one rank differs"
  mpi "$ranks" knn data.tsv -k 9 -m spearman -b cpu --memory 4K -q -o "r$ranks-text.tsv"
  "$knnwb" knn data.tsv -k 9 -m spearman -b cpu --memory 4K -t 1 -q -o one-text.tsv
  cmp one-text.tsv "r$ranks-text.tsv" || fail "$ranks ranks: text input split differs"
  # A quote anywhere (a field could span lines): every rank reads the file whole instead.
  mpi "$ranks" knn quoted.tsv -k 9 -m spearman -b cpu --memory 4K -q -o "r$ranks-quoted.tsv"
  cmp one-quoted.tsv "r$ranks-quoted.tsv" || fail "$ranks ranks: quoted text input differs"
  mpi "$ranks" run check.xml -q --set out="r$ranks"
  for metric in $metrics; do
    cmp "one-self-$metric.knn" "r$ranks-self-$metric.knn" || fail "$ranks ranks: pipeline self $metric"
    cmp "one-query-$metric.tsv" "r$ranks-query-$metric.tsv" || fail "$ranks ranks: pipeline query $metric"
  done
  # The pipeline's split knn-graph steps search cluster by cluster on their blocks (k), or put the
  # rows together: for the partitioned search (p, KNNWB_PARTITION_SPLIT=0), and whatever the rows
  # (w), as on GPUs, where the whole-input search shares its tiles (KNNWB_PARTITION_GATHER_ALWAYS=1
  # takes that path on the CPU).
  for way in k p w; do
    knobs="KNNWB_PARTITION=on KNNWB_PARTITION_ROWS=40" search="partitioned search"
    line="put together for the partitioned search"
    [ "$way" != k ] || line="each rank keeps its block"
    [ "$way" != p ] || knobs="$knobs KNNWB_PARTITION_SPLIT=0"
    [ "$way" != w ] || knobs="KNNWB_PARTITION_GATHER_ALWAYS=1" search="whole-input search" \
      line="put together for the whole-input search"
    (
      export $knobs G_MESSAGES_DEBUG=all
      mpi "$ranks" run check.xml -q --set out="r$ranks-$way" 2>"r$ranks-$way.err"
    )
    [ "$ranks" -eq 1 ] || grep -q "$line" "r$ranks-$way.err" ||
      fail "$ranks ranks: pipeline: no line '$line'"
    for metric in $metrics; do
      cmp "one-self-$metric.knn" "r$ranks-$way-self-$metric.knn" ||
        fail "$ranks ranks: pipeline self $metric, the $search"
    done
  done
  for direction in out both; do
    mpi "$ranks" neighbourhood "$demo" --focus YearsToRelapse -k 5 -r 2 --direction "$direction" \
      -b cpu -q -o "r$ranks-$direction.gml" --table "r$ranks-$direction.tsv"
    cmp "one-$direction.gml" "r$ranks-$direction.gml" || fail "$ranks ranks: neighbourhood $direction"
    cmp "one-$direction.tsv" "r$ranks-$direction.tsv" || fail "$ranks ranks: neighbourhood table"
    mpi "$ranks" neighbourhood data.tsv --focus r250,r3 -k 6 -r 2 -m euclidean \
      --direction "$direction" -b cpu --memory 4K -q -o "r$ranks-text-$direction.gml" \
      --table "r$ranks-text-$direction.tsv"
    cmp "one-text-$direction.gml" "r$ranks-text-$direction.gml" ||
      fail "$ranks ranks: split neighbourhood $direction"
    cmp "one-text-$direction.tsv" "r$ranks-text-$direction.tsv" ||
      fail "$ranks ranks: split neighbourhood table"
    # Its split whole graph (in, both) searches cluster by cluster on the blocks too.
    KNNWB_PARTITION=on KNNWB_PARTITION_ROWS=40 mpi "$ranks" neighbourhood data.tsv --focus r250,r3 \
      -k 6 -r 2 -m euclidean --direction "$direction" -b cpu --memory 4K -q \
      -o "r$ranks-textp-$direction.gml" --table "r$ranks-textp-$direction.tsv"
    cmp "one-text-$direction.gml" "r$ranks-textp-$direction.gml" ||
      fail "$ranks ranks: split neighbourhood $direction, cluster by cluster"
    mpi "$ranks" neighbourhood "${seed_args[@]}" --direction "$direction" \
      -o "r$ranks-seed-$direction.gml" --table "r$ranks-seed-$direction.tsv"
    cmp "one-seed-$direction.gml" "r$ranks-seed-$direction.gml" ||
      fail "$ranks ranks: seed neighbourhood (metafeatures, phenotype) $direction"
    cmp "one-seed-$direction.tsv" "r$ranks-seed-$direction.tsv" ||
      fail "$ranks ranks: seed neighbourhood table $direction"
  done
  mpi "$ranks" run scatter.xml -q --set out="r$ranks-scatter"
  cmp one-scatter.gml "r$ranks-scatter.gml" || fail "$ranks ranks: pipeline, scattered kNN graph"
  cmp one-scatter-query.tsv "r$ranks-scatter-query.tsv" ||
    fail "$ranks ranks: pipeline, scattered kNN query"
  mpi "$ranks" run nb.xml -q --set out="r$ranks-nb"
  for f in nb.gml nb.tsv nb-graph.tsv; do
    cmp "one-$f" "r$ranks-$f" || fail "$ranks ranks: pipeline neighbourhood step, $f"
  done
  mkdir "r$ranks-seed-run"
  mpi "$ranks" run "$3/share/examples/seed-neighbourhood.xml" -q -O "r$ranks-seed-run"
  for f in one-seed-run/*; do
    cmp "$f" "r$ranks-seed-run/${f#one-seed-run/}" || fail "$ranks ranks: seed-neighbourhood.xml, $f"
  done
  mpi "$ranks" run labels.xml -q --set out="r$ranks-labels"
  cmp one-labels.gml "r$ranks-labels.gml" || fail "$ranks ranks: pipeline on text, GML"
  cmp one-labels-labels.tsv "r$ranks-labels-labels.tsv" || fail "$ranks ranks: pipeline labels"
  echo "$ranks rank(s): every output equals the single-process bytes"
done

# The same file with its NaN row dropped (kept as an absent row without edges): the rank holding
# it marks it in its block.
"$knnwb" knn bad.npy -k 9 -b cpu --memory 4K -t 1 -q --drop-missing -o one-dropped.knn 2>/dev/null
"$knnwb" knn bad.npy -k 9 -b cpu --memory 4K -t 1 -q --drop-missing -g mutual \
  -o one-dropped-mutual.mtx 2>/dev/null
for ranks in 2 3; do
  mpi "$ranks" knn bad.npy -k 9 -b cpu --memory 4K -q --drop-missing -o "r$ranks-dropped.knn" \
    2>/dev/null
  cmp one-dropped.knn "r$ranks-dropped.knn" || fail "$ranks ranks: --drop-missing differs"
  mpi "$ranks" knn bad.npy -k 9 -b cpu --memory 4K -q --drop-missing -g mutual \
    -o "r$ranks-dropped-mutual.mtx" 2>/dev/null
  cmp one-dropped-mutual.mtx "r$ranks-dropped-mutual.mtx" ||
    fail "$ranks ranks: --drop-missing mutual .mtx differs"
done

# The reader's warnings name every rank's rows, as one process's do: rows with missing values on
# lines 20 and 290 (ranks 0 and 2 of 3) and the label r5 again on line 280 (rank 2). Before, each
# rank checked its own block and only rank 0 spoke ("1 row with missing values ...", no repeat).
sed -e '20s/\t[^\t]*$/\tNA/' -e '290s/\t[^\t]*$/\tNA/' -e '280s/^r278/r5/' data.tsv >warn.tsv
"$knnwb" knn warn.tsv -k 9 -b cpu -t 1 -q --drop-missing -o one-warn.knn 2>one-warn.txt
grep -c "warning" one-warn.txt | grep -qx 2 || { cat one-warn.txt; fail "one process: warnings"; }
# (HWLOC_COMPONENTS_VERBOSE makes the launcher's notices certain on every machine: only knnwb's
# lines are compared.)
for ranks in 2 3; do
  HWLOC_COMPONENTS_VERBOSE=1 mpi "$ranks" knn warn.tsv -k 9 -b cpu -q --drop-missing \
    -o "r$ranks-warn.knn" 2>"r$ranks-warn.txt"
  grep -q -v '^knnwb: ' "r$ranks-warn.txt" || fail "$ranks ranks: no launcher notice to leave out"
  cmp one-warn.knn "r$ranks-warn.knn" || fail "$ranks ranks: warn.tsv differs"
  diff <(knnwb_lines one-warn.txt) <(knnwb_lines "r$ranks-warn.txt") ||
    fail "$ranks ranks: warnings differ from one process's"
done
# The same warnings where neighbourhood's blocks get a phenotype row (the rows' labels are
# gathered again after it): on warn.tsv, and on the labelled NPY (one process names its repeated
# label too, then fails: an NPY has no sample names to match). Before, the ranks read these blocks
# without their labels: no repeated-label warning, the missing rows without their labels.
awk 'BEGIN { print "sample\tP"; for (j = 0; j < 13; j++) print "c" j "\t" (j * 7) % 5 }' >pheno.tsv
"$knnwb" neighbourhood warn.tsv --phenotype pheno.tsv:P --focus P -k 5 -m euclidean -b cpu -t 1 \
  -q --drop-missing -o one-pheno.gml 2>one-pheno.txt ||
  { cat one-pheno.txt; fail "one process: neighbourhood --phenotype failed"; }
grep -c "warning" one-pheno.txt | grep -qx 2 ||
  { cat one-pheno.txt; fail "one process: neighbourhood --phenotype: warnings"; }
"$knnwb" neighbourhood labelled.npy --phenotype pheno.tsv:P --focus P -k 5 -b cpu -t 1 -q \
  -o one-pheno-npy.gml 2>one-pheno-npy.txt && fail "one process: an NPY matched to samples"
grep -q "repeats an earlier row's label" one-pheno-npy.txt ||
  { cat one-pheno-npy.txt; fail "one process: labelled NPY: no repeated-label warning"; }
for ranks in 2 3; do
  mpi "$ranks" neighbourhood warn.tsv --phenotype pheno.tsv:P --focus P -k 5 -m euclidean -b cpu \
    -q --drop-missing -o "r$ranks-pheno.gml" 2>"r$ranks-pheno.txt" ||
    { cat "r$ranks-pheno.txt"; fail "$ranks ranks: neighbourhood --phenotype failed"; }
  cmp one-pheno.gml "r$ranks-pheno.gml" || fail "$ranks ranks: neighbourhood --phenotype differs"
  diff <(knnwb_lines one-pheno.txt) <(knnwb_lines "r$ranks-pheno.txt") ||
    fail "$ranks ranks: neighbourhood --phenotype: warnings differ from one process's"
  mpi "$ranks" neighbourhood labelled.npy --phenotype pheno.tsv:P --focus P -k 5 -b cpu -q \
    -o "r$ranks-pheno-npy.gml" 2>"r$ranks-pheno-npy.txt" &&
    fail "$ranks ranks: an NPY matched to samples"
  diff <(grep -a '^knnwb: warning: ' one-pheno-npy.txt) \
    <(grep -a '^knnwb: warning: ' "r$ranks-pheno-npy.txt") ||
    fail "$ranks ranks: labelled NPY, --phenotype: warnings differ from one process's"
done
# A purely numeric file: its first column is read as labels, every one a number; one process warns
# (perhaps data), and so must a split run, whose ranks each hold a part of the labels.
cut -f2- data.tsv | tail -n +2 >numeric.tsv
"$knnwb" knn numeric.tsv -k 9 -b cpu -t 1 -q -o one-numeric.knn 2>one-numeric.txt
grep -q "column 1 was read as row labels but holds a number in every row" one-numeric.txt ||
  fail "one process: no warning for numeric labels"
for ranks in 2 3; do
  mpi "$ranks" knn numeric.tsv -k 9 -b cpu -q -o "r$ranks-numeric.knn" 2>"r$ranks-numeric.txt"
  diff <(knnwb_lines one-numeric.txt) <(knnwb_lines "r$ranks-numeric.txt") ||
    fail "$ranks ranks: numeric-label warning differs"
done

# Constant rows in later ranks' blocks (rows 120, 250 and 290: ranks 1 and 2 of 3): the warning of
# --drop-degenerate, and without it the error, count them and name the first as one process's do.
# Before, each rank reported its own block and only rank 0 spoke (no warning, or "1 such row").
awk -F'\t' -v OFS='\t' 'NR == 122 || NR == 252 || NR == 292 { for (j = 2; j <= NF; j++) $j = 1.5 } 1' \
  data.tsv >constant.tsv
"$knnwb" knn constant.tsv -k 9 -m pearson -b cpu -t 1 -q --drop-degenerate -o one-constant.knn \
  2>one-constant.txt
grep -q "3 rows left out.*first: row 120 (r120)" one-constant.txt ||
  { cat one-constant.txt; fail "one process: constant rows' warning"; }
"$knnwb" knn constant.tsv -k 9 -m pearson -b cpu -t 1 -q -o one-refused.knn 2>one-refused.txt &&
  fail "one process: constant rows accepted"
for ranks in 2 3; do
  mpi "$ranks" knn constant.tsv -k 9 -m pearson -b cpu -q --drop-degenerate \
    -o "r$ranks-constant.knn" 2>"r$ranks-constant.txt"
  cmp one-constant.knn "r$ranks-constant.knn" || fail "$ranks ranks: constant.tsv differs"
  diff <(knnwb_lines one-constant.txt) <(knnwb_lines "r$ranks-constant.txt") ||
    fail "$ranks ranks: constant rows' warning differs from one process's"
  mpi "$ranks" knn constant.tsv -k 9 -m pearson -b cpu -q -o "r$ranks-refused.knn" \
    2>"r$ranks-refused.txt" && fail "$ranks ranks: constant rows accepted"
  diff <(knnwb_lines one-refused.txt) <(knnwb_lines "r$ranks-refused.txt") ||
    fail "$ranks ranks: constant rows' error differs from one process's"
done

# Text read by byte ranges: line 300 lies in rank 2's range of 3; lines keep their numbers.
status=0
mpi 3 knn bad.tsv -k 9 -b cpu -q -o out.tsv 2>err.txt || status=$?
[ "$status" -ne 0 ] || fail "a failing rank (text) gave exit status 0"
grep -q "^knnwb: rank 2: bad.tsv:300:" err.txt || { cat err.txt; fail "no message from rank 2 (text)"; }
[ ! -e out.tsv ] || fail "a failed text run left an output"

# Row 301 holds a NaN: with 3 ranks only rank 2 reads it (split memory: rank 2 reads only rows
# 205..306 of the file). The job stops with that rank's message, a non-zero status, and the previous
# output untouched.
echo previous >out.knn
status=0
mpi 3 knn bad.npy -k 9 -b cpu -q -o out.knn 2>err.txt || status=$?
cat err.txt
[ "$status" -ne 0 ] || fail "a failing rank gave exit status 0"
grep -q "^knnwb: rank 2: bad.npy: row 301, column 3: NaN" err.txt || fail "no message from rank 2"
[ "$(cat out.knn)" = previous ] || fail "the previous output was touched"
! ls -a | grep -q '^\.knnwb-' || fail "a temporary file was left behind"

# --lists-dtype 32 with a distance that float32 cannot hold (rows 5 and 6 at +-3e38, rank 1's at 2
# ranks): every rank stops with that rank's message naming the row, the previous output untouched,
# no temporary left (split and whole input).
python3 - <<'PY'
import struct
rows = [[0.0, 0.0]] * 5 + [[3e38, 3e38], [-3e38, -3e38]]
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (7, 2), }"
header += " " * (64 - (10 + len(header) + 1) % 64) + "\n"
with open("huge.npy", "wb") as out:
    out.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    for row in rows:
        out.write(struct.pack("<2f", *row))
PY
for mode in split whole; do
  echo previous >huge32.npy
  status=0
  mpi 2 knn huge.npy -k 2 -m euclidean -b cpu -q --lists-dtype 32 --mpi-input $mode -o huge32.npy \
    2>err.txt || status=$?
  [ "$status" -ne 0 ] || fail "32-bit lists beyond float32 ($mode) gave exit status 0"
  grep -q "^knnwb: rank 1: huge32.distances.npy: row 5's distance .* is beyond float32's range" \
    err.txt || { cat err.txt; fail "no message naming row 5 ($mode)"; }
  [ "$(cat huge32.npy)" = previous ] || fail "the previous output was touched ($mode)"
  ! ls -a | grep -q '^\.knnwb-' || fail "a temporary file was left behind ($mode)"
done

# One rank's write fails (a full disk seen by that rank alone, KNNWB_MPI_WRITE_FAIL_RANK): every
# rank stops with its message, the previous outputs (and side files) stay, no temporary is left.
for ext in npy npz mtx knn tsv union.knn mutual.mtx; do
  graph=directed
  case $ext in union.* | mutual.*) graph=${ext%.*} ;; esac
  for failing in 0 2; do
    echo previous >"fail.$ext"
    echo previous >fail.distances.npy
    echo previous >fail.rows.txt
    echo previous >fail.mutual.rows.txt
    status=0
    KNNWB_MPI_WRITE_FAIL_RANK=$failing mpi 3 knn data.tsv -k 9 -b cpu -q -g "$graph" \
      -o "fail.$ext" 2>err.txt || status=$?
    [ "$status" -ne 0 ] || fail "a failing write (rank $failing, .$ext) gave exit status 0"
    grep -q "^knnwb: rank $failing: fail.$ext: cannot write: " err.txt ||
      { cat err.txt; fail "no message from rank $failing's write (.$ext)"; }
    for f in "fail.$ext" fail.distances.npy fail.rows.txt fail.mutual.rows.txt; do
      [ "$(cat "$f")" = previous ] || fail "a failing write (rank $failing, .$ext) touched $f"
    done
    ! ls -a | grep -q '^\.knnwb-' || fail "a failing write (.$ext) left a temporary file"
  done
done
echo "a rank whose write fails: no output, the previous files kept"
# The distances file fails on one rank (KNNWB_MPI_WRITE_FAIL_FILE: a full disk at that rank's first
# slice of it) while every rank writes the indices file too, at once: the job stops with the
# message naming the distances file, both previous files stay, no temporary is left.
for ranks in 2 3; do
  for failing in 0 $((ranks - 1)); do
    echo previous >both.npy
    echo previous >both.distances.npy
    status=0
    KNNWB_MPI_WRITE_FAIL_RANK=$failing KNNWB_MPI_WRITE_FAIL_FILE=.distances.npy \
      mpi "$ranks" knn slices.npy -k 60 -m euclidean -b cpu -q -o both.npy 2>err.txt || status=$?
    [ "$status" -ne 0 ] || fail "a failing distances file ($ranks ranks, rank $failing): exit status 0"
    grep -q "^knnwb: rank $failing: both.distances.npy: cannot write: " err.txt ||
      { cat err.txt; fail "no message naming the distances file ($ranks ranks, rank $failing)"; }
    for f in both.npy both.distances.npy; do
      [ "$(cat "$f")" = previous ] || fail "a failing distances file ($ranks ranks) touched $f"
    done
    ! ls -a | grep -q '^\.knnwb-' || fail "a failing distances file ($ranks ranks) left a temporary"
  done
done
echo "a rank whose distances file fails: no output, both previous files kept"

# The same bad line in a pipeline and in `knnwb neighbourhood`: rank 2 alone reads it.
echo previous >bad-run.gml
status=0
mpi 3 run labels.xml -q --set in=bad.tsv --set out=bad-run 2>err.txt || status=$?
[ "$status" -ne 0 ] || fail "a failing rank (pipeline) gave exit status 0"
grep -q "labels.xml:3: step 'data' (load-matrix) failed: rank 2: .*bad.tsv:300:" err.txt ||
  { cat err.txt; fail "no message from rank 2 (pipeline)"; }
[ "$(cat bad-run.gml)" = previous ] || fail "a failed pipeline touched the previous output"
[ ! -e bad-run-labels.tsv ] || fail "a failed pipeline left an output"
echo previous >bad-nb.gml
status=0
mpi 3 neighbourhood bad.tsv --focus r250 -k 6 -b cpu -q -o bad-nb.gml --table bad-nb.tsv \
  2>err.txt || status=$?
[ "$status" -ne 0 ] || fail "a failing rank (neighbourhood) gave exit status 0"
grep -q "^knnwb: rank 2: bad.tsv:300:" err.txt || { cat err.txt; fail "no message from rank 2 (neighbourhood)"; }
[ "$(cat bad-nb.gml)" = previous ] || fail "a failed neighbourhood touched the previous output"
[ ! -e bad-nb.tsv ] || fail "a failed neighbourhood left an output"
! ls -a | grep -q '^\.knnwb-' || fail "a temporary file was left behind"
# The phenotype table is read by every rank (the samples it leaves out leave every rank's rows):
# its error stops every rank, told by the lowest.
status=0
mpi 3 neighbourhood "$synthetic/synthetic_expression.tsv" --phenotype \
  "$synthetic/synthetic_clinical.tsv:nope" --focus YearsToRelapse -k 5 -b cpu -q -o bad-nb.gml \
  2>err.txt || status=$?
[ "$status" -ne 0 ] || fail "a failing phenotype row gave exit status 0"
grep -q "^knnwb: rank [0-9]: .*synthetic_clinical.tsv:1: no column 'nope'" err.txt ||
  { cat err.txt; fail "no message from a rank (phenotype)"; }
[ "$(cat bad-nb.gml)" = previous ] || fail "a failed neighbourhood touched the previous output"
# A step of rank 0's own fails (a malformed .knn file) while the other ranks wait for the split
# kNN step after it: all stop, with rank 0's message.
printf 'x y\n' >bad.knn
cat >rank0.xml <<'XML'
<?xml version="1.0" encoding="UTF-8"?><pipeline name="rank0" version="1">
<step id="a" type="load-matrix"><param name="path" value="data.tsv"/></step>
<step id="graph" type="load-knn"><param name="path" value="bad.knn"/></step>
<step id="g" type="knn-graph"><input name="data" step="a"/><param name="k" value="5"/>
<param name="backend" value="cpu"/></step>
<step id="w" type="write-graph"><input name="graph" step="g"/><param name="path" value="rank0.knn"/></step>
</pipeline>
XML
status=0
mpi 3 run rank0.xml -q 2>err.txt || status=$?
[ "$status" -ne 0 ] || fail "a failing rank 0 step gave exit status 0"
grep -q "^rank 0: rank0.xml:3: step 'graph' (load-knn) failed: .*bad.knn:1:1:" err.txt ||
  { cat err.txt; fail "no message from rank 0's step"; }
[ ! -e rank0.knn ] || fail "a failed pipeline (rank 0's step) left an output"
echo "a failing rank stops the job with its message"

# Ranks all on one host start with Open MPI's ob1 layer alone: its default also opens the cm layer,
# whose libfabric/PSM probing took 0.2 s of every start; a layer the user names is kept.
"$mpiexec" --oversubscribe --allow-run-as-root --mca pml_base_verbose 10 -np 2 "$knnwb" knn \
  small.npy -k 1 -b cpu -q -o pml.knn >pml.txt 2>&1 || { cat pml.txt; fail "the ob1 start failed"; }
grep -q "component ob1 selected" pml.txt || { cat pml.txt; fail "ob1 was not selected"; }
if grep -q "found loaded component cm" pml.txt; then
  cat pml.txt
  fail "the cm layer was opened although every rank is on this host"
fi
"$mpiexec" --oversubscribe --allow-run-as-root --mca pml_base_verbose 10 --mca pml ob1,cm -np 2 \
  "$knnwb" knn small.npy -k 1 -b cpu -q -o pml.knn >pml.txt 2>&1 || true
grep -q "found loaded component cm" pml.txt || { cat pml.txt; fail "the user's --mca pml was not kept"; }
echo "one host: the ob1 layer alone; the user's choice kept"

# Ranks that mpirun does not bind (--bind-to none) build their own hwloc topology in MPI_Init; on one
# host they leave out I/O devices (PCI configuration space, block and network devices: a third of
# MPI_Init in a VM); mpirun's own discovery keeps them (its lines name pci); a HWLOC_COMPONENTS of
# the user's reaches the ranks unchanged.
HWLOC_COMPONENTS_VERBOSE=1 "$mpiexec" --oversubscribe --allow-run-as-root --bind-to none -np 2 \
  "$knnwb" knn small.npy -k 1 -b cpu -q -o hwloc.knn >hwloc.txt 2>&1 ||
  { cat hwloc.txt; fail "the hwloc start failed"; }
# (A rank's list without I/O phases starts "linux(0x2)"; with them, as mpirun's, "linux(0x7a)";
# mpirun's own lines are counted with a job that builds no topology of its own, `true`.)
HWLOC_COMPONENTS_VERBOSE=1 "$mpiexec" --oversubscribe --allow-run-as-root --bind-to none -np 2 \
  true >hwloc-mpirun.txt 2>&1 || true
full=$(grep -c "discovery components: linux(0x7a)" hwloc-mpirun.txt || true)
if grep -q "discovery components: linux(0x2)" hwloc.txt; then
  [ "$(grep -c "discovery components: linux(0x7a)" hwloc.txt || true)" -le "$full" ] ||
    { cat hwloc.txt; fail "a rank's hwloc still discovered I/O devices"; }
  HWLOC_COMPONENTS=-gl HWLOC_COMPONENTS_VERBOSE=1 "$mpiexec" --oversubscribe --allow-run-as-root \
    --bind-to none -np 2 "$knnwb" knn small.npy -k 1 -b cpu -q -o hwloc.knn >hwloc.txt 2>&1 || true
  if grep -q "discovery components: linux(0x2)" hwloc.txt; then
    cat hwloc.txt
    fail "the user's HWLOC_COMPONENTS was not kept"
  fi
  echo "one host: the ranks' hwloc without I/O devices; the user's HWLOC_COMPONENTS kept"
elif [ "$(grep -c "discovery components: linux(0x7a)" hwloc.txt || true)" -gt "$full" ]; then
  cat hwloc.txt
  fail "the ranks' hwloc still discovered I/O devices"
else
  echo "the ranks built no hwloc topology of their own here: the hwloc check skipped"
fi

# Ctrl-C or SIGTERM on mpirun: Open MPI ends the job by sending the ranks SIGCONT, SIGTERM a second
# later, then SIGKILL; the ranks stop at the SIGCONT (before they waited for the SIGTERM, and a run
# ending within that second committed its outputs after the user's signal). What is asserted is the
# behaviour: the job stopped (not status 0, the interruption message), the previous output is kept
# and no temporary is left. The seconds are reported, not asserted but against a hang (mpirun waits
# its second before it exits, about two when the ranks waited for the SIGTERM, and 2.0 s was seen
# under load with the SIGCONT taken): tests/distributed/bench_mpi_signal.sh measures them.
python3 "$here/make_npy.py" long.npy 60000 64 5
for sig in INT TERM; do
  echo previous >sig.knn
  (exec_mpi 2 knn long.npy -k 10 -m manhattan -b cpu -t 1 -o sig.knn 2>sig.err) &
  pid=$!
  wait_ranks_ready "$pid" || fail "SIG$sig on mpirun: the ranks never installed their signal handlers"
  sleep 0.3
  start=$(date +%s%N)
  kill -"$sig" "$pid"
  status=0
  wait "$pid" || status=$?
  elapsed=$((($(date +%s%N) - start) / 1000000))
  [ "$status" -ne 0 ] || fail "SIG$sig on mpirun: exit status 0 (did the run end before the signal?)"
  grep -q "interrupted; no output written" sig.err || { cat sig.err; fail "SIG$sig: no interruption message"; }
  [ "$(cat sig.knn)" = previous ] || fail "SIG$sig on mpirun: the previous output was replaced"
  ! ls -a | grep -q '^\.knnwb-' || fail "SIG$sig on mpirun: a temporary file was left behind"
  [ "$elapsed" -lt 20000 ] || fail "SIG$sig on mpirun: the job took $elapsed ms to end (hung?)"
  echo "SIG$sig on mpirun: no output, the job ended $elapsed ms after the signal"
done
# SIGINT to rank 0 alone (a batch system's signal to one process, not mpirun): the job stops, and
# every rank exits 130, so that mpirun says so whichever rank exits first (rank 1 returned 1 for
# the agreed stop, and mpirun reported it when it came first). Rank 1 takes the stop from the
# host's stop word, not at its next agreement: both ranks wait at the start of their write
# (KNNWB_MPI_WRITE_PAUSE) for their own cancel flag, which rank 1 sees only through the word
# (without it rank 1 waited out the pause's 20 s). Then, while the interrupted ranks wait for
# hold.flag (KNNWB_MPI_WRITE_PAUSE_HOLD), a SIGINT to rank 1 as well is still its first signal,
# not the user insisting: rank 1 stops cleanly instead of dying by it.
echo previous >sig.npy
rm -f pause.flag hold.flag
(KNNWB_MPI_WRITE_PAUSE=pause.flag KNNWB_MPI_WRITE_PAUSE_HOLD=hold.flag KNNWB_MPI_VERBOSE=1 \
  G_MESSAGES_DEBUG=all exec_mpi 2 knn data.tsv -k 9 -b cpu -t 1 -o sig.npy 2>sig.err) &
pid=$!
for _ in $(seq 200); do [ -e pause.flag ] && break; sleep 0.1; done
[ -e pause.flag ] || fail "SIGINT to rank 0 alone: the ranks never reached their write"
rank0= rank1=
for child in $(ps -o pid= --ppid "$pid"); do
  env_of=$(tr '\0' '\n' <"/proc/$child/environ" 2>/dev/null || true)
  grep -qx 'OMPI_COMM_WORLD_RANK=0' <<<"$env_of" && rank0=$child
  grep -qx 'OMPI_COMM_WORLD_RANK=1' <<<"$env_of" && rank1=$child
done
[ -n "$rank0" ] && [ -n "$rank1" ] || fail "SIGINT to rank 0 alone: mpirun's children are not ranks 0 and 1"
kill -INT "$rank0"
for _ in $(seq 200); do grep -q "taken by another rank" sig.err && break; sleep 0.1; done
kill -INT "$rank1" || fail "SIGINT to rank 1 as well: rank 1 had ended before its hold"
touch hold.flag
status=0
wait "$pid" || status=$?
[ "$status" -eq 130 ] || { cat sig.err; fail "SIGINT to rank 0 alone: exit status $status, not 130"; }
grep -q "knnwb: stopped by signal 2, taken by another rank" sig.err ||
  { cat sig.err; fail "SIGINT to rank 0 alone: rank 1 did not take the stop from the stop word"; }
! grep -q "exited on signal" sig.err ||
  { cat sig.err; fail "SIGINT to rank 0, then rank 1: a rank died by the signal"; }
[ "$(cat sig.npy)" = previous ] || fail "SIGINT to rank 0 alone: the previous output was replaced"
! ls -a | grep -q '^\.knnwb-' || fail "SIGINT to rank 0 alone: a temporary file was left behind"
echo "SIGINT to rank 0 alone: rank 1 takes the stop, the job ends 130, no output"
# SIGINT on mpirun while every rank writes its rows (the ranks wait at the start of their write
# until the signal, KNNWB_MPI_WRITE_PAUSE): no output, the previous files untouched.
for ext in npy npz mtx; do
  echo previous >"sig.$ext"
  echo previous >sig.distances.npy
  rm -f pause.flag
  (KNNWB_MPI_WRITE_PAUSE=pause.flag exec_mpi 2 knn data.tsv -k 9 -b cpu -t 1 -o "sig.$ext" \
    2>sig.err) &
  pid=$!
  for _ in $(seq 100); do [ -e pause.flag ] && break; sleep 0.1; done
  [ -e pause.flag ] || fail "the ranks never reached their write (.$ext)"
  kill -INT "$pid"
  status=0
  wait "$pid" || status=$?
  [ "$status" -ne 0 ] || fail "SIGINT during the write (.$ext): exit status 0"
  grep -q "interrupted; no output written" sig.err || { cat sig.err; fail "SIGINT during the write (.$ext): no message"; }
  [ "$(cat "sig.$ext")" = previous ] || fail "SIGINT during the write: the previous .$ext was replaced"
  [ "$(cat sig.distances.npy)" = previous ] || fail "SIGINT during the write: the side file was replaced"
  [ ! -e sig.rows.txt ] || fail "SIGINT during the write: a .rows.txt was left"
  ! ls -a | grep -q '^\.knnwb-' || fail "SIGINT during the write (.$ext): a temporary file was left behind"
done
echo "SIGINT during the ranks' write: no output"
# A write that runs out of room (a full disk, a file size limit): Open MPI's MPI_File_write_at
# says success for a short write, so each rank checks the count. Every rank under `ulimit -f`
# (messages between ranks over TCP and no shared window: Open MPI's own shared-memory files need
# room too): exit status 1, the reason, the previous output untouched, no temporary.
python3 "$here/make_npy.py" room-input.npy 3000 8 1
for ext in knn tsv npy; do
  echo previous >"room.$ext"
  status=0
  KNNWB_MPI_SHARED=0 "$mpiexec" --oversubscribe --allow-run-as-root --mca btl self,tcp -np 2 \
    sh -c "ulimit -f 100; exec \"$knnwb\" knn room-input.npy -k 10 -b cpu -t 1 -q -o room.$ext" \
    2>room.err || status=$?
  [ "$status" -ne 0 ] || fail "a write beyond the file size limit (.$ext): exit status 0"
  grep -q "write failed: File too large" room.err || { cat room.err; fail "a short write (.$ext): no reason given"; }
  [ "$(cat "room.$ext")" = previous ] || fail "a short write (.$ext): the previous output was replaced"
  ! ls -a | grep -q '^\.knnwb-' || fail "a short write (.$ext): a temporary file was left behind"
done
echo "a write beyond the file size limit: exit 1, the reason, the previous outputs kept"
# One progress line for the whole job, on the user's terminal: a rank's stderr is mpirun's pipe,
# so rank 0 looks at mpirun's own stderr (script(1) gives mpirun a terminal here); the other ranks
# stay silent, --quiet silences it, and a log file (no terminal) gets no \r lines.
if command -v script >/dev/null; then
  python3 "$here/make_npy.py" progress.npy 20000 32 6
  for quiet in "" -q; do
    rm -f progress.txt
    script -qec "$mpiexec --oversubscribe --allow-run-as-root --mca btl self,vader --mca btl_vader_single_copy_mechanism none --tag-output -np 2 $knnwb knn progress.npy -k 10 -b cpu -t 1 $quiet -o progress.knn" progress.txt >/dev/null ||
      { cat progress.txt; fail "the run under script(1) failed"; }
    updates=$(tr '\r' '\n' <progress.txt | grep -c '^knn: .*%' || true)
    writes=$(tr '\r' '\n' <progress.txt | grep -c '^write: .*%' || true)
    summaries=$(grep -c 'knnwb: .* 2 ranks' progress.txt || true)
    if [ -z "$quiet" ]; then
      [ "$updates" -ge 1 ] && [ "$writes" -ge 1 ] ||
        { cat -v progress.txt; fail "mpirun on a terminal: no progress line (knn $updates, write $writes)"; }
      # --tag-output starts each rank's lines with [job,rank]: rank 0's alone may hold progress.
      ! grep -a -E '\[[0-9]+,[1-9][0-9]*\]<stderr>:.(knn|write): ' progress.txt ||
        { cat -v progress.txt; fail "mpirun on a terminal: a rank other than 0 showed progress"; }
      [ "$summaries" -eq 1 ] || { cat -v progress.txt; fail "mpirun on a terminal: $summaries summary lines"; }
    else
      [ "$updates" -eq 0 ] && [ "$writes" -eq 0 ] || { cat -v progress.txt; fail "--quiet under mpirun: progress shown"; }
    fi
  done
  exec_mpi_log=$( (exec_mpi 2 knn progress.npy -k 10 -b cpu -t 1 -o progress.knn) 2>&1 >/dev/null)
  case "$exec_mpi_log" in *$'\r'*) fail "mpirun into a log: progress lines written" ;; esac
  echo "progress under mpirun: one line from rank 0 on a terminal, none with -q or into a log"
else
  echo "progress under mpirun: skipped (no script(1))"
fi
# Job control is not an interruption: Ctrl-Z on mpirun stops the ranks (SIGSTOP), fg resumes them
# (SIGCONT), and the run ends with the single process's bytes; also when a rank reads the SIGCONT
# only after its ticker resumed (KNNWB_SIGNALS_CONT_DELAY_MS=50: the kernel may wake either first).
# (30,000 rows: about 2 s of Manhattan scans for 2 ranks on the 2-core VM, so the stop falls
# inside the run; 6,000 rows had become quick enough to end before it.)
python3 "$here/make_npy.py" jc.npy 30000 64 6
"$knnwb" knn jc.npy -k 10 -m manhattan -b cpu -t 1 -q -o one-jc.knn
for delay in 0 50; do
  rm -f jc.knn
  (KNNWB_SIGNALS_CONT_DELAY_MS=$delay exec_mpi 2 knn jc.npy -k 10 -m manhattan -b cpu -t 1 -q -o jc.knn 2>jc.err) &
  pid=$!
  # The stop must find the ranks' handlers installed (wait_ranks_ready).
  wait_ranks_ready "$pid" || fail "job control: the ranks never installed their signal handlers"
  sleep 0.1
  kill -TSTP "$pid" 2>/dev/null || fail "job control: the run ended before the stop (make jc.npy bigger)"
  # mpirun passes the stop on from its event loop, late under load: the resume must come after both
  # ranks stopped, and 0.5 s after (a SIGCONT from mpirun that finds a rank's last tick younger than
  # 200 ms is the launcher ending the job: plugin/host/runtime/signals.c). At most 20 s.
  stopped=0
  for _ in $(seq 2000); do
    stopped=$(ps -o stat= --ppid "$pid" | grep -c '^T' || true)
    [ "$stopped" -ge 2 ] && break
    sleep 0.01
  done
  [ "$stopped" -ge 2 ] || fail "job control: $stopped rank(s) stopped after Ctrl-Z on mpirun"
  sleep 0.5
  kill -CONT "$pid" 2>/dev/null || fail "job control: the run ended while stopped"
  status=0
  wait "$pid" || status=$?
  [ "$status" -eq 0 ] || { cat jc.err; fail "a run stopped and resumed through mpirun failed ($status; SIGCONT read $delay ms late)"; }
  cmp -s one-jc.knn jc.knn || fail "a run stopped and resumed through mpirun: bytes differ (SIGCONT read $delay ms late)"
done
echo "job control through mpirun: $stopped rank(s) seen stopped, resumed, same bytes"

# Dense ties (two columns: every correlation is +-1 up to rounding, so every row's screening window
# holds most rows): the split ranks compare the rows left with every row (each rank its block's
# exact k best, merged on the rows' owner; the debug line says so) and write one process's bytes.
python3 "$here/make_npy.py" dense.npy 2001 2 7
"$knnwb" knn dense.npy -k 3 -m abs-pearson -b cpu -q -o one-dense.knn
G_MESSAGES_DEBUG=all mpi 2 knn dense.npy -k 3 -m abs-pearson -b cpu -q -o dense.knn >dense.err 2>&1 ||
  { cat dense.err; fail "dense ties on 2 split ranks failed"; }
grep -q "compared with every row" dense.err ||
  fail "dense ties: the split ranks did not compare the rows left with every row"
cmp -s one-dense.knn dense.knn || fail "dense ties: 2 split ranks differ from one process"
echo "dense ties on 2 split ranks: rows compared with every row, same bytes"

# A command's help under mpirun: rank 0 prints it once and every rank exits 0 (GOption exits as it
# prints, which made a rank leave without MPI_Finalize: mpirun reported the job as failed).
for help in --help -h --help-all; do
  status=0
  mpi 2 knn "$help" >help.out 2>help.err || status=$?
  [ "$status" -eq 0 ] || { cat help.err; fail "knnwb knn $help under mpirun: exit status $status"; }
  [ "$(grep -c '^Usage:' help.out)" -eq 1 ] || { cat help.out; fail "knnwb knn $help under mpirun: not one usage text"; }
done
# Help inside a cluster of short options is an unknown option, a usage error on every rank (GLib's
# own help exited there); the program's usage and version print once.
status=0
mpi 2 knn -qh >help.out 2>help.err || status=$?
[ "$status" -eq 2 ] || { cat help.err; fail "knnwb knn -qh under mpirun: exit status $status, not 2"; }
grep -q "Unknown option" help.err || { cat help.err; fail "knnwb knn -qh under mpirun: no reason given"; }
mpi 2 --help >help.out 2>help.err || { cat help.err; fail "knnwb --help under mpirun failed"; }
[ "$(grep -c '^Usage:' help.out)" -eq 1 ] || { cat help.out; fail "knnwb --help under mpirun: not one usage text"; }
echo "help under mpirun: printed once, exit status 0; -qh a usage error"
