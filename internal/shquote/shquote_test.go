package shquote

import (
	"os/exec"
	"strings"
	"testing"
)

// What Join spells, sh reads back as the same argv.
func TestJoinRoundTrip(t *testing.T) {
	argv := []string{"plain", "", "two words", "it's", `back\slash`, "$HOME", "*", "a\nb", "--save=", "x,y:z",
		"a\tb", "\x01", "é", "if", "!", "~", "#x", "a\"b", "'"}
	got, err := exec.Command("sh", "-c", "for a in "+Join(argv)+`; do printf '[%s]' "$a"; done`).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := ""
	for _, a := range argv {
		want += "[" + a + "]"
	}
	if string(got) != want {
		t.Errorf("sh read back %q, want %q", got, want)
	}
	if got, err := exec.Command("sh", "-c", Join([]string{"a=b", "x"})+" 2>&1").CombinedOutput(); err == nil || !strings.Contains(string(got), "a=b") {
		t.Errorf("a command named a=b ran as an assignment: %q, %v", got, err)
	}
	if Word("plain/path-1.2") != "plain/path-1.2" || Word("") != "''" || Word("--root=/x") != "--root=/x" {
		t.Errorf("Word: %q %q", Word("plain/path-1.2"), Word(""))
	}
}
