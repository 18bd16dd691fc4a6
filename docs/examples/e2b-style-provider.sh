#!/bin/sh
# undohost provider backend for a hosted sandbox service with a fork API
# (Runtime, E2B and the like): docs/undohost.md, "A hosted provider".
#
# *** EXAMPLE ONLY. `sbx` is an IMAGINARY command-line client, standing for
# your provider's SDK or CLI. Replace each call with the real one. ***
#
# What it assumes of `sbx` (every hosted provider has an equivalent):
#   sbx fork ID                  -> prints the new sandbox's id
#   sbx network ID off|allow H.. set the sandbox's egress
#   sbx exec ID --cwd DIR -- ARGV streams stdout/stderr, exits with ARGV's status
#   sbx alias set NAME ID        points the stable handle NAME at sandbox ID
#   sbx alias get NAME           prints the sandbox id behind NAME
#   sbx kill ID                  deletes a sandbox
#   sbx snapshot ID --name S     -> prints the snapshot's size in bytes
#   sbx restore NAME S           replaces the sandbox behind NAME by one
#                                created from snapshot S
#   sbx snapshot-delete S
# The sandbox name undohost knows is the provider's stable handle (alias):
# a fork gets a new provider id, and promotion re-points the alias
# (research/host-anchors.md §6.4 W4).
set -eu
cmd=$1
shift
case $cmd in
fork)     sbx fork "$(sbx alias get "$1")" ;;
network)  copy=$1; shift; sbx network "$copy" "$@" ;;
exec)     copy=$1 cwd=$2; shift 2; exec sbx exec "$copy" --cwd "$cwd" -- "$@" ;;
promote)  old=$(sbx alias get "$1"); sbx alias set "$1" "$2"; sbx kill "$old" ;;
delete)   sbx kill "$1" ;;
snapshot) sbx snapshot "$(sbx alias get "$1")" --name "$2" ;;
restore)  sbx restore "$1" "$2" ;;
delete-snapshot) sbx snapshot-delete "$1" ;;
*) echo "e2b-style-provider.sh: unknown command $cmd" >&2; exit 2 ;;
esac
