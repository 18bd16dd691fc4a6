package pty

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The test binary doubles as a tiny program that runs its arguments under
// [Run] on its own standard streams, for the tmux tests to drive.
const (
	proxyMarker = "UNDOSH_PTY_TESTPROXY"
	proxyPIDEnv = "UNDOSH_PTY_TESTPID"
)

func TestMain(m *testing.M) {
	if os.Getenv(proxyMarker) != "" {
		os.Exit(proxyMain())
	}
	os.Exit(m.Run())
}

func proxyMain() int {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "testproxy: no program")
		return 125
	}
	path, err := exec.LookPath(os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "testproxy: %v\n", err)
		return 127
	}
	if f := os.Getenv(proxyPIDEnv); f != "" {
		if err := os.WriteFile(f, []byte(fmt.Sprint(os.Getpid())), 0o600); err != nil {
			fmt.Fprintf(os.Stderr, "testproxy: %v\n", err)
			return 125
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, proxyMarker+"=") && !strings.HasPrefix(kv, proxyPIDEnv+"=") {
			env = append(env, kv)
		}
	}
	status, err := Run(context.Background(), Options{
		Path:   path,
		Argv:   os.Args[1:],
		Env:    env,
		Stdin:  os.Stdin,
		Stdout: os.Stdout,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "testproxy: %v\n", err)
		if status == 0 {
			return 125
		}
	}
	return status
}

// TestRunNoTerminal runs programs with no terminal on either side.
func TestRunNoTerminal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		argv       []string
		stdin      string // a file to relay; empty means none
		wantStatus int
		wantOut    string
	}{
		{"exit status", []string{"/bin/sh", "-c", "echo hi; exit 7"}, "", 7, "hi\r\n"},
		{"killed by signal", []string{"/bin/sh", "-c", "kill -TERM $$"}, "", 128 + 15, ""},
		{"end of input is ctrl-d", []string{"/bin/cat"}, os.DevNull, 0, ""},
		{"input relayed", []string{"/bin/sh", "-c", "read x; echo got-$x"}, "in.txt", 0, "got-abc\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			out, err := os.Create(filepath.Join(dir, "out"))
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			var in *os.File
			if tt.stdin != "" {
				name := tt.stdin
				if name != os.DevNull {
					name = filepath.Join(dir, name)
					if err := os.WriteFile(name, []byte("abc\n"), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				in, err = os.Open(name)
				if err != nil {
					t.Fatal(err)
				}
				defer in.Close()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			status, err := Run(ctx, Options{Path: tt.argv[0], Argv: tt.argv, Stdin: in, Stdout: out})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if status != tt.wantStatus {
				t.Errorf("status = %d, want %d", status, tt.wantStatus)
			}
			got, err := os.ReadFile(out.Name())
			if err != nil {
				t.Fatal(err)
			}
			// The PTY echoes input, so only look for what the program wrote.
			if !strings.Contains(string(got), tt.wantOut) {
				t.Errorf("output = %q, want it to contain %q", got, tt.wantOut)
			}
		})
	}
}

func TestRunErrors(t *testing.T) {
	t.Parallel()
	if _, err := Run(context.Background(), Options{}); err == nil {
		t.Error("Run with no program: no error")
	}
	_, err := Run(context.Background(), Options{Path: filepath.Join(t.TempDir(), "missing")})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Run of a missing program: err = %v, want os.ErrNotExist", err)
	}
}

func TestRunContextCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(100 * time.Millisecond)
		cancel()
	}()
	status, err := Run(ctx, Options{Path: "/bin/sleep", Argv: []string{"sleep", "100"}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if status != 128+1 {
		t.Errorf("status = %d, want %d (SIGHUP)", status, 128+1)
	}
}
