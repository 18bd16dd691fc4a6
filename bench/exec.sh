#!/usr/bin/env bash
# The pass-through path, side by side in one run (issue #4): the wall time
# of a read-only step, `-c ls` in a small directory, started by
#   bash       the real /bin/bash
#   floor      bench/floor: a Go program that only execs /bin/bash, the
#              floor for any exec-based proxy (one extra process start)
#   floorinit  bench/floorinit: the floor linked with every package undosh
#              imports, so that it runs their init functions first
#   undosh     bin/undosh, which parses and classifies `ls`, then execs bash
#   fast       bin/undosh-fast, the C front end that `undoctl install` puts
#              at /bin/bash: it asks its resident server (started
#              before the run, as it is after the first call), applies
#              the read-only limit it gets back, and execs bash
#   undosh and fast run with enforcement on (the default); undosh-off and
#   fast-off with UNDOSH_ENFORCE=0, which skips the limit.
# Each round runs its commands in a rotated order (bench/sidebyside times
# each with fork, exec and wait4). Targets (issue 13), enforcement on: the
# installed shell (fast) <= 1.15x the floor and <= 1.35x bash, whose own
# start is the physical floor of any front end.
# floorinit splits undosh's overhead in two: floorinit - floor is the cost
# of the imports (cgo and dynamic linking, page faults, package inits);
# undosh - floorinit is what undosh does before its exec, plus the larger
# binary.
# Then it prints the slowest package inits of undosh (GODEBUG=inittrace=1).
#
#   bench/exec.sh                 200 rounds
#   ROUNDS=500 bench/exec.sh
#   RAW=/tmp/exec.csv bench/exec.sh    # and every timing, as CSV (.fast, .undosh)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-200}
WARMUP=${WARMUP:-20}
INITRUNS=${INITRUNS:-21}
go build -o bin/ ./cmd/undosh ./bench/floor ./bench/floorinit ./bench/sidebyside
cc -O2 -static -o bin/undosh-fast front/undosh-fast.c  # internal/frontend's flags
work=$(mktemp -d "${TMPDIR:-/tmp}/undosh-bench-exec.XXXXXX")
server=
trap '[ -z "$server" ] || kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
mkdir "$work/dir"
for i in $(seq -w 1 12); do echo "file $i" > "$work/dir/file$i.txt"; done
mkdir "$work/dir/sub"
export UNDOSH_STATE_DIR=$work/state
unset UNDOSH_STEP UNDOSH_POLICY
bin=$PWD/bin
# The server, warm as it is after the first call through undosh-fast.
(UNDOSH_CLASSIFIER_DEBUG=1 exec -a undosh-classifier "$bin/undosh") &
server=$!
for _ in $(seq 2000); do [ -S "$UNDOSH_STATE_DIR/run/classify.sock" ] && break; sleep 0.01; done

echo "== -c ls in a directory of 13 entries; binaries: $(stat -c '%n %s' bin/floor bin/floorinit bin/undosh | awk '{printf "%s%s %.1f MB", (NR > 1 ? ", " : ""), $1, $2 / 1e6}')"
# Two runs: the installed shell against its baselines, then undosh
# itself. Each round of a run starts every command in it; the Go
# programs of the second (10 ms of CPU each) would otherwise fall between
# the 4 ms runs of the first.
echo "-- the installed shell (undosh-fast) against bash and the floor"
bin/sidebyside -rounds "$ROUNDS" -warmup "$WARMUP" ${RAW:+-raw "$RAW.fast"} -dir "$work/dir" \
  -ratio 'fast/floor<=1.15' -ratio 'fast/bash<=1.35' -ratio fast/fast-off -ratio fast-off/bash -ratio floor/bash \
  -env fast-off=UNDOSH_ENFORCE=0 \
  -after 'fast=test "$(cat "$BENCH_STDOUT")" = "$(ls)"' \
  -after 'fast-off=test "$(cat "$BENCH_STDOUT")" = "$(ls)"' \
  -- bash /bin/bash -c ls \
  :: floor "$bin/floor" -c ls \
  :: fast "$bin/undosh-fast" -c ls \
  :: fast-off "$bin/undosh-fast" -c ls
echo
echo "-- undosh itself (no front end) against the floors"
bin/sidebyside -rounds "$ROUNDS" -warmup "$WARMUP" ${RAW:+-raw "$RAW.undosh"} -dir "$work/dir" \
  -ratio undosh/floor -ratio undosh/undosh-off -ratio undosh/bash -ratio floor/bash \
  -ratio floorinit/floor -ratio undosh-off/floorinit \
  -env undosh-off=UNDOSH_ENFORCE=0 \
  -after 'undosh=test "$(cat "$BENCH_STDOUT")" = "$(ls)"' \
  -after 'undosh-off=test "$(cat "$BENCH_STDOUT")" = "$(ls)"' \
  -- bash /bin/bash -c ls \
  :: floor "$bin/floor" -c ls \
  :: floorinit "$bin/floorinit" -c ls \
  :: undosh "$bin/undosh" -c ls \
  :: undosh-off "$bin/undosh" -c ls
echo
log=$UNDOSH_STATE_DIR/run/classify.log
echo "server: $(grep -c '"verdict":"[LN]"' "$log") answers 'exec bash under the read-only limit', $(grep -c '"verdict":"E"' "$log") 'exec bash', $(grep -c '"verdict":"U"' "$log") 'exec undosh'"
# Its own time per answer, from reading the request to writing the answer.
for v in N L E; do
  grep "\"verdict\":\"$v\"" "$log" | sed -n 's/.*"read_us":\([0-9]*\),"took_us":\([0-9]*\).*/\1 \2/p' | sort -n -k2 |
    awk -v v="$v" '{ r[NR] = $1; t[NR] = $2 } END { if (NR) printf "server, answers %s: median %d us to answer (p90 %d), of which reading the request %d us\n", v, t[int((NR + 1) / 2)], t[int(NR * 0.9)], r[int((NR + 1) / 2)] }'
done

# Package inits: the median over INITRUNS runs of each package's init, the
# ten slowest, and the time from the runtime's start to the end of the
# last init (what inittrace's @ clock shows).
echo
echo "== undosh -c ls, package init (GODEBUG=inittrace=1, median of $INITRUNS runs, ms)"
(cd "$work/dir" && for _ in $(seq "$INITRUNS"); do GODEBUG=inittrace=1 "$bin/undosh" -c ls 2>&1 >/dev/null; echo "end"; done) |
  awk '/^init / { sub("@", "", $3); clock[$2] = clock[$2] " " $5; sum += $5; last = $3 + $5; n++ }
       /^end/   { print "=total", sum; print "=done", last; print "=count", n; sum = 0; n = 0 }
       END      { for (p in clock) { k = split(clock[p], a, " "); for (i = 1; i <= k; i++) print p, a[i] } }' |
  sort -k1,1 -k2,2n |
  awk '{ v[$1] = v[$1] " " $2; c[$1]++ }
       END { for (p in v) { split(v[p], a, " "); print a[int((c[p] + 1) / 2)], p } }' |
  sort -k1,1gr > "$work/inits"
printf '%-54s %6s\n' "all inits, summed" "$(awk '$2 == "=total" {print $1}' "$work/inits")"
printf '%-54s %6s\n' "end of the last init, from runtime start" "$(awk '$2 == "=done" {print $1}' "$work/inits")"
printf '%-54s %6s\n' "packages with an init" "$(awk '$2 == "=count" {print $1}' "$work/inits")"
grep -v ' =' "$work/inits" | head -12 | awk '{printf "  %-52s %6.3f\n", $2, $1}'
