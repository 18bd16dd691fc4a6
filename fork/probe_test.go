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
		{"not root", probeEnv{euid: 1000, readFile: files(full), exists: allNS}, []string{"root"}},
		{"no CAP_SYS_ADMIN", probeEnv{euid: 0, readFile: files(map[string]string{
			"/proc/thread-self/status": "CapEff:\t00000000a80425fb\n", "/proc/filesystems": full["/proc/filesystems"],
		}), exists: allNS}, []string{"root with CAP_SYS_ADMIN"}},
		{"overlay as a module", probeEnv{euid: 0, kernelRel: "6.1.0", readFile: files(map[string]string{
			"/proc/thread-self/status":       full["/proc/thread-self/status"],
			"/lib/modules/6.1.0/modules.dep": "kernel/fs/overlayfs/overlay.ko.xz:\n",
		}), exists: allNS}, nil},
		{"nothing", probeEnv{euid: 1000, readFile: files(nil), exists: func(string) bool { return false }},
			[]string{"root", "overlayfs", "mount namespace", "pid namespace", "network namespace", "ipc namespace", "uts namespace", "cgroup namespace"}},
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
	if os.Geteuid() != 0 {
		var me *MissingError
		if !errors.As(err, &me) || me.Missing[0].What != "root" {
			t.Errorf("not root: %v", err)
		}
		return
	}
	t.Logf("Probe: %v", err)
}
