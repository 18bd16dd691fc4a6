// Package hostlink is the protocol between undosh in a sandbox (the guest)
// and the host that forks, checkpoints and restores the sandbox
// (undohost). docs/hostlink.md is its specification; this package is one
// implementation of both ends.
//
// The host may snapshot the VM while a connection is open, and a snapshot
// resets every vsock connection, in the parent and in the copy. So every
// exchange is one short connection (HELLO, one request, one reply), every
// operation is stored by the host before it is acknowledged, and the guest
// learns how an operation went by asking again, on a new connection, for
// its status and its output from a byte offset. [Client.Run] does that.
//
// The host knows the caller by the listener that accepted the connection
// ([Server.Serve] binds one listener to one sandbox), never by anything in
// a message, and checks a per-generation token: after [Server.Advance] the
// token from before is refused with [CodeStaleGeneration].
//
// Frames ([Encode], [Decode]) are a fixed 8-byte header and a JSON body of
// bounded size. hostlink imports no other undosh package but internal ones.
//
// Callers must: give every mutating request a key unique to that step;
// give the client each WHO_YOU_ARE the host sends, through
// [ClientOptions.Identity] (which it reads as it retries) or
// [Client.Adopt]; stop a [Server] with [Server.Shutdown].
package hostlink
