package probe

// Where the probe file lies on its device: the decoders of Linux's
// FS_IOC_FIEMAP and Windows' FSCTL_GET_RETRIEVAL_POINTERS output, OS-neutral
// so that both are tested (and fuzzed) on captured bytes everywhere.
// extents_linux.go and extents_windows.go issue the calls on the probe's own
// open file; nothing else is opened.

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/plumbline/plumbline/internal/stripescan"
)

// Extent is a run of the probe file that is contiguous on the device under
// its file system: file bytes [Logical, Logical+Length) are device bytes
// [Physical, Physical+Length), Physical counted from the start of the file
// system's block device (the partition or logical volume, not the disk).
type Extent = stripescan.Extent

// MaxExtents bounds what one map holds: a probe file is written once in
// full and sequentially, so it has few extents (ext4: one per 128 MiB); a
// map beyond this is refused rather than grown.
const MaxExtents = 1 << 16

// errExtents is wrapped by every decoding error.
var errExtents = errors.New("extent map")

// The layout of struct fiemap and struct fiemap_extent (linux/fiemap.h).
const (
	fiemapHeaderSize = 32 // fm_start, fm_length u64; fm_flags, fm_mapped_extents, fm_extent_count, fm_reserved u32
	fiemapExtentSize = 56 // fe_logical, fe_physical, fe_length u64; fe_reserved64[2]; fe_flags u32; fe_reserved[3]

	fiemapFlagSync = 0x1 // FIEMAP_FLAG_SYNC: flush delayed allocation first

	fiemapExtentLast = 0x1 // FIEMAP_EXTENT_LAST
	// Extents whose device bytes a read does not reach, or whose physical
	// offset is not where the data is: unknown or delayed location,
	// encoded (compressed) or encrypted data, not block-aligned, inline or
	// tail-packed data, unwritten (preallocated: reads return zeros
	// without touching the device).
	fiemapExtentSkip = 0x2 | 0x4 | 0x8 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800
)

// fiemapRequest is a struct fiemap asking for up to count extents of the
// file bytes from start on, with room for the answer.
func fiemapRequest(start int64, count int) []byte {
	b := make([]byte, fiemapHeaderSize+count*fiemapExtentSize)
	le := binary.LittleEndian
	le.PutUint64(b[0:], uint64(start))
	le.PutUint64(b[8:], ^uint64(0)) // FIEMAP_MAX_OFFSET: to the end
	le.PutUint32(b[16:], fiemapFlagSync)
	le.PutUint32(b[24:], uint32(count))
	return b
}

// decodeFiemap decodes the answer to one FS_IOC_FIEMAP call (little
// endian: the layout is the host's, and every Linux Plumbline builds for is
// little endian). It returns the usable extents, whether the last extent of
// the file was among them, and the file offset after the last extent seen
// (where the next call starts).
func decodeFiemap(b []byte) (ext []Extent, last bool, next int64, err error) {
	if len(b) < fiemapHeaderSize {
		return nil, false, 0, fmt.Errorf("%w: fiemap: %d bytes, want at least %d", errExtents, len(b), fiemapHeaderSize)
	}
	le := binary.LittleEndian
	mapped, count := le.Uint32(b[20:]), le.Uint32(b[24:])
	if mapped > count || int64(mapped) > int64(len(b)-fiemapHeaderSize)/fiemapExtentSize {
		return nil, false, 0, fmt.Errorf("%w: fiemap: %d extents mapped, room for %d in %d bytes", errExtents, mapped, count, len(b))
	}
	for i := range int(mapped) {
		e := b[fiemapHeaderSize+i*fiemapExtentSize:]
		logical, physical, length := le.Uint64(e[0:]), le.Uint64(e[8:]), le.Uint64(e[16:])
		flags := le.Uint32(e[40:])
		if logical > 1<<62 || physical > 1<<62 || length > 1<<62-logical {
			return nil, false, 0, fmt.Errorf("%w: fiemap extent %d: offset or length beyond 2^62", errExtents, i)
		}
		if end := int64(logical + length); end > next {
			next = end
		}
		last = last || flags&fiemapExtentLast != 0
		if flags&fiemapExtentSkip != 0 || length == 0 {
			continue
		}
		ext = append(ext, Extent{Logical: int64(logical), Physical: int64(physical), Length: int64(length)})
	}
	return ext, last || mapped == 0, next, nil
}

// The layout of RETRIEVAL_POINTERS_BUFFER (winioctl.h): ExtentCount u32,
// 4 bytes of padding, StartingVcn i64, then ExtentCount × {NextVcn, Lcn}.
const (
	retrievalHeaderSize = 16
	retrievalExtentSize = 16
)

// decodeRetrievalPointers decodes one FSCTL_GET_RETRIEVAL_POINTERS answer
// into extents in bytes: clusters × clusterSize, LCNs counted from the start
// of the volume. Virtual (sparse, LCN −1) and compressed runs are left out.
// next is the VCN after the last run, where a call that ended with
// ERROR_MORE_DATA continues.
func decodeRetrievalPointers(b []byte, clusterSize int64) (ext []Extent, next int64, err error) {
	if clusterSize <= 0 || clusterSize > 1<<21 || clusterSize&(clusterSize-1) != 0 {
		return nil, 0, fmt.Errorf("%w: cluster size %d: want a power of two up to 2 MiB", errExtents, clusterSize)
	}
	if len(b) < retrievalHeaderSize {
		return nil, 0, fmt.Errorf("%w: retrieval pointers: %d bytes, want at least %d", errExtents, len(b), retrievalHeaderSize)
	}
	le := binary.LittleEndian
	n := le.Uint32(b[0:])
	vcn := int64(le.Uint64(b[8:]))
	if int64(n) > int64(len(b)-retrievalHeaderSize)/retrievalExtentSize {
		return nil, 0, fmt.Errorf("%w: retrieval pointers: %d extents in %d bytes", errExtents, n, len(b))
	}
	const maxVCN = 1 << 40 // 2^40 clusters × 2 MiB = 2^61 bytes
	for i := range int(n) {
		e := b[retrievalHeaderSize+i*retrievalExtentSize:]
		nextVCN, lcn := int64(le.Uint64(e[0:])), int64(le.Uint64(e[8:]))
		if vcn < 0 || nextVCN <= vcn || nextVCN > maxVCN || lcn < -1 || lcn > maxVCN {
			return nil, 0, fmt.Errorf("%w: retrieval pointers run %d: VCN %d to %d at LCN %d", errExtents, i, vcn, nextVCN, lcn)
		}
		if lcn >= 0 {
			ext = append(ext, Extent{Logical: vcn * clusterSize, Physical: lcn * clusterSize, Length: (nextVCN - vcn) * clusterSize})
		}
		vcn = nextVCN
	}
	return ext, vcn, nil
}

// normalizeExtents sorts ext by file offset, merges runs that are
// contiguous in both spaces and refuses overlapping runs.
func normalizeExtents(ext []Extent) ([]Extent, error) {
	ext = slices.Clone(ext)
	slices.SortFunc(ext, func(a, b Extent) int { return cmp.Compare(a.Logical, b.Logical) })
	out := ext[:0]
	for _, e := range ext {
		if n := len(out); n > 0 {
			p := &out[n-1]
			if e.Logical < p.Logical+p.Length {
				return nil, fmt.Errorf("%w: runs at file offsets %d and %d overlap", errExtents, p.Logical, e.Logical)
			}
			if e.Logical == p.Logical+p.Length && e.Physical == p.Physical+p.Length {
				p.Length += e.Length
				continue
			}
		}
		out = append(out, e)
	}
	return out, nil
}
