package geometry

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/plumbline/plumbline/internal/labels"
)

func TestParseMountInfoLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line    string
		want    mountInfo
		wantErr bool
	}{
		{line: `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue`,
			want: mountInfo{ID: "36", Major: 98, Minor: 0, Root: "/mnt1", MountPoint: "/mnt2", Options: "rw,noatime", FSType: "ext3", Source: "/dev/root", SuperOptions: "rw,errors=continue"}},
		{line: `40 25 9:0 / /data\040dir rw - xfs /dev/md0 rw,sunit=1024`,
			want: mountInfo{ID: "40", Major: 9, Root: "/", MountPoint: "/data dir", Options: "rw", FSType: "xfs", Source: "/dev/md0", SuperOptions: "rw,sunit=1024"}},
		{line: `40 25 9:0 / /x rw shared:1 master:2 - ext4 /dev/md0`,
			want: mountInfo{ID: "40", Major: 9, Root: "/", MountPoint: "/x", Options: "rw", FSType: "ext4", Source: "/dev/md0"}},
		{line: `40 25 9:0 / /x rw ext4 /dev/md0 rw`, wantErr: true},
		{line: `40 25 nine / /x rw - ext4 /dev/md0 rw`, wantErr: true},
		{line: `40 25`, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.line, func(t *testing.T) {
			got, err := parseMountInfoLine(tc.line)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseMountInfoLine(%q) error = %v, want error %v", tc.line, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); !tc.wantErr && diff != "" {
				t.Errorf("parseMountInfoLine(%q) (-want +got):\n%s", tc.line, diff)
			}
		})
	}
}

// TestParseSysfsUintPair: md attributes read "new (old)" during a reshape.
func TestParseSysfsUintPair(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in        string
		cur, prev uint64
		reshaping bool
		bad       bool
	}{
		{in: "4\n", cur: 4},
		{in: "11 (10)\n", cur: 11, prev: 10, reshaping: true},
		{in: "131072 (65536)\n", cur: 131072, prev: 65536, reshaping: true},
		{in: "2 (0)", cur: 2, prev: 0, reshaping: true},
		{in: "0\n", cur: 0},
		{in: "", bad: true},
		{in: "11 10\n", bad: true},
		{in: "11 (10\n", bad: true},
		{in: "11 (x)\n", bad: true},
		{in: "11 ()\n", bad: true},
		{in: "(10)\n", bad: true},
		{in: "11  (10)\n", bad: true},
		{in: "-1 (10)\n", bad: true},
		{in: "11 (18446744073709551616)\n", bad: true},
	}
	for _, tt := range tests {
		cur, prev, reshaping, err := parseSysfsUintPair([]byte(tt.in))
		if tt.bad {
			if err == nil {
				t.Errorf("parseSysfsUintPair(%q) = %d, %d, %v, want an error", tt.in, cur, prev, reshaping)
			}
			continue
		}
		if err != nil || cur != tt.cur || prev != tt.prev || reshaping != tt.reshaping {
			t.Errorf("parseSysfsUintPair(%q) = %d, %d, %v, %v, want %d, %d, %v", tt.in, cur, prev, reshaping, err, tt.cur, tt.prev, tt.reshaping)
		}
	}
}

func TestMDLayout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		level      string
		layout     uint64
		disks      uint64
		wantDesc   string
		wantCopies uint64
		wantData   uint64
	}{
		{"raid10", 0x102, 4, "near=2", 2, 2},
		{"raid10", 0x201, 4, "far=2", 2, 2},
		{"raid10", 0x10201, 6, "offset=2", 2, 3},
		{"raid10", 0x103, 6, "near=3", 3, 2},
		{"raid5", 2, 4, "left-symmetric", 0, 3},
		{"raid6", 2, 6, "left-symmetric", 0, 4},
		{"raid6", 8, 6, "rotating-zero-restart", 0, 4},
		{"raid0", 0, 3, "", 0, 3},
		{"raid1", 0, 2, "", 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.level+"/"+tc.wantDesc, func(t *testing.T) {
			desc, copies, _ := mdLayout(tc.level, tc.layout)
			data, err := mdDataDisks(tc.level, tc.disks, copies)
			if desc != tc.wantDesc || copies != tc.wantCopies || data != tc.wantData || err != nil {
				t.Errorf("mdLayout(%s, %#x) = %q, %d copies, %d data disks (%v), want %q, %d, %d",
					tc.level, tc.layout, desc, copies, data, err, tc.wantDesc, tc.wantCopies, tc.wantData)
			}
		})
	}
}

