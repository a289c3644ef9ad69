package geometry

// Windows IOCTL codes and the byte layouts of their input and output
// buffers, as winioctl.h and ntddvol.h define them. This file is
// OS-neutral on purpose: Windows discovery passes raw buffers through
// DeviceIoControl and decodes them here, with explicit offsets, so every
// decoder is tested on Linux against fixtures built from the documented
// layouts (testdata/windows). The *Layout structs mirror the C structs
// field for field, padding included; windows_layout_test.go checks their
// sizes and offsets against the documented numbers and against the
// offset constants the decoders use.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"
)

// ctlCode is winioctl.h's CTL_CODE macro.
func ctlCode(deviceType, function, method, access uint32) uint32 {
	return deviceType<<16 | access<<14 | function<<2 | method
}

// Device types, methods and access of the codes below (winioctl.h).
const (
	fileDeviceDisk       = 0x00000007 // IOCTL_DISK_BASE
	fileDeviceFileSystem = 0x00000009
	fileDeviceMassStore  = 0x0000002d // IOCTL_STORAGE_BASE
	ioctlVolumeBase      = 0x00000056 // 'V'
	methodBuffered       = 0
	fileAnyAccess        = 0
)

// IOCTL and FSCTL codes. Every one is FILE_ANY_ACCESS: a handle opened
// with access 0 may send it (FSCTL_GET_NTFS_VOLUME_DATA is still refused
// to non-administrators by NTFS itself).
const (
	// IOCTL_VOLUME_GET_VOLUME_DISK_EXTENTS: CTL_CODE(IOCTL_VOLUME_BASE, 0, METHOD_BUFFERED, FILE_ANY_ACCESS).
	ioctlVolumeGetVolumeDiskExtents = 0x00560000
	// IOCTL_VOLUME_LOGICAL_TO_PHYSICAL: CTL_CODE(IOCTL_VOLUME_BASE, 8, METHOD_BUFFERED, FILE_ANY_ACCESS).
	ioctlVolumeLogicalToPhysical = 0x00560020
	// IOCTL_DISK_GET_PARTITION_INFO_EX: CTL_CODE(IOCTL_DISK_BASE, 0x0012, METHOD_BUFFERED, FILE_ANY_ACCESS).
	ioctlDiskGetPartitionInfoEx = 0x00070048
	// IOCTL_DISK_GET_DRIVE_GEOMETRY_EX: CTL_CODE(IOCTL_DISK_BASE, 0x0028, METHOD_BUFFERED, FILE_ANY_ACCESS).
	ioctlDiskGetDriveGeometryEx = 0x000700a0
	// IOCTL_STORAGE_QUERY_PROPERTY: CTL_CODE(IOCTL_STORAGE_BASE, 0x0500, METHOD_BUFFERED, FILE_ANY_ACCESS).
	ioctlStorageQueryProperty = 0x002d1400
	// FSCTL_GET_NTFS_VOLUME_DATA: CTL_CODE(FILE_DEVICE_FILE_SYSTEM, 25, METHOD_BUFFERED, FILE_ANY_ACCESS).
	fsctlGetNTFSVolumeData = 0x00090064
	// FSCTL_GET_REFS_VOLUME_DATA: CTL_CODE(FILE_DEVICE_FILE_SYSTEM, 182, METHOD_BUFFERED, FILE_ANY_ACCESS).
	fsctlGetReFSVolumeData = 0x000902d8
)

// ioctlName names a code for messages and fixture file names.
func ioctlName(code uint32) string {
	switch code {
	case ioctlVolumeGetVolumeDiskExtents:
		return "IOCTL_VOLUME_GET_VOLUME_DISK_EXTENTS"
	case ioctlVolumeLogicalToPhysical:
		return "IOCTL_VOLUME_LOGICAL_TO_PHYSICAL"
	case ioctlDiskGetPartitionInfoEx:
		return "IOCTL_DISK_GET_PARTITION_INFO_EX"
	case ioctlDiskGetDriveGeometryEx:
		return "IOCTL_DISK_GET_DRIVE_GEOMETRY_EX"
	case ioctlStorageQueryProperty:
		return "IOCTL_STORAGE_QUERY_PROPERTY"
	case fsctlGetNTFSVolumeData:
		return "FSCTL_GET_NTFS_VOLUME_DATA"
	case fsctlGetReFSVolumeData:
		return "FSCTL_GET_REFS_VOLUME_DATA"
	}
	return fmt.Sprintf("IOCTL_0x%08x", code)
}

