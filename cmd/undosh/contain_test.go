package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestContainment runs commands the classifier may misjudge, of the
// families an outside review found (interpreters, programs that write
// through an option, writes through a link in the workspace, scripts and
// recipes it cannot read, metadata changes), for real, through undosh,
// in a workspace beside a directory of the machine's (under /opt, which
// is neither workspace nor scratch). Whatever undosh did with each (a
// rollback, a copy, a view whose writes it kept), undoctl back of every
// step it journalled must leave both as they were: no unrecoverable
// change.
func TestContainment(t *testing.T) {
	needForkEngine(t)
	ws := sessWorkspace(t)
	mach, err := os.MkdirTemp("/opt", "undosh-contain-")
	if err != nil {
		t.Skipf("no /opt to stand for the machine: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(mach) })
	for name, content := range map[string]string{"conf": "setting=1\n", "dir/sub/file": "deep\n", "bin/tool": "#!/bin/sh\necho tool\n"} {
		p := filepath.Join(mach, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, to := range map[string]string{"link": filepath.Join(mach, "conf"), "machdir": filepath.Join(mach, "dir")} {
		if err := os.Symlink(to, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	state := t.TempDir()
	env := append(os.Environ(), "UNDOSH_STATE_DIR="+state, "HOME="+t.TempDir(), "UNDOSH_POLICY=-",
		"UNDOSH_REAL_BASH=/bin/bash", "M="+mach, "PATH="+filepath.Dir(undoctlBin)+":"+os.Getenv("PATH"))
	S := mach
	cases := []string{
		// Interpreters, however the write is spelt.
		`python3 -c "import os as o; open(o.path.join('` + S + `', 'conf'), 'w').write('x')"`,
		`python3 -c "getattr(__import__('os'), 'sys'+'tem')('echo x > $M/conf')"`,
		`python3 -c "open('$M/conf', chr(119)).write('x')"`,
		`perl -e 'open(my $f, ">", "$ENV{M}/conf"); print $f "x"'`,
		`node -e "require('fs').writeFileSync(process.env.M + '/conf', 'x')"`,
		// Programs that write through an option or a script.
		`sed -n ':a;N;$!ba;w ` + S + `/conf' README`,
		`find . -maxdepth 0 -fprint ` + S + `/conf`,
		`awk 'BEGIN { print "x" > ENVIRON["M"] "/conf" }'`,
		`sort -o ` + S + `/conf README`,
		`git config --file ` + S + `/conf a.b c`,
		`git init -q ` + S + `/repo`,
		// Through a link in the workspace.
		`echo x > link`,
		`cp README machdir/new`,
		`rm -rf machdir/sub`,
		// What the parser cannot read, made by the step itself.
		`printf 'echo x > %s/conf\n' "$M" > t.sh; bash t.sh`,
		`printf 'all:\n\techo x > $$M/conf\n' > Makefile; make -s`,
		`echo "$M/conf" | xargs truncate -s0`,
		`f=$M; f=$f/conf; echo x > "$f"`,
		`eval "$(printf 'echo x > %s/conf' "$M")"`,
		`(cd "$M" && echo x > conf)`,
		`sh -c 'echo x > "$M/conf"'`,
		// Metadata, renames, removals, new kinds of files.
		`chmod 600 "$M/conf"`,
		`touch -d 2000-01-01 "$M/conf"`,
		`mv "$M/conf" "$M/conf2"`,
		`ln -sf /etc/hostname "$M/conf"`,
		`mkfifo "$M/fifo"`,
		`tar -cf a.tar README && tar -xf a.tar -C "$M"`,
		`install -D README "$M/new/file"`,
		`cp -r . "$M/copy"`,
		`dd if=README of="$M/bin/tool" status=none`,
		// A step that fails after it wrote: put back by undosh itself.
		`echo x > link; exit 3`,
		`python3 -c "open('$M/conf', 'w').write('x'); raise SystemExit(4)"`,
	}
	for _, c := range cases {
		t.Run(c, func(t *testing.T) {
			before := tree(t, ws, mach)
			steps := journalLen(t, state)
			r := runWith(t, undoshBin, ws, env, "bash", "-c", c)
			t.Logf("exit %d; %s", r.code, strings.Join(undoshLines(r.stderr), " | "))
			// Undo what undosh journalled for the step, last first.
			recs := journalRecords(t, append(env, "UNDOSH_STATE_DIR="+state))
			for i := len(recs) - 1; i >= steps; i-- {
				rec := recs[i]
				if rec["outcome"] == "restored" || (rec["checkpoints"] == nil && rec["machine"] == nil) {
					continue
				}
				id := fmt.Sprint(rec["id"])
				if b := runWith(t, undoctlBin, ws, env, "undoctl", "back", "--force", id); b.code != 0 {
					t.Fatalf("undoctl back %s after %+v: %+v", id, r, b)
				}
			}
			after := tree(t, ws, mach)
			// The step's own journal and undoctl's restores are all that
			// may stay: the workspace's .git is compared too.
			if d := cmp.Diff(before, after); d != "" {
				t.Errorf("after the step (%+v) and undoctl back, the machine or the workspace differ (-before +after):\n%s", r, d)
				restoreMachine(t, mach)
			}
		})
	}
}

// tree records every entry under the directories: its type, mode, size,
// link target and the hash of its content, by path.
func tree(t *testing.T, dirs ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, d := range dirs {
		filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				out[p] = "error: " + err.Error()
				return nil
			}
			if strings.Contains(p, "/.git/") && (strings.HasSuffix(p, "/index") || strings.Contains(p, "/logs/")) {
				return nil // git rewrites these as it reads
			}
			fi, err := e.Info()
			if err != nil {
				return nil
			}
			s := fmt.Sprintf("%v %o", fi.Mode().Type(), fi.Mode().Perm())
			switch {
			case fi.Mode()&fs.ModeSymlink != 0:
				l, _ := os.Readlink(p)
				s += " -> " + l
			case fi.Mode().IsRegular():
				b, _ := os.ReadFile(p)
				h := sha256.Sum256(b)
				s += fmt.Sprintf(" %d %s", len(b), hex.EncodeToString(h[:8]))
				if p == filepath.Join(dirs[len(dirs)-1], "conf") {
					s += fmt.Sprintf(" mtime %d", fi.ModTime().Unix())
				}
			}
			out[p] = s
			return nil
		})
	}
	return out
}

// journalLen is the number of records in the journal of state.
func journalLen(t *testing.T, state string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(state, "journal.jsonl"))
	if err != nil {
		return 0
	}
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			n++
		}
	}
	return n
}

// restoreMachine puts the test's machine directory back after a failed
// case, so that the next case starts from the same state.
func restoreMachine(t *testing.T, mach string) {
	t.Helper()
	os.RemoveAll(filepath.Join(mach, "copy"))
	os.RemoveAll(filepath.Join(mach, "repo"))
	os.RemoveAll(filepath.Join(mach, "new"))
	os.Remove(filepath.Join(mach, "fifo"))
	os.Remove(filepath.Join(mach, "conf2"))
	os.Remove(filepath.Join(mach, "conf"))
	os.WriteFile(filepath.Join(mach, "conf"), []byte("setting=1\n"), 0o755)
	os.MkdirAll(filepath.Join(mach, "dir/sub"), 0o755)
	os.WriteFile(filepath.Join(mach, "dir/sub/file"), []byte("deep\n"), 0o755)
	os.WriteFile(filepath.Join(mach, "bin/tool"), []byte("#!/bin/sh\necho tool\n"), 0o755)
}
