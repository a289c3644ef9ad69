package geometry

// Windows discovery, OS-neutral half: everything from the raw answers of
// the Win32 volume APIs, the IOCTLs and the Storage WMI namespace to
// Volumes and Layers. The answers come through winSource; on Windows it is
// the live host (discover_windows.go), in tests a fixture-backed fake
// (winvol_test.go, testdata/windows).
//
// File names: OS-neutral Windows code starts with "win" and has no build
// constraint, so it compiles and is fixture-tested on every OS: winvol*.go
// (volumes; _disk, _dynamic, _spaces by what they read), winioctl*.go
// (IOCTL layouts and decoders), winhost.go. Code that calls Windows ends
// in "_windows.go" (Go's build constraint): discover_windows.go,
// host_windows.go. No file is both.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/internal/mounts"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// Sources of values that only Windows discovery uses (vocab.SourceWin32,
// vocab.SourceWMI say what each is).
const (
	SourceWin32 = string(vocab.SourceWin32)
	SourceWMI   = string(vocab.SourceWMI)
)

// GetDriveType's answers that matter here.
const (
	driveUnknown   = 0 // DRIVE_UNKNOWN
	driveNoRootDir = 1 // DRIVE_NO_ROOT_DIR: the path names no volume root
	driveFixed     = 3 // DRIVE_FIXED
)

// winSource is what Windows discovery reads. Each IOCTL answer is the raw
// output buffer; decoding is this package's (winioctl_decode.go).
type winSource interface {
	// volumes lists the volumes (FindFirstVolume/FindNextVolume) with
	// their mount points and Win32 facts.
	volumes(ctx context.Context) ([]winVolume, error)
	// volumeIoctl sends code with input in to the volume (opened with
	// access 0, share read/write/delete) and returns the output buffer.
	volumeIoctl(v winVolume, code uint32, in []byte) ([]byte, error)
	// diskIoctl does the same on \\.\PhysicalDrive<disk>.
	diskIoctl(disk uint32, code uint32, in []byte) ([]byte, error)
	// virtualDisks returns the Storage Spaces virtual disks
	// (MSFT_VirtualDisk joined with the MSFT_Disk each one surfaces as).
	virtualDisks(ctx context.Context) ([]spacesVirtualDisk, error)
}

// winVolume is one volume as the Win32 volume APIs describe it.
type winVolume struct {
	// GUIDPath is the volume GUID path, \\?\Volume{...}\.
	GUIDPath string `json:"guid_path"`
	// NTDevice is QueryDosDevice's answer, \Device\HarddiskVolume3.
	NTDevice    string   `json:"nt_device,omitempty"`
	MountPoints []string `json:"mount_points"`
	DriveType   uint32   `json:"drive_type"` // GetDriveType of the GUID path
	// MountDriveType is GetDriveType of the first mount point, asked only
	// when the GUID path's answer is DRIVE_UNKNOWN or DRIVE_NO_ROOT_DIR
	// (some implementations, Wine among them, do not resolve GUID paths).
	MountDriveType uint32 `json:"mount_drive_type,omitempty"`
	// GetVolumeInformation; InfoError when it failed.
	FSName       string `json:"fs_name"`
	Label        string `json:"label,omitempty"`
	SerialNumber uint32 `json:"serial_number"`
	InfoError    string `json:"info_error,omitempty"`
	// GetDiskFreeSpace; FreeSpaceError when it failed.
	SectorsPerCluster uint32 `json:"sectors_per_cluster"`
	BytesPerSector    uint32 `json:"bytes_per_sector"`
	TotalClusters     uint32 `json:"total_clusters"`
	FreeSpaceError    string `json:"free_space_error,omitempty"`
	// GetDiskFreeSpaceEx total bytes (GetDiskFreeSpace caps clusters at 2^32-1).
	TotalBytes uint64 `json:"total_bytes"`
}

// The Storage WMI namespace (root\Microsoft\Windows\Storage) rows that
// win32Source.virtualDisks reads, one struct per class with the WMI
// property names as field names (github.com/yusufpapurcu/wmi loads
// properties by field name), and the join into spacesVirtualDisk, which
// is OS-neutral so that it is tested on Linux.

// winDiscoverer builds Volumes from a winSource.
type winDiscoverer struct {
	opts         Options
	src          winSource
	disks        map[uint32]*plumblinev1.Layer
	spaces       []spacesVirtualDisk
	spacesErr    error
	spacesLoaded bool
	declaredUsed []bool
	warnings     []string
}

