package parser

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

func isDatabase(base string) bool {
	switch base {
	case "psql", "mysql", "mariadb", "sqlite3", "duckdb", "clickhouse-client", "cqlsh", "mongosh", "mongo", "redis-cli":
		return true
	}
	return false
}

// dbServerVars are the environment variables that name the server a
// database tool connects to, when no option does. A value the parser does
// not know (PGSERVICE names an entry of a file) is reported as a dynamic
// host: the server may be remote.
func dbServerVars(base string) (hosts, indirect []string) {
	switch base {
	case "psql", "pg_dump", "pg_dumpall", "pg_restore", "pg_isready", "createdb", "dropdb", "createuser", "dropuser", "vacuumdb", "reindexdb", "clusterdb", "pgbench":
		return []string{"PGHOST", "PGHOSTADDR"}, []string{"PGSERVICE", "PGSERVICEFILE"}
	case "mysql", "mariadb", "mysqldump", "mariadb-dump", "mysqladmin", "mysqlimport", "mysqlshow", "mysqlcheck":
		return []string{"MYSQL_HOST"}, []string{"MYSQL_TEST_LOGIN_FILE"}
	case "cqlsh":
		return []string{"CQLSH_HOST"}, nil
	case "clickhouse-client":
		return []string{"CLICKHOUSE_HOST"}, nil
	}
	return nil, nil
}

// dbHosts adds to c.Hosts the servers a database tool is given other than
// by -h or a URL (which the policy reads from the arguments): a libpq
// conninfo string as the database name, the environment, a mongosh or
// cqlsh address operand, an option file.
func (w *walker) dbHosts(c *Command, base string) {
	hostVars, indirect := dbServerVars(base)
	for _, name := range hostVars {
		if v, set, known := w.childVar(c, name); set {
			c.Hosts = append(c.Hosts, Arg{Value: v, Dynamic: !known})
		}
	}
	for _, name := range indirect {
		if v, set, _ := w.childVar(c, name); set {
			c.Hosts = append(c.Hosts, Arg{Value: "$" + name + "=" + v, Dynamic: true})
		}
	}
	args := c.Argv[1:]
	conninfo := func(a Arg) {
		if a.Dynamic {
			// "$DATABASE_URL": any server.
			c.Hosts = append(c.Hosts, a)
			return
		}
		c.Hosts = append(c.Hosts, conninfoHosts(a.Value)...)
	}
	operand := 0
	for i := 0; i < len(args); i++ {
		a := args[i]
		v := a.Value
		switch {
		case a.Dynamic:
			if operand == 0 {
				conninfo(a)
			}
			operand++
		case v == "-d" || v == "--dbname" || v == "--uri" || v == "--url":
			if i+1 < len(args) {
				i++
				conninfo(args[i])
			}
		case strings.HasPrefix(v, "--dbname=") || strings.HasPrefix(v, "--uri=") || strings.HasPrefix(v, "--url="):
			_, rest, _ := strings.Cut(v, "=")
			conninfo(Arg{Value: rest})
		case strings.HasPrefix(v, "-d") && len(v) > 2 && (base == "psql" || strings.HasPrefix(base, "pg_")):
			conninfo(Arg{Value: v[2:]})
		case strings.HasPrefix(v, "--defaults-file") || strings.HasPrefix(v, "--defaults-extra-file") || strings.HasPrefix(v, "--login-path") || strings.HasPrefix(v, "--cqlshrc") || strings.HasPrefix(v, "--config-file"):
			// The server is named in a file.
			c.Hosts = append(c.Hosts, Arg{Value: v, Dynamic: true})
		case strings.HasPrefix(v, "-"):
			if dbValueOption(base, v) {
				i++
			}
		default:
			if operand == 0 {
				switch base {
				case "psql", "pg_dump", "pg_isready", "createdb", "dropdb", "vacuumdb", "reindexdb", "clusterdb", "pgbench":
					conninfo(a)
				case "mongosh", "mongo":
					// [host[:port]/]db, or a .js file to run.
					if h, _, ok := strings.Cut(v, "/"); ok && !strings.HasSuffix(v, ".js") {
						c.Hosts = append(c.Hosts, Arg{Value: h})
					}
				case "cqlsh":
					c.Hosts = append(c.Hosts, Arg{Value: v})
				}
			}
			operand++
		}
	}
}

