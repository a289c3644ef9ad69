// Package spool is the agent's durable outbox: an append-only log of records
// on local disk that survives agent crashes and server outages.
//
// Layout of the spool directory:
//
//	0000000000000001.seg  segment files, oldest first (the number is a counter)
//	0000000000000002.seg  the newest one is appended to
//	ack                   the settled floor: 8-byte sequence + CRC32C, replaced atomically
//	incarnation           the spool's identity (see below), written once
//
// Each record is one frame (see format.go: magic, length, CRC32C, sequence,
// payload), written with one write and fsync'd before Append returns: from
// then on it counts as produced and survives SIGKILL or power loss. Records
// carry the agent's sequence number; the spool hands them out (Append assigns
// them) and they survive restarts: the next sequence is one above the largest
// of the ack floor and every sequence still on disk.
//
// Removal happens only on acknowledgement (Ack): the floor (every sequence at
// or below it is settled) is written to the ack file and fsync'd before any
// segment is deleted; records at or below the floor are never read again.
//
// Size cap: when the segments exceed MaxBytes the oldest segment is deleted
// and its unsettled records are counted in Stats.Dropped. The next batch then
// starts above them, and the sender states that with ReportRequest.first_sequence.
//
// A corrupt frame (bad checksum, torn tail after a crash) is skipped and
// counted in Stats.Corrupt; the records around it are still delivered.
//
// Incarnation: a spool is created with a random id (16 bytes from
// crypto/rand, as 32 hex digits), its incarnation, written durably before
// the first record. Sequences count within the incarnation: a record's
// identity at the server is (agent, incarnation, sequence), so a spool
// that is deleted and created again (sequences from 1 again) or a second
// host with the same certificate never passes for a replay of another
// spool's records. The file is one line, "<id> <legacy-through>
// <crc32c-hex>", replaced atomically.
//
// Upgrade: a spool written before incarnations (segments or an ack file,
// no incarnation file) gets an incarnation when it is opened, and
// LegacyThrough records the highest sequence it had numbered until then.
// Those older sequences were numbered in the agent's legacy identity
// (incarnation ""), and the sender sends them with it, so the server
// still recognises the ones it already stored; newer records continue the
// numbering in the new incarnation. A damaged incarnation file is replaced
// by a new incarnation (counted in Stats.Corrupt): the records still held
// are sent again under it, and any the server had stored but not yet
// acknowledged is stored a second time — the cost of a damaged file, never
// a loss. Delete a spool directory whole, never the incarnation file alone.
package spool

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
	Bytes        int64  // bytes in segment files
	Records      int64  // unsettled records held
	Dropped      uint64 // unsettled records deleted by the size cap (since Open)
	Corrupt      uint64 // corrupt regions skipped (since Open)
	NextSequence uint64 // the sequence the next Append assigns
	Floor        uint64 // every sequence at or below it is settled
	Incarnation  string // the spool's incarnation
}

type segment struct {
	index int
	path  string
	first uint64 // lowest valid sequence in it; 0 when none
	last  uint64 // highest valid sequence; 0 when none
	count int64  // valid records
	size  int64
}

// Spool is safe for concurrent use.
type Spool struct {
	mu      sync.Mutex
	dir     string
	max     int64
	segMax  int64
	segs    []*segment // oldest first
	active  *os.File   // the file of segs[len-1] when open for appending
	next    uint64
	floor   uint64
	settled map[uint64]bool // settled sequences above floor
	bytes   int64
	dropped uint64
	corrupt uint64
	closed  bool
	notify  chan struct{}
	// inc is the incarnation; sequences up to legacy were numbered before
	// the spool had one (the legacy incarnation "").
	inc    string
	legacy uint64
}

// Open opens (creating if needed) the spool in o.Dir and scans it: every
// segment is read and checked, corrupt regions are counted, segments that
// are entirely settled are deleted.
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
	s := &Spool{dir: o.Dir, max: o.MaxBytes, segMax: o.SegmentBytes, settled: map[uint64]bool{}, notify: make(chan struct{}, 1)}
	floor, err := readAck(filepath.Join(o.Dir, ackFile))
	_, ackErr := os.Stat(filepath.Join(o.Dir, ackFile))
	existed := ackErr == nil // a spool from before, whatever its ack file holds
	if err != nil {
		// A damaged ack file costs resending what was settled (the server
		// recognises replays); it never costs a record.
		s.corrupt++
	}
	s.floor = floor
	ents, err := os.ReadDir(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	maxSeq := floor
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(name, segSuffix) {
			continue
		}
		idx, err := strconv.Atoi(strings.TrimSuffix(name, segSuffix))
		if err != nil || idx < 1 {
			continue
		}
		existed = true
		p := filepath.Join(o.Dir, name)
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("spool: %w", err)
		}
		recs, bad := ReadSegment(b)
		s.corrupt += uint64(bad)
		seg := &segment{index: idx, path: p, size: int64(len(b)), count: int64(len(recs))}
		if len(recs) > 0 {
			seg.first, seg.last = recs[0].Seq, recs[len(recs)-1].Seq
			maxSeq = max(maxSeq, seg.last)
		}
		s.segs = append(s.segs, seg)
		s.bytes += seg.size
	}
	slices.SortFunc(s.segs, func(a, b *segment) int { return a.index - b.index })
	s.next = maxSeq + 1
	if err := s.openIncarnation(existed, maxSeq); err != nil {
		return nil, err
	}
	if err := s.removeSettledLocked(); err != nil {
		return nil, err
	}
	return s, nil
}

