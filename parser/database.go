package parser

import (
	"path"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// A dbTool is what the parser knows of one database program: the server
// it talks to, how its command line names that server, and how to read
// what it runs there. [dbTools] is the one table of them, so that a new
// client is one row; the policy's rules then name it.
type dbTool struct {
	name string
	// kind is the server: a kind of service (postgres, mysql, redis,
	// mongodb), or cassandra, clickhouse, sqlite, duckdb. It gives the
	// environment that names the server ([serverVars]).
	kind string
	// hostOptions: the tool names its server with -h HOST, -hHOST, --host
	// or -H, or a URL, and its other words name none ([Command.Hosts]).
	hostOptions bool
	// servers: the environment, a connection string and the operand
	// below name its server too ([walker.dbHosts]).
	servers bool
	// operand is what its first operand names.
	operand dbOperand
	// gluedDB: -dNAME is the database (and may be a connection string),
	// as with -d NAME.
	gluedDB bool
	// reads is how to read what it runs, if the parser can: SQL in
	// dialect, JavaScript, redis commands.
	reads   dbReader
	dialect string // for SQL: the client sql.go reads it as (psql, mysql, sqlite3, …)
	// file: the database is a file, the first operand (sqlite3, duckdb).
	file bool
	// options are its options that only read ([dbOpt]); nil for a file
	// database, whose options are sqliteOptions.
	options map[string]dbOpt
}

// dbOperand is what a database tool's first operand names.
type dbOperand uint8

const (
	noOperand   dbOperand = iota
	conninfoOp            // the database, or a libpq connection string
	mongoAddrOp           // [host[:port]/]db, or a .js file to run
	cqlshHostOp           // the host
)

// dbReader is how the parser reads what a database tool runs.
type dbReader uint8

const (
	noReader    dbReader = iota
	sqlReader            // SQL: statement options, operands, a here-document
	mongoReader          // JavaScript for mongosh
	redisReader          // redis commands as arguments
)

var dbTools = []dbTool{
	{name: "psql", kind: "postgres", hostOptions: true, servers: true, operand: conninfoOp, gluedDB: true, reads: sqlReader, dialect: "psql", options: psqlOptions},
	{name: "pg_dump", kind: "postgres", hostOptions: true, servers: true, operand: conninfoOp, gluedDB: true},
	{name: "pg_dumpall", kind: "postgres", hostOptions: true, servers: true, gluedDB: true},
	{name: "pg_restore", kind: "postgres", hostOptions: true, servers: true, gluedDB: true},
	{name: "pg_isready", kind: "postgres", hostOptions: true, servers: true, operand: conninfoOp, gluedDB: true},
	{name: "createdb", kind: "postgres", hostOptions: true, servers: true, operand: conninfoOp},
	{name: "dropdb", kind: "postgres", hostOptions: true, servers: true, operand: conninfoOp},
	{name: "createuser", kind: "postgres", hostOptions: true, servers: true},
	{name: "dropuser", kind: "postgres", hostOptions: true, servers: true},
	{name: "vacuumdb", kind: "postgres", servers: true, operand: conninfoOp},
	{name: "reindexdb", kind: "postgres", servers: true, operand: conninfoOp},
	{name: "clusterdb", kind: "postgres", servers: true, operand: conninfoOp},
	{name: "pgbench", kind: "postgres", servers: true, operand: conninfoOp},
	{name: "mysql", kind: "mysql", hostOptions: true, servers: true, reads: sqlReader, dialect: "mysql", options: mysqlOptions},
	{name: "mariadb", kind: "mysql", hostOptions: true, servers: true, reads: sqlReader, dialect: "mysql", options: mysqlOptions},
	{name: "mysqldump", kind: "mysql", hostOptions: true, servers: true},
	{name: "mariadb-dump", kind: "mysql", servers: true},
	{name: "mysqladmin", kind: "mysql", hostOptions: true, servers: true},
	{name: "mysqlimport", kind: "mysql", servers: true},
	{name: "mysqlshow", kind: "mysql", servers: true},
	{name: "mysqlcheck", kind: "mysql", servers: true},
	{name: "cqlsh", kind: "cassandra", hostOptions: true, servers: true, operand: cqlshHostOp, reads: sqlReader, dialect: "cqlsh", options: cqlshOptions},
	{name: "clickhouse-client", kind: "clickhouse", hostOptions: true, servers: true, reads: sqlReader, dialect: "clickhouse-client", options: clickhouseOptions},
	{name: "mongosh", kind: "mongodb", hostOptions: true, servers: true, operand: mongoAddrOp, reads: mongoReader, options: mongoOptions},
	{name: "mongo", kind: "mongodb", hostOptions: true, servers: true, operand: mongoAddrOp, reads: mongoReader, options: mongoOptions},
	{name: "mongodump", kind: "mongodb", hostOptions: true},
	{name: "mongorestore", kind: "mongodb", hostOptions: true},
	{name: "mongoimport", kind: "mongodb", hostOptions: true},
	{name: "mongoexport", kind: "mongodb", hostOptions: true},
	{name: "redis-cli", kind: "redis", hostOptions: true, servers: true, reads: redisReader},
	{name: "sqlite3", kind: "sqlite", servers: true, reads: sqlReader, dialect: "sqlite3", file: true},
	{name: "duckdb", kind: "duckdb", servers: true, reads: sqlReader, dialect: "duckdb", file: true},
}

// dbToolFor returns the database tool named base.
func dbToolFor(base string) (dbTool, bool) {
	for i := range dbTools {
		if dbTools[i].name == base {
			return dbTools[i], true
		}
	}
	return dbTool{}, false
}

// serverVars are the environment variables that name the server of a
// kind, when no option does. A value the parser does not know
// (PGSERVICE names an entry of a file) is reported as a dynamic host:
// the server may be remote.
func serverVars(kind string) (hosts, indirect []string) {
	switch kind {
	case "postgres":
		return []string{"PGHOST", "PGHOSTADDR"}, []string{"PGSERVICE", "PGSERVICEFILE"}
	case "mysql":
		return []string{"MYSQL_HOST"}, []string{"MYSQL_TEST_LOGIN_FILE"}
	case "cassandra":
		return []string{"CQLSH_HOST"}, nil
	case "clickhouse":
		return []string{"CLICKHOUSE_HOST"}, nil
	}
	return nil, nil
}

// portSyntax is how a client of kind names the TCP port of its server:
// its short and long options, its variable, and the default. ok is false
// for a kind whose port the parser does not read.
func portSyntax(kind string) (short, long, env string, def int, ok bool) {
	switch kind {
	case "postgres":
		return "-p", "--port", "PGPORT", 5432, true
	case "mysql":
		return "-P", "--port", "MYSQL_TCP_PORT", 3306, true
	case "redis":
		return "-p", "", "", 6379, true
	}
	return "", "", "", 0, false
}

// server sets c.Server for a database tool, once c.Hosts are known.
func (w *walker) server(c *Command) {
	if len(c.Argv) == 0 || c.Argv[0].Dynamic {
		return
	}
	t, ok := dbToolFor(path.Base(c.Argv[0].Value))
	if !ok {
		return
	}
	c.Server = &Server{Kind: t.kind}
	short, long, env, def, ok := portSyntax(t.kind)
	if !ok || len(c.Wrappers) > 0 {
		return
	}
	tcp := false // mysql: a host that makes it connect by TCP
	for _, h := range c.Hosts {
		if h.Dynamic || !h.Loopback || strings.HasPrefix(h.Value, "/") || strings.Contains(h.Value, ":") && !strings.Contains(h.Value, "::") {
			return // another machine, a socket, a URL, host:port
		}
		tcp = tcp || h.Value != "localhost"
	}
	port := 0
	args := c.Argv[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		v := ""
		switch {
		case a.Dynamic, strings.Contains(a.Value, "://"):
			return // a URL names its own port
		case a.Value == "-S" || a.Value == "--socket" || strings.HasPrefix(a.Value, "--socket=") || t.kind == "redis" && (a.Value == "-s" || a.Value == "-u"):
			return
		case strings.EqualFold(a.Value, "--protocol=tcp") || a.Value == "--protocol" && i+1 < len(args) && strings.EqualFold(args[i+1].Value, "tcp"):
			tcp = true
			continue
		case a.Value == short || long != "" && a.Value == long:
			if i+1 >= len(args) || args[i+1].Dynamic {
				return
			}
			i++
			v = args[i].Value
		case strings.HasPrefix(a.Value, short) && len(a.Value) > len(short) && !strings.HasPrefix(a.Value, "--"):
			v = a.Value[len(short):]
		case long != "" && strings.HasPrefix(a.Value, long+"="):
			v = a.Value[len(long)+1:]
		case strings.Contains(a.Value, "port=") || strings.Contains(a.Value, "service="):
			return // a connection string: -d "host=db port=5433"
		default:
			continue
		}
		if port = portNumber(v); port == 0 {
			return
		}
	}
	if port == 0 && env != "" {
		if _, own := c.EnvValues[env]; own {
			return // the step's own port (PGPORT=… psql): not read
		}
		if _, own := w.st.vars.get(env); own {
			return // export PGPORT=…, read PGPORT
		}
		if v, set := w.opts.Env[env]; set {
			if port = portNumber(v); port == 0 {
				return
			}
		}
	}
	if t.kind == "mysql" && !tcp {
		return // localhost is the default socket, whatever the port
	}
	if port == 0 {
		port = def
	}
	c.Server.Port = port
}

// portNumber returns the TCP port v names, or 0.
func portNumber(v string) int {
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 || n > 65535 {
		return 0
	}
	return n
}

// dbHosts adds to c.Hosts the servers a database tool is given other
// than by -h or a URL (which its words say; hosts.go): a libpq
// conninfo string as the database name, the environment, a mongosh or
// cqlsh address operand, an option file.
func (w *walker) dbHosts(c *Command, t dbTool) {
	hostVars, indirect := serverVars(t.kind)
	for _, name := range hostVars {
		if v, set, known := w.childVar(c, name); set {
			c.Hosts = append(c.Hosts, server(v, !known))
		}
	}
	for _, name := range indirect {
		if v, set, _ := w.childVar(c, name); set {
			c.Hosts = append(c.Hosts, Host{Value: "$" + name + "=" + v, Dynamic: true})
		}
	}
	args := c.Argv[1:]
	conninfo := func(a Arg) {
		if a.Dynamic {
			// "$DATABASE_URL": any server.
			c.Hosts = append(c.Hosts, Host{Value: a.Value, Dynamic: true})
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
		case strings.HasPrefix(v, "-d") && len(v) > 2 && t.gluedDB:
			conninfo(Arg{Value: v[2:]})
		case strings.HasPrefix(v, "--defaults-file") || strings.HasPrefix(v, "--defaults-extra-file") || strings.HasPrefix(v, "--login-path") || strings.HasPrefix(v, "--cqlshrc") || strings.HasPrefix(v, "--config-file"):
			// The server is named in a file.
			c.Hosts = append(c.Hosts, Host{Value: v, Dynamic: true})
		case strings.HasPrefix(v, "-"):
			if dbValueOption(t, v) {
				i++
			}
		default:
			if operand == 0 {
				switch t.operand {
				case conninfoOp:
					conninfo(a)
				case mongoAddrOp:
					if h, _, ok := strings.Cut(v, "/"); ok && !strings.HasSuffix(v, ".js") {
						c.Hosts = append(c.Hosts, server(h, false))
					}
				case cqlshHostOp:
					c.Hosts = append(c.Hosts, server(v, false))
				}
			}
			operand++
		}
	}
}

// dbValueOption reports whether a database tool's option takes the next
// word as its value, for finding the operands.
func dbValueOption(t dbTool, v string) bool {
	if strings.Contains(v, "=") {
		return false
	}
	if k, ok := t.options[v]; ok {
		return k != dbFlag
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
// one of the words that name servers (hosts.go).
func conninfoHosts(s string) []Host {
	if !strings.Contains(s, "=") || strings.Contains(s, "://") {
		return nil
	}
	var out []Host
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
					out = append(out, server(h, false))
				}
			}
		case "service", "servicefile":
			out = append(out, Host{Value: kv, Dynamic: true})
		}
	}
	return out
}

