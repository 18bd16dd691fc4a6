package parser

import (
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDiverts: the paths whose diversion dpkg-divert changes. The
// policy's self-protection decides from these same readings
// (policy/decide_test.go).
func TestDiverts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"dpkg-divert --remove /bin/bash", []string{"/bin/bash"}},
		{"dpkg-divert --rename --remove /usr/bin/../bin/sh", []string{"/usr/bin/sh"}},
		{"dpkg-divert --remove /usr/bin/perf", []string{"/usr/bin/perf"}},
		{"sudo dpkg-divert --add --rename --divert /bin/bash.real //bin/bash", []string{"/bin/bash.real", "/bin/bash"}},
		{"/usr/sbin/dpkg-divert --add /bin/sh", []string{"/bin/sh"}},
		{"dpkg-divert --add $P", nil},
		{"dpkg-divert --divert=/bin/bash.x --add relative", nil},
		{"dpkg-divert --list", nil},
		{"dpkg-divert --truename /bin/bash", nil},
		{"dpkg-divert /bin/bash --listpackage", nil},
		{"dpkg-divert -? /bin/bash", nil},
		{"echo dpkg-divert --remove /bin/bash", nil},
	}
	for _, tt := range tests {
		f := Parse(tt.in, Options{Cwd: "/w"})
		c := f.Commands[len(f.Commands)-1]
		if diff := cmp.Diff(tt.want, c.Diverts); diff != "" {
			t.Errorf("%q: Diverts (-want +got):\n%s", tt.in, diff)
		}
	}
}

// TestNamedPaths: the absolute paths the words of a program whose writes
// are not known name. The policy's TestFamilyNamedPaths decides from
// these same readings.
func TestNamedPaths(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"mytool /dev/sda", []string{"/dev/sda"}},
		{"mytool of=/dev/sdb", []string{"/dev/sdb"}},
		{"mytool --target=/usr/lib/x", []string{"/usr/lib/x"}},
		{"mytool -o/boot/grub.cfg", []string{"/boot/grub.cfg"}},
		{"./flash.sh /dev/mmcblk0", []string{"/dev/mmcblk0"}},
		{"mytool /dev/null /tmp/x /home/agent/f", []string{"/dev/null", "/tmp/x", "/home/agent/f"}},
		{"mytool /dev/tcp/203.0.113.1/80", []string{"/dev/tcp/203.0.113.1/80"}},
		{"cat /etc/passwd", []string{"/etc/passwd"}},
		{"make -I/usr/include", []string{"/usr/include"}},
		{"mytool //dev/./sda/ x=/etc//x/.. -x/y/z --out=/a -- /b", []string{"/dev/sda", "/etc", "/y/z", "/a", "/b"}},
		{"mytool /=x a=b -o relative --x/y $P /dev/$X", []string{"/=x"}},
		{"mytool =/etc/x -/x", []string{"/etc/x", "/x"}},
		// Writes the parser knows: nothing more.
		{"rm /dev/sda", nil},
		{"echo /etc/passwd", nil},
	}
	for _, tt := range tests {
		f := Parse(tt.in, Options{Cwd: "/w"})
		c := f.Commands[len(f.Commands)-1]
		if diff := cmp.Diff(tt.want, c.NamedPaths); diff != "" {
			t.Errorf("%q: NamedPaths (-want +got):\n%s", tt.in, diff)
		}
	}
}

// FuzzNamedPaths: what the parser reads as paths in a command's words
// (NamedPaths, and Diverts for dpkg-divert) is always absolute and
// clean, and a dpkg-divert that only asks diverts nothing.
func FuzzNamedPaths(f *testing.F) {
	for _, s := range []string{"/dev/sda", "of=/dev/sdb -o/boot/x", "--target=/usr/lib/x", "//a/../b/ =/c -/d", "--add /bin/bash", "--list /bin/sh", "-? /x", "a=b /=x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, words string) {
		if len(words) > 256 {
			return
		}
		argv := []Arg{{Value: "dpkg-divert"}}
		for _, w := range strings.Fields(words) {
			argv = append(argv, Arg{Value: w, Dynamic: strings.HasPrefix(w, "$")})
		}
		c := Command{Argv: argv}
		namedPaths(&c)
		divertWords(&c)
		for _, l := range [][]string{c.NamedPaths, c.Diverts} {
			for _, p := range l {
				if !strings.HasPrefix(p, "/") || path.Clean(p) != p {
					t.Errorf("%q: path %q is not absolute and clean", words, p)
				}
			}
		}
		asks := slices.ContainsFunc(argv[1:], func(a Arg) bool {
			return slices.Contains([]string{"--list", "--listpackage", "--truename", "--help", "-?", "--version"}, a.Value)
		})
		if asks && len(c.Diverts) > 0 {
			t.Errorf("%q: a dpkg-divert that only asks diverts %q", words, c.Diverts)
		}
		c.WritesKnown = true
		if namedPaths(&c); c.NamedPaths != nil {
			t.Errorf("%q: writes known, yet NamedPaths %q", words, c.NamedPaths)
		}
	})
}

