// Package realshell says where the real shells that undosh stands in for
// are looked for, in order: $UNDOSH_REAL_BASH (or $UNDOSH_REAL_SH), the
// configuration file undoctl install writes, then the usual places. The
// shell runs the first that is not undosh; undoctl doctor reports it. It
// is a leaf: both link it.
package realshell

import (
	"bufio"
	"bytes"
	"strings"
)

// Where undoctl install keeps the real shells, and the file that names
// them (lines of bash=PATH and sh=PATH).
const (
	Dir        = "/usr/lib/undosh/real"
	Bash       = Dir + "/bash"
	Sh         = Dir + "/sh"
	ConfigFile = "/etc/undosh/shells"
)

// defaults are the usual places, after the environment and the
// configuration.
var defaults = map[string][]string{
	"bash": {Bash, "/usr/bin/bash", "/bin/bash", "/usr/local/bin/bash"},
	"sh":   {Sh, "/usr/bin/sh", "/bin/sh", "/usr/bin/dash", "/bin/dash"},
}

// Candidate is a place to look, and what named it: the environment
// variable ("$UNDOSH_REAL_BASH"), ConfigFile, or "default".
type Candidate struct{ Path, From string }

// EnvVar is the environment variable that names the real shell of
// personality ("bash" or "sh").
func EnvVar(personality string) string { return "UNDOSH_REAL_" + strings.ToUpper(personality) }

// Candidates are the places to look for the real shell of personality,
// in order. config is the content of ConfigFile (nil when it cannot be
// read).
func Candidates(personality string, getenv func(string) string, config []byte) []Candidate {
	var cs []Candidate
	if v := getenv(EnvVar(personality)); v != "" {
		cs = append(cs, Candidate{v, "$" + EnvVar(personality)})
	}
	if v := Configured(config, personality); v != "" {
		cs = append(cs, Candidate{v, ConfigFile})
	}
	for _, p := range defaults[personality] {
		cs = append(cs, Candidate{p, "default"})
	}
	return cs
}

// Configured is the path that config (ConfigFile's content) names for
// personality, or "".
func Configured(config []byte, personality string) string {
	sc := bufio.NewScanner(bytes.NewReader(config))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if ok && strings.TrimSpace(k) == personality {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