// openIncarnation reads the incarnation file, or creates it: for a new
// spool, for one from before incarnations (existed: every sequence up to
// maxSeq is legacy), and in place of a damaged one.
func (s *Spool) openIncarnation(existed bool, maxSeq uint64) error {
	p := filepath.Join(s.dir, incarnationFile)
	inc, legacy, err := readIncarnation(p)
	if err == nil {
		s.inc, s.legacy = inc, legacy
		return nil
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if existed {
			legacy = maxSeq
		}
	default:
		s.corrupt++
		legacy = 0
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("spool: incarnation: %w", err)
	}
	inc = hex.EncodeToString(b[:])
	if err := writeFileAtomic(s.dir, incarnationFile, []byte(formatIncarnation(inc, legacy))); err != nil {
		return err
	}
	s.inc, s.legacy = inc, legacy
	return nil
}

// Incarnation returns the spool's incarnation id.
func (s *Spool) Incarnation() string { return s.inc }

// LegacyThrough returns the highest sequence numbered before the spool had
// an incarnation (0 for a spool created with one): records at or below it
// belong to the legacy incarnation "".
func (s *Spool) LegacyThrough() uint64 { return s.legacy }

// Pending says whether the record seq is still held unsettled.
func (s *Spool) Pending(seq uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return seq > s.floor && seq < s.next && !s.settled[seq]
}

func formatIncarnation(inc string, legacy uint64) string {
	body := fmt.Sprintf("%s %d", inc, legacy)
	return fmt.Sprintf("%s %08x\n", body, crc32.Checksum([]byte(body), castagnoli))
}

// readIncarnation reads the incarnation file; an error wrapping
// fs.ErrNotExist when there is none.
func readIncarnation(p string) (inc string, legacy uint64, err error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", 0, err
	}
	if inc, legacy, err = ParseIncarnation(b); err != nil {
		return "", 0, fmt.Errorf("spool: %s: %w", p, err)
	}
	return inc, legacy, nil
}

// ParseIncarnation parses the incarnation file's bytes: "<32 hex digits>
// <legacy-through> <crc32c of the two, 8 hex digits>\n". It never panics.
func ParseIncarnation(b []byte) (inc string, legacy uint64, err error) {
	if len(b) > 128 {
		return "", 0, fmt.Errorf("incarnation file of %d bytes: want a short line", len(b))
	}
	f := strings.Fields(string(b))
	if len(f) != 3 || len(f[0]) != 32 {
		return "", 0, errors.New("malformed incarnation file")
	}
	if _, err := hex.DecodeString(f[0]); err != nil {
		return "", 0, errors.New("malformed incarnation id")
	}
	legacy, err = strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return "", 0, errors.New("malformed legacy sequence")
	}
	if formatIncarnation(f[0], legacy) != string(b) {
		return "", 0, errors.New("bad checksum")
	}
	return f[0], legacy, nil
}

// Notify returns a channel that receives a value after each Append.
func (s *Spool) Notify() <-chan struct{} { return s.notify }

// Append assigns the next sequence, asks build for the payload carrying it,
// and writes and fsyncs the frame. When Append returns a nil error the
// record is durable. A sequence is never reused, even when Append fails.
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
	s.next++
	fsz := frameSize(len(data))
	if s.active == nil || (s.segs[len(s.segs)-1].size > 0 && s.segs[len(s.segs)-1].size+fsz > s.segMax) {
		if err := s.rollLocked(); err != nil {
			return 0, err
		}
	}
	seg := s.segs[len(s.segs)-1]
	frame := appendFrame(make([]byte, 0, fsz), seq, data)
	if _, err := s.active.Write(frame); err != nil {
		s.undoLocked(seg)
		return 0, fmt.Errorf("spool: append: %w", err)
	}
	if err := s.active.Sync(); err != nil {
		s.undoLocked(seg)
		return 0, fmt.Errorf("spool: fsync: %w", err)
	}
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

