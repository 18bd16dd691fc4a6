package classify

import (
	"slices"
	"testing"

	"github.com/undosh/undosh/policy"
)

// TestFamilyLive: a step whose every machine-class part talks to a
// service running here (a database client that writes, a migration, a
// POST to a local server) or signals the sandbox's processes is live: a
// copy of the machine has none of them. A step that also changes the
// machine otherwise is not, and a read-only one is not a machine step.
func TestFamilyLive(t *testing.T) {
	t.Parallel()
	p := policy.Default()
	for _, tc := range []struct {
		in   string
		live []string // nil: not live
	}{
		{`psql -h 127.0.0.1 -p 5433 -c "alter table users add column email text"`, []string{"postgres"}},
		{`psql -c 'drop table users'`, []string{"postgres"}},
		{`PGHOST=localhost psql -f migrate.sql`, []string{"postgres"}},
		{`createdb app && psql app < schema.sql`, []string{"postgres"}},
		{`redis-cli set k v`, []string{"redis"}},
		{`redis-cli -p 6380 flushall`, []string{"redis"}},
		{`mysql -e 'insert into t values (1)'`, []string{"mysql"}},
		{`mongosh --eval 'db.t.drop()'`, []string{"mongodb"}},
		{`python manage.py migrate`, []string{"database"}},
		{`npx prisma migrate deploy`, []string{"database"}},
		{`alembic upgrade head`, []string{"database"}},
		{`bin/rails db:migrate`, []string{"database"}},
		{`npx knex migrate:latest`, []string{"database"}},
		{`sqlx migrate run`, []string{"database"}},
		{`psql -c 'drop table t' && redis-cli flushall`, []string{"postgres", "redis"}},
		{`curl -X POST http://localhost:3000/api/reset`, []string{"services"}},
		{`kill 4242`, []string{"processes"}},
		{`pkill -f 'node server.js'`, []string{"processes"}},
		{`killall node`, []string{"processes"}},
		{`fuser -k 3000/tcp`, []string{"processes"}},
		{`kill -9 $(lsof -t -i:3000)`, []string{"processes"}},
		{`flask db upgrade`, []string{"database"}},
		{`npx sequelize-cli db:migrate`, []string{"database"}},
		{`yarn prisma migrate deploy`, []string{"database"}},
		{`pnpm exec knex migrate:latest`, []string{"database"}},
		{`bun drizzle-kit migrate`, []string{"database"}},
		{`npx drizzle-kit push`, []string{"database"}},
		{`service postgresql restart`, []string{"database"}},
		{`systemctl restart redis-server`, []string{"database"}},
		{`invoke-rc.d mysql stop`, []string{"database"}},
		{`yarn prisma generate`, nil},
		{`npx drizzle-kit generate`, nil},
		{`flask db migrate -m 'add email'`, nil},
		{`fuser 3000/tcp`, nil},
		{`service postgresql status`, nil},
		{`service nginx restart`, nil},
		// Not live: something else needs the copy too, or nothing does.
		{`psql -c 'drop table t'; echo x > /etc/motd`, nil},
		{`apt-get install -y jq && psql -c 'create table t()'`, nil},
		{`psql -c 'select count(*) from users'`, nil},
		{`renice 10 4242`, nil},
		{`pg_ctl -D /srv/pg restart -m fast`, []string{"postgres"}},
		{`pg_ctlcluster 15 main stop`, []string{"postgres"}},
		{`pg_ctl -D /srv/pg start`, nil},
		{`make`, nil},
		{`kill -0 4242`, nil},
	} {
		d := Decide(tc.in, ExampleOptions(p)).Decision
		names, all := d.Live()
		if !all {
			names = nil
		}
		if !slices.Equal(names, tc.live) {
			t.Errorf("%q: live %v (class %s), want %v", tc.in, names, d.Class, tc.live)
		}
	}
}
