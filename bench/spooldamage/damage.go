package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/agent/spool"
)

// damageCase is one cell of the damaged-spool matrix: what is done to
// the ack file, to a segment of the records spooled while the server was
// down, and to the header (the incarnation) of another of them.
type damageCase struct {
	Ack     string // ok, deleted, flipped (one byte), truncated, empty
	Segment string // ok, tail-truncated, middle-flipped (one byte), deleted, newest-deleted
	Header  string // ok, one-copy (one byte in one copy), both-copies
	// Before: the ack file is damaged before the outage run instead of
	// after it (the agent then numbers the outage's records without
	// knowing what the server settled).
	Before bool
}

func (c damageCase) String() string {
	if c.Before {
		return "ack " + c.Ack + " before the outage"
	}
	return c.Ack + "/" + c.Segment + "/" + c.Header
}

// matrix is the damaged-spool matrix, pruned to the distinct cases: every
// ack damage with every segment damage (their effects combine: the ack
// file decides what is sent again, the segment what is lost; the newest
// segment deleted whole loses records no file tells of, which are checked
// as not counted, and not numbered again either), and the
// header damages with an intact and a deleted ack file and an intact and
// a deleted segment (a header decides which incarnation records are sent
// with, whatever the ack file says; the other ack damages take the same
// path as deleted). fast is the tests' selection (fastCases).
func matrix(fast bool) []damageCase {
	if fast {
		return fastCases()
	}
	acks := []string{"ok", "deleted", "flipped", "truncated", "empty"}
	var out []damageCase
	for _, a := range acks {
		for _, s := range []string{"ok", "tail-truncated", "middle-flipped", "deleted", "newest-deleted"} {
			out = append(out, damageCase{a, s, "ok", false})
		}
	}
	for _, a := range []string{"ok", "deleted"} {
		for _, s := range []string{"ok", "deleted"} {
			for _, h := range []string{"one-copy", "both-copies"} {
				out = append(out, damageCase{a, s, h, false})
			}
		}
	}
	for _, a := range acks[1:] {
		out = append(out, damageCase{Ack: a, Segment: "ok", Header: "ok", Before: true})
	}
	return out
}

// fastCases is the part of the matrix `go test` runs: one case per code
// path of the spool's recovery, each path once (the full matrix, in the
// bench, combines them all):
//
//   - ok/ok/ok: no damage; the outage run's records go with their own
//     incarnation after the restart (a second Hello on the connection);
//   - deleted/ok/ok: ack-missing, everything sent again, the server's
//     high-water mark at the old incarnation's Hello settles what it has
//     (truncated and empty ack files fail the same parse as flipped, and
//     the spool package's own matrix covers them);
//   - flipped/middle-flipped/ok: ack-damaged (a checksum failure) and
//     segment-corrupt, lost records counted as corrupt at the Hello;
//   - ok/tail-truncated/ok: segment-torn, counted as truncated;
//   - ok/deleted/ok: segment-missing, counted as missing-segment;
//   - deleted/newest-deleted/ok: the newest segment gone with no file
//     telling of it: not counted, and with no ack file not numbered again;
//   - ok/ok/one-copy: header-repaired from the other copy;
//   - deleted/deleted/both-copies: header-lost, its records continuing the
//     previous segment's incarnation, next to a missing segment;
//   - ack flipped before the outage: the outage run numbers its records
//     without knowing what the server settled.
func fastCases() []damageCase {
	return []damageCase{
		{"ok", "ok", "ok", false},
		{"deleted", "ok", "ok", false},
		{"flipped", "middle-flipped", "ok", false},
		{"ok", "tail-truncated", "ok", false},
		{"ok", "deleted", "ok", false},
		{"deleted", "newest-deleted", "ok", false},
		{"ok", "ok", "one-copy", false},
		{"deleted", "deleted", "both-copies", false},
		{Ack: "flipped", Segment: "ok", Header: "ok", Before: true},
	}
}

