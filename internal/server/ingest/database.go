package ingest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// maxDatabaseInterval bounds one database interval: an agent samples its
// sources every minute or so; a day between two samples is a host that
// slept, whose deltas say nothing of an hour.
const maxDatabaseInterval = 24 * time.Hour

// maxDatabaseOpTime bounds one operation's mean time: an fsync that took
// longer than an hour is a corrupt counter, not a slow disk (a slow one
// is counted whole in the interval it ended in, so it may exceed the
// interval itself).
const maxDatabaseOpTime = time.Hour

// maxDatabaseConcurrency bounds the time all operations of an interval
// took over the interval's length: the database's backends wait in
// parallel, but not by the hundred thousand.
const maxDatabaseConcurrency = 100_000

// convertDatabaseIO checks a database interval from an agent and converts
// it for the store: words from vocab (engine, location, op), each op once
// per set and each set (location, path, volume) once, a volume or the reason there is
// none, and counts that add up — a time only with operations, not measured
// only without one, bytes only with operations.
func convertDatabaseIO(d *plumblinev1.DatabaseIO, now time.Time, lim Limits) (*store.DatabaseIO, error) {
	if d.GetSource() == "" || strings.ContainsFunc(d.GetSource(), unicode.IsControl) {
		return nil, fmt.Errorf("source %q: want a name without control characters", d.GetSource())
	}
	if !slices.Contains(vocab.DatabaseEngineNames(), d.GetEngine()) {
		return nil, fmt.Errorf("engine %q: want one of %s", d.GetEngine(), strings.Join(vocab.DatabaseEngineNames(), ", "))
	}
	started, err := checkTime(d.GetStartedAt(), "started_at", now, lim)
	if err != nil {
		return nil, err
	}
	iv := d.GetInterval()
	if iv == nil {
		return nil, errors.New("interval missing")
	}
	if err := iv.CheckValid(); err != nil {
		return nil, fmt.Errorf("interval: %w", err)
	}
	interval := iv.AsDuration()
	if interval <= 0 || interval > maxDatabaseInterval {
		return nil, fmt.Errorf("interval %s: want above 0 and at most %s", interval, maxDatabaseInterval)
	}
	out := &store.DatabaseIO{Source: d.GetSource(), Engine: d.GetEngine(), Version: d.GetVersion(), StartedAt: started, Interval: interval}
	// A set is one (location, volume): the same location's files on the
	// same volume, or left unattributed for the same reason, twice would
	// count them twice.
	seen := map[[4]string]bool{}
	for i, set := range d.GetSets() {
		key := [4]string{set.GetLocation(), set.GetPath(), set.GetMountPoint(), set.GetAttribution()}
		if seen[key] {
			return nil, fmt.Errorf("sets[%d]: location %s %q on %q twice", i, key[0], truncateUTF8(key[1], 64), truncateUTF8(key[2], 64))
		}
		seen[key] = true
		ops, err := convertDatabaseSet(set, interval)
		if err != nil {
			return nil, fmt.Errorf("sets[%d] (%s %s): %w", i, set.GetLocation(), truncateUTF8(set.GetPath(), 64), err)
		}
		out.Ops = append(out.Ops, ops...)
	}
	return out, nil
}

// convertDatabaseSet checks one counter set and returns its operations.
func convertDatabaseSet(set *plumblinev1.DatabaseIOSet, interval time.Duration) ([]store.DatabaseOp, error) {
	if !slices.Contains(vocab.DatabaseLocationNames(), set.GetLocation()) {
		return nil, fmt.Errorf("location %q: want one of %s", set.GetLocation(), strings.Join(vocab.DatabaseLocationNames(), ", "))
	}
	if set.GetPath() == "" || strings.ContainsFunc(set.GetPath(), unicode.IsControl) {
		return nil, errors.New("path: want the directory or file, without control characters")
	}
	base := store.DatabaseOp{Location: set.GetLocation(), Path: set.GetPath(), MountPoint: set.GetMountPoint(),
		Device: set.GetDevice(), Attribution: set.GetAttribution()}
	if base.MountPoint == "" {
		if base.Attribution == "" {
			return nil, errors.New("no mount_point and no attribution: an unattributed location says why")
		}
		if base.Device != "" {
			return nil, fmt.Errorf("device %q without a mount_point", base.Device)
		}
	} else {
		if err := checkMountPoint(base.MountPoint); err != nil {
			return nil, err
		}
		if !deviceName(base.Device) {
			return nil, fmt.Errorf("device %q: want a kernel device name (sdb, dm-3, md0)", base.Device)
		}
	}
	var out []store.DatabaseOp
	seen := map[string]bool{}
	for j, op := range set.GetOps() {
		o, err := convertDatabaseOp(op, base, interval)
		if err != nil {
			return nil, fmt.Errorf("ops[%d] (%s): %w", j, truncateUTF8(op.GetOp(), 32), err)
		}
		if seen[o.Op] {
			return nil, fmt.Errorf("ops[%d]: %s twice: each op once a set", j, o.Op)
		}
		seen[o.Op] = true
		out = append(out, o)
	}
	return out, nil
}

// convertDatabaseOp checks one operation's deltas.
func convertDatabaseOp(op *plumblinev1.DatabaseIOOp, o store.DatabaseOp, interval time.Duration) (store.DatabaseOp, error) {
	if !slices.Contains(vocab.DatabaseOpNames(), op.GetOp()) {
		return o, fmt.Errorf("op %q: want one of %s", op.GetOp(), strings.Join(vocab.DatabaseOpNames(), ", "))
	}
	o.Op, o.Count, o.Bytes, o.NotMeasured = op.GetOp(), op.GetCount(), op.GetBytes(), op.GetNotMeasured()
	if o.Count > math.MaxInt64 || o.Bytes > math.MaxInt64 {
		return o, fmt.Errorf("count %d, bytes %d: want at most 2^63-1", o.Count, o.Bytes)
	}
	if o.Count == 0 && o.Bytes != 0 {
		return o, fmt.Errorf("%d bytes moved by no operation", o.Bytes)
	}
	if op.TimeNanoseconds == nil {
		if o.NotMeasured == "" {
			return o, errors.New("no time_nanoseconds and no not_measured: an untimed op says why (never a silent 0)")
		}
		return o, nil
	}
	if o.NotMeasured != "" {
		return o, fmt.Errorf("time_nanoseconds with not_measured %q: one or the other", truncateUTF8(o.NotMeasured, 64))
	}
	t := op.GetTimeNanoseconds()
	switch {
	case t > 0 && o.Count == 0:
		return o, fmt.Errorf("time_nanoseconds %d for no operation", t)
	case t > math.MaxInt64 || o.Count > 0 && t/o.Count > uint64(maxDatabaseOpTime):
		return o, fmt.Errorf("time_nanoseconds %d over %d ops: want at most %s an op", t, o.Count, maxDatabaseOpTime)
	case float64(t) > float64(interval)*maxDatabaseConcurrency:
		return o, fmt.Errorf("time_nanoseconds %d in an interval of %s: more than %d operations at once", t, interval, maxDatabaseConcurrency)
	}
	o.Measured, o.Time = true, time.Duration(t)
	return o, nil
}
