package policy_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/undosh/undosh/policy"
)

// ignoreIndex leaves out what Load derives from a rule's own fields.
var ignoreIndex = cmpopts.IgnoreUnexported(policy.Rule{})

func TestDefaultLoads(t *testing.T) {
	t.Parallel()
	p := policy.Default()
	if p == nil {
		t.Fatal("Default() = nil")
	}
	if diff := cmp.Diff([]string{policy.DefaultName}, p.Files); diff != "" {
		t.Errorf("Files (-want +got):\n%s", diff)
	}
	if len(p.Rules) < 50 {
		t.Errorf("len(Rules) = %d, want the default's many rules", len(p.Rules))
	}
	if len(p.Paths) == 0 {
		t.Error("no path rules")
	}
	if len(p.Examples) == 0 {
		t.Error("no examples")
	}
	if len(p.Scratch) == 0 {
		t.Error("no scratch paths")
	}
	if p.Rollback != policy.RollbackOnFailure {
		t.Errorf("Rollback = %q, want %q", p.Rollback, policy.RollbackOnFailure)
	}
	if p.UnknownCode != policy.Fork {
		t.Errorf("UnknownCode = %v, want fork", p.UnknownCode)
	}
	if p.MaxFileSize != 64<<20 {
		t.Errorf("MaxFileSize = %d, want 64MiB", p.MaxFileSize)
	}
	if got := p.Host.Fallback; got != "auto" {
		t.Errorf("Host.Fallback = %q, want auto", got)
	}
	if root, user := p.Host.FallbackFor(0), p.Host.FallbackFor(1000); root != "deny" || user != "git" {
		t.Errorf("the auto fallback: %s for root, %s for a user, want deny and git", root, user)
	}
	for _, r := range p.Rules {
		if r.Name == "" || len(r.Programs) == 0 || !strings.HasPrefix(r.At, policy.DefaultName+":") {
			t.Errorf("rule %+v: want a name, programs and an at in the default", r)
		}
	}
	if p2 := policy.Default(); p2 != p {
		t.Error("Default() returns a new policy each time, want the same one")
	}
	if !bytes.Contains(policy.DefaultSource(), []byte("version: 1")) {
		t.Error("DefaultSource() does not hold `version: 1`")
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	const yamlHint = "indent with spaces"
	tests := []struct {
		name      string
		src       string
		line, col int
		msg       string // a substring of Msg
		hint      string // a substring of Hint; "" means no hint
		bug       string // the loader points at the wrong place
	}{
		// YAML syntax.
		{
			name: "over-indented key in a rule",
			src:  "version: 1\nrules:\n  - name: a\n     program: x\n    class: none\n",
			line: 4, col: 6, msg: "mapping value is not allowed", hint: yamlHint,
			bug: "goccy/go-yaml v1.19.2 points at 3:11, the value on the line before the over-indented key",
		},
		{
			name: "over-indented top-level key",
			src:  "version: 1\n rollback: never\n",
			line: 2, col: 2, msg: "mapping value is not allowed", hint: yamlHint,
			bug: "goccy/go-yaml v1.19.2 points at 1:10, the value on the line before the over-indented key",
		},
		{
			name: "under-indented key in a rule",
			src:  "version: 1\nrules:\n  - name: a\n   program: x\n    class: none\n",
			line: 4, col: 4, msg: "value is not allowed", hint: yamlHint,
		},
		{
			name: "under-indented list entry",
			src:  "version: 1\nworkspace:\n  scratch:\n    - /tmp\n   - /var/tmp\n",
			line: 5, col: 4, msg: "value is not allowed", hint: yamlHint,
		},
		{
			name: "tab indentation",
			src:  "version: 1\nrules:\n\t- name: a\n",
			line: 3, col: 1, msg: "'\t' that cannot start any token", hint: yamlHint,
		},
		{
			name: "tab indentation of a nested list",
			src:  "version: 1\nworkspace:\n  scratch:\n\t- /tmp\n",
			line: 4, col: 1, msg: "'\t' that cannot start any token", hint: yamlHint,
		},
		{
			name: "unterminated double quote",
			src:  "version: 1\nverify: \"make test\nrollback: never\n",
			line: 2, col: 9, msg: "end character of double-quoted text", hint: yamlHint,
		},
		{
			name: "unterminated single quote",
			src:  "version: 1\nverify: 'make test\n",
			line: 2, col: 9, msg: "end character of single-quoted text", hint: yamlHint,
		},
		{
			name: "unclosed flow sequence at the end",
			src:  "version: 1\ntrusted_dirs: [/bin, /usr/bin\n",
			line: 2, col: 15, msg: "']' not found", hint: yamlHint,
		},
		{
			name: "unclosed flow sequence before the next key",
			src:  "version: 1\ntrusted_dirs: [/bin, /usr/bin\nenforce: false\n",
			line: 2, col: 15, msg: "']' must be specified", hint: yamlHint,
			bug: "goccy/go-yaml v1.19.2 points at 3:1, the well-formed key after the list, not the unclosed [",
		},
		{
			name: "unclosed flow mapping before the next key",
			src:  "version: 1\nhost: {address: x\nenforce: false\n",
			line: 2, col: 7, msg: "'}' must be specified", hint: yamlHint,
			bug: "goccy/go-yaml v1.19.2 points at 3:1, the well-formed key after the mapping, not the unclosed {",
		},
		{
			name: "duplicate top-level key",
			src:  "version: 1\nrollback: never\nrollback: on-failure\n",
			line: 3, col: 1, msg: `"rollback" already defined at [2:1]`, hint: yamlHint,
		},
		{
			name: "duplicate key in a rule",
			src:  "version: 1\nrules:\n  - name: a\n    program: x\n    class: none\n    class: git\n",
			line: 6, col: 5, msg: `"class" already defined at [5:5]`, hint: yamlHint,
		},

		// Version.
		{
			name: "missing version",
			src:  "# mine\nrollback: never\n",
			line: 1, col: 1, msg: "does not say its version", hint: "version: 1",
		},
		{
			name: "empty file",
			src:  "",
			line: 1, col: 1, msg: "does not say its version", hint: "version: 1",
		},
		{
			name: "unsupported version",
			src:  "version: 2\n",
			line: 1, col: 10, msg: `unsupported policy version "2"`, hint: "version: 1",
		},
		{
			name: "version as a string",
			src:  "rollback: never\nversion: \"1.0\"\n",
			line: 2, col: 10, msg: `unsupported policy version "1.0"`, hint: "version: 1",
		},

		// Unknown keys.
		{
			name: "unknown top-level key close to a known one",
			src:  "version: 1\nrulez: []\n",
			line: 2, col: 1, msg: `unknown key "rulez" in the policy`, hint: `did you mean "rules"?`,
		},
		{
			name: "unknown top-level key far from any",
			src:  "version: 1\nfrobnicate: 3\n",
			line: 2, col: 1, msg: `unknown key "frobnicate"`, hint: "known keys: checkpoint, classes,",
		},
		{
			name: "unknown key in a rule",
			src:  "version: 1\nrules:\n  - name: a\n    program: x\n    clas: none\n",
			line: 5, col: 5, msg: `unknown key "clas" in a rule`, hint: `did you mean "class"?`,
		},
		{
			name: "unknown key in a flow rule",
			src:  "version: 1\nrules:\n  - {name: a, program: x, clas: none}\n",
			line: 3, col: 27, msg: `unknown key "clas" in a rule`, hint: `did you mean "class"?`,
		},
		{
			name: "unknown key in workspace",
			src:  "version: 1\nworkspace:\n  scrach: [/tmp]\n",
			line: 3, col: 3, msg: `unknown key "scrach" in workspace`, hint: `did you mean "scratch"?`,
		},
		{
			name: "unknown key in classes",
			src:  "version: 1\nclasses:\n  unknown_programs: git\n",
			line: 3, col: 3, msg: `unknown key "unknown_programs" in classes`, hint: `did you mean "unknown_program"?`,
		},

		// Rules missing what they need. The place is the rule: its first key.
		{
			name: "rule without a name",
			src:  "version: 1\nrules:\n  - program: x\n    class: none\n",
			line: 3, col: 5, msg: "a rule has no name", hint: "name: something-short",
		},
		{
			name: "second rule without a name",
			src:  "version: 1\nrules:\n  - name: ok\n    program: x\n    class: none\n  - program: y\n    class: none\n",
			line: 6, col: 5, msg: "a rule has no name", hint: "name: something-short",
		},
		{
			name: "flow rule without a name",
			src:  "version: 1\nrules:\n  - {program: x, class: none}\n",
			line: 3, col: 5, msg: "a rule has no name", hint: "name: something-short",
		},
		{
			name: "rule without a program",
			src:  "version: 1\nrules:\n  - name: a\n    class: none\n",
			line: 3, col: 5, msg: `rule "a" names no program`, hint: "program: NAME",
		},
		{
			name: "rule without a class",
			src:  "version: 1\nrules:\n  - name: a\n    program: x\n",
			line: 3, col: 5, msg: `rule "a" has no class`, hint: "class: none",
		},
		{
			name: "flow rule without a class",
			src:  "version: 1\nrules:\n  - {name: a, program: x}\n",
			line: 3, col: 5, msg: `rule "a" has no class`, hint: "class: none",
		},
		{
			name: "constrain without a constraint",
			src:  "version: 1\nrules:\n  - name: a\n    program: x\n    class: none\n    verdict: constrain\n",
			line: 3, col: 5, msg: `rule "a" constrains without saying how`, hint: "constraint: push",
		},
		{
			name: "flow rule constrains without a constraint",
			src:  "version: 1\nrules:\n  - {name: a, program: x, class: none, verdict: constrain}\n",
			line: 3, col: 5, msg: `rule "a" constrains without saying how`, hint: "constraint: push",
		},
		{
			name: "program with a relative path",
			src:  "version: 1\nrules:\n  - name: a\n    program: bin/x\n    class: none\n",
			line: 4, col: 14, msg: `names the program "bin/x" with a relative path`, hint: "absolute pattern",
		},

		// Bad values.
		{
			name: "bad class",
			src:  "version: 1\nrules:\n  - name: a\n    program: x\n    class: forks\n",
			line: 5, col: 12, msg: `class must be none, git or fork, not "forks"`, hint: "none: read-only",
		},
		{
			name: "bad class in classes",
			src:  "version: 1\nclasses:\n  unknown_code: nothing\n",
			line: 3, col: 17, msg: `classes.unknown_code must be none, git or fork, not "nothing"`, hint: "fork: changes the machine",
		},
		{
			name: "bad verdict",
			src:  "version: 1\nrules:\n  - name: a\n    program: x\n    class: none\n    verdict: allow\n",
			line: 6, col: 14, msg: `verdict must be run, constrain or deny, not "allow"`,
		},
		{
			name: "bad verdict in a flow example",
			src:  "version: 1\nexamples:\n  - {command: ls, verdict: yes}\n",
			line: 3, col: 28, msg: `verdict must be run, constrain or deny, not "yes"`,
		},
		{
			name: "bad top-level rollback",
			src:  "version: 1\nrollback: always\n",
			line: 2, col: 11, msg: `rollback must be on-failure or never, not "always"`, hint: "use never for test runners",
		},
		{
			name: "bad rollback in a rule",
			src:  "version: 1\nrules:\n  - name: a\n    program: x\n    class: none\n    rollback: sometimes\n",
			line: 6, col: 15, msg: `rollback must be on-failure or never, not "sometimes"`, hint: "use never for test runners",
		},
		{
			name: "bad hosts",
			src:  "version: 1\nrules:\n  - name: a\n    program: x\n    class: none\n    hosts: local\n",
			line: 6, col: 12, msg: `hosts must be loopback or remote, not "local"`,
		},
		{
			name: "bad sql",
			src:  "version: 1\nrules:\n  - name: a\n    program: x\n    class: none\n    sql: readonly\n",
			line: 6, col: 10, msg: `sql must be read-only or write, not "readonly"`,
		},
		{
			name: "max_args zero",
			src:  "version: 1\nrules:\n  - name: a\n    program: x\n    class: none\n    max_args: 0\n",
			line: 6, col: 15, msg: "max_args must be a positive number",
		},
		{
			name: "max_args a word",
			src:  "version: 1\nrules:\n  - name: a\n    program: x\n    class: none\n    max_args: many\n",
			line: 6, col: 15, msg: "max_args must be a positive number",
		},
		{
			name: "enforce not a boolean",
			src:  "version: 1\nenforce: maybe\n",
			line: 2, col: 10, msg: `enforce must be true or false, not "maybe"`, hint: "write true or false",
		},
		{
			name: "allow_force_push not a boolean",
			src:  "version: 1\negress:\n  allow_force_push: sure\n",
			line: 3, col: 21, msg: `egress.allow_force_push must be true or false, not "sure"`, hint: "write true or false",
		},
		{
			name: "relative path in a flow scratch list",
			src:  "version: 1\nworkspace:\n  scratch: [/tmp, tmp/x]\n",
			line: 3, col: 19, msg: `workspace.scratch entry "tmp/x" is not an absolute path`, hint: "start it with / or ~/",
		},
		{
			name: "relative path in a block scratch list",
			src:  "version: 1\nworkspace:\n  scratch:\n    - /tmp\n    - tmp/x\n",
			line: 5, col: 7, msg: `workspace.scratch entry "tmp/x" is not an absolute path`, hint: "start it with / or ~/",
		},
		{
			name: "relative root as a single value",
			src:  "version: 1\nworkspace:\n  roots: src\n",
			line: 3, col: 10, msg: `workspace.roots entry "src" is not an absolute path`, hint: "start it with / or ~/",
		},
		{
			name: "bad max_file_size",
			src:  "version: 1\ncheckpoint:\n  max_file_size: 64 MB-ish\n",
			line: 3, col: 18, msg: `checkpoint.max_file_size "64 MB-ish" is not a size`, hint: "100MiB",
		},
		{
			name: "negative max_file_size",
			src:  "version: 1\ncheckpoint:\n  max_file_size: -5\n",
			line: 3, col: 18, msg: `checkpoint.max_file_size "-5" is not a size`, hint: "100MiB",
		},
		{
			name: "bad host.fallback",
			src:  "version: 1\nhost:\n  fallback: fork\n",
			line: 3, col: 13, msg: `host.fallback must be git, deny or auto, not "fork"`, hint: "deny: refuse",
		},
		{
			name: "extends a misspelt value",
			src:  "version: 1\nextends: defaults\n",
			line: 2, col: 10, msg: `extends must be default or none, not "defaults"`, hint: "none replaces it",
		},
		{
			name: "extends a list",
			src:  "version: 1\nextends: [none]\n",
			line: 2, col: 10, msg: "extends must be a single value", hint: "remove the nested list",
		},
		{
			name: "verify a mapping",
			src:  "version: 1\nverify: {a: b}\n",
			line: 2, col: 9, msg: "verify must be a single value", hint: "remove the nested list",
		},
		{
			name: "list entry a mapping",
			src:  "version: 1\ntrusted_dirs:\n  - {a: b}\n",
			line: 3, col: 5, msg: "trusted_dirs entries must be a single value", hint: "remove the nested list",
		},

		// Documents.
		{
			name: "second YAML document",
			src:  "version: 1\n---\nversion: 1\n",
			line: 2, col: 1, msg: "holds one YAML document", hint: "remove the `---` separator",
		},
		{
			name: "empty second YAML document",
			src:  "version: 1\n---\n",
			line: 2, col: 1, msg: "holds one YAML document", hint: "remove the `---` separator",
		},

		// Names.
		{
			name: "rule name defined twice",
			src:  "version: 1\nrules:\n  - name: a\n    program: x\n    class: none\n  - name: a\n    program: y\n    class: none\n",
			line: 6, col: 11, msg: `rule "a" is defined twice (first at p.yaml:3)`, hint: "give each rule its own name",
		},
		{
			name: "rule name defined twice on one line",
			src:  "version: 1\nrules: [{name: a, program: x, class: none}, {name: a, program: y, class: none}]\n",
			line: 2, col: 52, msg: `rule "a" is defined twice`, hint: "give each rule its own name",
		},

		// Path rules and examples.
		{
			name: "path rule without paths",
			src:  "version: 1\npaths:\n  - name: p\n    class: fork\n",
			line: 3, col: 5, msg: `path rule "p" names no paths`, hint: "paths: [/etc/**]",
		},
		{
			name: "flow path rule without paths",
			src:  "version: 1\npaths:\n  - {name: p, class: fork}\n",
			line: 3, col: 5, msg: `path rule "p" names no paths`, hint: "paths: [/etc/**]",
		},
		{
			name: "path rule with a relative path",
			src:  "version: 1\npaths:\n  - name: p\n    paths: [etc/**]\n    class: fork\n",
			line: 4, col: 13, msg: `paths entry "etc/**" is not an absolute path`, hint: "start it with / or ~/",
		},
		{
			name: "path rule with a bad pattern",
			src:  "version: 1\npaths:\n  - name: p\n    paths: [\"/a/[b\"]\n    class: fork\n",
			line: 4, col: 13, msg: `bad path pattern "/a/[b"`, hint: "patterns use *, ? and **",
		},
		{
			name: "example without an expectation",
			src:  "version: 1\nexamples:\n  - command: ls\n",
			line: 3, col: 5, msg: `example "ls" expects nothing`, hint: "add class, egress or verdict",
		},
		{
			name: "flow example without an expectation",
			src:  "version: 1\nexamples:\n  - {command: ls}\n",
			line: 3, col: 5, msg: `example "ls" expects nothing`, hint: "add class, egress or verdict",
		},
		{
			name: "example without a command",
			src:  "version: 1\nexamples:\n  - class: none\n",
			line: 3, col: 5, msg: "an example has no command", hint: "command: 'ls -la'",
		},

		// Shapes.
		{
			name: "workspace not a mapping",
			src:  "version: 1\nworkspace: /tmp\n",
			line: 2, col: 12, msg: "workspace must be a mapping", hint: "key: value",
		},
		{
			name: "rule not a mapping",
			src:  "version: 1\nrules:\n  - just-a-string\n",
			line: 3, col: 5, msg: "a rule must be a mapping", hint: "key: value",
		},
		{
			name: "policy a list",
			src:  "- version: 1\n",
			line: 1, col: 1, msg: "the policy must be a mapping", hint: "key: value",
		},
		{
			name: "policy a scalar",
			src:  "\nhello\n",
			line: 2, col: 1, msg: "the policy must be a mapping", hint: "key: value",
		},
		{
			name: "rules a scalar",
			src:  "version: 1\nrules: a\n",
			line: 2, col: 8, msg: "rules must be a list", hint: "start each entry with `- `",
		},
		{
			name: "rules a flow mapping",
			src:  "version: 1\nrules: {name: a}\n",
			line: 2, col: 8, msg: "rules must be a list", hint: "start each entry with `- `",
		},
		{
			name: "rules a block mapping",
			src:  "version: 1\nrules:\n  name: a\n",
			line: 3, col: 3, msg: "rules must be a list", hint: "start each entry with `- `",
		},
		{
			name: "examples a scalar",
			src:  "version: 1\nexamples: ls\n",
			line: 2, col: 11, msg: "examples must be a list", hint: "start each entry with `- `",
		},
		// Services and live.
		{
			name: "service without a name",
			src:  "version: 1\nservices:\n  - process: myd\n    data: [/srv/d]\n",
			line: 3, col: 5, msg: "a service has no name", hint: "add `name:",
		},
		{
			name: "service that cannot be found",
			src:  "version: 1\nservices:\n  - name: myd\n    data: [/srv/d]\n",
			line: 3, col: 5, msg: `service "myd" does not say how to find it`, hint: "process: PROGRAM",
		},
		{
			name: "service without data",
			src:  "version: 1\nservices:\n  - name: myd\n    process: myd\n",
			line: 3, col: 5, msg: `service "myd" names no data`, hint: "data: [/var/lib/NAME]",
		},
		{
			name: "service with relative data",
			src:  "version: 1\nservices:\n  - name: myd\n    process: myd\n    data: [srv/d]\n",
			line: 5, col: 12, msg: "is not an absolute path", hint: "start it with /",
		},
		{
			name: "service of an unknown kind",
			src:  "version: 1\nservices:\n  - name: myd\n    kind: oracle\n    process: myd\n    data: [/d]\n",
			line: 4, col: 11, msg: `service kind "oracle"`, hint: "postgres, mysql, redis or mongodb",
		},
		{
			name: "service with a reserved name",
			src:  "version: 1\nservices:\n  - name: database\n    process: myd\n    data: [/d]\n",
			line: 3, col: 11, msg: "is one undosh keeps", hint: "letters, digits",
		},
		{
			name: "service with a bad port",
			src:  "version: 1\nservices:\n  - name: myd\n    process: myd\n    data: [/d]\n    port: 70000\n",
			line: 6, col: 11, msg: "port must be a number", hint: "",
		},
		{
			name: "rule with a bad live",
			src:  "version: 1\nrules:\n  - {name: a, program: x, class: fork, live: \"my db\"}\n",
			line: 3, col: 46, msg: `live "my db" is not a name`, hint: "a kind of service",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.bug != "" {
				t.Skip("BUG: " + tt.bug)
			}
			p, err := policy.Load("p.yaml", []byte(tt.src))
			if err == nil {
				t.Fatalf("Load succeeded with %d rules, want an error", len(p.Rules))
			}
			var le *policy.LoadError
			if !errors.As(err, &le) {
				t.Fatalf("Load error is %T (%v), want *policy.LoadError", err, err)
			}
			type pos struct {
				File      string
				Line, Col int
			}
			if diff := cmp.Diff(pos{"p.yaml", tt.line, tt.col}, pos{le.File, le.Line, le.Col}); diff != "" {
				t.Errorf("position (-want +got):\n%s\nerror: %v", diff, err)
			}
			if !strings.Contains(le.Msg, tt.msg) {
				t.Errorf("Msg = %q, want it to contain %q", le.Msg, tt.msg)
			}
			switch {
			case tt.hint == "" && le.Hint != "":
				t.Errorf("Hint = %q, want none", le.Hint)
			case !strings.Contains(le.Hint, tt.hint):
				t.Errorf("Hint = %q, want it to contain %q", le.Hint, tt.hint)
			}
			wantErr := fmt.Sprintf("p.yaml:%d:%d: %s", tt.line, tt.col, le.Msg)
			if got := err.Error(); got != wantErr {
				t.Errorf("Error() = %q, want %q", got, wantErr)
			}
		})
	}
}

