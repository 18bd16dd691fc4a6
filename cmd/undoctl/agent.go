package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sync/errgroup"

	"github.com/undosh/undosh/internal/agent"
	"github.com/undosh/undosh/internal/exit"
	"github.com/undosh/undosh/internal/state"
	"github.com/undosh/undosh/internal/undohost"
	"github.com/undosh/undosh/internal/vmagent"
)

// agentCmd is `undoctl agent [--listen URL] [--serial NAME] [--relay
// LISTEN=DIAL]`: the guest end of the host link. It keeps what the host
// says this VM is (after every resume, restore or promotion) in the state
// directory, where undosh reads the current token and whether it runs in
// a copy. The host says it on the control channel (--listen), or, in a
// QEMU VM, on a virtio-serial port (--serial), where it also runs
// commands; --relay carries undosh's Unix socket to the host link's TCP
// address in such a VM.
func agentCmd(args []string, io stdio, getenv func(string) string) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	var c common
	c.register(fs)
	var cfg agentConfig
	fs.StringVar(&cfg.listen, "listen", "", "where the host connects: vsock://PORT, unix:///PATH (default vsock://5758 without --serial)")
	fs.StringVar(&cfg.serial, "serial", "", "the name of the virtio-serial port the host reaches this agent on")
	relay := fs.String("relay", "", "LISTEN=DIAL: relay unix:///PATH to tcp://IP:PORT")
	ops, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(ops) != 0 {
		return &exit.UsageError{Msg: "agent: no arguments (see undoctl help)"}
	}
	if cfg.listen == "" && cfg.serial == "" {
		cfg.listen = "vsock://5758"
	}
	if *relay != "" {
		// The target, tcp://IP:PORT, has no "=" of its own.
		i := strings.LastIndex(*relay, "=")
		if i <= 0 || i == len(*relay)-1 {
			return &exit.UsageError{Msg: fmt.Sprintf("agent: --relay %q: want LISTEN=DIAL, as unix:///run/undosh-host.sock=tcp://10.0.2.100:5757", *relay)}
		}
		cfg.relayListen, cfg.relayDial = (*relay)[:i], (*relay)[i+1:]
	}
	cfg.stateDir = state.Dir(c.stateDir, getenv, os.Getuid())
	if cfg.stateDir == "" {
		return &exit.UsageError{Msg: "no state directory: set --state DIR or UNDOSH_STATE_DIR"}
	}
	if err := os.MkdirAll(filepath.Join(cfg.stateDir, "run"), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(cfg.stateDir, "run", "agent.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	cfg.log = slog.New(slog.NewJSONHandler(f, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return serveAgent(ctx, cfg, io.err)
}

// agentConfig is what undoctl agent serves.
type agentConfig struct {
	stateDir               string
	listen                 string // the control channel; "" for none
	serial                 string // the virtio-serial port's name; "" for none
	relayListen, relayDial string // "" for no relay
	sys, dev               string // where sysfs and /dev are: the real ones when empty
	log                    *slog.Logger
}

// serveAgent serves what cfg says until ctx is done, or one of them fails.
func serveAgent(ctx context.Context, cfg agentConfig, stderr io.Writer) error {
	g, ctx := errgroup.WithContext(ctx)
	if cfg.listen != "" {
		ln, err := undohost.Listen(cfg.listen)
		if err != nil {
			return err
		}
		context.AfterFunc(ctx, func() { ln.Close() })
		fmt.Fprintf(stderr, "undoctl: agent: waiting for the host on %s; what it says goes to %s\n", cfg.listen, agent.Path(cfg.stateDir))
		g.Go(func() error { return agent.Serve(ln, cfg.stateDir, cfg.log) })
	}
	a := &vmagent.Agent{StateDir: cfg.stateDir, Sys: cfg.sys, Dev: cfg.dev, Log: cfg.log}
	if cfg.serial != "" {
		fmt.Fprintf(stderr, "undoctl: agent: serving the host on virtio-serial port %s; what it says goes to %s\n", cfg.serial, agent.Path(cfg.stateDir))
		g.Go(func() error { return a.ServePort(ctx, cfg.serial) })
	}
	if cfg.relayListen != "" {
		fmt.Fprintf(stderr, "undoctl: agent: relaying %s to %s\n", cfg.relayListen, cfg.relayDial)
		g.Go(func() error { return a.Relay(ctx, cfg.relayListen, cfg.relayDial) })
	}
	return g.Wait()
}
