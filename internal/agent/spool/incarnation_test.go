package spool

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// batches reads the spool batch by batch as the sender does, settling
// each one (explicitly: no high-water mark), and returns them as
// "incarnation: sequences".
func batches(t *testing.T, s *Spool) []batch {
	t.Helper()
	var out []batch
	for range 100 {
		recs, err := s.Read(1000, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			return out
		}
		b := batch{Inc: recs[0].Incarnation, Seqs: seqsOf(recs)}
		out = append(out, b)
		if err := s.Ack(b.Inc, 0, b.Seqs); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("the spool does not drain")
	return nil
}

type batch struct {
	Inc  string
	Seqs []uint64
}

// TestIncarnationPerRun: every Open starts a new incarnation; the records
// of an earlier run are read back with theirs, in batches of their own;
// the numbering goes on above them; a wiped spool numbers from 1 again
// in a new incarnation.
func TestIncarnationPerRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir, Options{})
	a := s.Incarnation()
	if len(a) != 32 || s.LegacyThrough() != 0 || s.Stats().Incarnation != a {
		t.Fatalf("new spool: incarnation %q, legacy %d, stats %+v", a, s.LegacyThrough(), s.Stats())
	}
	appendN(t, s, 3)
	s.Close()
	s = open(t, dir, Options{})
	b := s.Incarnation()
	if b == a || len(b) != 32 || len(s.Events()) != 0 {
		t.Fatalf("reopened: incarnation %q (first %q), events %v; want a new one and no events", b, a, s.Events())
	}
	if got := appendN(t, s, 2); got[0] != 4 {
		t.Errorf("second run numbers from %d, want 4", got[0])
	}
	if got := s.SendingIncarnation(); got != a {
		t.Errorf("SendingIncarnation = %q, want the first run's %q", got, a)
	}
	if err := s.Ack(a, 0, []uint64{2, 3}); err != nil { // settled out of order
		t.Fatal(err)
	}
	if got := s.SendingIncarnation(); got != a {
		t.Errorf("SendingIncarnation with 1 unsettled = %q, want the first run's %q", got, a)
	}
	if err := s.Ack(a, 0, []uint64{1}); err != nil {
		t.Fatal(err)
	}
	if got := s.SendingIncarnation(); got != b {
		t.Errorf("SendingIncarnation with the first run settled = %q, want this run's %q", got, b)
	}
	want := []batch{{b, span(4, 5)}}
	if d := cmp.Diff(want, batches(t, s)); d != "" {
		t.Errorf("batches (-want +got):\n%s", d)
	}
	s.Close()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, Options{})
	if s.Incarnation() == a || s.Incarnation() == b {
		t.Errorf("wiped spool: incarnation %q, want a new one", s.Incarnation())
	}
	if got := appendN(t, s, 1); got[0] != 1 {
		t.Errorf("wiped spool numbers from %d, want 1", got[0])
	}
}

// TestAckStaysInItsIncarnation: a high-water mark of an earlier run's
// incarnation above what the spool holds of it (the server stored
// records whose segment is gone) settles nothing of the later runs.
func TestAckStaysInItsIncarnation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir, Options{})
	a := s.Incarnation()
	appendN(t, s, 3)
	s.Close()
	s = open(t, dir, Options{})
	appendN(t, s, 3) // 4..6 in the second run
	if err := s.Ack(a, 50, nil); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(span(4, 6), seqsOf(held(t, s))); d != "" {
		t.Errorf("held after Ack(first run, 50) (-want +got):\n%s", d)
	}
	if err := s.Ack("0123456789abcdef0123456789abcdef", 50, []uint64{5}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(span(4, 6), seqsOf(held(t, s))); d != "" {
		t.Errorf("held after an Ack of an unknown incarnation (-want +got):\n%s", d)
	}
}

func writeSeg(t *testing.T, dir string, idx int, b []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, segName(idx)), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func framesOf(from, to uint64) []byte {
	var b []byte
	for q := from; q <= to; q++ {
		b = appendFrame(b, q, payload(q))
	}
	return b
}

// TestUpgradeFromBeforeIncarnations opens a spool as an agent from before
// incarnations left it (segments without headers and an ack file, no
// incarnation file): its records are the legacy incarnation's, and new
// ones continue the numbering in the new incarnation.
func TestUpgradeFromBeforeIncarnations(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeSeg(t, dir, 1, framesOf(1, 6))
	if err := writeAck(dir, 2); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir, Options{})
	if s.LegacyThrough() != 6 {
		t.Fatalf("upgraded spool: legacy through %d, want 6", s.LegacyThrough())
	}
	if got := appendN(t, s, 1); got[0] != 7 {
		t.Errorf("next sequence %d, want 7", got[0])
	}
	if got := s.SendingIncarnation(); got != s.Incarnation() {
		t.Errorf("SendingIncarnation = %q, want this run's (the legacy one needs no Hello)", got)
	}
	want := []batch{{"", span(3, 6)}, {s.Incarnation(), []uint64{7}}}
	if d := cmp.Diff(want, batches(t, s)); d != "" {
		t.Errorf("batches (-want +got):\n%s", d)
	}
	// A directory holding only an ack file (everything was settled): the
	// numbering goes on above its floor.
	dir2 := t.TempDir()
	if err := writeAck(dir2, 40); err != nil {
		t.Fatal(err)
	}
	if s := open(t, dir2, Options{}); s.Stats().NextSequence != 41 {
		t.Errorf("ack-only old spool: next %d, want 41", s.Stats().NextSequence)
	}
}