// STORAGE_PROPERTY_ID values used (winioctl.h) and PropertyStandardQuery.
const (
	storageDeviceProperty            = 0
	storageAccessAlignmentProperty   = 6
	storageDeviceSeekPenaltyProperty = 7
	propertyStandardQuery            = 0
)

// STORAGE_BUS_TYPE values that change how a disk is read.
const (
	busTypeRAID   = 0x08 // a RAID controller's logical drive
	busTypeSpaces = 0x10 // a Storage Spaces virtual disk
	busTypeNvme   = 0x11
)

// PARTITION_STYLE.
const (
	partitionStyleMBR = 0
	partitionStyleGPT = 1
	partitionStyleRAW = 2
)

// --- documented layouts -------------------------------------------------

// storagePropertyQueryLayout is STORAGE_PROPERTY_QUERY (12 bytes).
type storagePropertyQueryLayout struct {
	PropertyID           uint32 // STORAGE_PROPERTY_ID
	QueryType            uint32 // STORAGE_QUERY_TYPE
	AdditionalParameters [1]byte
	_                    [3]byte
}

// storageAccessAlignmentDescriptorLayout is STORAGE_ACCESS_ALIGNMENT_DESCRIPTOR (28 bytes).
type storageAccessAlignmentDescriptorLayout struct {
	Version                       uint32
	Size                          uint32
	BytesPerCacheLine             uint32
	BytesOffsetForCacheAlignment  uint32
	BytesPerLogicalSector         uint32
	BytesPerPhysicalSector        uint32
	BytesOffsetForSectorAlignment uint32
}

// deviceSeekPenaltyDescriptorLayout is DEVICE_SEEK_PENALTY_DESCRIPTOR (12 bytes).
type deviceSeekPenaltyDescriptorLayout struct {
	Version           uint32
	Size              uint32
	IncursSeekPenalty uint8 // BOOLEAN
	_                 [3]byte
}

// storageDeviceDescriptorLayout is STORAGE_DEVICE_DESCRIPTOR (40 bytes
// fixed part; the strings its offsets point at follow it).
type storageDeviceDescriptorLayout struct {
	Version               uint32
	Size                  uint32
	DeviceType            uint8
	DeviceTypeModifier    uint8
	RemovableMedia        uint8
	CommandQueueing       uint8
	VendorIDOffset        uint32
	ProductIDOffset       uint32
	ProductRevisionOffset uint32
	SerialNumberOffset    uint32
	BusType               uint32 // STORAGE_BUS_TYPE
	RawPropertiesLength   uint32
	RawDeviceProperties   [1]byte
	_                     [3]byte
}

// diskExtentLayout is DISK_EXTENT (24 bytes).
type diskExtentLayout struct {
	DiskNumber     uint32
	_              [4]byte
	StartingOffset int64
	ExtentLength   int64
}

// volumeDiskExtentsLayout is VOLUME_DISK_EXTENTS with its one declared
// extent (32 bytes); the real buffer holds NumberOfDiskExtents of them.
type volumeDiskExtentsLayout struct {
	NumberOfDiskExtents uint32
	_                   [4]byte
	Extents             [1]diskExtentLayout
}

// volumeLogicalOffsetLayout is VOLUME_LOGICAL_OFFSET (8 bytes), the input
// of IOCTL_VOLUME_LOGICAL_TO_PHYSICAL.
type volumeLogicalOffsetLayout struct {
	LogicalOffset int64
}

