#!/usr/bin/env bash
# The local fork engine's entry (issue #5), side by side in one run: the
# wall time of `undoctl try -- true` (make a copy of the machine, enter it,
# run true, discard it), started as
#   true       /bin/true: the cost of starting any process here
#   unshare    unshare --mount --net --pid --fork true: bare namespaces,
#              the floor the target is measured against
#   unshare6   unshare --mount --net --pid --ipc --uts --cgroup --fork
#              true: the same six namespaces a copy gets
#   forktry    bench/forktry -- true: fork.Create (a tmpfs with the
#              upper and work directories, seeded), Run (re-exec as pid 1
#              of the six namespaces; overlays, /proc, /sys, /dev, lo,
#              pivot_root, capabilities; run true; reap), Discard
#   ondisk     the same with Options.OnDisk (the upper on the state
#              directory's filesystem)
#   try        undoctl try -- true: the same through the CLI (its start,
#              the machine-step lock, the diff and its summary included)
# Each round runs them in a rotated order (bench/sidebyside times each
# with fork, exec and wait4). Targets: forktry <= 60 ms median, and
# <= 4x unshare. binpash/try's `try -n true` took 1.9-3.2 s on this kind
# of machine (research/fork-engine.md).
# Then it prints where forktry's time goes (-timing, median of TIMINGRUNS).
#
# Needs root and overlayfs.
#
#   bench/fork.sh                 200 rounds
#   ROUNDS=500 bench/fork.sh
#   RAW=/tmp/fork.csv bench/fork.sh    # and every timing, as CSV
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-200}
WARMUP=${WARMUP:-10}
TIMINGRUNS=${TIMINGRUNS:-51}
if [ "$(id -u)" != 0 ]; then
  echo "bench/fork.sh: needs root" >&2
  exit 2
fi
go build -o bin/ ./bench/forktry ./bench/sidebyside ./cmd/undoctl
work=$(mktemp -d /var/tmp/undosh-bench-fork.XXXXXX)
trap 'rm -rf "$work"' EXIT
state=$work/state
bin=$PWD/bin

echo "== enter a copy, run true, discard it; $(uname -r), binary $(stat -c %s bin/forktry | awk '{printf "%.1f MB", $1 / 1e6}')"
bin/sidebyside -rounds "$ROUNDS" -warmup "$WARMUP" ${RAW:+-raw "$RAW"} -dir "$work" \
  -ratio 'forktry/unshare<=4' -ratio 'try/unshare' -ratio forktry/unshare6 -ratio ondisk/unshare -ratio unshare6/unshare -ratio unshare/true \
  -after 'forktry=test -z "$(ls -A '"$state"')"' \
  -after 'ondisk=test -z "$(ls -A '"$state"')"' \
  -- true /bin/true \
  :: unshare unshare --mount --net --pid --fork true \
  :: unshare6 unshare --mount --net --pid --ipc --uts --cgroup --fork true \
  :: forktry "$bin/forktry" -state "$state" -- true \
  :: ondisk "$bin/forktry" -ondisk -state "$state" -- true \
  :: try env UNDOSH_STATE_DIR="$work/undoctl-state" "$bin/undoctl" try -- true | tee "$work/out"
awk '$1 == "forktry" && NF >= 5 && $2 + 0 > 0 {
       printf "\nforktry median %.2f ms: target <= 60 ms: %s\n", $2, ($2 <= 60 ? "met" : "MISSED"); exit }' "$work/out"

echo
echo "== where forktry's time goes (median of $TIMINGRUNS runs, ms; run = re-exec + setup + true + teardown)"
for _ in $(seq "$TIMINGRUNS"); do "$bin/forktry" -timing -state "$state" -- true; done 2>&1 |
  awk '{ for (i = 1; i < NF; i++) if ($i ~ /^(create|run|discard)$/ || $i == "(setup") print $i, $(i + 1) }' |
  sed 's/(setup/setup/; s/)$//' |
  awk '{ v = $2; u = 1
         if (v ~ /µs$/) { sub(/µs$/, "", v); u = 0.001 } else if (v ~ /ms$/) { sub(/ms$/, "", v) } else if (v ~ /s$/) { sub(/s$/, "", v); u = 1000 }
         print $1, v * u }' |
  sort -k1,1 -k2,2g |
  awk '{ v[$1] = v[$1] " " $2; c[$1]++ }
       END { split("create run setup discard", order, " ")
             for (k = 1; k <= 4; k++) { p = order[k]; split(v[p], a, " "); printf "  %-8s %7.2f\n", p, a[int((c[p] + 1) / 2)] } }'

# The rootless copy (issue #17): the same entry for a user who is not
# root, side by side with its floor, bare user namespaces:
#   unshareu   unshare --user --map-root-user --mount --net --pid --fork true
#   tryu       undoctl try -- true as that user: a rootless copy (a user
#              namespace, a skeleton root, an overlay per directory with no
#              mount below it, on /dev/shm), true, discard
#   commitu    undoctl run --fork -- a one-file write in the user's home:
#              the same, plus the diff and the commit of that file
# Targets: tryu <= 60 ms median and <= 4x unshareu; the commit of a small
# change (commitu - tryu) <= 50 ms.
echo
user=undosh-bench-fork
if ! id "$user" >/dev/null 2>&1; then
  useradd --create-home --home-dir "/home/$user" --shell /bin/bash --user-group "$user"
fi
trap 'rm -rf "$work"; userdel --remove "$user" 2>/dev/null || true' EXIT
uwork=$(su "$user" -c 'mktemp -d')
echo "== the same as $user, who is not root (a rootless copy)"
su "$user" -c "cd ~ && '$bin/sidebyside' -rounds '$ROUNDS' -warmup '$WARMUP' -dir '$uwork' \
  -ratio 'tryu/unshareu<=4' -ratio commitu/tryu -ratio unshareu/true \
  -- true /bin/true \
  :: unshareu unshare --user --map-root-user --mount --net --pid --fork true \
  :: tryu env UNDOSH_STATE_DIR='$uwork/state' '$bin/undoctl' try -- true \
  :: commitu env UNDOSH_STATE_DIR='$uwork/state' '$bin/undoctl' run --fork -- sh -c 'echo \$\$ > ~/bench-file'" | tee "$work/outu"
awk '$1 == "tryu" && NF >= 5 && $2 + 0 > 0 { t = $2 } $1 == "commitu" && NF >= 5 && $2 + 0 > 0 { c = $2 }
     END { printf "\ntryu median %.2f ms: target <= 60 ms: %s\n", t, (t <= 60 ? "met" : "MISSED")
           printf "commit of one file (commitu - tryu) %.2f ms: target <= 50 ms: %s\n", c - t, (c - t <= 50 ? "met" : "MISSED") }' "$work/outu"
