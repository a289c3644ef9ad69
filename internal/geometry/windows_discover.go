package geometry

// Windows discovery, OS-neutral half: everything from the raw answers of
// the Win32 volume APIs, the IOCTLs and the Storage WMI namespace to
// Volumes and Layers. The answers come through winSource; on Windows it is
// the live host (discover_windows.go), in tests a fixture-backed fake
// (windows_discover_test.go, testdata/windows).

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
	"google.golang.org/protobuf/proto"
)

// Sources of values that only Windows discovery uses.
const (
	// SourceWin32 is a documented Win32 API other than an IOCTL:
	// GetVolumeInformation, GetDiskFreeSpace.
	SourceWin32 = "win32"
	// SourceWMI is the Storage WMI namespace (root/Microsoft/Windows/Storage):
	// Storage Spaces virtual disks.
	SourceWMI = "wmi"
)

// GetDriveType's answers that matter here.
const (
	driveUnknown   = 0 // DRIVE_UNKNOWN
	driveNoRootDir = 1 // DRIVE_NO_ROOT_DIR: the path names no volume root
	driveFixed     = 3 // DRIVE_FIXED
)

// winSource is what Windows discovery reads. Each IOCTL answer is the raw
// output buffer; decoding is this package's (windows_layout.go).
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

// spacesVirtualDisk is one MSFT_VirtualDisk row with the Number of the
// MSFT_Disk it surfaces as (joinVirtualDisks). Field names are the WMI
// property names; the JSON form is the fixtures' spaces.json.
type spacesVirtualDisk struct {
	DiskNumber             *uint32 `json:"DiskNumber"`
	FriendlyName           string  `json:"FriendlyName"`
	UniqueID               string  `json:"UniqueId"`
	ResiliencySettingName  string  `json:"ResiliencySettingName"` // Simple, Mirror, Parity
	NumberOfColumns        uint32  `json:"NumberOfColumns"`
	NumberOfDataCopies     uint32  `json:"NumberOfDataCopies"`
	PhysicalDiskRedundancy uint32  `json:"PhysicalDiskRedundancy"`
	Interleave             uint64  `json:"Interleave"` // bytes
	LogicalSectorSize      uint64  `json:"LogicalSectorSize"`
	PhysicalSectorSize     uint64  `json:"PhysicalSectorSize"`
	Size                   uint64  `json:"Size"`
}

// decodeVirtualDisksJSON decodes spaces.json: one object or an array of
// them.
func decodeVirtualDisksJSON(b []byte) ([]spacesVirtualDisk, error) {
	t := strings.TrimSpace(string(b))
	if t == "" || t == "null" {
		return nil, nil
	}
	var rows []spacesVirtualDisk
	if strings.HasPrefix(t, "{") {
		var one spacesVirtualDisk
		if err := json.Unmarshal([]byte(t), &one); err != nil {
			return nil, fmt.Errorf("MSFT_VirtualDisk rows: %w", err)
		}
		rows = []spacesVirtualDisk{one}
	} else if err := json.Unmarshal([]byte(t), &rows); err != nil {
		return nil, fmt.Errorf("MSFT_VirtualDisk rows: %w", err)
	}
	return rows, nil
}

// The Storage WMI namespace (root\Microsoft\Windows\Storage) rows that
// win32Source.virtualDisks reads, one struct per class with the WMI
// property names as field names (github.com/yusufpapurcu/wmi loads
// properties by field name), and the join into spacesVirtualDisk, which
// is OS-neutral so that it is tested on Linux.

// msftVirtualDisk is the part of an MSFT_VirtualDisk instance read.
type msftVirtualDisk struct {
	ObjectId               string
	FriendlyName           string
	UniqueId               string
	ResiliencySettingName  string
	NumberOfColumns        uint16
	NumberOfDataCopies     uint16
	PhysicalDiskRedundancy uint16
	Interleave             uint64
	LogicalSectorSize      uint64
	PhysicalSectorSize     uint64
	Size                   uint64
}

// msftDisk is the part of an MSFT_Disk instance read.
type msftDisk struct {
	ObjectId     string
	Number       *uint32
	UniqueId     string
	SerialNumber string
}

// msftVirtualDiskToDisk is an MSFT_VirtualDiskToDisk association
// instance: two WMI object paths (REF properties).
type msftVirtualDiskToDisk struct {
	VirtualDisk string
	Disk        string
}

