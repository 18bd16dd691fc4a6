package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/undosh/undosh/internal/exit"
	"github.com/undosh/undosh/internal/qemuhost"
)

const qemuUsage = `usage: undohost qemu [--root DIR] [--qemu BIN] [--max-chain N] [--agent-timeout D] OP ARGS

The QEMU provider: the commands undohost's provider templates run
(docs/undohost.md, "The QEMU provider"; docs/examples/qemu/).

  boot SANDBOX --listener SOCKET --kernel F --initrd F --disk BASE [--append S]
       [--memory MiB] [--cpus N] [--accel tcg|kvm] [--forward RULE]...
                              start the sandbox's first VM
  fork SANDBOX OP             a running copy of the sandbox's VM; prints its id
  network COPY MODE [HOST...] the copy's network: off (how it starts); allow is refused
  exec VM CWD [KEY=VALUE...] -- ARGV...
                              run ARGV in the VM; exits with its status
  promote SANDBOX COPY        the copy becomes the sandbox's VM; the old one quits
  delete COPY                 end a copy
  snapshot SANDBOX ID         checkpoint the sandbox's VM; prints its bytes
  restore SANDBOX ID          the sandbox's VM becomes checkpoint ID's
  delete-snapshot SANDBOX ID  drop a checkpoint
  notify SANDBOX [COPY]       tell the VM who it is (WHO_YOU_ARE JSON on stdin)
  stop SANDBOX                end all the sandbox's VMs and checkpoints
  pipe SOCKET                 join stdin and stdout to SOCKET (qemu's guestfwd runs it)
`

// qemuCmd is `undohost qemu …`.
func qemuCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("undohost qemu", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	root := fs.String("root", envOr("UNDOSH_QEMU_ROOT", "/var/lib/undohost/qemu"), "the provider's state directory")
	bin := fs.String("qemu", "", "the qemu a fork or restore starts (default: the sandbox's)")
	maxChain := fs.Int("max-chain", 8, "flatten a disk chain longer than this")
	agentTimeout := fs.Duration("agent-timeout", 30*time.Second, "how long a guest agent may take to answer")
	usage := func(msg string) int {
		fmt.Fprintf(stderr, "undohost qemu: %s\n%s", msg, qemuUsage)
		return exit.Usage
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, qemuUsage)
			return exit.OK
		}
		return usage(err.Error())
	}
	if fs.NArg() == 0 {
		return usage("no operation")
	}
	if fs.Arg(0) == "pipe" {
		if len(fs.Args()) != 2 {
			return usage(fmt.Sprintf("pipe takes 1 arguments, not %d", len(fs.Args())-1))
		}
		return pipeCmd(fs.Arg(1), stdin, stdout)
	}
	abs, err := filepath.Abs(*root)
	if err != nil {
		return usage(err.Error())
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		fmt.Fprintf(stderr, "undohost qemu: state directory: %v\n", err)
		return exit.Failure
	}
	h := &qemuhost.Host{Root: abs, QEMU: *bin, MaxChain: *maxChain, AgentTimeout: *agentTimeout}
	op, rest := fs.Arg(0), fs.Args()[1:]
	if logf, err := os.OpenFile(filepath.Join(abs, "qemu.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
		defer logf.Close()
		h.Log = slog.New(slog.NewJSONHandler(logf, nil)).With("op", op, "pid", os.Getpid())
	}
	n := map[string]int{"fork": 2, "promote": 2, "delete": 1, "snapshot": 2, "restore": 2, "delete-snapshot": 2, "stop": 1}
	if want, ok := n[op]; ok && len(rest) != want {
		return usage(fmt.Sprintf("%s takes %d arguments, not %d", op, want, len(rest)))
	}
	began := time.Now()
	status := exit.OK
	switch op {
	case "boot":
		err = qemuBoot(h, rest, stdout)
	case "fork":
		var id string
		if id, err = h.Fork(ctx, rest[0], rest[1]); err == nil {
			fmt.Fprintln(stdout, id)
		}
	case "network":
		if len(rest) < 2 {
			return usage("network takes COPY MODE [HOST...]")
		}
		err = h.Network(rest[0], rest[1], rest[2:])
	case "exec":
		i := slices.Index(rest, "--")
		if len(rest) < 2 || i < 2 || i == len(rest)-1 {
			return usage("exec takes VM CWD [KEY=VALUE...] -- ARGV...")
		}
		status, err = h.Exec(ctx, rest[0], rest[1], rest[2:i], rest[i+1:], stdout, stderr)
	case "promote":
		err = h.Promote(ctx, rest[0], rest[1])
	case "delete":
		err = h.Delete(ctx, rest[0])
	case "snapshot":
		var size int64
		if size, err = h.Snapshot(ctx, rest[0], rest[1]); err == nil {
			fmt.Fprintln(stdout, size)
		}
	case "restore":
		err = h.Restore(ctx, rest[0], rest[1])
	case "delete-snapshot":
		err = h.DeleteSnapshot(rest[0], rest[1])
	case "notify":
		if len(rest) < 1 || len(rest) > 2 {
			return usage("notify takes SANDBOX [COPY]")
		}
		copyID := ""
		if len(rest) == 2 {
			copyID = rest[1]
		}
		var who []byte
		if who, err = io.ReadAll(io.LimitReader(stdin, 1<<20)); err == nil {
			err = h.Notify(ctx, rest[0], copyID, who)
		}
	case "stop":
		err = h.Stop(rest[0])
	default:
		return usage(fmt.Sprintf("unknown operation %q", op))
	}
	if h.Log != nil {
		h.Log.Debug("done", "args", rest, "took", time.Since(began).String(), "err", err)
	}
	if err != nil {
		fmt.Fprintf(stderr, "undohost qemu: %s: %v\n", op, err)
		return exit.Failure
	}
	return status
}

