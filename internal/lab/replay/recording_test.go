package replay

import (
	"bytes"
	"compress/gzip"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/histogram"
)

func TestRecordingRoundTrip(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, "lab-test", 10, "a comment\nover two lines")
	if err != nil {
		t.Fatal(err)
	}
	var want []Atom
	for i := range 4 {
		h := &histogram.Histogram{}
		for j := range 10 {
			h.Observe(time.Duration(100_000 + 37_000*i + 5_000*j))
		}
		a := Atom{At: time.UnixMilli(1_700_000_000_000 + int64(i)*1500).UTC(), Kind: kinds[i%2], Hist: h}
		if err := w.Write(a); err != nil {
			t.Fatal(err)
		}
		want = append(want, a)
	}
	for _, gz := range []bool{false, true} {
		in := bytes.NewReader(buf.Bytes())
		if gz {
			var z bytes.Buffer
			zw := gzip.NewWriter(&z)
			zw.Write(buf.Bytes())
			zw.Close()
			in = bytes.NewReader(z.Bytes())
		}
		rec, err := Read(in)
		if err != nil {
			t.Fatalf("Read(gzip %v) = %v", gz, err)
		}
		if rec.Source != "lab-test" || rec.AtomOps != 10 || len(rec.Comments) != 2 || len(rec.Atoms[kinds[0]]) != 2 || len(rec.Atoms[kinds[1]]) != 2 {
			t.Fatalf("Read = %+v", rec)
		}
		for i, a := range want {
			got := rec.Atoms[a.Kind][i/2]
			if !got.At.Equal(a.At) || !got.Hist.Equal(a.Hist) {
				t.Errorf("atom %d = %v %+v, want %v %+v", i, got.At, got.Hist.Snapshot(), a.At, a.Hist.Snapshot())
			}
		}
	}
}

func TestReadRejects(t *testing.T) {
	t.Parallel()
	const head = "plumbline-noise 1\nsource s\natom_ops 10\n"
	good := "1700000000000 random-read 2 100000 200000 300000 -106:1,-98:1\n"
	if _, err := Read(strings.NewReader(head + good)); err != nil {
		t.Fatalf("Read(good) = %v", err)
	}
	for name, text := range map[string]string{
		"empty":           "",
		"wrong header":    "plumbline-noise 2\n",
		"no atom_ops":     "plumbline-noise 1\nsource s\n" + good,
		"no atoms":        head,
		"fields":          head + "1700000000000 random-read 2 100000 200000 300000\n",
		"count 0":         head + "1700000000000 random-read 0 100000 200000 300000 -106:1\n",
		"min above max":   head + "1700000000000 random-read 2 300000 200000 300000 -106:1\n",
		"sum too big":     head + "1700000000000 random-read 2 100000 200000 900000 -106:1,-98:1\n",
		"sum too small":   head + "1700000000000 random-read 2 100000 200000 100 -106:1,-98:1\n",
		"bucket range":    head + "1700000000000 random-read 2 100000 200000 300000 -60:2\n",
		"counts mismatch": head + "1700000000000 random-read 2 100000 200000 300000 -106:1\n",
		"counts over":     head + "1700000000000 random-read 2 100000 200000 300000 -106:3\n",
		"bad bucket":      head + "1700000000000 random-read 2 100000 200000 300000 x:1\n",
		"time backwards":  head + good + "1600000000000 random-read 2 100000 200000 300000 -106:1,-98:1\n",
		"overflow":        head + "1700000000000 random-read 9223372036854775807 100000 200000 300000 -106:1\n",
		"long line":       head + strings.Repeat("1", 5000) + "\n",
	} {
		if _, err := Read(strings.NewReader(text)); !errors.Is(err, ErrBadRecording) {
			t.Errorf("Read(%s) = %v, want ErrBadRecording", name, err)
		}
	}
}

// FuzzRead: any bytes give a recording or ErrBadRecording, never a panic.
func FuzzRead(f *testing.F) {
	f.Add([]byte("plumbline-noise 1\nsource s\natom_ops 10\n1700000000000 random-read 2 100000 200000 300000 -106:1,-98:1\n"))
	f.Add([]byte("plumbline-noise 1\n# c\natom_ops 1\n1 k 1 1 1 1 -240:1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := Read(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrBadRecording) {
				t.Fatalf("Read = %v, want ErrBadRecording", err)
			}
			return
		}
		for _, atoms := range rec.Atoms {
			for _, a := range atoms {
				if a.Hist.Count() == 0 {
					t.Fatal("an atom without observations")
				}
			}
		}
	})
}
