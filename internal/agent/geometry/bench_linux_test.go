package geometry

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// syntheticTree is a tree of 32 disks with 7 partitions each (256 block
// devices); the first two partitions of every disk are mounted (64 mounts).
func syntheticTree() string {
	var b strings.Builder
	mountID := 100
	for i := 0; i < 32; i++ {
		disk := fmt.Sprintf("sd%c%c", 'a'+i/26, 'a'+i%26)
		dp := fmt.Sprintf("devices/pci0/host%d/target%d:0:0/%d:0:0:0/block/%s", i, i, i, disk)
		major, minor := 8+i/16*57, (i%16)*16 // 8 then 65, as the sd driver does
		fmt.Fprintf(&b, "dev %d:%d %s\nfile sys/%s/size 3907029168\nfile sys/%s/alignment_offset 0\n", major, minor, dp, dp, dp)
		fmt.Fprintf(&b, "file sys/%s/device/model BENCH DISK\nfile sys/%s/device/wwid naa.%016x\n", dp, dp, i)
		fmt.Fprintf(&b, "queue %s 512 4096 4096 0 1\n", dp)
		for p := 1; p <= 7; p++ {
			pp := fmt.Sprintf("%s/%s%d", dp, disk, p)
			fmt.Fprintf(&b, "dev %d:%d %s\nfile sys/%s/partition %d\nfile sys/%s/start %d\nfile sys/%s/size 2097152\nfile sys/%s/alignment_offset 0\n",
				major, minor+p, pp, pp, p, pp, 2048+(p-1)*2097152, pp, pp)
			if p <= 2 {
				fmt.Fprintf(&b, "mount %d 25 %d:%d / /srv/%s%d rw,noatime - xfs /dev/%s%d rw,sunit=128,swidth=256\n", mountID, major, minor+p, disk, p, disk, p)
				mountID++
			}
		}
	}
	return b.String()
}

// BenchmarkDiscover: go test -run '^$' -bench BenchmarkDiscover ./internal/agent/geometry/
// Target: ≤ 20 ms per Discover of 256 devices / 64 mounts.
func BenchmarkDiscover(b *testing.B) {
	root := b.TempDir()
	buildTree(b, []byte(syntheticTree()), root)
	o := treeOptions(root)
	o.ReadSuperblocks = false
	vols, err := Discover(context.Background(), o)
	if err != nil || len(vols) != 64 {
		b.Fatalf("Discover(synthetic) = %d volumes, %v; want 64", len(vols), err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Discover(context.Background(), o); err != nil {
			b.Fatal(err)
		}
	}
}
