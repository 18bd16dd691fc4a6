// Command sidebyside times commands side by side in one run: each round
// runs every command once, in an order that rotates each round and is
// reversed every other cycle, so that drift in the machine's load and the
// cost of following one command or another fall on all of them alike.
// Every command is started the same way (fork and exec, then wait4, with
// stdin from /dev/null and stdout and stderr to files) and timed from
// just before the fork to just after wait4 returns. It prints, for each,
// the median wall time with p25 and p75, the child's CPU time and minor
// page faults (from wait4's rusage), and the ratios asked for: the ratio
// of the medians, the median (p25, p75) of the per-round ratios, and the
// ratio of the median CPU times. A target applies to the ratio of the
// medians of wall time.
//
//	sidebyside [flags] -- NAME CMD ARG... :: NAME CMD ARG... [:: ...]
//
// Flags:
//
//	-rounds N         recorded rounds (default 200)
//	-warmup N         rounds run first and not recorded (default 5)
//	-dir DIR          working directory of the commands (default .)
//	-ratio A/B[<=T]   print the ratio of A to B, and whether it is at most T
//	-status NAME=N    the exit status NAME must end with (default 0)
//	-after NAME=SCRIPT  run `bash -c SCRIPT` in DIR after each run of NAME,
//	                  untimed, with $BENCH_STDOUT and $BENCH_STDERR naming
//	                  the files that hold the run's output; if it fails,
//	                  so does the benchmark
//	-env NAME=KEY=VALUE  set KEY=VALUE in the environment of NAME alone
//	                  (repeatable)
//	-raw FILE         write every timing as CSV (round,position,name,wall_us,cpu_us,minflt)
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/undosh/undosh/bench/internal/stats"
)

type command struct {
	name   string
	path   string
	argv   []string
	status int
	after  string
	env    []string  // the environment: the benchmark's, with -env's
	wall   []float64 // ms
	cpu    []float64 // ms
	minflt []float64
	maxrss []float64 // KiB
}

