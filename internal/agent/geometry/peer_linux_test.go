package geometry

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// lsblkDevice is one row of lsblk -J -b output.
type lsblkDevice struct {
	Name        string         `json:"name"`
	KName       string         `json:"kname"`
	MajMin      string         `json:"maj:min"`
	Start       *int64         `json:"start"`
	LogSec      *int64         `json:"log-sec"`
	PhySec      *int64         `json:"phy-sec"`
	MinIO       *int64         `json:"min-io"`
	OptIO       *int64         `json:"opt-io"`
	Alignment   *int64         `json:"alignment"`
	Type        string         `json:"type"`
	MountPoints []*string      `json:"mountpoints"`
	Children    []*lsblkDevice `json:"children"`
}

// peerDataDir finds shared/peer-data/util-linux-lsblk beside the clone, or
// under $PLUMBLINE_PEER_DATA (a clone elsewhere, a git worktree).
func peerDataDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("PLUMBLINE_PEER_DATA"); d != "" {
		return filepath.Join(d, "util-linux-lsblk")
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
	return filepath.Join(dir, "..", "shared", "peer-data", "util-linux-lsblk")
}

func skipOrFail(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: not skipping)", msg)
	}
	t.Skip(msg)
}

// TestPeerLsblk compares discovery with util-linux lsblk on the real sysfs
// captures util-linux keeps for its own tests.
func TestPeerLsblk(t *testing.T) {
	t.Parallel()
	captures, _ := filepath.Glob(filepath.Join(peerDataDir(t), "*.tar.xz"))
	if len(captures) == 0 {
		skipOrFail(t, "no lsblk captures in "+peerDataDir(t))
	}
	for _, tool := range []string{"tar", "xz", "lsblk"} {
		if _, err := exec.LookPath(tool); err != nil {
			skipOrFail(t, "peer check needs "+tool)
		}
	}
	var total peerCount
	for _, c := range captures {
		name := strings.TrimSuffix(filepath.Base(c), ".tar.xz")
		t.Run(name, func(t *testing.T) {
			tmp := t.TempDir()
			if out, err := exec.Command("tar", "-C", tmp, "-xJf", c).CombinedOutput(); err != nil {
				t.Fatalf("tar -xJf %s: %v\n%s", c, err, out)
			}
			root := filepath.Join(tmp, name)
			n := comparePeer(t, root)
			t.Logf("%s: %s", name, n)
			total.add(n)
		})
		// The same machine on a kernel older than the partition
		// attribute (before 2.6.28): partitions are known only by their
		// start file. lsblk still sees them; so must discovery.
		t.Run(name+"/old-kernel", func(t *testing.T) {
			tmp := t.TempDir()
			if out, err := exec.Command("tar", "-C", tmp, "-xJf", c).CombinedOutput(); err != nil {
				t.Fatalf("tar -xJf %s: %v\n%s", c, err, out)
			}
			root := filepath.Join(tmp, name)
			if removed := stripPartitionAttr(t, filepath.Join(root, "sys")); removed == 0 {
				t.Fatalf("%s has no partition attribute to remove; the variant proves nothing", name)
			}
			n := comparePeer(t, root)
			t.Logf("%s without partition attributes: %s", name, n)
			total.add(n)
		})
	}
	t.Logf("all captures: %s", total)
}

