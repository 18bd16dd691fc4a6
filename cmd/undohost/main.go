// Command undohost is the host daemon of the hostlink protocol
// (docs/hostlink.md): it forks, checkpoints and restores sandboxes for the
// undosh inside them, through the local fork engine or a provider's
// commands. docs/undohost.md is its manual.
//
//	undohost --backend local|provider --listen URL [--config FILE] [--state DIR]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/internal/exit"
	"github.com/undosh/undosh/internal/undohost"
)

func main() {
	if filepath.Base(os.Args[0]) == fork.InitName {
		// pid 1 of a copy of the machine (the local backend).
		os.Exit(fork.Init())
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr))
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "qemu" {
		return qemuCmd(ctx, args[1:], os.Stdin, os.Stdout, stderr)
	}
	var o undohost.Options
	fs := flag.NewFlagSet("undohost", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Backend, "backend", "", "local or provider (default: the config's, else local)")
	fs.StringVar(&o.Listen, "listen", "", "listener of the sandbox \"default\": unix:///PATH, tcp://127.0.0.1:PORT or vsock://PORT")
	fs.StringVar(&o.Config, "config", "", "configuration file (YAML or JSON): more sandboxes, the provider's commands")
	fs.StringVar(&o.StateDir, "state", undohost.DefaultStateDir, "state directory: operations, tokens, checkpoints, undohost.log")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exit.OK
		}
		return exit.Usage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "undohost: error: unexpected argument %q\n", fs.Arg(0))
		return exit.Usage
	}
	err := undohost.Run(ctx, o)
	if err == nil {
		return exit.OK
	}
	fmt.Fprintf(stderr, "undohost: error: %v\n", err)
	var ce *undohost.ConfigError
	var me *fork.MissingError
	switch {
	case errors.As(err, &ce):
		fmt.Fprintln(stderr, "undohost: hint: see docs/undohost.md for the flags and the config file")
		return exit.Usage
	case errors.As(err, &me):
		fmt.Fprintln(stderr, "undohost: hint: the local backend needs root, overlayfs and namespaces; use --backend provider on a host that forks VMs")
	}
	return exit.Failure
}
