package spool

import (
	"encoding/binary"
	"hash/crc32"
)

// The on-disk record frame. Every record is one frame, written with one
// write(2) and fsync'd before Append returns:
//
//	offset  size  field
//	0       4     magic "PLS1" (0x31534c50 little-endian), for resynchronising after a corrupt frame
//	4       4     payload length, uint32 little-endian, at most MaxRecordBytes
//	8       4     CRC32C (Castagnoli) of bytes 4..8 (length), 12..16 (sequence) and the payload
//	12      8     sequence, uint64 little-endian (≥ 1)
//	20      n     payload (a serialised plumblinev1.Record)
//
// The checksum covers the length and the sequence as well as the payload, so
// a frame whose length or sequence was damaged is refused as a whole.
const (
	frameMagic     uint32 = 0x31534c50 // "PLS1"
	frameHeader           = 20
	MaxRecordBytes        = 16 << 20 // the largest payload a frame may carry
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is one spooled record: the agent's sequence number and the payload.
type Record struct {
	Seq  uint64
	Data []byte
	// Incarnation is the incarnation the sequence belongs to (set by
	// Read; "" is the legacy incarnation of spools from before them).
	Incarnation string
}

// frameSize is the on-disk size of a record with an n-byte payload.
func frameSize(n int) int64 { return int64(frameHeader + n) }

// appendFrame appends the frame of (seq, data) to b.
func appendFrame(b []byte, seq uint64, data []byte) []byte {
	var h [frameHeader]byte
	binary.LittleEndian.PutUint32(h[0:4], frameMagic)
	binary.LittleEndian.PutUint32(h[4:8], uint32(len(data)))
	binary.LittleEndian.PutUint64(h[12:20], seq)
	binary.LittleEndian.PutUint32(h[8:12], frameCRC(h[:], data))
	b = append(b, h[:]...)
	return append(b, data...)
}

func frameCRC(h []byte, data []byte) uint32 {
	c := crc32.Update(0, castagnoli, h[4:8])
	c = crc32.Update(c, castagnoli, h[12:20])
	return crc32.Update(c, castagnoli, data)
}

// frameAt checks the frame starting at off.
func frameAt(b []byte, off int) (seq uint64, n int, ok bool) {
	if len(b)-off < frameHeader {
		return 0, 0, false
	}
	h := b[off : off+frameHeader]
	if binary.LittleEndian.Uint32(h[0:4]) != frameMagic {
		return 0, 0, false
	}
	l := binary.LittleEndian.Uint32(h[4:8])
	if l > MaxRecordBytes || uint64(len(b)-off-frameHeader) < uint64(l) {
		return 0, 0, false
	}
	n = int(l)
	data := b[off+frameHeader : off+frameHeader+n]
	if binary.LittleEndian.Uint32(h[8:12]) != frameCRC(h, data) {
		return 0, 0, false
	}
	seq = binary.LittleEndian.Uint64(h[12:20])
	if seq == 0 {
		return 0, 0, false
	}
	return seq, n, true
}

func indexMagic(b []byte, from int) int {
	var m [4]byte
	binary.LittleEndian.PutUint32(m[:], frameMagic)
	for i := from; i+4 <= len(b); i++ {
		if b[i] == m[0] && b[i+1] == m[1] && b[i+2] == m[2] && b[i+3] == m[3] {
			return i
		}
	}
	return -1
}

// The segment header. Every segment written since spools carried it
// starts with two copies of it (a damaged byte in one leaves the other):
//
//	offset  size  field
//	0       4     magic "PLH1" (0x31484c50 little-endian)
//	4       4     CRC32C of bytes 8..48
//	8       8     run start: the first sequence the incarnation numbered, uint64 little-endian
//	16      32    the incarnation id, 32 lower-case hex digits
//
// Every segment is written by one run of the agent, and every run is an
// incarnation of its own: the header says which incarnation the
// segment's sequences belong to. Segments from before headers start with
// a frame (or are empty); their incarnation comes from the incarnation
// file.
const (
	headerMagic uint32 = 0x31484c50 // "PLH1"
	headerSize         = 48
	headersSize        = 2 * headerSize // both copies; the first frame follows
)

// Header is a segment header's content.
type Header struct {
	Incarnation string // 32 hex digits
	Start       uint64 // the first sequence the incarnation numbered
}

// appendHeaders appends both copies of h's header to b.
func appendHeaders(b []byte, h Header) []byte {
	var one [headerSize]byte
	binary.LittleEndian.PutUint32(one[0:4], headerMagic)
	binary.LittleEndian.PutUint64(one[8:16], h.Start)
	copy(one[16:48], h.Incarnation)
	binary.LittleEndian.PutUint32(one[4:8], crc32.Checksum(one[8:48], castagnoli))
	b = append(b, one[:]...)
	return append(b, one[:]...)
}

// parseHeader checks one header copy.
func parseHeader(b []byte) (Header, bool) {
	if len(b) < headerSize || binary.LittleEndian.Uint32(b[0:4]) != headerMagic ||
		binary.LittleEndian.Uint32(b[4:8]) != crc32.Checksum(b[8:48], castagnoli) {
		return Header{}, false
	}
	id := string(b[16:48])
	for i := 0; i < len(id); i++ {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return Header{}, false
		}
	}
	h := Header{Incarnation: id, Start: binary.LittleEndian.Uint64(b[8:16])}
	if h.Start == 0 {
		return Header{}, false
	}
	return h, true
}

