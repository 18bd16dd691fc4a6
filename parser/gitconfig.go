package parser

import (
	"errors"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// A git command's meaning depends on configuration: an alias turns `git p`
// into `git push`, and remote.<name>.push or push.default say what a push
// with no refspec updates. gitConfig gathers what the parser can know of
// it, in git's order of precedence: the system, global and repository
// files (read through [Options.ReadFile]), what the step itself set with
// `git config`, GIT_CONFIG_* in the environment, and -c.

// gitEntry is one configuration setting: key is the section and the
// variable name in lower case, with the subsection as written between
// them (remote.origin.push, alias.p).
type gitEntry struct {
	key, value string
	dynamic    bool // the value is known only at run time
}

// gitConfig is the configuration one git command sees, lowest precedence
// first.
type gitConfig struct {
	entries []gitEntry
	// unknown is set when a source could not be read, or the step may
	// have changed one before the command (a write the parser cannot
	// follow): a key it does not find may still be set.
	unknown bool
	// stale is set when the step itself may have changed a configuration
	// file before the command: what the parser read is not what git will.
	stale bool
}

// lookup returns the values of key, last (winning) first.
func (g *gitConfig) lookup(key string) []gitEntry {
	var out []gitEntry
	for i := len(g.entries) - 1; i >= 0; i-- {
		if g.entries[i].key == key {
			out = append(out, g.entries[i])
		}
	}
	return out
}

// gitKey normalises a configuration key: section and name fold case, a
// subsection keeps it.
func gitKey(k string) string {
	first := strings.IndexByte(k, '.')
	last := strings.LastIndexByte(k, '.')
	if first < 0 {
		return strings.ToLower(k)
	}
	return strings.ToLower(k[:first]) + k[first:last] + strings.ToLower(k[last:])
}

// gitConfigOf gathers the configuration that the git command c sees; cs
// holds its -c settings in order.
func (w *walker) gitConfigOf(c *Command, gitDir string, cs []gitEntry) *gitConfig {
	g := &gitConfig{}
	var readFile func(file string, depth int, must bool)
	readFile = func(file string, depth int, must bool) {
		if file == "" {
			g.unknown = true
			return
		}
		if w.opts.ReadFile == nil || depth > 10 {
			g.unknown = true
			return
		}
		data, err := w.opts.ReadFile(file)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) || must {
				g.unknown = true
			}
			return
		}
		for _, e := range parseGitConfig(string(data)) {
			if e.key == "include.path" || strings.HasPrefix(e.key, "includeif.") && strings.HasSuffix(e.key, ".path") {
				// An includeIf whose condition may not hold is taken
				// as holding: it can only add settings.
				inc := e.value
				switch {
				case strings.HasPrefix(inc, "~/"):
					inc = w.homePath(inc[2:])
				case inc != "" && !path.IsAbs(inc):
					inc = path.Join(path.Dir(file), inc)
				}
				readFile(inc, depth+1, false)
				continue
			}
			g.entries = append(g.entries, e)
		}
	}
	env := func(name string) (string, bool) { return w.lookup(name) }
	// The system and global files.
	if v, ok := env("GIT_CONFIG_NOSYSTEM"); !ok || v == "" || v == "0" || v == "false" {
		if v, ok := env("GIT_CONFIG_SYSTEM"); ok {
			readFile(v, 0, false)
		} else if w.varSet("GIT_CONFIG_SYSTEM") {
			g.unknown = true
		} else {
			readFile("/etc/gitconfig", 0, false)
		}
	}
	if v, ok := env("GIT_CONFIG_GLOBAL"); ok {
		readFile(v, 0, false)
	} else if w.varSet("GIT_CONFIG_GLOBAL") {
		g.unknown = true
	} else {
		if x, ok := env("XDG_CONFIG_HOME"); ok && path.IsAbs(x) {
			readFile(path.Join(x, "git/config"), 0, false)
		} else {
			readFile(w.homePath(".config/git/config"), 0, false)
		}
		readFile(w.homePath(".gitconfig"), 0, false)
	}
	// The repository's own file, and a worktree's.
	if gitDir == "" {
		gitDir = w.findGitDir(c.Cwd, g)
	}
	if gitDir != "" {
		common := gitDir
		if w.opts.ReadFile != nil {
			if data, err := w.opts.ReadFile(path.Join(gitDir, "commondir")); err == nil {
				d := strings.TrimSpace(string(data))
				if !path.IsAbs(d) {
					d = path.Join(gitDir, d)
				}
				common = path.Clean(d)
			}
		}
		readFile(path.Join(common, "config"), 0, false)
		readFile(path.Join(gitDir, "config.worktree"), 0, false)
	}
	if v, ok := env("GIT_CONFIG"); ok {
		readFile(v, 0, false)
	} else if w.varSet("GIT_CONFIG") {
		g.unknown = true
	}
	// What the step changed before this command.
	if w.shared.gitStale {
		g.unknown, g.stale = true, true
	}
	if w.wroteConfigBefore() {
		g.unknown, g.stale = true, true
	}
	g.entries = append(g.entries, w.shared.gitSets...)
	// The environment.
	if v, ok := env("GIT_CONFIG_PARAMETERS"); ok {
		if es, ok := parseConfigParameters(v); ok {
			g.entries = append(g.entries, es...)
		} else {
			g.unknown = true
		}
	} else if w.varSet("GIT_CONFIG_PARAMETERS") {
		g.unknown = true
	}
	if v, ok := env("GIT_CONFIG_COUNT"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n > 100 {
			g.unknown = true
		}
		for i := 0; i < n && i <= 100; i++ {
			k, ok1 := env("GIT_CONFIG_KEY_" + strconv.Itoa(i))
			val, ok2 := env("GIT_CONFIG_VALUE_" + strconv.Itoa(i))
			if !ok1 {
				g.unknown = true
				continue
			}
			g.entries = append(g.entries, gitEntry{key: gitKey(k), value: val, dynamic: !ok2})
		}
	} else if w.varSet("GIT_CONFIG_COUNT") {
		g.unknown = true
	}
	// A prefix assignment is not in the walker's variables: its value
	// is not followed here.
	for _, name := range c.Env {
		switch name {
		case "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_DIR", "HOME", "XDG_CONFIG_HOME":
			g.unknown = true
		}
		if strings.HasPrefix(name, "GIT_CONFIG_KEY_") || strings.HasPrefix(name, "GIT_CONFIG_VALUE_") {
			g.unknown = true
		}
	}
	g.entries = append(g.entries, cs...)
	return g
}

