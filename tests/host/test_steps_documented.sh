#!/bin/sh
# Every step type that `knnwb plugins` lists has a row in plugin/README.md's step table, and every
# row of that table names a step that exists (the table had lost the workflow's four steps).
# Usage: test_steps_documented.sh KNNWB_PROGRAM SOURCE_DIR
set -eu
knnwb=$1
source=$2
steps=$("$knnwb" plugins | sed -n 's/^  \([a-z][a-z-]*\) -> .*/\1/p' | sort -u)
[ -n "$steps" ] || { echo "FAIL: knnwb plugins listed no steps"; exit 1; }
table=$(sed -n '/^### Steps/,/^### Examples/p' "$source/plugin/README.md" |
  sed -n 's/^| `\([a-z][a-z-]*\)` |.*/\1/p' | sort -u)
status=0
for step in $steps; do
  echo "$table" | grep -qx "$step" || {
    echo "FAIL: step $step is missing from plugin/README.md's step table"; status=1; }
done
for step in $table; do
  echo "$steps" | grep -qx "$step" || {
    echo "FAIL: plugin/README.md's step table names $step, which knnwb plugins does not list"; status=1; }
done
[ "$status" = 0 ] && echo "PASS: all $(echo "$steps" | wc -l) steps are in plugin/README.md's table"
exit "$status"
