#!/bin/sh
# The Python package as a user installs it: `cmake --install` of this build into a temporary
# prefix, then `pip install --no-build-isolation ./python` (meson-python, offline) into a throwaway
# venv that sees Debian's numpy and meson-python, linked against that prefix through pkg-config;
# then the installed module, imported from outside the checkout, computes lists.
# Usage: test_pip_install.sh BUILD_DIR SOURCE_DIR PYTHON3
set -eu
build=$1
source=$2
python=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/knnwb-pip-XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

cmake --install "$build" --prefix "$work/prefix" >"$work/install.log" 2>&1 || {
  cat "$work/install.log"; echo "FAIL: cmake --install"; exit 1; }
pc=$(find "$work/prefix" -name knnwb.pc | head -n 1)
[ -n "$pc" ] || { echo "FAIL: no knnwb.pc installed"; exit 1; }
"$python" -m venv --system-site-packages --without-pip "$work/venv"
# The source folder is copied: the build must not need (or write into) the checkout around it.
cp -R "$source/python" "$work/python"
rm -rf "$work/python/build" "$work/python/.mesonpy"*
PKG_CONFIG_PATH="$(dirname "$pc")" PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
  "$work/venv/bin/python" -m pip install --no-build-isolation --no-index --no-deps \
  --config-settings=setup-args=-Dlibrary=system "$work/python" >"$work/pip.log" 2>&1 || {
  cat "$work/pip.log"; echo "FAIL: pip install ./python"; exit 1; }

cd "$work"
"$work/venv/bin/python" - "$work/venv" "$work/prefix" <<'PY'
import os
import sys

import numpy as np

import knnwb
from knnwb import _knnwb

venv, prefix = (os.path.realpath(p) for p in sys.argv[1:3])
assert os.path.realpath(knnwb.__file__).startswith(venv), knnwb.__file__
# The extension loads the library of the prefix it was built against.
with open("/proc/self/maps") as maps:
    libraries = {line.split()[-1] for line in maps if "libknnwb.so" in line}
assert libraries and all(os.path.realpath(p).startswith(prefix) for p in libraries), libraries
rows = np.random.default_rng(4).standard_normal((257, 5)).astype(np.float32)
indices, distances = knnwb.kneighbors(rows, 7, metric="euclidean")
x = rows.astype(np.float64)
squared = ((x[:, None, :] - x[None, :, :]) ** 2).sum(axis=2)
np.fill_diagonal(squared, np.inf)
order = np.argsort(squared, axis=1, kind="stable")[:, :7]
assert np.array_equal(indices, order), "lists differ from the oracle"
assert np.allclose(distances, np.sqrt(np.take_along_axis(squared, order, axis=1)), rtol=1e-12)
print("installed knnwb", knnwb.__version__, "from", os.path.dirname(knnwb.__file__), "works")
PY