// discoverWindows is Windows discovery over any winSource.
func discoverWindows(ctx context.Context, opts Options, src winSource) (Result, error) {
	d := &winDiscoverer{opts: opts, src: src, disks: map[uint32]*plumblinev1.Layer{}, declaredUsed: make([]bool, len(opts.Declared))}
	vols, err := src.volumes(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("list volumes: %w: %w", ErrRoot, err)
	}
	var res Result
	for _, v := range vols {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		if len(v.MountPoints) > 0 && (v.driveType() == driveUnknown || v.driveType() == driveNoRootDir) {
			d.warnings = append(d.warnings, fmt.Sprintf("volume %s (%s) skipped: Windows reports its drive type as unknown (GetDriveType %d, mount point %d)",
				v.mountPoint(), v.GUIDPath, v.DriveType, v.MountDriveType))
		}
		if !d.selected(v) {
			continue
		}
		res.Volumes = append(res.Volumes, d.volume(ctx, v))
	}
	for i, decl := range opts.Declared {
		if !d.declaredUsed[i] {
			d.warnings = append(d.warnings, fmt.Sprintf("declared device %s is beneath no discovered volume (or names no disk)", declaredLabel(decl)))
		}
	}
	res.Warnings = d.warnings
	return res, nil
}

// mountPoint is the volume's reported mount point: its first drive
// letter, else its shortest mount folder.
func (v winVolume) mountPoint() string {
	mps := slices.Clone(v.MountPoints)
	sort.Slice(mps, func(i, j int) bool {
		if len(mps[i]) != len(mps[j]) {
			return len(mps[i]) < len(mps[j])
		}
		return mps[i] < mps[j]
	})
	if len(mps) == 0 {
		return ""
	}
	return mps[0]
}

func (v winVolume) fsType() string { return strings.ToLower(v.FSName) }

// driveType is the volume's drive type: the GUID path's, or the mount
// point's where the GUID path's is unknown.
func (v winVolume) driveType() uint32 {
	if v.DriveType == driveUnknown || v.DriveType == driveNoRootDir {
		return v.MountDriveType
	}
	return v.DriveType
}

func (d *winDiscoverer) selected(v winVolume) bool {
	if v.driveType() != driveFixed || len(v.MountPoints) == 0 {
		return false
	}
	o := d.opts
	match := func(globs []string) bool {
		for _, mp := range v.MountPoints {
			if matchWindowsMount(globs, mp) {
				return true
			}
		}
		return false
	}
	if len(o.IncludeMountPoints) > 0 && !match(o.IncludeMountPoints) {
		return false
	}
	if match(o.ExcludeMountPoints) {
		return false
	}
	if len(o.IncludeFSTypes) > 0 && !slices.Contains(o.IncludeFSTypes, v.fsType()) {
		return false
	}
	return !slices.Contains(o.ExcludeFSTypes, v.fsType())
}

// matchWindowsMount reports whether any glob matches the Windows mount
// point mp (mounts.MatchGlob).
func matchWindowsMount(globs []string, mp string) bool {
	for _, g := range globs {
		if mounts.MatchGlob(g, mp) {
			return true
		}
	}
	return false
}

// volume builds one Volume: the file-system layer, then what lies under it.
func (d *winDiscoverer) volume(ctx context.Context, v winVolume) *plumblinev1.Volume {
	fsl := d.filesystemLayer(v)
	vol := &plumblinev1.Volume{MountPoint: v.mountPoint(), Device: v.GUIDPath, Layers: []*plumblinev1.Layer{fsl}}
	vol.Layers = append(vol.Layers, d.below(ctx, v, fsl)...)
	vol.Filesystem = &plumblinev1.Filesystem{
		Type:           fsl.FsType,
		BlockSizeBytes: fsl.BlockSizeBytes,
		Uuid:           fsl.Uuid,
		SizeBytes:      fsl.SizeBytes,
		Sources:        map[string]string{},
	}
	for _, f := range []string{"fs_type", "block_size_bytes", "uuid", "size_bytes"} {
		if s, ok := fsl.Sources[f]; ok {
			name := f
			if f == "fs_type" {
				name = "type"
			}
			vol.Filesystem.Sources[name] = s
		}
	}
	for _, u := range fsl.Unknown {
		if u.Field == "below" || u.Field == "offset_bytes" {
			continue
		}
		vol.Filesystem.Unknown = append(vol.Filesystem.Unknown, proto.Clone(u).(*plumblinev1.Unknown))
	}
	return vol
}

