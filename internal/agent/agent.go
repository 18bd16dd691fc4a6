// Package agent is the guest side of the host link's control channel
// (docs/hostlink.md): it takes the WHO_YOU_ARE the host sends a sandbox
// after every resume, restore or promotion, keeps it in the state
// directory where undosh reads it (the current generation's token, and
// whether this VM is the primary or a copy), mixes the host's entropy into
// the kernel's pool, and sets the clock when it is off.
//
// A VM told it is a copy runs a machine step for the host: undosh there
// treats every command as part of that step, and asks the host nothing.
package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/mdlayher/vsock"
	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/hostlink"
	"github.com/undosh/undosh/internal/atomicfile"
	"github.com/undosh/undosh/internal/where"
)

// hostCID is the vsock address of the host.
const hostCID = 2

// Path is where the last WHO_YOU_ARE is kept in a state directory.
func Path(stateDir string) string { return where.HostFile(stateDir) }

// Read returns the last WHO_YOU_ARE the host sent (without its entropy).
func Read(stateDir string) (hostlink.WhoYouAre, bool) {
	data, err := os.ReadFile(Path(stateDir))
	if err != nil {
		return hostlink.WhoYouAre{}, false
	}
	var w hostlink.WhoYouAre
	if json.Unmarshal(data, &w) != nil {
		return hostlink.WhoYouAre{}, false
	}
	return w, true
}

// Serve answers the host's WHO_YOU_ARE on ln until ln is closed.
func Serve(ln net.Listener, stateDir string, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return err
	}
	for {
		conn, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go func() {
			defer conn.Close()
			if err := handle(conn, stateDir); err != nil {
				log.Warn("control channel", "err", err)
				return
			}
		}()
	}
}

func handle(conn net.Conn, stateDir string) error {
	// Only the host may say who this VM is.
	if a, ok := conn.RemoteAddr().(*vsock.Addr); ok && a.ContextID != hostCID {
		return fmt.Errorf("WHO_YOU_ARE from vsock CID %d, not the host", a.ContextID)
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	f, err := hostlink.Decode(conn, hostlink.MaxRequest)
	if err != nil {
		return err
	}
	if f.Type != hostlink.TypeWhoYouAre {
		return fmt.Errorf("frame %v on the control channel, want WHO_YOU_ARE", f.Type)
	}
	var w hostlink.WhoYouAre
	if err := json.Unmarshal(f.Body, &w); err != nil {
		return fmt.Errorf("WHO_YOU_ARE: %w", err)
	}
	n, err := Apply(stateDir, w)
	var re *RefusedError
	if err != nil && !errors.As(err, &re) {
		return err
	}
	// A refusal is answered too: the host hears which generation this VM
	// has (docs/hostlink.md §7).
	body, _ := json.Marshal(n)
	if werr := hostlink.Encode(conn, hostlink.Frame{Type: hostlink.TypeNoted, Body: body}); err == nil {
		err = werr
	}
	return err
}

// RefusedError is a WHO_YOU_ARE whose generation is not greater than the
// one the VM has: a replay cannot roll it back.
type RefusedError struct {
	Generation uint64 // the WHO_YOU_ARE's
	Current    uint64 // the VM's, which it keeps
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("WHO_YOU_ARE of generation %d refused: this VM has generation %d already", e.Generation, e.Current)
}

// Apply adopts w as what this VM is, whichever channel brought it (vsock
// or virtio-serial): it mixes w's entropy into the kernel's pool, sets the
// clock when it is off (as root) and keeps w, without its entropy, in
// host.json in stateDir. It returns the NOTED to answer with. A w whose
// generation is not greater than the kept one is refused with a
// *RefusedError, and the NOTED then names the generation kept.
func Apply(stateDir string, w hostlink.WhoYouAre) (hostlink.Noted, error) {
	if w.Token == "" || w.Generation == 0 {
		return hostlink.Noted{}, errors.New("WHO_YOU_ARE without a token or generation")
	}
	if cur, ok := Read(stateDir); ok && w.Generation <= cur.Generation {
		return hostlink.Noted{Generation: cur.Generation}, &RefusedError{Generation: w.Generation, Current: cur.Generation}
	}
	if len(w.Entropy) > 0 {
		// Writing to /dev/urandom mixes the bytes in (it credits no
		// entropy): a resumed copy must not repeat its parent's numbers.
		if u, err := os.OpenFile("/dev/urandom", os.O_WRONLY, 0); err == nil {
			u.Write(w.Entropy)
			u.Close()
		}
	}
	if !w.HostTime.IsZero() && os.Geteuid() == 0 {
		// §7: set when more than 50 ms behind the host (a VM that was
		// paused) or 5 s ahead.
		if d := time.Since(w.HostTime); d < -50*time.Millisecond || d > 5*time.Second {
			ts := unix.NsecToTimespec(w.HostTime.UnixNano())
			unix.ClockSettime(unix.CLOCK_REALTIME, &ts)
		}
	}
	w.Entropy = nil
	data, err := json.Marshal(w)
	if err != nil {
		return hostlink.Noted{}, err
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return hostlink.Noted{}, err
	}
	if err := atomicfile.Write(Path(stateDir), data, 0o600); err != nil {
		return hostlink.Noted{}, err
	}
	return hostlink.Noted{Generation: w.Generation}, nil
}
