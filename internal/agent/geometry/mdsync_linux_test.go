package geometry

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// On a captured tree (LVM on an md raid1), the md array discovery puts in
// the volume's stack is the one a probe run reads the sync state of, and
// it reads it where the kernel has it (/sys/block/md0 links to the
// device's directory; the tree format records devices by number only):
// a recovery at 43% and 100 MiB/s, then "delayed", then idle.
func TestReadMDSyncOnCapturedTree(t *testing.T) {
	t.Parallel()
	root := loadTree(t, "lvm-on-md")
	vols, err := Discover(context.Background(), treeOptions(root))
	if err != nil {
		t.Fatal(err)
	}
	var arrays []string
	for _, v := range vols {
		arrays = append(arrays, MDArrays(v)...)
	}
	if !slices.Contains(arrays, "md0") {
		t.Fatalf("md arrays under the tree's volumes = %v, want md0", arrays)
	}
	sys := filepath.Join(root, "sys")
	if err := os.MkdirAll(filepath.Join(sys, "block"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../devices/virtual/block/md0", filepath.Join(sys, "block", "md0")); err != nil {
		t.Fatal(err)
	}
	md := filepath.Join(sys, "devices", "virtual", "block", "md0", "md")
	write := func(action, completed, speed string) {
		t.Helper()
		for f, v := range map[string]string{"sync_action": action, "sync_completed": completed, "sync_speed": speed} {
			if err := os.WriteFile(filepath.Join(md, f), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		action, completed, speed string
		want                     MDSync
		running                  bool
	}{
		{"recover", "403198720 / 937698304", "102400", MDSync{Device: "md0", Action: "recover", DoneSectors: 403198720, TotalSectors: 937698304, SpeedBytesPerSecond: 100 << 20}, true},
		{"resync", "delayed", "none", MDSync{Device: "md0", Action: "resync"}, true},
		{"idle", "none", "none", MDSync{Device: "md0", Action: "idle"}, false},
		{"frozen", "none", "none", MDSync{Device: "md0", Action: "frozen"}, false},
	} {
		write(tc.action, tc.completed, tc.speed)
		got, err := ReadMDSync(sys, "md0")
		if err != nil || got != tc.want || got.Running() != tc.running {
			t.Errorf("%s: ReadMDSync = %+v (running %v), %v; want %+v (running %v)", tc.action, got, got.Running(), err, tc.want, tc.running)
		}
	}
	if _, err := ReadMDSync(sys, "md9"); err == nil {
		t.Error("ReadMDSync of an array that is not there: no error")
	}
	if _, err := ReadMDSync(sys, "../md0"); err == nil {
		t.Error("ReadMDSync of a path: no error")
	}
}
