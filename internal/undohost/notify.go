package undohost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/undosh/undosh/hostlink"
	"github.com/undosh/undosh/internal/atomicfile"
)

// A provider with a notify command captures memory: every VM that its
// commands resume from a capture is told who it is (docs/hostlink.md §7),
// with a generation of its own. That is the original after a fork or a
// checkpoint paused it (primary), the copy before its step runs (copy),
// the copy promoted to be the sandbox (primary) and the VM a restore
// loaded (restored). The rules for all of them are here.

// notifies reports whether the provider tells VMs who they are.
func (p *Provider) notifies() bool { return len(p.cfg.Notify) > 0 && p.advance != nil }

// pending is a message that the sandbox's VM may not have had: it is
// written before the generation advances and removed once notify has
// delivered it, in <state>/provider/notify/<sandbox>.json. An undohost
// that was killed in between tells the VM at its next start ([Provider.Retell]).
type pending struct {
	Op         string        `json:"op"`
	Role       hostlink.Role `json:"role"`
	Checkpoint string        `json:"checkpoint,omitempty"`
	// Parent is the generation the VM came from: the one it had, or a
	// promoted copy's, or a restored checkpoint's.
	Parent uint64 `json:"parent_generation,omitempty"`
}

func (p *Provider) pendingPath(sandbox string) string {
	return filepath.Join(p.state, "notify", sandbox+".json")
}

// resumed starts a new generation for the VM behind the sandbox, which a
// command of m.Op has just resumed or replaced, and tells it.
func (p *Provider) resumed(ctx context.Context, sandbox string, m pending) error {
	_, err := p.newGeneration(ctx, sandbox, m, false)
	return err
}

// forked starts the generations of a fork's two VMs, both resumed from
// the capture the fork command made, and tells the original at once. It
// returns what to tell the copy, whose turn comes after its network is
// cut and before its step runs (zero without notify).
func (p *Provider) forked(ctx context.Context, sandbox, op string) (hostlink.WhoYouAre, error) {
	return p.newGeneration(ctx, sandbox, pending{Op: op, Role: hostlink.RolePrimary}, true)
}

// newGeneration records m as pending, advances the sandbox's generation
// and tells its VM. With fork, the copy's generation is taken first and
// returned, so that the sandbox's current generation, the one its
// listener and token file serve, is the original's: the copy's token is
// stale from the start (and a copy reaches no listener anyway).
func (p *Provider) newGeneration(ctx context.Context, sandbox string, m pending, fork bool) (hostlink.WhoYouAre, error) {
	var cw hostlink.WhoYouAre
	if !p.notifies() {
		return cw, nil
	}
	if m.Parent == 0 && p.catalog.generation != nil {
		// The generation the VM has, for a record read after a restart.
		m.Parent = p.catalog.generation(sandbox)
	}
	b, err := json.Marshal(m)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(p.pendingPath(sandbox)), 0o700)
	}
	if err == nil {
		err = atomicfile.Write(p.pendingPath(sandbox), b, 0o600)
	}
	if err != nil {
		return cw, err
	}
	if fork {
		if cw, err = p.advance(sandbox, hostlink.RoleCopy, m.Op); err != nil {
			return cw, err
		}
		m.Parent = cw.Parent
	}
	w, err := p.advance(sandbox, m.Role, m.Op)
	if err != nil {
		return cw, err
	}
	w.Checkpoint = m.Checkpoint
	if m.Parent != 0 {
		w.Parent = m.Parent
	}
	if err := p.tell(ctx, sandbox, "", w); err != nil {
		return cw, err
	}
	if err := atomicfile.Write(p.toldPath(sandbox), []byte(strconv.FormatUint(w.Generation, 10)), 0o600); err != nil {
		return cw, err
	}
	os.Remove(p.pendingPath(sandbox))
	return cw, nil
}

// toldPath records the last generation the sandbox's VM was told, so
// that a VM never told anything (a sandbox new to this undohost, booted
// before it started) is told at the start.
func (p *Provider) toldPath(sandbox string) string {
	return filepath.Join(p.state, "notify", sandbox+".told")
}

// tell runs the notify command with w on its stdin: for the copy copyID,
// or for the sandbox's VM when copyID is "". host_time is the host's
// clock as the command starts, since the VM's clock stood still while
// it was paused.
func (p *Provider) tell(ctx context.Context, sandbox, copyID string, w hostlink.WhoYouAre) error {
	w.HostTime = time.Now().UTC()
	b, err := json.Marshal(w)
	if err != nil {
		return err
	}
	d := p.data(sandbox, w.Op)
	d.Copy = copyID
	_, _, err = p.run(ctx, "notify", d, cmdIO{stdin: bytes.NewReader(b)})
	return err
}

// Retell tells the VM of each sandbox in sandboxes whose message may
// not have arrived (an undohost killed, or a notify cut short, between
// a new generation and its delivery) who it is, with a generation newer
// still: a VM that had the first message takes this one too, and no VM
// is told one generation twice. A sandbox whose VM was never told
// anything (new to this undohost) is told too: that is how a VM booted
// before undohost started learns its first token. Run calls it before
// serving. A sandbox whose notify fails again keeps its record for the
// next start.
func (p *Provider) Retell(ctx context.Context, sandboxes []string) {
	if !p.notifies() {
		return
	}
	var wg sync.WaitGroup
	for _, sb := range sandboxes {
		b, err := os.ReadFile(p.pendingPath(sb))
		if errors.Is(err, os.ErrNotExist) {
			if _, terr := os.Stat(p.toldPath(sb)); terr == nil {
				continue
			}
			b, err = json.Marshal(pending{Op: "start", Role: hostlink.RolePrimary})
		}
		var m pending
		if err == nil {
			err = json.Unmarshal(b, &m)
		}
		if err != nil || m.Role == "" {
			p.log.Warn("unreadable notify record", "sandbox", sb, "err", err)
			m = pending{Role: hostlink.RolePrimary}
		}
		wg.Go(func() {
			tctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			if err := p.resumed(tctx, sb, m); err != nil {
				p.log.Error("tell the VM who it is at the start", "sandbox", sb, "op", m.Op, "err", err)
				return
			}
			p.log.Info("told the VM who it is at the start", "sandbox", sb, "op", m.Op, "role", m.Role)
		})
	}
	wg.Wait()
}

// namesCopy reports whether a notify template can tell a copy from the
// sandbox's VM: it must use .Copy, which is set only for a copy.
func namesCopy(argv []string) bool {
	for _, a := range argv {
		if strings.Contains(a, ".Copy") {
			return true
		}
	}
	return false
}
