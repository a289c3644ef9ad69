package spool

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func payload(seq uint64) []byte { return []byte(fmt.Sprintf("record %d", seq)) }

func appendN(t *testing.T, s *Spool, n int) []uint64 {
	t.Helper()
	var seqs []uint64
	for range n {
		seq, err := s.Append(func(seq uint64) ([]byte, error) { return payload(seq), nil })
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		seqs = append(seqs, seq)
	}
	return seqs
}

func seqsOf(recs []Record) []uint64 {
	var out []uint64
	for _, r := range recs {
		out = append(out, r.Seq)
	}
	return out
}

func span(from, to uint64) []uint64 {
	var out []uint64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// held lists every unsettled record, over batch boundaries.
func held(t *testing.T, s *Spool) []Record {
	t.Helper()
	recs, err := s.read(1<<30, 1<<40, false)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func open(t *testing.T, dir string, o Options) *Spool {
	t.Helper()
	o.Dir = dir
	s, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestAppendReadAckAcrossRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir, Options{SegmentBytes: 200})
	if got := appendN(t, s, 10); !cmp.Equal(got, span(1, 10)) {
		t.Fatalf("sequences = %v, want 1..10", got)
	}
	recs, err := s.Read(4, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(span(1, 4), seqsOf(recs)); diff != "" {
		t.Fatalf("Read(4) (-want +got):\n%s", diff)
	}
	for _, r := range recs {
		if !bytes.Equal(r.Data, payload(r.Seq)) {
			t.Errorf("record %d = %q", r.Seq, r.Data)
		}
	}
	// The server settles 1..3 contiguously and 6 out of order.
	if err := s.Ack(s.Incarnation(), 3, []uint64{6}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]uint64{4, 5, 7, 8, 9, 10}, seqsOf(held(t, s))); diff != "" {
		t.Fatalf("after Ack(3, [6]) (-want +got):\n%s", diff)
	}
	// A batch ends before a settled sequence: the next one starts above it.
	recs, _ = s.Read(100, 1<<20)
	if diff := cmp.Diff([]uint64{4, 5}, seqsOf(recs)); diff != "" {
		t.Fatalf("batch after Ack(3, [6]) (-want +got):\n%s", diff)
	}
	if err := s.Ack(s.Incarnation(), 5, nil); err != nil { // floor moves over 6 too
		t.Fatal(err)
	}
	if st := s.Stats(); st.Floor != 6 || st.Records != 4 {
		t.Errorf("Stats = %+v, want floor 6 and 4 records", st)
	}
	s.Close()

	first := s.Incarnation()
	s = open(t, dir, Options{SegmentBytes: 200})
	recs, _ = s.Read(100, 1<<20)
	if diff := cmp.Diff(span(7, 10), seqsOf(recs)); diff != "" {
		t.Fatalf("after reopen (-want +got):\n%s", diff)
	}
	if recs[0].Incarnation != first || s.Incarnation() == first {
		t.Errorf("after reopen: records of %q in a run of %q, want the first run's %q and a new one", recs[0].Incarnation, s.Incarnation(), first)
	}
	if got := appendN(t, s, 1); got[0] != 11 {
		t.Errorf("first sequence after reopen = %d, want 11", got[0])
	}
	if err := s.Ack(first, 10, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Ack(s.Incarnation(), 11, nil); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Bytes != 0 || st.Records != 0 {
		t.Errorf("all settled: Stats = %+v, want no bytes", st)
	}
	s.Close()
	// Everything deleted: the next sequence survives through the ack file.
	s = open(t, dir, Options{})
	if got := appendN(t, s, 1); got[0] != 12 {
		t.Errorf("sequence after a fully settled restart = %d, want 12", got[0])
	}
}

func TestServerHighWaterAboveSpool(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir(), Options{})
	appendN(t, s, 3)
	// The server already settled 1..100 (the spool was wiped): new records
	// must not reuse a settled sequence.
	if err := s.Ack(s.Incarnation(), 100, nil); err != nil {
		t.Fatal(err)
	}
	if got := appendN(t, s, 1); got[0] != 101 {
		t.Errorf("sequence = %d, want 101", got[0])
	}
}

func TestReadLimits(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir(), Options{})
	appendN(t, s, 5)
	recs, _ := s.Read(10, 1) // the first record always fits
	if len(recs) != 1 {
		t.Errorf("Read(10, 1 byte) = %d records, want 1", len(recs))
	}
	recs, _ = s.Read(10, 2*len(payload(1)))
	if len(recs) != 2 {
		t.Errorf("Read(10, 2 payloads) = %d records, want 2", len(recs))
	}
}

