package geometry

// The live Windows host as a winSource: the Win32 volume APIs, IOCTLs on
// handles opened with access 0 (no administrator rights needed, except
// that NTFS refuses FSCTL_GET_NTFS_VOLUME_DATA to non-administrators, in
// which case GetDiskFreeSpace gives the cluster size), and the Storage WMI
// namespace through COM (github.com/yusufpapurcu/wmi over go-ole: no cgo,
// and no child process: the agent never runs another program).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/yusufpapurcu/wmi"
	"golang.org/x/sys/windows"
)

// recorder is the capture hook of Linux discovery; Windows has none.
type recorder interface{}

func discover(ctx context.Context, opts Options, rec recorder) (Result, error) {
	return discoverWindows(ctx, opts, win32Source{})
}

type win32Source struct{}

var _ winSource = win32Source{}

var (
	modkernel32          = windows.NewLazySystemDLL("kernel32.dll")
	procGetDiskFreeSpace = modkernel32.NewProc("GetDiskFreeSpaceW")
)

func (win32Source) volumes(ctx context.Context) ([]winVolume, error) {
	buf := make([]uint16, windows.MAX_PATH+1)
	h, err := windows.FindFirstVolume(&buf[0], uint32(len(buf)))
	if err != nil {
		return nil, fmt.Errorf("FindFirstVolume: %w", err)
	}
	defer windows.FindVolumeClose(h)
	var out []winVolume
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out = append(out, readVolume(windows.UTF16ToString(buf)))
		if err := windows.FindNextVolume(h, &buf[0], uint32(len(buf))); err != nil {
			if errors.Is(err, windows.ERROR_NO_MORE_FILES) {
				return out, nil
			}
			return nil, fmt.Errorf("FindNextVolume: %w", err)
		}
	}
}

