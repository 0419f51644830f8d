#!/bin/sh
# Installs the build into a temporary prefix and uses it from outside, as another project would:
#  1. a tiny C program built with nothing but `pkg-config --cflags --libs knnwb`;
#  2. share/example_program (libknnwb's C API, and g_module_open of the kNN plugin), built with
#     its Makefile against the installed tree;
#  3. the installed knnwb finds its installed plugin and runs an installed example pipeline.
# Usage: test_install.sh BUILD_DIR SOURCE_DIR C_COMPILER
set -eu
build=$1
source=$2
cc=${3:-cc}
work=$(mktemp -d "${TMPDIR:-/tmp}/knnwb-install-XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || {
  cat "$work/install.log"; echo "FAIL: cmake --install"; exit 1; }
pc=$(find "$prefix" -name knnwb.pc | head -n 1)
[ -n "$pc" ] || { echo "FAIL: no knnwb.pc installed"; exit 1; }
libdir=$(dirname "$(dirname "$pc")")
[ -f "$libdir/libknnwb.so" ] || { echo "FAIL: no libknnwb.so in $libdir"; exit 1; }
# This install went to another prefix than the configured one: knnwb.pc must work as installed
# (its paths are relative to ${pcfiledir}), with no edit.
grep -q '^prefix=${pcfiledir}/' "$pc" || { cat "$pc"; echo "FAIL: knnwb.pc is not relocatable"; exit 1; }
export PKG_CONFIG_PATH="$(dirname "$pc")"
pkgconf=pkg-config
# Under a pkg-config sysroot (dependencies unpacked in a folder, as on the GPU machine), every path
# pkg-config prints is prefixed with it: make the install visible there too.
if [ -n "${PKG_CONFIG_SYSROOT_DIR:-}" ]; then
  mkdir -p "$PKG_CONFIG_SYSROOT_DIR$(dirname "$prefix")"
  ln -sfn "$prefix" "$PKG_CONFIG_SYSROOT_DIR$prefix"
  trap 'rm -f "$PKG_CONFIG_SYSROOT_DIR$prefix"; rm -rf "$work"' EXIT INT TERM
  libdir="$PKG_CONFIG_SYSROOT_DIR$libdir"
fi
# pkg-config prints ${pcfiledir}/../../lib as it is: compare the directories, not the spellings.
pc_libdir=$($pkgconf --variable=libdir knnwb)
[ -d "$pc_libdir" ] && [ "$(cd "$pc_libdir" && pwd -P)" = "$(cd "$libdir" && pwd -P)" ] || {
  cat "$pc"; echo "FAIL: knnwb.pc libdir $pc_libdir is not $libdir"; exit 1; }
for header in knnwb.h knn.h graph.h matrix.h error.h plugin.h knn_plugin.h device_list.h; do
  [ -f "$prefix/include/knnwb/$header" ] || { echo "FAIL: header $header not installed"; exit 1; }
done

# 1. A tiny external program.
cat >"$work/tiny.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <knnwb/knnwb.h>
#include <knnwb/device_list.h>
int main(void)
{
  igraph_set_error_handler(igraph_error_handler_ignore);
  GError *error = NULL;
  /* The installed header-only GPU list reader compiles and reads as the program does. */
  GArray *devices = g_array_new(FALSE, FALSE, sizeof(int));
  if (!knnwb_device_list_parse(" 1 ,0", "--devices", devices, &error) || devices->len != 2 ||
      g_array_index(devices, int, 0) != 1) {
    fprintf(stderr, "device list not read\n");
    return 1;
  }
  g_array_free(devices, TRUE);
  KnnwbMatrix *m = knnwb_matrix_new(4, 2, &error);
  float v[] = {0, 0, 1, 0, 0, 1, 5, 5};
  memcpy(m->values, v, sizeof v);
  KnnwbKnnOptions o;
  knnwb_knn_options_init(&o);
  o.metric = KNNWB_METRIC_EUCLIDEAN;
  o.k = 1;
  igraph_t g;
  igraph_vector_t w;
  igraph_vector_init(&w, 0);
  if (!knnwb_knn_graph(m, &o, KNNWB_GRAPH_DIRECTED, &g, &w, &error)) {
    fprintf(stderr, "%s\n", error->message);
    return 1;
  }
  /* Row 3 (5,5) has nearest row 1 or 2 at the same distance: the lower index wins. */
  printf("knnwb %s: %d edges, 3 -> %d\n", knnwb_version(), (int)igraph_ecount(&g),
         (int)IGRAPH_TO(&g, 3));
  int ok = igraph_ecount(&g) == 4 && IGRAPH_TO(&g, 3) == 1;
  igraph_destroy(&g);
  igraph_vector_destroy(&w);
  knnwb_matrix_free(m);
  return ok ? 0 : 1;
}
C
# shellcheck disable=SC2046
$cc -std=c11 -Wall -Wextra -Werror "$work/tiny.c" -o "$work/tiny" \
  $($pkgconf --cflags --libs knnwb) -Wl,-rpath,"$libdir" || { echo "FAIL: tiny program build"; exit 1; }