// varSet reports whether the source set name to a value known only at run
// time.
func (w *walker) varSet(name string) bool {
	b, _ := w.st.vars.get(name)
	return b.how == unknownVal
}

// homePath joins rel to $HOME, or returns "" when HOME is not known.
func (w *walker) homePath(rel string) string {
	h, ok := w.lookup("HOME")
	if !ok || !path.IsAbs(h) {
		return ""
	}
	return path.Join(h, rel)
}

// findGitDir finds the git directory of the repository holding dir, as
// git does: the first .git (a directory, or a file naming one) on the way
// up to /.
func (w *walker) findGitDir(dir string, g *gitConfig) string {
	if v, ok := w.lookup("GIT_DIR"); ok && v != "" {
		if !path.IsAbs(v) {
			if dir == "" {
				g.unknown = true
				return ""
			}
			v = path.Join(dir, v)
		}
		return path.Clean(v)
	}
	if dir == "" || w.opts.ReadFile == nil {
		g.unknown = true
		return ""
	}
	for d := path.Clean(dir); ; d = path.Dir(d) {
		dot := path.Join(d, ".git")
		_, err := w.opts.ReadFile(path.Join(dot, "config"))
		if err == nil {
			return dot
		}
		data, err2 := w.opts.ReadFile(dot)
		switch {
		case err2 == nil:
			if rest, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir:"); ok {
				gd := strings.TrimSpace(rest)
				if !path.IsAbs(gd) {
					gd = path.Join(d, gd)
				}
				return path.Clean(gd)
			}
			g.unknown = true
			return ""
		case !errors.Is(err, fs.ErrNotExist) || !errors.Is(err2, fs.ErrNotExist):
			// A .git that cannot be read: a directory without a
			// config, a file the reader refuses.
			g.unknown = true
			return ""
		case d == "/":
			return ""
		}
	}
}

