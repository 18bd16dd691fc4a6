package parser

import (
	"errors"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// HTTP clients send a request body under many spellings: glued and
// clustered options (curl -sd@f), options read from a configuration file
// (curl -K, .curlrc, wgetrc, wget -e), and HTTPie's request items (a=b).
// The parser respells them as the plain options they are (-d @f,
// --post-data=…, POST), so that rules that look at arguments see them. A
// configuration that cannot be read is an argument known only at run
// time.

// configUnknown stands for the options of a configuration file the parser
// could not read.
var configUnknown = Arg{Value: "--config", Dynamic: true}

// splitClusters respells every cluster of short options as one word per
// option, and an option's glued value as a word of its own (-sSd@f is -s
// -S -d @f), up to the first operand that is "--".
func splitClusters(args []Arg, sp optSpec) []Arg {
	out := make([]Arg, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		v := a.Value
		if a.Dynamic || len(v) < 3 || v[0] != '-' || v[1] == '-' {
			out = append(out, a)
			if !a.Dynamic && v == "--" {
				return append(out, args[i+1:]...)
			}
			continue
		}
		for j := 1; j < len(v); j++ {
			ch := v[j]
			out = append(out, Arg{Value: "-" + string(ch)})
			if strings.IndexByte(sp.value, ch) >= 0 {
				if j+1 < len(v) {
					out = append(out, Arg{Value: v[j+1:]})
				}
				break
			}
		}
	}
	return out
}

// curlLong completes an abbreviated long option of curl that sends a
// body or sets the method: curl takes any unambiguous prefix of a long
// option, and one that is ambiguous fails, so taking it for the sending
// option only errs towards a send.
func curlLong(v string) string {
	name, val, has := strings.Cut(v, "=")
	sends := []string{"--data", "--data-ascii", "--data-binary", "--data-raw", "--data-urlencode", "--form",
		"--form-string", "--json", "--request", "--upload-file"}
	if len(name) >= 4 && !slices.Contains(sends, name) {
		for _, full := range sends {
			if strings.HasPrefix(full, name) {
				name = full
				break
			}
		}
	}
	if has {
		return name + "=" + val
	}
	return name
}

// curlArgs respells curl's arguments, with the options of the
// configuration files it reads added at the end.
func (w *walker) curlArgs(c *Command) {
	args := splitClusters(c.Argv[1:], curlSpec)
	for i, a := range args {
		if !a.Dynamic && strings.HasPrefix(a.Value, "--") {
			args[i].Value = curlLong(a.Value)
		}
	}
	var extra []Arg
	// .curlrc, unless -q (--disable) comes first.
	if len(args) == 0 || args[0].Dynamic || args[0].Value != "-q" && args[0].Value != "--disable" {
		extra = append(extra, w.curlrc(c)...)
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a.Dynamic || a.Value != "-K" && a.Value != "--config" && !strings.HasPrefix(a.Value, "--config=") {
			continue
		}
		var file Arg
		if v, ok := strings.CutPrefix(a.Value, "--config="); ok {
			file = Arg{Value: v}
		} else if i+1 < len(args) {
			file = args[i+1]
		}
		extra = append(extra, w.curlConfigFile(c, file, 0)...)
	}
	c.Argv = append(append(c.Argv[:1:1], args...), extra...)
}

// curlrc returns the options of the .curlrc curl reads by default: in
// $CURL_HOME, else $XDG_CONFIG_HOME, else $HOME.
func (w *walker) curlrc(c *Command) []Arg {
	for _, name := range []string{"CURL_HOME", "XDG_CONFIG_HOME", "HOME"} {
		if contains(c.Env, name) {
			// Set for this command only, to a value the parser does
			// not follow: a directory of the step's choosing.
			return []Arg{configUnknown}
		}
		dir, ok := w.lookup(name)
		if !ok {
			if w.varSet(name) {
				return []Arg{configUnknown}
			}
			continue
		}
		set := w.varKnownSet(name)
		if w.opts.ReadFile == nil {
			if set {
				return []Arg{configUnknown}
			}
			return nil
		}
		for _, f := range []string{".curlrc", "_curlrc", "curlrc"} {
			if name != "XDG_CONFIG_HOME" && f == "curlrc" {
				continue
			}
			if out, found := w.readConfigArgs(c, path.Join(dir, f), 0); found {
				return out
			}
		}
		if name == "CURL_HOME" || name == "XDG_CONFIG_HOME" {
			continue
		}
	}
	return nil
}

// varKnownSet reports whether the source itself set name to a known
// value (not the environment's).
func (w *walker) varKnownSet(name string) bool {
	b, _ := w.st.vars.get(name)
	return b.how == knownVal
}

// configPath is the absolute path of a configuration file a command
// names; ok is false when it is relative to a directory not known.
func configPath(c *Command, file Arg) (string, bool) {
	if path.IsAbs(file.Value) {
		return file.Value, true
	}
	if c.Cwd == "" {
		return "", false
	}
	return path.Join(c.Cwd, file.Value), true
}

// curlConfigFile returns the options of a file given to curl -K.
func (w *walker) curlConfigFile(c *Command, file Arg, depth int) []Arg {
	if file.Dynamic || file.Value == "" || file.Value == "-" || w.opts.ReadFile == nil || depth > 4 {
		return []Arg{configUnknown}
	}
	p, ok := configPath(c, file)
	if !ok {
		return []Arg{configUnknown}
	}
	out, found := w.readConfigArgs(c, p, depth)
	if !found {
		// curl fails on a missing -K file: it sends nothing.
		return nil
	}
	return out
}

// readConfigArgs reads a curl configuration file as options; found is
// false when there is no such file.
func (w *walker) readConfigArgs(c *Command, file string, depth int) (out []Arg, found bool) {
	data, err := w.opts.ReadFile(file)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false
		}
		return []Arg{configUnknown}, true
	}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		name, val := line, ""
		if i := strings.IndexAny(line, " \t=:"); i >= 0 {
			name, val = line[:i], strings.TrimSpace(line[i+1:])
			val = strings.TrimSpace(strings.TrimLeft(val, "=:"))
		}
		if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
			val = val[1 : len(val)-1]
		}
		name = strings.TrimLeft(name, "-")
		opt := "--" + name
		if len(name) == 1 {
			opt = "-" + name
		}
		opt = curlLong(opt)
		out = append(out, Arg{Value: opt})
		if val != "" {
			out = append(out, Arg{Value: val})
		}
		if opt == "-K" || opt == "--config" {
			out = append(out, w.curlConfigFile(c, Arg{Value: val}, depth+1)...)
		}
	}
	return out, true
}

