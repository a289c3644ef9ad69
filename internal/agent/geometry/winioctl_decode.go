package geometry

// Decoders of the IOCTL output buffers laid out in winioctl.go, and the
// encoders of their inputs. OS-neutral: tested on Linux against fixtures.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"
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
	d := decodeVolumeDataCounts(b)
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
	d := decodeVolumeDataCounts(b[refsVolumeDataCountsOffset:])
	d.MajorVersion = le.Uint32(b[4:])
	d.MinorVersion = le.Uint32(b[8:])
	d.BytesPerPhysicalSector = le.Uint32(b[12:])
	return d, d.valid(what)
}

// decodeVolumeDataCounts decodes the run both volume data buffers share
// (volumeDataCountsLayout) at the start of b.
func decodeVolumeDataCounts(b []byte) fsVolumeData {
	return fsVolumeData{
		SerialNumber:    le.Uint64(b[0:]),
		NumberSectors:   le.Uint64(b[8:]),
		TotalClusters:   le.Uint64(b[16:]),
		BytesPerSector:  le.Uint32(b[40:]),
		BytesPerCluster: le.Uint32(b[44:]),
	}
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