// joinVirtualDisks gives each virtual disk the Number of the disk it
// surfaces as: through the MSFT_VirtualDiskToDisk association when links
// has a row for it (matched on the ObjectId keys of the two object
// paths), else through the identifier Windows gives the surfaced disk
// (the virtual disk's UniqueId as MSFT_Disk's UniqueId or SerialNumber,
// compared without case, dashes or braces). A virtual disk that surfaces
// as no disk (detached) keeps a nil DiskNumber.
func joinVirtualDisks(vds []msftVirtualDisk, disks []msftDisk, links []msftVirtualDiskToDisk) []spacesVirtualDisk {
	byObject := map[string]*uint32{}
	byID := map[string]*uint32{}
	for _, d := range disks {
		if d.Number == nil {
			continue
		}
		if d.ObjectId != "" {
			byObject[d.ObjectId] = d.Number
		}
		for _, id := range []string{d.UniqueId, d.SerialNumber} {
			if k := normalizeStorageID(id); k != "" {
				if _, dup := byID[k]; !dup {
					byID[k] = d.Number
				}
			}
		}
	}
	linked := map[string]*uint32{}
	for _, l := range links {
		vd, ok1 := objectPathKey(l.VirtualDisk, "ObjectId")
		disk, ok2 := objectPathKey(l.Disk, "ObjectId")
		if !ok1 || !ok2 {
			continue
		}
		if n, ok := byObject[disk]; ok {
			linked[vd] = n
		}
	}
	out := make([]spacesVirtualDisk, 0, len(vds))
	for _, vd := range vds {
		row := spacesVirtualDisk{
			FriendlyName:           vd.FriendlyName,
			UniqueID:               vd.UniqueId,
			ResiliencySettingName:  vd.ResiliencySettingName,
			NumberOfColumns:        uint32(vd.NumberOfColumns),
			NumberOfDataCopies:     uint32(vd.NumberOfDataCopies),
			PhysicalDiskRedundancy: uint32(vd.PhysicalDiskRedundancy),
			Interleave:             vd.Interleave,
			LogicalSectorSize:      vd.LogicalSectorSize,
			PhysicalSectorSize:     vd.PhysicalSectorSize,
			Size:                   vd.Size,
		}
		if n, ok := linked[vd.ObjectId]; ok && vd.ObjectId != "" {
			row.DiskNumber = proto.Uint32(*n)
		} else if n, ok := byID[normalizeStorageID(vd.UniqueId)]; ok && vd.UniqueId != "" {
			row.DiskNumber = proto.Uint32(*n)
		}
		out = append(out, row)
	}
	return out
}

// normalizeStorageID folds the spellings of one identifier: case, and the
// dashes and braces of a GUID.
func normalizeStorageID(s string) string {
	return strings.ToUpper(strings.NewReplacer("-", "", "{", "", "}", "", " ", "").Replace(s))
}

// objectPathKey returns the value of key in a WMI object path such as
// \\HOST\root\Microsoft\Windows\Storage:MSFT_Disk.ObjectId="{1}\\\\HOST\\..."
// (the value is a quoted string in which backslash escapes the next
// character).
func objectPathKey(p, key string) (string, bool) {
	i := strings.Index(p, "."+key+`="`)
	if i < 0 {
		i = strings.Index(p, ","+key+`="`)
	}
	if i < 0 {
		return "", false
	}
	var b strings.Builder
	for j := i + len(key) + 3; j < len(p); j++ {
		switch c := p[j]; c {
		case '\\':
			j++
			if j == len(p) {
				return "", false
			}
			b.WriteByte(p[j])
		case '"':
			return b.String(), true
		default:
			b.WriteByte(c)
		}
	}
	return "", false
}

