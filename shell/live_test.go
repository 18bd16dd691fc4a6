package shell

import (
	"slices"
	"testing"

	"github.com/undosh/undosh/internal/procs"
	"github.com/undosh/undosh/parser"
	"github.com/undosh/undosh/policy"
	"github.com/undosh/undosh/service"
)

// narrow keeps the servers a client's command line reaches, and all of
// them whenever it cannot be sure.
func TestNarrow(t *testing.T) {
	ss := []service.Service{
		{Name: "postgres:5432", Kind: service.Postgres, Port: 5432, Main: procs.Proc{PID: 1}},
		{Name: "postgres:5433", Kind: service.Postgres, Port: 5433, Main: procs.Proc{PID: 2}},
		{Name: "redis", Kind: service.Redis, Port: 6379, Main: procs.Proc{PID: 3}},
	}
	for _, c := range []struct {
		src   string
		names []string
		env   map[string]string
		want  []string
	}{
		{`psql -c "drop table t"`, []string{"postgres"}, nil, []string{"postgres:5432", "redis"}},
		{`psql -p 5433 -c "drop table t"`, []string{"postgres"}, nil, []string{"postgres:5433", "redis"}},
		{`psql -p5433 -c "drop table t"`, []string{"postgres"}, nil, []string{"postgres:5433", "redis"}},
		{`psql --port=5433 -h 127.0.0.1 -c x`, []string{"postgres"}, nil, []string{"postgres:5433", "redis"}},
		{`psql -c x`, []string{"postgres"}, map[string]string{"PGPORT": "5433"}, []string{"postgres:5433", "redis"}},
		{`psql -p 5432 -c x; psql -p 5433 -c y`, []string{"postgres"}, nil, []string{"postgres:5432", "postgres:5433", "redis"}},
		// Not sure: all of them.
		{`psql -p "$P" -c x`, []string{"postgres"}, nil, []string{"postgres:5432", "postgres:5433", "redis"}},
		{`PGPORT=5433 psql -c x`, []string{"postgres"}, nil, []string{"postgres:5432", "postgres:5433", "redis"}},
		{`export PGPORT=5433; psql -c x`, []string{"postgres"}, nil, []string{"postgres:5432", "postgres:5433", "redis"}},
		{`psql -d "host=127.0.0.1 port=5433" -c x`, []string{"postgres"}, nil, []string{"postgres:5432", "postgres:5433", "redis"}},
		{`psql postgresql://127.0.0.1:5433/db -c x`, []string{"postgres"}, nil, []string{"postgres:5432", "postgres:5433", "redis"}},
		{`psql -h db.internal -c x`, []string{"postgres"}, nil, []string{"postgres:5432", "postgres:5433", "redis"}},
		{`psql -p 6000 -c x`, []string{"postgres"}, nil, []string{"postgres:5432", "postgres:5433", "redis"}},
		{`psql -c x`, []string{"postgres"}, map[string]string{"PGSERVICE": "db"}, []string{"postgres:5432", "postgres:5433", "redis"}},
		{`psql -p 5433 -c x`, []string{policy.LiveDatabase}, nil, []string{"postgres:5432", "postgres:5433", "redis"}},
		{`redis-cli -p 6379 set k v`, []string{"redis"}, nil, []string{"postgres:5432", "postgres:5433", "redis"}},
		{`psql -p 5433 -c x`, []string{"postgres"}, map[string]string{"PGHOST": "db.internal"}, []string{"postgres:5432", "postgres:5433", "redis"}},
		{`sudo -u postgres psql -p 5433 -c x`, []string{"postgres"}, nil, []string{"postgres:5432", "postgres:5433", "redis"}},
	} {
		facts := parser.Parse(c.src, parser.Options{Env: c.env})
		var got []string
		for _, s := range narrow(ss, c.names, facts) {
			got = append(got, s.Name)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s (%v): %v, want %v", c.src, c.env, got, c.want)
		}
	}
}
