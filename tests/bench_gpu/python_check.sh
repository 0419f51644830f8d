#!/usr/bin/env bash
# The Python package's GPU path on a GPU machine (made for one NVIDIA H200, nvidia-h200; any CUDA
# GPU of sm_90 does): builds libknnwb and the `knnwb` program with CUDA (Release, sm_90, no tests,
# no MPI: only those two targets; skipped when the build directory has them already), installs
# the package the way a user would, into a throwaway folder, and runs python_check.py beside this
# script (GPU lists = CPU lists byte for byte for every metric, sizes, query mode, input layouts;
# KNNTransformer = scikit-learn; the program = Python; 1,000,000 x 50 from Python and from the
# program, timed; Ctrl-C). About 4-6 minutes on the H200, the CUDA build 2-3 of them.
#
# Usage (repository root):  . .gpu/env.sh && bash tests/bench_gpu/python_check.sh OUTDIR
# OUTDIR gets build.log, install.log, check.log and summary.txt; the exit status is non-zero when
# a step or a check failed.
#
# Installing the package, the first way that works (install.log says which was taken):
#   mesonpy: `import mesonpy` works (with meson and ninja): pip install --no-build-isolation
#            --no-deps --target into a temporary folder, against `cmake --install` of the build;
#   wheels:  meson, meson-python, ninja ... from .gpu/wheels/ (no network there) installed with
#            pip --no-index into a venv with --system-site-packages (NumPy, SciPy stay visible),
#            then the same pip install of ./python in that venv;
#   wheels_target: the same without a venv (no python3-venv): the wheels in a folder on
#            PYTHONPATH, then pip install --target as for mesonpy;
#   direct:  the extension compiled with cc (sysconfig's and NumPy's includes) and linked to the
#            build's libknnwb with an RPATH, beside python/knnwb/*.py in a temporary folder.
# Environment: KNNWB_PYCHECK_BUILD (build directory, default /tmp/knnwb-python, or final_check.sh's
# /tmp/knnwb-final when that CUDA build is there),
# KNNWB_PYCHECK_INSTALL=mesonpy|wheels|wheels_target|direct (force one way, or a list to try),
# KNNWB_PYCHECK_PYTHON (the interpreter: python3 if it has NumPy, else /usr/bin/python3),
# KNNWB_PYCHECK_CPU_ONLY=1 (to try this script on a machine without a GPU: a build without CUDA
# and the checks' CPU parts), KNNWB_PYCHECK_LARGE_N (rows of the large case).
# shellcheck disable=SC2317 # the try_ functions are called indirectly
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: bash tests/bench_gpu/python_check.sh OUTDIR" >&2; exit 2; }
out=$(mkdir -p "$1" && cd "$1" && pwd)
root=$(pwd)
[ -f python/meson.build ] || { echo "run from the repository root" >&2; exit 2; }
cpu_only=${KNNWB_PYCHECK_CPU_ONLY:-0}
build=${KNNWB_PYCHECK_BUILD:-/tmp/knnwb-python}
# final_check.sh's CUDA build, when it ran on this machine before: only the two targets again
if [ -z "${KNNWB_PYCHECK_BUILD:-}" ] && [ "$cpu_only" != 1 ] && [ ! -d "$build" ] &&
  grep -qx 'KNNWB_CUDA:STRING=ON' /tmp/knnwb-final/CMakeCache.txt 2>/dev/null &&
  grep -qxF "CMAKE_HOME_DIRECTORY:INTERNAL=$root" /tmp/knnwb-final/CMakeCache.txt; then
  build=/tmp/knnwb-final
fi
work=$(mktemp -d /tmp/knnwb-pycheck-XXXXXX)
trap 'rm -rf "$work"' EXIT
log() { echo "$*" | tee -a "$out/summary.txt"; }
: >"$out/summary.txt"
: >"$out/install.log"

