package layers

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/undosh/undosh/"

type level int

const (
	base level = iota
	leaf
	engine
	middle
	shellLevel
	serverLevel
	testSupport
	top
)

var levelNames = [...]string{"base", "leaf", "engine", "middle", "shell", "server", "test support", "top"}

// table gives every package of the module its level. A package may
// import packages of lower levels; the middle may also import the
// middle. bench/ is top but for its helpers. The base imports nothing of
// the module: it is the one copy of a rule every level keeps (a path
// inside a directory, undosh's exit statuses), so that a leaf need not
// write its own.
var table = map[string]level{
	"internal/exit":     base, // undohost and every leaf link it; it must not pull in the policy
	"internal/pathglob": base, // "is p inside dir", decided once (the parser and the engines ask it)

	".":                    leaf, // the module's root: policy.yaml, for policy to embed
	"internal/atomicfile":  leaf,
	"internal/corpus":      leaf,
	"internal/enforce":     leaf, // linked into every binary (the kernel's hold on a step)
	"internal/flock":       leaf,
	"internal/frontend":    leaf,
	"internal/handover":    leaf,
	"internal/procs":       leaf,
	"internal/procstate":   leaf,
	"internal/realshell":   leaf, // the shell and doctor look for the real shells the same way
	"internal/resp":        leaf,
	"internal/shquote":     leaf,
	"internal/sudo":        leaf,
	"internal/unixmode":    leaf,
	"internal/where":       leaf, // a guard links it: it must link nothing else
	"parser":               leaf,
	"pty":                  leaf,
	"bench/internal/stats": leaf,

	"checkpoint":    engine,
	"fork":          engine,
	"hostlink":      engine,
	"internal/qemu": engine,
	"policy":        engine,
	"watch":         engine,

	"internal/classify": middle,
	"internal/guard":    middle,
	"internal/agent":    middle,
	"internal/undohost": middle,
	"internal/install":  middle,
	"internal/journal":  middle,
	"internal/machine":  middle,
	"internal/qemuhost": middle,
	"internal/session":  middle, // the sessions; shell protects their lines (session.Lines)
	"internal/state":    middle,
	"internal/vmagent":  middle,
	"internal/watchd":   middle,
	"service":           middle,

	"internal/harness":    testSupport,
	"internal/scripttest": testSupport,
	"internal/testsvc":    testSupport,
	"internal/testuser":   testSupport,
	"internal/vmtest":     testSupport,

	"shell": shellLevel,

	"front": serverLevel, // decides each request by the shell's rule (shell.Ask)

	"cmd/undoctl":  top,
	"cmd/undohost": top,
	"cmd/undosh":   top,
	"docs":         top, // tests only: the documentation's links resolve
}

// forbidden are arrows that levels alone allow, each with why it is not.
// A key is an importer; the rule holds for everything it links (its
// transitive imports), not only what it names.
var forbidden = map[string][]struct{ pkg, why string }{
	"cmd/undohost": {
		{"parser", "the host daemon classifies no command: it must not link the shell parser"},
		{"internal/classify", "the host daemon classifies no command"},
		{"shell", "the host daemon is not a shell"},
		{"front", "the host daemon answers no front end"},
	},
	"internal/guard": {
		{"fork", "a guard runs in dpkg's hooks on every package operation: it links leaves only"},
		{"hostlink", "a guard runs in dpkg's hooks: it links leaves only"},
		{"policy", "a guard decides nothing by policy"},
	},
	"internal/journal": {
		{"policy", "the journal is a record of what happened: its format is its own, not the policy's types"},
	},
}

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func list(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", module+"...")
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(bufio.NewReader(bytes.NewReader(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	watchSources(t)
	return pkgs
}

// watchSources reads every directory of the module's source, so that go
// test's cache knows what this test's verdict depends on: it cannot see
// into the go list run above, and would otherwise hand back an old pass
// after an import was added (the cache keys on the directories a test
// opens, with the names, sizes and times of their files).
func watchSources(t *testing.T) {
	t.Helper()
	err := filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n := d.Name(); d.IsDir() && p != "../.." && (n == "testdata" || n == "node_modules" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// rel is path without the module's prefix, "." for the module's root, and
// false for a path outside the module.
func rel(path string) (string, bool) {
	if path == strings.TrimSuffix(module, "/") {
		return ".", true
	}
	return strings.CutPrefix(path, module)
}

func levelOf(path string) (level, bool) {
	if l, ok := table[path]; ok {
		return l, true
	}
	return top, strings.HasPrefix(path, "bench/")
}

// ours is the module's packages among paths, without the module's prefix.
func ours(paths []string) []string {
	var out []string
	for _, p := range paths {
		if r, ok := rel(p); ok {
			out = append(out, r)
		}
	}
	return out
}

// Every package of the module has a level and imports only what its
// level allows; the forbidden arrows are not linked.
func TestImportTable(t *testing.T) {
	t.Parallel()
	pkgs := list(t)
	seen := map[string]bool{}
	for _, p := range pkgs {
		path, _ := rel(p.ImportPath)
		if path == "internal/layers" {
			continue
		}
		seen[path] = true
		l, ok := levelOf(path)
		if !ok {
			t.Errorf("%s has no level: give it one in internal/layers's table", path)
			continue
		}
		for _, imp := range ours(p.Imports) {
			il, ok := levelOf(imp)
			if !ok {
				continue // reported as the package itself
			}
			// The middle and test support may import their own level.
			allowed := il < l || il == l && (l == middle || l == testSupport)
			if il == testSupport && l != testSupport {
				allowed = false // only tests import test support
			}
			if !allowed {
				t.Errorf("%s (%s) imports %s (%s): a %s may import only lower levels", path, levelNames[l], imp, levelNames[il], levelNames[l])
			}
		}
		deps := ours(p.Deps)
		for _, f := range forbidden[path] {
			if slices.Contains(deps, f.pkg) {
				t.Errorf("%s links %s: %s", path, f.pkg, f.why)
			}
		}
	}
	for path := range table {
		if !seen[path] {
			t.Errorf("the table names %s, which is not in the module", path)
		}
	}
}
