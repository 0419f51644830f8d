#!/usr/bin/env bash
# One rank alone fails (or sees another environment) under mpirun: every rank must still reach the
# same collectives, so the job ends, non-zero, with the failing rank's reason, no output and the
# previous output untouched; a knob set on one rank only is replaced by rank 0's. Each failure comes
# from the outside of one rank of an MPMD launch (`mpirun ... -np 1 A : -np 1 B`): another working
# directory, a descriptor limit, another environment. Every mpirun runs under
# `timeout`, so that a hang (the bug) fails the test instead of blocking it.
# Usage: mpi_one_rank.sh KNNWB MPIEXEC SOURCE_DIR
set -euo pipefail
knnwb=$1
mpiexec=$2
here=$3/tests/distributed
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# A job that has not ended after this many seconds hung (each runs in a second or two).
limit=60
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# mpirun itself may outlive timeout's SIGTERM, its ranks stuck in a collective: -k ends it.
# Two ranks, each its own command line (MPMD): mpmd 'RANK 0 WORDS' 'RANK 1 WORDS'. Each side runs
# under bash, so that it may change directory or set a limit before it starts knnwb.
# Flags as mpi_check.sh's: shared memory without the single-copy path, ranks may oversubscribe.
mpmd() {
  timeout -k 10 "$limit" "$mpiexec" --oversubscribe --allow-run-as-root --mca btl self,vader \
    --mca btl_vader_single_copy_mechanism none -np 1 bash -c "$1" : -np 1 bash -c "$2"
}
# Runs mpmd, expecting a failure: its status (124, or 137 after -k: hung) in $status, stderr in
# err.txt.
mpmd_fails() {
  status=0
  mpmd "$1" "$2" >out.txt 2>err.txt || status=$?
  [ "$status" -ne 124 ] && [ "$status" -ne 137 ] || { cat err.txt; fail "$3: the job hung (killed after $limit s)"; }
  [ "$status" -ne 0 ] || { cat err.txt; fail "$3: exit status 0"; }
}
no_temporaries() {
  ! find . -name '.knnwb-*' | grep -q . || { find . -name '.knnwb-*'; fail "$1: a temporary was left"; }
}
# stops CASE REASON KEPT RANK0 RANK1: the job fails with a line of stderr matching REASON, KEPT (a
# file that held "previous") untouched or, with !PATH, PATH not written, and no temporary left.
stops() {
  mpmd_fails "$4" "$5" "$1"
  grep -q "$2" err.txt || { cat err.txt; fail "$1: no reason given"; }
  case "$3" in
    !*) [ ! -e "${3#!}" ] || fail "$1: ${3#!} was written" ;;
    *) [ "$(cat "$3")" = previous ] || fail "$1: $3 replaced" ;;
  esac
  no_temporaries "$1"
}

python3 "$here/make_npy.py" data.npy 3000 8 1
data=$work/data.npy

# MPI_File_open is collective, and a rank that fails in it alone (Open MPI's ompio) leaves the
# others waiting inside it: the ranks check that each can open the files first, and agree.
# A directory that one rank's host does not see: rank 1 works in another directory, where rank 0's
# output directory (a relative path) does not exist (its own -o names one that does).
mkdir -p out elsewhere/other
for ext in knn npy; do
  echo previous >"out/x.$ext"
  stops "the output's directory unseen by one rank (.$ext)" \
    "^knnwb: rank 1: out/x\.$ext: cannot open for writing: No such file or directory" "out/x.$ext" \
    "exec '$knnwb' knn $data -k 5 -b cpu -t 1 -q -o out/x.$ext" \
    "cd elsewhere && exec '$knnwb' knn $data -k 5 -b cpu -t 1 -q -o other/x.$ext"
  [ ! -e out/x.distances.npy ] || fail "the output's directory unseen by one rank: a side file written"
done
echo "the output's directory unseen by one rank: every rank stops with its reason"
# A folder of the same name that is not rank 0's (hosts whose file systems are not shared): rank 1
# must not write its rows into a file of its own there (it did: the job ended 0 with an output
# that lacked them, and left a temporary beside rank 1).
mkdir -p unshared/out
echo previous >out/x.knn
stops "an output folder of rank 1's own" \
  "^knnwb: rank 1: .*cannot open for writing: No such file or directory" out/x.knn \
  "exec '$knnwb' knn $data -k 5 -b cpu -t 1 -q -o out/x.knn" \
  "cd unshared && exec '$knnwb' knn $data -k 5 -b cpu -t 1 -q -o out/x.knn"
