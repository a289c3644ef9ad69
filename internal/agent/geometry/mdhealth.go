package geometry

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/plumbline/plumbline/internal/vocab"
)

// Parsers of the md health attributes (Documentation/admin-guide/md.rst).
// prometheus/procfs reads array_state, dev-*/state, sync_action and
// sync_completed (sysfs.FS.Mdraids) but as one walk over every array that
// fails whole on one missing file or on sync_completed "delayed", and it
// has no slot, errors, bad_blocks, sync_speed, mismatch_cnt or
// last_sync_action; these parse one file each, in its style, so that a
// missing or odd file is one unknown and the rest is kept.

// maxMDStateFlags bounds the flags kept from one dev-*/state file.
const maxMDStateFlags = vocab.MaxMDMemberFlags

// maxBadBlocksBytes bounds a dev-*/bad_blocks read: the kernel writes at
// most a page, and pages are up to 64 KiB.
const maxBadBlocksBytes = 64 << 10

// errMDNone is a value the kernel writes as "none" (no sync action running,
// no slot).
var errMDNone = errors.New("none")

// parseMDWord parses a file holding one md word (array_state, sync_action,
// last_sync_action). A word this version does not know is kept as written
// when it is word-shaped.
func parseMDWord(b []byte) (string, error) {
	s, err := parseSysfsString(b)
	if err != nil {
		return "", err
	}
	if err := checkMDWord(s); err != nil {
		return "", err
	}
	return s, nil
}

// checkMDWord is vocab.CheckMDWord: the server checks the same.
func checkMDWord(s string) error { return vocab.CheckMDWord(s) }

// parseMDMemberState parses dev-*/state: flags separated by commas
// ("in_sync,write_mostly"). An empty file is no flag. Repeated flags are
// kept once.
func parseMDMemberState(b []byte) ([]string, error) {
	s, err := parseSysfsString(b)
	if errors.Is(err, errEmpty) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, w := range strings.Split(s, ",") {
		w = strings.TrimSpace(w)
		if w == "" {
			continue
		}
		if err := checkMDWord(w); err != nil {
			return nil, fmt.Errorf("state %q: %w", s, err)
		}
		if slices.Contains(out, w) {
			continue
		}
		if len(out) == maxMDStateFlags {
			return nil, fmt.Errorf("state %q: more than %d flags", s, maxMDStateFlags)
		}
		out = append(out, w)
	}
	return out, nil
}

// parseMDSyncCompleted parses md/sync_completed: "none" (no action runs),
// "delayed" (it waits) or "DONE / TOTAL" in sectors.
func parseMDSyncCompleted(b []byte) (done, total uint64, delayed bool, err error) {
	s, err := parseSysfsString(b)
	if err != nil {
		return 0, 0, false, err
	}
	switch s {
	case "none":
		return 0, 0, false, nil
	case "delayed":
		return 0, 0, true, nil
	}
	a, c, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, false, fmt.Errorf("parse %q: want none, delayed or \"DONE / TOTAL\"", s)
	}
	done, err = strconv.ParseUint(strings.TrimSpace(a), 10, 64)
	if err == nil {
		total, err = strconv.ParseUint(strings.TrimSpace(c), 10, 64)
	}
	if err != nil {
		return 0, 0, false, fmt.Errorf("parse %q: %w", s, err)
	}
	if done > total {
		return 0, 0, false, fmt.Errorf("parse %q: %d sectors done of %d", s, done, total)
	}
	return done, total, false, nil
}

// parseMDSyncSpeed parses md/sync_speed ("none", or KiB/s) into bytes per
// second.
func parseMDSyncSpeed(b []byte) (uint64, error) {
	s, err := parseSysfsString(b)
	if err != nil {
		return 0, err
	}
	if s == "none" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %q: %w", s, err)
	}
	hi, lo := bits.Mul64(n, 1024)
	if hi != 0 {
		return 0, fmt.Errorf("parse %q: %d KiB/s overflows bytes per second", s, n)
	}
	return lo, nil
}

// parseMDSlot parses dev-*/slot: the role the member fills, or "none"
// (errMDNone). "journal" is a journal device, which fills no role either.
func parseMDSlot(b []byte) (uint32, error) {
	s, err := parseSysfsString(b)
	if err != nil {
		return 0, err
	}
	if s == "none" || s == vocab.MDJournal {
		return 0, errMDNone
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("parse %q: %w", s, err)
	}
	return uint32(n), nil
}

// parseMDBadBlocks parses dev-*/bad_blocks (or unacknowledged_bad_blocks):
// one "SECTOR LENGTH" line per range. It returns the ranges and the
// sectors they cover.
func parseMDBadBlocks(b []byte) (ranges uint32, sectors uint64, err error) {
	if len(b) > maxBadBlocksBytes {
		return 0, 0, fmt.Errorf("%d bytes: want at most %d", len(b), maxBadBlocksBytes)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 256), maxBadBlocksBytes)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return 0, 0, fmt.Errorf("line %q: want \"SECTOR LENGTH\"", line)
		}
		if _, err := strconv.ParseUint(f[0], 10, 64); err != nil {
			return 0, 0, fmt.Errorf("line %q: %w", line, err)
		}
		n, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil || n == 0 {
			return 0, 0, fmt.Errorf("line %q: want a length of 1 sector or more", line)
		}
		var carry uint64
		if sectors, carry = bits.Add64(sectors, n, 0); carry != 0 {
			return 0, 0, fmt.Errorf("line %q: the ranges add up to more than 2^64-1 sectors", line)
		}
		ranges++
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	return ranges, sectors, nil
}
