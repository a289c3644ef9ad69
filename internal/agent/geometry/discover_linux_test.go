package geometry

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/bytesize"
	"github.com/plumbline/plumbline/internal/render"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

var update = flag.Bool("update", false, "rewrite testdata/trees/*.golden.json from the current output")

// layerWant is what a test insists on for one layer; nil pointers and empty
// values are not checked.
type layerWant struct {
	kind, device, name             string
	offset                         *uint64
	size                           uint64
	logical, physical, minIO, optI uint32
	align                          *int64
	raidLevel, layout, dmTarget    string
	stripeUnit, stripeWidth        uint64
	raidDisks, dataDisks, partNum  uint32
	blockSize                      uint32
	model, serial                  string
	rotRequired                    bool                     // rotational must be known
	reshape                        *plumblinev1.RaidReshape // nil: must be no reshape
	below                          []string
	sources                        map[string]string
	unknown                        []string // fields that must be listed as unknown
}

func u64(v uint64) *uint64 { return &v }
func i64(v int64) *int64   { return &v }

func checkLayer(t *testing.T, where string, got *plumblinev1.Layer, w layerWant) {
	t.Helper()
	type pair struct {
		field     string
		got, want any
		skip      bool
	}
	checks := []pair{
		{"kind", got.GetKind(), w.kind, w.kind == ""},
		{"device", got.GetDevice(), w.device, w.device == ""},
		{"name", got.GetName(), w.name, w.name == ""},
		{"size_bytes", got.GetSizeBytes(), w.size, w.size == 0},
		{"logical_sector_bytes", got.GetLogicalSectorBytes(), w.logical, w.logical == 0},
		{"physical_sector_bytes", got.GetPhysicalSectorBytes(), w.physical, w.physical == 0},
		{"min_io_bytes", got.GetMinIoBytes(), w.minIO, w.minIO == 0},
		{"opt_io_bytes", got.GetOptIoBytes(), w.optI, w.optI == 0},
		{"raid_level", got.GetRaidLevel(), w.raidLevel, w.raidLevel == ""},
		{"raid_layout", got.GetRaidLayout(), w.layout, w.layout == ""},
		{"dm_target", got.GetDmTarget(), w.dmTarget, w.dmTarget == ""},
		{"stripe_unit_bytes", got.GetStripeUnitBytes(), w.stripeUnit, w.stripeUnit == 0},
		{"stripe_width_bytes", got.GetStripeWidthBytes(), w.stripeWidth, w.stripeWidth == 0},
		{"raid_disks", got.GetRaidDisks(), w.raidDisks, w.raidDisks == 0},
		{"raid_data_disks", got.GetRaidDataDisks(), w.dataDisks, w.dataDisks == 0},
		{"partition_number", got.GetPartitionNumber(), w.partNum, w.partNum == 0},
		{"block_size_bytes", got.GetBlockSizeBytes(), w.blockSize, w.blockSize == 0},
		{"model", got.GetModel(), w.model, w.model == ""},
		{"serial", got.GetSerial(), w.serial, w.serial == ""},
		{"rotational known", got.Rotational != nil, true, !w.rotRequired},
	}
	if w.offset != nil {
		var g any = "absent"
		if got.OffsetBytes != nil {
			g = *got.OffsetBytes
		}
		checks = append(checks, pair{"offset_bytes", g, *w.offset, false})
	}
	if w.align != nil {
		var g any = "absent"
		if got.AlignmentOffsetBytes != nil {
			g = *got.AlignmentOffsetBytes
		}
		checks = append(checks, pair{"alignment_offset_bytes", g, *w.align, false})
	}
	if w.below != nil {
		checks = append(checks, pair{"below", strings.Join(got.GetBelow(), ","), strings.Join(w.below, ","), false})
	}
	for _, c := range checks {
		if !c.skip && c.got != c.want {
			t.Errorf("%s %s = %v, want %v", where, c.field, c.got, c.want)
		}
	}
	if !proto.Equal(got.GetReshape(), w.reshape) {
		t.Errorf("%s reshape = %v, want %v", where, got.GetReshape(), w.reshape)
	}
	for f, s := range w.sources {
		if got.GetSources()[f] != s {
			t.Errorf("%s sources[%s] = %q, want %q", where, f, got.GetSources()[f], s)
		}
	}
	for _, f := range w.unknown {
		if !hasUnknown(got, f) {
			t.Errorf("%s unknown does not list %s (unknown: %v)", where, f, got.GetUnknown())
		}
	}
	// Every set value carries a source; nothing is both set and unknown
	// except where a reason qualifies a set value (dm_target of a
	// multi-segment LV).
	for f := range got.GetSources() {
		for _, u := range got.GetUnknown() {
			if u.Field == f && f != "dm_target" && f != "below" {
				t.Errorf("%s %s has a source and is unknown (%s)", where, f, u.Reason)
			}
		}
	}
}

