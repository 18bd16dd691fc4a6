package enforce

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBlocked(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"touch", "touch: cannot touch '/etc/x': Read-only file system\n", []string{"/etc/x"}},
		{"touch utf-8 quotes", "touch: cannot touch ‘/etc/x’: Read-only file system\n", []string{"/etc/x"}},
		{"bash redirect", "bash: /etc/x: Read-only file system\n", []string{"/etc/x"}},
		{"bash -c line", "bash: line 1: /etc/x: Read-only file system\n", []string{"/etc/x"}},
		{"bash by path", "/bin/bash: line 1: /etc/x: Read-only file system\n", []string{"/etc/x"}},
		{"dash", "/bin/sh: 1: cannot create /etc/x: Read-only file system\n", []string{"/etc/x"}},
		{"path first", "/etc/x: Read-only file system\n", []string{"/etc/x"}},
		{"bash relative", "bash: x: Read-only file system\n", []string{"x"}},
		{"script relative", "/tmp/t/run.sh: line 5: report.txt: Read-only file system\n", []string{"report.txt"}},
		{"bash landlock", "bash: /etc/x: Permission denied\n", []string{"/etc/x"}},
		{"python", "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\nOSError: [Errno 30] Read-only file system: '/etc/x'\n", []string{"/etc/x"}},
		{"python permission", "PermissionError: [Errno 13] Permission denied: '/etc/x'\n", []string{"/etc/x"}},
		{"python rename", "OSError: [Errno 30] Read-only file system: 'a' -> '/etc/b'\n", []string{"a", "/etc/b"}},
		{"pip", "ERROR: Could not install packages due to an OSError: [Errno 30] Read-only file system: '/usr/lib/python3/dist-packages/x'\n", []string{"/usr/lib/python3/dist-packages/x"}},
		{"cp", "cp: cannot create regular file '/etc/x': Read-only file system\n", []string{"/etc/x"}},
		{"mkdir", "mkdir: cannot create directory '/opt/d': Read-only file system\n", []string{"/opt/d"}},
		{"mkdir path with a space", "mkdir: cannot create directory '/opt/my dir': Read-only file system\n", []string{"/opt/my dir"}},
		{"rm", "rm: cannot remove '/usr/bin/x': Read-only file system\n", []string{"/usr/bin/x"}},
		{"chmod", "chmod: changing permissions of '/etc/hosts': Read-only file system\n", []string{"/etc/hosts"}},
		{"mv", "mv: cannot move 'a' to '/etc/b': Read-only file system\n", []string{"a", "/etc/b"}},
		{"sed -i", "sed: couldn't open temporary file /etc/sedAb12c: Read-only file system\n", []string{"/etc/sedAb12c"}},
		{"go", "open /etc/x: read-only file system\nmkdir /opt/d: permission denied\n", []string{"/etc/x", "/opt/d"}},
		{"node", "Error: EROFS: read-only file system, open '/etc/x'\n", []string{"/etc/x"}},
		{"apt", "E: Could not open lock file /var/lib/dpkg/lock-frontend - open (30: Read-only file system)\n", []string{"/var/lib/dpkg/lock-frontend"}},
		{"npm", "npm ERR! code EROFS\nnpm ERR! syscall mkdir\nnpm ERR! path /usr/lib/node_modules/x\nnpm ERR! errno -30\n", []string{"/usr/lib/node_modules/x"}},
		{"npm 10", "npm error code EACCES\nnpm error syscall mkdir\nnpm error path /usr/lib/node_modules/x\nnpm error errno -13\nnpm error Error: EACCES: permission denied, mkdir '/usr/lib/node_modules/x'\n", []string{"/usr/lib/node_modules/x"}},
		{"npm other code", "npm ERR! code ENOENT\nnpm ERR! path /w/package.json\n", nil},
		{"cargo", "error: failed to open: /root/.cargo/registry/.package-cache\n\nCaused by:\n  Read-only file system (os error 30)\n", []string{"/root/.cargo/registry/.package-cache"}},
		{"once each", "bash: /etc/x: Read-only file system\nbash: /etc/x: Read-only file system\r\n", []string{"/etc/x"}},
		{"apostrophe", "install: can't create '/usr/local/bin/x': Read-only file system\n", []string{"/usr/local/bin/x"}},
		{"other errors", "ls: cannot access '/nope': No such file or directory\nmake: *** [all] Error 1\n", nil},
		{"truncated first line", "ly file system\nbash: /etc/x: Read-only file system", []string{"/etc/x"}},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, Blocked([]byte(tt.in))); diff != "" {
				t.Errorf("Blocked(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func FuzzBlocked(f *testing.F) {
	f.Add([]byte("touch: cannot touch '/etc/x': Read-only file system\n"))
	f.Add([]byte("npm ERR! code EROFS\nnpm ERR! path /x\n"))
	f.Add([]byte("‘“`'\"x: Permission denied"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, p := range Blocked(b) {
			if p == "" {
				t.Fatalf("Blocked(%q) returned an empty path", b)
			}
		}
	})
}
