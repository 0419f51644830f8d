#!/usr/bin/env bash
# Peak memory of each rank of the partitioned search on split ranks: one process, then R ranks that
# put their rows together (KNNWB_PARTITION_SPLIT=0, where every rank has room) and R ranks that keep
# to their blocks (the default), ROUNDS times alternating; every run's lists compared with one
# process's. Memory is each process's peak proportional set (Pss: pages shared between the ranks,
# such as the shared window of the lists that travel, counted once over them), sampled every 0.1 s
# from /proc/PID/smaps_rollup; times are the whole command's wall clock.
#
#   bash tests/distributed/mpi_partition_memory.sh build/bin/knnwb X.npy [knn options...]
#   e.g. ... X.npy -k 30 -m euclidean (X.npy from tests/bench/make_clusters_table.py)
#
# RANKS="2 4" (default), ROUNDS=2, BACKEND=cpu. BEFORE=path/to/other/knnwb compares that build
# with this one instead (the default way, MPI_INPUT=split or whole; each line then also gives, from
# the debug lines, each rank's time to bring the rows of its groups (ranks that keep to their
# blocks), to send the k-th distances after phase one, the rows each brought for phase two and how
# long that took, and the time each rank's lists took to combine).
# Not a test: a measurement (docs/performance-mpi.md).
set -euo pipefail
knnwb=$(realpath "$1")
input=$(realpath "$2")
shift 2
ranks=${RANKS:-2 4}
rounds=${ROUNDS:-2}
backend=${BACKEND:-cpu}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}

pattern="^$knnwb knn"
[ -z "${BEFORE:-}" ] || pattern="^($knnwb|$(realpath "$BEFORE")) knn"

# Runs "$@" (its output in run.log), prints its wall time and each knnwb process's peak Pss in MiB.
measure() {
  local start end pid pss
  declare -A peak=()
  start=$(date +%s.%N)
  "$@" >run.log 2>&1 &
  local main=$!
  while kill -0 "$main" 2>/dev/null; do
    for pid in $(pgrep -f "$pattern" || true); do
      pss=$(awk '/^Pss:/ {print $2}' "/proc/$pid/smaps_rollup" 2>/dev/null || true)
      [ -n "$pss" ] || continue
      [ "${peak[$pid]:-0}" -ge "$pss" ] || peak[$pid]=$pss
    done
    sleep 0.1
  done
  wait "$main"
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f s,", b - a }'
  for pid in $(printf '%s\n' "${!peak[@]}" | sort -n); do
    printf ' %d' $((peak[$pid] / 1024))
  done
  echo ' MiB'
}

# Whether NAME.npy holds one process's lists: "same" or "differs".
same() {
  if cmp -s one.npy "$1.npy" && cmp -s one.distances.npy "$1.distances.npy"; then
    echo same
  else
    echo differs
  fi
}

echo "one process: $(measure "$knnwb" knn "$input" "$@" -b "$backend" -q -o one.npy)"
if [ -n "${BEFORE:-}" ]; then
  before=$(realpath "$BEFORE")
  for round in $(seq "$rounds"); do
    for r in $ranks; do
      for tree in before this; do
        binary=$knnwb
        [ "$tree" = this ] || binary=$before
        line=$(measure mpirun --oversubscribe --bind-to none -np "$r" -x KNNWB_MPI_VERBOSE=1 \
          -x G_MESSAGES_DEBUG=all "$binary" knn "$input" "$@" -b "$backend" \
          --mpi-input "${MPI_INPUT:-split}" -o "$tree.npy")
        kth=$( (grep -o "k-th distances* [a-z' ]* in [0-9.]* s" run.log || true) |
          grep -o "[0-9.]* s" | tr '\n' ' ')
        brought=$( (grep -o "[0-9]* rows of its groups' visits brought in [0-9.]* s" run.log || true) |
          awk '{printf "%s%d rows %s s", (NR > 1 ? ", " : ""), $1, $(NF - 1)}')
        # (each rank's rows for phase one brought, and its block's lists combined, in seconds)
        own=$( (grep -o "other blocks (brought in [0-9.]* s" run.log || true) |
          grep -o "[0-9.]* s" | tr '\n' ' ')
        combined=$( (grep -o "lists of its rows combined in [0-9.]* s" run.log || true) |
          grep -o "[0-9.]* s" | tr '\n' ' ')
        echo "round $round, $r ranks, $tree: $line, rows brought in ${own:-(none said) }," \
          "k-th distances sent in $kth, phase two's rows brought: ${brought:-none said}," \
          "combined in ${combined:-(none said) }, lists $(same "$tree")"
      done
    done
  done
  exit 0
fi
for round in $(seq "$rounds"); do
  for r in $ranks; do
    for mode in together kept; do
      split=1
      [ "$mode" = kept ] || split=0
      line=$(measure mpirun --oversubscribe --bind-to none -np "$r" -x KNNWB_PARTITION_SPLIT=$split \
        "$knnwb" knn "$input" "$@" -b "$backend" -q -o "$mode.npy")
      echo "round $round, $r ranks, $mode: $line, lists $(same "$mode")"
    done
  done
done