// spacesLayout is the RAID geometry a virtual disk's resiliency, columns
// and interleave amount to.
func (vd spacesVirtualDisk) layout() (level string, unit uint64, disks, dataDisks uint32, err error) {
	cols := vd.NumberOfColumns
	if cols == 0 {
		return "", 0, 0, 0, fmt.Errorf("virtual disk %q reports 0 columns", vd.FriendlyName)
	}
	copies := max(vd.NumberOfDataCopies, 1)
	switch strings.ToLower(vd.ResiliencySettingName) {
	case "simple":
		if cols == 1 {
			return "linear", 0, 1, 1, nil
		}
		return "raid0", vd.Interleave, cols, cols, nil
	case "mirror":
		if cols == 1 {
			return "raid1", 0, copies, 1, nil
		}
		return "raid10", vd.Interleave, cols * copies, cols, nil
	case "parity":
		red := max(vd.PhysicalDiskRedundancy, 1)
		if cols <= red {
			return "", 0, 0, 0, fmt.Errorf("virtual disk %q: parity with %d columns and redundancy %d", vd.FriendlyName, cols, red)
		}
		level = "raid5"
		if red == 2 {
			level = "raid6"
		}
		return level, vd.Interleave, cols, cols - red, nil
	}
	return "", 0, 0, 0, fmt.Errorf("virtual disk %q: resiliency %q is not one this reader knows", vd.FriendlyName, vd.ResiliencySettingName)
}

// winDiscoverer builds Volumes from a winSource.
type winDiscoverer struct {
	opts         Options
	src          winSource
	ctx          context.Context
	disks        map[uint32]*plumblinev1.Layer
	spaces       []spacesVirtualDisk
	spacesErr    error
	spacesLoaded bool
	declaredUsed []bool
	warnings     []string
}

