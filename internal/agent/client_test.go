package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/undosh/undosh/hostlink"
)

type nopBackend struct{}

func (nopBackend) ForkAndRun(context.Context, hostlink.ForkJob) (hostlink.ForkOutcome, error) {
	return hostlink.ForkOutcome{}, nil
}
func (nopBackend) Checkpoint(context.Context, hostlink.CheckpointJob) (hostlink.CheckpointInfo, error) {
	return hostlink.CheckpointInfo{}, nil
}
func (nopBackend) List(context.Context, string) ([]hostlink.CheckpointInfo, error) { return nil, nil }
func (nopBackend) Restore(context.Context, hostlink.RestoreJob) error              { return nil }

func TestAddress(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ env, configured, want string }{
		{"", "", ""},
		{"unix:///a", "unix:///b", "unix:///a"},
		{"", "unix:///b", "unix:///b"},
		{"none", "unix:///b", ""},
		{"", "none", ""},
	} {
		if got := Address(tt.env, tt.configured); got != tt.want {
			t.Errorf("Address(%q, %q) = %q, want %q", tt.env, tt.configured, got, tt.want)
		}
	}
}

// The client's token is host.json's, read again as it changes, unless the
// URL brings its own.
func TestClientToken(t *testing.T) {
	t.Parallel()
	srv, err := hostlink.NewServer(hostlink.Options{StateDir: t.TempDir(), Backend: nopBackend{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	dir, err := os.MkdirTemp("", "gc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "h.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln, "vm")
	keep := func(sd string, w hostlink.WhoYouAre) {
		t.Helper()
		b, _ := json.Marshal(w)
		if err := os.WriteFile(Path(sd), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w1, err := srv.Identity("vm")
	if err != nil {
		t.Fatal(err)
	}
	sd := t.TempDir()
	keep(sd, w1)
	c, err := Client("unix://"+sock, sd, hostlink.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if wel, err := c.Hello(ctx); err != nil || wel.Generation != 1 {
		t.Fatalf("with host.json's token: %+v %v", wel, err)
	}
	w2, err := srv.Advance("vm", hostlink.RolePrimary, "op")
	if err != nil {
		t.Fatal(err)
	}
	keep(sd, w2)
	if wel, err := c.Hello(ctx); err != nil || wel.Generation != 2 {
		t.Errorf("after host.json changed: %+v %v", wel, err)
	}
	// A token in the URL is the one used, whatever host.json says.
	c, err = Client("unix://"+sock+"?token="+w1.Token, sd, hostlink.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Hello(ctx); !errors.Is(err, &hostlink.Error{Code: hostlink.CodeStaleGeneration}) {
		t.Errorf("the URL's stale token: %v, want stale_generation", err)
	}
	// Without a state directory or host.json, there is no token.
	for _, sd := range []string{"", t.TempDir()} {
		c, err := Client("unix://"+sock, sd, hostlink.ClientOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Hello(ctx); !errors.Is(err, &hostlink.Error{Code: hostlink.CodeUnauthorized}) {
			t.Errorf("state dir %q: %v, want unauthorized", sd, err)
		}
	}
}
