#!/usr/bin/env bash
# A whole VM forked under QEMU (issue 20), the engine the QEMU provider is
# built on (internal/qemu), on a guest internal/vmtest builds from
# Debian's packages, at 256 MiB, 512 MiB and 1 GiB under TCG: medians of
# ROUNDS of
#
#   paused-ms             the original's vCPUs stopped (the live fork's last
#                         round, the disk's top frozen meanwhile)
#   copy-running-ms       from the start of the fork until the copy runs
#                         (its qemu started, the memory sent, cont)
#   checkpoint-paused-ms  a checkpoint's stop: freeze, state to a file, cont
#   restore-ms            a new qemu loading the checkpoint, until it runs
#
# then the provider's commands as undohost runs them (`undohost qemu …`, a
# process each; internal/qemuhost), idle and with 64 MiB of the guest's
# memory written before each fork (-dirty):
#
#   fork-ms        until the copy runs          discard-ms     delete of a copy
#   promote-ms     the copy becomes the sandbox's VM, the old one quits
#   checkpoint-ms  snapshot, whole              restore-ms     until the VM runs
#   helper-ms      a command that does nothing (network off): the helper's
#                  own cost over the QMP operations
#
# Targets (512 MiB): paused <= 100 ms, copy <= 1 s, checkpoint <= 250 ms,
# restore <= 500 ms, discard <= 20 ms, promote <= 30 ms, helper <= 5 ms. Needs qemu-system-x86, qemu-utils, busybox-static,
# kmod and apt (the guest's kernel is downloaded).
#
#   bench/host-qemu.sh             5 rounds
#   ROUNDS=9 bench/host-qemu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
echo "$(date '+%Y-%m-%d %H:%M'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $ROUNDS rounds; $(qemu-system-x86_64 --version | head -1)"
go test ./internal/qemu -run '^$' -bench Fork -benchtime "${ROUNDS}x" -count 1 | grep -E '^Benchmark' |
  awk '{ printf "%-22s", $1; for (i = 3; i < NF; i += 2) printf "  %s %s", $i, $(i+1); print "" }'
go test ./internal/qemuhost -run '^$' -bench Provider -benchtime "${ROUNDS}x" -count 1 | grep -E '^Benchmark' |
  awk '{ printf "%-30s", $1; for (i = 5; i < NF; i += 2) printf "  %s %s", $i, $(i+1); print "" }'
