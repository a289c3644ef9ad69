package probe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"
)

// The probe file starts with a header block that proves Plumbline made the
// file. Layout (little endian), inside the first headerBlock bytes:
//
//	0   [16]byte magic "PLUMBLINE PROBE\n"
//	16  uint32   format version (1)
//	20  uint32   header region size (HeaderSize)
//	24  uint64   file size the file was filled to
//	32  uint32   state: 1 filling, 2 ready
//	36  uint32   reserved (0)
//	40  int64    creation time, Unix nanoseconds
//	48  [16]byte random file id
//	64  uint32   CRC-32C of bytes 0..63
//	128 ...      a human-readable note, NUL-padded
//
// The rest of the header region (up to HeaderSize) is never read or written
// by probes.
const (
	headerBlock   = 4096
	headerVersion = 1
	headerFixed   = 68
	noteOffset    = 128
)

var headerMagic = [16]byte{'P', 'L', 'U', 'M', 'B', 'L', 'I', 'N', 'E', ' ', 'P', 'R', 'O', 'B', 'E', '\n'}

const headerNote = "This file was created by the Plumbline agent as its I/O probe file.\n" +
	"It holds no data. Remove it with: agent probe --cleanup --dir <this directory>\n"

// fileState is the fill state recorded in the header.
type fileState uint32

const (
	stateFilling fileState = 1 // created or resized, not yet written in full
	stateReady   fileState = 2 // written in full: probes may run
)

// header is the decoded header block.
type header struct {
	FileSize int64
	State    fileState
	Created  time.Time
	ID       [16]byte
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errHeader is wrapped by every parseHeader failure.
var errHeader = errors.New("bad probe file header")

// marshal encodes h into a headerBlock-sized block.
func (h header) marshal() []byte {
	b := make([]byte, headerBlock)
	h.marshalInto(b)
	return b
}

func (h header) marshalInto(b []byte) {
	clear(b[:headerBlock])
	copy(b, headerMagic[:])
	le := binary.LittleEndian
	le.PutUint32(b[16:], headerVersion)
	le.PutUint32(b[20:], HeaderSize)
	le.PutUint64(b[24:], uint64(h.FileSize))
	le.PutUint32(b[32:], uint32(h.State))
	le.PutUint64(b[40:], uint64(h.Created.UnixNano()))
	copy(b[48:64], h.ID[:])
	le.PutUint32(b[64:], crc32.Checksum(b[:64], castagnoli))
	copy(b[noteOffset:], headerNote)
}

// parseHeader decodes and checks a header block read from outside bytes.
func parseHeader(b []byte) (header, error) {
	if len(b) < headerFixed {
		return header{}, fmt.Errorf("%w: %d bytes, want at least %d", errHeader, len(b), headerFixed)
	}
	if !bytes.Equal(b[:16], headerMagic[:]) {
		return header{}, fmt.Errorf("%w: no Plumbline magic", errHeader)
	}
	le := binary.LittleEndian
	if got, want := le.Uint32(b[64:]), crc32.Checksum(b[:64], castagnoli); got != want {
		return header{}, fmt.Errorf("%w: checksum %08x, want %08x", errHeader, got, want)
	}
	if v := le.Uint32(b[16:]); v != headerVersion {
		return header{}, fmt.Errorf("%w: format version %d, this agent knows %d", errHeader, v, headerVersion)
	}
	if hs := le.Uint32(b[20:]); hs != HeaderSize {
		return header{}, fmt.Errorf("%w: header size %d, want %d", errHeader, hs, HeaderSize)
	}
	h := header{
		FileSize: int64(le.Uint64(b[24:])),
		State:    fileState(le.Uint32(b[32:])),
		Created:  time.Unix(0, int64(le.Uint64(b[40:]))).UTC(),
	}
	copy(h.ID[:], b[48:64])
	if h.FileSize < 2*HeaderSize || h.FileSize%HeaderSize != 0 {
		return header{}, fmt.Errorf("%w: file size %d", errHeader, h.FileSize)
	}
	if h.State != stateFilling && h.State != stateReady {
		return header{}, fmt.Errorf("%w: state %d", errHeader, h.State)
	}
	return h, nil
}
