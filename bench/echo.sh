#!/usr/bin/env bash
# Interactive sessions, side by side in one run (issue #7): the echo round
# trip of single keystrokes at an interactive prompt, and the cost of a
# read-only line (`true`, then the next prompt), for
#   bash    the real /bin/bash --norc --noprofile -i
#   undosh  bin/undosh --norc --noprofile -i, with UNDOSH_STATE_DIR in a temp dir and
#           UNDOSH_REAL_BASH=/bin/bash
# each on its own PTY (bench/echo). Each round types one key in each shell,
# in a rotated order, and times it from the write to the PTY master until
# its echo is read back; then it erases the key. Target: undosh adds
# <= 1 ms to the median echo round trip.
#
#   bench/echo.sh                 300 rounds and 50 lines after 20 warm-up
#   ROUNDS=1000 LINES=200 bench/echo.sh
#   RAW=/tmp/echo.csv bench/echo.sh    # and every timing, as CSV
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-300}
WARMUP=${WARMUP:-20}
LINES=${LINES:-50}
go build -o bin/ ./cmd/undosh ./bench/echo
echo "== keystrokes at an interactive prompt; bin/undosh $(stat -c %s bin/undosh | awk '{printf "%.1f MB", $1 / 1e6}')"
bin/echo -rounds "$ROUNDS" -warmup "$WARMUP" -lines "$LINES" ${RAW:+-raw "$RAW"} \
  -shell bash=/bin/bash -shell undosh="$PWD/bin/undosh"
