package parser

import (
	"net"
	"net/url"
	"path"
	"slices"
	"strings"
)

// addressSyntax is how a program's words name the servers it reaches.
type addressSyntax uint8

const (
	// wordAddrs: URLs; when no word is one, the words that read as a
	// host (hostLike) and have a dot before any colon, or start with
	// localhost: example.com/x, user@db.example.com:5432.
	wordAddrs addressSyntax = iota
	// shellAddrs: as wordAddrs, and a host needs no dot (ssh web1,
	// sftp web1:/srv).
	shellAddrs
	// copyAddrs: another machine only as host:path or host::module (or
	// a URL); a word without the colon is a local path, dots and all
	// (config.yaml).
	copyAddrs
	// optionAddrs: -h HOST, -hHOST, --host HOST, --host=HOST, -H HOST
	// and URLs; the operands are databases and statements. The
	// database tools with hostOptions.
	optionAddrs
)

// addressSyntaxOf returns how the program base names servers.
func addressSyntaxOf(base string) addressSyntax {
	switch base {
	case "rsync", "scp", "rclone":
		return copyAddrs
	case "ssh", "sftp":
		return shellAddrs
	}
	if t, ok := dbToolFor(base); ok && t.hostOptions {
		return optionAddrs
	}
	return wordAddrs
}

// wordHosts adds to c.Hosts the servers c's words name, read in the
// syntax of its program, to those the analysis of the program found
// (the environment and connection strings of a database tool).
func wordHosts(c *Command) {
	if len(c.Argv) == 0 || c.Argv[0].Dynamic {
		return
	}
	// The program as rules name it: mysql8.0 is no database tool here.
	syn := addressSyntaxOf(path.Base(c.Argv[0].Value))
	args := c.Argv[1:]
	add := func(h Host) {
		if !slices.Contains(c.Hosts, h) {
			c.Hosts = append(c.Hosts, h)
		}
	}
	if syn == optionAddrs {
		for i, a := range args {
			var h *Arg
			switch {
			case (a.Value == "-h" || a.Value == "--host" || a.Value == "-H") && i+1 < len(args):
				h = &args[i+1]
			case strings.HasPrefix(a.Value, "--host="):
				h = &Arg{Value: strings.TrimPrefix(a.Value, "--host="), Dynamic: a.Dynamic}
			case strings.HasPrefix(a.Value, "-h") && len(a.Value) > 2 && !strings.HasPrefix(a.Value, "--"):
				h = &Arg{Value: a.Value[2:], Dynamic: a.Dynamic}
			case strings.Contains(a.Value, "://"):
				h = &args[i]
			}
			if h != nil {
				add(server(h.Value, h.Dynamic))
			}
		}
		return
	}
	urls := false
	for _, a := range args {
		if strings.Contains(a.Value, "://") {
			urls = true
		}
	}
	for _, a := range args {
		v := a.Value
		switch {
		case urls && !strings.Contains(v, "://"):
			continue
		case a.Dynamic:
			if urls || !strings.HasPrefix(v, "-") {
				add(Host{Value: v, Dynamic: true})
			}
			continue
		case !urls && (strings.HasPrefix(v, "-") || !hostLike(v)):
			continue
		case !urls && syn == wordAddrs && !strings.Contains(strings.SplitN(v, ":", 2)[0], ".") && !strings.HasPrefix(v, "localhost"):
			// host:path names a host only for ssh and the copying
			// programs.
			continue
		case !urls && syn == copyAddrs && !hostPath(v):
			continue
		}
		add(Host{Value: v, Loopback: loopback(v)})
	}
}

// server is a database tool's server: a path is the directory of its
// socket, on this machine.
func server(v string, dynamic bool) Host {
	return Host{Value: v, Dynamic: dynamic, Loopback: !dynamic && (loopback(v) || strings.HasPrefix(v, "/"))}
}

