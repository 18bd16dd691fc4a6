package install

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/undosh/undosh/internal/atomicfile"
)

// Uninstall undoes everything the install record holds, newest first,
// and removes the record. With no record it changes nothing and reports
// Already, unless bash is undosh all the same.
func Uninstall(o Options) (Result, error) {
	r, err := newRoot(o.Root)
	if err != nil {
		return Result{}, err
	}
	res := Result{Root: r.dir}
	if err := CheckRoot(r.dir, os.Geteuid()); err != nil {
		return res, err
	}
	rec, err := loadRecord(r)
	if err != nil {
		return res, err
	}
	in := &installer{r: r, rec: rec, log: o.Log, saveable: true}
	if in.log == nil {
		in.log = io.Discard
	}
	if rec == nil {
		for _, p := range BashPaths {
			if in.r.isUndosh(p) {
				return res, &Error{Msg: fmt.Sprintf("%s is undosh, but there is no install record (%s)", p, RecordFile),
					Fix: "it was not installed by undoctl install, or the record was removed: put the real bash back by hand (dpkg-divert --list shows any diversion)"}
			}
		}
		res.Already = true
		return res, nil
	}
	in.dpkg, _ = findDpkg(r)
	// The shells lead to undosh itself first: the front end may be
	// removed before the real shells are put back (it is recorded after
	// them when a later run added it), and no shell may point at nothing.
	if err := in.relink(Binary); err != nil {
		return res, err
	}
	recordHost, err := r.target(RecordFile)
	if err != nil {
		return res, err
	}
	gone := false
	for i := len(rec.Actions) - 1; i >= 0; i-- {
		a := rec.Actions[i]
		if a.Op == opDir && !gone && strings.HasPrefix(RecordFile, a.Path+"/") {
			// The rest are the directories that hold the record.
			if err := os.Remove(recordHost); err != nil && !errors.Is(err, os.ErrNotExist) {
				return res, fmt.Errorf("remove %s: %w", RecordFile, err)
			}
			gone = true
		}
		if err := in.undo(a); err != nil {
			return res, err
		}
		res.Changed = true
		if !gone {
			rec.Actions = rec.Actions[:i]
			rec.Complete = false
			if err := in.save(); err != nil {
				return res, err
			}
		}
	}
	if !gone {
		if err := os.Remove(recordHost); err != nil && !errors.Is(err, os.ErrNotExist) {
			return res, fmt.Errorf("remove %s: %w", RecordFile, err)
		}
		if err := atomicfile.SyncDir(filepath.Dir(recordHost)); err != nil {
			return res, err
		}
	}
	res.Changed = true
	return res, nil
}

// undo undoes one action. Each undo copes with its action having been
// recorded but not (or only partly) done, and with having been undone
// already, so that an uninstall cut short can run again.
func (in *installer) undo(a Action) error {
	r := in.r
	h, err := r.at(a.Path)
	if err != nil {
		return err
	}
	switch a.Op {
	case opDir:
		err := os.Remove(h)
		switch {
		case err == nil || errors.Is(err, os.ErrNotExist):
			in.say("removed %s", a.Path)
		case errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST):
			in.say("kept %s: not empty", a.Path)
		default:
			return fmt.Errorf("remove %s: %w", a.Path, err)
		}
		return nil
	case opFile:
		if a.Existed {
			if err := atomicfile.Write(h, a.Data, a.Mode); err != nil {
				return err
			}
			in.say("restored %s", a.Path)
			return nil
		}
		if err := os.Remove(h); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", a.Path, err)
		}
		in.say("removed %s", a.Path)
		return nil
	case opGuardFile:
		return in.undoGuardFile(a, h)
	case opTakeover:
		return in.undoTakeover(a, h)
	case opDivert:
		if in.dpkg == nil {
			return &Error{Msg: fmt.Sprintf("cannot remove the diversion of %s: dpkg-divert is not available", a.Path),
				Fix: "run undoctl uninstall where dpkg-divert is installed"}
		}
		if err := in.dpkg.remove(a.Path, a.Target); err != nil {
			return err
		}
		in.say("removed the diversion of %s", a.Path)
		return nil
	case opLink:
		return in.undoLink(a, h)
	case opLine:
		if err := r.removeLine(a); err != nil {
			return err
		}
		in.say("removed %s from %s", a.Target, a.Path)
		return nil
	case opShell:
		cur, err := r.setShell(a.User, a.Old, a.Target)
		switch {
		case errors.Is(err, ErrNoUser):
			in.say("user %s is gone: nothing to restore", a.User)
		case err != nil:
			return err
		case cur != a.Target && cur != a.Old:
			in.say("user %s: kept login shell %s (changed since install)", a.User, cur)
		default:
			in.say("user %s: login shell %s again", a.User, shellName(a.Old))
		}
		return nil
	}
	return fmt.Errorf("the install record has an unknown action %q", a.Op)
}

func (in *installer) undoTakeover(a Action, h string) error {
	real, err := in.r.at(a.Target)
	if err != nil {
		return err
	}
	rst, err := os.Lstat(real)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	hst, err := os.Lstat(h)
	switch {
	case errors.Is(err, os.ErrNotExist), err == nil && hst.Mode()&os.ModeSymlink != 0 && isEntry(in.r.readlink(a.Path)):
		// One rename replaces the link to undosh: the name never goes
		// missing.
		if err := moveFile(real, h); err != nil {
			return err
		}
	case err != nil:
		return err
	case os.SameFile(hst, rst):
		// Cut short before the link to undosh was made.
		if err := os.Remove(real); err != nil {
			return err
		}
	default:
		return &Error{Msg: fmt.Sprintf("cannot put %s back: %s changed since install (it is no longer the link to undosh)", a.Target, a.Path),
			Fix: fmt.Sprintf("move %s to %s by hand if it is still wanted, or remove it; then run undoctl uninstall again", a.Target, a.Path)}
	}
	in.say("moved %s back to %s", a.Target, a.Path)
	return nil
}

func (in *installer) undoLink(a Action, h string) error {
	st, err := os.Lstat(h)
	cur := in.r.readlink(a.Path)
	switch {
	case errors.Is(err, os.ErrNotExist) && !a.Existed:
		return nil
	case errors.Is(err, os.ErrNotExist), err == nil && (cur == a.Target || a.Shell != "" && a.Target == Binary && isEntry(cur)):
		if a.Existed {
			if err := atomicfile.Symlink(a.Old, h); err != nil {
				return err
			}
			in.say("%s -> %s again", a.Path, a.Old)
			return nil
		}
		if err := os.Remove(h); err != nil {
			return fmt.Errorf("remove %s: %w", a.Path, err)
		}
		in.say("removed %s", a.Path)
		return nil
	case err != nil:
		return err
	case a.Existed && st.Mode()&os.ModeSymlink != 0 && cur == a.Old:
		return nil
	}
	return &Error{Msg: fmt.Sprintf("cannot restore %s: it changed since install (it is no longer a link to %s)", a.Path, a.Target),
		Fix: fmt.Sprintf("restore it by hand (it was %s), then run undoctl uninstall again", linkWas(a))}
}

func linkWas(a Action) string {
	if a.Existed {
		return "a link to " + a.Old
	}
	return "not there"
}
