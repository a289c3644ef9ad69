package spool

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Problems the spool finds when it opens (Event.Problem, Stats.Damage).
const (
	ProblemAckMissing      = "ack-missing"      // segments but no ack file
	ProblemAckDamaged      = "ack-damaged"      // an ack file that does not parse
	ProblemSegmentCorrupt  = "segment-corrupt"  // a corrupt region inside a segment
	ProblemSegmentTorn     = "segment-torn"     // a segment that ends in a corrupt region (torn or truncated)
	ProblemSegmentMissing  = "segment-missing"  // a gap in the segments' numbering
	ProblemHeaderRepaired  = "header-repaired"  // one header copy damaged, the other used
	ProblemHeaderLost      = "header-lost"      // both header copies damaged
	ProblemIncarnationFile = "incarnation-file" // the old-format incarnation file damaged
)

// Reasons records are lost for (Stats.Lost).
const (
	LostCorrupt   = "corrupt"         // a frame's bytes were damaged
	LostTruncated = "truncated"       // a segment's tail was cut (counted as one record: the rest is unknowable)
	LostMissing   = "missing-segment" // records whose segment is gone
	LostDiskFull  = "disk-full"       // Append failed: no space left
	LostWrite     = "write-error"     // Append failed otherwise
)

// Event is one problem found when the spool opened, and what was done.
type Event struct {
	File    string // the file's path
	Problem string // one of the Problem* constants
	Action  string // what the spool did about it
}

// run is one incarnation's part of the sequence space: [start, last]
// (last 0: the current run, open-ended).
type run struct {
	inc    string
	start  uint64
	last   uint64
	gaps   []gap // sequences found destroyed at Open, judged at the run's first Ack
	judged bool
}

// gap is a range of a run's sequences not held at Open.
type gap struct {
	from, to uint64 // from 0: one record, counted whatever the server holds
	reason   string
}

// scan reads the directory: the ack file, every segment, the old-format
// incarnation file; it builds the runs and finds what is damaged.
func (s *Spool) scan() error {
	ackPath := filepath.Join(s.dir, ackFile)
	floor, ackErr := readAck(ackPath)
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	parsed := map[*segment]Segment{}
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(name, segSuffix) {
			continue
		}
		idx, err := strconv.Atoi(strings.TrimSuffix(name, segSuffix))
		if err != nil || idx < 1 {
			continue
		}
		p := filepath.Join(s.dir, name)
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("spool: %w", err)
		}
		sg := ParseSegment(b)
		seg := &segment{index: idx, path: p, size: int64(len(b)), count: int64(len(sg.Records))}
		if n := len(sg.Records); n > 0 {
			seg.first, seg.last = sg.Records[0].Seq, sg.Records[n-1].Seq
		}
		parsed[seg] = sg
		s.segs = append(s.segs, seg)
		s.bytes += seg.size
		s.corrupt += uint64(len(sg.Corrupt))
	}
	slices.SortFunc(s.segs, func(a, b *segment) int { return a.index - b.index })
	switch {
	case ackErr == nil:
		s.floor, s.ackTrusted = floor, true
	case isNotExist(ackErr) && len(s.segs) == 0:
		s.ackTrusted = true // a new spool (or one with nothing held)
		if err := writeAck(s.dir, 0); err != nil {
			return err
		}
	case isNotExist(ackErr):
		s.event(ackPath, ProblemAckMissing, "every record held is sent again; the server recognises those it has")
	default:
		s.corrupt++
		s.event(ackPath, ProblemAckDamaged, fmt.Sprintf("%v: every record held is sent again; the server recognises those it has", ackErr))
	}
	if len(s.segs) > 0 {
		s.lastIndex = s.segs[len(s.segs)-1].index
	}
	if err := s.assignIncarnations(parsed); err != nil {
		return err
	}
	s.buildRuns(parsed)
	return nil
}

func (s *Spool) event(file, problem, action string) {
	s.events = append(s.events, Event{File: file, Problem: problem, Action: action})
	s.damage[problem]++
}

