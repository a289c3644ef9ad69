package geometry

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/plumbline/plumbline/internal/mounts"
)

// mountInfo is one line of /proc/<pid>/mountinfo (proc(5)).
type mountInfo struct {
	ID           string
	Major, Minor uint32
	Root         string // the mounted directory inside the file system
	MountPoint   string
	Options      string // per-mount options
	FSType       string
	Source       string
	SuperOptions string
	// Unresolved: a /proc/mounts source under /dev that names no block
	// device sysfs knows (Major and Minor are 0).
	Unresolved bool
}

// parseMountInfo parses a whole mountinfo file. A line it cannot parse is
// returned as an error in bad and does not stop the others.
func parseMountInfo(b []byte) (mounts []mountInfo, bad []error) {
	for i, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		m, err := parseMountInfoLine(string(line))
		if err != nil {
			bad = append(bad, fmt.Errorf("mountinfo line %d: %w", i+1, err))
			continue
		}
		mounts = append(mounts, m)
	}
	return mounts, bad
}

// parseMountInfoLine parses one mountinfo line (mounts.ParseLine) and
// its device number.
func parseMountInfoLine(line string) (mountInfo, error) {
	l, err := mounts.ParseLine(line)
	if err != nil {
		return mountInfo{}, err
	}
	ma, mi, err := parseDevNumber(l.Dev)
	if err != nil {
		return mountInfo{}, err
	}
	return mountInfo{
		ID: l.ID, Major: ma, Minor: mi, Root: l.Root, MountPoint: l.MountPoint,
		Options: l.Options, FSType: l.FSType, Source: l.Source, SuperOptions: l.SuperOptions,
	}, nil
}

// parseProcMounts parses /proc/mounts (the format of fstab(5)), which is
// all kernels before 2.6.26 have: "source mountpoint fstype options 0 0".
// It has no device numbers; the caller finds them by the source's name.
// Root is "/" (a bind mount cannot be told apart). Unparsable lines are
// returned in bad.
func parseProcMounts(b []byte) (out []mountInfo, bad []error) {
	for i, line := range bytes.Split(b, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) == 0 {
			continue
		}
		if len(f) < 4 {
			bad = append(bad, fmt.Errorf("mounts line %d: %q: too few fields", i+1, truncate(string(line), 200)))
			continue
		}
		out = append(out, mountInfo{
			ID:         fmt.Sprint(i + 1),
			Root:       "/",
			Source:     mounts.Unescape(f[0]),
			MountPoint: mounts.Unescape(f[1]),
			FSType:     f[2],
			Options:    f[3],
		})
	}
	return out, bad
}

// mountOption returns the value of key=value in a comma-separated option
// list, and whether it was there.
func mountOption(opts, key string) (string, bool) {
	for _, o := range strings.Split(opts, ",") {
		k, v, _ := strings.Cut(o, "=")
		if k == key {
			return v, true
		}
	}
	return "", false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
