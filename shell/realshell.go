package shell

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// ConfigFile names the real shells: lines of `bash=PATH` and `sh=PATH`,
// written by undoctl install.
const ConfigFile = "/etc/undosh/shells"

// defaultShells are tried in order when neither the environment nor the
// configuration names a real shell.
var defaultShells = map[string][]string{
	"bash": {"/usr/lib/undosh/real/bash", "/usr/bin/bash", "/bin/bash", "/usr/local/bin/bash"},
	"sh":   {"/usr/lib/undosh/real/sh", "/usr/bin/sh", "/bin/sh", "/usr/bin/dash", "/bin/dash"},
}

// ShellError is a real shell that cannot be found.
type ShellError struct {
	Personality string
	Tried       []string
}

func (e *ShellError) Error() string {
	return fmt.Sprintf("cannot find the real %s (tried %s; each is missing or is undosh itself)",
		e.Personality, strings.Join(e.Tried, ", "))
}

// RealShell finds the shell undosh stands in for: $UNDOSH_REAL_BASH or
// $UNDOSH_REAL_SH, then the configuration file, then the usual places. A
// candidate that is undosh itself, or one of skip (undosh's fast front), is
// skipped, so undosh never runs itself in a loop.
func RealShell(personality string, getenv func(string) string, config string, skip ...os.FileInfo) (string, error) {
	var tried []string
	if self, err := os.Stat("/proc/self/exe"); err == nil {
		skip = append(skip, self)
	}
	try := func(p string) bool {
		if p == "" {
			return false
		}
		tried = append(tried, p)
		st, err := os.Stat(p)
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return false
		}
		for _, s := range skip {
			if s != nil && os.SameFile(st, s) {
				return false
			}
		}
		return true
	}
	env := "UNDOSH_REAL_BASH"
	if personality == "sh" {
		env = "UNDOSH_REAL_SH"
	}
	if p := getenv(env); try(p) {
		return p, nil
	}
	if p := configured(config, personality); try(p) {
		return p, nil
	}
	for _, p := range defaultShells[personality] {
		if try(p) {
			return p, nil
		}
	}
	return "", &ShellError{Personality: personality, Tried: tried}
}

// configured reads the path for personality from the configuration file.
func configured(name, personality string) string {
	f, err := os.Open(name)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.TrimSpace(k) == personality {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
