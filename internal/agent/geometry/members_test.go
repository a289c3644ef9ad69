package geometry

import (
	"fmt"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

func layer(kind, dev string, below ...string) *plumblinev1.Layer {
	return &plumblinev1.Layer{Kind: kind, Device: dev, Below: below, Source: SourceSysfs}
}

func vol(mount string, layers ...*plumblinev1.Layer) *plumblinev1.Volume {
	return &plumblinev1.Volume{MountPoint: mount, Layers: append([]*plumblinev1.Layer{layer(KindFilesystem, "/dev/x", layers[0].GetDevice())}, layers...)}
}

// The groups of the layer stacks sysfs trees do not hold (device-mapper
// raid and multipath targets are not in the captured trees): which
// devices are siblings, and which are not.
func TestMemberGroupsOfLayers(t *testing.T) {
	t.Parallel()
	with := func(l *plumblinev1.Layer, f func(*plumblinev1.Layer)) *plumblinev1.Layer { f(l); return l }
	named := func(dev, name string, below ...string) *plumblinev1.Layer {
		return with(layer(KindDM, dev, below...), func(l *plumblinev1.Layer) { l.Name = name })
	}
	lv := func(dev, target string, below ...string) *plumblinev1.Layer {
		return with(layer(KindLVM, dev, below...), func(l *plumblinev1.Layer) { l.DmTarget = target; l.Source = SourceLVMMetadata })
	}
	md := func(dev, level string, below ...string) *plumblinev1.Layer {
		return with(layer(KindRAID, dev, below...), func(l *plumblinev1.Layer) { l.RaidLevel = level })
	}
	disk := func(dev, serial string) *plumblinev1.Layer {
		return with(layer(KindDisk, dev), func(l *plumblinev1.Layer) { l.Serial = serial })
	}
	cases := []struct {
		name string
		vols []*plumblinev1.Volume
		want []MemberGroup
	}{{
		name: "LVM raid1: the image legs, not the metadata sub-LVs; serials through the legs' PVs",
		vols: []*plumblinev1.Volume{vol("/db", lv("dm-4", "raid1", "dm-0", "dm-1", "dm-2", "dm-3"),
			named("dm-0", "vg-db_rmeta_0", "sdb"), named("dm-1", "vg-db_rimage_0", "sdb"), disk("sdb", "S1"),
			named("dm-2", "vg-db_rmeta_1", "sdc"), named("dm-3", "vg-db_rimage_1", "sdc"), disk("sdc", "S2"))},
		want: []MemberGroup{{Device: "dm-4", Kind: vocab.MemberGroupMirror, MountPoints: []string{"/db"},
			Members: []Member{{Device: "dm-1", Serial: "S1"}, {Device: "dm-3", Serial: "S2"}}}},
	}, {
		name: "LVM raid5 legs are an lvm group",
		vols: []*plumblinev1.Volume{vol("/db", lv("dm-9", "raid5", "dm-1", "dm-3", "dm-5"),
			named("dm-1", "vg-db_rimage_0"), named("dm-3", "vg-db_rimage_1"), named("dm-5", "vg-db_rimage_2"))},
		want: []MemberGroup{{Device: "dm-9", Kind: vocab.MemberGroupLVM, MountPoints: []string{"/db"},
			Members: []Member{{Device: "dm-1"}, {Device: "dm-3"}, {Device: "dm-5"}}}},
	}, {
		name: "a multipath device's paths",
		vols: []*plumblinev1.Volume{vol("/san", with(named("dm-0", "mpatha", "sdb", "sdc"), func(l *plumblinev1.Layer) { l.Uuid = "mpath-3600a0b80001" }))},
		want: []MemberGroup{{Device: "dm-0", Kind: vocab.MemberGroupMultipath, MountPoints: []string{"/san"},
			Members: []Member{{Device: "sdb"}, {Device: "sdc"}}}},
	}, {
		name: "md multipath is a multipath group",
		vols: []*plumblinev1.Volume{vol("/m", md("md1", "multipath", "sdb", "sdc"))},
		want: []MemberGroup{{Device: "md1", Kind: vocab.MemberGroupMultipath, MountPoints: []string{"/m"},
			Members: []Member{{Device: "sdb"}, {Device: "sdc"}}}},
	}, {
		name: "no group: linear md, declared hardware RAID, linear LV over two PVs, plain dm, one-member md",
		vols: []*plumblinev1.Volume{
			vol("/a", md("md0", "linear", "sdb", "sdc")),
			vol("/b", with(md("sdd", "raid5"), func(l *plumblinev1.Layer) { l.Source = SourceDeclared; l.Below = nil })),
			vol("/c", lv("dm-0", "linear", "sde", "sdf")),
			vol("/d", named("dm-1", "concat", "sdg", "sdh")),
			vol("/e", md("md1", "raid1", "sdi")),
		},
	}, {
		name: "two volumes on one array: one group naming both",
		vols: []*plumblinev1.Volume{
			vol("/x", layer(KindPartition, "md0p2", "md0"), md("md0", "raid10", "sdc", "sdb", "sdb")),
			vol("/w", layer(KindPartition, "md0p1", "md0"), md("md0", "raid10", "sdc", "sdb")),
		},
		want: []MemberGroup{{Device: "md0", Kind: vocab.MemberGroupMD, MountPoints: []string{"/w", "/x"},
			Members: []Member{{Device: "sdb"}, {Device: "sdc"}}}},
	}, {
		name: "LVM striped over md arrays: both levels are groups",
		vols: []*plumblinev1.Volume{vol("/big", lv("dm-0", "striped", "md0", "md1"),
			md("md0", "raid1", "sda", "sdb"), md("md1", "raid1", "sdc", "sdd"))},
		want: []MemberGroup{
			{Device: "dm-0", Kind: vocab.MemberGroupLVM, MountPoints: []string{"/big"}, Members: []Member{{Device: "md0"}, {Device: "md1"}}},
			{Device: "md0", Kind: vocab.MemberGroupMD, MountPoints: []string{"/big"}, Members: []Member{{Device: "sda"}, {Device: "sdb"}}},
			{Device: "md1", Kind: vocab.MemberGroupMD, MountPoints: []string{"/big"}, Members: []Member{{Device: "sdc"}, {Device: "sdd"}}},
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if diff := gocmp.Diff(c.want, MemberGroups(c.vols).Groups); diff != "" {
				t.Errorf("MemberGroups (-want +got):\n%s", diff)
			}
		})
	}
}

// A host with more groups, or a group with more members, than the bounds
// has the rest left out and counted.
func TestMemberGroupsBounded(t *testing.T) {
	t.Parallel()
	var vols []*plumblinev1.Volume
	for i := range MaxMemberGroups + 3 {
		n := 2
		if i == 0 {
			n = MaxGroupMembers + 5
		}
		var members []string
		for j := range n {
			members = append(members, fmt.Sprintf("d%d-%d", i, j))
		}
		vols = append(vols, vol(fmt.Sprintf("/v%03d", i), &plumblinev1.Layer{Kind: KindRAID, Device: fmt.Sprintf("md%03d", i), RaidLevel: "raid0", Below: members}))
	}
	res := MemberGroups(vols)
	if len(res.Groups) != MaxMemberGroups || res.Dropped != 3 || res.Truncated != 1 {
		t.Fatalf("MemberGroups: %d groups, %d dropped, %d cut; want %d, 3, 1", len(res.Groups), res.Dropped, res.Truncated, MaxMemberGroups)
	}
	if n := len(res.Groups[0].Members); n != MaxGroupMembers {
		t.Errorf("md000 has %d members, want %d", n, MaxGroupMembers)
	}
	if last := res.Groups[len(res.Groups)-1].Device; last != fmt.Sprintf("md%03d", MaxMemberGroups-1) {
		t.Errorf("last group kept = %s, want the first %d by device name", last, MaxMemberGroups)
	}
}

// The members of one record are bounded in all (the server refuses a
// record with more): whole groups past the bound are left out.
func TestMemberGroupsBoundedInAll(t *testing.T) {
	t.Parallel()
	var vols []*plumblinev1.Volume
	for i := range 20 {
		var members []string
		for j := range 60 {
			members = append(members, fmt.Sprintf("d%d-%d", i, j))
		}
		vols = append(vols, vol(fmt.Sprintf("/v%02d", i), &plumblinev1.Layer{Kind: KindRAID, Device: fmt.Sprintf("md%02d", i), RaidLevel: "raid6", Below: members}))
	}
	res := MemberGroups(vols)
	total := 0
	for _, g := range res.Groups {
		total += len(g.Members)
	}
	if len(res.Groups) != 17 || res.Dropped != 3 || total > MaxMembers {
		t.Errorf("MemberGroups: %d groups of %d members in all, %d dropped; want 17 groups (1020 members), 3 dropped", len(res.Groups), total, res.Dropped)
	}
}

// Only md members carry md state on the wire: an md multipath array's
// paths do not, whatever its health lists.
func TestMemberGroupsStateOnlyForMD(t *testing.T) {
	t.Parallel()
	mp := &plumblinev1.Layer{Kind: KindRAID, Device: "md5", RaidLevel: "multipath", Below: []string{"sdb", "sdc"},
		RaidHealth: &plumblinev1.RaidHealth{Members: []*plumblinev1.RaidMember{{Device: "sdb", State: []string{"in_sync"}}, {Device: "sdc", State: []string{"faulty"}}}}}
	got := MemberGroups([]*plumblinev1.Volume{vol("/m", mp)}).Groups
	want := []MemberGroup{{Device: "md5", Kind: vocab.MemberGroupMultipath, MountPoints: []string{"/m"}, Members: []Member{{Device: "sdb"}, {Device: "sdc"}}}}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("MemberGroups (-want +got):\n%s", diff)
	}
}