[ -z "$(ls -A unshared/out)" ] || { ls -la unshared/out; fail "an output folder of rank 1's own: rank 1 wrote there"; }
echo "an output folder of rank 1's own: every rank stops with its reason"
# A descriptor limit on rank 1 alone: from a limit that lets the whole run through, down until
# knnwb's check (not MPI's start) stops it. Every run must end; the exact count MPI needs varies.
seen=
stopped=
for files in 24 22 21 20 19 18 17 16 15 14; do
  echo previous >out/x.knn
  status=0
  mpmd "exec '$knnwb' knn $data -k 5 -b cpu -t 1 -q -o out/x.knn" \
    "ulimit -n $files; exec '$knnwb' knn $data -k 5 -b cpu -t 1 -q -o out/x.knn" \
    >out.txt 2>err.txt || status=$?
  [ "$status" -ne 124 ] || { cat err.txt; fail "ulimit -n $files on rank 1: the job hung"; }
  [ "$status" -eq 0 ] && continue
  stopped=$files
  if grep -q "^knnwb: rank 1: out/x.knn: cannot open for writing: Too many open files" err.txt; then
    seen=$files
    [ "$(cat out/x.knn)" = previous ] || fail "ulimit -n $files on rank 1: the previous output was replaced"
    no_temporaries "ulimit -n $files on rank 1"
    break
  fi
done
if [ -n "$seen" ]; then
  echo "ulimit -n $seen on rank 1: every rank stops with its reason"
elif [ -z "$stopped" ]; then
  fail "ulimit -n 14 to 24 on rank 1: every run went through, the check was never reached"
else
  echo "ulimit -n on rank 1: MPI itself failed before knnwb's check at every limit (skipped)"
fi

# A knob that chooses collectives, set on one rank only (KNNWB_MPI_SHARED=0: messages instead of the
# shared window; the ranks' calls mismatched and Open MPI aborted the job): every rank takes rank
# 0's environment, rank 0 says which differed, and the bytes are one process's.
"$knnwb" knn "$data" -k 5 -b cpu -t 1 -q -o one.knn
for side in 0 1; do
  rank0="exec '$knnwb' knn $data -k 5 -b cpu -t 1 -q -o knob.knn"
  rank1=$rank0
  if [ "$side" = 0 ]; then rank0="KNNWB_MPI_SHARED=0 $rank0"; else rank1="KNNWB_MPI_SHARED=0 $rank1"; fi
  status=0
  mpmd "$rank0" "$rank1" >out.txt 2>err.txt || status=$?
  [ "$status" -eq 0 ] || { cat err.txt; fail "KNNWB_MPI_SHARED=0 on rank $side alone: exit status $status"; }
  grep -q "^knnwb: warning: the ranks' KNNWB_\* environments differ (rank 1: KNNWB_MPI_SHARED" err.txt ||
    { cat err.txt; fail "KNNWB_MPI_SHARED=0 on rank $side alone: no warning"; }
  cmp -s one.knn knob.knn || fail "KNNWB_MPI_SHARED=0 on rank $side alone: bytes differ from one process"
done
echo "a knob set on one rank alone: rank 0's value on every rank, a warning, one process's bytes"

# The commands' own checks of the file system, each rank its own (a relative path under another
# working directory stands for a directory another host does not see): the ranks agree on them
# before the first collective (the backend's choice), instead of one rank returning alone.
expression=$3/share/examples/data/synthetic_expression.tsv
focus=$(awk 'NR == 2 {print $1}' "$expression")
echo previous >out/nb.gml
stops "neighbourhood, the output's directory unseen by one rank" "^knnwb: rank 1: .*out/nb.gml" \
  out/nb.gml \
  "exec '$knnwb' neighbourhood $expression --focus $focus -k 5 -b cpu -t 1 -q -o out/nb.gml" \
  "cd elsewhere && exec '$knnwb' neighbourhood $expression --focus $focus -k 5 -b cpu -t 1 -q -o out/nb.gml"
# --into (an .h5ad output's source) that one rank does not find.
touch into.h5ad
stops "--into unseen by one rank" "^knnwb: rank 1: --into into.h5ad: no such file" '!out/g.h5ad' \
  "exec '$knnwb' knn $data -k 5 -b cpu -t 1 -q -o out/g.h5ad --into into.h5ad" \
  "cd elsewhere && exec '$knnwb' knn $data -k 5 -b cpu -t 1 -q -o other/g.h5ad --into into.h5ad"
echo "a file-system check that fails on one rank alone: every rank stops with its reason"

# cluster: every rank reads the input and the kNN lists are collective, so a rank that cannot read
# (here a relative input under another working directory) stops every rank with its reason. Only
# rank 0 writes: an output directory that rank 1 does not see is no failure, and the bytes are
# one process's.
echo previous >out/c.tsv
stops "cluster, the input unseen by one rank" "^knnwb: rank 1: data.npy: cannot open" out/c.tsv \
  "exec '$knnwb' cluster data.npy --method leiden -k 5 -b cpu -t 1 -q -o out/c.tsv" \
  "cd elsewhere && exec '$knnwb' cluster data.npy --method leiden -k 5 -b cpu -t 1 -q -o out/c.tsv"
"$knnwb" cluster "$data" --method leiden -k 5 -b cpu -t 1 -q -o one-c.tsv
mpmd "exec '$knnwb' cluster $data --method leiden -k 5 -b cpu -t 1 -q -o out/c.tsv" \
  "cd elsewhere && exec '$knnwb' cluster $data --method leiden -k 5 -b cpu -t 1 -q -o out/c.tsv" \
  >out.txt 2>err.txt || { cat err.txt; fail "cluster, rank 1 without the output's directory: failed"; }
