// Package spool is the agent's durable outbox: an append-only log of records
// on local disk that survives agent crashes and server outages.
//
// Layout of the spool directory:
//
//	0000000000000001.seg  segment files, oldest first (the number is a counter)
//	0000000000000002.seg  the newest one is appended to
//	ack                   the settled floor: 8-byte sequence + CRC32C
//	incarnation           only in spools from before segment headers (see files.go)
//
// Each record is one frame (see format.go: magic, length, CRC32C, sequence,
// payload), written with one write and fsync'd before Append returns: from
// then on it counts as produced and survives SIGKILL or power loss.
//
// Incarnations: every Open starts a new incarnation (a random id, 16 bytes
// from crypto/rand as 32 hex digits), and only that run of the spool
// numbers sequences in it: a record's identity at the server is (agent,
// incarnation, sequence), and no sequence is ever numbered twice in one
// incarnation, whatever happened to the files between two runs — an ack
// file damaged or deleted, segments truncated or deleted, the newest
// segment lost with the sequences it had numbered. The numbering goes on
// from above everything held (and the floor), so the runs' sequences
// follow each other. Each segment is written by one run and names its
// incarnation and the run's first sequence in a header (two copies; see
// format.go); the records a spool still holds from earlier runs are read
// back with their own incarnation, and the sender delivers them with it, so
// the server recognises the ones it already stored. A spool written before
// segment headers is read with its incarnation file (upgrade).
//
// Removal happens only on acknowledgement (Ack): the floor (every sequence at
// or below it is settled) is written to the ack file and fsync'd before any
// segment is deleted; records at or below the floor are never read again.
// The ack file is overwritten in place, which needs no new space: on a full
// file system acknowledgements still free the segments they settle.
//
// Size cap: when the segments exceed MaxBytes the oldest segment is deleted
// and its unsettled records are counted in Stats.Dropped. The next batch then
// starts above them, and the sender states that with ReportRequest.first_sequence.
//
// Damage: what Open finds damaged is reported (Events, Stats.Damage) and
// never stops the agent: a damaged or missing ack file costs resending the
// records held (the server recognises replays); a corrupt frame is skipped;
// records whose bytes are gone are counted in Stats.Lost by reason, once
// the server's high-water mark at the Hello of their incarnation says they
// were not delivered.
package spool

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// Defaults.
const (
	DefaultMaxBytes = 64 << 20
	// MaxSegmentBytes bounds a segment; the default segment size is the
	// smaller of this and MaxBytes/8, so dropping the oldest segment under
	// the cap frees at most an eighth of the spool at a time.
	MaxSegmentBytes = 4 << 20
	ackFile         = "ack"
	incarnationFile = "incarnation"
	segSuffix       = ".seg"
)

// ErrTooLarge is returned by Append for a payload above MaxRecordBytes.
var ErrTooLarge = errors.New("record too large")

// ErrClosed is returned after Close.
var ErrClosed = errors.New("spool closed")

// Options configure a spool.
type Options struct {
	Dir          string // created 0700 if missing
	MaxBytes     int64  // cap on segment bytes; 0: DefaultMaxBytes
	SegmentBytes int64  // roll to a new segment above this; 0: min(MaxSegmentBytes, MaxBytes/8)
}

// Stats are the spool's counters.
type Stats struct {
	Bytes        int64             // bytes in segment files
	Records      int64             // unsettled records held
	Dropped      uint64            // unsettled records deleted by the size cap (since Open)
	Corrupt      uint64            // corrupt regions skipped, damaged ack and incarnation files (at Open)
	Lost         map[string]uint64 // records lost, by reason (Lost* constants; since Open)
	Damage       map[string]uint64 // problems found at Open, by kind (Problem* constants)
	NextSequence uint64            // the sequence the next Append assigns
	Floor        uint64            // every sequence at or below it is settled
	Incarnation  string            // this run's incarnation
}

type segment struct {
	index int
	path  string
	inc   string // the incarnation of its records
	start uint64 // its incarnation's first sequence
	first uint64 // lowest valid sequence in it; 0 when none
	last  uint64 // highest valid sequence; 0 when none
	count int64  // valid records
	size  int64
}

// Spool is safe for concurrent use.
type Spool struct {
	mu         sync.Mutex
	dir        string
	max        int64
	segMax     int64
	segs       []*segment // oldest first
	lastIndex  int        // the highest segment number used
	active     *os.File   // the file of segs[len-1] when open for appending
	next       uint64
	floor      uint64
	settled    map[uint64]bool // settled sequences above floor
	bytes      int64
	dropped    uint64
	corrupt    uint64
	closed     bool
	notify     chan struct{}
	inc        string // this run's incarnation
	legacy     uint64 // see LegacyThrough
	runs       []*run // the incarnations held, oldest first; the last is this run's
	ackTrusted bool   // the ack file was intact at Open (or has been written since)
	lost       map[string]uint64
	damage     map[string]uint64
	events     []Event
}