// hostPath reports whether an operand of rsync, scp or rclone names
// another machine: a colon before any slash.
func hostPath(v string) bool {
	i := strings.IndexByte(v, ':')
	return i > 0 && !strings.Contains(v[:i], "/")
}

// loopback reports whether a URL or host word names this machine.
func loopback(s string) bool {
	h := s
	if u, err := url.Parse(s); err == nil && u.Host != "" {
		h = u.Hostname()
	} else {
		if i := strings.IndexAny(h, "/"); i >= 0 {
			h = h[:i]
		}
		if at := strings.LastIndexByte(h, '@'); at >= 0 {
			h = h[at+1:]
		}
		if hh, _, err := net.SplitHostPort(h); err == nil {
			h = hh
		}
	}
	h = strings.Trim(h, "[]")
	if strings.HasPrefix(s, "file:") || strings.HasPrefix(s, "unix:") {
		return true
	}
	if h == "localhost" || strings.HasSuffix(h, ".localhost") || h == "0.0.0.0" || h == "::" {
		return true
	}
	if ip := net.ParseIP(h); ip != nil {
		return ip.IsLoopback()
	}
	return false
}

// hostLike reports whether a word reads as a server address:
//
//	[user@](localhost | [v6] | name.name…)[:port][/path]
//	[user@]name:rest
//
// where user and name are letters, digits, '_', '.' and '-' (a name's
// parts between the dots hold no dot), port is digits and path and rest
// hold no white space.
func hostLike(v string) bool {
	if hostForm(v) {
		return true
	}
	i := strings.IndexByte(v, '@')
	return i > 0 && allBytes(v[:i], wordDotDash) && hostForm(v[i+1:])
}

// hostForm is hostLike without the user.
func hostForm(s string) bool {
	if i := strings.IndexByte(s, ':'); i > 0 && allBytes(s[:i], wordDotDash) && !hasSpace(s[i+1:]) {
		return true // name:rest
	}
	var rest string
	switch n := prefixLen(s, wordDotDash); {
	case strings.HasPrefix(s, "localhost") && portPath(s[len("localhost"):]):
		return true
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 2 || !allBytes(s[1:end], hexColon) {
			return false
		}
		rest = s[end+1:]
	case dottedName(s[:n]):
		rest = s[n:]
	default:
		return false
	}
	return portPath(rest)
}

// dottedName reports whether s is two or more parts of letters, digits,
// '_' and '-', joined by dots.
func dottedName(s string) bool {
	dots, part := 0, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '.' && part > 0:
			dots, part = dots+1, 0
		case wordDash(s[i]):
			part++
		default:
			return false
		}
	}
	return dots > 0 && part > 0
}

// portPath reports whether s is [:port][/path].
func portPath(s string) bool {
	if rest, ok := strings.CutPrefix(s, ":"); ok {
		n := prefixLen(rest, digit)
		if n == 0 {
			return false
		}
		s = rest[n:]
	}
	return s == "" || s[0] == '/' && !hasSpace(s[1:])
}

func digit(b byte) bool { return '0' <= b && b <= '9' }

func wordDash(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '_' || b == '-'
}

func wordDotDash(b byte) bool { return wordDash(b) || b == '.' }

func hexColon(b byte) bool {
	return '0' <= b && b <= '9' || 'a' <= b && b <= 'f' || 'A' <= b && b <= 'F' || b == ':'
}

func allBytes(s string, ok func(byte) bool) bool { return prefixLen(s, ok) == len(s) }

// prefixLen returns the length of the longest prefix of s whose bytes
// are ok.
func prefixLen(s string, ok func(byte) bool) int {
	i := 0
	for i < len(s) && ok(s[i]) {
		i++
	}
	return i
}

// hasSpace reports whether s holds white space as regular expressions
// mean it (\s: tab, newline, form feed, carriage return, space).
func hasSpace(s string) bool { return strings.ContainsAny(s, "\t\n\f\r ") }