func volumeAt(vols []*plumblinev1.Volume, mp string) *plumblinev1.Volume {
	for _, v := range vols {
		if v.MountPoint == mp {
			return v
		}
	}
	return nil
}

type volumeWant struct {
	mount  string
	device string
	fsType string
	layers []layerWant
}

func TestDiscoverTrees(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tree     string
		opts     func(root string, o *Options)
		mounts   []string // exactly these volumes, in order
		volumes  []volumeWant
		warnings []string // substrings, in order
	}{
		{
			tree:   "md-raid10",
			mounts: []string{"/", "/data"},
			volumes: []volumeWant{{
				mount: "/data", device: "/dev/md0", fsType: "xfs",
				layers: []layerWant{
					{kind: KindFilesystem, device: "/dev/md0", offset: u64(0), stripeUnit: 512 << 10, stripeWidth: 1 << 20, below: []string{"md0"},
						sources: map[string]string{"stripe_unit_bytes": SourceMountOptions, "stripe_width_bytes": SourceMountOptions}, unknown: []string{"block_size_bytes"}},
					{kind: KindRAID, device: "md0", raidLevel: "raid10", layout: "near=2", stripeUnit: 512 << 10, raidDisks: 4, dataDisks: 2,
						offset: u64(264192 * 512), logical: 512, physical: 4096, minIO: 512 << 10, optI: 1 << 20, align: i64(0),
						below: []string{"sdb1", "sdc1", "sdd1", "sde1"}, sources: map[string]string{"offset_bytes": SourceSysfs, "min_io_bytes": SourceKernelHint, "raid_level": SourceSysfs}},
					{kind: KindPartition, device: "sdb1", offset: u64(2048 * 512), size: 3907026944 * 512, logical: 512, physical: 4096, partNum: 1, below: []string{"sdb"}},
					{kind: KindDisk, device: "sdb", logical: 512, physical: 4096, size: 3907029168 * 512},
					{kind: KindPartition, device: "sdc1"}, {kind: KindDisk, device: "sdc"},
					{kind: KindPartition, device: "sdd1"}, {kind: KindDisk, device: "sdd"},
					{kind: KindPartition, device: "sde1"}, {kind: KindDisk, device: "sde"},
				},
			}},
		},
		{
			tree:   "md-raid5",
			mounts: []string{"/pgdata"},
			volumes: []volumeWant{{
				mount: "/pgdata", device: "/dev/md0", fsType: "ext4",
				layers: []layerWant{
					{kind: KindFilesystem, unknown: []string{"stripe_width_bytes", "block_size_bytes"}},
					{kind: KindRAID, device: "md0", raidLevel: "raid5", layout: "left-symmetric", stripeUnit: 64 << 10, raidDisks: 4, dataDisks: 3, offset: u64(1 << 20), optI: 192 << 10},
					{kind: KindDisk, device: "sdb", rotRequired: true},
					{kind: KindDisk, device: "sdc"}, {kind: KindDisk, device: "sdd"}, {kind: KindDisk, device: "sde"},
				},
			}},
		},
		{
			// mdadm --grow in progress: "new (old)" values are the new
			// geometry, and the layer says what it was.
			tree:   "md-reshape",
			mounts: []string{"/pgdata", "/wal"},
			volumes: []volumeWant{
				{mount: "/pgdata", device: "/dev/md0", fsType: "ext4", layers: []layerWant{
					{kind: KindFilesystem},
					{kind: KindRAID, device: "md0", raidLevel: "raid5", layout: "left-symmetric", stripeUnit: 128 << 10, raidDisks: 5, dataDisks: 4, offset: u64(1 << 20),
						sources: map[string]string{"raid_disks": SourceSysfs, "stripe_unit_bytes": SourceSysfs, "raid_layout": SourceSysfs, "raid_data_disks": SourceSysfs, "reshape": SourceSysfs},
						reshape: &plumblinev1.RaidReshape{PreviousRaidDisks: 4, PreviousStripeUnitBytes: 64 << 10, PreviousRaidLayout: "left-asymmetric"}},
					{kind: KindDisk, device: "sdb"}, {kind: KindDisk, device: "sdc"}, {kind: KindDisk, device: "sdd"},
					{kind: KindDisk, device: "sde"}, {kind: KindDisk, device: "sdf"},
				}},
				{mount: "/wal", device: "/dev/md1", fsType: "xfs", layers: []layerWant{
					{kind: KindFilesystem},
					{kind: KindRAID, device: "md1", raidLevel: "raid10", layout: "near=2", stripeUnit: 512 << 10, raidDisks: 3, dataDisks: 1, offset: u64(1 << 20),
						reshape: &plumblinev1.RaidReshape{PreviousRaidDisks: 2}},
					{kind: KindDisk, device: "sdg"}, {kind: KindDisk, device: "sdh"}, {kind: KindDisk, device: "sdi"},
				}},
			},
		},
		{
			tree:   "md-raid6",
			mounts: []string{"/srv/db"},
			volumes: []volumeWant{{
				mount: "/srv/db", device: "/dev/md1", fsType: "xfs",
				layers: []layerWant{
					{kind: KindFilesystem, stripeUnit: 128 << 10, stripeWidth: 512 << 10},
					{kind: KindRAID, device: "md1", raidLevel: "raid6", stripeUnit: 128 << 10, raidDisks: 6, dataDisks: 4, unknown: []string{"offset_bytes"}},
					{kind: KindDisk, device: "nvme0n1", model: "SAMSUNG MZQL23T8HCLS", serial: "S64HNE0R000000"},
					{kind: KindDisk, device: "nvme1n1"}, {kind: KindDisk, device: "nvme2n1"},
					{kind: KindDisk, device: "nvme3n1"}, {kind: KindDisk, device: "nvme4n1"}, {kind: KindDisk, device: "nvme5n1"},
				},
			}},
		},
		{
			tree:   "lvm-on-md",
			mounts: []string{"/var/lib/postgresql"},
			volumes: []volumeWant{{
				mount: "/var/lib/postgresql", device: "/dev/mapper/vg--db-data", fsType: "ext4",
				layers: []layerWant{
					{kind: KindFilesystem, below: []string{"dm-0"}},
					{kind: KindLVM, device: "dm-0", name: "vg--db-data", dmTarget: "linear", offset: u64(1 << 20), physical: 4096, below: []string{"md0"},
						sources: map[string]string{"offset_bytes": SourceLVMMetadata, "dm_target": SourceLVMMetadata}},
					{kind: KindRAID, device: "md0", raidLevel: "raid1", raidDisks: 2, dataDisks: 1, offset: u64(264192 * 512), unknown: []string{"stripe_unit_bytes"}},
					{kind: KindPartition, device: "sda1", offset: u64(1 << 20)}, {kind: KindDisk, device: "sda", physical: 4096},
					{kind: KindPartition, device: "sdb1"}, {kind: KindDisk, device: "sdb"},
				},
			}},
		},
		{
			tree:   "lvm-striped",
			mounts: []string{"/data", "/log", "/secret", "/orphan"},
			volumes: []volumeWant{
				{mount: "/data", device: "/dev/mapper/vg0-data", fsType: "xfs", layers: []layerWant{
					{kind: KindFilesystem, stripeUnit: 64 << 10, stripeWidth: 128 << 10},
					{kind: KindLVM, device: "dm-0", name: "vg0-data", dmTarget: "striped", raidLevel: "raid0", stripeUnit: 64 << 10, raidDisks: 2, dataDisks: 2,
						offset: u64(2048*512 + 2058*8192*512), below: []string{"nvme0n1p1", "nvme1n1p1"},
						sources: map[string]string{"stripe_unit_bytes": SourceLVMMetadata, "raid_level": SourceLVMMetadata}},
					{kind: KindPartition, device: "nvme0n1p1", offset: u64(1 << 20)}, {kind: KindDisk, device: "nvme0n1"},
					{kind: KindPartition, device: "nvme1n1p1"}, {kind: KindDisk, device: "nvme1n1"},
				}},
				{mount: "/log", device: "/dev/mapper/vg0-log", fsType: "xfs", layers: []layerWant{
					{kind: KindFilesystem, unknown: []string{"stripe_unit_bytes"}},
					{kind: KindLVM, device: "dm-1", dmTarget: "linear", offset: u64(2048*512 + 10*8192*512)},
					{kind: KindPartition, device: "nvme0n1p1"}, {kind: KindDisk, device: "nvme0n1"},
				}},
				{mount: "/secret", device: "/dev/mapper/luks-secret", fsType: "ext4", layers: []layerWant{
					{kind: KindFilesystem},
					{kind: KindDM, device: "dm-2", name: "luks-secret", unknown: []string{"offset_bytes", "dm_target"}},
					{kind: KindPartition, device: "nvme1n1p1"}, {kind: KindDisk, device: "nvme1n1"},
				}},
				{mount: "/orphan", device: "/dev/mapper/vgx-lv", fsType: "ext4", layers: []layerWant{
					{kind: KindFilesystem},
					{kind: KindLVM, device: "dm-3", unknown: []string{"offset_bytes"}},
					{kind: KindPartition, device: "nvme1n1p1"}, {kind: KindDisk, device: "nvme1n1"},
				}},
			},
		},
		{
			tree:   "nvme",
			mounts: []string{"/data", "/scratch"},
			volumes: []volumeWant{{
				mount: "/data", device: "/dev/nvme0n1p1", fsType: "ext4",
				layers: []layerWant{
					{kind: KindFilesystem, below: []string{"nvme0n1p1"}},
					{kind: KindPartition, device: "nvme0n1p1", offset: u64(1 << 20), size: 1048576000 * 512, partNum: 1, logical: 512, physical: 512, below: []string{"nvme0n1"}},
					{kind: KindDisk, device: "nvme0n1", model: "Samsung SSD 970 EVO Plus 1TB", serial: "S4EWNX0R000000", rotRequired: true},
				},
			}},
		},
		{
			tree:   "nvme",
			opts:   func(root string, o *Options) { o.ExcludeMountPoints = []string{"/scr*"} },
			mounts: []string{"/data"},
		},
		{
			tree:   "nvme",
			opts:   func(root string, o *Options) { o.IncludeMountPoints = []string{"/srv/*"} },
			mounts: []string{"/srv/mysql"},
		},
		{
			tree:   "nvme",
			opts:   func(root string, o *Options) { o.IncludeFSTypes = []string{"xfs"} },
			mounts: nil,
		},
		{
			tree:   "512e-63",
			mounts: []string{"/mssql"},
			volumes: []volumeWant{{
				mount: "/mssql", device: "/dev/sda1", fsType: "ext4",
				layers: []layerWant{
					{kind: KindFilesystem},
					{kind: KindPartition, device: "sda1", offset: u64(63 * 512), logical: 512, physical: 4096, align: i64(512)},
					{kind: KindDisk, device: "sda", logical: 512, physical: 4096, model: "PERC H730 Mini"},
				},
			}},
		},
		{
			tree: "512e-63",
			opts: func(root string, o *Options) {
				o.Declared = []DeclaredDevice{
					{Device: "/dev/disk/by-id/scsi-36d0946606a36b5002b8f3c5a1e9a9f0e", RAID: DeclaredRAID{Level: "raid10", StripeUnit: 64 * bytesize.KiB, Disks: 8}},
					{Device: "/dev/disk/by-id/wwn-0xnothere", RAID: DeclaredRAID{Level: "raid5", StripeUnit: 128 * bytesize.KiB, Disks: 4}},
					{Device: "sda1", RAID: DeclaredRAID{Level: "raid1", Disks: 2}},
				}
			},
			mounts: []string{"/mssql"},
			volumes: []volumeWant{{
				mount: "/mssql", device: "/dev/sda1", fsType: "ext4",
				layers: []layerWant{
					{kind: KindFilesystem},
					{kind: KindPartition, device: "sda1", offset: u64(63 * 512)},
					{kind: KindRAID, device: "sda", raidLevel: "raid10", stripeUnit: 64 << 10, raidDisks: 8, dataDisks: 4, logical: 512, physical: 4096,
						sources: map[string]string{"raid_level": SourceDeclared, "stripe_unit_bytes": SourceDeclared, "raid_data_disks": SourceDeclared, "logical_sector_bytes": SourceSysfs}},
				},
			}},
			warnings: []string{"wwn-0xnothere matches no block device", "sda1 (sda1) is not a whole disk"},
		},
		{
			// Linux 2.6.26: no /sys/dev/block, no partition attribute, no
			// PARTN, only hw_sector_size. The 63-sector partition must be
			// a partition at 31.5 KiB, not a whole disk at offset 0.
			tree:   "lenny-2.6.26",
			mounts: []string{"/", "/srv/mysql"},
			volumes: []volumeWant{
				{mount: "/", device: "/dev/sda1", fsType: "ext3", layers: []layerWant{
					{kind: KindFilesystem, below: []string{"sda1"}},
					{kind: KindPartition, device: "sda1", offset: u64(63 * 512), size: 2104452 * 512, partNum: 1, logical: 512, below: []string{"sda"},
						sources: map[string]string{"partition_number": SourceDeviceName, "offset_bytes": SourceSysfs, "logical_sector_bytes": SourceSysfs},
						unknown: []string{"physical_sector_bytes", "alignment_offset_bytes"}},
					{kind: KindDisk, device: "sda", size: 976773168 * 512, logical: 512, model: "ST3500418AS", unknown: []string{"physical_sector_bytes", "rotational"}},
				}},
				{mount: "/srv/mysql", device: "/dev/md0", fsType: "ext3", layers: []layerWant{
					{kind: KindFilesystem, below: []string{"md0"}},
					{kind: KindRAID, device: "md0", raidLevel: "raid1", raidDisks: 2, dataDisks: 1, offset: u64(0), logical: 512, below: []string{"sda2", "sdb2"}},
					{kind: KindPartition, device: "sda2", offset: u64(2104515 * 512), partNum: 2, below: []string{"sda"}},
					{kind: KindDisk, device: "sda"},
					{kind: KindPartition, device: "sdb2", offset: u64(2104515 * 512), partNum: 2, below: []string{"sdb"}},
					{kind: KindDisk, device: "sdb", model: "ST3500418AS"},
				}},
			},
		},
		{
			// Linux 2.6.18: no mountinfo (/proc/mounts, sources found by
			// name), no /sys/dev/block, partitions known by start only.
			tree:   "rhel5-2.6.18",
			mounts: []string{"/boot", "/var/lib/mysql"},
			volumes: []volumeWant{
				{mount: "/boot", device: "/dev/sda1", fsType: "ext3", layers: []layerWant{
					{kind: KindFilesystem, below: []string{"sda1"}},
					{kind: KindPartition, device: "sda1", offset: u64(63 * 512), partNum: 1, logical: 512, below: []string{"sda"},
						sources: map[string]string{"partition_number": SourceDeviceName}},
					{kind: KindDisk, device: "sda", model: "ST3146356SS", unknown: []string{"physical_sector_bytes"}},
				}},
				{mount: "/var/lib/mysql", device: "/dev/md0", fsType: "ext3", layers: []layerWant{
					{kind: KindFilesystem, below: []string{"md0"}},
					{kind: KindRAID, device: "md0", raidLevel: "raid1", raidDisks: 2, offset: u64(0), below: []string{"sda2", "sdb2"}},
					{kind: KindPartition, device: "sda2", offset: u64(208845 * 512), partNum: 2},
					{kind: KindDisk, device: "sda"},
					{kind: KindPartition, device: "sdb2", offset: u64(208845 * 512), partNum: 2},
					{kind: KindDisk, device: "sdb"},
				}},
			},
			warnings: []string{"/dev/root (/)"},
		},
		{
			tree:   "4kn",
			mounts: []string{"/data"},
			volumes: []volumeWant{{
				mount: "/data", device: "/dev/sdb1", fsType: "xfs",
				layers: []layerWant{
					{kind: KindFilesystem},
					{kind: KindPartition, device: "sdb1", offset: u64(1 << 20), size: 31251755008 * 512, logical: 4096, physical: 4096},
					{kind: KindDisk, device: "sdb", logical: 4096, physical: 4096, minIO: 4096, size: 31251759104 * 512},
				},
			}},
		},
	}
	for i, tc := range tests {
		name := tc.tree
		if i > 0 && tests[i-1].tree == tc.tree {
			name += "/variant"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := loadTree(t, tc.tree)
			o := treeOptions(root)
			if tc.opts != nil {
				tc.opts(root, &o)
			}
			res, err := InspectVolumes(context.Background(), o)
			if err != nil {
				t.Fatalf("Discover(%s) error = %v", tc.tree, err)
			}
			var mps []string
			for _, v := range res.Volumes {
				mps = append(mps, v.MountPoint)
			}
			if diff := cmp.Diff(tc.mounts, mps); diff != "" {
				t.Errorf("Discover(%s) mount points (-want +got):\n%s", tc.tree, diff)
			}
			for _, vw := range tc.volumes {
				v := volumeAt(res.Volumes, vw.mount)
				if v == nil {
					t.Errorf("Discover(%s) has no volume at %s", tc.tree, vw.mount)
					continue
				}
				if v.Device != vw.device || v.GetFilesystem().GetType() != vw.fsType {
					t.Errorf("Discover(%s) %s = device %s type %s, want %s %s", tc.tree, vw.mount, v.Device, v.GetFilesystem().GetType(), vw.device, vw.fsType)
				}
				if len(v.Layers) != len(vw.layers) {
					t.Errorf("Discover(%s) %s has %d layers, want %d: %v", tc.tree, vw.mount, len(v.Layers), len(vw.layers), layerNames(v))
					continue
				}
				for j, lw := range vw.layers {
					checkLayer(t, tc.tree+" "+vw.mount+" layer "+v.Layers[j].Device, v.Layers[j], lw)
				}
			}
			if len(res.Warnings) != len(tc.warnings) {
				t.Errorf("Discover(%s) warnings = %q, want %d matching %q", tc.tree, res.Warnings, len(tc.warnings), tc.warnings)
			} else {
				for j, w := range tc.warnings {
					if !strings.Contains(res.Warnings[j], w) {
						t.Errorf("Discover(%s) warning %d = %q, want it to mention %q", tc.tree, j, res.Warnings[j], w)
					}
				}
			}
			if tc.opts == nil {
				checkGolden(t, filepath.Join("testdata", "trees", tc.tree+".golden.json"), root, res.Volumes)
			}
		})
	}
}

