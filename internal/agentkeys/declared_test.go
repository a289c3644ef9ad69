package agentkeys

import "testing"

func TestParsePhysicalDrive(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]int64{
		"PhysicalDrive2": 2, `\\.\PhysicalDrive10`: 10, "physicaldrive0": 0, `\\?\PhysicalDrive3`: 3,
		"PhysicalDrive": -1, "PhysicalDrive02": -1, "PhysicalDrive2x": -1, "/dev/sdb": -1, "Disk2": -1,
	} {
		n, ok := ParsePhysicalDrive(s)
		if got := map[bool]int64{true: int64(n), false: -1}[ok]; got != want {
			t.Errorf("ParsePhysicalDrive(%q) = %d, %v; want %d", s, n, ok, want)
		}
	}
}
