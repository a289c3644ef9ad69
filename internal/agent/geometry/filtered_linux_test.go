package geometry

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDiscoverFiltered: every mounted file system discovery leaves out is
// in Result.Filtered with its reason (kernel interfaces excepted); before,
// they vanished without a word.
func TestDiscoverFiltered(t *testing.T) {
	t.Parallel()
	spec, err := os.ReadFile(filepath.Join("testdata", "trees", "md-raid10.tree"))
	if err != nil {
		t.Fatal(err)
	}
	spec = append(spec, []byte(`
mount 60 25 0:30 / /run rw - tmpfs tmpfs rw
mount 61 25 0:45 / /srv/pg rw - btrfs /dev/sdf rw
mount 62 25 0:50 / /backup rw - nfs4 nas:/backup rw
mount 63 25 0:51 / /mnt/fuse rw - fuse.sshfs host:/x rw
mount 64 25 8:99 / /mnt/gone rw - ext4 /dev/sdz1 rw
mount 65 25 8:1 / /scratch rw - ext4 /dev/sda1 rw
`)...)
	root := t.TempDir()
	buildTree(t, spec, root)
	o := treeOptions(root)
	o.ExcludeMountPoints = []string{"/scratch"}
	res, err := InspectVolumes(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	var mounts []string
	for _, v := range res.Volumes {
		mounts = append(mounts, v.GetMountPoint())
	}
	if diff := cmp.Diff([]string{"/", "/data"}, mounts); diff != "" {
		t.Errorf("volumes (-want +got):\n%s", diff)
	}
	want := []Filtered{
		{MountPoint: "/var/lib/mysql", FSType: "xfs", Source: "/dev/md0", Reason: FilterDuplicate},
		{MountPoint: "/run", FSType: "tmpfs", Source: "tmpfs", Reason: FilterInMemory},
		{MountPoint: "/srv/pg", FSType: "btrfs", Source: "/dev/sdf", Reason: FilterNoBlockDevice},
		{MountPoint: "/backup", FSType: "nfs4", Source: "nas:/backup", Reason: FilterNoBlockDevice},
		{MountPoint: "/mnt/fuse", FSType: "fuse.sshfs", Source: "host:/x", Reason: FilterNoBlockDevice},
		{MountPoint: "/mnt/gone", FSType: "ext4", Source: "/dev/sdz1", Reason: FilterUnknownDevice},
		{MountPoint: "/scratch", FSType: "ext4", Source: "/dev/sda1", Reason: FilterExcluded},
	}
	if diff := cmp.Diff(want, res.Filtered); diff != "" {
		t.Errorf("Filtered (-want +got):\n%s", diff)
	}
}