// HeaderState says what a segment's header was found to be.
type HeaderState int

const (
	HeaderNone     HeaderState = iota // a segment from before headers
	HeaderOK                          // both copies good
	HeaderRepaired                    // one copy damaged, the other good
	HeaderLost                        // both copies damaged: the incarnation is unknown
)

// Region is a corrupt region of a segment: After is the last valid
// sequence before it (0: none in this segment), Tail says no valid frame
// follows it.
type Region struct {
	After uint64
	Tail  bool
}

// Segment is a parsed segment file.
type Segment struct {
	Header  Header
	State   HeaderState
	Records []Record // valid records, sequences ascending; payloads alias the input
	Corrupt []Region
}

// ParseSegment parses a segment file's bytes: its header (if it has
// one) and its frames (see ReadSegment). It never panics on any input.
func ParseSegment(b []byte) Segment {
	var sg Segment
	if hasHeaders(b) {
		h1, ok1 := parseHeader(b)
		h2, ok2 := parseHeader(b[min(len(b), headerSize):])
		switch {
		case ok1 && ok2 && h1 == h2:
			sg.Header, sg.State = h1, HeaderOK
		case ok1 || ok2:
			sg.Header, sg.State = h1, HeaderRepaired
			if !ok1 {
				sg.Header = h2
			}
		default:
			sg.State = HeaderLost
		}
		b = b[min(len(b), headersSize):]
	}
	sg.Records, sg.Corrupt = scanFrames(b)
	return sg
}

// hasHeaders says whether a segment was written with headers: either
// copy's magic where it belongs, or (both damaged) no frame magic at the
// start but one where the first frame of a headed segment begins.
func hasHeaders(b []byte) bool {
	magicAt := func(off int, m uint32) bool {
		return len(b) >= off+4 && binary.LittleEndian.Uint32(b[off:off+4]) == m
	}
	switch {
	case len(b) == 0 || magicAt(0, frameMagic):
		return false
	case magicAt(0, headerMagic) || magicAt(headerSize, headerMagic):
		return true
	}
	return len(b) <= headersSize || magicAt(headersSize, frameMagic)
}

// ReadSegment parses a segment's frames (a segment without headers, or
// the part of one after them). It returns the valid records in file
// order (sequences strictly ascending: a frame whose sequence does not
// exceed the previous valid one is refused), and the number of corrupt
// regions it skipped: a frame with a bad magic, length or checksum starts
// a region that ends at the next valid frame (found by scanning for the
// magic), and a torn tail (an incomplete last frame after a crash) is one
// region. The returned payloads alias b. It never panics on any input.
func ReadSegment(b []byte) (recs []Record, corrupt int) {
	recs, regions := scanFrames(b)
	return recs, len(regions)
}

func scanFrames(b []byte) (recs []Record, regions []Region) {
	off := 0
	var last uint64
	bad := false // inside a corrupt region
	for off < len(b) {
		seq, n, ok := frameAt(b, off)
		if ok && seq > last {
			recs = append(recs, Record{Seq: seq, Data: b[off+frameHeader : off+frameHeader+n]})
			last = seq
			off += frameHeader + n
			if bad {
				regions[len(regions)-1].Tail = false
			}
			bad = false
			continue
		}
		if !bad {
			regions = append(regions, Region{After: last, Tail: true})
			bad = true
		}
		// Resynchronise on the next magic.
		next := indexMagic(b, off+1)
		if next < 0 {
			break
		}
		off = next
	}
	return recs, regions
}
