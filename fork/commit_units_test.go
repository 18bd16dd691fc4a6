package fork

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestChangedUnits checks the units reported after a commit: by unit
// file, by drop-in, and by the program ExecStart= runs (with /bin a link
// to usr/bin, as on a merged-/usr Debian).
func TestChangedUnits(t *testing.T) {
	t.Parallel()
	requireRoot(t) // tree.file makes root-owned files
	root := t.TempDir()
	w := tree{t, root}
	for _, d := range []string{"usr", "usr/bin", "usr/sbin", "usr/lib", "usr/lib/systemd", "usr/lib/systemd/system",
		"etc", "etc/systemd", "etc/systemd/system", "etc/systemd/system/multi-user.target.wants"} {
		w.dir(d, 0o755)
	}
	w.must(os.Symlink("usr/bin", w.p("bin")))
	w.must(os.Symlink("usr/lib", w.p("lib")))
	unit := func(rel, exec string) {
		w.file(rel, "[Unit]\nDescription=test\n\n[Service]\nExecStartPre=/usr/bin/pre\nExecStart="+exec+"\n", 0o644, tBase)
	}
	unit("lib/systemd/system/foo.service", "/usr/bin/foo --serve")
	unit("lib/systemd/system/bar.service", "-/bin/bar")
	unit("lib/systemd/system/pre.service", "/usr/bin/unchanged")
	unit("lib/systemd/system/gone.service", "@/usr/sbin/olddaemon olddaemon -f")
	unit("lib/systemd/system/quiet.service", "/usr/bin/quiet")
	w.must(os.Symlink("/lib/systemd/system/quiet.service", w.p("etc/systemd/system/multi-user.target.wants/quiet.service")))

	p := Plan{Root: root, Target: root, Ops: []Op{
		{Kind: OpAdd, Path: "usr/bin/foo", Type: TypeFile},
		{Kind: OpReplace, Path: "usr/bin/bar", Type: TypeFile},
		{Kind: OpAdd, Path: "usr/bin/pre", Type: TypeFile}, // only in ExecStartPre
		{Kind: OpRemove, Path: "usr/sbin"},
		{Kind: OpAdd, Path: "etc/systemd/system/baz.service", Type: TypeFile},
		{Kind: OpMkdir, Path: "etc/systemd/system/qux.service.d", Type: TypeDir},
		{Kind: OpAdd, Path: "etc/systemd/system/qux.service.d/override.conf", Type: TypeFile},
		{Kind: OpAdd, Path: "etc/systemd/system/multi-user.target.wants/baz.service", Type: TypeSymlink},
		{Kind: OpMeta, Path: "usr/bin", Type: TypeDir},
	}}
	got, err := ChangedUnits(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"bar.service", "baz.service", "foo.service", "gone.service", "qux.service"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ChangedUnits (-want +got):\n%s", diff)
	}
}

// TestMappedDeleted runs a copy of a program, deletes the copy, and finds
// the process among those that map deleted files.
func TestMappedDeleted(t *testing.T) {
	t.Parallel()
	src, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep")
	}
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(t.TempDir(), "sleep-copy")
	if err := os.WriteFile(prog, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prog, "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	if err := os.Remove(prog); err != nil {
		t.Fatal(err)
	}
	ms, err := MappedDeleted()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ms, func(m Mapping) bool { return m.PID == cmd.Process.Pid })
	if i < 0 {
		t.Fatalf("process %d (a deleted program) is not listed: %+v", cmd.Process.Pid, ms)
	}
	if !slices.Contains(ms[i].Files, prog) || ms[i].Comm != "sleep-copy" {
		t.Errorf("listed as %+v, want comm sleep-copy and file %s", ms[i], prog)
	}
	if slices.ContainsFunc(ms, func(m Mapping) bool { return m.PID == os.Getpid() }) {
		t.Errorf("this test process is listed: it maps no deleted file")
	}
}
