package geometry

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/bytesize"
	"github.com/plumbline/plumbline/internal/render"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

var updateWindows = flag.Bool("update-windows", false, "rewrite testdata/windows/*/golden.json from the current output")

// fixtureSource is a winSource over a testdata/windows/<scenario>
// directory (see mkfixtures.py there): volumes.json, spaces.json and one
// annotated hex file per IOCTL answer, or a .err file with the error.
type fixtureSource struct {
	dir   string
	calls []string // every IOCTL asked for, in order
}

var _ winSource = (*fixtureSource)(nil)

func (f *fixtureSource) volumes(context.Context) ([]winVolume, error) {
	b, err := os.ReadFile(filepath.Join(f.dir, "volumes.json"))
	if err != nil {
		return nil, err
	}
	var vs []winVolume
	if err := json.Unmarshal(b, &vs); err != nil {
		return nil, fmt.Errorf("volumes.json: %w", err)
	}
	return vs, nil
}

func volumeKey(v winVolume) string {
	return strings.TrimSuffix(strings.TrimPrefix(v.GUIDPath, `\\?\`), `\`)
}

// answer reads <dir>/<name>.hex, or returns <dir>/<name>.err's text as the
// error; a call without either is what a driver without the IOCTL says.
func (f *fixtureSource) answer(dir, name string) ([]byte, error) {
	f.calls = append(f.calls, filepath.Join(filepath.Base(dir), name))
	p := filepath.Join(f.dir, dir, name)
	if b, err := os.ReadFile(p + ".err"); err == nil {
		return nil, errors.New(strings.TrimSpace(string(b)))
	}
	b, err := os.ReadFile(p + ".hex")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errors.New("Incorrect function.")
	}
	if err != nil {
		return nil, err
	}
	return parseHexFixture(b)
}

func (f *fixtureSource) volumeIoctl(v winVolume, code uint32, in []byte) ([]byte, error) {
	name := ioctlName(code)
	if code == ioctlVolumeLogicalToPhysical {
		name += fmt.Sprintf("-%d", le.Uint64(in))
	}
	return f.answer(filepath.Join("volumes", volumeKey(v)), name)
}

func (f *fixtureSource) diskIoctl(disk uint32, code uint32, in []byte) ([]byte, error) {
	name := ioctlName(code)
	if code == ioctlStorageQueryProperty {
		name += fmt.Sprintf("-%d", le.Uint32(in))
	}
	return f.answer(filepath.Join("disks", physicalDriveName(disk)), name)
}

func (f *fixtureSource) virtualDisks(context.Context) ([]spacesVirtualDisk, error) {
	f.calls = append(f.calls, "spaces.json")
	b, err := os.ReadFile(filepath.Join(f.dir, "spaces.json"))
	if err != nil {
		return nil, err
	}
	return decodeVirtualDisksJSON(b)
}

// parseHexFixture reads whitespace-separated hex bytes; '#' starts a comment.
func parseHexFixture(b []byte) ([]byte, error) {
	var out []byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		for _, tok := range strings.Fields(line) {
			v, err := hex.DecodeString(tok)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			out = append(out, v...)
		}
	}
	return out, sc.Err()
}

func loadWindowsFixture(t *testing.T, name string, opts Options) (Result, *fixtureSource) {
	t.Helper()
	src := &fixtureSource{dir: filepath.Join("testdata", "windows", name)}
	res, err := discoverWindows(context.Background(), opts, src)
	if err != nil {
		t.Fatalf("discoverWindows(%s): %v", name, err)
	}
	return res, src
}

// checkWindowsGolden compares the inventory (volumes with alignment) with
// testdata/windows/<name>/golden.json, the `agent inspect --format json` shape.
func checkWindowsGolden(t *testing.T, name string, vols []*plumblinev1.Volume) {
	t.Helper()
	got, err := render.JSON(&plumblinev1.Inventory{Volumes: vols})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join("testdata", "windows", name, "golden.json")
	if *updateWindows {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -run Windows ./internal/agent/geometry -update-windows)", err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("%s: inventory differs from golden.json (-want +got):\n%s", name, d)
	}
}

func findingRules(a *plumblinev1.Alignment) map[string]*plumblinev1.Finding {
	m := map[string]*plumblinev1.Finding{}
	for _, f := range a.GetFindings() {
		m[f.GetRule()] = f
	}
	return m
}

func TestWindowsFixtures(t *testing.T) {
	t.Parallel()
	type want struct {
		mount, fsType     string
		cluster           uint32
		clusterSource     string
		kinds             []string // layer kinds, top to bottom
		verdict           string
		dataOffset        uint64
		stripeUnit        uint64
		stripeSource      string
		split8K, split64K float64
		rmw8K             float64
		physical          uint32
		rules             []string
		remedyHas         map[string]string // rule -> substring of its remediation
		warnings          int
	}
	tests := []struct {
		fixture  string
		declared []DeclaredDevice
		want     want
	}{
		{
			fixture:  "2003-mbr-raid10",
			declared: []DeclaredDevice{{Device: "PhysicalDrive1", RAID: DeclaredRAID{Level: "raid10", StripeUnit: 64 * bytesize.KiB, Disks: 4}}},
			want: want{
				mount: `D:\`, fsType: "ntfs", cluster: 4096, clusterSource: SourceWin32,
				kinds:   []string{KindFilesystem, KindPartition, KindRAID},
				verdict: align.Misaligned, dataOffset: 32256, stripeUnit: 65536, stripeSource: SourceDeclared,
				// 4 KiB clusters: of the 12.5% / 100% that split in all, the
				// offset causes 1/16 each (the rest splits at any offset).
				split8K: 0.0625, split64K: 0.0625, physical: 512,
				rules: []string{align.RulePartitionOffsetStripeUnit, align.RuleAllocationUnitBelowRecommended},
				remedyHas: map[string]string{
					align.RulePartitionOffsetStripeUnit:      "align=1024",
					align.RuleAllocationUnitBelowRecommended: "/A:64K",
				},
			},
		},
		{
			fixture:  "2008-gpt-64k",
			declared: []DeclaredDevice{{Serial: "PDNMF0ARH8A0PL", RAID: DeclaredRAID{Level: "raid5", StripeUnit: 128 * bytesize.KiB, Disks: 5}}},
			want: want{
				mount: `E:\`, fsType: "ntfs", cluster: 65536, clusterSource: SourceIoctl,
				kinds:   []string{KindFilesystem, KindPartition, KindRAID},
				verdict: align.Aligned, dataOffset: 1 << 20, stripeUnit: 131072, stripeSource: SourceDeclared,
				physical: 512,
			},
		},
		{
			fixture: "512e-mbr-63",
			want: want{
				mount: `F:\`, fsType: "ntfs", cluster: 4096, clusterSource: SourceIoctl,
				kinds:   []string{KindFilesystem, KindPartition, KindDisk},
				verdict: align.Misaligned, physical: 4096, rmw8K: 1,
				rules: []string{align.RuleOffsetPhysicalSector, align.RuleStripeUnitUnknown, align.RuleAllocationUnitBelowRecommended},
				remedyHas: map[string]string{
					align.RuleOffsetPhysicalSector: "select disk 3; create partition primary align=1024",
					align.RuleStripeUnitUnknown:    "device: PhysicalDrive3",
				},
			},
		},
		{
			fixture: "spaces-striped",
			want: want{
				mount: `S:\`, fsType: "refs", cluster: 65536, clusterSource: SourceIoctl,
				kinds:   []string{KindFilesystem, KindPartition, KindRAID},
				verdict: align.Aligned, dataOffset: 135266304, stripeUnit: 262144, stripeSource: SourceWMI,
				physical: 4096,
			},
		},
		{
			fixture: "dynamic-striped",
			want: want{
				mount: `G:\`, fsType: "ntfs", cluster: 65536, clusterSource: SourceIoctl,
				kinds:   []string{KindFilesystem, KindRAID, KindDisk, KindDisk},
				verdict: align.Aligned, dataOffset: 0, stripeUnit: 65536, stripeSource: SourceIoctl,
				physical: 512,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			res, _ := loadWindowsFixture(t, tc.fixture, Options{Declared: tc.declared})
			if len(res.Warnings) != tc.want.warnings {
				t.Errorf("warnings = %q, want %d", res.Warnings, tc.want.warnings)
			}
			if len(res.Volumes) != 1 {
				t.Fatalf("got %d volumes, want 1", len(res.Volumes))
			}
			v := res.Volumes[0]
			w := tc.want
			if v.GetMountPoint() != w.mount {
				t.Errorf("mount point = %q, want %q", v.GetMountPoint(), w.mount)
			}
			fsys := v.GetFilesystem()
			if fsys.GetType() != w.fsType || fsys.GetBlockSizeBytes() != w.cluster || fsys.GetSources()["block_size_bytes"] != w.clusterSource {
				t.Errorf("filesystem = %s, %d-byte clusters from %s; want %s, %d from %s",
					fsys.GetType(), fsys.GetBlockSizeBytes(), fsys.GetSources()["block_size_bytes"], w.fsType, w.cluster, w.clusterSource)
			}
			var kinds []string
			for _, l := range v.GetLayers() {
				kinds = append(kinds, l.GetKind())
			}
			if d := cmp.Diff(w.kinds, kinds); d != "" {
				t.Errorf("layer kinds (-want +got):\n%s", d)
			}

			a := align.Evaluate(v)
			v.Alignment = a
			if a.GetVerdict() != w.verdict {
				t.Errorf("Evaluate() verdict = %s, want %s; findings: %v", a.GetVerdict(), w.verdict, a.GetFindings())
			}
			if w.stripeUnit != 0 {
				if a.GetStripeUnitBytes() != w.stripeUnit || a.GetStripeUnitSource() != w.stripeSource {
					t.Errorf("stripe unit = %d from %s, want %d from %s", a.GetStripeUnitBytes(), a.GetStripeUnitSource(), w.stripeUnit, w.stripeSource)
				}
				if a.DataOffsetBytes == nil || a.GetDataOffsetBytes() != w.dataOffset {
					t.Errorf("data offset = %v, want %d", a.DataOffsetBytes, w.dataOffset)
				}
				if got := a.GetSplitFraction()[8<<10]; got != w.split8K {
					t.Errorf("split fraction of 8 KiB I/Os = %v, want %v", got, w.split8K)
				}
				if got := a.GetSplitFraction()[64<<10]; got != w.split64K {
					t.Errorf("split fraction of 64 KiB I/Os = %v, want %v", got, w.split64K)
				}
			}
			if a.GetPhysicalSectorBytes() != w.physical {
				t.Errorf("physical sector = %d, want %d", a.GetPhysicalSectorBytes(), w.physical)
			}
			if got := a.GetSectorRmwFraction()[8<<10]; got != w.rmw8K {
				t.Errorf("read-modify-write fraction of 8 KiB writes = %v, want %v", got, w.rmw8K)
			}
			rules := findingRules(a)
			var gotRules []string
			for _, f := range a.GetFindings() {
				gotRules = append(gotRules, f.GetRule())
			}
			if d := cmp.Diff(w.rules, gotRules); d != "" {
				t.Errorf("finding rules (-want +got):\n%s", d)
			}
			for rule, sub := range w.remedyHas {
				if f := rules[rule]; f == nil || !strings.Contains(f.GetRemediation(), sub) {
					t.Errorf("remediation of %s = %q, want it to contain %q", rule, f.GetRemediation(), sub)
				}
			}
			checkWindowsGolden(t, tc.fixture, res.Volumes)
		})
	}
}

// TestWindowsLayers pins the layer values each fixture's buffers carry.
func TestWindowsLayers(t *testing.T) {
	t.Parallel()
	res, _ := loadWindowsFixture(t, "2003-mbr-raid10", Options{Declared: []DeclaredDevice{{Device: `\\.\PHYSICALDRIVE1`, RAID: DeclaredRAID{Level: "raid10", StripeUnit: 64 * bytesize.KiB, Disks: 4}}}})
	ls := res.Volumes[0].GetLayers()
	p, d := ls[1], ls[2]
	if p.GetDevice() != "Harddisk1Partition1" || p.GetOffsetBytes() != 32256 || p.GetPartitionTable() != "dos" || p.GetPartitionNumber() != 1 || p.GetBelow()[0] != "PhysicalDrive1" {
		t.Errorf("partition layer = %v", p)
	}
	if d.GetSource() != SourceDeclared || d.GetRaidLevel() != "raid10" || d.GetRaidDataDisks() != 2 || d.GetModel() != "DELL PERC 6/i" || d.GetSerial() != "00c8f1e2d3a4b5c6" || !d.GetRotational() {
		t.Errorf("disk layer = %v", d)
	}
	fsl := ls[0]
	if fsl.GetUuid() != "4C3A-1F20" || fsl.GetName() != "SQLDATA" || !hasUnknown(fsl, "stripe_unit_bytes") {
		t.Errorf("file-system layer = %v", fsl)
	}

	res, _ = loadWindowsFixture(t, "spaces-striped", Options{})
	sp := res.Volumes[0].GetLayers()[2]
	if sp.GetDevice() != "PhysicalDrive4" || sp.GetSource() != SourceWMI || sp.GetRaidLevel() != "raid0" || sp.GetRaidDisks() != 4 || sp.GetRaidDataDisks() != 4 || sp.GetName() != "SQLData" || sp.GetPhysicalSectorBytes() != 4096 {
		t.Errorf("Storage Spaces layer = %v", sp)
	}

	res, src := loadWindowsFixture(t, "dynamic-striped", Options{})
	dyn := res.Volumes[0].GetLayers()[1]
	if dyn.GetDevice() != `HarddiskDmVolumes\WIN-SQL01Dg0\Volume1` || dyn.GetRaidLevel() != "raid0" || dyn.GetRaidDisks() != 2 || dyn.GetOffsetBytes() != 1<<20 || dyn.GetSizeBytes() != 1000<<30 {
		t.Errorf("dynamic layer = %v", dyn)
	}
	if d := cmp.Diff([]string{"PhysicalDrive5", "PhysicalDrive6"}, dyn.GetBelow()); d != "" {
		t.Errorf("dynamic below (-want +got):\n%s", d)
	}
	for _, c := range src.calls {
		if strings.HasPrefix(c, "spaces") {
			t.Errorf("Storage WMI queried on a host without Storage Spaces disks: %v", src.calls)
		}
	}
}

func TestWindowsDeclaredMatching(t *testing.T) {
	t.Parallel()
	raid := DeclaredRAID{Level: "raid10", StripeUnit: 64 * bytesize.KiB, Disks: 4}
	tests := []struct {
		name     string
		decl     DeclaredDevice
		declared bool
		warnings int
	}{
		{"disk number", DeclaredDevice{Device: "PhysicalDrive1", RAID: raid}, true, 0},
		{"device path any case", DeclaredDevice{Device: `\\.\physicaldrive1`, RAID: raid}, true, 0},
		{"serial", DeclaredDevice{Serial: " 00C8F1E2D3A4B5C6 ", RAID: raid}, true, 0},
		{"model", DeclaredDevice{Model: "dell perc 6/i", RAID: raid}, true, 0},
		{"number and serial", DeclaredDevice{Device: "PhysicalDrive1", Serial: "00c8f1e2d3a4b5c6", RAID: raid}, true, 0},
		{"number right, serial wrong", DeclaredDevice{Device: "PhysicalDrive1", Serial: "nope", RAID: raid}, false, 1},
		{"other disk", DeclaredDevice{Device: "PhysicalDrive7", RAID: raid}, false, 1},
		{"linux name", DeclaredDevice{Device: "/dev/sdb", RAID: raid}, false, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, _ := loadWindowsFixture(t, "2003-mbr-raid10", Options{Declared: []DeclaredDevice{tc.decl}})
			d := res.Volumes[0].GetLayers()[2]
			if got := d.GetSource() == SourceDeclared; got != tc.declared {
				t.Errorf("declared = %v, want %v (layer %v)", got, tc.declared, d)
			}
			if len(res.Warnings) != tc.warnings {
				t.Errorf("warnings = %q, want %d", res.Warnings, tc.warnings)
			}
		})
	}
}

func TestWindowsSelection(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts Options
		want int
	}{
		{"all", Options{}, 1},
		{"drive letter glob", Options{IncludeMountPoints: []string{"E:/"}}, 1},
		{"lower-case drive", Options{IncludeMountPoints: []string{"e:/"}}, 1},
		{"mount folder glob", Options{IncludeMountPoints: []string{"C:/MountPoints/*"}}, 1},
		{"other drive", Options{IncludeMountPoints: []string{"F:/"}}, 0},
		{"exclude", Options{ExcludeMountPoints: []string{"E:/"}}, 0},
		{"fs type", Options{IncludeFSTypes: []string{"refs"}}, 0},
		{"exclude fs type", Options{ExcludeFSTypes: []string{"ntfs"}}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, _ := loadWindowsFixture(t, "2008-gpt-64k", tc.opts)
			if len(res.Volumes) != tc.want {
				t.Errorf("got %d volumes, want %d", len(res.Volumes), tc.want)
			}
		})
	}
}

// fakeL2P maps logical offsets of a volume striped over disks with unit u
// (RAID-0, or RAID-5 with rotating parity) to disk offsets.
func fakeL2P(disks []uint32, start, u uint64, parity bool) func(uint64) ([]physicalOffset, error) {
	n := uint64(len(disks))
	return func(off uint64) ([]physicalOffset, error) {
		k := off / u
		if !parity {
			return []physicalOffset{{disks[k%n], start + k/n*u + off%u}}, nil
		}
		row, col := k/(n-1), k%(n-1)
		p := (n - 1 - row%n) // parity disk of this row
		d := col
		if d >= p {
			d++
		}
		return []physicalOffset{{disks[d], start + row*u + off%u}}, nil
	}
}

func TestClassifyDynamic(t *testing.T) {
	t.Parallel()
	ext := func(disks ...uint32) []diskExtent {
		var out []diskExtent
		for _, d := range disks {
			out = append(out, diskExtent{DiskNumber: d, StartingOffset: 1 << 20, ExtentLength: 1 << 30})
		}
		return out
	}
	same := func(off uint64) ([]physicalOffset, error) { return []physicalOffset{{1, 1<<20 + off}}, nil }
	tests := []struct {
		name    string
		extents []diskExtent
		l2p     func(uint64) ([]physicalOffset, error)
		want    dynamicLayout
	}{
		{"simple", ext(1), same, dynamicLayout{level: "linear", disks: 1, dataDisks: 1}},
		{"spanned", ext(1, 2), same, dynamicLayout{level: "linear", disks: 2, dataDisks: 2}},
		{"mirror", ext(1, 2), func(off uint64) ([]physicalOffset, error) {
			return []physicalOffset{{1, 1<<20 + off}, {2, 1<<20 + off}}, nil
		}, dynamicLayout{level: "raid1", disks: 2, dataDisks: 1}},
		{"stripe 2", ext(1, 2), fakeL2P([]uint32{1, 2}, 1<<20, 64<<10, false), dynamicLayout{level: "raid0", unit: 64 << 10, disks: 2, dataDisks: 2}},
		{"stripe 3", ext(1, 2, 3), fakeL2P([]uint32{1, 2, 3}, 1<<20, 64<<10, false), dynamicLayout{level: "raid0", unit: 64 << 10, disks: 3, dataDisks: 3}},
		{"raid5 4", ext(1, 2, 3, 4), fakeL2P([]uint32{1, 2, 3, 4}, 1<<20, 64<<10, true), dynamicLayout{level: "raid5", unit: 64 << 10, disks: 4, dataDisks: 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := classifyDynamic(tc.extents, tc.l2p)
			if err != nil {
				t.Fatalf("classifyDynamic: %v", err)
			}
			if got != tc.want {
				t.Errorf("classifyDynamic = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestSpacesLayout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		vd          spacesVirtualDisk
		level       string
		unit        uint64
		disks, data uint32
	}{
		{spacesVirtualDisk{ResiliencySettingName: "Simple", NumberOfColumns: 4, Interleave: 256 << 10}, "raid0", 256 << 10, 4, 4},
		{spacesVirtualDisk{ResiliencySettingName: "Simple", NumberOfColumns: 1, Interleave: 256 << 10}, "linear", 0, 1, 1},
		{spacesVirtualDisk{ResiliencySettingName: "Mirror", NumberOfColumns: 2, NumberOfDataCopies: 2, Interleave: 256 << 10}, "raid10", 256 << 10, 4, 2},
		{spacesVirtualDisk{ResiliencySettingName: "Mirror", NumberOfColumns: 1, NumberOfDataCopies: 3, Interleave: 256 << 10}, "raid1", 0, 3, 1},
		{spacesVirtualDisk{ResiliencySettingName: "Parity", NumberOfColumns: 5, PhysicalDiskRedundancy: 1, Interleave: 256 << 10}, "raid5", 256 << 10, 5, 4},
		{spacesVirtualDisk{ResiliencySettingName: "Parity", NumberOfColumns: 7, PhysicalDiskRedundancy: 2, Interleave: 256 << 10}, "raid6", 256 << 10, 7, 5},
	}
	for _, tc := range tests {
		level, unit, disks, data, err := tc.vd.layout()
		if err != nil || level != tc.level || unit != tc.unit || disks != tc.disks || data != tc.data {
			t.Errorf("%+v.layout() = %s, %d, %d, %d, %v; want %s, %d, %d, %d", tc.vd, level, unit, disks, data, err, tc.level, tc.unit, tc.disks, tc.data)
		}
	}
	if _, _, _, _, err := (spacesVirtualDisk{ResiliencySettingName: "Dual"}).layout(); err == nil {
		t.Error("layout of 0 columns: no error")
	}
	rows, err := decodeVirtualDisksJSON([]byte(`[{"DiskNumber":3,"NumberOfColumns":2},{"DiskNumber":null,"NumberOfColumns":1}]`))
	if err != nil || len(rows) != 2 || *rows[0].DiskNumber != 3 || rows[1].DiskNumber != nil {
		t.Errorf("decodeVirtualDisksJSON(array) = %+v, %v", rows, err)
	}
}

// TestWindowsBadBuffers: a truncated or nonsensical answer becomes an
// unknown with the reason, never a panic or a made-up value.
func TestWindowsBadBuffers(t *testing.T) {
	t.Parallel()
	if _, err := decodeVolumeDiskExtents(make([]byte, 4)); !errors.Is(err, errShort) {
		t.Errorf("decodeVolumeDiskExtents(4 bytes) = %v, want errShort", err)
	}
	b := make([]byte, 8)
	le.PutUint32(b, 2)
	if _, err := decodeVolumeDiskExtents(b); !errors.Is(err, errShort) {
		t.Errorf("decodeVolumeDiskExtents(2 extents in 8 bytes) = %v, want errShort", err)
	}
	if _, err := decodePartitionInformationEx(make([]byte, 100)); !errors.Is(err, errShort) {
		t.Errorf("decodePartitionInformationEx(100 bytes) = %v", err)
	}
	al := make([]byte, 28)
	le.PutUint32(al[4:], 28)
	le.PutUint32(al[16:], 4096)
	le.PutUint32(al[20:], 512)
	if _, err := decodeAccessAlignment(al); err == nil {
		t.Error("decodeAccessAlignment(physical < logical): no error")
	}
	dd := make([]byte, 40)
	le.PutUint32(dd[4:], 40)
	le.PutUint32(dd[16:], 400)
	if _, err := decodeDeviceDescriptor(dd); err == nil {
		t.Error("decodeDeviceDescriptor(ProductIdOffset past the end): no error")
	}
}

func FuzzWindowsDecoders(f *testing.F) {
	for _, p := range []string{
		"2003-mbr-raid10/disks/PhysicalDrive1/IOCTL_STORAGE_QUERY_PROPERTY-0.hex",
		"2008-gpt-64k/volumes/Volume{8d2f9b41-1111-4a5b-9c6d-200000000000}/IOCTL_DISK_GET_PARTITION_INFO_EX.hex",
		"dynamic-striped/volumes/Volume{c3d2e1f0-4444-4d5e-8f9a-500000000000}/IOCTL_VOLUME_GET_VOLUME_DISK_EXTENTS.hex",
		"spaces-striped/volumes/Volume{a7b6c5d4-3333-4c3d-9e8f-400000000000}/FSCTL_GET_REFS_VOLUME_DATA.hex",
	} {
		raw, err := os.ReadFile(filepath.Join("testdata", "windows", p))
		if err != nil {
			f.Fatal(err)
		}
		b, err := parseHexFixture(raw)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeVolumeDiskExtents(b)
		decodeVolumePhysicalOffsets(b)
		decodePartitionInformationEx(b)
		decodeAccessAlignment(b)
		decodeSeekPenalty(b)
		decodeDeviceDescriptor(b)
		decodeDriveGeometryEx(b)
		decodeNTFSVolumeData(b)
		decodeReFSVolumeData(b)
	})
}

func TestJoinVirtualDisks(t *testing.T) {
	t.Parallel()
	// Object paths as WMI writes REF properties: the key's value quoted,
	// with backslash escaping backslashes and quotes inside it.
	const host = `\\DB1\root\Microsoft\Windows\Storage:`
	vdID := `{1}\\DB1\root/Microsoft/Windows/Storage/Providers_v2\SPACES_VirtualDisk.ObjectId="{b0e3}:VD:{aa}{bb}"`
	diskID := `{1}\\DB1\root/Microsoft/Windows/Storage/Providers_v2\WSP_Disk.ObjectId="{b0e3}:DI:\\?\storage#disk#{cc}"`
	escape := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace
	ref := func(class, id string) string { return host + class + `.ObjectId="` + escape(id) + `"` }

	if got, ok := objectPathKey(ref("MSFT_VirtualDisk", vdID), "ObjectId"); !ok || got != vdID {
		t.Errorf("objectPathKey(ref) = %q, %v; want %q", got, ok, vdID)
	}
	for _, bad := range []string{"", `x.ObjectId="unterminated`, `x.ObjectId="trailing\`, `x.Name="y"`} {
		if got, ok := objectPathKey(bad, "ObjectId"); ok {
			t.Errorf("objectPathKey(%q) = %q, true; want false", bad, got)
		}
	}

	vds := []msftVirtualDisk{
		{ObjectId: vdID, FriendlyName: "SQLData", UniqueId: "7F0A1E5D2B3C4E11900F5E5C5A5B5D5E", ResiliencySettingName: "Simple", NumberOfColumns: 4, NumberOfDataCopies: 1, Interleave: 256 << 10, Size: 4 << 40},
		{ObjectId: "vd-2", FriendlyName: "Logs", UniqueId: "{11111111-2222-3333-4444-555555555555}", ResiliencySettingName: "Mirror", NumberOfColumns: 1, NumberOfDataCopies: 2},
		{ObjectId: "vd-3", FriendlyName: "Detached", UniqueId: "99"},
	}
	disks := []msftDisk{
		{ObjectId: diskID, Number: proto.Uint32(4), UniqueId: "60022480-0000"},
		{ObjectId: "disk-5", Number: proto.Uint32(5), SerialNumber: "11111111222233334444555555555555"},
		{ObjectId: "disk-6", Number: nil, UniqueId: "99"}, // no number: never joined
	}
	links := []msftVirtualDiskToDisk{
		{VirtualDisk: ref("MSFT_VirtualDisk", vdID), Disk: ref("MSFT_Disk", diskID)},
		{VirtualDisk: "garbage", Disk: "garbage"},
	}
	num := func(n uint32) *uint32 { return &n }
	want := []spacesVirtualDisk{
		{DiskNumber: num(4), FriendlyName: "SQLData", UniqueID: "7F0A1E5D2B3C4E11900F5E5C5A5B5D5E", ResiliencySettingName: "Simple", NumberOfColumns: 4, NumberOfDataCopies: 1, Interleave: 256 << 10, Size: 4 << 40},
		{DiskNumber: num(5), FriendlyName: "Logs", UniqueID: "{11111111-2222-3333-4444-555555555555}", ResiliencySettingName: "Mirror", NumberOfColumns: 1, NumberOfDataCopies: 2},
		{FriendlyName: "Detached", UniqueID: "99"},
	}
	if diff := cmp.Diff(want, joinVirtualDisks(vds, disks, links)); diff != "" {
		t.Errorf("joinVirtualDisks (-want +got):\n%s", diff)
	}
	// Without the association (the provider would not enumerate it), the
	// first virtual disk surfaces as no disk its UniqueId names.
	got := joinVirtualDisks(vds, disks, nil)
	if got[0].DiskNumber != nil || got[1].DiskNumber == nil || *got[1].DiskNumber != 5 {
		t.Errorf("joinVirtualDisks without links = %+v", got)
	}
}

// driveTypeSource is a fixture whose volumes report the given GetDriveType
// answers for their GUID path and their first mount point.
type driveTypeSource struct {
	*fixtureSource
	guid, mount uint32
}

func (s driveTypeSource) volumes(ctx context.Context) ([]winVolume, error) {
	vs, err := s.fixtureSource.volumes(ctx)
	for i := range vs {
		vs[i].DriveType, vs[i].MountDriveType = s.guid, s.mount
	}
	return vs, err
}

// TestWindowsUnknownDriveType: where GetDriveType of a volume GUID path
// answers DRIVE_UNKNOWN (Wine does), the mount point's drive type decides,
// and a volume still of unknown type is skipped with a warning, not
// silently.
func TestWindowsUnknownDriveType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		guid, mount uint32
		volumes     int
		warning     string
	}{
		{"guid fixed", driveFixed, 0, 1, ""},
		{"guid unknown, mount point fixed", driveUnknown, driveFixed, 1, ""},
		{"guid no root dir, mount point fixed", driveNoRootDir, driveFixed, 1, ""},
		{"guid unknown, mount point removable", driveUnknown, 2, 0, ""},
		{"both unknown", driveUnknown, driveUnknown, 0, `volume E:\ (\\?\Volume{8d2f9b41-1111-4a5b-9c6d-200000000000}\) skipped: Windows reports its drive type as unknown`},
		{"guid removable, mount point fixed", 2, driveFixed, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := driveTypeSource{&fixtureSource{dir: filepath.Join("testdata", "windows", "2008-gpt-64k")}, tc.guid, tc.mount}
			res, err := discoverWindows(context.Background(), Options{}, src)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Volumes) != tc.volumes {
				t.Errorf("got %d volumes, want %d", len(res.Volumes), tc.volumes)
			}
			joined := strings.Join(res.Warnings, "\n")
			if (tc.warning == "") != (joined == "") || !strings.Contains(joined, tc.warning) {
				t.Errorf("warnings = %q, want %q", res.Warnings, tc.warning)
			}
		})
	}
}