// wroteConfigBefore reports whether a command the step ran before may have
// changed a git configuration file: a program whose writes are not known,
// or a write to a path known only at run time or to a file named like one.
func (w *walker) wroteConfigBefore() bool {
	for _, c := range w.facts.Commands {
		if c.Builtin || c.Function || len(c.Argv) == 0 {
			for _, wr := range c.Writes {
				if configLike(wr) {
					return true
				}
			}
			continue
		}
		if baseName(c.Name()) == "git" {
			// git changes its configuration only through git config,
			// which is followed (and --git-dir, which names a tree).
			continue
		}
		if !c.WritesKnown {
			return true
		}
		for _, wr := range c.Writes {
			if configLike(wr) {
				return true
			}
		}
	}
	return false
}

func configLike(wr Write) bool {
	if !wr.Resolved {
		return true
	}
	p := wr.Path
	b := path.Base(p)
	return b == "config" || b == "config.worktree" || strings.Contains(b, "gitconfig") ||
		wr.Tree && (b == ".git" || strings.Contains(p, "/.git/") || strings.HasSuffix(p, "/.git")) ||
		strings.Contains(p, "/.git/") || strings.HasSuffix(p, "/.git")
}

// gitConfigCommand follows `git config` (and `git config set`) setting a
// key: later git commands of the step see it.
func (w *walker) gitConfigCommand(c *Command, sub int) {
	args := c.Argv[sub+1:]
	var ops []Arg
	unset := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		v := a.Value
		switch {
		case a.Dynamic:
			ops = append(ops, a)
		case v == "-e" || v == "--edit" || v == "edit" && len(ops) == 0 || v == "--rename-section" || v == "rename-section" && len(ops) == 0:
			w.shared.gitStale = true
			return
		case v == "--unset" || v == "--unset-all" || v == "unset" && len(ops) == 0 || v == "--remove-section" || v == "remove-section" && len(ops) == 0:
			unset = true
		case v == "--file" || v == "-f" || v == "--blob" || v == "--type" || v == "--default" || v == "--comment" || v == "--value":
			i++
		case v == "set" && len(ops) == 0:
		case strings.HasPrefix(v, "-"):
		default:
			ops = append(ops, a)
		}
	}
	if unset || len(ops) < 2 {
		return
	}
	if ops[0].Dynamic {
		w.shared.gitStale = true
		return
	}
	key := gitKey(ops[0].Value)
	if key == "include.path" || strings.HasPrefix(key, "includeif.") {
		w.shared.gitStale = true
		return
	}
	w.shared.gitSets = append(w.shared.gitSets, gitEntry{key: key, value: ops[1].Value, dynamic: ops[1].Dynamic})
}