// dbValueOption reports whether a database tool's option takes the next
// word as its value, for finding the operands.
func dbValueOption(base, v string) bool {
	if strings.Contains(v, "=") {
		return false
	}
	if o, ok := dbOptionTable(base); ok {
		if k, ok := o[v]; ok {
			return k != dbFlag
		}
	}
	switch v {
	case "-h", "--host", "-p", "--port", "-U", "--username", "-u", "--user", "-f", "--file", "-t", "--table", "-n", "--schema", "-F", "--format", "-j", "--jobs", "-S", "--socket":
		return true
	}
	return false
}

// childVar returns the value the program of c sees for the environment
// variable name: an assignment before it, one the source exported, or
// the environment's. set is false when the program does not get it;
// known is false when its value is known only at run time.
func (w *walker) childVar(c *Command, name string) (value string, set, known bool) {
	if v, ok := c.EnvValues[name]; ok {
		return v.Value, true, !v.Dynamic
	}
	b := w.varBinding(name)
	switch b.how {
	case knownVal:
		if b.exported || !b.private && w.inEnv(name) {
			return b.value, true, true
		}
		return "", false, true
	case unknownVal:
		if b.exported || !b.private && w.inEnv(name) {
			return "", true, false
		}
		return "", false, true
	case unsetVal:
		return "", false, true
	}
	if v, ok := w.opts.Env[name]; ok {
		return v, true, true
	}
	return "", false, true
}

// conninfoHosts returns the hosts a libpq connection string names
// (host=a,b hostaddr=c), or a dynamic host for a service entry. A URI is
// left to the policy, which reads URLs from the arguments.
func conninfoHosts(s string) []Arg {
	if !strings.Contains(s, "=") || strings.Contains(s, "://") {
		return nil
	}
	var out []Arg
	for _, kv := range strings.Fields(s) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		v = strings.Trim(v, `'`)
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "host", "hostaddr":
			for _, h := range strings.Split(v, ",") {
				if h != "" {
					out = append(out, Arg{Value: h})
				}
			}
		case "service", "servicefile":
			out = append(out, Arg{Value: kv, Dynamic: true})
		}
	}
	return out
}

// database says whether the statements a database client runs only read.
// sqlite3 and duckdb write their database file when they may write.
func (w *walker) database(s *syntax.Stmt, c *Command, base string) {
	c.SQL = "write"
	if base == "redis-cli" {
		if redisReadOnly(c.Argv[1:]) {
			c.SQL = "read-only"
		}
		return
	}
	texts, opts, ok := sqlTexts(c, base)
	if ok && len(texts) > 0 {
		ro := true
		for _, t := range texts {
			if base == "mongosh" || base == "mongo" {
				ro = ro && mongoReadOnly(t)
			} else {
				ro = ro && sqlReadOnly(t, base, opts.vars)
			}
			if strings.Contains(t, "://") {
				c.Network = true // read_csv('https://…'), url(…)
			}
		}
		if ro {
			c.SQL = "read-only"
		}
	}
	if (base == "sqlite3" || base == "duckdb") && c.SQL == "write" {
		c.WritesKnown = true
		if db, ok := firstOperand(c.Argv[1:]); ok && db.Value != ":memory:" {
			c.Writes = append(c.Writes, w.resolveAt(c, db))
		}
	}
}

func firstOperand(args []Arg) (Arg, bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !a.Dynamic && strings.HasPrefix(a.Value, "-") {
			if k, ok := sqliteOptions[strings.TrimPrefix(a.Value, "-")]; ok && k != dbFlag {
				i++
			}
			continue
		}
		return a, true
	}
	return Arg{}, false
}

