package geometry

import (
	"context"
	"fmt"
	"strings"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
	"google.golang.org/protobuf/proto"
)

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
func (d *winDiscoverer) dynamic(ctx context.Context, v winVolume, fsl *plumblinev1.Layer, extents []diskExtent, partErr error) []*plumblinev1.Layer {
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
		dl := d.disk(ctx, e.DiskNumber)
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
		setKnown(l, "stripe_unit_bytes", &l.StripeUnitBytes, lay.unit, SourceIoctl)
	}
	if lay.level == "linear" && len(extents) == 1 {
		asSimpleVolume(l)
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

	setDynamicOffset(l, extents)
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

// asSimpleVolume turns the layer of a simple volume on a dynamic disk (one
// extent) into what it is: a partition of the LDM table.
func asSimpleVolume(l *plumblinev1.Layer) {
	l.Kind = KindPartition
	l.RaidLevel, l.RaidDisks, l.RaidDataDisks = "", 0, 0
	delete(l.Sources, "raid_level")
	delete(l.Sources, "raid_disks")
	delete(l.Sources, "raid_data_disks")
	l.PartitionTable = "ldm"
	l.Sources["partition_table"] = SourceIoctl
}

// setDynamicOffset sets where a dynamic volume's data starts on its disks:
// one offset when every disk's first extent starts at the same byte.
func setDynamicOffset(l *plumblinev1.Layer, extents []diskExtent) {
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
}
