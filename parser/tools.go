package parser

import (
	"encoding/json"
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// globalValueOptions lists, for programs with subcommands, the options
// before the subcommand that take a separate value.
func globalValueOptions(base string) []string {
	switch base {
	case "docker", "podman", "nerdctl":
		return []string{"-H", "--host", "-c", "--context", "--config", "-l", "--log-level", "--tlscacert", "--tlscert", "--tlskey", "--namespace", "-n"}
	case "kubectl", "oc", "helm":
		return []string{"-n", "--namespace", "--context", "--cluster", "--kubeconfig", "-s", "--server", "--user", "--token", "--kube-context", "-o", "--output"}
	case "systemctl", "journalctl", "loginctl", "timedatectl", "hostnamectl":
		return []string{"-H", "--host", "-M", "--machine", "--root", "-t", "--type", "-p", "--property", "--state", "-n", "--lines", "-o", "--output", "-s", "--signal", "--job-mode", "--kill-whom", "-u", "--unit"}
	case "apt", "apt-get", "apt-cache", "aptitude", "dnf", "yum", "zypper", "apk":
		return []string{"-o", "--option", "-c", "--config-file", "-t", "--target-release", "--installroot", "--releasever", "--repo", "-X", "--repository", "--root"}
	case "cargo":
		return []string{"-C", "--config", "-Z", "--color", "--manifest-path"}
	case "go":
		return []string{"-C"}
	case "gh":
		return []string{"-R", "--repo"}
	case "aws":
		return []string{"--profile", "--region", "--output", "--endpoint-url", "--query", "--cli-read-timeout", "--cli-connect-timeout", "--ca-bundle"}
	case "gcloud", "gsutil":
		return []string{"--project", "--account", "--configuration", "--format", "--verbosity", "--impersonate-service-account"}
	case "az":
		return []string{"--subscription", "--output", "-o", "--query"}
	case "poetry", "uv", "pdm", "hatch", "pipenv", "conda", "mamba":
		return []string{"-C", "--directory", "-P", "--project", "--python", "-n", "--name", "-p", "--prefix", "--cache-dir", "--config-file"}
	case "redis-cli":
		return []string{"-h", "-p", "-a", "-n", "-u", "--user", "--pass", "-s", "-r", "-i", "--tls-cert", "--tls-key", "--cacert"}
	case "ip":
		return []string{"-n", "-netns", "-f", "-family", "-b", "-batch", "-rc", "-rcvbuf"}
	case "terraform", "tofu":
		return nil
	case "date":
		return []string{"-d", "--date", "-f", "--file", "-r", "--reference"}
	case "route":
		return []string{"-A", "--family"}
	}
	return nil
}

// subcommandIndex returns the index in argv of the subcommand word: the
// first operand after the global options, or 0 when there is none.
func subcommandIndex(base string, argv []Arg) int {
	vals := globalValueOptions(base)
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		if a.Dynamic {
			return i
		}
		v := a.Value
		if v == "--" {
			if i+1 < len(argv) {
				return i + 1
			}
			return 0
		}
		if strings.HasPrefix(v, "-") && len(v) > 1 {
			if !strings.Contains(v, "=") && contains(vals, v) {
				i++
			}
			continue
		}
		if base == "service" && i+1 < len(argv) {
			// service NAME ACTION: the action says what it does.
			return i + 1
		}
		return i
	}
	return 0
}

