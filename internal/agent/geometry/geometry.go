// Package geometry discovers a host's mounted volumes and the storage
// layers beneath each one: file system, LVM/device-mapper, md RAID,
// partition and disk, with the source of every value. It reads only
// sysfs, procfs, LVM metadata backups and file-system superblocks, under
// roots passed in Options, so tests run on captured or hand-built trees.
package geometry

import (
	"context"
	"errors"

	"github.com/plumbline/plumbline/internal/bytesize"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// ErrRoot is wrapped by the error Discover returns when a root cannot be
// read at all (sysfs root missing, mountinfo unreadable). Everything short
// of that is recorded in a layer's unknown list instead.
var ErrRoot = errors.New("unreadable root")

// ErrUnsupported is wrapped by Discover on operating systems whose
// discovery is not written yet.
var ErrUnsupported = errors.New("geometry discovery is not supported on this OS yet")

// Sources of values (Layer.source / Layer.sources): vocab's words as the
// wire's strings (vocab.Sources says what each is).
const (
	SourceSysfs        = string(vocab.SourceSysfs)
	SourceSuperblock   = string(vocab.SourceSuperblock)
	SourceMountOptions = string(vocab.SourceMountOptions)
	SourceMountTable   = string(vocab.SourceMountTable)
	SourceDeclared     = string(vocab.SourceDeclared)
	SourceKernelHint   = string(vocab.SourceKernelHint)
	SourceLVMMetadata  = string(vocab.SourceLVMMetadata)
	SourceStatfs       = string(vocab.SourceStatfs)
	SourceIoctl        = string(vocab.SourceIoctl)
	SourceDeviceName   = string(vocab.SourceDeviceName)
	SourceMDStat       = string(vocab.SourceMDStat)
)

// Layer kinds (Layer.kind): vocab's words as the wire's strings
// (vocab.LayerKinds says what each is).
const (
	KindFilesystem = string(vocab.LayerFilesystem)
	KindLVM        = string(vocab.LayerLVM)
	KindDM         = string(vocab.LayerDM)
	KindRAID       = string(vocab.LayerRAID)
	KindPartition  = string(vocab.LayerPartition)
	KindDisk       = string(vocab.LayerDisk)
)

// Options says where to read and what to inspect. The zero value is not
// useful; start from DefaultOptions.
type Options struct {
	SysfsRoot  string // default /sys
	ProcfsRoot string // default /proc
	DevRoot    string // default /dev; resolves declared /dev/disk/by-id links and holds superblocks
	// EtcRoot holds machine-id (default /etc). Empty: Host.machine_id is
	// left empty (a captured tree's machine-id is not this host's).
	EtcRoot string
	// LVMBackupDir holds LVM's text metadata backups (default /etc/lvm/backup),
	// the source of pe_start and LV segment offsets.
	LVMBackupDir string
	// ReadSuperblocks allows one read-only 4 KiB read of each mounted file
	// system's superblock (ext4 stride/stripe_width, XFS sunit/swidth).
	ReadSuperblocks bool
	// StatMounts allows statfs(2) on each mount point for the file-system
	// block size. Only for the live host: a captured tree's mount points do
	// not belong to this machine.
	StatMounts bool
	// Captured says the roots describe a captured tree, not this machine:
	// DiscoverHost then takes host facts only from the tree and never
	// from this machine (its hostname, Windows build, MachineGuid).
	Captured bool

	Declared []DeclaredDevice

	// Include/Exclude select volumes by mount point glob and fs type. An
	// empty Include list means everything backed by a block device.
	IncludeMountPoints []string
	ExcludeMountPoints []string
	IncludeFSTypes     []string
	ExcludeFSTypes     []string
}

// DeclaredDevice is hardware RAID the OS cannot see, declared by the operator.
// On Linux it is named by Device; on Windows by Device (PhysicalDriveN),
// Serial or Model, and every one given must match.
type DeclaredDevice struct {
	Device string // /dev/sdb or a /dev/disk/by-id link; on Windows PhysicalDrive2 or \\.\PhysicalDrive2
	Serial string // Windows: the disk's serial number (STORAGE_DEVICE_DESCRIPTOR)
	Model  string // Windows: the disk's model (vendor and product id)
	RAID   DeclaredRAID
}

// DeclaredRAID is the declared array geometry.
type DeclaredRAID struct {
	Level      string        // raid0|raid1|raid5|raid6|raid10|raid50|raid60
	StripeUnit bytesize.Size // chunk size
	Disks      uint32        // member disks
	// Spans is the number of raid5/raid6 spans of a raid50/raid60 array;
	// without it raid_data_disks of such an array is unknown.
	Spans uint32
}

// Result is what InspectVolumes finds: the volumes, and warnings the caller
// should print (a declared device that matches no block device, ...).
type Result struct {
	Volumes  []*plumblinev1.Volume
	Warnings []string
	// Filtered are the mounted file systems discovery left out, and why
	// (kernel interfaces such as proc, sysfs and cgroup are not listed).
	Filtered []Filtered
}

// Filtered is a mounted file system that is not a volume of the result.
type Filtered struct {
	MountPoint string
	FSType     string
	Source     string // the mount source (device or remote), as the mount table says
	Reason     string // one of FilterReasons
}

// Why a mount is not a volume (Filtered.Reason).
const (
	FilterExcluded      = "excluded"        // the include/exclude mount_points or fs_types settings
	FilterInMemory      = "in-memory"       // tmpfs, ramfs: no disk under it
	FilterNoBlockDevice = "no-block-device" // no local block device: network (NFS, CIFS, Ceph), FUSE, overlay, or an anonymous device number (btrfs, ZFS)
	FilterUnknownDevice = "unknown-device"  // the block device number is not in sysfs
	FilterDuplicate     = "duplicate"       // another mount of the same device is the volume (a bind mount)
)

// FilterReasons lists every Filtered.Reason.
var FilterReasons = []string{FilterExcluded, FilterInMemory, FilterNoBlockDevice, FilterUnknownDevice, FilterDuplicate}

// Discover returns every mounted, block-backed file system selected by
// opts with its layers, top to bottom. It does not fill Volume.alignment.
// The error wraps ErrRoot when a root is unreadable; a missing or odd
// value is recorded in the layer's unknown list instead. Warnings (such
// as a declared device that matches nothing) need InspectVolumes.
func Discover(ctx context.Context, opts Options) ([]*plumblinev1.Volume, error) {
	r, err := InspectVolumes(ctx, opts)
	if err != nil {
		return nil, err
	}
	return r.Volumes, nil
}

// InspectVolumes is Discover plus the warnings the caller should print.
func InspectVolumes(ctx context.Context, opts Options) (Result, error) {
	return discover(ctx, opts, nil)
}

// DefaultOptions reads the running host.
func DefaultOptions() Options {
	return Options{
		SysfsRoot:       "/sys",
		ProcfsRoot:      "/proc",
		DevRoot:         "/dev",
		EtcRoot:         "/etc",
		LVMBackupDir:    "/etc/lvm/backup",
		ReadSuperblocks: true,
		StatMounts:      true,
	}
}
