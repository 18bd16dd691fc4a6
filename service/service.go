// Package service knows the services that run in the sandbox (a
// PostgreSQL, MySQL/MariaDB, Redis or MongoDB server, or one the policy
// declares) and checkpoints their data so that a step that talked to
// one can be undone: [Detect] finds them, [Store.Checkpoint] takes a
// consistent copy of a service's data while it runs (its processes
// frozen for the last pass of the copy, or the service's own snapshot),
// and [Store.Restore] stops it, puts its data back and starts it again.
//
// A copy of the machine cannot serve such a step: the server is a
// process of this machine, and its data is in its memory as much as on
// disk. docs/services.md says why undosh does it this way.
package service

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/undosh/undosh/internal/procs"
	"github.com/undosh/undosh/policy"
)

// The kinds of service undosh finds by itself.
const (
	Postgres = "postgres"
	MySQL    = "mysql"
	Redis    = "redis"
	MongoDB  = "mongodb"
)

// Kinds are the kinds above: the databases a policy's live: database
// names.
var Kinds = policy.ServiceKinds

// Decl is a service the policy declares (services: in policy.yaml).
type Decl = policy.ServiceDecl

// Service is a service running here.
type Service struct {
	// Name is the kind for a detected service ("postgres"), or kind and
	// port when several of one kind run ("postgres:5433"); a declared
	// service's name is the policy's.
	Name string `json:"name"`
	Kind string `json:"kind,omitempty"`
	// Main is the service's main process: the postmaster, mysqld,
	// redis-server, mongod, or the declared process.
	Main procs.Proc `json:"main"`
	// Data are the absolute paths that hold its data: directories or
	// files.
	Data []string `json:"data"`
	// Port is its TCP port, Socket its Unix socket's directory or path,
	// where known.
	Port   int    `json:"port,omitempty"`
	Socket string `json:"socket,omitempty"`
	// Restart, when set, is the argv that starts it again as it runs
	// now, where its own argv does not say (Redis rewrites it).
	Restart []string `json:"restart,omitempty"`
	// Declared: the policy declares it; Stop and Start are then its shell
	// commands ("" for the default: a signal, and its command line again).
	Declared bool   `json:"declared,omitempty"`
	Stop     string `json:"stop,omitempty"`
	Start    string `json:"start,omitempty"`
	// Unreadable says why undosh cannot checkpoint it ("" when it can):
	// a server of another user, a data directory it cannot read.
	Unreadable string `json:"unreadable,omitempty"`
}

// Detect lists the services running here: the known kinds, found from
// their processes, and those decls declare. A declared service that
// matches a known server takes its place (its name and commands).
func Detect(decls []Decl) ([]Service, error) {
	ps, err := procs.List()
	if err != nil {
		return nil, fmt.Errorf("list the services running here: %w", err)
	}
	return detectIn(ps, decls), nil
}

func detectIn(ps []procs.Proc, decls []Decl) []Service {
	byPID := make(map[int]procs.Proc, len(ps))
	for _, p := range ps {
		byPID[p.PID] = p
	}
	var out []Service
	for _, p := range ps {
		kind := kindOf(p)
		if kind == "" || kind == kindOf(byPID[p.PPID]) {
			continue // a server's worker: the main process is its parent
		}
		if s, ok := known(kind, p); ok {
			out = append(out, s)
		}
	}
	for _, d := range decls {
		s, ok := declared(d, ps)
		if !ok {
			continue
		}
		if i := slices.IndexFunc(out, func(o Service) bool { return o.Main.Same(s.Main) }); i >= 0 {
			if len(s.Data) == 0 {
				s.Data = out[i].Data
			}
			if s.Port == 0 {
				s.Port, s.Socket = out[i].Port, out[i].Socket
			}
			out = slices.Delete(out, i, i+1)
		}
		out = append(out, s)
	}
	name(out)
	for i := range out {
		if out[i].Unreadable == "" {
			out[i].Unreadable = unreadable(out[i])
		}
	}
	return out
}

// name gives each detected service its name: its kind, and its port too
// when one kind runs more than once.
func name(ss []Service) {
	count := map[string]int{}
	for _, s := range ss {
		if !s.Declared {
			count[s.Kind]++
		}
	}
	for i := range ss {
		s := &ss[i]
		if s.Declared {
			continue
		}
		s.Name = s.Kind
		if count[s.Kind] > 1 {
			switch {
			case s.Port != 0:
				s.Name += ":" + strconv.Itoa(s.Port)
			default:
				s.Name += ":" + strconv.Itoa(s.Main.PID)
			}
		}
	}
}

// kindOf names the kind of server p is, or "".
func kindOf(p procs.Proc) string {
	names := []string{p.Comm, path.Base(p.Exe)}
	if len(p.Argv) > 0 {
		// redis-server sets its argv to "redis-server *:6379".
		names = append(names, path.Base(strings.Fields(p.Argv[0] + " ")[0]))
	}
	for _, n := range names {
		switch n {
		case "postgres", "postmaster":
			return Postgres
		case "mysqld", "mariadbd":
			return MySQL
		case "redis-server":
			return Redis
		case "mongod":
			return MongoDB
		}
	}
	return ""
}