// TestUpgradeFromIncarnationFile: a spool from agents with an incarnation
// file but no segment headers: its segments up to the file's legacy
// sequence are the legacy incarnation's, later ones the file's; the file
// goes once no such segment is left.
func TestUpgradeFromIncarnationFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const old = "0123456789abcdef0123456789abcdef"
	writeSeg(t, dir, 1, framesOf(1, 2))
	writeSeg(t, dir, 2, framesOf(3, 5))
	if err := os.WriteFile(filepath.Join(dir, incarnationFile), []byte(formatIncarnation(old, 2)), 0o600); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir, Options{})
	want := []batch{{"", span(1, 2)}, {old, span(3, 5)}}
	if d := cmp.Diff(want, batches(t, s)); d != "" {
		t.Errorf("batches (-want +got):\n%s", d)
	}
	s.Close()
	s = open(t, dir, Options{})
	if _, err := os.Stat(filepath.Join(dir, incarnationFile)); !os.IsNotExist(err) {
		t.Errorf("incarnation file after its segments were settled: %v, want it gone", err)
	}
}

// TestDamagedIncarnationFile: the segments it named get a new
// incarnation (counted, reported); every record is still there.
func TestDamagedIncarnationFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeSeg(t, dir, 1, framesOf(1, 3))
	if err := writeAck(dir, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, incarnationFile), []byte("0123456789abcdef0123456789abcdef 0 00000000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir, Options{})
	st := s.Stats()
	if st.Corrupt != 1 || st.Damage[ProblemIncarnationFile] != 1 || len(s.Events()) != 1 {
		t.Errorf("damaged file: corrupt %d, damage %v, events %v; want 1, incarnation-file 1, one event", st.Corrupt, st.Damage, s.Events())
	}
	b := batches(t, s)
	if len(b) != 1 || len(b[0].Inc) != 32 || b[0].Inc == s.Incarnation() || !cmp.Equal(b[0].Seqs, span(1, 3)) {
		t.Errorf("batches = %v, want 1..3 in a new incarnation of their own", b)
	}
}

// TestSegmentHeaderDamage: one header copy damaged is repaired from the
// other; both damaged, the segment's records continue the previous
// segment's incarnation when their sequences continue it, else get a new
// one. Each is reported.
func TestSegmentHeaderDamage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		flip        []int // offsets in the second segment
		dropFirst   bool  // the first segment is gone: nothing to continue
		wantProblem string
		wantSameInc bool
	}{
		{"first copy", []int{20}, false, ProblemHeaderRepaired, true},
		{"second copy", []int{headerSize + 3}, false, ProblemHeaderRepaired, true},
		{"both copies, continuing", []int{20, headerSize + 20}, false, ProblemHeaderLost, true},
		{"both copies, alone", []int{1, headerSize + 1}, true, ProblemHeaderLost, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := open(t, dir, Options{SegmentBytes: headersSize + 3*frameSize(len(payload(1)))})
			inc := s.Incarnation()
			appendN(t, s, 6) // two segments of three
			s.Close()
			p := filepath.Join(dir, segName(2))
			b, _ := os.ReadFile(p)
			for _, off := range tc.flip {
				b[off] ^= 0x5a
			}
			os.WriteFile(p, b, 0o600)
			if tc.dropFirst {
				os.Remove(filepath.Join(dir, segName(1)))
			}
			s = open(t, dir, Options{})
			if got := s.Stats().Damage[tc.wantProblem]; got != 1 {
				t.Errorf("damage %v, want %s 1", s.Stats().Damage, tc.wantProblem)
			}
			recs := held(t, s)
			last := recs[len(recs)-1]
			if last.Seq != 6 || (last.Incarnation == inc) != tc.wantSameInc {
				t.Errorf("record %d of incarnation %q (first run %q), want 6 in the same: %v", last.Seq, last.Incarnation, inc, tc.wantSameInc)
			}
		})
	}
}

func TestPending(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir(), Options{})
	appendN(t, s, 4)
	if err := s.Ack(s.Incarnation(), 1, []uint64{3}); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[uint64]bool{0: false, 1: false, 2: true, 3: false, 4: true, 5: false} {
		if got := s.Pending(q); got != want {
			t.Errorf("Pending(%d) = %v, want %v", q, got, want)
		}
	}
}

func FuzzParseIncarnation(f *testing.F) {
	f.Add([]byte(formatIncarnation("0123456789abcdef0123456789abcdef", 7)))
	f.Add([]byte("0123456789abcdef0123456789abcdef 7 00000000\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		inc, legacy, err := ParseIncarnation(b)
		if err != nil {
			return
		}
		// Whatever parses is exactly what formatIncarnation writes.
		if got := formatIncarnation(inc, legacy); got != string(b) {
			t.Fatalf("ParseIncarnation(%q) = %q, %d: formats as %q", b, inc, legacy, got)
		}
	})
}
