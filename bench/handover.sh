#!/usr/bin/env bash
# What keeping a workspace step's shell in the caller's process costs
# (issue 18, docs/transparency.md), side by side in one run, in a
# generated git repository of FILES files (bench/gentree, packed):
#   fail        undosh -c 'echo x >> FILE; echo $$ > /dev/null; false': a
#               failing 1-file step, handed over (bash runs in the pid
#               the caller started, a supervisor traces it and rolls back)
#   fail-child  the same with UNDOSH_HANDOVER=0: bash as undosh's child
#   kept        undosh -c 'echo x >> OTHER': a passing step, handed over
#   kept-child  the same as a child
#   bash        /bin/bash -c 'echo x >> OTHER2', the step without undosh
# After each run of a failing step the file must be as before.
#
#   bench/handover.sh                 10000 files, 21 rounds
#   FILES=100000 ROUNDS=11 bench/handover.sh
set -euo pipefail
cd "$(dirname "$0")/.."
FILES=${FILES:-10000}
ROUNDS=${ROUNDS:-21}
WARMUP=${WARMUP:-3}
go build -o bin/ ./cmd/undosh ./bench/gentree ./bench/sidebyside
work=$(mktemp -d /var/tmp/undosh-bench-handover.XXXXXX)
trap 'rm -rf "$work"' EXIT
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
unset UNDOSH_STEP UNDOSH_POLICY GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE UNDOSH_HANDOVER
export UNDOSH_STATE_DIR=$work/state
tree=$work/tree
bin/gentree -n "$FILES" "$tree"
git -C "$tree" init -q
git -C "$tree" config gc.auto 0
git -C "$tree" add -A
git -C "$tree" -c user.name=bench -c user.email=bench@localhost commit -qm tree
git -C "$tree" gc -q
failing=d00/f0001.go
cp "$tree/$failing" "$work/original"
undosh=$PWD/bin/undosh
# The first checkpoint of a tree hashes every file: not timed.
(cd "$tree" && "$undosh" -c "echo x >> $failing; false" 2>/dev/null || true)
echo "== $FILES files in a git repository, $(nproc) CPUs"
check="cmp -s $failing '$work/original' && grep -q 'rolled back 1 file' \"\$BENCH_STDERR\""
bin/sidebyside -rounds "$ROUNDS" -warmup "$WARMUP" -dir "$tree" \
  -ratio fail/fail-child -ratio kept/kept-child -ratio kept/bash \
  -status fail=1 -status fail-child=1 \
  -after "fail=$check" -after "fail-child=$check" \
  -- fail "$undosh" -c "echo x >> $failing; echo \$\$ > /dev/null; false" \
  :: fail-child env UNDOSH_HANDOVER=0 "$undosh" -c "echo x >> $failing; echo \$\$ > /dev/null; false" \
  :: kept "$undosh" -c "echo x >> d01/f0001.go" \
  :: kept-child env UNDOSH_HANDOVER=0 "$undosh" -c "echo x >> d01/f0002.go" \
  :: bash /bin/bash -c "echo x >> d01/f0003.go"
