package undohost

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/hostlink"
)

func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == fork.InitName {
		// pid 1 of a copy made by a benchmark's machine.Run.
		os.Exit(fork.Init())
	}
	os.Exit(m.Run())
}

func TestRender(t *testing.T) {
	t.Parallel()
	d := &Data{Sandbox: "vm1", Copy: "c1", Argv: []string{"sh", "-c", "echo a b"}, Allow: []string{"a:1", "b:2"},
		Vars: map[string]string{"api": "/run/fc.sock"}}
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{"fields", []string{"x", "{{.Sandbox}}-{{.Copy}}", "{{.Vars.api}}"}, []string{"x", "vm1-c1", "/run/fc.sock"}},
		{"splice", []string{"run", "{{.Copy}}", "--", "{{.Argv}}"}, []string{"run", "c1", "--", "sh", "-c", "echo a b"}},
		{"splice with spaces", []string{"{{ .Allow }}"}, []string{"a:1", "b:2"}},
		{"join", []string{"--allow={{join .Allow \",\"}}"}, []string{"--allow=a:1,b:2"}},
		{"empty list", []string{"x", "{{.Env}}"}, []string{"x"}},
		{"no shell splitting", []string{"{{.Label}}"}, []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tm, err := compile(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tm.render(d)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("render %q (-want +got):\n%s", tt.in, diff)
			}
		})
	}
	if _, err := compile([]string{"{{.Nope"}); err == nil {
		t.Error("a broken template compiled")
	}
	tm, _ := compile([]string{"{{.Vars.missing}}"})
	if _, err := tm.render(d); err == nil {
		t.Error("a missing var rendered")
	}
}

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	full := `{"provider": {"fork": ["f"], "network": ["n"], "exec": ["e"], "promote": ["p"], "delete": ["d"], "snapshot": ["s"], "restore": ["r"]`
	tests := []struct {
		name, in, err string
	}{
		{"yaml", "backend: local\ngrace: 2s\nsandboxes:\n  - {name: a, listen: unix:///run/a.sock}\n", ""},
		{"json", full + "}}", ""},
		{"unknown field", "backend: local\nlisten: x\n", "unknown field"},
		{"missing commands", `{"provider": {"fork": ["f"]}}`, "no command for network"},
		{"bad template", `{"provider": {"fork": ["{{.X"], "network": ["n"], "exec": ["e"], "promote": ["p"], "delete": ["d"], "snapshot": ["s"], "restore": ["r"]}}`, "fork"},
		{"bad duration", "grace: soon\n", "soon"},
		{"notify names the copy", full + `, "notify": ["t", "{{.Sandbox}}", "{{ .Copy }}"]}}`, ""},
		{"notify cannot tell a copy", full + `, "notify": ["t", "{{.Sandbox}}"]}}`, "notify must use {{.Copy}}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := filepath.Join(t.TempDir(), "c")
			os.WriteFile(p, []byte(tt.in), 0o600)
			c, err := LoadConfig(p)
			switch {
			case tt.err == "" && err != nil:
				t.Fatal(err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("got %v, want an error with %q", err, tt.err)
			}
			if tt.name == "yaml" && (time.Duration(c.Grace) != 2*time.Second || c.Sandboxes[0].Name != "a") {
				t.Errorf("%+v", c)
			}
		})
	}
}

func TestListen(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"tcp://0.0.0.0:0", "tcp://10.0.0.1:5757", "tcp://localhost:0", "http://x", "unix://", "vsock://x"} {
		if ln, err := Listen(bad); err == nil {
			ln.Close()
			t.Errorf("Listen(%q) accepted", bad)
		}
	}
	ln, err := Listen("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	// A stale socket file is replaced; a live one is not.
	path := filepath.Join(t.TempDir(), "s")
	ln, err = Listen("unix://" + path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Listen("unix://" + path); err == nil {
		t.Error("a served socket was taken over")
	}
	ln.(interface{ SetUnlinkOnClose(bool) }).SetUnlinkOnClose(false)
	ln.Close()
	ln, err = Listen("unix://" + path)
	if err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	ln.Close()
}

func TestPrune(t *testing.T) {
	t.Parallel()
	now := time.Now()
	b := book{Checkpoints: []checkpoint{
		{CheckpointInfo: hostlink.CheckpointInfo{ID: "1"}},
		{CheckpointInfo: hostlink.CheckpointInfo{ID: "2", Expires: now.Add(-time.Second)}},
		{CheckpointInfo: hostlink.CheckpointInfo{ID: "3"}},
		{CheckpointInfo: hostlink.CheckpointInfo{ID: "4", Expires: now.Add(time.Hour)}},
	}}
	dropped := prune(&b, now, 2)
	var got, gone []string
	for _, c := range b.Checkpoints {
		got = append(got, c.ID)
	}
	for _, c := range dropped {
		gone = append(gone, c.ID)
	}
	if diff := cmp.Diff([]string{"3", "4"}, got); diff != "" {
		t.Error(diff)
	}
	if diff := cmp.Diff([]string{"2", "1"}, gone); diff != "" {
		t.Error(diff)
	}
}

// A local backend that cannot run says why.
func TestLocalRefuses(t *testing.T) {
	if fork.Probe() == nil {
		t.Skip("the fork engine runs here")
	}
	if _, err := NewLocal(t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "local backend") {
		t.Fatalf("got %v", err)
	}
}

var _ hostlink.Backend = (*Local)(nil)
var _ hostlink.Backend = (*Provider)(nil)