func layerNames(v *plumblinev1.Volume) []string {
	var out []string
	for _, l := range v.Layers {
		out = append(out, l.Kind+":"+l.Device)
	}
	return out
}

// checkGolden compares volumes with a golden protojson file; the tree root
// is written as $ROOT so the file does not depend on the temp dir.
func checkGolden(t *testing.T, path, root string, vols []*plumblinev1.Volume) {
	t.Helper()
	inv := &plumblinev1.Inventory{Volumes: vols}
	// render.JSON is deterministic (protojson's Multiline is not, on
	// purpose), so -update rewrites only what changed.
	b, err := render.JSON(inv)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), root, "$ROOT")
	if *update {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	want := &plumblinev1.Inventory{}
	if err := protojson.Unmarshal([]byte(strings.ReplaceAll(string(raw), "$ROOT", root)), want); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if diff := cmp.Diff(want, inv, protocmp.Transform()); diff != "" {
		t.Errorf("Discover(%s) differs from %s (-want +got):\n%s", filepath.Base(path), path, diff)
	}
}

func TestDiscoverRootErrors(t *testing.T) {
	t.Parallel()
	root := loadTree(t, "nvme")
	tests := []struct {
		name string
		mod  func(o *Options)
	}{
		{"sysfs missing", func(o *Options) { o.SysfsRoot = filepath.Join(root, "nope") }},
		{"sysfs empty", func(o *Options) { o.SysfsRoot = "" }},
		{"mountinfo missing", func(o *Options) { o.ProcfsRoot = filepath.Join(root, "nope") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := treeOptions(root)
			tc.mod(&o)
			_, err := Discover(context.Background(), o)
			if !errors.Is(err, ErrRoot) {
				t.Errorf("Discover(%s) error = %v, want one wrapping ErrRoot", tc.name, err)
			}
		})
	}
}

