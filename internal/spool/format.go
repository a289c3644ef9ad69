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

// ReadSegment parses a segment's bytes. It returns the valid records in file
// order (sequences strictly ascending: a frame whose sequence does not exceed
// the previous valid one is refused), and the number of corrupt regions it
// skipped: a frame with a bad magic, length or checksum starts a region
// that ends at the next valid frame (found by scanning for the magic), and
// a torn tail (an incomplete last frame after a crash) is one region.
// The returned payloads alias b. It never panics on any input.
func ReadSegment(b []byte) (recs []Record, corrupt int) {
	off := 0
	var last uint64
	bad := false // inside a corrupt region
	for off < len(b) {
		seq, n, ok := frameAt(b, off)
		if ok && seq > last {
			recs = append(recs, Record{Seq: seq, Data: b[off+frameHeader : off+frameHeader+n]})
			last = seq
			off += frameHeader + n
			bad = false
			continue
		}
		if !bad {
			corrupt++
			bad = true
		}
		// Resynchronise on the next magic.
		next := indexMagic(b, off+1)
		if next < 0 {
			break
		}
		off = next
	}
	return recs, corrupt
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
