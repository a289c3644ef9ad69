// Package dbio reads a database's own I/O statistics — PostgreSQL's
// pg_stat_io, pg_stat_wal, pg_stat_database and pg_stat_bgwriter; MySQL's
// and MariaDB's performance_schema.file_summary_by_instance — with
// read-only statistics queries, and turns two samples of those cumulative
// counters into one interval's deltas (DatabaseIO), each counter set
// attributed to the volume that holds the files it counts.
//
// It never opens a database file: the only file-system calls are the
// symlink and stat lookups that resolve a location to its mount.
package dbio

import (
	"errors"
	"fmt"
	"time"

	"github.com/plumbline/plumbline/internal/vocab"
)

// Counter is one operation's cumulative counters in one sample.
type Counter struct {
	Count uint64
	Bytes uint64 // 0 when the database does not say
	// TimeNS is the time the operations took, when Timed.
	TimeNS uint64
	Timed  bool
	// NotMeasured says why the time is not known when !Timed ("track_io_timing
	// is off").
	NotMeasured string
}

// Location is one place the database keeps files: what it is and the
// directory or file as the database names it.
type Location struct {
	Kind vocab.DatabaseLocation
	Path string
}

// Set is the cumulative counters of one location in one sample.
type Set struct {
	Location
	Ops map[vocab.DatabaseOp]Counter
	// Also are more directories whose I/O the counters include
	// (PostgreSQL's tablespaces: it does not count them apart).
	Also []string
	// File: Path is a file (MySQL counts each file), not a directory.
	File bool
	// FromZero: when the location is not in the previous sample, its
	// counters started within the interval (a file MySQL opened since),
	// so they are the delta themselves. Otherwise a new location waits
	// for the next sample.
	FromZero bool
}

// Unknown is something a sample could not read, and why.
type Unknown struct {
	Field  string // the view, column or setting
	Reason string
}

// Sample is one reading of a database's cumulative I/O counters.
type Sample struct {
	Engine  vocab.DatabaseEngine
	Version string
	At      time.Time
	// Started is when the server started; a change between samples is a
	// restart.
	Started time.Time
	// Epoch names the state of the counters' resets (PostgreSQL's
	// stats_reset times, the set of databases summed): a change between
	// samples means the counters restarted from zero, even when they
	// happen to be larger than before.
	Epoch   string
	Sets    []Set
	Unknown []Unknown
	// Truncated: the database counted more files than one sample reads
	// (MaxFiles); the files left out are not in Sets.
	Truncated bool
}

// Delta is one interval: the counters' differences between two samples.
type Delta struct {
	Engine   vocab.DatabaseEngine
	Version  string
	Start    time.Time
	Interval time.Duration
	Sets     []Set // the ops are differences; Timed only when both samples timed them
	Unknown  []Unknown
}

// ErrBackwards is returned by Diff when a counter went backwards between
// the samples (a statistics reset, a restart): the interval is not sent.
var ErrBackwards = errors.New("a counter went backwards (statistics reset or restart)")

// Diff is the interval from prev to cur. A location in cur and not in
// prev counts from zero when its set says FromZero, else it is left for
// the next interval; a location in prev and not in cur is gone (its last
// interval is lost). Any counter of a location in both samples that went
// backwards drops the interval (ErrBackwards).
func Diff(prev, cur Sample) (Delta, error) {
	d := Delta{Engine: cur.Engine, Version: cur.Version, Start: prev.At, Interval: cur.At.Sub(prev.At), Unknown: cur.Unknown}
	if d.Interval <= 0 {
		return Delta{}, fmt.Errorf("samples at %s and %s: want the second later", prev.At.Format(time.RFC3339Nano), cur.At.Format(time.RFC3339Nano))
	}
	switch {
	case prev.Version != cur.Version:
		return Delta{}, fmt.Errorf("server version changed from %q to %q (a restart): %w", prev.Version, cur.Version, ErrBackwards)
	case absDuration(cur.Started.Sub(prev.Started)) > startTolerance:
		return Delta{}, fmt.Errorf("server restarted (started %s, was %s): %w", cur.Started.Format(time.RFC3339), prev.Started.Format(time.RFC3339), ErrBackwards)
	case prev.Epoch != cur.Epoch:
		return Delta{}, fmt.Errorf("statistics reset (%s, was %s): %w", cur.Epoch, prev.Epoch, ErrBackwards)
	}
	before := make(map[Location]Set, len(prev.Sets))
	for _, s := range prev.Sets {
		before[s.Location] = s
	}
	for _, s := range cur.Sets {
		p, seen := before[s.Location]
		if !seen && (!s.FromZero || prev.Truncated) {
			continue // new, or left out of the previous sample: from the next interval on
		}
		out := Set{Location: s.Location, Also: s.Also, File: s.File}
		var err error
		if !seen {
			out.Ops = s.Ops // counted from zero within the interval
		} else if out.Ops, err = diffOps(p.Ops, s.Ops); err != nil {
			if !s.FromZero || prev.Truncated {
				return Delta{}, fmt.Errorf("%s %s: %w", s.Kind, s.Path, err)
			}
			out.Ops = s.Ops // a file created again (a table truncated, dropped and created): its counters restarted within the interval
		}
		d.Sets = append(d.Sets, out)
	}
	return d, nil
}

// diffOps is the difference of one set's counters; an op the previous
// sample did not have waits for the next interval.
func diffOps(prev, cur map[vocab.DatabaseOp]Counter) (map[vocab.DatabaseOp]Counter, error) {
	out := make(map[vocab.DatabaseOp]Counter, len(cur))
	for op, c := range cur {
		pc, ok := prev[op]
		if !ok {
			continue
		}
		dc, err := diffCounter(pc, c)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		out[op] = dc
	}
	return out, nil
}

// startTolerance is how far two readings of one server start may differ
// (MySQL states its uptime in whole seconds).
const startTolerance = 2 * time.Second

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// diffCounter is c - p; the time only when both timed the operation.
func diffCounter(p, c Counter) (Counter, error) {
	if c.Count < p.Count || c.Bytes < p.Bytes || (p.Timed && c.Timed && c.TimeNS < p.TimeNS) {
		return Counter{}, ErrBackwards
	}
	d := Counter{Count: c.Count - p.Count, Bytes: c.Bytes - p.Bytes}
	switch {
	case p.Timed && c.Timed:
		d.Timed, d.TimeNS = true, c.TimeNS-p.TimeNS
	case !c.Timed:
		d.NotMeasured = c.NotMeasured
	default:
		d.NotMeasured = "timing was switched on during the interval: " + p.NotMeasured
	}
	return d, nil
}