// wgetSends maps the wgetrc commands that send a body to wget's options.
var wgetSends = map[string]string{"post_data": "--post-data", "postdata": "--post-data", "post_file": "--post-file",
	"postfile": "--post-file", "body_data": "--body-data", "bodydata": "--body-data", "body_file": "--body-file",
	"bodyfile": "--body-file", "method": "--method"}

// wgetArgs adds to wget's arguments the sending options that -e commands
// and the wgetrc files it reads give.
func (w *walker) wgetArgs(c *Command) {
	var extra []Arg
	noConfig := false
	args := c.Argv[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		v := a.Value
		switch {
		case a.Dynamic:
		case v == "--no-config":
			noConfig = true
		case v == "-e" || v == "--execute" || strings.HasPrefix(v, "--execute=") || strings.HasPrefix(v, "-e") && len(v) > 2:
			var cmd Arg
			switch {
			case strings.HasPrefix(v, "--execute="):
				cmd = Arg{Value: strings.TrimPrefix(v, "--execute=")}
			case len(v) > 2 && v[1] == 'e':
				cmd = Arg{Value: v[2:]}
			case i+1 < len(args):
				i++
				cmd = args[i]
			}
			extra = append(extra, wgetCommands(cmd)...)
		case v == "--config" || strings.HasPrefix(v, "--config="):
			file := Arg{Value: strings.TrimPrefix(v, "--config=")}
			if v == "--config" && i+1 < len(args) {
				i++
				file = args[i]
			}
			extra = append(extra, w.wgetrc(c, file)...)
			noConfig = true
		}
	}
	if !noConfig {
		if contains(c.Env, "WGETRC") || contains(c.Env, "HOME") {
			extra = append(extra, configUnknown)
		} else if v, ok := w.lookup("WGETRC"); ok {
			extra = append(extra, w.wgetrc(c, Arg{Value: v})...)
		} else if w.varSet("WGETRC") {
			extra = append(extra, configUnknown)
		} else if h, ok := w.lookup("HOME"); ok && (w.opts.ReadFile != nil || w.varKnownSet("HOME")) {
			extra = append(extra, w.wgetrc(c, Arg{Value: path.Join(h, ".wgetrc")})...)
		}
	}
	c.Argv = append(c.Argv, extra...)
}

