package server

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/plumbline/plumbline/internal/mounts"
)

// mountPointOf is the mount point of the file system holding dir: the
// longest mount point in /proc/self/mountinfo that contains it; "/" when
// that cannot be read.
func mountPointOf(dir string) string {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "/"
	}
	mps, _ := mounts.MountPoints(b) // a line that does not parse names no mount point
	best := "/"
	for _, mp := range mps {
		if within(dir, mp) && len(mp) > len(best) {
			best = mp
		}
	}
	return best
}

// within reports whether path is mp or below it.
func within(path, mp string) bool {
	if mp == "/" {
		return strings.HasPrefix(path, "/")
	}
	return path == mp || strings.HasPrefix(path, mp+"/")
}
