package baseline

import (
	"testing"

	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

const (
	kib = 1 << 10
	mib = 1 << 20
)

func u64(v uint64) *uint64 { return &v }
func bp(v bool) *bool      { return &v }

func fsLayer(typ string, block uint32) *plumblinev1.Layer {
	return &plumblinev1.Layer{Kind: "filesystem", Device: "/dev/x", FsType: typ, BlockSizeBytes: block, OffsetBytes: u64(0), Source: "superblock"}
}

func partition(dev string, offset uint64) *plumblinev1.Layer {
	return &plumblinev1.Layer{Kind: "partition", Device: dev, OffsetBytes: u64(offset), LogicalSectorBytes: 512, Source: "sysfs"}
}

func disk(dev, model string, rotational *bool) *plumblinev1.Layer {
	return &plumblinev1.Layer{Kind: "disk", Device: dev, Model: model, Rotational: rotational, LogicalSectorBytes: 512,
		PhysicalSectorBytes: 4096, MinIoBytes: 4096, OffsetBytes: u64(0), Source: "sysfs"}
}

// declaredRAID is a hardware array the operator declared, with its disks'
// model declared as well.
func declaredRAID(dev, level string, unit uint64, disks, data uint32, model string) *plumblinev1.Layer {
	l := &plumblinev1.Layer{Kind: "raid", Device: dev, RaidLevel: level, StripeUnitBytes: unit, RaidDisks: disks, RaidDataDisks: data,
		LogicalSectorBytes: 512, PhysicalSectorBytes: 512, OffsetBytes: u64(0), Source: "declared", Model: model}
	if model != "" {
		l.Sources = map[string]string{"model": "declared"}
	}
	return l
}

func volume(fsType string, cluster uint32, layers ...*plumblinev1.Layer) *plumblinev1.Volume {
	return &plumblinev1.Volume{MountPoint: "/data", Device: "/dev/sdb1",
		Filesystem: &plumblinev1.Filesystem{Type: fsType, BlockSizeBytes: cluster}, Layers: layers}
}

// sqlVolume is the published benchmarks' setup: NTFS on a partition at
// offset on a declared hardware array of 15K SAS disks.
func sqlVolume(level string, stripe uint64, disks, data uint32, offset uint64, cluster uint32) *plumblinev1.Volume {
	return volume("ntfs", cluster, fsLayer("ntfs", cluster), partition("sdb1", offset),
		declaredRAID("sdb", level, stripe, disks, data, "SEAGATE ST300MP0005 15K SAS"))
}

func TestMediaOf(t *testing.T) {
	t.Parallel()
	md := &plumblinev1.Layer{Kind: "raid", Device: "md0", RaidLevel: "raid1", StripeUnitBytes: 0, Below: []string{"sda1", "nvme0n1p1"}, Source: "sysfs"}
	tests := []struct {
		name string
		vol  *plumblinev1.Volume
		want Media
	}{
		{"nvme by name", volume("xfs", 4*kib, fsLayer("xfs", 4*kib), partition("nvme0n1p1", mib), disk("nvme0n1", "Samsung SSD 980 PRO", bp(false))), NVMe},
		{"sata ssd", volume("ext4", 4*kib, fsLayer("ext4", 4*kib), partition("sda1", mib), disk("sda", "Samsung SSD 870 EVO 1TB", bp(false))), SATASSD},
		{"sas ssd by family", volume("xfs", 4*kib, fsLayer("xfs", 4*kib), partition("sda1", mib), disk("sda", "KIOXIA KPM6XRUG1T92", bp(false))), SASSSD},
		{"15K by family", volume("xfs", 4*kib, fsLayer("xfs", 4*kib), partition("sda1", mib), disk("sda", "ST600MP0006", bp(true))), HDD15K},
		{"10K by family", volume("xfs", 4*kib, fsLayer("xfs", 4*kib), partition("sda1", mib), disk("sda", "HGST HUC101212CSS600", bp(true))), HDD10K},
		{"plain rotational is 7200", volume("ext4", 4*kib, fsLayer("ext4", 4*kib), partition("sda1", mib), disk("sda", "WDC WD40EFRX-68N32N0", bp(true))), HDD7200},
		{"rotational unknown, no model", volume("ext4", 4*kib, fsLayer("ext4", 4*kib), partition("sda1", mib), disk("sda", "", nil)), UnknownMedia},
		{"rotational unknown, 10K model", volume("ext4", 4*kib, fsLayer("ext4", 4*kib), partition("sda1", mib), disk("sda", "ST1200MM0088", nil)), HDD10K},
		{"cloud disk on nvme", volume("xfs", 4*kib, fsLayer("xfs", 4*kib), partition("nvme1n1p1", mib), disk("nvme1n1", "Amazon Elastic Block Store", bp(false))), UnknownMedia},
		{"loop device", volume("ext4", 4*kib, fsLayer("ext4", 4*kib), disk("loop3", "", bp(false))), UnknownMedia},
		{"declared model wins over sysfs rotational", sqlVolume("raid10", 64*kib, 4, 2, mib, 64*kib), HDD15K},
		{"mirror of hdd and nvme is the slower", volume("xfs", 4*kib, fsLayer("xfs", 4*kib), md,
			partition("sda1", mib), disk("sda", "", bp(true)), partition("nvme0n1p1", mib), disk("nvme0n1", "", bp(false))), HDD7200},
		{"no layers", &plumblinev1.Volume{}, UnknownMedia},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MediaOf(tt.vol); got != tt.want {
				t.Errorf("MediaOf(%s) = %q, want %q", tt.name, got, tt.want)
			}
		})
	}
}