// discoverWindows is Windows discovery over any winSource.
func discoverWindows(ctx context.Context, opts Options, src winSource) (Result, error) {
	d := &winDiscoverer{opts: opts, src: src, ctx: ctx, disks: map[uint32]*plumblinev1.Layer{}, declaredUsed: make([]bool, len(opts.Declared))}
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
		res.Volumes = append(res.Volumes, d.volume(v))
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
// point mp (MatchMountPoint).
func matchWindowsMount(globs []string, mp string) bool {
	for _, g := range globs {
		if MatchMountPoint(g, mp) {
			return true
		}
	}
	return false
}

// volume builds one Volume: the file-system layer, then what lies under it.
func (d *winDiscoverer) volume(v winVolume) *plumblinev1.Volume {
	fsl := d.filesystemLayer(v)
	vol := &plumblinev1.Volume{MountPoint: v.mountPoint(), Device: v.GUIDPath, Layers: []*plumblinev1.Layer{fsl}}
	vol.Layers = append(vol.Layers, d.below(v, fsl)...)
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
func (d *winDiscoverer) below(v winVolume, fsl *plumblinev1.Layer) []*plumblinev1.Layer {
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
		return d.basic(fsl, extents[0], part)
	}
	return d.dynamic(v, fsl, extents, perr)
}

// basic: a partition on a basic disk.
func (d *winDiscoverer) basic(fsl *plumblinev1.Layer, e diskExtent, part partitionInfo) []*plumblinev1.Layer {
	disk := d.disk(e.DiskNumber)
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

// inheritSectors copies the disk's sector sizes to a layer on it, as the
// Linux partition layer reads its parent's queue.
func inheritSectors(l, disk *plumblinev1.Layer) {
	for _, f := range []struct {
		name string
		v    uint32
		set  func(uint32)
	}{
		{"logical_sector_bytes", disk.LogicalSectorBytes, func(x uint32) { l.LogicalSectorBytes = x }},
		{"physical_sector_bytes", disk.PhysicalSectorBytes, func(x uint32) { l.PhysicalSectorBytes = x }},
	} {
		if f.v != 0 {
			f.set(f.v)
			l.Sources[f.name] = disk.Sources[f.name]
		} else {
			addUnknown(l, f.name, "unknown on "+disk.Device)
		}
	}
}

// dynamicProbeUnits are the logical offsets tried to find a dynamic
// volume's stripe unit (Windows creates striped volumes with 64 KiB).
var dynamicProbeUnits = []uint64{4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20}

// dynamicLayout is what IOCTL_VOLUME_LOGICAL_TO_PHYSICAL says about a
// volume on dynamic disks.
type dynamicLayout struct {
	level     string // linear (simple or spanned), raid0, raid1, raid5
	unit      uint64
	disks     uint32
	dataDisks uint32
}

// classifyDynamic maps a few logical offsets of the volume to disks:
// two copies of offset 0 are a mirror; offset 0 and the first probe unit
// on different disks are a stripe with that unit, and where unit × (n-1)
// lands tells RAID-0 (first row, offset 0 of the last extent) from RAID-5
// (already the second row). Everything on one disk up to 1 MiB: simple or
// spanned.
func classifyDynamic(extents []diskExtent, l2p func(uint64) ([]physicalOffset, error)) (dynamicLayout, error) {
	starts := map[uint32]uint64{}
	for _, e := range extents {
		if s, ok := starts[e.DiskNumber]; !ok || e.StartingOffset < s {
			starts[e.DiskNumber] = e.StartingOffset
		}
	}
	n := uint32(len(starts))
	m0, err := l2p(0)
	if err != nil {
		return dynamicLayout{}, err
	}
	if len(m0) > 1 {
		return dynamicLayout{level: "raid1", disks: uint32(len(m0)), dataDisks: 1}, nil
	}
	if n == 1 {
		return dynamicLayout{level: "linear", disks: 1, dataDisks: 1}, nil
	}
	for _, u := range dynamicProbeUnits {
		m, err := l2p(u)
		if err != nil {
			return dynamicLayout{}, err
		}
		if m[0].DiskNumber == m0[0].DiskNumber {
			continue
		}
		if n == 2 {
			return dynamicLayout{level: "raid0", unit: u, disks: 2, dataDisks: 2}, nil
		}
		last, err := l2p(u * uint64(n-1))
		if err != nil {
			return dynamicLayout{}, err
		}
		rel := last[0].Offset - starts[last[0].DiskNumber]
		switch rel {
		case 0:
			return dynamicLayout{level: "raid0", unit: u, disks: n, dataDisks: n}, nil
		case u:
			return dynamicLayout{level: "raid5", unit: u, disks: n, dataDisks: n - 1}, nil
		}
		return dynamicLayout{}, fmt.Errorf("logical offset %d maps to byte %d of disk %d's extent: neither RAID-0 nor RAID-5", u*uint64(n-1), rel, last[0].DiskNumber)
	}
	return dynamicLayout{level: "linear", disks: n, dataDisks: n}, nil
}

// dynamic: a volume on dynamic disks (simple, spanned, striped, mirror,
// RAID-5), one layer over its disks; its offset is where its extents
// start on each disk.
func (d *winDiscoverer) dynamic(v winVolume, fsl *plumblinev1.Layer, extents []diskExtent, partErr error) []*plumblinev1.Layer {
	name := strings.TrimPrefix(v.NTDevice, `\Device\`)
	if name == "" {
		name = strings.TrimSuffix(strings.TrimPrefix(v.GUIDPath, `\\?\`), `\`)
	}
	l := &plumblinev1.Layer{Kind: KindRAID, Device: name, Source: SourceIoctl, Sources: map[string]string{}}
	var disks []*plumblinev1.Layer
	seen := map[uint32]bool{}
	var size uint64
	for _, e := range extents {
		size += e.ExtentLength
		if seen[e.DiskNumber] {
			continue
		}
		seen[e.DiskNumber] = true
		dl := d.disk(e.DiskNumber)
		disks = append(disks, dl)
		l.Below = append(l.Below, dl.Device)
	}
	l.Sources["below"] = SourceIoctl

	lay, err := classifyDynamic(extents, func(off uint64) ([]physicalOffset, error) {
		b, err := d.src.volumeIoctl(v, ioctlVolumeLogicalToPhysical, encodeVolumeLogicalOffset(off))
		if err != nil {
			return nil, fmt.Errorf("%s(%d): %w", ioctlName(ioctlVolumeLogicalToPhysical), off, err)
		}
		return decodeVolumePhysicalOffsets(b)
	})
	if err != nil {
		addUnknown(l, "raid_level", err.Error())
	} else {
		l.RaidLevel = lay.level
		l.RaidDisks = lay.disks
		l.RaidDataDisks = lay.dataDisks
		for _, f := range []string{"raid_level", "raid_disks", "raid_data_disks"} {
			l.Sources[f] = SourceIoctl
		}
		if lay.unit != 0 {
			l.StripeUnitBytes = lay.unit
			l.Sources["stripe_unit_bytes"] = SourceIoctl
		}
	}
	if lay.level == "linear" && len(extents) == 1 {
		// A simple volume on a dynamic disk: one extent, like a partition.
		l.Kind = KindPartition
		l.RaidLevel, l.RaidDisks, l.RaidDataDisks = "", 0, 0
		delete(l.Sources, "raid_level")
		delete(l.Sources, "raid_disks")
		delete(l.Sources, "raid_data_disks")
		l.PartitionTable = "ldm"
		l.Sources["partition_table"] = SourceIoctl
	}
	switch lay.level {
	case "raid1":
		l.SizeBytes = size / uint64(max(lay.disks, 1))
	case "raid5":
		l.SizeBytes = size / uint64(lay.disks) * uint64(lay.dataDisks)
	default:
		l.SizeBytes = size
	}
	l.Sources["size_bytes"] = SourceIoctl

	// Where the data starts on the disks: one offset when every disk's
	// first extent starts at the same byte.
	starts := map[uint64]bool{}
	first := map[uint32]uint64{}
	for _, e := range extents {
		if s, ok := first[e.DiskNumber]; !ok || e.StartingOffset < s {
			first[e.DiskNumber] = e.StartingOffset
		}
	}
	var desc []string
	for _, e := range extents {
		desc = append(desc, fmt.Sprintf("disk %d at byte %d", e.DiskNumber, e.StartingOffset))
	}
	for _, s := range first {
		starts[s] = true
	}
	if len(starts) == 1 {
		for s := range starts {
			l.OffsetBytes = proto.Uint64(s)
		}
		l.Sources["offset_bytes"] = SourceIoctl
	} else {
		addUnknown(l, "offset_bytes", "the volume's extents start at different bytes: "+strings.Join(desc, ", "))
	}
	if len(disks) > 0 {
		inheritSectors(l, disks[0])
	}
	if partErr != nil && len(extents) == 1 {
		addUnknown(l, "partition_number", "a dynamic volume is no partition: "+ioctlName(ioctlDiskGetPartitionInfoEx)+": "+partErr.Error())
	}
	fsl.Below = []string{l.Device}
	fsl.Sources["below"] = SourceIoctl
	return append([]*plumblinev1.Layer{l}, disks...)
}

// disk reads \\.\PhysicalDrive<n> once per discovery and returns a copy
// of its layer.
func (d *winDiscoverer) disk(n uint32) *plumblinev1.Layer {
	if l, ok := d.disks[n]; ok {
		d.markDeclared(n, l)
		return proto.Clone(l).(*plumblinev1.Layer)
	}
	l := &plumblinev1.Layer{Kind: KindDisk, Device: physicalDriveName(n), Source: SourceIoctl, Sources: map[string]string{}}

	var geo driveGeometry
	b, err := d.src.diskIoctl(n, ioctlDiskGetDriveGeometryEx, nil)
	if err == nil {
		geo, err = decodeDriveGeometryEx(b)
	}
	if err != nil {
		addUnknown(l, "size_bytes", ioctlName(ioctlDiskGetDriveGeometryEx)+": "+err.Error())
	} else {
		l.SizeBytes = geo.DiskSize
		l.Sources["size_bytes"] = SourceIoctl
	}

	query := func(id uint32) ([]byte, error) {
		return d.src.diskIoctl(n, ioctlStorageQueryProperty, encodeStoragePropertyQuery(id))
	}
	b, err = query(storageAccessAlignmentProperty)
	var al accessAlignment
	if err == nil {
		al, err = decodeAccessAlignment(b)
	}
	if err != nil {
		why := "IOCTL_STORAGE_QUERY_PROPERTY(StorageAccessAlignmentProperty): " + err.Error()
		if validSector(geo.BytesPerSector) {
			l.LogicalSectorBytes = geo.BytesPerSector
			l.Sources["logical_sector_bytes"] = SourceIoctl
		} else {
			addUnknown(l, "logical_sector_bytes", why)
		}
		addUnknown(l, "physical_sector_bytes", why)
		addUnknown(l, "alignment_offset_bytes", why)
	} else {
		l.LogicalSectorBytes = al.BytesPerLogicalSector
		l.PhysicalSectorBytes = al.BytesPerPhysicalSector
		l.AlignmentOffsetBytes = proto.Int64(int64(al.BytesOffsetForSectorAlignment))
		for _, f := range []string{"logical_sector_bytes", "physical_sector_bytes", "alignment_offset_bytes"} {
			l.Sources[f] = SourceIoctl
		}
	}
	addUnknown(l, "min_io_bytes", "Windows reports no I/O size hints")
	addUnknown(l, "opt_io_bytes", "Windows reports no I/O size hints")

	b, err = query(storageDeviceSeekPenaltyProperty)
	var seek bool
	if err == nil {
		seek, err = decodeSeekPenalty(b)
	}
	if err != nil {
		addUnknown(l, "rotational", "IOCTL_STORAGE_QUERY_PROPERTY(StorageDeviceSeekPenaltyProperty): "+err.Error())
	} else {
		l.Rotational = proto.Bool(seek)
		l.Sources["rotational"] = SourceIoctl
	}

	b, err = query(storageDeviceProperty)
	var desc deviceDescriptor
	if err == nil {
		desc, err = decodeDeviceDescriptor(b)
	}
	if err != nil {
		why := "IOCTL_STORAGE_QUERY_PROPERTY(StorageDeviceProperty): " + err.Error()
		addUnknown(l, "model", why)
		addUnknown(l, "serial", why)
	} else {
		if m := desc.model(); m != "" {
			l.Model = m
			l.Sources["model"] = SourceIoctl
		} else {
			addUnknown(l, "model", "the device reports no product id")
		}
		if desc.Serial != "" {
			l.Serial = desc.Serial
			l.Sources["serial"] = SourceIoctl
		} else {
			addUnknown(l, "serial", "the device reports no serial number")
		}
	}

	declared := false
	for i, decl := range d.opts.Declared {
		if decl.matchesWindowsDisk(windowsDisk{Number: n, Serial: l.Serial, Model: l.Model}) {
			if declared {
				d.warnings = append(d.warnings, fmt.Sprintf("declared device %s also matches %s, which an earlier entry already declared; ignored", declaredLabel(decl), l.Device))
				continue
			}
			applyDeclaredRAID(l, decl)
			d.declaredUsed[i] = true
			declared = true
		}
	}
	if !declared && err == nil && desc.BusType == busTypeSpaces {
		d.applySpaces(l, n)
	}
	d.disks[n] = proto.Clone(l).(*plumblinev1.Layer)
	return l
}

func (d *winDiscoverer) markDeclared(n uint32, l *plumblinev1.Layer) {
	if l.Source != SourceDeclared {
		return
	}
	for i, decl := range d.opts.Declared {
		if decl.matchesWindowsDisk(windowsDisk{Number: n, Serial: l.Serial, Model: l.Model}) {
			d.declaredUsed[i] = true
			return
		}
	}
}

// applySpaces turns a disk that is a Storage Spaces virtual disk into a
// raid layer with the virtual disk's columns and interleave.
func (d *winDiscoverer) applySpaces(l *plumblinev1.Layer, n uint32) {
	if !d.spacesLoaded {
		d.spacesLoaded = true
		d.spaces, d.spacesErr = d.src.virtualDisks(d.ctx)
	}
	l.Kind = KindRAID
	if d.spacesErr != nil {
		addUnknown(l, "stripe_unit_bytes", "Storage Spaces virtual disk; MSFT_VirtualDisk: "+d.spacesErr.Error())
		return
	}
	var vd *spacesVirtualDisk
	for i := range d.spaces {
		if p := d.spaces[i].DiskNumber; p != nil && *p == n {
			vd = &d.spaces[i]
			break
		}
	}
	if vd == nil {
		addUnknown(l, "stripe_unit_bytes", "Storage Spaces virtual disk, but no MSFT_VirtualDisk row surfaces as disk "+strconv.FormatUint(uint64(n), 10))
		return
	}
	l.Source = SourceWMI
	l.Name = vd.FriendlyName
	l.Sources["name"] = SourceWMI
	if vd.UniqueID != "" {
		l.Uuid = vd.UniqueID
		l.Sources["uuid"] = SourceWMI
	}
	level, unit, disks, data, err := vd.layout()
	if err != nil {
		addUnknown(l, "raid_level", err.Error())
		return
	}
	l.RaidLevel, l.RaidDisks, l.RaidDataDisks = level, disks, data
	l.RaidLayout = fmt.Sprintf("%s, %d columns, %d copies, interleave %d", vd.ResiliencySettingName, vd.NumberOfColumns, max(vd.NumberOfDataCopies, 1), vd.Interleave)
	for _, f := range []string{"raid_level", "raid_disks", "raid_data_disks", "raid_layout"} {
		l.Sources[f] = SourceWMI
	}
	if unit != 0 {
		l.StripeUnitBytes = unit
		l.Sources["stripe_unit_bytes"] = SourceWMI
	}
	addUnknown(l, "below", "the pool's physical disks are not listed")
}
