package probe

import (
	"strings"
	"testing"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

func u64p(v uint64) *uint64 { return &v }

func TestPlacementFor(t *testing.T) {
	fs := func(typ string) *plumblinev1.Layer {
		return &plumblinev1.Layer{Kind: "filesystem", Device: "/dev/x", FsType: typ, BlockSizeBytes: 4096, OffsetBytes: u64p(0)}
	}
	part := func(off *uint64) *plumblinev1.Layer {
		return &plumblinev1.Layer{Kind: "partition", Device: "sdb1", OffsetBytes: off, LogicalSectorBytes: 512}
	}
	disk := &plumblinev1.Layer{Kind: "disk", Device: "sdb", LogicalSectorBytes: 512, PhysicalSectorBytes: 4096, OffsetBytes: u64p(0)}
	md := &plumblinev1.Layer{Kind: "raid", Device: "md0", RaidLevel: "raid10", StripeUnitBytes: 64 << 10, RaidDisks: 4, RaidDataDisks: 2,
		LogicalSectorBytes: 512, PhysicalSectorBytes: 512, OffsetBytes: u64p(0), Source: "sysfs"}
	vol := func(typ string, ls ...*plumblinev1.Layer) *plumblinev1.Volume {
		return &plumblinev1.Volume{MountPoint: "/data", Filesystem: &plumblinev1.Filesystem{Type: typ, BlockSizeBytes: 4096}, Layers: ls}
	}
	for _, tc := range []struct {
		name string
		v    *plumblinev1.Volume
		want Placement
		why  string
	}{
		{"partition on a disk (hardware RAID unseen)", vol("ext4", fs("ext4"), part(u64p(63*512)), disk),
			Placement{Offset: 63 * 512, Known: true, Device: "sdb", Basis: "disk"}, ""},
		{"partition on md", vol("xfs", fs("xfs"), &plumblinev1.Layer{Kind: "partition", Device: "md0p1", OffsetBytes: u64p(1 << 20)}, md),
			Placement{Offset: 1 << 20, Known: true, Device: "md0", Basis: "striped device"}, ""},
		{"partition offset unknown", vol("ext4", fs("ext4"), part(nil), disk), Placement{}, "cannot be read"},
		{"btrfs", vol("btrfs", fs("btrfs"), disk), Placement{}, "own address space"},
		{"no volume", nil, Placement{}, "no discovered volume"},
	} {
		got := PlacementFor(tc.v)
		why := got.Why
		got.Why = ""
		if got != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("%s: %+v (why %q), want %+v (why containing %q)", tc.name, got, why, tc.want, tc.why)
		}
	}
}
