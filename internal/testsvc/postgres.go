package testsvc

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/undosh/undosh/internal/testuser"
)

// ReadyTimeout is how long a server has to become ready once started.
const ReadyTimeout = 60 * time.Second

// PostgresOptions say how [StartPostgres] makes its server. The zero
// value is a server of the newest PostgreSQL installed, with an empty
// cluster in a temporary directory.
type PostgresOptions struct {
	// Bin is the directory of initdb and postgres; by default the
	// newest /usr/lib/postgresql/*/bin.
	Bin string
	// Data is where the cluster goes, for a test that needs it on a
	// particular filesystem: a directory that does not exist yet (its
	// parent does) or is empty, removed when the test ends. When the
	// test runs as root, the server's user must be able to reach it:
	// every directory above it searchable by others (a t.TempDir is
	// not). By default it is in the server's own temporary directory.
	Data string
	// Config is settings given to the server, each "name=value", as
	// postgres -c takes them (for example "fsync=off").
	Config []string
	// Scale, when not zero, loads pgbench's tables at this scale factor
	// (pgbench -i -s Scale) into database postgres: about 15 MB and
	// 100,000 rows of pgbench_accounts per unit.
	Scale int
}

// Postgres is a running PostgreSQL server of [StartPostgres]. Its
// superuser is postgres, with database postgres; connections from
// 127.0.0.1 and the socket need no password.
type Postgres struct {
	// Bin is the directory of its programs.
	Bin string
	// Data is the cluster's directory.
	Data string
	// Port is the TCP port it listens on at 127.0.0.1, and the number
	// of its socket in Socket.
	Port int
	// Socket is the directory of its Unix socket (.s.PGSQL.Port), 0700:
	// only the server's user and root reach it.
	Socket string
	// PID is the postmaster's.
	PID int
	// UID is the user it runs as: a temporary user when the test runs
	// as root, the test's own otherwise.
	UID int
	// Log is the file of its output, removed with the rest.
	Log string

	user *testuser.User // nil when it runs as the test's user
	psql string
	srv  *server
}

// StartPostgres initialises a fresh cluster and starts a server on it,
// waiting until it accepts connections. The end of t stops the server
// and removes its directories and user. It skips t when PostgreSQL is
// not installed, or when the test runs as root and cannot make a user.
func StartPostgres(t testing.TB, o PostgresOptions) *Postgres {
	t.Helper()
	bin, why := postgresBin(o.Bin)
	if why != "" {
		t.Skip(why)
	}
	psql := filepath.Join(bin, "psql")
	if _, err := os.Stat(psql); err != nil {
		if psql, err = exec.LookPath("psql"); err != nil {
			t.Skip("no psql here (apt install postgresql-client)")
		}
	}
	l := newLease(t)
	base := tempDir(t, l, "undosh-pg-")
	p := &Postgres{Bin: bin, Data: o.Data, Socket: base, UID: os.Geteuid(), Log: filepath.Join(base, "postgres.log"), psql: psql}
	if os.Geteuid() == 0 {
		// Named after its directory, so unique while the directory
		// lives, however many test binaries run.
		name := filepath.Base(base)
		l.note(t, "user", name)
		u := testuser.New(t, name, testuser.Options{Comment: "undosh testsvc PostgreSQL, removed after the test"})
		p.user, p.UID = &u, u.UID
		// Its cleanup, registered after the user's, runs before
		// userdel: what the user owns is gone by then.
		if err := os.Chown(base, u.UID, u.GID); err != nil {
			t.Fatal(err)
		}
	}
	if p.Data == "" {
		p.Data = filepath.Join(base, "data")
	} else {
		p.Data = ownDir(t, l, p.Data, p.user)
	}
	out, err := p.Command(filepath.Join(bin, "initdb"), "-D", p.Data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync").CombinedOutput()
	if err != nil {
		t.Fatalf("initdb %s: %v\n%s", p.Data, err, out)
	}
	p.start(t, o.Config)
	stopSuccessor(t, filepath.Join(p.Data, "postmaster.pid"), p.PID, syscall.SIGINT)
	if o.Scale > 0 {
		pgbench := filepath.Join(bin, "pgbench")
		if _, err := os.Stat(pgbench); err != nil {
			if pgbench, err = exec.LookPath("pgbench"); err != nil {
				t.Skip("no pgbench here (apt install postgresql-contrib)")
			}
		}
		cmd := exec.Command(pgbench, "-i", "-q", "-s", strconv.Itoa(o.Scale), "-h", "127.0.0.1", "-p", strconv.Itoa(p.Port), "-U", "postgres", "postgres")
		cmd.Env = p.clientEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("pgbench -i -s %d: %v\n%s", o.Scale, err, out)
		}
	}
	return p
}

