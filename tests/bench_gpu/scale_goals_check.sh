#!/usr/bin/env bash
# The scale goals (docs/performance.md) in one call on a GPU host, each the user's whole command
# with its contexts, read and write, measured side by side, and a closing table: each goal, what
# this host gave, and whether it was met.
#   - 10,000,000 x 50 in 50 clusters, euclidean k = 30: 1 GPU, every GPU in one process, and
#     mpirun -np R (R = 1, 2, 4: one GPU a rank, `--mpi-input whole` or MPI_INPUT=split);
#   - the real-like 1,533,876 x 128, Pearson k = 20 (`knnwb metafeatures --ops all` on ROWS, the
#     876 rows of `real_like_check.sh --rows`), the same ways;
#   - `bench_knn_gpu --n 1533876 --cold` (d = 295) on 1 GPU and on every GPU, the contexts of the
#     GPUs past the first created inside the timed call, with the FP16 GEMM floor;
#   - with SIZES="10M 30M", 30,000,000 x 50 on every GPU, with its peak memory against the input and
#     output bytes.
# Every way of a workload must give the same lists (digests compared). Times: the worst of ROUNDS
# rounds (default 2, ways alternating) against the goal, ratios from the rounds' means; memory:
# each process's peak resident set (VmHWM, sampled every 0.1 s), the largest rank's for ranks.
# Ranks past the GPUs share GPU 0 (a 1- or 2-GPU host): those lines are marked "shared", and the
# ranks' goals (one GPU each) are not judged there.
# About 7 minutes on four H200s (build 2-3 minutes; 30M adds about 3).
# DRY=1 checks the script on a machine without a GPU: the CPU backend, 300,000 rows of clusters,
# the real-like rows from ROWS's first 60 rows, no benchmark (every line marked "dry").
# Usage (repository root, after `. .gpu/env.sh`, ROWS carried along):
#   bash tests/bench_gpu/scale_goals_check.sh OUT ROWS.tsv
set -uo pipefail
out=$1; rows=$2; dry=${DRY:-}
b=/tmp/knnwb-goals${dry:+-dry}; d=/tmp/knnwb-goals-data${dry:+-dry}; mkdir -p "$out" $d
for dir in /usr/local/mpi/bin /opt/hpcx/ompi/bin /usr/mpi/gcc/openmpi-*/bin; do
  [ -x "$dir/mpicc" ] && ! command -v mpicc >/dev/null && export PATH=$dir:$PATH
done
SECONDS=0
targets=(knnwb_host knnwb_knn_plugin); cuda=OFF
[ -n "$dry" ] || { targets+=(bench_knn_gpu); cuda=ON; }
{ cmake -S . -B $b -DKNNWB_CUDA=$cuda -DKNNWB_MPI=ON -DKNNWB_CUDA_ARCHITECTURES=90 \
    -DCMAKE_BUILD_TYPE=Release &&
  cmake --build $b -j"$(nproc)" --target "${targets[@]}"; } >"$out/build.log" 2>&1 ||
  { tail -30 "$out/build.log"; exit 1; }
k=$b/bin/knnwb; export LD_LIBRARY_PATH=$b:${LD_LIBRARY_PATH:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ -n "$dry" ]; then gpus=1; backend=cpu; else gpus=$(nvidia-smi -L | wc -l); backend=cuda; fi
echo "build ${SECONDS} s; $(nproc) cores; $gpus GPU(s)$([ -n "$dry" ] && echo ' (dry: the CPU)')"
[ -n "$dry" ] || nvidia-smi --query-gpu=name --format=csv,noheader | uniq -c
py=python3; $py -c "import numpy" 2>/dev/null || py=/usr/bin/python3
read -r -a sizes <<<"${SIZES:-10M}"
[ -z "$dry" ] || sizes=(0.3M)
for n in "${sizes[@]}"; do
  [ -s $d/c$n.npy ] || $py tests/bench/make_clusters_table.py $d/c$n.npy \
    "$(awk -v n="${n%M}" 'BEGIN{printf "%d", n * 1000000}')" 50 || exit 1
