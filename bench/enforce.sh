#!/usr/bin/env bash
# Enforcement, side by side in one run (issues #8, #13): the wall time of
# a step through bin/undosh (no front end) with UNDOSH_ENFORCE=0 and =1,
# for
#   ro    a read-only step (-c ls): exec'd either way, under the read-only
#         limit (a mount namespace as root) when on
#   git   a step that writes the workspace (-c 'echo x > f'): checkpoint,
#         then its shell in a view of the machine (root), whose layers are
#         diffed when it ends; the hard limit without root
# Both go through `env` so that they start alike. Target: enforcement adds
# <= 5 ms to the median step. The read-only path through the front end
# is bench/exec.sh's. The workspace is a git repository under
# /home (BENCH_DIR=DIR puts it elsewhere): not under /tmp, a scratch path
# that every step may write, nor under /root, which the policy counts as
# the system's.
#
#   bench/enforce.sh              200 rounds
#   ROUNDS=500 bench/enforce.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-200}
go build -o bin/ ./cmd/undosh ./bench/sidebyside
work=$(mktemp -d "${TMPDIR:-/tmp}/undosh-bench-enforce.XXXXXX")
ws=$(mktemp -d "${BENCH_DIR:-/home}/undosh-bench-enforce.XXXXXX")
trap 'rm -rf "$work" "$ws"' EXIT
for i in $(seq -w 1 12); do echo "file $i" > "$ws/file$i.txt"; done
git -C "$ws" init -q && git -C "$ws" add . && git -C "$ws" -c user.email=b@b -c user.name=b commit -qm init
export UNDOSH_STATE_DIR=$work/state UNDOSH_REAL_BASH=/bin/bash
unset UNDOSH_STEP UNDOSH_POLICY
bin=$PWD/bin
echo "== enforcement $("$bin/undosh" -c true >/dev/null 2>&1; UNDOSH_ENFORCE=1 "$bin/undosh" -c 'cat /proc/self/mountinfo | wc -l; : > f' 2>/dev/null | head -1 | sed 's/^/(mounts seen by a workspace step: /; s/$/)/')"
bin/sidebyside -rounds "$ROUNDS" -warmup 10 -dir "$ws" \
  -ratio 'ro_on/ro_off' -ratio 'git_on/git_off' \
  -- ro_off env UNDOSH_ENFORCE=0 "$bin/undosh" -c ls \
  :: ro_on env UNDOSH_ENFORCE=1 "$bin/undosh" -c ls \
  :: git_off env UNDOSH_ENFORCE=0 "$bin/undosh" -c 'echo x > f' \
  :: git_on env UNDOSH_ENFORCE=1 "$bin/undosh" -c 'echo x > f'
