package realshell

import (
	"slices"
	"testing"
)

func TestCandidates(t *testing.T) {
	t.Parallel()
	env := map[string]string{"UNDOSH_REAL_SH": "/opt/sh"}
	config := []byte("# written by undoctl install\nbash = /opt/bash\n\nsh=/etc/sh\nbogus\n")
	got := Candidates("sh", func(k string) string { return env[k] }, config)
	want := []Candidate{{"/opt/sh", "$UNDOSH_REAL_SH"}, {"/etc/sh", ConfigFile}, {Sh, "default"},
		{"/usr/bin/sh", "default"}, {"/bin/sh", "default"}, {"/usr/bin/dash", "default"}, {"/bin/dash", "default"}}
	if !slices.Equal(got, want) {
		t.Errorf("sh: %v, want %v", got, want)
	}
	got = Candidates("bash", func(string) string { return "" }, nil)
	if len(got) == 0 || got[0] != (Candidate{Bash, "default"}) {
		t.Errorf("bash with no environment and no configuration: %v", got)
	}
	if p := Configured(config, "bash"); p != "/opt/bash" {
		t.Errorf("Configured bash: %q", p)
	}
	if p := Configured(config, "zsh"); p != "" {
		t.Errorf("Configured zsh: %q", p)
	}
}
