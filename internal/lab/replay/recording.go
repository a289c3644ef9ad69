// Package replay turns recorded probe runs into simulated weeks of a fleet:
// it reads noise recordings (short probe runs measured on real devices,
// bench/noiserec writes them), strings them into the probe results a
// volume on a given schedule would have reported, and feeds them through
// the server's own path — ingest validation, the store, the baseline
// evaluator — in simulated time, counting the state changes and the
// alerts the project's rules would raise. It is how Plumbline shows that
// noise alone raises no alert and how long a real slowdown takes to.
package replay

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/plumbline/plumbline/internal/histogram"
)

// A recording is a text file (optionally gzip-compressed):
//
//	plumbline-noise 1
//	# free comment lines
//	source <label>
//	atom_ops <n>
//	<unix ms> <kind> <count> <min ns> <max ns> <sum ns> <index>:<count>[,<index>:<count>...]
//
// one line per atom: a probe run of atom_ops operations (fewer when it was
// stopped early), its start time, kind and latency histogram (schema 3
// bucket indexes, histogram.Index). Merging consecutive atoms gives
// exactly the histogram one longer run over the same operations would
// have produced: that is how the replay builds runs of any size.
const header = "plumbline-noise 1"

// Atom is one recorded short probe run.
type Atom struct {
	At   time.Time
	Kind string
	Hist *histogram.Histogram
}

// Recording is a parsed recording: its atoms by kind, in time order.
type Recording struct {
	Source   string
	AtomOps  int
	Comments []string
	Atoms    map[string][]Atom
}

// Kinds lists the recording's kinds, sorted.
func (r *Recording) Kinds() []string {
	ks := make([]string, 0, len(r.Atoms))
	for k := range r.Atoms {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Limits of a recording, so that a bad file costs bounded memory.
const (
	maxLineBytes = 4096
	maxAtoms     = 1_000_000
	maxBuckets   = 256
)

// ErrBadRecording wraps every Read error.
var ErrBadRecording = errors.New("bad noise recording")

// Read parses a recording, gzip-compressed or not.
func Read(r io.Reader) (*Recording, error) {
	br := bufio.NewReader(r)
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadRecording, err)
		}
		defer zr.Close()
		br = bufio.NewReader(zr)
	}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 512), maxLineBytes)
	rec := &Recording{Atoms: map[string][]Atom{}}
	line, n := "", 0
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: line %d: %s", ErrBadRecording, n, fmt.Sprintf(format, args...))
	}
	total := 0
	for sc.Scan() {
		n++
		line = strings.TrimSpace(sc.Text())
		switch {
		case n == 1:
			if line != header {
				return nil, bad("want %q", header)
			}
			continue
		case line == "":
			continue
		case strings.HasPrefix(line, "#"):
			rec.Comments = append(rec.Comments, strings.TrimSpace(strings.TrimPrefix(line, "#")))
			continue
		case strings.HasPrefix(line, "source "):
			rec.Source = strings.TrimSpace(strings.TrimPrefix(line, "source "))
			continue
		case strings.HasPrefix(line, "atom_ops "):
			v, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "atom_ops ")))
			if err != nil || v < 1 || v > 1_000_000 {
				return nil, bad("atom_ops: want 1 to 1000000")
			}
			rec.AtomOps = v
			continue
		}
		a, err := parseAtom(line)
		if err != nil {
			return nil, bad("%v", err)
		}
		if total++; total > maxAtoms {
			return nil, bad("more than %d atoms", maxAtoms)
		}
		if prev := rec.Atoms[a.Kind]; len(prev) > 0 && a.At.Before(prev[len(prev)-1].At) {
			return nil, bad("%s atom at %s before the previous one", a.Kind, a.At.Format(time.RFC3339Nano))
		}
		rec.Atoms[a.Kind] = append(rec.Atoms[a.Kind], a)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: line %d: %w", ErrBadRecording, n+1, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: empty", ErrBadRecording)
	}
	if rec.AtomOps == 0 {
		return nil, fmt.Errorf("%w: no atom_ops line", ErrBadRecording)
	}
	if total == 0 {
		return nil, fmt.Errorf("%w: no atoms", ErrBadRecording)
	}
	return rec, nil
}

