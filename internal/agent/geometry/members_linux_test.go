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