// result is what a case counted.
type result struct {
	Case      string
	Generated uint64            // records the agent appended, over its three runs
	Stored    uint64            // records the server stored
	Destroyed uint64            // records whose bytes the damage destroyed
	Lost      map[string]uint64 // records the agent counted lost, by reason
	Held      uint64            // records still in the spool at the end
	// Uncounted: records destroyed that no file left tells of (the
	// newest segment deleted whole): stored + uncounted + held must make
	// up the generated, and none may be counted lost.
	Uncounted bool
	Logged    int    // "spool damaged" log lines
	Conflicts uint64 // identity conflicts the server counted (false alarms here)
}

func (r result) lost() uint64 {
	var n uint64
	for _, v := range r.Lost {
		n += v
	}
	return n
}

// check says what is wrong with a result: every generated record stored
// once or counted lost, and exactly the destroyed ones counted.
func (r result) check() error {
	var errs []string
	counted := r.Destroyed
	if r.Uncounted {
		counted = 0
	}
	if r.Stored+r.Destroyed+r.Held != r.Generated {
		errs = append(errs, fmt.Sprintf("stored %d + destroyed %d + held %d != generated %d", r.Stored, r.Destroyed, r.Held, r.Generated))
	}
	if r.lost() != counted {
		errs = append(errs, fmt.Sprintf("counted lost %d (%v), want %d (destroyed %d)", r.lost(), r.Lost, counted, r.Destroyed))
	}
	if r.Conflicts != 0 {
		errs = append(errs, fmt.Sprintf("the server counted %d identity conflicts", r.Conflicts))
	}
	if counted > 0 && r.Logged == 0 {
		errs = append(errs, "records destroyed without a log line")
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s: %s", r.Case, strings.Join(errs, "; "))
	}
	return nil
}

// runCase: an agent reports to the server until 20 records are stored
// and stops; the server stops; the agent runs again until the records
// it spools fill five segments, and stops; the damage is applied; the
// agent starts a third time (without probes) and the server comes back;
// once the spool is drained both stop and the records are counted.
func runCase(ctx context.Context, dir, dsn string, c damageCase) (result, error) {
	res := result{Case: c.String()}
	l, err := newLab(ctx, dir, dsn, filepath.Join(dir, "spool"))
	if err != nil {
		return res, err
	}
	defer l.close()
	cfg := l.cfg
	cfg.Spool.MaxBytes = 64 << 10 // 8 KiB segments: a few dozen records each
	log := &logBuffer{}
	gen, inc2, err := spoolOutage(ctx, l, cfg, log, c)
	if err != nil {
		return res, err
	}
	if c.Before {
		c.Ack = "ok" // done
	}
	if res.Destroyed, err = applyDamage(cfg.Spool.Dir, inc2, c); err != nil {
		return res, err
	}
	res.Uncounted = c.Segment == "newest-deleted"
	cfg.Probes = nil
	r3, err := l.runAgent(cfg, log)
	if err != nil {
		return res, err
	}
	if err := l.start(); err != nil {
		r3.stop()
		return res, err
	}
	sp := r3.a.Spool()
	err = waitFor("the spool to drain", time.Minute, func() bool {
		return r3.generated() > 0 && sp.Stats().Records == 0 && sp.SendingIncarnation() == sp.Incarnation()
	})
	if serr := r3.stop(); err == nil {
		err = serr
	}
	if err != nil {
		return res, err
	}
	l.stop()
	st := sp.Stats()
	res.Generated = gen + r3.generated()
	res.Lost, res.Held, res.Logged = st.Lost, uint64(st.Records), log.count("spool damaged")
	return res, res.count(ctx, l, sp.Incarnation())
}

// count reads what the server holds into res and checks it.
func (r *result) count(ctx context.Context, l *lab, last string) error {
	var err error
	if r.Stored, err = l.stored(ctx); err != nil {
		return err
	}
	var current string
	if r.Conflicts, current, err = l.conflicts(ctx); err != nil {
		return err
	}
	if err := r.check(); err != nil {
		return err
	}
	if current != last {
		return fmt.Errorf("%s: the server's current incarnation is %q, want the last run's %q", r.Case, current, last)
	}
	return nil
}

