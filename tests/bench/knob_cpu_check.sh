#!/usr/bin/env bash
# One environment knob of the CPU backend, side by side: the user's whole command
# `knnwb knn FILE -k K -m METRIC -b cpu -o g.npy` for each value of VAR ("-" leaves it unset), in
# alternating rounds (ROUNDS, default 2). Each line: a file's times for every value, in rounds'
# order, and whether every run wrote the same lists (cmp against the first).
# Usage (repository root):
#   bash tests/bench/knob_cpu_check.sh KNNWB OUT VAR "VALUE VALUE..." FILE:METRIC [FILE:METRIC...]
# K (default 30) sets k; EXTRA="KNNWB_PARTITION=off ..." is set for every run.
# e.g. bash tests/bench/knob_cpu_check.sh build/bin/knnwb /tmp/o KNNWB_CPU_SCAN "scalar -" X.npy:euclidean
set -uo pipefail
k=$1; out=$2; var=$3; read -r -a values <<<"$4"; shift 4
mkdir -p "$out"
for spec in "$@"; do
  file=${spec%:*}; metric=${spec##*:}
  declare -A times=()
  same=same; first=
  for ((round = 1; round <= ${ROUNDS:-2}; round++)); do
    for v in "${values[@]}"; do
      setting=""; [ "$v" = - ] || setting="$var=$v"
      rm -f "$out/g.npy"
      t0=$(date +%s.%N)
      env ${EXTRA:-} $setting timeout "${TIMEOUT:-600}" "$k" knn "$file" -k "${K:-30}" -m "$metric" \
        -b cpu -o "$out/g.npy" >"$out/one.log" 2>&1
      r=$?; t1=$(date +%s.%N)
      w=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b - a}')
      [ $r = 0 ] || w="failed(rc=$r)"
      times[$v]+="$w "
      if [ -z "$first" ]; then first=$out/first.npy; cp "$out/g.npy" "$first"
      elif ! cmp -s "$first" "$out/g.npy"; then same=DIFFER; fi
    done
  done
  printf '%s (%s):' "$(basename "$file")" "$metric"
  for v in "${values[@]}"; do printf '  %s=%s: %ss' "$var" "$v" "${times[$v]% }"; done
  echo "  $same"
  unset times
done
