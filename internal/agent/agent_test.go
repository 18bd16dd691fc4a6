package agent

import (
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"testing"

	"github.com/undosh/undosh/hostlink"
)

// tell sends w on the control channel at path and returns the NOTED
// generation.
func tell(t *testing.T, path string, w hostlink.WhoYouAre) int64 {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body, _ := json.Marshal(w)
	if err := hostlink.Encode(c, hostlink.Frame{Type: hostlink.TypeWhoYouAre, Body: body}); err != nil {
		t.Fatal(err)
	}
	f, err := hostlink.Decode(c, hostlink.MaxRequest)
	if err != nil {
		t.Fatal(err)
	}
	var n hostlink.Noted
	if f.Type != hostlink.TypeNoted || json.Unmarshal(f.Body, &n) != nil {
		t.Fatalf("answer %v %s", f.Type, f.Body)
	}
	return int64(n.Generation)
}

// A WHO_YOU_ARE is adopted only when its generation is greater than the
// one the VM has: a replay cannot roll the token back.
func TestServeRefusesReplay(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "control.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Serve(ln, filepath.Join(dir, "state"), nil) }()
	defer func() { ln.Close(); <-done }()
	if n := tell(t, sock, hostlink.WhoYouAre{Generation: 5, Token: "five"}); n != 5 {
		t.Errorf("NOTED %d, want 5", n)
	}
	if n := tell(t, sock, hostlink.WhoYouAre{Generation: 3, Token: "three"}); n != 5 {
		t.Errorf("NOTED %d for a replay, want the generation kept, 5", n)
	}
	if w, ok := Read(filepath.Join(dir, "state")); !ok || w.Token != "five" || w.Generation != 5 {
		t.Errorf("after a replay, host.json: %+v, %v", w, ok)
	}
	if n := tell(t, sock, hostlink.WhoYouAre{Generation: 6, Token: "six"}); n != 6 {
		t.Errorf("NOTED %d, want 6", n)
	}
	if w, _ := Read(filepath.Join(dir, "state")); w.Token != "six" {
		t.Errorf("a newer generation was not adopted: %+v", w)
	}
}

// Apply keeps a newer WHO_YOU_ARE without its entropy and refuses an older
// one with the generation it keeps.
func TestApply(t *testing.T) {
	t.Parallel()
	sd := filepath.Join(t.TempDir(), "state")
	if _, err := Apply(sd, hostlink.WhoYouAre{Generation: 2}); err == nil {
		t.Error("a WHO_YOU_ARE without a token was applied")
	}
	n, err := Apply(sd, hostlink.WhoYouAre{Generation: 2, Token: "two", Role: hostlink.RoleCopy, Entropy: make([]byte, 32)})
	if err != nil || n.Generation != 2 {
		t.Fatalf("Apply: %+v, %v", n, err)
	}
	if w, ok := Read(sd); !ok || w.Token != "two" || w.Role != hostlink.RoleCopy || w.Entropy != nil {
		t.Errorf("host.json: %+v, %v", w, ok)
	}
	n, err = Apply(sd, hostlink.WhoYouAre{Generation: 2, Token: "again"})
	var re *RefusedError
	if !errors.As(err, &re) || re.Current != 2 || n.Generation != 2 {
		t.Errorf("a replay: %+v, %v; want NOTED 2 and a *RefusedError", n, err)
	}
	if w, _ := Read(sd); w.Token != "two" {
		t.Errorf("a replay replaced host.json: %+v", w)
	}
}