// find: -delete and -fprint write; -exec and friends run commands on the
// paths found, which lie under the starting points.
func (w *walker) find(s *syntax.Stmt, c *Command) {
	c.WritesKnown = true
	args := c.Argv[1:]
	i := 0
	for i < len(args) && !args[i].Dynamic {
		v := args[i].Value
		if v == "-H" || v == "-L" || v == "-P" || strings.HasPrefix(v, "-O") {
			i++
			continue
		}
		if v == "-D" {
			i += 2
			continue
		}
		break
	}
	var roots []Arg
	for ; i < len(args); i++ {
		v := args[i].Value
		if !args[i].Dynamic && (strings.HasPrefix(v, "-") || v == "(" || v == "!" || v == ")" || v == ",") {
			break
		}
		roots = append(roots, args[i])
	}
	if len(roots) == 0 {
		roots = []Arg{{Value: "."}}
	}
	under := func(root Arg) Arg {
		if root.Dynamic {
			return root
		}
		return Arg{Value: strings.TrimSuffix(root.Value, "/") + "/*", Glob: true}
	}
	var execs []Command
	for ; i < len(args); i++ {
		a := args[i]
		v := a.Value
		if a.Dynamic {
			if i == 0 || !findTakesValue(args[i-1].Value) {
				w.unknownAt(c.Pos, "find expression is not literal", v)
			}
			continue
		}
		switch v {
		case "-delete":
			for _, r := range roots {
				wr := w.resolveAt(c, under(r))
				wr.Tree = true
				c.Writes = append(c.Writes, wr)
			}
		case "-fprint", "-fprint0", "-fls", "-fprintf":
			if i+1 < len(args) {
				wr := w.resolveAt(c, args[i+1])
				wr.Stream = true
				c.Writes = append(c.Writes, wr)
				i++
				if v == "-fprintf" {
					i++
				}
			}
		case "-exec", "-execdir", "-ok", "-okdir":
			j := i + 1
			for j < len(args) && !(args[j].Value == ";" || args[j].Value == "+" && j > i+1 && strings.Contains(args[j-1].Value, "{}")) {
				j++
			}
			cmd := args[i+1 : j]
			i = j
			if len(cmd) == 0 {
				continue
			}
			for _, r := range roots {
				argv := make([]Arg, len(cmd))
				for k, ca := range cmd {
					if !ca.Dynamic && strings.Contains(ca.Value, "{}") {
						switch {
						case k == 0:
							ca = Arg{Value: ca.Value, Dynamic: true}
						case ca.Value == "{}":
							ca = under(r)
						case k >= 2 && isShell(baseName(cmd[0].Value)) && cmd[k-1].Value == "-c":
							// Code for a shell: the path becomes a
							// variable the parser cannot know.
							ca = Arg{Value: strings.ReplaceAll(ca.Value, "{}", "\"$FIND_PATH\"")}
						default:
							ca = Arg{Value: ca.Value, Dynamic: true}
						}
					}
					argv[k] = ca
				}
				next := Command{Pos: c.Pos, Text: c.Text, Argv: argv, Root: c.Root, Env: c.Env,
					Cwd: c.Cwd, Shadowed: c.Shadowed,
					Wrappers: append(append([]string(nil), c.Wrappers...), "find "+v)}
				if v == "-execdir" || v == "-okdir" {
					// It runs in the directory of each file found, on
					// ./NAME: everything lies under the starting point.
					wr := w.resolveAt(c, r)
					next.Cwd = ""
					if wr.Resolved && !r.Glob {
						next.Cwd = wr.Path // the shallowest it can be
					}
					for k, a := range next.Argv {
						if k > 0 && !a.Dynamic && a.Glob && a.Value == under(r).Value {
							next.Argv[k] = Arg{Value: "./*", Glob: true}
						}
					}
				}
				execs = append(execs, next)
			}
		}
	}
	w.record(*c)
	c.Argv = nil
	for _, e := range execs {
		if e.Cwd == "" && e.Wrappers[len(e.Wrappers)-1] != "find -exec" && e.Wrappers[len(e.Wrappers)-1] != "find -ok" {
			w.unknownAt(c.Pos, "find -execdir runs in a directory the parser cannot name", c.Text)
		}
		w.command(s, e)
	}
}

func findTakesValue(opt string) bool {
	switch opt {
	case "-name", "-iname", "-path", "-ipath", "-regex", "-iregex", "-type", "-xtype", "-newer",
		"-anewer", "-cnewer", "-user", "-group", "-perm", "-size", "-mtime", "-mmin", "-atime",
		"-amin", "-ctime", "-cmin", "-maxdepth", "-mindepth", "-wholename", "-iwholename",
		"-lname", "-ilname", "-samefile", "-inum", "-links", "-uid", "-gid", "-printf", "-fstype",
		"-context", "-used", "-regextype", "-files0-from", "-newermt", "-newerat", "-newerct":
		return true
	}
	return strings.HasPrefix(opt, "-newer")
}