// wgetrc reads a wgetrc file's sending commands.
func (w *walker) wgetrc(c *Command, file Arg) []Arg {
	if file.Dynamic || w.opts.ReadFile == nil {
		return []Arg{configUnknown}
	}
	p, ok := configPath(c, file)
	if !ok {
		return []Arg{configUnknown}
	}
	data, err := w.opts.ReadFile(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return []Arg{configUnknown}
	}
	var out []Arg
	for _, line := range strings.Split(string(data), "\n") {
		out = append(out, wgetCommands(Arg{Value: line})...)
	}
	return out
}

// wgetCommands turns one wgetrc command (NAME = VALUE) into the option it
// stands for, when it sends.
func wgetCommands(cmd Arg) []Arg {
	if cmd.Dynamic {
		return []Arg{configUnknown}
	}
	line := strings.TrimSpace(cmd.Value)
	if line == "" || line[0] == '#' {
		return nil
	}
	name, val, _ := strings.Cut(line, "=")
	name = strings.ToLower(strings.ReplaceAll(strings.TrimSpace(name), "-", "_"))
	if opt, ok := wgetSends[name]; ok {
		val = strings.TrimSpace(val)
		if opt == "--method" {
			val = strings.ToUpper(val)
		}
		return []Arg{{Value: opt + "=" + val}}
	}
	return nil
}

// httpieArgs makes the method of an HTTPie-style request (http, https,
// xh, curlie) explicit when its request items or its options give it a
// body: data fields (a=b, a:=1), files (a@f, a=@f), --raw, or a standard
// input that is not the terminal. HTTPie sends those as POST.
func (w *walker) httpieArgs(c *Command) {
	args := c.Argv[1:]
	method, url := -1, -1
	body := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		v := a.Value
		switch {
		case a.Dynamic:
			if url >= 0 {
				// An item known only at run time may be a data field.
				body = true
			}
		case v == "--raw" || strings.HasPrefix(v, "--raw="):
			body = true
		case v == "--ignore-stdin" || v == "-I":
		case strings.HasPrefix(v, "-"):
			if httpieTakesValue(v) {
				i++
			}
		case url < 0 && method < 0 && isHTTPMethod(v) && i+1 < len(args):
			method = i
		case url < 0:
			url = i
		default:
			if httpieBodyItem(v) {
				body = true
			}
		}
	}
	if c.Stdin != "" || w.stdinTaken {
		body = true
	}
	if !body || method >= 0 && !strings.EqualFold(args[method].Value, "GET") && !strings.EqualFold(args[method].Value, "HEAD") {
		return
	}
	next := append([]Arg(nil), c.Argv[:1]...)
	next = append(next, Arg{Value: "POST"})
	for i, a := range args {
		if i != method {
			next = append(next, a)
		}
	}
	c.Argv = next
}

func isHTTPMethod(v string) bool {
	if v == "" || strings.ToUpper(v) != v {
		return false
	}
	for _, r := range v {
		if r < 'A' || r > 'Z' {
			return false
		}
	}
	return true
}

// httpieBodyItem reports whether a request item adds to the body: a=b,
// a:=json, a@file, a=@file, a:=@file (not Header:value or q==v).
func httpieBodyItem(v string) bool {
	i := strings.IndexAny(v, ":=@")
	if i < 0 {
		return false
	}
	rest := v[i:]
	switch {
	case strings.HasPrefix(rest, "=="):
		return false
	case strings.HasPrefix(rest, ":="), strings.HasPrefix(rest, "="), strings.HasPrefix(rest, "@"):
		return true
	}
	return false
}

