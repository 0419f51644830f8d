#!/bin/sh
# The Python package as a user installs it: `pip install --no-build-isolation ./python`
# (meson-python, offline) into a throwaway venv that sees Debian's numpy and meson-python, then the
# installed module, imported from outside the checkout, computes lists. Two ways to get libknnwb:
#   system:  `cmake --install` of this build into a temporary prefix, found through pkg-config;
#   bundled: no installed library; the package builds libknnwb from a copy of the checkout with
#            CMake and ships it beside the extension.
# Usage: test_pip_install.sh system|bundled BUILD_DIR SOURCE_DIR PYTHON3
set -eu
mode=$1
build=$2
source=$3
python=$4
work=$(mktemp -d "${TMPDIR:-/tmp}/knnwb-pip-XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

"$python" -m venv --system-site-packages --without-pip "$work/venv"
# A copy of the sources: the build must not write into the checkout (nor see its build trees).
mkdir "$work/src"
(cd "$source" && tar --exclude='./build*' --exclude=./.git --exclude='./.venv*' \
  --exclude='./python/.mesonpy*' -cf - .) | tar -C "$work/src" -xf -
if [ "$mode" = system ]; then
  cmake --install "$build" --prefix "$work/prefix" >"$work/install.log" 2>&1 || {
    cat "$work/install.log"; echo "FAIL: cmake --install"; exit 1; }
  pc=$(find "$work/prefix" -name knnwb.pc | head -n 1)
  [ -n "$pc" ] || { echo "FAIL: no knnwb.pc installed"; exit 1; }
  export PKG_CONFIG_PATH="$(dirname "$pc")"
  expect=$work/prefix
  rm -rf "$work/src/core" # the package must not need the library's sources
else
  expect=$work/venv
  # The library build leaves out what this check does not need (CUDA, MPI), to be quick.
  export KNNWB_CMAKE_ARGS="-DKNNWB_CUDA=OFF -DKNNWB_MPI=OFF"
fi
PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
  "$work/venv/bin/python" -m pip install --no-build-isolation --no-index --no-deps \
  --config-settings=setup-args=-Dlibrary="$mode" "$work/src/python" >"$work/pip.log" 2>&1 || {
  cat "$work/pip.log"; echo "FAIL: pip install ./python ($mode)"; exit 1; }

cd "$work"
"$work/venv/bin/python" - "$work/venv" "$expect" <<'PY'
import os
import sys

import numpy as np

import knnwb

venv, expect = (os.path.realpath(p) for p in sys.argv[1:3])
assert os.path.realpath(knnwb.__file__).startswith(venv), knnwb.__file__
# The extension loads the library it was built for: the prefix's, or the one inside the package.
with open("/proc/self/maps") as maps:
    libraries = {line.split()[-1] for line in maps if "libknnwb.so" in line}
assert libraries and all(os.path.realpath(p).startswith(expect) for p in libraries), libraries
rows = np.random.default_rng(4).standard_normal((257, 5)).astype(np.float32)
indices, distances = knnwb.kneighbors(rows, 7, metric="euclidean")
x = rows.astype(np.float64)
squared = ((x[:, None, :] - x[None, :, :]) ** 2).sum(axis=2)
np.fill_diagonal(squared, np.inf)
order = np.argsort(squared, axis=1, kind="stable")[:, :7]
assert np.array_equal(indices, order), "lists differ from the oracle"
assert np.allclose(distances, np.sqrt(np.take_along_axis(squared, order, axis=1)), rtol=1e-12)
print("installed knnwb", knnwb.__version__, "with", sorted(libraries), "works")
PY
