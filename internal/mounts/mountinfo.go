package mounts

import (
	"bytes"
	"fmt"
	"strings"
)

// Line is one line of /proc/<pid>/mountinfo (proc(5)), its paths
// unescaped.
type Line struct {
	ID string
	// Dev is the device number as written, MAJ:MIN.
	Dev          string
	Root         string // the mounted directory inside the file system
	MountPoint   string
	Options      string // per-mount options
	FSType       string
	Source       string
	SuperOptions string
}

// ParseLine parses one mountinfo line:
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// Fields 1-6 are fixed, then zero or more optional fields, a "-"
// separator, and fs type, source and super options.
func ParseLine(line string) (Line, error) {
	f := strings.Fields(line)
	sep := -1
	for i := 6; i < len(f); i++ {
		if f[i] == "-" {
			sep = i
			break
		}
	}
	if len(f) < 7 || sep < 0 || len(f) < sep+3 {
		return Line{}, fmt.Errorf("%q: too few fields", truncate(line, 200))
	}
	l := Line{
		ID:         f[0],
		Dev:        f[2],
		Root:       Unescape(f[3]),
		MountPoint: Unescape(f[4]),
		Options:    f[5],
		FSType:     f[sep+1],
		Source:     Unescape(f[sep+2]),
	}
	if len(f) > sep+3 {
		l.SuperOptions = f[sep+3]
	}
	return l, nil
}

// MountPoints returns the mount points listed in a mountinfo file, in
// file order. Lines that do not parse are skipped; bad says why (the
// server's dev mode finds the mount point of its data directory with it).
func MountPoints(mountinfo []byte) (mountPoints []string, bad []error) {
	for i, line := range bytes.Split(mountinfo, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		l, err := ParseLine(string(line))
		if err != nil {
			bad = append(bad, fmt.Errorf("mountinfo line %d: %w", i+1, err))
			continue
		}
		mountPoints = append(mountPoints, l.MountPoint)
	}
	return mountPoints, bad
}

// Unescape undoes the kernel's octal escapes (\040 for a space, \011,
// \012, \134) in mount table paths. A malformed escape is kept as is.
func Unescape(s string) string {
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

// truncate shortens s to n bytes for a message ("..." marks the cut).
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