// volumePhysicalOffsetLayout is VOLUME_PHYSICAL_OFFSET (16 bytes).
type volumePhysicalOffsetLayout struct {
	DiskNumber uint32
	_          [4]byte
	Offset     int64
}

// volumePhysicalOffsetsLayout is VOLUME_PHYSICAL_OFFSETS with one offset (24 bytes).
type volumePhysicalOffsetsLayout struct {
	NumberOfPhysicalOffsets uint32
	_                       [4]byte
	PhysicalOffset          [1]volumePhysicalOffsetLayout
}

// partitionInformationMBRLayout is PARTITION_INFORMATION_MBR (24 bytes;
// PartitionId is there since Windows 10 1809, inside the union's size either way).
type partitionInformationMBRLayout struct {
	PartitionType       uint8
	BootIndicator       uint8
	RecognizedPartition uint8
	_                   [1]byte
	HiddenSectors       uint32
	PartitionID         [16]byte // GUID
}

// partitionInformationGPTLayout is PARTITION_INFORMATION_GPT (112 bytes).
type partitionInformationGPTLayout struct {
	PartitionType [16]byte // GUID
	PartitionID   [16]byte // GUID
	Attributes    uint64
	Name          [36]uint16
}

// partitionInformationExLayout is PARTITION_INFORMATION_EX (144 bytes)
// with the GPT arm of its union (the larger one) in place.
type partitionInformationExLayout struct {
	PartitionStyle     uint32
	_                  [4]byte
	StartingOffset     int64
	PartitionLength    int64
	PartitionNumber    uint32
	RewritePartition   uint8
	IsServicePartition uint8
	_                  [2]byte
	GPT                partitionInformationGPTLayout // union { MBR; GPT; }
}

// diskGeometryLayout is DISK_GEOMETRY (24 bytes).
type diskGeometryLayout struct {
	Cylinders         int64
	MediaType         uint32
	TracksPerCylinder uint32
	SectorsPerTrack   uint32
	BytesPerSector    uint32
}

// diskGeometryExLayout is DISK_GEOMETRY_EX (32 bytes, then Data[1] and padding: 40).
type diskGeometryExLayout struct {
	Geometry diskGeometryLayout
	DiskSize int64
	Data     [1]byte
	_        [7]byte
}

// ntfsVolumeDataBufferLayout is NTFS_VOLUME_DATA_BUFFER (96 bytes).
type ntfsVolumeDataBufferLayout struct {
	VolumeSerialNumber           int64
	NumberSectors                int64
	TotalClusters                int64
	FreeClusters                 int64
	TotalReserved                int64
	BytesPerSector               uint32
	BytesPerCluster              uint32
	BytesPerFileRecordSegment    uint32
	ClustersPerFileRecordSegment uint32
	MftValidDataLength           int64
	MftStartLcn                  int64
	Mft2StartLcn                 int64
	MftZoneStart                 int64
	MftZoneEnd                   int64
}

// ntfsExtendedVolumeDataLayout is NTFS_EXTENDED_VOLUME_DATA (32 bytes),
// returned after the buffer above when the output buffer has room.
type ntfsExtendedVolumeDataLayout struct {
	ByteCount                uint32
	MajorVersion             uint16
	MinorVersion             uint16
	BytesPerPhysicalSector   uint32
	LfsMajorVersion          uint16
	LfsMinorVersion          uint16
	MaxDeviceTrimExtentCount uint32
	MaxDeviceTrimByteCount   uint32
	MaxVolumeTrimExtentCount uint32
	MaxVolumeTrimByteCount   uint32
}

// refsVolumeDataBufferLayout is REFS_VOLUME_DATA_BUFFER (152 bytes).
type refsVolumeDataBufferLayout struct {
	ByteCount                      uint32
	MajorVersion                   uint32
	MinorVersion                   uint32
	BytesPerPhysicalSector         uint32
	VolumeSerialNumber             int64
	NumberSectors                  int64
	TotalClusters                  int64
	FreeClusters                   int64
	TotalReserved                  int64
	BytesPerSector                 uint32
	BytesPerCluster                uint32
	MaximumSizeOfResidentFile      int64
	FastTierDataFillRatio          uint16
	SlowTierDataFillRatio          uint16
	DestagesFastTierToSlowTierRate uint32
	Reserved                       [9]int64
}