func TestDeclaredDataDisks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		level        string
		disks, spans uint32
		want         uint32
		wantErr      bool
	}{
		{"raid10", 8, 0, 4, false},
		{"raid5", 5, 0, 4, false},
		{"raid6", 8, 0, 6, false},
		{"raid50", 8, 2, 6, false},
		{"raid60", 12, 2, 8, false},
		{"raid50", 8, 0, 0, true},
		{"raid7", 8, 0, 0, true},
	}
	for _, tc := range tests {
		got, err := declaredDataDisks(tc.level, tc.disks, tc.spans)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("declaredDataDisks(%s, %d, %d) = %d, %v, want %d (error %v)", tc.level, tc.disks, tc.spans, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestLVMMetadata(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		src        string
		dmName     string
		wantOffset uint64
		wantErr    bool
	}{
		{name: "striped", src: `vg0 { extent_size = 8192 physical_volumes { pv0 { pe_start = 2048 } pv1 { pe_start = 2048 } }
			logical_volumes { data { segment1 { start_extent = 0 extent_count = 10 type = "striped" stripe_count = 2 stripe_size = 128
			stripes = ["pv0", 4, "pv1", 4] } } } }`, dmName: "vg0-data", wantOffset: 2048*512 + 4*8192*512},
		{name: "dashes", src: `# comment
			my-vg { id = "x" extent_size = 2048 physical_volumes { pv0 { device = "/dev/sdb" pe_start = 384 } }
			logical_volumes { my-lv { segment2 { start_extent = 5 extent_count = 5 type = "striped" stripe_count = 1 stripes = ["pv0", 0] }
			segment1 { start_extent = 0 extent_count = 5 type = "striped" stripe_count = 1 stripes = ["pv0", 7] } } } }`,
			dmName: "my--vg-my--lv", wantOffset: 384*512 + 7*2048*512},
		{name: "pe_start differs", src: `vg0 { extent_size = 8192 physical_volumes { pv0 { pe_start = 2048 } pv1 { pe_start = 4096 } }
			logical_volumes { data { segment1 { type = "striped" stripe_count = 2 stripes = ["pv0", 0, "pv1", 0] } } } }`, dmName: "vg0-data", wantErr: true},
		{name: "unterminated", src: `vg0 { extent_size = 8192 `, wantErr: true},
		{name: "bare word", src: `vg0 { extent_size = big }`, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vgs, err := parseLVMMetadata([]byte(tc.src))
			var off uint64
			if err == nil {
				err = errNoLV
				for _, vg := range vgs {
					for _, lv := range vg.LVs {
						if lvmDMName(vg.Name, lv.Name) == tc.dmName {
							off, err = vg.lvmDataOffset(lv)
						}
					}
				}
			}
			if (err != nil) != tc.wantErr || off != tc.wantOffset {
				t.Errorf("parseLVMMetadata(%s) offset of %s = %d, %v, want %d (error %v)", tc.name, tc.dmName, off, err, tc.wantOffset, tc.wantErr)
			}
		})
	}
	for _, name := range []string{"vg--db-data", "vg0-data", "a-b--c"} {
		vg, lv, _ := splitDMName(name)
		if got := lvmDMName(vg, lv); got != name {
			t.Errorf("lvmDMName(splitDMName(%s)) = %s", name, got)
		}
	}
}