// newIncarnationID is 16 random bytes as 32 hex digits.
func newIncarnationID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("spool: incarnation: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// assignIncarnations sets each segment's incarnation: its header's; for a
// segment whose both header copies are damaged, the previous segment's
// when its sequences continue that one's, else a new one; for segments
// from before headers, the old incarnation file's.
func (s *Spool) assignIncarnations(parsed map[*segment]Segment) error {
	var prev *segment
	headerless := false
	for _, seg := range s.segs {
		sg := parsed[seg]
		switch sg.State {
		case HeaderOK:
			seg.inc, seg.start = sg.Header.Incarnation, sg.Header.Start
		case HeaderRepaired:
			seg.inc, seg.start = sg.Header.Incarnation, sg.Header.Start
			s.event(seg.path, ProblemHeaderRepaired, "one copy of the segment header was damaged; the other names its incarnation")
		case HeaderLost:
			if seg.count == 0 {
				break // a segment cut short as it was created: nothing in it
			}
			if prev != nil && prev.inc != "" && prev.start > 0 && seg.first > prev.last {
				seg.inc, seg.start = prev.inc, prev.start
				s.event(seg.path, ProblemHeaderLost, "both copies of the segment header were damaged; its records continue the previous segment's incarnation and are sent with it")
			} else {
				id, err := newIncarnationID()
				if err != nil {
					return err
				}
				seg.inc, seg.start = id, max(seg.first, 1)
				s.event(seg.path, ProblemHeaderLost, "both copies of the segment header were damaged; its records are sent with a new incarnation "+id+" (the server stores again any it already had)")
			}
		default:
			headerless = true
		}
		prev = seg
	}
	p := filepath.Join(s.dir, incarnationFile)
	if !headerless {
		if err := os.Remove(p); err != nil && !isNotExist(err) {
			return fmt.Errorf("spool: %w", err)
		}
		return nil
	}
	return s.assignLegacy(parsed, p)
}

// assignLegacy sets the incarnation of segments from before headers
// (see the incarnation file above): sequences up to legacy-through are
// the legacy incarnation "", later ones the file's. Without the file,
// every one is legacy (a spool from before incarnations); with a damaged
// file, they get a new incarnation.
func (s *Spool) assignLegacy(parsed map[*segment]Segment, p string) error {
	inc, legacy, err := readIncarnation(p)
	switch {
	case err == nil:
	case isNotExist(err):
		legacy = s.floor
		for _, seg := range s.segs {
			if parsed[seg].State == HeaderNone {
				legacy = max(legacy, seg.last)
			}
		}
		inc = ""
	default:
		s.corrupt++
		id, ierr := newIncarnationID()
		if ierr != nil {
			return ierr
		}
		inc, legacy = id, 0
		s.event(p, ProblemIncarnationFile, fmt.Sprintf("%v: the records of the segments from before headers are sent with a new incarnation %s (the server stores again any it already had)", err, id))
	}
	s.legacy = legacy
	for _, seg := range s.segs {
		if parsed[seg].State != HeaderNone {
			continue
		}
		if seg.last <= legacy && (seg.count > 0 || inc == "") {
			seg.inc, seg.start = "", 1
		} else {
			seg.inc, seg.start = inc, legacy+1
		}
	}
	return nil
}

// buildRuns groups the segments into runs, in order, finds the sequences
// of each run that are not held (gaps) and why, and reports the damage.
func (s *Spool) buildRuns(parsed map[*segment]Segment) {
	var cur *run
	var prev *segment
	expect := uint64(0)
	reason := ""
	for _, seg := range s.segs {
		sg := parsed[seg]
		if sg.State == HeaderLost && seg.count == 0 {
			continue // cut short as it was created (see assignIncarnations)
		}
		if cur == nil || seg.inc != cur.inc {
			if cur != nil {
				s.closeRun(cur, prev, parsed[prev])
			}
			cur = s.runOf(seg.inc)
			if cur == nil {
				cur = &run{inc: seg.inc, start: seg.start}
				s.runs = append(s.runs, cur)
			}
			expect, reason = cur.start, LostMissing
		} else if seg.index != prev.index+1 {
			reason = LostMissing
			s.event(seg.path, ProblemSegmentMissing, fmt.Sprintf("segments %d to %d are gone: their records are lost", prev.index+1, seg.index-1))
		}
		headed := sg.State != HeaderNone
		ri := 0
		for _, r := range sg.Records {
			for ri < len(sg.Corrupt) && sg.Corrupt[ri].After < r.Seq {
				reason = LostCorrupt
				ri++
			}
			if headed && r.Seq > expect {
				cur.gaps = append(cur.gaps, gap{from: expect, to: r.Seq - 1, reason: reason})
			}
			expect, reason = r.Seq+1, LostMissing
		}
		for _, c := range sg.Corrupt {
			switch {
			case c.Tail:
				reason = LostCorrupt
				s.event(seg.path, ProblemSegmentTorn, "the segment ends in a damaged or incomplete frame (a crash mid-write, or a truncation): skipped")
			default:
				s.event(seg.path, ProblemSegmentCorrupt, fmt.Sprintf("damaged frames after sequence %d: skipped, the records around them are sent", c.After))
			}
		}
		prev = seg
	}
	if cur != nil {
		s.closeRun(cur, prev, parsed[prev])
	}
	for i, r := range s.runs {
		if i+1 < len(s.runs) {
			r.last = max(s.runs[i+1].start-1, r.start)
		}
	}
}

// closeRun ends a run at its last segment: a torn tail there is one
// record lost (a truncation may have cut more; the spool cannot know).
func (s *Spool) closeRun(r *run, last *segment, sg Segment) {
	if n := len(sg.Corrupt); n > 0 && sg.Corrupt[n-1].Tail && sg.State != HeaderNone {
		r.gaps = append(r.gaps, gap{reason: LostTruncated})
	}
}

// runOf is the run of incarnation inc; nil when none.
func (s *Spool) runOf(inc string) *run {
	for _, r := range s.runs {
		if r.inc == inc {
			return r
		}
	}
	return nil
}

// judgeLocked counts a run's gaps as lost, but for the sequences the
// server (hw) or the ack file already settled.
func (s *Spool) judgeLocked(r *run, hw uint64) {
	if r.judged {
		return
	}
	r.judged = true
	base := hw
	if s.ackTrusted {
		base = max(base, s.floor)
	}
	for _, g := range r.gaps {
		if g.from == 0 {
			s.lost[g.reason]++
			continue
		}
		if from := max(g.from, base+1); from <= g.to {
			s.lost[g.reason] += g.to - from + 1
		}
	}
	r.gaps = nil
}
