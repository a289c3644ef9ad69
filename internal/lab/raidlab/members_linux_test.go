//go:build linux

package raidlab

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/procfs/blockdevice"
	"golang.org/x/sys/unix"

	"github.com/plumbline/plumbline/internal/agent/geometry"
)

// startMemberLab starts a lab whose members are loop devices, its tree
// under tree ("": its state directory).
func startMemberLab(t *testing.T, g Geometry, tree string) *Lab {
	t.Helper()
	requireLab(t)
	p, err := LookupPreset("fast")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	l, err := Start(context.Background(), Config{
		Geometry: g, Preset: p, Seed: 1, MemberDevices: true, TreeRoot: tree,
		StateRoot: filepath.Join(root, "state"), DataRoot: filepath.Join(root, "data"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("close lab: %v", err)
		}
		for _, dev := range l.Members {
			if backingFile(dev) != "" && strings.HasPrefix(backingFile(dev), l.Mountpoint) {
				t.Errorf("member %s still attached after Close", dev)
			}
		}
	})
	return l
}

// diskstats reads the kernel's counters of the named devices.
func diskstats(t *testing.T, devs []string) map[string]blockdevice.Diskstats {
	t.Helper()
	fs, err := blockdevice.NewFS("/proc", "/sys")
	if err != nil {
		t.Fatal(err)
	}
	all, err := fs.ProcDiskstats()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]blockdevice.Diskstats{}
	for _, d := range all {
		if slices.Contains(devs, "/dev/"+d.DeviceName) {
			out["/dev/"+d.DeviceName] = d
		}
	}
	if len(out) != len(devs) {
		t.Fatalf("diskstats has %d of %v", len(out), devs)
	}
	return out
}