func TestSuperblocks(t *testing.T) {
	t.Parallel()
	ext4 := make([]byte, 4096)
	sb := ext4[1024:]
	le := binary.LittleEndian
	le.PutUint32(sb[0x04:], 262144)
	le.PutUint32(sb[0x18:], 2) // 4096
	le.PutUint16(sb[0x38:], 0xEF53)
	copy(sb[0x68:], []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	le.PutUint16(sb[0x164:], 16)
	le.PutUint32(sb[0x170:], 32)
	xfs := make([]byte, 4096)
	be := binary.BigEndian
	copy(xfs, "XFSB")
	be.PutUint32(xfs[4:], 4096)
	be.PutUint64(xfs[8:], 1000)
	be.PutUint32(xfs[0xB8:], 16)
	be.PutUint32(xfs[0xBC:], 32)
	tests := []struct {
		fsType  string
		dev     []byte
		want    fsSuperblock
		wantErr bool
	}{
		{"ext4", ext4, fsSuperblock{BlockSize: 4096, StripeUnit: 64 << 10, StripeWidth: 128 << 10, UUID: "01020304-0506-0708-090a-0b0c0d0e0f10", Size: 1 << 30}, false},
		{"xfs", xfs, fsSuperblock{BlockSize: 4096, StripeUnit: 64 << 10, StripeWidth: 128 << 10, Size: 4096000}, false},
		{"xfs", ext4, fsSuperblock{}, true},
		{"ext4", xfs, fsSuperblock{}, true},
		{"ext4", ext4[:1500], fsSuperblock{}, true},
	}
	for _, tc := range tests {
		got, _, err := parseSuperblock(tc.fsType, tc.dev)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("parseSuperblock(%s, %d bytes) = %+v, %v, want %+v (error %v)", tc.fsType, len(tc.dev), got, err, tc.want, tc.wantErr)
		}
	}
}

var errNoLV = os.ErrNotExist

func FuzzParseExt4Superblock(f *testing.F) {
	seedSuperblocks(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		sb, err := parseExt4Superblock(b)
		if err == nil && (sb.BlockSize < 1024 || sb.BlockSize > 65536) {
			t.Errorf("parseExt4Superblock accepted block size %d", sb.BlockSize)
		}
	})
}

func FuzzParseXFSSuperblock(f *testing.F) {
	seedSuperblocks(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		sb, err := parseXFSSuperblock(b)
		if err == nil && (sb.BlockSize < 512 || sb.BlockSize > 65536) {
			t.Errorf("parseXFSSuperblock accepted block size %d", sb.BlockSize)
		}
	})
}

// seedSuperblocks seeds with the real superblocks captured from loop devices.
func seedSuperblocks(f *testing.F) {
	spec, err := os.ReadFile(filepath.Join("testdata", "trees", "captured-loop.tree"))
	if err != nil {
		f.Fatal(err)
	}
	root := f.TempDir()
	buildTree(f, spec, root)
	for _, n := range []string{"loop0p1", "loop1p1"} {
		if b, err := os.ReadFile(filepath.Join(root, "dev", n)); err == nil {
			f.Add(b)
		}
	}
	f.Add(make([]byte, 4096))
	f.Add([]byte("XFSB"))
}

