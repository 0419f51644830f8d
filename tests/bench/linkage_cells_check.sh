#!/usr/bin/env bash
# Single linkage of rows of many columns on the CPU, the user's whole command
# `knnwb cluster X.npy --method single-linkage -m METRIC --clusters 20 -o sl.tsv -b cpu`: the cells
# of the rows answering each Borůvka round's nearest point outside its component
# (core/partition/partition_outside.c) against the tile search (KNNWB_OUTSIDE_CELLS=0) and, with
# BEFORE=KNNWB, another build's knnwb, and with GPU=1 the default backend (a GPU's tile search on a
# GPU host), alternating, on
#   - rows of 50 columns in 50 Gaussian clusters (tests/bench/make_clusters_table.py), centres
#     12 standard deviations apart (separate clusters: the cells pay) and 3 (the default, where a
#     cluster's points lie about as far from each other as from the next cluster: they do not);
#   - planted co-expression modules of 64 columns under pearson (tests/bench/make_modules.py).
# Each line: the worst of ROUNDS (default 1) runs of each way, the rounds' searches summed from the
# `exact MST:` debug lines, and whether every way gave the same clusters (cmp).
# Usage (repository root): bash tests/bench/linkage_cells_check.sh build/bin/knnwb OUT
# ROWS="40000 200000" (default) sets the sizes; METRICS="euclidean pearson" (default euclidean) the
# metrics of the clustered rows; TIMEOUT=S (default 600) ends a run.
set -uo pipefail
k=$1; out=$2; d=$out/data; mkdir -p "$d"
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
rows=${ROWS:-40000 200000}
ways="cells tiles${BEFORE:+ before}${GPU:+ gpu}"
printf '%-34s' case; for w in $ways; do printf ' %-22s' "$w (rounds)"; done; echo " clusters"
# NAME FILE METRIC: every way, ROUNDS times, alternating.
case_() {
  local name=$1 file=$2 metric=$3 way r t0 t1 wall rounds
  declare -A worst=() search=()
  for ((round = 1; round <= ${ROUNDS:-1}; round++)); do
    for way in $ways; do
      local bin=$k cells="" backend=cpu
      [ "$way" = tiles ] && cells=0
      [ "$way" = before ] && bin=$BEFORE
      [ "$way" = gpu ] && backend=auto
      rm -f "$d/sl_$way.tsv"
      t0=$(date +%s.%N)
      env ${cells:+KNNWB_OUTSIDE_CELLS=$cells} G_MESSAGES_DEBUG=all timeout "${TIMEOUT:-600}" \
        "$bin" cluster "$file" --method single-linkage -m "$metric" --clusters 20 -b $backend \
        -o "$d/sl_$way.tsv" >"$out/one.log" 2>&1
      r=$?; t1=$(date +%s.%N)
      { echo "== $name $way rc=$r"; grep -E "exact MST|nearest outside|error" "$out/one.log"; } >>"$out/runs.log"
      wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b - a}')
      rounds=$(grep -oE "exact MST: .* in [0-9.]+ s" "$out/one.log" | awk '{s += $(NF-1)} END{printf "%.2f", s}')
      [ $r = 0 ] || wall=">${TIMEOUT:-600}(rc=$r)"
      if [ -z "${worst[$way]:-}" ] || awk -v a="$wall" -v b="${worst[$way]}" 'BEGIN{exit !(a > b)}'; then
        worst[$way]=$wall; search[$way]=$rounds
      fi
    done
  done
  local same=same
  for way in $ways; do cmp -s "$d/sl_cells.tsv" "$d/sl_$way.tsv" || same=DIFFER; done
  printf '%-34s' "$name"; for way in $ways; do printf ' %-22s' "${worst[$way]} s (${search[$way]} s)"; done
  echo " $same"
}
for n in $rows; do
  for spread in 12 3; do
    $py tests/bench/make_clusters_table.py "$d/c$n-$spread.npy" "$n" 50 "$spread" >/dev/null || exit 1
    for metric in ${METRICS:-euclidean}; do
      case_ "$n x 50, clusters $spread apart, $metric" "$d/c$n-$spread.npy" "$metric"
    done
  done
  $py tests/bench/make_modules.py "$d/m$n.npy" --rows "$n" --cols 64 --modules 100 >/dev/null || exit 1
  case_ "$n x 64 modules, pearson" "$d/m$n.npy" pearson
done
