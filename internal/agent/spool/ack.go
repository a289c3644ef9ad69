package spool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Ack settles, of incarnation inc's sequences, every one at or below
// highWater and each one in settled (the server's high-water mark of inc,
// and its acked and rejected lists). A high-water mark above what the
// spool numbered in inc (the server knows records whose segment is gone)
// settles nothing of the incarnations after it. The new floor is written
// to the ack file and fsync'd; then segments holding only settled records
// are deleted (when the ack file cannot be written, they are deleted
// first, and the write tried again: on a full disk that is what frees
// space). The first Ack of an earlier run's incarnation also judges the
// records Open found destroyed: those the server does not have are
// counted in Stats.Lost.
func (s *Spool) Ack(inc string, highWater uint64, settled []uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	r := s.runOf(inc)
	if r == nil {
		return nil // no record of that incarnation was ever held here
	}
	s.judgeLocked(r, highWater)
	old := s.floor
	top := highWater
	if r.last > 0 {
		top = min(top, r.last)
	}
	if top > s.floor {
		if s.othersHeldLocked(inc, top) {
			if err := s.settleHeldLocked(inc, top); err != nil {
				return err
			}
		} else {
			s.floor = top
		}
	}
	for _, q := range settled {
		if q > s.floor && q >= r.start && (r.last == 0 || q <= r.last) {
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
		// Free what is settled, then try again: on a full file system the
		// ack file may need the space (its first write, or a replacement).
		if rerr := s.removeSettledLocked(); rerr != nil {
			return errors.Join(err, rerr)
		}
		if err := writeAck(s.dir, s.floor); err != nil {
			return err
		}
	}
	s.ackTrusted = true
	return s.removeSettledLocked()
}

// othersHeldLocked says whether a segment of another incarnation may
// hold unsettled records at or below top (a floor moved up to top would
// settle them).
func (s *Spool) othersHeldLocked(inc string, top uint64) bool {
	for _, seg := range s.segs {
		if seg.inc != inc && seg.count > 0 && seg.last > s.floor && seg.first <= top {
			return true
		}
	}
	return false
}

// settleHeldLocked settles inc's held records at or below top one by one.
func (s *Spool) settleHeldLocked(inc string, top uint64) error {
	for _, seg := range s.segs {
		if seg.inc != inc || seg.count == 0 || seg.last <= s.floor || seg.first > top {
			continue
		}
		b, err := os.ReadFile(seg.path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("spool: %w", err)
		}
		for _, r := range ParseSegment(b).Records {
			if r.Seq > s.floor && r.Seq <= top {
				s.settled[r.Seq] = true
			}
		}
	}
	return nil
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
