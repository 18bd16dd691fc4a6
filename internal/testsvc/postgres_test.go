package testsvc

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestPostgres(t *testing.T) {
	t.Parallel()
	var m made
	t.Run("run", func(t *testing.T) {
		p := StartPostgres(t, PostgresOptions{})
		m = p.made()
		if p.UID == 0 {
			t.Errorf("server runs as root")
		}
		p.Psql(t, "CREATE TABLE kv (k text PRIMARY KEY, v int); INSERT INTO kv VALUES ('a', 1), ('b', 2)")
		if got, want := p.Psql(t, "SELECT k, v FROM kv ORDER BY k"), "a|1\nb|2"; got != want {
			t.Errorf("rows = %q, want %q", got, want)
		}
		if _, err := p.PsqlErr("SELECT * FROM nosuch"); err == nil || !strings.Contains(err.Error(), "nosuch") {
			t.Errorf("PsqlErr of a missing table = %v, want an error naming it", err)
		}
		// A client given only Env reaches it.
		cmd := exec.Command(p.psql, "-X", "-Atc", "SELECT count(*) FROM kv")
		cmd.Env = append(withoutPG(os.Environ()), p.Env()...)
		if out, err := cmd.CombinedOutput(); err != nil || string(out) != "2\n" {
			t.Errorf("psql with Env: %v: %q, want 2", err, out)
		}
		p.Stop(t)
		if !gone(p.PID) {
			t.Errorf("postmaster %d still there after Stop", p.PID)
		}
		if _, err := p.PsqlErr("SELECT 1"); err == nil {
			t.Errorf("psql works after Stop")
		}
		p.Stop(t) // again: nothing
	})
	checkGone(t, m)
}

func TestPostgresOptions(t *testing.T) {
	t.Parallel()
	// Not a t.TempDir: as root, the server's user must reach it.
	parent, err := os.MkdirTemp("", "undosh-testsvc-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(parent, "cluster")
	var m made
	t.Run("run", func(t *testing.T) {
		p := StartPostgres(t, PostgresOptions{Data: data, Config: []string{"fsync=off", "max_connections=20"}})
		m = p.made()
		if p.Data != data {
			t.Errorf("Data = %s, want %s", p.Data, data)
		}
		if got, want := p.Psql(t, "SHOW data_directory; SHOW fsync; SHOW max_connections"), data+"\noff\n20"; got != want {
			t.Errorf("settings = %q, want %q", got, want)
		}
	})
	checkGone(t, m)
	if _, err := os.Stat(parent); err != nil {
		t.Errorf("the parent of Data went too: %v", err)
	}
}

func TestPostgresScale(t *testing.T) {
	if testing.Short() {
		t.Skip("loads pgbench's tables")
	}
	t.Parallel()
	p := StartPostgres(t, PostgresOptions{Scale: 1})
	if got := p.Psql(t, "SELECT count(*) FROM pgbench_accounts"); got != "100000" {
		t.Errorf("pgbench_accounts has %s rows, want 100000", got)
	}
}

func BenchmarkPostgresSelect(b *testing.B) {
	p := StartPostgres(b, PostgresOptions{})
	for b.Loop() {
		p.Psql(b, "SELECT 1")
	}
}
