#!/bin/sh
# share/demo.sh installs through share/install-deps.sh with the run list (never the test list);
# as a user without sudo (a stand-in `id` says uid 1000, whoever runs the test) it names the one
# line to run as root and stops before building. The lists themselves and the install script's
# own behaviour: tests/tools/check_install_deps.sh.
# Usage: test_demo_script.sh SOURCE_DIR
set -eu
source=$1
grep -q 'share/install-deps.sh run' "$source/share/demo.sh" ||
  { echo "FAIL: demo.sh does not install the run list through share/install-deps.sh"; exit 1; }
if grep -q 'debian-packages.txt\|install-deps.sh test' "$source/share/demo.sh"; then
  echo "FAIL: demo.sh installs the test list"; exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/knnwb-demo-XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
# A PATH with the tools the scripts need before installing: no sudo, no dpkg-query (so every
# package reads as missing), and an `id` of an ordinary user.
for tool in bash dirname grep env sed basename cat; do ln -s "$(command -v $tool)" "$work/$tool"; done
printf '#!%s\necho 1000\n' "$(command -v sh)" >"$work/id"
chmod +x "$work/id"
status=0
(cd "$work" && PATH=$work "$work/bash" "$source/share/demo.sh") >"$work/out" 2>&1 || status=$?
[ "$status" = 1 ] || { cat "$work/out"; echo "FAIL: demo.sh without sudo exited $status"; exit 1; }
grep -q "needs root, and sudo is not installed" "$work/out" &&
  grep -q "bash $source/share/install-deps.sh run" "$work/out" &&
  grep -q "apt-get install -y -q --no-install-recommends build-essential" "$work/out" ||
  { cat "$work/out"; echo "FAIL: demo.sh does not say what to do without sudo"; exit 1; }
if grep -q "building knnwb" "$work/out"; then
  cat "$work/out"; echo "FAIL: demo.sh went on to build without its packages"; exit 1
fi
echo "PASS: demo.sh installs the run list, and says what to do without sudo"