func TestDiscoverEscapingLink(t *testing.T) {
	t.Parallel()
	spec := `mount 40 25 8:1 / /data rw - ext4 /dev/sda1 rw
link sys/dev/block/8:1 ../../../../etc
mount 41 25 8:2 / /abs rw - ext4 /dev/sda2 rw
link sys/dev/block/8:2 /sys/devices/virtual/block/sda2
`
	root := t.TempDir()
	buildTree(t, []byte(spec), root)
	vols, err := Discover(context.Background(), treeOptions(root))
	if err != nil {
		t.Fatalf("Discover(escaping) error = %v", err)
	}
	if len(vols) != 2 {
		t.Fatalf("Discover(escaping) = %d volumes, want 2", len(vols))
	}
	for _, v := range vols {
		if len(v.Layers) != 1 || !hasUnknown(v.Layers[0], "below") {
			t.Errorf("Discover(escaping) %s = %v, want only the file-system layer with below unknown", v.MountPoint, v.Layers)
		}
	}
}

func TestDiscoverHost(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	buildTree(t, []byte("file proc/sys/kernel/osrelease 6.1.0-18-amd64\nfile proc/sys/kernel/hostname db1\nfile etc/machine-id 0123456789abcdef0123456789abcdef\n"), root)
	o := treeOptions(root)
	o.EtcRoot = filepath.Join(root, "etc")
	got := DiscoverHost(o)
	want := &plumblinev1.Host{Hostname: "db1", Os: "linux", Kernel: "6.1.0-18-amd64", MachineId: "0123456789abcdef0123456789abcdef"}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("DiscoverHost() (-want +got):\n%s", diff)
	}
}

