package geometry

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/plumbline/plumbline/internal/vocab"
)

// The member groups found on discovered trees: captured hosts (md RAID5 on
// whole disks, RAID10 on partitions, a striped LV, a linear LV on a RAID1)
// and a health tree with a faulty member, whose state the group carries.
func TestMemberGroupsOfTrees(t *testing.T) {
	t.Parallel()
	cases := []struct {
		tree string
		want []MemberGroup
	}{
		{"md-raid5", []MemberGroup{{Device: "md0", Kind: vocab.MemberGroupMD, MountPoints: []string{"/pgdata"}, Members: []Member{
			{Device: "sdb", Serial: "naa.5000039a00000000"}, {Device: "sdc", Serial: "naa.5000039a00000001"},
			{Device: "sdd", Serial: "naa.5000039a00000002"}, {Device: "sde", Serial: "naa.5000039a00000003"}}}}},
		{"md-raid10", []MemberGroup{{Device: "md0", Kind: vocab.MemberGroupMD, MountPoints: []string{"/data"}, Members: []Member{
			{Device: "sdb1", Serial: "naa.5000c500a0000001"}, {Device: "sdc1", Serial: "naa.5000c500a0000002"},
			{Device: "sdd1", Serial: "naa.5000c500a0000003"}, {Device: "sde1", Serial: "naa.5000c500a0000004"}}}}},
		// Only the striped LV is a group; the linear LV and the crypt
		// device on one partition each are none.
		{"lvm-striped", []MemberGroup{{Device: "dm-0", Kind: vocab.MemberGroupLVM, MountPoints: []string{"/data"}, Members: []Member{
			{Device: "nvme0n1p1", Serial: "BTLJ000000"}, {Device: "nvme1n1p1", Serial: "BTLJ000001"}}}}},
		// The linear LV on md0 is no group; md0's mirror halves are.
		{"lvm-on-md", []MemberGroup{{Device: "md0", Kind: vocab.MemberGroupMD, MountPoints: []string{"/var/lib/postgresql"}, Members: []Member{
			{Device: "sda1", Serial: "naa.55cd2e415000000"}, {Device: "sdb1", Serial: "naa.55cd2e415000001"}}}}},
		{"nvme", nil},
	}
	for _, c := range cases {
		t.Run(c.tree, func(t *testing.T) {
			t.Parallel()
			root := loadTree(t, c.tree)
			vols, err := Discover(context.Background(), treeOptions(root))
			if err != nil {
				t.Fatal(err)
			}
			got := MemberGroups(vols)
			if diff := gocmp.Diff(c.want, got.Groups); diff != "" {
				t.Errorf("MemberGroups (-want +got):\n%s", diff)
			}
		})
	}
}

// An md array with a faulty member still listed and a spare: every member
// md lists is in the group, each with its dev-*/state (the server decides
// which ones do the same work).
func TestMemberGroupsCarryMDState(t *testing.T) {
	t.Parallel()
	c := mdHealthCase{level: "raid5", raidDisks: "3", md: healthy("degraded", "1"), members: []mdMember{
		inSync("sdb", "0"), inSync("sdc", "1"),
		{name: "sdd", state: "faulty", slot: "2", errors: "17"},
		{name: "sde", state: "spare", slot: "none", errors: "0"},
	}}
	root := t.TempDir()
	buildTree(t, []byte(c.tree()), root)
	vols, err := Discover(context.Background(), treeOptions(root))
	if err != nil {
		t.Fatal(err)
	}
	got := MemberGroups(vols)
	want := []MemberGroup{{Device: "md0", Kind: vocab.MemberGroupMD, MountPoints: []string{"/pgdata"}, Members: []Member{
		{Device: "sdb", State: []string{"in_sync"}}, {Device: "sdc", State: []string{"in_sync"}},
		{Device: "sdd", State: []string{"faulty"}}, {Device: "sde", State: []string{"spare"}}}}}
	if diff := gocmp.Diff(want, got.Groups); diff != "" {
		t.Errorf("MemberGroups (-want +got):\n%s", diff)
	}
}

