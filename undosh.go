// Package undosh holds the default policy, policy.yaml, at the top of the
// repository, where a user looks first. Package policy compiles it in and
// serves its text; nothing else should read it from here.
package undosh

import _ "embed"

// PolicyYAML is the text of policy.yaml. Callers must not modify it.
//
//go:embed policy.yaml
var PolicyYAML []byte
