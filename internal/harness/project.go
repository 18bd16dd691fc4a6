package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The project's files, as the story starts.
const (
	indexJS = "var x = 1;\n"
	testSh  = "#!/bin/bash\n# the project's test: x must be 1\ngrep -q 'x = 1;' index.js || { echo 'FAIL: x is not 1'; exit 1; }\necho ok\n"
	appJS   = "console.log('app');\n"
)

// WriteProject makes the story's project in dir/proj: index.js, test.sh
// and src/app.js, committed on main and pushed to a bare remote
// remoteDir/remote.git (origin), then one more commit that is not pushed,
// so that a push that runs changes the remote. It returns the project's
// path.
func WriteProject(dir, remoteDir string) (string, error) {
	proj := filepath.Join(dir, "proj")
	remote := filepath.Join(remoteDir, "remote.git")
	if err := os.MkdirAll(filepath.Join(proj, "src"), 0o755); err != nil {
		return "", fmt.Errorf("make project: %w", err)
	}
	for name, body := range map[string]string{"index.js": indexJS, "test.sh": testSh, "src/app.js": appJS} {
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(filepath.Join(proj, name), []byte(body), mode); err != nil {
			return "", fmt.Errorf("make project: %w", err)
		}
	}
	steps := [][]string{
		{"init", "-q", "--bare", "-b", "main", remote},
		{"-C", proj, "init", "-q", "-b", "main"},
		{"-C", proj, "add", "-A"},
		{"-C", proj, "commit", "-q", "-m", "start"},
		{"-C", proj, "remote", "add", "origin", remote},
		{"-C", proj, "push", "-q", "origin", "main"},
		{"-C", proj, "commit", "-q", "--allow-empty", "-m", "not pushed yet"},
	}
	for _, a := range steps {
		if err := git(dir, a...); err != nil {
			return "", err
		}
	}
	return proj, nil
}

// git runs git with a clean configuration: no system or global file but
// an identity.
func git(home string, args ...string) error {
	cmd := exec.Command("git", append([]string{"-c", "user.name=Harness", "-c", "user.email=harness@example.invalid"}, args...)...)
	cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// revParse returns what rev names in the repository at dir, or "" when
// it names nothing.
func revParse(dir, rev string) string {
	cmd := exec.Command("git", "-c", "safe.directory=*", "-C", dir, "rev-parse", "--verify", "-q", rev)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
