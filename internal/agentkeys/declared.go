package agentkeys

import (
	"fmt"
	"math/bits"
	"path"
	"strconv"
	"strings"

	"github.com/plumbline/plumbline/internal/bytesize"
	"github.com/plumbline/plumbline/internal/vocab"
)

// DeclaredDevice is one hardware array, declared by the operator.
// On Linux it is named by device (/dev/sdb, /dev/disk/by-id/...); on
// Windows by device (PhysicalDrive2), serial or model, and every key given
// must match the disk.
type DeclaredDevice struct {
	Device string       `yaml:"device,omitempty"`
	Serial string       `yaml:"serial,omitempty"`
	Model  string       `yaml:"model,omitempty"`
	RAID   DeclaredRAID `yaml:"raid,omitempty"`
}

// DeclaredRAID is a declared array's geometry.
type DeclaredRAID struct {
	Level      string        `yaml:"level,omitempty"`
	StripeUnit bytesize.Size `yaml:"stripe_unit,omitempty"`
	Disks      uint32        `yaml:"disks,omitempty"`
	// Spans is the number of RAID 5/6 spans of a raid50/raid60 array
	// (default 2); it sets the number of data disks.
	Spans uint32 `yaml:"spans,omitempty"`
}

// ValidateDeclared checks every declared device; the errors name the key,
// declared_devices[i].key, as the configuration file does.
func ValidateDeclared(devices []DeclaredDevice) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	seen := map[string]bool{}
	for i, d := range devices {
		where := fmt.Sprintf("declared_devices[%d]", i)
		_, windowsDisk := ParsePhysicalDrive(d.Device)
		switch {
		case d.Device == "" && d.Serial == "" && d.Model == "":
			add("%s: want device (/dev/sdb, or PhysicalDrive2 on Windows), serial or model", where)
		case d.Device == "" || windowsDisk:
		case !strings.HasPrefix(d.Device, "/dev/") || path.Clean(d.Device) != d.Device || strings.Contains(d.Device, ".."):
			add("%s.device %q: want a clean block device path under /dev/ (a /dev/disk/by-id link works too) or, on Windows, PhysicalDriveN", where, d.Device)
		}
		key := d.Device + "\x00" + strings.ToLower(strings.TrimSpace(d.Serial)) + "\x00" + strings.ToLower(strings.TrimSpace(d.Model))
		if seen[key] {
			add("%s (%s) is declared twice", where, declaredName(d))
		}
		seen[key] = true
		d.RAID.validate(where, add)
	}
	return errs
}

// validate checks an array's level, disks, spans and stripe unit.
func (r DeclaredRAID) validate(where string, add adder) {
	min, ok := vocab.RAIDMinDisks(r.Level)
	if !ok {
		add("%s.raid.level %q: want one of %s", where, r.Level, strings.Join(vocab.DeclarableRAIDLevels(), ", "))
		return
	}
	if r.Disks < min {
		add("%s.raid.disks %d: %s needs at least %d disks", where, r.Disks, r.Level, min)
	}
	if r.Level == "raid10" && r.Disks%2 != 0 {
		add("%s.raid.disks %d: raid10 needs an even number of disks", where, r.Disks)
	}
	if r.Spans != 0 && (r.Level != "raid50" && r.Level != "raid60" || r.Spans < 2 || r.Disks%r.Spans != 0) {
		add("%s.raid.spans %d: only for raid50/raid60, at least 2, and dividing disks (%d)", where, r.Spans, r.Disks)
	}
	su := uint64(r.StripeUnit)
	switch {
	case su == 0 && r.Level != "raid1":
		add("%s.raid.stripe_unit: required for %s (e.g. 64KiB)", where, r.Level)
	case su != 0 && (su < 512 || su > 1<<30 || bits.OnesCount64(su) != 1):
		add("%s.raid.stripe_unit %s: want a power of two from 512B to 1GiB", where, r.StripeUnit)
	}
}

// declaredName names a declared device in messages by the keys it has.
func declaredName(d DeclaredDevice) string {
	var parts []string
	for _, kv := range [][2]string{{"device", d.Device}, {"serial", d.Serial}, {"model", d.Model}} {
		if kv[1] != "" {
			parts = append(parts, fmt.Sprintf("%s %q", kv[0], kv[1]))
		}
	}
	return strings.Join(parts, ", ")
}

// ParsePhysicalDrive reads a Windows disk name: PhysicalDrive2,
// \\.\PhysicalDrive2 (any case). ok is false for anything else.
func ParsePhysicalDrive(s string) (number uint32, ok bool) {
	const prefix = "physicaldrive"
	t := strings.ToLower(s)
	t = strings.TrimPrefix(t, `\\.\`)
	t = strings.TrimPrefix(t, `\\?\`)
	if !strings.HasPrefix(t, prefix) {
		return 0, false
	}
	digits := t[len(prefix):]
	if digits == "" || len(digits) > 1 && digits[0] == '0' {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 32)
	if err != nil {
		return 0, false
	}
	return uint32(n), true
}
