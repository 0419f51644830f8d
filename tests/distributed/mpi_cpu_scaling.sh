#!/usr/bin/env bash
# Issue 16's CPU scaling check on one host: `mpirun -np 2 knnwb knn` (2 ranks x 1 thread, split
# memory, the default on the CPU) against `knnwb knn -t 2` (1 process x 2 threads), same input,
# the whole command timed (mpirun's start included), in alternating pairs; prints every pair, the
# medians, the ratio (1 process / 2 ranks: >= 1 means the ranks are not slower), the load average
# before and after, and whether every run wrote the single process's bytes (exit 1 if not).
# Beside the whole command: the time knnwb reports itself (read + knn + write, "total" of its
# summary line: what is left once the launch, MPI_Init and MPI_Finalize are taken away), the CPU
# time of the whole job, and the same pair on a 300-row input (TINY pairs), whose time is almost
# all fixed cost: what mpirun and MPI add to any run.
# Not a ctest: tens of seconds, and on a shared machine the times are only as good as its load.
# Usage: [PAIRS=7] [TINY=7] [MODE=split|whole] [MPIRUN_OPTIONS="..."] \
#        mpi_cpu_scaling.sh KNNWB [ROWS [COLS [K]]]
#        (defaults: 7 pairs, split, 40000 128 20, pearson; MPIRUN_OPTIONS: none, the plain
#        `mpirun -np 2` a user types (Open MPI binds each rank to a core); on a machine with fewer
#        than 2 cores, or to let the ranks move between cores, "--oversubscribe --bind-to none";
#        knnwb itself picks Open MPI's ob1 layer, and an hwloc without I/O devices for unbound
#        ranks, when every rank is on one host)
set -euo pipefail
knnwb=$(realpath "$1")
rows=${2:-40000}
cols=${3:-128}
k=${4:-20}
pairs=${PAIRS:-7}
tiny_pairs=${TINY:-7}
mode=${MODE:-split}
options=${MPIRUN_OPTIONS:-}
here=$(dirname "$(realpath "$0")")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
python3 "$here/make_npy.py" data.npy "$rows" "$cols" 11
python3 "$here/make_npy.py" tiny.npy 300 "$cols" 11
# command...: "wall cpu inside" seconds: wall and CPU (user + system, children too) of the whole
# command, and the total knnwb's summary line reports (rank 0's under mpirun)
seconds() {
  /usr/bin/time -f '%e %U %S' -o time.txt "$@" 2>summary.txt
  local inside
  inside=$(sed -n 's/.*, total \([0-9.]*\) s).*/\1/p' summary.txt | head -n 1)
  awk -v inside="${inside:-0}" '{printf "%s %.2f %s\n", $1, $2 + $3, inside}' time.txt
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
# The two commands, input and output last: one process, 2 ranks.
one=("$knnwb" knn -k "$k" -b cpu -t 2)
# shellcheck disable=SC2206 # options are words
two=(mpirun $options -np 2 "$knnwb" knn -k "$k" -b cpu
  --mpi-input "$mode")
echo "input: $rows x $cols float32 NPY, k = $k, pearson, cpu; 2 ranks: --mpi-input $mode${options:+, $options}"
echo "load before: $(cut -d ' ' -f 1-3 /proc/loadavg)"
one_times="" two_times="" one_cpus="" two_cpus="" one_insides="" two_insides="" same=1
for ((p = 1; p <= pairs; p++)); do
  read -r one_time one_cpu one_inside < <(seconds "${one[@]}" data.npy -o one.knn)
  read -r two_time two_cpu two_inside < <(seconds "${two[@]}" data.npy -o two.knn)
  cmp -s one.knn two.knn || same=0
  printf 'pair %d: 1 process x 2 threads %.2f s (CPU %.2f s, inside knnwb %.2f s), 2 ranks x 1 thread %.2f s (CPU %.2f s, inside knnwb %.2f s)\n' \
    "$p" "$one_time" "$one_cpu" "$one_inside" "$two_time" "$two_cpu" "$two_inside"
  one_times="$one_times $one_time" two_times="$two_times $two_time"
  one_cpus="$one_cpus $one_cpu" two_cpus="$two_cpus $two_cpu"
  one_insides="$one_insides $one_inside" two_insides="$two_insides $two_inside"
done
tiny_one="" tiny_two=""
for ((p = 1; p <= tiny_pairs; p++)); do
  read -r one_time _ _ < <(seconds "${one[@]}" tiny.npy -o tiny-one.knn)
  read -r two_time _ _ < <(seconds "${two[@]}" tiny.npy -o tiny-two.knn)
  cmp -s tiny-one.knn tiny-two.knn || same=0
  tiny_one="$tiny_one $one_time" tiny_two="$tiny_two $two_time"
done
echo "load after: $(cut -d ' ' -f 1-3 /proc/loadavg)"
one_median=$(echo "$one_times" | median)
two_median=$(echo "$two_times" | median)
printf 'medians: 1 process %.2f s, 2 ranks %.2f s; ratio (1 process / 2 ranks) %.2fx\n' \
  "$one_median" "$two_median" "$(echo "$one_median / $two_median" | bc -l)"
printf 'CPU time medians (user + system, mpirun included): 1 process %.2f s, 2 ranks %.2f s\n' \
  "$(echo "$one_cpus" | median)" "$(echo "$two_cpus" | median)"
printf 'inside knnwb (its summary line'"'"'s total) medians: 1 process %.2f s, 2 ranks %.2f s\n' \
  "$(echo "$one_insides" | median)" "$(echo "$two_insides" | median)"
if [ "$tiny_pairs" -gt 0 ]; then
  printf '300 rows (fixed cost), medians of %d pairs: 1 process %.2f s, 2 ranks %.2f s\n' \
    "$tiny_pairs" "$(echo "$tiny_one" | median)" "$(echo "$tiny_two" | median)"
fi
if [ "$same" = 1 ]; then
  echo "bytes: every 2-rank .knn equals the single process's"
else
  echo "bytes: DIFFERENT from the single process" >&2
  exit 1
fi
