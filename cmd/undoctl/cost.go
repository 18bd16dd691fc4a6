package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/undosh/undosh/internal/exit"
)

// costLine is one machine step's estimated spend.
type costLine struct {
	Step     int     `json:"step"`
	Seconds  float64 `json:"seconds"`
	CPUs     int     `json:"cpus"`
	MemGiB   float64 `json:"mem_gib"`
	Dollars  float64 `json:"dollars"`
	Snapshot int64   `json:"snapshot_bytes,omitempty"`
	Command  string  `json:"command"`
}

// costCmd estimates what the machine steps in the journal cost, from the
// policy's rates: each fork's running time times its vCPUs and memory, and
// each snapshot's size for the time it is kept (--months, default one).
func costCmd(args []string, io stdio, getenv func(string) string) error {
	fs := flag.NewFlagSet("cost", flag.ContinueOnError)
	var c common
	c.register(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	months := fs.Float64("months", 1, "how long snapshots are kept, in months")
	ops, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(ops) != 0 {
		return &exit.UsageError{Msg: "cost: no arguments (see undoctl help)"}
	}
	p, _, err := c.setup(getenv)
	if err != nil {
		return err
	}
	j, _, err := c.openJournal(getenv)
	if err != nil {
		return err
	}
	recs, err := j.Read()
	if err != nil {
		return err
	}
	var lines []costLine
	var compute, storage float64
	for _, r := range recs {
		// A live step ran here, not in a fork: what it costs is the
		// checkpoints of its services, kept as snapshots are.
		kept := r.SnapshotBytes
		for _, sp := range r.Services {
			kept += sp.Bytes
		}
		if (r.Class != "fork" || r.CPUs == 0) && kept == r.SnapshotBytes {
			continue
		}
		hours := r.Duration / 1000 / 3600
		d := hours * (float64(r.CPUs)*p.Cost.VCPUHour + r.MemGiB*p.Cost.GiBHour)
		s := float64(kept) / 1e9 * p.Cost.SnapshotGBMonth * *months
		compute += d
		storage += s
		lines = append(lines, costLine{Step: r.ID, Seconds: r.Duration / 1000, CPUs: r.CPUs, MemGiB: r.MemGiB,
			Dollars: d + s, Snapshot: kept, Command: oneLine(r.Command, 60)})
	}
	if *asJSON {
		if lines == nil {
			lines = []costLine{}
		}
		return printJSON(io.out, struct {
			Rates   any        `json:"rates"`
			Steps   []costLine `json:"steps"`
			Compute float64    `json:"compute_dollars"`
			Storage float64    `json:"storage_dollars"`
			Total   float64    `json:"total_dollars"`
		}{p.Cost, lines, compute, storage, compute + storage})
	}
	for _, l := range lines {
		fmt.Fprintf(io.out, "%-5d %9s %3d vCPU %6.1f GiB  $%.6f  %s\n", l.Step, time.Duration(l.Seconds*float64(time.Second)).Round(time.Millisecond),
			l.CPUs, l.MemGiB, l.Dollars, l.Command)
	}
	fmt.Fprintf(io.out, "%d machine steps: compute $%.6f, snapshots $%.6f, total $%.6f\n", len(lines), compute, storage, compute+storage)
	fmt.Fprintf(io.out, "rates: $%g per vCPU-hour, $%g per GiB-hour, $%g per GB-month of snapshots (policy cost:)\n",
		p.Cost.VCPUHour, p.Cost.GiBHour, p.Cost.SnapshotGBMonth)
	return nil
}
