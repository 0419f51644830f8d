#!/usr/bin/env bash
# The install script's behaviour, without installing anything: it works from any directory, reads
# its lists with comments and blank lines, reports what is missing (--check: exit 1, names it;
# KNNWB_SKIP_INSTALL=1: the same, never apt-get), says all is there when it is, and refuses a bad
# argument with its usage. Also: the run list is a subset of the test list.
# Usage: check_install_deps.sh SOURCE_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The real lists: every name a plausible package name; run is inside test.
for list in debian-packages-run.txt debian-packages.txt; do
  sed -e 's/#.*//' -e 's/[[:space:]]//g' "$src/share/$list" | grep -v '^$' | sort -u >"$work/$list.names"
  bad=$(grep -vE '^[a-z0-9][a-z0-9.+-]+$' "$work/$list.names" || true)
  [ -z "$bad" ] || fail "$list: not package names: $bad"
done
extra=$(comm -23 "$work/debian-packages-run.txt.names" "$work/debian-packages.txt.names")
[ -z "$extra" ] || fail "in the run list but not the test list: $extra"

# A copy of the script beside lists of our own, run from an unrelated directory.
mkdir -p "$work/share" "$work/elsewhere"
cp "$src/share/install-deps.sh" "$work/share/"
printf '# needed by everything\nbash\n\n  coreutils   # the shell tools\n' >"$work/share/debian-packages-run.txt"
printf 'bash\nknnwb-no-such-package-here\n' >"$work/share/debian-packages.txt"
cd "$work/elsewhere"
out=$(bash ../share/install-deps.sh run --check) || fail "run --check with everything installed: exit $?"
[[ "$out" == *"all 2 packages of debian-packages-run.txt are installed"* ]] || fail "run --check said: $out"
if out=$(bash ../share/install-deps.sh test --check 2>&1); then fail "test --check with a missing package exited 0"; fi
[[ "$out" == *"1 of 2 packages"*"knnwb-no-such-package-here"* ]] || fail "test --check said: $out"
if out=$(KNNWB_SKIP_INSTALL=1 bash "$work/share/install-deps.sh" test 2>&1); then
  fail "KNNWB_SKIP_INSTALL=1 with a missing package exited 0"
fi
[[ "$out" == *"knnwb-no-such-package-here"* && "$out" != *"updating"* ]] || fail "skip-install said: $out"
if bash ../share/install-deps.sh everything 2>"$work/err"; then fail "a bad argument was accepted"; fi
grep -q '^usage: bash .*/install-deps.sh run|test' "$work/err" || fail "no usage line: $(cat "$work/err")"
# As an ordinary user with sudo (stand-ins for id and sudo; the stand-in sudo records what it was
# asked and installs nothing): the index is updated, then only the missing package is installed,
# without recommended packages, non-interactively.
mkdir -p "$work/bin"
printf '#!/bin/sh\necho 1000\n' >"$work/bin/id"
printf '#!/bin/sh\necho "$*" >>"%s/sudo.log"\n' "$work" >"$work/bin/sudo"
chmod +x "$work/bin/id" "$work/bin/sudo"
PATH="$work/bin:$PATH" bash ../share/install-deps.sh test >"$work/out" 2>&1 ||
  fail "with sudo: exit $? ($(cat "$work/out"))"
grep -qx 'env DEBIAN_FRONTEND=noninteractive apt-get update -q' "$work/sudo.log" ||
  fail "no apt-get update through sudo: $(cat "$work/sudo.log")"
grep -qx 'env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends knnwb-no-such-package-here' \
  "$work/sudo.log" || fail "not the install line expected: $(cat "$work/sudo.log")"
# Without sudo: the line to run as root, with the script's absolute path, and exit 1.
rm "$work/bin/sudo"
for tool in bash dirname grep env sed basename cat dpkg-query; do ln -s "$(command -v $tool)" "$work/bin/$tool"; done
if PATH="$work/bin" bash ../share/install-deps.sh test >"$work/out" 2>&1; then
  fail "without sudo, as a user, with a package missing: exit 0"
fi
grep -q "bash $work/share/install-deps.sh test" "$work/out" || fail "without sudo said: $(cat "$work/out")"
echo "install-deps behaves"
