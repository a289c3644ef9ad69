package vocab

import "strconv"

// ioSizes are the database I/O sizes a verdict carries a split fraction
// for (Alignment.split_fraction keys, the API's io_size_bytes, the
// exporter's io_size label, the store's per-size columns): 8 KiB pages and
// 64 KiB extents. Smallest first, each a whole number of KiB. Adding one:
// its entry here, and a migration adding its columns (see IOSizeKey).
var ioSizes = [...]uint32{8 << 10, 64 << 10}

// NumIOSizes is how many I/O sizes a verdict carries: the length of the
// per-size arrays ([NumIOSizes]float64) that hold one value per size, in
// IOSizes order.
const NumIOSizes = len(ioSizes)

// IOSizes lists the I/O sizes a verdict carries, smallest first.
func IOSizes() []uint32 { return append([]uint32(nil), ioSizes[:]...) }

// IOSize is the i-th I/O size of IOSizes (0 <= i < NumIOSizes).
func IOSize(i int) uint32 { return ioSizes[i] }

// IOSizeIndex is the position of size in IOSizes; false when a verdict
// does not carry it.
func IOSizeIndex(size uint32) (int, bool) {
	for i, s := range ioSizes {
		if s == size {
			return i, true
		}
	}
	return 0, false
}

// IOSizeKey names an I/O size in column, field and CSV names: its KiB and
// "k" ("8k" for 8192, "64k" for 65536) — split_fraction_8k in the store
// (one column per size and figure), the CSV and the summary.
func IOSizeKey(size uint32) string { return strconv.FormatUint(uint64(size>>10), 10) + "k" }

// IOSizeNames is IOSizes in decimal bytes ("8192", "65536").
func IOSizeNames() []string {
	out := make([]string, len(ioSizes))
	for i, s := range ioSizes {
		out[i] = strconv.FormatUint(uint64(s), 10)
	}
	return out
}

// Verdicts of the alignment rules on a volume.
const (
	Aligned    = "aligned"
	Misaligned = "misaligned"
	Unknown    = "unknown"
)

// Verdicts lists every verdict.
func Verdicts() []string { return []string{Aligned, Misaligned, Unknown} }

// Severities of a finding.
const (
	Critical = "critical"
	Warning  = "warning"
	Info     = "info"
)

// severities is the one ranking of severities, worst first.
var severities = [...]string{Critical, Warning, Info}

// Severities lists every severity, worst first.
func Severities() []string { return append([]string(nil), severities[:]...) }

// SeverityRank orders severities: Critical 3, Warning 2, Info 1, anything
// else (no finding, an unknown word) 0.
func SeverityRank(s string) int {
	for i, v := range severities {
		if v == s {
			return len(severities) - i
		}
	}
	return 0
}

// NoRAID is the RAID level of a volume with no RAID or striped layer.
const NoRAID = "none"

// raidLevels is the one list of RAID levels a volume is classed by;
// minDisks > 0 marks the levels an operator may declare for a hardware RAID
// device, with the fewest member disks each can have.
var raidLevels = [...]struct {
	level    string
	minDisks uint32
}{
	{NoRAID, 0},
	{"linear", 0},
	{"raid0", 2},
	{"raid1", 2},
	{"raid10", 4},
	{"raid5", 3},
	{"raid50", 6},
	{"raid6", 4},
	{"raid60", 8},
}

// RAIDLevels lists every RAID level a volume can be classed by, NoRAID first.
func RAIDLevels() []string {
	out := make([]string, len(raidLevels))
	for i, r := range raidLevels {
		out[i] = r.level
	}
	return out
}

// LayerRAIDLevels lists the levels a RAID or striped layer of a volume can
// carry: every level but NoRAID.
func LayerRAIDLevels() []string {
	var out []string
	for _, r := range raidLevels {
		if r.level != NoRAID {
			out = append(out, r.level)
		}
	}
	return out
}

// DeclarableRAIDLevels lists the levels a declared hardware RAID device may
// have.
func DeclarableRAIDLevels() []string {
	var out []string
	for _, r := range raidLevels {
		if r.minDisks > 0 {
			out = append(out, r.level)
		}
	}
	return out
}

// RAIDMinDisks is the fewest member disks a declarable level can have;
// false for a level that cannot be declared.
func RAIDMinDisks(level string) (uint32, bool) {
	for _, r := range raidLevels {
		if r.level == level && r.minDisks > 0 {
			return r.minDisks, true
		}
	}
	return 0, false
}