// Names the server would refuse are left out, not sent.
func TestWireNames(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{"wwn-0x5000c500a0000001": true, "": false, "has space": false, "a/b": false, "tab\tx": false, strings.Repeat("x", 256): false} {
		if got := wireName(s); got != want {
			t.Errorf("wireName(%q) = %v, want %v", s, got, want)
		}
	}
	if got := WireSerial(strings.Repeat("S", 256)); got != "" {
		t.Errorf("WireSerial(256 bytes) = %q, want empty", got)
	}
	if got := WireSerial("ZA1 B2"); got != "ZA1 B2" {
		t.Errorf("WireSerial(%q) = %q, want it kept", "ZA1 B2", got)
	}
}

func TestParseVPDSerial(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   []byte
		want string
	}{
		{append([]byte{0, 0x80, 0, 10}, "  WD-12345"...), "WD-12345"},
		{append([]byte{0, 0x80, 0, 40}, "SHORT"...), "SHORT"}, // length past the end: what is there
		{append([]byte{0, 0x83, 0, 4}, "ABCD"...), ""},        // another page
		{[]byte{0, 0x80}, ""},
		{append([]byte{0, 0x80, 0, 3}, 'A', 0x01, 'B'), ""}, // not printable
	} {
		if got := parseVPDSerial(c.in); got != c.want {
			t.Errorf("parseVPDSerial(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