done
real=$rows; [ -z "$dry" ] || { head -61 "$rows" >$d/rows.tsv; real=$d/rows.tsv; }
$k metafeatures "$real" --ops all -o $d/real.npy >"$out/metafeatures.log" 2>&1 ||
  { cat "$out/metafeatures.log"; exit 1; }
echo "data ready at ${SECONDS} s"
log=$out/runs.log; : >"$log"
declare -A wall=() knn=() mem=() digest=()

# The largest VmHWM (MiB) of each knnwb process, sampled every 0.1 s until the file $1 exists,
# into $2 as "MiB MiB ...".
peaks() {
  local pid kib; declare -A peak=()
  while [ ! -e "$1" ]; do
    for pid in $(pgrep -f "^$k knn" || true); do
      kib=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
      [ -n "$kib" ] && [ "${peak[$pid]:-0}" -lt "$kib" ] && peak[$pid]=$kib
    done
    sleep 0.1
  done
  for pid in "${!peak[@]}"; do echo $((peak[$pid] / 1024)); done | sort -n | tr '\n' ' ' >"$2"
}

# KEY WAY FILE METRIC K: one whole command; WAY is 1 (GPU 0), all (every GPU, one process) or
# rR (R ranks, one GPU each, GPU 0 past the GPUs). Appends to the KEY's entries.
run() {
  local key=$1 way=$2 f=$3 metric=$4 kk=$5 t0 t1 r sampler line
  rm -f $d/g.npy $d/g.distances.npy $d/g.labels.txt $d/peaks.stop $d/peaks.txt
  peaks $d/peaks.stop $d/peaks.txt & sampler=$!
  t0=$(date +%s.%N)
  case $way in
  1) CUDA_VISIBLE_DEVICES=0 G_MESSAGES_DEBUG=all timeout 300 "$k" knn "$f" -k "$kk" -m "$metric" \
       -b $backend -o $d/g.npy >"$out/one.log" 2>&1 ;;
  all) G_MESSAGES_DEBUG=all timeout 300 "$k" knn "$f" -k "$kk" -m "$metric" -b $backend \
       -o $d/g.npy >"$out/one.log" 2>&1 ;;
  r*) G_MESSAGES_DEBUG=all timeout 300 mpirun --oversubscribe --bind-to none -np "${way#r}" \
        -x G_MESSAGES_DEBUG bash -c 'g=$OMPI_COMM_WORLD_LOCAL_RANK; [ "$g" -lt '"$gpus"' ] || g=0
          CUDA_VISIBLE_DEVICES=$g exec "$@"' rank \
        "$k" knn "$f" -k "$kk" -m "$metric" -b $backend --mpi-input "${MPI_INPUT:-whole}" \
        -o $d/g.npy >"$out/one.log" 2>&1 ;;
  esac
  r=$?; t1=$(date +%s.%N)
  touch $d/peaks.stop; wait $sampler
  { echo "== $key rc=$r"; cat "$out/one.log"; } >>"$log"
  line=$(grep -m1 -oE "\(read [0-9.]+ s, knn [0-9.]+ s" "$out/one.log")
  local w s g
  w=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b - a}')
  s=$(sed -E 's/.*knn ([0-9.]+) s/\1/' <<<"$line")
  g=$([ $r = 0 ] && sha256sum $d/g.npy | cut -c1-16 || echo "failed(rc=$r)")
  wall[$key]+="$w "; knn[$key]+="${s:-?} "; digest[$key]+="$g "
  mem[$key]=$(awk '{m = 0; for (i = 1; i <= NF; i++) if ($i > m) m = $i; print m}' $d/peaks.txt)
  printf '%-34s rc=%d %7s s  knn %6s s  peak %s MiB  %s\n' "$key" $r "$w" "${s:-?}" \
    "$(cat $d/peaks.txt)" "$g"
}

# The ways of one workload (NAME FILE METRIC K), in turn.
ways() {
  run "$1, 1 GPU" 1 "${@:2}"
  [ "$gpus" -gt 1 ] && run "$1, $gpus GPUs" all "${@:2}"
  for r in 1 2 4; do run "$1, $r rank(s)" r$r "${@:2}"; done
}

for ((round = 1; round <= ${ROUNDS:-2}; round++)); do
  echo "-- round $round"
  ways "clusters ${sizes[0]}" $d/c${sizes[0]}.npy euclidean 30
  ways "real-like" $d/real.npy pearson 20
