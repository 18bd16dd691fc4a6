package parser

import (
	"strings"
)

// sqlReadOnly reports whether SQL only reads, as the client dialect
// names ([dbTool].dialect: psql, mysql, sqlite3, duckdb, …) reads it. It
// holds when every statement starts with a reading keyword, names no
// writing keyword, calls only functions known to be pure, and uses only
// the client commands (psql's \d, sqlite3's .tables) that print. The
// text is read both with and without backslash escapes in quotes (a
// dialect may take either), and each reading must pass.
func sqlReadOnly(sql, dialect string, vars bool) bool {
	for _, esc := range []bool{false, true} {
		blank, ok := sqlBlank(sql, dialect, esc)
		if !ok || !sqlBlankReadOnly(blank, dialect, vars) {
			return false
		}
	}
	return true
}

// sqlBlank returns sql with its string literals emptied (”) and its
// comments made blanks, keeping quoted identifiers as plain words. ok is
// false when a quote or comment does not end, or a comment may run
// (MySQL's /*! … */).
func sqlBlank(sql, dialect string, esc bool) (string, bool) {
	var b strings.Builder
	mysql := dialect == "mysql"
	for i := 0; i < len(sql); i++ {
		ch := sql[i]
		switch {
		case ch == '\'' || ch == '"' || ch == '`' && dialect != "psql" || ch == '[' && dialect == "sqlite3":
			end := ch
			if ch == '[' {
				end = ']'
			}
			j := i + 1
			var lit strings.Builder
			for ; j < len(sql); j++ {
				if esc && sql[j] == '\\' && ch != '[' {
					j++
					continue
				}
				if sql[j] == end {
					if end != ']' && j+1 < len(sql) && sql[j+1] == end {
						j++
						lit.WriteByte(end)
						continue
					}
					break
				}
				lit.WriteByte(sql[j])
			}
			if j >= len(sql) {
				return "", false
			}
			if ch == '\'' {
				b.WriteString("''")
			} else {
				// A quoted name is still a name: "writefile"(…) calls it.
				b.WriteString(" " + sqlWord(lit.String()) + " ")
			}
			i = j
		case ch == '-' && i+1 < len(sql) && sql[i+1] == '-', ch == '#' && mysql:
			j := strings.IndexByte(sql[i:], '\n')
			if j < 0 {
				return b.String(), true
			}
			b.WriteByte(' ')
			i += j - 1
		case ch == '/' && i+1 < len(sql) && sql[i+1] == '*':
			if mysql && i+2 < len(sql) && sql[i+2] == '!' {
				return "", false
			}
			j := strings.Index(sql[i+2:], "*/")
			if j < 0 {
				return "", false
			}
			b.WriteByte(' ')
			i += j + 3
		case ch == '$' && dialect == "psql":
			// $tag$ … $tag$
			k := i + 1
			for k < len(sql) && (isWordByte(sql[k]) && !(sql[k] >= '0' && sql[k] <= '9' && k == i+1)) {
				k++
			}
			if k >= len(sql) || sql[k] != '$' {
				b.WriteByte(ch)
				continue
			}
			tag := sql[i : k+1]
			j := strings.Index(sql[k+1:], tag)
			if j < 0 {
				return "", false
			}
			b.WriteString("''")
			i = k + 1 + j + len(tag) - 1
		default:
			b.WriteByte(ch)
		}
	}
	return b.String(), true
}

