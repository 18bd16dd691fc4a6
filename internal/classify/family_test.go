package classify

import (
	"testing"

	"github.com/undosh/undosh/policy"
)

// TestFamilyRemoteDatabase: a database outside the sandbox, named by a
// conninfo string, the environment or an address operand, is egress; a
// local one is not.
func TestFamilyRemoteDatabase(t *testing.T) {
	t.Parallel()
	p := policy.Default()
	for _, tc := range []struct {
		in     string
		egress bool
		deny   bool
	}{
		{`psql 'host=db.example.com dbname=app' -c 'select 1'`, true, false},
		{`PGHOST=db.example.com psql -c 'select 1'`, true, false},
		{`PGHOST=db.example.com psql -c 'delete from t'`, true, true},
		{`PGHOST=db.example.com pg_dump app`, true, false},
		{`PGHOST=db.example.com dropdb app`, true, true},
		{`MYSQL_HOST=db.example.com mysql -e 'select 1'`, true, false},
		{`cqlsh db.example.com -e 'select * from ks.t'`, true, false},
		{`PGHOST=localhost psql -c 'select 1'`, false, false},
		{`psql 'host=/var/run/postgresql' -c 'select 1'`, false, false},
	} {
		d := Decide(tc.in, ExampleOptions(p)).Decision
		if d.Egress != tc.egress || (d.Verdict == policy.Deny) != tc.deny {
			t.Errorf("%q: egress %v verdict %s, want egress %v deny %v", tc.in, d.Egress, d.Verdict, tc.egress, tc.deny)
		}
	}
}
