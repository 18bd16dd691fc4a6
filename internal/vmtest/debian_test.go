package vmtest

import (
	"os"
	"strings"
	"testing"
	"time"
)

// In a Debian guest (BuildDebian: real apt and dpkg), package steps run
// through undosh as machine steps in the guest's local engine: an
// install whose verify fails is discarded (dpkg's database and the
// files both), one that passes is kept, and a removal whose verify
// fails leaves the package installed. Nightly: building the guest takes
// root, a minute and the Debian mirror.
func TestDebianGuest(t *testing.T) {
	if os.Getenv("UNDOSH_NIGHTLY") != "1" {
		t.Skip("nightly: set UNDOSH_NIGHTLY=1")
	}
	start := time.Now()
	g := BuildDebian(t, GoBuild(t, "undosh", "undoctl")...)
	t.Logf("built (or found) in %s: %s", time.Since(start).Round(time.Millisecond), g.Dir)
	start = time.Now()
	v := Boot(t, g, Options{Memory: 512})
	t.Logf("booted in %s", time.Since(start).Round(time.Millisecond))

	// state prints the status of the script before it (undosh's) and
	// what dpkg and the file system say of hello.
	const state = `echo "status $?"
dpkg -s hello >/dev/null 2>&1 && echo "dpkg: hello installed" || echo "dpkg: hello not installed"
test -e /usr/bin/hello && echo "/usr/bin/hello present" || echo "/usr/bin/hello absent"`
	// run runs script, then state, logs what the guest said, and fails
	// t unless that holds every string of want (one that starts with
	// "!": unless it does not hold the rest).
	run := func(what, script string, want ...string) {
		t.Helper()
		start := time.Now()
		out, _, err := v.Run("cd /root && export DEBIAN_FRONTEND=noninteractive\n"+script+"\n"+state, 5*time.Minute)
		t.Logf("%s (%s):\n%s", what, time.Since(start).Round(time.Millisecond), out)
		if err != nil {
			t.Fatalf("%s: %v (what the guest said is above)", what, err)
		}
		for _, w := range want {
			if no, ok := strings.CutPrefix(w, "!"); ok {
				if strings.Contains(out, no) {
					t.Fatalf("%s: %q in what the guest said (above)", what, no)
				}
			} else if !strings.Contains(out, w) {
				t.Fatalf("%s: no %q in what the guest said (above)", what, w)
			}
		}
	}
	run("the guest before", `true`, "dpkg: hello not installed", "/usr/bin/hello absent")
	run("dpkg -i whose verify fails", `UNDOSH_VERIFY=false undosh -c 'dpkg -i /root/debs/hello_*.deb'`,
		"Unpacking hello", "the copy was discarded", "status 1\n", "dpkg: hello not installed", "/usr/bin/hello absent")
	run("dpkg -i that passes", `undosh -c 'dpkg -i /root/debs/hello_*.deb'`,
		"Setting up hello", "!discarded", "status 0\n", "dpkg: hello installed", "/usr/bin/hello present")
	run("hello, installed", `hello; dpkg -s hello | grep '^Status:'`,
		"Hello, world!\n", "Status: install ok installed\n")
	run("apt-get remove whose verify fails", `UNDOSH_VERIFY=false undosh -c 'apt-get remove -y hello'`,
		"Removing hello", "the copy was discarded", "status 1\n", "dpkg: hello installed", "/usr/bin/hello present")
}
