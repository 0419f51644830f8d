#!/usr/bin/env bash
# First command on a fresh Debian machine: install the dependencies, build knnwb, run the demo
# pipeline (the seed workflow) on the bundled example data. Outputs land in ./demo-output/.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $(grep -v '^#' share/debian-packages.txt) >/dev/null
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
mkdir -p demo-output
build/bin/knnwb run share/examples/seed-workflow.xml --output-dir demo-output --report
build/bin/knnwb run share/examples/mst-knn-clusters.xml --output-dir demo-output --report
# The seed's own workflow: metafeatures, phenotype row, its neighbourhood; kNN classification.
build/bin/knnwb run share/examples/seed-neighbourhood.xml --output-dir demo-output --report
build/bin/knnwb run share/examples/classify-groups.xml --output-dir demo-output --report
ls -l demo-output
echo "Open demo-output/*.gml in yEd (Layout is already computed; nodes are coloured by cluster in the MST-kNN output)."
