#!/usr/bin/env bash
# undohost provider backend for Firecracker (docs/undohost.md, "Firecracker").
# A worked example, not a product: adapt the paths, the jailer and the
# network to your host. Requires Firecracker >= 1.16.1 (vsock after restore,
# research/host-anchors.md §1.4), curl, and cp with --reflink support.
#
# Layout, under $FC_ROOT:
#   sandboxes/NAME/v.sock_5757   undohost's listener for sandbox NAME
#                                (config: listen: unix://$FC_ROOT/sandboxes/NAME/v.sock_5757)
#   sandboxes/NAME/current       the id of the VM that is the sandbox now
#   vms/ID/api.sock              a VM's Firecracker API socket
#   vms/ID/fc.pid                its Firecracker process
#   vms/ID/v.sock                its vsock uds_path
#   vms/ID/v.sock_5757           for the sandbox's VM only: a symlink to the
#                                sandbox's listener, so that the guest's
#                                requests reach undohost as that sandbox.
#                                A copy has none: it cannot ask for forks.
#   vms/ID/rootfs.ext4           its disk
#   snaps/ID/{vmstate,mem,rootfs.ext4}   a snapshot (a checkpoint, or a
#                                fork's capture)
#
# Usage: firecracker-provider.sh COMMAND ARGS... (see the case below).
set -euo pipefail
: "${FC_ROOT:=/srv/fc}"
: "${FC_BIN:=/usr/local/bin/firecracker}"
: "${EXEC_PORT:=5759}" # the guest's exec agent (see "exec" below)

api() { # VMDIR METHOD PATH [JSON]
	curl --fail --silent --show-error --unix-socket "$1/api.sock" \
		-X "$2" "http://localhost$3" -H 'Content-Type: application/json' ${4:+--data "$4"}
}

vmdir() { echo "$FC_ROOT/vms/$1"; }
current() { cat "$FC_ROOT/sandboxes/$1/current"; }

# capture VMDIR DEST: pause, full snapshot into DEST, copy the disk at the
# same instant, resume. Disks are not part of a Firecracker snapshot and
# must be copied while the VM is paused (host-anchors §1.1). Taking the
# snapshot resets the VM's vsock connections: the guest expects that.
capture() {
	local vm=$1 dest=$2
	mkdir -p "$dest"
	api "$vm" PATCH /vm '{"state":"Paused"}'
	trap 'api "$vm" PATCH /vm "{\"state\":\"Resumed\"}"' EXIT # never leave it paused
	api "$vm" PUT /snapshot/create \
		"{\"snapshot_type\":\"Full\",\"snapshot_path\":\"$dest/vmstate\",\"mem_file_path\":\"$dest/mem\"}"
	cp --reflink=auto --sparse=always "$vm/rootfs.ext4" "$dest/rootfs.ext4"
	api "$vm" PATCH /vm '{"state":"Resumed"}'
	trap - EXIT
}

# load SNAPDIR ID NETWORK: a new Firecracker process for VM ID, loaded from
# the snapshot, with its own disk copy and vsock socket. NETWORK "off":
# its interface is a tap that is down and connected to nothing.
load() {
	local snap=$1 id=$2 net=$3 vm
	vm=$(vmdir "$2")
	mkdir -p "$vm"
	cp --reflink=auto --sparse=always "$snap/rootfs.ext4" "$vm/rootfs.ext4"
	# The snapshot names the disk by the path it had: run each VM in its own
	# directory (the jailer's chroot, in production) so that the same
	# relative path names this VM's copy.
	(cd "$vm" && { setsid "$FC_BIN" --api-sock "$vm/api.sock" >firecracker.log 2>&1 & echo $! >fc.pid; })
	for _ in $(seq 250); do [ -S "$vm/api.sock" ] && break; sleep 0.02; done
	local tap=fc${id: -10}
	ip tuntap add dev "$tap" mode tap
	[ "$net" = off ] || ip link set "$tap" up
	api "$vm" PUT /snapshot/load "{\"snapshot_path\":\"$snap/vmstate\",
		\"mem_backend\":{\"backend_type\":\"File\",\"backend_path\":\"$snap/mem\"},
		\"network_overrides\":[{\"iface_id\":\"eth0\",\"host_dev_name\":\"$tap\"}],
		\"vsock_override\":{\"uds_path\":\"$vm/v.sock\"},
		\"resume_vm\":true}"
}

