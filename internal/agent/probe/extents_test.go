package probe

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fiemapAnswer lays out a struct fiemap answer as the kernel writes it.
func fiemapAnswer(count int, ext ...[4]uint64) []byte {
	b := fiemapRequest(0, count)
	le := binary.LittleEndian
	le.PutUint32(b[20:], uint32(len(ext)))
	for i, e := range ext {
		o := fiemapHeaderSize + i*fiemapExtentSize
		le.PutUint64(b[o:], e[0])
		le.PutUint64(b[o+8:], e[1])
		le.PutUint64(b[o+16:], e[2])
		le.PutUint32(b[o+40:], uint32(e[3]))
	}
	return b
}

func TestDecodeFiemap(t *testing.T) {
	// A 16 MiB probe file as ext4 lays it out: two written extents, an
	// unwritten (preallocated) one that reads would not reach, the last.
	b := fiemapAnswer(8,
		[4]uint64{0, 0x8800000, 8 << 20, 0},
		[4]uint64{8 << 20, 0x9900000, 4 << 20, 0},
		[4]uint64{12 << 20, 0xAA00000, 2 << 20, 0x800},
		[4]uint64{14 << 20, 0xBB00000, 2 << 20, fiemapExtentLast},
	)
	ext, last, next, err := decodeFiemap(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []Extent{
		{Logical: 0, Physical: 0x8800000, Length: 8 << 20},
		{Logical: 8 << 20, Physical: 0x9900000, Length: 4 << 20},
		{Logical: 14 << 20, Physical: 0xBB00000, Length: 2 << 20},
	}
	if d := cmp.Diff(want, ext); d != "" || !last || next != 16<<20 {
		t.Fatalf("extents (-want +got):\n%s last %v next %d", d, last, next)
	}
	// Merged where contiguous on both sides.
	merged, err := normalizeExtents([]Extent{{Logical: 0, Physical: 100, Length: 10}, {Logical: 10, Physical: 110, Length: 5}, {Logical: 15, Physical: 500, Length: 5}})
	if err != nil || len(merged) != 2 || merged[0].Length != 15 {
		t.Fatalf("normalize: %v %v", merged, err)
	}
	if _, err := normalizeExtents([]Extent{{Logical: 0, Physical: 100, Length: 10}, {Logical: 5, Physical: 300, Length: 10}}); !errors.Is(err, errExtents) {
		t.Fatalf("overlap: err %v", err)
	}
}

func TestDecodeFiemapRefuses(t *testing.T) {
	for name, b := range map[string][]byte{
		"short":           make([]byte, 10),
		"more than room":  func() []byte { b := fiemapAnswer(1); binary.LittleEndian.PutUint32(b[20:], 2); return b }(),
		"more than count": func() []byte { b := fiemapAnswer(2); binary.LittleEndian.PutUint32(b[20:], 3); return b }(),
		"huge offset":     fiemapAnswer(1, [4]uint64{1 << 63, 0, 4096, 0}),
	} {
		if _, _, _, err := decodeFiemap(b); !errors.Is(err, errExtents) {
			t.Errorf("%s: err %v, want errExtents", name, err)
		}
	}
}

// retrievalAnswer lays out a RETRIEVAL_POINTERS_BUFFER.
func retrievalAnswer(start int64, runs ...[2]int64) []byte {
	b := make([]byte, retrievalHeaderSize+len(runs)*retrievalExtentSize)
	le := binary.LittleEndian
	le.PutUint32(b[0:], uint32(len(runs)))
	le.PutUint64(b[8:], uint64(start))
	for i, r := range runs {
		le.PutUint64(b[retrievalHeaderSize+i*16:], uint64(r[0]))
		le.PutUint64(b[retrievalHeaderSize+i*16+8:], uint64(r[1]))
	}
	return b
}

func TestDecodeRetrievalPointers(t *testing.T) {
	// NTFS, 4 KiB clusters: VCN 0–255 at LCN 1000, a sparse run, VCN
	// 300–4095 at LCN 90000.
	b := retrievalAnswer(0, [2]int64{256, 1000}, [2]int64{300, -1}, [2]int64{4096, 90000})
	ext, next, err := decodeRetrievalPointers(b, 4096)
	if err != nil {
		t.Fatal(err)
	}
	want := []Extent{
		{Logical: 0, Physical: 1000 * 4096, Length: 256 * 4096},
		{Logical: 300 * 4096, Physical: 90000 * 4096, Length: (4096 - 300) * 4096},
	}
	if d := cmp.Diff(want, ext); d != "" || next != 4096 {
		t.Fatalf("extents (-want +got):\n%s next %d", d, next)
	}
	for name, tc := range map[string]struct {
		b       []byte
		cluster int64
	}{
		"short":          {make([]byte, 8), 4096},
		"count too big":  {func() []byte { b := retrievalAnswer(0, [2]int64{1, 1}); b[0] = 9; return b }(), 4096},
		"VCN backwards":  {retrievalAnswer(10, [2]int64{5, 1}), 4096},
		"LCN below -1":   {retrievalAnswer(0, [2]int64{5, -7}), 4096},
		"cluster not 2ⁿ": {retrievalAnswer(0, [2]int64{5, 1}), 3000},
	} {
		if _, _, err := decodeRetrievalPointers(tc.b, tc.cluster); !errors.Is(err, errExtents) {
			t.Errorf("%s: err %v, want errExtents", name, err)
		}
	}
}

func FuzzDecodeFiemap(f *testing.F) {
	f.Add(fiemapAnswer(4, [4]uint64{0, 4096, 8192, 1}))
	f.Add(fiemapAnswer(2, [4]uint64{0, 0, 4096, 0x800}, [4]uint64{4096, 1 << 40, 4096, 1}))
	f.Fuzz(func(t *testing.T, b []byte) {
		ext, _, _, err := decodeFiemap(b)
		if err != nil {
			return
		}
		if len(ext) > len(b)/fiemapExtentSize {
			t.Fatalf("%d extents from %d bytes", len(ext), len(b))
		}
		for _, e := range ext {
			if e.Logical < 0 || e.Physical < 0 || e.Length <= 0 {
				t.Fatalf("bad extent %+v", e)
			}
		}
		_, _ = normalizeExtents(ext)
	})
}

func FuzzDecodeRetrievalPointers(f *testing.F) {
	f.Add(retrievalAnswer(0, [2]int64{256, 1000}, [2]int64{300, -1}), int64(4096))
	f.Add(retrievalAnswer(5, [2]int64{6, 0}), int64(65536))
	f.Fuzz(func(t *testing.T, b []byte, cluster int64) {
		ext, _, err := decodeRetrievalPointers(b, cluster)
		if err != nil {
			return
		}
		for _, e := range ext {
			if e.Logical < 0 || e.Physical < 0 || e.Length <= 0 || e.Length%cluster != 0 {
				t.Fatalf("bad extent %+v (cluster %d)", e, cluster)
			}
		}
		_, _ = normalizeExtents(ext)
	})
}
