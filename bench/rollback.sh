#!/usr/bin/env bash
# A protected step end to end, side by side in one run (issue #4), in a
# generated git repository of FILES files (bench/gentree; committed, then
# packed by git gc as a clone would be):
#   walk      one bare stat walk of the repository, .git included, as
#             undosh checkpoints it (bench/statwalk), the floor
#   rollback  undosh -c 'echo x >> FILE; false': a failing step that changes
#             one file, so undosh checkpoints, runs bash, and rolls back;
#             after each run the file must be as before and the rollback
#             notice on stderr
#   kept      undosh -c 'echo x >> OTHER': a step that passes, so a
#             checkpoint and the run only (the file must have grown)
#   ls        undosh -c ls, a read-only step: no checkpoint
#   bash-ls   /bin/bash -c ls, its baseline
# Each round runs the five in a rotated order (bench/sidebyside). Every
# step of undosh sees the change the kept step made in the round before,
# as a step after a step would. Target: rollback <= 2.5x the walk.
#
#   bench/rollback.sh                         10000 files, 31 rounds
#   FILES=100000 ROUNDS=15 bench/rollback.sh
#   RAW=/tmp/rollback.csv bench/rollback.sh   # and every timing, as CSV
set -euo pipefail
cd "$(dirname "$0")/.."
FILES=${FILES:-10000}
ROUNDS=${ROUNDS:-31}
WARMUP=${WARMUP:-3}
go build -o bin/ ./cmd/undosh ./bench/gentree ./bench/statwalk ./bench/sidebyside
work=$(mktemp -d /var/tmp/undosh-bench-rollback.XXXXXX)
trap 'rm -rf "$work"' EXIT
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
unset UNDOSH_STEP UNDOSH_POLICY GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE
export UNDOSH_STATE_DIR=$work/state
tree=$work/tree
bin/gentree -n "$FILES" "$tree"
git -C "$tree" init -q
git -C "$tree" config gc.auto 0  # no gc in the background during the runs
git -C "$tree" add -A
git -C "$tree" -c user.name=bench -c user.email=bench@localhost commit -qm tree
git -C "$tree" gc -q
failing=d00/f0001.go
kept=d01/f0001.go
cp "$tree/$failing" "$work/original"
sync

# The first checkpoint of a tree hashes every file: time it once, apart.
undosh=$PWD/bin/undosh
first=$(cd "$tree" && s=$(date +%s%N) && { "$undosh" -c "echo x >> $failing; false" 2>"$work/first.err" || true; } &&
  e=$(date +%s%N) && echo $(( (e - s) / 1000000 )))
cmp -s "$tree/$failing" "$work/original" && grep -q 'rolled back 1 file' "$work/first.err" ||
  { echo "rollback.sh: the first rollback did not restore $failing:" >&2; cat "$work/first.err" >&2; exit 1; }
echo "== $FILES files in a git repository ($(bin/statwalk "$tree") entries with .git)"
echo "first step (first checkpoint of the tree + rollback), 1 run: $first ms"
echo

bin/sidebyside -rounds "$ROUNDS" -warmup "$WARMUP" ${RAW:+-raw "$RAW"} -dir "$tree" \
  -ratio 'rollback/walk<=2.5' -ratio kept/walk -ratio rollback/kept -ratio ls/bash-ls \
  -status rollback=1 \
  -after "rollback=cmp -s $failing '$work/original' && grep -q 'rolled back 1 file' \"\$BENCH_STDERR\"" \
  -after "kept=test \"\$(tail -c 2 $kept)\" = x && ! test -s \"\$BENCH_STDERR\"" \
  -after "ls=test -s \"\$BENCH_STDOUT\" && ! test -s \"\$BENCH_STDERR\"" \
  -- walk "$PWD/bin/statwalk" "$tree" \
  :: rollback "$undosh" -c "echo x >> $failing; false" \
  :: kept "$undosh" -c "echo x >> $kept" \
  :: ls "$undosh" -c ls \
  :: bash-ls /bin/bash -c ls
