package raidlab

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Preset is a member disk's service-time model: every operation takes
// Fixed (seek and controller overhead) plus a uniformly random rotational
// wait in [0, 2×AvgRotation) plus PerKiB for every KiB moved.
type Preset struct {
	Name        string
	Fixed       time.Duration
	AvgRotation time.Duration
	PerKiB      time.Duration
	Source      string // where the figures come from
}

// perKiB is the transfer time of one KiB at mbPerSec decimal MB/s.
func perKiB(mbPerSec float64) time.Duration {
	return time.Duration(1024 / (mbPerSec * 1e6) * float64(time.Second))
}

// presets are the named member models. The figures are published
// datasheet values; they are averages, so an 8 KiB random operation on
// sas15k averages 3.4 + 2.0 + 0.05 ≈ 5.5 ms (≈ 180 IOPS per member, the
// usual rule of thumb for 15K drives).
var presets = map[string]Preset{
	"sas15k": {
		Name: "sas15k", Fixed: 3400 * time.Microsecond, AvgRotation: 2 * time.Millisecond, PerKiB: perKiB(150),
		Source: "Seagate Cheetah 15K.7 SAS product manual: average read seek 3.4 ms, 15,000 rpm (2.0 ms average rotational latency), 122–204 MB/s sustained (150 MB/s used)",
	},
	"sata7k": {
		Name: "sata7k", Fixed: 8500 * time.Microsecond, AvgRotation: 4160 * time.Microsecond, PerKiB: perKiB(150),
		Source: "Seagate Constellation ES.3 / WD RE4 7,200 rpm SATA datasheets: average seek 8.5 ms, 4.16 ms average rotational latency, ~150 MB/s sustained",
	},
	"ssd": {
		Name: "ssd", Fixed: 80 * time.Microsecond, PerKiB: perKiB(500),
		Source: "Intel SSD DC S3610 (SATA) datasheet: 55 µs read / 66 µs write latency (80 µs used, QD1 with controller overhead), ~500 MB/s",
	},
	"nvme": {
		Name: "nvme", Fixed: 20 * time.Microsecond, PerKiB: perKiB(2000),
		Source: "Intel SSD DC P4610 (NVMe) datasheet: 77 µs read / 18 µs write latency (20 µs used), ~2–3 GB/s; below the FUSE round trip, so the emulator's own overhead dominates",
	},
	"fast": {
		Name: "fast", Fixed: 300 * time.Microsecond, AvgRotation: 100 * time.Microsecond, PerKiB: perKiB(1000),
		Source: "not a real disk: a short, still-dominant service time for quick tests (≈ 0.4 ms per 8 KiB op)",
	},
}

// LookupPreset returns the named preset.
func LookupPreset(name string) (Preset, error) {
	p, ok := presets[strings.ToLower(strings.TrimSpace(name))]
	if !ok {
		return Preset{}, fmt.Errorf("raidlab: unknown preset %q (want one of %s)", name, strings.Join(PresetNames(), ", "))
	}
	return p, nil
}

// PresetNames lists the presets, sorted.
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return slices.Clip(names)
}

// mean is the average service time of an operation of n bytes.
func (p Preset) mean(n int64) time.Duration {
	return p.Fixed + p.AvgRotation + time.Duration(float64(p.PerKiB)*float64(n)/1024)
}
