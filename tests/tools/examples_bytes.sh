#!/usr/bin/env bash
# The outputs of README's runnable examples and the demo pipelines, for checking that a change
# which should not alter behaviour (a refactoring, a move) leaves every byte as it was:
#   bash tests/tools/examples_bytes.sh SOURCE_DIR KNNWB_BINARY OUT_DIR     (once per build)
#   diff -r -I '^seconds' -I '^input' -I '^annotation' OUT_BEFORE OUT_AFTER
# (the summary files' timing and input-path lines differ between runs and checkouts).
# Failed commands are listed in OUT_DIR/log.txt.
set -u
src=$(cd "$1" && pwd); bin=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); out=$3
rm -rf "$out"; mkdir -p "$out"; cd "$out" || exit 1
D=$src/share/examples/data
k() { "$bin" "$@" -q >/dev/null 2>>log.txt || echo "FAIL $*" >>log.txt; }
k knn "$D/synthetic_expression.tsv" -k 20 --metric pearson -o graph.knn
for f in gml graphml tsv npy npz mtx; do k knn "$D/synthetic_expression.tsv" -k 7 --metric spearman -o g7.$f; done
k knn "$D/synthetic_expression.tsv" -k 5 --graph union -o gu.gml
k knn "$D/synthetic_expression.tsv" -k 5 --graph mutual --layout drl -o gm.gml
k knn "$D/cibm-sample.txt" -k 3 -o cibm.knn
k cluster "$D/synthetic_expression.tsv" --method leiden --graph snn -k 10 -o clusters.tsv --gml clusters.gml \
  --annotation "$D/synthetic_modules.tsv:module" --report
k cluster "$D/synthetic_expression.tsv" --method single-linkage --clusters 12 --metric euclidean -o sl.tsv \
  --newick sl.nwk --linkage sl.npy
k cluster "$D/synthetic_expression.tsv" --method mst-knn -o mk.tsv --hierarchy mk.splits.tsv --newick mk.nwk
k cluster "$D/synthetic_expression.tsv" --method louvain -k 8 -o lv.tsv --gml lv.gml
k cluster "$D/synthetic_expression.tsv" --method components -k 3 -o cc.tsv --gml cc.gml
k metafeatures "$D/synthetic_expression.tsv" --ops all --pair-rows "$D/synthetic_pair_rows.txt" -o pairs.npy
k neighbourhood "$D/synthetic_expression.tsv" --metafeatures difference --pair-rows "$D/synthetic_pair_rows.txt" \
  --phenotype "$D/synthetic_clinical.tsv:YearsToRelapse" --focus YearsToRelapse -k 20 --metric pearson \
  --order 2 -o relapse.gml --table relapse.tsv
k classify "$D/synthetic_expression.tsv" --transpose --classes "$D/synthetic_clinical.tsv:Group" -k 5 \
  -o predictions.tsv
mkdir -p demo
for x in seed-workflow mst-knn-clusters seed-neighbourhood classify-groups dslanguages-mst-knn; do
  (cd "$src" && "$bin" run "share/examples/$x.xml" --output-dir "$out/demo" -q >/dev/null 2>>"$out/log.txt") ||
    echo "FAIL run $x" >>log.txt
done
for g in demo/*.gml; do k render "$g" -o "$g.svg"; done
k render clusters.gml -o clusters.png --width 300
[ -s log.txt ] && cat log.txt
exit 0
