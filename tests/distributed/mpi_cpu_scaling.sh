#!/usr/bin/env bash
# Issue 16's CPU scaling check on one host: `mpirun -np 2 knnwb knn` (2 ranks x 1 thread, split
# memory, the default on the CPU) against `knnwb knn -t 2` (1 process x 2 threads), same input,
# the whole command timed (mpirun's start included), in alternating pairs; prints every pair, the
# medians, the ratio (1 process / 2 ranks: >= 1 means the ranks are not slower), the load average
# before and after, and whether every run wrote the single process's bytes (exit 1 if not).
# Not a ctest: tens of seconds, and on a shared machine the times are only as good as its load.
# Usage: [PAIRS=7] [MODE=split|whole] [MPIRUN_OPTIONS="..."] [HWLOC_COMPONENTS=-pci,-linuxio] \
#        mpi_cpu_scaling.sh KNNWB [ROWS [COLS [K]]]
#        (defaults: 7 pairs, split, 40000 128 20, pearson; MPIRUN_OPTIONS: none, the plain
#        command a user types (knnwb picks Open MPI's ob1 layer itself when every rank is on one
#        host); HWLOC_COMPONENTS, inherited by mpirun, keeps hwloc from probing PCI devices)
set -euo pipefail
knnwb=$(realpath "$1")
rows=${2:-40000}
cols=${3:-128}
k=${4:-20}
pairs=${PAIRS:-7}
mode=${MODE:-split}
options=${MPIRUN_OPTIONS:-}
here=$(dirname "$(realpath "$0")")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
python3 "$here/make_npy.py" data.npy "$rows" "$cols" 11
seconds() { # command...: "wall cpu" seconds of the whole command (cpu: user + system, children too)
  /usr/bin/time -f '%e %U %S' -o time.txt "$@"
  awk '{printf "%s %.2f\n", $1, $2 + $3}' time.txt
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo "input: $rows x $cols float32 NPY, k = $k, pearson, cpu; 2 ranks: --mpi-input $mode${options:+, $options}"
echo "load before: $(cut -d ' ' -f 1-3 /proc/loadavg)"
one_times="" two_times="" one_cpus="" two_cpus="" same=1
for ((p = 1; p <= pairs; p++)); do
  read -r one one_cpu < <(seconds "$knnwb" knn data.npy -k "$k" -b cpu -t 2 -q -o one.knn)
  # shellcheck disable=SC2086 # options are words
  read -r two two_cpu < <(seconds mpirun --oversubscribe --bind-to none $options -np 2 \
    "$knnwb" knn data.npy -k "$k" -b cpu -q --mpi-input "$mode" -o two.knn)
  cmp -s one.knn two.knn || same=0
  printf 'pair %d: 1 process x 2 threads %.2f s (CPU %.2f s), 2 ranks x 1 thread %.2f s (CPU %.2f s)\n' \
    "$p" "$one" "$one_cpu" "$two" "$two_cpu"
  one_times="$one_times $one" two_times="$two_times $two"
  one_cpus="$one_cpus $one_cpu" two_cpus="$two_cpus $two_cpu"
done
one_median=$(echo "$one_times" | median)
two_median=$(echo "$two_times" | median)
echo "load after: $(cut -d ' ' -f 1-3 /proc/loadavg)"
printf 'medians: 1 process %.2f s, 2 ranks %.2f s; ratio (1 process / 2 ranks) %.2fx\n' \
  "$one_median" "$two_median" "$(echo "$one_median / $two_median" | bc -l)"
printf 'CPU time medians (user + system, mpirun included): 1 process %.2f s, 2 ranks %.2f s\n' \
  "$(echo "$one_cpus" | median)" "$(echo "$two_cpus" | median)"
if [ "$same" = 1 ]; then
  echo "bytes: every 2-rank .knn equals the single process's"
else
  echo "bytes: DIFFERENT from the single process" >&2
  exit 1
fi
