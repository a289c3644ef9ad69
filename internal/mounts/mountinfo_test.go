package mounts

import (
	"bytes"
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

// Any bytes: every non-blank line is a mount point or a reason, never a
// panic.
func FuzzMountPoints(f *testing.F) {
	f.Add([]byte("22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n35 22 8:2 / /data\\040dir rw - xfs /dev/sda2 rw\n"))
	f.Add([]byte("1 2 3:4 a b c - \\1 \\777 \\"))
	f.Add([]byte("garbage\n\n  \n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		mps, bad := MountPoints(b)
		lines := 0
		for _, l := range bytes.Split(b, []byte("\n")) {
			if len(bytes.TrimSpace(l)) > 0 {
				lines++
			}
		}
		if len(mps)+len(bad) != lines {
			t.Fatalf("MountPoints(%q) = %d mount points and %d errors, want %d in all (one per line)", b, len(mps), len(bad), lines)
		}
	})
}
