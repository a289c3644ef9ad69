package geometry

import (
	"bytes"
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/plumbline/plumbline/internal/lab/loopdev"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

var captureTo = flag.String("capture", "", "TestCaptureLoop: write the tree discovery reads for real loop devices to this .tree file")

// loopStack is one real device stack built for a test.
type loopStack struct {
	name       string
	sector     int    // logical sector size of the loop device
	start      int64  // partition start in logical sectors
	fsType     string // ext4 or xfs
	mkfs       []string
	mountOpts  []string
	wantOffset uint64 // partition offset in bytes
	wantUnit   uint64 // stripe unit, bytes
	wantWidth  uint64 // stripe width, bytes
	wantBlock  uint32
	wantMount  string // a mount option discovery must see (stripe hint)
}

// loopBytes is the size of each test loop device (mkfs.xfs wants room for its log).
const loopBytes = 1 << 30

var loopStacks = []loopStack{
	{name: "ext4-512", sector: 512, start: 2048, fsType: "ext4", mkfs: []string{"-b", "4096", "-E", "stride=16,stripe_width=32"},
		wantOffset: 1 << 20, wantUnit: 64 << 10, wantWidth: 128 << 10, wantBlock: 4096, wantMount: ""},
	{name: "xfs-4k", sector: 4096, start: 512, fsType: "xfs", mkfs: []string{"-d", "su=64k,sw=2"},
		wantOffset: 2 << 20, wantUnit: 64 << 10, wantWidth: 128 << 10, wantBlock: 4096, wantMount: "sunit=128"},
}

func buildLoopStack(t *testing.T, s loopStack) (dev loopdev.Device, part, mnt string) {
	t.Helper()
	dev = loopdev.New(t, loopdev.Options{SizeBytes: loopBytes, SectorSize: s.sector})
	part = loopdev.Partition(t, dev, "gpt", s.start, 0)
	loopdev.Mkfs(t, part, s.fsType, s.mkfs...)
	mnt = loopdev.Mount(t, part, s.mountOpts...)
	return dev, part, mnt
}

// TestDiscoverLoop discovers real loop-device stacks on the live roots.
func TestDiscoverLoop(t *testing.T) {
	t.Parallel()
	loopdev.Require(t, "mkfs.ext4", "mkfs.xfs")
	for _, s := range loopStacks {
		t.Run(s.name, func(t *testing.T) {
			dev, part, mnt := buildLoopStack(t, s)
			o := DefaultOptions()
			o.IncludeMountPoints = []string{mnt}
			vols, err := Discover(context.Background(), o)
			if err != nil {
				t.Fatalf("Discover(live) error = %v", err)
			}
			if len(vols) != 1 {
				t.Fatalf("Discover(live, include %s) = %d volumes, want 1", mnt, len(vols))
			}
			v := vols[0]
			if v.Device != part {
				t.Errorf("Discover(%s) device = %s, want %s", s.name, v.Device, part)
			}
			checkLoopVolume(t, s, v, filepath.Base(part), dev.Name, true)
		})
	}
}

func checkLoopVolume(t *testing.T, s loopStack, v *plumblinev1.Volume, partName, diskName string, live bool) {
	t.Helper()
	if len(v.Layers) != 3 {
		t.Fatalf("Discover(%s) layers = %v, want filesystem, partition, disk", s.name, layerNames(v))
	}
	fsl := layerWant{kind: KindFilesystem, blockSize: s.wantBlock, stripeUnit: s.wantUnit, stripeWidth: s.wantWidth,
		offset: u64(0), below: []string{partName},
		sources: map[string]string{"stripe_unit_bytes": SourceSuperblock, "stripe_width_bytes": SourceSuperblock, "block_size_bytes": SourceSuperblock, "uuid": SourceSuperblock}}
	checkLayer(t, s.name+" filesystem", v.Layers[0], fsl)
	if v.Layers[0].GetUuid() == "" || v.Layers[0].GetSizeBytes() == 0 {
		t.Errorf("Discover(%s) filesystem uuid %q size %d, want both from the superblock", s.name, v.Layers[0].GetUuid(), v.Layers[0].GetSizeBytes())
	}
	if s.wantMount != "" && !strings.Contains(v.GetFilesystem().GetMountOptions(), s.wantMount) {
		t.Errorf("Discover(%s) mount options %q, want %s", s.name, v.GetFilesystem().GetMountOptions(), s.wantMount)
	}
	sec := uint32(s.sector)
	checkLayer(t, s.name+" partition", v.Layers[1], layerWant{kind: KindPartition, device: partName, offset: u64(s.wantOffset), partNum: 1,
		logical: sec, physical: sec, align: i64(0), below: []string{diskName}, sources: map[string]string{"offset_bytes": SourceSysfs}})
	checkLayer(t, s.name+" disk", v.Layers[2], layerWant{kind: KindDisk, device: diskName, logical: sec, physical: sec, size: loopBytes, rotRequired: true,
		sources: map[string]string{"logical_sector_bytes": SourceSysfs, "min_io_bytes": SourceKernelHint}})
}

// TestCaptureLoop captures a tree from real loop devices. With
// -capture=FILE it writes it there (that is how testdata/trees/captured-loop.tree
// was made: go test -run TestCaptureLoop -capture=testdata/trees/captured-loop.tree);
// without, it writes it to a temp file and checks that discovery on the
// capture reports what discovery on the live devices did — the capture tool
// itself is tested on every run.
func TestCaptureLoop(t *testing.T) {
	t.Parallel()
	loopdev.Require(t, "mkfs.ext4", "mkfs.xfs")
	o := DefaultOptions()
	var header []string
	for _, s := range loopStacks {
		dev, part, mnt := buildLoopStack(t, s)
		o.IncludeMountPoints = append(o.IncludeMountPoints, mnt)
		header = append(header, fmt.Sprintf("# %s: %s on %s (%d-byte sectors, partition at sector %d), mkfs.%s %s, at %s",
			s.name, part, dev.Name, s.sector, s.start, s.fsType, strings.Join(s.mkfs, " "), mnt))
	}
	rec := newTreeRecorder(o)
	res, err := discover(context.Background(), o, rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Volumes) != len(loopStacks) {
		t.Fatalf("captured %d volumes, want %d", len(res.Volumes), len(loopStacks))
	}
	keep := map[string]bool{}
	for _, v := range res.Volumes {
		keep[v.MountPoint] = true
	}
	text := rec.tree(keep)
	out := "# Captured from real loop devices by TestCaptureLoop (go test -run TestCaptureLoop -capture=FILE).\n" +
		strings.Join(header, "\n") + "\n" + text
	if *captureTo != "" {
		if err := os.WriteFile(*captureTo, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	root := t.TempDir()
	buildTree(t, []byte(out), root)
	opts := treeOptions(root)
	opts.IncludeMountPoints = o.IncludeMountPoints
	got, err := Discover(context.Background(), opts)
	if err != nil {
		t.Fatalf("Discover(capture) = %v", err)
	}
	if len(got) != len(res.Volumes) {
		t.Fatalf("Discover(capture) found %d volumes, live discovery %d", len(got), len(res.Volumes))
	}
	for i, live := range res.Volumes {
		captured := got[i]
		if captured.GetMountPoint() != live.GetMountPoint() || len(captured.GetLayers()) != len(live.GetLayers()) {
			t.Errorf("capture volume %d = %s with %d layers, live %s with %d", i, captured.GetMountPoint(), len(captured.GetLayers()), live.GetMountPoint(), len(live.GetLayers()))
			continue
		}
		for j, l := range live.GetLayers() {
			c := captured.GetLayers()[j]
			if c.GetKind() != l.GetKind() || c.GetOffsetBytes() != l.GetOffsetBytes() ||
				c.GetPhysicalSectorBytes() != l.GetPhysicalSectorBytes() || c.GetStripeUnitBytes() != l.GetStripeUnitBytes() {
				t.Errorf("%s layer %d: capture %s offset %d phys %d su %d, live %s offset %d phys %d su %d", live.GetMountPoint(), j,
					c.GetKind(), c.GetOffsetBytes(), c.GetPhysicalSectorBytes(), c.GetStripeUnitBytes(),
					l.GetKind(), l.GetOffsetBytes(), l.GetPhysicalSectorBytes(), l.GetStripeUnitBytes())
			}
		}
	}
}

// treeRecorder turns what discovery read into tree-file directives.
type treeRecorder struct {
	roots [][2]string // host prefix, tree prefix
	lines map[string]string
	mi    []byte
	miAt  string
}

func newTreeRecorder(o Options) *treeRecorder {
	return &treeRecorder{
		roots: [][2]string{{o.SysfsRoot, "sys"}, {o.DevRoot, "dev"}, {o.ProcfsRoot, "proc"}, {o.LVMBackupDir, "lvm"}},
		lines: map[string]string{},
		miAt:  filepath.Join(o.ProcfsRoot, "self", "mountinfo"),
	}
}

func (r *treeRecorder) rel(p string) (string, bool) {
	for _, rt := range r.roots {
		if rt[0] != "" && (p == rt[0] || strings.HasPrefix(p, rt[0]+"/")) {
			return rt[1] + strings.TrimPrefix(p, rt[0]), true
		}
	}
	return "", false
}

func (r *treeRecorder) file(p string, b []byte) {
	if p == r.miAt {
		r.mi = b
		return
	}
	rel, ok := r.rel(p)
	if !ok {
		return
	}
	if strings.HasPrefix(rel, "dev/") {
		trimmed := bytes.TrimRight(b, "\x00")
		r.lines[rel] = fmt.Sprintf("data %s %d %s", rel, len(b), base64.StdEncoding.EncodeToString(trimmed))
		return
	}
	if v := strings.TrimSpace(string(b)); strings.Contains(v, "\n") {
		r.lines[rel] = "text " + rel + "\n" + v + "\nend" // uevent: KEY=value lines
		return
	}
	r.lines[rel] = strings.TrimSpace("file " + rel + " " + strings.TrimSpace(string(b)))
}

func (r *treeRecorder) link(p, target string) {
	if rel, ok := r.rel(p); ok {
		r.lines[rel] = "link " + rel + " " + target
	}
}

func (r *treeRecorder) dir(p string) {
	if rel, ok := r.rel(p); ok {
		if _, seen := r.lines[rel]; !seen {
			r.lines[rel] = "dir " + rel
		}
	}
}

func (r *treeRecorder) tree(keepMounts map[string]bool) string {
	var b strings.Builder
	for _, line := range strings.Split(string(r.mi), "\n") {
		if m, err := parseMountInfoLine(line); err == nil && keepMounts[m.MountPoint] {
			b.WriteString("mount " + line + "\n")
		}
	}
	keys := make([]string, 0, len(r.lines))
	for k := range r.lines {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		// A directory line is implied by any entry inside it.
		if strings.HasPrefix(r.lines[k], "dir ") {
			i := sort.SearchStrings(keys, k+"/")
			if i < len(keys) && strings.HasPrefix(keys[i], k+"/") {
				continue
			}
		}
		b.WriteString(r.lines[k] + "\n")
	}
	return b.String()
}

// TestDiscoverCaptured drives the tree TestCaptureLoop took from this
// machine's real loop devices (superblocks included) and checks each layer.
func TestDiscoverCaptured(t *testing.T) {
	t.Parallel()
	root := loadTree(t, "captured-loop")
	vols, err := Discover(context.Background(), treeOptions(root))
	if err != nil {
		t.Fatalf("Discover(captured-loop) error = %v", err)
	}
	if len(vols) != len(loopStacks) {
		t.Fatalf("Discover(captured-loop) = %d volumes, want %d", len(vols), len(loopStacks))
	}
	for _, s := range loopStacks {
		t.Run(s.name, func(t *testing.T) {
			var v *plumblinev1.Volume
			for _, x := range vols {
				if x.GetFilesystem().GetType() == s.fsType {
					v = x
				}
			}
			if v == nil {
				t.Fatalf("Discover(captured-loop) has no %s volume", s.fsType)
			}
			part := filepath.Base(v.Device)
			disk := strings.TrimSuffix(part, "p1")
			checkLoopVolume(t, s, v, part, disk, false)
			if got := v.GetFilesystem().GetSources()["stripe_unit_bytes"]; got != SourceSuperblock {
				t.Errorf("Discover(captured-loop) %s filesystem stripe_unit source = %q, want superblock", s.name, got)
			}
		})
	}
	// Without the superblocks the stripe hints come from the mount options.
	o := treeOptions(root)
	o.ReadSuperblocks = false
	vols, err = Discover(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vols {
		fsl := v.Layers[0]
		if fsl.GetStripeWidthBytes() != 128<<10 && fsl.GetFsType() == "xfs" {
			t.Errorf("Discover(captured-loop, no superblocks) %s stripe width = %d, want %d from mount options", v.Device, fsl.GetStripeWidthBytes(), 128<<10)
		}
		if fsl.GetFsType() == "xfs" && fsl.GetSources()["stripe_unit_bytes"] != SourceMountOptions {
			t.Errorf("Discover(captured-loop, no superblocks) %s stripe unit source = %q, want mount-options", v.Device, fsl.GetSources()["stripe_unit_bytes"])
		}
		if fsl.GetFsType() == "ext4" && !hasUnknown(fsl, "stripe_width_bytes") {
			t.Errorf("Discover(captured-loop, no superblocks) %s: ext4 stripe= without a block size must be unknown, got %d", v.Device, fsl.GetStripeWidthBytes())
		}
	}
}
