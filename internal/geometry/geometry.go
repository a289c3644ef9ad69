// Package geometry discovers a host's mounted volumes and the storage
// layers beneath each one: file system, LVM/device-mapper, md RAID,
// partition and disk, with the source of every value. It reads only
// sysfs, procfs, LVM metadata backups and file-system superblocks, under
// roots passed in Options, so tests run on captured or hand-built trees.
package geometry

import (
	"github.com/plumbline/plumbline/internal/bytesize"
)

// Sources of values (Layer.source / Layer.sources).
const (
	SourceSysfs        = "sysfs"
	SourceSuperblock   = "superblock"
	SourceMountOptions = "mount-options"
	SourceDeclared     = "declared"
	SourceKernelHint   = "kernel-hint"
	SourceLVMMetadata  = "lvm-metadata"
	SourceStatfs       = "statfs"
	SourceIoctl        = "ioctl"
)

// Layer kinds (Layer.kind).
const (
	KindFilesystem = "filesystem"
	KindLVM        = "lvm"
	KindDM         = "dm"
	KindRAID       = "raid"
	KindPartition  = "partition"
	KindDisk       = "disk"
)

// Options says where to read and what to inspect. The zero value is not
// useful; start from DefaultOptions.
type Options struct {
	SysfsRoot  string // default /sys
	ProcfsRoot string // default /proc
	DevRoot    string // default /dev; resolves declared /dev/disk/by-id links and holds superblocks
	// LVMBackupDir holds LVM's text metadata backups (default /etc/lvm/backup),
	// the source of pe_start and LV segment offsets.
	LVMBackupDir string
	// ReadSuperblocks allows one read-only 4 KiB read of each mounted file
	// system's superblock (ext4 stride/stripe_width, XFS sunit/swidth).
	ReadSuperblocks bool

	Declared []DeclaredDevice

	// Include/Exclude select volumes by mount point glob and fs type. An
	// empty Include list means everything backed by a block device.
	IncludeMountPoints []string
	ExcludeMountPoints []string
	IncludeFSTypes     []string
	ExcludeFSTypes     []string
}

// DeclaredDevice is hardware RAID the OS cannot see, declared by the operator.
type DeclaredDevice struct {
	Device string // /dev/sdb or a /dev/disk/by-id link
	RAID   DeclaredRAID
}

// DeclaredRAID is the declared array geometry.
type DeclaredRAID struct {
	Level      string        // raid0|raid1|raid5|raid6|raid10|raid50|raid60
	StripeUnit bytesize.Size // chunk size
	Disks      uint32        // member disks
}

// DefaultOptions reads the running host.
func DefaultOptions() Options {
	return Options{
		SysfsRoot:       "/sys",
		ProcfsRoot:      "/proc",
		DevRoot:         "/dev",
		LVMBackupDir:    "/etc/lvm/backup",
		ReadSuperblocks: true,
	}
}
