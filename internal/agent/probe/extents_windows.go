package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/windows"
)

// procGetDiskFreeSpaceW gives the cluster size (sectors per cluster ×
// bytes per sector) of a volume by its root path; golang.org/x/sys has only
// the Ex variant, which does not.
var procGetDiskFreeSpaceW = windows.NewLazySystemDLL("kernel32.dll").NewProc("GetDiskFreeSpaceW")

// retrievalBatch is the output buffer of one FSCTL_GET_RETRIEVAL_POINTERS
// call, in runs.
const retrievalBatch = 256

// extents maps the open probe file onto its volume with
// FSCTL_GET_RETRIEVAL_POINTERS on the probe's own handle, LCNs times the
// volume's cluster size. Offsets are counted from the start of the volume
// (the partition), as FIEMAP's are from the file system's block device.
func (f *winFile) extents() ([]Extent, error) {
	cluster, err := clusterSize(f.path)
	if err != nil {
		return nil, err
	}
	var all []Extent
	var vcn int64
	out := make([]byte, retrievalHeaderSize+retrievalBatch*retrievalExtentSize)
	for {
		n, err := f.retrievalPointers(vcn, out)
		more := errors.Is(err, windows.ERROR_MORE_DATA)
		if errors.Is(err, windows.ERROR_HANDLE_EOF) {
			return normalizeExtents(all)
		}
		if err != nil && !more {
			return nil, fmt.Errorf("FSCTL_GET_RETRIEVAL_POINTERS: %w", err)
		}
		ext, next, err := decodeRetrievalPointers(out[:n], cluster)
		if err != nil {
			return nil, err
		}
		all = append(all, ext...)
		if len(all) > MaxExtents {
			return nil, fmt.Errorf("%w: more than %d extents", errExtents, MaxExtents)
		}
		if !more || next <= vcn {
			return normalizeExtents(all)
		}
		vcn = next
	}
}

// retrievalPointers issues one FSCTL_GET_RETRIEVAL_POINTERS from vcn into
// out. The probe's handle is overlapped, so the call is too.
func (f *winFile) retrievalPointers(vcn int64, out []byte) (uint32, error) {
	in := make([]byte, 8)
	binary.LittleEndian.PutUint64(in, uint64(vcn))
	ev, err := f.event()
	if err != nil {
		return 0, err
	}
	defer f.putEvent(ev)
	windows.ResetEvent(ev)
	ov := windows.Overlapped{HEvent: ev}
	var n uint32
	err = windows.DeviceIoControl(f.h, windows.FSCTL_GET_RETRIEVAL_POINTERS, &in[0], uint32(len(in)), &out[0], uint32(len(out)), &n, &ov)
	if errors.Is(err, windows.ERROR_IO_PENDING) {
		err = windows.GetOverlappedResult(f.h, &ov, &n, true)
	}
	return n, err
}

// clusterSize is the allocation unit of the volume holding path.
func clusterSize(path string) (int64, error) {
	p16, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return 0, err
	}
	root := make([]uint16, windows.MAX_PATH+1)
	if err := windows.GetVolumePathName(p16, &root[0], uint32(len(root))); err != nil {
		return 0, fmt.Errorf("GetVolumePathName %s: %w", path, err)
	}
	var spc, bps, free, total uint32
	r, _, e := procGetDiskFreeSpaceW.Call(uintptr(unsafe.Pointer(&root[0])), uintptr(unsafe.Pointer(&spc)), uintptr(unsafe.Pointer(&bps)), uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total)))
	if r == 0 {
		return 0, fmt.Errorf("GetDiskFreeSpaceW %s: %w", windows.UTF16ToString(root), e)
	}
	return int64(spc) * int64(bps), nil
}
