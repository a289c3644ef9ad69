package mounts

import "testing"

func TestValidGlob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		glob string
		want bool
	}{
		{"/", true},
		{"/data*", true},
		{"/data/[", false},
		{"data", false},
		{"", false},
		{"D:/", true},
		{"d:/SQL*/", true},
		{"C:/MountPoints/*", true},
		{`D:\\`, true}, // native form, backslash escaped
		{`D:\`, false}, // a trailing escape is no pattern
		{"D:", false},  // relative to the drive's current directory
		{"D:data", false},
		{"1:/", false},
		{"*:/", false},
	} {
		if got := ValidGlob(tc.glob); got != tc.want {
			t.Errorf("ValidGlob(%q) = %v, want %v", tc.glob, got, tc.want)
		}
	}
}

func TestMatchGlob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		glob, mp string
		want     bool
	}{
		// Linux: path.Match as it is.
		{"/data*", "/data1", true},
		{"/data*", "/data1/x", false},
		{"/", "/", true},
		{"/data/", "/data", false},
		{"D:/", "/data", false},
		// Windows drive letters and mount folders (GetVolumePathNames
		// writes them with a trailing backslash).
		{"D:/", `D:\`, true},
		{"d:/", `D:\`, true},
		{"D:/", `d:\`, true},
		{"D:", `D:\`, true}, // matches; config refuses it as a glob
		{"D:/", `E:\`, false},
		{"[DE]:/", `E:\`, true},
		{"C:/MountPoints/*", `C:\MountPoints\Data\`, true},
		{"C:/MountPoints/*", `C:\MountPoints\Data\Logs\`, false},
		{"C:/MountPoints/*/", `C:\MountPoints\Data\`, true},
		{"C:/MountPoints/*", `C:\`, false},
		{`D:\\`, `D:\`, true},
		{`C:\\MountPoints\\*`, `C:\MountPoints\Data\Logs\`, true}, // native form: * also crosses backslashes; write globs with /
		{"/*", `D:\`, false},
	} {
		if got := MatchGlob(tc.glob, tc.mp); got != tc.want {
			t.Errorf("MatchGlob(%q, %q) = %v, want %v", tc.glob, tc.mp, got, tc.want)
		}
	}
}