// writeDirect writes n 4 KiB blocks through dev with O_DIRECT, one at a
// time.
func writeDirect(t *testing.T, dev string, n int) {
	t.Helper()
	f, err := os.OpenFile(dev, os.O_RDWR|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := alignedBuf(4096)
	for i := range n {
		buf[0] = byte(i)
		if _, err := f.WriteAt(buf, int64(i)*(64<<10)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMemberDevicesCarryFaults: with member devices, every member
// operation is a request on the member's own loop device, counted by the
// kernel in /proc/diskstats, and a member's fault is in the kernel's
// accounting of that device: writes to a RAID 1 whose member 1 stalls
// 40 ms on every operation cost member 1's device at least 40 ms each in
// the kernel's write time, and the kernel counts exactly the operations
// the lab served. Data still reads back through the array.
func TestMemberDevicesCarryFaults(t *testing.T) {
	t.Parallel()
	l := startMemberLab(t, Geometry{Level: RAID1, Members: 2, Size: 16 << 20}, "")
	if len(l.Members) != 2 {
		t.Fatalf("members %v, want 2 devices", l.Members)
	}
	for m, dev := range l.Members {
		if got, want := backingFile(dev), filepath.Join(l.Mountpoint, MemberFile(m)); got != want {
			t.Fatalf("member %d: %s backs onto %q, want %q", m, dev, got, want)
		}
	}
	one := 1
	const stall = 40 * time.Millisecond
	if err := l.Fault(Fault{Kind: FaultStall, Member: &one, Fraction: 1, Add: stall}); err != nil {
		t.Fatal(err)
	}
	before, lab0 := diskstats(t, l.Members), l.Array().Stats()
	const n = 12
	writeDirect(t, l.Device, n)
	after, lab1 := diskstats(t, l.Members), l.Array().Stats()
	for m, dev := range l.Members {
		kernel := after[dev].WriteIOs - before[dev].WriteIOs
		served := lab1.MemberStats[m].WriteOps - lab0.MemberStats[m].WriteOps
		if kernel != served || kernel < n {
			t.Errorf("member %d (%s): the kernel counted %d writes, the lab served %d, want the same and ≥ %d", m, dev, kernel, served, n)
		}
	}
	dev := l.Members[1]
	writes := after[dev].WriteIOs - before[dev].WriteIOs
	ms := after[dev].WriteTicks - before[dev].WriteTicks
	if min := writes * uint64(stall/time.Millisecond); ms+1 < min {
		t.Errorf("stalled member %s: the kernel's write time is %d ms for %d writes, want ≥ %d ms", dev, ms, writes, min)
	}
	if s := lab1.MemberStats[0].Stalls; s != 0 {
		t.Errorf("member 0 stalled %d times, want 0", s)
	}
	f, err := os.OpenFile(l.Device, os.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := alignedBuf(4096)
	if _, err := f.ReadAt(buf, 5*(64<<10)); err != nil || buf[0] != 5 {
		t.Errorf("read back block 5: first byte %d, %v; want 5", buf[0], err)
	}
}

// TestMemberSysfsTree: the md tree the lab writes is one the agent's
// geometry discovery reads as an md array over the member devices, with
// the serials and the state of a failed member.
func TestMemberSysfsTree(t *testing.T) {
	t.Parallel()
	l := startMemberLab(t, Geometry{Level: RAID5, Members: 3, StripeUnit: 64 << 10, Size: 32 << 20}, "")
	two := 2
	if err := l.Fault(Fault{Kind: FaultFail, Member: &two}); err != nil {
		t.Fatal(err)
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", l.Device).CombinedOutput(); err != nil {
		t.Skipf("mkfs.ext4: %v %s", err, out)
	}
	if out, err := exec.Command("mount", l.Device, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	opts := geometry.DefaultOptions()
	opts.SysfsRoot, opts.Captured, opts.IncludeMountPoints = l.Sysfs, true, []string{mnt}
	vols, err := geometry.Discover(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(vols) != 1 {
		t.Fatalf("%d volumes, want the one on %s", len(vols), mnt)
	}
	var md, disks = 0, map[string]string{}
	for _, ly := range vols[0].GetLayers() {
		switch ly.GetKind() {
		case geometry.KindRAID:
			md++
			if ly.GetRaidLevel() != "raid5" || ly.GetRaidDisks() != 3 || ly.GetStripeUnitBytes() != 64<<10 {
				t.Errorf("md layer: level %q disks %d chunk %d, want raid5 3 65536", ly.GetRaidLevel(), ly.GetRaidDisks(), ly.GetStripeUnitBytes())
			}
			h := ly.GetRaidHealth()
			for _, mem := range h.GetMembers() {
				faulty := slices.Contains(mem.GetState(), "faulty")
				if want := "/dev/"+mem.GetDevice() == l.Members[2]; faulty != want {
					t.Errorf("member %s state %v: faulty %v, want %v", mem.GetDevice(), mem.GetState(), faulty, want)
				}
			}
			if len(h.GetMembers()) != 3 {
				t.Errorf("md health lists %d members, want 3", len(h.GetMembers()))
			}
		case geometry.KindDisk:
			disks["/dev/"+ly.GetDevice()] = ly.GetSerial()
		}
	}
	if md != 1 {
		t.Errorf("%d md layers, want 1: %v", md, vols[0].GetLayers())
	}
	for m, dev := range l.Members {
		if disks[dev] != l.Serial(m) {
			t.Errorf("member %s: serial %q, want %q (disks %v)", dev, disks[dev], l.Serial(m), disks)
		}
		link, err := os.Readlink(filepath.Join(l.DevRoot, "disk/by-id", l.ByIDName(m)))
		if err != nil || filepath.Base(link) != filepath.Base(dev) {
			t.Errorf("by-id link for member %d: %q %v, want ../../%s", m, link, err, filepath.Base(dev))
		}
	}
}

// TestMemberTreeShared: labs sharing one tree each write their own
// devices into it, and a lab's Close removes its own and nothing else.
func TestMemberTreeShared(t *testing.T) {
	t.Parallel()
	tree := t.TempDir()
	g := Geometry{Level: RAID1, Members: 2, Size: 8 << 20}
	a, b := startMemberLab(t, g, tree), startMemberLab(t, g, tree)
	names := func(l *Lab) []string {
		return append([]string{filepath.Base(l.Device)}, filepath.Base(l.Members[0]), filepath.Base(l.Members[1]))
	}
	present := func(n string) bool {
		_, err := os.Stat(filepath.Join(tree, "sys/class/block", n, "dev"))
		return err == nil
	}
	for _, n := range append(names(a), names(b)...) {
		if !present(n) {
			t.Fatalf("%s missing from the shared tree", n)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range names(a) {
		if present(n) {
			t.Errorf("%s still in the tree after its lab closed", n)
		}
	}
	for _, n := range names(b) {
		if !present(n) {
			t.Errorf("%s (the other lab's) gone from the tree", n)
		}
	}
	if _, err := os.Lstat(filepath.Join(tree, "dev/disk/by-id", b.ByIDName(0))); err != nil {
		t.Errorf("the other lab's by-id link: %v", err)
	}
}
