#!/usr/bin/env bash
# First command on a fresh Debian 12 machine: install what building and running knnwb needs
# (share/install-deps.sh run: compiler, CMake, GLib, igraph, libxml2, OpenBLAS, oneDNN, zlib,
# cairo; not the test tools), build the program (not the tests), run the demo pipelines on the
# bundled example data. Works from any directory; outputs land in ./demo-output/ of the source tree.
# Installing packages needs root: as root, or as a user with sudo; without either, it prints the
# one line to run as root, once. KNNWB_SKIP_INSTALL=1 skips the installation.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ "${KNNWB_SKIP_INSTALL:-0}" != 1 ]; then
  bash share/install-deps.sh run
fi
# The compiler's messages go to a log: a biologist running the demo needs the results, not pages of
# build output (the log's end is shown if the build fails).
mkdir -p build demo-output
echo "demo.sh: building knnwb in build/ (about a minute; compiler messages in build/demo-build.log)"
if ! { cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF &&
  cmake --build build -j"$(nproc)"; } \
  >build/demo-build.log 2>&1; then
  tail -n 40 build/demo-build.log >&2
  echo "demo.sh: the build failed; the whole log is build/demo-build.log" >&2
  exit 1
fi
echo "demo.sh: built build/bin/knnwb; running the four demo pipelines (share/examples/*.xml)"
build/bin/knnwb run share/examples/seed-workflow.xml --output-dir demo-output --report
build/bin/knnwb run share/examples/mst-knn-clusters.xml --output-dir demo-output --report
# The seed's own workflow: metafeatures, phenotype row, its neighbourhood; kNN classification.
build/bin/knnwb run share/examples/seed-neighbourhood.xml --output-dir demo-output --report
build/bin/knnwb run share/examples/classify-groups.xml --output-dir demo-output --report
# Pictures for a first look without yEd (knnwb render needs cairo, which the run list installs).
pictures=yes
for graph in seed-workflow mst-knn-clusters relapse-neighbourhood; do
  build/bin/knnwb render -q "demo-output/$graph.gml" -o "demo-output/$graph.png" || pictures=no
done
# The samples' kNN graph with their group and years to relapse as node attributes, drawn coloured
# by group with its legend; and, for the phenotype's nearest rows, the seed paper's Figure 3: each
# one's values against years to relapse across the samples.
data=share/examples/data
build/bin/knnwb knn -q "$data/synthetic_expression.tsv" --transpose -k 5 --graph union \
  --annotation "$data/synthetic_clinical.tsv:Group,YearsToRelapse" -o demo-output/samples.gml
build/bin/knnwb render -q demo-output/samples.gml --color-by Group -o demo-output/samples.png ||
  pictures=no
build/bin/knnwb neighbourhood -q "$data/synthetic_expression.tsv" --metafeatures difference \
  --pair-rows "$data/synthetic_pair_rows.txt" --phenotype "$data/synthetic_clinical.tsv:YearsToRelapse" \
  --focus YearsToRelapse -k 20 --order 2 -o demo-output/relapse-plots.gml \
  --plots demo-output/relapse-plots --plots-color-by "$data/synthetic_clinical.tsv:Group" || pictures=no
cat <<'TEXT'

demo.sh: done. What is in demo-output/:
  seed-workflow.knn            the exact kNN graph (Pearson, k = 20) of the 241 rows (240 probes
                               and a clinical variable added as one more row) of share/examples/demo-expression.txt:
                               a line `rows edges`, then one `row neighbour distance` line per
                               edge (rows numbered from 0 in file order)
  seed-workflow.gml            the same graph for yEd; that row, YearsToRelapse, is the red
                               hexagon
  mst-knn-clusters.gml         the probes' kNN graph (k = 10), nodes coloured by MST-kNN cluster
  mst-knn-clusters.labels.tsv  each probe's cluster
  relapse-neighbourhood.gml    the probes and probe pairs (differences of 120 probes of
                               share/examples/data/synthetic_expression.tsv) nearest to the
                               phenotype YearsToRelapse (red hexagon), up to 2 hops away, nodes
                               coloured by hop
  relapse-neighbourhood.tsv    the same, ranked by distance, with each one's Pearson r, its
                               p-value and a Benjamini-Hochberg q
  samples.gml, samples.png     the 100 samples' kNN graph (k = 5), their group and years to
                               relapse as node attributes; the picture coloured by group
  relapse-plots/               for the 9 rows nearest to YearsToRelapse, each one's values
                               against years to relapse across the samples, coloured by group,
                               and overview.png with their r
  groups-predictions.tsv       each sample's predicted group (vote of its 5 nearest samples,
                               5-fold cross-validation) next to its true group
  groups-metrics.txt           accuracy, precision and recall per group, confusion matrix
TEXT
if [ "$pictures" = yes ]; then
  echo "  *.png                        pictures of the four graphs, for a first look"
fi
cat <<'TEXT'
Open a .gml file in yEd (File > Open): positions, colours and sizes are in the file, so no layout
is needed; yEd's "Fit Graph to Window" shows the whole graph. Cytoscape and Gephi read them too.
TEXT