// dbOpt is what a database client's option is.
type dbOpt uint8

const (
	dbFlag  dbOpt = iota + 1 // no value; changes only how results look
	dbValue                  // a value that changes only where or how it connects or prints
	dbSQL                    // the value is statements to run
	dbVar                    // psql -v NAME=VALUE: a variable statements may interpolate
	dbList                   // psql -l: lists the databases
)

// Options of each client that only read. Any option not listed (an
// output or log file, a script file, a pager, a start-up command, an
// archive mode) leaves the statements unknown: the client may write.
var (
	psqlOptions = map[string]dbOpt{
		"-a": dbFlag, "--echo-all": dbFlag, "-A": dbFlag, "--no-align": dbFlag, "-b": dbFlag, "--echo-errors": dbFlag,
		"-e": dbFlag, "--echo-queries": dbFlag, "-E": dbFlag, "--echo-hidden": dbFlag, "-H": dbFlag, "--html": dbFlag,
		"-n": dbFlag, "--no-readline": dbFlag, "-q": dbFlag, "--quiet": dbFlag, "-s": dbFlag, "--single-step": dbFlag,
		"-S": dbFlag, "--single-line": dbFlag, "-t": dbFlag, "--tuples-only": dbFlag, "-w": dbFlag, "--no-password": dbFlag,
		"-W": dbFlag, "--password": dbFlag, "-x": dbFlag, "--expanded": dbFlag, "-X": dbFlag, "--no-psqlrc": dbFlag,
		"-z": dbFlag, "--field-separator-zero": dbFlag, "-0": dbFlag, "--record-separator-zero": dbFlag,
		"-1": dbFlag, "--single-transaction": dbFlag, "--csv": dbFlag, "-V": dbFlag, "--version": dbFlag, "-?": dbFlag, "--help": dbFlag,
		"-F": dbValue, "--field-separator": dbValue, "-R": dbValue, "--record-separator": dbValue,
		"-h": dbValue, "--host": dbValue, "-p": dbValue, "--port": dbValue, "-U": dbValue, "--username": dbValue,
		"-P": dbValue, "--pset": dbValue, "-T": dbValue, "--table-attr": dbValue, "-d": dbValue, "--dbname": dbValue,
		"-v": dbVar, "--set": dbVar, "--variable": dbVar,
		"-c": dbSQL, "--command": dbSQL, "-l": dbList, "--list": dbList,
	}
	mysqlOptions = map[string]dbOpt{
		"-B": dbFlag, "--batch": dbFlag, "-N": dbFlag, "--skip-column-names": dbFlag, "--column-names": dbFlag,
		"-s": dbFlag, "--silent": dbFlag, "-t": dbFlag, "--table": dbFlag, "-v": dbFlag, "--verbose": dbFlag,
		"-E": dbFlag, "--vertical": dbFlag, "-r": dbFlag, "--raw": dbFlag, "-H": dbFlag, "--html": dbFlag,
		"-X": dbFlag, "--xml": dbFlag, "-n": dbFlag, "--unbuffered": dbFlag, "-q": dbFlag, "--quick": dbFlag,
		"-C": dbFlag, "--compress": dbFlag, "--ssl": dbFlag, "--skip-ssl": dbFlag, "-V": dbFlag, "--version": dbFlag,
		"-?": dbFlag, "--help": dbFlag, "--safe-updates": dbFlag, "-U": dbFlag, "--i-am-a-dummy": dbFlag,
		"-A": dbFlag, "--no-auto-rehash": dbFlag, "--auto-rehash": dbFlag, "--line-numbers": dbFlag,
		"--skip-line-numbers": dbFlag, "--no-beep": dbFlag, "--show-warnings": dbFlag, "--skip-pager": dbFlag,
		"--no-tee": dbFlag, "--comments": dbFlag, "-c": dbFlag, "--skip-comments": dbFlag, "-p": dbFlag, "--password": dbFlag,
		"--no-defaults": dbFlag, "--binary-as-hex": dbFlag, "--skip-reconnect": dbFlag,
		"-h": dbValue, "--host": dbValue, "-P": dbValue, "--port": dbValue, "-u": dbValue, "--user": dbValue,
		"-D": dbValue, "--database": dbValue, "-S": dbValue, "--socket": dbValue, "--protocol": dbValue,
		"--ssl-ca": dbValue, "--ssl-cert": dbValue, "--ssl-key": dbValue, "--ssl-mode": dbValue,
		"--default-character-set": dbValue, "--connect-timeout": dbValue, "--max-allowed-packet": dbValue,
		"--delimiter": dbValue, "--prompt": dbValue,
		"-e": dbSQL, "--execute": dbSQL,
	}
	sqliteOptions = map[string]dbOpt{ // without the leading dash; -x and --x are one
		"append": dbFlag, "ascii": dbFlag, "bail": dbFlag, "batch": dbFlag, "box": dbFlag, "column": dbFlag,
		"csv": dbFlag, "echo": dbFlag, "header": dbFlag, "noheader": dbFlag, "html": dbFlag, "interactive": dbFlag,
		"json": dbFlag, "line": dbFlag, "list": dbFlag, "markdown": dbFlag, "quote": dbFlag, "readonly": dbFlag,
		"safe": dbFlag, "stats": dbFlag, "table": dbFlag, "tabs": dbFlag, "version": dbFlag, "help": dbFlag,
		"nofollow": dbFlag, "no-stdin": dbFlag, "deserialize": dbFlag,
		"separator": dbValue, "newline": dbValue, "nullvalue": dbValue, "vfs": dbValue,
		"cmd": dbSQL, "c": dbSQL, "s": dbSQL,
	}
	clickhouseOptions = map[string]dbOpt{
		"-m": dbFlag, "--multiline": dbFlag, "-n": dbFlag, "--multiquery": dbFlag, "--time": dbFlag, "-t": dbFlag,
		"--stacktrace": dbFlag, "--echo": dbFlag, "-V": dbFlag, "--version": dbFlag, "--help": dbFlag, "--secure": dbFlag, "-s": dbFlag,
		"-h": dbValue, "--host": dbValue, "--port": dbValue, "-u": dbValue, "--user": dbValue, "--password": dbValue,
		"-d": dbValue, "--database": dbValue, "-f": dbValue, "--format": dbValue,
		"-q": dbSQL, "--query": dbSQL,
	}
	cqlshOptions = map[string]dbOpt{
		"-C": dbFlag, "--color": dbFlag, "--no-color": dbFlag, "--ssl": dbFlag, "--debug": dbFlag, "--version": dbFlag, "--help": dbFlag,
		"-u": dbValue, "--username": dbValue, "-p": dbValue, "--password": dbValue, "-k": dbValue, "--keyspace": dbValue,
		"--cqlversion": dbValue, "--connect-timeout": dbValue, "--request-timeout": dbValue, "--encoding": dbValue,
		"-e": dbSQL, "--execute": dbSQL,
	}
	mongoOptions = map[string]dbOpt{
		"--quiet": dbFlag, "--norc": dbFlag, "--nodb": dbFlag, "--tls": dbFlag, "--ssl": dbFlag, "--verbose": dbFlag,
		"--version": dbFlag, "--help": dbFlag, "--json": dbFlag,
		"--host": dbValue, "--port": dbValue, "-u": dbValue, "--username": dbValue, "-p": dbValue, "--password": dbValue,
		"--authenticationDatabase": dbValue, "--authenticationMechanism": dbValue, "--tlsCAFile": dbValue, "--apiVersion": dbValue,
		"--eval": dbSQL,
	}
)