py=${KNNWB_PYCHECK_PYTHON:-python3}
"$py" -c "import numpy" 2>/dev/null || py=/usr/bin/python3
log "python: $("$py" -c 'import sys, numpy
print(sys.executable, sys.version.split()[0], "numpy", numpy.__version__)')"
log "python headers: $("$py" -c 'import os, sysconfig
h = os.path.join(sysconfig.get_paths()["include"], "Python.h")
print(h, "found" if os.path.exists(h) else "MISSING (python3-dev): no install can work")')"
if [ "$cpu_only" = 1 ]; then cuda_args=(-DKNNWB_CUDA=OFF); else
  cuda_args=(-DKNNWB_CUDA=ON -DKNNWB_CUDA_ARCHITECTURES=90)
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$out/summary.txt"
fi

# 1. libknnwb and the program (incremental when the build directory exists)
SECONDS=0
build_failed() {
  tail -40 "$out/build.log"
  log "FAIL build (build.log)"
  exit 1
}
: >"$out/build.log"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF -DKNNWB_WERROR=OFF \
    -DKNNWB_MPI=OFF "${cuda_args[@]}" >>"$out/build.log" 2>&1 || build_failed
fi
cmake --build "$build" -j"$(nproc)" --target knnwb knnwb_host >>"$out/build.log" 2>&1 ||
  build_failed
log "build: $SECONDS s in $build ($(grep -E '^KNNWB_CUDA:' "$build/CMakeCache.txt"))"
program=$build/bin/knnwb