// readVolume gathers the Win32 facts of one volume GUID path (\\?\Volume{...}\).
func readVolume(guidPath string) winVolume {
	v := winVolume{GUIDPath: guidPath}
	p16, _ := windows.UTF16PtrFromString(guidPath)
	v.DriveType = windows.GetDriveType(p16)

	// QueryDosDevice wants Volume{...} without \\?\ and the trailing \.
	name := strings.TrimSuffix(strings.TrimPrefix(guidPath, `\\?\`), `\`)
	if n16, err := windows.UTF16PtrFromString(name); err == nil {
		dev := make([]uint16, windows.MAX_PATH)
		if n, err := windows.QueryDosDevice(n16, &dev[0], uint32(len(dev))); err == nil && n > 0 {
			v.NTDevice = windows.UTF16ToString(dev)
		}
	}

	var need uint32
	names := make([]uint16, 1024)
	err := windows.GetVolumePathNamesForVolumeName(p16, &names[0], uint32(len(names)), &need)
	if errors.Is(err, windows.ERROR_MORE_DATA) {
		names = make([]uint16, need)
		err = windows.GetVolumePathNamesForVolumeName(p16, &names[0], uint32(len(names)), &need)
	}
	if err == nil {
		// A list of NUL-terminated strings ending with an empty one.
		for start, i := 0, 0; i < len(names); i++ {
			if names[i] == 0 {
				if i == start {
					break
				}
				v.MountPoints = append(v.MountPoints, windows.UTF16ToString(names[start:i]))
				start = i + 1
			}
		}
	}
	if (v.DriveType == driveUnknown || v.DriveType == driveNoRootDir) && len(v.MountPoints) > 0 {
		if m16, err := windows.UTF16PtrFromString(v.mountPoint()); err == nil {
			v.MountDriveType = windows.GetDriveType(m16)
		}
	}

	label := make([]uint16, windows.MAX_PATH+1)
	fsName := make([]uint16, windows.MAX_PATH+1)
	var serial, maxComp, flags uint32
	if err := windows.GetVolumeInformation(p16, &label[0], uint32(len(label)), &serial, &maxComp, &flags, &fsName[0], uint32(len(fsName))); err != nil {
		v.InfoError = err.Error()
	} else {
		v.Label, v.FSName, v.SerialNumber = windows.UTF16ToString(label), windows.UTF16ToString(fsName), serial
	}

	var spc, bps, free, total uint32
	r, _, callErr := procGetDiskFreeSpace.Call(uintptr(unsafe.Pointer(p16)),
		uintptr(unsafe.Pointer(&spc)), uintptr(unsafe.Pointer(&bps)), uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total)))
	if r == 0 {
		v.FreeSpaceError = callErr.Error()
	} else {
		v.SectorsPerCluster, v.BytesPerSector, v.TotalClusters = spc, bps, total
	}
	var avail, totalBytes, totalFree uint64
	if windows.GetDiskFreeSpaceEx(p16, &avail, &totalBytes, &totalFree) == nil {
		v.TotalBytes = totalBytes
	}
	return v
}

// openDevice opens a volume or disk with access 0 (query only) and full
// sharing, so that no lock is taken and no right beyond a user's is needed.
func openDevice(p string) (windows.Handle, error) {
	p16, err := windows.UTF16PtrFromString(p)
	if err != nil {
		return windows.InvalidHandle, err
	}
	h, err := windows.CreateFile(p16, 0,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE,
		nil, windows.OPEN_EXISTING, 0, 0)
	if err != nil {
		return windows.InvalidHandle, fmt.Errorf("open %s: %w", p, err)
	}
	return h, nil
}

// ioctl sends code and grows the output buffer while the driver says it is
// too small.
func ioctl(p string, code uint32, in []byte) ([]byte, error) {
	h, err := openDevice(p)
	if err != nil {
		return nil, err
	}
	defer windows.CloseHandle(h)
	var inPtr *byte
	if len(in) > 0 {
		inPtr = &in[0]
	}
	size := 4096
	for range 8 {
		out := make([]byte, size)
		var n uint32
		err := windows.DeviceIoControl(h, code, inPtr, uint32(len(in)), &out[0], uint32(len(out)), &n, nil)
		switch {
		case err == nil:
			return out[:n], nil
		case errors.Is(err, windows.ERROR_MORE_DATA), errors.Is(err, windows.ERROR_INSUFFICIENT_BUFFER):
			size *= 4
		default:
			return nil, err
		}
	}
	return nil, fmt.Errorf("output larger than %d bytes", size)
}

func (win32Source) volumeIoctl(v winVolume, code uint32, in []byte) ([]byte, error) {
	// CreateFile opens the volume itself without the trailing backslash
	// (with it, the root directory).
	return ioctl(strings.TrimSuffix(v.GUIDPath, `\`), code, in)
}

func (win32Source) diskIoctl(disk uint32, code uint32, in []byte) ([]byte, error) {
	return ioctl(`\\.\`+physicalDriveName(disk), code, in)
}

// storageNamespace is the Storage Management API's WMI namespace.
const storageNamespace = `root\Microsoft\Windows\Storage`

// storageWMI reads the Storage namespace: fields it does not know are left
// zero, and NULL pointer fields stay nil (MSFT_Disk.Number of a disk
// without a number).
var storageWMI = &wmi.Client{AllowMissingFields: true, PtrNil: true, NonePtrZero: true}

// queryStorage runs one WQL query in the Storage namespace; a field
// mismatch (a property the class lacks on this Windows version) is no
// failure.
func queryStorage(ctx context.Context, q string, dst any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := storageWMI.Query(q, dst, nil, storageNamespace)
	var mismatch *wmi.ErrFieldMismatch
	if errors.As(err, &mismatch) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("WMI %s: %w", q, err)
	}
	return nil
}

// virtualDisks reads MSFT_VirtualDisk, MSFT_Disk and the
// MSFT_VirtualDiskToDisk association between them, and joins them
// (joinVirtualDisks). Only called when a disk reports BusTypeSpaces.
func (win32Source) virtualDisks(ctx context.Context) ([]spacesVirtualDisk, error) {
	var vds []msftVirtualDisk
	if err := queryStorage(ctx, wmi.CreateQuery(&vds, "", "MSFT_VirtualDisk"), &vds); err != nil {
		return nil, err
	}
	var disks []msftDisk
	if err := queryStorage(ctx, wmi.CreateQuery(&disks, "", "MSFT_Disk"), &disks); err != nil {
		return nil, err
	}
	// The association is the documented link; when the provider will not
	// enumerate it, the join falls back to the surfaced disk's UniqueId.
	var links []msftVirtualDiskToDisk
	if err := queryStorage(ctx, wmi.CreateQuery(&links, "", "MSFT_VirtualDiskToDisk"), &links); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		links = nil
	}
	return joinVirtualDisks(vds, disks, links), nil
}
