package parser_test

import (
	"testing"

	"github.com/undosh/undosh/parser"
)

// written returns the paths the facts write, and whether any construct
// is unknown code.
func written(f *parser.Facts) (paths []string, unknown bool) {
	for _, c := range f.Commands {
		for _, w := range c.Writes {
			paths = append(paths, w.Path)
		}
	}
	return paths, len(f.Unknown) > 0
}

// TestFamilyReadOnlyOptions: the options of read-only tools that write a
// file or run code, in every spelling the tool accepts, give writes,
// nested commands or unknown code.
func TestFamilyReadOnlyOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		write   string // a path written, or ""
		runs    string // a program run by the nested code, or ""
		unknown bool
	}{
		{in: "tree -o /etc/x", write: "/etc/x"},
		{in: "tree -L 2 -o/etc/x", write: "/etc/x"},
		{in: "tree -R -H . -L 1", write: "/w"},
		{in: "less -O/etc/x f", write: "/etc/x"},
		{in: "less --log-f=/etc/x f", write: "/etc/x"},
		{in: "less '+!rm x' f", unknown: true},
		{in: "xmllint -output /etc/x a.xml", write: "/etc/x"},
		{in: "xmllint --shell a.xml", unknown: true},
		{in: "info --out=/etc/x ls", write: "/etc/x"},
		{in: "fd -HIx rm", runs: "rm"},
		{in: "fd --exec=rm . /etc", runs: "rm"},
		{in: "fd -X wc -l", runs: "wc"},
		{in: "hyperfine 'rm -rf x' 'ls'", runs: "rm"},
		{in: "hyperfine --prepare 'make clean' ls", runs: "make"},
		{in: "hyperfine --export-json /etc/b.json ls", write: "/etc/b.json"},
		{in: "rg --pre rm x /etc", runs: "rm"},
		{in: "fzf --preview 'rm {}'", runs: "rm"},
		{in: "fzf --bind 'enter:execute(rm {})'", unknown: true},
		{in: "man -P 'rm x' ls", runs: "rm"},
		{in: "bat --pager 'rm x' f", runs: "rm"},
		{in: "dc -e '!rm x'", unknown: true},
		{in: "mlr --icsv put '$y = system(\"rm x\")' f.csv", unknown: true},
		{in: "codespell -w /etc", write: "/etc"},
		{in: "flake8 --output-file=/etc/x .", write: "/etc/x"},
		{in: "cloc --out /etc/x .", write: "/etc/x"},
		{in: "sar -o 1 3", write: "/var/log/sa"},
		{in: "stty -F /dev/ttyS0 115200", write: "/dev/ttyS0"},
		{in: "python3 -m json.tool in.json /etc/out.json", write: "/etc/out.json"},
		{in: "python3 -m timeit 'import os; os.system(\"x\")'", unknown: true},
		// Read-only spellings stay so.
		{in: "tree -L 2"},
		{in: "less +G f"},
		{in: "fzf --bind ctrl-a:select-all"},
		{in: "mlr --icsv filter '$x > 3' f.csv"},
		{in: "stty -echo"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			f := parser.Parse(tc.in, parser.Options{Cwd: "/w"})
			paths, unknown := written(f)
			if unknown != tc.unknown {
				t.Errorf("Parse(%q): unknown code %v, want %v: %v", tc.in, unknown, tc.unknown, f.Unknown)
			}
			if tc.write != "" && !containsStr(paths, tc.write) {
				t.Errorf("Parse(%q) writes %q, want %q among them", tc.in, paths, tc.write)
			}
			if tc.write == "" && tc.runs == "" && len(paths) > 0 {
				t.Errorf("Parse(%q) writes %q, want nothing", tc.in, paths)
			}
			if tc.runs != "" {
				found := false
				for _, c := range f.Commands {
					found = found || c.Name() == tc.runs
				}
				if !found {
					t.Errorf("Parse(%q) runs no %s: %v", tc.in, tc.runs, f.Commands)
				}
			}
		})
	}
}

// TestFamilyWriteVariables: variables that make programs write a file
// are writes of that file, as a prefix, through env and by export.
func TestFamilyWriteVariables(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in    string
		write string
	}{
		{"GIT_TRACE=/etc/x git status", "/etc/x"},
		{"env GIT_TRACE=/etc/x git status", "/etc/x"},
		{"export GIT_TRACE_PACKET=/etc/x; git fetch", "/etc/x"},
		{"LD_DEBUG_OUTPUT=/etc/ld ls", "/etc/ld"},
		{"SSLKEYLOGFILE=keys curl https://x", "/w/keys"},
		{"NODE_V8_COVERAGE=/opt/c node -v", "/opt/c"},
		{"GIT_TRACE=1 git status", ""},
		{"GIT_TRACE=true git status", ""},
		{"LESSHISTFILE=- less f", ""},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			paths, _ := written(parser.Parse(tc.in, parser.Options{Cwd: "/w"}))
			if tc.write == "" && len(paths) > 0 || tc.write != "" && !containsStr(paths, tc.write) {
				t.Errorf("Parse(%q) writes %q, want %q", tc.in, paths, tc.write)
			}
		})
	}
}

// TestFamilyDeviceWrites: only writes into a file's content are streams;
// a device a command replaces, removes or changes is not written into.
func TestFamilyDeviceWrites(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in     string
		stream bool
	}{
		{"echo x > /dev/null", true},
		{"tee /dev/null", true},
		{"dd of=/dev/null", true},
		{"sort -o /dev/null x", true},
		{"cp x /dev/stdout", true},
		{"cp -p x /dev/null", false},
		{"cp -sf x /dev/null", false},
		{"mv x /dev/null", false},
		{"rm -f /dev/null", false},
		{"ln -sf x /dev/null", false},
		{"chmod 600 /dev/null", false},
		{"touch /dev/null", false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			for _, c := range parser.Parse(tc.in, parser.Options{Cwd: "/w"}).Commands {
				for _, w := range c.Writes {
					if w.Path == "/dev/null" || w.Path == "/dev/stdout" {
						if got := w.Redirect || w.Stream; got != tc.stream {
							t.Errorf("Parse(%q): write %s is a stream %v, want %v", tc.in, w.Path, got, tc.stream)
						}
					}
				}
			}
		})
	}
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