// stripPartitionAttr removes every partition attribute file of a sysfs
// tree, as kernels before 2.6.28 have none, and says how many it removed.
func stripPartitionAttr(t *testing.T, sys string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(sys, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() && e.Name() == "partition" {
			if _, serr := os.Stat(filepath.Join(filepath.Dir(p), "start")); serr == nil {
				n++
				return os.Remove(p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

type peerCount struct {
	devices, values, agree, mounts, mountsFound int
	disagreements                               []string
}

func (p *peerCount) add(o peerCount) {
	p.devices += o.devices
	p.values += o.values
	p.agree += o.agree
	p.mounts += o.mounts
	p.mountsFound += o.mountsFound
	p.disagreements = append(p.disagreements, o.disagreements...)
}

func (p peerCount) String() string {
	return fmt.Sprintf("%d devices, %d values compared, %d agree; %d mounted volumes, %d reported; disagreements: %q",
		p.devices, p.values, p.agree, p.mounts, p.mountsFound, p.disagreements)
}

func comparePeer(t *testing.T, root string) peerCount {
	t.Helper()
	out, err := exec.Command("lsblk", "--sysroot", root, "-J", "-b",
		"-o", "NAME,KNAME,MAJ:MIN,START,LOG-SEC,PHY-SEC,MIN-IO,OPT-IO,ALIGNMENT,TYPE,MOUNTPOINTS").Output()
	if err != nil {
		t.Fatalf("lsblk --sysroot %s: %v", root, err)
	}
	var doc struct {
		BlockDevices []*lsblkDevice `json:"blockdevices"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("lsblk JSON: %v", err)
	}
	o := treeOptions(root)
	o.ReadSuperblocks = false
	vols, err := Discover(context.Background(), o)
	if err != nil {
		t.Fatalf("Discover(%s) error = %v", root, err)
	}
	d := newDiscoverer(o, nil)

	var n peerCount
	seen := map[string]bool{}
	var walk func(devs []*lsblkDevice)
	walk = func(devs []*lsblkDevice) {
		for _, dev := range devs {
			walk(dev.Children)
			if seen[dev.KName] {
				continue
			}
			seen[dev.KName] = true
			dir, err := d.resolveLink(filepath.Join(root, "sys", "dev", "block", dev.MajMin))
			if err != nil {
				t.Errorf("%s (%s): %v", dev.KName, dev.MajMin, err)
				continue
			}
			l, _ := d.deviceLayer(dir)
			n.devices++
			cmpVal := func(col string, want *int64, got int64, ok bool) {
				if want == nil {
					return
				}
				n.values++
				if !ok {
					got = 0 // unknown: lsblk shows 0 for "no value"
				}
				if got == *want {
					n.agree++
					return
				}
				msg := fmt.Sprintf("%s %s: lsblk %d, discovery %d", dev.KName, col, *want, got)
				n.disagreements = append(n.disagreements, msg)
				t.Errorf("Discover(%s) %s", filepath.Base(root), msg)
			}
			if dev.Start != nil {
				cmpVal("START", dev.Start, int64(l.GetOffsetBytes()/512), l.OffsetBytes != nil)
			}
			cmpVal("LOG-SEC", dev.LogSec, int64(l.GetLogicalSectorBytes()), true)
			cmpVal("PHY-SEC", dev.PhySec, int64(l.GetPhysicalSectorBytes()), true)
			cmpVal("MIN-IO", dev.MinIO, int64(l.GetMinIoBytes()), true)
			cmpVal("OPT-IO", dev.OptIO, int64(l.GetOptIoBytes()), true)
			cmpVal("ALIGNMENT", dev.Alignment, l.GetAlignmentOffsetBytes(), l.AlignmentOffsetBytes != nil)

			// Each mounted device is a volume at one of lsblk's mount points.
			var mps []string
			for _, mp := range dev.MountPoints {
				if mp != nil && *mp != "" && *mp != "[SWAP]" {
					mps = append(mps, *mp)
				}
			}
			if len(mps) == 0 {
				continue
			}
			n.mounts++
			found := false
			for _, v := range vols {
				if len(v.Layers) > 1 && v.Layers[1].Device == dev.KName && slices.Contains(mps, v.MountPoint) {
					found = true
				}
			}
			if found {
				n.mountsFound++
			} else {
				msg := fmt.Sprintf("%s mounted at %v: no volume", dev.KName, mps)
				n.disagreements = append(n.disagreements, msg)
				t.Errorf("Discover(%s) %s", filepath.Base(root), msg)
			}
		}
	}
	walk(doc.BlockDevices)

	// Every block-backed mount in the capture's mountinfo is reported.
	raw, err := os.ReadFile(filepath.Join(root, "proc", "self", "mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	mounts, _ := parseMountInfo(raw)
	for _, m := range mounts {
		if _, pseudo := pseudoFSTypes[m.FSType]; m.Major == 0 || pseudo {
			continue
		}
		if _, err := os.Lstat(filepath.Join(root, "sys", "dev", "block", fmt.Sprintf("%d:%d", m.Major, m.Minor))); err != nil {
			continue
		}
		if volumeAt(vols, m.MountPoint) == nil {
			t.Errorf("Discover(%s) does not report %s (%s %d:%d)", filepath.Base(root), m.MountPoint, m.FSType, m.Major, m.Minor)
		}
	}
	return n
}