# 2. the package, installed as a user would
SECONDS=0
site=$work/site
mkdir -p "$site"
cp -r "$root/python" "$work/python"   # pip's build must not write into the checkout
rm -rf "$work/python"/.mesonpy* "$work/python/build"
# The functions below run in a condition, where `set -e` does not act: every step is chained.
relocate_pkgconfig() {
  # Under env.sh's PKG_CONFIG_SYSROOT_DIR (the dependencies unpacked in /tmp/deps) pkg-config
  # would prepend that root to every path, also to those of Python's own .pc file that meson
  # reads and of the installed knnwb: instead, copies of the dependencies' .pc files with the
  # root written into their paths, and no sysroot.
  local dirs dir f
  IFS=: read -ra dirs <<<"${PKG_CONFIG_LIBDIR:-}"
  mkdir -p "$work/pc" || return 1
  for dir in "${dirs[@]}"; do
    for f in "$dir"/*.pc; do
      if [ -e "$f" ]; then
        sed "s#^\([A-Za-z0-9_]*\) *= */#\1=$PKG_CONFIG_SYSROOT_DIR/#" "$f" >"$work/pc/${f##*/}" ||
          return 1
      fi
    done
  done
  export PKG_CONFIG_LIBDIR=$work/pc
  unset PKG_CONFIG_SYSROOT_DIR
}
pkg_config_knnwb() { # `cmake --install` into a prefix that pkg-config finds
  cmake --install "$build" --prefix "$work/prefix" || return 1
  export PKG_CONFIG_PATH=$work/prefix/lib/pkgconfig
  # The installed library has no RPATH: CUDA's libraries must be where the loader looks.
  if ldd "$work/prefix/lib/libknnwb.so" | grep "not found"; then
    local cuda_lib
    cuda_lib=$(sed -n 's/^CUDA_cublas_LIBRARY:FILEPATH=//p' "$build/CMakeCache.txt")
    [ -n "$cuda_lib" ] || return 1
    cuda_lib=$(dirname "$cuda_lib")
    export LD_LIBRARY_PATH=$cuda_lib:${LD_LIBRARY_PATH:-}
    log "install: LD_LIBRARY_PATH=$cuda_lib added (CUDA's libraries, for the installed libknnwb)"
  fi
  pkg-config --cflags --libs knnwb
}
pip_install() { # PYTHON [pip options]: ./python built against the installed library
  local python=$1
  shift
  PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 "$python" -m pip install --no-build-isolation \
    --no-deps --no-index --config-settings=setup-args=-Dlibrary=system "$@" "$work/python"
}
try_mesonpy() {
  "$py" -c "import mesonpy; print('meson-python', mesonpy.__version__)" && command -v meson &&
    command -v ninja && pkg_config_knnwb && pip_install "$py" --target "$site" || return 1
  check_python=$py
  export PYTHONPATH=$site
}
try_wheels() {
  ls "$root"/.gpu/wheels/meson_python-*.whl && "$py" -m venv --system-site-packages "$work/venv" &&
    "$work/venv/bin/python" -m pip install --no-index --find-links "$root/.gpu/wheels" \
      --ignore-installed meson-python meson ninja || return 1
  export PATH=$work/venv/bin:$PATH # meson and ninja
  pkg_config_knnwb && pip_install "$work/venv/bin/python" || return 1
  check_python=$work/venv/bin/python
}
try_wheels_target() { # the wheels where `python3 -m venv` is missing: a folder on PYTHONPATH
  ls "$root"/.gpu/wheels/meson_python-*.whl && "$py" -m pip install --no-index --ignore-installed \
    --find-links "$root/.gpu/wheels" --target "$work/tools" meson-python meson ninja || return 1
  export PATH=$work/tools/bin:$PATH PYTHONPATH=$work/tools
  pkg_config_knnwb && pip_install "$py" --target "$site" || return 1
  check_python=$py
  export PYTHONPATH=$site
}
try_direct() {
  local include numpy_include suffix headers=() d
  include=$("$py" -c "import sysconfig; print(sysconfig.get_paths()['include'])") &&
    numpy_include=$("$py" -c "import numpy; print(numpy.get_include())") &&
    suffix=$("$py" -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))") || return 1
  [ -f "$include/Python.h" ] || { echo "no $include/Python.h (python3-dev)"; return 1; }
  mkdir -p "$site/knnwb" && cp "$root"/python/knnwb/*.py "$site/knnwb/" || return 1
  for d in include core/include clustering/include formats/include drawing/include \
    workflow/include plugin/include; do headers+=("-I$root/$d"); done
  # shellcheck disable=SC2046 # pkg-config's flags are words
  cc -O2 -std=c11 -fPIC -shared -D_GNU_SOURCE -ffp-contract=off -I"$include" -I"$numpy_include" \
    -I"$root/python/src" "${headers[@]}" $(pkg-config --cflags glib-2.0 igraph) \
    "$root"/python/src/*.c -o "$site/knnwb/_knnwb$suffix" \
    -L"$build" -lknnwb -Wl,-rpath,"$build" $(pkg-config --libs glib-2.0 igraph) || return 1
  check_python=$py
  export PYTHONPATH=$site
}
if [ -n "${PKG_CONFIG_SYSROOT_DIR:-}" ]; then relocate_pkgconfig; fi
check_python=""
way=""
saved_path=$PATH
for w in ${KNNWB_PYCHECK_INSTALL:-mesonpy wheels wheels_target direct}; do
  echo "=== trying: $w" >>"$out/install.log"
  if "try_$w" >>"$out/install.log" 2>&1; then
    way=$w
    break
  fi
  log "install: $w did not work (install.log)"
  rm -rf "$site" "$work/venv" "$work/tools" "$work/prefix"
  mkdir -p "$site"
  PATH=$saved_path
  unset PYTHONPATH PKG_CONFIG_PATH
done
[ -n "$way" ] || { tail -30 "$out/install.log"; log "FAIL install: no way worked"; exit 1; }
log "install: $way, $SECONDS s"

# 3. the checks, run from outside the checkout (the installed module, not python/knnwb)
cd "$work"
rc=0
KNNWB_PYCHECK_CPU_ONLY=$cpu_only "$check_python" "$root/tests/bench_gpu/python_check.py" \
  "$program" 2>&1 | tee "$out/check.log" || rc=$?
grep -E '^(FAIL|INFO .*(wall|took)|[0-9]+ passed)' "$out/check.log" >>"$out/summary.txt" || true
log "python_check.py exit $rc"
exit "$rc"