// TestLoadAccepts holds policies that are valid YAML and a valid policy.
func TestLoadAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		src    string
		verify string
		bug    string
	}{
		{name: "minimal", src: "version: 1\n"},
		{name: "document start marker", src: "---\nversion: 1\nverify: make\n", verify: "make"},
		{name: "comments and a tagged string", src: "# mine\nversion: 1 # the only one\nverify: !!str make\n", verify: "make"},
		{name: "anchor", src: "version: 1\nverify: &v make\n", verify: "make"},
		{
			name: "alias", src: "version: 1\nverify: &v make\nrules:\n  - {name: a, program: x, class: none, verify: *v}\n", verify: "make",
		},
		{
			name: "byte order mark", src: "\ufeffversion: 1\nverify: make\n", verify: "make",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.bug != "" {
				t.Skip("BUG: " + tt.bug)
			}
			p, err := policy.Load("p.yaml", []byte(tt.src))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if p.Verify != tt.verify {
				t.Errorf("Verify = %q, want %q", p.Verify, tt.verify)
			}
		})
	}
}

func ruleNames(rs []policy.Rule) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Name
	}
	return out
}

func TestLoadMerge(t *testing.T) {
	t.Parallel()
	def := policy.Default()
	defRules := len(def.Rules)

	const user = `version: 1
workspace:
  roots: [/srv/project]
  scratch: [/scratch/mine, ~/.mine]
rollback: never
verify: make check
classes:
  unknown_program: fork
checkpoint:
  max_file_size: 1MiB
egress:
  protected_branches: [trunk]
rules:
  - name: mine
    program: mytool
    class: fork
  - name: git-push
    program: git
    sub: [push]
    class: none
paths:
  - name: data
    paths: ["/data/**"]
    class: fork
examples:
  - {command: mytool, class: fork}
`
	const replace = `version: 1
extends: none
rules:
  - name: only
    program: mytool
    class: git
examples:
  - {command: mytool, class: git}
`
	t.Run("merged onto the default", func(t *testing.T) {
		t.Parallel()
		p, err := policy.Load("user.yaml", []byte(user))
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		if diff := cmp.Diff([]string{policy.DefaultName, "user.yaml"}, p.Files); diff != "" {
			t.Errorf("Files (-want +got):\n%s", diff)
		}
		wantNames := append([]string{"mine", "git-push"}, ruleNames(def.Rules)...)
		if diff := cmp.Diff(wantNames, ruleNames(p.Rules)); diff != "" {
			t.Errorf("rule names (-want +got):\n%s", diff)
		}
		if len(p.Rules) == len(wantNames) {
			if diff := cmp.Diff(def.Rules, p.Rules[2:], ignoreIndex); diff != "" {
				t.Errorf("the default's rules changed (-want +got):\n%s", diff)
			}
			wantMine := policy.Rule{Name: "mine", At: "user.yaml:14", Programs: []string{"mytool"}, Class: policy.Fork}
			if diff := cmp.Diff(wantMine, p.Rules[0], ignoreIndex); diff != "" {
				t.Errorf("first rule (-want +got):\n%s", diff)
			}
		}
		if got := p.Paths[0].Name; got != "data" {
			t.Errorf("first path rule = %q, want data", got)
		}
		if diff := cmp.Diff(def.Paths, p.Paths[1:]); diff != "" {
			t.Errorf("the default's path rules (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(append(append([]string(nil), def.Scratch...), "/scratch/mine", "~/.mine"), p.Scratch); diff != "" {
			t.Errorf("Scratch (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(append(append([]string(nil), def.Roots...), "/srv/project"), p.Roots); diff != "" {
			t.Errorf("Roots (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(def.TrustedDirs, p.TrustedDirs); diff != "" {
			t.Errorf("TrustedDirs (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"trunk"}, p.Egress.ProtectedBranches); diff != "" {
			t.Errorf("ProtectedBranches (-want +got):\n%s", diff)
		}
		type scalars struct {
			Rollback, Verify, Fallback  string
			MaxFileSize                 int64
			UnknownProgram, UnknownCode policy.Class
			PushNeedsVerify             bool
		}
		want := scalars{Rollback: policy.RollbackNever, Verify: "make check", Fallback: def.Host.Fallback,
			MaxFileSize: 1 << 20, UnknownProgram: policy.Fork, UnknownCode: def.UnknownCode, PushNeedsVerify: def.Egress.PushNeedsVerify}
		got := scalars{p.Rollback, p.Verify, p.Host.Fallback, p.MaxFileSize, p.UnknownProgram, p.UnknownCode, p.Egress.PushNeedsVerify}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("settings (-want +got):\n%s", diff)
		}
		var userEx []string
		var defEx []policy.Example
		for _, ex := range p.Examples {
			if strings.HasPrefix(ex.At, "user.yaml:") {
				userEx = append(userEx, ex.Command)
			} else {
				defEx = append(defEx, ex)
			}
		}
		if diff := cmp.Diff(def.Examples, defEx); diff != "" {
			t.Errorf("the default's examples (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"mytool"}, userEx); diff != "" {
			t.Errorf("the file's examples (-want +got):\n%s", diff)
		}
		// The default is shared: loading must not change it.
		if len(def.Rules) != defRules || def.Rollback != policy.RollbackOnFailure || def.Rules[0].Name == "mine" {
			t.Errorf("Load changed the default: %d rules (want %d), rollback %q", len(def.Rules), defRules, def.Rollback)
		}
		if policy.Default().Verify != "" {
			t.Errorf("Load changed the default's verify to %q", policy.Default().Verify)
		}
	})
	t.Run("examples come first", func(t *testing.T) {
		t.Parallel()
		p, err := policy.Load("user.yaml", []byte(user))
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		if got := p.Examples[0].Command; got != "mytool" {
			t.Errorf("first example = %q, want mytool", got)
		}
	})
	t.Run("extends none replaces the default", func(t *testing.T) {
		t.Parallel()
		p, err := policy.Load("only.yaml", []byte(replace))
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		if diff := cmp.Diff([]string{"only.yaml"}, p.Files); diff != "" {
			t.Errorf("Files (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"only"}, ruleNames(p.Rules)); diff != "" {
			t.Errorf("rule names (-want +got):\n%s", diff)
		}
		if len(p.Paths) != 0 || len(p.Scratch) != 0 || len(p.TrustedDirs) != 0 {
			t.Errorf("extends: none kept the default's paths %v, scratch %v or trusted_dirs %v", p.Paths, p.Scratch, p.TrustedDirs)
		}
		if len(p.Examples) != 1 || p.Examples[0].Command != "mytool" {
			t.Errorf("Examples = %+v, want only mytool", p.Examples)
		}
		// Settings it does not name keep their built-in meaning.
		if p.Rollback != policy.RollbackOnFailure || p.UnknownProgram != policy.Git || p.UnknownCode != policy.Fork ||
			p.Host.Fallback != "auto" || p.MaxFileSize != 64<<20 {
			t.Errorf("built-in settings: rollback %q, unknown_program %v, unknown_code %v, fallback %q, max_file_size %d",
				p.Rollback, p.UnknownProgram, p.UnknownCode, p.Host.Fallback, p.MaxFileSize)
		}
	})
	t.Run("extends default is the same as nothing", func(t *testing.T) {
		t.Parallel()
		p, err := policy.Load("d.yaml", []byte("version: 1\nextends: default\n"))
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		if diff := cmp.Diff(def.Rules, p.Rules, ignoreIndex); diff != "" {
			t.Errorf("rules (-want +got):\n%s", diff)
		}
	})
	t.Run("a rule may take a default rule's name", func(t *testing.T) {
		t.Parallel()
		p, err := policy.Load("user.yaml", []byte(user))
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		if got := p.Rules[1]; got.Name != "git-push" || got.At != "user.yaml:17" || got.Class != policy.None {
			t.Errorf("second rule = %+v, want the file's git-push at user.yaml:17", got)
		}
	})
}

func TestLoadFileMissing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope", "policy.yaml")
	tests := []struct {
		name   string
		path   string
		target error
	}{
		{"missing file", missing, fs.ErrNotExist},
		{"a directory", dir, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := policy.LoadFile(tt.path)
			if err == nil {
				t.Fatalf("LoadFile(%q) loaded %d rules, want an error", tt.path, len(p.Rules))
			}
			var le *policy.LoadError
			if !errors.As(err, &le) {
				t.Fatalf("error is %T, want *policy.LoadError", err)
			}
			if le.File != tt.path {
				t.Errorf("File = %q, want %q", le.File, tt.path)
			}
			if !strings.HasPrefix(err.Error(), tt.path+": cannot read the policy") {
				t.Errorf("Error() = %q, want it to name %s", err.Error(), tt.path)
			}
			if le.Hint == "" {
				t.Error("no hint")
			}
			if tt.target != nil && !errors.Is(err, tt.target) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.target)
			}
		})
	}
	t.Run("present file", func(t *testing.T) {
		t.Parallel()
		name := filepath.Join(t.TempDir(), "policy.yaml")
		if err := os.WriteFile(name, []byte("version: 1\nextends: none\nverify: make\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := policy.LoadFile(name)
		if err != nil {
			t.Fatalf("LoadFile: %v", err)
		}
		if diff := cmp.Diff([]string{name}, p.Files); diff != "" || p.Verify != "make" {
			t.Errorf("Files (-want +got):\n%s\nVerify = %q, want make", diff, p.Verify)
		}
	})
}

func FuzzLoad(f *testing.F) {
	f.Add(policy.DefaultSource())
	f.Add([]byte("version: 1\n"))
	f.Add([]byte("version: 1\nextends: none\nrules:\n  - {name: a, program: x, class: git}\n"))
	f.Add([]byte("version: 1\nrules:\n  - name: a\n    programs: [x, /etc/init.d/*]\n    sub: [\"stash list\"]\n    if_args: [\"-X POST\"]\n    class: fork\n    verdict: constrain\n    constraint: push\n"))
	f.Add([]byte("version: 1\nworkspace:\n  scratch: [~/.cache]\ncheckpoint:\n  max_file_size: 10MiB\npaths:\n  - {name: p, paths: [\"/etc/**\"], class: fork}\nexamples:\n  - {command: ls, class: none}\n"))
	f.Add([]byte("version: 1\nrules:\n  - name: a\n     program: x\n"))
	f.Add([]byte("version: 1\n---\nversion: 1\n"))
	f.Add([]byte("version: 1\nverify: &v make\nrollback: *v\n"))
	def := policy.Default()
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := policy.Load("fuzz.yaml", data)
		if err != nil {
			var le *policy.LoadError
			if !errors.As(err, &le) {
				t.Fatalf("error is %T (%v), want *policy.LoadError", err, err)
			}
			if le.File != "fuzz.yaml" || le.Line < 0 || le.Col < 0 || le.Msg == "" {
				t.Fatalf("bad LoadError %+v", le)
			}
			return
		}
		switch len(p.Files) {
		case 1: // extends: none
			if p.Files[0] != "fuzz.yaml" {
				t.Fatalf("Files = %q", p.Files)
			}
		case 2:
			if p.Files[0] != policy.DefaultName || p.Files[1] != "fuzz.yaml" {
				t.Fatalf("Files = %q", p.Files)
			}
			own := len(p.Rules) - len(def.Rules)
			if own < 0 {
				t.Fatalf("%d rules, fewer than the default's %d", len(p.Rules), len(def.Rules))
			}
			if diff := cmp.Diff(def.Rules, p.Rules[own:], ignoreIndex); diff != "" {
				t.Fatalf("the default's rules are not last (-want +got):\n%s", diff)
			}
			for _, r := range p.Rules[:own] {
				if !strings.HasPrefix(r.At, "fuzz.yaml:") {
					t.Fatalf("own rule %q at %q", r.Name, r.At)
				}
			}
		default:
			t.Fatalf("Files = %q", p.Files)
		}
		for _, r := range p.Rules {
			if r.Name == "" || len(r.Programs) == 0 {
				t.Fatalf("rule without a name or a program: %+v", r)
			}
		}
	})
}

// TestLoadServices: services a user declares are added to the default's
// (which has none), with every field, and one declared twice is refused.
func TestLoadServices(t *testing.T) {
	t.Parallel()
	const user = `version: 1
services:
  - name: queue
    process: "myqueue*"
    data: [/srv/queue, /etc/myqueue.conf]
    stop: myqueuectl stop
    start: myqueuectl start
    port: 7000
  - name: cache
    kind: redis
    pidfile: /run/cache.pid
    data: [/srv/cache]
`
	p, err := policy.Load("p.yaml", []byte(user))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Services) != 2 {
		t.Fatalf("Services = %+v", p.Services)
	}
	q, c := p.Services[0], p.Services[1]
	if q.Name != "queue" || q.Process != "myqueue*" || len(q.Data) != 2 || q.Stop != "myqueuectl stop" || q.Start != "myqueuectl start" || q.Port != 7000 || q.At != "p.yaml:3" {
		t.Errorf("queue = %+v", q)
	}
	if c.Kind != "redis" || c.PIDFile != "/run/cache.pid" {
		t.Errorf("cache = %+v", c)
	}
	_, err = policy.Load("p.yaml", []byte(user+"  - {name: queue, process: q, data: [/q]}\n"))
	if err == nil || !strings.Contains(err.Error(), `service "queue" is declared twice`) {
		t.Errorf("a service declared twice: %v", err)
	}
}
