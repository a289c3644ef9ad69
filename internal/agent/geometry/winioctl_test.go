package geometry

import (
	"testing"
	"unsafe"
)

// TestWindowsIoctlCodes recomputes every code with CTL_CODE.
func TestWindowsIoctlCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code                uint32
		devType, fn, method uint32
		access              uint32
	}{
		{ioctlVolumeGetVolumeDiskExtents, ioctlVolumeBase, 0, methodBuffered, fileAnyAccess},
		{ioctlVolumeLogicalToPhysical, ioctlVolumeBase, 8, methodBuffered, fileAnyAccess},
		{ioctlDiskGetPartitionInfoEx, fileDeviceDisk, 0x12, methodBuffered, fileAnyAccess},
		{ioctlDiskGetDriveGeometryEx, fileDeviceDisk, 0x28, methodBuffered, fileAnyAccess},
		{ioctlStorageQueryProperty, fileDeviceMassStore, 0x500, methodBuffered, fileAnyAccess},
		{fsctlGetNTFSVolumeData, fileDeviceFileSystem, 25, methodBuffered, fileAnyAccess},
		{fsctlGetReFSVolumeData, fileDeviceFileSystem, 182, methodBuffered, fileAnyAccess},
	} {
		if got := ctlCode(tc.devType, tc.fn, tc.method, tc.access); got != tc.code {
			t.Errorf("CTL_CODE for %s = %#08x, constant is %#08x", ioctlName(tc.code), got, tc.code)
		}
	}
}

// TestWindowsLayoutSizes checks each mirrored struct against the size
// winioctl.h / ntddvol.h give it on 64-bit Windows (and 32-bit: every
// 8-byte member is explicitly padded to its natural offset), and against
// the constants the decoders index with.
func TestWindowsLayoutSizes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		got, want uintptr
		decoder   uintptr
	}{
		{"STORAGE_PROPERTY_QUERY", unsafe.Sizeof(storagePropertyQueryLayout{}), 12, storagePropertyQuerySize},
		{"STORAGE_ACCESS_ALIGNMENT_DESCRIPTOR", unsafe.Sizeof(storageAccessAlignmentDescriptorLayout{}), 28, storageAccessAlignmentDescriptorSize},
		{"DEVICE_SEEK_PENALTY_DESCRIPTOR", unsafe.Sizeof(deviceSeekPenaltyDescriptorLayout{}), 12, deviceSeekPenaltyDescriptorSize},
		{"STORAGE_DEVICE_DESCRIPTOR", unsafe.Sizeof(storageDeviceDescriptorLayout{}), 40, storageDeviceDescriptorSize},
		{"DISK_EXTENT", unsafe.Sizeof(diskExtentLayout{}), 24, diskExtentSize},
		{"VOLUME_DISK_EXTENTS", unsafe.Sizeof(volumeDiskExtentsLayout{}), 32, volumeDiskExtentsSize},
		{"VOLUME_LOGICAL_OFFSET", unsafe.Sizeof(volumeLogicalOffsetLayout{}), 8, volumeLogicalOffsetSize},
		{"VOLUME_PHYSICAL_OFFSET", unsafe.Sizeof(volumePhysicalOffsetLayout{}), 16, volumePhysicalOffsetSize},
		{"VOLUME_PHYSICAL_OFFSETS", unsafe.Sizeof(volumePhysicalOffsetsLayout{}), 24, volumePhysicalOffsetsHeaderSize + volumePhysicalOffsetSize},
		{"PARTITION_INFORMATION_MBR", unsafe.Sizeof(partitionInformationMBRLayout{}), 24, 24},
		{"PARTITION_INFORMATION_GPT", unsafe.Sizeof(partitionInformationGPTLayout{}), 112, 112},
		{"PARTITION_INFORMATION_EX", unsafe.Sizeof(partitionInformationExLayout{}), 144, partitionInformationExSize},
		{"DISK_GEOMETRY", unsafe.Sizeof(diskGeometryLayout{}), 24, 24},
		{"DISK_GEOMETRY_EX", unsafe.Sizeof(diskGeometryExLayout{}), 40, diskGeometryExSize},
		{"NTFS_VOLUME_DATA_BUFFER", unsafe.Sizeof(ntfsVolumeDataBufferLayout{}), 96, ntfsVolumeDataBufferSize},
		{"NTFS_EXTENDED_VOLUME_DATA", unsafe.Sizeof(ntfsExtendedVolumeDataLayout{}), 32, ntfsExtendedVolumeDataSize},
		{"REFS_VOLUME_DATA_BUFFER", unsafe.Sizeof(refsVolumeDataBufferLayout{}), 152, refsVolumeDataBufferSize},
	} {
		if tc.got != tc.want || tc.decoder != tc.want {
			t.Errorf("sizeof(%s) = %d, decoder uses %d, documented %d", tc.name, tc.got, tc.decoder, tc.want)
		}
	}
}

