// Package vmagent is the guest agent of a VM that undohost runs with
// QEMU, and the host's client of it. The host reaches the agent over a
// virtio-serial port (a Unix socket on the host, a character device in
// the guest), one JSON object a line each way ([Request], [Reply]): it
// runs commands in the guest (exec), tells it who it is after every
// resume (notify: a WHO_YOU_ARE, applied as [agent.Apply] applies one from
// the vsock control channel), and pings it.
//
// The agent also relays a Unix socket in the guest to the host link's TCP
// address that slirp forwards (guestfwd), since undosh dials only unix://
// URLs. A VM loaded from a capture has a new slirp, in which the relayed
// connections are dead without knowing it: a notify of role copy or
// restored, or a reset, closes them all.
//
// What stays true: the agent handles one request at a time, in order,
// and every reply carries its request's id; exec output streams as it
// comes, in chunks of at most [Chunk] bytes, before the exec's exit; a
// host that hangs up during an exec gets it killed (its whole process
// group). An exec ends at most a second after its command exits, even when
// a process it left running holds its output open. The host's [Client] skips replies with another id: a copy of a
// VM may still hold replies meant for a client of its original.
//
// Callers: the guest runs [Agent.ServePort] and [Agent.Relay] until it
// stops (undoctl agent --serial, --relay); the host calls [Dial] and must
// [Client.Close] the client.
package vmagent