// Open opens (creating if needed) the spool in o.Dir and scans it: every
// segment is read and checked, damage is reported (Events), segments
// that are entirely settled are deleted, and a new incarnation starts.
func Open(o Options) (*Spool, error) {
	if o.Dir == "" {
		return nil, errors.New("spool: no directory")
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = min(MaxSegmentBytes, o.MaxBytes/8)
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	s := &Spool{dir: o.Dir, max: o.MaxBytes, segMax: o.SegmentBytes, settled: map[uint64]bool{}, notify: make(chan struct{}, 1),
		lost: map[string]uint64{}, damage: map[string]uint64{}}
	if err := s.scan(); err != nil {
		return nil, err
	}
	maxSeq := s.floor
	for _, seg := range s.segs {
		maxSeq = max(maxSeq, seg.last)
	}
	inc, err := newIncarnationID()
	if err != nil {
		return nil, err
	}
	s.inc, s.next = inc, maxSeq+1
	for i, r := range s.runs {
		if i+1 == len(s.runs) {
			r.last = max(r.last, maxSeq, r.start)
		}
	}
	s.runs = append(s.runs, &run{inc: inc, start: s.next, judged: true})
	// A run with records to send is judged at its Hello (the server's
	// high-water mark covers what it has, also records whose segment was
	// deleted as they were settled while the ack file could not be
	// written); the others now.
	for _, r := range s.runs {
		if !s.heldLocked(r.inc) {
			s.judgeLocked(r, 0)
		}
	}
	if err := s.removeSettledLocked(); err != nil {
		return nil, err
	}
	return s, nil
}

// heldLocked says whether a segment of incarnation inc holds records
// above the floor.
func (s *Spool) heldLocked(inc string) bool {
	for _, seg := range s.segs {
		if seg.inc == inc && seg.count > 0 && seg.last > s.floor {
			return true
		}
	}
	return false
}

// Incarnation returns this run's incarnation id.
func (s *Spool) Incarnation() string { return s.inc }

// LegacyThrough returns the highest sequence numbered before the spool had
// an incarnation (0 for a spool created with one): records at or below it
// belong to the legacy incarnation "".
func (s *Spool) LegacyThrough() uint64 { return s.legacy }

// Events returns the problems Open found and what it did about them.
func (s *Spool) Events() []Event { return slices.Clone(s.events) }

// Pending says whether the record seq of this run is still held unsettled.
func (s *Spool) Pending(seq uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return seq > s.floor && seq < s.next && !s.settled[seq]
}

// SendingIncarnation is the incarnation the sender delivers next: that
// of the oldest record held unsettled (the legacy incarnation "" aside,
// which needs no Hello), or this run's.
func (s *Spool) SendingIncarnation() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, seg := range s.segs {
		if seg.count > 0 && seg.last > s.floor && seg.inc != "" && !s.allSettledLocked(seg) {
			return seg.inc
		}
	}
	return s.inc
}

// allSettledLocked says whether every sequence of seg's range above the
// floor is settled (out of order, in the settled set).
func (s *Spool) allSettledLocked(seg *segment) bool {
	for q := max(seg.first, s.floor+1); q <= seg.last; q++ {
		if !s.settled[q] {
			return false
		}
	}
	return true
}

// Notify returns a channel that receives a value after each Append.
func (s *Spool) Notify() <-chan struct{} { return s.notify }

// Append assigns the next sequence, asks build for the payload carrying it,
// and writes and fsyncs the frame. When Append returns a nil error the
// record is durable. A failed Append is counted in Stats.Lost (disk-full
// or write-error); its sequence is numbered again unless a torn frame of
// it may remain on disk.
func (s *Spool) Append(build func(seq uint64) ([]byte, error)) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, ErrClosed
	}
	seq := s.next
	data, err := build(seq)
	if err != nil {
		return 0, err
	}
	if len(data) > MaxRecordBytes {
		return 0, fmt.Errorf("spool: %w: %d bytes, limit %d", ErrTooLarge, len(data), MaxRecordBytes)
	}
	fsz := frameSize(len(data))
	if s.active == nil || (s.segs[len(s.segs)-1].size > headersSize && s.segs[len(s.segs)-1].size+fsz > s.segMax) {
		if err := s.rollLocked(); err != nil {
			s.lostLocked(err)
			return 0, err
		}
	}
	seg := s.segs[len(s.segs)-1]
	frame := appendFrame(make([]byte, 0, fsz), seq, data)
	_, err = s.active.Write(frame)
	if err == nil {
		err = s.active.Sync()
	}
	if err != nil {
		s.undoLocked(seg)
		s.lostLocked(err)
		return 0, fmt.Errorf("spool: append: %w", err)
	}
	s.next++
	seg.size += fsz
	seg.count++
	seg.last = seq
	if seg.first == 0 {
		seg.first = seq
	}
	s.bytes += fsz
	if err := s.capLocked(); err != nil {
		return seq, err
	}
	select {
	case s.notify <- struct{}{}:
	default:
	}
	return seq, nil
}