// git: the global options say where it works and may inject configuration
// that runs programs.
func (w *walker) git(c *Command) {
	args := c.Argv
	i := 1
	for i < len(args) {
		a := args[i]
		v := a.Value
		if a.Dynamic {
			if looksLikeOption(v) || strings.HasPrefix(strings.Trim(v, `"'`), "-") {
				w.unknownAt(c.Pos, "git option is not literal", v)
			}
			break
		}
		val := func() Arg {
			if _, after, ok := strings.Cut(v, "="); ok && strings.HasPrefix(v, "--") {
				return Arg{Value: after}
			}
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return Arg{}
		}
		switch {
		case v == "-C":
			d := val()
			if d.Dynamic {
				c.Cwd = ""
			} else if d.Value != "" {
				c.Cwd = resolveIn(d, c.Cwd).Path
			}
		case v == "-c":
			kv := val()
			key, value, _ := strings.Cut(kv.Value, "=")
			if kv.Dynamic || gitConfigRunsCode(key, value) {
				w.unknownAt(c.Pos, "git -c sets a program that git runs", kv.Value)
			}
		case strings.HasPrefix(v, "--config-env"):
			kv := val()
			key, _, _ := strings.Cut(kv.Value, "=")
			if kv.Dynamic || gitConfigRunsCode(key, "!") {
				w.unknownAt(c.Pos, "git --config-env sets a program that git runs", kv.Value)
			}
		case v == "-p" || v == "--paginate":
			w.unknownAt(c.Pos, "git -p runs the configured pager", c.Text)
		case strings.HasPrefix(v, "--exec-path="):
			w.unknownAt(c.Pos, "git --exec-path runs programs from another directory", v)
		case v == "--git-dir" || strings.HasPrefix(v, "--git-dir=") || v == "--work-tree" || strings.HasPrefix(v, "--work-tree="):
			d := val()
			if strings.HasPrefix(v, "--work-tree") {
				if d.Dynamic {
					c.Cwd = ""
				} else {
					c.Cwd = resolveIn(d, c.Cwd).Path
				}
			} else {
				// Writes land in that repository.
				wr := resolveIn(d, c.Cwd)
				wr.Tree = true
				c.Writes = append(c.Writes, wr)
			}
		case v == "--namespace" || v == "--super-prefix" || v == "--list-cmds":
			if !strings.Contains(v, "=") {
				val()
			}
		case strings.HasPrefix(v, "-"):
		default:
			c.Sub = i
			w.gitSub(c, i)
			return
		}
		i++
	}
}

// gitSub adds the files that some subcommands write.
func (w *walker) gitSub(c *Command, sub int) {
	switch c.Argv[sub].Value {
	case "diff", "log", "show", "format-patch", "whatchanged", "range-diff", "diff-tree", "diff-files", "diff-index":
		w.outputs(c, "--output", "-o", "--output-directory")
	case "archive", "bundle":
		w.outputs(c, "--output", "-o")
	case "clone":
		var ops []Arg
		args := c.Argv[sub+1:]
		for i := 0; i < len(args); i++ {
			v := args[i].Value
			switch {
			case args[i].Dynamic:
				ops = append(ops, args[i])
			case v == "-b" || v == "--branch" || v == "-o" || v == "--origin" || v == "--depth" || v == "--reference" || v == "-c" || v == "--config" || v == "--template" || v == "--separate-git-dir" || v == "-u" || v == "--upload-pack" || v == "-j" || v == "--jobs" || v == "--filter" || v == "--shallow-since" || v == "--shallow-exclude":
				i++
			case strings.HasPrefix(v, "-"):
			default:
				ops = append(ops, args[i])
			}
		}
		if len(ops) == 0 {
			return
		}
		dest := ops[len(ops)-1]
		if len(ops) == 1 {
			base := strings.TrimSuffix(path.Base(strings.TrimRight(dest.Value, "/")), ".git")
			if i := strings.LastIndexByte(base, ':'); i >= 0 {
				base = base[i+1:]
			}
			dest = Arg{Value: base, Dynamic: dest.Dynamic}
		}
		wr := w.resolveAt(c, dest)
		wr.Tree = true
		c.Writes = append(c.Writes, wr)
		c.WritesKnown = true
	case "worktree":
		if len(c.Argv) > sub+2 && c.Argv[sub+1].Value == "add" {
			for _, a := range c.Argv[sub+2:] {
				if a.Dynamic || !strings.HasPrefix(a.Value, "-") {
					wr := w.resolveAt(c, a)
					wr.Tree = true
					c.Writes = append(c.Writes, wr)
					break
				}
			}
		}
	}
	for _, a := range c.Argv[sub+1:] {
		if a.Dynamic {
			continue
		}
		if a.Value == "--ext-diff" || strings.HasPrefix(a.Value, "--exec=") || a.Value == "--exec" ||
			strings.HasPrefix(a.Value, "--upload-pack") || strings.HasPrefix(a.Value, "--receive-pack") ||
			strings.HasPrefix(a.Value, "--extcmd") || strings.HasPrefix(a.Value, "--tool") || a.Value == "-x" && c.Argv[sub].Value == "rebase" {
			w.unknownAt(c.Pos, "git option runs a program: "+a.Value, c.Text)
		}
		if strings.HasPrefix(a.Value, "ext::") {
			w.unknownAt(c.Pos, "git ext:: transport runs a command", a.Value)
		}
	}
}

