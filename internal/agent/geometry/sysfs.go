package geometry

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/plumbline/plumbline/internal/labels"
)

// errEmpty is returned for a sysfs file that holds nothing.
var errEmpty = errors.New("empty value")

// maxSysfsValue bounds the single-value sysfs files parsed here: they hold
// one number or one short word.
const maxSysfsValue = 4096

// parseSysfsUint parses a sysfs file holding one unsigned decimal number
// (queue/logical_block_size, start, size, md/chunk_size, ...).
func parseSysfsUint(b []byte) (uint64, error) {
	s, err := parseSysfsString(b)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %q: %w", s, err)
	}
	return n, nil
}

// parseSysfsUintPair parses an md attribute that holds one unsigned number,
// or during a reshape two: "new (old)" (md/raid_disks, md/chunk_size and
// md/layout while mdadm --grow runs). reshaping says the second was there.
func parseSysfsUintPair(b []byte) (cur, prev uint64, reshaping bool, err error) {
	s, err := parseSysfsString(b)
	if err != nil {
		return 0, 0, false, err
	}
	a, rest, pair := strings.Cut(s, " ")
	cur, err = strconv.ParseUint(a, 10, 64)
	if err != nil {
		return 0, 0, false, fmt.Errorf("parse %q: %w", s, err)
	}
	if !pair {
		return cur, 0, false, nil
	}
	inner, ok := strings.CutPrefix(rest, "(")
	if ok {
		inner, ok = strings.CutSuffix(inner, ")")
	}
	if !ok {
		return 0, 0, false, fmt.Errorf("parse %q: want N or \"NEW (OLD)\"", s)
	}
	prev, err = strconv.ParseUint(inner, 10, 64)
	if err != nil {
		return 0, 0, false, fmt.Errorf("parse %q: want N or \"NEW (OLD)\": %w", s, err)
	}
	return cur, prev, true, nil
}

// parseSysfsInt parses a sysfs file holding one signed decimal number
// (alignment_offset, which is -1 when the device cannot be aligned).
func parseSysfsInt(b []byte) (int64, error) {
	s, err := parseSysfsString(b)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %q: %w", s, err)
	}
	return n, nil
}

// parseSysfsString returns the value of a one-line sysfs file without the
// trailing newline and surrounding blanks.
func parseSysfsString(b []byte) (string, error) {
	if len(b) > maxSysfsValue {
		return "", fmt.Errorf("value of %d bytes is longer than %d", len(b), maxSysfsValue)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", errEmpty
	}
	if strings.ContainsAny(s, "\n\x00") {
		return "", fmt.Errorf("value %q spans more than one line", s)
	}
	// The server refuses a record holding text that is not printable
	// (labels.CheckText): such a value is unknown here, with the reason,
	// rather than the whole snapshot refused there.
	if err := labels.CheckText(s); err != nil {
		return "", fmt.Errorf("value %w", err)
	}
	return s, nil
}

// parseDevNumber parses a "MAJ:MIN" device number (sysfs dev files,
// mountinfo field 3).
func parseDevNumber(s string) (major, minor uint32, err error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return 0, 0, fmt.Errorf("device number %q: want MAJ:MIN", s)
	}
	ma, err := strconv.ParseUint(a, 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("device number %q: %w", s, err)
	}
	mi, err := strconv.ParseUint(b, 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("device number %q: %w", s, err)
	}
	return uint32(ma), uint32(mi), nil
}

// partitionNumberFromName is the number at the end of a partition's kernel
// name after its disk's name and an optional "p": sda12 on sda is 12,
// nvme0n1p2 on nvme0n1 is 2, mmcblk0p1 on mmcblk0 is 1.
func partitionNumberFromName(name, disk string) (uint32, bool) {
	rest, ok := strings.CutPrefix(name, disk)
	if !ok || rest == "" {
		return 0, false
	}
	rest = strings.TrimPrefix(rest, "p")
	if rest == "" || strings.Trim(rest, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseUint(rest, 10, 32)
	if err != nil || n == 0 {
		return 0, false
	}
	return uint32(n), true
}

// maxUeventKeys bounds the keys kept from one uevent file.
const maxUeventKeys = 64

// parseUevent parses a sysfs uevent file: KEY=value lines (MAJOR, MINOR,
// DEVNAME, DEVTYPE, PARTN, ...). Lines without '=' are skipped; the first
// value of a key wins.
func parseUevent(b []byte) map[string]string {
	if len(b) > maxSysfsValue {
		b = b[:maxSysfsValue]
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || k == "" {
			continue
		}
		if _, dup := out[k]; dup {
			continue
		}
		if len(out) >= maxUeventKeys {
			break
		}
		out[k] = v
	}
	return out
}