// Sizes and offsets the decoders use; the layout test ties each one to
// unsafe.Sizeof / unsafe.Offsetof of the structs above.
const (
	storagePropertyQuerySize             = 12
	storageAccessAlignmentDescriptorSize = 28
	deviceSeekPenaltyDescriptorSize      = 12
	storageDeviceDescriptorSize          = 40
	diskExtentSize                       = 24
	volumeDiskExtentsHeaderSize          = 8 // NumberOfDiskExtents and padding
	volumeDiskExtentsSize                = 32
	volumeLogicalOffsetSize              = 8
	volumePhysicalOffsetSize             = 16
	volumePhysicalOffsetsHeaderSize      = 8
	partitionInformationExSize           = 144
	partitionInformationUnionOffset      = 32
	diskGeometryExSize                   = 40
	ntfsVolumeDataBufferSize             = 96
	ntfsExtendedVolumeDataSize           = 32
	refsVolumeDataBufferSize             = 152
)

var le = binary.LittleEndian

// errShort is wrapped when an output buffer is shorter than its layout.
var errShort = errors.New("output buffer too short")

func need(what string, b []byte, n int) error {
	if len(b) < n {
		return fmt.Errorf("%s: %w: %d bytes, want at least %d", what, errShort, len(b), n)
	}
	return nil
}

// --- input buffers ------------------------------------------------------

// encodeStoragePropertyQuery is a STORAGE_PROPERTY_QUERY for a standard
// query of property id.
func encodeStoragePropertyQuery(id uint32) []byte {
	b := make([]byte, storagePropertyQuerySize)
	le.PutUint32(b[0:], id)
	le.PutUint32(b[4:], propertyStandardQuery)
	return b
}

// encodeVolumeLogicalOffset is a VOLUME_LOGICAL_OFFSET.
func encodeVolumeLogicalOffset(off uint64) []byte {
	b := make([]byte, volumeLogicalOffsetSize)
	le.PutUint64(b, off)
	return b
}

// --- decoders -----------------------------------------------------------

// diskExtent is one DISK_EXTENT.
type diskExtent struct {
	DiskNumber     uint32
	StartingOffset uint64
	ExtentLength   uint64
}

// decodeVolumeDiskExtents decodes VOLUME_DISK_EXTENTS.
func decodeVolumeDiskExtents(b []byte) ([]diskExtent, error) {
	const what = "VOLUME_DISK_EXTENTS"
	if err := need(what, b, volumeDiskExtentsHeaderSize); err != nil {
		return nil, err
	}
	n := le.Uint32(b[0:])
	if n == 0 {
		return nil, fmt.Errorf("%s: no extents", what)
	}
	if n > 4096 {
		return nil, fmt.Errorf("%s: %d extents is not plausible", what, n)
	}
	if err := need(what, b, volumeDiskExtentsHeaderSize+int(n)*diskExtentSize); err != nil {
		return nil, err
	}
	out := make([]diskExtent, n)
	for i := range out {
		e := b[volumeDiskExtentsHeaderSize+i*diskExtentSize:]
		start, length := int64(le.Uint64(e[8:])), int64(le.Uint64(e[16:]))
		if start < 0 || length <= 0 {
			return nil, fmt.Errorf("%s: extent %d: offset %d, length %d", what, i, start, length)
		}
		out[i] = diskExtent{DiskNumber: le.Uint32(e[0:]), StartingOffset: uint64(start), ExtentLength: uint64(length)}
	}
	return out, nil
}

// physicalOffset is one VOLUME_PHYSICAL_OFFSET.
type physicalOffset struct {
	DiskNumber uint32
	Offset     uint64
}

