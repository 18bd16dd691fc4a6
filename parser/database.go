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

// database says whether the statements a database client runs only read.
// sqlite3 and duckdb write their database file when they may write.
func (w *walker) database(s *syntax.Stmt, c *Command, base string) {
	c.SQL = "write"
	if base == "redis-cli" {
		if c.Sub > 0 && !c.Argv[c.Sub].Dynamic && redisReadOnly(c.Argv[c.Sub].Value) {
			c.SQL = "read-only"
		}
		return
	}
	texts, ok := sqlTexts(c, base)
	if ok && len(texts) > 0 {
		ro := true
		for _, t := range texts {
			if base == "mongosh" || base == "mongo" {
				ro = ro && mongoReadOnly(t)
			} else {
				ro = ro && sqlReadOnly(t)
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
			switch a.Value {
			case "-cmd", "-separator", "-newline", "-nullvalue", "-init", "-vfs":
				i++
			}
			continue
		}
		return a, true
	}
	return Arg{}, false
}

// sqlTexts collects the statements a database client is given: its -c or
// -e options, the SQL operands of sqlite3, and a here-document.
func sqlTexts(c *Command, base string) ([]string, bool) {
	args := c.Argv[1:]
	var texts []string
	for i, a := range args {
		v := a.Value
		var val *Arg
		switch {
		case v == "-c" || v == "--command" || v == "-e" || v == "--execute" || v == "--query" || v == "--eval" || base == "clickhouse-client" && v == "-q":
			if i+1 < len(args) {
				val = &args[i+1]
			}
		case strings.HasPrefix(v, "--command=") || strings.HasPrefix(v, "--execute=") || strings.HasPrefix(v, "--query=") || strings.HasPrefix(v, "--eval="):
			_, rest, _ := strings.Cut(v, "=")
			val = &Arg{Value: rest, Dynamic: a.Dynamic}
		case v == "-f" || v == "--file" || v == "-cmd" || v == "-init" || v == "--init-command":
			return nil, false // statements in a file, or run first
		case (v == "-l" || v == "--list") && base == "psql":
			texts = append(texts, "select 1")
		}
		if val != nil {
			if val.Dynamic {
				return nil, false
			}
			texts = append(texts, val.Value)
		}
	}
	if base == "sqlite3" || base == "duckdb" {
		var ops []Arg
		for i := 0; i < len(args); i++ {
			a := args[i]
			if !a.Dynamic && strings.HasPrefix(a.Value, "-") {
				switch a.Value {
				case "-separator", "-newline", "-nullvalue", "-vfs":
					i++
				}
				continue
			}
			ops = append(ops, a)
		}
		for _, a := range ops[min(1, len(ops)):] {
			if a.Dynamic {
				return nil, false
			}
			texts = append(texts, a.Value)
		}
	}
	if c.Stdin != "" {
		texts = append(texts, c.Stdin)
	}
	return texts, true
}

var (
	sqlWrite = lazyRE(`(?i)\b(insert|update|delete|drop|create|alter|truncate|grant|revoke|copy|merge|call|do|vacuum|reindex|cluster|refresh|lock|comment|replace|attach|detach|load|import|into|upsert|rename|set|reset|analyze|discard|listen|notify|execute|prepare|savepoint|release|checkpoint|security|install|unlock|flush|kill|shutdown|handler|optimize|repair|nextval|setval|pg_(terminate_backend|cancel_backend|reload_conf|rotate_logfile|switch_wal|promote|create_\w+|drop_\w+|replication_\w+|file_\w+|logical_\w+|advisory_\w+|read_file|write_file)|dblink\w*|lo_\w+)\b`)
	sqlLead  = lazyRE(`(?i)^\s*(select|show|explain|describe|desc|with|values|table|pragma|begin|commit|rollback|end|\\d\S*|\\l\S*|\\conninfo|\\x|\\timing|\\q|\\\?|\.tables|\.schema|\.indexes|\.headers|\.mode|\.dump|\.databases|\.quit|\.width|\.help)\b`)
	sqlQuote = lazyRE(`'([^']|'')*'|"[^"]*"`)
)

// sqlReadOnly checks SQL cheaply: every statement starts with a reading
// keyword and none holds a writing keyword or function outside quotes.
func sqlReadOnly(sql string) bool {
	blank := sqlQuote().ReplaceAllString(sql, "''")
	for _, stmt := range strings.Split(blank, ";") {
		for _, line := range strings.Split(stmt, "\n") {
			t := strings.TrimSpace(line)
			if (strings.HasPrefix(t, "\\") || strings.HasPrefix(t, ".")) && !sqlLead().MatchString(t) {
				return false // a client command such as \copy, \! or .output
			}
		}
		st := strings.TrimSpace(stmt)
		if st == "" {
			continue
		}
		if !sqlLead().MatchString(st) || sqlWrite().MatchString(st) {
			return false
		}
		if strings.Contains(strings.ToLower(st), "pragma") && strings.Contains(st, "=") {
			return false
		}
	}
	return true
}

var mongoRead = lazyRE(`^[\s\w.$()'"{}:,\[\]-]*\.(find|findOne|count|countDocuments|estimatedDocumentCount|aggregate|distinct|getIndexes|stats|getCollectionNames|listCollections|explain)\(`)

func mongoReadOnly(js string) bool {
	if strings.ContainsAny(js, ";\n") || strings.Contains(js, "$out") || strings.Contains(js, "$merge") {
		return false
	}
	return mongoRead().MatchString(js) || strings.TrimSpace(js) == "db.version()" || strings.TrimSpace(js) == "show dbs"
}

func redisReadOnly(cmd string) bool {
	switch strings.ToLower(cmd) {
	case "get", "mget", "keys", "scan", "exists", "ttl", "pttl", "type", "strlen", "getrange",
		"hget", "hgetall", "hkeys", "hvals", "hlen", "hexists", "hmget", "hscan", "lrange", "llen",
		"lindex", "smembers", "scard", "sismember", "smismember", "sscan", "zrange", "zrangebyscore",
		"zrevrange", "zcard", "zscore", "zrank", "zscan", "zcount", "info", "ping", "dbsize", "echo",
		"time", "lastsave", "memory", "object", "xlen", "xrange", "xrevrange", "xinfo", "pfcount",
		"bitcount", "getbit", "geopos", "geodist", "slowlog", "latency", "command",
		"role", "randomkey", "dump", "--stat", "--bigkeys", "--memkeys", "monitor":
		return true
	}
	return false
}