func TestCapDropsOldest(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir(), Options{MaxBytes: 1000, SegmentBytes: 200})
	appendN(t, s, 100) // ~29 bytes a frame: far above the cap
	st := s.Stats()
	if st.Bytes > 1000 {
		t.Errorf("Bytes = %d, above the cap", st.Bytes)
	}
	recs, _ := s.Read(1000, 1<<20)
	if st.Dropped == 0 || int(st.Dropped)+len(recs) != 100 {
		t.Fatalf("dropped %d + held %d, want 100 in all", st.Dropped, len(recs))
	}
	// What is left is the newest, contiguous up to 100.
	if diff := cmp.Diff(span(101-uint64(len(recs)), 100), seqsOf(recs)); diff != "" {
		t.Errorf("held (-want +got):\n%s", diff)
	}
}

func TestCorruptRecordSkipped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir, Options{})
	appendN(t, s, 5)
	s.Close()
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(segs) != 1 {
		t.Fatalf("segments = %v", segs)
	}
	b, _ := os.ReadFile(segs[0])
	// Flip a payload byte of record 3 and tear the tail (half a frame).
	off := headersSize + 2*int(frameSize(len(payload(1))))
	b[off+frameHeader] ^= 0xff
	b = append(b, appendFrame(nil, 6, payload(6))[:15]...)
	os.WriteFile(segs[0], b, 0o600)

	s = open(t, dir, Options{})
	recs := held(t, s)
	if diff := cmp.Diff([]uint64{1, 2, 4, 5}, seqsOf(recs)); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if st := s.Stats(); st.Corrupt != 2 {
		t.Errorf("Corrupt = %d, want 2 (one bad checksum, one torn tail)", st.Corrupt)
	}
	if got := appendN(t, s, 1); got[0] != 6 {
		t.Errorf("next sequence = %d, want 6", got[0])
	}
}

func TestDamagedAckFileResendsRatherThanLoses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir, Options{SegmentBytes: 1 << 20})
	appendN(t, s, 4)
	s.Ack(s.Incarnation(), 2, nil)
	s.Close()
	os.WriteFile(filepath.Join(dir, ackFile), []byte("garbage"), 0o600)
	s = open(t, dir, Options{})
	recs, _ := s.Read(100, 1<<20)
	if diff := cmp.Diff(span(1, 4), seqsOf(recs)); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if s.Stats().Corrupt != 1 {
		t.Errorf("Corrupt = %d, want 1", s.Stats().Corrupt)
	}
}

func TestReadSegmentResync(t *testing.T) {
	t.Parallel()
	var b []byte
	b = appendFrame(b, 1, []byte("a"))
	b = append(b, "junk junk"...)
	b = appendFrame(b, 2, []byte("b"))
	b = appendFrame(b, 2, []byte("dup")) // not ascending: refused
	b = appendFrame(b, 3, nil)
	recs, bad := ReadSegment(b)
	if diff := cmp.Diff([]uint64{1, 2, 3}, seqsOf(recs)); diff != "" || bad != 2 {
		t.Errorf("ReadSegment = %v, %d corrupt; want 1,2,3 and 2 (-want +got):\n%s", seqsOf(recs), bad, diff)
	}
}

