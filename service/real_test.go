package service

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/undosh/undosh/internal/testsvc"
	"github.com/undosh/undosh/internal/testuser"
)

func TestMain(m *testing.M) {
	release := testuser.ChangingEtc() // PostgreSQL runs as a user it makes
	code := m.Run()
	release()
	os.Exit(code)
}

// detect finds the one service that serves port.
func detect(t *testing.T, port int) Service {
	t.Helper()
	all, err := Detect(nil)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(all, func(s Service) bool { return s.Port == port })
	if i < 0 {
		t.Fatalf("no service on port %d among %+v", port, all)
	}
	if all[i].Unreadable != "" {
		t.Fatalf("%s: %s", all[i].Name, all[i].Unreadable)
	}
	return all[i]
}

// A real PostgreSQL: found with its data directory and port, checkpointed
// while a client holds a connection open, changed, and put back; the
// client's connection ends with the restart, and a new one sees the data
// as it was.
func TestPostgres(t *testing.T) {
	pg := testsvc.StartPostgres(t, testsvc.PostgresOptions{})
	pg.Psql(t, "create table users (id int primary key, name text); insert into users values (1, 'ada')")
	s := detect(t, pg.Port)
	if s.Kind != Postgres || !slices.Equal(s.Data, []string{pg.Data}) || s.Main.PID != pg.PID {
		t.Fatalf("detected %+v; want postgres, data %s, pid %d", s, pg.Data, pg.PID)
	}
	// A client session open across the checkpoint and the rollback.
	client := pg.Command("psql", "-h", "127.0.0.1", "-p", strconv.Itoa(pg.Port), "-U", "postgres", "-d", "postgres", "-At")
	client.Env = append(client.Env, pg.Env()...)
	stdin, err := client.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	client.Stdout, client.Stderr = &out, &out
	if err := client.Start(); err != nil {
		t.Fatal(err)
	}
	st, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pt, err := st.Checkpoint(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if pt.Frozen <= 0 || pt.Bytes == 0 {
		t.Errorf("point: frozen %v, %d bytes", pt.Frozen, pt.Bytes)
	}
	// The step: a migration that goes wrong, in another session.
	pg.Psql(t, "insert into users values (2, 'bob'); drop table users")
	res, err := st.Restore(context.Background(), pt.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := pg.Psql(t, "select string_agg(name, ',') from users"); got != "ada" {
		t.Errorf("after the restore: %q, want ada", got)
	}
	if res.Main.PID == pg.PID {
		t.Error("the server was not started again")
	}
	// The old session lost its connection.
	stdin.Write([]byte("select 1;\n"))
	stdin.Close()
	if err := client.Wait(); err == nil || !strings.Contains(out.String(), "connection") {
		t.Errorf("the client connected across the restore: %v, %q; want its connection lost", err, out.String())
	}
	// And the restore undoes.
	if _, err := st.Restore(context.Background(), res.After.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := pg.PsqlErr("select 1 from users"); err == nil {
		t.Error("undoing the restore did not bring back the step's drop")
	}
}

// The data directory on another filesystem than the store (a tmpfs):
// copied, not linked, and put back.
func TestPostgresOtherFilesystem(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a data directory outside TMPDIR for another user needs root")
	}
	shm, err := os.MkdirTemp("/dev/shm", "undosh-svc-")
	if err != nil {
		t.Skip("no /dev/shm here:", err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	os.Chmod(shm, 0o755)
	pg := testsvc.StartPostgres(t, testsvc.PostgresOptions{Data: filepath.Join(shm, "data")})
	pg.Psql(t, "create table t (v int); insert into t values (1)")
	st, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pt, err := st.Checkpoint(context.Background(), detect(t, pg.Port))
	if err != nil {
		t.Fatal(err)
	}
	pg.Psql(t, "update t set v = 2")
	if _, err := st.Restore(context.Background(), pt.ID); err != nil {
		t.Fatal(err)
	}
	if got := pg.Psql(t, "select v from t"); got != "1" {
		t.Errorf("after the restore: %q, want 1", got)
	}
}

// A server that does not start again after the rollback: the error says
// where both copies are and how to start it by hand, and keeps them;
// once what stopped it is mended, the same restore finishes.
func TestPostgresDoesNotStart(t *testing.T) {
	pg := testsvc.StartPostgres(t, testsvc.PostgresOptions{})
	pg.Psql(t, "create table t (v int); insert into t values (1)")
	st, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pt, err := st.Checkpoint(context.Background(), detect(t, pg.Port))
	if err != nil {
		t.Fatal(err)
	}
	pg.Psql(t, "update t set v = 2")
	good := pt
	pt.Service.Main.Argv = append(slices.Clone(pt.Service.Main.Argv), "-c", "no_such_setting=1")
	rewrite(t, st, pt)
	_, err = st.Restore(context.Background(), pt.ID)
	var re *RestoreError
	if !errors.As(err, &re) || re.Stage != "start" || re.After.ID == "" ||
		!strings.Contains(re.Hint, "start it by hand") || !strings.Contains(re.Hint, re.After.ID) {
		t.Fatalf("Restore of a server that cannot start: %v", err)
	}
	if _, err := st.Get(re.After.ID); err != nil {
		t.Errorf("the point of the data before the restore: %v", err)
	}
	rewrite(t, st, good)
	if _, err := st.Restore(context.Background(), pt.ID); err != nil {
		t.Fatal(err)
	}
	if got := pg.Psql(t, "select v from t"); got != "1" {
		t.Errorf("after the mended restore: %q, want 1", got)
	}
}

// rewrite writes pt's record again, as a test changed it.
func rewrite(t *testing.T, st *Store, pt Point) {
	t.Helper()
	b, err := json.Marshal(pt)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(st.Dir(pt.ID), metaFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Redis, without and with its append-only file: a write after the point
// is gone once it is restored, and the server answers on its port.
func TestRedis(t *testing.T) {
	for _, aof := range []bool{false, true} {
		t.Run("appendonly="+strconv.FormatBool(aof), func(t *testing.T) {
			r := testsvc.StartRedis(t, testsvc.RedisOptions{AppendOnly: aof})
			r.Do(t, "SET", "k", "before")
			s := detect(t, r.Port)
			if s.Kind != Redis || len(s.Data) != map[bool]int{false: 1, true: 2}[aof] {
				t.Fatalf("detected %+v", s)
			}
			st, err := Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			pt, err := st.Checkpoint(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]string{false: "save", true: "freeze"}[aof]; pt.Method != want {
				t.Errorf("method %q, want %q", pt.Method, want)
			}
			r.Do(t, "SET", "k", "after")
			r.Do(t, "SET", "other", "x")
			if _, err := st.Restore(context.Background(), pt.ID); err != nil {
				t.Fatal(err)
			}
			if v := r.Do(t, "GET", "k"); v != "before" {
				t.Errorf("k = %q after the restore, want before", v)
			}
			if v := r.Do(t, "EXISTS", "other"); v != "0" {
				t.Errorf("EXISTS other = %q after the restore, want 0", v)
			}
		})
	}
}

// Two servers of one kind are told apart by their ports, and each is
// checkpointed and put back on its own.
func TestSeveralServices(t *testing.T) {
	a := testsvc.StartRedis(t, testsvc.RedisOptions{})
	b := testsvc.StartRedis(t, testsvc.RedisOptions{})
	a.Do(t, "SET", "k", "a1")
	b.Do(t, "SET", "k", "b1")
	sa, sb := detect(t, a.Port), detect(t, b.Port)
	if sa.Name == sb.Name || !strings.HasPrefix(sa.Name, "redis:") {
		t.Fatalf("names %q and %q", sa.Name, sb.Name)
	}
	st, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pa, err := st.Checkpoint(context.Background(), sa)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Checkpoint(context.Background(), sb); err != nil {
		t.Fatal(err)
	}
	a.Do(t, "SET", "k", "a2")
	b.Do(t, "SET", "k", "b2")
	if _, err := st.Restore(context.Background(), pa.ID); err != nil {
		t.Fatal(err)
	}
	if va, vb := a.Do(t, "GET", "k"), b.Do(t, "GET", "k"); va != "a1" || vb != "b2" {
		t.Errorf("after restoring a only: a %q, b %q; want a1, b2", va, vb)
	}
}
