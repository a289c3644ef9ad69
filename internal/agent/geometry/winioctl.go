package geometry

// Windows IOCTL codes and the byte layouts of their input and output
// buffers, as winioctl.h and ntddvol.h define them. This file is
// OS-neutral on purpose: Windows discovery passes raw buffers through
// DeviceIoControl and decodes them here, with explicit offsets, so every
// decoder is tested on Linux against fixtures built from the documented
// layouts (testdata/windows). The *Layout structs mirror the C structs
// field for field, padding included; winioctl_test.go checks their
// sizes and offsets against the documented numbers and against the
// offset constants the decoders use. The decoders are in
// winioctl_decode.go.

import (
	"fmt"
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

// volumeDataCountsLayout is the run of fields that NTFS_VOLUME_DATA_BUFFER
// and REFS_VOLUME_DATA_BUFFER share, VolumeSerialNumber to BytesPerCluster
// (48 bytes, 8-aligned): at offset 0 of the one and
// refsVolumeDataCountsOffset of the other. Embedded, it leaves each
// structure's layout as the SDK's (the layout test checks the offsets
// through it).
type volumeDataCountsLayout struct {
	VolumeSerialNumber int64
	NumberSectors      int64
	TotalClusters      int64
	FreeClusters       int64
	TotalReserved      int64
	BytesPerSector     uint32
	BytesPerCluster    uint32
}

// ntfsVolumeDataBufferLayout is NTFS_VOLUME_DATA_BUFFER (96 bytes).
type ntfsVolumeDataBufferLayout struct {
	volumeDataCountsLayout
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
	ByteCount              uint32
	MajorVersion           uint32
	MinorVersion           uint32
	BytesPerPhysicalSector uint32
	volumeDataCountsLayout
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
	refsVolumeDataCountsOffset           = 16
)