func dbOptionTable(base string) (map[string]dbOpt, bool) {
	switch base {
	case "psql":
		return psqlOptions, true
	case "mysql", "mariadb":
		return mysqlOptions, true
	case "clickhouse-client":
		return clickhouseOptions, true
	case "cqlsh":
		return cqlshOptions, true
	case "mongosh", "mongo":
		return mongoOptions, true
	}
	return nil, false
}

// sqlOpts is what the options said besides the statements.
type sqlOpts struct {
	vars bool // psql variables were set
}

// sqlTexts collects the statements a database client is given: the values
// of its statement options, its statement operands (sqlite3, duckdb), and
// a here-document. ok is false when the client may run statements the
// parser cannot read, or its options may write: an option that is not
// known to only read, a script file, a start-up file, a dynamic option.
func sqlTexts(c *Command, base string) (texts []string, o sqlOpts, ok bool) {
	args := c.Argv[1:]
	sqlite := base == "sqlite3" || base == "duckdb"
	table, _ := dbOptionTable(base)
	if sqlite {
		table = nil
	}
	var operands []Arg
	for i := 0; i < len(args); i++ {
		a := args[i]
		v := a.Value
		if a.Dynamic {
			if len(operands) == 0 && !strings.HasPrefix(v, "-") {
				operands = append(operands, a) // the database, named at run time
				continue
			}
			return nil, o, false
		}
		if v == "--" {
			operands = append(operands, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(v, "-") || v == "-" {
			operands = append(operands, a)
			continue
		}
		var kind dbOpt
		var val *Arg
		switch {
		case sqlite:
			name := strings.TrimPrefix(strings.TrimPrefix(v, "-"), "-")
			kind = sqliteOptions[name]
		case strings.HasPrefix(v, "--") && strings.Contains(v, "="):
			name, rest, _ := strings.Cut(v, "=")
			kind = table[name]
			val = &Arg{Value: rest}
			if kind == dbFlag && base == "mysql" || kind == dbFlag && base == "mariadb" {
				kind = dbValue // --password=x
			}
		case table[v] != 0:
			kind = table[v]
		case !strings.HasPrefix(v, "--") && len(v) > 2:
			// Bundled short options, the last of which may take a value
			// glued on or in the next word: -At, -cSELECT, -Ne 'select 1'.
			kind, val = bundled(table, base, v)
		}
		if kind == 0 {
			return nil, o, false
		}
		if kind == dbFlag || kind == dbList {
			if kind == dbList {
				texts = append(texts, "select 1")
			}
			continue
		}
		if val == nil {
			if i+1 >= len(args) {
				return nil, o, false
			}
			i++
			val = &args[i]
		}
		switch kind {
		case dbSQL:
			if val.Dynamic {
				return nil, o, false
			}
			texts = append(texts, val.Value)
		case dbVar:
			o.vars = true
		}
	}
	if sqlite {
		for _, a := range operands[min(1, len(operands)):] {
			if a.Dynamic {
				return nil, o, false
			}
			texts = append(texts, a.Value)
		}
	} else if base == "mongosh" || base == "mongo" {
		for k, a := range operands {
			if k > 0 || strings.HasSuffix(a.Value, ".js") {
				return nil, o, false // a script file to run
			}
		}
	}
	if c.Stdin != "" {
		texts = append(texts, c.Stdin)
	}
	return texts, o, true
}

// bundled reads a word of bundled short options (getopt's -At, -cSQL):
// what its last option is, and the value glued on, if any. kind is 0 when
// some letter is not a known option.
func bundled(table map[string]dbOpt, base, v string) (dbOpt, *Arg) {
	kind := dbFlag
	for j := 1; j < len(v); j++ {
		k := table["-"+v[j:j+1]]
		if (base == "mysql" || base == "mariadb") && v[j] == 'p' {
			return dbFlag, nil // -pSECRET
		}
		switch k {
		case 0:
			return 0, nil
		case dbFlag, dbList:
			continue
		}
		if j+1 < len(v) {
			return k, &Arg{Value: v[j+1:]}
		}
		kind = k
	}
	return kind, nil
}