func httpieTakesValue(v string) bool {
	switch v {
	case "-a", "--auth", "-A", "--auth-type", "-o", "--output", "-p", "--print", "-P", "--history-print",
		"-s", "--style", "--session", "--session-read-only", "--proxy", "--cert", "--cert-key", "--verify",
		"--timeout", "--max-redirects", "--pretty", "--format-options", "--default-scheme", "--ssl",
		"--ciphers", "--chunked-size", "--boundary", "--response-charset", "--response-mime",
		"--bearer", "--resolve", "--interface", "--http-version":
		return true
	}
	return false
}

// daemonVars are the variables that tell a container client which daemon
// to drive, with the option each stands for.
var daemonVars = []struct{ name, opt string }{
	{"DOCKER_HOST", "--host"}, {"DOCKER_CONTEXT", "--context"},
	{"CONTAINER_HOST", "--url"}, {"CONTAINER_CONNECTION", "--connection"},
}

// daemonHost sets Network for a container client that drives a daemon
// on another machine: -H ssh://host, DOCKER_HOST, a named context or
// connection (which may be anywhere). Everything such a command does
// happens there.
func (w *walker) daemonHost(c *Command) {
	var addrs []Arg
	for _, dv := range daemonVars {
		if contains(c.Env, dv.name) {
			// Set for this command to a value the parser does not keep.
			addrs = append(addrs, Arg{Value: dv.opt + "=$" + dv.name, Dynamic: true})
			continue
		}
		if b, _ := w.st.vars.get(dv.name); b.private {
			continue // the shell's own, not exported
		}
		if v, ok := w.lookup(dv.name); ok && v != "" {
			addrs = append(addrs, Arg{Value: dv.opt + "=" + v})
		} else if w.varSet(dv.name) {
			addrs = append(addrs, Arg{Value: dv.opt + "=$" + dv.name, Dynamic: true})
		}
	}
	// The global options, before the subcommand.
	args := c.Argv[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		v := a.Value
		if a.Dynamic || !strings.HasPrefix(v, "-") {
			break
		}
		name, val, has := strings.Cut(v, "=")
		switch name {
		case "-H", "--host", "--url", "-c", "--context", "--connection", "--remote", "-r":
		default:
			if len(v) > 2 && v[1] == 'H' {
				name, val, has = "-H", v[2:], true
				break
			}
			if contains(globalValueOptions("docker"), name) && !has {
				i++
			}
			continue
		}
		if name == "--remote" || name == "-r" {
			addrs = append(addrs, Arg{Value: "--remote", Dynamic: true})
			continue
		}
		if !has && i+1 < len(args) {
			i++
			val, a = args[i].Value, args[i]
		}
		addrs = append(addrs, Arg{Value: name + "=" + val, Dynamic: a.Dynamic})
	}
	for _, a := range addrs {
		name, val, _ := strings.Cut(a.Value, "=")
		switch {
		case a.Dynamic:
			c.Network = true
		case name == "--context" || name == "-c" || name == "--connection":
			c.Network = c.Network || val != "default" && val != ""
		default:
			c.Network = c.Network || !localDaemon(val)
		}
	}
}

// localDaemon reports whether a daemon address is on this machine: a
// socket, or TCP to the loopback.
func localDaemon(addr string) bool {
	for _, p := range []string{"unix://", "npipe://", "fd://"} {
		if strings.HasPrefix(addr, p) {
			return true
		}
	}
	if strings.HasPrefix(addr, "/") {
		return true
	}
	h := strings.TrimPrefix(strings.TrimPrefix(addr, "tcp://"), "http://")
	if i := strings.IndexAny(h, "/"); i >= 0 {
		h = h[:i]
	}
	if j := strings.LastIndexByte(h, ':'); j >= 0 && !strings.HasSuffix(h, "]") {
		h = h[:j]
	}
	h = strings.Trim(h, "[]")
	return h == "localhost" || h == "::1" || strings.HasPrefix(h, "127.")
}
