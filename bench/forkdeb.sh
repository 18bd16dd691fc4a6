#!/usr/bin/env bash
# A small package install as a machine step (issue #5): `undoctl run --fork
# -- dpkg -i tiny.deb` (copy, install in the copy, commit onto the machine)
# then `undoctl back N` (undo the commit), ROUNDS times, alternating. It
# prints the medians of: the whole step, its commit phase (from undoctl's
# --timing), and the undo (the wall time of undoctl back, start included).
# Targets: commit <= 300 ms, undo <= 300 ms. The package is built here with
# dpkg-deb (no network) and is gone again at the end (dpkg -s fails,
# dpkg --audit is clean).
#
# Needs root, overlayfs and dpkg.
#
#   bench/forkdeb.sh             15 rounds
#   ROUNDS=31 bench/forkdeb.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-15}
if [ "$(id -u)" != 0 ]; then
  echo "bench/forkdeb.sh: needs root" >&2
  exit 2
fi
go build -o bin/ ./cmd/undosh ./cmd/undoctl
work=$(mktemp -d /var/tmp/undosh-bench-deb.XXXXXX)
name=undosh-bench-pkg
trap 'dpkg --purge "$name" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
mkdir -p "$work/pkg/DEBIAN" "$work/pkg/usr/share/$name"
printf 'Package: %s\nVersion: 1.0\nArchitecture: all\nMaintainer: undosh bench <bench@example.invalid>\nDescription: a package undosh benchmarks install and remove\n' "$name" > "$work/pkg/DEBIAN/control"
for i in $(seq 1 20); do echo "file $i" > "$work/pkg/usr/share/$name/f$i"; done
dpkg-deb --build --root-owner-group "$work/pkg" "$work/$name.deb" >/dev/null
export UNDOSH_STATE_DIR=$work/state
ms() { echo "scale=1; ($2 - $1) / 1000000" | bc; }
step=() commit=() undo=()
for r in $(seq "$ROUNDS"); do
  t0=$(date +%s%N)
  bin/undoctl run --fork --timing --verify "dpkg -s $name >/dev/null" -- dpkg -i "$work/$name.deb" >/dev/null 2>"$work/err"
  t1=$(date +%s%N)
  c=$(sed -n 's/.*commit \([0-9.]*\) ms.*/\1/p' "$work/err")
  id=$(sed -n 's/.*committed as step \([0-9]*\);.*/\1/p' "$work/err")
  [ -n "$id" ] || { cat "$work/err"; exit 1; }
  dpkg -s "$name" >/dev/null
  t2=$(date +%s%N)
  bin/undoctl back "$id" >/dev/null
  t3=$(date +%s%N)
  if dpkg -s "$name" >/dev/null 2>&1; then echo "round $r: the package is still installed after undoctl back" >&2; exit 1; fi
  step+=("$(ms "$t0" "$t1")") commit+=("$c") undo+=("$(ms "$t2" "$t3")")
done
[ -z "$(dpkg --audit)" ] || { echo "dpkg --audit is not clean" >&2; exit 1; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "$(date '+%Y-%m-%d %H:%M'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $ROUNDS rounds"
printf '%-44s %8s ms\n' "whole step (copy, dpkg -i, verify, commit)" "$(median "${step[@]}")"
printf '%-44s %8s ms   target <= 300\n' "commit phase" "$(median "${commit[@]}")"
printf '%-44s %8s ms   target <= 300\n' "undo (undoctl back, process start included)" "$(median "${undo[@]}")"
echo "dpkg --audit clean; the package is gone"