// decodeVolumePhysicalOffsets decodes VOLUME_PHYSICAL_OFFSETS: one entry
// per copy of the logical offset (two on a mirror).
func decodeVolumePhysicalOffsets(b []byte) ([]physicalOffset, error) {
	const what = "VOLUME_PHYSICAL_OFFSETS"
	if err := need(what, b, volumePhysicalOffsetsHeaderSize); err != nil {
		return nil, err
	}
	n := le.Uint32(b[0:])
	if n == 0 || n > 64 {
		return nil, fmt.Errorf("%s: %d physical offsets", what, n)
	}
	if err := need(what, b, volumePhysicalOffsetsHeaderSize+int(n)*volumePhysicalOffsetSize); err != nil {
		return nil, err
	}
	out := make([]physicalOffset, n)
	for i := range out {
		e := b[volumePhysicalOffsetsHeaderSize+i*volumePhysicalOffsetSize:]
		off := int64(le.Uint64(e[8:]))
		if off < 0 {
			return nil, fmt.Errorf("%s: entry %d: offset %d", what, i, off)
		}
		out[i] = physicalOffset{DiskNumber: le.Uint32(e[0:]), Offset: uint64(off)}
	}
	return out, nil
}

// partitionInfo is the part of PARTITION_INFORMATION_EX discovery uses.
type partitionInfo struct {
	Style           uint32 // partitionStyle*
	StartingOffset  uint64
	PartitionLength uint64
	PartitionNumber uint32
	MBRType         uint8  // MBR only
	HiddenSectors   uint32 // MBR only
	GPTType         string // GPT only, canonical GUID text
	GPTName         string // GPT only
}

// table is the partition table word used on Linux too: dos, gpt, raw.
func (p partitionInfo) table() string {
	switch p.Style {
	case partitionStyleMBR:
		return "dos"
	case partitionStyleGPT:
		return "gpt"
	}
	return "raw"
}

// decodePartitionInformationEx decodes PARTITION_INFORMATION_EX.
func decodePartitionInformationEx(b []byte) (partitionInfo, error) {
	const what = "PARTITION_INFORMATION_EX"
	if err := need(what, b, partitionInformationExSize); err != nil {
		return partitionInfo{}, err
	}
	p := partitionInfo{Style: le.Uint32(b[0:]), PartitionNumber: le.Uint32(b[24:])}
	start, length := int64(le.Uint64(b[8:])), int64(le.Uint64(b[16:]))
	if start < 0 || length < 0 {
		return partitionInfo{}, fmt.Errorf("%s: offset %d, length %d", what, start, length)
	}
	p.StartingOffset, p.PartitionLength = uint64(start), uint64(length)
	u := b[partitionInformationUnionOffset:]
	switch p.Style {
	case partitionStyleMBR:
		p.MBRType = u[0]
		p.HiddenSectors = le.Uint32(u[4:])
	case partitionStyleGPT:
		p.GPTType = formatGUID(u[0:16])
		p.GPTName = decodeUTF16Z(u[40:112])
	case partitionStyleRAW:
	default:
		return partitionInfo{}, fmt.Errorf("%s: partition style %d", what, p.Style)
	}
	return p, nil
}

// accessAlignment is STORAGE_ACCESS_ALIGNMENT_DESCRIPTOR.
type accessAlignment struct {
	BytesPerCacheLine             uint32
	BytesOffsetForCacheAlignment  uint32
	BytesPerLogicalSector         uint32
	BytesPerPhysicalSector        uint32
	BytesOffsetForSectorAlignment uint32
}