// gitConfigRunsCode reports whether setting key to value makes git run a
// program.
func gitConfigRunsCode(key, value string) bool {
	k := strings.ToLower(key)
	switch k {
	case "core.pager", "core.editor", "core.fsmonitor", "core.sshcommand", "core.hookspath",
		"core.askpass", "core.gitproxy", "diff.external", "sequence.editor", "gpg.program",
		"uploadpack.packobjectshook", "include.path", "credential.helper", "init.templatedir",
		"web.browser", "core.alternaterefscommand", "protocol.ext.allow", "protocol.allow", "core.worktree":
		return true
	}
	last := k[strings.LastIndexByte(k, '.')+1:]
	switch {
	case strings.HasPrefix(k, "alias."):
		return strings.HasPrefix(strings.TrimSpace(value), "!")
	case strings.HasPrefix(k, "pager."), strings.HasPrefix(k, "includeif."), strings.HasPrefix(k, "filter."):
		return true
	case last == "textconv" || last == "command" || last == "driver" || last == "helper" ||
		last == "program" || last == "cmd" || last == "uploadpack" || last == "receivepack" ||
		last == "proxy" || last == "path" && strings.HasPrefix(k, "man."):
		return true
	case strings.HasPrefix(k, "submodule.") && last == "update":
		return strings.HasPrefix(strings.TrimSpace(value), "!")
	}
	return false
}