// filesystemLayer: type from GetVolumeInformation; cluster, size and
// serial from FSCTL_GET_NTFS_VOLUME_DATA / FSCTL_GET_REFS_VOLUME_DATA,
// else from GetDiskFreeSpace (sectors per cluster × bytes per sector).
func (d *winDiscoverer) filesystemLayer(v winVolume) *plumblinev1.Layer {
	l := &plumblinev1.Layer{
		Kind:        KindFilesystem,
		Device:      v.GUIDPath,
		Name:        v.Label,
		OffsetBytes: proto.Uint64(0),
		Source:      SourceWin32,
		Sources:     map[string]string{"offset_bytes": SourceWin32},
	}
	if v.Label != "" {
		l.Sources["name"] = SourceWin32
	}
	if v.InfoError != "" {
		addUnknown(l, "fs_type", "GetVolumeInformation: "+v.InfoError)
	} else {
		l.FsType = v.fsType()
		l.Sources["fs_type"] = SourceWin32
	}

	var fsctl uint32
	var decode func([]byte) (fsVolumeData, error)
	switch l.FsType {
	case "ntfs":
		fsctl, decode = fsctlGetNTFSVolumeData, decodeNTFSVolumeData
	case "refs":
		fsctl, decode = fsctlGetReFSVolumeData, decodeReFSVolumeData
	}
	var fsctlErr string
	if decode != nil {
		b, err := d.src.volumeIoctl(v, fsctl, nil)
		var data fsVolumeData
		if err == nil {
			data, err = decode(b)
		}
		if err == nil {
			l.Source = SourceIoctl
			l.BlockSizeBytes = data.BytesPerCluster
			l.SizeBytes = data.sizeBytes()
			l.Uuid = fmt.Sprintf("%016X", data.SerialNumber)
			for _, f := range []string{"block_size_bytes", "size_bytes", "uuid"} {
				l.Sources[f] = SourceIoctl
			}
		} else {
			fsctlErr = ioctlName(fsctl) + ": " + err.Error()
		}
	}
	if l.BlockSizeBytes == 0 {
		switch {
		case v.FreeSpaceError != "":
			why := "GetDiskFreeSpace: " + v.FreeSpaceError
			if fsctlErr != "" {
				why = fsctlErr + "; " + why
			}
			addUnknown(l, "block_size_bytes", why)
		case v.SectorsPerCluster == 0 || !validSector(v.BytesPerSector):
			addUnknown(l, "block_size_bytes", fmt.Sprintf("GetDiskFreeSpace: %d sectors per cluster of %d bytes", v.SectorsPerCluster, v.BytesPerSector))
		default:
			l.BlockSizeBytes = v.SectorsPerCluster * v.BytesPerSector
			l.Sources["block_size_bytes"] = SourceWin32
		}
	}
	if l.SizeBytes == 0 && v.TotalBytes > 0 {
		l.SizeBytes = v.TotalBytes
		l.Sources["size_bytes"] = SourceWin32
	}
	if l.Uuid == "" && v.InfoError == "" && v.SerialNumber != 0 {
		l.Uuid = fmt.Sprintf("%04X-%04X", v.SerialNumber>>16, v.SerialNumber&0xffff)
		l.Sources["uuid"] = SourceWin32
	}
	addUnknown(l, "stripe_unit_bytes", l.FsType+" has no stripe hints")
	addUnknown(l, "stripe_width_bytes", l.FsType+" has no stripe hints")
	return l
}

// below returns the layers under the file system: a basic partition and
// its disk, or a dynamic volume's layer and its disks.
func (d *winDiscoverer) below(ctx context.Context, v winVolume, fsl *plumblinev1.Layer) []*plumblinev1.Layer {
	b, err := d.src.volumeIoctl(v, ioctlVolumeGetVolumeDiskExtents, nil)
	var extents []diskExtent
	if err == nil {
		extents, err = decodeVolumeDiskExtents(b)
	}
	if err != nil {
		addUnknown(fsl, "below", ioctlName(ioctlVolumeGetVolumeDiskExtents)+": "+err.Error())
		return nil
	}
	pb, perr := d.src.volumeIoctl(v, ioctlDiskGetPartitionInfoEx, nil)
	var part partitionInfo
	if perr == nil {
		part, perr = decodePartitionInformationEx(pb)
	}
	if len(extents) == 1 && perr == nil {
		return d.basic(ctx, fsl, extents[0], part)
	}
	return d.dynamic(ctx, v, fsl, extents, perr)
}

// basic: a partition on a basic disk.
func (d *winDiscoverer) basic(ctx context.Context, fsl *plumblinev1.Layer, e diskExtent, part partitionInfo) []*plumblinev1.Layer {
	disk := d.disk(ctx, e.DiskNumber)
	pl := &plumblinev1.Layer{
		Kind:            KindPartition,
		Device:          fmt.Sprintf("Harddisk%dPartition%d", e.DiskNumber, part.PartitionNumber),
		Name:            part.GPTName,
		OffsetBytes:     proto.Uint64(part.StartingOffset),
		SizeBytes:       part.PartitionLength,
		PartitionTable:  part.table(),
		PartitionNumber: part.PartitionNumber,
		Below:           []string{disk.Device},
		Source:          SourceIoctl,
		Sources: map[string]string{
			"offset_bytes": SourceIoctl, "size_bytes": SourceIoctl, "partition_table": SourceIoctl,
			"partition_number": SourceIoctl, "below": SourceIoctl,
		},
	}
	if pl.Name != "" {
		pl.Sources["name"] = SourceIoctl
	}
	if part.StartingOffset != e.StartingOffset {
		addUnknown(pl, "offset_bytes", fmt.Sprintf("the partition says it starts at byte %d, the volume's disk extent at %d; the partition's value is used", part.StartingOffset, e.StartingOffset))
	}
	inheritSectors(pl, disk)
	fsl.Below = []string{pl.Device}
	fsl.Sources["below"] = SourceIoctl
	return []*plumblinev1.Layer{pl, disk}
}