func decodeAccessAlignment(b []byte) (accessAlignment, error) {
	const what = "STORAGE_ACCESS_ALIGNMENT_DESCRIPTOR"
	if err := need(what, b, storageAccessAlignmentDescriptorSize); err != nil {
		return accessAlignment{}, err
	}
	if sz := le.Uint32(b[4:]); sz < storageAccessAlignmentDescriptorSize {
		return accessAlignment{}, fmt.Errorf("%s: Size %d, want %d", what, sz, storageAccessAlignmentDescriptorSize)
	}
	a := accessAlignment{
		BytesPerCacheLine:             le.Uint32(b[8:]),
		BytesOffsetForCacheAlignment:  le.Uint32(b[12:]),
		BytesPerLogicalSector:         le.Uint32(b[16:]),
		BytesPerPhysicalSector:        le.Uint32(b[20:]),
		BytesOffsetForSectorAlignment: le.Uint32(b[24:]),
	}
	if !validSector(a.BytesPerLogicalSector) || !validSector(a.BytesPerPhysicalSector) || a.BytesPerPhysicalSector < a.BytesPerLogicalSector {
		return accessAlignment{}, fmt.Errorf("%s: logical %d, physical %d bytes per sector", what, a.BytesPerLogicalSector, a.BytesPerPhysicalSector)
	}
	return a, nil
}

func validSector(n uint32) bool { return n >= 512 && n <= 64<<10 && n&(n-1) == 0 }

// decodeSeekPenalty decodes DEVICE_SEEK_PENALTY_DESCRIPTOR.
func decodeSeekPenalty(b []byte) (bool, error) {
	const what = "DEVICE_SEEK_PENALTY_DESCRIPTOR"
	if err := need(what, b, 9); err != nil {
		return false, err
	}
	if sz := le.Uint32(b[4:]); sz < 9 {
		return false, fmt.Errorf("%s: Size %d", what, sz)
	}
	return b[8] != 0, nil
}

// deviceDescriptor is STORAGE_DEVICE_DESCRIPTOR with its strings.
type deviceDescriptor struct {
	Vendor, Product, Revision, Serial string
	BusType                           uint32
	Removable                         bool
}

// model is what Linux calls the model: the product id, after the vendor
// when the device reports one that is not already in the product id.
func (d deviceDescriptor) model() string {
	if d.Vendor == "" || strings.HasPrefix(d.Product, d.Vendor) {
		return d.Product
	}
	return d.Vendor + " " + d.Product
}

