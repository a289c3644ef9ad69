package geometry

import "testing"

func TestWindowsKernel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		major, minor, build, ubr uint32
		hasUBR                   bool
		want                     string
	}{
		{10, 0, 20348, 2340, true, "10.0.20348.2340"},
		{10, 0, 17763, 0, false, "10.0.17763"},
		{6, 3, 9600, 0, true, "6.3.9600.0"},
		{0, 0, 0, 0, false, ""},
	} {
		if got := windowsKernel(tc.major, tc.minor, tc.build, tc.ubr, tc.hasUBR); got != tc.want {
			t.Errorf("windowsKernel(%d, %d, %d, %d, %v) = %q, want %q", tc.major, tc.minor, tc.build, tc.ubr, tc.hasUBR, got, tc.want)
		}
	}
	for in, want := range map[string]string{
		"3F0E3C7A-1B2C-4D5E-8F90-A1B2C3D4E5F6":    "3f0e3c7a-1b2c-4d5e-8f90-a1b2c3d4e5f6",
		" {3f0e3c7a-1b2c-4d5e-8f90-a1b2c3d4e5f6}": "3f0e3c7a-1b2c-4d5e-8f90-a1b2c3d4e5f6",
		"": "",
	} {
		if got := normalizeMachineGUID(in); got != want {
			t.Errorf("normalizeMachineGUID(%q) = %q, want %q", in, got, want)
		}
	}
}