// known reads what a server of kind says of itself on its command line.
func known(kind string, p procs.Proc) (Service, bool) {
	s := Service{Kind: kind, Main: p}
	abs := func(dir string) string {
		if dir != "" && !filepath.IsAbs(dir) && p.Cwd != "" {
			dir = filepath.Join(p.Cwd, dir)
		}
		return filepath.Clean(dir)
	}
	switch kind {
	case Postgres:
		data := option(p.Argv, "-D", "")
		if data == "" {
			data = envOf(p.Env, "PGDATA")
		}
		if data == "" {
			s.Unreadable = "its data directory is not on its command line (-D) or in PGDATA"
			return s, true
		}
		s.Data = []string{abs(data)}
		// postmaster.pid: pid, data directory, start time, port, socket
		// directory, listen address, shared memory key, status.
		if b, err := os.ReadFile(filepath.Join(s.Data[0], "postmaster.pid")); err == nil {
			lines := strings.Split(string(b), "\n")
			if len(lines) > 4 {
				s.Port, _ = strconv.Atoi(strings.TrimSpace(lines[3]))
				s.Socket = strings.TrimSpace(lines[4])
			}
		}
		if s.Port == 0 {
			s.Port, _ = strconv.Atoi(option(p.Argv, "-p", "--port"))
		}
	case MySQL:
		data := option(p.Argv, "", "--datadir")
		if data == "" {
			data = "/var/lib/mysql"
		}
		s.Data = []string{abs(data)}
		s.Port, _ = strconv.Atoi(option(p.Argv, "-P", "--port"))
		if s.Port == 0 {
			s.Port = 3306
		}
		s.Socket = option(p.Argv, "", "--socket")
	case MongoDB:
		data := option(p.Argv, "", "--dbpath")
		if data == "" {
			data = "/data/db"
		}
		s.Data = []string{abs(data)}
		s.Port, _ = strconv.Atoi(option(p.Argv, "", "--port"))
		if s.Port == 0 {
			s.Port = 27017
		}
	case Redis:
		// "redis-server *:6379" or "redis-server 127.0.0.1:6380": the
		// data files are the server's to say (CONFIG GET), asked when
		// it is checkpointed.
		if f := strings.Fields(strings.Join(p.Argv, " ")); len(f) > 1 {
			if _, port, err := net.SplitHostPort(f[1]); err == nil {
				s.Port, _ = strconv.Atoi(port)
			}
		}
		if s.Port == 0 {
			s.Port, _ = strconv.Atoi(option(p.Argv, "", "--port"))
		}
		if s.Port == 0 {
			s.Unreadable = "its port is not on its command line"
			return s, true
		}
		rs, err := askRedis(s.Port)
		if err != nil {
			s.Unreadable = err.Error()
			return s, true
		}
		s.Data = rs.files
		// argv[0] says which program to be: Debian's redis-server is a
		// link to redis-check-rdb, which /proc shows as the exe.
		s.Restart = append([]string{"redis-server"}, rs.args...)
	}
	return s, true
}

// declared finds the main process of d in ps.
func declared(d Decl, ps []procs.Proc) (Service, bool) {
	s := Service{Name: d.Name, Kind: d.Kind, Data: slices.Clone(d.Data), Port: d.Port, Declared: true, Stop: d.Stop, Start: d.Start}
	if d.PIDFile != "" {
		b, err := os.ReadFile(d.PIDFile)
		if err != nil {
			return s, false
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(bytes.SplitN(b, []byte("\n"), 2)[0])))
		if err != nil {
			return s, false
		}
		i := slices.IndexFunc(ps, func(p procs.Proc) bool { return p.PID == pid })
		if i < 0 {
			return s, false
		}
		s.Main = ps[i]
		return s, true
	}
	for _, p := range ps {
		if ok, _ := path.Match(d.Process, program(p)); ok {
			// The first of the glob's processes whose parent is not one.
			if i := slices.IndexFunc(ps, func(q procs.Proc) bool { return q.PID == p.PPID }); i >= 0 {
				if ok, _ := path.Match(d.Process, program(ps[i])); ok {
					continue
				}
			}
			s.Main = p
			return s, true
		}
	}
	return s, false
}

// program is the base name of p's program.
func program(p procs.Proc) string {
	if p.Exe != "" {
		return path.Base(p.Exe)
	}
	if len(p.Argv) > 0 {
		return path.Base(p.Argv[0])
	}
	return p.Comm
}

// unreadable says why this process cannot checkpoint s, or "".
func unreadable(s Service) string {
	if len(s.Data) == 0 {
		return "it has no data paths"
	}
	if euid := os.Geteuid(); euid != 0 && s.Main.UID != euid {
		return fmt.Sprintf("it runs as uid %d, and undosh as uid %d cannot stop it or read its data (run the agent as that user, or undosh as root)", s.Main.UID, euid)
	}
	for _, d := range s.Data {
		f, err := os.Open(d)
		if errors.Is(err, os.ErrNotExist) && s.Kind == Redis {
			continue // no dump yet
		}
		if err != nil {
			return "its data cannot be read: " + err.Error()
		}
		f.Close()
	}
	return ""
}

// option returns the value of the option short (-D DIR, -DDIR) or long
// (--datadir=DIR, --datadir DIR) in argv, the last one given, or "".
func option(argv []string, short, long string) string {
	v := ""
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		next := func() string {
			if i+1 < len(argv) {
				i++
				return argv[i]
			}
			return ""
		}
		switch {
		case short != "" && a == short:
			v = next()
		case short != "" && strings.HasPrefix(a, short) && !strings.HasPrefix(a, "--"):
			v = a[len(short):]
		case long != "" && a == long:
			v = next()
		case long != "" && strings.HasPrefix(a, long+"="):
			v = a[len(long)+1:]
		}
	}
	return v
}

func envOf(env []string, key string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// dialTimeout bounds a connection to a service on this machine.
const dialTimeout = 2 * time.Second