// sqlWord makes a quoted identifier a word: itself when it is one, else a
// name no rule knows.
func sqlWord(s string) string {
	for i := 0; i < len(s); i++ {
		if !isWordByte(s[i]) {
			return "quoted_name"
		}
	}
	if s == "" {
		return "quoted_name"
	}
	return s
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

var (
	sqlWrite = lazyRE(`(?i)\b(insert|update|delete|drop|create|alter|truncate|grant|revoke|copy|merge|call|do|vacuum|reindex|cluster|refresh|lock|comment|replace|attach|detach|load|import|export|into|upsert|rename|set|reset|analyze|discard|listen|notify|execute|prepare|savepoint|release|checkpoint|security|install|unlock|flush|kill|shutdown|handler|optimize|repair|outfile|dumpfile)\b`)
	sqlLead  = lazyRE(`(?i)^\s*(select|show|explain|describe|desc|with|values|table|pragma|begin|commit|rollback|end|use|summarize|from)\b`)
	sqlCall  = lazyRE(`([A-Za-z_][\w$]*)\s*\(`)
	sqlVarRE = lazyRE(`(^|[^:\w]):(['"]?[A-Za-z_{])`)
)

// sqlBlankReadOnly checks SQL whose literals sqlBlank emptied.
func sqlBlankReadOnly(blank, dialect string, vars bool) bool {
	if !sqlClientCommands(blank, dialect) {
		return false
	}
	if dialect == "psql" {
		if strings.ContainsRune(blank, '`') {
			return false // a meta-command's argument in backquotes runs a shell
		}
		if vars && sqlVarRE().MatchString(blank) {
			return false // :name is the text of a variable the command line set
		}
		var ok bool
		if blank, ok = psqlStrip(blank); !ok {
			return false
		}
	}
	if dialect == "mysql" {
		blank = strings.NewReplacer(`\G`, ";", `\g`, ";").Replace(blank)
	}
	for _, stmt := range strings.Split(blank, ";") {
		st := strings.TrimSpace(sqlDotLines(stmt, dialect))
		if st == "" {
			continue
		}
		if !sqlLead().MatchString(st) || sqlWrite().MatchString(st) {
			return false
		}
		if first := strings.ToLower(strings.Fields(st)[0]); first == "pragma" {
			if !pragmaReadOnly(st) {
				return false
			}
			continue
		}
		if strings.Contains(st, "]") && sqlCallAfterBracket().MatchString(st) {
			return false
		}
		for _, m := range sqlCall().FindAllStringSubmatch(st, -1) {
			name := strings.ToLower(m[1])
			if !sqlKeywords[name] && !sqlPureFuncs[name] {
				return false
			}
		}
	}
	return true
}

var sqlCallAfterBracket = lazyRE(`\]\s*\(`)

// psqlPrint are psql's meta-commands that only print or change how
// results look. \g and \gx, which run the query buffer, are among them
// only with no argument (\g FILE writes, \g |CMD runs a shell).
var psqlPrint = map[string]bool{
	"l": true, "l+": true, "list": true, "list+": true, "sf": true, "sf+": true, "sv": true, "sv+": true,
	"z": true, "x": true, "a": true, "t": true, "H": true, "C": true, "timing": true, "conninfo": true,
	"q": true, "quit": true, "?": true, "echo": true, "qecho": true, "warn": true, "p": true, "r": true,
	"encoding": true, "errverbose": true, "copyright": true, "pset": true, "g": true, "gx": true,
	"gdesc": true, "\\": true,
}

// psqlStrip takes psql's meta-commands out of blanked text, each to the
// end of its line or the next \\, and reports whether all of them only
// print.
func psqlStrip(blank string) (string, bool) {
	var b strings.Builder
	for {
		i := strings.IndexByte(blank, '\\')
		if i < 0 {
			b.WriteString(blank)
			return b.String(), true
		}
		b.WriteString(blank[:i])
		b.WriteByte(';')
		rest := blank[i+1:]
		n := 0
		for n < len(rest) && (rest[n] >= 'a' && rest[n] <= 'z' || rest[n] >= 'A' && rest[n] <= 'Z') {
			n++
		}
		if n == 0 && rest != "" {
			n = 1 // \!, \?, \\, \.
		}
		if n < len(rest) && rest[n] == '+' {
			n++
		}
		name := rest[:n]
		end := len(rest)
		if j := strings.IndexAny(rest[n:], "\n\\"); j >= 0 {
			end = n + j
		}
		arg := strings.TrimSpace(rest[n:end])
		describe := strings.HasPrefix(name, "d") && n > 0
		if !describe && !psqlPrint[name] || (name == "g" || name == "gx") && arg != "" {
			return "", false
		}
		blank = rest[end:]
	}
}

// sqlClientCommands checks the commands of the client itself, which run
// wherever they appear: psql's backslash commands, mysql's, and
// sqlite3's dot-commands at the start of a line.
func sqlClientCommands(blank, dialect string) bool {
	switch dialect {
	case "mysql":
		for i := strings.IndexByte(blank, '\\'); i >= 0; i = strings.IndexByte(blank, '\\') {
			if i+1 >= len(blank) || strings.IndexByte("Ggcq", blank[i+1]) < 0 {
				return false // \! runs a shell, \T tees, \. sources, \P pages
			}
			blank = blank[i+2:]
		}
	case "sqlite3", "duckdb":
		for _, line := range strings.Split(blank, "\n") {
			t := strings.TrimSpace(line)
			if !strings.HasPrefix(t, ".") {
				continue
			}
			name := strings.TrimPrefix(strings.Fields(t)[0], ".")
			if !sqliteDotRead[name] {
				return false // .output, .once, .shell, .import, .save, .read, .load…
			}
		}
	}
	return true
}

// sqlDotLines drops sqlite3's dot-command lines (checked already).
func sqlDotLines(stmt, dialect string) string {
	if dialect != "sqlite3" && dialect != "duckdb" || !strings.Contains(stmt, ".") {
		return stmt
	}
	lines := strings.Split(stmt, "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), ".") {
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n")
}

var sqliteDotRead = map[string]bool{
	"tables": true, "schema": true, "indexes": true, "indices": true, "headers": true, "header": true,
	"mode": true, "dump": true, "databases": true, "quit": true, "exit": true, "width": true,
	"help": true, "show": true, "timer": true, "dbinfo": true, "fullschema": true, "eqp": true,
	"nullvalue": true, "separator": true, "print": true, "version": true, "changes": true, "echo": true,
	"bail": true, "columns": true,
}

// pragmaReadOnly reports whether a PRAGMA statement only reads: a getter
// with no value, or a query pragma given a name. A pragma given a value
// (= v, or (v) for a setter) changes the database or the connection.
func pragmaReadOnly(st string) bool {
	rest := strings.TrimSpace(st[len("pragma"):])
	name, arg := rest, ""
	if i := strings.IndexAny(rest, "=("); i >= 0 {
		name, arg = strings.TrimSpace(rest[:i]), rest[i:]
	}
	if j := strings.LastIndexByte(name, '.'); j >= 0 {
		name = name[j+1:] // schema.name
	}
	name = strings.ToLower(name)
	switch {
	case arg == "":
		return pragmaGetters[name] || pragmaQueries[name]
	case strings.HasPrefix(arg, "("):
		return pragmaQueries[name]
	}
	return false
}

var pragmaGetters = map[string]bool{
	"application_id": true, "auto_vacuum": true, "automatic_index": true, "busy_timeout": true,
	"cache_size": true, "cache_spill": true, "cell_size_check": true, "checkpoint_fullfsync": true,
	"collation_list": true, "compile_options": true, "data_version": true, "database_list": true,
	"encoding": true, "foreign_keys": true, "freelist_count": true, "fullfsync": true,
	"function_list": true, "journal_mode": true, "journal_size_limit": true, "locking_mode": true,
	"max_page_count": true, "mmap_size": true, "module_list": true, "page_count": true, "page_size": true,
	"pragma_list": true, "query_only": true, "recursive_triggers": true, "schema_version": true,
	"secure_delete": true, "synchronous": true, "temp_store": true, "threads": true,
	"trusted_schema": true, "user_version": true, "wal_autocheckpoint": true, "table_list": true,
	// duckdb
	"show_tables": true, "show_tables_expanded": true, "version": true, "platform": true,
	"database_size": true, "functions": true, "collations": true, "user_agent": true,
}

// pragmaQueries take a table, index or schema name and print about it.
var pragmaQueries = map[string]bool{
	"table_info": true, "table_xinfo": true, "table_list": true, "index_list": true, "index_info": true,
	"index_xinfo": true, "foreign_key_list": true, "foreign_key_check": true, "integrity_check": true,
	"quick_check": true, "storage_info": true, "show": true,
}

// sqlKeywords are words a parenthesis may follow that are not calls.
var sqlKeywords = map[string]bool{
	"in": true, "exists": true, "values": true, "over": true, "as": true, "from": true, "join": true,
	"using": true, "filter": true, "any": true, "all": true, "some": true, "and": true, "or": true,
	"not": true, "on": true, "where": true, "when": true, "then": true, "else": true, "select": true,
	"by": true, "within": true, "lateral": true, "table": true, "row": true, "array": true, "distinct": true,
	"union": true, "intersect": true, "except": true, "having": true, "limit": true, "offset": true,
	"with": true, "recursive": true, "is": true, "like": true, "ilike": true, "between": true,
	"window": true, "rows": true, "range": true, "groups": true, "materialized": true, "explain": true,
	"describe": true, "desc": true, "asc": true, "case": true, "interval": true, "top": true, "inner": true,
	"outer": true, "left": true, "right": true, "full": true, "cross": true, "natural": true, "group": true,
	"order": true, "partition": true, "escape": true, "similar": true, "of": true, "summarize": true,
}

// sqlPureFuncs are built-in functions that compute a value from their
// arguments, or read the catalogue or a file, and change nothing. Any
// other call (writefile, edit, load_extension, pg_read_binary_file's
// writing cousins, a user's function that may do anything) is a write.
var sqlPureFuncs = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range strings.Fields(`
count sum avg min max abs round floor ceil ceiling length char_length character_length octet_length
bit_length lower upper trim ltrim rtrim btrim substr substring concat concat_ws coalesce nullif ifnull
isnull nvl greatest least cast convert now current_date current_timestamp current_time localtime
localtimestamp date time datetime julianday unixepoch strftime date_trunc date_part extract age
to_char to_date to_timestamp to_number format printf instr position strpos left right lpad rpad
repeat reverse split_part regexp_replace regexp_matches regexp_match regexp_like regexp_substr
regexp_split_to_array regexp_split_to_table string_agg group_concat array_agg json_agg jsonb_agg
json_build_object jsonb_build_object json_build_array jsonb_build_array json_object json_array
json_extract json_each json_tree jsonb_each json_array_length jsonb_array_length json_typeof
jsonb_typeof jsonb_pretty json_object_keys jsonb_object_keys json_valid json_quote to_json to_jsonb
row_to_json json_group_array json_group_object row_number rank dense_rank lag lead first_value
last_value ntile percent_rank cume_dist nth_value typeof quote hex unhex random version
current_database current_schema current_schemas current_user session_user user database schema
pg_size_pretty pg_total_relation_size pg_relation_size pg_database_size pg_table_size
pg_indexes_size pg_column_size pg_typeof pg_backend_pid pg_is_in_recovery pg_postmaster_start_time
has_table_privilege has_schema_privilege has_database_privilege has_column_privilege
obj_description col_description shobj_description format_type pg_get_indexdef pg_get_viewdef
pg_get_constraintdef pg_get_functiondef pg_get_triggerdef pg_get_expr pg_get_userbyid
pg_get_serial_sequence pg_encoding_to_char pg_relation_filenode pg_table_is_visible
pg_last_xact_replay_timestamp pg_current_wal_lsn txid_current_snapshot inet_server_addr
inet_server_port array_length array_to_string array_position array_positions array_cat
array_append array_prepend array_remove array_dims array_lower array_upper unnest generate_series
string_to_array cardinality md5 sha1 sha2 sha224 sha256 sha384 sha512 encode decode initcap mod
power pow sqrt cbrt exp ln log log2 log10 sign trunc pi degrees radians sin cos tan asin acos atan
atan2 char chr ascii ord if iif nullifzero timestamp date_format from_unixtime unix_timestamp
datediff timestampdiff date_add date_sub adddate subdate curdate curtime sysdate utc_timestamp
found_rows last_insert_id last_insert_rowid changes total_changes sqlite_version sqlite_source_id
likely unlikely glob total median quantile quantile_cont quantile_disc percentile_cont
percentile_disc mode stddev stddev_pop stddev_samp variance var_pop var_samp bool_and bool_or
every bit_and bit_or bit_xor count_if any_value arbitrary list string_split split str_split
contains starts_with ends_with prefix suffix strlen uuid gen_random_uuid uuid_generate_v4
to_hex from_hex epoch epoch_ms make_date make_time make_timestamp dayname monthname year month day
hour minute second week weekday dayofweek dayofmonth dayofyear quarter last_day yearweek
date_diff datepart isodow isoyear justify_days justify_hours clock_timestamp statement_timestamp
transaction_timestamp timeofday num_nulls num_nonnulls width_bucket scale div nanvl
readfile read_csv read_csv_auto read_parquet parquet_scan read_json read_json_auto read_text
read_ndjson duckdb_tables duckdb_columns duckdb_schemas duckdb_databases duckdb_indexes
duckdb_views duckdb_functions duckdb_settings duckdb_extensions pragma_table_info
pragma_index_list pragma_foreign_key_list pragma_table_list uniq uniqexact tostring todate
todatetime tostartofday tostartofhour tostartofmonth formatreadablesize formatreadablequantity
totypename any anylast argmax argmin topk grouparray groupuniqarray tuple arrayjoin
splitbychar splitbystring lengthutf8 positioncaseinsensitive match extractall like notlike
fromunixtimestamp toyyyymm toyyyymmdd tounixtimestamp uptime hostname currentdatabase
filter_list tojson json_value json_query json_exists json_contains json_keys json_length
json_unquote json_search json_pretty json_type isjson
`) {
		m[f] = true
	}
	return m
}()

// mongoReadOnly reports whether mongosh code only reads: every statement
// is `show …`, `use DB`, or an expression built from the shell's read
// helpers (db.c.find(…).sort(…), printjson(…), db.getSiblingDB('x')…)
// whose arguments are literals or such expressions. Functions, operators
// that run code ($where, $function, $accumulator) or write ($out,
// $merge), and every method not known to read leave it a write.
func mongoReadOnly(js string) bool {
	toks, ok := jsTokens(js)
	if !ok {
		return false
	}
	p := &mongoParser{toks: toks}
	for p.i < len(p.toks) {
		if p.peek() == ";" || p.peek() == "\n" {
			p.i++
			continue
		}
		if !p.statement() {
			return false
		}
		if t := p.peek(); t != "" && t != ";" && t != "\n" {
			return false
		}
	}
	return true
}

type mongoParser struct {
	toks []string
	i    int
}

func (p *mongoParser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *mongoParser) next() string {
	t := p.peek()
	p.i++
	return t
}

func (p *mongoParser) skipNL() {
	for p.peek() == "\n" {
		p.i++
	}
}

func (p *mongoParser) statement() bool {
	switch p.peek() {
	case "show":
		p.i++
		switch p.next() {
		case "dbs", "databases", "collections", "tables", "users", "roles", "profile", "logs":
			return true
		}
		return false
	case "use":
		p.i++
		return isJSIdent(p.next())
	}
	return p.expr(0)
}

var mongoGlobals = map[string]bool{
	"db": true, "rs": true, "sh": true, "printjson": true, "print": true, "printjsononeline": true,
	"JSON": true, "EJSON": true, "ObjectId": true, "ISODate": true, "NumberLong": true, "NumberInt": true,
	"NumberDecimal": true, "UUID": true, "Timestamp": true, "true": true, "false": true, "null": true,
	"undefined": true, "Infinity": true, "NaN": true, "MinKey": true, "MaxKey": true,
}

var mongoReadMethods = map[string]bool{
	"find": true, "findOne": true, "count": true, "countDocuments": true, "estimatedDocumentCount": true,
	"aggregate": true, "distinct": true, "getIndexes": true, "getIndexKeys": true, "stats": true,
	"getCollectionNames": true, "getCollectionInfos": true, "getCollection": true, "getSiblingDB": true,
	"getName": true, "explain": true, "limit": true, "skip": true, "sort": true, "pretty": true,
	"toArray": true, "projection": true, "hint": true, "batchSize": true, "itcount": true, "size": true,
	"hasNext": true, "next": true, "version": true, "serverStatus": true, "hostInfo": true,
	"isMaster": true, "hello": true, "stringify": true, "dataSize": true, "storageSize": true,
	"totalSize": true, "totalIndexSize": true, "collation": true, "comment": true, "maxTimeMS": true,
	"readPref": true, "allowDiskUse": true, "showRecordId": true, "min": true, "max": true,
	"returnKey": true, "status": true, "conf": true, "currentOp": true, "getDBNames": true,
	"printReplicationInfo": true, "printSecondaryReplicationInfo": true, "isBalancerRunning": true,
	"getBalancerState": true, "getUsers": true, "getRoles": true, "getUser": true, "getRole": true,
	"serverBuildInfo": true, "serverCmdLineOpts": true, "getReplicationInfo": true, "latencyStats": true,
	"getShardDistribution": true, "getProfilingStatus": true, "getLogComponents": true, "isCapped": true,
}

// mongoStages are the query and aggregation operators that only read.
var mongoStages = map[string]bool{
	"$match": true, "$group": true, "$project": true, "$sort": true, "$limit": true, "$skip": true,
	"$unwind": true, "$lookup": true, "$count": true, "$addFields": true, "$set": true, "$unset": true,
	"$replaceRoot": true, "$replaceWith": true, "$facet": true, "$bucket": true, "$bucketAuto": true,
	"$sample": true, "$sortByCount": true, "$graphLookup": true, "$unionWith": true, "$densify": true,
	"$fill": true, "$setWindowFields": true, "$redact": true, "$geoNear": true, "$indexStats": true,
	"$collStats": true, "$documents": true,
	"$eq": true, "$ne": true, "$gt": true, "$gte": true, "$lt": true, "$lte": true, "$in": true,
	"$nin": true, "$and": true, "$or": true, "$nor": true, "$not": true, "$exists": true, "$type": true,
	"$regex": true, "$options": true, "$elemMatch": true, "$all": true, "$size": true, "$expr": true,
	"$mod": true, "$text": true, "$search": true, "$near": true, "$geoWithin": true, "$slice": true,
	"$sum": true, "$avg": true, "$min": true, "$max": true, "$first": true, "$last": true, "$push": true,
	"$addToSet": true, "$cond": true, "$ifNull": true, "$concat": true, "$toString": true, "$toInt": true,
	"$toLower": true, "$toUpper": true, "$substr": true, "$dateToString": true, "$year": true,
	"$month": true, "$dayOfMonth": true, "$hour": true, "$size_": true, "$arrayElemAt": true,
	"$filter": true, "$map": true, "$multiply": true, "$divide": true, "$add": true, "$subtract": true,
	"$abs": true, "$round": true, "$split": true, "$strLenCP": true, "$literal": true, "$mergeObjects": true,
	"$objectToArray": true, "$arrayToObject": true, "$isArray": true, "$stdDevPop": true, "$top": true,
	"$bottom": true, "$switch": true, "$case": true, "$then": true, "$default": true, "$branches": true,
	"$natural": true, "$date": true, "$oid": true, "$numberLong": true,
}

// expr parses a postfix chain: a primary, then .name, .name(args),
// ['name'] and (args). A chain may not end in a bare property (a method
// handed on to be called: forEach(db.dropDatabase)).
func (p *mongoParser) expr(depth int) bool {
	if depth > 32 {
		return false
	}
	p.skipNL()
	t := p.next()
	endsInProperty := false
	switch {
	case t == "{":
		if !p.object(depth) {
			return false
		}
	case t == "[":
		if !p.list("]", depth) {
			return false
		}
	case t == "(":
		if !p.expr(depth+1) || p.next() != ")" {
			return false
		}
	case t == "-":
		return p.expr(depth + 1)
	case isJSString(t) || isJSNumber(t) || strings.HasPrefix(t, "/"):
	case mongoGlobals[t]:
		if p.peek() == "(" && t != "print" && t != "printjson" && t != "printjsononeline" && !strings.HasPrefix(t, "Number") && t != "ObjectId" && t != "ISODate" && t != "UUID" && t != "Timestamp" {
			return false
		}
	default:
		return false
	}
	for {
		switch p.peek() {
		case ".":
			p.i++
			name := p.next()
			if !isJSIdent(name) {
				return false
			}
			if p.peek() == "(" {
				if !mongoReadMethods[name] {
					return false
				}
				endsInProperty = false
				continue
			}
			endsInProperty = name != "length"
		case "[":
			p.i++
			k := p.next()
			if !isJSString(k) || p.next() != "]" {
				return false
			}
			endsInProperty = true
		case "(":
			p.i++
			if !p.list(")", depth) {
				return false
			}
			endsInProperty = false
		default:
			return !endsInProperty || depth == 0 && t == "db"
		}
	}
}

func (p *mongoParser) list(end string, depth int) bool {
	for {
		p.skipNL()
		if p.peek() == end {
			p.i++
			return true
		}
		if !p.expr(depth + 1) {
			return false
		}
		p.skipNL()
		switch p.next() {
		case ",":
		case end:
			return true
		default:
			return false
		}
	}
}

func (p *mongoParser) object(depth int) bool {
	for {
		p.skipNL()
		if p.peek() == "}" {
			p.i++
			return true
		}
		k := p.next()
		key := strings.Trim(k, `'"`)
		if !isJSIdent(k) && !isJSString(k) {
			return false
		}
		if strings.HasPrefix(key, "$") && !mongoStages[key] {
			return false
		}
		if p.next() != ":" || !p.expr(depth+1) {
			return false
		}
		p.skipNL()
		switch p.next() {
		case ",":
		case "}":
			return true
		default:
			return false
		}
	}
}

func isJSIdent(t string) bool {
	if t == "" {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(isWordByte(c) || c == '$') || i == 0 && c >= '0' && c <= '9' {
			return false
		}
	}
	return true
}

func isJSString(t string) bool {
	return len(t) >= 2 && (t[0] == '\'' || t[0] == '"') && t[len(t)-1] == t[0]
}

func isJSNumber(t string) bool {
	return t != "" && t[0] >= '0' && t[0] <= '9'
}

// jsTokens splits JavaScript into identifiers, numbers, strings (quotes
// kept), regular expression literals, newlines and one-character
// punctuation. ok is false for what it does not read (a template
// literal, an unterminated string).
func jsTokens(s string) ([]string, bool) {
	var out []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\n':
			out = append(out, "\n")
			i++
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case c == '/' && i+1 < len(s) && s[i+1] == '/':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			j := strings.Index(s[i+2:], "*/")
			if j < 0 {
				return nil, false
			}
			i += j + 4
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(s) && s[j] != c && s[j] != '\n' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) || s[j] != c {
				return nil, false
			}
			out = append(out, s[i:j+1])
			i = j + 1
		case c == '/' && (len(out) == 0 || strings.Contains("(,:[!&|?{};=\n", out[len(out)-1])):
			j := i + 1
			for j < len(s) && s[j] != '/' && s[j] != '\n' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) || s[j] != '/' {
				return nil, false
			}
			j++
			for j < len(s) && s[j] >= 'a' && s[j] <= 'z' {
				j++
			}
			out = append(out, s[i:j])
			i = j
		case isWordByte(c) || c == '$':
			j := i
			for j < len(s) && (isWordByte(s[j]) || s[j] == '$' || c >= '0' && c <= '9' && s[j] == '.') {
				j++
			}
			out = append(out, s[i:j])
			i = j
		case c == '`' || c == '\\' || c >= 0x80:
			// A template, or a name spelt with escapes (\u0065val).
			return nil, false
		default:
			out = append(out, s[i:i+1])
			i++
		}
	}
	return out, true
}

