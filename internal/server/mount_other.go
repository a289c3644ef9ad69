//go:build !linux

package server

import "path/filepath"

// mountPointOf is the root of dir's volume (C:\ on Windows, / elsewhere):
// the mount table is read on Linux only.
func mountPointOf(dir string) string {
	if v := filepath.VolumeName(dir); v != "" {
		return v + `\`
	}
	return "/"
}
