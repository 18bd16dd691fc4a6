package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/undosh/undosh/internal/exit"
	"github.com/undosh/undosh/internal/journal"
	"github.com/undosh/undosh/internal/procs"
	"github.com/undosh/undosh/internal/state"
	"github.com/undosh/undosh/service"
)

// serviceCmd is undoctl services (what runs here, and the checkpoints of
// each) and undoctl service restore ID.
func serviceCmd(name string, args []string, io stdio, getenv func(string) string) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var c common
	c.register(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	ops, err := parse(fs, args)
	if err != nil {
		return err
	}
	p, _, err := c.setup(getenv)
	if err != nil {
		return err
	}
	sd := state.Dir(c.stateDir, getenv, os.Getuid())
	switch {
	case name == "services" && len(ops) == 0:
		found, err := service.Detect(p.Services)
		if err != nil {
			return err
		}
		var points []service.Point
		if st, err := service.Open(sd); err == nil {
			points, _ = st.List()
		}
		if *asJSON {
			if found == nil {
				found = []service.Service{}
			}
			if points == nil {
				points = []service.Point{}
			}
			return printJSON(io.out, struct {
				Services []service.Service `json:"services"`
				Points   []service.Point   `json:"checkpoints"`
			}{found, points})
		}
		printServices(io.out, found)
		for _, pt := range points {
			fmt.Fprintf(io.out, "checkpoint %s  %-16s %s  %s, frozen %s\n", pt.ID, pt.Service.Name, pt.Time.Local().Format("2006-01-02 15:04:05"),
				size(pt.Bytes), pt.Frozen.Round(time.Millisecond))
		}
		return nil
	case name == "service" && len(ops) == 2 && ops[0] == "checkpoint":
		found, err := service.Detect(p.Services)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(found, func(s service.Service) bool { return s.Name == ops[1] })
		if i < 0 {
			names := "none"
			for j, s := range found {
				if j == 0 {
					names = s.Name
				} else {
					names += ", " + s.Name
				}
			}
			return &hintError{err: fmt.Errorf("no service %q runs here", ops[1]),
				hint: "the services running here: " + names + " (undoctl services)"}
		}
		st, err := service.Open(sd)
		if err != nil {
			return err
		}
		pt, err := st.Checkpoint(context.Background(), found[i])
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(io.out, pt)
		}
		fmt.Fprintf(io.out, "checkpoint %s of %s: %s, frozen %s, took %s (undoctl service restore %s puts it back)\n",
			pt.ID, pt.Service.Name, size(pt.Bytes), pt.Frozen.Round(time.Millisecond/10), pt.Took.Round(time.Millisecond), pt.ID)
		return nil
	case name == "service" && len(ops) == 2 && ops[0] == "restore":
		st, err := service.Open(sd)
		if err != nil {
			return err
		}
		j, _, err := c.openJournal(getenv)
		if err != nil {
			return err
		}
		sp, err := restoreService(st, ops[1], io)
		if err != nil {
			return err
		}

		journalRestore(j, journal.Record{Command: "undoctl service restore " + ops[1], Class: "fork", Services: []journal.ServicePoint{sp}}, time.Now(), io)
		return nil
	}
	return &exit.UsageError{Msg: name + ": see undoctl help (services, service checkpoint NAME, or service restore ID)"}
}

// printServices lists the services running here, one a line.
func printServices(w io.Writer, found []service.Service) {
	if len(found) == 0 {
		fmt.Fprintln(w, "services:    none running that undosh knows (PostgreSQL, MySQL/MariaDB, Redis, MongoDB, or the policy's services:)")
		return
	}
	fmt.Fprintf(w, "services:    %d\n", len(found))
	for _, s := range found {
		where := fmt.Sprint(s.Data)
		if s.Unreadable != "" {
			where = "cannot be checkpointed: " + s.Unreadable
		}
		fmt.Fprintf(w, "  %-16s pid %-7d uid %-5d %s\n", s.Name, s.Main.PID, s.Main.UID, where)
	}
}

// restoreService puts the service of point id back, saying what it did
// and how to undo it; the journal's point says the same.
func restoreService(st *service.Store, id string, io stdio) (journal.ServicePoint, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	pt, err := st.Get(id)
	if err != nil {
		return journal.ServicePoint{}, err
	}
	res, err := st.Restore(ctx, id)
	sp := journal.ServicePoint{Name: pt.Service.Name, Kind: pt.Service.Kind, Before: res.After.ID, After: id, Restored: err == nil}
	if err != nil {
		var re *service.RestoreError
		if errors.As(err, &re) && re.Hint != "" {
			return sp, &hintError{err: err, hint: re.Hint}
		}
		return sp, err
	}
	fmt.Fprintf(io.out, "%s: back to checkpoint %s (pid %d)\n", pt.Service.Name, id, res.Main.PID)
	if res.After.ID != "" {
		fmt.Fprintf(io.err, "undoctl: to undo this: undoctl service restore %s\n", res.After.ID)
	}
	return sp, nil
}

// backLive puts back the services of live step r and starts again the
// processes it killed, before its workspace is put back.
func backLive(sd string, r journal.Record, io stdio) (journal.Record, error) {
	var rec journal.Record
	if len(r.Services) > 0 {
		st, err := service.Open(sd)
		if err != nil {
			return rec, err
		}
		for _, sp := range r.Services {
			done, err := restoreService(st, sp.Before, io)
			if err != nil {
				return rec, fmt.Errorf("put service %s back to before step %d: %w", sp.Name, r.ID, err)
			}
			rec.Services = append(rec.Services, done)
		}
	}
	for i, p := range r.Killed {
		q, err := procs.Start(p, filepath.Join(sd, "started", fmt.Sprintf("back-%d-%d.log", r.ID, i)))
		if err != nil {
			fmt.Fprintf(io.err, "undoctl: %v\n", err)
			continue
		}
		fmt.Fprintf(io.out, "started again: %s (pid %d, was %d); what it held in memory is lost\n", p.Command(), q.PID, p.PID)
	}
	return rec, nil
}

// journalRestore journals rec, a restore that started at start.
func journalRestore(j *journal.Journal, rec journal.Record, start time.Time, io stdio) {
	rec.Time, rec.PID, rec.Verdict, rec.Outcome = start, os.Getpid(), "run", journal.Restored
	rec.Duration = float64(time.Since(start).Microseconds()) / 1000
	rec.Cwd, _ = os.Getwd()
	if id, err := j.NewID(); err == nil {
		rec.ID = id
		if err := j.Append(rec); err != nil {
			fmt.Fprintf(io.err, "undoctl: the restore is not in the journal: %v\n", err)
		}
	}
}

// serviceGC drops service checkpoints older than maxAge, keeping the
// newest of each service.
func serviceGC(sd string, maxAge time.Duration) (dropped int, err error) {
	st, err := service.Open(sd)
	if err != nil {
		return 0, err
	}
	points, err := st.List()
	if err != nil {
		return 0, err
	}
	newest := map[string]string{}
	for _, pt := range points { // oldest first
		newest[pt.Service.Name] = pt.ID
	}
	for _, pt := range points {
		if newest[pt.Service.Name] == pt.ID || time.Since(pt.Time) < maxAge {
			continue
		}
		if err := st.Remove(pt.ID); err != nil {
			return dropped, err
		}
		dropped++
	}
	return dropped, nil
}