done
for n in "${sizes[@]:1}"; do run "clusters $n, $gpus GPUs" all $d/c$n.npy euclidean 30; done
bench_cold() { # KEY DEVICES [--no-floor]
  local line
  $b/tests/bench_gpu/bench_knn_gpu --n 1533876 --no-select --cold --devices "$2" ${3:-} \
    >"$out/bench.log" 2>&1
  cat "$out/bench.log" >>"$log"
  line=$(grep -m1 "library (" "$out/bench.log")
  local w g
  w=$(sed -E 's/.*\): ([0-9.]+) s;.*/\1/' <<<"$line")
  g=$(grep -oE "lists digest [0-9a-f]+" <<<"$line" | cut -d' ' -f3)
  wall[$1]+="${w:-?} "; digest[$1]+="${g:-failed} "
  local f
  f=$(grep -m1 -oE "FP16 GEMM floor \(same MACs, one GPU\): [0-9.]+" "$out/bench.log" |
    awk '{print $NF}')
  [ -z "$f" ] || floor=$f
  printf '%-34s %7s s  FP16 floor %s s  %s\n' "$1" "${w:-?}" "${f:--}" "${g:-failed}"
}
floor=
if [ -z "$dry" ]; then
  for ((round = 1; round <= ${ROUNDS:-2}; round++)); do
    bench_cold "d = 295 bench, 1 GPU" 0
    [ "$gpus" -gt 1 ] && bench_cold "d = 295 bench, $gpus GPUs" "$(seq -s, 0 $((gpus - 1)))" --no-floor
  done
fi

