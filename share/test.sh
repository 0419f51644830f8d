#!/usr/bin/env bash
# Second command on a fresh Debian 12 machine: install what the tests need
# (share/debian-packages.txt: the build packages plus clang, valgrind, Open MPI, libhdf5 and the
# Python peers), then run the whole suite (tests/run_all.sh: a normal build, an ASan+UBSan build,
# a valgrind subset and a libFuzzer smoke run). Works from any directory; root is asked for only
# when a package is missing. CI (.ci/run) runs exactly this.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bash "$here/install-deps.sh" test
exec bash "$here/../tests/run_all.sh" "$@"