// database says whether the statements a database client runs only read.
// A file database (sqlite3, duckdb) writes its file when they may write.
func (w *walker) database(s *syntax.Stmt, c *Command, t dbTool) {
	c.SQL = "write"
	if t.reads == redisReader {
		if redisReadOnly(c.Argv[1:]) {
			c.SQL = "read-only"
		}
		return
	}
	texts, opts, ok := sqlTexts(c, t)
	if ok && len(texts) > 0 {
		ro := true
		for _, text := range texts {
			if t.reads == mongoReader {
				ro = ro && mongoReadOnly(text)
			} else {
				ro = ro && sqlReadOnly(text, t.dialect, opts.vars)
			}
			if strings.Contains(text, "://") {
				c.Network = true // read_csv('https://…'), url(…)
			}
		}
		if ro {
			c.SQL = "read-only"
		}
	}
	if t.file && c.SQL == "write" {
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

// sqlOpts is what the options said besides the statements.
type sqlOpts struct {
	vars bool // psql variables were set
}

// sqlTexts collects the statements a database client is given: the values
// of its statement options, its statement operands (sqlite3, duckdb), and
// a here-document. ok is false when the client may run statements the
// parser cannot read, or its options may write: an option that is not
// known to only read, a script file, a start-up file, a dynamic option.
func sqlTexts(c *Command, t dbTool) (texts []string, o sqlOpts, ok bool) {
	args := c.Argv[1:]
	sqlite := t.file
	table := t.options
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
			if kind == dbFlag && t.dialect == "mysql" {
				kind = dbValue // --password=x
			}
		case table[v] != 0:
			kind = table[v]
		case !strings.HasPrefix(v, "--") && len(v) > 2:
			// Bundled short options, the last of which may take a value
			// glued on or in the next word: -At, -cSELECT, -Ne 'select 1'.
			kind, val = bundled(table, t.dialect, v)
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
	} else if t.reads == mongoReader {
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
func bundled(table map[string]dbOpt, dialect, v string) (dbOpt, *Arg) {
	kind := dbFlag
	for j := 1; j < len(v); j++ {
		k := table["-"+v[j:j+1]]
		if dialect == "mysql" && v[j] == 'p' {
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
