package parser

import (
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestHosts: the servers a command names, in the syntax of its program.
func TestHosts(t *testing.T) {
	t.Parallel()
	remote := func(v string) Host { return Host{Value: v} }
	local := func(v string) Host { return Host{Value: v, Loopback: true} }
	dynamic := func(v string) Host { return Host{Value: v, Dynamic: true} }
	for _, tt := range []struct {
		in   string
		env  map[string]string
		want []Host
	}{
		// URLs, and host words when there is no URL.
		{"curl https://example.com/x", nil, []Host{remote("https://example.com/x")}},
		{"curl -s http://localhost:8080/health", nil, []Host{local("http://localhost:8080/health")}},
		{"curl http://[::1]:80/ https://example.com", nil, []Host{local("http://[::1]:80/"), remote("https://example.com")}},
		{"curl -o out.txt https://example.com", nil, []Host{remote("https://example.com")}},
		{"wget -q example.com/file", nil, []Host{remote("example.com/file")}},
		{"wget localhost:8080/x", nil, []Host{local("localhost:8080/x")}},
		{"wget $URL", nil, []Host{dynamic("$URL")}},
		{"curl -X $METHOD https://example.com", nil, []Host{remote("https://example.com")}},
		{"ping -c 1 127.0.0.1", nil, []Host{local("127.0.0.1")}},
		{"getent hosts web1", nil, nil},
		{"git clone https://github.com/x/y.git", nil, []Host{remote("https://github.com/x/y.git")}},
		{"git clone file:///srv/repo.git", nil, []Host{local("file:///srv/repo.git")}},
		// ssh and the copying programs.
		{"ssh web1 uptime", nil, nil},
		{"sftp web1:/srv", nil, []Host{remote("web1:/srv")}},
		{"rsync -a dist/ web1:/srv/", nil, []Host{remote("web1:/srv/")}},
		{"rsync -a config.yaml /tmp/x/", nil, nil},
		{"scp u@localhost:/x .", nil, []Host{local("u@localhost:/x")}},
		// Database tools: options, environment, connection strings.
		{"psql -h db.example.com -c 'select 1'", nil, []Host{remote("db.example.com")}},
		{"psql -hlocalhost app", nil, []Host{local("localhost")}},
		{"psql --host=/var/run/postgresql app", nil, []Host{local("/var/run/postgresql")}},
		{"psql -h $DB app", nil, []Host{dynamic("$DB")}},
		{"psql postgres://db.example.com/app", nil, []Host{remote("postgres://db.example.com/app")}},
		{"psql -c 'select 1'", map[string]string{"PGHOST": "/tmp"}, []Host{local("/tmp")}},
		{"PGHOST=db.example.com psql -h localhost app", nil, []Host{remote("db.example.com"), local("localhost")}},
		{"psql 'host=db.example.com dbname=x'", nil, []Host{remote("db.example.com")}},
		{"mysql -e 'select 1' app.example.com", nil, nil},
		{"redis-cli -h 10.0.0.5 get k", nil, []Host{remote("10.0.0.5")}},
		// A program that reaches no server may name words that look like
		// host names: only a rule's hosts: gives them a meaning.
		{"cat notes.txt", nil, []Host{remote("notes.txt")}},
		{"ls -la", nil, nil},
	} {
		f := Parse(tt.in, Options{Cwd: "/w", Env: tt.env})
		if len(f.Commands) != 1 {
			t.Errorf("%q: %d commands", tt.in, len(f.Commands))
			continue
		}
		if diff := cmp.Diff(tt.want, f.Commands[0].Hosts, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%q: Hosts (-want +got):\n%s", tt.in, diff)
		}
	}
}

// hostLikeRE is what hostLike reads, as the regular expression it
// replaces.
var hostLikeRE = regexp.MustCompile(`^([\w.-]+@)?((localhost|\[[0-9a-fA-F:]+\]|[\w-]+(\.[\w-]+)+)(:\d+)?(/\S*)?|[\w.-]+:\S*)$`)

func FuzzHostLike(f *testing.F) {
	for _, s := range []string{"example.com", "localhost:8080/x", "u@h.example.com:/x", "[::1]:80/", "web1:/srv", "a..b",
		"localhost:/x", "x.y:", "a@b@c.d", "[]", "[g]", "a.b:12x", "a.b/ c", "é.com", "a.b\n", "-h", "", ".", "a-b_c.d-e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := hostLike(s), hostLikeRE.MatchString(s); got != want {
			t.Errorf("hostLike(%q) = %v, want %v", s, got, want)
		}
		loopback(s) // does not panic
		c := Command{Argv: []Arg{{Value: "curl"}, {Value: s}, {Value: "-h"}, {Value: s, Dynamic: true}}}
		for _, prog := range []string{"curl", "rsync", "ssh", "psql"} {
			c.Argv[0].Value, c.Hosts = prog, nil
			wordHosts(&c)
			for _, h := range c.Hosts {
				if h.Dynamic && h.Loopback {
					t.Errorf("%s %q: host %+v is both dynamic and this machine", prog, s, h)
				}
			}
		}
	})
}
