package main

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The default policy, as embedded in undosh.
const policyFile = "../../policy.yaml"

// policyRules returns the line of every rule and path rule of the default
// policy, and the names of those that deny (verdict: deny) or constrain
// pushes.
func policyRules(t *testing.T) (lines map[string]int, deny []string) {
	t.Helper()
	f, err := os.Open(policyFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines = map[string]int{}
	sc := bufio.NewScanner(f)
	section, name := "", ""
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if l != "" && l[0] != ' ' && l[0] != '#' {
			section, name = strings.TrimSuffix(l, ":"), ""
		}
		if section != "rules" && section != "paths" {
			continue
		}
		s := strings.TrimSpace(l)
		if v, ok := strings.CutPrefix(s, "- name: "); ok {
			name = v
			lines[name] = n
		}
		if s == "verdict: deny" || s == "constraint: push" {
			deny = append(deny, name)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines, deny
}

// isolated makes cmd run in a network namespace of its own (no interface
// up), when this process may create one, so that a command undosh fails
// to refuse still reaches nothing. It reports whether it could.
func isolated(cmd *exec.Cmd) bool {
	netnsOnce.Do(func() {
		c := exec.Command("true")
		c.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
		netnsOK = c.Run() == nil
	})
	if netnsOK {
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	}
	return netnsOK
}

var (
	netnsOnce sync.Once
	netnsOK   bool
)

// noNetwork is the environment added when no network namespace can be
// made: HTTP clients go to a closed loopback port.
var noNetwork = []string{"http_proxy=http://127.0.0.1:9", "https_proxy=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9",
	"HTTPS_PROXY=http://127.0.0.1:9", "ALL_PROXY=http://127.0.0.1:9", "all_proxy=http://127.0.0.1:9", "no_proxy="}

// TestEgressRefused runs one command for every rule of the default policy
// that refuses egress (and every form of push the push constraint refuses),
// each followed by a marker command: undosh must refuse the whole step with
// 126, name the rule and where the policy says it, give a hint, and run
// nothing.
func TestEgressRefused(t *testing.T) {
	t.Parallel()
	lines, deny := policyRules(t)
	tests := []struct {
		rule    string
		command string
		branch  string // the current branch, when not main
	}{
		{"git-push", "git push origin main", ""},
		{"git-push", "git push origin master", "feature"},
		{"git-push", "git push --force origin feature", "feature"},
		{"git-push", "git push -f origin feature", "feature"},
		{"git-push", "git push --force-with-lease origin feature", "feature"},
		{"git-push", "git push origin +feature", "feature"},
		{"git-push", "git push origin :feature", "feature"},
		{"git-push", "git push --delete origin feature", "feature"},
		{"git-push", "git push --mirror origin", "feature"},
		{"git-push", "git push origin feature:main", "feature"},
		{"git-push", "git push origin HEAD:refs/heads/main", "feature"},
		{"git-push", `git push origin "$BRANCH"`, "feature"}, // BRANCH=main in the environment
		{"git-push", `git push origin "$(git branch --show-current)"`, "feature"},
		{"git-push", `read b < README; git push origin "$b"`, "feature"},
		{"git-send", "git send-email --to=a@example.com HEAD~1", ""},
		{"http-send", "curl -d x http://example.com", ""},
		{"http-send", "curl --data-binary @README http://example.com", ""},
		{"http-send", "curl -F f=@README http://example.com", ""},
		{"http-send", "curl -T README http://example.com", ""},
		{"http-send", "curl -X POST http://example.com", ""},
		{"http-send", "curl -XPUT http://example.com", ""},
		{"http-send", "curl --request DELETE http://example.com", ""},
		{"http-send", "wget --post-data=x http://example.com", ""},
		{"http-send", "wget --post-file=README http://example.com", ""},
		{"http-send", "http POST example.com x=1", ""},
		{"remote-shell", "ssh host cmd", ""},
		{"remote-shell", "scp README host:", ""},
		{"remote-shell", "sftp host", ""},
		{"remote-shell", "nc example.com 80 < README", ""},
		{"rsync-remote", "rsync README host:dir", ""},
		{"rsync-remote", "rsync -a host:dir/ local/", ""},
		{"network-device", "echo hi > /dev/tcp/1.2.3.4/80", ""},
		{"network-device", "exec 3<>/dev/udp/1.2.3.4/53", ""},
		{"mail", "mail -s hi someone@example.com < README", ""},
		{"mail", "sendmail someone@example.com < README", ""},
		{"js-publish", "npm publish", ""},
		{"js-publish", "yarn npm publish", ""},
		{"js-publish", "pnpm publish --access public", ""},
		{"py-publish", "twine upload dist/*", ""},
		{"py-publish", "poetry publish", ""},
		{"cargo-publish", "cargo publish", ""},
		{"jvm-publish", "mvn deploy", ""},
		{"jvm-publish", "gem push x-1.0.gem", ""},
		{"container-push", "docker push example.com/img:1", ""},
		{"cluster-write", "kubectl apply -f deploy.yaml", ""},
		{"database-remote-write", "psql -h db.example.com -c 'drop table users'", ""},
		{"gh-pr-create", "gh pr create --fill", ""},
		{"gh-write", "gh repo delete owner/repo --yes", ""},
		{"gh-write", "gh pr merge 1", ""},
		{"iac-apply", "terraform apply -auto-approve", ""},
		{"cloud-write", "aws s3 rm s3://bucket/key", ""},
		{"publish-tools", "semantic-release", ""},
		{"publish-tools", "gh-pages -d dist", ""},
		{"lerna-version", "lerna version patch --yes", ""},
		{"publish-subcommands", "maturin publish", ""},
		{"publish-subcommands", "mkdocs gh-deploy", ""},
		{"ko-push", "ko build ./cmd/app", ""},
		{"publish-subcommand-pairs", "dart pub publish --force", ""},
		{"publish-flags", "pack build img --publish", ""},
		{"container-build-push", "docker build --push -t example.com/img:1 .", ""},
		{"container-build-push", "docker buildx build --output type=registry -t example.com/img .", ""},
		{"database-remote-admin", "dropdb -h db.example.com app", ""},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.rule] = true
	}
	var missing []string
	for _, r := range deny {
		if !covered[r] {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		t.Errorf("rules of the default policy that refuse egress with no test here: %s", strings.Join(missing, ", "))
	}
	for i, tt := range tests {
		t.Run(strconv.Itoa(i)+" "+tt.command, func(t *testing.T) {
			t.Parallel()
			line, ok := lines[tt.rule]
			if !ok {
				t.Fatalf("no rule %s in %s", tt.rule, policyFile)
			}
			w := newWS(t)
			w.write("README", "readme\n", 0o644)
			w.git("add", "-A")
			w.git("commit", "-qm", "first")
			bare := filepath.Join(w.root, "origin.git")
			w.gitIn(w.root, "init", "-q", "--bare", bare)
			w.git("remote", "add", "origin", bare)
			w.git("push", "-q", "origin", "main")
			if tt.branch != "" {
				w.git("checkout", "-q", "-b", tt.branch)
				w.git("push", "-q", "origin", tt.branch)
			}
			refs := w.gitIn(bare, "for-each-ref")
			env := append(w.env[:len(w.env):len(w.env)], "BRANCH=main")
			cmd := w.command(w.dir, env, undoshBin, "-c", tt.command+"; touch ran")
			if !isolated(cmd) {
				cmd.Env = append(cmd.Env, noNetwork...)
			}
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			cmd.Run()
			r := stepResult{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode(), ps: cmd.ProcessState}
			checkRefused(t, r, fmt.Sprintf("rule %s at policy.yaml (embedded):%d)", tt.rule, line))
			if w.exists("ran") {
				t.Errorf("the refused step ran")
			}
			if d := cmp.Diff(refs, w.gitIn(bare, "for-each-ref")); d != "" {
				t.Errorf("the remote changed (-before +after):\n%s", d)
			}
			recs := readJournal(t, w.state)
			if len(recs) != 1 || recs[0].Outcome != "refused" || recs[0].Exit != 126 {
				t.Errorf("journal: want one refused step, got %+v", recs)
			}
		})
	}
}

// checkRefused checks a refusal: exit 126, nothing on stdout, and on
// stderr exactly `undosh: refused: …` naming the rule, then a hint.
func checkRefused(t *testing.T, r stepResult, rule string) {
	t.Helper()
	if r.code != 126 {
		t.Errorf("exit %d, want 126\n%s", r.code, r)
	}
	if r.stdout != "" {
		t.Errorf("stdout: %q, want nothing", r.stdout)
	}
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "undosh: refused: ") || !strings.HasPrefix(lines[1], "undosh: hint: ") {
		t.Fatalf("want two lines on stderr, `undosh: refused: …` and `undosh: hint: …`\n%s", r)
	}
	if !strings.Contains(lines[0], rule) {
		t.Errorf("the refusal does not name %q:\n%s", rule, lines[0])
	}
}

// pushWS is a workspace whose origin is a local bare repository holding
// main and feature, on branch.
func pushWS(t *testing.T, branch string) (w *ws, bare string) {
	t.Helper()
	w = newWS(t)
	w.write("README", "readme\n", 0o644)
	w.git("add", "-A")
	w.git("commit", "-qm", "first")
	bare = filepath.Join(w.root, "origin.git")
	w.gitIn(w.root, "init", "-q", "--bare", bare)
	w.git("remote", "add", "origin", bare)
	w.git("push", "-q", "origin", "main")
	w.git("branch", "feature")
	w.git("checkout", "-q", branch)
	// feature is one commit ahead of what the remote will have.
	w.git("checkout", "-q", "feature")
	w.write("feature.txt", "feature\n", 0o644)
	w.git("add", "-A")
	w.git("commit", "-qm", "feature")
	w.git("checkout", "-q", branch)
	return w, bare
}

// TestPush: pushes the constraint allows reach the remote; those it
// refuses at run time (the current branch is protected) do not.
func TestPush(t *testing.T) {
	t.Parallel()
	line, _ := policyRules(t)
	rule := fmt.Sprintf("rule git-push at policy.yaml (embedded):%d)", line["git-push"])
	tests := []struct {
		name    string
		branch  string
		command string
		pushed  string // the branch that must reach the remote; "" when refused
	}{
		{"feature from feature", "feature", "git push origin feature", "feature"},
		{"HEAD from feature", "feature", "git push origin HEAD", "feature"},
		{"-u from feature", "feature", "git push -q -u origin feature", "feature"},
		// The policy constrains a push that names its branch only by verify
		// (none is set): the current branch does not matter.
		{"feature from main", "main", "git push origin feature", "feature"},
		{"HEAD from main", "main", "git push origin HEAD", ""},
		{"@ from main", "main", "git push origin @", ""},
		{"bare push from main", "main", "git push", ""},
		{"origin alone from main", "main", "git push origin", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w, bare := pushWS(t, tt.branch)
			w.git("config", "push.default", "current")
			refs := w.gitIn(bare, "for-each-ref", "--format=%(refname) %(objectname)")
			r := w.run(tt.command + " 2>/dev/null; echo pushed=$?")
			if tt.pushed == "" {
				checkRefused(t, r, rule)
				if d := cmp.Diff(refs, w.gitIn(bare, "for-each-ref", "--format=%(refname) %(objectname)")); d != "" {
					t.Errorf("the refused push reached the remote (-before +after):\n%s", d)
				}
				return
			}
			if r.code != 0 || r.stdout != "pushed=0\n" || r.stderr != "" {
				t.Fatalf("want the push to pass\n%s", r)
			}
			want := w.git("rev-parse", tt.pushed)
			if got := w.gitIn(bare, "rev-parse", "refs/heads/"+tt.pushed); got != want {
				t.Errorf("remote %s = %s, want %s", tt.pushed, got, want)
			}
		})
	}
	t.Run("push needs verify", func(t *testing.T) {
		t.Parallel()
		pol := writePolicy(t, "version: 1\nverify: \"echo tests broken; exit 5\"\n")
		w, bare := pushWS(t, "feature")
		refs := w.gitIn(bare, "for-each-ref")
		r := w.run("git push origin feature", pol)
		checkRefused(t, r, "verify `echo tests broken; exit 5` failed (exit 5)")
		if !strings.Contains(r.stderr, "it said: tests broken") {
			t.Errorf("the refusal does not quote verify\n%s", r)
		}
		if d := cmp.Diff(refs, w.gitIn(bare, "for-each-ref")); d != "" {
			t.Errorf("the refused push reached the remote (-before +after):\n%s", d)
		}
	})
}

