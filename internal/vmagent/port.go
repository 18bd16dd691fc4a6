package vmagent

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// How long ServePort waits for its port to appear (the modules may still
// be loading), and how often it looks.
const (
	portWait = 30 * time.Second
	portPoll = 50 * time.Millisecond
)

// idle is how long the agent waits before it reads its port again while
// no host is connected.
const idle = 10 * time.Millisecond

// ServePort serves the host on the virtio-serial port called name (QEMU's
// -device virtserialport,name=NAME) until ctx is done, then returns nil.
// It finds the port's device in sysfs, waiting up to 30 s for it to
// appear, and serves one host session after another on it.
func (a *Agent) ServePort(ctx context.Context, name string) error {
	dev, err := a.findPort(ctx, name, portWait)
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return err
	}
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open virtio-serial port %s: %w", name, err)
	}
	defer f.Close()
	// The device is pollable: closing it ends a read or write that waits.
	stop := context.AfterFunc(ctx, func() { f.Close() })
	defer stop()
	if err := a.serve(ctx, f); err != nil {
		return fmt.Errorf("virtio-serial port %s: %w", name, err)
	}
	return nil
}

// serve runs one session after another on dev until ctx is done. A
// session that cannot write its replies ends, and the next host is
// served: only a device that cannot be read ends serve.
func (a *Agent) serve(ctx context.Context, dev io.ReadWriter) error {
	r := newReader(dev, true)
	for {
		err := a.session(r.lines, dev)
		select {
		case <-r.done:
			if ctx.Err() != nil {
				return nil
			}
			return r.err
		default:
		}
		if err != nil {
			a.log().Warn("a host session ended", "err", err)
		}
	}
}

// findPort is the device of the virtio-serial port called name, which it
// waits up to wait for.
func (a *Agent) findPort(ctx context.Context, name string, wait time.Duration) (string, error) {
	sys, dev := a.Sys, a.Dev
	if sys == "" {
		sys = "/sys"
	}
	if dev == "" {
		dev = "/dev"
	}
	dir := filepath.Join(sys, "class", "virtio-ports")
	deadline := time.Now().Add(wait)
	tick := time.NewTicker(portPoll)
	defer tick.Stop()
	for {
		if port, ok := lookPort(dir, name); ok {
			return filepath.Join(dev, port), nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no virtio-serial port named %q in %s after %v: start the VM with -device virtserialport,name=%s", name, dir, wait, name)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("wait for virtio-serial port %q: %w", name, ctx.Err())
		case <-tick.C:
		}
	}
}

// lookPort is the entry of dir (/sys/class/virtio-ports) whose name file
// says name: vportNpM, also the name of its device. Without udev there is
// no /dev/virtio-ports/NAME.
func lookPort(dir, name string) (string, bool) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", false
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "name"))
		if err == nil && strings.TrimSpace(string(b)) == name {
			return e.Name(), true
		}
	}
	return "", false
}
