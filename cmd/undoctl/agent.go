package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/undosh/undosh/internal/exit"
	"github.com/undosh/undosh/internal/guest"
	"github.com/undosh/undosh/internal/host"
	"github.com/undosh/undosh/internal/state"
)

// agentCmd is `undoctl agent --listen URL`: the guest end of the host
// link's control channel. It keeps what the host says this VM is (after
// every resume, restore or promotion) in the state directory, where undosh
// reads the current token and whether it runs in a copy.
func agentCmd(args []string, io stdio, getenv func(string) string) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	var c common
	c.register(fs)
	listen := fs.String("listen", "vsock://5758", "where the host connects: vsock://PORT, unix:///PATH")
	ops, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(ops) != 0 {
		return &exit.UsageError{Msg: "agent: no arguments (see undoctl help)"}
	}
	sd := state.Dir(c.stateDir, getenv, os.Getuid())
	if sd == "" {
		return &exit.UsageError{Msg: "no state directory: set --state DIR or UNDOSH_STATE_DIR"}
	}
	ln, err := host.Listen(*listen)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	fmt.Fprintf(io.err, "undoctl: agent: waiting for the host on %s; what it says goes to %s\n", *listen, guest.Path(sd))
	return guest.Serve(ln, sd, nil)
}
