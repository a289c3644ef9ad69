package agent

import (
	"errors"
	"hash/fnv"

	"golang.org/x/sys/windows"
)

// volumeList is the Windows mount table: the drive letters
// (GetLogicalDriveStrings) and every volume with its mount points
// (FindFirstVolume/FindNextVolume, GetVolumePathNamesForVolumeName), so
// that a new, removed or re-lettered volume or mount folder is a change.
// Windows has no file to hash; polling the list costs a few system calls.
type volumeList struct{}

var _ mountTable = volumeList{}

func newMountTable(string) mountTable { return volumeList{} }

func (volumeList) fingerprint() uint64 {
	h := fnv.New64a()
	write := func(u []uint16) {
		for _, c := range u {
			h.Write([]byte{byte(c), byte(c >> 8)})
		}
		h.Write([]byte{0, 0})
	}

	drives := make([]uint16, 512)
	n, err := windows.GetLogicalDriveStrings(uint32(len(drives)), &drives[0])
	if err != nil || n == 0 {
		return 0
	}
	if int(n) > len(drives) { // the buffer needs n characters
		drives = make([]uint16, n)
		if n, err = windows.GetLogicalDriveStrings(uint32(len(drives)), &drives[0]); err != nil || int(n) > len(drives) {
			return 0
		}
	}
	write(drives[:n])

	buf := make([]uint16, windows.MAX_PATH+1)
	fv, err := windows.FindFirstVolume(&buf[0], uint32(len(buf)))
	if err != nil {
		return 0
	}
	defer windows.FindVolumeClose(fv)
	for {
		write(buf[:windowsStringLen(buf)])
		write(volumePathNames(&buf[0]))
		if err := windows.FindNextVolume(fv, &buf[0], uint32(len(buf))); err != nil {
			if errors.Is(err, windows.ERROR_NO_MORE_FILES) {
				break
			}
			return 0
		}
	}
	return h.Sum64()
}

// volumePathNames is GetVolumePathNamesForVolumeName's NUL-separated list
// of the volume's drive letters and mount folders; nil when it fails.
func volumePathNames(volume *uint16) []uint16 {
	var need uint32
	names := make([]uint16, 256)
	err := windows.GetVolumePathNamesForVolumeName(volume, &names[0], uint32(len(names)), &need)
	if errors.Is(err, windows.ERROR_MORE_DATA) && need > 0 {
		names = make([]uint16, need)
		err = windows.GetVolumePathNamesForVolumeName(volume, &names[0], uint32(len(names)), &need)
	}
	if err != nil {
		return nil
	}
	return names[:min(int(need), len(names))]
}

// windowsStringLen is the length of a NUL-terminated UTF-16 string.
func windowsStringLen(u []uint16) int {
	for i, c := range u {
		if c == 0 {
			return i
		}
	}
	return len(u)
}