// Identities: /dev/disk/by-id links to a member (and not to its
// neighbours), a partition's serial from its disk, a SCSI disk's serial
// from VPD page 0x80 when sysfs has no serial file.
func TestMemberIdentities(t *testing.T) {
	t.Parallel()
	root := loadTree(t, "md-raid10")
	o := treeOptions(root)
	byID := filepath.Join(root, "dev", "disk", "by-id")
	for name, target := range map[string]string{
		"wwn-0x5000c500a0000001-part1":    "../../sdb1",
		"scsi-35000c500a0000001-part1":    "../../sdb1",
		"wwn-0x5000c500a0000001":          "../../sdb",
		"wwn-0x5000c500a0000002-part1":    "../../sdc1",
		"dm-name-unrelated":               "../../dm-9",
		"ata-VENDOR_MODEL_SERIAL00-part1": "../../sdd1",
	} {
		if err := os.MkdirAll(byID, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(byID, name)); err != nil {
			t.Fatal(err)
		}
	}
	// sdd has no serial file but a unit serial number page.
	sdd, err := filepath.EvalSymlinks(filepath.Join(o.SysfsRoot, "dev", "block", "8:48"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"serial", "wwid"} {
		os.Remove(filepath.Join(sdd, "device", f))
		os.Remove(filepath.Join(sdd, f))
	}
	if err := os.WriteFile(filepath.Join(sdd, "device", "vpd_pg80"), append([]byte{0, 0x80, 0, 12}, "  ZA1B2C3D  "...), 0o444); err != nil {
		t.Fatal(err)
	}
	got := MemberIdentities(o, []string{"sdb1", "sdc1", "sdd1", "sde1"})
	want := map[string]MemberIdentity{
		"sdb1": {ByID: []string{"scsi-35000c500a0000001-part1", "wwn-0x5000c500a0000001-part1"}, Serial: "naa.5000c500a0000001"},
		"sdc1": {ByID: []string{"wwn-0x5000c500a0000002-part1"}, Serial: "naa.5000c500a0000002"},
		"sdd1": {ByID: []string{"ata-VENDOR_MODEL_SERIAL00-part1"}, Serial: "ZA1B2C3D"},
		"sde1": {Serial: "naa.5000c500a0000004"},
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("MemberIdentities (-want +got):\n%s", diff)
	}
}

// mirrorTree is an LVM raid1 LV (vg1-db: dm-4 over its metadata and image
// sub-LVs dm-0..dm-3, each on one SAS disk) and a multipath device (dm-5
// over two paths to one LUN), as sysfs and LVM's metadata backup show them.
const mirrorTree = `
mount 40 25 253:4 / /db rw,noatime - xfs /dev/mapper/vg1-db rw
mount 41 25 253:5 / /san rw,noatime - xfs /dev/mapper/mpatha rw
dev 8:16 devices/pci0/host0/target0:0:1/0:0:1:0/block/sdb
file sys/devices/pci0/host0/target0:0:1/0:0:1:0/block/sdb/size 1172123568
file sys/devices/pci0/host0/target0:0:1/0:0:1:0/block/sdb/device/wwid naa.5000c500b0000001
queue devices/pci0/host0/target0:0:1/0:0:1:0/block/sdb 512 4096 4096 0 1
dev 8:32 devices/pci0/host0/target0:0:2/0:0:2:0/block/sdc
file sys/devices/pci0/host0/target0:0:2/0:0:2:0/block/sdc/size 1172123568
file sys/devices/pci0/host0/target0:0:2/0:0:2:0/block/sdc/device/wwid naa.5000c500b0000002
queue devices/pci0/host0/target0:0:2/0:0:2:0/block/sdc 512 4096 4096 0 1
dev 8:48 devices/pci0/host1/target1:0:0/1:0:0:0/block/sdd
file sys/devices/pci0/host1/target1:0:0/1:0:0:0/block/sdd/size 2147483648
file sys/devices/pci0/host1/target1:0:0/1:0:0:0/block/sdd/device/wwid naa.600a0b80001
queue devices/pci0/host1/target1:0:0/1:0:0:0/block/sdd 512 512 512 0 0
dev 8:64 devices/pci0/host2/target2:0:0/2:0:0:0/block/sde
file sys/devices/pci0/host2/target2:0:0/2:0:0:0/block/sde/size 2147483648
file sys/devices/pci0/host2/target2:0:0/2:0:0:0/block/sde/device/wwid naa.600a0b80001
queue devices/pci0/host2/target2:0:0/2:0:0:0/block/sde 512 512 512 0 0
dev 253:0 devices/virtual/block/dm-0
file sys/devices/virtual/block/dm-0/dm/name vg1-db_rmeta_0
file sys/devices/virtual/block/dm-0/dm/uuid LVM-11111111111111111111111111111111rmeta0rmeta0rmeta0rmeta0rmeta0rm
link sys/devices/virtual/block/dm-0/slaves/sdb ../../../../../devices/pci0/host0/target0:0:1/0:0:1:0/block/sdb
dev 253:1 devices/virtual/block/dm-1
file sys/devices/virtual/block/dm-1/dm/name vg1-db_rimage_0
file sys/devices/virtual/block/dm-1/dm/uuid LVM-11111111111111111111111111111111rimage0rimage0rimage0rimage0rima
link sys/devices/virtual/block/dm-1/slaves/sdb ../../../../../devices/pci0/host0/target0:0:1/0:0:1:0/block/sdb
dev 253:2 devices/virtual/block/dm-2
file sys/devices/virtual/block/dm-2/dm/name vg1-db_rmeta_1
file sys/devices/virtual/block/dm-2/dm/uuid LVM-11111111111111111111111111111111rmeta1rmeta1rmeta1rmeta1rmeta1rm
link sys/devices/virtual/block/dm-2/slaves/sdc ../../../../../devices/pci0/host0/target0:0:2/0:0:2:0/block/sdc
dev 253:3 devices/virtual/block/dm-3
file sys/devices/virtual/block/dm-3/dm/name vg1-db_rimage_1
file sys/devices/virtual/block/dm-3/dm/uuid LVM-11111111111111111111111111111111rimage1rimage1rimage1rimage1rima
link sys/devices/virtual/block/dm-3/slaves/sdc ../../../../../devices/pci0/host0/target0:0:2/0:0:2:0/block/sdc
dev 253:4 devices/virtual/block/dm-4
file sys/devices/virtual/block/dm-4/size 838860800
file sys/devices/virtual/block/dm-4/dm/name vg1-db
file sys/devices/virtual/block/dm-4/dm/uuid LVM-11111111111111111111111111111111dbdbdbdbdbdbdbdbdbdbdbdbdbdbdbdb
queue devices/virtual/block/dm-4 512 4096 4096 0 1
link sys/devices/virtual/block/dm-4/slaves/dm-0 ../../dm-0
link sys/devices/virtual/block/dm-4/slaves/dm-1 ../../dm-1
link sys/devices/virtual/block/dm-4/slaves/dm-2 ../../dm-2
link sys/devices/virtual/block/dm-4/slaves/dm-3 ../../dm-3
dev 253:5 devices/virtual/block/dm-5
file sys/devices/virtual/block/dm-5/size 2147483648
file sys/devices/virtual/block/dm-5/dm/name mpatha
file sys/devices/virtual/block/dm-5/dm/uuid mpath-3600a0b80001
queue devices/virtual/block/dm-5 512 512 512 0 0
link sys/devices/virtual/block/dm-5/slaves/sdd ../../../../../devices/pci0/host1/target1:0:0/1:0:0:0/block/sdd
link sys/devices/virtual/block/dm-5/slaves/sde ../../../../../devices/pci0/host2/target2:0:0/2:0:0:0/block/sde
text lvm/vg1
contents = "Text Format Volume Group"
version = 1
vg1 {
	id = "vg1vg1-vg1v-g1vg-1vg1-vg1v-g1vg-1vg1vg"
	seqno = 3
	format = "lvm2"
	extent_size = 8192
	physical_volumes {
		pv0 { id = "p0p0p0-0000-0000-0000-0000-0000-000000" device = "/dev/sdb" pe_start = 2048 pe_count = 143000 }
		pv1 { id = "p1p1p1-1111-1111-1111-1111-1111-111111" device = "/dev/sdc" pe_start = 2048 pe_count = 143000 }
	}
	logical_volumes {
		db {
			id = "dbdbdb-dbdb-dbdb-dbdb-dbdb-dbdb-dbdbdb"
			segment_count = 1
			segment1 {
				start_extent = 0
				extent_count = 102400
				type = "raid1"
				device_count = 2
				region_size = 4096
				raids = ["db_rmeta_0", "db_rimage_0", "db_rmeta_1", "db_rimage_1"]
			}
		}
		db_rmeta_0 { id = "m0m0m0-0000-0000-0000-0000-0000-000000" segment_count = 1
			segment1 { start_extent = 0 extent_count = 1 type = "striped" stripe_count = 1 stripes = ["pv0", 0] } }
		db_rimage_0 { id = "i0i0i0-0000-0000-0000-0000-0000-000000" segment_count = 1
			segment1 { start_extent = 0 extent_count = 102400 type = "striped" stripe_count = 1 stripes = ["pv0", 1] } }
		db_rmeta_1 { id = "m1m1m1-1111-1111-1111-1111-1111-111111" segment_count = 1
			segment1 { start_extent = 0 extent_count = 1 type = "striped" stripe_count = 1 stripes = ["pv1", 0] } }
		db_rimage_1 { id = "i1i1i1-1111-1111-1111-1111-1111-111111" segment_count = 1
			segment1 { start_extent = 0 extent_count = 102400 type = "striped" stripe_count = 1 stripes = ["pv1", 1] } }
	}
}
end
`

// An LVM raid1 LV's legs are its image sub-LVs (not the metadata ones),
// each named with the serial of the disk under it; a multipath device's
// paths are a group of their own.
func TestMemberGroupsMirrorAndMultipathTree(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	buildTree(t, []byte(mirrorTree), root)
	vols, err := Discover(context.Background(), treeOptions(root))
	if err != nil {
		t.Fatal(err)
	}
	want := []MemberGroup{
		{Device: "dm-4", Kind: vocab.MemberGroupMirror, MountPoints: []string{"/db"}, Members: []Member{
			{Device: "dm-1", Serial: "naa.5000c500b0000001"}, {Device: "dm-3", Serial: "naa.5000c500b0000002"}}},
		{Device: "dm-5", Kind: vocab.MemberGroupMultipath, MountPoints: []string{"/san"}, Members: []Member{
			{Device: "sdd", Serial: "naa.600a0b80001"}, {Device: "sde", Serial: "naa.600a0b80001"}}},
	}
	if diff := gocmp.Diff(want, MemberGroups(vols).Groups); diff != "" {
		for _, v := range vols {
			t.Logf("%s: %v", v.GetMountPoint(), layerNames(v))
			for _, l := range v.GetLayers() {
				t.Logf("  %s %s name=%q target=%q below=%v unknown=%v", l.GetKind(), l.GetDevice(), l.GetName(), l.GetDmTarget(), l.GetBelow(), l.GetUnknown())
			}
		}
		t.Errorf("MemberGroups (-want +got):\n%s", diff)
	}
}

func TestLinkedName(t *testing.T) {
	t.Parallel()
	for target, want := range map[string]string{"../../sdb1": "sdb1", "../../cciss/c0d0": "cciss!c0d0", "/dev/nvme0n1": "nvme0n1", "../../dm-3": "dm-3"} {
		if got := linkedName(target); got != want {
			t.Errorf("linkedName(%q) = %q, want %q", target, got, want)
		}
	}
}