// TestWindowsLayoutOffsets pins the offsets the decoders read at.
func TestWindowsLayoutOffsets(t *testing.T) {
	t.Parallel()
	var (
		ext  diskExtentLayout
		vde  volumeDiskExtentsLayout
		pie  partitionInformationExLayout
		mbr  partitionInformationMBRLayout
		gpt  partitionInformationGPTLayout
		al   storageAccessAlignmentDescriptorLayout
		sp   deviceSeekPenaltyDescriptorLayout
		dd   storageDeviceDescriptorLayout
		geo  diskGeometryExLayout
		ntfs ntfsVolumeDataBufferLayout
		nx   ntfsExtendedVolumeDataLayout
		refs refsVolumeDataBufferLayout
		po   volumePhysicalOffsetsLayout
	)
	for _, tc := range []struct {
		name      string
		got, want uintptr
	}{
		{"DISK_EXTENT.StartingOffset", unsafe.Offsetof(ext.StartingOffset), 8},
		{"DISK_EXTENT.ExtentLength", unsafe.Offsetof(ext.ExtentLength), 16},
		{"VOLUME_DISK_EXTENTS.Extents", unsafe.Offsetof(vde.Extents), volumeDiskExtentsHeaderSize},
		{"VOLUME_PHYSICAL_OFFSETS.PhysicalOffset", unsafe.Offsetof(po.PhysicalOffset), volumePhysicalOffsetsHeaderSize},
		{"PARTITION_INFORMATION_EX.StartingOffset", unsafe.Offsetof(pie.StartingOffset), 8},
		{"PARTITION_INFORMATION_EX.PartitionLength", unsafe.Offsetof(pie.PartitionLength), 16},
		{"PARTITION_INFORMATION_EX.PartitionNumber", unsafe.Offsetof(pie.PartitionNumber), 24},
		{"PARTITION_INFORMATION_EX.union", unsafe.Offsetof(pie.GPT), partitionInformationUnionOffset},
		{"PARTITION_INFORMATION_MBR.HiddenSectors", unsafe.Offsetof(mbr.HiddenSectors), 4},
		{"PARTITION_INFORMATION_GPT.Name", unsafe.Offsetof(gpt.Name), 40},
		{"STORAGE_ACCESS_ALIGNMENT_DESCRIPTOR.BytesPerLogicalSector", unsafe.Offsetof(al.BytesPerLogicalSector), 16},
		{"STORAGE_ACCESS_ALIGNMENT_DESCRIPTOR.BytesPerPhysicalSector", unsafe.Offsetof(al.BytesPerPhysicalSector), 20},
		{"STORAGE_ACCESS_ALIGNMENT_DESCRIPTOR.BytesOffsetForSectorAlignment", unsafe.Offsetof(al.BytesOffsetForSectorAlignment), 24},
		{"DEVICE_SEEK_PENALTY_DESCRIPTOR.IncursSeekPenalty", unsafe.Offsetof(sp.IncursSeekPenalty), 8},
		{"STORAGE_DEVICE_DESCRIPTOR.RemovableMedia", unsafe.Offsetof(dd.RemovableMedia), 10},
		{"STORAGE_DEVICE_DESCRIPTOR.VendorIdOffset", unsafe.Offsetof(dd.VendorIDOffset), 12},
		{"STORAGE_DEVICE_DESCRIPTOR.ProductIdOffset", unsafe.Offsetof(dd.ProductIDOffset), 16},
		{"STORAGE_DEVICE_DESCRIPTOR.ProductRevisionOffset", unsafe.Offsetof(dd.ProductRevisionOffset), 20},
		{"STORAGE_DEVICE_DESCRIPTOR.SerialNumberOffset", unsafe.Offsetof(dd.SerialNumberOffset), 24},
		{"STORAGE_DEVICE_DESCRIPTOR.BusType", unsafe.Offsetof(dd.BusType), 28},
		{"DISK_GEOMETRY.BytesPerSector", unsafe.Offsetof(geo.Geometry.BytesPerSector), 20},
		{"DISK_GEOMETRY_EX.DiskSize", unsafe.Offsetof(geo.DiskSize), 24},
		{"NTFS_VOLUME_DATA_BUFFER.BytesPerSector", unsafe.Offsetof(ntfs.BytesPerSector), 40},
		{"NTFS_VOLUME_DATA_BUFFER.BytesPerCluster", unsafe.Offsetof(ntfs.BytesPerCluster), 44},
		{"NTFS_EXTENDED_VOLUME_DATA.BytesPerPhysicalSector", unsafe.Offsetof(nx.BytesPerPhysicalSector), 8},
		{"REFS_VOLUME_DATA_BUFFER.VolumeSerialNumber", unsafe.Offsetof(refs.VolumeSerialNumber), 16},
		{"REFS_VOLUME_DATA_BUFFER's shared run", unsafe.Offsetof(refs.volumeDataCountsLayout), refsVolumeDataCountsOffset},
		{"NTFS_VOLUME_DATA_BUFFER.BytesPerFileRecordSegment", unsafe.Offsetof(ntfs.BytesPerFileRecordSegment), 48},
		{"REFS_VOLUME_DATA_BUFFER.MaximumSizeOfResidentFile", unsafe.Offsetof(refs.MaximumSizeOfResidentFile), 64},
		{"REFS_VOLUME_DATA_BUFFER.BytesPerSector", unsafe.Offsetof(refs.BytesPerSector), 56},
		{"REFS_VOLUME_DATA_BUFFER.BytesPerCluster", unsafe.Offsetof(refs.BytesPerCluster), 60},
	} {
		if tc.got != tc.want {
			t.Errorf("offsetof(%s) = %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}
