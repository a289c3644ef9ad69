package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/plumbline/plumbline/internal/agent/geometry"
	"github.com/plumbline/plumbline/internal/bytesize"
)

func TestLoadGoodWindows(t *testing.T) {
	a, err := Load("testdata/good-windows.yml")
	if err != nil {
		t.Fatalf("Load(good-windows.yml) = %v", err)
	}
	o := a.GeometryOptions(geometry.DefaultOptions())
	want := []geometry.DeclaredDevice{
		{Device: "PhysicalDrive1", RAID: geometry.DeclaredRAID{Level: "raid10", StripeUnit: 64 * bytesize.KiB, Disks: 4}},
		{Serial: "PDNMF0ARH8A0PL", RAID: geometry.DeclaredRAID{Level: "raid5", StripeUnit: 128 * bytesize.KiB, Disks: 5}},
		{Model: "NETAPP LUN C-Mode", RAID: geometry.DeclaredRAID{Level: "raid6", StripeUnit: 256 * bytesize.KiB, Disks: 14}},
	}
	if d := cmp.Diff(want, o.Declared); d != "" {
		t.Errorf("declared devices (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"D:/", "E:/", "C:/MountPoints/*"}, o.IncludeMountPoints); d != "" {
		t.Errorf("include mount points (-want +got):\n%s", d)
	}
}

func TestDeclaredDeviceKeys(t *testing.T) {
	const raid = "\n    raid: {level: raid10, stripe_unit: 64KiB, disks: 4}\n"
	tests := []struct {
		name, yaml string
		errHas     string // "" = valid
	}{
		{"linux path", "  - device: /dev/sdb" + raid, ""},
		{"windows disk", "  - device: PhysicalDrive2" + raid, ""},
		{"windows device path", `  - device: '\\.\PhysicalDrive2'` + raid, ""},
		{"serial only", "  - serial: ABC123" + raid, ""},
		{"model only", "  - model: PERC H730P" + raid, ""},
		{"disk and serial", "  - device: PhysicalDrive2\n    serial: ABC123" + raid, ""},
		{"no key", "  - raid: {level: raid10, stripe_unit: 64KiB, disks: 4}\n", "want device"},
		{"bad name", "  - device: sdb" + raid, "PhysicalDriveN"},
		{"windows disk twice", "  - device: PhysicalDrive2" + raid + "  - device: PhysicalDrive2" + raid, "declared twice"},
		{"serial twice, any case", "  - serial: abc" + raid + "  - serial: ABC" + raid, "declared twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte("declared_devices:\n" + tc.yaml))
			switch {
			case tc.errHas == "" && err != nil:
				t.Errorf("Parse = %v, want valid", err)
			case tc.errHas != "" && (err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.errHas)):
				t.Errorf("Parse = %v, want an ErrInvalid containing %q", err, tc.errHas)
			}
		})
	}
}

func TestWindowsMountGlobs(t *testing.T) {
	for g, ok := range map[string]bool{"D:/": true, `D:\`: false, `D:\\`: true, "d:/SQL*/": true, "D:": false, "data": false} {
		_, err := Parse([]byte("include:\n  mount_points: ['" + g + "']\n"))
		if (err == nil) != ok {
			t.Errorf("include.mount_points %q: err = %v, want valid=%v", g, err, ok)
		}
	}
}

func TestWindowsExampleConfig(t *testing.T) {
	if _, err := Load("../../../deploy/windows/agent.yaml"); err != nil {
		t.Errorf("deploy/windows/agent.yaml: %v", err)
	}
}

// probes[].mount_point takes the same globs as the selectors: a Windows
// agent schedules probes by drive letter or mount folder.
func TestProbeMountPointGlobs(t *testing.T) {
	for _, tc := range []struct {
		glob string
		ok   bool
	}{
		{"/data", true},
		{"/data*", true},
		{"D:/", true},
		{"d:/", true},
		{"C:/MountPoints/*", true},
		{`D:\\`, true},
		{`D:\`, false},
		{"D:", false},
		{"data", false},
		{"/data/[", false},
	} {
		t.Run(tc.glob, func(t *testing.T) {
			_, err := Parse([]byte("probes: [{mount_point: '" + tc.glob + "', dir: 'D:/PlumblineProbe'}]\n"))
			if (err == nil) != tc.ok {
				t.Errorf("probes[0].mount_point %q: err = %v, want valid=%v", tc.glob, err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "mount_point") {
				t.Errorf("probes[0].mount_point %q: err = %v, want one naming mount_point", tc.glob, err)
			}
		})
	}
}
