package testsvc

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/undosh/undosh/internal/procs"
	"github.com/undosh/undosh/internal/testuser"
)

func TestMain(m *testing.M) {
	// StartPostgres makes users when it runs as root.
	release := testuser.ChangingEtc()
	code := m.Run()
	release()
	os.Exit(code)
}

// made is what a server's start made, for a test to check it is gone.
type made struct {
	PID  int
	Dirs []string
	User string `json:",omitempty"`
	UID  int
}

func (p *Postgres) made() made {
	m := made{PID: p.PID, Dirs: []string{p.Socket, p.Data}, UID: p.UID}
	if p.user != nil {
		m.User = p.user.Name
	}
	return m
}

func (r *Redis) made() made {
	return made{PID: r.PID, Dirs: []string{filepath.Dir(r.Dir)}, UID: os.Geteuid()}
}

// checkGone fails t unless everything m names is gone: the process
// (waiting a while for it: a server whose test binary was killed ends by
// itself), the directories, the user and every process of the user.
func checkGone(t *testing.T, m made) {
	t.Helper()
	if p, err := procs.Read(m.PID); err == nil && !procs.WaitGone([]procs.Proc{p}, 10*time.Second) {
		t.Errorf("server %d still runs: %s", m.PID, p.Command())
	}
	for _, d := range m.Dirs {
		if _, err := os.Lstat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left (%v)", d, err)
		}
	}
	if m.User == "" {
		return
	}
	if _, err := user.Lookup(m.User); err == nil {
		t.Errorf("user %s left", m.User)
	}
	ps, err := procs.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.UID == m.UID && p.Alive() {
			t.Errorf("process of %s left: %d %s", m.User, p.PID, p.Command())
		}
	}
}

// Modes of the test binary started again by runHelper.
const (
	helperEnv = "UNDOSH_TESTSVC_HELPER" // "fail" or "hang", ":", "postgres" or "redis"
	outEnv    = "UNDOSH_TESTSVC_OUT"    // where it writes what it made
)

// TestHelper, in the test binary started again, starts a server, writes
// what it made to the file $UNDOSH_TESTSVC_OUT, then fails or hangs
// until it is killed.
func TestHelper(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("only in the test binary started again")
	}
	var m made
	switch mode[len(mode)-len("redis"):] {
	case "redis":
		r := StartRedis(t, RedisOptions{})
		r.Do(t, "SET", "k", "v")
		m = r.made()
	default:
		p := StartPostgres(t, PostgresOptions{})
		p.Psql(t, "CREATE TABLE t (n int)")
		m = p.made()
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := os.Getenv(outEnv)
	if err := os.WriteFile(out+".tmp", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(out+".tmp", out); err != nil {
		t.Fatal(err)
	}
	if mode[:4] == "hang" {
		time.Sleep(time.Hour)
	}
	t.Fatal("failing on purpose, after starting a server")
}

// helper starts TestHelper in mode, and returns it and the file it
// writes what it made to.
func helper(t *testing.T, mode string) (*exec.Cmd, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "made.json")
	cmd := exec.Command(exe, "-test.run=^TestHelper$", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, outEnv+"="+out)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd, out
}

func readMade(t *testing.T, out string) made {
	t.Helper()
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var m made
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// A test that fails after starting a server still stops it and removes
// what it made.
func TestFailedTestCleansUp(t *testing.T) {
	for _, kind := range []string{"postgres", "redis"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			cmd, out := helper(t, "fail:"+kind)
			b, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("helper: %v, want it to fail\n%s", err, b)
			}
			if _, err := os.Stat(out); err != nil {
				// It skipped or failed before it started the server.
				t.Fatalf("helper made nothing: %v\n%s", err, b)
			}
			checkGone(t, readMade(t, out))
		})
	}
}

// A test binary that is killed takes its servers with it, and what it
// left is removed by the next start.
func TestKilledTestCleansUp(t *testing.T) {
	for _, kind := range []string{"postgres", "redis"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			cmd, out := helper(t, "hang:"+kind)
			log := filepath.Join(t.TempDir(), "helper.log")
			f, err := os.Create(log)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			cmd.Stdout, cmd.Stderr = f, f
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
		wait:
			for {
				select {
				case err := <-exited:
					b, _ := os.ReadFile(log)
					t.Fatalf("helper ended before it made a server: %v\n%s", err, b)
				case <-time.After(2 * ReadyTimeout):
					cmd.Process.Kill()
					t.Fatal("helper made no server in time")
				case <-tick.C:
					if _, err := os.Stat(out); err == nil {
						break wait
					}
				}
			}
			m := readMade(t, out)
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-exited
			dir, err := leaseDir()
			if err != nil {
				t.Fatal(err)
			}
			sweep(t, dir)
			checkGone(t, m)
		})
	}
}

// Without the servers' programs, a test is skipped, saying what to
// install.
func TestMissingSkips(t *testing.T) {
	var pg, redis bool
	t.Run("postgres", func(t *testing.T) {
		defer func() { pg = t.Skipped() }()
		StartPostgres(t, PostgresOptions{Bin: t.TempDir()})
	})
	t.Run("redis", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		defer func() { redis = t.Skipped() }()
		StartRedis(t, RedisOptions{})
	})
	if !pg || !redis {
		t.Errorf("skipped: postgres %v, redis %v; want both", pg, redis)
	}
}