// spoolOutage runs the agent until the server stored 20 records, stops
// both, (damages the ack file when c.Before,) runs the agent again until
// its records fill five segments, and stops it. It returns the records
// both runs generated and the second run's incarnation.
func spoolOutage(ctx context.Context, l *lab, cfg config.Agent, log *logBuffer, c damageCase) (uint64, string, error) {
	r1, err := l.runAgent(cfg, log)
	if err != nil {
		return 0, "", err
	}
	err = waitFor("20 records stored", time.Minute, func() bool { n, _ := l.stored(ctx); return n >= 20 })
	if serr := r1.stop(); err == nil {
		err = serr
	}
	if err != nil {
		return 0, "", err
	}
	l.stop()
	if c.Before {
		if err := damageAck(filepath.Join(cfg.Spool.Dir, "ack"), c.Ack); err != nil {
			return 0, "", err
		}
	}
	r2, err := l.runAgent(cfg, log)
	if err != nil {
		return 0, "", err
	}
	inc2 := r2.a.Spool().Incarnation()
	err = waitFor("five segments spooled", time.Minute, func() bool { return len(segmentsOf(cfg.Spool.Dir, inc2)) >= 5 })
	if serr := r2.stop(); err == nil {
		err = serr
	}
	if err != nil {
		return 0, "", err
	}
	if d := r2.a.Spool().Stats().Dropped; d != 0 {
		return 0, "", fmt.Errorf("the spool's cap dropped %d records", d)
	}
	return r1.generated() + r2.generated(), inc2, nil
}

// segmentsOf lists the segments of incarnation inc, in order.
func segmentsOf(dir, inc string) []string {
	paths, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	slices.Sort(paths)
	var out []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err == nil && spool.ParseSegment(b).Header.Incarnation == inc {
			out = append(out, p)
		}
	}
	return out
}

// applyDamage damages the spool as c says and returns how many records
// it destroyed. The segment damaged is the third of incarnation inc's
// (the newest for tail-truncated and newest-deleted), the header the
// second's.
func applyDamage(dir, inc string, c damageCase) (destroyed uint64, err error) {
	segs := segmentsOf(dir, inc)
	if len(segs) < 4 {
		return 0, fmt.Errorf("%d segments of the outage, want 4", len(segs))
	}
	if err := damageAck(filepath.Join(dir, "ack"), c.Ack); err != nil {
		return 0, err
	}
	if err := damageHeader(segs[1], c.Header); err != nil {
		return 0, err
	}
	return damageSegment(segs, c.Segment)
}

func damageAck(p, how string) error {
	if how == "ok" {
		return nil
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	switch how {
	case "deleted":
		return os.Remove(p)
	case "flipped":
		b[2] ^= 0x10
	case "truncated":
		b = b[:7]
	case "empty":
		b = nil
	default:
		return fmt.Errorf("ack damage %q", how)
	}
	return writeFile(p, b)
}

func damageHeader(p, how string) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	switch how {
	case "ok":
		return nil
	case "one-copy":
		b[20] ^= 0x01
	case "both-copies":
		b[20] ^= 0x01
		b[48+20] ^= 0x01
	default:
		return fmt.Errorf("header damage %q", how)
	}
	return writeFile(p, b)
}

func damageSegment(segs []string, how string) (uint64, error) {
	p := segs[2]
	if how == "tail-truncated" || how == "newest-deleted" {
		p = segs[len(segs)-1]
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	recs := spool.ParseSegment(b).Records
	switch how {
	case "ok":
		return 0, nil
	case "deleted", "newest-deleted":
		return uint64(len(recs)), os.Remove(p)
	case "tail-truncated":
		return 1, os.Truncate(p, int64(len(b)-3))
	case "middle-flipped":
		mid := recs[len(recs)/2].Data
		off := cap(b) - cap(mid) // the payload's offset in b (it aliases b)
		b[off+len(mid)/2] ^= 0x20
		return 1, writeFile(p, b)
	}
	return 0, fmt.Errorf("segment damage %q", how)
}