kill_vm() { # ID
	local vm
	vm=$(vmdir "$1")
	[ -f "$vm/fc.pid" ] && kill "$(cat "$vm/fc.pid")" 2>/dev/null || true
	ip link del "fc${1: -10}" 2>/dev/null || true
	rm -rf "$vm"
}

# adopt SANDBOX ID: VM ID becomes the sandbox; the previous one is stopped.
adopt() {
	local sb=$1 id=$2 old
	old=$(current "$sb")
	ln -sf "$FC_ROOT/sandboxes/$sb/v.sock_5757" "$(vmdir "$id")/v.sock_5757"
	echo "$id" >"$FC_ROOT/sandboxes/$sb/current.tmp"
	mv "$FC_ROOT/sandboxes/$sb/current.tmp" "$FC_ROOT/sandboxes/$sb/current"
	[ "$old" = "$id" ] || kill_vm "$old"
}

cmd=$1
shift
case $cmd in
fork) # SANDBOX OP -> prints the copy's VM id
	sb=$1 copy=copy-$2
	capture "$(vmdir "$(current "$sb")")" "$FC_ROOT/snaps/fork-$2"
	load "$FC_ROOT/snaps/fork-$2" "$copy" off
	echo "$copy" ;;
network) # COPY MODE ALLOW... : "off" is how load left the copy. An
	# allowlist would be nftables rules on the copy's tap (not shown).
	[ "$2" = off ] || { echo "allowlists are not set up in this example" >&2; exit 1; } ;;
exec) # COPY CWD ARGV... : runs ARGV in the copy through the guest's exec
	# agent on vsock port $EXEC_PORT. hostlink defines no exec message: any
	# agent that takes a cwd and an argv, streams stdout and stderr back and
	# ends with the exit status will do. `vsock-exec` stands for its host
	# side client (an assumption of this example; it connects to the copy's
	# v.sock and sends "CONNECT $EXEC_PORT\n" first, docs/hostlink.md §7).
	copy=$1 cwd=$2
	shift 2
	exec vsock-exec --uds "$(vmdir "$copy")/v.sock" --port "$EXEC_PORT" --cwd "$cwd" -- "$@" ;;
promote) # SANDBOX COPY : the copy becomes the sandbox
	adopt "$1" "$2"
	rm -rf "$FC_ROOT/snaps/fork-${2#copy-}" ;;
delete) # COPY
	kill_vm "$1"
	rm -rf "$FC_ROOT/snaps/fork-${1#copy-}" ;;
snapshot) # SANDBOX ID -> prints the size in bytes
	capture "$(vmdir "$(current "$1")")" "$FC_ROOT/snaps/$2"
	du -sb "$FC_ROOT/snaps/$2" | cut -f1 ;;
restore) # SANDBOX ID : a new VM loaded from snapshot ID replaces the sandbox's
	id=restored-$(date +%s%N)
	load "$FC_ROOT/snaps/$2" "$id" on
	adopt "$1" "$id" ;;
delete-snapshot) # ID
	rm -rf "${FC_ROOT:?}/snaps/$1" ;;
notify) # SANDBOX [COPY] : the WHO_YOU_ARE JSON on stdin goes to the guest agent's
	# control port 5758 (docs/hostlink.md §7): connect to the VM's v.sock,
	# "CONNECT 5758\n", read "OK ...", send one WHO_YOU_ARE frame, read
	# NOTED. `hostlink-notify` stands for that client (a few lines over
	# hostlink.Encode; an assumption of this example). COPY, when given,
	# is the copy to tell (before its step); else the sandbox's VM.
	vm=${2:-$(current "$1")}
	exec hostlink-notify --uds "$(vmdir "$vm")/v.sock" --port 5758 ;;
*)
	echo "firecracker-provider.sh: unknown command $cmd" >&2
	exit 2 ;;
esac