// TestServer: the server a database client reaches, and its port only
// when the words and the environment say it for sure. The shell's
// TestNarrow checkpoints fewer servers from these same readings.
func TestServer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		env  map[string]string
		kind string
		port int
	}{
		{`psql -c "drop table t"`, nil, "postgres", 5432},
		{`psql -p 5433 -c x`, nil, "postgres", 5433},
		{`psql -p5433 -c "update t set a=1"`, nil, "postgres", 5433},
		{`psql --port=5433 -h 127.0.0.1 -c x`, nil, "postgres", 5433},
		{`psql --port 5433 -h localhost db`, nil, "postgres", 5433},
		{`/usr/bin/createdb -p 5434 x`, nil, "postgres", 5434},
		{`psql -c x`, map[string]string{"PGPORT": "5433"}, "postgres", 5433},
		{`psql -p 5432 -c x`, map[string]string{"PGPORT": "5433"}, "postgres", 5432},
		{`redis-cli set k v`, nil, "redis", 6379},
		{`redis-cli -p 6380 -h 127.0.0.1 set k v`, nil, "redis", 6380},
		{`mysql -h 127.0.0.1 -P 3307 -e x`, nil, "mysql", 3307},
		{`mysql --protocol=TCP -P3307 -e x`, nil, "mysql", 3307},
		{`mysql --protocol tcp -u root -e x`, nil, "mysql", 3306},
		{`mysql -h 127.0.0.1 -e x`, map[string]string{"MYSQL_TCP_PORT": "3310"}, "mysql", 3310},
		// Not sure: the kind, with no port.
		{`psql -p "$P" -c x`, nil, "postgres", 0},
		{`psql -c "$SQL"`, nil, "postgres", 0},
		{`PGPORT=5433 psql -c x`, nil, "postgres", 0},
		{`export PGPORT=5433; psql -c x`, nil, "postgres", 0},
		{`read PGPORT; psql -c x`, nil, "postgres", 0},
		{`unset PGPORT; psql -c x`, map[string]string{"PGPORT": "5433"}, "postgres", 0},
		{`psql -c x`, map[string]string{"PGPORT": "x"}, "postgres", 0},
		{`psql -d "host=127.0.0.1 port=5433" -c x`, nil, "postgres", 0},
		{`psql "port=5433" -c x`, nil, "postgres", 0},
		{`psql postgresql://127.0.0.1:5433/db -c x`, nil, "postgres", 0},
		{`psql -h db.internal -c x`, nil, "postgres", 0},
		{`psql -h /tmp/sock -c x`, nil, "postgres", 0},
		{`psql -c x`, map[string]string{"PGHOST": "db.internal"}, "postgres", 0},
		{`psql -c x`, map[string]string{"PGSERVICE": "db"}, "postgres", 0},
		{`PGSERVICE=db psql -c x`, nil, "postgres", 0},
		{`psql -p 99999 -c x`, nil, "postgres", 0},
		{`psql -p`, nil, "postgres", 0},
		{`sudo -u postgres psql -c x`, nil, "postgres", 0},
		{`env -i psql -c x`, map[string]string{"PGPORT": "5433"}, "postgres", 0},
		{`mysql -P 3307 -e x`, nil, "mysql", 0},
		{`mysql -h localhost -P 3307 -e x`, nil, "mysql", 0},
		{`mysql -h 127.0.0.1 -S /run/mysqld/mysqld.sock -e x`, nil, "mysql", 0},
		{`mysql --defaults-file=my.cnf -h 127.0.0.1 -e x`, nil, "mysql", 0},
		{`redis-cli -u redis://127.0.0.1:6380 set k v`, nil, "redis", 0},
		{`redis-cli -s /tmp/redis.sock set k v`, nil, "redis", 0},
		{`redis-cli -h 10.0.0.5 set k v`, nil, "redis", 0},
		{`mongosh --port 27018`, nil, "mongodb", 0},
		{`sqlite3 db.sqlite "select 1"`, nil, "sqlite", 0},
	}
	for _, tt := range tests {
		f := Parse(tt.in, Options{Cwd: "/w", Env: tt.env})
		c := f.Commands[len(f.Commands)-1]
		if c.Server == nil || c.Server.Kind != tt.kind || c.Server.Port != tt.port {
			t.Errorf("%q %v: Server %+v, want %s port %d", tt.in, tt.env, c.Server, tt.kind, tt.port)
		}
	}
	for _, in := range []string{"echo psql", "psqlx -p 5433", "cat db.sql", "$DB -p 5433"} {
		f := Parse(in, Options{})
		if c := f.Commands[len(f.Commands)-1]; c.Server != nil {
			t.Errorf("%q: Server %+v, want none", in, c.Server)
		}
	}
}

// TestSignals: the programs that signal other processes, whose targets
// a live step records.
func TestSignals(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]bool{
		"kill 42":                   true,
		"/bin/kill -9 42":           true,
		"sudo pkill -f server":      true,
		"killall node":              true,
		"fuser -k 8080/tcp":         true,
		"kill() { :; }; kill 42":    false,
		"echo kill 42":              false,
		"$K 42":                     false,
		"pgrep -f server":           false,
		"timeout 5 kill -TERM 4242": true,
	} {
		f := Parse(in, Options{})
		if got := f.Commands[len(f.Commands)-1].Signals; got != want {
			t.Errorf("%q: Signals %v, want %v", in, got, want)
		}
	}
}