func TestProfileOf(t *testing.T) {
	t.Parallel()
	misaligned := sqlVolume("raid10", 64*kib, 4, 2, 36*kib, 64*kib)
	unknownOff := volume("xfs", 4*kib, fsLayer("xfs", 4*kib),
		&plumblinev1.Layer{Kind: "partition", Device: "sdb1", Source: "sysfs"}, // offset unreadable
		declaredRAID("sdb", "raid5", 128*kib, 5, 4, ""))
	tests := []struct {
		name    string
		vol     *plumblinev1.Volume
		want    string
		split8K float64
	}{
		{"nvme single disk", volume("xfs", 4*kib, fsLayer("xfs", 4*kib), partition("nvme0n1p1", mib), disk("nvme0n1", "", bp(false))), "nvme/none/-/aligned/4KiB", 0},
		{"raid10 64K at 31.5K", sqlVolume("raid10", 64*kib, 4, 2, 63*512, 64*kib), "hdd-15k/raid10/64KiB/legacy-31.5k/64KiB", 0.125},
		{"raid5 128K at 31.5K", sqlVolume("RAID5", 128*kib, 5, 4, 63*512, 64*kib), "hdd-15k/raid5/128KiB/legacy-31.5k/64KiB", 0.0625},
		{"raid10 64K at 1M", sqlVolume("raid10", 64*kib, 4, 2, mib, 64*kib), "hdd-15k/raid10/64KiB/aligned/64KiB", 0},
		{"raid10 64K at 36K", misaligned, "hdd-15k/raid10/64KiB/misaligned-other/64KiB", 0.125},
		{"legacy offset without a stripe", volume("ntfs", 4*kib, fsLayer("ntfs", 4*kib), partition("sda1", 63*512), disk("sda", "", bp(true))), "hdd-7200/none/-/legacy-31.5k/4KiB", 0},
		{"offset unreadable", unknownOff, "unknown/raid5/128KiB/unknown/4KiB", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := ProfileOf(judged(tt.vol))
			if got := p.Key(); got != tt.want {
				t.Errorf("ProfileOf(%s).Key() = %q, want %q", tt.name, got, tt.want)
			}
			if p.Split8K != tt.split8K {
				t.Errorf("ProfileOf(%s).Split8K = %v, want %v", tt.name, p.Split8K, tt.split8K)
			}
			// The judged record's key and split columns give the profile back.
			a := align.Evaluate(tt.vol)
			var split, gran [vocab.NumIOSizes]float64
			for i := range split {
				split[i], gran[i] = -1, -1
				if f, ok := a.GetSplitFraction()[vocab.IOSize(i)]; ok {
					split[i] = f
				}
				if f, ok := a.GetGranularitySplitFraction()[vocab.IOSize(i)]; ok {
					gran[i] = f
				}
			}
			if got, err := JudgedProfile(p.Key(), split, gran); err != nil || got != p {
				t.Errorf("JudgedProfile(%q, %v, %v) = %+v, %v; want %+v", p.Key(), split, gran, got, err, p)
			}
		})
	}
}

// JudgedProfile reads back only what Key writes; a RAID level may hold "/".
func TestJudgedProfileKeys(t *testing.T) {
	t.Parallel()
	var unknown [vocab.NumIOSizes]float64
	for i := range unknown {
		unknown[i] = -1
	}
	p, err := JudgedProfile("nvme/raid1/x/-/aligned/4KiB", unknown, unknown)
	if want := (Profile{Media: NVMe, RAIDLevel: "raid1/x", Offset: Aligned, AllocationUnit: 4 * kib}); err != nil || p != want {
		t.Errorf("JudgedProfile(raid level with a slash) = %+v, %v; want %+v", p, err, want)
	}
	for _, key := range []string{"", "unknown", "nvme/none/-/aligned", "ssd/none/-/aligned/4KiB", "nvme/none/64k/aligned/4KiB",
		"nvme/none/-/sideways/4KiB", "nvme//-/aligned/4KiB", "nvme/none/-/aligned/8GiB", "nvme/none/x/aligned/4KiB"} {
		if p, err := JudgedProfile(key, unknown, unknown); err == nil {
			t.Errorf("JudgedProfile(%q) = %+v, want an error", key, p)
		}
	}
}

func TestParseMedia(t *testing.T) {
	t.Parallel()
	for _, m := range MediaClasses() {
		if got, err := ParseMedia(string(m)); err != nil || got != m {
			t.Errorf("ParseMedia(%q) = %q, %v, want %q", m, got, err, m)
		}
	}
	if _, err := ParseMedia("ssd"); err == nil {
		t.Errorf("ParseMedia(%q) = nil error, want one", "ssd")
	}
}

// judged is v with the alignment the judge would give it: its own when it
// carries one, else the rules' (ProfileOf applies no rule itself).
func judged(v *plumblinev1.Volume) (*plumblinev1.Volume, *plumblinev1.Alignment) {
	if a := v.GetAlignment(); a != nil {
		return v, a
	}
	return v, align.Evaluate(v)
}