func qemuBoot(h *qemuhost.Host, args []string, stdout io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return errors.New("boot takes SANDBOX first")
	}
	name := args[0]
	fs := flag.NewFlagSet("boot", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var o qemuhost.BootOptions
	fs.StringVar(&o.Listener, "listener", "", "the sandbox's undohost listener socket")
	fs.StringVar(&o.Config.Kernel, "kernel", "", "kernel (PVH vmlinux or bzImage)")
	fs.StringVar(&o.Config.Initrd, "initrd", "", "initramfs")
	fs.StringVar(&o.Base, "disk", "", "the qcow2 image the VM's disk is a layer over")
	fs.StringVar(&o.Config.Append, "append", "console=ttyS0 panic=-1 quiet", "kernel command line")
	fs.IntVar(&o.Config.Memory, "memory", 512, "MiB")
	fs.IntVar(&o.Config.CPUs, "cpus", 2, "vCPUs")
	fs.StringVar(&o.Config.Accel, "accel", "tcg", "tcg or kvm")
	fs.StringVar(&o.Config.Binary, "binary", "", "qemu (default qemu-system-x86_64)")
	fs.Func("forward", "a host port forward (tcp:127.0.0.1:8080-:80), repeatable", func(s string) error {
		o.Config.Forwards = append(o.Config.Forwards, s)
		return nil
	})
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("boot: %w", err)
	}
	for flag, v := range map[string]string{"--kernel": o.Config.Kernel, "--initrd": o.Config.Initrd, "--disk": o.Base} {
		if v == "" {
			return fmt.Errorf("boot: %s is required", flag)
		}
	}
	for _, p := range []*string{&o.Config.Kernel, &o.Config.Initrd, &o.Base, &o.Listener} {
		if *p != "" {
			abs, err := filepath.Abs(*p)
			if err != nil {
				return err
			}
			*p = abs
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	o.Config.HostLink = []string{self, "qemu", "pipe"}
	id, err := h.Boot(name, o)
	if err == nil {
		fmt.Fprintln(stdout, id)
	}
	return err
}

// pipeCmd is `undohost qemu pipe SOCKET`, which slirp runs for each guest
// connection to the host link's address with that connection on its
// stdin, stdout and stderr: nothing but the host link's bytes may go
// there, so what went wrong goes to the log of SOCKET's VM (qemu.log in
// its directory), and the guest sees the connection end. It needs no
// state directory: qemu runs it as it was booted, without --root.
func pipeCmd(socket string, stdin io.Reader, stdout io.Writer) int {
	if err := pipe(socket, stdin, stdout); err != nil {
		if f, ferr := os.OpenFile(filepath.Join(filepath.Dir(socket), "qemu.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); ferr == nil {
			fmt.Fprintf(f, "undohost qemu pipe: %v\n", err)
			f.Close()
		}
		return exit.Failure
	}
	return exit.OK
}

// pipe joins stdin and stdout to the Unix socket path. A VM whose link
// was not made (a copy) reaches nothing.
func pipe(path string, stdin io.Reader, stdout io.Writer) error {
	c, err := net.Dial("unix", path)
	if err != nil {
		return err
	}
	defer c.Close()
	go func() {
		io.Copy(c, stdin)
		c.(*net.UnixConn).CloseWrite()
	}()
	_, err = io.Copy(stdout, c)
	return err
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