func (s *Spool) lostLocked(err error) {
	if DiskFull(err) {
		s.lost[LostDiskFull]++
	} else {
		s.lost[LostWrite]++
	}
}

// undoLocked cuts a failed write off the active segment; if even that
// fails the segment is closed (the reader skips the torn tail) and the
// sequence is not numbered again.
func (s *Spool) undoLocked(seg *segment) {
	if err := s.active.Truncate(seg.size); err != nil {
		s.active.Close()
		s.active = nil
		s.next++
	}
}

// rollLocked closes the active segment and creates the next one, with
// its headers.
func (s *Spool) rollLocked() error {
	if s.active != nil {
		if err := s.active.Close(); err != nil {
			return fmt.Errorf("spool: close segment: %w", err)
		}
		s.active = nil
	}
	idx := s.lastIndex + 1
	p := filepath.Join(s.dir, segName(idx))
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	r := s.runs[len(s.runs)-1]
	_, err = f.Write(appendHeaders(nil, Header{Incarnation: s.inc, Start: r.start}))
	if err == nil {
		err = syncDir(s.dir)
	}
	if err != nil {
		f.Close()
		os.Remove(p)
		return fmt.Errorf("spool: new segment: %w", err)
	}
	s.lastIndex = idx
	s.active = f
	s.segs = append(s.segs, &segment{index: idx, path: p, inc: s.inc, start: r.start, size: headersSize})
	s.bytes += headersSize
	return nil
}

// segName is the file name of segment idx.
func segName(idx int) string { return fmt.Sprintf("%016d%s", idx, segSuffix) }

// capLocked deletes the oldest segments while the spool is above its cap.
// The active segment is never deleted.
func (s *Spool) capLocked() error {
	for s.bytes > s.max && len(s.segs) > 1 {
		seg := s.segs[0]
		b, err := os.ReadFile(seg.path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("spool: %w", err)
		}
		for _, r := range ParseSegment(b).Records {
			if r.Seq > s.floor && !s.settled[r.Seq] {
				s.dropped++
			}
			delete(s.settled, r.Seq)
		}
		if err := os.Remove(seg.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("spool: %w", err)
		}
		s.bytes -= seg.size
		s.segs = s.segs[1:]
	}
	return nil
}

// Read returns up to maxRecords unsettled records (and, beyond the first,
// no more than maxBytes of payload), oldest first, all of one
// incarnation and with consecutive sequences: a batch ends where the
// incarnation changes or a sequence is missing, so that the next batch's
// first sequence tells the server what will never come. The payloads are
// copies. Read does not remove anything: records stay until Ack settles
// them.
func (s *Spool) Read(maxRecords, maxBytes int) ([]Record, error) {
	return s.read(maxRecords, maxBytes, true)
}

// read is Read; batch false reads on over incarnations and gaps.
func (s *Spool) read(maxRecords, maxBytes int, batch bool) ([]Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	var out []Record
	size := 0
	for _, seg := range s.segs {
		if seg.count == 0 || seg.last <= s.floor {
			continue
		}
		b, err := os.ReadFile(seg.path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return out, fmt.Errorf("spool: %w", err)
		}
		for _, r := range ParseSegment(b).Records {
			if r.Seq <= s.floor || s.settled[r.Seq] {
				continue
			}
			if n := len(out); n > 0 && (n >= maxRecords || size+len(r.Data) > maxBytes ||
				batch && (seg.inc != out[0].Incarnation || r.Seq != out[n-1].Seq+1)) {
				return out, nil
			}
			out = append(out, Record{Seq: r.Seq, Data: slices.Clone(r.Data), Incarnation: seg.inc})
			size += len(r.Data)
		}
	}
	return out, nil
}

// Stats returns the counters.
func (s *Spool) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Bytes: s.bytes, Dropped: s.dropped, Corrupt: s.corrupt, NextSequence: s.next, Floor: s.floor, Incarnation: s.inc,
		Lost: maps.Clone(s.lost), Damage: maps.Clone(s.damage)}
	for _, seg := range s.segs {
		switch {
		case seg.count == 0 || seg.last <= s.floor:
		case seg.first > s.floor:
			st.Records += seg.count
		default: // partly settled; sequences are dense but for rare gaps
			st.Records += max(0, min(seg.count, int64(seg.last-s.floor)))
		}
	}
	st.Records = max(0, st.Records-int64(len(s.settled)))
	return st
}

// Close closes the active segment. Everything appended is already durable.
func (s *Spool) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.active != nil {
		return s.active.Close()
	}
	return nil
}
