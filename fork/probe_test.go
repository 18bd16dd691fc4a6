package fork

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestProbeMissing(t *testing.T) {
	allNS := func(p string) bool { return strings.HasPrefix(p, "/proc/self/ns/") }
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(name string) ([]byte, error) {
			if v, ok := m[name]; ok {
				return []byte(v), nil
			}
			return nil, os.ErrNotExist
		}
	}
	full := map[string]string{
		"/proc/thread-self/status": "Name:\tx\nCapEff:\t000001ffffffffff\n",
		"/proc/filesystems":        "nodev\tsysfs\nnodev\toverlay\n",
	}
	for _, tc := range []struct {
		name string
		env  probeEnv
		want []string
	}{
		{"all there", probeEnv{euid: 0, readFile: files(full), exists: allNS}, nil},
		{"not root", probeEnv{euid: 1000, readFile: files(full), exists: allNS}, nil},
		{"not root, user namespaces off", probeEnv{euid: 1000, readFile: files(map[string]string{
			"/proc/filesystems":                                      full["/proc/filesystems"],
			"/proc/sys/user/max_user_namespaces":                     "0\n",
			"/proc/sys/kernel/unprivileged_userns_clone":             "0\n",
			"/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1\n",
		}), exists: allNS}, []string{"user namespaces (user.max_user_namespaces is 0)",
			"unprivileged user namespaces (kernel.unprivileged_userns_clone is 0)",
			"capabilities in user namespaces (AppArmor restricts them: kernel.apparmor_restrict_unprivileged_userns is 1)"}},
		{"no CAP_SYS_ADMIN", probeEnv{euid: 0, readFile: files(map[string]string{
			"/proc/thread-self/status": "CapEff:\t00000000a80425fb\n", "/proc/filesystems": full["/proc/filesystems"],
		}), exists: allNS}, []string{"root with CAP_SYS_ADMIN"}},
		{"overlay as a module", probeEnv{euid: 0, kernelRel: "6.1.0", readFile: files(map[string]string{
			"/proc/thread-self/status":       full["/proc/thread-self/status"],
			"/lib/modules/6.1.0/modules.dep": "kernel/fs/overlayfs/overlay.ko.xz:\n",
		}), exists: allNS}, nil},
		{"nothing", probeEnv{euid: 1000, readFile: files(nil), exists: func(string) bool { return false }},
			[]string{"user namespace", "overlayfs", "mount namespace", "pid namespace", "network namespace", "ipc namespace", "uts namespace", "cgroup namespace"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := probe(tc.env)
			var got []string
			var me *MissingError
			if errors.As(err, &me) {
				for _, m := range me.Missing {
					got = append(got, m.What)
					if m.Hint == "" {
						t.Errorf("%s: no hint", m.What)
					}
				}
			} else if err != nil {
				t.Fatalf("not a *MissingError: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("missing (-want +got):\n%s", diff)
			}
			if err != nil && !strings.Contains(err.Error(), tc.want[0]+" missing (") {
				t.Errorf("message: %v", err)
			}
		})
	}
}

func TestProbeHere(t *testing.T) {
	err := Probe()
	var me *MissingError
	if err != nil && !errors.As(err, &me) {
		t.Errorf("not a *MissingError: %v", err)
	}
	t.Logf("Probe: %v", err)
}
