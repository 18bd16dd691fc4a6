package install

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// dpkg is the package database of a root, driven through dpkg-divert and
// dpkg-query so that dpkg's own locking and file formats apply.
type dpkg struct {
	divert, query string // the programs; query may be ""
	root          fsRoot
}

// AdminDir is dpkg's database inside a root: a root without it has no dpkg.
const AdminDir = "/var/lib/dpkg"

// findDpkg returns the dpkg of r, or nil when r has no dpkg database. The
// note, when not "", says why a root that has one cannot be used.
func findDpkg(r fsRoot) (d *dpkg, note string) {
	st, err := os.Stat(r.host(AdminDir))
	if err != nil || !st.IsDir() {
		return nil, ""
	}
	divert, err := exec.LookPath("dpkg-divert")
	if err != nil {
		return nil, fmt.Sprintf("%s exists but dpkg-divert is not installed here, so bash is moved without a diversion: a bash upgrade in this root will overwrite undosh", AdminDir)
	}
	query, _ := exec.LookPath("dpkg-query")
	return &dpkg{divert: divert, query: query, root: r}, ""
}

func (d *dpkg) args(a ...string) []string {
	if d.root.live() {
		return a
	}
	return append([]string{"--root", d.root.dir}, a...)
}

func (d *dpkg) run(prog string, a ...string) (string, error) {
	cmd := exec.Command(prog, d.args(a...)...)
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if msg == "" {
			msg = strings.TrimSpace(out.String())
		}
		return out.String(), fmt.Errorf("%s %s: %w: %s", prog, strings.Join(a, " "), err, msg)
	}
	return out.String(), nil
}

// owner returns the packages that own path ("" when none does).
func (d *dpkg) owner(path string) string {
	if d.query == "" {
		return ""
	}
	out, err := d.run(d.query, "-S", path)
	if err != nil {
		return ""
	}
	// Lines are "pkg[, pkg]: path", plus "diversion by P from: path" and
	// "local diversion from: path" lines.
	for _, line := range strings.Split(out, "\n") {
		pkgs, p, ok := strings.Cut(line, ": ")
		if ok && p == path && !strings.Contains(pkgs, "diversion") {
			return pkgs
		}
	}
	return ""
}

// diversion returns who diverts path ("LOCAL" for a local diversion, ""
// for none) and where to.
func (d *dpkg) diversion(path string) (by, to string, err error) {
	out, err := d.run(d.divert, "--listpackage", path)
	if err != nil {
		return "", "", err
	}
	by = strings.TrimSpace(out)
	if by == "" {
		return "", "", nil
	}
	out, err = d.run(d.divert, "--truename", path)
	if err != nil {
		return "", "", err
	}
	return by, strings.TrimSpace(out), nil
}

// add diverts path to to, as a local diversion: every package's version
// of path goes to to. The file itself is moved by the caller.
func (d *dpkg) add(path, to string) error {
	_, err := d.run(d.divert, "--local", "--no-rename", "--divert", to, "--add", path)
	return err
}

// remove removes the diversion of path to to; removing one that is not
// there succeeds.
func (d *dpkg) remove(path, to string) error {
	_, err := d.run(d.divert, "--local", "--no-rename", "--divert", to, "--remove", path)
	return err
}