// undoLocked cuts a failed write off the active segment; if even that fails
// the segment is closed, and the reader skips the torn tail.
func (s *Spool) undoLocked(seg *segment) {
	if err := s.active.Truncate(seg.size); err != nil {
		s.active.Close()
		s.active = nil
	}
}

// rollLocked closes the active segment and creates the next one.
func (s *Spool) rollLocked() error {
	if s.active != nil {
		if err := s.active.Close(); err != nil {
			return fmt.Errorf("spool: close segment: %w", err)
		}
		s.active = nil
	}
	idx := 1
	if n := len(s.segs); n > 0 {
		idx = s.segs[n-1].index + 1
	}
	p := filepath.Join(s.dir, fmt.Sprintf("%016d%s", idx, segSuffix))
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	if err := syncDir(s.dir); err != nil {
		f.Close()
		os.Remove(p)
		return fmt.Errorf("spool: %w", err)
	}
	s.active = f
	s.segs = append(s.segs, &segment{index: idx, path: p})
	return nil
}

// capLocked deletes the oldest segments while the spool is above its cap.
// The active segment is never deleted.
func (s *Spool) capLocked() error {
	for s.bytes > s.max && len(s.segs) > 1 {
		seg := s.segs[0]
		b, err := os.ReadFile(seg.path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("spool: %w", err)
		}
		recs, _ := ReadSegment(b)
		for _, r := range recs {
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
// no more than maxBytes of payload), oldest first. The payloads are copies.
// Read does not remove anything: records stay until Ack settles them.
func (s *Spool) Read(maxRecords, maxBytes int) ([]Record, error) {
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
		recs, _ := ReadSegment(b)
		for _, r := range recs {
			if r.Seq <= s.floor || s.settled[r.Seq] {
				continue
			}
			if len(out) >= maxRecords || (len(out) > 0 && size+len(r.Data) > maxBytes) {
				return out, nil
			}
			out = append(out, Record{Seq: r.Seq, Data: slices.Clone(r.Data)})
			size += len(r.Data)
		}
	}
	return out, nil
}

// Ack settles every sequence at or below highWater and each sequence in
// settled (the server's acked and rejected lists). The new floor is written
// to the ack file and fsync'd; then segments holding only settled records
// are deleted. A highWater at or above the next sequence (the server knows
// more of this agent than its spool, e.g. after the spool was wiped) moves
// the next sequence above it, so no new record reuses a settled sequence.
func (s *Spool) Ack(highWater uint64, settled []uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	old := s.floor
	s.floor = max(s.floor, highWater)
	for _, q := range settled {
		if q > s.floor {
			s.settled[q] = true
		}
	}
	for s.settled[s.floor+1] {
		delete(s.settled, s.floor+1)
		s.floor++
	}
	for q := range s.settled {
		if q <= s.floor {
			delete(s.settled, q)
		}
	}
	if s.floor >= s.next {
		s.next = s.floor + 1
	}
	if s.floor == old {
		return nil
	}
	if err := writeAck(s.dir, s.floor); err != nil {
		return err
	}
	return s.removeSettledLocked()
}

// removeSettledLocked deletes segments whose records are all at or below
// the floor; the active segment too (a new one is created on the next Append).
func (s *Spool) removeSettledLocked() error {
	keep := s.segs[:0]
	for i, seg := range s.segs {
		isActive := i == len(s.segs)-1 && s.active != nil
		if seg.last > s.floor {
			keep = append(keep, seg)
			continue
		}
		if isActive {
			s.active.Close()
			s.active = nil
		}
		if err := os.Remove(seg.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			keep = append(keep, s.segs[i:]...)
			s.segs = keep
			return fmt.Errorf("spool: %w", err)
		}
		s.bytes -= seg.size
	}
	s.segs = keep
	return nil
}

// Stats returns the counters.
func (s *Spool) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Bytes: s.bytes, Dropped: s.dropped, Corrupt: s.corrupt, NextSequence: s.next, Floor: s.floor, Incarnation: s.inc}
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

func readAck(p string) (uint64, error) {
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(b) != 12 || crc32.Checksum(b[:8], castagnoli) != binary.LittleEndian.Uint32(b[8:]) {
		return 0, fmt.Errorf("spool: %s: bad checksum", p)
	}
	return binary.LittleEndian.Uint64(b[:8]), nil
}

// writeAck replaces the ack file atomically and durably.
func writeAck(dir string, floor uint64) error {
	var b [12]byte
	binary.LittleEndian.PutUint64(b[:8], floor)
	binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(b[:8], castagnoli))
	return writeFileAtomic(dir, ackFile, b[:])
}

// writeFileAtomic replaces dir/name with b atomically and durably: a
// temporary file written and fsync'd, renamed over it, the directory
// fsync'd.
func writeFileAtomic(dir, name string, b []byte) error {
	tmp := filepath.Join(dir, name+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("spool: write %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("spool: fsync %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	return nil
}
