package parser_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/undosh/undosh/parser"
)

// TestFamilyPushAliases: a git command's configuration says what it runs
// (aliases) and what a push updates (remote.<name>.push, push.default).
func TestFamilyPushAliases(t *testing.T) {
	t.Parallel()
	repo := map[string]string{
		"/w/.git/config": "[core]\n\tbare = false\n[alias]\n\tp = push\n\tship = \"push origin HEAD:main\" ; comment\n" +
			"\tsh = !git push origin main\n[remote \"origin\"]\n\turl = git@example.com:x.git\n\tpush = refs/heads/*:refs/heads/main\n[include]\n\tpath = more.inc\n",
		"/w/.git/more.inc":               "[alias]\n\tinc = send-pack\n",
		"/home/agent/.gitconfig":         "[alias]\n\tg = push --force\n\tst = status\n",
		"/wt/.git":                       "gitdir: /w/.git/worktrees/wt\n",
		"/w/.git/worktrees/wt/commondir": "../..\n",
	}
	env := map[string]string{"HOME": "/home/agent"}
	tests := []struct {
		name, in, cwd string
		noRead        bool
		want          string // the git command's argv, as line renders it
		sub           string // its subcommand, "$" when it may be any
		refs          []string
	}{
		{name: "repo alias", in: "git p", want: "git push", sub: "push", refs: []string{"refs/heads/*:refs/heads/main"}},
		{name: "quoted alias with args", in: "git ship -q", want: "git push origin HEAD:main -q", sub: "push", refs: []string{"refs/heads/*:refs/heads/main"}},
		{name: "global alias", in: "git g origin x", want: "git push --force origin x", sub: "push", refs: []string{"refs/heads/*:refs/heads/main"}},
		{name: "include", in: "git inc origin", want: "git send-pack origin", sub: "send-pack", refs: []string{"refs/heads/*:refs/heads/main", ":"}},
		{name: "alias of a read", in: "git st", want: "git status", sub: "status"},
		{name: "worktree reads the common config", in: "git p", cwd: "/wt", want: "git push", sub: "push", refs: []string{"refs/heads/*:refs/heads/main"}},
		{name: "-c beats the files", in: "git -c alias.p=status p", want: "git -c alias.p=status status", sub: "status"},
		{name: "alias chain", in: "git -c alias.a=b -c alias.b=push a", want: "git -c alias.a=b -c alias.b=push push", sub: "push", refs: []string{"refs/heads/*:refs/heads/main"}},
		{name: "no such alias, files read", in: "git nope", want: "git nope", sub: "nope"},
		{name: "no files: any command", in: "git nope", noRead: true, want: "git nope", sub: "$"},
		{name: "same-step alias", in: "git config alias.q push; git q origin main", noRead: true, want: "git push origin main", sub: "push"},
		{name: "step edits the config first", in: "echo x >> .git/config; git push", want: "git push", sub: "push", refs: []string{"refs/heads/*:refs/heads/main", ""}},
		{name: "builtin is never an alias", in: "git -c alias.status=push status", want: "git -c alias.status=push status", sub: "status"},
		{name: "dashed form", in: "/usr/lib/git-core/git-push origin x", want: "/usr/lib/git-core/git push origin x", sub: "push", refs: []string{"refs/heads/*:refs/heads/main"}},
		{name: "push.default matching", in: "git -c push.default=matching push", noRead: true, want: "git -c push.default=matching push", sub: "push", refs: []string{":"}},
		{name: "push.default upstream", in: "git -c push.default=upstream push", noRead: true, want: "git -c push.default=upstream push", sub: "push", refs: []string{""}},
		{name: "mirror remote", in: "git -c remote.r.mirror push r", noRead: true, want: "git -c remote.r.mirror push r", sub: "push", refs: []string{"+refs/*:refs/*"}},
		{name: "subtree options first", in: "git subtree -P docs push origin main", noRead: true, want: "git subtree push -P docs origin main", sub: "subtree"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cwd := tt.cwd
			if cwd == "" {
				cwd = "/w"
			}
			opts := parser.Options{Cwd: cwd, Env: env, ReadFile: files(repo)}
			if tt.noRead {
				opts.ReadFile = nil
			}
			f := parser.Parse(tt.in, opts)
			var git *parser.Command
			for i := range f.Commands {
				if c := &f.Commands[i]; c.Sub > 0 {
					git = c
				}
			}
			if git == nil {
				t.Fatalf("no git command in %q", lines(f))
			}
			sub := git.Argv[git.Sub].Value
			if git.Argv[git.Sub].Dynamic {
				sub = "$"
			}
			if got := line(*git); got != tt.want || sub != tt.sub {
				t.Errorf("got %q (sub %s), want %q (sub %s)", got, sub, tt.want, tt.sub)
			}
			var refs []string
			if git.Push != nil {
				for _, r := range git.Push.Config {
					refs = append(refs, r.Text)
				}
			}
			if diff := cmp.Diff(tt.refs, refs); diff != "" {
				t.Errorf("Push.Config (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFamilyPushShellAlias: an alias of a shell command is walked as the
// code it runs.
func TestFamilyPushShellAlias(t *testing.T) {
	t.Parallel()
	fsys := map[string]string{"/w/.git/config": "[alias]\n\tsh = !git push origin main && echo done\n"}
	f := parser.Parse("git sh", parser.Options{Cwd: "/w", Env: map[string]string{"HOME": "/h"}, ReadFile: files(fsys)})
	got := lines(f)
	want := []string{"[git alias sh] git push origin main", "[git alias sh] echo done", "git sh"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