type ratio struct {
	a, b   string
	target float64 // 0: none
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

func main() {
	rounds := flag.Int("rounds", 200, "recorded rounds")
	warmup := flag.Int("warmup", 5, "rounds run first and not recorded")
	dir := flag.String("dir", ".", "working directory of the commands")
	rawFile := flag.String("raw", "", "write every timing to this CSV file")
	var ratios, statuses, afters, envs multi
	flag.Var(&ratios, "ratio", "A/B or A/B<=TARGET (repeatable)")
	flag.Var(&statuses, "status", "NAME=N: expected exit status (repeatable)")
	flag.Var(&afters, "after", "NAME=SCRIPT: untimed check after each run of NAME (repeatable)")
	flag.Var(&envs, "env", "NAME=KEY=VALUE: an environment entry of NAME alone (repeatable)")
	flag.Parse()
	cmds, err := parseCommands(flag.Args())
	if err != nil {
		fail(err)
	}
	byName := map[string]*command{}
	for _, c := range cmds {
		if byName[c.name] != nil {
			fail(fmt.Errorf("two commands named %s", c.name))
		}
		byName[c.name] = c
	}
	for _, s := range statuses {
		name, v, _ := strings.Cut(s, "=")
		n, err := strconv.Atoi(v)
		if byName[name] == nil || err != nil {
			fail(fmt.Errorf("bad -status %q", s))
		}
		byName[name].status = n
	}
	for _, s := range afters {
		name, script, _ := strings.Cut(s, "=")
		if byName[name] == nil {
			fail(fmt.Errorf("bad -after %q: no command %s", s, name))
		}
		byName[name].after = script
	}
	for _, c := range cmds {
		c.env = os.Environ()
	}
	for _, s := range envs {
		name, kv, _ := strings.Cut(s, "=")
		if byName[name] == nil || !strings.Contains(kv, "=") {
			fail(fmt.Errorf("bad -env %q", s))
		}
		byName[name].env = append(byName[name].env, kv)
	}
	var rs []ratio
	for _, s := range ratios {
		r, err := parseRatio(s, byName)
		if err != nil {
			fail(err)
		}
		rs = append(rs, r)
	}

	tmp, err := os.MkdirTemp("", "sidebyside.")
	if err != nil {
		fail(err)
	}
	cleanup = func() { os.RemoveAll(tmp) }
	defer cleanup()
	b := &bench{dir: *dir, stdout: filepath.Join(tmp, "stdout"), stderr: filepath.Join(tmp, "stderr")}
	var raw *os.File
	if *rawFile != "" {
		if raw, err = os.Create(*rawFile); err != nil {
			fail(err)
		}
		defer raw.Close()
		fmt.Fprintln(raw, "round,position,name,wall_us,cpu_us,minflt")
	}

	fmt.Printf("%s, %d CPUs, load %s; %d rounds after %d warm-up, order rotated each round\n",
		time.Now().Format("2006-01-02 15:04"), runtime.NumCPU(), stats.Loadavg(), *rounds, *warmup)
	for r := -*warmup; r < *rounds; r++ {
		for pos, c := range stats.Order(cmds, r+*warmup) {
			res, err := b.run(c)
			if err != nil {
				fail(fmt.Errorf("%s: %w", c.name, err))
			}
			if r < 0 {
				continue
			}
			c.wall = append(c.wall, ms(res.wall))
			c.cpu = append(c.cpu, ms(res.cpu))
			c.minflt = append(c.minflt, float64(res.minflt))
			c.maxrss = append(c.maxrss, float64(res.maxrss))
			if raw != nil {
				fmt.Fprintf(raw, "%d,%d,%s,%d,%d,%d\n", r, pos, c.name, res.wall.Microseconds(), res.cpu.Microseconds(), res.minflt)
			}
		}
	}

	fmt.Printf("load at the end %s\n\n", stats.Loadavg())
	fmt.Printf("%-14s %9s %9s %9s %9s   %9s %8s %8s\n", "wall ms", "median", "p25", "p75", "min", "cpu ms", "minflt", "rss MiB")
	for _, c := range cmds {
		fmt.Printf("%-14s %9.2f %9.2f %9.2f %9.2f   %9.2f %8.0f %8.1f\n", c.name,
			stats.Quantile(c.wall, .5), stats.Quantile(c.wall, .25), stats.Quantile(c.wall, .75), stats.Quantile(c.wall, 0),
			stats.Quantile(c.cpu, .5), stats.Quantile(c.minflt, .5), stats.Quantile(c.maxrss, .5)/1024)
	}
	if len(rs) == 0 {
		return
	}
	fmt.Printf("\n%-24s %10s %16s %9s %9s %9s\n", "ratio", "of medians", "median of rounds", "p25", "p75", "of cpu")
	for _, r := range rs {
		a, b := byName[r.a], byName[r.b]
		per := make([]float64, len(a.wall))
		for i := range per {
			per[i] = a.wall[i] / b.wall[i]
		}
		line := fmt.Sprintf("%-24s %10.3f %16.3f %9.3f %9.3f %9.3f", r.a+" / "+r.b,
			stats.Quantile(a.wall, .5)/stats.Quantile(b.wall, .5), stats.Quantile(per, .5), stats.Quantile(per, .25), stats.Quantile(per, .75),
			stats.Quantile(a.cpu, .5)/stats.Quantile(b.cpu, .5))
		if r.target > 0 {
			verdict := "met"
			if stats.Quantile(a.wall, .5)/stats.Quantile(b.wall, .5) > r.target {
				verdict = "MISSED"
			}
			line += fmt.Sprintf("   target <= %g: %s", r.target, verdict)
		}
		fmt.Println(line)
	}
}

// parseCommands splits NAME CMD ARG... :: NAME CMD ARG... into commands.
func parseCommands(args []string) ([]*command, error) {
	var cmds []*command
	for len(args) > 0 {
		i := slices.Index(args, "::")
		if i < 0 {
			i = len(args)
		}
		if i < 2 {
			return nil, errors.New("each command needs a name and a program (NAME CMD ARG... :: NAME CMD ARG...)")
		}
		path, err := exec.LookPath(args[1])
		if err != nil {
			return nil, err
		}
		if path, err = filepath.Abs(path); err != nil {
			return nil, err
		}
		cmds = append(cmds, &command{name: args[0], path: path, argv: args[1:i]})
		args = args[min(i+1, len(args)):]
	}
	if len(cmds) == 0 {
		return nil, errors.New("usage: sidebyside [flags] -- NAME CMD ARG... [:: NAME CMD ARG...]")
	}
	return cmds, nil
}

func parseRatio(s string, byName map[string]*command) (ratio, error) {
	var r ratio
	spec, target, hasTarget := strings.Cut(s, "<=")
	a, b, ok := strings.Cut(spec, "/")
	if !ok || byName[a] == nil || byName[b] == nil {
		return r, fmt.Errorf("bad -ratio %q: want A/B with A and B command names", s)
	}
	r.a, r.b = a, b
	if hasTarget {
		t, err := strconv.ParseFloat(target, 64)
		if err != nil {
			return r, fmt.Errorf("bad -ratio %q: %w", s, err)
		}
		r.target = t
	}
	return r, nil
}

type bench struct {
	dir            string
	stdout, stderr string
}

type result struct {
	wall, cpu time.Duration
	minflt    int64
	maxrss    int64 // KiB
}

// run starts c, waits for it, checks its status and runs its check.
func (b *bench) run(c *command) (result, error) {
	var res result
	null, err := os.Open(os.DevNull)
	if err != nil {
		return res, err
	}
	defer null.Close()
	out, err := os.Create(b.stdout)
	if err != nil {
		return res, err
	}
	defer out.Close()
	errf, err := os.Create(b.stderr)
	if err != nil {
		return res, err
	}
	defer errf.Close()
	attr := &syscall.ProcAttr{Dir: b.dir, Env: c.env, Files: []uintptr{null.Fd(), out.Fd(), errf.Fd()}}

	var ws syscall.WaitStatus
	var ru syscall.Rusage
	start := time.Now()
	pid, err := syscall.ForkExec(c.path, c.argv, attr)
	if err != nil {
		return res, err
	}
	for {
		_, err = syscall.Wait4(pid, &ws, 0, &ru)
		if err != syscall.EINTR {
			break
		}
	}
	res.wall = time.Since(start)
	if err != nil {
		return res, err
	}
	res.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	res.minflt = ru.Minflt
	res.maxrss = ru.Maxrss

	status := ws.ExitStatus()
	if ws.Signaled() {
		status = 128 + int(ws.Signal())
	}
	if status != c.status {
		msg, _ := os.ReadFile(b.stderr)
		return res, fmt.Errorf("exit status %d, want %d; stderr:\n%s", status, c.status, msg)
	}
	if c.after != "" {
		cmd := exec.Command("/bin/bash", "-c", c.after)
		cmd.Dir = b.dir
		cmd.Env = append(os.Environ(), "BENCH_STDOUT="+b.stdout, "BENCH_STDERR="+b.stderr)
		if o, err := cmd.CombinedOutput(); err != nil {
			msg, _ := os.ReadFile(b.stderr)
			return res, fmt.Errorf("check after the run failed (%v): %s\nthe run's stderr:\n%s", err, o, msg)
		}
	}
	return res, nil
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// cleanup removes the temporary files; fail calls it before exiting.
var cleanup = func() {}

func fail(err error) {
	cleanup()
	fmt.Fprintln(os.Stderr, "sidebyside:", err)
	os.Exit(1)
}
