#!/usr/bin/env bash
# Times `undoctl explain --json-lines` over the labelled corpus (about 1,000
# commands) against `cat` of the same input, in one run, and prints the
# median of 7 runs of each.
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o bin/ ./cmd/undoctl
input=$(mktemp)
trap 'rm -f "$input"' EXIT
# One JSON string per command.
go run ./bench/corpusjson testdata/classify/*.txt > "$input"
n=$(wc -l < "$input")
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
time_ms() { local s e; s=$(date +%s%N); "$@" < "$input" > /dev/null; e=$(date +%s%N); echo $(( (e - s) / 1000000 )); }
undo=(); base=()
for _ in 1 2 3 4 5 6 7; do
  undo+=("$(time_ms bin/undoctl explain --json-lines)")
  base+=("$(time_ms cat)")
done
u=$(printf '%s\n' "${undo[@]}" | median)
b=$(printf '%s\n' "${base[@]}" | median)
echo "commands: $n"
echo "undoctl explain --json-lines: median ${u} ms (target: under 1000 ms)"
echo "cat of the same input:        median ${b} ms"
