package vocab

// The words of a geometry snapshot: what a storage layer is (Layer.kind),
// where a value came from (Layer.source, Layer.sources,
// Alignment.stripe_unit_source) and why the agent sent the snapshot
// (GeometrySnapshot.trigger). The wire carries them as strings; these
// types name them once so that discovery, the rules, the exporter and
// ingest's validation compare against one definition. Compare a wire
// string with LayerKind(l.GetKind()) == LayerDisk; set one with
// string(LayerDisk).

// LayerKind is what a storage layer is (Layer.kind).
type LayerKind string

// The layer kinds, top of the stack first.
const (
	LayerFilesystem LayerKind = "filesystem"
	LayerLVM        LayerKind = "lvm"
	LayerDM         LayerKind = "dm"
	LayerRAID       LayerKind = "raid"
	LayerPartition  LayerKind = "partition"
	LayerDisk       LayerKind = "disk"
)

// layerKinds is the one list of layer kinds, each with what it is.
var layerKinds = [...]struct {
	kind LayerKind
	doc  string
}{
	{LayerFilesystem, "the mounted file system: type, block size, stripe hints from its superblock or mount options"},
	{LayerLVM, "an LVM logical volume (a device-mapper device LVM made): segments, stripes, pe_start"},
	{LayerDM, "any other device-mapper device (crypt, multipath, a plain linear or striped table)"},
	{LayerRAID, "md RAID, a declared hardware RAID device, or a Storage Spaces virtual disk"},
	{LayerPartition, "a partition of a disk: its table type, number and offset"},
	{LayerDisk, "a whole disk: sectors, rotational flag, model; the bottom of the stack"},
}

// LayerKinds lists every layer kind, top of the stack first.
func LayerKinds() []LayerKind {
	out := make([]LayerKind, len(layerKinds))
	for i, l := range layerKinds {
		out[i] = l.kind
	}
	return out
}

// LayerKindNames is LayerKinds as strings.
func LayerKindNames() []string { return names(LayerKinds()) }

// LayerKindDoc says what a layer of kind k is; "" for an unknown kind.
func LayerKindDoc(k LayerKind) string {
	for _, l := range layerKinds {
		if l.kind == k {
			return l.doc
		}
	}
	return ""
}

// Source is where a value of a layer came from (Layer.source,
// Layer.sources, Alignment.stripe_unit_source).
type Source string

// The value sources.
const (
	SourceSysfs        Source = "sysfs"
	SourceSuperblock   Source = "superblock"
	SourceMountOptions Source = "mount-options"
	SourceMountTable   Source = "mountinfo"
	SourceDeclared     Source = "declared"
	SourceKernelHint   Source = "kernel-hint"
	SourceLVMMetadata  Source = "lvm-metadata"
	SourceStatfs       Source = "statfs"
	SourceIoctl        Source = "ioctl"
	SourceDeviceName   Source = "device-name"
	SourceWin32        Source = "win32"
	SourceWMI          Source = "wmi"
	SourceMeasured     Source = "measured"
	SourceMDStat       Source = "mdstat"
)

// sources is the one list of value sources, each with what it is.
var sources = [...]struct {
	source Source
	doc    string
}{
	{SourceSysfs, "a file under /sys/block (queue limits, md, dm, partition, disk attributes)"},
	{SourceSuperblock, "the file system's superblock (ext4 stride/stripe_width, XFS sunit/swidth), read once"},
	{SourceMountOptions, "the file system's mount options (sunit=, stripe=)"},
	{SourceMountTable, "the mount table itself (mountinfo): file-system type, mount source, options"},
	{SourceDeclared, "the agent's configuration: an operator-declared device (hardware RAID, rotational, model)"},
	{SourceKernelHint, "the kernel's I/O hints (minimum_io_size, optimal_io_size) taken as a stripe unit"},
	{SourceLVMMetadata, "LVM's text metadata backup: pe_start, segment offsets, stripe size"},
	{SourceStatfs, "statfs(2) on the mount point: the file-system block size"},
	{SourceIoctl, "a Windows IOCTL answer (partition, disk, storage properties)"},
	{SourceDeviceName, "the kernel's device name: a partition's number when sysfs has no partition file"},
	{SourceWin32, "a documented Win32 API other than an IOCTL: GetVolumeInformation, GetDiskFreeSpace"},
	{SourceWMI, "the Storage WMI namespace (root/Microsoft/Windows/Storage): Storage Spaces virtual disks"},
	{SourceMeasured, "inferred by the geometry probe (stripe-scan runs) when no layer declares, reports or hints one"},
	{SourceMDStat, "/proc/mdstat: an md array's state where sysfs does not offer it"},
}

// Sources lists every value source.
func Sources() []Source {
	out := make([]Source, len(sources))
	for i, s := range sources {
		out[i] = s.source
	}
	return out
}

// SourceNames is Sources as strings.
func SourceNames() []string { return names(Sources()) }

// SourceDoc says what source s is; "" for an unknown source.
func SourceDoc(s Source) string {
	for _, v := range sources {
		if v.source == s {
			return v.doc
		}
	}
	return ""
}

// Trigger is why the agent sent a geometry snapshot
// (GeometrySnapshot.trigger, the agent's snapshots metric label).
type Trigger string

// The snapshot triggers.
const (
	TriggerStart    Trigger = "start"
	TriggerChanged  Trigger = "changed"
	TriggerInterval Trigger = "interval"
	TriggerResync   Trigger = "resync"
)

// triggers is the one list of snapshot triggers, each with when it fires;
// always marks the triggers whose snapshot is spooled even when the
// inventory is the one spooled last.
var triggers = [...]struct {
	trigger Trigger
	always  bool
	doc     string
}{
	{TriggerStart, true, "the agent started: its first discovery"},
	{TriggerChanged, false, "the mount table or the declared devices changed and rediscovery found a different inventory"},
	{TriggerInterval, false, "the periodic rediscovery found a different inventory"},
	{TriggerResync, true, "the server held another snapshot (its geometry digest differed from the agent's)"},
}

// Triggers lists every snapshot trigger.
func Triggers() []Trigger {
	out := make([]Trigger, len(triggers))
	for i, t := range triggers {
		out[i] = t.trigger
	}
	return out
}

// TriggerNames is Triggers as strings.
func TriggerNames() []string { return names(Triggers()) }

// TriggerDoc says when trigger t fires; "" for an unknown trigger.
func TriggerDoc(t Trigger) string {
	for _, v := range triggers {
		if v.trigger == t {
			return v.doc
		}
	}
	return ""
}

// AlwaysSent reports whether a snapshot of trigger t is spooled even when
// its inventory is the one spooled last (start, resync); the others are
// spooled only when it differs.
func (t Trigger) AlwaysSent() bool {
	for _, v := range triggers {
		if v.trigger == t {
			return v.always
		}
	}
	return false
}