func FuzzReadSegment(f *testing.F) {
	f.Add([]byte{})
	f.Add(appendFrame(appendFrame(nil, 1, []byte("hello")), 2, []byte("world")))
	f.Add(append(appendFrame(nil, 7, []byte("x")), 0x50, 0x4c, 0x53, 0x31, 0xff, 0xff, 0xff, 0x7f))
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, _ := ReadSegment(b)
		var last uint64
		for _, r := range recs {
			if r.Seq <= last {
				t.Fatalf("sequence %d after %d", r.Seq, last)
			}
			last = r.Seq
			// Re-framing the record must give bytes present in the input
			// with a matching checksum.
			fr := appendFrame(nil, r.Seq, r.Data)
			if !bytes.Contains(b, fr) {
				t.Fatalf("record %d: its frame is not in the input", r.Seq)
			}
			h := fr[:frameHeader]
			if binary.LittleEndian.Uint32(h[8:12]) != frameCRC(h, r.Data) {
				t.Fatalf("record %d: checksum mismatch", r.Seq)
			}
		}
	})
}

// TestSIGKILL runs a child process (this test binary) that appends in a loop
// and prints every sequence Append returned; the parent SIGKILLs it at a
// random moment, reopens the spool and checks that every sequence the child
// printed is there exactly once, with its payload.
func TestSIGKILL(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	if dir := os.Getenv("PLUMBLINE_SPOOL_CHILD"); dir != "" {
		childAppend(dir)
		return
	}
	dir := t.TempDir()
	var confirmed []uint64
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSIGKILL$", "-test.v=false")
		cmd.Env = append(os.Environ(), "PLUMBLINE_SPOOL_CHILD="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Let the child confirm some appends, more each round, then kill it
		// at a random moment of its next ones (an append takes a few ms).
		r := bufio.NewReader(out)
		var b bytes.Buffer
		for n := 0; n < 10*(round+1); {
			line, err := r.ReadBytes('\n')
			b.Write(line)
			if err != nil {
				cmd.Wait()
				t.Fatalf("round %d: the child stopped after %d confirmed appends: %v\n%s", round, n, err, b.Bytes())
			}
			if bytes.HasPrefix(line, []byte("ok ")) {
				n++
			}
		}
		time.Sleep(rand.N(5 * time.Millisecond)) // the random moment
		cmd.Process.Signal(syscall.SIGKILL)
		b.Write(readAll(r))
		cmd.Wait()
		for _, line := range bytes.Split(b.Bytes(), []byte("\n")) {
			if len(line) == 0 || !bytes.HasPrefix(line, []byte("ok ")) {
				continue // a torn last line was never confirmed
			}
			if !bytes.HasSuffix(line, []byte(";")) {
				continue
			}
			n, err := strconv.ParseUint(string(line[3:len(line)-1]), 10, 64)
			if err == nil {
				confirmed = append(confirmed, n)
			}
		}
	}
	if len(confirmed) < 10 {
		t.Fatalf("the children confirmed only %d appends", len(confirmed))
	}
	s := open(t, dir, Options{})
	recs := held(t, s)
	count := map[uint64]int{}
	for _, r := range recs {
		count[r.Seq]++
		if !bytes.Equal(r.Data, payload(r.Seq)) {
			t.Errorf("record %d = %q", r.Seq, r.Data)
		}
	}
	for _, q := range confirmed {
		if count[q] != 1 {
			t.Errorf("confirmed record %d held %d times, want 1", q, count[q])
		}
	}
	t.Logf("%d confirmed appends over 3 kills, %d records held, %d corrupt regions skipped", len(confirmed), len(recs), s.Stats().Corrupt)
}

func readAll(r interface{ Read([]byte) (int, error) }) []byte {
	var buf bytes.Buffer
	buf.ReadFrom(r)
	return buf.Bytes()
}

func childAppend(dir string) {
	s, err := Open(Options{Dir: dir, SegmentBytes: 4096})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	for {
		seq, err := s.Append(func(seq uint64) ([]byte, error) { return payload(seq), nil })
		if err != nil {
			fmt.Println("append:", err)
			os.Exit(1)
		}
		// Unbuffered: the line is out before the next append starts.
		fmt.Fprintf(os.Stdout, "ok %d;\n", seq)
	}
}

// BenchmarkAppend measures append + fsync of a 600-byte record (a typical
// ProbeResult): go test -bench Append -run '^$' ./internal/agent/spool
func BenchmarkAppend(b *testing.B) {
	s, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	data := bytes.Repeat([]byte{'x'}, 600)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := s.Append(func(uint64) ([]byte, error) { return data, nil }); err != nil {
			b.Fatal(err)
		}
	}
}
