#!/bin/sh
# share/demo.sh and the package lists: the demo installs only the run list, which the test list
# (CI) contains; without root and without sudo it says what to do and stops before installing.
# Usage: test_demo_script.sh SOURCE_DIR
set -eu
source=$1
run_list=$source/share/debian-packages-run.txt
test_list=$source/share/debian-packages.txt
for package in $(grep -v '^#' "$run_list"); do
  grep -qx "$package" "$test_list" || { echo "FAIL: $package is in the run list, not the test list"; exit 1; }
done
grep -q 'share/debian-packages-run.txt' "$source/share/demo.sh" || { echo "FAIL: demo.sh does not use the run list"; exit 1; }
if grep -q 'debian-packages.txt' "$source/share/demo.sh"; then
  echo "FAIL: demo.sh installs the test list"; exit 1
fi
if [ "$(id -u)" != 0 ]; then
  # A PATH with the tools the script needs before installing, and no sudo.
  work=$(mktemp -d "${TMPDIR:-/tmp}/knnwb-demo-XXXXXX")
  trap 'rm -rf "$work"' EXIT INT TERM
  for tool in bash dirname grep id env; do ln -s "$(command -v $tool)" "$work/$tool"; done
  status=0
  PATH=$work "$work/bash" "$source/share/demo.sh" >"$work/out" 2>&1 || status=$?
  [ "$status" = 1 ] || { cat "$work/out"; echo "FAIL: demo.sh without sudo exited $status"; exit 1; }
  grep -q "needs root, and sudo is not installed" "$work/out" &&
    grep -q "KNNWB_SKIP_INSTALL=1 bash share/demo.sh" "$work/out" &&
    grep -q "apt-get install -y build-essential" "$work/out" ||
    { cat "$work/out"; echo "FAIL: demo.sh does not say what to do without sudo"; exit 1; }
fi
echo "PASS: package lists and demo.sh"
