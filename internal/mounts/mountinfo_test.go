package mounts

import (
	"slices"
	"testing"
)

func TestMountPoints(t *testing.T) {
	t.Parallel()
	in := []byte(`22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
35 22 8:2 / /data\040dir rw shared:2 - xfs /dev/sda2 rw
garbage
36 22 8:3 / /tab\011x\134y rw - ext4 /dev/sda3 rw
`)
	got, bad := MountPoints(in)
	if want := []string{"/", "/data dir", "/tab\tx\\y"}; !slices.Equal(got, want) {
		t.Errorf("MountPoints = %q, want %q", got, want)
	}
	if len(bad) != 1 {
		t.Errorf("bad = %v, want one error (the garbage line)", bad)
	}
}