// npm, yarn and pnpm: a script from package.json is read and classified.
func (w *walker) npm(s *syntax.Stmt, c *Command, base string) {
	args := c.Argv[1:]
	dir := Arg{Value: "."}
	var ops []Arg
	for i := 0; i < len(args); i++ {
		a := args[i]
		v := a.Value
		if a.Dynamic {
			ops = append(ops, a)
			continue
		}
		switch {
		case v == "--prefix" || v == "-C" || v == "--dir" || v == "--cwd":
			if i+1 < len(args) {
				dir = args[i+1]
				i++
			}
		case strings.HasPrefix(v, "--prefix=") || strings.HasPrefix(v, "--dir=") || strings.HasPrefix(v, "--cwd="):
			_, d, _ := strings.Cut(v, "=")
			dir = Arg{Value: d}
		case v == "--filter" || v == "-F" || v == "-w" || v == "--workspace" || v == "--registry" || v == "--loglevel" || v == "--userconfig" || v == "--cache":
			i++
		case v == "--":
			ops = append(ops, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(v, "-"):
		default:
			ops = append(ops, a)
		}
	}
	wd := resolveIn(dir, c.Cwd)
	if wd.Resolved {
		c.Cwd = wd.Path
	} else {
		c.Cwd = ""
	}
	if len(ops) == 0 || ops[0].Dynamic {
		return
	}
	for i, a := range c.Argv {
		if i > 0 && a.Value == ops[0].Value {
			c.Sub = i
			break
		}
	}
	script := ""
	sub := ops[0].Value
	switch {
	case sub == "run" || sub == "run-script" || sub == "rum" || sub == "urn":
		if len(ops) < 2 || ops[1].Dynamic {
			return
		}
		script = ops[1].Value
	case sub == "test" || sub == "t" || sub == "tst" || sub == "start" || sub == "stop" || sub == "restart":
		if sub == "t" || sub == "tst" {
			sub = "test"
		}
		script = sub
	case base == "yarn" && !yarnCommand(sub), base == "pnpm" && !pnpmCommand(sub):
		script = sub
	default:
		return
	}
	if w.opts.ReadFile == nil || c.Cwd == "" {
		return
	}
	pj := path.Join(c.Cwd, "package.json")
	data, err := w.opts.ReadFile(pj)
	if err != nil {
		return
	}
	var pkg struct {
		Scripts map[string]string `json:"scripts"`
	}
	if json.Unmarshal(data, &pkg) != nil {
		w.unknownAt(c.Pos, "package.json does not parse", pj)
		return
	}
	body, ok := pkg.Scripts[script]
	if !ok {
		if script == "start" {
			body = "node server.js"
		} else {
			c.Script = pj
			return // npm fails: missing script
		}
	}
	c.Script = pj
	c.WritesKnown = true
	w.record(*c)
	c.Argv = nil
	w.subshell(func() {
		w.st.cwd = wd.Path
		for _, name := range []string{"pre" + script, script, "post" + script} {
			text, ok := pkg.Scripts[name]
			if name == script {
				text, ok = body, true
			}
			if ok {
				w.code(s.Pos(), base+" run "+name, text)
			}
		}
	})
}

func yarnCommand(sub string) bool {
	switch sub {
	case "add", "install", "remove", "upgrade", "up", "init", "info", "why", "list", "bin", "cache",
		"config", "create", "dlx", "exec", "global", "import", "licenses", "link", "login", "logout",
		"node", "outdated", "owner", "pack", "policies", "publish", "tag", "team", "unlink", "version",
		"versions", "workspace", "workspaces", "audit", "autoclean", "check", "help", "plugin", "set",
		"npm", "constraints", "dedupe", "explain", "patch", "patch-commit", "rebuild", "search",
		"stage", "unplug", "upgrade-interactive", "generate-lock-entry":
		return true
	}
	return false
}

func pnpmCommand(sub string) bool {
	switch sub {
	case "add", "install", "i", "update", "up", "upgrade", "remove", "rm", "uninstall", "un", "link", "ln",
		"unlink", "import", "rebuild", "rb", "prune", "fetch", "patch", "patch-commit", "exec", "dlx",
		"create", "publish", "pack", "list", "ls", "ll", "outdated", "why", "audit", "licenses", "store",
		"env", "setup", "init", "deploy", "server", "config", "c", "bin", "root", "recursive", "m",
		"install-test", "it", "dedupe", "doctor", "cat-file", "cat-index", "find-hash", "self-update":
		return true
	}
	return false
}

// pip install writes into the environment it belongs to.
func (w *walker) pip(c *Command) {
	pipValue := []string{"--log", "--proxy", "--cache-dir", "--python", "--retries", "--timeout",
		"--exists-action", "--trusted-host", "--cert", "--client-cert", "-r", "--requirement",
		"-c", "--constraint", "-t", "--target", "--prefix", "--root", "-d", "--dest", "-w",
		"--wheel-dir", "-i", "--index-url", "--extra-index-url", "-f", "--find-links",
		"--platform", "--python-version", "--implementation", "--abi", "--src", "--upgrade-strategy",
		"--progress-bar", "--report", "--config-settings", "-C", "--global-option", "-e", "--editable"}
	// program found a subcommand without knowing pip's value options:
	// find it again, skipping their values.
	c.Sub = 0
	for i := 1; i < len(c.Argv); i++ {
		v := c.Argv[i].Value
		if strings.HasPrefix(v, "-") {
			if !strings.Contains(v, "=") && contains(pipValue, v) {
				i++
			}
			continue
		}
		c.Sub = i
		break
	}
	if c.Sub == 0 {
		return
	}
	sub := c.Argv[c.Sub].Value
	args := c.Argv[c.Sub+1:]
	tree := func(a Arg) {
		wr := w.resolveAt(c, a)
		wr.Tree = true
		c.Writes = append(c.Writes, wr)
	}
	switch sub {
	case "download", "wheel":
		c.WritesKnown = true
		if d, ok := optValue(args, "-d", "--dest", "-w", "--wheel-dir"); ok {
			tree(d)
		} else {
			tree(Arg{Value: "."})
		}
		return
	case "install", "uninstall":
	default:
		return
	}
	c.WritesKnown = true
	if d, ok := optValue(args, "-e", "--editable"); ok {
		tree(d)
	}
	for _, name := range []string{"-t", "--target", "--prefix", "--root"} {
		if d, ok := optValue(args, name); ok {
			tree(d)
			return
		}
	}
	for _, a := range args {
		if a.Value == "--user" {
			if home, ok := w.lookup("HOME"); ok {
				tree(Arg{Value: path.Join(home, ".local")})
			} else {
				c.Writes = append(c.Writes, Write{Path: "~/.local", Tree: true})
			}
			return
		}
	}
	prog := c.Python
	if prog == "" {
		prog = c.Argv[0].Value
	}
	if strings.Contains(prog, "/") {
		// A venv's own pip or python: <venv>/bin/pip.
		tree(Arg{Value: path.Dir(path.Dir(prog))})
		return
	}
	for _, name := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if v, ok := w.lookup(name); ok && v != "" {
			tree(Arg{Value: v})
			return
		}
	}
	c.Writes = append(c.Writes, Write{Path: "<system site-packages>", Tree: true})
}