cmp -s one-c.tsv out/c.tsv || fail "cluster under mpirun: the table differs from one process's"
no_temporaries "cluster, rank 1 without the output's directory"
echo "cluster: a read that fails on one rank alone stops every rank; rank 0 alone writes"

# run and classify: every rank loads the pipeline and checks its inputs; a rank that failed alone
# returned before the runner's first meeting, where the others waited.
cat >p.xml <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<pipeline name="one-rank" version="1">
  <step id="load" type="load-matrix"><param name="path" value="$data"/></step>
  <step id="g" type="knn-graph"><input name="data" step="load"/><param name="k" value="5"/></step>
  <step id="w" type="write-graph"><input name="graph" step="g"/><param name="path" value="p.gml"/></step>
</pipeline>
EOF
stops "run, the pipeline unseen by one rank" "^rank 1: p.xml: cannot read" '!p.gml' \
  "exec '$knnwb' run p.xml -q -t 1" "cd elsewhere && exec '$knnwb' run p.xml -q -t 1"
examples=$3/share/examples/data
cp "$examples/synthetic_clinical.tsv" clinical.tsv
classify="classify $examples/synthetic_expression.tsv --transpose -k 3 -t 1 -q"
stops "classify, the classes unseen by one rank" "^knnwb: rank 1: clinical.tsv: cannot open" \
  '!out/cl.tsv' \
  "exec '$knnwb' $classify --classes clinical.tsv:Group -o out/cl.tsv" \
  "cd elsewhere && exec '$knnwb' $classify --classes clinical.tsv:Group -o out/cl.tsv"
echo "run, classify: a pipeline or file unseen by one rank stops every rank with its reason"
# Rank 0 alone writes a pipeline's outputs: a rank whose host does not see the output's folder
# (rank 1 works where out/ does not exist) still takes its part, and the job writes one process's
# bytes (every rank checked the folder before, and the job stopped with rank 1's reason).
"$knnwb" $classify --classes clinical.tsv:Group -o one-cl.tsv
rm -rf out && mkdir out
mpmd "exec '$knnwb' $classify --classes clinical.tsv:Group -o out/cl.tsv" \
  "cd elsewhere && exec '$knnwb' $classify --classes '$work/clinical.tsv:Group' -o out/cl.tsv" \
  >out.txt 2>err.txt || { cat err.txt; fail "classify, the output's folder unseen by rank 1: the job failed"; }
cmp -s one-cl.tsv out/cl.tsv || fail "classify, the output's folder unseen by rank 1: bytes differ from one process"
[ ! -e elsewhere/out ] || fail "classify, the output's folder unseen by rank 1: rank 1 made it"
no_temporaries "classify, the output's folder unseen by rank 1"
# The same for run's --output-dir under --confine (which resolves an output's folder too).
mkdir -p one-run
"$knnwb" run p.xml -q -t 1 -O one-run --confine "$work" || fail "run alone failed"
rm -rf out && mkdir out
mpmd "exec '$knnwb' run '$work/p.xml' -q -t 1 -O out --confine '$work'" \
  "cd elsewhere && exec '$knnwb' run '$work/p.xml' -q -t 1 -O out --confine '$work'" \
  >out.txt 2>err.txt || { cat err.txt; fail "run --confine, the output's folder unseen by rank 1: the job failed"; }
cmp -s one-run/p.gml out/p.gml || fail "run --confine, the output's folder unseen by rank 1: bytes differ from one process"
no_temporaries "run --confine, the output's folder unseen by rank 1"
echo "classify, run --confine: an output folder that only rank 0 sees is enough (rank 0 alone writes)"

# Commands that share no work (metafeatures, render, validate, plugins) run on rank 0 alone, as one
# process: on every rank they wrote the same output at once, and a rank that failed alone (its
# input unseen) left the others' output in place with no reason shown. A NaN in the NPY rows of
# rank 1's share is one process's error.
python3 "$here/make_npy.py" small.npy 20 5 1
"$knnwb" metafeatures small.npy -q -t 1 -o one-mf.tsv
mpmd "exec '$knnwb' metafeatures small.npy -q -t 1 -o mf.tsv" \
  "cd elsewhere && exec '$knnwb' metafeatures small.npy -q -t 1 -o mf.tsv" >out.txt 2>err.txt ||
  { cat err.txt; fail "metafeatures, the input unseen by rank 1: failed"; }
cmp -s one-mf.tsv mf.tsv || fail "metafeatures under mpirun: bytes differ from one process"
python3 "$here/make_npy.py" nan.npy 20 5 1 15
echo previous >mf.tsv
stops "metafeatures, a NaN in rank 1's rows (one process's message)" \
  "^knnwb: nan.npy: row 16, column 3: NaN" mf.tsv \
  "exec '$knnwb' metafeatures nan.npy -q -t 1 -o mf.tsv" "exec '$knnwb' metafeatures nan.npy -q -t 1 -o mf.tsv"
echo "metafeatures: rank 0 alone, as one process"