// redisReadOnly reports whether a redis-cli command line only reads: its
// options only say how to connect or print (or choose a reading mode such
// as --scan or --bigkeys), and its command, with its subcommand where it
// has one, only reads. No command reads commands from standard input.
func redisReadOnly(args []Arg) bool {
	mode := false
	var cmd []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a.Dynamic {
			if len(cmd) == 0 {
				return false
			}
			cmd = append(cmd, "")
			continue
		}
		v := a.Value
		if len(cmd) > 0 || !strings.HasPrefix(v, "-") {
			cmd = append(cmd, strings.ToLower(v))
			continue
		}
		switch v {
		case "-h", "-p", "-a", "-n", "-u", "--user", "--pass", "--askpass", "-s", "-r", "-i", "-t", "-d", "-D",
			"--tls-cert", "--tls-key", "--cacert", "--cacertdir", "--sni", "--pattern", "--quoted-pattern",
			"--count", "--memkeys-samples", "--intrinsic-latency", "--cluster-only-key", "--tls-ciphers", "--tls-ciphersuites":
			if v == "--intrinsic-latency" {
				mode = true
			}
			i++
		case "--tls", "--no-auth-warning", "--raw", "--no-raw", "--csv", "--json", "--quoted-json", "-2", "-3", "-c",
			"-e", "--verbose", "--insecure", "--show-pushes", "-x", "--version", "--help":
		case "--stat", "--bigkeys", "--memkeys", "--hotkeys", "--scan", "--latency", "--latency-history",
			"--latency-dist", "--keystats", "--mem-stats":
			mode = true
		default:
			return false // --eval, --pipe, --rdb FILE, --replica, --lru-test, --cluster …
		}
	}
	if len(cmd) == 0 {
		return mode
	}
	sub := ""
	if len(cmd) > 1 {
		sub = cmd[1]
	}
	if subs, ok := redisReadSubs[cmd[0]]; ok {
		return strings.Contains(" "+subs+" ", " "+sub+" ") && sub != ""
	}
	return redisReadCommands[cmd[0]]
}

