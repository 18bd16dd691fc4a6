package parser_test

import (
	"testing"

	"github.com/undosh/undosh/parser"
)

// sqlOf returns the SQL verdict of the first database command of src.
func sqlOf(t *testing.T, src string) string {
	t.Helper()
	f := parser.Parse(src, parser.Options{Cwd: "/w"})
	for _, c := range f.Commands {
		if c.SQL != "" {
			return c.SQL
		}
	}
	t.Fatalf("%q: no database command", src)
	return ""
}

// TestFamilyDatabaseReadOnly: a database client reads only when every
// option, client command, function and pragma is known to read; any other
// spelling of an option, and every other function, is a write.
func TestFamilyDatabaseReadOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want string
	}{
		{`psql -c 'select count(*) from t'`, "read-only"},
		{`psql -qAt -c 'select 1'`, "read-only"},
		{`psql -c '\d+ users'`, "read-only"},
		{`psql -c 'select 1' -c'drop table t'`, "write"},
		{`psql --file=x.sql -c 'select 1'`, "write"},
		{`psql -c 'select 1' --output=o.txt`, "write"},
		{`psql -L log -c 'select 1'`, "write"},
		{`psql -c "select 'drop table t' \gexec"`, "write"},
		{`psql -c 'select 1 \g out.txt'`, "write"},
		{`psql -c '\! id'`, "write"},
		{`psql -c '\echo ` + "`id`" + `'`, "write"},
		{`psql -c '\lo_export 1 /tmp/x'`, "write"},
		{`psql -v x='drop table t' -c ':x'`, "write"},
		{`psql -c 'select my_func()'`, "write"},
		{"psql -c \"select 1 -- '\ndrop table t; select '\"", "write"},
		{`mysql -Ne 'select 1'`, "read-only"},
		{`mysql --tee=t.log -e 'select 1'`, "write"},
		{`mysql -e "select 'x\\'' ; drop table t; -- '"`, "write"},
		{`mysql -e 'select /*! drop table t */ 1'`, "write"},
		{`sqlite3 a.db 'pragma table_info(t)'`, "read-only"},
		{`sqlite3 a.db 'pragma user_version = 3'`, "write"},
		{`sqlite3 a.db 'pragma journal_mode(wal)'`, "write"},
		{`sqlite3 a.db "select writefile('x', 'y')"`, "write"},
		{`sqlite3 a.db 'select "edit"(1)'`, "write"},
		{`sqlite3 a.db '.output x'`, "write"},
		{`sqlite3 --cmd '.shell id' a.db 'select 1'`, "write"},
		{`mongosh --eval 'db.t.find({a: 1}).limit(3).toArray()'`, "read-only"},
		{`mongosh --eval 'db.t.find().forEach(function(d) { db.t.remove(d) })'`, "write"},
		{`mongosh --eval 'db.t.aggregate([{$out: "x"}])'`, "write"},
		{`mongosh app drop.js --eval 'db.t.find()'`, "write"},
		{`redis-cli slowlog get 5`, "read-only"},
		{`redis-cli slowlog reset`, "write"},
		{`redis-cli --rdb dump.rdb`, "write"},
	} {
		if got := sqlOf(t, tc.in); got != tc.want {
			t.Errorf("%q: SQL %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestFamilyInterpreterAllowList: python -c and node -e code is read-only
// only when all it names is known to read; a rename, an alias or a
// string-built name does not make a write read-only.
func TestFamilyInterpreterAllowList(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		unknown bool
	}{
		{`python3 -c 'import json,sys; print(json.load(sys.stdin)["a"])'`, false},
		{`python3 -c "print(open('f').read())"`, false},
		{`python3 -c 'from os import execlp; execlp("id", "id")'`, true},
		{`python3 -c 'import os as o; o.system("id")'`, true},
		{`python3 -c "import os; getattr(os, 'sys'+'tem')('id')"`, true},
		{`python3 -c "open('f', chr(119)).write('x')"`, true},
		{`python3 -c 'import os; m = os; m.remove("f")'`, true},
		{`python3 -c 'import pathlib; pathlib.Path("a").replace("b")'`, true},
		{`python3 -c 'print(f"{__import__(\"os\")}")'`, true},
		{`node -e 'console.log(require("./package.json").version)'`, false},
		{`node -e 'const f = require("fs"); f["write" + "FileSync"]("x", "y")'`, true},
		{`node -e 'const {writeFileSync: w} = require("fs"); w("x", "y")'`, true},
		{`node -e 'Object.values(fs)[0]("x")'`, true},
		{`node -e 'this.constructor.constructor("return 1")()'`, true},
		{`perl -e 's/x/"un"."link"/ee'`, true},
		{`perl -ne 'print if /x/' f`, false},
	} {
		f := parser.Parse(tc.in, parser.Options{Cwd: "/w"})
		if got := len(f.Unknown) > 0; got != tc.unknown {
			t.Errorf("%q: unknown code %v, want %v (%v)", tc.in, got, tc.unknown, f.Unknown)
		}
	}
}

// TestFamilySedLabels: GNU sed ends a label, a branch and v at a
// semicolon, so what follows is a command of its own.
func TestFamilySedLabels(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in     string
		writes []string
		exec   bool
	}{
		{`sed ':a;N;$!ba;w /etc/x' f`, []string{"/etc/x"}, false},
		{`sed 'b end;W /etc/y' f`, []string{"/etc/y"}, false},
		{`sed -n 't;T x;e id' f`, nil, true},
		{`sed 'v;F;s/a/b/w /etc/z' f`, []string{"/etc/z"}, false},
		{`sed ':a;N;$!ba;s/\n/ /g' f`, nil, false},
	} {
		f := parser.Parse(tc.in, parser.Options{Cwd: "/w"})
		var got []string
		for _, c := range f.Commands {
			for _, w := range c.Writes {
				got = append(got, w.Path)
			}
		}
		if len(got) != len(tc.writes) || len(got) > 0 && got[0] != tc.writes[0] {
			t.Errorf("%q: writes %v, want %v", tc.in, got, tc.writes)
		}
		if exec := len(f.Unknown) > 0; exec != tc.exec {
			t.Errorf("%q: runs a command %v, want %v", tc.in, exec, tc.exec)
		}
	}
}

// TestFamilyDatabaseHosts: the servers a database tool is given other
// than by -h or a URL are its Hosts.
func TestFamilyDatabaseHosts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		env  map[string]string
		want string // the first host, "$" for a dynamic one, "" for none
	}{
		{`psql 'host=db.example.com dbname=x' -c 'select 1'`, nil, "db.example.com"},
		{`psql -d 'hostaddr=10.0.0.1' -c 'select 1'`, nil, "10.0.0.1"},
		{`PGHOST=db.example.com psql -c 'select 1'`, nil, "db.example.com"},
		{`export PGHOST=db.example.com; psql -c 'select 1'`, nil, "db.example.com"},
		{`PGHOST=x; psql -c 'select 1'`, nil, ""}, // not exported
		{`psql -c 'select 1'`, map[string]string{"PGHOST": "db.example.com"}, "db.example.com"},
		{`env MYSQL_HOST=db.example.com mysql -e 'select 1'`, nil, "db.example.com"},
		{`PGHOST=db.example.com bash -c 'psql -c "select 1"'`, nil, "db.example.com"},
		{`psql service=prod -c 'select 1'`, nil, "$"},
		{`psql "$(cat url)" -c 'select 1'`, nil, "$"},
		{`mongosh db.example.com/app --eval 'db.t.find()'`, nil, "db.example.com"},
		{`cqlsh db.example.com -e 'select 1'`, nil, "db.example.com"},
		{`psql app -c 'select 1'`, nil, ""},
	} {
		f := parser.Parse(tc.in, parser.Options{Cwd: "/w", Env: tc.env})
		got := ""
		for _, c := range f.Commands {
			if len(c.Hosts) > 0 {
				got = c.Hosts[0].Value
				if c.Hosts[0].Dynamic {
					got = "$"
				}
				break
			}
		}
		if got != tc.want {
			t.Errorf("%q: host %q, want %q", tc.in, got, tc.want)
		}
	}
}
