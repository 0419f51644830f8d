#!/usr/bin/env bash
# Installs the Debian 12 packages knnwb needs, from any directory, as root or through sudo.
#
#   bash share/install-deps.sh run     what building and running knnwb needs (share/debian-packages-run.txt)
#   bash share/install-deps.sh test    that plus the test tools (share/debian-packages.txt)
#   bash share/install-deps.sh run|test --check    list what is missing; exit 1 if anything is
#
# Nothing is asked of root when every package is already installed, so a user without sudo runs the
# line it prints once as root, then everything else as themself. Packages come without Debian's
# "recommended" extras (--no-install-recommends): those pull in LLVM and Boost for nothing.
# KNNWB_SKIP_INSTALL=1 makes it a no-op that only reports what is missing.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
usage="usage: bash $here/install-deps.sh run|test [--check]"
case "${1:-}" in
  run) list="$here/debian-packages-run.txt" ;;
  test) list="$here/debian-packages.txt" ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
check=0
case "${2:-}" in
  "") ;;
  --check) check=1 ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
[ -r "$list" ] || { echo "install-deps: cannot read $list" >&2; exit 1; }
mapfile -t wanted < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$list" | grep -v '^$')

missing=()
for package in "${wanted[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$package")
done
if [ ${#missing[@]} = 0 ]; then
  echo "install-deps: all ${#wanted[@]} packages of $(basename "$list") are installed"
  exit 0
fi
echo "install-deps: ${#missing[@]} of ${#wanted[@]} packages of $(basename "$list") are missing: ${missing[*]}"
command=(apt-get install -y -q --no-install-recommends "${missing[@]}")
if [ "$check" = 1 ] || [ "${KNNWB_SKIP_INSTALL:-0}" = 1 ]; then
  exit 1
fi

if [ "$(id -u)" = 0 ]; then
  as_root=(env DEBIAN_FRONTEND=noninteractive)
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo env DEBIAN_FRONTEND=noninteractive)
  echo "install-deps: installing needs root; sudo may ask for your password"
else
  cat >&2 <<TEXT
install-deps: installing packages needs root, and sudo is not installed. Once, as root, run
    bash $here/install-deps.sh $1
(or: apt-get update && ${command[*]})
then run your command again as yourself: nothing more is asked of root.
TEXT
  exit 1
fi

echo "install-deps: updating the package index (apt-get update)"
"${as_root[@]}" apt-get update -q >/dev/null
# apt's own lines are many and wordy; one line per package set up tells how far it is. The count of
# packages (dependencies included) comes from a simulation, which needs no root.
total=$(apt-get install -s --no-install-recommends "${missing[@]}" 2>/dev/null | grep -c '^Inst ' || true)
echo "install-deps: installing ${#missing[@]} packages, ${total} with their dependencies (downloads first)"
log=$(mktemp "${TMPDIR:-/tmp}/knnwb-install.XXXXXX")
trap 'rm -f "$log"' EXIT
if ! "${as_root[@]}" "${command[@]}" 2>&1 | tee "$log" |
  awk -v total="$total" '/^Need to get / { printf "install-deps: %s\n", $0; fflush() }
                         /^Get:/ { got++; if (got % 25 == 1) printf "install-deps: downloading (%d of %d)\n", got, total; fflush() }
                         /^Setting up / { done++; if (done % 25 == 1 || done == total) printf "install-deps: set up %d of %d (%s)\n", done, total, $3; fflush() }'; then
  tail -n 30 "$log" >&2
  echo "install-deps: apt-get failed (its last lines are above)" >&2
  exit 1
fi
echo "install-deps: done; all ${#wanted[@]} packages of $(basename "$list") are installed"
