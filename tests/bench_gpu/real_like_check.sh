#!/usr/bin/env bash
# The real-like workload of the scale goals: the 876 most variable rows of a real microarray
# (Bioconductor's ALL, 12,625 genes x 128 patients), expanded with `knnwb metafeatures --ops all`
# to 1,533,876 x 128 (the seed's recipe), Pearson k = 20, the whole `knnwb knn` command with the
# partitioned search on its automatic choice and off. Prints wall times, knnwb's own line, the
# choice and the lists' digest.
# Step 1, on a machine with R and Debian's r-bioc-all (not the GPU machines):
#   bash tests/bench_gpu/real_like_check.sh --rows all876.tsv
# Step 2, on the GPU machine (repository root, after `. .gpu/env.sh`, the TSV carried along):
#   bash tests/bench_gpu/real_like_check.sh all876.tsv OUT
set -uo pipefail
if [ "${1:-}" = "--rows" ]; then
  Rscript -e 'suppressMessages(library(ALL)); data(ALL); x <- Biobase::exprs(ALL);
    o <- order(-apply(x, 1, var))[1:876];
    write.table(x[o, ], commandArgs(TRUE)[1], sep = "\t", quote = FALSE, col.names = NA)' "$2"
  exit $?
fi
rows=$1; out=$2; b=/tmp/knnwb-real; d=/tmp/knnwb-real-data; mkdir -p "$out" $d
SECONDS=0
{ cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_MPI=OFF -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release &&
  cmake --build $b -j"$(nproc)" --target knnwb_host; } >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
echo "build ${SECONDS} s"; nvidia-smi --query-gpu=name --format=csv,noheader | uniq -c
k=$b/bin/knnwb; export LD_LIBRARY_PATH=$b:${LD_LIBRARY_PATH:-}
$k metafeatures "$rows" --ops all -o $d/real.npy || exit 1
for mode in auto off auto off; do
  t0=$(date +%s.%N)
  KNNWB_PARTITION=$mode G_MESSAGES_DEBUG=all $k knn $d/real.npy -k 20 -m pearson -o $d/g.npy >"$out/one.log" 2>&1
  r=$?; t1=$(date +%s.%N)
  printf 'partition=%-4s rc=%d %6.2f s  %s\n' $mode $r "$(awk -v a=$t0 -v b=$t1 'BEGIN{print b-a}')" "$(sha256sum $d/g.npy | cut -c1-16)"
  grep -E "^knnwb: [0-9]+ x|partition: [0-9]+ clusters \(|partition: (done|not used)" "$out/one.log" | cut -c1-200 | sed 's/^/    /'
  cat "$out/one.log" >>"$out/runs.log"
done
rm -rf $d