"$work/tiny" || { echo "FAIL: tiny program run"; exit 1; }

# 1b. The library's program (docs/library.md, its first C block), exactly as printed there, built
#     as that page says; its .knn must be the bytes of the installed `knnwb knn -k 20 -g union`.
awk '/^```c$/ { code = 1; next }
     code && /^```$/ { exit }
     code { print }' "$source/docs/library.md" >"$work/graph.c"
[ -s "$work/graph.c" ] || { echo "FAIL: no C program in docs/library.md"; exit 1; }
# shellcheck disable=SC2046
$cc -Wall -Wextra -Werror "$work/graph.c" -o "$work/graph" $($pkgconf --cflags --libs knnwb) -Wl,-rpath,"$libdir" ||
  { echo "FAIL: docs/library.md's program does not build"; exit 1; }
data=$source/share/examples/data/synthetic_expression.tsv
"$work/graph" "$data" "$work/readme.knn" >"$work/graph.out" 2>"$work/graph.err" ||
  { cat "$work/graph.err"; echo "FAIL: docs/library.md's program run"; exit 1; }
"$prefix/bin/knnwb" knn -q "$data" -k 20 -g union -o "$work/command.knn"
cmp "$work/readme.knn" "$work/command.knn" ||
  { echo "FAIL: docs/library.md's program and knnwb knn -k 20 -g union differ"; exit 1; }
grep -qx "5001 rows, [0-9]* edges" "$work/graph.out" ||
  { cat "$work/graph.out"; echo "FAIL: docs/library.md's program printed no summary"; exit 1; }

# 2. The example program, from the installed share/ (as a user would copy it).
example=$prefix/share/knnwb/example_program
[ -f "$example/example.c" ] || { echo "FAIL: example program not installed"; exit 1; }
cp -r "$example" "$work/example"
make -s -C "$work/example" PKG_CONFIG="$pkgconf" CC="$cc" >"$work/make.log" 2>&1 || {
  cat "$work/make.log"; echo "FAIL: example program build"; exit 1; }
plugin=$($pkgconf --variable=plugindir knnwb)/knnwb-knn.so
[ -f "$plugin" ] || { echo "FAIL: kNN plugin not installed at $plugin"; exit 1; }
"$work/example/example" "$plugin" || { echo "FAIL: example program run"; exit 1; }

# 3. The installed program finds its installed plugin (relative to itself, since this prefix is
#    not the configured one) and runs an installed example pipeline. KNNWB_PLUGIN_PATH must not
#    point into the build tree for this check.
unset KNNWB_PLUGIN_PATH
mkdir "$work/run"
"$prefix/bin/knnwb" plugins >"$work/plugins.txt"
grep -q "knn-graph" "$work/plugins.txt" || { cat "$work/plugins.txt"; echo "FAIL: plugin not listed"; exit 1; }
grep -q "plugin knn .*($prefix" "$work/plugins.txt" || {
  cat "$work/plugins.txt"; echo "FAIL: plugin not from the installed tree"; exit 1; }
"$prefix/bin/knnwb" run -q --output-dir "$work/run" "$prefix/share/knnwb/examples/seed-workflow.xml"
head -n 1 "$work/run/seed-workflow.knn" | grep -qx "241 4820" || { echo "FAIL: installed example"; exit 1; }
# 4. A CMake consumer: find_package(knnwb) and the exported knnwb::knnwb target.
if command -v cmake >/dev/null; then
  mkdir "$work/cmake_consumer"
  cp "$work/tiny.c" "$work/cmake_consumer/tiny.c"
  cat >"$work/cmake_consumer/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(knnwb REQUIRED)
add_executable(tiny tiny.c)
target_link_libraries(tiny PRIVATE knnwb::knnwb)
CMAKE
  cmake -S "$work/cmake_consumer" -B "$work/cmake_consumer/build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_BUILD_RPATH="$libdir" >"$work/cmake.log" 2>&1 &&
    cmake --build "$work/cmake_consumer/build" >>"$work/cmake.log" 2>&1 || {
      cat "$work/cmake.log"; echo "FAIL: CMake consumer build"; exit 1; }
  LD_LIBRARY_PATH="$prefix/lib:${LD_LIBRARY_PATH:-}" "$work/cmake_consumer/build/tiny" || {
    echo "FAIL: CMake consumer run"; exit 1; }
fi
echo "PASS: install, pkg-config program, CMake consumer, example program, installed pipeline"
