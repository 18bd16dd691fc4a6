package fork

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// This machine's table, a container's, and a desktop's.
const (
	vmMountinfo = `22 27 0:21 / /proc rw,relatime - proc proc rw
23 27 0:22 / /sys rw,relatime - sysfs sysfs rw
24 27 0:6 / /dev rw,relatime - devtmpfs devtmpfs rw,size=12334524k,nr_inodes=3083631,mode=755
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24684096k
26 24 0:24 / /dev/pts rw,relatime - devpts devpts rw,mode=600,ptmxmode=000
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
28 27 0:25 / /mnt/sandboxing/model_tools_env/v1/python ro,nosuid,nodev,relatime - tmpfs model_tools_unavailable ro,size=4k,mode=755
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	dockerMountinfo = `600 500 0:50 / / rw,relatime master:1 - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w
601 600 0:53 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
602 600 0:54 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755
607 600 254:1 /docker/containers/abc/resolv.conf /etc/resolv.conf rw,relatime - ext4 /dev/vda1 rw
608 600 254:1 /docker/containers/abc/hostname /etc/hostname rw,relatime - ext4 /dev/vda1 rw
609 600 254:1 /home/me/src /work rw,relatime - ext4 /dev/vda1 rw
610 600 0:60 / /tmp rw,nosuid,nodev - tmpfs tmpfs rw
611 600 0:61 / /var/lib/undosh/fork/copies/1-2-abcdef01 rw - tmpfs undosh-fork rw
612 609 0:62 / /work/with\040space rw - ext4 /dev/vdb rw
613 600 0:63 / /var/tmp/other-state/9-9-0000abcd rw - tmpfs undosh-fork rw
`
	desktopMountinfo = `25 1 8:2 / / rw,relatime shared:1 - ext4 /dev/sda2 rw
26 25 0:5 / /dev rw,nosuid shared:2 - devtmpfs udev rw
30 25 0:25 / /run rw,nosuid,nodev,noexec shared:5 - tmpfs tmpfs rw,mode=755
31 30 0:26 / /run/user/1000 rw - tmpfs tmpfs rw
40 25 8:1 / /boot/efi rw,relatime shared:30 - vfat /dev/sda1 rw
41 25 8:3 / /home rw,relatime shared:31 - ext4 /dev/sda3 rw
42 25 0:40 / /mnt/auto rw - autofs systemd-1 rw
43 42 8:17 / /mnt/auto rw - ext4 /dev/sdb1 rw
44 42 8:18 / /mnt/auto/deeper rw - ext4 /dev/sdb2 rw
45 25 0:41 / /var/tmp rw - tmpfs tmpfs rw
46 25 7:1 / /snap/core/1 ro,nodev,relatime - squashfs /dev/loop1 ro
47 25 0:42 / /mnt/cover rw - ext4 /dev/sdc1 rw
48 47 0:43 / /mnt/cover rw - xfs /dev/sdc2 rw
49 41 0:44 / /home/me/.cache/doc rw - fuse.portal portal rw
`
)

func TestSelectMounts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		table string
		want  []string // mount points, with "ro" after read-only ones
	}{
		{"vm", vmMountinfo, []string{"/", "/mnt/sandboxing/model_tools_env/v1/python ro"}},
		// A tmpfs on /tmp or /var/tmp is overlaid too: a kept step keeps
		// what it wrote there.
		{"docker", dockerMountinfo, []string{"/", "/work", "/tmp", "/etc/resolv.conf", "/etc/hostname", "/work/with space"}},
		{"desktop", desktopMountinfo, []string{"/", "/home", "/boot/efi", "/mnt/auto", "/var/tmp", "/mnt/cover", "/snap/core/1 ro"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table, err := parseMountinfo(tc.table)
			if err != nil {
				t.Fatal(err)
			}
			ms, err := selectMounts(table, []string{"/var/lib/undosh/fork/copies", "/var/lib/undosh"})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range ms {
				s := m.Point
				if m.readOnly() {
					s += " ro"
				}
				got = append(got, s)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("mounts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseMountinfoErrors(t *testing.T) {
	for _, bad := range []string{"1 2 3", "x 1 0:1 / / rw - ext4 /dev/a rw", "1 1 0:1 / / rw ext4 /dev/a rw"} {
		if _, err := parseMountinfo(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if _, err := selectMounts(nil, nil); err == nil {
		t.Error("no root: no error")
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/a\040b`: "/a b", `/t\011x\012`: "/t\tx\n", `/b\134s`: `/b\s`, `/x\04`: `/x\04`, `/plain`: "/plain",
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseID(t *testing.T) {
	for id, ok := range map[string]bool{
		"123-456-0123abcd": true, "123-456-0123abc": false, "x-456-0123abcd": false,
		"123-456-0123abcz": false, "0-1-0123abcd": false, "journal": false,
	} {
		if _, _, got := parseID(id); got != ok {
			t.Errorf("parseID(%q) ok = %v", id, got)
		}
	}
}

func TestEscapeOverlay(t *testing.T) {
	if got := escapeOverlay(`/a,b:c\d`); got != `/a\,b\:c\\d` {
		t.Errorf("got %s", got)
	}
}

// The hand-written record decodes as encoding/json's encoding does.
func TestMarshalMatchesJSON(t *testing.T) {
	c := &Copy{
		ID: "1-2-0000abcd", Dir: "/var/lib/undosh/fork/copies/1-2-0000abcd",
		T0:       time.Date(2026, 11, 30, 3, 4, 5, 123456789, time.UTC),
		Hostname: "h\"<é>\x01\xff",
		Overlays: []Overlay{{Mount: "/", Upper: "/u p", Work: "/w", Dev: 1<<40 + 3, MountDev: "254:0", FSType: "ext4", Source: "/dev/vda", MountID: 27, SameFS: true},
			{Mount: "/a,b", ReadOnly: true}},
		Seeded:   []string{PolicyRCD, "/var/lib/undosh"},
		Mirrored: []Mirror{{Path: "/usr", Mode: 0o755 | fs.ModeDir, UID: 0, GID: 5, Mtime: time.Unix(1, 2)}},
	}
	for _, c := range []*Copy{c, {ID: "x"}} {
		want, err := json.MarshalIndent(c, "", "\t")
		if err != nil {
			t.Fatal(err)
		}
		got := c.marshal()
		if string(got) != string(want)+"\n" {
			t.Errorf("marshal:\n%s\nencoding/json:\n%s", got, want)
		}
	}
}

// The pip guard's markers are found in every system Python's standard
// library; a distribution's own marker is not.
func TestGuardMarkers(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	files := map[string]string{
		"usr/lib/python3.11/EXTERNALLY-MANAGED":       GuardTag + "\n[externally-managed]\nError=undosh\n",
		"usr/lib/python3.12/EXTERNALLY-MANAGED":       "[externally-managed]\nError=Debian's own\n",
		"usr/lib/python3/EXTERNALLY-MANAGED":          GuardTag + "\n", // not a standard library
		"usr/lib64/python3.9/EXTERNALLY-MANAGED":      GuardTag,
		"usr/local/lib/python3.13/EXTERNALLY-MANAGED": GuardTag + "\n",
		"usr/local/lib/python3.10/EXTERNALLY-MANAGED": "# undosh",
		"usr/lib/python3.8/os.py":                     "",
	}
	for name, data := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := guardMarkers(root)
	want := []string{"/usr/lib/python3.11/EXTERNALLY-MANAGED", "/usr/lib64/python3.9/EXTERNALLY-MANAGED", "/usr/local/lib/python3.13/EXTERNALLY-MANAGED"}
	if !slices.Equal(got, want) {
		t.Errorf("guardMarkers = %q, want %q", got, want)
	}
}

// The hidden directory is made with its .gitignore and removed once it
// holds nothing else; one with anything in it stays.
func TestHiddenDirTidy(t *testing.T) {
	t.Parallel()
	mount := t.TempDir()
	top := filepath.Join(mount, HiddenName)
	a := filepath.Join(top, "copies", "a")
	if err := makeHidden(mount, a); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(top, ".gitignore")); err != nil || !strings.HasSuffix(string(b), "\n*\n") {
		t.Fatalf(".gitignore: %q, %v", b, err)
	}
	tidyHidden(mount) // a copy is still there
	if _, err := os.Stat(a); err != nil {
		t.Fatalf("tidy removed a live copy: %v", err)
	}
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	if err := makeHidden(mount, filepath.Join(top, "journal", "c1")); err != nil {
		t.Fatal(err)
	}
	tidyHidden(mount) // undo data stays
	if _, err := os.Stat(filepath.Join(top, "journal", "c1")); err != nil {
		t.Fatalf("tidy removed undo data: %v", err)
	}
	if _, err := os.Stat(filepath.Join(top, ".gitignore")); err != nil {
		t.Errorf("the .gitignore went with undo data left: %v", err)
	}
	if err := os.Remove(filepath.Join(top, "journal", "c1")); err != nil {
		t.Fatal(err)
	}
	tidyHidden(mount)
	if _, err := os.Lstat(top); !os.IsNotExist(err) {
		t.Errorf("%s is still there with nothing in it: %v", top, err)
	}
}
