package watch

import (
	"errors"
	"os"
	"os/exec"
	"testing"
)

// privateNS marks the test binary re-run in a mount namespace of its own.
const privateNS = "UNDOSH_WATCH_TEST_PRIVATE_NS"

// TestMain runs the tests, as root, in a private mount namespace: some
// mount a tmpfs under a watched tree, and a mount that comes and goes on
// the machine breaks other packages' tests that copy the machine's mounts
// meanwhile (go test runs packages at once).
func TestMain(m *testing.M) {
	if os.Geteuid() == 0 && os.Getenv(privateNS) == "" && exec.Command("unshare", "--mount", "true").Run() == nil {
		cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", os.Args[0]}, os.Args[1:]...)...)
		cmd.Env = append(os.Environ(), privateNS+"=1")
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		err := cmd.Run()
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			os.Exit(exit.ExitCode())
		case err != nil:
			os.Stderr.WriteString("watch tests: cannot run in a private mount namespace: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