// TestOldKernelVerdicts: on a kernel without the partition attribute the
// legacy 63-sector layout must not hide behind "aligned". Without a stripe
// unit or a physical sector there is nothing to judge it by (unknown, and
// why); with the array declared it is misaligned.
func TestOldKernelVerdicts(t *testing.T) {
	t.Parallel()
	root := loadTree(t, "lenny-2.6.26")
	tests := []struct {
		name     string
		declared []DeclaredDevice
		verdict  string
		rule     string
	}{
		{"nothing declared", nil, align.Unknown, align.RulePhysicalSectorUnknown},
		{"hardware raid10 declared", []DeclaredDevice{{Device: "/dev/sda", RAID: DeclaredRAID{Level: "raid10", StripeUnit: 64 * bytesize.KiB, Disks: 4}}},
			align.Misaligned, align.RulePartitionOffsetStripeUnit},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := treeOptions(root)
			o.Declared = tc.declared
			vols, err := Discover(context.Background(), o)
			if err != nil {
				t.Fatalf("Discover(lenny-2.6.26) error = %v", err)
			}
			v := volumeAt(vols, "/")
			if v == nil {
				t.Fatalf("Discover(lenny-2.6.26) has no volume at /: %v", vols)
			}
			a := align.Evaluate(v)
			var rules []string
			for _, f := range a.GetFindings() {
				rules = append(rules, f.GetRule())
			}
			if a.GetVerdict() != tc.verdict || !slices.Contains(rules, tc.rule) {
				t.Errorf("Evaluate(/ on lenny-2.6.26) = %s %v, want %s with %s", a.GetVerdict(), rules, tc.verdict, tc.rule)
			}
			if a.GetDiskOffsetBytes() != 63*512 {
				t.Errorf("Evaluate(/ on lenny-2.6.26) disk offset = %d, want %d", a.GetDiskOffsetBytes(), 63*512)
			}
		})
	}
}

