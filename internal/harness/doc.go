// Package harness runs the real agent harnesses (Claude Code, Codex CLI,
// Gemini CLI and opencode, from npm) against undosh installed as bash,
// each driven by a scripted model server of ours, and tells what the
// model saw and what undosh made of every command (issue 14, deliverable
// 3). TestHarnesses is the suite; `go test ./internal/harness -run
// TestHarnesses -update` rewrites docs/harnesses.md from it.
//
// The parts:
//
//   - [Server], the scripted model: enough of the Anthropic Messages,
//     OpenAI Responses and Chat Completions and Gemini generateContent
//     APIs to call the harness's own shell tool (found in the request's
//     tools) once per turn with the next command of the script, and to
//     end with a text. It keeps no state: the step a request is at is
//     the number of tool results in it. It records the result of every
//     step and how long the harness took to bring it.
//   - [Run] and [Inner], the driver. Run starts the test binary again in
//     a new mount and network namespace (with [InnerEnv] naming the
//     run's [Spec]); Inner, there, brings lo up (the only interface),
//     puts undosh-fast at /usr/bin/bash with an overlay (the layout
//     undoctl install makes; /bin is usr/bin on a merged-/usr system),
//     serves the model on 127.0.0.1, makes the project and the user's
//     home, runs the harness as root or as the given user, and writes the
//     [Outcome]. A separate process, rather than one locked thread of
//     the test, keeps every namespace and mount out of the test process:
//     when the run ends they go with it. Every process left in the
//     network namespace is killed by pid.
//   - [Story], the seed's story as steps; [Compare] and [Classify]
//     read two runs (plain bash and undosh) against it; [Report] is the
//     Markdown of docs/harnesses.md.
//
// What stays true: nothing leaves loopback (the namespaces have no other
// interface); the machine's /usr/bin is never changed (the overlay is in
// the run's mount namespace only); the story's files in /etc
// ([EtcTest], [EtcKept]) are removed after every run, whatever happened.
// Callers of [Run] must be root, and must call [Inner] from TestMain
// when [InnerEnv] is set.
package harness
