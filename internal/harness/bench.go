package harness

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// BenchCommand is the read-only command the bench runs inside each
// harness's wrapper. It holds no quote, so it can stand in any wrapper.
const BenchCommand = "cat index.js"

// Bench is the cost of one read-only call through the harness's own
// wrapper, without the harness around it: bash -c WRAPPER, as the
// harness's user, with its environment, in the project, run N times
// with undosh as bash and N times with the real bash, after the session.
type Bench struct {
	Wrapper string        `json:"wrapper"` // summarised
	Plain   time.Duration `json:"plain_ns"`
	Undosh  time.Duration `json:"undosh_ns"`
	N       int           `json:"n"`
	// Class is undosh's class for it: none when it left no record.
	Class string `json:"class"`
	Err   string `json:"error,omitempty"`
}

// placeholder marks where the step's command stands in a wrapper.
const placeholder = "\x00CMD\x00"

// Template returns the wrapper of a command undosh was given: given,
// with the step command cmd (in whichever of the forms [Matches] knows)
// replaced by [placeholder]; ok is false when cmd is not in it.
func Template(given, cmd string) (tmpl string, ok bool) {
	if given == cmd {
		return placeholder, true
	}
	for _, q := range []string{`'"'"'`, `'\''`} {
		quoted := "'" + strings.ReplaceAll(cmd, "'", q) + "'"
		if i := strings.LastIndex(given, quoted); i >= 0 {
			return given[:i] + "'" + placeholder + "'" + given[i+len(quoted):], true
		}
	}
	if i := strings.LastIndex("\n"+given+"\n", "\n"+cmd+"\n"); i >= 0 {
		return given[:i] + placeholder + given[i+len(cmd):], true
	}
	return "", false
}

// wrapperOf finds the harness's wrapper in a run: the template of the
// first story step undosh recorded, from the scaffold undosh kept for it
// or else from the command it was given.
func wrapperOf(script []string, results []Result, journal []Record, scaffolds map[string]string) (string, bool) {
	for _, rec := range journal {
		if rec.Parent != 0 {
			continue
		}
		for _, r := range results {
			if r.Sent.IsZero() || rec.Time.Before(r.Sent) || rec.Time.After(r.Got) || r.Step >= len(script) {
				continue
			}
			if rec.Wrapper != nil && rec.Command == script[r.Step] {
				if sc, ok := scaffolds[rec.Wrapper.Scaffold]; ok {
					return fromScaffold(sc), true
				}
			}
			if t, ok := Template(rec.Command, script[r.Step]); ok {
				return t, true
			}
		}
	}
	return "", false
}

// fromScaffold turns a scaffold undosh kept into a template: the mark
// stands either inside the quotes that held the command, on a line of its
// own, or for the quoted word itself, which [BenchCommand] then is.
func fromScaffold(sc string) string {
	i := strings.Index(sc, ScaffoldMark)
	if i < 0 {
		return sc
	}
	before, after := sc[:i], sc[i+len(ScaffoldMark):]
	inQuotes := strings.HasSuffix(before, "'") && strings.HasPrefix(after, "'")
	onLine := (before == "" || strings.HasSuffix(before, "\n")) && (after == "" || strings.HasPrefix(after, "\n"))
	if inQuotes || onLine {
		return before + placeholder + after
	}
	return before + "'" + placeholder + "'" + after
}

// keepSnapshots copies the harnesses' shell snapshots out of home
// (they delete them when they exit), so that the bench can put them back.
func keepSnapshots(home, keep string) {
	for _, d := range snapshotDirs {
		copyTree(filepath.Join(home, d), filepath.Join(keep, d))
	}
}

// snapshotDirs are where the harnesses keep their shell snapshots.
var snapshotDirs = []string{".claude/shell-snapshots", ".codex/shell_snapshots"}

// restoreSnapshots puts back what keepSnapshots kept, owned by u.
func restoreSnapshots(home, keep string, u User) {
	for _, d := range snapshotDirs {
		copyTree(filepath.Join(keep, d), filepath.Join(home, d))
		if !u.Root() {
			chownTree(filepath.Join(home, d), u.UID, u.GID)
		}
	}
}

// copyTree copies the regular files under from to to, best effort.
func copyTree(from, to string) {
	filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(from, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		dst := filepath.Join(to, rel)
		os.MkdirAll(filepath.Dir(dst), 0o755)
		os.WriteFile(dst, b, 0o644)
		return nil
	})
}

// bench times the wrapper tmpl around [BenchCommand], n times with
// undosh as bash (the overlay on /usr/bin), then, once the overlay is
// gone, n times with the real bash. It leaves /usr/bin as the machine's.
func bench(tmpl string, n int, env []string, dir string, cred *syscall.Credential, state string) Bench {
	wrapper := strings.ReplaceAll(tmpl, placeholder, BenchCommand)
	b := Bench{Wrapper: Summarize(wrapper, BenchCommand), N: n, Class: "none"}
	journal := filepath.Join(state, "journal.jsonl")
	before, _ := readJournal(journal)
	run := func() (time.Duration, error) {
		cmd := exec.Command("/bin/bash", "-c", wrapper)
		cmd.Env, cmd.Dir = env, dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		start := time.Now()
		err := cmd.Run()
		return time.Since(start), err
	}
	var u, p []time.Duration
	for i := range n + 1 {
		d, err := run()
		if err != nil {
			b.Err = fmt.Sprintf("undosh: bash -c WRAPPER: %v", err)
			return b
		}
		if i > 0 { // the first warms the caches
			u = append(u, d)
		}
	}
	after, _ := readJournal(journal)
	if len(after) > len(before) {
		b.Class = after[len(after)-1].Class
	}
	if err := unix.Unmount("/usr/bin", unix.MNT_DETACH); err != nil {
		b.Err = fmt.Sprintf("unmount the overlay on /usr/bin: %v", err)
		return b
	}
	for i := range n + 1 {
		d, err := run()
		if err != nil {
			b.Err = fmt.Sprintf("plain: bash -c WRAPPER: %v", err)
			return b
		}
		if i > 0 {
			p = append(p, d)
		}
	}
	b.Undosh, b.Plain = median(u), median(p)
	return b
}