func decodeDeviceDescriptor(b []byte) (deviceDescriptor, error) {
	const what = "STORAGE_DEVICE_DESCRIPTOR"
	if err := need(what, b, storageDeviceDescriptorSize-4); err != nil {
		return deviceDescriptor{}, err
	}
	size := int(le.Uint32(b[4:]))
	if size < storageDeviceDescriptorSize-4 {
		return deviceDescriptor{}, fmt.Errorf("%s: Size %d is smaller than the descriptor", what, size)
	}
	if size < len(b) {
		b = b[:size]
	}
	str := func(field string, at int) (string, error) {
		off := int(le.Uint32(b[at:]))
		if off == 0 {
			return "", nil
		}
		if off < storageDeviceDescriptorSize-4 || off >= len(b) {
			return "", fmt.Errorf("%s: %s offset %d outside the %d-byte descriptor", what, field, off, len(b))
		}
		s := b[off:]
		if i := indexByte(s, 0); i >= 0 {
			s = s[:i]
		}
		return strings.TrimSpace(string(s)), nil
	}
	var d deviceDescriptor
	var err error
	if d.Vendor, err = str("VendorIdOffset", 12); err != nil {
		return d, err
	}
	if d.Product, err = str("ProductIdOffset", 16); err != nil {
		return d, err
	}
	if d.Revision, err = str("ProductRevisionOffset", 20); err != nil {
		return d, err
	}
	if d.Serial, err = str("SerialNumberOffset", 24); err != nil {
		return d, err
	}
	d.BusType = le.Uint32(b[28:])
	d.Removable = b[10] != 0
	return d, nil
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// driveGeometry is the part of DISK_GEOMETRY_EX discovery uses.
type driveGeometry struct {
	BytesPerSector uint32
	MediaType      uint32
	DiskSize       uint64
}

func decodeDriveGeometryEx(b []byte) (driveGeometry, error) {
	const what = "DISK_GEOMETRY_EX"
	if err := need(what, b, 32); err != nil {
		return driveGeometry{}, err
	}
	size := int64(le.Uint64(b[24:]))
	if size < 0 {
		return driveGeometry{}, fmt.Errorf("%s: disk size %d", what, size)
	}
	return driveGeometry{MediaType: le.Uint32(b[8:]), BytesPerSector: le.Uint32(b[20:]), DiskSize: uint64(size)}, nil
}

// fsVolumeData is what NTFS_VOLUME_DATA_BUFFER and REFS_VOLUME_DATA_BUFFER
// both say.
type fsVolumeData struct {
	SerialNumber           uint64
	NumberSectors          uint64
	TotalClusters          uint64
	BytesPerSector         uint32
	BytesPerCluster        uint32
	BytesPerPhysicalSector uint32 // 0 when not reported
	MajorVersion           uint32
	MinorVersion           uint32
}

func (d fsVolumeData) sizeBytes() uint64 { return d.TotalClusters * uint64(d.BytesPerCluster) }

func (d fsVolumeData) valid(what string) error {
	if !validSector(d.BytesPerSector) || d.BytesPerCluster < d.BytesPerSector || d.BytesPerCluster > 2<<20 || d.BytesPerCluster&(d.BytesPerCluster-1) != 0 {
		return fmt.Errorf("%s: %d bytes per sector, %d per cluster", what, d.BytesPerSector, d.BytesPerCluster)
	}
	return nil
}

// decodeNTFSVolumeData decodes NTFS_VOLUME_DATA_BUFFER and, when present,
// the NTFS_EXTENDED_VOLUME_DATA after it.
func decodeNTFSVolumeData(b []byte) (fsVolumeData, error) {
	const what = "NTFS_VOLUME_DATA_BUFFER"
	if err := need(what, b, ntfsVolumeDataBufferSize); err != nil {
		return fsVolumeData{}, err
	}
	d := fsVolumeData{
		SerialNumber:    le.Uint64(b[0:]),
		NumberSectors:   le.Uint64(b[8:]),
		TotalClusters:   le.Uint64(b[16:]),
		BytesPerSector:  le.Uint32(b[40:]),
		BytesPerCluster: le.Uint32(b[44:]),
	}
	if x := b[ntfsVolumeDataBufferSize:]; len(x) >= 12 && le.Uint32(x[0:]) >= 12 {
		d.MajorVersion = uint32(le.Uint16(x[4:]))
		d.MinorVersion = uint32(le.Uint16(x[6:]))
		d.BytesPerPhysicalSector = le.Uint32(x[8:])
	}
	return d, d.valid(what)
}

// decodeReFSVolumeData decodes REFS_VOLUME_DATA_BUFFER.
func decodeReFSVolumeData(b []byte) (fsVolumeData, error) {
	const what = "REFS_VOLUME_DATA_BUFFER"
	if err := need(what, b, refsVolumeDataBufferSize); err != nil {
		return fsVolumeData{}, err
	}
	d := fsVolumeData{
		MajorVersion:           le.Uint32(b[4:]),
		MinorVersion:           le.Uint32(b[8:]),
		BytesPerPhysicalSector: le.Uint32(b[12:]),
		SerialNumber:           le.Uint64(b[16:]),
		NumberSectors:          le.Uint64(b[24:]),
		TotalClusters:          le.Uint64(b[32:]),
		BytesPerSector:         le.Uint32(b[56:]),
		BytesPerCluster:        le.Uint32(b[60:]),
	}
	return d, d.valid(what)
}

// formatGUID writes a Windows GUID (Data1-3 little-endian) as text.
func formatGUID(b []byte) string {
	return fmt.Sprintf("%08x-%04x-%04x-%x-%x", le.Uint32(b[0:]), le.Uint16(b[4:]), le.Uint16(b[6:]), b[8:10], b[10:16])
}

// decodeUTF16Z decodes a NUL-terminated little-endian UTF-16 string.
func decodeUTF16Z(b []byte) string {
	u := make([]uint16, 0, len(b)/2)
	for i := 0; i+1 < len(b); i += 2 {
		c := le.Uint16(b[i:])
		if c == 0 {
			break
		}
		u = append(u, c)
	}
	return string(utf16.Decode(u))
}
