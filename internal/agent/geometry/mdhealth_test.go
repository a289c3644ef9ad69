package geometry

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseMDHealthFiles(t *testing.T) {
	t.Parallel()
	t.Run("state", testParseState)
	t.Run("sync_completed", testParseSyncCompleted)
	t.Run("slot", testParseSlot)
	t.Run("bad_blocks", testParseBadBlocks)
	t.Run("sync_speed", testParseSyncSpeed)
}

func testParseState(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		bad  bool
	}{
		{"in_sync\n", []string{"in_sync"}, false},
		{"faulty,write_error\n", []string{"faulty", "write_error"}, false},
		{"in_sync,in_sync,spare", []string{"in_sync", "spare"}, false},
		{"\n", nil, false},
		{"some_new_flag", []string{"some_new_flag"}, false}, // unknown kept
		{"in sync", nil, true},
		{"IN_SYNC", nil, true},
		{manyFlags(17), nil, true},
		{manyFlags(16), strings.Split(manyFlags(16), ","), false},
		{strings.Repeat("x", 40), nil, true},
	} {
		got, err := parseMDMemberState([]byte(tc.in))
		if (err != nil) != tc.bad || !cmp.Equal(got, tc.want) {
			t.Errorf("parseMDMemberState(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

func testParseSyncCompleted(t *testing.T) {
	for _, tc := range []struct {
		in          string
		done, total uint64
		delayed     bool
		bad         bool
	}{
		{"none\n", 0, 0, false, false},
		{"delayed\n", 0, 0, true, false},
		{"1569888 / 2093056\n", 1569888, 2093056, false, false},
		{"5/5", 5, 5, false, false},
		{"6 / 5", 0, 0, false, true},
		{"12", 0, 0, false, true},
		{"a / 5", 0, 0, false, true},
		{"", 0, 0, false, true},
	} {
		d, tot, del, err := parseMDSyncCompleted([]byte(tc.in))
		if (err != nil) != tc.bad || d != tc.done || tot != tc.total || del != tc.delayed {
			t.Errorf("parseMDSyncCompleted(%q) = %d, %d, %v, %v; want %d, %d, %v, error %v", tc.in, d, tot, del, err, tc.done, tc.total, tc.delayed, tc.bad)
		}
	}
}

func testParseSlot(t *testing.T) {
	if n, err := parseMDSlot([]byte("3\n")); err != nil || n != 3 {
		t.Errorf("parseMDSlot(3) = %d, %v", n, err)
	}
	for _, in := range []string{"none\n", "journal\n"} {
		if _, err := parseMDSlot([]byte(in)); !errors.Is(err, errMDNone) {
			t.Errorf("parseMDSlot(%q) error = %v, want errMDNone", in, err)
		}
	}
	if _, err := parseMDSlot([]byte("-1")); err == nil || errors.Is(err, errMDNone) {
		t.Errorf("parseMDSlot(-1) error = %v, want a parse error", err)
	}
}

func testParseBadBlocks(t *testing.T) {
	for _, tc := range []struct {
		in      string
		ranges  uint32
		sectors uint64
		bad     bool
	}{
		{"", 0, 0, false},
		{"1000 8\n2048 16\n", 2, 24, false},
		{"1000 0\n", 0, 0, true},
		{"1000\n", 0, 0, true},
		{"1 18446744073709551615\n2 1\n", 0, 0, true},
		{strings.Repeat("1 1\n", 20000), 0, 0, true},
	} {
		r, s, err := parseMDBadBlocks([]byte(tc.in))
		if (err != nil) != tc.bad || r != tc.ranges || s != tc.sectors {
			t.Errorf("parseMDBadBlocks(%.20q) = %d, %d, %v; want %d, %d, error %v", tc.in, r, s, err, tc.ranges, tc.sectors, tc.bad)
		}
	}
}

func testParseSyncSpeed(t *testing.T) {
	if n, err := parseMDSyncSpeed([]byte("102400\n")); err != nil || n != 100<<20 {
		t.Errorf("parseMDSyncSpeed(102400) = %d, %v", n, err)
	}
	if n, err := parseMDSyncSpeed([]byte("none\n")); err != nil || n != 0 {
		t.Errorf("parseMDSyncSpeed(none) = %d, %v", n, err)
	}
	if _, err := parseMDSyncSpeed([]byte("18446744073709551615")); err == nil {
		t.Error("parseMDSyncSpeed(2^64-1 KiB/s): no error, want an overflow")
	}
}

func manyFlags(n int) string {
	var w []string
	for i := range n {
		w = append(w, fmt.Sprintf("f%d", i))
	}
	return strings.Join(w, ",")
}

// FuzzMDHealthFiles feeds the md health parsers anything: they return a
// value or an error, never panic, and what they accept is consistent.
func FuzzMDHealthFiles(f *testing.F) {
	for _, s := range []string{"in_sync,write_mostly\n", "1569888 / 2093056\n", "delayed", "none", "3", "1000 8\n2048 16\n", "read-auto\n", "\xff", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if st, err := parseMDMemberState(b); err == nil {
			for _, w := range st {
				if checkMDWord(w) != nil {
					t.Errorf("parseMDMemberState(%q) kept %q, which is not a word", b, w)
				}
			}
		}
		if d, tot, _, err := parseMDSyncCompleted(b); err == nil && d > tot {
			t.Errorf("parseMDSyncCompleted(%q) = %d of %d", b, d, tot)
		}
		if r, s, err := parseMDBadBlocks(b); err == nil && uint64(r) > s {
			t.Errorf("parseMDBadBlocks(%q) = %d ranges over %d sectors", b, r, s)
		}
		_, _ = parseMDSlot(b)
		_, _ = parseMDSyncSpeed(b)
		if w, err := parseMDWord(b); err == nil && checkMDWord(w) != nil {
			t.Errorf("parseMDWord(%q) = %q", b, w)
		}
	})
}
