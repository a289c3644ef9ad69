package geometry

import (
	"bytes"
	"fmt"
	"strings"
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

// parseMountInfoLine parses one mountinfo line:
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// Fields 1-6 are fixed, then zero or more optional fields, a "-"
// separator, and fs type, source and super options.
func parseMountInfoLine(line string) (mountInfo, error) {
	f := strings.Fields(line)
	sep := -1
	for i := 6; i < len(f); i++ {
		if f[i] == "-" {
			sep = i
			break
		}
	}
	if len(f) < 7 || sep < 0 || len(f) < sep+3 {
		return mountInfo{}, fmt.Errorf("%q: too few fields", truncate(line, 200))
	}
	ma, mi, err := parseDevNumber(f[2])
	if err != nil {
		return mountInfo{}, err
	}
	m := mountInfo{
		ID:         f[0],
		Major:      ma,
		Minor:      mi,
		Root:       unescapeMount(f[3]),
		MountPoint: unescapeMount(f[4]),
		Options:    f[5],
		FSType:     f[sep+1],
		Source:     unescapeMount(f[sep+2]),
	}
	if len(f) > sep+3 {
		m.SuperOptions = f[sep+3]
	}
	return m, nil
}

// parseProcMounts parses /proc/mounts (the format of fstab(5)), which is
// all kernels before 2.6.26 have: "source mountpoint fstype options 0 0".
// It has no device numbers; the caller finds them by the source's name.
// Root is "/" (a bind mount cannot be told apart). Unparsable lines are
// returned in bad.
func parseProcMounts(b []byte) (mounts []mountInfo, bad []error) {
	for i, line := range bytes.Split(b, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) == 0 {
			continue
		}
		if len(f) < 4 {
			bad = append(bad, fmt.Errorf("mounts line %d: %q: too few fields", i+1, truncate(string(line), 200)))
			continue
		}
		mounts = append(mounts, mountInfo{
			ID:         fmt.Sprint(i + 1),
			Root:       "/",
			Source:     unescapeMount(f[0]),
			MountPoint: unescapeMount(f[1]),
			FSType:     f[2],
			Options:    f[3],
		})
	}
	return mounts, bad
}

// unescapeMount undoes the kernel's octal escapes (\040 for a space, \011,
// \012, \134) in mountinfo paths. A malformed escape is kept as is.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			v := (int(s[i+1]-'0') << 6) | (int(s[i+2]-'0') << 3) | int(s[i+3]-'0')
			if v < 256 {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

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