func FuzzParseSysfsValue(f *testing.F) {
	for _, s := range []string{"512\n", "-1\n", "4096", "", "\n", "raid10\n", "18446744073709551615\n", "1 2\n", "8:17\n",
		"MAJOR=8\nMINOR=1\nDEVTYPE=partition\nPARTN=1\n", "=x\nA\nA=1\nA=2", "11 (10)\n", "131072 (65536)\n", "2 (", "1 ()"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, nerr := parseSysfsUint(b)
		cur, prev, pair, perr := parseSysfsUintPair(b)
		// A single number reads the same through both parsers.
		if nerr == nil && (perr != nil || cur != n || pair) {
			t.Fatalf("parseSysfsUint(%q) = %d but parseSysfsUintPair = %d, %d, %v, %v", b, n, cur, prev, pair, perr)
		}
		if perr == nil && !pair && nerr != nil {
			t.Fatalf("parseSysfsUintPair(%q) = %d (one value) but parseSysfsUint fails: %v", b, cur, nerr)
		}
		parseSysfsInt(b)
		if s, err := parseSysfsString(b); err == nil && labels.CheckText(s) != nil {
			t.Fatalf("parseSysfsString(%q) = %q, which the server refuses as not printable", b, s)
		}
		parseDevNumber(string(b))
		if ue := parseUevent(b); len(ue) > maxUeventKeys {
			t.Fatalf("parseUevent kept %d keys, more than %d", len(ue), maxUeventKeys)
		}
		if n, ok := partitionNumberFromName(string(b), "sda"); ok != (n > 0) {
			t.Fatalf("partitionNumberFromName(%q, sda) = %d, %v", b, n, ok)
		}
	})
}

func FuzzParseMountInfo(f *testing.F) {
	f.Add([]byte("36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n"))
	f.Add([]byte("40 25 9:0 / /data\\040x rw - xfs /dev/md0 rw,sunit=1024,swidth=2048\n41 25 0:4 / /proc rw - proc proc rw\n"))
	f.Add([]byte("1 2 3:4 a b c - \\1 \\777 \\"))
	f.Add([]byte("/dev/sda1 /boot ext3 rw,data=ordered 0 0\nrootfs / rootfs rw 0 0\n/dev/md0 /var/lib/my\\040sql ext3 rw 0 0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		mounts, _ := parseMountInfo(b)
		for _, m := range mounts {
			mountOption(m.SuperOptions, "sunit")
		}
		// /proc/mounts of kernels before 2.6.26: no device numbers.
		pm, _ := parseProcMounts(b)
		for _, m := range pm {
			if m.Major != 0 || m.Minor != 0 || m.Root != "/" {
				t.Fatalf("parseProcMounts(%q) = %+v: a mounts line has no device number and root /", b, m)
			}
		}
	})
}

func FuzzParseLVMMetadata(f *testing.F) {
	f.Add([]byte(`vg0 { extent_size = 8192 physical_volumes { pv0 { pe_start = 2048 } }
		logical_volumes { data { segment1 { start_extent = 0 type = "striped" stripe_count = 1 stripes = ["pv0", 10] } } } }`))
	f.Add([]byte(`a { b { c { d = [1, "x", 2.5] e = "q\"uote" } } } # tail`))
	f.Add([]byte(`vg0 { extent_size = 18446744073709551615 physical_volumes { pv0 { pe_start = 9223372036854775807 } }
		logical_volumes { l { segment1 { stripes = ["pv0", 9223372036854775807] } } } }`))
	f.Fuzz(func(t *testing.T, b []byte) {
		vgs, err := parseLVMMetadata(b)
		if err != nil {
			return
		}
		for _, vg := range vgs {
			for _, lv := range vg.LVs {
				vg.lvmDataOffset(lv)
				splitDMName(lvmDMName(vg.Name, lv.Name))
			}
		}
	})
}

// A sysfs string the server would refuse (a control or bidi character in
// a disk's model) is an unknown value with its reason, not a value that
// gets the whole geometry snapshot rejected.
func TestParseSysfsStringPrintable(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"Samsung SSD\x1b[2J\n", "disk\u202egpj\n", "tab\there\n"} {
		if s, err := parseSysfsString([]byte(in)); err == nil {
			t.Errorf("parseSysfsString(%q) = %q, want an error", in, s)
		}
	}
	if s, err := parseSysfsString([]byte("  Samsung SSD 870 EVO 1TB \n")); err != nil || s != "Samsung SSD 870 EVO 1TB" {
		t.Errorf("parseSysfsString(model) = %q, %v", s, err)
	}
}
