package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExitStatus checks the exit statuses that callers script against.
func TestExitStatus(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("version: 1\nrules: [{name: x, program: ls, class: nonee}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		if k == "UNDOSH_STATE_DIR" {
			return filepath.Join(dir, "state")
		}
		return ""
	}
	tests := []struct {
		name string
		args []string
		in   string
		want int
		err  string
	}{
		{"explain", []string{"explain", "ls"}, "", 0, ""},
		{"broken policy", []string{"explain", "--policy", bad, "ls"}, "", 2, "bad.yaml:2:39: class must be none, git or fork"},
		{"policy check", []string{"policy", "check", bad}, "", 2, "bad.yaml:2:39"},
		{"missing policy", []string{"policy", "check", filepath.Join(dir, "nope.yaml")}, "", 2, "cannot read the policy"},
		{"no command", nil, "", 2, "no command given"},
		{"unknown command", []string{"frobnicate"}, "", 2, `unknown command "frobnicate"`},
		{"bad flag", []string{"explain", "--nope", "ls"}, "", 2, "flag provided but not defined"},
		{"json-lines ok", []string{"explain", "--json-lines"}, "\"ls\"\n", 0, ""},
		{"json-lines bad line", []string{"explain", "--json-lines"}, "ls\n", 1, "not JSON strings"},
		{"bad -C", []string{"explain", "-C", filepath.Join(dir, "nope"), "ls"}, "", 2, "not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			got := run(tt.args, stdio{in: strings.NewReader(tt.in), out: &out, err: &errb}, getenv)
			if got != tt.want {
				t.Errorf("exit status %d, want %d; stderr:\n%s", got, tt.want, errb.String())
			}
			if !strings.Contains(errb.String(), tt.err) {
				t.Errorf("stderr %q does not contain %q", errb.String(), tt.err)
			}
		})
	}
}
