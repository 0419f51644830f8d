#!/bin/sh
# The folders of plugin/host/ read each other only through their headers, named with their folder
# ("runtime/runtime.h"): a *_internal.h is read only inside its folder (and by the tests);
# runtime/ reads no other folder; pipeline/ reads only runtime/; steps/ reads only
# pipeline/value.h and runtime/split_input.h. plugin/README.md ("Inside the host") says why.
# Usage: test_host_headers.sh SOURCE_DIR
set -eu
source=$1
host=$source/plugin/host
status=0
fail() {
  echo "FAIL: $*"
  status=1
}
checked=0
for file in $(find "$host" -name '*.[ch]' | sort); do
  relative=${file#"$host"/}
  folder=$(dirname "$relative")
  for header in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$file"); do
    checked=$((checked + 1))
    case $header in
    */*) unit=${header%%/*} ;;
    *) continue ;; # beside the file, or generated into the build tree
    esac
    [ "$unit" = "$folder" ] && continue
    case $header in
    *_internal.h) fail "plugin/host/$relative reads $header, private to $unit/" ;;
    esac
    case $folder:$header in
    runtime:*) fail "plugin/host/$relative reads $header: runtime/ reads no other folder" ;;
    pipeline:runtime/*) ;;
    pipeline:*) fail "plugin/host/$relative reads $header: pipeline/ reads only runtime/" ;;
    steps:pipeline/value.h | steps:runtime/split_input.h) ;;
    steps:*) fail "plugin/host/$relative reads $header: steps/ reads only pipeline/value.h and runtime/split_input.h" ;;
    esac
  done
done
# The kNN plugin is a module of its own: it reads no header of the host.
if grep -n '#include "\(runtime\|pipeline\|steps\|commands\)/' "$source"/plugin/knn/*.[ch]; then
  fail "plugin/knn/ reads a header of the host"
fi
[ "$status" = 0 ] && echo "PASS: $checked includes of plugin/host/ keep to the folders' headers"
exit "$status"