// TestEgressAllowed: downloads from this machine, and commands that reach
// nowhere, run.
func TestEgressAllowed(t *testing.T) {
	t.Parallel()
	const body = "downloaded\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "only GET", http.StatusMethodNotAllowed)
			return
		}
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("the test server is not on loopback: %s", srv.URL)
	}
	tests := []struct {
		name    string
		command string
		file    string // the file the command downloads to; "" for stdout
	}{
		{"curl -o", "curl -sS -o f " + srv.URL + "/", "f"},
		{"curl -sSfL -o", "curl -sSfL " + srv.URL + "/x.tgz -o x.tgz", "x.tgz"},
		{"curl to stdout", "curl -sS " + srv.URL + "/", ""},
		{"wget -O", "wget -q -O g " + srv.URL + "/", "g"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := seedWS(t)
			r := w.run(tt.command)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("want exit 0 and nothing on stderr\n%s", r)
			}
			got := r.stdout
			if tt.file != "" {
				got = w.read(tt.file)
			}
			if got != body {
				t.Errorf("downloaded %q, want %q", got, body)
			}
		})
	}
	t.Run("ssh -V", func(t *testing.T) {
		t.Parallel()
		w := newWS(t)
		cmd := w.command(w.dir, w.env, undoshBin, "-c", "ssh -V")
		isolated(cmd)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		cmd.Run()
		if cmd.ProcessState.ExitCode() != 0 || strings.Contains(stderr.String(), "undosh:") {
			t.Errorf("ssh -V: %v\n%s", cmd.ProcessState, stderr.String())
		}
		for _, r := range readJournal(t, w.state) {
			if r.Outcome != "passed through" || r.Class != "none" {
				t.Errorf("ssh -V was journaled as %s %s: it is read-only", r.Class, r.Outcome)
			}
		}
	})
}

// TestDenyRulesListed guards policyRules: the scan of policy.yaml must
// find the rules the tests rely on.
func TestDenyRulesListed(t *testing.T) {
	t.Parallel()
	_, deny := policyRules(t)
	sort.Strings(deny)
	for _, want := range []string{"git-push", "http-send", "network-device", "remote-shell", "mail", "js-publish"} {
		if i := sort.SearchStrings(deny, want); i == len(deny) || deny[i] != want {
			t.Errorf("policyRules did not find %s among %v", want, deny)
		}
	}
}
