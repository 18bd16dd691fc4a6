#!/usr/bin/env bash
# Checkpoint benchmarks, side by side in one run (issues #3 and #16):
#   undoctl checkpoint / restore, walked: a state directory with no
#     server, so every checkpoint walks the whole tree;
#   undoctl checkpoint / restore, watched: a second state directory whose
#     server (started here, killed at exit) watches the tree, so a
#     checkpoint reads only what its watcher saw change;
#   a bare stat walk of the tree (bench/statwalk), the floor for anything
#     that looks at every file; and
#   C git as a shadow repository, tuned as in research/perf-anchors.md
#     (gc.auto=0, glibc malloc kept from trimming; snapshot = add -A,
#     write-tree, commit-tree, update-ref; restore = read-tree -u --reset
#     && clean -fdq).
# All four work on the same tree, one after the other in each round, each
# seeing the same change. Prints the median wall time of each (ms) and the
# ratios. Every timed watched checkpoint is run with --json and the script
# fails if one walked; a watched restore is checked once, untimed, under
# strace (it must not list or stat the tree).
#
#   bench/checkpoint.sh [FILES...]        default: 10000 100000
#   bench/checkpoint.sh 10000 100000 500000   (500k: gentree takes ~1-2 min,
#                                          the first walked checkpoints more)
#   RUNS=9 bench/checkpoint.sh 10000
#   KEEP=1 ...                            keep the temporary directory
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
RUNS=${RUNS:-7}
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(10000 100000)
go build -o bin/ ./cmd/undoctl ./cmd/undosh ./bench/gentree ./bench/statwalk ./bench/watchstat
work=$(mktemp -d /var/tmp/undosh-bench.XXXXXX)
cpid=
cleanup() {
  local rc=$?
  if [ -n "$cpid" ]; then kill "$cpid" 2>/dev/null || true; wait "$cpid" 2>/dev/null || true; fi
  if [ -n "${KEEP:-}" ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
die() { echo "checkpoint.sh: FAIL: $*" >&2; exit 1; }
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
export MALLOC_TOP_PAD_=67108864 MALLOC_TRIM_THRESHOLD_=268435456 MALLOC_MMAP_THRESHOLD_=33554432
out=$work/out
# tm ARRAY CMD...: run CMD (output to $out), append its wall time in ms to
# ARRAY. Timed from bash's clock, no subshell: the fork and exec of CMD are
# in it, the clock reads are not.
tm() {
  local -n _a=$1; shift
  local s e
  s=${EPOCHREALTIME/./}
  "$@" >"$out" 2>&1 || { cat "$out" >&2; die "$* failed"; }
  e=${EPOCHREALTIME/./}
  _a+=("$(( (e - s) / 1000 )).$(printf '%03d' $(( (e - s) % 1000 )))")
}
# walked JSONFILE: the "walk" reason of a checkpoint's --json output.
walked() { sed -n 's/^  "walk": "\(.*\)",$/\1/p' "$1"; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
m() { printf '%s\n' "$@" | median | xargs printf '%.1f'; }
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
# The two stores: walked (no server ever listens there) and watched.
sw=$work/state-walk sv=$work/state-watch
mkdir -p "$sw" "$sv"
ckw() { UNDOSH_STATE_DIR=$sw bin/undoctl checkpoint -C "$tree" --json; }
ckv() { UNDOSH_STATE_DIR=$sv bin/undoctl checkpoint -C "$tree" --json; }
rsw() { UNDOSH_STATE_DIR=$sw bin/undoctl restore -C "$tree" '~0'; }
rsv() { UNDOSH_STATE_DIR=$sv bin/undoctl restore -C "$tree" '~0'; }
gsnap() { bash -c "cd '$tree' && gitsnap"; }
grestore() { bash -c "cd '$tree' && git read-tree -u --reset HEAD && git clean -fdq"; }
# A timed watched checkpoint must not have walked.
mustwatch() {
  local w; w=$(walked "$out")
  [ -z "$w" ] || { cat "$out" >&2; die "$n files: a timed watched checkpoint ($1) walked: $w"; }
}
# The server of the watched store, as undosh-fast would start it.
( export UNDOSH_STATE_DIR=$sv UNDOSH_CLASSIFIER_IDLE=2h; exec -a undosh-classifier bin/undosh ) </dev/null >"$work/server.out" 2>&1 &
cpid=$!
for _ in $(seq 100); do [ -s "$sv/run/classify.pid" ] && break; kill -0 "$cpid" 2>/dev/null || die "the server exited: $(cat "$work/server.out")"; sleep 0.05; done
[ -s "$sv/run/classify.pid" ] || die "the server did not start"
[ "$(cat "$sv/run/classify.pid")" = "$cpid" ] || die "classify.pid is $(cat "$sv/run/classify.pid"), not $cpid"
rows=()
for n in "${sizes[@]}"; do
  tree=$work/tree-$n
  s=$EPOCHREALTIME; bin/gentree -n "$n" "$tree"; gen=$(awk -v a="$s" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}')
  git init -q --bare "$work/shadow-$n"
  export GIT_DIR=$work/shadow-$n GIT_WORK_TREE=$tree
  git config gc.auto 0; git config maintenance.auto false; git config core.fsmonitor false
  git config user.name bench; git config user.email bench@localhost
  sync
  # First checkpoints, cold-ish (one run each: slow at 100k). The watched
  # one starts the watcher, and walks ("watch starting").
  first_w=(); first_v=(); first_g=()   # the medians of one run each
  tm first_w ckw
  tm first_v ckv; fv_walk=$(walked "$out")
  tm first_g gsnap
  # Wait for the watcher's set-up (it lstats every file), then one more
  # checkpoint records its base (it walks: "no tree recorded yet"); from
  # then on the watched store must not walk.
  s=$EPOCHREALTIME
  bin/watchstat -wait "$tree" -timeout 20m "$sv" >"$work/status-$n.json" || die "the watcher of $tree did not set up"
  setup=$(awk -v a="$s" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}')
  ok=
  for _ in 1 2 3; do
    ckv >"$out"; [ -z "$(walked "$out")" ] && { ok=1; break; }
    echo "  ($n files: the watched checkpoint that records the base walked: $(walked "$out"))" >&2
  done
  [ -n "$ok" ] || die "$n files: the watched checkpoint walks after set-up: $(walked "$out")"
  # Same check for restore, which has no --json walk field: under strace,
  # a watched restore of a one-file change must not list the tree's
  # directories nor lstat its files.
  touch1 "$tree"
  UNDOSH_STATE_DIR=$sv strace -f -c -e trace=getdents64,newfstatat,lstat,statx -o "$work/strace-$n" bin/undoctl restore -C "$tree" '~0' >/dev/null 2>&1 \
    || die "$n files: watched restore under strace failed"
  calls=$(awk '$NF ~ /^(getdents64|newfstatat|lstat|statx)$/ {s += $4} END {print s+0}' "$work/strace-$n")
  [ "$calls" -lt $(( n / 10 )) ] || die "$n files: a watched restore walked: $calls getdents64/stat calls for $n files"
  ckw >/dev/null; ckv >"$out"; mustwatch "after restore check"; gsnap >/dev/null
  # Rounds: every tool sees the same state and change; untimed checkpoints
  # bring the stores back in step after the restores.
  floor=(); nc_w=(); nc_v=(); nc_g=(); one_w=(); one_v=(); one_g=(); rs_w=(); rs_v=(); rs_g=()
  for _ in $(seq "$RUNS"); do
    tm floor bin/statwalk "$tree"
    tm nc_w ckw
    tm nc_v ckv; mustwatch "nothing changed"
    grep -q '"changed": false' "$out" || { cat "$out" >&2; die "$n files: nothing changed, yet the watched checkpoint changed"; }
    tm nc_g gsnap
    touch1 "$tree"
    tm one_w ckw
    tm one_v ckv; mustwatch "1 file changed"
    grep -q '"hashed": 1,' "$out" || { cat "$out" >&2; die "$n files: the watched checkpoint of a 1-file change did not hash exactly 1 file"; }
    tm one_g gsnap
    touch1 "$tree"; tm rs_w rsw
    touch1 "$tree"; tm rs_v rsv
    touch1 "$tree"; tm rs_g grestore
    ckw >/dev/null; ckv >"$out"; mustwatch "after restores"; gsnap >/dev/null
  done
  w=$(m "${floor[@]}")
  first_row=${#rows[@]}
  r() { printf '%-30s %9s %9s %9s %9s  %12s %14s %14s\n' "$@"; }
  rows+=("== $n files (gentree ${gen}s, watch set-up ${setup}s; median of $RUNS, ms)")
  rows+=("$(r "" walked watched "C git" "stat walk" watched/walked "C git/watched" "watched/floor")")
  rows+=("$(r "first checkpoint (1 run)" "$(m "$first_w")" "$(m "$first_v")" "$(m "$first_g")" - - - -)")
  for op in nc one rs; do
    case $op in
      nc) label="checkpoint, nothing changed"; a=("${nc_w[@]}"); b=("${nc_v[@]}"); c=("${nc_g[@]}") ;;
      one) label="checkpoint, 1 file changed"; a=("${one_w[@]}"); b=("${one_v[@]}"); c=("${one_g[@]}") ;;
      rs) label="restore of a 1-file change"; a=("${rs_w[@]}"); b=("${rs_v[@]}"); c=("${rs_g[@]}") ;;
    esac
    mw=$(m "${a[@]}"); mv=$(m "${b[@]}"); mg=$(m "${c[@]}")
    rows+=("$(r "$label" "$mw" "$mv" "$mg" "$w" "$(ratio "$mv" "$mw")" "$(ratio "$mg" "$mv")" "$(ratio "$mv" "$w")")")
    rows+=("$(r "  watched, min–max" "" "$(printf '%s\n' "${b[@]}" | sort -n | head -1 | xargs printf '%.1f')–$(printf '%s\n' "${b[@]}" | sort -n | tail -1 | xargs printf '%.1f')" "" "" "" "" "")")
  done
  rows+=("  first watched checkpoint walked: ${fv_walk:-no}; strace of a watched restore: $calls getdents64/stat calls")
  printf '%s\n' "${rows[@]:$first_row}"
  unset GIT_DIR GIT_WORK_TREE
  rm -rf "$tree" "$work/shadow-$n"
done
echo
echo "== summary ($(date -u +%Y-%m-%dT%H:%MZ), load $(cut -d' ' -f1-3 /proc/loadavg), server pid $cpid)"
printf '%s\n' "${rows[@]}"
