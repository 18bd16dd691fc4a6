package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/undosh/undosh/internal/testsvc"
)

// undoctl services lists a real Redis; service checkpoint takes a point
// of it, service restore puts it back (and journals it, with the point
// that undoes it), and gc drops the older points but the newest.
func TestServiceCommands(t *testing.T) {
	r := testsvc.StartRedis(t, testsvc.RedisOptions{})
	r.Do(t, "SET", "k", "one")
	sd := t.TempDir()
	getenv := func(k string) string {
		switch k {
		case "UNDOSH_STATE_DIR":
			return sd
		case "UNDOSH_POLICY":
			return "-"
		case "HOME":
			return sd
		}
		return ""
	}
	ctl := func(args ...string) (string, string, int) {
		var out, errb strings.Builder
		code := run(args, stdio{in: strings.NewReader(""), out: &out, err: &errb}, getenv)
		return out.String(), errb.String(), code
	}
	out, errs, code := ctl("services", "--json")
	var listed struct {
		Services []struct {
			Name string `json:"name"`
			Port int    `json:"port"`
		} `json:"services"`
	}
	if err := json.Unmarshal([]byte(out), &listed); code != 0 || err != nil {
		t.Fatalf("services --json: %d %v\n%s%s", code, err, out, errs)
	}
	name := ""
	for _, s := range listed.Services {
		if s.Port == r.Port {
			name = s.Name
		}
	}
	if name == "" {
		t.Fatalf("services does not list the Redis on port %d: %s", r.Port, out)
	}
	if out, errs, code = ctl("service", "checkpoint", "no-such-service"); code == 0 || !strings.Contains(errs, "undoctl services") {
		t.Errorf("service checkpoint of a service that does not run: %d\n%s%s", code, out, errs)
	}
	out, errs, code = ctl("service", "checkpoint", "--json", name)
	var pt struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(out), &pt); code != 0 || err != nil || pt.ID == "" {
		t.Fatalf("service checkpoint: %d %v\n%s%s", code, err, out, errs)
	}
	r.Do(t, "SET", "k", "two")
	if out, errs, code = ctl("service", "restore", pt.ID); code != 0 || !strings.Contains(errs, "undoctl service restore ") {
		t.Fatalf("service restore: %d\n%s%s", code, out, errs)
	}
	if v := r.Do(t, "GET", "k"); v != "one" {
		t.Errorf("k after service restore: %q, want one", v)
	}
	out, _, _ = ctl("show", "1")
	if !strings.Contains(out, "service:") || !strings.Contains(out, name) {
		t.Errorf("the journal's record of the restore:\n%s", out)
	}
	if out, errs, code = ctl("gc", "--max-age", "0s"); code != 0 || !strings.Contains(out, "dropped "+strconv.Itoa(1)+" service checkpoints") {
		t.Errorf("gc: %d\n%s%s", code, out, errs)
	}
	out, _, _ = ctl("services")
	if n := strings.Count(out, "checkpoint "); n != 1 {
		t.Errorf("after gc, %d service checkpoints listed, want the newest only:\n%s", n, out)
	}
}
