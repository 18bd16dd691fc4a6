package parser

import (
	"encoding/json"
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// globalValueOptions lists, for programs with subcommands, the options
// before the subcommand that take a separate value.
func globalValueOptions(base string) []string {
	switch base {
	case "docker", "podman", "nerdctl":
		return []string{"-H", "--host", "-c", "--context", "--config", "-l", "--log-level", "--tlscacert", "--tlscert", "--tlskey", "--namespace", "-n", "--url", "--connection", "--identity"}
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
		if (base == "service" || base == "invoke-rc.d" || base == "rc-service") && i+1 < len(argv) {
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
// that runs programs. An alias (from -c, the environment, the step's own
// `git config` or the configuration files) is expanded into what it runs.
func (w *walker) git(s *syntax.Stmt, c *Command) {
	w.gitEnv(c)
	args := c.Argv
	var cs []gitEntry
	gitDir := ""
	var cfg *gitConfig
	config := func() *gitConfig {
		if cfg == nil {
			cfg = w.gitConfigOf(c, gitDir, cs)
		}
		return cfg
	}
	expanded := map[string]bool{}
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
			key, value, ok := strings.Cut(kv.Value, "=")
			if kv.Dynamic || gitConfigRunsCode(key, value) {
				w.unknownAt(c.Pos, "git -c sets a program that git runs", kv.Value)
			}
			if !ok {
				value = "true"
			}
			cs = append(cs, gitEntry{key: gitKey(key), value: value, dynamic: kv.Dynamic})
		case strings.HasPrefix(v, "--config-env"):
			kv := val()
			key, _, _ := strings.Cut(kv.Value, "=")
			if kv.Dynamic || gitConfigRunsCode(key, "!") {
				w.unknownAt(c.Pos, "git --config-env sets a program that git runs", kv.Value)
			}
			// Its value comes from the environment.
			cs = append(cs, gitEntry{key: gitKey(key), dynamic: true})
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
				if wr.Resolved {
					gitDir = wr.Path
				}
			}
		case v == "--namespace" || v == "--super-prefix" || v == "--list-cmds":
			if !strings.Contains(v, "=") {
				val()
			}
		case strings.HasPrefix(v, "-"):
		default:
			c.Sub = i
			if gitCommand(v) || expanded[strings.ToLower(v)] {
				w.gitSub(s, c, i, config)
				return
			}
			// Not a command of git's own: an alias, else a git-NAME
			// program, else nothing. An alias git cannot see here
			// may be any command, a push too.
			vals := config().lookup("alias." + strings.ToLower(v))
			if len(vals) == 0 {
				if config().unknown {
					c.Argv[i].Dynamic = true
				}
				w.gitSub(s, c, i, config)
				return
			}
			al := vals[0]
			if al.dynamic {
				c.Argv[i].Dynamic = true
				return
			}
			if code, ok := strings.CutPrefix(strings.TrimSpace(al.value), "!"); ok {
				// A shell alias: git runs it with sh -c.
				c.Script = "the git alias " + v
				w.subshell(func() { w.code(s.Pos(), "git alias "+v, code) })
				return
			}
			words, ok := splitGitCmdline(al.value)
			if !ok || len(words) == 0 {
				c.Argv[i].Dynamic = true
				return
			}
			expanded[strings.ToLower(v)] = true
			next := append([]Arg(nil), args[:i]...)
			for _, wd := range words {
				next = append(next, Arg{Value: wd})
			}
			next = append(next, args[i+1:]...)
			c.Argv, args = next, next
			c.Sub = 0
			cfg = nil // the alias may bring -c options of its own
			continue
		}
		i++
	}
}

// gitEnv applies the variables that move where git works: GIT_WORK_TREE
// is --work-tree, GIT_DIR and the object and common directories are
// repositories it writes, GIT_INDEX_FILE a file it writes.
func (w *walker) gitEnv(c *Command) {
	if v, ok := w.envValue(c, "GIT_WORK_TREE"); ok {
		if v.Dynamic {
			c.Cwd = ""
		} else {
			c.Cwd = resolveIn(v, c.Cwd).Path
		}
	}
	for _, name := range []string{"GIT_DIR", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY", "GIT_INDEX_FILE"} {
		if v, ok := w.envValue(c, name); ok {
			wr := resolveIn(v, c.Cwd)
			wr.Tree = name != "GIT_INDEX_FILE"
			c.Writes = append(c.Writes, wr)
		}
	}
}

// gitHooks makes a git command unknown code when a command before it in
// the step wrote into a repository's own files (.git/hooks, .git/config)
// or over a tree that holds the repository: git runs the hooks and the
// programs that configuration names, which the parser did not see.
func (w *walker) gitHooks(c *Command) {
	if len(w.shared.repoWrites) > 0 {
		w.unknownAt(c.Pos, "git may run hooks or configuration that the step wrote ("+w.shared.repoWrites[0]+")", c.Text)
		return
	}
	for _, t := range w.shared.treeWrites {
		if c.Cwd != "" && (c.Cwd == t || strings.HasPrefix(c.Cwd+"/", t+"/")) {
			w.unknownAt(c.Pos, "git may run hooks or configuration that the step wrote ("+t+")", c.Text)
			return
		}
	}
}

// gitCodeOpts lists, per subcommand, the options whose value is shell
// code git runs, and the short letter of each (0 for none).
var gitCodeOpts = map[string][]struct {
	long  string
	short byte
}{
	"rebase":        {{"--exec", 'x'}},
	"difftool":      {{"--extcmd", 'x'}},
	"filter-branch": {{"--setup", 0}, {"--env-filter", 0}, {"--tree-filter", 0}, {"--index-filter", 0}, {"--parent-filter", 0}, {"--msg-filter", 0}, {"--commit-filter", 0}, {"--tag-name-filter", 0}},
}

// gitCode walks the code that the options and operands of git's
// subcommands run: rebase --exec, difftool --extcmd, the filters of
// filter-branch, submodule foreach and bisect run.
func (w *walker) gitCode(s *syntax.Stmt, c *Command, sub int) {
	name := c.Argv[sub].Value
	args := c.Argv[sub+1:]
	cwd := c.Cwd
	run := func(via string, code Arg) {
		if code.Dynamic {
			w.unknownAt(c.Pos, "git "+via+" runs a command that is not literal", code.Value)
			return
		}
		w.subshell(func() {
			w.st.cwd = cwd
			// What git tells the command: $LOCAL, $sm_path, $GIT_COMMIT.
			for _, v := range []string{"LOCAL", "REMOTE", "MERGED", "BASE", "name", "sm_path", "displaypath", "sha1",
				"toplevel", "path", "GIT_COMMIT", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE",
				"GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_COMMITTER_DATE"} {
				w.setVar(v, "", false)
				w.export(v)
			}
			w.code(s.Pos(), "git "+via, code.Value)
		})
	}
	if name == "filter-branch" {
		// Every filter runs in DIR/t (DIR is -d, by default
		// .git-rewrite at the top level, where filter-branch must run).
		dir := Arg{Value: ".git-rewrite"}
		if d, ok := optValue(args, "-d"); ok {
			dir = d
		}
		wr := w.resolveAt(c, dir)
		wr.Tree = true
		c.Writes = append(c.Writes, wr)
		cwd = ""
		if wr.Resolved {
			cwd = path.Join(wr.Path, "t")
		}
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a.Dynamic {
			if looksLikeOption(a.Value) {
				w.unknownAt(c.Pos, "git "+name+" option is not literal", a.Value)
			}
			continue
		}
		if a.Value == "--" {
			break
		}
		for _, o := range gitCodeOpts[name] {
			var code *Arg
			consumed := false
			switch {
			case a.Value == o.long && i+1 < len(args):
				code, consumed = &args[i+1], true
			case strings.HasPrefix(a.Value, o.long+"="):
				code = &Arg{Value: a.Value[len(o.long)+1:]}
			case o.short != 0 && len(a.Value) > 1 && a.Value[0] == '-' && a.Value[1] != '-' && strings.IndexByte(a.Value, o.short) > 0:
				// A cluster: the letter takes the rest of the word, or
				// the next one.
				rest := a.Value[strings.IndexByte(a.Value, o.short)+1:]
				if rest != "" {
					code = &Arg{Value: rest}
				} else if i+1 < len(args) {
					code, consumed = &args[i+1], true
				}
			}
			if code == nil {
				continue
			}
			text := *code
			if name == "difftool" && !text.Dynamic {
				text.Value += ` "$LOCAL" "$REMOTE"`
			}
			run(name+" "+o.long, text)
			if consumed {
				i++
			}
			break
		}
	}
	// Subcommands whose operands are a command: one word is shell code,
	// several are a command and its arguments.
	var words []Arg
	switch name {
	case "submodule":
		ops := args
		for len(ops) > 0 && !ops[0].Dynamic && strings.HasPrefix(ops[0].Value, "-") {
			ops = ops[1:]
		}
		if len(ops) == 0 || ops[0].Dynamic || ops[0].Value != "foreach" {
			return
		}
		ops = ops[1:]
		for len(ops) > 0 && !ops[0].Dynamic && strings.HasPrefix(ops[0].Value, "-") {
			ops = ops[1:]
		}
		if len(ops) == 1 {
			run("submodule foreach", ops[0])
			return
		}
		words = ops
	case "bisect":
		if len(args) == 0 || args[0].Dynamic || args[0].Value != "run" {
			return
		}
		words = args[1:]
	default:
		return
	}
	if len(words) == 0 {
		return
	}
	next := *c
	next.Argv = words
	next.Sub = 0
	next.Writes = nil
	next.WritesKnown = false
	next.Wrappers = append(append([]string(nil), c.Wrappers...), "git "+name)
	w.subshell(func() { w.command(s, next) })
}

// gitSub adds the files that some subcommands write.
func (w *walker) gitSub(s *syntax.Stmt, c *Command, sub int, config func() *gitConfig) {
	w.gitHooks(c)
	w.gitCode(s, c, sub)
	args := c.Argv[sub+1:]
	switch c.Argv[sub].Value {
	case "config":
		w.gitConfigCommand(c, sub) // what later commands of the step see
		w.gitConfig(c, args)       // a setting that makes git run a program
	case "push", "send-pack", "http-push":
		w.gitPushRefs(c, sub, config())
	case "subtree":
		w.gitSubtree(c, sub)
	case "diff", "log", "show", "format-patch", "whatchanged", "range-diff", "diff-tree", "diff-files", "diff-index":
		w.outputs(c, "--output", "-o", "--output-directory")
	case "archive":
		w.outputs(c, "--output", "-o")
	case "apply":
		// --unsafe-paths lets the patch name files outside the work
		// tree (--directory puts them anywhere): not known before it runs.
		for _, a := range args {
			if a.Dynamic || a.Value == "--unsafe-paths" {
				c.Writes = append(c.Writes, Write{Path: "the paths in the patch (git apply --unsafe-paths)"})
				break
			}
		}
	case "bundle":
		// git bundle create FILE REVS… writes FILE.
		_, ops, _ := optSpec{}.split(args)
		if len(ops) > 1 && !ops[0].Dynamic && ops[0].Value == "create" {
			c.Writes = append(c.Writes, w.resolveAt(c, ops[1]))
			c.WritesKnown = true
		} else if len(ops) > 0 && ops[0].Dynamic {
			c.Writes = append(c.Writes, Write{Path: ops[0].Value})
		}
	case "init":
		// git init [DIR] makes DIR/.git (or DIR, --bare), and
		// --separate-git-dir the repository there.
		opts, ops, _ := optSpec{value: "b", longValue: []string{"--initial-branch", "--object-format",
			"--ref-format", "--template", "--separate-git-dir"}}.split(args)
		dir := Arg{Value: "."}
		if len(ops) > 0 {
			dir = ops[0]
		}
		wr := w.resolveAt(c, dir)
		wr.Tree = true
		c.Writes = append(c.Writes, wr)
		if d, ok := has(opts, "--separate-git-dir"); ok {
			wr := w.resolveAt(c, d)
			wr.Tree = true
			c.Writes = append(c.Writes, wr)
		}
		c.WritesKnown = true
		if _, ok := has(opts, "--template"); ok {
			w.unknownAt(c.Pos, "git init --template installs hooks from a directory the parser cannot read", c.Text)
		}
	case "checkout-index":
		// --prefix=P writes P followed by each path: into the directory
		// P names, or beside it.
		if p, ok := optValue(args, "--prefix"); ok {
			v := p.Value
			if !p.Dynamic && !strings.HasSuffix(v, "/") {
				v = path.Dir(v)
			}
			wr := w.resolveAt(c, Arg{Value: v, Dynamic: p.Dynamic})
			wr.Tree = true
			c.Writes = append(c.Writes, wr)
		}
	case "clone":
		var ops []Arg
		for i := 0; i < len(args); i++ {
			v := args[i].Value
			switch {
			case args[i].Dynamic:
				ops = append(ops, args[i])
			case v == "-b" || v == "--branch" || v == "-o" || v == "--origin" || v == "--depth" || v == "--reference" || v == "-c" || v == "--config" || v == "--template" || v == "--separate-git-dir" || v == "-u" || v == "--upload-pack" || v == "-j" || v == "--jobs" || v == "--filter" || v == "--shallow-since" || v == "--shallow-exclude":
				if v == "--template" {
					w.unknownAt(c.Pos, "git clone --template runs hooks from a directory the parser cannot read", c.Text)
				}
				if v == "--separate-git-dir" && i+1 < len(args) {
					wr := w.resolveAt(c, args[i+1])
					wr.Tree = true
					c.Writes = append(c.Writes, wr)
				}
				i++
			case strings.HasPrefix(v, "--template="):
				w.unknownAt(c.Pos, "git clone --template runs hooks from a directory the parser cannot read", c.Text)
			case strings.HasPrefix(v, "--separate-git-dir="):
				wr := w.resolveAt(c, Arg{Value: v[len("--separate-git-dir="):]})
				wr.Tree = true
				c.Writes = append(c.Writes, wr)
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
		// worktree add [-b B] PATH, worktree move OLD NEW: the new
		// working tree, wherever it is.
		if len(args) == 0 || args[0].Dynamic {
			return
		}
		_, ops, _ := optSpec{value: "bB", longValue: []string{"--reason"}}.split(args[1:])
		var dest *Arg
		switch {
		case args[0].Value == "add" && len(ops) > 0:
			dest = &ops[0]
		case args[0].Value == "move" && len(ops) > 1:
			dest = &ops[1]
		}
		if dest != nil {
			wr := w.resolveAt(c, *dest)
			wr.Tree = true
			c.Writes = append(c.Writes, wr)
		}
	}
	for _, a := range args {
		if a.Dynamic {
			continue
		}
		if a.Value == "--ext-diff" || (a.Value == "--exec" || strings.HasPrefix(a.Value, "--exec=")) && c.Argv[sub].Value != "rebase" ||
			strings.HasPrefix(a.Value, "--upload-pack") || strings.HasPrefix(a.Value, "--receive-pack") ||
			strings.HasPrefix(a.Value, "--tool") {
			w.unknownAt(c.Pos, "git option runs a program: "+a.Value, c.Text)
		}
		if strings.HasPrefix(a.Value, "ext::") {
			w.unknownAt(c.Pos, "git ext:: transport runs a command", a.Value)
		}
	}
}

// gitConfig: a key set to a program git runs (core.pager, alias.x=!…,
// core.hooksPath) runs it in the git commands after it, in this step and
// later ones.
func (w *walker) gitConfig(c *Command, args []Arg) {
	opts, ops, ok := optSpec{value: "ft", longValue: []string{"--file", "--blob", "--type", "--default", "--comment", "--value"}}.split(args)
	if !ok {
		w.unknownAt(c.Pos, "git config with an option that is not literal", c.Text)
		return
	}
	if _, read := has(opts, "--get", "--get-all", "--get-regexp", "--get-urlmatch", "-l", "--list", "--get-color",
		"--get-colorbool", "--unset", "--unset-all", "--rename-section", "--remove-section", "-e", "--edit"); read {
		return
	}
	if len(ops) > 0 && !ops[0].Dynamic {
		switch ops[0].Value {
		case "set":
			ops = ops[1:]
		case "get", "list", "unset", "rename-section", "remove-section", "edit":
			return
		}
	}
	if len(ops) < 2 {
		return
	}
	if ops[0].Dynamic || ops[1].Dynamic && gitConfigRunsCode(ops[0].Value, "!") ||
		!ops[1].Dynamic && gitConfigRunsCode(ops[0].Value, ops[1].Value) {
		w.unknownAt(c.Pos, "git config sets a program that git runs", c.Text)
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

// npm, yarn and pnpm: a script from package.json is read and classified,
// and so are the lifecycle scripts an install runs. The global modes
// write the global prefix, outside the workspace.
func (w *walker) npm(s *syntax.Stmt, c *Command, base string) {
	args := c.Argv[1:]
	dir := Arg{Value: "."}
	var ops []Arg
	global, ignoreScripts := false, false
	for i := 0; i < len(args); i++ {
		a := args[i]
		v := a.Value
		if a.Dynamic {
			ops = append(ops, a)
			continue
		}
		// Booleans take a separate true or false too (nopt).
		boolVal := func() string {
			if _, after, ok := strings.Cut(v, "="); ok {
				return after
			}
			if i+1 < len(args) && !args[i+1].Dynamic && (args[i+1].Value == "true" || args[i+1].Value == "false") {
				i++
				return args[i].Value
			}
			if i+1 < len(args) && args[i+1].Dynamic && looksLikeOption(args[i+1].Value) {
				return args[i+1].Value
			}
			return "true"
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
		case v == "-g" || v == "--global" || strings.HasPrefix(v, "--global="):
			global = global || npmTrue(boolVal())
		case v == "--location" || strings.HasPrefix(v, "--location="):
			loc := ""
			if _, after, ok := strings.Cut(v, "="); ok {
				loc = after
			} else if i+1 < len(args) {
				i++
				loc = args[i].Value
				global = global || args[i].Dynamic
			}
			global = global || loc == "global"
		case v == "--ignore-scripts" || strings.HasPrefix(v, "--ignore-scripts="):
			ignoreScripts = npmTrue(boolVal())
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
	sub := ""
	switch {
	case len(ops) > 0 && !ops[0].Dynamic:
		sub = ops[0].Value
	case len(ops) == 0 && base == "yarn":
		sub = "install" // yarn alone installs
	}
	runs := slices.Contains([]string{"run", "run-script", "rum", "urn", "test", "t", "tst", "start", "stop", "restart", "exec", "x"}, sub) ||
		base == "yarn" && !yarnCommand(sub) || base == "pnpm" && !pnpmCommand(sub)
	if sub != "" && !runs && !npmReadsOnly(sub) {
		// The settings only matter to what installs.
		cfg := w.npmConfig(c)
		global = global || npmTrue(cfg["global"]) || cfg["location"] == "global"
		if _, ok := cfg["ignore-scripts"]; ok && !ignoreScripts {
			ignoreScripts = npmTrue(cfg["ignore-scripts"])
		}
	}
	if global && len(ops) > 0 && (sub == "" || !npmReadsOnly(sub)) {
		c.Writes = append(c.Writes, Write{Path: "<" + base + " global prefix>", Tree: true})
	}
	if len(ops) > 0 && ops[0].Dynamic || sub == "" {
		return
	}
	for i, a := range c.Argv {
		if i > 0 && len(ops) > 0 && a.Value == ops[0].Value {
			c.Sub = i
			break
		}
	}
	if hooks := npmLifecycle(base, sub); hooks != nil && !ignoreScripts && !global {
		w.npmLifecycle(s, c, base, hooks)
		return
	}
	script := ""
	if c.Cwd != "" && (sub == "pkg" && len(ops) > 1 && (ops[1].Dynamic || ops[1].Value != "get") || sub == "set-script" || sub == "init" || sub == "create") {
		// These rewrite package.json, scripts and all.
		c.Writes = append(c.Writes, w.resolveAt(c, Arg{Value: "package.json"}))
	}
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
	pkg, pj, ok := w.packageJSON(c)
	if !ok {
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

// packageJSON is what the parser reads of a package.json.
type packageJSON struct {
	Scripts              map[string]string `json:"scripts"`
	Dependencies         map[string]any    `json:"dependencies"`
	DevDependencies      map[string]any    `json:"devDependencies"`
	OptionalDependencies map[string]any    `json:"optionalDependencies"`
}

// packageJSON reads the package.json in c's directory; ok is false when
// there is none to read (a file that does not parse, or that the step
// wrote first, is unknown code).
func (w *walker) packageJSON(c *Command) (pkg packageJSON, file string, ok bool) {
	if c.Cwd == "" {
		return pkg, "", false
	}
	pj := path.Join(c.Cwd, "package.json")
	if real := w.locate(Arg{Value: pj}, "", true); real.Resolved && w.changed(real.Path) == rewritten {
		w.runsChanged(c, pj) // the step writes it first: what it runs is not known
		return pkg, "", false
	}
	if w.opts.ReadFile == nil {
		return pkg, "", false
	}
	data, err := w.opts.ReadFile(pj)
	if err != nil {
		return pkg, "", false
	}
	if json.Unmarshal(data, &pkg) != nil {
		w.unknownAt(c.Pos, "package.json does not parse", pj)
		return pkg, "", false
	}
	return pkg, pj, true
}

// npmLifecycle returns the scripts of a package that the subcommand runs
// in it, or nil.
func npmLifecycle(base, sub string) []string {
	install := []string{"preinstall", "install", "postinstall", "preprepare", "prepare", "postprepare"}
	switch sub {
	case "install", "i", "in", "ins", "inst", "insta", "instal", "isnt", "isntall", "add", "ci", "clean-install",
		"install-clean", "ic", "rebuild", "rb", "install-test", "it", "install-ci-test", "cit", "update", "up", "upgrade", "udpate":
		if base == "yarn" && (sub == "i" || sub == "ci") {
			return nil // not yarn commands: scripts of those names
		}
		return install
	case "pack":
		return []string{"prepack", "prepare", "postpack"}
	case "version":
		return []string{"preversion", "version", "postversion"}
	}
	return nil
}

// npmLifecycle walks the lifecycle scripts an install runs: the
// package's own, and those of its direct dependencies whose package.json
// can be read under node_modules.
func (w *walker) npmLifecycle(s *syntax.Stmt, c *Command, base string, hooks []string) {
	pkg, pj, ok := w.packageJSON(c)
	if !ok {
		return
	}
	walk := func(dir string, scripts map[string]string, via string, names []string) {
		w.subshell(func() {
			w.st.cwd = dir
			for _, name := range names {
				if text, ok := scripts[name]; ok && text != "" {
					w.code(s.Pos(), base+" "+via+" "+name, text)
				}
			}
		})
	}
	walk(c.Cwd, pkg.Scripts, "lifecycle "+pj, hooks)
	if hooks[0] != "preinstall" {
		return
	}
	var deps []string
	for _, m := range []map[string]any{pkg.Dependencies, pkg.DevDependencies, pkg.OptionalDependencies} {
		for name := range m {
			deps = append(deps, name)
		}
	}
	slices.Sort(deps)
	deps = slices.Compact(deps)
	for _, name := range deps[:min(len(deps), 500)] {
		if strings.Contains(name, "..") {
			continue
		}
		dir := path.Join(c.Cwd, "node_modules", name)
		data, err := w.opts.ReadFile(path.Join(dir, "package.json"))
		if err != nil {
			continue
		}
		var dep packageJSON
		if json.Unmarshal(data, &dep) != nil {
			continue
		}
		walk(dir, dep.Scripts, "lifecycle of "+name, []string{"preinstall", "install", "postinstall"})
	}
}

// npmReadsOnly reports the subcommands that only read, in the global
// prefix as anywhere.
func npmReadsOnly(sub string) bool {
	switch sub {
	case "ls", "list", "ll", "la", "root", "bin", "prefix", "outdated", "config", "c", "view", "info", "show", "v",
		"search", "s", "help", "explain", "why", "query", "doctor", "fund", "ping", "whoami", "audit":
		return true
	}
	return false
}

// npmTrue reports whether an npm boolean setting is on: anything but
// false (and its empty and null spellings).
func npmTrue(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "false", "0", "null", "undefined", "no":
		return false
	}
	return true
}

// npmConfig returns the settings that npm (and pnpm and yarn 1, which read
// the same) takes from the environment (npm_config_NAME, in any case) and
// from the .npmrc files of the project and the user: the keys global,
// location and ignore-scripts. A value known only at run time is "?".
func (w *walker) npmConfig(c *Command) map[string]string {
	cfg := map[string]string{}
	keys := []string{"global", "location", "ignore-scripts"}
	read := func(file string) {
		if w.opts.ReadFile == nil {
			return
		}
		data, err := w.opts.ReadFile(file)
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || line[0] == '#' || line[0] == ';' {
				continue
			}
			k, v, _ := strings.Cut(line, "=")
			k = strings.ToLower(strings.TrimSpace(k))
			if !strings.Contains(line, "=") {
				v = "true"
			}
			if slices.Contains(keys, k) {
				cfg[k] = strings.Trim(strings.TrimSpace(v), `"'`)
			}
		}
	}
	if home, ok := w.lookup("HOME"); ok && strings.HasPrefix(home, "/") {
		read(path.Join(home, ".npmrc"))
	}
	if c.Cwd != "" {
		read(path.Join(c.Cwd, ".npmrc"))
	}
	for _, k := range keys {
		for _, name := range []string{"npm_config_" + k, "NPM_CONFIG_" + strings.ToUpper(k),
			"npm_config_" + strings.ReplaceAll(k, "-", "_"), "NPM_CONFIG_" + strings.ToUpper(strings.ReplaceAll(k, "-", "_"))} {
			if v, ok := w.envValue(c, name); ok {
				if v.Dynamic {
					// Known only at run time: the side that protects.
					cfg[k] = map[string]string{"global": "true", "location": "global", "ignore-scripts": "false"}[k]
				} else {
					cfg[k] = v.Value
				}
			}
		}
	}
	return cfg
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
	tree := func(a Arg) { w.writeTree(c, a) }
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

// writeTree records that c writes the tree at a.
func (w *walker) writeTree(c *Command, a Arg) {
	wr := w.resolveAt(c, a)
	wr.Tree = true
	c.Writes = append(c.Writes, wr)
}

// installTarget adds the directory a package manager installs into when
// an option or a variable names it (cargo install --root, gem install
// --install-dir, dotnet tool install --tool-path) or a mode sends it
// outside the workspace (uv pip install --system, dotnet tool install
// -g). The policy decides the default target of each by its rules.
func (w *walker) installTarget(c *Command, base string) {
	if c.Sub == 0 || c.Argv[c.Sub].Dynamic {
		return
	}
	sub := c.Argv[c.Sub].Value
	args := c.Argv[c.Sub+1:]
	tree := func(a Arg) { w.writeTree(c, a) }
	env := func(names ...string) (Arg, bool) {
		for _, n := range names {
			if v, ok := w.envValue(c, n); ok {
				return v, true
			}
		}
		return Arg{}, false
	}
	system := func() { c.Writes = append(c.Writes, Write{Path: "<system site-packages>", Tree: true}) }
	switch {
	case base == "cargo" && (sub == "install" || sub == "uninstall"):
		if d, ok := optValue(args, "--root"); ok {
			tree(d)
		} else if d, ok := env("CARGO_INSTALL_ROOT", "CARGO_HOME"); ok {
			tree(d)
		}
	case base == "uv" && sub == "pip":
		if len(args) == 0 || args[0].Dynamic || !slices.Contains([]string{"install", "sync", "uninstall"}, args[0].Value) {
			return
		}
		rest := args[1:]
		if d, ok := optValue(rest, "--target", "--prefix"); ok {
			tree(d)
			return
		}
		for _, a := range rest {
			if a.Value == "--system" || a.Value == "--break-system-packages" {
				system()
				return
			}
		}
		if v, ok := env("UV_SYSTEM_PYTHON", "UV_BREAK_SYSTEM_PACKAGES"); ok && npmTrue(v.Value) {
			system()
			return
		}
		py, ok := optValue(rest, "--python", "-p")
		if !ok {
			py, ok = env("UV_PYTHON")
		}
		switch {
		case ok && !py.Dynamic && strings.Contains(py.Value, "/"):
			// An interpreter by path: the environment it belongs to.
			tree(Arg{Value: path.Dir(path.Dir(py.Value))})
		case ok:
			system() // a version or a name: any interpreter uv finds
		default:
			if v, ok := env("VIRTUAL_ENV", "CONDA_PREFIX"); ok {
				tree(v)
			}
		}
	case (base == "gem" || base == "bundle" || base == "bundler") && (sub == "install" || sub == "update" || sub == "uninstall" || sub == "cleanup" || sub == "pristine"):
		for _, name := range []string{"-i", "--install-dir", "-n", "--bindir", "--path"} {
			if d, ok := optValue(args, name); ok {
				tree(d)
			}
		}
		for _, a := range args {
			switch a.Value {
			case "--user-install":
				tree(Arg{Value: "~/.gem"})
				if home, ok := w.lookup("HOME"); ok {
					tree(Arg{Value: path.Join(home, ".local/share/gem")})
				}
			case "--deployment":
				tree(Arg{Value: "vendor/bundle"})
			}
		}
		if d, ok := env("GEM_HOME", "BUNDLE_PATH"); ok {
			tree(d)
		}
	case base == "dotnet" && sub == "tool":
		if len(args) == 0 || args[0].Dynamic || args[0].Value == "list" || args[0].Value == "search" {
			return
		}
		if d, ok := optValue(args, "--tool-path"); ok {
			tree(d)
		}
		for _, a := range args {
			if a.Value == "-g" || a.Value == "--global" {
				if home, ok := w.lookup("HOME"); ok {
					tree(Arg{Value: path.Join(home, ".dotnet/tools")})
				} else {
					c.Writes = append(c.Writes, Write{Path: "~/.dotnet/tools", Tree: true})
				}
			}
		}
	}
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

// divertWords sets [Command.Diverts] for dpkg-divert: every path it
// names (its operand, --divert's value), cleaned, unless it only lists
// or asks (--list, --listpackage, --truename, --help, -?, --version). A
// function or script of that name is taken at its word too.
func divertWords(c *Command) {
	c.Diverts = nil
	if len(c.Argv) == 0 || c.Argv[0].Dynamic || path.Base(c.Argv[0].Value) != "dpkg-divert" {
		return
	}
	var paths []string
	for _, a := range c.Argv[1:] {
		switch a.Value {
		case "--list", "--listpackage", "--truename", "--help", "-?", "--version":
			return
		}
		if strings.HasPrefix(a.Value, "/") {
			paths = append(paths, path.Clean(a.Value))
		}
	}
	c.Diverts = paths
}

// namedPaths sets [Command.NamedPaths] for a command whose writes are
// not known: the absolute paths its literal words name, as an operand
// (/dev/sda), after = (of=/dev/sdb, --target=/etc/x) or glued to a short
// option (-o/boot/x), cleaned.
func namedPaths(c *Command) {
	c.NamedPaths = nil
	if c.WritesKnown || len(c.Argv) == 0 {
		return
	}
	for _, a := range c.Argv[1:] {
		if a.Dynamic {
			continue
		}
		v := a.Value
		if i := strings.IndexByte(v, '='); i >= 0 && !strings.HasPrefix(v, "/") {
			v = v[i+1:]
		} else if len(v) > 2 && v[0] == '-' && v[1] != '-' && !strings.HasPrefix(v, "/") {
			if i := strings.IndexByte(v, '/'); i > 0 {
				v = v[i:] // -o/dev/sda
			}
		}
		if strings.HasPrefix(v, "/") {
			c.NamedPaths = append(c.NamedPaths, path.Clean(v))
		}
	}
}
