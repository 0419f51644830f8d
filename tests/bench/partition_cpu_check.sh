#!/usr/bin/env bash
# The kNN graph on the CPU at the sizes of most single-cell and expression studies, the user's
# whole command `knnwb knn X.npy -k 30 -m METRIC -b cpu -o g.npy`: the automatic choice of the
# partitioned search (core/partition/) against the plain search (KNNWB_PARTITION=off) and, with
# BEFORE=KNNWB, another build's knnwb, and with PEER=1 FAISS's exact IndexFlatL2 on every core
# (tests/bench/faiss_knn_peer.py: load, search, save; euclidean cases only), alternating, on
#   - rows of 50 columns in 50 Gaussian clusters (tests/bench/make_clusters_table.py), centres
#     3, 2.5 and 2 standard deviations apart (2 and below overlap, as cell types do) and 0.5 (no
#     structure the bounds can use: the choice must keep the plain search at little cost);
#   - planted co-expression modules of 64 columns under pearson (tests/bench/make_modules.py);
#   - with REAL=TSV (an expression matrix, e.g. all876.tsv), real-like metafeatures under pearson:
#     `knnwb metafeatures --ops all` of its first rows, as many as give about n rows.
# Each line: the worst of ROUNDS (default 1) runs of each way, the choice's expected share of the
# plain search's work (from the debug lines; "plain" where it kept the plain search), and whether
# knnwb's ways wrote the same lists (cmp; FAISS's float32 lists are not compared).
# Usage (repository root): bash tests/bench/partition_cpu_check.sh build/bin/knnwb OUT
# ROWS="50000 100000 200000" (default) sets the sizes; TIMEOUT=S (default 600) ends a run.
set -uo pipefail
k=$1; out=$2; d=$out/data; mkdir -p "$d"
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
rows=${ROWS:-50000 100000 200000}
ways="auto plain${BEFORE:+ before}${PEER:+ faiss}"
printf '%-40s' case; for w in $ways; do printf ' %-10s' "$w"; done; echo " expected lists"
# NAME FILE METRIC: every way, ROUNDS times, alternating.
case_() {
  local name=$1 file=$2 metric=$3 way r t0 t1 wall expected
  declare -A worst=()
  for ((round = 1; round <= ${ROUNDS:-1}; round++)); do
    for way in $ways; do
      local bin=$k mode=""
      [ "$way" = plain ] && mode=off
      [ "$way" = before ] && bin=$BEFORE
      if [ "$way" = faiss ] && [ "$metric" != euclidean ]; then worst[$way]="-"; continue; fi
      rm -f "$d/g_$way.npy"
      t0=$(date +%s.%N)
      if [ "$way" = faiss ]; then
        timeout "${TIMEOUT:-600}" $py tests/bench/faiss_knn_peer.py "$file" 30 "$d/g_$way.npy" >"$out/one.log" 2>&1
      else
        env ${mode:+KNNWB_PARTITION=$mode} G_MESSAGES_DEBUG=all timeout "${TIMEOUT:-600}" \
          "$bin" knn "$file" -k 30 -m "$metric" -b cpu -o "$d/g_$way.npy" >"$out/one.log" 2>&1
      fi
      r=$?; t1=$(date +%s.%N)
      { echo "== $name $way rc=$r"; grep -E "partition: |error" "$out/one.log" | grep -v 'whole call'; } >>"$out/runs.log"
      wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b - a}')
      [ $r = 0 ] || wall=">${TIMEOUT:-600}(rc=$r)"
      if [ "$way" = auto ]; then
        expected=$(grep -oE "expected [0-9.]+% of the work: partitioning" "$out/one.log" | awk '{print $2}')
        [ -n "$expected" ] || expected=plain
      fi
      if [ -z "${worst[$way]:-}" ] || awk -v a="$wall" -v b="${worst[$way]}" 'BEGIN{exit !(a > b)}'; then
        worst[$way]=$wall
      fi
    done
  done
  local same=same
  for way in $ways; do
    [ "$way" = faiss ] || cmp -s "$d/g_auto.npy" "$d/g_$way.npy" || same=DIFFER
  done
  printf '%-40s' "$name"
  for way in $ways; do
    if [ "${worst[$way]}" = - ]; then printf ' %-10s' -; else printf ' %-10s' "${worst[$way]} s"; fi
  done
  echo " $expected $same"
}
for n in $rows; do
  for spread in 3 2.5 2 0.5; do
    $py tests/bench/make_clusters_table.py "$d/c$n-$spread.npy" "$n" 50 "$spread" >/dev/null || exit 1
    case_ "$n x 50, clusters $spread apart" "$d/c$n-$spread.npy" euclidean
  done
  $py tests/bench/make_modules.py "$d/m$n.npy" --rows "$n" --cols 64 >/dev/null || exit 1
  case_ "$n x 64 modules, pearson" "$d/m$n.npy" pearson
  if [ -n "${REAL:-}" ]; then
    # r rows give r + 4 r (r - 1) / 2 metafeatures
    r=$(awk -v n="$n" 'BEGIN{printf "%d", (1 + sqrt(1 + 8 * n)) / 4}')
    head -n $((r + 1)) "$REAL" >"$d/real$n.tsv"
    "$k" metafeatures "$d/real$n.tsv" --ops all -o "$d/real$n.npy" >/dev/null 2>&1 || exit 1
    case_ "$n real-like metafeatures ($r rows), pearson" "$d/real$n.npy" pearson
  fi
done
