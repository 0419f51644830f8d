#!/usr/bin/env bash
# Issue 16's CPU scaling check on one host: `mpirun -np 2 knnwb knn` (2 ranks x 1 thread, split
# memory, the default on the CPU) against 1 rank with 2 threads, same input, the whole command
# timed (mpirun's start included), in alternating rounds. Three baselines, each with 2 threads: the
# issue's literal `mpirun -np 1 knnwb knn -t 2` (as typed: Open MPI binds the rank to one core),
# the same with `--bind-to none` (the rank may use both cores), and a plain process without mpirun
# (no launch at all: the strictest). Prints every round, the medians, each baseline's ratio
# (baseline / 2 ranks: >= 1 means the ranks are not slower), the load average before and after,
# and whether every run wrote the plain process's bytes (exit 1 if not).
# Beside the whole command: the time knnwb reports itself (read + knn + write, "total" of its
# summary line: what is left once the launch, MPI_Init and MPI_Finalize are taken away), the CPU
# time of the whole job, and the same commands on a 300-row input (TINY rounds), whose time is
# almost all fixed cost: what mpirun and MPI add to any run.
# Not a ctest: tens of seconds, and on a shared machine the times are only as good as its load.
# Usage: [PAIRS=7] [TINY=7] [AS_TYPED=1|0] [MODE=split|whole] [MPIRUN_OPTIONS="..."] \
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
# The commands, input and output last. The issue's baseline, "1 rank with 2 threads", is the
# literal `mpirun -np 1 knnwb knn -t 2`: knnwb joins MPI (MPI_Init, MPI_Finalize), finds one rank
# and runs the single process's code. Open MPI binds a rank to one core when the job has 2 ranks
# or fewer, so as typed its two threads share one core (knnwb warns); the same command with
# --bind-to none gives the rank both cores, and the plain process (no mpirun) is the strictest
# baseline: it charges the launch to the ranks alone. The ratios: baseline / 2 ranks, >= 1 means
# the ranks are not slower.
names=(process mpirun1 mpirun1-unbound ranks2)
labels=("1 process x 2 threads (no mpirun)" "mpirun -np 1, 2 threads (as typed)"
  "mpirun --bind-to none -np 1, 2 threads" "mpirun -np 2, 1 thread a rank")
# shellcheck disable=SC2206 # options are words
commands=("$knnwb knn -k $k -b cpu -t 2"
  "mpirun $options -np 1 $knnwb knn -k $k -b cpu -t 2"
  "mpirun $options --bind-to none -np 1 $knnwb knn -k $k -b cpu -t 2"
  "mpirun $options -np 2 $knnwb knn -k $k -b cpu --mpi-input $mode")
keep=(0 1 2 3)
case " $options " in
*" --bind-to "*) keep=(0 1 3) ;; # `mpirun -np 1` is bound as the options say: no unbound variant
esac
kept_names=() kept_labels=() kept_commands=()
for c in "${keep[@]}"; do
  # AS_TYPED=0 leaves out the one-core command (twice the others' time at 100,000 rows)
  [ "$c" = 1 ] && [ "${AS_TYPED:-1}" = 0 ] && continue
  kept_names+=("${names[$c]}") kept_labels+=("${labels[$c]}") kept_commands+=("${commands[$c]}")
done
names=("${kept_names[@]}") labels=("${kept_labels[@]}") commands=("${kept_commands[@]}")
last=$((${#names[@]} - 1))
echo "input: $rows x $cols float32 NPY, k = $k, pearson, cpu; 2 ranks: --mpi-input $mode${options:+, $options}"
# shellcheck disable=SC2086 # options are words
echo "CPUs the rank of \`mpirun ${options:+$options }-np 1\` may run on: $(mpirun $options -np 1 grep Cpus_allowed_list /proc/self/status | cut -f 2) (of $(nproc))"
echo "load before: $(cut -d ' ' -f 1-3 /proc/loadavg)"
declare -A times cpus insides tiny
same=1
for ((p = 1; p <= pairs; p++)); do
  line="round $p:"
  for c in "${!names[@]}"; do
    # shellcheck disable=SC2086 # a command is words
    read -r time cpu inside < <(seconds ${commands[$c]} data.npy -o "$c.knn")
    [ "$c" = 0 ] || cmp -s 0.knn "$c.knn" || same=0
    times[$c]="${times[$c]:-} $time" cpus[$c]="${cpus[$c]:-} $cpu" insides[$c]="${insides[$c]:-} $inside"
    line="$line ${names[$c]} $time s (CPU $cpu, inside $inside);"
  done
  echo "$line"
done
for ((p = 1; p <= tiny_pairs; p++)); do
  for c in "${!names[@]}"; do
    # shellcheck disable=SC2086 # a command is words
    read -r time _ _ < <(seconds ${commands[$c]} tiny.npy -o "tiny-$c.knn")
    [ "$c" = 0 ] || cmp -s tiny-0.knn "tiny-$c.knn" || same=0
    tiny[$c]="${tiny[$c]:-} $time"
  done
done
echo "load after: $(cut -d ' ' -f 1-3 /proc/loadavg)"
ranks_median=$(echo "${times[$last]}" | median)
echo "medians of $pairs rounds (wall; CPU = user + system, mpirun included; inside = knnwb's summary total):"
for c in "${!names[@]}"; do
  m=$(echo "${times[$c]}" | median)
  small=""
  if [ "$tiny_pairs" -gt 0 ]; then
    small=$(printf ', 300 rows %.2f s' "$(echo "${tiny[$c]}" | median)")
  fi
  printf '  %-40s %.2f s (CPU %.2f s, inside %.2f s%s)' "${labels[$c]}" "$m" \
    "$(echo "${cpus[$c]}" | median)" "$(echo "${insides[$c]}" | median)" "$small"
  [ "$c" = "$last" ] || printf ', ratio to 2 ranks %.2fx' "$(echo "$m / $ranks_median" | bc -l)"
  echo
done
if [ "$same" = 1 ]; then
  echo "bytes: every .knn equals the single process's"
else
  echo "bytes: DIFFERENT from the single process" >&2
  exit 1
fi