// parseGitConfig reads the text of a git configuration file. It is
// lenient: what it cannot read it skips.
func parseGitConfig(text string) []gitEntry {
	var out []gitEntry
	section := ""
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			end := strings.LastIndexByte(line, ']')
			if end < 0 {
				continue
			}
			hdr := line[1:end]
			rest := strings.TrimSpace(line[end+1:])
			if sp := strings.IndexAny(hdr, " \t"); sp >= 0 {
				name := strings.ToLower(strings.TrimSpace(hdr[:sp]))
				subsec := strings.TrimSpace(hdr[sp:])
				subsec = strings.TrimSuffix(strings.TrimPrefix(subsec, `"`), `"`)
				subsec = strings.ReplaceAll(strings.ReplaceAll(subsec, `\"`, `"`), `\\`, `\`)
				section = name + "." + subsec
			} else {
				section = strings.ToLower(hdr)
			}
			if rest == "" || rest[0] == '#' || rest[0] == ';' {
				continue
			}
			line = rest
		}
		name, raw, hasValue := strings.Cut(line, "=")
		name = strings.ToLower(strings.TrimSpace(name))
		if !hasValue {
			if j := strings.IndexAny(name, "#;"); j >= 0 {
				name = strings.TrimSpace(name[:j])
			}
			out = append(out, gitEntry{key: section + "." + name, value: "true"})
			continue
		}
		// A value ends at an unquoted comment character; a backslash at
		// the end of a line continues it.
		var b strings.Builder
		quoted := false
		pendingSpace := ""
	value:
		for {
			for j := 0; j < len(raw); j++ {
				ch := raw[j]
				switch {
				case ch == '\\' && j+1 < len(raw):
					j++
					b.WriteString(pendingSpace)
					pendingSpace = ""
					switch raw[j] {
					case 'n':
						b.WriteByte('\n')
					case 't':
						b.WriteByte('\t')
					case 'b':
						b.WriteByte('\b')
					default:
						b.WriteByte(raw[j])
					}
				case ch == '\\':
					// Continued on the next line.
					if i+1 < len(lines) {
						i++
						raw = lines[i]
						continue value
					}
				case ch == '"':
					quoted = !quoted
				case !quoted && (ch == '#' || ch == ';'):
					break value
				case !quoted && (ch == ' ' || ch == '\t'):
					if b.Len() > 0 {
						pendingSpace += string(ch)
					}
				default:
					b.WriteString(pendingSpace)
					pendingSpace = ""
					b.WriteByte(ch)
				}
			}
			break
		}
		out = append(out, gitEntry{key: section + "." + name, value: b.String()})
	}
	return out
}

// parseConfigParameters reads GIT_CONFIG_PARAMETERS: quoted 'key=value'
// or 'key'='value' items separated by spaces.
func parseConfigParameters(v string) ([]gitEntry, bool) {
	words, ok := splitGitCmdline(v)
	if !ok {
		return nil, false
	}
	var out []gitEntry
	for _, wd := range words {
		k, val, _ := strings.Cut(wd, "=")
		out = append(out, gitEntry{key: gitKey(k), value: val})
	}
	return out, true
}

// splitGitCmdline splits an alias's value into words as git does: on
// spaces, with single and double quotes and backslashes.
func splitGitCmdline(s string) ([]string, bool) {
	var out []string
	var b strings.Builder
	in := false
	var quote byte
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote == 0 && (ch == ' ' || ch == '\t' || ch == '\n'):
			if in {
				out = append(out, b.String())
				b.Reset()
				in = false
			}
		case ch == '\\' && quote != '\'' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
			in = true
		case quote == 0 && (ch == '\'' || ch == '"'):
			quote = ch
			in = true
		case quote != 0 && ch == quote:
			quote = 0
		default:
			b.WriteByte(ch)
			in = true
		}
	}
	if quote != 0 {
		return nil, false
	}
	if in {
		out = append(out, b.String())
	}
	return out, true
}

// gitCommand reports the names git runs itself, or from its own
// installation, before it looks for an alias: an alias of one of these
// names is never used.
func gitCommand(name string) bool {
	return gitCommands[name]
}

var gitCommands = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range strings.Fields(`add am annotate apply archimport archive backfill bisect blame branch
		bugreport bundle cat-file check-attr check-ignore check-mailmap check-ref-format checkout
		checkout-index cherry cherry-pick citool clean clone column commit commit-graph commit-tree
		config count-objects credential credential-cache credential-store cvsexportcommit cvsimport
		cvsserver daemon describe diagnose diff diff-files diff-index diff-pairs diff-tree difftool
		fast-export fast-import fetch fetch-pack filter-branch fmt-merge-msg for-each-ref for-each-repo
		format-patch fsck fsck-objects fsmonitor--daemon gc get-tar-commit-id grep gui hash-object help
		hook http-backend http-fetch http-push imap-send index-pack init init-db instaweb
		interpret-trailers last-modified log ls-files ls-remote ls-tree mailinfo mailsplit maintenance
		merge merge-base merge-file merge-index merge-octopus merge-one-file merge-ours merge-recursive
		merge-resolve merge-subtree merge-tree mergetool mktag mktree multi-pack-index mv name-rev notes
		p4 pack-objects pack-redundant pack-refs patch-id prune prune-packed pull push quiltimport
		range-diff read-tree rebase receive-pack reflog refs remote remote-ext remote-fd remote-ftp
		remote-ftps remote-http remote-https repack replace replay repo request-pull rerere reset
		restore rev-list rev-parse revert rm scalar send-email send-pack shell shortlog show show-branch
		show-index show-ref sparse-checkout stage stash status stripspace submodule subtree survey svn
		switch symbolic-ref tag unpack-file unpack-objects update-index update-ref update-server-info
		upload-archive upload-pack var verify-commit verify-pack verify-tag version web--browse
		whatchanged worktree write-tree lfs flow annex`) {
		m[n] = true
	}
	return m
}()

// gitPushRefs sets the Config of [Command.Push] for a push (git push,
// send-pack, http-push): the refspecs its configuration adds to what the
// command names, which [pushWords] reads when the command is recorded.
func (w *walker) gitPushRefs(c *Command, sub int, g *gitConfig) {
	args := readPushArgs(c.Argv[sub+1:])
	ops, repo := args.operands, args.repo
	all := false
	var refs []string
	for _, v := range args.options {
		switch v {
		case "--stdin":
			// send-pack reads the refs from its input.
			refs = append(refs, "")
			all = true
		case "--all", "--branches", "--mirror", "--tags":
			all = true
		}
	}
	if repo == nil && len(ops) > 0 {
		repo, ops = &ops[0], ops[1:]
	}
	// The remote's own refspecs map what is pushed, named or not.
	for _, e := range g.entries {
		rest, ok := strings.CutPrefix(e.key, "remote.")
		if !ok {
			continue
		}
		name, last := "", ""
		if j := strings.LastIndexByte(rest, '.'); j >= 0 {
			name, last = rest[:j], rest[j+1:]
		}
		if last != "push" && last != "mirror" {
			continue
		}
		if repo != nil && !repo.Dynamic && name != repo.Value {
			continue
		}
		switch {
		case e.dynamic:
			refs = append(refs, "")
		case last == "push":
			refs = append(refs, e.value)
		case gitTrue(e.value):
			refs = append(refs, "+refs/*:refs/*")
		}
	}
	if len(ops) == 0 && !all {
		switch c.Argv[sub].Value {
		case "send-pack", "http-push":
			// With no refs, every branch both sides have.
			refs = append(refs, ":")
		default:
			if pd := g.lookup("push.default"); len(pd) > 0 {
				switch {
				case pd[0].dynamic:
					refs = append(refs, "")
				case strings.EqualFold(pd[0].value, "matching"):
					refs = append(refs, ":")
				case strings.EqualFold(pd[0].value, "upstream"), strings.EqualFold(pd[0].value, "tracking"):
					// The upstream branch, which may be a protected one
					// whatever the current branch is.
					refs = append(refs, "")
				}
			}
		}
	}
	if g.stale || g.unknown && w.opts.ReadFile != nil {
		refs = append(refs, "")
	}
	p := &Push{}
	for _, r := range refs {
		p.Config = append(p.Config, refspec(Arg{Value: r, Dynamic: r == ""}))
	}
	c.Push = p
}

func gitTrue(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "yes", "on", "1", "":
		return true
	}
	return false
}

// gitSubtree puts subtree's own subcommand (push, split, …) right after
// it, wherever its options put it, so that rules see `subtree push`.
func (w *walker) gitSubtree(c *Command, sub int) {
	args := c.Argv
	for j := sub + 1; j < len(args); j++ {
		a := args[j]
		if a.Dynamic {
			return
		}
		switch v := a.Value; {
		case pushTakesValue(v):
			j++
		case strings.HasPrefix(v, "-"):
		default:
			if j != sub+1 {
				next := append([]Arg(nil), args[:sub+1]...)
				next = append(next, a)
				next = append(next, args[sub+1:j]...)
				c.Argv = append(next, args[j+1:]...)
			}
			return
		}
	}
}
