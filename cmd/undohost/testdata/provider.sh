#!/bin/sh
# A test provider for undohost's provider backend: its "sandboxes" are
# directories. ROOT/sandboxes/NAME is a sandbox, ROOT/copies/ID a fork,
# ROOT/snapshots/ID a checkpoint. Usage: provider.sh ROOT COMMAND ARGS...
# Every call is appended to ROOT/calls as "SECONDS.NANOSECONDS COMMAND
# ARGS...", for tests that check what undohost asked, in which order.
set -eu
root=$1 cmd=$2
shift 2
mkdir -p "$root"
printf '%s %s\n' "$(date +%s.%N)" "$cmd $*" >>"$root/calls"
case $cmd in
fork) # SANDBOX OP -> prints the copy id
	sb=$1 id=copy-$2
	mkdir -p "$root/copies" "$root/sandboxes/$sb"
	rm -rf "$root/copies/$id"
	cp -a "$root/sandboxes/$sb" "$root/copies/$id"
	echo "$id" ;;
network) # COPY MODE [ALLOW...]
	copy=$1 mode=$2
	echo "$mode" >"$root/copies/$copy/.network" ;;
exec) # COPY ARGV... : runs in the copy's directory; the status passes through
	copy=$1
	shift
	cd "$root/copies/$copy"
	exec "$@" ;;
promote) # SANDBOX COPY (a copy holding fail-promote cannot be promoted: for tests)
	sb=$1 copy=$2
	if [ -e "$root/copies/$copy/fail-promote" ]; then
		echo "promote refused" >&2
		exit 1
	fi
	rm -f "$root/copies/$copy/.network"
	rm -rf "$root/sandboxes/$sb.old"
	mv "$root/sandboxes/$sb" "$root/sandboxes/$sb.old"
	mv "$root/copies/$copy" "$root/sandboxes/$sb"
	rm -rf "$root/sandboxes/$sb.old" ;;
delete) # COPY
	rm -rf "$root/copies/$1" ;;
snapshot) # SANDBOX SNAPSHOT -> prints the size in bytes
	mkdir -p "$root/snapshots"
	cp -a "$root/sandboxes/$1" "$root/snapshots/$2"
	du -sb "$root/snapshots/$2" | cut -f1 ;;
restore) # SANDBOX SNAPSHOT
	[ -d "$root/snapshots/$2" ] || { echo "no snapshot $2" >&2; exit 1; }
	rm -rf "$root/sandboxes/$1"
	cp -a "$root/snapshots/$2" "$root/sandboxes/$1" ;;
delete-snapshot) # SNAPSHOT
	rm -rf "$root/snapshots/$1" ;;
notify) # SANDBOX [COPY] : the WHO_YOU_ARE on stdin is "delivered" to the copy,
	# or to the sandbox when COPY is empty: appended to ROOT/notified as
	# "TARGET JSON". While ROOT/hold-notify exists, a notify whose target
	# starts with what it holds is never delivered: it touches
	# ROOT/notify-held and waits to be killed (for tests).
	target=${2:-$1}
	if [ -e "$root/hold-notify" ]; then
		case $target in
		"$(cat "$root/hold-notify")"*)
			touch "$root/notify-held"
			exec sleep 60 ;;
		esac
	fi
	msg=$(cat)
	printf '%s %s\n' "$target" "$msg" >>"$root/notified" ;;
*)
	echo "provider.sh: unknown command $cmd" >&2
	exit 2 ;;
esac