func parseAtom(line string) (Atom, error) {
	f := strings.Fields(line)
	if len(f) != 7 {
		return Atom{}, fmt.Errorf("want 7 fields (ms kind count min max sum buckets), got %d", len(f))
	}
	ms, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || ms < 0 || ms > 1<<50 {
		return Atom{}, fmt.Errorf("time %q: want Unix milliseconds", f[0])
	}
	kind := f[1]
	if len(kind) > 64 {
		return Atom{}, errors.New("kind longer than 64 bytes")
	}
	var nums [4]int64
	for i, s := range f[2:6] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return Atom{}, fmt.Errorf("field %d %q: want a non-negative integer", i+3, s)
		}
		nums[i] = v
	}
	count, minNs, maxNs, sumNs := nums[0], nums[1], nums[2], nums[3]
	if count < 1 || minNs < 1 || maxNs < minNs {
		return Atom{}, fmt.Errorf("count %d, min %d, max %d: want count >= 1 and 1 <= min <= max", count, minNs, maxNs)
	}
	// The exact sum lies between count × min and count × max.
	if lo, over := mul64(count, minNs); over || sumNs < lo {
		return Atom{}, fmt.Errorf("sum %d below count × min", sumNs)
	}
	if hi, over := mul64(count, maxNs); !over && sumNs > hi {
		return Atom{}, fmt.Errorf("sum %d above count × max", sumNs)
	}
	parts := strings.Split(f[6], ",")
	if len(parts) > maxBuckets {
		return Atom{}, fmt.Errorf("%d buckets: want at most %d", len(parts), maxBuckets)
	}
	snap := histogram.Snapshot{Schema: histogram.Schema, ZeroThreshold: histogram.ZeroThreshold,
		Count: uint64(count), SumNanos: sumNs, MinNanos: minNs, MaxNanos: maxNs}
	lo, hi := histogram.Index(time.Duration(minNs).Seconds()), histogram.Index(time.Duration(maxNs).Seconds())
	var held int64
	for _, p := range parts {
		is, cs, ok := strings.Cut(p, ":")
		idx, err1 := strconv.ParseInt(is, 10, 32)
		c, err2 := strconv.ParseInt(cs, 10, 64)
		if !ok || err1 != nil || err2 != nil || c < 1 {
			return Atom{}, fmt.Errorf("bucket %q: want index:count", p)
		}
		if int32(idx) < lo || int32(idx) > hi {
			return Atom{}, fmt.Errorf("bucket %d outside min..max (%d..%d)", idx, lo, hi)
		}
		if held += c; held > count {
			return Atom{}, fmt.Errorf("buckets hold more than count %d", count)
		}
		snap.Buckets = append(snap.Buckets, histogram.Bucket{Index: int32(idx), Count: uint64(c)})
	}
	h, err := histogram.FromSnapshot(snap)
	if err != nil {
		return Atom{}, err
	}
	return Atom{At: time.UnixMilli(ms).UTC(), Kind: kind, Hist: h}, nil
}

// mul64 is a×b for non-negative a, b, and whether it overflows int64.
func mul64(a, b int64) (p int64, overflow bool) {
	if a != 0 && b > math.MaxInt64/a {
		return 0, true
	}
	return a * b, false
}

// Writer writes a recording line by line, so that an interrupted
// recorder keeps what it wrote.
type Writer struct {
	w   *bufio.Writer
	err error
}

// NewWriter writes the recording's header: source label, atom size and
// comment lines.
func NewWriter(w io.Writer, source string, atomOps int, comments ...string) (*Writer, error) {
	if source == "" || strings.ContainsAny(source, "\n\r") || atomOps < 1 {
		return nil, errors.New("recording: want a one-line source label and atom_ops >= 1")
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, header)
	for _, c := range comments {
		for _, l := range strings.Split(c, "\n") {
			fmt.Fprintln(bw, "#", l)
		}
	}
	fmt.Fprintln(bw, "source", source)
	fmt.Fprintln(bw, "atom_ops", atomOps)
	return &Writer{w: bw}, bw.Flush()
}

// Write appends one atom and flushes it.
func (w *Writer) Write(a Atom) error {
	if w.err != nil {
		return w.err
	}
	if a.Hist == nil || a.Hist.Count() == 0 || a.Hist.ZeroCount() != 0 || strings.ContainsAny(a.Kind, " \t\n") || a.Kind == "" {
		return errors.New("recording: want a non-empty histogram without zero observations and a kind without spaces")
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d %s %d %d %d %d ", a.At.UnixMilli(), a.Kind, a.Hist.Count(), a.Hist.Min(), a.Hist.Max(), a.Hist.Sum())
	for i, bk := range a.Hist.Buckets() {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d:%d", bk.Index, bk.Count)
	}
	b.WriteByte('\n')
	if _, w.err = w.w.Write(b.Bytes()); w.err != nil {
		return w.err
	}
	w.err = w.w.Flush()
	return w.err
}