var redisReadCommands = func() map[string]bool {
	m := map[string]bool{}
	for _, c := range strings.Fields(`get mget keys scan exists ttl pttl expiretime pexpiretime type strlen
getrange substr hget hgetall hkeys hvals hlen hexists hmget hscan hstrlen hrandfield lrange llen lindex
lpos smembers scard sismember smismember sscan srandmember sunion sinter sdiff sintercard zrange
zrangebyscore zrangebylex zrevrange zrevrangebyscore zrevrangebylex zcard zscore zmscore zrank
zrevrank zscan zcount zlexcount zrandmember zunion zinter zdiff info ping dbsize echo time lastsave
xlen xrange xrevrange xread xpending pfcount bitcount bitpos getbit geopos geodist geohash geosearch
georadius_ro georadiusbymember_ro role randomkey dump touch_ro monitor lcs strlen sort_ro
json.get json.mget json.type json.strlen json.objkeys json.objlen json.arrlen ft.search ft.info
ft._list ft.aggregate`) {
		m[c] = true
	}
	return m
}()

// redisReadSubs are commands whose subcommand says whether they read.
var redisReadSubs = map[string]string{
	"slowlog": "get len help", "latency": "latest history doctor graph histogram help",
	"memory": "usage stats doctor malloc-stats help", "xinfo": "stream groups consumers help",
	"object": "encoding freq idletime refcount help", "command": "count docs info list getkeys getkeysandflags help",
	"client": "list info getname id getredir trackinginfo help", "config": "get help",
	"cluster": "info nodes slots shards myid keyslot countkeysinslot getkeysinslot links help",
	"pubsub":  "channels numsub numpat shardchannels shardnumsub help", "function": "list dump stats help",
	"script": "exists help", "acl": "whoami list users cat getuser log help", "module": "list help",
}
