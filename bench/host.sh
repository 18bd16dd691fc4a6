#!/usr/bin/env bash
# undohost (issue #6): the cost of the hostlink protocol around a
# local-backend fork, against calling the fork engine directly.
#
# BenchmarkLocalForkOverhead alternates, round by round, machine.Run of
# /bin/true in a copy of the machine (direct) and the same step through a
# hostlink.Client.Run over a Unix socket to a hostlink.Server with the
# local backend (hostlink), and reports the median of each and the median
# of their difference (overhead-ms; target <= 5 ms).
# BenchmarkHostlinkNoop is the protocol alone around a backend that does
# nothing. Both run twice: with the server's state directory on the disk
# of TMPDIR (the operation record is fsynced three times, each a temp
# file, fsync, rename and fsync of the directory: docs/hostlink.md §6.1),
# and on a tmpfs (/dev/shm), which shows the cost without the fsyncs.
#
# Needs root and overlayfs for the fork benchmark (it skips otherwise).
#
#   bench/host.sh               100 rounds, 3 counts
#   ROUNDS=300 COUNT=5 bench/host.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-100}
COUNT=${COUNT:-3}
for where in disk tmpfs; do
	dir=${TMPDIR:-/tmp}
	[ "$where" = tmpfs ] && dir=/dev/shm
	echo "== state on $where ($dir: $(stat -f -c %T "$dir"))"
	TMPDIR=$dir go test ./internal/host -run '^$' -bench . -benchtime "${ROUNDS}x" -count "$COUNT" |
		grep '^Benchmark'
done
