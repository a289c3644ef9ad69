package spool

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestIncarnationKeptAcrossRestart: a new spool gets an incarnation of 32
// hex digits, no legacy sequences, and keeps both across reopening; a
// spool created again in a wiped directory gets another one.
func TestIncarnationKeptAcrossRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir, Options{})
	inc := s.Incarnation()
	if len(inc) != 32 || s.LegacyThrough() != 0 || s.Stats().Incarnation != inc {
		t.Fatalf("new spool: incarnation %q, legacy %d, stats %+v", inc, s.LegacyThrough(), s.Stats())
	}
	appendN(t, s, 3)
	s.Close()
	s = open(t, dir, Options{})
	if s.Incarnation() != inc || s.LegacyThrough() != 0 || s.Stats().Corrupt != 0 {
		t.Errorf("reopened: incarnation %q legacy %d corrupt %d; want %q, 0, 0", s.Incarnation(), s.LegacyThrough(), s.Stats().Corrupt, inc)
	}
	s.Close()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, Options{})
	if s.Incarnation() == inc || len(s.Incarnation()) != 32 {
		t.Errorf("wiped spool: incarnation %q, want a new one (old %q)", s.Incarnation(), inc)
	}
	if got := appendN(t, s, 1); got[0] != 1 {
		t.Errorf("wiped spool numbers from %d, want 1", got[0])
	}
}

// TestUpgradeFromBeforeIncarnations opens a spool as an agent from before
// incarnations left it (segments and an ack file, no incarnation file):
// it gets an incarnation, every sequence it had numbered is legacy, its
// records are all still there, and new ones continue the numbering.
func TestUpgradeFromBeforeIncarnations(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var seg []byte
	for q := uint64(1); q <= 6; q++ {
		seg = appendFrame(seg, q, payload(q))
	}
	if err := os.WriteFile(filepath.Join(dir, "0000000000000001.seg"), seg, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeAck(dir, 2); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir, Options{})
	if len(s.Incarnation()) != 32 || s.LegacyThrough() != 6 {
		t.Fatalf("upgraded spool: incarnation %q, legacy through %d; want a new id, 6", s.Incarnation(), s.LegacyThrough())
	}
	recs, err := s.Read(100, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(span(3, 6), seqsOf(recs)); d != "" {
		t.Errorf("records after the upgrade (-want +got):\n%s", d)
	}
	if got := appendN(t, s, 1); got[0] != 7 {
		t.Errorf("next sequence %d, want 7", got[0])
	}
	inc := s.Incarnation()
	s.Close()
	s = open(t, dir, Options{})
	if s.Incarnation() != inc || s.LegacyThrough() != 6 {
		t.Errorf("reopened: %q through %d, want %q through 6", s.Incarnation(), s.LegacyThrough(), inc)
	}
	// A directory holding only an ack file (everything was settled) is an
	// old spool too: its sequences up to the floor were legacy.
	dir2 := t.TempDir()
	if err := writeAck(dir2, 40); err != nil {
		t.Fatal(err)
	}
	if s := open(t, dir2, Options{}); s.LegacyThrough() != 40 || s.Stats().NextSequence != 41 {
		t.Errorf("ack-only old spool: legacy through %d, next %d; want 40, 41", s.LegacyThrough(), s.Stats().NextSequence)
	}
}

// TestDamagedIncarnationFile: a damaged file is replaced by a new
// incarnation and counted as corrupt; every record is still there.
func TestDamagedIncarnationFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir, Options{})
	appendN(t, s, 3)
	inc := s.Incarnation()
	s.Close()
	if err := os.WriteFile(filepath.Join(dir, incarnationFile), []byte(inc+" 0 00000000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, Options{})
	if s.Incarnation() == inc || s.Stats().Corrupt != 1 || s.LegacyThrough() != 0 {
		t.Errorf("damaged file: incarnation %q (old %q), corrupt %d, legacy %d; want new, 1, 0", s.Incarnation(), inc, s.Stats().Corrupt, s.LegacyThrough())
	}
	recs, _ := s.Read(100, 1<<20)
	if d := cmp.Diff(span(1, 3), seqsOf(recs)); d != "" {
		t.Errorf("records (-want +got):\n%s", d)
	}
}

func TestPending(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir(), Options{})
	appendN(t, s, 4)
	if err := s.Ack(1, []uint64{3}); err != nil {
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