func TestPartitionNumberFromName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, disk string
		want       uint32
		ok         bool
	}{
		{"sda1", "sda", 1, true},
		{"sda12", "sda", 12, true},
		{"nvme0n1p2", "nvme0n1", 2, true},
		{"mmcblk0p1", "mmcblk0", 1, true},
		{"md0p3", "md0", 3, true},
		{"sda", "sda", 0, false},
		{"sdb1", "sda", 0, false},
		{"sdap", "sda", 0, false},
		{"sda0", "sda", 0, false},
		{"sda1x", "sda", 0, false},
		{"sda99999999999", "sda", 0, false},
	}
	for _, tt := range tests {
		got, ok := partitionNumberFromName(tt.name, tt.disk)
		if got != tt.want || ok != tt.ok {
			t.Errorf("partitionNumberFromName(%q, %q) = %d, %v, want %d, %v", tt.name, tt.disk, got, ok, tt.want, tt.ok)
		}
	}
}

// TestReshapeVerdict: a running reshape is in the verdict's findings, with
// the old and the new geometry, and the verdict is judged on the new one.
func TestReshapeVerdict(t *testing.T) {
	t.Parallel()
	vols, err := Discover(context.Background(), treeOptions(loadTree(t, "md-reshape")))
	if err != nil {
		t.Fatalf("Discover(md-reshape) error = %v", err)
	}
	for _, tc := range []struct{ mount, want string }{
		{"/pgdata", "raid5 md0 is being reshaped (raid_disks 4 -> 5, chunk 64 KiB -> 128 KiB, layout left-asymmetric -> left-symmetric)"},
		{"/wal", "raid10 md1 is being reshaped (raid_disks 2 -> 3)"},
	} {
		v := volumeAt(vols, tc.mount)
		if v == nil {
			t.Fatalf("Discover(md-reshape) has no volume at %s", tc.mount)
		}
		a := align.Evaluate(v)
		var found bool
		for _, f := range a.GetFindings() {
			if f.GetRule() == align.RuleRAIDReshapeRunning {
				found = true
				if !strings.Contains(f.GetMessage(), tc.want) {
					t.Errorf("Evaluate(%s) reshape finding = %q, want it to contain %q", tc.mount, f.GetMessage(), tc.want)
				}
			}
		}
		if !found {
			t.Errorf("Evaluate(%s) findings = %v, want %s", tc.mount, a.GetFindings(), align.RuleRAIDReshapeRunning)
		}
	}
	if a := align.Evaluate(volumeAt(vols, "/pgdata")); a.GetStripeUnitBytes() != 128<<10 {
		t.Errorf("Evaluate(/pgdata) stripe unit = %d, want the new 128 KiB", a.GetStripeUnitBytes())
	}
}

// TestProcMountsFiltered: on a kernel with /proc/mounts only, a source
// that names no block device sysfs knows (/dev/root) is filtered as an
// unknown device, and the volumes found by name are not.
func TestProcMountsFiltered(t *testing.T) {
	t.Parallel()
	res, err := InspectVolumes(context.Background(), treeOptions(loadTree(t, "rhel5-2.6.18")))
	if err != nil {
		t.Fatalf("InspectVolumes(rhel5-2.6.18) error = %v", err)
	}
	reasons := map[string]string{}
	for _, f := range res.Filtered {
		reasons[f.MountPoint] = f.Reason
	}
	if reasons["/"] != FilterUnknownDevice {
		t.Errorf("InspectVolumes(rhel5-2.6.18) filtered / as %q, want %q (filtered: %+v)", reasons["/"], FilterUnknownDevice, res.Filtered)
	}
	for _, mp := range []string{"/boot", "/var/lib/mysql"} {
		if r, ok := reasons[mp]; ok {
			t.Errorf("InspectVolumes(rhel5-2.6.18) filtered %s (%s), want it a volume", mp, r)
		}
	}
}
