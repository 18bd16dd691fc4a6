package fork

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkCommitUndo commits and undoes a small package install: 40
// operations and 5 MiB of new data, from an upper on a tmpfs (so staging
// copies the data, as with a copy's default tmpfs), onto a root on this
// machine's disk. It reports commit-ms and undo-ms (medians); the target
// is 300 ms for each.
func BenchmarkCommitUndo(b *testing.B) {
	requireRoot(b)
	var commits, undos, diffs []time.Duration
	var ops int
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		base := b.TempDir()
		target := filepath.Join(base, "root")
		upper := filepath.Join(shmDir(b), "upper")
		tree{b, base}.dir("root", 0o755)
		buildInstalled(b, target)
		t0 := time.Now()
		tree{b, filepath.Dir(upper)}.dir("upper", 0o755)
		buildInstall(b, upper, target)
		b.StartTimer()

		t := time.Now()
		p, err := Diff(Layer{Target: target, Upper: upper, T0: t0}, DiffOptions{Root: target})
		if err != nil {
			b.Fatal(err)
		}
		diffs = append(diffs, time.Since(t))
		ops = len(p.Ops)
		t = time.Now()
		rec, err := Commit(p, CommitOptions{JournalDir: filepath.Join(base, "journal")})
		if err != nil {
			b.Fatal(err)
		}
		commits = append(commits, time.Since(t))
		t = time.Now()
		if err := Undo(filepath.Join(base, "journal"), rec.ID, false); err != nil {
			b.Fatal(err)
		}
		undos = append(undos, time.Since(t))
	}
	if ops != 40 {
		b.Fatalf("the plan has %d operations, want 40", ops)
	}
	b.ReportMetric(medianMS(diffs), "diff-ms")
	b.ReportMetric(medianMS(commits), "commit-ms")
	b.ReportMetric(medianMS(undos), "undo-ms")
}

func medianMS(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2].Microseconds()) / 1000
}

// buildInstalled is a root before a package install.
func buildInstalled(t tb, root string) {
	w := tree{t, root}
	for _, d := range []string{"etc", "usr", "usr/bin", "usr/share", "usr/share/doc", "usr/share/man",
		"usr/share/man/man1", "var", "var/lib", "var/lib/dpkg", "var/lib/dpkg/info"} {
		w.dir(d, 0o755)
	}
	status := strings.Repeat("Package: some-package\nStatus: install ok installed\n\n", 2000)
	w.file("var/lib/dpkg/status", status, 0o644, tBase)
	w.file("var/lib/dpkg/status-old", status, 0o644, tBase)
	w.file("var/lib/dpkg/lock", "", 0o640, tBase)
	w.file("var/lib/dpkg/lock-frontend", "", 0o640, tBase)
	w.file("etc/ld.so.cache", strings.Repeat("x", 40<<10), 0o644, tBase)
	for i := range 3 {
		w.file(fmt.Sprintf("usr/share/man/man1/old%d.1.gz", i), "old page\n", 0o644, tBase)
	}
}

// buildInstall is the upper an install leaves: 40 operations.
func buildInstall(t tb, upper, real string) {
	w := tree{t, upper}
	for _, d := range []string{"etc", "usr", "usr/bin", "usr/share", "usr/share/doc", "usr/share/man",
		"usr/share/man/man1", "var", "var/lib", "var/lib/dpkg", "var/lib/dpkg/info"} {
		w.mirror(real, d)
	}
	status := strings.Repeat("Package: some-package\nStatus: install ok installed\n\n", 2001)
	w.file("var/lib/dpkg/status", status, 0o644, tNew)                     // replace
	w.file("var/lib/dpkg/status-old", status[:len(status)/2], 0o644, tNew) // replace
	w.file("etc/ld.so.cache", strings.Repeat("y", 40<<10), 0o644, tNew)    // replace
	for _, ext := range []string{"list", "md5sums", "postinst", "prerm"} { // 4 adds
		w.file("var/lib/dpkg/info/newpkg."+ext, "usr/bin/newpkg\n", 0o644, tNew)
	}
	w.file("usr/bin/newpkg", strings.Repeat("\x7fELF binary ", 1<<17), 0o755, tNew) // 1.5 MiB
	w.file("usr/bin/newpkg-helper", strings.Repeat("helper ", 1<<18), 0o755, tNew)  // 1.75 MiB
	w.whiteout("usr/share/man/man1/old0.1.gz")                                      // remove
	w.dir("usr/share/doc/newpkg", 0o755)                                            // mkdir
	w.dir("usr/share/doc/newpkg/examples", 0o755)
	for i := range 24 {
		w.file(fmt.Sprintf("usr/share/doc/newpkg/examples/ex%02d.txt", i), strings.Repeat("example ", 1024*(i+1)), 0o644, tNew)
	}
	w.file("usr/share/doc/newpkg/copyright", "GPL\n", 0o644, tNew)
	w.file("usr/share/doc/newpkg/changelog.gz", strings.Repeat("c", 200<<10), 0o644, tNew)
	w.file("usr/share/man/man1/newpkg.1.gz", "page\n", 0o644, tNew)
	w.symlink("usr/bin/np", "newpkg", tNew)
}
