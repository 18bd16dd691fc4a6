#!/usr/bin/env bash
# Checkpoint benchmarks, side by side in one run (issue #3):
#   undoctl checkpoint / restore  against
#   a bare stat walk of the tree (bench/statwalk), the floor, and
#   C git as a shadow repository, tuned as in research/perf-anchors.md
#   (gc.auto=0, glibc malloc kept from trimming; snapshot = add -A,
#   write-tree, commit-tree, update-ref; restore = read-tree -u --reset
#   && clean -fdq).
# Prints the median wall time of each and the ratios.
#
#   bench/checkpoint.sh [FILES...]        default: 10000 100000
#   RUNS=9 bench/checkpoint.sh 10000
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-7}
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(10000 100000)
go build -o bin/ ./cmd/undoctl ./bench/gentree ./bench/statwalk
work=$(mktemp -d /var/tmp/undosh-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
export MALLOC_TOP_PAD_=67108864 MALLOC_TRIM_THRESHOLD_=268435456 MALLOC_MMAP_THRESHOLD_=33554432
ms() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N); echo $(( (e - s) / 1000000 )); }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "-"; else printf "%.2f", a / b }'; }
gitsnap() {
  git add -A
  local t; t=$(git write-tree)
  if [ "$t" != "$(git rev-parse -q --verify 'HEAD^{tree}' 2>/dev/null || true)" ]; then
    local parent=(); git rev-parse -q --verify HEAD >/dev/null 2>&1 && parent=(-p HEAD)
    git update-ref HEAD "$(git commit-tree "$t" "${parent[@]}" -m x)"
  fi
}
export -f gitsnap
touch1() { echo "// $RANDOM$RANDOM" >> "$1/f0000.go"; }
for n in "${sizes[@]}"; do
  tree=$work/tree-$n
  bin/gentree -n "$n" "$tree"
  export UNDOSH_STATE_DIR=$work/state-$n
  git init -q --bare "$work/shadow-$n"
  export GIT_DIR=$work/shadow-$n GIT_WORK_TREE=$tree
  git config gc.auto 0; git config maintenance.auto false; git config core.fsmonitor false
  git config user.name bench; git config user.email bench@localhost
  sync
  # First checkpoint, cold-ish (one run each: it is slow at 100k).
  first_u=$(ms bin/undoctl checkpoint -C "$tree")
  first_g=$(ms bash -c "cd '$tree' && gitsnap")
  # No change, one change, restore of one change: alternate the two.
  nc_u=(); nc_g=(); one_u=(); one_g=(); walk=(); rs_u=(); rs_g=()
  for _ in $(seq "$RUNS"); do
    walk+=("$(ms bin/statwalk "$tree")")
    nc_u+=("$(ms bin/undoctl checkpoint -C "$tree")")
    nc_g+=("$(ms bash -c "cd '$tree' && gitsnap")")
    touch1 "$tree"; one_u+=("$(ms bin/undoctl checkpoint -C "$tree")")
    touch1 "$tree"; one_g+=("$(ms bash -c "cd '$tree' && gitsnap")")
    # Restore after a one-file change: both stores hold the same state.
    bin/undoctl checkpoint -C "$tree" >/dev/null; (cd "$tree" && gitsnap)
    touch1 "$tree"; rs_u+=("$(ms bin/undoctl restore -C "$tree" '~0')")
    bin/undoctl checkpoint -C "$tree" >/dev/null
    touch1 "$tree"; rs_g+=("$(ms bash -c "cd '$tree' && git read-tree -u --reset HEAD && git clean -fdq")")
    (cd "$tree" && gitsnap)
  done
  m() { printf '%s\n' "$@" | median; }
  w=$(m "${walk[@]}"); nu=$(m "${nc_u[@]}"); ng=$(m "${nc_g[@]}")
  ou=$(m "${one_u[@]}"); og=$(m "${one_g[@]}"); ru=$(m "${rs_u[@]}"); rg=$(m "${rs_g[@]}")
  echo "== $n files (median of $RUNS, ms; ratios: undosh / baseline)"
  printf '%-34s %8s %8s %8s  %s\n' "" undosh "C git" "walk" "undosh/walk  C git/undosh"
  printf '%-34s %8s %8s %8s  %s\n' "first checkpoint (1 run)" "$first_u" "$first_g" "-" "-            $(ratio "$first_g" "$first_u")"
  printf '%-34s %8s %8s %8s  %s\n' "checkpoint, nothing changed" "$nu" "$ng" "$w" "$(ratio "$nu" "$w")         $(ratio "$ng" "$nu")"
  printf '%-34s %8s %8s %8s  %s\n' "checkpoint, 1 file changed" "$ou" "$og" "$w" "$(ratio "$ou" "$w")         $(ratio "$og" "$ou")"
  printf '%-34s %8s %8s %8s  %s\n' "restore of a 1-file change" "$ru" "$rg" "-" "-            $(ratio "$rg" "$ru")"
  unset GIT_DIR GIT_WORK_TREE
done