// postgresBin finds the directory of the server's programs, or says why
// there is none.
func postgresBin(bin string) (string, string) {
	if bin != "" {
		if _, err := os.Stat(filepath.Join(bin, "postgres")); err != nil {
			return "", fmt.Sprintf("no PostgreSQL server in %s: %v", bin, err)
		}
		return bin, ""
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(found) == 0 {
		return "", "no PostgreSQL server here: no /usr/lib/postgresql/*/bin/postgres (apt install postgresql)"
	}
	version := func(path string) int {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
		return n
	}
	slices.SortFunc(found, func(a, b string) int { return version(a) - version(b) })
	return filepath.Dir(found[len(found)-1]), ""
}

// start starts the server on a free port, trying others while the one
// it picked turns out to be taken, and waits until it is ready.
func (p *Postgres) start(t testing.TB, config []string) {
	t.Helper()
	for try := 1; ; try++ {
		p.Port = freePort(t)
		args := []string{"-D", p.Data, "-p", strconv.Itoa(p.Port), "-k", p.Socket,
			"-c", "listen_addresses=127.0.0.1"}
		for _, c := range config {
			args = append(args, "-c", c)
		}
		srv, err := startServer(p.Command(filepath.Join(p.Bin, "postgres"), args...), p.Log)
		if err != nil {
			t.Fatal(err)
		}
		p.srv, p.PID = srv, srv.pid()
		t.Cleanup(func() {
			srv.logOnFailure(t, "postgres")
			if err := srv.stop(syscall.SIGINT); err != nil {
				t.Error(err)
			}
		})
		err = p.waitReady()
		if err == nil {
			return
		}
		if srv.exited() && strings.Contains(srv.logText(), "Address already in use") && try < 5 {
			continue
		}
		t.Fatalf("postgres on port %d: %v\n%s", p.Port, err, srv.logText())
	}
}

// waitReady waits until postmaster.pid says the server accepts
// connections (its status line, the eighth, is "ready"), or it ends.
func (p *Postgres) waitReady() error {
	return p.srv.waitReady(func() (bool, error) {
		b, err := os.ReadFile(filepath.Join(p.Data, "postmaster.pid"))
		if err != nil {
			return false, nil
		}
		lines := bytes.Split(b, []byte("\n"))
		return len(lines) >= 8 && string(bytes.TrimSpace(lines[7])) == "ready" && string(lines[0]) == strconv.Itoa(p.PID), nil
	})
}

// Stop stops the server (a fast shutdown: SIGINT), waiting until it has
// ended; the end of the test does it otherwise. Its directories stay
// until the test ends.
func (p *Postgres) Stop(t testing.TB) {
	t.Helper()
	if err := p.srv.stop(syscall.SIGINT); err != nil {
		t.Error(err)
	}
}

// Command is exec.Command run as the server's user, with its
// environment, as [testuser.User.Command] gives it when that is a
// temporary user.
func (p *Postgres) Command(name string, args ...string) *exec.Cmd {
	if p.user != nil {
		return p.user.Command(name, args...)
	}
	cmd := exec.Command(name, args...)
	cmd.Env = withoutPG(os.Environ())
	return cmd
}

// Env is what a client needs in its environment to reach the server
// as postgres, in database postgres: PGHOST, PGPORT, PGUSER and
// PGDATABASE. Append it to a command's environment (after any PG
// variables of its own).
func (p *Postgres) Env() []string {
	return []string{"PGHOST=127.0.0.1", "PGPORT=" + strconv.Itoa(p.Port), "PGUSER=postgres", "PGDATABASE=postgres"}
}

// clientEnv is this process's environment for a client of the server.
func (p *Postgres) clientEnv() []string {
	return append(withoutPG(os.Environ()), p.Env()...)
}

// Psql runs sql with psql (unaligned, tuples only: a row a line, fields
// separated by |, NULL as nothing) and returns its output, the rows of
// every statement of sql in turn; any error fails t.
func (p *Postgres) Psql(t testing.TB, sql string) string {
	t.Helper()
	out, err := p.PsqlErr(sql)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// PsqlErr runs sql as [Postgres.Psql] does and returns its output, or an
// error with what psql said. It stops at the first error.
func (p *Postgres) PsqlErr(sql string) (string, error) {
	cmd := exec.Command(p.psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", strconv.Itoa(p.Port),
		"-U", "postgres", "-d", "postgres", "-At", "-c", sql)
	cmd.Env = p.clientEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("psql -c %q: %w: %s", sql, err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSuffix(stdout.String(), "\n"), nil
}

// withoutPG is env without the PG variables that would steer a client
// elsewhere than its flags say.
func withoutPG(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "PG") })
}

// freePort is a TCP port of 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// tempDir makes a directory under the temporary one, noted in l,
// removed when t ends.
func tempDir(t testing.TB, l *lease, prefix string) string {
	t.Helper()
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	l.note(t, "dir", d)
	t.Cleanup(func() {
		if err := os.RemoveAll(d); err != nil {
			t.Error(err)
		}
	})
	return d
}

// ownDir makes dir (absent, or an empty directory) for u (nil: this
// process's user), noted in l, removed when t ends, and returns it made
// absolute.
func ownDir(t testing.TB, l *lease, dir string, u *testuser.User) string {
	t.Helper()
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		t.Fatalf("data directory %s is not empty", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	l.note(t, "dir", dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Error(err)
		}
	})
	if u != nil {
		if err := os.Chown(dir, u.UID, u.GID); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
