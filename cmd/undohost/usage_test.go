package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no listener", []string{"--backend", "provider"}, 2, "no listener"},
		{"unknown backend", []string{"--backend", "nope", "--listen", "unix:///nonexistent/s"}, 2, `unknown backend "nope"`},
		{"provider without config", []string{"--backend", "provider", "--listen", "unix:///nonexistent/s"}, 2, "provider: section"},
		{"missing config", []string{"--backend", "provider", "--listen", "unix:///x", "--config", filepath.Join(dir, "nope.yaml")}, 2, "read config"},
		{"argument", []string{"--listen", "unix:///x", "extra"}, 2, `unexpected argument "extra"`},
		{"bad flag", []string{"--nope"}, 2, "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stderr bytes.Buffer
			code := run(context.Background(), append([]string{"--state", t.TempDir()}, tt.args...), &stderr)
			if code != tt.code || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("run %q = %d, stderr %q; want %d with %q", tt.args, code, stderr.String(), tt.code, tt.want)
			}
		})
	}
}
