#!/usr/bin/env bash
# The server's memory for one watched workspace (issue #16: target
# ≤ 64 MiB at 500k files). Starts undosh-fast's server on a fresh state directory
# (killed at exit), reads its VmRSS from /proc/PID/status before any
# workspace is watched, then has a checkpoint start the watch of a
# generated tree (bench/gentree), waits for the watcher's set-up, records
# a base with one more checkpoint and reads VmRSS (and the peak, VmHWM)
# again, with the watcher's own count of watches and its estimate of its
# structures (bench/watchstat).
#
#   bench/watchmem.sh                 500000 files (gentree: ~35 s, 2 GB)
#   FILES=100000 bench/watchmem.sh
#   TREE=/path/to/tree bench/watchmem.sh   reuse a tree made by gentree
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
FILES=${FILES:-500000}
go build -o bin/ ./cmd/undoctl ./cmd/undosh ./bench/gentree ./bench/watchstat
work=$(mktemp -d /var/tmp/undosh-watchmem.XXXXXX)
cpid=
cleanup() {
  local rc=$?
  if [ -n "$cpid" ]; then kill "$cpid" 2>/dev/null || true; wait "$cpid" 2>/dev/null || true; fi
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
die() { echo "watchmem.sh: FAIL: $*" >&2; exit 1; }
tree=${TREE:-$work/tree}
if [ -z "${TREE:-}" ]; then bin/gentree -n "$FILES" "$tree"; fi
tree=$(cd "$tree" && pwd -P)
sd=$work/state
mkdir -p "$sd"
( export UNDOSH_STATE_DIR=$sd UNDOSH_CLASSIFIER_IDLE=1h; exec -a undosh-classifier bin/undosh ) </dev/null >"$work/server.out" 2>&1 &
cpid=$!
for _ in $(seq 100); do [ -s "$sd/run/classify.pid" ] && break; sleep 0.05; done
[ "$(cat "$sd/run/classify.pid" 2>/dev/null)" = "$cpid" ] || die "the server did not start"
mem() { awk -v k="$1:" '$1 == k {printf "%.1f", $2 / 1024}' "/proc/$cpid/status"; }
files=$(find "$tree" -type f | wc -l); dirs=$(find "$tree" -type d | wc -l)
echo "tree: $tree, $files files, $dirs directories"
echo "server pid $cpid, before any watch: VmRSS $(mem VmRSS) MiB, VmHWM $(mem VmHWM) MiB"
ck() { UNDOSH_STATE_DIR=$sd bin/undoctl checkpoint -C "$tree" --json; }
s=$EPOCHREALTIME
ck >"$work/first.json"   # walks: "watch starting"; starts the watcher
bin/watchstat -wait "$tree" -timeout 20m "$sd" >"$work/status.json" || die "the watcher did not set up"
e=$EPOCHREALTIME
echo "watch set up $(awk -v a="$s" -v b="$e" 'BEGIN{printf "%.1f", b-a}') s after the first checkpoint started: VmRSS $(mem VmRSS) MiB, VmHWM $(mem VmHWM) MiB"
ck >"$work/second.json"  # records the base
ck >"$work/third.json"
grep -q '"walk"' "$work/third.json" && die "the third checkpoint walked: $(cat "$work/third.json")"
bin/watchstat "$sd" >"$work/status.json"
echo "after a base is recorded and a watched checkpoint: VmRSS $(mem VmRSS) MiB, VmHWM $(mem VmHWM) MiB"
sed 's/.*"Watches":\([0-9]*\).*"MemBytes":\([0-9]*\).*/watcher: \1 watches (directories), its structures ~\2 bytes by its own estimate/' "$work/status.json"
echo "inotify watches of the server: $(cat /proc/$cpid/fdinfo/* 2>/dev/null | grep -c '^inotify wd:')"