// runner handles the tools that run another program in a prepared
// environment: npx prettier, uv run pytest, poetry run python manage.py,
// bundle exec rake. The program after them is classified as a program of
// its own; the runner itself is recorded too, since it may install what
// it runs. It reports whether c was handled.
func (w *walker) runner(s *syntax.Stmt, c *Command, base string) bool {
	var rest []Arg
	var values []string
	switch {
	case base == "npx" || base == "pnpx" || base == "bunx":
		rest, values = c.Argv[1:], []string{"-p", "--package", "--call", "-c"}
	case c.Sub > 0 && runsProgram(base, c.Argv[c.Sub].Value):
		rest = c.Argv[c.Sub+1:]
		values = []string{"-n", "--name", "-p", "--prefix", "--with", "--python", "--package", "--env-file", "--directory", "--project", "-e", "--env", "--from", "--call", "-c"}
	default:
		return false
	}
	outer := *c
	outer.WritesKnown = false
	w.record(outer)
	c.Argv = nil
	var code *Arg
	i := 0
	for ; i < len(rest); i++ {
		a := rest[i]
		if a.Dynamic {
			break
		}
		if a.Value == "--" {
			i++
			break
		}
		if !strings.HasPrefix(a.Value, "-") {
			break
		}
		if (a.Value == "-c" || a.Value == "--call") && i+1 < len(rest) {
			code = &rest[i+1]
		}
		if contains(values, a.Value) {
			i++
		}
	}
	if code != nil {
		if code.Dynamic {
			w.unknownAt(outer.Pos, base+" -c of a non-literal", code.Value)
			return true
		}
		w.subshell(func() { w.code(s.Pos(), base+" -c", code.Value) })
		return true
	}
	if i >= len(rest) {
		return true
	}
	next := outer
	next.Argv = rest[i:]
	next.Sub = 0
	next.Wrappers = append(append([]string(nil), outer.Wrappers...), base)
	w.command(s, next)
	return true
}

// runsProgram reports the subcommands that run another program.
func runsProgram(base, sub string) bool {
	switch base {
	case "poetry", "uv", "pipenv", "pdm", "hatch", "rye", "conda", "mamba", "micromamba", "pixi":
		return sub == "run"
	case "bundle", "bundler":
		return sub == "exec"
	case "pnpm":
		return sub == "exec" || sub == "dlx"
	case "yarn":
		return sub == "dlx" || sub == "exec"
	case "npm":
		return sub == "exec" || sub == "x"
	case "bun":
		return sub == "x"
	}
	return false
}

// venv writes the environment directory it is given.
func (w *walker) venv(c *Command) {
	c.WritesKnown = true
	for _, a := range c.Argv[1:] {
		if a.Dynamic || !strings.HasPrefix(a.Value, "-") {
			wr := w.resolveAt(c, a)
			wr.Tree = true
			c.Writes = append(c.Writes, wr)
			return
		}
	}
}
