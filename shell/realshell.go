package shell

import (
	"fmt"
	"os"
	"strings"

	"github.com/undosh/undosh/internal/realshell"
)

// ConfigFile names the real shells: lines of `bash=PATH` and `sh=PATH`,
// written by undoctl install.
const ConfigFile = realshell.ConfigFile

// shellError is a real shell that cannot be found.
type shellError struct {
	Personality string
	Tried       []string
}

func (e *shellError) Error() string {
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
	content, _ := os.ReadFile(config)
	for _, c := range realshell.Candidates(personality, getenv, content) {
		if try(c.Path) {
			return c.Path, nil
		}
	}
	return "", &shellError{Personality: personality, Tried: tried}
}
