#!/usr/bin/env bash
# First command on a fresh Debian 12 machine: install what building and running knnwb needs
# (share/debian-packages-run.txt: compiler, CMake, GLib, igraph, libxml2, OpenBLAS, oneDNN, zlib,
# cairo; not the test tools), build knnwb, run the demo pipelines on the bundled example data.
# Outputs land in ./demo-output/. Installing packages needs root: run it as root, or as a user with sudo.
# Without either (a fresh Debian has no sudo): as root, `apt-get install $(cat
# share/debian-packages-run.txt)` once, then run this script as yourself with KNNWB_SKIP_INSTALL=1.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=$(grep -v '^#' share/debian-packages-run.txt)
if [ "${KNNWB_SKIP_INSTALL:-0}" != 1 ]; then
  if [ "$(id -u)" = 0 ]; then
    SUDO=""
  elif command -v sudo >/dev/null 2>&1; then
    SUDO=sudo
    echo "demo.sh: installing packages with sudo (it may ask for your password): $(echo $packages)"
  else
    echo "demo.sh: installing the Debian packages needs root, and sudo is not installed." >&2
    echo "  As root:  apt-get update && apt-get install -y $(echo $packages)" >&2
    echo "  Then, as yourself:  KNNWB_SKIP_INSTALL=1 bash share/demo.sh" >&2
    exit 1
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $packages >/dev/null
fi
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