# The closing table. worst/mean over the rounds' entries of a key ("" when absent).
worst() { awk '{m = ""; for (i = 1; i <= NF; i++) if (m == "" || $i > m) m = $i; print m}' <<<"${1:-}"; }
mean() { awk '{s = 0; for (i = 1; i <= NF; i++) s += $i; if (NF) printf "%.3f", s / NF}' <<<"${1:-}"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{if (a != "" && b != "" && b > 0) printf "%.2f", a / b}'; }
# GOAL-TEXT MEASURED-TEXT VERDICT(1 met, 0 not, "" not judged)
row() {
  local verdict="not judged"
  [ -n "$dry" ] && verdict="dry" || { [ "$3" = 1 ] && verdict=met; [ "$3" = 0 ] && verdict="NOT met"; }
  printf '| %s | %s | %s |\n' "$1" "$2" "$verdict"
}
at_most() { awk -v v="$1" -v g="$2" 'BEGIN{if (v != "") print (v <= g) ? 1 : 0}'; }
at_least() { awk -v v="$1" -v g="$2" 'BEGIN{if (v != "") print (v >= g) ? 1 : 0}'; }
shared() { [ "$gpus" -ge "$1" ] || echo " (shared GPU: ranks share GPU 0 on this host)"; }
judge_ranks() { [ "$gpus" -ge "$1" ] && echo "$2"; }

echo
echo "| goal | measured | verdict |"
echo "| --- | --- | --- |"
c="clusters ${sizes[0]}"
row "$c, 1 GPU <= 20 s" "${wall[$c, 1 GPU]}s (knn ${knn[$c, 1 GPU]}s)" \
  "$(at_most "$(worst "${wall[$c, 1 GPU]}")" 20)"
if [ "$gpus" -gt 1 ]; then
  row "$c, 4 GPUs <= 6 s" "$gpus GPUs: ${wall[$c, $gpus GPUs]}s" \
    "$([ "$gpus" -ge 4 ] && at_most "$(worst "${wall[$c, $gpus GPUs]}")" 6)"
fi
row "$c, 4 ranks x 1 GPU <= 6.5 s" "${wall[$c, 4 rank(s)]}s$(shared 4)" \
  "$(judge_ranks 4 "$(at_most "$(worst "${wall[$c, 4 rank(s)]}")" 6.5)")"
for w in "$c" real-like; do
  one=$(mean "${wall[$w, 1 rank(s)]}")
  for r in 2 4; do
    goal=$([ $r = 2 ] && echo 1.9 || echo 3.6); s=$(ratio "$one" "$(mean "${wall[$w, $r rank(s)]}")")
    row "$w, $r ranks >= ${goal}x one rank" "${s}x (${wall[$w, $r rank(s)]}s against ${wall[$w, 1 rank(s)]}s)$(shared $r)" \
      "$(judge_ranks $r "$(at_least "$s" $goal)")"
    row "$w, $r ranks: memory a rank about its share plus a block" \
      "largest rank ${mem[$w, $r rank(s)]} MiB; one rank ${mem[$w, 1 rank(s)]} MiB" ""
  done
done
row "real-like, 1 GPU <= 2.0 s" "${wall[real-like, 1 GPU]}s (knn ${knn[real-like, 1 GPU]}s)" \
  "$(at_most "$(worst "${wall[real-like, 1 GPU]}")" 2.0)"
if [ "$gpus" -gt 1 ]; then
  s=$(ratio "$(mean "${knn[real-like, 1 GPU]}")" "$(mean "${knn[real-like, $gpus GPUs]}")")
  row "real-like, 4 GPUs <= 1.2 s" "$gpus GPUs: ${wall[real-like, $gpus GPUs]}s" \
    "$([ "$gpus" -ge 4 ] && at_most "$(worst "${wall[real-like, $gpus GPUs]}")" 1.2)"
  row "real-like, knn step on 4 GPUs >= 3.3x one" "$gpus GPUs: ${s}x" \
    "$([ "$gpus" -ge 4 ] && at_least "$s" 3.3)"
fi
if [ -z "$dry" ]; then
  one=${wall[d = 295 bench, 1 GPU]:-}
  row "d = 295 bench, 1 GPU <= 2.5 s and <= 1.4x its FP16 floor" \
    "${one}s, floor ${floor}s: $(ratio "$(mean "$one")" "$floor")x" \
    "$(awk -v w="$(worst "$one")" -v f="$floor" 'BEGIN{if (w != "" && f > 0) print (w <= 2.5 && w <= 1.4 * f) ? 1 : 0}')"
  if [ "$gpus" -gt 1 ]; then
    s=$(ratio "$(mean "$one")" "$(mean "${wall[d = 295 bench, $gpus GPUs]}")")
    row "d = 295 bench, 4 GPUs >= 3.6x one, contexts counted" \
      "$gpus GPUs: ${wall[d = 295 bench, $gpus GPUs]}s, ${s}x" "$([ "$gpus" -ge 4 ] && at_least "$s" 3.6)"
  fi
fi
for n in "${sizes[@]:1}"; do
  key="clusters $n, $gpus GPUs"
  bytes=$(stat -c %s $d/c$n.npy)
  rows_n=$(awk -v n="${n%M}" 'BEGIN{printf "%d", n * 1000000}')
  io=$(awk -v i="$bytes" -v r="$rows_n" 'BEGIN{printf "%.0f", (i + r * 30 * 16) / 1048576}')
  row "$n x 50, 4 GPUs <= 60 s, memory <= 2.5x input + output" \
    "$gpus GPUs: ${wall[$key]}s, ${mem[$key]} MiB = $(ratio "${mem[$key]}" "$io")x of $io MiB" \
    "$([ "$gpus" -ge 4 ] && awk -v w="$(worst "${wall[$key]}")" -v m="${mem[$key]}" -v io="$io" \
      'BEGIN{print (w <= 60 && m <= 2.5 * io) ? 1 : 0}')"
done
echo
echo "lists, every way of a workload the same bytes:"
for w in "clusters ${sizes[0]}" real-like "d = 295 bench"; do
  all=""
  for key in "${!digest[@]}"; do [[ $key == "$w,"* ]] && all+="${digest[$key]}"; done
  [ -n "$all" ] || continue
  n=$(tr ' ' '\n' <<<"$all" | grep -c .); u=$(tr ' ' '\n' <<<"$all" | grep . | sort -u)
  printf '  %-16s %s runs: %s\n' "$w" "$n" "$(tr '\n' ' ' <<<"$u")$([ "$(grep -c . <<<"$u")" = 1 ] && echo '(same)' || echo '(DIFFER)')"
done
echo "total ${SECONDS} s"
